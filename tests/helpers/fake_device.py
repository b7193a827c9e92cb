"""A stand-in device for the tests: a device called `fakecuda` that is not the CPU, so that code written for CUDA can
be run on a CPU-only machine and still be caught mixing devices or reading the device from the host.

    from helpers.fake_device import FakeCuda, to_cpu

    with FakeCuda() as fake:                     # fake.device == torch.device("fakecuda:0")
        net = nn.Linear(3, 4).to(fake.device)
        x = torch.from_numpy(obs).to(fake.device, non_blocking=True)
        loss = net(x).square().mean()
        loss.backward()
        print(loss.item())                       # one host read, recorded with this file and line
    assert len(fake.host_reads) == 1, fake.describe_reads()
    assert net.weight.device.type == "fakecuda"
    value = to_cpu(net.weight)                   # a plain CPU tensor, for comparing numbers

How it works. PrivateUse1 is renamed `fakecuda` with torch's Python device guard
(`torch.utils.backend_registration._setup_privateuseone_for_python_backend`). A tensor on the device is a wrapper
subclass (`FakeCudaTensor`, `torch.Tensor._make_wrapper_subclass`) that holds a CPU tensor with the same sizes and
strides. The `FakeCuda` context is a TorchDispatchMode: every aten op is run on the held CPU tensors and its outputs
are wrapped again, so the numbers are the CPU's, bit for bit (random ops draw from the CPU generator, so a seeded
run on `fakecuda` gives the same numbers as the same run on the CPU). On the way it

- raises `DeviceMixError` when an op mixes a device tensor with a CPU tensor of one or more dimensions, as CUDA
  does, naming the op, the argument and the user's file:line. Allowed, as on CUDA: copies between host and device
  (also `torch._foreach_copy_`), CPU index tensors in `t[idx]` / `t[idx] = v`, and 0-dim CPU tensors (CUDA takes
  them as scalars in elementwise ops; this helper allows them in every op, a little more than CUDA does);
- records every host read in `host_reads`: `.item()`, `bool(t)`, `float(t)`, `.tolist()`, `.cpu()`, `.to("cpu")`,
  a copy into a CPU tensor, `torch.equal`, printing or formatting a device tensor, `torch.save` of device tensors
  (one read per tensor), and the ops whose output size depends on the values on the device, which
  make CUDA wait (`nonzero`, boolean-mask indexing with a device mask, `masked_select`, `unique`, `bincount`,
  `repeat_interleave` without `output_size`). `.numpy()` on a device tensor raises, as on CUDA;
- makes factory functions given `device=fakecuda` (`torch.zeros`, `randn`, `randint`, `empty`, `arange`,
  `torch.tensor(data, device=)`, `.to(device)`) return device tensors.

Modules, autograd, `torch.optim.Adam` (default, foreach, capturable, fused; the default takes the foreach path and
keeps `step` on the host, as on CUDA), `torch.func.functional_call`, `grad_and_value`, `torch.vmap`,
`torch.func.stack_module_state`, `torch._foreach_*`, `copy.deepcopy`, `tensordict.TensorDict`, and `torch.save` /
`torch.load(map_location="cpu")` work on the device inside the context (tests/test_stand_in_device.py shows most).

What it cannot check:
- compiled code: torch.compile skips every frame while a dispatch mode is active, so a compiled function runs
  eagerly here (the check is of the eager code path only);
- CUDA graphs (tensordict's CudaGraphModule, torch.cuda.graph), streams and events, pinned memory (`pin_memory()`
  fails once the device is registered), `torch.Generator(device=fakecuda)`, `torch.cuda.*` calls,
  `torch.distributed` (gloo and NCCL take no fakecuda tensors), and the real asynchrony of CUDA (non_blocking copies
  are plain copies here);
- numerics of CUDA kernels (TF32, atomics, non-determinism): the numbers are the CPU's;
- a host read of a CPU tensor is not counted: a script that keeps a tensor on the CPU by mistake is caught only when
  that tensor meets a device tensor in an op.

Device tensors leaving the context keep their device and values: `t.device.type == "fakecuda"`, `to_cpu(t)` gives
the values; ops on them outside the context still run (mixes checked, reads not counted, an error in backward not
deferred), but factory functions with device=fakecuda need the context.

Registration happens at the first `FakeCuda()`, once per process (importing this file twice, under two names, is
safe), and cannot be undone: from then on `torch.accelerator` reports `fakecuda` in that process, and torch prefers a
renamed PrivateUse1 over CUDA as "the accelerator". On a GPU host, keep CUDA work (CUDA graphs, pinned memory,
streams in backward) out of a process that has used this helper.
"""

