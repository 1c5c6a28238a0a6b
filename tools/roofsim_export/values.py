"""Values of fake tensors that do not depend on the model's data.

Fake tensors have no data, so `.item()`, `bool(tensor)`, `if tensor:` and boolean masks cannot be
answered from them. Models often ask such questions of tensors whose values are known without any
data: an attention mask made by torch.ones (`if torch.all(mask == 1)`), position ids made by
torch.arange (transformers checks them for packed sequences), a scale made by torch.full. This
module keeps a real CPU copy of the value of every tensor computed only from factories (ones, zeros,
full, arange, torch.tensor constants, ...), by running the same op on the real copies. Inputs,
parameters and everything computed from them stay unknown: a question about them still fails,
naming the op and module.

A copy is kept while it has at most LIMIT elements; a tensor filled with one value is kept at any
size as an expanded one-element tensor (no memory)."""

from __future__ import annotations

import torch

from . import compat
from .kernels import base_name, flat_tensors

ATTR = "_roofsim_value"
LIMIT = 1 << 22  # elements of one real copy (32 MiB of int64)

FILL_VALUES = {"ones": 1, "ones_like": 1, "new_ones": 1, "zeros": 0, "zeros_like": 0, "new_zeros": 0}
FILL_ARGS = {"full": "fill_value", "full_like": "fill_value", "new_full": "fill_value", "scalar_tensor": "s",
             "fill": "value"}
QUESTIONS = {"_local_scalar_dense", "item", "is_nonzero"}
DEVICE_KWARGS = ("device", "layout", "pin_memory")


def value(t):
    """The real CPU value of a tensor, or None when it is not known."""
    if not isinstance(t, torch.Tensor):
        return None
    if not isinstance(t, compat.FakeTensor):
        return t if t.device.type == "cpu" else None
    v = getattr(t, ATTR, None)
    if v is None and getattr(t, "constant", None) is not None:
        v = t.constant
    return v


def _set(t, v) -> None:
    try:
        if v is None:
            if hasattr(t, ATTR):
                delattr(t, ATTR)
        else:
            setattr(t, ATTR, v)
    except Exception:
        pass


def answer(name: str, args):
    """The Python value of .item() / bool() on a tensor of known value, else None."""
    if name not in QUESTIONS or not args:
        return None
    v = value(args[0])
    if v is None or v.numel() != 1:
        return None
    with compat.no_dispatch():
        x = v.reshape(()).item()
    return bool(x) if name == "is_nonzero" else x


def _uniform(shape, fill, dtype):
    n = 1
    for d in shape:
        n *= int(d)
    with compat.no_dispatch():
        if n <= LIMIT:
            return torch.full(tuple(shape), fill, dtype=dtype)
        return torch.full((), fill, dtype=dtype).expand(tuple(shape))


def _to_real(obj, ok: list):
    if isinstance(obj, torch.Tensor):
        v = value(obj)
        if v is None:
            ok[0] = False
        return v
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_real(x, ok) for x in obj)
    if isinstance(obj, torch.device):
        return torch.device("cpu")
    return obj


def compute(func, args, kwargs):
    """The op run for real on the known values of its inputs (None if some input is unknown)."""
    ok = [True]
    real_args = _to_real(args, ok)
    real_kwargs = {k: ("cpu" if k == "device" and v is not None else _to_real(v, ok)) for k, v in kwargs.items()
                   if k not in ("layout", "pin_memory")}
    if not ok[0]:
        return None
    with compat.no_dispatch():
        return func(*real_args, **real_kwargs)


def propagate(func, name: str, args, kwargs, out) -> None:
    """Gives the outputs of one op their value where it is known; forgets values overwritten with
    unknown data."""
    if name == "_amp_foreach_non_finite_check_and_unscale_":
        return  # found_inf keeps its 0: the exporter assumes finite gradients (steady-state training)
    outs = flat_tensors(out)
    mutated = flat_tensors(compat.mutated_args(func, args, kwargs))
    targets = outs if outs else mutated
    base = base_name(name)
    try:
        fill = FILL_VALUES.get(base)
        if fill is None and base in FILL_ARGS:
            fill = compat.named_args(func, args, kwargs).get(FILL_ARGS[base])
            if isinstance(fill, torch.Tensor):
                v = value(fill)
                fill = None if v is None or v.numel() != 1 else _item(v)
        if name == "zero_":
            fill = 0
        if isinstance(fill, (bool, int, float)):
            for t in targets:
                _set(t, _uniform(t.shape, fill, t.dtype))
            return
        if base in ("empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted",
                    "resize", "set"):
            raise LookupError  # uninitialized memory
        seeded = getattr(torch.Tag, "nondeterministic_seeded", None)
        if seeded is not None and seeded in getattr(func, "tags", ()):
            raise LookupError  # random values are not known
        inputs = flat_tensors(args) + flat_tensors(kwargs)
        fakes = [t for t in inputs if isinstance(t, compat.FakeTensor)]
        if not fakes and outs and all(t.numel() > LIMIT for t in outs):
            raise LookupError  # a large factory output (arange of millions): not worth a copy
        if not all(value(t) is not None for t in inputs):
            raise LookupError
        if any(t.numel() > LIMIT and not _is_expanded_scalar(value(t)) for t in outs) and fakes:
            raise LookupError
        result = compute(func, args, kwargs)
        if result is None:
            raise LookupError
        for fake_t, real_t in zip(targets, flat_tensors(result) if outs else mutated_values(mutated)):
            if tuple(real_t.shape) == tuple(fake_t.shape):
                _set(fake_t, real_t)
            else:
                _set(fake_t, None)
        return
    except Exception:  # a value is an aid: never a reason to fail
        pass
    for t in mutated:  # written with something unknown
        _set(t, None)


def mutated_values(mutated):
    return [value(t) for t in mutated]


def data_dependent_outputs(func, args, kwargs, make_fake):
    """Outputs of an op whose shape depends on data (nonzero, boolean masks), when every input's value
    is known: computed for real, returned as fake tensors of the right shape. None otherwise."""
    try:
        result = compute(func, args, kwargs)
    except Exception:
        return None
    if result is None:
        return None

    def wrap(r):
        if isinstance(r, torch.Tensor):
            f = make_fake(r)
            _set(f, r)
            return f
        if isinstance(r, (list, tuple)):
            return type(r)(wrap(x) for x in r)
        return r
    return wrap(result)


def _is_expanded_scalar(v) -> bool:
    return v is not None and all(s == 0 for s in v.stride())


def _item(v):
    with compat.no_dispatch():
        return v.reshape(()).item()
