#!/usr/bin/env python3
"""Diagnostic: does ViT-B/16's `nn.MultiheadAttention` carry its host-paced miss?

Not part of a validation run and never read by roofsim: it answers a question about the host-cost
model (docs/NOTES.md quotes its output). At each case's measured host speed roofsim predicts
ViT-B/16 b32's host-paced step about 15 % short, where BERT-base b32's and ResNet-50 b32's come out
within 3 %. ViT's attention is one `nn.MultiheadAttention` per block, costed as one layer by the
framework probe's tiny one; BERT's is four linears and SDPA, each costed as its own layer. Three
variants of torchvision's `vit_b_16()`, identical but for each encoder block's self-attention:

- `mha`: torchvision's own (`nn.MultiheadAttention`, called with need_weights=False);
- `packed`: one `nn.Linear(768, 2304)` for q, k and v, SDPA, an output `nn.Linear` (the same GEMMs
  and attention kernel as `mha`, written as plain modules);
- `split`: q, k and v as three `nn.Linear(768, 768)`, SDPA, an output `nn.Linear` (as Hugging Face's
  BERT writes it).

Each is trained as tools/validate/measure_pytorch.py trains ViT-B/16 b32 (autocast bfloat16, AdamW
foreach, cross-entropy over 1000 classes, batch 32), all three in one process, the variants
alternating step by step so that a drift of the host's speed moves them alike: per sample the
canary (tiny adds), then the step, the forward + backward, and the forward alone, each from a
synchronize to an event after it (CUDA events). Medians per variant and per phase.

The same file gives the exporter a factory per variant, so their kernel IRs come from the same code:
  PYTHONPATH=tools python3 -m roofsim_export tools/validate/vit_attention_ablation.py:packed \\
      --batch 32 --precision amp-bf16 --optimizer adamw -o vit-packed.json
Usage, on a GPU machine: python3 tools/validate/vit_attention_ablation.py --out F.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

VARIANTS = ("mha", "packed", "split")
BATCH = 32
IMAGE = 224


class PackedSelfAttention(nn.Module):
    """Self-attention as plain modules: one q/k/v projection, SDPA, an output projection. Called as
    torchvision's EncoderBlock calls nn.MultiheadAttention: (x, x, x, need_weights=False) -> (y, None)."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, query, key=None, value=None, need_weights=False):
        b, s, w = query.shape
        qkv = self.qkv(query).view(b, s, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        return self.out(y.transpose(1, 2).reshape(b, s, w)), None


class SplitSelfAttention(nn.Module):
    """Self-attention as Hugging Face's BERT writes it: q, k, v projections, SDPA, an output projection."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(width, width)
        self.key = nn.Linear(width, width)
        self.value = nn.Linear(width, width)
        self.out = nn.Linear(width, width)

    def forward(self, query, key=None, value=None, need_weights=False):
        b, s, w = query.shape

        def heads(t):
            return t.view(b, s, self.heads, w // self.heads).transpose(1, 2)

        y = F.scaled_dot_product_attention(heads(self.query(query)), heads(self.key(query)), heads(self.value(query)))
        return self.out(y.transpose(1, 2).reshape(b, s, w)), None


def build(variant: str) -> nn.Module:
    import torchvision

    model = torchvision.models.vit_b_16()
    if variant != "mha":
        kind = {"packed": PackedSelfAttention, "split": SplitSelfAttention}[variant]
        for block in model.encoder.layers:
            mha = block.self_attention
            block.self_attention = kind(mha.embed_dim, mha.num_heads)
    return model


def _factory(variant: str):
    def make(**_config):
        return build(variant), {"x": f"float32[B,3,{IMAGE},{IMAGE}]", "target": "int64[B]"}

    make.__doc__ = f"ViT-B/16 with the '{variant}' self-attention, for roofsim_export"
    return make


mha = _factory("mha")
packed = _factory("packed")
split = _factory("split")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--samples", type=int, default=40, help="samples per variant and phase (default %(default)s)")
    ap.add_argument("--warmup", type=int, default=5, help="warm-up steps per variant (default %(default)s)")
    args = ap.parse_args(argv)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import measure_pytorch as mp  # noqa: E402  (the validation's canary)

    dev = torch.device("cuda")
    torch.manual_seed(0)
    x = torch.randn(BATCH, 3, IMAGE, IMAGE, device=dev)
    y = torch.randint(0, 1000, (BATCH,), device=dev)
    cases = {}
    for v in VARIANTS:
        model = build(v).to(dev).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
        cases[v] = (model, opt)

    def forward_loss(model):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return F.cross_entropy(model(x), y)

    def step(v):
        model, opt = cases[v]
        opt.zero_grad(set_to_none=True)
        forward_loss(model).backward()
        opt.step()

    def forward_backward(v):
        forward_loss(cases[v][0]).backward()

    def forward(v):
        return forward_loss(cases[v][0])

    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def timed(fn, v) -> float:
        torch.cuda.synchronize()
        e0.record()
        result = fn(v)
        e1.record()
        e1.synchronize()
        torch.cuda.synchronize()
        del result
        return e0.elapsed_time(e1) / 1e3

    for v in VARIANTS:
        for _ in range(args.warmup):
            step(v)
    torch.cuda.synchronize()
    phases = {"step": step, "forward_backward": forward_backward, "forward": forward}
    samples = {v: {p: [] for p in phases} for v in VARIANTS}
    canaries = []
    started = time.perf_counter()
    for i in range(args.samples):
        order = VARIANTS[i % 3:] + VARIANTS[:i % 3]
        canaries.append(mp.canary_seconds_per_op(dev))
        for v in order:
            samples[v]["step"].append(timed(step, v))
            cases[v][1].zero_grad(set_to_none=True)
            samples[v]["forward_backward"].append(timed(forward_backward, v))
            cases[v][1].zero_grad(set_to_none=True)
            samples[v]["forward"].append(timed(forward, v))
    wall = time.perf_counter() - started
    result = {
        "kind": "roofsim diagnostic: ViT-B/16 b32 self-attention variants",
        "torch": torch.__version__, "device": torch.cuda.get_device_name(dev),
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "command": " ".join(["python3", "tools/validate/vit_attention_ablation.py"] + (argv or sys.argv[1:])),
        "method": __doc__.split("\n\n")[2].replace("\n", " "),
        "batch": BATCH, "image_size": IMAGE, "samples": args.samples, "wall_seconds": wall,
        "canary_seconds_per_op": {"median": statistics.median(canaries), "min": min(canaries), "max": max(canaries)},
        "parameters": {v: sum(p.numel() for p in cases[v][0].parameters()) for v in VARIANTS},
        "variants": {v: {p: {"median_seconds": statistics.median(s), "min_seconds": min(s), "max_seconds": max(s),
                             "samples_seconds": s} for p, s in samples[v].items()} for v in VARIANTS},
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"canary {result['canary_seconds_per_op']['median'] * 1e6:.2f} us/op, {wall:.0f} s")
    for v in VARIANTS:
        print(f"{v:7s} " + "  ".join(f"{p} {statistics.median(s) * 1e3:7.3f} ms" for p, s in samples[v].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
