"""tools/gpu_check.sh, the GPU check in two commands: its one-line errors; part 1's dry run with a time
budget that leaves only envpool's step (the steps that do not fit are skipped and say so, the exit status too, the one
that fits writes its figures, and the folder, its summary, its machine record and its archive are there); a hanging
run that costs only its own cap, and a run of ours cut mid-way whose archive comes back whole, without its checkpoint;
a setup that fails with its traceback, still archived."""

import json
import os
import subprocess
import sys
import tarfile
import zipfile

import pytest
import torch
from helpers.scripts import ROOT

CHECK = ROOT / "tools" / "gpu_check.sh"


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


def check(*args, deps, timeout=300, **env):
    env = {**os.environ, "PYTHON": sys.executable, "GPU_CHECK_DEPS": str(deps), "GPU_CHECK_CACHE": str(deps / "cache"), **env}
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
        (["1", "{new}", "--only", "dqn"], "--only dqn: not a step of part 1 (ppo-atari-seed1-ours, ppo-atari-seed1-leanrl,"),
        (["1", "{new}", "--archive", "{new}/x/a.tgz"], "--archive {new}/x/a.tgz: no folder {new}/x"),
        (["2", "{new}", "--extras"], "--extras: an option of part 1"),
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
        "extras",
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
    # 60 s: each PPO Atari run needs 45 s beside the 25 kept for envpool (the JAX runs keep 115): only envpool runs
    proc = check("1", out, "--dry", "--budget-s", 60, "--archive", archive, deps=deps, timeout=600)
    assert proc.returncode == 3, proc.stderr[-3000:]  # 3: nothing failed, but steps were skipped for time
    summary = (out / "summary.md").read_text()
    lines = summary.splitlines()
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty", "--abbrev=12"], cwd=ROOT, capture_output=True, text=True
    )
    assert lines[0] == f"# GPU check, part 1 ({commit.stdout.strip()}, none)", lines[0]
    runs = [f"ppo-atari-seed{seed}-{side}" for seed, side in [(1, "ours"), (1, "leanrl"), (1, "jax"), (2, "jax")]]
    runs += ["ppo-atari-seed2-leanrl", "ppo-atari-seed2-ours"]
    for name in runs:
        assert any(line.startswith(f"- {name}: skipped, ") for line in lines), summary
    assert any(line.startswith("- envpool: exit 0, ") for line in lines)
    assert not any("extras" in line or "baselines" in line for line in lines), summary  # opt-in: --extras
    assert summary.count("# envpool alone: Breakout-v5") == 2 and summary.count("Median: **") == 2, summary
    rates = sorted(p.name for p in (out / "envpool").glob("*.json"))
    assert rates == ["rate-threads-8.json", "rate.json"]
    figures = json.loads((out / "envpool" / "rate-threads-8.json").read_text())
    assert figures["mode"] == "sync" and figures["batches"] == 100 and figures["rate"] > 0
    machine = (out / "machine.txt").read_text()
    assert f"commit: {commit.stdout.strip()}" in machine and "LeanRL: 8dbb633" in machine and "cuda: False" in machine
    assert "part: 1; budget: 60 s; dry: 1" in machine and f"cache: {deps / 'cache'}, " in machine
    assert proc.stdout.rstrip().endswith(lines[-1]) and lines[-1].startswith("- part 1: ")
    assert lines[-1].endswith(" s of 60; skipped for time: " + " ".join(runs)), lines[-1]
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert {"part1/summary.md", "part1/machine.txt", "part1/logs/envpool.log", "part1/envpool/rate.json"} <= set(names)
    assert not archive.with_name(archive.name + ".part").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is here")
def test_part_1_without_cuda_stops_at_once_unless_dry(tmp_path):
    deps = stand_in_deps(tmp_path / "deps")
    archive = tmp_path / "gpu-check-1.tgz"
    proc = check("1", tmp_path / "part1", "--archive", archive, deps=deps)
    assert proc.returncode == 1 and "no CUDA here: stop (--dry runs the check without it)" in proc.stderr, proc.stderr
    assert "cuda: False" in (tmp_path / "part1" / "machine.txt").read_text()
    lines = (tmp_path / "part1" / "summary.md").read_text().splitlines()
    assert lines[-1].endswith("setup failed, no step ran") and not any(" exit " in line for line in lines), lines
    with tarfile.open(archive) as tar:  # what the setup found comes back
        assert "part1/machine.txt" in tar.getnames()


