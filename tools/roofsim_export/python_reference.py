"""The reference work that relates one host's Python speed to another's: the framework probe
(calibrate/torch_framework_probe.py) times it on the GPU host (its `python_reference` figure), the
exporter (model_code.py) on the exporting host. One copy serves both: the probe loads this file on its
own (standard library only, no import from the package)."""

from __future__ import annotations

import time


def python_reference_work(n: int = 1000) -> int:
    """Pure-Python work of the kinds a model's forward runs between its tensor ops: method calls
    with keyword arguments, attribute and dict lookups, isinstance checks, small tuples. Its time
    relates one host's Python speed to another's."""
    class Config:
        hidden_size = 768
        num_heads = 12
        use_cache = False

        def head_dim(self, scale=1):
            return self.hidden_size // self.num_heads * scale

    config = Config()
    cache = {}
    total = 0
    for i in range(n):
        heads = config.head_dim(scale=1)
        if isinstance(heads, int) and not getattr(config, "use_cache", True):
            cache[i & 31] = (heads, i)
        shape = tuple(cache.get(j & 31, (0, 0))[0] for j in range(i, i + 3))
        total += sum(shape) + len(cache)
    return total


def python_reference_calls(calls: int) -> list[float]:
    """Seconds of each of `calls` python_reference_work() calls, after one unmeasured call: this
    host's Python speed now (no GPU work)."""
    python_reference_work()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        python_reference_work()
        times.append(time.perf_counter() - t0)
    return times
