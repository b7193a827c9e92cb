"""Run a script as a user would (a subprocess, its summary.json read back), or import it to test its parts."""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"


def run_script(script, *flags, tmp_path, expect_ok=True, timeout=1200):
    """Run `scripts/<script>.py` in a subprocess (cwd tmp_path); return (CompletedProcess, summary dict or None)."""
    out = tmp_path / "runs"
    cmd = [sys.executable, str(SCRIPTS / f"{script}.py"), "--output-dir", str(out), *map(str, flags)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)
    if expect_ok and proc.returncode != 0:
        raise failed(" ".join(cmd), proc)
    return proc, read_summary(proc)


def failed(command, proc):
    """What a run that should have succeeded says in a test's failure: its command, its exit status, its output's end."""
    return AssertionError(
        f"{command} exited {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-5000:]}"
    )


def run_main(script, *flags, tmp_path, expect_ok=True):
    """run_script in this process (run_as_main): the same (CompletedProcess, summary) back, the imports paid once per
    test process (the larger part of a short run_script on 2 cores). For the runs that need no process of their own: not a
    signal, a killed worker, --async-envs or Ray, nor what C code prints (MuJoCo's notes)."""
    proc = run_as_main(SCRIPTS / f"{script}.py", "--output-dir", tmp_path / "runs", *flags, cwd=tmp_path)
    if expect_ok and proc.returncode != 0:
        raise failed(f"{script} {' '.join(proc.args[1:])}", proc)
    return proc, read_summary(proc)


def run_as_main(path, *args, cwd):
    """`python path args` in this process: the file run as `__main__` (runpy; sys.argv as that command line gives it)
    in cwd, its stdout and stderr captured (Python's warnings into stderr, as a process prints them), its exit status
    the one `sys.exit` gives (1 for a message or an uncaught exception, whose traceback goes to stderr). torch's
    counters (inductor's cache hits and misses, which a summary gives) start at zero as in a new process; the signal
    handlers, the working directory, sys.argv and cuDNN's flag are put back."""
    import contextlib
    import io
    import runpy
    import signal
    import traceback
    import warnings

    import torch

    cmd = [str(path), *map(str, args)]
    out, err, code = io.StringIO(), io.StringIO(), 0
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)
    saved = [os.getcwd(), sys.argv, {s: signal.getsignal(s) for s in signals}, torch.backends.cudnn.deterministic]
    if "torch._dynamo.utils" in sys.modules:
        sys.modules["torch._dynamo.utils"].counters.clear()
    try:
        os.chdir(cwd)
        sys.argv = cmd
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: err.write(
                warnings.formatwarning(message, category, filename, lineno, line)
            )
            try:
                runpy.run_path(cmd[0], run_name="__main__")
            except SystemExit as e:  # sys.exit(message) prints the message and exits 1
                code = e.code if isinstance(e.code, int) or e.code is None else 1
                if not isinstance(e.code, int) and e.code is not None:
                    print(e.code, file=sys.stderr)
            except Exception:
                traceback.print_exc()
                code = 1
    finally:
        os.chdir(saved[0])
        sys.argv = saved[1]
        for signum, handler in saved[2].items():
            signal.signal(signum, handler)
        torch.backends.cudnn.deterministic = saved[3]
    return subprocess.CompletedProcess(cmd, code or 0, out.getvalue(), err.getvalue())


def read_summary(proc):
    """A finished run's summary.json, from the last line it printed (None for a run that failed)."""
    if proc.returncode != 0:
        return None
    path = pathlib.Path(proc.stdout.strip().splitlines()[-1])  # the last line printed is the path of summary.json
    assert path.name == "summary.json" and path.is_file(), proc.stdout[-2000:]
    summary = json.loads(path.read_text())
    summary["_run_dir"] = str(path.parent)
    return summary


def load_script(script):
    """Import `scripts/<script>.py` as a module (its `main` only runs under __main__)."""
    spec = importlib.util.spec_from_file_location(script, SCRIPTS / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[script] = module  # torch.compile looks modules up by name to read their globals
    spec.loader.exec_module(module)
    return module


def load_tool(path):
    """Import one of the project's tools (cut.py, tools/tables.py, tools/shared.py: files, not a package)."""
    spec = importlib.util.spec_from_file_location(pathlib.Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_metrics(summary):
    import csv

    with open(pathlib.Path(summary["_run_dir"]) / "metrics.csv") as f:
        return list(csv.DictReader(f))


SUMMARY_KEYS = {
    "script",
    "algo",
    "device",
    "gpu_name",
    "cpu_count",
    "torch_version",
    "world_size",
    "global_step",
    "sps",
    "wall_time_s",
    "warmup_s",
    "episodic_return",
    "episodes",
    "status",
    "args",
}  # CONVENTIONS.md; the flags are in args only


def check_summary(summary, script, algo, env_id, total_timesteps, compile=False, cudagraphs=False):
    """What every finished run's summary.json must say."""
    assert SUMMARY_KEYS <= set(summary), SUMMARY_KEYS - set(summary)
    assert summary["script"] == script and summary["algo"] == algo and summary["args"]["env_id"] == env_id
    assert summary["status"] == "finished" and summary["world_size"] == 1
    assert summary["global_step"] >= total_timesteps
    assert summary["args"].get("compile", False) is compile and summary["args"].get("cudagraphs", False) is cudagraphs
    assert summary["sps"] is not None and summary["sps"] > 0
    assert summary["warmup_s"] is not None and summary["warmup_s"] >= 0
    assert summary["cpu_count"] == os.cpu_count()
    # when the first update ended (run.sh counts from the launch), and torch.compile's cache counters
    assert 0 < summary["first_update_at"] <= time.time() and set(summary["compile_cache"]) == {"hits", "misses"}
    assert not {"env_id", "seed", "compile", "cudagraphs", "env_runners"} & set(summary)  # nothing written twice


def importable(name):
    """Whether the package can be imported here, without importing it (a test that needs it skips where it cannot).
    A None in sys.modules (how tests/test_without_pandas.py hides a package) counts as missing."""
    try:
        return importlib.util.find_spec(name) is not None
    except ValueError:  # sys.modules[name] is None
        return False
