set -u
PY=/opt/torch/.venv/bin/python3
mkdir -p $OUT/r
S=$SECONDS
{ nvidia-smi --query-gpu=name,driver_version --format=csv; lscpu | grep -E "Model name|^CPU\(s\)"; date -u; } > $OUT/r/env.txt 2>&1
$PY calibrate/torch_framework_probe.py --gpu-key h200-sxm --out $OUT/r/h200-sxm-torch-2.11.json > $OUT/r/probe.log 2>&1; echo "probe rc $? at $((SECONDS-S))s" >> $OUT/r/env.txt
B=$(( 450 - (SECONDS - S) )); [ $B -gt 200 ] && B=200; [ $B -lt 40 ] && B=40
echo "measure budget $B" >> $OUT/r/env.txt
$PY tools/validate/measure_pytorch.py --gpu-key h200-sxm --time-budget-s $B --out $OUT/r/h200-sxm-$(date -u +%Y-%m-%d).json > $OUT/r/measure.log 2>&1; echo "measure rc $? at $((SECONDS-S))s" >> $OUT/r/env.txt
if [ $((SECONDS-S)) -lt 400 ]; then timeout $(( 500 - (SECONDS-S) )) $PY tools/validate/step_parts.py --out $OUT/r/step-parts.json > $OUT/r/step_parts.log 2>&1; echo "step_parts rc $? at $((SECONDS-S))s" >> $OUT/r/env.txt; fi
date -u >> $OUT/r/env.txt
tar czf $OUT/x.tgz -C $OUT r
