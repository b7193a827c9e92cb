"""The stand-in device's tests, in a process of their own: its own checks (tests/stand_in_device_cases.py) and every
fast file's functions on it (tests/stand_in_device_scripts.py). Registering the `fakecuda` backend renames torch's
PrivateUse1 device for the rest of a process and makes it torch's accelerator (`pin_memory()` then fails), which must
not leak into the other tests."""

import subprocess
import sys

import pytest
from helpers.scripts import ROOT


@pytest.mark.parametrize("cases", ["stand_in_device_cases.py", "stand_in_device_scripts.py"])
def test_on_the_stand_in_device_in_a_process_of_its_own(cases):
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests" / cases)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout, proc.stdout[-2000:]
