"""Emulator throughput, as `name: value` lines measured against baselines taken in the same run.

pm4_packets_per_s_<mix>: PM4 packets executed per second (NOP, WRITE_DATA, RELEASE_MEM and a mix), CPU time of
  this process (timing.best with time.process_time: a shared machine's waits for a core are not counted).
sdma_copy_vs_numpy_<size>: SDMA COPY_LINEAR throughput divided by a plain numpy copy of the same size
(numpy copying between the same two buffers).
Targets (issue 2): >= 200k PM4 packets/s; SDMA copy >= 0.5x numpy at >= 1 MiB. Issue 20: >= 500k PM4 packets/s
on every mix; SDMA copy >= 0.2x numpy at 4 KiB, >= 0.9x at >= 1 MiB.

Asynchronous dispatch (issue 21):
kernel_issue_steps_per_s_one_wave: issue steps per second of a one-wave counting loop (what the runaway bound
  `max_kernel_steps` costs: runaway_bound_s = max_kernel_steps / that rate).
interleaving_cost_<policy>: wall time of a stream of small kernels and signals under <policy> divided by the
  in-order default (run_to_block), the cost of exploring orders.
livelock_report_s: host wait -> DeadlockError naming the spinning wave, for a kernel spinning on a flag;
  livelock_report_s_atomic_poll: the same for a wave polling with an atomic add of 0 (stores compared while watched).
livelock_report_s_<kind>_<pm4|aql>: submit + host wait -> the livelock report, for a one-wave self-branch
  (`s_cbranch_vccnz -1`, an exact spin) and a poll that counts its tries (a counting spin, reported after
  spin_iterations iterations).
runaway_bound_s_<kind>_<pm4|aql>: submit -> the queue's `runaway` fault at max_kernel_steps, for the self-branch with
  the spin watch off (shader_core.watch_spins = False) and for a one-wave hash loop without loads (never a spin);
  runaway_bound_s_self_chaining_ib_<pm4|aql>: the same for an IB that chains to itself (max_packets_per_run).
sdma_copy_interleaved_vs_in_order_64MiB: a 64 MiB COPY_LINEAR under round_robin (a scheduler turn per 4 KiB chunk,
  beside an idle compute queue) divided by the in-order default (one memmove): what interleaving chunks costs.

`--only pm4,sdma` runs just those parts (names: PARTS); `--against REV` runs REV's and this tree's, interleaved,
and prints new/baseline ratios (bench/ab.py).
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab import PACKAGE_ROOT, main_or_against  # noqa: E402
sys.path.insert(0, PACKAGE_ROOT)
from timing import CPU, WALL, best, mode  # noqa: E402
from tests.async_kernels import SPIN_IR, counting_poll_ir, loop_ir  # noqa: E402  (the kernels the tests run)

from hcqsim import EmulatedGPU, kernels, pm4, sdma
from hcqsim.compiler import compile_llvm
from hcqsim.errors import DeadlockError, DeviceFault
from hcqsim.runtime import open_device

COUNT_IR = loop_ir()  # kernel "loop"(data, out, n): a hash over n iterations, registers only
ATOMIC_SPIN_IR = SPIN_IR.replace("load volatile i32, ptr addrspace(1) %flag, align 4",
                                 "atomicrmw volatile add ptr addrspace(1) %flag, i32 0 monotonic, align 4")
COUNTING_SPIN_IR = counting_poll_ir()  # kernel "counting_poll"(flag, out, bound)
# a one-wave self-branch (LLVM emits s_cbranch_vccnz -1): an exact spin, or with the watch off a runaway
FOREVER_IR = """
define amdgpu_kernel void @forever(ptr addrspace(1) %a, ptr addrspace(1) %b, i32 %n) {
entry:
  br label %loop
loop:
  br label %loop
}
"""


def stuck_kernel_seconds(ir: str, name: str, aql: bool, watch: bool = True) -> tuple[float, str]:
    """Submit a one-wave kernel that never ends and wait for it: seconds until the wait gave up, and how (the
    livelock report, or the runaway fault at max_kernel_steps)."""
    dev = open_device("sim", aql=aql)
    prog = dev.load_program(compile_llvm(ir, dev.target), name)
    dev.os.system.gpus[dev.index].shader_core.watch_spins = watch  # benchmark-only knob of the emulated machine
    buf, out, done = dev.alloc(4096), dev.alloc(4096), dev.new_signal(0)
    t = time.perf_counter()
    how = "completed"
    try:  # every kernel here takes (a buffer, a buffer, a bound) and never ends
        dev.compute_queue().exec(prog, [buf, out, 0xFFFFFFFF], 1, 1).signal(done, 1).submit()
        done.wait(1, timeout_ms=3_600_000)
    except DeadlockError:
        how = "livelock"
    except DeviceFault as e:
        how = "runaway" if "runaway" in str(e) else f"fault: {str(e)[:60]}"
    seconds = time.perf_counter() - t
    dev.close()
    return seconds, how


def self_chaining_ib_seconds(aql: bool) -> float:
    """An IB of [NOP, INDIRECT_BUFFER CHAIN to itself] (AQL: run from a vendor PM4_IB packet) until the runaway
    fault of its queue."""
    from hcqsim import aql as aql_packets
    with EmulatedGPU(target="gfx1100", seed=0, trace_limit=1000) as g:
        ib = g.alloc(4096)
        ib.u32()[:6] = pm4.nop(2) + pm4.indirect_buffer(ib.va, 6, chain=1)
        t = time.perf_counter()
        if aql:
            g.aql_queue().submit(aql_packets.pm4_ib_packet(ib.va, 6))
        else:
            g.compute_queue().submit(pm4.indirect_buffer(ib.va, 6))
        seconds = time.perf_counter() - t
        assert g.faults and g.faults[0].kind == "runaway", g.faults
    return seconds


def issue_steps_per_s(n: int = 20_000) -> tuple[float, int]:
    dev = open_device("sim")
    prog = dev.load_program(compile_llvm(COUNT_IR, dev.target), "loop")
    core = dev.os.system.gpus[dev.index].shader_core  # benchmark-only peek at the emulator's counters
    data, out, done = dev.alloc(4096), dev.alloc(4096), dev.new_signal(0)
    before = core.stats["issue_steps"]
    t = time.perf_counter()
    dev.compute_queue().exec(prog, [data, out, n], 1, 1).signal(done, 1).submit()
    done.wait(1, timeout_ms=600_000)
    seconds = time.perf_counter() - t
    steps = core.stats["issue_steps"] - before
    bound = core.max_kernel_steps
    dev.close()
    return steps / seconds, bound


def kernel_stream_seconds(policy: str, kernels_n: int = 30) -> float:
    dev = open_device("sim", policy=policy)
    prog = dev.load_program(kernels.code_object("iota", dev.target), "iota")
    out, done = dev.alloc(4 << 12), dev.new_signal(0)
    q = dev.compute_queue()
    for i in range(kernels_n):
        q.exec(prog, [out, i, 4096], 4096, 256)
    q.signal(done, 1)
    t = time.perf_counter()
    q.submit()
    done.wait(1, timeout_ms=600_000)
    seconds = time.perf_counter() - t
    dev.close()
    return seconds


def livelock_report_seconds(ir: str = SPIN_IR) -> float:
    dev = open_device("sim")
    prog = dev.load_program(compile_llvm(ir, dev.target), "poll")
    flag, out, done = dev.alloc(4096), dev.alloc(4096), dev.new_signal(0)
    dev.compute_queue().exec(prog, [flag, out], 64, 64).signal(done, 1).submit()
    t = time.perf_counter()
    try:
        done.wait(1)
    except DeadlockError as e:
        assert e.spinning and e.spinning[0].address == flag.va
    seconds = time.perf_counter() - t
    dev.close()
    return seconds


def sdma_interleaved_vs_in_order(size: int = 64 << 20) -> float:
    times = {}
    for policy in ("run_to_block", "round_robin"):
        with EmulatedGPU(target="gfx1100", seed=0, trace_limit=1000, policy=policy) as gpu:
            src, dst = gpu.alloc(size), gpu.alloc(size)
            gpu.compute_queue()  # a second activity the round robin turns to between chunks (idle: never ready)
            q = gpu.sdma_queue()
            limit = gpu.target.sdma_copy_max
            cmds = [d for off in range(0, size, limit) for d in sdma.copy_linear(dst.va + off, src.va + off,
                                                                                  min(limit, size - off))]
            times[policy] = best(lambda: q.submit(cmds), 3)
    return times["round_robin"] / times["run_to_block"]


def pm4_rate(gpu: EmulatedGPU, packets: list[list[int]], batches: int = 20) -> float:
    """Packets per second: pre-built batches submitted through the ring, executed by the CP."""
    q = gpu.compute_queue(ring_size=1 << 20)
    batch = [d for p in packets for d in p]
    def run():
        for _ in range(batches):
            q.submit(batch)
    seconds = best(run, 5, time.process_time)  # single-threaded: CPU time (see timing.best)
    return len(packets) * batches / seconds


def sdma_vs_numpy(gpu: EmulatedGPU, size: int) -> float:
    """A plain numpy copy's time over an SDMA copy's (one submission, executed at once), per copy. Small copies are
    timed in batches (k copies per sample: one CPU-clock read costs about what a 4 KiB memmove does)."""
    src, dst = gpu.alloc(size), gpu.alloc(size)
    src.view[:] = np.arange(size, dtype=np.uint64).astype(np.uint8)
    q = gpu.sdma_queue()
    limit = gpu.target.sdma_copy_max
    cmds = [d for off in range(0, size, limit) for d in sdma.copy_linear(dst.va + off, src.va + off,
                                                                          min(limit, size - off))]
    raw = np.array(cmds, dtype=np.uint32).tobytes()
    k = max(1, min(256, (1 << 20) // size))
    repeat = max(5, min(100, (256 << 20) // (size * k)))
    def copies():
        for _ in range(k):
            q.submit(raw)
    t_sdma = best(copies, repeat, time.process_time) / k  # single-threaded: CPU time
    assert np.array_equal(dst.view, src.view)
    # the baseline copies the same bytes between the same two buffers: the ratio is the emulator's overhead
    # (submit, decode, checks), not a difference between kinds of host memory
    d, s = dst.view, src.view
    def numpy_copies():
        for _ in range(k):
            np.copyto(d, s)
    t_numpy = best(numpy_copies, repeat, time.process_time) / k
    gpu.free(src), gpu.free(dst)
    return t_numpy / t_sdma


PARTS = ("pm4", "sdma", "issue", "stream", "livelock", "sdma_interleaved", "stuck", "runaway")


def main(argv: list[str]) -> None:
    parts = argv[argv.index("--only") + 1].split(",") if "--only" in argv else PARTS
    if "pm4" in parts:
        with EmulatedGPU(target="gfx1100", seed=0, trace_limit=1000) as gpu:
            sig = gpu.alloc(4096)
            n = 2000
            mixes = {
                "nop": [pm4.nop(2)] * n,
                "write_data": [pm4.write_data(sig.va + 8 * (i % 64), [i]) for i in range(n)],
                "release_mem": [pm4.release_mem(sig.va + 8 * (i % 64), i, data_sel=1) for i in range(n)],
            }
            mixes["mixed"] = [p for i in range(n // 3) for p in (mixes["nop"][i], mixes["write_data"][i],
                                                                 mixes["release_mem"][i])]
            for name, packets in mixes.items():
                print(f"pm4_packets_per_s_{name}: {pm4_rate(gpu, packets):.0f}" + mode(CPU, "best of 5 x 20 batches"))
    if "sdma" in parts:
        for label, size in (("4KiB", 4 << 10), ("1MiB", 1 << 20), ("64MiB", 64 << 20)):
            with EmulatedGPU(target="gfx1100", seed=0, trace_limit=1000) as gpu:
                print(f"sdma_copy_vs_numpy_{label}: {sdma_vs_numpy(gpu, size):.4f}" + mode(CPU, "ratio of bests"))
    if "issue" in parts:
        rate, bound = issue_steps_per_s()
        print(f"kernel_issue_steps_per_s_one_wave: {rate:.0f}" + mode(WALL, "one run"))
        print(f"runaway_bound_steps: {bound}")
        print(f"runaway_bound_s: {bound / rate:.1f}" + mode(WALL, "derived"))
    if "stream" in parts:
        base = min(kernel_stream_seconds("run_to_block") for _ in range(2))
        print(f"kernel_stream_s_run_to_block: {base:.3f}" + mode(WALL, "best of 2"))
        for policy in ("round_robin", "random"):
            print(f"interleaving_cost_{policy}: {kernel_stream_seconds(policy) / base:.2f}" + mode(WALL, "ratio"))
    if "livelock" in parts:
        print(f"livelock_report_s: {livelock_report_seconds():.3f}" + mode(WALL, "one run"))
        print(f"livelock_report_s_atomic_poll: {livelock_report_seconds(ATOMIC_SPIN_IR):.3f}" + mode(WALL, "one run"))
    if "sdma_interleaved" in parts:
        ratio = sdma_interleaved_vs_in_order()
        print(f"sdma_copy_interleaved_vs_in_order_64MiB: {ratio:.2f}" + mode(WALL, "ratio of bests of 3"))
    if "stuck" in parts:
        for queue, aql in (("pm4", False), ("aql", True)):
            for kind, ir, name in (("self_branch", FOREVER_IR, "forever"),
                                   ("counting_poll", COUNTING_SPIN_IR, "counting_poll")):
                seconds, how = stuck_kernel_seconds(ir, name, aql)
                print(f"livelock_report_s_{kind}_{queue}: {seconds:.3f}" + mode(WALL, "one run")
                      + ("" if how == "livelock" else f"  # {how}"))
    if "--quick" in argv or "runaway" not in parts:  # the runaway bounds take minutes
        return
    for queue, aql in (("pm4", False), ("aql", True)):
        print(f"runaway_bound_s_self_chaining_ib_{queue}: {self_chaining_ib_seconds(aql):.2f}" + mode(WALL, "one run"))
        for kind, ir, name, watch in (("self_branch_unwatched", FOREVER_IR, "forever", False),
                                      ("hash_loop", COUNT_IR, "loop", True)):
            seconds, how = stuck_kernel_seconds(ir, name, aql, watch)
            print(f"runaway_bound_s_{kind}_{queue}: {seconds:.1f}" + mode(WALL, "one run")
                  + ("" if how == "runaway" else f"  # {how}"))


if __name__ == "__main__":
    main_or_against("bench/emulator.py", main)
