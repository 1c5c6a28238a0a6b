#!/usr/bin/env python3
"""Measure PyTorch's framework (host-side) costs, as calibration figures for roofsim's predictor.

These figures may feed the predictor (they describe the framework on the machine at hand);
tools/validate/measure_pytorch.py, by contrast, only checks predictions.  Figures:

  eager_op_<op>[_autograd][_autocast]
      Host seconds to issue one small eager op: N calls (default 2000) on tiny tensors, so that
      the GPU is never the bottleneck, one synchronize at the end; (wall time) / N.  <op> is add
      (torch.add on 1-element tensors), linear (F.linear, addmm), conv2d (cuDNN), layernorm.
      _autograd: inputs and weights require grad, so autograd records a node per op.
      _autocast: the loop runs inside torch.autocast(bfloat16).  eager_op_add_out is
      torch.add(x, y, out=z), the dispatch floor with no allocation.
  backward_node_mul, backward_node_view, backward_node_transpose, backward_fixed, backward_layer_linear
      Backward host cost: a chain of K tiny ops with requires_grad; (backward time at K2 minus
      at K1) / (K2 - K1) per node; the intercept is the fixed cost of one backward() call.
      view and transpose nodes launch no kernel: their figure is the autograd engine's own cost of
      a node plus one view op.
      _linear uses F.linear layers whose weights require grad (AccumulateGrad per weight).
  backward_call
      Fixed host cost of one backward() call: the intercept of backward time over short chains of
      1 to 16 tiny multiplications (least squares), timed with CUDA events as layer_* are.
  layer_forward_<op>[_autocast], layer_backward_<op>[_autocast]
      Host cost of one layer of roofsim's graph vocabulary (docs/graph-format.md) on tiny tensors.
      Ops that keep their input's shape are measured in chains of 1, 4 and 16 layers, the per-layer
      slope being the figure (as inside a model, without per-call costs); the others one at a time,
      timed as tools/validate/measure_pytorch.py times a layer (CUDA events around the forward,
      and around forward + out.backward(grad), synchronize before and after), so that the GPU
      work is negligible: forward = median forward time; backward = median (forward + backward)
      minus median forward minus backward_call.  _autocast: under torch.autocast(bfloat16).
      Attention at a model's head size (64) is keyed by the SDPA backend that ran:
      layer_*_sdpa_<cudnn|flash|efficient|math> (F.scaled_dot_product_attention on 1 x 1 x 16 x 64),
      and layer_*_mha_no_weights (nn.MultiheadAttention(64, 1) called with need_weights=False, as
      torchvision's ViT calls it; its record names the backend). layer_*_dropout_identity: nn.Dropout(0.0),
      which returns its input (no kernel, no autograd node): the module call alone.
      layer_*_view_chain: a chain of Tensor.view calls: what a view in a model's own code costs
      (roofsim's exported IRs), beside layer_*_reshape's one-call figure, which holds the call's own
      costs.
  layer_forward_unit_<name>_autocast, layer_backward_unit_<name>_autocast
      The same chain figures of units of several kinds of tiny layers (unit_ops names them, in
      order): a pre-norm transformer block called flat (layer norm, cast, nn.MultiheadAttention
      without weights, Dropout(0), add; layer norm, cast, linear, GELU, linear, add) and a ResNet-like
      convolution, batch norm and ReLU; under autocast. A layer costs the host more among other
      kinds of layers than in a chain of its own kind (docs/validation.md, "What the diagnostics
      found"). roofsim does not read these: one factor from them for every layer of a model
      over-corrected ResNet-50 and GPT-2 small (docs/validation.md).
  layer_inference_<op>[_autocast] (and layer_inference_unit_<name>_autocast)
      The layer_forward_* figure of each of those cases (the same ops, chains of 1, 4 and 16 or one
      layer, suffixes, units and attention keys, sdpa_<backend> by the backend that ran) with the
      layer in inference: its modules in eval() (dropout an identity call, batch norm on its running
      statistics, nn.MultiheadAttention's fast path where it takes it), the timed forward under
      torch.inference_mode(), inputs without requires_grad; the same record (forward_ops counted in
      inference). Dropout and cross_entropy are measured as they run there. --add-inference-figures
      FILE measures only these, for the layer_forward_* figures FILE has, and adds them to it
      (recorded under figures_added).
  layer_steady_<op>[_autocast]
      Host cost of one tiny layer's forward + backward as a layer timed on its own runs: grads
      set to None, forward, backward(grad), 50 times back to back with no synchronize between,
      CUDA events around them; per repetition. It includes the per-call costs (autocast entry,
      the backward() call) that the chain slopes above leave out; roofsim uses it for a graph of
      that one op.
  conv_host_<k3|k1>_<fp32|fp32_strict|bf16|autocast>_<N>x<C>x<H>x<W>_<K>_<forward|forward_backward>
      A Conv2d layer's (no bias, 3x3 or 1x1, stride 1) host cost at four sizes from the tiny layer
      up, forward alone and forward + backward: 10 calls issued while the GPU sleeps
      (torch.cuda._sleep), so that the GPU never sets the pace, host seconds per call. cuDNN runs
      more kernels as a convolution grows (3 to 16 for a float32 3x3 one), each launched by the
      host; roofsim adds the growth over the tiny size to a convolution's chain figures.
  backward_call_before_first_kernel[_autocast], backward_call_after_last_kernel[_autocast]
      Where the fixed cost of a backward() call falls: a chain of 4 tiny Linear layers on an idle
      GPU; CUDA events recorded before backward(), by the first autograd node's pre-hook, by the
      input's gradient hook (after the last node's kernels) and after backward() returns. The time
      from the call to its first node, and from its last node to its return; roofsim splits
      backward_call in these shares (the hooks' own cost is in both).
  backward_walk_node
      What backward() spends on each node of its graph before it runs the first one (the engine
      walks the whole graph first): host seconds from the call to the first node's pre-hook, over
      chains of 100 and 1000 tiny multiplications, per node (the slope; nodes counted by walking
      grad_fn). Each chain figure's backward record counts its layer's nodes
      (backward_nodes_per_layer); roofsim moves that many nodes' walk from each layer's backward
      figure to the start of the backward.
  forward_ops, backward_ops (on each chain figure)
      The aten ops one more layer of the chain dispatches, forward and backward (chains of 4 and
      1, a TorchDispatchMode counting them; after the figure's timings): what the figure covers.
      Not read by roofsim. --layer-ops FILE writes these lists alone, with no timing.
  op_timings (a list, not figures)
      GPU time of PyTorch's own kernels for roofsim's memory-bound and attention ops (under
      amp-bf16 on bfloat16 activations, as inside an autocast model), on
      calibration shapes chosen apart from tools/validate's cases and large enough that the GPU,
      not the host, sets the pace: the sum of the kernel durations torch.profiler (CUPTI) records
      for K forward calls, and for K torch.autograd.grad(out, inputs, grad, retain_graph=True)
      calls; seconds per call. Batch norm is timed over 24 shapes of channels and elements per
      channel, layer norm over rows x hidden sizes, column sums (bias gradients) over rows x columns,
      casts both ways, fused attention per backend at two sequence lengths, elementwise ops and
      pools at two sizes (near the L2's and four times it), the transposing copy too (probes
      after the sixty-fourth run of 2026-12-01). roofsim derives each
      op's efficiency against its own byte and FLOP counts from these (a sum's backward, a view,
      is recorded as 0).
  optimizer_<sgd|adamw>_<foreach|for_loop|fused>_per_param, ..._per_step, ..._large
      optimizer.step() on many tiny parameters at two counts: the slope is seconds per
      parameter, the intercept seconds per step; _large is one step over 4 parameters of 4M
      elements each (bandwidth-bound, for contrast).  SGD has momentum 0.9; AdamW is default.
  optimizer_<sgd|sgd_wd|adamw>_foreach_launches
      Where optimizer.step() (foreach) launches each torch._foreach_* op's kernels: nine steps on
      512 tiny parameters under torch.profiler, after the op timings; per op that launches kernels,
      in order, the median fraction of the step's host time before its first launch (`ops`).
      roofsim issues each op's kernels at its fraction of optimizer.step()'s host time (probes
      after the eighty-sixth run of 2026-12-03).
  zero_grad_per_param, zero_grad_per_step (and _cold_; zero_grad_small_cold_, zero_grad_large_cold_)
      optimizer.zero_grad(set_to_none=True) over 64 and 512 parameters holding gradients: slope
      and intercept, as for optimizer.step(). It launches nothing: each gradient is dropped and the
      caching allocator takes its block back. Gradients of 256 and 1 Mi elements alternately (the
      figures roofsim reads, _cold: the CPU's caches flushed before each call), and each size alone.
  gpu_kernel_gap
      The GPU's own time between two back-to-back kernels of a stream (the next one's launch on the
      GPU): CUDA events around 200 adds of 16 M bfloat16 elements (GPU-bound) per kernel, less
      the kernels' CUPTI durations. roofsim adds it after every kernel whose time comes from kernel
      durations or bandwidth (GEMM and convolution sweeps are timed back to back and include it).
  python_reference
      One call of python_reference_work() (pure Python of the kinds a model's forward runs between
      its tensor ops): this host's Python speed. The PyTorch exporter times a model's own code on
      its host together with the same work (one copy for both: tools/roofsim_export/python_reference.py,
      which this script loads); roofsim scales
      that code's time by the ratio of the two hosts' fastest calls (the figure's min: a shared
      host's Python speed swings by 2x for seconds at a time, its median with it).
  cuda_synchronize_idle, cuda_event_record, cuda_event_elapsed_time, launch_sync_roundtrip,
  item_roundtrip
      torch.cuda.synchronize() on an idle GPU, Event.record(), Event.elapsed_time() on two
      finished events, one tiny kernel + synchronize, and tensor.item() of a fresh reduction.

Every figure is the median over --repeats measurements (after a warm-up), with min, max and
the sample count, in seconds.  A shared host's speed changes by a third or more for seconds to
minutes at a time: the host figures are taken in --passes passes (default 3) one after the other
and each is the median of its passes' figures (kept as pass_seconds).  The host's speed is recorded
all along: a canary (200 tiny adds between two synchronizes, wall / 200) before each timed
repetition and after each measurement; each figure keeps the median canary of its measurement per
pass (pass_host_canary_seconds), the run's median and spread are under "host_speed".  The figures
are written as measured; roofsim reads each on the run's median host speed (the median over passes
of pass figure x reference / its canary).  Host wall time comes from time.perf_counter().  The document is
JSON with kind "roofsim-framework-profile", written atomically (temporary file + os.replace).
A figure that cannot be measured (API missing, no GPU) is listed under "skipped" with the reason.
Python 3.11+ standard library and torch only; works with torch 1.13 and 2.x.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import shlex
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError as exc:
    sys.exit(f"torch_framework_probe.py needs PyTorch: {exc}")

SCHEMA_VERSION = 1
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Device naming is shared with the validation script: one mapping from device names to GPU keys.
sys.path.insert(0, os.path.join(REPO_ROOT, "tools", "validate"))
from measure_pytorch import (  # noqa: E402
    BACKWARD_CANARY_NODES, CANARY_OPS, backward_canary_seconds_per_node, canary_seconds_per_op, gpu_key_for, host_cpu_name,
    write_json_atomic)


def _load_python_reference():
    """tools/roofsim_export/python_reference.py, the exporter's own reference work, loaded as a file:
    importing the package would import the whole exporter."""
    import importlib.util
    path = os.path.join(REPO_ROOT, "tools", "roofsim_export", "python_reference.py")
    spec = importlib.util.spec_from_file_location("roofsim_python_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The reference work the exporter times too (python_reference): one copy of it for both.
_python_reference = _load_python_reference()
python_reference_work = _python_reference.python_reference_work
python_reference_calls = _python_reference.python_reference_calls


def least_squares_line(xs, ys) -> tuple[float, float]:
    """The least-squares line through (x, y): (slope, intercept)."""
    mean_x = sum(xs) / len(xs)
    mean_y = sum(ys) / len(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)
    return slope, mean_y - slope * mean_x


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


class Probe:
    """Collects figures; each one is the median of per-repetition values in seconds.

    A shared host's speed changes for seconds at a time, so the probe measures it all along: a
    canary (canary_seconds_per_op) before every timed repetition (at most one per
    canary_spacing_s) and after each measurement. Each host figure keeps the median canary of the
    window in which it was measured (host_canary_seconds), and the median backward canary taken
    right after each canary (host_backward_canary_seconds: autograd's device thread, which
    backward() runs on and the canary does not see)."""

    def __init__(self, device: torch.device, repeats: int, warmup: int, canary_spacing_s: float = 0.02):
        self.device = device
        self.cuda = device.type == "cuda"
        self.repeats = repeats
        self.warmup = warmup
        self.figures: dict = {}
        self.skipped: list = []
        self.canary_spacing_s = canary_spacing_s
        self.canaries: list[float] = []  # every canary of this pass, seconds per op
        self.backward_canaries: list[float] = []  # the backward canary after each, seconds per node
        self._window: list[float] = []  # the canaries of the measurement under way
        self._backward_window: list[float] = []  # and their backward canaries
        self._closed = True
        self._last_canary_at = -1e9

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def _canary(self) -> None:
        """A canary and a backward canary, into this pass's lists and the window."""
        value = canary_seconds_per_op(self.device)
        backward = backward_canary_seconds_per_node(self.device)
        self.canaries.append(value)
        self.backward_canaries.append(backward)
        self._window.append(value)
        self._backward_window.append(backward)
        self._last_canary_at = time.perf_counter()

    def tick(self) -> None:
        """Call before a timed repetition (never inside one): a canary, unless one was taken less
        than canary_spacing_s ago. The first tick after a record() opens the next window with the
        canary that closed the last one."""
        if self._closed:
            self._window = self._window[-1:]
            self._backward_window = self._backward_window[-1:]
            self._closed = False
        if time.perf_counter() - self._last_canary_at >= self.canary_spacing_s:
            self._canary()

    def record(self, key: str, samples_s: list[float], method: str, host: bool = True, **extra) -> None:
        """host=False: a GPU-paced figure, which the host's speed does not set (no canary kept)."""
        self.figures[key] = {"seconds": statistics.median(samples_s), "min": min(samples_s),
                             "max": max(samples_s), "samples": len(samples_s), "method": method, **extra}
        if host:
            if not self._closed:  # figures recorded one after another share their measurement's window
                self._canary()
            if self._window:
                self.figures[key]["host_canary_seconds"] = statistics.median(self._window)
                self.figures[key]["host_backward_canary_seconds"] = statistics.median(self._backward_window)
        self._closed = True  # a GPU-paced measurement's canaries stay out of the next figure's window
        print(f"  {key:44s} {self.figures[key]['seconds'] * 1e6:10.3f} us", flush=True)

    def skip(self, key: str, reason: str) -> None:
        self.skipped.append({"key": key, "reason": reason})
        print(f"  {key:44s} skipped: {reason}", flush=True)

    def repeat(self, measure) -> list[float]:
        """Run measure() warmup times untimed, then repeats times; return its values."""
        for _ in range(self.warmup):
            measure()
        values = []
        for _ in range(self.repeats):
            self.tick()
            values.append(measure())
        return values


