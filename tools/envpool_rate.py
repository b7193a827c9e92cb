"""envpool's own rate: the Atari envs of the PPO Atari files stepped alone, with random actions, on this machine.

    python tools/envpool_rate.py                                   # Breakout-v5, 8 envs, 3 repeats of 3,000 batches
    python tools/envpool_rate.py --results bench/cpu/results.csv   # and each PPO Atari row as a fraction of it
    python tools/envpool_rate.py --mode async --batch-size 4        # envpool's async mode: 8 envs, batches of 4
    python tools/envpool_rate.py --mode pools                      # two pools of 4, each received and sent in turn

The envs are made as the scripts make them (episodic life, reward clipping, envpool's defaults otherwise: 4 frames a
step, 4 stacked 84x84 frames, NEXT_STEP autoreset) and stepped synchronously, as the training loop steps them. The
rate is agent steps per second (each step plays 4 emulated frames), the ceiling of a training loop that does nothing
else. A random agent loses lives often, and envpool plays the reset of each lost life in the step after it: the
batches holding such a reset step are timed apart from the others, and the rate without them is given beside
(`--no-episodic-life`: a reset only at game over).

The modes, for what a loop that overlaps env steps with the policy could reach: `sync` (the default) steps all envs
at once, as the scripts do; `async` makes one pool of --num-envs envs whose `recv()` gives the first --batch-size to
finish, each batch then sent its actions at once (a timed batch: one recv and its send); `pools` makes two pools of
half the envs each and receives and sends each in turn, so that one steps while the other's batch is handled (a timed
batch: both pools' recv and send). Markdown on stdout; with --out, the same as JSON.
"""

import argparse
import csv
import json
import statistics
import time

import envpool
import numpy as np


def make(env_id, num_envs, seed, threads, episodic_life, batch_size=None):
    return envpool.make(
        env_id,
        env_type="gymnasium",
        num_envs=num_envs,
        batch_size=batch_size or num_envs,
        episodic_life=episodic_life,
        reward_clip=True,
        seed=seed,
        num_threads=threads,
    )


def measure(env_id, num_envs, batches, seed, threads, mode="sync", batch_size=None, episodic_life=True):
    """(seconds of each timed batch, whether it held a reset step, its env steps) over `batches` batches after 100
    untimed ones. A reset step: the step after an env's done (its game's or its life's end), envpool's reset."""
    rng = np.random.default_rng(seed)
    if mode == "sync":
        pools = [make(env_id, num_envs, seed, threads, episodic_life)]
    elif mode == "async":
        pools = [make(env_id, num_envs, seed, threads, episodic_life, batch_size)]
    else:  # two pools of half the envs, each its own seed
        pools = [make(env_id, num_envs // 2, seed + k * 1000, threads, episodic_life) for k in (0, 1)]
    done = [np.zeros(pool.config["num_envs"], dtype=bool) for pool in pools]
    for pool in pools:
        pool.reset() if mode == "sync" else pool.async_reset()
    times, resets, steps = [], [], []
    for i in range(batches + 100):  # the first 100: warm-up, not timed
        elapsed, reset, count = 0.0, False, 0
        for k, pool in enumerate(pools):
            start = time.perf_counter()
            if mode == "sync":
                ids = np.arange(num_envs)
                _, _, terminations, truncations, _ = pool.step(rng.integers(0, pool.action_space.n, num_envs))
            else:  # the batch of envs that finished first, then their actions
                _, _, terminations, truncations, info = pool.recv()
                ids = info["env_id"]
                pool.send(rng.integers(0, pool.action_space.n, len(ids)), ids)
            elapsed += time.perf_counter() - start
            reset |= bool(done[k][ids].any())  # a done in an env's last step: this step played its reset
            done[k][ids] = np.logical_or(terminations, truncations)
            count += len(ids)
        if i >= 100:
            times.append(elapsed)
            resets.append(reset)
            steps.append(count)
    for pool in pools:
        pool.close()
    return times, resets, steps


def figure(value, spec):  # "-" where no batch of that kind was timed
    return "-" if value is None else format(value, spec)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-id", default="Breakout-v5")
    parser.add_argument("--num-envs", type=int, default=8, help="as the PPO Atari files (default 8)")
    parser.add_argument("--batches", type=int, default=3000, help="batch steps timed per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="envpool's threads (0: its default, as the scripts)")
    parser.add_argument("--mode", choices=["sync", "async", "pools"], default="sync", help="see above (default: sync)")
    parser.add_argument("--batch-size", type=int, help="--mode async: envs per batch (default: half of --num-envs)")
    parser.add_argument("--no-episodic-life", action="store_true", help="a reset only at game over, not at a life lost")
    parser.add_argument("--results", help="a run.sh results.csv: each PPO Atari run's steps/s as a fraction of the rate")
    parser.add_argument("--out", help="write the figures as JSON here too")
    args = parser.parse_args()
    if args.mode == "async":
        args.batch_size = args.batch_size or args.num_envs // 2
        if not 1 <= args.batch_size <= args.num_envs:
            parser.error(f"--batch-size {args.batch_size}: from 1 to --num-envs ({args.num_envs})")
    elif args.batch_size is not None:
        parser.error("--batch-size: only with --mode async")
    if args.mode == "pools" and (args.num_envs < 2 or args.num_envs % 2):
        parser.error(f"--mode pools: --num-envs {args.num_envs} is not an even number of 2 or more")

    repeats = []
    for seed in range(1, args.repeats + 1):
        times, resets, steps = measure(
            args.env_id,
            args.num_envs,
            args.batches,
            seed,
            args.threads,
            mode=args.mode,
            batch_size=args.batch_size,
            episodic_life=not args.no_episodic_life,
        )
        with_reset = [(t, n) for t, r, n in zip(times, resets, steps) if r]
        without = [(t, n) for t, r, n in zip(times, resets, steps) if not r]
        repeats.append(
            dict(
                seed=seed,
                steps_per_s=sum(steps) / sum(times),
                steps_per_s_without_resets=sum(n for _, n in without) / sum(t for t, _ in without) if without else None,
                batches_with_reset=len(with_reset) / len(times),
                ms_with_reset=1000 * statistics.mean(t for t, _ in with_reset) if with_reset else None,
                ms_without_reset=1000 * statistics.mean(t for t, _ in without) if without else None,
            )
        )
    rate = statistics.median(r["steps_per_s"] for r in repeats)
    how = {
        "sync": "synchronous steps",
        "async": f"async, batches of {args.batch_size}",
        "pools": f"two pools of {args.num_envs // 2} in turn",
    }[args.mode]
    lives = ", no episodic life" if args.no_episodic_life else ""
    threads = f", {args.threads} threads" if args.threads else ""
    print(f"# envpool alone: {args.env_id}, {args.num_envs} envs, random actions, {how}{threads}{lives}\n")
    print(f"{args.repeats} repeats of {args.batches} batch steps (after 100 untimed), seeds 1-{args.repeats}.\n")
    print("| repeat | steps/s | steps/s without reset batches | batches with a reset | ms per batch, with | without |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in repeats:
        cells = [f"{r['steps_per_s']:,.0f}", figure(r["steps_per_s_without_resets"], ",.0f")]
        cells += [
            f"{100 * r['batches_with_reset']:.1f}%",
            figure(r["ms_with_reset"], ".2f"),
            figure(r["ms_without_reset"], ".2f"),
        ]
        print(f"| {r['seed']} | " + " | ".join(cells) + " |")
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
