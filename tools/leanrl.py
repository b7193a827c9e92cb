"""Run one of LeanRL's own files, unchanged, beside ours: the peer's row of run.sh's results table.

LeanRL (github.com/pytorch-labs/LeanRL, the commit our results name: 8dbb633) pins its 2024 stack. Its files run here
in a Python environment of their own, with LeanRL's libraries (requirements/requirements-leanrl.txt):

    python3.11 -m venv .venv-leanrl
    .venv-leanrl/bin/pip install torch==2.13.0 -r requirements/requirements-leanrl.txt
    git clone https://github.com/pytorch-labs/LeanRL ../LeanRL && git -C ../LeanRL checkout 8dbb633
    .venv-leanrl/bin/python tools/leanrl.py --leanrl ../LeanRL sac_continuous_action_torchcompile.py --output-dir runs \\
        --seed 1 --total-timesteps 8000 --measure-burnin 50 --compile

or through run.sh, beside our variants (the peer's variants: leanrl, leanrl_fast, leanrl_compile,
leanrl_compile_cudagraphs, and for PPO Atari leanrl_jax, its JAX file ppo_atari_envpool_xla_jax.py, which needs an
environment with jax, flax and optax and neither torch nor tensordict):

    ./run.sh --leanrl ../LeanRL --leanrl-python .venv-leanrl/bin/python --scripts sac_continuous_action \\
        --variants baseline,fast,compile,leanrl,leanrl_fast,leanrl_compile --seeds 1,2 --total-timesteps 8000

Every flag after the file is LeanRL's own (its tyro `Args`); `--output-dir` is ours. The run leaves what our scripts
leave for run.sh: `<output-dir>/<env>__<file>__<seed>__<time>/` with `metrics.csv` (LeanRL's logged rows) and
`summary.json` (`"peer": "leanrl"`), and prints the summary's path last.

Steps/s is measured as our scripts measure it, from this process's clock around the env's steps, so that both sides
count the same: env steps from the end of the burn-in (`--measure-burnin` updates after `--learning-starts` for SAC,
TD3 and DQN; `--measure-burnin` iterations for PPO) to the end of the run, over the seconds they took.

The adapters, each the least that lets a file of 2024 run on today's machine; none touches an algorithm, and a file
that cannot run without that is reported as failed, never edited:
- wandb: a stub (LeanRL imports it unconditionally and logs through it): `init` does nothing, `log` keeps each row,
  which becomes a row of metrics.csv.
- envpool 1.x: `env_type="gym"` returns gymnasium's 5-tuple (`reset() -> (obs, info)`, `step() -> (obs, reward,
  terminated, truncated, info)`); LeanRL's Atari files expect the old gym API of envpool 0.8, `reset() -> obs` and
  `step() -> (obs, reward, done, info)` with done = terminated or truncated, which a thin wrapper gives back. Those
  files import `gym` for `gym.Wrapper` and `gym.spaces`: where the old gym is not installed, gymnasium's spaces and a
  plain wrapper stand for it. envpool 1.x's `close()` ends in gymnasium 0.29's, which reads two attributes envpool
  never set: they are set first.
- tensordict, whose behaviour changed under two of LeanRL's calls since 2024; both are put back as they were:
  - `to_module`'s `preserve_module_state`: 0.13 keeps the old semantics by default (a leaf written into a module
    replaces its parameter) with a FutureWarning, 0.14 and later preserve the parameter, so that LeanRL's detached
    actor copy (`from_module(actor).data.to_module(actor_detach)`) would require grad again. The adapter passes
    `preserve_module_state=False`, the semantics LeanRL was written for, wherever the file leaves it unset.
  - `TensorDictModule` with fewer `out_keys` than the function returns: tensordict of 2024 wrote the first outputs
    and dropped the rest (a zip), 0.13 raises. LeanRL's fast SAC wraps `get_action` (action, log-prob, mean) with
    `out_keys=["action"]`; the adapter keeps the zip.
- The JAX file (PPO Atari): its rollout steps envpool inside `jax.jit` through `envs.xla()`, whose step gives
  gymnasium's five values where the file unpacks the old four and reads `info["TimeLimit.truncated"]`: the wrapper
  gives those back too. No Python call sees its env steps, so the clock counts its iterations (num_envs x num_steps
  each) as each starts. Today's flax's `TrainState` asks `"overwrite_with_gradient" in params`, which the file's
  params (a flax struct, not a dict) cannot answer (flax 0.12.12: `TypeError: argument of type 'AgentParams' is not
  iterable`): for such params, `create` and `apply_gradients` without that question.
"""

import argparse
import csv
import json
import math
import os
import pathlib
import runpy
import subprocess
import sys
import time
import types