def merge_passes(passes: list[dict]) -> dict:
    """Each figure over the passes that measured it: the median of their figures (seconds), the
    least min and largest max, the samples summed, each pass's figure kept (pass_seconds) and the
    host's speed while it was measured (pass_host_canary_seconds)."""
    merged: dict = {}
    for key in dict.fromkeys(k for figures in passes for k in figures):
        got = [figures[key] for figures in passes if key in figures]
        first = dict(got[0])
        if len(got) > 1:
            first.update({"seconds": statistics.median(f["seconds"] for f in got),
                          "min": min(f["min"] for f in got), "max": max(f["max"] for f in got),
                          "samples": sum(f["samples"] for f in got),
                          "pass_seconds": [f["seconds"] for f in got],
                          **({"pass_host_canary_seconds": [f["host_canary_seconds"] for f in got]}
                             if all("host_canary_seconds" in f for f in got) else {}),
                          **({"pass_host_backward_canary_seconds": [f["host_backward_canary_seconds"] for f in got]}
                             if all("host_backward_canary_seconds" in f for f in got) else {}),
                          "method": f"{got[0]['method']}; median of {len(got)} passes over the probe's run"})
        merged[key] = first
    return merged


# ----------------------------------------------------------------------------- (a) eager ops

def autocast_bf16(device: torch.device):
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def autocast_context(dev, use_autocast: bool):
    """A context factory for a measured body: torch.autocast(bfloat16) where use_autocast, else a null
    context (the factory is called inside the body, as a script enters autocast)."""
    return (lambda: autocast_bf16(dev)) if use_autocast else contextlib.nullcontext


def autocast_where(use_autocast: bool) -> str:
    """The words a figure's method uses for its autocast setting."""
    return "inside torch.autocast(bfloat16)" if use_autocast else "no autocast"


def eager_op_probes(p: Probe, n_ops: int) -> None:
    dev = p.device

    def tensors(requires_grad: bool):
        g = requires_grad
        r = lambda *shape: torch.randn(*shape, device=dev).requires_grad_(g)  # noqa: E731
        return {
            "add": (lambda a, b: torch.add(a, b), (r(1), r(1))),
            "linear": (lambda x, w, b: F.linear(x, w, b), (r(1, 8), r(8, 8), r(8))),
            "conv2d": (lambda x, w: F.conv2d(x, w, padding=1), (r(1, 1, 4, 4), r(1, 1, 3, 3))),
            "layernorm": (lambda x, w, b: F.layer_norm(x, (8,), w, b), (r(1, 8), r(8), r(8))),
        }

    def issue_loop(fn, args, use_autocast: bool):
        """Wall seconds per op for n_ops calls plus one synchronize, and issue-only seconds."""
        def measure():
            ctx = autocast_bf16(dev) if use_autocast else contextlib.nullcontext()
            with ctx:
                p.sync()
                t0 = time.perf_counter()
                for _ in range(n_ops):
                    fn(*args)
                t_issue = time.perf_counter() - t0
                p.sync()
                t_total = time.perf_counter() - t0
            issue.append(t_issue / n_ops)
            return t_total / n_ops
        issue: list[float] = []
        samples = p.repeat(measure)
        return samples, statistics.median(issue[-len(samples):])

    for requires_grad in (False, True):
        ops = tensors(requires_grad)
        for use_autocast in (False, True):
            for op, (fn, args) in ops.items():
                key = f"eager_op_{op}" + ("_autograd" if requires_grad else "") + \
                    ("_autocast" if use_autocast else "")
                try:
                    samples, issue_s = issue_loop(fn, args, use_autocast)
                except Exception as exc:  # e.g. autocast bf16 unsupported here
                    p.skip(key, first_line(exc))
                    continue
                p.record(key, samples,
                         f"{n_ops} x {op} on tiny tensors, one synchronize, wall / {n_ops}; inputs "
                         f"requires_grad={requires_grad}; "
                         + ("inside torch.autocast(bfloat16)" if use_autocast else "no autocast"),
                         issue_only_seconds=issue_s)

    x, y, z = (torch.randn(1, device=dev) for _ in range(3))
    samples, issue_s = issue_loop(lambda: torch.add(x, y, out=z), (), False)
    p.record("eager_op_add_out", samples,
             f"{n_ops} x torch.add(x, y, out=z) on 1-element tensors, one synchronize, wall / {n_ops}",
             issue_only_seconds=issue_s)


# ----------------------------------------------------------------------------- (b) backward

def backward_probes(p: Probe, k1: int, k2: int) -> None:
    dev = p.device

    def mul_chain(k):
        x = torch.randn(16, device=dev, requires_grad=True)
        y = x
        for _ in range(k):
            y = y * 1.0001
        return y.sum()

    def view_chain(k):
        # alternating views, as the head splits and merges of attention (ViewBackward per node, no kernel)
        x = torch.randn(4, 16, device=dev, requires_grad=True)
        y = x
        for i in range(k):
            y = y.view(8, 8) if i % 2 == 0 else y.view(4, 16)
        return y.sum()

    def transpose_chain(k):
        x = torch.randn(4, 16, device=dev, requires_grad=True)
        y = x
        for _ in range(k):
            y = y.transpose(0, 1)
        return y.sum()

    weights = [torch.randn(8, 8, device=dev, requires_grad=True) for _ in range(k2)]

    def linear_chain(k):
        y = torch.randn(1, 8, device=dev, requires_grad=True)
        for w in weights[:k]:
            y = F.linear(y, w)
        return y.sum()

    def backward_time(build, k) -> float:
        for w in weights:  # every backward starts from .grad None, as after zero_grad()
            w.grad = None
        loss = build(k)  # graph built outside the timed region
        p.sync()
        t0 = time.perf_counter()
        loss.backward()
        p.sync()
        return time.perf_counter() - t0

    for key, build, what in (("mul", mul_chain, "y = y * c"), ("view", view_chain, "y = y.view(...)"),
                             ("transpose", transpose_chain, "y = y.transpose(0, 1)"),
                             ("linear", linear_chain, "F.linear(y, w_i)")):
        slopes, intercepts = [], []

        def measure():
            t1, t2 = backward_time(build, k1), backward_time(build, k2)
            slope = (t2 - t1) / (k2 - k1)
            intercepts.append(t1 - slope * k1)
            return slope

        slopes = p.repeat(measure)
        intercepts = intercepts[-len(slopes):]
        name = "backward_layer_linear" if key == "linear" else f"backward_node_{key}"
        p.record(name, slopes, f"backward() of a chain of {what} ({k1} and {k2} long), tiny "
                               f"tensors; (T({k2}) - T({k1})) / {k2 - k1}; synchronize around backward")
        if key == "mul":
            p.record("backward_fixed", intercepts, f"intercept of the {what} chain fit: "
                                                   f"T({k1}) - slope * {k1}; one backward() call")


# ----------------------------------------------------------------------------- (b2) layers

class SelfAttention(torch.nn.Module):
    """nn.MultiheadAttention called as self-attention: mha(x, x, x) as in the validation cases
    (need_weights=True, PyTorch's default: the attention weights computed by bmm and softmax), or
    mha(x, x, x, need_weights=False) as torchvision's ViT calls it (the SDPA path)."""

    def __init__(self, embed_dim: int, heads: int, need_weights: bool = True):
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(embed_dim, heads, batch_first=True)
        self.need_weights = need_weights

    def forward(self, x):
        return self.mha(x, x, x, need_weights=self.need_weights)[0]


# Attention at a model's head size (64): PyTorch picks SDPA's backend by dtype and head size, and the
# tiny sdpa layer (head size 8) may run another one than models do. Figures of these ops are keyed by
# the backend that ran ("sdpa_cudnn", ...), found by attention_backend().
SDPA_MODEL_HEAD = 64
ATTENTION_BACKEND_OPS = (("_scaled_dot_product_cudnn_attention", "cudnn"),
                         ("_scaled_dot_product_flash_attention", "flash"),
                         ("_scaled_dot_product_efficient_attention", "efficient"),
                         ("_flash_attention_forward", "flash"), ("_efficient_attention_forward", "efficient"))


def attention_backend(fn, inputs, ctx) -> str:
    """The SDPA backend one forward of fn(*inputs) runs inside ctx(): the fused attention op it
    dispatches (a TorchDispatchMode records the aten ops), "math" where none."""
    from torch.utils._python_dispatch import TorchDispatchMode
    names = set()

    class Names(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            names.add(func._schema.name.split("::")[-1])
            return func(*args, **(kwargs or {}))
    with torch.no_grad(), ctx(), Names():
        fn(*inputs)
    for op, backend in ATTENTION_BACKEND_OPS:
        if op in names:
            return backend
    return "math"


def backend_keyed(op: str) -> bool:
    """A layer case whose figures are keyed by the attention backend that ran (sdpa_<backend>)."""
    return op == "sdpa_model_head"


def layer_cases(dev):
    """Tiny instances of roofsim's graph ops: name -> (build, make_inputs); build() -> callable."""
    nn = torch.nn
    r = lambda *shape: torch.randn(*shape, device=dev)  # noqa: E731

    def module(m):
        return lambda: m.to(dev).train()

    cases = {
        "linear": (module(nn.Linear(8, 8)), lambda: [r(4, 8)]),
        # bias-free layers (a ResNet's convolutions, GPT-2's lm_head): a cast, a reduction and two
        # autograd nodes fewer than the biased ones (roofsim: host_op_without_bias)
        "linear_nobias": (module(nn.Linear(8, 8, bias=False)), lambda: [r(4, 8)]),
        "matmul": (lambda: torch.matmul, lambda: [r(8, 8), r(8, 8)]),
        "bmm": (lambda: torch.bmm, lambda: [r(2, 8, 8), r(2, 8, 8)]),
        "conv2d": (module(nn.Conv2d(4, 4, 3, padding=1)), lambda: [r(1, 4, 8, 8)]),
        "conv2d_nobias": (module(nn.Conv2d(4, 4, 3, padding=1, bias=False)), lambda: [r(1, 4, 8, 8)]),
        "conv1d": (module(nn.Conv1d(4, 4, 3, padding=1)), lambda: [r(1, 4, 8)]),
        "conv1d_nobias": (module(nn.Conv1d(4, 4, 3, padding=1, bias=False)), lambda: [r(1, 4, 8)]),
        "batchnorm2d": (module(nn.BatchNorm2d(4)), lambda: [r(2, 4, 4, 4)]),
        "layernorm": (module(nn.LayerNorm(8)), lambda: [r(4, 8)]),
        "groupnorm": (module(nn.GroupNorm(2, 4)), lambda: [r(2, 4, 4, 4)]),
        "relu": (module(nn.ReLU()), lambda: [r(4, 8)]),
        "gelu": (module(nn.GELU()), lambda: [r(4, 8)]),
        "silu": (module(nn.SiLU()), lambda: [r(4, 8)]),
        "tanh": (module(nn.Tanh()), lambda: [r(4, 8)]),
        "sigmoid": (module(nn.Sigmoid()), lambda: [r(4, 8)]),
        "dropout": (module(nn.Dropout(0.1)), lambda: [r(4, 8)]),
        # p = 0 (torchvision's ViT default): ATen's dropout returns its input, no kernel, no node
        "dropout_identity": (module(nn.Dropout(0.0)), lambda: [r(4, 8)]),
        "add": (lambda: torch.add, lambda: [r(4, 8), r(4, 8)]),
        "mul": (lambda: torch.mul, lambda: [r(4, 8), r(4, 8)]),
        "softmax": (lambda: (lambda x: F.softmax(x, dim=-1)), lambda: [r(4, 8)]),
        "log_softmax": (lambda: (lambda x: F.log_softmax(x, dim=-1)), lambda: [r(4, 8)]),
        # the targets an input, as a training loop has them: built inside the call, they cost an
        # arange's dispatch and launch that the op does not (runs 46-50: +18-23 % on host-paced cases)
        "cross_entropy": (lambda: F.cross_entropy, lambda: [r(4, 8), torch.arange(4, device=dev)]),
        # PyTorch's CUDA embedding backward sorts the indices beyond 3072 of them (the training case,
        # tokens x batch) and accumulates them atomically up to that: both paths, on tiny rows.
        "embedding": (module(nn.Embedding(4096, 8)), lambda: [torch.randint(0, 4096, (4000,), device=dev)]),
        "embedding_atomic": (module(nn.Embedding(16, 8)), lambda: [torch.randint(0, 16, (4,), device=dev)]),
        "maxpool2d": (module(nn.MaxPool2d(2)), lambda: [r(1, 4, 8, 8)]),
        "avgpool2d": (module(nn.AvgPool2d(2)), lambda: [r(1, 4, 8, 8)]),
        "adaptive_avgpool2d": (module(nn.AdaptiveAvgPool2d(1)), lambda: [r(1, 4, 8, 8)]),
        "flatten": (module(nn.Flatten()), lambda: [r(2, 4, 1, 1)]),
        "reshape": (lambda: (lambda x: x.view(-1)), lambda: [r(4, 8)]),
        "slice": (lambda: (lambda x: x.narrow(1, 0, 4)), lambda: [r(4, 8)]),
        "transpose_contiguous": (lambda: (lambda x: x.transpose(0, 1).contiguous()), lambda: [r(4, 8)]),
        "cat": (lambda: (lambda a, b: torch.cat([a, b], 0)), lambda: [r(4, 8), r(4, 8)]),
        "gelu_tanh_composite": (lambda: (lambda x: 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * torch.pow(x, 3.0))))),
                                lambda: [r(4, 8)]),
        "mha": (module(SelfAttention(8, 2)), lambda: [r(1, 4, 8)]),
        # a float32 -> bfloat16 cast (the graph op "cast"; chain_cases alternates the dtypes)
        "cast": (lambda: (lambda x: x.to(torch.bfloat16)), lambda: [r(4, 8)]),
    }
    if hasattr(nn, "RMSNorm"):
        cases["rmsnorm"] = (module(nn.RMSNorm(8)), lambda: [r(4, 8)])
    if hasattr(F, "scaled_dot_product_attention"):
        cases["sdpa"] = (lambda: F.scaled_dot_product_attention, lambda: [r(1, 2, 8, 8), r(1, 2, 8, 8), r(1, 2, 8, 8)])
        d = SDPA_MODEL_HEAD
        cases["sdpa_model_head"] = (lambda: F.scaled_dot_product_attention, lambda: [r(1, 1, 16, d), r(1, 1, 16, d), r(1, 1, 16, d)])
        cases["mha_no_weights"] = (module(SelfAttention(d, 1, need_weights=False)), lambda: [r(1, 4, d)])
    return cases


