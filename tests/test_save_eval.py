"""Keep, evaluate and watch an agent: --save-model, --eval-episodes, --eval-model and --capture-video, in every script.
A model saved by either file of a pair loads in both, and evaluating it gives the returns the training run reported."""

import json
import math
import os
import pathlib
import signal
import subprocess
import sys
import time

import gymnasium as gym
import pytest
import torch
import tyro
from helpers.in_process import prepare, run_in_process
from helpers.scripts import load_script, run_main, run_script

OFF_POLICY = ["--env-id", "Pendulum-v1", "--learning-starts", "100", "--batch-size", "32", "--total-timesteps", "300"]
PAIRS = {  # the baseline of each pair, and a short training run that goes past the start of learning on a CPU
    "sac_continuous_action": OFF_POLICY,
    "td3_continuous_action": OFF_POLICY,
    "ppo_continuous_action": [
        "--env-id",
        "Pendulum-v1",
        "--num-envs",
        "1",
        "--num-steps",
        "64",
        "--num-minibatches",
        "2",
        "--update-epochs",
        "1",
        "--total-timesteps",
        "128",
    ],
    "dqn": ["--learning-starts", "200", "--batch-size", "32", "--total-timesteps", "400"],
    "ppo_atari": [
        "--num-envs",
        "2",
        "--num-steps",
        "16",
        "--num-minibatches",
        "2",
        "--update-epochs",
        "1",
        "--total-timesteps",
        "64",
    ],
}
ENV = {
    "sac_continuous_action": "Pendulum-v1",
    "td3_continuous_action": "Pendulum-v1",
    "ppo_continuous_action": "Pendulum-v1",
    "dqn": "CartPole-v1",
    "ppo_atari": "Breakout-v5",
}
SCRIPTS = [pytest.param(pair + variant, pair, id=pair + variant) for pair in PAIRS for variant in ("", "_torchcompile")]
GYMNASIUM = [p for p in SCRIPTS if p.values[1] != "ppo_atari"]


def run_dir(summary):
    return pathlib.Path(summary["_run_dir"])


def evaluate_file(script, env_id, model, tmp_path, *flags, runner=run_main):
    folder = tmp_path / f"evaluation-{script}"  # its own run folder (one second's runs of a file share one)
    folder.mkdir(exist_ok=True)
    proc, summary = runner(script, "--env-id", env_id, "--eval-model", model, "--eval-episodes", 2, *flags, tmp_path=folder)
    assert summary["status"] == "evaluated" and summary["global_step"] == 0 and summary["eval_episodes"] == 2
    assert "warning: --total-timesteps" not in proc.stderr  # an evaluation is no short training run
    assert not (run_dir(summary) / "model.pt").exists()  # nothing was trained, nothing is saved
    return summary["eval_return_mean"]


@pytest.mark.parametrize("pair", list(PAIRS))
def test_saved_agent_evaluates_as_in_memory_in_both_files(pair, tmp_path):
    trained = {}
    for script in (pair, pair + "_torchcompile"):
        _, summary = run_main(script, *PAIRS[pair], "--save-model", "--eval-episodes", 2, tmp_path=tmp_path)
        assert summary["status"] == "finished" and summary["eval_episodes"] == 2
        assert summary["eval_return_std"] >= 0 and math.isfinite(summary["eval_return_mean"])
        saved = torch.load(run_dir(summary) / "model.pt", map_location="cpu", weights_only=True)
        assert saved["agent"] == pair and saved["env_id"] == ENV[pair] and saved["args"]["seed"] == 1
        assert saved["args"]["total_timesteps"] == int(PAIRS[pair][-1])
        if (
            pair == "ppo_continuous_action"
        ):  # the observation normalization the policy was trained with, without which it fails
            assert set(saved["obs_rms"]) == {"mean", "var", "count"} and saved["obs_rms"]["count"] > 100
            assert saved["obs_rms"]["mean"].abs().sum() > 0
        trained[script] = (summary["eval_return_mean"], run_dir(summary) / "model.pt", saved)
    # the two files save the same names and shapes
    (_, _, base), (_, _, fast) = trained.values()
    assert {k: v.shape for k, v in base["model"].items()} == {k: v.shape for k, v in fast["model"].items()}
    # save -> load -> evaluate == the in-memory agent's evaluation, across the pair: each file loads the other's model
    # (and so both files' loading and evaluation run, each on a model its own training did not leave in memory)
    for (trainer, (returned, model, _)), loader in zip(trained.items(), reversed(list(trained))):
        got = evaluate_file(loader, ENV[pair], model, tmp_path)
        assert got == pytest.approx(returned, rel=1e-5, abs=1e-4), (trainer, loader)


