"""Whether CleanRL's MuJoCo tasks are another task on today's libraries: the same env, reset seed and actions, played
by this Python and by others (each with its own gymnasium and MuJoCo), step by step side by side.

    python -m venv ../venv-cleanrl-libs      # CleanRL's pins (requirements at fe8d8a0): gymnasium 0.29.1, mujoco 2.3.3
    ../venv-cleanrl-libs/bin/pip install gymnasium==0.29.1 mujoco==2.3.3 "numpy<2" imageio
    python -m venv ../venv-old-gymnasium      # the same gymnasium and numpy, today's MuJoCo: which of the two differs
    ../venv-old-gymnasium/bin/pip install gymnasium==0.29.1 mujoco==4.0.0 "numpy<2" imageio
    python tools/env_versions.py --against ../venv-cleanrl-libs/bin/python --against ../venv-old-gymnasium/bin/python \
        --out doc/results/cpu-2core-env-versions

Each Python plays every env of --env-ids for --steps steps: a reset with --seed, then actions drawn uniformly from the
action space by one numpy generator (seed 0) and given as float32, as the scripts give them; where an episode ends, an
unseeded reset. It keeps every observation, reward and action (the play runs in the other Python as this file with
--play, which needs only numpy, gymnasium and mujoco). This Python also plays the same with its first action moved by
one float32 ulp: the control, how far a difference in the last bit carries on its own (the tasks are chaotic, and any
other rounding, on another CPU too, makes another trajectory within some hundred steps).

env_versions.csv gets a row per env and other play, against this Python's plain play: whether the actions and the
reset were the same, the largest difference in an observation and in the reward after the first step (from the same
state and action: the physics itself), the largest difference one step makes between observations that agreed to
1e-9 (rounding's differences grow at most ~100x a step; a contact computed otherwise jumps further), the step where
the observations first differ by more than 1e-3 (the trajectories part), each play's sum of rewards and its steps
that ended with a contact (MuJoCo's, with the ground or between parts).
machine.json and machine.md record this Python's machine and versions; each row names the other play's.
tools/tables.py writes the learning page's table from the CSV.
"""

import argparse
import csv
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
ENV_IDS = ["HalfCheetah-v4", "Hopper-v4", "Walker2d-v4"]  # the MuJoCo tasks of CleanRL's benchmarks, v4 as its files'
APART = 1e-3  # an observation this far from the other play's: the trajectories have parted
PARTS = ["obs", "rew", "act", "con"]  # a play's arrays, as play() returns them
CLOSE = 1e-9  # observations this close agree but for rounding (which grew them at most ~100x a step here)


def play(env_ids, steps, seed, nudge=False):
    """Each env played as the docstring says: {env_id: (observations, rewards, actions, contacts)}, and the versions
    that played (contacts: MuJoCo's count after each step)."""
    import gymnasium as gym
    import mujoco

    plays = {}
    for env_id in env_ids:
        env = gym.make(env_id)
        generator = np.random.default_rng(0)
        low, high = env.action_space.low, env.action_space.high
        observations, rewards, actions, contacts = [env.reset(seed=seed)[0]], [], [], []
        for step in range(steps):
            action = generator.uniform(low, high).astype(np.float32)
            if nudge and step == 0:  # one ulp toward zero
                action[0] = np.nextafter(action[0], np.float32(0))
            obs, reward, terminated, truncated, _ = env.step(action)
            rewards.append(reward)
            actions.append(action)
            contacts.append(getattr(getattr(env.unwrapped, "data", None), "ncon", 0))  # (0: not a MuJoCo env)
            observations.append(env.reset()[0] if terminated or truncated else obs)
        env.close()
        plays[env_id] = (
            np.array(observations, np.float64),
            np.array(rewards, np.float64),
            np.array(actions),
            np.array(contacts),
        )
    versions = f"gymnasium {gym.__version__}, mujoco {mujoco.__version__}, numpy {np.__version__}"
    return plays, versions


def save(path, plays, versions):
    arrays = {f"{env_id}.{part}": a for env_id, play in plays.items() for part, a in zip(PARTS, play)}
    np.savez(path, versions=np.array(versions), **arrays)


