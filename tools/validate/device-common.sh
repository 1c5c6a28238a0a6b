# Sourced by device-validate.sh and device-inference.sh, run from the repository root with the
# GPU key as $1 (default h200-sxm): the shared settings, the output folder, the GPU's state in
# $OUT/env.log, and export_case.
set -u -o pipefail
KEY=${1:-h200-sxm}
OUT=${OUT:-validate-out}
PY=${PYTHON:-python3}
DATE=$(date -u +%Y-%m-%d)
TORCH=$("$PY" -c "import torch; print('.'.join(torch.__version__.split('+')[0].split('.')[:2]))")
mkdir -p "$OUT/exported"
start=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/env.log"

# export_case CASE_FILE_STEM MODEL ARGS...: the IR of one case exported with tools/roofsim_export to
# $OUT/exported/CASE_FILE_STEM.json (its log beside it); prints the exit status and wall time.
export_case() {
  local stem=$1; shift
  local t0=$SECONDS
  PYTHONPATH="$PWD/tools${PYTHONPATH:+:$PYTHONPATH}" \
    "$PY" -m roofsim_export "$@" --summary -o "$OUT/exported/$stem.json" > "$OUT/exported/$stem.log" 2>&1
  local rc=$?
  echo "$stem: exit $rc, $((SECONDS - t0)) s"
  [ $rc -eq 0 ] || tail -5 "$OUT/exported/$stem.log"
}
