"""aten operator -> roofsim kernels (docs/ir-format.md).

One captured aten call becomes zero or more kernel dicts carrying `op`, `kind`, `dtype`, `unit`,
`flops`, `bytes_read`, `bytes_written` and a shape object (`gemm`, `conv`, `attention`). The
exporter adds `phase`, `layer`, `host_dispatch` and `source_op`.

Byte counts are the least DRAM traffic, each distinct input tensor read once and each output written
once (element count x element size; a broadcast operand counts its distinct elements), except where
include/roofsim/lower.hpp models the implementation's extra passes for the same op (batch norm
reads its input twice, nll_loss reads one logit per row, embedding gathers rows, pooling backward
does not read the forward input, the optimizer's multi-tensor launches): those rules are mirrored
here so that the per-op efficiencies measured against lower.hpp's kernels apply to exported ones.
"""

from __future__ import annotations

import math

import torch

from . import compat
from .precision import Precision, dtype_key, element_size


# ---------------------------------------------------------------------------------------------
# op tables (overload packet names; in-place variants map through their base name)

def stored_transposed(t) -> bool | None:
    """Whether a matrix operand (its last two dimensions) is a transposed view: its rows are not
    contiguous but its columns are (a weight's .t(), a gradient's .t()). None where neither is
    (PyTorch copies such an operand before the call) or the strides cannot be read."""
    try:
        if t is None or t.dim() < 2:
            return None
        rows, cols = int(t.shape[-2]), int(t.shape[-1])
        row_stride, col_stride = int(t.stride(-2)), int(t.stride(-1))
    except Exception:
        return None
    if col_stride == 1 or cols == 1:
        return False
    if row_stride == 1 or rows == 1:
        return True
    return None


def gemm_layout(a, b) -> str | None:
    """The GEMM's operand layout in row-major terms, "NN", "NT", "TN" or "TT": for A then B, N where
    the operand is stored as used, T where it is a transposed view (docs/ir-format.md). Hopper's
    TF32 tensor cores read only K-major operands, so the layout moves a TF32 GEMM's time."""
    ta, tb = stored_transposed(a), stored_transposed(b)
    if ta is None or tb is None:
        return None
    return ("T" if ta else "N") + ("T" if tb else "N")


GEMM_OPS = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot", "_addmm_activation",
            "linear", "matmul", "_scaled_mm", "_int_mm"}

CONV_OPS = {"convolution", "_convolution", "convolution_overrideable", "cudnn_convolution",
            "mkldnn_convolution", "miopen_convolution"}
CONV_BACKWARD_OPS = {"convolution_backward", "convolution_backward_overrideable"}

ATTENTION_OPS = {
    # name: (backend, backward, layout)  layout BHLD: [batch, heads, seq, dim]; BLHD: [batch, seq, heads, dim]
    "_scaled_dot_product_flash_attention": ("flash", False, "BHLD"),
    "_scaled_dot_product_flash_attention_backward": ("flash", True, "BHLD"),
    "_scaled_dot_product_efficient_attention": ("efficient", False, "BHLD"),
    "_scaled_dot_product_efficient_attention_backward": ("efficient", True, "BHLD"),
    "_scaled_dot_product_cudnn_attention": ("cudnn", False, "BHLD"),  # cuDNN's fused attention
    "_scaled_dot_product_cudnn_attention_backward": ("cudnn", True, "BHLD"),
    "_scaled_dot_product_fused_attention_overrideable": ("flash", False, "BHLD"),
    "_scaled_dot_product_fused_attention_overrideable_backward": ("flash", True, "BHLD"),
    "_scaled_dot_product_flash_attention_for_cpu": ("cpu", False, "BHLD"),
    "_scaled_dot_product_flash_attention_for_cpu_backward": ("cpu", True, "BHLD"),
    "_flash_attention_forward": ("flash", False, "BLHD"),
    "_flash_attention_backward": ("flash", True, "BLHD"),
    "_efficient_attention_forward": ("efficient", False, "BLHD"),
    "_efficient_attention_backward": ("efficient", True, "BLHD"),
}

BATCH_NORM_OPS = {"native_batch_norm", "cudnn_batch_norm", "miopen_batch_norm", "_native_batch_norm_legit",
                  "_native_batch_norm_legit_no_training", "_native_batch_norm_legit_functional",
                  "_batch_norm_with_update", "_batch_norm_with_update_functional", "_batch_norm_no_update"}
BATCH_NORM_EVAL_OPS = {"_native_batch_norm_legit_no_training", "_batch_norm_no_update"}  # no `training` argument
BATCH_NORM_BACKWARD_OPS = {"native_batch_norm_backward", "cudnn_batch_norm_backward",
                           "miopen_batch_norm_backward", "batch_norm_backward"}
NORM_OPS = {"native_layer_norm", "_fused_rms_norm", "rms_norm"}
NORM_BACKWARD_OPS = {"native_layer_norm_backward", "_fused_rms_norm_backward"}

SOFTMAX_OPS = {"_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data",
               "_safe_softmax", "_masked_softmax", "_masked_softmax_backward"}

