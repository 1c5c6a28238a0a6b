#!/usr/bin/env python3
"""Diagnostic: how fast PyTorch sums a matrix's columns (what a bias gradient is), by its shape.

Not part of a validation run and never read by roofsim: it answers a question about the cost model
(docs/NOTES.md quotes its output). For bfloat16 and float32, rows 4096, 16384 and 32768 and columns
512 to 4096 (powers of two and the widths between that transformers use), x.sum(dim=0) 50 times
between two CUDA events after three calls: seconds per call (each call's kernel, the memset its
reduction may issue and the gaps between them) and the input's bytes over that time. The same
tensor each time: inputs below the L2 cache (50 MB on an H200) are read from it.
Usage, on a GPU machine: python3 tools/validate/column_sum_speed.py --out F.json
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure_pytorch import diagnostic_document, write_json_atomic  # noqa: E402

ROWS = (4096, 16384, 32768)
COLUMNS = (512, 640, 768, 896, 1024, 1280, 1536, 2048, 2304, 2560, 3072, 4096)
CALLS = 50


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args(argv)
    points = []
    for dtype in (torch.bfloat16, torch.float32):
        for rows in ROWS:
            line = []
            for columns in COLUMNS:
                x = torch.randn(rows, columns, device="cuda", dtype=dtype)
                for _ in range(3):
                    x.sum(dim=0)
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(CALLS):
                    x.sum(dim=0)
                end.record()
                torch.cuda.synchronize()
                seconds = start.elapsed_time(end) / 1e3 / CALLS
                points.append({"dtype": str(dtype), "rows": rows, "cols": columns, "seconds": seconds,
                               "bytes": x.numel() * x.element_size()})
                line.append(f"{columns}:{seconds * 1e6:.1f}us/{x.numel() * x.element_size() / seconds / 1e12:.2f}TB/s")
            print(str(dtype)[6:], rows, " ".join(line), flush=True)
    write_json_atomic(args.out, diagnostic_document("roofsim-column-sum-speed", {"points": points}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
