"""PPO on Atari (envpool): scripts/ppo_atari.py (baseline) and scripts/ppo_atari_torchcompile.py (fast)."""

import copy
import dataclasses

import numpy as np
import pytest
import torch
from helpers.parity import assert_all_close, assert_updates_close
from helpers.scripts import check_summary, load_script, read_metrics, run_main, run_script

ENV_ID = "Breakout-v5"
TINY = [
    "--num-envs",
    2,
    "--num-steps",
    16,
    "--num-minibatches",
    2,
    "--update-epochs",
    1,
    "--total-timesteps",
    64,
    "--measure-burnin",
    1,
    "--seed",
    3,
]
FAST = "ppo_atari_torchcompile"
FLAGS = {
    "none": [],
    "compile": ["--compile"],
    "cudagraphs": ["--cudagraphs"],
    "compile_cudagraphs": ["--compile", "--cudagraphs"],
}


@pytest.fixture(scope="module")
def base():
    return load_script("ppo_atari")


@pytest.fixture(scope="module")
def fast():
    return load_script(FAST)


# ---------------------------------------------------------------- whole runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each run made at most once, shared by the tests that read it."""
    done = {}

    def get(script, flags=()):
        key = (script, tuple(flags))
        if key not in done:
            # --no-cuda: these runs check the CPU path (and its --cudagraphs warning), also on a GPU host
            proc, summary = run_main(script, *TINY, "--no-cuda", *flags, tmp_path=tmp_path_factory.mktemp(script))
            done[key] = (proc, summary, read_metrics(summary))
        return done[key]

    return get


def check_run(proc, summary, metrics, script, compile=False):
    check_summary(summary, script, "ppo", ENV_ID, 64, compile=compile, cudagraphs=False)  # no CUDA: no graphs
    assert summary["global_step"] == 64 and summary["device"] == "cpu"
    assert [int(r["global_step"]) for r in metrics] == [32, 64]  # one row per iteration
    for row in metrics:  # the update ran and its losses were read
        for col in ["value_loss", "policy_loss", "entropy", "approx_kl", "clipfrac", "explained_variance"]:
            assert np.isfinite(float(row[col])), (col, row)
        assert 1.0 < float(row["entropy"]) <= np.log(4) + 1e-5  # Breakout's 4 actions, a near-uniform start
    assert float(metrics[0]["learning_rate"]) == pytest.approx(2.5e-4) and float(metrics[1]["learning_rate"]) == pytest.approx(
        1.25e-4
    )
    assert metrics[0]["sps"] == "" and float(metrics[1]["sps"]) > 0  # the burn-in iteration is not measured


def test_baseline_run(runs):
    proc, summary, metrics = runs("ppo_atari")
    check_run(proc, summary, metrics, "ppo_atari")


@pytest.mark.parametrize(
    "name",
    [
        "none",
        pytest.param("compile", marks=pytest.mark.compile),
        "cudagraphs",
        pytest.param("compile_cudagraphs", marks=pytest.mark.compile),
    ],
)
def test_fast_run(runs, name):
    proc, summary, metrics = runs(FAST, FLAGS[name])
    check_run(proc, summary, metrics, FAST, compile="--compile" in FLAGS[name])
    warnings = [line for line in proc.stderr.splitlines() if "--cudagraphs" in line]
    if "--cudagraphs" in FLAGS[name]:
        assert len(warnings) == 1 and warnings[0].startswith("warning: --cudagraphs:"), proc.stderr[-2000:]
    else:
        assert warnings == []


def test_fast_rollout_matches_baseline(runs):
    """Same seed, same init, same sampling: the first rollout and its GAE are the baseline's, so the first row's
    explained variance (a function of the rollout's values and returns only) agrees."""
    _, _, m_base = runs("ppo_atari")
    _, _, m_fast = runs(FAST)
    assert float(m_fast[0]["explained_variance"]) == pytest.approx(float(m_base[0]["explained_variance"]), rel=1e-4, abs=1e-5)
    assert float(m_fast[0]["entropy"]) == pytest.approx(float(m_base[0]["entropy"]), abs=1e-3)


# ---------------------------------------------------------------- bad input

