"""What a checkpoint costs with SAC's full replay buffer (the default 1M transitions, HalfCheetah-v4), for both SAC
files: its bytes, the seconds to write it (Run.save_checkpoint, three times) and to read it back (load_checkpoint and
load_states), and how much the process's memory grows over the writes (its peak, VmHWM, reset before them: a copy of
the buffer would add its 169 MB). The buffer is filled with random rows; the networks are the scripts' own.

    python tools/checkpoint_cost.py                                   # prints a line per file
    python tools/checkpoint_cost.py --out doc/results/cpu-2core-micro  # and writes checkpoint_cost.csv there
"""

import argparse
import csv
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from helpers.scripts import load_script  # noqa: E402


def memory(field):
    """VmRSS or VmHWM (the peak) of this process, in bytes."""
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith(field)).split()[1]) * 1024


parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument(
    "--out", help="a results folder for checkpoint_cost.csv (its machine record: tools/micro.py or aggregate.py)"
)
options = parser.parse_args()
if options.out:  # beside tools/micro.py's timings, whose machine record it shares: the same commit, or none yet
    described = ["git", "describe", "--always", "--dirty", "--abbrev=12"]
    here = subprocess.run(described, capture_output=True, text=True, cwd=pathlib.Path(__file__).parents[1]).stdout.strip()
    record = pathlib.Path(options.out) / "machine.json"
    if not record.exists():
        aggregate = [sys.executable, str(pathlib.Path(__file__).with_name("aggregate.py")), "--record-machine", options.out]
        subprocess.run(aggregate, check=True, stdout=subprocess.DEVNULL)
    elif json.loads(record.read_text())["git_commit"] != here:
        sys.exit(f"checkpoint_cost.py: error: --out: {record} names another commit than {here}; use another folder")
rows = []
for script in ["sac_continuous_action_torchcompile", "sac_continuous_action"]:
    module = load_script(script)
    args = module.Args(env_id="HalfCheetah-v4", cuda=False)
    envs = gym.vector.SyncVectorEnv([module.make_env(args.env_id, 1, 0, False, None)], autoreset_mode="SameStep")
    envs.reset(seed=1)
    obs_dim, action_dim = envs.single_observation_space.shape[0], envs.single_action_space.shape[0]
    rb = module.ReplayBuffer(args.buffer_size, obs_dim, action_dim, torch.device("cpu"))
    for column in rb.columns if hasattr(rb, "columns") else [rb.storage.numpy()]:
        column[:] = np.random.randn(*column.shape)
    rb.pos, rb.full = 0, True
    low, high = envs.single_action_space.low, envs.single_action_space.high
    if hasattr(module, "make_sac"):
        sac = module.make_sac(args, obs_dim, action_dim, low, high, torch.device("cpu"))
        learned = dict(sac.learned, rb=rb)
    else:
        qf1, qf2 = module.SoftQNetwork(obs_dim, action_dim), module.SoftQNetwork(obs_dim, action_dim)
        learned = dict(actor=module.Actor(obs_dim, action_dim, low, high), qf1=qf1, qf2=qf2, rb=rb)
    run = module.Run(args)
    run.run_dir = tempfile.mkdtemp()
    before = memory("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak starts again from here
    times = []
    for _ in range(3):
        start = time.perf_counter()
        run.save_checkpoint(1000, learned=module.states(learned), envs=module.env_state(envs))
        times.append(time.perf_counter() - start)
    grew = memory("VmHWM") - before
    path = pathlib.Path(run.run_dir) / "checkpoint.pt"
    size = os.path.getsize(path)
    args.resume = run.run_dir
    start = time.perf_counter()
    module.load_states(learned, module.load_checkpoint(args)["learned"])
    read = time.perf_counter() - start
    path.unlink()
    os.rmdir(run.run_dir)
    print(
        f"{script}: {size / 1e6:.1f} MB, written in {min(times):.2f}-{max(times):.2f} s, read back in {read:.2f} s; "
        f"peak memory over the writes +{grew / 1e6:.1f} MB"
    )
    rows.append(
        dict(script=f"{script}.py", bytes=size, write_s_min=f"{min(times):.3f}", write_s_max=f"{max(times):.3f}",
             read_s=f"{read:.3f}", peak_growth_bytes=grew, buffer_rows=args.buffer_size, env_id=args.env_id)
    )  # fmt: skip
if options.out:
    with open(pathlib.Path(options.out) / "checkpoint_cost.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
