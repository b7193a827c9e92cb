"""doc/maintainers/gpu_check.sh, the GPU check in two commands: its one-line errors, and part 1's dry run with a time
budget that leaves only envpool's step: the steps that do not fit are skipped and say so, the one that fits writes its
figures, and the folder, its summary, its machine record (with the commit) and its archive are there."""

import json
import os
import subprocess
import sys
import tarfile
import zipfile

import pytest
import torch
from helpers.scripts import ROOT

CHECK = ROOT / "doc" / "maintainers" / "gpu_check.sh"


def stand_in_deps(folder):
    """A .gpu-deps/ whose archives hold nothing: every library then comes from this environment (ours, no jax)."""
    (folder / "leanrl").mkdir(parents=True)
    (folder / "LeanRL" / "leanrl").mkdir(parents=True)
    (folder / "LeanRL.commit").write_text("8dbb633\n")
    empty = folder / "empty"
    empty.mkdir()
    for archive in (folder / "site.tar.xz", folder / "leanrl" / "site-2024.tar.xz"):
        with tarfile.open(archive, "w:xz") as tar:
            tar.add(empty, arcname=".")
    with zipfile.ZipFile(folder / "leanrl" / "tensordict-0.13.0-cp312-cp312-manylinux_2_28_x86_64.whl", "w") as whl:
        whl.writestr("tensordict-0.13.0.dist-info/METADATA", "Name: tensordict\nVersion: 0.13.0\n")
    return folder


