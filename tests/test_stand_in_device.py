"""The stand-in device's own tests (tests/stand_in_device_cases.py), in a process of their own: registering the
`fakecuda` backend renames torch's PrivateUse1 device for the rest of a process and makes it torch's accelerator
(`pin_memory()` then fails), which must not leak into the other tests."""

import subprocess
import sys

from helpers.scripts import ROOT


def test_the_stand_in_device_in_its_own_process():
    cases = ROOT / "tests" / "stand_in_device_cases.py"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(cases)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout, proc.stdout[-2000:]
