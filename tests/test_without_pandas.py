"""Where pandas and matplotlib are missing, as on the GPU machine's image (they do not fit in what travels there):
run.sh records how it was called and the machine, runs its runs and records each, and leaves only the tables and plots
for a machine that has them, saying so in one line; and every test module imports, so that pytest collects the whole
suite (the tests that need pandas, matplotlib or ray skip with a reason). The missing packages are made missing for
real: a sitecustomize on PYTHONPATH puts None in sys.modules for them, so that `import pandas` fails in every process
these tests start."""

import json
import os
import subprocess
import sys

import pytest
from helpers.scripts import ROOT

MISSING = ["pandas", "matplotlib", "ray"]


@pytest.fixture
def without(tmp_path):
    """An environment for subprocesses in which pandas, matplotlib and ray cannot be imported."""
    site = tmp_path / "site"
    site.mkdir()
    lines = ["import sys"] + [f"sys.modules[{name!r}] = None  # as if not installed" for name in MISSING]
    (site / "sitecustomize.py").write_text("\n".join(lines) + "\n")
    path = os.pathsep.join([str(site), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path, PYTHON=sys.executable, PYTHONUNBUFFERED="1")
    for name in MISSING:  # the stand-in works: each import fails in a process started with it
        proc = subprocess.run([sys.executable, "-c", f"import {name}"], env=env, capture_output=True, text=True)
        assert proc.returncode == 1 and "ModuleNotFoundError" in proc.stderr, proc.stderr
    return env


def test_the_records_need_neither_pandas_nor_matplotlib(without, tmp_path):
    aggregate = [sys.executable, str(ROOT / "tools" / "aggregate.py")]
    bench = [*aggregate, "--record-bench", str(tmp_path), "--command=./run.sh --quick", "--quick", "--budget=dqn="]
    subprocess.run(bench, env=without, check=True, capture_output=True, text=True)
    subprocess.run([*aggregate, "--record-machine", str(tmp_path)], env=without, check=True, capture_output=True)
    assert json.loads((tmp_path / "bench.json").read_text())["quick"] is True
    assert json.loads((tmp_path / "machine.json").read_text())["torch"] != "not installed"
    proc = subprocess.run([*aggregate, str(tmp_path)], env=without, capture_output=True, text=True)
    assert proc.returncode == 3 and proc.stderr.strip().splitlines() == [
        "aggregate.py: the tables and plots need pandas and matplotlib (pip install -r requirements/requirements-dev.txt):"
        f" make them where those are installed, with ./run.sh --aggregate {tmp_path}"
    ]


def test_a_quick_run_sh_line_runs_and_records_its_run(without, tmp_path):
    out = tmp_path / "bench"
    cmd = ["bash", str(ROOT / "run.sh"), "--quick", "--scripts", "dqn", "--variants", "fast", "--out", str(out)]
    proc = subprocess.run(cmd, env=without, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = (out / "runs.tsv").read_text().splitlines()
    assert len(rows) == 2 and rows[1].split("\t")[:4] == ["dqn", "fast", "1", "finished"], rows
    assert (out / "bench.json").is_file() and (out / "machine.json").is_file()
    summary = json.loads((out / rows[1].split("\t")[5]).read_text())
    assert summary["status"] == "finished" and summary["script"] == "dqn_torchcompile"
    assert not (out / "results.md").exists()
    assert f"make them where those are installed, with ./run.sh --aggregate {out}" in proc.stderr, proc.stderr


def test_every_test_module_is_collected(without):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=without,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0 and "error" not in proc.stdout.splitlines()[-1], proc.stdout[-3000:] + proc.stderr[-3000:]
    assert " tests collected" in proc.stdout.splitlines()[-1], proc.stdout[-500:]
