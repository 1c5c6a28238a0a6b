#!/usr/bin/env bash
# CPU smoke test of the PyTorch measurement scripts:
#   tools/validate/measure_pytorch.py, tools/validate/measure_ddp.py (two processes over gloo) and
#   calibrate/torch_framework_probe.py,
# each run with --device cpu --smoke into a temporary folder, then the JSON is checked
# (parses, required keys, positive finite times, every case measured or skipped with a reason).
# Skips (exit 0, prints "skipped: no torch") when no Python here can import torch.
# Python: $PYTHON if set, else the first of python3, /usr/bin/python3 that imports torch.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

py=""
for candidate in ${PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import torch' >/dev/null 2>&1; then
        py=$candidate
        break
    fi
done
if [ -z "$py" ]; then
    echo "skipped: no torch"
    exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() {  # run NAME CMD...: show the log only when the command fails
    local name=$1
    shift
    if ! "$@" >"$tmp/$name.log" 2>&1; then
        cat "$tmp/$name.log"
        echo "FAIL: $name exited non-zero"
        echo "0 passed, 1 failed"
        exit 1
    fi
}

run measure_pytorch "$py" "$root/tools/validate/measure_pytorch.py" --device cpu --smoke --layer-rounds 2 \
    --model-rounds 2 --out "$tmp/out/validation.json"
"$py" "$root/tools/validate/measure_pytorch.py" --smoke --list >"$tmp/ids.txt"
run torch_framework_probe "$py" "$root/calibrate/torch_framework_probe.py" --device cpu --smoke \
    --out "$tmp/out/framework.json"
run torch_framework_probe_layer_ops "$py" "$root/calibrate/torch_framework_probe.py" --device cpu \
    --layer-ops "$tmp/out/layer-ops.json"

if ! "$py" - "$tmp/out/validation.json" "$tmp/out/framework.json" "$tmp/ids.txt" "$tmp/out/layer-ops.json" <<'PYEOF'
import json, math, os, sys

validation_path, framework_path, ids_path, layer_ops_path = sys.argv[1:5]
failures = []

def check(cond, what):
    if not cond:
        failures.append(what)

def timing_ok(t):
    return (isinstance(t, dict) and t.get("samples", 0) >= 1
            and all(isinstance(t.get(k), float) and math.isfinite(t[k]) and t[k] > 0
                    for k in ("median", "min", "max"))
            and t["min"] <= t["median"] <= t["max"])

with open(validation_path) as f:
    v = json.load(f)
for key in ("schema_version", "kind", "gpu", "software", "date_utc", "command", "method",
            "layer_cases", "model_cases", "skipped"):
    check(key in v, f"validation: missing top-level key {key!r}")
check(v.get("kind") == "roofsim-validation", "validation: kind")
check(v.get("complete") is True, "validation: complete is not true")
for key in ("name", "key", "sm_count", "memory_bytes", "compute_capability"):
    check(key in v.get("gpu", {}), f"validation: gpu.{key} missing")
for key in ("torch", "cuda", "cudnn", "python", "torchvision", "transformers"):
    check(key in v.get("software", {}), f"validation: software.{key} missing")
layers, models, skipped = v.get("layer_cases", []), v.get("model_cases", []), v.get("skipped", [])
check(len(layers) >= 20, f"validation: only {len(layers)} layer cases measured")
check(len(models) >= 1, "validation: no model case measured (the torch-only mlp should run)")
for c in layers:
    for key in ("id", "op", "precision", "params", "inputs", "output", "precision_settings",
                "peak_memory_bytes", "baseline_memory_bytes"):
        check(key in c, f"layer {c.get('id')}: missing {key!r}")
    for key in ("forward_seconds", "forward_backward_seconds", "forward_backward_steady_seconds"):
        check(timing_ok(c.get(key)), f"layer {c.get('id')}: bad {key}")
    check(isinstance(c.get("steady_repetitions"), int) and c["steady_repetitions"] >= 4,
          f"layer {c.get('id')}: steady_repetitions")
    steady, canary = c.get("forward_backward_steady_seconds", {}), c.get("host_canary_seconds", {})
    check(c.get("steady_rounds") == 2, f"layer {c.get('id')}: steady_rounds is not 2 (--layer-rounds 2)")
    check(len(steady.get("values", [])) == steady.get("samples") == canary.get("samples")
          and steady.get("samples", 0) % 2 == 0,
          f"layer {c.get('id')}: steady samples of both rounds, a canary for each")
for c in models:
    for key in ("id", "model", "batch", "precision", "optimizer_info", "parameter_count", "peak_memory_bytes"):
        check(key in c, f"model {c.get('id')}: missing {key!r}")
    for key in ("step_seconds", "forward_seconds", "forward_backward_seconds", "optimizer_seconds"):
        check(timing_ok(c.get(key)), f"model {c.get('id')}: bad {key}")
        check(len(c.get(key, {}).get("values", [])) == c.get(key, {}).get("samples"),
              f"model {c.get('id')}: {key} keeps a value per sample")
    check(c.get("rounds") == 2, f"model {c.get('id')}: rounds is not 2 (--model-rounds 2)")
    check(len(c.get("round_samples", [])) == c.get("rounds")
          and sum(c.get("round_samples", [])) == c.get("step_seconds", {}).get("samples"),
          f"model {c.get('id')}: round_samples is not one count per round, summing to the step's samples")
    check(timing_ok(c.get("host_canary_seconds")), f"model {c.get('id')}: bad host_canary_seconds")
for s in skipped:
    check(s.get("id") and s.get("reason"), f"skipped entry without id or reason: {s}")
with open(ids_path) as f:
    listed = [line.strip() for line in f if line.strip()]
seen = [c["id"] for c in layers + models] + [s["id"] for s in skipped]
check(sorted(seen) == sorted(listed), "validation: measured + skipped ids differ from --list")

with open(framework_path) as f:
    fw = json.load(f)
for key in ("schema_version", "kind", "device", "software", "date_utc", "command", "figures"):
    check(key in fw, f"framework: missing top-level key {key!r}")
check(fw.get("kind") == "roofsim-framework-profile", "framework: kind")
figures = fw.get("figures", {})
for key in ("eager_op_add", "eager_op_add_autograd", "backward_node_mul", "optimizer_sgd_foreach_per_param",
            "optimizer_sgd_wd_foreach_cold_per_param", "optimizer_adamw_foreach_cold_per_step",
            "layer_steady_linear", "layer_steady_linear_autocast"):
    check(key in figures, f"framework: figure {key!r} missing")
for key, fig in figures.items():
    check(all(k in fig for k in ("seconds", "min", "max", "samples", "method")), f"framework: {key} fields")
    check(isinstance(fig.get("seconds"), float) and math.isfinite(fig["seconds"]), f"framework: {key} seconds")

# each chain figure carries the ops one more layer of its chain dispatches: a linear layer's forward
# one addmm (and its weight's transpose), its backward two matrix products; a cast one _to_copy
def ops_of(fig, phase):
    return fig.get(phase + "_ops", {}) if isinstance(fig, dict) else {}
with open(layer_ops_path) as f:
    listed_ops = json.load(f).get("figures", {})
for source, table in (("framework", figures), ("--layer-ops", listed_ops)):
    check(ops_of(table.get("layer_forward_linear"), "forward").get("aten::addmm") == 1.0,
          f"{source}: layer_forward_linear's forward_ops lack one aten::addmm: {table.get('layer_forward_linear')}")
    check(ops_of(table.get("layer_backward_linear"), "backward").get("aten::mm") == 2.0,
          f"{source}: layer_backward_linear's backward_ops lack two aten::mm")
    check(ops_of(table.get("layer_forward_cast"), "forward").get("aten::_to_copy") == 1.0,
          f"{source}: layer_forward_cast's forward_ops lack one aten::_to_copy")
for key, fig in listed_ops.items():
    if key in figures and "forward_ops" in fig:
        check(fig["forward_ops"] == figures[key].get("forward_ops"), f"{key}: --layer-ops and the full run differ")

leftovers = [n for n in os.listdir(os.path.dirname(validation_path)) if n.startswith(".tmp-")]
check(not leftovers, f"temporary files left behind: {leftovers}")

for failure in failures:
    print("FAIL:", failure)
print(f"validation: {len(layers)} layer cases, {len(models)} model cases, {len(skipped)} skipped; "
      f"framework: {len(figures)} figures")
sys.exit(1 if failures else 0)
PYEOF
then
    echo "0 passed, 2 failed"
    exit 1
fi

# The probe's reading of optimizer launches (launch_positions), on events shaped as torch.profiler's:
# a step of 0-100 us; a CPU-only step counter (no launch); _foreach_add_ calling its List overload,
# which launches at 30 us; _foreach_mul_ launching at 60 and 70 us; a launch outside the step.
if ! "$py" - "$root/calibrate" <<'PYEOF'
import sys, types
sys.path.insert(0, sys.argv[1])
import torch
import torch_framework_probe as probe

CPU = torch.autograd.DeviceType.CPU
def ev(name, start, end):
    return types.SimpleNamespace(name=name, device_type=CPU, time_range=types.SimpleNamespace(start=start, end=end))
events = [ev("Optimizer.step#AdamW.step", 0.0, 100.0),
          ev("aten::_foreach_add_", 5.0, 10.0),           # the step counters: CPU tensors, no launch
          ev("aten::_foreach_add_", 20.0, 40.0), ev("aten::_foreach_add_", 21.0, 39.0),
          ev("cudaLaunchKernel", 30.0, 31.0),
          ev("aten::_foreach_mul_", 50.0, 80.0), ev("cudaLaunchKernel", 60.0, 61.0), ev("cudaLaunchKernel", 70.0, 71.0),
          ev("cudaLaunchKernel", 120.0, 121.0)]
got = probe.launch_positions(events)
want = [[("aten::_foreach_add_", 0.30), ("aten::_foreach_mul_", 0.60)]]
ok = len(got) == 1 and [n for n, _ in got[0]] == [n for n, _ in want[0]] and \
     all(abs(f - w) < 1e-12 for (_, f), (_, w) in zip(got[0], want[0]))
if not ok:
    print("FAIL: launch_positions:", got, "expected", want)
sys.exit(0 if ok else 1)
PYEOF
then
    echo "2 passed, 1 failed"
    exit 1
fi
# measure_ddp.py as torchrun starts it (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_*), two processes over
# gloo on the CPU: the smoke cases measured (or skipped with a reason), DDP's buckets, the all_reduce sweep.
export MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + RANDOM % 20000)) WORLD_SIZE=2
pids=()
for rank in 0 1; do
    RANK=$rank LOCAL_RANK=$rank timeout 600 "$py" "$root/tools/validate/measure_ddp.py" --device cpu --smoke \
        --warmup 1 --repeats 2 --out "$tmp/out/ddp.json" >"$tmp/ddp-$rank.log" 2>&1 &
    pids+=($!)
