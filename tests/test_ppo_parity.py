"""PPO: the fast files' GAE and update against the baseline's, where the baseline side is the baseline's own code. Its
minibatch step lives inline in its main() (CleanRL's style), so the test runs that text itself: the `for start in
range(0, batch_size, minibatch_size)` loop, compiled from the baseline file as it stands (a change there is tested at
once, never a copy of it here). Both sides get the same rollout (a termination, a truncation and their reset rows),
the same minibatch indices and the same parameters; they must give the same log-probs, values, advantages and returns,
then per minibatch the same losses, clip fraction, KL estimates and (clipped) gradients, and the same parameters after
the epoch. The torchrun variant runs as one process (its all_reduce only under torchrun: tests/test_torchrun.py)."""

import pytest
import torch
from helpers.baseline_code import minibatch_loop, run
from helpers.parity import assert_all_close, assert_params_close
from helpers.scripts import SCRIPTS, load_script

STEPS, ENVS, MINIBATCHES = 16, 2, 4
ROWS = STEPS * ENVS


def run_baseline_minibatch(module, names, mb_inds):
    """One pass of the baseline's own minibatch loop over exactly these rows; returns what its body left behind."""
    sizes = dict(b_inds=mb_inds, batch_size=len(mb_inds), minibatch_size=len(mb_inds), clipfracs=[])
    return run(minibatch_loop(module.__name__), module, **names, **sizes)


def episode_ends():
    """(terminations, dones, valids) of the rollout: env 0 terminates on step 5, env 1 is truncated on step 9; the row
    after each is the NEXT_STEP reset row (valid 0)."""
    terminations, dones, valids = torch.zeros(STEPS, ENVS), torch.zeros(STEPS, ENVS), torch.ones(STEPS, ENVS)
    terminations[5, 0] = dones[5, 0] = 1.0
    dones[9, 1] = 1.0
    valids[6, 0] = valids[10, 1] = 0.0
    return terminations, dones, valids


