"""A run ends well however it is stopped. SIGTERM (what Slurm's time limit, `kill` and `timeout` send) is treated as
Ctrl-C: a real signal to a real run stops the loop between steps, --save-model saves, summary.json says "terminated",
the exit status is 143, and no --async-envs worker is left behind, whether the signal reaches the training process
alone (`kill`, `timeout`) or every process of the run (Slurm)."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest
import torch
from helpers.scripts import SCRIPTS

PENDULUM = ["--env-id", "Pendulum-v1", "--total-timesteps", 1_000_000, "--save-model"]
CASES = [
    ("dqn", ["--total-timesteps", 1_000_000, "--learning-starts", 200, "--save-model", "--log-interval", 100], "process"),
    ("sac_continuous_action_torchcompile", PENDULUM + ["--learning-starts", 200, "--log-interval", 50], "process"),
    ("ppo_continuous_action", PENDULUM + ["--num-envs", 2, "--num-steps", 64, "--async-envs"], "process"),
    ("sac_continuous_action_torchcompile", PENDULUM + ["--learning-starts", 200, "--num-envs", 2, "--async-envs"], "group"),
]


def alive(pid):
    """Whether a process runs (a zombie, dead but not yet reaped by its new parent, does not)."""
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("script,flags,target", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_sigterm_ends_the_run_as_ctrl_c_does(script, flags, target, tmp_path):
    out = tmp_path / "runs"
    cmd = [sys.executable, str(SCRIPTS / f"{script}.py"), *map(str, flags), "--output-dir", str(out)]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        for _ in range(1200):  # until the run has logged a few rows past the start of learning
            rows = list(out.glob("*/metrics.csv"))
            if rows and len(rows[0].read_text().splitlines()) > 4:
                break
            time.sleep(0.1)
        workers = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        assert ("--async-envs" in flags) == (len(workers) >= 2), workers  # the env workers, to check on afterwards
        if target == "group":
            os.killpg(proc.pid, signal.SIGTERM)  # as Slurm does at the time limit: every process of the run
        else:
            proc.send_signal(signal.SIGTERM)  # as kill and timeout do: the training process alone
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    path = pathlib.Path(stdout.strip().splitlines()[-1])  # the last line printed
    summary = json.loads(path.read_text())
    assert summary["status"] == "terminated" and 0 < summary["global_step"] < 1_000_000
    assert torch.load(path.parent / "model.pt", weights_only=True)["env_id"] == summary["args"]["env_id"]
    time.sleep(1)  # the workers' own exit, after the training process stopped them
    assert not [pid for pid in workers if alive(pid)], workers


@pytest.mark.parametrize("script", ["sac_continuous_action_torchcompile", "ppo_continuous_action"])
def test_a_killed_env_worker_ends_the_run_with_a_summary(script, tmp_path):
    """An --async-envs worker killed mid-run (SIGKILL, as the out-of-memory killer does): one error line, no traceback,
    summary.json with "status": "failed", the model saved, exit status 1, and the other worker stopped too."""
    out = tmp_path / "runs"
    flags = (
        PENDULUM + ["--num-envs", 2, "--async-envs"] + (["--num-steps", 64] if "ppo" in script else ["--learning-starts", 200])
    )
    cmd = [sys.executable, str(SCRIPTS / f"{script}.py"), *map(str, flags), "--output-dir", str(out)]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        for _ in range(1200):
            rows = list(out.glob("*/metrics.csv"))
            if rows and len(rows[0].read_text().splitlines()) > 4:
                break
            time.sleep(0.1)
        workers = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        assert len(workers) >= 2, workers
        os.kill(int(workers[0]), signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 1 and "Traceback" not in stderr, stderr[-3000:]
    assert errors == [errors[0]] and errors[0].startswith("error: --async-envs: an env worker died"), errors
    summary = json.loads(pathlib.Path(stdout.strip().splitlines()[-1]).read_text())
    assert summary["status"] == "failed" and 0 < summary["global_step"] < 1_000_000
    assert (pathlib.Path(stdout.strip().splitlines()[-1]).parent / "model.pt").exists()
    time.sleep(1)
    assert not [pid for pid in workers if alive(pid)], workers
