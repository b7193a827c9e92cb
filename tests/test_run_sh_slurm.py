"""run.sh --slurm against a real Slurm: a single-node cluster on this machine (tests/slurm/start-cluster.sh, which
.ci/run starts). Skipped where no cluster answers; run by hand: `tests/slurm/start-cluster.sh && python -m pytest -m slurm`."""

import json
import re
import shutil
import subprocess
import time

import pytest
from helpers.run_sh import md_rows, read_results, run_sh
from helpers.scripts import importable

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
