"""pytest's hooks and the fixtures every test file may use. The helpers the tests import are in helpers/."""

import pytest
from helpers.gpu import selects_gpu


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    if selects_gpu(config.option.markexpr):  # asked for the GPU tests where there is no GPU: say so, run nothing
        raise pytest.UsageError(f"-m {config.option.markexpr!r} selects the gpu tests, but CUDA is not available here")
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def keep_torch_threads():
    """A test that runs a script's main() in this process leaves torch's thread count as it found it (the fast DQN
    sets one thread on a CPU)."""
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def inductor_eager_rng():
    """Compiled code draws its random numbers as eager code does, so that the two paths can be compared exactly."""
    import torch._inductor.config as cfg

    old, cfg.fallback_random = cfg.fallback_random, True
    yield
    cfg.fallback_random = old
