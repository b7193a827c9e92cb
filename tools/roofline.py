"""How close each script's update comes to what the machine can compute: the roofline.

For each algorithm's fast file (scripts/<algo>_torchcompile.py, eager: no --compile, no --cudagraphs) and, for
reference, its baseline, on the machine this runs on:

- FLOPs per env step, counted by torch's FlopCounterMode (matmuls and convolutions, forward and backward; not the
  elementwise ops, Adam or the GAE) over the hot functions the fast file's builder returns (make_sac, make_td3,
  make_dqn, make_ppo), each called once on the inputs it last had in a short real run, times the calls the loop makes
  per env step (`schedule`, the conditions of the file's own loop). A baseline's update is written inside main's
  loop, not a function: its rows show the fast file's FLOPs per step (the same algorithm), marked as such.
- The attainable rate at those shapes: each op FlopCounterMode counts (mm, addmm, bmm, convolution and its backward)
  is recorded with its arguments' shapes, strides and dtypes by a TorchDispatchMode; each distinct one is timed alone
  on fresh tensors of the same layout, and the rates are combined by FLOPs: total FLOPs / sum(FLOPs_i / rate_i). The
  machine's 1024^3 fp32 mm rate is given for reference.
- Update-only steps/s: one period of the loop's calls (SAC: per env step the policy, a critic update and the target
  update, and every policy_frequency-th step policy_frequency actor updates) timed in a loop on the recorded inputs,
  no env. Achieved GFLOP/s = FLOPs/step x those steps/s, and its fraction of the attainable rate.
- End-to-end steps/s: the script run as a user runs it (a subprocess; --measure-burnin leaves the warm-up out), `sps`
  from its summary.json, and FLOPs/step x sps against the attainable rate.
- Where a step's time goes: the same run again in this process, with timers around the envs' step, the hot functions
  (policy; updates, target updates and GAE) and the metrics row (Run.row), from the end of the burn-in to the end
  of training. The rest is the loop's own Python: the replay buffer, copies, the progress bar.

    python tools/roofline.py                       # every algorithm: bench/roofline/roofline.md, .json, .csv
    python tools/roofline.py --quick --scripts td3_continuous_action --out /tmp/roofline/roofline.md   # a smoke run
"""

import argparse
import contextlib
import csv
import importlib.util
import json
import math
import os
import pathlib
import platform
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from unittest import mock

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map_only
from torch.utils.flop_counter import FlopCounterMode, flop_registry

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"

# The algorithms, in run.sh's order: the fast file's builder, and its hot functions with the part of the time profile
# each one counts in.
ALGORITHMS = {
    "ppo_atari": ("make_ppo", dict(policy="policy", gae="update", update="update")),
    "ppo_continuous_action": ("make_ppo", dict(policy="policy", gae="update", update="update")),
    "sac_continuous_action": (
        "make_sac",
        dict(policy="policy", update_critic="update", update_actor="update", update_target="update"),
    ),
    "td3_continuous_action": ("make_td3", dict(policy="policy", update_critic="update", update_actor="update")),
    "dqn": ("make_dqn", dict(policy="policy", update="update", update_target="update")),
}
# Each run's budget (the end-to-end run and the profiled one): about 30-60 s on a 2-core CPU at the rates of
# doc/results/cpu-2core (the default hyperparameters otherwise). --quick: run.sh's --quick budgets, tiny but past the
# burn-in and the start of learning; their numbers are not representative.
BUDGETS = {
    "ppo_atari": "--total-timesteps 20480 --measure-burnin 2",
    "ppo_continuous_action": "--total-timesteps 81920 --measure-burnin 1",
    "sac_continuous_action": "--total-timesteps 6000 --learning-starts 1000 --measure-burnin 50",
    "td3_continuous_action": "--total-timesteps 10000 --learning-starts 1000 --measure-burnin 50",
    "dqn": "--total-timesteps 300000 --measure-burnin 50",
}
QUICK_BUDGETS = {
    "ppo_atari": "--total-timesteps 2048 --num-envs 8 --num-steps 128 --measure-burnin 1",
    "ppo_continuous_action": "--total-timesteps 2048 --num-steps 512 --measure-burnin 1",
    "sac_continuous_action": "--total-timesteps 1200 --learning-starts 1000 --measure-burnin 5",
    "td3_continuous_action": "--total-timesteps 1200 --learning-starts 1000 --measure-burnin 5",
    "dqn": "--total-timesteps 12000 --measure-burnin 5",
}
VARIANTS = ["fast", "baseline"]
PARTS = ["env", "policy", "update", "logging"]  # of the time profile; the rest is what none of them took

