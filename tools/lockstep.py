"""When does stepping envs in other processes pay: --async-envs against Ray env runners. The lock-step benchmark.

gymnasium's SyncVectorEnv steps its envs one after another in the training process: a vector step takes the sum of
the envs' step times. AsyncVectorEnv (--async-envs) steps each env in its own process: a vector step takes as long
as the slowest env (given a core per env), plus the inter-process traffic of every step; all envs still meet at every
step (lock-step), so one slow env holds the others. Ray env runners (--env-runners N) each step num_envs / N envs
through a whole rollout and meet the learner only at its end: a slow env holds only its own runner, for one step.

The envs, registered when this module is imported (gymnasium's `module:id` form makes them anywhere: the script's
process, AsyncVectorEnv's workers and Ray's runner processes, which import this module from tools/ on PYTHONPATH):

- TalkBusy-v0, TalkWait-v0: the RLlib talk's env. 17 float observations, 6 actions, cheap arithmetic; each step takes
  3 ms and each reset 100 ms. Episodes end at random: a step terminates with probability 1/32, drawn from the env's
  own seeded RNG (never from the actions, so a seed gives the same episodes in every mode), so episodes last 32 steps
  on average and about 3% of an env's calls are the slow reset (1 in 33, with NEXT_STEP autoreset). Were every
  episode exactly 32 steps, all envs would reset on the same vector step: lock-step would cost nothing, and async
  would tie with runners. Random ends spread the resets unevenly over the envs, as a real simulator's do.
  Busy spends the time computing (a loop until the thread has used that much CPU time: a simulator in this process,
  which needs a core, and takes longer when the cores are shared); Wait sleeps (a simulator on another machine, or a
  robot: the core is free meanwhile).
- TalkWaitRare-v0: TalkWait-v0 with episodes of 1000 steps on average: slow resets are rare (0.1% of calls), the
  steps even, so async and runners should tie (up to 8 envs: at 16, each of the 8 runners steps 2 envs in turn).
- HalfCheetah-v4 itself: steps of about 50 us, which cost less than any process boundary.
- SlowStep-HalfCheetah-v4 (an earlier table's, not run by default): HalfCheetah-v4 whose steps busy-wait 2 ms of wall
  time, and 100 ms on 3% of the steps (wall time, unlike TalkBusy: on shared cores its work shrinks).

Each env, at 1, 2, 4, 8 and 16 envs, is run with PPO continuous (eager) three ways, one run after another: sync and
--async-envs with scripts/ppo_continuous_action_torchcompile.py, and runners with its Ray variant,
scripts/ppo_continuous_action_ray_torchcompile.py --env-runners R --env-runner-cpus C, where R = min(envs, 8) (the
largest divisor of envs up to 8) and C = cores / R but at most 1 (the CPUs Ray reserves per runner, so that R
runners fit on the machine; the learner has no core reserved: it works while the runners' envs step, or wait).
The rollout has the same size at every env count (1024 steps per iteration:
--num-steps 1024/envs); 4 iterations, the first left out of steps/s (--measure-burnin 1). The script knows nothing
of these envs.

    python tools/lockstep.py --out bench/lockstep          # the whole table (60 runs): lockstep.md, .csv, machine.json
    python tools/lockstep.py --out /tmp/lockstep --envs 2 --env-ids TalkWait-v0 --rollout 64 --iterations 2  # a smoke run
    PYTHONPATH=tools python scripts/ppo_continuous_action_ray_torchcompile.py --env-id lockstep:TalkWait-v0 \\
        --num-envs 8 --env-runners 8 --env-runner-cpus 0.25         # one run
"""

import argparse
import csv
import json
import os
import pathlib
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
SCRIPT = HERE.parent / "scripts" / "ppo_continuous_action_torchcompile.py"  # sync and async
RUNNERS_SCRIPT = HERE.parent / "scripts" / "ppo_continuous_action_ray_torchcompile.py"  # its Ray variant: runners
ENVS = ["TalkBusy-v0", "TalkWait-v0", "TalkWaitRare-v0", "HalfCheetah-v4"]
MODES = ["sync", "async", "runners"]


