"""Byte ranges of buffers and the hazards between operations that touch them (RAW, WAR, WAW).

A `Region` is `size` bytes at `offset` inside one allocation (a Buffer, or the allocation a view is part of),
so two views of one buffer that overlap are seen as touching the same bytes. `HazardTracker` remembers, per
allocation and per byte range, the last writer and the latest reader on each queue, and answers for a new
operation which earlier operations it must come after, and why (`Hazard`).
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Any, Hashable, Iterable


@dataclass(frozen=True, eq=False)
class Region:
    """`size` bytes at `offset` inside the allocation `buffer` (always an allocation, never a view)."""

    buffer: Any
    offset: int
    size: int

    @property
    def va(self) -> int:
        return self.buffer.va + self.offset

    @property
    def end(self) -> int:
        return self.offset + self.size

    @property
    def device(self):
        return self.buffer.device

    def __repr__(self) -> str:
        return f"Region(0x{self.buffer.va:x}+[{self.offset}, {self.end}))"


def allocation_of(buf) -> tuple[Any, int]:
    """(allocation, offset of `buf` in it) for a Buffer or a Buffer view (`Buffer.offset`)."""
    root = getattr(buf, "allocation", None) or buf
    return root, buf.va - root.va


def as_region(x, offset: int = 0, size: int | None = None) -> Region:
    """A Region from a Region, a Buffer or a view; `offset`/`size` narrow it further (bytes)."""
    if isinstance(x, Region):
        root, base, total = x.buffer, x.offset, x.size
    elif isinstance(x, tuple) and len(x) == 3:  # (buffer, offset, size)
        return as_region(x[0], x[1], x[2])
    else:
        root, base = allocation_of(x)
        total = x.size
    size = total - offset if size is None else size
    if not (isinstance(offset, int) and isinstance(size, int)) or offset < 0 or size < 0 or offset + size > total:
        raise ValueError(f"range [{offset}, {offset}+{size}) lies outside {x!r} ({total} bytes)")
    return Region(root, base + offset, size)


@dataclass(frozen=True)
class Hazard:
    """Operation `consumer` must come after `producer`: both touch `buffer` bytes [lo, hi), and `kind` is
    RAW (read after write), WAR (write after read) or WAW (write after write)."""

    kind: str
    producer: int  # operation indices in program order
    consumer: int
    buffer: Any
    lo: int
    hi: int


class _Segment:
    __slots__ = ("writer", "readers")

    def __init__(self, writer: int | None = None, readers: dict | None = None):
        self.writer = writer  # last writing operation
        self.readers = readers or {}  # queue -> latest operation on it that read since the last write

    def copy(self) -> "_Segment":
        return _Segment(self.writer, dict(self.readers))


class _RangeMap:
    """Disjoint, sorted byte intervals of one allocation with their access state. Only touched bytes are
    kept; an interval is [bounds[i], bounds[i+1]) with state segs[i] (None: never touched)."""

    def __init__(self):
        self.bounds: list[int] = []
        self.segs: list[_Segment | None] = []

    def _split(self, at: int) -> int:
        """Make `at` an interval boundary; returns its index in bounds."""
        i = bisect_left(self.bounds, at)
        if i < len(self.bounds) and self.bounds[i] == at:
            return i
        # the interval [bounds[i-1], bounds[i]) that contains `at` is cut in two with the same state
        state = self.segs[i - 1] if 0 < i <= len(self.segs) else None
        self.bounds.insert(i, at)
        self.segs.insert(i, state.copy() if state is not None else None)
        return i

    def span(self, lo: int, hi: int) -> range:
        """Indices of the intervals covering [lo, hi), after splitting at lo and hi."""
        a = self._split(lo)
        b = self._split(hi)
        return range(a, b)

    def overlapping(self, lo: int, hi: int):
        """(start, end, state) of touched intervals overlapping [lo, hi), without splitting."""
        i = max(bisect_right(self.bounds, lo) - 1, 0)
        while i < len(self.segs) and self.bounds[i] < hi:
            s = self.segs[i]
            if s is not None and self.bounds[i + 1] > lo:
                yield max(self.bounds[i], lo), min(self.bounds[i + 1], hi), s
            i += 1


class HazardTracker:
    """Per-byte-range access history of the operations recorded so far, in program order."""

    def __init__(self):
        self._maps: dict[int, _RangeMap] = {}  # id(allocation) -> its ranges

    def _map(self, region: Region) -> _RangeMap:
        m = self._maps.get(id(region.buffer))
        if m is None:
            m = self._maps[id(region.buffer)] = _RangeMap()
        return m

    def hazards(self, op: int, reads: Iterable[Region], writes: Iterable[Region], *, war: bool = True,
                waw: bool = True) -> list[Hazard]:
        """What operation `op` must wait for: RAW for bytes it reads that an earlier op wrote; WAW and WAR for
        bytes it writes that an earlier op wrote or (the latest reader on each queue) read. `war=False` /
        `waw=False` only for the fuzzer's mutation tests (plan.MUTATIONS): a compiler that forgets one kind."""
        out: list[Hazard] = []
        for r in reads:
            m = self._maps.get(id(r.buffer))
            if m is not None and r.size:
                for lo, hi, s in m.overlapping(r.offset, r.end):
                    if s.writer is not None:
                        out.append(Hazard("RAW", s.writer, op, r.buffer, lo, hi))
        for w in writes:
            m = self._maps.get(id(w.buffer))
            if m is not None and w.size:
                for lo, hi, s in m.overlapping(w.offset, w.end):
                    if s.writer is not None and waw:
                        out.append(Hazard("WAW", s.writer, op, w.buffer, lo, hi))
                    for reader in s.readers.values() if war else ():
                        if reader != op:
                            out.append(Hazard("WAR", reader, op, w.buffer, lo, hi))
        return out

    def record(self, op: int, queue: Hashable, reads: Iterable[Region], writes: Iterable[Region]) -> None:
        """Remember that `op` (on `queue`) read and wrote these ranges. Only the latest reader per queue is
        kept: a queue runs in order, so waiting for its latest reader covers the earlier ones."""
        for r in reads:
            if r.size:
                m = self._map(r)
                for i in m.span(r.offset, r.end):
                    s = m.segs[i]
                    if s is None:
                        s = m.segs[i] = _Segment()
                    s.readers[queue] = op
        for w in writes:
            if w.size:
                m = self._map(w)
                for i in m.span(w.offset, w.end):
                    m.segs[i] = _Segment(op)  # a write ends every earlier read's claim on these bytes
