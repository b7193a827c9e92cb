"""SAC and TD3, baseline and fast: runs of every flag combination, parity of the fast update with CleanRL's update
and of the compiled path with the eager one, truncation handling, and bad input."""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import check_summary, load_script, read_metrics, run_script

# A short run that goes past learning_starts, so that the (compiled) updates really run.
SHORT = [
    "--total-timesteps",
    260,
    "--learning-starts",
    200,
    "--batch-size",
    32,
    "--buffer-size",
    1000,
    "--measure-burnin",
    2,
    "--log-interval",
    20,
]
ALGOS = {"sac": "sac_continuous_action", "td3": "td3_continuous_action"}
OBS_DIM, ACTION_DIM, BATCH = 5, 3, 16


# ---------------------------------------------------------------- runs of every file and flag combination
RUNS = [  # (algo, fast?, flags, env)
    ("sac", False, [], "HalfCheetah-v4"),
    ("sac", True, [], "HalfCheetah-v4"),
    ("sac", True, ["--cudagraphs"], "Pendulum-v1"),
    ("sac", True, ["--compile"], "Pendulum-v1"),
    ("sac", True, ["--compile", "--cudagraphs", "--no-autotune"], "Pendulum-v1"),  # LeanRL crashes with --no-autotune
    ("td3", False, [], "HalfCheetah-v4"),
    ("td3", True, [], "HalfCheetah-v4"),
    ("td3", True, ["--cudagraphs"], "Pendulum-v1"),
    ("td3", True, ["--compile"], "Pendulum-v1"),
    ("td3", True, ["--compile", "--cudagraphs"], "Pendulum-v1"),
]


@pytest.mark.parametrize(
    "algo,fast,flags,env_id", RUNS, ids=[f"{a}-{'fast' if f else 'base'}{''.join(fl)}" for a, f, fl, _ in RUNS]
)
def test_short_run(algo, fast, flags, env_id, tmp_path):
    script = ALGOS[algo] + ("_torchcompile" if fast else "")
    proc, summary = run_script(script, "--env-id", env_id, *SHORT, *flags, tmp_path=tmp_path)
    cuda = torch.cuda.is_available()
    check_summary(
        summary, script, algo, env_id, 260, compile="--compile" in flags, cudagraphs="--cudagraphs" in flags and cuda
    )
    if "--cudagraphs" in flags and not cuda:
        assert proc.stderr.count("warning: --cudagraphs") == 1  # one warning, and the run goes on without graphs
    rows = read_metrics(summary)
    assert [int(r["global_step"]) for r in rows] == list(range(20, 261, 20))
    last = rows[-1]
    assert last["qf1_loss"] and np.isfinite(float(last["qf1_loss"])) and np.isfinite(float(last["actor_loss"]))
    if algo == "sac":
        assert float(last["alpha"]) == pytest.approx(0.2) if "--no-autotune" in flags else float(last["alpha"]) < 1.0
        assert (last["alpha_loss"] == "") == ("--no-autotune" in flags)
    # episodes of 200 steps (Pendulum) finish within the run; HalfCheetah's 1000 do not
    assert (summary["episodes"] >= 1) == (env_id == "Pendulum-v1")
    assert summary["args"]["env_id"] == env_id


# ---------------------------------------------------------------- parity
def _batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    obs, next_obs = torch.randn(BATCH, OBS_DIM, generator=g), torch.randn(BATCH, OBS_DIM, generator=g)
    actions = torch.rand(BATCH, ACTION_DIM, generator=g) * 2 - 1
    rewards = torch.randn(BATCH, generator=g)
    dones = (torch.rand(BATCH, generator=g) < 0.3).float()
    return torch.cat([obs, next_obs, actions, rewards[:, None], dones[:, None]], 1)


def _make(module, algo, compile, **overrides):
    args = module.Args(compile=compile, **overrides)
    low, high = -2 * np.ones(ACTION_DIM, np.float32), 2 * np.ones(ACTION_DIM, np.float32)  # a scale of 2, as Pendulum
    make = module.make_sac if algo == "sac" else module.make_td3
    return make(args, OBS_DIM, ACTION_DIM, low, high, torch.device("cpu"))


def _copy_params(src, dst, algo):
    with torch.no_grad():
        dst.actor.load_state_dict(src.actor.state_dict())
        for name in src.q_params:
            dst.q_params[name].copy_(src.q_params[name])
            dst.q_target[name].copy_(src.q_target[name])
        if algo == "td3":
            dst.target_actor.load_state_dict(src.target_actor.state_dict())


