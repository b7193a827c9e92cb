"""PPO with continuous actions: the baseline and the fast variant (all on the CPU but the `gpu` test)."""

import copy
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
import tyro
from helpers.parity import assert_all_close
from helpers.scripts import check_summary, load_script, read_metrics, run_main, run_script

BASE = "ppo_continuous_action"
FAST = "ppo_continuous_action_torchcompile"
# Two iterations of 2 envs x 128 steps on Pendulum (200-step episodes): both envs truncate in the second rollout,
# so a done row, a NEXT_STEP reset row and a bootstrap from the true final observation all happen in a real run.
# The shapes (obs 3, action 1, batch 256, minibatch 64) are those of the parity tests, so compiles can share the cache.
SHORT = [
    "--env-id",
    "Pendulum-v1",
    "--num-envs",
    "2",
    "--num-steps",
    "128",
    "--num-minibatches",
    "4",
    "--update-epochs",
    "2",
    "--total-timesteps",
    "512",
    "--measure-burnin",
    "1",
]
OBS_DIM, ACT_DIM, BATCH, MINIBATCH = 3, 1, 256, 64


@pytest.fixture(scope="module")
def base():
    return load_script(BASE)


@pytest.fixture(scope="module")
def fast():
    return load_script(FAST)


# --- short runs of each file and each flag combination ---------------------------------------------------------

RUNS = [
    pytest.param(BASE, [], id="baseline"),
    pytest.param(FAST, [], id="fast"),
    pytest.param(FAST, ["--cudagraphs"], id="fast-cudagraphs"),
    pytest.param(BASE, ["--target-kl", "1e-9"], id="baseline-target-kl"),  # stops after the first epoch
    pytest.param(FAST, ["--target-kl", "1e-9"], id="fast-target-kl"),
    pytest.param(FAST, ["--compile"], id="fast-compile", marks=pytest.mark.compile),
    pytest.param(FAST, ["--compile", "--cudagraphs"], id="fast-compile-cudagraphs", marks=pytest.mark.compile),
]


@pytest.mark.parametrize("script,flags", RUNS)
def test_short_run(script, flags, tmp_path):
    proc, summary = run_main(script, *SHORT, *flags, tmp_path=tmp_path)
    compile_, cudagraphs = "--compile" in flags, "--cudagraphs" in flags and torch.cuda.is_available()
    check_summary(summary, script, "ppo", "Pendulum-v1", 512, compile=compile_, cudagraphs=cudagraphs)
    assert summary["global_step"] == 512
    # both envs finished their 200-step episode in the second rollout; the returns are the raw (unnormalised) ones
    assert summary["episodes"] == 2
    assert -16.3 * 200 < summary["episodic_return"] < 0  # Pendulum: at most 16.3 of cost per step
    rows = read_metrics(summary)
    assert [int(r["global_step"]) for r in rows] == [256, 512]  # one row per iteration
    assert rows[0]["sps"] == "" and float(rows[1]["sps"]) > 0  # the first iteration is the burn-in
    assert [float(r["learning_rate"]) for r in rows] == pytest.approx([3e-4, 1.5e-4])  # annealed
    assert rows[0]["episodic_return"] == "" and float(rows[1]["episodic_length"]) == 200
    for row in rows:
        for key in ["value_loss", "policy_loss", "entropy", "old_approx_kl", "approx_kl", "clipfrac", "explained_variance"]:
            assert math.isfinite(float(row[key])), (key, row)
        assert float(row["value_loss"]) > 0 and 0 <= float(row["clipfrac"]) <= 1
    if "--cudagraphs" in flags and not torch.cuda.is_available():
        assert proc.stderr.count("--cudagraphs") == 1, proc.stderr  # one warning line, then no graphs


# --- bad input ---------------------------------------------------------------------------------------------------

BAD = [
    pytest.param(["--num-steps", "100", "--num-minibatches", "3"], "--num-minibatches", id="minibatches-do-not-divide"),
    pytest.param(
        ["--num-envs", "1", "--num-steps", "4", "--num-minibatches", "4", "--total-timesteps", "8"],
        "--num-minibatches",
        id="minibatches-of-one-row",
    ),
    pytest.param(
        ["--num-steps", "128", "--num-envs", "2", "--total-timesteps", "200"],
        "--total-timesteps",
        id="budget-below-one-rollout",
    ),
    pytest.param(["--env-id", "CartPole-v1"], "--env-id", id="discrete-env"),
]


