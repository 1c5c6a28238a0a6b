#!/usr/bin/env python3
"""Diagnostic: the host's speed for eager PyTorch over a process's life, and what changes it.

Not part of a validation run and never read by roofsim: it answers questions about the method
(docs/NOTES.md quotes its output). At each "point" it takes, five times over, the canary of
tools/validate/measure_pytorch.py (200 tiny adds between two synchronizes) and the steady-state
host time of a few layers, forward + backward repeated back to back as measure_pytorch.py's
steady state runs them: the framework probe's tiny instance of each op
(calibrate/torch_framework_probe.py, layer_cases) beside a host-paced validation case of the same op.
Each point reports the medians, in seconds and in canaries.

Phases (--phase, one process each):
  profiler  points before and after one torch.profiler region (CUPTI) around one tiny add, then
            after gc.collect() + torch.cuda.empty_cache(): does profiling leave the process slower?
  groups    the framework probe's host groups of one pass, in its order, a point after each, then
            its GPU-kernel-gap probe (the first to use torch.profiler) and a point after it.
  validation  measure_pytorch.py's layer cases in its order, a point every 20 cases, then after its
            clear_memory: does the validation's own work slow its process down as it goes?
  threads   twenty points a second apart with the tiny linear layer's forward alone (the main
            thread) beside its forward + backward (autograd's device thread too); run it under
            taskset -c N as well, both threads on one CPU.
  imports   points before and after importing torchvision, then transformers (as measure_pytorch.py
            does at its start), then after gc.freeze(): does what a process imported slow it down?
  depth     per-layer host cost over chains of 1 to 256 tiny layers and 1 to 64 ResNet-like blocks:
            does a layer cost more inside a graph a model's depth deep?
  clocks    the GPU's SM clock (nvidia-smi, every 20 ms) while host-paced cases run in steady state,
            against a GPU-bound case and an idle GPU.
  overlap   does the host's issuing overlap the GPU's work? For layer cases and model steps: each
            repetition's parts (zero-grad, forward, backward, optimizer) timed on the host, the loop
            until its last call returns (issue) and until the GPU is done (total); then the same
            loop queued behind a GPU sleep (torch.cuda._sleep), so that the GPU is busy while the host
            issues and then runs the queued kernels back to back: the host's issue time against a busy
            GPU, the GPU's own time (CUDA events), and any part that waits for the GPU (it lasts as
            long as the sleep); and how many launches the queue takes before a launch waits.
  sizes     does an op's host time grow with its shapes? Families of one op and precision from the
            framework probe's tiny size to the validation's, each layer's host issue time queued
            behind a GPU sleep (so the GPU's own time never paces it), in rounds; then, under
            torch.profiler at the end, each one's kernel launches and CUDA API calls per repetition;
            optimizer.step() alone too, on tiny parameters and on ResNet-50's and BERT-base's own
            shapes, SGD with and without weight decay (--families: only the op families named,
            e.g. mha for nn.MultiheadAttention from the probe's size to ViT-B/16's, no optimizer).
  model_sum does a model cost the host what its own layers cost one at a time? ResNet-50 (batch 32,
            autocast bf16): forward + backward issue time in the model, against the sum over every
            layer call of that layer's host time in a loop of its own (same module, same input
            shape and dtype; queued behind a GPU sleep), and the same with the CPU's caches flushed
            (a 64 MiB copy) before each repetition. Each such loop pays a backward() call per
            repetition: the sum measures those per-call costs more than the model's.
  model_host  each validation model's host time by part (zero-grad, forward, backward, optimizer)
            at its validation size and at a tiny batch and input (the same layers, tiny tensors, so
            the host sets the pace): does a model's host time depend on its tensors' sizes?
  lstm      cuDNN's LSTM launches kernels for every step of its recurrence: a tiny LSTM at three
            sequence lengths (its host cost per step, the slope) beside the validation's LSTM case,
            forward + backward in steady state, then each one's kernels per repetition.
  harness   the framework probe's own steady-state measurement (steady_layer_probes, its Probe and
            canaries) of a few tiny layers, alternating with measure_pytorch.py's own measure_layer of
            host-paced validation cases of the same ops, in one process, six rounds; then the same
            after the validation's imports and one model case: do the two programs' timing code read
            the same host the same way?
  reps      does a steady-state batch's length change its time per repetition? measure_pytorch.py's
            steady state of host-paced validation cases and the probe's steady loop of its tiny
            layers, at 5 to 100 repetitions a batch, interleaved, twenty rounds, a canary before each
            batch.
  python    where a model's forward host time goes beyond its operators: each validation model at
            its host-paced batch, the forward's host issue time on the GPU, its aten operator count
            (a counting TorchDispatchMode) and module calls (a global forward pre-hook); then the same
            model and batch on the meta device (no kernels, no launches; but PyTorch's meta kernels
            run partly in Python, so it is no measure of the model's own Python: docs/NOTES.md), and
            references on both devices: a chain of adds, a tiny Linear module, an empty module's
            call, a plain Python call.
  modules   where a model's step host time goes, to set beside roofsim's per-layer host time: each
            validation model at its host-paced batch, the host seconds of its forward, backward()
            and optimizer.step() (each from a synchronize to its return), then of the forward inside
            each module call (global forward pre- and post-hooks), a canary before and after.
  autograd  where backward()'s host time goes: each validation model at its host-paced batch,
            backward() alone, then with a pre-hook and a hook on every node of the step's autograd
            graph: seconds and count per node class.
  ops       where a step's host time goes by aten operator and CUDA call (torch.profiler): each
            validation model at its host-paced batch, forward and backward(); ViT-B/16's patch
            convolution alone too.
  autograd_thread  BERT-base b32's backward() beside the canary and a backward canary (a chain of
            tiny multiplications' backward(): autograd's device thread), eight rounds; run it in
            several processes one after another.
  blocks    does a transformer block cost the host what its modules cost one by one? Chains of
            tiny ViT EncoderBlocks, their two residual halves and BertLayers beside chains of the
            probe's tiny layers of their ops, forward and forward + backward slopes, three rounds.
  mixed     does a layer cost the host more among other kinds of layers than in a chain of its own?
            Chains of units of a few tiny modules (a layer norm and a linear, a transformer's MLP and
            attention halves and both together, a convolution, batch norm and ReLU) beside chains of
            the probe's tiny layers of each op: each unit's slope over the sum of its ops' slopes.
  gc        does Python's garbage collector pace a host-bound step? Each validation model at its
            host-paced batch (and BERT-base b128), forward-only and whole-step timings (a synchronize
            before and after each, as the validation times them) with the collector on, as every run
            has it, and off (gc.disable()), alternating, six rounds; each timing records the
            collections that ran inside it (gc.callbacks: count and seconds by generation), the CPU
            the main thread was on before and after (/proc/thread-self/stat), and a canary before each
            round.
  lead      how far ahead of the GPU the host is as a step's phases end: each validation model (and
            BERT-base b128, ResNet-50 b128), CUDA events recorded as the forward, backward() and
            optimizer.step() return, against the host's clock at the same points (both from one
            synchronize), twenty steps in each of three rounds, a canary before each round: the
            phase's GPU end minus its host return is the host's lead (0: the host paced the GPU).
  gpu_alone  is a GPU-paced phase as long as its kernels? The validation's GPU-paced models (and
            BERT-base b32): the forward and backward() each timed in the stream as a step runs them
            (CUDA events from the end of the phase before), then each issued while the GPU sleeps
            (torch.cuda._sleep, longer than the host's issuing) so that the GPU runs its kernels back
            to back: that phase's GPU time alone. Three rounds of eight steps, a canary before each.
  backward_idle  where a GPU-paced backward() waits for the host: BERT-base b128, a full backward
            pre-hook on each encoder layer, the pooler and the embeddings recording a CUDA event and
            the host's clock, in the stream as a step runs it and with the backward issued while the
            GPU sleeps (its kernels back to back): per stretch between two hooks, GPU seconds in the
            stream minus alone is the GPU's wait for the host there. Three rounds of eight steps each.
  backward_start  does backward() pay for its graph's size before its first node runs? Chains of 10
            to 3000 tiny multiplications (and of tiny Linear layers): the host seconds from the call to
            the first node's pre-hook, and to backward()'s return, median of 15, three rounds.
The last twenty take no points (the seven paired workloads are built and warmed all the same).
Writes JSON (--out) and prints a table. Usage, on a GPU machine, from the repository root:
  python3 tools/validate/host_state.py --phase profiler --out host_state_profiler.json
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO_ROOT, "calibrate"))
import measure_pytorch as mp  # noqa: E402
import torch_framework_probe as probe  # noqa: E402

# (probe tiny op, autocast?) beside (validation case id): the same op, small enough that the host sets the pace
PAIRS = [
    (("linear", False), "linear/b8x256->256/fp32"),
    (("linear", True), "linear/b8x256->256/amp-bf16"),
    (("layernorm", False), "layernorm/8x768/fp32"),
    (("add", False), "add/8x256/fp32"),
    (("conv2d", False), "conv2d/8x16x16x16->16k3s1p1/fp32"),
    (("cross_entropy", False), "cross_entropy/32x1000/fp32"),
    (("flatten", False), "flatten/64x2048x1x1/fp32"),
]
REPS = 30     # forward + backward repetitions per steady-state timing
ROUNDS = 5    # canary + every workload, this many times per point


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def steady_seconds(step, reps: int = REPS) -> float:
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        step()
    sync()
    return (time.perf_counter() - t0) / reps


def probe_workload(dev, op: str, use_autocast: bool):
    build, make_inputs = probe.layer_cases(dev)[op]
    fn, inputs, params, ctx, grad = probe.tiny_layer(dev, build, make_inputs, use_autocast)
    leaves = [t for t in inputs if t.requires_grad] + [q for q in params if q.requires_grad]

    def step():
        probe.steady_repetitions(fn, inputs, leaves, ctx, grad, 1)
    return step


def validation_workload(dev, case_id: str):
    """A validation case built as measure_pytorch.py builds it; its steady-state repetition."""
    case = next(c for c in mp.layer_cases(False) if c["id"] == case_id)
    run = mp.LayerRun(case, dev)

    def step():
        mp.set_grads_to_none(run.grad_leaves)
        with mp.autocast_ctx(run.mode, dev.type):
            out = run.fn(*run.inputs)
        out.backward(run.grad)
    return step


def make_workloads(dev):
    workloads = {}
    for (op, use_autocast), case_id in PAIRS:
        suffix = "_autocast" if use_autocast else ""
        workloads[f"probe {op}{suffix}"] = probe_workload(dev, op, use_autocast)
        workloads[f"case {case_id}"] = validation_workload(dev, case_id)
    for step in workloads.values():  # warm-up: library set-up, the allocator's pools
        steady_seconds(step, 5)
    return workloads


def point(label: str, dev, workloads, started: float) -> dict:
    canaries, times = [], {name: [] for name in workloads}
    for _ in range(ROUNDS):
        canaries.append(mp.canary_seconds_per_op(dev))
        for name, step in workloads.items():
            times[name].append(steady_seconds(step))
    canary = statistics.median(canaries)
    result = {"label": label, "at_seconds": time.perf_counter() - started, "canary_seconds": canary,
              "seconds": {name: statistics.median(v) for name, v in times.items()}}
    result["canaries"] = {name: s / canary for name, s in result["seconds"].items()}
    shown = "  ".join(f"{s * 1e6:7.1f}" for s in result["seconds"].values())
    print(f"[{result['at_seconds']:6.1f} s] {label:34s} canary {canary * 1e6:5.1f} us | {shown}", flush=True)
    return result


def phase_profiler(dev, workloads, started) -> list:
    points = [point("start", dev, workloads, started)]
    time.sleep(2.0)
    points.append(point("start + 2 s idle", dev, workloads, started))
    x = torch.ones(1, device=dev)
    with contextlib.suppress(probe.KernelTimesUnavailable):  # on a CPU: nothing to profile
        probe.kernel_seconds(lambda: torch.add(x, x))
    for i in range(3):
        points.append(point(f"after one torch.profiler region ({i + 1})", dev, workloads, started))
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    points.append(point("after gc.collect + empty_cache", dev, workloads, started))
    time.sleep(5.0)
    points.append(point("after 5 s idle", dev, workloads, started))
    return points


def phase_groups(dev, workloads, started) -> list:
    points = [point("start", dev, workloads, started)]
    p = probe.Probe(dev, repeats=11, warmup=2)
    groups = [
        ("eager ops", lambda: probe.eager_op_probes(p, 2000)),
        ("backward", lambda: probe.backward_probes(p, 100, 1000)),
        ("layers", lambda: probe.layer_probes(p, 41)),
        ("backward call split", lambda: probe.backward_split_probes(p, 21)),
        ("layers in steady state", lambda: probe.steady_layer_probes(p, 11, 50)),
        ("optimizers", lambda: probe.optimizer_probes(p, 64, 512, 256, 4 * 1024 * 1024)),
        ("synchronize and events", lambda: probe.sync_probes(p, 1000)),
        ("gpu kernel gap (torch.profiler)", lambda: probe.gpu_gap_probe(p)),
    ]
    for name, run in groups:
        with contextlib.redirect_stdout(sys.stderr):
            run()
        points.append(point(f"after {name}", dev, workloads, started))
    return points


def phase_validation(dev, workloads, started) -> list:
    """measure_pytorch.py's layer cases in its order, a point every 20 cases: does the validation's
    own work leave its process slower as it goes?"""
    import types
    points = [point("start", dev, workloads, started)]
    cases = mp.layer_cases(False)
    clock = mp.Clock(dev)
    args = types.SimpleNamespace(warmup=3, repeats=10)
    for i, case in enumerate(cases, 1):
        try:
            mp.measure_layer(case, dev, clock, args, 0.1)
        except Exception as exc:  # noqa: BLE001 (a case that cannot run here: go on, as the validation does)
            print(f"  {case['id']}: {probe.first_line(exc)}", file=sys.stderr)
        if i % 20 == 0 or i == len(cases):
            points.append(point(f"after {i} layer cases", dev, workloads, started))
    mp.clear_memory(dev)
    points.append(point("after clear_memory", dev, workloads, started))
    return points


def phase_threads(dev, workloads, started) -> list:
    """Twenty points a second apart, each with the probe's tiny linear layer forward only (the main
    thread alone) beside its forward + backward (the backward runs on autograd's device thread):
    does the host's speed change for the two threads apart, out of the canary's sight?"""
    build, make_inputs = probe.layer_cases(dev)["linear"]
    fn, inputs, params, ctx, grad = probe.tiny_layer(dev, build, make_inputs, False)

    def forward_only():
        with ctx():
            fn(*inputs)
    workloads = dict(workloads)
    workloads["probe linear forward only"] = forward_only
    steady_seconds(forward_only, 5)
    points = []
    for i in range(20):
        points.append(point(f"point {i + 1}", dev, workloads, started))
        time.sleep(1.0)
    return points


def phase_imports(dev, workloads, started) -> list:
    """Three points, then torchvision imported, three more, then transformers (measure_pytorch.py
    imports both at its start, for their versions), three more, then gc.freeze(): does what a
    process has imported change how fast it issues ops?"""
    points = []

    def three(label):
        n_objects = len(gc.get_objects())
        for i in range(3):
            points.append(point(f"{label} ({i + 1})", dev, workloads, started))
            points[-1]["gc_objects"] = n_objects
    three("start")
    for name in ("torchvision", "transformers"):
        try:
            __import__(name)
        except ImportError as exc:
            print(f"  {name} not importable: {exc}", file=sys.stderr)
            continue
        three(f"{name} imported")
    gc.collect()
    gc.freeze()
    three("gc.freeze()")
    return points


def phase_depth(dev, workloads, started) -> list:
    """Per-layer host cost over chains of 1 to 256 of the probe's tiny layers (its chain_cases; the
    probe's own chains stop at 16), and over 1 to 64 ResNet-like blocks (convolution without bias,
    batch norm, ReLU) under autocast: does a layer cost more inside a graph a model's depth deep?
    Forward + backward per chain, seconds per layer (per block), median of 5, three rounds
    interleaved with canaries."""
    cases = probe.chain_cases(dev)
    nn = torch.nn

    def block():
        return nn.Sequential(nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU()).to(dev).train()
    chains = {op: (cases[op][0], cases[op][1], [1, 4, 16, 64, 256], False)
              for op in ("linear", "conv2d_nobias", "relu", "layernorm", "gelu")}
    chains["resnet_block"] = (block, lambda: torch.randn(2, 4, 8, 8, device=dev, requires_grad=True), [1, 4, 16, 64], True)
    built = {}
    for op, (make_layer, make_input, lengths, use_autocast) in chains.items():
        layers = [make_layer() for _ in range(max(lengths))]
        params = [q for layer in layers if isinstance(layer, nn.Module) for q in layer.parameters()]
        x = make_input()
        ctx = (lambda: probe.autocast_bf16(dev)) if use_autocast else contextlib.nullcontext
        for k in lengths:
            def run(k=k, layers=layers, params=params, x=x, ctx=ctx):
                x.grad = None
                for q in params:
                    q.grad = None
                with ctx():
                    y = x
                    for layer in layers[:k]:
                        y = layer(y)
                y.sum().backward()
            built[(op, k)] = run
    for run in built.values():  # warm-up
        steady_seconds(run, 2)
    points = []
    for r in range(3):
        canary = mp.canary_seconds_per_op(dev)
        per_layer = {f"{op} x{k}": statistics.median(steady_seconds(run, 1) for _ in range(5)) / k
                     for (op, k), run in built.items()}
        points.append({"label": f"round {r + 1}", "at_seconds": time.perf_counter() - started,
                       "canary_seconds": canary, "seconds_per_layer": per_layer})
        print(f"[{points[-1]['at_seconds']:6.1f} s] round {r + 1}, canary {canary * 1e6:.1f} us", flush=True)
        for op in chains:
            row = "  ".join(f"x{key.split(' x')[1]} {v * 1e6:6.1f}" for key, v in per_layer.items()
                            if key.startswith(op + " x"))
            print(f"    {op:14s} us per layer: {row}", flush=True)
    return points


def _tiny_blocks(dev) -> dict:
    """Tiny transformer blocks as the validation models build them (64 wide, one head, MLP 128):
    torchvision's ViT EncoderBlock, transformers' BertLayer (sdpa attention); name -> make_block()."""
    nn = torch.nn
    blocks = {}
    try:
        import functools
        from torchvision.models.vision_transformer import EncoderBlock
        blocks["vit_encoder_block"] = lambda: EncoderBlock(1, 64, 128, 0.0, 0.0, functools.partial(nn.LayerNorm, eps=1e-6)).to(dev).train()

        def halves():  # the block's two residual halves apart: y + MHA(LN(y)), y + MLP(LN(y))
            block = EncoderBlock(1, 64, 128, 0.0, 0.0, functools.partial(nn.LayerNorm, eps=1e-6)).to(dev).train()

            def attention(y):
                x = block.ln_1(y)
                x, _ = block.self_attention(x, x, x, need_weights=False)
                return block.dropout(x) + y

            def mlp(y):
                return y + block.mlp(block.ln_2(y))
            return attention, mlp
        blocks["vit_attention_half"] = lambda: halves()[0]
        blocks["vit_mlp_half"] = lambda: halves()[1]
    except Exception as exc:  # noqa: BLE001
        print(f"  vit_encoder_block: skipped ({exc})", flush=True)
    try:
        import transformers
        from transformers.models.bert.modeling_bert import BertLayer
        config = transformers.BertConfig(hidden_size=64, num_attention_heads=1, intermediate_size=128,
                                         attn_implementation="sdpa")

        def bert_layer():
            layer = BertLayer(config).to(dev).train()

            def call(y):
                out = layer(y)  # a tuple in older transformers, the hidden states in newer ones
                return out[0] if isinstance(out, tuple) else out
            return call
        bert_layer()  # fails here, not in the timing, where the installed version builds it otherwise
        blocks["bert_layer"] = bert_layer
    except Exception as exc:  # noqa: BLE001
        print(f"  bert_layer: skipped ({exc})", flush=True)
    return blocks


def phase_blocks(dev, workloads, started) -> list:
    """Does a transformer block cost the host what its modules cost one by one? Under autocast, per
    block: chains of 1, 4 and 16 tiny blocks (_tiny_blocks), and in the same process, interleaved,
    chains of the framework probe's tiny layers of the ops roofsim charges such a block (its
    chain_cases: mha_no_weights, layernorm, linear, gelu, dropout_identity, add, cast), and the ViT
    block's two residual halves apart. Per chain, forward
    alone and forward + backward, seconds per layer: the slope over the chain lengths, as the probe
    fits its figures, median of 5 timings, three rounds with a canary each."""
    cases = probe.chain_cases(dev)
    chains = {op: (cases[op][0], cases[op][1]) for op in ("mha_no_weights", "layernorm", "linear", "gelu",
                                                          "dropout_identity", "add", "cast") if op in cases}
    x64 = lambda: torch.randn(1, 4, 64, device=dev, requires_grad=True)  # noqa: E731
    for name, make in _tiny_blocks(dev).items():
        chains[name] = (make, x64)
    return _chain_slope_rounds(dev, chains, started)


def _mixed_units(dev) -> dict:
    """Units of a few tiny modules each (64 wide, as a transformer's residual stream: float32 under
    autocast), called in a flat function, no module of their own: name -> (make_unit, make_input,
    the probe figures' ops whose sum the unit would cost if each op cost its own chain's slope)."""
    nn = torch.nn
    x64 = lambda: torch.randn(1, 4, 64, device=dev, requires_grad=True)  # noqa: E731
    x4d = lambda: torch.randn(2, 4, 8, 8, device=dev, requires_grad=True)  # noqa: E731

    def m(module):
        return module.to(dev).train()

    def ln_linear():  # y + Linear(LN(y)): the linear's input cast to bfloat16 by autocast
        ln, lin = m(nn.LayerNorm(64)), m(nn.Linear(64, 64))
        return lambda y: y + lin(ln(y))

    def linear_gelu():  # GELU(Linear(y)), bfloat16 from the first unit on: no activation cast after it
        lin, act = m(nn.Linear(64, 64)), m(nn.GELU())
        return lambda y: act(lin(y))

    def mlp_half():
        ln, fc1, act, fc2 = m(nn.LayerNorm(64)), m(nn.Linear(64, 128)), m(nn.GELU()), m(nn.Linear(128, 64))
        return lambda y: y + fc2(act(fc1(ln(y))))

    def attention_half():
        ln, mha, drop = m(nn.LayerNorm(64)), m(probe.SelfAttention(64, 1, need_weights=False)), m(nn.Dropout(0.0))
        return lambda y: y + drop(mha(ln(y)))

    def block():  # the two halves in one unit: a ViT encoder block without its module and its assert
        attention, mlp = attention_half(), mlp_half()
        return lambda y: mlp(attention(y))

    def conv_bn_relu():  # a ResNet-like unit, as the depth phase's blocks
        conv, bn, act = m(nn.Conv2d(4, 4, 3, padding=1, bias=False)), m(nn.BatchNorm2d(4)), m(nn.ReLU())
        return lambda y: act(bn(conv(y)))

    mlp_ops = ["layernorm", "cast", "linear", "gelu", "linear", "add"]
    attention_ops = ["layernorm", "cast", "mha_no_weights", "dropout_identity", "add"]
    return {
        "unit_ln_linear": (ln_linear, x64, ["layernorm", "cast", "linear", "add"]),
        "unit_linear_gelu": (linear_gelu, x64, ["linear", "gelu"]),
        "unit_mlp_half": (mlp_half, x64, mlp_ops),
        "unit_attention_half": (attention_half, x64, attention_ops),
        "unit_block": (block, x64, attention_ops + mlp_ops),
        "unit_conv_bn_relu": (conv_bn_relu, x4d, ["conv2d_nobias", "batchnorm2d", "relu"]),
    }


def phase_mixed(dev, workloads, started) -> list:
    """Does a layer cost the host more among other kinds of layers than in a chain of its own kind?
    Under autocast: chains of 1, 4 and 16 units of a few tiny modules each (_mixed_units: a linear
    after a layer norm, a GELU after a linear, a transformer's MLP and attention halves, the two
    together, a ResNet-like convolution, batch norm and ReLU), beside chains of the framework
    probe's tiny layers of each op, interleaved in one process; per chain the forward and forward +
    backward slopes, three rounds. Each unit's slope is set beside the sum of its ops' slopes of the
    same round (`sum_of_ops`): the rule roofsim's host figures follow."""
    cases = probe.chain_cases(dev)
    units = _mixed_units(dev)
    ops = sorted({op for _, _, unit_ops in units.values() for op in unit_ops})
    chains = {op: (cases[op][0], cases[op][1]) for op in ops if op in cases}
    for name, (make, make_input, _) in units.items():
        chains[name] = (make, make_input)
    points = _chain_slope_rounds(dev, chains, started)
    for point in points:
        slopes = point["seconds_per_layer"]
        point["sum_of_ops"] = {}
        for name, (_, _, unit_ops) in units.items():
            for part in ("forward", "forward_backward"):
                if all(f"{op} {part}" in slopes for op in unit_ops):
                    total = sum(slopes[f"{op} {part}"] for op in unit_ops)
                    point["sum_of_ops"][f"{name} {part}"] = {"ops": unit_ops, "seconds": total,
                                                            "unit_over_sum": slopes[f"{name} {part}"] / total}
        print("    unit / sum of its ops' slopes: " + ", ".join(
            f"{k} {v['unit_over_sum']:.2f}" for k, v in point["sum_of_ops"].items()), flush=True)
    return points


