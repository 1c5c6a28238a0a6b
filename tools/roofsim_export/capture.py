"""Runs one training step of a real nn.Module on fake tensors and records every aten op it dispatches.

How:
  * parameters, buffers and inputs become fake tensors (torch._subclasses.fake_tensor): shapes,
    dtypes, devices and aliasing without memory or data; no GPU is needed;
  * a TorchDispatchMode above the fake mode sees each aten op (forward, the autograd engine's
    backward ops, the optimizer's) and maps it to kernels (kernels.py);
  * forward ownership: module pre/post hooks keep a stack of module calls; each op belongs to the
    innermost call, its host marker to the outermost call of a module type roofsim knows (ops.py);
  * backward ownership: after each forward op the autograd node of its outputs is claimed by the
    module call that ran the op, with a pre-hook that names that call while the engine runs the
    node; every backward op belongs to the node running when it is dispatched (AccumulateGrad nodes
    to the module whose op used the parameter first);
  * memory: every storage an op creates is tracked by a weak reference until it is freed; the live
    bytes (each allocation rounded up to 512 B, as the CUDA caching allocator does) are summed after
    every op and the maximum is the step's peak.
  * model code: in the recorded forward, the model's own Python between its torch calls, outside
    known modules, is timed on this host (model_code.py) and written as host-only kernels with
    python_seconds, beside this host's time of the Python reference work around the forward.

A warm-up step runs first, unrecorded (the optimizer creates its state on its first step, and SGD's
first momentum step clones instead of updating); the second step is recorded.

Inference (StepSpec.inference): the model in eval() and each step one forward under
torch.no_grad(), which runs the kernels torch.inference_mode() runs (autocast as the precision mode
says), with no loss, no backward and no optimizer. No tensor has an autograd node then, so no node is
claimed and no backward op runs; the module hooks and the model-code clock work as in a training
forward, and composite ops (aten::linear into t and addmm) decompose as they do there."""

from __future__ import annotations

import contextlib
import gc
import statistics
import sys
from dataclasses import dataclass, field

import torch
import torch.nn as nn

from . import compat, model_code, values
from .emulate import CudaEmulation
from .kernels import BATCH_NORM_BACKWARD_OPS, Mapper, describe_args, flat_tensors, hidden_copies
from .ops import (DROPOUT_IDENTITY, FUNCTIONAL_OPS, TRANSPARENT_FUNCTIONS, aten_graph_op, attention_host_op,
                  host_op, host_op_of_functional, module_op)
from .precision import Precision, element_size


class ExportError(Exception):
    """A model step the exporter cannot capture; the message names the module and the aten op."""

    def __init__(self, message: str, data_dependent: bool = False):
        super().__init__(message)
        self.data_dependent = data_dependent
        self.libraries_patched = False


# ---------------------------------------------------------------------------------------------

@dataclass(eq=False)
class Call:
    """One call of a module in the forward."""
    path: str
    type_name: str
    op: str | None                 # the layer-graph op of its module type, None if unknown
    module: nn.Module | None = None
    host_op: str | None = None     # the framework figures of its host cost (ops.host_op)
    known: "Call | None" = None     # the outermost call of a known type on the stack (may be self)
    marker: dict | None = None      # its forward dispatch marker, where it has one
    recorded_at: int = 0            # how many kernels were recorded when it began


@dataclass(eq=False)
class Owner:
    """Who issued an op: the innermost module call (layer) and the known call carrying its host cost."""
    layer: str
    known: Call | None = None
    type_name: str = ""
    cast: bool = False   # an activation's cast autocast inserted in a known call (autocast_cast_of)