@pytest.mark.parametrize("script", [BASE, FAST])
def test_bad_input(script, tmp_path, capsys):
    """Each bad input ends check_args with one line naming the flag; the first also from the command line, where it
    exits non-zero before any work (one process a file: the others take the same path, checked in this one)."""
    for i, (flags, flag) in enumerate(param.values for param in BAD):
        env = [] if "--env-id" in flags else ["--env-id", "Pendulum-v1"]
        if i == 0:
            proc, _ = run_script(script, *env, *flags, tmp_path=tmp_path, expect_ok=False)
            assert proc.returncode != 0
            lines = proc.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith(f"error: {flag}: "), proc.stderr
            assert not (tmp_path / "runs").exists()  # it failed before any work
        module = load_script(script)
        with pytest.raises(SystemExit) as exit:
            module.check_args(tyro.cli(module.Args, args=[*env, *flags]))
        line = str(exit.value.code)
        assert line.startswith(f"error: {flag}: ") and "\n" not in line and capsys.readouterr().err == "", line
        if flag == "--env-id":
            assert "continuous (Box) actions" in line


# --- GAE on hand-made NEXT_STEP rollouts -------------------------------------------------------------------------

# per env: {row: "term" | "trunc"} for the rows that end an episode, and whether row 0 is a reset row (the previous
# rollout ended with a done). The row after each done is a NEXT_STEP reset row: reward 0, no done, not valid.
PATTERNS = [
    ({3: "term", 8: "trunc"}, False),
    ({}, False),
    ({11: "trunc"}, True),  # a truncation on the last row bootstraps from next_value
    ({5: "term", 11: "term"}, True),
]
T, GAMMA, LAMBDA = 12, 0.99, 0.95


def make_rollout(num_envs, seed=0):
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randn(T, num_envs, generator=g)
    values = torch.randn(T, num_envs, generator=g)
    next_value = torch.randn(1, num_envs, generator=g)
    terms, dones, valids = torch.zeros(T, num_envs), torch.zeros(T, num_envs), torch.ones(T, num_envs)
    for e in range(num_envs):
        ends, starts_with_reset = PATTERNS[e % len(PATTERNS)]
        valids[0, e] = 0.0 if starts_with_reset else 1.0
        for t, kind in ends.items():
            dones[t, e] = 1.0
            terms[t, e] = float(kind == "term")
            if t + 1 < T:
                valids[t + 1, e] = 0.0
    rewards = rewards * valids  # NEXT_STEP reset rows give reward 0
    return rewards, values, next_value, terms, dones, valids


def reference_gae(rewards, values, next_value, terms, dones, valids):
    """The definition, summed term by term: A[t] = sum_k (gamma lambda)^(k-t) delta_k up to the episode's last row."""
    r, v, nv = rewards.double().numpy(), values.double().numpy(), next_value.double().numpy().reshape(-1)
    te, d, va = terms.numpy(), dones.numpy(), valids.numpy()
    adv, steps = np.zeros_like(r), r.shape[0]
    for e in range(r.shape[1]):
        for t in range(steps):
            if not va[t, e]:
                continue  # a reset row is not a transition
            acc, disc = 0.0, 1.0
            for k in range(t, steps):
                v_next = nv[e] if k == steps - 1 else v[k + 1, e]  # obs[k+1] is the true final obs when row k ends an episode
                acc += disc * (r[k, e] + GAMMA * v_next * (1.0 - te[k, e]) - v[k, e])
                if d[k, e]:
                    break
                disc *= GAMMA * LAMBDA
            adv[t, e] = acc
    return adv, adv + v


@pytest.mark.parametrize("script", [BASE, FAST])
@pytest.mark.parametrize("num_envs", [1, 4])
def test_gae_matches_reference(script, num_envs, base, fast):
    module = {BASE: base, FAST: fast}[script]
    rollout = make_rollout(num_envs)
    before = [x.clone() for x in rollout]
    adv, ret = module.compute_gae(*rollout, GAMMA, LAMBDA)
    ref_adv, ref_ret = reference_gae(*rollout)
    np.testing.assert_allclose(adv.numpy(), ref_adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ret.numpy(), ref_ret, rtol=1e-5, atol=1e-5)
    for x, y in zip(rollout, before):
        assert torch.equal(x, y)  # inputs untouched
    assert (adv[rollout[5] == 0] == 0).all()