@pytest.mark.compile
def test_compiled_policy_evaluates_a_saved_agent(tmp_path):
    """The fast variant evaluates with its compiled policy (one compile, shared with training): same returns. PPO's,
    whose --compile compiles on a CPU too (SAC's and TD3's run their eager files there)."""
    pair = "ppo_continuous_action"
    _, summary = run_main(pair, *PAIRS[pair], "--save-model", "--eval-episodes", 2, tmp_path=tmp_path)
    got = evaluate_file(pair + "_torchcompile", ENV[pair], run_dir(summary) / "model.pt", tmp_path, "--compile")
    assert got == pytest.approx(summary["eval_return_mean"], rel=1e-5, abs=1e-4)


# how each file acts deterministically, from main's variables at the end of a run: (baseline, fast)
ACT = {
    "sac_continuous_action": (
        lambda v, o: v["actor"].get_action(o)[2],
        lambda v, o: v["sac"].learned["actor"].get_action(o)[2],
    ),
    "td3_continuous_action": (lambda v, o: v["actor"](o), lambda v, o: v["td3"].learned["actor"](o)),
    "ppo_continuous_action": (lambda v, o: v["agent"].actor_mean(o), lambda v, o: v["agent"].actor_mean(o)),
    "dqn": (lambda v, o: v["q_network"](o).argmax(1), lambda v, o: v["dqn"].policy(o)),
    "ppo_atari": (
        lambda v, o: v["agent"].actor(v["agent"].network(o / 255.0)).argmax(-1),
        lambda v, o: v["agent"].actor(v["agent"].network(o / 255.0)).argmax(-1),
    ),
}


