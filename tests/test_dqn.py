"""DQN, baseline and fast: runs of every flag combination, CleanRL's smoke command, parity of the fast update with
CleanRL's update and of the compiled path with the eager one, the epsilon schedule, truncation handling, no
autograd history, and bad input. (Long runs with the memory check are in test_long_runs.py, the real loop's sync
watch on a GPU in test_gpu_loops_and_graphs.py, CleanRL's smoke command in test_cleanrl_commands.py too.)"""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from helpers.baseline_code import run, training_block
from helpers.envs import COUNTER_TRANSITIONS, first_env_transitions, record_adds, run_on_counter
from helpers.in_process import reachable_tensors, run_in_process
from helpers.parity import assert_all_close, assert_greedy, assert_params_close
from helpers.scripts import check_summary, load_script, read_metrics, run_main, run_script

BASE, FAST = "dqn", "dqn_torchcompile"
# A short run on CartPole that goes past learning_starts, so that the (compiled) update really runs: 200 updates,
# 8 target updates, episodes of ~20 steps.
SHORT = [
    "--total-timesteps",
    600,
    "--learning-starts",
    200,
    "--train-frequency",
    2,
    "--target-network-frequency",
    50,
    "--batch-size",
    32,
    "--buffer-size",
    1000,
    "--measure-burnin",
    2,
    "--log-interval",
    100,
]
OBS_DIM, N_ACTIONS, BATCH = 4, 2, 32  # CartPole's shapes and SHORT's batch: the in-process compile reuses the runs' cache
LR = 2.5e-4  # Args' learning rate: the parity tests' Adam steps are of this size


def warnings_of(proc):
    """The run's own warnings (the CPU fallback of --cuda aside, which every run on a CPU machine prints)."""
    return [
        line for line in proc.stderr.splitlines() if line.startswith("warning:") and not line.startswith("warning: --cuda:")
    ]


# ---------------------------------------------------------------- runs of every file and flag combination
RUNS = [(BASE, []), (FAST, []), (FAST, ["--cudagraphs"]), (FAST, ["--compile"]), (FAST, ["--compile", "--cudagraphs"])]


@pytest.mark.parametrize(
    "script,flags",
    [pytest.param(s, f, marks=[pytest.mark.compile] if "--compile" in f else []) for s, f in RUNS],
    ids=[f"{s}{''.join(f)}" for s, f in RUNS],
)
def test_short_run(script, flags, tmp_path):
    proc, summary = run_main(script, *SHORT, *flags, tmp_path=tmp_path)
    cuda = torch.cuda.is_available()
    check_summary(
        summary, script, "dqn", "CartPole-v1", 600, compile="--compile" in flags, cudagraphs="--cudagraphs" in flags and cuda
    )
    cache = summary["compile_cache"]  # a compiled run took its graphs from inductor's cache or compiled them anew
    assert (cache["hits"] + cache["misses"] > 0) is ("--compile" in flags), cache
    if "--cudagraphs" in flags and not cuda:
        assert warnings_of(proc) == ["warning: --cudagraphs: needs CUDA, running without CUDA graphs"]
    else:
        assert warnings_of(proc) == []
    rows = read_metrics(summary)
    assert [int(r["global_step"]) for r in rows] == list(range(100, 601, 100))
    assert list(rows[0])[:8] == [
        "global_step",
        "sps",
        "episodic_return",
        "episodic_length",
        "wall_time_s",
        "td_loss",
        "q_values",
        "epsilon",
    ]
    base = load_script(BASE)
    for r in rows:  # the row at steps_done=s logs the epsilon of the step s-1 (duration: 0.5 * 600 steps)
        assert float(r["epsilon"]) == pytest.approx(base.linear_schedule(1.0, 0.05, 300, int(r["global_step"]) - 1), abs=1e-6)
    assert rows[1]["td_loss"] == "" and rows[2]["td_loss"] != ""  # learning starts after step 200
    assert np.isfinite(float(rows[-1]["td_loss"])) and np.isfinite(float(rows[-1]["q_values"]))
    assert summary["episodes"] >= 5 and summary["episodic_return"] > 0


