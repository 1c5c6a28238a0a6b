"""roofsim_export: a PyTorch model's training step (or inference forward) as roofsim's kernel IR (docs/ir-format.md).

    import roofsim_export
    ir = roofsim_export.export(model, {"x": torch.empty(32, 3, 224, 224), "y": torch.empty(32, dtype=torch.long)},
                               precision="amp-bf16", optimizer="sgd")
    roofsim_export.write(ir, "model.json")      # then: roofsim predict --ir model.json --gpu h200-sxm

One training step (zero_grad, forward, loss, backward, optimizer.step) runs on fake tensors: no
memory, no data, no GPU. Every aten op it dispatches becomes one or more kernels. docs/export.md
describes what is captured and what is not. mode="inference" captures one forward of the model in
eval() under torch.inference_mode() instead: no loss, no backward, no optimizer.
"""

from __future__ import annotations

__version__ = "1.0.0"

import torch

from . import compat
from .capture import WEIGHT_DECAY, Capture, ExportError, StepSpec, capture_step
from .models import call_model, generic_loss_fn, split_targets
from .precision import MODES, parse_dtype
from .writer import STEP_MODES, document, dumps, problems, summary, unknown_kernels, write_atomic

__all__ = ["export", "write", "summary", "ExportError", "problems", "__version__"]

OPTIMIZERS = ("none", "sgd", "adam", "adamw")

MEMORY_METHOD = ("peak of live tensor storages over the recorded step, tracked on fake tensors after every "
                 "op (each allocation rounded up to 512 B as the CUDA caching allocator does), from "
                 "zero_grad(set_to_none=True) on: parameters, gradients, optimizer state, inputs, activations "
                 "and temporaries; cuBLAS/cuDNN workspaces not included")
INFERENCE_MEMORY_METHOD = ("peak of live tensor storages over the recorded forward (model.eval(), "
                           "torch.inference_mode(): nothing saved for a backward), tracked on fake tensors after "
                           "every op (each allocation rounded up to 512 B as the CUDA caching allocator does): "
                           "parameters, buffers, inputs, activations and temporaries; no gradients, no optimizer "
                           "state; cuBLAS/cuDNN workspaces not included")


def _as_meta(name, value):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, tuple) and len(value) == 2:
        dtype, shape = value
        dtype = parse_dtype(dtype) if isinstance(dtype, str) else dtype
        return torch.empty(tuple(shape), dtype=dtype, device="meta")
    raise ExportError(f"input '{name}': expected a tensor (real or meta) or (dtype, shape), got {type(value).__name__}")