@dataclass
class Memory:
    live: dict = field(default_factory=dict)  # storage key -> (weak ref, rounded bytes)
    current: int = 0
    peak: int = 0

    def track(self, t: torch.Tensor) -> None:
        try:
            st = compat.storage_of(t)
            key = compat.storage_key(st)
        except Exception:
            return
        entry = self.live.get(key)
        if entry is not None and not entry[0].expired():
            return
        if entry is not None:
            self.current -= entry[1]
        nbytes = compat.storage_nbytes(st)
        rounded = -(-nbytes // 512) * 512
        self.live[key] = (compat.weak_storage(st), rounded)
        self.current += rounded
        if self.current > self.peak:
            self.poll()
            self.peak = max(self.peak, self.current)

    def poll(self) -> None:
        dead = [k for k, (w, _) in self.live.items() if w.expired()]
        for k in dead:
            self.current -= self.live.pop(k)[1]


class Recorder(compat.TorchDispatchMode):
    def __init__(self, session: "Session"):
        super().__init__()
        self.session = session

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        namespace = getattr(func, "namespace", "")
        if namespace == "profiler":  # record_function markers: not tensor ops
            with compat.no_dispatch():
                return func(*args, **kwargs)
        if namespace == "prim":  # device/layout queries of fake tensors
            return func(*args, **kwargs)
        return self.session.dispatch(func, args, kwargs)


# ---------------------------------------------------------------------------------------------

class Session:
    """The state of one capture: fake mode, module stack, recorded kernels, memory."""

    def __init__(self, precision: Precision, device: torch.device, emulated: bool):
        self.precision = precision
        self.device = device
        self.emulated = emulated
        self.mode = compat.make_fake_mode()
        self.mapper = Mapper(precision, emulated)
        self.stack: list[Call] = []
        self.paths: dict[int, str] = {}
        self.phase: str | None = None
        self.recording = False
        self.kernels: list[dict] = []
        self.pending: list = []
        self.claimed: dict = {}
        self.bw_owner: Owner | None = None
        self.last_bw_known: Call | None = None
        self.memory = Memory()
        self.region: str | None = None   # "optimizer" / "grad_scaler" outside module code
        self.counts = {"ops": 0, "backward_ops": 0}
        self.fill_ins: set = set()
        self.root: nn.Module | None = None            # the model: its forward is where model code runs
        self.in_model = False
        self.clock: model_code.Clock | None = None    # the recorded forward's model-code clock
        self.hook_overheads = (0.0, 0.0)  # the hooks' cost at a known / another module call (model_code.py)
        self.references: list[float] = []  # each call of the Python reference work around the timed forwards
        self.inference = False  # an inference capture (StepSpec.inference): no loss, no backward
        self.code_totals: list[float] = []  # the model code's total in each timed forward (model_code.TIMED_FORWARDS)

    # -- fake tensors ---------------------------------------------------------------------------

    def fake_like(self, t: torch.Tensor, dtype: torch.dtype | None = None, device=None) -> torch.Tensor:
        """A fake tensor with t's shape and strides on the capture device (no copy, no memory)."""
        dtype = dtype or t.dtype
        with compat.no_dispatch():  # a plain meta tensor even while the fake mode is active
            meta = torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=dtype, device="meta")
        return compat.fake_from_meta(self.mode, meta, device or self.device)

    def fake_empty(self, shape, dtype) -> torch.Tensor:
        with compat.no_dispatch():
            meta = torch.empty(tuple(shape), dtype=dtype, device="meta")
        return compat.fake_from_meta(self.mode, meta, self.device)

    def is_host(self, t) -> bool:
        if not isinstance(t, compat.FakeTensor):
            return True
        if getattr(t, "constant", None) is not None or getattr(t, "_roofsim_host", False):
            return True
        return not self.emulated and t.device.type == "cpu"

    # -- module tracking ------------------------------------------------------------------------

    def install_hooks(self, model: nn.Module):
        handles = []
        for path, module in model.named_modules():
            self.paths[id(module)] = path
            handles.append(module.register_forward_pre_hook(self._pre_hook))
            handles.append(module.register_forward_hook(self._post_hook))
        return handles

    def _pre_hook(self, module, args):
        if self.clock is not None:
            self.clock.stop()
            known = (self.stack[-1].known is not None if self.stack else False) or module_op(module) is not None
            self.clock.settle(self.hook_overheads[0 if known else 1])
        try:
            self._push(module)
        finally:
            if self.clock is not None:
                self.clock.resume(self.code_running())

    def _push(self, module):
        if module is self.root and self.recording:
            self.in_model = True
        path = self.paths.get(id(module), type(module).__name__)
        op = module_op(module)
        parent_known = self.stack[-1].known if self.stack else None
        call = Call(path, type(module).__name__, op, module, host_op(module, op) if op else None)
        call.known = parent_known if parent_known is not None else (call if op else None)
        self.stack.append(call)
        if self.recording and op and parent_known is None:
            call.marker = marker(op, "forward", path, call.host_op)
            self.kernels.append(call.marker)
        call.recorded_at = len(self.kernels)

    def _post_hook(self, module, args, output):
        if self.clock is not None:
            self.clock.stop()
            self.clock.settle()
        try:
            self._pop(module)
        finally:
            if module is self.root:
                self.in_model = False
            if self.clock is not None:
                self.clock.resume(self.code_running())

    def _pop(self, module):
        for i in range(len(self.stack) - 1, -1, -1):
            call = self.stack[i]
            if call.module is module:
                if call.host_op == "dropout" and call.marker is not None and len(self.kernels) == call.recorded_at:
                    # nn.Dropout with p = 0 (or in eval mode): ATen's dropout returns its input, no
                    # kernel, no autograd node; the module call costs the probe's figures of that
                    call.host_op = call.marker["host_op"] = DROPOUT_IDENTITY
                del self.stack[i:]
                return

    def torch_call(self, mode, func, args, kwargs):
        """A torch call of the recorded forward (model_code.TorchCalls, the clock stopped): a layer
        called as a function is a call of that layer (functional_call); a function whose body is model
        code (ops.TRANSPARENT_FUNCTIONS) runs with its torch calls seen one by one and its Python timed;
        any other call as it is."""
        if func in TRANSPARENT_FUNCTIONS and self.recording and self.phase == "forward" and self.code_running():
            return self.transparent_call(mode, func, args, kwargs)
        with self.functional_call(func, args, kwargs):
            return func(*args, **kwargs)

    def transparent_call(self, mode, func, args, kwargs):
        """Runs a torch function written in Python (F.multi_head_attention_forward) as model code: its
        own check for torch-function overrides answers no (it would hand the call back to the mode,
        which is off inside it), and the mode is on again inside, so each torch call in its body is
        seen and its Python between them timed."""
        functional = sys.modules["torch.nn.functional"]
        saved = functional.has_torch_function
        functional.has_torch_function = _no_override
        try:
            with mode:
                if self.clock is not None:
                    self.clock.resume(self.code_running())
                return func(*args, **kwargs)
        finally:
            functional.has_torch_function = saved

    @contextlib.contextmanager
    def functional_call(self, func, args, kwargs):
        """A torch call of the model's own code that is a layer roofsim knows, called as a function
        (ops.FUNCTIONAL_OPS: F.linear, as nn.MultiheadAttention's code calls it): a call of that layer,
        with its dispatch marker, as a module of its type would be, owning its ops and their autograd
        nodes. Any other call runs as it is."""
        op = FUNCTIONAL_OPS.get(func) if self.recording and self.phase == "forward" and not self.region else None
        if op is None or not self.stack or self.stack[-1].known is not None:
            yield
            return
        # F.linear(input, weight, bias=None): a builtin, no schema to name its arguments
        host = host_op_of_functional(op, args[2] if len(args) > 2 else kwargs.get("bias"))
        parent = self.stack[-1]
        call = Call(parent.path, f"{getattr(func, '__name__', op)} (function)", op, None, host)
        call.known = call
        call.marker = marker(op, "forward", parent.path, host)
        self.kernels.append(call.marker)
        call.recorded_at = len(self.kernels)
        self.stack.append(call)
        try:
            yield
        finally:
            for i in range(len(self.stack) - 1, -1, -1):
                if self.stack[i] is call:
                    del self.stack[i:]
                    break
            if self.clock is not None:  # the model code after it (an emulated call returns to no mode)
                self.clock.resume(self.code_running())

    @contextlib.contextmanager
    def timing_only(self, clock: model_code.Clock):
        """Model code timed on `clock` for its total alone: what runs inside records nothing that stays
        (kernels, counts, pending outputs and claimed nodes are rolled back on the way out)."""
        kept, counts = len(self.kernels), dict(self.counts)
        self.clock = clock
        try:
            yield clock
        finally:
            self.clock = None
            del self.kernels[kept:]
            self.counts = counts
            self.pending.clear()
            self.claimed.clear()

    def calibrate_hooks(self, x: torch.Tensor) -> None:
        """The hooks' own cost at a module call, under the capture's modes (model_code.py)."""
        def run_with_hooks(model, x) -> float:
            saved = self.root, self.recording, self.phase
            self.root, self.recording, self.phase = model, True, "forward"
            handles = self.install_hooks(model)
            try:
                with self.timing_only(model_code.Clock(lambda seconds: None, 0.0)) as clock:
                    with model_code.TorchCalls(clock, self.code_running):
                        model(x)
                    clock.finish()
                    return clock.total
            finally:
                for h in handles:
                    h.remove()
                self.root, self.recording, self.phase = saved
                self.stack.clear()
                self.in_model = False
        self.hook_overheads = model_code.module_call_overheads(run_with_hooks, x)

    def time_model_code_step(self, clock: model_code.Clock, run_step) -> None:
        """Runs a step (run_step()) with its forward's model code timed on `clock`, for the total
        alone (timing_only)."""
        with self.timing_only(clock):
            run_step()
            self.code_totals.append(clock.total)

    def scale_model_code(self, factor: float) -> None:
        """Multiplies each recorded stretch of model code (python_seconds) by `factor`."""
        for k in self.kernels:
            if "python_seconds" in k:
                k["python_seconds"] = round(k["python_seconds"] * factor, 9)

    def code_running(self) -> bool:
        """Whether the model's own code runs now: inside its recorded forward, in no known module."""
        return (self.in_model and self.recording and self.phase == "forward" and bool(self.stack)
                and self.stack[-1].known is None)

    def emit_model_code(self, seconds: float) -> None:
        """A stretch of the model's own code: a host-only kernel of its time on this host."""
        self.kernels.append({"op": "model code", "kind": "host-only", "phase": "forward",
                             "layer": self.current_owner().layer, "host_dispatch": False,
                             "python_seconds": round(seconds, 9)})

    def current_owner(self) -> Owner:
        if self.region:
            return Owner(self.region)
        if self.stack:
            top = self.stack[-1]
            return Owner(top.path, top.known, top.type_name)
        return Owner("" if self.inference else "loss")  # outside the model: the loss's, or (inference) the model's code

    # -- autograd nodes -------------------------------------------------------------------------

    def flush_pending(self) -> None:
        pending, self.pending = self.pending, []
        for t, owner in pending:
            node = t.grad_fn
            if node is not None and node not in self.claimed:
                self.claim(node, owner)

    def claim(self, node, owner: Owner) -> None:
        self.claimed[node] = owner
        compat.node_prehook(node, self._node_hook(owner))
        for nxt, _ in getattr(node, "next_functions", ()):
            if nxt is not None and nxt not in self.claimed and hasattr(nxt, "variable"):
                self.claimed[nxt] = owner  # AccumulateGrad of a parameter this op used
                compat.node_prehook(nxt, self._node_hook(owner))

    def _node_hook(self, owner: Owner):
        def hook(grad_outputs):
            self.bw_owner = owner
        return hook

    # -- ops ------------------------------------------------------------------------------------

    def dispatch(self, func, args, kwargs):
        if self.recording and self.phase == "forward":
            self.flush_pending()
        name = func._schema.name.split("::")[-1]
        value = values.answer(name, args)
        if value is not None:  # .item() of a tensor filled with one known value
            if self.recording and self.phase is not None:
                self.record(func, name, args, kwargs, value)
            return value
        try:
            out = func(*args, **kwargs)
        except compat.DATA_DEPENDENT_ERRORS:
            out = values.data_dependent_outputs(func, args, kwargs, lambda r: self.fake_like(r))
            if out is None:
                err = self.error(name, "depends on tensor values (.item(), bool(tensor), `if tensor:`, or an output "
                                       "shape that depends on data such as nonzero or a boolean mask); fake tensors "
                                       "have no values, so this step cannot be captured. Move the data-dependent "
                                       "code out of the model's forward, or make it independent of tensor values")
                err.data_dependent = True
                raise err from None
        except compat.MISSING_META_ERRORS as exc:
            out = self.fill_in(func, name, args, kwargs, exc)
        except ExportError:
            raise
        except Exception as exc:
            raise self.error(name, f"failed under fake tensors: {type(exc).__name__}: {_first_line(exc)}") from exc
        if self.emulated:
            out = self.cuda_output_dtypes(func, name, args, kwargs, out)
            self.mark_host(func, name, args, kwargs, out)
        values.propagate(func, name, args, kwargs, out)
        if self.recording and self.phase is not None:  # zero_grad(set_to_none=True) launches nothing
            self.record(func, name, args, kwargs, out)
        return out

    @staticmethod
    def cuda_output_dtypes(func, name, args, kwargs, out):
        """Emulated mode: batch norm on CUDA (cuDNN and native) takes 16-bit activations with float32
        weights and returns float32 weight gradients; CPU shape functions return the activation dtype,
        which would make autograd insert casts the CUDA step does not run."""
        if name in BATCH_NORM_BACKWARD_OPS and isinstance(out, (tuple, list)) and len(out) >= 3:
            weight = compat.named_args(func, args, kwargs).get("weight")
            if isinstance(weight, torch.Tensor):
                fixed = [out[0]] + [torch.empty_like(weight) if isinstance(g, torch.Tensor) and g.dtype != weight.dtype
                                    else g for g in out[1:3]] + list(out[3:])
                return type(out)(fixed) if isinstance(out, tuple) else fixed
        return out

    def mark_host(self, func, name, args, kwargs, out) -> None:
        """Emulated mode: which fake CPU tensors stand for host tensors (CPU scalars, constants)."""
        inputs = flat_tensors(args) + flat_tensors(kwargs)
        if inputs:
            host = all(self.is_host(t) for t in inputs)
        else:
            # a factory: its device cannot tell (every fake tensor is on the CPU here); inside
            # optimizer.step() it is host-side bookkeeping (step counters, profiler handles)
            host = self.region == "optimizer" or self.phase is None
        if host:
            for t in flat_tensors(out):
                try:
                    t._roofsim_host = True
                except Exception:
                    pass

    def record(self, func, name, args, kwargs, out) -> None:
        self.counts["ops"] += 1
        activation_cast = self.phase != "backward" and autocast_cast_of(name, args)
        operands = flat_tensors(args) + flat_tensors(kwargs) + flat_tensors(out)
        host = bool(operands) and all(self.is_host(t) for t in operands)
        kernels, is_view, hint = self.mapper.map(name, func, args, kwargs, out, host)
        copies = hidden_copies(name, args) if kernels and not host else []
        kernels = copies + kernels
        if name in values.QUESTIONS and not host:
            # .item() / bool() of a GPU tensor: a copy to the host and a wait for the GPU to drain
            for k in kernels:
                k["sync"] = True
        if kernels:
            if self.phase == "backward":
                self.counts["backward_ops"] += 1
                owner = self.bw_owner or Owner("loss")
                cast = owner.cast and name == "_to_copy"
            else:
                owner = self.current_owner()
                cast = activation_cast
            try:
                args_text = describe_args(args, kwargs)
            except Exception:
                args_text = None
            self.emit(kernels, owner, name, is_view, hint, args_text, cast)
        outputs = flat_tensors(out)
        for t in outputs:
            if not self.is_host(t):
                self.memory.track(t)
        if self.phase == "forward" and outputs:
            # autograd attaches the node after this returns: claim it when the next op arrives
            owner = self.current_owner()
            if kernels and owner.known is not None and activation_cast:
                owner.cast = True  # its backward node (ToCopyBackward0) is a cast of its own too
            self.pending.extend((t, owner) for t in outputs)

    def emit(self, kernels, owner: Owner, name, is_view, hint, args_text, cast: bool = False) -> None:
        """Appends an op's kernels, with the dispatch marker that carries its host cost where it has
        one of its own. `cast`: an activation's cast (autocast_cast_of) or its gradient's cast back.
        A kernel that comes with `host_dispatch` already set keeps it: the copies an op makes of its
        strided inputs (hidden_copies), each dispatched on its own from inside the op, which no layer
        figure holds (tiny layers' inputs are contiguous)."""
        phase = self.phase or "forward"
        for k in kernels:
            k["phase"] = phase
            k["layer"] = owner.layer
            if args_text and k["kind"] != "host-only":
                k["args"] = args_text
        if phase == "optimizer":
            for k in kernels:
                k["host_dispatch"] = owner.layer != "optimizer"  # grad scaler ops dispatch on their own
            self.kernels.extend(_ordered(k) for k in kernels)
            return
        known = owner.known
        if known is not None:
            if phase == "backward" and known is not self.last_bw_known:
                self.kernels.append(marker(known.op, "backward", known.path, known.host_op))
            self.last_bw_known = known if phase == "backward" else self.last_bw_known
            if cast:
                # autocast's cast of an activation (or its gradient's cast back): an op of its own
                # on the host, which the known layer's figures leave out
                self.kernels.append(marker(AUTOCAST_CAST, phase, owner.layer))
            for k in kernels:
                k.setdefault("host_dispatch", False)
                k["source_op"] = known.op
            self.kernels.extend(_ordered(k) for k in kernels)
            return
        if phase == "backward":
            self.last_bw_known = None
        graph_op = hint or aten_graph_op(name, is_view)
        if name in ("detach", "alias") and all(k["kind"] == "host-only" for k in kernels):
            # metadata-only; when the autograd engine issues it (saving outputs, accumulating
            # gradients) its host cost is part of the measured layer figures
            for k in kernels:
                k["host_dispatch"] = False
            self.kernels.extend(_ordered(k) for k in kernels)
            return
        if all(k["kind"] == "host-only" for k in kernels):
            for k in kernels:  # the op is its own marker
                # a view in the model's forward code costs what a view costs in a chain of them (the
                # code around it is timed: model_code), not a reshape layer's one call
                k["host_op"] = VIEW_IN_MODEL_CODE if is_view and phase == "forward" else graph_op
                k["source_op"] = graph_op
            self.kernels.extend(_ordered(k) for k in kernels)
            return
        self.kernels.append(marker(graph_op, phase, owner.layer, attention_host_op(name) if graph_op == "sdpa" else None))
        for k in kernels:
            k.setdefault("host_dispatch", False)
            k["source_op"] = graph_op
        self.kernels.extend(_ordered(k) for k in kernels)

    # -- ops fake tensors cannot run ------------------------------------------------------------

    def fill_in(self, func, name, args, kwargs, exc):
        """Outputs of an op that has no meta kernel in this torch (shape rules; nothing is computed)."""
        na = compat.named_args(func, args, kwargs)
        try:
            result = _shape_rule(func, name, na, args, kwargs)
        except Exception as rule_exc:  # the rule itself failed on these arguments
            raise self.error(name, f"has no shape function (meta kernel) in torch {compat.TORCH_VERSION} and "
                                   f"the exporter's rule failed: {_first_line(rule_exc)}") from None
        if result is _NO_RULE:
            raise self.error(name, f"has no shape function (meta kernel) in torch {compat.TORCH_VERSION}, so fake "
                                   f"tensors cannot run it ({_first_line(exc)})") from None
        self.fill_ins.add(name)
        return result

    def error(self, name: str, why: str) -> ExportError:
        owner = self.bw_owner if self.phase == "backward" and self.bw_owner else self.current_owner()
        where = owner.layer or "<model>"
        kind = f" ({owner.type_name})" if owner.type_name else ""
        return ExportError(f"{self.phase or 'setup'} of module '{where}'{kind}: aten::{name} {why}")