@pytest.mark.parametrize("pair", list(PAIRS))
def test_the_fast_policy_acts_with_the_loaded_weights(pair, tmp_path, monkeypatch):
    """--eval-model loads in place into what the fast policy reads (the same function the loop compiles and captures):
    from weights unlike any a run starts from, it acts as the baseline's network with those weights."""
    for folder in ("base", "fast"):
        (tmp_path / folder).mkdir()
    base = run_in_process(pair, *PAIRS[pair], "--save-model", tmp_path=tmp_path / "base", monkeypatch=monkeypatch)
    model = next((tmp_path / "base" / "runs").glob("*/model.pt"))
    saved = torch.load(model, map_location="cpu", weights_only=True)
    generator = torch.Generator().manual_seed(123)
    saved["model"] = {
        k: v + torch.randn(v.shape, generator=generator) * 0.5 if v.is_floating_point() and "action_" not in k else v
        for k, v in saved["model"].items()
    }  # (the action scale and bias are the env's, kept)
    torch.save(saved, tmp_path / "moved.pt")
    fast = run_in_process(
        pair + "_torchcompile",
        "--env-id",
        ENV[pair],
        "--eval-model",
        tmp_path / "moved.pt",
        "--eval-episodes",
        1,
        tmp_path=tmp_path / "fast",
        monkeypatch=monkeypatch,
    )
    assert fast.state["status"] == "evaluated"
    module = base.state["actor" if "actor" in base.state else "q_network" if pair == "dqn" else "agent"]
    module.load_state_dict(saved["model"])
    rows = fast.state["args"].num_envs
    if pair == "ppo_atari":
        obs = torch.randint(0, 256, (rows, 4, 84, 84), generator=generator, dtype=torch.uint8)
    else:
        obs = torch.randn(rows, gym.make(ENV[pair]).observation_space.shape[0], generator=generator)
    act_base, act_fast = ACT[pair]
    with torch.no_grad():
        expected, got = act_base(base.state, obs.float()), act_fast(fast.state, obs)
    torch.testing.assert_close(got.float(), expected.float(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("when", ["training", "evaluation"])
@pytest.mark.parametrize("script,pair", SCRIPTS)
def test_interrupted_run_still_saves(script, pair, when, tmp_path, monkeypatch):
    flags = [*PAIRS[pair], "--save-model", "--eval-episodes", "1"]
    module, args = prepare(script, *flags, tmp_path=tmp_path, monkeypatch=monkeypatch)
    row = module.Run.row

    def row_then_ctrl_c(self, *a, **kw):  # Ctrl-C right after the first metrics row
        row(self, *a, **kw)
        raise KeyboardInterrupt

    def ctrl_c(*a, **kw):
        raise KeyboardInterrupt

    if when == "training":
        monkeypatch.setattr(module.Run, "row", row_then_ctrl_c)
    else:
        monkeypatch.setattr(module, "evaluate", ctrl_c)
    assert module.main(args)["status"] == "interrupted"  # (run as a script: exit status 130, test_async_envs.py)
    (folder,) = (tmp_path / "runs").iterdir()
    summary = json.loads((folder / "summary.json").read_text())
    steps = int(PAIRS[pair][-1])
    assert summary["status"] == "interrupted" and 0 < summary["global_step"] <= steps
    assert (summary["global_step"] == steps) == (when == "evaluation")
    assert summary["eval_episodes"] is None  # Ctrl-C means stop: no evaluation after it, none kept from it
    saved = torch.load(folder / "model.pt", map_location="cpu", weights_only=True)
    assert saved["agent"] == pair and saved["env_id"] == ENV[pair] and saved["model"]


@pytest.mark.parametrize("script,pair", SCRIPTS)
def test_a_signal_after_the_last_step_stops_the_run_before_its_evaluation(script, pair, tmp_path, monkeypatch):
    """A SIGTERM that lands after the loop's last check (while the envs close, while model.pt is written; before any
    step of an --eval-model run) still stops the run: no evaluation, summary.json says terminated (exit 143)."""
    flags = [*PAIRS[pair], "--save-model", "--eval-episodes", "1"]
    module, args = prepare(script, *flags, tmp_path=tmp_path, monkeypatch=monkeypatch)
    finish, evaluated = module.Run.finish, []

    def sigterm_then_finish(self, *a, **kw):
        self.ask_to_stop(signal.SIGTERM, None)
        return finish(self, *a, **kw)

    monkeypatch.setattr(module.Run, "finish", sigterm_then_finish)
    monkeypatch.setattr(module, "evaluate", lambda *a, **kw: evaluated.append(1) or [0.0])
    assert module.main(args)["status"] == "terminated" and evaluated == []
    (folder,) = (tmp_path / "runs").iterdir()
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["status"] == "terminated" and summary["eval_episodes"] is None
    assert summary["global_step"] == int(PAIRS[pair][-1])  # training had ended
    assert (folder / "model.pt").is_file()


@pytest.mark.parametrize("script,pair", SCRIPTS)
def test_steps_per_second_leave_the_evaluation_out(script, pair, tmp_path, monkeypatch):
    """sps is the training's: an evaluation that takes a million seconds (on the clock the scripts read) leaves it as
    it is, and only the run's wall time grows."""
    flags = [*PAIRS[pair], "--eval-episodes", "1", "--measure-burnin", "1"]
    module, args = prepare(script, *flags, tmp_path=tmp_path, monkeypatch=monkeypatch)
    offset, real_time, evaluate = [0.0], time.time, module.evaluate

    def slow_evaluate(*a, **kw):
        offset[0] += 1e6
        return evaluate(*a, **kw)

    monkeypatch.setattr(time, "time", lambda: real_time() + offset[0])
    monkeypatch.setattr(module, "evaluate", slow_evaluate)
    module.main(args)
    summary = json.loads(next((tmp_path / "runs").glob("*/summary.json")).read_text())
    assert summary["eval_episodes"] == 1 and summary["wall_time_s"] > 1e6
    assert summary["sps"] > 1.0  # with the evaluation counted it would be below 0.001


@pytest.mark.parametrize("script,pair", SCRIPTS)
def test_bad_model_files_fail_with_one_line(script, pair, tmp_path, monkeypatch, capsys):
    module = load_script(script)
    monkeypatch.chdir(tmp_path)
    other = "dqn" if pair != "dqn" else "sac_continuous_action"
    files = {  # file name: (content, words the error must hold)
        "missing.pt": (None, "No such file"),
        "text.pt": (b"not a model\n", f"is no {pair} model for {ENV[pair]}"),
        "other_algo.pt": ({"agent": other, "env_id": ENV[pair], "args": {}, "model": {}}, f"holds a {other} agent"),
        "other_env.pt": (
            {"agent": pair, "env_id": "Acrobot-v1", "args": {}, "model": {}},
            f"holds a {pair} agent for Acrobot-v1",
        ),
        "shapes.pt": ({"agent": pair, "env_id": ENV[pair], "args": {}, "model": {"fc1.weight": torch.zeros(3)}}, ""),
    }
    for name, (content, words) in files.items():
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif content is not None:
            torch.save(content, path)
        args = tyro.cli(
            module.Args, args=["--output-dir", str(tmp_path / "runs"), "--env-id", ENV[pair], "--eval-model", str(path)]
        )
        with pytest.raises(SystemExit) as exit:
            module.main(args)
        message = str(exit.value.code)
        assert message.startswith("error: --eval-model: ") and words in message and "\n" not in message, (name, message)
        assert not list(tmp_path.glob("runs/*/summary.json")), name  # failed before any run was written
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit:
        module.check_args(module.Args(env_id=ENV[pair], eval_episodes=-1))
    assert str(exit.value.code).startswith("error: --eval-episodes: ")


def can_render(env_id, **env):
    """Whether this machine renders env_id offscreen (MuJoCo needs EGL or OSMesa, classic control needs pygame)."""
    code = (
        f"import gymnasium as gym; e = gym.make({env_id!r}, render_mode='rgb_array'); e.reset(seed=0); assert e.render().size"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **env})
    return proc.returncode == 0, proc.stderr.strip().splitlines()[-1:] or [""]


@pytest.mark.parametrize("script,pair", GYMNASIUM)
def test_video_of_the_evaluation(script, pair, tmp_path):
    ok, why = can_render(ENV[pair])
    if not ok:
        pytest.skip(f"{ENV[pair]} cannot render here: {why[0]}")
    _, summary = run_script(script, *PAIRS[pair], "--eval-episodes", 1, "--capture-video", tmp_path=tmp_path)
    videos = sorted(p.name for p in (run_dir(summary) / "videos").iterdir())
    assert videos == ["rl-video-episode-0.mp4"]  # the evaluation episode, and no training video
    assert (run_dir(summary) / "videos" / videos[0]).stat().st_size > 1000


def test_video_of_training_without_evaluation(tmp_path):
    ok, why = can_render("Pendulum-v1")
    if not ok:
        pytest.skip(f"Pendulum-v1 cannot render here: {why[0]}")
    _, summary = run_script(
        "sac_continuous_action_torchcompile", *PAIRS["sac_continuous_action"], "--capture-video", tmp_path=tmp_path
    )
    assert summary["eval_episodes"] is None
    assert "rl-video-episode-0.mp4" in [p.name for p in (run_dir(summary) / "videos").iterdir()]  # the first env's episode


def test_video_of_a_mujoco_evaluation_headless(tmp_path):
    ok, why = can_render("InvertedPendulum-v4", MUJOCO_GL="egl")
    if not ok:
        pytest.skip(f"MuJoCo cannot render offscreen here (EGL): {why[0]}")
    # InvertedPendulum: an untrained actor drops the pole within tens of steps, so the video is short (a 1,000-step
    # HalfCheetah episode renders for most of a minute in software on 2 cores)
    model = tmp_path / "model.pt"
    module = load_script("td3_continuous_action")
    probe = gym.make("InvertedPendulum-v4")
    actor = module.Actor(4, 1, probe.action_space.low, probe.action_space.high)
    torch.save(
        {"agent": "td3_continuous_action", "env_id": "InvertedPendulum-v4", "args": {}, "model": actor.state_dict()}, model
    )
    _, summary = run_script(
        "td3_continuous_action",
        "--env-id",
        "InvertedPendulum-v4",
        "--eval-model",
        model,
        "--eval-episodes",
        1,
        "--capture-video",
        tmp_path=tmp_path,
    )
    assert [p.name for p in (run_dir(summary) / "videos").iterdir()] == ["rl-video-episode-0.mp4"]


@pytest.mark.gpu
@pytest.mark.compile
@pytest.mark.parametrize("pair", list(PAIRS))
def test_graphed_policy_evaluates_what_the_baseline_does_on_gpu(pair, tmp_path):
    """Trained and evaluated with --compile --cudagraphs; the baseline evaluates the saved file alike; and a fresh
    --cudagraphs run loads the baseline's file in place, so its captured policy acts with the loaded weights."""
    fast = pair + "_torchcompile"
    _, summary = run_script(
        fast, *PAIRS[pair], "--compile", "--cudagraphs", "--save-model", "--eval-episodes", 2, tmp_path=tmp_path
    )
    model = run_dir(summary) / "model.pt"
    got = evaluate_file(pair, ENV[pair], model, tmp_path, runner=run_script)  # (a process of its own: CUDA graphs)
    assert got == pytest.approx(summary["eval_return_mean"], rel=1e-3, abs=1e-2)
    _, base = run_script(pair, *PAIRS[pair], "--save-model", "--eval-episodes", 2, tmp_path=tmp_path)
    got = evaluate_file(fast, ENV[pair], run_dir(base) / "model.pt", tmp_path, "--cudagraphs", runner=run_script)
    assert got == pytest.approx(base["eval_return_mean"], rel=1e-3, abs=1e-2)