# ---------------------------------------------------------------- short runs are not errors
SMOKE = [  # CleanRL's own test command (steps 201-204 hold no multiple of --train-frequency 10: no update); a run that
    # never reaches learning_starts; a run that ends inside the burn-in (5 updates, at steps 210-250)
    (
        ["--learning-starts", 200, "--total-timesteps", 205],
        "warning: --total-timesteps 205: steps/s not measured (0 updates, --measure-burnin 10)",
    ),
    (["--total-timesteps", 300], "warning: --total-timesteps 300: steps/s not measured (0 updates, --measure-burnin 10)"),
    (
        ["--learning-starts", 200, "--total-timesteps", 260],
        "warning: --total-timesteps 260: steps/s not measured (5 updates, --measure-burnin 10)",
    ),
]


@pytest.mark.parametrize("script", [BASE, FAST])
@pytest.mark.parametrize("flags,warning", SMOKE, ids=["cleanrl-smoke", "before-learning-starts", "inside-burnin"])
def test_short_runs_warn_once_and_finish(script, flags, warning, tmp_path):
    proc, summary = run_main(script, *flags, tmp_path=tmp_path)
    assert proc.returncode == 0 and warnings_of(proc) == [warning], proc.stderr
    assert summary["status"] == "finished" and summary["sps"] is None and summary["warmup_s"] is None
    assert summary["global_step"] == flags[-1] and summary["algo"] == "dqn"


# ---------------------------------------------------------------- parity
def _make(module, device=torch.device("cpu"), **overrides):
    args = module.Args(**{"batch_size": BATCH, "buffer_size": 100, **overrides})
    return module.make_dqn(args, OBS_DIM, N_ACTIONS, device)


def _fill(agent, rows=50, seed=0):
    """The same transitions into an agent's buffer, through add() as the loop calls it (numpy in)."""
    rng = np.random.default_rng(seed)
    for _ in range(rows):
        obs, next_obs = rng.normal(size=(1, OBS_DIM)).astype(np.float32), rng.normal(size=(1, OBS_DIM)).astype(np.float32)
        agent.rb.add(obs, next_obs, rng.integers(0, N_ACTIONS, 1), rng.normal(size=1).astype(np.float32), rng.random(1) < 0.3)


def _copy_params(src, dst):
    dst.learned["q_network"].load_state_dict(src.learned["q_network"].state_dict())
    dst.learned["target_network"].load_state_dict(src.learned["target_network"].state_dict())


def _state(agent):
    return [
        t.detach().clone() for t in [*agent.learned["q_network"].parameters(), *agent.learned["target_network"].parameters()]
    ]


def _steps(agent, n=3):
    """n updates as the loop calls them, a target update after the second; the outputs of each update."""
    outs = []
    for i in range(n):
        torch.manual_seed(100 + i)
        outs += [o.detach().clone() for o in agent.update().values()]
        if i == 1:
            agent.update_target()
    return outs


def _shaken_greedy(src, dst, device="cpu"):
    """Shake src's Q-network (so that both actions win somewhere), copy it into dst; return observations as the loop
    feeds them (numpy) and the shaken Q-network's values on them."""
    with torch.no_grad():
        torch._foreach_add_(
            list(src.learned["q_network"].parameters()), [torch.randn_like(p) for p in src.learned["q_network"].parameters()]
        )
    _copy_params(src, dst)
    obs = np.random.default_rng(1).normal(size=(64, OBS_DIM)).astype(np.float32)
    with torch.no_grad():
        q_values = src.learned["q_network"](torch.from_numpy(obs).to(device))
    assert 0 < q_values.argmax(1).sum() < len(obs)  # both actions occur
    return obs, q_values


