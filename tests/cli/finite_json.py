#!/usr/bin/env python3
"""Every figure the CLI prints as JSON is a finite number, and non-negative where it is a time, a
byte count, a FLOP count, a rate, a count or a share.

  finite_json.py ROOFSIM

Runs specs, roofline, kernel, predict (the built-in models on several GPUs, training, inference,
data parallel, the largest batch), compare and survey with --json and walks every value. A JSON
writer prints an infinite or NaN double as null, so a null where a number belongs fails too.
"""

import json
import math
import re
import subprocess
import sys

# keys whose numbers cannot be below zero: times, bytes, FLOPs, rates, counts, shares, sizes
NON_NEGATIVE = re.compile(
    r"seconds|_s$|time|bytes|flops|per_second|_rate|bandwidth|gib|count|kernels|share|fraction|batch|gpus|samples|"
    r"parameters|memory|capacity|peak|size|buckets|layers|operators|tensors|efficiency|speedup|ratio|waves|split|tile|"
    r"^m$|^n$|^k$|sm|clock|tdp|watts|l2|ridge|intensity|schema_version")
# keys that may be null: figures a datasheet or a profile does not have
MAY_BE_NULL = re.compile(r"nvlink|fp8|fp64|int8|tf32|fp16|bf16|tensor|l2|tdp|boost|price|source|note|measured|efficiency|"
                         r"ceiling|largest|issue_peak|sm_clock|memory_clock|speedup|ratio|data_parallel|vs_reference")

COMMANDS = [
    ["specs", "--json"],
    ["specs", "--gpu", "h200-sxm", "--json"],
    ["specs", "--gpu", "rtx-3090", "--json"],
    ["roofline", "--json"],
    ["roofline", "--gpu", "a10,l40s,v100-sxm2-32gb,h100-pcie", "--json"],
    ["kernel", "--gpu", "h200-sxm", "--flops", "0", "--bytes", "0", "--json"],
    ["kernel", "--gpu", "rtx-3090", "--flops", "1T", "--bytes", "1GiB", "--unit", "tf32", "--json"],
    ["compare", "--model", "resnet50", "--batch", "16", "--json"],
    ["compare", "--model", "bert-base", "--gpu", "a10,h200-sxm,a40", "--batch", "max", "--precision", "amp-bf16", "--json"],
    ["compare", "--model", "gpt2-small", "--size", "128", "--gpu", "rtx-a6000,h100-sxm", "--mode", "inference", "--json"],
    ["compare", "--model", "resnet50", "--gpu", "a100-80gb-sxm", "--num-gpus", "8", "--batch", "32", "--json"],
    ["survey", "--gpu", "a10,h200-sxm", "--json"],
]
for model, size in (("resnet50", "64"), ("bert-base", "64"), ("gpt2-small", "128"), ("bert-large-squad", "64")):
    for gpu in ("h200-sxm", "a100-40gb-sxm", "rtx-3090", "l40s"):
        COMMANDS.append(["predict", "--model", model, "--size", size, "--gpu", gpu, "--batch", "4", "--json"])
    COMMANDS.append(["predict", "--model", model, "--size", size, "--gpu", "h200-sxm", "--batch", "2", "--mode", "inference",
                     "--precision", "amp-bf16", "--json"])
    COMMANDS.append(["predict", "--model", model, "--size", size, "--gpu", "h200-sxm", "--batch", "4", "--num-gpus", "2",
                     "--optimizer", "adamw", "--json"])
    COMMANDS.append(["predict", "--model", model, "--size", size, "--gpu", "a10", "--batch", "max", "--by-op", "--json"])


def walk(value, path, key, faults):
    """Checks every number under `value`; `key` is the object key it sits under (a list's for its items)."""
    if isinstance(value, dict):
        for k, v in value.items():
            walk(v, path + "/" + k, k.lower(), faults)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            walk(v, path + "/" + str(i), key, faults)
    elif value is None:
        if not MAY_BE_NULL.search(path.lower()):
            faults.append(path + ": null (an infinite or NaN number is written as null)")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            faults.append("%s: %r is not finite" % (path, value))
        elif value < 0 and NON_NEGATIVE.search(key) and "error" not in key:
            faults.append("%s: %r is negative" % (path, value))


def main():
    roofsim = sys.argv[1]
    faults = []
    for argv in COMMANDS:
        done = subprocess.run([roofsim] + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
        line = " ".join(argv)
        if done.returncode != 0:
            faults.append("%s: exit code %d: %s" % (line, done.returncode, done.stderr.decode()[-500:]))
            continue
        # Python's reader takes NaN and Infinity, which strict JSON has not
        doc = json.loads(done.stdout, parse_constant=lambda c: float(c))
        before = len(faults)
        walk(doc, "", "", faults)
        for i in range(before, len(faults)):
            faults[i] = line + ": " + faults[i]
    for f in faults:
        print("FAIL: " + f)
    print("%d commands, %d faults" % (len(COMMANDS), len(faults)))
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
