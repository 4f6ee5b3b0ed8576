"""Report mode's happens-before (hcqsim/coherence/order.py, docs/memory_model.md "Happens-before"): a cache
operation protects a load only where it is ordered between the access that made the copy (or the dirty bytes) and
the reader, whatever order the one run executed them in.

Each test is one rule, as a stream on the emulated machine (the streams of tests/test_memory_model_streams.py's
Rig) or on the clocks alone; `report` mode, the default deterministic schedule. In every stream here the run
itself executes the cache operation after the access it must follow (the default schedule runs each queue as far
as it can when its doorbell rings), so only the ordering decides whether a record is made.
"""
from __future__ import annotations

import numpy as np
import pytest

from hcqsim import pm4
from hcqsim.coherence.order import HOST, MULTI, Order
from hcqsim.runtime import CopyQueue
from test_memory_model_streams import (NBYTES, RELEASE_WRITE_BACK_ONLY, VECTOR_INVALIDATE, WORDS, WRITE_BACK, Rig,
                                       ramp, words)

FAMILY = {"gfx1100": "gfx11", "gfx942": "gfx9"}


def run(target: str, stream) -> tuple[object, list]:
    """`stream(rig)` under report mode: (its result, the records)."""
    rig = Rig(target, "report")
    try:
        out = stream(rig)
        rig.dev.synchronize()
        reports = list(rig.reports)
        rig.reports.clear()
        return out, reports
    finally:
        rig.close()


def stale(reports, target: str, buf) -> list:
    """The records of a stale vector line in `buf` read by a kernel."""
    names = VECTOR_INVALIDATE[FAMILY[target]]
    return [r for r in reports if r.kind == "stale line" and buf.va <= r.address < buf.va + NBYTES
            and any(n in r.missing.split() for n in names) and "kernel" in r.reader.lower()]


def text(reports) -> str:
    return "\n".join(str(r) for r in reports)


# -- cross-queue: an invalidate on the copy queue ------------------------------------------------------------------

def refill(r: Rig, copy_queue) -> tuple[np.ndarray, object]:
    """Kernel 1 reads src (its vector caches keep the lines: its release writes back only); the copy queue, built by
    `copy_queue(read, filled, src)` around a fill of src with 7s, signals `filled`; kernel 2 reads src with no
    acquire of its own. Returns (what kernel 2 wrote: 21 = 3 * 7 when it saw the fill, src)."""
    src, d1, d2 = r.vram(ramp()), r.vram(), r.vram()
    read, filled, done = r.signal(), r.signal(), r.signal()
    r.submit(r.kernel(src, d1, 2) + r.release(read, 1, cache_bits=RELEASE_WRITE_BACK_ONLY[r.family])
             + [r.gate(filled)] + r.kernel(src, d2, 3, acquire=False) + r.release(done, 1))
    r.submit(copy_queue(read, filled, src).packets, engine="copy")
    done.wait(1)
    return words(d2).copy(), src


def test_an_invalidate_not_ordered_after_the_copy_fill_does_not_protect_the_load():
    """The copy queue invalidates GLV/GL1 (GCR_REQ) *before* waiting for kernel 1: in this run kernel 1 has read
    src by then, so the invalidate drops its copies, but nothing orders it after those reads: in another schedule
    kernel 1 fills them after the invalidate and kernel 2 reads the old src."""
    (got, src), reports = run("gfx1100", lambda r: refill(r, lambda read, filled, src: CopyQueue(r.dev)
                                                          .memory_barrier().wait(read, 1).fill(src, 7, NBYTES)
                                                          .signal(filled, 1)))
    assert (got == 21).all()  # report mode keeps the coherent values
    found = stale(reports, "gfx1100", src)
    assert found, "no stale-line record for kernel 2's read of src:\n" + text(reports)
    assert "sdma" in found[0].writer.lower()


def test_an_invalidate_ordered_between_the_fill_and_the_load_protects_it():
    """The same invalidate after the copy queue's wait for kernel 1 and before its signal to kernel 2: kernel 1's
    copies are dropped by an operation ordered after them and before kernel 2's read: nothing is recorded."""
    (got, src), reports = run("gfx1100", lambda r: refill(r, lambda read, filled, src: CopyQueue(r.dev)
                                                          .wait(read, 1).fill(src, 7, NBYTES).memory_barrier()
                                                          .signal(filled, 1)))
    assert (got == 21).all() and not reports, text(reports)


