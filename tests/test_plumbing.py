"""The plumbing every script shares: every number in its range, an output folder that cannot be made, a
run that diverges, progress off a terminal, wandb's keys, --exp-name. The texts are one (test_files.py), so most of
these run on one or two scripts; the range checks run on all ten."""

import dataclasses
import json
import math
import pathlib
import sys
import types
import typing

import pytest
from helpers.in_process import run_in_process
from helpers.scripts import SCRIPTS, load_script, read_metrics, run_main, run_script

SCRIPT_NAMES = sorted(p.stem for p in SCRIPTS.glob("*.py"))
ENV = {"ppo_atari": "Breakout-v5", "dqn": "CartPole-v1"}  # the others: a MuJoCo or classic-control Box task
DQN_SHORT = [
    "--total-timesteps",
    300,
    "--learning-starts",
    100,
    "--train-frequency",
    2,
    "--batch-size",
    32,
    "--buffer-size",
    200,
    "--measure-burnin",
    2,
    "--log-interval",
    50,
]


def numeric_fields(module):
    """(name, type) of every int or float flag (float | None included)."""
    hints = typing.get_type_hints(module.Args)
    out = []
    for f in dataclasses.fields(module.Args):
        kinds = set(typing.get_args(hints[f.name])) - {type(None)} or {hints[f.name]}
        if kinds & {int, float}:
            out.append((f.name, float if float in kinds else int))
    return out


def fails_naming(module, flag, **overrides):
    with pytest.raises(SystemExit) as e:
        module.check_args(module.Args(**overrides))
    message = str(e.value.code)
    assert message.startswith(f"error: {flag}: ") and "\n" not in message, message
    return message


@pytest.mark.parametrize("script", SCRIPT_NAMES)
def test_every_number_has_its_range(script, capsys):
    """NaN for every float flag and -1 for every int flag fail with one line naming the flag; so do an infinite
    learning rate and a discount above 1. The defaults pass."""
    module = load_script(script)
    module.check_args(module.Args(cuda=False))  # (without CUDA, the default --cuda would warn that it falls back)
    fields = numeric_fields(module)
    assert {"seed", "total_timesteps", "eval_episodes", "measure_burnin", "gamma"} <= {n for n, _ in fields}
    for name, kind in fields:
        fails_naming(module, "--" + name.replace("_", "-"), **{name: math.nan if kind is float else -1})
    lr = "learning_rate" if "learning_rate" in {n for n, _ in fields} else "q_lr"
    assert "(0, inf)" in fails_naming(module, "--" + lr.replace("_", "-"), **{lr: math.inf})
    assert "[0, 1]" in fails_naming(module, "--gamma", gamma=1.5)
    assert "[0, 2**31)" in fails_naming(module, "--seed", seed=2**32)  # numpy takes no seed from 2**32 up
    assert capsys.readouterr().err == ""  # no warning before the error


@pytest.mark.parametrize("script", ["dqn_torchcompile", "sac_continuous_action"])
def test_a_range_that_depends_on_another_flag_leaves_the_others_checked(script):
    """--buffer-size's range starts at --batch-size: with --batch-size 1 it reads [1, inf), as the counts' range does,
    and the table keeps both (a table keyed by range would have lost one)."""
    module = load_script(script)
    fails_naming(module, "--log-interval", batch_size=1, buffer_size=1, log_interval=0)
    fails_naming(module, "--buffer-size", batch_size=64, buffer_size=32)


@pytest.mark.parametrize("script", ["td3_continuous_action", "ppo_continuous_action_torchcompile"])
def test_coefficients_and_tau(script):
    module = load_script(script)
    if "ppo" in script:
        fails_naming(module, "--clip-coef", clip_coef=-1.0)
        fails_naming(module, "--ent-coef", ent_coef=-0.01)
        fails_naming(module, "--target-kl", target_kl=-0.1)
        module.check_args(module.Args(target_kl=0.015))  # a positive target is fine, and so is none
    else:
        assert "(0, 1]" in fails_naming(module, "--tau", tau=3.0)
        fails_naming(module, "--tau", tau=0.0)
        module.check_args(module.Args(tau=1.0))


def test_an_output_folder_that_cannot_be_made_is_one_line(tmp_path):
    (tmp_path / "a_file").write_text("not a folder")
    proc, _ = run_main("dqn", "--output-dir", tmp_path / "a_file" / "runs", tmp_path=tmp_path, expect_ok=False)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode != 0 and len(errors) == 1 and errors[0].startswith("error: --output-dir: "), proc.stderr[-1500:]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("script", ["dqn", "dqn_torchcompile"])
def test_a_run_that_diverges_says_so(script, tmp_path):
    """A learning rate of 1e30 blows the Q-values up within a few updates: the run stops at the first row with a NaN,
    names the value and the step in one line, writes summary.json with status diverged and exits non-zero."""
    proc, _ = run_main(script, *DQN_SHORT, "--learning-rate", 1e30, "--save-model", tmp_path=tmp_path, expect_ok=False)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 1 and len(errors) == 1, proc.stderr[-1500:]
    assert errors[0].startswith("error: the run diverged: ") and " is nan at step " in errors[0], errors
    path = pathlib.Path(proc.stdout.strip().splitlines()[-1])  # still the last line printed
    summary = json.loads(path.read_text())
    step = int(errors[0].rsplit(" ", 1)[1])
    assert summary["status"] == "diverged" and summary["global_step"] == step < 300
    rows = read_metrics({"_run_dir": path.parent})
    assert int(rows[-1]["global_step"]) == step and "nan" in rows[-1].values()  # the row that diverged is written
    assert not (path.parent / "model.pt").exists()  # a diverged model is not worth keeping


