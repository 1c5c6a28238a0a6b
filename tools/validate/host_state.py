#!/usr/bin/env python3
"""Diagnostic: the host's speed for eager PyTorch over a process's life, and what changes it.

Not part of a validation run and never read by roofsim: it answers questions about the method
(docs/NOTES.md quotes its output). At each "point" it takes, five times over, the canary of
tools/validate/measure_pytorch.py (200 tiny adds between two synchronizes) and the steady-state
host time of a few layers, forward + backward repeated back to back as measure_pytorch.py's
steady state runs them: the framework probe's tiny instance of each op
(calibrate/torch_framework_probe.py, layer_cases) beside a host-paced validation case of the same op.
Each point reports the medians, in seconds and in canaries.

Phases (--phase, one process each):
  profiler  points before and after one torch.profiler region (CUPTI) around one tiny add, then
            after gc.collect() + torch.cuda.empty_cache(): does profiling leave the process slower?
  groups    the framework probe's host groups of one pass, in its order, a point after each, then
            its GPU-kernel-gap probe (the first to use torch.profiler) and a point after it.
  validation  measure_pytorch.py's layer cases in its order, a point every 20 cases, then after its
            clear_memory: does the validation's own work slow its process down as it goes?
  threads   twenty points a second apart with the tiny linear layer's forward alone (the main
            thread) beside its forward + backward (autograd's device thread too); run it under
            taskset -c N as well, both threads on one CPU.
  imports   points before and after importing torchvision, then transformers (as measure_pytorch.py
            does at its start), then after gc.freeze(): does what a process imported slow it down?
  depth     per-layer host cost over chains of 1 to 256 tiny layers and 1 to 64 ResNet-like blocks:
            does a layer cost more inside a graph a model's depth deep?
  clocks    the GPU's SM clock (nvidia-smi, every 20 ms) while host-paced cases run in steady state,
            against a GPU-bound case and an idle GPU.
Writes JSON (--out) and prints a table. Usage, on a GPU machine, from the repository root:
  python3 tools/validate/host_state.py --phase profiler --out host_state_profiler.json
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO_ROOT, "calibrate"))
import measure_pytorch as mp  # noqa: E402
import torch_framework_probe as probe  # noqa: E402

# (probe tiny op, autocast?) beside (validation case id): the same op, small enough that the host sets the pace
PAIRS = [
    (("linear", False), "linear/b8x256->256/fp32"),
    (("linear", True), "linear/b8x256->256/amp-bf16"),
    (("layernorm", False), "layernorm/8x768/fp32"),
    (("add", False), "add/8x256/fp32"),
    (("conv2d", False), "conv2d/8x16x16x16->16k3s1p1/fp32"),
    (("cross_entropy", False), "cross_entropy/32x1000/fp32"),
    (("flatten", False), "flatten/64x2048x1x1/fp32"),
]
REPS = 30     # forward + backward repetitions per steady-state timing
ROUNDS = 5    # canary + every workload, this many times per point


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def steady_seconds(step, reps: int = REPS) -> float:
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        step()
    sync()
    return (time.perf_counter() - t0) / reps


def probe_workload(dev, op: str, use_autocast: bool):
    build, make_inputs = probe.layer_cases(dev)[op]
    fn, inputs, params, ctx, grad = probe.tiny_layer(dev, build, make_inputs, use_autocast)
    leaves = [t for t in inputs if t.requires_grad] + [q for q in params if q.requires_grad]

    def step():
        for t in leaves:
            t.grad = None
        with ctx():
            out = fn(*inputs)
        (out[0] if isinstance(out, tuple) else out).backward(grad)
    return step


def validation_workload(dev, case_id: str):
    """A validation case built as measure_pytorch.py builds it; its steady-state repetition."""
    case = next(c for c in mp.layer_cases(False) if c["id"] == case_id)
    run = mp.LayerRun(case, dev)

    def step():
        mp.set_grads_to_none(run.grad_leaves)
        with mp.autocast_ctx(run.mode, dev.type):
            out = run.fn(*run.inputs)
        out.backward(run.grad)
    return step


def make_workloads(dev):
    workloads = {}
    for (op, use_autocast), case_id in PAIRS:
        suffix = "_autocast" if use_autocast else ""
        workloads[f"probe {op}{suffix}"] = probe_workload(dev, op, use_autocast)
        workloads[f"case {case_id}"] = validation_workload(dev, case_id)
    for step in workloads.values():  # warm-up: library set-up, the allocator's pools
        steady_seconds(step, 5)
    return workloads


def point(label: str, dev, workloads, started: float) -> dict:
    canaries, times = [], {name: [] for name in workloads}
    for _ in range(ROUNDS):
        canaries.append(mp.canary_seconds_per_op(dev))
        for name, step in workloads.items():
            times[name].append(steady_seconds(step))
    canary = statistics.median(canaries)
    result = {"label": label, "at_seconds": time.perf_counter() - started, "canary_seconds": canary,
              "seconds": {name: statistics.median(v) for name, v in times.items()}}
    result["canaries"] = {name: s / canary for name, s in result["seconds"].items()}
    shown = "  ".join(f"{s * 1e6:7.1f}" for s in result["seconds"].values())
    print(f"[{result['at_seconds']:6.1f} s] {label:34s} canary {canary * 1e6:5.1f} us | {shown}", flush=True)
    return result


def phase_profiler(dev, workloads, started) -> list:
    points = [point("start", dev, workloads, started)]
    time.sleep(2.0)
    points.append(point("start + 2 s idle", dev, workloads, started))
    x = torch.ones(1, device=dev)
    with contextlib.suppress(probe.KernelTimesUnavailable):  # on a CPU: nothing to profile
        probe.kernel_seconds(lambda: torch.add(x, x))
    for i in range(3):
        points.append(point(f"after one torch.profiler region ({i + 1})", dev, workloads, started))
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    points.append(point("after gc.collect + empty_cache", dev, workloads, started))
    time.sleep(5.0)
    points.append(point("after 5 s idle", dev, workloads, started))
    return points


def phase_groups(dev, workloads, started) -> list:
    points = [point("start", dev, workloads, started)]
    p = probe.Probe(dev, repeats=11, warmup=2)
    groups = [
        ("eager ops", lambda: probe.eager_op_probes(p, 2000)),
        ("backward", lambda: probe.backward_probes(p, 100, 1000)),
        ("layers", lambda: probe.layer_probes(p, 41)),
        ("backward call split", lambda: probe.backward_split_probes(p, 21)),
        ("layers in steady state", lambda: probe.steady_layer_probes(p, 11, 50)),
        ("optimizers", lambda: probe.optimizer_probes(p, 64, 512, 256, 4 * 1024 * 1024)),
        ("synchronize and events", lambda: probe.sync_probes(p, 1000)),
        ("gpu kernel gap (torch.profiler)", lambda: probe.gpu_gap_probe(p)),
    ]
    for name, run in groups:
        with contextlib.redirect_stdout(sys.stderr):
            run()
        points.append(point(f"after {name}", dev, workloads, started))
    return points


def phase_validation(dev, workloads, started) -> list:
    """measure_pytorch.py's layer cases in its order, a point every 20 cases: does the validation's
    own work leave its process slower as it goes?"""
    import types
    points = [point("start", dev, workloads, started)]
    cases = mp.layer_cases(False)
    clock = mp.Clock(dev)
    args = types.SimpleNamespace(warmup=3, repeats=10)
    for i, case in enumerate(cases, 1):
        try:
            mp.measure_layer(case, dev, clock, args, 0.1)
        except Exception as exc:  # noqa: BLE001 (a case that cannot run here: go on, as the validation does)
            print(f"  {case['id']}: {probe.first_line(exc)}", file=sys.stderr)
        if i % 20 == 0 or i == len(cases):
            points.append(point(f"after {i} layer cases", dev, workloads, started))
    mp.clear_memory(dev)
    points.append(point("after clear_memory", dev, workloads, started))
    return points


def phase_threads(dev, workloads, started) -> list:
    """Twenty points a second apart, each with the probe's tiny linear layer forward only (the main
    thread alone) beside its forward + backward (the backward runs on autograd's device thread):
    does the host's speed change for the two threads apart, out of the canary's sight?"""
    build, make_inputs = probe.layer_cases(dev)["linear"]
    fn, inputs, params, ctx, grad = probe.tiny_layer(dev, build, make_inputs, False)

    def forward_only():
        with ctx():
            fn(*inputs)
    workloads = dict(workloads)
    workloads["probe linear forward only"] = forward_only
    steady_seconds(forward_only, 5)
    points = []
    for i in range(20):
        points.append(point(f"point {i + 1}", dev, workloads, started))
        time.sleep(1.0)
    return points


def phase_imports(dev, workloads, started) -> list:
    """Three points, then torchvision imported, three more, then transformers (measure_pytorch.py
    imports both at its start, for their versions), three more, then gc.freeze(): does what a
    process has imported change how fast it issues ops?"""
    points = []

    def three(label):
        n_objects = len(gc.get_objects())
        for i in range(3):
            points.append(point(f"{label} ({i + 1})", dev, workloads, started))
            points[-1]["gc_objects"] = n_objects
    three("start")
    for name in ("torchvision", "transformers"):
        try:
            __import__(name)
        except ImportError as exc:
            print(f"  {name} not importable: {exc}", file=sys.stderr)
            continue
        three(f"{name} imported")
    gc.collect()
    gc.freeze()
    three("gc.freeze()")
    return points


def phase_depth(dev, workloads, started) -> list:
    """Per-layer host cost over chains of 1 to 256 of the probe's tiny layers (its chain_cases; the
    probe's own chains stop at 16), and over 1 to 64 ResNet-like blocks (convolution without bias,
    batch norm, ReLU) under autocast: does a layer cost more inside a graph a model's depth deep?
    Forward + backward per chain, seconds per layer (per block), median of 5, three rounds
    interleaved with canaries."""
    cases = probe.chain_cases(dev)
    nn = torch.nn

    def block():
        return nn.Sequential(nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU()).to(dev).train()
    chains = {op: (cases[op][0], cases[op][1], [1, 4, 16, 64, 256], False)
              for op in ("linear", "conv2d_nobias", "relu", "layernorm", "gelu")}
    chains["resnet_block"] = (block, lambda: torch.randn(2, 4, 8, 8, device=dev, requires_grad=True), [1, 4, 16, 64], True)
    built = {}
    for op, (make_layer, make_input, lengths, use_autocast) in chains.items():
        layers = [make_layer() for _ in range(max(lengths))]
        params = [q for layer in layers if isinstance(layer, nn.Module) for q in layer.parameters()]
        x = make_input()
        ctx = (lambda: probe.autocast_bf16(dev)) if use_autocast else contextlib.nullcontext
        for k in lengths:
            def run(k=k, layers=layers, params=params, x=x, ctx=ctx):
                x.grad = None
                for q in params:
                    q.grad = None
                with ctx():
                    y = x
                    for layer in layers[:k]:
                        y = layer(y)
                y.sum().backward()
            built[(op, k)] = run
    for run in built.values():  # warm-up
        steady_seconds(run, 2)
    points = []
    for r in range(3):
        canary = mp.canary_seconds_per_op(dev)
        per_layer = {f"{op} x{k}": statistics.median(steady_seconds(run, 1) for _ in range(5)) / k
                     for (op, k), run in built.items()}
        points.append({"label": f"round {r + 1}", "at_seconds": time.perf_counter() - started,
                       "canary_seconds": canary, "seconds_per_layer": per_layer})
        print(f"[{points[-1]['at_seconds']:6.1f} s] round {r + 1}, canary {canary * 1e6:.1f} us", flush=True)
        for op in chains:
            row = "  ".join(f"x{key.split(' x')[1]} {v * 1e6:6.1f}" for key, v in per_layer.items()
                            if key.startswith(op + " x"))
            print(f"    {op:14s} us per layer: {row}", flush=True)
    return points


def phase_clocks(dev, workloads, started) -> list:
    """The GPU's SM clock while a host-paced case runs in steady state (the GPU idle between kernels
    much of the time) against a GPU-bound one and an idle GPU: nvidia-smi sampled every 20 ms
    (clocks.sm, MHz) in the background, 3 s per segment."""
    import subprocess
    import threading
    samples: list = []
    try:
        proc = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits", "-lms", "20"],
                                stdout=subprocess.PIPE, text=True)
    except OSError as exc:
        raise SystemExit(f"error: the clocks phase needs nvidia-smi: {exc}") from exc

    def reader():
        for line in proc.stdout:
            with contextlib.suppress(ValueError):
                samples.append((time.perf_counter(), float(line.strip())))
    threading.Thread(target=reader, daemon=True).start()
    segments = [("idle", None), ("case linear/b8x1024x768->3072/amp-bf16", "linear/b8x1024x768->3072/amp-bf16"),
                ("case conv2d/64x64x56x56->64k3s1p1/amp-bf16", "conv2d/64x64x56x56->64k3s1p1/amp-bf16"),
                ("case linear/b8x1024x768->3072/fp32 (GPU-bound)", "linear/b8x1024x768->3072/fp32"),
                ("case linear/b8x256->256/fp32", "linear/b8x256->256/fp32"), ("idle again", None)]
    points = []
    time.sleep(1.0)
    for label, case_id in segments:
        step = validation_workload(dev, case_id) if case_id else None
        if step:
            steady_seconds(step, 5)
        t0 = time.perf_counter()
        per_rep = []
        while time.perf_counter() - t0 < 3.0:
            if step:
                per_rep.append(steady_seconds(step, 20))
            else:
                time.sleep(0.05)
        t1 = time.perf_counter()
        clocks = [mhz for t, mhz in samples if t0 + 0.5 <= t <= t1]
        points.append({"label": label, "at_seconds": t0 - started, "sm_clock_mhz_median": statistics.median(clocks) if clocks else None,
                       "sm_clock_mhz_min": min(clocks) if clocks else None, "clock_samples": len(clocks),
                       "seconds_per_repetition": statistics.median(per_rep) if per_rep else None})
        rep = f"{points[-1]['seconds_per_repetition'] * 1e6:8.1f} us per rep" if per_rep else ""
        print(f"[{points[-1]['at_seconds']:6.1f} s] {label:48s} SM clock median {points[-1]['sm_clock_mhz_median']} MHz "
              f"(min {points[-1]['sm_clock_mhz_min']}, {len(clocks)} samples) {rep}", flush=True)
    proc.terminate()
    return points


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--phase", choices=("profiler", "groups", "validation", "threads", "imports", "depth", "clocks"), required=True)
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--device", default="cuda", help="torch device (default cuda; cpu tests the script only)")
    args = ap.parse_args(argv)
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print("error: CUDA is not available (--device cpu tests the script only)", file=sys.stderr)
        return 2
    started = time.perf_counter()
    workloads = make_workloads(dev)
    print("workloads (us per forward + backward): " + " | ".join(workloads), flush=True)
    phases = {"profiler": phase_profiler, "groups": phase_groups, "validation": phase_validation,
              "threads": phase_threads, "imports": phase_imports, "depth": phase_depth,
              "clocks": phase_clocks}
    points = phases[args.phase](dev, workloads, started)
    doc = {"kind": "roofsim-host-state-diagnostic", "phase": args.phase, "torch": torch.__version__,
           "device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu", "cpu": mp.host_cpu_name(),
           "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "command": " ".join([sys.executable] + sys.argv), "rounds": ROUNDS, "repetitions": REPS,
           "cpu_affinity": sorted(os.sched_getaffinity(0)),
           "points": points}
    mp.write_json_atomic(args.out, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