import importlib
import linecache
import os
import sys
import sysconfig
import threading
from typing import NamedTuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

NAME = "fakecuda"
aten = torch.ops.aten


class HostRead(NamedTuple):
    """One read of device data from the host: where in the user's code, and which op did it."""

    filename: str
    lineno: int
    line: str  # the source text of that line, stripped
    op: str  # "item", "equal", "to_cpu", "copy_to_cpu", "tolist", "repr", or "sync:<op>" (e.g. "sync:nonzero")

    def __str__(self):
        return f"{self.filename}:{self.lineno}: {self.op}: {self.line}"


class DeviceMixError(RuntimeError):
    """An op got a fakecuda tensor and a CPU tensor of one or more dimensions (CUDA raises there too)."""


# ---- the backend: registered once per process, shared by every copy of this module -------------------------------


class _Backend:
    """The module behind `torch.fakecuda` (what torch asks a device's module for), plus the state that must be
    shared if this file is imported twice: the stack of active FakeCuda contexts."""

    def __init__(self):
        self.active = []  # FakeCuda contexts now entered, innermost last

    def is_initialized(self):
        return True

    def is_available(self):
        return True

    def current_device(self):
        return 0

    def device_count(self):
        return 1

    def _is_in_bad_fork(self):
        return False

    def manual_seed_all(self, seed):
        pass  # random ops run on the CPU generator, which torch.manual_seed already seeds

    def synchronize(self, device=None):
        pass


def _register():
    # torch picks foreach kernels by default (Adam, clip_grad_norm_) only for tensors of these exact types; listing the
    # wrapper there makes the default path here the one CUDA takes.
    for module in ("torch.utils._foreach_utils", "torch.optim.optimizer"):
        types = importlib.import_module(module)._foreach_supported_types
        if FakeCudaTensor not in types:
            types.append(FakeCudaTensor)
    name = torch._C._get_privateuse1_backend_name()
    backend = getattr(torch, NAME, None)
    if name == NAME and isinstance(getattr(backend, "active", None), list):
        return backend  # already done in this process (maybe by another copy of this module)
    if name != "privateuseone":
        raise RuntimeError(f"PrivateUse1 is already taken by {name!r} in this process; the stand-in device needs it")
    backend = _Backend()
    torch.utils.backend_registration._setup_privateuseone_for_python_backend(NAME, backend_module=backend)
    # torch.tensor(data, device=...) moves its CPU tensor to the device below the Python dispatch key, so the
    # dispatch mode never sees it: these kernels are what it calls there (torch.load uses them too).
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("empty_strided", _empty_strided_kernel, "PrivateUse1")
    lib.impl("empty.memory_format", _empty_kernel, "PrivateUse1")
    lib.impl("_copy_from", _copy_from_kernel, "PrivateUse1")
    lib.impl("_local_scalar_dense", _item_kernel, "PrivateUse1")  # torch.tensor([t[0], t[1]]) reads t below too
    backend._library = lib  # a Library unregisters its kernels when garbage collected
    return backend