ROOFLINE_COLUMNS = [
    "script",
    "env",
    "threads",
    "MFLOP/step",
    "attainable GFLOP/s",
    "update-only steps/s",
    "update-only GFLOP/s",
    "update-only % of attainable",
    "end-to-end steps/s",
    "end-to-end GFLOP/s",
    "end-to-end % of attainable",
]
PROFILE_COLUMNS = ["script", "profiled steps/s", "env", "policy", "update", "logging", "rest"]
FUNCTION_COLUMNS = ["script", "function", "calls per env step", "MFLOP per call", "MFLOP per env step"]
SPLIT_COLUMNS = [
    "script",
    "function",
    "us per call",
    "matmul us",
    "matmul share",
    "matmul GFLOP/s in place",
    "attainable GFLOP/s at its ops",
    "other ops us",
]
# The ops that make the FLOPs, as torch.profiler names the ones that do the work (their self time is the kernel's)
MATMUL_EVENTS = {
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::mkldnn_convolution",
    "aten::convolution_backward",
    "aten::_slow_conv2d_forward",
    "aten::_slow_conv2d_backward",
}


@dataclass
class Timing:
    """How long each timed loop runs, in seconds (an op alone, one period of the update-only loop); best of `repeats`."""

    op_s: float = 0.2
    period_s: float = 1.0
    repeats: int = 3


def sync():
    """Wait for the GPU, if one is in use, so that a timer reads finished work."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def seconds_per_call(fn, seconds, repeats):
    """Seconds per call of `fn`: after a warm-up call, the number of calls that takes `seconds` (doubled until it
    does), timed `repeats` times; the best."""
    fn()
    sync()
    calls = 1
    while True:  # find the number of calls that take `seconds`; this loop is the first timing
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            break
        calls *= 2
    best = elapsed / calls
    for _ in range(repeats - 1):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


# -- FLOPs and the ops that make them


@dataclass(frozen=True)
class TensorSpec:
    """A tensor argument of a recorded op, without its values: a fresh tensor of the same layout can be made."""

    shape: tuple
    stride: tuple
    dtype: torch.dtype
    device: str

    @staticmethod
    def of(tensor):
        return TensorSpec(tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype, str(tensor.device))

    def make(self):
        size = 1 + sum((n - 1) * s for n, s in zip(self.shape, self.stride)) if all(self.shape) else 0
        if self.dtype.is_floating_point:
            base = torch.randn(size, device=self.device).to(self.dtype)
        else:
            base = torch.zeros(size, dtype=self.dtype, device=self.device)
        return base.as_strided(self.shape, self.stride)


class OpRecorder(TorchDispatchMode):
    """Records every op that FlopCounterMode counts (matmuls, convolutions), with its arguments' shapes and layouts:
    ops[key] = dict(func, spec (the arguments, tensors as TensorSpec), calls)."""

    def __init__(self):
        super().__init__()
        self.ops = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket in flop_registry:
            spec = tree_map_only(torch.Tensor, TensorSpec.of, (args, kwargs))
            key = f"{func}{spec}"
            self.ops.setdefault(key, dict(func=func, spec=spec, calls=0))["calls"] += 1
        return func(*args, **kwargs)


def count_call(fn, args, kwargs):
    """One call of `fn`: its FLOPs (FlopCounterMode) and the ops that made them (OpRecorder)."""
    recorder = OpRecorder()
    with FlopCounterMode(display=False) as counter, recorder:
        fn(*args, **kwargs)
    sync()
    return counter.get_total_flops(), recorder.ops


def time_split(fn, args, kwargs, flops, timing):
    """Where one call's time goes: its wall time (seconds_per_call, no profiler), the matmuls' share of it (the self
    CPU time torch.profiler gives MATMUL_EVENTS, over calls that take `timing.period_s`), and their rate in place."""
    wall = seconds_per_call(lambda: fn(*args, **kwargs), timing.period_s, timing.repeats)
    calls = max(1, math.ceil(timing.period_s / wall))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            fn(*args, **kwargs)
        sync()
    matmul_us = sum(e.self_cpu_time_total for e in prof.key_averages() if e.key in MATMUL_EVENTS) / calls
    matmul = matmul_us / 1e6
    return dict(
        wall_s=wall, matmul_s=matmul, matmul_share=matmul / wall, matmul_gflops=flops / matmul / 1e9 if matmul else None
    )


def op_label(op):
    """addmm(256, 256x23, 23x256^T): the op and its tensor arguments' shapes, marked ^T where a matrix is stored
    column by column (a transposed view) and ~ where another layout is not the contiguous one (a column slice,
    channels-last)."""
    texts = []
    for t in [a for a in op["spec"][0] if isinstance(a, TensorSpec)]:
        text = "x".join(map(str, t.shape)) or "()"
        if len(t.shape) == 2 and t.stride[0] < t.stride[1]:
            text += "^T"
        elif t.stride != torch.empty(t.shape, device="meta").stride():
            text += "~"
        texts.append(text)
    return f"{op['func'].overloadpacket.__name__}({', '.join(texts)})"


def time_op(op, timing):
    """(FLOPs, seconds) of one call of a recorded op, on fresh tensors of its arguments' layouts."""
    args, kwargs = tree_map_only(TensorSpec, TensorSpec.make, op["spec"])
    with FlopCounterMode(display=False) as counter:
        op["func"](*args, **kwargs)
    return counter.get_total_flops(), seconds_per_call(lambda: op["func"](*args, **kwargs), timing.op_s, timing.repeats)


