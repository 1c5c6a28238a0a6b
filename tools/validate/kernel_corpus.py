#!/usr/bin/env python3
"""The kernel corpus: GEMMs, convolutions and fused attention timed as PyTorch runs them, on shapes
that no calibration sweep chose, to test roofsim's kernel models where they must generalize.

Two steps:

  kernel_corpus.py cases --out cases.json
      Writes the case list (no GPU needed; the convolutions are read from torchvision's models).
      * GEMM: `torch.mm` / `torch.bmm` on operands stored as used (N) or as a transposed view (T),
        in the four layouts; sizes log-uniform, a third of them odd or prime, a fifth small-output
        with a deep K (the weight gradients of convolutions and small layers), a fifth batched.
        Drawn with a fixed seed.
      * Convolution: every distinct 2-D convolution (per-sample geometry) of torchvision's
        classification and detection models at their usual input sizes, each at three batch sizes.
      * Attention: `F.scaled_dot_product_attention` on random B x H x L x D shapes, causal or not.
      * Norms (layer norm, batch norm), pooling (max, average, adaptive average) and elementwise ops
        (relu, gelu, silu, sigmoid, tanh, dropout, add, mul, softmax) on random activation shapes.
      Every case carries its half, "fit" or "test", from a hash of its shape: a GEMM's sorted
      dimensions and batch (all layouts of one product in one half), a convolution's geometry less
      its batch size, an attention's shape. The half is fixed before anything is fitted.

  kernel_corpus.py measure cases.json --out DIR [--families gemm,conv,attention] [--deadline-s S]
      Times every case on the GPU in each compute unit and writes DIR/<family>.csv and DIR/meta.json.
      * GEMM units: fp32 (matmul TF32 off), tf32-tensor (on), bf16-tensor (bfloat16 operands).
      * Convolution units: fp32 (cuDNN TF32 off), tf32-tensor (on), bf16-tensor; NCHW, no bias,
        cudnn.benchmark off (PyTorch's default); passes forward (aten.convolution), backward-data and
        backward-filter (aten.convolution_backward with one output each).
      * Attention: bfloat16 on the flash, memory-efficient and cuDNN backends; float32 on the
        memory-efficient backend with TF32 off (fp32) and on (tf32-tensor); forward, and backward
        as (forward + backward) - forward.
      * Timer: the call captured `reps` times in a CUDA graph (reps such that a replay lasts about a
        millisecond), replayed once to warm, then 5 timed replays between CUDA events; seconds = the
        median replay / reps, with the 10th and 90th percentiles. A graph replay shows the GPU's
        time, not the host's: these are kernel times, back to back, as in a GPU-paced step.
        Inputs are random normal (never zeros), made once per case.
      * A case that fails (out of memory, a backend that refuses the shape) is written with its
        error and no time; no number is ever filled in. At the deadline the run stops and says so
        (meta.json: "complete"); `--resume` measures the rest into the same files.

  kernel_corpus.py kernels cases.json --out DIR [--families gemm,conv]
      Records which kernels PyTorch launches for each GEMM and convolution call (torch.profiler) and
      each kernel's time in that call: DIR/<family>_kernels.csv (the case, then `kernels`: index:us
      pairs joined by `;`) and DIR/kernel_names.txt (line i is kernel i's name). What the library
      picks (tile, split of K, layout transposes) is read from these names (docs/NOTES.md).

Python 3.11+ standard library and torch (torchvision for `cases` only). roofsim reads the CSVs with
`roofsim validate --kernels DIR` (docs/validation.md).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import hashlib
import json
import math
import os
import random
import statistics
import sys
import time

SEED = 45
GEMM_CASES = 2000
ATTENTION_CASES = 320


def half_of(key: str) -> str:
    """'fit' or 'test' from a stable hash of the case's shape key."""
    return "fit" if hashlib.sha256(key.encode()).digest()[0] % 2 == 0 else "test"


# ---------------------------------------------------------------------------------------------
# cases

