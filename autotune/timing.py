"""The one wall-clock loop every side-by-side timing in autotune uses (TVM-free)."""

from __future__ import annotations

import time


def seconds_per_call(fn, min_s: float = 0.1, warmup: int = 0) -> float:
    """Mean seconds of ``fn()`` over as many back-to-back calls as fill ``min_s`` (at least one), after ``warmup``
    untimed calls: callers alternate arms round by round and keep each arm's fastest round."""
    for _ in range(warmup):
        fn()
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= min_s:
            return elapsed / n