class Rates:
    """The op timings, each made once per thread count, and the attainable rate of a mix of ops."""

    def __init__(self, timing):
        self.timing, self.timed = timing, {}

    def op(self, key, op, threads):
        if (key, threads) not in self.timed:
            with torch_threads(threads):
                self.timed[key, threads] = time_op(op, self.timing)
        return self.timed[key, threads]

    def attainable(self, ops, threads):
        """The FLOP-weighted rate (FLOP/s) of `ops` (key -> op with `per_step`, its calls per env step): total FLOPs /
        sum(FLOPs_i / rate_i); the FLOPs per env step of the ops timed alone (those counted in the run, if all is
        right); and each op's row for the record."""
        flops, seconds, rows = 0.0, 0.0, []
        for key, op in ops.items():
            op_flops, op_seconds = self.op(key, op, threads)
            flops += op["per_step"] * op_flops
            seconds += op["per_step"] * op_seconds
            row = dict(op=op_label(op), calls_per_step=op["per_step"], flops=op_flops, gflops=op_flops / op_seconds / 1e9)
            rows.append(dict(row, strides=[a.stride for a in op["spec"][0] if isinstance(a, TensorSpec)]))
        return (flops / seconds if seconds else None), flops, rows

    def square(self, threads):
        """The fp32 rate of a 1024 x 1024 by 1024 x 1024 mm, FLOP/s."""
        a = torch.randn(1024, 1024, device="cuda" if torch.cuda.is_available() else "cpu")
        op = dict(func=torch.ops.aten.mm.default, spec=((TensorSpec.of(a), TensorSpec.of(a)), {}))
        op_flops, op_seconds = self.op("square", op, threads)
        return op_flops / op_seconds


@contextlib.contextmanager
def torch_threads(threads):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# -- The scripts' loops