def spend(seconds, busy):
    """Take `seconds`: computing (this thread's CPU time, as a simulator's work) or sleeping (waiting on another machine)."""
    if not busy:
        time.sleep(seconds)
        return
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class TalkEnv(gym.Env):
    """Steps of `step_s`, resets of `reset_s`, each step terminating with probability 1 / `mean_length` (the env's RNG).
    The observation drifts at random; the reward is for actions that follow its first 6 numbers."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (17,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (6,), np.float32)

    def __init__(self, busy=False, step_s=0.003, reset_s=0.1, mean_length=32):
        self.busy, self.step_s, self.reset_s, self.mean_length = busy, step_s, reset_s, mean_length

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        spend(self.reset_s, self.busy)
        self.obs = self.np_random.standard_normal(17).astype(np.float32)
        return self.obs, {}

    def step(self, action):
        spend(self.step_s, self.busy)
        reward = -float(np.square(action - self.obs[:6]).mean())
        self.obs = (0.9 * self.obs + 0.1 * self.np_random.standard_normal(17)).astype(np.float32)
        terminated = bool(self.np_random.random() < 1 / self.mean_length)
        return self.obs, reward, terminated, False, {}


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


# The episodes end by termination; the time limit (10 mean lengths, reached by fewer than 1 episode in 20,000) is a guard.
if "TalkBusy-v0" not in gym.registry:  # (once: tools/tables.py and the tests may load this file again)
    gym.register("TalkBusy-v0", entry_point=TalkEnv, kwargs=dict(busy=True), max_episode_steps=320)
    gym.register("TalkWait-v0", entry_point=TalkEnv, kwargs=dict(busy=False), max_episode_steps=320)
    gym.register("TalkWaitRare-v0", entry_point=TalkEnv, kwargs=dict(busy=False, mean_length=1000), max_episode_steps=10_000)
    gym.register("SlowStep-HalfCheetah-v4", entry_point=lambda **kwargs: SlowStep(gym.make("HalfCheetah-v4", **kwargs)))
OURS = ["TalkBusy-v0", "TalkWait-v0", "TalkWaitRare-v0", "SlowStep-HalfCheetah-v4"]


def runners_for(num_envs):
    """The env runners for `num_envs` envs: min(num_envs, 8), or the largest divisor of num_envs up to 8."""
    return max(r for r in range(1, min(num_envs, 8) + 1) if num_envs % r == 0)


def run(env_id, num_envs, mode, args):
    """One training run of the PPO script in a subprocess; returns its CSV row (sps None if it failed)."""
    flags = [
        "--env-id",
        f"lockstep:{env_id}" if env_id in OURS else env_id,
        "--num-envs",
        num_envs,
        "--num-steps",
        args.rollout // num_envs,
        "--total-timesteps",
        args.rollout * args.iterations,
        "--measure-burnin",
        1,
        "--output-dir",
        pathlib.Path(args.out) / "runs" / f"{env_id}-{num_envs}-{mode}",
    ]
    if mode == "async":
        flags += ["--async-envs"]
    runners, cpus = 0, ""
    if mode == "runners":  # cores / runners, rounded down to Ray's precision (1e-4) so that they fit
        runners = runners_for(num_envs)
        cpus = args.env_runner_cpus or int(min(1.0, os.cpu_count() / runners) * 10_000) / 10_000
        flags += ["--env-runners", runners, "--env-runner-cpus", cpus]
    path = os.pathsep.join([str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])])  # `lockstep:` is importable
    cmd = [sys.executable, str(RUNNERS_SCRIPT if mode == "runners" else SCRIPT), *map(str, flags)]
    row = dict(env_id=env_id, num_envs=num_envs, mode=mode, num_steps=args.rollout // num_envs, env_runners=runners)
    row.update(env_runner_cpus=cpus, sps=None, status="failed", summary="")
    try:  # a run that hangs is recorded as failed (SIGKILL after the timeout) and the others go on
        proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=path), timeout=args.timeout)
    except subprocess.TimeoutExpired:
        print(f"lockstep: the run took over {args.timeout} s: {' '.join(cmd)}", file=sys.stderr, flush=True)
        return row
    if proc.returncode:
        print(f"lockstep: the run failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}", file=sys.stderr, flush=True)
        return row
    summary_path = proc.stdout.strip().splitlines()[-1]
    summary = json.loads(pathlib.Path(summary_path).read_text())
    row.update(sps=summary["sps"], status=summary["status"], summary=summary_path)
    return row


def ratio(a, b):
    if a.get("sps") is None or b.get("sps") is None:
        return "-"
    return f"{a['sps'] / b['sps']:.2f}x"


def steps(row):
    if row.get("sps") is None:
        return row.get("status", "-")  # failed, or too short to measure
    return f"{row['sps']:,.0f}"


def write(out, rows, cores):
    """lockstep.csv (every run) and lockstep.md (a line per env and env count)."""
    with open(out / "lockstep.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    table = table_lines(rows)
    text = f"`{' '.join(sys.argv)}` on {cores} cores, {time.strftime('%Y-%m-%d')}\n\n" + "\n".join(table) + "\n"
    (out / "lockstep.md").write_text(text)
    return table


def read(path):
    """lockstep.csv's rows, typed as write() had them (tools/tables.py writes the published table from them)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row.update(num_envs=int(row["num_envs"]), env_runners=int(row["env_runners"]))
        row.update(sps=float(row["sps"]) if row["sps"] else None)
        row.update(env_runner_cpus=float(row["env_runner_cpus"]) if row["env_runner_cpus"] else "")
    return rows


