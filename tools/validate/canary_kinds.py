#!/usr/bin/env python3
"""Diagnostic: which kind of host work does a host-paced training step slow down with?

Not part of a validation run and never read by roofsim: it answers a question about the method
(docs/NOTES.md quotes its output). The validation's canary (200 `torch.add` calls on 1-element
tensors) runs in the CPU's first-level caches; a model's host work walks far more memory (Python
objects, autograd's graph, the caching allocator). For each model (tools/validate/measure_pytorch.py's
builders) for `--seconds` each, round after round: four canaries, then `--steps` training steps
between two synchronizes (host seconds per step). The canaries:
- `torch_add`: the validation's canary, seconds per add;
- `python`: the framework probe's pure-Python reference work (python_reference_work), seconds a call;
- `python_scattered`: summing 2^20 Python ints laid out in memory in shuffled order (about 40 MB,
  past the last-level cache), seconds per element;
- `memcpy`: copying 64 MiB between two bytearrays (one thread), seconds per byte.
Writes every sample and, per model, the correlation of log step time with each canary's log and the
slope of that fit (how much of a canary's move the step follows).
Usage, on a GPU machine: python3 tools/validate/canary_kinds.py --out F.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import random
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "calibrate"))
import measure_pytorch as mp  # noqa: E402
from torch_framework_probe import python_reference_work  # noqa: E402  (the probe's reference work)

MODELS = ("bert-base/b32xs128/amp-bf16", "resnet50/b32x224/amp-bf16")
SCATTERED_ELEMENTS = 1 << 20
MEMCPY_BYTES = 64 << 20


def scattered_ints() -> list:
    """2^20 distinct int objects whose list order is shuffled against their allocation order."""
    values = [i + (1 << 40) for i in range(SCATTERED_ELEMENTS)]  # large ints: each its own object
    random.Random(1).shuffle(values)
    return values


def canaries(device: torch.device, scattered: list, src: bytearray, dst: bytearray) -> dict:
    out = {"torch_add": mp.canary_seconds_per_op(device)}
    t0 = time.perf_counter()
    python_reference_work()
    out["python"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    sum(scattered)
    out["python_scattered"] = (time.perf_counter() - t0) / len(scattered)
    t0 = time.perf_counter()
    dst[:] = src
    out["memcpy"] = (time.perf_counter() - t0) / len(src)
    return out


def fit(xs: list, ys: list) -> dict:
    """Correlation of log y with log x, and the slope of log y on log x."""
    lx, ly = [math.log(v) for v in xs], [math.log(v) for v in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    sxx = sum((a - mx) ** 2 for a in lx)
    syy = sum((b - my) ** 2 for b in ly)
    sxy = sum((a - mx) * (b - my) for a, b in zip(lx, ly))
    if sxx == 0 or syy == 0:
        return {"correlation": None, "slope": None}
    return {"correlation": sxy / math.sqrt(sxx * syy), "slope": sxy / sxx}


def run_model(case: dict, device: torch.device, seconds: float, steps: int, scattered, src, dst) -> dict:
    mode = case["precision"]
    with mp.tf32_flags(mode):
        _, model, batch, loss_fn, _, opt, _ = mp.ready_model(case, device, False)

        def step():
            mp.plain_training_step(model, batch, loss_fn, opt, mode, device.type)

        for _ in range(5):  # warm-up
            step()
        torch.cuda.synchronize()
        samples = []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            c = canaries(device, scattered, src, dst)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            torch.cuda.synchronize()
            c["step"] = (time.perf_counter() - t0) / steps
            samples.append(c)
    kinds = ["torch_add", "python", "python_scattered", "memcpy"]
    steps_s = [s["step"] for s in samples]
    summary = {k: fit([s[k] for s in samples], steps_s) for k in kinds}
    for k in kinds + ["step"]:
        values = sorted(s[k] for s in samples)
        summary.setdefault("spread", {})[k] = {"p10": values[len(values) // 10], "median": statistics.median(values),
                                               "p90": values[(9 * len(values)) // 10]}
    return {"id": case["id"], "samples": samples, "summary": summary}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output JSON file")
    ap.add_argument("--seconds", type=float, default=60.0, help="seconds per model")
    ap.add_argument("--steps", type=int, default=3, help="training steps per sample")
    args = ap.parse_args()
    device = torch.device("cuda")
    cases = {c["id"]: c for c in mp.model_cases(smoke=False)}
    scattered = scattered_ints()
    src, dst = bytearray(os.urandom(MEMCPY_BYTES)), bytearray(MEMCPY_BYTES)
    result = {"kind": "roofsim-diagnostic-canary-kinds", "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "command": " ".join([os.path.basename(sys.executable)] + sys.argv), "models": []}
    for cid in MODELS:
        r = run_model(cases[cid], device, args.seconds, args.steps, scattered, src, dst)
        result["models"].append(r)
        print(f"{cid}: {len(r['samples'])} samples, step p10/median/p90 "
              + "/".join(f"{r['summary']['spread']['step'][q] * 1e3:.1f}" for q in ("p10", "median", "p90")) + " ms")
        for k, v in r["summary"].items():
            if k == "spread" or v["correlation"] is None:
                continue
            sp = r["summary"]["spread"][k]
            print(f"   {k:17s} correlation {v['correlation']:+.2f} slope {v['slope']:+.2f}  p90/p10 {sp['p90'] / sp['p10']:.2f}")
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
