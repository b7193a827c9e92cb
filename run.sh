#!/usr/bin/env bash
# run.sh: the benchmark driver. Runs the scripts' variants x seeds one at a time, then gathers every run's
# summary.json into results.csv, writes results.md (steps/s, speed-up, final return) and PNG plots, with the
# machine and versions beside them. `./run.sh --help` explains the options.
#
# Everything is in this one file: the driver in bash, the machine record and the aggregation in Python heredocs.
set -uo pipefail # no -e: a run that fails is recorded and the others go on

ALGOS="ppo_atari ppo_continuous_action sac_continuous_action td3_continuous_action dqn"
VARIANTS="baseline fast compile compile_cudagraphs"  # the default matrix
MODE_VARIANTS="compile_max_autotune_no_cudagraphs compile_reduce_overhead compile_max_autotune"  # torch.compile's other modes, on request
DEFAULT_SEEDS="1,2,3"
RUNS_HEADER=$'algorithm\tvariant\tseed\tstatus\texit_code\tsummary\tlog\tcommand' # runs.tsv: one row per attempted run
QUICK_SEEDS="1"

# --quick budgets: tiny but valid runs, so that the whole matrix is a smoke test that finishes in minutes on a
# 2-core CPU. Each goes past the burn-in and the start of learning, so steps/s is measured and the (compiled)
# update runs; the numbers they give are NOT representative of the full budgets.
#   algorithm              | flags
#   ppo_atari              | 2 iterations of 8 envs x 128 steps; the first is burn-in
#   ppo_continuous_action  | 4 iterations of 512 steps (1 env); the first is burn-in
#   sac_continuous_action  | 200 updates after 1000 random steps; 5 updates of burn-in
#   td3_continuous_action  | same as SAC
#   dqn                    | 200 updates (one per 10 steps) after 10000 steps; 5 updates of burn-in
quick_flags() {
    case "$1" in
        ppo_atari) echo "--total-timesteps 2048 --num-envs 8 --num-steps 128 --measure-burnin 1" ;;
        ppo_continuous_action) echo "--total-timesteps 2048 --num-steps 512 --measure-burnin 1" ;;
        sac_continuous_action) echo "--total-timesteps 1200 --learning-starts 1000 --measure-burnin 5" ;;
        td3_continuous_action) echo "--total-timesteps 1200 --learning-starts 1000 --measure-burnin 5" ;;
        dqn) echo "--total-timesteps 12000 --measure-burnin 5" ;;
        *) echo "" ;;
    esac
}

# variant -> file and flags
variant_file() { # algorithm variant
    if [ "$2" = baseline ]; then echo "$1.py"; else echo "$1_torchcompile.py"; fi
}
variant_flags() {
    case "$1" in
        compile) echo "--compile" ;;
        compile_cudagraphs) echo "--compile --cudagraphs" ;;
        compile_max_autotune_no_cudagraphs) echo "--compile --compile-mode max-autotune-no-cudagraphs" ;;
        compile_reduce_overhead) echo "--compile --compile-mode reduce-overhead" ;;
        compile_max_autotune) echo "--compile --compile-mode max-autotune" ;;
        *) echo "" ;;
    esac
}

usage() {
    cat <<EOF
Usage: ./run.sh [options] [-- extra flags for every script]

Runs the benchmark matrix (one run at a time, --jobs N at once, or as a Slurm job array): for each algorithm,
each variant, each seed:
  baseline            scripts/<algo>.py
  fast                scripts/<algo>_torchcompile.py
  compile             scripts/<algo>_torchcompile.py --compile
  compile_cudagraphs  scripts/<algo>_torchcompile.py --compile --cudagraphs
and, only where --variants names them, torch.compile's other modes (--compile-mode; the last two capture CUDA
graphs themselves and run without them on a CPU, with a warning):
  compile_max_autotune_no_cudagraphs   --compile --compile-mode max-autotune-no-cudagraphs
  compile_reduce_overhead              --compile --compile-mode reduce-overhead
  compile_max_autotune                 --compile --compile-mode max-autotune
With no options: all algorithms, the four variants above, seeds ${DEFAULT_SEEDS}, the scripts' default budgets
(the full reproduction; hours on a GPU, much longer on a CPU).

