"""The tools that write the results files behind the pages' tables: tools/micro.py times the scripts' own functions
two ways each and records the machine; tools/torchrun.py runs both ways and writes a row per run; tools/suite.py keeps
the other tier's row; each refuses bad input in one line."""

import csv
import json
import subprocess
import sys

from helpers.scripts import ROOT, load_tool

TOOLS = ROOT / "tools"


def test_micro_times_the_scripts_own_functions(tmp_path):
    """GAE, the baselines' loop against the fast files' loop-free form: the same advantages, each row timed, the
    machine and the commit recorded beside them."""
    command = [sys.executable, TOOLS / "micro.py", "--only", "gae", "--blocks", "1", "--out", tmp_path]
    subprocess.run(command, check=True, cwd=ROOT, capture_output=True, timeout=300)
    with open(tmp_path / "micro.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["case"], r["variant"]) for r in rows] == [
        ("ppo_continuous_action, 2048 x 1", "loop (baseline)"),
        ("ppo_continuous_action, 2048 x 1", "fast"),
        ("ppo_atari, 128 x 8", "loop (baseline)"),
        ("ppo_atari, 128 x 8", "fast"),
    ]
    for row in rows:
        assert 0 < float(row["low_us"]) <= float(row["median_us"]) <= float(row["high_us"])
    for row in rows[1::2]:
        assert float(row["extra"].removeprefix("max diff ")) < 1e-4, row
    info = json.loads((tmp_path / "machine.json").read_text())
    assert info["git_commit"] and info["cpu_model"] and "cpu_flags" in info
    # the pages' table reads it as it reads the published file
    tables = load_tool(TOOLS / "tables.py")
    tables.RESULTS, tables.MICRO = tmp_path.parent, tmp_path.name
    lines = tables.micro_table("gae")
    assert lines[0].startswith("Timed by `python tools/micro.py` on a ") and info["git_commit"][:7] in lines[0]
    assert lines[-1].startswith("| ppo_atari, 128 x 8 | fast |") and "| 1.00x |" in lines[-1]
    loop = lines[-2].split(" | ")
    assert loop[1] == "loop (baseline)", loop
    assert loop[3] == f"{float(rows[2]['median_us']) / float(rows[3]['median_us']):.2f}x", loop


def test_the_doc_tools_refuse_bad_input_in_one_line(tmp_path):
    for tool, flags, said in [
        ("micro.py", ["--only", "gae,nope"], "--only: no part nope"),
        ("micro.py", ["--blocks", "0"], "--blocks: at least 1"),
        ("torchrun.py", ["--seeds", "one"], "--seeds: a comma-separated list of integers"),
        ("torchrun.py", ["--total-timesteps", "-5"], "--total-timesteps: at least 1"),
    ]:
        proc = subprocess.run(
            [sys.executable, TOOLS / tool, *flags, "--out", tmp_path], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 2 and said in proc.stderr.strip().splitlines()[-1], (tool, proc.stderr)


def test_suite_keeps_the_other_tier_s_row():
    suite = load_tool(TOOLS / "suite.py")
    quick, full, again = dict(tier="quick", wall_s="200"), dict(tier="full", wall_s="1500"), dict(tier="quick", wall_s="190")
    assert suite.merged([], full) == [full]
    assert suite.merged([full], quick) == [quick, full]
    assert suite.merged([quick, full], again) == [again, full]


def test_torchrun_runs_both_ways_and_writes_a_row_per_run(tmp_path):
    """Two short runs (2 iterations), 2 ranks under torchrun and 1 process: both finish with a speed and a return."""
    command = [sys.executable, TOOLS / "torchrun.py", "--seeds", "1", "--total-timesteps", "2048", "--out", tmp_path]
    subprocess.run(command, check=True, cwd=ROOT, capture_output=True, timeout=600)
    with open(tmp_path / "torchrun.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["mode"] for r in rows] == ["2 ranks x 4 envs (torchrun, gloo)", "1 process x 8 envs"]
    assert all(r["status"] == "finished" and float(r["sps"]) > 0 and r["episodic_return"] for r in rows), rows