def _chain_slope_rounds(dev, chains: dict, started: float, rounds: int = 3) -> list:
    """Chains of 1, 4 and 16 layers of each (make_layer, make_input) of `chains` under autocast,
    built once, timed interleaved: forward alone and forward + backward, median of 5 steady timings
    per length, the least-squares slope over the lengths per layer (as the probe fits its figures);
    `rounds` rounds, a canary each."""
    nn = torch.nn
    lengths = [1, 4, 16]
    built = {}
    for op, (make_layer, make_input) in chains.items():
        layers = [make_layer() for _ in range(max(lengths))]
        params = [q for layer in layers if isinstance(layer, nn.Module) for q in layer.parameters()]
        for layer in layers:  # a layer built as a closure: the parameters of the modules it holds
            for cell in getattr(layer, "__closure__", None) or ():
                held = cell.cell_contents
                if isinstance(held, nn.Module):
                    params.extend(held.parameters())
                elif callable(held) and getattr(held, "__closure__", None):  # a unit made of units
                    params.extend(q for inner in held.__closure__ if isinstance(inner.cell_contents, nn.Module)
                                  for q in inner.cell_contents.parameters())
        x = make_input()
        for k in lengths:
            def run(backward, k=k, layers=layers, params=params, x=x):
                x.grad = None
                for q in params:
                    q.grad = None
                with probe.autocast_bf16(dev):
                    y = x
                    for layer in layers[:k]:
                        y = layer(y)
                if backward:
                    y.float().sum().backward()
            built[(op, k)] = run
    for run in built.values():  # warm-up
        for backward in (False, True):
            steady_seconds(lambda: run(backward), 2)
    points = []
    for r in range(rounds):
        canary = mp.canary_seconds_per_op(dev)
        times = {}
        for (op, k), run in built.items():
            for backward in (False, True):
                times[(op, k, backward)] = statistics.median(steady_seconds(lambda: run(backward), 1) for _ in range(5))
        slopes = {}
        for op in chains:
            for backward in (False, True):
                ys = [times[(op, k, backward)] for k in lengths]
                mean_k, mean_y = statistics.mean(lengths), statistics.mean(ys)
                slope = sum((k - mean_k) * (y - mean_y) for k, y in zip(lengths, ys)) / sum((k - mean_k) ** 2 for k in lengths)
                slopes[f"{op} {'forward_backward' if backward else 'forward'}"] = slope
        points.append({"label": f"round {r + 1}", "at_seconds": time.perf_counter() - started, "canary_seconds": canary,
                       "chain_lengths": lengths, "seconds_per_layer": slopes,
                       "chain_seconds": {f"{op} x{k} {'forward_backward' if b else 'forward'}": t
                                         for (op, k, b), t in times.items()}})
        print(f"[{points[-1]['at_seconds']:6.1f} s] round {r + 1}, canary {canary * 1e6:.1f} us", flush=True)
        for op in chains:
            print(f"    {op:20s} us per layer: forward {slopes[op + ' forward'] * 1e6:7.1f}  "
                  f"forward + backward {slopes[op + ' forward_backward'] * 1e6:7.1f}", flush=True)
    return points


