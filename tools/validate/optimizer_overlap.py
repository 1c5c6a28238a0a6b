#!/usr/bin/env python3
"""Diagnostic: does optimizer.step()'s host work overlap its own kernels?

Not part of a validation run and never read by roofsim: it answers a question about the host-cost
model (docs/NOTES.md quotes its output). roofsim charges optimizer.step()'s whole host time (the
framework probe's per-step and per-parameter figures) before the optimizer's first kernel, so the
step's kernels run after all of it; if PyTorch launches each foreach op's kernels as it reaches
them, they run while the host is still busy with the ops after them. For the validation's models
(tools/validate/measure_pytorch.py's builders and optimizers, amp-bf16), after three training steps:

- `host_s` / `wall_s`: optimizer.step() timed 20 times from a synchronize, to the call's return
  (host) and to the next synchronize (wall); the validation's optimizer timing is the wall;
- `launches`: one step under torch.profiler, each foreach op's host start and each optimizer kernel's
  GPU start and end, in seconds from the step's start (the profiler slows the host; read the order
  and the shares, not the times), with the step's host span, its kernels' GPU time, and the part
  of that which ran before the host's span ended.

Usage, on a GPU machine: python3 tools/validate/optimizer_overlap.py --out F.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_pytorch as mp  # noqa: E402

MODELS = ("resnet50/b32x224/amp-bf16", "bert-base/b32xs128/amp-bf16", "gpt2-small/b4xs1024/amp-bf16",
          "vit-b-16/b32x224/amp-bf16")
REPEATS = 20


def profiled_step(opt) -> dict:
    """One optimizer.step() under torch.profiler: its foreach ops' host starts and its kernels' GPU spans."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        opt.step()
        torch.cuda.synchronize()
    events = list(prof.events())
    steps = [e for e in events if e.name.startswith("Optimizer.step#")]
    if not steps:
        return {"error": "no Optimizer.step# event"}
    step = steps[0]
    t0 = step.time_range.start
    host_end = step.time_range.end
    ops = [{"op": e.name, "host_start_s": (e.time_range.start - t0) * 1e-6, "host_s": (e.time_range.end - e.time_range.start) * 1e-6}
           for e in events
           if e.name.startswith("aten::_foreach_") and e.device_type == torch.autograd.DeviceType.CPU
           and step.time_range.start <= e.time_range.start <= host_end]
    # the GPU's events less the step's own range (the profiler mirrors a record_function on the GPU)
    kernels = [{"kernel": e.name[:80], "gpu_start_s": (e.time_range.start - t0) * 1e-6, "gpu_s": (e.time_range.end - e.time_range.start) * 1e-6}
               for e in events
               if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.start >= t0 and not e.name.startswith("Optimizer.")]
    ops.sort(key=lambda r: r["host_start_s"])
    kernels.sort(key=lambda r: r["gpu_start_s"])
    host_span_s = (host_end - t0) * 1e-6
    return {"host_span_s": host_span_s, "gpu_busy_s": sum(k["gpu_s"] for k in kernels),
            "gpu_busy_before_host_end_s": sum(max(0.0, min(k["gpu_start_s"] + k["gpu_s"], host_span_s) - k["gpu_start_s"]) for k in kernels),
            "gpu_end_s": max((k["gpu_start_s"] + k["gpu_s"] for k in kernels), default=0.0),
            "foreach_ops": ops, "kernels": kernels}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    out = mp.diagnostic_document("roofsim-optimizer-overlap", {"models": {}})
    cases = {c["id"]: c for c in mp.model_cases(smoke=False)}
    for cid in MODELS:
        spec = cases[cid]
        mode = spec["precision"]
        with mp.tf32_flags(mode):
            _, model, batch, loss_fn, _, opt, _ = mp.ready_model(spec, dev, False)
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                with mp.autocast_ctx(mode, "cuda"):
                    loss = loss_fn(model, batch)
                loss.backward()
                opt.step()
            torch.cuda.synchronize()
            canary = mp.canary_seconds_per_op(dev)
            host_s, wall_s = [], []
            for _ in range(REPEATS):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                opt.step()
                t1 = time.perf_counter()
                torch.cuda.synchronize()
                t2 = time.perf_counter()
                host_s.append(t1 - t0)
                wall_s.append(t2 - t0)
            row = {"optimizer": type(opt).__name__, "parameter_tensors": sum(len(g["params"]) for g in opt.param_groups),
                   "host_canary_s": canary, "host_s": mp.stats(host_s, keep_values=True),
                   "wall_s": mp.stats(wall_s, keep_values=True), "launches": profiled_step(opt)}
            out["models"][cid] = row
            la = row["launches"]
            print(f"{cid}: {row['optimizer']} over {row['parameter_tensors']} tensors; host {statistics.median(host_s) * 1e3:.3f} ms, "
                  f"wall {statistics.median(wall_s) * 1e3:.3f} ms (canary {canary * 1e6:.1f} us); profiled: host span "
                  f"{la.get('host_span_s', 0) * 1e3:.3f} ms, GPU busy {la.get('gpu_busy_s', 0) * 1e3:.3f} ms "
                  f"({la.get('gpu_busy_before_host_end_s', 0) * 1e3:.3f} before the host's end), "
                  f"GPU end {la.get('gpu_end_s', 0) * 1e3:.3f} ms", flush=True)
            for op in la.get("foreach_ops", []):
                print(f"    {op['host_start_s'] * 1e3:8.3f} ms  {op['op']}  ({op['host_s'] * 1e3:.3f} ms)", flush=True)
            del model, opt, batch
            torch.cuda.empty_cache()
    mp.write_json_atomic(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
