#!/usr/bin/env python3
"""Find the largest batch that trains on this GPU, by trying batches until out-of-memory: the
reference for roofsim's `--batch max` and its memory model near capacity.

Per model case (ResNet-50, BERT-base, GPT-2 small, each as tools/validate/measure_pytorch.py builds
it, in fp32 and amp-bf16), in one process: batches tried, doubling (or halving) from a start until
one trains and one runs out of memory, then bisecting between the largest batch that trained and
the smallest that did not, until they are 1 % (at least 1) apart.  A try builds the model afresh
(seeded as measure_pytorch.py seeds it) and runs two training steps
(zero_grad, forward, loss, backward, optimizer.step: the optimizer's state exists from the first);
it fails on torch.cuda.OutOfMemoryError, after which everything of it is freed (gc, empty_cache).
Each try records its peak allocated and reserved memory (max_memory_allocated / _reserved after
reset_peak_memory_stats), and the file records the CUDA context's size (total - free memory once
CUDA, cuBLAS and cuDNN are up, nothing allocated).

    python3 tools/validate/measure_max_batch.py --gpu-key h200-sxm --out FILE

The JSON (kind roofsim-max-batch-validation) is rewritten after every case.  --device cpu is refused:
out-of-memory is a GPU's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import os
import platform
import shlex
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_pytorch as mp  # noqa: E402

torch = mp.torch
SCHEMA_VERSION = 1

CASES = [  # (model, size, precision, optimizer, first batch to try: near the largest, to save tries)
    ("resnet50", 224, "amp-bf16", "sgd", 2048), ("resnet50", 224, "fp32", "sgd", 1024),
    ("bert-base", 128, "amp-bf16", "adamw", 1024), ("bert-base", 128, "fp32", "adamw", 1024),
    ("gpt2-small", 1024, "amp-bf16", "adamw", 64), ("gpt2-small", 1024, "fp32", "adamw", 32),
]


def spec_for(model: str, size: int, precision: str, optimizer: str, batch: int) -> dict:
    size_key = "image_size" if model == "resnet50" else "seq_len"
    tag = f"b{batch}x{size}" if size_key == "image_size" else f"b{batch}xs{size}"
    return {"id": f"{model}/{tag}/{precision}", "model": model, "batch": batch, size_key: size,
            "precision": precision, "optimizer": optimizer}


def free_all():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def two_steps(spec: dict, device) -> None:
    """Builds the case's model at its batch and trains two steps (everything it made is freed on return)."""
    with mp.tf32_flags(spec["precision"]):
        _, model, batch, loss_fn, _, opt, _ = mp.ready_model(spec, device, False)
        for _ in range(2):
            opt.zero_grad(set_to_none=True)
            with mp.autocast_ctx(spec["precision"], device.type):
                loss = loss_fn(model, batch)
            loss.backward()
            opt.step()
            del loss
        torch.cuda.synchronize()


def try_batch(spec: dict, device) -> dict:
    """Two training steps at spec's batch: {batch, ok, peak_allocated, peak_reserved, seconds, error}."""
    out = {"batch": spec["batch"], "ok": False}
    t0 = time.perf_counter()
    free_all()
    torch.cuda.reset_peak_memory_stats(device)
    try:
        two_steps(spec, device)
        out["ok"] = True
    except torch.cuda.OutOfMemoryError as exc:
        out["error"] = mp.first_line(exc)
    out["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
    out["peak_reserved_bytes"] = torch.cuda.max_memory_reserved(device)
    out["seconds"] = time.perf_counter() - t0
    free_all()  # after the except block: its traceback, and the tensors it held, are gone
    return out


def largest_batch(model, size, precision, optimizer, start, device, say) -> dict:
    tries = []

    def attempt(b):
        r = try_batch(spec_for(model, size, precision, optimizer, b), device)
        tries.append(r)
        say(f"  batch {b:6d}: {'ok ' if r['ok'] else 'OOM'}  peak allocated {r['peak_allocated_bytes'] / 2**30:7.2f} GiB  "
            f"reserved {r['peak_reserved_bytes'] / 2**30:7.2f} GiB  {r['seconds']:.1f} s")
        return r["ok"]

    # a bracket: lo trains, hi does not (doubling up from the start, or halving down from it)
    lo, hi, b = 0, None, start
    if attempt(b):
        lo = b
        while hi is None:
            b *= 2
            if attempt(b):
                lo = b
            else:
                hi = b
    else:
        hi = b
        while lo == 0:
            b //= 2
            if b == 0:
                return {"largest_batch": 0, "smallest_failed_batch": 1, "tries": tries}
            if attempt(b):
                lo = b
            else:
                hi = b
    while hi - lo > max(1, lo // 100):
        mid = (lo + hi) // 2
        if attempt(mid):
            lo = mid
        else:
            hi = mid
    return {"largest_batch": lo, "smallest_failed_batch": hi, "tries": tries}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="output JSON (default data/validation/max-batch/<gpu-key>-<date>.json)")
    ap.add_argument("--gpu-key", help="roofsim GPU key to record (default: mapped from the device name)")
    ap.add_argument("--filter", metavar="SUBSTR", help="only the cases whose model/precision contains SUBSTR")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: CUDA is not available (out-of-memory is a GPU's)", file=sys.stderr)
        return 2
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    # CUDA, cuBLAS and cuDNN up (a matmul and a convolution), nothing of PyTorch's allocated: the context
    a = torch.randn(256, 256, device=device)
    (a @ a).sum().item()
    torch.nn.functional.conv2d(torch.randn(1, 3, 8, 8, device=device), torch.randn(4, 3, 3, 3, device=device)).sum().item()
    del a
    free_all()
    free, total = torch.cuda.mem_get_info(device)
    gpu = mp.describe_device(device, args.gpu_key)
    now = dt.datetime.now(dt.timezone.utc)
    out = args.out or os.path.join(mp.REPO_ROOT, "data", "validation", "max-batch", f"{gpu['key']}-{now:%Y-%m-%d}.json")
    doc = {"schema_version": SCHEMA_VERSION, "kind": "roofsim-max-batch-validation", "complete": False, "gpu": gpu,
           "host": {"cpu": mp.host_cpu_name(), "platform": platform.platform()}, "software": mp.software_versions(),
           "date_utc": now.isoformat(timespec="seconds"),
           "command": " ".join(shlex.quote(x) for x in [sys.executable] + sys.argv),
           "allocator_settings": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
           "total_memory_bytes": total, "free_memory_bytes_after_init": free,
           "context_bytes": total - free - torch.cuda.memory_reserved(device),
           "method": __doc__.split("\n\n")[1].replace("\n", " "), "cases": []}
    t0 = time.perf_counter()

    def say(text):
        print(f"[{time.perf_counter() - t0:7.1f} s] {text}", flush=True)

    say(f"{gpu['name']}: {total / 2**30:.2f} GiB, {free / 2**30:.2f} GiB free after init -> {out}")
    for model, size, precision, optimizer, start in CASES:
        if args.filter and args.filter not in f"{model}/{precision}":
            continue
        say(f"{model} {precision} ({optimizer}, size {size})")
        r = largest_batch(model, size, precision, optimizer, start, device, say)
        case = spec_for(model, size, precision, optimizer, r["largest_batch"])
        case.update(r)
        doc["cases"].append(case)
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        mp.write_json_atomic(out, doc)
        say(f"  largest batch {r['largest_batch']}")
    doc["complete"] = True
    doc["total_wall_seconds"] = time.perf_counter() - t0
    mp.write_json_atomic(out, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