BAD = [
    ({"env_id": "NoSuchGame-v5"}, "--env-id"),
    ({"env_id": "CartPole-v1"}, "--env-id"),  # envpool knows it, but it is no Atari game
    ({"num_minibatches": 3}, "--num-minibatches"),  # 2 x 16 = 32 rows do not split in 3
    ({"total_timesteps": 16}, "--total-timesteps"),  # less than one 32-step rollout
    ({"measure_burnin": -1}, "--measure-burnin"),  # (a burn-in longer than the run is no error: a warning)
    ({"gamma": 1.5}, "--gamma"),  # every number has its range
    ({"clip_coef": -1.0}, "--clip-coef"),
    ({"learning_rate": float("nan")}, "--learning-rate"),
    ({"target_kl": 0.0}, "--target-kl"),
]


@pytest.mark.parametrize("script", ["ppo_atari", FAST])
@pytest.mark.parametrize("bad,flag", BAD, ids=[b[1] + str(i) for i, b in enumerate(BAD)])
def test_bad_input_checks(script, bad, flag):
    mod = load_script(script)
    args = mod.Args(**{"num_envs": 2, "num_steps": 16, "total_timesteps": 64, "measure_burnin": 0, **bad})
    with pytest.raises(SystemExit) as e:
        mod.check_args(args)
    assert str(e.value.code).startswith(f"error: {flag}: ") and "\n" not in str(e.value.code)


@pytest.mark.parametrize("script", ["ppo_atari", FAST])
def test_bad_input_cli(tmp_path, script):
    """From the command line: one line on stderr, a non-zero exit, nothing written."""
    proc, summary = run_script(script, "--env-id", "NoSuchGame-v5", tmp_path=tmp_path, expect_ok=False)
    assert proc.returncode != 0 and summary is None
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --env-id: "), proc.stderr[-2000:]
    assert not (tmp_path / "runs").exists()
    mod = load_script(script)  # the whole line of a check with its values, in this process
    with pytest.raises(SystemExit) as e:
        mod.check_args(mod.Args(num_envs=3, num_steps=5, num_minibatches=2))
    assert e.value.code == "error: --num-minibatches: must be a divisor of the batch --num-envs x --num-steps (15), got 2"


# ---------------------------------------------------------------- full-game scores


def fake_info(raw, terminated):
    return {"reward": np.array(raw, dtype=np.float32), "terminated": np.array(terminated, dtype=np.int32)}


@pytest.mark.parametrize("script", ["ppo_atari", FAST])
def test_episode_tracker_full_game(script):
    """Two envs. Env 0 plays a 3-life game (raw rewards 1, 4, 7, 4, 1: clipped, the per-life sums would be 2, 1, 2),
    each life loss followed by envpool's reset step, then a new game starts. Env 1 is truncated mid-game."""
    mod = load_script(script)
    tracker = mod.EpisodeTracker(2)
    # (raw reward env0, env1), (game over env0, env1), (term env0, env1), (trunc env0, env1)
    steps = [
        ((1, 0), (0, 0), (0, 0), (0, 0)),
        ((4, 7), (0, 0), (1, 0), (0, 0)),  # env 0 loses a life
        ((0, 0), (0, 0), (0, 0), (0, 0)),  # env 0: reset step (not counted in the length)
        ((7, 1), (0, 0), (0, 0), (0, 0)),
        ((0, 0), (0, 0), (1, 0), (0, 0)),  # env 0 loses a life
        ((0, 4), (0, 0), (0, 0), (0, 1)),  # env 0: reset step; env 1 truncated: its game ends at 7 + 1 + 4 = 12
        ((4, 0), (0, 0), (0, 0), (0, 0)),  # env 1: reset step (starts its new game, not counted)
        ((1, 2), (1, 0), (1, 0), (0, 0)),  # env 0: last life lost, game over: 1 + 4 + 7 + 4 + 1 = 17
        ((0, 5), (0, 0), (0, 0), (0, 0)),  # env 0: reset step of the new game
        ((3, 0), (0, 0), (0, 0), (0, 0)),
    ]
    finished, prev_done = [], np.zeros(2, dtype=bool)
    for t, (raw, over, term, trunc) in enumerate(steps):
        term, trunc = np.array(term, dtype=bool), np.array(trunc, dtype=bool)
        for score, length in tracker.step(fake_info(raw, over), trunc, ~prev_done):
            finished.append((t, float(score), int(length)))
        prev_done = term | trunc
    assert finished == [(5, 12.0, 6), (7, 17.0, 6)]
    # the games in progress start from zero after game over: env 0 has 3, env 1 has 2 + 5 (its reset step is not counted)
    assert tracker.episode_returns.tolist() == [3.0, 7.0]
    assert tracker.episode_lengths.tolist() == [1, 3]


