"""Schedule fuzzing throughput, as `name: value` lines like the other benchmarks.

fuzz_schedules_per_s[N ops, ...]: schedules drawn by hypothesis, compiled, run (every run of the case: rebinding
  and parameter replays included) under a drawn interleaving and checked against their sequential meaning, per
  second, end to end (hypothesis' own generation included); ops_per_s: operations executed (ops x runs) per second.
check_schedules_per_s[...]: the same cases checked again without hypothesis (compile + run + compare only):
  the part of the cost hcqsim owns.
"classic" is the case shape the issue's 52-94/s baseline measured (6 ops, up to two devices, no replays).
"+host" rows: the interleaving may also hand the host a turn (`Interleaver.host_turns`): host/GPU orders explored.
`load:` is the machine's 1-minute load average when a row was measured (the machine may be shared).
`python3 bench/fuzz.py [examples] [--profile]`: --profile prints where a classic schedule's time goes.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import given  # noqa: E402

from hcqsim.strategies import Fuzzer, RaceFound, fuzz_settings, interleavings, schedules  # noqa: E402


def explore(fz: Fuzzer, examples: int, **shape) -> tuple[list, float]:
    cases = []

    @fuzz_settings(max_examples=examples)
    @given(schedules(**shape), interleavings())
    def prop(case, choices):
        cases.append((case, choices))
        fz.check(case, choices)

    t0 = time.perf_counter()
    try:
        prop()
    except Exception as e:  # a finding ends hypothesis' search: the rate is over the schedules run until then
        print(f"finding: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
    return cases, time.perf_counter() - t0


def measure(fz: Fuzzer, label: str, examples: int, shape: dict) -> None:
    runs0, ops0 = fz.runs, fz.ops
    load = os.getloadavg()[0]
    cases, dt = explore(fz, examples, **shape)
    runs, ops = fz.runs - runs0, fz.ops - ops0
    print(f"fuzz_schedules_per_s[{label}]: {len(cases) / dt:.1f}  ({len(cases)} schedules, {runs} runs, "
          f"{ops} ops in {dt:.1f} s; mean {sum(len(c.ops) for c, _ in cases) / len(cases):.1f} ops; "
          f"load: {load:.1f})")
    print(f"fuzz_ops_per_s[{label}]: {ops / dt:.0f}")
    t0 = time.perf_counter()
    for case, choices in cases:
        try:
            fz.check(case, choices)
        except RaceFound as e:  # a real finding (the search above raises it; here it is counted, not fatal)
            print(f"finding[{label}]: {e.report.first_difference}; replay: {e.report.seed[:60]}...")
    dt = time.perf_counter() - t0
    print(f"check_schedules_per_s[{label}]: {len(cases) / dt:.1f}")
    print(f"check_ops_per_s[{label}]: {(fz.ops - ops0 - ops) / dt:.0f}  (load: {os.getloadavg()[0]:.1f})")


def profile(fz: Fuzzer, examples: int) -> None:
    import cProfile
    import pstats
    cases, _ = explore(fz, examples, max_ops=6, min_ops=6, replays=False)
    pr = cProfile.Profile()
    pr.enable()
    for case, choices in cases:
        fz.check(case, choices)
    pr.disable()
    pstats.Stats(pr).sort_stats("cumulative").print_stats(40)


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    examples = int(args[0]) if args else 150
    fz = Fuzzer("gfx1100")
    try:
        if "--profile" in sys.argv:
            profile(fz, examples)
            return
        shapes = [("classic 6 ops", dict(max_ops=6, min_ops=6, replays=False))]
        shapes += [(f"{n} ops", dict(max_ops=n, min_ops=n)) for n in (5, 20, 80)]
        for host in (False, True):
            fz.host_turns = fz.policy.host_turns = host
            for label, shape in shapes:
                n = examples if shape["max_ops"] < 80 else max(examples // 4, 10)
                measure(fz, label + (" +host" if host else ""), n, shape)
    finally:
        fz.close()


if __name__ == "__main__":
    main()
