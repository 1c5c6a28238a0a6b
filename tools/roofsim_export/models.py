"""MODEL references of the command line, input specifications, and the loss of a training step.

  torchvision:NAME          torchvision.models.NAME(weights=None): input x float32[B,3,224,224],
                            targets y int64[B], loss F.cross_entropy(model(x), y)
                            (tools/validate/measure_pytorch.py's ResNet-50 step)
  transformers:TYPE         AutoConfig.for_model(TYPE, **--config) and a model built from it (no
                            download): decoder types as AutoModelForCausalLM with input_ids int64[B,L]
                            and labels=input_ids; encoder types (bert, roberta, ...) as
                            AutoModelForSequenceClassification(num_labels=2) with labels int64[B];
                            the loss is the model's own output.loss (measure_pytorch.py's GPT-2 and
                            BERT steps)
  path/to/file.py:FACTORY   FACTORY(**--config) returns an nn.Module, or (module, inputs dict)
  package.module:FACTORY
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import json
import os
import re
import sys
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from .capture import ExportError
from .precision import parse_dtype

TARGET_NAMES = ("target", "targets", "labels", "label", "y")

# encoder models measure_pytorch.py trains as sequence classifiers (BertForSequenceClassification)
ENCODER_TYPES = {"bert", "roberta", "distilbert", "albert", "electra", "deberta", "deberta-v2", "xlm-roberta",
                 "xlm-roberta-xl", "camembert", "mpnet", "ernie", "funnel", "layoutlm", "megatron-bert",
                 "nystromformer", "roformer", "squeezebert", "xlm", "flaubert", "convbert", "canine", "mobilebert",
                 "modernbert", "data2vec-text", "ibert", "luke", "mra", "nezha", "rembert", "yoso"}


class UsageError(ExportError):
    """A malformed command line (exit code 2)."""


@dataclass
class InputSpec:
    name: str
    dtype: torch.dtype
    shape: list  # ints or symbols "B" / "L"

    def tensor(self, batch: int, seq_len: int) -> torch.Tensor:
        dims = []
        for d in self.shape:
            if isinstance(d, str):
                d = batch if d == "B" else seq_len
            dims.append(int(d))
        return torch.empty(dims, dtype=self.dtype, device="meta")


_INPUT_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=([A-Za-z0-9_]+)\[([^\]]*)\]$")


def parse_input(text: str) -> InputSpec:
    """NAME=DTYPE[SHAPE]: e.g. x=float32[B,3,224,224], y=int64[B], ids=int64[B,L], s=float32[]."""
    m = _INPUT_RE.match(text.replace(" ", ""))
    if not m:
        raise UsageError(f"--input '{text}': expected NAME=DTYPE[SHAPE], e.g. x=float32[B,3,224,224]")
    name, dtype_text, dims_text = m.groups()
    try:
        dtype = parse_dtype(dtype_text)
    except ValueError as exc:
        raise UsageError(f"--input '{text}': {exc}") from None
    shape = []
    for d in filter(None, dims_text.split(",")):
        key = d.lower()
        if key in ("b", "batch"):
            shape.append("B")
        elif key in ("l", "seq", "seq_len", "seqlen"):
            shape.append("L")
        elif d.isdigit() and int(d) > 0:
            shape.append(int(d))
        else:
            raise UsageError(f"--input '{text}': dimension '{d}' is neither a positive integer nor B / L")
    return InputSpec(name, dtype, shape)


def parse_config(items) -> dict:
    """KEY=VALUE pairs; values are JSON where they parse (2, 0.1, true, [3, 3]), else strings."""
    out = {}
    for item in items or []:
        if "=" not in item:
            raise UsageError(f"--config '{item}': expected KEY=VALUE")
        key, value = item.split("=", 1)
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


@dataclass
class Built:
    model: nn.Module
    inputs: dict                       # name -> tensor (meta or real: only shape, strides, dtype are used)
    loss_fn: object                    # loss_fn(model, inputs) -> scalar
    name: str
    description: str
    default_optimizer: str = "sgd"
    notes: list = field(default_factory=list)
    highs: dict = field(default_factory=dict)  # integer inputs: values in [0, high) (for real runs)
    forward_fn: object = None                   # inference: forward_fn(model, inputs without targets) -> output
    targets: list = field(default_factory=list)  # the inputs only the loss takes (dropped in inference)


# ---------------------------------------------------------------------------------------------
# the loss of a generic model

def first_tensor(out):
    """The logits of a model output: a tensor, the first tensor of a tuple, `.logits` or the first value."""
    if isinstance(out, torch.Tensor):
        return out
    logits = getattr(out, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    if isinstance(out, dict):
        if isinstance(out.get("logits"), torch.Tensor):
            return out["logits"]
        values = list(out.values())
    elif isinstance(out, (list, tuple)):
        values = list(out)
    else:
        values = []
    for v in values:
        t = first_tensor(v) if not isinstance(v, torch.Tensor) else v
        if isinstance(t, torch.Tensor):
            return t
    raise ExportError(f"the model's output ({type(out).__name__}) holds no tensor to compute a loss from")


def model_loss(out, targets: dict):
    """cross_entropy(logits, target) when a target is given, else the model's own .loss, else
    output.float().sum()."""
    if targets:
        target = next(iter(targets.values()))
        logits = first_tensor(out)
        if logits.dim() > 2 and tuple(target.shape) == tuple(logits.shape[:-1]):
            logits = logits.reshape(-1, logits.shape[-1])  # [B, L, V] language-model logits
            target = target.reshape(-1)
        return F.cross_entropy(logits, target)
    loss = getattr(out, "loss", None)
    if loss is None and isinstance(out, dict):
        loss = out.get("loss")
    if isinstance(loss, torch.Tensor):
        return loss
    return first_tensor(out).float().sum()


def call_model(model: nn.Module, inputs: dict):
    """Keyword arguments when every name is a parameter of forward (or forward takes **kwargs),
    else positional arguments in the given order."""
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        params = {}
    var_kw = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values())
    if inputs and (var_kw or all(n in params for n in inputs)):
        return model(**inputs)
    return model(*inputs.values())


def generic_loss_fn(target_names):
    def loss_fn(model, inputs):
        targets = {k: v for k, v in inputs.items() if k in target_names}
        args = {k: v for k, v in inputs.items() if k not in target_names}
        return model_loss(call_model(model, args), targets)
    return loss_fn


def split_targets(names, explicit=None):
    if explicit is not None:
        return [n for n in names if n in explicit]
    return [n for n in names if n in TARGET_NAMES]


# ---------------------------------------------------------------------------------------------

def meta_device(enabled: bool = True):
    """`with torch.device('meta'):` where torch has it (2.0+): builds a model without memory or
    initialization time; elsewhere (or when not enabled) a no-op: the model is built on the CPU."""
    device = torch.device("meta")
    return device if enabled and hasattr(device, "__enter__") else contextlib.nullcontext()


def build_torchvision(name: str, batch: int, config: dict, inputs: list, meta: bool = True) -> Built:
    try:
        import torchvision
    except Exception as exc:
        raise ExportError(f"torchvision is not available ({exc})") from None
    target = torchvision.models
    for part in name.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise UsageError(f"torchvision.models has no model '{name}'")
    if not callable(target):
        raise UsageError(f"torchvision.models.{name} is not a model constructor")
    try:
        with meta_device(meta):
            try:
                model = target(weights=None, **config)
            except TypeError:
                model = target(**config)
    except Exception as exc:
        raise ExportError(f"cannot build torchvision.models.{name}({_kw(config)}): {exc}") from None
    num_classes = int(config.get("num_classes", 1000))
    given = {s.name: s for s in inputs}
    x = given.pop("x", InputSpec("x", torch.float32, ["B", 3, 224, 224]))
    y = given.pop("y", InputSpec("y", torch.int64, ["B"]))
    specs = [x] + list(given.values()) + [y]
    tensors = {s.name: s.tensor(batch, 0) for s in specs}

    def forward_fn(model, d):
        return model(d["x"], *[d[s.name] for s in specs[1:-1]])

    def loss_fn(model, d):
        return F.cross_entropy(first_tensor(forward_fn(model, d)), d["y"])

    cls = type(model)
    return Built(model, tensors, loss_fn, name, f"{cls.__module__}.{cls.__qualname__}", "sgd",
                 [f"cross_entropy over {num_classes} classes"], {"y": num_classes}, forward_fn, ["y"])


def build_transformers(model_type: str, batch: int, seq_len: int, config: dict, inputs: list,
                       task: str = "auto", meta: bool = True) -> Built:
    try:
        import transformers
    except Exception as exc:
        raise ExportError(f"transformers is not available ({exc})") from None
    config = dict(config)
    try:
        if hasattr(transformers.AutoConfig, "for_model"):
            cfg = transformers.AutoConfig.for_model(model_type, **config)
        else:
            cfg = transformers.CONFIG_MAPPING[model_type](**config)
    except Exception as exc:
        raise UsageError(f"transformers has no model type '{model_type}' ({_first_line(exc)})") from None
    if task == "auto":
        task = "sequence-classification" if model_type in ENCODER_TYPES else "causal-lm"
    if task == "causal-lm":
        if hasattr(cfg, "use_cache") and "use_cache" not in config:
            cfg.use_cache = False
        cls = transformers.AutoModelForCausalLM
    elif task == "sequence-classification":
        if "num_labels" not in config:
            cfg.num_labels = 2
        cls = transformers.AutoModelForSequenceClassification
    else:
        raise UsageError(f"--task '{task}': expected auto, causal-lm or sequence-classification")
    notes, attempts = [], []
    model = None
    for where in ("meta", "cpu") if meta else ("cpu",):  # meta: no memory, no initialization
        for how in ("attn_implementation='sdpa'", "default attention"):
            try:
                with meta_device() if where == "meta" else contextlib.nullcontext():
                    if how.startswith("attn"):
                        model = cls.from_config(cfg, attn_implementation="sdpa")
                    else:
                        model = cls.from_config(cfg)
                notes.append(how)
                break
            except Exception as exc:  # an API this transformers version lacks: try the next spelling
                attempts.append(f"{where}, {how}: {_first_line(exc)}")
        if model is not None:
            break
    if model is None:
        raise ExportError(f"cannot build {cls.__name__} for '{model_type}': " + " | ".join(attempts))
    # warning-only checks that read token values (`pad_token_id in input_ids`) cannot run on fake tensors
    for m in model.modules():
        if hasattr(type(m), "warn_if_padding_and_no_attention_mask"):
            m.warn_if_padding_and_no_attention_mask = lambda *a, **k: None
    vocab = int(getattr(cfg, "vocab_size", 0) or 0)
    given = {s.name: s for s in inputs}
    ids = given.pop("input_ids", InputSpec("input_ids", torch.int64, ["B", "L"]))
    specs = [ids]
    if task == "causal-lm":
        loss_names = None
    else:
        specs.append(given.pop("labels", InputSpec("labels", torch.int64, ["B"])))
        loss_names = "labels"
    specs.extend(given.values())
    tensors = {s.name: s.tensor(batch, seq_len) for s in specs}

    def loss_fn(model, d):
        kwargs = dict(d)
        if loss_names is None:
            kwargs["labels"] = d["input_ids"]  # next-token loss, as measure_pytorch.py's GPT-2 step
        return model(**kwargs).loss

    def forward_fn(model, d):  # inference: the logits, no labels, no loss
        return model(**d)

    name = f"{model_type}"
    mcls = type(model)
    notes.append(f"vocab {vocab}, {task}")
    highs = {"input_ids": vocab or 2, "labels": int(getattr(cfg, "num_labels", 2) or 2)}
    return Built(model, tensors, loss_fn, name, f"{mcls.__module__}.{mcls.__qualname__}", "adamw", notes, highs,
                 forward_fn, [n for n in tensors if n == "labels"])


def load_factory(ref: str):
    path, _, attr = ref.rpartition(":")
    if path.endswith(".py") or os.sep in path or "/" in path:
        if not os.path.isfile(path):
            raise UsageError(f"MODEL '{ref}': no file '{path}'")
        mod_name = "roofsim_user_model_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
        spec = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        folder = os.path.dirname(os.path.abspath(path))
        sys.path.insert(0, folder)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise ExportError(f"cannot import '{path}': {type(exc).__name__}: {_first_line(exc)}") from None
        finally:
            with contextlib.suppress(ValueError):
                sys.path.remove(folder)
    else:
        try:
            module = importlib.import_module(path)
        except Exception as exc:
            raise UsageError(f"MODEL '{ref}': cannot import module '{path}' ({_first_line(exc)})") from None
    factory = getattr(module, attr, None)
    if factory is None:
        raise UsageError(f"MODEL '{ref}': '{path}' has no attribute '{attr}'")
    return factory


def build_factory(ref: str, batch: int | None, seq_len: int, config: dict, inputs: list) -> Built:
    factory = load_factory(ref)
    try:
        made = factory(**config) if callable(factory) and not isinstance(factory, nn.Module) else factory
    except Exception as exc:
        raise ExportError(f"{ref}({_kw(config)}) failed: {type(exc).__name__}: {_first_line(exc)}") from None
    example = {}
    if isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], nn.Module):
        made, example = made
        if not isinstance(example, dict):
            raise ExportError(f"{ref} returned (module, {type(example).__name__}): expected (module, dict of inputs)")
    if not isinstance(made, nn.Module):
        raise ExportError(f"{ref} returned {type(made).__name__}: expected an nn.Module or (module, inputs dict)")
    tensors = {}
    for k, v in example.items():
        if isinstance(v, torch.Tensor):
            tensors[k] = v
        elif isinstance(v, str):
            tensors[k] = parse_input(f"{k}={v}")
        else:
            raise ExportError(f"{ref}: example input '{k}' is a {type(v).__name__}, expected a tensor")
    for s in inputs:
        tensors[s.name] = s
    if not tensors:
        raise UsageError(f"MODEL '{ref}' returned no example inputs: give them with --input NAME=DTYPE[SHAPE]")
    if batch is None:
        first = next(iter(tensors.values()))
        batch = int(first.shape[0]) if isinstance(first, torch.Tensor) and first.dim() else 1
    tensors = {k: (v.tensor(batch, seq_len) if isinstance(v, InputSpec) else v) for k, v in tensors.items()}
    cls = type(made)
    targets = split_targets(list(tensors))
    notes = [f"loss cross_entropy(output, {targets[0]})" if targets else
             "loss output.loss if the output has one, else output.float().sum()"]
    return Built(made, tensors, generic_loss_fn(targets), ref.rpartition(":")[2],
                 f"{cls.__module__}.{cls.__qualname__}", "sgd", notes, forward_fn=call_model, targets=targets)


def resolve_batch(built_inputs: dict) -> int:
    for v in built_inputs.values():
        if isinstance(v, torch.Tensor) and v.dim():
            return int(v.shape[0])
    return 1


def build(ref: str, *, batch: int | None, seq_len: int | None, config: dict, inputs: list,
          task: str = "auto", meta: bool = True) -> Built:
    kind, _, name = ref.partition(":")
    if not name:
        raise UsageError(f"MODEL '{ref}': expected torchvision:NAME, transformers:TYPE, file.py:FACTORY or "
                         f"package.module:FACTORY")
    if kind == "torchvision":
        return build_torchvision(name, batch or 32, config, inputs, meta)
    if kind == "transformers":
        return build_transformers(name, batch or 32, seq_len or 128, config, inputs, task, meta)
    return build_factory(ref, batch, seq_len or 128, config, inputs)


def _kw(config: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in config.items())


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
