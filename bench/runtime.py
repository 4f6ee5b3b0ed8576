"""Runtime round trips on the emulator, as `name: value` lines (baselines measured in the same run).

submit_signal_wait_us: one compute submission that signals, and the CPU wait for it (microseconds).
copyin_vs_numpy_64MiB / copyout_vs_numpy_64MiB: Device.copyin / copyout of 64 MiB vs a plain numpy copy of 64 MiB
(both ends already touched, as the baseline's are); from DIRECT_COPY_MIN bytes on the copy queue moves the bytes
straight between the host array's pages (a USERPTR BO for the copy) and the device, one copy, so ~1 is the ceiling
(through the staging buffers it was two copies: 0.5). On "sim" both sides are CPU time of this process (the emulated
GPU runs in the caller's thread at progress points; a shared machine's waits for a core are not counted), on
hardware wall time. Issue 20 target: >= 0.8.
alloc_us_at_100k_live_bos: one 4 KiB device allocation (mmap, ALLOC, MAP, CPU map) with 100,000 buffers
alive, the mean of the last 1,000 (microseconds; the emulated KFD's lookups are O(log n)).
doorbell_to_first_packet_us_median / _p90: free-running mode, an independent client (tests/kfd_client.py) stores a
doorbell with a plain 64-bit store; the time until the GPU thread finished the step that executed the packet
(the client then spins on the result with sched_yield, as a GIL-friendly spinner does).
doorbell_round_trip_pure_spin_us_median: the same, store -> the client sees the packet's write, spinning in pure
Python (the GIL hand-over to the GPU thread and back is part of it).
free_running_idle_cpu_percent: CPU the process uses while a free-running system sits idle.
hwtests_wall_s_progress_points / hwtests_wall_s_free_running / hwtests_free_running_ratio: `pytest hwtests -n 2`
in both modes (target: ratio <= 1.5).

`python3 bench/runtime.py --against REV`: the round trip, the doorbell latency and the idle CPU of REV's hcqsim
(extracted with git archive) and of this tree, interleaved round by round in fresh processes, each line with the
load average; then `name[new/baseline]` ratios of the best of each (the machine may be shared: ratios are what
to compare). `--only round_trip,doorbell` runs just those parts (names: round_trip, copies, alloc, doorbell,
hwtests).
"""
from __future__ import annotations

import ctypes
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import CPU, WALL, best, header, help_requested, mode  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREE = os.environ.get("PFUZZ_TREE", ROOT)  # the hcqsim measured (--against runs this file on another tree)
sys.path.insert(0, TREE)

from hcqsim.runtime import open_device  # noqa: E402

PARTS = ("round_trip", "copies", "alloc", "doorbell", "hwtests")


def main(spec: str = "sim", parts: tuple[str, ...] = PARTS) -> None:
    if "round_trip" in parts:
        round_trip_us(spec)
    if "copies" in parts:
        copies(spec)
    if "alloc" in parts:
        alloc_at_scale(spec)
    if spec == "sim" and "doorbell" in parts:
        doorbell_latency()
    if spec == "sim" and "hwtests" in parts:
        hwtests_wall_time()


def round_trip_us(spec: str, n: int = 2000) -> None:
    dev = open_device(spec)
    sig = dev.new_signal(0)
    counter = iter(range(1, 10 ** 9))

    def round_trip():
        v = next(counter)
        dev.compute_queue().signal(sig, v).submit()
        sig.wait(v)

    t = best(lambda: [round_trip() for _ in range(n)], 3)
    print(f"submit_signal_wait_us: {t / n * 1e6:.1f}" + mode(WALL, f"best of 3 x {n}"))
    dev.close()


def copies(spec: str) -> None:
    dev = open_device(spec)
    size = 64 << 20
    data = np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8)
    buf = dev.alloc(size, host_visible=False)
    host = np.empty(size, np.uint8)
    clock = time.process_time if spec.startswith("sim") else time.perf_counter
    t_numpy = best(lambda: np.copyto(host, data), 5, clock)
    t_in = best(lambda: dev.copyin(buf, data), 5, clock)
    how = mode(CPU if spec.startswith("sim") else WALL, "ratio of bests of 5")
    print(f"copyin_vs_numpy_64MiB: {t_numpy / t_in:.2f}" + how)
    t_out = best(lambda: dev.copyout(buf, out=host), 5, clock)  # into warm host memory, like the baseline
    print(f"copyout_vs_numpy_64MiB: {t_numpy / t_out:.2f}" + how)
    assert dev.copyout(buf, 4096) == data[:4096].tobytes()
    dev.close()


def alloc_at_scale(spec: str, live: int = 100_000, last: int = 1000) -> None:
    dev = open_device(spec)
    bufs = [dev.alloc(4096) for _ in range(live - last)]
    t = time.perf_counter()
    bufs += [dev.alloc(4096) for _ in range(last)]
    print(f"alloc_us_at_100k_live_bos: {(time.perf_counter() - t) / last * 1e6:.1f}" + mode(WALL, f"mean of {last}"))
    dev.close()


