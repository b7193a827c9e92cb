"""Stop and resume (checkpoint.pt, --resume). A run stopped by a real SIGTERM in the middle of learning (its replay
buffer wrapped at least once), then resumed to the same budget, computes exactly what the run made straight computes:
bit-identical parameters and the same metrics.csv rows (but the clock's columns), its TensorBoard steps unrepeated.
Envpool's Atari envs cannot be saved: there the resumed run starts new episodes, says so, and is exact in all else.
Bad resumes are refused in one line, before any work, the folder untouched; a checkpoint is written whole."""

import csv
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch
from helpers.background import Background
from helpers.scripts import SCRIPTS, load_script, run_main, run_script

PENDULUM = ["--env-id", "Pendulum-v1", "--save-model"]
OFF_POLICY = [*PENDULUM, "--learning-starts", 50, "--buffer-size", 100, "--batch-size", 32, "--log-interval", 20]
OFF_POLICY += ["--total-timesteps", 800]
DQN = ["--learning-starts", 500, "--buffer-size", 1000, "--train-frequency", 2, "--log-interval", 500, "--save-model"]
DQN += ["--total-timesteps", 12_000]
PPO = [*PENDULUM, "--num-envs", 2, "--num-steps", 64, "--num-minibatches", 4, "--update-epochs", 2]
PPO += ["--total-timesteps", 2560]
# (script, flags, metrics rows before the SIGTERM: past a full replay buffer's first wrap)
CASES = [
    ("sac_continuous_action", OFF_POLICY, 10),
    ("sac_continuous_action_torchcompile", OFF_POLICY, 10),
    # a buffer not yet full, whose checkpoint holds its filled rows only (TD3's buffer is SAC's, in each file)
    pytest.param("td3_continuous_action", [*OFF_POLICY, "--buffer-size", 1000], 10, id="td3-not-full"),
    ("td3_continuous_action_torchcompile", OFF_POLICY, 10),
    ("dqn", DQN, 4),
    ("dqn_torchcompile", DQN, 4),
    ("ppo_continuous_action", PPO, 4),
    ("ppo_continuous_action_torchcompile", PPO, 4),
    pytest.param("ppo_continuous_action_torchcompile", [*PPO, "--compile"], 4, marks=pytest.mark.compile, id="ppo-compile"),
    pytest.param("dqn_torchcompile", [*DQN, "--buffer-size", 20_000], 4, id="dqn_torchcompile-not-full"),
    # env 0 filmed (RecordVideo between it and the Snapshot): its whole state kept all the same
    pytest.param("sac_continuous_action", [*OFF_POLICY, "--capture-video"], 10, id="sac-video"),
]
CLOCK = {"sps", "wall_time_s"}  # the columns a resumed run cannot repeat


def rows(run_dir):
    with open(pathlib.Path(run_dir) / "metrics.csv", newline="") as f:
        return [{k: v for k, v in row.items() if k not in CLOCK} for row in csv.DictReader(f)]


def model(run_dir):
    return torch.load(pathlib.Path(run_dir) / "model.pt", weights_only=True)["model"]


def stop(script, flags, tmp_path, after_rows, name="stopped"):
    """The run stopped by a SIGTERM once metrics.csv has after_rows rows: its folder, with checkpoint.pt."""
    (tmp_path / name).mkdir()
    with Background(script, *flags, tmp_path=tmp_path / name) as run:
        run.wait_for_rows(after_rows)
        run.signal(signal.SIGTERM)
        summary = run.finish(limit=300, status=143)
    assert summary["status"] == "terminated", summary
    assert (pathlib.Path(summary["_run_dir"]) / "checkpoint.pt").is_file()
    return summary


def tensorboard_steps(run_dir, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir))
    events.Reload()
    return [event.step for event in events.Scalars(tag)]


