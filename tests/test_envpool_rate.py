"""tools/envpool_rate.py: envpool's own rate in each mode the GPU check times (sync, async batches, two pools in turn,
with and without life-loss resets), a few batches each, and its one-line errors."""

import json
import subprocess
import sys

import pytest
from helpers.scripts import ROOT

RATE_PY = ROOT / "tools" / "envpool_rate.py"


def rate(*flags, tmp_path):
    out = tmp_path / "rate.json"
    proc = subprocess.run(
        [sys.executable, str(RATE_PY), "--batches", "40", "--repeats", "1", "--out", str(out), *map(str, flags)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc, json.loads(out.read_text()) if proc.returncode == 0 else None


@pytest.mark.parametrize(
    "flags,header",
    [
        ([], "8 envs, random actions, synchronous steps"),
        (["--mode", "async", "--batch-size", 4], "8 envs, random actions, async, batches of 4"),
        (["--mode", "pools"], "8 envs, random actions, two pools of 4 in turn"),
        (["--mode", "async", "--num-envs", 16, "--batch-size", 8], "16 envs, random actions, async, batches of 8"),
        (["--threads", 8, "--no-episodic-life"], "synchronous steps, 8 threads, no episodic life"),
    ],
    ids=["sync", "async-8-by-4", "two-pools", "async-16-by-8", "no-episodic-life"],
)
def test_each_mode_times_its_batches(flags, header, tmp_path):
    proc, figures = rate(*flags, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert header in proc.stdout.splitlines()[0]
    (repeat,) = figures["repeats"]
    assert figures["rate"] == repeat["steps_per_s"] > 0 and 0 <= repeat["batches_with_reset"] <= 1
    assert figures["mode"] == (flags[1] if flags and flags[0] == "--mode" else "sync")


def test_the_batches_are_counted_by_the_envs_they_step(monkeypatch):
    """A timed batch counts the envs it stepped: all of them (sync), a batch (async), both pools' (pools)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("envpool_rate", RATE_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for mode, batch_size, per_batch in [("sync", None, 8), ("async", 4, 4), ("pools", None, 8)]:
        times, resets, steps = module.measure("Breakout-v5", 8, 30, 1, 0, mode=mode, batch_size=batch_size)
        assert len(times) == len(resets) == len(steps) == 30 and set(steps) == {per_batch}, mode


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--mode", "async", "--batch-size", 9], "--batch-size 9: from 1 to --num-envs (8)"),
        (["--batch-size", 4], "--batch-size: only with --mode async"),
        (["--mode", "pools", "--num-envs", 7], "--mode pools: --num-envs 7 is not an even number"),
    ],
)
def test_a_mistyped_flag_is_named_in_one_line(flags, message, tmp_path):
    proc, _ = rate(*flags, tmp_path=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr.strip().splitlines()[-1]
