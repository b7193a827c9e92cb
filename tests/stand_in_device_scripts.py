"""Every fast file's update, policy, GAE, target and replay functions on the stand-in device (a device that is not
the CPU, tests/helpers/fake_device.py), fed what the loop feeds them (numpy from the env, copied in with
`torch.from_numpy(...).to(device, non_blocking=True)`): no op mixes devices, what the agent keeps (parameters,
optimizer state, replay memory) and what the functions return stays on the device, and nothing reads the device from
the host inside an update. Run in a process of its own by tests/test_stand_in_device.py. Eager code only: torch.compile
skips frames under the stand-in device's dispatch mode, and CUDA graphs need CUDA."""

import types

import numpy as np
import pytest
import torch
from helpers.fake_device import FakeCuda, is_fake
from helpers.gpu import sync_problems
from helpers.in_process import count_policy_calls, prepare
from helpers.scripts import load_script

OBS_DIM, ACTION_DIM = 3, 1
RNG = np.random.default_rng(0)


def numpy_rows(n, dim):
    return RNG.standard_normal((n, dim)).astype(np.float32)


def to_device(array, fake):  # as the loop copies the env's numpy in
    return torch.from_numpy(array).to(fake.device, non_blocking=True)


def assert_on_device(parts, outputs):
    """Every parameter, optimizer state tensor and output tensor lives on the stand-in device (parts: the learned parts
    by name, as a builder keeps them for checkpoints)."""
    modules = [v for v in parts.values() if isinstance(v, torch.nn.Module)]
    optimizers = [v for v in parts.values() if isinstance(v, torch.optim.Optimizer)]
    assert modules and optimizers
    for module in modules:
        for name, p in module.named_parameters():
            assert is_fake(p), name
    for optimizer in optimizers:
        for state in optimizer.state.values():
            for name, value in state.items():
                # Adam's step counter lives on the host unless capturable or fused, as on CUDA
                assert is_fake(value) or (name == "step" and value.dim() == 0), name
    for out in outputs:
        for name, value in out.items():
            assert is_fake(value), name


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_sac_and_td3_on_the_stand_in_device(algo):
    module = load_script(f"{algo}_continuous_action_torchcompile")
    low, high = -np.ones(ACTION_DIM, np.float32), np.ones(ACTION_DIM, np.float32)
    with FakeCuda() as fake:
        make = module.make_sac if algo == "sac" else module.make_td3
        agent = make(module.Args(), OBS_DIM, ACTION_DIM, low, high, fake.device)
        rb = module.ReplayBuffer(100, OBS_DIM, ACTION_DIM, fake.device)
        for _ in range(40):  # 2 envs a step, wrapping around the 100 rows
            rb.add(numpy_rows(2, OBS_DIM), numpy_rows(2, OBS_DIM), numpy_rows(2, ACTION_DIM), RNG.random(2), np.zeros(2))
        fake.reset_reads()
        outputs = []
        for _ in range(3):
            batch = rb.sample(16)
            outputs += [agent.update_critic(batch), agent.update_actor(batch)]
            if algo == "sac":
                agent.update_target()
        action = agent.policy(to_device(numpy_rows(2, OBS_DIM), fake))
        assert fake.host_reads == [], fake.describe_reads()
        assert is_fake(rb.storage) and is_fake(action)
        assert_on_device(agent.learned, outputs)


def test_dqn_on_the_stand_in_device():
    module = load_script("dqn_torchcompile")
    with FakeCuda() as fake:
        agent = module.make_dqn(module.Args(batch_size=16, buffer_size=100), 4, 2, fake.device)
        for _ in range(40):
            agent.rb.add(numpy_rows(2, 4), numpy_rows(2, 4), RNG.integers(0, 2, 2), RNG.random(2), np.zeros(2))
        fake.reset_reads()
        outputs = [agent.update() for _ in range(3)]
        agent.update_target()
        greedy = agent.policy(to_device(numpy_rows(2, 4), fake))
        assert fake.host_reads == [], fake.describe_reads()
        assert is_fake(agent.rb.storage) and is_fake(agent.rb.count) and is_fake(greedy)
        assert_on_device(agent.learned, outputs)
        greedy.cpu()  # the action the env needs: the one read per policy call
        assert len(fake.host_reads) == 1