def table_lines(rows):
    """A line per env and env count: each mode's steps/s and their ratios."""
    header = "| env | envs | sync steps/s | async steps/s | runners steps/s | runners x CPUs | async / sync | runners / sync"
    table = [header + " | runners / async |", "| --- " * 9 + "|"]
    cells = {(row["env_id"], row["num_envs"], row["mode"]): row for row in rows}
    for env_id, n in dict.fromkeys((row["env_id"], row["num_envs"]) for row in rows):
        sync, asyn, runners = [cells.get((env_id, n, mode), {}) for mode in MODES]
        share = f"{runners['env_runners']} x {runners['env_runner_cpus']:g}" if runners else "-"
        speeds = f"{steps(sync)} | {steps(asyn)} | {steps(runners)} | {share}"
        ratios = f"{ratio(asyn, sync)} | {ratio(runners, sync)} | {ratio(runners, asyn)}"
        table.append(f"| {env_id} | {n} | {speeds} | {ratios} |")
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bench/lockstep", help="where the runs, lockstep.md and lockstep.csv go")
    parser.add_argument("--envs", default="1,2,4,8,16", help="the env counts")
    parser.add_argument("--env-ids", default=",".join(ENVS), help=f"the envs, of {', '.join(ENVS + OURS[3:])} or any other")
    parser.add_argument("--modes", default=",".join(MODES), help="of sync, async (--async-envs), runners (--env-runners)")
    parser.add_argument(
        "--rollout", type=int, default=1024, help="env steps per iteration (num_envs x num_steps), at every env count"
    )
    parser.add_argument(
        "--iterations", type=int, default=4, help="iterations per run; the first is left out of steps/s (burn-in)"
    )
    parser.add_argument(
        "--env-runner-cpus",
        type=float,
        default=None,
        help="the CPUs Ray reserves per runner (default: cores / runners, at most 1)",
    )
    parser.add_argument("--timeout", type=float, default=900, help="seconds a run may take before it is stopped (failed)")
    args = parser.parse_args()
    out, rows = pathlib.Path(args.out), []
    if (out / "lockstep.md").exists() and "<!-- table: lockstep -->" in (out / "lockstep.md").read_text():
        parser.error(f"--out: {out} holds the published page; run into another folder (bench/lockstep) and copy its CSV")
    out.mkdir(parents=True, exist_ok=True)
    record = [sys.executable, str(HERE / "aggregate.py"), "--record-machine", str(out)]  # the machine, the commit
    subprocess.run(record, check=True, cwd=HERE.parent, stdout=subprocess.DEVNULL)
    for env_id in args.env_ids.split(","):
        for n in map(int, args.envs.split(",")):
            for mode in args.modes.split(","):
                rows.append(run(env_id, n, mode, args))
                print(f"{env_id}, {n} envs, {mode}: {steps(rows[-1])}", flush=True)
                table = write(out, rows, os.cpu_count())  # after every run: a stopped benchmark keeps what it measured
    print("\n".join(table))
    if any(row["sps"] is None for row in rows):
        sys.exit("lockstep: some runs failed (their cells say so)")


if __name__ == "__main__":
    main()
