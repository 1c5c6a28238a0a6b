"""python3 -m roofsim_export MODEL ... -o FILE.json: one training step of a PyTorch model (or, with
--mode inference, one inference forward) as roofsim's kernel IR. Exit codes: 0 written, 1 the step
cannot be captured (nothing written), 2 usage error."""

from __future__ import annotations

import argparse
import sys
import time

EPILOG = """\
models:
  torchvision:NAME        torchvision.models.NAME(weights=None); input x float32[B,3,224,224],
                          targets y int64[B]; loss cross_entropy(model(x), y)
  transformers:TYPE       a model of that type built from its config (no download): decoders
                          (gpt2, llama, ...) as AutoModelForCausalLM with input_ids int64[B,L]
                          and labels=input_ids; encoders (bert, roberta, ...) as
                          AutoModelForSequenceClassification (2 labels) with labels int64[B];
                          the model computes its own loss
  path/to/file.py:FACTORY FACTORY(**config) returns an nn.Module or (module, {name: tensor or
  package.module:FACTORY  "DTYPE[SHAPE]"}); an input named target(s), label(s) or y is the
                          target of cross_entropy(output, target), otherwise the loss is the
                          output's .loss, else output.float().sum()

inputs: --input NAME=DTYPE[SHAPE] adds or replaces an input; SHAPE is comma-separated integers
  or B (--batch) and L (--seq-len): x=float32[B,3,160,160], input_ids=int64[B,L].

precision modes (docs/prediction.md):
  fp32         PyTorch's defaults: matmul TF32 off, cuDNN convolution TF32 on
  fp32-strict  both TF32 flags off
  tf32         both TF32 flags on
  amp-bf16     fp32 parameters, forward and loss under torch.autocast('cuda', bfloat16)
  amp-fp16     the same in float16, with GradScaler (scale, unscale_, update)
  bf16         model and inputs in bfloat16, no autocast

optimizers (tools/validate/measure_pytorch.py's settings; foreach, or one fused kernel with --fused):
  sgd          SGD(lr=0.1, momentum=0.9, weight_decay=1e-4)  default for torchvision and factories
  adamw        AdamW(lr=1e-4, weight_decay=0.01)              default for transformers
  adam         Adam(lr=1e-4)
  none         forward and backward only

modes:
  training     zero_grad, forward, loss, backward, optimizer step (default)
  inference    one forward of model.eval() under torch.inference_mode() (autocast as --precision
               says): no loss, no backward, no optimizer; targets are not passed to the model

examples:
  PYTHONPATH=tools python3 -m roofsim_export torchvision:resnet50 --batch 32 --precision amp-bf16 -o resnet50.json
  roofsim predict --ir resnet50.json --gpu h200-sxm
  python3 -m roofsim_export transformers:gpt2 --batch 4 --seq-len 1024 --precision amp-bf16 -o gpt2.json
  python3 -m roofsim_export transformers:bert --batch 32 --seq-len 128 --precision amp-bf16 --summary -o bert.json
  python3 -m roofsim_export transformers:gpt2 --config n_layer=2 --config n_embd=256 -o tiny-gpt2.json
  python3 -m roofsim_export my_model.py:build --input x=float32[B,784] --input y=int64[B] --batch 256 \\
      --optimizer adamw --fused -o mlp.json
  python3 -m roofsim_export torchvision:resnet18 --input x=float32[B,3,128,128] --strict -o r18.json
  python3 -m roofsim_export torchvision:resnet50 --batch 1 --precision amp-bf16 --mode inference -o r50-infer.json

The step runs on fake tensors (no memory, no data, no GPU). A model whose forward reads tensor
values (.item(), `if tensor:`, boolean masks) cannot be captured; the error names the module and
the aten op. --strict refuses to write an IR with kernels of kind unknown (ops without a cost
model) and lists them. The file is written atomically; on any error nothing is written.
See docs/export.md.
"""


