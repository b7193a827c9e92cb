"""Data-parallel PPO under torchrun (scripts/ppo_atari_multigpu_torchcompile.py), on a CPU with gloo and 2 ranks: the
run finishes and rank 0 alone writes one run folder (global steps summed over ranks, world_size 2); after every update
both ranks hold the same parameters; what the one flat all_reduce hands back is the mean of the gradients each rank
computed alone; a 1-rank torchrun run is the core file's plain run; bad sizings and backends give one line before any
work."""

import json
import os
import subprocess
import sys

import pytest
import torch
from helpers.scripts import ROOT, SCRIPTS, load_script, read_metrics, run_script

SCRIPT = "ppo_atari_multigpu_torchcompile"
CORE = "ppo_atari_torchcompile"  # the same PPO in one process
# 3 iterations of 2 ranks x 2 envs x 32 steps
FLAGS = ["--num-envs", 2, "--num-steps", 32, "--num-minibatches", 2, "--update-epochs", 1, "--total-timesteps", 384]
FLAGS += ["--measure-burnin", 1, "--no-cuda"]

PROBE = ROOT / "tests/helpers/dp_probe.py"  # torchrun runs it as a script


def torchrun(*args, nproc=2, timeout=600):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", *map(str, args)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")  # (torchrun sets OMP_NUM_THREADS=1 when it starts more than one process)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc


def probed_run(tmp_path, *flags):
    """The script with FLAGS and flags under torchrun, 2 ranks on gloo, watched by PROBE (which saves to tmp_path):
    what each rank saw, [rank 0's, rank 1's]."""
    torchrun(PROBE, SCRIPTS / f"{SCRIPT}.py", tmp_path, "--", *FLAGS, "--dist-backend", "gloo", *flags)
    return [torch.load(tmp_path / f"probe.{r}.pt") for r in (0, 1)]


def test_two_ranks_learn_as_one(tmp_path):
    out = tmp_path / "runs"
    # (on a CPU: --no-cuda, as a GPU host has one GPU for the two ranks)
    ranks = probed_run(tmp_path, "--output-dir", out, "--save-model")
    summaries = list(out.rglob("summary.json"))
    assert len(summaries) == 1 and len(list(out.iterdir())) == 1  # rank 0 alone wrote a run folder
    summary = json.loads(summaries[0].read_text())
    assert summary["status"] == "finished" and summary["world_size"] == 2
    assert summary["global_step"] == 384  # both ranks' steps
    assert (summaries[0].parent / "model.pt").is_file()
    rows = read_metrics(dict(summary, _run_dir=summaries[0].parent))
    assert len(rows) == 3 and [int(r["global_step"]) for r in rows][-1] == summary["global_step"]
    updates = len(ranks[0]["params"])
    assert updates == len(ranks[1]["params"]) == len(ranks[0]["reduced"]) > 0
    for a, b in zip(ranks[0]["params"], ranks[1]["params"]):  # after every update: the same parameters
        assert torch.equal(a, b)
    reduced = zip(ranks[0]["reduced"], ranks[1]["reduced"], ranks[0]["raw"], ranks[1]["raw"])
    for (in0, out0), (in1, out1), raw0, raw1 in reduced:
        assert not torch.equal(raw0, raw1)  # each rank computed its own gradients (its own envs and minibatches)
        # what the ranks hold after the all_reduce: the mean of the gradients each computed alone on its own data
        torch.testing.assert_close(out0[:-1], (raw0 + raw1) / 2, rtol=1e-5, atol=1e-7)
        assert torch.equal(out0, out1)


def test_one_rank_under_torchrun_is_the_plain_run(tmp_path):
    torchrun(SCRIPTS / f"{SCRIPT}.py", *FLAGS, "--output-dir", tmp_path / "torchrun", "--save-model", nproc=1)
    _, plain = run_script(CORE, *FLAGS, "--save-model", tmp_path=tmp_path)
    dist_summary = json.loads(next((tmp_path / "torchrun").rglob("summary.json")).read_text())
    assert dist_summary["world_size"] == plain["world_size"] == 1 and dist_summary["global_step"] == plain["global_step"]
    models = [
        torch.load(path, weights_only=True)["model"]
        for path in (next((tmp_path / "torchrun").rglob("model.pt")), next((tmp_path / "runs").rglob("model.pt")))
    ]
    for k in models[0]:
        assert torch.equal(models[0][k], models[1][k]), k


