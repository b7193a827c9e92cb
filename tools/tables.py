"""The README's first tables, doc/speed.md's and the learning page's tables, doc/tricks.md's micro-benchmark tables and
doc/usage.md's checkpoint costs, written from the results files they come from (doc/results/<machine>/results.csv, micro.csv,
checkpoint_cost.csv and machine.json), between the pages' `<!-- table: NAME -->` and `<!-- /table -->` lines.

    python tools/tables.py            # rewrites them
    python tools/tables.py --check    # says whether the pages hold them as the results files give them

Each table names the machine and the commit of the scripts that made its figures. A figure is a median over the seeds
that finished (steps/s after the burn-in); a ratio is of unrounded medians; a range is the seeds' lowest to highest.
"""

import argparse
import csv
import json
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from helpers.scripts import load_tool  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "doc" / "results"
README = ROOT / "README.md"
TRICKS = ROOT / "doc" / "tricks.md"
USAGE = ROOT / "doc" / "usage.md"
TESTING = ROOT / "doc" / "testing.md"
MICRO = "cpu-2core-micro"  # the folder of tools/micro.py's timings
LOCKSTEP = "cpu-2core-lockstep"  # the folder of tools/lockstep.py's runs
TORCHRUN = "cpu-2core-torchrun"  # the folder of tools/torchrun.py's runs
SUITE = "cpu-2core-suite"  # the folder of tools/suite.py's timings of the tests
ENV_VERSIONS = "cpu-2core-env-versions"  # the folder of tools/env_versions.py's plays
FRESH_INSTALLS = ["cpu-2core-python311", "cpu-2core-python312"]  # a fresh clone's CPU install, quick start, quick tier

ALGORITHMS = {  # the name a reader knows, and the env of the runs
    "ppo_atari": "PPO Atari (Breakout-v5, 8 envs)",
    "ppo_continuous_action": "PPO continuous (HalfCheetah-v4)",
    "sac_continuous_action": "SAC (HalfCheetah-v4)",
    "td3_continuous_action": "TD3 (HalfCheetah-v4)",
    "dqn": "DQN (CartPole-v1)",
}
# The steps in each GPU run's burn-in (the commands in the GPU pages' notes): PPO 2 iterations (--measure-burnin 2) of
# 8 x 128 (Atari) and 2048 (continuous) steps; SAC and TD3 5,000 random steps and 51 updates (--learning-starts 5000
# --measure-burnin 50); DQN 10,000 random steps, then an update every 10 steps, 51 of them (--measure-burnin 50).
GPU_BURNIN_STEPS = {
    "ppo_atari": 2 * 1024,
    "ppo_continuous_action": 2 * 2048,
    "sac_continuous_action": 5000 + 51,
    "td3_continuous_action": 5000 + 51,
    "dqn": 10000 + 51 * 10,
}
GPU_FOLDERS = {"sac_continuous_action": "h200-16core"}  # the others ran on the H100
CPU_COLUMNS = [  # the CPU table's variants: (column, variant)
    ("baseline steps/s", "baseline"),
    ("fast", "fast"),
    ("fast `--compile` (SAC, TD3: eager on a CPU)", "compile"),
    ("fast `--precision bf16`", "fast"),  # (the runs with --precision bf16: their exp_name says so)
    ("LeanRL baseline", "leanrl"),
    ("LeanRL fast", "leanrl_fast"),
    ("LeanRL fast `--compile`", "leanrl_compile"),
]


