"""Each built-in model's parameter count (`roofsim models --json`) against PyTorch's own count of the
module its graph follows: torchvision's models always, transformers' where it is installed.

Usage: python3 tests/zoo/check_parameters.py ROOFSIM_EXECUTABLE
"""
import json
import subprocess
import sys

import torch  # noqa: F401  (torchvision needs it first)
import torchvision


def pytorch_counts():
    counts = {
        "resnet50": torchvision.models.resnet50(),
        "vgg16": torchvision.models.vgg16(),
    }
    try:
        import transformers
    except ImportError:
        print("transformers not installed: bert-base, gpt2-small and gpt2-medium not checked")
    else:
        counts["bert-base"] = transformers.BertForSequenceClassification(transformers.BertConfig(num_labels=2))
        counts["gpt2-small"] = transformers.GPT2LMHeadModel(transformers.GPT2Config())
        counts["gpt2-medium"] = transformers.GPT2LMHeadModel(
            transformers.GPT2Config(n_layer=24, n_embd=1024, n_head=16))
    # parameters(): a tied weight (GPT-2's LM head) counts once, as roofsim counts it
    return {name: sum(p.numel() for p in module.parameters()) for name, module in counts.items()}


def main(roofsim):
    listed = json.loads(subprocess.run([roofsim, "models", "--json"], check=True, capture_output=True, text=True).stdout)
    assert listed["kind"] == "roofsim-models", listed["kind"]
    ours = {m["name"]: m["parameters"] for m in listed["models"]}
    failures = []
    for name, count in pytorch_counts().items():
        print(f"{name}: PyTorch {count}, roofsim {ours.get(name)}")
        if ours.get(name) != count:
            failures.append(name)
    if failures:
        print("FAIL: parameter counts differ: " + ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
