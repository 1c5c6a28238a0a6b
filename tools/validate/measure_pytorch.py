#!/usr/bin/env python3
"""Measure real PyTorch training (and, with --mode inference, inference) times, the reference that
roofsim's predictions are checked against.

What it measures
  * Layer cases: one layer or functional op on fixed shapes under one precision mode.  Per case:
    forward time (autograd recording on, as in training), forward+backward time (one repetition
    between synchronizes), forward+backward in steady state (repetitions back to back with no
    synchronize between them, per repetition: as a layer runs inside a training loop, the host's
    per-call costs overlapping the GPU's work), peak memory over one forward+backward, the memory
    allocated before it, and the output's shape and dtype.
  * Model cases: whole training steps of ResNet-50 (torchvision), a BERT-base encoder and GPT-2
    small (transformers), built from their configs (no weights are downloaded).  Per case: step
    time (zero_grad + forward + loss + backward + optimizer.step), the forward, forward+backward
    and optimizer phases timed separately, and peak memory over one step.
  * Inference model cases (--mode inference, instead of all the above): ResNet-50 and ViT-B/16 at
    224 px, BERT-base at sequence 128 and GPT-2 small at 1024, each at batch 1 and a large batch,
    in fp32 and amp-bf16.  The model is put in eval() once; the step timed is its forward alone,
    `with torch.inference_mode(), <autocast under amp>: out = model(inputs)` (transformers models
    called without labels, so they return logits; no KV cache): no loss, no backward, no
    optimizer, no phases.  Peak memory over one such forward, above the model and inputs.

How
  * Timer: a pair of torch.cuda.Event around the timed region, with torch.cuda.synchronize()
    before and after every repetition (time.perf_counter() on --device cpu).
  * Warm-up repetitions first (default 5, never fewer than 1), then timed repetitions (default 30
    for layers, 15 for models, fewer where a case is slow so that --time-budget-s holds; inference
    steps under 20 ms, the host-bound batch-1 ones, take 50 a round unless --model-repeats is
    given).  The JSON keeps median, min, max and the sample count.  Model cases (inference ones
    too) are timed in two rounds (all models, then all models again: --model-rounds) and their
    samples pooled, so that a burst of host interference during one pass does not set a
    host-bound step's median; model records keep every sample ("values"), each round's after
    the one before, and how many each round took ("round_samples"): how far a case's rounds came
    apart is the measurement's own repeatability.
  * Before each repetition every parameter's and input's .grad is set to None, as
    optimizer.zero_grad() does by default (training).  Backward is out.backward(grad) with a
    random gradient of the output's shape and dtype, made once per case.
  * Inputs are random (torch.randn, torch.randint), seeded from the case id; never zeros.
  * Memory: torch.cuda.max_memory_allocated() after torch.cuda.reset_peak_memory_stats(), i.e.
    the caching allocator's figure for tensors (not what nvidia-smi shows).
  * TF32 flags are set per case from its precision mode and restored afterwards.

The output is JSON, written atomically (a temporary file, then os.replace) after every case, so an
interrupted run still leaves what it measured; "complete" turns true at the end.  A case that
cannot run is listed under "skipped" with the reason; no number is ever filled in.
docs/validation.md describes the cases and every field.  This script knows nothing of the roofsim
library: Python 3.11+ standard library and torch (torchvision and transformers are optional).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import json
import os
import platform
import re
import shlex
import statistics
import sys
import tempfile
import time
import warnings
import zlib

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as exc:  # the smoke test checks for torch itself; say plainly what is missing
    sys.exit(f"measure_pytorch.py needs PyTorch: {exc}")

SCHEMA_VERSION = 1
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# Precision mode -> (matmul allow_tf32, cudnn allow_tf32, autocast dtype, parameter/input dtype).
# fp32 is PyTorch's default: cuBLAS matmuls in full fp32, cuDNN convolutions allowed TF32.
PRECISIONS = {
    "fp32": (False, True, None, "float32"),
    "fp32-strict": (False, False, None, "float32"),
    "tf32": (True, True, None, "float32"),
    "amp-bf16": (False, True, "bfloat16", "float32"),
    "amp-fp16": (False, True, "float16", "float32"),
    "bf16": (False, True, None, "bfloat16"),
}
ALL_MODES = ["fp32", "fp32-strict", "tf32", "amp-bf16", "amp-fp16", "bf16"]
BASE_MODES = ["fp32", "amp-bf16"]

METHOD = (
    "Layer cases: forward (autograd recording on) and forward+backward (out.backward(grad) with a "
    "pre-made random gradient) timed separately with torch.cuda.Event pairs, synchronize before and "
    "after each repetition; parameter and input .grad set to None before each repetition; warm-up "
    "repetitions discarded; median/min/max over the timed repetitions. Layer steady state: batches of "
    "forward+backward repetitions back to back (about 30 ms of work a batch, 4 to 100 repetitions), each forward inside torch.autocast (or nothing) entered as "
    "a training loop writes it, in --layer-rounds rounds over all cases (the later "
    "ones after every case's first), samples pooled. Model cases: full training "
    "step (zero_grad(set_to_none=True) + forward + loss + backward + optimizer.step) and its phases "
    "timed the same way. host_canary_seconds: the host's speed while the case ran, a canary (200 "
    "torch.add of 1-element tensors back to back between two synchronizes, per add; the framework "
    "probe's canary) before each timed step sample (models) or steady-state batch (layers); "
    "host_backward_canary_seconds: after it, the speed of autograd's device thread, the backward() of a "
    "chain of 100 multiplications of a 1-element tensor, per node. Memory: "
    "torch.cuda.max_memory_allocated after reset_peak_memory_stats over "
    "one forward+backward (layers) or one step (models). Times in seconds, memory in bytes."
)

# --mode inference: the step is the model's forward alone; a step shorter than
# INFERENCE_SHORT_STEP_SECONDS (batch 1, host-bound) takes INFERENCE_SHORT_STEP_REPEATS samples a round.
INFERENCE_SHORT_STEP_SECONDS = 20e-3
INFERENCE_SHORT_STEP_REPEATS = 50

METHOD_INFERENCE = (
    "Inference model cases: model.eval() once after building; the step is one forward, "
    "`with torch.inference_mode(), torch.autocast(...) (amp modes only): out = model(inputs)` "
    "(torchvision models return logits; transformers models are called without labels and return "
    "their logits, no loss; GPT-2 with use_cache=False), timed with a torch.cuda.Event pair, "
    "synchronize before and after each repetition, the output freed after each repetition outside "
    "the timed region; no loss, backward or optimizer anywhere. --model-warmup warm-up steps "
    "discarded; then up to --model-repeats timed steps a round (50 for a step under 20 ms, the "
    "host-bound batch-1 ones, unless --model-repeats is given; fewer when --time-budget-s requires, "
    "never fewer than 3), in --model-rounds passes over all cases (each pass building the model "
    "anew), samples pooled. host_canary_seconds: the host's speed before each timed step (200 "
    "torch.add of 1-element tensors back to back between two synchronizes, per add; the framework "
    "probe's canary); host_backward_canary_seconds: after it, the backward() of a chain of 100 "
    "multiplications of a 1-element tensor, per node (kept for a like-for-like record; an inference "
    "step runs no backward). Memory: torch.cuda.max_memory_allocated after reset_peak_memory_stats "
    "over one inference forward; baseline: memory_allocated just before it (model and inputs). "
    "Times in seconds, memory in bytes."
)


class Skip(Exception):
    """A case that cannot run here; the message is the reason recorded under "skipped"."""


# ----------------------------------------------------------------------------- small helpers

def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def stats(samples_s: list[float], keep_values: bool = False) -> dict:
    """Median, min and max of a list of durations in seconds (and the durations, with keep_values)."""
    out = {
        "median": statistics.median(samples_s),
        "min": min(samples_s),
        "max": max(samples_s),
        "samples": len(samples_s),
    }
    if keep_values:
        out["values"] = list(samples_s)
    return out


MODEL_PHASES = ("step_seconds", "forward_seconds", "forward_backward_seconds", "optimizer_seconds")


def merge_model_rounds(first: dict, later: dict) -> dict:
    """A model case measured in two rounds: the timings' samples pooled (each round's after the one
    before), how many each round took (round_samples), the rest from the first."""
    merged = dict(first)
    for key in MODEL_PHASES + ("host_canary_seconds", "host_backward_canary_seconds"):
        if key in first and key in later:
            merged[key] = stats(first[key]["values"] + later[key]["values"], keep_values=True)
    merged["rounds"] = first.get("rounds", 1) + 1
    merged["round_samples"] = first["round_samples"] + later["round_samples"]
    return merged


CANARY_OPS = 200  # torch.add calls per host-speed canary (calibrate/torch_framework_probe.py: the same)


def canary_seconds_per_op(device: torch.device, ops: int = CANARY_OPS) -> float:
    """The host's speed right now: seconds per torch.add of two 1-element tensors, `ops` of them back
    to back between two synchronizes (the framework probe's canary, the same loop). Taken before
    each timed sample of a model step and each steady-state batch of a layer case, so that a
    host-paced case can be read against the host's speed while it ran (a shared host's speed
    changes by a third or more for seconds at a time); it never feeds a prediction by itself."""
    x, y = torch.ones(1, device=device), torch.ones(1, device=device)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(ops):
        torch.add(x, y)
    if cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / ops


BACKWARD_CANARY_NODES = 100  # multiplications in the backward canary's chain


def backward_canary_seconds_per_node(device: torch.device, nodes: int = BACKWARD_CANARY_NODES) -> float:
    """The speed of autograd's device thread right now, which backward() runs on and the canary (the
    main thread's) does not see: the backward() of a chain of `nodes` multiplications of a 1-element
    tensor (built untimed), from a synchronize to its return, per node; one hand-off to the engine's
    thread and back is in it. Over seven processes on the H200 machine, BERT-base's backward() followed
    it (correlation 0.91) and not the canary (0.34) (docs/NOTES.md). Recorded beside each canary; it
    never feeds a prediction by itself."""
    x = torch.ones(1, device=device, requires_grad=True)
    y = x
    for _ in range(nodes):
        y = y * 1.0
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    y.backward()
    seconds = time.perf_counter() - t0
    if cuda:
        torch.cuda.synchronize()
    return seconds / nodes


def case_seed(case_id: str) -> int:
    """A seed fixed by the case id, so every run draws the same inputs and weights."""
    return zlib.crc32(case_id.encode()) & 0x7FFFFFFF


def optional_version(module_name: str):
    try:
        module = __import__(module_name)
        return getattr(module, "__version__", "unknown")
    except Exception:  # a broken optional install must not stop the run
        return None


def _normalized(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def gpu_key_for(name: str) -> str:
    """The roofsim GPU key of a device name, from the nvidia_smi_names in data/gpus/*.json (case and
    punctuation ignored, as roofsim's own lookup does); other names become a slug."""
    wanted = _normalized(name)
    gpus = os.path.join(REPO_ROOT, "data", "gpus")
    for entry in sorted(os.listdir(gpus)) if os.path.isdir(gpus) else []:
        if entry.endswith(".json"):
            with open(os.path.join(gpus, entry), encoding="utf-8") as f:
                spec = json.load(f)
            if any(_normalized(n) == wanted for n in spec.get("nvidia_smi_names", [])):
                return spec["key"]
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown"


def host_cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def write_json_atomic(path: str, doc: dict) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; a data file is world-readable
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# ----------------------------------------------------------------------------- precision modes

def _read_setting(getter):
    try:
        return getter()
    except Exception:  # attribute missing in this torch version
        return None


@contextlib.contextmanager
def tf32_flags(mode: str):
    """Set the two TF32 flags of a precision mode, restore the previous values afterwards."""
    matmul, cudnn = PRECISIONS[mode][0], PRECISIONS[mode][1]
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    with warnings.catch_warnings():  # torch >= 2.9 warns that these flags have a newer spelling
        warnings.simplefilter("ignore")
        torch.backends.cuda.matmul.allow_tf32 = matmul
        torch.backends.cudnn.allow_tf32 = cudnn
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def precision_settings(mode: str) -> dict:
    """The settings in force for a mode, read back from torch (call inside tf32_flags(mode))."""
    _, _, autocast, param_dtype = PRECISIONS[mode]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "mode": mode,
            "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "float32_matmul_precision": _read_setting(torch.get_float32_matmul_precision),
            "matmul_fp32_precision": _read_setting(lambda: torch.backends.cuda.matmul.fp32_precision),
            "cudnn_conv_fp32_precision": _read_setting(lambda: torch.backends.cudnn.conv.fp32_precision),
            "autocast_dtype": autocast,
            "param_dtype": param_dtype,
            "float_input_dtype": param_dtype,
        }


def autocast_enabled(device_type: str) -> bool:
    try:
        return bool(torch.is_autocast_enabled(device_type))  # torch >= 2.4
    except TypeError:
        if device_type == "cuda":
            return bool(torch.is_autocast_enabled())
        return bool(torch.is_autocast_cpu_enabled())


def autocast_ctx(mode: str, device_type: str):
    name = PRECISIONS[mode][2]
    if name is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type, dtype=getattr(torch, name))


def sdpa_backend_ctx_factory(backend: str):
    """A zero-argument factory of context managers that restrict SDPA to one backend."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # torch >= 2.3
        choice = getattr(SDPBackend, {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
                                      "math": "MATH", "cudnn": "CUDNN_ATTENTION"}[backend], None)
        if choice is None:
            raise Skip(f"no {backend} attention backend in torch {torch.__version__}")
        return (lambda: sdpa_kernel(choice)), "torch.nn.attention.sdpa_kernel"
    except ImportError:
        pass
    legacy = getattr(getattr(torch.backends, "cuda", None), "sdp_kernel", None)
    if legacy is None:
        raise Skip(f"no SDPA backend selection API in torch {torch.__version__}")
    if backend == "cudnn":
        raise Skip(f"no cuDNN attention backend selection in torch {torch.__version__}")
    flags = {"enable_flash": backend == "flash", "enable_mem_efficient": backend == "efficient",
             "enable_math": backend == "math"}
    return (lambda: legacy(**flags)), "torch.backends.cuda.sdp_kernel"


# ----------------------------------------------------------------------------- timing

class Clock:
    """Times a region: CUDA events on a GPU, perf_counter on the CPU; synchronizes around it."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.ev0 = torch.cuda.Event(enable_timing=True)
            self.ev1 = torch.cuda.Event(enable_timing=True)
        self.t0 = 0.0

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def start(self) -> None:
        if self.cuda:
            self.ev0.record()
        else:
            self.t0 = time.perf_counter()

    def stop(self) -> float:
        """Seconds since start(), after the device has finished the region."""
        if self.cuda:
            self.ev1.record()
            self.ev1.synchronize()
            torch.cuda.synchronize()
            return self.ev0.elapsed_time(self.ev1) / 1e3  # elapsed_time is in milliseconds
        return time.perf_counter() - self.t0

    @property
    def name(self) -> str:
        return "torch.cuda.Event" if self.cuda else "time.perf_counter"


def memory_allocated_bytes(device: torch.device):
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else None


def clear_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


# ----------------------------------------------------------------------------- layer case list

def F_(shape):
    """A float input (fp32, or bf16 under the bf16 mode) that requires grad."""
    return ("float", list(shape))


def I_(shape, high):
    """An int64 input drawn uniformly from [0, high)."""
    return ("int", list(shape), high)


def _dims(shape) -> str:
    return "x".join(str(s) for s in shape)


def layer_cases(smoke: bool) -> list[dict]:
    """The fixed layer case list: realistic training shapes, or tiny ones with --smoke."""
    cases: list[dict] = []

    def add(op, desc, modes, params, inputs):
        for mode in modes:
            specs = []
            for spec in inputs:
                if spec[0] == "float":
                    specs.append({"shape": spec[1], "dtype": PRECISIONS[mode][3], "requires_grad": True})
                else:
                    specs.append({"shape": spec[1], "dtype": "int64", "requires_grad": False,
                                  "high": spec[2]})
            cases.append({"id": f"{op}/{desc}/{mode}", "op": op, "precision": mode,
                          "params": dict(params), "inputs": specs})

    def linear(lead, fin, fout, bias, modes):
        add("linear", f"b{_dims(lead)}x{fin}->{fout}" + ("" if bias else "-nobias"), modes,
            {"in_features": fin, "out_features": fout, "bias": bias}, [F_(lead + [fin])])

    def matmul(op, a, b, modes):
        add(op, f"{_dims(a)}@{_dims(b)}", modes, {}, [F_(a), F_(b)])

    def conv(op, x, cout, k, s, p, d, groups, bias, modes, tag=""):
        nd = len(x) - 2
        params = {"in_channels": x[1], "out_channels": cout, "kernel_size": [k] * nd,
                  "stride": [s] * nd, "padding": [p] * nd, "dilation": [d] * nd,
                  "groups": groups, "bias": bias}
        desc = f"{_dims(x)}->{cout}k{k}s{s}p{p}" + (f"d{d}" if d != 1 else "") + \
            (f"g{groups}" if groups != 1 else "") + tag
        add(op, desc, modes, params, [F_(x)])

    def unary(op, x, modes, params=None, tag=""):
        add(op, _dims(x) + tag, modes, params or {}, [F_(x)])

    def binary(op, x, modes, params=None):
        add(op, f"{_dims(x)}", modes, params or {}, [F_(x), F_(x)])

    def sdpa(b, h, l, d, causal, backend, modes):
        qkv = [F_([b, h, l, d])] * 3
        add("sdpa", f"b{b}h{h}l{l}d{d}-{'causal' if causal else 'full'}-{backend}", modes,
            {"is_causal": causal, "backend": backend}, qkv)

    def mha(b, l, e, heads, modes):
        add("mha", f"b{b}l{l}e{e}h{heads}", modes,
            {"embed_dim": e, "num_heads": heads, "batch_first": True}, [F_([b, l, e])])

    def embedding(b, l, n, d, modes):
        add("embedding", f"b{b}x{l}-{n}x{d}", modes, {"num_embeddings": n, "embedding_dim": d},
            [I_([b, l], n)])

    def pool(op, x, k, s, p, modes):
        add(op, f"{_dims(x)}k{k}s{s}p{p}", modes,
            {"kernel_size": [k, k], "stride": [s, s], "padding": [p, p]}, [F_(x)])

    def cross_entropy(n, c, modes):
        add("cross_entropy", f"{n}x{c}", modes, {}, [F_([n, c]), I_([n], c)])

    def lstm(b, l, i, h, layers, modes):
        add("lstm", f"b{b}l{l}i{i}h{h}x{layers}", modes,
            {"input_size": i, "hidden_size": h, "num_layers": layers, "batch_first": True},
            [F_([b, l, i])])

    if smoke:  # every op once, tiny, so the whole script runs in seconds on a CPU
        linear([4, 8], 16, 32, True, ["fp32", "amp-bf16", "amp-fp16", "bf16"])
        matmul("matmul", [2, 8, 16], [2, 16, 8], BASE_MODES)
        matmul("bmm", [2, 8, 16], [2, 16, 8], BASE_MODES)
        conv("conv2d", [2, 4, 8, 8], 8, 3, 1, 1, 1, 1, True, BASE_MODES)
        conv("conv2d", [2, 8, 8, 8], 8, 3, 1, 1, 1, 8, False, ["fp32"])
        conv("conv1d", [2, 4, 16], 8, 3, 1, 1, 1, 1, True, BASE_MODES)
        unary("batchnorm2d", [2, 4, 8, 8], BASE_MODES, {"num_features": 4})
        unary("layernorm", [2, 8, 16], BASE_MODES, {"normalized_shape": [16], "elementwise_affine": True})
        unary("groupnorm", [2, 8, 4, 4], BASE_MODES, {"num_groups": 2, "num_channels": 8})
        unary("rmsnorm", [2, 8, 16], BASE_MODES, {"normalized_shape": [16]})
        for op in ("relu", "silu", "tanh", "sigmoid"):
            unary(op, [2, 8, 16], BASE_MODES)
        unary("gelu", [2, 8, 16], BASE_MODES, {"approximate": "tanh"}, "-tanh")
        unary("dropout", [2, 8, 16], BASE_MODES, {"p": 0.1})
        binary("add", [2, 8, 16], BASE_MODES)
        binary("mul", [2, 8, 16], BASE_MODES)
        unary("softmax", [2, 8, 16], BASE_MODES, {"dim": -1})
        unary("log_softmax", [2, 8, 16], BASE_MODES, {"dim": -1})
        cross_entropy(8, 10, BASE_MODES)
        sdpa(1, 2, 8, 4, True, "math", BASE_MODES)
        mha(2, 8, 16, 2, BASE_MODES)
        embedding(2, 8, 50, 16, BASE_MODES)
        pool("maxpool2d", [2, 4, 8, 8], 3, 2, 1, BASE_MODES)
        pool("avgpool2d", [2, 4, 8, 8], 2, 2, 0, BASE_MODES)
        add("adaptive_avgpool2d", "2x4x8x8->1x1", BASE_MODES, {"output_size": [1, 1]}, [F_([2, 4, 8, 8])])
        unary("flatten", [2, 4, 2, 2], BASE_MODES, {"start_dim": 1})
        unary("transpose_contiguous", [2, 8, 2, 4], BASE_MODES, {"dim0": 1, "dim1": 2})
        binary("cat", [2, 8, 16], BASE_MODES, {"dim": -1})
        lstm(2, 8, 16, 16, 1, BASE_MODES)
        return _checked(cases)

    # GEMMs: GPT-2 MLP (8 x 1024 tokens, 768 <-> 3072), BERT-large MLP, LM head, launch-bound tiny.
    linear([8, 1024], 768, 3072, True, ALL_MODES)
    linear([8, 1024], 3072, 768, True, BASE_MODES)
    linear([32, 128], 1024, 4096, True, ["amp-bf16", "tf32"])
    linear([4, 1024], 768, 50257, False, ["amp-bf16", "bf16"])
    linear([8], 256, 256, True, BASE_MODES)
    matmul("matmul", [8, 12, 1024, 64], [8, 12, 64, 1024], BASE_MODES)
    matmul("matmul", [4096, 4096], [4096, 4096], ["fp32", "tf32", "amp-bf16"])
    matmul("matmul", [64, 64], [64, 64], BASE_MODES)
    matmul("bmm", [96, 1024, 64], [96, 64, 1024], ALL_MODES)
    matmul("bmm", [96, 1024, 1024], [96, 1024, 64], BASE_MODES)
    # Convolutions: ResNet-50 bottleneck 1x1 and 3x3, 7x7 stem, strided, depthwise, dilated, tiny.
    conv("conv2d", [64, 256, 56, 56], 64, 1, 1, 0, 1, 1, False, ALL_MODES)
    conv("conv2d", [64, 64, 56, 56], 64, 3, 1, 1, 1, 1, False, ["fp32", "amp-bf16", "bf16"])
    conv("conv2d", [64, 3, 224, 224], 64, 7, 2, 3, 1, 1, False, BASE_MODES)
    conv("conv2d", [64, 128, 56, 56], 128, 3, 2, 1, 1, 1, False, BASE_MODES)
    conv("conv2d", [64, 256, 56, 56], 256, 3, 1, 1, 1, 256, False, BASE_MODES)
    conv("conv2d", [16, 256, 64, 64], 256, 3, 1, 2, 2, 1, False, BASE_MODES)
    conv("conv2d", [8, 16, 16, 16], 16, 3, 1, 1, 1, 1, True, BASE_MODES)
    conv("conv1d", [32, 256, 1024], 256, 3, 1, 1, 1, 1, True, BASE_MODES)
    conv("conv1d", [16, 1024, 2048], 1024, 3, 1, 1, 1, 1024, True, ["amp-bf16"])
    # Normalizations.
    unary("batchnorm2d", [64, 256, 56, 56], BASE_MODES, {"num_features": 256})
    unary("batchnorm2d", [8, 16, 16, 16], ["fp32"], {"num_features": 16})
    ln = {"normalized_shape": [768], "elementwise_affine": True}
    unary("layernorm", [8, 1024, 768], ["fp32", "amp-bf16", "bf16"], ln)
    unary("layernorm", [8, 768], ["fp32"], ln)
    unary("groupnorm", [32, 256, 56, 56], BASE_MODES, {"num_groups": 32, "num_channels": 256})
    unary("rmsnorm", [8, 1024, 768], ["fp32", "amp-bf16", "bf16"], {"normalized_shape": [768]})
    # Elementwise.
    unary("relu", [64, 256, 56, 56], ["fp32", "amp-bf16", "bf16"])
    unary("gelu", [8, 1024, 3072], BASE_MODES, {"approximate": "none"}, "-none")
    unary("gelu", [8, 1024, 3072], BASE_MODES, {"approximate": "tanh"}, "-tanh")
    for op in ("silu", "tanh", "sigmoid"):
        unary(op, [8, 1024, 3072], BASE_MODES)
    unary("dropout", [8, 1024, 768], BASE_MODES, {"p": 0.1})
    # p = 0 (torchvision's ViT default): PyTorch returns the input, no kernel, no autograd node
    unary("dropout", [8, 1024, 768], ["fp32", "amp-bf16"], {"p": 0.0}, tag="-p0")
    binary("add", [8, 1024, 768], ["fp32", "amp-bf16", "bf16"])
    binary("add", [8, 256], ["fp32"])
    binary("mul", [8, 1024, 3072], BASE_MODES)
    # Softmax family and loss.
    unary("softmax", [8, 12, 1024, 1024], BASE_MODES, {"dim": -1})
    unary("log_softmax", [4096, 50257], BASE_MODES, {"dim": -1})
    cross_entropy(4096, 50257, BASE_MODES)
    cross_entropy(32, 1000, BASE_MODES)
    # Attention: GPT-2-sized SDPA on each backend (flash needs 16-bit inputs), nn.MultiheadAttention.
    sdpa(8, 12, 1024, 64, True, "flash", ["amp-bf16", "amp-fp16", "bf16"])
    sdpa(8, 12, 1024, 64, True, "efficient", BASE_MODES)
    sdpa(8, 12, 1024, 64, True, "math", ["fp32", "fp32-strict", "tf32", "amp-bf16"])
    sdpa(8, 12, 1024, 64, False, "flash", ["amp-bf16"])
    sdpa(8, 12, 1024, 64, False, "efficient", ["fp32"])
    # cuDNN's fused attention, which PyTorch 2.11 picks by default on Hopper for 16-bit inputs (the
    # transformers' attention): GPT-2- and BERT-sized
    sdpa(8, 12, 1024, 64, True, "cudnn", ["amp-bf16"])
    sdpa(32, 12, 128, 64, False, "cudnn", ["amp-bf16"])
    mha(32, 128, 768, 12, BASE_MODES)
    mha(8, 1024, 768, 12, ["amp-bf16"])
    embedding(8, 1024, 50257, 768, BASE_MODES)
    embedding(32, 128, 30522, 768, ["bf16"])
    # Pooling and shape ops.
    pool("maxpool2d", [64, 64, 112, 112], 3, 2, 1, BASE_MODES)
    pool("avgpool2d", [64, 256, 56, 56], 2, 2, 0, BASE_MODES)
    add("adaptive_avgpool2d", "64x2048x7x7->1x1", BASE_MODES, {"output_size": [1, 1]},
        [F_([64, 2048, 7, 7])])
    unary("flatten", [64, 2048, 1, 1], BASE_MODES, {"start_dim": 1})
    unary("transpose_contiguous", [8, 1024, 12, 64], BASE_MODES, {"dim0": 1, "dim1": 2})
    binary("cat", [8, 1024, 768], BASE_MODES, {"dim": -1})
    lstm(32, 128, 512, 512, 2, BASE_MODES)
    return _checked(cases)


def _checked(cases: list[dict]) -> list[dict]:
    ids = [c["id"] for c in cases]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise AssertionError(f"duplicate case ids: {sorted(dup)}")
    return cases


# ----------------------------------------------------------------------------- layer builders

def build_layer(case: dict, device: torch.device):
    """(module or None, fn(*inputs) -> Tensor, implementation notes) for one case.

    Modules are created directly on the device (their random init runs there too).
    """
    op, p = case["op"], case["params"]
    dev = {"device": device}
    notes: dict = {}
    if op == "linear":
        m = nn.Linear(p["in_features"], p["out_features"], bias=p["bias"], **dev)
        return m, m, notes
    if op == "matmul":
        return None, torch.matmul, notes
    if op == "bmm":
        return None, torch.bmm, notes
    if op in ("conv2d", "conv1d"):
        cls = nn.Conv2d if op == "conv2d" else nn.Conv1d
        m = cls(p["in_channels"], p["out_channels"], tuple(p["kernel_size"]), stride=tuple(p["stride"]),
                padding=tuple(p["padding"]), dilation=tuple(p["dilation"]), groups=p["groups"],
                bias=p["bias"], **dev)
        return m, m, notes
    if op == "batchnorm2d":
        m = nn.BatchNorm2d(p["num_features"], **dev)
        return m, m, notes
    if op == "layernorm":
        m = nn.LayerNorm(p["normalized_shape"], elementwise_affine=p["elementwise_affine"], **dev)
        return m, m, notes
    if op == "groupnorm":
        m = nn.GroupNorm(p["num_groups"], p["num_channels"], **dev)
        return m, m, notes
    if op == "rmsnorm":
        if not hasattr(nn, "RMSNorm"):
            raise Skip(f"torch.nn.RMSNorm not in torch {torch.__version__}")
        m = nn.RMSNorm(p["normalized_shape"], **dev)
        return m, m, notes
    if op in ("relu", "silu"):
        return None, getattr(F, op), notes
    if op in ("tanh", "sigmoid"):
        return None, getattr(torch, op), notes
    if op == "gelu":
        approximate = p["approximate"]
        return None, lambda x: F.gelu(x, approximate=approximate), notes
    if op == "dropout":
        m = nn.Dropout(p["p"])
        return m, m, notes
    if op in ("add", "mul"):
        return None, getattr(torch, op), notes
    if op in ("softmax", "log_softmax"):
        fn, dim = getattr(F, op), p["dim"]
        return None, lambda x: fn(x, dim=dim), notes
    if op == "cross_entropy":
        return None, lambda logits, target: F.cross_entropy(logits, target), notes
    if op == "sdpa":
        fn = getattr(F, "scaled_dot_product_attention", None)
        if fn is None:
            raise Skip(f"torch.nn.functional.scaled_dot_product_attention not in torch {torch.__version__}")
        causal = p["is_causal"]
        return None, lambda q, k, v: fn(q, k, v, is_causal=causal), notes
    if op == "mha":
        m = nn.MultiheadAttention(p["embed_dim"], p["num_heads"], batch_first=p["batch_first"], **dev)
        notes["call"] = "module(x, x, x, need_weights=False)[0]"
        return m, lambda x: m(x, x, x, need_weights=False)[0], notes
    if op == "embedding":
        m = nn.Embedding(p["num_embeddings"], p["embedding_dim"], **dev)
        return m, m, notes
    if op == "maxpool2d":
        m = nn.MaxPool2d(tuple(p["kernel_size"]), stride=tuple(p["stride"]), padding=tuple(p["padding"]))
        return m, m, notes
    if op == "avgpool2d":
        m = nn.AvgPool2d(tuple(p["kernel_size"]), stride=tuple(p["stride"]), padding=tuple(p["padding"]))
        return m, m, notes
    if op == "adaptive_avgpool2d":
        m = nn.AdaptiveAvgPool2d(tuple(p["output_size"]))
        return m, m, notes
    if op == "flatten":
        start = p["start_dim"]
        return None, lambda x: torch.flatten(x, start), notes
    if op == "transpose_contiguous":
        d0, d1 = p["dim0"], p["dim1"]
        return None, lambda x: x.transpose(d0, d1).contiguous(), notes
    if op == "cat":
        dim = p["dim"]
        return None, lambda a, b: torch.cat([a, b], dim=dim), notes
    if op == "lstm":
        m = nn.LSTM(p["input_size"], p["hidden_size"], num_layers=p["num_layers"],
                    batch_first=p["batch_first"], **dev)
        notes["call"] = "module(x)[0]"
        return m, lambda x: m(x)[0], notes
    raise Skip(f"unknown op {op!r}")


def make_inputs(case: dict, device: torch.device) -> list[torch.Tensor]:
    tensors = []
    for spec in case["inputs"]:
        if spec["dtype"] == "int64":
            tensors.append(torch.randint(0, spec["high"], spec["shape"], device=device))
        else:
            x = torch.randn(spec["shape"], device=device, dtype=getattr(torch, spec["dtype"]))
            tensors.append(x.requires_grad_(spec["requires_grad"]))
    return tensors


def set_grads_to_none(tensors) -> None:
    for t in tensors:
        t.grad = None


class LayerRun:
    """One layer case made ready to run (build it inside tf32_flags(case["precision"])): the
    module or function on the device, its inputs, the leaves whose .grad is reset, the forward's
    context (autocast, the attention backend) and a random upstream gradient of the output's shape."""

    def __init__(self, case: dict, device: torch.device):
        mode = case["precision"]
        self.settings = precision_settings(mode)
        self.seed = case_seed(case["id"])
        torch.manual_seed(self.seed)
        module, self.fn, self.notes = build_layer(case, device)
        params: list[torch.Tensor] = []
        if module is not None:
            module.to(device)
            if PRECISIONS[mode][3] == "bfloat16":
                module.to(torch.bfloat16)
            module.train()
            params = [q for q in module.parameters() if q.requires_grad]
        self.inputs = make_inputs(case, device)
        self.grad_leaves = params + [x for x in self.inputs if x.requires_grad]
        self.op_ctx = None
        if case["op"] == "sdpa":
            self.op_ctx, self.notes["backend_api"] = sdpa_backend_ctx_factory(case["params"]["backend"])
        self.mode, self.device_type = mode, device.type

        with self.forward_ctx():
            if PRECISIONS[mode][2] is not None and not autocast_enabled(device.type):
                raise Skip(f"autocast {PRECISIONS[mode][2]} not active on {device.type}")
            out = self.fn(*self.inputs)
        if not out.requires_grad:
            raise Skip("output does not require grad")
        self.grad = torch.randn_like(out)  # the upstream gradient, random like the real one
        self.output = {"shape": list(out.shape), "dtype": dtype_name(out.dtype)}

    def forward_ctx(self):
        """The context the forward runs in, as a training loop writes it: torch.autocast (or
        nothing) entered around each forward; the attention backend's selection around it too for
        sdpa. A helper context manager (an ExitStack, a generator) would add host time of its own
        to every repetition, which no training loop spends."""
        if self.op_ctx is None:
            return autocast_ctx(self.mode, self.device_type)
        return self._backend_and_autocast()

    @contextlib.contextmanager
    def _backend_and_autocast(self):
        with self.op_ctx(), autocast_ctx(self.mode, self.device_type):
            yield

    def forward_backward_steady(self, clock: Clock, reps: int) -> float:
        """Forward + backward `reps` times back to back with no synchronize between, so the host's
        per-call costs overlap the GPU's work of the repetition before; seconds per repetition."""
        clock.sync()
        clock.start()
        for _ in range(reps):
            set_grads_to_none(self.grad_leaves)
            with self.forward_ctx():
                out = self.fn(*self.inputs)
            out.backward(self.grad)
            del out
        return clock.stop() / reps

    def steady_batches(self, clock: Clock, device: torch.device, reps: int, batches: int):
        """(seconds per repetition, canary, backward canary) for each of `batches` steady-state
        batches, the canaries before each; one batch first as its own warm-up (the allocator's pool
        for the repetitions)."""
        self.forward_backward_steady(clock, reps)
        canary_s, backward_canary_s, steady_s = [], [], []
        for _ in range(batches):
            canary_s.append(canary_seconds_per_op(device))
            backward_canary_s.append(backward_canary_seconds_per_node(device))
            steady_s.append(self.forward_backward_steady(clock, reps))
        return steady_s, canary_s, backward_canary_s


# Work per steady-state batch. A batch's first repetitions after the synchronize that starts it cost
# more than later ones: on the H200 machine a tiny layer's repetition took a third less at 50 a batch
# than at 5 and no less at 100 (docs/NOTES.md), and the probe's steady figures take 50. At about 5 ms
# a batch, a host-paced case ran 7 to 30 repetitions a batch and read 5-30 % above its steady state.
STEADY_BATCH_SECONDS = 30e-3


def steady_repetitions_for(forward_backward_wall_s: float) -> int:
    """Repetitions per steady-state batch of a case whose one forward+backward between synchronizes
    took `forward_backward_wall_s`: about STEADY_BATCH_SECONDS of work, 4 to 100."""
    return max(4, min(100, round(STEADY_BATCH_SECONDS / max(forward_backward_wall_s, 1e-9))))


def measure_layer(case: dict, device: torch.device, clock: Clock, args, target_s: float) -> dict:
    """Time one layer case; raises Skip (or any error) when it cannot run."""
    with tf32_flags(case["precision"]):
        run = LayerRun(case, device)

        def forward_once() -> float:
            set_grads_to_none(run.grad_leaves)
            clock.sync()
            with run.forward_ctx():
                clock.start()
                out = run.fn(*run.inputs)
                elapsed = clock.stop()
            del out
            return elapsed

        def forward_backward_once() -> float:
            set_grads_to_none(run.grad_leaves)
            clock.sync()
            with run.forward_ctx():
                clock.start()
                out = run.fn(*run.inputs)
            out.backward(run.grad)
            elapsed = clock.stop()
            del out
            return elapsed

        def wall_s(region) -> float:
            wall0 = time.perf_counter()
            region()
            return time.perf_counter() - wall0

        # Warm-up; its fastest repetition (first calls pay one-time library set-up) sizes the run.
        warmup = max(1, args.warmup)
        fb_wall_s = min(wall_s(forward_backward_once) for _ in range(warmup))
        f_wall_s = min(wall_s(forward_once) for _ in range(warmup))

        # Fewer repetitions for slow cases, so the run fits its budget; never fewer than 3.
        repeats = min(args.repeats, max(3, int(target_s / max(fb_wall_s + f_wall_s, 1e-9))))
        forward_s = [forward_once() for _ in range(repeats)]
        forward_backward_s = [forward_backward_once() for _ in range(repeats)]

        # Steady state, as a layer runs inside a training loop: batches of back-to-back repetitions
        # (more rounds of them later in the run: steady_round), each batch about STEADY_BATCH_SECONDS
        # of work, so that what a batch's start costs beyond a repetition is spread thin.
        reps = steady_repetitions_for(fb_wall_s)
        batches = max(3, min(9, int(target_s / max(reps * fb_wall_s, 1e-9))))
        steady_s, canary_s, backward_canary_s = run.steady_batches(clock, device, reps, batches)

        peak = baseline = None
        if device.type == "cuda":
            set_grads_to_none(run.grad_leaves)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats(device)
            baseline = torch.cuda.memory_allocated(device)
            with run.forward_ctx():
                out = run.fn(*run.inputs)
            out.backward(run.grad)
            del out
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated(device)

    record = dict(case)
    record.update({
        "seed": run.seed,
        "precision_settings": run.settings,
        "implementation": run.notes,
        "output": run.output,
        "warmup": warmup,
        "forward_seconds": stats(forward_s),
        "forward_backward_seconds": stats(forward_backward_s),
        "forward_backward_steady_seconds": stats(steady_s, keep_values=True),
        "steady_repetitions": reps,
        "steady_rounds": 1,
        "host_canary_seconds": stats(canary_s, keep_values=True),
        "host_backward_canary_seconds": stats(backward_canary_s, keep_values=True),
        "peak_memory_bytes": peak,
        "baseline_memory_bytes": baseline,
    })
    return record


def steady_round(record: dict, device: torch.device, clock: Clock) -> None:
    """One more round of a measured layer case's steady state, tens of seconds after its first
    (a shared host's speed holds for seconds at a time): the case built again, as many batches of
    as many repetitions as its first round, their samples and canaries pooled into the record."""
    case = {k: record[k] for k in ("id", "op", "precision", "params", "inputs")}
    batches = len(record["forward_backward_steady_seconds"]["values"]) // record["steady_rounds"]
    with tf32_flags(case["precision"]):
        run = LayerRun(case, device)
        steady_s, canary_s, backward_canary_s = run.steady_batches(clock, device, record["steady_repetitions"], batches)
    record["forward_backward_steady_seconds"] = stats(
        record["forward_backward_steady_seconds"]["values"] + steady_s, keep_values=True)
    record["host_canary_seconds"] = stats(record["host_canary_seconds"]["values"] + canary_s, keep_values=True)
    record["host_backward_canary_seconds"] = stats(
        record["host_backward_canary_seconds"]["values"] + backward_canary_s, keep_values=True)
    record["steady_rounds"] += 1


# ----------------------------------------------------------------------------- model cases

def model_size_tag(model: str, batch: int, size: int) -> tuple[str, str]:
    """(the key a model case's size goes under, the id's batch and size part): "b32x224" for an image
    size or input width, "b4xs1024" for a sequence length."""
    size_key = {"resnet50": "image_size", "vit-b-16": "image_size", "mlp": "in_features"}.get(model, "seq_len")
    return size_key, (f"b{batch}xs{size}" if size_key == "seq_len" else f"b{batch}x{size}")


def model_cases(smoke: bool) -> list[dict]:
    def case(model, batch, size, mode, optimizer):
        size_key, tag = model_size_tag(model, batch, size)
        return {"id": f"{model}/{tag}/{mode}", "model": model, "batch": batch, size_key: size,
                "precision": mode, "optimizer": optimizer}

    if smoke:  # tiny configurations of the same code paths, plus a torch-only MLP
        return [
            case("mlp", 8, 64, "fp32", "sgd"),
            case("mlp", 8, 64, "amp-bf16", "adamw"),
            case("resnet50", 2, 32, "amp-bf16", "sgd"),
            case("vit-b-16", 2, 32, "amp-bf16", "adamw"),
            case("bert-base", 2, 16, "amp-bf16", "adamw"),
            case("bert-encoder", 2, 16, "amp-bf16", "adamw"),
            case("gpt2-small", 2, 16, "amp-bf16", "adamw"),
        ]
    return [
        case("resnet50", 32, 224, "amp-bf16", "sgd"),
        case("resnet50", 128, 224, "amp-bf16", "sgd"),
        case("resnet50", 64, 224, "fp32", "sgd"),
        case("bert-base", 32, 128, "amp-bf16", "adamw"),
        case("bert-base", 128, 128, "amp-bf16", "adamw"),
        case("bert-encoder", 32, 128, "amp-bf16", "adamw"),
        case("bert-encoder", 128, 128, "amp-bf16", "adamw"),
        case("gpt2-small", 4, 1024, "amp-bf16", "adamw"),
        case("gpt2-small", 16, 1024, "amp-bf16", "adamw"),
        case("vit-b-16", 32, 224, "amp-bf16", "adamw"),
        case("vit-b-16", 128, 224, "amp-bf16", "adamw"),
    ]


def _hf_model(cls, config, info: dict):
    """Build a transformers model from a config, asking for SDPA attention where the API allows."""
    attempts = []
    for how in ("_from_config(attn_implementation='sdpa')", "config.attn_implementation='sdpa'", "cls(config)"):
        try:
            if how.startswith("_from_config"):
                model = cls._from_config(config, attn_implementation="sdpa")
            elif how.startswith("config."):
                model = cls(type(config)(**{**config.to_dict(), "attn_implementation": "sdpa"}))
            else:
                model = cls(config)
            info["construction"] = how
            break
        except Exception as exc:  # an API this transformers version lacks: try the next spelling
            attempts.append(f"{how}: {first_line(exc)}")
    else:
        raise Skip("could not build model: " + " | ".join(attempts))
    if attempts:
        info["construction_fallbacks"] = attempts
    info["attn_implementation"] = getattr(model.config, "_attn_implementation", None)
    return model


class BertEncoder(nn.Module):
    """BERT-base for sequence classification written with torch.nn modules only: the layers of
    roofsim's zoo graph "bert-base" and nothing else (no Hugging Face code around them).

    Per layer: query/key/value nn.Linear, each viewed as B x L x H x D and transposed; SDPA with
    dropout 0.1 in training; heads merged back (transpose, reshape); output dense, dropout, residual
    add, LayerNorm; intermediate Linear, GELU, Linear, dropout, residual add, LayerNorm. Embeddings:
    word + token type + position, LayerNorm, dropout. Pooler: first token, Linear, tanh; dropout;
    classifier; cross-entropy.
    """

    class Layer(nn.Module):
        def __init__(self, hidden: int, heads: int, ffn: int):
            super().__init__()
            self.heads, self.head_dim = heads, hidden // heads
            self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
            self.attention_dense = nn.Linear(hidden, hidden)
            self.attention_norm = nn.LayerNorm(hidden, eps=1e-12)
            self.intermediate = nn.Linear(hidden, ffn)
            self.output_dense = nn.Linear(ffn, hidden)
            self.output_norm = nn.LayerNorm(hidden, eps=1e-12)
            self.dropout = nn.Dropout(0.1)

        def split_heads(self, x):
            b, s, _ = x.shape
            return x.view(b, s, self.heads, self.head_dim).transpose(1, 2)

        def forward(self, x):
            b, s, hidden = x.shape
            q, k, v = (self.split_heads(f(x)) for f in (self.query, self.key, self.value))
            a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1 if self.training else 0.0)
            a = a.transpose(1, 2).reshape(b, s, hidden)
            x = self.attention_norm(self.dropout(self.attention_dense(a)) + x)
            h = self.output_dense(F.gelu(self.intermediate(x)))
            return self.output_norm(self.dropout(h) + x)

    def __init__(self, hidden=768, layers=12, heads=12, ffn=3072, vocab=30522, positions=512, labels=2):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.position = nn.Embedding(positions, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(0.1)
        self.layers = nn.ModuleList(BertEncoder.Layer(hidden, heads, ffn) for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)
        self.classifier = nn.Linear(hidden, labels)
        self.register_buffer("position_ids", torch.arange(positions).unsqueeze(0), persistent=False)
        self.register_buffer("token_type_ids", torch.zeros(1, positions, dtype=torch.long), persistent=False)

    def forward(self, input_ids, labels):
        s = input_ids.shape[1]
        x = self.word(input_ids) + self.token_type(self.token_type_ids[:, :s])
        x = self.dropout(self.norm(x + self.position(self.position_ids[:, :s])))
        for layer in self.layers:
            x = layer(x)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return F.cross_entropy(self.classifier(self.dropout(pooled)), labels)


def build_model(spec: dict, device: torch.device, smoke: bool):
    """(model, batch dict, loss_fn(model, batch) -> loss, info) for one model case."""
    b = spec["batch"]
    info: dict = {}
    name = spec["model"]
    if name == "mlp":
        size = spec["in_features"]
        model = nn.Sequential(nn.Linear(size, 4 * size), nn.GELU(), nn.Linear(4 * size, 10))
        batch = {"x": torch.randn(b, size), "y": torch.randint(0, 10, (b,))}
        info["architecture"] = f"Linear({size},{4 * size})-GELU-Linear({4 * size},10), cross-entropy"
        return model, batch, lambda m, d: F.cross_entropy(m(d["x"]), d["y"]), info
    if name == "resnet50":
        try:
            import torchvision
        except Exception as exc:
            raise Skip(f"torchvision not available ({first_line(exc)})")
        model = torchvision.models.resnet50()  # random init, no weights
        s = spec["image_size"]
        batch = {"x": torch.randn(b, 3, s, s), "y": torch.randint(0, 1000, (b,))}
        info.update({"constructor": "torchvision.models.resnet50()", "memory_format": "contiguous (NCHW)",
                     "loss": "cross_entropy over 1000 classes"})
        return model, batch, lambda m, d: F.cross_entropy(m(d["x"]), d["y"]), info
    if name == "vit-b-16":
        try:
            import torchvision
        except Exception as exc:
            raise Skip(f"torchvision not available ({first_line(exc)})")
        s = spec["image_size"]
        # Smoke runs: a 32-pixel image in 16-pixel patches (torchvision checks image_size at forward).
        model = torchvision.models.vit_b_16(image_size=s) if s != 224 else torchvision.models.vit_b_16()
        batch = {"x": torch.randn(b, 3, s, s), "y": torch.randint(0, 1000, (b,))}
        info.update({"constructor": f"torchvision.models.vit_b_16({'' if s == 224 else f'image_size={s}'})",
                     "loss": "cross_entropy over 1000 classes"})
        return model, batch, lambda m, d: F.cross_entropy(m(d["x"]), d["y"]), info
    if name == "bert-encoder":
        if not hasattr(F, "scaled_dot_product_attention"):
            raise Skip(f"needs torch.nn.functional.scaled_dot_product_attention (torch >= 2.0; this is {torch.__version__})")
        s = spec["seq_len"]
        config = ({"hidden": 64, "layers": 2, "heads": 2, "ffn": 128, "vocab": 1000, "positions": 64} if smoke
                  else {"hidden": 768, "layers": 12, "heads": 12, "ffn": 3072, "vocab": 30522, "positions": 512})
        model = BertEncoder(**config)
        batch = {"input_ids": torch.randint(0, config["vocab"], (b, s)), "labels": torch.randint(0, 2, (b,))}
        info.update({"constructor": "BertEncoder() (torch.nn modules only, tools/validate/measure_pytorch.py)",
                     "config": config, "layer_graph": "bert-base",
                     "loss": "cross_entropy over 2 labels"})
        return model, batch, lambda m, d: m(d["input_ids"], d["labels"]), info
    try:
        import transformers
    except Exception as exc:
        raise Skip(f"transformers not available ({first_line(exc)})")
    s = spec["seq_len"]
    if name == "bert-base":
        tiny = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                "intermediate_size": 128, "vocab_size": 1000, "max_position_embeddings": 64}
        config = transformers.BertConfig(num_labels=2, **(tiny if smoke else {}))
        model = _hf_model(transformers.BertForSequenceClassification, config, info)
        batch = {"input_ids": torch.randint(0, config.vocab_size, (b, s)),
                 "labels": torch.randint(0, 2, (b,))}
        info.update({"constructor": "BertForSequenceClassification(BertConfig(num_labels=2))",
                     "config": {k: getattr(config, k) for k in ("hidden_size", "num_hidden_layers",
                                "num_attention_heads", "intermediate_size", "vocab_size")},
                     "attention_mask": None, "loss": "outputs.loss (cross-entropy over 2 labels)"})
        return model, batch, lambda m, d: m(input_ids=d["input_ids"], labels=d["labels"]).loss, info
    if name == "gpt2-small":
        tiny = {"n_layer": 2, "n_embd": 64, "n_head": 2, "vocab_size": 1000, "n_positions": 64}
        config = transformers.GPT2Config(use_cache=False, **(tiny if smoke else {}))
        model = _hf_model(transformers.GPT2LMHeadModel, config, info)
        ids = torch.randint(0, config.vocab_size, (b, s))
        batch = {"input_ids": ids}
        info.update({"constructor": "GPT2LMHeadModel(GPT2Config(use_cache=False))",
                     "config": {k: getattr(config, k) for k in ("n_layer", "n_embd", "n_head",
                                "vocab_size", "n_positions")},
                     "loss": "outputs.loss with labels=input_ids (next-token cross-entropy)"})
        return model, batch, lambda m, d: m(input_ids=d["input_ids"], labels=d["input_ids"]).loss, info
    raise Skip(f"unknown model {name!r}")


def optimizer_implementation(opt) -> str:
    """Which implementation optimizer.step() runs: fused, foreach or for-loop."""
    if opt.defaults.get("fused"):
        return "fused"
    foreach = opt.defaults.get("foreach")
    if foreach is not None:
        return "foreach" if foreach else "for-loop"
    try:  # torch >= 2.0 picks foreach by default when every parameter is on a supported device
        from torch.optim.optimizer import _default_to_fused_or_foreach
        params = [q for g in opt.param_groups for q in g["params"]]
        fused, foreach = _default_to_fused_or_foreach(params, False, False)
        return "fused" if fused else ("foreach" if foreach else "for-loop")
    except Exception:
        return "for-loop" if int(torch.__version__.split(".")[0]) < 2 else "unresolved default"


def traced_optimizer_implementation(run):
    """Run run() once and report which torch.optim kernel family it called, or None if unseen.

    torch.optim.{sgd,adam,adamw} pick _fused_*, _multi_tensor_* (foreach) or _single_tensor_*
    (for-loop) by a module-level name at call time; counting wrappers see which one ran.
    """
    import importlib
    seen: list[str] = []
    patched = []

    def counting(kind, original):
        def wrapper(*a, **k):
            seen.append(kind)
            return original(*a, **k)
        return wrapper

    for module_name in ("torch.optim.sgd", "torch.optim.adam", "torch.optim.adamw"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for attr, value in list(vars(module).items()):
            match = re.match(r"_(fused|multi_tensor|single_tensor)_", attr)
            if match and callable(value):
                setattr(module, attr, counting(match.group(1), value))
                patched.append((module, attr, value))
    try:
        run()
    finally:
        for module, attr, value in patched:
            setattr(module, attr, value)
    names = {"fused": "fused", "multi_tensor": "foreach", "single_tensor": "for-loop"}
    return names[seen[0]] if seen else None


def make_optimizer(kind: str, model: nn.Module):
    params = [q for q in model.parameters() if q.requires_grad]
    if kind == "sgd":
        opt = torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=1e-4)
        info = {"type": "SGD", "lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4}
    else:
        opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01)
        info = {"type": "AdamW", "lr": 1e-4, "betas": [0.9, 0.999], "weight_decay": 0.01}
    info.update({"foreach": opt.defaults.get("foreach"), "fused": opt.defaults.get("fused"),
                 "implementation": optimizer_implementation(opt),
                 "implementation_source": "torch.optim default rule"})
    return opt, info


def make_grad_scaler(device: torch.device):
    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        try:
            return amp.GradScaler(device.type), "torch.amp.GradScaler"
        except TypeError:
            pass
    return torch.cuda.amp.GradScaler(), "torch.cuda.amp.GradScaler"


def placed_model(spec: dict, device: torch.device, smoke: bool, keys=None):
    """A model case seeded from its id, built, on the device in its mode's parameter dtype, its batch
    (the entries `keys` names, default all) on the device, floating inputs in bfloat16 in the pure-bf16
    mode. (seed, model, batch, loss_fn(model, batch) -> loss, info)."""
    seed = case_seed(spec["id"])
    torch.manual_seed(seed)
    dtype = PRECISIONS[spec["precision"]][3]
    model, batch, loss_fn, info = build_model(spec, device, smoke)
    model.to(device=device, dtype=getattr(torch, dtype))
    batch = {k: batch[k].to(device) for k in (batch if keys is None else keys)}
    if dtype == "bfloat16":
        batch = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v) for k, v in batch.items()}
    return seed, model, batch, loss_fn, info


def ready_model(spec: dict, device: torch.device, smoke: bool):
    """A model case made ready to train (call it inside tf32_flags(spec["precision"])): placed_model in
    train mode, with its optimizer.
    (seed, model, batch, loss_fn(model, batch) -> loss, info, optimizer, optimizer info)."""
    seed, model, batch, loss_fn, info = placed_model(spec, device, smoke)
    model.train()
    opt, opt_info = make_optimizer(spec["optimizer"], model)
    return seed, model, batch, loss_fn, info, opt, opt_info


def timed_region(clock: Clock, region) -> float:
    """Seconds of region() on the clock, synchronized before; what it returns (a loss and its graph,
    an output) is freed outside the timed region, before the next repetition."""
    clock.sync()
    clock.start()
    result = region()
    elapsed = clock.stop()
    del result
    return elapsed


def require_autocast(mode: str, device: torch.device) -> None:
    """Raises Skip where the mode's autocast does not switch on for this device type."""
    if PRECISIONS[mode][2] is not None:
        with autocast_ctx(mode, device.type):
            if not autocast_enabled(device.type):
                raise Skip(f"autocast {PRECISIONS[mode][2]} not active on {device.type}")


def peak_memory(device: torch.device, run):
    """(peak, baseline) bytes allocated over one run() on a CUDA device, the baseline being what is
    allocated before it; (None, None) elsewhere. What run() returns is freed after the peak is read."""
    if device.type != "cuda":
        return None, None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats(device)
    baseline = torch.cuda.memory_allocated(device)
    result = run()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated(device)
    del result
    return peak, baseline


def sampled_steps(device: torch.device, clock: Clock, step, repeats: int):
    """`repeats` timed steps, the host canaries before each: (canary, backward canary, step seconds)."""
    canary_s, backward_canary_s, step_s = [], [], []
    for _ in range(repeats):
        canary_s.append(canary_seconds_per_op(device))
        backward_canary_s.append(backward_canary_seconds_per_node(device))
        step_s.append(timed_region(clock, step))
    return canary_s, backward_canary_s, step_s


def measure_model(spec: dict, device: torch.device, clock: Clock, args, target_s: float) -> dict:
    """Time one whole-model training step and its phases; raises Skip when it cannot run."""
    mode = spec["precision"]
    with tf32_flags(mode):
        settings = precision_settings(mode)
        build0 = time.perf_counter()
        seed, model, batch, loss_fn, info, opt, opt_info = ready_model(spec, device, args.smoke)
        scaler = None
        if mode == "amp-fp16":
            scaler, settings["grad_scaler"] = make_grad_scaler(device)
        build_s = time.perf_counter() - build0

        def forward_loss():
            with autocast_ctx(mode, device.type):
                return loss_fn(model, batch)

        def backward(loss):
            (scaler.scale(loss) if scaler is not None else loss).backward()

        def optimizer_step():
            if scaler is not None:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()

        def step():
            opt.zero_grad(set_to_none=True)
            backward(forward_loss())
            optimizer_step()

        def timed(region) -> float:
            return timed_region(clock, region)

        require_autocast(mode, device)

        warmup = max(1, args.model_warmup)
        wall0 = time.perf_counter()
        traced = traced_optimizer_implementation(step)  # the first warm-up step
        clock.sync()
        step_walls_s = [time.perf_counter() - wall0]
        if traced is not None:
            opt_info["implementation"] = traced
            opt_info["implementation_source"] = "traced torch.optim call"
        for _ in range(warmup - 1):
            wall0 = time.perf_counter()
            step()
            clock.sync()
            step_walls_s.append(time.perf_counter() - wall0)
        step_wall_s = min(step_walls_s)  # the first steps pay one-time set-up

        peak, baseline = peak_memory(device, step)

        # The four phases cost about 2.5 steps per repetition; fewer repetitions if that is too slow.
        repeats = min(args.model_repeats, max(3, int(target_s / max(2.5 * step_wall_s, 1e-9))))
        canary_s, backward_canary_s, step_s = sampled_steps(device, clock, step, repeats)

        forward_s = []
        for _ in range(repeats):
            opt.zero_grad(set_to_none=True)
            forward_s.append(timed(forward_loss))

        def forward_backward():
            backward(forward_loss())

        forward_backward_s = []
        for _ in range(repeats):
            opt.zero_grad(set_to_none=True)
            forward_backward_s.append(timed(forward_backward))
        # Gradients from the last forward+backward stay in place for the optimizer-only timing.
        optimizer_s = [timed(optimizer_step) for _ in range(repeats)]

    record = dict(spec)
    record.update({
        "seed": seed,
        "precision_settings": settings,
        "model_info": info,
        "optimizer_info": opt_info,
        "parameter_count": sum(q.numel() for q in model.parameters()),
        "param_dtype": dtype_name(next(model.parameters()).dtype),
        "warmup": warmup,
        "build_wall_seconds": build_s,
        "step_seconds": stats(step_s, keep_values=True),
        "forward_seconds": stats(forward_s, keep_values=True),
        "forward_backward_seconds": stats(forward_backward_s, keep_values=True),
        "optimizer_seconds": stats(optimizer_s, keep_values=True),
        "host_canary_seconds": stats(canary_s, keep_values=True),
        "host_backward_canary_seconds": stats(backward_canary_s, keep_values=True),
        "rounds": 1,
        "round_samples": [len(step_s)],  # each round's samples of every timing (one count: all take `repeats`)
        "peak_memory_bytes": peak,
        "baseline_memory_bytes": baseline,
    })
    return record


# ----------------------------------------------------------------------------- inference cases

def inference_model_cases(smoke: bool) -> list[dict]:
    """The --mode inference model list: the training cases' models at batch 1 and a large batch, in
    fp32 and amp-bf16; ids as the training ones with "/inference" appended."""
    def cases(model, size, batches, modes):
        out = []
        for batch in batches:
            size_key, tag = model_size_tag(model, batch, size)
            for mode in modes:
                out.append({"id": f"{model}/{tag}/{mode}/inference", "model": model, "batch": batch,
                            size_key: size, "precision": mode, "optimizer": "none", "mode": "inference"})
        return out

    if smoke:  # tiny configurations of the same code paths, plus the torch-only MLP
        return _checked(cases("mlp", 64, (1, 8), BASE_MODES) + cases("resnet50", 32, (1,), ["amp-bf16"])
                        + cases("vit-b-16", 32, (1,), ["fp32"]) + cases("bert-base", 16, (2,), ["amp-bf16"])
                        + cases("gpt2-small", 16, (2,), ["fp32"]))
    return _checked(cases("resnet50", 224, (1, 256), BASE_MODES) + cases("bert-base", 128, (1, 256), BASE_MODES)
                    + cases("gpt2-small", 1024, (1, 32), BASE_MODES) + cases("vit-b-16", 224, (1, 256), BASE_MODES))


def inference_forward(spec: dict):
    """(fn(model, batch) -> output, the batch entries it takes, what it calls) for an inference case:
    the model's own forward, no labels, no loss."""
    name = spec["model"]
    if name in ("mlp", "resnet50", "vit-b-16"):
        return (lambda m, d: m(d["x"])), ("x",), "model(x) -> logits"
    if name in ("bert-base", "gpt2-small"):
        return ((lambda m, d: m(input_ids=d["input_ids"])), ("input_ids",),
                "model(input_ids=input_ids), no labels -> ModelOutput with logits, no loss")
    raise Skip(f"no inference forward for model {name!r}")


def ready_inference_model(spec: dict, device: torch.device, smoke: bool):
    """An inference case made ready (call it inside tf32_flags(spec["precision"])): seeded from its
    id, built as the training cases build it, on the device in its mode's parameter dtype, in eval
    mode, the inputs its forward takes on the device (labels dropped).
    (seed, model, batch, fn(model, batch) -> output, info)."""
    forward_fn, keys, call = inference_forward(spec)
    seed, model, batch, _, info = placed_model(spec, device, smoke, keys)
    model.eval()
    info.pop("loss", None)
    info.update({"call": call, "module_mode": "eval", "grad_mode": "torch.inference_mode()"})
    return seed, model, batch, forward_fn, info


def measure_inference_model(spec: dict, device: torch.device, clock: Clock, args, target_s: float) -> dict:
    """Time one model's inference forward; raises Skip when it cannot run."""
    mode = spec["precision"]
    with tf32_flags(mode):
        settings = precision_settings(mode)
        build0 = time.perf_counter()
        seed, model, batch, forward_fn, info = ready_inference_model(spec, device, args.smoke)
        build_s = time.perf_counter() - build0

        def forward():
            with torch.inference_mode(), autocast_ctx(mode, device.type):
                return forward_fn(model, batch)

        require_autocast(mode, device)

        warmup = max(1, args.model_warmup)
        step_walls_s, output = [], None
        for _ in range(warmup):
            clock.sync()
            wall0 = time.perf_counter()
            out = forward()
            clock.sync()
            step_walls_s.append(time.perf_counter() - wall0)
            if output is None:
                logits = getattr(out, "logits", out)
                output = {"shape": list(logits.shape), "dtype": dtype_name(logits.dtype)}
                del logits
            del out
        step_wall_s = min(step_walls_s)  # the first steps pay one-time set-up

        peak, baseline = peak_memory(device, forward)

        # What the two canaries before each sample cost, so the repetitions fit the budget.
        wall0 = time.perf_counter()
        canary_seconds_per_op(device)
        backward_canary_seconds_per_node(device)
        canary_wall_s = time.perf_counter() - wall0

        # More samples for short (host-bound) steps unless --model-repeats was given; fewer where
        # the budget requires; never fewer than 3.
        most = args.model_repeats
        if args.short_step_repeats is not None and step_wall_s < INFERENCE_SHORT_STEP_SECONDS:
            most = max(most, args.short_step_repeats)
        repeats = min(most, max(3, int(target_s / max(step_wall_s + canary_wall_s, 1e-9))))
        canary_s, backward_canary_s, step_s = sampled_steps(device, clock, forward, repeats)

    record = dict(spec)
    record.update({
        "seed": seed,
        "precision_settings": settings,
        "model_info": info,
        "parameter_count": sum(q.numel() for q in model.parameters()),
        "param_dtype": dtype_name(next(model.parameters()).dtype),
        "output": output,
        "warmup": warmup,
        "build_wall_seconds": build_s,
        "step_seconds": stats(step_s, keep_values=True),
        "host_canary_seconds": stats(canary_s, keep_values=True),
        "host_backward_canary_seconds": stats(backward_canary_s, keep_values=True),
        "rounds": 1,
        "round_samples": [len(step_s)],
        "peak_memory_bytes": peak,
        "baseline_memory_bytes": baseline,
    })
    return record


# ----------------------------------------------------------------------------- run

def describe_device(device: torch.device, key_override: str | None) -> dict:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        name = torch.cuda.get_device_name(device)
        return {"name": name, "key": key_override or gpu_key_for(name),
                "sm_count": props.multi_processor_count, "memory_bytes": props.total_memory,
                "compute_capability": f"{props.major}.{props.minor}"}
    name = host_cpu_name()
    return {"name": name, "key": key_override or "cpu", "sm_count": None, "memory_bytes": None,
            "compute_capability": None}


def nvidia_driver_version():
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as f:
            match = re.search(r"Kernel Module\s+([0-9.]+)", f.read())
            return match.group(1) if match else None
    except OSError:
        return None


def software_versions() -> dict:
    cudnn = None
    with contextlib.suppress(Exception):
        cudnn = torch.backends.cudnn.version()
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": cudnn,
            "python": platform.python_version(), "torchvision": optional_version("torchvision"),
            "transformers": optional_version("transformers"), "nvidia_driver": nvidia_driver_version()}


def warm_up_gpu(device: torch.device, seconds: float) -> None:
    """Run large matmuls for a moment so clocks and the cuBLAS handle are up before case 1."""
    a = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        for _ in range(10):
            a = torch.mm(a, a).clamp_(-1, 1)
        torch.cuda.synchronize(device)
    del a


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description="Time PyTorch layers and whole training steps (with --mode inference: whole models' "
                    "inference forwards) on a GPU and write roofsim "
                    "validation JSON (data/validation/<gpu-key>-<YYYY-MM-DD>.json). "
                    "See docs/validation.md.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="precision modes (each case runs under one; TF32 flags set per case, then restored):\n"
               "  fp32         defaults: matmul.allow_tf32=False, cudnn.allow_tf32=True\n"
               "  fp32-strict  both TF32 flags False\n"
               "  tf32         both TF32 flags True\n"
               "  amp-bf16     fp32 params/inputs, forward under torch.autocast(bfloat16)\n"
               "  amp-fp16     the same with float16 (GradScaler for whole models)\n"
               "  bf16         module and inputs converted to bfloat16, no autocast\n"
               "timing: CUDA events, synchronize around each repetition, median/min/max of the\n"
               "repetitions; grads set to None before each; memory from max_memory_allocated.\n"
               "Cases that cannot run are listed under \"skipped\" with the reason.")
    ap.add_argument("--out", help="output JSON path (default: data/validation/<gpu-key>-<date>.json "
                                  "in the repository, '-inference' appended with --mode inference, "
                                  "then '-smoke' with --smoke)")
    ap.add_argument("--gpu-key", help="roofsim GPU key to record (default: mapped from "
                                      "torch.cuda.get_device_name(), else a slug of the name)")
    ap.add_argument("--mode", choices=("training", "inference"), default="training",
                    help="training (default): layer cases and whole training steps; inference: only "
                         "model cases, each model's forward alone under torch.inference_mode() in "
                         "eval mode, at batch 1 and a large batch, fp32 and amp-bf16")
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--only-layers", action="store_true", help="run only the layer cases")
    which.add_argument("--only-models", action="store_true", help="run only the whole-model cases")
    ap.add_argument("--filter", metavar="SUBSTR",
                    help="run only cases whose id contains SUBSTR (case-sensitive)")
    ap.add_argument("--time-budget-s", type=float, default=None,
                    help="wall-clock budget for the whole run in seconds (default 240; 120 with "
                         "--smoke). Repetitions shrink for slow cases; cases left when it runs "
                         "out are recorded as skipped")
    ap.add_argument("--device", default="cuda", help="torch device (default cuda; cpu for testing)")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny shapes and few repetitions, to test the script itself (e.g. on CPU); "
                         "the numbers are not validation data")
    ap.add_argument("--repeats", type=int, default=None,
                    help="timed repetitions per layer case and phase (default 30; 3 with --smoke)")
    ap.add_argument("--warmup", type=int, default=None,
                    help="warm-up repetitions per layer case and phase (default 5; 1 with --smoke; "
                         "at least 1 always runs)")
    ap.add_argument("--model-repeats", type=int, default=None,
                    help="timed repetitions per model case and phase (default 15; 2 with --smoke)")
    ap.add_argument("--layer-rounds", type=int, default=None,
                    help="rounds of every layer case's steady state, the later ones after all cases' first, "
                         "their samples pooled (default 3; 1 with --smoke)")
    ap.add_argument("--model-rounds", type=int, default=None,
                    help="passes over the model cases, each timing every case anew (default 2; 1 with "
                         "--smoke); the samples of all passes are pooled, so that a burst of host "
                         "interference during one case's pass does not set its median")
    ap.add_argument("--model-warmup", type=int, default=None,
                    help="warm-up training steps per model case (default 5; 1 with --smoke)")
    ap.add_argument("--cudnn-benchmark", action="store_true",
                    help="set torch.backends.cudnn.benchmark=True (default: PyTorch's default, False)")
    ap.add_argument("--list", action="store_true", help="print the case ids and exit")
    args = ap.parse_args(argv)
    if args.mode == "inference" and args.only_layers:
        ap.error("--mode inference runs only model cases (no layer cases); --only-layers cannot be used with it")
    smoke = args.smoke
    # Inference steps under INFERENCE_SHORT_STEP_SECONDS take more samples, unless --model-repeats
    # says how many (or --smoke keeps the run tiny).
    args.short_step_repeats = None if (args.model_repeats is not None or smoke) else INFERENCE_SHORT_STEP_REPEATS
    for name, full, tiny in (("repeats", 30, 3), ("warmup", 5, 1), ("model_repeats", 15, 2), ("layer_rounds", 3, 1), ("model_rounds", 2, 1),
                             ("model_warmup", 5, 1), ("time_budget_s", 240.0, 120.0)):
        if getattr(args, name) is None:
            setattr(args, name, tiny if smoke else full)
    if args.repeats < 1 or args.model_repeats < 1 or args.model_rounds < 1 or args.layer_rounds < 1:
        ap.error("--repeats, --model-repeats, --layer-rounds and --model-rounds must be at least 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    inference = args.mode == "inference"
    layers = [] if args.only_models or inference else layer_cases(args.smoke)
    models = [] if args.only_layers else (inference_model_cases(args.smoke) if inference else model_cases(args.smoke))
    if args.filter:
        layers = [c for c in layers if args.filter in c["id"]]
        models = [c for c in models if args.filter in c["id"]]
    if args.list:
        for c in layers + models:
            print(c["id"])
        return 0

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: CUDA is not available (use --device cpu --smoke to test without a GPU)", file=sys.stderr)
        return 2
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)
    torch.backends.cudnn.benchmark = args.cudnn_benchmark

    gpu = describe_device(device, args.gpu_key)
    now = dt.datetime.now(dt.timezone.utc)
    out = args.out or os.path.join(REPO_ROOT, "data", "validation",
                                   f"{gpu['key']}-{now:%Y-%m-%d}{'-inference' if inference else ''}"
                                   f"{'-smoke' if args.smoke else ''}.json")
    clock = Clock(device)
    doc = {
        "schema_version": SCHEMA_VERSION,
        "kind": "roofsim-validation",
        **({"mode": "inference"} if inference else {}),  # a training file has no "mode" (as before)
        "complete": False,
        "gpu": gpu,
        "host": {"cpu": host_cpu_name(), "logical_cpus": os.cpu_count(), "platform": platform.platform()},
        "software": software_versions(),
        "date_utc": now.isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(a) for a in [sys.executable] + sys.argv),
        "method": METHOD,
        "method_settings": {
            "timer": clock.name, "device": str(device), "smoke": args.smoke,
            "warmup": max(1, args.warmup), "repeats": args.repeats,
            "model_warmup": max(1, args.model_warmup), "model_repeats": args.model_repeats,
            "layer_rounds": args.layer_rounds, "model_rounds": args.model_rounds,
            "min_repeats": 3, "time_budget_s": args.time_budget_s,
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "cudnn_deterministic": torch.backends.cudnn.deterministic,
            "grad_reset": "set_to_none before each repetition",
            "memory": "torch.cuda.max_memory_allocated after reset_peak_memory_stats (caching allocator)",
        },
        "layer_cases": [],
        "model_cases": [],
        "skipped": [],
    }

    if inference:
        doc["method"] = METHOD_INFERENCE
        doc["method_settings"] = {
            "mode": "inference", "timer": clock.name, "device": str(device), "smoke": args.smoke,
            "model_warmup": max(1, args.model_warmup), "model_repeats": args.model_repeats,
            "short_step_seconds": INFERENCE_SHORT_STEP_SECONDS, "short_step_repeats": args.short_step_repeats,
            "model_rounds": args.model_rounds, "min_repeats": 3, "time_budget_s": args.time_budget_s,
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "cudnn_deterministic": torch.backends.cudnn.deterministic,
            "module_mode": "eval", "grad_mode": "torch.inference_mode()",
            "memory": "torch.cuda.max_memory_allocated after reset_peak_memory_stats (caching allocator)",
        }

    t_start = time.perf_counter()
    deadline = t_start + args.time_budget_s
    print(f"roofsim validation{' (inference)' if inference else ''}: {gpu['name']} (key {gpu['key']}), "
          f"torch {torch.__version__}, "
          f"{len(layers)} layer cases, {len(models)} model cases, budget {args.time_budget_s:.0f} s -> {out}",
          flush=True)
    if device.type == "cuda" and not args.smoke:
        warm_up_gpu(device, 1.0)

    # Layers may use the budget up to a point that leaves room for the models (their rough share).
    model_guess_s = 1.0 if args.smoke else 12.0
    layer_deadline = deadline - (min(0.5 * args.time_budget_s, model_guess_s * len(models)) if layers else 0)
    done_model_s: list[float] = []

    def elapsed() -> float:
        return time.perf_counter() - t_start

    def left_estimate(layer_avg_s: float, layers_left: int, models_left: int) -> float:
        model_avg = statistics.mean(done_model_s) if done_model_s else model_guess_s
        return layer_avg_s * layers_left + model_avg * models_left

    def skip(kind: str, case: dict, reason: str) -> None:
        doc["skipped"].append({"id": case["id"], "kind": kind, "reason": reason})
        print(f"[{elapsed():7.1f} s]   skipped: {reason}", flush=True)

    layer_wall: list[float] = []
    failed = False
    for i, case in enumerate(layers):
        t_case = time.perf_counter()
        left = len(layers) - i
        avg = statistics.mean(layer_wall) if layer_wall else 0.5
        print(f"[{elapsed():7.1f} s] layer {i + 1:3d}/{len(layers)} {case['id']}  "
              f"(~{left_estimate(avg, left, len(models)):.0f} s left)", flush=True)
        if t_case > layer_deadline:
            skip("layer", case, f"time budget exhausted (--time-budget-s {args.time_budget_s:g})")
            continue
        # Each case gets an equal share of the time left for its timed repetitions, less what the
        # later steady-state rounds need (about a third of a first round's time each).
        first_round_s = (layer_deadline - t_case) / (1 + (args.layer_rounds - 1) / 3)
        target_s = max(0.05, 0.6 * first_round_s / left)
        try:
            rec = measure_layer(case, device, clock, args, target_s)
            doc["layer_cases"].append(rec)
            print(f"[{elapsed():7.1f} s]   fwd {rec['forward_seconds']['median'] * 1e3:.4f} ms  "
                  f"fwd+bwd {rec['forward_backward_seconds']['median'] * 1e3:.4f} ms  "
                  f"x{rec['forward_seconds']['samples']}", flush=True)
        except Skip as exc:
            skip("layer", case, str(exc))
        except Exception as exc:  # e.g. no kernel for this dtype, out of memory: record and go on
            skip("layer", case, first_line(exc))
            failed = True
        if failed:  # after the except block, so the traceback no longer holds the case's tensors
            clear_memory(device)
            failed = False
        layer_wall.append(time.perf_counter() - t_case)
        write_json_atomic(out, doc)

    # The steady state again, in rounds over all cases, so that each case's samples span moments
    # tens of seconds apart (a shared host's speed changes for seconds at a time; the probe's passes
    # do the same for its figures).
    for round_index in range(2, args.layer_rounds + 1):
        for i, rec in enumerate(doc["layer_cases"]):
            if time.perf_counter() > layer_deadline:
                print(f"[{elapsed():7.1f} s] steady-state round {round_index}: time budget exhausted after "
                      f"{i} of {len(doc['layer_cases'])} cases", flush=True)
                break
            try:
                steady_round(rec, device, clock)
            except Exception as exc:  # it ran in the first round: say so, keep the first round's samples
                print(f"[{elapsed():7.1f} s] steady-state round {round_index} of {rec['id']}: {first_line(exc)}",
                      flush=True)
                clear_memory(device)
        else:
            print(f"[{elapsed():7.1f} s] steady-state round {round_index}: {len(doc['layer_cases'])} cases",
                  flush=True)
        write_json_atomic(out, doc)
    if layers:
        clear_memory(device)
    model_passes = [(r, spec) for r in range(args.model_rounds) for spec in models]
    recorded: dict = {}  # case id -> index in doc["model_cases"]
    for j, (round_index, spec) in enumerate(model_passes):
        t_case = time.perf_counter()
        left = len(model_passes) - j
        print(f"[{elapsed():7.1f} s] model {j + 1}/{len(model_passes)} {spec['id']} (round {round_index + 1})  "
              f"(~{left_estimate(0.0, 0, left):.0f} s left)", flush=True)
        if round_index > 0 and spec["id"] not in recorded:
            continue  # skipped in the first round: said so then
        if t_case > deadline:
            if round_index == 0:
                skip("model", spec, f"time budget exhausted (--time-budget-s {args.time_budget_s:g})")
            continue  # a later round that runs out of time leaves the first round's samples alone
        target_s = max(0.1, 0.6 * (deadline - t_case) / left)
        try:
            rec = (measure_inference_model if inference else measure_model)(spec, device, clock, args, target_s)
            if round_index == 0:
                recorded[spec["id"]] = len(doc["model_cases"])
                doc["model_cases"].append(rec)
            else:
                index = recorded[spec["id"]]
                doc["model_cases"][index] = rec = merge_model_rounds(doc["model_cases"][index], rec)
            if inference:
                print(f"[{elapsed():7.1f} s]   inference step {rec['step_seconds']['median'] * 1e3:.3f} ms  "
                      f"x{rec['step_seconds']['samples']}", flush=True)
            else:
                print(f"[{elapsed():7.1f} s]   step {rec['step_seconds']['median'] * 1e3:.2f} ms  "
                      f"fwd {rec['forward_seconds']['median'] * 1e3:.2f} ms  "
                      f"fwd+bwd {rec['forward_backward_seconds']['median'] * 1e3:.2f} ms  "
                      f"opt {rec['optimizer_seconds']['median'] * 1e3:.2f} ms  "
                      f"x{rec['step_seconds']['samples']}", flush=True)
        except Exception as exc:  # Skip included
            reason = str(exc) if isinstance(exc, Skip) else first_line(exc)
            if round_index == 0:
                skip("model", spec, reason)
            else:  # the first round's record stands, and says that it holds that round alone
                doc["model_cases"][recorded[spec["id"]]]["later_round_failed"] = reason
                print(f"[{elapsed():7.1f} s]   round {round_index + 1} failed: {reason}", flush=True)
        clear_memory(device)
        done_model_s.append(time.perf_counter() - t_case)
        write_json_atomic(out, doc)

    doc["complete"] = True
    doc["total_wall_seconds"] = elapsed()
    write_json_atomic(out, doc)
    print(f"[{elapsed():7.1f} s] done: {len(doc['layer_cases'])} layer cases, {len(doc['model_cases'])} "
          f"model cases, {len(doc['skipped'])} skipped -> {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