def read_csv(path):
    """A results file's rows, as dicts of strings."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def runs(folder):
    return [row for row in read_csv(RESULTS / folder / "results.csv") if row["status"] == "finished" and row["sps"]]


def machine(folder):
    return json.loads((RESULTS / folder / "machine.json").read_text())


def sps(rows, algorithm, variant, bf16=False):
    """The steps/s of the seeds of one variant (the bf16 runs apart: their exp_name ends in bf16)."""
    picked = [r for r in rows if r["algorithm"] == algorithm and r["variant"] == variant]
    return [float(r["sps"]) for r in picked if r["exp_name"].endswith("bf16") == bf16]


def commit(info):
    """The commit a machine record names, short, with -dirty where its tree had uncommitted changes."""
    name = info["git_commit"]
    return name[:7] + ("-dirty" if name.endswith("-dirty") else "")


def figure(x):
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def gpu_table():
    """The GPU runs, and what the 2-core Xeon of the CPU table ran at on the same budgets (its baseline, and its fast
    file at its best): on these short budgets, the GPU's baselines were no faster than a 2-core CPU's."""
    xeon = runs("cpu-2core-xeon")
    lines = ["| algorithm | GPU, commit | baseline steps/s | fast `--compile --cudagraphs` | timed (fast / baseline) "
             "| the 2-core Xeon, the same budget: baseline / fast at best |"]  # fmt: skip
    lines.append("| --- | --- | --- | --- | --- | --- |")
    for algorithm, name in ALGORITHMS.items():
        folder = GPU_FOLDERS.get(algorithm, "h100-16core")
        rows, gpu = runs(folder), machine(folder)["gpu"].split(",")[0].replace("NVIDIA ", "").split()[0]
        base, fast = (statistics.median(sps(rows, algorithm, v)) for v in ("baseline", "compile_cudagraphs"))
        steps = [int(r["global_step"]) for r in rows if r["algorithm"] == algorithm][0]
        timed = [(steps - GPU_BURNIN_STEPS[algorithm]) / x for x in (fast, base)]
        cells = [
            name,
            f"[{gpu}](doc/results/{folder}/results.md), {commit(machine(folder))}",
            figure(base),
            f"{figure(fast)} ({fast / base:.2f}x)",
        ]
        cpu = "not run at this budget"
        if sps(xeon, algorithm, "baseline"):
            top = best(xeon, algorithm, OURS_FAST)[1]
            cpu = f"{figure(statistics.median(sps(xeon, algorithm, 'baseline')))} / {figure(top)}"
        lines.append("| " + " | ".join(cells + [f"{timed[0]:.1f} s / {timed[1]:.1f} s", cpu]) + " |")
    return lines


def cpu_table(folder="cpu-2core-xeon"):
    rows = runs(folder)
    header = ["algorithm"] + [column for column, _ in CPU_COLUMNS]
    lines = [f"The scripts of commit {commit(machine(folder))}:", ""]
    lines += ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] * len(header)) + " |"]
    for algorithm, name in ALGORITHMS.items():
        base = sps(rows, algorithm, "baseline")
        if not base:
            continue
        cells = [name]
        for column, variant in CPU_COLUMNS:
            found = sps(rows, algorithm, variant, bf16="bf16" in column)
            if not found:
                cells.append("-")
            elif variant == "baseline":
                cells.append(figure(statistics.median(found)))
            else:
                median = statistics.median(found)
                cells.append(f"{figure(median)} ({median / statistics.median(base):.2f}x)")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def beside_leanrl_table():
    """Ours beside LeanRL's own files with the same flags, where they ran on another machine than the CPU table's: each
    variant's median and range over its seeds, ours to LeanRL's."""
    lines = ["| algorithm | machine, commit | flags | seeds | ours steps/s (range) | LeanRL's (range) | ours / LeanRL's |"]
    lines.append("| --- | --- | --- | --- | --- | --- | --- |")
    folders = [("cpu-2core-dqn-leanrl", "dqn", ""), ("cpu-2core-ppo-atari-leanrl", "ppo_atari", ""),
               ("cpu-2core-ppo-atari-leanrl-same-malloc", "ppo_atari", ", the same malloc settings on both")]  # fmt: skip
    for folder, algorithm, also in folders:
        rows, info = runs(folder), machine(folder)
        model = "EPYC" if "EPYC" in info["cpu_model"] else info["cpu_model"]
        if "cpu_flags" in info:  # (recorded since; the older folders' notes say which CPU they had)
            model += " (AVX-512)" if "avx512f" in info["cpu_flags"].split() else " (AVX2)"
        where = f"[{model}](doc/results/{folder}/notes.md), {commit(info)}"
        for flags, ours, theirs in [("none (baselines)", "baseline", "leanrl"), ("none", "fast", "leanrl_fast"),
                                    ("`--compile`", "compile", "leanrl_compile")]:  # fmt: skip
            flags += also
            a, b = sps(rows, algorithm, ours), sps(rows, algorithm, theirs)
            if not a or not b:
                continue
            ranges = [f"{figure(statistics.median(x))} ({figure(min(x))}-{figure(max(x))})" for x in (a, b)]
            ratio = statistics.median(a) / statistics.median(b)
            seeds = f"{len(a)}" if len(a) == len(b) else f"{len(a)} / {len(b)}"
            lines.append(
                f"| {ALGORITHMS[algorithm]} | {where} | {flags} | {seeds} | {ranges[0]} | {ranges[1]} | {ratio:.2f}x |"
            )
    return lines


# The learning table's rows: (the row's name, results folder or folders (the seeds of one file may be in several),
# algorithm, variant, exp_name, the file and flags that ran)
LEARNING = [
    ("PPO continuous, HalfCheetah-v4, 1M", "cpu-2core-learning", "ppo_continuous_action", "baseline", None,
     "ppo_continuous_action.py"),
    ("PPO continuous, HalfCheetah-v4, 1M", "cpu-2core-learning", "ppo_continuous_action", "compile", None,
     "ppo_continuous_action_torchcompile.py --compile"),
    ("SAC, HalfCheetah-v4, 1M", ("cpu-2core-learning", "cpu-2core-learning-seeds"), "sac_continuous_action", "fast",
     None, "sac_continuous_action_torchcompile.py"),
    ("SAC, HalfCheetah-v4, 1M", "cpu-2core-xeon-learning-bf16", "sac_continuous_action", "fast", "bf16",
     "sac_continuous_action_torchcompile.py --precision bf16"),
    ("TD3, HalfCheetah-v4, 1M", "cpu-2core-learning-baselines", "td3_continuous_action", "baseline", None,
     "td3_continuous_action.py"),
    ("TD3, HalfCheetah-v4, 1M", ("cpu-2core-learning", "cpu-2core-learning-td3", "cpu-2core-learning-td3-seed3"),
     "td3_continuous_action", "fast", None, "td3_continuous_action_torchcompile.py"),
    ("DQN, CartPole-v1, 500k", "cpu-2core", "dqn", "baseline", None, "dqn.py"),
    ("DQN, CartPole-v1, 500k", "cpu-2core", "dqn", "fast", None, "dqn_torchcompile.py"),
    ("DQN, CartPole-v1, 500k", "cpu-2core", "dqn", "compile", None, "dqn_torchcompile.py --compile"),
]  # fmt: skip


def cleanrl(algorithm, env_id):
    """CleanRL's published final return, mean ± std over its seeds (doc/results/cleanrl_reference.csv)."""
    rows = [
        r
        for r in read_csv(RESULTS / "cleanrl_reference.csv")
        if (r["algorithm"], r["env_id"]) == (algorithm, env_id) and r["std"]
    ]
    final = max(rows, key=lambda r: int(r["step"]))
    if float(final["return"]) < 1000:
        return f"{final['return']} ± {final['std']}"
    return f"{float(final['return']):,.0f} ± {float(final['std']):,.0f}"