# LeanRL's file for each of our algorithms (its Atari files carry envpool in their names)
ALGORITHMS = {
    "ppo_atari_envpool": "ppo_atari",
    "ppo_continuous_action": "ppo_continuous_action",
    "sac_continuous_action": "sac_continuous_action",
    "td3_continuous_action": "td3_continuous_action",
    "dqn": "dqn",
}
JAX_FILES = {"ppo_atari_envpool_xla_jax": "ppo_atari"}  # LeanRL's JAX files that run here (jax, flax, optax)
TENSORDICT = "0.13"  # LeanRL's pinned stack (requirements/requirements-leanrl.txt)


class Clock:
    """Env steps, and the time and step count where the burn-in ends, counted where the env is stepped; the time the
    first update ended (the first env step after it), as ours record it."""

    def __init__(self):
        self.steps, self.burnin_steps, self.burnin_end, self.start = 0, None, None, time.time()
        self.first_update_steps = self.first_update_at = None

    def step(self, num_envs):  # before each step of the envs
        if self.burnin_end is None and self.burnin_steps is not None and self.steps >= self.burnin_steps:
            self.burnin_end, self.burnin_steps = time.time(), self.steps
        if self.first_update_at is None and self.first_update_steps is not None and self.steps >= self.first_update_steps:
            self.first_update_at = time.time()
        self.steps += num_envs


CLOCK = Clock()
ROWS = []  # wandb.log's rows: (step, time, values)


def stub_wandb():
    wandb = types.ModuleType("wandb")
    wandb.init = lambda *a, **k: None
    wandb.finish = lambda *a, **k: None

    def log(values, step=None):
        plain = {}
        for key, value in values.items():
            try:
                plain[key] = float(value)
            except (TypeError, ValueError):
                continue
        ROWS.append((step, time.time(), plain))

    wandb.log = log
    sys.modules["wandb"] = wandb


def adapt_gymnasium():
    """Count the steps of gymnasium's vector envs (SAC, TD3, PPO continuous, DQN)."""
    import gymnasium

    class CountedSyncVectorEnv(gymnasium.vector.SyncVectorEnv):
        def step(self, actions):
            CLOCK.step(self.num_envs)
            return super().step(actions)

    gymnasium.vector.SyncVectorEnv = CountedSyncVectorEnv


def adapt_envpool():
    """envpool 1.x under LeanRL's Atari files: the old gym API they were written for, and its steps counted."""
    import envpool
    import gymnasium
    import numpy as np

    class OldGymAPI:  # envpool 0.8's env_type="gym": reset() -> obs; step() -> (obs, reward, done, info)
        def __init__(self, envs):
            self.envs = envs
            self.action_space, self.observation_space = envs.action_space, envs.observation_space

        def reset(self):
            return self.envs.reset()[0]

        def step(self, action):
            CLOCK.step(len(action))
            obs, reward, terminated, truncated, info = self.envs.step(action)
            return obs, reward, np.logical_or(terminated, truncated), info

        def xla(self):  # the JAX file's steps inside jax.jit: the same old API
            handle, recv, send, step = self.envs.xla()

            def old_step(handle, action):
                handle, (obs, reward, terminated, truncated, info) = step(handle, action)
                return handle, (obs, reward, terminated | truncated, {**info, "TimeLimit.truncated": truncated})

            return handle, recv, send, old_step

        def close(self):
            # (envpool 1.x, made for gymnasium 1.x, goes on to gymnasium 0.29's VectorEnv.close, which reads two
            # attributes that envpool never set)
            self.envs.closed = getattr(self.envs, "closed", False)
            self.envs.viewer = getattr(self.envs, "viewer", None)
            self.envs.close()

    make = envpool.make

    def make_old_gym(task_id, env_type="gymnasium", **kwargs):
        if env_type == "gym":
            return OldGymAPI(make(task_id, env_type="gymnasium", **kwargs))
        return make(task_id, env_type=env_type, **kwargs)

    envpool.make = make_old_gym
    try:
        import gym  # noqa: F401  (the old gym, where installed)
    except ImportError:

        class Wrapper:  # gym.Wrapper, as much of it as LeanRL's RecordEpisodeStatistics uses
            def __init__(self, env):
                self.env = env

            def reset(self, **kwargs):
                return self.env.reset(**kwargs)

            def step(self, action):
                return self.env.step(action)

            def __getattr__(self, name):
                if name == "env":
                    raise AttributeError(name)
                return getattr(self.env, name)

        gym = types.ModuleType("gym")
        gym.Wrapper, gym.spaces = Wrapper, gymnasium.spaces
        sys.modules["gym"] = gym


