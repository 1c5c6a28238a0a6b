#!/usr/bin/env bash
# Builds roofsim-calibrate for Hopper (sm_90) on the GPU machine and runs, in this order:
# --list, the full calibration, the quick calibration, and compute-sanitizer memcheck on the quick
# run. Profiles and logs go to $OUT (default ./calibrate-out). SKIP_SANITIZER=1 leaves out the
# memcheck run (it takes minutes now that the sweeps capture CUDA graphs of up to 200 library calls).
# Usage (from the repository root): scripts/device-calibrate.sh [gpu-key]   (default gpu-key: h200-sxm)
set -u -o pipefail
KEY=${1:-h200-sxm}
OUT=${OUT:-calibrate-out}
BUILD=${BUILD:-/tmp/roofsim-calibrate-build}
mkdir -p "$OUT"
start=$SECONDS

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv
  nvcc --version | tail -1
  cmake --version | head -1
  echo "cuDNN / NCCL known to the loader:"
  ldconfig -p | grep -E "cudnn|nccl" || echo "  (none)"
} 2>&1 | tee "$OUT/env.log"

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DROOFSIM_BUILD_TESTS=OFF -DROOFSIM_BUILD_EXAMPLES=OFF -DROOFSIM_BUILD_BENCHMARKS=OFF \
  -DROOFSIM_BUILD_TOOLS=OFF -DROOFSIM_BUILD_CALIBRATE=ON > "$OUT/build.log" 2>&1 \
  && cmake --build "$BUILD" -j"$(nproc)" --target roofsim-calibrate >> "$OUT/build.log" 2>&1
rc=$?
grep -E "roofsim-calibrate:|error" "$OUT/build.log"
if [ $rc -ne 0 ]; then tail -40 "$OUT/build.log"; exit $rc; fi
BIN="$BUILD/calibrate/roofsim-calibrate"
echo "tensor instructions in the binary (SASS):" | tee -a "$OUT/env.log"
cuobjdump --dump-sass "$BIN" 2>/dev/null | grep -oE "\b(HMMA|IMMA|QMMA|HGMMA|DMMA|FFMA|DFMA|HFMA2)[.A-Z0-9]*" | sort | uniq -c | sort -rn | head -20 | tee -a "$OUT/env.log"

"$BIN" --list

echo "=== full calibration ==="
t0=$SECONDS
"$BIN" --gpu-key "$KEY" -o "$OUT/$KEY.json" 2>&1 | tee "$OUT/full.log"
echo "full: exit ${PIPESTATUS[0]}, wall $((SECONDS - t0)) s" | tee -a "$OUT/full.log"

echo "=== quick calibration ==="
t0=$SECONDS
"$BIN" --quick --gpu-key "$KEY" -o "$OUT/$KEY-quick.json" 2>&1 | tee "$OUT/quick.log"
echo "quick: exit ${PIPESTATUS[0]}, wall $((SECONDS - t0)) s" | tee -a "$OUT/quick.log"

if [ "${SKIP_SANITIZER:-0}" = 1 ]; then echo "sanitizer: skipped (SKIP_SANITIZER=1), wall $((SECONDS - start)) s total"; exit 0; fi
echo "=== compute-sanitizer --tool memcheck on the quick run ==="
left=$(( ${SANITIZER_BUDGET_S:-560} - (SECONDS - start) ))
if [ $left -lt 30 ]; then left=30; fi
timeout "$left" compute-sanitizer --tool memcheck --print-limit 50 "$BIN" --quick -q --timeout-scale 1000 \
  --gpu-key "$KEY" -o /tmp/sanitizer-profile.json > "$OUT/sanitizer.log" 2>&1
src=$?
echo "sanitizer: exit $src (124 = stopped by the ${left} s limit), wall $((SECONDS - start)) s total" | tee -a "$OUT/sanitizer.log"
grep -E "ERROR SUMMARY|Invalid|=========" "$OUT/sanitizer.log" | head -20
tail -5 "$OUT/sanitizer.log"