def test_a_failed_import_shows_its_traceback_and_is_archived(tmp_path):
    # a stand-in tyro that fails on import: the import's traceback is printed and kept, no step runs, the archive holds it
    deps = stand_in_deps(tmp_path / "deps")
    site = tmp_path / "site"
    (site / "tyro").mkdir(parents=True)
    (site / "tyro" / "__init__.py").write_text("raise ImportError('a stand-in tyro that does not import')\n")
    with tarfile.open(deps / "site.tar.xz", "w:xz") as tar:
        tar.add(site, arcname=".")
    out, archive = tmp_path / "part2", tmp_path / "gpu-check-2.tgz"
    proc = check("2", out, "--dry", "--archive", archive, deps=deps)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "setup failed: a library the scripts import is missing" in proc.stderr
    assert "Traceback (most recent call last)" in proc.stderr and "a stand-in tyro that does not import" in proc.stderr
    summary = (out / "summary.md").read_text()
    assert "- setup: failed: " in summary and "ImportError: a stand-in tyro that does not import" in summary, summary
    assert not (out / "logs" / "pytest-collect.log").exists()
    with tarfile.open(archive) as tar:
        setup_log = tar.extractfile("part2/logs/setup.log").read().decode()
    assert "ImportError: a stand-in tyro that does not import" in setup_log


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is here: the runs would compile and capture")
def test_a_hanging_run_costs_its_cap_and_a_cut_run_of_ours_comes_back_without_its_checkpoint(tmp_path):
    # seed 2's LeanRL torch run hangs (a stand-in that sleeps): it is cut at its own cap, and ours, after it, still
    # runs; ours never ends by itself (10M steps): it is cut at its cap mid-run, checkpoints on the SIGTERM (as a run
    # cut on the GPU does: PPO Atari's checkpoint is about 20 MB) and writes its summary; the archive is whole, under
    # 16 MiB, with the logs and the run's summary and without the checkpoint
    deps = stand_in_deps(tmp_path / "deps")
    (deps / "LeanRL" / "leanrl" / "ppo_atari_envpool_torchcompile.py").write_text("import time\n\ntime.sleep(600)\n")
    out, archive = tmp_path / "part1", tmp_path / "gpu-check-1.tgz"
    flags = "--no-compile --total-timesteps 10000000"
    proc = check(
        "1", out, "--dry", "--only", "ppo-atari-seed2-leanrl,ppo-atari-seed2-ours", "--archive", archive,
        deps=deps, timeout=600, GPU_CHECK_RUN_CAP_S="14", GPU_CHECK_PPO_FLAGS=flags,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]  # 1: steps were cut
    lines = (out / "summary.md").read_text().splitlines()
    steps = [line for line in lines if line.startswith("- ppo-atari")]
    assert [line.split(",")[0] for line in steps] == [
        "- ppo-atari-seed2-leanrl: exit 124 (cut at 14 s)",
        "- ppo-atari-seed2-ours: exit 124 (cut at 14 s)",
    ], lines
    assert int(steps[0].split(", ")[1].removesuffix(" s")) < 14 + 20  # the hang cost its cap (and the kill's grace)
    assert lines[-1].endswith("; cut: ppo-atari-seed2-leanrl ppo-atari-seed2-ours"), lines[-1]
    (checkpoint,) = (out / "ppo-atari").glob("runs/ppo_atari/compile_cudagraphs/seed2/*/checkpoint.pt")
    summary = json.loads((checkpoint.parent / "summary.json").read_text())
    assert summary["status"] == "terminated" and summary["global_step"] > 0
    assert "PPO Atari flags: " + flags in (out / "machine.txt").read_text()
    assert archive.stat().st_size < 16 * 2**20
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    run = checkpoint.parent.relative_to(tmp_path).as_posix()
    assert {"part1/logs/ppo-atari-seed2-ours.log", "part1/logs/ppo-atari-seed2-leanrl.log", f"{run}/summary.json"} <= set(
        names
    ), names
    assert f"{run}/metrics.csv" in names and not [name for name in names if name.endswith(".pt")], names


def test_an_archive_over_the_limit_comes_back_in_a_smaller_form(tmp_path):
    # envpool's step with a stand-in envpool that leaves an incompressible event file in the folder, then fails: with a
    # limit under the folder's size, the archive leaves the event files out and says which form it holds
    deps = stand_in_deps(tmp_path / "deps")
    failing_envpool(
        deps, "import os\nopen(os.environ['DIR'] + '/envpool/events.out.tfevents.1', 'wb').write(os.urandom(300_000))\n"
    )
    out, archive = tmp_path / "part1", tmp_path / "gpu-check-1.tgz"
    proc = check("1", out, "--dry", "--only", "envpool", "--archive", archive, deps=deps, GPU_CHECK_ARCHIVE_LIMIT="200000")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert (out / "envpool" / "events.out.tfevents.1").stat().st_size == 300_000
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        summary = tar.extractfile("part1/summary.md").read().decode()
    assert {"part1/summary.md", "part1/logs/envpool.log"} <= set(names) and "part1/envpool/events.out.tfevents.1" not in names
    assert archive.stat().st_size <= 200_000 and "(the archive holds the lean form" in summary, summary