Options:
  --quick                 tiny budgets (the table at the top of run.sh) and one seed (${QUICK_SEEDS}): a smoke test
                          of every run, minutes on a 2-core CPU; its numbers are not representative
  --scripts A,B           algorithms to run (default: all): ${ALGOS// /, }
  --variants V,W          variants to run (default: ${VARIANTS// /, }); also ${MODE_VARIANTS// /, }
  --seeds 1,2,3           seeds (default: ${DEFAULT_SEEDS}, or ${QUICK_SEEDS} with --quick)
  --total-timesteps N     give every run this budget (overrides the defaults and --quick's)
  --out DIR               where everything goes (default: bench/<date-time>; bench/ is git-ignored);
                          must not hold an earlier benchmark unless --append
  --append                add these runs to the benchmark already in --out (e.g. one algorithm per call on
                          a machine with a time limit per command); the tables then cover all of them
  --aggregate DIR         run nothing: re-read DIR (the --out of an earlier run.sh, or any folder with run
                          folders holding summary.json) and rewrite its results.csv, results.md and plots
  --publish DIR           afterwards, copy the small files (results.csv, results.md, machine.*, *.png) into
                          DIR, e.g. doc/results/cpu-2core
  --jobs N                up to N runs at once on this machine (default 1; needs bash 5.1+): each run slot gets
                          its own cores (taskset, OMP_NUM_THREADS = its share) and the next GPU in turn
                          (CUDA_VISIBLE_DEVICES); machine.json records the split, results.md marks the speeds as
                          shared. With --slurm: at most N tasks of the array at once
  --gpus 0,1,...          the GPUs the runs take in turn (default: every visible one)
  --slurm                 submit instead of running: one sbatch job array, a task per run (throttled by --jobs),
                          then one job that aggregates into --out once they all end (afterany); prints the job
                          ids and how to watch them. --out must be on a file system the nodes share
  --slurm-args "..."      your own sbatch options for both jobs, e.g. "--partition gpu --gpus-per-task 1 --time 4:00:00"
  -h, --help              this help
  -- FLAGS...             passed to every script after run.sh's own flags (the last of a repeated flag wins),
                          e.g. -- --no-cuda   or   -- --env-id Hopper-v4

What it leaves in DIR:
  machine.json, machine.md  GPU or none, CPU model and cores, Python and library versions, git commit
  bench.json                how run.sh was called (budgets, seeds, variants, extra flags)
  runs.tsv                  one row per attempted run: status, exit code, summary.json, log, command
  slurm/, tasks/            with --slurm: the plan of runs, Slurm's own logs, one record file per task
  logs/<algo>__<variant>__seed<N>.log   each run's stdout and stderr
  runs/<algo>/<variant>/seed<N>/<run_name>/   each run's metrics.csv and summary.json
  results.csv               one row per run (failed ones too, with status and the last line of the log)
  results.md                per algorithm and variant: steps/s median and range over seeds, speed-up over the
                            baseline (ratio of medians), final episodic return mean +- std; the plots; the tail
                            of the log of each run that did not finish
  sps_<algo>.png            steps/s per variant (bar: median, whiskers: range, dots: seeds)
  curves_<algo>.png         episodic return against steps and against wall time, one line per run

Exit status: 0 if every run finished; 1 if any failed or its script is missing; 130 if interrupted (Ctrl-C
stops the current run, which writes its summary as "interrupted", and aggregates what exists); 2 on bad options.
--aggregate alone exits 0 once it has written the files, whatever the runs' statuses.

The full table on one 8-GPU node: ./run.sh --jobs 8 (8 runs at once, one per GPU, the cores split 8 ways).
On a cluster: ./run.sh --slurm --jobs 16 --slurm-args "--partition gpu --gpus-per-task 1 --cpus-per-task 8 --time 12:00:00"
(60 tasks for all algorithms, variants and seeds, 16 at once; squeue shows them; results.md when the last ends).

Environment: PYTHON (the interpreter, default: python, else python3); RUN_SH_SCRIPTS_DIR (where the scripts
are, default: scripts/ beside run.sh; for tests). Speeds are only comparable between runs made on the same
machine in the same sitting: keep the machine otherwise idle while it runs.
EOF
}

die() {
    echo "run.sh: error: $*" >&2
    exit 2
}

in_list() { # word "space separated list"
    case " $2 " in *" $1 "*) return 0 ;; *) return 1 ;; esac
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SCRIPTS_DIR="${RUN_SH_SCRIPTS_DIR:-$ROOT/scripts}"
PYTHON="${PYTHON:-$(command -v python || command -v python3 || echo python3)}"

QUICK=0
SEL_SCRIPTS=""
SEL_VARIANTS=""
SEEDS=""
TOTAL_TIMESTEPS=""
OUT=""
AGGREGATE=""
APPEND=0
PUBLISH=""
JOBS=1
GPUS=""
SLURM=0
SLURM_ARGS=""
RUN_TASK=""
EXTRA=()
ORIG_ARGS=("$@")

while [ $# -gt 0 ]; do
    opt="$1"
    val=""
    has_inline=0
    case "$opt" in
        --*=*)
            val="${opt#*=}"
            opt="${opt%%=*}"
            has_inline=1
            ;;
    esac
    case "$opt" in
        -h | --help)
            usage
            exit 0
            ;;
        --quick) QUICK=1 ;;
        --append) APPEND=1 ;;
        --slurm) SLURM=1 ;;
        --scripts | --variants | --seeds | --total-timesteps | --out | --aggregate | --publish | --jobs | --gpus | --slurm-args | --run-task)
            if [ "$has_inline" = 0 ]; then
                [ $# -ge 2 ] || die "$opt needs a value (see --help)"
                val="$2"
                shift
            fi
            case "$opt" in
                --scripts) SEL_SCRIPTS="$val" ;;
                --variants) SEL_VARIANTS="$val" ;;
                --seeds) SEEDS="$val" ;;
                --total-timesteps) TOTAL_TIMESTEPS="$val" ;;
                --out) OUT="$val" ;;
                --aggregate) AGGREGATE="$val" ;;
                --publish) PUBLISH="$val" ;;
                --jobs) JOBS="$val" ;;
                --gpus) GPUS="$val" ;;
                --slurm-args) SLURM_ARGS="$val" ;;
                --run-task) RUN_TASK="$val" ;;
            esac
            ;;
        --)
            shift
            EXTRA=("$@")
            break
            ;;
        *) die "unknown option '$1' (see --help; flags for the scripts go after --)" ;;
    esac
    shift
done

