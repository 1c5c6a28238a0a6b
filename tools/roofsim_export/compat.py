"""What differs between the torch versions the exporter supports (1.13 to 2.x), found by feature
detection rather than by version numbers: fake tensor construction, storage identity, autograd node
hooks, autocast, and the exceptions fake tensors raise."""

from __future__ import annotations

import contextlib
import inspect
import warnings

import torch

try:  # torch >= 1.12
    from torch._subclasses import fake_tensor as _fake
except ImportError as exc:  # pragma: no cover - older torch
    raise ImportError(f"roofsim_export needs torch._subclasses.fake_tensor (torch >= 1.13): {exc}")

from torch.utils import _python_dispatch

try:
    from torch.utils._mode_utils import no_dispatch
except ImportError:  # pragma: no cover
    @contextlib.contextmanager
    def no_dispatch():
        """Runs ops without any Python dispatch (modes and tensor subclasses)."""
        guard = torch._C._DisableTorchDispatch()
        try:
            yield
        finally:
            del guard

TorchDispatchMode = _python_dispatch.TorchDispatchMode
TorchFunctionMode = torch.overrides.TorchFunctionMode  # torch 1.13 and 2.x

from torch.multiprocessing.reductions import StorageWeakRef

FakeTensor = _fake.FakeTensor
FakeTensorMode = _fake.FakeTensorMode

TORCH_VERSION = torch.__version__


def _exception_types(*names):
    return tuple(getattr(_fake, n) for n in names if isinstance(getattr(_fake, n, None), type))


# Raised by fake tensors when an op's result depends on tensor values (.item(), bool(tensor), nonzero).
DATA_DEPENDENT_ERRORS = _exception_types("DataDependentOutputException", "DynamicOutputShapeException")
# Raised when an op has no meta kernel (no shape function) and fallback kernels are off.
MISSING_META_ERRORS = (NotImplementedError,) + _exception_types("UnsupportedOperatorException")


def make_fake_mode() -> FakeTensorMode:
    """A FakeTensorMode that raises on data-dependent ops and never runs real kernels."""
    params = inspect.signature(FakeTensorMode.__init__).parameters
    kwargs = {}
    if "allow_fallback_kernels" in params:
        kwargs["allow_fallback_kernels"] = False
    if "throw_on_data_dependent_ops" in params:  # torch 1.13; later versions always raise
        kwargs["throw_on_data_dependent_ops"] = True
    if "allow_non_fake_inputs" in params:  # a stray real tensor is converted instead of an error
        kwargs["allow_non_fake_inputs"] = True
    return FakeTensorMode(**kwargs)


def fake_from_meta(mode: FakeTensorMode, meta: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A fake tensor on `device` from a meta tensor (no memory, no copy)."""
    conv = mode.fake_tensor_converter
    if hasattr(conv, "from_meta_and_device"):
        return conv.from_meta_and_device(mode, meta, device)
    return FakeTensor(mode, meta, device)  # pragma: no cover


def storage_of(t: torch.Tensor):
    """The untyped storage of a tensor, without TypedStorage deprecation warnings."""
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return t.storage()


def storage_key(storage) -> int:
    return int(storage._cdata)


def storage_nbytes(storage) -> int:
    n = storage.nbytes
    return int(n() if callable(n) else n)


def weak_storage(storage) -> StorageWeakRef:
    return StorageWeakRef(storage)


def node_prehook(node, fn) -> bool:
    """Registers fn(grad_outputs) to run just before an autograd node; False if unsupported."""
    register = getattr(node, "register_prehook", None)
    if register is None:
        return False
    try:
        register(fn)
        return True
    except Exception:  # some node types refuse hooks
        return False


def cuda_usable() -> bool:
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def cuda_built() -> bool:
    try:
        return bool(torch.backends.cuda.is_built())
    except Exception:
        return torch.version.cuda is not None


def autocast_cuda(dtype: torch.dtype):
    """torch.autocast for CUDA, as the training step uses it."""
    return torch.autocast(device_type="cuda", dtype=dtype)


@contextlib.contextmanager
def quiet():
    """Silences the warnings torch prints when fake tensors or CPU-only builds meet CUDA-only paths."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def is_inplace_view(func) -> bool:
    tag = getattr(torch.Tag, "inplace_view", None)
    try:
        return tag is not None and tag in func.tags
    except Exception:
        return False


def schema_returns_alias(func) -> bool:
    """True for ops whose (first) output aliases an input without writing it: views."""
    try:
        rets = func._schema.returns
        if not rets:
            return False
        info = rets[0].alias_info
        return info is not None and not info.is_write
    except Exception:
        return False


def _written_args(func, args, kwargs, keyword_only: bool):
    """The arguments the schema marks written (alias info `(a!)`), in schema order; with
    keyword_only, only those after the `*`."""
    out = []
    try:
        schema = func._schema
    except Exception:
        return out
    for i, arg in enumerate(schema.arguments):
        info = arg.alias_info
        if info is None or not info.is_write or (keyword_only and not getattr(arg, "kwarg_only", False)):
            continue
        if i < len(args):
            out.append(args[i])
        elif arg.name in kwargs:
            out.append(kwargs[arg.name])
    return out


def mutated_args(func, args, kwargs):
    """The arguments an op writes in place (schema alias info `(a!)`), in schema order."""
    return _written_args(func, args, kwargs, keyword_only=False)


def out_args(func, args, kwargs):
    """The tensors an `out=` overload writes its result into: keyword-only arguments the schema marks
    written (`*, Tensor(a!) out`). Not an input merely named so (`tanh_backward(grad_output, output)`
    reads `output`)."""
    return _written_args(func, args, kwargs, keyword_only=True)


def named_args(func, args, kwargs) -> dict:
    """The op's arguments by schema name (positional and keyword), defaults filled in."""
    out = {}
    try:
        schema_args = func._schema.arguments
    except Exception:
        return dict(kwargs)
    for i, arg in enumerate(schema_args):
        if i < len(args):
            out[arg.name] = args[i]
        elif arg.name in kwargs:
            out[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            out[arg.name] = arg.default_value
    return out


_COMPOSITE: dict = {}


def composite_kernel(func):
    """The op's CompositeImplicitAutograd kernel (its decomposition into other aten ops) as a callable,
    or None where it has none. Outside torch.inference_mode() the autograd key runs it before a
    dispatch mode sees the op; inside, nothing does (the autograd keys are skipped)."""
    if func in _COMPOSITE:
        return _COMPOSITE[func]
    kernel = None
    dk = getattr(torch._C.DispatchKey, "CompositeImplicitAutograd", None)
    op_dk = getattr(func, "_op_dk", None)
    try:
        if dk is not None and op_dk is not None and torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), dk):
            def kernel(*args, **kwargs):
                return op_dk(dk, *args, **kwargs)
    except Exception:
        kernel = None
    _COMPOSITE[func] = kernel
    return kernel
