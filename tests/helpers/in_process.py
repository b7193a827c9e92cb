"""Run a script's own main() in this process, and find the tensors its loop keeps."""

import os

from helpers.scripts import load_script


def rss_bytes():
    """This process's resident memory, from /proc (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def prepare(script, *flags, tmp_path, monkeypatch):
    """A script's module and the Args its command line `flags` gives (the run folder under tmp_path, which becomes the
    working directory): what main() takes, for a test that changes something in the module before calling it."""
    import tyro

    module = load_script(script)
    monkeypatch.chdir(tmp_path)
    return module, tyro.cli(module.Args, args=["--output-dir", str(tmp_path / "runs"), *map(str, flags)])


BUILDERS = ("make_sac", "make_td3", "make_dqn", "make_ppo")  # the fast files' builders, each returns .policy


def count_policy_calls(module, monkeypatch, count, on_build=None):
    """The fast file's builder made to wrap the policy it returns: each call adds count() (1, or 0 to leave it out) to
    calls["policy"] of the dict returned; on_build() runs right after building. A baseline (no builder): no change."""
    calls = {"policy": 0}
    builder = next((name for name in BUILDERS if hasattr(module, name)), None)
    if builder is None:
        return calls
    build = getattr(module, builder)

    def build_and_count(*a, **kw):
        agent = build(*a, **kw)
        if on_build:
            on_build()
        policy = agent.policy

        def counted(*x, **y):
            calls["policy"] += count()
            return policy(*x, **y)

        agent.policy = counted
        return agent

    monkeypatch.setattr(module, builder, build_and_count)
    return calls


def run_in_process(script, *flags, tmp_path, monkeypatch, watch_syncs=False):
    """Run `scripts/<script>.py flags` as its own main() in this process, the real loop unchanged. Returns a namespace:
    state (what main() returns: the status and what the loop holds, by name), rss ([(global_step, RSS bytes)] at
    each metrics row) and, with
    watch_syncs (CUDA only), syncs: the warnings of every host-device synchronization made after the burn-in."""
    import types
    import warnings

    import torch

    module, args = prepare(script, *flags, tmp_path=tmp_path, monkeypatch=monkeypatch)
    run = types.SimpleNamespace(module=module, state={}, rss=[], syncs=[], watching=False, calls={"policy": 0})
    row, finish, count_update = module.Run.row, module.Run.finish, module.Run.count_update
    if watch_syncs:  # count the policy calls made while the sync watch is on
        run.calls = count_policy_calls(module, monkeypatch, lambda: int(run.watching))

    def row_and_measure(self, global_step, metrics):
        run.rss.append((global_step, rss_bytes()))
        return row(self, global_step, metrics)

    def stop_watching_and_finish(self, *a, **kw):
        if watch_syncs:
            torch.cuda.set_sync_debug_mode(0)
        run.watching = False
        return finish(self, *a, **kw)

    def start_watching(self, *a, **kw):  # once the burn-in (compilation, graph capture) is over
        measuring = self.burnin_end is not None
        count_update(self, *a, **kw)
        if not measuring and self.burnin_end is not None:
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("warn")
            run.watching = True

    monkeypatch.setattr(module.Run, "row", row_and_measure)
    monkeypatch.setattr(module.Run, "finish", stop_watching_and_finish)
    if watch_syncs:
        monkeypatch.setattr(module.Run, "count_update", start_watching)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            run.state = module.main(args)
        finally:
            if watch_syncs:
                torch.cuda.set_sync_debug_mode(0)
    # torch's sync warning; not its "Synchronization debug mode is a prototype feature ... synchronizing operations",
    # which torch 2.11 gives once per process where the watch is switched on (seen on an H200)
    run.syncs = [w for w in caught if "called a synchronizing CUDA operation" in str(w.message)]
    return run


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
