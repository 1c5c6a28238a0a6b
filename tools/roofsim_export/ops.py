"""Which layer-graph op (docs/graph-format.md) stands for a module call or an aten op.

Host markers name these ops: the framework profile measured the host cost of each one
(`layer_forward_<op>`, `layer_backward_<op>`), and per-op GPU efficiencies are keyed by them."""

from __future__ import annotations

import torch.nn as nn
import torch.nn.functional as F

from .kernels import ATTENTION_OPS

# Module classes of torch.nn, most specific first (isinstance: subclasses such as
# NonDynamicallyQuantizableLinear count as their base).
# nn.MultiheadAttention is none of them: it is Python (F.multi_head_attention_forward) calling torch,
# and at a model's shapes it runs otherwise than the probe's tiny one (batch 1, one head: its
# transposed input contiguous; docs/NOTES.md). Its code runs as model code
# (TRANSPARENT_FUNCTIONS): its projections cost what linears cost (FUNCTIONAL_OPS), its attention,
# copies and views what those ops cost, its Python what it takes.
_TORCH_MODULES = [
    ("Linear", "linear"),
    ("Conv2d", "conv2d"),
    ("Conv1d", "conv1d"),
    ("BatchNorm2d", "batchnorm2d"),
    ("LayerNorm", "layernorm"),
    ("GroupNorm", "groupnorm"),
    ("RMSNorm", "rmsnorm"),
    ("ReLU", "relu"),
    ("GELU", "gelu"),
    ("SiLU", "silu"),
    ("Tanh", "tanh"),
    ("Sigmoid", "sigmoid"),
    ("Dropout", "dropout"),
    ("Embedding", "embedding"),
    ("MaxPool2d", "maxpool2d"),
    ("AvgPool2d", "avgpool2d"),
    ("AdaptiveAvgPool2d", "adaptive_avgpool2d"),
    ("Softmax", "softmax"),
    ("LogSoftmax", "log_softmax"),
    ("Flatten", "flatten"),
    ("CrossEntropyLoss", "cross_entropy"),
]
MODULE_CLASSES = [(getattr(nn, name), op) for name, op in _TORCH_MODULES if hasattr(nn, name)]

# Classes of other libraries, by qualified class name (the exporter never imports them).
_NAMED_MODULES = {
    "transformers.pytorch_utils.Conv1D": "linear",          # GPT-2's projections: addmm(b, x, W)
    "transformers.modeling_utils.Conv1D": "linear",
    "transformers.activations.NewGELUActivation": "gelu_tanh_composite",  # GPT-2's gelu_new in Python
    "transformers.activations.GELUActivation": "gelu",
    "transformers.activations.GELUTanh": "gelu",
    "transformers.activations.PytorchGELUTanh": "gelu",
    "transformers.activations.SiLUActivation": "silu",
}


def host_op(module: nn.Module, op: str) -> str:
    """The host op whose framework figures cost a call of `module` (of layer-graph op `op`): the
    op's bias-free variant for a Linear or convolution without a bias ("conv2d_nobias"; the probe's
    tiny layers of these ops have one), else the op itself. roofsim falls back to the op's figures
    where a profile has no bias-free ones."""
    if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)):
        return host_op_of_functional(op, getattr(module, "bias", None))
    return op


# The host op of calls that run otherwise than the probe's tiny layer of their module (roofsim's
# graph_op_of_host_op maps it back to its graph op): nn.Dropout that ran nothing (p = 0).
DROPOUT_IDENTITY = "dropout_identity"


def attention_host_op(aten_name: str) -> str | None:
    """The host op of a fused attention op ("sdpa_cudnn" for _scaled_dot_product_cudnn_attention and
    its backward): the framework probe times attention at a model's head size keyed by the SDPA
    backend that ran; None for ops of no CUDA backend (roofsim then takes the sdpa figures)."""
    backend = ATTENTION_OPS.get(aten_name, (None,))[0]
    return f"sdpa_{backend}" if backend in ("flash", "efficient", "cudnn") else None


# Torch functions that are a layer roofsim knows, called as functions in a model's own code: each
# call is costed as a call of that layer (capture.Session.functional_call), its aten ops and autograd
# nodes its own. F.linear is the one whose aten ops (t and addmm; a copy, mm and add for a strided
# 3-D input) are no layer each.
FUNCTIONAL_OPS = {F.linear: "linear"}

# Torch functions written in Python whose body runs as the model's own code (its torch calls seen
# one by one, its Python timed): nn.MultiheadAttention's.
TRANSPARENT_FUNCTIONS = (F.multi_head_attention_forward,)


