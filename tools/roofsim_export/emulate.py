"""CUDA behaviour for fake CPU tensors.

Where fake CUDA tensors cannot run autograd (a torch built without CUDA: every autograd node asks
the CUDA device guard for a stream, and the process aborts), the step runs on fake CPU tensors. The
ops PyTorch dispatches then differ from the CUDA step in two places, and this module puts the CUDA
behaviour back while the step is captured:

* autocast: CPU autocast has other op lists (and no float16 in torch 1.13), so torch.autocast('cuda')
  is emulated: the Python entry points of the ops on CUDA autocast's lists (torch.amp docs, "CUDA Ops
  that can autocast to float16 / to float32 / promote") are wrapped to cast their floating-point
  arguments as autocast does (aten::_to_copy, recorded like any op), with autocast's per-forward cache
  of weight casts (leaf tensors that require grad);
* cross_entropy: aten::cross_entropy_loss calls log_softmax with its input's dtype and nll_loss, so
  under autocast the log-softmax runs in 16 bits and only nll_loss in float32; the wrapper makes
  the same two calls (F.cross_entropy is one C++ call the patching above cannot see into);
* scaled_dot_product_attention: CUDA runs a fused kernel where the CPU may take the math path; the
  fused op is called directly (flash for 16-bit inputs without a mask, else memory-efficient);
* dropout: CUDA runs one fused kernel (aten::native_dropout); CPU builds a mask with bernoulli_,
  div_ and mul. F.dropout is wrapped to call torch.native_dropout when training.

Only Python-level calls are seen: an op called from C++ inside another op that autocast does not
list is not cast (rare in training code: linear, conv, matmul, bmm, layer_norm, softmax and the
losses are all called from Python)."""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

LOW = "low"        # cast floating-point arguments to the autocast dtype
FP32 = "fp32"      # cast 16-bit arguments to float32
OPT_DTYPE = "opt"  # pass dtype=float32 when the input is 16-bit and no dtype is given
PROMOTE = "promote"  # cast to the widest floating-point type among the arguments

_LOW_FUNCS = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
              "convolution", "prelu", "addmm", "addmv", "addr", "matmul", "einsum", "mm", "mv", "addbmm", "baddbmm",
              "bmm", "chain_matmul", "scaled_dot_product_attention", "_scaled_dot_product_attention"]
_FP32_FUNCS = ["layer_norm", "group_norm", "rms_norm", "exp", "log", "log10", "log2", "log1p", "expm1", "pow",
               "rsqrt", "reciprocal", "acos", "asin", "cosh", "sinh", "tan", "erfinv", "logsumexp", "norm", "dist",
               "cdist", "renorm", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
               "kl_div", "binary_cross_entropy_with_logits", "softplus", "cosine_similarity", "normalize", "softmin",
               "poisson_nll_loss", "margin_ranking_loss", "hinge_embedding_loss", "multilabel_margin_loss",
               "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss", "cosine_embedding_loss", "pdist"]
_OPT_DTYPE_FUNCS = ["softmax", "log_softmax", "sum", "prod", "cumsum", "cumprod"]
_PROMOTE_FUNCS = ["cat", "stack", "addcmul", "addcdiv", "dot", "atan2", "tensordot", "index_put", "scatter_add",
                  "index_copy", "bilinear", "cross"]
_TENSOR_DUNDER = {"__matmul__": LOW, "__rmatmul__": LOW, "__pow__": FP32}


def _targets():
    """(owner, attribute, policy) for every Python entry point of the lists above."""
    owners = [torch, F, torch.Tensor]
    out = []
    for policy, names in ((LOW, _LOW_FUNCS), (FP32, _FP32_FUNCS), (OPT_DTYPE, _OPT_DTYPE_FUNCS),
                          (PROMOTE, _PROMOTE_FUNCS)):
        for name in names:
            for owner in owners:
                if owner is torch.Tensor and name in ("linear", "conv1d", "conv2d", "conv3d", "einsum",
                                                      "chain_matmul", "cat", "stack"):
                    continue
                if callable(getattr(owner, name, None)):
                    out.append((owner, name, policy))
    for name, policy in _TENSOR_DUNDER.items():
        if callable(getattr(torch.Tensor, name, None)):
            out.append((torch.Tensor, name, policy))
    return out


