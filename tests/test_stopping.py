"""A run ends well however it is stopped. SIGTERM (what Slurm's time limit, `kill` and `timeout` send) is treated as
Ctrl-C: a real signal to a real run stops the loop between steps, --save-model saves, summary.json says "terminated",
the exit status is 143, and no --async-envs worker is left behind, whether the signal reaches the training process
alone (`kill`, `timeout`) or every process of the run (Slurm)."""

import os
import pathlib
import signal

import pytest
import torch
from helpers.background import Background, alive, wait_until

PENDULUM = ["--env-id", "Pendulum-v1", "--total-timesteps", 1_000_000, "--save-model"]
CASES = [
    ("dqn", ["--total-timesteps", 1_000_000, "--learning-starts", 200, "--save-model", "--log-interval", 100], "process"),
    ("sac_continuous_action_torchcompile", PENDULUM + ["--learning-starts", 200, "--log-interval", 50], "process"),
    ("ppo_continuous_action", PENDULUM + ["--num-envs", 2, "--num-steps", 64, "--async-envs"], "process"),
    ("sac_continuous_action_torchcompile", PENDULUM + ["--learning-starts", 200, "--num-envs", 2, "--async-envs"], "group"),
]


def workers_gone(run, workers, limit=60):
    """Until no env worker of the run is left (they end on the training process's close, or on the signal)."""
    wait_until(lambda: not [pid for pid in workers if alive(pid)], limit, f"the env workers {workers} gone", run.output)


@pytest.mark.parametrize("script,flags,target", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_sigterm_ends_the_run_as_ctrl_c_does(script, flags, target, tmp_path):
    with Background(script, *flags, tmp_path=tmp_path) as run:
        run.wait_for_rows(4)  # a few rows past the start of learning
        workers = run.children()
        assert ("--async-envs" in flags) == (len(workers) >= 2), workers  # the env workers, to check on afterwards
        # as Slurm does at the time limit (every process of the run), or as kill and timeout do (the training process)
        run.signal(signal.SIGTERM, group=target == "group")
        summary = run.finish(limit=120, status=143)
        assert "Traceback" not in "".join(run.stderr), run.output()
        assert summary["status"] == "terminated" and 0 < summary["global_step"] < 1_000_000
        saved = torch.load(pathlib.Path(summary["_run_dir"]) / "model.pt", weights_only=True)
        assert saved["env_id"] == summary["args"]["env_id"]
        workers_gone(run, workers)


@pytest.mark.parametrize("script", ["sac_continuous_action_torchcompile", "ppo_continuous_action"])
def test_a_killed_env_worker_ends_the_run_with_a_summary(script, tmp_path):
    """An --async-envs worker killed mid-run (SIGKILL, as the out-of-memory killer does): one error line, no traceback,
    summary.json with "status": "failed", the model saved, exit status 1, and the other worker stopped too."""
    flags = (
        PENDULUM + ["--num-envs", 2, "--async-envs"] + (["--num-steps", 64] if "ppo" in script else ["--learning-starts", 200])
    )
    with Background(script, *flags, tmp_path=tmp_path) as run:
        run.wait_for_rows(4)
        workers = run.children()
        assert len(workers) >= 2, workers
        os.kill(workers[0], signal.SIGKILL)
        summary = run.finish(limit=120, status=1)
        stderr = "".join(run.stderr)
        errors = [line for line in stderr.splitlines() if line.startswith("error:")]
        assert "Traceback" not in stderr, run.output()
        assert errors == [errors[0]] and errors[0].startswith("error: --async-envs: an env worker died"), errors
        assert summary["status"] == "failed" and 0 < summary["global_step"] < 1_000_000
        assert (pathlib.Path(summary["_run_dir"]) / "model.pt").exists()
        workers_gone(run, workers)