def test_fast_update_equals_cleanrl_update():
    """The fast update (device buffer, functional forward, fused Adam, one-call update, foreach target copy) computes
    what the baseline's CleanRL update computes, step for step, on the same batch from the same parameters."""
    base = load_script(BASE)
    torch.manual_seed(0)
    agent = _make(load_script(FAST))
    _fill(agent)
    q_network, target_network = base.QNetwork(OBS_DIM, N_ACTIONS), base.QNetwork(OBS_DIM, N_ACTIONS)
    q_network.load_state_dict(agent.learned["q_network"].state_dict())
    target_network.load_state_dict(q_network.state_dict())
    optimizer = torch.optim.Adam(q_network.parameters(), lr=base.Args().learning_rate)
    # the baseline's own learning block (main()'s `if global_step > args.learning_starts:`): an update on every step,
    # the target (tau 1: it becomes the online network) on global step 2 only
    args = base.Args(learning_starts=0, train_frequency=1, target_network_frequency=2, tau=1.0)
    names = dict(args=args, q_network=q_network, target_network=target_network, optimizer=optimizer)
    names.update(run=SimpleNamespace(log=lambda values: None))
    got, expected = [], []
    for i in range(3):
        torch.manual_seed(100 + i)
        b = agent.rb.sample(BATCH)  # the batch the update draws with this seed
        rows = [b["obs"], b["actions"].long().unsqueeze(1), b["next_obs"], b["rewards"][:, None], b["dones"][:, None]]
        rb = SimpleNamespace(sample=lambda batch_size: rows)  # as the baseline's buffer samples them
        scope = run(training_block(BASE), base, **names, rb=rb, global_step=i + 1)
        expected += [scope["loss"].detach(), scope["old_val"].detach().mean()]
        torch.manual_seed(100 + i)
        got += [t.clone() for t in agent.update().values()]
        if i == 1:
            agent.update_target()
    assert_all_close(got, expected, "losses")
    assert_params_close(
        _state(agent),
        [t.detach() for t in [*q_network.parameters(), *target_network.parameters()]],
        "parameters",
        max_lr=LR,
    )


def test_soft_target_update_is_cleanrls_formula():
    agent = _make(load_script(FAST), tau=0.3)
    with torch.no_grad():
        for p in agent.learned["q_network"].parameters():
            p.add_(1.0)
    online, target = _state(agent)[:6], _state(agent)[6:]
    agent.update_target()
    assert_all_close(_state(agent)[6:], [0.3 * p + 0.7 * t for p, t in zip(online, target)], "lerp", rtol=1e-6, atol=1e-6)


def _no_history(agent):
    """Every tensor the agent keeps across steps is free of autograd history; targets and storage need no grad."""
    tensors = reachable_tensors({"dqn": agent})
    paths = " ".join(p for p, _ in tensors)
    assert "optimizer" in paths and ".state[" in paths and "storage" in paths, paths
    assert not [p for p, t in tensors if t.grad_fn is not None]
    assert not [p for p, t in tensors if t.requires_grad and ("target" in p or ".state[" in p or ".rb." in p)]


@pytest.mark.compile
@pytest.mark.parametrize("mode", ["default", "max-autotune-no-cudagraphs"])  # each --compile-mode computes what eager does
def test_compiled_update_and_policy_equal_eager(mode, inductor_eager_rng):
    module = load_script(FAST)
    torch.manual_seed(0)
    eager, compiled = _make(module), _make(module, compile=True, compile_mode=mode)
    _copy_params(eager, compiled)
    for agent in (eager, compiled):
        _fill(agent)
    assert_all_close(_steps(compiled), _steps(eager), "update outputs")
    assert_params_close(_state(compiled), _state(eager), "parameters", max_lr=LR)
    moved = _state(eager)
    assert_all_close(_steps(compiled), _steps(eager), "update outputs, later steps")
    assert_params_close(_state(compiled), _state(eager), "parameters, later steps", max_lr=LR)
    assert max((a - b).abs().max() for a, b in zip(_state(eager)[:6], moved[:6])) > 0  # (they moved)
    obs, q_values = _shaken_greedy(eager, compiled)  # the greedy policy: the arg-max of the Q-network
    for agent in (eager, compiled):
        assert_greedy(agent.policy(torch.from_numpy(obs).to("cpu", non_blocking=True)), q_values, "greedy policy")
    _no_history(compiled)


def test_no_autograd_history_in_kept_tensors():
    for tau in (1.0, 0.5):  # the copy and the lerp target updates
        agent = _make(load_script(FAST), tau=tau)
        _fill(agent)
        for _ in range(3):
            agent.update()
            agent.update_target()
            agent.policy(torch.zeros(1, OBS_DIM))
        _no_history(agent)