# one elementwise pass over the operands
ELEMENTWISE_OPS = {
    "add", "sub", "rsub", "mul", "div", "neg", "abs", "sign", "sgn", "reciprocal", "square",
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "pow", "float_power",
    "sin", "cos", "tan", "sinh", "cosh", "asin", "acos", "atan", "atan2", "erf", "erfc",
    "floor", "ceil", "round", "trunc", "frac", "fmod", "remainder", "hypot", "lerp", "addcmul", "addcdiv",
    "maximum", "minimum", "fmax", "fmin", "clamp", "clamp_min", "clamp_max", "clip", "where",
    "masked_fill", "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or",
    "logical_xor", "bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor", "isnan", "isinf",
    "isfinite", "nan_to_num", "tril", "triu",
    "relu", "threshold", "threshold_backward", "gelu", "gelu_backward", "silu", "silu_backward",
    "sigmoid", "sigmoid_backward", "tanh", "tanh_backward", "hardtanh", "hardtanh_backward",
    "leaky_relu", "leaky_relu_backward", "elu", "elu_backward", "hardswish", "hardswish_backward",
    "hardsigmoid", "hardsigmoid_backward", "mish", "mish_backward", "softplus", "softplus_backward",
    "glu", "glu_backward", "logit", "prelu", "_prelu_kernel", "_prelu_kernel_backward", "relu6",
    "native_dropout", "native_dropout_backward", "bernoulli", "uniform", "normal", "random",
    "exponential", "fill", "zero", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "new_zeros", "new_ones", "new_full", "scalar_tensor", "arange", "linspace", "rand", "randn",
    "rand_like", "randn_like", "randint", "randint_like", "_amp_update_scale", "masked_scatter",
    "max_pool2d_with_indices", "avg_pool2d", "max_pool1d", "max_pool3d_with_indices", "avg_pool3d",
    "adaptive_max_pool2d", "upsample_nearest2d", "upsample_bilinear2d", "upsample_nearest2d_backward",
    "upsample_bilinear2d_backward",
}

# pooling backward ops read grad_output (and indices), never the forward input they take for its shape
POOL_BACKWARD_OPS = {"max_pool2d_with_indices_backward", "avg_pool2d_backward", "_adaptive_avg_pool2d_backward",
                     "max_pool3d_with_indices_backward", "avg_pool3d_backward", "adaptive_max_pool2d_backward",
                     "_adaptive_avg_pool3d_backward"}

REDUCTION_OPS = {"sum", "mean", "amax", "amin", "max", "min", "prod", "norm", "linalg_vector_norm", "var", "std",
                 "var_mean", "std_mean", "logsumexp", "argmax", "argmin", "all", "any", "count_nonzero",
                 "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
                 "binary_cross_entropy_with_logits", "_adaptive_avg_pool2d", "_adaptive_avg_pool3d",
                 "mse_loss_backward", "l1_loss_backward", "binary_cross_entropy_backward", "native_norm",
                 "sum_to_size", "aminmax", "_foreach_norm_scalar"}

# inclusive scans: one read and one write pass over the tensor (CUB's decoupled look-back scan is
# bandwidth-bound); cumsum's backward is a flipped cumsum
SCAN_OPS = {"cumsum", "cumsum_", "cumprod", "logcumsumexp"}

COPY_OPS = {"clone", "cat", "stack", "slice_backward", "select_backward", "slice_scatter", "select_scatter",
            "as_strided_scatter", "diagonal_backward", "unfold_backward", "repeat", "constant_pad_nd",
            "flip", "roll", "index_copy", "narrow_copy", "expand_copy", "permute_copy", "transpose_copy",
            "view_copy", "_reshape_copy", "alias_copy", "im2col", "col2im", "pixel_shuffle", "pixel_unshuffle",
            "reflection_pad2d", "replication_pad2d", "reflection_pad2d_backward", "replication_pad2d_backward",
            "contiguous", "_unsafe_index", "split_with_sizes_copy", "unbind_copy", "split_copy"}

def embedding_sort_kernels(lookups: int, row_elements: int, index_item: int, grad_item: int) -> list:
    """(kind, bytes read, bytes written) of each kernel aten::embedding_dense_backward runs after
    zero-filling dW when it has more than 3072 indices: cub's radix sort of the (index, position)
    pairs, one pass per index byte, the segments of equal indices, their row sums (PyTorch's
    Embedding.cu and EmbeddingBackwardKernel.cu; launches as in an H200 trace). The same list as
    roofsim's lowering (detail::embedding_sort_kernels in include/roofsim/lower.hpp)."""
    pairs = lookups * (index_item + 8)
    return ([("elementwise", 0, 0)] * 10                                   # memsets of cub's temporary storage
            + [("elementwise", 0, lookups * 8),                             # positions: arange
               ("copy", lookups * index_item, 0), ("copy", 0, 0)]          # radix sort: histogram, its exclusive sum
            + [("copy", pairs, pairs)] * index_item                        # a pass per key byte
            + [("copy", 0, 0), ("copy", lookups * index_item, lookups * (index_item + 8)),  # unique-by-key
               ("copy", 0, 0), ("copy", lookups * 8, lookups * 8),         # scan of the segment offsets
               ("copy", lookups * 8, 8), ("copy", lookups * 8, lookups * 8), ("copy", lookups * 8, lookups * 8),
               ("embedding", row_elements * grad_item + lookups * 8, row_elements * 4),  # compute_grad_weight
               ("embedding", row_elements * 4, row_elements * grad_item)])             # sum_and_scatter into dW


GATHER_OPS = {"index_select", "gather", "index", "take", "take_along_dim", "masked_select"}
SCATTER_OPS = {"scatter", "scatter_add", "scatter_reduce", "index_add", "index_put", "_index_put_impl",
               "index_reduce", "put", "index_fill"}