def schedule(algorithm, args, module):
    """One period of the loop's calls of the hot functions once learning has started, in the loop's order, and the
    env steps it spans: the conditions of the fast file's main loop, for its arguments."""
    n, calls = args.num_envs, []
    if algorithm.startswith("ppo"):
        # An iteration: a policy call per rollout step (num_envs rows each), the GAE, then update_epochs x
        # num_minibatches minibatch updates (--target-kl, off by default, would end an epoch early: not counted).
        calls = ["policy"] * args.num_steps + ["gae"] + ["update"] * (args.update_epochs * args.num_minibatches)
        return calls, args.num_steps * n
    if algorithm == "dqn":
        # The greedy policy on every step (the loop calls it only when it does not explore: an upper bound, reached
        # at 1 - end_e = 95% of the steps after the exploration), an update on each train_frequency-th env step, the
        # target copy on each target_network_frequency-th (the file's `due`, for any num_envs).
        steps = math.lcm(args.train_frequency, args.target_network_frequency, n)
        for global_step in range(0, steps, n):
            calls += ["policy"] + ["update"] * module.due(global_step, n, args.train_frequency)
            calls += ["update_target"] * module.due(global_step, n, args.target_network_frequency)
        return calls, steps
    # SAC and TD3: a critic update per loop step; on the steps where global_step % policy_frequency == 0, SAC makes
    # policy_frequency actor (and alpha) updates and TD3 one (its target update inside); SAC's target update where
    # global_step % target_network_frequency == 0.
    sac = algorithm.startswith("sac")
    steps = math.lcm(args.policy_frequency, args.target_network_frequency if sac else 1) * n
    for global_step in range(0, steps, n):
        calls += ["policy", "update_critic"]
        if global_step % args.policy_frequency == 0:
            calls += ["update_actor"] * (args.policy_frequency if sac else 1)
        if sac and global_step % args.target_network_frequency == 0:
            calls += ["update_target"]
    return calls, steps


def load_script(script):
    """Import scripts/<script>.py as a module (its main only runs under __main__)."""
    spec = importlib.util.spec_from_file_location(script, SCRIPTS / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[script] = module
    spec.loader.exec_module(module)
    return module


class Clock:
    """Wall time by part of the loop, from the end of the burn-in (`begin`) to the end of training (`stop`). A timed
    call inside another one counts in the outer one only. `inputs` keeps each named function's last arguments."""

    def __init__(self):
        self.seconds, self.depth, self.start, self.end, self.inputs = Counter(), 0, None, None, {}

    def begin(self):
        sync()
        self.seconds.clear()
        self.start = time.perf_counter()

    def stop(self):
        if self.start is not None and self.end is None:
            sync()
            self.end = time.perf_counter()

    def timed(self, part, fn, name=None):
        def call(*args, **kwargs):
            if name:
                self.inputs[name] = (args, kwargs)
            if self.depth or self.start is None or self.end is not None:
                return fn(*args, **kwargs)
            self.depth += 1
            sync()
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                sync()
                self.seconds[part] += time.perf_counter() - start
                self.depth -= 1

        return call


def profiled_run(script, flags, log_path, algorithm=None):
    """Run scripts/<script>.py's main() in this process, its loop unchanged but for timers around the envs' step, the
    metrics row and (given the algorithm, in a fast file) the builder's hot functions, whose last inputs are kept.
    Returns (main's state, the Clock, the hot functions as the builder made them, the run's summary)."""
    import gymnasium as gym
    import tyro

    module = load_script(script)
    args = tyro.cli(module.Args, args=flags)
    clock, hot = Clock(), {}
    log_class = module.Run
    count_update, finish = log_class.count_update, log_class.finish

    def count_and_begin(log, *a, **kw):  # the burn-in ends at this update: the timers start
        count_update(log, *a, **kw)
        if clock.start is None and log.burnin_end is not None:
            clock.begin()

    def stop_and_finish(log, *a, **kw):
        clock.stop()
        return finish(log, *a, **kw)

    patches = [
        mock.patch.object(log_class, "count_update", count_and_begin),
        mock.patch.object(log_class, "finish", stop_and_finish),
        mock.patch.object(log_class, "row", clock.timed("logging", log_class.row)),
        mock.patch.object(gym.vector.SyncVectorEnv, "step", clock.timed("env", gym.vector.SyncVectorEnv.step)),
    ]
    vector_stats = gym.wrappers.vector.RecordEpisodeStatistics
    patches.append(mock.patch.object(vector_stats, "step", clock.timed("env", vector_stats.step)))
    if hasattr(module, "envpool"):
        make_envpool = module.envpool.make

        def make_timed_envpool(*a, **kw):
            envs = make_envpool(*a, **kw)
            envs.step = clock.timed("env", envs.step)
            return envs

        patches.append(mock.patch.object(module.envpool, "make", make_timed_envpool))
    if algorithm:
        builder_name, parts = ALGORITHMS[algorithm]
        builder = getattr(module, builder_name)

        def build_and_time(*a, **kw):
            made = builder(*a, **kw)
            for name, part in parts.items():
                hot[name] = getattr(made, name)
                setattr(made, name, clock.timed(part, hot[name], name))
            return made

        patches.append(mock.patch.object(module, builder_name, build_and_time))
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}  # Run takes SIGTERM
    with open(log_path, "w") as log_file, contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        stack.enter_context(contextlib.redirect_stdout(log_file))
        stack.enter_context(contextlib.redirect_stderr(log_file))
        try:
            state = module.main(args)
        finally:
            for s, handler in handlers.items():
                if handler is not None:  # (None: a handler not set from Python, left alone)
                    signal.signal(s, handler)
    summary = json.loads(pathlib.Path(state["run"].run_dir, "summary.json").read_text())
    return state, clock, hot, summary