@pytest.mark.parametrize("script", [BASE, FAST])
def test_gae_reset_rows_and_bootstrap(script, base, fast):
    module = {BASE: base, FAST: fast}[script]
    rewards, values, next_value, terms, dones, valids = make_rollout(1)  # env 0: terminates at row 3, truncates at 8
    adv, _ = module.compute_gae(rewards, values, next_value, terms, dones, valids, GAMMA, LAMBDA)
    # whatever a reset row holds as reward, no advantage changes
    r2 = rewards.clone()
    r2[4, 0] = r2[9, 0] = 123.0
    adv2, _ = module.compute_gae(r2, values, next_value, terms, dones, valids, GAMMA, LAMBDA)
    torch.testing.assert_close(adv2, adv)
    # after a termination the final observation's value is not used ...
    v2 = values.clone()
    v2[4, 0] += 5.0
    adv3, _ = module.compute_gae(rewards, v2, next_value, terms, dones, valids, GAMMA, LAMBDA)
    torch.testing.assert_close(adv3[:4], adv[:4])
    # ... after a truncation it is the bootstrap: A[8] moves by gamma * dV, earlier rows by their discount of it
    v3 = values.clone()
    v3[9, 0] += 5.0
    adv4, _ = module.compute_gae(rewards, v3, next_value, terms, dones, valids, GAMMA, LAMBDA)
    shift = (adv4 - adv)[:, 0]
    assert shift[8].item() == pytest.approx(GAMMA * 5.0, rel=1e-5)
    assert shift[7].item() == pytest.approx(GAMMA * LAMBDA * GAMMA * 5.0, rel=1e-5)
    assert (shift[:5] == 0).all() and shift[9].item() == 0  # the episode before, and the reset row itself


@pytest.mark.parametrize("script", [BASE, FAST])
def test_episode_return_is_raw_and_next_step_reset_row(script, base, fast):
    """RecordEpisodeStatistics sits before the normalising wrappers: it reports the true return of the episode."""
    module = {BASE: base, FAST: fast}[script]
    envs = gym.vector.SyncVectorEnv(
        [module.make_env("Pendulum-v1", 0, False, None, 0.99)], autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP
    )
    raw = gym.make("Pendulum-v1")
    envs.reset(seed=3)
    raw.reset(seed=3)
    rng = np.random.default_rng(0)
    total, rewards_seen = 0.0, []
    for t in range(200):
        a = rng.uniform(-2, 2, size=(1, 1)).astype(np.float32)
        obs, r, term, trunc, info = envs.step(a)
        _, raw_r, _, _, _ = raw.step(a[0])
        total += raw_r
        rewards_seen.append(r[0])
        assert obs.dtype == np.float32 and np.abs(obs).max() <= 10
    assert trunc[0] and not term[0] and info["_episode"][0]
    assert info["episode"]["r"][0] == pytest.approx(total, rel=1e-5) and info["episode"]["l"][0] == 200
    assert not np.isclose(sum(rewards_seen), total)  # the agent learns from normalised rewards
    obs, r, term, trunc, info = envs.step(a)  # the NEXT_STEP reset row compute_gae masks out
    assert r[0] == 0 and not term[0] and not trunc[0] and "episode" not in info
    envs.close()


# --- the fast variant's compiled update and policy against the eager ones -----------------------------------------


def make_batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    valids = torch.ones(BATCH)
    valids[torch.randperm(BATCH, generator=g)[:10]] = 0.0  # a few reset rows
    return (
        torch.randn(BATCH, OBS_DIM, generator=g),
        torch.randn(BATCH, ACT_DIM, generator=g),
        torch.randn(BATCH, generator=g) - 1.0,
        torch.randn(BATCH, generator=g),
        torch.randn(BATCH, generator=g),
        torch.randn(BATCH, generator=g),
        valids,
    )


def build_pair(fast, compile_, cudagraphs=False, device="cpu"):
    """(eager agent, optimizer, update, policy, gae) and the same for the accelerated path, from identical parameters."""
    torch.manual_seed(0)
    agent = fast.Agent(OBS_DIM, ACT_DIM).to(device)
    with torch.no_grad():
        agent.actor_logstd.fill_(-0.5)
    out = []
    for acc in [False, True]:
        a = copy.deepcopy(agent)
        ppo = fast.make_ppo(fast.Args(compile=acc and compile_, cudagraphs=acc and cudagraphs), a, torch.device(device))
        out.append((a, ppo.optimizer, ppo.update, ppo.policy, ppo.gae))  # the eager path gets the fused Adam
    return out