# no GPU work: views (a new tensor over the same storage) ...
VIEW_OPS = {
    "view", "_unsafe_view", "_reshape_alias", "reshape", "view_as", "t", "transpose", "permute", "expand",
    "expand_as", "unsqueeze", "squeeze", "slice", "select", "as_strided", "detach", "alias", "split",
    "split_with_sizes", "chunk", "unbind", "narrow", "diagonal", "view_as_real", "view_as_complex", "unfold",
    "movedim", "moveaxis", "swapaxes", "swapdims", "numpy_T", "real", "imag", "_conj", "_neg_view", "conj",
    "resolve_conj", "resolve_neg", "_indices", "_values", "indices", "values", "flatten", "unflatten",
}
# ... and allocation, host-side scalars and bookkeeping
HOST_ONLY_OPS = VIEW_OPS | {
    "lift", "lift_fresh", "lift_fresh_copy", "empty", "empty_like", "empty_strided", "new_empty",
    "new_empty_strided", "empty_permuted", "resize", "resize_as", "set", "_local_scalar_dense", "item",
    "is_nonzero", "_fused_sdp_choice", "record_stream", "_version", "_has_compatible_shallow_copy_type",
    "_nested_tensor_size", "_make_dep_token", "_assert_async", "_functional_assert_async",
    "_assert_tensor_metadata", "sym_constrain_range", "sym_constrain_range_for_size", "_print",
}
# metadata queries: not operator dispatches in an eager step, never written
SKIPPED_OPS = {"size", "stride", "numel", "dim", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset",
               "is_same_size", "is_contiguous", "storage_offset", "is_strides_like_format",
               "is_non_overlapping_and_dense", "_nested_get_values"}

FUSED_OPTIMIZER_PREFIXES = ("_fused_sgd", "_fused_adam", "_fused_adagrad")

# in-place ops that overwrite their first argument without reading it
WRITE_ONLY_INPLACE = {"fill", "zero", "uniform", "normal", "random", "exponential", "bernoulli", "geometric",
                      "cauchy", "log_normal"}


def base_name(name: str) -> str:
    """add_ -> add; leaves _foreach_* and other leading-underscore names intact except their trailing '_'."""
    if name.endswith("_") and not name.endswith("__"):
        return name[:-1]
    return name


# ---------------------------------------------------------------------------------------------
# tensors