def test_ppo_continuous_on_the_stand_in_device():
    module = load_script("ppo_continuous_action_torchcompile")
    steps, envs = 8, 2
    with FakeCuda() as fake:
        agent = module.Agent(OBS_DIM, ACTION_DIM).to(fake.device)
        ppo = module.make_ppo(module.Args(num_envs=envs, num_steps=steps), agent, fake.device)
        action = ppo.policy(to_device(numpy_rows(envs, OBS_DIM), fake))
        storage = dict(
            obs=to_device(RNG.standard_normal((steps, envs, OBS_DIM)).astype(np.float32), fake),
            actions=to_device(RNG.standard_normal((steps, envs, ACTION_DIM)).astype(np.float32), fake),
            rewards=to_device(RNG.standard_normal((steps, envs)).astype(np.float32), fake),
            terminations=to_device(np.zeros((steps, envs), np.float32), fake),
            dones=to_device(np.zeros((steps, envs), np.float32), fake),
            valids=to_device(np.ones((steps, envs), np.float32), fake),
        )
        fake.reset_reads()
        rollout = ppo.gae(to_device(numpy_rows(envs, OBS_DIM), fake), **storage)
        batch = dict(obs=storage["obs"].view(-1, OBS_DIM), actions=storage["actions"].view(-1, ACTION_DIM))
        batch.update(rollout, valids=storage["valids"].view(-1))
        for key in ("logprobs", "values", "advantages", "returns"):
            batch[key] = batch[key].reshape(-1)
        outputs = [ppo.update(**batch, idx=idx) for idx in torch.randperm(steps * envs, device=fake.device).split(4)]
        assert fake.host_reads == [], fake.describe_reads()
        assert is_fake(action)
        assert_on_device(dict(agent=agent, optimizer=ppo.optimizer), [rollout, *outputs])


def test_ppo_atari_on_the_stand_in_device():
    module = load_script("ppo_atari_torchcompile")
    steps, envs = 4, 2
    with FakeCuda() as fake:
        agent = module.Agent(4).to(fake.device)
        ppo = module.make_ppo(module.Args(num_envs=envs, num_steps=steps), agent, fake.device)
        frames = RNG.integers(0, 256, (steps + 1, envs, 4, 84, 84), dtype=np.uint8)
        policy_out = ppo.policy(to_device(frames[0], fake))
        rollout = dict(
            rewards=to_device(RNG.standard_normal((steps, envs)).astype(np.float32), fake),
            values=to_device(RNG.standard_normal((steps, envs)).astype(np.float32), fake),
            terms=to_device(np.zeros((steps, envs), np.float32), fake),
            dones=to_device(np.zeros((steps, envs), np.float32), fake),
            valid=to_device(np.ones((steps, envs), np.float32), fake),
        )
        fake.reset_reads()
        advantages, returns = ppo.gae(to_device(frames[-1], fake), **rollout)
        obs = to_device(frames[:steps].reshape(steps * envs, 4, 84, 84), fake)
        batch = dict(obs=obs, actions=to_device(RNG.integers(0, 4, steps * envs), fake))
        batch.update(logprobs=torch.zeros(steps * envs, device=fake.device), values=rollout["values"].reshape(-1))
        batch.update(advantages=advantages.reshape(-1), returns=returns.reshape(-1), valid=rollout["valid"].reshape(-1))
        outputs = [ppo.update(**batch, idx=idx) for idx in torch.randperm(steps * envs, device=fake.device).split(4)]
        assert fake.host_reads == [], fake.describe_reads()
        assert all(is_fake(t) for t in policy_out) and is_fake(advantages) and is_fake(returns)
        assert_on_device(dict(agent=agent, optimizer=ppo.optimizer), outputs)


# ---------------------------------------------------------------- the real loop on the stand-in device
LOOPS = {  # a hundred or so updates past the start of learning, as small as the loop allows (each op of the stand-in
    # device runs through Python)
    "sac_continuous_action_torchcompile": ["--env-id", "Pendulum-v1", "--learning-starts", 100, "--total-timesteps", 200],
    "td3_continuous_action_torchcompile": ["--env-id", "Pendulum-v1", "--learning-starts", 100, "--total-timesteps", 200],
    "dqn_torchcompile": ["--learning-starts", 100, "--train-frequency", 2, "--total-timesteps", 400, "--batch-size", 32],
    "ppo_continuous_action_torchcompile": [
        "--env-id",
        "Pendulum-v1",
        "--num-envs",
        2,
        "--num-steps",
        64,
        "--num-minibatches",
        4,
        "--update-epochs",
        2,
        "--total-timesteps",
        384,
    ],
    "ppo_atari_torchcompile": ["--num-envs", 2, "--num-steps", 32, "--num-minibatches", 2, "--total-timesteps", 192],
}


