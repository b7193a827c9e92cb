"""tools/lockstep.py: its talk envs take the time they claim (a Wait env sleeps, a Busy env computes), their episodes end
at random with the claimed mean length, unevenly across envs and the same for a seed whatever the actions; the env
runners of each env count, and the table and CSV it writes. No wall-clock upper bound: only lower bounds and CPU time."""

import csv
import pathlib
import sys
import time

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))  # as PYTHONPATH=tools: `lockstep:` ids
import lockstep  # noqa: E402


def timed(call):
    """(wall seconds, this thread's CPU seconds) that `call` took."""
    wall, cpu = time.perf_counter(), time.thread_time()
    call()
    return time.perf_counter() - wall, time.thread_time() - cpu


def test_wait_env_sleeps_its_time():
    env = gym.make("lockstep:TalkWait-v0")
    assert env.spec.max_episode_steps == 320
    assert env.observation_space.shape == (17,) and env.action_space.shape == (6,)
    wall, cpu = timed(lambda: env.reset(seed=0))
    assert wall >= 0.1 and cpu < 0.05  # a reset of 100 ms, waiting: the core stays free
    action = np.zeros(6, np.float32)
    for _ in range(10):
        wall, cpu = timed(lambda: env.step(action))
        assert wall >= 0.003
    wall, cpu = timed(lambda: [env.step(action) for _ in range(10)])
    assert cpu < 0.015  # ten steps of 3 ms: less than half of it on the CPU


def test_busy_env_computes_its_time():
    env = gym.make("lockstep:TalkBusy-v0")
    wall, cpu = timed(lambda: env.reset(seed=0))
    assert cpu >= 0.1 and wall >= 0.1
    action = np.zeros(6, np.float32)
    for _ in range(10):
        wall, cpu = timed(lambda: env.step(action))
        assert cpu >= 0.003 and wall >= 0.003


def episode_lengths(mean_length, episodes, seed):
    env = lockstep.TalkEnv(busy=True, step_s=0.0, reset_s=0.0, mean_length=mean_length)  # no time: only the RNG's ends
    env.reset(seed=seed)
    lengths, t, action = [], 0, np.zeros(6, np.float32)
    while len(lengths) < episodes:
        t += 1
        if env.step(action)[2]:
            lengths.append(t)
            t = 0
            env.reset()
    return np.array(lengths)


def test_episodes_end_at_random_with_the_claimed_mean():
    lengths = episode_lengths(32, 2000, seed=1)
    assert 30 < lengths.mean() < 34  # geometric: standard error 0.7
    assert lengths.min() < 5 and lengths.max() > 100  # not all 32
    assert 800 < episode_lengths(1000, 100, seed=1).mean() < 1200  # standard error 100


def test_resets_are_uneven_across_envs_and_the_same_for_a_seed_whatever_the_actions():
    def ends(actions):
        envs = gym.vector.SyncVectorEnv([lambda: lockstep.TalkEnv(busy=True, step_s=0.0, reset_s=0.0) for _ in range(8)])
        envs.reset(seed=0)  # seeds 0..7, as the script seeds its envs
        ends = [envs.step(actions(envs))[2] for _ in range(64)]
        return np.array(ends)

    zeros = ends(lambda envs: np.zeros((8, 6), np.float32))
    assert zeros.any() and not (zeros == zeros[:, :1]).all()  # envs end on different steps
    assert (zeros == ends(lambda envs: envs.action_space.sample())).all()


def test_env_runners_per_env_count():
    assert [lockstep.runners_for(n) for n in [1, 2, 4, 8, 16, 12, 3]] == [1, 2, 4, 8, 8, 6, 3]


def test_table_and_csv(tmp_path):
    def row(env_id, mode, sps, runners=0, cpus=""):
        status = "failed" if sps is None else "finished"
        return dict(env_id=env_id, num_envs=4, mode=mode, env_runners=runners, env_runner_cpus=cpus, sps=sps, status=status)

    rows = [
        row("TalkWait-v0", "sync", 100.0),
        row("TalkWait-v0", "async", 200.0),
        row("TalkWait-v0", "runners", 500.0, 4, 0.5),
        row("HalfCheetah-v4", "sync", 2000.0),
        row("HalfCheetah-v4", "async", None),
    ]
    lockstep.write(tmp_path, rows, 2)
    lines = (tmp_path / "lockstep.md").read_text().splitlines()
    assert lines[-2] == "| TalkWait-v0 | 4 | 100 | 200 | 500 | 4 x 0.5 | 2.00x | 5.00x | 2.50x |"
    assert lines[-1] == "| HalfCheetah-v4 | 4 | 2,000 | failed | - | - | - | - | - |"
    with open(tmp_path / "lockstep.csv") as f:
        cells = list(csv.DictReader(f))
    assert [(c["env_id"], c["mode"], c["sps"], c["status"]) for c in cells][-1] == ("HalfCheetah-v4", "async", "", "failed")
    assert len(cells) == 5
    # tools/tables.py writes the published table from the CSV: the same lines
    assert lockstep.table_lines(lockstep.read(tmp_path / "lockstep.csv")) == lines[2:]
