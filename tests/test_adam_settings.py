"""One Adam rule in every fast file (`adam_settings`): the plain step under --compile (torch.compile makes it
capturable itself on CUDA), capturable multi-tensor under CUDA graphs without compile, fused in plain eager. And the
warning torch gives when a capturable step runs uncaptured, as CudaGraphModule's warm-up calls do on purpose, is not
shown to the user."""

import inspect
import warnings

import pytest
import torch
from helpers.scripts import SCRIPTS, load_script

FAST = sorted(p.stem for p in SCRIPTS.glob("*_torchcompile.py"))
# torch's own words (torch/optim/optimizer.py), as a capturable step run outside a capture warns
TORCH_WARNING = (
    "This instance was constructed with capturable=True or some of all the param_groups came with capturable=True, "
    "but step() is running without CUDA graph capture. If you never intend to graph-capture this instance, "
    "capturable=True can impair performance, and you should set capturable=False."
)


def test_the_adam_rule():
    """What `adam_settings` gives in each mode (one text in every fast file: tests/test_files.py)."""
    module = load_script(FAST[0])
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert module.adam_settings(True, True, cuda) == {}
    assert module.adam_settings(True, False, cpu) == {}
    assert module.adam_settings(False, True, cuda) == dict(capturable=True, foreach=True)
    assert module.adam_settings(False, True, cpu) == dict(fused=True)
    assert module.adam_settings(False, False, cuda) == dict(fused=True)


@pytest.mark.parametrize("script", FAST)
def test_the_uncaptured_capturable_warning_is_not_shown_under_cudagraphs(script):
    assert TORCH_WARNING.split(",")[0] in inspect.getsource(torch.optim.Optimizer)  # still torch's text
    module = load_script(script)
    for cudagraphs in (False, True):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module.adam_settings(False, cudagraphs, torch.device("cuda"))
            warnings.warn(TORCH_WARNING, UserWarning)
        assert len(caught) == (0 if cudagraphs else 1), [str(w.message)[:80] for w in caught]
