"""The benchmark driver's Python, run by run.sh beside it: the records it keeps next to the runs (bench.json, how
run.sh was called; machine.json and machine.md, the machine) and the results it makes from every run's summary.json
(results.csv, results.md, the PNG plots, and curves.csv: each run's curve, thinned).

The results group the runs by algorithm, env id, exp name (--exp-name; the scripts' default, their file name, counts as
one name for both files of a pair) and variant, so that it also compares a user's own runs: `./run.sh --aggregate runs`.

    python aggregate.py DIR [--algorithms A,B] [--variants V,W]    results.csv, curves.csv, results.md, plots in DIR
    python aggregate.py --record-bench DIR --command ... [-- FLAGS]  bench.json
    python aggregate.py --record-machine DIR [--jobs N] ...         machine.json, machine.md

run.sh defines the algorithms and the variants and passes them here (--algorithms, --variants) to order the tables and
colour the plots. It also defines the columns of runs.tsv, its record of every attempted run: read_runs() reads the rows
by the names in that file's header.
"""

import argparse
import csv
import datetime
import functools
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
from importlib import metadata

ROOT = pathlib.Path(__file__).resolve().parents[1]
# pandas and matplotlib: only the tables and plots need them, and aggregate() imports them. The records that run.sh
# makes before and between its runs (bench.json, machine.json, each run's row) need the standard library alone, so
# that they run where neither is installed (the GPU machine's image): the tables are then made elsewhere.
pd = None
plt = None
TABLES_NEED = "the tables and plots need pandas and matplotlib (pip install -r requirements/requirements-dev.txt)"

# results.csv: one row per run, with these columns
COLUMNS = [
    "algorithm",
    "variant",
    "seed",
    "status",
    "env_id",
    "exp_name",
    "sps",
    "episodic_return",
    "return_last100",
    "episodes",
    "global_step",
    "total_timesteps",
    "wall_time_s",
    "warmup_s",
    "first_update_s",
    "compile_cache",
    "resumes",
    "compile",
    "compile_mode",
    "cudagraphs",
    "device",
    "gpu_name",
    "cpu_count",
    "torch_version",
    "script",
    "exit_code",
    "error",
    "run_dir",
    "log",
    "command",
]
# the columns written as "" where a run has no value (the others as nothing at all)
TEXT_COLUMNS = ["exit_code", "error", "run_dir", "log", "command"]
# results.md's table: one row per algorithm, env id, exp name and variant; the exp name's column only where a run has
# one of its own (not the script's name)
TABLE_COLUMNS = [
    "algorithm",
    "variant",
    "env",
    "exp name",
    "steps",
    "runs",
    "steps/s median",
    "steps/s range",
    "speed-up",
    "warm-up s",
    "first update s",
    "episodic return",
]
# the flags that name a run's variant and its group, and what a script without the flag runs with
FLAG_DEFAULTS = {
    "env_id": None,
    "exp_name": None,
    "seed": None,
    "compile": False,
    "compile_mode": None,
    "cudagraphs": False,
    "total_timesteps": None,
}


# ---------------------------------------------------------------------------------------------------------------------
# The runs: runs.tsv's rows and the summary.json files


def read_runs(folder):
    """runs.tsv's rows as dicts (by the names in its header, run.sh's RUNS_COLUMNS); [] where there is no runs.tsv."""
    path = folder / "runs.tsv"
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    # (a row of a newer run.sh in an older benchmark's runs.tsv has more fields than its header: those go)
    return [dict({k: v for k, v in row.items() if k is not None}, seed=int(row["seed"])) for row in rows]


def log_tail(folder, log, n=20):
    """The last n lines of a run's log as a terminal shows them: a progress bar redraws its line after each \\r."""
    if not log or not (folder / log).is_file():
        return []
    lines = (folder / log).read_text(errors="replace").splitlines()
    return [line.split("\r")[-1].rstrip() for line in lines][-n:]


# the variant files of their own, scripts/<algorithm>_<idea>_torchcompile.py: Ray env runners, torchrun's ranks
VARIANT_FILES = ["ray", "multigpu"]


def variant_name(flags):
    """A fast script's variant as --variants names it: compile, the compile mode, cudagraphs, or else fast."""
    mode = (flags["compile_mode"] or "default").replace("-", "_")
    parts = []
    if flags["compile"]:
        parts.append("compile")
    if mode != "default":
        parts.append(mode)
    if flags["cudagraphs"]:
        parts.append("cudagraphs")
    return "_".join(parts) or "fast"


