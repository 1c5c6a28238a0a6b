#!/usr/bin/env python3
"""Diagnostic: does a host-paced training step slow down when the hypervisor takes the CPU?

Not part of a validation run and never read by roofsim: it answers a question about the method
(docs/NOTES.md quotes its output). For ViT-B/16 b32 and BERT-base b32 (tools/validate/
measure_pytorch.py's builders, amp-bf16), for 40 s each: the canary, then five training steps
between two synchronizes (host seconds per step), and the change in /proc/stat's CPU counters over
them (the `steal` column: time the hypervisor gave this VM's CPUs to others) and in /proc/cpuinfo's
mean clock. Writes every sample and the correlation of step time with the canary, the steal share
and the clock. Usage, on a GPU machine: python3 tools/validate/host_steal.py --out F.json
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_pytorch as mp  # noqa: E402

MODELS = ("vit-b-16/b32x224/amp-bf16", "bert-base/b32xs128/amp-bf16")
SECONDS = 40


def cpu_counters() -> dict:
    """/proc/stat's cpu lines: name -> [user, nice, system, idle, iowait, irq, softirq, steal, ...] ticks."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu"):
                parts = line.split()
                out[parts[0]] = [int(v) for v in parts[1:]]
    return out


def mean_mhz() -> float:
    with open("/proc/cpuinfo") as f:
        values = [float(line.split(":")[1]) for line in f if line.startswith("cpu MHz")]
    return statistics.mean(values) if values else 0.0


def correlation(a, b) -> float | None:
    """Pearson's correlation; None where either series is constant (a clock the VM does not report)."""
    ma, mb = statistics.mean(a), statistics.mean(b)
    sa = math.sqrt(sum((x - ma) ** 2 for x in a))
    sb = math.sqrt(sum((y - mb) ** 2 for y in b))
    return sum((x - ma) * (y - mb) for x, y in zip(a, b)) / (sa * sb) if sa and sb else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    out = mp.diagnostic_document("roofsim-host-steal", {"clock_ticks_per_second": os.sysconf("SC_CLK_TCK"),
                                                        "samples": {}, "correlations": {}})
    cases = {c["id"]: c for c in mp.model_cases(smoke=False)}
    for cid in MODELS:
        spec = cases[cid]
        mode = spec["precision"]
        with mp.tf32_flags(mode):
            _, model, batch, loss_fn, _, opt, _ = mp.ready_model(spec, dev, False)

            def step():
                mp.plain_training_step(model, batch, loss_fn, opt, mode, "cuda")
            for _ in range(5):
                step()
            torch.cuda.synchronize()
            rows = []
            end = time.perf_counter() + SECONDS
            while time.perf_counter() < end:
                before = cpu_counters()
                canary = mp.canary_seconds_per_op(dev)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(5):
                    step()
                torch.cuda.synchronize()
                t1 = time.perf_counter()
                after = cpu_counters()
                delta = [b - a for a, b in zip(before["cpu"], after["cpu"])]
                rows.append({"step_s": (t1 - t0) / 5, "canary_s": canary, "steal_ticks": delta[7],
                             "all_ticks": sum(delta), "mhz_mean": mean_mhz()})
            steps = [r["step_s"] for r in rows]
            out["samples"][cid] = rows
            out["correlations"][cid] = {
                "step_canary": correlation(steps, [r["canary_s"] for r in rows]),
                "step_steal_share": correlation(steps, [r["steal_ticks"] / max(1, r["all_ticks"]) for r in rows]),
                "step_mhz": correlation(steps, [r["mhz_mean"] for r in rows])}
            ordered = sorted(steps)
            print(f"{cid}: {len(rows)} samples, step median {statistics.median(steps) * 1e3:.2f} ms, "
                  f"p10 {ordered[len(ordered) // 10] * 1e3:.2f}, p90 {ordered[len(ordered) * 9 // 10] * 1e3:.2f}; "
                  f"steal ticks {sum(r['steal_ticks'] for r in rows)} of {sum(r['all_ticks'] for r in rows)}; "
                  f"correlations {out['correlations'][cid]}", flush=True)
            del model, opt, batch
            torch.cuda.empty_cache()
    mp.write_json_atomic(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
