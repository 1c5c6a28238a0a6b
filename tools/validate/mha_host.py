#!/usr/bin/env python3
"""Diagnostic: does nn.MultiheadAttention cost the host more when its batch and heads are not 1?

Not part of a validation run and never read by roofsim: it answers a question about the framework
probe (docs/NOTES.md quotes its output). The probe times `nn.MultiheadAttention` called as ViT calls
it (batch_first, need_weights=False) on a (1, 4, 64) input with one head: with a batch and a head
count of 1, the transposes inside F.multi_head_attention_forward leave the tensors contiguous, where
a real model's (ViT-B/16: 32 x 197 x 768, 12 heads) are strided, and `linear` on a strided input
takes another path (matmul and a separate bias add). Each configuration below as a chain of 2, 6 and
10 layers, each layer on the last one's output, under torch.autocast(bfloat16); a sample is one
call of the chain right after an untimed one (a first call after a wait costs the host more:
host_by_depth.py), from a synchronize to the next (every configuration's chain is paced by the host:
even ViT-B/16's layer issues more host time than it gives the GPU), median of 9 samples, the
configurations alternating round by round; the per-layer forward and backward host seconds are the
least-squares slopes over the chain length (backward: forward + backward less forward), as the
probe's chain figures are.

Usage, on a GPU machine: python3 tools/validate/mha_host.py --out F.json
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

# name -> (embed dim, heads, batch, sequence)
CONFIGS = {
    "probe_e64_h1_b1": (64, 1, 1, 4),
    "e64_h1_b2": (64, 1, 2, 4),
    "e64_h2_b1": (64, 2, 1, 4),
    "e64_h2_b2": (64, 2, 2, 4),
    "vit_e768_h12_b32_s197": (768, 12, 32, 197),
}
LENGTHS = (2, 6, 10)
SAMPLES = 9
ROUNDS = 3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    out = mp.diagnostic_document("roofsim-mha-host", {"chain_lengths": list(LENGTHS), "samples": SAMPLES,
                                                      "rounds": ROUNDS, "configs": {}, "canary_s": []})
    chains = {}
    for name, (embed, heads, batch, seq) in CONFIGS.items():
        layers = [probe.SelfAttention(embed, heads, need_weights=False).to(dev).train() for _ in range(max(LENGTHS))]
        params = [q for layer in layers for q in layer.parameters()]
        x = torch.randn(batch, seq, embed, device=dev, requires_grad=True)
        chains[name] = (layers, params, x)
        out["configs"][name] = {"embed_dim": embed, "heads": heads, "batch": batch, "sequence": seq,
                                "backend": probe.attention_backend(layers[0], [x], lambda: probe.autocast_bf16(dev)),
                                "forward_s_by_length": {str(k): [] for k in LENGTHS},
                                "forward_backward_s_by_length": {str(k): [] for k in LENGTHS}}
    for _ in range(ROUNDS):
        out["canary_s"].append(mp.canary_seconds_per_op(dev))
        for name, (layers, params, x) in chains.items():
            rec = out["configs"][name]
            for k in LENGTHS:
                def forward(k=k, layers=layers, x=x):
                    with probe.autocast_bf16(dev):
                        y = x
                        for layer in layers[:k]:
                            y = layer(y)
                    return y

                def reset(params=params, x=x):
                    x.grad = None
                    for q in params:
                        q.grad = None

                def run_fwd(forward=forward, reset=reset):
                    reset()
                    forward()

                def run_fwd_bwd(forward=forward, reset=reset):
                    reset()
                    forward().float().sum().backward()

                for body, key in ((run_fwd, "forward_s_by_length"), (run_fwd_bwd, "forward_backward_s_by_length")):
                    samples = []
                    for _ in range(SAMPLES):
                        body()
                        torch.cuda.synchronize()
                        t0 = time.perf_counter()
                        body()
                        torch.cuda.synchronize()
                        samples.append(time.perf_counter() - t0)
                    rec[key][str(k)].append(statistics.median(samples))
    for name, rec in out["configs"].items():
        fwd = [statistics.median(rec["forward_s_by_length"][str(k)]) for k in LENGTHS]
        fb = [statistics.median(rec["forward_backward_s_by_length"][str(k)]) for k in LENGTHS]
        rec["forward_per_layer_s"] = probe.least_squares_line(LENGTHS, fwd)[0]
        rec["backward_per_layer_s"] = probe.least_squares_line(LENGTHS, fb)[0] - rec["forward_per_layer_s"]
        print(f"{name}: backend {rec['backend']}, per layer forward {rec['forward_per_layer_s'] * 1e6:.1f} us, "
              f"backward {rec['backward_per_layer_s'] * 1e6:.1f} us (chains {[round(v * 1e6) for v in fwd]} / "
              f"{[round(v * 1e6) for v in fb]} us)", flush=True)
    print(f"canary {[round(c * 1e6, 1) for c in out['canary_s']]} us", flush=True)
    mp.write_json_atomic(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
