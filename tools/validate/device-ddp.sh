#!/usr/bin/env bash
# On a machine with N >= 2 GPUs (NVLink multicast off: NCCL_NVLS_ENABLE=0), in one go: the NCCL
# collective probes of roofsim-calibrate over all N GPUs, then tools/validate/measure_ddp.py under
# torchrun at world size 1 and at world size N (the same script and cases for both), and
# nvidia-smi's link topology. Everything goes to $OUT (default ./ddp-out).
# Usage (from the repository root): tools/validate/device-ddp.sh [gpu-key]   (default h200-sxm)
set -u -o pipefail
KEY=${1:-h200-sxm}
OUT=${OUT:-ddp-out}
BUILD=${BUILD:-/tmp/roofsim-calibrate-build}
PY=${PYTHON:-python3}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
N=$(nvidia-smi -L | wc -l)
DATE=$(date -u +%Y-%m-%d)
mkdir -p "$OUT"
start=$SECONDS
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi -L; nvidia-smi topo -m; } 2>&1 | tee "$OUT/env.log"

if [ "${SKIP_NCCL_PROBE:-0}" != 1 ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DROOFSIM_BUILD_TESTS=OFF -DROOFSIM_BUILD_EXAMPLES=OFF -DROOFSIM_BUILD_BENCHMARKS=OFF \
    -DROOFSIM_BUILD_TOOLS=OFF -DROOFSIM_BUILD_CALIBRATE=ON > "$OUT/build.log" 2>&1 \
    && cmake --build "$BUILD" -j"$(nproc)" --target roofsim-calibrate >> "$OUT/build.log" 2>&1 \
    || { tail -30 "$OUT/build.log"; exit 1; }
  grep -E "roofsim-calibrate:" "$OUT/build.log"
  echo "=== NCCL collectives over $N GPUs ==="
  "$BUILD/calibrate/roofsim-calibrate" --only nccl --gpu-key "$KEY" -o "$OUT/$KEY-x$N-collectives.json" 2>&1 \
    | tee "$OUT/nccl.log" | tail -5
fi
for W in 1 "$N"; do
  echo "=== DDP steps, world size $W ==="
  t0=$SECONDS
  "$PY" -m torch.distributed.run --standalone --nproc_per_node "$W" tools/validate/measure_ddp.py \
    --gpu-key "$KEY" --out "$OUT/$KEY-x$W-$DATE.json" ${DDP_ARGS:-} 2>&1 | tee "$OUT/ddp-x$W.log" | grep -v "^\[.*case "
  echo "world $W: wall $((SECONDS - t0)) s"
done
echo "total wall $((SECONDS - start)) s"
