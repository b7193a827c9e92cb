#!/usr/bin/env bash
# run.sh: the benchmark driver. Runs the scripts' variants x seeds one at a time, then gathers every run's
# summary.json into results.csv, writes results.md (steps/s, speed-up, final return) and PNG plots, with the
# machine and versions beside them. `./run.sh --help` explains the options.
#
# The driver is this bash file; its Python (bench.json, the machine record, the results) is tools/aggregate.py.
set -uo pipefail # no -e: a run that fails is recorded and the others go on

# The matrix, defined here once: --help, the checks of --scripts and --variants, the plan and the tables' order (which
# aggregate.py is given) all come from these two tables.
#
# The algorithms, in the tables' order, each with its --quick budget: tiny but valid runs, so that the whole matrix is
# a smoke test that finishes in minutes on a 2-core CPU. Each goes past the burn-in and the start of learning, so
# steps/s is measured and the (compiled) update runs; the numbers they give are NOT representative of the full budgets.
# PPO Atari: 2 iterations of 8 envs x 128 steps, the first one burn-in. PPO continuous: 4 iterations of 512 steps
# (1 env), the first one burn-in. SAC and TD3: 200 updates after 1000 random steps, 5 updates of burn-in. DQN: 200
# updates (one per 10 steps) after 10000 steps, 5 updates of burn-in.
ALGORITHM_TABLE='
ppo_atari              --total-timesteps 2048 --num-envs 8 --num-steps 128 --measure-burnin 1
ppo_continuous_action  --total-timesteps 2048 --num-steps 512 --measure-burnin 1
sac_continuous_action  --total-timesteps 1200 --learning-starts 1000 --measure-burnin 5
td3_continuous_action  --total-timesteps 1200 --learning-starts 1000 --measure-burnin 5
dqn                    --total-timesteps 12000 --measure-burnin 5
'
# The variants, in the tables' order: each runs scripts/<algo><file> with the flags after the file. The "default" ones
# make the matrix; "quick" ones join them under --quick; the others run only where --variants names them (also the
# quick ones). ray and multigpu are variant files of their own,
# which one algorithm has each (the plan leaves out the algorithms without one): Ray env runners (2 envs, a runner
# each; give every variant -- --num-envs N to compare them at N envs) and data-parallel PPO, under torchrun with a
# process per GPU of the run (one process without a GPU; plain python where torchrun is not installed).
VARIANT_TABLE='
baseline                            default  .py
fast                                default  _torchcompile.py
compile                             default  _torchcompile.py           --compile
cudagraphs                          other    _torchcompile.py           --cudagraphs
compile_cudagraphs                  default  _torchcompile.py           --compile --cudagraphs
compile_max_autotune_no_cudagraphs  other    _torchcompile.py           --compile --compile-mode max-autotune-no-cudagraphs
compile_reduce_overhead             other    _torchcompile.py           --compile --compile-mode reduce-overhead
compile_max_autotune                other    _torchcompile.py           --compile --compile-mode max-autotune
ray                                 quick    _ray_torchcompile.py       --num-envs 2 --env-runners 2
multigpu                            quick    _multigpu_torchcompile.py
leanrl                              peer     .py
leanrl_fast                         peer     _torchcompile.py
leanrl_compile                      peer     _torchcompile.py           --compile
leanrl_compile_cudagraphs           peer     _torchcompile.py           --compile --cudagraphs
leanrl_jax                          peer     _jax.py
'
# The peer's variants ("peer") run LeanRL's own files (the checkout --leanrl names, in the environment --leanrl-python
# names) through tools/leanrl.py, with the same flags, budgets and seeds as ours: LeanRL's leanrl/<algorithm>.py and
# leanrl/<algorithm>_torchcompile.py (its Atari files are ppo_atari_envpool*.py); leanrl_jax, its JAX file for PPO Atari,
# ppo_atari_envpool_xla_jax.py (an environment with jax, flax and optax). Only where --variants names them.
DEFAULT_SEEDS="1,2,3"
QUICK_SEEDS="1"

# The lists, space-separated, from the tables: ALGOS; VARIANTS (all), DEFAULT_VARIANTS, QUICK_VARIANTS (the default ones
# and the quick ones) and OTHER_VARIANTS (all but the default ones).
ALGOS="" VARIANTS="" DEFAULT_VARIANTS="" QUICK_VARIANTS="" OTHER_VARIANTS=""
while read -r name _; do
    [ -z "$name" ] || ALGOS+="${ALGOS:+ }$name"
done <<<"$ALGORITHM_TABLE"
while read -r name kind _ _; do
    [ -n "$name" ] || continue
    VARIANTS+="${VARIANTS:+ }$name"
    if [ "$kind" = default ]; then DEFAULT_VARIANTS+="${DEFAULT_VARIANTS:+ }$name"; else OTHER_VARIANTS+="${OTHER_VARIANTS:+ }$name"; fi
    if [ "$kind" = default ] || [ "$kind" = quick ]; then QUICK_VARIANTS+="${QUICK_VARIANTS:+ }$name"; fi
done <<<"$VARIANT_TABLE"

quick_flags() { # algorithm: its --quick budget
    local name flags
    while read -r name flags; do
        if [ "$name" = "$1" ]; then echo "$flags"; fi
    done <<<"$ALGORITHM_TABLE"
}
variant_flags() { # variant: its flags
    local name kind file flags
    while read -r name kind file flags; do
        if [ "$name" = "$1" ]; then echo "$flags"; fi
    done <<<"$VARIANT_TABLE"
}
variant_file() { # algorithm variant: its script
    local name kind file flags
    while read -r name kind file flags; do
        if [ "$name" = "$2" ]; then echo "$1$file"; fi
    done <<<"$VARIANT_TABLE"
}
own_file() { # variant: true for a variant file of its own (not every algorithm has one)
    if peer_variant "$1"; then return 1; fi
    case "$(variant_file '' "$1")" in .py | _torchcompile.py) return 1 ;; *) return 0 ;; esac
}
peer_variant() { # variant: true for one of the peer's (LeanRL's files)
    local name kind _rest
    while read -r name kind _rest; do
        if [ "$name" = "$1" ] && [ "$kind" = peer ]; then return 0; fi
    done <<<"$VARIANT_TABLE"
    return 1
}
peer_file() { # algorithm variant: LeanRL's file, in its checkout's leanrl/ folder
    local a=$1
    if [ "$a" = ppo_atari ]; then a=ppo_atari_envpool; fi
    if [ "$a" = ppo_atari_envpool ] && [ "$2" = leanrl_jax ]; then a=ppo_atari_envpool_xla; fi
    variant_file "$a" "$2"
}
variant_help() { # default|quick|other: --help's lines for those variants
    local name kind file flags
    while read -r name kind file flags; do
        if [ -n "$name" ] && [ "$kind" = "$1" ]; then
            printf '  %-36s scripts/%s\n' "$name" "$(variant_file '<algo>' "$name")${flags:+ $flags}"
        fi
    done <<<"$VARIANT_TABLE"
}

