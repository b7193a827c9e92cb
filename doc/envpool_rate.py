"""envpool's own rate: the Atari envs of the PPO Atari files stepped alone, with random actions, on this machine.

    python doc/envpool_rate.py                                   # Breakout-v5, 8 envs, 3 repeats of 3,000 batches
    python doc/envpool_rate.py --results bench/cpu/results.csv   # and each PPO Atari row as a fraction of it

The envs are made as the scripts make them (episodic life, reward clipping, envpool's defaults otherwise: 4 frames a
step, 4 stacked 84x84 frames, NEXT_STEP autoreset) and stepped synchronously, as the training loop steps them. The
rate is agent steps per second (each step plays 4 emulated frames), the ceiling of a training loop that does nothing
else. A random agent loses lives often, and envpool plays the reset of each lost life in the step after it: the
batches holding such a reset step are timed apart from the others, and the rate without them is given beside.
Markdown on stdout; with --out, the same as JSON.
"""

import argparse
import csv
import json
import statistics
import time

import envpool
import numpy as np


def measure(env_id, num_envs, batches, seed, threads):
    """(seconds of each batch step, whether the batch held a reset step) over `batches` steps after a warm-up."""
    envs = envpool.make(
        env_id,
        env_type="gymnasium",
        num_envs=num_envs,
        episodic_life=True,
        reward_clip=True,
        seed=seed,
        num_threads=threads,
    )
    rng = np.random.default_rng(seed)
    envs.reset()
    done = np.zeros(num_envs, dtype=bool)
    times, resets = [], []
    for i in range(batches + 100):  # the first 100: warm-up, not timed
        actions = rng.integers(0, envs.action_space.n, num_envs)
        start = time.perf_counter()
        _, _, terminations, truncations, _ = envs.step(actions)
        elapsed = time.perf_counter() - start
        if i >= 100:
            times.append(elapsed)
            resets.append(bool(done.any()))  # a done in the last step: this step played its reset
        done = np.logical_or(terminations, truncations)
    envs.close()
    return times, resets


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-id", default="Breakout-v5")
    parser.add_argument("--num-envs", type=int, default=8, help="as the PPO Atari files (default 8)")
    parser.add_argument("--batches", type=int, default=3000, help="batch steps timed per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="envpool's threads (0: its default, as the scripts)")
    parser.add_argument("--results", help="a run.sh results.csv: each PPO Atari run's steps/s as a fraction of the rate")
    parser.add_argument("--out", help="write the figures as JSON here too")
    args = parser.parse_args()

    repeats = []
    for seed in range(1, args.repeats + 1):
        times, resets = measure(args.env_id, args.num_envs, args.batches, seed, args.threads)
        with_reset = [t for t, r in zip(times, resets) if r]
        without = [t for t, r in zip(times, resets) if not r]
        repeats.append(
            dict(
                seed=seed,
                steps_per_s=args.num_envs * len(times) / sum(times),
                steps_per_s_without_resets=args.num_envs / statistics.mean(without) if without else None,
                batches_with_reset=len(with_reset) / len(times),
                ms_with_reset=1000 * statistics.mean(with_reset) if with_reset else None,
                ms_without_reset=1000 * statistics.mean(without) if without else None,
            )
        )
    rate = statistics.median(r["steps_per_s"] for r in repeats)
    print(f"# envpool alone: {args.env_id}, {args.num_envs} envs, random actions, synchronous steps\n")
    print(f"{args.repeats} repeats of {args.batches} batch steps (after 100 untimed), seeds 1-{args.repeats}.\n")
    print("| repeat | steps/s | steps/s without reset batches | batches with a reset | ms per batch, with | without |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in repeats:
        print(
            f"| {r['seed']} | {r['steps_per_s']:,.0f} | {r['steps_per_s_without_resets']:,.0f} | "
            f"{100 * r['batches_with_reset']:.1f}% | {r['ms_with_reset']:.2f} | {r['ms_without_reset']:.2f} |"
        )
    print(f"\nMedian: **{rate:,.0f} steps/s**.")
    fractions = []
    if args.results:
        with open(args.results, newline="") as f:
            rows = [r for r in csv.DictReader(f) if r["algorithm"] == "ppo_atari" and r["status"] == "finished" and r["sps"]]
        by_variant = {}
        for row in rows:
            by_variant.setdefault(row["variant"], []).append(float(row["sps"]))
        print("\n| PPO Atari variant | steps/s median | of envpool's rate |\n| --- | --- | --- |")
        for variant, speeds in by_variant.items():
            median = statistics.median(speeds)
            fractions.append(dict(variant=variant, sps=median, fraction=median / rate))
            print(f"| {variant} | {median:,.0f} | {100 * median / rate:.0f}% |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(vars(args), rate=rate, repeats=repeats, fractions=fractions), f, indent=2)


if __name__ == "__main__":
    main()
