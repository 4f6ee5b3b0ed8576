"""No atomic giants (issue 16 item 2, engine side): a packet that moves memory -- SDMA COPY_LINEAR and CONST_FILL, CP
DMA_DATA copies and fills -- moves it in chunks of `queue.COPY_CHUNK` bytes, each one unit of its queue's budget, so
other queues, running kernels and the host can act (and see a part-done copy) between two chunks. The in-order
default moves every chunk the budget allows in one memmove: same bytes, same virtual time, same trace as one piece.
"""
from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from hcqsim import EmulatedGPU, pm4, sdma
from hcqsim.engines.queue import COPY_CHUNK
from hcqsim.gpu import ExplicitChoices, make_policy

CHUNKS = 16
SIZE = CHUNKS * COPY_CHUNK


def pattern(n: int) -> np.ndarray:
    return (np.arange(n, dtype=np.uint64) * 2654435761 % 2**32 | 1).astype(np.uint32)  # no zero dword


def u32(buf, n=None):
    return buf.view[:buf.size // 4 * 4].view(np.uint32)[:n]


# the memory-moving packets, each as (engine, packets(dst, src), what dst holds afterwards)
def _copies(gpu, src):
    fill = 0x5A5A5A5A
    return {
        "sdma_copy_linear": ("sdma", lambda d, s, n=SIZE: sdma.copy_linear(d.va, s.va, n), u32(src)),
        "sdma_const_fill": ("sdma", lambda d, s, n=SIZE: sdma.const_fill(d.va, fill, n),
                            np.full(SIZE // 4, fill, np.uint32)),
        "dma_data_copy": ("pm4", lambda d, s, n=SIZE: pm4.dma_data(d.va, s.va, n), u32(src)),
        "dma_data_fill": ("pm4", lambda d, s, n=SIZE: pm4.dma_data(d.va, fill, n, src_sel=2),
                          np.full(SIZE // 4, fill, np.uint32)),
    }


KINDS = ["sdma_copy_linear", "sdma_const_fill", "dma_data_copy", "dma_data_fill"]


def machine(policy="run_to_block"):
    gpu = EmulatedGPU("gfx1100", policy=policy)
    src, dst, log = gpu.alloc(SIZE), gpu.alloc(SIZE), gpu.alloc(4096)
    u32(src)[:] = pattern(SIZE // 4)
    return gpu, src, dst, log


def observer(gpu, dst, log, n=4 * CHUNKS):
    """A PM4 queue that copies dst's first and last dword into log, n times: what another queue sees mid-copy."""
    q = gpu.compute_queue()
    packets = []
    for i in range(n):
        packets += pm4.copy_data(dst.va, log.va + 8 * i) + pm4.copy_data(dst.va + SIZE - 4, log.va + 8 * i + 4)
    return q, packets


def copy_beside_observer(kind, policy="run_to_block", nbytes=SIZE):
    """The copy `kind` of nbytes on its engine's queue and the observer on a PM4 queue, both submitted before one
    progress point runs them. Returns (gpu, dst, what dst holds afterwards, what the observer saw [n, 2])."""
    gpu, src, dst, log = machine(policy)
    engine, build, want = _copies(gpu, src)[kind]
    mover = gpu.sdma_queue() if engine == "sdma" else gpu.compute_queue()
    obs, packets = observer(gpu, dst, log)
    gpu.autorun = False
    mover.submit(build(dst, src, nbytes))
    obs.submit(packets)
    gpu.run()
    return gpu, dst, want, u32(log, 8 * CHUNKS).reshape(-1, 2)


@pytest.mark.parametrize("kind", KINDS)
def test_another_queue_sees_a_copy_part_done_between_its_chunks(kind):
    """Round robin (one unit per turn): the observer's reads fall between the copy's chunks, so it sees the first
    chunk landed and the last not yet -- the copy is not one indivisible step."""
    gpu, dst, want, seen = copy_beside_observer(kind, "round_robin")
    assert np.array_equal(u32(dst), want)
    part_done = (seen[:, 0] == want[0]) & (seen[:, 1] == 0)
    assert part_done.any(), f"never observed a part-done copy: {seen[:4].tolist()}..."
    assert (seen[:, 1] == want[-1]).any()  # and it finished while the observer still looked
    gpu.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_chunked_copy_takes_the_virtual_time_of_one_piece(kind, monkeypatch):
    """Interleaved chunk by chunk (round robin) or not, a copy costs the same ticks: one per 512 bytes in all,
    also when its size is not a multiple of a chunk."""
    clocks = []
    for chunk in (COPY_CHUNK, 1 << 40):
        monkeypatch.setattr("hcqsim.engines.queue.COPY_CHUNK", chunk)
        gpu, dst, want, _ = copy_beside_observer(kind, "round_robin", SIZE - 100)
        assert np.array_equal(u32(dst)[:(SIZE - 100) // 4], want[:(SIZE - 100) // 4])
        clocks.append(gpu.clock)
        gpu.close()
    assert clocks[0] == clocks[1]


@pytest.mark.parametrize("kind", KINDS)
def test_in_order_a_copy_is_one_turn_with_the_time_and_trace_of_one_piece(kind, monkeypatch):
    """The in-order default moves all chunks in one go; the virtual clock and the trace are those of an unchunked
    copy (COPY_CHUNK raised past the size), and another queue never sees it part-done."""
    runs = []
    for chunk in (COPY_CHUNK, 1 << 40):
        monkeypatch.setattr("hcqsim.engines.queue.COPY_CHUNK", chunk)
        gpu, dst, want, seen = copy_beside_observer(kind)
        assert np.array_equal(u32(dst), want)
        assert (seen[:, 0] == want[0]).all() and (seen[:, 1] == want[-1]).all()
        runs.append((gpu.clock, gpu.trace_lines()))
        gpu.close()
    assert runs[0] == runs[1]


@pytest.mark.parametrize("engine", ["sdma", "pm4"])
@pytest.mark.parametrize("shift", [-3 * COPY_CHUNK // 2, 4, 3 * COPY_CHUNK // 2])
def test_an_overlapping_copy_moved_in_chunks_gives_memmoves_result(engine, shift):
    """Overlap is undefined on hardware; hcqsim keeps memmove's result, chunked or not: a copy to a higher address
    moves its chunks from the end down."""
    gpu = EmulatedGPU("gfx1100", policy="round_robin")
    buf = gpu.alloc(4 * SIZE)
    data = pattern(SIZE)
    u32(buf)[:] = data
    src = buf.va + SIZE
    q = gpu.sdma_queue() if engine == "sdma" else gpu.compute_queue()
    q.submit(sdma.copy_linear(src + shift, src, SIZE) if engine == "sdma" else pm4.dma_data(src + shift, src, SIZE))
    gpu.run()
    want = data.view(np.uint8).copy()
    want[SIZE + shift:2 * SIZE + shift] = data.view(np.uint8)[SIZE:2 * SIZE].copy()
    assert np.array_equal(buf.view[:4 * SIZE], want)
    gpu.close()


def host_after(picks: list) -> ExplicitChoices:
    """A policy that makes these (index, budget) choices, then gives the host a turn at every decision (until its
    host_turns is switched off: then the last ready activity, one unit)."""
    it = iter(picks)
    chooser = ExplicitChoices(lambda n: next(it, (n - 1, 1)))
    chooser.host_turns = True
    return chooser


def test_the_host_gets_a_turn_between_chunks_and_the_queue_says_how_far_it_is():
    """A policy may end the progress point between two chunks (ExplicitChoices.host_turns): the host sees the copy
    part-done, the queue is busy with `transfer`, and the next progress point finishes it."""
    chooser = host_after([(0, 4)])  # the packet and three chunks (a unit each)
    gpu, src, dst, log = machine(chooser)
    q = gpu.sdma_queue()
    q.submit(sdma.copy_linear(dst.va, src.va, SIZE))  # the doorbell's progress point: 3 chunks, then the host
    assert q.transfer is not None and q.transfer.done == 3 * COPY_CHUNK
    assert "COPY_LINEAR: 12288 of 65536 bytes moved" in q.status()
    assert np.array_equal(u32(dst)[:3 * COPY_CHUNK // 4], u32(src)[:3 * COPY_CHUNK // 4])
    assert not u32(dst)[3 * COPY_CHUNK // 4:].any()
    chooser.host_turns = False
    gpu.run()
    assert q.transfer is None and np.array_equal(u32(dst), u32(src))
    gpu.close()


def test_chunks_do_not_count_against_the_runaway_bound():
    """The runaway bound counts packets: one copy of many chunks is one packet, however small the bound."""
    gpu, src, dst, log = machine()
    gpu.max_packets_per_run = 4  # fewer than the copy's 16 chunks
    q = gpu.sdma_queue()
    q.submit(sdma.copy_linear(dst.va, src.va, SIZE))
    gpu.run()
    assert q.fault is None and np.array_equal(u32(dst), u32(src))
    gpu.close()


def test_a_copy_with_a_bad_range_faults_its_packet_with_nothing_moved():
    gpu, src, dst, log = machine()
    q = gpu.sdma_queue()
    q.submit(sdma.copy_linear(dst.va, 0x1000, SIZE))  # never mapped
    gpu.run()
    assert q.fault is not None and q.fault.is_vm_fault and "COPY_LINEAR" in (q.fault.packet or ""), q.fault
    assert not u32(dst).any()
    gpu.close()


# -- DMA_DATA without CP_SYNC: the CP reads on while its DMA engine moves the bytes -------------------------------
# (facts 3.3: CP_SYNC[31]; derived from PAL: the ring does not wait for CP DMAs, a DMA_DATA with CP_SYNC -- PAL's
# wait is one of zero bytes -- waits for every earlier one; docs/decisions.md "Emulation model")
CP_DMA_WAIT = pm4.dma_data(0, 0, 0)  # zero bytes, CP_SYNC: the CP waits for the earlier CP DMA transfers


def async_copy_then_probe(policy, seed=0, *, wait=False, target="gfx1100"):
    """One PM4 queue: a DMA_DATA copy of SIZE bytes without CP_SYNC, [CP_DMA_WAIT,] then a COPY_DATA of dst's last
    dword to a probe. Returns what the COPY_DATA saw there: src's last dword once the copy had finished, else 0."""
    with EmulatedGPU(target, seed=seed, policy=policy) as gpu:
        src, dst, probe = gpu.alloc(SIZE), gpu.alloc(SIZE), gpu.alloc(4096)
        u32(src)[:] = pattern(SIZE // 4)
        q = gpu.compute_queue()
        q.submit(pm4.dma_data(dst.va, src.va, SIZE, cp_sync=0) + (CP_DMA_WAIT if wait else [])
                 + pm4.copy_data(dst.va + SIZE - 4, probe.va))
        gpu.run()
        assert q.fault is None and q.dma.pending == deque() and np.array_equal(u32(dst), u32(src))
        return int(u32(probe)[0]), int(u32(src)[-1])


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_a_packet_after_a_dma_data_without_cp_sync_sees_it_unfinished_under_some_order_never_in_order(target):
    seen, last = async_copy_then_probe("run_to_block", target=target)
    assert seen == last  # the in-order default moves the whole copy before the next packet
    explored = {async_copy_then_probe("random", s, target=target)[0] for s in range(1, 9)}
    assert 0 in explored, f"no explored order let the COPY_DATA overtake the copy: {explored}"


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_a_dma_data_with_cp_sync_waits_for_the_earlier_cp_dma_under_every_order(target):
    for policy, seed in [("run_to_block", 0), ("round_robin", 0)] + [("random", s) for s in range(1, 9)]:
        seen, last = async_copy_then_probe(policy, seed, wait=True, target=target)
        assert seen == last, (policy, seed)


def test_cp_dma_transfers_run_in_packet_order_and_the_queue_says_what_moves():
    """Two DMA_DATA without CP_SYNC to the same bytes: the later one lands last, whatever the order of turns; while
    they move, the queue's status names them."""
    chooser = host_after([(0, 1), (1, 1)])  # the queue ([q]): the first DMA_DATA; ([q.dma, q]) the second
    with EmulatedGPU("gfx1100", policy=chooser) as gpu:
        a, b, dst = gpu.alloc(SIZE), gpu.alloc(SIZE), gpu.alloc(SIZE)
        u32(a)[:], u32(b)[:] = 1, 2
        q = gpu.compute_queue()
        q.submit(pm4.dma_data(dst.va, a.va, SIZE, cp_sync=0) + pm4.dma_data(dst.va, b.va, SIZE, cp_sync=0))
        assert len(q.dma.pending) == 2 and "CP DMA DMA_DATA: 0 of 65536 bytes moved" in q.status()
        assert not u32(dst).any()  # the CP went on past both: nothing moved yet
        chooser.host_turns = False
        gpu.policy = make_policy("round_robin", gpu.rng)
        gpu.run()
        assert (u32(dst) == 2).all() and not q.dma.pending


def test_destroying_a_queue_stops_its_cp_dma():
    chooser = host_after([(0, 1)])  # the queue: the DMA_DATA
    with EmulatedGPU("gfx1100", policy=chooser) as gpu:
        src, dst = gpu.alloc(SIZE), gpu.alloc(SIZE)
        u32(src)[:] = 7
        q = gpu.compute_queue()
        q.submit(pm4.dma_data(dst.va, src.va, SIZE, cp_sync=0))
        assert q.dma.pending
        gpu.destroy_queue(q)
        chooser.host_turns = False
        gpu.run()
        assert not q.dma.pending and not u32(dst).any() and gpu.settled
