"""The fast files' speed choices timed one at a time on this machine's CPU: each row runs the scripts' own function two
ways on the same inputs, in interleaved blocks, and gives the median time of a call (doc/tricks.md's tables are
written from its micro.csv by tools/tables.py).

    python tools/micro.py --out doc/results/cpu-2core-micro       # micro.csv, machine.json, machine.md
    python tools/micro.py --out /tmp/micro --only gae,adam        # some parts: gae, adam, layout, malloc, compile, bf16

- gae: CleanRL's GAE loop over time (the baselines' compute_gae) against the fast files' loop-free compute_gae, at PPO
  continuous's rollout (2048 steps x 1 env) and PPO Atari's (128 x 8); the largest difference of their advantages.
- adam: one update with the fast file's fused Adam against torch's default Adam (on a CPU, a loop over the
  parameters): SAC (critic, then actor, batch 256, HalfCheetah's shapes) and PPO Atari (a minibatch of 256 frames).
- layout: PPO Atari's minibatch update with the network's weights channels-last (what the fast file does on a CPU)
  against the default layout.
- malloc: PPO Atari's minibatch update in a fresh process with glibc's default malloc settings against the fast
  file's malloc_keep_heap(): the time of a call and the page faults a call takes (minor faults, getrusage).
- compile: each hot function of SAC and TD3 eager (fused Adam, what a CPU runs) against torch.compile (plain Adam,
  what --compile would run if it compiled on a CPU), and eager with plain Adam.
- bf16: SAC's and TD3's update in fp32 and under --precision bf16 (where the CPU multiplies bf16 natively).
- quickstart: the README's CPU command (QUICKSTART), once, from start to exit, with its steps/s and return: quickstart.csv.

A block times `calls` calls of each variant in turn, the variants' order alternating between blocks; a row gives the
median over the blocks of a call's mean time, and the fastest and slowest block. The parts timed in this process
(all but malloc and quickstart, which start processes of their own) run with the fast PPO Atari file's malloc
settings; the SAC and TD3 files do not set them (their tensors are small). Keep the machine otherwise idle. The
parts of one folder are timed in one go, so that one machine record and one commit stand for them all.
"""

import argparse
import contextlib
import csv
import json
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from helpers.scripts import load_script  # noqa: E402

PARTS = ["gae", "adam", "layout", "malloc", "compile", "bf16", "quickstart"]
# The README's CPU quick start (tests/test_readme.py checks that the README gives this command)
QUICKSTART = "scripts/sac_continuous_action_torchcompile.py --env-id Pendulum-v1 --total-timesteps 6000 --learning-starts 1000"
COLUMNS = ["part", "case", "variant", "median_us", "low_us", "high_us", "blocks", "calls", "extra"]


def interleaved(variants: dict, blocks: int, calls: int, warmup: int = 3):
    """Per variant: the median, lowest and highest over the blocks of a call's mean time (microseconds)."""
    for fn in variants.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in variants}
    names = list(variants)
    for block in range(blocks):
        for name in names if block % 2 == 0 else names[::-1]:
            start = time.perf_counter()
            for _ in range(calls):
                variants[name]()
            times[name].append((time.perf_counter() - start) / calls * 1e6)
    return {name: (statistics.median(t), min(t), max(t)) for name, t in times.items()}


def rows_of(part, case, timed, blocks, calls, extra=None):
    extra = extra or {}
    return [
        dict(part=part, case=case, variant=name, median_us=f"{m:.1f}", low_us=f"{lo:.1f}", high_us=f"{hi:.1f}",
             blocks=blocks, calls=calls, extra=extra.get(name, ""))
        for name, (m, lo, hi) in timed.items()
    ]  # fmt: skip


def rollout(num_steps, num_envs, episode_length):
    """A rollout's (num_steps, num_envs) tensors with an episode end every `episode_length` steps."""
    g = torch.Generator().manual_seed(0)
    shape = (num_steps, num_envs)
    dones = torch.zeros(shape)
    dones[episode_length - 1 :: episode_length] = 1.0
    terms = dones * (torch.rand(shape, generator=g) < 0.5)
    valid = torch.ones(shape)
    return dict(
        rewards=torch.randn(shape, generator=g), values=torch.randn(shape, generator=g),
        next_value=torch.randn(num_envs, generator=g), terms=terms, dones=dones, valid=valid,
    )  # fmt: skip


def gae(blocks):
    rows = []
    cases = [("ppo_continuous_action", 2048, 1, 1000, 20), ("ppo_atari", 128, 8, 50, 20)]
    for algorithm, num_steps, num_envs, episode_length, calls in cases:
        loop = load_script(algorithm).compute_gae
        fast = load_script(f"{algorithm}_torchcompile").compute_gae
        r = rollout(num_steps, num_envs, episode_length)
        inputs = (r["rewards"], r["values"], r["next_value"], r["terms"], r["dones"], r["valid"], 0.99, 0.95)
        with torch.no_grad():
            diff = (loop(*inputs)[0] - fast(*inputs)[0]).abs().max().item()
            timed = interleaved({"loop (baseline)": lambda: loop(*inputs), "fast": lambda: fast(*inputs)}, blocks, calls)
        rows += rows_of(
            "gae", f"{algorithm}, {num_steps} x {num_envs}", timed, blocks, calls, {"fast": f"max diff {diff:.1e}"}
        )
    return rows


