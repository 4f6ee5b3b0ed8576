"""The draws every strategy of the fuzzer makes: integers from a window no source literal lies in, so a derandomized
search draws the same examples whatever the process imported before it."""
from __future__ import annotations

import functools
import random

from hypothesis import strategies as st

U32 = 0xFFFFFFFF

# Integers independent of the process's history. Hypothesis (6.131 on) replaces about one integer or bytes draw in
# twenty by a literal taken from the source of the *local* modules imported so far (not site-packages, not tests).
# Which modules those are depends on what else ran in the process, so the same derandomized search drew other cases
# and interleavings after the rest of the test suite than alone: mutants and races found alone were missed after it
# (issue 16). Every draw here is made in a window of integers no source literal lies in (HISTORY_FREE_BASE and
# up, tests/test_fuzz_history.py checks the loaded modules) and shifted back, so there is no literal hypothesis could
# substitute: generation and shrinking (toward the window's start, so toward `lo`) are otherwise hypothesis' own.
HISTORY_FREE_BASE = 0x5EED << 32  # 47 bits: above every literal of hcqsim, a few bytes per draw
_HISTORY_FREE_SPAN = 1 << 40  # the widest range drawn


@functools.lru_cache(maxsize=None)
def _window(lo: int, hi: int):
    if not 0 <= hi - lo < _HISTORY_FREE_SPAN:
        raise ValueError(f"history-free integers span at most 2**40 values, not {lo}..{hi}")
    return st.integers(HISTORY_FREE_BASE + lo, HISTORY_FREE_BASE + hi)


def _int(draw, lo: int, hi: int) -> int:
    """An integer in lo..hi, from the window (the composite strategies' draws)."""
    return draw(_window(lo, hi)) - HISTORY_FREE_BASE


def _unshift(v: int) -> int:
    return v - HISTORY_FREE_BASE


def integers(lo: int, hi: int):
    """`st.integers(lo, hi)` whose examples do not depend on which modules the process imported before (see
    HISTORY_FREE_BASE): use it for choices a derandomized search must make the same way in every test run."""
    return _window(lo, hi).map(_unshift)


def _bytes(draw, size: int) -> bytes:
    """`size` bytes from one history-free draw (st.binary may be replaced by a bytes literal of the same length);
    they shrink toward the bytes of seed 0."""
    return random.Random(_int(draw, 0, U32)).randbytes(size)


# a choice among n things is an index taken modulo n, shrinking to the first
_COIN = st.booleans()
_KEEP = (0, 63)  # 0: the operation is left out (what the shrinker aims for)
_CHOICE = (0, 8 * 24 - 1)  # (ready-queue index 0..7, budget 1..24) as one number


def _pick(draw, items):
    return items[_int(draw, 0, 255) % len(items)]
