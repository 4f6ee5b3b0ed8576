"""The AQL packet processor (hcqsim.engines.aql) running the packets of the language module hcqsim.aql, packet by packet, on the direct GPU API.

An AQL queue's ring is an array of 64-byte HSA packets; the doorbell carries the index of the last packet
written and the processor reports read_dispatch_id (packets consumed). Kernel dispatch packets run on the
same shader core as PM4 DISPATCH_DIRECT, with registers derived from the kernel descriptor the packet
points at; completion signals (amd_signal_t) are decremented and wake their event; barrier-AND/OR wait on
dependency signals; an INVALID header stops the processor until the producer publishes it, and a
malformed packet faults the queue naming the packet.
"""
from __future__ import annotations

import struct

import numpy as np
import pytest

from hcqsim import EmulatedGPU, kernels, pm4
from hcqsim.codeobject import CodeObject
from hcqsim import aql
from hcqsim.runtime import program as P

TARGETS = ["gfx1100", "gfx942"]


@pytest.fixture(params=TARGETS)
def gpu(request):
    with EmulatedGPU(target=request.param, seed=0) as g:
        yield g


def load_iota(g: EmulatedGPU):
    """The iota kernel's image in executable memory: (kernel, descriptor address)."""
    co = CodeObject.from_bytes(kernels.code_object("iota", g.target.name))
    image = g.alloc(co.image_size, executable=True)
    raw = co.image(base=image.va)
    image.view[:len(raw)] = np.frombuffer(raw, np.uint8)
    k = co.kernel("iota")
    return k, image.va + k.descriptor_offset


def iota_packet(g: EmulatedGPU, dst, base: int, n: int, local: int = 64, signal: int = 0, **kw) -> bytes:
    """A dispatch packet for iota(dst, base, n) over n work-items, its kernargs written as HIP would."""
    k, kd = load_iota(g)
    ka = g.alloc(4096)
    launch = P.Launch((n, 1, 1), (local, 1, 1), 1)
    P.write_kernargs(k, ka.view, [dst.va, base, n], launch)
    return aql.kernel_dispatch_packet(kd, ka.va, (n, 1, 1), (local, 1, 1), dims=1, completion_signal=signal,
                                      group_segment_size=k.group_segment_fixed_size, **kw)


def new_signal(g: EmulatedGPU, value: int, mailbox: int = 0, event_id: int = 0) -> int:
    """An amd_signal_t (kind USER) with `value`, optionally an event mailbox and id."""
    s = g.alloc(64)
    s.view[:32] = np.frombuffer(struct.pack("<qqQI4x", 1, value, mailbox, event_id), np.uint8)
    return s.va


def signal_value(g: EmulatedGPU, sig: int) -> int:
    return struct.unpack("<q", g.memory.read(sig + 8, 8))[0]


