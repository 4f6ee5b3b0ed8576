"""The reliability campaign (issue 22 item 3): the second audit's surfaces, bounded in time, with counts.

    python3 -m tests.audit [--profile short|long] [--seconds S] [--seed N] [--out FILE]

Every surface runs in a fresh interpreter (`--surface NAME`), so a segfault is counted as a host crash instead of
ending the campaign; each prints one JSON line of counts. The table has, per surface: cases run, host crashes
(the interpreter died of a signal), GPU-thread deaths (a free-running system's thread stopped by an error),
state changes by refused calls, unbounded allocations (a count field the driver accepted past what kmalloc
gives), unexpected errors (anything but the documented error of the case) and seconds.

Surfaces:
- ioctls: random KFD and DRM requests (every command nr and some past the table, random argument bytes with
  the real gpu_id and user pointers planted half the time) on one emulated process: only OSError may come out;
- counts: each user-given count field (MAP/UNMAP n_devices, GET_PROCESS_APERTURES_NEW num_of_nodes, WAIT_EVENTS
  num_events) just past KMALLOC_MAX_SIZE and at 2^32-1: -ENOMEM before anything is read or allocated;
- streams: random PM4 and SDMA dword streams (valid headers with random opcodes and counts, arbitrary dwords)
  on an EmulatedGPU: every stop is a documented fault kind, never a host exception, and the GPU keeps working;
- threads: several host threads on one free-running system doing copyin/copyout/fill/signal rounds, every
  completion checked, the GPU thread alive at the end;
- misuse: every refusal of tests/test_runtime_refusals.py, state compared before and after;
- close: systems closed while another thread polls their memory through raw pointers;
- errnos: every row of tests/kfd_errnos.py (a bad request per kernel check, each citing the kfd_chardev.c /
  kfd_events.c function): the errno Linux returns; the table line says how many of how many;
- soak: the long-run shape of the tinygrad wedge the audit saw (6 free-running GPUs, a thread each, every compute
  and copy queue in turn, two kernels, a cross-queue wait, a local and a peer copy per round, every result
  checked, waits bounded at 20 s, every queue idle and the GPU thread healthy at the end; each round also leaves
  cyclic garbage whose finalizer waits for the round's signal, as tinygrad's graphs do: the issue-22 wedge was such a
  finalizer run on the GPU thread). It found the kernarg arena wedge (Device._next_kernarg_arena).

`tests/test_audit.py` runs the short profile in the default test command and the long one behind `-m slow`.
"""
from __future__ import annotations

import argparse
import ctypes
import errno
import gc
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SURFACES = ("ioctls", "counts", "streams", "threads", "misuse", "close", "errnos", "soak")
PROFILES = {"short": 1.5, "long": 60.0}  # seconds per surface
SOAK_LONG = 180.0  # the long profile's soak: past the ~1638 kernels per GPU where the kernarg arena refills
COLUMNS = ("cases", "host_crashes", "gpu_thread_deaths", "state_changes", "unbounded_allocations", "unexpected",
           "seconds")
DOCUMENTED_FAULTS = {"decode error", "unsupported", "VM fault", "runaway"}


def _counts(**kw) -> dict:
    out = {c: 0 for c in COLUMNS}
    out.update(kw)
    return out


# -- surfaces (each runs in its own interpreter) ----------------------------------------------------