# ---------------------------------------------------------------- acting: the epsilon schedule, random and greedy steps
@pytest.mark.parametrize("num_envs", [1, 3])
def test_the_fast_loop_acts_as_the_baseline_on_cleanrls_schedule(num_envs, tmp_path, monkeypatch):
    """Both files' real loops, before learning starts (the networks stay as seeded): epsilon is CleanRL's
    linear_schedule at every step, from the first to after its end, and the fast file sends the env the baseline's
    actions step for step, the random ones and the greedy ones."""
    import gymnasium as gym

    flags = [
        "--num-envs",
        num_envs,
        "--total-timesteps",
        90 * num_envs,
        "--exploration-fraction",
        0.5,
        "--start-e",
        0.9,
        "--end-e",
        0.1,
        "--learning-starts",
        10**6,
        "--log-interval",
        1,
        "--no-cuda",
    ]
    step, runs = gym.vector.SyncVectorEnv.step, {}
    for script in (BASE, FAST):
        sent = []
        monkeypatch.setattr(
            gym.vector.SyncVectorEnv, "step", lambda self, actions: sent.append(actions.copy()) or step(self, actions)
        )
        (tmp_path / script).mkdir()
        run_in_process(script, *flags, tmp_path=tmp_path / script, monkeypatch=monkeypatch)
        rows = read_metrics({"_run_dir": next((tmp_path / script / "runs").iterdir())})
        runs[script] = np.stack(sent), [(int(r["global_step"]), float(r["epsilon"])) for r in rows]
    base = load_script(BASE)
    steps, epsilons = zip(*runs[FAST][1])
    assert list(steps) == list(range(num_envs, 90 * num_envs + 1, num_envs))  # a row per loop step: every epsilon seen
    # the row at steps_done logs the epsilon of the loop step that began at steps_done - num_envs
    assert list(epsilons) == pytest.approx(
        [base.linear_schedule(0.9, 0.1, 45 * num_envs, s - num_envs) for s in steps], abs=1e-12
    )
    assert epsilons[0] == pytest.approx(0.9) and epsilons[-1] == pytest.approx(0.1)
    assert runs[FAST][1] == runs[BASE][1]
    assert runs[FAST][0].shape == (90, num_envs) and np.array_equal(runs[FAST][0], runs[BASE][0])


# ---------------------------------------------------------------- truncation and termination
@pytest.mark.parametrize("script", [BASE, FAST])
def test_replay_buffer_stores_true_final_obs_and_termination_mask(script, tmp_path, monkeypatch):
    """Drive the script's own main loop on a hand-made environment: a truncation must store the true final
    observation with done=0 (so it bootstraps), a termination done=1, and the reset observation must not leak."""
    import gymnasium as gym

    module = load_script(script)
    added = record_adds(monkeypatch, module.ReplayBuffer)
    run_on_counter(module, gym.spaces.Discrete(2), tmp_path, train_frequency=1)
    assert first_env_transitions(added)[: len(COUNTER_TRANSITIONS)] == COUNTER_TRANSITIONS
    rb = added[0][0]  # and the buffer holds those rows
    if script == FAST:
        rows = rb.storage[:7]  # obs | action | next_obs | reward | termination
        obs, next_obs, rewards, dones = rows[:, :2], rows[:, 3:5], rows[:, -2], rows[:, -1]
    else:
        obs, next_obs, rewards, dones = (
            torch.as_tensor(x[:7]) for x in (rb.observations, rb.next_observations, rb.rewards, rb.dones)
        )
    assert next_obs[2].tolist() == [0, 3] and obs[3].tolist() == [1, 0]
    assert dones.tolist() == [0, 0, 0, 0, 0, 0, 1] and rewards.tolist() == [1, 2, 3, 1, 2, 3, 4]


