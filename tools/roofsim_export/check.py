"""python3 -m roofsim_export.check MODEL [options]: the exporter against a real step, on a CUDA GPU.

Runs one training step (with --mode inference: one forward of the model in eval() under
torch.inference_mode()) of MODEL for real (after one warm-up step, as the exporter does) under a
dispatch mode that counts the aten ops of each phase, and reads torch.cuda.max_memory_allocated
over it; then exports the same model and compares: the count of each aten op per phase, and the
peak memory. Exit code 0 when every count agrees, 1 otherwise (or when the export fails), 2 for
usage errors. Takes MODEL, --input, --batch, --seq-len, --precision, --mode, --optimizer, --fused,
--config, --task and --fake-device as `python3 -m roofsim_export` does.

    PYTHONPATH=tools python3 -m roofsim_export.check torchvision:resnet50 --batch 32 --precision amp-bf16
    PYTHONPATH=tools python3 -m roofsim_export.check transformers:gpt2 --batch 4 --seq-len 1024 --precision amp-bf16
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import ExportError, compat, export
from .capture import make_optimizer
from .models import UsageError, build, parse_config, parse_input
from .precision import MODES

# ops whose one call the IR writes as several kernels (launches, passes)
_MULTI = ("aten::convolution_backward", "aten::native_layer_norm_backward", "aten::native_group_norm",
          "aten::native_group_norm_backward", "aten::nll_loss_backward", "aten::embedding_dense_backward",
          "aten::_fused_rms_norm_backward")


class _Count(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.phase = None
        self.on = False
        self.counts = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if torch.is_inference_mode_enabled():  # composite ops decomposed, as the GPU runs them and the exporter records them
            composite = compat.composite_kernel(func)
            if composite is not None:
                with self:
                    return composite(*args, **(kwargs or {}))
        out = func(*args, **(kwargs or {}))
        if self.on and self.phase and getattr(func, "namespace", "") == "aten":
            self.counts[(self.phase, func._schema.name)] += 1
        return out


def real_inputs(built, precision):
    out = {}
    for name, t in built.inputs.items():
        shape = tuple(t.shape)
        if t.is_floating_point():
            dtype = MODES[precision].param_dtype if t.dtype == torch.float32 else t.dtype
            out[name] = torch.randn(shape, dtype=dtype, device="cuda")
        elif t.dtype == torch.bool:
            out[name] = torch.ones(shape, dtype=torch.bool, device="cuda")
        else:  # indices: within the model's range where known, else 0 (valid for any table or class count)
            high = built.highs.get(name)
            out[name] = (torch.randint(0, high, shape, device="cuda", dtype=t.dtype) if high
                         else torch.zeros(shape, dtype=t.dtype, device="cuda"))
    return out


def _autocast(precision):
    """torch.autocast on CUDA where the precision mode has it, else a null context."""
    mode = MODES[precision]
    return torch.autocast("cuda", dtype=mode.autocast) if mode.autocast else contextlib.nullcontext()


def _second_of_two(run):
    """run(counter) twice under one op counter, counting only the second: its counts of (phase, aten op)
    and its peak memory."""
    counter = _Count()
    with counter:
        for record in (False, True):
            torch.cuda.synchronize()
            if record:
                torch.cuda.reset_peak_memory_stats()
            counter.on = record
            run(counter)
    torch.cuda.synchronize()
    return counter.counts, torch.cuda.max_memory_allocated()


def real_step(model, inputs, loss_fn, precision, optimizer, fused):
    """Counts of (phase, aten op) of the second of two real steps, and its peak memory."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(optimizer, params, fused) if optimizer != "none" else None
    scaler = torch.amp.GradScaler("cuda") if precision == "amp-fp16" else None

    def step(counter):
        counter.phase = None
        if opt is not None:
            opt.zero_grad(set_to_none=True)
        else:
            for p in params:
                p.grad = None
        counter.phase = "forward"
        with _autocast(precision):
            loss = loss_fn(model, inputs)
        if scaler is not None:
            loss = scaler.scale(loss)
        counter.phase = "backward"
        loss.backward()
        counter.phase = "optimizer"
        if opt is not None:
            if scaler is not None:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
        counter.phase = None
        del loss

    counts, peak = _second_of_two(step)
    del opt
    return counts, peak


def real_forward(model, inputs, forward_fn, precision):
    """Inference: counts of (forward, aten op) of the second of two real forwards (model.eval(),
    torch.inference_mode(), autocast as the precision mode says), and its peak memory."""
    def forward(counter):
        counter.phase = "forward"
        with torch.inference_mode(), _autocast(precision):
            out = forward_fn(model, inputs)
        counter.phase = None
        del out

    return _second_of_two(forward)


