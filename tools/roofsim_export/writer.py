"""The kernel IR document (docs/ir-format.md): assembly, a check of its field rules, an atomic
writer, and the --summary table."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import tempfile

KINDS = ("gemm", "conv", "attention", "elementwise", "reduction", "normalization", "softmax", "embedding", "copy",
         "optimizer", "host-only", "unknown")
PHASES = ("forward", "backward", "optimizer")
DTYPES = ("float32", "float16", "bfloat16", "float64", "float8", "int64", "int32", "int8", "uint8", "bool")
UNITS = ("fp64", "fp32", "fp16", "bf16", "fp64-tensor", "tf32-tensor", "fp16-tensor", "fp16-fp16acc-tensor",
         "bf16-tensor", "fp8-tensor", "int8-tensor")
STEP_MODES = ("training", "inference")  # the IR's "mode": what the kernels are one of
TOP_FIELDS = ("schema_version", "kind", "model", "precision", "mode", "batch", "optimizer", "parameters", "origin",
              "memory", "model_code", "kernels")
KERNEL_FIELDS = ("op", "kind", "phase", "layer", "dtype", "unit", "flops", "bytes_read", "bytes_written", "gemm",
                 "conv", "attention", "norm", "host_dispatch", "sync", "mixed_dtypes", "strided", "host_op", "source_op", "flag",
                 "args", "python_seconds")
MEMORY_FIELDS = ("parameters_bytes", "gradients_bytes", "optimizer_state_bytes", "peak_bytes", "method")


def document(*, model: str, precision: str, batch: int, optimizer: str, fused: bool, weight_decay: bool,
             parameters: dict, origin: str, memory: dict, kernels: list, model_code: dict | None = None,
             mode: str = "training") -> dict:
    doc = {
        "schema_version": 1,
        "kind": "roofsim-kernel-ir",
        "model": model,
        "precision": precision,
        "mode": mode,
        "batch": int(batch),
        "optimizer": {"kind": optimizer, "fused": bool(fused), "weight_decay": bool(weight_decay)},
        "parameters": parameters,
        "origin": origin,
        "memory": memory,
    }
    if model_code is not None:
        doc["model_code"] = model_code
    doc["kernels"] = kernels
    return doc


def problems(doc: dict) -> list[str]:
    """Field-rule violations (docs/ir-format.md), as 'path: message'; empty when the IR is valid."""
    out = []

    def bad(path, msg):
        out.append(f"{path}: {msg}")

    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    for key in doc:
        if key not in TOP_FIELDS:
            bad(key, "unknown field")
    if doc.get("schema_version") != 1:
        bad("schema_version", "expected 1")
    if doc.get("kind") != "roofsim-kernel-ir":
        bad("kind", 'expected "roofsim-kernel-ir"')
    mode = doc.get("mode", "training")
    if mode not in STEP_MODES:
        bad("mode", "expected training or inference")
    opt = doc.get("optimizer")
    if mode == "inference" and isinstance(opt, dict) and opt.get("kind", "none") != "none":
        bad("optimizer.kind", "an inference IR runs no optimizer: expected none")
    if opt is not None and (not isinstance(opt, dict) or opt.get("kind") not in ("none", "sgd", "adam", "adamw")
                            or not isinstance(opt.get("fused", False), bool)
                            or not isinstance(opt.get("weight_decay", True), bool)
                            or set(opt) - {"kind", "fused", "weight_decay"}):
        bad("optimizer", "expected {kind: none|sgd|adam|adamw, fused: bool, weight_decay: bool}")
    params = doc.get("parameters")
    if params is not None:
        if not isinstance(params, dict) or set(params) != {"elements", "tensors"} or not number(params["elements"]) \
                or params["elements"] < 0 or not isinstance(params["tensors"], int) or params["tensors"] < 0:
            bad("parameters", "expected {elements: number >= 0, tensors: integer >= 0}")
    mem = doc.get("memory")
    if mem is not None:
        for key, v in mem.items():
            if key not in MEMORY_FIELDS:
                bad(f"memory.{key}", "unknown field")
            elif key == "method":
                if not isinstance(v, str):
                    bad("memory.method", "expected a string")
            elif not number(v) or v < 0:
                bad(f"memory.{key}", "expected a number >= 0")
    code = doc.get("model_code")
    if code is not None:
        if not isinstance(code, dict) or not {"fastest_reference_seconds", "method"} <= set(code) \
                or not set(code) <= {"fastest_reference_seconds", "timed_reference_seconds", "method"} \
                or not number(code["fastest_reference_seconds"]) or code["fastest_reference_seconds"] <= 0 \
                or not number(code.get("timed_reference_seconds", code["fastest_reference_seconds"])) \
                or code.get("timed_reference_seconds", code["fastest_reference_seconds"]) < code["fastest_reference_seconds"] \
                or not isinstance(code["method"], str):
            bad("model_code", "expected {fastest_reference_seconds: number > 0, timed_reference_seconds: number >= it "
                              "(optional), method: string}")
    kernels = doc.get("kernels")
    if not isinstance(kernels, list) or not kernels:
        bad("kernels", "expected a non-empty array")
        return out
    for i, k in enumerate(kernels):
        p = f"kernels[{i}]"
        for key in k:
            if key not in KERNEL_FIELDS:
                bad(f"{p}.{key}", "unknown field")
        for key in ("op", "kind", "phase", "layer"):
            if not isinstance(k.get(key), str):
                bad(f"{p}.{key}", "required string")
        if k.get("kind") not in KINDS:
            bad(f"{p}.kind", f"unknown kind {k.get('kind')!r}")
        if k.get("phase") not in PHASES:
            bad(f"{p}.phase", f"unknown phase {k.get('phase')!r}")
        elif mode == "inference" and k["phase"] != "forward":
            bad(f"{p}.phase", f"an inference IR holds forward kernels only, not {k['phase']}")
        if "dtype" in k and k["dtype"] not in DTYPES:
            bad(f"{p}.dtype", f"unknown dtype {k['dtype']!r}")
        if "unit" in k and k["unit"] not in UNITS:
            bad(f"{p}.unit", f"unknown unit {k['unit']!r}")
        for key in ("flops", "bytes_read", "bytes_written"):
            if key in k and (not number(k[key]) or k[key] < 0):
                bad(f"{p}.{key}", "expected a number >= 0")
        for key in ("host_dispatch", "sync", "mixed_dtypes", "strided"):
            if key in k and not isinstance(k[key], bool):
                bad(f"{p}.{key}", "expected a bool")
        if k.get("sync") and k.get("kind") != "host-only":
            bad(f"{p}.sync", "only a host-only kernel can synchronize")
        if k.get("mixed_dtypes") and k.get("kind") != "elementwise":
            bad(f"{p}.mixed_dtypes", "only an elementwise kernel has mixed operand dtypes")
        if k.get("strided") and k.get("kind") != "elementwise":
            bad(f"{p}.strided", "only an elementwise kernel has strided operands")
        for key in ("host_op", "source_op", "flag", "args"):
            if key in k and not isinstance(k[key], str):
                bad(f"{p}.{key}", "expected a string")
        if "python_seconds" in k:
            if not number(k["python_seconds"]) or k["python_seconds"] < 0:
                bad(f"{p}.python_seconds", "expected a number >= 0")
            elif k.get("kind") != "host-only":
                bad(f"{p}.python_seconds", "only a host-only kernel runs model code")
        if k.get("kind") == "unknown" and not k.get("flag"):
            bad(f"{p}.flag", "required on unknown kernels")
        if k.get("kind") == "host-only" and (k.get("flops", 0) or k.get("bytes_read", 0) or k.get("bytes_written", 0)):
            bad(p, "a host-only kernel does no GPU work: flops and bytes must be 0")
        shapes = [s for s in ("gemm", "conv", "attention", "norm") if s in k]
        fits = {"norm": ("normalization", "reduction")}
        if len(shapes) > 1 or (shapes and k.get("kind") not in fits.get(shapes[0], (shapes[0],))):
            bad(f"{p}.kind", "does not match its shape object")
        if "norm" in k:
            nd = k["norm"]
            if set(nd) != {"groups", "group_elements"} or not all(isinstance(v, int) and v > 0 for v in nd.values()):
                bad(f"{p}.norm", "expected positive integers groups and group_elements")
        if "gemm" in k:
            g = k["gemm"]
            if set(g) - {"m", "n", "k", "batch", "layout"} or not all(isinstance(g.get(d, 1), int) and g.get(d, 1) > 0
                                                                       for d in ("m", "n", "k", "batch")):
                bad(f"{p}.gemm", "expected positive integers m, n, k (batch), and a layout")
            elif "layout" in g and g["layout"] not in ("NN", "NT", "TN", "TT"):
                bad(f"{p}.gemm.layout", "expected NN, NT, TN or TT")
        if "conv" in k:
            c = k["conv"]
            if c.get("pass") not in ("forward", "backward-data", "backward-filter"):
                bad(f"{p}.conv.pass", "expected forward, backward-data or backward-filter")
            for d in ("n", "c", "h", "w", "k", "r", "s"):
                if not isinstance(c.get(d), int) or c[d] <= 0:
                    bad(f"{p}.conv.{d}", "expected a positive integer")
            for d, least in (("stride", 1), ("padding", 0), ("dilation", 1)):
                if d in c and not (isinstance(c[d], list) and len(c[d]) == 2 and
                                   all(isinstance(x, int) and x >= least for x in c[d])):
                    bad(f"{p}.conv.{d}", f"expected [h, w] of integers >= {least}")
            if not isinstance(c.get("groups", 1), int) or c.get("groups", 1) <= 0:
                bad(f"{p}.conv.groups", "expected a positive integer")
        if "attention" in k:
            a = k["attention"]
            for d in ("batch", "heads", "seq_q", "seq_kv", "head_dim"):
                if not isinstance(a.get(d), int) or a[d] <= 0:
                    bad(f"{p}.attention.{d}", "expected a positive integer")
            if a.get("backend", "flash") not in ("flash", "efficient", "math", "cudnn"):
                bad(f"{p}.attention.backend", "expected flash, efficient, math or cudnn")
    return out


def dumps(doc: dict) -> str:
    """JSON with one kernel per line (readable, diffable, compact)."""
    head = {k: v for k, v in doc.items() if k != "kernels"}
    text = json.dumps(head, indent=2)
    lines = ",\n".join("    " + json.dumps(k, separators=(", ", ": ")) for k in doc["kernels"])
    return text[:-2] + ',\n  "kernels": [\n' + lines + "\n  ]\n}\n"


def write_atomic(path: str, text: str) -> None:
    """Writes `text` to `path` through a temporary file and os.replace: the file appears whole or not at all."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".roofsim-export-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def unknown_kernels(doc: dict) -> list[dict]:
    return [k for k in doc["kernels"] if k["kind"] == "unknown"]


