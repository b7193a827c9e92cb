"""The same programs before and after a change that should change no behaviour (a refactor of the scripts): seeded
short runs of all twelve files, each with a checkpoint mid-run, --save-model and an evaluation, then a run stopped by a
SIGTERM after two rows of metrics and resumed; what they wrote, fingerprinted into one JSON file.

    python tools/same_programs.py --scripts OLD/scripts --out /tmp/before.json
    python tools/same_programs.py --scripts scripts --out /tmp/after.json --compare /tmp/before.json

The fingerprint of a run: metrics.csv (every column but the clock's: sps, wall_time_s), summary.json (every field but
the clock's and the paths), model.pt (a hash of each tensor, and its other entries) and checkpoint.pt's tensors
(hashed). A resumed run is recorded by whether its metrics and model are the straight run's (the gymnasium files': yes;
envpool's episodes restart on a resume, so the Atari files' differ wherever the SIGTERM lands). With --compare, it
prints each difference and exits 1 where there is one.
"""

import argparse
import csv
import hashlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time

import torch

PENDULUM = ["--env-id", "Pendulum-v1"]
OFF_POLICY = [*PENDULUM, "--learning-starts", "200", "--buffer-size", "500", "--batch-size", "32", "--log-interval", "50"]
DQN = ["--learning-starts", "500", "--buffer-size", "1000", "--train-frequency", "2", "--log-interval", "250"]
PPO = [*PENDULUM, "--num-envs", "2", "--num-steps", "64", "--num-minibatches", "4", "--update-epochs", "2"]
ATARI = ["--num-envs", "2", "--num-steps", "32", "--num-minibatches", "2", "--update-epochs", "2"]
# each file: its flags, its budget (halved for the stopped run) and its checkpoint interval
RUNS = {
    "dqn": (DQN, 3000, 1000),
    "dqn_torchcompile": (DQN, 3000, 1000),
    "sac_continuous_action": (OFF_POLICY, 600, 200),
    "sac_continuous_action_torchcompile": (OFF_POLICY, 600, 200),
    "td3_continuous_action": (OFF_POLICY, 600, 200),
    "td3_continuous_action_torchcompile": (OFF_POLICY, 600, 200),
    "ppo_continuous_action": (PPO, 1024, 256),
    "ppo_continuous_action_torchcompile": (PPO, 1024, 256),
    "ppo_continuous_action_ray_torchcompile": ([*PPO, "--env-runners", "1"], 1024, 256),
    "ppo_atari": (ATARI, 512, 128),
    "ppo_atari_torchcompile": (ATARI, 512, 128),
    "ppo_atari_multigpu_torchcompile": (ATARI, 512, 128),
}
CLOCK = {"sps", "wall_time_s", "warmup_s", "time", "first_update_at"}  # (first_update_at: a Unix time)
PATHS = {"output_dir", "resume", "eval_model", "script", "_run_dir", "nodes_used", "runner_nodes"}  # and Ray's node ids