def read_dispatch_id(q) -> int:
    return q.amd_queue.u64()[aql.QUEUE_READ_DISPATCH_ID // 8]


def test_kernel_dispatch_runs_the_descriptors_kernel_and_decrements_its_completion_signal(gpu):
    q, out = gpu.aql_queue(), gpu.alloc(4096)
    sig = new_signal(gpu, 1)
    q.submit(iota_packet(gpu, out, 100, 200, signal=sig))  # 200 items in groups of 64: a partial group
    assert not gpu.faults
    assert list(out.u32()[:201]) == [100 + i for i in range(200)] + [0]
    assert signal_value(gpu, sig) == 0
    assert read_dispatch_id(q) == 1 and q.amd_queue.u64()[aql.QUEUE_WRITE_DISPATCH_ID // 8] == 1


def test_a_completion_signal_with_an_event_mailbox_gets_the_event_id_and_an_interrupt(gpu):
    q, out, mailbox = gpu.aql_queue(), gpu.alloc(4096), gpu.alloc(4096)
    mailbox.u64()[0] = (1 << 64) - 1  # an unsignalled KFD event slot
    sig = new_signal(gpu, 3, mailbox=mailbox.va, event_id=42)
    q.submit(iota_packet(gpu, out, 0, 64, signal=sig))
    assert signal_value(gpu, sig) == 2
    assert mailbox.u32()[0] == 42
    assert [(i.source, i.ctxid, i.queue) for i in gpu.interrupts] == [("cp_eop", 42, q.name)]


def test_packets_run_in_order_and_read_dispatch_id_counts_them_across_the_ring_end(gpu):
    q, out = gpu.aql_queue(ring_size=1024), gpu.alloc(4096)  # 16 slots
    sig = new_signal(gpu, 40)
    for i in range(40):
        q.submit(iota_packet(gpu, out, i, 64, signal=sig))
    assert not gpu.faults and signal_value(gpu, sig) == 0
    assert out.u32()[0] == 39 and read_dispatch_id(q) == 40


def _ib_write(g: EmulatedGPU, addr: int, value: int):
    ib = g.alloc(4096)
    dws = pm4.write_data(addr, [value])
    ib.u32()[:len(dws)] = dws
    return ib.va, len(dws)


def test_a_vendor_pm4_ib_packet_runs_its_indirect_buffer_then_completes(gpu):
    q, out = gpu.aql_queue(), gpu.alloc(4096)
    sig = new_signal(gpu, 1)
    ib, n = _ib_write(gpu, out.va, 0xC0FFEE)
    q.submit(aql.pm4_ib_packet(ib, n, completion_signal=sig))
    assert out.u32()[0] == 0xC0FFEE and signal_value(gpu, sig) == 0 and read_dispatch_id(q) == 1


def test_barrier_and_waits_until_every_dependency_signal_is_zero(gpu):
    q, out = gpu.aql_queue(), gpu.alloc(4096)
    a, b, done = new_signal(gpu, 1), new_signal(gpu, 1), new_signal(gpu, 1)
    ib, n = _ib_write(gpu, out.va, 7)
    q.submit(aql.barrier_packet([a, b], completion_signal=done) + aql.pm4_ib_packet(ib, n))
    assert out.u32()[0] == 0 and read_dispatch_id(q) == 0
    assert [b_.queue for b_ in gpu.blocked()] == [q.name] and "BARRIER_AND" in gpu.blocked()[0].packet
    gpu.memory.write_u64(a + 8, 0)
    gpu.run()
    assert out.u32()[0] == 0 and signal_value(gpu, done) == 1  # one dependency left
    gpu.memory.write_u64(b + 8, 0)
    gpu.run()
    assert out.u32()[0] == 7 and signal_value(gpu, done) == 0 and read_dispatch_id(q) == 2


def test_barrier_or_waits_until_any_dependency_signal_is_zero(gpu):
    q, out = gpu.aql_queue(), gpu.alloc(4096)
    a, b = new_signal(gpu, 1), new_signal(gpu, 5)
    ib, n = _ib_write(gpu, out.va, 9)
    q.submit(aql.barrier_packet([a, b], any_=True) + aql.pm4_ib_packet(ib, n))
    assert out.u32()[0] == 0
    gpu.memory.write_u64(b + 8, 0)
    gpu.run()
    assert out.u32()[0] == 9


def test_a_barrier_with_no_dependencies_passes_at_once(gpu):
    q = gpu.aql_queue()
    done = new_signal(gpu, 1)
    q.submit(aql.barrier_packet([], completion_signal=done))
    assert signal_value(gpu, done) == 0


def test_an_invalid_header_stops_the_processor_until_the_producer_publishes_the_packet(gpu):
    q, out = gpu.aql_queue(), gpu.alloc(4096)
    ib, n = _ib_write(gpu, out.va, 5)
    packet = aql.pm4_ib_packet(ib, n)
    # the producer reserved slot 0 and rang the doorbell before storing the header: slot still INVALID
    gpu.memory.write(q.ring_va + 4, packet[4:])
    gpu.memory.write_u64(q.wptr_va, 1)
    gpu.ring_doorbell(q, 0)
    assert not gpu.faults and out.u32()[0] == 0 and read_dispatch_id(q) == 0
    assert q.blocked_report() is not None
    gpu.memory.write(q.ring_va, packet[:4])  # header store: the processor goes on
    gpu.run()
    assert out.u32()[0] == 5 and read_dispatch_id(q) == 1


@pytest.mark.parametrize("mutate, words", [
    (lambda p: struct.pack("<H", 7) + p[2:], "header type 7 is reserved"),
    (lambda p: struct.pack("<H", aql.header(2, acquire=3)) + p[2:], "acquire fence scope 3 is reserved"),
    (lambda p: p[:2] + struct.pack("<H", 0) + p[4:], "setup.dimensions is 0"),
    (lambda p: p[:4] + struct.pack("<H", 0) + p[6:], "zero dimension"),
    (lambda p: p[:32] + struct.pack("<Q", 0x1234) + p[40:], "kernel_object 0x1234 is not a 64-byte aligned"),
], ids=["reserved-type", "reserved-scope", "zero-dims", "zero-workgroup", "unaligned-kernel-object"])
def test_a_malformed_packet_faults_the_queue_naming_the_queue_index_and_packet(gpu, mutate, words):
    q, out = gpu.aql_queue(), gpu.alloc(4096)
    good = iota_packet(gpu, out, 1, 64)
    q.submit(good + mutate(good) + good)
    (f,) = gpu.faults
    assert f.queue == q.name and f.engine == "aql"
    assert words in f.message and "AQL packet 1 (ring slot 1)" in f.message
    assert f.ring_offset == 64 and f.packet.startswith("AQL")
    assert read_dispatch_id(q) == 1  # the first packet ran; nothing after the bad one


def test_user_sgprs_come_from_the_descriptor_packet_and_queue(gpu):
    """dispatch_ptr = the packet's address, queue_ptr = the amd_queue_t, kernarg = the packet's kernarg."""
    q = gpu.aql_queue()
    seen = []
    core = gpu.shader_core
    gpu.shader_core = type("Spy", (), {"launch": lambda self, queue, d, policy=None: seen.append(d)})()
    try:
        out = gpu.alloc(4096)
        packet = iota_packet(gpu, out, 0, 64)
        q.submit(packet)
    finally:
        gpu.shader_core = core
    (d,) = seen
    k, kd = load_iota(gpu)
    kernarg = struct.unpack_from("<Q", packet, 40)[0]
    expected = P.user_sgprs(k, q.ring_va, q.amd_queue.va, kernarg, 0)
    assert d.user_data == expected
    assert d.pgm_addr == struct.unpack_from("<Q", packet, 32)[0] + k.code_offset - k.descriptor_offset
    assert (d.groups, d.group_size, d.partial_size) == ((1, 1, 1), (64, 1, 1), (0, 0, 0))


# -- the runtime on AQL queues -------------------------------------------------------------------------


@pytest.fixture(params=TARGETS)
def aql_device(request):
    from hcqsim.runtime import open_device
    dev = open_device("sim", target=request.param, aql=True)
    yield dev
    dev.close()


def _gpu_queues(dev):
    return dev._owner.system.gpus[dev.index].queues


def test_the_runtime_on_aql_runs_kernels_as_aql_dispatch_packets_and_signals_as_vendor_pm4(aql_device):
    dev = aql_device
    program = dev.load_program(kernels.code_object("iota", dev.target), "iota")
    out, done = dev.alloc(4096), dev.new_signal(0)
    dev.compute_queue().exec(program, [out, 5, 300], 300, 64).signal(done, 1).submit()
    done.wait(1)
    assert list(out.view[:1204].view(np.uint32)) == [5 + i for i in range(300)] + [0]
    (q,) = [q for q in _gpu_queues(dev) if q.engine == "aql"]
    assert q.aql_dispatches == 1 and q.dispatches == 1  # the kernel went through the AQL path, not an IB


def test_the_runtime_on_aql_waits_on_a_signal_the_cpu_releases(aql_device):
    dev = aql_device
    gate, done, out = dev.new_signal(0), dev.new_signal(0), dev.alloc(4096)
    dev.compute_queue().wait(gate, 1).fill(out, 0xAB, 64).signal(done, 1).submit()
    assert done.value == 0 and out.view[0] == 0
    gate.value = 1
    done.wait(1)
    assert out.view[:64].tolist() == [0xAB, 0, 0, 0] * 16


def test_the_runtime_on_aql_reuses_its_ring_and_ib_arena_many_times_over(aql_device):
    dev = aql_device
    sig = dev.new_signal(0)
    for i in range(1, 2000):  # 2 packets per submission: the 1024-slot ring wraps; the IB arena too
        dev.compute_queue().signal(sig, i).submit()
    dev.synchronize()
    assert sig.value == 1999


def test_a_plain_store_of_doorbell_index_0_is_noticed_through_the_write_dispatch_id_poll(aql_device):
    """The first AQL doorbell value (0) equals the slot's initial value; write_dispatch_id tells the CP."""
    import ctypes
    dev = aql_device
    ring = dev.hardware_ring("compute")
    done = dev.new_signal(0)
    ib = dev.alloc(4096)
    dws = pm4.write_data(done.value_addr, [1])
    ib.view[:4 * len(dws)] = np.array(dws, np.uint32).view(np.uint8)
    packet = aql.pm4_ib_packet(ib.va, len(dws))
    ctypes.memmove(ring.ring_va + 4, packet[4:], 60)
    ctypes.c_uint32.from_address(ring.ring_va).value = struct.unpack_from("<I", packet)[0]
    ctypes.c_uint64.from_address(ring.wptr_va).value = 1
    dev.hdp_flush()  # the IB is CPU stores into VRAM: out of the HDP before the GPU reads it (facts 6.4)
    ctypes.c_uint64.from_address(ring.doorbell).value = 0  # a plain store, not os.ring_doorbell
    done.wait(1)


def test_a_stale_doorbell_value_never_moves_the_write_index_back(gpu):
    q, out = gpu.aql_queue(), gpu.alloc(4096)
    ib, n = _ib_write(gpu, out.va, 1)
    q.submit(aql.pm4_ib_packet(ib, n) + aql.pm4_ib_packet(ib, n))
    gpu.ring_doorbell(q, 0)  # the first packet's index again, after both ran
    assert not gpu.faults and q.wptr == 2 and read_dispatch_id(q) == 2


# -- the conformance suite on AQL queues ---------------------------------------------------------------

def _conformance():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from conformance import effects, reference, runner, scenarios
    return effects, reference, runner, scenarios


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", _conformance()[3].NAMES)
def test_every_conformance_scenario_on_aql_queues_matches_the_reference_model_and_the_pm4_golden(name, target):
    from pathlib import Path
    effects, reference, runner, scenarios = _conformance()
    sc = scenarios.get(name)
    seen, _ = runner.run_scenario(sc, "sim", target, aql=True)
    assert effects.differences(reference.expected_effects(sc, target), seen) == []
    golden = effects.load(str(Path(__file__).resolve().parent.parent / "conformance" / "golden" / f"sim-{target}.json"))
    assert effects.differences(golden["scenarios"][name], seen) == []  # the same effects as on PM4 queues


def test_a_kernel_with_a_private_segment_gets_its_scratch_from_the_amd_queue_t(aql_device):
    """The CP reads compute_tmpring_size and scratch_backing_memory_location from the queue for AQL."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "hwtests"))
    import kernel_corpus as KC
    from hcqsim.compiler import compile_llvm
    dev = aql_device
    program = dev.load_program(compile_llvm(KC.PRIVATE + KC.DECLS, dev.target), "private_array")
    assert program.kernel.private_segment_fixed_size >= 64
    n = 256
    idx = np.random.default_rng(1).integers(0, 1 << 20, n, dtype=np.uint32)
    src, out, done = dev.alloc(4 * n), dev.alloc(4 * n), dev.new_signal(0)
    src.view[:] = idx.view(np.uint8)
    dev.compute_queue().exec(program, [src, out], n, 64).signal(done, 1).submit()
    done.wait(1)
    gid = np.arange(n, dtype=np.uint32)
    assert (out.view.view(np.uint32) == (idx & 15) * gid).all()


def test_an_aql_builder_disassembles_its_dispatch_packets_and_pm4(aql_device):
    dev = aql_device
    program = dev.load_program(kernels.code_object("iota", dev.target), "iota")
    out, done = dev.alloc(4096), dev.new_signal(0)
    text = dev.compute_queue().exec(program, [out, 0, 64], 64, 64).signal(done, 1).disassemble()
    assert text.splitlines()[0].startswith("AQL KERNEL_DISPATCH barrier=1 acquire=system release=system dims=1 "
                                           "workgroup=(64,1,1) grid=(64,1,1)")
    assert "RELEASE_MEM" in text


def test_a_profiling_queue_writes_start_and_end_timestamps_into_the_completion_signal(gpu):
    q, out = gpu.aql_queue(), gpu.alloc(4096)
    q.amd_queue.u32()[aql.QUEUE_PROPERTIES // 4] |= aql.QUEUE_ENABLE_PROFILING
    first, second = new_signal(gpu, 1), new_signal(gpu, 1)
    q.submit(iota_packet(gpu, out, 0, 256, signal=first) + iota_packet(gpu, out, 0, 256, signal=second))
    (s1, e1), (s2, e2) = (struct.unpack("<QQ", gpu.memory.read(s + 32, 16)) for s in (first, second))
    assert 0 <= s1 < e1 <= s2 < e2 <= gpu.clock


def test_without_profiling_the_timestamps_stay_untouched(gpu):
    q, out = gpu.aql_queue(), gpu.alloc(4096)
    sig = new_signal(gpu, 1)
    q.submit(iota_packet(gpu, out, 0, 64, signal=sig))
    assert gpu.memory.read(sig + 32, 16) == bytes(16)
