"""Helpers shared by the tests: run a script as a user would, or import it to test its parts."""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    if selects_gpu(config.option.markexpr):  # asked for the GPU tests where there is no GPU: say so, run nothing
        raise pytest.UsageError(f"-m {config.option.markexpr!r} selects the gpu tests, but CUDA is not available here")
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def selects_gpu(markexpr):
    """Whether a -m expression asks for the gpu tests: `-m gpu` and `-m "gpu and not compile"` do; no -m,
    `-m "not gpu"` and `-m compile` do not."""
    words = markexpr.replace("(", " ").replace(")", " ").split()
    return "gpu" in words and "not gpu" not in " ".join(words)


@pytest.fixture(autouse=True)
def keep_torch_threads():
    """A test that runs a script's main() in this process leaves torch's thread count as it found it (the fast DQN
    sets one thread on a CPU)."""
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def run_script(script, *flags, tmp_path, expect_ok=True, timeout=1200):
    """Run `scripts/<script>.py` in a subprocess (cwd tmp_path); return (CompletedProcess, summary dict or None)."""
    out = tmp_path / "runs"
    cmd = [sys.executable, str(SCRIPTS / f"{script}.py"), "--output-dir", str(out), *map(str, flags)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)
    if expect_ok and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-5000:]}"
        )
    summary = None
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == 0:
        path = pathlib.Path(lines[-1])  # the last line printed is the path of summary.json
        assert path.name == "summary.json" and path.is_file(), proc.stdout[-2000:]
        summary = json.loads(path.read_text())
        summary["_run_dir"] = str(path.parent)
    return proc, summary


