"""Report mode: how the cache model tells what it found. The writers (actors) a report names, the names of levels,
slots and the missing cache operations per family, and the checks that turn a stale, unwritten or dirty line into
a `MemoryReport`. `Findings` is a part of `CacheModel` (coherence.model): `CacheModel.__init__` sets its state."""
from __future__ import annotations

import numpy as np

from .lines import INVALIDATE, LEVEL_NAMES, LINE, LINE_SHIFT, N_CU, WRITE_BACK, Lines, MapState, base
from .order import Order
from .report import MemoryReport


class Findings:
    """Reports and what they say (a part of `CacheModel`)."""

    # -- reports ------------------------------------------------------------------------------------

    def report(self, kind: str, address: int, size: int, writer: str, reader: str, missing: str, *,
               level: str = "", detail: str = "", key: tuple = ()) -> MemoryReport:
        """Record one hazard (repeats of the same writer/reader/missing pair, or of `key`, widen the earlier
        record)."""
        return self.log.add(MemoryReport(kind, address, size, writer, reader, missing, gpu=self.gpu.label,
                                         level=level, detail=detail, key=key))

    @property
    def reporting(self) -> bool:
        return not self.adversarial

    def actor(self, key, describe, queue=None) -> int:
        """Intern a writer: `describe` (str or zero-argument callable) is only formatted when a report names it."""
        i = self._actor_ids.get(key)
        if i is None:
            i = self._actor_ids[key] = len(self.actors)
            self.actors.append(describe)
            if queue is not None:
                self.queue_actors.setdefault(queue, set()).add(i)
        return i

    def engine_actor(self, q) -> int:
        """The writer id of queue `q`'s current packet (from the trace's last entry), or of the queue itself."""
        trace = self.gpu.trace
        entry = trace[-1] if trace else None
        if entry is not None and entry[1] == q.name and entry[2] == "packet":
            (is_ring, base, size), pos, fmt = entry[3][:3]  # (place, pos, fmt, dws, canon): gpu.trace_packet
            where = pos % size if is_ring else pos
            canon = self.gpu.canonical
            return self.actor((q.name, base, where, fmt.name), lambda: f"queue {q.name}: {fmt.name} at "
                              f"{'ring' if is_ring else f'IB at 0x{canon(base):x}'}+0x{where:x}", q)
        return self.actor((q.name,), f"queue {q.name} (end-of-pipe or completion write)", q)

    def describe(self, actor_id: int) -> str:
        if actor_id < 0:
            return "the host (a CPU store), or an engine whose write went around this level"
        d = self.actors[actor_id]
        if callable(d):
            d = self.actors[actor_id] = d()
        return d

    def level_name(self, level: str) -> str:
        b, _, n = level.partition(".")
        name = LEVEL_NAMES[self.family].get(b, b)
        if b == "GL2":
            return name + (f" of XCC {n or 0}" if self.n_xcc > 1 else "")
        if not n:
            return name
        return name + (f" of CU {int(n) % N_CU} of XCC {int(n) // N_CU}" if self.n_xcc > 1 else f" of CU {n}")

    def where(self, slot: int) -> str:
        """A slot as a report names it: "CU 1" (one XCC) or "XCC 3 CU 0"."""
        return f"XCC {slot // N_CU} CU {slot % N_CU}" if self.n_xcc > 1 else f"CU {slot}"

    def missing_invalidate(self, level: str) -> str:
        return INVALIDATE[self.family][base(level)]

    @property
    def missing_write_back(self) -> str:
        return WRITE_BACK[self.family]

    # -- what the reports say ---------------------------------------------------------------------------

    def _stale(self, st, levels, lines, first, B, bad, reader) -> None:
        """Some bytes a level returned differ from memory: one record per level that supplied them."""
        line_of = B >> LINE_SHIFT
        supplier = first[np.searchsorted(lines, line_of)]
        who = reader() if callable(reader) else reader
        for i in np.unique(supplier[bad]).tolist():
            if i >= len(levels):
                continue
            sel = bad & (supplier == i)
            offs = B[sel]
            line = int(offs[0] >> LINE_SHIFT)
            self.report("stale line", st.start + int(offs.min()), int(offs.max() - offs.min()) + 1,
                        self._newer_writer(st, levels[i], line), who, self.missing_invalidate(levels[i]),
                        level=self.level_name(levels[i]),
                        detail=f"the {self.level_name(levels[i])} copy was filled before this memory was written "
                               f"and no invalidate of that level came between")

    def _compare(self, st, level, lo, data, reader) -> None:
        coherent = st.dram[lo:lo + len(data)]
        bad = data != coherent
        if bad.any():
            offs = np.nonzero(bad)[0] + lo
            line = int(offs[0] >> LINE_SHIFT)
            self.report("stale line", st.start + int(offs.min()), int(offs.max() - offs.min()) + 1,
                        self._newer_writer(st, level, line), reader() if callable(reader) else reader,
                        self.missing_invalidate(level), level=self.level_name(level),
                        detail="the GL2 copy was filled before memory was written behind it (the host, or an "
                               "engine that goes around GL2) and no GL2 invalidate came between")

    def _other_cu(self, st, level, lv, lines, first, reader_key: int, reader, index: int = 0) -> None:
        """Report mode: the copy this load hit (at `levels[index]`) was filled by one dispatch and written by another
        since; had the writer run on another CU (or, for an L2, another XCC: the hardware's choice), this copy would
        still hold the old bytes."""
        hit = lines[first == index]
        marked = hit[lv.elsewhere[hit] >= 0]
        if marked.size == 0:
            return
        writers = lv.elsewhere[marked]
        for w in np.unique(writers).tolist():
            if self.actor_dispatch.get(w) == reader_key:
                continue
            ls = marked[writers == w]
            lo, hi = int(ls.min()) * LINE, min((int(ls.max()) + 1) * LINE, st.size)
            l2 = base(level) == "GL2"
            self.report("stale line", st.start + lo, hi - lo, self.describe(w), reader() if callable(reader) else reader,
                        self.missing_invalidate(level), level=LEVEL_NAMES[self.family].get(base(level), base(level))
                        + (" of another XCC" if l2 else " of another CU"),
                        detail=("a dispatch on another XCC wrote these lines after this L2's copy was filled; no L2 "
                                "invalidate (buffer_inv sc1, ACQUIRE_MEM TC) came between" if l2 else
                                "a dispatch on another CU wrote these lines after this CU's copy was filled; no "
                                "invalidate of the vector cache came between") + ", so this load could have read "
                               "the old copy (where a workgroup runs is the hardware's choice)")

    def _dirty_elsewhere(self, st, name: str, B: np.ndarray, reader_key: int, reader) -> None:
        """Report mode, an L2 per XCC: bytes this load read sit dirty in this L2, stored by another dispatch. Had that
        dispatch run on another XCC, this read would have missed them: nothing wrote them back (an agent-scope
        release: buffer_wbl2 sc1, RELEASE_MEM / ACQUIRE_MEM TC_WB)."""
        gl2 = st.levels[name]
        dirty = gl2.dirty[B]
        if not dirty.any():
            return
        offs = B[dirty]
        line_of = offs >> LINE_SHIFT
        writers = gl2.writer[line_of]
        for w in np.unique(writers).tolist():
            if w < 0 or self.actor_dispatch.get(w, reader_key) == reader_key:
                continue
            mine = offs[writers == w]
            lo, hi = int(mine.min()), int(mine.max()) + 1
            self.report("not written back", st.start + lo, hi - lo, self.describe(w),
                        reader() if callable(reader) else reader, self.missing_write_back,
                        level=LEVEL_NAMES[self.family]["GL2"] + " of another XCC",
                        detail="another dispatch stored these bytes and nothing wrote them back to memory before this "
                               "read: had the two run on different XCCs (each has its own L2), this read would have "
                               "missed them")

    def _newer_writer(self, st, level: str, line: int) -> str:
        """Who wrote the memory a stale copy misses: the last GPU writer of the line if it wrote after the copy was
        taken, else someone the model does not see (the host)."""
        lv = st.levels[level]
        if st.last_writer[line] >= 0 and st.write_seq[line] > lv.seq[line]:
            return self.describe(int(st.last_writer[line]))
        return self.describe(-1)

    def _dirty_read(self, st, gl2, lo, hi, reader) -> None:
        if not self.reporting:
            return
        dirty = np.nonzero(gl2.dirty[lo:hi])[0] + lo
        line = int(dirty[0] >> LINE_SHIFT)
        self.report("not written back", st.start + int(dirty.min()), int(dirty.max() - dirty.min()) + 1,
                    self.describe(int(gl2.writer[line])), reader() if callable(reader) else reader,
                    self.missing_write_back, level=self.level_name(self._name_of(st, gl2)),
                    detail="the reader goes around GL2 and reads memory while GL2 holds newer, dirty bytes")

    @staticmethod
    def _name_of(st: MapState, lv: Lines) -> str:
        return next(n for n, x in st.levels.items() if x is lv)

    def _other_l2(self, st: MapState, mine: str, B: np.ndarray, reader) -> None:
        """Report mode, an L2 per XCC: bytes this load read are dirty in another XCC's L2 -- written there by a
        workgroup on that XCC and not written back, so this XCC read memory's (or its own copy's) old bytes."""
        for name in self.l2_names:
            lv = st.levels.get(name)
            if name == mine or lv is None:
                continue
            dirty = lv.dirty[B]
            if not dirty.any():
                continue
            offs = B[dirty]
            lo, hi = int(offs.min()), int(offs.max()) + 1
            self.report("not written back", st.start + lo, hi - lo, self.describe(int(lv.writer[lo >> LINE_SHIFT])),
                        reader() if callable(reader) else reader, self.missing_write_back,
                        level=self.level_name(name) + ", read on " + self.level_name(mine),
                        detail="another XCC's L2 holds these bytes dirty: no agent-scope release (buffer_wbl2 sc1, "
                               "RELEASE_MEM / ACQUIRE_MEM TC_WB) wrote them back before this read on another XCC "
                               "(and no acquire invalidated its L2: buffer_inv sc1 / TC)")

    def released(self, queue, what: str) -> None:
        """`queue` signalled (an end-of-pipe write or interrupt): bytes its own earlier work left dirty in GL2 are
        not visible to the host or a peer reading VRAM through the BAR (facts 6.2, 6.4): each is a record."""
        if not self.reporting:
            return
        mine = self.queue_actors.get(queue)
        if not mine:
            return
        arr = self.order.array(self.hb_now()[0]) if self.hb else None
        for st, name, gl2 in [(st, n, st.levels[n]) for st in self.states.values() for n in self.l2_names
                              if n in st.levels]:
            ghosts = np.nonzero(gl2.b_agent >= 0)[0] if arr is not None else ()
            if len(ghosts):  # cleaned by a write-back this release is not ordered after: they may still be dirty
                ghosts = ghosts[Order.covered(arr, gl2.s_agent[ghosts], gl2.s_clock[ghosts])
                                & ~Order.covered(arr, gl2.b_agent[ghosts], gl2.b_clock[ghosts])]
                for w in np.unique(gl2.b_writer[ghosts]).tolist():
                    if w not in mine:
                        continue
                    ls = ghosts[gl2.b_writer[ghosts] == w]
                    lo, hi = int(ls.min()) * LINE, min((int(ls.max()) + 1) * LINE, st.size)
                    self.report("not written back", st.start + lo, hi - lo, self.describe(w),
                                f"the host or a peer reading VRAM after {what}", self.missing_write_back,
                                key=("released dirty", self.gpu.label, w), level=self.level_name(name),
                                detail=f"{what} signalled completion; a write-back of this queue's earlier writes "
                                       f"ran in this run, but nothing orders it before this release")
            if not gl2.dirty.any():
                continue
            dirty_lines = np.nonzero(gl2.dirty.reshape(-1, LINE).any(axis=1))[0]
            if arr is not None:  # only stores ordered before this release are its to write back
                dirty_lines = dirty_lines[Order.covered(arr, gl2.w_agent[dirty_lines], gl2.w_clock[dirty_lines])]
            for w in np.unique(gl2.writer[dirty_lines]).tolist():
                if w not in mine:
                    continue
                ls = dirty_lines[gl2.writer[dirty_lines] == w]
                span = gl2.dirty[int(ls.min()) * LINE:min((int(ls.max()) + 1) * LINE, st.size)]
                idx = np.nonzero(span)[0] + int(ls.min()) * LINE
                lo, hi = int(idx.min()), int(idx.max()) + 1
                self.report("not written back", st.start + lo, hi - lo, self.describe(w),
                            f"the host or a peer reading VRAM after {what}", self.missing_write_back,
                            key=("released dirty", self.gpu.label, w),  # later releases: the same record
                            level=self.level_name(name),
                            detail=f"{what} signalled completion while this queue's earlier writes were still dirty "
                                   f"in GL2; a reader through the BAR sees the old bytes")
