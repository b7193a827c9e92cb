"""No recompile after warm-up. Each fast file with --compile runs its real loop on a CPU, fed by its real envs, past its
burn-in (every compiled function compiled and called), then on for several updates under
torch.compiler.set_stance("fail_on_recompile"): any compilation there (a guard that fails, a shape that changes) raises
and fails the test. A planted fault, a Python float that a compiled function reads changed before every update, makes
the same run fail: the watch is on. SAC and TD3 run eager under --compile on a CPU, so here their functions are
compiled as make_sac / make_td3 compile them on CUDA. The same with --compile --cudagraphs on a GPU:
the test marked gpu below."""

import pytest
import torch
from helpers.in_process import prepare
from helpers.scripts import SCRIPTS, importable

pytestmark = pytest.mark.compile
OFF_POLICY = ["--env-id", "Pendulum-v1", "--learning-starts", 100, "--batch-size", 32, "--total-timesteps", 260]
OFF_POLICY += ["--measure-burnin", 10, "--log-interval", 50]
PPO_CONTINUOUS = ["--env-id", "Pendulum-v1", "--num-envs", 2, "--num-steps", 64, "--num-minibatches", 4]
PPO_CONTINUOUS += ["--update-epochs", 2, "--total-timesteps", 768, "--measure-burnin", 2]
PPO_ATARI = ["--num-envs", 4, "--num-steps", 16, "--num-minibatches", 2, "--update-epochs", 1, "--total-timesteps", 384]
PPO_ATARI += ["--measure-burnin", 2]
# (each run's flags, and the functions its builder returns compiled)
RUNS = {
    "dqn_torchcompile": (
        ["--learning-starts", 100, "--train-frequency", 2, "--target-network-frequency", 50, "--batch-size", 32]
        + ["--total-timesteps", 300, "--measure-burnin", 10, "--log-interval", 50],
        None,
    ),
    "ppo_continuous_action_torchcompile": (PPO_CONTINUOUS, None),
    "ppo_continuous_action_ray_torchcompile": (PPO_CONTINUOUS, None),
    "ppo_atari_torchcompile": (PPO_ATARI, None),
    "ppo_atari_multigpu_torchcompile": (PPO_ATARI, None),
    "sac_continuous_action_torchcompile": (OFF_POLICY, ("make_sac", ["update_critic", "update_actor", "policy"])),
    "td3_continuous_action_torchcompile": (OFF_POLICY, ("make_td3", ["update_critic", "update_actor", "policy"])),
}


def compile_on_a_cpu(module, builder, names, monkeypatch):
    """SAC's and TD3's builders leave --compile eager on a CPU: compile their functions here as they do on CUDA (torch
    .compile in --compile-mode, Adam's plain step, which inductor fuses)."""
    build = getattr(module, builder)

    def build_compiled(args, *a, **kw):
        agent = build(args, *a, **kw)
        for name in names:
            setattr(agent, name, module.compiled(getattr(agent, name), args.compile_mode))
        return agent

    monkeypatch.setattr(module, "adam_settings", lambda compile, cudagraphs, device: {})
    monkeypatch.setattr(module, builder, build_compiled)


def run_watched(script, tmp_path, monkeypatch, fault=None, gpu=False):
    """The script's main() with --compile --no-cuda (gpu: --compile --cudagraphs on CUDA), the stance
    "fail_on_recompile" from the end of its burn-in to the end of its loop; fault(args), if given, before every update
    under the watch. What the watch saw."""
    if "ray" in script:
        if not importable("ray"):
            pytest.skip("ray is not installed (requirements/requirements-ray.txt)")
        monkeypatch.setenv("PYTHONPATH", str(SCRIPTS))  # the runners import this file by its name
    flags, compiled_here = RUNS[script]
    device = ["--cudagraphs"] if gpu else ["--no-cuda"]
    module, args = prepare(script, *flags, "--compile", *device, tmp_path=tmp_path, monkeypatch=monkeypatch)
    if compiled_here and not gpu:
        compile_on_a_cpu(module, *compiled_here, monkeypatch)
    watch = dict(on=False, updates=0)
    count_update, finish = module.Run.count_update, module.Run.finish

    def count_and_watch(self, global_step, updates=1):  # at the end of each step (PPO: iteration), its updates counted
        if watch["on"] and updates:
            watch["updates"] += updates
            if fault:
                fault(self.args)
        count_update(self, global_step, updates)
        if not watch["on"] and self.burnin_end is not None:  # the burn-in is over: every function has compiled
            torch.compiler.set_stance("fail_on_recompile")
            watch["on"] = True

    def unwatched_finish(self, *a, **kw):  # the evaluation's calls are not the loop's
        torch.compiler.set_stance("default")
        return finish(self, *a, **kw)

    monkeypatch.setattr(module.Run, "count_update", count_and_watch)
    monkeypatch.setattr(module.Run, "finish", unwatched_finish)
    torch._dynamo.reset()  # compiled code of earlier tests in this process (the same functions) counts for nothing
    torch._dynamo.utils.counters.clear()
    try:
        watch["state"] = module.main(args)
    finally:
        torch.compiler.set_stance("default")
    watch["graphs"] = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    return watch


@pytest.mark.parametrize("script", list(RUNS))
def test_no_recompile_after_the_burn_in(script, tmp_path, monkeypatch):
    watch = run_watched(script, tmp_path, monkeypatch)
    assert watch["state"]["status"] == "finished"
    assert watch["graphs"] > 0, "nothing was compiled"
    assert watch["on"] and watch["updates"] >= 3, watch  # several updates (PPO: iterations) ran under the watch


@pytest.mark.gpu
@pytest.mark.parametrize("script", list(RUNS))
def test_no_recompile_after_the_burn_in_with_cuda_graphs(script, tmp_path, monkeypatch):
    """On a GPU, --compile --cudagraphs: the warm-up calls compile, the capture runs the compiled code once more, and
    nothing compiles after (a replay skips Dynamo's guards, so a recompile would show only in a call made uncaptured)."""
    watch = run_watched(script, tmp_path, monkeypatch, gpu=True)
    assert watch["state"]["status"] == "finished" and watch["state"]["device"].type == "cuda"
    assert watch["state"]["args"].cudagraphs and watch["graphs"] > 0
    assert watch["on"] and watch["updates"] >= 3, watch


@pytest.mark.parametrize(
    "script", ["dqn_torchcompile", "ppo_continuous_action_torchcompile", "sac_continuous_action_torchcompile"]
)
def test_a_float_changed_every_update_is_caught(script, tmp_path, monkeypatch):
    """The planted fault: the discount, a Python float every compiled update (PPO: its GAE) reads, changed before each
    update after the burn-in. Each change fails a guard: the first recompile under the watch raises."""

    def change_gamma(args):
        args.gamma *= 0.999

    with pytest.raises(Exception, match="fail_on_recompile"):
        run_watched(script, tmp_path, monkeypatch, fault=change_gamma)
