#!/usr/bin/env python3
"""Diagnostic: how fast PyTorch copies a tensor into a new layout, by the length of the contiguous
runs it moves.

Not part of a validation run and never read by roofsim: it answers a question about the cost model
(docs/NOTES.md quotes its output). `.contiguous()` of a transposed or permuted tensor (aten::clone)
runs PyTorch's elementwise copy over a strided input; the framework probe times one such copy, a
transpose of 32-element runs, and models' copies move runs of other lengths (a head split of 768).
For each dtype and run length R, a tensor of about 64 MiB viewed as [A, B, R] is copied as
x.transpose(0, 1).contiguous() (R = 1: a plain 2-D transpose), 20 calls between two CUDA events
after a warm-up, five times; the median seconds per call and the bandwidth it implies (bytes read
plus bytes written over time). A contiguous copy (x.clone()) of the same tensor for reference.
Usage, on a GPU machine: python3 tools/validate/copy_speed.py --out copy_speed.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure_pytorch import diagnostic_document, write_json_atomic  # noqa: E402

RUNS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 768, 2048)
BYTES = 64 << 20
CALLS = 20


def seconds_per_call(fn) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    values = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(CALLS):
            fn()
        end.record()
        torch.cuda.synchronize()
        values.append(start.elapsed_time(end) / 1e3 / CALLS)
    return statistics.median(values)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: needs a CUDA device", file=sys.stderr)
        return 2
    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        size = torch.tensor([], dtype=dtype).element_size()
        elements = BYTES // size
        x = torch.randn(elements, device="cuda", dtype=dtype)
        moved = 2.0 * elements * size
        t = seconds_per_call(lambda v=x: v.clone())
        rows.append({"dtype": str(dtype).replace("torch.", ""), "run_elements": None, "what": "x.clone() (contiguous)",
                     "seconds": t, "bytes_per_second": moved / t})
        for run in RUNS:
            side = int((elements // run) ** 0.5)
            view = x[: side * side * run].view(side, side, run)
            t = seconds_per_call(lambda v=view: v.transpose(0, 1).contiguous())
            rows.append({"dtype": str(dtype).replace("torch.", ""), "run_elements": run,
                         "what": f"[{side}, {side}, {run}].transpose(0, 1).contiguous()", "seconds": t,
                         "bytes_per_second": 2.0 * side * side * run * size / t})
            print(f"  {rows[-1]['dtype']:8s} run {run:5d}: {t * 1e6:8.1f} us  {rows[-1]['bytes_per_second'] / 1e12:5.2f} TB/s",
                  flush=True)
        del x
    doc = diagnostic_document("roofsim-copy-speed-diagnostic", {"calls": CALLS, "rows": rows})
    write_json_atomic(args.out, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