# -- through the host -------------------------------------------------------------------------------------------

def host_relay(r: Rig, wait: bool):
    """Kernel 1 reads src and signals `read` (write-back only); the host (after waiting for `read`, or not) rings a
    copy queue that invalidates GLV/GL1 first, then fills src and signals kernel 2, which reads src without an
    acquire."""
    src, d1, d2 = r.vram(ramp()), r.vram(), r.vram()
    read, filled, done = r.signal(), r.signal(), r.signal()
    r.submit(r.kernel(src, d1, 2) + r.release(read, 1, cache_bits=RELEASE_WRITE_BACK_ONLY[r.family])
             + [r.gate(filled)] + r.kernel(src, d2, 3, acquire=False) + r.release(done, 1))
    if wait:
        read.wait(1)
    r.submit(CopyQueue(r.dev).memory_barrier().fill(src, 7, NBYTES).signal(filled, 1).packets, engine="copy")
    done.wait(1)
    return words(d2).copy(), src


def test_the_host_seeing_a_signal_orders_the_queue_it_rings_next_after_the_signals_writer():
    """The host waits for kernel 1's signal, then rings the copy queue: the copy queue's invalidate is ordered
    after kernel 1 (release -> the host's read -> its doorbell), so it protects kernel 2's read."""
    (got, src), reports = run("gfx1100", lambda r: host_relay(r, wait=True))
    assert (got == 21).all() and not reports, text(reports)


def test_a_doorbell_rung_without_waiting_for_the_signal_orders_nothing_after_its_writer():
    """The same stream without the host's wait: in this run kernel 1 still finished before the copy queue ran
    (the default schedule ran it at its doorbell), but nothing orders the copy queue's invalidate after it."""
    (got, src), reports = run("gfx1100", lambda r: host_relay(r, wait=False))
    assert (got == 21).all()
    assert stale(reports, "gfx1100", src), text(reports)


# -- one queue: the partial flush and end of pipe -----------------------------------------------------------------

def same_queue_acquire(r: Rig, flush: bool, at_end_of_pipe: bool = False):
    """Kernel 1 reads src; then (after a CS_PARTIAL_FLUSH, or not) the compute queue invalidates its vector caches
    -- with a full ACQUIRE_MEM, or with the cache bits of the end-of-pipe RELEASE_MEM that signals the copy queue;
    the copy queue refills src; kernel 2 reads it with no acquire."""
    src, d1, d2 = r.vram(ramp()), r.vram(), r.vram()
    read, filled, done = r.signal(), r.signal(), r.signal()
    invalidate = {"gfx11": dict(gl2_wb=1, glv_inv=1, gl1_inv=1, gcr_seq=1), "gfx9": dict(tc_wb_action_ena=1,
                  tcl1_action_ena=1, tc_action_ena=1)}[r.family]
    first = r.kernel(src, d1, 2, partial_flush=flush)
    if at_end_of_pipe:
        first += r.release(read, 1, cache_bits=invalidate)
    else:
        first += [r.acquire()] + r.release(read, 1, cache_bits=RELEASE_WRITE_BACK_ONLY[r.family])
    r.submit(first + [r.gate(filled)] + r.kernel(src, d2, 3, acquire=False) + r.release(done, 1))
    r.submit(CopyQueue(r.dev).wait(read, 1).fill(src, 7, NBYTES).signal(filled, 1).packets, engine="copy")
    done.wait(1)
    return words(d2).copy(), src


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_an_acquire_the_cp_reaches_while_the_kernel_may_still_run_does_not_protect_the_load(target):
    """No CS_PARTIAL_FLUSH between kernel 1 and the ACQUIRE_MEM: the CP does not wait for the dispatch (facts
    6.3), so kernel 1 may fill its vector caches after the invalidate."""
    (got, src), reports = run(target, lambda r: same_queue_acquire(r, flush=False))
    assert (got == 21).all()
    assert stale(reports, target, src), text(reports)


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_after_a_partial_flush_the_queues_acquire_is_ordered_after_its_kernel(target):
    (got, src), reports = run(target, lambda r: same_queue_acquire(r, flush=True))
    assert (got == 21).all() and not reports, text(reports)


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_an_end_of_pipe_release_invalidates_after_every_dispatch_before_it(target):
    """No partial flush, but the invalidate is the end-of-pipe RELEASE_MEM's: it acts once kernel 1 finished."""
    (got, src), reports = run(target, lambda r: same_queue_acquire(r, flush=False, at_end_of_pipe=True))
    assert (got == 21).all() and not reports, text(reports)


