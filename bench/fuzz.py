"""Schedule fuzzing throughput: schedules compiled, run under a hypothesis-chosen interleaving and checked
against their sequential meaning, per second. Prints `name: value` lines like the other benchmarks."""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import given  # noqa: E402

from hcqsim.strategies import Fuzzer, fuzz_settings, interleavings, schedules  # noqa: E402


def explore(target: str, examples: int, max_ops: int) -> tuple[int, float]:
    fz = Fuzzer(target)

    @fuzz_settings(max_examples=examples)
    @given(schedules(max_ops=max_ops), interleavings())
    def prop(case, choices):
        fz.check(case, choices)

    t0 = time.perf_counter()
    try:
        prop()
    finally:
        fz.close()
    return fz.schedules, time.perf_counter() - t0


def main() -> None:
    examples = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    for target in ("gfx1100", "gfx942"):
        for max_ops in (6, 12):
            n, dt = explore(target, examples, max_ops)
            print(f"fuzz_schedules_per_s[{target},max_ops={max_ops}]: {n / dt:.1f}  ({n} schedules in {dt:.1f} s)")


if __name__ == "__main__":
    main()