def export(model: torch.nn.Module, inputs: dict, *, loss=None, targets=None, precision: str = "fp32",
           optimizer: str | None = None, fused: bool = False, batch: int | None = None, model_name: str | None = None,
           fake_device: str = "auto", strict: bool = False, description: str | None = None,
           notes=None, mode: str = "training", forward=None) -> dict:
    """The kernel IR of one training step of `model` (mode="inference": of one inference forward).

    model        an nn.Module (real or on the meta device; it is not modified: its parameters are
                 swapped for fake tensors during the capture and put back afterwards)
    inputs       name -> tensor (real or meta: only shape, strides and dtype are used) or (dtype, shape)
    loss         loss(model, inputs) -> scalar tensor; default: cross_entropy(output, target) when an
                 input is a target (named target, targets, labels, label or y, or listed in `targets`),
                 else the output's .loss, else output.float().sum()
    precision    fp32, fp32-strict, tf32, amp-bf16, amp-fp16 (with GradScaler), bf16
    optimizer    none, sgd, adam, adamw (tools/validate/measure_pytorch.py's settings), foreach or fused;
                 default sgd (training), none (inference, which takes no other)
    mode         training (zero_grad, forward, loss, backward, optimizer step) or inference (one forward
                 of the model in eval() under torch.inference_mode(), autocast as `precision` says; no
                 loss, no backward, no optimizer)
    forward      inference only: forward(model, inputs) -> output, the inputs without the targets;
                 default: the model called with them (by keyword where forward takes their names)
    fake_device  auto (CUDA where this torch can run autograd on fake CUDA tensors, else CPU with the
                 CUDA behaviour emulated), cuda or cpu
    strict       raise ExportError when any kernel is of kind unknown

    Raises ExportError naming the module and aten op when the step cannot be captured."""
    if precision not in MODES:
        raise ExportError(f"unknown precision mode '{precision}' ({', '.join(MODES)})")
    if mode not in STEP_MODES:
        raise ExportError(f"unknown mode '{mode}' ({', '.join(STEP_MODES)})")
    inference = mode == "inference"
    if inference:
        if optimizer not in (None, "none"):
            raise ExportError(f"mode inference runs no optimizer step: optimizer must be none, not '{optimizer}'")
        if fused:
            raise ExportError("mode inference runs no optimizer step: fused=True does not apply")
        if loss is not None:
            raise ExportError("mode inference computes no loss: pass forward=fn(model, inputs) instead of loss")
        optimizer = "none"
    elif forward is not None:
        raise ExportError("forward= is for mode inference; a training step takes loss=")
    optimizer = optimizer or "sgd"
    if optimizer not in OPTIMIZERS:
        raise ExportError(f"unknown optimizer '{optimizer}' ({', '.join(OPTIMIZERS)})")
    if fused and optimizer == "none":
        raise ExportError("fused=True needs an optimizer")
    if fake_device not in ("auto", "cuda", "cpu"):
        raise ExportError(f"unknown fake device '{fake_device}' (auto, cuda, cpu)")
    tensors = {k: _as_meta(k, v) for k, v in inputs.items()}
    if inference:  # the targets are the loss's: the forward takes the other inputs
        names = split_targets(list(tensors), targets)
        spec = StepSpec(model, {k: v for k, v in tensors.items() if k not in names}, forward or call_model,
                        "none", False, grad_scaler=False, inference=True)
    else:
        if loss is None:
            loss = generic_loss_fn(split_targets(list(tensors), targets))
        spec = StepSpec(model, tensors, loss, optimizer, fused, grad_scaler=precision == "amp-fp16")
    precision_mode = MODES[precision]
    notes = list(notes or [])
    try:
        cap = capture_step(spec, precision_mode, fake_device)
    except ExportError as exc:
        if not (exc.data_dependent and exc.libraries_patched):
            raise
        # transformers' eager path asked a question about unknown data: its traced path does not
        cap = capture_step(spec, precision_mode, fake_device, eager_libraries=False)
        notes.append(f"transformers ran its traced-graph path (explicit attention masks), its eager path "
                     f"reading tensor values: {exc}")
    if batch is None:
        batch = next((int(t.shape[0]) for t in tensors.values() if t.dim()), 1)
    cls = type(model)
    description = description or f"{cls.__module__}.{cls.__qualname__}"
    memory = dict(cap.memory, method=INFERENCE_MEMORY_METHOD if inference else MEMORY_METHOD)
    doc = document(model=model_name or cls.__name__, precision=precision, batch=batch, optimizer=optimizer,
                   fused=fused, weight_decay=WEIGHT_DECAY.get(optimizer, 0.0) != 0, parameters=cap.parameters,
                   origin=origin(description, cap, optimizer, notes, mode),
                   memory=memory, kernels=cap.kernels, model_code=cap.model_code, mode=mode)
    bad = problems(doc)
    if bad:  # a bug in the exporter, never the user's model
        raise ExportError("internal error: the exported IR breaks docs/ir-format.md: " + "; ".join(bad[:5]))
    if strict:
        check_strict(doc)
    return doc


def origin(description: str, cap: Capture, optimizer: str, notes=None, mode: str = "training") -> str:
    step = "zero_grad, forward, loss, backward" + (f", {optimizer}.step" if optimizer != "none" else "")
    if cap.emulated:
        how = ("fake CPU tensors standing in for CUDA (this torch cannot run autograd on fake CUDA tensors "
               "without a CUDA device), with CUDA's autocast op lists, cross-entropy, fused dropout and fused "
               "attention emulated")
    else:
        how = "fake CUDA tensors"
    what = ("one inference forward (model.eval(), torch.inference_mode(); no loss, backward or optimizer)"
            if mode == "inference" else f"one training step ({step})")
    text = f"exported by roofsim_export {__version__} from {description} (torch {compat.TORCH_VERSION}): " \
           f"{what} on {how}"
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