def torch_with_a_stand_in_cuda(fake):
    """The torch module as one script sees it: `torch.device("cuda")` is the stand-in device, and `torch.cuda` says
    it is there. Only that script's global name `torch` is replaced; torch itself is untouched. What it leaves out of
    reach: the branches that test `device.type == "cuda"` (capturable Adam under --cudagraphs, pinned staging buffers),
    since the stand-in's type is "fakecuda"; CudaGraphModule, which looks for real CUDA."""
    cuda = types.SimpleNamespace(
        is_available=lambda: True,
        get_device_name=lambda *a: "stand-in device (fakecuda)",
        device_count=lambda: 1,
        set_device=lambda device: None,
    )

    class Torch(types.ModuleType):
        def __getattr__(self, name):
            return getattr(torch, name)

    proxy = Torch("torch")
    proxy.cuda = cuda
    proxy.device = lambda kind, *index: torch.device(fake.device.type if kind == "cuda" else kind, *index)
    return proxy


@pytest.mark.parametrize("script", list(LOOPS))
def test_the_loop_reads_the_device_only_for_the_action_and_the_logs(script, tmp_path, monkeypatch):
    """Each fast file's real main() loop, its envs included, on the stand-in device: the host reads the device at most
    once per policy call (the action the env needs) and once per metrics row (the logged values), and nowhere else.
    This is the sync budget the GPU tests check with torch.cuda.set_sync_debug_mode, here on every CI run."""
    module, args = prepare(script, *LOOPS[script], tmp_path=tmp_path, monkeypatch=monkeypatch)
    # what building reads once (Adam checks a tensor lr's value) is not the loop's
    calls = count_policy_calls(module, monkeypatch, lambda: 1, on_build=lambda: fake.reset_reads())
    calls["rows"], row = 0, module.Run.row

    def counted_row(*a, **kw):
        calls["rows"] += 1
        return row(*a, **kw)

    monkeypatch.setattr(module.Run, "row", counted_row)
    with FakeCuda() as fake:
        monkeypatch.setattr(module, "torch", torch_with_a_stand_in_cuda(fake))
        state = module.main(args)
    assert state["status"] == "finished" and state["device"].type == "fakecuda"
    assert calls["policy"] > 0 and calls["rows"] > 0
    reads = [(r.filename, r.lineno, r.line) for r in fake.host_reads]
    assert reads, "the loop must read at least the actions"
    assert not sync_problems(reads, module.__file__, calls["policy"], calls["rows"]), fake.describe_reads()


# ---------------------------------------------------------------- graphs warmed up and captured with the collector frozen
GRAPHS = {"sac": 4, "td3": 3, "dqn": 2, "ppo": 3}  # the functions each builder hands to graphed


@pytest.mark.parametrize("script", list(LOOPS))
def test_each_graph_warms_up_and_is_captured_with_the_collector_frozen(script, tmp_path, monkeypatch):
    """Each fast file's real loop with --cudagraphs on the stand-in device (the flag kept: `torch.cuda` says CUDA is
    there): every CudaGraphModule its builder makes finds the collector frozen on its warm-up and capture calls (the
    first `warmup`), working on the calls after, and leaves it working when the run ends. (CudaGraphModule itself sees
    no CUDA and passes each call through: the capture is a GPU's, tests/test_graph_capture.py.)"""
    import gc

    module, args = prepare(script, *LOOPS[script], "--cudagraphs", tmp_path=tmp_path, monkeypatch=monkeypatch)
    graphs = []

    class Watched(module.CudaGraphModule):
        def __init__(self, fn, warmup):
            super().__init__(fn, warmup=warmup)
            self.frozen = []
            graphs.append(self)

        def __call__(self, *a, **kw):
            self.frozen.append(gc.get_freeze_count() > 0)
            return super().__call__(*a, **kw)

    monkeypatch.setattr(module, "CudaGraphModule", Watched)
    with FakeCuda() as fake:
        monkeypatch.setattr(module, "torch", torch_with_a_stand_in_cuda(fake))
        state = module.main(args)
    assert state["status"] == "finished" and state["args"].cudagraphs
    assert len(graphs) == GRAPHS[script.split("_")[0]], graphs
    for graph in graphs:
        warmup = graph._warmup
        assert len(graph.frozen) > warmup and graph.frozen == [True] * warmup + [False] * (len(graph.frozen) - warmup)
    assert gc.get_freeze_count() == 0
