#!/usr/bin/env python3
"""Diagnostic: where a model's forward spends its host time in Python, by the file the code is in.

Not part of a validation run and never read by roofsim: it answers a question about the host-cost
model (docs/NOTES.md quotes its output). For four validation models at their host-paced batch
(tools/validate/measure_pytorch.py's builders), after warm-up: the forward's host seconds (wall to
the loss, 15 times, median and least), then one forward under cProfile, its functions' own time
(tottime) summed by where their code lives: `transformers`, `torchvision`, torch's module.py and
functional.py, the rest of torch, `builtin/C` (C functions: torch's ops as Python calls them), and
others by file name. cProfile's own cost inflates every call it sees (the profiled forward's wall
time is kept beside it); a tensor operator (x + y) runs inside its caller's time. Before the models,
the host seconds of one Tensor.view, Tensor.transpose and tiny add in a loop of 2000 under autocast,
and the canary. Usage, on a GPU machine: python3 tools/validate/model_code_time.py --out F.json
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_pytorch as mp  # noqa: E402

MODELS = ("bert-base/b32xs128/amp-bf16", "gpt2-small/b4xs1024/amp-bf16", "vit-b-16/b32x224/amp-bf16",
          "resnet50/b32x224/amp-bf16")


def group(filename: str) -> str:
    """Where a profiled function's code lives."""
    if filename == "~":
        return "builtin/C"
    for package in ("transformers", "torchvision"):
        if f"/{package}/" in filename:
            return package
    if filename.endswith("torch/nn/modules/module.py"):
        return "module.py"
    if filename.endswith("torch/nn/functional.py"):
        return "functional.py"
    if "/torch/" in filename:
        return "torch-other"
    return "other:" + os.path.basename(filename)


def seconds_per_call(fn, n: int = 2000) -> float:
    values = []
    for _ in range(7):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        values.append((time.perf_counter() - t0) / n)
    return statistics.median(values)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    out = mp.diagnostic_document("roofsim-model-code-time")
    x = torch.randn(4, 8, device=dev, requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out["view_s"] = seconds_per_call(lambda: x.view(8, 4))
        out["transpose_s"] = seconds_per_call(lambda: x.transpose(0, 1))
        out["add_s"] = seconds_per_call(lambda: x + x)
    out["canary_s"] = mp.canary_seconds_per_op(dev)
    print({k: v for k, v in out.items() if k.endswith("_s")}, flush=True)
    cases = {c["id"]: c for c in mp.model_cases(smoke=False)}
    for cid in MODELS:
        spec = cases[cid]
        mode = spec["precision"]
        with mp.tf32_flags(mode):
            _, model, batch, loss_fn, _, opt, _ = mp.ready_model(spec, dev, False)

            def forward():
                with mp.autocast_ctx(mode, "cuda"):
                    return loss_fn(model, batch)
            for _ in range(5):
                forward().backward()
                opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            walls = []
            for _ in range(15):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                loss = forward()
                walls.append(time.perf_counter() - t0)
                torch.cuda.synchronize()
                del loss
            profiler = cProfile.Profile()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            profiler.enable()
            loss = forward()
            profiler.disable()
            profiled_s = time.perf_counter() - t0
            del loss
            torch.cuda.synchronize()
            tottime, calls, top = collections.defaultdict(float), collections.defaultdict(int), []
            for fn, (_, n, tt, _, _) in pstats.Stats(profiler).stats.items():
                tottime[group(fn[0])] += tt
                calls[group(fn[0])] += n
                top.append((tt, n, f"{os.path.basename(fn[0])}:{fn[1]}:{fn[2]}"))
            top.sort(reverse=True)
            out[cid] = {"host_forward_s": statistics.median(walls), "host_forward_min_s": min(walls),
                        "profiled_forward_s": profiled_s, "tottime_by_group_s": dict(tottime),
                        "calls_by_group": dict(calls),
                        "top": [(round(t * 1e6, 1), n, name) for t, n, name in top[:40]],
                        "canary_s": mp.canary_seconds_per_op(dev)}
            print(cid, {k: v for k, v in out[cid].items() if k != "top"}, flush=True)
            del model, opt, batch
            torch.cuda.empty_cache()
    mp.write_json_atomic(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