def minibatches(seed=3):
    return torch.randperm(ROWS, generator=torch.Generator().manual_seed(seed)).split(ROWS // MINIBATCHES)


def check_minibatch(scope, out, base_agent, fast_agent, what):
    """The baseline loop's values (its last minibatch's) against the fast update's outputs; the gradients, clipped."""
    expected = dict(
        value_loss=scope["v_loss"],
        policy_loss=scope["pg_loss"],
        entropy=scope["entropy_loss"],
        old_approx_kl=scope["old_approx_kl"],
        approx_kl=scope["approx_kl"],
        clipfrac=torch.tensor(scope["clipfracs"][-1]),
    )
    for key, value in expected.items():
        torch.testing.assert_close(out[key], value.detach(), rtol=1e-5, atol=1e-6, msg=lambda m: f"{what} {key}: {m}")
    grads = [p.grad for p in base_agent.parameters()]
    assert_all_close([p.grad for p in fast_agent.parameters()], grads, f"{what}: the gradients", rtol=1e-5, atol=1e-6)


# --- PPO continuous -----------------------------------------------------------------------------------------------


def test_ppo_continuous_update_is_the_baselines():
    base, fast = load_script("ppo_continuous_action"), load_script("ppo_continuous_action_torchcompile")
    obs_dim, action_dim = 3, 2
    args = fast.Args(num_envs=ENVS, num_steps=STEPS, num_minibatches=MINIBATCHES, update_epochs=1)
    torch.manual_seed(0)
    fast_agent = fast.Agent(obs_dim, action_dim)
    with torch.no_grad():
        fast_agent.actor_logstd.fill_(-0.5)
    base_agent = base.Agent(obs_dim, action_dim)
    base_agent.load_state_dict(fast_agent.state_dict())
    ppo = fast.make_ppo(args, fast_agent, torch.device("cpu"))
    optimizer = torch.optim.Adam(base_agent.parameters(), lr=args.learning_rate, eps=1e-5)  # the baseline's

    g = torch.Generator().manual_seed(1)
    obs = torch.randn(STEPS, ENVS, obs_dim, generator=g)
    actions = torch.randn(STEPS, ENVS, action_dim, generator=g)
    rewards = torch.randn(STEPS, ENVS, generator=g)
    next_obs = torch.randn(ENVS, obs_dim, generator=g)
    terminations, dones, valids = episode_ends()

    # the rollout's log-probs and values, step by step as the baseline's loop makes them, then its GAE
    with torch.no_grad():
        per_step = [base_agent.get_action_and_value(obs[t], actions[t]) for t in range(STEPS)]
        logprobs = torch.stack([step[1] for step in per_step])
        values = torch.stack([step[3].flatten() for step in per_step])
        next_value = base_agent.get_value(next_obs).reshape(1, -1)
        advantages, returns = base.compute_gae(
            rewards, values, next_value, terminations, dones, valids, args.gamma, args.gae_lambda
        )
    storage = dict(obs=obs, actions=actions, rewards=rewards, terminations=terminations, dones=dones, valids=valids)
    rollout = ppo.gae(next_obs, **storage)
    for key, value in dict(logprobs=logprobs, values=values, advantages=advantages, returns=returns).items():
        torch.testing.assert_close(rollout[key], value.flatten(), rtol=1e-5, atol=1e-6, msg=lambda m: f"{key}: {m}")
    assert advantages[6, 0] == advantages[10, 1] == 0  # the reset rows
    names = dict(
        args=args,
        agent=base_agent,
        optimizer=optimizer,
        b_obs=obs.reshape(-1, obs_dim),
        b_actions=actions.reshape(-1, action_dim),
        b_logprobs=logprobs.reshape(-1),
        b_advantages=advantages.reshape(-1),
        b_returns=returns.reshape(-1),
        b_values=values.reshape(-1),
        b_valids=valids.reshape(-1),
    )
    batch = dict(obs=names["b_obs"], actions=names["b_actions"], logprobs=names["b_logprobs"], values=names["b_values"])
    batch.update(advantages=names["b_advantages"], returns=names["b_returns"], valids=names["b_valids"])
    start = [p.detach().clone() for p in fast_agent.parameters()]
    for i, mb_inds in enumerate(minibatches()):
        scope = run_baseline_minibatch(base, names, mb_inds.numpy())
        out = ppo.update(**batch, idx=mb_inds)
        check_minibatch(scope, out, base_agent, fast_agent, f"minibatch {i}")
    assert_params_close(list(fast_agent.parameters()), list(base_agent.parameters()), "after the epoch", 3e-4, steps=4)
    assert all(not torch.equal(p, q) for p, q in zip(fast_agent.parameters(), start))  # every parameter learned


# --- PPO Atari (and its torchrun variant, one process) --------------------------------------------------------------


@pytest.mark.parametrize("script", ["ppo_atari_torchcompile", "ppo_atari_multigpu_torchcompile"])
def test_ppo_atari_update_is_the_baselines(script):
    base, fast = load_script("ppo_atari"), load_script(script)
    args = fast.Args(num_envs=ENVS, num_steps=STEPS, num_minibatches=MINIBATCHES, update_epochs=1)
    torch.manual_seed(0)
    fast_agent = fast.Agent(4)
    base_agent = base.Agent(4)
    base_agent.load_state_dict(fast_agent.state_dict())
    ppo = fast.make_ppo(args, fast_agent, torch.device("cpu"))
    optimizer = torch.optim.Adam(base_agent.parameters(), lr=args.learning_rate, eps=1e-5)

    g = torch.Generator().manual_seed(1)
    obs = torch.randint(0, 256, (STEPS, ENVS, 4, 84, 84), generator=g, dtype=torch.uint8)
    actions = torch.randint(0, 4, (STEPS, ENVS), generator=g)
    rewards = torch.randint(-1, 2, (STEPS, ENVS), generator=g).float()  # clipped rewards
    next_obs = torch.randint(0, 256, (ENVS, 4, 84, 84), generator=g, dtype=torch.uint8)
    terms, dones, valid = episode_ends()

    with torch.no_grad():
        per_step = [base_agent.get_action_and_value(obs[t].float(), actions[t]) for t in range(STEPS)]
        logprobs = torch.stack([step[1] for step in per_step])
        # values far from the fresh critic's outputs (near 0), so that the clipped value loss differs from the plain one
        values = torch.stack([step[3].flatten() for step in per_step]) + torch.randn(STEPS, ENVS, generator=g)
        next_value = base_agent.get_value(next_obs.float()).reshape(1, -1)
        advantages, returns = base.compute_gae(rewards, values, next_value, terms, dones, valid, args.gamma, args.gae_lambda)
        fast_policy = ppo.policy(obs[0])
    torch.testing.assert_close(fast_policy[2], per_step[0][3].flatten(), rtol=1e-5, atol=1e-6)  # the value
    got = ppo.gae(next_obs, rewards, values, terms, dones, valid)
    torch.testing.assert_close(got[0], advantages, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[1], returns, rtol=1e-5, atol=1e-5)
    names = dict(
        args=args,
        agent=base_agent,
        optimizer=optimizer,
        b_obs=obs.reshape((-1, 4, 84, 84)).float(),  # the baseline stores float frames
        b_actions=actions.reshape(-1).float(),  # and float actions (its loop calls .long())
        b_logprobs=logprobs.reshape(-1),
        b_advantages=advantages.reshape(-1),
        b_returns=returns.reshape(-1),
        b_values=values.reshape(-1),
        b_valid=valid.reshape(-1),
    )
    batch = dict(obs=obs.reshape((-1, 4, 84, 84)), actions=actions.reshape(-1), logprobs=names["b_logprobs"])
    batch.update(advantages=names["b_advantages"], returns=names["b_returns"], values=names["b_values"])
    batch.update(valid=names["b_valid"])
    clipped = 0
    for i, mb_inds in enumerate(minibatches()):
        scope = run_baseline_minibatch(base, names, mb_inds.numpy())
        out = ppo.update(**batch, idx=mb_inds)
        check_minibatch(scope, out, base_agent, fast_agent, f"minibatch {i}")
        clipped += int((scope["v_loss_clipped"] != scope["v_loss_unclipped"]).sum())
    assert clipped > 0  # the value clipping was in play, so dropping it would change the losses
    assert_params_close(list(fast_agent.parameters()), list(base_agent.parameters()), "after the epoch", 2.5e-4, steps=4)


def test_the_baseline_loop_is_found_and_runs_as_written():
    """The loop the parity tests run is the baseline's text: a change to the baseline's loss changes what they run."""
    for script in ["ppo_continuous_action", "ppo_atari"]:
        code = minibatch_loop(script)
        assert code.co_filename.endswith(f"{script}.py")
        source = (SCRIPTS / f"{script}.py").read_text()
        assert "clip_grad_norm_" in source and "v_loss_clipped" in source
