"""What an interleaving is -- explicit scheduling choices and a priority seed -- and the strategy that draws one."""
from __future__ import annotations

from hypothesis import strategies as st

from .draws import _CHOICE, HISTORY_FREE_BASE, U32, _window

MAX_CHOICES = 48


class Interleaving(list):
    """What `interleavings()` draws: the explicit choices, a list of `(ready index, budget)` made at the decisions
    with two or more options, and `priority`: 0, or the seed of a random priority order over the activities (a
    PCT-style schedule) that decides once the explicit choices ran out. Without it the first ready activity runs
    until it blocks, the in-order default (what shrinking aims for)."""

    def __init__(self, choices=(), priority: int = 0):
        super().__init__(tuple(c) for c in choices)
        self.priority = priority

    def __eq__(self, other):
        return list.__eq__(self, other) and self.priority == getattr(other, "priority", 0)

    __hash__ = None

    def __bool__(self) -> bool:  # empty only when it is the in-order default: no choices and no priority order
        return bool(self.priority) or len(self) > 0

    def __repr__(self) -> str:
        return f"Interleaving({list(self)!r}, priority={self.priority})" if self.priority else list.__repr__(self)


def interleavings(max_choices: int = MAX_CHOICES):
    """An `Interleaving`: a quarter explicit scheduling decisions (ready-activity index 0..7, budget 1..24) then the
    in-order default, half a priority order only (a seed ranking the activities and the host; the inside of the
    dispatches and which GPU steps first drawn from it too), a quarter both. Shrinks toward run-to-block (no
    choices, no seed)."""
    # the mode and seed first: hypothesis fills the tail of a novel example with its simplest values more often
    return st.tuples(_window(0, 3), _window(1, U32), st.lists(_window(*_CHOICE), max_size=max_choices)).map(
        _as_interleaving)


def _as_interleaving(drawn) -> Interleaving:
    mode, seed, xs = drawn
    mode -= HISTORY_FREE_BASE  # 0: explicit choices, then in order; 1, 2: a priority order only; 3: both
    choices = [((x - HISTORY_FREE_BASE) // 24, (x - HISTORY_FREE_BASE) % 24 + 1) for x in xs] if mode in (0, 3) else []
    return Interleaving(choices, seed - HISTORY_FREE_BASE if mode else 0)
