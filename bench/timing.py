"""Timing helper shared by the benchmarks."""
from __future__ import annotations

import time
from typing import Callable


def best(fn: Callable[[], object], repeat: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """The fastest of `repeat` runs, in seconds (the least disturbed by the rest of the machine). `clock`
    time.process_time measures this process's CPU time: on a shared machine the time a single-threaded,
    never-sleeping measurement would take on a quiet one (waiting for a core is not counted)."""
    fastest = float("inf")
    for _ in range(repeat):
        t = clock()
        fn()
        fastest = min(fastest, clock() - t)
    return fastest