def check_update_parity(eager, accel, batch, calls):
    (agent_e, opt_e, update_e, *_), (agent_a, opt_a, update_a, *_) = eager, accel
    start = [p.detach().clone() for p in agent_e.parameters()]
    g = torch.Generator().manual_seed(1)
    for i in range(calls):
        idx = torch.randperm(BATCH, generator=g)[:MINIBATCH].to(batch[0].device)
        # the lr tensor is read at each call, never baked in: a new lr takes effect, and lr 0 leaves the parameters alone
        if i in (1, calls - 1):
            for opt in (opt_e, opt_a):
                opt.param_groups[0]["lr"].copy_(1e-3 if i == 1 else 0.0)
        before = [p.detach().clone() for p in agent_a.parameters()]
        stats_e, stats_a = update_e(*batch, idx), update_a(*batch, idx)
        assert len(stats_e) == 6 and all(torch.isfinite(v) for v in stats_e.values())
        torch.testing.assert_close(stats_a, stats_e, rtol=1e-4, atol=1e-5)
        assert_all_close(list(agent_a.parameters()), list(agent_e.parameters()), "parameters")
        if i == calls - 1:
            assert all(torch.equal(p, q) for p, q in zip(agent_a.parameters(), before))
    assert any(not torch.allclose(p, q) for p, q in zip(agent_e.parameters(), start))  # the update did learn


@pytest.fixture(scope="module")
def compiled_pair(fast):
    return build_pair(fast, compile_=True)


@pytest.mark.compile
def test_compiled_update_matches_eager(compiled_pair):
    check_update_parity(*compiled_pair, make_batch(), calls=5)


@pytest.mark.compile
def test_compiled_policy_matches_eager(compiled_pair):
    (agent, _, _, policy_e, _), (_, _, _, policy_c, _) = compiled_pair
    obs = torch.randn(2, OBS_DIM)
    with torch._inductor.config.patch(fallback_random=True):  # the compiled randn draws eager's numbers
        for _ in range(2):
            torch.manual_seed(7)
            action_e = policy_e(obs)
            torch.manual_seed(7)
            action_c = policy_c(obs)
            torch.testing.assert_close(action_c, action_e, rtol=1e-5, atol=1e-6)
    assert action_e.shape == (2, ACT_DIM) and not action_c.requires_grad
    # and the policy is the Gaussian the update scores: mean + std * noise, with the agent's own parameters
    torch.manual_seed(7)
    noise = torch.randn(2, ACT_DIM)
    with torch.no_grad():
        expected = agent.actor_mean(obs) + agent.actor_logstd.exp() * noise
    torch.testing.assert_close(action_e, expected)


def rollout_for_gae(seed=0):
    """What gae() takes: next_obs, then the rollout storage as the loop fills it (obs, actions, rewards,
    terminations, dones, valids), with the reset rows that NEXT_STEP autoreset leaves."""
    rewards, _, _, terms, dones, valids = make_rollout(2, seed)
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(2, OBS_DIM, generator=g),
        torch.randn(T, 2, OBS_DIM, generator=g),
        torch.randn(T, 2, ACT_DIM, generator=g),
        rewards,
        terms,
        dones,
        valids,
    )


def check_gae_parity(gae_e, gae_a, agent):
    rollout = [x.to(agent.actor_logstd.device) for x in rollout_for_gae()]
    out_e, out_a = gae_e(*rollout), gae_a(*rollout)
    assert set(out_a) == set(out_e) == {"logprobs", "values", "advantages", "returns"}
    for name in out_e:
        torch.testing.assert_close(out_a[name], out_e[name], rtol=1e-4, atol=1e-5)
    # the batched forward is the agent's own: log-probs and values of the stored observations and actions
    with torch.no_grad():
        logprob, _, value = agent.evaluate(rollout[1].flatten(0, 1), rollout[2].flatten(0, 1))
    torch.testing.assert_close(out_a["logprobs"], logprob)
    torch.testing.assert_close(out_a["values"], value)


