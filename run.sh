#!/usr/bin/env bash
# run.sh: the benchmark driver. Runs the scripts' variants x seeds one at a time, then gathers every run's
# summary.json into results.csv, writes results.md (steps/s, speed-up, final return) and PNG plots, with the
# machine and versions beside them. `./run.sh --help` explains the options.
#
# Everything is in this one file: the driver in bash, the machine record and the aggregation in Python heredocs.
set -uo pipefail # no -e: a run that fails is recorded and the others go on

ALGOS="ppo_atari ppo_continuous_action sac_continuous_action td3_continuous_action dqn"
VARIANTS="baseline fast compile compile_cudagraphs"
DEFAULT_SEEDS="1,2,3"
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
        *) echo "" ;;
    esac
}

usage() {
    cat <<EOF
Usage: ./run.sh [options] [-- extra flags for every script]

Runs the benchmark matrix, one run at a time: for each algorithm, each variant, each seed:
  baseline            scripts/<algo>.py
  fast                scripts/<algo>_torchcompile.py
  compile             scripts/<algo>_torchcompile.py --compile
  compile_cudagraphs  scripts/<algo>_torchcompile.py --compile --cudagraphs
With no options: all algorithms, all four variants, seeds ${DEFAULT_SEEDS}, the scripts' default budgets
(the full reproduction; hours on a GPU, much longer on a CPU).

Options:
  --quick                 tiny budgets (the table at the top of run.sh) and one seed (${QUICK_SEEDS}): a smoke test
                          of every run, minutes on a 2-core CPU; its numbers are not representative
  --scripts A,B           algorithms to run (default: all): ${ALGOS// /, }
  --variants V,W          variants to run (default: all): ${VARIANTS// /, }
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
  -h, --help              this help
  -- FLAGS...             passed to every script after run.sh's own flags (the last of a repeated flag wins),
                          e.g. -- --no-cuda   or   -- --env-id Hopper-v4

What it leaves in DIR:
  machine.json, machine.md  GPU or none, CPU model and cores, Python and library versions, git commit
  bench.json                how run.sh was called (budgets, seeds, variants, extra flags)
  runs.tsv                  one row per attempted run: status, exit code, summary.json, log, command
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
        --scripts | --variants | --seeds | --total-timesteps | --out | --aggregate | --publish)
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
# Aggregation: summary.json and metrics.csv files -> results.csv, results.md, PNGs. Reads runs.tsv where there is
# one (it knows the runs that left no summary.json) and also every summary.json found under the folder.
aggregate() { # dir
    MPLBACKEND=Agg "$PYTHON" - "$1" <<'PY'
import csv
import json
import math
import pathlib
import statistics
import sys

out = pathlib.Path(sys.argv[1]).resolve()
ALGOS = ["ppo_atari", "ppo_continuous_action", "sac_continuous_action", "td3_continuous_action", "dqn"]
VARIANTS = ["baseline", "fast", "compile", "cudagraphs", "compile_cudagraphs"]
SUFFIX = "_torchcompile"


def algorithm_of(script):
    return script[: -len(SUFFIX)] if script.endswith(SUFFIX) else script


def variant_of(summary):
    if not summary.get("script", "").endswith(SUFFIX):
        return "baseline"
    c, g = bool(summary.get("compile")), bool(summary.get("cudagraphs"))
    return {(False, False): "fast", (True, False): "compile", (False, True): "cudagraphs", (True, True): "compile_cudagraphs"}[(c, g)]


def rel(path):
    try:
        return str(pathlib.Path(path).resolve().relative_to(out))
    except ValueError:
        return str(path)


def log_tail(path, n=20):
    try:
        lines = pathlib.Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return []
    # progress-bar redraws use \r: keep what the terminal would show last on each line
    return [line.split("\r")[-1].rstrip() for line in lines][-n:]


def load_summary(path):
    try:
        return json.loads(pathlib.Path(path).read_text())
    except (OSError, ValueError) as e:
        return {"_error": f"unreadable summary.json: {e}"}


SUMMARY_FIELDS = ["env_id", "sps", "episodic_return", "episodes", "global_step", "wall_time_s", "warmup_s", "compile",
                  "cudagraphs", "device", "gpu_name", "cpu_count", "torch_version", "script"]
records, seen = [], set()


def from_summary(rec, path):
    s = load_summary(path)
    seen.add(pathlib.Path(path).resolve())
    rec["run_dir"] = rel(pathlib.Path(path).parent)
    if "_error" in s:
        rec["status"], rec["error"] = "failed", s["_error"]
        return rec
    for k in SUMMARY_FIELDS:
        rec[k] = s.get(k)
    rec["total_timesteps"] = (s.get("args") or {}).get("total_timesteps")
    rec.setdefault("algorithm", algorithm_of(s.get("script", "?")))
    rec.setdefault("variant", variant_of(s))
    rec.setdefault("seed", s.get("seed"))
    rec.setdefault("status", s.get("status") or "unknown")
    return rec


manifest = out / "runs.tsv"
if manifest.is_file():
    with open(manifest, newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            rec = {"algorithm": row["algorithm"], "variant": row["variant"], "seed": int(row["seed"]), "status": row["status"],
                   "exit_code": row["exit_code"], "log": row["log"], "command": row["command"]}
            if row["summary"] and (out / row["summary"]).is_file():
                from_summary(rec, out / row["summary"])
            records.append(rec)
for path in sorted(out.rglob("summary.json")):
    if path.resolve() not in seen:
        records.append(from_summary({}, path))

for rec in records:
    if rec["status"] != "finished" and not rec.get("error"):
        if rec["status"] == "missing":
            rec["error"] = "script not found: " + rec.get("command", "")
        else:
            tail = [l for l in log_tail(out / rec["log"]) if l.strip()] if rec.get("log") else []
            rec["error"] = tail[-1][:300] if tail else ""


def order(rec):
    a, v = rec["algorithm"], rec["variant"]
    return (ALGOS.index(a) if a in ALGOS else len(ALGOS), a, VARIANTS.index(v) if v in VARIANTS else len(VARIANTS), v,
            rec.get("seed") if isinstance(rec.get("seed"), int) else 0)


records.sort(key=order)

# ---- results.csv
COLUMNS = ["algorithm", "variant", "seed", "status", "env_id", "sps", "episodic_return", "episodes", "global_step",
           "total_timesteps", "wall_time_s", "warmup_s", "compile", "cudagraphs", "device", "gpu_name", "cpu_count",
           "torch_version", "script", "exit_code", "error", "run_dir", "log", "command"]
with open(out / "results.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(COLUMNS)
    for rec in records:
        w.writerow(["" if rec.get(c) is None else rec.get(c) for c in COLUMNS])


# ---- statistics per algorithm and variant
def fmt_sps(x, ref=None):  # one precision per row, set by its median
    return f"{x:,.0f}" if (x if ref is None else ref) >= 100 else f"{x:,.1f}"


def fmt_ret(x):
    return f"{x:,.1f}"


groups = {}
for rec in records:
    groups.setdefault((rec["algorithm"], rec["variant"]), []).append(rec)
stats = {}
for key, recs in groups.items():
    done = [r for r in recs if r["status"] == "finished"]
    sps = [float(r["sps"]) for r in done if r.get("sps") is not None]
    rets = [float(r["episodic_return"]) for r in done if r.get("episodic_return") is not None]
    steps = sorted({r["total_timesteps"] for r in done if r.get("total_timesteps") is not None})
    stats[key] = {
        "runs": len(recs), "finished": len(done), "env": sorted({r["env_id"] for r in done if r.get("env_id")}),
        "sps": sps, "median": statistics.median(sps) if sps else None, "rets": rets, "steps": steps,
        "ret_mean": statistics.fmean(rets) if rets else None, "ret_std": statistics.stdev(rets) if len(rets) >= 2 else None,
    }
for (a, v), st in stats.items():
    base = stats.get((a, "baseline"), {}).get("median")
    st["speedup"] = st["median"] / base if st["median"] is not None and base else None

# ---- plots
algorithms = []
for rec in records:
    if rec["algorithm"] not in algorithms:
        algorithms.append(rec["algorithm"])
machine = {}
if (out / "machine.json").is_file():
    machine = json.loads((out / "machine.json").read_text())
bench = {}
if (out / "bench.json").is_file():
    bench = json.loads((out / "bench.json").read_text())


def device_label():
    if machine:
        return machine.get("gpu") or f"CPU only, {machine.get('cpu_model', '?')}, {machine.get('cpu_count', '?')} cores"
    gpus = sorted({r["gpu_name"] for r in records if r.get("gpu_name")})
    if gpus:
        return ", ".join(gpus)
    cpus = sorted({str(r["cpu_count"]) for r in records if r.get("cpu_count")})
    return f"CPU, {'/'.join(cpus) or '?'} cores"


plots = {}
try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    plt = None
    print("run.sh: matplotlib is not installed (pip install -r requirements/requirements-dev.txt): no plots", file=sys.stderr)

if plt is not None:
    colors = {v: plt.get_cmap("tab10")(i) for i, v in enumerate(VARIANTS)}
    for a in algorithms:
        vs = sorted({v for (aa, v) in stats if aa == a}, key=lambda v: (VARIANTS.index(v) if v in VARIANTS else 99, v))
        # steps/s: one bar per variant (median), whiskers (min..max), dots (seeds)
        fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(vs), 4))
        for i, v in enumerate(vs):
            st = stats[(a, v)]
            if st["median"] is None:
                ax.text(i, 0, "no finished run", ha="center", va="bottom", rotation=90, fontsize=8)
                continue
            lo, hi = min(st["sps"]), max(st["sps"])
            ax.bar(i, st["median"], color=colors.get(v, "grey"), alpha=0.8,
                   yerr=[[st["median"] - lo], [hi - st["median"]]], capsize=4)
            ax.scatter([i] * len(st["sps"]), st["sps"], color="black", s=10, zorder=3)
            if st["speedup"] is not None:
                ax.annotate(f"{st['speedup']:.2f}x", (i, hi), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=9)
        ax.set_xticks(range(len(vs)))
        ax.set_xticklabels(vs, rotation=15)
        ax.set_ylabel("steps/s (median, range over seeds)")
        ax.set_ylim(bottom=0)
        ax.margins(y=0.15)
        ax.set_title(f"{a}\n{device_label()}", fontsize=9)
        fig.tight_layout()
        fig.savefig(out / f"sps_{a}.png", dpi=100)
        plt.close(fig)
        # learning curves: return against steps and against wall time, one line per run
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        labelled, any_points = set(), False
        for rec in records:
            if rec["algorithm"] != a or not rec.get("run_dir"):
                continue
            path = out / rec["run_dir"] / "metrics.csv"
            if not path.is_file():
                continue
            xs, ts, ys = [], [], []
            with open(path, newline="") as f:
                for row in csv.DictReader(f):
                    try:
                        y = float(row.get("episodic_return") or "nan")
                        x = float(row["global_step"])
                        t = float(row.get("wall_time_s") or "nan")
                    except (KeyError, ValueError):
                        continue
                    if not math.isnan(y):
                        xs.append(x), ts.append(t), ys.append(y)
            if not ys:
                continue
            any_points = True
            v = rec["variant"]
            kw = dict(color=colors.get(v, "grey"), alpha=0.8, lw=1.2, label=None if v in labelled else v,
                      marker="." if len(ys) < 30 else None)
            labelled.add(v)
            axes[0].plot(xs, ys, **kw)
            if not all(math.isnan(t) for t in ts):
                axes[1].plot(ts, ys, **{**kw, "label": None})
        axes[0].set_xlabel("environment steps")
        axes[1].set_xlabel("wall time (s)")
        for axis in axes:
            axis.set_ylabel("episodic return (last 20 episodes)")
            axis.grid(alpha=0.3)
            if not any_points:
                axis.text(0.5, 0.5, "no episode finished", ha="center", va="center", transform=axis.transAxes)
        if labelled:
            axes[0].legend(fontsize=8)
        fig.suptitle(f"{a}: {device_label()}", fontsize=9)
        fig.tight_layout()
        fig.savefig(out / f"curves_{a}.png", dpi=100)
        plt.close(fig)
        plots[a] = [f"sps_{a}.png", f"curves_{a}.png"]

# ---- results.md
n_fin = sum(r["status"] == "finished" for r in records)
by_status = {}
for r in records:
    by_status[r["status"]] = by_status.get(r["status"], 0) + 1
md = ["# Benchmark results", ""]
md.append(f"{len(records)} runs: " + ", ".join(f"{n} {s}" for s, n in sorted(by_status.items())) + ".")
if bench.get("command"):
    md.append(f"Made with `{bench['command']}`" + (f", started {bench['started']}" if bench.get("started") else "") + ".")
md.append("")
if bench.get("quick"):
    md.append("**Budgets: `--quick`**, tiny runs for a smoke test (flags below); these steps/s and returns are NOT "
              "representative of the default budgets.")
elif bench.get("total_timesteps") or bench.get("extra"):
    md.append("**Budgets: not the defaults**: " + " ".join(filter(None, [
        f"--total-timesteps {bench['total_timesteps']}" if bench.get("total_timesteps") else "",
        " ".join(bench.get("extra") or [])])) + " (the steps column gives each run's budget).")
elif bench:
    md.append("Budgets: the scripts' defaults.")
if bench.get("budgets"):
    for a, flags in bench["budgets"].items():
        if flags:
            md.append(f"- `{a}`: `{flags}`")
md.append("")
md.append("## Machine")
md.append("")
if machine:
    for k, v in machine.items():
        md.append(f"- {k}: {v if v not in (None, '') else 'none'}")
else:
    md.append(f"- not recorded (no machine.json); the runs say: {device_label()}")
md.append("")
md.append("## Steps per second and final return")
md.append("")
md.append("| algorithm | variant | env | steps | runs | steps/s median | steps/s range | speed-up | episodic return |")
md.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for a in algorithms:
    for (aa, v), st in sorted(((k, s) for k, s in stats.items() if k[0] == a),
                              key=lambda kv: (VARIANTS.index(kv[0][1]) if kv[0][1] in VARIANTS else 99, kv[0][1])):
        med = fmt_sps(st["median"]) if st["median"] is not None else "–"
        rng = f"{fmt_sps(min(st['sps']), st['median'])}–{fmt_sps(max(st['sps']), st['median'])}" if st["sps"] else "–"
        spd = f"{st['speedup']:.2f}x" if st["speedup"] is not None else "–"
        if st["ret_mean"] is None:
            ret = "–"
        elif st["ret_std"] is None:
            ret = f"{fmt_ret(st['ret_mean'])} (1 run)"
        else:
            ret = f"{fmt_ret(st['ret_mean'])} ± {fmt_ret(st['ret_std'])}"
        if st["rets"] and len(st["rets"]) < st["finished"]:
            ret += f" ({len(st['rets'])} of {st['finished']} runs had a finished episode)"
        steps = "/".join(f"{s:,}" for s in st["steps"]) or "–"
        md.append(f"| {a} | {v} | {', '.join(st['env']) or '–'} | {steps} | {st['finished']}/{st['runs']} | {med} | {rng} "
                  f"| {spd} | {ret} |")
md.append("")
md.append("- steps/s: environment steps per second from the end of the burn-in (compilation, graph capture) to the end of "
          "each run; median and range (min–max) over the seeds that finished.")
md.append("- speed-up: the variant's median steps/s over the baseline's, same algorithm, same machine, same sitting.")
md.append("- episodic return: each run's mean of its last 20 episodes at the end; mean ± sample standard deviation "
          "over seeds.")
md.append("- runs: finished / attempted. Variants: baseline = `<algo>.py`; fast = `<algo>_torchcompile.py`; "
          "compile = fast `--compile`; compile_cudagraphs = fast `--compile --cudagraphs`.")
md.append("")
if plots:
    md.append("## Plots")
    md.append("")
    for a, files in plots.items():
        md.append(f"### {a}")
        md.append("")
        for f in files:
            md.append(f"![{f}]({f})")
        md.append("")
bad = [r for r in records if r["status"] != "finished"]
if bad:
    md.append("## Runs that did not finish")
    md.append("")
    for r in bad:
        md.append(f"### {r['algorithm']} {r['variant']} seed {r.get('seed')}: {r['status']}"
                  + (f" (exit {r['exit_code']})" if r.get("exit_code") not in (None, "") else ""))
        md.append("")
        if r.get("command"):
            md.append(f"`{r['command']}`")
            md.append("")
        tail = log_tail(out / r["log"]) if r.get("log") else []
        if tail:
            md.append(f"End of `{r['log']}`:")
            md.append("")
            md.append("```text")
            md.extend(line.replace("```", "'''") for line in tail)
            md.append("```")
        elif r.get("error"):
            md.append(r["error"])
        md.append("")
(out / "results.md").write_text("\n".join(md) + "\n")
print(f"run.sh: {len(records)} runs ({n_fin} finished) -> {out / 'results.md'}")
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
    in_list "$v" "$VARIANTS" || die "--variants: unknown variant '$v' (allowed: ${VARIANTS// /, })"
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
[ -n "$OUT" ] || OUT="$ROOT/bench/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT" || die "--out: cannot create $OUT"
OUT="$(cd "$OUT" && pwd)"
if [ "$APPEND" = 0 ] && [ -e "$OUT/runs.tsv" ]; then
    die "--out: $OUT already holds a benchmark (runs.tsv); choose another folder, add to it with --append, or re-read it with --aggregate $OUT"
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
BENCH_QUICK="$QUICK" BENCH_TT="$TOTAL_TIMESTEPS" BENCH_CMD="${CMDLINE% }" BENCH_BUDGETS="$budgets_json" \
    BENCH_SEEDS="${RUN_SEEDS[*]}" BENCH_VARIANTS="${RUN_VARIANTS[*]}" \
    "$PYTHON" - "$OUT" "${EXTRA[@]}" <<'PY' || die "cannot write bench.json with $PYTHON"
import datetime, json, os, pathlib, sys
out = pathlib.Path(sys.argv[1])
budgets = dict(line.split("=", 1) for line in os.environ["BENCH_BUDGETS"].splitlines() if line)
new = {
    "command": os.environ["BENCH_CMD"], "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    "quick": os.environ["BENCH_QUICK"] == "1", "total_timesteps": int(os.environ["BENCH_TT"]) if os.environ["BENCH_TT"] else None,
    "extra": sys.argv[2:], "budgets": budgets, "seeds": [int(s) for s in os.environ["BENCH_SEEDS"].split()],
    "variants": os.environ["BENCH_VARIANTS"].split(), "python": sys.executable,
}
if (out / "bench.json").is_file():  # --append: one record for all the calls
    old = json.load(open(out / "bench.json"))
    new = {**old, "command": f"{old['command']}; then {new['command']}", "quick": old["quick"] or new["quick"],
           "total_timesteps": new["total_timesteps"] or old["total_timesteps"], "extra": old["extra"] or new["extra"],
           "budgets": {**old["budgets"], **new["budgets"]}, "seeds": sorted(set(old["seeds"]) | set(new["seeds"]))}
json.dump(new, open(out / "bench.json", "w"), indent=2)
PY

"$PYTHON" - "$OUT" "$ROOT" <<'PY' || echo "run.sh: warning: could not record the machine" >&2
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
}
(out / "machine.json").write_text(json.dumps(info, indent=2) + "\n")
(out / "machine.md").write_text("# Machine\n\n" + "".join(f"- {k}: {'none' if v is None else v}\n" for k, v in info.items()))
print(f"run.sh: machine: {info['gpu'] or 'no GPU'}; {cpu_model}, {os.cpu_count()} cores; torch {info['torch']}")
PY

# ---------------------------------------------------------------------------------------------------------------
# The runs, one at a time.
INTERRUPTED=0
trap 'INTERRUPTED=1' INT TERM # the running script gets the Ctrl-C too and writes its summary as "interrupted"
[ -e "$OUT/runs.tsv" ] || printf 'algorithm\tvariant\tseed\tstatus\texit_code\tsummary\tlog\tcommand\n' >"$OUT/runs.tsv"
TOTAL=$((${#RUN_ALGOS[@]} * ${#RUN_VARIANTS[@]} * ${#RUN_SEEDS[@]}))
N=0
FAILED=0
echo "run.sh: $TOTAL runs into $OUT"
for a in "${RUN_ALGOS[@]}"; do
    for v in "${RUN_VARIANTS[@]}"; do
        for s in "${RUN_SEEDS[@]}"; do
            [ "$INTERRUPTED" = 0 ] || break 3
            N=$((N + 1))
            name="${a}__${v}__seed${s}"
            file="$SCRIPTS_DIR/$(variant_file "$a" "$v")"
            log="logs/$name.log"
            rundir="runs/$a/$v/seed$s"
            k=1
            while [ -e "$OUT/$log" ] || [ -e "$OUT/$rundir" ]; do # --append of a run made before: keep both
                k=$((k + 1))
                log="logs/$name.$k.log"
                rundir="runs/$a/$v/seed$s.$k"
            done
            budget=()
            if [ "$QUICK" = 1 ]; then read -r -a budget <<<"$(quick_flags "$a")"; fi
            if [ -n "$TOTAL_TIMESTEPS" ]; then budget+=(--total-timesteps "$TOTAL_TIMESTEPS"); fi
            read -r -a vflags <<<"$(variant_flags "$v")"
            cmd=("$PYTHON" "$file" --output-dir "$OUT/$rundir" --seed "$s" ${vflags[@]+"${vflags[@]}"}
                ${budget[@]+"${budget[@]}"} ${EXTRA[@]+"${EXTRA[@]}"})
            shown="${cmd[*]:1}" # as a reader would type it: python scripts/..., paths relative to the out dir
            shown="python ${shown//$'\t'/ }"
            shown="${shown//"$OUT"\//}"
            shown="${shown//"$ROOT"\//}"
            if [ ! -f "$file" ]; then
                echo "[$N/$TOTAL] $name: MISSING: $file does not exist (not written yet?); recorded, going on" >&2
                printf '%s\t%s\t%s\tmissing\t\t\t\t%s\n' "$a" "$v" "$s" "$shown" >>"$OUT/runs.tsv"
                FAILED=$((FAILED + 1))
                continue
            fi
            echo "[$N/$TOTAL] $name: $shown"
            start=$SECONDS
            "${cmd[@]}" >"$OUT/$log" 2>&1 </dev/null
            rc=$?
            summary="$(grep -E 'summary\.json$' "$OUT/$log" | tail -n 1)" # the last line a script prints is its path
            if [ -z "$summary" ] || [ ! -f "$summary" ]; then
                summary="$(find "$OUT/$rundir" -name summary.json 2>/dev/null | sort | tail -n 1)"
            fi
            summary_rel=""
            [ -n "$summary" ] && [ -f "$summary" ] && summary_rel="${summary#"$OUT"/}"
            if [ "$INTERRUPTED" = 1 ] || [ "$rc" = 130 ]; then
                status=interrupted
                INTERRUPTED=1
            elif [ "$rc" = 0 ] && [ -n "$summary_rel" ]; then
                status=finished
            else
                status=failed
                FAILED=$((FAILED + 1))
            fi
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$a" "$v" "$s" "$status" "$rc" "$summary_rel" "$log" "$shown" >>"$OUT/runs.tsv"
            if [ "$status" = finished ]; then
                info="$("$PYTHON" -c 'import json, sys; s = json.load(open(sys.argv[1])); r = s.get("episodic_return")
print("%.1f steps/s, return %s" % (s.get("sps") or 0, "-" if r is None else "%.1f" % r))' "$summary" 2>/dev/null)"
                echo "    finished in $((SECONDS - start)) s: $info"
            else
                echo "    $status (exit $rc) after $((SECONDS - start)) s; end of $OUT/$log:" >&2
                tail -n 5 "$OUT/$log" | sed 's/^/    | /' >&2
            fi
        done
    done
done
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