_NO_RULE = object()


def _no_override(*_args) -> bool:
    """torch.nn.functional's has_torch_function inside a transparent call (Session.transparent_call)."""
    return False


def _shape_rule(func, name, na, args, kwargs):
    if name in ("convolution_backward", "convolution_backward_overrideable"):
        dy, x, w = na["grad_output"], na["input"], na["weight"]
        mask = list(na["output_mask"])
        bias_sizes = na.get("bias_sizes") or [w.shape[0]]
        return (torch.empty_like(x) if mask[0] else None,
                torch.empty_like(w) if mask[1] else None,
                torch.empty(list(bias_sizes), dtype=dy.dtype, device=dy.device) if mask[2] else None)
    if name == "embedding_dense_backward":
        dy = na["grad_output"]
        return torch.empty((int(na["num_weights"]), int(dy.shape[-1])), dtype=dy.dtype, device=dy.device)
    rets = func._schema.returns
    mutated = compat.mutated_args(func, args, kwargs)
    if mutated and all(r.alias_info is not None and r.alias_info.is_write for r in rets):
        # in place: the outputs are the mutated arguments themselves (nothing to compute on fakes)
        if not rets:
            return None
        return mutated[0] if len(rets) == 1 else tuple(mutated[: len(rets)])
    if name.startswith("_foreach") and len(rets) == 1 and str(rets[0].type).startswith("List"):
        return [torch.empty_like(t) for t in args[0]]
    if name.endswith("_backward") and len(rets) == 1 and str(rets[0].type) == "Tensor":
        like = na.get("self", na.get("input"))
        if isinstance(like, torch.Tensor):
            return torch.empty_like(like)
    return _NO_RULE