# ---------------------------------------------------------------------------------------------------------------
# Aggregation: summary.json and metrics.csv files -> results.csv, results.md, PNGs, with pandas and matplotlib
# (requirements/requirements-dev.txt). Reads runs.tsv where there is one (it knows the runs that left no summary.json)
# and also every summary.json found under the folder.
aggregate() { # dir
    if [ -d "$1/tasks" ]; then # Slurm: each task wrote its own row (no two tasks write one file); gather them
        { printf '%s\n' "$RUNS_HEADER"; cat "$1"/tasks/*.tsv 2>/dev/null; } >"$1/runs.tsv"
    fi
    MPLBACKEND=Agg "$PYTHON" - "$1" <<'PY'
import json, os, pathlib, sys
import matplotlib.pyplot as plt
import pandas as pd

out = pathlib.Path(sys.argv[1]).resolve()
ALGOS = ["ppo_atari", "ppo_continuous_action", "sac_continuous_action", "td3_continuous_action", "dqn"]
VARIANTS = "baseline fast compile cudagraphs compile_cudagraphs compile_max_autotune_no_cudagraphs compile_reduce_overhead compile_max_autotune".split()
COLORS = {v: f"C{i}" for i, v in enumerate(VARIANTS)}  # matplotlib's default colours (tab10)
COLUMNS = ("algorithm variant seed status env_id sps episodic_return episodes global_step total_timesteps wall_time_s warmup_s compile compile_mode "
           "cudagraphs device gpu_name cpu_count torch_version script exit_code error run_dir log command").split()


def log_tail(log, n=20):  # progress-bar redraws use \r: keep what the terminal would show last on each line
    lines = (out / log).read_text(errors="replace").splitlines() if log and (out / log).is_file() else []
    return [line.split("\r")[-1].rstrip() for line in lines][-n:]


def add_summary(rec, path):  # rec (a runs.tsv row, or {}) with the run's summary.json; what runs.tsv says wins
    seen.add(path.resolve())
    rec["run_dir"] = os.path.relpath(path.parent, out)
    try:
        s = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return {"algorithm": "?", "variant": "?", **rec, "status": "failed", "error": f"unreadable summary.json: {e}"}
    args = s.get("args") or {}  # every flag; older summaries also had env_id, seed, compile and cudagraphs at the top level
    flags = {k: args.get(k, s.get(k, no)) for k, no in dict(env_id=None, seed=None, compile=False, compile_mode=None, cudagraphs=False,
                                                             total_timesteps=None).items()}
    algorithm, mode = s.get("script", "?").removesuffix("_torchcompile"), (flags["compile_mode"] or "default").replace("-", "_")
    parts = ["compile"] * flags["compile"] + [mode] * (mode != "default") + ["cudagraphs"] * flags["cudagraphs"]  # as --variants names them
    variant = "baseline" if s.get("script") == algorithm else "_".join(parts) or "fast"
    return {k: s[k] for k in COLUMNS if k in s} | flags | {"algorithm": algorithm, "variant": variant, "status": s.get("status") or "unknown"} | rec


# runs.tsv knows the runs that left no summary.json; any other summary.json under the folder is a run too
records, seen = [], set()
if (out / "runs.tsv").is_file():
    for row in pd.read_csv(out / "runs.tsv", sep="\t", dtype=str, keep_default_na=False).astype({"seed": int}).to_dict("records"):
        summary = out / row["summary"]
        records.append(add_summary(row, summary) if row["summary"] and summary.is_file() else row)
records += [add_summary({}, path) for path in sorted(out.rglob("summary.json")) if path.resolve() not in seen]
for rec in [r for r in records if r["status"] != "finished"]:  # why: its script is missing, or the last line its log shows
    lines = [line for line in log_tail(rec.get("log")) if line.strip()] or [""]
    rec.setdefault("error", ("script not found: " + rec["command"]) if rec["status"] == "missing" else lines[-1][:300])

runs = pd.DataFrame(records, columns=COLUMNS, dtype=object).fillna(dict.fromkeys(["exit_code", "error", "run_dir", "log", "command"], ""))
# rows: algorithms and variants in the order above (other names after them, by name), then seeds
rank = {name: i for i, name in enumerate(dict.fromkeys(ALGOS + VARIANTS + sorted({*runs.algorithm, *runs.variant})))}
runs = runs.sort_values(["algorithm", "variant", "seed"], key=lambda c: pd.to_numeric(c, errors="coerce").fillna(0) if c.name == "seed" else c.map(rank))
runs.to_csv(out / "results.csv", index=False, lineterminator="\r\n")  # csv's standard line ends

keys = ["algorithm", "variant"]  # per algorithm and variant: steps/s, warm-up, return (mean, std), over the runs that finished
done = runs[runs.status == "finished"].astype({"sps": float, "episodic_return": float, "warmup_s": float})
stats = runs[keys + ["status"]].join(done[["sps", "warmup_s", "episodic_return", "env_id", "total_timesteps"]]).groupby(keys, sort=False).agg(
    runs=("status", "size"), finished=("status", lambda s: s.eq("finished").sum()), seeds=("sps", lambda s: s.dropna().tolist()),
    median=("sps", "median"), low=("sps", "min"), high=("sps", "max"), warmup=("warmup_s", "median"), rets=("episodic_return", "count"),
    ret_mean=("episodic_return", "mean"), ret_std=("episodic_return", "std"), env=("env_id", lambda ids: ", ".join(sorted(set(ids.dropna()) - {""}))),
    steps=("total_timesteps", lambda ts: "/".join(f"{t:,}" for t in sorted(set(ts.dropna()))))).reset_index()
stats["speedup"] = stats["median"] / stats.algorithm.map(stats[stats.variant == "baseline"].set_index("algorithm")["median"])  # of medians

machine = json.loads((out / "machine.json").read_text()) if (out / "machine.json").is_file() else {}
bench = json.loads((out / "bench.json").read_text()) if (out / "bench.json").is_file() else {}
cpus = "/".join(sorted({str(c) for c in runs.cpu_count.dropna() if c})) or "?"
device = ", ".join(sorted({g for g in runs.gpu_name.dropna() if g})) or f"CPU, {cpus} cores"  # what the runs say
if machine:  # what machine.json says, where there is one
    device = machine.get("gpu") or f"CPU only, {machine.get('cpu_model', '?')}, {machine.get('cpu_count', '?')} cores"

for a, rows in stats.groupby("algorithm", sort=False):
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(rows), 4), layout="tight")  # steps/s: bars (median), whiskers (range), dots (seeds)
    ax.bar(range(len(rows)), rows["median"], yerr=[(rows["median"] - rows.low).to_numpy(), (rows.high - rows["median"]).to_numpy()],
           capsize=4, color=[COLORS.get(v, "grey") for v in rows.variant], alpha=0.8)
    for i, st in enumerate(rows.itertuples()):
        ax.scatter([i] * len(st.seeds), st.seeds, color="black", s=10, zorder=3)
        if pd.isna(st.median):
            ax.text(i, 0, "no finished run", ha="center", va="bottom", rotation=90, fontsize=8)
        elif pd.notna(st.speedup):
            ax.annotate(f"{st.speedup:.2f}x", (i, st.high), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=9)
    ax.set_xticks(range(len(rows)), rows.variant, rotation=15)
    ax.set(ylabel="steps/s (median, range over seeds)", ylim=(0, None))
    ax.set_title(f"{a}\n{device}", fontsize=9)
    fig.savefig(out / f"sps_{a}.png", dpi=100)
    # learning curves: return against steps and against wall time, one line per run
    (fig, axes), labelled = plt.subplots(1, 2, figsize=(11, 4), layout="tight"), set()
    for run in runs[(runs.algorithm == a) & (runs.run_dir != "")].itertuples():
        try:
            m = pd.read_csv(out / run.run_dir / "metrics.csv").reindex(columns=["global_step", "wall_time_s", "episodic_return"])
        except (OSError, ValueError):  # no metrics.csv, or an empty or broken one
            continue
        m = m.apply(pd.to_numeric, errors="coerce").dropna(subset=["global_step", "episodic_return"])
        style = dict(color=COLORS.get(run.variant, "grey"), alpha=0.8, lw=1.2, marker="." if len(m) < 30 else None)
        if len(m):
            axes[0].plot(m.global_step, m.episodic_return, label=None if run.variant in labelled else run.variant, **style)
            axes[1].plot(m.wall_time_s, m.episodic_return, **style)
            labelled.add(run.variant)
    for axis, xlabel in zip(axes, ["environment steps", "wall time (s)"]):
        axis.set(xlabel=xlabel, ylabel="episodic return (last 20 episodes)")
        axis.grid(alpha=0.3)
        axis.text(0.5, 0.5, "" if labelled else "no episode finished", ha="center", va="center", transform=axis.transAxes)
    if labelled:
        axes[0].legend(fontsize=8)
    fig.suptitle(f"{a}: {device}", fontsize=9)
    fig.savefig(out / f"curves_{a}.png", dpi=100)
    plt.close("all")

md = ["# Benchmark results", "", f"{len(runs)} runs: " + ", ".join(f"{n} {s}" for s, n in sorted(runs.status.value_counts().items())) + "."]
md += ([f"Made with `{bench['command']}`" + (f", started {bench['started']}" if bench.get("started") else "") + "."] if bench.get("command") else []) + [""]
if bench.get("quick"):
    md.append("**Budgets: `--quick`**, tiny runs for a smoke test (flags below); these steps/s and returns are NOT representative of the default budgets.")
elif bench.get("total_timesteps") or bench.get("extra"):
    changed = [f"--total-timesteps {bench['total_timesteps']}" if bench.get("total_timesteps") else "", *(bench.get("extra") or [])]
    md.append(f"**Budgets: not the defaults**: {' '.join(filter(None, changed))} (the steps column gives each run's budget).")
elif bench:
    md.append("Budgets: the scripts' defaults.")
md += [f"- `{a}`: `{flags}`" for a, flags in (bench.get("budgets") or {}).items() if flags]
md += [f"**Runs {bench['jobs']} at a time** (`--jobs`{', Slurm' * bench.get('slurm', False)}): where runs shared a machine, "
       "their steps/s do not compare with runs made alone."] if bench.get("jobs", 1) > 1 else []
md += ["", "## Machine", ""] + [f"- {k}: {'none' if v in (None, '') else v}" for k, v in machine.items()]
md += [] if machine else [f"- not recorded (no machine.json); the runs say: {device}"]
md += ["", "## Steps per second and final return", "",
       "| algorithm | variant | env | steps | runs | steps/s median | steps/s range | speed-up | warm-up s | episodic return |", "| --- " * 10 + "|"]
for st in stats.itertuples():
    fmt = "{:,.0f}".format if st.median >= 100 else "{:,.1f}".format  # one precision per row, set by its median
    sps = f"{fmt(st.median)} | {fmt(st.low)}–{fmt(st.high)}" if pd.notna(st.median) else "– | –"
    speedup = f"{st.speedup:.2f}x" if pd.notna(st.speedup) else "–"
    warmup = f"{st.warmup:,.1f}" if pd.notna(st.warmup) else "–"
    ret = "–" if not st.rets else f"{st.ret_mean:,.1f} (1 run)" if st.rets == 1 else f"{st.ret_mean:,.1f} ± {st.ret_std:,.1f}"
    if 0 < st.rets < st.finished:
        ret += f" ({st.rets} of {st.finished} runs had a finished episode)"
    md.append(f"| {st.algorithm} | {st.variant} | {st.env or '–'} | {st.steps or '–'} | {st.finished}/{st.runs} | {sps} | {speedup} | {warmup} | {ret} |")
md += ["", "- steps/s: environment steps per second from the end of the burn-in (compilation, graph capture) to the end of each run; "
       "median and range (min–max) over the seeds that finished; warm-up s: the burn-in's wall time (`warmup_s`), median.",
       "- speed-up: the variant's median steps/s over the baseline's, same algorithm, same machine, same sitting.",
       "- episodic return: each run's mean of its last 20 episodes at the end; mean ± sample standard deviation over seeds.",
       "- runs: finished / attempted. Variants: baseline = `<algo>.py`; fast = `<algo>_torchcompile.py`; compile = fast `--compile`; "
       "compile_cudagraphs = fast `--compile --cudagraphs`; compile_<mode> = fast `--compile --compile-mode <mode>`.", ""]
md += ["## Plots", ""] if len(stats) else []
for a in stats.algorithm.unique():
    md += [f"### {a}", "", f"![sps_{a}.png](sps_{a}.png)", f"![curves_{a}.png](curves_{a}.png)", ""]
md += ["## Runs that did not finish", ""] if (runs.status != "finished").any() else []
for run in runs[runs.status != "finished"].itertuples():
    md += [f"### {run.algorithm} {run.variant} seed {run.seed}: {run.status}" + (f" (exit {run.exit_code})" if run.exit_code else ""), ""]
    md += [f"`{run.command}`", ""] if run.command else []
    tail = log_tail(run.log)
    if tail:
        md += [f"End of `{run.log}`:", "", "```text", *(line.replace("```", "'''") for line in tail), "```"]
    elif run.error:
        md.append(run.error)
    md.append("")
(out / "results.md").write_text("\n".join(md) + "\n")
print(f"run.sh: {len(runs)} runs ({len(done)} finished) -> {out / 'results.md'}")
PY
}

publish() { # from to
    mkdir -p "$2" || return 1
    local f
    for f in "$1"/results.csv "$1"/results.md "$1"/machine.json "$1"/machine.md "$1"/*.png; do
        [ -f "$f" ] && cp "$f" "$2"/
    done
    echo "run.sh: published to $2"
}

if [ -n "$AGGREGATE" ]; then
    [ -d "$AGGREGATE" ] || die "--aggregate: no such directory: $AGGREGATE"
    aggregate "$AGGREGATE" || exit 1
    if [ -n "$PUBLISH" ]; then publish "$AGGREGATE" "$PUBLISH" || exit 1; fi
    exit 0
fi

# ---------------------------------------------------------------------------------------------------------------
# Check the options before any work.
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die "--jobs: '$JOBS' is not a positive integer (the runs at once)"
if [ "$JOBS" -gt 1 ] && [ "$SLURM" = 0 ] && ((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] < 501)); then
    die "--jobs: running runs at once needs bash 5.1 or newer (this is $BASH_VERSION); --slurm --jobs N does not"
fi
if [ "$SLURM" = 1 ] && ! command -v sbatch >/dev/null; then
    die "--slurm: sbatch is not on PATH (run it on a Slurm login node; tests/slurm/start-cluster.sh makes a local one)"
fi
if [ -n "$RUN_TASK" ]; then # a Slurm task, PLAN:INDEX: run one run of the plan that --slurm wrote into --out
    [[ "$RUN_TASK" =~ ^[0-9]+:[0-9]+$ ]] && [ -n "$OUT" ] && [ -f "$OUT/slurm/plan.${RUN_TASK%%:*}.tsv" ] ||
        die "--run-task: needs PLAN:INDEX and --out DIR holding slurm/plan.PLAN.tsv"
fi
[ -n "$SEL_SCRIPTS" ] || SEL_SCRIPTS="${ALGOS// /,}"
[ -n "$SEL_VARIANTS" ] || SEL_VARIANTS="${VARIANTS// /,}"
if [ -z "$SEEDS" ]; then
    if [ "$QUICK" = 1 ]; then SEEDS="$QUICK_SEEDS"; else SEEDS="$DEFAULT_SEEDS"; fi
fi
RUN_ALGOS=()
for a in ${SEL_SCRIPTS//,/ }; do
    in_list "$a" "$ALGOS" || die "--scripts: unknown algorithm '$a' (allowed: ${ALGOS// /, })"
    RUN_ALGOS+=("$a")
done
RUN_VARIANTS=()
for v in ${SEL_VARIANTS//,/ }; do
    in_list "$v" "$VARIANTS $MODE_VARIANTS" || die "--variants: unknown variant '$v' (allowed: ${VARIANTS// /, }, ${MODE_VARIANTS// /, })"
    RUN_VARIANTS+=("$v")
done
RUN_SEEDS=()
for s in ${SEEDS//,/ }; do
    [[ "$s" =~ ^[0-9]+$ ]] || die "--seeds: '$s' is not a non-negative integer (e.g. --seeds 1,2,3)"
    RUN_SEEDS+=("$s")
done
[ ${#RUN_ALGOS[@]} -gt 0 ] || die "--scripts: empty"
[ ${#RUN_VARIANTS[@]} -gt 0 ] || die "--variants: empty"
[ ${#RUN_SEEDS[@]} -gt 0 ] || die "--seeds: empty"
if [ -n "$TOTAL_TIMESTEPS" ] && ! [[ "$TOTAL_TIMESTEPS" =~ ^[1-9][0-9]*$ ]]; then
    die "--total-timesteps: '$TOTAL_TIMESTEPS' is not a positive integer"
fi
# GPUs: --gpus, else every visible one; a run of --jobs N goes to the next GPU in turn, through CUDA_VISIBLE_DEVICES
n_gpus=0
if command -v nvidia-smi >/dev/null; then n_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); fi
VISIBLE=()
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then read -r -a VISIBLE <<<"${CUDA_VISIBLE_DEVICES//,/ }"; else for ((g = 0; g < n_gpus; g++)); do VISIBLE+=("$g"); done; fi
RUN_GPUS=()
for g in ${GPUS//,/ }; do
    [[ "$g" =~ ^[0-9]+$ ]] || die "--gpus: '$g' is not a GPU index (e.g. --gpus 0,1)"
    in_list "$g" "${VISIBLE[*]-}" || die "--gpus: GPU $g does not exist here (visible: ${VISIBLE[*]:-none})"
    RUN_GPUS+=("$g")
done
[ -n "$GPUS" ] || RUN_GPUS=(${VISIBLE[@]+"${VISIBLE[@]}"})
# CPU cores: with --jobs N > 1 each run slot gets its own set (taskset and OMP_NUM_THREADS), so runs do not fight
read -r -a CPUS <<<"$("$PYTHON" -c 'import os; print(*sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else range(os.cpu_count()))')"
CPU_SETS=()
if [ "$JOBS" -gt 1 ] && [ "$SLURM" = 0 ] && command -v taskset >/dev/null; then
    per=$((${#CPUS[@]} / JOBS > 0 ? ${#CPUS[@]} / JOBS : 1))
    for ((k = 0; k < JOBS; k++)); do
        set_k=()
        for ((c = 0; c < per; c++)); do set_k+=("${CPUS[$(((k * per + c) % ${#CPUS[@]}))]}"); done
        CPU_SETS+=("$(IFS=,; echo "${set_k[*]}")")
    done
fi
[ -n "$OUT" ] || OUT="$ROOT/bench/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT" || die "--out: cannot create $OUT"
OUT="$(cd "$OUT" && pwd)"
if [ -z "$RUN_TASK" ] && [ "$APPEND" = 0 ] && { [ -e "$OUT/runs.tsv" ] || [ -e "$OUT/slurm" ]; }; then
    die "--out: $OUT already holds a benchmark (runs.tsv); choose another folder, add to it with --append, or re-read it with --aggregate $OUT"
fi
if [ -z "$RUN_TASK" ] && [ "$APPEND" = 1 ] && { { [ -e "$OUT/slurm" ] && [ "$SLURM" = 0 ]; } || { [ -e "$OUT/runs.tsv" ] && [ ! -e "$OUT/slurm" ] && [ "$SLURM" = 1 ]; }; }; then
    die "--append: $OUT holds a benchmark run $([ "$SLURM" = 1 ] && echo here || echo through Slurm); add to it the same way, or use another folder"
fi
if [ -n "$PUBLISH" ]; then
    mkdir -p "$PUBLISH" || die "--publish: cannot create $PUBLISH"
    PUBLISH="$(cd "$PUBLISH" && pwd)"
fi
mkdir -p "$OUT/logs" "$OUT/runs"
cd "$ROOT" || exit 2

# ---------------------------------------------------------------------------------------------------------------
# How run.sh was called, and the machine.
budgets_json=""
for a in "${RUN_ALGOS[@]}"; do
    if [ "$QUICK" = 1 ]; then b="$(quick_flags "$a")"; else b=""; fi
    budgets_json+="$a=$b"$'\n'
done
CMDLINE="./run.sh ${ORIG_ARGS[*]}"
[ -z "$RUN_TASK" ] && BENCH_QUICK="$QUICK" BENCH_TT="$TOTAL_TIMESTEPS" BENCH_CMD="${CMDLINE% }" BENCH_BUDGETS="$budgets_json" \
    BENCH_SEEDS="${RUN_SEEDS[*]}" BENCH_VARIANTS="${RUN_VARIANTS[*]}" BENCH_JOBS="$JOBS" BENCH_SLURM="$SLURM" \
    "$PYTHON" - "$OUT" "${EXTRA[@]}" <<'PY' || [ -n "$RUN_TASK" ] || die "cannot write bench.json with $PYTHON"
import datetime, json, os, pathlib, sys
out = pathlib.Path(sys.argv[1])
budgets = dict(line.split("=", 1) for line in os.environ["BENCH_BUDGETS"].splitlines() if line)
new = {
    "command": os.environ["BENCH_CMD"], "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    "quick": os.environ["BENCH_QUICK"] == "1", "total_timesteps": int(os.environ["BENCH_TT"]) if os.environ["BENCH_TT"] else None,
    "extra": sys.argv[2:], "budgets": budgets, "seeds": [int(s) for s in os.environ["BENCH_SEEDS"].split()],
    "variants": os.environ["BENCH_VARIANTS"].split(), "python": sys.executable, "jobs": int(os.environ["BENCH_JOBS"]),
    "slurm": os.environ["BENCH_SLURM"] == "1",
}
if (out / "bench.json").is_file():  # --append: one record for all the calls
    old = json.load(open(out / "bench.json"))
    new = {**old, "command": f"{old['command']}; then {new['command']}", "quick": old["quick"] or new["quick"],
           "total_timesteps": new["total_timesteps"] or old["total_timesteps"], "extra": old["extra"] or new["extra"],
           "budgets": {**old["budgets"], **new["budgets"]}, "seeds": sorted(set(old["seeds"]) | set(new["seeds"])),
           "jobs": max(old.get("jobs", 1), new["jobs"]), "slurm": old.get("slurm", False) or new["slurm"]}
json.dump(new, open(out / "bench.json", "w"), indent=2)
PY

record_machine() { # a Slurm submission records nothing here: its task 0 records the compute node it runs on
    if [ "$SLURM" = 1 ] || { [ -n "$RUN_TASK" ] && [ "${RUN_TASK#*:}" != 0 ]; }; then return 0; fi
    MACHINE_JOBS="$JOBS" MACHINE_CPU_SETS="${CPU_SETS[*]-}" MACHINE_GPUS="${RUN_GPUS[*]-}" "$PYTHON" - "$OUT" "$ROOT" <<'PY'

import json, os, pathlib, platform, shutil, subprocess, sys
from importlib import metadata

out, root = pathlib.Path(sys.argv[1]), sys.argv[2]


def cmd(*args):
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=root).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


gpu = ""
if shutil.which("nvidia-smi"):
    gpu = cmd("nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader").replace("\n", "; ")
if not gpu:
    try:
        import torch

        if torch.cuda.is_available():
            gpu = "; ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    except Exception:
        pass
cpu_model = ""
try:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu_model = line.split(":", 1)[1].strip()
            break
except OSError:
    pass
cpu_model = cpu_model or cmd("sysctl", "-n", "machdep.cpu.brand_string") or platform.processor() or platform.machine()
usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
commit = cmd("git", "describe", "--always", "--dirty", "--abbrev=12")
info = {
    "gpu": gpu or None,
    "cpu_model": cpu_model,
    "cpu_count": os.cpu_count(),
    "cpus_usable": usable,
    "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
    "os": platform.platform(),
    "python": platform.python_version(),
    **{name: version(name) for name in ["torch", "tensordict", "gymnasium", "envpool", "mujoco", "numpy"]},
    "git_commit": commit or "unknown",
    "jobs": int(os.environ["MACHINE_JOBS"]),  # runs at once; with more than one, each its own cores and GPU:
    "cpu_sets": os.environ["MACHINE_CPU_SETS"].split() or None,  # run slot k's cores (taskset)
    "gpus": os.environ["MACHINE_GPUS"].split() or None,  # the GPUs the slots take in turn (CUDA_VISIBLE_DEVICES)
}
(out / "machine.json").write_text(json.dumps(info, indent=2) + "\n")
(out / "machine.md").write_text("# Machine\n\n" + "".join(f"- {k}: {'none' if v is None else v}\n" for k, v in info.items()))
print(f"run.sh: machine: {info['gpu'] or 'no GPU'}; {cpu_model}, {os.cpu_count()} cores; torch {info['torch']}")
PY
}
record_machine || echo "run.sh: warning: could not record the machine" >&2

# ---------------------------------------------------------------------------------------------------------------
# The plan: one row per run (its folder, its log, the command as a reader types it, the command itself quoted for
# bash), then the runs: one at a time, --jobs N at once, or as the tasks of a Slurm job array.
P_ALGO=() P_VARIANT=() P_SEED=() P_RUNDIR=() P_LOG=() P_SHOWN=() P_CMD=()
if [ -n "$RUN_TASK" ]; then # a Slurm task reads the plan that --slurm wrote
    while IFS=$'\t' read -r _ a v s rundir log shown quoted; do
        P_ALGO+=("$a") P_VARIANT+=("$v") P_SEED+=("$s") P_RUNDIR+=("$rundir") P_LOG+=("$log") P_SHOWN+=("$shown") P_CMD+=("$quoted")
    done < <(tail -n +2 "$OUT/slurm/plan.${RUN_TASK%%:*}.tsv")
else
    for a in "${RUN_ALGOS[@]}"; do
        for v in "${RUN_VARIANTS[@]}"; do
            for s in "${RUN_SEEDS[@]}"; do
                name="${a}__${v}__seed${s}" k=1
                log="logs/$name.log" rundir="runs/$a/$v/seed$s"
                while [ -e "$OUT/$log" ] || [ -e "$OUT/$rundir" ] || in_list "$log" "${P_LOG[*]-} $(cut -f6 "$OUT"/slurm/plan.*.tsv 2>/dev/null)"; do
                    # --append of a run made before (or planned in a Slurm array that has not run yet): keep both
                    k=$((k + 1)) log="logs/$name.$k.log" rundir="runs/$a/$v/seed$s.$k"
                done
                budget=()
                if [ "$QUICK" = 1 ]; then read -r -a budget <<<"$(quick_flags "$a")"; fi
                if [ -n "$TOTAL_TIMESTEPS" ]; then budget+=(--total-timesteps "$TOTAL_TIMESTEPS"); fi
                read -r -a vflags <<<"$(variant_flags "$v")"
                cmd=("$PYTHON" "$SCRIPTS_DIR/$(variant_file "$a" "$v")" --output-dir "$OUT/$rundir" --seed "$s" ${vflags[@]+"${vflags[@]}"}
                    ${budget[@]+"${budget[@]}"} ${EXTRA[@]+"${EXTRA[@]}"})
                shown="${cmd[*]:1}" # as a reader would type it: python scripts/..., paths relative to the out dir
                shown="python ${shown//$'\t'/ }"
                shown="${shown//"$OUT"\//}"
                shown="${shown//"$ROOT"\//}"
                P_ALGO+=("$a") P_VARIANT+=("$v") P_SEED+=("$s") P_RUNDIR+=("$rundir") P_LOG+=("$log") P_SHOWN+=("$shown")
                P_CMD+=("$(printf '%q ' "${cmd[@]}")")
            done
        done
    done
fi
TOTAL=${#P_CMD[@]}

run_one() { # index record cpus gpu: one run of the plan, its runs.tsv row appended to record (a file per Slurm task)
    local i=$1 record=$2 cpus=$3 gpu=$4 start=$SECONDS rc summary summary_rel status info pin=()
    local a=${P_ALGO[$1]} v=${P_VARIANT[$1]} s=${P_SEED[$1]} log=${P_LOG[$1]} rundir=${P_RUNDIR[$1]} shown=${P_SHOWN[$1]}
    local name="${a}__${v}__seed${s}" file="$SCRIPTS_DIR/$(variant_file "$a" "$v")" where=""
    eval "local cmd=(${P_CMD[$1]})"
    if [ ! -f "$file" ]; then
        echo "[$((i + 1))/$TOTAL] $name: MISSING: $file does not exist (not written yet?); recorded, going on" >&2
        printf '%s\t%s\t%s\tmissing\t\t\t\t%s\n' "$a" "$v" "$s" "$shown" >>"$record"
        return 1
    fi
    if [ -n "$cpus" ]; then pin=(env "OMP_NUM_THREADS=$(($(tr -cd , <<<"$cpus" | wc -c) + 1))" taskset -c "$cpus") where=" [cores $cpus]"; fi
    if [ -n "$gpu" ]; then pin=(env "CUDA_VISIBLE_DEVICES=$gpu" ${pin[@]+"${pin[@]}"}) where+=" [GPU $gpu]"; fi
    echo "[$((i + 1))/$TOTAL] $name: $shown$where"
    : >"$OUT/$log"
    ${pin[@]+"${pin[@]}"} "${cmd[@]}" >"$OUT/$log" 2>&1 </dev/null
    rc=$?
    summary="$(grep -E 'summary\.json$' "$OUT/$log" | tail -n 1)" # the last line a script prints is its path
    if [ -z "$summary" ] || [ ! -f "$summary" ]; then
        summary="$(find "$OUT/$rundir" -name summary.json 2>/dev/null | sort | tail -n 1)"
    fi
    summary_rel=""
    [ -n "$summary" ] && [ -f "$summary" ] && summary_rel="${summary#"$OUT"/}"
    if [ "$INTERRUPTED" = 1 ] || [ "$rc" = 130 ]; then
        status=interrupted
    elif [ "$rc" = 0 ] && [ -n "$summary_rel" ]; then
        status=finished
    else
        status=failed
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$a" "$v" "$s" "$status" "$rc" "$summary_rel" "$log" "$shown" >>"$record"
    if [ "$status" = finished ]; then
        info="$("$PYTHON" -c 'import json, sys; s = json.load(open(sys.argv[1])); r = s.get("episodic_return")
print("%.1f steps/s, return %s" % (s.get("sps") or 0, "-" if r is None else "%.1f" % r))' "$summary" 2>/dev/null)"
        echo "    $name finished in $((SECONDS - start)) s: $info"
    else
        echo "    $name: $status (exit $rc) after $((SECONDS - start)) s; end of $OUT/$log:" >&2
        tail -n 5 "$OUT/$log" | sed 's/^/    | /' >&2
    fi
    case "$status" in finished) return 0 ;; interrupted) return 130 ;; *) return 1 ;; esac
}

INTERRUPTED=0
FAILED=0
count() { # a run's exit status from run_one
    case "$1" in 0) ;; 130) INTERRUPTED=1 ;; *) FAILED=$((FAILED + 1)) ;; esac
}

if [ -n "$RUN_TASK" ]; then # one task of the array: its own record file, no aggregation (the dependent job does it)
    i=${RUN_TASK#*:}
    [ "$i" -lt "$TOTAL" ] || die "--run-task: no run $i in $OUT/slurm/plan.${RUN_TASK%%:*}.tsv"
    mkdir -p "$OUT/tasks"
    record="$OUT/tasks/${RUN_TASK/:/.}.tsv"
    # what stays if Slurm kills the task (its time limit, scancel, a node lost): the run as failed; run_one replaces it
    printf '%s\t%s\t%s\tfailed\t\t\t%s\t%s\n' "${P_ALGO[$i]}" "${P_VARIANT[$i]}" "${P_SEED[$i]}" "${P_LOG[$i]}" "${P_SHOWN[$i]}" >"$record"
    run_one "$i" "$record.new" "" ""
    rc=$?
    mv "$record.new" "$record"
    exit $rc
fi

if [ "$SLURM" = 1 ]; then # submit: a job array of the runs (at most --jobs at once), then the aggregation after them
    mkdir -p "$OUT/slurm"
    plan=1 # one plan per submission: an --append never rewrites the plan of an array that may still be pending
    while [ -e "$OUT/slurm/plan.$plan.tsv" ]; do plan=$((plan + 1)); done
    { printf 'index\talgorithm\tvariant\tseed\trundir\tlog\tcommand\tquoted\n'
      for ((i = 0; i < TOTAL; i++)); do
          printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "${P_ALGO[$i]}" "${P_VARIANT[$i]}" "${P_SEED[$i]}" "${P_RUNDIR[$i]}" "${P_LOG[$i]}" "${P_SHOWN[$i]}" "${P_CMD[$i]}"
      done; } >"$OUT/slurm/plan.$plan.tsv"
    read -r -a sargs <<<"$SLURM_ARGS"
    self="PYTHON=$(printf %q "$PYTHON") bash $(printf %q "$ROOT/run.sh")" # this run.sh, with its interpreter, on a node
    array=$(sbatch --parsable --job-name=run.sh --array="0-$((TOTAL - 1))%$JOBS" --output="$OUT/slurm/%A_%a.out" ${sargs[@]+"${sargs[@]}"} \
        --wrap="$self --out $(printf %q "$OUT") --run-task $plan:\$SLURM_ARRAY_TASK_ID") ||
        die "--slurm: sbatch refused the job array (see its message above)"
    publish_flag=""
    [ -n "$PUBLISH" ] && publish_flag=" --publish $(printf %q "$PUBLISH")"
    agg=$(sbatch --parsable --job-name=run.sh-aggregate --dependency="afterany:${array%%;*}" --output="$OUT/slurm/aggregate.out" \
        ${sargs[@]+"${sargs[@]}"} --wrap="$self --aggregate $(printf %q "$OUT")$publish_flag") ||
        die "--slurm: sbatch refused the aggregation job (the array ${array%%;*} is submitted: scancel it or aggregate by hand)"
    echo "run.sh: submitted $TOTAL runs as the job array ${array%%;*} (at most $JOBS at once) and the aggregation job ${agg%%;*}"
    echo "run.sh: watch them with: squeue -j ${array%%;*},${agg%%;*}   (each run's log: $OUT/logs/; Slurm's: $OUT/slurm/)"
    echo "run.sh: when ${agg%%;*} ends, the results are in $OUT/results.md"
    exit 0
fi

[ -e "$OUT/runs.tsv" ] || printf '%s\n' "$RUNS_HEADER" >"$OUT/runs.tsv"
echo "run.sh: $TOTAL runs into $OUT" $([ "$JOBS" -gt 1 ] && echo "($JOBS at once)")
if [ "$JOBS" = 1 ]; then # one at a time, in the foreground: Ctrl-C reaches the running script
    trap 'INTERRUPTED=1' INT TERM # the running script gets the Ctrl-C too and writes its summary as "interrupted"
    gpu=""
    [ -n "$GPUS" ] && gpu=${RUN_GPUS[0]}
    for ((i = 0; i < TOTAL; i++)); do
        [ "$INTERRUPTED" = 0 ] || break
        run_one "$i" "$OUT/runs.tsv" "" "$gpu"
        count $?
    done
else # a pool of --jobs slots, each run in its own process group: Ctrl-C is passed on to every running one
    set -m
    declare -A SLOT_OF=()
    FREE=()
    for ((k = 0; k < JOBS; k++)); do FREE+=("$k"); done
    trap 'INTERRUPTED=1; for p in "${!SLOT_OF[@]}"; do kill -INT -- "-$p" 2>/dev/null; done' INT TERM
    reap() { # wait for a run of the pool to end: free its slot, count it
        local pid=""
        wait -n -p pid "${!SLOT_OF[@]}"
        local rc=$?
        [ -n "${pid:-}" ] || return 0 # a signal woke the wait (it leaves pid unset)
        FREE+=("${SLOT_OF[$pid]}")
        unset "SLOT_OF[$pid]"
        count "$rc"
    }
    for ((i = 0; i < TOTAL; i++)); do
        while [ ${#SLOT_OF[@]} -ge "$JOBS" ]; do reap; done
        [ "$INTERRUPTED" = 0 ] || break
        slot=${FREE[0]}
        FREE=("${FREE[@]:1}")
        gpu=""
        [ ${#RUN_GPUS[@]} -gt 0 ] && gpu=${RUN_GPUS[$((slot % ${#RUN_GPUS[@]}))]}
        (trap : INT; run_one "$i" "$OUT/runs.tsv" "${CPU_SETS[$slot]-}" "$gpu") & # the row is written even after a Ctrl-C
        SLOT_OF[$!]=$slot
    done
    while [ ${#SLOT_OF[@]} -gt 0 ]; do reap; done
    set +m
fi
trap - INT TERM

aggregate "$OUT" || FAILED=$((FAILED + 1))
if [ -n "$PUBLISH" ]; then publish "$OUT" "$PUBLISH" || FAILED=$((FAILED + 1)); fi
if [ "$INTERRUPTED" = 1 ]; then
    echo "run.sh: interrupted; kept what finished in $OUT" >&2
    exit 130
fi
if [ "$FAILED" -gt 0 ]; then
    echo "run.sh: $FAILED of $TOTAL runs did not finish (see $OUT/results.md)" >&2
    exit 1
fi
echo "run.sh: all $TOTAL runs finished; results in $OUT/results.md"
