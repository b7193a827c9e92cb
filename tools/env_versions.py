"""Whether CleanRL's MuJoCo tasks are another task on today's libraries: the same env, reset seed and actions, played
by this Python and by others (each with its own gymnasium and MuJoCo), step by step side by side.

    python3.11 -m venv ../venv-cleanrl-libs  # CleanRL's pins (requirements at fe8d8a0); mujoco 2.3.3 has no wheel past 3.11
    ../venv-cleanrl-libs/bin/pip install gymnasium==0.29.1 mujoco==2.3.3 "numpy<2" imageio
    python3.11 -m venv ../venv-old-gymnasium  # the same gymnasium and numpy, today's MuJoCo: which of the two differs
    ../venv-old-gymnasium/bin/pip install gymnasium==0.29.1 mujoco==4.0.0 "numpy<2" imageio
    python tools/env_versions.py --against ../venv-cleanrl-libs/bin/python --against ../venv-old-gymnasium/bin/python \
        --out doc/results/cpu-2core-env-versions

Each Python plays every env of --env-ids twice for --steps steps: a reset with --seed, then actions drawn uniformly
from the action space by one numpy generator (seed 0) and given as float32, as the scripts give them; where an
episode ends, an unseeded reset. The first play goes on as the env does, so that its trajectories can part; the
second resets every --stretch steps as well, so that the plays keep starting again from one state (the envs' reset
streams are alike) and nearly every step is checked. It keeps every observation, reward, action, episode end and
MuJoCo's count of contacts after each step. The other Python plays as this file with --play, which needs numpy,
gymnasium and mujoco (and imageio, which gymnasium 0.29.1's MuJoCo envs import). This Python also plays the same
with its first action moved by one float32 ulp: the control, how far a difference in the last bit carries on its own
(the tasks are chaotic: any other rounding, on another CPU too, makes another trajectory before long).

env_versions.csv gets a row per env and other play, against this Python's plain play: whether the actions and the
reset were the same; the largest difference in an observation and in the reward after the first step (from the same
state and action: the physics itself); of the play in stretches, the steps checked, those whose observations before
agreed to 1e-9 and in which neither play's episode ended, how many of them ended with a contact in this Python's
play, and the largest difference one of them opened, and where (rounding opens little in one step; a contact
computed otherwise, much more); of the long play, where this Python's first ended a step with a contact, the step
where the observations first differ by more than 1e-3 (the trajectories part), and each play's sum of rewards.
machine.json and machine.md record this Python's machine and versions; each row names the other play's.
tools/tables.py writes the learning page's table from the CSV.
"""

import argparse
import csv
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
ENV_IDS = ["HalfCheetah-v4", "Hopper-v4", "Walker2d-v4"]  # the MuJoCo tasks of CleanRL's benchmarks, v4 as its files'
PARTS = ["obs", "rew", "act", "end", "con"]  # a play's arrays, as play() returns them
APART = 1e-3  # an observation this far from the other play's: the trajectories have parted
CLOSE = 1e-9  # observations this close agree: a step from them shows what one step does


def play(env_ids, steps, seed, nudge=False, stretch=None):
    """Each env played as the docstring says (with a reset every `stretch` steps too, if given): {env_id: (observations,
    rewards, actions, episode ends, contacts)}, and the versions that played."""
    import gymnasium as gym
    import mujoco

    plays = {}
    for env_id in env_ids:
        env = gym.make(env_id)
        generator = np.random.default_rng(0)
        low, high = env.action_space.low, env.action_space.high
        observations, rewards, actions, ends, contacts = [env.reset(seed=seed)[0]], [], [], [], []
        for step in range(steps):
            action = generator.uniform(low, high).astype(np.float32)
            if nudge and step == 0:  # one ulp toward zero
                action[0] = np.nextafter(action[0], np.float32(0))
            obs, reward, terminated, truncated, _ = env.step(action)
            truncated = truncated or (stretch is not None and (step + 1) % stretch == 0)
            rewards.append(reward)
            actions.append(action)
            ends.append(terminated or truncated)
            contacts.append(getattr(getattr(env.unwrapped, "data", None), "ncon", 0))  # (0: not a MuJoCo env)
            observations.append(env.reset()[0] if terminated or truncated else obs)
        env.close()
        arrays = [observations, rewards, actions, ends, contacts]
        plays[env_id] = tuple(np.array(a, np.float64 if k < 2 else None) for k, a in enumerate(arrays))
    versions = f"gymnasium {gym.__version__}, mujoco {mujoco.__version__}, numpy {np.__version__}"
    return plays, versions


def save(path, long, short, versions):
    """The long play and the play in stretches, in one file."""
    arrays = {}
    for kind, plays in [("long", long), ("short", short)]:
        arrays.update({f"{kind}.{env_id}.{part}": a for env_id, play in plays.items() for part, a in zip(PARTS, play)})
    np.savez(path, versions=np.array(versions), **arrays)


def load(path, env_ids):
    with np.load(path) as f:
        long, short = ({e: tuple(f[f"{kind}.{e}.{part}"] for part in PARTS) for e in env_ids} for kind in ["long", "short"])
        return long, short, str(f["versions"])


