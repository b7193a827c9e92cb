"""The stand-in device (tests/helpers/fake_device.py) itself: what it runs gives the CPU's numbers on a device that is
not the CPU, it raises where CUDA would raise on a device mix, and it counts host reads at the lines that make them."""

import copy
import io
import pathlib

import numpy as np
import pytest
import torch
from helpers.fake_device import NAME, DeviceMixError, FakeCuda, is_fake, to_cpu
from torch import nn

HERE = pathlib.Path(__file__).resolve()
SOURCE = HERE.read_text().splitlines()


def line_of(tag):
    """The number of the one line of this file that ends with the comment `# <tag>`."""
    found = [i + 1 for i, text in enumerate(SOURCE) if text.rstrip().endswith(f"# {tag}")]
    assert len(found) == 1, (tag, found)
    return found[0]


def reads_at(fake):
    """The host reads so far as (line, op), all of them asserted to be made in this file."""
    assert all(pathlib.Path(r.filename).resolve() == HERE for r in fake.host_reads), fake.describe_reads()
    return [(r.lineno, r.op) for r in fake.host_reads]


class Net(nn.Module):
    """A Conv2d and a Linear, the two layer kinds of the scripts."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, stride=2)
        self.fc = nn.Linear(4 * 3 * 3, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def train(device, adam_kwargs, steps=3):
    """A few Adam steps from seed 0; returns the net and the optimizer."""
    torch.manual_seed(0)
    net = Net().to(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2, **adam_kwargs)
    for _ in range(steps):
        x = torch.randn(5, 2, 8, 8, device=device)  # the CPU generator draws these in both runs
        target = torch.randint(0, 3, (5,), device=device)
        loss = nn.functional.cross_entropy(net(x), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net, opt


ADAM_FORMS = {
    "default": {},
    "foreach": {"foreach": True},
    "capturable": {"capturable": True},
    "foreach-capturable": {"foreach": True, "capturable": True},
    "fused": {"fused": True},
}


@pytest.mark.parametrize("form", ADAM_FORMS)
def test_training_stays_on_the_device_and_matches_the_cpu(form):
    kwargs = ADAM_FORMS[form]
    with FakeCuda() as fake:
        net, opt = train(fake.device, kwargs)
    assert fake.host_reads == [], fake.describe_reads()  # forward, backward and Adam never read the device
    # the CPU reference: the same flags, but torch's capturable Adam refuses CPU parameters (it is for CUDA graphs)
    cpu_kwargs = {k: v for k, v in kwargs.items() if k != "capturable"}
    cpu_net, cpu_opt = train("cpu", cpu_kwargs)
    for (name, p), cpu_p in zip(net.named_parameters(), cpu_net.parameters()):
        assert is_fake(p) and isinstance(p, nn.Parameter) and p.device.type == NAME, name
        assert is_fake(p.grad), name
        torch.testing.assert_close(to_cpu(p), cpu_p.detach(), rtol=1e-6, atol=1e-6, msg=name)
        torch.testing.assert_close(to_cpu(p.grad), cpu_p.grad, rtol=1e-6, atol=1e-6, msg=name)
        state, cpu_state = opt.state[p], cpu_opt.state[cpu_p]
        for key in ("exp_avg", "exp_avg_sq"):
            assert is_fake(state[key]), (name, key)
            torch.testing.assert_close(to_cpu(state[key]), cpu_state[key], rtol=1e-6, atol=1e-6)
        # as on CUDA: the step count lives on the device for capturable and fused Adam, on the host otherwise
        assert is_fake(state["step"]) == ("capturable" in kwargs or "fused" in kwargs), (name, state["step"])
        assert float(to_cpu(state["step"])) == 3.0
    if not kwargs:  # bit for bit: the same kernels ran on the same numbers
        assert all(torch.equal(to_cpu(p), c) for p, c in zip(net.parameters(), cpu_net.parameters()))


def test_a_device_mix_raises_naming_the_line_and_a_cpu_scalar_does_not():
    with FakeCuda() as fake:
        x = torch.ones(3, device=fake.device)
        with pytest.raises(DeviceMixError, match=rf"aten\.add\.Tensor .*{HERE.name}:{line_of('mix: add')}"):
            x + torch.zeros(3)  # mix: add
        cpu_layer = nn.Linear(3, 2)  # left on the CPU by mistake
        with pytest.raises(DeviceMixError, match=rf"{HERE.name}:{line_of('mix: linear')}: cpu_layer\(x\)"):
            cpu_layer(x)  # mix: linear
        with pytest.raises(DeviceMixError, match="argument 'mat2'"):
            x[None] @ torch.ones(3, 2)
        # allowed, as on CUDA: 0-dim CPU tensors, CPU index tensors, copies either way
        scaled = x * torch.tensor(2.0) + torch.tensor(1.0)
        picked = (x * torch.arange(3.0, device=fake.device))[torch.tensor([2, 0])]
        back = torch.zeros(3, device=fake.device).copy_(torch.full((3,), 5.0))
    assert is_fake(scaled) and torch.equal(to_cpu(scaled), torch.full((3,), 3.0))
    assert is_fake(picked) and torch.equal(to_cpu(picked), torch.tensor([2.0, 0.0]))
    assert is_fake(back) and torch.equal(to_cpu(back), torch.full((3,), 5.0))


def test_a_device_mix_in_backward_is_raised_on_the_calling_thread():
    """Autograd runs the device's backward on its own thread; the error comes back at the next op, not as an abort."""

    class LeaksCpu(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1

        @staticmethod
        def backward(ctx, grad):
            return grad + torch.ones(3)  # mix: in backward

    with FakeCuda() as fake:
        x = torch.ones(3, device=fake.device, requires_grad=True)
        LeaksCpu.apply(x).sum().backward()
        with pytest.raises(DeviceMixError, match=rf"in backward: .*{HERE.name}:{line_of('mix: in backward')}"):
            x.grad.add_(1)


def test_host_reads_are_counted_at_their_lines():
    with FakeCuda() as fake:
        x = torch.arange(4.0, device=fake.device)
        y = (x * 2 + 1)[torch.tensor([1, 3], device=fake.device)]  # pure device work: no read
        y = torch.where(y > 3, y, torch.zeros_like(y)).sum(0, keepdim=True)
        assert fake.host_reads == [], fake.describe_reads()
        value = y.item()  # read: item
        on_host = y.cpu()  # read: cpu
        listed = y.tolist()  # read: tolist
        truth = bool(y > 0)  # read: bool
        also = float(y.to("cpu"))  # read: to cpu
        masked = x[x > 1]  # read: mask
        found = reads_at(fake)
        fake.reset_reads()
        z = y * 3  # no read after reset
    assert found == [
        (line_of("read: item"), "item"),
        (line_of("read: cpu"), "to_cpu"),
        (line_of("read: tolist"), "tolist"),
        (line_of("read: bool"), "item"),
        (line_of("read: to cpu"), "to_cpu"),  # float() of a CPU tensor is no further read
        (line_of("read: mask"), "sync:index.Tensor with a boolean mask"),
    ]
    assert fake.host_reads == []
    assert (value, listed, truth, also) == (7.0, [7.0], True, 7.0)
    assert type(on_host) is torch.Tensor and on_host.device.type == "cpu"
    assert torch.equal(to_cpu(masked), torch.tensor([2.0, 3.0])) and torch.equal(to_cpu(z), torch.tensor([21.0]))
    with FakeCuda() as fake, pytest.raises(TypeError, match="Use Tensor.cpu"):
        torch.ones(2, device=fake.device).numpy()  # as CUDA says


def test_numpy_goes_to_the_device_without_a_host_read():
    obs = np.arange(12, dtype=np.float32).reshape(3, 4)
    with FakeCuda() as fake:
        x = torch.from_numpy(obs).to(fake.device, non_blocking=True)
        obs[0, 0] = 100.0  # the device copy is a copy
        y = torch.as_tensor(obs, device=fake.device)
    assert fake.host_reads == [], fake.describe_reads()
    assert is_fake(x) and x.device == torch.device(NAME, 0) and x.dtype == torch.float32
    assert torch.equal(to_cpu(x), torch.arange(12.0).reshape(3, 4))
    assert is_fake(y) and to_cpu(y)[0, 0] == 100.0


def test_factory_functions_make_device_tensors():
    torch.manual_seed(1)
    cpu_normal = torch.randn(3)
    torch.manual_seed(1)
    with FakeCuda() as fake:
        dev = fake.device
        made = {
            "randn": torch.randn(3, device=dev),
            "zeros": torch.zeros(2, 3, device=dev),
            "ones": torch.ones(2, device=dev, dtype=torch.int64),
            "full": torch.full((2,), 7.0, device=dev),
            "empty": torch.empty(4, device=dev),
            "arange": torch.arange(5, device=dev),
            "randint": torch.randint(0, 10, (6,), device=dev),
            "randperm": torch.randperm(6, device=dev),
            "tensor": torch.tensor([[1.0, 2.0]], device=dev),
            "tensor of a string device": torch.tensor(3, device=NAME),
        }
        made["randn_like"] = torch.randn_like(made["zeros"])
        made["zeros_like"] = torch.zeros_like(made["full"])
    assert fake.host_reads == [], fake.describe_reads()
    for name, t in made.items():
        assert is_fake(t) and t.device.type == NAME, name
    assert torch.equal(to_cpu(made["randn"]), cpu_normal)  # the CPU generator: seeded runs agree with the CPU's
    assert torch.equal(to_cpu(made["tensor"]), torch.tensor([[1.0, 2.0]]))
    assert to_cpu(made["tensor of a string device"]).item() == 3
    assert sorted(to_cpu(made["randperm"]).tolist()) == list(range(6))
    assert made["ones"].dtype == torch.int64 and made["randn_like"].shape == (2, 3)


def test_batched_calls_foreach_deepcopy_tensordict_and_saving_on_the_device():
    from tensordict import TensorDict

    with FakeCuda() as fake:
        dev = fake.device
        torch.manual_seed(0)
        nets = [nn.Linear(3, 2).to(dev) for _ in range(2)]
        params, buffers = torch.func.stack_module_state(nets)
        base = copy.deepcopy(nets[0]).to("meta")
        x = torch.randn(5, 3, device=dev)

        def call(p, b, inputs):
            return torch.func.functional_call(base, (p, b), (inputs,))

        batched = torch.vmap(call, in_dims=(0, 0, None))(params, buffers, x)
        batched.sum().backward()
        target = copy.deepcopy(nets[0])
        with torch.no_grad():  # a target network's soft update, as in SAC and TD3
            torch._foreach_lerp_(list(target.parameters()), list(nets[1].parameters()), 0.5)
        td = TensorDict({"obs": torch.zeros(4, 3)}, batch_size=[4], device=dev)
        rows = td[torch.tensor([0, 2], device=dev)]
        saved = io.BytesIO()
        torch.save(nets[0].state_dict(), saved)
        save_reads = len(fake.host_reads)
    assert is_fake(batched) and batched.shape == (2, 5, 2) and is_fake(params["weight"].grad)
    for i, net in enumerate(nets):
        torch.testing.assert_close(to_cpu(batched[i]), to_cpu(x) @ to_cpu(net.weight).T + to_cpu(net.bias))
    half = (to_cpu(nets[0].weight) + to_cpu(nets[1].weight)) / 2
    assert is_fake(target.weight) and torch.allclose(to_cpu(target.weight), half)
    assert not torch.equal(to_cpu(nets[0].weight), half)  # the deep copy does not share the original's values
    assert td.device == torch.device(NAME, 0) and is_fake(td["obs"]) and is_fake(rows["obs"])
    assert save_reads == 2  # saving reads each of the two tensors to the host, as on CUDA
    saved.seek(0)
    loaded = torch.load(saved, map_location="cpu")  # weights_only, as a script's eval loads model.pt
    assert type(loaded["weight"]) is torch.Tensor and torch.equal(loaded["weight"], to_cpu(nets[0].weight))


def test_registration_is_idempotent_across_two_imports_of_the_helper():
    import importlib.util

    path = HERE.parent / "helpers" / "fake_device.py"
    spec = importlib.util.spec_from_file_location("fake_device_second_copy", path)
    second = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(second)
    with FakeCuda() as first_fake:
        a = torch.ones(2, device=first_fake.device)
    with second.FakeCuda() as second_fake:
        b = a + torch.ones(2, device=second_fake.device)
        with pytest.raises(second.DeviceMixError):
            b + torch.ones(2)
    assert torch._C._get_privateuse1_backend_name() == NAME
    assert is_fake(b) and second.is_fake(a) and torch.equal(to_cpu(b), torch.full((2,), 2.0))
