"""Tests of tools/roofsim_export: PYTHONPATH=tools python3 -m unittest discover -s tests/export

Expected numbers are computed here from the models themselves (their modules, hooked shapes, the
rules of docs/ir-format.md and include/roofsim/lower.hpp), never read back from the exporter."""

import collections
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOLS = os.path.join(ROOT, "tools")
MODELS = os.path.join(HERE, "models.py")
for path in (TOOLS, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import ir_rules  # noqa: E402
import models  # noqa: E402
import roofsim_export  # noqa: E402
from roofsim_export import model_code  # noqa: E402

try:
    import torchvision
except ImportError:  # pragma: no cover
    torchvision = None

EXPORTED = []  # every document the tests produce; checked against docs/ir-format.md at the end


def export(model, inputs, **kw):
    doc = roofsim_export.export(model, inputs, **kw)
    EXPORTED.append(doc)
    return doc


def run_cli(*args, timeout=240):
    env = dict(os.environ, PYTHONPATH=TOOLS + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "roofsim_export", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=ROOT)


def aten(doc, op, phase=None):
    return [k for k in doc["kernels"] if k["op"] == "aten::" + op and (phase is None or k["phase"] == phase)]


def of_kind(doc, kind, phase=None):
    return [k for k in doc["kernels"] if k["kind"] == kind and (phase is None or k["phase"] == phase)]


def conv_output_shapes(model, x):
    """(module, output shape) of every Conv2d call of a real forward pass on the CPU."""
    calls = []
    hooks = [m.register_forward_hook(lambda m, i, o: calls.append((m, tuple(o.shape))))
             for m in model.modules() if isinstance(m, nn.Conv2d)]
    with torch.no_grad():
        model.eval()(x)
    for h in hooks:
        h.remove()
    return calls


@unittest.skipIf(torchvision is None, "torchvision is not installed")
class TorchvisionResNet(unittest.TestCase):
    batch, size = 2, 64

    def check(self, name):
        model = getattr(torchvision.models, name)()
        calls = conv_output_shapes(model, torch.randn(self.batch, 3, self.size, self.size))
        expected_flops = sum(2 * math.prod(shape) * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]
                             for m, shape in calls)
        param_bytes = sum(p.numel() * 4 for p in model.parameters())
        doc = export(model, {"x": torch.empty(self.batch, 3, self.size, self.size),
                             "y": torch.empty(self.batch, dtype=torch.long)}, precision="fp32", optimizer="sgd")
        convs = of_kind(doc, "conv")
        passes = collections.Counter(k["conv"]["pass"] for k in convs)
        self.assertEqual(passes["forward"], len(calls))
        self.assertEqual(passes["backward-filter"], len(calls))
        self.assertEqual(passes["backward-data"], len(calls) - 1)  # the stem's input needs no gradient
        stem = [k["conv"]["pass"] for k in convs if k["layer"] == "conv1"]
        self.assertEqual(sorted(stem), ["backward-filter", "forward"])
        forward = [k for k in convs if k["conv"]["pass"] == "forward"]
        self.assertEqual(sum(k["flops"] for k in forward), expected_flops)
        for k in convs:  # fp32 mode: cuDNN convolutions may use TF32 (PyTorch's default)
            self.assertEqual(k["unit"], "tf32-tensor")
            self.assertEqual(k["phase"], "forward" if k["conv"]["pass"] == "forward" else "backward")
        self.assertEqual(doc["memory"]["parameters_bytes"], param_bytes)
        self.assertEqual(doc["memory"]["gradients_bytes"], param_bytes)
        self.assertEqual(doc["memory"]["optimizer_state_bytes"], param_bytes)  # SGD momentum buffers
        self.assertGreater(doc["memory"]["peak_bytes"], 3 * param_bytes)
        self.assertEqual(doc["parameters"], {"elements": param_bytes // 4,
                                             "tensors": len(list(model.parameters()))})
        self.assertFalse(of_kind(doc, "unknown"), [k["op"] for k in of_kind(doc, "unknown")])
        # one host marker per module call: a forward conv marker before each forward conv kernel
        markers = [k for k in doc["kernels"] if k["op"] == "dispatch conv2d" and k["phase"] == "forward"]
        self.assertEqual(len(markers), len(calls))
        # batch norms carry their reduction shape: channels, and batch x height x width per channel,
        # from the shapes the modules saw (a hook on each BatchNorm2d)
        seen = {}
        hooks = [m.register_forward_hook(lambda m, i, o, name=name: seen.__setitem__(name, tuple(i[0].shape)))
                 for name, m in model.named_modules() if isinstance(m, nn.BatchNorm2d)]
        with torch.no_grad():
            model.eval()(torch.randn(self.batch, 3, self.size, self.size))
        for h in hooks:
            h.remove()
        norms = [k for k in doc["kernels"] if k["kind"] == "normalization"]
        self.assertEqual(len(norms), 2 * len(seen))  # forward and backward
        for k in norms:
            n, c, h, w = seen[k["layer"]]
            self.assertEqual(k["norm"], {"groups": c, "group_elements": n * h * w}, k["layer"])
        # the model is handed back with its own (real) parameters
        self.assertTrue(all(type(p) is nn.Parameter and p.device.type == "cpu" for p in model.parameters()))
        return doc

    def test_resnet18(self):
        self.check("resnet18")

    def test_resnet50(self):
        doc = self.check("resnet50")
        # SGD (momentum, weight decay), foreach, as lower.hpp: add (wd), mul_, add_, add_
        opt = [(k["op"], k["args"]) for k in doc["kernels"] if k["kind"] == "optimizer"]
        ops = [op for i, (op, args) in enumerate(opt) if i == 0 or (op, args) != opt[i - 1]]  # one per call
        self.assertEqual(ops, ["aten::_foreach_add", "aten::_foreach_mul_", "aten::_foreach_add_",
                               "aten::_foreach_add_"])
        p = doc["memory"]["parameters_bytes"]
        mul = [k for k in doc["kernels"] if k["op"] == "aten::_foreach_mul_"]
        self.assertEqual(sum(k["bytes_read"] for k in mul), p)
        self.assertEqual(sum(k["bytes_written"] for k in mul), p)
        markers = [k for k in doc["kernels"] if k["phase"] == "optimizer" and k["kind"] == "host-only"
                   and k.get("host_op")]
        self.assertEqual([(k["host_op"], k["layer"]) for k in markers], [("optimizer", "optimizer")])
        self.assertTrue(all(k["host_dispatch"] is False for k in doc["kernels"]
                            if k["phase"] == "optimizer" and k["kind"] == "optimizer"))