def event_timer(p: Probe):
    """Seconds of `body` between two CUDA events (wall seconds on CPU), synchronizing around it."""
    def timed(body) -> float:
        p.tick()
        p.sync()
        if p.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            body()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 1e3
        t0 = time.perf_counter()
        body()
        return time.perf_counter() - t0
    return timed


def tiny_layer(dev, build, make_inputs, use_autocast: bool):
    """A layer case of layer_cases() made ready to time: (fn, inputs with float ones requiring grad,
    the module's parameters, the autocast context or a null one, a random upstream gradient)."""
    fn = build()
    inputs = make_inputs()
    for t in inputs:
        if t.is_floating_point():
            t.requires_grad_(True)
    ctx = autocast_context(dev, use_autocast)
    with ctx():
        out = fn(*inputs)
    grad = torch.randn_like(out[0] if isinstance(out, tuple) else out)
    params = list(fn.parameters()) if isinstance(fn, torch.nn.Module) else []
    return fn, inputs, params, ctx, grad


def layer_probes(p: Probe, samples: int) -> None:
    dev = p.device
    timed = event_timer(p)

    def median_of(body) -> list[float]:
        for _ in range(max(3, samples // 5)):
            timed(body)
        return [timed(body) for _ in range(samples)]

    # backward_call: intercept of backward time over chains of 1..16 multiplications.
    lengths = [1, 2, 4, 8, 16]
    chain_medians = []
    for k in lengths:
        x = torch.randn(16, device=dev, requires_grad=True)

        def chain(k=k, x=x):
            y = x
            for _ in range(k):
                y = y * 1.0001
            return y

        graph_outputs = []
        def prepare(chain=chain):
            graph_outputs.append(chain())
        def backward():
            graph_outputs.pop().backward(torch.ones(16, device=dev))
        values = []
        for _ in range(samples + 3):
            x.grad = None
            prepare()
            values.append(timed(backward))
        chain_medians.append(statistics.median(values[3:]))
    slope, backward_call = least_squares_line(lengths, chain_medians)
    p.record("backward_call", [backward_call], "intercept of median backward() time (CUDA events) over "
             "chains of 1, 2, 4, 8, 16 tiny multiplications, least squares; one backward() call "
             f"with its AccumulateGrad; per-multiplication slope {slope * 1e6:.2f} us",
             chain_lengths=lengths, chain_median_seconds=chain_medians)

    chain_ops = chain_cases(dev)
    layers = layer_cases(dev)
    for op, (build, make_inputs) in layers.items():
        if op in chain_ops:
            for use_autocast in (False, True):
                chain_layer_probe(p, op, chain_ops[op], use_autocast, samples, timed)
            continue
        for use_autocast in (False, True):
            suffix = "_autocast" if use_autocast else ""
            try:
                fn, inputs, params, ctx, grad = tiny_layer(dev, build, make_inputs, use_autocast)

                def forward():
                    with ctx():
                        out = fn(*inputs)
                    return out[0] if isinstance(out, tuple) else out

                def forward_backward():
                    forward().backward(grad)

                def reset():
                    for t in params + inputs:
                        t.grad = None

                def run_fwd():
                    reset()
                    forward()

                def run_fwd_bwd():
                    reset()
                    forward_backward()

                fwd = median_of(run_fwd)
                fwd_bwd = median_of(run_fwd_bwd)
            except Exception as exc:
                p.skip(f"layer_forward_{op}{suffix}", first_line(exc))
                continue
            where = autocast_where(use_autocast)
            p.record(f"layer_forward_{op}{suffix}", fwd,
                     f"one tiny {op} layer forward with autograd recording, CUDA events, {where}")
            bwd = [max(0.0, fb - statistics.median(fwd) - backward_call) for fb in fwd_bwd]
            p.record(f"layer_backward_{op}{suffix}", bwd,
                     f"one tiny {op} layer: (forward + out.backward(grad)) - median forward - backward_call, "
                     f"CUDA events, {where}")
    # Layers among other kinds: chains of units of several tiny layers, under autocast as models train
    # (each unit's layers are named in its figures, unit_ops), to set beside the sum of those layers'
    # chain figures
    for op, (make_unit, make_input, unit_ops) in mixed_unit_cases(dev).items():
        chain_layer_probe(p, op, (make_unit, make_input), True, samples, timed, unit_ops=list(unit_ops))
    # chain figures of ops that are no layer of roofsim's graphs (view_chain)
    for op in [op for op in chain_ops if op not in layers]:
        for use_autocast in (False, True):
            chain_layer_probe(p, op, chain_ops[op], use_autocast, samples, timed)


def steady_repetitions(fn, inputs, leaves, ctx, grad, reps: int) -> None:
    """A tiny layer (tiny_layer's parts) run `reps` times back to back as a training loop runs it:
    the leaves' grads set to None, the forward inside ctx(), backward(grad); no synchronize."""
    for _ in range(reps):
        for t in leaves:
            t.grad = None
        with ctx():
            out = fn(*inputs)
        (out[0] if isinstance(out, tuple) else out).backward(grad)


def steady_layer_probes(p: Probe, batches: int, reps: int) -> None:
    """Host cost of one tiny layer's forward + backward repeated back to back, as a layer measured
    on its own runs in a loop: per-call costs included (the chain slopes leave them out)."""
    dev = p.device
    timed = event_timer(p)
    for op, (build, make_inputs) in layer_cases(dev).items():
        for use_autocast in (False, True):
            suffix = "_autocast" if use_autocast else ""
            try:
                fn, inputs, params, ctx, grad = tiny_layer(dev, build, make_inputs, use_autocast)
                leaves = [t for t in inputs if t.requires_grad] + [q for q in params if q.requires_grad]
                key = "sdpa_" + attention_backend(fn, inputs, ctx) if backend_keyed(op) else op

                def loop():
                    steady_repetitions(fn, inputs, leaves, ctx, grad, reps)

                timed(loop)
                values = [timed(loop) / reps for _ in range(batches)]
            except Exception as exc:
                p.skip(f"layer_steady_{op}{suffix}", first_line(exc))
                continue
            where = autocast_where(use_autocast)
            p.record(f"layer_steady_{key}{suffix}", values,
                     f"one tiny {op} layer: grads set to None, forward, backward(grad), {reps} times back to back "
                     f"with no synchronize between, CUDA events around them; per repetition; {where}")


# A convolution's host cost at sizes: cuDNN picks engines of more kernels (layout transposes, split
# reductions) as a convolution grows, each launched by the host. (n, channels in, channels out, height
# = width), stride 1, "same" padding; the first of each family is the chain probes' tiny layer. The
# shapes are kept apart from tools/validate's convolution cases.
CONV_HOST_SIZES = {
    "k3": [(2, 4, 4, 8), (8, 32, 32, 28), (16, 64, 64, 56), (32, 128, 128, 56)],
    "k1": [(2, 4, 4, 8), (8, 64, 64, 28), (16, 256, 64, 56), (32, 256, 256, 56)],
}
CONV_HOST_SMOKE_SIZES = {"k3": [(2, 4, 4, 8), (2, 8, 8, 8)], "k1": [(2, 4, 4, 8), (2, 8, 8, 8)]}
# the precision classes a convolution's host path differs by: PyTorch's default (cuDNN may use TF32,
# as in the fp32 and tf32 modes), TF32 off (fp32-strict), bfloat16 weights and inputs (bf16), and
# float32 weights under torch.autocast(bfloat16) (amp modes)
CONV_HOST_MODES = ("fp32", "fp32_strict", "bf16", "autocast")


def gpu_sleep_cycles_per_second() -> float:
    """torch.cuda._sleep spins for a number of GPU clock cycles: how many a second, now (CUDA events
    around a 20 M-cycle sleep); only to size the holds of queued_issue_seconds."""
    torch.cuda._sleep(1000)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    e0.record()
    torch.cuda._sleep(20_000_000)
    e1.record()
    torch.cuda.synchronize()
    return 20_000_000 / (e0.elapsed_time(e1) / 1e3)


def queued_issue_seconds(step, reps: int, hold_s: float, cycles_per_s: float | None) -> float:
    """Host seconds per call of step(), `reps` calls issued while the GPU sleeps `hold_s` (so that it
    runs none of them yet and the host never waits for it: the host's own issue time, whatever the
    calls' GPU time). Without a GPU (cycles_per_s None): wall seconds per call."""
    if cycles_per_s is not None:
        torch.cuda.synchronize()
        torch.cuda._sleep(int(hold_s * cycles_per_s))
    t0 = time.perf_counter()
    for _ in range(reps):
        step()
    issue = time.perf_counter() - t0
    if cycles_per_s is not None:
        torch.cuda.synchronize()
    return issue / reps


@contextlib.contextmanager
def cudnn_tf32(allowed: bool):
    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32 = saved


def conv_host_probes(p: Probe, samples: int, reps: int, smoke: bool) -> None:
    """A convolution layer's host cost (no bias), forward and forward + backward, at sizes from the
    tiny layer up: each sample `reps` calls issued while the GPU sleeps (queued_issue_seconds), so the
    GPU's own time never sets the pace. roofsim adds a convolution's growth over the tiny size to its
    chain figures (framework.hpp)."""
    dev = p.device
    cycles_per_s = gpu_sleep_cycles_per_second() if p.cuda else None
    nn = torch.nn
    for family, shapes in (CONV_HOST_SMOKE_SIZES if smoke else CONV_HOST_SIZES).items():
        ks = 3 if family == "k3" else 1
        for mode in CONV_HOST_MODES:
            for n, c, k, h in shapes:
                key = f"conv_host_{family}_{mode}_{n}x{c}x{h}x{h}_{k}"
                dtype = torch.bfloat16 if mode == "bf16" else torch.float32
                ctx = (lambda: autocast_bf16(dev)) if mode == "autocast" else contextlib.nullcontext
                try:
                    conv = nn.Conv2d(c, k, ks, padding=ks // 2, bias=False).to(dev, dtype).train()
                    x = torch.randn(n, c, h, h, device=dev, dtype=dtype, requires_grad=True)
                    with ctx():
                        grad = torch.randn_like(conv(x))

                    def forward(conv=conv, x=x, ctx=ctx):
                        with ctx():
                            conv(x)

                    def forward_backward(conv=conv, x=x, ctx=ctx, grad=grad):
                        x.grad = None
                        conv.weight.grad = None
                        with ctx():
                            y = conv(x)
                        y.backward(grad)

                    with cudnn_tf32(mode != "fp32_strict"):
                        for _ in range(3):  # warm-up: cuDNN's engine choice, the allocator's pools
                            forward_backward()
                        p.sync()
                        t0 = time.perf_counter()
                        for _ in range(3):
                            forward_backward()
                        p.sync()
                        per_call = (time.perf_counter() - t0) / 3  # host and GPU, to size the holds
                        for part, step in (("forward", forward), ("forward_backward", forward_backward)):
                            values = []
                            for _ in range(samples):
                                p.tick()
                                values.append(queued_issue_seconds(step, reps, max(0.005, 2 * reps * per_call), cycles_per_s))
                            p.record(f"{key}_{part}", values,
                                     f"{reps} calls of a {c}->{k} {ks}x{ks} Conv2d without bias on {n}x{c}x{h}x{h} "
                                     f"({mode}): {part.replace('_', ' + ')}, issued while the GPU sleeps "
                                     f"(torch.cuda._sleep), host seconds per call",
                                     conv_host={"family": family, "mode": mode, "part": part, "n": n, "c": c,
                                                "k": k, "h": h, "w": h, "kernel_size": ks,
                                                "flops": 2.0 * n * c * k * ks * ks * h * h})
                except Exception as exc:  # a dtype or autocast this device or torch lacks
                    p.skip(f"{key}_forward", first_line(exc))


def autograd_node_count(out) -> int:
    """The autograd nodes reachable from a tensor's grad_fn (AccumulateGrad included), each once:
    what backward() from it walks before running any."""
    seen, kept, todo = set(), [], [getattr(out, "grad_fn", None)]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        kept.append(node)  # alive while counting: a freed wrapper's id can come back for another node
        todo.extend(n for n, _ in getattr(node, "next_functions", ()))
    return len(seen)


def backward_walk_probes(p: Probe, samples: int, lengths=(100, 1000)) -> None:
    """backward_walk_node: host seconds per node from backward() to its first node's pre-hook."""
    dev = p.device
    x = torch.randn(4, device=dev, requires_grad=True)
    medians, nodes = [], []
    try:
        for length in lengths:
            firsts = []
            for i in range(samples + 3):
                p.tick()
                x.grad = None
                y = x
                for _ in range(length):
                    y = y * 1.0001
                root = y.sum()
                count = autograd_node_count(root)
                mark = []
                root.grad_fn.register_prehook(lambda grad_outputs: mark.append(time.perf_counter()))
                p.sync()
                t0 = time.perf_counter()
                root.backward()
                p.sync()
                if i >= 3:
                    firsts.append(mark[0] - t0)
                del y, root
            medians.append(statistics.median(firsts))
            nodes.append(count)
    except Exception as exc:  # torch 1.13 has no Node.register_prehook
        p.skip("backward_walk_node", first_line(exc))
        return
    per_node = max(0.0, (medians[-1] - medians[0]) / (nodes[-1] - nodes[0]))
    p.record("backward_walk_node", [per_node],
             f"backward() of chains of {list(lengths)} tiny multiplications ({nodes} nodes): host seconds from the "
             "call to the first node's pre-hook, median per length, (T(long) - T(short)) / (nodes(long) - "
             "nodes(short))", chain_nodes=nodes, chain_to_first_node_seconds=medians)


def backward_split_probes(p: Probe, samples: int) -> None:
    """Where a backward() call's own host cost falls relative to the GPU work it issues."""
    if not p.cuda:
        p.skip("backward_call_before_first_kernel", "needs CUDA (events recorded from autograd hooks)")
        return
    dev = p.device
    for use_autocast in (False, True):
        suffix = "_autocast" if use_autocast else ""
        ctx = autocast_context(dev, use_autocast)
        layers = [torch.nn.Linear(8, 8).to(dev) for _ in range(4)]
        x = torch.randn(2, 8, device=dev, requires_grad=True)
        events = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        before, after = [], []
        try:
            for i in range(samples + 3):
                p.tick()
                x.grad = None
                for layer in layers:
                    layer.zero_grad(set_to_none=True)
                with ctx():
                    y = x
                    for layer in layers:
                        y = layer(y)
                grad = torch.ones_like(y)
                # The first node's pre-hook runs just before it launches the first backward kernel;
                # x's hook once the last node (the first layer's) has launched its kernels.
                first = y.grad_fn.register_prehook(lambda grad_outputs: events[1].record())
                last = x.register_hook(lambda g: events[2].record())
                torch.cuda.synchronize()
                events[0].record()
                y.backward(grad)
                events[3].record()
                events[3].synchronize()
                first.remove()
                last.remove()
                if i >= 3:  # the GPU is idle throughout: event times are host times
                    before.append(events[0].elapsed_time(events[1]) / 1e3)
                    after.append(events[2].elapsed_time(events[3]) / 1e3)
        except Exception as exc:  # torch 1.13 has no Node.register_prehook
            p.skip(f"backward_call_before_first_kernel{suffix}", first_line(exc))
            continue
        where = autocast_where(use_autocast)
        p.record(f"backward_call_before_first_kernel{suffix}", before,
                 "backward() of 4 tiny Linear layers on an idle GPU: CUDA event before the call to an event "
                 f"recorded by the first autograd node's pre-hook (before its first kernel); {where}")
        p.record(f"backward_call_after_last_kernel{suffix}", after,
                 "backward() of 4 tiny Linear layers on an idle GPU: event recorded by the input's gradient "
                 f"hook (after the last node's kernels) to an event after backward() returned; {where}")


def chain_cases(dev):
    """Ops whose tiny instance maps a tensor to one of the same shape, so that K of them chain:
    name -> (make_layer() -> callable(y) -> y, make_input() -> tensor)."""
    nn = torch.nn
    r = lambda *shape: torch.randn(*shape, device=dev, requires_grad=True)  # noqa: E731

    def mod(factory):
        return lambda: factory().to(dev).train()

    def with_param(shape, f):
        def make():
            w = r(*shape)
            return lambda y: f(y, w)
        return make

    cases = {
        "linear": (mod(lambda: nn.Linear(8, 8)), lambda: r(4, 8)),
        "linear_nobias": (mod(lambda: nn.Linear(8, 8, bias=False)), lambda: r(4, 8)),
        "matmul": (with_param((8, 8), torch.matmul), lambda: r(8, 8)),
        "bmm": (with_param((2, 8, 8), torch.bmm), lambda: r(2, 8, 8)),
        "conv2d": (mod(lambda: nn.Conv2d(4, 4, 3, padding=1)), lambda: r(1, 4, 8, 8)),
        "conv2d_nobias": (mod(lambda: nn.Conv2d(4, 4, 3, padding=1, bias=False)), lambda: r(1, 4, 8, 8)),
        "conv1d": (mod(lambda: nn.Conv1d(4, 4, 3, padding=1)), lambda: r(1, 4, 8)),
        "conv1d_nobias": (mod(lambda: nn.Conv1d(4, 4, 3, padding=1, bias=False)), lambda: r(1, 4, 8)),
        "batchnorm2d": (mod(lambda: nn.BatchNorm2d(4)), lambda: r(2, 4, 4, 4)),
        "layernorm": (mod(lambda: nn.LayerNorm(8)), lambda: r(4, 8)),
        "groupnorm": (mod(lambda: nn.GroupNorm(2, 4)), lambda: r(2, 4, 4, 4)),
        "relu": (mod(nn.ReLU), lambda: r(4, 8)),
        "gelu": (mod(nn.GELU), lambda: r(4, 8)),
        "silu": (mod(nn.SiLU), lambda: r(4, 8)),
        "tanh": (mod(nn.Tanh), lambda: r(4, 8)),
        "sigmoid": (mod(nn.Sigmoid), lambda: r(4, 8)),
        "dropout": (mod(lambda: nn.Dropout(0.1)), lambda: r(4, 8)),
        "dropout_identity": (mod(lambda: nn.Dropout(0.0)), lambda: r(4, 8)),
        "add": (with_param((4, 8), torch.add), lambda: r(4, 8)),
        "mul": (with_param((4, 8), torch.mul), lambda: r(4, 8)),
        "softmax": (lambda: (lambda y: F.softmax(y, dim=-1)), lambda: r(4, 8)),
        "log_softmax": (lambda: (lambda y: F.log_softmax(y, dim=-1)), lambda: r(4, 8)),
        "transpose_contiguous": (lambda: (lambda y: y.transpose(0, 1).contiguous()), lambda: r(8, 8)),
        "gelu_tanh_composite": (lambda: (lambda x: 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * torch.pow(x, 3.0))))),
                                lambda: r(4, 8)),
        "mha": (mod(lambda: SelfAttention(8, 2)), lambda: r(1, 4, 8)),
        # a dtype cast (aten::_to_copy forward, ToCopyBackward0 backward), as autocast inserts before
        # each lower-precision op whose input is float32 (a layer norm's output in an autocast
        # model); the chain alternates bfloat16 and float32 so that every layer casts
        "cast": (lambda: (lambda y: y.to(torch.bfloat16 if y.dtype == torch.float32 else torch.float32)), lambda: r(4, 8)),
        # a view (aten::view, ViewBackward0) in a chain: what one costs inside model code, beside the
        # reshape layer's one-call figure (which holds the call's own costs)
        "view_chain": (lambda: (lambda y: y.view(8, 4) if y.shape[0] == 4 else y.view(4, 8)), lambda: r(4, 8)),
    }
    if hasattr(nn, "RMSNorm"):
        cases["rmsnorm"] = (mod(lambda: nn.RMSNorm(8)), lambda: r(4, 8))
    if hasattr(F, "scaled_dot_product_attention"):
        cases["sdpa"] = (lambda: (lambda y: F.scaled_dot_product_attention(y, y, y)), lambda: r(1, 2, 8, 8))
        d = SDPA_MODEL_HEAD
        cases["sdpa_model_head"] = (lambda: (lambda y: F.scaled_dot_product_attention(y, y, y)), lambda: r(1, 1, 16, d))
        cases["mha_no_weights"] = (mod(lambda: SelfAttention(d, 1, need_weights=False)), lambda: r(1, 4, d))
    return cases