def test_bad_sizings_and_backends_fail_with_one_line(tmp_path, monkeypatch, capsys):
    module = load_script(SCRIPT)
    monkeypatch.setenv("WORLD_SIZE", "2")  # as torchrun would set it (no process group is made before these checks)
    monkeypatch.setenv("RANK", "0")
    cases = [
        (dict(dist_backend="nccl", cuda=False), "error: --dist-backend: nccl is not available here"),
        (dict(eval_model="model.pt"), "error: --eval-model: an evaluation runs in one process, not under torchrun"),
        (
            dict(num_envs=1, num_steps=64, total_timesteps=64),
            "error: --total-timesteps: must be at least --num-envs x --num-steps x ranks (128), got 64",
        ),
    ]
    for overrides, error in cases:
        with pytest.raises(SystemExit) as exit:
            module.main(module.Args(output_dir=str(tmp_path / "runs"), **overrides))
        assert str(exit.value.code).startswith(error) and "\n" not in str(exit.value.code), exit.value.code
    assert capsys.readouterr().err == "" and not (tmp_path / "runs").exists()


def test_more_ranks_than_gpus_and_gloo_with_cudagraphs_fail_with_one_line(tmp_path, monkeypatch, capsys):
    """What a CPU can show of a GPU machine's torchrun (CUDA faked for check_args alone): NCCL needs a GPU per rank on
    the machine, so 2 ranks on 1 GPU are refused, while gloo's ranks may share it; gloo's all_reduce goes through the
    host and cannot be captured, so gloo with --cudagraphs is refused."""
    module = load_script(SCRIPT)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setattr(module.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(module.torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(module.dist, "is_backend_available", lambda backend: True)
    cases = [
        (dict(dist_backend="nccl"), "error: --dist-backend nccl: needs a GPU per rank, 2 ranks here for 1 GPUs"),
        (dict(), "error: --dist-backend nccl: needs a GPU per rank"),  # nccl is the default with CUDA
        (dict(dist_backend="gloo", cudagraphs=True), "error: --cudagraphs: not with --dist-backend gloo"),
    ]
    for overrides, error in cases:
        with pytest.raises(SystemExit) as exit:
            module.check_args(module.Args(output_dir=str(tmp_path / "runs"), **overrides))
        assert str(exit.value.code).startswith(error) and "\n" not in str(exit.value.code), exit.value.code
    args = module.Args(output_dir=str(tmp_path / "runs"), dist_backend="gloo")
    module.check_args(args)  # 2 gloo ranks on 1 GPU: accepted
    assert args.dist_backend == "gloo" and args.cuda
    assert capsys.readouterr().err == ""


def test_target_kl_stops_every_rank_at_the_same_epoch(tmp_path):
    """approx_kl travels in the flat all_reduce: every rank sees the ranks' mean and --target-kl stops them all after the
    same epoch (different epochs would leave one rank waiting in an all_reduce the others never make)."""
    ranks = probed_run(tmp_path, "--update-epochs", 2, "--target-kl", "1e-9", "--output-dir", tmp_path / "runs")
    assert len(ranks[0]["params"]) == len(ranks[1]["params"]) == 3 * 2  # 3 iterations x 2 minibatches: 1 of the 2 epochs
    kls = [[out[-1] for _, out in rank["reduced"]] for rank in ranks]
    assert kls[0] == kls[1]  # the same on both
    assert all(kls[0][i] > 1e-9 for i in (1, 3, 5))  # above the target at each epoch's end


def test_a_rank_s_signal_asks_and_the_ranks_decide_together(monkeypatch):
    """With several ranks a signal only asks: the loop's stop (which a checkpoint that is due reads) changes where the
    ranks agree, once per iteration, so that a signal that comes between the agreement and the checkpoint cannot stop
    one rank alone or save a checkpoint without every rank's random streams. During the evaluation: at once."""
    import signal

    module = load_script(SCRIPT)
    monkeypatch.setenv("WORLD_SIZE", "2")
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)}
    try:
        run = module.Run(module.Args(checkpoint_interval=10**9))
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    run.ask_to_stop(signal.SIGTERM, None)
    assert run.asked == "terminated" and run.stopping is None and not run.checkpoint_due(128)
    run.evaluating = True
    with pytest.raises(KeyboardInterrupt):
        run.ask_to_stop(signal.SIGINT, None)
    assert run.stopping == "terminated"
