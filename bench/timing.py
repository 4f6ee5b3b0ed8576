"""Timing helpers shared by the benchmarks: the best of several runs, and how a printed figure says what it is.

Every bench script prints a header line first (`# bench/x.py: date, machine, load, Python`) and, after each
figure, its clock in brackets: `[cpu ...]` is this process's CPU time (time.process_time: waiting for a core on a
shared machine is not counted, so it is what a quiet machine would show for single-threaded work), `[wall ...]` is
elapsed time (time.perf_counter: includes waiting for a core, and the work of other threads). Compare figures only
of the same clock."""
from __future__ import annotations

import datetime
import os
import platform
import sys
import time
from typing import Callable

CPU = "cpu"
WALL = "wall"


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


def mode(clock: str, how: str = "") -> str:
    """The bracket printed after a figure: its clock (CPU or WALL) and how it was taken (`best of 5`)."""
    return f"  [{clock}{', ' + how if how else ''}]"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def header(script: str) -> None:
    """The first line of a bench script's output: when, on what, under which load (a `#` line: not a figure)."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"# {script}: {when}; {cpu_model()}, {os.cpu_count()} CPUs; load {load}; "
          f"Python {platform.python_version()}; [cpu] = process CPU time, [wall] = elapsed time", flush=True)


def help_requested(doc: str | None) -> None:
    """`--help` / `-h`: print the script's docstring and exit (before anything is measured)."""
    if "--help" in sys.argv[1:] or "-h" in sys.argv[1:]:
        try:
            print((doc or "").strip(), flush=True)
        except BrokenPipeError:  # `--help | head`
            sys.stdout = open(os.devnull, "w")
        raise SystemExit(0)