def compare(env_id, mine, other, mine_short, other_short, played_by, stretch):
    """A row of env_versions.csv: the other Python's plays against this Python's plain ones."""
    (obs, rew, act, _, con), (obs2, rew2, act2, _, _) = mine, other
    apart = np.abs(obs - obs2).max(1)  # row k: after step k (row 0: the reset)
    parted = np.flatnonzero(apart > APART)
    touching = np.flatnonzero(con > 0)
    (short_obs, _, _, end, short_con), (short_obs2, _, _, end2, _) = mine_short, other_short
    near = np.abs(short_obs - short_obs2).max(1)
    checked = np.flatnonzero((near[:-1] <= CLOSE) & ~end & ~end2) + 1  # the steps checked, by their row
    jump_at = int(checked[np.argmax(near[checked])]) if len(checked) else None
    return dict(
        env_id=env_id,
        played_by=played_by,
        steps=len(rew),
        stretch=stretch,
        same_actions=bool(np.array_equal(act, act2)),
        same_reset=bool(np.array_equal(obs[0], obs2[0])),
        first_step_obs_diff=float(apart[1]),
        first_step_reward_diff=float(abs(rew[0] - rew2[0])),
        checked_steps=len(checked),
        checked_contact_steps=int((short_con[checked - 1] > 0).sum()),
        largest_jump=float(near[jump_at]) if jump_at is not None else None,
        jump_at=jump_at,
        first_contact_at=int(touching[0]) + 1 if len(touching) else None,
        parted_at=int(parted[0]) if len(parted) else None,
        reward_sum=float(rew2.sum()),
        reference_reward_sum=float(rew.sum()),
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", action="append", default=[], help="another Python to play the envs (repeatable)")
    parser.add_argument("--out", default="bench/env-versions", help="the folder for env_versions.csv and the machine record")
    parser.add_argument("--env-ids", nargs="+", default=ENV_IDS, help="gymnasium ids of the envs to play (Box actions)")
    parser.add_argument("--steps", type=int, default=1000, help="steps each env is played")
    parser.add_argument("--seed", type=int, default=1, help="the first reset's seed")
    parser.add_argument("--stretch", type=int, default=20, help="the steps of a stretch in the play in stretches")
    parser.add_argument("--play", help=argparse.SUPPRESS)  # (in the other Python: play and save here)
    parser.add_argument("--nudge", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    def refuse(flag, message):
        parser.exit(2, f"env_versions.py: error: {flag}: {message}\n")

    if args.steps < 1:
        refuse("--steps", f"must be at least 1, got {args.steps}")
    if args.stretch < 1:
        refuse("--stretch", f"must be at least 1, got {args.stretch}")
    if not 0 <= args.seed < 2**32:
        refuse("--seed", f"must be in [0, 2**32), got {args.seed}")
    if args.play:
        long, versions = play(args.env_ids, args.steps, args.seed, args.nudge)
        save(args.play, long, play(args.env_ids, args.steps, args.seed, args.nudge, args.stretch)[0], versions)
        return
    if not args.against:
        refuse("--against", "give at least one other Python to play the envs")
    for python in args.against:
        if shutil.which(python) is None:
            refuse(f"--against {python}", "no program to run there")
    out = pathlib.Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        refuse("--out", f"{e.strerror}: {out}")
    import gymnasium as gym

    for env_id in args.env_ids:
        try:
            env = gym.make(env_id)
        except gym.error.Error as e:  # not registered, or a dependency missing
            refuse("--env-ids", f"{env_id}: {e}")
        space = env.action_space
        env.close()
        if not isinstance(space, gym.spaces.Box):
            refuse("--env-ids", f"{env_id} has {space} actions, not a Box of them to draw from")
    mine, versions = play(args.env_ids, args.steps, args.seed)
    mine_short = play(args.env_ids, args.steps, args.seed, stretch=args.stretch)[0]
    others = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, python in enumerate([sys.executable, *args.against]):
            path = pathlib.Path(tmp, f"{k}.npz")
            command = [python, __file__, "--play", str(path), "--steps", str(args.steps), "--seed", str(args.seed)]
            command += ["--stretch", str(args.stretch)]
            command += ["--env-ids", *args.env_ids] + (["--nudge"] if k == 0 else [])
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                refuse(f"--against {python}", f"its play failed ({(done.stderr.strip().splitlines() or ['no message'])[-1]})")
            plays, short, their_versions = load(path, args.env_ids)
            for env_id in args.env_ids:
                if plays[env_id][0].shape != mine[env_id][0].shape:
                    refuse(f"--against {python}", f"{env_id}'s observations are {plays[env_id][0].shape[1:]}, not as here")
            others.append((plays, short, "the same, first action one ulp off" if k == 0 else their_versions))
    rows = [
        compare(env_id, mine[env_id], plays[env_id], mine_short[env_id], short[env_id], by, args.stretch)
        for env_id in args.env_ids
        for plays, short, by in others
    ]
    # the machine first: the commit it names is the one that ran, not one made dirty by this CSV
    subprocess.run([sys.executable, str(ROOT / "tools" / "aggregate.py"), "--record-machine", str(out)], check=True)
    with open(out / "env_versions.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, ["reference", *rows[0]])
        writer.writeheader()
        writer.writerows(dict(row, reference=versions) for row in rows)
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
