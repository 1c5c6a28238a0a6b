"""The model's own Python code: how long the forward spends between its torch calls, outside the
modules roofsim has figures for, on the exporting host; and a reference work that relates that
host's Python speed to the GPU host's (the framework probe times the same work: `python_reference`).

What is timed: from the model's first forward pre-hook to its last post-hook, every stretch during
which no module of a type roofsim knows is running and no torch function is (a TorchFunctionMode
marks the torch calls: each view, each tensor op, each metadata query). The known modules' calls
are their framework figures; a torch call is its op's figure (a view: the probe's chain of views);
what is left is the model's code: Hugging Face's argument handling, attention-mask preparation,
container modules' calls, `inspect` and the like. What the exporter adds there itself is measured
in the capture's own modes and taken off each stretch: the mode's cost at each torch call
(mode_overhead_per_call) and its forward hooks' at each module call (module_call_overheads)."""

from __future__ import annotations

import statistics
import time

import torch

from . import compat
# the reference work, shared with the framework probe (capture.py calls model_code.python_reference_calls)
from .python_reference import python_reference_calls, python_reference_work  # noqa: F401

# A stretch of model code shorter than this is carried over to the next one (fewer IR kernels; the
# time moves by at most this much).
FLUSH_SECONDS = 10e-6


# Calls of python_reference_work() just before each timed forward and just after.
REFERENCE_CALLS = 15


# Forwards whose model code is timed: the recorded one and the ones before it. A shared host's
# Python speed swings for seconds at a time (the reference work took 0.85 ms and 2.0 ms around one
# forward on the H200 machine): the recorded forward's stretches are scaled to the median of the
# forwards' totals.
TIMED_FORWARDS = 3


def median_scale(totals: list[float], recorded: float) -> float:
    """What the recorded forward's stretches are multiplied by: the median of all timed forwards'
    model-code totals over the recorded one's (1 where the recorded forward timed none)."""
    return statistics.median(totals) / recorded if recorded > 0 else 1.0


class Clock:
    """Accrues the model's own code time of one recorded forward. The session calls stop() when a
    hook or a torch call begins and resume() when it ends; emit(seconds) receives each stretch
    (FLUSH_SECONDS or more, the rest at finish())."""

    def __init__(self, emit, overhead_per_call: float):
        self.emit = emit
        self.overhead_per_call = overhead_per_call  # the function mode's own cost around a torch call
        self.since: float | None = None
        self.last_gap = 0.0
        self.pending = 0.0
        self.total = 0.0
        self.calls = 0

    def stop(self, torch_call: bool = False) -> None:
        """Model code stops running (a hook or a torch call begins): the stretch is held until
        settle(), which the caller calls once it knows what to take off (its own work in between is
        not timed)."""
        now = time.perf_counter()
        self.last_gap = 0.0
        if self.since is None:
            return
        gap = now - self.since
        if torch_call:
            gap -= self.overhead_per_call
            self.calls += 1
        self.since = None
        self.last_gap = max(0.0, gap)

    def settle(self, deduct: float = 0.0) -> None:
        """Adds the stretch stop() ended, less `deduct` (the hooks' own machinery at a module call:
        module_call_overheads), and emits what has gathered once it reaches FLUSH_SECONDS."""
        self.pending += max(0.0, self.last_gap - deduct)
        self.last_gap = 0.0
        if self.pending >= FLUSH_SECONDS:
            self.flush()

    def resume(self, running: bool) -> None:
        self.since = time.perf_counter() if running else None

    def flush(self) -> None:
        if self.pending > 0:
            self.total += self.pending
            self.emit(self.pending)
        self.pending = 0.0

    def finish(self) -> None:
        self.stop()
        self.settle()
        self.flush()


class TorchCalls(compat.TorchFunctionMode):
    """Tells the clock when each torch call (a top-level one: the mode is off inside it) begins and ends.
    `call(mode, func, args, kwargs)`, where given, makes the call in its stead, once the clock has
    stopped (the session's: a functional layer call, a function whose body is model code)."""

    def __init__(self, clock: Clock, running, call=None):
        super().__init__()
        self.clock = clock
        self.running = running  # () -> whether model code runs once the call returns
        self.call = call

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.clock.stop(torch_call=True)
        self.clock.settle()
        try:
            if self.call is None:
                return func(*args, **(kwargs or {}))
            return self.call(self, func, args, kwargs or {})
        finally:
            self.clock.resume(self.running())


class _Empty(torch.nn.Module):
    def forward(self, x):
        return x


