"""The field rules of docs/ir-format.md, checked independently of the exporter's own writer."""

import numbers

TOP = {"schema_version", "kind", "kernels", "model", "origin", "precision", "mode", "batch", "optimizer",
       "parameters", "memory", "model_code"}
KERNEL = {"op", "kind", "phase", "layer", "dtype", "unit", "flops", "bytes_read", "bytes_written", "gemm", "conv",
          "attention", "norm", "host_dispatch", "sync", "mixed_dtypes", "strided", "host_op", "source_op", "flag", "args",
          "python_seconds"}
KINDS = {"gemm", "conv", "attention", "elementwise", "reduction", "normalization", "softmax", "embedding", "copy",
         "optimizer", "host-only", "unknown"}
PHASES = ["forward", "backward", "optimizer"]
# docs/graph-format.md's dtypes, and float8 (include/roofsim/ir.hpp)
DTYPES = {"float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8", "bool", "float8"}
# docs/gpu-specs.md's compute units
UNITS = {"fp64", "fp32", "fp16", "bf16", "fp64-tensor", "tf32-tensor", "fp16-tensor", "fp16-fp16acc-tensor",
         "bf16-tensor", "fp8-tensor", "int8-tensor"}
MODES = {"fp32", "fp32-strict", "tf32", "amp-bf16", "amp-fp16", "bf16"}


