"""run.sh --slurm against a real Slurm: a single-node cluster on this machine (tests/slurm/start-cluster.sh, which
.ci/run starts). Skipped where no cluster answers; run by hand: `tests/slurm/start-cluster.sh && python -m pytest -m slurm`."""

import json
import re
import shutil
import subprocess
import sys
import time

import pytest
import torch
from helpers.background import wait_until
from helpers.run_sh import md_rows, read_results, run_sh
from helpers.scripts import ROOT, importable

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(
        not (importable("pandas") and importable("matplotlib")),
        reason="run.sh's tables and plots need pandas and matplotlib (requirements-dev.txt)",
    ),
]


def cluster_answers():
    states = (
        subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True).stdout.split()
        if shutil.which("sinfo")
        else []
    )
    return bool({"idle", "mix", "alloc"} & set(states))


@pytest.fixture(autouse=True)
def a_cluster():
    if not cluster_answers():
        pytest.skip("no Slurm cluster answers here (tests/slurm/start-cluster.sh starts one)")


def wait_for(job_ids, limit=900):
    """Until squeue no longer lists the jobs (the array's tasks and the aggregation); a job still listed after `limit`
    seconds (a guard against a stuck job, not a speed bound) fails the test with squeue's view of them."""
    end = time.time() + limit
    while True:
        listed = subprocess.run(
            ["squeue", "-h", "-j", ",".join(job_ids), "-o", "%i"], capture_output=True, text=True
        ).stdout.split()
        if not listed:
            return
        if time.time() > end:
            view = subprocess.run(["squeue", "-j", ",".join(job_ids), "-l"], capture_output=True, text=True).stdout
            raise AssertionError(f"Slurm jobs {job_ids} still listed after {limit} s:\n{view}")
        time.sleep(2)


def test_a_job_array_then_its_aggregation(tmp_path):
    out = tmp_path / "bench"
    # --jobs 1: the array's tasks one at a time (two torch processes on this 2-core machine would slow each other 10-70x)
    proc = run_sh(
        "--quick",
        "--scripts",
        "dqn,sac_continuous_action",
        "--variants",
        "baseline,fast",
        "--slurm",
        "--jobs",
        "1",
        "--out",
        out,
        check=0,
    )
    array, aggregation = re.search(
        r"job array (\d+) \(at most 1 at once\) and the aggregation job (\d+)", proc.stdout
    ).groups()
    assert f"squeue -j {array},{aggregation}" in proc.stdout
    wait_for([array, aggregation])
    assert "run.sh:" in (out / "slurm" / "aggregate.out").read_text()
    # one record file per task (no two tasks write one file), gathered into runs.tsv by the aggregation
    assert sorted(p.name for p in (out / "tasks").iterdir()) == [
        "1.0.tsv",
        "1.1.tsv",
        "1.2.tsv",
        "1.3.tsv",
    ]  # plan 1, tasks 0-3
    rows = read_results(out)
    assert sorted((r["algorithm"], r["variant"], r["status"]) for r in rows) == [
        ("dqn", "baseline", "finished"),
        ("dqn", "fast", "finished"),
        ("sac_continuous_action", "baseline", "finished"),
        ("sac_continuous_action", "fast", "finished"),
    ]
    table = md_rows(out)
    assert table[("dqn", "fast")]["runs"] == "1/1" and table[("sac_continuous_action", "baseline")]["speed-up"] == "1.00x"
    assert json.loads((out / "bench.json").read_text())["slurm"] is True
    assert json.loads((out / "machine.json").read_text())["cpu_count"]  # task 0 recorded the node it ran on
    # and --aggregate keeps working on what the jobs left
    (out / "results.csv").unlink()
    run_sh("--aggregate", out, check=0)
    assert len(read_results(out)) == 4


def test_sbatch_options_pass_through(tmp_path):
    out = tmp_path / "bench"
    proc = run_sh(
        "--quick",
        "--scripts",
        "dqn",
        "--variants",
        "baseline",
        "--slurm",
        "--slurm-args",
        "--time=10 --job-name=mine",
        "--out",
        out,
        check=0,
    )
    array, aggregation = re.search(r"job array (\d+) .* aggregation job (\d+)", proc.stdout).groups()
    wait_for([array, aggregation])
    for job in (array, aggregation):  # the user's options win over run.sh's (they come after them)
        record = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True).stdout
        assert "JobName=mine" in record and "TimeLimit=00:10:00" in record, record
    assert [r["status"] for r in read_results(out)] == ["finished"]


