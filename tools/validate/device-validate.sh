#!/usr/bin/env bash
# On a GPU machine with PyTorch, in one go (host costs and measurements must come from the same
# machine): the framework profile (calibrate/torch_framework_probe.py), the validation measurements
# (tools/validate/measure_pytorch.py), and the kernel IRs of the validation models exported with
# tools/roofsim_export, named after their case ids. Everything goes to $OUT (default ./validate-out).
# Usage (from the repository root): tools/validate/device-validate.sh [gpu-key]   (default h200-sxm)
# Then: roofsim validate --measurements OUT/<gpu>-<date>.json --framework OUT/<gpu>-torch-<v>.json \
#         --exported OUT/exported
source "$(dirname "${BASH_SOURCE[0]}")/device-common.sh" "$@"
"$PY" -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/env.log"

echo "=== framework profile ==="
"$PY" calibrate/torch_framework_probe.py --gpu-key "$KEY" --out "$OUT/$KEY-torch-$TORCH.json" 2>&1 | tail -20
echo "=== validation measurements ==="
"$PY" tools/validate/measure_pytorch.py --gpu-key "$KEY" --time-budget-s "${VALIDATE_BUDGET_S:-300}" \
  --out "$OUT/$KEY-$DATE.json" 2>&1 | grep -vE "^\[ *[0-9.]+ s\]   " | tail -40

echo "=== exported IRs of the model cases ==="
export_case resnet50_b32x224_amp-bf16 torchvision:resnet50 --batch 32 --precision amp-bf16 --optimizer sgd
export_case resnet50_b128x224_amp-bf16 torchvision:resnet50 --batch 128 --precision amp-bf16 --optimizer sgd
export_case resnet50_b64x224_fp32 torchvision:resnet50 --batch 64 --precision fp32 --optimizer sgd
export_case bert-base_b32xs128_amp-bf16 transformers:bert --batch 32 --seq-len 128 --precision amp-bf16 --optimizer adamw
export_case bert-base_b128xs128_amp-bf16 transformers:bert --batch 128 --seq-len 128 --precision amp-bf16 --optimizer adamw
export_case gpt2-small_b4xs1024_amp-bf16 transformers:gpt2 --batch 4 --seq-len 1024 --precision amp-bf16 --optimizer adamw
export_case gpt2-small_b16xs1024_amp-bf16 transformers:gpt2 --batch 16 --seq-len 1024 --precision amp-bf16 --optimizer adamw
export_case vit-b-16_b32x224_amp-bf16 torchvision:vit_b_16 --batch 32 --precision amp-bf16 --optimizer adamw
export_case vit-b-16_b128x224_amp-bf16 torchvision:vit_b_16 --batch 128 --precision amp-bf16 --optimizer adamw
echo "total wall $((SECONDS - start)) s"