def phase_clocks(dev, workloads, started) -> list:
    """The GPU's SM clock while a host-paced case runs in steady state (the GPU idle between kernels
    much of the time) against a GPU-bound one and an idle GPU: nvidia-smi sampled every 20 ms
    (clocks.sm, MHz) in the background, 3 s per segment."""
    import subprocess
    import threading
    samples: list = []
    try:
        proc = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits", "-lms", "20"],
                                stdout=subprocess.PIPE, text=True)
    except OSError as exc:
        raise SystemExit(f"error: the clocks phase needs nvidia-smi: {exc}") from exc

    def reader():
        for line in proc.stdout:
            with contextlib.suppress(ValueError):
                samples.append((time.perf_counter(), float(line.strip())))
    threading.Thread(target=reader, daemon=True).start()
    segments = [("idle", None), ("case linear/b8x1024x768->3072/amp-bf16", "linear/b8x1024x768->3072/amp-bf16"),
                ("case conv2d/64x64x56x56->64k3s1p1/amp-bf16", "conv2d/64x64x56x56->64k3s1p1/amp-bf16"),
                ("case linear/b8x1024x768->3072/fp32 (GPU-bound)", "linear/b8x1024x768->3072/fp32"),
                ("case linear/b8x256->256/fp32", "linear/b8x256->256/fp32"), ("idle again", None)]
    points = []
    time.sleep(1.0)
    for label, case_id in segments:
        step = validation_workload(dev, case_id) if case_id else None
        if step:
            steady_seconds(step, 5)
        t0 = time.perf_counter()
        per_rep = []
        while time.perf_counter() - t0 < 3.0:
            if step:
                per_rep.append(steady_seconds(step, 20))
            else:
                time.sleep(0.05)
        t1 = time.perf_counter()
        clocks = [mhz for t, mhz in samples if t0 + 0.5 <= t <= t1]
        points.append({"label": label, "at_seconds": t0 - started, "sm_clock_mhz_median": statistics.median(clocks) if clocks else None,
                       "sm_clock_mhz_min": min(clocks) if clocks else None, "clock_samples": len(clocks),
                       "seconds_per_repetition": statistics.median(per_rep) if per_rep else None})
        rep = f"{points[-1]['seconds_per_repetition'] * 1e6:8.1f} us per rep" if per_rep else ""
        print(f"[{points[-1]['at_seconds']:6.1f} s] {label:48s} SM clock median {points[-1]['sm_clock_mhz_median']} MHz "
              f"(min {points[-1]['sm_clock_mhz_min']}, {len(clocks)} samples) {rep}", flush=True)
    proc.terminate()
    return points


OVERLAP_LAYERS = [
    "linear/b8x1024x768->3072/amp-bf16", "linear/b8x1024x768->3072/bf16", "linear/b8x1024x768->3072/fp32",
    "conv2d/64x64x56x56->64k3s1p1/amp-bf16", "conv2d/64x64x56x56->64k3s1p1/bf16",
    "sdpa/b8h12l1024d64-causal-flash/amp-bf16", "silu/8x1024x3072/amp-bf16", "add/8x1024x768/fp32",
    "cat/8x1024x768/fp32", "transpose_contiguous/8x1024x12x64/fp32", "linear/b8x256->256/fp32",
]
OVERLAP_MODELS = ["resnet50/b32x224/amp-bf16", "bert-base/b32xs128/amp-bf16", "gpt2-small/b4xs1024/amp-bf16"]


def has_gpu_sleep(dev) -> bool:
    return dev.type == "cuda"


def layer_parts_step(run):
    """A layer case's steady-state repetition as measure_pytorch.py's runs it, each part timed."""
    def step(parts):
        t0 = time.perf_counter()
        mp.set_grads_to_none(run.grad_leaves)
        t1 = time.perf_counter()
        with run.forward_ctx():
            out = run.fn(*run.inputs)
        t2 = time.perf_counter()
        out.backward(run.grad)
        t3 = time.perf_counter()
        del out
        parts["zero_grad"].append(t1 - t0)
        parts["forward"].append(t2 - t1)
        parts["backward"].append(t3 - t2)
    return step


def model_parts_step(spec, dev):
    """A model case's training step as measure_pytorch.py's measure_model runs it (no grad scaler:
    the amp-bf16 cases), each part timed."""
    mode = spec["precision"]
    _, model, batch, loss_fn, _, opt, _ = mp.ready_model(spec, dev, False)

    def step(parts):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        t1 = time.perf_counter()
        with mp.autocast_ctx(mode, dev.type):
            loss = loss_fn(model, batch)
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        opt.step()
        t4 = time.perf_counter()
        del loss
        parts["zero_grad"].append(t1 - t0)
        parts["forward"].append(t2 - t1)
        parts["backward"].append(t3 - t2)
        parts["optimizer"].append(t4 - t3)
    return step


def model_step_or_none(spec, dev):
    """model_parts_step(spec, dev), or None, said on stdout, for a model that cannot be built here."""
    try:
        return model_parts_step(spec, dev)
    except mp.Skip as exc:
        print(f"  {spec['id']}: skipped ({exc})", flush=True)
        return None


def queued_batch(step, reps, hold_s, cycles_per_s) -> dict:
    """`reps` calls of step() issued while the GPU sleeps `hold_s` (so it runs none of them yet):
    the host's issue seconds per repetition, the GPU's seconds per repetition once it woke and ran
    them back to back (CUDA events), the sleep's own seconds, and whether the host was done before
    the GPU woke (else the GPU time includes waiting for the host)."""
    e0, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    sync()
    e0.record()
    torch.cuda._sleep(int(hold_s * cycles_per_s))
    e1.record()
    t0 = time.perf_counter()
    for _ in range(reps):
        step()
    issue = time.perf_counter() - t0
    e2.record()
    sync()
    hold = e0.elapsed_time(e1) / 1e3
    return {"issue_seconds": issue / reps, "gpu_seconds": e1.elapsed_time(e2) / 1e3 / reps, "hold_seconds": hold,
            "host_done_before_gpu": issue < 0.9 * hold}


def overlap_record(label, dev, step, reps, batches, cycles_per_s) -> dict:
    """Normal batches (issue and total per repetition, the parts), then batches queued behind a GPU
    sleep three times a normal batch long (issue per repetition against a busy GPU, the GPU's
    back-to-back time per repetition by CUDA events, the parts)."""
    for _ in range(2):  # warm-up: library set-up, the allocator's pools
        step(collections.defaultdict(list))
    sync()
    normal = {"issue": [], "total": [], "canary": []}
    normal_parts = collections.defaultdict(list)
    for _ in range(batches):
        normal["canary"].append(mp.canary_seconds_per_op(dev))
        sync()
        t0 = time.perf_counter()
        for _ in range(reps):
            step(normal_parts)
        t1 = time.perf_counter()
        sync()
        t2 = time.perf_counter()
        normal["issue"].append((t1 - t0) / reps)
        normal["total"].append((t2 - t0) / reps)
    hold_s = max(0.02, 3.0 * statistics.median(normal["total"]) * reps)
    queued = {"issue": [], "gpu": [], "hold": [], "host_done_before_gpu": [], "first_rep_parts": []}
    queued_parts = collections.defaultdict(list)
    for _ in range(batches):
        first = collections.defaultdict(list)  # the first repetition's parts: one that waits for the GPU shows here
        calls = []

        def one(first=first, calls=calls):
            step(first if not calls else queued_parts)
            calls.append(1)
        batch = queued_batch(one, reps, hold_s, cycles_per_s)
        for name, v in first.items():
            queued_parts[name].extend(v)
        queued["issue"].append(batch["issue_seconds"])
        queued["gpu"].append(batch["gpu_seconds"])
        queued["hold"].append(batch["hold_seconds"])
        queued["host_done_before_gpu"].append(batch["host_done_before_gpu"])
        queued["first_rep_parts"].append({name: v[0] for name, v in first.items()})
    med = statistics.median
    rec = {"label": label, "repetitions": reps, "batches": batches,
           "normal": {"issue_seconds": med(normal["issue"]), "total_seconds": med(normal["total"]),
                      "canary_seconds": med(normal["canary"]),
                      "parts_seconds": {k: med(v) for k, v in normal_parts.items()},
                      "issue_values": normal["issue"], "total_values": normal["total"]},
           "queued": {"issue_seconds": med(queued["issue"]), "gpu_back_to_back_seconds": med(queued["gpu"]),
                      "hold_seconds": queued["hold"], "host_done_before_gpu": queued["host_done_before_gpu"],
                      "parts_seconds": {k: med(v) for k, v in queued_parts.items()},
                      "first_repetition_parts_seconds": queued["first_rep_parts"],
                      "issue_values": queued["issue"], "gpu_values": queued["gpu"]}}
    n, q = rec["normal"], rec["queued"]
    parts = " ".join(f"{k} {v * 1e6:.0f}/{q['parts_seconds'].get(k, 0) * 1e6:.0f}" for k, v in n["parts_seconds"].items())
    print(f"  {label:44s} normal issue {n['issue_seconds'] * 1e6:8.1f} total {n['total_seconds'] * 1e6:8.1f} | "
          f"queued issue {q['issue_seconds'] * 1e6:8.1f} GPU {q['gpu_back_to_back_seconds'] * 1e6:8.1f} "
          f"ok {sum(q['host_done_before_gpu'])}/{batches} | parts normal/queued us: {parts} | canary {n['canary_seconds'] * 1e6:.1f}",
          flush=True)
    return rec