def folders_of(folder):
    """A learning row's results folders: one, or several (each holding some of its seeds)."""
    return [folder] if isinstance(folder, str) else list(folder)


def finished_seeds(folder, algorithm, variant, exp):
    """A learning row's finished runs across its results folders, by seed."""
    rows = [r for f in folders_of(folder) for r in runs(f) if (r["algorithm"], r["variant"]) == (algorithm, variant)]
    return sorted([r for r in rows if exp is None or r["exp_name"] == exp], key=lambda r: int(r["seed"]))


def learning_table():
    """Training returns at CleanRL's budgets (the mean of a run's last 20 episodes; mean ± the seeds' sample std where
    several), beside CleanRL's."""
    lines = ["| algorithm, env, budget | file and flags | seeds | return | CleanRL |", "| --- | --- | --- | --- | --- |"]
    for name, folder, algorithm, variant, exp, shown in LEARNING:
        rows = finished_seeds(folder, algorithm, variant, exp)
        returns = [float(r["episodic_return"]) for r in rows]
        seeds = ", ".join(r["seed"] for r in rows)
        if len(returns) == 1:
            said = figure(returns[0]) if returns[0] >= 1000 else f"{returns[0]:.1f}"
        elif statistics.mean(returns) >= 1000:
            said = f"{statistics.mean(returns):,.0f} ± {statistics.stdev(returns):,.0f}"
        else:
            said = f"{statistics.mean(returns):.1f} ± {statistics.stdev(returns):.1f}"
        lines.append(f"| {name} | `{shown}` | {seeds} | {said} | {cleanrl(algorithm, rows[0]['env_id'])} |")
    return lines


