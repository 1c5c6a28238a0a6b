#!/usr/bin/env bash
# On a GPU machine with PyTorch, in one go (host costs and measurements from the same machine): the
# framework profile's inference figures added to a copy of the built-in profile
# (torch_framework_probe.py --add-inference-figures), the inference measurements
# (measure_pytorch.py --mode inference), and the inference IRs of those cases exported with
# tools/roofsim_export --mode inference, named after their case ids. Everything goes to $OUT.
# Usage (from the repository root): tools/validate/device-inference.sh [gpu-key]   (default h200-sxm)
# Then: roofsim validate --measurements OUT/<gpu>-<date>-inference.json \
#         --framework OUT/<gpu>-torch-<v>.json --exported OUT/exported
source "$(dirname "${BASH_SOURCE[0]}")/device-common.sh" "$@"

echo "=== framework profile: inference figures ==="
"$PY" calibrate/torch_framework_probe.py --add-inference-figures "data/framework/$KEY-torch-$TORCH.json" \
  --out "$OUT/$KEY-torch-$TORCH.json" 2>&1 | tail -12
echo "=== inference measurements ($((SECONDS - start)) s) ==="
"$PY" tools/validate/measure_pytorch.py --mode inference --gpu-key "$KEY" --time-budget-s "${VALIDATE_BUDGET_S:-150}" \
  --out "$OUT/$KEY-$DATE-inference.json" 2>&1 | grep -vE "^\[ *[0-9.]+ s\]   " | tail -24

[ "${EXPORT:-1}" = 1 ] || exit 0
echo "=== exported inference IRs ($((SECONDS - start)) s) ==="
for p in fp32 amp-bf16; do
  export_case "vit-b-16_b1x224_${p}_inference" torchvision:vit_b_16 --batch 1 --precision $p --mode inference
  export_case "vit-b-16_b256x224_${p}_inference" torchvision:vit_b_16 --batch 256 --precision $p --mode inference
  export_case "resnet50_b1x224_${p}_inference" torchvision:resnet50 --batch 1 --precision $p --mode inference
  export_case "resnet50_b256x224_${p}_inference" torchvision:resnet50 --batch 256 --precision $p --mode inference
done
echo "total wall $((SECONDS - start)) s"
