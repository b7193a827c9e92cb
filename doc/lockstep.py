"""When does stepping each env in its own process (--async-envs) pay? The lock-step benchmark of issue 23.

gymnasium's SyncVectorEnv steps its envs one after another in the training process: a vector step takes the sum of
the envs' step times. AsyncVectorEnv (--async-envs) steps each env in its own process: a vector step takes as long
as the slowest env (given a core per env), plus the inter-process traffic of every step. So it pays when env steps
are slow and uneven (a simulator), and costs where they are cheap.

This file registers SlowStep-HalfCheetah-v4 (HalfCheetah-v4 whose steps busy-wait, holding a core as a simulator
would: 2 ms, and 100 ms on 3% of steps, the same steps in sync and async runs) and runs
scripts/ppo_continuous_action_torchcompile.py (eager) on it and on HalfCheetah-v4, at 1, 2, 4 and 8 envs, sync and
async, one run after another, with the same rollout size (1024 steps per iteration) at every env count. The scripts
themselves know nothing of the slow env.

    python doc/lockstep.py --out bench/lockstep          # the whole table: bench/lockstep/lockstep.md (~5 min, 2 cores)
    python doc/lockstep.py --run -- --env-id SlowStep-HalfCheetah-v4 --num-envs 4 --async-envs   # one run

AsyncVectorEnv's workers are forked from this process, which is how they know the registered env (the default
start method on Linux up to Python 3.13).
"""

import argparse
import json
import os
import pathlib
import runpy
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "ppo_continuous_action_torchcompile.py"
ENVS = ["SlowStep-HalfCheetah-v4", "HalfCheetah-v4"]


class SlowStep(gym.Wrapper):
    """Each step busy-waits `fast_s`, or `slow_s` on a fraction `p_slow` of the steps, drawn from the env's seed."""

    def __init__(self, env, fast_s=0.002, slow_s=0.1, p_slow=0.03):
        super().__init__(env)
        self.fast_s, self.slow_s, self.p_slow, self.rng = fast_s, slow_s, p_slow, np.random.default_rng()

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        return super().reset(seed=seed, options=options)

    def step(self, action):
        end = time.perf_counter() + (self.slow_s if self.rng.random() < self.p_slow else self.fast_s)
        while time.perf_counter() < end:  # a busy wait: the core is taken, as by a simulator's computation
            pass
        return super().step(action)


def run_script(flags):
    """One training run of the PPO script, in this process, with SlowStep-HalfCheetah-v4 registered."""
    gym.register("SlowStep-HalfCheetah-v4", entry_point=lambda **kwargs: SlowStep(gym.make("HalfCheetah-v4", **kwargs)))
    sys.argv = [str(SCRIPT), *flags]
    runpy.run_path(str(SCRIPT), run_name="__main__")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bench/lockstep", help="where the runs and lockstep.md go")
    parser.add_argument("--envs", default="1,2,4,8", help="the env counts")
    parser.add_argument(
        "--rollout", type=int, default=1024, help="env steps per iteration (num_envs x num_steps), at every env count"
    )
    parser.add_argument(
        "--iterations", type=int, default=4, help="iterations per run; the first is left out of steps/s (burn-in)"
    )
    parser.add_argument("--run", action="store_true", help="one run of the script with the flags after --")
    args, rest = parser.parse_known_args()
    if args.run:
        return run_script(rest[1:] if rest[:1] == ["--"] else rest)
    out, rows = pathlib.Path(args.out), []
    for env_id in ENVS:
        for n in map(int, args.envs.split(",")):
            sps = {}
            for mode in ["sync", "async"]:
                flags = [
                    "--env-id",
                    env_id,
                    "--num-envs",
                    n,
                    "--num-steps",
                    args.rollout // n,
                    "--total-timesteps",
                    args.rollout * args.iterations,
                    "--measure-burnin",
                    1,
                    "--output-dir",
                    out / "runs" / f"{env_id}-{n}-{mode}",
                ] + (["--async-envs"] if mode == "async" else [])
                proc = subprocess.run(
                    [sys.executable, __file__, "--run", "--", *map(str, flags)], capture_output=True, text=True
                )
                if proc.returncode:
                    sys.exit(f"lockstep: the run failed: {' '.join(map(str, flags))}\n{proc.stderr[-3000:]}")
                summary = json.loads(pathlib.Path(proc.stdout.strip().splitlines()[-1]).read_text())
                sps[mode] = summary["sps"]
                print(f"{env_id}, {n} envs, {mode}: {sps[mode]:.0f} steps/s", flush=True)
            rows.append(f"| {env_id} | {n} | {sps['sync']:,.0f} | {sps['async']:,.0f} | {sps['async'] / sps['sync']:.2f}x |")
    table = ["| env | envs | sync steps/s | async steps/s | async / sync |", "| --- | --- | --- | --- | --- |", *rows]
    (out / "lockstep.md").write_text(f"`{' '.join(sys.argv)}` on {os.cpu_count()} cores\n\n" + "\n".join(table) + "\n")
    print("\n".join(table))


if __name__ == "__main__":
    main()