# -- write-back: gfx942, SDMA 4 reads around the L2 ------------------------------------------------------------------

def write_back_elsewhere(r: Rig, ordered: bool):
    """Queue 0's kernel writes mid (VRAM) and signals `written` with no write-back; compute queue 1 writes every L2
    back (RELEASE_MEM TC_WB) and signals `flushed` -- after waiting for `written`, or not; the SDMA queue waits for
    both and copies mid to GTT, reading around the L2."""
    src, mid, out = r.vram(ramp()), r.vram(), r.gtt()
    written, flushed, copied, go = r.signal(), r.signal(), r.signal(), r.signal()
    r.submit(r.kernel(src, mid, 3) + r.release(written, 1, write_back=False) + [r.gate(go)])
    r.submit(([r.gate(written)] if ordered else []) + r.release(flushed, 1, cache_bits=WRITE_BACK_BITS), index=1)
    r.submit(CopyQueue(r.dev).wait(written, 1).wait(flushed, 1).copy(out, mid, NBYTES).signal(copied, 1).packets,
             engine="copy")
    copied.wait(1)
    got = words(out).copy()
    go.value = 1
    return got, mid


WRITE_BACK_BITS = dict(tc_wb_action_ena=1, tc_nc_action_ena=1)


def read_around_l2(reports, mid) -> list:
    return [r for r in reports if r.kind == "not written back" and "TC_WB" in r.missing.split()
            and "sdma" in r.reader.lower() and mid.va <= r.address < mid.va + NBYTES]


def test_a_write_back_not_ordered_after_the_store_does_not_make_it_visible_around_the_l2():
    """In this run queue 1's write-back runs after the kernel's stores and cleans them, but nothing orders it after
    them: the SDMA read around the L2 could have met them dirty."""
    (got, mid), reports = run("gfx942", lambda r: write_back_elsewhere(r, ordered=False))
    assert (got == ramp() * 3).all()
    assert read_around_l2(reports, mid), text(reports)


def test_a_write_back_ordered_between_the_store_and_the_reader_makes_it_visible():
    (got, mid), reports = run("gfx942", lambda r: write_back_elsewhere(r, ordered=True))
    assert (got == ramp() * 3).all()
    assert not read_around_l2(reports, mid), text(reports)
    # queue 0's own release still lacks the write-back: that record stays (the host may read mid through the BAR)
    assert all(r.missing in WRITE_BACK["gfx9"] and "host" in r.reader for r in reports), text(reports)


# -- the clocks ---------------------------------------------------------------------------------------------------

def test_an_observed_value_acquires_the_clock_of_the_write_that_left_it():
    order = Order()
    a, b = order.agent("a"), order.agent("b")
    order.store(0x1000, (5).to_bytes(4, "little"), {a: 3})
    waiter = {b: 1}
    order.observe(waiter, 0x1000, (5).to_bytes(4, "little"))
    assert waiter == {a: 3, b: 1}


def test_a_value_no_recorded_write_explains_orders_the_observer_after_everything():
    """The weaker reading: bytes someone the model does not see left (a CPU store not reported, a shader store)."""
    order = Order()
    a, b = order.agent("a"), order.agent("b")
    order.latest.update({a: 9, b: 4})
    order.store(0x1000, (5).to_bytes(4, "little"), {a: 3})
    waiter = {b: 1}
    order.observe(waiter, 0x1000, (6).to_bytes(4, "little"))
    assert waiter == {HOST: 1, a: 9, b: 4}


