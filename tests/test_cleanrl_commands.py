"""CleanRL's own smoke-test command lines (its tests/test_*.py) run unchanged on both files of each pair: exit 0 and
a summary; a run too short to learn or to be measured says so in one warning and reports sps as null. Each runs as its
file's own `__main__` in this process (run_main: the command line parsed as a process parses it); the files' own
processes start in the bad-input tests and in the stopped runs of tests/test_resume.py."""

import pathlib

import pytest
from helpers.scripts import run_main

COMMANDS = [  # (script, CleanRL's flags, the flag the one warning names, or None when the run learns and is measured)
    ("ppo_atari", ["--num-envs", "8", "--num-steps", "32", "--total-timesteps", "256"], "--measure-burnin"),
    (
        "ppo_continuous_action",
        ["--env-id", "Hopper-v4", "--num-envs", "1", "--num-steps", "64", "--total-timesteps", "128"],
        None,
    ),
    ("ppo_continuous_action", ["--num-envs", "1", "--num-steps", "64", "--total-timesteps", "256"], None),
    (
        "td3_continuous_action",
        ["--env-id", "Hopper-v4", "--learning-starts", "100", "--batch-size", "32", "--total-timesteps", "105"],
        "--measure-burnin",
    ),
    ("sac_continuous_action", ["--env-id", "Hopper-v4", "--batch-size", "128", "--total-timesteps", "135"], "(0 updates"),
    ("dqn", ["--learning-starts", "200", "--total-timesteps", "205"], "(0 updates"),  # steps 201-204: no 10th step
    (
        "td3_continuous_action",
        [
            "--save-model",
            "--env-id",
            "Hopper-v4",
            "--learning-starts",
            "100",
            "--batch-size",
            "32",
            "--total-timesteps",
            "105",
        ],
        "--measure-burnin",
    ),  # CleanRL's test_mujoco_eval
]


@pytest.mark.parametrize("variant", ["", "_torchcompile"])
@pytest.mark.parametrize("script,flags,warned", COMMANDS, ids=[f"{c[0]}-{c[1][-1]}" for c in COMMANDS])
def test_cleanrl_smoke_command_runs(script, flags, warned, variant, tmp_path):
    proc, summary = run_main(script + variant, *flags, tmp_path=tmp_path)
    assert summary["status"] == "finished" and summary["global_step"] == int(flags[-1])
    assert (pathlib.Path(summary["_run_dir"]) / "model.pt").is_file() == ("--save-model" in flags)
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning: --") and "--cuda:" not in line]
    if warned:
        assert len(warnings) == 1 and warned in warnings[0] and "not measured" in warnings[0], proc.stderr[-2000:]
        assert summary["sps"] is None and summary["warmup_s"] is None
    else:
        assert warnings == [] and summary["sps"] > 0, proc.stderr[-2000:]