# The host op of an activation's cast inside a known module call (roofsim's autocast_cast_host_op):
# autocast's cast of an input to the dtype its op runs in, costed as the probe's cast layer.
AUTOCAST_CAST = "cast"


def autocast_cast_of(name: str, args) -> bool:
    """Whether an aten op is a floating cast of an activation: _to_copy of a tensor that is not a
    leaf requiring grad. Autocast casts a weight (a leaf requiring grad) once per forward and a
    layer's host figures hold that cast; an activation's cast is an op of its own on the host."""
    if name != "_to_copy" or not args or not isinstance(args[0], torch.Tensor):
        return False
    src = args[0]
    return src.is_floating_point() and not (src.requires_grad and src.grad_fn is None)


# The host op of a view in the model's forward code, outside known modules (roofsim's
# view_in_model_code_host_op): the framework probe's chain of views.
VIEW_IN_MODEL_CODE = "view_chain"


def marker(op: str, phase: str, layer: str, host: str | None = None) -> dict:
    """A host-only dispatch marker: the host cost of one call of `op`, by the figures of `host` (ops.host_op;
    default `op`) (docs/ir-format.md)."""
    return {"op": "dispatch " + op, "kind": "host-only", "phase": phase, "layer": layer, "host_op": host or op}


_KEY_ORDER = ["op", "kind", "phase", "layer", "dtype", "unit", "flops", "bytes_read", "bytes_written", "gemm",
              "conv", "attention", "norm", "host_dispatch", "sync", "mixed_dtypes", "strided", "host_op", "source_op", "flag",
              "args", "python_seconds"]