done
ddp_ok=1
for pid in "${pids[@]}"; do wait "$pid" || ddp_ok=0; done
if [ $ddp_ok -ne 1 ]; then
    cat "$tmp/ddp-0.log" "$tmp/ddp-1.log"
    echo "FAIL: measure_ddp exited non-zero"
    echo "3 passed, 1 failed"
    exit 1
fi
if ! "$py" - "$tmp/out/ddp.json" <<'PYEOF'
import json, math, sys
d = json.load(open(sys.argv[1]))
failures = []
def check(cond, what):
    if not cond:
        failures.append(what)
check(d.get("kind") == "roofsim-ddp-validation" and d.get("schema_version") == 1, "ddp: kind / schema_version")
check(d.get("complete") is True and d.get("world_size") == 2 and d.get("backend") == "gloo", "ddp: complete, 2 ranks, gloo")
cases, skipped = d.get("model_cases", []), d.get("skipped", [])
check(len(cases) + len(skipped) == 2, "ddp: every smoke case measured or skipped")
check(all(s.get("id") and s.get("reason") for s in skipped), "ddp: a skip without its reason")
check(len(cases) >= 1, "ddp: no case measured (resnet50 needs only torchvision)")
for c in cases:
    step = c.get("step_seconds", {})
    check(len(step.get("values", [])) == 4 and all(math.isfinite(v) and v > 0 for v in step["values"]),
          f"ddp {c.get('id')}: two rounds of 2 steps")
    check(c.get("step_no_sync_seconds", {}).get("median", 0) > 0, f"ddp {c.get('id')}: no_sync step")
    sizes = c.get("ddp", {}).get("buckets", {}).get("rebuilt_bucket_sizes")
    check(isinstance(sizes, str) and sum(int(x) for x in sizes.split(",")) == c.get("gradient_bytes"),
          f"ddp {c.get('id')}: the rebuilt buckets hold every gradient byte")
