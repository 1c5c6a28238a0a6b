#!/usr/bin/env python3
"""Where the GPU time of a real PyTorch training step goes: one step of a model from
tools/validate/measure_pytorch.py's model cases, after warm-up, under torch.profiler; writes the
CUDA kernels grouped by name (calls, total and mean GPU seconds) and the step's CPU-side op
counts as JSON. Like measure_pytorch.py it only checks roofsim (data/validation/profiles/), it never
feeds it.

Usage: python3 tools/validate/profile_kernels.py --out DIR [--case resnet50/b128x224/amp-bf16 ...]
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_pytorch as mp  # noqa: E402  (the same model builders and precision settings)

DEFAULT_CASES = ["resnet50/b128x224/amp-bf16", "bert-base/b128xs128/amp-bf16", "gpt2-small/b16xs1024/amp-bf16"]


def profile_case(case: dict, device: torch.device, warmup: int) -> dict:
    """One training step set up exactly as measure_pytorch.measure_model does it (amp modes only)."""
    mode = case["precision"]
    with mp.tf32_flags(mode):
        torch.manual_seed(mp.case_seed(case["id"]))
        model, batch, loss_fn, info = mp.build_model(case, device, False)
        model.to(device=device, dtype=getattr(torch, mp.PRECISIONS[mode][3]))
        model.train()
        batch = {k: v.to(device) for k, v in batch.items()}
        opt, _ = mp.make_optimizer(case["optimizer"], model)

        def step():
            opt.zero_grad(set_to_none=True)
            with mp.autocast_ctx(mode, device.type):
                loss = loss_fn(model, batch)
            loss.backward()
            opt.step()

        for _ in range(warmup):
            step()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
    kernels = collections.defaultdict(lambda: [0, 0.0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            k = kernels[e.name]
            k[0] += 1
            k[1] += e.device_time_total / 1e6 if hasattr(e, "device_time_total") else e.cuda_time_total / 1e6
    rows = sorted(({"kernel": n, "calls": c, "gpu_seconds": s} for n, (c, s) in kernels.items()),
                  key=lambda r: -r["gpu_seconds"])
    return {"id": case["id"], "model_info": info, "kernel_gpu_seconds_total": sum(r["gpu_seconds"] for r in rows),
            "kernel_launches": sum(r["calls"] for r in rows), "kernels": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--case", action="append", help="model case id (repeatable); default: " + ", ".join(DEFAULT_CASES))
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    device = torch.device("cuda")
    cases = {c["id"]: c for c in mp.model_cases(smoke=False)}
    os.makedirs(args.out, exist_ok=True)
    for cid in args.case or DEFAULT_CASES:
        if cid not in cases:
            print(f"unknown case {cid}; known: {', '.join(cases)}", file=sys.stderr)
            return 2
        result = profile_case(cases[cid], device, args.warmup)
        result.update({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")})
        path = os.path.join(args.out, cid.replace("/", "_") + ".json")
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
        print(f"{cid}: {result['kernel_launches']} launches, {result['kernel_gpu_seconds_total'] * 1e3:.2f} ms of kernels -> {path}")
        for r in result["kernels"][:12]:
            print(f"   {r['gpu_seconds'] * 1e3:8.3f} ms {r['calls']:5d}x {r['kernel'][:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