def count_iterations(box):
    """LeanRL's JAX file steps its envs inside jax.jit, where no Python call sees a step: its iterations are counted
    instead, num_envs x num_steps env steps each, as each starts (the one before has ended: the file reads its returns
    back from the device at the end of each)."""
    import tqdm

    class Counted(tqdm.tqdm):
        def __iter__(self):
            for item in super().__iter__():
                CLOCK.step(box["args"].num_envs * box["args"].num_steps)
                yield item

    tqdm.tqdm = Counted


def adapt_flax():
    """Today's flax's TrainState asks `"overwrite_with_gradient" in params`, which the JAX file's params (a flax struct,
    not a dict) cannot answer: for such params, `create` and `apply_gradients` without that question."""
    from collections.abc import Mapping

    try:
        import optax
        from flax.training.train_state import TrainState
    except ImportError:  # no flax here: the file's own import fails, and is recorded so
        return

    create, apply_gradients = TrainState.create.__func__, TrainState.apply_gradients

    def old_create(cls, *, apply_fn, params, tx, **kwargs):
        if isinstance(params, Mapping):
            return create(cls, apply_fn=apply_fn, params=params, tx=tx, **kwargs)
        return cls(step=0, apply_fn=apply_fn, params=params, tx=tx, opt_state=tx.init(params), **kwargs)

    def old_apply_gradients(self, *, grads, **kwargs):
        if isinstance(grads, Mapping):
            return apply_gradients(self, grads=grads, **kwargs)
        updates, opt_state = self.tx.update(grads, self.opt_state, self.params)
        params = optax.apply_updates(self.params, updates)
        return self.replace(step=self.step + 1, params=params, opt_state=opt_state, **kwargs)

    TrainState.create, TrainState.apply_gradients = classmethod(old_create), old_apply_gradients


def adapt_tensordict():
    """tensordict's two changed behaviours, as LeanRL's files met them in 2024 (the docstring above)."""
    from tensordict import TensorDictBase
    from tensordict.nn import TensorDictModule

    to_module = TensorDictBase.to_module

    def old_to_module(self, module, *args, preserve_module_state=None, **kwargs):
        if preserve_module_state is None:
            preserve_module_state = False
        return to_module(self, module, *args, preserve_module_state=preserve_module_state, **kwargs)

    TensorDictBase.to_module = old_to_module
    write = TensorDictModule._write_to_tensordict

    def zip_write(self, tensordict, tensors, tensordict_out=None, out_keys=None):
        keys = self.out_keys_source if out_keys is None else out_keys
        return write(self, tensordict, list(tensors)[: len(keys)], tensordict_out, out_keys)

    TensorDictModule._write_to_tensordict = zip_write


def capture_args(box):
    """LeanRL's parsed Args, kept as tyro.cli returns them (the budget, seed and burn-in its run used)."""
    import tyro

    cli = tyro.cli

    def kept(*a, **k):
        box["args"] = cli(*a, **k)
        args = box["args"]
        if hasattr(args, "learning_starts"):  # off-policy: measure_burnin updates after learning starts, as ours
            every = getattr(args, "train_frequency", 1)
            CLOCK.burnin_steps = args.learning_starts + (args.measure_burnin + 1) * every
            CLOCK.first_update_steps = args.learning_starts + 2 * every
        else:  # PPO: measure_burnin iterations of num_envs x num_steps, as ours
            CLOCK.burnin_steps = args.measure_burnin * args.num_envs * args.num_steps
            CLOCK.first_update_steps = args.num_envs * args.num_steps
        return args

    tyro.cli = kept


