"""run.sh and aggregate.py as the tests drive them: run.sh with this interpreter, aggregate.py imported from beside it,
and what they write (results.csv, results.md's table, the plots) read back."""

import csv
import importlib.util
import os
import subprocess
import sys

from helpers.scripts import ROOT

RUN_SH = ROOT / "run.sh"


def load_aggregate():
    """Import aggregate.py, run.sh's Python, from beside run.sh."""
    spec = importlib.util.spec_from_file_location("aggregate", ROOT / "tools" / "aggregate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_sh(*args, env=None, check=None, cwd=ROOT):
    """Run ./run.sh with our interpreter, from cwd; return the CompletedProcess (check: the exit status it must have)."""
    env = {**os.environ, "PYTHON": sys.executable, "MPLBACKEND": "Agg", **(env or {})}
    proc = subprocess.run(["bash", str(RUN_SH), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True)
    if check is not None:
        assert proc.returncode == check, (
            f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
        )
    return proc


def read_results(out):
    with open(out / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


def md_table(out):
    """results.md's table rows, in order, each as {column: cell}."""
    lines = (out / "results.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| algorithm | variant |"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append(dict(zip(header, cells)))
    return rows


def md_rows(out):
    """results.md's table rows as {(algorithm, variant): {column: cell}} (a folder of one env id and exp name)."""
    rows = {}
    for row in md_table(out):
        rows[(row["algorithm"], row["variant"])] = row
    return rows


def check_png(path):
    """A real PNG that decodes to a non-empty image."""
    import matplotlib.pyplot as plt

    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    image = plt.imread(path)
    assert image.ndim == 3 and image.shape[0] > 50 and image.shape[1] > 50, image.shape