def test_episode_tracker_on_envpool(base):
    """On the real pool: at game over the tracked length is envpool's own elapsed_step, and the score is the sum of
    the raw rewards, not of the clipped ones."""
    import envpool

    envs = envpool.make(ENV_ID, env_type="gymnasium", num_envs=1, episodic_life=True, reward_clip=True, seed=1)
    envs.reset()
    tracker, rng, prev_done, clipped, games = base.EpisodeTracker(1), np.random.default_rng(0), np.zeros(1, bool), 0.0, []
    for _ in range(3000):
        _, r, term, trunc, info = envs.step(rng.integers(0, 4, size=1))
        clipped += r[0]
        for score, length in tracker.step(info, trunc, ~prev_done):
            games.append((score, length, int(info["elapsed_step"][0]), clipped))
        prev_done = term | trunc
        if games:
            break
    envs.close()
    assert games, "no game over in 3000 random steps"
    score, length, elapsed, clipped = games[0]
    assert length == elapsed
    assert score >= clipped  # Breakout's bricks are worth 1 to 7 points; the clipped sum is at most the score


# ---------------------------------------------------------------- GAE


def make_rollout(T=24, N=3, seed=0, p_life=0.12, p_over=0.06, p_trunc=0.06):
    """A rollout with life losses, game overs, truncations and envpool's reset rows (r=0, no done, valid=0)."""
    rng = np.random.default_rng(seed)
    rewards, terms, dones, valid = (np.zeros((T, N), np.float32) for _ in range(4))
    prev_done = np.array([False, True, False][:N])  # env 1 starts the rollout on a reset row
    for t in range(T):
        valid[t] = ~prev_done
        for n in range(N):
            if prev_done[n]:
                continue  # reset row: r = 0, term = trunc = False
            rewards[t, n] = rng.choice([0.0, 1.0, -1.0])
            u = rng.random()
            if u < p_life + p_over:
                terms[t, n] = dones[t, n] = 1.0  # a life loss and a game over are both terminations
            elif u < p_life + p_over + p_trunc:
                dones[t, n] = 1.0
        prev_done = dones[t] > 0
    values = rng.normal(size=(T, N)).astype(np.float32)
    next_value = rng.normal(size=(N,)).astype(np.float32)
    return {
        k: torch.tensor(v)
        for k, v in dict(rewards=rewards, values=values, next_value=next_value, terms=terms, dones=dones, valid=valid).items()
    }


def reference_gae(r, gamma=0.99, lam=0.95):
    """Per env, per valid row: the discounted sum of the TD errors up to the end of its episode (or of the rollout)."""
    rewards, values, terms, dones, valid = (r[k].double().numpy() for k in ["rewards", "values", "terms", "dones", "valid"])
    next_value = r["next_value"].double().numpy()
    T, N = rewards.shape
    adv = np.zeros((T, N))
    for n in range(N):
        for t in range(T):
            if not valid[t, n]:
                continue  # a reset row is no transition
            total, k = 0.0, t
            while True:
                v_next = values[k + 1, n] if k + 1 < T else next_value[n]
                delta = rewards[k, n] + (0.0 if terms[k, n] else gamma * v_next) - values[k, n]
                total += (gamma * lam) ** (k - t) * delta
                if dones[k, n] or k + 1 == T:
                    break
                k += 1
            adv[t, n] = total
    return adv, adv + values


def gae_of(mod, r):
    return mod.compute_gae(r["rewards"], r["values"], r["next_value"], r["terms"], r["dones"], r["valid"], 0.99, 0.95)


@pytest.mark.parametrize("script", ["ppo_atari", FAST])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gae_against_reference(script, seed):
    mod = load_script(script)
    r = make_rollout(seed=seed)
    assert r["terms"].sum() > 0 and (r["dones"] - r["terms"]).sum() > 0 and (r["valid"] == 0).sum() > 1
    adv, ret = gae_of(mod, r)
    ref_adv, ref_ret = reference_gae(r)
    np.testing.assert_allclose(adv.numpy(), ref_adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ret.numpy(), ref_ret, rtol=1e-5, atol=1e-5)
    assert (adv[r["valid"] == 0] == 0).all()