def _state(agent, algo):
    """Every learned tensor of an agent, by name."""
    state = {f"actor.{k}": v for k, v in agent.actor.state_dict().items()}
    state.update({f"q.{k}": v for k, v in agent.q_params.items()})
    state.update({f"q_target.{k}": v for k, v in agent.q_target.items()})
    if algo == "sac" and hasattr(agent, "log_alpha"):
        state["log_alpha"] = agent.log_alpha
    if algo == "td3":
        state.update({f"target_actor.{k}": v for k, v in agent.target_actor.state_dict().items()})
    return {k: v.detach().clone() for k, v in state.items()}


def _steps(agent, algo, batch, n=3):
    """n update steps as the training loop does them (critic, actor(s), target); the outputs of each call."""
    outs = []
    for i in range(n):
        torch.manual_seed(100 + i)
        critic = agent.update_critic(batch)  # as the baseline step returns them: the Q values' means, then the losses
        outs += [
            torch.stack([critic["qf1_values"], critic["qf2_values"]]),
            torch.stack([critic["qf1_loss"], critic["qf2_loss"]]),
        ]
        assert critic["qf_loss"] == pytest.approx(critic["qf1_loss"] / 2 + critic["qf2_loss"] / 2)
        for _ in range(2 if algo == "sac" else 1):
            outs += list(agent.update_actor(batch).values())  # actor_loss (and SAC's alpha_loss, with autotune)
        if algo == "sac":
            agent.update_target()
    return [o.detach().clone() for o in outs]


def _assert_close(a, b, what, rtol=1e-4, atol=1e-5):
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")


def _assert_params_close(a, b, what, steps=3, max_lr=1e-3):
    """Adam divides each gradient by its running RMS: where a gradient is ~0, float reordering between two kernels
    can move that element by up to lr per step in either direction. So: every element within Adam's largest
    possible drift, and all but a few (< 1%) equal to float precision; a wrong update fails the second."""
    for x, y in zip(a, b, strict=True):
        diff = (x - y).abs()
        assert diff.max() <= 2 * steps * max_lr, f"{what}: max difference {diff.max():.2e}"
        loose = (diff > 1e-5 + 1e-4 * y.abs()).float().mean().item()
        assert loose < 0.01, f"{what}: {loose:.1%} of the elements differ"


@pytest.fixture(scope="module")
def inductor_eager_rng():
    # compiled code draws its random numbers like eager code does, so the two paths can be compared exactly
    import torch._inductor.config as cfg

    old, cfg.fallback_random = cfg.fallback_random, True
    yield
    cfg.fallback_random = old


@pytest.mark.compile
@pytest.mark.parametrize("algo,overrides", [("sac", {}), ("sac", {"autotune": False}), ("td3", {})])
def test_compiled_update_and_policy_equal_eager(algo, overrides, inductor_eager_rng):
    module = load_script(ALGOS[algo] + "_torchcompile")
    torch.manual_seed(0)
    eager = _make(module, algo, compile=False, **overrides)
    compiled = _make(module, algo, compile=True, **overrides)
    _copy_params(eager, compiled, algo)
    batch = _batch()
    _assert_close(_steps(compiled, algo, batch), _steps(eager, algo, batch), "losses")
    new_eager, new_compiled = _state(eager, algo), _state(compiled, algo)
    assert new_eager.keys() == new_compiled.keys()
    _assert_params_close(list(new_compiled.values()), list(new_eager.values()), "new parameters")
    _copy_params(eager, compiled, algo)  # the policy from the same parameters
    obs = torch.randn(4, OBS_DIM)
    outs = []
    for agent in (eager, compiled):
        torch.manual_seed(7)
        outs.append(list(agent.policy(obs)))  # the sampled action and the deterministic one
    _assert_close(outs[1], outs[0], "policy")
    assert outs[0][0].abs().max() <= 2.0 and outs[0][1].abs().max() <= 2.0  # inside the action bounds