def time_profile(clock):
    """Each part's fraction of the measured wall time, the rest last; None if the run ended inside its burn-in."""
    if clock.start is None or clock.end is None:
        return None
    wall = clock.end - clock.start
    fractions = {part: clock.seconds[part] / wall for part in PARTS}
    return dict(fractions, rest=1.0 - sum(fractions.values()), wall_s=wall)


def end_to_end(script, flags, folder):
    """The script run as a user runs it, in a subprocess; its summary's steps/s (None if it failed or measured none)."""
    cmd = [sys.executable, str(SCRIPTS / f"{script}.py"), *flags]
    proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    (folder / "logs" / f"{script}.log").write_text(proc.stdout + proc.stderr)
    result = dict(command=shlex.join(cmd), sps=None, status="failed", summary=None)
    if proc.returncode:
        print(f"roofline: the run failed: {result['command']}\n{proc.stderr[-3000:]}", file=sys.stderr, flush=True)
        return result
    summary_path = proc.stdout.strip().splitlines()[-1]
    summary = json.loads(pathlib.Path(summary_path).read_text())
    return dict(result, sps=summary["sps"], status=summary["status"], summary=summary_path)


# -- One algorithm: its fast file, then its baseline


def measure_fast(algorithm, flags, folder, rates, timing, with_end_to_end=True):
    """The fast file's row (FLOPs per env step, attainable and achieved rates, the time profile), its details (per
    function, per op) for the record, and its ops by key (for the baseline's row)."""
    script = f"{algorithm}_torchcompile"
    own_flags = [*flags, "--output-dir", str(folder / "runs" / f"{script}-profiled")]
    threads = torch.get_num_threads()
    state, clock, hot, summary = profiled_run(script, own_flags, folder / "logs" / f"{script}-profiled.log", algorithm)
    run_threads = torch.get_num_threads()  # the file's own choice (the fast DQN takes one thread on a CPU)
    try:
        missing = [name for name in hot if name not in clock.inputs]
        if missing:
            sys.exit(f"roofline: {script}: the run never called {', '.join(missing)}: give it a longer budget")
        sequence, env_steps = schedule(algorithm, state["args"], sys.modules[script])
        calls = Counter(sequence)
        functions, ops = {}, {}
        function_ops = {}
        for name in hot:  # each hot function once, on its last inputs: its FLOPs and ops per call
            args, kwargs = clock.inputs[name]
            flops, call_ops = count_call(hot[name], args, kwargs)
            functions[name] = dict(calls_per_step=calls[name] / env_steps, flops_per_call=flops)
            function_ops[name] = call_ops
            for key, op in call_ops.items():
                ops.setdefault(key, dict(op, per_step=0.0))["per_step"] += op["calls"] * calls[name] / env_steps
        flops_per_step = sum(f["calls_per_step"] * f["flops_per_call"] for f in functions.values())

        def period():  # the loop's calls without the env, as the builder made them (no timers)
            for name in sequence:
                hot[name](*clock.inputs[name][0], **clock.inputs[name][1])

        update_steps = env_steps / seconds_per_call(period, timing.period_s, timing.repeats)
        attainable, ops_flops, op_rows = rates.attainable(ops, run_threads)
        for name in hot:  # each function alone: its wall time, the matmuls' part of it, their rate against attainable
            args, kwargs = clock.inputs[name]
            split = time_split(hot[name], args, kwargs, functions[name]["flops_per_call"], timing)
            own_ops = {key: dict(op, per_step=op["calls"]) for key, op in function_ops[name].items()}
            split["attainable_gflops"] = (rates.attainable(own_ops, run_threads)[0] or 0) / 1e9 or None
            functions[name]["split"] = split
    finally:
        torch.set_num_threads(threads)
    e2e = dict(command=None, sps=None, status="not run", summary=None)
    if with_end_to_end:
        e2e = end_to_end(script, [*flags, "--output-dir", str(folder / "runs" / script)], folder)
    row = make_row(script, "fast", state["args"].env_id, run_threads, flops_per_step, True, attainable, e2e)
    row.update(update_steps_per_s=update_steps, update_gflops=flops_per_step * update_steps / 1e9)
    row.update(update_fraction=flops_per_step * update_steps / attainable if attainable else None)
    row.update(profile_row(clock, summary))
    # ops_flops_per_step: the ops timed alone make the FLOPs counted, so it equals flops_per_step
    details = dict(schedule=dict(env_steps=env_steps, calls=dict(calls)), functions=functions, ops=op_rows)
    details.update(flops_per_step=flops_per_step, ops_flops_per_step=ops_flops)
    return row, details, ops