def _ordered(k: dict) -> dict:
    return {key: k[key] for key in _KEY_ORDER if key in k}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


# ---------------------------------------------------------------------------------------------
# the step

@dataclass
class StepSpec:
    """What one training step is: the model, its fake inputs, the loss, the optimizer; or, with
    inference, one forward of the model in eval() under torch.inference_mode()."""
    model: nn.Module
    inputs: dict
    loss_fn: object            # loss_fn(model, inputs) -> scalar tensor; inference: forward(model, inputs)
    optimizer: str = "sgd"     # none, sgd, adam, adamw
    fused: bool = False
    grad_scaler: bool = False  # amp-fp16: torch.amp.GradScaler's ops around the optimizer
    inference: bool = False    # the forward alone, model.eval() under torch.inference_mode()


@dataclass
class Capture:
    kernels: list
    memory: dict
    device: str
    emulated: bool
    fill_ins: list
    counts: dict
    parameters: dict  # trainable elements and tensors (what optimizer.step() updates)
    libraries_patched: bool = False
    model_code: dict | None = None  # how the model's own code was timed (model_code.py)


def choose_device(requested: str) -> tuple[torch.device, bool]:
    """(device of the fake tensors, emulated): CUDA where this torch can run autograd on fake CUDA
    tensors (a CUDA build with a GPU), else fake CPU tensors with the CUDA behaviour emulated."""
    if requested == "cuda" and not compat.cuda_built():
        raise ExportError(f"torch {compat.TORCH_VERSION} is built without CUDA: autograd on fake CUDA tensors "
                          f"would abort the process (use --fake-device cpu or auto)")
    if requested == "cuda" or (requested == "auto" and compat.cuda_usable()):
        return torch.device("cuda", 0), False
    return torch.device("cpu"), True