def launch_queue_depth(dev, cycles_per_s, launches: int = 4096) -> dict:
    """Tiny adds issued behind a 300 ms GPU sleep, the host's clock read after each: the launch at
    which the host first waits (a launch taking over 1 ms) is how many the queue holds."""
    x, y = torch.ones(1, device=dev), torch.ones(1, device=dev)
    sync()
    torch.cuda._sleep(int(0.3 * cycles_per_s))
    stamps = [time.perf_counter()]
    for _ in range(launches):
        torch.add(x, y)
        stamps.append(time.perf_counter())
    sync()
    waits = [i for i in range(launches) if stamps[i + 1] - stamps[i] > 1e-3]
    result = {"launches": launches, "first_waiting_launch": waits[0] if waits else None,
              "waiting_launches": len(waits),
              "median_launch_seconds_before_wait": statistics.median(
                  [stamps[i + 1] - stamps[i] for i in range(waits[0] if waits else launches)])}
    print(f"  launch queue: first launch that waits: {result['first_waiting_launch']} of {launches} "
          f"({result['waiting_launches']} wait); {result['median_launch_seconds_before_wait'] * 1e6:.2f} us per launch before",
          flush=True)
    return result


def phase_overlap(dev, workloads, started) -> list:
    """Does the host's issuing overlap the GPU's work, for layer cases whose steady state measured
    about host + GPU time rather than the larger of the two, and for the host-paced model steps?"""
    if not has_gpu_sleep(dev):
        raise SystemExit("error: the overlap phase needs a CUDA device")
    cycles_per_s = probe.gpu_sleep_cycles_per_second()
    print(f"  torch.cuda._sleep: {cycles_per_s / 1e6:.0f} M cycles a second", flush=True)
    points = [{"label": "launch queue", "at_seconds": time.perf_counter() - started,
               "sleep_cycles_per_second": cycles_per_s, "launch_queue": launch_queue_depth(dev, cycles_per_s)}]
    x, y = torch.ones(1, device=dev), torch.ones(1, device=dev)

    def tiny_add(parts):
        t0 = time.perf_counter()
        torch.add(x, y)
        parts["forward"].append(time.perf_counter() - t0)
    points.append(overlap_record("tiny add", dev, tiny_add, 200, 5, cycles_per_s))
    cases = {c["id"]: c for c in mp.layer_cases(False)}
    for case_id in OVERLAP_LAYERS:
        case = cases[case_id]
        with mp.tf32_flags(case["precision"]):
            run = mp.LayerRun(case, dev)
            points.append(overlap_record(case_id, dev, layer_parts_step(run), 20, 5, cycles_per_s))
        del run
    mp.clear_memory(dev)
    specs = {c["id"]: c for c in mp.model_cases(False)}
    for case_id in OVERLAP_MODELS:
        spec = specs[case_id]
        with mp.tf32_flags(spec["precision"]):
            step = model_step_or_none(spec, dev)
            if step is None:
                continue
            points.append(overlap_record(case_id, dev, step, 3, 4, cycles_per_s))
        del step
        mp.clear_memory(dev)
    for p in points:
        p.setdefault("at_seconds", time.perf_counter() - started)
    return points


def _float_input(shape, mode):
    return {"shape": shape, "dtype": mp.PRECISIONS[mode][3], "requires_grad": True}


def size_families() -> list:
    """(family, [case dicts from small to large]): one op and precision, several sizes."""
    fams = []

    def family(op, mode, sizes):
        cases = []
        for tag, params, inputs in sizes:
            cases.append({"id": f"{op}/{tag}/{mode}", "op": op, "precision": mode, "params": params,
                          "inputs": [_float_input(shape, mode) for shape in inputs]})
        fams.append((f"{op} {mode}", cases))

    def conv_sizes(xs):
        out = []
        for n, c, h in xs:
            params = {"in_channels": c, "out_channels": c, "kernel_size": [3, 3], "stride": [1, 1],
                      "padding": [1, 1], "dilation": [1, 1], "groups": 1, "bias": False}
            out.append((f"{n}x{c}x{h}x{h}", params, [[n, c, h, h]]))
        return out
    convs = [(2, 4, 8), (8, 16, 16), (16, 32, 28), (32, 64, 56), (64, 64, 56)]
    family("conv2d", "amp-bf16", conv_sizes(convs))
    family("conv2d", "bf16", conv_sizes(convs))
    family("conv2d", "fp32", conv_sizes(convs))

    def linear_sizes(xs):
        return [(f"b{mp._dims(lead)}x{fin}->{fout}", {"in_features": fin, "out_features": fout, "bias": True},
                 [lead + [fin]]) for lead, fin, fout in xs]
    linears = [([8], 256, 256), ([8, 128], 768, 768), ([8, 512], 768, 3072), ([8, 1024], 768, 3072)]
    family("linear", "amp-bf16", linear_sizes(linears))
    family("linear", "fp32", linear_sizes(linears))
    family("batchnorm2d", "amp-bf16", [(f"{mp._dims(x)}", {"num_features": x[1]}, [x]) for x in
                                       ([2, 4, 8, 8], [8, 16, 16, 16], [32, 64, 56, 56], [64, 256, 56, 56])])
    family("relu", "amp-bf16", [(f"{mp._dims(x)}", {}, [x]) for x in ([8, 256], [8, 64, 768], [8, 1024, 768], [64, 256, 56, 56])])
    family("add", "fp32", [(f"{mp._dims(x)}", {}, [x, x]) for x in ([8, 256], [8, 64, 768], [8, 256, 768], [8, 1024, 768])])
    family("cat", "fp32", [(f"{mp._dims(x)}", {"dim": -1}, [x, x]) for x in ([8, 256], [8, 64, 768], [8, 1024, 768])])
    family("layernorm", "amp-bf16", [(f"{mp._dims(x)}", {"normalized_shape": [768], "elementwise_affine": True}, [x])
                                     for x in ([8, 768], [8, 128, 768], [8, 1024, 768])])
    family("sdpa", "amp-bf16", [(f"b{b}h{h}l{l}d64", {"is_causal": True, "backend": "flash"}, [[b, h, l, 64]] * 3)
                                for b, h, l in ((1, 2, 64), (2, 12, 256), (8, 12, 1024))])
    # nn.MultiheadAttention called with need_weights=False: the framework probe's tiny one (64 wide,
    # one head), a middle one, ViT-B/16's at batch 32 and the validation's layer case
    mhas = [(1, 4, 64, 1), (8, 64, 256, 4), (32, 197, 768, 12), (32, 128, 768, 12)]
    for mode in ("amp-bf16", "fp32"):
        family("mha", mode, [(f"b{b}l{l}e{e}h{h}", {"embed_dim": e, "num_heads": h, "batch_first": True}, [[b, l, e]])
                             for b, l, e, h in mhas])
    if ONLY_FAMILIES:
        fams = [(name, cases) for name, cases in fams if any(name.startswith(f) for f in ONLY_FAMILIES)]
    return fams


def _profiled(step, reps: int):
    """torch.profiler (CPU + CUDA) over `reps` calls of step(), from a synchronize to a synchronize."""
    from torch.profiler import ProfilerActivity, profile
    sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            step()
        sync()
    return prof


def profiled_counts(step, reps) -> dict:
    """Kernel launches, CUDA runtime/driver API calls and aten ops per repetition under torch.profiler."""
    prof = _profiled(step, reps)
    kernels = api = aten = 0
    api_names: dict = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            kernels += 1
        elif e.name.startswith("aten::"):
            aten += 1
        elif e.name.startswith("cu") and "Synchronize" not in e.name:
            api += 1
            api_names[e.name] = api_names.get(e.name, 0) + 1
    return {"kernels": kernels / reps, "api_calls": api / reps, "aten_ops": aten / reps,
            "api_calls_by_name": {k: v / reps for k, v in sorted(api_names.items(), key=lambda kv: -kv[1])}}


def optimizer_families(dev) -> list:
    """(family, [(label, step)]): optimizer.step() alone on tiny parameters (the framework probe's
    kind) and on the validation models' own parameter shapes, SGD with and without weight decay."""
    def shapes_of(build):
        try:
            return [tuple(q.shape) for q in build().parameters()]
        except Exception as exc:  # noqa: BLE001 (torchvision / transformers missing: tiny ones only)
            print(f"  parameter shapes not available: {exc}", flush=True)
            return None

    def resnet50():
        import torchvision
        return torchvision.models.resnet50()

    def bert():
        import transformers
        return transformers.BertForSequenceClassification(transformers.BertConfig(num_labels=2))

    def step_for(make_opt, shapes):
        params = [torch.randn(shape, device=dev, requires_grad=True) for shape in shapes]
        for q in params:
            q.grad = torch.randn_like(q)
        opt = make_opt(params)
        opt.step()
        opt.step()
        return lambda: opt.step()
    fams = []
    r50, bert_shapes = shapes_of(resnet50), shapes_of(bert)
    sgd = []
    for wd in (0.0, 1e-4):
        make = (lambda ps, wd=wd: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=wd, foreach=True))
        sgd.append((f"sgd wd={wd} 161 x 256", step_for(make, [(256,)] * 161)))
        if r50:
            sgd.append((f"sgd wd={wd} resnet50 shapes ({len(r50)})", step_for(make, r50)))
    fams.append(("optimizer sgd foreach", sgd))
    adamw = []
    make = (lambda ps: torch.optim.AdamW(ps, lr=1e-4, weight_decay=0.01, foreach=True))
    adamw.append(("adamw 201 x 256", step_for(make, [(256,)] * 201)))
    if bert_shapes:
        adamw.append((f"adamw bert-base shapes ({len(bert_shapes)})", step_for(make, bert_shapes)))
    fams.append(("optimizer adamw foreach", adamw))
    return fams


# --families: the sizes phase runs only the families whose names start with one of these (and the
# optimizer families only when none is given)
ONLY_FAMILIES: list = []


def phase_sizes(dev, workloads, started) -> list:
    if not has_gpu_sleep(dev):
        raise SystemExit("error: the sizes phase needs a CUDA device")
    cycles_per_s = probe.gpu_sleep_cycles_per_second()
    built = []  # (family, label, step, precision mode, repetitions)
    for fam, cases in size_families():
        for case in cases:
            try:
                with mp.tf32_flags(case["precision"]):
                    run = mp.LayerRun(case, dev)
            except mp.Skip as exc:
                print(f"  {case['id']}: skipped ({exc})", flush=True)
                continue
            step_parts = layer_parts_step(run)

            def step(step_parts=step_parts):
                step_parts(collections.defaultdict(list))
            built.append((fam, case["id"], step, case["precision"], 20))
    for fam, steps in optimizer_families(dev) if not ONLY_FAMILIES else ():
        built.extend((fam, label, step, "fp32", 4) for label, step in steps)
    estimates = {}
    for fam, label, step, mode, reps in built:  # warm-up, and each one's GPU-inclusive time to size its hold
        with mp.tf32_flags(mode):
            steady_seconds(step, 3)
            estimates[label] = steady_seconds(step, 5)
    results = {label: {"issue": [], "normal": [], "ok": [], "canary": []} for _, label, *_ in built}
    for r in range(3):
        for fam, label, step, mode, reps in built:
            res = results[label]
            with mp.tf32_flags(mode):
                res["canary"].append(mp.canary_seconds_per_op(dev))
                batch = queued_batch(step, reps, max(0.02, 3 * reps * estimates[label]), cycles_per_s)
                res["issue"].append(batch["issue_seconds"])
                res["ok"].append(batch["host_done_before_gpu"])
                res["normal"].append(steady_seconds(step, reps))
        print(f"[{time.perf_counter() - started:6.1f} s] round {r + 1} done", flush=True)
    points = []
    for fam, label, step, mode, reps in built:  # profiled last: a process that has profiled issues ops more slowly
        with mp.tf32_flags(mode):
            counts = profiled_counts(step, min(reps, 5))
        res = results[label]
        point_ = {"label": label, "family": fam, "at_seconds": time.perf_counter() - started, "repetitions": reps,
                  "queued_issue_seconds": statistics.median(res["issue"]), "queued_values": res["issue"],
                  "host_done_before_gpu": res["ok"], "normal_seconds": statistics.median(res["normal"]),
                  "canary_seconds": statistics.median(res["canary"]), "profiled": counts}
        points.append(point_)
        print(f"  {label:44s} host {point_['queued_issue_seconds'] * 1e6:7.1f} us (ok {sum(res['ok'])}/3)  "
              f"normal {point_['normal_seconds'] * 1e6:8.1f} us  canary {point_['canary_seconds'] * 1e6:5.1f}  "
              f"kernels {counts['kernels']:.0f} api {counts['api_calls']:.0f} aten {counts['aten_ops']:.0f}", flush=True)
    return points