class TransformerBlockUnit(torch.nn.Module):
    """A pre-norm transformer block of the probe's tiny layers, called flat (as torchvision's ViT
    EncoderBlock runs them, without its assert): y + Dropout(0)(MHA(LN(y))), then
    y + Linear(GELU(Linear(LN(y)))); 64 wide, one head, MLP 128, float32 residual under autocast."""

    # the probe's layers whose chain figures roofsim charges such a block, in its order (the casts:
    # autocast's of each float32 layer-norm output into the next bfloat16 layer)
    OPS = ["layernorm", "cast", "mha_no_weights", "dropout_identity", "add",
           "layernorm", "cast", "linear", "gelu", "linear", "add"]

    def __init__(self, width: int = 64):
        super().__init__()
        nn = torch.nn
        self.ln_1, self.attention, self.dropout = nn.LayerNorm(width), SelfAttention(width, 1, need_weights=False), nn.Dropout(0.0)
        self.ln_2, self.fc_1, self.act, self.fc_2 = nn.LayerNorm(width), nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width)

    def forward(self, y):
        y = y + self.dropout(self.attention(self.ln_1(y)))
        return y + self.fc_2(self.act(self.fc_1(self.ln_2(y))))


class ConvUnit(torch.nn.Module):
    """A ResNet-like unit of the probe's tiny layers: ReLU(BatchNorm(Conv2d(y))), 4 channels, 3x3, no bias."""

    OPS = ["conv2d_nobias", "batchnorm2d", "relu"]

    def __init__(self, channels: int = 4):
        super().__init__()
        nn = torch.nn
        self.conv, self.bn, self.act = nn.Conv2d(channels, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels), nn.ReLU()

    def forward(self, y):
        return self.act(self.bn(self.conv(y)))


def mixed_unit_cases(dev):
    """Units of several kinds of tiny layers, for the host cost of a layer among other kinds (as in
    a model) against the same layers' chains of one kind: name -> (make_unit, make_input, unit_ops)."""
    r = lambda *shape: torch.randn(*shape, device=dev, requires_grad=True)  # noqa: E731
    return {
        "unit_transformer_block": (lambda: TransformerBlockUnit().to(dev).train(), lambda: r(1, 4, 64), TransformerBlockUnit.OPS),
        "unit_conv_bn_relu": (lambda: ConvUnit().to(dev).train(), lambda: r(1, 4, 8, 8), ConvUnit.OPS),
    }


try:  # torch >= 1.13
    from torch.utils._python_dispatch import TorchDispatchMode
except ImportError:  # an older torch: figures without their op lists
    TorchDispatchMode = None


class OpRecorder(TorchDispatchMode or object):
    """Counts the aten ops dispatched inside it (overload packet names, "aten::view"), the autograd
    engine's thread included (the dispatch mode travels with autograd's thread-local state)."""

    def __init__(self):
        super().__init__()
        self.counts: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = f"aten::{func.overloadpacket.__name__}"
        self.counts[name] = self.counts.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


def run_chain(layers, x):
    """x through each of `layers` in turn (an untimed chain: the timed bodies hold the loop themselves)."""
    y = x
    for layer in layers:
        y = layer(y)
    return y


def ops_per_layer(a: dict, b: dict, lengths) -> dict:
    """The op counts one more layer adds: (b - a) / (lengths[1] - lengths[0]) per op, where they differ."""
    span = lengths[1] - lengths[0]
    return {op: (b.get(op, 0) - a.get(op, 0)) / span for op in sorted(set(a) | set(b)) if b.get(op, 0) != a.get(op, 0)}


def chain_op_counts(case, use_autocast: bool, dev, lengths=(1, 4)) -> dict | None:
    """The aten ops one more layer of a chain dispatches, forward and backward, as the chain figures'
    slope counts them: the ops of a chain of lengths[1] layers less those of lengths[0], per layer
    (what the figures cover; roofsim does not read these lists). None where this torch has no
    TorchDispatchMode."""
    if TorchDispatchMode is None:
        return None
    make_layer, make_input = case
    layers = [make_layer() for _ in range(max(lengths))]
    x = make_input()
    ctx = autocast_context(dev, use_autocast)
    counts = []
    for k in lengths:
        forward = OpRecorder()
        with forward, ctx():
            y = run_chain(layers[:k], x)
        grad = torch.randn_like(y)
        backward = OpRecorder()
        with backward:
            y.backward(grad)
        counts.append((forward.counts, backward.counts))
    return {"forward_ops": ops_per_layer(counts[0][0], counts[1][0], lengths),
            "backward_ops": ops_per_layer(counts[0][1], counts[1][1], lengths)}


def attention_figure_op(op: str, layer, x, ctx) -> tuple[str, dict]:
    """A chain figure's op and its record's extras: attention at a model's head size names the SDPA
    backend that ran (attention_backend), and its figures are keyed by it where backend_keyed(op)."""
    if op not in ("sdpa_model_head", "mha_no_weights"):
        return op, {}
    backend = attention_backend(layer, [x], ctx)
    return ("sdpa_" + backend if backend_keyed(op) else op), {"attention_backend": backend}


def chain_op_lists(dev) -> dict:
    """Every chain figure's op lists (chain_op_counts), by figure key: what --layer-ops writes, the
    lists a full run records with each layer_forward_* / layer_backward_* chain figure."""
    lists = {}
    for op, case in chain_cases(dev).items():
        for use_autocast in (False, True):
            suffix = "_autocast" if use_autocast else ""
            key = op
            try:
                ctx = autocast_context(dev, use_autocast)
                key, _ = attention_figure_op(op, case[0](), case[1](), ctx)
                ops = chain_op_counts(case, use_autocast, dev)
            except Exception as exc:
                lists[f"layer_forward_{key}{suffix}"] = {"skipped": first_line(exc)}
                continue
            if ops:
                lists[f"layer_forward_{key}{suffix}"] = {"forward_ops": ops["forward_ops"]}
                lists[f"layer_backward_{key}{suffix}"] = {"backward_ops": ops["backward_ops"]}
    return lists


# Chain lengths of the chain figures: the per-layer slope over them.
CHAIN_LENGTHS = (1, 4, 16)


def chain_median(timed, body, samples: int) -> float:
    """Median seconds of `samples` timed runs of body(), after 3 untimed ones (a chain figure's point)."""
    for _ in range(3):
        timed(body)
    return statistics.median([timed(body) for _ in range(samples)])


def chain_layer_probe(p: Probe, op: str, case, use_autocast: bool, samples: int, timed, **meta) -> None:
    """Per-layer host cost inside a sequence of layers, as in a model: forward and forward + backward
    of chains of 1, 4 and 16 such layers, CUDA events; the least-squares slope over the chain length
    is the cost of one more layer (its backward: slope of forward + backward minus slope of forward),
    so one-off costs of a backward() call stay out."""
    dev = p.device
    suffix = "_autocast" if use_autocast else ""
    make_layer, make_input = case
    lengths = list(CHAIN_LENGTHS)
    try:
        layers = [make_layer() for _ in range(max(lengths))]
        params = [q for layer in layers if isinstance(layer, torch.nn.Module) for q in layer.parameters()]
        x = make_input()
        ctx = autocast_context(dev, use_autocast)
        op, backend = attention_figure_op(op, layers[0], x, ctx)
        extra = dict(meta, **backend)
        fwd_medians, fb_medians, node_counts = [], [], []
        for k in lengths:
            def forward(k=k):
                with ctx():
                    y = x
                    for layer in layers[:k]:
                        y = layer(y)
                return y
            grad = torch.randn_like(forward())

            def reset():
                x.grad = None
                for q in params:
                    q.grad = None

            def run_fwd():
                reset()
                forward()

            def run_fwd_bwd():
                reset()
                forward().backward(grad)

            for body, medians in ((run_fwd, fwd_medians), (run_fwd_bwd, fb_medians)):
                medians.append(chain_median(timed, body, samples))
            node_counts.append(autograd_node_count(forward()))
    except Exception as exc:
        p.skip(f"layer_forward_{op}{suffix}", first_line(exc))
        return
    # the autograd nodes one more layer adds (backward_walk_node: the walk before the first node)
    extra_backward = {"backward_nodes_per_layer": (node_counts[-1] - node_counts[0]) / (lengths[-1] - lengths[0])}
    try:  # the ops the figures cover, each phase's with its figure
        ops = chain_op_counts(case, use_autocast, dev)
    except Exception as exc:  # a figure without its op list: roofsim charges no ops beyond it
        ops, extra["op_counts_skipped"] = None, first_line(exc)
    extra_forward = {"forward_ops": ops["forward_ops"]} if ops else {}
    if ops:
        extra_backward["backward_ops"] = ops["backward_ops"]

    def slope(ys):
        return least_squares_line(lengths, ys)[0]

    where = autocast_where(use_autocast)
    forward_s = max(0.0, slope(fwd_medians))
    backward_s = max(0.0, slope(fb_medians) - slope(fwd_medians))
    p.record(f"layer_forward_{op}{suffix}", [forward_s],
             f"per-layer slope of median forward time over chains of {lengths} tiny {op} layers, CUDA events, {where}",
             chain_lengths=lengths, chain_forward_seconds=fwd_medians, **extra, **extra_forward)
    p.record(f"layer_backward_{op}{suffix}", [backward_s],
             f"per-layer slope of median (forward + backward) minus that of forward over chains of {lengths} tiny "
             f"{op} layers, CUDA events, {where}", chain_lengths=lengths, chain_forward_backward_seconds=fb_medians,
             **extra, **extra_backward)