def _baseline_sac_step(base, nets, batch, i, gamma=0.99, tau=0.005):
    """CleanRL's SAC update as the baseline script writes it, on the baseline's own networks."""
    actor, qf1, qf2, qf1_t, qf2_t, q_opt, a_opt, log_alpha, al_opt = nets
    o, no, a, r, d = (
        batch[:, :OBS_DIM],
        batch[:, OBS_DIM : 2 * OBS_DIM],
        batch[:, 2 * OBS_DIM : -2],
        batch[:, -2],
        batch[:, -1],
    )
    torch.manual_seed(100 + i)
    alpha = log_alpha.exp().item()
    with torch.no_grad():
        na, nlp, _ = actor.get_action(no)
        target = r + (1 - d) * gamma * (torch.min(qf1_t(no, na), qf2_t(no, na)) - alpha * nlp).view(-1)
    q1, q2 = qf1(o, a).view(-1), qf2(o, a).view(-1)
    l1, l2 = F.mse_loss(q1, target), F.mse_loss(q2, target)
    q_opt.zero_grad()
    (l1 + l2).backward()
    q_opt.step()
    outs = [torch.stack([q1.mean(), q2.mean()]), torch.stack([l1, l2])]
    for _ in range(2):
        pi, lp, _ = actor.get_action(o)
        actor_loss = (alpha * lp - torch.min(qf1(o, pi), qf2(o, pi))).mean()
        a_opt.zero_grad()
        actor_loss.backward()
        a_opt.step()
        with torch.no_grad():
            _, lp, _ = actor.get_action(o)
        alpha_loss = (-log_alpha.exp() * (lp - ACTION_DIM)).mean()
        al_opt.zero_grad()
        alpha_loss.backward()
        al_opt.step()
        alpha = log_alpha.exp().item()
        outs += [actor_loss, alpha_loss]
    for net, net_t in ((qf1, qf1_t), (qf2, qf2_t)):
        for p, pt in zip(net.parameters(), net_t.parameters()):
            pt.data.copy_(tau * p.data + (1 - tau) * pt.data)
    return [x.detach().clone() for x in outs]


def _baseline_td3_step(base, nets, batch, i, gamma=0.99, tau=0.005, policy_noise=0.2, noise_clip=0.5):
    """CleanRL's TD3 update (policy_frequency 1 here) as the baseline script writes it."""
    actor, actor_t, qf1, qf2, qf1_t, qf2_t, q_opt, a_opt = nets
    o, no, a, r, d = (
        batch[:, :OBS_DIM],
        batch[:, OBS_DIM : 2 * OBS_DIM],
        batch[:, 2 * OBS_DIM : -2],
        batch[:, -2],
        batch[:, -1],
    )
    torch.manual_seed(100 + i)
    with torch.no_grad():
        noise = (torch.randn_like(a) * policy_noise).clamp(-noise_clip, noise_clip) * actor_t.action_scale
        na = (actor_t(no) + noise).clamp(-2.0, 2.0)
        target = r + (1 - d) * gamma * torch.min(qf1_t(no, na), qf2_t(no, na)).view(-1)
    q1, q2 = qf1(o, a).view(-1), qf2(o, a).view(-1)
    l1, l2 = F.mse_loss(q1, target), F.mse_loss(q2, target)
    q_opt.zero_grad()
    (l1 + l2).backward()
    q_opt.step()
    actor_loss = -qf1(o, actor(o)).mean()
    a_opt.zero_grad()
    actor_loss.backward()
    a_opt.step()
    for net, net_t in ((actor, actor_t), (qf1, qf1_t), (qf2, qf2_t)):
        for p, pt in zip(net.parameters(), net_t.parameters()):
            pt.data.copy_(tau * p.data + (1 - tau) * pt.data)
    return [x.detach().clone() for x in (torch.stack([q1.mean(), q2.mean()]), torch.stack([l1, l2]), actor_loss)]


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_fast_update_equals_cleanrl_update(algo):
    """The fast variant's rewrite (stacked vmapped critics, detached critic in the actor loss, the written-out
    density, the multi-tensor lerp) computes what the baseline's CleanRL update computes, step for step."""
    base, fast = load_script(ALGOS[algo]), load_script(ALGOS[algo] + "_torchcompile")
    torch.manual_seed(0)
    agent = _make(fast, algo, compile=False)
    low, high = -2 * np.ones(ACTION_DIM, np.float32), 2 * np.ones(ACTION_DIM, np.float32)
    q_names = list(agent.q_params)

    def q_net(cls, params, target, k):
        net = cls(OBS_DIM, ACTION_DIM)
        net.load_state_dict({n: (target if target else params)[n][k].detach().clone() for n in q_names})
        return net

    qcls = base.SoftQNetwork if algo == "sac" else base.QNetwork
    qf1, qf2 = q_net(qcls, agent.q_params, None, 0), q_net(qcls, agent.q_params, None, 1)
    qf1_t, qf2_t = q_net(qcls, None, agent.q_target, 0), q_net(qcls, None, agent.q_target, 1)
    actor = base.Actor(OBS_DIM, ACTION_DIM, low, high)
    actor.load_state_dict(agent.actor.state_dict())
    q_opt = torch.optim.Adam(list(qf1.parameters()) + list(qf2.parameters()), lr=agent.q_optimizer.defaults["lr"])
    a_opt = torch.optim.Adam(actor.parameters(), lr=agent.actor_optimizer.defaults["lr"])
    batch = _batch(1)
    if algo == "sac":
        log_alpha = torch.zeros(1, requires_grad=True)
        nets = (actor, qf1, qf2, qf1_t, qf2_t, q_opt, a_opt, log_alpha, torch.optim.Adam([log_alpha], lr=1e-3))
        expected = sum((_baseline_sac_step(base, nets, batch, i) for i in range(3)), [])
        got = _steps(agent, algo, batch)
    else:
        actor_t = copy.deepcopy(actor)
        nets = (actor, actor_t, qf1, qf2, qf1_t, qf2_t, q_opt, a_opt)
        expected = sum((_baseline_td3_step(base, nets, batch, i) for i in range(3)), [])
        got = _steps(agent, algo, batch)
    _assert_close(got, expected, "losses")
    # and the same new parameters
    _assert_close(
        [agent.q_params["fc2.weight"][0], agent.q_params["fc2.weight"][1], agent.q_target["fc3.weight"][1]],
        [qf1.fc2.weight, qf2.fc2.weight, qf2_t.fc3.weight],
        "critics",
    )
    _assert_close(list(agent.actor.state_dict().values()), list(actor.state_dict().values()), "actor")