def phase_model_sum(dev, workloads, started) -> list:
    nn = torch.nn
    if not has_gpu_sleep(dev):
        raise SystemExit("error: the model_sum phase needs a CUDA device")
    cycles_per_s = probe.gpu_sleep_cycles_per_second()
    spec = next(c for c in mp.model_cases(False) if c["id"] == "resnet50/b32x224/amp-bf16")
    _, model, batch, loss_fn, _, _, _ = mp.ready_model(spec, dev, False)
    params = list(model.parameters())

    def fwd_bwd():
        for q in params:
            q.grad = None
        with mp.autocast_ctx("amp-bf16", dev.type):
            loss = loss_fn(model, batch)
        loss.backward()

    # The layer calls of one forward: every leaf module, with its input's shape, dtype, requires_grad.
    calls, adds = [], []
    hooks = []
    for name, m in model.named_modules():
        if not list(m.children()):
            hooks.append(m.register_forward_hook(
                lambda mod, inp, out, name=name: calls.append((name, mod, inp[0].shape, inp[0].dtype, inp[0].requires_grad))))
        elif type(m).__name__ == "Bottleneck":  # its residual add: out += identity, on bn3's output
            hooks.append(m.bn3.register_forward_hook(
                lambda mod, inp, out: adds.append((out.shape, out.dtype))))
    fwd_bwd()
    for h in hooks:
        h.remove()
    sync()
    # In the model: forward + backward issue time, three back to back, five batches.
    for _ in range(2):
        fwd_bwd()
    sync()
    in_model_issue, in_model_total, canaries = [], [], []
    for _ in range(5):
        canaries.append(mp.canary_seconds_per_op(dev))
        sync()
        t0 = time.perf_counter()
        for _ in range(3):
            fwd_bwd()
        t1 = time.perf_counter()
        sync()
        in_model_issue.append((t1 - t0) / 3)
        in_model_total.append((time.perf_counter() - t0) / 3)
    print(f"  in the model: forward + backward issue {statistics.median(in_model_issue) * 1e3:.2f} ms, "
          f"total {statistics.median(in_model_total) * 1e3:.2f} ms, canary {statistics.median(canaries) * 1e6:.1f} us; "
          f"{len(calls)} layer calls, {len(adds)} residual adds", flush=True)

    def standalone(make_out, leaves):
        """A step: forward + backward of one layer call on its own (grads reset)."""
        with mp.autocast_ctx("amp-bf16", dev.type):
            out = make_out()
        grad = torch.randn_like(out)

        def step():
            for t in leaves:
                t.grad = None
            with mp.autocast_ctx("amp-bf16", dev.type):
                y = make_out()
            y.backward(grad)
        return step

    def host_times(step):
        steady_seconds(step, 3)
        hot = [queued_batch(step, 10, 0.03, cycles_per_s)["issue_seconds"] for _ in range(3)]
        cold = []
        for _ in range(3):  # each repetition after a flush, the GPU asleep behind them all
            sync()
            torch.cuda._sleep(int(0.2 * cycles_per_s))
            for _ in range(3):
                probe.flush_cpu_caches()
                t0 = time.perf_counter()
                step()
                cold.append(time.perf_counter() - t0)
            sync()
        return statistics.median(hot), statistics.median(cold)

    by_kind = collections.defaultdict(lambda: [0, 0.0, 0.0])
    rows = []
    for name, mod, shape, dtype, needs_grad in calls:
        x = torch.randn(shape, dtype=dtype, device=dev, requires_grad=needs_grad)
        layer = nn.ReLU() if isinstance(mod, nn.ReLU) else mod  # in place on a leaf is not allowed
        leaves = [x] + list(mod.parameters())
        hot, cold = host_times(standalone(lambda layer=layer, x=x: layer(x), leaves))
        kind = type(mod).__name__
        by_kind[kind][0] += 1
        by_kind[kind][1] += hot
        by_kind[kind][2] += cold
        rows.append({"layer": name, "kind": kind, "shape": list(shape), "dtype": str(dtype), "hot_seconds": hot, "cold_seconds": cold})
    for shape, dtype in adds:
        a = torch.randn(shape, dtype=dtype, device=dev, requires_grad=True)
        b = torch.randn(shape, dtype=dtype, device=dev, requires_grad=True)
        hot, cold = host_times(standalone(lambda a=a, b=b: a + b, [a, b]))
        by_kind["residual add"][0] += 1
        by_kind["residual add"][1] += hot
        by_kind["residual add"][2] += cold
    logits = torch.randn(batch["y"].shape[0], 1000, device=dev, requires_grad=True)
    hot, cold = host_times(standalone(lambda: torch.nn.functional.cross_entropy(torch.flatten(logits, 1), batch["y"]), [logits]))
    by_kind["flatten + cross_entropy"] = [1, hot, cold]
    total_hot = sum(v[1] for v in by_kind.values())
    total_cold = sum(v[2] for v in by_kind.values())
    for kind, (n, hot, cold) in by_kind.items():
        print(f"  {kind:24s} x{n:3d}  one at a time {hot * 1e3:7.2f} ms   caches flushed {cold * 1e3:7.2f} ms", flush=True)
    print(f"  sum of the layers one at a time {total_hot * 1e3:.2f} ms, caches flushed {total_cold * 1e3:.2f} ms; "
          f"in the model {statistics.median(in_model_issue) * 1e3:.2f} ms", flush=True)
    return [{"label": "resnet50/b32x224/amp-bf16 forward + backward", "at_seconds": time.perf_counter() - started,
             "in_model_issue_seconds": statistics.median(in_model_issue), "in_model_issue_values": in_model_issue,
             "in_model_total_seconds": statistics.median(in_model_total), "canary_seconds": statistics.median(canaries),
             "sum_one_at_a_time_seconds": total_hot, "sum_caches_flushed_seconds": total_cold,
             "by_kind": {k: {"calls": v[0], "one_at_a_time_seconds": v[1], "caches_flushed_seconds": v[2]} for k, v in by_kind.items()},
             "layers": rows}]


def phase_model_host(dev, workloads, started) -> list:
    specs = []
    for spec in mp.model_cases(False):
        if spec["id"] in ("resnet50/b32x224/amp-bf16", "bert-base/b32xs128/amp-bf16",
                          "gpt2-small/b4xs1024/amp-bf16", "vit-b-16/b32x224/amp-bf16"):
            specs.append(spec)
            tiny = dict(spec, batch=1 if "seq_len" in spec else 2)
            size_key = "seq_len" if "seq_len" in spec else "image_size"
            tiny[size_key] = 16 if size_key == "seq_len" else 32
            tiny["id"] = spec["id"] + " (tiny batch and input)"
            specs.append(tiny)
    points = []
    for spec in specs:
        with mp.tf32_flags(spec["precision"]):
            step = model_step_or_none(spec, dev)
            if step is None:
                continue
            for _ in range(3):
                step(collections.defaultdict(list))
            sync()
            issue, total, canaries = [], [], []
            parts = collections.defaultdict(list)
            for _ in range(5):
                canaries.append(mp.canary_seconds_per_op(dev))
                sync()
                t0 = time.perf_counter()
                for _ in range(3):
                    step(parts)
                t1 = time.perf_counter()
                sync()
                issue.append((t1 - t0) / 3)
                total.append((time.perf_counter() - t0) / 3)
        del step
        mp.clear_memory(dev)
        med = {k: statistics.median(v) for k, v in parts.items()}
        points.append({"label": spec["id"], "at_seconds": time.perf_counter() - started, "batch": spec["batch"],
                       "issue_seconds": statistics.median(issue), "total_seconds": statistics.median(total),
                       "canary_seconds": statistics.median(canaries), "parts_seconds": med,
                       "issue_values": issue, "total_values": total})
        print(f"  {spec['id']:52s} issue {statistics.median(issue) * 1e3:7.2f} ms total {statistics.median(total) * 1e3:7.2f} ms | "
              + " ".join(f"{k} {v * 1e3:.2f}" for k, v in med.items()) + f" | canary {statistics.median(canaries) * 1e6:.1f} us",
              flush=True)
    return points


def phase_lstm(dev, workloads, started) -> list:
    """cuDNN's LSTM launches kernels for every step of the recurrence from C++: its host cost per
    step. A tiny LSTM (2 layers, 8 -> 8, batch 2) at sequence lengths 8, 32 and 128, and the
    validation's LSTM case (2 layers, 512 -> 512, batch 32, 128 steps), forward + backward in steady
    state, three rounds with a canary each; the tiny ones' slope over the length is seconds per step
    (both layers); then the kernels each launches per repetition under torch.profiler."""
    nn = torch.nn
    steps, lengths = {}, {}  # label -> a steady-state repetition, its sequence length

    def module_step(m, x):
        grad = torch.randn_like(m(x)[0])

        def step():
            x.grad = None
            for q in m.parameters():
                q.grad = None
            m(x)[0].backward(grad)
        return step
    for length in (8, 32, 128):
        label = f"tiny lstm 2x8 seq {length}"
        steps[label] = module_step(nn.LSTM(8, 8, num_layers=2, batch_first=True).to(dev),
                                   torch.randn(2, length, 8, device=dev, requires_grad=True))
        lengths[label] = length
    case = next((c for c in mp.layer_cases(False) if c["op"] == "lstm" and c["precision"] == "fp32"), None)
    if case is not None and dev.type == "cuda":  # on a CPU it takes minutes: the tiny ones test the script
        run = mp.LayerRun(case, dev)

        def case_step():
            mp.set_grads_to_none(run.grad_leaves)
            run.fn(*run.inputs).backward(run.grad)
        steps[case["id"]] = case_step
        lengths[case["id"]] = case["inputs"][0]["shape"][1]
    for step in steps.values():
        steady_seconds(step, 3)
    results = {label: [] for label in steps}
    canaries = []
    for r in range(3):
        canaries.append(mp.canary_seconds_per_op(dev))
        for label, step in steps.items():
            results[label].append(steady_seconds(step, 10))
        print(f"[{time.perf_counter() - started:6.1f} s] round {r + 1}, canary {canaries[-1] * 1e6:.1f} us: "
              + "  ".join(f"{label} {v[-1] * 1e3:.2f} ms" for label, v in results.items()), flush=True)
    tiny_lengths = [lengths[label] for label in steps if label.startswith("tiny")]
    tiny = [statistics.median(results[label]) for label in steps if label.startswith("tiny")]
    mean_l, mean_t = sum(tiny_lengths) / len(tiny_lengths), sum(tiny) / len(tiny)
    slope = (sum((l_ - mean_l) * (t - mean_t) for l_, t in zip(tiny_lengths, tiny))
             / sum((l_ - mean_l) ** 2 for l_ in tiny_lengths))
    points = [{"label": label, "at_seconds": time.perf_counter() - started, "sequence_length": lengths[label],
               "seconds": statistics.median(v), "values": v, "canary_seconds": statistics.median(canaries)}
              for label, v in results.items()]
    if dev.type == "cuda":  # profiled last: a process that has profiled issues ops more slowly
        for p_ in points:
            p_["profiled"] = profiled_counts(steps[p_["label"]], 3)
    points.append({"label": "tiny lstm: seconds per step (both layers), slope over the sequence length",
                   "seconds_per_step": slope, "canary_seconds": statistics.median(canaries)})
    print(f"  tiny LSTM: {slope * 1e6:.1f} us per step; "
          + "  ".join(f"{p_['label']}: {p_.get('profiled', {}).get('kernels', 0):.0f} kernels" for p_ in points[:-1]), flush=True)
    return points


HARNESS_CASES = {  # probe op -> validation cases of that op whose host sets the pace
    "linear": ["linear/b8x256->256/fp32", "linear/b8x256->256/amp-bf16"],
    "flatten": ["flatten/64x2048x1x1/fp32"],
    "add": ["add/8x256/fp32"],
    "layernorm": ["layernorm/8x768/fp32"],
    "matmul": ["matmul/64x64@64x64/fp32"],
}


def phase_harness(dev, workloads, started) -> list:
    """The probe's steady_layer_probes (restricted to HARNESS_CASES' ops through its layer_cases)
    and measure_pytorch.py's measure_layer, alternating in one process: each round records the probe's
    figure with its canary window and the validation's steady-state median with its canaries, both in
    seconds and in canaries. Six rounds fresh, then six after the validation's imports and one model
    case (BERT-base b32, as measure_model runs it)."""
    import types
    all_cases = {c["id"]: c for c in mp.layer_cases(False)}
    tiny = probe.layer_cases(dev)
    restricted = {op: tiny[op] for op in HARNESS_CASES}
    clock = mp.Clock(dev)
    args = types.SimpleNamespace(warmup=3, repeats=30)
    rounds = []

    def one_round(label):
        p = probe.Probe(dev, repeats=11, warmup=2)
        original = probe.layer_cases
        probe.layer_cases = lambda d: restricted
        try:
            with contextlib.redirect_stdout(sys.stderr):
                probe.steady_layer_probes(p, 11, 50)
        finally:
            probe.layer_cases = original
        result = {"label": label, "at_seconds": time.perf_counter() - started, "probe": {}, "validation": {}}
        for key, fig in p.figures.items():
            result["probe"][key] = {"seconds": fig["seconds"], "canary_seconds": fig.get("host_canary_seconds")}
        for cases in HARNESS_CASES.values():
            for case_id in cases:
                try:
                    rec = mp.measure_layer(all_cases[case_id], dev, clock, args, 0.3)
                except Exception as exc:  # noqa: BLE001
                    print(f"  {case_id}: {probe.first_line(exc)}", file=sys.stderr)
                    continue
                result["validation"][case_id] = {
                    "seconds": rec["forward_backward_steady_seconds"]["median"],
                    "canary_seconds": rec["host_canary_seconds"]["median"],
                    "repetitions": rec["steady_repetitions"]}
        shown = []
        for op, cases in HARNESS_CASES.items():
            fig = result["probe"].get(f"layer_steady_{op}")
            if fig and fig["canary_seconds"]:
                shown.append(f"{op} probe {fig['seconds'] * 1e6:6.1f} ({fig['seconds'] / fig['canary_seconds']:5.1f} c)")
            for case_id in cases:
                v = result["validation"].get(case_id)
                if v:
                    shown.append(f"{case_id} {v['seconds'] * 1e6:6.1f} ({v['seconds'] / v['canary_seconds']:5.1f} c, x{v['repetitions']})")
        print(f"[{result['at_seconds']:6.1f} s] {label}: " + " | ".join(shown), flush=True)
        rounds.append(result)

    for i in range(6):
        one_round(f"fresh ({i + 1})")
    for name in ("torchvision", "transformers"):
        with contextlib.suppress(ImportError):
            __import__(name)
    spec = next((m for m in mp.model_cases(False) if m["id"] == "bert-base/b32xs128/amp-bf16"), None)
    if spec is not None:
        try:
            mp.measure_model(spec, dev, clock, types.SimpleNamespace(smoke=False, model_repeats=5, model_warmup=2), 3.0)
        except Exception as exc:  # noqa: BLE001
            print(f"  model case: {probe.first_line(exc)}", file=sys.stderr)
        mp.clear_memory(dev)
    for i in range(6):
        one_round(f"after imports and a model case ({i + 1})")
    return rounds


