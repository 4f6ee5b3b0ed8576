"""How many of tests/test_runtime_races.py's hand-written ordering bugs docs/fuzzing.md's pattern finds, as printed.

For each bug: the first example of the default profile's search (100 derandomized examples, or --seeds random
searches) that fails, and the search's cost per example; each fixed twin run through the whole search (a report of
one is a false alarm). `--host-turns off` measures the pattern with `Interleaver.host_turns = False` (the default
before issue 29).

    python3 bench/races.py [--host-turns on|off] [--seeds N] [--only NAME] [--no-fixed]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from hypothesis import Phase, given  # noqa: E402

import test_runtime_races as races  # noqa: E402
from hcqsim.strategies import fuzz_settings, interleavings  # noqa: E402


def first_failure(m, program, seed: int | None) -> tuple[int | None, int, float]:
    """(1-based example that first failed or None, examples run, seconds) of one generate-only search."""
    state = {"n": 0, "first": None}
    kw = dict(phases=[Phase.generate])
    if seed is not None:
        kw.update(derandomize=False)

    @fuzz_settings(**kw)
    @given(interleavings())
    def prop(choices):
        state["n"] += 1
        m.reset()
        sigs = [m.d0.new_signal(0) for _ in range(4)]
        try:
            with races.chooser.using(choices):
                program(m, sigs)
        except AssertionError:
            if state["first"] is None:
                state["first"] = state["n"]
            raise
        finally:
            m.d0.synchronize()
            m.d1.synchronize()
            for s in sigs:
                m.d0.free_signal(s)

    if seed is not None:
        from hypothesis import seed as hseed
        prop = hseed(seed)(prop)
    t = time.perf_counter()
    try:
        prop()
    except BaseException:  # noqa: BLE001 (a found race, or several)
        pass
    return state["first"], state["n"], time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host-turns", choices=("on", "off"), default="on")
    ap.add_argument("--seeds", type=int, default=0, help="random searches per bug (0: the derandomized default)")
    ap.add_argument("--only", default="")
    ap.add_argument("--no-fixed", action="store_true")
    a = ap.parse_args()
    races.chooser.host_turns = a.host_turns == "on"
    bugs = races.GATED + races.IN_ORDER + races.KERNEL_RACES
    bugs = [b for b in bugs if a.only in b.__name__]
    m = races.Machine()
    found = 0
    try:
        for bug in bugs:
            seeds = list(range(1, a.seeds + 1)) or [None]
            firsts, cost = [], []
            for sd in seeds:
                first, n, secs = first_failure(m, bug, sd)
                firsts.append(first)
                cost.append(secs / max(n, 1))
            hit = sum(f is not None for f in firsts)
            found += hit == len(firsts)
            line = (f"{bug.__name__:45s} found {hit}/{len(firsts)} first at {firsts}  "
                    f"{1e3 * sum(cost) / len(cost):.0f} ms/example")
            if not a.no_fixed:
                first, n, secs = first_failure(m, lambda m_, s, b=bug: b(m_, s, fixed=True), None)
                verdict = f"REPORTED at {first}" if first else "clean"
                line += f"  fixed: {verdict} in {n} ({1e3 * secs / n:.0f} ms/example)"
            print(line, flush=True)
    finally:
        m.close()
    print(f"host_turns {a.host_turns}: {found} of {len(bugs)} bugs found in every search")


if __name__ == "__main__":
    main()