def test_a_later_write_to_a_signal_keeps_the_earlier_writers_clock():
    """A release sequence: an atomic increment by queue b after queue a's release still carries a's clock."""
    order = Order()
    a, b = order.agent("a"), order.agent("b")
    order.store(0x1000, (1).to_bytes(4, "little"), {a: 3})
    order.store(0x1000, (2).to_bytes(4, "little"), {b: 7})
    waiter = {}
    order.observe(waiter, 0x1000, (2).to_bytes(4, "little"))
    assert waiter == {a: 3, b: 7}


def test_an_epoch_is_covered_only_by_a_clock_that_reached_it():
    order = Order()
    a = order.agent("a")
    arr = order.array({a: 4})
    got = Order.covered(arr, np.array([a, a, -1, MULTI], np.int32), np.array([4, 5, 99, 99], np.int64))
    assert got.tolist() == [True, False, True, True]


# -- ordered after the access, but not before the reader ------------------------------------------------------------

@pytest.mark.parametrize("invalidates", [1, 2])
def test_an_invalidate_after_the_signal_does_not_protect_the_reader_the_signal_woke(invalidates):
    """The copy queue fills src, signals kernel 2 and only then invalidates (GCR_REQ; once, or twice: the second is
    no more ordered before the read than the first): in this run the invalidate ran before kernel 2's read (kernel
    2's queue was still waiting when the copy queue went on), but nothing orders it before that read: the copy the
    invalidate dropped could still have been hit."""
    def copy(r, read, filled, src):
        q = CopyQueue(r.dev).wait(read, 1).fill(src, 7, NBYTES).signal(filled, 1)
        for _ in range(invalidates):
            q = q.memory_barrier()
        return q
    (got, src), reports = run("gfx1100", lambda r: refill(r, lambda read, filled, src: copy(r, read, filled, src)))
    assert (got == 21).all()
    found = stale(reports, "gfx1100", src)
    assert found and "nothing orders it before this read" in found[0].detail, text(reports)


def test_a_write_back_the_reader_is_not_ordered_after_does_not_make_the_store_visible_to_it():
    """gfx942: queue 1 waits for the kernel's signal and writes every L2 back, but the SDMA queue waits for the
    kernel's signal only: in this run the write-back ran first, yet the read around the L2 could have come first."""
    def stream(r):
        src, mid, out = r.vram(ramp()), r.vram(), r.gtt()
        written, flushed, copied, go = r.signal(), r.signal(), r.signal(), r.signal()
        r.submit(r.kernel(src, mid, 3) + r.release(written, 1, write_back=False) + [r.gate(go)])
        r.submit([r.gate(written)] + r.release(flushed, 1, cache_bits=WRITE_BACK_BITS), index=1)
        r.submit(CopyQueue(r.dev).wait(written, 1).copy(out, mid, NBYTES).signal(copied, 1).packets, engine="copy")
        copied.wait(1)
        go.value = 1
        return mid
    mid, reports = run("gfx942", stream)
    found = read_around_l2(reports, mid)
    assert found and "nothing orders it before this read" in found[0].detail, text(reports)


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_a_release_is_not_covered_by_a_write_back_it_is_not_ordered_after(target):
    """Queue 0's kernel writes mid; after a partial flush queue 0 tells queue 1 (WRITE_DATA), which writes GL2 back;
    the host opens queue 0's gate and queue 0 signals completion with a release that writes nothing back. In this
    run queue 1's write-back came first, but nothing orders it before queue 0's release: the host could read mid
    through the BAR first."""
    def stream(r):
        src, mid = r.vram(ramp()), r.vram()
        told, flushed, go, done = r.signal(), r.signal(), r.signal(), r.signal()
        r.submit(r.kernel(src, mid, 3) + [pm4.write_data(told.value_addr, [1]), r.gate(go)]
                 + r.release(done, 1, write_back=False))
        r.submit([r.gate(told)] + r.release(flushed, 1, cache_bits=RELEASE_WRITE_BACK_ONLY[r.family]), index=1)
        go.value = 1  # without waiting for `flushed` (which would order queue 0 after the write-back)
        done.wait(1)
        return mid
    mid, reports = run(target, stream)
    found = [r for r in reports if r.kind == "not written back" and mid.va <= r.address < mid.va + NBYTES
             and "host" in r.reader and "nothing orders it before this release" in r.detail]
    assert found and found[0].missing in WRITE_BACK[FAMILY[target]], text(reports)
