#!/usr/bin/env python3
"""Diagnostic: how fast PyTorch's TF32 matrix products run, by shape, layout and how long they run.

Not part of a validation run and never read by roofsim: it answers a question about the cost model
(docs/NOTES.md quotes its output). The validation's TF32 matmul and linear cases come out about a
fifth slower than roofsim predicts from the calibration's cuBLAS sweep. For a few shapes around
them, in TF32 (matmul.allow_tf32 on), float32 and bfloat16, torch.mm with its operands as
the forward (NN) and the two backward products (NT: grad @ b.T, TN: a.T @ grad) lay them out:
seconds per call, from 20 calls between two CUDA events after 3 calls, median of 5 samples
(`short`); and, for 4096^3, one product repeated for about 3 s, timed per 50 calls (`sustained`),
with the SM clock and power that nvidia-smi reports before and after, to see whether the clock
falls under a long TF32 load.
Usage, on a GPU machine: python3 tools/validate/tf32_gemm_speed.py --out F.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure_pytorch import diagnostic_document, write_json_atomic  # noqa: E402

# (m, n, k): the validation's matmul 4096^3 and linear b32x128 1024->4096, and the sweep's neighbours.
SHAPES = ((4096, 4096, 4096), (4096, 4096, 1024), (4096, 1024, 4096), (1024, 4096, 4096),
          (4096, 4096, 2048), (3072, 3072, 3072), (6144, 6144, 6144), (8192, 8192, 8192))
DTYPES = (("tf32", torch.float32, True), ("fp32", torch.float32, False), ("bf16", torch.bfloat16, False))
CALLS, SAMPLES, SUSTAINED_SECONDS = 20, 5, 3.0


def gpu_state() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception as exc:  # no nvidia-smi: say so in the record
        return f"unavailable ({exc})"


def operands(layout: str, m: int, n: int, k: int, dtype):
    """a (m x k) and b (k x n) stored as the layout says: T = stored transposed (a view of its transpose)."""
    a = torch.randn(k, m, device="cuda", dtype=dtype).t() if layout[0] == "T" else torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(n, k, device="cuda", dtype=dtype).t() if layout[1] == "T" else torch.randn(k, n, device="cuda", dtype=dtype)
    return a, b


def seconds_per_call(a, b, calls: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        torch.mm(a, b)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / calls


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args(argv)
    tf32_before = torch.backends.cuda.matmul.allow_tf32
    points = []
    try:
        for name, dtype, tf32 in DTYPES:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            for m, n, k in SHAPES:
                for layout in ("NN", "NT", "TN"):
                    a, b = operands(layout, m, n, k, dtype)
                    for _ in range(3):
                        torch.mm(a, b)
                    torch.cuda.synchronize()
                    samples = [seconds_per_call(a, b, CALLS) for _ in range(SAMPLES)]
                    s = statistics.median(samples)
                    points.append({"dtype": name, "m": m, "n": n, "k": k, "layout": layout, "seconds": s,
                                   "samples": samples, "flops_per_second": 2.0 * m * n * k / s})
                    print(f"{name} {m}x{n}x{k} {layout}: {s * 1e6:.1f} us, {2.0 * m * n * k / s / 1e12:.0f} TFLOPS", flush=True)
        torch.backends.cuda.matmul.allow_tf32 = True
        a, b = operands("NN", 4096, 4096, 4096, torch.float32)
        before = gpu_state()
        rates, t_end = [], time.perf_counter() + SUSTAINED_SECONDS
        while time.perf_counter() < t_end:
            rates.append(2.0 * 4096 ** 3 / seconds_per_call(a, b, 50))
        after = gpu_state()
        print(f"sustained tf32 4096^3 NN: first {rates[0] / 1e12:.0f}, median {statistics.median(rates) / 1e12:.0f}, "
              f"last {rates[-1] / 1e12:.0f} TFLOPS; nvidia-smi before [{before}] after [{after}]", flush=True)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32_before
    sustained = {"dtype": "tf32", "m": 4096, "n": 4096, "k": 4096, "layout": "NN", "calls_per_sample": 50,
                 "flops_per_second": rates, "nvidia_smi_before": before, "nvidia_smi_after": after,
                 "nvidia_smi_fields": "clocks.sm, clocks.mem, power.draw, temperature.gpu"}
    write_json_atomic(args.out, diagnostic_document("roofsim-tf32-gemm-speed", {"short": points, "sustained": sustained}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