def flat_tensors(obj, out=None):
    if out is None:
        out = []
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            flat_tensors(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            flat_tensors(x, out)
    return out


def addressed_elements(t: torch.Tensor) -> int:
    """Distinct elements a tensor addresses: a broadcast (stride 0) dimension counts once."""
    try:
        n = 1
        for size, stride in zip(t.shape, t.stride()):
            if size == 0:
                return 0
            if stride != 0:
                n *= int(size)
        return n
    except Exception:
        return int(t.numel())


def tensor_bytes(t: torch.Tensor) -> int:
    return addressed_elements(t) * element_size(t.dtype)


def out_bytes(t: torch.Tensor) -> int:
    return int(t.numel()) * element_size(t.dtype)


def identity(t: torch.Tensor):
    try:
        st = compat.storage_key(compat.storage_of(t))
    except Exception:
        st = id(t)
    try:
        return (st, int(t.storage_offset()), tuple(t.shape), tuple(t.stride()), t.dtype)
    except Exception:
        return (st, id(t))


def distinct(tensors):
    seen, out = set(), []
    for t in tensors:
        key = identity(t)
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out


def per_channel(x) -> dict:
    """The "norm" shape of a batch norm over x (N, C, ...): C groups of N*H*W elements."""
    if not isinstance(x, torch.Tensor) or x.dim() < 2 or x.shape[1] <= 0 or x.numel() == 0:
        return {}
    return {"norm": {"groups": int(x.shape[1]), "group_elements": int(x.numel() // x.shape[1])}}


def per_row(x, normalized_shape) -> dict:
    """The "norm" shape of a layer or RMS norm: one group per row of the normalized trailing dims."""
    if not isinstance(x, torch.Tensor) or x.numel() == 0 or normalized_shape is None:
        return {}
    row = 1
    for d in normalized_shape:
        row *= int(d)
    if row <= 0 or x.numel() % row:
        return {}
    return {"norm": {"groups": int(x.numel() // row), "group_elements": row}}


def per_column(x, out, dims) -> dict:
    """The reduction shape of a sum over the leading dims of x (those of size 1 may be left), keeping
    its last (a bias gradient: dY [..., C] -> [C]): C groups of the leading elements, as "norm"
    (docs/ir-format.md)."""
    if not isinstance(x, torch.Tensor) or not isinstance(out, torch.Tensor) or x.dim() < 2 or out.numel() == 0:
        return {}
    if not isinstance(dims, (list, tuple)) or not dims:
        return {}
    try:
        reduced = sorted({int(d) % x.dim() for d in dims})
    except (TypeError, ValueError):
        return {}
    last = x.dim() - 1
    if last in reduced or any(i not in reduced and x.shape[i] != 1 for i in range(last)) or out.numel() != x.shape[-1]:
        return {}
    return {"norm": {"groups": int(out.numel()), "group_elements": int(x.numel() // out.numel())}}


# Ops whose CUDA kernels make these inputs contiguous first (a copy of their own, dispatched from
# inside the op, which a dispatch mode does not see): layer norm's forward (its input) and backward
# (the output's gradient and the input), ATen's layer_norm_cuda and layer_norm_backward_cuda. A
# transposed residual stream (torchvision's ViT: nn.MultiheadAttention batch-first hands back a
# transposed view) makes every layer norm copy its input: 25 float32 strided copies in ViT-B/16's
# forward on the H200 (a torch.profiler trace of ViT-B/16 b128 amp-bf16, 2026-11-30; in git history).
CONTIGUOUS_INPUTS = {"native_layer_norm": (0,), "native_layer_norm_backward": (0, 1)}


def hidden_copies(name: str, args) -> list:
    """The kernels of the contiguous copies `name` makes of its strided inputs (CONTIGUOUS_INPUTS):
    one aten::clone each, reading the input's addressed bytes, writing it dense, dispatched on its
    own (host_dispatch: no layer figure holds it)."""
    copies = []
    for i in CONTIGUOUS_INPUTS.get(name, ()):
        t = args[i] if i < len(args) else None
        if not isinstance(t, torch.Tensor) or t.numel() <= 1:
            continue
        try:
            dense = t.is_contiguous()
        except Exception:  # a tensor whose strides cannot be read: assume the common case
            dense = True
        if not dense:
            copies.append({"op": "aten::clone", "kind": "copy", "dtype": dtype_key(t.dtype),
                           "bytes_read": _number(tensor_bytes(t)), "bytes_written": _number(out_bytes(t)),
                           "host_dispatch": True})
    return copies


def mixed_dtypes(tensors) -> bool:
    """Whether an elementwise op's tensor operands (those of more than one element: not scalars)
    hold floating dtypes of more than one kind (a bfloat16 activation plus a float32 residual under
    autocast): PyTorch's TensorIterator then runs its casting loop (LoadWithCast), not its vectorized
    one, at about 60 % of the speed on an H200 (docs/ir-format.md, `mixed_dtypes`)."""
    kinds = {t.dtype for t in tensors if t.is_floating_point() and t.numel() > 1}
    return len(kinds) > 1


def _dense(t: torch.Tensor) -> bool:
    """Whether a tensor's elements fill its memory without gaps or overlaps, in some order of its
    dimensions (a contiguous tensor, or a transposed view of one)."""
    dims = sorted(((int(st), int(sz)) for st, sz in zip(t.stride(), t.shape) if sz != 1), reverse=True)
    expected = 1
    for stride, size in reversed(dims):
        if stride != expected:
            return False
        expected *= size
    return True


def strided_operands(name: str, inputs, written) -> bool:
    """Whether an elementwise op runs PyTorch's strided loop: TensorIterator's vectorized loop needs
    its operands (of more than one element) dense and laid out alike, whatever their order of
    dimensions (a unary op on a transposed tensor writes a transposed output and stays vectorized);
    an operand that broadcasts (fewer elements than the output: a bias added apart), one laid out
    otherwise than the others (a transposed tensor added to a contiguous one) or one with gaps makes
    it compute each element's offsets (elementwise_kernel with an offset calculator), at about the
    speed of a transposing copy on an H200 (a bfloat16 bias add on a transposed 197 x 128 x 2304
    tensor 1.5 TB/s, the probe's bfloat16 transposed copy 1.4 TB/s; docs/ir-format.md, `strided`).
    Pooling and resampling read windows, not broadcasts: never."""
    if "pool" in name or "upsample" in name or not written:
        return False
    operands = [t for t in list(inputs) + list(written) if t.numel() > 1]
    if not operands:
        return False
    elements = max(int(t.numel()) for t in written)
    layouts = set()
    for t in operands:
        if t.numel() < elements:
            return True
        try:
            if not _dense(t):
                return True
            layouts.add(tuple(int(s) for s, n in zip(t.stride(), t.shape) if n != 1))
        except Exception:  # a tensor whose strides cannot be read: assume the common case
            continue
    return len(layouts) > 1


def sum_bytes(tensors, fn=tensor_bytes) -> int:
    return sum(fn(t) for t in distinct(tensors))


def describe_tensor(t: torch.Tensor) -> str:
    return f"{dtype_key(t.dtype)}[{', '.join(str(int(s)) for s in t.shape)}]"


def describe_args(args, kwargs, limit: int = 400) -> str:
    def one(a):
        if isinstance(a, torch.Tensor):
            return describe_tensor(a)
        if isinstance(a, (list, tuple)):
            ts = [x for x in a if isinstance(x, torch.Tensor)]
            if ts and len(a) > 4:
                elements = sum(int(x.numel()) for x in ts)
                return f"Tensor[{len(a)}] ({elements} elements, {dtype_key(ts[0].dtype)})"
            inner = ", ".join(one(x) for x in a)
            return f"[{inner}]"
        if isinstance(a, torch.dtype):
            return dtype_key(a)
        if isinstance(a, float):
            return f"{a:g}"
        return repr(a) if a is None or isinstance(a, (bool, str)) else str(a)

    parts = [one(a) for a in args] + [f"{k}={one(v)}" for k, v in kwargs.items()]
    text = ", ".join(parts)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def main_dtype(inputs, outputs) -> torch.dtype:
    for t in inputs:
        if t.is_floating_point():
            return t.dtype
    if inputs:
        return inputs[0].dtype
    if outputs:
        return outputs[0].dtype
    return torch.float32


def as_int_list(v, n: int):
    if isinstance(v, int):
        return [v] * n
    v = [int(x) for x in v]
    if len(v) == 1 and n > 1:
        v = v * n
    return v


# ---------------------------------------------------------------------------------------------
# the mapping

class Mapper:
    """Turns one captured aten call into kernel dicts for one precision mode."""

    def __init__(self, precision: Precision, emulated: bool):
        self.precision = precision
        self.emulated = emulated  # fake CPU tensors standing in for CUDA

    # -- helpers --------------------------------------------------------------------------------

    def kernel(self, name, kind, dtype, read, written, flops=0, unit=None, **extra):
        k = {"op": "aten::" + name, "kind": kind, "dtype": dtype_key(dtype)}
        if unit and unit != "fp32":
            k["unit"] = unit
        if flops:
            k["flops"] = _number(flops)
        k["bytes_read"] = _number(read)
        k["bytes_written"] = _number(written)
        k.update(extra)
        return k

    # -- entry point ----------------------------------------------------------------------------

    def map(self, name: str, func, args, kwargs, out, host: bool):
        """Kernels of one aten call. `name` is the overload packet name ("addmm", "add_").

        Returns (kernels, is_view, graph_op_hint); kernels is empty for skipped metadata queries."""
        base = base_name(name)
        if name in SKIPPED_OPS:
            return [], True, None
        inputs = flat_tensors(args) + flat_tensors(kwargs)
        outputs = flat_tensors(out)
        mutated = flat_tensors(compat.mutated_args(func, args, kwargs))
        na = compat.named_args(func, args, kwargs)
        out_arg = flat_tensors(compat.out_args(func, args, kwargs))
        if out_arg:
            out_ids = {identity(t) for t in out_arg}
            inputs = [t for t in inputs if identity(t) not in out_ids]
        dtype = main_dtype(inputs, outputs)

        is_view = (name in VIEW_OPS or base in VIEW_OPS or compat.schema_returns_alias(func)
                   or compat.is_inplace_view(func)) and not name.startswith("_foreach")
        if is_view or name in HOST_ONLY_OPS or base in HOST_ONLY_OPS:
            return [self.kernel(name, "host-only", dtype, 0, 0)], is_view, None
        if host:
            # every operand lives in host memory (CPU scalars such as optimizer step counters): no kernel
            return [self.kernel(name, "host-only", dtype, 0, 0)], False, None

        written = distinct(outputs + mutated)
        reads = inputs
        if name.endswith("_") and base in WRITE_ONLY_INPLACE and args and isinstance(args[0], torch.Tensor):
            first = identity(args[0])  # overwritten, not read
            reads = [t for t in inputs if identity(t) != first]

        if name.startswith("_foreach") or name.startswith(FUSED_OPTIMIZER_PREFIXES) or \
                name == "_amp_foreach_non_finite_check_and_unscale_":
            return self.multi_tensor(name, na, args, inputs, outputs, mutated), False, None
        if base in GEMM_OPS:
            return self.gemm(name, base, na, inputs, outputs, dtype), False, None
        if base in CONV_OPS:
            ks, hint = self.conv(name, na, inputs, outputs)
            return ks, False, hint
        if base in CONV_BACKWARD_OPS:
            ks, hint = self.conv_backward(name, na, positional(out))
            return ks, False, hint
        if base in ATTENTION_OPS:
            return self.attention(name, base, na, inputs, outputs), False, None
        if base in BATCH_NORM_OPS:
            x = na.get("input")
            if not na.get("training", base not in BATCH_NORM_EVAL_OPS):
                # eval (running statistics): one normalizing pass, the running statistics only read
                return [self.kernel(name, "normalization", dtype, sum_bytes(inputs), sum_bytes(outputs, out_bytes),
                                    **per_channel(x))], False, None
            read = sum_bytes(inputs) + (tensor_bytes(x) if x is not None else 0)  # statistics pass + normalize
            return [self.kernel(name, "normalization", dtype, read, sum_bytes(written, out_bytes),
                                **per_channel(x))], False, None
        if base in BATCH_NORM_BACKWARD_OPS:
            x, dy = na.get("input"), na.get("grad_out", na.get("grad_output"))
            read = sum_bytes(inputs) + sum(tensor_bytes(t) for t in (x, dy) if t is not None)  # two passes
            return [self.kernel(name, "normalization", dtype, read, sum_bytes(written, out_bytes),
                                **per_channel(x))], False, None
        if base == "native_group_norm":
            x = na.get("input")
            stats = [t for t in outputs[1:]]
            return [self.kernel(name, "reduction", dtype, tensor_bytes(x), sum_bytes(stats, out_bytes)),
                    self.kernel(name, "normalization", dtype, sum_bytes(inputs) + sum_bytes(stats, out_bytes),
                                out_bytes(outputs[0]))], False, None
        if base == "native_group_norm_backward":
            dx, *rest = positional(out)
            rest = [t for t in rest if _defined(t)]
            ks = [self.kernel(name, "reduction", dtype, sum_bytes(inputs), sum_bytes(rest, out_bytes))]
            if dx is not None and _defined(dx):
                ks.append(self.kernel(name, "normalization", dtype, sum_bytes(inputs), out_bytes(dx)))
            return ks, False, None
        if base in NORM_OPS:
            return [self.kernel(name, "normalization", dtype, sum_bytes(inputs), sum_bytes(written, out_bytes),
                                **per_row(na.get("input"), na.get("normalized_shape")))], False, None
        if base in NORM_BACKWARD_OPS:
            return self.norm_backward(name, na, inputs, positional(out), dtype), False, None
        if base in SOFTMAX_OPS:
            return [self.kernel(name, "softmax", dtype, sum_bytes(reads), sum_bytes(written, out_bytes))], False, None
        if base in ("nll_loss_forward", "nll_loss2d_forward"):
            x = na.get("self")
            rows = int(x.numel() // x.shape[1]) if x is not None and x.dim() >= 2 else 1
            read = rows * element_size(x.dtype) + sum_bytes([t for t in inputs if t is not x])
            return [self.kernel(name, "reduction", dtype, read, sum_bytes(written, out_bytes))], False, None
        if base in ("nll_loss_backward", "nll_loss2d_backward"):
            x = na.get("self")
            rows = int(x.numel() // x.shape[1]) if x.dim() >= 2 else 1
            item = element_size(x.dtype)
            small = sum_bytes([t for t in inputs if t is not x])
            return [self.kernel(name, "elementwise", dtype, 0, out_bytes(outputs[0])),    # zero-fill dX
                    self.kernel(name, "elementwise", dtype, small, rows * item)], False, None  # scatter -1/N
        if base == "embedding":
            weight, idx = na.get("weight"), na.get("indices")
            row = int(weight.shape[-1]) * element_size(weight.dtype)
            read = int(idx.numel()) * row + tensor_bytes(idx)
            return [self.kernel(name, "embedding", weight.dtype, read, sum_bytes(written, out_bytes))], False, None
        if base == "embedding_dense_backward":
            dy, idx = na.get("grad_output"), na.get("indices")
            num_weights = int(na.get("num_weights"))
            dim = int(dy.shape[-1])
            item = element_size(dy.dtype)
            lookups = int(idx.numel())
            iitem = element_size(idx.dtype)
            fill = self.kernel(name, "elementwise", dy.dtype, 0, num_weights * dim * item)   # zero-fill dW
            if lookups <= 3072 and not na.get("scale_grad_by_freq"):
                # PyTorch's Embedding.cu: up to 3072 indices, one kernel accumulates the rows atomically
                return [fill, self.kernel(name, "embedding", dy.dtype, lookups * dim * item + lookups * iitem,
                                          lookups * dim * item)], False, None
            return [fill] + [self.kernel(name, kind, dy.dtype if kind == "embedding" else idx.dtype, read, written)
                             for kind, read, written in embedding_sort_kernels(lookups, lookups * dim, iitem, item)], \
                False, None
        if base in GATHER_OPS:
            index = [t for t in inputs if not t.is_floating_point() and t.dtype != torch.bool and t is not args[0]]
            read = sum(out_bytes(t) for t in outputs) + sum_bytes(index)
            return [self.kernel(name, "embedding", dtype, read, sum_bytes(written, out_bytes))], False, None
        if base in SCATTER_OPS:
            return [self.kernel(name, "embedding", dtype, sum_bytes(reads), sum_bytes(written, out_bytes))], \
                False, None
        if base in POOL_BACKWARD_OPS:
            skip = {identity(t) for t in (na.get("self"), na.get("input")) if isinstance(t, torch.Tensor)}
            read = sum_bytes([t for t in inputs if identity(t) not in skip])
            return [self.kernel(name, "elementwise", dtype, read, sum_bytes(written, out_bytes))], False, None
        if base in ("_to_copy", "copy"):
            src = na.get("self") if base == "_to_copy" else na.get("src")
            dst = outputs[0] if base == "_to_copy" and outputs else na.get("self")
            kind = "copy"
            if src is not None and dst is not None and src.dtype != dst.dtype:
                kind = "elementwise"  # a cast (as lower.hpp writes autocast's casts)
            src_dtype = src.dtype if src is not None else dtype
            read = tensor_bytes(src) if src is not None else sum_bytes(reads)
            return [self.kernel(name, kind, src_dtype, read, sum_bytes(written, out_bytes))], False, None
        if base in COPY_OPS:
            return [self.kernel(name, "copy", dtype, sum_bytes(reads), sum_bytes(written, out_bytes))], False, None
        if base in REDUCTION_OPS:
            shape = per_column(inputs[0], outputs[0], na.get("dim")) if base == "sum" and inputs and outputs else {}
            return [self.kernel(name, "reduction", dtype, sum_bytes(reads), sum_bytes(written, out_bytes), **shape)], \
                False, None
        if base in ELEMENTWISE_OPS or base in SCAN_OPS:
            extra = {"mixed_dtypes": True} if base in ELEMENTWISE_OPS and mixed_dtypes(inputs + written) else {}
            if base in ELEMENTWISE_OPS and strided_operands(base, reads, written):
                extra["strided"] = True
            return [self.kernel(name, "elementwise", dtype, sum_bytes(reads), sum_bytes(written, out_bytes),
                                **extra)], False, None
        if not inputs and not outputs and not mutated:
            return [self.kernel(name, "host-only", dtype, 0, 0)], False, None
        shapes = ", ".join(describe_tensor(t) for t in inputs[:6]) + (", ..." if len(inputs) > 6 else "")
        k = self.kernel(name, "unknown", dtype, sum_bytes(reads), sum_bytes(written, out_bytes),
                        flag=f"no cost model for aten::{name} ({shapes})")
        return [k], False, None

    # -- GEMM -----------------------------------------------------------------------------------

    def gemm(self, name, base, na, inputs, outputs, dtype):
        def pick(*names):
            for n in names:
                v = na.get(n)
                if isinstance(v, torch.Tensor):
                    return v
            return None

        a = pick("mat1", "batch1", "mat", "input", "self")
        b = pick("mat2", "batch2", "vec", "weight", "tensor", "other")
        if base in ("mm", "bmm", "dot", "vdot", "matmul", "mv", "_scaled_mm", "_int_mm"):
            a, b = pick("self"), pick("mat2", "vec", "tensor", "other")
        m = n = k = batch = 1
        try:
            if base in ("bmm", "baddbmm"):
                batch, m, k = (int(s) for s in a.shape)
                n = int(b.shape[2])
            elif base == "addbmm":
                batch, m, k = (int(s) for s in a.shape)
                n = int(b.shape[2])
            elif base in ("mv", "addmv"):
                m, k = int(a.shape[0]), int(a.shape[1])
            elif base in ("dot", "vdot"):
                k = int(a.shape[0])
            elif base == "linear":
                k = int(a.shape[-1])
                m = int(a.numel() // max(k, 1))
                n = int(b.shape[0])
            elif base == "matmul":
                m, k = int(a.shape[-2]) if a.dim() > 1 else 1, int(a.shape[-1])
                n = int(b.shape[-1]) if b.dim() > 1 else 1
                batch = max(int(a.numel() // max(m * k, 1)), int(b.numel() // max(k * n, 1)))
            else:  # mm, addmm, _addmm_activation, _scaled_mm, _int_mm
                m, k = int(a.shape[0]), int(a.shape[1])
                n = int(b.shape[1])
        except Exception:
            return [self.kernel(name, "gemm", dtype, sum_bytes(inputs), sum_bytes(outputs, out_bytes))]
        op_dtype = a.dtype if a is not None else dtype
        unit = self.precision.gemm_unit(op_dtype)
        flops = 2 * m * n * k * batch
        shape = {"gemm": {"m": m, "n": n, "k": k, "batch": batch}} if min(m, n, k, batch) > 0 else {}
        if shape and base in ("mm", "addmm", "_addmm_activation", "bmm", "baddbmm", "addbmm"):
            layout = gemm_layout(a, b)
            if layout:
                shape["gemm"]["layout"] = layout
        return [self.kernel(name, "gemm", op_dtype, sum_bytes(inputs), sum_bytes(outputs, out_bytes), flops, unit,
                            **shape)]

    # -- convolution ----------------------------------------------------------------------------

    def conv_dims(self, x, w, na):
        """The conv object (docs/ir-format.md) of a 1-D or 2-D convolution, or None (3-D, transposed)."""
        if bool(na.get("transposed", False)):
            return None
        rank = x.dim() - 2
        if rank not in (1, 2):
            return None
        stride = as_int_list(na.get("stride", 1), rank)
        padding = as_int_list(na.get("padding", 0), rank)
        dilation = as_int_list(na.get("dilation", 1), rank)
        groups = int(na.get("groups", 1) or 1)
        if rank == 1:
            d = {"n": int(x.shape[0]), "c": int(x.shape[1]), "h": 1, "w": int(x.shape[2]), "k": int(w.shape[0]),
                 "r": 1, "s": int(w.shape[2]), "stride": [1, stride[0]], "padding": [0, padding[0]],
                 "dilation": [1, dilation[0]], "groups": groups}
        else:
            d = {"n": int(x.shape[0]), "c": int(x.shape[1]), "h": int(x.shape[2]), "w": int(x.shape[3]),
                 "k": int(w.shape[0]), "r": int(w.shape[2]), "s": int(w.shape[3]), "stride": stride,
                 "padding": padding, "dilation": dilation, "groups": groups}
        sizes_ok = min(d[key] for key in ("n", "c", "h", "w", "k", "r", "s", "groups")) > 0
        if not sizes_ok or d["c"] % groups or d["k"] % groups or min(d["stride"] + d["dilation"]) < 1 \
                or min(d["padding"]) < 0 or self.out_size(d) <= 0:
            return None
        return d

    @staticmethod
    def out_size(d) -> int:
        p = (d["h"] + 2 * d["padding"][0] - d["dilation"][0] * (d["r"] - 1) - 1) // d["stride"][0] + 1
        q = (d["w"] + 2 * d["padding"][1] - d["dilation"][1] * (d["s"] - 1) - 1) // d["stride"][1] + 1
        return min(p, q)

    @staticmethod
    def conv_flops(d) -> int:
        p = (d["h"] + 2 * d["padding"][0] - d["dilation"][0] * (d["r"] - 1) - 1) // d["stride"][0] + 1
        q = (d["w"] + 2 * d["padding"][1] - d["dilation"][1] * (d["s"] - 1) - 1) // d["stride"][1] + 1
        return 2 * d["n"] * d["k"] * p * q * (d["c"] // d["groups"]) * d["r"] * d["s"]

    @staticmethod
    def generic_conv_flops(x, w, y, transposed: bool) -> int:
        """2 x (MACs) of any convolution: output elements x (input channels / groups) x kernel volume."""
        kernel_volume = int(w[0].numel()) if w.dim() > 1 else 1  # (C/groups) x kernel (forward)
        if transposed:  # weight [C_in, C_out/groups, ...]: every input element meets C_out/groups x kernel
            return 2 * int(x.numel()) * kernel_volume
        return 2 * int(y.numel()) * kernel_volume

    def conv(self, name, na, inputs, outputs):
        x = na.get("input", na.get("self"))
        w = na.get("weight")
        y = outputs[0]
        d = self.conv_dims(x, w, na)
        unit = self.precision.conv_unit(x.dtype)
        hint = "conv1d" if x.dim() == 3 else "conv2d"
        if d is None:
            flops = self.generic_conv_flops(x, w, y, bool(na.get("transposed", False)))
            return [self.kernel(name, "conv", x.dtype, sum_bytes(inputs), out_bytes(y), flops, unit)], hint
        d = {"pass": "forward", **d}
        return [self.kernel(name, "conv", x.dtype, sum_bytes(inputs), out_bytes(y), self.conv_flops(d), unit,
                            conv=d)], hint

    def conv_backward(self, name, na, outputs):
        dy, x, w = na.get("grad_output"), na.get("input"), na.get("weight")
        mask = list(na.get("output_mask", [True, True, True]))
        d = self.conv_dims(x, w, na)
        unit = self.precision.conv_unit(dy.dtype)
        hint = "conv1d" if x.dim() == 3 else "conv2d"
        transposed = bool(na.get("transposed", False))
        flops = self.conv_flops(d) if d else self.generic_conv_flops(x, w, dy, transposed)
        ks = []
        grads = list(outputs) + [None] * 3

        def shape_obj(p):
            return {"conv": {"pass": p, **d}} if d else {}

        if mask[0] and _defined(grads[0]):
            ks.append(self.kernel(name, "conv", dy.dtype, tensor_bytes(dy) + tensor_bytes(w), out_bytes(grads[0]),
                                  flops, unit, **shape_obj("backward-data")))
        if len(mask) > 1 and mask[1] and _defined(grads[1]):
            ks.append(self.kernel(name, "conv", dy.dtype, tensor_bytes(dy) + tensor_bytes(x), out_bytes(grads[1]),
                                  flops, unit, **shape_obj("backward-filter")))
        if len(mask) > 2 and mask[2] and _defined(grads[2]):
            ks.append(self.kernel(name, "reduction", dy.dtype, tensor_bytes(dy), out_bytes(grads[2])))
        return ks, hint

    # -- attention ------------------------------------------------------------------------------

    def attention(self, name, base, na, inputs, outputs):
        backend, backward, layout = ATTENTION_OPS[base]
        q, k = na.get("query"), na.get("key")
        if layout == "BHLD":
            batch, heads, seq_q, head_dim = (int(s) for s in q.shape[-4:]) if q.dim() >= 4 else \
                (1, int(q.shape[0]), int(q.shape[1]), int(q.shape[2]))
            seq_kv = int(k.shape[-2])
        else:
            batch, seq_q, heads, head_dim = (int(s) for s in q.shape[-4:])
            seq_kv = int(k.shape[-3])
        causal = bool(na.get("is_causal", False)) or bool(na.get("custom_mask_type", 0))
        if backend == "cpu":  # emulated CUDA: flash needs 16-bit inputs, fp32 takes memory-efficient
            backend = "flash" if q.dtype in (torch.float16, torch.bfloat16) else "efficient"
        dims = {"batch": batch, "heads": heads, "seq_q": seq_q, "seq_kv": seq_kv, "head_dim": head_dim,
                "causal": causal, "backend": backend}
        dropout = float(na.get("dropout_p", 0.0) or 0.0)  # the kernels draw random numbers when > 0
        if dropout > 0:
            dims["dropout_p"] = dropout
        shaped = min(batch, heads, seq_q, seq_kv, head_dim) > 0
        flops = 4 * batch * heads * seq_q * seq_kv * head_dim
        if backward:
            flops = flops * 5 // 2
        if causal:
            flops //= 2
        unit = self.precision.gemm_unit(q.dtype)
        if not backward:
            return [self.kernel(name, "attention", q.dtype, sum_bytes(inputs), sum_bytes(outputs, out_bytes), flops,
                                unit, **({"attention": dims} if shaped else {}))]
        dout = na.get("grad_out", na.get("grad_out_"))
        o = na.get("out")
        pre = [t for t in (dout, o) if isinstance(t, torch.Tensor)]
        dims = dict(dims, backward=True)
        # rowsum(dO * O) preprocessing, then the fused backward kernel (as lower.hpp)
        return [self.kernel(name, "reduction", q.dtype, sum_bytes(pre), 0),
                self.kernel(name, "attention", q.dtype, sum_bytes(inputs), sum_bytes(outputs, out_bytes), flops,
                            unit, **({"attention": dims} if shaped else {}))]

    # -- norm backward --------------------------------------------------------------------------

    def norm_backward(self, name, na, inputs, outputs, dtype):
        mask = list(na.get("output_mask", [True, True, True]))
        grads = list(outputs) + [None] * 3
        dy, x = na.get("grad_out"), na.get("input")
        two_n = sum(tensor_bytes(t) for t in (dy, x) if t is not None)
        small = sum_bytes([t for t in inputs if t is not dy and t is not x])
        ks = []
        if mask[0] and _defined(grads[0]):
            ks.append(self.kernel(name, "normalization", dtype, two_n + small, out_bytes(grads[0]),
                                  **per_row(x, na.get("normalized_shape"))))
        param_grads = [g for g, m in zip(grads[1:3], mask[1:3]) if m and _defined(g)]
        if param_grads:  # the weight and bias gradients reduce the same rows: the same "norm" shape
            ks.append(self.kernel(name, "reduction", dtype, two_n, sum(out_bytes(g) for g in param_grads),
                                  **per_row(x, na.get("normalized_shape"))))
        return ks

    # -- multi-tensor (optimizer) -----------------------------------------------------------------

    def multi_tensor(self, name, na, args, inputs, outputs, mutated):
        """A torch._foreach_* op or fused optimizer: ATen's multi_tensor_apply launches one kernel per
        110/64/48/36/30 tensors (depth 1..5 tensor lists) or per 320 blocks of 64 Ki elements
        (MultiTensorApply.cuh), as lower.hpp's foreach_op counts them."""
        lists = [v for k, v in na.items() if isinstance(v, (list, tuple)) and v and
                 all(isinstance(t, torch.Tensor) for t in v) and not k.startswith("out")]
        fused = name.startswith(FUSED_OPTIMIZER_PREFIXES)
        if fused:
            lists_named = {k: v for k, v in na.items() if isinstance(v, (list, tuple)) and v and
                           all(isinstance(t, torch.Tensor) for t in v)}
            lists = [v for k, v in lists_named.items() if k != "state_steps"]
            depth = len(lists)
            grad_scale = na.get("grad_scale")
            written = [t for k, v in lists_named.items() if k not in ("grads", "state_steps") or
                       (k == "grads" and grad_scale is not None) for t in v]
            read = [t for v in lists_named.values() for t in v]
        else:
            returns_list = bool(flat_tensors(outputs)) and not mutated
            depth = len(lists) + (1 if returns_list else 0)
            written = mutated if mutated else outputs
            read = inputs
        first = lists[0] if lists else flat_tensors(args)[:1]
        if not first:
            return [self.kernel(name, "host-only", torch.float32, 0, 0)]
        per_launch = (110, 64, 48, 36, 30)[min(max(depth, 1), 5) - 1]
        chunks = sum(math.ceil(int(t.numel()) / 65536) for t in first)
        launches = max(math.ceil(len(first) / per_launch), math.ceil(chunks / 320), 1)
        elements = sum(int(t.numel()) for t in first)
        read_b = sum_bytes(read)
        write_b = sum_bytes(flat_tensors(written), out_bytes)
        dtype = first[0].dtype
        return [self.kernel(name, "optimizer", dtype, read_b / launches, write_b / launches,
                            2 * elements / launches) for _ in range(launches)]


def _number(x):
    """An integer where the value is integral (bytes, FLOPs), else a float."""
    x = float(x)
    return int(x) if x.is_integer() else x


def positional(out) -> list:
    """An op's outputs by position, None where an output is undefined (masked gradients)."""
    if isinstance(out, (list, tuple)):
        return list(out) + [None] * 3
    return [out, None, None, None]


def _defined(t) -> bool:
    return isinstance(t, torch.Tensor)