def test_device_buffer_wraps_around_and_samples_only_filled_rows():
    module = load_script(FAST)
    rb = module.ReplayBuffer(5, 1, torch.device("cpu"))
    for step in range(3):  # 2 envs a step: 6 rows into 5 slots
        v = np.array([[2 * step], [2 * step + 1]], np.float32)
        rb.add(v, v + 100, np.array([0, 1]), v[:, 0], np.zeros(2, bool))
        assert rb.count.item() == min(2 * step + 2, 5)
    assert rb.full and rb.pos == 1
    assert rb.storage[:, 0].tolist() == [5, 1, 2, 3, 4]  # row 0 overwritten by the 6th transition
    assert rb.storage[:, 1].tolist() == [1, 1, 0, 1, 0]  # the actions column, after the observation's
    fresh = module.ReplayBuffer(100, 1, torch.device("cpu"))
    fresh.add(
        np.ones((2, 1), np.float32), np.ones((2, 1), np.float32), np.array([1, 1]), np.ones(2, np.float32), np.zeros(2, bool)
    )
    assert (fresh.sample(256)["obs"][:, 0] == 1).all()  # never the zero rows beyond what was added
    fresh.add(
        2 * np.ones((1, 1), np.float32), np.ones((1, 1), np.float32), np.array([1]), np.ones(1, np.float32), np.zeros(1, bool)
    )
    assert set(fresh.sample(256)["obs"][:, 0].tolist()) == {1.0, 2.0}


# ---------------------------------------------------------------- bad input
BAD = [
    (dict(env_id="NoSuchEnv-v9"), "--env-id", "an unknown environment"),
    (dict(env_id="Pendulum-v1"), "--env-id", "Discrete actions"),
    (dict(env_id="FrozenLake-v1"), "--env-id", "flat Box"),
    (dict(buffer_size=100, batch_size=128), "--buffer-size", "must be at least --batch-size (128), got 100"),
    (dict(learning_starts=-1), "--learning-starts", "[0, inf)"),
    (dict(total_timesteps=0), "--total-timesteps", "[1, inf)"),
    (dict(num_envs=0), "--num-envs", "[1, inf)"),
    (dict(train_frequency=0), "--train-frequency", "[1, inf)"),
    (dict(target_network_frequency=-5), "--target-network-frequency", "[1, inf)"),
    (dict(measure_burnin=-1), "--measure-burnin", "[0, inf)"),
    (dict(exploration_fraction=0.0), "--exploration-fraction", "(0, 1]"),
    (dict(gamma=1.5), "--gamma", "[0, 1]"),
    (dict(learning_rate=float("nan")), "--learning-rate", "(0, inf)"),
    (dict(learning_rate=-1e-3), "--learning-rate", "(0, inf)"),
    (dict(seed=-1), "--seed", "[0, 2**31)"),
    (dict(start_e=1.5), "--start-e", "[0, 1]"),
    (dict(tau=0.0), "--tau", "(0, 1]"),
]


@pytest.mark.parametrize("script", [BASE, FAST])
def test_bad_input_fails_with_one_line(script, tmp_path, capsys):
    module = load_script(script)
    for overrides, flag, words in BAD:  # check_args, in this process: every kind
        with pytest.raises(SystemExit) as exit:
            module.check_args(module.Args(**overrides))
        assert str(exit.value.code).startswith(f"error: {flag}: ") and words in str(exit.value.code), exit.value.code
        assert "\n" not in str(exit.value.code) and capsys.readouterr().err == ""  # one line, and no warning before it
    # and from the command line: the exit status, stderr, nothing written
    proc, _ = run_script(script, "--env-id", "Pendulum-v1", tmp_path=tmp_path, expect_ok=False, timeout=120)
    lines = [line for line in proc.stderr.strip().splitlines() if line.startswith("error:")]
    assert proc.returncode != 0 and len(lines) == 1 and lines[0].startswith("error: --env-id: "), proc.stderr[-800:]
    assert not (tmp_path / "runs").exists()  # failed before any work


