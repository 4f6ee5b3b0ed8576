"""A runaway queue stops alone (issue 8 item 1).

A stream that never ends (an IB chaining to itself, an IB loop around a wait that always passes, a huge NOP
stream) executes at most `max_packets_per_run` packets per progress point, then becomes a fault of that
queue (kind "runaway") naming the queue, the ring/IB offset and the looping packet. The other queues keep
working and later progress points do not raise.
"""
from __future__ import annotations

import contextlib
import signal
import time

import pytest

from hcqsim import EmulatedGPU, pm4, sdma
from hcqsim.gpu import MAX_PACKETS_PER_RUN

BOUND = 2000


class _Hang(BaseException):  # not an Exception: the GPU would turn it into a fault
    pass


@contextlib.contextmanager
def _time_limit(seconds: float):
    def on_alarm(signum, frame):
        raise _Hang(f"still running after {seconds} s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _self_chaining_ib(g: EmulatedGPU):
    """An IB of [NOP, INDIRECT_BUFFER CHAIN to itself]: the chain packet sits at IB offset 8."""
    ib = g.alloc(4096)
    ib.u32()[:6] = pm4.nop(2) + pm4.indirect_buffer(ib.va, 6, chain=1)
    return ib


@pytest.mark.parametrize("policy", ["run_to_block", "round_robin", "random"])
def test_self_chaining_ib_faults_its_queue_and_names_the_chain_packet(policy):
    with EmulatedGPU(seed=0, policy=policy, max_packets_per_run=BOUND) as g:
        ib = _self_chaining_ib(g)
        q = g.compute_queue()
        with _time_limit(10):
            q.submit(pm4.indirect_buffer(ib.va, 6))
        [f] = g.faults
        assert (f.kind, f.queue, f.engine) == ("runaway", q.name, "pm4")
        assert f.where == f"IB at 0x{g.canonical(ib.va):x}" and f.ring_offset == 8
        assert f.packet.startswith("INDIRECT_BUFFER") and "chain=1" in f.packet
        assert f"more than {BOUND} packets" in f.message


def test_other_queues_keep_working_after_a_runaway():
    with EmulatedGPU(seed=0, policy="round_robin", max_packets_per_run=BOUND) as g:
        ib, out = _self_chaining_ib(g), g.alloc(4096)
        looping, good = g.compute_queue(), g.compute_queue()
        copy = g.sdma_queue()
        g.autorun = False  # both queues hold work when the progress point starts
        looping.submit(pm4.indirect_buffer(ib.va, 6))
        good.submit(pm4.write_data(out.va, [1]))
        g.run()
        g.autorun = True
        assert [(f.kind, f.queue) for f in g.faults] == [("runaway", looping.name)]
        assert out.u32()[0] == 1
        g.run()  # the next progress point does not raise or fault again
        good.submit(pm4.write_data(out.va + 4, [2]))
        copy.submit(sdma.fence(out.va + 8, 3))
        assert list(out.u32()[:3]) == [1, 2, 3] and len(g.faults) == 1


def test_ib_loop_around_a_passing_wait_is_runaway():
    """The polling loop whose exit never comes: WAIT_REG_MEM (passes), WRITE_DATA, CHAIN back to the start."""
    with EmulatedGPU(seed=0, max_packets_per_run=BOUND) as g:
        ib, flag = g.alloc(4096), g.alloc(4096)
        body = pm4.wait_reg_mem(flag.va, 0, function=3) + pm4.write_data(flag.va + 8, [7])
        ndw = len(body) + 4
        ib.u32()[:ndw] = body + pm4.indirect_buffer(ib.va, ndw, chain=1)
        q = g.compute_queue()
        q.submit(pm4.indirect_buffer(ib.va, ndw))
        [f] = g.faults
        assert f.kind == "runaway" and f.ring_offset == 4 * len(body) and "chain=1" in f.packet


def test_huge_nop_ib_is_runaway_naming_the_ring_packet():
    with EmulatedGPU(seed=0, max_packets_per_run=BOUND) as g:
        ib = g.alloc(64 << 10)
        ib.u32()[:] = pm4.nop(1)[0]  # one-dword NOPs
        q = g.compute_queue()
        q.submit(pm4.nop(2) + pm4.indirect_buffer(ib.va, len(ib.u32())))
        [f] = g.faults
        assert (f.kind, f.where, f.ring_offset) == ("runaway", "ring", 8)
        assert f.packet.startswith("INDIRECT_BUFFER") and "stopped before IB at" in f.message


def test_sdma_nop_stream_past_the_bound_is_runaway():
    with EmulatedGPU(seed=0, max_packets_per_run=BOUND) as g:
        ib, out = g.alloc(64 << 10), g.alloc(4096)
        ib.u32()[:] = sdma.nop(1)[0]
        q, other = g.sdma_queue(), g.sdma_queue()
        q.submit(sdma.indirect_padding(0) + sdma.indirect(ib.va, len(ib.u32())))
        other.submit(sdma.fence(out.va, 5))
        [f] = g.faults
        assert (f.kind, f.engine, f.queue) == ("runaway", "sdma", q.name) and f.packet.startswith("INDIRECT")
        assert out.u32()[0] == 5


def test_stream_of_exactly_the_bound_is_not_runaway():
    with EmulatedGPU(seed=0, max_packets_per_run=BOUND) as g:
        out = g.alloc(4096)
        q = g.compute_queue()
        q.submit(pm4.nop(2) * (BOUND - 1) + pm4.write_data(out.va, [9]))
        assert not g.faults and out.u32()[0] == 9


@pytest.mark.slow
def test_default_bound_stops_a_self_chaining_ib_within_seconds():
    with EmulatedGPU(seed=0) as g:
        ib = _self_chaining_ib(g)
        start = time.perf_counter()
        with _time_limit(60):
            g.compute_queue().submit(pm4.indirect_buffer(ib.va, 6))
        assert g.faults[0].kind == "runaway" and time.perf_counter() - start < 15
        assert MAX_PACKETS_PER_RUN == g.max_packets_per_run