def _primes_near(x: int, rng: random.Random) -> int:
    def is_prime(v: int) -> bool:
        if v < 2:
            return False
        for p in range(2, int(math.isqrt(v)) + 1):
            if v % p == 0:
                return False
        return True
    v = max(2, x)
    while not is_prime(v):
        v += 1
    return v


def _log_uniform(rng: random.Random, lo: float, hi: float) -> int:
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def _shape_class(rng: random.Random, x: int) -> int:
    """Aligned to 64, to 8, odd, or prime, as a layer's widths and token counts come."""
    r = rng.random()
    if r < 0.35:
        return max(64, x // 64 * 64)
    if r < 0.67:
        return max(8, x // 8 * 8)
    if r < 0.84:
        return x | 1
    return _primes_near(x, rng)


def gemm_cases(rng: random.Random) -> list[dict]:
    cases, seen = [], set()
    max_flops, min_flops = 4e11, 2e7
    while len(cases) < GEMM_CASES:
        kind = rng.random()
        batch = 1
        if kind < 0.2:  # small output, deep K: weight gradients of convolutions and small layers
            m = _shape_class(rng, _log_uniform(rng, 8, 1024))
            n = _shape_class(rng, _log_uniform(rng, 8, 1024))
            k = _shape_class(rng, _log_uniform(rng, 8192, 1 << 20))
        elif kind < 0.4:  # batched: attention's products and grouped work
            batch = _log_uniform(rng, 2, 512)
            m = _shape_class(rng, _log_uniform(rng, 16, 4096))
            n = _shape_class(rng, _log_uniform(rng, 16, 4096))
            k = _shape_class(rng, _log_uniform(rng, 16, 4096))
        else:  # linear-like and general
            m = _shape_class(rng, _log_uniform(rng, 16, 65536))
            n = _shape_class(rng, _log_uniform(rng, 16, 65536))
            k = _shape_class(rng, _log_uniform(rng, 16, 16384))
        flops = 2.0 * m * n * k * batch
        elements = batch * (m * k + k * n + m * n)
        if not (min_flops <= flops <= max_flops) or elements > 1.5e9:
            continue
        layout = rng.choice(["NN", "NT", "TN", "TT"])
        key = (m, n, k, batch, layout)
        if key in seen:
            continue
        seen.add(key)
        dims = sorted((m, n, k))
        cases.append({"m": m, "n": n, "k": k, "batch": batch, "layout": layout,
                      "half": half_of(f"gemm:{dims[0]}x{dims[1]}x{dims[2]}:b{batch}")})
    return cases


# torchvision models and the input each is usually trained at (C, H, W).
CLASSIFICATION = {
    "resnet18": 224, "resnet50": 224, "resnet101": 224, "resnet152": 224, "resnext50_32x4d": 224,
    "wide_resnet50_2": 224, "vgg16": 224, "vgg19_bn": 224, "alexnet": 224, "squeezenet1_1": 224,
    "densenet121": 224, "densenet201": 224, "googlenet": 224, "inception_v3": 299, "mobilenet_v2": 224,
    "mobilenet_v3_large": 224, "shufflenet_v2_x1_0": 224, "mnasnet1_0": 224, "efficientnet_b0": 224,
    "efficientnet_b4": 380, "regnet_y_8gf": 224, "convnext_tiny": 224,
}
DETECTION = {  # their transforms resize to about this size; the batch is the images a GPU takes
    "fasterrcnn_resnet50_fpn": 800, "retinanet_resnet50_fpn": 800, "maskrcnn_resnet50_fpn": 800,
    "keypointrcnn_resnet50_fpn": 800, "ssd300_vgg16": 300, "ssdlite320_mobilenet_v3_large": 320,
    "fcos_resnet50_fpn": 800,
}
CLASSIFICATION_BATCHES = (2, 16, 64)
DETECTION_BATCHES = (1, 4, 8)


def conv_cases() -> list[dict]:
    import torch
    import torchvision

    geoms: dict[tuple, str] = {}
    detection_geoms: set[tuple] = set()

    def hook(name, detection):
        def f(mod, inputs, _out):
            x = inputs[0]
            if x.dim() != 4:
                return
            g = (x.shape[1], x.shape[2], x.shape[3], mod.out_channels, mod.kernel_size[0], mod.kernel_size[1],
                 mod.stride[0], mod.stride[1], mod.padding[0], mod.padding[1], mod.dilation[0], mod.dilation[1],
                 mod.groups)
            if isinstance(mod.padding, str):
                return
            geoms.setdefault(g, name)
            if detection:
                detection_geoms.add(g)
        return f

    torch.manual_seed(0)
    for detection, table in ((False, CLASSIFICATION), (True, DETECTION)):
        for name, size in table.items():
            ctor = getattr(torchvision.models.detection if detection else torchvision.models, name)
            kwargs = {"weights": None, "weights_backbone": None} if detection else {"weights": None}
            if name == "inception_v3" or name == "googlenet":
                kwargs["aux_logits"] = False
                kwargs["init_weights"] = False
            model = ctor(**kwargs).eval()
            handles = [m.register_forward_hook(hook(name, detection)) for m in model.modules()
                       if isinstance(m, torch.nn.Conv2d)]
            with torch.no_grad():
                x = torch.rand(1 if detection else 1, 3, size, size)
                model([x[0]] if detection else x)
            for h in handles:
                h.remove()
            print(f"{name}: {len(geoms)} geometries so far", file=sys.stderr)
    cases = []
    for g, model in geoms.items():
        c, h, w, k, r, s, sh, sw, ph, pw, dh, dw, groups = (int(v) for v in g)
        batches = DETECTION_BATCHES if g in detection_geoms else CLASSIFICATION_BATCHES
        half = half_of("conv:" + ",".join(str(int(v)) for v in g))
        for n in batches:
            cases.append({"n": n, "c": c, "h": h, "w": w, "k": k, "r": r, "s": s, "stride_h": sh, "stride_w": sw,
                          "pad_h": ph, "pad_w": pw, "dilation_h": dh, "dilation_w": dw, "groups": groups,
                          "model": model, "half": half})
    return cases


def attention_cases(rng: random.Random) -> list[dict]:
    cases, seen = [], set()
    while len(cases) < ATTENTION_CASES:
        d = rng.choice([32, 64, 64, 80, 96, 128, 128])
        heads = rng.choice([1, 4, 8, 12, 16, 16, 32])
        seq = _shape_class(rng, _log_uniform(rng, 64, 8192))
        batch = max(1, _log_uniform(rng, 1, 64))
        causal = rng.random() < 0.4
        flops = 4.0 * batch * heads * seq * seq * d
        if not (5e8 <= flops <= 3e11):
            continue
        key = (batch, heads, seq, d, causal)
        if key in seen:
            continue
        seen.add(key)
        cases.append({"batch": batch, "heads": heads, "seq_q": seq, "seq_kv": seq, "head_dim": d,
                      "causal": int(causal), "half": half_of(f"attention:{batch}x{heads}x{seq}x{seq}x{d}:{int(causal)}")})
    return cases


# The memory-bound families: each op's cases as (op, shape, attrs); attrs hold no commas.
NORM_CASES, POOL_CASES, ELEMENTWISE_CASES = 160, 160, 240
MEMORY_ELEMENTS = (1e5, 1.5e8)
POOLS = (("maxpool2d", "kernel_size=3;stride=2;padding=1"), ("maxpool2d", "kernel_size=2;stride=2;padding=0"),
         ("avgpool2d", "kernel_size=2;stride=2;padding=0"), ("avgpool2d", "kernel_size=3;stride=1;padding=1"),
         ("adaptive_avgpool2d", "output_size=1"))
ELEMENTWISE = ("relu", "gelu", "silu", "sigmoid", "tanh", "dropout", "add", "mul", "softmax")


def _image_shape(rng: random.Random) -> list[int]:
    """N x C x H x W as a convolutional network's activations come."""
    n = _log_uniform(rng, 1, 128)
    c = _shape_class(rng, _log_uniform(rng, 16, 2048))
    hw = rng.choice([7, 14, 28, 56, 112, 224]) if rng.random() < 0.6 else _log_uniform(rng, 8, 300)
    return [n, c, hw, hw]


def memory_cases(rng: random.Random) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {"norm": [], "pool": [], "elementwise": []}
    seen = set()

    def add(family: str, op: str, shape: list[int], attrs: str) -> None:
        elements = math.prod(shape)
        key = (op, tuple(shape), attrs)
        if not (MEMORY_ELEMENTS[0] <= elements <= MEMORY_ELEMENTS[1]) or key in seen:
            return
        seen.add(key)
        out[family].append({"op": op, "shape": "x".join(str(v) for v in shape), "attrs": attrs,
                            "half": half_of(f"{family}:{op}:{'x'.join(str(v) for v in shape)}:{attrs}")})

    while len(out["norm"]) < NORM_CASES:
        if rng.random() < 0.5:
            add("norm", "layernorm", [_log_uniform(rng, 64, 65536), _shape_class(rng, _log_uniform(rng, 64, 8192))], "")
        else:
            add("norm", "batchnorm2d", _image_shape(rng), "")
    while len(out["pool"]) < POOL_CASES:
        op, attrs = rng.choice(POOLS)
        add("pool", op, _image_shape(rng), attrs)
    while len(out["elementwise"]) < ELEMENTWISE_CASES:
        op = rng.choice(ELEMENTWISE)
        shape = [_log_uniform(rng, 16, 65536), _shape_class(rng, _log_uniform(rng, 16, 8192))]
        add("elementwise", op, shape, "p=0.1" if op == "dropout" else "")
    return out


def cmd_cases(args) -> int:
    rng = random.Random(SEED)
    out = {"seed": SEED, "gemm": gemm_cases(rng), "attention": attention_cases(random.Random(SEED + 1)),
           **memory_cases(random.Random(SEED + 2)), "conv": conv_cases()}
    with open(args.out, "w") as f:
        json.dump(out, f)
    for fam in ("gemm", "conv", "attention", "norm", "pool", "elementwise"):
        fit = sum(1 for c in out[fam] if c["half"] == "fit")
        print(f"{fam}: {len(out[fam])} cases ({fit} fit, {len(out[fam]) - fit} test)")
    return 0


# ---------------------------------------------------------------------------------------------
# measure

def _time_graph(torch, fn, target_s: float = 1e-3, samples: int = 5):
    """(median, p10, p90, reps) seconds per call of fn, from CUDA-graph replays."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    # estimate one call's time from a one-call graph
    g1 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g1):
        fn()
    g1.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    g1.replay()
    b.record()
    b.synchronize()
    one = a.elapsed_time(b) * 1e-3
    reps = max(1, min(200, int(round(target_s / max(one, 1e-7)))))
    del g1
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    g.replay()
    times = []
    for _ in range(samples):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3 / reps)
    del g
    times.sort()
    q = statistics.quantiles(times, n=10, method="inclusive") if len(times) > 1 else [times[0]] * 9
    return statistics.median(times), q[0], q[-1], reps


UNITS = {  # unit -> (matmul.allow_tf32, cudnn.allow_tf32, dtype name)
    "fp32": (False, False, "float32"),
    "tf32-tensor": (True, True, "float32"),
    "bf16-tensor": (False, False, "bfloat16"),
    "fp16-tensor": (False, False, "float16"),
}
DEFAULT_UNITS = "fp32,tf32-tensor,bf16-tensor"  # GEMM and convolution units timed unless --units names others


def _set_unit(torch, unit):
    mm, cudnn, dtype = UNITS[unit]
    torch.backends.cuda.matmul.allow_tf32 = mm
    torch.backends.cudnn.allow_tf32 = cudnn
    return getattr(torch, dtype)


def gemm_call(torch, case, unit):
    dtype = _set_unit(torch, unit)
    m, n, k, b, layout = case["m"], case["n"], case["k"], case["batch"], case["layout"]
    dev = "cuda"

    def operand(rows, cols, transposed):
        shape = (cols, rows) if transposed else (rows, cols)
        if b > 1:
            shape = (b,) + shape
        t = torch.randn(shape, device=dev, dtype=dtype)
        return t.transpose(-1, -2) if transposed else t

    A = operand(m, k, layout[0] == "T")
    B = operand(k, n, layout[1] == "T")
    out = torch.empty((b, m, n) if b > 1 else (m, n), device=dev, dtype=dtype)
    if b > 1:
        return lambda: torch.bmm(A, B, out=out)
    return lambda: torch.mm(A, B, out=out)


def conv_call(torch, case, unit, pass_):
    dtype = _set_unit(torch, unit)
    n, c, h, w, k = case["n"], case["c"], case["h"], case["w"], case["k"]
    g = case["groups"]
    stride = [case["stride_h"], case["stride_w"]]
    pad = [case["pad_h"], case["pad_w"]]
    dil = [case["dilation_h"], case["dilation_w"]]
    x = torch.randn(n, c, h, w, device="cuda", dtype=dtype)
    wt = torch.randn(k, c // g, case["r"], case["s"], device="cuda", dtype=dtype)
    y = torch.ops.aten.convolution(x, wt, None, stride, pad, dil, False, [0, 0], g)
    if pass_ == "forward":
        return lambda: torch.ops.aten.convolution(x, wt, None, stride, pad, dil, False, [0, 0], g)
    dy = torch.randn_like(y)
    mask = [True, False, False] if pass_ == "backward-data" else [False, True, False]
    return lambda: torch.ops.aten.convolution_backward(dy, x, wt, None, stride, pad, dil, False, [0, 0], g, mask)


def measure_attention(torch, case, unit, backend, phase):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    dtype = _set_unit(torch, unit)
    shape_q = (case["batch"], case["heads"], case["seq_q"], case["head_dim"])
    shape_kv = (case["batch"], case["heads"], case["seq_kv"], case["head_dim"])
    need = phase == "backward"
    q = torch.randn(shape_q, device="cuda", dtype=dtype, requires_grad=need)
    kk = torch.randn(shape_kv, device="cuda", dtype=dtype, requires_grad=need)
    v = torch.randn(shape_kv, device="cuda", dtype=dtype, requires_grad=need)
    do = torch.randn(shape_q, device="cuda", dtype=dtype)
    which = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
             "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]
    causal = bool(case["causal"])
    with sdpa_kernel([which]):
        fwd = lambda: F.scaled_dot_product_attention(q, kk, v, is_causal=causal)
        if phase == "forward":
            return _time_graph(torch, fwd)

        def both():
            o = F.scaled_dot_product_attention(q, kk, v, is_causal=causal)
            torch.autograd.grad(o, (q, kk, v), do)
        f_med = _time_graph(torch, lambda: F.scaled_dot_product_attention(q.detach(), kk.detach(), v.detach(),
                                                                            is_causal=causal))
        fb = _time_graph(torch, both)
        # the backward as (forward + backward) - forward; the spread is the pair's
        return fb[0] - f_med[0], fb[1] - f_med[0], fb[2] - f_med[0], fb[3]


def _attrs(text: str) -> dict[str, int | float]:
    out = {}
    for part in filter(None, text.split(";")):
        k, v = part.split("=")
        out[k] = float(v) if "." in v else int(v)
    return out


def memory_call(torch, case, dtype):
    """(the call, the tensors whose gradients its backward computes) of a norm, pooling or elementwise case."""
    import torch.nn.functional as F
    shape = [int(v) for v in case["shape"].split("x")]
    a = _attrs(case["attrs"])
    x = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
    op = case["op"]
    grads = [x]
    if op == "layernorm":
        mod = torch.nn.LayerNorm(shape[-1], device="cuda", dtype=dtype)
        grads += list(mod.parameters())
        return (lambda: mod(x)), grads
    if op == "batchnorm2d":
        mod = torch.nn.BatchNorm2d(shape[1], device="cuda", dtype=dtype).train()
        grads += list(mod.parameters())
        return (lambda: mod(x)), grads
    if op == "maxpool2d":
        return (lambda: F.max_pool2d(x, a["kernel_size"], a["stride"], a["padding"])), grads
    if op == "avgpool2d":
        return (lambda: F.avg_pool2d(x, a["kernel_size"], a["stride"], a["padding"])), grads
    if op == "adaptive_avgpool2d":
        return (lambda: F.adaptive_avg_pool2d(x, a["output_size"])), grads
    if op in ("add", "mul"):
        y = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
        grads.append(y)
        return ((lambda: x + y) if op == "add" else (lambda: x * y)), grads
    if op == "dropout":
        return (lambda: F.dropout(x, a["p"], training=True)), grads
    if op == "softmax":
        return (lambda: F.softmax(x, -1)), grads
    fn = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}[op]
    return (lambda: fn(x)), grads


def measure_memory(torch, case, unit, phase):
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[unit]
    call, grads = memory_call(torch, case, dtype)
    if phase == "forward":  # in grad mode, as a training step runs it (dropout keeps its mask, ...)
        return _time_graph(torch, call)
    dy = torch.randn_like(call())

    def both():
        torch.autograd.grad(call(), grads, dy)
    f = _time_graph(torch, call)
    fb = _time_graph(torch, both)
    return fb[0] - f[0], fb[1] - f[0], fb[2] - f[0], fb[3]


MEMORY_FIELDS = ["half", "unit", "phase", "op", "shape", "attrs"]
FIELDS = {
    "gemm": ["half", "unit", "layout", "m", "n", "k", "batch"],
    "conv": ["half", "unit", "pass", "n", "c", "h", "w", "k", "r", "s", "stride_h", "stride_w", "pad_h", "pad_w",
             "dilation_h", "dilation_w", "groups", "model"],
    "attention": ["half", "unit", "backend", "phase", "batch", "heads", "seq_q", "seq_kv", "head_dim", "causal"],
    "norm": MEMORY_FIELDS, "pool": MEMORY_FIELDS, "elementwise": MEMORY_FIELDS,
}
TIMING = ["seconds", "p10", "p90", "reps", "error"]


def runs_of(family, case, units=DEFAULT_UNITS.split(",")):
    if family == "gemm":
        for unit in units:
            yield {"unit": unit}, lambda torch, unit=unit: _time_graph(torch, gemm_call(torch, case, unit))
    elif family == "conv":
        for unit in units:
            for p in ("forward", "backward-data", "backward-filter"):
                yield ({"unit": unit, "pass": p},
                       lambda torch, unit=unit, p=p: _time_graph(torch, conv_call(torch, case, unit, p)))
    elif family in ("norm", "pool", "elementwise"):
        for unit in ("fp32", "bf16"):
            # an add's backward passes its gradient on: no kernel to time
            for phase in ("forward",) if case["op"] == "add" else ("forward", "backward"):
                yield ({"unit": unit, "phase": phase},
                       lambda torch, unit=unit, phase=phase: measure_memory(torch, case, unit, phase))
    else:
        for unit, backend in (("bf16-tensor", "flash"), ("bf16-tensor", "efficient"), ("bf16-tensor", "cudnn"),
                              ("fp32", "efficient"), ("tf32-tensor", "efficient")):
            for phase in ("forward", "backward"):
                yield ({"unit": unit, "backend": backend, "phase": phase},
                       lambda torch, unit=unit, backend=backend, phase=phase:
                       measure_attention(torch, case, unit, backend, phase))


def cmd_measure(args) -> int:
    import warnings
    import torch
    warnings.filterwarnings("ignore")  # the TF32 flags' deprecation notes, once per call
    if not torch.cuda.is_available():
        print("kernel_corpus.py measure: no CUDA GPU", file=sys.stderr)
        return 1
    with open(args.cases) as f:
        cases = json.load(f)
    os.makedirs(args.out, exist_ok=True)
    start = time.monotonic()
    torch.backends.cudnn.benchmark = False
    props = torch.cuda.get_device_properties(0)
    meta = {
        "kind": "roofsim-kernel-corpus", "schema_version": 1,
        "gpu_key": args.gpu_key, "gpu_name": props.name, "sm_count": props.multi_processor_count,
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
        "seed": cases["seed"], "tool": "tools/validate/kernel_corpus.py",
        "method": "CUDA-graph replays of `reps` back-to-back calls, median of 5 replays / reps "
                  "(p10 and p90 of the 5); attention backward = (forward + backward) - forward",
        "families": {},
    }
    stopped = False
    for family in args.families.split(","):
        rows = 0
        path = os.path.join(args.out, f"{family}.csv")
        # Cases in a fixed shuffled order, so that a run stopped at its deadline has measured an
        # even share of every model and size; --resume skips the cases a file already holds.
        order = list(cases[family])
        random.Random(SEED).shuffle(order)
        shape_fields = [k for k in FIELDS[family] if k in order[0] and k != "half"]
        done = set()
        if args.resume and os.path.exists(path):
            with open(path, newline="") as f:
                done = {tuple(str(r[k]) for k in shape_fields) for r in csv.DictReader(f)}
        fresh = not done
        with open(path, "w" if fresh else "a", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            if fresh:
                w.writerow(FIELDS[family] + TIMING)
            for i, case in enumerate(order[:args.limit] if args.limit else order):
                if tuple(str(case[k]) for k in shape_fields) in done:
                    continue
                if args.deadline_s and time.monotonic() - start > args.deadline_s:
                    stopped = True
                    break
                for extra, run in runs_of(family, case, args.units.split(",")):
                    row = dict(case, **extra)
                    try:
                        med, p10, p90, reps = run(torch)
                        timing = [f"{med:.6e}", f"{p10:.6e}", f"{p90:.6e}", reps, ""]
                    except Exception as e:  # a shape a backend refuses, out of memory
                        msg = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
                        timing = ["", "", "", "", msg.replace(",", ";")]
                        torch.cuda.synchronize()
                    torch.cuda.empty_cache() if (i % 50 == 0) else None
                    w.writerow([row[k] for k in FIELDS[family]] + timing)
                    rows += 1
                if i % 100 == 0:
                    print(f"[{time.monotonic() - start:6.1f} s] {family} {i}/{len(cases[family])}", flush=True)
                    f.flush()
        with open(path, newline="") as f:
            rows = sum(1 for _ in csv.DictReader(f))
        meta["families"][family] = {"rows": rows, "cases": len(cases[family]), "complete": not stopped}
        if stopped:
            break
    meta["wall_s"] = round(time.monotonic() - start, 1)
    meta_path = os.path.join(args.out, "meta.json")
    if args.resume and os.path.exists(meta_path):  # the runs that wrote the files, oldest first
        with open(meta_path) as f:
            old = json.load(f)
        meta["date_utc"] = ", ".join([old["date_utc"], meta["date_utc"]])
        meta["wall_s"] = round(old["wall_s"] + meta["wall_s"], 1)
        meta["families"] = dict(old["families"], **meta["families"])
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps(meta["families"]))
    return 0


def _trace_kernels(path: str) -> dict[str, list[tuple[str, float]]]:
    """From a torch.profiler Chrome trace: each user annotation's GPU work (kernels, memsets and
    copies launched inside it), as (name, microseconds) in launch order."""
    import bisect
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    ranges = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in events
                    if e.get("cat") == "user_annotation" and e.get("ph") == "X")
    starts = [r[0] for r in ranges]
    launched = {}  # correlation -> (launch time, annotation)
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            i = bisect.bisect_right(starts, e["ts"]) - 1
            if i >= 0 and e["ts"] <= ranges[i][1]:
                launched[e["args"]["correlation"]] = (e["ts"], ranges[i][2])
    out: dict[str, list] = {}
    for e in sorted((e for e in events if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")),
                    key=lambda e: e["ts"]):
        where = launched.get(e.get("args", {}).get("correlation"))
        if where:
            out.setdefault(where[1], []).append((e["name"], float(e["dur"])))
    return out


def cmd_kernels(args) -> int:
    """Which kernels PyTorch runs for each GEMM and convolution case (torch.profiler), and each one's
    time in that one call: the library's own choice of tile, split and layout transposes."""
    import tempfile
    import warnings
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function
    warnings.filterwarnings("ignore")
    with open(args.cases) as f:
        cases = json.load(f)
    os.makedirs(args.out, exist_ok=True)
    torch.backends.cudnn.benchmark = False
    names: dict[str, int] = {}
    start = time.monotonic()
    for family in args.families.split(","):
        runs = []
        for case in cases[family][:args.limit] if args.limit else cases[family]:
            for unit in DEFAULT_UNITS.split(","):
                for p in (None,) if family == "gemm" else ("forward", "backward-data", "backward-filter"):
                    runs.append((case, unit, p))
        random.Random(SEED).shuffle(runs)  # a run cut short has an even share of every kind of case
        path = os.path.join(args.out, f"{family}_kernels.csv")
        with open(path, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            fields = FIELDS[family]
            w.writerow(fields + ["kernels"])
            for chunk in range(0, len(runs), args.chunk):
                part = runs[chunk:chunk + args.chunk]
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    for j, (case, unit, p) in enumerate(part):
                        fn = None
                        try:
                            fn = gemm_call(torch, case, unit) if p is None else conv_call(torch, case, unit, p)
                            fn()
                            fn()
                            with record_function(f"run{j}"):
                                fn()
                            torch.cuda.synchronize()
                        except Exception:  # a shape that fails is left without kernels
                            torch.cuda.synchronize()
                        del fn
                with tempfile.NamedTemporaryFile(suffix=".json") as t:
                    prof.export_chrome_trace(t.name)
                    found = _trace_kernels(t.name)
                for j, (case, unit, p) in enumerate(part):
                    ks = found.get(f"run{j}", [])
                    text = ";".join(f"{names.setdefault(n, len(names))}:{d:.1f}" for n, d in ks)
                    row = dict(case, unit=unit, **({"pass": p} if p else {}))
                    w.writerow([row[k] for k in fields] + [text])
                torch.cuda.empty_cache()
                f.flush()
                with open(os.path.join(args.out, "kernel_names.txt"), "w") as nf:  # each chunk: a run cut short keeps its names
                    for n in sorted(names, key=names.get):
                        nf.write(n.replace("\n", " ") + "\n")
                print(f"[{time.monotonic() - start:6.1f} s] {family} kernels {chunk + len(part)}/{len(runs)}", flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cases", help="write the case list (no GPU)")
    c.add_argument("--out", required=True)
    m = sub.add_parser("measure", help="time the cases on the GPU")
    m.add_argument("cases")
    m.add_argument("--out", required=True, help="directory for <family>.csv and meta.json")
    m.add_argument("--families", default="gemm,attention,conv")
    m.add_argument("--gpu-key", default="h200-sxm")
    m.add_argument("--deadline-s", type=float, default=0, help="stop starting cases after this many seconds")
    m.add_argument("--limit", type=int, default=0, help="only the first N cases of each family (a smoke run)")
    m.add_argument("--resume", action="store_true", help="append to DIR's CSVs, skipping the cases they hold")
    m.add_argument("--units", default=DEFAULT_UNITS,
                   help=f"GEMM and convolution units to time, of {', '.join(UNITS)} (default {DEFAULT_UNITS})")
    k = sub.add_parser("kernels", help="record the kernels PyTorch runs for each GEMM and convolution case")
    k.add_argument("cases")
    k.add_argument("--out", required=True, help="directory for <family>_kernels.csv and kernel_names.txt")
    k.add_argument("--families", default="gemm,conv")
    k.add_argument("--limit", type=int, default=0, help="only the first N cases of each family (a smoke run)")
    k.add_argument("--chunk", type=int, default=400, help="calls per profiler session")
    args = ap.parse_args()
    return {"cases": cmd_cases, "measure": cmd_measure, "kernels": cmd_kernels}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