def load_script(script):
    """Import `scripts/<script>.py` as a module (its `main` only runs under __main__)."""
    spec = importlib.util.spec_from_file_location(script, SCRIPTS / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[script] = module  # torch.compile looks modules up by name to read their globals
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
    assert not {"env_id", "seed", "compile", "cudagraphs"} & set(summary)  # nothing written twice


def rss_bytes():
    """This process's resident memory, from /proc (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def run_in_process(script, *flags, tmp_path, monkeypatch, watch_syncs=False):
    """Run `scripts/<script>.py flags` as its own main() in this process, the real loop unchanged. Returns a namespace:
    state (main's local variables when the run ends), rss ([(global_step, RSS bytes)] at each metrics row) and, with
    watch_syncs (CUDA only), syncs: the warnings of every host-device synchronization made after the burn-in."""
    import types
    import warnings

    import torch
    import tyro

    module = load_script(script)
    monkeypatch.chdir(tmp_path)
    args = tyro.cli(module.Args, args=["--output-dir", str(tmp_path / "runs"), *map(str, flags)])
    run = types.SimpleNamespace(module=module, state={}, rss=[], syncs=[], watching=False, policy_calls=0)
    row, finish, count_update = module.RunLog.row, module.RunLog.finish, module.RunLog.count_update
    builder = next((name for name in ("make_sac", "make_td3", "make_dqn", "make_ppo") if hasattr(module, name)), None)
    if watch_syncs and builder:  # count the policy calls made while the sync watch is on
        build = getattr(module, builder)

        def build_and_count(*a, **kw):
            agent = build(*a, **kw)
            policy = agent.policy

            def counted(*x, **y):
                run.policy_calls += run.watching
                return policy(*x, **y)

            agent.policy = counted
            return agent

        monkeypatch.setattr(module, builder, build_and_count)

    def row_and_measure(self, global_step, metrics):
        run.rss.append((global_step, rss_bytes()))
        return row(self, global_step, metrics)

    def finish_and_keep_state(self, global_step, status, *a, **kw):
        torch.cuda.set_sync_debug_mode(0) if watch_syncs else None
        run.watching = False
        run.state.update(sys._getframe(1).f_locals)  # main's frame: everything the loop holds
        finish(self, global_step, status, *a, **kw)
        with open(os.path.join(self.run_dir, "summary.json")) as f:  # the final status: "evaluated" for an evaluation-only run
            run.state["status"] = json.load(f)["status"]

    def start_watching(self, *a, **kw):  # once the burn-in (compilation, graph capture) is over
        measuring = self.burnin_end is not None
        count_update(self, *a, **kw)
        if not measuring and self.burnin_end is not None:
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("warn")
            run.watching = True

    monkeypatch.setattr(module.RunLog, "row", row_and_measure)
    monkeypatch.setattr(module.RunLog, "finish", finish_and_keep_state)
    if watch_syncs:
        monkeypatch.setattr(module.RunLog, "count_update", start_watching)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            module.main(args)
        finally:
            if watch_syncs:
                torch.cuda.set_sync_debug_mode(0)
    run.syncs = [w for w in caught if "synchronizing" in str(w.message)]
    return run


def sync_problems(syncs, source, policy_calls, rows):
    """What is wrong with the host-device syncs a loop made after its burn-in, each (file, line number, line text).
    Allowed: on a line of the script that copies to the host with `.cpu()`, one per policy call (the action the env
    needs: the copy of the observation to the device sits on that line too, and must not add one); on a line that
    reads with `.tolist()`, one per metrics row (the logged values). Anything else is a problem, and so are more."""
    action = [w for w in syncs if w[0] == source and ".cpu()" in w[2]]
    logged = [w for w in syncs if w[0] == source and ".tolist()" in w[2]]
    problems = [
        f"a sync at {f}:{n}: {text}" for f, n, text in sorted({w for w in syncs if w not in action and w not in logged})
    ]
    if len(action) > policy_calls:
        problems.append(f"{len(action)} syncs on the action's lines for {policy_calls} policy calls")
    if len(logged) > rows:
        problems.append(f"{len(logged)} reads of the logged values for {rows} metrics rows")
    return problems


def reachable_tensors(state):
    """(path, tensor) for every tensor the loop keeps across iterations: in modules (parameters, buffers), optimizers
    (state, tensor learning rates), the script's own objects (replay buffers), functions' closures (compiled and
    graph-wrapped too), containers and namespaces. Bare tensors among main's locals are left to the caller, since
    CleanRL's loops keep their last minibatch's losses there until the next one."""
    import types

    import torch

    found, seen = [], set()

    def walk(obj, path, depth=0):
        if id(obj) in seen or depth > 12:
            return
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            found.append((path, obj))
        elif isinstance(obj, torch.nn.Module):
            for name, t in [*obj.named_parameters(), *obj.named_buffers()]:
                walk(t, f"{path}.{name}", depth + 1)
        elif isinstance(obj, torch.optim.Optimizer):
            for i, group in enumerate(obj.param_groups):
                walk(group["lr"], f"{path}.param_groups[{i}].lr", depth + 1)
                for p in group["params"]:
                    for k, v in obj.state.get(p, {}).items():
                        walk(v, f"{path}.state[{tuple(p.shape)}].{k}", depth + 1)
        elif isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, f"{path}[{k!r}]", depth + 1)
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                walk(v, f"{path}[{i}]", depth + 1)
        elif isinstance(obj, types.FunctionType):
            for name, cell in zip(obj.__code__.co_freevars, obj.__closure__ or ()):
                try:
                    walk(cell.cell_contents, f"{path}.<{name}>", depth + 1)
                except ValueError:  # an empty cell
                    pass
            for attr in ("__wrapped__", "_torchdynamo_orig_callable"):
                if hasattr(obj, attr):
                    walk(getattr(obj, attr), f"{path}.{attr}", depth + 1)
        elif isinstance(obj, types.SimpleNamespace) or type(obj).__name__ in ("CudaGraphModule", "ReplayBuffer"):
            for k, v in vars(obj).items():
                walk(v, f"{path}.{k}", depth + 1)

    for name, value in state.items():
        if not isinstance(value, torch.Tensor):
            walk(value, name)
    return found
