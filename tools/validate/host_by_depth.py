#!/usr/bin/env python3
"""Diagnostic: does a transformer block cost the host more deep inside a model than on its own?

Not part of a validation run and never read by roofsim: it answers a question about the host-cost
model (docs/NOTES.md quotes its output). ViT-B/16 b32's forward costs the host about 14 ms inside the
model where twelve of its blocks, each timed alone, cost about 9.3 ms. Built as
tools/validate/measure_pytorch.py builds the validation's ViT-B/16 b32 (amp-bf16), each variant below
is issued while the GPU sleeps (calibrate/torch_framework_probe.py's queued_issue_seconds: the GPU's
own time never sets the pace), one autocast region per call, median of 7 samples, the variants
alternating sample by sample so that a drift of the host's speed moves them alike:

- `model`: the whole model's forward (and the loss), as the validation calls it;
- `encoder_layers`: the encoder's twelve blocks, chained, on a 32 x 197 x 768 input;
- `one_block_chained`: the first block twelve times, each on the last one's output;
- `one_block_same_input`: the first block twelve times on one input;
- `twelve_blocks_same_input`: each of the twelve blocks once, all on one input;
- `one_block_cold`: the first block once, after a pass over 256 MiB of host memory (the CPU's caches
  flushed), against `one_block_warm`, the first block once after a call of it.

Each variant's forward and its forward + backward (one backward over every output). For the chained
blocks, also the host's clock after each block (per-block host seconds by depth, the forward only),
issued while the GPU sleeps after a long wait, and issued with the GPU running them after a short
wait (a synchronize for the last sample's GPU tail, as a validation step starts), after the host
slept 50 ms, and after it spun 50 ms (does the first block's excess come from the wait, the CPU's
idleness, or neither?).
The variants that call one block twelve times cost less than a model's twelve blocks would: inside
one autocast region a weight is cast to bfloat16 once and the cast reused. A variant whose GPU work
outgrows the queue of pending launches waits for the GPU's sleep: its host time is not the host's.
Usage, on a GPU machine: python3 tools/validate/host_by_depth.py --out F.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "calibrate"))
import measure_pytorch as mp  # noqa: E402
import torch_framework_probe as probe  # noqa: E402

SAMPLES = 7
CASE = "vit-b-16/b32x224/amp-bf16"
FLUSH_BYTES = 256 << 20


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--samples", type=int, default=SAMPLES, help="samples per variant (default %(default)s)")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    cycles_per_s = probe.gpu_sleep_cycles_per_second()
    spec = {c["id"]: c for c in mp.model_cases(smoke=False)}[CASE]
    mode = spec["precision"]
    out = mp.diagnostic_document("roofsim-host-by-depth", {"case": CASE, "samples": args.samples,
                                                           "canary_s_before": mp.canary_seconds_per_op(dev), "variants": {}})
    flush_buffer = bytearray(FLUSH_BYTES)
    with mp.tf32_flags(mode):
        _, model, batch, loss_fn, _, _, _ = mp.ready_model(spec, dev, False)
        blocks = list(model.encoder.layers)
        x = torch.randn(32, 197, 768, device=dev, requires_grad=True)
        params = list(model.parameters())

        def clear_grads():
            x.grad = None
            for q in params:
                q.grad = None

        def run_blocks(kind):
            """The outputs of a block variant (one autocast region)."""
            with mp.autocast_ctx(mode, "cuda"):
                if kind == "encoder_layers":
                    return [model.encoder.layers(x)]
                if kind == "one_block_chained":
                    y = x
                    for _ in range(12):
                        y = blocks[0](y)
                    return [y]
                if kind == "one_block_same_input":
                    return [blocks[0](x) for _ in range(12)]
                if kind == "twelve_blocks_same_input":
                    return [b(x) for b in blocks]
                return [blocks[0](x)]  # one_block_cold / one_block_warm

        def forward(kind):
            if kind == "model":
                with mp.autocast_ctx(mode, "cuda"):
                    loss_fn(model, batch)
            else:
                run_blocks(kind)

        def forward_backward(kind):
            clear_grads()
            if kind == "model":
                with mp.autocast_ctx(mode, "cuda"):
                    loss = loss_fn(model, batch)
                loss.backward()
                return
            outs = run_blocks(kind)
            torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])

        def flush_caches():
            # a pass over FLUSH_BYTES of host memory, a write per 64-byte line
            flush_buffer[::64] = bytes(len(range(0, FLUSH_BYTES, 64)))

        kinds = ("model", "encoder_layers", "one_block_chained", "one_block_same_input", "twelve_blocks_same_input",
                 "one_block_cold", "one_block_warm")
        # Warm-up and each variant's wall time, to size the GPU's sleep.
        hold = {}
        for kind in kinds:
            for _ in range(3):
                forward_backward(kind)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            forward_backward(kind)
            torch.cuda.synchronize()
            hold[kind] = max(0.005, 3 * (time.perf_counter() - t0))
        values = {kind: {"forward": [], "forward_backward": []} for kind in kinds}
        for _ in range(args.samples):
            for part, fn in (("forward", forward), ("forward_backward", forward_backward)):
                for kind in kinds:
                    if kind == "one_block_cold":
                        torch.cuda.synchronize()
                        flush_caches()
                    elif kind == "one_block_warm":
                        fn(kind)
                    values[kind][part].append(probe.queued_issue_seconds(lambda k=kind, f=fn: f(k), 1, hold[kind],
                                                                        cycles_per_s))
        for kind in kinds:
            out["variants"][kind] = {part: {"seconds": statistics.median(v), "min": min(v), "max": max(v)}
                                     for part, v in values[kind].items()}
            out["variants"][kind]["gpu_hold_s"] = hold[kind]

        def chain_clocks():
            """The host's seconds for each block of the chain of twelve distinct blocks (forward)."""
            with mp.autocast_ctx(mode, "cuda"):
                y = x
                clocks = []
                t = time.perf_counter()
                for b in blocks:
                    y = b(y)
                    now = time.perf_counter()
                    clocks.append(now - t)
                    t = now
            del y
            return clocks

        # Per-block host seconds along the chain, issued while the GPU sleeps after a long wait.
        per_block = [[] for _ in blocks]
        for _ in range(args.samples):
            torch.cuda.synchronize()
            torch.cuda._sleep(int(hold["encoder_layers"] * cycles_per_s))
            for i, c in enumerate(chain_clocks()):
                per_block[i].append(c)
            torch.cuda.synchronize()
        out["chained_forward_per_block_s"] = [statistics.median(v) for v in per_block]

        # The same chain after other waits, the GPU running the blocks as they come (no sleep; the
        # host is ahead of a ViT-B/16 b32's GPU work, so it never waits for the queue):
        # - short_wait: after a synchronize that waited for the last sample's GPU tail, as a
        #   validation step starts;
        # - host_sleep: after the host slept 50 ms (time.sleep) with the GPU idle;
        # - host_spin: after the host spun 50 ms in Python with the GPU idle.
        def spin(seconds):
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                pass

        waits = {"short_wait": lambda: None, "host_sleep": lambda: time.sleep(0.05), "host_spin": lambda: spin(0.05)}
        per_block_after = {w: [[] for _ in blocks] for w in waits}
        for w in waits:  # warm-up
            chain_clocks()
            torch.cuda.synchronize()
        for _ in range(args.samples):
            for w, wait in waits.items():
                torch.cuda.synchronize()
                wait()
                for i, c in enumerate(chain_clocks()):
                    per_block_after[w][i].append(c)
        for w in waits:
            out[f"chained_forward_per_block_{w}_s"] = [statistics.median(v) for v in per_block_after[w]]
    out["canary_s_after"] = mp.canary_seconds_per_op(dev)
    for kind, rec in out["variants"].items():
        print(f"{kind:26s} forward {rec['forward']['seconds'] * 1e3:8.3f} ms, forward + backward "
              f"{rec['forward_backward']['seconds'] * 1e3:8.3f} ms", flush=True)
    for key in ("chained_forward_per_block_s", "chained_forward_per_block_short_wait_s",
                "chained_forward_per_block_host_sleep_s", "chained_forward_per_block_host_spin_s"):
        print(f"{key} (us):", " ".join(f"{s * 1e6:.0f}" for s in out[key]))
    mp.write_json_atomic(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
