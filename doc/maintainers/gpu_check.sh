#!/usr/bin/env bash
# The GPU check in two commands of at most 9 minutes each (doc/maintainers/gpu-check.md, "The check of today's code
# in two commands"): PPO Atari beside LeanRL's PyTorch and JAX files, envpool's own rate, the gpu tests, where our PPO
# Atari loop spends its time, then the other algorithms beside LeanRL's while time remains.
#
#   doc/maintainers/gpu_check.sh pack --leanrl DIR       on a machine with network, before: fills .gpu-deps/
#   doc/maintainers/gpu_check.sh 1 DIR [options]         the PPO Atari side by side and envpool's rate
#   doc/maintainers/gpu_check.sh 2 DIR [options]         the baselines, the gpu tests, where our PPO Atari loop
#                                                        spends its time, then the other algorithms
#
# Options of 1 and 2:
#   --budget-s S      the command's own time, in seconds (default 510): a step starts only if the time it needs is
#                     left (with what later, more important steps keep back), and is cut (timeout) where it would
#                     run past it; a step skipped or cut says so in summary.md
#   --archive FILE    after each step, DIR as one .tgz here (what a machine that sends back only a few files needs)
#   --baselines       part 2 only: run PPO Atari's two baselines first (part 1 runs them at its end if time is left,
#                     and its summary says when it had none)
#   --only STEP,...   only these steps of the part (their names are summary.md's), e.g. a later machine's rerun of
#                     part 2's dqn with the whole budget: 2 DIR --only dqn
#   --dry             tiny budgets, and no CUDA needed: the check's dry run on a CPU machine, where every step runs
#                     and only what needs CUDA fails (the gpu tests refuse, --cudagraphs falls back)
# Environment: PYTHON (default python3), the interpreter with torch (and jax, flax, optax for LeanRL's JAX file).
#
# DIR gets machine.txt (the GPU, cores, versions, and the commits of this checkout and of LeanRL's), summary.md (a
# line per step: its exit status and time, and its results), logs/ (each step's output), and run.sh's folders
# (ppo-atari/, envpool/, ...: results.csv, results.md, runs.tsv, each run's log and metrics). It must not exist, or be empty.
#
# .gpu-deps/ (ignored by git; `pack` makes it) travels with the checkout: site.tar.xz (the libraries the scripts
# need that the GPU machine's image lacks, cp312 wheels unpacked and trimmed), leanrl/ (tensordict 0.13.0's wheel,
# put ahead of ours on the PYTHONPATH of LeanRL's PPO Atari files, and site-2024.tar.xz, LeanRL's numpy 1.26,
# gymnasium 0.29 and torchrl 0.13 ahead of that for its other files) and LeanRL/ (a checkout of LeanRL at 8dbb633,
# whose leanrl/ files run unchanged through doc/leanrl.py).
set -uo pipefail
CALLER=$PWD # DIR, --archive and --leanrl are read from here
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$CALLER/$1" ;; esac; }
DEPS=${GPU_CHECK_DEPS:-$ROOT/.gpu-deps} # (another folder: for the tests)
usage() { sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
die() {
    echo "gpu_check.sh: error: $*" >&2
    exit 2
}

pack() { # .gpu-deps/: ours as cp312 wheels unpacked into one archive, tensordict 0.13.0's wheel, a LeanRL checkout
    local leanrl="" work plat=() p fam sub
    while [ $# -gt 0 ]; do
        case "$1" in
        --leanrl) [ $# -ge 2 ] || die "pack: --leanrl DIR, a checkout of LeanRL"; leanrl=$(absolute "$2") && shift 2 ;;
        *) die "pack: unknown option $1 (pack --leanrl DIR)" ;;
        esac
    done
    [ -d "$leanrl/leanrl" ] || die "pack: --leanrl DIR, a checkout of LeanRL (git clone https://github.com/pytorch-labs/LeanRL)"
    work=$(mktemp -d)
    for p in 2_17 2014 2_24 2_27 2_28 2_31 2_34 2_35; do
        if [ $p = 2014 ]; then plat+=(--platform manylinux2014_x86_64); else plat+=(--platform "manylinux_${p}_x86_64"); fi
    done
    # The versions of requirements/requirements.txt that ran; the image has torch, numpy, tqdm, pandas, matplotlib,
    # pytest and pytest-xdist, jax, flax, optax and chex.
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" \
        -d "$work/whl" tensordict==0.15.3 "pyvers>=0.2,<0.3" gymnasium==1.4.0 farama-notifications cloudpickle imageio \
        tyro==1.0.17 docstring-parser typeguard mujoco==4.0.0 mujoco-core==4.0.0 glfw pyopengl envpool==1.2.5 \
        "envpool-assets>=0.3,<0.4" dm-env optree types-protobuf tensorboard==2.21.0 protobuf absl-py ||
        die "pack: pip download failed"
    mkdir -p "$work/site"
    for p in "$work"/whl/*.whl; do python3 -m zipfile -e "$p" "$work/site"; done
    # envpool: the scripts make only its Atari envs (gymnasium makes the MuJoCo ones): keep Atari and classic control,
    # drop the other families' native code and assets, and import only the families that are left (each registers
    # its env ids on import).
    for fam in box2d gfootball highway jumanji minigrid mujoco pgx procgen vizdoom toy_text; do
        find "$work/site/envpool/$fam" -name '*.so' -delete 2>/dev/null
    done
    python3 - "$work/site/envpool/entry.py" <<'PY'
import re
import sys

path = sys.argv[1]
modules = re.findall(r"^import (envpool\.[\w.]+)", open(path).read(), re.M)
open(path, "w").write(
    "import importlib\n\nfor _m in %r:\n    try:\n        importlib.import_module(_m)\n"
    "    except Exception:  # a family left out of the pack; Atari is kept, so its failure is one\n"
    "        if _m.startswith('envpool.atari'):\n            raise\n" % (modules,)
)
assert any(m.startswith("envpool.atari") for m in modules), modules
PY
    rm -rf "$work/site/envpool_assets/"{gfootball,mujoco,procgen,vizdoom}
    find "$work/site" -name __pycache__ -type d -prune -exec rm -rf {} +
    local new=$work/deps # the pack is made here, and replaces .gpu-deps/ only once it is whole
    mkdir -p "$new/leanrl"
    tar -C "$work/site" -cJf "$new/site.tar.xz" . || die "pack: tar failed"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" \
        -d "$new/leanrl" tensordict==0.13.0 || die "pack: pip download of tensordict 0.13.0 failed"
    # LeanRL's other fast files want more of its 2024 stack (requirements/requirements-leanrl.txt): torchrl's replay
    # buffer (SAC, TD3, DQN) and gymnasium 0.29's wrappers and autoreset (all four), whose checker wants numpy 1.
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" \
        -d "$work/whl-2024" numpy==1.26.4 gymnasium==0.29.1 torchrl==0.13.3 hoptorch==0.1.4 ||
        die "pack: pip download of LeanRL's 2024 stack failed"
    mkdir -p "$work/site-2024"
    for p in "$work"/whl-2024/*.whl; do python3 -m zipfile -e "$p" "$work/site-2024"; done
    find "$work/site-2024" -name __pycache__ -type d -prune -exec rm -rf {} +
    tar -C "$work/site-2024" -cJf "$new/leanrl/site-2024.tar.xz" . || die "pack: tar failed"
    cp -a "$leanrl" "$new/LeanRL" || die "pack: cannot copy $leanrl"
    if [ "$(git -C "$leanrl" rev-parse --show-toplevel 2>/dev/null)" = "$(cd "$leanrl" && pwd -P)" ]; then
        git -C "$leanrl" rev-parse --short HEAD >"$new/LeanRL.commit"
    else
        echo unknown >"$new/LeanRL.commit"
    fi
    git describe --always --dirty --abbrev=12 >"$new/packed-at.commit" 2>/dev/null
    rm -rf "$DEPS" && mv "$new" "$DEPS" && rm -rf "$work"
    du -sh "$DEPS/site.tar.xz" "$DEPS/leanrl" "$DEPS/LeanRL"
    echo "LeanRL at $(cat "$DEPS/LeanRL.commit"); what travels (tracked files and .gpu-deps): $(
        (git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1; du -sb "$DEPS" | cut -f1) | awk '{s += $1} END {printf "%.1f MiB (at most 64)", s / 1048576}'
    )"
}

if [ "${1:-}" = pack ]; then
    shift
    pack "$@"
    exit
fi
if [ $# -eq 0 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
    usage
    exit 0
fi
case "$1" in 1 | 2) PART=$1 ;; *) die "the first argument is pack, 1 or 2, not '$1' (--help)" ;; esac
DIR=${2:-}
[ -n "$DIR" ] && [ "${DIR#-}" = "$DIR" ] || die "$PART DIR: the folder to write into"
shift 2
BUDGET=510 ARCHIVE="" DRY=0 BASELINES=0 FAILED="" ONLY=""
while [ $# -gt 0 ]; do
    case "$1" in
    --budget-s) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] && [ "$2" -ge 60 ] || die "--budget-s: seconds, 60 or more, not '${2:-}'"; BUDGET=$2 && shift 2 ;;
    --archive) [ -n "${2:-}" ] || die "--archive FILE"; ARCHIVE=$(absolute "$2") && shift 2 ;;
    --dry) DRY=1 && shift ;;
    --only) [ -n "${2:-}" ] || die "--only STEP,...: one or more of part $PART's steps"; ONLY=$2 && shift 2 ;;
    --baselines) [ "$PART" = 2 ] || die "--baselines: an option of part 2"; BASELINES=1 && shift ;;
    *) die "unknown option $1 (--help)" ;;
    esac
done
STEPS_1="ppo-atari-seed1 ppo-atari-seed2 envpool ppo-atari-baselines"
STEPS_2="ppo-atari-baselines pytest-collect pytest-gpu ppo-atari-gap sac_continuous_action td3_continuous_action ppo_continuous_action dqn"
[ "$PART" = 1 ] && STEPS=$STEPS_1 || STEPS=$STEPS_2
for name in ${ONLY//,/ }; do
    in_steps=0
    for known in $STEPS; do [ "$name" = "$known" ] && in_steps=1; done
    [ $in_steps = 1 ] || die "--only $name: not a step of part $PART (${STEPS// /, })"
done
[[ ",$ONLY," != *,ppo-atari-baselines,* ]] || BASELINES=1
DIR=$(absolute "$DIR")
[ ! -e "$DIR" ] || [ -z "$(ls -A "$DIR")" ] || die "$DIR holds an earlier check: give a new folder"
[ -z "$ARCHIVE" ] || [ -d "$(dirname "$ARCHIVE")" ] || die "--archive $ARCHIVE: no folder $(dirname "$ARCHIVE")"
[ -f "$DEPS/site.tar.xz" ] && [ -d "$DEPS/LeanRL/leanrl" ] && [ -f "$DEPS/leanrl/site-2024.tar.xz" ] && compgen -G "$DEPS/leanrl/tensordict-0.13.0-*.whl" >/dev/null ||
    die "no .gpu-deps/ (site.tar.xz, leanrl/tensordict-0.13.0-*.whl, leanrl/site-2024.tar.xz, LeanRL/): make it with '$0 pack --leanrl DIR' first"
mkdir -p "$DIR/logs" && DIR=$(cd "$DIR" && pwd)
START=$SECONDS
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null || die "no $PY here: set PYTHON"

# The libraries: ours first for our files; LeanRL's tensordict 0.13 ahead of them for LeanRL's (its JAX file imports
# neither torch nor tensordict, and takes jax, flax and optax from the image).
T=${TMPDIR:-/tmp}/gpu-check.$$
mkdir -p "$T/site" "$T/site-leanrl" "$T/bin"
tar xJf "$DEPS/site.tar.xz" -C "$T/site" || die "cannot unpack $DEPS/site.tar.xz"
"$PY" -m zipfile -e "$DEPS"/leanrl/tensordict-0.13.0-*.whl "$T/site-leanrl" || die "cannot unpack tensordict 0.13.0"
wrapper() { # NAME FOLDER...: a python with these folders first on its PYTHONPATH
    local name=$1 path
    shift
    path=$(IFS=:; echo "$*")
    printf '#!/bin/sh\nPYTHONPATH=%q${PYTHONPATH:+:$PYTHONPATH} exec %q "$@"\n' "$path" "$(command -v "$PY")" >"$T/bin/$name"
    chmod +x "$T/bin/$name"
}
wrapper python-ours "$T/site"
wrapper python-leanrl "$T/site-leanrl" "$T/site"
mkdir -p "$T/site-leanrl-2024" && tar xJf "$DEPS/leanrl/site-2024.tar.xz" -C "$T/site-leanrl-2024" || die "cannot unpack site-2024.tar.xz"
wrapper python-leanrl-2024 "$T/site-leanrl-2024" "$T/site-leanrl" "$T/site"
trap 'rm -rf "$T"' EXIT
export PYTHONUNBUFFERED=1 MUJOCO_GL=disable MPLBACKEND=Agg TORCHINDUCTOR_CACHE_DIR="$T/inductor" PYTHON="$T/bin/python-ours"
LEANRL=(--leanrl "$DEPS/LeanRL" --leanrl-python "$T/bin/python-leanrl")

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "commit: $(git describe --always --dirty --abbrev=12 2>/dev/null || echo "no git here; packed at $(cat "$DEPS/packed-at.commit" 2>/dev/null)")"
    echo "LeanRL: $(cat "$DEPS/LeanRL.commit" 2>/dev/null || echo unknown)"
    echo "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo none)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores usable"
    "$T/bin/python-ours" -c "
import importlib, sys
print('python:', sys.version.split()[0])
for name in ('torch', 'tensordict', 'envpool', 'gymnasium', 'mujoco', 'numpy', 'tyro', 'jax', 'flax', 'optax', 'chex', 'xdist'):
    try:
        module = importlib.import_module(name)
        print(name + ':', getattr(module, '__version__', 'present'))
    except Exception as e:
        print(name + ':', 'missing', type(e).__name__)
import torch
print('cuda:', torch.cuda.is_available(), torch.version.cuda)
"
    "$T/bin/python-leanrl" -c "import tensordict; print('for LeanRL: tensordict', tensordict.__version__)"
    "$T/bin/python-leanrl-2024" -c "
import gymnasium, numpy, torchrl
print('for LeanRL (other algorithms): numpy', numpy.__version__, 'gymnasium', gymnasium.__version__, 'torchrl', torchrl.__version__)"
    echo "part: $PART; budget: $BUDGET s; dry: $DRY${ONLY:+; only: $ONLY}"
} >"$DIR/machine.txt" 2>&1
cat "$DIR/machine.txt"
"$T/bin/python-ours" -c "import tensordict, gymnasium, envpool, tyro, mujoco, tensorboard, torch" 2>>"$DIR/machine.txt" ||
    die "a library the scripts import is missing (machine.txt)"
if [ $DRY = 0 ] && ! grep -q '^cuda: True' "$DIR/machine.txt"; then
    die "no CUDA here: stop (--dry runs the check without it)"
fi
echo "# GPU check, part $PART ($(sed -n 's/^commit: //p' "$DIR/machine.txt"), $(sed -n 's/^gpu: //p' "$DIR/machine.txt"))" >"$DIR/summary.md"

pack_dir() { # the folder as one archive, replaced only once whole
    if [ -n "$ARCHIVE" ]; then
        tar czf "$ARCHIVE.part" -C "$(dirname "$DIR")" "$(basename "$DIR")" && mv "$ARCHIVE.part" "$ARCHIVE" ||
            echo "gpu_check.sh: warning: could not write $ARCHIVE" >&2
    fi
}

step() { # step NAME NEED KEEP COMMAND...: runs if NEED s are left after KEEP s kept for later steps; cut there
    local name=$1 need=$2 keep=$3 left rc t
    shift 3
    if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$name,"* ]]; then
        LAST=unselected
        return 0
    fi
    left=$((BUDGET - (SECONDS - START) - keep))
    if [ $left -lt "$need" ]; then
        echo "- $name: skipped, $left s left of the $need s it needs" | tee -a "$DIR/summary.md"
        LAST=skipped
        return 0
    fi
    t=$SECONDS
    echo "[$(date -u +%H:%M:%S)] $name: $*" | tee "$DIR/logs/$name.log"
    if declare -F "$1" >/dev/null; then set -- bash -c "$(declare -f "$1"); $1"; fi # a function of this script
    timeout -k 15 "$left" "$@" >>"$DIR/logs/$name.log" 2>&1
    rc=$?
    echo "- $name: exit $rc$( ((rc == 124 || rc == 137)) && echo " (cut at $left s)"), $((SECONDS - t)) s" | tee -a "$DIR/summary.md"
    [ $rc = 0 ] || FAILED+=" $name"
    # its results: run.sh's line per run, pytest's outcome, envpool's rate per mode and the PPO runs as fractions of it
    grep -h 'collected\|^PPO Atari fast file\|^float32\|^env steps\|runs (\|finished in\|failed\|passed\|FAILED\|ERROR\|error\|^# envpool\|^Median\|^| [a-z_]* | [0-9,]* | [0-9]*%' \
        "$DIR/logs/$name.log" | grep -v '^\[\|^tests/' | tail -"${SUMMARY_LINES:-12}" | cut -c1-240 | sed 's/^/    /' | tee -a "$DIR/summary.md"
    pack_dir
    LAST=$rc
}

if [ $DRY = 1 ]; then # budgets for a 2-core CPU: every step runs, in minutes
    PPO=(--total-timesteps 3072 -- --measure-burnin 1) RATE="--repeats 1 --batches 100"
else
    PPO=(--total-timesteps 102400 -- --measure-burnin 2) RATE="--repeats 2 --batches 2000"
fi
GAP="--total-timesteps 20480 --measure-burnin 2"
[ $DRY = 1 ] && GAP="--total-timesteps 3072 --measure-burnin 1"
export T DIR RATE GAP O=$DIR/ppo-atari

envpool_modes() { # envpool alone, the same 8 Breakout envs: synchronous (each PPO Atari run as a fraction of it), each mode
    local m results=() rc=0
    mkdir -p "$DIR/envpool"
    [ -f "$O/results.csv" ] && results=(--results "$O/results.csv")
    # shellcheck disable=SC2086
    "$T/bin/python-ours" doc/envpool_rate.py $RATE "${results[@]}" --out "$DIR/envpool/rate.json" || rc=1
    for m in "--threads 8" "--threads 8 --no-episodic-life" "--mode async --batch-size 4" "--mode pools" \
        "--mode async --num-envs 16 --batch-size 8"; do
        # shellcheck disable=SC2086
        "$T/bin/python-ours" doc/envpool_rate.py $m $RATE --out "$DIR/envpool/rate$(echo $m | tr -c 'a-z0-9\n' - | tr -s -).json" || rc=1
    done
    return $rc
}
# PPO Atari's two baselines, CleanRL's file and LeanRL's copy of it, with the same budget
BASELINE_RUN=(./run.sh "${LEANRL[@]}" --scripts ppo_atari --variants baseline,leanrl --seeds 1 --out "$DIR/ppo-atari-baselines" "${PPO[@]}")

if [ "$PART" = 1 ]; then
    # PPO Atari, from a random agent on both sides: ours with --compile --cudagraphs, LeanRL's torch file with the same
    # flags, LeanRL's JAX file; one run of each per seed, the order reversed for the second seed. Then envpool alone,
    # and the baselines if the time is left (else part 2 runs them).
    step ppo-atari-seed1 150 40 ./run.sh "${LEANRL[@]}" --scripts ppo_atari \
        --variants compile_cudagraphs,leanrl_compile_cudagraphs,leanrl_jax --seeds 1 --out "$O" "${PPO[@]}"
    step ppo-atari-seed2 120 40 ./run.sh "${LEANRL[@]}" --append --scripts ppo_atari \
        --variants leanrl_jax,leanrl_compile_cudagraphs,compile_cudagraphs --seeds 2 --out "$O" "${PPO[@]}"
    SUMMARY_LINES=40 step envpool 30 0 envpool_modes
    cp "$DIR/logs/envpool.log" "$DIR/envpool/envpool_rate.md" 2>/dev/null
    step ppo-atari-baselines 150 0 "${BASELINE_RUN[@]}"
    [ "$LAST" = skipped ] && echo "    (run them first in part 2: doc/maintainers/gpu_check.sh 2 DIR --baselines)" >>"$DIR/summary.md"
else
    # The baselines where part 1 had no time for them, the gpu tests, then the other algorithms while time is left.
    [ "$BASELINES" = 1 ] && step ppo-atari-baselines 100 120 "${BASELINE_RUN[@]}"
    if [ $DRY = 1 ]; then # every test module imports in this environment (-m gpu itself needs CUDA)
        step pytest-collect 10 0 "$T/bin/python-ours" -m pytest --collect-only -q -p no:cacheprovider
    fi
    WORKERS=$(($(nproc) < 12 ? $(nproc) : 12))
    step pytest-gpu 120 0 "$T/bin/python-ours" -m pytest -n "$WORKERS" -m gpu -ra -p no:cacheprovider --durations=25
    [[ ! $LAST =~ ^[0-9]+$ ]] || echo "    (pytest-xdist, $WORKERS workers)" >>"$DIR/summary.md"
    # Where our PPO Atari loop's time goes: the fast file with envpool's step answered from one recorded result (the
    # ceiling of the GPU and Python work), then with TF32 matrix products, as LeanRL's file has them
    gap_runs() {
        local flags rc=0
        for flags in --cached-env --tf32; do
            # shellcheck disable=SC2086
            "$T/bin/python-ours" doc/maintainers/ppo_atari_gap.py $flags -- --compile --cudagraphs $GAP --output-dir "$DIR/gap" || rc=1
        done
        return $rc
    }
    SUMMARY_LINES=6 step ppo-atari-gap 80 0 gap_runs
    # The CPU table's budgets (doc/results/cpu-2core): ours and LeanRL's fast files with --compile --cudagraphs, and
    # DQN's baseline; each algorithm only if the time it needs on an H100 is left.
    for spec in "sac_continuous_action 8000 50 90 1200" "td3_continuous_action 27000 50 100 1200" \
        "ppo_continuous_action 10240 1 80 2048" "dqn 500000 50 420 12000"; do
        read -r algo steps burnin need dry_steps <<<"$spec"
        variants=compile_cudagraphs,leanrl_compile_cudagraphs
        [ "$algo" = dqn ] && variants=baseline,$variants
        extra=()
        if [ $DRY = 1 ]; then # run.sh's --quick budgets
            steps=$dry_steps burnin=1 need=60
            case "$algo" in
            sac* | td3*) extra=(--learning-starts 1000) ;;
            ppo*) extra=(--num-steps 512) ;;
            esac
        fi
        step "$algo" "$need" 0 ./run.sh --leanrl "$DEPS/LeanRL" --leanrl-python "$T/bin/python-leanrl-2024" --scripts "$algo" \
            --variants "$variants" --seeds 1 --total-timesteps "$steps" --out "$DIR/$algo" -- --measure-burnin "$burnin" "${extra[@]}"
    done
fi
ended="every step that ran exited 0"
[ -z "$FAILED" ] || ended="steps that failed:$FAILED"
echo "- part $PART: $((SECONDS - START)) s of $BUDGET; $ended" | tee -a "$DIR/summary.md"
pack_dir
echo
cat "$DIR/summary.md"
[ -z "$FAILED" ] # exit 1 where a step failed
