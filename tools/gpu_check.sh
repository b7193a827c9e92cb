#!/usr/bin/env bash
# The GPU check on one lent GPU machine, in two commands (doc/maintainers/gpu-check.md, "The check of today's code"):
# part 1, PPO Atari beside LeanRL's PyTorch and JAX files and envpool's own rate; part 2, every gpu test, where our
# PPO Atari loop spends its time, then the other algorithms beside LeanRL's while time remains.
#
#   tools/gpu_check.sh pack --leanrl DIR       on a machine with network, before: fills .gpu-deps/
#   tools/gpu_check.sh 1 DIR [options]         PPO Atari (ours, LeanRL's torch and JAX files, 2 seeds) and
#                                                        envpool's rate (300 s)
#   tools/gpu_check.sh 2 DIR [options]         the gpu tests, the gap runs, then the other algorithms (400 s)
#
# Options of 1 and 2:
#   --budget-s S      the command's own time in seconds, its setup (unpacking, the version record) included (part 1:
#                     300, part 2: 400 by default): a step starts only if the time it needs is left (after what later,
#                     more important steps keep), and runs under its own cap (timeout), never past what is left;
#                     summary.md says which steps were cut or skipped
#   --archive FILE    after each step, DIR as one .tgz here, whole and under 16 MiB (no *.pt; where it would be
#                     larger, the run folders' event files and plots leave it, then all but the logs and tables)
#   --extras          part 1 only: after its own steps, envpool's other modes, PPO Atari's two baselines and our
#                     fast PPO Atari with --compile in torch.compile's default mode and in reduce-overhead (for a later
#                     machine: 1 DIR --extras --only envpool-extras,ppo-atari-baselines,compile-modes)
#   --only STEP,...   only these steps of the part (their names are summary.md's), e.g. a later machine's rerun of
#                     part 2's dqn with the whole budget: 2 DIR --only dqn
#   --dry             tiny budgets, and no CUDA needed: the check's dry run on a CPU machine, where every step runs
#                     and only what needs CUDA fails (the gpu tests refuse, --cudagraphs falls back)
# Environment: PYTHON (default python3), the interpreter with torch (and jax, flax, optax for LeanRL's JAX file);
# GPU_CHECK_CACHE (default .gpu-cache/ in the checkout, ignored by git): the inductor and JAX compilation caches, kept
# between the two commands on a machine that stays warm; GPU_CHECK_PPO_FLAGS: flags added after the check's own to
# every PPO Atari run; GPU_CHECK_RUN_CAP_S: every PPO Atari run's cap, in seconds.
#
# Exit status: 0 every step ran and exited 0; 1 a step failed or was cut, or the setup failed (its traceback on
# stderr and in logs/setup.log); 3 none failed, but steps were skipped for time; 2 bad input. The last line printed
# (and summary.md's) names the steps that failed, were cut and were skipped.
#
# DIR gets machine.txt (the GPU, cores, versions, the pack's wheels, the caches, and the commits of this checkout and
# of LeanRL's), summary.md (a line per step: its exit status and time, and its results), logs/ (each step's output),
# and run.sh's folders (ppo-atari/, envpool/, ...: results.csv, results.md, runs.tsv, each run's log and metrics). It
# must not exist, or be empty.
#
# .gpu-deps/ (ignored by git; `pack` makes it) travels with the checkout: site.tar.xz (the libraries the scripts
# need that the GPU machine's image lacks, cp312 wheels unpacked and trimmed; wheels.txt lists them), leanrl/
# (tensordict 0.13.0's wheel, put ahead of ours on the PYTHONPATH of LeanRL's PPO Atari files, and site-2024.tar.xz,
# LeanRL's numpy 1.26, gymnasium 0.29 and torchrl 0.13 ahead of that for its other files) and LeanRL/ (a checkout of
# LeanRL at 8dbb633, whose leanrl/ files run unchanged through tools/leanrl.py).
set -uo pipefail
CALLER=$PWD # DIR, --archive and --leanrl are read from here
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$CALLER/$1" ;; esac; }
DEPS=${GPU_CHECK_DEPS:-$ROOT/.gpu-deps} # (another folder: for the tests)
CACHE=$(absolute "${GPU_CHECK_CACHE:-$ROOT/.gpu-cache}")
ARCHIVE_LIMIT=${GPU_CHECK_ARCHIVE_LIMIT:-16252928} # 15.5 MiB: a returned file may have 16
usage() { sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
die() {
    echo "gpu_check.sh: error: $*" >&2
    exit 2
}

# The wheels of the pack, pinned: the versions of requirements/requirements.txt that ran (the libraries the scripts
# import, and theirs that the image lacks); the image has torch, numpy, tqdm, pandas, matplotlib, pytest,
# pytest-xdist, pytest-timeout, jax, flax, optax and chex.
OURS_WHEELS="tensordict==0.15.3 pyvers==0.2.3 gymnasium==1.4.0 farama-notifications==0.0.6 cloudpickle==3.1.3
imageio==2.38.1 tyro==1.0.17 docstring-parser==0.18.0 typeguard==4.6.1 mujoco==4.0.0 mujoco-core==4.0.0 glfw==2.11.0
pyopengl==3.1.10 envpool==1.2.5 envpool-assets==0.3.0 dm-env==1.6 optree==0.20.0 types-protobuf==7.35.1.20260906
tensorboard==2.21.0 protobuf==7.36.2 absl-py==2.5.1"
# LeanRL's 2024 stack (requirements/requirements-leanrl.txt): tensordict 0.13 for its PPO Atari files; torchrl's
# replay buffer (SAC, TD3, DQN) and gymnasium 0.29's wrappers and autoreset (all four), whose checker wants numpy 1
LEANRL_WHEELS="numpy==1.26.4 gymnasium==0.29.1 torchrl==0.13.3 hoptorch==0.1.4"

pack() { # .gpu-deps/: ours as cp312 wheels unpacked into one archive, tensordict 0.13.0's wheel, a LeanRL checkout
    local leanrl="" work plat=() p fam
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
    # shellcheck disable=SC2086
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" \
        -d "$work/whl" $OURS_WHEELS || die "pack: pip download failed"
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
    # shellcheck disable=SC2086
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" \
        -d "$work/whl-2024" $LEANRL_WHEELS || die "pack: pip download of LeanRL's 2024 stack failed"
    mkdir -p "$work/site-2024"
    for p in "$work"/whl-2024/*.whl; do python3 -m zipfile -e "$p" "$work/site-2024"; done
    find "$work/site-2024" -name __pycache__ -type d -prune -exec rm -rf {} +
    tar -C "$work/site-2024" -cJf "$new/leanrl/site-2024.tar.xz" . || die "pack: tar failed"
    (cd "$work/whl" && ls) >"$new/wheels.txt"
    (cd "$new/leanrl" && ls ./*.whl | sed 's|^\./||' && cd "$work/whl-2024" && ls) | sed 's/^/for LeanRL: /' >>"$new/wheels.txt"
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
BUDGET=300 ARCHIVE="" DRY=0 EXTRAS=0 ONLY=""
[ "$PART" = 2 ] && BUDGET=400
while [ $# -gt 0 ]; do
    case "$1" in
    --budget-s) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] && [ "$2" -ge 60 ] || die "--budget-s: seconds, 60 or more, not '${2:-}'"; BUDGET=$2 && shift 2 ;;
    --archive) [ -n "${2:-}" ] || die "--archive FILE"; ARCHIVE=$(absolute "$2") && shift 2 ;;
    --dry) DRY=1 && shift ;;
    --only) [ -n "${2:-}" ] || die "--only STEP,...: one or more of part $PART's steps"; ONLY=$2 && shift 2 ;;
    --extras) [ "$PART" = 1 ] || die "--extras: an option of part 1"; EXTRAS=1 && shift ;;
    *) die "unknown option $1 (--help)" ;;
    esac
done
CAP=${GPU_CHECK_RUN_CAP_S:-}
[ -z "$CAP" ] || [[ $CAP =~ ^[1-9][0-9]*$ ]] || die "GPU_CHECK_RUN_CAP_S: seconds, not '$CAP'"
SEED_STEPS="ppo-atari-seed1-ours ppo-atari-seed1-leanrl ppo-atari-seed1-jax ppo-atari-seed2-jax ppo-atari-seed2-leanrl ppo-atari-seed2-ours"
STEPS_1="$SEED_STEPS envpool envpool-extras ppo-atari-baselines compile-modes"
STEPS_2="pytest-collect pytest-gpu ppo-atari-gap sac_continuous_action td3_continuous_action ppo_continuous_action dqn"
[ "$PART" = 1 ] && STEPS=$STEPS_1 || STEPS=$STEPS_2
for name in ${ONLY//,/ }; do
    in_steps=0
    for known in $STEPS; do [ "$name" = "$known" ] && in_steps=1; done
    [ $in_steps = 1 ] || die "--only $name: not a step of part $PART (${STEPS// /, })"
done
[[ ",$ONLY," != *,envpool-extras,* && ",$ONLY," != *,ppo-atari-baselines,* && ",$ONLY," != *,compile-modes,* ]] || EXTRAS=1
DIR=$(absolute "$DIR")
[ ! -e "$DIR" ] || [ -z "$(ls -A "$DIR")" ] || die "$DIR holds an earlier check: give a new folder"
[ -z "$ARCHIVE" ] || [ -d "$(dirname "$ARCHIVE")" ] || die "--archive $ARCHIVE: no folder $(dirname "$ARCHIVE")"
[ -f "$DEPS/site.tar.xz" ] && [ -d "$DEPS/LeanRL/leanrl" ] && [ -f "$DEPS/leanrl/site-2024.tar.xz" ] && compgen -G "$DEPS/leanrl/tensordict-0.13.0-*.whl" >/dev/null ||
    die "no .gpu-deps/ (site.tar.xz, leanrl/tensordict-0.13.0-*.whl, leanrl/site-2024.tar.xz, LeanRL/): make it with '$0 pack --leanrl DIR' first"
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null || die "no $PY here: set PYTHON"
mkdir -p "$DIR/logs" "$CACHE" && DIR=$(cd "$DIR" && pwd)
START=$SECONDS
FAILED="" CUT="" SKIPPED=""

pack_dir() { # the folder as one archive under the limit, replaced only once whole: no *.pt (a cut run's
    # checkpoint, or one left half-written), and where that is still too large, less; the form it took is said in
    # the archive's own summary.md
    [ -n "$ARCHIVE" ] || return 0
    local base parent form
    base=$(basename "$DIR") parent=$(dirname "$DIR")
    sed -i '/^    (the archive holds the .* form/d' "$DIR/summary.md"
    for form in whole lean least; do
        [ $form = whole ] || echo "    (the archive holds the $form form: the whole folder was over $ARCHIVE_LIMIT bytes)" >>"$DIR/summary.md"
        case $form in
        whole) tar czf "$ARCHIVE.part" -C "$parent" --exclude='*.pt' --exclude='*.pt.tmp' "$base" ;;
        lean) tar czf "$ARCHIVE.part" -C "$parent" --exclude='*.pt' --exclude='*.pt.tmp' --exclude='*tfevents*' \
            --exclude='*.png' --exclude='*.mp4' "$base" ;;
        least) (cd "$parent" && find "$base" -maxdepth 2 \( -name '*.md' -o -name '*.txt' -o -name '*.json' -o \
            -name '*.csv' -o -name '*.tsv' -o -path "$base/logs/*" \) -type f -size -4M -print0 |
            tar czf "$ARCHIVE.part" --null -T -) ;;
        esac
        if [ -f "$ARCHIVE.part" ] && [ "$(stat -c %s "$ARCHIVE.part")" -le "$ARCHIVE_LIMIT" ]; then
            mv "$ARCHIVE.part" "$ARCHIVE" && return 0
        fi
        sed -i '/^    (the archive holds the .* form/d' "$DIR/summary.md"
    done
    rm -f "$ARCHIVE.part"
    echo "gpu_check.sh: warning: could not write $ARCHIVE under $ARCHIVE_LIMIT bytes" >&2
}

setup_failed() { # what failed, said with its traceback, recorded and archived: no step runs
    echo "gpu_check.sh: setup failed: $*" >&2
    [ -s "$DIR/logs/setup.log" ] && sed 's/^/    /' "$DIR/logs/setup.log" >&2
    {
        echo "- setup: failed: $*"
        [ -s "$DIR/logs/setup.log" ] && tail -20 "$DIR/logs/setup.log" | sed 's/^/    /'
        echo "- part $PART: $((SECONDS - START)) s of $BUDGET; setup failed, no step ran"
    } >>"$DIR/summary.md"
    pack_dir
    exit 1
}
echo "# GPU check, part $PART" >"$DIR/summary.md"

# The libraries: ours first for our files; LeanRL's tensordict 0.13 ahead of them for LeanRL's (its JAX file imports
# neither torch nor tensordict, and takes jax, flax and optax from the image).
T=${TMPDIR:-/tmp}/gpu-check.$$
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/site" "$T/site-leanrl" "$T/site-leanrl-2024" "$T/bin"
{ tar xJf "$DEPS/site.tar.xz" -C "$T/site" && "$PY" -m zipfile -e "$DEPS"/leanrl/tensordict-0.13.0-*.whl "$T/site-leanrl" &&
    tar xJf "$DEPS/leanrl/site-2024.tar.xz" -C "$T/site-leanrl-2024"; } >"$DIR/logs/setup.log" 2>&1 ||
    setup_failed "cannot unpack $DEPS"
wrapper() { # NAME FOLDER...: a python with these folders first on its PYTHONPATH
    local name=$1 path
    shift
    path=$(IFS=:; echo "$*")
    printf '#!/bin/sh\nPYTHONPATH=%q${PYTHONPATH:+:$PYTHONPATH} exec %q "$@"\n' "$path" "$(command -v "$PY")" >"$T/bin/$name"
    chmod +x "$T/bin/$name"
}
wrapper python-ours "$T/site"
wrapper python-leanrl "$T/site-leanrl" "$T/site"
wrapper python-leanrl-2024 "$T/site-leanrl-2024" "$T/site-leanrl" "$T/site"
# The compilation caches live across the two commands on a machine that stays warm (part 2 reuses part 1's work)
CACHED_FILES=$(find "$CACHE" -type f 2>/dev/null | wc -l)
export PYTHONUNBUFFERED=1 MUJOCO_GL=disable MPLBACKEND=Agg PYTHON="$T/bin/python-ours" \
    TORCHINDUCTOR_CACHE_DIR="$CACHE/inductor" JAX_COMPILATION_CACHE_DIR="$CACHE/jax"
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
for name in ('torch', 'tensordict', 'envpool', 'gymnasium', 'mujoco', 'numpy', 'tyro', 'jax', 'flax', 'optax', 'chex', 'xdist', 'pytest_timeout'):
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
    echo "cache: $CACHE, $CACHED_FILES files at the start"
    echo "part: $PART; budget: $BUDGET s; dry: $DRY${ONLY:+; only: $ONLY}$([ $EXTRAS = 0 ] || echo "; extras")${GPU_CHECK_PPO_FLAGS:+; PPO Atari flags: $GPU_CHECK_PPO_FLAGS}${CAP:+; run cap: $CAP s}"
    echo "pack (.gpu-deps/wheels.txt):"
    sed 's/^/    /' "$DEPS/wheels.txt" 2>/dev/null || echo "    (no wheels.txt)"
} >"$DIR/machine.txt" 2>&1
cat "$DIR/machine.txt"
sed -i "1s|.*|# GPU check, part $PART ($(sed -n 's/^commit: //p' "$DIR/machine.txt"), $(sed -n 's/^gpu: //p' "$DIR/machine.txt"))|" "$DIR/summary.md"
"$T/bin/python-ours" -c "import tensordict, gymnasium, envpool, tyro, mujoco, tensorboard, torch" >"$DIR/logs/setup.log" 2>&1 ||
    setup_failed "a library the scripts import is missing (the import's traceback below, and in logs/setup.log)"
if [ $DRY = 0 ] && ! grep -q '^cuda: True' "$DIR/machine.txt"; then
    echo "torch sees no CUDA device (machine.txt: $(grep '^cuda:' "$DIR/machine.txt"))" >"$DIR/logs/setup.log"
    setup_failed "no CUDA here: stop (--dry runs the check without it)"
fi

# step NAME NEED CAP KEEP COMMAND...: runs if NEED s are left after KEEP s kept for later steps, under timeout at CAP
# s or what is left, whichever is less (CAP 0: what is left); its line in summary.md, then the archive
step() {
    local name=$1 need=$2 cap=$3 keep=$4 left rc t signal=TERM
    shift 4
    if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$name,"* ]]; then
        LAST=unselected
        return 0
    fi
    left=$((BUDGET - (SECONDS - START) - keep))
    if [ $left -lt "$need" ]; then
        echo "- $name: skipped, $left s left of the $need s it needs" | tee -a "$DIR/summary.md"
        SKIPPED+=" $name" LAST=skipped
        return 0
    fi
    [ "$cap" -gt 0 ] && [ "$cap" -lt $left ] && left=$cap
    [ "$name" = pytest-gpu ] && signal=INT # pytest, interrupted, still prints what ran and what failed
    t=$SECONDS
    echo "[$(date -u +%H:%M:%S)] $name: $*" | tee "$DIR/logs/$name.log"
    if declare -F "$1" >/dev/null; then set -- bash -c "$(declare -f "$1"); $1"; fi # a function of this script
    timeout -s $signal -k 15 "$left" "$@" >>"$DIR/logs/$name.log" 2>&1
    rc=$?
    if ((rc == 124 || rc == 137)); then
        echo "- $name: exit $rc (cut at $left s), $((SECONDS - t)) s" | tee -a "$DIR/summary.md"
        CUT+=" $name"
    else
        echo "- $name: exit $rc, $((SECONDS - t)) s" | tee -a "$DIR/summary.md"
        [ $rc = 0 ] || FAILED+=" $name"
    fi
    # its results: run.sh's line per run, pytest's outcome, envpool's rate per mode and the PPO runs as fractions of it
    if [ "$name" = pytest-gpu ]; then
        pytest_report "$DIR/logs/$name.log"
    else
        grep -h 'collected\|^PPO Atari fast file\|^float32\|^env steps\|runs (\|finished in\|: failed\|: terminated\|Error\|error:\|^# envpool\|^Median\|^| [a-z_]* | [0-9,]* | [0-9]*%' \
            "$DIR/logs/$name.log" | grep -v '^\[' | tail -"${SUMMARY_LINES:-12}" | cut -c1-240 | sed 's/^/    /'
    fi | tee -a "$DIR/summary.md"
    pack_dir
    LAST=$rc
}

pytest_report() { # LOG: pytest -v's outcome per test, also where it was cut: the counts, then each failure by name
    local log=$1 collected passed failed errors skipped
    collected=$(grep -o '\[[0-9]* items\?\]' "$log" | tail -1 | grep -o '[0-9]*') # pytest-xdist's count of those selected
    [ -n "$collected" ] || collected=$(grep -o '[0-9]* selected' "$log" | tail -1 | grep -o '[0-9]*')
    passed=$(grep -c ' PASSED ' "$log") failed=$(grep -c ' FAILED ' "$log") errors=$(grep -c ' ERROR ' "$log")
    skipped=$(grep -c ' SKIPPED ' "$log")
    echo "    ${collected:-?} collected; reported: $passed passed, $failed failed, $errors errors, $skipped skipped; not reported: $((${collected:-0} - passed - failed - errors - skipped))"
    grep -h ' FAILED \| ERROR ' "$log" | grep -o '\(FAILED\|ERROR\) tests/[^ ]*' | sort -u | sed 's/^/    /'
    grep -h '^=\+ .* =\+$\|^ERROR:\|KeyboardInterrupt\|Timeout' "$log" | grep -v 'short test summary\|slowest' | tail -3 | cut -c1-240 |
        sed 's/^/    /'
}

if [ $DRY = 1 ]; then # budgets for a 2-core CPU: every step runs, in minutes
    PPO_STEPS=3072 BURNIN=1 RATE="--repeats 1 --batches 100"
else # 50 iterations: no checkpoint (every 100,000 steps) falls inside the timed window
    PPO_STEPS=51200 BURNIN=2 RATE="--repeats 2 --batches 2000"
fi
GAP="--total-timesteps 20480 --measure-burnin 2"
[ $DRY = 1 ] && GAP="--total-timesteps 3072 --measure-burnin 1"
export T DIR RATE GAP O=$DIR/ppo-atari

envpool_rate() { # envpool alone, the same 8 Breakout envs: synchronous (each PPO Atari run as a fraction of it), 8 threads
    local results=() rc=0
    mkdir -p "$DIR/envpool"
    [ -f "$O/results.csv" ] && results=(--results "$O/results.csv")
    # shellcheck disable=SC2086
    "$T/bin/python-ours" tools/envpool_rate.py $RATE "${results[@]}" --out "$DIR/envpool/rate.json" || rc=1
    # shellcheck disable=SC2086
    "$T/bin/python-ours" tools/envpool_rate.py --threads 8 $RATE --out "$DIR/envpool/rate-threads-8.json" || rc=1
    return $rc
}
envpool_extras() { # envpool's other modes: for what a loop that overlaps env steps with the policy could reach
    local m rc=0
    mkdir -p "$DIR/envpool"
    for m in "--threads 8 --no-episodic-life" "--mode async --batch-size 4" "--mode pools" "--mode async --num-envs 16 --batch-size 8"; do
        # shellcheck disable=SC2086
        "$T/bin/python-ours" tools/envpool_rate.py $m $RATE --out "$DIR/envpool/rate$(echo $m | tr -c 'a-z0-9\n' - | tr -s -).json" || rc=1
    done
    return $rc
}

if [ "$PART" = 1 ]; then
    # PPO Atari from a random agent on both sides: ours with --compile --cudagraphs, LeanRL's torch file with the same
    # flags, LeanRL's JAX file; one run.sh call per run, each under its own cap (a hang costs that run), seed 2 in the
    # reversed order. Needs and caps: an H100's PPO Atari (3,583 steps/s after 16 s of compilation) and the process's
    # start. Every run keeps 25 s for envpool's rate; the JAX runs keep 90 s more for the torch runs after them.
    read -r -a extra <<<"${GPU_CHECK_PPO_FLAGS:-}"
    for spec in "1 ours compile_cudagraphs" "1 leanrl leanrl_compile_cudagraphs" "1 jax leanrl_jax" \
        "2 jax leanrl_jax" "2 leanrl leanrl_compile_cudagraphs" "2 ours compile_cudagraphs"; do
        read -r seed side variant <<<"$spec"
        keep=25 cap=75
        [ "$side" = jax ] && keep=115 cap=90
        [ $DRY = 1 ] && cap=$((cap * 4)) # a 2-core CPU compiles for a minute or more
        step "ppo-atari-seed$seed-$side" 45 "${CAP:-$cap}" "$keep" ./run.sh "${LEANRL[@]}" --append --scripts ppo_atari \
            --variants "$variant" --seeds "$seed" --total-timesteps "$PPO_STEPS" --out "$O" -- --measure-burnin "$BURNIN" "${extra[@]}"
    done
    SUMMARY_LINES=20 step envpool 25 0 0 envpool_rate
    cp "$DIR/logs/envpool.log" "$DIR/envpool/envpool_rate.md" 2>/dev/null
    if [ $EXTRAS = 1 ]; then
        SUMMARY_LINES=20 step envpool-extras 30 0 0 envpool_extras
        # PPO Atari's two baselines, CleanRL's file and LeanRL's copy of it, with the same budget
        step ppo-atari-baselines 100 0 0 ./run.sh "${LEANRL[@]}" --scripts ppo_atari --variants baseline,leanrl --seeds 1 \
            --total-timesteps "$PPO_STEPS" --out "$DIR/ppo-atari-baselines" -- --measure-burnin "$BURNIN"
        # torch.compile's own CUDA graphs (--compile-mode reduce-overhead, cudagraph trees) against its default mode
        # (no graphs), ours, one seed, the same budget: whether torch 2.10's regression of reduce-overhead (pytorch
        # #174575) holds on this torch, for what doc/tricks.md says of the mode
        step compile-modes 100 0 0 ./run.sh --scripts ppo_atari --variants compile,compile_reduce_overhead --seeds 1 \
            --total-timesteps "$PPO_STEPS" --out "$DIR/compile-modes" -- --measure-burnin "$BURNIN"
    fi
else
    # Every gpu test, reported test by test even where it is cut (8 workers: the count measured, 208 + 125 s cold on
    # an H200 in two calls, 183 + 145 s on an H100; here one call, after part 1 warmed the cache), keeping 80 s for the
    # gap runs: with the default budget and a setup of up to 40 s it starts; then the other algorithms.
    if [ $DRY = 1 ]; then # every test module imports in this environment (-m gpu itself needs CUDA)
        step pytest-collect 10 0 0 "$T/bin/python-ours" -m pytest --collect-only -q -p no:cacheprovider
    fi
    timeout_flag=()
    grep -q '^pytest_timeout: missing' "$DIR/machine.txt" || timeout_flag=(--timeout 150) # a hung test: 150 s at most
    step pytest-gpu 280 0 80 "$T/bin/python-ours" -m pytest -n 8 -v "${timeout_flag[@]}" -m gpu -ra -p no:cacheprovider --durations=25
    [ "$LAST" = skipped ] || [ "$LAST" = unselected ] || echo "    (pytest-xdist, 8 workers${timeout_flag[*]:+, --timeout 150 a test})" >>"$DIR/summary.md"
    # Where our PPO Atari loop's time goes: the fast file with envpool's step answered from one recorded result (the
    # ceiling of the GPU and Python work), then with TF32 matrix products, as LeanRL's file has them
    gap_runs() {
        local flags rc=0
        for flags in --cached-env --tf32; do
            # shellcheck disable=SC2086
            "$T/bin/python-ours" tools/ppo_atari_gap.py $flags -- --compile --cudagraphs $GAP --output-dir "$DIR/gap" || rc=1
        done
        return $rc
    }
    SUMMARY_LINES=6 step ppo-atari-gap 80 0 0 gap_runs
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
        step "$algo" "$need" 0 0 ./run.sh --leanrl "$DEPS/LeanRL" --leanrl-python "$T/bin/python-leanrl-2024" --scripts "$algo" \
            --variants "$variants" --seeds 1 --total-timesteps "$steps" --out "$DIR/$algo" -- --measure-burnin "$burnin" "${extra[@]}"
    done
fi
ended=""
[ -z "$FAILED" ] || ended+="; failed:$FAILED"
[ -z "$CUT" ] || ended+="; cut:$CUT"
[ -z "$SKIPPED" ] || ended+="; skipped for time:$SKIPPED"
echo "- part $PART: $((SECONDS - START)) s of $BUDGET${ended:-; every step ran and exited 0}" | tee -a "$DIR/summary.md"
pack_dir
echo
cat "$DIR/summary.md"
if [ -n "$FAILED$CUT" ]; then exit 1; fi
if [ -n "$SKIPPED" ]; then exit 3; fi
exit 0
