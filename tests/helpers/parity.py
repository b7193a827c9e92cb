"""Comparisons of two paths' outputs and parameters (compiled and eager, fast and CleanRL's), within float tolerance."""

import torch


def assert_all_close(a, b, what, rtol=1e-4, atol=1e-5):
    """Each tensor of a equals b's at the same place, within the tolerance; what names them in the message."""
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")


def assert_params_close(a, b, what, max_lr, steps=3):
    """Adam divides each gradient by its running RMS: where a gradient is ~0, float reordering between two kernels
    can move that element by up to lr per step in either direction. So: every element within Adam's largest
    possible drift after `steps` steps at the largest learning rate, and all but a few (< 1%) equal to float
    precision; a wrong update fails the second."""
    for x, y in zip(a, b, strict=True):
        diff = (x - y).abs()
        assert diff.max() <= 2 * steps * max_lr, f"{what}: max difference {diff.max():.2e}"
        loose = (diff > 1e-5 + 1e-4 * y.abs()).float().mean().item()
        assert loose < 0.01, f"{what}: {loose:.1%} of the elements differ"


def update_errors(a, b, before):
    """Dicts of tensors by name: for each tensor, (how far a's change from before is from b's, the size of b's change),
    both in norm."""
    assert a.keys() == b.keys() == before.keys()
    errors = {}
    with torch.no_grad():
        for name in b:
            assert a[name].shape == b[name].shape == before[name].shape, name
            change, reference = a[name] - before[name], b[name] - before[name]
            errors[name] = (change - reference).norm().item(), reference.norm().item()
    return errors


def assert_updates_close(a, b, before, what, rtol=0.02, atol=1e-6):
    """The change a made to each tensor equals b's within rtol of the size of b's change, in norm (update_errors).
    For a compiled path against eager, where assert_params_close's element-by-element count is too strict: inductor's
    kernels sum in another order, and Adam's first steps move an element by about lr whatever the size of its
    gradient, so a few per cent of a layer's elements can differ by a fraction of a step (SAC's actor.fc1.weight: 2%
    of its elements by up to 8.7e-5 after 5 steps, compiled against eager, on a CPU), while the change as a whole
    agrees to 0.4% (measured there). One step more or less is off by a large part of the change (the test of SAC and
    TD3's compiled update checks it, tensor by tensor)."""
    for name, (error, size) in update_errors(a, b, before).items():
        assert error <= rtol * size + atol, (
            f"{what}: {name}'s update is off by {error:.2e}, {error / max(size, 1e-30):.1%} of its size {size:.2e}"
        )


def assert_greedy(actions, q_values, what, atol=1e-5):
    """Each action is an arg-max of its row of Q-values: ties, or near-ties that another kernel's float rounding flips,
    may pick either action (torch.equal on two arg-maxes fails on those)."""
    chosen = q_values.gather(1, actions.long().reshape(-1, 1)).squeeze(1)
    gap = (q_values.max(1).values - chosen).max().item()
    assert gap <= atol, f"{what}: an action's Q-value is {gap:.2e} below its row's best"