@pytest.mark.gpu
@pytest.mark.parametrize("algo", ["sac", "td3"])
@pytest.mark.parametrize("compile", [False, pytest.param(True, marks=pytest.mark.compile)])
def test_cudagraph_update_equals_eager_on_gpu(algo, compile, inductor_eager_rng):
    module = load_script(ALGOS[algo] + "_torchcompile")
    device = torch.device("cuda")
    low, high = -2 * np.ones(ACTION_DIM, np.float32), 2 * np.ones(ACTION_DIM, np.float32)
    make = module.make_sac if algo == "sac" else module.make_td3
    torch.manual_seed(0)
    eager = make(module.Args(), OBS_DIM, ACTION_DIM, low, high, device)
    graphed = make(module.Args(compile=compile, cudagraphs=True), OBS_DIM, ACTION_DIM, low, high, device)
    _copy_params(eager, graphed, algo)
    batch = _batch().to(device)
    # 4 steps: the first ones warm up and capture, the last replay the graphs
    _assert_close(_steps(graphed, algo, batch, n=5), _steps(eager, algo, batch, n=5), "losses", rtol=1e-3, atol=1e-4)
    _assert_params_close(list(_state(graphed, algo).values()), list(_state(eager, algo).values()), "parameters", steps=5)


# ---------------------------------------------------------------- truncation and termination
@pytest.mark.parametrize(
    "script",
    [
        "sac_continuous_action",
        "sac_continuous_action_torchcompile",
        "td3_continuous_action",
        "td3_continuous_action_torchcompile",
    ],
)
def test_replay_buffer_stores_true_final_obs_and_termination_mask(script, tmp_path, monkeypatch):
    """Drive the script's own main loop on a hand-made environment: a truncation must store the true final
    observation with done=0 (so it bootstraps), a termination done=1, and the reset observation must not leak."""
    import gymnasium as gym

    module = load_script(script)

    class Counter(gym.Env):
        """obs = [episode id, t]; episodes alternate: truncated at t=3, terminated at t=4."""

        observation_space = gym.spaces.Box(-100, 100, (2,), np.float32)
        action_space = gym.spaces.Box(-1, 1, (1,), np.float32)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.episode = getattr(self, "episode", -1) + 1
            self.t = 0
            return np.array([self.episode, 0], np.float32), {}

        def step(self, action):
            self.t += 1
            terminated = self.episode % 2 == 1 and self.t == 4
            truncated = self.episode % 2 == 0 and self.t == 3
            return np.array([self.episode, self.t], np.float32), float(self.t), terminated, truncated, {}

    gym.register("CounterTest-v0", entry_point=lambda **kw: Counter())
    stored = []
    buffer_cls = module.ReplayBuffer
    orig_add = buffer_cls.add

    def spy(self, obs, next_obs, actions, rewards, terminations):
        stored.append((obs.copy(), next_obs.copy(), np.array(rewards, copy=True), np.array(terminations, copy=True)))
        return orig_add(self, obs, next_obs, actions, rewards, terminations)

    monkeypatch.setattr(buffer_cls, "add", spy)
    args = module.Args(
        env_id="CounterTest-v0",
        total_timesteps=14,
        learning_starts=12,
        batch_size=4,
        buffer_size=50,
        measure_burnin=0,
        log_interval=7,
        output_dir=str(tmp_path),
        cuda=False,
    )
    module.main(args)
    gym.registry.pop("CounterTest-v0")
    transitions = [(tuple(o[0]), tuple(n[0]), float(r[0]), bool(d[0])) for o, n, r, d in stored]
    expected = [
        ((0, 0), (0, 1), 1, False),
        ((0, 1), (0, 2), 2, False),
        ((0, 2), (0, 3), 3, False),  # truncated: true final obs, bootstraps
        ((1, 0), (1, 1), 1, False),
        ((1, 1), (1, 2), 2, False),
        ((1, 2), (1, 3), 3, False),
        ((1, 3), (1, 4), 4, True),  # terminated
        ((2, 0), (2, 1), 1, False),
    ]
    assert transitions[: len(expected)] == expected
    # and the device buffer of the fast variant holds the same rows
    if script.endswith("torchcompile"):
        rb = buffer_cls(10, 2, 1, torch.device("cpu"))
        for o, n, r, d in stored[:7]:
            orig_add(rb, o, n, np.zeros((1, 1), np.float32), r, d)
        obs, actions, next_obs, rewards, dones = rb.split(rb.storage[:7], 2, 1)
        assert (
            next_obs[2].tolist() == [0, 3]
            and dones.tolist() == [0, 0, 0, 0, 0, 0, 1]
            and rewards.tolist() == [1, 2, 3, 1, 2, 3, 4]
        )