def measure_baseline(algorithm, flags, folder, rates, fast_row, fast_ops):
    """The baseline's row: the fast file's FLOPs per step and ops (the same algorithm) at its own threads, its
    end-to-end steps/s and time profile (env and logging only: its policy and update are inline in main's loop)."""
    script = algorithm
    own_flags = [*flags, "--output-dir", str(folder / "runs" / f"{script}-profiled")]
    threads = torch.get_num_threads()
    try:
        state, clock, _, summary = profiled_run(script, own_flags, folder / "logs" / f"{script}-profiled.log")
        run_threads = torch.get_num_threads()
    finally:
        torch.set_num_threads(threads)
    attainable, _, _ = rates.attainable(fast_ops, run_threads)
    e2e = end_to_end(script, [*flags, "--output-dir", str(folder / "runs" / script)], folder)
    row = make_row(script, "baseline", state["args"].env_id, run_threads, fast_row["flops_per_step"], False, attainable, e2e)
    row.update(profile_row(clock, summary))
    row.update(policy=None, update=None)  # inside the rest
    return row


def make_row(script, variant, env_id, threads, flops_per_step, counted, attainable, e2e):
    row = dict(script=f"{script}.py", variant=variant, env_id=env_id, threads=threads, flops_per_step=flops_per_step)
    row.update(flops_counted_here=counted, attainable_gflops=attainable / 1e9 if attainable else None)
    row.update(update_steps_per_s=None, update_gflops=None, update_fraction=None)
    row.update(e2e_steps_per_s=e2e["sps"], e2e_status=e2e["status"], e2e_command=e2e["command"], e2e_summary=e2e["summary"])
    achieved = flops_per_step * e2e["sps"] if e2e["sps"] else None
    row.update(e2e_gflops=achieved / 1e9 if achieved else None)
    row.update(e2e_fraction=achieved / attainable if achieved and attainable else None)
    return row


def profile_row(clock, summary):
    profile = time_profile(clock) or dict.fromkeys([*PARTS, "rest", "wall_s"])
    return dict(profiled_steps_per_s=summary["sps"], **profile)


# -- Output


def machine_info():
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    git = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True)
    return dict(
        cpu_model=cpu,
        cpu_count=os.cpu_count(),
        gpu=torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        torch_version=torch.__version__,
        torch_threads=torch.get_num_threads(),
        git=git.stdout.strip() or None,
        date=time.strftime("%Y-%m-%d %H:%M:%S %z"),
    )