def summary(doc: dict) -> str:
    """Per phase and kind: kernel count, GFLOP, MB moved; then the unknown ops."""
    rows = collections.OrderedDict()
    for k in doc["kernels"]:
        key = (k["phase"], k["kind"])
        r = rows.setdefault(key, [0, 0.0, 0.0])
        r[0] += 1
        r[1] += k.get("flops", 0)
        r[2] += k.get("bytes_read", 0) + k.get("bytes_written", 0)
    inference = ", inference (forward only)" if doc.get("mode") == "inference" else ""
    lines = [f"{doc.get('model', '')}: {doc.get('precision', '')}{inference}, batch {doc.get('batch', '')}, "
             f"optimizer {doc['optimizer']['kind']}{' (fused)' if doc['optimizer']['fused'] else ''}",
             f"{'phase':<10} {'kind':<14} {'kernels':>8} {'GFLOP':>12} {'MB moved':>12}"]
    for phase in PHASES:
        totals = [0, 0.0, 0.0]
        for kind in KINDS:
            r = rows.get((phase, kind))
            if not r:
                continue
            lines.append(f"{phase:<10} {kind:<14} {r[0]:>8d} {r[1] / 1e9:>12.3f} {r[2] / 1e6:>12.1f}")
            for i in range(3):
                totals[i] += r[i]
        if totals[0]:
            lines.append(f"{phase:<10} {'(all)':<14} {totals[0]:>8d} {totals[1] / 1e9:>12.3f} {totals[2] / 1e6:>12.1f}")
    mem = doc.get("memory") or {}
    if mem:
        lines.append(f"memory: parameters {mem['parameters_bytes'] / 2**20:.1f} MiB, gradients "
                     f"{mem['gradients_bytes'] / 2**20:.1f} MiB, optimizer state {mem['optimizer_state_bytes'] / 2**20:.1f}"
                     f" MiB, peak {mem['peak_bytes'] / 2**20:.1f} MiB")
    code = [k["python_seconds"] for k in doc["kernels"] if "python_seconds" in k]
    if code:
        lines.append(f"model code: {sum(code) * 1e3:.3f} ms in {len(code)} stretches on the exporting host "
                     f"(reference work's fastest call {doc['model_code']['fastest_reference_seconds'] * 1e6:.1f} us)" if "model_code" in doc else
                     f"model code: {sum(code) * 1e3:.3f} ms in {len(code)} stretches")
    unknown = collections.Counter((k["op"], k["layer"]) for k in unknown_kernels(doc))
    if unknown:
        lines.append(f"unknown ops ({sum(unknown.values())} kernels, costed on the roofline from their bytes):")
        for (op, layer), n in unknown.most_common():
            lines.append(f"  {op} in '{layer}' x{n}")
    return "\n".join(lines)