def failing_envpool(deps, code=""):
    """A stand-in envpool in the pack's site archive: it imports (running `code`), but makes no envs."""
    site = deps.parent / "site"
    (site / "envpool").mkdir(parents=True)
    (site / "envpool" / "__init__.py").write_text(
        "__version__ = 'stand-in'\n\n\ndef make(*args, **kwargs):\n"
        + "".join("    " + line + "\n" for line in code.splitlines())
        + "    raise RuntimeError('a stand-in envpool makes no envs')\n"
    )
    with tarfile.open(deps / "site.tar.xz", "w:xz") as tar:
        tar.add(site, arcname=".")


def test_the_gap_runner_runs_the_fast_file_with_a_cached_env_step_and_tf32(tmp_path):
    # the fast PPO Atari file, unchanged, through tools/ppo_atari_gap.py: envpool's step answered from the
    # first result (called once for real), float32 matrix products in TF32, its steps/s from its summary
    flags = ["--total-timesteps", 2048, "--num-envs", 4, "--num-steps", 128, "--measure-burnin", 1, "--output-dir", tmp_path]
    proc = subprocess.run(
        [sys.executable, ROOT / "tools" / "ppo_atari_gap.py", "--cached-env", "--tf32", "--", *map(str, flags)],
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
    # envpool's step, alone (--only), with a stand-in envpool that imports but makes no envs: each of its two commands
    # fails, the step says so, the command's last line names it and it exits 1; the archive holds the logs
    deps = stand_in_deps(tmp_path / "deps")
    failing_envpool(deps)
    out, archive = tmp_path / "part1", tmp_path / "gpu-check-1.tgz"
    proc = check("1", out, "--dry", "--only", "envpool", "--archive", archive, deps=deps, timeout=600)
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = (out / "summary.md").read_text().splitlines()
    assert [line for line in lines if line.startswith("- ")][0].startswith("- envpool: exit 1, "), lines
    assert not any("ppo-atari" in line for line in lines), lines  # the steps --only left out: not a line
    assert lines[-1].endswith("; failed: envpool"), lines[-1]
    assert (out / "logs" / "envpool.log").read_text().count("RuntimeError: a stand-in envpool makes no envs") == 2
    with tarfile.open(archive) as tar:
        assert "part1/logs/envpool.log" in tar.getnames()


def test_a_bad_run_cap_fails_with_one_line(tmp_path):
    proc = check("1", tmp_path / "new", deps=tmp_path / "no-deps", GPU_CHECK_RUN_CAP_S="1m")
    assert proc.returncode == 2 and proc.stderr == "gpu_check.sh: error: GPU_CHECK_RUN_CAP_S: seconds, not '1m'\n", proc.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is here: the gpu tests would run")
def test_part_2_at_its_default_budget_reaches_the_gpu_tests(tmp_path):
    # the budget counts the setup: at the default budget, after it, the gpu tests' need and the gap runs' keep are left
    # (here, without CUDA, pytest refuses -m gpu at once: the step ran, and failed)
    deps = stand_in_deps(tmp_path / "deps")
    out = tmp_path / "part2"
    proc = check("2", out, "--dry", "--only", "pytest-collect,pytest-gpu", deps=deps, timeout=600)
    lines = (out / "summary.md").read_text().splitlines()
    assert proc.returncode == 1 and "part: 2; budget: 400 s; dry: 1" in (out / "machine.txt").read_text()
    steps = [line.split(":")[0] + ":" + line.split(":")[1].split(",")[0] for line in lines if line.startswith("- pytest")]
    assert steps == ["- pytest-collect: exit 0", "- pytest-gpu: exit 4"], lines
    assert lines[-1].endswith("; failed: pytest-gpu"), lines[-1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is here")
def test_the_compile_modes_step_is_an_extra_that_needs_its_time(tmp_path):
    """--only compile-modes implies --extras and runs nothing else of part 1; with less than its 100 s left it is
    skipped and says so (run, it times our fast PPO Atari with --compile in the default mode and in reduce-overhead)."""
    deps = stand_in_deps(tmp_path / "deps")
    out = tmp_path / "part1"
    proc = check("1", out, "--dry", "--only", "compile-modes", "--budget-s", 60, deps=deps, timeout=300)
    assert proc.returncode == 3, proc.stderr[-3000:]
    lines = (out / "summary.md").read_text().splitlines()
    assert [line.split(":")[0] for line in lines if line.startswith("- ")] == ["- compile-modes", "- part 1"], lines
    assert lines[1].startswith("- compile-modes: skipped, ") and lines[1].endswith(" of the 100 s it needs"), lines
    assert "extras" in (out / "machine.txt").read_text()
    help_text = check("--help", deps=deps).stdout
    assert "compile-modes" in help_text and "reduce-overhead" in help_text