def test_progress_off_a_terminal_is_one_plain_line_per_row(tmp_path):
    proc, summary = run_main("dqn", *DQN_SHORT, tmp_path=tmp_path)  # stderr is no terminal here, as in Slurm or CI
    lines = [line for line in proc.stderr.splitlines() if line.startswith("step ")]
    assert [line.split()[1] for line in lines] == [f"{s}/300:" for s in range(50, 301, 50)], proc.stderr
    assert lines[-1].endswith(f"steps/s, return {round(summary['episodic_return'], 1)}")
    assert lines[0].startswith("step 50/300: warming up, return ")  # before learning starts: no 0 steps/s
    assert "\r" not in proc.stderr  # no progress bar


def test_tensorboard_events_hold_cleanrls_keys_at_the_logged_steps(tmp_path):
    """`tensorboard --logdir runs` shows every run: the event file in the run folder holds CleanRL's keys at each
    metrics row's step, and the hyperparameters as CleanRL's text table."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    proc, summary = run_main("dqn", *DQN_SHORT, tmp_path=tmp_path)
    events = EventAccumulator(summary["_run_dir"], size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    keys = set(events.Tags()["scalars"])
    assert {"charts/SPS", "charts/episodic_return", "charts/epsilon", "losses/td_loss", "losses/q_values"} <= keys, keys
    assert [e.step for e in events.Scalars("charts/epsilon")] == list(range(50, 301, 50))
    assert [e.step for e in events.Scalars("losses/td_loss")] == list(range(150, 301, 50))  # once learning started
    rows = read_metrics(summary)
    assert events.Scalars("losses/td_loss")[-1].value == pytest.approx(float(rows[-1]["td_loss"]), rel=1e-6)
    table = events.Tensors("hyperparameters/text_summary")[0].tensor_proto.string_val[0].decode()
    assert table.startswith("|param|value|\n|-|-|\n") and "|learning_starts|100|" in table, table[:300]


def test_an_evaluation_prints_its_return_in_one_line(tmp_path):
    proc, summary = run_main("dqn", *DQN_SHORT, "--eval-episodes", 2, tmp_path=tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("evaluation: ")]
    mean, std = summary["eval_return_mean"], summary["eval_return_std"]
    assert lines == [f"evaluation: 2 episodes, return {mean:.1f} +- {std:.1f}"], proc.stderr[-1500:]


def test_a_bad_eval_model_leaves_no_run_folder(tmp_path):
    (tmp_path / "broken.pt").write_text("not a model")
    proc, _ = run_main("dqn", "--eval-model", tmp_path / "broken.pt", tmp_path=tmp_path, expect_ok=False)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 1 and len(errors) == 1 and errors[0].startswith("error: --eval-model: "), proc.stderr[-1500:]
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_mujoco_v4_notices_are_silenced_and_nothing_else(tmp_path):
    """CleanRL's -v4 tasks stay: gymnasium's advice to move to -v5 and MuJoCo's 'settotalmass' note are silenced (no
    MUJOCO_LOG.TXT either); a run still warns about what it did not measure."""
    flags = ["--env-id", "HalfCheetah-v4", "--total-timesteps", 20, "--learning-starts", 100]
    proc, _ = run_script("sac_continuous_action", *flags, tmp_path=tmp_path)
    assert "out of date" not in proc.stderr and "settotalmass" not in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
    assert "warning: --total-timesteps 20: steps/s not measured" in proc.stderr


def test_track_logs_cleanrls_keys_to_wandb(tmp_path, monkeypatch):
    """--track with a stand-in wandb module: init gets the project, the run name and the arguments; each row is
    logged under CleanRL's keys (charts/SPS, charts/episodic_return, losses/td_loss, ...) at its global step."""
    calls = []
    run = types.SimpleNamespace(log=lambda values, step: calls.append((step, values)))
    fake = types.SimpleNamespace(init=lambda **kw: calls.append(kw) or run)
    monkeypatch.setitem(sys.modules, "wandb", fake)
    state = run_in_process(
        "dqn",
        *DQN_SHORT,
        "--track",
        "--wandb-project-name",
        "p",
        "--exp-name",
        "e",
        tmp_path=tmp_path,
        monkeypatch=monkeypatch,
    ).state
    init, rows = calls[0], calls[1:]
    assert (
        init["project"] == "p"
        and init["name"] == pathlib.Path(state["run"].run_dir).name
        and init["config"]["exp_name"] == "e"
    )
    assert [step for step, _ in rows] == list(range(50, 301, 50))
    last = rows[-1][1]
    assert {
        "charts/SPS",
        "charts/episodic_return",
        "charts/episodic_length",
        "charts/epsilon",
        "losses/td_loss",
        "losses/q_values",
    } <= set(last), sorted(last)
    assert all(isinstance(v, (int, float)) for v in last.values())
    assert "losses/td_loss" not in rows[0][1]  # before learning starts: no losses, no None values


def test_track_without_wandb_is_one_line(tmp_path):
    try:  # wandb is not a requirement; where it is installed this test has nothing to check
        import wandb  # noqa: F401

        pytest.skip("wandb is installed here")
    except ImportError:
        pass
    proc, _ = run_main("dqn", "--track", tmp_path=tmp_path, expect_ok=False)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode != 0 and errors == ["error: --track: needs wandb: pip install wandb"], proc.stderr[-1500:]


def test_exp_name_names_the_run_folder(tmp_path):
    proc, summary = run_main("dqn", *DQN_SHORT, "--exp-name", "my_try", "--seed", 7, tmp_path=tmp_path)
    name = pathlib.Path(summary["_run_dir"]).name
    assert (
        name.startswith("CartPole-v1__my_try__7__") and summary["script"] == "dqn" and summary["args"]["exp_name"] == "my_try"
    )