def number(value, digits=None, percent=False):
    """A table cell: '-' for none; a percentage; `digits` decimals; or by size (1,234 / 12.3 / 0.0123)."""
    if value is None:
        return "-"
    if percent:
        return f"{100 * value:.1f}%"
    if digits is None and abs(value) >= 1000:
        digits = 0
    elif digits is None and abs(value) >= 10:
        digits = 1
    elif digits is None:  # three significant digits
        digits = max(1, 2 - math.floor(math.log10(abs(value) or 1)))
    return f"{value:,.{digits}f}"


def write(out, command, machine, squares, rows, details):
    """roofline.md (the tables), roofline.json (every number) and roofline.csv (the rows) beside it."""
    out.with_suffix(".json").write_text(
        json.dumps(
            dict(command=command, machine=machine, square_gflops=squares, rows=rows, details=details), indent=2, default=str
        )
    )
    with open(out.with_suffix(".csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    squares_text = "; ".join(f"{number(rate)} GFLOP/s at {threads} thread(s)" for threads, rate in squares.items())
    lines = [
        "# Roofline: FLOPs per env step against the machine's matmul rate",
        "",
        f"`{command}`",
        "",
        f"- {machine['date']}, git {machine['git']}",
        f"- CPU: {machine['cpu_model']}, {machine['cpu_count']} cores; GPU: {machine['gpu'] or 'none'}",
        f"- torch {machine['torch_version']}, {machine['torch_threads']} threads (a script may set its own: `threads`)",
        f"- fp32 1024^3 mm: {squares_text}",
        "",
        "## Roofline",
        "",
        table_head(ROOFLINE_COLUMNS),
    ]
    for row in rows:
        flops = number(row["flops_per_step"] / 1e6) + ("" if row["flops_counted_here"] else " (fast file's)")
        cells = [row["script"], row["env_id"], row["threads"], flops, number(row["attainable_gflops"])]
        cells += [
            number(row["update_steps_per_s"], 0),
            number(row["update_gflops"]),
            number(row["update_fraction"], percent=True),
        ]
        cells += [number(row["e2e_steps_per_s"], 0), number(row["e2e_gflops"]), number(row["e2e_fraction"], percent=True)]
        lines.append(table_row(cells))
    lines += ["", "## Where a step's time goes (fractions of wall time after the burn-in)", "", table_head(PROFILE_COLUMNS)]
    for row in rows:
        parts = [number(row[part], percent=True) for part in [*PARTS, "rest"]]
        lines.append(table_row([row["script"], number(row["profiled_steps_per_s"], 0), *parts]))
    lines += ["", "## FLOPs per env step, by function (fast files)", "", table_head(FUNCTION_COLUMNS)]
    for script, detail in details.items():
        for name, f in detail["functions"].items():
            per_call, per_step = f["flops_per_call"] / 1e6, f["calls_per_step"] * f["flops_per_call"] / 1e6
            lines.append(table_row([script, name, f"{f['calls_per_step']:.4g}", number(per_call), number(per_step)]))
    lines += ["", "## Where a hot function's time goes: its matmuls and the rest (fast files, each function alone)", ""]
    lines.append(table_head(SPLIT_COLUMNS))
    for script, detail in details.items():
        for name, f in detail["functions"].items():
            split = f.get("split")
            if not split or not f["flops_per_call"]:
                continue
            cells = [script, name, number(split["wall_s"] * 1e6, 0), number(split["matmul_s"] * 1e6, 0)]
            cells += [number(split["matmul_share"], percent=True), number(split["matmul_gflops"])]
            cells += [number(split["attainable_gflops"]), number((split["wall_s"] - split["matmul_s"]) * 1e6, 0)]
            lines.append(table_row(cells))
    lines += ["", NOTES]
    out.write_text("\n".join(lines) + "\n")
    return lines


def table_head(columns):
    return table_row(columns) + "\n" + "| --- " * len(columns) + "|"


def table_row(cells):
    return "| " + " | ".join(str(c) for c in cells) + " |"


NOTES = """How to read it:

- FLOPs are FlopCounterMode's: matmuls and convolutions (2 x m x n x k; a backward counts its input and weight
  gradients where they are computed), not elementwise ops, reductions, Adam or the GAE. Per env step: each hot function
  of the fast file once on its last real inputs, times its calls per env step in the loop (the table above). SAC: a
  critic update, the target update and the policy per step, policy_frequency actor (and alpha) updates every
  policy_frequency-th step; TD3: a critic update and the policy per step, an actor update (with the target update)
  every policy_frequency-th; DQN: an update every train_frequency steps, the target copy every
  target_network_frequency, the greedy policy on every step (an upper bound: it runs only when not exploring); PPO: an
  iteration's policy calls, GAE and update_epochs x num_minibatches updates over its num_envs x num_steps env steps.
- A baseline writes its update inside main's loop: its row shows the fast file's FLOPs per step and ops (the same
  algorithm and networks; the baseline may compute a little more, e.g. critic weight gradients it throws away).
- Attainable: each distinct op (shape, layout, dtype) timed alone at the row's thread count, combined by FLOPs.
- Update-only: one period of those calls in a loop on the recorded inputs, no env (the replay buffer's sampling is
  outside the SAC and TD3 updates, inside DQN's). End to end: the script's own steps/s after its burn-in.
- The time profile comes from a second run of the same budget in this process, timers around the envs' step, the
  hot functions (update: updates, target updates and GAE) and the metrics row; the baselines' policy and update are
  in the rest. Its steps/s shows how much the timers cost against the end-to-end run.
- Each function alone: its wall time per call on its recorded inputs (no profiler), and the self CPU time that
  torch.profiler gives the ops doing the matmuls and convolutions (mm, addmm, bmm, oneDNN's convolution and its
  backward) over as many calls again; "in place" is the function's FLOPs over that time, to hold against the rate of
  the same ops timed alone. The other ops' time is the rest: elementwise work, reductions, Adam, autograd, Python.
  The profiler adds a little to that rest, not to the matmuls' own time."""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scripts", default=",".join(ALGORITHMS), help=f"algorithms, of {', '.join(ALGORITHMS)}")
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="fast (the _torchcompile file, eager), baseline; the fast file's profiled run is made either way (the FLOPs)",
    )
    parser.add_argument("--out", default="bench/roofline/roofline.md", help="the table; .json and .csv go beside it")
    parser.add_argument("--quick", action="store_true", help="tiny budgets and short timings: a smoke test")
    args = parser.parse_args(argv)
    algorithms, variants = args.scripts.split(","), args.variants.split(",")
    for flag, names, allowed in [("--scripts", algorithms, list(ALGORITHMS)), ("--variants", variants, VARIANTS)]:
        if not names or set(names) - set(allowed):
            parser.error(f"{flag}: {','.join(names)}: choose among {', '.join(allowed)}")
    out = pathlib.Path(args.out).resolve()
    folder = out.parent
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    timing = Timing(op_s=0.01, period_s=0.05, repeats=2) if args.quick else Timing()
    command = shlex.join(["python", *sys.argv]) if argv is None else shlex.join(["python", "tools/roofline.py", *argv])
    machine, rates, rows, details = machine_info(), Rates(timing), [], {}
    for algorithm in algorithms:
        flags = (QUICK_BUDGETS if args.quick else BUDGETS)[algorithm].split()
        print(f"roofline: {algorithm} ...", flush=True)
        fast, detail, ops = measure_fast(algorithm, flags, folder, rates, timing, "fast" in variants)
        if "fast" in variants:
            rows.append(fast)
        details[fast["script"]] = detail  # the FLOPs of the baseline's row too
        if "baseline" in variants:
            rows.append(measure_baseline(algorithm, flags, folder, rates, fast, ops))
        squares = {threads: rates.square(threads) / 1e9 for threads in sorted({row["threads"] for row in rows})}
        lines = write(out, command, machine, squares, rows, details)  # after each algorithm: a stop keeps what ran
    print("\n".join(lines))
    print(out)


if __name__ == "__main__":
    main()