@pytest.mark.parametrize("script", ["ppo_atari", FAST])
def test_gae_ignores_reset_rows(script):
    """Whatever sits on a reset row (its reward, and its value after a termination) leaves the advantages unchanged;
    after a truncation its value is V(true final obs), which the truncated row bootstraps from."""
    mod = load_script(script)
    r = make_rollout(seed=5)
    adv, _ = gae_of(mod, r)
    reset = r["valid"] == 0
    after_term = torch.zeros_like(reset)
    after_term[1:] = reset[1:] & (r["terms"][:-1] > 0)
    after_trunc = torch.zeros_like(reset)
    after_trunc[1:] = reset[1:] & (r["terms"][:-1] == 0)
    assert after_term.any() and after_trunc.any()

    r2 = dict(
        r,
        rewards=torch.where(reset, torch.full_like(r["rewards"], 5.0), r["rewards"]),
        values=torch.where(after_term, r["values"] + 3.0, r["values"]),
    )
    adv2, _ = gae_of(mod, r2)
    torch.testing.assert_close(adv2, adv)

    r3 = dict(r, values=torch.where(after_trunc, r["values"] + 1.0, r["values"]))
    adv3, _ = gae_of(mod, r3)
    t, n = torch.nonzero(after_trunc)[0].tolist()
    assert adv3[t - 1, n] - adv[t - 1, n] == pytest.approx(0.99, abs=1e-5)  # gamma * dV on the truncated row


# ---------------------------------------------------------------- compiled == eager


def tiny_args(mod):
    return mod.Args(num_envs=2, num_steps=16, num_minibatches=2, update_epochs=1, total_timesteps=64)


