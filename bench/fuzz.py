"""Schedule fuzzing throughput, as `name: value` lines like the other benchmarks.

fuzz_schedules_per_s[N ops, ...]: schedules drawn by hypothesis, compiled, run (every run of the case: rebinding
  and parameter replays included) under a drawn interleaving and checked against their sequential meaning, per
  second, end to end (hypothesis' own generation included); ops_per_s: operations executed (ops x runs) per second.
check_schedules_per_s[...]: the same cases checked again without hypothesis (compile + run + compare only):
  the part of the cost hcqsim owns.
"classic" is the case shape the issue's 52-94/s baseline measured (6 ops, up to two devices, no replays);
"classic 6 ops +host" the same with host turns on: the issue's target shape (>= 300 schedules/s).
"+host" rows: the interleaving may also hand the host a turn (`Interleaver.host_turns`): host/GPU orders explored.
`load:` is the machine's 1-minute load average when a row was measured (the machine may be shared).
`python3 bench/fuzz.py [examples] [--profile [tottime]]`: --profile prints where a classic schedule's time goes;
  `--phases [--host]`: the same as a table, `fuzz_phase_ms[classic 6 ops, PHASE]: ms per schedule (share)`, then
  what one schedule does, counted (`fuzz_count[...]`: GPU steps, ready scans, wait re-checks, decisions, progress
  points, ioctls, packets); `--host` with host turns on (the issue's shape).
`python3 bench/fuzz.py --against REV [examples]`: before/after in one session: REV's hcqsim (extracted with git
  archive) and this tree's, interleaved round by round, each round in a fresh process on the same drawn cases
  (check only: compile + run + compare), with the load average beside each; then the ratios (new / baseline) and
  whether the two trees' traces are byte-identical (trace_digest: sha256 over every case's packet trace, the
  interleaver's steps and the effects).
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
TREE = os.environ.get("PFUZZ_TREE", str(HERE))  # the hcqsim measured (--against runs this file on another tree)
sys.path.insert(0, TREE)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import CPU, WALL, header, help_requested, mode  # noqa: E402

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
    print(f"fuzz_schedules_per_s[{label}]: {len(cases) / dt:.1f}" + mode(WALL, "one run, hypothesis included")
          + f"  ({len(cases)} schedules, {runs} runs, "
          f"{ops} ops in {dt:.1f} s; mean {sum(len(c.ops) for c, _ in cases) / len(cases):.1f} ops; "
          f"load: {load:.1f})")
    print(f"fuzz_ops_per_s[{label}]: {ops / dt:.0f}" + mode(WALL, "one run, hypothesis included"))
    t0 = time.perf_counter()
    for case, choices in cases:
        try:
            fz.check(case, choices)
        except RaceFound as e:  # a real finding (the search above raises it; here it is counted, not fatal)
            print(f"finding[{label}]: {e.report.first_difference}; replay: {e.report.seed[:60]}...")
    dt = time.perf_counter() - t0
    print(f"check_schedules_per_s[{label}]: {len(cases) / dt:.1f}" + mode(WALL, "one run, checks only"))
    print(f"check_ops_per_s[{label}]: {(fz.ops - ops0 - ops) / dt:.0f}" + mode(WALL, "one run, checks only")
          + f"  (load: {os.getloadavg()[0]:.1f})")


def profile(fz: Fuzzer, examples: int) -> None:
    import cProfile
    import pstats
    cases, _ = explore(fz, examples, max_ops=6, min_ops=6, replays=False)
    pr = cProfile.Profile()
    pr.enable()
    for case, choices in cases:
        fz.check(case, choices)
    pr.disable()
    order = "tottime" if "tottime" in sys.argv else "cumulative"
    pstats.Stats(pr).sort_stats(order).print_stats(40)


# (label, owner module path, attribute, method): the functions whose exclusive time makes each phase
PHASES = [("compile: schedule ops (runtime API)", "hcqsim.strategies", "Fuzzer", "_build"),
          ("compile: plan (hazards, waits)", "hcqsim.runtime.schedule", "Schedule", "compile"),
          ("compile: command buffers, kernargs, state", "hcqsim.runtime.replay", "CompiledSchedule", "__init__"),
          ("compile: allocations", "hcqsim.runtime.device", "Device", "alloc"),
          ("run: prelude submits", "hcqsim.strategies", "Fuzzer", "_prelude"),
          ("run: launch, submits, host waits", "hcqsim.runtime.replay", "CompiledSchedule", "run"),
          ("boundary: KFD ioctls", "hcqsim.kfd.process", "KfdDriver", "ioctl"),
          ("boundary: progress points (doorbell scan, ready scan)", "hcqsim.kfd.process", "KfdDriver", "progress"),
          ("execution: scheduler loop (GPU steps, ready scans, wait re-checks, queue advance)", "hcqsim.gpu",
           "EmulatedGPU", "step"),
          ("execution: shader core (dispatch advance)", "hcqsim.shader.core", "ActiveDispatch", "advance"),
          ("execution: PM4 packets (CP execute_run)", "hcqsim.engines.command_processor", "PM4Queue", "execute_run"),
          ("execution: SDMA packets", "hcqsim.engines.sdma_engine", "SDMAQueue", "execute"),
          ("execution: copy/fill chunks", "hcqsim.engines.queue", "Transfer", "run"),
          ("execution: wait records (stall: disassembly)", "hcqsim.engines.queue", "EngineQueue", "stall"),
          ("trace: recording packets, writes, copies", "hcqsim.gpu", "EmulatedGPU", "trace_packet"),
          ("trace: recording packets, writes, copies", "hcqsim.gpu", "EmulatedGPU", "trace_write"),
          ("trace: recording packets, writes, copies", "hcqsim.gpu", "EmulatedGPU", "trace_copy"),
          ("policy: Interleaver decisions", "hcqsim.strategies", "Interleaver", "choose"),
          ("check: sequential meaning (numpy)", "hcqsim.strategies", None, "sequential_effects"),
          ("check: initial memory", "hcqsim.strategies", None, "initial_memory"),
          ("check: drain, memory setup, compare (Fuzzer.check rest)", "hcqsim.strategies", "Fuzzer", "check")]
# (name, module, attribute, method): what a schedule does, counted in a second pass over the same cases (untimed)
COUNTS = [("GPU steps", "hcqsim.gpu", "EmulatedGPU", "step"),
          ("ready scans (EmulatedGPU._activities)", "hcqsim.gpu", "EmulatedGPU", "_activities"),
          ("wait re-checks (Wait.satisfied)", "hcqsim.engines.queue", "Wait", "satisfied"),
          ("scheduling decisions (Interleaver.choose)", "hcqsim.strategies", "Interleaver", "choose"),
          ("driver progress points (KfdDriver.progress)", "hcqsim.kfd.process", "KfdDriver", "progress"),
          ("doorbell scans (poll_doorbells)", "hcqsim.kfd.queues", "ProcessQueues", "poll_doorbells"),
          ("KFD ioctls", "hcqsim.kfd.process", "KfdDriver", "ioctl"),
          ("queue advances (EngineQueue.advance)", "hcqsim.engines.queue", "EngineQueue", "advance"),
          ("dispatch advances", "hcqsim.shader.core", "ActiveDispatch", "advance"),
          ("wait records made (EngineQueue.stall)", "hcqsim.engines.queue", "EngineQueue", "stall")]


def _patch(table, make) -> list:
    """Wrap every (module, owner, method) of `table` with make(fn, label); returns what to undo."""
    import importlib
    undo = []
    for label, module, owner, name in table:
        obj = importlib.import_module(module)
        obj = getattr(obj, owner) if owner else obj
        fn = getattr(obj, name)
        undo.append((obj, name, fn))
        setattr(obj, name, make(fn, label))
    return undo


def phases(examples: int, host: bool = "--host" in sys.argv) -> None:
    """Where a classic schedule's time goes: each phase's exclusive time (its functions' time minus that of the
    phases they call), per schedule, as `fuzz_phase_ms[...]` lines; device bring-up is the Fuzzer's creation (once
    per process: examples share the devices). Then what one schedule does, counted: `fuzz_count[...]` per
    schedule (a second, untimed pass over the same cases). `--host`: with host turns (the issue's shape)."""
    import collections
    import functools
    label0 = "classic 6 ops" + (" +host" if host else "")
    totals, stack = collections.Counter(), []

    def timed(fn, label):  # CPU time of this process: a shared machine's load disturbs it least
        @functools.wraps(fn)
        def wrapper(*a, **k):
            t0 = time.process_time()
            stack.append(0.0)
            try:
                return fn(*a, **k)
            finally:
                dt, inner = time.process_time() - t0, stack.pop()
                totals[label] += dt - inner
                if stack:
                    stack[-1] += dt
        return wrapper

    counts = collections.Counter()

    def counted(fn, label):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            out = fn(*a, **k)
            counts[label] += 1
            if label == "GPU steps" and not out:
                counts["GPU steps that executed nothing"] += 1
            elif label == "ready scans (EmulatedGPU._activities)":
                counts["queue looks in ready scans"] += len(a[0].queues)
            return out
        return wrapper

    undo = _patch(PHASES, timed)
    t0 = time.perf_counter()
    fz = Fuzzer("gfx1100")
    bring_up = time.perf_counter() - t0
    try:
        fz.host_turns = fz.policy.host_turns = host
        cases, _ = explore(fz, examples, max_ops=6, min_ops=6, replays=False)
        totals.clear()
        t0, c0 = time.perf_counter(), time.process_time()
        for case, choices in cases:
            try:
                fz.check(case, choices)
            except RaceFound:
                pass
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        bare = time.process_time()  # the same cases again, unwrapped: the CPU time per schedule without the wrappers
        for obj, name, fn in undo:
            setattr(obj, name, fn)
        for case, choices in cases:
            try:
                fz.check(case, choices)
            except RaceFound:
                pass
        bare = time.process_time() - bare
        _patch(COUNTS, counted)
        packets = 0
        for case, choices in cases:
            try:
                fz.check(case, choices)
            except RaceFound:
                pass
            packets += sum(1 for gpu in fz.gpus for e in gpu.trace if e[2] == "packet")
        counts["packets executed (trace entries)"] = packets
    finally:
        fz.close()
    n = len(cases)
    print(f"fuzz_phase_ms[{label0}, device bring-up, once per process]: {bring_up * 1e3:.1f}")
    for label, t in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"fuzz_phase_ms[{label0}, {label}]: {t / n * 1e3:.2f}  ({100 * t / cpu:.1f}%)")
    print(f"fuzz_phase_ms[{label0}, total per schedule]: {cpu / n * 1e3:.2f}  (CPU time, timing wrappers included; "
          f"wall {wall / n * 1e3:.2f}; {n} schedules, load: {os.getloadavg()[0]:.1f})")
    print(f"fuzz_phase_ms[{label0}, total per schedule, unwrapped]: {bare / n * 1e3:.2f}  (CPU time: "
          f"{n / bare:.0f} schedules per CPU second)")
    for label, c in counts.items():
        print(f"fuzz_count[{label0}, {label}]: {c / n:.1f}  (per schedule)")