def load(path, env_ids):
    with np.load(path) as f:
        return {env_id: tuple(f[f"{env_id}.{part}"] for part in PARTS) for env_id in env_ids}, str(f["versions"])


def compare(env_id, mine, other, played_by):
    """A row of env_versions.csv: the other play against this Python's plain play."""
    (obs, rew, act, con), (obs2, rew2, act2, con2) = mine, other
    apart = np.abs(obs - obs2).max(1)
    parted = np.flatnonzero(apart > APART)
    jumps = apart[1:][apart[:-1] <= CLOSE]  # one step's difference, from observations that agreed
    return dict(
        env_id=env_id,
        played_by=played_by,
        steps=len(rew),
        same_actions=bool(np.array_equal(act, act2)),
        same_reset=bool(np.array_equal(obs[0], obs2[0])),
        first_step_obs_diff=float(apart[1]),
        first_step_reward_diff=float(abs(rew[0] - rew2[0])),
        largest_jump=float(jumps.max()) if len(jumps) else None,
        parted_at=int(parted[0]) if len(parted) else None,
        reward_sum=float(rew2.sum()),
        reference_reward_sum=float(rew.sum()),
        contact_steps=int((con2 > 0).sum()),
        reference_contact_steps=int((con > 0).sum()),
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", action="append", default=[], help="another Python to play the envs (repeatable)")
    parser.add_argument("--out", default="bench/env-versions", help="the folder for env_versions.csv and the machine record")
    parser.add_argument("--env-ids", nargs="+", default=ENV_IDS, help="gymnasium ids of the envs to play")
    parser.add_argument("--steps", type=int, default=1000, help="steps each env is played")
    parser.add_argument("--seed", type=int, default=1, help="the first reset's seed")
    parser.add_argument("--play", help=argparse.SUPPRESS)  # (in the other Python: play and save here)
    parser.add_argument("--nudge", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps < 1:
        parser.exit(2, f"env_versions.py: error: --steps: must be at least 1, got {args.steps}\n")
    if args.play:
        save(args.play, *play(args.env_ids, args.steps, args.seed, args.nudge))
        return
    import gymnasium as gym

    unknown = [env_id for env_id in args.env_ids if env_id not in gym.registry]
    if unknown:
        parser.exit(2, f"env_versions.py: error: --env-ids: {unknown[0]} is no gymnasium env here\n")
    for env_id in args.env_ids:
        space = gym.make(env_id).action_space
        if not isinstance(space, gym.spaces.Box):
            parser.exit(
                2, f"env_versions.py: error: --env-ids: {env_id} has {space} actions, not a Box of them to draw from\n"
            )
    if not args.against:
        parser.exit(2, "env_versions.py: error: --against: give at least one other Python to play the envs\n")
    mine, versions = play(args.env_ids, args.steps, args.seed)
    others = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, python in enumerate([sys.executable, *args.against]):
            path = pathlib.Path(tmp, f"{k}.npz")
            command = [python, __file__, "--play", str(path), "--steps", str(args.steps), "--seed", str(args.seed)]
            command += ["--env-ids", *args.env_ids] + (["--nudge"] if k == 0 else [])
            try:
                done = subprocess.run(command, capture_output=True, text=True)
            except OSError as e:
                parser.exit(2, f"env_versions.py: error: --against {python}: {e.strerror}\n")
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no message"])[-1]
                parser.exit(2, f"env_versions.py: error: --against {python}: its play failed ({last})\n")
            plays, their_versions = load(path, args.env_ids)
            others.append((plays, "the same, first action one ulp off" if k == 0 else their_versions))
    rows = [compare(env_id, mine[env_id], plays[env_id], by) for env_id in args.env_ids for plays, by in others]
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "env_versions.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, ["reference", *rows[0]])
        writer.writeheader()
        writer.writerows(dict(row, reference=versions) for row in rows)
    subprocess.run([sys.executable, str(ROOT / "tools" / "aggregate.py"), "--record-machine", str(out)], check=True)
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