def tensor_hash(value):
    if isinstance(value, torch.Tensor):
        return hashlib.sha256(value.detach().cpu().contiguous().numpy().tobytes()).hexdigest()[:16]
    if isinstance(value, dict):
        return {str(k): tensor_hash(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [tensor_hash(v) for v in value]
    return repr(value) if not isinstance(value, (int, float, str, bool, type(None))) else value


def fingerprint(run_dir):
    run_dir = pathlib.Path(run_dir)
    with open(run_dir / "metrics.csv", newline="") as f:
        rows = [{k: v for k, v in row.items() if k not in CLOCK} for row in csv.DictReader(f)]
    summary = json.loads((run_dir / "summary.json").read_text())
    summary = {k: v for k, v in summary.items() if k not in CLOCK | PATHS}
    summary["args"] = {k: v for k, v in summary.get("args", {}).items() if k not in PATHS}
    found = dict(metrics=rows, summary=summary)
    for name in ("model.pt", "checkpoint.pt"):
        if (run_dir / name).is_file():
            content = torch.load(run_dir / name, weights_only=False)
            if isinstance(content.get("args"), dict):  # the run's own paths
                content["args"] = {k: v for k, v in content["args"].items() if k not in PATHS}
            if name == "checkpoint.pt":  # all the loop needs to go on; not the run's log (its clock) or the script's name
                content = {k: v for k, v in content.items() if k not in ("log", "script")}
            found[name] = tensor_hash(content)
    return found


def run(scripts, stem, flags, tmp, stop_after_rows=None):
    """The run's folder; with stop_after_rows, the run is sent SIGTERM once metrics.csv has that many rows (it
    checkpoints and stops at the end of its iteration)."""
    out = pathlib.Path(tmp) / "runs"
    cmd = [sys.executable, str(pathlib.Path(scripts).resolve() / f"{stem}.py"), "--seed", "1", "--output-dir", str(out)]
    cmd += flags
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(cmd, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    while stop_after_rows is not None and proc.poll() is None:
        metrics = list(out.glob("*/metrics.csv"))
        if metrics and len(metrics[0].read_text().splitlines()) > stop_after_rows:
            proc.send_signal(signal.SIGTERM)
            break
        time.sleep(0.05)
    stdout, stderr = proc.communicate()
    summary = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    if not summary.endswith("summary.json"):
        raise SystemExit(f"{stem}: {' '.join(cmd)} exited {proc.returncode}:\n{stderr[-2000:]}")
    return pathlib.Path(summary).parent


def differences(before, after, where=""):
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after)):
            if key not in before or key not in after:
                yield f"{where}/{key}: only {'after' if key not in before else 'before'}"
            else:
                yield from differences(before[key], after[key], f"{where}/{key}")
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for i, (b, a) in enumerate(zip(before, after)):
            yield from differences(b, a, f"{where}[{i}]")
    elif before != after:
        yield f"{where}: {str(before)[:80]} -> {str(after)[:80]}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scripts", required=True, help="the scripts folder to run")
    parser.add_argument("--out", required=True, help="the JSON file of fingerprints to write")
    parser.add_argument("--compare", help="an earlier JSON file of fingerprints: print the differences, exit 1 if any")
    parser.add_argument("--only", help="these files only (comma-separated stems)")
    args = parser.parse_args()
    stems = args.only.split(",") if args.only else list(RUNS)
    found = {}
    for stem in stems:
        flags, budget, interval = RUNS[stem]
        common = [*flags, "--checkpoint-interval", str(interval), "--save-model"]
        with tempfile.TemporaryDirectory() as tmp:
            straight = run(args.scripts, stem, [*common, "--total-timesteps", str(budget), "--eval-episodes", "2"], tmp)
            found[stem] = dict(straight=fingerprint(straight))
        with tempfile.TemporaryDirectory() as tmp:
            stopped = run(args.scripts, stem, [*common, "--total-timesteps", str(budget)], tmp, stop_after_rows=2)
            resumed = run(args.scripts, stem, [*common, "--total-timesteps", str(budget), "--resume", str(stopped)], tmp)
            again = fingerprint(resumed)
        # where the SIGTERM lands varies: what is fingerprinted is whether the resumed run ends as the straight one
        straight = found[stem]["straight"]  # (its model.pt's args hold --eval-episodes: the weights are compared)
        found[stem]["resumed as straight"] = dict(
            metrics=again["metrics"] == straight["metrics"], model=again["model.pt"]["model"] == straight["model.pt"]["model"]
        )
        print(f"{stem}: fingerprinted; resumed as straight: {found[stem]['resumed as straight']}", flush=True)
    pathlib.Path(args.out).write_text(json.dumps(found, indent=1, sort_keys=True))
    if args.compare:
        before = json.loads(pathlib.Path(args.compare).read_text())
        found_differences = list(differences({k: before.get(k) for k in found}, found))
        for line in found_differences:
            print(line)
        print(f"{len(found_differences)} differences in {len(found)} files")
        sys.exit(1 if found_differences else 0)


if __name__ == "__main__":
    main()
