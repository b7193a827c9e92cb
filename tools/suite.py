"""The test suite's two tiers timed on this machine: runs `python -m pytest` (the full suite) or `-m "not slow"` (the
quick tier) and writes its counts and wall time to suite.csv (a row per tier, the other tier's row kept), with the
machine and the commit in machine.json and machine.md; doc/testing.md's line is written from it by tools/tables.py.

    python tools/suite.py --tier quick --out doc/results/cpu-2core-suite
    python tools/suite.py --tier full --out doc/results/cpu-2core-suite     # about half an hour on 2 cores

Run it with the environment's bin on PATH (torchrun), the machine otherwise idle.
"""

import argparse
import csv
import pathlib
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

ROOT = pathlib.Path(__file__).resolve().parents[1]
TIERS = {"quick": ["-m", "not slow"], "full": []}
COLUMNS = ["tier", "command", "tests", "passed", "failed", "errors", "skipped", "wall_s", "exit_code", "git_commit"]


def merged(rows, row):
    """suite.csv's rows with `row` in place of its tier's earlier row, the quick tier first."""
    rows = [r for r in rows if r["tier"] != row["tier"]] + [row]
    return sorted(rows, key=lambda r: list(TIERS).index(r["tier"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tier", choices=list(TIERS), required=True, help="quick (-m 'not slow') or full")
    parser.add_argument("--out", default="bench/suite", help="the folder for suite.csv, machine.json and machine.md")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = [sys.executable, str(ROOT / "tools" / "aggregate.py"), "--record-machine", str(out)]
    subprocess.run(record, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory() as tmp:
        report = pathlib.Path(tmp) / "junit.xml"
        command = [sys.executable, "-m", "pytest", *TIERS[args.tier], f"--junitxml={report}", "-q"]
        start = time.perf_counter()
        code = subprocess.run(command, cwd=ROOT).returncode
        wall = time.perf_counter() - start
        suite = ET.parse(report).getroot()
        suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    row = dict(
        tier=args.tier,
        command="python -m pytest" + (' -m "not slow"' if args.tier == "quick" else ""),
        tests=counts["tests"],
        passed=counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"],
        failed=counts["failures"],
        errors=counts["errors"],
        skipped=counts["skipped"],
        wall_s=f"{wall:.0f}",
        exit_code=code,
        git_commit=subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
    )
    path = out / "suite.csv"
    rows = merged(list(csv.DictReader(path.open(newline=""))) if path.exists() else [], row)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    said = f"{row['passed']} passed, {row['failed']} failed, {row['errors']} errors, {row['skipped']} skipped"
    print(f"suite.py: {said} in {row['wall_s']} s")
    sys.exit(code)


if __name__ == "__main__":
    main()