REPS_PER_BATCH = [5, 10, 20, 50, 100]


def phase_reps(dev, workloads, started) -> list:
    """Each HARNESS_CASES validation case (LayerRun.forward_backward_steady, as measure_pytorch.py
    times a batch) and each probe tiny layer (steady_layer_probes' loop, CUDA events) at every
    REPS_PER_BATCH length, interleaved over twenty rounds, a canary before each batch: seconds per
    repetition by batch length, in seconds and in canaries."""
    all_cases = {c["id"]: c for c in mp.layer_cases(False)}
    clock = mp.Clock(dev)
    loops = {}
    for op, cases in HARNESS_CASES.items():
        build, make_inputs = probe.layer_cases(dev)[op]
        fn, inputs, params, ctx, grad = probe.tiny_layer(dev, build, make_inputs, False)
        leaves = [t for t in inputs if t.requires_grad] + [q for q in params if q.requires_grad]

        def probe_batch(reps, parts=(fn, inputs, leaves, ctx, grad)):
            clock.sync()
            clock.start()
            probe.steady_repetitions(*parts, reps)
            return clock.stop() / reps
        loops[f"probe {op}"] = probe_batch
        for case_id in cases:
            with mp.tf32_flags(all_cases[case_id]["precision"]):
                run = mp.LayerRun(all_cases[case_id], dev)
            loops[f"case {case_id}"] = lambda reps, run=run: run.forward_backward_steady(clock, reps)
    for batch in loops.values():
        batch(10)
    samples = {name: {str(r): [] for r in REPS_PER_BATCH} for name in loops}
    canaries = {name: {str(r): [] for r in REPS_PER_BATCH} for name in loops}
    for _ in range(20):
        for name, batch in loops.items():
            for reps in REPS_PER_BATCH:
                canaries[name][str(reps)].append(mp.canary_seconds_per_op(dev))
                samples[name][str(reps)].append(batch(reps))
    result = {"label": "reps", "at_seconds": time.perf_counter() - started, "seconds": {}, "canaries": {}}
    for name in loops:
        result["seconds"][name] = {r: statistics.median(v) for r, v in samples[name].items()}
        result["canaries"][name] = {r: statistics.median(v) for r, v in canaries[name].items()}
        shown = "  ".join(f"x{r} {result['seconds'][name][r] * 1e6:6.1f} ({result['seconds'][name][r] / result['canaries'][name][r]:4.1f} c)"
                          for r in result["seconds"][name])
        print(f"{name:36s} {shown}", flush=True)
    return [result]


PYTHON_MODELS = ("resnet50/b32x224/amp-bf16", "bert-base/b32xs128/amp-bf16", "gpt2-small/b4xs1024/amp-bf16",
                 "vit-b-16/b32x224/amp-bf16")


def _median_seconds(fn, reps: int = 9, before=None) -> float:
    """Median host seconds of fn() (the call's own time, up to its return), `before()` untimed first."""
    times = []
    for _ in range(reps):
        if before is not None:
            before()
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
        del result
    return statistics.median(times)


def _reference_costs(device) -> dict:
    """Seconds per call, on `device`: a chain of 200 adds of (32, 128, 768) tensors that require
    grad, 200 calls of a tiny Linear module (8x64 -> 64), 200 calls of an empty module (returns its
    input), and (host only) 200 calls of a plain Python function with keyword arguments."""
    x = torch.zeros(32, 128, 768, device=device, requires_grad=True)
    y = torch.zeros(32, 128, 768, device=device)
    lin = torch.nn.Linear(64, 64).to(device)
    xs = torch.zeros(8, 64, device=device)

    class Empty(torch.nn.Module):
        def forward(self, t):
            return t
    empty = Empty()

    def f(a, b=None, c=None):
        return a if b is None else b

    def chain_add():
        t = x
        for _ in range(200):
            t = t + y
        return t

    def linear_calls():
        for _ in range(200):
            out = lin(xs)
        return out

    def empty_calls():
        for _ in range(200):
            out = empty(xs)
        return out

    def python_calls():
        for _ in range(200):
            out = f(1, b=None, c=2)
        return out
    chain_add(), linear_calls(), empty_calls()
    sync()
    return {"add_chain": _median_seconds(chain_add, before=sync) / 200,
            "linear_module": _median_seconds(linear_calls, before=sync) / 200,
            "empty_module": _median_seconds(empty_calls) / 200,
            "python_call": _median_seconds(python_calls) / 200}


def _forward_counts(fn) -> dict:
    """The aten operators (by name) and module calls of one fn() call."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops[str(func.overloadpacket.__name__)] += 1
            return func(*args, **(kwargs or {}))
    modules = [0]

    def pre_hook(module, inputs):
        modules[0] += 1
    handle = torch.nn.modules.module.register_module_forward_pre_hook(pre_hook)
    try:
        with Count() as counter:
            result = fn()
    finally:
        handle.remove()
    del result
    return {"aten_ops": sum(counter.ops.values()), "module_calls": modules[0], "by_op": dict(counter.ops.most_common())}


def _ready_python_models(dev, optimizer_steps: bool, only=PYTHON_MODELS):
    """PYTHON_MODELS made ready to train on `dev`, each inside its precision mode's TF32 flags and
    warmed by three steps (optimizer.step() too where `optimizer_steps`): yields
    (spec, model, batch, loss_fn, optimizer, forward), forward() the loss under the mode's autocast."""
    for spec in mp.model_cases(False):
        if spec["id"] not in only:
            continue
        mode = spec["precision"]
        with mp.tf32_flags(mode):
            try:
                _, model, batch, loss_fn, _, opt, _ = mp.ready_model(spec, dev, False)
            except mp.Skip as exc:
                print(f"  {spec['id']}: skipped ({exc})", flush=True)
                continue

            def forward(model=model, batch=batch, loss_fn=loss_fn, mode=mode):
                with mp.autocast_ctx(mode, dev.type):
                    return loss_fn(model, batch)
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                forward().backward()
                if optimizer_steps:
                    opt.step()
            sync()
            yield spec, model, batch, loss_fn, opt, forward
            del model, batch, opt, forward


def phase_python(dev, workloads, started) -> list:
    """PYTHON_MODELS on `dev` and on the meta device: the forward's host seconds, aten ops and
    module calls, with reference costs on both devices and a canary before each model."""
    meta = torch.device("meta")
    points = [{"label": "references", "at_seconds": time.perf_counter() - started,
               "device": _reference_costs(dev), "meta": _reference_costs(meta),
               "canary_seconds": mp.canary_seconds_per_op(dev)}]
    print("references (us per call): " + "  ".join(
        f"{where} {k} {v * 1e6:.2f}" for where in ("device", "meta") for k, v in points[0][where].items()), flush=True)
    for spec, model, batch, loss_fn, opt, forward in _ready_python_models(dev, optimizer_steps=False):
        mode = spec["precision"]
        record = {"label": spec["id"], "batch": spec["batch"]}
        def before(opt=opt):
            opt.zero_grad(set_to_none=True)
            sync()
        record["canary_seconds"] = mp.canary_seconds_per_op(dev)
        record["forward_seconds"] = _median_seconds(forward, before=before)
        record["device_counts"] = _forward_counts(forward)
        del model, batch, opt
        mp.clear_memory(dev)
        try:
            torch.manual_seed(0)
            model, batch, loss_fn, _ = mp.build_model(spec, meta, False)
            model.to(meta)
            model.train()
            batch = {k: v.to(meta) for k, v in batch.items()}

            def meta_forward(model=model, batch=batch, loss_fn=loss_fn):
                with mp.autocast_ctx(mode, dev.type):
                    return loss_fn(model, batch)
            meta_forward()
            record["meta_forward_seconds"] = _median_seconds(meta_forward)
            record["meta_counts"] = _forward_counts(meta_forward)
        except Exception as exc:  # a model whose forward needs real data (an .item(), a mask check)
            record["meta_error"] = mp.first_line(exc)
        del model, batch
        record["at_seconds"] = time.perf_counter() - started
        points.append(record)
        dc, mc = record["device_counts"], record.get("meta_counts", {})
        print(f"  {spec['id']:34s} forward {record['forward_seconds'] * 1e3:6.2f} ms ({dc['aten_ops']} ops, "
              f"{dc['module_calls']} module calls) | meta "
              + (f"{record['meta_forward_seconds'] * 1e3:6.2f} ms ({mc['aten_ops']} ops)" if "meta_forward_seconds" in record
                 else record.get("meta_error", "-"))
              + f" | canary {record['canary_seconds'] * 1e6:.1f} us", flush=True)
    return points


