"""The peer runner (tools/leanrl.py) and its rows in run.sh's table. LeanRL itself is not run here (its own stack is a
Python environment of its own, requirements/requirements-leanrl.txt): its adapters are checked one by one, and the
runner end to end on a stand-in checkout whose files do what LeanRL's do (tyro's Args, gymnasium's SyncVectorEnv,
wandb.log with its `speed` and `episode_return`), in this environment."""

import importlib.util
import json
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch
from helpers.run_sh import md_rows, read_results, run_sh
from helpers.scripts import ROOT

LEANRL_PY = ROOT / "tools" / "leanrl.py"

# A file shaped as LeanRL's off-policy files are: Args by tyro, one env stepped in a loop, wandb.log every 100 steps
# after the burn-in with LeanRL's keys. --crash makes it fail as a file that cannot run here would.
STAND_IN = """
import time
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import tyro
import wandb


@dataclass
class Args:
    env_id: str = "Pendulum-v1"
    seed: int = 1
    total_timesteps: int = 600
    learning_starts: int = 100
    measure_burnin: int = 3
    compile: bool = False
    cudagraphs: bool = False
    cuda: bool = True
    crash: bool = False


if __name__ == "__main__":
    args = tyro.cli(Args)
    wandb.init(project="x")
    envs = gym.vector.SyncVectorEnv([lambda: gym.wrappers.RecordEpisodeStatistics(gym.make(args.env_id))])
    envs.reset(seed=args.seed)
    start_time, returns = None, []
    for global_step in range(args.total_timesteps):
        if global_step == args.learning_starts + args.measure_burnin:
            start_time, burnin = time.time(), global_step
        _, _, _, _, infos = envs.step(envs.action_space.sample())
        if "final_info" in infos:
            returns += [float(i["episode"]["r"][0]) for i in infos["final_info"] if i]
        if global_step > args.learning_starts:
            time.sleep(0.001)  # an update
            if args.crash:
                raise RuntimeError("a call this stack no longer has")
        if global_step % 100 == 0 and start_time is not None:
            speed = (global_step - burnin) / (time.time() - start_time)
            wandb.log({"speed": speed, "episode_return": np.mean(returns[-20:] or [0.0]), "qf_loss": 1.5}, step=global_step)
    envs.close()
"""


@pytest.fixture
def checkout(tmp_path):
    """A stand-in LeanRL checkout: leanrl/sac_continuous_action.py and its _torchcompile twin."""
    folder = tmp_path / "LeanRL" / "leanrl"
    folder.mkdir(parents=True)
    for name in ("sac_continuous_action.py", "sac_continuous_action_torchcompile.py"):
        (folder / name).write_text(STAND_IN)
    return folder.parent


def run_peer(checkout, file, *flags, tmp_path):
    out = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, str(LEANRL_PY), "--leanrl", str(checkout), file, "--output-dir", str(out), *map(str, flags)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = proc.stdout.strip().splitlines()
    summary = json.loads(open(lines[-1]).read()) if lines and lines[-1].endswith("summary.json") else None
    return proc, summary, out