def read_summary(folder, path, row):
    """A run's record: its summary.json, then what its runs.tsv row (or {}) says, which wins."""
    row["run_dir"] = os.path.relpath(path.parent, folder)
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return {"algorithm": "?", "variant": "?", **row, "status": "failed", "error": f"unreadable summary.json: {e}"}
    # every flag is in args; older summaries also had env_id, seed, compile and cudagraphs at the top level
    args = summary.get("args") or {}
    flags = {}
    for key, default in FLAG_DEFAULTS.items():
        flags[key] = args.get(key, summary.get(key, default))
    algorithm = summary.get("script", "?").removesuffix("_torchcompile")
    if summary.get("script") == algorithm:
        variant = "baseline"
    else:
        variant = variant_name(flags)
    for idea in VARIANT_FILES:  # a variant file of its own: a variant of its algorithm, compared with the same baseline
        if algorithm.endswith(f"_{idea}"):
            algorithm = algorithm.removesuffix(f"_{idea}")
            variant = idea if variant == "fast" else f"{idea}_{variant}"
    peer = summary.get("peer")
    if peer:  # a peer's own file, run by tools/leanrl.py: its variants beside ours (leanrl, leanrl_fast, leanrl_compile...)
        variant = peer if variant == "baseline" else f"{peer}_{variant}"
    record = {key: summary[key] for key in COLUMNS if key in summary}
    record.update(flags)
    record.update(algorithm=algorithm, variant=variant, status=summary.get("status") or "unknown")
    record.update(row)
    if summary.get("status") == "diverged":  # (run.sh records its exit status 1 as failed: the summary says why)
        record["status"] = "diverged"
    # the seconds from the run's launch (run.sh's runs.tsv) to the end of its first update, compiling included, and
    # whether torch.compile found inductor's cache cold (a graph compiled anew) or warm (every graph from the cache)
    if summary.get("first_update_at") and row.get("launched"):
        record["first_update_s"] = round(summary["first_update_at"] - float(row["launched"]), 2)
    cache = summary.get("compile_cache") or {}
    record["compile_cache"] = ("cold" if cache.get("misses") else "warm") if cache.get("misses") or cache.get("hits") else None
    if row.get("status") in ("terminated", "interrupted") and summary.get("status") == "finished":
        # stopped under run.sh, then taken to its end by the script's own --resume: its summary is the later record
        record.update(status="finished", exit_code="0")
    return record


# why a run with the status "terminated" stopped (its script writes that status when SIGTERM reaches it, and exits 143)
TERMINATED = "terminated by SIGTERM (a time limit such as Slurm's --time, kill, timeout) before its end"


def collect_runs(folder):
    """One record per run: runs.tsv's rows (it knows the runs that left no summary.json), then any other summary.json
    under the folder; each run that did not finish with the reason why."""
    records = []
    seen = set()
    for row in read_runs(folder):
        summary = folder / row["summary"]
        if row["summary"] and summary.is_file():
            seen.add(summary.resolve())
            records.append(read_summary(folder, summary, row))
        else:
            records.append(row)
    for path in sorted(folder.rglob("summary.json")):
        if "superseded" in path.relative_to(folder).parts:  # an attempt run.sh --resume ran again anew
            continue
        if path.resolve() not in seen:
            seen.add(path.resolve())
            records.append(read_summary(folder, path, {}))
    for record in records:
        if record["status"] == "finished" or "error" in record:
            continue
        if record["status"] == "missing":
            record["error"] = "script not found: " + record["command"]
        elif record["status"] == "terminated":
            record["error"] = TERMINATED
        else:  # the last line its log shows
            lines = [line for line in log_tail(folder, record.get("log")) if line.strip()] or [""]
            record["error"] = lines[-1][:300]
    return records


def exp_group(run):
    """A run's exp name for grouping: its --exp-name, or "" where that is the default (the script's own name)."""
    if pd.isna(run.exp_name) or run.exp_name in ("", run.script):
        return ""
    return run.exp_name


def add_groups(runs):
    """The columns env_group and exp_group: each run's env id and exp name group ("" where unknown, or the default exp
    name). A run that left no summary.json (runs.tsv alone knows it) takes those of its algorithm's other runs where
    they all have the same one, as in run.sh's own folders."""
    runs = runs.copy()
    runs["env_group"] = runs.env_id.fillna("")
    runs["exp_group"] = [exp_group(run) for run in runs.itertuples()]
    known = runs[runs.run_dir != ""]
    for algorithm, rows in known.groupby("algorithm"):
        unknown = (runs.algorithm == algorithm) & (runs.run_dir == "")
        for column in ["env_group", "exp_group"]:
            values = set(rows[column])
            if len(values) == 1:
                runs.loc[unknown, column] = values.pop()
    return runs


def sort_runs(runs, algorithms, variants):
    """Rows in run.sh's order of algorithms, then by env id (unknown last), exp name (the default first), then in
    run.sh's order of variants (other names after them, by name), then by seed."""
    names = list(algorithms) + list(variants) + sorted(set(runs.algorithm) | set(runs.variant))
    rank = {name: i for i, name in enumerate(dict.fromkeys(names))}
    envs = sorted(set(runs.env_group) - {""}) + [""]
    env_rank = {env: i for i, env in enumerate(envs)}

    def sort_key(column):
        if column.name == "seed":
            return pd.to_numeric(column, errors="coerce").fillna(0)
        if column.name == "env_group":
            return column.map(env_rank)
        if column.name == "exp_group":
            return column
        return column.map(rank)

    return runs.sort_values(["algorithm", "env_group", "exp_group", "variant", "seed"], key=sort_key)


# ---------------------------------------------------------------------------------------------------------------------
# Per algorithm, env id, exp name and variant: steps/s, warm-up and return over the runs that finished


def count_finished(statuses):
    return statuses.eq("finished").sum()


def seed_values(values):
    return values.dropna().tolist()


def names(values):
    """The names a row's runs give (env ids, exp names), from their own summaries."""
    return ", ".join(sorted(set(values.dropna()) - {""}))


def step_budgets(steps):
    return "/".join(f"{t:,}" for t in sorted(set(steps.dropna())))