sweep = d.get("all_reduce", [])
check(len(sweep) >= 5 and sweep[0]["bytes"] == 16 and all(r["seconds"]["median"] > 0 for r in sweep),
      "ddp: the all_reduce sweep from 16 B")
for failure in failures:
    print("FAIL:", failure)
sys.exit(1 if failures else 0)
PYEOF
then
    echo "3 passed, 1 failed"
    exit 1
fi
# measure_max_batch.py needs a GPU's out-of-memory: here it must say so, and its search must bracket and bisect
# (a fake try that trains up to batch 1000)
if ! "$py" - "$root/tools/validate" <<'PYEOF'
import sys
sys.path.insert(0, sys.argv[1])
import measure_max_batch as mb
tried = []
def fake_try(spec, device):
    tried.append(spec["batch"])
    return {"batch": spec["batch"], "ok": spec["batch"] <= 1000, "peak_allocated_bytes": 1, "peak_reserved_bytes": 1, "seconds": 0}
mb.try_batch = fake_try
r = mb.largest_batch("resnet50", 224, "fp32", "sgd", 256, None, lambda text: None)
ok = r["largest_batch"] <= 1000 < r["smallest_failed_batch"] and r["smallest_failed_batch"] - r["largest_batch"] <= 10
r2 = mb.largest_batch("resnet50", 224, "fp32", "sgd", 4096, None, lambda text: None)  # halving down first
ok = ok and r2["largest_batch"] <= 1000 < r2["smallest_failed_batch"] and r2["smallest_failed_batch"] - r2["largest_batch"] <= 10
if not ok:
    print("FAIL: measure_max_batch's search:", r["largest_batch"], r["smallest_failed_batch"], r2["largest_batch"], tried)
sys.exit(0 if ok else 1)
PYEOF
then
    echo "4 passed, 1 failed"
    exit 1
fi
echo "5 passed, 0 failed"
