#!/usr/bin/env python3
"""Diagnostic: where a whole training step's time goes, part by part, against its phases timed alone.

Not part of a validation run and never read by roofsim: it answers a question about the step
simulation (docs/NOTES.md quotes its output). On the host-paced transformer steps (ViT-B/16 b32,
BERT-base b32, bert-encoder b32) and ResNet-50 b32 (host-paced, no transformer) and b128 (GPU-paced),
built as tools/validate/measure_pytorch.py builds them: after 5 warm-up steps, 20 whole steps
(zero_grad, forward, backward, optimizer.step, as the validation's step), each between two
synchronizes, with the host's clock (perf_counter) after each part and a CUDA event recorded at the
same points, then 20 of each phase alone as the validation times them (forward + backward after
zero_grad; optimizer.step on the gradients left in place), then 20 pairs alternating a forward +
backward that follows an optimizer.step() (as inside a step) with one that follows a forward +
backward (as when timed alone), each between two synchronizes. Per part, median over the steps: the
host's time in the part (`host_*`), and the GPU's clock at the part's end relative to the step's
start event (`gpu_at_*`): where the host waits and where the GPU idles. Usage, on a GPU machine:
python3 tools/validate/step_parts.py --out F.json
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

MODELS = ("vit-b-16/b32x224/amp-bf16", "bert-base/b32xs128/amp-bf16", "bert-encoder/b32xs128/amp-bf16",
          "resnet50/b32x224/amp-bf16", "resnet50/b128x224/amp-bf16")
PARTS = ("zero_grad", "forward", "backward", "optimizer")
STEPS = 20


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    out = mp.diagnostic_document("roofsim-step-parts", {"steps": STEPS, "cases": {}})
    cases = {c["id"]: c for c in mp.model_cases(smoke=False)}
    for cid in MODELS:
        spec = cases[cid]
        mode = spec["precision"]
        with mp.tf32_flags(mode):
            _, model, batch, loss_fn, _, opt, _ = mp.ready_model(spec, dev, False)

            def forward(model=model, batch=batch, loss_fn=loss_fn, mode=mode):
                with mp.autocast_ctx(mode, "cuda"):
                    return loss_fn(model, batch)

            for _ in range(5):
                opt.zero_grad(set_to_none=True)
                forward().backward()
                opt.step()
            torch.cuda.synchronize()
            host = {p: [] for p in PARTS}
            gpu_at = {p: [] for p in PARTS}
            step_wall, step_gpu = [], []
            for _ in range(STEPS):
                events = [torch.cuda.Event(enable_timing=True) for _ in range(len(PARTS) + 1)]
                torch.cuda.synchronize()
                t = [time.perf_counter()]
                events[0].record()
                opt.zero_grad(set_to_none=True)
                t.append(time.perf_counter())
                events[1].record()
                loss = forward()
                t.append(time.perf_counter())
                events[2].record()
                loss.backward()
                t.append(time.perf_counter())
                events[3].record()
                opt.step()
                t.append(time.perf_counter())
                events[4].record()
                torch.cuda.synchronize()
                end = time.perf_counter()
                del loss
                for i, p in enumerate(PARTS):
                    host[p].append(t[i + 1] - t[i])
                    gpu_at[p].append(events[0].elapsed_time(events[i + 1]) / 1e3)
                step_wall.append(end - t[0])
                step_gpu.append(events[0].elapsed_time(events[-1]) / 1e3)
            def forward_backward_wall(opt=opt) -> float:
                """zero_grad, then forward + backward between two synchronizes: wall seconds."""
                opt.zero_grad(set_to_none=True)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                forward().backward()
                torch.cuda.synchronize()
                return time.perf_counter() - t0

            fb = [forward_backward_wall() for _ in range(STEPS)]
            optimizer_alone = []
            for _ in range(STEPS):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                opt.step()
                torch.cuda.synchronize()
                optimizer_alone.append(time.perf_counter() - t0)
            # The same two, alternated step by step: a host whose speed drifts between the blocks
            # above would show a difference there and none here.
            # (the first of each pair follows the last pair's second: a forward + backward)
            fb_after_fb, fb_after_step = [], []
            for _ in range(STEPS):
                fb_after_fb.append(forward_backward_wall())
                opt.step()
                torch.cuda.synchronize()
                fb_after_step.append(forward_backward_wall())
            med = statistics.median
            rec = {"step_wall_s": med(step_wall), "step_gpu_s": med(step_gpu),
                   "interleaved_forward_backward_after_step_wall_s": med(fb_after_step),
                   "interleaved_forward_backward_after_forward_backward_wall_s": med(fb_after_fb),
                   "host_s": {p: med(v) for p, v in host.items()},
                   "gpu_at_s": {p: med(v) for p, v in gpu_at.items()},
                   "forward_backward_alone_wall_s": med(fb), "optimizer_alone_wall_s": med(optimizer_alone),
                   "canary_s": mp.canary_seconds_per_op(dev)}
            out["cases"][cid] = rec
            print(cid, "step %.2f ms (gpu %.2f);" % (rec["step_wall_s"] * 1e3, rec["step_gpu_s"] * 1e3),
                  "host " + " ".join("%s %.2f" % (p, v * 1e3) for p, v in rec["host_s"].items()) + ";",
                  "gpu at " + " ".join("%s %.2f" % (p, v * 1e3) for p, v in rec["gpu_at_s"].items()) + ";",
                  "alone: fwd+bwd %.2f, opt %.2f ms; canary %.2f us" % (rec["forward_backward_alone_wall_s"] * 1e3,
                                                                       rec["optimizer_alone_wall_s"] * 1e3,
                                                                       rec["canary_s"] * 1e6), flush=True)
            del model, opt, batch
            torch.cuda.empty_cache()
    mp.write_json_atomic(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