def minibatch(n=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.ones(n)
    w[[3, 9]] = 0.0  # two reset rows
    return (
        torch.randint(0, 256, (n, 4, 84, 84), generator=g, dtype=torch.uint8),
        torch.randint(0, 4, (n,), generator=g),
        -1.386 + 0.05 * torch.randn(n, generator=g),
        torch.randn(n, generator=g),
        torch.randn(n, generator=g),
        torch.randn(n, generator=g),
        w,
        torch.randperm(n, generator=g),  # the minibatch: every row, shuffled, gathered inside the update
    )


def build(mod, agent, device, compile, cudagraphs):
    ppo = mod.make_ppo(dataclasses.replace(tiny_args(mod), compile=compile, cudagraphs=cudagraphs), agent, device)
    return ppo.optimizer, (ppo.policy, ppo.gae, ppo.update)


@pytest.fixture(scope="module")
def compiled_pair(fast):
    """An eager and a compiled copy of the same agent, one compile shared by the parity tests."""
    import torch._inductor.config as inductor_config

    old = inductor_config.fallback_random
    inductor_config.fallback_random = True  # the compiled sampling draws the same numbers as eager
    torch.manual_seed(0)
    agent = fast.Agent(4)
    agent_c = copy.deepcopy(agent)
    cpu = torch.device("cpu")
    eager = (agent, *build(fast, agent, cpu, False, False))
    compiled = (agent_c, *build(fast, agent_c, cpu, True, False))
    yield eager, compiled
    inductor_config.fallback_random = old


@pytest.mark.compile
def test_compiled_update_matches_eager(compiled_pair):
    (agent, opt, (_, _, update)), (agent_c, opt_c, (_, _, update_c)) = compiled_pair
    before = [p.detach().clone() for p in agent.parameters()]
    for i, lr in enumerate([2.5e-4, 1e-4]):  # the in-place lr reaches the compiled step too
        opt.param_groups[0]["lr"].fill_(lr)
        opt_c.param_groups[0]["lr"].fill_(lr)
        mb = minibatch(seed=i)
        out, out_c = update(*mb), update_c(*mb)
        torch.testing.assert_close(out_c, out, rtol=1e-4, atol=1e-5)
        assert_all_close(list(agent_c.parameters()), list(agent.parameters()), "parameters", rtol=1e-5, atol=1e-6)
    assert out["value_loss"] > 0 and out["entropy"] > 1.0  # a real value loss, a near-uniform entropy
    moved = [(p - b).abs().max().item() for p, b in zip(agent.parameters(), before)]
    assert min(moved) > 1e-5  # every parameter was updated


@pytest.mark.compile
def test_compiled_policy_and_gae_match_eager(compiled_pair):
    (agent, _, (policy, gae, _)), (agent_c, _, (policy_c, gae_c, _)) = compiled_pair
    obs = minibatch(seed=7)[0][:2]
    torch.manual_seed(11)
    a, logp, v = policy(obs)
    torch.manual_seed(11)
    a_c, logp_c, v_c = policy_c(obs)
    torch.testing.assert_close(v_c, v, rtol=1e-4, atol=1e-5)
    assert torch.equal(a_c, a)
    torch.testing.assert_close(logp_c, logp, rtol=1e-4, atol=1e-5)
    with torch.no_grad():  # the policy runs the trained agent's current parameters
        _, logp_ref, _, v_ref = agent_c.get_action_and_value(obs, a_c)
    torch.testing.assert_close(logp_c, logp_ref, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(v_c, v_ref.flatten(), rtol=1e-4, atol=1e-5)

    r = make_rollout(T=16, N=2, seed=3)
    args = (obs, r["rewards"], r["values"], r["terms"], r["dones"], r["valid"])
    for x, y in zip(gae_c(*args), gae(*args)):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- GPU: CUDA graphs == eager


@pytest.mark.gpu
@pytest.mark.parametrize("compile", [False, pytest.param(True, marks=pytest.mark.compile)])
def test_cudagraphs_match_eager(fast, compile, monkeypatch):
    # cuDNN's TF32 convolutions (on by default) differ between eager and the captured graph by about 1e-3, which Adam
    # turns into steps of up to lr on near-zero gradients (seen on an H200): compare the two in full fp32
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", True)
    cuda = torch.device("cuda")
    torch.manual_seed(0)
    agent = fast.Agent(4).to(cuda)
    agent_g = copy.deepcopy(agent)
    opt, (policy, gae, update) = build(fast, agent, cuda, False, False)
    opt_g, (policy_g, gae_g, update_g) = build(fast, agent_g, cuda, compile, True)
    r = make_rollout(T=16, N=2, seed=3)
    before = {name: p.detach().clone() for name, p in agent.named_parameters()}
    for i in range(6):  # past the warm-up calls: captured, then replayed
        for o in (opt, opt_g):  # an lr change after the capture reaches the graphed step (it reads the lr tensor)
            o.param_groups[0]["lr"].fill_(2.5e-4 if i < 4 else 1e-4)
        mb = [x.to(cuda) for x in minibatch(seed=i)]
        out, out_g = update(*mb), update_g(*mb)
        torch.testing.assert_close(out_g, out, rtol=1e-3, atol=1e-4)
        if compile:  # inductor's kernels sum in another order: 4 of 1.6M elements off by up to 7.2e-5 (an H100), within
            # one Adam step at lr 2.5e-4 (Adam's first steps move an element by about lr whatever its gradient's size):
            # the update as a whole is compared
            assert_updates_close(dict(agent_g.named_parameters()), dict(agent.named_parameters()), before, "parameters")
        else:
            assert_all_close(list(agent_g.parameters()), list(agent.parameters()), "parameters")
        obs = mb[0][:2]
        _, _, v = policy(obs)
        a_g, logp_g, v_g = policy_g(obs)
        torch.testing.assert_close(v_g, v, rtol=1e-3, atol=1e-4)
        with torch.no_grad():
            _, logp_ref, _, _ = agent.get_action_and_value(obs, a_g)
        torch.testing.assert_close(logp_g, logp_ref, rtol=1e-3, atol=1e-4)
        args = (obs, *(r[k].to(cuda) for k in ["rewards", "values", "terms", "dones", "valid"]))
        for x, y in zip(gae_g(*args), gae(*args)):
            torch.testing.assert_close(x, y, rtol=1e-3, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("flags", [["--cudagraphs"], pytest.param(["--compile", "--cudagraphs"], marks=pytest.mark.compile)])
def test_fast_run_cuda(tmp_path, flags):
    proc, summary = run_script(FAST, *TINY, *flags, tmp_path=tmp_path)
    check_summary(summary, FAST, "ppo", ENV_ID, 64, compile="--compile" in flags, cudagraphs=True)
    assert summary["device"] == "cuda" and summary["gpu_name"]


@pytest.mark.parametrize("script", ["ppo_atari_torchcompile", "ppo_atari_multigpu_torchcompile"])
def test_the_fast_file_runs_where_there_is_no_glibc(script, tmp_path, monkeypatch, capsys):
    """On a CPU the fast file asks glibc's malloc to keep its buffers (ctypes, libc.so.6). Where there is no glibc
    (macOS, musl: loading libc.so.6 fails), the run goes on with the system's allocator as it is, and says nothing."""
    from helpers.in_process import prepare

    module, args = prepare(script, "--no-cuda", *TINY, tmp_path=tmp_path, monkeypatch=monkeypatch)
    tried = []

    def no_glibc(name, *a, **kw):
        tried.append(name)
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(module.ctypes, "CDLL", no_glibc)
    state = module.main(args)
    assert tried == ["libc.so.6"] and state["status"] == "finished"
    assert "libc" not in capsys.readouterr().err