def env_versions_table():
    """tools/env_versions.py's plays: CleanRL's MuJoCo tasks played with the same inputs by other libraries and today's."""
    rows = read_csv(RESULTS / ENV_VERSIONS / "env_versions.csv")
    info = machine(ENV_VERSIONS)
    tiny = lambda x: "-" if x == "" else "0" if float(x) == 0 else f"{float(x):.1e}"  # noqa: E731
    lines = [
        f"Played by `python tools/env_versions.py` on a {cpu_words(info)}, commit {commit(info)}"
        f" ([env_versions.csv]({ENV_VERSIONS}/env_versions.csv)): each env {int(rows[0]['steps']):,} steps of the same"
        f" random actions from the same seeded reset, once as the env goes on and once reset every {rows[0]['stretch']}"
        f" steps as well (the checked steps' play), against {rows[0]['reference']}.",
        "",
        "| env | played by | the same actions, reset | after the first step: largest difference in an observation,"
        " in the reward | steps checked (from observations within 1e-9, no episode ending), with a contact"
        " | largest difference a checked step opened, at step | our first contact at step"
        " | trajectories part (1e-3) at step | sum of rewards: theirs, ours |",
        "| --- " * 9 + "|",
    ]
    for row in rows:
        same = ", ".join("yes" if row[k] == "True" else "no" for k in ("same_actions", "same_reset"))
        cells = [row["env_id"], row["played_by"], same]
        cells += [f"{tiny(row['first_step_obs_diff'])}, {tiny(row['first_step_reward_diff'])}"]
        cells += [f"{row['checked_steps']}, {row['checked_contact_steps']}"]
        jump = tiny(row["largest_jump"])
        cells += [jump if jump in ("0", "-") else f"{jump}, {row['jump_at']}", row["first_contact_at"] or "-"]
        cells += [row["parted_at"] or "not within these steps"]
        cells += [f"{float(row['reward_sum']):,.3f}, {float(row['reference_reward_sum']):,.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def learning_like_cleanrl_table():
    """Returns as CleanRL's table measures them (openrlbenchmark's rlops: each run's last 100 episodes, then the mean
    and the population std over the runs), over the seeds whose results files hold that measure (aggregate.py's
    return_last100), beside the same seeds' last 20 episodes and CleanRL's figure."""
    lines = [
        "| algorithm, env, budget | file and flags | seeds | last 100 episodes | the same seeds' last 20 | CleanRL |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, folder, algorithm, variant, exp, shown in LEARNING:
        rows = [r for r in finished_seeds(folder, algorithm, variant, exp) if r.get("return_last100")]
        if not rows:
            continue
        cells = []
        for key in ("return_last100", "episodic_return"):
            values = [float(r[key]) for r in rows]
            spread = statistics.pstdev(values)
            cells.append(f"{statistics.mean(values):,.0f} ± {spread:,.0f}" if len(values) > 1 else f"{values[0]:,.0f}")
        seeds = ", ".join(r["seed"] for r in rows)
        lines.append(f"| {name} | `{shown}` | {seeds} | {cells[0]} | {cells[1]} | {cleanrl(algorithm, rows[0]['env_id'])} |")
    return lines


def cpu_words(info):
    """The CPU in a few words, after "a": its cores, model and what its matrix products can use."""
    flags = info.get("cpu_flags", "").split()
    units = [
        name for flag, name in [("avx512f", "AVX-512"), ("avx512_bf16", "AVX512-BF16"), ("amx_tile", "AMX")] if flag in flags
    ]
    return f"{info['cpu_count']}-core {info['cpu_model']} ({', '.join(units or ['AVX2' if 'avx2' in flags else 'no AVX2'])})"


def micro_table(part):
    """One part of tools/micro.py's timings: each variant's median time of a call, its blocks' range, and its ratio to
    the fast file's choice (the variant named "fast"), under a line naming the machine and the commit."""
    rows = [r for r in read_csv(RESULTS / MICRO / "micro.csv") if r["part"] == part]
    info = machine(MICRO)
    where = f"Timed by `python tools/micro.py` on a {cpu_words(info)}, torch {info['torch']}, commit {commit(info)}"
    if not rows:  # (bf16 on a CPU without native bf16 matmuls)
        return [f"{where}: not timed on this CPU."]
    if part == "malloc":
        how = f"a process for each of {rows[0]['blocks']} blocks, the median time of its {rows[0]['calls']} calls"
    else:
        how = f"a call's mean time in each of {rows[0]['blocks']} interleaved blocks"
    lines = [
        f"{where} ([micro.csv](results/{MICRO}/micro.csv)): {how}, their median, and the fastest to slowest block.",
        "",
        "| what is timed | variant | µs a call (range) | time / the fast file's | |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        fast = next(r for r in rows if r["case"] == row["case"] and "fast" in r["variant"])
        ratio = float(row["median_us"]) / float(fast["median_us"])
        us = [figure(float(row[k])) for k in ("median_us", "low_us", "high_us")]
        cells = [row["case"], row["variant"], f"{us[0]} ({us[1]}-{us[2]})", f"{ratio:.2f}x", row["extra"]]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def checkpoint_table():
    """tools/checkpoint_cost.py's figures: SAC's checkpoint with a full default replay buffer, in both SAC files."""
    rows = read_csv(RESULTS / MICRO / "checkpoint_cost.csv")
    info = machine(MICRO)
    lines = [
        f"Timed by `python tools/checkpoint_cost.py` on a {cpu_words(info)}, commit {commit(info)}"
        f" ([checkpoint_cost.csv](results/{MICRO}/checkpoint_cost.csv)): {int(rows[0]['buffer_rows']):,} transitions of"
        f" {rows[0]['env_id']}, three writes.",
        "",
        "| file | checkpoint | written in | read back in | peak memory over the writes |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        cells = [
            f"`{row['script']}`",
            f"{int(row['bytes']) / 1e6:.0f} MB",
            f"{float(row['write_s_min']):.2f}-{float(row['write_s_max']):.2f} s",
            f"{float(row['read_s']):.2f} s",
            f"+{int(row['peak_growth_bytes']) / 1e6:.1f} MB",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


LEARNING_PAGE = RESULTS / "learning.md"
# learning.md's runs: the learning table's, named without their budget (each row gives its steps), and PPO Atari's,
# stopped before CleanRL's budget
LEARNING_RUNS = [(name.rsplit(", ", 1)[0], *rest) for name, *rest in LEARNING] + [
    ("PPO Atari, Breakout-v5", "cpu-2core-learning", "ppo_atari", "compile", None, "ppo_atari_torchcompile.py --compile")
]


def reference_final(algorithm, env_id):
    """CleanRL's published final return and std, and its budget (doc/results/cleanrl_reference.csv)."""
    rows = [
        r
        for r in read_csv(RESULTS / "cleanrl_reference.csv")
        if (r["algorithm"], r["env_id"]) == (algorithm, env_id) and r["std"]
    ]
    final = max(rows, key=lambda r: int(r["step"]))
    return float(final["return"]), float(final["std"]), int(final["step"])


def learning_runs_table():
    """Every learning run, a line per seed, from the results files: the steps it reached, its training return (the mean
    of its last 20 episodes), CleanRL's final figure, and the run's speed, wall time and resumes."""
    folders = list(dict.fromkeys(f for _, folder, *_ in LEARNING_RUNS for f in folders_of(folder)))
    records = ", ".join(f"[{folder}]({folder}/machine.md) {commit(machine(folder))}" for folder in folders)
    lines = [
        f"The commits the folders' machine records name (which scripts each run used: [below](#how-these-runs-were-made)):"
        f" {records}.",
        "",
        "| run | file and flags | results | seed | steps | return | CleanRL (mean ± std, at its budget) |"
        " at least CleanRL's mean − std? | steps/s | wall time | resumes |",
        "| --- " * 11 + "|",
    ]
    for name, folder, algorithm, variant, exp, shown in LEARNING_RUNS:
        rows = [
            dict(r, folder=f)
            for f in folders_of(folder)
            for r in read_csv(RESULTS / f / "results.csv")
            if (r["algorithm"], r["variant"]) == (algorithm, variant)
        ]
        rows = [r for r in rows if (exp is None or r["exp_name"] == exp) and r["episodic_return"]]
        for r in rows:
            folder = r["folder"]
            mean, std, budget = reference_final(algorithm, r["env_id"])
            got = float(r["episodic_return"])
            said = "yes" if got >= mean - std else "no"
            if r["status"] != "finished":
                said = f"not known: {r['status']} at {int(r['global_step']):,} of {budget:,}"
            ref = cleanrl(algorithm, r["env_id"])  # as the learning table above it gives it
            hours = float(r["wall_time_s"]) / 3600
            wall = f"{hours:.1f} h" if hours >= 1 else f"{hours * 60:.0f} min"
            info = machine(folder)  # a run pinned to fewer cores than the machine has: its steps/s are those cores'
            speed = figure(float(r["sps"]))
            if (info.get("cpus_usable") or info["cpu_count"]) < info["cpu_count"]:
                threads = f", {info['OMP_NUM_THREADS']} thread" if info.get("OMP_NUM_THREADS") == "1" else ""
                speed += f" ({info['cpus_usable']} of {info['cpu_count']} cores{threads})"
            cells = [name, f"`{shown}`", f"[{folder}]({folder}/results.md)", r["seed"], f"{int(r['global_step']):,}",
                     f"{got:,.0f}" if got >= 1000 else f"{got:.1f}", f"{ref} at {budget:,}", said,
                     speed, wall, r.get("resumes") or "0"]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def lockstep_table():
    """tools/lockstep.py's table (a line per env and env count), from its lockstep.csv, under the machine and commit."""
    lockstep = load_tool(ROOT / "tools" / "lockstep.py")
    rows = lockstep.read(RESULTS / LOCKSTEP / "lockstep.csv")
    info = machine(LOCKSTEP)
    head = f"Run by `python tools/lockstep.py` on a {cpu_words(info)}, commit {commit(info)} ([lockstep.csv](lockstep.csv)):"
    return [head + " one run per cell, one after another.", ""] + lockstep.table_lines(rows)


def torchrun_table():
    """tools/torchrun.py's runs: each way's steps/s per seed, their median and the returns, under the machine and commit."""
    rows = read_csv(RESULTS / TORCHRUN / "torchrun.csv")
    info = machine(TORCHRUN)
    seeds = list(dict.fromkeys(r["seed"] for r in rows))
    steps = int(rows[0]["total_timesteps"])
    lines = [
        f"Run by `python tools/torchrun.py` on a {cpu_words(info)}, commit {commit(info)} ([torchrun.csv](torchrun.csv)).",
        "",
        "| | " + " | ".join(f"seed {s}" for s in seeds) + f" | median steps/s | returns after {steps:,} steps |",
        "| --- " * (len(seeds) + 3) + "|",
    ]
    medians = {}
    for mode in dict.fromkeys(r["mode"] for r in rows):
        mine = {r["seed"]: r for r in rows if r["mode"] == mode}
        cells = [figure(float(mine[s]["sps"])) if mine.get(s, {}).get("sps") else "failed" for s in seeds]
        speeds = [float(r["sps"]) for r in mine.values() if r["sps"]]
        medians[mode] = statistics.median(speeds) if speeds else None
        returns = ", ".join(f"{float(r['episodic_return']):.2f}" for r in mine.values() if r["episodic_return"])
        lines.append(f"| {mode} | " + " | ".join(cells) + f" | {figure(medians[mode]) if speeds else '-'} | {returns} |")
    first, second = medians.values()
    if first and second:
        lines += ["", f"The first way's median is {first / second:.2f}x the second's."]
    return lines


def suite_line():
    """tools/suite.py's timings of the two tiers: counts, wall time, commit, machine."""
    rows = read_csv(RESULTS / SUITE / "suite.csv")
    info = machine(SUITE)
    lines = [
        "| tier | command | passed | failed | skipped | wall time | commit |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        failed = int(r["failed"]) + int(r["errors"])
        cells = [
            r["tier"],
            f"`{r['command']}`",
            r["passed"],
            str(failed),
            r["skipped"],
            f"{int(r['wall_s']):,} s",
            r["git_commit"][:7],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    where = f"Timed by `python tools/suite.py` on a {cpu_words(info)} ([suite.csv](results/{SUITE}/suite.csv)):"
    return [where, ""] + lines


def roofline_compile_table(folder="cpu-2core"):
    """The roofline benchmark's `--compile` against the fast file without flags: each one's median steps/s, their ratio."""
    rows = runs(folder)
    lines = [
        f"From [results.csv](results.csv) (commit {commit(machine(folder))}), median steps/s over the seeds:",
        "",
        "| algorithm | fast | `--compile` | `--compile` / fast |",
        "| --- | --- | --- | --- |",
    ]
    for algorithm, name in ALGORITHMS.items():
        fast, compiled = sps(rows, algorithm, "fast"), sps(rows, algorithm, "compile")
        if fast and compiled:
            ratio = statistics.median(compiled) / statistics.median(fast)
            cells = [name, figure(statistics.median(fast)), figure(statistics.median(compiled)), f"{ratio:.2f}x"]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def fresh_install_table():
    """A fresh clone's CPU install on each Python: the README's CPU command (tools/micro.py's quickstart part) and the
    quick tier (tools/suite.py), with the Python, torch and commit each machine record names."""
    lines = [
        '| Python | torch | commit | the README\'s CPU command | `python -m pytest -m "not slow"` | machine |',
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for folder in FRESH_INSTALLS:
        info = machine(folder)
        start = read_csv(RESULTS / folder / "quickstart.csv")[0]
        (tier,) = [r for r in read_csv(RESULTS / folder / "suite.csv") if r["tier"] == "quick"]
        failed = int(tier["failed"]) + int(tier["errors"])
        link = f"results/{folder}"
        cells = [
            info["python"],
            info["torch"],
            commit(info),
            f"return {float(start['episodic_return']):.0f} at {int(start['global_step']):,} steps in"
            f" {float(start['wall_s']):.0f} s ([quickstart.csv]({link}/quickstart.csv))",
            f"{tier['passed']} passed, {failed} failed, {tier['skipped']} skipped in {int(tier['wall_s']):,} s"
            f" ([suite.csv]({link}/suite.csv))",
            f"a {cpu_words(info)} ([notes]({link}/notes.md))",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def quickstart_line():
    """The README's CPU command as tools/micro.py timed it: from start to exit, its steps/s and return."""
    row = read_csv(RESULTS / MICRO / "quickstart.csv")[0]
    info = machine(MICRO)
    return [
        f"A {cpu_words(info)}, commit {commit(info)}: {float(row['wall_s']):.0f} s from start to exit,"
        f" {figure(float(row['sps']))} steps/s after the burn-in, return {float(row['episodic_return']):.0f} at"
        f" {int(row['global_step']):,} steps ([quickstart.csv](doc/results/{MICRO}/quickstart.csv))."
    ]


TUNE = "cpu-2core-tune"  # the published small study of doc/tuning.md
TUNING = ROOT / "doc" / "tuning.md"
SPEED = ROOT / "doc" / "speed.md"


def tune_table():
    """tools/tune.py's published small study: its trials best first (a line per trial), the best command line, under
    the machine and commit, from its trials.csv, best.txt and machine.json."""
    rows = read_csv(RESULTS / TUNE / "trials.csv")
    info = machine(TUNE)
    params = [c for c in rows[0] if c not in ("number", "state", "value", "retries", "duration_s", "worker", "error")]
    done = sorted((r for r in rows if r["state"] == "COMPLETE"), key=lambda r: -float(r["value"]))
    others = [r for r in rows if r["state"] != "COMPLETE"]
    states = ", ".join(
        f"{sum(r['state'] == s for r in rows)} {s.lower()}"
        for s in ("COMPLETE", "PRUNED", "FAIL")
        if any(r["state"] == s for r in rows)
    )
    best = (RESULTS / TUNE / "best.txt").read_text().splitlines()[1]
    lines = [
        f"A {cpu_words(info)}, commit {commit(info)}: {len(rows)} trials ({states}), best first"
        f" ([trials.csv](results/{TUNE}/trials.csv)). The best trial's command ([best.txt](results/{TUNE}/best.txt)):",
        "",
        f"```bash\n{best}\n```",
        "",
        "| trial | state | score | " + " | ".join(f"`--{p.replace('_', '-')}`" for p in params) + " | seconds |",
        "| --- | --- | --- | " + " | ".join("---" for _ in params) + " | --- |",
    ]
    for r in done + others:
        score = f"{float(r['value']):.1f}" if r["value"] else "-"
        cells = [f"{float(r[p]):.3g}" if r[p] and "." in r[p] else r[p] for p in params]
        lines.append(
            f"| {r['number']} | {r['state'].lower()} | {score} | " + " | ".join(cells) + f" | {float(r['duration_s']):.0f} |"
        )
    return lines


# The README's first table: each algorithm's speed beside LeanRL's own files (best against best, and flag for flag) and
# its return at CleanRL's budget. (the speed's results folder; the learning table's row of the fast file)
PROVEN = {
    "ppo_atari": ("cpu-2core-xeon", "PPO Atari, Breakout-v5, 10M"),
    "ppo_continuous_action": ("cpu-2core-xeon", "PPO continuous, HalfCheetah-v4, 1M"),
    "sac_continuous_action": ("cpu-2core-xeon", "SAC, HalfCheetah-v4, 1M"),
    "td3_continuous_action": ("cpu-2core-xeon", "TD3, HalfCheetah-v4, 1M"),
    "dqn": ("cpu-2core-dqn-leanrl", "DQN, CartPole-v1, 500k"),
}
OURS_FAST = ["fast", "compile"]  # our fast file's variants that both machines ran (without flags, --compile)
PEERS = ["leanrl", "leanrl_fast", "leanrl_compile"]


def best(rows, algorithm, variants):
    """The variant with the highest median steps/s among these, and that median."""
    medians = {v: statistics.median(sps(rows, algorithm, v)) for v in variants if sps(rows, algorithm, v)}
    top = max(medians, key=medians.get)
    return top, medians[top]


def proven_table():
    """The README's first screen: speed beside LeanRL's own files on a 2-core CPU (ours at our best beside LeanRL's at
    its best, and both fast files with --compile), and the fast file's training return at CleanRL's budget beside
    CleanRL's, from the results files; the machines and commits above."""
    named = {"fast": "fast", "compile": "fast `--compile`", "leanrl": "baseline", "leanrl_fast": "fast"}
    named["leanrl_compile"] = "fast `--compile`"
    folders = sorted({folder for folder, _ in PROVEN.values()}, reverse=True)
    where = "; ".join(f"[{cpu_words(machine(f))}](doc/results/{f}/notes.md), commit {commit(machine(f))}" for f in folders)
    eager = "our SAC and TD3 fast files run eager under `--compile` on a CPU, where compiling does not pay"
    lines = [f"Steps/s, the median of 2 seeds, ours and LeanRL's files run unchanged in one benchmark: {where}; {eager}.", ""]
    header = "| algorithm | steps/s: ours at best / LeanRL's at best | both `--compile` "
    lines.append(header + "| return at CleanRL's budget: the fast file / CleanRL's |")
    lines.append("| --- | --- | --- | --- |")
    learned = [(row.split(" | ")[0].lstrip("| "), row.split(" | ")) for row in learning_table()[2:]]
    for algorithm, (folder, learning_row) in PROVEN.items():
        rows = runs(folder)
        (ours, a), (theirs, b) = best(rows, algorithm, OURS_FAST), best(rows, algorithm, PEERS)
        c, d = (statistics.median(sps(rows, algorithm, v)) for v in ("compile", "leanrl_compile"))
        speed = f"{figure(a)} ({named[ours]}) / {figure(b)} ({named[theirs]}): {a / b:.2f}x"
        compiled = f"{figure(c)} / {figure(d)}: {c / d:.2f}x"
        # the fast file's run with the flags of our fastest variant, else its run with other flags (named)
        fast = [cells for name, cells in learned if name == learning_row and "torchcompile" in cells[1]]
        flagged = {"fast": lambda c: c[1].endswith(".py`"), "compile": lambda c: c[1].endswith(" --compile`")}[ours]
        fast = [cells for cells in fast if flagged(cells)] or fast
        if fast:
            cells = fast[0]
            seeds = len(cells[2].split(","))
            flags = cells[1].strip("`").split(" ", 1)[1:]
            said = f"`{flags[0]}`, " if flags else "no flags, "
            ret = f"{cells[3]} ({said}{seeds} seed{'s' if seeds > 1 else ''}) / {cells[4].rstrip(' |')} (3)"
        else:
            ret = "not run to its end yet ([learning.md](doc/results/learning.md))"
        lines.append(f"| {ALGORITHMS[algorithm].split(' (')[0]} | {speed} | {compiled} | {ret} |")
    return lines


def best_table():
    """Best against best: on each machine where LeanRL's files ran beside ours, each side at its fastest variant."""
    named = {"baseline": "baseline", "fast": "fast", "compile": "fast `--compile`", "leanrl": "baseline"}
    named.update(leanrl_fast="fast", leanrl_compile="fast `--compile`")
    lines = [
        "| algorithm | machine, commit | ours at best | LeanRL's at best | ours / LeanRL's |",
        "| --- | --- | --- | --- | --- |",
    ]
    for folder in [
        "cpu-2core-xeon",
        "cpu-2core-dqn-leanrl",
        "cpu-2core-ppo-atari-leanrl",
        "cpu-2core-ppo-atari-leanrl-same-malloc",
    ]:
        rows, info = runs(folder), machine(folder)
        for algorithm in ALGORITHMS:
            if not sps(rows, algorithm, "leanrl_compile"):
                continue
            ours = best(rows, algorithm, [v for v in ("baseline", "fast", "compile") if sps(rows, algorithm, v)])
            theirs = best(rows, algorithm, [v for v in PEERS if sps(rows, algorithm, v)])
            where = f"[{cpu_words(info)}](doc/results/{folder}/notes.md), {commit(info)}"
            cells = [f"{figure(x)} ({named[v]})" for v, x in (ours, theirs)]
            lines.append(f"| {ALGORITHMS[algorithm]} | {where} | {cells[0]} | {cells[1]} | {ours[1] / theirs[1]:.2f}x |")
    return lines


COMPILE_TIME = "cpu-2core-compile-time"


def compile_time_table(folder=COMPILE_TIME):
    """The seconds from a run's launch to the end of its first update: our fast file without flags, and ours and
    LeanRL's fast files with --compile, each over the runs that found inductor's cache cold / warm (run.sh's first run
    of each file and flags compiles into an empty cache, the later seeds read it)."""
    rows, info = read_csv(RESULTS / folder / "results.csv"), machine(folder)
    rows = [r for r in rows if r["status"] == "finished" and r["first_update_s"]]

    def median(algorithm, variant, cache):
        times = [
            float(r["first_update_s"])
            for r in rows
            if (r["algorithm"], r["variant"], r["compile_cache"]) == (algorithm, variant, cache)
        ]
        return f"{statistics.median(times):.1f} ({len(times)})" if times else "–"

    lines = [
        f"[{cpu_words(info)}](results/{folder}/notes.md), commit {commit(info)}: seconds, median (runs):",
        "",
        "| algorithm | ours, fast (no flags) | ours, fast `--compile`: cold / warm cache "
        "| LeanRL's fast `--compile`: cold / warm cache |",
        "| --- | --- | --- | --- |",
    ]
    for algorithm, name in ALGORITHMS.items():
        if not any(r["algorithm"] == algorithm for r in rows):
            continue
        ours = " / ".join(median(algorithm, "compile", c) for c in ("cold", "warm"))
        if ours == "– / –":  # SAC, TD3: --compile runs the file eager on a CPU
            ours = f"{median(algorithm, 'compile', '')}, eager on a CPU"
        theirs = " / ".join(median(algorithm, "leanrl_compile", c) for c in ("cold", "warm"))
        lines.append(f"| {name} | {median(algorithm, 'fast', '')} | {ours} | {theirs} |")
    return lines


def on_doc_page(table):
    """A README table written into a page of doc/: its links to doc/results/ made relative to doc/."""
    return lambda: [line.replace("(doc/results/", "(results/") for line in table()]


def sizes_line():
    """The README's line on the files' sizes, from doc/sizes.md's table (tools/sizes.py): the stripped files beside
    their anchors' whole files, and the whole files, appendix included."""
    table = (ROOT / "doc" / "sizes.md").read_text().split("<!-- sizes -->")[1].split("<!-- /sizes -->")[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.strip().splitlines()[2:]]
    base, fast, whole, ratio = [], [], [], []
    for name, lines, _, stripped, cleanrl, leanrl in rows:
        anchor = cleanrl if "torchcompile" not in name else leanrl
        if stripped == "-" or anchor == "-":
            continue
        theirs = int(anchor.split(" / ")[0])
        (fast if "torchcompile" in name else base).append((int(stripped), int(stripped) / theirs))
        whole.append(int(lines))
        ratio.append(int(lines) / theirs)
    span = lambda xs, f="{:.2f}": f"{f.format(min(xs))}-{f.format(max(xs))}"  # noqa: E731
    return [
        f"Stripped, a baseline has {span([b[0] for b in base], '{}')} lines, {span([b[1] for b in base])}x its CleanRL"
        f" file whole; a fast file {span([f[0] for f in fast], '{}')}, {span([f[1] for f in fast])}x its LeanRL file"
        f" whole. The whole files, with what runs the run, have {span(whole, '{:,}')} lines, {span(ratio)}x their"
        f" anchors' ([sizes.md](doc/sizes.md))."
    ]


PAGES = {
    README: {"proven": proven_table, "quickstart": quickstart_line, "sizes": sizes_line},
    SPEED: {
        name: on_doc_page(table)
        for name, table in [
            ("gpu", gpu_table),
            ("cpu", cpu_table),
            ("beside-leanrl", beside_leanrl_table),
            ("best", best_table),
            ("compile-time", compile_time_table),
        ]
    },
    USAGE: {"checkpoint-cost": checkpoint_table, "fresh-install": fresh_install_table},
    TESTING: {"suite": suite_line},
    TUNING: {"tune": tune_table},
    LEARNING_PAGE: {
        "learning": learning_table,
        "learning-like-cleanrl": learning_like_cleanrl_table,
        "learning-runs": learning_runs_table,
        "env-versions": env_versions_table,
    },
    RESULTS / LOCKSTEP / "lockstep.md": {"lockstep": lockstep_table},
    RESULTS / TORCHRUN / "torchrun.md": {"torchrun": torchrun_table},
    RESULTS / "cpu-2core" / "roofline.md": {"roofline-compile": roofline_compile_table},
    TRICKS: {
        f"micro-{part}": lambda part=part: micro_table(part) for part in ["gae", "adam", "layout", "malloc", "compile", "bf16"]
    },
}


def written(text, page=README):
    """The text with each of the page's tables between its markers as the results files give them."""
    for name, make in PAGES[page].items():
        start, end = f"<!-- table: {name} -->\n", "<!-- /table -->"
        if start not in text:
            raise SystemExit(f"tables.py: error: {page.relative_to(ROOT)} has no line '{start.strip()}'")
        head, rest = text.split(start, 1)
        text = head + start + "\n".join(make()) + "\n" + end + rest.split(end, 1)[1]
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 where a table differs")
    args = parser.parse_args()
    differ = []
    for page in PAGES:
        text = page.read_text()
        new = written(text, page)
        name = page.relative_to(ROOT)
        if new != text:
            differ.append(str(name))
            if not args.check:
                page.write_text(new)
                print(f"tables.py: {name} written")
    if args.check:
        print(
            f"tables.py: a table differs in {', '.join(differ)}"
            if differ
            else "tables.py: the pages' tables are the results files'"
        )
        sys.exit(1 if differ else 0)
    if not differ:
        print("tables.py: the pages already hold them")


if __name__ == "__main__":
    main()