def variant_stats(runs):
    """One row per algorithm, env id, exp name and variant (runs with the columns of add_groups), in the runs' order:
    counts, steps/s (median, range, every seed's), warm-up, return (mean, std), the env id, exp names and budgets, and
    the speed-up over the baseline of the same algorithm, env id and exp name (a ratio of medians)."""
    keys = ["algorithm", "env_group", "exp_group", "variant"]
    done = runs[runs.status == "finished"].astype({"sps": float, "episodic_return": float, "warmup_s": float})
    done = done.assign(first_update_s=done.first_update_s.astype(float))
    first = {state: done.first_update_s.where(done.compile_cache.fillna("") == state) for state in ("cold", "warm", "")}
    done = done.assign(first_cold=first["cold"], first_warm=first["warm"], first_eager=first[""])
    measured = done[
        ["sps", "warmup_s", "first_cold", "first_warm", "first_eager", "episodic_return", "env_id", "total_timesteps"]
    ]
    groups = runs[keys + ["status", "exp_name"]].join(measured).groupby(keys, sort=False)
    stats = groups.agg(
        runs=("status", "size"),
        finished=("status", count_finished),
        seeds=("sps", seed_values),
        median=("sps", "median"),
        low=("sps", "min"),
        high=("sps", "max"),
        warmup=("warmup_s", "median"),
        first_cold=("first_cold", "median"),
        first_warm=("first_warm", "median"),
        first_eager=("first_eager", "median"),
        rets=("episodic_return", "count"),
        ret_mean=("episodic_return", "mean"),
        ret_std=("episodic_return", "std"),
        env=("env_id", names),
        exp=("exp_name", names),
        steps=("total_timesteps", step_budgets),
    ).reset_index()
    same = ["algorithm", "env_group", "exp_group"]
    baselines = stats.loc[stats.variant == "baseline", same + ["median"]].rename(columns={"median": "baseline"})
    stats = stats.merge(baselines, on=same, how="left")
    stats["speedup"] = stats["median"] / stats["baseline"]
    return stats


def device_name(runs, machine):
    """The machine in a few words: what machine.json says, else what the runs say."""
    if machine:
        return machine.get("gpu") or f"CPU only, {machine.get('cpu_model', '?')}, {machine.get('cpu_count', '?')} cores"
    cpus = "/".join(sorted({str(c) for c in runs.cpu_count.dropna() if c})) or "?"
    return ", ".join(sorted({g for g in runs.gpu_name.dropna() if g})) or f"CPU, {cpus} cores"


# ---------------------------------------------------------------------------------------------------------------------
# The plots, two per algorithm, each with a panel per env id and exp name (one panel for run.sh's own runs)


def group_label(env, exp):
    """A panel's title: the env id and the exp name of its runs (the group's keys: "" where unknown, or the default)."""
    label = env or "env unknown"
    if exp:
        label += f", --exp-name {exp}"
    return label


def speed_panel(ax, rows, colors):
    """Steps/s per variant: a bar for the median, whiskers for the range, a dot per seed."""
    below = (rows["median"] - rows.low).to_numpy()
    above = (rows.high - rows["median"]).to_numpy()
    bar_colors = [colors.get(variant, "grey") for variant in rows.variant]
    ax.bar(range(len(rows)), rows["median"], yerr=[below, above], capsize=4, color=bar_colors, alpha=0.8)
    for i, st in enumerate(rows.itertuples()):
        ax.scatter([i] * len(st.seeds), st.seeds, color="black", s=10, zorder=3)
        if pd.isna(st.median):
            ax.text(i, 0, "no finished run", ha="center", va="bottom", rotation=90, fontsize=8)
        elif pd.notna(st.speedup):
            ax.annotate(f"{st.speedup:.2f}x", (i, st.high), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=9)
    ax.set_xticks(range(len(rows)), rows.variant, rotation=15)
    ax.set(ylabel="steps/s (median, range over seeds)", ylim=(0, None))


def plot_speeds(folder, algorithm, rows, device, colors):
    """sps_<algorithm>.png: steps/s per variant (rows: the algorithm's rows of variant_stats), a panel per group."""
    panels = list(rows.groupby(["env_group", "exp_group"], sort=False))
    widths = [1.6 + 1.4 * len(panel) for _, panel in panels]
    fig, axes = plt.subplots(1, len(panels), figsize=(sum(widths), 4), layout="tight", width_ratios=widths, squeeze=False)
    for ax, (group, panel) in zip(axes[0], panels):
        speed_panel(ax, panel, colors)
        title = algorithm
        if len(panels) > 1:
            title += ": " + group_label(*group)
        ax.set_title(f"{title}\n{device}", fontsize=9)
    fig.savefig(folder / f"sps_{algorithm}.png", dpi=100)
    plt.close(fig)


def read_reference(path):
    """A reference file's rows (doc/results/cleanrl_reference.csv: algorithm, env_id, step, return, std, seeds, source,
    how_read), step and return as numbers, std as a number or None; [] without a file."""
    if not path:
        return []
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row.update(step=int(row["step"]), ret=float(row["return"]), std=float(row["std"]) if row["std"] else None)
    return rows


def reference_for(reference, algorithm, env_id):
    """The reference's rows for this algorithm and env id, in order of step."""
    return sorted((r for r in reference if r["algorithm"] == algorithm and r["env_id"] == env_id), key=lambda r: r["step"])


def reference_panel(axis, points):
    """The reference on a panel of return against steps: the points read off its plots, its final mean ± std."""
    read = [r for r in points if r["std"] is None]
    final = [r for r in points if r["std"] is not None]
    if read:
        axis.plot([r["step"] for r in read], [r["ret"] for r in read], "kx", ms=7, label="CleanRL, read off its plot")
    for r in final:
        axis.errorbar(r["step"], r["ret"], yerr=r["std"], fmt="ko", capsize=4, label=f"CleanRL, {r['seeds']} seeds")
    if points:
        axis.legend(fontsize=8)