def phase_modules(dev, workloads, started) -> list:
    """PYTHON_MODELS on `dev`: the host seconds of each part of a training step (forward to the
    loss, backward(), optimizer.step(), each timed to its return after a synchronize, the GPU
    idle at its start), then the forward's host seconds inside each module call (forward pre- and
    post-hooks on every module, perf_counter; the hooks' own cost is in each figure), with a canary
    before each model. roofsim's host time per layer at that canary sets them in context."""
    points = []
    for spec, model, batch, _, opt, forward in _ready_python_models(dev, optimizer_steps=True):
        record = {"label": spec["id"], "batch": spec["batch"]}
        record["canary_seconds"] = mp.canary_seconds_per_op(dev)
        parts = {"forward": [], "backward": [], "optimizer": []}
        for _ in range(REPS // 3):
            opt.zero_grad(set_to_none=True)
            sync()
            t0 = time.perf_counter()
            loss = forward()
            t1 = time.perf_counter()
            sync()
            t2 = time.perf_counter()
            loss.backward()
            t3 = time.perf_counter()
            sync()
            t4 = time.perf_counter()
            opt.step()
            t5 = time.perf_counter()
            sync()
            parts["forward"].append(t1 - t0)
            parts["backward"].append(t3 - t2)
            parts["optimizer"].append(t5 - t4)
            del loss
        record["part_seconds"] = {k: statistics.median(v) for k, v in parts.items()}
        paths = {id(m): name or "(model)" for name, m in model.named_modules()}
        opened, spent = {}, collections.defaultdict(float)

        def pre_hook(module, inputs):
            opened.setdefault(id(module), []).append(time.perf_counter())

        def post_hook(module, inputs, output):
            stack = opened.get(id(module))
            if stack:
                spent[paths.get(id(module), type(module).__name__)] += time.perf_counter() - stack.pop()
        handles = [torch.nn.modules.module.register_module_forward_pre_hook(pre_hook),
                   torch.nn.modules.module.register_module_forward_hook(post_hook)]
        per_rep = []
        try:
            for _ in range(REPS // 3):
                opt.zero_grad(set_to_none=True)
                sync()
                spent.clear()
                t0 = time.perf_counter()
                loss = forward()
                spent["(forward)"] = time.perf_counter() - t0
                per_rep.append(dict(spent))
                loss.backward()
                sync()
                del loss
        finally:
            for h in handles:
                h.remove()
        record["module_forward_seconds"] = {k: statistics.median(r.get(k, 0.0) for r in per_rep) for k in per_rep[0]}
        record["module_classes"] = {paths[id(m)]: type(m).__name__ for m in model.modules() if paths[id(m)] in per_rep[0]}
        record["canary_after_seconds"] = mp.canary_seconds_per_op(dev)
        del model, batch, opt
        mp.clear_memory(dev)
        record["at_seconds"] = time.perf_counter() - started
        points.append(record)
        ps = record["part_seconds"]
        print(f"  {spec['id']:34s} forward {ps['forward'] * 1e3:6.2f} ms, backward {ps['backward'] * 1e3:6.2f} ms, "
              f"optimizer {ps['optimizer'] * 1e3:6.2f} ms | hooked forward "
              f"{record['module_forward_seconds']['(forward)'] * 1e3:6.2f} ms | canary "
              f"{record['canary_seconds'] * 1e6:.1f} / {record['canary_after_seconds'] * 1e6:.1f} us", flush=True)
    return points


def _autograd_nodes(root) -> list:
    """Every autograd node reachable from `root` (a grad_fn), each once."""
    seen, order, todo = set(), [], [root]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        order.append(node)
        todo.extend(n for n, _ in getattr(node, "next_functions", ()))
    return order


def phase_autograd(dev, workloads, started) -> list:
    """PYTHON_MODELS on `dev`: where backward()'s host time goes. The host seconds of backward()
    alone (from a synchronize to its return), then with a pre-hook and a hook on every autograd node
    of the step's graph (perf_counter in the engine's thread; the hooks' own cost is in each node's
    figure and in the total): seconds and count per node class (AddmmBackward0, ...), a canary
    before and after."""
    points = []
    for spec, model, batch, _, opt, forward in _ready_python_models(dev, optimizer_steps=False):
        record = {"label": spec["id"], "batch": spec["batch"], "canary_seconds": mp.canary_seconds_per_op(dev)}
        plain, hooked, per_rep = [], [], []
        for hooks in [False] * (REPS // 3) + [True] * (REPS // 3):
            opt.zero_grad(set_to_none=True)
            loss = forward()
            handles, opened = [], {}
            spent, counts = collections.defaultdict(float), collections.Counter()
            if hooks:
                for node in _autograd_nodes(loss.grad_fn):
                    name = type(node).__name__

                    def pre(grad_outputs, key=id(node)):
                        opened[key] = time.perf_counter()

                    def post(grad_inputs, grad_outputs, key=id(node), name=name):
                        t0 = opened.pop(key, None)
                        if t0 is not None:
                            spent[name] += time.perf_counter() - t0
                            counts[name] += 1
                    try:
                        handles.append(node.register_prehook(pre))
                        handles.append(node.register_hook(post))
                    except (AttributeError, RuntimeError):
                        pass
            sync()
            t0 = time.perf_counter()
            loss.backward()
            seconds = time.perf_counter() - t0
            sync()
            for h in handles:
                h.remove()
            del loss
            (hooked if hooks else plain).append(seconds)
            if hooks:
                per_rep.append((dict(spent), dict(counts)))
        record["backward_seconds"] = statistics.median(plain)
        record["hooked_backward_seconds"] = statistics.median(hooked)
        names = sorted({n for spent, _ in per_rep for n in spent})
        record["node_seconds"] = {n: statistics.median(spent.get(n, 0.0) for spent, _ in per_rep) for n in names}
        record["node_counts"] = {n: max(counts.get(n, 0) for _, counts in per_rep) for n in names}
        record["canary_after_seconds"] = mp.canary_seconds_per_op(dev)
        record["at_seconds"] = time.perf_counter() - started
        points.append(record)
        top = sorted(record["node_seconds"].items(), key=lambda kv: -kv[1])[:5]
        print(f"  {spec['id']:34s} backward {record['backward_seconds'] * 1e3:6.2f} ms, hooked "
              f"{record['hooked_backward_seconds'] * 1e3:6.2f} ms, {sum(record['node_counts'].values())} nodes | "
              + ", ".join(f"{n} {v * 1e3:.2f}" for n, v in top)
              + f" | canary {record['canary_seconds'] * 1e6:.1f} / {record['canary_after_seconds'] * 1e6:.1f} us", flush=True)
    return points


def _profiled_host_by_name(step, reps: int) -> dict:
    """torch.profiler (CPU + CUDA) over `reps` calls of step(): per event name on the host (aten
    operators, CUDA runtime and driver calls, autograd nodes), calls and self host seconds per
    repetition, and the GPU kernels per repetition."""
    rows, kernels = {}, 0
    for avg in _profiled(step, reps).key_averages():
        if avg.device_type == torch.autograd.DeviceType.CUDA:
            kernels += avg.count
            continue
        self_us = getattr(avg, "self_cpu_time_total", 0.0)
        rows[avg.key] = {"calls": avg.count / reps, "self_seconds": self_us * 1e-6 / reps}
    return {"kernels": kernels / reps, "by_name": dict(sorted(rows.items(), key=lambda kv: -kv[1]["self_seconds"]))}


def phase_ops(dev, workloads, started) -> list:
    """PYTHON_MODELS on `dev`: where a step's host time goes by aten operator and CUDA call, under
    torch.profiler (its own cost is in every figure; read the shares, not the totals): the forward
    and backward() of a step, three repetitions, then ViT-B/16's patch convolution alone (its
    forward took 694 us of host in the modules phase against 107 predicted)."""
    points = []
    for spec, model, batch, _, opt, forward in _ready_python_models(dev, optimizer_steps=False):
        def step(opt=opt, forward=forward):
            opt.zero_grad(set_to_none=True)
            forward().backward()
        record = {"label": spec["id"], "batch": spec["batch"], "canary_seconds": mp.canary_seconds_per_op(dev)}
        record.update(_profiled_host_by_name(step, 3))
        record["at_seconds"] = time.perf_counter() - started
        points.append(record)
        top = list(record["by_name"].items())[:8]
        print(f"  {spec['id']:34s} {record['kernels']:.0f} kernels | "
              + ", ".join(f"{n} x{v['calls']:.0f} {v['self_seconds'] * 1e3:.2f} ms" for n, v in top), flush=True)
        if spec["id"].startswith("vit"):
            conv = model.conv_proj
            x = batch["x"].detach()

            def conv_forward(conv=conv, x=x, mode=spec["precision"]):
                with mp.autocast_ctx(mode, dev.type):
                    return conv(x)

            def conv_step(conv=conv):
                conv.zero_grad(set_to_none=True)
                out = conv_forward()
                out.backward(torch.ones_like(out))
            sub = {"label": spec["id"] + " conv_proj", "input_shape": list(x.shape),
                   "forward_seconds": _median_seconds(conv_forward, before=sync),
                   "canary_seconds": mp.canary_seconds_per_op(dev)}
            sub.update(_profiled_host_by_name(conv_step, 5))
            points.append(sub)
            top = list(sub["by_name"].items())[:8]
            print(f"  {sub['label']:34s} forward {sub['forward_seconds'] * 1e6:.0f} us | "
                  + ", ".join(f"{n} x{v['calls']:.0f} {v['self_seconds'] * 1e6:.0f} us" for n, v in top), flush=True)
    return points


def phase_autograd_thread(dev, workloads, started) -> list:
    """BERT-base b32 (amp-bf16), eight rounds: the canary (the main thread's speed), a backward
    canary (measure_pytorch.backward_canary_seconds_per_node: autograd's device thread), and the
    model's backward() from a synchronize to its return, median of three. Run in several processes
    one after another: does backward() move between processes with the backward canary when the
    canary does not?"""
    points = []
    for spec, model, batch, _, opt, forward in _ready_python_models(dev, optimizer_steps=False,
                                                                    only=("bert-base/b32xs128/amp-bf16",)):
        for _ in range(3):
            mp.backward_canary_seconds_per_node(dev)
        for round_ in range(8):
            record = {"label": spec["id"], "round": round_, "canary_seconds": mp.canary_seconds_per_op(dev),
                      "backward_canary_seconds": mp.backward_canary_seconds_per_node(dev)}
            times = []
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                loss = forward()
                sync()
                t0 = time.perf_counter()
                loss.backward()
                times.append(time.perf_counter() - t0)
                sync()
                del loss
            record["backward_seconds"] = statistics.median(times)
            record["backward_canary_after_seconds"] = mp.backward_canary_seconds_per_node(dev)
            record["at_seconds"] = time.perf_counter() - started
            points.append(record)
            print(f"  {spec['id']} round {round_}: canary {record['canary_seconds'] * 1e6:5.1f} us, backward canary "
                  f"{record['backward_canary_seconds'] * 1e6:5.1f} / {record['backward_canary_after_seconds'] * 1e6:5.1f} us "
                  f"per node, backward() {record['backward_seconds'] * 1e3:6.2f} ms", flush=True)
    return points


GC_MODELS = PYTHON_MODELS + ("bert-base/b128xs128/amp-bf16",)
GC_ROUNDS = 6
GC_TIMINGS = 15  # forward-only timings, then whole-step timings, per round and setting


def _current_cpu() -> int:
    """The CPU this thread last ran on (/proc/thread-self/stat, field 39), -1 where unreadable."""
    try:
        with open("/proc/thread-self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[36])
    except (OSError, IndexError, ValueError):
        return -1


class _CollectionLog:
    """gc.callbacks: the collections that run while armed, by generation, with their seconds."""

    def __init__(self):
        self.started = None
        self.counts = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]

    def __call__(self, phase, info):
        if phase == "start":
            self.started = time.perf_counter()
        elif self.started is not None:
            generation = info.get("generation", 0)
            self.counts[generation] += 1
            self.seconds[generation] += time.perf_counter() - self.started
            self.started = None

    def reset(self):
        self.started, self.counts, self.seconds = None, [0, 0, 0], [0.0, 0.0, 0.0]


def phase_gc(dev, workloads, started) -> list:
    """GC_MODELS on `dev`: forward-only and whole-step seconds with Python's collector on and off,
    alternating by round, each timing with the collections inside it and the CPU it ran on."""
    points = []
    log = _CollectionLog()
    gc.callbacks.append(log)
    try:
        for spec, model, batch, _, opt, forward in _ready_python_models(dev, optimizer_steps=True, only=GC_MODELS):
            record = {"label": spec["id"], "batch": spec["batch"], "tracked_objects": len(gc.get_objects()),
                      "gc_thresholds": list(gc.get_threshold()), "rounds": []}

            def step(opt=opt, forward=forward):
                opt.zero_grad(set_to_none=True)
                forward().backward()
                opt.step()

            def forward_only(opt=opt, forward=forward):
                opt.zero_grad(set_to_none=True)
                return forward()

            for round_ in range(GC_ROUNDS):
                for collector_on in (True, False):
                    if not collector_on:
                        gc.disable()
                    try:
                        entry = {"round": round_, "collector": "on" if collector_on else "off",
                                 "canary_seconds": mp.canary_seconds_per_op(dev), "timings": []}
                        for kind, region in (("forward", forward_only), ("step", step)):
                            for _ in range(GC_TIMINGS):
                                sync()
                                cpu_before = _current_cpu()
                                log.reset()
                                t0 = time.perf_counter()
                                result = region()
                                sync()
                                elapsed = time.perf_counter() - t0
                                counts, seconds = list(log.counts), list(log.seconds)
                                del result
                                entry["timings"].append({"kind": kind, "seconds": elapsed, "cpu_before": cpu_before,
                                                         "cpu_after": _current_cpu(), "collections": counts,
                                                         "collection_seconds": seconds})
                    finally:
                        gc.enable()
                    record["rounds"].append(entry)
                    fw = [t["seconds"] for t in entry["timings"] if t["kind"] == "forward"]
                    st = [t["seconds"] for t in entry["timings"] if t["kind"] == "step"]
                    gcs = sum(sum(t["collection_seconds"]) for t in entry["timings"])
                    cpus = sorted({t["cpu_before"] for t in entry["timings"]} | {t["cpu_after"] for t in entry["timings"]})
                    print(f"  {spec['id']:32s} r{round_} gc {entry['collector']:3s} forward {statistics.median(fw) * 1e3:6.2f} "
                          f"({min(fw) * 1e3:5.2f}-{max(fw) * 1e3:5.2f}) step {statistics.median(st) * 1e3:6.2f} "
                          f"({min(st) * 1e3:5.2f}-{max(st) * 1e3:5.2f}) ms | collections {gcs * 1e3:6.2f} ms | "
                          f"cpus {cpus} | canary {entry['canary_seconds'] * 1e6:.1f} us", flush=True)
            del model, batch, opt
            mp.clear_memory(dev)
            record["at_seconds"] = time.perf_counter() - started
            points.append(record)
    finally:
        gc.callbacks.remove(log)
    return points


LEAD_MODELS = PYTHON_MODELS + ("bert-base/b128xs128/amp-bf16", "resnet50/b128x224/amp-bf16")
LEAD_ROUNDS = 3
LEAD_STEPS = 20


def phase_lead(dev, workloads, started) -> list:
    """LEAD_MODELS on `dev`: per step, each phase's host return and GPU end (CUDA events) from one
    synchronize, seconds; the host's lead at each phase's end is the second minus the first."""
    points = []
    for spec, model, batch, _, opt, forward in _ready_python_models(dev, optimizer_steps=True, only=LEAD_MODELS):
        record = {"label": spec["id"], "batch": spec["batch"], "rounds": []}
        for round_ in range(LEAD_ROUNDS):
            entry = {"round": round_, "canary_seconds": mp.canary_seconds_per_op(dev),
                     "backward_canary_seconds": mp.backward_canary_seconds_per_node(dev), "steps": []}
            for _ in range(LEAD_STEPS):
                events = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
                sync()
                events[0].record()
                t0 = time.perf_counter()
                opt.zero_grad(set_to_none=True)
                loss = forward()
                t_forward = time.perf_counter()
                events[1].record()
                loss.backward()
                t_backward = time.perf_counter()
                events[2].record()
                opt.step()
                t_optimizer = time.perf_counter()
                events[3].record()
                sync()
                t_end = time.perf_counter()
                del loss
                gpu = [events[0].elapsed_time(e) * 1e-3 for e in events[1:]]
                entry["steps"].append({"host_return_seconds": [t_forward - t0, t_backward - t0, t_optimizer - t0],
                                       "gpu_end_seconds": gpu, "wall_seconds": t_end - t0})
            record["rounds"].append(entry)
            med = lambda xs: statistics.median(xs) * 1e3  # noqa: E731
            host = [med([s["host_return_seconds"][i] for s in entry["steps"]]) for i in range(3)]
            gpu = [med([s["gpu_end_seconds"][i] for s in entry["steps"]]) for i in range(3)]
            lead = [med([s["gpu_end_seconds"][i] - s["host_return_seconds"][i] for s in entry["steps"]]) for i in range(3)]
            print(f"  {spec['id']:32s} r{round_} host returns {host[0]:6.2f} {host[1]:6.2f} {host[2]:6.2f} | GPU ends "
                  f"{gpu[0]:6.2f} {gpu[1]:6.2f} {gpu[2]:6.2f} | lead {lead[0]:5.2f} {lead[1]:5.2f} {lead[2]:5.2f} ms | "
                  f"wall {med([s['wall_seconds'] for s in entry['steps']]):6.2f} | canary "
                  f"{entry['canary_seconds'] * 1e6:.1f} / {entry['backward_canary_seconds'] * 1e6:.1f} us", flush=True)
        del model, batch, opt
        mp.clear_memory(dev)
        record["at_seconds"] = time.perf_counter() - started
        points.append(record)
    return points


GPU_ALONE_MODELS = ("bert-base/b128xs128/amp-bf16", "bert-base/b32xs128/amp-bf16", "gpt2-small/b16xs1024/amp-bf16",
                    "vit-b-16/b128x224/amp-bf16", "resnet50/b128x224/amp-bf16")
GPU_ALONE_SLEEP_S = 0.08


def phase_gpu_alone(dev, workloads, started) -> list:
    """GPU_ALONE_MODELS on `dev`: forward and backward() GPU seconds in the stream (events from the
    phase before's end) and queued behind a GPU sleep (events from the sleep's end), per step."""
    if not has_gpu_sleep(dev):
        raise SystemExit("error: the gpu_alone phase needs a CUDA device")
    cycles_per_s = probe.gpu_sleep_cycles_per_second()
    points = []
    for spec, model, batch, _, opt, forward in _ready_python_models(dev, optimizer_steps=True, only=GPU_ALONE_MODELS):
        record = {"label": spec["id"], "batch": spec["batch"], "sleep_seconds": GPU_ALONE_SLEEP_S, "rounds": []}
        for round_ in range(3):
            entry = {"round": round_, "canary_seconds": mp.canary_seconds_per_op(dev), "in_stream": [], "alone": []}
            for _ in range(8):
                ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
                sync()
                ev[0].record()
                opt.zero_grad(set_to_none=True)
                loss = forward()
                ev[1].record()
                loss.backward()
                ev[2].record()
                opt.step()
                sync()
                del loss
                entry["in_stream"].append({"forward_seconds": ev[0].elapsed_time(ev[1]) * 1e-3,
                                           "backward_seconds": ev[1].elapsed_time(ev[2]) * 1e-3})
            for _ in range(8):
                timing, held = {}, {}
                opt.zero_grad(set_to_none=True)
                parts = (("forward", lambda: held.update(loss=forward())), ("backward", lambda: held["loss"].backward()))
                for part, issue in parts:
                    queued = queued_batch(issue, 1, GPU_ALONE_SLEEP_S, cycles_per_s)
                    timing[f"{part}_seconds"] = queued["gpu_seconds"]
                    timing[f"{part}_issue_seconds"] = queued["issue_seconds"]
                    timing[f"{part}_host_done_before_wake"] = queued["issue_seconds"] < queued["hold_seconds"]
                opt.step()
                sync()
                held.clear()
                entry["alone"].append(timing)
            record["rounds"].append(entry)
            med = lambda rows, k: statistics.median(r[k] for r in rows) * 1e3  # noqa: E731
            print(f"  {spec['id']:32s} r{round_} in stream forward {med(entry['in_stream'], 'forward_seconds'):6.2f} "
                  f"backward {med(entry['in_stream'], 'backward_seconds'):6.2f} | alone forward "
                  f"{med(entry['alone'], 'forward_seconds'):6.2f} backward {med(entry['alone'], 'backward_seconds'):6.2f} ms "
                  f"(host done first {sum(r['forward_host_done_before_wake'] and r['backward_host_done_before_wake'] for r in entry['alone'])}/8) "
                  f"| canary {entry['canary_seconds'] * 1e6:.1f} us", flush=True)
        del model, batch, opt
        mp.clear_memory(dev)
        record["at_seconds"] = time.perf_counter() - started
        points.append(record)
    return points


def phase_backward_idle(dev, workloads, started) -> list:
    """BERT-base b128's backward() on `dev`, CUDA events and host clock at the start of each
    encoder layer's backward (and the pooler's, the embeddings'), in the stream and alone."""
    if not has_gpu_sleep(dev):
        raise SystemExit("error: the backward_idle phase needs a CUDA device")
    cycles_per_s = probe.gpu_sleep_cycles_per_second()
    points = []
    for spec, model, batch, _, opt, forward in _ready_python_models(dev, optimizer_steps=True,
                                                                    only=("bert-base/b128xs128/amp-bf16",)):
        inner = model.bert
        marks = [("pooler", inner.pooler)] + [(f"encoder.layer.{i}", layer) for i, layer in
                                              reversed(list(enumerate(inner.encoder.layer)))] + [("embeddings", inner.embeddings)]
        names = [name for name, _ in marks]
        seen = []  # (name, host seconds, event) of the current backward

        def make_hook(name):
            def hook(module, grad_output):
                event = torch.cuda.Event(enable_timing=True)
                event.record()
                seen.append((name, time.perf_counter(), event))
            return hook
        handles = [m.register_full_backward_pre_hook(make_hook(name)) for name, m in marks]
        record = {"label": spec["id"], "marks": names, "rounds": []}
        try:
            for round_ in range(3):
                entry = {"round": round_, "canary_seconds": mp.canary_seconds_per_op(dev),
                         "backward_canary_seconds": mp.backward_canary_seconds_per_node(dev), "in_stream": [], "alone": []}
                for alone in (False, True):
                    for _ in range(8):
                        opt.zero_grad(set_to_none=True)
                        loss = forward()
                        sync()
                        seen.clear()
                        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        if alone:
                            torch.cuda._sleep(int(0.08 * cycles_per_s))
                        start.record()
                        t0 = time.perf_counter()
                        loss.backward()
                        t1 = time.perf_counter()
                        end.record()
                        sync()
                        row = {"host_seconds": {n: t - t0 for n, t, _ in seen},
                               "gpu_seconds": {n: start.elapsed_time(e) * 1e-3 for n, _, e in seen},
                               "host_return_seconds": t1 - t0, "gpu_end_seconds": start.elapsed_time(end) * 1e-3}
                        (entry["alone"] if alone else entry["in_stream"]).append(row)
                        opt.step()
                        del loss
                record["rounds"].append(entry)
                med = lambda rows, key, n: statistics.median(r[key][n] for r in rows) * 1e3  # noqa: E731
                cols = []
                for n in names:
                    cols.append(f"{n.replace('encoder.layer.', 'L')}: {med(entry['in_stream'], 'host_seconds', n):5.1f}h "
                                f"{med(entry['in_stream'], 'gpu_seconds', n):5.1f}g {med(entry['alone'], 'gpu_seconds', n):5.1f}a")
                end_s = statistics.median(r["gpu_end_seconds"] for r in entry["in_stream"]) * 1e3
                end_a = statistics.median(r["gpu_end_seconds"] for r in entry["alone"]) * 1e3
                print(f"  round {round_} canary {entry['canary_seconds'] * 1e6:.1f} / {entry['backward_canary_seconds'] * 1e6:.1f} us; "
                      f"end {end_s:5.1f} in stream, {end_a:5.1f} alone (ms)\n    " + "\n    ".join(cols), flush=True)
        finally:
            for h in handles:
                h.remove()
        del model, batch, opt
        mp.clear_memory(dev)
        record["at_seconds"] = time.perf_counter() - started
        points.append(record)
    return points


BACKWARD_START_LENGTHS = (10, 100, 300, 1000, 3000)


def phase_backward_start(dev, workloads, started) -> list:
    """backward() of chains of tiny multiplications and of tiny Linear layers on `dev`: host seconds
    from the call to its first node's pre-hook (what runs before any node: the engine's traversal of
    the graph, its thread's hand-off) and to its return, by the chain's length."""
    points = []
    for round_ in range(3):
        for family in ("mul", "linear"):
            for length in BACKWARD_START_LENGTHS:
                if family == "linear" and length > 1000:
                    continue
                x = torch.randn(4, 4, device=dev, requires_grad=True)
                weights = [torch.randn(4, 4, device=dev, requires_grad=True) for _ in range(length)] if family == "linear" else []
                firsts, totals = [], []
                for _ in range(15):
                    y = x
                    for i in range(length):
                        y = y * 1.0001 if family == "mul" else torch.nn.functional.linear(y, weights[i])
                    loss = y.sum()
                    mark = []
                    loss.grad_fn.register_prehook(lambda grad_outputs: mark.append(time.perf_counter()))
                    sync()
                    t0 = time.perf_counter()
                    loss.backward()
                    t1 = time.perf_counter()
                    sync()
                    firsts.append(mark[0] - t0)
                    totals.append(t1 - t0)
                    x.grad = None
                    for w in weights:
                        w.grad = None
                    del y, loss
                record = {"label": f"{family} x{length}", "round": round_, "family": family, "nodes": length,
                          "to_first_node_seconds": statistics.median(firsts), "backward_seconds": statistics.median(totals),
                          "canary_seconds": mp.canary_seconds_per_op(dev), "at_seconds": time.perf_counter() - started}
                points.append(record)
                print(f"  r{round_} {family:6s} x{length:5d}: to first node {record['to_first_node_seconds'] * 1e6:8.1f} us, "
                      f"backward() {record['backward_seconds'] * 1e3:7.3f} ms | canary {record['canary_seconds'] * 1e6:.1f} us", flush=True)
    return points


PHASES = {"blocks": phase_blocks, "mixed": phase_mixed, "profiler": phase_profiler, "groups": phase_groups, "validation": phase_validation,
          "threads": phase_threads, "imports": phase_imports, "depth": phase_depth, "clocks": phase_clocks,
          "overlap": phase_overlap, "sizes": phase_sizes, "model_sum": phase_model_sum, "model_host": phase_model_host,
          "lstm": phase_lstm, "harness": phase_harness, "reps": phase_reps, "python": phase_python,
          "modules": phase_modules, "autograd": phase_autograd, "ops": phase_ops, "autograd_thread": phase_autograd_thread,
          "gc": phase_gc, "lead": phase_lead,
          "gpu_alone": phase_gpu_alone, "backward_idle": phase_backward_idle,
          "backward_start": phase_backward_start}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--phase", choices=tuple(PHASES), required=True)
    ap.add_argument("--families", default="",
                    help="sizes phase: only the op families whose names start with these, comma-separated "
                         "(e.g. 'mha,linear amp-bf16'); the optimizer families only without it")
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--device", default="cuda", help="torch device (default cuda; cpu tests the script only)")
    args = ap.parse_args(argv)
    ONLY_FAMILIES[:] = [f.strip() for f in args.families.split(",") if f.strip()]
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print("error: CUDA is not available (--device cpu tests the script only)", file=sys.stderr)
        return 2
    started = time.perf_counter()
    workloads = make_workloads(dev)
    print("workloads (us per forward + backward): " + " | ".join(workloads), flush=True)
    points = PHASES[args.phase](dev, workloads, started)
    doc = {"kind": "roofsim-host-state-diagnostic", "phase": args.phase, "torch": torch.__version__,
           "device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu", "cpu": mp.host_cpu_name(),
           "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "command": " ".join([sys.executable] + sys.argv), "rounds": ROUNDS, "repetitions": REPS,
           "cpu_affinity": sorted(os.sched_getaffinity(0)),
           "points": points}
    mp.write_json_atomic(args.out, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