def check(*args, deps, timeout=300):
    env = {**os.environ, "PYTHON": sys.executable, "GPU_CHECK_DEPS": str(deps)}
    return subprocess.run(["bash", CHECK, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.parametrize(
    "args,error",
    [
        (["3", "x"], "the first argument is pack, 1 or 2, not '3'"),
        (["1"], "1 DIR: the folder to write into"),
        (["1", "--dry"], "1 DIR: the folder to write into"),
        (["1", "{new}", "--budget-s", "30"], "--budget-s: seconds, 60 or more, not '30'"),
        (["1", "{new}", "--budget-s"], "--budget-s: seconds, 60 or more, not ''"),
        (["1", "{new}", "--budget-s", "0600"], "--budget-s: seconds, 60 or more, not '0600'"),
        (["1", "{new}", "--only", "dqn"], "--only dqn: not a step of part 1 (ppo-atari-seed1, ppo-atari-seed2, envpool,"),
        (["1", "{new}", "--archive", "{new}/x/a.tgz"], "--archive {new}/x/a.tgz: no folder {new}/x"),
        (["1", "{new}", "--baselines"], "--baselines: an option of part 2"),
        (["2", "{new}", "--fast"], "unknown option --fast"),
        (["1", "{full}"], "holds an earlier check: give a new folder"),
        (["1", "{new}"], "no .gpu-deps/"),
        (["pack"], "pack: --leanrl DIR, a checkout of LeanRL"),
        (["pack", "--leanrl", "{new}"], "pack: --leanrl DIR, a checkout of LeanRL"),
    ],
    ids=[
        "part",
        "no-dir",
        "option-for-dir",
        "budget",
        "budget-value",
        "budget-octal",
        "only",
        "archive",
        "baselines",
        "option",
        "full",
        "deps",
        "pack",
        "pack-dir",
    ],
)
def test_bad_input_fails_with_one_line(args, error, tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "summary.md").write_text("an earlier check\n")
    args = [a.format(new=tmp_path / "new", full=tmp_path / "full") for a in args]
    deps = stand_in_deps(tmp_path / "deps") if "--archive" in args else tmp_path / "no-deps"
    proc = check(*args, deps=deps)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    error = error.format(new=tmp_path / "new")
    assert proc.stderr.startswith("gpu_check.sh: error: ") and error in proc.stderr, proc.stderr
    assert not (tmp_path / "new").exists()


def test_help_says_how_to_run_both_parts(tmp_path):
    proc = check("--help", deps=tmp_path)
    assert proc.returncode == 0 and "gpu_check.sh 1 DIR" in proc.stdout and "gpu_check.sh 2 DIR" in proc.stdout
    assert "--budget-s" in proc.stdout and "--dry" in proc.stdout and "set -uo" not in proc.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is here: the machine record differs")
def test_part_1_runs_what_its_time_allows_and_says_what_it_skipped(tmp_path):
    deps = stand_in_deps(tmp_path / "deps")
    out, archive = tmp_path / "check" / "part1", tmp_path / "gpu-check-1.tgz"
    # 100 s: the PPO Atari runs need 150 and 120 s beside the 40 kept for envpool, the baselines 150: only envpool runs
    proc = check("1", out, "--dry", "--budget-s", 100, "--archive", archive, deps=deps, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = (out / "summary.md").read_text()
    lines = summary.splitlines()
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty", "--abbrev=12"], cwd=ROOT, capture_output=True, text=True
    )
    assert lines[0] == f"# GPU check, part 1 ({commit.stdout.strip()}, none)", lines[0]
    for name in ("ppo-atari-seed1", "ppo-atari-seed2", "ppo-atari-baselines"):
        assert any(line.startswith(f"- {name}: skipped, ") for line in lines), summary
    assert "gpu_check.sh 2 DIR --baselines" in summary and any(line.startswith("- envpool: exit 0, ") for line in lines)
    assert summary.count("# envpool alone: Breakout-v5") == 6 and summary.count("Median: **") == 6, summary
    rates = sorted(p.name for p in (out / "envpool").glob("*.json"))
    assert rates == [
        "rate-mode-async-batch-size-4.json",
        "rate-mode-async-num-envs-16-batch-size-8.json",
        "rate-mode-pools.json",
        "rate-threads-8-no-episodic-life.json",
        "rate-threads-8.json",
        "rate.json",
    ]
    figures = json.loads((out / "envpool" / "rate-mode-pools.json").read_text())
    assert figures["mode"] == "pools" and figures["batches"] == 100 and figures["rate"] > 0
    machine = (out / "machine.txt").read_text()
    assert f"commit: {commit.stdout.strip()}" in machine and "LeanRL: 8dbb633" in machine and "cuda: False" in machine
    assert "part: 1; budget: 100 s; dry: 1" in machine
    assert proc.stdout.rstrip().endswith(lines[-1]) and lines[-1].startswith("- part 1: ")
    assert lines[-1].endswith(" s of 100; every step that ran exited 0"), lines[-1]
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert {"part1/summary.md", "part1/machine.txt", "part1/logs/envpool.log", "part1/envpool/rate.json"} <= set(names)
    assert not archive.with_name(archive.name + ".part").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is here")
def test_part_1_without_cuda_stops_at_once_unless_dry(tmp_path):
    deps = stand_in_deps(tmp_path / "deps")
    proc = check("1", tmp_path / "part1", deps=deps)
    assert proc.returncode == 2 and "no CUDA here: stop (--dry runs the check without it)" in proc.stderr, proc.stderr
    assert "cuda: False" in (tmp_path / "part1" / "machine.txt").read_text()


def test_the_gap_runner_runs_the_fast_file_with_a_cached_env_step_and_tf32(tmp_path):
    # the fast PPO Atari file, unchanged, through doc/maintainers/ppo_atari_gap.py: envpool's step answered from the
    # first result (called once for real), float32 matrix products in TF32, its steps/s from its summary
    flags = ["--total-timesteps", 2048, "--num-envs", 4, "--num-steps", 128, "--measure-burnin", 1, "--output-dir", tmp_path]
    proc = subprocess.run(
        [sys.executable, ROOT / "doc" / "maintainers" / "ppo_atari_gap.py", "--cached-env", "--tf32", "--", *map(str, flags)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[-3:-1] == ["float32 matrix products at the end: high precision", "env steps: 512 calls, 1 of them real"]
    (summary,) = [json.loads(p.read_text()) for p in tmp_path.glob("*/summary.json")]
    sps = f"{summary['sps']:.1f}"
    assert lines[-1] == f"PPO Atari fast file with a cached env step and TF32: {sps} steps/s (finished)", lines[-1]
    assert summary["status"] == "finished" and summary["global_step"] == 2048


def test_a_step_that_fails_is_named_and_the_command_exits_1(tmp_path):
    # envpool's step, alone (--only), with a stand-in envpool that imports but makes no envs: each of its six commands
    # fails, the step says so, the command's last line names it and it exits 1; the archive holds the logs
    deps = stand_in_deps(tmp_path / "deps")
    site = tmp_path / "site"
    (site / "envpool").mkdir(parents=True)
    (site / "envpool" / "__init__.py").write_text(
        "__version__ = 'stand-in'\n\ndef make(*args, **kwargs):\n    raise RuntimeError('a stand-in envpool makes no envs')\n"
    )
    with tarfile.open(deps / "site.tar.xz", "w:xz") as tar:
        tar.add(site, arcname=".")
    out, archive = tmp_path / "part1", tmp_path / "gpu-check-1.tgz"
    proc = check("1", out, "--dry", "--only", "envpool", "--archive", archive, deps=deps, timeout=600)
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = (out / "summary.md").read_text().splitlines()
    assert [line for line in lines if line.startswith("- ")][0].startswith("- envpool: exit 1, "), lines
    assert not any("ppo-atari" in line for line in lines), lines  # the steps --only left out: not a line
    assert lines[-1].endswith("; steps that failed: envpool"), lines[-1]
    assert (out / "logs" / "envpool.log").read_text().count("RuntimeError: a stand-in envpool makes no envs") == 6
    with tarfile.open(archive) as tar:
        assert "part1/logs/envpool.log" in tar.getnames()
