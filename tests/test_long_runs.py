"""Every script over thousands of updates, as a user runs it (its main() in this process, the loop unchanged), in
each code path a CPU runs: no state grows.

- Every tensor the loop keeps (parameters, targets, optimizer state, replay or rollout storage, alpha, the learning
  rate) is a leaf without autograd history. An in-place update of a target under autograd fails this: it chains a
  node per call onto the target (the leak that cost SAC ~3 GB over 1M steps).
- The process's resident memory is flat over the second half of the run (after compiles and the buffers' first
  fill): a leak of a few KB per update shows as megabytes there.
"""

import pytest
import torch
from helpers.in_process import reachable_tensors, run_in_process

SAC = [
    "--env-id",
    "Pendulum-v1",
    "--learning-starts",
    "200",
    "--batch-size",
    "32",
    "--total-timesteps",
    "2400",
    "--log-interval",
    "100",
]
TD3 = SAC
PPO = [
    "--env-id",
    "Pendulum-v1",
    "--num-envs",
    "1",
    "--num-steps",
    "64",
    "--num-minibatches",
    "16",
    "--update-epochs",
    "4",
    "--total-timesteps",
    "2560",
]
DQN = [
    "--learning-starts",
    "500",
    "--train-frequency",
    "2",
    "--target-network-frequency",
    "100",
    "--batch-size",
    "32",
    "--buffer-size",
    "1000",
    "--total-timesteps",
    "4000",
    "--log-interval",
    "100",
]
ATARI = ["--num-envs", "2", "--num-steps", "16", "--num-minibatches", "8", "--update-epochs", "4", "--total-timesteps", "2048"]
# the bare tensors each main() returns (SAC's log_alpha); the rest (storage dicts, modules, optimizers, replay
# buffers, namespaces, closures) is found by walking what main() returns
ALGOS = [  # (id, baseline script, flags, the baseline's bare tensors, the fast variant's)
    ("sac", "sac_continuous_action", SAC, ["log_alpha"], []),
    ("td3", "td3_continuous_action", TD3, [], []),
    ("ppo", "ppo_continuous_action", PPO, [], []),
    ("dqn", "dqn", DQN, [], []),
    ("atari", "ppo_atari", ATARI, [], []),
]
# Each code path a CPU runs, once (these runs are --no-cuda, on a GPU host too): there --cudagraphs warns and runs the
# code it would run without, and SAC's and TD3's --compile runs their eager files (they were slower compiled); so the
# fast files run as they are, and PPO's and DQN's also compiled.
COMPILED_ON_A_CPU = ["ppo", "dqn", "atari"]
CASES = []
for name, script, flags, base_storage, fast_storage in ALGOS:
    CASES.append(pytest.param(script, flags, base_storage, id=name))
    CASES.append(pytest.param(f"{script}_torchcompile", flags, fast_storage, id=f"{name}-fast"))
    if name in COMPILED_ON_A_CPU:
        compiled = [*flags, "--compile"]
        CASES.append(
            pytest.param(f"{script}_torchcompile", compiled, fast_storage, id=f"{name}-compile", marks=pytest.mark.compile)
        )


@pytest.mark.parametrize("script,flags,storage", CASES)
def test_no_state_grows_over_a_long_run(script, flags, storage, tmp_path, monkeypatch):
    torch.manual_seed(0)
    run = run_in_process(script, "--no-cuda", *flags, tmp_path=tmp_path, monkeypatch=monkeypatch)
    state, rss = run.state, run.rss
    assert state["status"] == "finished"

    tensors = reachable_tensors(state) + [(name, state[name]) for name in storage]
    paths = " ".join(p for p, _ in tensors)
    assert "optimizer" in paths and ".state[" in paths, paths[:2000]  # the walk reached the optimizer state
    with_history = [p for p, t in tensors if t.grad_fn is not None]
    assert not with_history, f"tensors kept across iterations carry autograd history: {with_history}"
    # what the optimizers keep, the target tensors and the storage never require grad (target *modules*, as in
    # CleanRL, hold Parameters that do; they are updated in place through .data or under no_grad)
    for path, t in tensors:
        learned = isinstance(t, torch.nn.Parameter) or path.endswith("log_alpha")
        if not learned and (".state[" in path or "target" in path or "storage" in path or path in storage):
            assert not t.requires_grad, path

    # memory: the median RSS of each of the last three quarters of the run (medians: a freed or a transient buffer
    # moves single samples by megabytes either way). A leak grows in every quarter: SAC's target leak added ~3 and
    # ~1.5 MB per quarter here; an allocator taking one more chunk once is a single step, flat before and after.
    assert len(rss) >= 16, rss
    quarter = len(rss) // 4
    q2, q3, q4 = (
        sorted(r for _, r in part)[len(part) // 2]
        for part in (rss[quarter : 2 * quarter], rss[2 * quarter : 3 * quarter], rss[3 * quarter :])
    )
    mb = [(step, round(r / 2**20, 1)) for step, r in rss]
    assert min(q3 - q2, q4 - q3) < 0.75 * 2**20 and q4 - q2 < 16 * 2**20, f"resident memory keeps growing: {mb}"