@contextlib.contextmanager
def adam(module, settings):
    """The script's Adam settings replaced (None: the script's own) while its functions are made."""
    own = module.adam_settings
    if settings is not None:
        module.adam_settings = lambda *a, **k: dict(settings)
    try:
        yield
    finally:
        module.adam_settings = own


def ppo_atari_update(module, channels_last=True, settings=None):
    """The fast PPO Atari file's minibatch update (eager), on a rollout of random frames, and a call of it."""
    torch.manual_seed(0)
    args = module.Args(cuda=False)
    agent = module.Agent(4)
    if channels_last:
        agent = agent.to(memory_format=torch.channels_last)
    with adam(module, settings):
        ppo = module.make_ppo(args, agent, torch.device("cpu"))
    n = args.num_steps * args.num_envs
    data = dict(
        obs=torch.randint(0, 255, (n, 4, 84, 84), dtype=torch.uint8), actions=torch.randint(0, 4, (n,)),
        logprobs=-torch.rand(n), advantages=torch.randn(n), returns=torch.randn(n), values=torch.randn(n), valid=torch.ones(n),
    )  # fmt: skip
    idx = torch.randperm(n)[: n // args.num_minibatches]
    return lambda: ppo.update(**data, idx=idx)


def sac_batch(batch_size=256, obs_dim=17, action_dim=6):
    """A sampled batch as the fast SAC and TD3 files' buffer gives it: rows of obs | action | next_obs | reward | done."""
    g = torch.Generator().manual_seed(0)
    obs, next_obs = torch.randn(batch_size, obs_dim, generator=g), torch.randn(batch_size, obs_dim, generator=g)
    actions = torch.rand(batch_size, action_dim, generator=g) * 2 - 1
    rewards, dones = torch.randn(batch_size, 1, generator=g), (torch.rand(batch_size, 1, generator=g) < 0.01).float()
    return torch.cat([obs, actions, next_obs, rewards, dones], 1)


def make_agent(algorithm, module, settings=None, precision="fp32"):
    """SAC's or TD3's fast-file functions (eager), HalfCheetah's shapes."""
    torch.manual_seed(0)
    args = module.Args(cuda=False, precision=precision)
    low, high = -torch.ones(6).numpy(), torch.ones(6).numpy()
    with adam(module, settings):
        make = module.make_sac if algorithm == "sac" else module.make_td3
        return args, make(args, 17, 6, low, high, torch.device("cpu"))


def adam_part(blocks):
    rows = []
    module = load_script("sac_continuous_action_torchcompile")
    args, fused = make_agent("sac", module)
    _, plain = make_agent("sac", module, settings={})
    batch = sac_batch()

    def sac_update(agent):
        return lambda: (agent.update_critic(batch), agent.update_actor(batch))

    timed = interleaved({"fused Adam (fast)": sac_update(fused), "default Adam": sac_update(plain)}, blocks, 50)
    rows += rows_of("adam", "SAC update (critic, actor), batch 256", timed, blocks, 50)
    module = load_script("ppo_atari_torchcompile")
    variants = {"fused Adam (fast)": ppo_atari_update(module), "default Adam": ppo_atari_update(module, settings={})}
    rows += rows_of("adam", "PPO Atari minibatch update, 256 frames", interleaved(variants, blocks, 5), blocks, 5)
    return rows


def layout(blocks):
    module = load_script("ppo_atari_torchcompile")
    variants = {"channels-last (fast)": ppo_atari_update(module), "default layout": ppo_atari_update(module, False)}
    return rows_of("layout", "PPO Atari minibatch update, 256 frames", interleaved(variants, blocks, 5), blocks, 5)


def malloc_child(setting, calls):
    """In a fresh process: PPO Atari's update under glibc's defaults or malloc_keep_heap(); its time and faults."""
    module = load_script("ppo_atari_torchcompile")
    if setting == "keep":
        module.malloc_keep_heap()
    update = ppo_atari_update(module)
    for _ in range(3):
        update()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        update()
        times.append((time.perf_counter() - start) * 1e6)
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / calls
    print(json.dumps(dict(median_us=statistics.median(times), faults=faults)))


def malloc(blocks):
    """`blocks` processes of each setting, alternating; a block is one process's calls."""
    calls = 10
    results = {"malloc_keep_heap() (fast)": [], "glibc's defaults": []}
    settings = dict(zip(results, ["keep", "default"]))
    names = list(results)
    for block in range(blocks):
        for name in names if block % 2 == 0 else names[::-1]:
            command = [sys.executable, __file__, "--malloc-child", settings[name], "--calls", str(calls)]
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            results[name].append(json.loads(out.strip().splitlines()[-1]))
    timed, extra = {}, {}
    for name, runs in results.items():
        us = [r["median_us"] for r in runs]
        timed[name] = (statistics.median(us), min(us), max(us))
        extra[name] = f"{statistics.median(r['faults'] for r in runs):,.0f} page faults a call"
    return rows_of("malloc", "PPO Atari minibatch update, 256 frames", timed, blocks, calls, extra)


def compile_part(blocks):
    rows = []
    for algorithm, script in [("sac", "sac_continuous_action_torchcompile"), ("td3", "td3_continuous_action_torchcompile")]:
        module = load_script(script)
        args, eager = make_agent(algorithm, module)
        _, plain = make_agent(algorithm, module, settings={})
        _, to_compile = make_agent(algorithm, module, settings={})
        batch = sac_batch()
        obs = batch[:1, :17]
        for name, call, calls in [("update_critic", "batch", 50), ("update_actor", "batch", 50), ("policy", "obs", 200)]:
            data = batch if call == "batch" else obs
            compiled = module.compiled(getattr(to_compile, name), "default")
            variants = {
                "eager, fused Adam (fast)": lambda f=getattr(eager, name): f(data),
                "compiled, plain Adam": lambda f=compiled: f(data),
                "eager, plain Adam": lambda f=getattr(plain, name): f(data),
            }
            if name == "policy":  # no optimizer in it
                del variants["eager, plain Adam"]
                variants = {
                    "eager (fast)": variants.pop("eager, fused Adam (fast)"),
                    "compiled": variants["compiled, plain Adam"],
                }
            rows += rows_of("compile", f"{algorithm.upper()} {name}", interleaved(variants, blocks, calls), blocks, calls)
    return rows


def bf16(blocks):
    """One update (critic, then actor) in fp32 and under --precision bf16; only where the CPU multiplies bf16 natively."""
    rows = []
    for algorithm, script in [("sac", "sac_continuous_action_torchcompile"), ("td3", "td3_continuous_action_torchcompile")]:
        module = load_script(script)
        if not module.bf16_matmuls(False):
            print(f"micro.py: bf16: this CPU has no native bf16 matmuls; {algorithm.upper()} skipped", flush=True)
            continue
        batch = sac_batch()
        variants = {}
        for name, precision in [("fp32 (fast)", "fp32"), ("--precision bf16", "bf16")]:
            agent = make_agent(algorithm, module, precision=precision)[1]
            variants[name] = lambda a=agent: (a.update_critic(batch), a.update_actor(batch))
        case = f"{algorithm.upper()} update (critic, actor), batch 256"
        rows += rows_of("bf16", case, interleaved(variants, blocks, 50), blocks, 50)
    return rows


def quickstart(out):
    """The README's CPU command in a fresh process, from start to exit; its summary's steps/s and return."""
    with tempfile.TemporaryDirectory() as runs:
        command = [sys.executable, *QUICKSTART.split(), "--output-dir", runs]
        start = time.perf_counter()
        subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        summary = json.loads(next(pathlib.Path(runs).glob("*/summary.json")).read_text())
    row = dict(command=f"python {QUICKSTART}", wall_s=f"{wall:.1f}", sps=f"{summary['sps']:.1f}",
               episodic_return=f"{summary['episodic_return']:.1f}", global_step=summary["global_step"])  # fmt: skip
    with open(out / "quickstart.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(row))
        writer.writeheader()
        writer.writerow(row)
    return []


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bench/micro", help="the folder for micro.csv, machine.json and machine.md")
    parser.add_argument("--only", default=",".join(PARTS), help=f"parts, of {', '.join(PARTS)}")
    parser.add_argument("--blocks", type=int, default=7, help="interleaved blocks (processes, for malloc) per row")
    parser.add_argument("--malloc-child", choices=["keep", "default"], help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=10, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.malloc_child:
        return malloc_child(args.malloc_child, args.calls)
    parts = args.only.split(",")
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"--only: no part {', '.join(unknown)} (the parts: {', '.join(PARTS)})")
    if args.blocks < 1:
        parser.error("--blocks: at least 1")
    out = pathlib.Path(args.out)
    if set(parts) != set(PARTS) and (out / "micro.csv").exists():
        parser.error(f"--only: {out} already holds micro.csv; time some parts into another folder")
    out.mkdir(parents=True, exist_ok=True)
    record = [sys.executable, str(ROOT / "tools" / "aggregate.py"), "--record-machine", str(out)]
    subprocess.run(record, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    load_script("ppo_atari_torchcompile").malloc_keep_heap()  # as the fast PPO Atari file runs on a CPU (but in malloc's rows)
    make = dict(gae=gae, adam=adam_part, layout=layout, malloc=malloc, compile=compile_part, bf16=bf16)
    rows = []
    for part in parts:
        start = time.time()
        rows += quickstart(out) if part == "quickstart" else make[part](args.blocks)
        print(f"micro.py: {part} timed in {time.time() - start:.0f} s", flush=True)
    if not rows:
        return
    with open(out / "micro.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"micro.py: {len(rows)} rows in {out / 'micro.csv'}")


if __name__ == "__main__":
    main()
