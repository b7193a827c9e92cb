"""tools/tune.py, the tuner, on real runs of the DQN file (CartPole-v1, short budgets): a small study finds finite
scores and writes its outputs; the pruner stops a run with SIGTERM, whose summary says so; two workers share one study;
a worker killed with SIGKILL mid-trial has its run stopped and its trial failed and run again, with the same flags, by
the next worker; a real PostgreSQL, started here on loopback, serves one study to two workers; and what a user types
wrong ends in one line, the study as it was."""

import glob
import hashlib
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest
from helpers.scripts import ROOT, importable

pytestmark = pytest.mark.skipif(
    not importable("optuna"), reason="optuna is not installed (requirements/requirements-tune.txt)"
)
TUNE = ROOT / "tools" / "tune.py"
RUN = ["--", "--total-timesteps", "1500", "--learning-starts", "500", "--log-interval", "250", "--no-cuda"]
SPACE = ["--param", "learning-rate=float:1e-4:1e-2:log", "--param", "batch-size=choice:32,64", "--pruner", "none"]


def tune(*args, cwd=None, timeout=600, wait=True):
    cmd = [sys.executable, str(TUNE), "dqn", *map(str, args)]
    if not wait:
        return subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def trials(storage, name="tune-dqn"):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False)


def test_a_small_study_scores_its_trials_and_writes_its_report(tmp_path):
    out = tmp_path / "out"
    done = tune(*SPACE, "--trials", 3, "--seeds", "1,2", "--sampler-seed", 0, "--out", out, *RUN)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = (out / "trials.csv").read_text().splitlines()
    assert rows[0].startswith("number,state,value,batch_size,learning_rate,") and len(rows) == 4, rows
    study = trials(f"sqlite:///{out / 'study.db'}")
    assert [t.state.name for t in study] == ["COMPLETE"] * 3 and all(t.value > 0 for t in study)
    for t in study:  # the score: the mean of the two seeds' last-episodes return (summary.json's episodic_return)
        summaries = [
            json.loads(p.read_text()) for p in sorted((out / "runs" / f"trial-{t.number}").glob("seed*/*/summary.json"))
        ]
        assert [s["args"]["seed"] for s in summaries] == [1, 2] and {s["status"] for s in summaries} == {"finished"}
        assert t.value == pytest.approx(sum(s["episodic_return"] for s in summaries) / 2)
        assert summaries[0]["args"]["learning_rate"] == t.params["learning_rate"]
        assert t.intermediate_values  # metrics.csv's rows, as they came
    best = (out / "best.txt").read_text().splitlines()
    assert best[1].startswith("python scripts/dqn.py --learning-rate ") and "--total-timesteps 1500" in best[1], best
    assert (out / "trials.md").read_text().count("| COMPLETE |") == 3
    for png in ("optimization_history.png", "param_importances.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    # the same study resumed by name: its trials go on from there
    again = tune(*SPACE, "--trials", 1, "--out", out, *RUN)
    assert again.returncode == 0 and len(trials(f"sqlite:///{out / 'study.db'}")) == 4, again.stderr[-2000:]


def test_the_pruner_stops_a_run_with_sigterm(tmp_path):
    """Three trials act greedily with their untrained network (returns about 80 on CartPole), then one acts at random
    (about 20): below the median at its first row, it is pruned; its run ends by SIGTERM and says so in its summary."""
    space = tmp_path / "space.py"
    space.write_text(
        "def params(trial):\n"
        "    e = 0.0 if trial.number < 3 else 1.0  # the untrained network's greedy actions, then random ones\n"
        "    return {'start-e': e, 'end-e': e}\n"
    )
    out = tmp_path / "out"
    flags = ["--", "--total-timesteps", "30000", "--learning-starts", "29000", "--log-interval", "100", "--no-cuda"]
    done = tune(
        "--space", space, "--trials", 4, "--pruner", "median", "--prune-after", 0, "--poll-s", 0.2, "--out", out, *flags
    )
    assert done.returncode == 0, done.stderr[-3000:]
    study = trials(f"sqlite:///{out / 'study.db'}")
    assert [t.state.name for t in study] == ["COMPLETE"] * 3 + ["PRUNED"], [t.state.name for t in study]
    (summary,) = (out / "runs" / "trial-3").glob("seed1/*/summary.json")
    stopped = json.loads(summary.read_text())
    assert stopped["status"] == "terminated" and stopped["global_step"] < 30000, stopped["global_step"]
    assert (out / "trials.md").read_text().count("| PRUNED |") == 1


def test_two_workers_share_one_study(tmp_path):
    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    workers = [
        tune(*SPACE, "--trials", 2, "--storage", storage, "--out", tmp_path / f"w{i}", "--no-report", *RUN, wait=False)
        for i in range(2)
    ]
    for w in workers:
        assert w.wait(timeout=600) == 0, w.stderr.read()[-3000:]
    study = trials(storage)
    assert len(study) == 4 and {t.state.name for t in study} == {"COMPLETE"}
    assert len({t.user_attrs["worker"] for t in study}) == 2  # both ran trials of the one study
    report = tune("--report-only", "--storage", storage, "--out", tmp_path / "report")
    assert report.returncode == 0 and (tmp_path / "report" / "trials.md").read_text().count("| COMPLETE |") == 4


def test_a_killed_worker_s_trial_is_run_again_with_its_flags(tmp_path):
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    beat = ["--heartbeat-s", 1, "--grace-s", 3, "--storage", storage]
    long_run = ["--", "--total-timesteps", "200000", "--learning-starts", "500", "--log-interval", "250", "--no-cuda"]
    first = tune(*SPACE, "--trials", 1, *beat, "--out", tmp_path / "first", *long_run, wait=False)
    deadline = time.time() + 300
    while not glob.glob(str(tmp_path / "first" / "runs" / "trial-0" / "seed1" / "*" / "metrics.csv")):  # training
        assert time.time() < deadline and first.poll() is None, first.stderr.read() if first.poll() is not None else "slow"
        time.sleep(0.5)
    time.sleep(2)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    # its run had the worker for a parent: it gets SIGTERM, checkpoints and says so
    summary = tmp_path / "first" / "runs" / "trial-0" / "seed1"
    while not list(summary.glob("*/summary.json")):
        assert time.time() < deadline, "the killed worker's run went on"
        time.sleep(0.5)
    assert json.loads(next(summary.glob("*/summary.json")).read_text())["status"] == "terminated"
    assert [t.state.name for t in trials(storage)] == ["RUNNING"]  # as the dead worker left it
    time.sleep(4)  # past the grace period
    second = tune(*SPACE, "--trials", 1, *beat, "--out", tmp_path / "second", *RUN)
    assert second.returncode == 0, second.stderr[-3000:]
    dead, retried = trials(storage)
    assert dead.state.name == "FAIL" and retried.state.name == "COMPLETE"
    assert retried.system_attrs["failed_trial"] == dead.number and retried.params == dead.params


def test_a_worker_stopped_by_sigterm_queues_its_trial_again(tmp_path):
    """SIGTERM to a worker (Slurm's time limit, kill): its running trial's run stops with its checkpoint and summary,
    the trial fails and is queued again with its flags, the report is written and the worker exits 143 saying so; the
    same command then runs the queued trial first."""
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    long_run = ["--", "--total-timesteps", "200000", "--learning-starts", "500", "--log-interval", "250", "--no-cuda"]
    first = tune(*SPACE, "--trials", 2, "--storage", storage, "--out", tmp_path / "out", *long_run, wait=False)
    deadline = time.time() + 300
    while not glob.glob(str(tmp_path / "out" / "runs" / "trial-0" / "seed1" / "*" / "metrics.csv")):  # training
        assert time.time() < deadline and first.poll() is None, first.stderr.read() if first.poll() is not None else "slow"
        time.sleep(0.5)
    first.send_signal(signal.SIGTERM)
    _, stderr = first.communicate(timeout=300)
    assert first.returncode == 143, stderr[-3000:]
    assert stderr.strip().splitlines()[-1] == (
        "tune.py: stopped by SIGTERM (trials 0 failed and queued again); the same command goes on with the study"
    )
    (summary,) = (tmp_path / "out" / "runs" / "trial-0" / "seed1").glob("*/summary.json")
    assert json.loads(summary.read_text())["status"] == "terminated" and (summary.parent / "checkpoint.pt").is_file()
    stopped, queued = trials(storage)
    assert (stopped.state.name, queued.state.name) == ("FAIL", "WAITING")
    assert stopped.user_attrs["error"] == "stopped by SIGTERM, queued again" and queued.user_attrs["failed_trial"] == 0
    assert "| FAIL |" in (tmp_path / "out" / "trials.md").read_text()
    again = tune(*SPACE, "--trials", 1, "--storage", storage, "--out", tmp_path / "out", *RUN)
    assert again.returncode == 0, again.stderr[-3000:]
    stopped, retried = trials(storage)
    assert retried.state.name == "COMPLETE" and retried.params == stopped.params


def test_a_run_that_diverged_prunes_its_trial_and_the_study_goes_on(tmp_path):
    """A learning rate that sends DQN's Q values to inf: each run ends "diverged" (exit 1); that is what the flags did,
    not the script failing, so the trials are pruned and the three-failures stop does not apply."""
    done = tune("--param", "learning-rate=float:1e29:1e30:log", "--trials", 3, "--out", tmp_path, *RUN)
    assert done.returncode == 0, done.stderr[-3000:]
    study = trials(f"sqlite:///{tmp_path / 'study.db'}")
    assert [t.state.name for t in study] == ["PRUNED"] * 3
    assert all(t.user_attrs["error"].startswith("seed1: diverged at step ") for t in study), [t.user_attrs for t in study]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def postgresql():
    """A PostgreSQL cluster of its own in a temporary folder, on a free loopback port, run as the postgres user where
    this is root (the server refuses root); stopped by its pid afterwards. Skipped where Debian's server is missing."""
    binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
    if not binaries:
        pytest.skip("no PostgreSQL server here (Debian's postgresql package; .ci/run installs it)")
    bin_dir = pathlib.Path(binaries[-1])
    folder = pathlib.Path(tempfile.mkdtemp(prefix="tune-pg-"))
    as_user = []
    if os.geteuid() == 0:  # root: the server runs as postgres, in a folder it owns
        shutil.chown(folder, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = folder / "data", free_port()
    subprocess.run(
        [*as_user, bin_dir / "initdb", "-D", data, "-U", "postgres", "--auth", "trust"], check=True, capture_output=True
    )
    server = subprocess.Popen(
        [*as_user, bin_dir / "postgres", "-D", data, "-h", "127.0.0.1", "-p", str(port), "-k", folder],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    deadline = time.time() + 60
    while subprocess.run([bin_dir / "pg_isready", "-h", "127.0.0.1", "-p", str(port)], capture_output=True).returncode:
        assert server.poll() is None and time.time() < deadline, server.stderr.read()
        time.sleep(0.3)
    try:
        yield url
    finally:
        postmaster = int((data / "postmaster.pid").read_text().split()[0])
        os.kill(postmaster, signal.SIGINT)  # a fast shutdown, by the server's own pid
        server.wait(timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_postgresql_study_serves_two_workers(postgresql, tmp_path):
    workers = [
        tune(*SPACE, "--trials", 2, "--storage", postgresql, "--out", tmp_path / f"w{i}", "--no-report", *RUN, wait=False)
        for i in range(2)
    ]
    for w in workers:
        assert w.wait(timeout=600) == 0, w.stderr.read()[-3000:]
    study = trials(postgresql)
    assert len(study) == 4 and {t.state.name for t in study} == {"COMPLETE"}
    assert len({t.user_attrs["worker"] for t in study}) == 2


def fingerprint(path):
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


@pytest.fixture(scope="module")
def a_study(tmp_path_factory):
    """A study of one complete trial, made once: each wrong command below is typed into a copy of it."""
    out = tmp_path_factory.mktemp("a-study") / "out"
    first = tune("--param", "learning-rate=float:1e-4:1e-2", "--trials", 1, "--out", out, *RUN)
    assert first.returncode == 0, first.stderr[-2000:]
    return out


@pytest.mark.parametrize(
    "args,error",
    [
        (["--param", "lr=float:1e-4:1e-2"], "--param lr: not a flag of the script (its flags: --exp-name,"),
        (["--param", "learning-rate=float:1e-2:1e-4"], "--param learning-rate=float:1e-2:1e-4: an empty range"),
        (["--param", "learning-rate=float:0:1:log"], "a log range needs LOW above 0"),
        (["--param", "batch-size=choice:"], "--param batch-size=choice:: expected"),
        (["--param", "batch-size=uniform:1:2"], "expected batch-size=float:LOW:HIGH[:log]"),
        (["--space", "{space}"], "defines no params(trial) function"),
        ([], "no search space: give --param NAME=SPEC"),
        (
            ["--param", "learning-rate=float:1e-4:1e-2", "--storage", "postgresql+psycopg://nobody@127.0.0.1:1/x"],
            "cannot be reached",
        ),
        (["--param", "learning-rate=float:1e-4:1e-2", "--env-ids", "CartPole-v1,Acrobot-v1"], "need --target-scores"),
        (["--param", "learning-rate=float:1e-4:1e-2", "--seeds", "a"], "--seeds a: a comma-separated list"),
        (["--space", "{space}.txt"], "space.py.txt: a Python file, FILE.py"),
        (["--param", "learning-rate=float:1e-4:1e-2", "--poll-s", "0"], "--poll-s: must be above 0, got 0.0"),
        (["--param", "learning-rate=float:1e-4:1e-2", "--prune-after", "-1"], "--prune-after: must be 0 or more"),
        (["--param", "learning-rate=float:1e-4:1e-2", "--", "--total-timesteps", "1e5"], "-- --total-timesteps 1e5: an"),
        (["--param", "learning-rate=float:1e-4:1e-2", "--", "--seed", "3"], "-- --seed: set by the tuner for each run"),
    ],
    ids=["flag", "range", "log", "choice", "kind", "space", "none", "storage", "targets", "seeds", "space-file", "poll"]
    + ["prune-after", "budget", "own-flag"],
)
def test_what_a_user_types_wrong_ends_in_one_line_and_leaves_the_study(args, error, a_study, tmp_path):
    (tmp_path / "space.py").write_text("x = 1\n")
    out = tmp_path / "out"
    shutil.copytree(a_study, out)
    before = fingerprint(out / "study.db")
    done = tune(*[a.format(space=tmp_path / "space.py") for a in args], "--out", out, *RUN, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and error in done.stderr, done.stderr
    assert done.stderr.startswith("tune.py: error: ")
    assert fingerprint(out / "study.db") == before


def test_a_script_that_fails_in_every_trial_stops_the_study_in_one_line(tmp_path):
    """--gamma 2 is refused by the script (one line of its own): three failed trials in a row stop the study."""
    done = tune("--param", "learning-rate=float:1e-4:1e-2", "--trials", 10, "--out", tmp_path, "--", "--gamma", "2")
    assert done.returncode == 1, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("tune.py: error: three trials in a row failed") and "--gamma: must be in [0, 1], got 2" in last
    assert [t.state.name for t in trials(f"sqlite:///{tmp_path / 'study.db'}")] == ["FAIL"] * 3


def test_run_sh_tune_runs_the_tuner_and_refuses_a_slurm_study_no_node_can_share(tmp_path):
    """./run.sh --tune -- ARGS is tools/tune.py ARGS, here; with --slurm it wants a storage every node reaches, and says
    so in one line before submitting anything (the Slurm workers themselves: tests/test_run_sh_slurm.py)."""
    out = tmp_path / "out"
    cmd = ["bash", str(ROOT / "run.sh"), "--tune", "--", "dqn", *SPACE, "--trials", "1", "--out", str(out), *RUN]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "trials.csv").is_file() and "\npython scripts/dqn.py " in (out / "best.txt").read_text()
    for storage, said in [
        (["--storage", f"sqlite:///{tmp_path / 'x.db'}"], "a sqlite file is no storage for many nodes"),
        ([], "give tools/tune.py a --storage that every node reaches"),
    ]:
        cmd = ["bash", str(ROOT / "run.sh"), "--tune", "--slurm", "--", "dqn", *SPACE, *storage, *RUN]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert done.returncode != 0 and done.stderr.count("\n") == 1 and said in done.stderr, done.stderr