def doorbell_latency(n: int = 500) -> None:
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from kfd_client import Client, pm4

    from hcqsim.kfd import EmulatedSystem
    system = EmulatedSystem(free_running=True)
    client = Client(system.os)
    sig = client.alloc(0x1000, 2)
    q = client.compute_queue()
    word = ctypes.c_uint32.from_address(sig.va)
    first, spin = [], []
    for v in range(1, 2 * n + 1):
        packet = pm4(0x37, [5 << 8, sig.va & 0xFFFFFFFF, sig.va >> 32, v])  # WRITE_DATA of v
        pure = v > n
        t0 = time.perf_counter()
        q.submit(packet)
        while word.value != v:
            if not pure:
                os.sched_yield()
        t1 = time.perf_counter()
        if pure:
            spin.append(t1 - t0)
        else:  # the packet's write can be seen before its step finished and recorded itself
            while not (system.thread.worked_at and system.thread.worked_at[-1] >= t0):
                os.sched_yield()
            first.append(system.thread.worked_at[-1] - t0)
        if v % 50 == 0:
            time.sleep(0.02)  # idle gaps: the thread backs off and must notice the next store by itself
    first.sort()
    print(f"doorbell_to_first_packet_us_median: {statistics.median(first) * 1e6:.1f}" + mode(WALL, f"median of {n}"))
    print(f"doorbell_to_first_packet_us_p90: {first[int(0.9 * len(first))] * 1e6:.1f}" + mode(WALL, f"p90 of {n}"))
    print(f"doorbell_round_trip_pure_spin_us_median: {statistics.median(spin) * 1e6:.1f}"
          + mode(WALL, f"median of {n}"))
    time.sleep(0.5)
    r0, t = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    time.sleep(2)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    print(f"free_running_idle_cpu_percent: {100 * cpu / (time.monotonic() - t):.1f}"
          + mode(CPU, "per 2 s of wall time"))
    client.close()
    system.close()


def hwtests_wall_time() -> None:
    times = {}
    for kind, extra in (("progress_points", []), ("free_running", ["--sim-free-running"])):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "hwtests", *extra],
                       cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times[kind] = time.perf_counter() - t
        print(f"hwtests_wall_s_{kind}: {times[kind]:.1f}" + mode(WALL, "one run"))
    print(f"hwtests_free_running_ratio: {times['free_running'] / times['progress_points']:.2f}" + mode(WALL, "ratio"))


def against(rev: str, parts: tuple[str, ...], rounds: int = int(os.environ.get("PFUZZ_ROUNDS", "3"))) -> None:
    """Baseline `rev` and this tree, interleaved (A B A B ...), each run a fresh process."""
    base = f"/tmp/hcqsim-bench-{rev}"
    if not os.path.exists(base):
        os.makedirs(base)
        archive = subprocess.run(["git", "-C", ROOT, "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", base], input=archive, check=True)
    results: dict[str, dict[str, list[float]]] = {"baseline": {}, "new": {}}
    for r in range(rounds):
        for who, tree in (("baseline", base), ("new", ROOT)):
            load = os.getloadavg()[0]
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "sim", "--only", ",".join(parts)],
                                 env={**os.environ, "PFUZZ_TREE": tree, "PYTHONPATH": tree},
                                 check=True, capture_output=True, text=True).stdout
            for line in out.splitlines():
                name, _, value = line.partition(": ")
                if line.startswith("#") or not value:
                    continue
                results[who].setdefault(name, []).append(float(value.split()[0]))
                print(f"{name}[{who} {rev if who == 'baseline' else 'HEAD'}, round {r}]: {value}  (load: {load:.1f})")
    for name, new in results["new"].items():
        old = results["baseline"].get(name)
        if not old:
            continue
        lower_is_better = name.endswith(("_us", "_median", "_p90", "_percent", "_s_progress_points",
                                         "_s_free_running"))
        pick = min if lower_is_better else max
        print(f"{name}[new/baseline]: {pick(new) / max(pick(old), 1e-9):.2f}  (best of {rounds} each: "
              f"{pick(new):.1f} vs {pick(old):.1f}{'; lower is better' if lower_is_better else ''})")


if __name__ == "__main__":
    help_requested(__doc__)
    header("bench/runtime.py")
    argv = sys.argv[1:]
    only = PARTS
    if "--only" in argv:
        only = tuple(argv[argv.index("--only") + 1].split(","))
        del argv[argv.index("--only"):argv.index("--only") + 2]
    if "--against" in argv:
        rev = argv[argv.index("--against") + 1]
        against(rev, only if "--only" in sys.argv else ("round_trip", "doorbell"))
    else:
        main(argv[0] if argv else "sim", only)