WEIGHT_DECAY = {"sgd": 1e-4, "adamw": 0.01, "adam": 0.0, "none": 0.0}  # each optimizer's, as make_optimizer builds it


def make_optimizer(kind: str, params, fused: bool):
    """The optimizers of tools/validate/measure_pytorch.py, foreach (PyTorch 2.x's default on CUDA)
    unless fused; the implementation is named explicitly because fake parameters are not the plain
    tensors torch's default rule looks for."""
    impl = {"fused": True} if fused else {"foreach": True}
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=WEIGHT_DECAY["sgd"], **impl)
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, weight_decay=WEIGHT_DECAY["adamw"], **impl)
    if kind == "adam":
        return torch.optim.Adam(params, lr=1e-4, **impl)
    raise ExportError(f"unknown optimizer '{kind}' (none, sgd, adam, adamw)")


@contextlib.contextmanager
def fake_parameters(session: Session, model: nn.Module, param_dtype: torch.dtype):
    """Swaps every parameter, buffer and tensor attribute of `model` for a fake tensor on the capture
    device (floating-point ones in param_dtype); puts the originals back afterwards."""
    saved = []
    memo: dict = {}

    def convert(t, is_param):
        key = id(t)
        if key in memo:
            return memo[key][1]
        dtype = param_dtype if t.is_floating_point() and param_dtype != torch.float32 else t.dtype
        f = session.fake_like(t, dtype)
        if is_param:
            f = nn.Parameter(f, requires_grad=t.requires_grad)
        memo[key] = (t, f)
        return f

    try:
        for module in model.modules():
            for name, p in list(module._parameters.items()):
                if p is not None:
                    saved.append((module._parameters, name, p))
                    module._parameters[name] = convert(p, True)
            for name, b in list(module._buffers.items()):
                if b is not None:
                    saved.append((module._buffers, name, b))
                    module._buffers[name] = convert(b, False)
            for name, v in list(vars(module).items()):
                if isinstance(v, torch.Tensor) and not name.startswith("_"):
                    saved.append((vars(module), name, v))
                    vars(module)[name] = convert(v, False)
        yield
    finally:
        for store, name, original in reversed(saved):
            store[name] = original


@contextlib.contextmanager
def libraries_eager(enabled: bool):
    """transformers (5.x) takes a traced-graph path when it sees a FakeTensor (`is_tracing(tensor)`): it
    builds attention masks explicitly instead of asking `mask.all()` and dropping them as the eager
    step does. While enabled, its is_fake_tensor answers False, so the captured step is the eager one;
    the questions it then asks are answered from known values (values.py). Yields whether anything
    was patched."""
    saved = []
    if enabled:
        helpers = sys.modules.get("transformers.utils.import_utils")
        target = getattr(helpers, "is_fake_tensor", None)
        if target is not None:
            for name, module in list(sys.modules.items()):
                if name.startswith("transformers") and module is not None and \
                        getattr(module, "is_fake_tensor", None) is target:
                    saved.append((module, target))
                    module.is_fake_tensor = _not_fake
    try:
        yield bool(saved)
    finally:
        for module, target in saved:
            module.is_fake_tensor = target


def _not_fake(*args, **kwargs):
    return False