# ---------------------------------------------------------------- GPU: CUDA graphs and host-device syncs
@pytest.mark.gpu
@pytest.mark.parametrize(
    "flags",
    [
        pytest.param(dict(cudagraphs=True), id="cudagraphs"),
        pytest.param(dict(compile=True, cudagraphs=True), id="compile-cudagraphs", marks=pytest.mark.compile),
        pytest.param(dict(compile=True, compile_mode="reduce-overhead"), id="reduce-overhead", marks=pytest.mark.compile),
        pytest.param(dict(compile=True, compile_mode="max-autotune"), id="max-autotune", marks=pytest.mark.compile),
    ],
)
def test_cudagraph_update_and_policy_equal_eager_on_gpu(flags, inductor_eager_rng):
    """tensordict's graphs, and inductor's own (--compile-mode reduce-overhead / max-autotune), compute what eager does."""
    module = load_script(FAST)
    device = torch.device("cuda")
    torch.manual_seed(0)
    eager, graphed = _make(module, device), _make(module, device, **flags)
    _copy_params(eager, graphed)
    for agent in (eager, graphed):
        _fill(agent)
    # 5 updates: the first ones warm up (and compile) and capture, the last ones replay the graph
    assert_all_close(_steps(graphed, n=5), _steps(eager, n=5), "update outputs", rtol=1e-3, atol=1e-4)
    assert_params_close(_state(graphed), _state(eager), "parameters", max_lr=LR, steps=5)
    obs, q_values = _shaken_greedy(eager, graphed, device)
    for _ in range(6):  # warm-up (and compilation), capture, replays
        assert_greedy(graphed.policy(torch.from_numpy(obs).to(device, non_blocking=True)), q_values, "graphed policy")


@pytest.mark.gpu
@pytest.mark.parametrize(
    "flags",
    [
        pytest.param({}, id="eager"),
        pytest.param({"cudagraphs": True}, id="graphs"),
        pytest.param({"compile": True, "cudagraphs": True}, id="compile-graphs", marks=pytest.mark.compile),
        pytest.param({"compile": True, "compile_mode": "reduce-overhead"}, id="reduce-overhead", marks=pytest.mark.compile),
    ],
)
def test_no_host_device_sync_in_the_loop_step_on_gpu(flags):
    """An acting step fed a numpy observation exactly as the loop feeds it, a buffer add, an update and a target
    update make no host-device sync, up to the action the env needs."""
    module = load_script(FAST)
    device = torch.device("cuda")
    agent = module.make_dqn(module.Args(batch_size=BATCH, buffer_size=100, **flags), OBS_DIM, N_ACTIONS, device)
    _fill(agent)
    obs = np.random.default_rng(0).normal(size=(1, OBS_DIM)).astype(np.float32)

    def step():
        actions = agent.policy(torch.from_numpy(obs).to(device, non_blocking=True))
        agent.rb.add(obs, obs, np.array([1]), np.ones(1, np.float32), np.zeros(1, bool))
        agent.update()
        agent.update_target()
        return actions

    for _ in range(5):  # warm-up, compilation and capture may sync
        step()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            actions = step()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert actions.cpu().numpy().shape == (1,)  # the one sync: the env needs the action


@pytest.mark.gpu
@pytest.mark.parametrize(
    "flags",
    [
        pytest.param({"cudagraphs": True}, id="cudagraphs"),
        pytest.param({"compile": True, "cudagraphs": True}, id="compile-cudagraphs", marks=pytest.mark.compile),
        pytest.param({"compile": True, "compile_mode": "reduce-overhead"}, id="reduce-overhead", marks=pytest.mark.compile),
    ],
)
def test_graphs_draw_fresh_random_numbers_on_gpu(flags):
    """A replayed graph must not replay frozen draws: the update's sampled indices are new on every call, with the
    eager code's mean and spread. (The policy draws nothing: the coin and the random actions are the host's.)"""
    module = load_script(FAST)
    device, n = torch.device("cuda"), 256
    out = []
    for f in [{}, flags]:  # eager, then graphed, from the same parameters and the same buffer
        torch.manual_seed(0)
        agent = module.make_dqn(module.Args(batch_size=BATCH, buffer_size=100, **f), OBS_DIM, N_ACTIONS, device)
        _fill(agent)
        kept = [t.detach().clone() for t in agent.learned["q_network"].parameters()]

        def update():  # the parameters put back before each call: the outputs vary only with the sampled batch
            with torch.no_grad():
                torch._foreach_copy_(list(agent.learned["q_network"].parameters()), kept)
            return agent.update()

        x = torch.stack([torch.stack(list(update().values())).double() for _ in range(n)]).cpu()
        assert (x[1:] != x[:-1]).any(1).float().mean() > 0.9, "calls repeat the same draws"
        out.append(x)
    eager, graphed = out
    se = ((graphed.var(0) + eager.var(0)) / n).sqrt()
    assert ((graphed.mean(0) - eager.mean(0)).abs() <= 6 * se + 1e-6).all(), (graphed.mean(0), eager.mean(0))