def test_a_peer_file_runs_and_leaves_what_run_sh_reads(checkout, tmp_path):
    flags = ["--seed", 3, "--total-timesteps", 600, "--learning-starts", 100, "--measure-burnin", 50, "--compile"]
    proc, summary, out = run_peer(checkout, "sac_continuous_action_torchcompile.py", *flags, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert summary["peer"] == "leanrl" and summary["peer_file"] == "leanrl/sac_continuous_action_torchcompile.py"
    assert summary["script"] == "sac_continuous_action_torchcompile" and summary["status"] == "finished"
    assert summary["args"]["seed"] == 3 and summary["args"]["compile"] is True and summary["args"]["cudagraphs"] is False
    # the steps the env made, and steps/s from the end of the burn-in: 50 updates after 100 random steps
    assert summary["global_step"] == 600 and summary["sps"] > 0
    assert 0 < summary["warmup_s"] < summary["wall_time_s"]
    # the first update's end (after the 100 random steps), and torch.compile's cache counters, as ours record them (the
    # stand-in compiles nothing)
    assert summary["first_update_at"] > 0 and summary["compile_cache"] == dict(hits=0, misses=0)
    (run_dir,) = out.iterdir()
    rows = (run_dir / "metrics.csv").read_text().splitlines()
    assert rows[0].split(",")[:5] == ["global_step", "sps", "episodic_return", "episodic_length", "wall_time_s"]
    assert [row.split(",")[0] for row in rows[1:]] == ["200", "300", "400", "500"]  # wandb.log's rows, by step
    assert "qf_loss" in rows[0]


def test_steps_per_second_counts_from_the_end_of_the_burn_in(monkeypatch):
    """Off-policy: measure_burnin updates after learning_starts, as our scripts count them; PPO: iterations."""
    spec = importlib.util.spec_from_file_location("leanrl_runner", LEANRL_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    clock = module.Clock()
    clock.burnin_steps = 100 + (50 + 1) * 1
    for _ in range(600):
        clock.step(1)
    assert clock.steps == 600 and clock.burnin_steps == 151 and clock.burnin_end is not None
    clock = module.Clock()
    clock.burnin_steps = 2 * 8 * 128  # PPO: 2 iterations of 8 envs x 128 steps
    for _ in range(5 * 128):
        clock.step(8)
    assert clock.burnin_steps == 2048 and clock.steps == 5 * 1024


def test_a_file_that_cannot_run_here_is_recorded_failed_not_edited(checkout, tmp_path):
    proc, summary, _ = run_peer(checkout, "sac_continuous_action.py", "--crash", "--total-timesteps", 300, tmp_path=tmp_path)
    assert proc.returncode == 1
    assert summary["status"] == "failed" and "a call this stack no longer has" in summary["error"]
    assert "error: LeanRL's sac_continuous_action.py failed here: RuntimeError" in proc.stderr
    assert (checkout / "leanrl" / "sac_continuous_action.py").read_text() == STAND_IN


def test_an_unknown_file_is_refused_in_one_line(checkout, tmp_path):
    proc, summary, _ = run_peer(checkout, "sac_continuous_action_jax.py", tmp_path=tmp_path)
    assert proc.returncode != 0 and summary is None
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "no such LeanRL file" in proc.stderr


def load_runner():
    spec = importlib.util.spec_from_file_location("leanrl_runner", LEANRL_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_envpool_gives_leanrl_s_atari_files_the_old_gym_api(monkeypatch):
    import envpool
    import gymnasium

    monkeypatch.setattr(envpool, "make", envpool.make)  # restored after the test
    monkeypatch.setitem(sys.modules, "gym", None)  # the old gym, not installed: `import gym` fails
    module = load_runner()
    module.adapt_envpool()
    envs = envpool.make("Breakout-v5", env_type="gym", num_envs=2, episodic_life=True, reward_clip=True, seed=1)
    obs = envs.reset()
    assert isinstance(obs, np.ndarray) and obs.shape == (2, 4, 84, 84)  # reset() -> obs, not (obs, info)
    out = envs.step(np.zeros(2, dtype=np.int64))
    assert len(out) == 4 and out[2].dtype == bool and set(out[3]) >= {"reward", "terminated", "lives"}
    assert module.CLOCK.steps == 2
    other = envpool.make("Breakout-v5", env_type="gymnasium", num_envs=1)  # any other env_type: envpool's own
    assert other.reset()[0].shape == (1, 4, 84, 84)
    other.close()
    gym = sys.modules["gym"]  # the stand-in for LeanRL's `gym.Wrapper` and `gym.spaces`
    assert gym.spaces is gymnasium.spaces and gym.Wrapper(envs).action_space == envs.action_space
    envs.close()


def test_tensordict_behaves_as_in_2024_for_leanrl_s_two_calls(monkeypatch):
    from tensordict import TensorDict, TensorDictBase, from_module
    from tensordict.nn import TensorDictModule

    monkeypatch.setattr(TensorDictBase, "to_module", TensorDictBase.to_module)
    monkeypatch.setattr(TensorDictModule, "_write_to_tensordict", TensorDictModule._write_to_tensordict)

    def get_action(x):  # LeanRL's fast SAC: action, log-prob, mean, wrapped with one out_key
        return x + 1, x + 2, x + 3

    policy = TensorDictModule(get_action, in_keys=["observation"], out_keys=["action"])
    with pytest.raises(RuntimeError, match="more tensors"):
        policy(TensorDict(observation=torch.zeros(2)))
    load_runner().adapt_tensordict()
    assert torch.equal(policy(TensorDict(observation=torch.zeros(2)))["action"], torch.ones(2))  # the first, as a zip
    # LeanRL's detached actor copy: the written leaves replace the copy's parameters, which then need no grad
    actor, copy = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    from_module(actor).data.to_module(copy)
    assert not any(p.requires_grad for p in copy.parameters()) and copy.weight.data_ptr() == actor.weight.data_ptr()


def test_run_sh_puts_the_peer_s_rows_beside_ours(checkout, tmp_path):
    out = tmp_path / "bench"
    flags = ["--learning-starts", 100, "--measure-burnin", 20]
    run_sh(
        "--leanrl", checkout, "--leanrl-python", sys.executable, "--scripts", "sac_continuous_action",
        "--variants", "leanrl,leanrl_fast,leanrl_compile", "--seeds", "1,2", "--total-timesteps", 400,
        "--out", out, "--", *flags, check=0,
    )  # fmt: skip
    runs = read_results(out)
    assert sorted((r["variant"], r["seed"]) for r in runs) == sorted(
        (v, s) for v in ("leanrl", "leanrl_fast", "leanrl_compile") for s in ("1", "2")
    )
    assert {r["algorithm"] for r in runs} == {"sac_continuous_action"} and {r["status"] for r in runs} == {"finished"}
    commands = (out / "runs.tsv").read_text()
    assert "python tools/leanrl.py --leanrl" in commands and "sac_continuous_action_torchcompile.py" in commands
    rows = md_rows(out)
    assert {v for _, v in rows} == {"leanrl", "leanrl_fast", "leanrl_compile"}
    assert (out / "sps_sac_continuous_action.png").is_file()


def test_run_sh_asks_for_the_peer_s_checkout_and_environment(tmp_path):
    proc = run_sh("--scripts", "sac_continuous_action", "--variants", "leanrl", "--out", tmp_path / "b", check=2)
    assert "--variants leanrl: needs --leanrl DIR" in proc.stderr
    proc = run_sh("--leanrl", tmp_path, "--variants", "leanrl_fast", "--out", tmp_path / "b", check=2)
    assert "is no LeanRL checkout" in proc.stderr
    (tmp_path / "leanrl").mkdir()
    proc = run_sh("--leanrl", tmp_path, "--variants", "leanrl_fast", "--out", tmp_path / "b", check=2)
    assert "needs --leanrl-python PY" in proc.stderr
    assert not (tmp_path / "b").exists()


# LeanRL's JAX file for PPO Atari, shaped as it is: tyro's Args, a tqdm loop of iterations whose env steps no Python call
# sees (envpool's XLA step runs inside jax.jit), flax's TrainState over a params struct that is no dict, wandb.log every
# 10 iterations after the burn-in. jax, flax and optax are not our dependencies: stand-ins for the little the file and
# the runner use, today's flax's `"overwrite_with_gradient" in params` included.
STAND_IN_JAX = """
import time
from dataclasses import dataclass

import jax
import numpy as np
import optax
import tqdm
import tyro
import wandb
from flax.training.train_state import TrainState


@dataclass
class Args:
    env_id: str = "Breakout-v5"
    seed: int = 1
    total_timesteps: int = 2560
    num_envs: int = 2
    num_steps: int = 64
    measure_burnin: int = 3


class Params:  # a flax struct in LeanRL's file: it cannot answer `in`
    def __init__(self, w):
        self.w = w


class SGD:
    def init(self, params):
        return 0

    def update(self, grads, state, params):
        return Params(-0.1 * grads.w), state + 1


if __name__ == "__main__":
    args = tyro.cli(Args)
    num_iterations = args.total_timesteps // (args.num_envs * args.num_steps)
    state = TrainState.create(apply_fn=None, params=Params(1.0), tx=SGD())
    start_time = None
    for iteration in tqdm.tqdm(range(1, num_iterations + 1)):
        if iteration == args.measure_burnin:
            start_time, burnin = time.time(), (iteration - 1) * args.num_envs * args.num_steps
        time.sleep(0.002)  # the jitted rollout and update
        state = state.apply_gradients(grads=Params(1.0))
        if start_time is not None and iteration % 10 == 0:
            speed = (iteration * args.num_envs * args.num_steps - burnin) / (time.time() - start_time)
            wandb.log({"speed": speed, "episode_return": 0.5}, step=iteration * args.num_envs * args.num_steps)
    assert state.step == num_iterations and abs(state.params.w - (1.0 - 0.1 * num_iterations)) < 1e-9
"""
STAND_IN_LIBS = {
    "jax/__init__.py": "__version__ = 'stand-in'\ndef default_backend():\n    return 'cpu'\n",
    "optax/__init__.py": "def apply_updates(params, updates):\n    return type(params)(params.w + updates.w)\n",
    "flax/__init__.py": "",
    "flax/training/__init__.py": "",
    "flax/training/train_state.py": """
class TrainState:  # today's flax: create and apply_gradients ask `"overwrite_with_gradient" in ...`
    def __init__(self, **fields):
        self.__dict__.update(fields)

    def replace(self, **fields):
        return TrainState(**{**self.__dict__, **fields})

    @classmethod
    def create(cls, *, apply_fn, params, tx, **kwargs):
        if "overwrite_with_gradient" in params:
            raise NotImplementedError
        return cls(step=0, apply_fn=apply_fn, params=params, tx=tx, opt_state=tx.init(params), **kwargs)

    def apply_gradients(self, *, grads, **kwargs):
        if "overwrite_with_gradient" in grads:
            raise NotImplementedError
        raise AssertionError("a dict of params would go on here")
""",
}


@pytest.fixture
def jax_checkout(tmp_path):
    """A stand-in LeanRL checkout with its PPO Atari JAX file, and a python that finds stand-ins for jax, flax, optax."""
    folder = tmp_path / "LeanRL" / "leanrl"
    folder.mkdir(parents=True)
    (folder / "ppo_atari_envpool_xla_jax.py").write_text(STAND_IN_JAX)
    for name, text in STAND_IN_LIBS.items():
        (tmp_path / "libs" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "libs" / name).write_text(text)
    python = tmp_path / "python-jax"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={tmp_path / "libs"} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return folder.parent, python


def test_the_jax_file_runs_its_iterations_counted_and_flax_s_state_as_it_was(jax_checkout, tmp_path):
    checkout, python = jax_checkout
    out = tmp_path / "runs"
    proc = subprocess.run(
        [python, LEANRL_PY, "--leanrl", checkout, "ppo_atari_envpool_xla_jax.py", "--output-dir", out, "--seed", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(open(proc.stdout.strip().splitlines()[-1]).read())
    assert summary["status"] == "finished" and summary["script"] == "ppo_atari_jax" and summary["jax_version"] == "stand-in"
    assert summary["peer_file"] == "leanrl/ppo_atari_envpool_xla_jax.py" and summary["device"] == "cpu"
    # 20 iterations of 2 x 64 steps, the clock started at the 4th (after --measure-burnin 3, as ours count)
    assert summary["global_step"] == 2560 and summary["sps"] > 0 and summary["warmup_s"] > 0
    assert summary["args"]["measure_burnin"] == 3 and summary["args"]["seed"] == 2


def test_the_jax_file_s_xla_step_gets_the_old_gym_api(monkeypatch):
    import envpool

    monkeypatch.setattr(envpool, "make", envpool.make)  # restored after the test
    monkeypatch.setitem(sys.modules, "gym", None)
    module = load_runner()
    module.adapt_envpool()
    envs = envpool.make("Breakout-v5", env_type="gym", num_envs=2, episodic_life=True, reward_clip=True, seed=1)

    def step(handle, action):  # envpool 1.x's XLA step: gymnasium's five values (arrays inside jax.jit)
        info = {"terminated": np.array([0, 1], dtype=np.int32), "reward": np.zeros(2, dtype=np.float32)}
        return handle + 1, (
            np.zeros((2, 4, 84, 84), np.uint8),
            np.ones(2),
            np.array([False, True]),
            np.array([True, False]),
            info,
        )

    monkeypatch.setattr(envs.envs, "xla", lambda: (0, "recv", "send", step), raising=False)
    handle, recv, send, old_step = envs.xla()
    handle, (obs, reward, done, info) = old_step(handle, np.zeros(2, dtype=np.int32))
    assert handle == 1 and done.tolist() == [True, True] and info["TimeLimit.truncated"].tolist() == [True, False]
    assert info["terminated"].tolist() == [0, 1] and obs.shape == (2, 4, 84, 84)
    envs.close()


def test_run_sh_runs_leanrl_s_jax_file_for_ppo_atari(jax_checkout, tmp_path):
    checkout, python = jax_checkout
    out = tmp_path / "bench"
    run_sh(
        "--leanrl", checkout, "--leanrl-python", python, "--scripts", "ppo_atari", "--variants", "leanrl_jax",
        "--seeds", "1", "--total-timesteps", 1280, "--out", out, "--", "--measure-burnin", 2, check=0,
    )  # fmt: skip
    (run,) = read_results(out)
    assert (run["variant"], run["status"]) == ("leanrl_jax", "finished")
    assert "ppo_atari_envpool_xla_jax.py" in (out / "runs.tsv").read_text()


def test_the_jax_file_without_jax_is_recorded_failed(jax_checkout, tmp_path):
    checkout, _ = jax_checkout  # this environment's python: no jax, flax or optax
    proc, summary, _ = run_peer(checkout, "ppo_atari_envpool_xla_jax.py", tmp_path=tmp_path)
    assert proc.returncode == 1 and summary["status"] == "failed" and "No module named" in summary["error"]
    assert summary["jax_version"] is None and "error: LeanRL's ppo_atari_envpool_xla_jax.py failed here" in proc.stderr


def test_the_jax_file_s_run_is_not_lost_to_a_crash_in_the_interpreter_s_teardown(jax_checkout, tmp_path):
    # envpool's XLA handle and jax's runtime segfaulted once in the teardown after the file had finished (exit 139):
    # a stand-in jax that does the same at exit. The runner leaves without the teardown once the summary is written.
    checkout, python = jax_checkout
    libs = tmp_path / "libs"  # the fixture's stand-ins
    crash = "import atexit, os, signal\natexit.register(lambda: os.kill(os.getpid(), signal.SIGSEGV))\n"
    (libs / "jax" / "__init__.py").write_text((libs / "jax" / "__init__.py").read_text() + crash)
    control = subprocess.run([python, "-c", "import jax"], capture_output=True, timeout=60)
    assert control.returncode == -signal.SIGSEGV  # the stand-in crashes a plain process at exit
    out = tmp_path / "runs"
    proc = subprocess.run(
        [python, LEANRL_PY, "--leanrl", checkout, "ppo_atari_envpool_xla_jax.py", "--output-dir", out],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(open(proc.stdout.strip().splitlines()[-1]).read())
    assert summary["status"] == "finished" and summary["global_step"] == 2560