# ----------------------------------------------------------------------------- (b2') layers in inference

INFERENCE_METHOD = ("in inference (modules in eval(), the forward under torch.inference_mode(), inputs without "
                    "requires_grad)")
SDPA_BACKENDS = tuple(dict.fromkeys([backend for _, backend in ATTENTION_BACKEND_OPS] + ["math"]))


def inference_context(dev, use_autocast: bool):
    """A context factory for untimed calls: torch.inference_mode(), with torch.autocast(bfloat16) inside
    it where use_autocast (the timed bodies enter the two contexts themselves, as a script does)."""
    @contextlib.contextmanager
    def ctx():
        with torch.inference_mode():
            with (autocast_bf16(dev) if use_autocast else contextlib.nullcontext()):
                yield
    return ctx


def inference_forward_op_counts(layers, x, ctx, lengths=(1, 4)) -> dict | None:
    """The aten ops one more layer of an inference chain dispatches (chain_op_counts' forward_ops, for
    the chain's own eval() layers inside ctx()); None where this torch has no TorchDispatchMode."""
    if TorchDispatchMode is None:
        return None
    counts = []
    for k in lengths:
        recorder = OpRecorder()
        with recorder, ctx():
            run_chain(layers[:k], x)
        counts.append(recorder.counts)
    return ops_per_layer(counts[0], counts[1], lengths)


def chain_inference_probe(p: Probe, op: str, case, use_autocast: bool, samples: int, timed, **meta) -> None:
    """chain_layer_probe's forward figure in inference: the chain's modules in eval(), its input without
    requires_grad, each timed forward inside torch.inference_mode() (and autocast); per-layer slope of
    the median forward time over chains of 1, 4 and 16 layers."""
    dev = p.device
    suffix = "_autocast" if use_autocast else ""
    make_layer, make_input = case
    lengths = list(CHAIN_LENGTHS)
    try:
        layers = [make_layer() for _ in range(max(lengths))]
        for layer in layers:
            if isinstance(layer, torch.nn.Module):
                layer.eval()
        x = make_input().detach()
        ctx = autocast_context(dev, use_autocast)
        op, backend = attention_figure_op(op, layers[0], x, inference_context(dev, use_autocast))
        extra = dict(meta, **backend)
        fwd_medians = []
        for k in lengths:
            def forward(k=k):
                with torch.inference_mode():
                    with ctx():
                        y = x
                        for layer in layers[:k]:
                            y = layer(y)
                return y

            fwd_medians.append(chain_median(timed, forward, samples))
    except Exception as exc:
        p.skip(f"layer_inference_{op}{suffix}", first_line(exc))
        return
    try:  # the ops the figure covers
        ops = inference_forward_op_counts(layers, x, inference_context(dev, use_autocast))
    except Exception as exc:
        ops, extra["op_counts_skipped"] = None, first_line(exc)
    extra_forward = {"forward_ops": ops} if ops is not None else {}
    where = autocast_where(use_autocast)
    forward_s = max(0.0, least_squares_line(lengths, fwd_medians)[0])
    p.record(f"layer_inference_{op}{suffix}", [forward_s],
             f"per-layer slope of median forward time over chains of {lengths} tiny {op} layers {INFERENCE_METHOD}, "
             f"CUDA events, {where}", chain_lengths=lengths, chain_forward_seconds=fwd_medians, **extra, **extra_forward)


def single_inference_probe(p: Probe, op: str, build, make_inputs, use_autocast: bool, samples: int, timed) -> None:
    """layer_probes' one-layer forward figure in inference: the module in eval(), inputs without
    requires_grad, each timed call inside torch.inference_mode() (and autocast); median forward time
    (no grads to reset: an inference loop has none)."""
    dev = p.device
    suffix = "_autocast" if use_autocast else ""
    key = f"layer_inference_{op}{suffix}"
    try:
        fn = build()
        if isinstance(fn, torch.nn.Module):
            fn.eval()
        inputs = [t.detach() for t in make_inputs()]
        ctx = autocast_context(dev, use_autocast)

        def forward():
            with torch.inference_mode():
                with ctx():
                    return fn(*inputs)

        forward()
        for _ in range(max(3, samples // 5)):
            timed(forward)
        fwd = [timed(forward) for _ in range(samples)]
    except Exception as exc:
        p.skip(key, first_line(exc))
        return
    where = autocast_where(use_autocast)
    p.record(key, fwd, f"one tiny {op} layer forward {INFERENCE_METHOD}, CUDA events, {where}")


def forward_figure_present(figures: dict, op: str, suffix: str) -> bool:
    """Whether a profile's figures hold the layer_forward_* figure of layer case `op` (an attention case
    keyed by its backend: any backend's)."""
    if backend_keyed(op):
        return any(f"layer_forward_sdpa_{backend}{suffix}" in figures for backend in SDPA_BACKENDS)
    return f"layer_forward_{op}{suffix}" in figures


def inference_layer_probes(p: Probe, samples: int, wanted=None) -> None:
    """layer_inference_<op>[_autocast]: the layer_forward_* figures of layer_probes (its single layers,
    chains, mixed units and view chains, in its order) with the layers in inference. wanted(op, suffix):
    which cases to measure (default all)."""
    dev = p.device
    timed = event_timer(p)
    wanted = wanted or (lambda op, suffix: True)
    chain_ops = chain_cases(dev)
    layers = layer_cases(dev)
    for op, (build, make_inputs) in layers.items():
        for use_autocast in (False, True):
            if not wanted(op, "_autocast" if use_autocast else ""):
                continue
            if op in chain_ops:
                chain_inference_probe(p, op, chain_ops[op], use_autocast, samples, timed)
            else:
                single_inference_probe(p, op, build, make_inputs, use_autocast, samples, timed)
    for op, (make_unit, make_input, unit_ops) in mixed_unit_cases(dev).items():
        if wanted(op, "_autocast"):
            chain_inference_probe(p, op, (make_unit, make_input), True, samples, timed, unit_ops=list(unit_ops))
    for op in [op for op in chain_ops if op not in layers]:
        for use_autocast in (False, True):
            if wanted(op, "_autocast" if use_autocast else ""):
                chain_inference_probe(p, op, chain_ops[op], use_autocast, samples, timed)


# ----------------------------------------------------------------------------- (b3) op GPU time

def op_timing_cases():
    """(op, params, input specs, precision) for GPU-bound timing; shapes differ from tools/validate's."""
    f32 = "float32"
    big = [16, 512, 48, 48]          # 18.9 M elements, NCHW
    rows = [16384, 1024]             # 16.8 M elements, (tokens, hidden)
    cases = [
        ("batchnorm2d", {"num_features": 512}, [(big, f32, True)]),
    ]
    # PyTorch's native batch-norm kernels (what runs on bfloat16 activations under autocast) use
    # one thread block per channel: their speed depends on the channel count and the elements per
    # channel, not on bytes alone. Batch norm is timed over the (channels, height) pairs of
    # ResNet-style networks at batch sizes 24 and 96 (not the validation's 32, 64 and 128).
    for channels, size in ((64, 112), (64, 56), (128, 56), (256, 56), (128, 28), (256, 28), (512, 28),
                           (256, 14), (512, 14), (1024, 14), (512, 7), (2048, 7)):
        for batch in (24, 96):
            cases.append(("batchnorm2d", {"num_features": channels}, [([batch, channels, size, size], f32, True)]))
    # Layer norm's kernels (a row-wise forward and input gradient, a column-wise reduction for the
    # weight and bias gradients) change efficiency with the row count: timed over rows x hidden
    # sizes apart from the validation's (4096 to 25216 rows of 768).
    for n_rows in (2048, 6144, 12288, 32768):
        for hidden in (512, 1024):
            cases.append(("layernorm", {"normalized_shape": [hidden], "elementwise_affine": True},
                          [([n_rows, hidden], f32, True)]))
    # Column sums (what a bias gradient is: dY [rows, C] summed over rows): PyTorch's reduction
    # kernel changes efficiency with the column count and the rows, over a grid apart from the
    # validation's bias gradients (768 to 3072 columns of 4096 to 25216 rows).
    for n_rows in (2048, 8192, 32768):
        for columns in (512, 1024, 4096):
            cases.append(("sum", {}, [([n_rows, columns], f32, True)]))
    # Casts (aten::_to_copy): PyTorch runs float32 -> bfloat16 in a vectorized kernel and
    # bfloat16 -> float32 in its unrolled copy kernel, at different speeds.
    square = [4096, 4096]
    cases += [
        ("cast", {"dtype": "bfloat16"}, [(square, "float32!", True)]),
        ("cast", {"dtype": "float32"}, [(square, "bfloat16!", True)]),
    ]
    cases += [
        ("groupnorm", {"num_groups": 32, "num_channels": 512}, [(big, f32, True)]),
        ("rmsnorm", {"normalized_shape": [1024]}, [(rows, f32, True)]),
        ("relu", {}, [(big, f32, True)]),
        ("gelu", {"approximate": "none"}, [(rows, f32, True)]),
        ("silu", {}, [(rows, f32, True)]),
        ("tanh", {}, [(rows, f32, True)]),
        ("sigmoid", {}, [(rows, f32, True)]),
        ("dropout", {"p": 0.1}, [(rows, f32, True)]),
        ("add", {}, [(rows, f32, True), (rows, f32, True)]),
        ("mul", {}, [(rows, f32, True), (rows, f32, True)]),
        ("softmax", {"dim": -1}, [([16, 16, 256, 256], f32, True)]),
        ("log_softmax", {"dim": -1}, [([2048, 8192], f32, True)]),
        ("cross_entropy", {}, [([2048, 8192], f32, True), ([2048], "int64", False)]),
        ("embedding", {"num_embeddings": 32000, "embedding_dim": 1024}, [([16, 1024], "int64", False)]),
        ("maxpool2d", {"kernel_size": [2, 2], "stride": [2, 2], "padding": [0, 0]}, [(big, f32, True)]),
        ("avgpool2d", {"kernel_size": [2, 2], "stride": [2, 2], "padding": [0, 0]}, [(big, f32, True)]),
        # depthwise convolution: PyTorch's own depthwise kernels for many shapes, not cuDNN's; their
        # weight gradient reduces each channel's elements in one block, so they are timed at two sizes
        # (many channels of few elements, a late stage; few channels of many, an early one), which
        # roofsim reads by size (op_factor_at)
        ("conv2d", {"in_channels": 512, "out_channels": 512, "kernel_size": [3, 3], "stride": [1, 1],
                    "padding": [1, 1], "groups": 512, "bias": True}, [([32, 512, 28, 28], f32, True)]),
        ("conv2d", {"in_channels": 96, "out_channels": 96, "kernel_size": [3, 3], "stride": [1, 1],
                    "padding": [1, 1], "groups": 96, "bias": True}, [([16, 96, 112, 112], f32, True)]),
        # and over one dimension (nn.Conv1d, run as a 2-D one of height 1: 3 taps an output where the
        # 3x3 takes 9), which roofsim keys apart (depthwise_conv1d)
        ("conv1d", {"in_channels": 768, "out_channels": 768, "kernel_size": [3], "stride": [1],
                    "padding": [1], "groups": 768, "bias": True}, [([16, 768, 1536], f32, True)]),
        ("adaptive_avgpool2d", {"output_size": [1, 1]}, [([256, 1024, 14, 14], f32, True)]),
        ("transpose_contiguous", {"dim0": 1, "dim1": 2}, [([16, 2048, 16, 32], f32, True)]),
        ("cat", {"dim": 1}, [([16, 1024, 512], f32, True), ([16, 1024, 512], f32, True)]),
        ("gelu_tanh_composite", {}, [(rows, f32, True)]),
        ("sdpa", {"is_causal": False, "backend": "flash"}, [([4, 16, 2048, 64], f32, True)] * 3),
        ("sdpa", {"is_causal": False, "backend": "efficient"}, [([4, 16, 2048, 64], f32, True)] * 3),
        ("sdpa", {"is_causal": True, "backend": "efficient"}, [([4, 16, 2048, 64], f32, True)] * 3),
        # cuDNN's fused attention, which PyTorch 2.11 picks by default on Hopper for 16-bit inputs,
        # and flash, at a short sequence too (fused attention's efficiency falls with the length)
        ("sdpa", {"is_causal": False, "backend": "flash"}, [([64, 12, 256, 64], f32, True)] * 3),
        ("sdpa", {"is_causal": False, "backend": "cudnn"}, [([4, 16, 2048, 64], f32, True)] * 3),
        ("sdpa", {"is_causal": True, "backend": "cudnn"}, [([4, 16, 2048, 64], f32, True)] * 3),
        ("sdpa", {"is_causal": False, "backend": "cudnn"}, [([64, 12, 256, 64], f32, True)] * 3),
    ]
    # Fused attention's efficiency over the sequence length, and with dropout (transformers train
    # with attention dropout: the kernels draw Philox random numbers for every score): short, middle
    # and long sequences, apart from the validation's (128 and 1024).
    short, medium, middle, long = [96, 12, 96, 64], [64, 12, 256, 64], [16, 12, 512, 64], [4, 16, 2048, 64]
    cases += [
        ("sdpa", {"is_causal": False, "backend": "cudnn"}, [(short, f32, True)] * 3),
        ("sdpa", {"is_causal": True, "backend": "cudnn"}, [(middle, f32, True)] * 3),
        ("sdpa", {"is_causal": True, "backend": "flash"}, [(middle, f32, True)] * 3),
        ("sdpa", {"is_causal": True, "backend": "flash"}, [(long, f32, True)] * 3),
        ("sdpa", {"is_causal": True, "backend": "efficient"}, [(middle, f32, True)] * 3),
        ("sdpa", {"is_causal": False, "backend": "efficient"}, [(medium, f32, True)] * 3),
    ]
    for shape in (short, medium, long):
        cases.append(("sdpa", {"is_causal": False, "backend": "cudnn", "dropout_p": 0.1}, [(shape, f32, True)] * 3))
    for shape in (middle, long):
        cases.append(("sdpa", {"is_causal": True, "backend": "cudnn", "dropout_p": 0.1}, [(shape, f32, True)] * 3))
        cases.append(("sdpa", {"is_causal": True, "backend": "flash", "dropout_p": 0.1}, [(shape, f32, True)] * 3))
    # The memory-efficient kernels with dropout: PyTorch runs them for float32 attention (no flash or
    # cuDNN kernel takes float32), so float32 transformers train through them.
    for shape in (middle, long):
        cases.append(("sdpa", {"is_causal": True, "backend": "efficient", "dropout_p": 0.1}, [(shape, f32, True)] * 3))
    cases.append(("sdpa", {"is_causal": False, "backend": "efficient", "dropout_p": 0.1}, [(medium, f32, True)] * 3))
    # An add of a bfloat16 and a float32 tensor (a block's output added to a float32 residual under
    # autocast, GPT-2's tanh GELU): PyTorch runs its loop that casts each operand on load, not the
    # vectorized one; no gradient (its backward is a cast, timed above).
    cases.append(("add", {}, [(rows, "bfloat16!", False), (rows, "float32!", False)]))
    # Elementwise ops and pools a second time at four times the size (67 M elements: 134 MB an
    # operand in bfloat16, 268 MB in float32, well beyond the 50 MB L2), where the first size's
    # bfloat16 operands are near the L2's: roofsim interpolates an op's efficiency by its kernels'
    # bytes between the two (op_factor_at), for a model's 100-300 MB activations.
    rows_large, big_large = [65536, 1024], [48, 512, 48, 48]
    pool = {"kernel_size": [2, 2], "stride": [2, 2], "padding": [0, 0]}
    for op, params, shape, operands in (("relu", {}, big_large, 1), ("gelu", {"approximate": "none"}, rows_large, 1),
                                        ("silu", {}, rows_large, 1), ("tanh", {}, rows_large, 1),
                                        ("sigmoid", {}, rows_large, 1), ("dropout", {"p": 0.1}, rows_large, 1),
                                        ("add", {}, rows_large, 2), ("mul", {}, rows_large, 2),
                                        ("maxpool2d", pool, big_large, 1), ("avgpool2d", pool, big_large, 1),
                                        # the transposing copy too: its bfloat16 size (67 MB moved) is
                                        # near the L2's, and roofsim gives its efficiency to every
                                        # layout copy and strided elementwise loop, most of them larger
                                        ("transpose_contiguous", {"dim0": 1, "dim1": 2}, [64, 2048, 16, 32], 1)):
        cases.append((op, params, [(shape, f32, True)] * operands))
    cases.append(("add", {}, [(rows_large, "bfloat16!", False), (rows_large, "float32!", False)]))
    out = []
    for op, params, inputs in cases:
        if op == "cast" or all(dtype.endswith("!") for _, dtype, _ in inputs):
            # an explicit x.to(dtype), or operands of fixed dtypes: no autocast involved
            out.append((op, params, inputs, "fp32"))
            continue
        precisions = ["amp-bf16"] if params.get("backend") in ("flash", "cudnn") else ["fp32", "amp-bf16"]
        for precision in precisions:
            out.append((op, params, inputs, precision))
    return out


def build_op(op, params, dev):
    nn = torch.nn
    p = params
    if op == "batchnorm2d": return nn.BatchNorm2d(p["num_features"]).to(dev).train()
    if op in ("conv2d", "conv1d"):
        cls = nn.Conv2d if op == "conv2d" else nn.Conv1d
        return cls(p["in_channels"], p["out_channels"], p["kernel_size"], stride=p["stride"],
                   padding=p["padding"], groups=p["groups"], bias=p["bias"]).to(dev)
    if op == "layernorm": return nn.LayerNorm(p["normalized_shape"]).to(dev)
    if op == "groupnorm": return nn.GroupNorm(p["num_groups"], p["num_channels"]).to(dev)
    if op == "rmsnorm": return nn.RMSNorm(p["normalized_shape"]).to(dev)
    if op == "relu": return nn.ReLU()
    if op == "gelu": return nn.GELU(approximate=p["approximate"])
    if op == "silu": return nn.SiLU()
    if op == "tanh": return nn.Tanh()
    if op == "sigmoid": return nn.Sigmoid()
    if op == "dropout": return nn.Dropout(p["p"]).train()
    if op == "add": return torch.add
    if op == "mul": return torch.mul
    if op == "softmax": return lambda x: F.softmax(x, dim=p["dim"])
    if op == "log_softmax": return lambda x: F.log_softmax(x, dim=p["dim"])
    if op == "cross_entropy": return F.cross_entropy
    if op == "embedding": return nn.Embedding(p["num_embeddings"], p["embedding_dim"]).to(dev)
    if op == "maxpool2d": return nn.MaxPool2d(p["kernel_size"], p["stride"], p["padding"])
    if op == "avgpool2d": return nn.AvgPool2d(p["kernel_size"], p["stride"], p["padding"])
    if op == "adaptive_avgpool2d": return nn.AdaptiveAvgPool2d(p["output_size"])
    if op == "transpose_contiguous": return lambda x: x.transpose(p["dim0"], p["dim1"]).contiguous()
    if op == "cat": return lambda a, b: torch.cat([a, b], p["dim"])
    if op == "cast": return lambda x: x.to(getattr(torch, p["dtype"]))
    if op == "sum": return lambda x: x.sum(dim=tuple(range(x.dim() - 1)))
    if op == "gelu_tanh_composite":
        return lambda x: 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * torch.pow(x, 3.0))))
    if op == "sdpa":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backend = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                   "cudnn": SDPBackend.CUDNN_ATTENTION}[p["backend"]]

        def attention(q, k, v):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=p["is_causal"],
                                                      dropout_p=p.get("dropout_p", 0.0))
        return attention
    raise ValueError(f"unknown op {op}")


