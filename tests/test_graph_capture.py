"""CUDA-graph captures safe from the garbage collector. Since torch 2.9 a capture collects nothing first, and a
collection that frees an older graph while another is captured invalidates the capture (tensordict #1804: a
CudaGraphModule is freed only by the collector). Each fast file's `graphed` collects, then freezes the collector, for
its wrapper's warm-up and capture calls, and leaves it working for the replays and after.

On a CPU, CudaGraphModule passes every call through: these tests show the collector's state around the calls (here and,
for every graph of every fast file's real loop, on the stand-in device: tests/stand_in_device_scripts.py). That a
capture then succeeds beside an older graph left to the collector only a GPU shows: the test marked gpu below."""

import gc
import weakref

import pytest
import torch
from helpers.scripts import SCRIPTS, load_script

FAST = sorted(path.stem for path in SCRIPTS.glob("*_torchcompile.py"))


class Cycle:
    """Garbage only the collector frees: an object that refers to itself."""

    def __init__(self):
        self.me = self


def cyclic_garbage():
    """A weak reference to a new object in a reference cycle, no longer reachable."""
    return weakref.ref(Cycle())


@pytest.mark.parametrize("compile", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("script", FAST)
def test_graphed_collects_then_freezes_the_collector_for_warm_up_and_capture(script, compile):
    module = load_script(script)
    seen = []

    def fn(x):
        seen.append(dict(frozen=gc.get_freeze_count() > 0, collected=garbage() is None, enabled=gc.isenabled()))
        return x + 1

    with pytest.warns(UserWarning, match="pass through"):  # no CUDA here: CudaGraphModule says so once
        wrapped = module.graphed(fn, compile)
    warmup = 3 if compile else 2  # a compiled function's extra eager call, then the capture
    for _ in range(warmup + 3):
        garbage = cyclic_garbage()
        assert torch.equal(wrapped(torch.zeros(2)), torch.ones(2))
        assert gc.get_freeze_count() == 0, "the collector is left frozen after a call"
    assert [s["frozen"] for s in seen] == [True] * warmup + [False] * 3, seen
    assert all(s["collected"] for s in seen[:warmup]), seen  # collected before each warm-up and capture call
    assert all(s["enabled"] for s in seen), seen  # automatic collection stays on, for what the calls make


@pytest.mark.parametrize("script", FAST)
def test_a_failing_warm_up_call_leaves_the_collector_as_it_was(script):
    module = load_script(script)

    def fails(x):
        raise ValueError("in the warm-up")

    with pytest.warns(UserWarning, match="pass through"):
        wrapped = module.graphed(fails, False)
    with pytest.raises(ValueError, match="in the warm-up"):
        wrapped(torch.zeros(2))
    assert gc.get_freeze_count() == 0


def test_every_graph_of_the_fast_files_is_made_by_graphed():
    """No CudaGraphModule is made elsewhere: outside `graphed`, the fast files name it only in text and imports."""
    for script in FAST:
        module = load_script(script)
        source = open(module.__file__).read()
        assert source.count("CudaGraphModule(") == 1, script  # graphed's
        assert "graphed(" in source.split("def main(")[0].split("def graphed(")[1], script  # the builder uses it


@pytest.mark.gpu
def test_a_capture_beside_an_older_graph_left_to_the_collector_succeeds():
    """An older captured CudaGraphModule, dropped and left to the collector (its reference cycle), and the collector
    made to run at almost every allocation: graphed's warm-up and capture still succeed, and the replays compute."""
    module = load_script("dqn_torchcompile")
    x = torch.arange(8.0, device="cuda")
    older = module.CudaGraphModule(lambda t: t * 2, warmup=2)
    for _ in range(3):
        older(x)
    del older  # freed only by the collector
    thresholds = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    try:
        newer = module.graphed(lambda t: t + 1, False)
        outs = [newer(x) for _ in range(4)]  # warm-up, capture, two replays
        torch.cuda.synchronize()
    finally:
        gc.set_threshold(*thresholds)
    assert all(torch.equal(out, x + 1) for out in outs)