def ir_counts(doc) -> collections.Counter:
    counts = collections.Counter()
    previous = None
    for k in doc["kernels"]:
        if not k["op"].startswith("aten::"):
            previous = None
            continue
        key = (k["op"], k.get("args"), k["layer"], k["phase"])
        several = k["op"] in _MULTI or k["op"].startswith(("aten::_foreach", "aten::_fused_")) or \
            "attention" in k["op"]
        if several and key == previous:
            continue  # a further kernel of the same call
        previous = key
        counts[(k["phase"], k["op"])] += 1
    return counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m roofsim_export.check", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", metavar="MODEL")
    ap.add_argument("--input", action="append", default=[])
    ap.add_argument("--batch", type=int)
    ap.add_argument("--seq-len", type=int)
    ap.add_argument("--precision", default="fp32", choices=list(MODES))
    ap.add_argument("--mode", default="training", choices=["training", "inference"])
    ap.add_argument("--optimizer", choices=["none", "sgd", "adam", "adamw"])
    ap.add_argument("--fused", action="store_true")
    ap.add_argument("--config", action="append", default=[])
    ap.add_argument("--task", default="auto", choices=["auto", "causal-lm", "sequence-classification"])
    ap.add_argument("--fake-device", default="auto", choices=["auto", "cuda", "cpu"])
    args = ap.parse_args(argv)
    inference = args.mode == "inference"
    if inference and (args.optimizer not in (None, "none") or args.fused):
        ap.error("--mode inference runs no optimizer step: leave --optimizer and --fused out")
    if not torch.cuda.is_available():
        print("error: the real step needs a CUDA GPU", file=sys.stderr)
        return 2
    try:
        built = build(args.model, batch=args.batch, seq_len=args.seq_len, config=parse_config(args.config),
                      inputs=[parse_input(t) for t in args.input], task=args.task, meta=False)
        optimizer = "none" if inference else args.optimizer or built.default_optimizer
        model = built.model.cuda()
        model = model.eval() if inference else model.train()
        if MODES[args.precision].param_dtype != torch.float32:
            model = model.to(MODES[args.precision].param_dtype)
        inputs = real_inputs(built, args.precision)
        if inference:  # the forward takes no targets
            forward_inputs = {k: v for k, v in inputs.items() if k not in built.targets}
            real, real_peak = real_forward(model, forward_inputs, built.forward_fn, args.precision)
            torch.cuda.empty_cache()
            doc = export(model, inputs, forward=built.forward_fn, targets=built.targets, precision=args.precision,
                         optimizer="none", model_name=built.name, fake_device=args.fake_device,
                         description=built.description, mode="inference")
        else:
            real, real_peak = real_step(model, inputs, built.loss_fn, args.precision, optimizer, args.fused)
            torch.cuda.empty_cache()
            doc = export(model, inputs, loss=built.loss_fn, precision=args.precision, optimizer=optimizer,
                         fused=args.fused, model_name=built.name, fake_device=args.fake_device,
                         description=built.description)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ExportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    mine = ir_counts(doc)
    print(f"{doc['model']} ({args.precision}, {'inference' if inference else optimizer}"
          f"{', fused' if args.fused else ''}); {doc['origin']}")
    skip = {"aten::detach", "aten::alias"}  # fake-tensor artifacts and engine bookkeeping
    for phase in ("forward",) if inference else ("forward", "backward", "optimizer"):
        r = sum(n for (ph, op), n in real.items() if ph == phase and op not in skip)
        m = sum(n for (ph, op), n in mine.items() if ph == phase and op not in skip)
        print(f"{phase:<10} real {r:>6} aten ops, exported {m:>6}")
    differing = [(key, real.get(key, 0), mine.get(key, 0)) for key in sorted(set(real) | set(mine))
                 if key[1] not in skip and real.get(key, 0) != mine.get(key, 0)]
    for (phase, op), r, m in differing:
        print(f"  differs: {phase:<10} {op:<60} real {r:>5}  exported {m:>5}")
    exported_peak = doc["memory"]["peak_bytes"]
    print(f"peak memory: real {real_peak / 2**20:.1f} MiB (max_memory_allocated), exported "
          f"{exported_peak / 2**20:.1f} MiB ({100.0 * (exported_peak - real_peak) / real_peak:+.1f} %)")
    unknown = collections.Counter(k["op"] for k in doc["kernels"] if k["kind"] == "unknown")
    if unknown:
        print("unknown ops: " + ", ".join(f"{op} x{n}" for op, n in unknown.items()))
    print("same aten ops as the real step" if not differing else f"{len(differing)} (phase, op) counts differ")
    return 0 if not differing else 1


if __name__ == "__main__":
    sys.exit(main())