def surface_ioctls(seconds: float, rng: random.Random) -> dict:
    from hcqsim import drm_uapi as d
    from hcqsim import kfd_uapi as k
    from hcqsim.kfd import EmulatedSystem
    from tests.test_kfd_driver import Runtime
    system = EmulatedSystem(1)
    rt = Runtime(system.os)
    gpu_id = rt.gpu_id()
    scratch = (ctypes.c_uint8 * 65536)()
    names = [io for io in k.IOCTLS.values() if io.name != "WAIT_EVENTS"]  # its counts: the counts surface
    cases = unexpected = 0
    errnos: dict[str, int] = {}
    end = time.monotonic() + seconds
    while time.monotonic() < end or cases == 0:
        cases += 1
        if rng.random() < 0.1:  # DRM on the render node, any nr
            nr, size = rng.randrange(256), rng.choice((8, 16, 32, 64))
            fd, request, arg = rt.gpus[0][2], k.IOWR("d", nr, size), bytearray(rng.randbytes(size))
        else:
            io = rng.choice(names)
            nr = io.nr if rng.random() < 0.95 else rng.randrange(0x27, 0x100)
            arg = io.struct.from_buffer_copy(rng.randbytes(ctypes.sizeof(io.struct)))
            for name, _ in io.struct._fields_:
                if name == "gpu_id" and rng.random() < 0.5:
                    setattr(arg, name, gpu_id)
                elif name.endswith("_ptr") and rng.random() < 0.5:
                    setattr(arg, name, ctypes.addressof(scratch))
            fd, request = rt.kfd, k.IOWR("K", nr, ctypes.sizeof(io.struct))
        try:
            system.os.ioctl(fd, request, arg)
            errnos["0"] = errnos.get("0", 0) + 1
        except OSError as e:
            key = errno.errorcode.get(e.errno, str(e.errno))
            errnos[key] = errnos.get(key, 0) + 1
        except Exception as e:  # noqa: BLE001 - the finding
            unexpected += 1
            errnos[type(e).__name__] = errnos.get(type(e).__name__, 0) + 1
    system.close()
    del d
    return _counts(cases=cases, unexpected=unexpected, detail=errnos)