def _empty_strided_kernel(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    return FakeCudaTensor(torch.empty_strided(size, stride, dtype=dtype))


def _empty_kernel(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return FakeCudaTensor(torch.empty(size, dtype=dtype, memory_format=memory_format))


def _copy_from_kernel(src, dst, non_blocking=False):
    if is_fake(src) and not is_fake(dst):
        _record_read(_innermost(), "copy_to_cpu")
    _cpu(dst).copy_(_cpu(src))
    return dst


def _item_kernel(t):
    _record_read(_innermost(), "item")
    return t._cpu.item()


# ---- the tensors ------------------------------------------------------------------------------------------------


class FakeCudaTensor(torch.Tensor):
    """A tensor on `fakecuda:0`: the metadata of the wrapper is the held CPU tensor's (`_cpu`)."""

    _is_fakecuda = True

    @staticmethod
    def __new__(cls, cpu_tensor):
        wrapper = torch.Tensor._make_wrapper_subclass(
            cls,
            cpu_tensor.size(),
            strides=cpu_tensor.stride(),
            storage_offset=cpu_tensor.storage_offset(),
            dtype=cpu_tensor.dtype,
            layout=cpu_tensor.layout,
            device=torch.device(NAME, 0),
            requires_grad=False,  # autograd, above the dispatch, sets this on the outputs it tracks
        )
        wrapper._cpu = cpu_tensor
        return wrapper

    def __init__(self, cpu_tensor):
        pass

    def __repr__(self, *, tensor_contents=None):
        # Printing reads the values, like CUDA: one host read for the whole print, not one per element printed.
        _record_read(_innermost(), "repr")
        return f"FakeCudaTensor({self._cpu!r})"

    def tolist(self):
        # torch's tolist refuses tensor subclasses; on CUDA it is a copy to the host.
        _record_read(_innermost(), "tolist")
        return self._cpu.tolist()

    # `p.data = t` swaps the TensorImpl's data but not this Python object's held tensor: move that too.
    @property
    def data(self):
        return torch.Tensor.data.__get__(self)

    @data.setter
    def data(self, new):
        torch.Tensor.data.__set__(self, new)  # torch checks that `new` is a tensor of this same kind
        self._cpu = new._cpu

    def __format__(self, spec):
        # torch formats only plain 0-dim tensors through .item(); CUDA's do too, so ours do (and count the read).
        if self.dim() == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __reduce_ex__(self, proto):
        # Save as torch saves any storage-less PrivateUse1 tensor (a CPU copy and the device name), without the
        # subclass, so that torch.load(..., weights_only=True) reads it back, on the CPU with map_location="cpu".
        rebuild = torch._utils._rebuild_device_tensor_from_cpu_tensor
        return rebuild, (self.detach().cpu(), self.dtype, str(self.device), self.requires_grad)

    def numpy(self, *, force=False):
        raise TypeError(  # CUDA's words
            f"can't convert {self.device} device type tensor to numpy. "
            "Use Tensor.cpu() to copy the tensor to host memory first."
        )

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        # Only reached outside a FakeCuda context (inside, the mode sees every op first): run, check mixes, no count.
        return _run(None, func, args, kwargs or {})

    # Module._apply swaps such tensors into parameters (swap_tensors) instead of `param.data = ...`, which would keep
    # the old held CPU tensor.
    def __tensor_flatten__(self):
        return ["_cpu"], None

    @staticmethod
    def __tensor_unflatten__(inner, meta, outer_size, outer_stride):
        return FakeCudaTensor(inner["_cpu"])


def is_fake(t):
    """Whether `t` is a tensor on the stand-in device (works across copies of this module)."""
    return isinstance(t, torch.Tensor) and getattr(type(t), "_is_fakecuda", False)


def _cpu(t):
    return t._cpu if is_fake(t) else t


def to_cpu(t):
    """The values of a device tensor as a plain CPU tensor (a copy, detached), without counting a host read; a CPU
    tensor is returned as a detached copy too. Works inside and outside the context."""
    if not is_fake(t):
        return t.detach().clone()
    return t._cpu.detach().clone()


# ---- the dispatch mode ------------------------------------------------------------------------------------------


class FakeCuda(TorchDispatchMode):
    """Context manager: run torch on the stand-in device, check device mixes, record host reads.

    fake.device          torch.device("fakecuda:0"), to pass wherever a script takes its device
    fake.host_reads      list of HostRead(filename, lineno, line, op), one per device-to-host read, in order
    fake.reset_reads()   forget the reads so far
    fake.describe_reads() the reads as text, one a line (for assertion messages)

    Errors in backward: autograd runs a device's backward on its own thread, and there torch 2.13's Python device
    guard aborts the whole process if a Python exception passes through it. So on that thread an op that fails (a
    device mix, a kernel error) gives zeros of the right shape instead, and the error is raised on the thread that
    entered the context at its next op (usually the optimizer step right after `backward()`), or when it exits,
    naming the backward call's line. An exception raised in backward by a tensor hook (`register_hook`) still aborts
    the process; one raised in a custom autograd Function's backward comes back as usual.
    """

    def __init__(self):
        super().__init__()
        self.backend = _register()
        self.device = torch.device(NAME, 0)
        self.host_reads = []
        self._owner = None  # the thread that entered the context
        self._deferred = None  # an error met on autograd's thread, to raise on the owner's

    def reset_reads(self):
        self.host_reads.clear()

    def describe_reads(self):
        return "\n".join(str(r) for r in self.host_reads) or "(no host reads)"

    def __enter__(self):
        self._owner = threading.get_ident()
        self.backend.active.append(self)
        return super().__enter__()

    def __exit__(self, exc_type, exc, tb):
        try:
            super().__exit__(exc_type, exc, tb)
        finally:
            self.backend.active.remove(self)
        if exc_type is None:
            self._raise_deferred()
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if threading.get_ident() == self._owner:
            self._raise_deferred()
            return _run(self, func, args, kwargs)
        try:  # autograd's device thread: no Python exception may leave (see the class docstring)
            return _run(self, func, args, kwargs)
        except Exception as error:
            if self._deferred is None:
                self._deferred = (error, _user_frame())
            try:
                return _zeros_like_outputs(func, args, kwargs)
            except Exception:
                self._deferred = None
                raise error from None

    def _raise_deferred(self):
        if self._deferred is None:
            return
        (error, where), self._deferred = self._deferred, None
        if isinstance(error, DeviceMixError):
            raise DeviceMixError(f"in backward: {error}")
        at = f" (from {where[0]}:{where[1]}: {where[2]})" if where else ""
        raise RuntimeError(f"{error!r} in backward, on autograd's device thread{at}") from error


def _zeros_like_outputs(func, args, kwargs):
    """What `func` would return, filled with zeros: shapes from running it on meta tensors. In-place ops return
    their input unchanged."""
    originals = {}

    def to_meta(t):
        if not isinstance(t, torch.Tensor):
            return t
        meta = _cpu(t).detach().to("meta")
        originals[id(meta)] = t
        return meta

    meta_args, meta_kwargs = tree_map(to_meta, (args, kwargs))
    if "device" in meta_kwargs:
        meta_kwargs["device"] = torch.device("meta")
    out = func(*meta_args, **meta_kwargs)

    def zeros(t):
        if not isinstance(t, torch.Tensor):
            return t
        if id(t) in originals:
            return originals[id(t)]
        return FakeCudaTensor(torch.empty_strided(t.size(), t.stride(), dtype=t.dtype).zero_())

    return tree_map(zeros, out)


def _innermost():
    backend = getattr(torch, NAME, None)
    active = getattr(backend, "active", None)
    return active[-1] if active else None


# ops that may take a device tensor and a CPU one: copies between host and device
_COPIES = {aten._to_copy.default, aten.copy_.default, aten.copy.default, aten._copy_from.default}
_COPIES.update([aten._copy_from_and_resize.default, aten._foreach_copy_.default, aten._foreach_copy.default])
# ops where CUDA accepts CPU index tensors (it moves them over), by argument name
_INDEX_ARGS = {
    aten.index.Tensor: "indices",
    aten.index_put_.default: "indices",
    aten.index_put.default: "indices",
    aten._index_put_impl_.default: "indices",
    aten._unsafe_index.Tensor: "indices",
}
# ops whose output size depends on the values: CUDA waits for the device and reads the size back
_SIZE_FROM_VALUES = {
    aten.nonzero.default,
    aten.masked_select.default,
    aten._unique.default,
    aten._unique2.default,
    aten.unique_dim.default,
    aten.unique_consecutive.default,
    aten.bincount.default,
}


def _is_device_arg(value):
    return value is not None and not isinstance(value, torch.Tensor) and torch.device(value).type == NAME


def _run(mode, func, args, kwargs):
    flat = tree_flatten((args, kwargs))[0]
    on_device = any(is_fake(a) for a in flat)
    device = kwargs.get("device")
    to_device = _is_device_arg(device)
    elsewhere = device is not None and not to_device  # an explicit other device: the output is not ours
    if on_device:
        if func not in _COPIES:
            _check_mix(func, args, kwargs)
        if mode is not None:
            _count_reads(mode, func, args, kwargs, elsewhere and torch.device(device).type == "cpu")
    cpu_args, cpu_kwargs = tree_map(_cpu, (args, kwargs))
    if to_device:
        cpu_kwargs["device"] = torch.device("cpu")
    out = func(*cpu_args, **cpu_kwargs)
    if not (on_device or to_device) or elsewhere:
        return out
    # In-place and out= ops return one of their inputs: give back the caller's object, not a new wrapper.
    inputs = {id(c): a for c, a in zip(tree_flatten((cpu_args, cpu_kwargs))[0], flat) if isinstance(c, torch.Tensor)}

    def wrap(t):
        if not isinstance(t, torch.Tensor):
            return t
        if id(t) in inputs:
            return inputs[id(t)]
        return FakeCudaTensor(t)

    return tree_map(wrap, out)


def _named_args(func, args, kwargs):
    names = [a.name for a in func._schema.arguments]
    return list(zip(names, args)) + list(kwargs.items())


def _check_mix(func, args, kwargs):
    allowed = _INDEX_ARGS.get(func)
    for name, value in _named_args(func, args, kwargs):
        if name == allowed:
            continue
        for t in tree_flatten(value)[0]:
            if isinstance(t, torch.Tensor) and not is_fake(t) and t.device.type == "cpu" and t.dim() > 0:
                where = _user_frame()
                at = f" at {where[0]}:{where[1]}: {where[2]}" if where else " (no user frame: inside autograd's backward?)"
                raise DeviceMixError(
                    f"{func} mixes a {NAME} tensor with a CPU tensor of shape {tuple(t.shape)} (argument {name!r})"
                    f"{at}. CUDA raises here too: move it to the device, or make it a 0-dim scalar."
                )


def _count_reads(mode, func, args, kwargs, to_host):
    if func is aten._local_scalar_dense.default:
        _record_read(mode, "item")
    elif func is aten.equal.default:
        _record_read(mode, "equal")
    elif func is aten._to_copy.default and to_host:
        _record_read(mode, "to_cpu")
    elif func in (aten.copy_.default, aten._foreach_copy_.default) and _copies_to_host(args[0], args[1]):
        _record_read(mode, "copy_to_cpu")
    elif func in _SIZE_FROM_VALUES:
        _record_read(mode, f"sync:{func.__name__}")
    elif func is aten.repeat_interleave.Tensor and kwargs.get("output_size") is None:
        _record_read(mode, "sync:repeat_interleave")
    elif func in _INDEX_ARGS:
        indices = dict(_named_args(func, args, kwargs))["indices"]
        if any(is_fake(i) and i.dtype in (torch.bool, torch.uint8) for i in indices if i is not None):
            _record_read(mode, f"sync:{func.__name__} with a boolean mask")


def _copies_to_host(dst, src):
    pairs = zip(dst, src) if isinstance(dst, (list, tuple)) else [(dst, src)]
    return any(is_fake(s) and not is_fake(d) for d, s in pairs)


def _record_read(mode, op):
    if mode is None:
        return
    where = _user_frame() or ("<no user frame>", 0, "")
    mode.host_reads.append(HostRead(where[0], where[1], where[2], op))


# ---- where in the user's code -----------------------------------------------------------------------------------


def _library_dirs():
    paths = sysconfig.get_paths()
    dirs = {os.path.dirname(torch.__file__), paths["stdlib"], paths["platstdlib"], paths["purelib"], paths["platlib"]}
    dirs.update(p for p in sys.path if p.rstrip(os.sep).endswith(("site-packages", "dist-packages")))
    return tuple(os.path.join(os.path.realpath(d), "") for d in dirs if d)


_LIBRARY_DIRS = _library_dirs()
_THIS_FILE = os.path.realpath(__file__)


def _user_frame():
    """(filename, lineno, line) of the innermost frame outside torch, site-packages, the stdlib and this file. On
    autograd's device thread, which runs no user code, that of the thread that entered the context (blocked in its
    backward call)."""
    found = _user_frame_from(sys._getframe(1))
    mode = _innermost()
    if found is None and mode is not None and mode._owner != threading.get_ident():
        found = _user_frame_from(sys._current_frames().get(mode._owner))
    return found


def _user_frame_from(frame):
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith("<"):
            real = os.path.realpath(filename)
            if real != _THIS_FILE and not real.startswith(_LIBRARY_DIRS):
                return filename, frame.f_lineno, linecache.getline(filename, frame.f_lineno).strip()
        frame = frame.f_back
    return None