def capture_step(spec: StepSpec, precision: Precision, fake_device: str = "auto",
                 eager_libraries: bool = True) -> Capture:
    device, emulated = choose_device(fake_device)
    session = Session(precision, device, emulated)
    session.inference = spec.inference
    model = spec.model
    emulation = CudaEmulation(precision.autocast) if emulated else contextlib.nullcontext()
    if emulated:  # the casts of a layer called as a function are that call's, as autocast's are on CUDA
        emulation.around = session.functional_call
    handles = []
    patched = False
    flags = [(m, m.training) for m in model.modules()]  # put back afterwards: the model is not changed
    # inference: the forwards, and the calibrations of the clock's costs, under torch.no_grad() (the
    # kernels torch.inference_mode() runs, without its view and version bookkeeping, which fake
    # tensors refuse: "Cannot set version_counter for inference tensor")
    grad_mode = torch.no_grad if spec.inference else contextlib.nullcontext
    try:
        with compat.quiet(), fake_parameters(session, model, precision.param_dtype), emulation, \
                libraries_eager(eager_libraries) as patched:
            if spec.inference:
                model.eval()
            else:
                model.train()
            inputs = {k: session.fake_like(v, precision.param_dtype if v.is_floating_point() and
                                           precision.param_dtype != torch.float32 else v.dtype)
                      if isinstance(v, torch.Tensor) else v for k, v in spec.inputs.items()}
            params = [p for p in model.parameters() if p.requires_grad]
            if spec.optimizer != "none" and not params:
                raise ExportError("the model has no trainable parameters (use --optimizer none)")
            with session.mode:
                opt = None
                if spec.optimizer != "none":
                    try:
                        opt = make_optimizer(spec.optimizer, params, spec.fused)
                    except ExportError:
                        raise
                    except Exception as exc:
                        raise ExportError(f"cannot build the {spec.optimizer} optimizer"
                                          f"{' with fused=True' if spec.fused else ''} in torch "
                                          f"{compat.TORCH_VERSION} on fake {device.type} tensors: "
                                          f"{_first_line(exc)}") from None
                scaler = None
                if spec.grad_scaler:
                    scaler = {"scale": session.fake_empty((), torch.float32),
                              "growth": session.fake_empty((), torch.int32)}
                recorder = Recorder(session)
                handles = session.install_hooks(model)
                with recorder:
                    _run_step(session, spec, model, inputs, opt, scaler, emulation, record=False)
                    # the model-code clock's own costs, under the modes the recorded step runs in
                    with grad_mode():
                        probe = session.fake_empty((1,), torch.float32)
                        if not spec.inference:
                            probe.requires_grad_()
                        overhead = model_code.mode_overhead_per_call(probe)
                        session.calibrate_hooks(probe)
                        del probe
                    # the model code in forwards before the recorded one (model_code.TIMED_FORWARDS),
                    # each a whole step as the recorded one runs, what it recorded dropped
                    session.root = model
                    for _ in range(model_code.TIMED_FORWARDS - 1):
                        session.time_model_code_step(
                            model_code.Clock(lambda seconds: None, overhead),
                            lambda: _run_step(session, spec, model, inputs, opt, scaler, emulation, record=True))
                    gc.collect()
                    session.memory = Memory()
                    for t in _resident(model, inputs, opt, scaler):
                        if not session.is_host(t):
                            session.memory.track(t)
                    session.clock = model_code.Clock(session.emit_model_code, overhead)
                    _run_step(session, spec, model, inputs, opt, scaler, emulation, record=True)
                    clock, session.clock = session.clock, None
                    session.code_totals.append(clock.total)
                    session.scale_model_code(model_code.median_scale(session.code_totals, clock.total))
                memory = _memory_summary(session, model, opt, spec.inference)
                trainable = list({id(p): p for p in model.parameters() if p.requires_grad}.values())
                parameters = {"elements": sum(int(p.numel()) for p in trainable), "tensors": len(trainable)}
                del opt, inputs
    except ExportError as exc:
        exc.libraries_patched = patched
        raise
    except Exception as exc:
        where = session.stack[-1].path if session.stack else ""
        kind = f" ({session.stack[-1].type_name})" if session.stack else ""
        raise ExportError(f"{session.phase or 'setup'} failed in module '{where or '<model>'}'{kind}: "
                          f"{type(exc).__name__}: {_first_line(exc)}") from exc
    finally:
        for h in handles:
            h.remove()
        for m, training in flags:
            m.training = training
        session.stack.clear()
        session.claimed.clear()
        session.pending.clear()
    # the host's Python speed at its best, and while it timed the code: the median of the reference
    # calls just before and after each timed forward (roofsim scales the code by the latter)
    code = {"fastest_reference_seconds": min(session.references),
            "timed_reference_seconds": statistics.median(session.references),
            "method": model_code.method_text(session.code_totals, clock.calls, overhead, session.hook_overheads,
                                             session.references)}
    return Capture(session.kernels, memory, device.type, emulated, sorted(session.fill_ins), session.counts,
                   parameters, patched, code)


def _autocast(session: Session, emulation):
    if session.precision.autocast is None:
        return contextlib.nullcontext()
    if session.emulated:
        return emulation.autocast()
    return compat.autocast_cuda(session.precision.autocast)


def _begin_pass(session: Session, record: bool) -> None:
    """The session's state at the start of a step or forward, recorded or not."""
    session.recording = record
    session.stack.clear()
    session.bw_owner = None
    session.last_bw_known = None


def _timed_forward(session: Session, context, forward):
    """forward() inside `context`; in the recorded forward (session.clock set) the model's own code is
    timed between its torch calls (model_code.py), with this host's Python speed just before the forward
    and just after. Returns what forward() returns."""
    torch_calls = (model_code.TorchCalls(session.clock, session.code_running, session.torch_call)
                   if session.clock else contextlib.nullcontext())
    if session.clock is not None:
        session.references.extend(model_code.python_reference_calls(model_code.REFERENCE_CALLS))
    with context:
        with torch_calls:
            out = forward()
        if session.clock is not None:
            session.clock.finish()
    if session.clock is not None:
        session.references.extend(model_code.python_reference_calls(model_code.REFERENCE_CALLS))
    return out


