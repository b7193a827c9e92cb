"""The machinery of the GPU checks, tested without a GPU: which -m expressions select the gpu tests (and that selecting
them where CUDA is absent fails loudly), and the count of host-device syncs, on made-up traces. The gpu tests
themselves (test_gpu_loops_and_graphs.py and the `gpu` tests of each algorithm's file) only run where CUDA is present."""

import subprocess
import sys

import pytest
import torch
from helpers.gpu import selects_gpu, sync_problems
from helpers.scripts import ROOT

SOURCE = "/x/scripts/sac_continuous_action_torchcompile.py"
ACTION = (SOURCE, 350, "actions = sac.policy(torch.from_numpy(obs).to(device, non_blocking=True))[0].cpu().numpy()")
LOGGED = (
    SOURCE,
    440,
    "row = {**self.stats(global_step, time.time()), **metrics, **dict(zip(tensors, torch.stack(...).tolist()))}",
)


def test_selecting_the_gpu_tests_without_cuda_fails_loudly():
    if torch.cuda.is_available():
        pytest.skip("CUDA is here: the gpu tests run")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "tests/test_files.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, proc.stdout[-1000:]
    assert "CUDA is not available here" in proc.stdout + proc.stderr, proc.stdout[-1000:]
    # refused in pytest_configure, before any collection (and before pytest-xdist's workers, in which an error raised
    # during collection crashes the worker): no "no tests ran" line of a session that collected
    assert "no tests ran" not in proc.stdout + proc.stderr, proc.stdout[-1000:]
    assert [selects_gpu(e) for e in ["", "gpu", "gpu and not compile", "not gpu", "compile", "not gpu and not compile"]] == [
        False,
        True,
        True,
        False,
        False,
        False,
    ]


def test_sync_count_allows_one_sync_per_policy_call_and_per_row():
    assert sync_problems([ACTION] * 10 + [LOGGED] * 2, SOURCE, policy_calls=10, rows=2) == []
    assert sync_problems([], SOURCE, policy_calls=10, rows=2) == []


def test_sync_count_flags_a_second_sync_on_the_action_line():
    """The observation's copy to the device sits on the action's line: a sync there doubles the count."""
    problems = sync_problems([ACTION] * 20, SOURCE, policy_calls=10, rows=0)
    assert problems == ["20 syncs on the action's lines for 10 policy calls"]


def test_sync_count_flags_syncs_elsewhere_and_extra_reads():
    other = (SOURCE, 377, "if out['approx_kl'] > args.target_kl:")
    library = ("/site-packages/torch/optim/adam.py", 12, "step = _get_value(step_t)")
    problems = sync_problems([ACTION, other, library, LOGGED, LOGGED, LOGGED], SOURCE, policy_calls=1, rows=2)
    assert problems == [
        f"a sync at /site-packages/torch/optim/adam.py:12: {library[2]}",
        f"a sync at {SOURCE}:377: {other[2]}",
        "3 reads of the logged values for 2 metrics rows",
    ]
    # a .cpu() line in another file is no action
    assert sync_problems([("/elsewhere.py", 3, "x.cpu()")], SOURCE, policy_calls=5, rows=0) == [
        "a sync at /elsewhere.py:3: x.cpu()"
    ]