@pytest.mark.compile
def test_compiled_gae_matches_eager(compiled_pair):
    (agent, *_, gae_e), (*_, gae_c) = compiled_pair
    check_gae_parity(gae_e, gae_c, agent)


@pytest.mark.parametrize("num_steps,num_envs", [(257, 3), (2048, 1)])
def test_gae_scan_equals_the_baselines_loop_on_long_rollouts(base, fast, num_steps, num_envs):
    """The scan's log2(num_steps) levels against CleanRL's backward loop (the baseline's compute_gae), on rollouts
    as long as the defaults' (2048 steps) and of a length that is no power of two, with episodes ending inside."""
    g = torch.Generator().manual_seed(num_steps)
    rewards, values, next_value = (
        torch.randn(num_steps, num_envs, generator=g),
        torch.randn(num_steps, num_envs, generator=g),
        torch.randn(1, num_envs, generator=g),
    )
    dones = (torch.rand(num_steps, num_envs, generator=g) < 0.01).float()
    terms = dones * (torch.rand(num_steps, num_envs, generator=g) < 0.5).float()
    valids = torch.cat([torch.ones(1, num_envs), 1.0 - dones[:-1]])  # the row after a done is a reset row
    rollout = (rewards * valids, values, next_value, terms, dones, valids)
    for x, y in zip(fast.compute_gae(*rollout, GAMMA, LAMBDA), base.compute_gae(*rollout, GAMMA, LAMBDA), strict=True):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-4)


def test_fast_agent_matches_baseline_distribution(base, fast):
    """The fast Agent's closed forms equal the baseline's torch.distributions.Normal on the same parameters."""
    torch.manual_seed(0)
    agent_b = base.Agent(OBS_DIM, ACT_DIM)
    agent_f = fast.Agent(OBS_DIM, ACT_DIM)
    agent_f.load_state_dict(agent_b.state_dict())
    with torch.no_grad():
        agent_b.actor_logstd.fill_(-0.3)
        agent_f.actor_logstd.fill_(-0.3)
    obs, actions = torch.randn(32, OBS_DIM), torch.randn(32, ACT_DIM)
    _, logprob_b, entropy_b, value_b = agent_b.get_action_and_value(obs, actions)
    logprob_f, entropy_f, value_f = agent_f.evaluate(obs, actions)
    torch.testing.assert_close(logprob_f, logprob_b)
    torch.testing.assert_close(entropy_f, entropy_b)
    torch.testing.assert_close(value_f, value_b.view(-1))


# --- CUDA graphs (runs only where CUDA is present) ----------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("compile_", [False, pytest.param(True, marks=pytest.mark.compile)])
def test_cudagraph_update_and_policy_match_eager(fast, compile_):
    eager, graphed = build_pair(fast, compile_=compile_, cudagraphs=True, device="cuda")
    batch = tuple(x.cuda() for x in make_batch())
    check_update_parity(eager, graphed, batch, calls=8)  # past the warm-up: the replays are compared too
    (agent, _, _, policy_e, gae_e), (_, _, _, policy_g, gae_g) = eager, graphed
    with torch.no_grad():
        agent.actor_logstd.fill_(-40.0)  # noise far below float precision: the action is the mean
        graphed[0].actor_logstd.fill_(-40.0)
    obs = torch.randn(2, OBS_DIM, device="cuda")
    for _ in range(6):
        torch.testing.assert_close(policy_g(obs), policy_e(obs), rtol=1e-4, atol=1e-5)  # the action and the mean
    for _ in range(5):  # past the warm-up: captured, then replayed
        check_gae_parity(gae_e, gae_g, graphed[0])


# --- the real loop's rows on an env whose episodes a test knows ---------------------------------------------------

# Counter (tests/helpers/envs.py): obs [episode, t], reward t; episode 0 is truncated at t=3, episode 1 terminates at
# t=4, and so on. One env, one rollout of 16 steps under NEXT_STEP autoreset: the row after each done is a reset row
# (valid 0, reward 0, its action ignored) whose obs is the true final obs of the episode that just ended.
COUNTER_OBS = [[0, 0], [0, 1], [0, 2], [0, 3], [1, 0], [1, 1], [1, 2], [1, 3], [1, 4], [2, 0], [2, 1], [2, 2], [2, 3]]
COUNTER_OBS += [[3, 0], [3, 1], [3, 2]]
COUNTER_REWARDS = [1, 2, 3, 0, 1, 2, 3, 4, 0, 1, 2, 3, 0, 1, 2, 3]
COUNTER_DONES = [2, 7, 11]  # truncated, terminated, truncated
COUNTER_RESETS = [3, 8, 12]


