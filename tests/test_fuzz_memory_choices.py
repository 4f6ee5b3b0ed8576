"""The Interleaver makes the memory model's choices too (issue 17 gap 5): which CU (and XCC) each workgroup runs on,
which cache lines leave early, which host-written HDP pages drain by themselves, all from the interleaving's
priority seed.

The stream (written here, after tests/test_memory_model.py's CU test): kernel 0 copies x (its CU's vector cache
keeps x's line), kernel 1 writes NEW into x, kernel 2 copies x to y, no vector invalidate before kernels 1 and 2
(the fixed stream has one); each kernel is one workgroup. Under the adversarial model's all-kept worst case (the
default placement puts a dispatch's first workgroup on CU 0, nothing evicted) kernel 1's stores update the one CU's copy, so kernel 2 reads NEW and the missing invalidate does not
show; only a schedule that runs kernel 1 on another CU than kernels 0 and 2 leaves kernel 2 the stale OLD line. A
hypothesis search over `interleavings()` with the Interleaver finds it.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from hcqsim.runtime import open_device
from hcqsim.strategies import Interleaver, Interleaving, fuzz_settings, interleavings
from tests.test_memory_model import NEW, OLD, VECTOR_INV, _code, _exec

# gfx1100: one L2, two CUs, so kernel 1 on the other CU is the only way to the stale line. (On gfx942 each of the
# 8 XCCs has its own L2 and the fixed stream's TCL1 invalidate is no fix across XCCs: tests/test_memory_model.py
# covers those placements.)
TARGETS = ("gfx1100",)


def stale_copy(target: str, policy, fixed: bool, choices=None) -> int:
    """The first word kernel 2 copied into y."""
    dev = open_device("sim", target=target, memory_model="adversarial", policy=policy)
    acquire = VECTOR_INV[target][next(iter(VECTOR_INV[target]))] if fixed else []
    try:
        x, junk, y = (dev.alloc(4096) for _ in range(3))
        x.view[:] = np.frombuffer(np.full(1024, OLD, np.uint32).tobytes(), np.uint8)
        copy, fill = (dev.load_program(_code(n, target), n) for n in ("copy", "fill_release"))
        with policy.using(choices) if choices is not None else _nothing():
            q = dev.compute_queue()
            _exec(q, copy, [x, junk])
            _exec(q, fill, [x], acquire=acquire)  # writes NEW into x
            _exec(q, copy, [x, y], acquire=acquire)
            done = dev.new_signal(0)
            q.signal(done, 1).submit()
            done.wait(1)
        return int(y.view[:4].view(np.uint32)[0])
    finally:
        dev.close()


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def search(target: str, fixed: bool) -> None:
    chooser = Interleaver()

    @fuzz_settings(max_examples=40)
    @given(interleavings())
    def prop(choices):
        got = stale_copy(target, chooser, fixed, choices)
        assert got == NEW, f"wrong value: kernel 2 copied 0x{got:08x}, want 0x{NEW:08x}"
    prop()


@pytest.mark.parametrize("target", TARGETS)
def test_the_all_kept_worst_case_alone_misses_the_missing_invalidate(target):
    assert stale_copy(target, "run_to_block", fixed=False) == NEW
    assert stale_copy(target, Interleaver(), fixed=False, choices=Interleaving([(1, 3)] * 8)) == NEW  # no seed


@pytest.mark.parametrize("target", TARGETS)
def test_the_interleaver_finds_it_by_choosing_cus(target):
    with pytest.raises(AssertionError, match="wrong value"):
        search(target, fixed=False)


@pytest.mark.parametrize("target", TARGETS)
def test_the_fixed_stream_is_right_under_the_same_search(target):
    search(target, fixed=True)


def test_memory_choices_come_from_the_seed_only():
    """Without a priority seed the Interleaver makes none of them (the shrink target is the all-kept case); with
    one, the same seed makes the same choices in every block."""
    chooser = Interleaver()
    with chooser.using(Interleaving([(0, 1)])):
        assert not any(hasattr(chooser, h) for h in ("choose_cu", "choose_xcc", "evict_lines", "hdp_drains"))
    draws = []
    for _ in range(2):
        with chooser.using(Interleaving([], priority=12345)):
            draws.append([chooser.choose_cu(2) for _ in range(16)])
    assert draws[0] == draws[1] and len(set(draws[0])) == 2
    seeds = range(1, 200)
    rates = {"evict_lines": 0, "hdp_drains": 0}
    for s in seeds:
        with chooser.using(Interleaving([], priority=s)):
            for h in rates:
                rates[h] += hasattr(chooser, h)
    assert all(40 < n < 160 for n in rates.values()), rates  # about half the seeds evict, about half drain