def return_at(folder, run, step):
    """A run's episodic return (its last 20 episodes) at a step: its metrics.csv row at that step or the last before it;
    None where it did not get that far."""
    try:
        with open(folder / run.run_dir / "metrics.csv", newline="") as f:
            rows = [r for r in csv.DictReader(f) if r.get("episodic_return")]
    except OSError:
        return None
    reached = [float(r["episodic_return"]) for r in rows if int(r["global_step"]) <= step]
    last = max((int(r["global_step"]) for r in rows), default=0)
    # A finished run got to its budget, though its last row may fall short of it by less than a batch (PPO's 1M: 999,424)
    finished = run.status == "finished" and (run.total_timesteps or 0) >= step
    return reached[-1] if reached and (last >= step or finished) else None


LAST_EPISODES = 100  # CleanRL's published returns: the mean of each run's last 100 episodes (openrlbenchmark's window)


def return_last_episodes(run_dir, n=LAST_EPISODES):
    """The mean return of a run's last n episodes (n a multiple of 20), where its metrics.csv holds it exactly; None
    elsewhere. A row's episodic_return is the mean of the last 20 episodes that ended by its step: where one env steps,
    resets on the step an episode ends (SAC, TD3, DQN; PPO's files reset on the next one) and each of the last n
    episodes lasted the env's whole time limit L (HalfCheetah never ends an episode sooner), the rows at every 20 L
    steps back from the last tile them."""
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
        with open(run_dir / "metrics.csv", newline="") as f:
            rows = {int(r["global_step"]): r for r in csv.DictReader(f) if r.get("episodic_return")}
    except (OSError, ValueError, KeyError):
        return None
    args = summary.get("args") or {}
    limit = time_limit(args.get("env_id"))
    if summary.get("algo") == "ppo" or args.get("num_envs", 1) != 1 or limit is None or not rows:
        return None
    last = max(rows)
    if last < n * limit:  # (an episode ends within every L steps: by step n L, n of them have)
        return None
    tiles = [rows.get(last - k * 20 * limit) for k in range(n // 20)]
    if any(row is None or float(row["episodic_length"] or 0) != limit for row in tiles):
        return None  # (an episode cut short: more than n in the span, or a row missing)
    return sum(float(row["episodic_return"]) for row in tiles) / len(tiles)


@functools.cache
def time_limit(env_id):
    """A gymnasium env's time limit (max_episode_steps); None where it has none, is not gymnasium's (envpool's), or
    gymnasium is not installed where the tables are made."""
    try:
        import gymnasium as gym

        return gym.spec(env_id).max_episode_steps
    except Exception:
        return None


def number(x):
    """A return as the tables give it: whole numbers from 100 up, a decimal below."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.1f}"


def reference_cells(folder, runs, stats, reference):
    """results.md's cell per row: the runs' return at the reference's last step for that algorithm and env id (mean ±
    std over the runs that got there), against the reference's figure there."""
    cells = {}
    for st in stats.itertuples():
        points = reference_for(reference, st.algorithm, st.env_group)
        if not points:
            continue
        ref = points[-1]
        keys = ["algorithm", "env_group", "exp_group", "variant"]
        group = runs[(runs[keys] == [st.algorithm, st.env_group, st.exp_group, st.variant]).all(axis=1)]
        got = [return_at(folder, run, ref["step"]) for run in group.itertuples()]
        got = [value for value in got if value is not None]
        mine = "–"
        if len(got) == 1:
            mine = f"{number(got[0])} (1 run)"
        elif got:
            mine = f"{number(pd.Series(got).mean())} ± {number(pd.Series(got).std())} ({len(got)} runs)"
        theirs = number(ref["ret"])
        if ref["std"] is not None:
            theirs += f" ± {number(ref['std'])}"
        cells[(st.algorithm, st.env_group, st.exp_group, st.variant)] = f"{mine} vs {theirs} at {ref['step']:,}"
    return cells


def read_curve(folder, run):
    """A run's episodic return against steps and wall time: the rows of its metrics.csv that have one (none where the
    run has no metrics.csv, or an empty or broken one)."""
    columns = ["global_step", "wall_time_s", "episodic_return"]
    try:
        metrics = pd.read_csv(folder / run.run_dir / "metrics.csv").reindex(columns=columns)
    except (OSError, ValueError):
        return pd.DataFrame(columns=columns)
    return metrics.apply(pd.to_numeric, errors="coerce").dropna(subset=["global_step", "episodic_return"])


CURVE_POINTS = 250  # curves.csv's most rows per run: a curve's shape in a file small enough to publish


def write_curves(folder, runs):
    """curves.csv: each run's curve (read_curve) under its algorithm, variant, exp name, env id and seed, thinned evenly
    to at most CURVE_POINTS rows, its first and last kept. What a page that draws the seeds of several results folders
    together needs (run.sh --publish copies it; the runs' folders are not published)."""
    keys = ["algorithm", "variant", "exp_name", "env_id", "seed"]
    parts = []
    for run in runs[runs.run_dir != ""].itertuples():
        metrics = read_curve(folder, run)
        n = len(metrics)
        if n == 0:
            continue
        k = min(n, CURVE_POINTS)
        keep = sorted({round(i * (n - 1) / max(k - 1, 1)) for i in range(k)})
        metrics = metrics.iloc[keep].astype({"global_step": int})
        metrics = metrics.round({"wall_time_s": 1, "episodic_return": 2})
        parts.append(metrics.assign(**{key: getattr(run, key) for key in keys}))
    columns = keys + ["global_step", "wall_time_s", "episodic_return"]
    curves = pd.concat(parts) if parts else pd.DataFrame(columns=columns)
    curves[columns].to_csv(folder / "curves.csv", index=False, lineterminator="\r\n")


def curve_panels(folder, axes, runs, colors):
    """Episodic return against steps (axes[0]) and against wall time (axes[1]), one line per run."""
    labelled = set()  # one legend entry per variant
    for run in runs[runs.run_dir != ""].itertuples():
        metrics = read_curve(folder, run)
        if len(metrics) == 0:
            continue
        marker = None
        if len(metrics) < 30:  # a few points: show each
            marker = "."
        style = {"color": colors.get(run.variant, "grey"), "alpha": 0.8, "lw": 1.2, "marker": marker}
        label = run.variant
        if run.variant in labelled:
            label = None
        axes[0].plot(metrics.global_step, metrics.episodic_return, label=label, **style)
        axes[1].plot(metrics.wall_time_s, metrics.episodic_return, **style)
        labelled.add(run.variant)
    for axis, xlabel in zip(axes, ["environment steps", "wall time (s)"]):
        axis.set(xlabel=xlabel, ylabel="episodic return (last 20 episodes)")
        axis.grid(alpha=0.3)
        message = "no episode finished"
        if labelled:
            message = ""
        axis.text(0.5, 0.5, message, ha="center", va="center", transform=axis.transAxes)
    if labelled:
        axes[0].legend(fontsize=8)


def plot_curves(folder, algorithm, runs, device, colors, reference=()):
    """curves_<algorithm>.png: episodic return against steps and against wall time (runs: the algorithm's runs), one
    line per run, a row of two panels per group; with a reference, its points on the panels of its env id."""
    panels = list(runs.groupby(["env_group", "exp_group"], sort=False))
    fig, axes = plt.subplots(len(panels), 2, figsize=(11, 4 * len(panels)), layout="tight", squeeze=False)
    for row, (group, panel) in zip(axes, panels):
        curve_panels(folder, row, panel, colors)
        reference_panel(row[0], reference_for(reference, algorithm, group[0]))
        if len(panels) > 1:
            for axis in row:
                axis.set_title(group_label(*group), fontsize=9)
    fig.suptitle(f"{algorithm}: {device}", fontsize=9)
    fig.savefig(folder / f"curves_{algorithm}.png", dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------------------------
# results.md


def header_lines(runs, bench):
    """The runs' count by status, how run.sh was called, and the budgets."""
    counts = ", ".join(f"{n} {status}" for status, n in sorted(runs.status.value_counts().items()))
    lines = ["# Benchmark results", "", f"{len(runs)} runs: {counts}."]
    if bench.get("command"):
        made = f"Made with `{bench['command']}`"
        if bench.get("started"):
            made += f", started {bench['started']}"
        lines.append(made + ".")
    lines.append("")
    if bench.get("quick"):
        lines.append(
            "**Budgets: `--quick`**, tiny runs for a smoke test (flags below); "
            "these steps/s and returns are NOT representative of the default budgets."
        )
    elif bench.get("total_timesteps") or any(
        flag.split("=")[0].replace("_", "-") == "--total-timesteps" for flag in bench.get("extra") or []
    ):
        # Every algorithm's own budget, from its runs (run.sh --append may give each algorithm another one); other flags
        # after -- (--precision bf16) leave the budgets the scripts' defaults
        steps = "; ".join(
            f"{algorithm} {step_budgets(group)}" for algorithm, group in runs.groupby("algorithm", sort=False).total_timesteps
        )
        lines.append(f"**Budgets: not the defaults**: --total-timesteps {steps} (the command above gives every flag).")
    elif bench:
        lines.append("Budgets: the scripts' defaults.")
    for algorithm, flags in (bench.get("budgets") or {}).items():
        if flags:
            lines.append(f"- `{algorithm}`: `{flags}`")
    if bench.get("jobs", 1) > 1:
        slurm = ""
        if bench.get("slurm"):
            slurm = ", Slurm"
        lines.append(
            f"**Runs {bench['jobs']} at a time** (`--jobs`{slurm}): where runs shared a machine, "
            "their steps/s do not compare with runs made alone."
        )
    return lines


def machine_lines(machine, device):
    lines = ["", "## Machine", ""]
    for key, value in machine.items():
        if value in (None, ""):
            value = "none"
        lines.append(f"- {key}: {value}")
    if not machine:
        lines.append(f"- not recorded (no machine.json); the runs say: {device}")
    return lines


def table_row(st, columns, grouped, reference_cells=None):
    """One algorithm, env id, exp name and variant in results.md's table: its cells in these columns. Its env: that of
    its finished runs, or where the table is grouped (run.sh's own folders are not) that of all its runs."""
    fmt = "{:,.1f}".format
    if st.median >= 100:  # one precision per row, set by its median
        fmt = "{:,.0f}".format
    median = "–"
    spread = "–"
    if pd.notna(st.median):
        median = fmt(st.median)
        spread = f"{fmt(st.low)}–{fmt(st.high)}"
    speedup = "–"
    if pd.notna(st.speedup):
        speedup = f"{st.speedup:.2f}x"
    warmup = "–"
    if pd.notna(st.warmup):
        warmup = f"{st.warmup:,.1f}"
    first = "–"  # compiled: cold / warm cache; eager: one figure
    if pd.notna(st.first_cold) or pd.notna(st.first_warm):
        first = " / ".join("–" if pd.isna(x) else f"{x:,.1f}" for x in (st.first_cold, st.first_warm))
    elif pd.notna(st.first_eager):
        first = f"{st.first_eager:,.1f}"
    if not st.rets:
        ret = "–"
    elif st.rets == 1:
        ret = f"{st.ret_mean:,.1f} (1 run)"
    else:
        ret = f"{st.ret_mean:,.1f} ± {st.ret_std:,.1f}"
    if 0 < st.rets < st.finished:
        ret += f" ({st.rets} of {st.finished} runs had a finished episode)"
    env = st.env
    if grouped:
        env = st.env_group
    cells = {
        "algorithm": st.algorithm,
        "variant": st.variant,
        "env": env or "–",
        "exp name": st.exp or "–",
        "steps": st.steps or "–",
        "runs": f"{st.finished}/{st.runs}",
        "steps/s median": median,
        "steps/s range": spread,
        "speed-up": speedup,
        "warm-up s": warmup,
        "first update s": first,
        "episodic return": ret,
        "return at CleanRL's step": (reference_cells or {}).get((st.algorithm, st.env_group, st.exp_group, st.variant), "–"),
    }
    return "| " + " | ".join(cells[column] for column in columns) + " |"


def table_lines(stats, reference_cells=None):
    """The table, its notes and the plots. The table is grouped where a run has an exp name of its own (a column shows
    it) or an algorithm has runs of more than one env id or exp name; a note then says how the rows are compared. With
    a reference (--reference), a column gives each row's return at the reference's last step against it."""
    own_exp_name = (stats.exp_group != "").any()
    columns = TABLE_COLUMNS + (["return at CleanRL's step"] if reference_cells is not None else [])
    if not own_exp_name:
        columns = [column for column in columns if column != "exp name"]
    timed = stats[["first_cold", "first_warm", "first_eager"]].notna().any().any()
    if not timed:  # runs from before the scripts and run.sh recorded it
        columns = [column for column in columns if column != "first update s"]
    groups = stats[["algorithm", "env_group", "exp_group"]].drop_duplicates()
    grouped = own_exp_name or groups.algorithm.duplicated().any()
    lines = ["", "## Steps per second and final return", ""]
    lines.append("| " + " | ".join(columns) + " |")
    lines.append("| --- " * len(columns) + "|")
    for st in stats.itertuples():
        lines.append(table_row(st, columns, grouped, reference_cells))
    lines += [
        "",
        "- steps/s: environment steps per second from the end of the burn-in (compilation, graph capture) to the end of "
        "each run; median and range (min–max) over the seeds that finished; warm-up s: the burn-in's wall time "
        "(`warmup_s`), median.",
        "- speed-up: the variant's median steps/s over the baseline's, same algorithm, same machine, same benchmark run.",
    ]
    if timed:
        lines.append(
            "- first update s: the seconds from a run's launch to the end of its first update (imports, envs, compiling "
            "included), median; with `--compile`, over the runs that found torch.compile's cache (inductor's, "
            "`TORCHINDUCTOR_CACHE_DIR`) cold / warm: cold compiled a graph anew, warm took every graph from the cache."
        )
    if grouped:
        lines.append(
            "- rows: one per algorithm, env id, exp name (`--exp-name`) and variant; the speed-up is over the baseline "
            "of the same algorithm, env id and exp name. The scripts' default exp names (their file names) count as one: "
            "give both files of a pair the same `--exp-name` to compare them."
        )
    lines += [
        "- episodic return: each run's mean of its last 20 episodes at the end; mean ± sample standard deviation over seeds.",
    ]
    if reference_cells is not None:
        lines.append(
            "- return at CleanRL's step: each run's episodic return at the last step the reference gives for its algorithm "
            "and env id (the metrics row there, or the last before it), mean ± standard deviation over the runs that got "
            "there, against the reference's figure (mean ± std over its seeds where published); the plots show its points."
        )
    lines += [
        "- runs: finished / attempted. Variants: baseline = `<algo>.py`; fast = `<algo>_torchcompile.py`; "
        "compile = fast `--compile`; compile_cudagraphs = fast `--compile --cudagraphs`; "
        "compile_<mode> = fast `--compile --compile-mode <mode>`.",
        "",
    ]
    if len(stats):
        lines += ["## Plots", ""]
    for algorithm in stats.algorithm.unique():
        lines += [f"### {algorithm}", "", f"![sps_{algorithm}.png](sps_{algorithm}.png)"]
        lines += [f"![curves_{algorithm}.png](curves_{algorithm}.png)", ""]
    return lines


def failure_lines(folder, runs):
    """Each run that did not finish: its command and the end of its log (or why it has none)."""
    failed = runs[runs.status != "finished"]
    lines = []
    if len(failed):
        lines += ["## Runs that did not finish", ""]
    for run in failed.itertuples():
        title = f"### {run.algorithm} {run.variant} seed {run.seed}: {run.status}"
        if run.exit_code:
            title += f" (exit {run.exit_code})"
        lines += [title, ""]
        if run.command:
            lines += [f"`{run.command}`", ""]
        elif run.run_dir:  # a run that no runs.tsv knows: its folder names its env id and exp name
            lines += [f"`{run.run_dir}`", ""]
        tail = log_tail(folder, run.log)
        if run.status == "terminated":  # its log ends with its summary's path: why it stopped
            lines.append(f"The run was {TERMINATED}.")
            if tail:
                lines.append("")
        if tail:
            lines += [f"End of `{run.log}`:", "", "```text"]
            lines += [line.replace("```", "'''") for line in tail]  # a fence inside would end the block
            lines.append("```")
        elif run.error and run.status != "terminated":
            lines.append(run.error)
        lines.append("")
    return lines


def read_json(path):
    if not path.is_file():
        return {}
    return json.loads(path.read_text())


def aggregate(folder, algorithms=(), variants=(), reference=None):
    """results.csv, curves.csv, results.md and the plots in folder, from its runs.tsv and every summary.json under it:
    one table row per algorithm, env id, exp name and variant. algorithms and variants (run.sh's lists) order the
    tables; the variants also give the plots their colours; reference, a file of published returns to compare with
    (--reference). Returns the runs as results.csv has them."""
    global pd, plt
    import matplotlib.pyplot as plt
    import pandas as pd

    folder = pathlib.Path(folder).resolve()
    runs = pd.DataFrame(collect_runs(folder), columns=COLUMNS, dtype=object)
    runs = runs.fillna(dict.fromkeys(TEXT_COLUMNS, ""))
    runs = sort_runs(add_groups(runs), algorithms, variants)
    runs["return_last100"] = [return_last_episodes(folder / r) if r else None for r in runs.run_dir]
    runs[COLUMNS].to_csv(folder / "results.csv", index=False, lineterminator="\r\n")  # csv's standard line ends
    write_curves(folder, runs)
    stats = variant_stats(runs)
    machine = read_json(folder / "machine.json")
    bench = read_json(folder / "bench.json")
    device = device_name(runs, machine)

    colors = {variant: f"C{i % 10}" for i, variant in enumerate(variants)}  # matplotlib's default colours (tab10)
    peers = [variant for variant in variants if variant.startswith("leanrl")]  # the peer's, in greys: apart from ours
    colors.update(zip(peers, ["black", "dimgray", "darkgray", "silver"]))
    published = read_reference(reference)
    for algorithm, rows in stats.groupby("algorithm", sort=False):
        plot_speeds(folder, algorithm, rows, device, colors)
        plot_curves(folder, algorithm, runs[runs.algorithm == algorithm], device, colors, published)

    cells = reference_cells(folder, runs, stats, published) if reference else None
    lines = header_lines(runs, bench) + machine_lines(machine, device) + table_lines(stats, cells)
    lines += failure_lines(folder, runs)
    (folder / "results.md").write_text("\n".join(lines) + "\n")
    finished = (runs.status == "finished").sum()
    print(f"run.sh: {len(runs)} runs ({finished} finished) -> {folder / 'results.md'}")
    return runs[COLUMNS]


# ---------------------------------------------------------------------------------------------------------------------
# What run.sh records beside the runs


def write_bench(folder, command, quick, total_timesteps, extra, budgets, seeds, variants, jobs, slurm):
    """bench.json: how run.sh was called. With --append, one record of all the calls."""
    bench = {
        "command": command,
        "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "quick": quick,
        "total_timesteps": total_timesteps,
        "extra": extra,
        "budgets": budgets,
        "seeds": seeds,
        "variants": variants,
        "python": sys.executable,
        "jobs": jobs,
        "slurm": slurm,
    }
    path = folder / "bench.json"
    if path.is_file():
        old = json.loads(path.read_text())
        new = bench
        bench = dict(old)
        bench.update(
            command=f"{old['command']}; then {new['command']}",
            quick=old["quick"] or new["quick"],
            total_timesteps=new["total_timesteps"] or old["total_timesteps"],
            extra=old["extra"] + new["extra"] if new["extra"] != old["extra"] else old["extra"],  # every call's
            budgets={**old["budgets"], **new["budgets"]},
            seeds=sorted(set(old["seeds"]) | set(new["seeds"])),
            jobs=max(old.get("jobs", 1), new["jobs"]),
            slurm=old.get("slurm", False) or new["slurm"],
        )
    path.write_text(json.dumps(bench, indent=2))


def output_of(*command):
    """What a command prints, stripped; "" where it is missing or fails."""
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def record_machine(folder, jobs=1, cpu_sets=(), gpus=()):
    """machine.json and machine.md: the GPU, the CPU, the versions, the commit, and how --jobs split the machine."""
    gpu = ""
    if shutil.which("nvidia-smi"):
        gpu = output_of("nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader")
        gpu = gpu.replace("\n", "; ")
    if not gpu:
        try:
            import torch  # only here: it takes seconds to import

            if torch.cuda.is_available():
                gpu = "; ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
        except Exception:
            pass
    cpu_model, cpu_flags = "", []
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name") and not cpu_model:
                cpu_model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not cpu_flags:  # what the CPU's matrix products can use
                flags = line.split(":", 1)[1].split()
                cpu_flags = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile") if f in flags]
    except OSError:
        pass
    if not cpu_model:  # not Linux
        cpu_model = output_of("sysctl", "-n", "machdep.cpu.brand_string") or platform.processor() or platform.machine()
    usable = os.cpu_count()
    if hasattr(os, "sched_getaffinity"):
        usable = len(os.sched_getaffinity(0))
    info = {
        "gpu": gpu or None,
        "cpu_model": cpu_model,
        "cpu_flags": " ".join(cpu_flags) or None,  # of avx2, avx512f, avx512_bf16, amx_bf16, amx_tile
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "os": platform.platform(),
        "python": platform.python_version(),
    }
    for name in ["torch", "tensordict", "gymnasium", "envpool", "mujoco", "numpy"]:
        info[name] = version(name)
    info["git_commit"] = output_of("git", "describe", "--always", "--dirty", "--abbrev=12") or "unknown"
    info["jobs"] = jobs  # runs at once; with more than one, each on its own cores and GPU:
    info["cpu_sets"] = list(cpu_sets) or None  # run slot k's cores (taskset)
    info["gpus"] = list(gpus) or None  # the GPUs the slots take in turn (CUDA_VISIBLE_DEVICES)
    # an --append or --resume on another machine or checkout: the record names this call's, the earlier ones are kept
    earlier_path, earlier = folder / "machine.json", folder / "machines-earlier.jsonl"
    before = json.loads(earlier_path.read_text()) if earlier_path.is_file() else None
    changed = [k for k in info if before is not None and k not in ("jobs", "cpu_sets", "gpus") and before.get(k) != info[k]]
    if changed:
        with open(earlier, "a") as f:
            f.write(json.dumps(before) + "\n")
        said = ", ".join(f"{k} {before.get(k)} -> {info[k]}" for k in changed)
        kept = f"the record names this one; the earlier ones are in {earlier.name}, the runs made before ran there"
        print(f"run.sh: warning: this call's machine is not the one machine.json recorded ({said}): {kept}", file=sys.stderr)
    earlier_count = sum(1 for _ in open(earlier)) if earlier.is_file() else 0
    (folder / "machine.json").write_text(json.dumps(info, indent=2) + "\n")
    md = "# Machine\n\n"
    for key, value in info.items():
        if value is None:
            value = "none"
        md += f"- {key}: {value}\n"
    if earlier_count:
        md += f"- earlier calls into this folder ran on {earlier_count} other record(s): {earlier.name}\n"
    (folder / "machine.md").write_text(md)
    print(f"run.sh: machine: {info['gpu'] or 'no GPU'}; {cpu_model}, {os.cpu_count()} cores; torch {info['torch']}")


# ---------------------------------------------------------------------------------------------------------------------
# The command line


def name_list(text):
    """The names in "a,b" or "a b": ["a", "b"]."""
    return text.replace(",", " ").split()


def main(argv):
    if argv[:1] == ["--record-bench"]:
        extra = []
        if "--" in argv:  # the flags run.sh passes on to every script, after -- (they may look like our own)
            extra = argv[argv.index("--") + 1 :]
            argv = argv[: argv.index("--")]
        parser = argparse.ArgumentParser(prog="aggregate.py --record-bench", description="Writes bench.json.")
        parser.add_argument("folder", type=pathlib.Path, help="the benchmark's folder (run.sh's --out)")
        parser.add_argument("--command", required=True, help="run.sh's command line")
        parser.add_argument("--quick", action="store_true", help="run.sh --quick")
        parser.add_argument("--total-timesteps", type=int, default=None, help="run.sh --total-timesteps")
        parser.add_argument("--budget", action="append", default=[], help="ALGORITHM=FLAGS: its --quick flags, or nothing")
        parser.add_argument("--seeds", default="", help="the seeds, space-separated")
        parser.add_argument("--variants", default="", help="the variants this call runs, space-separated")
        parser.add_argument("--jobs", type=int, default=1, help="run.sh --jobs")
        parser.add_argument("--slurm", action="store_true", help="run.sh --slurm")
        args = parser.parse_args(argv[1:])
        run_budgets = {}
        for item in args.budget:
            algorithm, flags = item.split("=", 1)
            run_budgets[algorithm] = flags
        seeds = [int(seed) for seed in name_list(args.seeds)]
        write_bench(
            args.folder,
            args.command,
            args.quick,
            args.total_timesteps,
            extra,
            run_budgets,
            seeds,
            name_list(args.variants),
            args.jobs,
            args.slurm,
        )
    elif argv[:1] == ["--record-machine"]:
        parser = argparse.ArgumentParser(prog="aggregate.py --record-machine", description="Writes machine.json, machine.md.")
        parser.add_argument("folder", type=pathlib.Path, help="the benchmark's folder (run.sh's --out)")
        parser.add_argument("--jobs", type=int, default=1, help="run.sh --jobs: runs at once")
        parser.add_argument("--cpu-sets", default="", help="each run slot's cores (taskset), space-separated")
        parser.add_argument("--gpus", default="", help="the GPUs the run slots take in turn, space-separated")
        args = parser.parse_args(argv[1:])
        record_machine(args.folder, args.jobs, args.cpu_sets.split(), args.gpus.split())
    else:
        parser = argparse.ArgumentParser(prog="aggregate.py", description=__doc__.splitlines()[0])
        parser.add_argument("folder", type=pathlib.Path, help="run.sh's --out, or any folder with summary.json files below")
        parser.add_argument("--algorithms", default="", help="the tables' order of algorithms, comma-separated")
        parser.add_argument("--variants", default="", help="the tables' order of variants, comma-separated (and colours)")
        parser.add_argument("--reference", default=None, help="a CSV of published returns (doc/results/cleanrl_reference.csv)")
        args = parser.parse_args(argv)
        try:
            aggregate(args.folder, name_list(args.algorithms), name_list(args.variants), args.reference)
        except ImportError as e:
            if (e.name or "").split(".")[0] not in ("pandas", "matplotlib"):
                raise
            print(
                f"aggregate.py: {TABLES_NEED}: make them where those are installed, with ./run.sh --aggregate {args.folder}",
                file=sys.stderr,
            )
            sys.exit(3)  # run.sh: no tables here, the runs are recorded all the same


if __name__ == "__main__":
    main(sys.argv[1:])