def _run_step(session: Session, spec: StepSpec, model, inputs, opt, scaler, emulation, record: bool):
    if spec.inference:
        _run_forward(session, spec, model, inputs, emulation, record)
        return
    _begin_pass(session, record)
    # zero_grad(set_to_none=True), as measure_pytorch.py's step
    if opt is not None:
        opt.zero_grad(set_to_none=True)
    else:
        for p in model.parameters():
            p.grad = None
    session.phase = "forward"
    loss = _timed_forward(session, _autocast(session, emulation), lambda: spec.loss_fn(model, inputs))
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise ExportError("the loss is not a one-element tensor")
    if not loss.requires_grad:
        raise ExportError("the loss does not require grad (no parameter or input takes part in it)")
    if scaler is not None:
        session.region = "loss"
        loss = loss * scaler["scale"]  # GradScaler.scale(loss)
        session.region = None
    session.stack.clear()
    if record:
        session.flush_pending()
        session.bw_owner = session.claimed.get(loss.grad_fn) or Owner("loss")
    session.phase = "backward"
    before = session.counts["backward_ops"]
    loss.backward()
    if record and session.counts["backward_ops"] == before:
        raise ExportError("no backward op reached the recorder (this torch runs the autograd engine on a thread "
                          "the dispatch mode does not follow); try --fake-device cpu")
    del loss
    session.claimed.clear()
    session.phase = "optimizer"
    if opt is not None:
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        if scaler is not None:
            found_inf = _grad_scaler_step(session, opt, grads, scaler, spec.fused)
        session.region = "optimizer"
        if record:
            session.kernels.append(marker("optimizer", "optimizer", "optimizer"))
        opt.step()
        if scaler is not None:  # GradScaler.update
            session.region = "grad_scaler"
            if spec.fused:
                del opt.grad_scale, opt.found_inf
            torch._amp_update_scale_(scaler["scale"], scaler["growth"], found_inf, 2.0, 0.5, 2000)
        session.region = None
    session.phase = None
    session.recording = False


def _run_forward(session: Session, spec: StepSpec, model, inputs, emulation, record: bool):
    """Inference: one forward of the model (in eval()) under torch.no_grad() (the kernels
    torch.inference_mode() runs), and autocast where the precision mode has it; no loss, no backward,
    no optimizer. Its output is dropped."""
    _begin_pass(session, record)
    session.phase = "forward"
    out = _timed_forward(session, _no_grad_autocast(session, emulation), lambda: spec.loss_fn(model, inputs))
    del out
    session.stack.clear()
    session.pending.clear()  # no autograd node to claim: nothing runs after the forward
    session.claimed.clear()
    session.phase = None
    session.recording = False


@contextlib.contextmanager
def _no_grad_autocast(session: Session, emulation):
    """torch.no_grad(), and autocast inside it where the precision mode has it (an inference forward)."""
    with torch.no_grad(), _autocast(session, emulation):
        yield


def _grad_scaler_step(session: Session, opt, grads, scaler, fused: bool):
    """The ops torch.amp.GradScaler.step runs before optimizer.step(), assuming (as in steady-state
    training) that no gradient is inf or NaN. A fused optimizer unscales inside its kernel: the
    scaler only checks the gradients and hands it grad_scale and found_inf; otherwise unscale_
    multiplies the gradients by 1/scale and step() reads found_inf back (.item(), a sync)."""
    session.region = "grad_scaler"
    scale = scaler["scale"]
    device = scale.device

    def unscale_grads(inv_scale, found_inf):
        # _unscale_grads_: one copy of found_inf and of inv_scale per device (_MultiDeviceReplicator)
        found_inf = found_inf.to(device=device, non_blocking=True, copy=True)
        inv_scale = inv_scale.to(device=device, non_blocking=True, copy=True)
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
        return found_inf

    if fused:  # _check_inf_per_device, then the fused kernel unscales
        dummy_inv_scale = torch.full((), 1.0, dtype=torch.float32, device=device)
        found_inf = unscale_grads(dummy_inv_scale, torch.full((), 0.0, dtype=torch.float32, device=device))
        found_inf = 0 + found_inf  # sum() over devices
        opt.grad_scale = scale * 1
        opt.found_inf = found_inf
        return found_inf
    inv_scale = scale.double().reciprocal().float()  # unscale_
    found_inf = unscale_grads(inv_scale, torch.full((), 0.0, dtype=torch.float32, device=device))
    found_inf.item()  # _maybe_opt_step: a sync in the real step
    return found_inf


def _resident(model, inputs, opt, scaler):
    """Tensors alive when the recorded step starts: parameters, their gradients from the warm-up
    step (freed by zero_grad), buffers, optimizer state, inputs."""
    out = []
    for p in model.parameters():
        out.append(p)
        if p.grad is not None:
            out.append(p.grad)
    out.extend(model.buffers())
    if opt is not None:
        for state in opt.state.values():
            out.extend(v for v in state.values() if isinstance(v, torch.Tensor))
    out.extend(v for v in inputs.values() if isinstance(v, torch.Tensor))
    if scaler:
        out.extend(scaler.values())
    return out


def _memory_summary(session: Session, model, opt, inference: bool = False) -> dict:
    params = {id(p): p for p in model.parameters()}.values()
    param_bytes = sum(int(p.numel()) * element_size(p.dtype) for p in params)
    grad_bytes = 0 if inference else sum(int(p.numel()) * element_size(p.dtype) for p in params if p.requires_grad)
    state_bytes = 0
    if opt is not None:
        for state in opt.state.values():
            for v in state.values():
                if isinstance(v, torch.Tensor) and not session.is_host(v):
                    state_bytes += int(v.numel()) * element_size(v.dtype)
    return {"parameters_bytes": param_bytes, "gradients_bytes": grad_bytes, "optimizer_state_bytes": state_bytes,
            "peak_bytes": session.memory.peak}