def _eligible(t) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64


class CudaEmulation:
    """Patches the entry points while active; restores them on exit."""

    def __init__(self, autocast_dtype: torch.dtype | None):
        self.dtype = autocast_dtype
        self.autocast_on = False
        self.cache: dict = {}
        self._saved = []
        # around(original, args, kwargs) -> a context each wrapped call runs in, its casts included
        # (the capture's owner of a layer called as a function: capture.Session.functional_call)
        self.around = None

    # -- autocast region ------------------------------------------------------------------------

    @contextlib.contextmanager
    def autocast(self):
        """The emulated `with torch.autocast('cuda', dtype)` region (the forward and the loss)."""
        if self.dtype is None:
            yield
            return
        self.autocast_on = True
        try:
            yield
        finally:
            self.autocast_on = False
            self.cache.clear()  # autocast drops its weight-cast cache when the region exits

    def _cast(self, t, dtype):
        if not _eligible(t) or t.dtype == dtype:
            return t
        cacheable = (dtype == self.dtype and t.dtype == torch.float32 and t.requires_grad and t.is_leaf
                     and not t._is_view())
        if cacheable:
            hit = self.cache.get(id(t))
            if hit is not None and hit[0] is t:
                return hit[1]
        out = t.to(dtype)
        if cacheable:
            self.cache[id(t)] = (t, out)
        return out

    def _map(self, obj, fn):
        if isinstance(obj, torch.Tensor):
            return fn(obj)
        if isinstance(obj, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in obj):
            return type(obj)(self._map(x, fn) for x in obj)
        return obj

    def _wrap(self, original, policy):
        emu = self

        def wrapper(*args, **kwargs):
            if not emu.autocast_on:
                return original(*args, **kwargs)
            if emu.around is None:
                return cast_and_call(args, kwargs)
            with emu.around(original, args, kwargs):
                return cast_and_call(args, kwargs)

        def cast_and_call(args, kwargs):
            if policy == LOW:
                fn = lambda t: emu._cast(t, emu.dtype)  # noqa: E731
            elif policy == FP32:
                fn = lambda t: emu._cast(t, torch.float32)  # noqa: E731
            elif policy == OPT_DTYPE:
                first = args[0] if args else kwargs.get("input")
                if (_eligible(first) and first.dtype in (torch.float16, torch.bfloat16)
                        and kwargs.get("dtype") is None):
                    kwargs = dict(kwargs, dtype=torch.float32)
                return original(*args, **kwargs)
            else:  # PROMOTE
                floats = [t for t in _flat(args) + _flat(kwargs) if _eligible(t)]
                if not floats:
                    return original(*args, **kwargs)
                widest = torch.float32 if any(t.dtype == torch.float32 for t in floats) else floats[0].dtype
                fn = lambda t: emu._cast(t, widest)  # noqa: E731
            args = tuple(emu._map(a, fn) for a in args)
            kwargs = {k: emu._map(v, fn) for k, v in kwargs.items()}
            return original(*args, **kwargs)

        wrapper.__wrapped__ = original
        wrapper.__name__ = getattr(original, "__name__", "wrapper")
        return wrapper

    # -- patching -------------------------------------------------------------------------------

    def __enter__(self):
        if callable(getattr(F, "scaled_dot_product_attention", None)):
            # before the autocast wrappers, which then cast its inputs first
            self._patch(F, "scaled_dot_product_attention", self._sdpa(F.scaled_dot_product_attention))
        if self.dtype is not None:
            for owner, name, policy in _targets():
                original = getattr(owner, name)
                self._saved.append((owner, name, owner.__dict__.get(name, _MISSING)))
                setattr(owner, name, self._wrap(original, policy))
            self._patch(torch, "is_autocast_enabled", self._is_autocast_enabled(torch.is_autocast_enabled))
            if hasattr(torch, "get_autocast_gpu_dtype"):
                self._patch(torch, "get_autocast_gpu_dtype", self._autocast_dtype(torch.get_autocast_gpu_dtype))
        if self.dtype is not None:
            self._patch(F, "cross_entropy", self._cross_entropy(F.cross_entropy))
        self._patch(F, "dropout", self._dropout(F.dropout))
        return self

    def __exit__(self, *exc):
        for owner, name, value in reversed(self._saved):
            if value is _MISSING:
                try:
                    delattr(owner, name)
                except AttributeError:
                    pass
            else:
                setattr(owner, name, value)
        self._saved.clear()
        return False

    def _patch(self, owner, name, value):
        self._saved.append((owner, name, owner.__dict__.get(name, _MISSING)))
        setattr(owner, name, value)

    def _is_autocast_enabled(self, original):
        emu = self

        def is_autocast_enabled(*args, **kwargs):
            device = args[0] if args else kwargs.get("device_type")
            if emu.autocast_on and device in (None, "cuda"):
                return True
            return original(*args, **kwargs)
        return is_autocast_enabled

    def _autocast_dtype(self, original):
        emu = self

        def get_autocast_gpu_dtype(*args, **kwargs):
            return emu.dtype if emu.autocast_on else original(*args, **kwargs)
        return get_autocast_gpu_dtype

    def _cross_entropy(self, original):
        """aten::cross_entropy_loss runs log_softmax in its input's dtype (it passes that dtype, so
        autocast leaves it alone), then nll_loss, which autocast runs in float32."""
        emu = self

        def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                          reduction="mean", label_smoothing=0.0):
            if (emu.autocast_on and _eligible(input) and input.dtype != torch.float32 and isinstance(target, torch.Tensor)
                    and not target.is_floating_point() and not label_smoothing and size_average is None
                    and reduce is None):
                logp = F.log_softmax(input, dim=1 if input.dim() >= 2 else 0, dtype=input.dtype)
                return F.nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
            return original(input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
        cross_entropy.__wrapped__ = original
        return cross_entropy

    @staticmethod
    def _sdpa(original):
        """F.scaled_dot_product_attention on CUDA runs a fused kernel (flash for 16-bit inputs without a
        mask, memory-efficient otherwise; cuDNN's, where PyTorch picks it, is written as flash too); on
        the CPU it often takes the math path (matmuls and a softmax). The fused ops are called directly:
        their shape functions run on fake CPU tensors."""
        def op(name):
            try:
                return getattr(torch.ops.aten, name)
            except Exception:
                return None
        flash, efficient = op("_scaled_dot_product_flash_attention"), op("_scaled_dot_product_efficient_attention")

        def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                         scale=None, **kwargs):
            extra = {"scale": scale} if scale is not None else {}
            try:
                fits = (not kwargs.get("enable_gqa") and query.dim() == 4 and key.shape[1] == query.shape[1]
                        and query.shape[-1] % 8 == 0 and query.shape[-1] <= 256 and query.dtype == key.dtype)
                if fits and flash is not None and attn_mask is None and query.dtype in (torch.float16, torch.bfloat16):
                    return flash(query, key, value, dropout_p, is_causal, **extra)[0]
                if fits and efficient is not None and (attn_mask is None or attn_mask.dtype == query.dtype):
                    return efficient(query, key, value, attn_mask, True, dropout_p, is_causal, **extra)[0]
            except Exception:
                pass
            return original(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                            **extra, **kwargs)
        scaled_dot_product_attention.__wrapped__ = original
        return scaled_dot_product_attention

    @staticmethod
    def _dropout(original):
        def dropout(input, p=0.5, training=True, inplace=False):
            if training and 0.0 < p < 1.0 and not inplace and isinstance(input, torch.Tensor) and input.numel() > 0:
                return torch.native_dropout(input, p, True)[0]  # CUDA's fused dropout kernel
            return original(input, p, training, inplace)
        dropout.__wrapped__ = original
        return dropout


_MISSING = object()


def _flat(obj):
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for x in obj for t in _flat(x)]
    if isinstance(obj, dict):
        return [t for x in obj.values() for t in _flat(x)]
    return []