# runs.tsv: one row per attempted run (each Slurm task writes its own, tasks/PLAN.INDEX.tsv, gathered into runs.tsv
# by aggregate). Its columns, defined here once: its header is runs_row "${RUNS_COLUMNS[@]}", every row is written by
# runs_row in this order, and aggregate.py reads the rows by the names in the header.
# launched: the run's start, in seconds since the epoch (aggregate.py counts its time to the first update from it)
RUNS_COLUMNS=(algorithm variant seed status exit_code summary log command launched)
runs_row() { # algorithm variant seed status exit_code summary log command launched: one row of runs.tsv on stdout
    local IFS=$'\t'
    if [ $# -ne ${#RUNS_COLUMNS[@]} ]; then
        echo "run.sh: bug: a runs.tsv row of $# fields for ${#RUNS_COLUMNS[@]} columns: $*" >&2
        return 1
    fi
    printf '%s\n' "$*"
}

usage() {
    cat <<EOF
Usage: ./run.sh [options] [-- extra flags for every script]

Runs the benchmark matrix (one run at a time, --jobs N at once, or as a Slurm job array): for each algorithm,
each variant, each seed:
$(variant_help default)
and, only where --variants names them, CUDA graphs without compile and torch.compile's other modes (--compile-mode;
reduce-overhead and max-autotune capture CUDA graphs themselves; on a CPU, graphs are skipped with a warning):
$(variant_help other)
and the variant files of their own, which --quick runs too (ray: Ray env runners, ppo_continuous_action only;
multigpu: data-parallel PPO under torchrun, a process per GPU, ppo_atari only):
$(variant_help quick)
and the peer's, LeanRL's own files run beside ours with the same flags, budgets and seeds (only where --variants
names them; they need --leanrl and --leanrl-python, and tools/leanrl.py says how to make that environment):
$(variant_help peer | sed 's| scripts/| leanrl/|')
With --all (or any other option that leaves them so): all algorithms, the variants of the first list, seeds
${DEFAULT_SEEDS}, the scripts' default budgets (the full reproduction; hours on a GPU, much longer on a CPU). With no
option at all it runs nothing and says so.

Options:
  --all                   the full reproduction above (a bare ./run.sh only describes it)
  --quick                 tiny budgets (the table at the top of run.sh) and one seed (${QUICK_SEEDS}): a smoke test
                          of every run, minutes on a 2-core CPU; its numbers are not representative
  --scripts A,B           algorithms to run (default: all): ${ALGOS// /, }
  --variants V,W          variants to run (default: ${DEFAULT_VARIANTS// /, }; with --quick also
                          $(q="${QUICK_VARIANTS#"$DEFAULT_VARIANTS "}" && echo "${q// /, }")); also ${OTHER_VARIANTS// /, }
  --seeds 1,2,3           seeds (default: ${DEFAULT_SEEDS}, or ${QUICK_SEEDS} with --quick)
  --total-timesteps N     give every run this budget (overrides the defaults and --quick's)
  --out DIR               where everything goes (default: bench/<date-time>; bench/ is git-ignored);
                          must not hold an earlier benchmark unless --append
  --append                add these runs to the benchmark already in --out (e.g. one algorithm per call on
                          a machine with a time limit per command); the tables then cover all of them
  --aggregate DIR         run nothing: re-read DIR (the --out of an earlier run.sh, or any folder with run
                          folders holding summary.json, such as the scripts' own runs/) and rewrite its
                          results.csv, curves.csv (each run's curve, thinned), results.md and plots, grouped
                          by algorithm, env id and exp name
  --reference FILE        with the aggregation: a CSV of published returns to compare with (algorithm, env_id, step,
                          return, std, ...: doc/results/cleanrl_reference.csv): each curves panel shows its points
                          for the panel's env id, and results.md gains each row's return at its last step against it
  --publish DIR           afterwards, copy the small files (results.csv, curves.csv, results.md, machine.*,
                          *.png) into DIR, e.g. doc/results/cpu-2core
  --jobs N                up to N runs at once on this machine (default 1; needs bash 5.1+): each run slot gets
                          its own cores (taskset, OMP_NUM_THREADS = its share) and the next GPU in turn
                          (CUDA_VISIBLE_DEVICES); machine.json records the split, results.md marks the speeds as
                          shared. With --slurm: at most N tasks of the array at once
  --gpus 0,1,...          the GPUs the runs take in turn (default: every visible one)
  --leanrl DIR            the peer's variants: a checkout of LeanRL (git clone https://github.com/pytorch-labs/LeanRL;
                          our results used its commit 8dbb633), whose leanrl/ files they run, unchanged
  --leanrl-python PY      the peer's variants: the python of an environment with LeanRL's own libraries
                          (requirements/requirements-leanrl.txt; never ours), e.g. .venv-leanrl/bin/python
  --slurm                 submit instead of running: one sbatch job array, a task per run (throttled by --jobs),
                          then one job that aggregates into --out once they all end (afterany); prints the job
                          ids and how to watch them. --out must be on a file system the nodes share
  --slurm-args "..."      your own sbatch options for both jobs, e.g. "--partition gpu --gpus-per-task 1 --time 4:00:00";
                          they come after run.sh's own: --requeue and --signal=B:USR1@120 (a task warned 2 minutes
                          before its time limit checkpoints its run and requeues itself; a preempted or requeued
                          task goes on from its run's checkpoint.pt, in the same run folder)
  --resume DIR            finish the runs of an earlier ./run.sh into DIR (not --slurm) that did not finish: each
                          goes on from its checkpoint.pt where it has one (--resume of the scripts), else starts
                          again (its earlier attempt moved to DIR/superseded/, out of the tables); runs.tsv keeps
                          one row per run. A run finished since by its script's own
                          --resume (its summary.json says finished) counts as finished. With --scripts,
                          --variants or --seeds: only the unfinished runs they name, in the plan's order. One
                          call at a time runs into a folder (--resume, --append): a second is refused (flock)
  --tune [--slurm [--workers N] [--slurm-args "..."]] -- ARGS
                          instead of a benchmark: tune a script's flags with Optuna (tools/tune.py ARGS; its --help);
                          with --slurm, N workers as a job array sharing the study in tools/tune.py's --storage
                          (PostgreSQL or a journal file that every node reaches), then a job that writes its report
  -h, --help              this help
  -- FLAGS...             passed to every script after run.sh's own flags (the last of a repeated flag wins),
                          e.g. -- --no-cuda   or   -- --env-id Hopper-v4

What it leaves in DIR:
  machine.json, machine.md  GPU or none, CPU model and cores, Python and library versions, git commit
  machines-earlier.jsonl    the records of earlier calls (--append, --resume) made on another machine or commit
  bench.json                how run.sh was called (budgets, seeds, variants, extra flags)
  runs.tsv                  one row per attempted run: ${RUNS_COLUMNS[*]}
  slurm/, tasks/            with --slurm: the plan of runs, Slurm's own logs, one record file per task
  logs/<algo>__<variant>__seed<N>.log   each run's stdout and stderr
  runs/<algo>/<variant>/seed<N>/<run_name>/   each run's metrics.csv and summary.json
  superseded/               the attempts --resume ran again from the start (no checkpoint): out of the tables
  results.csv               one row per run (failed ones too, with status and the last line of the log)
  results.md                per algorithm, env id, exp name (--exp-name) and variant: steps/s median and range
                            over seeds, speed-up over the baseline of the same algorithm, env id and exp name
                            (ratio of medians), final episodic return mean +- std; the plots; the tail of the
                            log of each run that did not finish
  sps_<algo>.png            steps/s per variant (bar: median, whiskers: range, dots: seeds), a panel per env id
                            and exp name
  curves_<algo>.png         episodic return against steps and against wall time, one line per run, a row of
                            panels per env id and exp name

Exit status: 0 if every run finished; 1 if any failed or its script is missing; 130 if interrupted (Ctrl-C
stops the current run, which writes its summary as "interrupted", and aggregates what exists); 143 if a run was
terminated (SIGTERM: a time limit, kill, timeout; its summary says "terminated") or run.sh itself was (it passes
the SIGTERM on to the runs going): no more runs start, and what exists is aggregated; 2 on bad options.
--aggregate alone exits 0 once it has written the files, whatever the runs' statuses.

The full table on one 8-GPU node: ./run.sh --jobs 8 (8 runs at once, one per GPU, the cores split 8 ways; its
pinning is tested on a CPU, and it has not run on a GPU node yet).
On a cluster: ./run.sh --slurm --jobs 16 --slurm-args "--partition gpu --gpus-per-task 1 --cpus-per-task 8 --time 12:00:00"
(60 tasks for all algorithms, variants and seeds, 16 at once; squeue shows them; results.md when the last ends).

Environment: PYTHON (the interpreter, default: python, else python3); RUN_SH_SCRIPTS_DIR (where the scripts
are, default: scripts/ beside run.sh; for tests). Speeds are only comparable between runs made on the same
machine in the same benchmark run: keep the machine otherwise idle while it runs.
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
RESUME=""
REFERENCE=""
LEANRL=""
LEANRL_PYTHON=""
EXTRA=()
ORIG_ARGS=("$@")

# --tune: the tuner (tools/tune.py), here, or with --slurm as a job array of --workers workers that share the study in
# its --storage (a database every node reaches: PostgreSQL, or a journal file on a shared file system), then one job
# that writes the study's report once they all end.
if [ "${1:-}" = --tune ]; then
    shift
    tune_slurm=0 workers=1 tune_sargs=""
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        case "$1" in
        --slurm) tune_slurm=1 && shift ;;
        --workers) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || die "--workers: a count of 1 or more, not '${2:-}'"; workers=$2 && shift 2 ;;
        --slurm-args) [ $# -ge 2 ] || die "--slurm-args needs a value"; tune_sargs=$2 && shift 2 ;;
        *) die "--tune: unknown option $1 (./run.sh --tune [--slurm [--workers N] [--slurm-args \"...\"]] -- TUNE.PY ARGS)" ;;
        esac
    done
    [ "${1:-}" = -- ] && shift
    [ $# -gt 0 ] || die "--tune: tools/tune.py's arguments after -- (python tools/tune.py --help)"
    [ $tune_slurm = 1 ] || exec "$PYTHON" "$ROOT/tools/tune.py" "$@"
    case " $* " in *" --storage sqlite"* | *" --storage=sqlite"*) die "--tune --slurm: a sqlite file is no storage for many nodes: --storage postgresql+psycopg://... or journal:PATH" ;; esac
    case " $* " in *" --storage "* | *" --storage="*) ;; *) die "--tune --slurm: give tools/tune.py a --storage that every node reaches (postgresql+psycopg://... or journal:PATH)" ;; esac
    read -r -a tune_args_split <<<"$tune_sargs"
    # the worker's and the report's own option goes to tools/tune.py, before the -- that starts every run's flags
    tune_own=() tune_runs=() after=0
    for a in "$@"; do
        if [ $after = 0 ] && [ "$a" = -- ]; then after=1; elif [ $after = 0 ]; then tune_own+=("$a"); else tune_runs+=("$a"); fi
    done
    tune_command() { # the tuner's command line with its own option $1
        printf '%q ' "$PYTHON" "$ROOT/tools/tune.py" "${tune_own[@]}" "$1"
        [ $after = 0 ] || printf '%q ' -- ${tune_runs[@]+"${tune_runs[@]}"}
    }
    log_dir="$ROOT/bench/tune-slurm"
    mkdir -p "$log_dir"
    array=$(sbatch --parsable --job-name=tune --array="0-$((workers - 1))" --output="$log_dir/%A_%a.out" \
        ${tune_args_split[@]+"${tune_args_split[@]}"} --wrap="exec $(tune_command --no-report)") ||
        die "--tune --slurm: sbatch refused the workers (see its message above)"
    report=$(sbatch --parsable --job-name=tune-report --dependency="afterany:${array%%;*}" --output="$log_dir/report.out" \
        ${tune_args_split[@]+"${tune_args_split[@]}"} --wrap="exec $(tune_command --report-only)") ||
        die "--tune --slurm: sbatch refused the report job (the workers ${array%%;*} are submitted)"
    echo "run.sh: submitted $workers tuning workers as the job array ${array%%;*} and the report job ${report%%;*}"
    echo "run.sh: watch them with: squeue -j ${array%%;*},${report%%;*}   (their logs: $log_dir/)"
    exit 0
fi

if [ $# -eq 0 ]; then # the full reproduction takes hours: say what it is, and start it only when asked (--all)
    algos=($ALGOS) variants=($DEFAULT_VARIANTS) seeds=(${DEFAULT_SEEDS//,/ })
    runs=$((${#algos[@]} * ${#variants[@]} * ${#seeds[@]}))
    cat >&2 <<EOF
run.sh: nothing run. With no options it would run the full reproduction: $runs runs (${algos[*]} x ${variants[*]}
x seeds ${DEFAULT_SEEDS}) at the scripts' default budgets: hours on a GPU, days on a 2-core CPU. The last published
benchmark (doc/results/cpu-2core, its notes.md has the commands) used reduced budgets instead.
  ./run.sh --all        start the full reproduction
  ./run.sh --quick      every run with tiny budgets: a smoke test, minutes on 2 cores
  ./run.sh --help       every option
EOF
    exit 2
fi

GIVEN=""
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
    GIVEN+=" $opt" # (what was given, for the options that another one leaves without effect)
    case "$opt" in
        -h | --help)
            usage
            exit 0
            ;;
        --quick) QUICK=1 ;;
        --all) ;; # the full matrix at default budgets, asked for explicitly (what no option would run)
        --append) APPEND=1 ;;
        --slurm) SLURM=1 ;;
        --scripts | --variants | --seeds | --total-timesteps | --out | --aggregate | --publish | --jobs | --gpus | --slurm-args | --run-task | --resume | --reference | --leanrl | --leanrl-python)
            if [ "$has_inline" = 0 ]; then
                [ $# -ge 2 ] || die "$opt needs a value (see --help)"
                val="$2"
                shift
            fi
            case "$opt" in # (a list given empty, as an unset shell variable gives it, is no default)
                --scripts | --variants | --seeds) [ -n "${val//[, ]/}" ] || die "$opt: empty (leave it out for its default)" ;;
            esac
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
                --resume) RESUME="$val" ;;
                --reference) REFERENCE="$val" ;;
                --leanrl) LEANRL="$val" ;;
                --leanrl-python) LEANRL_PYTHON="$val" ;;
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
# Aggregation: runs.tsv (it knows the runs that left no summary.json) and every summary.json under the folder ->
# results.csv, curves.csv, results.md and PNG plots, by aggregate.py (pandas and matplotlib:
# requirements/requirements-dev.txt), in the order of the tables above. Its status: 0 written; 3 pandas or matplotlib missing here (it said so in one
# line: the runs are recorded all the same, and ./run.sh --aggregate makes the tables where they are installed).
aggregate() { # dir
    if [ -d "$1/tasks" ]; then # Slurm: each task wrote its own row (no two tasks write one file); gather them
        { runs_row "${RUNS_COLUMNS[@]}"; cat "$1"/tasks/*.tsv 2>/dev/null; } >"$1/runs.tsv"
    fi
    MPLBACKEND=Agg "$PYTHON" "$ROOT/tools/aggregate.py" "$1" --algorithms "${ALGOS// /,}" --variants "${VARIANTS// /,}" \
        ${REFERENCE:+--reference "$REFERENCE"}
}

publish() { # from to: the tables, the machine record and the plots; each file the folder held already is replaced, said so
    mkdir -p "$2" || return 1
    local f name replaced="" stale=""
    for f in "$2"/*.png; do
        [ -f "$f" ] && [ ! -f "$1/$(basename "$f")" ] && stale+=" $(basename "$f")"
    done
    for f in "$1"/results.csv "$1"/curves.csv "$1"/results.md "$1"/machine.json "$1"/machine.md "$1"/machines-earlier.jsonl "$1"/*.png; do
        [ -f "$f" ] || continue
        name="$(basename "$f")"
        [ -f "$2/$name" ] && replaced+=" $name"
        cp "$f" "$2"/ || { echo "run.sh: error: --publish: $name could not be written into $2" >&2; return 1; }
    done
    echo "run.sh: published to $2${replaced:+ (replacing$replaced)}"
    [ -z "$stale" ] || echo "run.sh: --publish: $2 also holds$stale, which this aggregation did not make: left as it was" >&2
}

if [ -n "$REFERENCE" ] && [ ! -f "$REFERENCE" ]; then die "--reference: no such file: $REFERENCE"; fi
if [ -n "$REFERENCE" ]; then REFERENCE="$(cd "$(dirname "$REFERENCE")" && pwd)/$(basename "$REFERENCE")"; fi
for o in --scripts --variants --seeds --total-timesteps --quick --all --jobs --gpus --out --append --slurm --slurm-args --resume --; do
    if [ -n "$AGGREGATE" ] && in_list "$o" "$GIVEN"; then
        die "$([ "$o" = -- ] && echo "-- FLAGS" || echo "$o"): not with --aggregate, which makes the tables of all its folder holds"
    fi
done
for o in --total-timesteps --quick --all --out --append --; do # (--scripts, --variants, --seeds pick among the plan's runs)
    if [ -n "$RESUME" ] && in_list "$o" "$GIVEN"; then
        die "$([ "$o" = -- ] && echo "-- FLAGS" || echo "$o"): not with --resume, which runs the commands of its plan.tsv as they are"
    fi
done
if [ -n "$AGGREGATE" ]; then
    [ -d "$AGGREGATE" ] || die "--aggregate: no such directory: $AGGREGATE"
    aggregate "$AGGREGATE" || exit 1 # (3, no pandas here: asked for the tables, none made)
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
if [ -n "$RESUME" ]; then # the unfinished runs of an earlier local ./run.sh: its plan.tsv says what they were
    [ "$SLURM" = 0 ] && [ -z "$RUN_TASK" ] || die "--resume: for a benchmark run here (a Slurm task resumes by itself)"
    [ -f "$RESUME/plan.tsv" ] && [ -f "$RESUME/runs.tsv" ] || die "--resume: $RESUME holds no benchmark of ./run.sh (plan.tsv, runs.tsv)"
    OUT="$RESUME" APPEND=1
    PICK_SCRIPTS="${SEL_SCRIPTS//,/ }" PICK_VARIANTS="${SEL_VARIANTS//,/ }" PICK_SEEDS="${SEEDS//,/ }" # given: only those
fi
[ -n "$SEL_SCRIPTS" ] || SEL_SCRIPTS="${ALGOS// /,}"
if [ -z "$SEL_VARIANTS" ]; then
    if [ "$QUICK" = 1 ]; then SEL_VARIANTS="${QUICK_VARIANTS// /,}"; else SEL_VARIANTS="${DEFAULT_VARIANTS// /,}"; fi
fi
if [ -z "$SEEDS" ]; then
    if [ "$QUICK" = 1 ]; then SEEDS="$QUICK_SEEDS"; else SEEDS="$DEFAULT_SEEDS"; fi
fi
RUN_ALGOS=()
for a in ${SEL_SCRIPTS//,/ }; do
    in_list "$a" "$ALGOS" || die "--scripts: unknown algorithm '$a' (allowed: ${ALGOS// /, })"
    ! in_list "$a" "${RUN_ALGOS[*]-}" || die "--scripts: $a twice"
    RUN_ALGOS+=("$a")
done
RUN_VARIANTS=()
for v in ${SEL_VARIANTS//,/ }; do
    in_list "$v" "$VARIANTS" || die "--variants: unknown variant '$v' (allowed: ${VARIANTS// /, })"
    ! in_list "$v" "${RUN_VARIANTS[*]-}" || die "--variants: $v twice"
    RUN_VARIANTS+=("$v")
done
RUN_SEEDS=()
for s in ${SEEDS//,/ }; do
    [[ "$s" =~ ^[0-9]+$ ]] || die "--seeds: '$s' is not a non-negative integer (e.g. --seeds 1,2,3)"
    given=$s s="${s#"${s%%[!0]*}"}" s="${s:-0}" # (01 is 1)
    ! in_list "$s" "${RUN_SEEDS[*]-}" || die "--seeds: $given twice (a seed run twice is one run, counted twice)"
    RUN_SEEDS+=("$s")
done
[ ${#RUN_ALGOS[@]} -gt 0 ] || die "--scripts: empty"
[ ${#RUN_VARIANTS[@]} -gt 0 ] || die "--variants: empty"
for v in "${RUN_VARIANTS[@]}"; do # the peer's variants: its checkout and its environment, said before any run
    peer_variant "$v" || continue
    [ -n "$LEANRL" ] || die "--variants $v: needs --leanrl DIR, a checkout of LeanRL (git clone https://github.com/pytorch-labs/LeanRL)"
    [ -d "$LEANRL/leanrl" ] || die "--leanrl: $LEANRL is no LeanRL checkout (it has no leanrl/ folder)"
    LEANRL="$(cd "$LEANRL" && pwd)"
    [ -n "$LEANRL_PYTHON" ] || die "--variants $v: needs --leanrl-python PY, the python of LeanRL's environment (see tools/leanrl.py)"
    command -v "$LEANRL_PYTHON" >/dev/null || die "--leanrl-python: $LEANRL_PYTHON is no program here"
    break
done
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
NPROC=1 # the multigpu variant's ranks: one per GPU where a run has them all (one at a time, no --gpus), else one
if [ "$JOBS" = 1 ] && [ -z "$GPUS" ] && [ ${#RUN_GPUS[@]} -gt 1 ]; then NPROC=${#RUN_GPUS[@]}; fi
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
if [ -z "$RUN_TASK" ] && [ -z "$RESUME" ] && [ "$APPEND" = 1 ] && { { [ -e "$OUT/slurm" ] && [ "$SLURM" = 0 ]; } || { [ -e "$OUT/runs.tsv" ] && [ ! -e "$OUT/slurm" ] && [ "$SLURM" = 1 ]; }; }; then
    die "--append: $OUT holds a benchmark run $([ "$SLURM" = 1 ] && echo here || echo through Slurm); add to it the same way, or use another folder"
fi
# One call at a time into a folder: two (--resume twice, --append beside --resume) would run its unfinished runs
# twice into the same run folders. The lock is held by run.sh and the runs it starts; flock comes with Linux's
# util-linux (without it, no lock). A Slurm submission's tasks share their folder by design.
if [ -z "$RUN_TASK" ] && [ "$SLURM" = 0 ] && command -v flock >/dev/null; then
    exec 9>>"$OUT/.lock"
    flock -n -E 75 9
    case $? in
    0) ;;
    75) die "$([ -n "$RESUME" ] && echo --resume || echo --out): another ./run.sh is running into $OUT; wait for it or stop it" ;;
    *) echo "run.sh: warning: --out: $OUT cannot be locked here (a file system without flock?): one call at a time" >&2 ;;
    esac
fi
if [ -n "$PUBLISH" ]; then
    mkdir -p "$PUBLISH" || die "--publish: cannot create $PUBLISH"
    PUBLISH="$(cd "$PUBLISH" && pwd)"
fi
# the programs and the scripts' folder as given from here, before the runs start from the checkout's root
if [[ "$PYTHON" == */* ]]; then PYTHON="$(cd "$(dirname "$PYTHON")" && pwd)/$(basename "$PYTHON")"; fi
if [[ "$LEANRL_PYTHON" == */* ]]; then LEANRL_PYTHON="$(cd "$(dirname "$LEANRL_PYTHON")" && pwd)/$(basename "$LEANRL_PYTHON")"; fi
if [ -d "$SCRIPTS_DIR" ]; then SCRIPTS_DIR="$(cd "$SCRIPTS_DIR" && pwd)"; fi
mkdir -p "$OUT/logs" "$OUT/runs"
cd "$ROOT" || exit 2

# ---------------------------------------------------------------------------------------------------------------
# How run.sh was called (bench.json), and the machine (machine.json, machine.md): aggregate.py writes them.
CMDLINE="./run.sh ${ORIG_ARGS[*]}"
if [ -z "$RUN_TASK" ] && [ -z "$RESUME" ]; then # a Slurm task leaves bench.json to the submission, --resume keeps it
    bench=(--record-bench "$OUT" "--command=${CMDLINE% }" "--seeds=${RUN_SEEDS[*]}" "--variants=${RUN_VARIANTS[*]}" "--jobs=$JOBS")
    for a in "${RUN_ALGOS[@]}"; do
        if [ "$QUICK" = 1 ]; then bench+=("--budget=$a=$(quick_flags "$a")"); else bench+=("--budget=$a="); fi
    done
    [ "$QUICK" = 0 ] || bench+=(--quick)
    [ -z "$TOTAL_TIMESTEPS" ] || bench+=("--total-timesteps=$TOTAL_TIMESTEPS")
    [ "$SLURM" = 0 ] || bench+=(--slurm)
    "$PYTHON" "$ROOT/tools/aggregate.py" "${bench[@]}" -- ${EXTRA[@]+"${EXTRA[@]}"} || die "cannot write bench.json with $PYTHON"
fi

record_machine() { # a Slurm submission records nothing here: its task 0 records the compute node it runs on
    if [ "$SLURM" = 1 ] || { [ -n "$RUN_TASK" ] && [ "${RUN_TASK#*:}" != 0 ]; }; then return 0; fi
    "$PYTHON" "$ROOT/tools/aggregate.py" --record-machine "$OUT" "--jobs=$JOBS" "--cpu-sets=${CPU_SETS[*]-}" "--gpus=${RUN_GPUS[*]-}"
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
elif [ -n "$RESUME" ]; then # the runs of the plan that runs.tsv does not record as finished
    while IFS=$'\t' read -r _ a v s rundir log shown quoted; do
        if [ -n "$PICK_SCRIPTS" ] && ! in_list "$a" "$PICK_SCRIPTS"; then continue; fi # --scripts etc.: those only
        if [ -n "$PICK_VARIANTS" ] && ! in_list "$v" "$PICK_VARIANTS"; then continue; fi
        if [ -n "$PICK_SEEDS" ] && ! in_list "$s" "$PICK_SEEDS"; then continue; fi
        if cut -f4,7 "$OUT/runs.tsv" | grep -qxF "finished"$'\t'"$log"; then continue; fi
        # a run stopped here, then taken to its end by its script's own --resume: its summary.json says finished
        recorded=$(awk -F'\t' -v l="$log" '$7 == l { print $6 }' "$OUT/runs.tsv")
        if [ -n "$recorded" ] && grep -qE '"status": *"finished"' "$OUT/$recorded" 2>/dev/null; then continue; fi
        # one row per run: the earlier attempt's goes now, before any run starts (runs write their rows at once)
        awk -F'\t' -v l="$log" '$7 != l' "$OUT/runs.tsv" >"$OUT/runs.tsv.new" && mv "$OUT/runs.tsv.new" "$OUT/runs.tsv"
        if [ -d "$OUT/$rundir" ] && [ -z "$(find "$OUT/$rundir" -name checkpoint.pt)" ]; then
            # no checkpoint to go on from: the run starts anew, its earlier attempt kept aside (the tables leave it out)
            mkdir -p "$OUT/superseded/$(dirname "$rundir")" && mv "$OUT/$rundir" "$OUT/superseded/$rundir.$(date +%s)"
        fi
        P_ALGO+=("$a") P_VARIANT+=("$v") P_SEED+=("$s") P_RUNDIR+=("$rundir") P_LOG+=("$log") P_SHOWN+=("$shown") P_CMD+=("$quoted")
    done < <(tail -n +2 "$OUT/plan.tsv")
else
    for a in "${RUN_ALGOS[@]}"; do
        for v in "${RUN_VARIANTS[@]}"; do
            if own_file "$v" && [ ! -f "$SCRIPTS_DIR/$(variant_file "$a" "$v")" ]; then
                continue # a variant file of its own that this algorithm does not have
            fi
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
                if peer_variant "$v"; then # LeanRL's own file, in its own environment, through our adapter
                    cmd=("$LEANRL_PYTHON" "$ROOT/tools/leanrl.py" --leanrl "$LEANRL" "$(peer_file "$a" "$v")" "${cmd[@]:2}")
                fi
                if [ "$v" = multigpu ] && command -v torchrun >/dev/null; then # a rank per GPU of the run (else one)
                    # torchrun passes on SIGUSR1 too (Slurm's warning): by default it would end torchrun alone
                    signals=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1
                    cmd=("$PYTHON" -m torch.distributed.run --standalone --nproc-per-node "$NPROC" --signals-to-handle $signals "${cmd[@]:1}")
                fi
                shown="${cmd[*]:1}" # as a reader would type it: python scripts/..., paths relative to the out dir
                shown="python ${shown//$'\t'/ }"
                shown="${shown//"$OUT"\//}"
                shown="${shown//"$ROOT"\//}"
                above="$(dirname "$ROOT")" # a checkout beside this one (--leanrl ../LeanRL), shown relative
                if [ "$above" != / ]; then shown="${shown//"$above"\//../}"; fi
                P_ALGO+=("$a") P_VARIANT+=("$v") P_SEED+=("$s") P_RUNDIR+=("$rundir") P_LOG+=("$log") P_SHOWN+=("$shown")
                P_CMD+=("$(printf '%q ' "${cmd[@]}")")
            done
        done
    done
fi
TOTAL=${#P_CMD[@]}
if [ -z "$RUN_TASK" ] && [ -z "$RESUME" ] && [ "$SLURM" = 0 ]; then # plan.tsv: what --resume DIR would finish
    [ -e "$OUT/plan.tsv" ] || printf 'index\talgorithm\tvariant\tseed\trundir\tlog\tcommand\tquoted\n' >"$OUT/plan.tsv"
    for ((i = 0; i < TOTAL; i++)); do
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "${P_ALGO[$i]}" "${P_VARIANT[$i]}" "${P_SEED[$i]}" "${P_RUNDIR[$i]}" "${P_LOG[$i]}" "${P_SHOWN[$i]}" "${P_CMD[$i]}" >>"$OUT/plan.tsv"
    done
fi

run_one() { # index record cpus gpu: one run of the plan, its runs.tsv row appended to record (a file per Slurm task)
    local i=$1 record=$2 cpus=$3 gpu=$4 start=$SECONDS rc summary summary_rel status info launched pin=()
    local a=${P_ALGO[$1]} v=${P_VARIANT[$1]} s=${P_SEED[$1]} log=${P_LOG[$1]} rundir=${P_RUNDIR[$1]} shown=${P_SHOWN[$1]}
    local name="${a}__${v}__seed${s}" file="$SCRIPTS_DIR/$(variant_file "$a" "$v")" where=""
    if peer_variant "$v"; then file="$LEANRL/leanrl/$(peer_file "$a" "$v")"; fi
    eval "local cmd=(${P_CMD[$1]})"
    local checkpoint
    checkpoint="$(find "$OUT/$rundir" -name checkpoint.pt 2>/dev/null | sort | tail -n 1)"
    if [ -n "$checkpoint" ]; then # stopped before (preempted, requeued, --resume): on from its checkpoint, same folder
        cmd+=(--resume "$(dirname "$checkpoint")") shown+=" --resume ${checkpoint%/checkpoint.pt}" where+=" [resumed]"
        shown="${shown//"$OUT"\//}"
    fi
    if [ ! -f "$file" ]; then
        echo "[$((i + 1))/$TOTAL] $name: MISSING: $file does not exist (not written yet?); recorded, going on" >&2
        runs_row "$a" "$v" "$s" missing "" "" "" "$shown" "" >>"$record"
        return 1
    fi
    if [ -n "$cpus" ]; then pin=(env "OMP_NUM_THREADS=$(($(tr -cd , <<<"$cpus" | wc -c) + 1))" taskset -c "$cpus") where=" [cores $cpus]"; fi
    if [ -n "$gpu" ]; then pin=(env "CUDA_VISIBLE_DEVICES=$gpu" ${pin[@]+"${pin[@]}"}) where+=" [GPU $gpu]"; fi
    echo "[$((i + 1))/$TOTAL] $name: $shown$where"
    [ -n "$checkpoint" ] || : >"$OUT/$log"
    launched=${EPOCHREALTIME:-$(date +%s)} # (bash 5's clock, to the microsecond)
    launched=${launched/,/.}
    if [ -n "$RUN_TASK" ] || [ "$JOBS" = 1 ]; then # (a Slurm task, or one at a time) in the background: traps pass signals on
        # in run.sh's process group (a terminal's Ctrl-C, timeout's kill reach it), with Ctrl-C's default (& ignores it)
        (trap - INT && exec ${pin[@]+"${pin[@]}"} "${cmd[@]}") >>"$OUT/$log" 2>&1 </dev/null &
        RUNNING=$!
        until wait "$RUNNING"; rc=$?; ! kill -0 "$RUNNING" 2>/dev/null; do :; done
        RUNNING=""
    else
        ${pin[@]+"${pin[@]}"} "${cmd[@]}" >>"$OUT/$log" 2>&1 </dev/null
        rc=$?
    fi
    summary="$(grep -E 'summary\.json$' "$OUT/$log" | tail -n 1)" # the last line a script prints is its path
    if [ -z "$summary" ] || [ ! -f "$summary" ]; then
        summary="$(find "$OUT/$rundir" -name summary.json 2>/dev/null | sort | tail -n 1)"
    fi
    summary_rel=""
    [ -n "$summary" ] && [ -f "$summary" ] && summary_rel="${summary#"$OUT"/}"
    local ended="" # torchrun exits 1 after it passed a signal on: then rank 0's summary, if this call wrote it, says
    if [ "$rc" != 0 ] && [[ " ${cmd[*]} " == *" torch.distributed.run "* ]] && [ -n "$summary_rel" ]; then
        ended="$("$PYTHON" -c 'import json, os, sys
if os.path.getmtime(sys.argv[1]) >= float(sys.argv[2]): print(json.load(open(sys.argv[1])).get("status"))' "$summary" "$launched" 2>/dev/null)"
    fi
    if [ "$rc" = 143 ] || [ "$ended" = terminated ]; then # SIGTERM (Slurm's time limit, kill): its summary says "terminated"
        status=terminated
    elif [ "$INTERRUPTED" = 1 ] || [ "$rc" = 130 ] || [ "$ended" = interrupted ]; then
        status=interrupted
    elif [ "$rc" = 0 ] && [ -n "$summary_rel" ]; then
        status=finished
    else
        status=failed
    fi
    runs_row "$a" "$v" "$s" "$status" "$rc" "$summary_rel" "$log" "$shown" "$launched" >>"$record"
    if [ "$status" = finished ]; then
        info="$("$PYTHON" -c 'import json, sys; s = json.load(open(sys.argv[1])); r = s.get("episodic_return")
print("%.1f steps/s, return %s" % (s.get("sps") or 0, "-" if r is None else "%.1f" % r))' "$summary" 2>/dev/null)"
        echo "    $name finished in $((SECONDS - start)) s: $info"
    else
        echo "    $name: $status (exit $rc) after $((SECONDS - start)) s; end of $OUT/$log:" >&2
        tail -n 5 "$OUT/$log" | sed 's/^/    | /' >&2
    fi
    case "$status" in finished) return 0 ;; interrupted) return 130 ;; terminated) return 143 ;; *) return 1 ;; esac
}

INTERRUPTED=0 # no more runs start: Ctrl-C, SIGTERM, or a run terminated
TERMINATED=0  # SIGTERM, to run.sh or to a run: run.sh exits 143
FAILED=0
count() { # a run's exit status from run_one
    case "$1" in 0) ;; 130) INTERRUPTED=1 ;; 143) INTERRUPTED=1 TERMINATED=1 ;; *) FAILED=$((FAILED + 1)) ;; esac
}

if [ -n "$RUN_TASK" ]; then # one task of the array: its own record file, no aggregation (the dependent job does it)
    i=${RUN_TASK#*:}
    [ "$i" -lt "$TOTAL" ] || die "--run-task: no run $i in $OUT/slurm/plan.${RUN_TASK%%:*}.tsv"
    mkdir -p "$OUT/tasks"
    record="$OUT/tasks/${RUN_TASK/:/.}.tsv"
    # what stays if Slurm kills the task (SIGKILL: a node lost, the end of the grace after SIGTERM): the run as failed;
    # run_one replaces it. On SIGTERM (the time limit, scancel) the task waits for its run, which ends as "terminated".
    runs_row "${P_ALGO[$i]}" "${P_VARIANT[$i]}" "${P_SEED[$i]}" failed "" "" "${P_LOG[$i]}" "${P_SHOWN[$i]}" "" >"$record"
    # SIGTERM (preemption, scontrol requeue, the time limit) reaches the run from Slurm itself; SIGUSR1
    # (--signal=B:USR1@120: the time limit is near) reaches the task alone, which passes it on. Either way the run
    # checkpoints and stops; after SIGUSR1 the task requeues itself, to go on from it
    RUNNING="" WARNED=0
    trap : TERM
    trap 'WARNED=1; [ -n "$RUNNING" ] && kill -USR1 "$RUNNING" 2>/dev/null' USR1
    run_one "$i" "$record.new" "" ""
    rc=$?
    mv "$record.new" "$record"
    if [ "$WARNED" = 1 ] && [ "$rc" = 143 ] && [ -n "${SLURM_ARRAY_JOB_ID:-}" ]; then
        scontrol requeue "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}" && echo "run.sh: requeued, to go on from its checkpoint"
    fi
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
    # this run.sh, with its interpreter, on a node; exec: the batch shell becomes it, so that --signal=B:USR1 reaches it
    self="exec env PYTHON=$(printf %q "$PYTHON") bash $(printf %q "$ROOT/run.sh")"
    array=$(sbatch --parsable --job-name=run.sh --array="0-$((TOTAL - 1))%$JOBS" --output="$OUT/slurm/%A_%a.out" --open-mode=append \
        --requeue --signal=B:USR1@120 ${sargs[@]+"${sargs[@]}"} \
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

[ -e "$OUT/runs.tsv" ] || runs_row "${RUNS_COLUMNS[@]}" >"$OUT/runs.tsv"
echo "run.sh: $TOTAL runs into $OUT" $([ "$JOBS" -gt 1 ] && echo "($JOBS at once)")
if [ "$JOBS" = 1 ]; then # one at a time, in run.sh's process group: a SIGTERM to run.sh alone is passed on to it
    RUNNING=""
    trap 'INTERRUPTED=1' INT # the running script gets a terminal's Ctrl-C too and writes its summary as "interrupted"
    trap 'INTERRUPTED=1 TERMINATED=1; [ -z "$RUNNING" ] || kill -TERM "$RUNNING" 2>/dev/null' TERM
    gpu=""
    [ -n "$GPUS" ] && gpu=${RUN_GPUS[0]}
    for ((i = 0; i < TOTAL; i++)); do
        [ "$INTERRUPTED" = 0 ] || break
        run_one "$i" "$OUT/runs.tsv" "" "$gpu"
        count $?
    done
else # a pool of --jobs slots, each run in its own process group: Ctrl-C (SIGTERM) is passed on to every running one
    set -m
    declare -A SLOT_OF=()
    FREE=()
    for ((k = 0; k < JOBS; k++)); do FREE+=("$k"); done
    trap 'INTERRUPTED=1; for p in "${!SLOT_OF[@]}"; do kill -INT -- "-$p" 2>/dev/null; done' INT
    trap 'INTERRUPTED=1 TERMINATED=1; for p in "${!SLOT_OF[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done' TERM
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
        (trap : INT TERM; run_one "$i" "$OUT/runs.tsv" "${CPU_SETS[$slot]-}" "$gpu") & # the row is written even after a Ctrl-C
        SLOT_OF[$!]=$slot
    done
    while [ ${#SLOT_OF[@]} -gt 0 ]; do reap; done
    set +m
fi
trap - INT TERM

aggregate "$OUT"
tables=$?
[ "$tables" = 0 ] || [ "$tables" = 3 ] || FAILED=$((FAILED + 1)) # 3: no pandas here, the tables are made elsewhere
if [ -n "$PUBLISH" ] && [ "$tables" = 0 ]; then publish "$OUT" "$PUBLISH" || FAILED=$((FAILED + 1)); fi
if [ "$TERMINATED" = 1 ]; then
    echo "run.sh: terminated (SIGTERM); the remaining runs were not started; kept what finished in $OUT" >&2
    exit 143
fi
if [ "$INTERRUPTED" = 1 ]; then
    echo "run.sh: interrupted; kept what finished in $OUT" >&2
    exit 130
fi
if [ "$FAILED" -gt 0 ]; then
    echo "run.sh: $FAILED of $TOTAL runs did not finish (see $OUT/results.md)" >&2
    exit 1
fi
if [ "$tables" = 3 ]; then
    echo "run.sh: all $TOTAL runs finished; recorded in $OUT/runs.tsv (the tables are for ./run.sh --aggregate $OUT)"
else
    echo "run.sh: all $TOTAL runs finished; results in $OUT/results.md"
fi