CHECK_SHAPES = [("classic 6 ops", dict(max_ops=6, min_ops=6, replays=False), 1, False),
                ("classic 6 ops +host", dict(max_ops=6, min_ops=6, replays=False), 1, True),
                ("20 ops +host", dict(max_ops=20, min_ops=20), 2, True),
                ("80 ops", dict(max_ops=80, min_ops=80), 4, False)]  # (label, shape, examples divisor, host turns)


def check_only(examples: int) -> None:
    """The cases of CHECK_SHAPES (hypothesis draws them, derandomized: the same in every tree), then each checked
    again, timed: `name: value` lines and the trace digest of those checks."""
    fz = Fuzzer("gfx1100")
    try:
        for label, shape, div, host in CHECK_SHAPES:
            fz.host_turns = fz.policy.host_turns = host
            cases, _ = explore(fz, max(examples // div, 5), **shape)
            digest = hashlib.sha256()
            ops0 = fz.ops
            t = cpu = 0.0
            for case, choices in cases:
                t0, c0 = time.perf_counter(), time.process_time()
                try:
                    fz.check(case, choices)
                    found = "ok"
                except RaceFound as e:
                    found = e.report.first_difference
                t += time.perf_counter() - t0
                cpu += time.process_time() - c0
                digest.update(found.encode())
                for gpu in fz.gpus:
                    digest.update("\n".join(gpu.trace_lines()).encode())
                digest.update(fz.policy.steps_text().encode())
                digest.update(repr(sorted((n, b.view[:case.buffer_bytes].tobytes())
                                          for n, b in fz.bufs.items())).encode())
            print(f"check_schedules_per_s[{label}]: {len(cases) / t:.1f}" + mode(WALL, "checks only"))
            print(f"check_ops_per_s[{label}]: {(fz.ops - ops0) / t:.0f}" + mode(WALL, "checks only"))
            # per CPU second of this process: what a shared machine's load disturbs least
            print(f"check_schedules_per_cpu_s[{label}]: {len(cases) / cpu:.1f}" + mode(CPU, "checks only"))
            print(f"check_ops_per_cpu_s[{label}]: {(fz.ops - ops0) / cpu:.0f}" + mode(CPU, "checks only"))
            print(f"trace_digest[{label}]: {digest.hexdigest()[:16]}")
    finally:
        fz.close()


def against(rev: str, examples: int, rounds: int = int(os.environ.get("PFUZZ_ROUNDS", "3"))) -> None:
    """Baseline `rev` and this tree, interleaved (A B A B ...), each round a fresh process."""
    base = Path(f"/tmp/hcqsim-bench-{rev}")
    if not base.exists():
        base.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(HERE), "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
    results: dict[str, dict[str, list[float]]] = {"baseline": {}, "new": {}}
    digests: dict[str, set[str]] = {"baseline": set(), "new": set()}
    for r in range(rounds):
        for who, tree in (("baseline", base), ("new", HERE)):
            load = os.getloadavg()[0]
            out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--check-only", str(examples)],
                                 env={**os.environ, "PFUZZ_TREE": str(tree), "PYTHONPATH": str(tree)},
                                 check=True, capture_output=True, text=True).stdout
            for line in out.splitlines():
                name, _, value = line.partition(": ")
                if name.startswith("trace_digest"):
                    digests[who].add(line)
                elif name.startswith("check_"):
                    results[who].setdefault(name, []).append(float(value.split()[0]))
                    print(f"{name[:-1]}, {who} {rev if who == 'baseline' else 'HEAD'}, round {r}]: {value}  "
                          f"(load: {load:.1f})")
    for name, new in results["new"].items():
        old = results["baseline"].get(name)
        if old:
            print(f"{name[:-1]}, new/baseline]: {max(new) / max(old):.2f}  (best of {rounds} each: "
                  f"{max(new):.1f} vs {max(old):.1f})")
    same = digests["new"] == digests["baseline"] and len(digests["new"]) == len(CHECK_SHAPES)
    print(f"trace_identical_to_baseline: {same}")


def main() -> None:
    help_requested(__doc__)
    header("bench/fuzz.py")
    args = [a for a in sys.argv[1:] if not a.startswith("--") and a not in ("tottime", "cumulative")]
    if "--check-only" in sys.argv:
        check_only(int(args[0]) if args else 60)
        return
    if "--against" in sys.argv:
        rev = sys.argv[sys.argv.index("--against") + 1]
        args = [a for a in args if a != rev]
        against(rev, int(args[0]) if args else 60)
        return
    examples = int(args[0]) if args else 150
    if "--phases" in sys.argv:
        phases(int(args[0]) if args else 60)
        return
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