def host_op_of_functional(op: str, bias) -> str:
    """The host op of a call of `op` given its bias (a module's, or a functional call's argument): the
    bias-free variant of a linear or convolution without one (the probe times both)."""
    if op in ("linear", "conv1d", "conv2d") and bias is None:
        return op + "_nobias"
    return op


def module_op(module: nn.Module) -> str | None:
    """The layer-graph op of a module call, or None when the module type is not one roofsim knows."""
    cls = type(module)
    qual = f"{cls.__module__}.{cls.__qualname__}"
    if qual in _NAMED_MODULES:
        return _NAMED_MODULES[qual]
    for base, op in MODULE_CLASSES:
        if isinstance(module, base):
            return op
    return None


# aten op (overload packet name, in-place '_' suffix removed) -> layer-graph op, for markers of ops
# called outside any known module. Anything not listed takes "add" (one eager op).
_ATEN_GRAPH_OPS = {
    "linear": ["addmm", "_addmm_activation", "addmv", "linear"],
    "matmul": ["mm", "mv", "dot", "vdot", "matmul"],
    "bmm": ["bmm", "baddbmm", "addbmm"],
    "conv2d": ["convolution", "_convolution", "convolution_backward", "convolution_overrideable",
               "convolution_backward_overrideable", "cudnn_convolution", "mkldnn_convolution"],
    "batchnorm2d": ["native_batch_norm", "cudnn_batch_norm", "miopen_batch_norm", "_native_batch_norm_legit",
                    "_native_batch_norm_legit_no_training", "_native_batch_norm_legit_functional",
                    "_batch_norm_with_update", "_batch_norm_with_update_functional", "_batch_norm_no_update",
                    "native_batch_norm_backward", "cudnn_batch_norm_backward", "miopen_batch_norm_backward",
                    "batch_norm_backward"],
    "layernorm": ["native_layer_norm", "native_layer_norm_backward"],
    "groupnorm": ["native_group_norm", "native_group_norm_backward"],
    "rmsnorm": ["_fused_rms_norm", "_fused_rms_norm_backward", "rms_norm"],
    "relu": ["relu", "threshold_backward"],
    "gelu": ["gelu", "gelu_backward"],
    "silu": ["silu", "silu_backward"],
    "tanh": ["tanh", "tanh_backward"],
    "sigmoid": ["sigmoid", "sigmoid_backward"],
    "dropout": ["native_dropout", "native_dropout_backward", "bernoulli"],
    "mul": ["mul", "div"],
    "softmax": ["_softmax", "_softmax_backward_data", "_safe_softmax", "_masked_softmax",
                "_masked_softmax_backward"],
    "log_softmax": ["_log_softmax", "_log_softmax_backward_data"],
    "cross_entropy": ["nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward", "nll_loss2d_backward"],
    "sdpa": ["_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward",
             "_scaled_dot_product_efficient_attention", "_scaled_dot_product_efficient_attention_backward",
             "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward",
             "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward",
             "_scaled_dot_product_fused_attention_overrideable",
             "_scaled_dot_product_fused_attention_overrideable_backward",
             "_flash_attention_forward", "_flash_attention_backward", "_efficient_attention_forward",
             "_efficient_attention_backward"],
    "embedding": ["embedding", "embedding_dense_backward"],
    "maxpool2d": ["max_pool2d_with_indices", "max_pool2d_with_indices_backward", "max_pool2d"],
    "avgpool2d": ["avg_pool2d", "avg_pool2d_backward"],
    "adaptive_avgpool2d": ["_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward", "adaptive_avg_pool2d"],
    "cat": ["cat", "stack"],
    "slice": ["slice_backward", "select_backward", "narrow"],
    "transpose_contiguous": ["clone"],
    # a dtype cast outside known modules (a model's own .to(dtype), its gradient's cast back): the
    # framework probe's "cast" figures, where a profile has them (else, as before, an add's)
    "cast": ["_to_copy"],
}
ATEN_GRAPH_OP = {aten: graph for graph, atens in _ATEN_GRAPH_OPS.items() for aten in atens}


def aten_graph_op(name: str, is_view: bool) -> str:
    """The layer-graph op of an aten op called outside known modules ("reshape" for views)."""
    if is_view:
        return "reshape"
    if name in ATEN_GRAPH_OP:
        return ATEN_GRAPH_OP[name]
    base = name[:-1] if name.endswith("_") and not name.startswith("_foreach") else name
    return ATEN_GRAPH_OP.get(base, "add")