def test_an_append_submits_its_own_plan(tmp_path):
    """Two submissions into one folder: each array reads its own plan (the second never rewrites the first's, which
    may still be pending), and the last aggregation covers both."""
    out, jobs = tmp_path / "bench", []
    for args in (["--variants", "baseline"], ["--append", "--variants", "fast"]):
        proc = run_sh("--quick", "--scripts", "dqn", *args, "--slurm", "--out", out, check=0)
        jobs += re.search(r"job array (\d+) .* aggregation job (\d+)", proc.stdout).groups()
    wait_for(jobs)
    assert sorted(p.name for p in (out / "slurm").glob("plan.*.tsv")) == ["plan.1.tsv", "plan.2.tsv"]
    assert sorted(p.name for p in (out / "tasks").iterdir()) == ["1.0.tsv", "2.0.tsv"]
    run_sh("--aggregate", out, check=0)  # (the first aggregation may have run before the second array ended)
    assert sorted((r["variant"], r["status"]) for r in read_results(out)) == [("baseline", "finished"), ("fast", "finished")]


def test_a_requeued_task_goes_on_from_its_checkpoint(tmp_path):
    """As a preemption does: the task requeued midway (scontrol requeue) gets SIGTERM, its run checkpoints and stops;
    the task runs again and resumes that run in its folder. It completes, its model.pt equals that of an uninterrupted
    run of the same seed, and results.csv holds one row for it, recording the resume. run.sh submits with --requeue and
    --signal=B:USR1@120, which the task passes on to its run."""
    out = tmp_path / "bench"
    flags = ["--env-id", "Pendulum-v1", "--learning-starts", 200, "--log-interval", 50, "--save-model"]
    budget = ["--scripts", "sac_continuous_action", "--variants", "fast", "--seeds", "1", "--total-timesteps", 2500]
    proc = run_sh(*budget, "--slurm", "--out", out, "--", *flags, check=0)
    array, aggregation = re.search(r"job array (\d+) .* aggregation job (\d+)", proc.stdout).groups()
    record = subprocess.run(["scontrol", "show", "job", array], capture_output=True, text=True).stdout
    assert "Requeue=1" in record, record

    def rows():
        files = list(out.glob("runs/*/*/*/*/metrics.csv"))
        return len(files[0].read_text().splitlines()) - 1 if files else 0

    wait_until(lambda: rows() >= 8, 600, "the run's first metrics rows")
    subprocess.run(["scontrol", "requeue", f"{array}_0"], check=True)
    # Slurm holds a requeued job back (its begin time) for a while before it may start again: let it start now
    for _ in range(600):
        if squeue_reason(f"{array}_0") == "BeginTime":
            subprocess.run(["scontrol", "update", f"JobId={array}_0", "StartTime=now"], check=True)
            break
        time.sleep(0.2)
    wait_for([array, aggregation])
    (run_dir,) = out.glob("runs/*/*/*/*/")  # one run folder: the task went on in it
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["resumes"] == 1 and not (run_dir / "checkpoint.pt").exists()
    results = read_results(out)
    assert [(r["status"], r["resumes"]) for r in results] == [("finished", "1")]
    straight = tmp_path / "straight"
    command = [sys.executable, str(ROOT / "scripts/sac_continuous_action_torchcompile.py"), "--seed", "1"]
    command += ["--total-timesteps", "2500", *map(str, flags), "--output-dir", str(straight)]
    subprocess.run(command, check=True, capture_output=True, timeout=900)
    a = torch.load(next(straight.glob("*/model.pt")), weights_only=True)["model"]
    b = torch.load(run_dir / "model.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def squeue_reason(job):
    return subprocess.run(["squeue", "-h", "-j", job, "-o", "%r"], capture_output=True, text=True).stdout.strip()


@pytest.mark.skipif(not importable("optuna"), reason="optuna is not installed (requirements/requirements-tune.txt)")
def test_tuning_workers_on_slurm_share_one_study(tmp_path):
    """./run.sh --tune --slurm: a job array of two tuner workers, one trial each, sharing the study through a journal
    file, then the report job, once both ended, writes the study's tables from it."""
    journal, out = tmp_path / "study.journal", tmp_path / "tune"
    tune = ["dqn", "--param", "learning-rate=float:1e-4:1e-2:log", "--trials", "1", "--pruner", "none"]
    tune += ["--storage", f"journal:{journal}", "--out", str(out)]
    tune += ["--", "--total-timesteps", "1500", "--learning-starts", "500", "--log-interval", "250", "--no-cuda"]
    proc = subprocess.run(
        ["bash", str(ROOT / "run.sh"), "--tune", "--slurm", "--workers", "2", "--", *tune],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    array, report = re.search(r"as the job array (\d+) and the report job (\d+)", proc.stdout).groups()
    wait_for([array, report])
    rows = (out / "trials.csv").read_text().splitlines()
    assert len(rows) == 3 and all(",COMPLETE," in row.upper() for row in rows[1:]), rows
    assert "\npython scripts/dqn.py " in (out / "best.txt").read_text()