class MlpAgainstLowering(unittest.TestCase):
    """Linear - GELU - Linear: the GEMMs and bias reductions lower.hpp's linear rule gives."""

    B, IN, H, C = 8, 64, 256, 10

    def test_fp32_gemms_and_reductions(self):
        model, inputs = models.mlp(self.IN, self.H, self.C, self.B)
        doc = export(model, inputs, precision="fp32", optimizer="sgd")
        B, IN, H, C = self.B, self.IN, self.H, self.C

        def key(op, phase, m, n, k):
            return (op, phase, min(m, n), max(m, n), k)

        # lower.hpp linear: forward addmm {rows, out, in}; backward dX mm {rows, in, out} (only when the
        # input needs a gradient), dW mm {out, in, rows}, db sum over rows
        expected = [key("aten::addmm", "forward", B, H, IN), key("aten::addmm", "forward", B, C, H),
                    key("aten::mm", "backward", B, H, C), key("aten::mm", "backward", C, H, B),
                    key("aten::mm", "backward", H, IN, B)]
        got = [key(k["op"], k["phase"], k["gemm"]["m"], k["gemm"]["n"], k["gemm"]["k"]) for k in of_kind(doc, "gemm")]
        self.assertEqual(sorted(got), sorted(expected))
        for k in of_kind(doc, "gemm"):
            g = k["gemm"]
            self.assertEqual(g["batch"], 1)
            self.assertEqual(k["flops"], 2 * g["m"] * g["n"] * g["k"])
            self.assertEqual(k["unit"] if "unit" in k else "fp32", "fp32")  # fp32 mode: matmul TF32 off
        # operand layouts (row-major, A then B; T: a transposed view): y = x W^T reads W transposed,
        # dX = dY W reads both as stored, dW = dY^T X reads dY transposed
        layouts = sorted((k["op"], k["gemm"]["m"], k["gemm"]["layout"]) for k in of_kind(doc, "gemm"))
        self.assertEqual(layouts, sorted([("aten::addmm", B, "NT"), ("aten::addmm", B, "NT"), ("aten::mm", B, "NN"),
                                          ("aten::mm", C, "TN"), ("aten::mm", H, "TN")]))
        fc1 = [k for k in aten(doc, "addmm") if k["layer"] == "0"][0]
        # bytes: each distinct input once (bias, x, W) plus the output
        self.assertEqual(fc1["bytes_read"], 4 * (H + B * IN + IN * H))
        self.assertEqual(fc1["bytes_written"], 4 * B * H)
        sums = aten(doc, "sum", "backward")
        self.assertEqual(sorted((k["layer"], k["bytes_read"], k["bytes_written"]) for k in sums),
                         [("0", 4 * B * H, 4 * H), ("2", 4 * B * C, 4 * C)])
        # backward in reverse layer order: fc2's kernels before fc1's
        layers = [k["layer"] for k in doc["kernels"] if k["phase"] == "backward" and k["kind"] == "gemm"]
        self.assertEqual(layers, ["2", "2", "0"])
        # markers: linear, gelu, linear forward; each backward run of a module gets one
        fwd = [k["host_op"] for k in doc["kernels"] if k["phase"] == "forward" and k.get("host_op")
               and k["op"].startswith("dispatch") and k["layer"] in ("0", "1", "2")]
        self.assertEqual(fwd, ["linear", "gelu", "linear"])
        bwd = [(k["host_op"], k["layer"]) for k in doc["kernels"] if k["phase"] == "backward"
               and k["op"].startswith("dispatch") and k["layer"] in ("0", "1", "2")]
        self.assertEqual(bwd, [("linear", "2"), ("gelu", "1"), ("linear", "0")])
        for k in doc["kernels"]:
            if k["layer"] in ("0", "2") and not k["op"].startswith("dispatch"):
                self.assertEqual((k["host_dispatch"], k["source_op"]), (False, "linear"))
        gelu = aten(doc, "gelu")[0]
        self.assertEqual((gelu["kind"], gelu["bytes_read"], gelu["bytes_written"]), ("elementwise", 4 * B * H, 4 * B * H))
        back = aten(doc, "gelu_backward")[0]
        self.assertEqual((back["bytes_read"], back["bytes_written"]), (8 * B * H, 4 * B * H))
        # log_softmax's backward reads dY and its forward's output, which its schema names `output`:
        # an input, not an out= argument
        lsm = aten(doc, "_log_softmax_backward_data")[0]
        self.assertEqual((lsm["bytes_read"], lsm["bytes_written"]), (8 * B * C, 4 * B * C))

    def test_backward_reading_the_output(self):
        """tanh_backward(grad_output, output) reads both, though one is named `output`."""
        B, H = self.B, self.H
        model = nn.Sequential(nn.Linear(self.IN, H), nn.Tanh(), nn.Linear(H, self.C))
        doc = export(model, {"x": torch.randn(B, self.IN)}, precision="fp32", optimizer="none")
        back = aten(doc, "tanh_backward")
        self.assertEqual([(k["bytes_read"], k["bytes_written"]) for k in back], [(8 * B * H, 4 * B * H)])

    def test_amp_bf16_casts(self):
        model, inputs = models.mlp(self.IN, self.H, self.C, self.B)
        doc = export(model, inputs, precision="amp-bf16", optimizer="adamw")
        B, IN, H, C = self.B, self.IN, self.H, self.C
        casts = aten(doc, "_to_copy", "forward")
        weights = {(IN * H * 4, IN * H * 2), (H * 4, H * 2), (H * C * 4, H * C * 2), (C * 4, C * 2)}
        down = {(k["bytes_read"], k["bytes_written"]) for k in casts if k["dtype"] == "float32"}
        self.assertTrue(weights <= down, down)  # every weight and bias cast to bfloat16 once per forward
        self.assertIn((B * IN * 4, B * IN * 2), down)  # and the input of the first linear
        for k in casts:
            if (k["bytes_read"], k["bytes_written"]) in weights:
                self.assertEqual((k["kind"], k["source_op"], k["host_dispatch"]), ("elementwise", "linear", False))
                self.assertIn(k["layer"], ("0", "2"))
        for k in of_kind(doc, "gemm"):
            self.assertEqual((k["dtype"], k["unit"]), ("bfloat16", "bf16-tensor"))
        # the weight gradients are cast back to float32 in backward
        up = {(k["bytes_read"], k["bytes_written"]) for k in aten(doc, "_to_copy", "backward")
              if k["dtype"] == "bfloat16"}
        self.assertTrue({(r2, r4) for r4, r2 in weights} <= up, up)
        # cross_entropy under autocast: log_softmax in the logits' dtype, nll_loss (autocast's float32
        # list) on a float32 copy
        loss = [(k["op"], k["dtype"]) for k in doc["kernels"] if k["layer"] == "loss" and k["phase"] == "forward"
                and k["op"].startswith("aten::") and k["kind"] != "host-only"]
        self.assertEqual(loss, [("aten::_log_softmax", "bfloat16"), ("aten::_to_copy", "bfloat16"),
                                ("aten::nll_loss_forward", "float32")])
        # AdamW: two state tensors per parameter
        self.assertEqual(doc["memory"]["optimizer_state_bytes"], 2 * doc["memory"]["parameters_bytes"])

    def test_activation_casts_get_markers(self):
        """Autocast's cast of an activation inside a known module is a host op of its own (a `cast`
        marker before its kernel, and one before its gradient's cast back); a weight's is not."""
        B, IN, H, C = self.B, self.IN, self.H, self.C
        model = nn.Sequential(nn.Linear(IN, H), nn.LayerNorm(H), nn.Linear(H, C))
        doc = export(model, {"x": torch.randn(B, IN)}, precision="amp-bf16", optimizer="none")
        kernels = [k for k in doc["kernels"] if k["layer"] in ("0", "1", "2")]
        marked = []  # (phase, layer, bytes read, bytes written) of the cast each marker stands before
        for k, after in zip(kernels, kernels[1:]):
            if k["kind"] == "host-only" and k.get("host_op") == "cast":
                self.assertEqual((k["op"], after["op"], after["layer"]), ("dispatch cast", "aten::_to_copy", k["layer"]))
                marked.append((k["phase"], k["layer"], after["bytes_read"], after["bytes_written"]))
        # forward: x (float32, no gradient) into linear 0; linear 0's bfloat16 output into the layer
        # norm (autocast's float32 list); the norm's float32 output into linear 2. Backward: the
        # gradients of the last two cast back (x needs none).
        self.assertEqual(marked, [("forward", "0", 4 * B * IN, 2 * B * IN), ("forward", "1", 2 * B * H, 4 * B * H),
                                  ("forward", "2", 4 * B * H, 2 * B * H),
                                  ("backward", "2", 2 * B * H, 4 * B * H), ("backward", "1", 4 * B * H, 2 * B * H)])
        # the weights' and biases' casts, forward and backward, have none
        casts = [k for k in kernels if k["op"] == "aten::_to_copy"]
        self.assertEqual(len(casts) - len(marked), 8)

    def test_bf16_mode(self):
        model, inputs = models.mlp(self.IN, self.H, self.C, self.B)
        doc = export(model, inputs, precision="bf16", optimizer="sgd")
        elements = sum(p.numel() for p in model.parameters())
        self.assertEqual(doc["memory"]["parameters_bytes"], 2 * elements)
        self.assertFalse(aten(doc, "_to_copy", "forward")[:0])
        self.assertTrue(all(k["dtype"] == "bfloat16" for k in of_kind(doc, "gemm")))
        self.assertTrue(all(k["dtype"] == "bfloat16" for k in of_kind(doc, "optimizer")))

    def test_amp_fp16_grad_scaler(self):
        model, inputs = models.mlp(self.IN, self.H, self.C, self.B)
        doc = export(model, inputs, precision="amp-fp16", optimizer="sgd")
        self.assertTrue(all(k["dtype"] == "float16" for k in of_kind(doc, "gemm")))
        scaler = [k["op"] for k in doc["kernels"] if k["layer"] == "grad_scaler"]
        self.assertIn("aten::_amp_foreach_non_finite_check_and_unscale_", scaler)
        self.assertEqual(scaler[-1], "aten::_amp_update_scale_")


