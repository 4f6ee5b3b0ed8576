"""SDMA copies and fills move their bytes in chunks (queue.COPY_CHUNK, 4 KiB) that other queues interleave with,
and the fuzzer reaches those orders: a race only visible when another queue runs between two chunks of one copy
is found by the default profile's search over `interleavings()`, and is not found once copies are made atomic
(one chunk) -- so it is the chunk interleaving the search explores, not a whole-packet order. The DAG strategy
draws buffers that span several chunks (tests/test_schedule_fuzz.py checks how often).

The program: copy queue 0 snapshots x into y (three chunks) while copy queue 1 writes a new generation of x. Its
author accepts either generation (the snapshot is taken "some time around" the update) but forgot that a copy is
not atomic: without a wait between the queues the snapshot can be torn, old in its first chunks and new in the
rest. Whole-packet orders give all-old or all-new, which the check accepts.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from hcqsim.engines import queue as engine_queue
from hcqsim.runtime import open_device
from hcqsim.strategies import Interleaver, fuzz_settings, interleavings

CHUNKS = 3
OLD, NEW = 0x01010101, 0x02020202
# only explicit choices (half the interleavings) stop a queue part-way through a packet, and one must land inside
# the copy's three chunks: more examples than the default profile's 100
EXAMPLES = 300
chooser = Interleaver()
chooser.host_turns = True


@pytest.fixture
def dev():
    d = open_device("sim", policy=chooser)
    yield d
    d.close()


def snapshot_during_update(dev, x, y, fixed: bool, size: int) -> None:
    x.view[:size] = np.frombuffer(np.full(size // 4, OLD, np.uint32).tobytes(), np.uint8)
    y.view[:size] = 0
    go, snap, updated = dev.new_signal(0), dev.new_signal(0), dev.new_signal(0)
    try:
        dev.copy_queue(0).wait(go, 1).copy(y, x, size).signal(snap, 1).submit()
        q = dev.copy_queue(1).wait(go, 1)
        (q.wait(snap, 1) if fixed else q).fill(x, NEW, size).signal(updated, 1).submit()
        go.value = 1
        snap.wait(1)
        updated.wait(1)
        got = set(y.view[:size].view(np.uint32).tolist())
        assert got in ({OLD}, {NEW}), f"torn snapshot: y holds {sorted(hex(v) for v in got)}"
    finally:
        dev.synchronize()
        for s in (go, snap, updated):
            dev.free_signal(s)


def search(dev, fixed: bool, size: int | None = None) -> None:
    size = CHUNKS * engine_queue.COPY_CHUNK if size is None else size
    x, y = dev.alloc(size), dev.alloc(size)

    @fuzz_settings(max_examples=EXAMPLES)
    @given(interleavings())
    def prop(choices):
        with chooser.using(choices):
            snapshot_during_update(dev, x, y, fixed, size)
    prop()


def test_a_snapshot_torn_between_chunks_is_found(dev):
    with pytest.raises(AssertionError, match="torn snapshot"):
        search(dev, fixed=False)


def test_the_fixed_snapshot_is_clean_under_the_same_search(dev):
    search(dev, fixed=True)


def test_with_atomic_copies_the_same_search_finds_nothing(dev, monkeypatch):
    """The planted contrast: one chunk per packet (a copy is one step), and the buggy program passes -- the race
    lives only between chunks."""
    monkeypatch.setattr(engine_queue, "COPY_CHUNK", 1 << 30)
    search(dev, fixed=False, size=CHUNKS * 4096)
