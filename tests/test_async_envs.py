"""--async-envs: gymnasium's AsyncVectorEnv (a process per env, shared memory) in both files of every
gymnasium pair, with the same autoreset mode: for a given seed a short run stores exactly the transitions (replay
buffer) or the rollout (PPO) that the sync run stores, sees the same episodes and learns the same parameters. The
Atari scripts step their envs in envpool's threads: --envpool-threads sets how many, --async-envs is refused. Ctrl-C
with --async-envs ends the run as without it."""

import pathlib
import signal
import subprocess

import numpy as np
import pytest
import torch
from helpers.background import Background, wait_until
from helpers.in_process import run_in_process
from helpers.scripts import load_script, run_script

OFF_POLICY = [
    "--env-id",
    "Pendulum-v1",
    "--num-envs",
    2,
    "--total-timesteps",
    420,
    "--learning-starts",
    300,
    "--batch-size",
    32,
    "--buffer-size",
    1000,
    "--measure-burnin",
    0,
    "--log-interval",
    100,
]  # both envs truncate at step 200 (SAME_STEP)
FLAGS = {
    "dqn": [
        "--num-envs",
        2,
        "--total-timesteps",
        600,
        "--learning-starts",
        200,
        "--train-frequency",
        2,
        "--batch-size",
        32,
        "--buffer-size",
        1000,
        "--measure-burnin",
        0,
        "--log-interval",
        100,
    ],  # episodes end (terminations) along the way
    "sac_continuous_action": OFF_POLICY,
    "td3_continuous_action": OFF_POLICY,
    "ppo_continuous_action": [
        "--env-id",
        "Pendulum-v1",
        "--num-envs",
        2,
        "--num-steps",
        128,
        "--num-minibatches",
        4,
        "--update-epochs",
        2,
        "--total-timesteps",
        768,
        "--measure-burnin",
        0,
    ],  # the second rollout holds the NEXT_STEP reset rows
}
FILES = [f"{algo}{suffix}" for algo in FLAGS for suffix in ["", "_torchcompile"]]


def stored(state):
    """What the run kept: its replay buffer's arrays, or PPO's rollout buffers (the last iteration's), its episodes and
    its parameters."""
    agent = next((state[k] for k in ("dqn", "sac", "td3") if k in state), None)  # a fast file's namespace
    rb = state.get("rb") or getattr(agent, "rb", None)
    if rb is not None:
        arrays = {k: v for k, v in vars(rb).items() if isinstance(v, (np.ndarray, torch.Tensor)) and k != "count"}
        arrays.update(
            {f"column{i}": c for i, c in enumerate(getattr(rb, "columns", []))}
        )  # the SAC and TD3 baselines' columns
    else:
        arrays = dict(state["storage"])  # PPO's rollout, by name
    learned = getattr(agent, "learned", {})  # (a fast file's learned parts)
    network = (
        state.get("agent") or state.get("actor") or state.get("q_network") or learned.get("q_network") or learned["actor"]
    )
    params = {f"param.{k}": v for k, v in network.state_dict().items()}
    return {
        k: torch.as_tensor(np.asarray(v.cpu()) if isinstance(v, torch.Tensor) else v) for k, v in {**arrays, **params}.items()
    }, list(map(tuple, np.asarray(state["run"].episodes, dtype=float)))


@pytest.mark.parametrize("script", FILES)
def test_async_envs_store_what_sync_envs_store(script, tmp_path, monkeypatch):
    algo = script.removesuffix("_torchcompile")
    runs = []
    for extra in ([], ["--async-envs"]):
        (folder := tmp_path / ("async" if extra else "sync")).mkdir()
        runs.append(run_in_process(script, *FLAGS[algo], *extra, tmp_path=folder, monkeypatch=monkeypatch))
    assert [r.state["status"] for r in runs] == ["finished"] * 2 and runs[1].state["args"].async_envs
    assert type(runs[1].state["envs"].unwrapped).__name__ == "AsyncVectorEnv" != type(runs[0].state["envs"].unwrapped).__name__
    (sync, sync_episodes), (asynchronous, async_episodes) = stored(runs[0].state), stored(runs[1].state)
    assert sync_episodes and async_episodes == sync_episodes
    assert sync.keys() == asynchronous.keys()
    for k in sync:
        assert torch.equal(sync[k], asynchronous[k]), k
    assert any(v.abs().sum() > 0 for k, v in sync.items() if not k.startswith("param.")), "nothing was stored"


@pytest.mark.parametrize("script", ["ppo_atari", "ppo_atari_torchcompile"])
def test_atari_refuses_async_envs_and_takes_envpool_threads(script, tmp_path, capsys):
    module = load_script(script)
    with pytest.raises(SystemExit) as exit:  # before any work: no warning, no run folder
        module.main(module.Args(async_envs=True, output_dir=str(tmp_path / "runs")))
    assert not (tmp_path / "runs").exists()
    assert (
        exit.value.code.startswith("error: --async-envs: ")
        and "--envpool-threads" in exit.value.code
        and capsys.readouterr().err == ""
    )
    with pytest.raises(SystemExit) as exit:
        module.check_args(module.Args(envpool_threads=-1))
    assert exit.value.code == "error: --envpool-threads: must be in [0, inf), got -1"
    proc, summary = run_script(
        script,
        "--envpool-threads",
        2,
        "--num-envs",
        4,
        "--num-steps",
        16,
        "--num-minibatches",
        2,
        "--update-epochs",
        1,
        "--total-timesteps",
        128,
        "--measure-burnin",
        1,
        tmp_path=tmp_path,
    )
    assert summary["status"] == "finished" and summary["args"]["envpool_threads"] == 2


@pytest.mark.parametrize("script", ["ppo_continuous_action", "sac_continuous_action_torchcompile"])
def test_ctrl_c_with_async_envs_writes_the_summary(script, tmp_path):
    """Ctrl-C reaches the whole process group, the env workers too: they ignore it, the training process stops them and
    writes its summary (and PPO's model.pt with the observation statistics), exit status 130, no worker left behind."""
    flags = ["--env-id", "Pendulum-v1", "--num-envs", 2, "--async-envs", "--total-timesteps", 1_000_000, "--save-model"]
    flags += ["--num-steps", 64] if "ppo" in script else []
    with Background(script, *flags, tmp_path=tmp_path) as run:
        run.wait_for_rows(3)  # a few rows (PPO: iterations, with their statistics)
        run.signal(signal.SIGINT, group=True)  # as a terminal's Ctrl-C
        summary = run.finish(limit=120, status=130)
        assert summary["status"] == "interrupted" and "Traceback" not in "".join(run.stderr), run.output()
        saved = torch.load(pathlib.Path(summary["_run_dir"]) / "model.pt", weights_only=True)
        if "ppo" in script:
            assert saved["obs_rms"]["count"] > 1

        def group_gone():
            return not subprocess.run(["pgrep", "-g", str(run.proc.pid)], capture_output=True, text=True).stdout.split()

        wait_until(group_gone, 60, "no process of the run left", run.output)
