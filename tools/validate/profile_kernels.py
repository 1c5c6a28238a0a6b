#!/usr/bin/env python3
"""Where the time of a real PyTorch training step or layer goes, under torch.profiler.

One step of a model from tools/validate/measure_pytorch.py's model cases (or 10 back-to-back repetitions of a layer case, as
its steady-state timing runs them), after warm-up, under torch.profiler; writes the CUDA kernels
grouped by name (calls, total GPU seconds), how long the GPU sat idle between them (waiting for the
host), the host's synchronizing calls, and the aten ops with the most host (CPU self) time, as JSON;
for a model, also the kernels of each phase (forward, backward, optimizer) from a second profiled
step with a synchronize after each phase (`by_phase`), and that step's kernels by the aten op that
launched them and its input shapes (`by_op`: to set a model's kernels beside roofsim's one by one).
Like measure_pytorch.py it only checks roofsim (data/validation/profiles/), it never feeds it; the
profiler slows the host, so its host times are relative, not figures to compare with a prediction.

Usage: python3 tools/validate/profile_kernels.py --out DIR [--case resnet50/b128x224/amp-bf16 ...]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime as dt
import json
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_pytorch as mp  # noqa: E402  (the same model builders and precision settings)

DEFAULT_CASES = ["resnet50/b128x224/amp-bf16", "bert-base/b128xs128/amp-bf16", "gpt2-small/b16xs1024/amp-bf16"]


def is_annotation(e) -> bool:
    """A record_function range drawn on the GPU timeline (the phase marks, Optimizer.step#...), not a kernel."""
    if getattr(e, "is_user_annotation", False):
        return True
    return e.name.startswith(PHASE_PREFIX) or e.name.startswith("Optimizer.") or e.name.startswith("ProfilerStep")


def profile_case(case: dict, device: torch.device, warmup: int) -> dict:
    """One training step set up exactly as measure_pytorch.measure_model does it (amp modes only)."""
    mode = case["precision"]
    with mp.tf32_flags(mode):
        _, model, batch, loss_fn, info, opt, _ = mp.ready_model(case, device, False)

        def step():
            mp.plain_training_step(model, batch, loss_fn, opt, mode, device.type)

        def step_by_phase():
            # the same step with a synchronize after each phase, so that every kernel runs inside
            # its phase's host range: for the GPU time of each phase, not for the step's overlap
            opt.zero_grad(set_to_none=True)
            with torch.profiler.record_function(PHASE_PREFIX + "forward"):
                with mp.autocast_ctx(mode, device.type):
                    loss = loss_fn(model, batch)
                torch.cuda.synchronize()
            with torch.profiler.record_function(PHASE_PREFIX + "backward"):
                loss.backward()
                torch.cuda.synchronize()
            with torch.profiler.record_function(PHASE_PREFIX + "optimizer"):
                opt.step()
                torch.cuda.synchronize()

        result = profiled(step, warmup)
        by_phase = profiled(step_by_phase, 1, by_op=True)
        result["by_phase"] = by_phase["phases"]
        result["by_op"] = by_phase["by_op"]
    result.update({"id": case["id"], "model_info": info})
    return result


def profile_layer_case(case: dict, device: torch.device, warmup: int, repetitions: int = 10) -> dict:
    """A layer case's forward + backward repeated back to back, as measure_pytorch's steady state."""
    mode = case["precision"]
    with mp.tf32_flags(mode):
        torch.manual_seed(mp.case_seed(case["id"]))
        module, fn, notes = mp.build_layer(case, device)
        leaves = []
        if module is not None:
            module.to(device)
            if mp.PRECISIONS[mode][3] == "bfloat16":
                module.to(torch.bfloat16)
            module.train()
            leaves = [q for q in module.parameters() if q.requires_grad]
        inputs = mp.make_inputs(case, device)
        leaves += [x for x in inputs if x.requires_grad]
        backend = mp.sdpa_backend_ctx_factory(case["params"]["backend"])[0] if case["op"] == "sdpa" else None
        with mp.autocast_ctx(mode, device.type):
            grad = torch.randn_like(fn(*inputs))

        def steady():
            for _ in range(repetitions):
                mp.set_grads_to_none(leaves)
                with contextlib.ExitStack() as stack:
                    if backend is not None:
                        stack.enter_context(backend())
                    stack.enter_context(mp.autocast_ctx(mode, device.type))
                    out = fn(*inputs)
                out.backward(grad)

        result = profiled(steady, warmup)
    result.update({"id": case["id"], "repetitions": repetitions, "implementation": notes})
    return result


PHASE_PREFIX = "roofsim.phase."


def kernels_by_op(events, phases: dict) -> list:
    """Each phase's kernels by the aten op that launched them and its input shapes (the innermost op
    on the host when the kernel was launched): calls and GPU seconds per (phase, op, shapes, kernel)."""
    rows = collections.defaultdict(lambda: [0, 0.0])
    for e in events:
        if e.device_type != torch.autograd.DeviceType.CPU or not e.kernels:
            continue
        phase = next((name for name, ph in phases.items() if ph["range"][0] <= e.time_range.start <= ph["range"][1]), "")
        shapes = "; ".join(str(s) for s in (e.input_shapes or []) if s)
        for k in e.kernels:
            r = rows[(phase, e.name, shapes, k.name)]
            r[0] += 1
            r[1] += k.duration / 1e6
    out = [{"phase": ph, "op": op, "input_shapes": sh, "kernel": kn, "calls": c, "gpu_seconds": s}
           for (ph, op, sh, kn), (c, s) in rows.items()]
    return sorted(out, key=lambda r: (r["phase"], -r["gpu_seconds"]))


def profiled(region, warmup: int, by_op: bool = False) -> dict:
    """Kernels, GPU idle time, host synchronizations and host time by op of `region` (after warm-up);
    with `by_op`, input shapes recorded and each phase's kernels by launching op (kernels_by_op)."""
    for _ in range(warmup):
        region()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA], record_shapes=by_op) as prof:
        region()
        torch.cuda.synchronize()
    events = list(prof.events())
    kernels = collections.defaultdict(lambda: [0, 0.0])
    spans = []
    for e in events:
        if e.device_type == torch.autograd.DeviceType.CUDA and not is_annotation(e):
            k = kernels[e.name]
            k[0] += 1
            k[1] += e.device_time_total / 1e6 if hasattr(e, "device_time_total") else e.cuda_time_total / 1e6
            spans.append((e.time_range.start, e.time_range.end))
    spans.sort()
    idle_us, busy_end = 0.0, None
    for start, end in spans:  # gaps in the GPU's busy time between its first and last kernel
        if busy_end is not None and start > busy_end:
            idle_us += start - busy_end
        busy_end = end if busy_end is None else max(busy_end, end)
    syncs = collections.Counter(e.name for e in events if e.device_type == torch.autograd.DeviceType.CPU
                                and "Synchronize" in e.name)
    host = collections.defaultdict(lambda: [0, 0.0])
    for e in events:
        if e.device_type == torch.autograd.DeviceType.CPU and e.name.startswith("aten::"):
            h = host[e.name]
            h[0] += 1
            h[1] += e.self_cpu_time_total / 1e6
    rows = sorted(({"kernel": n, "calls": c, "gpu_seconds": s} for n, (c, s) in kernels.items()),
                  key=lambda r: -r["gpu_seconds"])
    # kernels by phase, where the region marks its phases (host ranges that end with a synchronize)
    phases = {}
    for e in events:
        if e.device_type == torch.autograd.DeviceType.CPU and e.name.startswith(PHASE_PREFIX):
            phases[e.name[len(PHASE_PREFIX):]] = {"host_seconds": (e.time_range.end - e.time_range.start) / 1e6,
                                                 "range": (e.time_range.start, e.time_range.end),
                                                 "kernels": collections.defaultdict(lambda: [0, 0.0])}
    for e in events:
        if e.device_type != torch.autograd.DeviceType.CUDA or is_annotation(e):
            continue
        for ph in phases.values():
            if ph["range"][0] <= e.time_range.start <= ph["range"][1]:
                k = ph["kernels"][e.name]
                k[0] += 1
                k[1] += e.device_time_total / 1e6 if hasattr(e, "device_time_total") else e.cuda_time_total / 1e6
    phase_rows = {}
    for name, ph in phases.items():
        ks = sorted(({"kernel": n, "calls": c, "gpu_seconds": s} for n, (c, s) in ph["kernels"].items()),
                    key=lambda r: -r["gpu_seconds"])
        phase_rows[name] = {"host_seconds_under_profiler": ph["host_seconds"],
                            "kernel_gpu_seconds_total": sum(r["gpu_seconds"] for r in ks),
                            "kernel_launches": sum(r["calls"] for r in ks), "kernels": ks}
    host_rows = sorted(({"op": n, "calls": c, "host_self_seconds": s} for n, (c, s) in host.items()),
                       key=lambda r: -r["host_self_seconds"])
    result = {"kernel_gpu_seconds_total": sum(r["gpu_seconds"] for r in rows),
            "kernel_launches": sum(r["calls"] for r in rows),
            "gpu_span_seconds": (spans[-1][1] - spans[0][0]) / 1e6 if spans else 0.0,
            "gpu_idle_seconds": idle_us / 1e6,
            "host_synchronizations": dict(syncs),
            "aten_ops": sum(c for c, _ in host.values()),
            "kernels": rows, "host_ops": host_rows[:40], "phases": phase_rows}
    if by_op:
        result["by_op"] = kernels_by_op(events, phases)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--case", action="append", help="model case id (repeatable); default: " + ", ".join(DEFAULT_CASES))
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    device = torch.device("cuda")
    cases = {c["id"]: c for c in mp.model_cases(smoke=False)}
    layers = {c["id"]: c for c in mp.layer_cases(smoke=False)}
    os.makedirs(args.out, exist_ok=True)
    for cid in args.case or DEFAULT_CASES:
        if cid not in cases and cid not in layers:
            print(f"unknown case {cid}; known: {', '.join(list(cases) + list(layers))}", file=sys.stderr)
            return 2
        result = (profile_case(cases[cid], device, args.warmup) if cid in cases
                  else profile_layer_case(layers[cid], device, args.warmup))
        result.update({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")})
        path = os.path.join(args.out, re.sub(r"[^A-Za-z0-9._-]", "_", cid) + ".json")  # "->", "@" out of names
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
        print(f"{cid}: {result['kernel_launches']} launches, {result['kernel_gpu_seconds_total'] * 1e3:.2f} ms of "
              f"kernels in a {result['gpu_span_seconds'] * 1e3:.2f} ms span ({result['gpu_idle_seconds'] * 1e3:.2f} ms "
              f"idle), {result['aten_ops']} aten ops, synchronizations {result['host_synchronizations']} -> {path}")
        for r in result["kernels"][:12]:
            print(f"   {r['gpu_seconds'] * 1e3:8.3f} ms {r['calls']:5d}x {r['kernel'][:110]}")
        for name, ph in result.get("by_phase", {}).items():
            print(f"   {name}: {ph['kernel_gpu_seconds_total'] * 1e3:.2f} ms of kernels, {ph['kernel_launches']} launches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