def parser() -> argparse.ArgumentParser:
    from . import __version__
    ap = argparse.ArgumentParser(
        prog="python3 -m roofsim_export",
        description="Export one training step of a PyTorch model (forward, loss, backward, optimizer step), or "
                    "one inference forward, as roofsim's kernel IR (docs/ir-format.md), captured on fake tensors.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", metavar="MODEL",
                    help="torchvision:NAME, transformers:TYPE, path/to/file.py:FACTORY or package.module:FACTORY")
    ap.add_argument("--input", action="append", default=[], metavar="NAME=DTYPE[SHAPE]",
                    help="a model input (repeatable), e.g. x=float32[B,3,224,224]")
    ap.add_argument("--batch", type=int, metavar="N", help="batch size B (default 32; factories: their inputs')")
    ap.add_argument("--seq-len", type=int, metavar="L", help="sequence length L (default 128)")
    ap.add_argument("--precision", default="fp32",
                    choices=["fp32", "fp32-strict", "tf32", "amp-bf16", "amp-fp16", "bf16"],
                    help="precision mode (default fp32)")
    ap.add_argument("--mode", default="training", choices=["training", "inference"],
                    help="training: one training step (default); inference: one forward of model.eval() under "
                         "torch.inference_mode(), no loss, backward or optimizer")
    ap.add_argument("--optimizer", choices=["none", "sgd", "adam", "adamw"],
                    help="optimizer (default: sgd, adamw for transformers; none with --mode inference)")
    ap.add_argument("--fused", action="store_true", help="fused optimizer (fused=True) instead of foreach")
    ap.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                    help="model configuration (repeatable): transformers config fields, torchvision or factory "
                         "keyword arguments; VALUE is JSON where it parses")
    ap.add_argument("--task", default="auto", choices=["auto", "causal-lm", "sequence-classification"],
                    help="transformers head (default: sequence-classification for encoders, else causal-lm)")
    ap.add_argument("--fake-device", default="auto", choices=["auto", "cuda", "cpu"],
                    help="device of the fake tensors (default auto: cuda where torch can run autograd on fake "
                         "CUDA tensors, else cpu with CUDA's autocast and dropout emulated)")
    ap.add_argument("-o", "--output", required=True, metavar="FILE.json", help="the IR file to write")
    ap.add_argument("--strict", action="store_true", help="refuse to write when any kernel is of kind unknown")
    ap.add_argument("--summary", action="store_true", help="print kernels per phase and kind")
    ap.add_argument("--version", action="version", version=f"roofsim_export {__version__}")
    return ap


def main(argv=None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    if args.batch is not None and args.batch <= 0:
        ap.error("--batch must be positive")
    if args.seq_len is not None and args.seq_len <= 0:
        ap.error("--seq-len must be positive")
    if args.fused and args.optimizer == "none":
        ap.error("--fused needs an optimizer")
    inference = args.mode == "inference"
    if inference and args.optimizer not in (None, "none"):
        ap.error(f"--optimizer {args.optimizer}: --mode inference runs no optimizer step (leave --optimizer out)")
    if inference and args.fused:
        ap.error("--fused: --mode inference runs no optimizer step")

    try:
        import torch
        del torch
    except ImportError as exc:
        print(f"error: roofsim_export needs PyTorch: {exc}", file=sys.stderr)
        return 1
    from . import ExportError, check_strict, export, summary, write
    from .models import UsageError, build, parse_config, parse_input

    t0 = time.perf_counter()
    try:
        inputs = [parse_input(text) for text in args.input]
        config = parse_config(args.config)
        built = build(args.model, batch=args.batch, seq_len=args.seq_len, config=config, inputs=inputs,
                      task=args.task)
        batch = args.batch or next((int(t.shape[0]) for t in built.inputs.values() if t.dim()), 1)
        if inference:  # the model's forward alone: no loss (its notes name it), no optimizer
            doc = export(built.model, built.inputs, forward=built.forward_fn, targets=built.targets,
                         precision=args.precision, optimizer="none", batch=batch, model_name=built.name,
                         fake_device=args.fake_device, description=built.description, mode="inference",
                         notes=[n for n in built.notes if not n.startswith(("loss ", "cross_entropy "))])
        else:
            optimizer = args.optimizer or built.default_optimizer
            doc = export(built.model, built.inputs, loss=built.loss_fn, precision=args.precision,
                         optimizer=optimizer, fused=args.fused, batch=batch, model_name=built.name,
                         fake_device=args.fake_device, description=built.description, notes=built.notes)
        if args.strict:
            check_strict(doc)
        write(doc, args.output)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ExportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        print(f"error: nothing written to {args.output}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: nothing written", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug or an unexpected library error: still never a partial file
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        print(f"error: nothing written to {args.output}", file=sys.stderr)
        return 1
    if args.summary:
        print(summary(doc))
    unknown = sum(1 for k in doc["kernels"] if k["kind"] == "unknown")
    print(f"wrote {args.output}: {len(doc['kernels'])} kernels"
          + (f", {unknown} unknown (no cost model)" if unknown else "")
          + f" in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
