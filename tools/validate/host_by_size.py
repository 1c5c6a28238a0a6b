#!/usr/bin/env python3
"""Diagnostic: does a transformer layer cost the host more at a model's size than at the probe's tiny one?

Not part of a validation run and never read by roofsim: it answers a question about the host-cost
model (docs/NOTES.md quotes its output). roofsim charges each layer the host time the framework
probe measured on tiny tensors; the host-paced transformer steps (ViT-B/16 b32, BERT-base b32)
come out slower than that predicts. For the layers of a ViT-B/16 encoder block under autocast
(bfloat16, float32 weights), each at the probe's tiny size and at ViT-B/16 b32's (32 x 197 x 768, 12
heads): the host seconds per call of its forward and of its forward + backward, 10 calls issued
while the GPU sleeps (calibrate/torch_framework_probe.py's queued_issue_seconds: the GPU's own time
never sets the pace), median of 7 samples; the two sizes alternate sample by sample, so that a
drift of the host's speed moves both alike. Also a whole torchvision EncoderBlock at both sizes.
Usage, on a GPU machine: python3 tools/validate/host_by_size.py --out F.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "calibrate"))
import measure_pytorch as mp  # noqa: E402
import torch_framework_probe as probe  # noqa: E402

SAMPLES = 7
CALLS = 10
# (batch, tokens, width, heads): the probe's tiny layers (attention at its head size, 64) and ViT-B/16 b32
SIZES = {"tiny": (1, 16, 64, 1), "vit-b32": (32, 197, 768, 12)}


class Attention(torch.nn.Module):
    """nn.MultiheadAttention called as torchvision's ViT calls it: self-attention, need_weights=False."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(width, heads, batch_first=True)

    def forward(self, x):
        return self.mha(x, x, x, need_weights=False)[0]


class Add(torch.nn.Module):
    def forward(self, x):
        return x + x


class Cast(torch.nn.Module):
    def forward(self, x):
        return x.to(torch.bfloat16)


def layers(width: int, heads: int):
    from torchvision.models.vision_transformer import EncoderBlock
    return {
        "linear_width_to_4x": torch.nn.Linear(width, 4 * width),
        "layernorm": torch.nn.LayerNorm(width),
        "gelu": torch.nn.GELU(),
        "mha_no_weights": Attention(width, heads),
        "add": Add(),
        "cast": Cast(),
        "encoder_block": EncoderBlock(heads, width, 4 * width, 0.0, 0.0),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    cycles_per_s = probe.gpu_sleep_cycles_per_second()
    sizes = {k: dict(zip(("batch", "tokens", "width", "heads"), v)) for k, v in SIZES.items()}
    out = mp.diagnostic_document("roofsim-host-by-size", {"samples": SAMPLES, "calls_per_sample": CALLS, "sizes": sizes,
                                                          "layers": {}})
    built = {size: layers(w, h) for size, (_, _, w, h) in SIZES.items()}
    for name in built["tiny"]:
        steps = {}
        for size, (b, t, w, _) in SIZES.items():
            layer = built[size][name].to(dev).train()
            x = torch.randn(b, t, w, device=dev, requires_grad=True)
            with mp.autocast_ctx("amp-bf16", "cuda"):
                grad = torch.randn_like(layer(x))

            def forward(layer=layer, x=x):
                with mp.autocast_ctx("amp-bf16", "cuda"):
                    layer(x)

            def forward_backward(layer=layer, x=x, grad=grad):
                x.grad = None
                for q in layer.parameters():
                    q.grad = None
                with mp.autocast_ctx("amp-bf16", "cuda"):
                    y = layer(x)
                y.backward(grad)

            for _ in range(3):  # warm-up: engine choices, the allocator's pools
                forward_backward()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(3):
                forward_backward()
            torch.cuda.synchronize()
            per_call = (time.perf_counter() - t0) / 3
            steps[size] = {"forward": forward, "forward_backward": forward_backward,
                           "hold_s": max(0.005, 2 * CALLS * per_call), "wall_per_call_s": per_call}
        rec = {}
        for part in ("forward", "forward_backward"):
            values = {size: [] for size in SIZES}
            for _ in range(SAMPLES):
                for size in SIZES:
                    s = steps[size]
                    values[size].append(probe.queued_issue_seconds(s[part], CALLS, s["hold_s"], cycles_per_s))
            rec[part] = {size: {"seconds": statistics.median(v), "min": min(v), "max": max(v)} for size, v in values.items()}
            rec[part]["ratio"] = rec[part]["vit-b32"]["seconds"] / rec[part]["tiny"]["seconds"]
        rec["wall_per_call_s"] = {size: steps[size]["wall_per_call_s"] for size in SIZES}
        out["layers"][name] = rec
        print(f"{name:20s} forward tiny {rec['forward']['tiny']['seconds'] * 1e6:8.1f} us, vit-b32 "
              f"{rec['forward']['vit-b32']['seconds'] * 1e6:8.1f} us (x{rec['forward']['ratio']:.2f}); forward + backward "
              f"tiny {rec['forward_backward']['tiny']['seconds'] * 1e6:8.1f} us, vit-b32 "
              f"{rec['forward_backward']['vit-b32']['seconds'] * 1e6:8.1f} us (x{rec['forward_backward']['ratio']:.2f})",
              flush=True)
    out["canary_s"] = mp.canary_seconds_per_op(dev)
    mp.write_json_atomic(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