def commit(checkout):
    try:
        out = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        return out.stdout.strip() or None
    except OSError:
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--leanrl", required=True, help="a checkout of github.com/pytorch-labs/LeanRL")
    parser.add_argument("--output-dir", default="runs", help="where the run folder is written (default: runs)")
    parser.add_argument("file", help="LeanRL's file, in its leanrl/ folder, e.g. sac_continuous_action_torchcompile.py")
    ours, flags = parser.parse_known_args()
    path = pathlib.Path(ours.leanrl) / "leanrl" / ours.file
    stem = path.stem.removesuffix("_torchcompile")
    if not path.is_file() or (stem not in ALGORITHMS and stem not in JAX_FILES):
        known = ", ".join(sorted([*ALGORITHMS, *JAX_FILES]))
        sys.exit(f"error: {ours.file}: no such LeanRL file in {path.parent} (one of {known}, with _torchcompile or not)")
    stub_wandb()
    box = {}
    capture_args(box)
    if stem in JAX_FILES:  # envpool's XLA step inside jax.jit; no torch, no tensordict
        adapt_envpool()
        adapt_flax()
        count_iterations(box)
    else:
        import tensordict

        if not tensordict.__version__.startswith(TENSORDICT):
            print(f"warning: tensordict {tensordict.__version__}, not LeanRL's pinned {TENSORDICT}", file=sys.stderr)
        adapt_tensordict()
        adapt_envpool() if stem == "ppo_atari_envpool" else adapt_gymnasium()

    sys.argv = [str(path), *flags]
    status, error = "finished", None
    try:
        runpy.run_path(str(path), run_name="__main__")
    except KeyboardInterrupt:
        status = "interrupted"
    except BaseException as e:  # a file that cannot run here: recorded as failed, with why
        status, error = "failed", f"{type(e).__name__}: {e}".replace("\n", " ")[:500]
    end = time.time()
    args = box.get("args")
    algorithm = JAX_FILES.get(stem) or ALGORITHMS[stem]
    script = algorithm + ("_torchcompile" if path.stem.endswith("_torchcompile") else "_jax" if stem in JAX_FILES else "")
    flags_seen = dict(
        env_id=getattr(args, "env_id", None),
        seed=getattr(args, "seed", None),
        total_timesteps=getattr(args, "total_timesteps", None),
        measure_burnin=getattr(args, "measure_burnin", None),
        compile=bool(getattr(args, "compile", False)),
        cudagraphs=bool(getattr(args, "cudagraphs", False)),
        compile_mode=None,
        exp_name=script,
    )
    run_dir = pathlib.Path(ours.output_dir) / f"{flags_seen['env_id']}__leanrl_{path.stem}__{flags_seen['seed']}__{int(end)}"
    run_dir.mkdir(parents=True, exist_ok=True)
    sps = None
    if CLOCK.burnin_end is not None and CLOCK.steps > CLOCK.burnin_steps:
        sps = (CLOCK.steps - CLOCK.burnin_steps) / (end - CLOCK.burnin_end)
    returns = [row[2]["episode_return"] for row in ROWS if math.isfinite(row[2].get("episode_return", math.nan))]
    keys = sorted({key for _, _, values in ROWS for key in values} - {"speed", "episode_return"})
    with open(run_dir / "metrics.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["global_step", "sps", "episodic_return", "episodic_length", "wall_time_s", *keys])
        for step, when, values in ROWS:
            cells = [values.get("speed"), values.get("episode_return"), None, round(when - CLOCK.start, 3)]
            writer.writerow([step, *cells, *[values.get(k) for k in keys]])
    if stem in JAX_FILES:  # jax's own device: a GPU where it has one
        try:
            import jax

            cuda, versions = jax.default_backend() == "gpu", dict(jax_version=jax.__version__)
        except ImportError:  # the file failed for want of jax (recorded below)
            cuda, versions = False, dict(jax_version=None)
        gpu_name = jax.devices()[0].device_kind if cuda else None
    else:
        import tensordict
        import torch

        cuda = torch.cuda.is_available() and bool(getattr(args, "cuda", False))
        gpu_name = torch.cuda.get_device_name() if cuda else None
        versions = dict(torch_version=torch.__version__, tensordict_version=tensordict.__version__)
    # whether torch.compile found inductor's cache cold or warm: its own counters, as our scripts read them
    cache = getattr(sys.modules.get("torch._dynamo.utils"), "counters", {}).get("inductor", {})
    summary = dict(
        script=script,
        algo=algorithm.split("_")[0],
        peer="leanrl",
        peer_file=f"leanrl/{path.name}",
        peer_commit=commit(ours.leanrl),
        device="cuda" if cuda else "cpu",
        gpu_name=gpu_name,
        cpu_count=os.cpu_count(),
        **versions,
        world_size=1,
        global_step=CLOCK.steps,
        sps=sps,
        wall_time_s=end - CLOCK.start,
        warmup_s=None if CLOCK.burnin_end is None else CLOCK.burnin_end - CLOCK.start,
        first_update_at=CLOCK.first_update_at,
        compile_cache=dict(hits=cache.get("fxgraph_cache_hit", 0), misses=cache.get("fxgraph_cache_miss", 0)),
        episodic_return=returns[-1] if returns else None,
        episodes=None,
        status=status,
        error=error,
        args=dict(flags_seen, leanrl_flags=flags),
    )
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    if error:
        print(f"error: LeanRL's {path.name} failed here: {error}", file=sys.stderr)
    print(run_dir / "summary.json")
    code = {"finished": 0, "interrupted": 130}.get(status, 1)
    if stem in JAX_FILES:
        # The run is over and recorded: leave without the interpreter's teardown, in which envpool's XLA handle and
        # jax's runtime can crash (a segfault after the summary, exit 139, in one run of the JAX file in two on a CPU).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    main()
