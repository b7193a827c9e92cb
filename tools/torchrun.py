"""Data-parallel PPO Atari under torchrun on this machine's CPU, against one process with the same global batch: per
seed, 2 ranks x 4 envs (scripts/ppo_atari_multigpu_torchcompile.py, gloo, a torch thread each) and 1 process x 8 envs
(scripts/ppo_atari_torchcompile.py), one run after another; torchrun.csv gets a row per run (steps/s after the
burn-in, the return), machine.json and machine.md the machine.

    python tools/torchrun.py --out bench/torchrun          # 3 seeds: torchrun.csv, machine.json, machine.md
    python tools/torchrun.py --out /tmp/torchrun --seeds 1 --total-timesteps 2048   # a smoke run

Both run eager (no --compile), default hyperparameters, the same global batch (8 envs x 128 steps an iteration,
4 minibatches of 256 rows; under torchrun 128 a rank, the gradients averaged in one all_reduce a minibatch) and the
same env seeds (rank r's envs start at --seed + r * --num-envs, as the one process's fifth env does). The first
iteration is left out of steps/s (--measure-burnin 1).
"""

import argparse
import csv
import json
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
MODES = {
    "2 ranks x 4 envs (torchrun, gloo)": TORCHRUN
    + ["scripts/ppo_atari_multigpu_torchcompile.py", "--num-envs", "4", "--dist-backend", "gloo"],
    "1 process x 8 envs": [sys.executable, "scripts/ppo_atari_torchcompile.py", "--num-envs", "8"],
}


def run(mode, seed, total_timesteps, timeout):
    """One run; its row (sps None where it failed)."""
    with tempfile.TemporaryDirectory() as runs:
        flags = ["--total-timesteps", str(total_timesteps), "--measure-burnin", "1", "--no-cuda", "--seed", str(seed)]
        command = MODES[mode] + flags + ["--output-dir", runs]
        row = dict(mode=mode, seed=seed, total_timesteps=total_timesteps, sps=None, episodic_return=None, status="failed")
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # SIGTERM, which torchrun passes on to its ranks (in sessions of their own, a SIGKILL to it would leave them
            # training beside the next runs); the runs stop after their iteration
            proc.terminate()
            proc.communicate()
            print(f"torchrun.py: the run took over {timeout} s: {' '.join(command)}", file=sys.stderr, flush=True)
            return row
        found = list(pathlib.Path(runs).glob("*/summary.json"))
        if proc.returncode or not found:
            print(f"torchrun.py: the run failed: {' '.join(command)}\n{stderr[-3000:]}", file=sys.stderr, flush=True)
            return row
        summary = json.loads(found[0].read_text())
        row.update(sps=summary["sps"], episodic_return=summary["episodic_return"], status=summary["status"])
        return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bench/torchrun", help="the folder for torchrun.csv, machine.json, machine.md")
    parser.add_argument("--seeds", default="1,2,3", help="the seeds; each runs both ways, one after the other")
    parser.add_argument("--total-timesteps", type=int, default=10240, help="each run's budget (10 iterations)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds a run may take before it is stopped (failed)")
    args = parser.parse_args()
    if args.total_timesteps < 1 or args.timeout <= 0:
        parser.error("--total-timesteps: at least 1" if args.total_timesteps < 1 else "--timeout: more than 0 seconds")
    try:
        seeds = [int(seed) for seed in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds: a comma-separated list of integers, not {args.seeds!r}")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = [sys.executable, str(ROOT / "tools" / "aggregate.py"), "--record-machine", str(out)]
    subprocess.run(record, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    rows = []
    for seed in seeds:
        for mode in MODES:
            rows.append(run(mode, seed, args.total_timesteps, args.timeout))
            print(f"torchrun.py: seed {seed}, {mode}: {rows[-1]['sps']} steps/s", flush=True)
            with open(out / "torchrun.csv", "w", newline="") as f:  # after every run: a stopped run keeps the others
                writer = csv.DictWriter(f, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows(rows)
    if any(row["sps"] is None for row in rows):
        sys.exit("torchrun.py: some runs failed (their rows say so)")


if __name__ == "__main__":
    main()
