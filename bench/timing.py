"""Timing helper shared by the benchmarks."""
from __future__ import annotations

import time
from typing import Callable


def best(fn: Callable[[], object], repeat: int) -> float:
    """The fastest of `repeat` runs, in seconds (the least disturbed by the rest of the machine)."""
    fastest = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        fastest = min(fastest, time.perf_counter() - t)
    return fastest