class KernelTimesUnavailable(RuntimeError):
    """torch.profiler recorded no GPU kernels (no CUPTI, or a CPU run)."""


def kernel_seconds(region) -> float:
    """GPU time of a region: the sum of the durations of the kernels (and memcpy/memset) that
    torch.profiler records for it through CUPTI; gaps between kernels are not counted."""
    if not torch.cuda.is_available():
        raise KernelTimesUnavailable("no CUDA device")
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        region()
        torch.cuda.synchronize()
    total_us, kernels = 0.0, 0
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            total_us += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
            kernels += 1
    if kernels == 0:
        raise KernelTimesUnavailable("torch.profiler recorded no GPU kernels")
    return total_us / 1e6


def op_timing_key(op, params, precision, shapes) -> str:
    """What tells two op timings apart: the op, its parameters, the precision mode and the shapes."""
    return json.dumps([op, params, precision, [list(s) for s in shapes]], sort_keys=True)


def op_timing_probes(p: Probe, calls: int, skip_keys=frozenset()) -> list:
    """Times op_timing_cases(), less those whose op_timing_key is in skip_keys."""
    dev = p.device
    results = []
    timed = event_timer(p)
    cases = [c for c in op_timing_cases() if op_timing_key(c[0], c[1], c[3], [s for s, _, _ in c[2]]) not in skip_keys]
    if not p.cuda:
        cases = cases[:2]  # on a CPU only the code path is tested
    for op, params, specs, precision in cases:
        entry = {"op": op, "params": params, "precision": precision,
                 "inputs": [{"shape": s, "dtype": d, "requires_grad": g} for s, d, g in specs]}
        try:
            fn = build_op(op, params, dev)
            inputs = []
            for shape, dtype, grad in specs:
                if dtype == "int64":
                    high = params.get("num_embeddings") or shape and 8192
                    inputs.append(torch.randint(0, int(high), shape, device=dev))
                elif dtype.endswith("!"):  # this dtype whatever the mode
                    inputs.append(torch.randn(*shape, device=dev, dtype=getattr(torch, dtype[:-1]), requires_grad=grad))
                    entry["inputs"][len(inputs) - 1]["dtype"] = dtype[:-1]
                else:
                    # Under autocast a memory-bound op inside a model reads the bfloat16 output of
                    # the matmul or convolution before it: time it on bfloat16 activations.
                    low = precision == "amp-bf16" and op != "sdpa"
                    dtype_t = torch.bfloat16 if low else torch.float32
                    inputs.append(torch.randn(*shape, device=dev, dtype=dtype_t, requires_grad=grad))
                    entry["inputs"][len(inputs) - 1]["dtype"] = "bfloat16" if low else "float32"
            ctx = (lambda: autocast_bf16(dev)) if precision == "amp-bf16" else contextlib.nullcontext
            with ctx():
                out = fn(*inputs)
            grad_out = torch.randn_like(out)
            wrt = [t for t in inputs if t.requires_grad]
            if isinstance(fn, torch.nn.Module):
                wrt += [q for q in fn.parameters() if q.requires_grad]

            def forward():
                with ctx():
                    for _ in range(calls):
                        fn(*inputs)

            def backward():
                if not wrt:  # nothing requires a gradient: no backward
                    return
                for _ in range(calls):
                    torch.autograd.grad(out, wrt, grad_out, retain_graph=True)

            # GPU time is the sum of the kernels' own durations (CUPTI via torch.profiler): an
            # autograd.grad call costs tens of microseconds of host time, which CUDA events
            # around back-to-back calls would count whenever the kernels are shorter than that.
            how = "kernel durations"
            try:
                fwd = [kernel_seconds(forward) / calls for _ in range(p.repeats // 2 + 1)]
            except KernelTimesUnavailable as exc:
                how = f"timer around the calls, no kernel durations: {exc}"
                fwd = [timed(forward) / calls for _ in range(p.repeats // 2 + 1)]
                bwd = [timed(backward) / calls for _ in range(p.repeats // 2 + 1)]
            else:
                # a backward that launches no kernel (a sum's expands the gradient, an add's passes it
                # on, a cat's slices it, a transpose's is a view) takes no GPU time: 0, not the host's
                # time for the autograd.grad calls
                bwd = []
                for _ in range(p.repeats // 2 + 1):
                    try:
                        bwd.append(kernel_seconds(backward) / calls)
                    except KernelTimesUnavailable:
                        bwd.append(0.0)
        except Exception as exc:
            p.skip(f"op_timing_{op}_{precision}", first_line(exc))
            continue
        summary = lambda v: {"seconds": statistics.median(v), "min": min(v), "max": max(v), "samples": len(v)}  # noqa: E731
        entry["forward_gpu_seconds"] = summary(fwd)
        entry["backward_gpu_seconds"] = summary(bwd)
        if how == "kernel durations":
            entry["method"] = (f"sum of the durations of the GPU kernels torch.profiler (CUPTI) records for {calls} "
                               f"forward calls, and for {calls} torch.autograd.grad(out, inputs + parameters, grad, "
                               "retain_graph=True) calls (backward); seconds per call; median of the repetitions")
        else:
            entry["method"] = (f"{calls} calls back to back between timer reads (forward), and {calls} "
                               "torch.autograd.grad(out, inputs + parameters, grad, retain_graph=True) calls "
                               f"(backward); seconds per call; median of the repetitions; {how}")
        print(f"  op {op:22s} {precision:9s} fwd {entry['forward_gpu_seconds']['seconds'] * 1e6:9.1f} us  "
              f"bwd {entry['backward_gpu_seconds']['seconds'] * 1e6:9.1f} us", flush=True)
        results.append(entry)
    return results


# ----------------------------------------------------------------------------- (c) optimizers

SGD_WEIGHT_DECAY = 1e-4  # a typical ResNet recipe's; any non-zero value runs the same ops


def make_optimizer(kind: str, impl: str, params):
    """kind: sgd (momentum 0.9, no weight decay), sgd_wd (the same with weight decay: one more
    foreach op, grads + wd * params, allocating a new gradient list) or adamw (its defaults)."""
    flags = {"foreach": {"foreach": True}, "for_loop": {"foreach": False}, "fused": {"fused": True}}[impl]
    if kind in ("sgd", "sgd_wd"):
        return torch.optim.SGD(params, lr=0.01, momentum=0.9,
                               weight_decay=SGD_WEIGHT_DECAY if kind == "sgd_wd" else 0.0, **flags)
    return torch.optim.AdamW(params, lr=1e-4, **flags)


_FLUSH_SOURCE = _FLUSH_TARGET = None


def flush_cpu_caches() -> None:
    """Evict the calling thread's CPU caches: a 64 MiB copy into memory already mapped."""
    global _FLUSH_SOURCE, _FLUSH_TARGET
    if _FLUSH_SOURCE is None:
        _FLUSH_SOURCE, _FLUSH_TARGET = bytes(64 << 20), bytearray(64 << 20)
    _FLUSH_TARGET[:] = _FLUSH_SOURCE


def record_count_fit(p: Probe, key: str, times_at_counts, n1: int, n2: int, method: str, params: dict) -> None:
    """A host cost linear in a count (of parameters): times_at_counts() gives T(n1), T(n2); records
    key_per_param, the slope (T(n2) - T(n1)) / (n2 - n1), and key_per_step, the intercept, each over
    the probe's repetitions."""
    intercepts: list[float] = []

    def measure():
        t1, t2 = times_at_counts()
        slope = (t2 - t1) / (n2 - n1)
        intercepts.append(t1 - slope * n1)
        return slope

    slopes = p.repeat(measure)
    p.record(f"{key}_per_param", slopes, method, params=params)
    p.record(f"{key}_per_step", intercepts[-len(slopes):], f"intercept of the same fit: T({n1}) - slope * {n1}",
             params=params)


def optimizer_probes(p: Probe, n1: int, n2: int, small_numel: int, large_numel: int) -> None:
    dev = p.device

    def params_with_grads(count: int, numel: int):
        ps = [torch.randn(numel, device=dev, requires_grad=True) for _ in range(count)]
        for q in ps:
            q.grad = torch.randn_like(q)
        return ps

    def step_time(opt, cold: bool = False) -> float:
        p.sync()
        if cold:
            flush_cpu_caches()
        t0 = time.perf_counter()
        opt.step()
        p.sync()
        return time.perf_counter() - t0

    for kind in ("sgd", "sgd_wd", "adamw"):
        for impl in ("foreach", "for_loop", "fused"):
            base = f"optimizer_{kind}_{impl}"
            try:
                opt1 = make_optimizer(kind, impl, params_with_grads(n1, small_numel))
                opt2 = make_optimizer(kind, impl, params_with_grads(n2, small_numel))
                for opt in (opt1, opt2):  # the first steps create the optimizer state
                    opt.step()
                    opt.step()
            except Exception as exc:  # fused not supported for this optimizer, device or version
                p.skip(base, first_line(exc))
                continue
            shape = {"small_param_numel": small_numel, "param_counts": [n1, n2]}
            # Hot: steps back to back. Cold: the CPU's caches flushed before each step, as in a
            # training step, where the forward and backward run between two optimizer steps.
            for cold, key in ((False, base), (True, f"{base}_cold")):
                how = ("the CPU's caches flushed (a 64 MiB copy) before each step" if cold
                       else "steps back to back")
                record_count_fit(p, key, lambda cold=cold: (step_time(opt1, cold), step_time(opt2, cold)), n1, n2,
                                 f"optimizer.step() on {n1} and {n2} fp32 parameters of {small_numel} elements, {how}; "
                                 f"(T({n2}) - T({n1})) / {n2 - n1}; synchronize around step", shape)
            if kind == "sgd_wd":
                continue  # the large-parameter contrast: once per optimizer
            try:
                big = make_optimizer(kind, impl, params_with_grads(4, large_numel))
                big.step()
                samples = p.repeat(lambda: step_time(big))
                p.record(f"{base}_large", samples,
                         f"optimizer.step() on 4 fp32 parameters of {large_numel} elements",
                         host=False, params={"param_count": 4, "param_numel": large_numel})
            except Exception as exc:  # e.g. out of memory on a small device
                p.skip(f"{base}_large", first_line(exc))


def launch_positions(events, step_name_prefix: str = "Optimizer.step#") -> list[list[tuple[str, float]]]:
    """From torch.profiler's events of optimizer steps: per step, each torch._foreach_* op that launches
    kernels, in order, with the host time from the step's start to its first kernel launch as a
    fraction of the step's host time. A launch belongs to the outermost foreach op around it (one op
    calls another, e.g. _foreach_add_ its List overload); an op without a launch (the step counters,
    CPU tensors) has none."""
    cpu = [e for e in events if e.device_type == torch.autograd.DeviceType.CPU]
    steps = sorted((e for e in cpu if e.name.startswith(step_name_prefix)), key=lambda e: e.time_range.start)
    launches = sorted(e.time_range.start for e in cpu if e.name in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel",
                                                                     "cuLaunchKernelEx"))
    foreach = sorted((e for e in cpu if e.name.startswith("aten::_foreach_")), key=lambda e: (e.time_range.start, -e.time_range.end))
    out = []
    for step in steps:
        t0, t1 = step.time_range.start, step.time_range.end
        if not t1 > t0:
            continue
        outer, end = [], -1.0  # the foreach ops of this step not inside another
        for e in foreach:
            if t0 <= e.time_range.start <= t1 and e.time_range.start >= end:
                outer.append(e)
                end = e.time_range.end
        positions = []
        for e in outer:
            first = next((t for t in launches if e.time_range.start <= t <= e.time_range.end), None)
            if first is not None:
                positions.append((e.name, (first - t0) / (t1 - t0)))
        out.append(positions)
    return out


def optimizer_launch_probes(p: Probe, count: int, numel: int, steps: int) -> None:
    """Where optimizer.step() launches its kernels within its host time: PyTorch's foreach
    optimizers launch each torch._foreach_* op's kernels as the host reaches the op, not after the
    whole step's host work. `steps` steps of each foreach optimizer over `count` fp32 parameters of
    `numel` elements, each between two synchronizes, under torch.profiler (CPU and CUDA activities);
    per op, in order, the median over the steps of the fraction of the step's host time (its
    Optimizer.step# range) before the op's first kernel launch (optimizer_<kind>_foreach_launches:
    `ops`, each with its `fraction`; `seconds` is the profiled step's host time, which the profiler
    lengthens: roofsim reads the fractions only). GPU-paced group: it uses torch.profiler."""
    if not p.cuda:
        p.skip("optimizer_launches", "needs a CUDA device (kernel launches)")
        return
    from torch.profiler import ProfilerActivity, profile
    for kind in ("sgd", "sgd_wd", "adamw"):
        key = f"optimizer_{kind}_foreach_launches"
        try:
            params = [torch.randn(numel, device=p.device, requires_grad=True) for _ in range(count)]
            for q in params:
                q.grad = torch.randn_like(q)
            opt = make_optimizer(kind, "foreach", params)
            for _ in range(3):  # the first steps create the optimizer state
                opt.step()
            p.sync()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(steps):
                    p.sync()
                    opt.step()
                    p.sync()
            events = list(prof.events())
            per_step = launch_positions(events)
            spans = [(e.time_range.end - e.time_range.start) * 1e-6 for e in events
                     if e.device_type == torch.autograd.DeviceType.CPU and e.name.startswith("Optimizer.step#")]
            sequences = {tuple(name for name, _ in s) for s in per_step}
            if not per_step or len(sequences) != 1 or not next(iter(sequences)):
                raise RuntimeError(f"the profiled steps launched no foreach op, or differ in their ops ({len(sequences)} sequences)")
            names = next(iter(sequences))
            ops = [{"op": name, "fraction": statistics.median(s[i][1] for s in per_step)} for i, name in enumerate(names)]
            p.record(key, spans, f"optimizer.step() (foreach) on {count} fp32 parameters of {numel} elements, "
                     f"{steps} steps each between two synchronizes, under torch.profiler: per torch._foreach_* op "
                     "that launches kernels, in order, the median fraction of the step's host time (its "
                     "Optimizer.step# range) before its first kernel launch (cudaLaunchKernel); seconds: the "
                     "profiled step's host time", host=False, ops=ops,
                     params={"param_count": count, "param_numel": numel})
        except Exception as exc:
            p.skip(key, first_line(exc))


def zero_grad_probes(p: Probe, n1: int, n2: int, small_numel: int, large_numel: int) -> None:
    """optimizer.zero_grad(set_to_none=True), as a training step calls it before its forward: over n1
    and n2 fp32 parameters whose gradients are fresh blocks of the caching allocator (as backward()
    leaves them), set outside the timed region. zero_grad launches nothing: it drops each gradient,
    and the allocator takes its block back. Gradient sizes: alternately small_numel and large_numel
    elements (the figure roofsim reads: a model's parameters mix small biases and norms with large
    weights), and each size alone, on either side of the allocator's 1 MiB small-block limit."""
    dev = p.device
    mixed = [small_numel if i % 2 == 0 else large_numel for i in range(n2)]
    sets = (("zero_grad", mixed, (False, True)),
            ("zero_grad_small", [small_numel] * n2, (True,)),
            ("zero_grad_large", [large_numel] * n2, (True,)))
    for base, numels, colds in sets:
        params = [torch.zeros(n, device=dev, requires_grad=True) for n in numels]
        opt1 = torch.optim.SGD(params[:n1], lr=0.01, foreach=True)
        opt2 = torch.optim.SGD(params, lr=0.01, foreach=True)
        shape = {"param_counts": [n1, n2], "param_numels": sorted(set(numels)),
                 "param_numel_order": "alternating" if len(set(numels)) > 1 else "one size"}

        def zero_grad_time(opt, cold: bool) -> float:
            group = opt.param_groups[0]["params"]
            for q in group:
                q.grad = torch.empty_like(q)
            p.sync()
            if cold:
                flush_cpu_caches()
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            return time.perf_counter() - t0

        for opt in (opt1, opt2):  # warm-up: the allocator holds every gradient's block from here on
            zero_grad_time(opt, False)
        for cold in colds:
            how = ("the CPU's caches flushed (a 64 MiB copy) before each call" if cold
                   else "the gradients set just before each call")
            record_count_fit(p, f"{base}_cold" if cold else base,
                             lambda cold=cold, opt1=opt1, opt2=opt2: (zero_grad_time(opt1, cold), zero_grad_time(opt2, cold)),
                             n1, n2,
                             f"optimizer.zero_grad(set_to_none=True) on {n1} and {n2} fp32 parameters holding gradients "
                             f"of {' and '.join(str(n) for n in shape['param_numels'])} elements, {how}; "
                             f"(T({n2}) - T({n1})) / {n2 - n1}; host clock around the call", shape)


# ----------------------------------------------------------------------------- (d) sync, events

# Calls of python_reference_work() after each group of a pass's figures: a shared host's Python speed
# swings by 2x for minutes at a time (on one H200 run of 2026-12-01 all 93 calls of three passes' blocks
# of 31 ran at 1.40 ms or slower, where the runs before reached 0.86), so the reference is sampled at
# every moment of the probe's run, not in one block per pass.
PYTHON_REFERENCE_CALLS_PER_GROUP = 3


def record_python_reference(p: Probe, samples_s: list[float], groups: int) -> None:
    p.record("python_reference", samples_s,
             f"python_reference_work(), {PYTHON_REFERENCE_CALLS_PER_GROUP} calls after each of the pass's {groups} "
             f"groups of figures (its moments over minutes), median; min: the fastest call, which roofsim relates "
             f"to the exporter's fastest")


def sync_probes(p: Probe, n_calls: int) -> None:
    keys = ("cuda_synchronize_idle", "cuda_event_record", "cuda_event_elapsed_time",
            "launch_sync_roundtrip", "item_roundtrip")
    if not p.cuda:
        for key in keys:
            p.skip(key, "needs a CUDA device")
        return
    x = torch.randn(16, device=p.device)

    def per_call(body):
        def measure():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n_calls):
                body()
            return (time.perf_counter() - t0) / n_calls
        return p.repeat(measure)

    p.record("cuda_synchronize_idle", per_call(torch.cuda.synchronize),
             f"{n_calls} x torch.cuda.synchronize() with no work queued; wall / {n_calls}")
    ev = torch.cuda.Event(enable_timing=True)
    p.record("cuda_event_record", per_call(ev.record),
             f"{n_calls} x Event(enable_timing=True).record(); host wall / {n_calls}")
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ev0.record()
    ev1.record()
    torch.cuda.synchronize()
    p.record("cuda_event_elapsed_time", per_call(lambda: ev0.elapsed_time(ev1)),
             f"{n_calls} x elapsed_time() of two finished events; wall / {n_calls}")

    def launch_sync():
        x.add_(1.0)
        torch.cuda.synchronize()

    p.record("launch_sync_roundtrip", per_call(launch_sync),
             f"{n_calls} x (one tiny in-place add + torch.cuda.synchronize()); wall / {n_calls}")
    p.record("item_roundtrip", per_call(lambda: x.sum().item()),
             f"{n_calls} x x.sum().item() on 16 elements (kernel + copy to host); wall / {n_calls}")


def gpu_gap_probe(p: Probe, launches: int = 200) -> None:
    """The GPU's own time between back-to-back kernels of one stream: `launches` adds of 16 M bfloat16
    elements (about 25 us of GPU work each, far more than their host cost, so the queue never runs
    dry), CUDA events around them, less the kernels' own durations (CUPTI) of the same loop."""
    n = 1 << 24
    a = torch.randn(n, device=p.device, dtype=torch.bfloat16)
    b = torch.randn(n, device=p.device, dtype=torch.bfloat16)
    c = torch.empty_like(a)

    def loop():
        for _ in range(launches):
            torch.add(a, b, out=c)

    try:
        timed = event_timer(p)
        loop()
        gaps = []
        for _ in range(p.repeats):
            interval = timed(loop) / launches
            gaps.append(max(0.0, interval - kernel_seconds(loop) / launches))
    except KernelTimesUnavailable as exc:
        p.skip("gpu_kernel_gap", first_line(exc))
        return
    p.record("gpu_kernel_gap", gaps,
             f"{launches} back-to-back adds of {n} bfloat16 elements: CUDA-event interval per kernel minus "
             f"the kernel's CUPTI duration (torch.profiler) of the same loop; GPU-bound (host far ahead)",
             host=False)


# ----------------------------------------------------------------------------- document

def describe_device(device: torch.device, key_override: str | None) -> dict:
    host = {"host_cpu": host_cpu_name(), "host_logical_cpus": os.cpu_count(),
            "platform": platform.platform()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        name = torch.cuda.get_device_name(device)
        return {"name": name, "key": key_override or gpu_key_for(name),
                "sm_count": props.multi_processor_count, "memory_bytes": props.total_memory,
                "compute_capability": f"{props.major}.{props.minor}", **host}
    return {"name": host["host_cpu"], "key": key_override or "cpu", "sm_count": None,
            "memory_bytes": None, "compute_capability": None, **host}


def host_speed_of(probes: list) -> dict | None:
    """The host's speed over the probes' passes (their canaries), as a profile's "host_speed" holds it;
    None where no canary was taken."""
    canaries = sorted(c for q in probes for c in q.canaries)
    host_speed = None
    if canaries:
        host_speed = {
            "reference_seconds_per_op": statistics.median(canaries),
            "canary": f"{CANARY_OPS} x torch.add of two 1-element tensors between two synchronizes, wall / "
                      f"{CANARY_OPS}; before each timed repetition (at most one per "
                      f"{probes[0].canary_spacing_s * 1e3:g} ms) and after each measurement",
            "canaries": len(canaries),
            "canary_p10_seconds": canaries[len(canaries) // 10],
            "canary_p90_seconds": canaries[(9 * len(canaries)) // 10],
            "use": "the figures are as measured; roofsim reads each at this host speed: the median over "
                   "passes of pass_seconds x reference_seconds_per_op / pass_host_canary_seconds",
        }
        backward_canaries = sorted(c for q in probes for c in q.backward_canaries)
        if backward_canaries:
            host_speed.update({
                "backward_reference_seconds_per_node": statistics.median(backward_canaries),
                "backward_canary": f"after each canary, the backward() of a chain of {BACKWARD_CANARY_NODES} "
                                   "multiplications of a 1-element tensor, from a synchronize to its return, per "
                                   "node: the speed of autograd's device thread (roofsim reads the layer_backward_* figures on it)",
                "backward_canary_p10_seconds": backward_canaries[len(backward_canaries) // 10],
                "backward_canary_p90_seconds": backward_canaries[(9 * len(backward_canaries)) // 10],
            })
    return host_speed


def profile_to_extend(option: str, path: str, info: dict) -> dict | None:
    """The framework profile at path, to add figures to: None (the reason printed) where it cannot be
    read, is no roofsim-framework-profile or was measured on another GPU or torch than this run's."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as exc:
        print(f"error: {option} {path}: {exc}", file=sys.stderr)
        return None
    if not isinstance(doc, dict) or doc.get("kind") != "roofsim-framework-profile" or not isinstance(doc.get("figures"), dict):
        print(f"error: {option} {path}: not a roofsim-framework-profile", file=sys.stderr)
        return None
    mismatch = [f"{what} {theirs!r}, here {ours!r}" for what, theirs, ours in (
        ("GPU", (doc.get("device") or {}).get("name"), info["name"]),
        ("torch", (doc.get("software") or {}).get("torch"), torch.__version__)) if theirs != ours]
    if mismatch:
        print(f"error: {option} {path} was measured with another " + "; ".join(mismatch),
              file=sys.stderr)
        return None
    return doc


def add_op_timings(args, argv, device, info, now, smoke, repeats, warmup) -> int:
    """--add-op-timings FILE: the op timings FILE lacks, timed and appended, with a record of the addition."""
    doc = profile_to_extend("--add-op-timings", args.add_op_timings, info)
    if doc is None:
        return 2
    have = {op_timing_key(e["op"], e["params"], e["precision"], [i["shape"] for i in e["inputs"]])
            for e in doc.get("op_timings", [])}
    calls = doc.get("settings", {}).get("op_timing_calls", 2 if smoke else 10)
    torch.manual_seed(0)
    p = Probe(device, repeats, warmup)
    added = op_timing_probes(p, calls, frozenset(have))
    doc.setdefault("op_timings", []).extend(added)
    doc.setdefault("op_timings_added", []).append({
        "date_utc": now.isoformat(timespec="seconds"), "count": len(added),
        "command": " ".join(shlex.quote(a) for a in [sys.executable] + (argv or sys.argv)),
        "note": "timed by this probe as the other op timings, on the same GPU model and torch; the rest of the "
                "profile is unchanged"})
    skipped = [s for s in p.skipped if s["key"].startswith("op_timing_")]
    if skipped:
        doc.setdefault("skipped", []).extend(skipped)
    out = args.out or args.add_op_timings
    write_json_atomic(out, doc)
    print(f"added {len(added)} op timings ({len(skipped)} skipped) -> {out}", flush=True)
    return 0


def add_inference_figures(args, argv, device, info, now, smoke, repeats, warmup) -> int:
    """--add-inference-figures FILE: the layer_inference_* figure of every layer case whose layer_forward_*
    figure FILE has (inference_layer_probes, in the profile's passes and samples), added to FILE with a
    record of the addition (figures_added)."""
    path = args.add_inference_figures
    doc = profile_to_extend("--add-inference-figures", path, info)
    if doc is None:
        return 2
    figures = doc["figures"]
    have = [k for k in figures if k.startswith("layer_inference_")]
    if have and not args.force:
        print(f"error: --add-inference-figures {path} already has {len(have)} layer_inference_* figures "
              "(--force measures them again, replacing them)", file=sys.stderr)
        return 2
    if not any(k.startswith("layer_forward_") for k in figures):
        print(f"error: --add-inference-figures {path} has no layer_forward_* figures to measure in inference",
              file=sys.stderr)
        return 2
    settings = doc.get("settings") or {}
    samples = 5 if smoke else settings.get("layer_samples", 41)
    passes = args.passes or (1 if smoke else settings.get("passes", 3))

    def wanted(op, suffix):
        return forward_figure_present(figures, op, suffix)

    print(f"torch framework probe: layer inference figures, {info['name']}, torch {torch.__version__}, "
          f"{passes} passes of {samples} samples -> {args.out or path}", file=sys.stderr, flush=True)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    probes = []
    for index in range(passes):
        p = Probe(device, repeats, warmup)
        probes.append(p)
        print(f"[{time.perf_counter() - t0:6.1f} s] pass {index + 1}/{passes}: layers in inference",
              file=sys.stderr, flush=True)
        inference_layer_probes(p, samples, wanted)
    added = merge_passes([q.figures for q in probes])
    if not added:
        print(f"error: no layer_inference_* figure could be measured ({len(probes[0].skipped)} skipped); "
              f"{path} is unchanged", file=sys.stderr)
        return 1
    for key in have:  # --force: the figures of this run replace the old ones
        del figures[key]
    figures.update(added)
    skipped = [s for s in probes[0].skipped if s["key"] not in added]
    doc["skipped"] = [s for s in doc.get("skipped", []) if not str(s.get("key", "")).startswith("layer_inference_")] + skipped
    doc.setdefault("figures_added", []).append({
        "date_utc": now.isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(a) for a in [sys.executable] + (argv or sys.argv)),
        "keys": list(added), "skipped": [s["key"] for s in skipped],
        "passes": passes, "layer_samples": samples,
        "host_speed": host_speed_of(probes),
        "note": "measured by this probe as a full run measures them, on the same GPU model and torch; "
                "the rest of the profile is unchanged" + (f" (replacing {len(have)} layer_inference_* figures)" if have else "")})
    out = args.out or path
    write_json_atomic(out, doc)
    print(f"[{time.perf_counter() - t0:6.1f} s] added {len(added)} layer_inference_* figures "
          f"({len(skipped)} skipped) -> {out}", file=sys.stderr, flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description="Measure PyTorch framework host costs (eager op issue, autograd backward, "
                    "optimizer step, synchronize/events) and write a roofsim-framework-profile "
                    "JSON document. See docs/validation.md.")
    ap.add_argument("--out", help="output JSON path (default: data/calibrations/"
                                  "<gpu-key>-torch-framework-<date>.json in the repository)")
    ap.add_argument("--gpu-key", help="roofsim GPU key to record (default: mapped from the device name)")
    ap.add_argument("--device", default="cuda", help="torch device (default cuda; cpu for testing)")
    ap.add_argument("--smoke", action="store_true",
                    help="few ops, few repetitions and tiny sizes, to test the script itself")
    ap.add_argument("--repeats", type=int, default=None,
                    help="measurements per figure (default 11; 3 with --smoke)")
    ap.add_argument("--warmup", type=int, default=None,
                    help="untimed measurements before them (default 2; 1 with --smoke)")
    ap.add_argument("--ops", type=int, default=None,
                    help="ops issued per eager measurement (default 2000; 50 with --smoke)")
    ap.add_argument("--passes", type=int, default=None,
                    help="passes over the host-cost figures, each figure the median of its passes "
                         "(default 3; 1 with --smoke): a host's speed changes for seconds at a time")
    ap.add_argument("--add-op-timings", metavar="FILE",
                    help="time only the op timings that FILE (a framework profile of this GPU and torch) "
                         "lacks, and add them to it (to --out instead, if given); its other figures stay")
    ap.add_argument("--add-inference-figures", metavar="FILE",
                    help="measure only the layer_inference_* figures (each layer_forward_* figure FILE has, the "
                         "layers in eval() under torch.inference_mode()) and add them to FILE (a framework "
                         "profile of this GPU and torch; to --out instead, if given), recorded under figures_added")
    ap.add_argument("--force", action="store_true",
                    help="with --add-inference-figures: measure again the layer_inference_* figures FILE has")
    ap.add_argument("--layer-ops", metavar="FILE",
                    help="only record the aten ops each chain figure's layer dispatches (forward_ops, "
                         "backward_ops: no timing, seconds) and write them to FILE")
    args = ap.parse_args(argv)
    if args.add_op_timings and args.add_inference_figures:
        ap.error("--add-op-timings and --add-inference-figures go in separate runs")
    if args.force and not args.add_inference_figures:
        ap.error("--force goes with --add-inference-figures")
    smoke = args.smoke
    repeats = args.repeats or (3 if smoke else 11)
    warmup = args.warmup if args.warmup is not None else (1 if smoke else 2)
    n_ops = args.ops or (50 if smoke else 2000)
    passes = args.passes or (1 if smoke else 3)
    if passes < 1:
        ap.error("--passes must be at least 1")

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: CUDA is not available (use --device cpu --smoke to test without a GPU)", file=sys.stderr)
        return 2
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)
    now = dt.datetime.now(dt.timezone.utc)
    info = describe_device(device, args.gpu_key)
    if args.layer_ops:
        lists = {"kind": "roofsim framework probe: layer op lists", "device": info,
                 "torch": torch.__version__, "date_utc": f"{now:%Y-%m-%d %H:%M:%S}",
                 "command": "python3 calibrate/torch_framework_probe.py " + " ".join(map(shlex.quote, argv or sys.argv[1:])),
                 "method": chain_op_counts.__doc__.replace("\n    ", " ").strip(),
                 "figures": chain_op_lists(device)}
        with open(args.layer_ops, "w") as f:
            json.dump(lists, f, indent=1, sort_keys=True)
        print(f"wrote the op lists of {len(lists['figures'])} figures to {args.layer_ops}")
        return 0
    if args.add_op_timings:
        return add_op_timings(args, argv, device, info, now, smoke, repeats, warmup)
    if args.add_inference_figures:
        return add_inference_figures(args, argv, device, info, now, smoke, repeats, warmup)
    out = args.out or os.path.join(REPO_ROOT, "data", "calibrations",
                                   f"{info['key']}-torch-framework-{now:%Y-%m-%d}.json")
    print(f"torch framework probe: {info['name']}, torch {torch.__version__} -> {out}", flush=True)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    settings = {"repeats": repeats, "warmup": warmup, "eager_ops_per_measurement": n_ops,
                "backward_chain_lengths": [20, 100] if smoke else [100, 1000],
                "optimizer_param_counts": [8, 32] if smoke else [64, 512],
                "optimizer_small_param_numel": 256, "optimizer_launch_steps": 2 if smoke else 9,
                "optimizer_large_param_numel": 4096 if smoke else 4 * 1024 * 1024,
                "zero_grad_large_param_numel": 1024 if smoke else 1024 * 1024,
                "sync_calls_per_measurement": 50 if smoke else 1000, "smoke": smoke,
                "layer_samples": 5 if smoke else 41, "op_timing_calls": 2 if smoke else 10,
                "split_samples": 3 if smoke else 21, "steady_batches": 3 if smoke else 11,
                "steady_repetitions": 5 if smoke else 50, "passes": passes,
                "conv_host_samples": 2 if smoke else 5, "conv_host_calls": 2 if smoke else 10}

    def host_groups(p: Probe):
        return (
        ("eager ops", lambda: eager_op_probes(p, n_ops)),
        ("backward", lambda: backward_probes(p, *settings["backward_chain_lengths"])),
        ("layers", lambda: layer_probes(p, settings["layer_samples"])),
        ("layers in inference", lambda: inference_layer_probes(p, settings["layer_samples"])),
        ("backward call split", lambda: backward_split_probes(p, settings["split_samples"])),
        ("backward walk", lambda: backward_walk_probes(p, settings["split_samples"])),
        ("layers in steady state", lambda: steady_layer_probes(p, settings["steady_batches"],
                                                               settings["steady_repetitions"])),
        ("convolution host by size", lambda: conv_host_probes(p, settings["conv_host_samples"],
                                                              settings["conv_host_calls"], smoke)),
        ("optimizers", lambda: optimizer_probes(p, *settings["optimizer_param_counts"],
                                                settings["optimizer_small_param_numel"],
                                                settings["optimizer_large_param_numel"])),
        ("zero_grad", lambda: zero_grad_probes(p, *settings["optimizer_param_counts"],
                                               settings["optimizer_small_param_numel"],
                                               settings["zero_grad_large_param_numel"])),
        ("synchronize and events", lambda: sync_probes(p, settings["sync_calls_per_measurement"])),
        )

    op_timings: list = []
    if smoke:  # tiny shapes would not be GPU-bound anyway; a few cases test the code path
        settings["op_timing_smoke"] = True
    # The host figures in `passes` passes, one after the other, so that each figure's median is taken
    # over moments seconds to a minute apart; the GPU-paced figures once, after the last pass. They
    # come last because they time kernels with torch.profiler, and a process that has run
    # torch.profiler once issues every op more slowly from then on (CUPTI stays attached;
    # docs/validation.md, "What the diagnostics found"): no host figure may follow them.
    probes = []
    for index in range(passes):
        p = Probe(device, repeats, warmup)
        probes.append(p)
        reference_s: list[float] = []  # python_reference, sampled after every group
        groups = host_groups(p)
        for name, run in groups:
            print(f"[{time.perf_counter() - t0:6.1f} s] pass {index + 1}/{passes}: {name}", flush=True)
            try:
                run()
            except Exception as exc:  # one group failing must not lose the others
                p.skip(name.replace(" ", "_"), first_line(exc))
            reference_s.extend(python_reference_calls(PYTHON_REFERENCE_CALLS_PER_GROUP))
        record_python_reference(p, reference_s, len(groups))
    gpu_paced = Probe(device, repeats, warmup)  # its canaries stay out of the host's speed
    for name, run in (("GPU kernel gap", lambda: gpu_gap_probe(gpu_paced)),
                      ("op timings", lambda: op_timings.extend(op_timing_probes(gpu_paced, settings["op_timing_calls"]))),
                      ("optimizer launches", lambda: optimizer_launch_probes(gpu_paced, settings["optimizer_param_counts"][1],
                                                                             settings["optimizer_small_param_numel"],
                                                                             settings["optimizer_launch_steps"]))):
        print(f"[{time.perf_counter() - t0:6.1f} s] GPU-paced: {name}", flush=True)
        try:
            run()
        except Exception as exc:
            gpu_paced.skip(name.replace(" ", "_"), first_line(exc))
    figures = merge_passes([q.figures for q in probes])
    figures.update(gpu_paced.figures)
    # The host's speed over the run: the figures stay as measured, with their canaries; roofsim puts
    # each on the run's median canary when it reads the profile (framework.hpp, at_host_speed).
    host_speed = host_speed_of(probes)
    skipped = [s for s in probes[0].skipped + gpu_paced.skipped if s["key"] not in figures]

    cudnn = None
    with contextlib.suppress(Exception):
        cudnn = torch.backends.cudnn.version()
    doc = {
        "schema_version": SCHEMA_VERSION,
        "kind": "roofsim-framework-profile",
        "device": info,
        "software": {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": cudnn,
                     "python": platform.python_version()},
        "date_utc": now.isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(a) for a in [sys.executable] + sys.argv),
        "settings": settings,
        "host_speed": host_speed,
        "figures": figures,
        "op_timings": op_timings,
        "skipped": skipped,
    }
    write_json_atomic(out, doc)
    print(f"[{time.perf_counter() - t0:6.1f} s] done: {len(figures)} figures, "
          f"{len(skipped)} skipped -> {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
