"""tools/roofline.py: the FLOPs per env step it counts for TD3 equal a hand count of the networks' matmuls under
CleanRL's schedule, the ops it times alone make those same FLOPs, the loops' schedules are CleanRL's, and its tables
have their columns. No wall-clock bound: only counts, shapes, and fractions that must add up."""

import json
import pathlib
import subprocess
import sys
from collections import Counter
from types import SimpleNamespace

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import roofline  # noqa: E402

ROOFLINE_COLUMNS = "| script | env | threads | MFLOP/step | attainable GFLOP/s | update-only steps/s | update-only GFLOP/s"
ROOFLINE_COLUMNS += " | update-only % of attainable | end-to-end steps/s | end-to-end GFLOP/s | end-to-end % of attainable |"
PROFILE_COLUMNS = "| script | profiled steps/s | env | policy | update | logging | rest |"
FUNCTION_COLUMNS = "| script | function | calls per env step | MFLOP per call | MFLOP per env step |"
SPLIT_COLUMNS = "| script | function | us per call | matmul us | matmul share | matmul GFLOP/s in place"
SPLIT_COLUMNS += " | attainable GFLOP/s at its ops | other ops us |"


def matmuls(rows, layers):
    """2 x m x n x k for each Linear layer [(in, out)] on `rows` rows: its forward, or one of its two gradients, as
    FlopCounterMode counts them."""
    return [2 * rows * fan_in * fan_out for fan_in, fan_out in layers]


def forward(rows, layers):
    return sum(matmuls(rows, layers))


def backward(rows, layers, weights=True, first_input=False):
    """A weight gradient per layer (if the weights train), an input gradient per layer but the first (a network fed by
    the replay buffer: no gradient for its input), or the first too (first_input: its input came from the actor)."""
    flops = matmuls(rows, layers)
    return weights * sum(flops) + sum(flops[1:]) + first_input * flops[0]


def td3_hand_count(obs_dim=17, action_dim=6, batch=256, policy_frequency=2, num_envs=1):
    """TD3's FLOPs per env step (HalfCheetah-v4: 17 observations, 6 actions; CleanRL's batch and policy_frequency)."""
    critic = [(obs_dim + action_dim, 256), (256, 256), (256, 1)]
    actor = [(obs_dim, 256), (256, 256), (256, action_dim)]
    # the critic update: target actor and both target critics without autograd, then both critics forward and backward
    update_critic = forward(batch, actor) + 2 * forward(batch, critic) + 2 * forward(batch, critic)
    update_critic += 2 * backward(batch, critic)
    # the actor update: the actor, then qf1 with detached weights (input gradients only, down to the actor's action)
    update_actor = forward(batch, actor) + forward(batch, critic)
    update_actor += backward(batch, critic, weights=False, first_input=True) + backward(batch, actor)
    policy = forward(num_envs, actor)
    return update_critic + update_actor / policy_frequency + policy


def test_hand_count_is_the_known_figure():
    assert td3_hand_count() == 414_723_584  # NOTES.md 13: "TD3 fast 415 MFLOP"