class _Calls(torch.nn.Module):
    """Calls its child `n` times (the calibration of module calls under the exporter's hooks)."""

    def __init__(self, n: int, child: torch.nn.Module):
        super().__init__()
        self.child = child
        self.n = n

    def forward(self, x):
        for _ in range(self.n):
            x = self.child(x)
        return x

    def lookups(self, x):
        for _ in range(self.n):
            self.child
        return x


def _per_call(fn, x, n: int) -> float:
    """Seconds of fn(x) over n, the fastest of three."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        fn(x)
        best = min(best, time.perf_counter() - t0)
    return best / n


def module_call_overheads(run_with_hooks, x: torch.Tensor, loops: int = 5000) -> tuple[float, float]:
    """What the exporter's forward hooks add to the model code's clock at one module call, as
    (a call of a module roofsim knows, of one it does not). `run_with_hooks(model, x)` runs
    model(x) under the session's hooks, clock and TorchCalls and returns the seconds the clock
    accrued; `x`: a tensor as the model's (fake, under the capture's modes: what they add to a call
    is measured with it).
    Under hooks nn.Module.__call__ takes its slow path; the clock runs through its parts outside the
    hooks (S a call). Without hooks a call costs F (the fast path) and the child's body. A known
    module's figure holds its whole call: S is taken off, measured on calls of nn.ReLU (a module
    roofsim knows: its op recorded, as in the step, and dropped). An unknown module's call is model
    code: S less F is taken off, both measured on calls of an empty module. S = accrued per call less
    the loop's time with the attribute lookup alone; F = the loop's time with the calls made without
    hooks (the parent's forward called directly, the hooks removed) less that."""
    def accrued_per_call(model: _Calls) -> float:
        run_with_hooks(model, x)
        return min(run_with_hooks(model, x) for _ in range(3)) / model.n

    known = _Calls(loops // 10, torch.nn.ReLU())
    slow_known = max(0.0, accrued_per_call(known) - _per_call(known.lookups, x, known.n))
    other = _Calls(loops, _Empty())
    lookup = _per_call(other.lookups, x, other.n)
    slow_outside_hooks = max(0.0, accrued_per_call(other) - lookup)
    fast = max(0.0, _per_call(other.forward, x, other.n) - lookup)
    return slow_known, max(0.0, slow_outside_hooks - fast)


def mode_overhead_per_call(x: torch.Tensor, loops: int = 20000) -> float:
    """What TorchCalls adds to the model code's clock at each torch call beyond the call itself: a
    loop of cheap torch calls (x.dim(), x as the model's tensors, under the capture's modes) timed as
    model code under TorchCalls, less the same loop's time per call without it (which holds the loop
    and the call's own cost, both real)."""

    def plain() -> float:
        t0 = time.perf_counter()
        for _ in range(loops):
            x.dim()
        return (time.perf_counter() - t0) / loops

    def under_mode() -> float:
        clock = Clock(lambda seconds: None, 0.0)
        clock.resume(True)
        with TorchCalls(clock, lambda: True):
            for _ in range(loops):
                x.dim()
        clock.finish()
        return clock.total / loops

    plain()
    under_mode()
    best_plain = min(plain() for _ in range(3))
    best_mode = min(under_mode() for _ in range(3))
    return max(0.0, best_mode - best_plain)


def method_text(totals: list[float], torch_calls: int, overhead_per_call: float, hooks: tuple[float, float],
                references: list[float]) -> str:
    """The IR's model_code.method: what was timed, how, and the totals (the recorded forward's last)."""
    return (f"the model's own Python in its forward, between its torch calls and outside modules roofsim knows, "
            f"timed with time.perf_counter on the exporting host; taken off, as measured there: a TorchFunctionMode's "
            f"cost at each torch call ({overhead_per_call * 1e6:.2f} us, a loop of Tensor.dim) and the forward "
            f"hooks' at each module call ({hooks[0] * 1e6:.2f} us a known module, loops of nn.ReLU calls; "
            f"{hooks[1] * 1e6:.2f} us another, of an empty module's); {torch_calls} torch calls a forward; "
            f"{len(totals)} forwards timed ({', '.join(f'{t * 1e3:.3f}' for t in totals)} ms), the recorded one's "
            f"stretches scaled to their median ({statistics.median(totals) * 1e3:.3f} ms); "
            f"fastest_reference_seconds: the fastest of {len(references)} calls of python_reference_work() on that "
            f"host, {REFERENCE_CALLS} just before each timed forward and {REFERENCE_CALLS} just after (median {statistics.median(references) * 1e6:.1f} us, "
            f"slowest {max(references) * 1e6:.1f} us)")