def test_device_buffer_wraps_around_and_samples_only_filled_rows():
    module = load_script("sac_continuous_action_torchcompile")
    rb = module.ReplayBuffer(5, 1, 1, torch.device("cpu"))
    for step in range(3):  # 2 envs a step: 6 rows into 5 slots
        v = np.array([[2 * step], [2 * step + 1]], np.float32)
        rb.add(v, v + 100, v, v[:, 0], np.zeros(2, np.float32))
    assert rb.full and rb.pos == 1
    assert rb.storage[:, 0].tolist() == [5, 1, 2, 3, 4]  # row 0 overwritten by the 6th transition
    fresh = module.ReplayBuffer(100, 1, 1, torch.device("cpu"))
    fresh.add(
        np.ones((2, 1), np.float32),
        np.ones((2, 1), np.float32),
        np.ones((2, 1), np.float32),
        np.ones(2, np.float32),
        np.zeros(2, np.float32),
    )
    assert (fresh.sample(64)[:, 0] == 1).all()  # never the zero rows beyond what was added


# ---------------------------------------------------------------- bad input
BAD = [
    (["--env-id", "NoSuchEnv-v9"], "--env-id", "continuous (Box) actions"),
    (["--env-id", "CartPole-v1"], "--env-id", "continuous (Box) actions"),
    (
        ["--env-id", "Pendulum-v1", "--buffer-size", 100, "--batch-size", 256],
        "--buffer-size",
        "must be in [256, inf), got 100",
    ),
    (["--env-id", "Pendulum-v1", "--learning-starts", -1], "--learning-starts", "must be in [0, inf), got -1"),
    (["--env-id", "Pendulum-v1", "--tau", 3], "--tau", "must be in (0, 1], got 3.0"),
    (["--env-id", "Pendulum-v1", "--gamma", 1.5], "--gamma", "must be in [0, 1], got 1.5"),
]


@pytest.mark.parametrize(
    "script",
    [
        "sac_continuous_action",
        "sac_continuous_action_torchcompile",
        "td3_continuous_action",
        "td3_continuous_action_torchcompile",
    ],
)
def test_bad_input_fails_with_one_line(script, tmp_path):
    for flags, flag, words in BAD:
        proc, _ = run_script(script, *flags, tmp_path=tmp_path, expect_ok=False, timeout=120)
        assert proc.returncode != 0
        lines = [line for line in proc.stderr.strip().splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and lines[0].startswith(f"error: {flag}:") and words in lines[0], proc.stderr[-800:]
        assert not (tmp_path / "runs").exists()  # failed before any work