class TransformerBlock(unittest.TestCase):
    """A GPT-2-like model: embeddings, LayerNorm, causal attention, GELU MLP, tied LM head."""

    def test_gpt_like(self):
        layers, batch, seq = 2, 2, 16
        model, inputs = models.tiny_gpt(batch=batch, seq=seq, use_sdpa=True, layers=layers)
        heads, dim = model.h[0].attn.heads, model.wte.embedding_dim
        doc = export(model, inputs, precision="amp-bf16", optimizer="adamw")
        norms = [k for k in aten(doc, "native_layer_norm", "forward")]
        self.assertEqual(len(norms), 2 * layers + 1)
        self.assertTrue(all(k["kind"] == "normalization" and k["dtype"] == "float32" for k in norms))
        self.assertTrue(all(k["norm"] == {"groups": batch * seq, "group_elements": dim} for k in norms))
        norm_backward = aten(doc, "native_layer_norm_backward")
        self.assertEqual(len([k for k in norm_backward if k["kind"] == "normalization"]), 2 * layers + 1)
        # the weight and bias gradients (a reduction) carry the layer's row shape too
        self.assertEqual(len([k for k in norm_backward if k["kind"] == "reduction"]), 2 * layers + 1)
        self.assertTrue(all(k["norm"] == {"groups": batch * seq, "group_elements": dim} for k in norm_backward))
        # bias gradients: sums of dY over its rows, with their shape (columns, rows)
        bias_sums = [k for k in aten(doc, "sum", "backward") if "norm" in k]
        self.assertTrue(bias_sums)
        for k in bias_sums:
            self.assertEqual(k["kind"], "reduction")
            self.assertEqual(k["norm"]["group_elements"], batch * seq, k["layer"])
            self.assertIn(k["norm"]["groups"], (dim, 3 * dim, 4 * dim), k["layer"])
        # only a sum over exactly the leading dims is a column sum (a square matrix summed over rows is not)
        from roofsim_export.kernels import per_column
        square = torch.empty(8, 8)
        self.assertEqual(per_column(square, torch.empty(8), [1]), {})
        self.assertEqual(per_column(square, torch.empty(8), [0]), {"norm": {"groups": 8, "group_elements": 8}})
        self.assertEqual(per_column(torch.empty(2, 3, 4), torch.empty(4), [-3, -2]),
                         {"norm": {"groups": 4, "group_elements": 6}})
        self.assertEqual(per_column(torch.empty(2, 1, 4), torch.empty(1, 1, 4), [0]),  # expand's backward
                         {"norm": {"groups": 4, "group_elements": 2}})
        self.assertEqual(per_column(torch.empty(2, 3, 4), torch.empty(3, 4), [0]), {})
        # the residual adds: the float32 stream plus a block's bfloat16 output, each read in its own
        # dtype by PyTorch's casting loop; an op on one dtype is never marked mixed
        n = batch * seq * dim
        residual = [k for k in aten(doc, "add", "forward") if k["layer"] in {f"h.{i}" for i in range(layers)}]
        self.assertEqual([(k.get("mixed_dtypes"), k["bytes_read"], k["bytes_written"]) for k in residual],
                         [(True, n * (4 + 2), n * 4)] * (2 * layers))
        for k in of_kind(doc, "elementwise"):
            if k.get("mixed_dtypes"):
                self.assertTrue("bfloat16[" in k["args"] and "float32[" in k["args"], k["args"])
        gelu = aten(doc, "gelu", "forward")
        self.assertEqual(len(gelu), layers)
        self.assertEqual({k["source_op"] for k in gelu}, {"gelu"})
        self.assertEqual(len(aten(doc, "embedding", "forward")), 2)
        self.assertEqual(len([k for k in aten(doc, "embedding_dense_backward") if k["kind"] == "embedding"]), 2)
        self.assertEqual(len(aten(doc, "native_dropout", "forward")), 1 + 2 * layers - (1 if model.h[0].attn.use_sdpa
                                                                                         else 0) * layers)
        self.assertEqual(len(aten(doc, "_log_softmax", "forward")), 1)
        attention = of_kind(doc, "attention")
        if model.h[0].attn.use_sdpa:  # torch >= 2.0: fused scaled-dot-product attention
            forward = [k for k in attention if k["phase"] == "forward"]
            self.assertEqual(len(forward), layers)
            a = forward[0]["attention"]
            self.assertEqual((a["batch"], a["heads"], a["seq_q"], a["seq_kv"], a["head_dim"], a["causal"]),
                             (batch, heads, seq, seq, dim // heads, True))
            self.assertEqual(forward[0]["flops"], 4 * batch * heads * seq * seq * (dim // heads) // 2)
            self.assertEqual(len([k for k in attention if k["phase"] == "backward"]), layers)
            # each attention op's marker costs the host figures of the backend it ran on (sdpa where
            # the probe has none: the CPU's)
            for i, k in enumerate(doc["kernels"]):
                if k["kind"] == "attention":
                    marker = next(m for m in reversed(doc["kernels"][:i]) if m["op"].startswith("dispatch"))
                    self.assertEqual(marker["host_op"], roofsim_export.ops.attention_host_op(k["op"].split("::")[-1]) or "sdpa")
        else:  # torch 1.13: the math path, QK^T and PV as batched GEMMs, softmax in between
            self.assertEqual(attention, [])
            bmm = [k for k in aten(doc, "bmm", "forward") if k["layer"].endswith(".attn")]
            self.assertEqual(len(bmm), 2 * layers)
            self.assertTrue(all(k["gemm"]["batch"] == batch * heads for k in bmm))
            self.assertEqual({(k["gemm"]["m"], k["gemm"]["k"]) for k in bmm}, {(seq, dim // heads), (seq, seq)})
            softmax = [k for k in of_kind(doc, "softmax", "forward") if k["layer"].endswith(".attn")]
            self.assertEqual(len(softmax), layers)
            self.assertEqual(softmax[0]["dtype"], "float32")  # autocast runs softmax in float32
        # the tied LM head: one parameter, its two gradients summed
        self.assertEqual(doc["parameters"]["tensors"], len(list(model.parameters())))
        lm = [k for k in of_kind(doc, "gemm", "forward") if k["layer"] == "lm_head"]
        self.assertEqual(len(lm), 1)
        self.assertEqual(lm[0]["gemm"]["n"] * lm[0]["gemm"]["m"], batch * seq * model.wte.num_embeddings)

    def test_multihead_attention_module(self):
        # nn.MultiheadAttention is Python calling torch: its code runs as model code (timed), its two
        # projections (F.linear) are linear layers, and the ops between them are costed as what they are
        model, inputs = models.mha()
        doc = export(model, inputs, optimizer="none")
        fwd = [k for k in doc["kernels"] if k["phase"] == "forward" and k["layer"] == "attn"]
        bwd = [k for k in doc["kernels"] if k["phase"] == "backward" and k["layer"] == "attn"]
        self.assertFalse([k for k in doc["kernels"] if k["op"] == "dispatch mha"])
        self.assertEqual([k["host_op"] for k in fwd if k["op"] == "dispatch linear"], ["linear", "linear"])
        self.assertEqual([k["host_op"] for k in bwd if k["op"] == "dispatch linear"], ["linear", "linear"])
        projections = [k for k in fwd if k["op"] in ("aten::mm", "aten::addmm")]
        self.assertEqual(len(projections), 2)  # the input projection's (q, k, v at once) and the output's
        self.assertTrue(all(k["source_op"] == "linear" and not k["host_dispatch"] for k in projections))
        self.assertEqual(projections[0]["gemm"]["n"], 3 * 16)
        # need_weights=True (the default): the weights path, two batched products and a softmax
        self.assertEqual(len([k for k in fwd if k["op"] == "aten::bmm"]), 2)
        self.assertEqual(len([k for k in fwd if k["op"] == "dispatch softmax"]), 1)
        # F.multi_head_attention_forward's own Python, timed as the model's code
        self.assertGreater(sum(k.get("python_seconds", 0) for k in fwd), 0)
        self.assertEqual(doc["optimizer"], {"kind": "none", "fused": False, "weight_decay": False})
        self.assertFalse([k for k in doc["kernels"] if k["phase"] == "optimizer"])

    def test_multihead_attention_without_weights(self):
        model, inputs = models.mha(need_weights=False)
        doc = export(model, inputs, optimizer="none", precision="amp-bf16")
        fwd = [k for k in doc["kernels"] if k["phase"] == "forward" and k["layer"] == "attn"]
        # the projections' casts are theirs, as a Linear module's are: one activation cast each
        self.assertEqual([k["host_op"] for k in fwd if k["op"] == "dispatch linear"], ["linear", "linear"])
        fused = [k for k in fwd if k["kind"] == "attention"]
        # torch 2.x runs SDPA there, a fused attention op with the marker of its own backend's
        # figures; torch 1.13 runs the same math as with weights
        if fused:
            self.assertEqual(len(fused), 1)
            self.assertEqual(len([k for k in fwd if k["op"] == "dispatch sdpa"]), 1)
        else:
            self.assertEqual(len([k for k in fwd if k["op"] == "aten::bmm"]), 2)

    def test_functional_linear_is_a_linear_layer(self):
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.w1, self.b1 = nn.Parameter(torch.empty(8, 16)), nn.Parameter(torch.empty(8))
                self.w2 = nn.Parameter(torch.empty(4, 8))

            def forward(self, x):
                return F.linear(F.linear(x, self.w1, self.b1).relu(), self.w2)

        doc = export(Net(), {"x": torch.empty(2, 5, 16)}, optimizer="none")
        markers = [(k["phase"], k["host_op"]) for k in doc["kernels"] if k["op"] == "dispatch linear"]
        self.assertEqual(markers, [("forward", "linear"), ("forward", "linear_nobias"),
                                   ("backward", "linear_nobias"), ("backward", "linear")])
        gemms = [k for k in doc["kernels"] if k["kind"] == "gemm"]
        self.assertEqual(len(gemms), 2 + 2 * 2 - 1)  # forward 2; backward: data and weight gradients, none for x
        self.assertTrue(all(k["source_op"] == "linear" and not k["host_dispatch"] for k in gemms))
        self.assertFalse([k for k in doc["kernels"] if k["op"] in ("dispatch matmul", "dispatch add") and k["layer"] != "loss"])

    def test_attention_host_ops(self):
        ops = roofsim_export.ops
        self.assertEqual(ops.attention_host_op("_scaled_dot_product_cudnn_attention"), "sdpa_cudnn")
        self.assertEqual(ops.attention_host_op("_scaled_dot_product_flash_attention_backward"), "sdpa_flash")
        self.assertEqual(ops.attention_host_op("_efficient_attention_forward"), "sdpa_efficient")
        self.assertIsNone(ops.attention_host_op("_scaled_dot_product_flash_attention_for_cpu"))
        self.assertIsNone(ops.attention_host_op("bmm"))


class DropoutWithoutProbability(unittest.TestCase):
    def test_p0_dropout_runs_nothing(self):
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(16, 16)
                self.keep = nn.Dropout(0.0)   # torchvision's ViT default: returns its input
                self.drop = nn.Dropout(0.1)

            def forward(self, x):
                return self.drop(self.keep(self.fc(x)))

        doc = export(Net(), {"x": torch.empty(4, 16)}, optimizer="none")
        keep = [k for k in doc["kernels"] if k["layer"] == "keep"]
        # one forward marker costed as the identity call, no kernel, no backward (no autograd node)
        self.assertEqual([(k["op"], k["phase"], k["host_op"]) for k in keep], [("dispatch dropout", "forward", "dropout_identity")])
        drop = [k for k in doc["kernels"] if k["layer"] == "drop" and k["op"] == "dispatch dropout"]
        self.assertEqual([(k["phase"], k["host_op"]) for k in drop], [("forward", "dropout"), ("backward", "dropout")])
        self.assertTrue(any(k["op"] == "aten::native_dropout" for k in doc["kernels"] if k["layer"] == "drop")
                        or any(k["op"].startswith("aten::bernoulli") for k in doc["kernels"] if k["layer"] == "drop"))


class InferenceMode(unittest.TestCase):
    """mode="inference": one forward of model.eval() under torch.inference_mode(); no loss, no
    backward, no optimizer."""

    def assert_forward_only(self, doc):
        self.assertEqual(doc["mode"], "inference")
        self.assertEqual({k["phase"] for k in doc["kernels"]}, {"forward"})
        self.assertEqual(doc["optimizer"], {"kind": "none", "fused": False, "weight_decay": False})
        # no loss: what the exporter adds after the model's forward is in layer "loss"
        self.assertEqual([k["op"] for k in doc["kernels"] if k["layer"] == "loss"], [])
        ops = {k["op"] for k in doc["kernels"]}
        for op in ("_log_softmax", "nll_loss_forward", "nll_loss2d_forward"):
            self.assertNotIn("aten::" + op, ops)
        self.assertEqual((doc["memory"]["gradients_bytes"], doc["memory"]["optimizer_state_bytes"]), (0, 0))
        self.assertIn("inference", doc["origin"])
        self.assertIn("inference_mode", doc["memory"]["method"])
        self.assertEqual(ir_rules.violations(doc), [])

    def test_mlp_forward_only(self):
        B, IN, H, C = 8, 64, 256, 10
        model, inputs = models.mlp(IN, H, C, B)
        doc = export(model, inputs, mode="inference")
        self.assert_forward_only(doc)

        def key(op, m, n, k):
            return (op, min(m, n), max(m, n), k)

        # lower.hpp linear, forward alone: addmm {rows, out, in} per layer; the target y is not passed
        got = [key(k["op"], k["gemm"]["m"], k["gemm"]["n"], k["gemm"]["k"]) for k in of_kind(doc, "gemm")]
        self.assertEqual(sorted(got), sorted([key("aten::addmm", B, H, IN), key("aten::addmm", B, C, H)]))
        markers = [k["host_op"] for k in doc["kernels"] if k["op"].startswith("dispatch")]
        self.assertEqual(markers, ["linear", "gelu", "linear"])
        param_bytes = 4 * sum(p.numel() for p in model.parameters())
        self.assertEqual(doc["memory"]["parameters_bytes"], param_bytes)
        # parameters, the input x and the activations of one forward; nothing saved for a backward
        training = export(model, inputs, optimizer="none")
        self.assertGreaterEqual(doc["memory"]["peak_bytes"], param_bytes + 4 * B * IN)
        self.assertLess(doc["memory"]["peak_bytes"], training["memory"]["peak_bytes"])
        # the model is handed back as it came: its own parameters, in train mode
        self.assertTrue(model.training and all(m.training for m in model.modules()))
        self.assertTrue(all(type(p) is nn.Parameter and p.device.type == "cpu" for p in model.parameters()))

    def test_training_output_says_training(self):
        model, inputs = models.mlp()
        doc = export(model, inputs)
        self.assertEqual(doc["mode"], "training")
        self.assertEqual(doc["optimizer"]["kind"], "sgd")  # the default optimizer is still SGD
        self.assertEqual({k["phase"] for k in doc["kernels"]}, {"forward", "backward", "optimizer"})
        self.assertTrue([k for k in doc["kernels"] if k["layer"] == "loss" and k["op"].startswith("aten::")])
        self.assertIn("one training step", doc["origin"])
        self.assertEqual(json.loads(roofsim_export.dumps(doc))["mode"], "training")

    def test_dropout_and_batch_norm_in_eval(self):
        B, C, S = 2, 8, 8
        model, inputs = models.conv_bn_dropout(batch=B, size=S)
        train = export(model, inputs, optimizer="none")
        doc = export(model, inputs, mode="inference")
        self.assert_forward_only(doc)

        def layer(d, name):
            return [k for k in d["kernels"] if k["layer"] == name]

        def is_dropout_kernel(k):
            return k["op"] in ("aten::native_dropout", "aten::native_dropout_backward") or \
                k["op"].startswith("aten::bernoulli")

        # dropout: a kernel in training; in eval ATen's dropout returns its input, the module call is
        # its identity marker alone
        self.assertTrue([k for k in layer(train, "drop") if is_dropout_kernel(k)])
        self.assertFalse([k for k in doc["kernels"] if is_dropout_kernel(k)])
        self.assertEqual([(k["op"], k.get("host_op")) for k in layer(doc, "drop")], [("dispatch dropout", "dropout_identity")])
        # batch norm in eval: one normalizing pass over x with the running statistics (read, not
        # updated: no num_batches_tracked += 1), no statistics pass
        x = 4 * B * C * S * S
        norms = [k for k in layer(doc, "bn") if k["kind"] == "normalization"]
        self.assertEqual(len(norms), 1)
        self.assertEqual(norms[0]["norm"], {"groups": C, "group_elements": B * S * S})
        self.assertEqual(norms[0]["bytes_read"], x + 4 * 4 * C)  # x, weight, bias, running mean and var
        self.assertGreaterEqual(norms[0]["bytes_written"], x)
        self.assertNotIn("aten::add_", [k["op"] for k in layer(doc, "bn")])
        trained = [k for k in layer(train, "bn") if k["kind"] == "normalization" and k["phase"] == "forward"]
        self.assertEqual([k["bytes_read"] for k in trained], [2 * x + 4 * 4 * C])  # statistics pass, then normalize
        self.assertIn("aten::add_", [k["op"] for k in layer(train, "bn")])  # num_batches_tracked
        self.assertTrue(model.training and model.bn.training)

    def test_gpt_like_amp_bf16(self):
        layers, batch, seq = 2, 2, 16
        model, inputs = models.tiny_gpt(batch=batch, seq=seq, use_sdpa=True, layers=layers)
        doc = export(model, inputs, precision="amp-bf16", mode="inference")
        self.assert_forward_only(doc)
        self.assertEqual(doc["precision"], "amp-bf16")
        # autocast as in training: the GEMMs in bfloat16 on its tensor cores, the weights cast once
        gemms = of_kind(doc, "gemm")
        self.assertTrue(gemms)
        self.assertTrue(all((k["dtype"], k["unit"]) == ("bfloat16", "bf16-tensor") for k in gemms))
        self.assertTrue(aten(doc, "_to_copy", "forward"))
        self.assertEqual(len([k for k in gemms if k["layer"] == "lm_head"]), 1)  # the logits, no loss after them
        self.assertFalse([k for k in doc["kernels"] if "dropout" in k["op"] and k["op"].startswith("aten::")])
        self.assertEqual(len(aten(doc, "native_layer_norm", "forward")), 2 * layers + 1)
        if model.h[0].attn.use_sdpa:
            self.assertEqual(len(of_kind(doc, "attention")), layers)

    def test_api_refuses_training_arguments(self):
        model, inputs = models.mlp()
        for kw in ({"optimizer": "adamw"}, {"optimizer": "sgd", "fused": True}, {"loss": lambda m, d: m(d["x"]).sum()}):
            with self.assertRaises(roofsim_export.ExportError) as ctx:
                roofsim_export.export(model, inputs, mode="inference", **kw)
            self.assertIn("inference", str(ctx.exception))
        with self.assertRaises(roofsim_export.ExportError):
            roofsim_export.export(model, inputs, mode="eval")
        doc = export(model, inputs, mode="inference", optimizer="none")  # none, given explicitly, is fine
        self.assertEqual(doc["optimizer"]["kind"], "none")

    def test_cli(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "infer.json")
            r = run_cli(f"{MODELS}:conv_bn_dropout", "--mode", "inference", "--summary", "-o", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("inference", r.stdout)
            self.assertNotRegex(r.stdout, r"(?m)^(backward|optimizer) ")
            with open(out) as f:
                doc = json.load(f)
            EXPORTED.append(doc)
            self.assert_forward_only(doc)
            self.assertNotIn("cross_entropy", doc["origin"])  # the factory's loss note is the training step's
            os.unlink(out)
            # an optimizer given with --mode inference is a usage error; nothing is written
            r = run_cli(f"{MODELS}:conv_bn_dropout", "--mode", "inference", "--optimizer", "sgd", "-o", out)
            self.assertEqual(r.returncode, 2)
            self.assertIn("--mode inference", r.stderr)
            self.assertEqual(os.listdir(tmp), [])


class _CodeBetween(nn.Module):
    """Two linear layers with the model's own code between them: code(x) returns the tensor fc2 takes."""

    def __init__(self, code):
        super().__init__()
        self.fc1 = nn.Linear(16, 16)
        self.fc2 = nn.Linear(16, 16)
        self.code = code

    def forward(self, x):
        return self.fc2(self.code(self.fc1(x)))


class ModelCode(unittest.TestCase):
    """The model's own Python between its torch calls is timed; views in it cost a view's chain figure."""

    def test_reference_work_is_the_probes(self):
        import inspect
        from roofsim_export import model_code

        # the framework probe times the exporter's own copy of the reference work, not one of its own
        sys.path.insert(0, os.path.join(ROOT, "calibrate"))
        try:
            import torch_framework_probe as probe
        finally:
            sys.path.remove(os.path.join(ROOT, "calibrate"))
        for fn in (model_code.python_reference_work, model_code.python_reference_calls):
            self.assertEqual(os.path.realpath(inspect.getsourcefile(getattr(probe, fn.__name__))),
                             os.path.realpath(inspect.getsourcefile(fn)), fn.__name__)
            self.assertTrue(inspect.getsourcefile(fn).endswith(os.path.join("roofsim_export", "python_reference.py")))

    def test_slow_python_is_timed_where_it_runs(self):
        def busy():  # pure Python, no torch call
            return sum(i * i for i in range(60000))

        def code(x):
            busy()
            return x.view(2, 32).view(4, 16)  # views in the model's code

        doc = export(_CodeBetween(code), {"x": torch.empty(4, 16)}, optimizer="none")
        alone = []  # the loop timed on its own, five times: a shared host's speed swings by 2-3x between calls
        for _ in range(5):
            t0 = time.perf_counter()
            busy()
            alone.append(time.perf_counter() - t0)
        ks = doc["kernels"]
        code = [i for i, k in enumerate(ks) if "python_seconds" in k]
        self.assertTrue(code)
        self.assertTrue(all(ks[i]["kind"] == "host-only" and ks[i]["phase"] == "forward" and
                            ks[i]["host_dispatch"] is False for i in code))
        total = sum(ks[i]["python_seconds"] for i in code)
        # the busy loop's time, give or take this host's swings: not under half its fastest call alone,
        # not over three times its slowest
        self.assertGreater(total, 0.5 * min(alone))
        self.assertLess(total, 3.0 * max(alone) + 2e-3)
        # it lands between the two layers' markers, as long as the loop (the rest is small)
        longest = max(code, key=lambda i: ks[i]["python_seconds"])
        fc1 = next(i for i, k in enumerate(ks) if k["op"] == "dispatch linear" and k["layer"] == "fc1")
        fc2 = next(i for i, k in enumerate(ks) if k["op"] == "dispatch linear" and k["layer"] == "fc2")
        self.assertLess(fc1, longest)
        self.assertLess(longest, fc2)
        self.assertGreater(ks[longest]["python_seconds"], 0.5 * total)
        # the views: forward markers of their own at the chain's figure (a backward node is no chain's)
        views = [k for k in ks if k["op"] == "aten::view"]
        self.assertEqual([k["host_op"] for k in views if k["phase"] == "forward"], ["view_chain", "view_chain"])
        self.assertTrue(all(k.get("host_op") != "view_chain" for k in views if k["phase"] == "backward"))
        # how it was timed, with this host's fastest call of the reference work
        self.assertGreater(doc["model_code"]["fastest_reference_seconds"], 0)
        # and the median of those calls, the host's speed while it timed the code
        self.assertGreaterEqual(doc["model_code"]["timed_reference_seconds"], doc["model_code"]["fastest_reference_seconds"])
        self.assertIn("TorchFunctionMode", doc["model_code"]["method"])
        self.assertIn(f"{model_code.TIMED_FORWARDS} forwards timed", doc["model_code"]["method"])

    def test_a_slow_moment_in_the_recorded_forward_is_not_its_time(self):
        # the recorded forward (the step's last: one warm-up step, then the timed ones) runs its code
        # ten times as long as the others, as a host slowed for a moment would: the stretches come
        # out at the timed forwards' median
        short_s, long_s = 2e-3, 20e-3
        calls = []

        def code(x):
            calls.append(None)
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < (long_s if len(calls) == 1 + model_code.TIMED_FORWARDS else short_s):
                pass
            return x

        doc = export(_CodeBetween(code), {"x": torch.empty(4, 16)}, optimizer="none")
        self.assertEqual(len(calls), 1 + model_code.TIMED_FORWARDS)
        total = sum(k.get("python_seconds", 0) for k in doc["kernels"])
        self.assertGreater(total, 0.5 * short_s)
        self.assertLess(total, 0.5 * long_s)

    def test_known_modules_hold_their_own_python(self):
        # a model of known modules only (nn.Sequential's loop is all its code): little model code,
        # far less than one busy loop above
        net = nn.Sequential(*[nn.Linear(16, 16) for _ in range(4)])
        doc = export(net, {"x": torch.empty(4, 16)}, optimizer="none")
        total = sum(k.get("python_seconds", 0) for k in doc["kernels"])
        self.assertLess(total, 1e-3)


class StridedInputs(unittest.TestCase):
    def test_layer_norm_copies_a_transposed_input(self):
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(16, 16)
                self.norm = nn.LayerNorm(16)
                self.again = nn.LayerNorm(16)

            def forward(self, x):
                y = self.norm(self.fc(x).transpose(0, 1))  # a transposed view, as a batch-first MHA hands back
                return self.again(y)                         # a contiguous one

        doc = export(Net(), {"x": torch.empty(8, 4, 16)}, optimizer="none")
        norm = [k for k in doc["kernels"] if k["layer"] == "norm" and k["kind"] != "host-only"]
        again = [k for k in doc["kernels"] if k["layer"] == "again" and k["kind"] != "host-only"]
        # layer norm's CUDA kernels make a strided input contiguous first: one copy forward, dispatched
        # on its own; backward, the saved input again (its output's gradient comes contiguous)
        copies = [(k["phase"], k["host_dispatch"], k["bytes_read"], k["bytes_written"]) for k in norm if k["op"] == "aten::clone"]
        self.assertEqual(copies, [("forward", True, 8 * 4 * 16 * 4, 8 * 4 * 16 * 4), ("backward", True, 8 * 4 * 16 * 4, 8 * 4 * 16 * 4)])
        # the contiguous one copies nothing forward; backward, its output's gradient is the loss's
        # expanded ones (a stride-0 view of one element), which it makes dense
        self.assertEqual([(k["phase"], k["bytes_read"], k["bytes_written"]) for k in again if k["op"] == "aten::clone"],
                         [("backward", 4, 8 * 4 * 16 * 4)])
        # the layer norm's own kernels stay costed by its figures
        self.assertTrue(all(not k["host_dispatch"] for k in norm if k["op"] != "aten::clone"))

    def test_elementwise_over_strided_or_broadcast_operands(self):
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(16, 16)
                self.bias = nn.Parameter(torch.zeros(16))

            def forward(self, x):
                y = self.fc(x)
                dense = y * 2.0                      # a dense operand and a scalar: the vectorized loop
                shifted = dense + self.bias          # a broadcast bias
                flipped = torch.relu(shifted.transpose(0, 1))  # a transposed view alone: its output alike, vectorized
                return flipped - dense.transpose(0, 1).contiguous()  # a transposed and a contiguous operand

        doc = export(Net(), {"x": torch.empty(8, 4, 16)}, optimizer="none")
        forward = [k for k in doc["kernels"] if k["phase"] == "forward" and k["kind"] == "elementwise"]
        flags = {k["op"]: k.get("strided", False) for k in forward}
        self.assertEqual(flags.get("aten::mul"), False)
        self.assertEqual(flags.get("aten::add"), True)
        self.assertEqual(flags.get("aten::relu"), False)
        self.assertEqual(flags.get("aten::sub"), True)
        # pooling reads windows, not broadcasts
        pool = export(nn.Sequential(nn.Conv2d(4, 4, 1), nn.MaxPool2d(2)), {"x": torch.empty(2, 4, 8, 8)}, optimizer="none")
        self.assertFalse(any(k.get("strided") for k in pool["kernels"]))


class Convolutions(unittest.TestCase):
    def test_conv1d_grouped_bias_groupnorm(self):
        model, inputs = models.convnet()
        doc = export(model, inputs, optimizer="sgd")
        convs = of_kind(doc, "conv")
        c1 = [k for k in convs if k["layer"] == "conv1d" and k["conv"]["pass"] == "forward"][0]["conv"]
        self.assertEqual((c1["h"], c1["r"], c1["w"], c1["s"], c1["padding"]), (1, 1, 10, 3, [0, 1]))
        dw = [k for k in convs if k["layer"] == "dw" and k["conv"]["pass"] == "forward"][0]["conv"]
        self.assertEqual((dw["groups"], dw["dilation"], dw["padding"]), (16, [2, 2], [2, 2]))
        # biases: one reduction of dY each in backward (aten::convolution_backward)
        bias = [k for k in doc["kernels"] if k["op"] == "aten::convolution_backward" and k["kind"] == "reduction"]
        self.assertEqual(sorted(k["layer"] for k in bias), ["conv", "conv1d", "dw"])
        # the image and sequence inputs need no gradient: the first conv of each path has no backward-data
        data = sorted(k["layer"] for k in convs if k["conv"]["pass"] == "backward-data")
        self.assertEqual(data, ["dw"])
        gn = aten(doc, "native_group_norm", "forward")
        self.assertEqual([k["kind"] for k in gn], ["reduction", "normalization"])
        self.assertEqual(aten(doc, "cat", "forward")[0]["kind"], "copy")


class EmbeddingBackward(unittest.TestCase):
    def test_sorted_beyond_3072_indices(self):
        # PyTorch's CUDA embedding backward: one atomic kernel up to 3072 indices, cub's radix sort and
        # segment sums beyond (31 launches with the zero-fill for int64 indices, as on an H200)
        emb = torch.nn.Embedding(1000, 16)
        counts = {}
        for tokens in (3072, 3073):
            doc = export(emb, {"input": torch.randint(0, 1000, (1, tokens))}, optimizer="sgd")
            ks = aten(doc, "embedding_dense_backward", "backward")
            counts[tokens] = len(ks)
            self.assertEqual(ks[0]["kind"], "elementwise")
            self.assertEqual(ks[0]["bytes_written"], 1000 * 16 * 4)  # zero-fill dW
            self.assertEqual(sum(k["bytes_written"] for k in ks if k["kind"] == "embedding"),
                             tokens * 16 * 4 * (1 if tokens <= 3072 else 2))
        self.assertEqual(counts, {3072: 2, 3073: 31})


class UnknownOps(unittest.TestCase):
    def test_flagged_not_dropped(self):
        model, inputs = models.unknown_op()
        doc = export(model, inputs, optimizer="sgd")
        unknown = of_kind(doc, "unknown")
        self.assertEqual({k["op"] for k in unknown}, {"aten::lgamma", "aten::digamma", "aten::erfinv"})  # digamma: lgamma's backward
        # the scan before them has a cost model: one read and one write pass
        cumsum = [k for k in doc["kernels"] if k["op"] == "aten::cumsum"]
        self.assertEqual([(k["kind"], k["phase"]) for k in cumsum], [("elementwise", "forward"), ("elementwise", "backward")])
        for k in unknown:
            self.assertEqual(k["layer"], "1")
            self.assertIn(k["op"], k["flag"])
            self.assertIn("float32[4, 32]", k["flag"])
            self.assertEqual((k["bytes_read"], k["bytes_written"]), (4 * 4 * 32, 4 * 4 * 32))
        with self.assertRaises(roofsim_export.ExportError) as ctx:
            roofsim_export.export(model, inputs, strict=True)
        self.assertIn("aten::lgamma", str(ctx.exception))
        self.assertIn("aten::erfinv", str(ctx.exception))

    def test_strict_cli_refuses(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "u.json")
            r = run_cli(f"{MODELS}:unknown_op", "--strict", "-o", out)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("aten::lgamma", r.stderr)
            self.assertIn("aten::erfinv", r.stderr)
            self.assertFalse(os.path.exists(out))
            self.assertEqual(os.listdir(tmp), [])
            r = run_cli(f"{MODELS}:unknown_op", "-o", out)  # without --strict it is written, flagged
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("unknown", r.stderr)
            with open(out) as f:
                self.assertEqual(ir_rules.violations(json.load(f)), [])


class Failures(unittest.TestCase):
    def test_data_dependent_control_flow(self):
        model, inputs = models.data_dependent()
        with self.assertRaises(roofsim_export.ExportError) as ctx:
            roofsim_export.export(model, inputs)
        text = str(ctx.exception)
        self.assertIn("module '1' (Gate)", text)
        self.assertIn("aten::_local_scalar_dense", text)
        self.assertIn("tensor values", text)
        self.assertTrue(all(type(p) is nn.Parameter for p in model.parameters()))  # parameters restored

    def test_known_values_answer_item(self):
        # a mask of ones checked with `if torch.all(mask == 1)` and a torch.full scale read with .item():
        # values fake tensors can know without data
        model, inputs = models.masked_encoder()
        doc = export(model, inputs)
        questions = aten(doc, "_local_scalar_dense", "forward")
        self.assertEqual(len(questions), 3)
        self.assertTrue(all(k["kind"] == "host-only" for k in questions))
        # each is a copy of a device tensor to the host: the host waits for the GPU there
        self.assertTrue(all(k.get("sync") is True for k in questions))
        # the optimizer's step counters live on the host: reading them waits for nothing
        self.assertFalse([k for k in doc["kernels"] if k["phase"] == "optimizer" and k.get("sync")])
        self.assertEqual(ir_rules.violations(doc), [])

    def test_failed_export_writes_nothing(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "dd.json")
            r = run_cli(f"{MODELS}:data_dependent", "-o", out)
            self.assertEqual(r.returncode, 1)
            self.assertIn("module '1' (Gate)", r.stderr)
            self.assertEqual(os.listdir(tmp), [])
            with open(out, "w") as f:  # an existing file is left as it was
                f.write("old")
            self.assertEqual(run_cli(f"{MODELS}:data_dependent", "-o", out).returncode, 1)
            with open(out) as f:
                self.assertEqual(f.read(), "old")
            self.assertEqual(os.listdir(tmp), ["dd.json"])

    def test_usage_errors(self):
        r = run_cli("torchvision:resnet18", "--input", "x=float32[B,three]", "-o", "/nonexistent/x.json")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--input", r.stderr)
        self.assertEqual(run_cli("torchvision:resnet18", "--precision", "fp8", "-o", "x.json").returncode, 2)
        r = run_cli("no_such_package:factory", "-o", "x.json")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no_such_package", r.stderr)

    def test_help(self):
        r = run_cli("--help")
        self.assertEqual(r.returncode, 0)
        for word in ("torchvision:resnet50", "transformers:gpt2", "--precision", "--strict", "--summary",
                     "--mode", "inference", "roofsim predict --ir"):
            self.assertIn(word, r.stdout)


class Cli(unittest.TestCase):
    def test_torchvision_cli_summary(self):
        if torchvision is None:
            self.skipTest("torchvision is not installed")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r18.json")
            r = run_cli("torchvision:resnet18", "--batch", "2", "--input", "x=float32[B,3,64,64]", "--precision",
                        "amp-bf16", "--summary", "-o", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(r.stdout, r"forward +conv +20 ")
            self.assertRegex(r.stdout, r"backward +conv +39 ")
            with open(out) as f:
                doc = json.load(f)
            EXPORTED.append(doc)
            self.assertEqual((doc["model"], doc["precision"], doc["batch"]), ("resnet18", "amp-bf16", 2))
            self.assertEqual(doc["optimizer"], {"kind": "sgd", "fused": False, "weight_decay": True})  # SGD(weight_decay=1e-4)
            self.assertIn("roofsim_export 1.0.0", doc["origin"])
            x = [k for k in aten(doc, "_to_copy", "forward") if k["layer"] == "conv1"]
            self.assertIn(2 * 3 * 64 * 64 * 4, [k["bytes_read"] for k in x])  # the image, cast to bfloat16


@unittest.skipUnless(os.path.isfile(os.environ.get("ROOFSIM_CLI", "")), "ROOFSIM_CLI (the roofsim binary) is not set")
class PredictFromIr(unittest.TestCase):
    """roofsim predict --ir reads what the exporter writes (ctest sets ROOFSIM_CLI)."""

    def predict(self, doc, *args):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "ir.json")
            roofsim_export.write(doc, path)
            return subprocess.run([os.environ["ROOFSIM_CLI"], "predict", "--ir", path, "--gpu", "h200-sxm", *args],
                                  capture_output=True, text=True, timeout=120)

    def test_predicts_an_exported_model(self):
        model, inputs = models.tiny_gpt()
        r = self.predict(export(model, inputs, precision="amp-bf16", optimizer="adamw"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"step [0-9.]+ ms")

    def test_strict_refuses_unknown_ops(self):
        model, inputs = models.unknown_op()
        doc = export(model, inputs)
        self.assertEqual(self.predict(doc).returncode, 0)
        r = self.predict(doc, "--strict")
        self.assertEqual(r.returncode, 1)
        self.assertIn("lgamma", r.stdout + r.stderr)


class ZFormat(unittest.TestCase):
    """Runs last (unittest sorts classes by name): every document the tests exported follows
    docs/ir-format.md."""

    def test_all_exports_follow_the_format(self):
        if not EXPORTED:
            model, inputs = models.mlp()
            export(model, inputs)
        for doc in EXPORTED:
            self.assertEqual(ir_rules.violations(doc), [], doc.get("model"))
            json.loads(json.dumps(doc))

    def test_validator_can_fail(self):
        model, inputs = models.mlp()
        doc = export(model, inputs)
        broken = json.loads(json.dumps(doc))
        broken["kernels"][1]["kind"] = "warp"
        broken["kernels"][2]["typo"] = 1
        broken["kernels"].append({"op": "aten::x", "kind": "unknown", "phase": "forward", "layer": ""})
        gemm = next(k for k in broken["kernels"] if "gemm" in k)
        gemm["gemm"]["layout"] = "NX"
        found = ir_rules.violations(broken)
        self.assertTrue(any("layout" in v for v in found))
        self.assertTrue(any("kind" in v for v in found))
        self.assertTrue(any("typo" in v for v in found))
        self.assertTrue(any("flag" in v for v in found))
        self.assertTrue(any("forward after" in v for v in found))


if __name__ == "__main__":
    unittest.main()