def surface_counts(seconds: float, rng: random.Random) -> dict:
    from hcqsim import kfd_uapi as k
    from hcqsim.kfd import EmulatedSystem
    from hcqsim.kfd.uaccess import KMALLOC_MAX_SIZE
    from tests.test_kfd_driver import GTT, Runtime
    system = EmulatedSystem(1)
    rt = Runtime(system.os)
    mem = rt.alloc(4096, GTT)
    out = (k.ProcessDeviceApertures * 1)()
    cases = []
    for n in (KMALLOC_MAX_SIZE // 4 + 1, 0xFFFFFFFF):
        for name in ("MAP_MEMORY_TO_GPU", "UNMAP_MEMORY_FROM_GPU"):
            cases.append((name, dict(handle=mem.handle, device_ids_array_ptr=0x1000, n_devices=n)))
    size = ctypes.sizeof(k.ProcessDeviceApertures)
    for n in (KMALLOC_MAX_SIZE // size + 1, 0xFFFFFFFF):
        cases.append(("GET_PROCESS_APERTURES_NEW", dict(kfd_process_device_apertures_ptr=ctypes.addressof(out),
                                                        num_of_nodes=n)))
    size = ctypes.sizeof(k.EventData)
    for n in (KMALLOC_MAX_SIZE // size + 1, 0xFFFFFFFF):
        cases.append(("WAIT_EVENTS", dict(events_ptr=0x1000, num_events=n, timeout=0)))
    unbounded, unexpected, detail = 0, 0, {}
    for name, fields in cases:
        key = f"{name} {list(fields.values())[-1 if name != 'WAIT_EVENTS' else 1]:#x}"
        try:
            rt.ioctl(name, **fields)
            detail[key], unbounded = "accepted", unbounded + 1
        except OSError as e:
            detail[key] = errno.errorcode.get(e.errno, str(e.errno))
            unbounded += e.errno != errno.ENOMEM  # it went on to read (or allocate) what the count said
        except MemoryError:
            detail[key], unbounded = "MemoryError", unbounded + 1
        except Exception as e:  # noqa: BLE001
            detail[key], unexpected = type(e).__name__, unexpected + 1
    system.close()
    return _counts(cases=len(cases), unbounded_allocations=unbounded, unexpected=unexpected, detail=detail)


def surface_streams(seconds: float, rng: random.Random) -> dict:
    from hcqsim import EmulatedGPU, pm4, sdma
    opcodes = sorted(pm4.OPCODES) + [rng.randrange(256) for _ in range(8)]  # known ones, and some others
    cases = unexpected = broken = 0
    kinds: dict[str, int] = {}
    gpu = EmulatedGPU("gfx1100", seed=rng.randrange(1 << 30))
    buf = gpu.alloc(1 << 16)
    end = time.monotonic() + seconds
    while time.monotonic() < end or cases == 0:
        cases += 1
        words = []
        for _ in range(rng.randrange(1, 24)):
            r = rng.random()
            if r < 0.4:
                words += [3 << 30 | rng.randrange(0x3FFF) << 16 | rng.choice(opcodes) << 8]
            elif r < 0.7:
                words += pm4.write_data(buf.va + 4 * rng.randrange(1 << 14), [rng.getrandbits(32)])
            else:
                words.append(rng.choice((0, buf.va & 0xFFFFFFFF, buf.va >> 32, rng.getrandbits(32))))
        engine = rng.choice(("pm4", "sdma"))
        q = gpu.compute_queue() if engine == "pm4" else gpu.sdma_queue()
        try:
            q.submit(words)
            gpu.run()
        except Exception as e:  # noqa: BLE001 - a host exception from a stream is the finding
            unexpected += 1
            kinds[type(e).__name__] = kinds.get(type(e).__name__, 0) + 1
        for f in gpu.faults:
            kinds[f.kind] = kinds.get(f.kind, 0) + 1
            unexpected += f.kind not in DOCUMENTED_FAULTS
        gpu.faults.clear()
        gpu.destroy_queue(q)
        probe = gpu.sdma_queue()  # the GPU keeps working
        probe.submit(sdma.fence(buf.va, cases & 0xFFFFFFFF, "sdma6"))
        gpu.run()
        broken += int(buf.u32()[0] != cases & 0xFFFFFFFF)
        gpu.destroy_queue(probe)
    gpu.close()
    return _counts(cases=cases, unexpected=unexpected + broken, detail=kinds)


def surface_threads(seconds: float, rng: random.Random) -> dict:
    from hcqsim.runtime import open_devices
    devs = open_devices("sim", 5, free_running=True)  # a Device is not thread-safe: one per thread, one system
    system = devs[0]._owner.system
    results: dict = {"rounds": 0, "wrong": 0, "errors": 0}
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def worker(i: int) -> None:
        local = random.Random(rng.randrange(1 << 30) + i)
        dev = devs[i]
        buf, sig = dev.alloc(8192), dev.new_signal(0)
        n = 0
        while time.monotonic() < end or n == 0:
            n += 1
            try:
                data = local.randbytes(4096)
                dev.copyin(buf, data)
                ok = dev.copyout(buf, 4096) == data
                dev.copy_queue(i % dev.queue_count("copy")).fill(buf.offset(4096), n, 4096).signal(sig, n).submit()
                sig.wait(n)
                ok &= dev.copyout(buf, 4, offset=4096) == n.to_bytes(4, "little")
            except Exception as e:  # noqa: BLE001
                with lock:
                    results["errors"] += 1
                    results.setdefault("first_error", repr(e)[:300])
                return
            with lock:
                results["rounds"] += 1
                results["wrong"] += not ok
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(devs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dead = int(not system.thread.alive or system.thread.error is not None)
    for d in devs:
        d.close()
    return _counts(cases=results["rounds"], gpu_thread_deaths=dead, unexpected=results["wrong"] + results["errors"],
                   detail=results)


def surface_misuse(seconds: float, rng: random.Random) -> dict:
    import pytest
    from hcqsim.runtime import open_devices
    from tests.test_runtime_refusals import make_world, refusals, state
    devs = open_devices("sim", 2)
    world = make_world(*devs)
    cases = changed = unexpected = 0
    end = time.monotonic() + seconds
    while True:
        for name, call, exc, words in refusals(world):
            cases += 1
            before = state(world)
            try:
                with pytest.raises(exc) as info:
                    call()
                unexpected += not all(w in str(info.value) for w in words)
            except BaseException:  # noqa: BLE001 - accepted, or the wrong exception
                unexpected += 1
            changed += state(world) != before
        if time.monotonic() > end:
            break
    for d in devs:
        d.close()
    return _counts(cases=cases, state_changes=changed, unexpected=unexpected)


def surface_close(seconds: float, rng: random.Random) -> dict:
    from hcqsim.runtime import open_device
    cases = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end or cases == 0:
        cases += 1
        dev = open_device("sim", free_running=rng.random() < 0.5)
        buf, sig = dev.alloc(4096), dev.new_signal(1)
        view, addr, stop = buf.view, sig.value_addr, []

        def poll():
            while not stop:
                int(view[0]) + ctypes.c_uint64.from_address(addr).value

        t = threading.Thread(target=poll)
        t.start()
        time.sleep(rng.random() * 0.01)
        dev.close()
        time.sleep(0.002)
        stop.append(1)
        t.join()
    return _counts(cases=cases)


SCALE_IR = """
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()
define amdgpu_kernel void @scale(ptr addrspace(1) %p, i32 %k) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %g = call i32 @llvm.amdgcn.workgroup.id.x()
  %b = mul i32 %g, 64
  %i = add i32 %b, %t
  %q = getelementptr i32, ptr addrspace(1) %p, i32 %i
  %v = load i32, ptr addrspace(1) %q
  %w = mul i32 %v, %k
  store i32 %w, ptr addrspace(1) %q
  ret void
}
"""
SOAK_GPUS = 6


class _WaitsInFinalizer:
    """Cyclic garbage whose finalizer waits (bounded) for a signal value, as tinygrad's HCQGraph.__del__ and buffer
    frees wait for their device: run on the GPU thread by a collection its allocations trigger, it stopped every GPU
    (issue 22's wedge; kfd/collector.py). Appends (waited, reached the value) to `out`."""

    def __init__(self, signal, value: int, out: list):
        self.me, self.signal, self.value, self.out = self, signal, value, out

    def __del__(self):
        try:
            deadline = time.monotonic() + 10
            while self.signal.value < self.value and time.monotonic() < deadline:
                time.sleep(0.001)
            self.out.append((1, self.signal.value >= self.value))
        except Exception:  # noqa: BLE001 - a finalizer must not raise; counted as a wedge
            self.out.append((1, False))


def surface_soak(seconds: float, rng: random.Random) -> dict:
    """The long-run wedge's shape (issue 22: tinygrad's tests over 6 free-running GPUs): one thread per GPU, every
    compute and copy queue of it in turn, kernels, fills, copies, cross-queue waits and a peer copy to the next GPU,
    every completion checked (memory and signal values), waits bounded; at the end every queue of every GPU idle,
    the GPU thread alive and without error."""
    import numpy as np
    from hcqsim.compiler import compile_llvm
    from hcqsim.runtime import open_devices
    devs = open_devices("sim", SOAK_GPUS, free_running=True)
    system = devs[0]._owner.system
    code = compile_llvm(SCALE_IR, devs[0].target)
    results: dict = {"rounds": 0, "kernels": 0, "copies": 0, "wrong": 0, "errors": 0}
    finalized: list[tuple[int, bool]] = []  # (1, reached) per finalizer that waited for its round's signal
    lock = threading.Lock()
    end = time.monotonic() + seconds
    peers = []
    for i, dev in enumerate(devs):  # each GPU's inbox, mapped on the GPU before it (its peer copies land there)
        inbox = dev.alloc(4096)
        dev.map_to(inbox, devs[i - 1])
        peers.append(inbox)

    def worker(i: int) -> None:
        local = random.Random(rng.randrange(1 << 30) + i)
        dev, nxt = devs[i], (i + 1) % len(devs)
        kernel = dev.load_program(code, "scale")
        buf, side = dev.alloc(4096), dev.alloc(4096)
        done, gate = dev.new_signal(0), dev.new_signal(0)
        n = 0
        try:
            while time.monotonic() < end or n == 0:
                n += 1
                k = local.randrange(2, 7)
                start = np.arange(1024, dtype=np.uint32) + n
                dev.copyin(buf, start.tobytes())
                cq = dev.compute_queue(n % dev.queue_count("compute"))
                xq = dev.copy_queue(n % dev.queue_count("copy"))
                # copy queue waits for the kernel, then copies the result aside and to the next GPU's inbox
                xq.wait(gate, n).copy(side, buf, 4096).copy(peers[nxt], buf, 64).signal(done, n).submit()
                cq.exec(kernel, [buf, k], 1024, 64).exec(kernel, [buf, 1], 1024, 64).signal(gate, n).submit()
                _WaitsInFinalizer(done, n, finalized)  # garbage a collection finds while the round runs
                done.wait(n, timeout_ms=20_000)
                want = (start * k).astype(np.uint32)
                ok = np.array_equal(np.frombuffer(dev.copyout(side, 4096), np.uint32), want)
                with lock:
                    results["rounds"] += 1
                    results["kernels"] += 2
                    results["copies"] += 2
                    results["wrong"] += not ok
        except Exception as e:  # noqa: BLE001 - a wedge (DeviceTimeout) or any error is the finding
            with lock:
                results["errors"] += 1
                results.setdefault("first_error", f"GPU {i} round {n}: {e!r}"[:3000])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(devs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    busy = [f"GPU {g.index} {q.name}" for g in system.gpus for q in g.queues if q.fault is None and q.has_work()] \
        if all(hasattr(q, "has_work") for g in system.gpus for q in g.queues) else []
    dead = int(not system.thread.alive or system.thread.error is not None)
    gc.collect()  # the last rounds' finalizers run now, before the devices close
    results["finalizer_waits"] = len(finalized)
    results["finalizers_wedged"] = sum(not reached for _, reached in finalized)
    results["busy_queues_at_end"] = busy
    results["kernels_per_gpu"] = results["kernels"] // len(devs)  # past ~1638 the kernarg arena was refilled
    for d in devs:
        d.close()
    return _counts(cases=results["rounds"], gpu_thread_deaths=dead,
                   unexpected=results["wrong"] + results["errors"] + len(busy) + results["finalizers_wedged"],
                   detail=results)


def surface_errnos(seconds: float, rng: random.Random) -> dict:
    from tests import kfd_errnos
    result = kfd_errnos.run()
    return _counts(cases=result["rows"], unexpected=result["rows"] - result["equal"],
                   detail={"equal to Linux": f"{result['equal']}/{result['rows']}", **result["wrong"]})


# -- the campaign ----------------------------------------------------------------------------------

def run_surface(name: str, seconds: float, seed: int) -> dict:
    """One surface in a fresh interpreter: its counts, with a crash counted instead of raised."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "tests.audit", "--surface", name, "--seconds", str(seconds),
                           "--seed", str(seed)], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=seconds * 4 + 300)
    took = round(time.monotonic() - start, 1)
    if proc.returncode < 0:
        return _counts(host_crashes=1, seconds=took, detail=f"died of {signal.Signals(-proc.returncode).name}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode or not lines:
        return _counts(unexpected=1, seconds=took, detail=(proc.stderr or proc.stdout)[-800:])
    counts = json.loads(lines[-1])
    counts["seconds"] = took
    return counts


def table(results: dict[str, dict]) -> str:
    rows = [("surface",) + COLUMNS] + [(name,) + tuple(str(r[c]) for c in COLUMNS) for name, r in results.items()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    fmt = lambda row: "| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |"
    return "\n".join([fmt(rows[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [fmt(r) for r in rows[1:]])


def campaign(seconds: float, seed: int, surfaces=SURFACES, isolated: bool = True) -> dict[str, dict]:
    """Every surface's counts. `isolated=False` runs them in this interpreter (no start-up cost per surface;
    a crash then ends the caller too, which a test reports as well)."""
    def secs(name: str) -> float:
        return max(seconds, SOAK_LONG) if name == "soak" and seconds >= PROFILES["long"] else seconds

    if isolated:
        return {name: run_surface(name, secs(name), seed) for name in surfaces}
    out = {}
    for name in surfaces:
        start = time.monotonic()
        out[name] = globals()[f"surface_{name}"](secs(name), random.Random(seed))
        out[name]["seconds"] = round(time.monotonic() - start, 1)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tests.audit", description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=sorted(PROFILES), default="short")
    ap.add_argument("--seconds", type=float, help="per surface (default: the profile's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="also write the table and the counts (JSON) here")
    ap.add_argument("--surface", choices=SURFACES, help=argparse.SUPPRESS)  # worker mode
    ap.add_argument("--only", nargs="*", choices=SURFACES, help="run only these surfaces")
    args = ap.parse_args(argv)
    seconds = args.seconds if args.seconds is not None else PROFILES[args.profile]
    if args.surface:
        counts = globals()[f"surface_{args.surface}"](seconds, random.Random(args.seed))
        print(json.dumps(counts, sort_keys=True, default=str))
        return 0
    results = campaign(seconds, args.seed, args.only or SURFACES)
    text = table(results)
    if "errnos" in results and isinstance(results["errnos"].get("detail"), dict):
        text += f"\nerrnos: {results['errnos']['detail'].get('equal to Linux')} rows of tests/kfd_errnos.py equal Linux"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n\n" + json.dumps(results, indent=1, sort_keys=True, default=str) + "\n")
    bad = sum(r[c] for r in results.values() for c in COLUMNS[1:6])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