@pytest.mark.parametrize("script,flags,after_rows", CASES)
def test_a_resumed_run_computes_what_the_unstopped_run_computes(script, flags, after_rows, tmp_path):
    (tmp_path / "straight").mkdir()
    _, straight = run_main(script, *flags, tmp_path=tmp_path / "straight")
    stopped = stop(script, flags, tmp_path, after_rows)
    assert 0 < stopped["global_step"] < straight["global_step"]
    proc, resumed = run_main(script, *flags, "--resume", stopped["_run_dir"], tmp_path=tmp_path / "stopped")
    assert resumed["_run_dir"] == stopped["_run_dir"]  # the same folder, none made
    assert len(list((tmp_path / "stopped" / "runs").iterdir())) == 1
    assert resumed["status"] == "finished" and resumed["resumes"] == 1 and resumed["sps"] > 0
    assert resumed["global_step"] == straight["global_step"] and resumed["episodes"] == straight["episodes"]
    assert resumed["episodic_return"] == straight["episodic_return"]
    assert rows(resumed["_run_dir"]) == rows(straight["_run_dir"])
    a, b = model(straight["_run_dir"]), model(resumed["_run_dir"])
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), "the parameters differ"
    assert not (pathlib.Path(resumed["_run_dir"]) / "checkpoint.pt").exists()  # a finished run goes on no more
    tag = "charts/episodic_return"
    assert tensorboard_steps(resumed["_run_dir"], tag) == tensorboard_steps(straight["_run_dir"], tag)  # none twice
    if "--capture-video" in flags:  # the same episodes filmed, none again under another's name
        videos = [sorted(p.name for p in pathlib.Path(s["_run_dir"], "videos").iterdir()) for s in (straight, resumed)]
        assert videos[0] == videos[1] and videos[0], videos


def tensors(value):
    """The tensors in a buffer's state_dict, its columns' included."""
    values = value.values() if isinstance(value, dict) else value
    return [t for v in values for t in (tensors(v) if isinstance(v, list) else [v]) if isinstance(t, torch.Tensor)]


def contents(buffer):
    """Every array of a buffer, its rows to come included, as tensors."""
    arrays = [*vars(buffer).values(), *getattr(buffer, "columns", [])]
    return [torch.as_tensor(a) for a in arrays if isinstance(a, (np.ndarray, torch.Tensor))]


@pytest.mark.parametrize(
    "script", [f"{a}{b}" for a in ("sac_continuous_action", "td3_continuous_action", "dqn") for b in ("", "_torchcompile")]
)
def test_a_checkpoint_holds_a_replay_buffers_filled_rows_only(script):
    """Not the rows to come (1M on HalfCheetah): a buffer refilled from them is the buffer, its empty rows empty."""
    module = load_script(script)
    dqn = script.startswith("dqn")
    shape = (1000, 3) if dqn else (1000, 3, 1)  # (rows, obs_dim[, action_dim])
    buffer = module.ReplayBuffer(*shape, torch.device("cpu"))
    for step in range(37):  # two envs a step
        actions = torch.randint(2, (2,)) if dqn else torch.randn(2, 1)
        buffer.add(*(torch.randn(2, 3).numpy() for _ in "on"), actions.numpy(), *(torch.rand(2).round().numpy() for _ in "rt"))
    kept = module.states(dict(rb=buffer))["rb"]
    rows = [t for t in tensors(kept) if t.ndim]
    assert rows and all(len(t) == 74 for t in rows)
    assert all(t.untyped_storage().nbytes() == t.nbytes for t in rows)  # torch.save writes a storage whole
    fresh = module.ReplayBuffer(*shape, torch.device("cpu"))
    module.load_states(dict(rb=fresh), dict(rb=kept))
    assert (fresh.pos, fresh.full) == (74, False)
    mine, theirs = contents(fresh), contents(buffer)
    assert len(mine) == len(theirs) and all(torch.equal(a, b) for a, b in zip(mine, theirs))


def test_atari_resumes_with_new_episodes_and_exactly_otherwise(tmp_path):
    """envpool's envs cannot be saved: the resumed run says so in one line and starts new episodes. All else is the
    checkpoint's: the same parameters and random streams, so two resumes of one checkpoint run the same; the rows
    before the stop are kept, the learning rate follows its schedule, the budget is reached."""
    script = "ppo_atari_torchcompile"
    flags = ["--env-id", "Pong-v5", "--num-envs", 4, "--num-steps", 32, "--num-minibatches", 2, "--update-epochs", 1]
    flags += ["--total-timesteps", 1280, "--save-model"]
    (tmp_path / "straight").mkdir()
    _, straight = run_main(script, *flags, tmp_path=tmp_path / "straight")
    stopped = stop(script, flags, tmp_path, 3)
    kept = rows(stopped["_run_dir"])
    copy = tmp_path / "copy" / "runs" / pathlib.Path(stopped["_run_dir"]).name
    shutil.copytree(stopped["_run_dir"], copy)
    resumed = []
    for folder in (stopped["_run_dir"], copy):
        proc, summary = run_main(script, *flags, "--resume", folder, tmp_path=tmp_path)
        warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning: --resume")]
        assert warnings == ["warning: --resume: envpool's envs cannot be saved: they start new episodes"], proc.stderr
        assert summary["status"] == "finished" and summary["global_step"] == straight["global_step"]
        resumed.append(summary)
    assert rows(resumed[0]["_run_dir"]) == rows(resumed[1]["_run_dir"])  # deterministic from the checkpoint
    a, b = model(resumed[0]["_run_dir"]), model(resumed[1]["_run_dir"])
    assert all(torch.equal(a[k], b[k]) for k in a)
    after = rows(resumed[0]["_run_dir"])
    assert after[: len(kept)] == kept == rows(straight["_run_dir"])[: len(kept)]  # the rows before the stop
    for mine, theirs in zip(after, rows(straight["_run_dir"]), strict=True):
        assert mine["global_step"] == theirs["global_step"] and mine["learning_rate"] == theirs["learning_rate"]