def test_td3_quick_roofline(tmp_path):
    out = tmp_path / "roofline" / "roofline.md"
    cmd = [sys.executable, str(ROOT / "tools" / "roofline.py"), "--quick", "--scripts", "td3_continuous_action"]
    proc = subprocess.run([*cmd, "--out", str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    record = json.loads(out.with_suffix(".json").read_text())
    fast, baseline = record["rows"]
    assert (fast["script"], fast["variant"]) == ("td3_continuous_action_torchcompile.py", "fast")
    assert (baseline["script"], baseline["variant"]) == ("td3_continuous_action.py", "baseline")

    # FLOPs: the hand count, by function and in all; the ops timed alone make the same FLOPs
    detail = record["details"]["td3_continuous_action_torchcompile.py"]
    assert detail["schedule"] == dict(env_steps=2, calls=dict(policy=2, update_critic=2, update_actor=1))
    calls = {name: f["calls_per_step"] for name, f in detail["functions"].items()}
    assert calls == dict(policy=1.0, update_critic=1.0, update_actor=0.5)
    assert fast["flops_per_step"] == td3_hand_count()
    assert detail["ops_flops_per_step"] == pytest.approx(fast["flops_per_step"], rel=1e-12)
    assert baseline["flops_per_step"] == fast["flops_per_step"] and not baseline["flops_counted_here"]
    assert {op["op"].split("(")[0] for op in detail["ops"]} <= {"addmm", "mm"}
    assert "addmm(256, 256x23, 23x256^T)" in {op["op"] for op in detail["ops"]}  # the critics' first layer
    assert "addmm(6, 1x256, 256x6^T)" in {op["op"] for op in detail["ops"]}  # the policy's last layer, one env

    # each function's time split: its matmuls' self time is a part of its wall time, their rate in place is given
    for name, function in detail["functions"].items():
        split = function["split"]
        # two passes timed apart (the profiled one is slower): only their ratio's definition holds whatever the load
        assert split["wall_s"] > 0 and split["matmul_s"] > 0, (name, split)
        assert split["matmul_share"] == pytest.approx(split["matmul_s"] / split["wall_s"]), (name, split)
        assert split["matmul_gflops"] == pytest.approx(function["flops_per_call"] / split["matmul_s"] / 1e9)
        assert split["attainable_gflops"] > 0

    # rates and fractions are consistent with each other (no bound on their values)
    for row in (fast, baseline):
        assert row["attainable_gflops"] > 0 and row["e2e_status"] == "finished" and row["e2e_steps_per_s"] > 0
        assert row["e2e_fraction"] == pytest.approx(row["e2e_gflops"] / row["attainable_gflops"])
        parts = [row[part] or 0.0 for part in ("env", "policy", "update", "logging", "rest")]
        assert min(parts) > -1e-9 and abs(sum(parts) - 1) < 1e-9 and row["env"] > 0
    assert fast["update_gflops"] * 1e9 == pytest.approx(fast["flops_per_step"] * fast["update_steps_per_s"])
    assert fast["update_fraction"] == pytest.approx(fast["update_gflops"] / fast["attainable_gflops"])
    assert fast["policy"] > 0 and fast["update"] > 0 and baseline["policy"] is None and baseline["update"] is None

    # the tables and the header
    text = out.read_text()
    lines = text.splitlines()
    for header in (ROOFLINE_COLUMNS, PROFILE_COLUMNS, FUNCTION_COLUMNS, SPLIT_COLUMNS):
        assert header in lines
    assert sum(line.startswith("| td3_continuous_action") for line in lines) == 2 + 2 + 3 + 3
    assert "--quick --scripts td3_continuous_action" in lines[2]
    assert f"torch {torch.__version__}" in text and "threads" in text and record["machine"]["cpu_model"] in text
    assert (out.with_suffix(".csv")).read_text().startswith("script,variant,")


def test_op_recorder_counts_each_shape():
    x, w, b = torch.randn(8, 5, requires_grad=True), torch.randn(3, 5, requires_grad=True), torch.randn(3)

    def step(x, w):
        torch.nn.functional.linear(x, w, b).sum().backward()
        return x @ w.T.detach()

    flops, ops = roofline.count_call(step, (x, w), {})
    assert flops == 4 * 2 * 8 * 5 * 3  # the forward, its two gradients, the mm
    labels = Counter({roofline.op_label(op): op["calls"] for op in ops.values()})
    assert labels["addmm(3, 8x5, 5x3^T)"] == 1 and sum(labels.values()) == 4
    rates = roofline.Rates(roofline.Timing(op_s=0.001, period_s=0.001, repeats=1))
    ops = {key: dict(op, per_step=op["calls"]) for key, op in ops.items()}
    rate, timed_flops, rows = rates.attainable(ops, torch.get_num_threads())
    assert timed_flops == flops and rate > 0 and len(rows) == len(ops)


def test_schedules_are_cleanrl_loops():
    sac = SimpleNamespace(num_envs=1, policy_frequency=2, target_network_frequency=1)
    calls, steps = roofline.schedule("sac_continuous_action", sac, None)
    first = ["policy", "update_critic", "update_actor", "update_actor", "update_target"]  # global_step % 2 == 0
    assert steps == 2 and calls == first + ["policy", "update_critic", "update_target"]
    td3 = SimpleNamespace(num_envs=1, policy_frequency=2)
    calls, steps = roofline.schedule("td3_continuous_action", td3, None)
    assert steps == 2 and calls == ["policy", "update_critic", "update_actor", "policy", "update_critic"]
    dqn = SimpleNamespace(num_envs=4, train_frequency=10, target_network_frequency=500)
    calls, steps = roofline.schedule("dqn", dqn, roofline.load_script("dqn_torchcompile"))
    assert steps == 500 and Counter(calls) == dict(policy=125, update=50, update_target=1)
    ppo = SimpleNamespace(num_envs=8, num_steps=128, update_epochs=4, num_minibatches=4)
    calls, steps = roofline.schedule("ppo_atari", ppo, None)
    assert steps == 1024 and Counter(calls) == dict(policy=128, gae=1, update=16)
