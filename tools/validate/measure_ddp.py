#!/usr/bin/env python3
"""Measure data-parallel (DistributedDataParallel) training steps as PyTorch runs them, and the
bus bandwidth of torch.distributed's all_reduce: the reference for roofsim's multi-GPU predictions.

Run it under torchrun, one process per GPU; the same script serves every world size:

    torchrun --standalone --nproc_per_node N tools/validate/measure_ddp.py --out FILE

What it measures (rank 0 writes the JSON)
  * Model cases: ResNet-50, BERT-base and GPT-2 small (built as tools/validate/measure_pytorch.py
    builds them: the same seeds, precision modes and optimizers), wrapped in DDP with PyTorch's
    defaults (25 MiB buckets, broadcast_buffers, gradients not bucket views).  The batch is per GPU.
    Per case: the step (zero_grad + forward + loss + backward, which all-reduces the gradients
    bucket by bucket on NCCL's stream, + optimizer.step), and the same step under DDP's no_sync()
    (no all-reduce): their difference is the communication that the backward does not hide.
    Each sample: a barrier, a device synchronize, the step, a device synchronize, timed with
    time.perf_counter on each rank; a sample is the slowest rank's time.  Also the gradient buckets
    DDP built (from its logging data, where this PyTorch gives them) and each rank's peak memory.
  * all_reduce sweep (world size >= 2): fp32 sum of 16 B to 1 GiB, per size a batch of calls
    between two synchronizes, per call; bus bandwidth by nccl-tests' rule (x 2(n-1)/n).

Nothing is filled in: a case that cannot run is listed under "skipped" with its reason.  The JSON is
rewritten after every case.  --smoke --device cpu runs tiny configurations over gloo, for testing.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import platform
import shlex
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_pytorch as mp  # noqa: E402  (the model builders, precision modes and helpers)

torch = mp.torch
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

SCHEMA_VERSION = 1
METHOD = (
    "One process per GPU under torchrun; every rank builds the same model (seeded from the case id) "
    "and wraps it in DistributedDataParallel with PyTorch's defaults (bucket_cap_mb 25, "
    "broadcast_buffers, gradient_as_bucket_view off); the batch is per GPU. step: "
    "zero_grad(set_to_none=True) + forward + loss + backward + optimizer.step; step_no_sync: the same "
    "inside DDP.no_sync() (no gradient all-reduce). Each sample: dist.barrier, device synchronize, "
    "the step, device synchronize, time.perf_counter on each rank; the sample is the slowest rank's. "
    "Warm-up steps first. all_reduce: fp32 sum, a batch of calls between synchronizes, per call, "
    "median of the batches; busbw = bytes / time x 2(n-1)/n (nccl-tests)."
)


def cases(smoke: bool) -> list[dict]:
    def case(model, batch, size, mode, optimizer):
        size_key = "image_size" if model == "resnet50" else "seq_len"
        tag = f"b{batch}x{size}" if size_key == "image_size" else f"b{batch}xs{size}"
        return {"id": f"{model}/{tag}/{mode}", "model": model, "batch": batch, size_key: size,
                "precision": mode, "optimizer": optimizer}

    if smoke:
        return [case("resnet50", 2, 32, "fp32", "sgd"), case("gpt2-small", 2, 16, "amp-bf16", "adamw")]
    return [
        case("resnet50", 64, 224, "amp-bf16", "sgd"), case("resnet50", 128, 224, "amp-bf16", "sgd"),
        case("resnet50", 32, 224, "fp32", "sgd"), case("resnet50", 64, 224, "fp32", "sgd"),
        case("bert-base", 32, 128, "amp-bf16", "adamw"), case("bert-base", 128, 128, "amp-bf16", "adamw"),
        case("bert-base", 32, 128, "fp32", "adamw"), case("bert-base", 64, 128, "fp32", "adamw"),
        case("gpt2-small", 4, 1024, "amp-bf16", "adamw"), case("gpt2-small", 16, 1024, "amp-bf16", "adamw"),
        case("gpt2-small", 4, 1024, "fp32", "adamw"), case("gpt2-small", 8, 1024, "fp32", "adamw"),
    ]


def sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def slowest(samples: list[float], device) -> list[float]:
    """Each sample's slowest rank (an all_reduce of MAX over the ranks' lists)."""
    t = torch.tensor(samples, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def ddp_buckets(ddp) -> dict:
    """What DDP says about its gradient buckets (private logging API: whatever this version gives)."""
    with contextlib.suppress(Exception):
        data = ddp._get_ddp_logging_data()
        keep = ("bucket_sizes", "bucket_cap_bytes", "has_rebuilt_buckets", "rebuilt_bucket_sizes",
                "total_parameter_size_bytes", "num_parameter_tensors")
        return {k: data[k] for k in keep if k in data}
    return {}


def measure_case(spec: dict, device, args, world: int) -> dict:
    mode = spec["precision"]
    with mp.tf32_flags(mode):
        seed, model, batch, loss_fn, info, opt, opt_info = mp.ready_model(spec, device, args.smoke)
        ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)

        def step():
            opt.zero_grad(set_to_none=True)
            with mp.autocast_ctx(mode, device.type):
                loss = loss_fn(ddp, batch)
            loss.backward()
            opt.step()

        def timed(region, n: int) -> list[float]:
            out = []
            for _ in range(n):
                dist.barrier()
                sync(device)
                t0 = time.perf_counter()
                region()
                sync(device)
                out.append(time.perf_counter() - t0)
            return slowest(out, device)

        def no_sync_step():
            with ddp.no_sync():
                step()

        timed(step, args.warmup)
        timed(no_sync_step, 2)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        step_s = timed(step, args.repeats)
        peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
        no_sync_s = timed(no_sync_step, args.repeats)
        step_s += timed(step, args.repeats)  # a second round: the two rounds' spread is the repeatability
        peaks = [None] * world
        dist.all_gather_object(peaks, peak)
    record = dict(spec)
    record.update({
        "seed": seed, "world_size": world, "batch_per_gpu": spec["batch"],
        "global_batch": spec["batch"] * world, "model_info": info, "optimizer_info": opt_info,
        "parameter_count": sum(q.numel() for q in model.parameters()),
        "gradient_bytes": sum(q.numel() * q.element_size() for q in model.parameters() if q.requires_grad),
        "ddp": {"bucket_cap_mb": 25, "buckets": ddp_buckets(ddp)},
        "step_seconds": mp.stats(step_s, keep_values=True),
        "step_no_sync_seconds": mp.stats(no_sync_s, keep_values=True),
        "rounds": 2, "round_samples": [args.repeats, args.repeats],
        "peak_memory_bytes_per_rank": peaks,
    })
    return record


def all_reduce_sweep(device, world: int, max_bytes: int) -> list[dict]:
    rows = []
    size = 16  # by powers of 4: the ladder ends on 1 GiB
    while size <= max_bytes:
        x = torch.ones(max(1, size // 4), dtype=torch.float32, device=device)
        for _ in range(3):
            dist.all_reduce(x)
        sync(device)
        t0 = time.perf_counter()
        dist.all_reduce(x)
        sync(device)
        one = time.perf_counter() - t0
        # Every rank must issue the same number of calls: the slowest rank's first call sets it.
        calls = int(min(200, max(1, 2e-3 / max(slowest([one], device)[0], 1e-9))))
        per_call = []
        for _ in range(7):
            dist.barrier()
            sync(device)
            t0 = time.perf_counter()
            for _ in range(calls):
                dist.all_reduce(x)
            sync(device)
            per_call.append((time.perf_counter() - t0) / calls)
        per_call = slowest(per_call, device)
        s = mp.stats(per_call)
        rows.append({"op": "all_reduce", "dtype": "float32", "bytes": x.numel() * 4, "calls_per_sample": calls,
                     "seconds": s, "algorithm_bytes_per_second": x.numel() * 4 / s["median"],
                     "bus_bytes_per_second": x.numel() * 4 / s["median"] * 2 * (world - 1) / world})
        del x
        size *= 4
    return rows


def topology() -> str | None:
    with contextlib.suppress(Exception):
        return subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=20).stdout
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Run under torchrun; see the module docstring.")
    ap.add_argument("--out", help="output JSON (default data/validation/ddp/<gpu-key>-x<N>-<date>.json)")
    ap.add_argument("--gpu-key", help="roofsim GPU key to record (default: mapped from the device name)")
    ap.add_argument("--filter", metavar="SUBSTR", help="only the cases whose id contains SUBSTR")
    ap.add_argument("--device", default="cuda", help="cuda (one GPU a rank) or cpu (gloo, for testing)")
    ap.add_argument("--smoke", action="store_true", help="tiny configurations (with --device cpu: no GPU)")
    ap.add_argument("--warmup", type=int, default=5, help="warm-up steps a case (default 5)")
    ap.add_argument("--repeats", type=int, default=10, help="timed steps a round; two rounds (default 10)")
    ap.add_argument("--no-sweep", action="store_true", help="skip the all_reduce sweep")
    args = ap.parse_args(argv)
    if args.warmup < 1 or args.repeats < 1:
        ap.error("--warmup and --repeats must be at least 1")
    if "RANK" not in os.environ:
        ap.error("run under torchrun (RANK, WORLD_SIZE and LOCAL_RANK are not set)")

    local = int(os.environ.get("LOCAL_RANK", 0))
    if args.device == "cuda":
        if not torch.cuda.is_available():
            print("error: CUDA is not available (use --device cpu --smoke to test without a GPU)", file=sys.stderr)
            return 2
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
        try:  # binding the group to its device (torch >= 2.3) lets NCCL set up eagerly
            dist.init_process_group("nccl", device_id=device)
        except TypeError:
            dist.init_process_group("nccl")
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    todo = [c for c in cases(args.smoke) if not args.filter or args.filter in c["id"]]

    gpu = mp.describe_device(device, args.gpu_key)
    now = dt.datetime.now(dt.timezone.utc)
    out = args.out or os.path.join(mp.REPO_ROOT, "data", "validation", "ddp",
                                   f"{gpu['key']}-x{world}-{now:%Y-%m-%d}{'-smoke' if args.smoke else ''}.json")
    software = mp.software_versions()
    with contextlib.suppress(Exception):
        software["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    doc = {
        "schema_version": SCHEMA_VERSION, "kind": "roofsim-ddp-validation", "complete": False,
        "gpu": gpu, "world_size": world, "backend": dist.get_backend(),
        "nccl_environment": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")},
        "topology": topology() if device.type == "cuda" else None,
        "host": {"cpu": mp.host_cpu_name(), "logical_cpus": os.cpu_count(), "platform": platform.platform()},
        "software": software, "date_utc": now.isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(a) for a in [sys.executable] + sys.argv),
        "method": METHOD, "method_settings": {"warmup": args.warmup, "repeats_per_round": args.repeats,
                                              "rounds": 2, "timer": "time.perf_counter"},
        "model_cases": [], "all_reduce": [], "skipped": [],
    }
    t_start = time.perf_counter()

    def say(text: str) -> None:
        if rank == 0:
            print(f"[{time.perf_counter() - t_start:7.1f} s] {text}", flush=True)

    def save() -> None:
        if rank == 0:
            os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
            mp.write_json_atomic(out, doc)

    say(f"DDP validation: {world} x {gpu['name']} (key {gpu['key']}), torch {torch.__version__}, "
        f"{len(todo)} cases -> {out}")
    if device.type == "cuda" and not args.smoke:
        mp.warm_up_gpu(device, 1.0)
    for i, spec in enumerate(todo):
        say(f"case {i + 1}/{len(todo)} {spec['id']}")
        try:
            rec = measure_case(spec, device, args, world)
            doc["model_cases"].append(rec)
            say(f"  step {rec['step_seconds']['median'] * 1e3:.2f} ms  no_sync "
                f"{rec['step_no_sync_seconds']['median'] * 1e3:.2f} ms  x{rec['step_seconds']['samples']}")
        except Exception as exc:  # every rank fails alike (same model, same memory): record and go on
            reason = str(exc) if isinstance(exc, mp.Skip) else mp.first_line(exc)
            doc["skipped"].append({"id": spec["id"], "reason": reason})
            say(f"  skipped: {reason}")
        mp.clear_memory(device)
        save()
    if world >= 2 and not args.no_sweep:
        doc["all_reduce"] = all_reduce_sweep(device, world, (1 << 20) if args.smoke else (1 << 30))
        for r in doc["all_reduce"]:
            say(f"all_reduce {r['bytes']:>11d} B  {r['seconds']['median'] * 1e6:10.1f} us  "
                f"busbw {r['bus_bytes_per_second'] / 1e9:7.1f} GB/s")
    doc["complete"] = True
    doc["total_wall_seconds"] = time.perf_counter() - t_start
    save()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