@pytest.mark.parametrize("script", [BASE, FAST])
def test_the_real_loop_stores_known_rows_and_bootstraps_from_the_true_final_obs(script, tmp_path, monkeypatch):
    from helpers.envs import Counter

    module = load_script(script)
    box = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    gym.register("CounterBox-v0", entry_point=lambda **kwargs: Counter(box))

    def make_env(env_id, idx, capture_video, video_dir, gamma):  # the loop's env, its statistics frozen: known rows
        def thunk():
            env = gym.wrappers.NormalizeObservation(gym.wrappers.RecordEpisodeStatistics(Counter(box)))
            env.update_running_mean = False  # mean 0, variance 1: the observations stay as they are (in float32)
            return env

        return thunk

    monkeypatch.setattr(module, "make_env", make_env)
    seen = {}
    if script == BASE:  # what the loop hands to GAE, and what GAE gives back
        compute_gae = module.compute_gae

        def recording_gae(rewards, values, next_value, *rest):
            out = compute_gae(rewards, values, next_value, *rest)
            seen.update(values=values.flatten().tolist(), next_value=float(next_value), advantages=out[0].flatten().tolist())
            return out

        monkeypatch.setattr(module, "compute_gae", recording_gae)
    else:
        make_ppo = module.make_ppo

        def recording_make_ppo(*a, **k):
            ppo = make_ppo(*a, **k)
            agent = a[1]  # make_ppo(args, agent, device)
            gae = ppo.gae

            def recording_gae(next_obs, **storage):
                out = gae(next_obs, **storage)
                seen.update(values=out["values"].tolist(), next_obs=next_obs.tolist(), advantages=out["advantages"].tolist())
                with torch.no_grad():
                    seen["next_value"] = float(agent.get_value(next_obs))
                return out

            ppo.gae = recording_gae
            return ppo

        monkeypatch.setattr(module, "make_ppo", recording_make_ppo)
    args = module.Args(env_id="CounterBox-v0", num_envs=1, num_steps=16, num_minibatches=2, update_epochs=1)
    args.total_timesteps, args.output_dir, args.cuda, args.measure_burnin = 16, str(tmp_path), False, 0
    try:
        state = module.main(args)
    finally:
        gym.registry.pop("CounterBox-v0")
    rows = {k: v.reshape(16, -1).tolist() for k, v in state["storage"].items()}
    assert rows["obs"] == COUNTER_OBS
    assert [r[0] for r in rows["rewards"]] == COUNTER_REWARDS
    assert [t for t, r in enumerate(rows["dones"]) if r[0]] == COUNTER_DONES
    assert [t for t, r in enumerate(rows["terminations"]) if r[0]] == [7]
    assert [t for t, r in enumerate(rows["valids"]) if not r[0]] == COUNTER_RESETS
    assert state["run"].episodes == [(6.0, 3), (10.0, 4), (6.0, 3)]
    if script == FAST:
        assert seen["next_obs"] == [[3.0, 3.0]]  # the obs after the last step

    def column(values):
        return torch.tensor(values, dtype=torch.float32).reshape(16, 1)

    rollout = [column(COUNTER_REWARDS), column(seen["values"]), torch.tensor([seen["next_value"]])]
    rollout += [column([t == 7 for t in range(16)]), column([t in COUNTER_DONES for t in range(16)])]
    rollout += [column([t not in COUNTER_RESETS for t in range(16)])]
    expected, _ = reference_gae(*rollout)  # the definition, summed term by term
    assert seen["advantages"] == pytest.approx(expected.flatten().tolist(), rel=1e-5, abs=1e-5)
    # row 2's truncation bootstraps from row 3, the true final obs [0, 3]: gamma * V(row 3) is in its advantage
    v = seen["values"]
    assert seen["advantages"][2] == pytest.approx(3 + 0.99 * v[3] - v[2], rel=1e-5, abs=1e-5)
    assert seen["advantages"][7] == pytest.approx(4 - v[7], rel=1e-5, abs=1e-5)  # a termination: no bootstrap