def _num(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _pos_int(v):
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def violations(doc):
    """Every rule the document breaks, as 'path: rule'."""
    out = []
    err = out.append
    for key in doc:
        if key not in TOP:
            err(f"{key}: unknown top-level field")
    if doc.get("schema_version") != 1:
        err("schema_version: must be 1")
    if doc.get("kind") != "roofsim-kernel-ir":
        err("kind: must be roofsim-kernel-ir")
    for key in ("model", "origin"):
        if key in doc and not isinstance(doc[key], str):
            err(f"{key}: must be a string")
    if "precision" in doc and doc["precision"] not in MODES:
        err("precision: unknown mode")
    # mode: optional, training when absent; an inference IR is one forward: no optimizer, forward kernels
    mode = doc.get("mode", "training")
    if mode not in ("training", "inference"):
        err("mode: training or inference")
    if mode == "inference" and doc.get("optimizer", {}).get("kind", "none") != "none":
        err("optimizer: none in an inference IR")
    if "batch" in doc and not _pos_int(doc["batch"]):
        err("batch: must be a positive integer")
    if "optimizer" in doc:
        o = doc["optimizer"]
        if set(o) - {"kind", "fused", "weight_decay"} or o.get("kind") not in ("none", "sgd", "adam", "adamw") \
                or not isinstance(o.get("fused", False), bool) or not isinstance(o.get("weight_decay", True), bool):
            err("optimizer: {kind, fused, weight_decay}")
    if "parameters" in doc:
        p = doc["parameters"]
        if set(p) != {"elements", "tensors"} or not _num(p["elements"]) or p["elements"] < 0 \
                or not isinstance(p["tensors"], int) or p["tensors"] < 0:
            err("parameters: {elements >= 0, tensors integer >= 0}")
    if "memory" in doc:
        m = doc["memory"]
        need = {"parameters_bytes", "gradients_bytes", "optimizer_state_bytes", "peak_bytes", "method"}
        if set(m) != need:
            err(f"memory: fields {sorted(set(m) ^ need)}")
        for key in need - {"method"}:
            if key in m and (not _num(m[key]) or m[key] < 0):
                err(f"memory.{key}: must be >= 0")
        if not isinstance(m.get("method"), str) or not m.get("method"):
            err("memory.method: must say how")
    if "model_code" in doc:
        c = doc["model_code"]
        if not isinstance(c, dict) or set(c) != {"fastest_reference_seconds", "timed_reference_seconds", "method"} \
                or not _num(c["fastest_reference_seconds"]) or c["fastest_reference_seconds"] <= 0 \
                or not _num(c["timed_reference_seconds"]) or c["timed_reference_seconds"] < c["fastest_reference_seconds"] \
                or not isinstance(c["method"], str) or not c["method"]:
            err("model_code: {fastest_reference_seconds > 0, timed_reference_seconds >= it, method saying how}")
    kernels = doc.get("kernels")
    if not isinstance(kernels, list) or not kernels:
        err("kernels: at least one kernel")
        return out
    last_phase = 0
    marker_seen = {ph: False for ph in PHASES}
    for i, k in enumerate(kernels):
        p = f"kernels[{i}]"
        for key in k:
            if key not in KERNEL:
                err(f"{p}.{key}: unknown field")
        for key in ("op", "kind", "phase", "layer"):
            if not isinstance(k.get(key), str):
                err(f"{p}.{key}: required string")
        if not k.get("op"):
            err(f"{p}.op: empty")
        if k.get("kind") not in KINDS:
            err(f"{p}.kind: {k.get('kind')!r}")
        if k.get("phase") not in PHASES:
            err(f"{p}.phase: {k.get('phase')!r}")
            continue
        if mode == "inference" and k["phase"] != "forward":
            err(f"{p}.phase: {k['phase']} in an inference IR")
        # issue order: forward, then backward, then optimizer
        ph = PHASES.index(k["phase"])
        if ph < last_phase:
            err(f"{p}.phase: {k['phase']} after {PHASES[last_phase]}")
        last_phase = max(last_phase, ph)
        if k.get("dtype", "float32") not in DTYPES:
            err(f"{p}.dtype: {k['dtype']!r}")
        if k.get("unit", "fp32") not in UNITS:
            err(f"{p}.unit: {k['unit']!r}")
        for key in ("flops", "bytes_read", "bytes_written"):
            if key in k and (not _num(k[key]) or k[key] < 0):
                err(f"{p}.{key}: must be a number >= 0")
        if "host_dispatch" in k and not isinstance(k["host_dispatch"], bool):
            err(f"{p}.host_dispatch: must be a bool")
        if "sync" in k and (not isinstance(k["sync"], bool) or k.get("kind") != "host-only"):
            err(f"{p}.sync: a bool, on host-only kernels only")
        if "mixed_dtypes" in k and (not isinstance(k["mixed_dtypes"], bool) or k.get("kind") != "elementwise"):
            err(f"{p}.mixed_dtypes: a bool, on elementwise kernels only")
        if "strided" in k and (not isinstance(k["strided"], bool) or k.get("kind") != "elementwise"):
            err(f"{p}.strided: a bool, on elementwise kernels only")
        for key in ("host_op", "source_op", "flag", "args"):
            if key in k and not isinstance(k[key], str):
                err(f"{p}.{key}: must be a string")
        if k.get("kind") == "unknown" and not k.get("flag"):
            err(f"{p}.flag: required on unknown kernels")
        if "python_seconds" in k and (not _num(k["python_seconds"]) or k["python_seconds"] < 0
                                      or k.get("kind") != "host-only"):
            err(f"{p}.python_seconds: a number >= 0, on host-only kernels only")
        if k.get("kind") == "host-only":
            if k.get("flops", 0) or k.get("bytes_read", 0) or k.get("bytes_written", 0):
                err(f"{p}: host-only kernels do no GPU work")
            if k.get("host_op"):
                marker_seen[k["phase"]] = True
        if k.get("host_dispatch") is False and k.get("kind") != "host-only" and not marker_seen[k["phase"]]:
            err(f"{p}.host_dispatch: false with no host-only marker before it in its phase")
        shapes = [s for s in ("gemm", "conv", "attention", "norm") if s in k]
        allowed = {"norm": ("normalization", "reduction")}
        if len(shapes) > 1 or (shapes and k.get("kind") not in allowed.get(shapes[0], (shapes[0],))):
            err(f"{p}: shape object does not match the kind")
        if "norm" in k:
            nd = k["norm"]
            if set(nd) != {"groups", "group_elements"} or not all(_pos_int(v) for v in nd.values()):
                err(f"{p}.norm: groups and group_elements, positive integers")
        if "gemm" in k:
            g = k["gemm"]
            if set(g) - {"m", "n", "k", "batch", "layout"} or not all(_pos_int(g.get(d, 1)) for d in ("m", "n", "k", "batch")) \
                    or not all(d in g for d in ("m", "n", "k")):
                err(f"{p}.gemm: m, n, k, batch positive integers")
            if g.get("layout", "NN") not in ("NN", "NT", "TN", "TT"):
                err(f"{p}.gemm.layout: NN, NT, TN or TT")
        if "conv" in k:
            c = k["conv"]
            if set(c) - {"pass", "n", "c", "h", "w", "k", "r", "s", "stride", "padding", "dilation", "groups"}:
                err(f"{p}.conv: unknown field")
            if c.get("pass") not in ("forward", "backward-data", "backward-filter"):
                err(f"{p}.conv.pass")
            for d in ("n", "c", "h", "w", "k", "r", "s"):
                if not _pos_int(c.get(d)):
                    err(f"{p}.conv.{d}: positive integer")
            for d, least in (("stride", 1), ("padding", 0), ("dilation", 1)):
                v = c.get(d, [least, least])
                if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) and x >= least for x in v)):
                    err(f"{p}.conv.{d}: [h, w] of integers >= {least}")
            if not _pos_int(c.get("groups", 1)):
                err(f"{p}.conv.groups")
        if "attention" in k:
            a = k["attention"]
            if set(a) - {"batch", "heads", "seq_q", "seq_kv", "head_dim", "causal", "backend", "backward", "dropout_p"}:
                err(f"{p}.attention: unknown field")
            for d in ("batch", "heads", "seq_q", "seq_kv", "head_dim"):
                if not _pos_int(a.get(d)):
                    err(f"{p}.attention.{d}: positive integer")
            if a.get("backend", "flash") not in ("flash", "efficient", "math", "cudnn"):
                err(f"{p}.attention.backend")
            for d in ("causal", "backward"):
                if d in a and not isinstance(a[d], bool):
                    err(f"{p}.attention.{d}: bool")
            if "dropout_p" in a and not (isinstance(a["dropout_p"], (int, float)) and 0 <= a["dropout_p"] < 1):
                err(f"{p}.attention.dropout_p: a probability below 1")
    return out
