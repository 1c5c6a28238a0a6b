"""roofsim_export: a PyTorch model's training step as roofsim's kernel IR (docs/ir-format.md).

    import roofsim_export
    ir = roofsim_export.export(model, {"x": torch.empty(32, 3, 224, 224), "y": torch.empty(32, dtype=torch.long)},
                               precision="amp-bf16", optimizer="sgd")
    roofsim_export.write(ir, "model.json")      # then: roofsim predict --ir model.json --gpu h200-sxm

One training step (zero_grad, forward, loss, backward, optimizer.step) runs on fake tensors: no
memory, no data, no GPU. Every aten op it dispatches becomes one or more kernels. docs/export.md
describes what is captured and what is not.
"""

from __future__ import annotations

__version__ = "1.0.0"

import torch

from . import compat
from .capture import WEIGHT_DECAY, Capture, ExportError, StepSpec, capture_step
from .models import generic_loss_fn, split_targets
from .precision import MODES, parse_dtype
from .writer import document, dumps, problems, summary, unknown_kernels, write_atomic

__all__ = ["export", "write", "summary", "ExportError", "problems", "__version__"]

OPTIMIZERS = ("none", "sgd", "adam", "adamw")

MEMORY_METHOD = ("peak of live tensor storages over the recorded step, tracked on fake tensors after every "
                 "op (each allocation rounded up to 512 B as the CUDA caching allocator does), from "
                 "zero_grad(set_to_none=True) on: parameters, gradients, optimizer state, inputs, activations "
                 "and temporaries; cuBLAS/cuDNN workspaces not included")


def _as_meta(name, value):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, tuple) and len(value) == 2:
        dtype, shape = value
        dtype = parse_dtype(dtype) if isinstance(dtype, str) else dtype
        return torch.empty(tuple(shape), dtype=dtype, device="meta")
    raise ExportError(f"input '{name}': expected a tensor (real or meta) or (dtype, shape), got {type(value).__name__}")


def export(model: torch.nn.Module, inputs: dict, *, loss=None, targets=None, precision: str = "fp32",
           optimizer: str = "sgd", fused: bool = False, batch: int | None = None, model_name: str | None = None,
           fake_device: str = "auto", strict: bool = False, description: str | None = None,
           notes=None) -> dict:
    """The kernel IR of one training step of `model`.

    model        an nn.Module (real or on the meta device; it is not modified: its parameters are
                 swapped for fake tensors during the capture and put back afterwards)
    inputs       name -> tensor (real or meta: only shape, strides and dtype are used) or (dtype, shape)
    loss         loss(model, inputs) -> scalar tensor; default: cross_entropy(output, target) when an
                 input is a target (named target, targets, labels, label or y, or listed in `targets`),
                 else the output's .loss, else output.float().sum()
    precision    fp32, fp32-strict, tf32, amp-bf16, amp-fp16 (with GradScaler), bf16
    optimizer    none, sgd, adam, adamw (tools/validate/measure_pytorch.py's settings), foreach or fused
    fake_device  auto (CUDA where this torch can run autograd on fake CUDA tensors, else CPU with the
                 CUDA behaviour emulated), cuda or cpu
    strict       raise ExportError when any kernel is of kind unknown

    Raises ExportError naming the module and aten op when the step cannot be captured."""
    if precision not in MODES:
        raise ExportError(f"unknown precision mode '{precision}' ({', '.join(MODES)})")
    if optimizer not in OPTIMIZERS:
        raise ExportError(f"unknown optimizer '{optimizer}' ({', '.join(OPTIMIZERS)})")
    if fused and optimizer == "none":
        raise ExportError("fused=True needs an optimizer")
    if fake_device not in ("auto", "cuda", "cpu"):
        raise ExportError(f"unknown fake device '{fake_device}' (auto, cuda, cpu)")
    tensors = {k: _as_meta(k, v) for k, v in inputs.items()}
    if loss is None:
        loss = generic_loss_fn(split_targets(list(tensors), targets))
    mode = MODES[precision]
    spec = StepSpec(model, tensors, loss, optimizer, fused, grad_scaler=precision == "amp-fp16")
    notes = list(notes or [])
    try:
        cap = capture_step(spec, mode, fake_device)
    except ExportError as exc:
        if not (exc.data_dependent and exc.libraries_patched):
            raise
        # transformers' eager path asked a question about unknown data: its traced path does not
        cap = capture_step(spec, mode, fake_device, eager_libraries=False)
        notes.append(f"transformers ran its traced-graph path (explicit attention masks), its eager path "
                     f"reading tensor values: {exc}")
    if batch is None:
        batch = next((int(t.shape[0]) for t in tensors.values() if t.dim()), 1)
    cls = type(model)
    description = description or f"{cls.__module__}.{cls.__qualname__}"
    memory = dict(cap.memory, method=MEMORY_METHOD)
    doc = document(model=model_name or cls.__name__, precision=precision, batch=batch, optimizer=optimizer,
                   fused=fused, weight_decay=WEIGHT_DECAY.get(optimizer, 0.0) != 0, parameters=cap.parameters, origin=origin(description, cap, optimizer, notes),
                   memory=memory, kernels=cap.kernels, model_code=cap.model_code)
    bad = problems(doc)
    if bad:  # a bug in the exporter, never the user's model
        raise ExportError("internal error: the exported IR breaks docs/ir-format.md: " + "; ".join(bad[:5]))
    if strict:
        check_strict(doc)
    return doc


def origin(description: str, cap: Capture, optimizer: str, notes=None) -> str:
    step = "zero_grad, forward, loss, backward" + (f", {optimizer}.step" if optimizer != "none" else "")
    if cap.emulated:
        how = ("fake CPU tensors standing in for CUDA (this torch cannot run autograd on fake CUDA tensors "
               "without a CUDA device), with CUDA's autocast op lists, cross-entropy, fused dropout and fused "
               "attention emulated")
    else:
        how = "fake CUDA tensors"
    text = f"exported by roofsim_export {__version__} from {description} (torch {compat.TORCH_VERSION}): " \
           f"one training step ({step}) on {how}"
    if cap.fill_ins:
        text += "; shape rules for ops without meta kernels: " + ", ".join(cap.fill_ins)
    if notes:
        text += "; " + "; ".join(notes)
    return text


def check_strict(doc: dict) -> None:
    unknown = unknown_kernels(doc)
    if unknown:
        lines = [f"  {k['op']} in '{k['layer']}' ({k['phase']}): {k['flag']}" for k in unknown]
        raise ExportError(f"--strict: {len(unknown)} kernel(s) have no cost model:\n" + "\n".join(lines))


def write(doc: dict, path: str) -> None:
    """Writes the IR atomically (a temporary file, then os.replace)."""
    write_atomic(path, dumps(doc))