def test_the_ray_file_resumes_its_runners_envs_exactly(tmp_path, monkeypatch):
    """The runners' envs, where they are and their action noise go into the checkpoint and come back."""
    pytest.importorskip("ray")
    script = "ppo_continuous_action_ray_torchcompile"
    flags = [*PPO, "--num-envs", 4, "--env-runners", 2, "--total-timesteps", 4096]
    (tmp_path / "straight").mkdir()
    _, straight = run_script(script, *flags, tmp_path=tmp_path / "straight")
    stopped = stop(script, flags, tmp_path, 3)
    _, resumed = run_script(script, *flags, "--resume", stopped["_run_dir"], tmp_path=tmp_path / "stopped")
    assert resumed["status"] == "finished" and resumed["resumes"] == 1
    assert rows(resumed["_run_dir"]) == rows(straight["_run_dir"])
    a, b = model(straight["_run_dir"]), model(resumed["_run_dir"])
    assert all(torch.equal(a[k], b[k]) for k in a)


def torchrun_background(flags, tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    cmd += [str(SCRIPTS / "ppo_atari_multigpu_torchcompile.py"), *map(str, flags), "--output-dir", str(tmp_path / "runs")]
    return Background(None, tmp_path=tmp_path, cmd=cmd)


def test_torchrun_stops_every_rank_at_one_iteration_and_resumes_them_all(tmp_path):
    """SIGTERM to torchrun's process group, as Slurm sends it: every rank stops at the end of the same iteration (one
    all_reduce of the stop flag per iteration: no rank left waiting in an all_reduce), rank 0 writes one summary
    (terminated), model.pt and one checkpoint with every rank's random streams, and no rank is left running. Resumed
    under torchrun, every rank goes on from it; resumed on another number of ranks, it is refused. A row every
    --log-interval iterations of every rank's steps."""
    flags = ["--num-envs", 2, "--num-steps", 32, "--num-minibatches", 2, "--update-epochs", 1, "--measure-burnin", 1]
    flags += ["--total-timesteps", 2560, "--no-cuda", "--dist-backend", "gloo", "--save-model", "--log-interval", 2]
    with torchrun_background(flags, tmp_path) as run:
        run.wait_for_rows(3)
        ranks = [pid for pid in run.seen if "ppo_atari_multigpu" in run.seen[pid] and pid != run.proc.pid]
        run.signal(signal.SIGTERM, group=True)
        run.wait(limit=300)  # (torchrun itself reports the signal it got and exits non-zero)
        assert not [pid for pid in ranks if os.path.exists(f"/proc/{pid}")], "a rank is still running"
    (folder,) = (tmp_path / "runs").iterdir()
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["status"] == "terminated" and summary["world_size"] == 2 and (folder / "model.pt").is_file()
    with torch.serialization.safe_globals(load_script("ppo_atari_multigpu_torchcompile").NUMPY):
        saved = torch.load(folder / "checkpoint.pt", weights_only=True)
    assert len(saved["ranks"]) == 2 and not torch.equal(saved["ranks"][0]["torch"], saved["ranks"][1]["torch"])
    (tmp_path / "one-rank").mkdir()
    error = refusal("ppo_atari_multigpu_torchcompile", folder, *flags, tmp_path=tmp_path / "one-rank")  # plain python
    assert error == "error: --resume: the run resumed ran on 2 ranks, not 1 (torchrun --nproc-per-node)", error
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    cmd += [str(SCRIPTS / "ppo_atari_multigpu_torchcompile.py"), *map(str, flags), "--resume", str(folder)]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["resumes"] == 1 and summary["global_step"] == 2560
    assert len(list((tmp_path / "runs").iterdir())) == 1
    with open(folder / "metrics.csv", newline="") as f:  # 2 ranks x 2 envs x 32 steps an iteration, a row every 2
        assert [int(row["global_step"]) for row in csv.DictReader(f)] == list(range(256, 2561, 256))


# --- bad resumes: one line each, before any work, the folder untouched ---------------------------------------------


@pytest.fixture(scope="module")
def stopped_ppo(tmp_path_factory):
    """A PPO continuous run stopped by SIGTERM: its folder, with checkpoint.pt."""
    return stop("ppo_continuous_action", PPO, tmp_path_factory.mktemp("ppo"), 4)["_run_dir"]


def snapshot(folder):
    return {p.name: p.read_bytes() for p in pathlib.Path(folder).iterdir() if p.is_file()}


def refusal(script, folder, *flags, tmp_path):
    """One run with --resume folder that must be refused: its one error line."""
    before = snapshot(folder)
    proc, _ = run_script(script, *flags, "--resume", folder, tmp_path=tmp_path, expect_ok=False)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    assert proc.returncode != 0 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert snapshot(folder) == before and not (tmp_path / "runs").exists()  # nothing touched, nothing made
    return errors[0]


def test_another_algorithms_checkpoint_is_refused(stopped_ppo, tmp_path):
    error = refusal("td3_continuous_action", stopped_ppo, "--env-id", "Pendulum-v1", tmp_path=tmp_path)
    assert error.startswith(f"error: --resume: {stopped_ppo} holds no checkpoint of this script to go on from"), error
    assert "it is ppo_continuous_action.py's" in error


def test_a_changed_flag_is_refused_naming_it(stopped_ppo, tmp_path):
    flags = [*PPO, "--learning-rate", 0.001]
    error = refusal("ppo_continuous_action", stopped_ppo, *flags, tmp_path=tmp_path)
    assert error.startswith("error: --learning-rate: the run resumed has 0.0003, not 0.001"), error


def test_a_truncated_checkpoint_is_refused(stopped_ppo, tmp_path):
    folder = tmp_path / "truncated"
    shutil.copytree(stopped_ppo, folder)
    data = (folder / "checkpoint.pt").read_bytes()
    (folder / "checkpoint.pt").write_bytes(data[: len(data) // 2])
    error = refusal("ppo_continuous_action", folder, *PPO, tmp_path=tmp_path)
    assert error.startswith(f"error: --resume: {folder} holds no checkpoint of this script to go on from"), error


def test_a_checkpoint_of_an_earlier_format_is_refused(stopped_ppo, tmp_path):
    """Formats 1 and 2 kept numpy's arrays as tensors, or the logged values among the loop's: read as today's, they
    would put back what the loop no longer holds. An earlier format is refused in one line that names both."""
    folder = tmp_path / "earlier"
    shutil.copytree(stopped_ppo, folder)
    module = load_script("ppo_continuous_action")
    with torch.serialization.safe_globals(module.NUMPY):
        saved = torch.load(folder / "checkpoint.pt", weights_only=True)
    assert saved.pop("version") == module.CHECKPOINT_VERSION == 3
    torch.save(saved, folder / "checkpoint.pt")
    error = refusal("ppo_continuous_action", folder, *PPO, tmp_path=tmp_path)
    assert error.endswith("(ValueError: it is of format 1, written before this file's (3))"), error


def test_a_folder_without_a_checkpoint_is_refused(tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    error = refusal("ppo_continuous_action", folder, *PPO, tmp_path=tmp_path)
    assert error.startswith(f"error: --resume: {folder} holds no checkpoint") and "No such file" in error, error


def test_a_budget_below_the_checkpoint_is_refused(stopped_ppo, tmp_path):
    """A run resumed with fewer steps than its checkpoint has done would end at once and lose the checkpoint."""
    step = torch.load(pathlib.Path(stopped_ppo) / "checkpoint.pt", weights_only=False)["log"]["step"]
    error = refusal("ppo_continuous_action", stopped_ppo, *PPO[:-2], "--total-timesteps", step - 1, tmp_path=tmp_path)
    assert error == f"error: --total-timesteps: the run resumed is at step {step}, past {step - 1}", error


def test_filming_training_cannot_come_or_go(stopped_ppo, tmp_path):
    """--capture-video (without --eval-episodes) wraps env 0 in a RecordVideo, whose snapshot is one more layer."""
    error = refusal("ppo_continuous_action", stopped_ppo, *PPO, "--capture-video", tmp_path=tmp_path)
    assert error.startswith("error: --capture-video: the run resumed did not film its training, a resume must do"), error
    module = load_script("ppo_continuous_action")  # filmed evaluations leave training as it was
    args = module.Args(env_id="Pendulum-v1", num_envs=2, num_steps=64, num_minibatches=4, update_epochs=2, cuda=False)
    args.resume, args.capture_video, args.eval_episodes = stopped_ppo, True, 2
    module.check_args(args)
    module.load_checkpoint(args)  # no exit


def test_a_folder_without_its_metrics_is_refused(stopped_ppo, tmp_path):
    folder = tmp_path / "no-metrics"
    shutil.copytree(stopped_ppo, folder)
    (folder / "metrics.csv").unlink()
    error = refusal("ppo_continuous_action", folder, *PPO, tmp_path=tmp_path)
    assert error.startswith(f"error: --resume: {folder}: its metrics.csv cannot be cut back to the checkpoint"), error


def test_the_logged_values_come_back_as_numbers():
    """The values a row logs are kept in the checkpoint as tensors, read back on the CPU: they come back as their means
    (numbers), which mix with the device's new tensors in the next row, where a CPU tensor beside a GPU's would fail
    (SAC's and TD3's actor values are logged every --policy-frequency steps only)."""
    module = load_script("sac_continuous_action")
    log = dict(step=0, episodes=[], resumes=0, time=[0, 0.0], wall_s=0.0, warmup_s=0.0)
    logged = dict(alpha=torch.tensor([0.5, 1.5]), qf_loss=torch.tensor(2.0), epsilon=0.1)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)}
    try:
        run = module.Run(module.Args(), dict(log=log, logged=logged))
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    assert run.logged == dict(alpha=1.0, qf_loss=2.0, epsilon=0.1)
    assert all(type(value) is float for value in run.logged.values())


def test_the_budget_and_the_outputs_may_change(stopped_ppo):
    """--total-timesteps (to extend the run) and the logging and output flags are the resumed run's own."""
    module = load_script("ppo_continuous_action")
    args = module.Args(env_id="Pendulum-v1", num_envs=2, num_steps=64, num_minibatches=4, update_epochs=2, cuda=False)
    args.total_timesteps, args.resume, args.exp_name, args.output_dir, args.measure_burnin = 5120, stopped_ppo, "x", "y", 3
    module.check_args(args)
    module.load_checkpoint(args)  # no exit: these may change


def test_a_checkpoint_is_written_whole(tmp_path, monkeypatch):
    """Written beside, then renamed: a kill in the middle of writing the next one leaves the last one as it was."""
    module = load_script("ppo_continuous_action")
    log = type("Log", (), dict(args=module.Args(cuda=False), run_dir=str(tmp_path)))()
    module.Run.save(log, dict(weights=torch.arange(4.0)), "checkpoint.pt")
    save = torch.save

    def killed_midway(obj, path):  # part of the file, then the process dies
        save(obj, path)
        pathlib.Path(path).write_bytes(pathlib.Path(path).read_bytes()[:100])
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", killed_midway)
    with pytest.raises(KeyboardInterrupt):
        module.Run.save(log, dict(weights=torch.zeros(4)), "checkpoint.pt")
    saved = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert torch.equal(saved["weights"], torch.arange(4.0))


def test_the_device_is_synchronized_before_saving(tmp_path, monkeypatch):
    """On CUDA, model.pt and checkpoint.pt are written after the device's queue: a captured graph's warm-up calls run
    on a side stream, and a stop during them would otherwise save weights that Adam's kernels are still writing. The
    order is checked with CUDA's two calls replaced (no GPU here)."""
    module = load_script("ppo_continuous_action_torchcompile")
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: calls.append("synchronize"))
    save = torch.save
    monkeypatch.setattr(torch, "save", lambda *a, **k: (calls.append("save"), save(*a, **k)))
    log = type("Log", (), dict(args=module.Args(cuda=True), run_dir=str(tmp_path)))()
    module.Run.save(log, dict(weights=torch.ones(2)), "model.pt")
    assert calls == ["synchronize", "save"]
    calls.clear()
    log.args.cuda = False
    module.Run.save(log, dict(weights=torch.ones(2)), "model.pt")
    assert calls == ["save"]  # no CUDA: nothing to wait for


def test_a_full_buffer_is_written_without_a_copy():
    """tools/checkpoint_cost.py on SAC's default 1M-row buffer: 169 MB each, and the peak memory of the writes grows by
    far less than one copy of it."""
    root = pathlib.Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, root / "tools" / "checkpoint_cost.py"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("sac_")]
    assert len(lines) == 2, proc.stdout
    for line in lines:
        size = float(line.split(": ")[1].split(" MB")[0])
        grew = float(line.split("writes +")[1].split(" MB")[0])
        assert 160 < size < 180 and grew < 20, line
