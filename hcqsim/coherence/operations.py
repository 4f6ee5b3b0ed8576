"""The cache operations a packet or an instruction asks for: invalidate a level, write back and invalidate an L2,
discard it, and (adversarial) early evictions. `CacheOperations` is a part of `CacheModel` (coherence.model):
`CacheModel.__init__` sets the state it uses."""
from __future__ import annotations

import numpy as np

from .lines import LINE, LINE_SHIFT, N_CU, PER_CU, _runs, base, l2_name
from .order import Order


class CacheOperations:
    """Invalidate, write back, discard, evict (a part of `CacheModel`)."""

    # -- cache operations ---------------------------------------------------------------------------------

    def _l2_levels(self, xcc: int | None):
        """(mapping state, L2 copy) of every mapping, for every XCC's L2 or XCC `xcc`'s only."""
        names = self.l2_names if xcc is None else (l2_name(xcc),)
        return [(st, st.levels[n]) for st in self.states.values() for n in names if n in st.levels]

    def invalidate(self, level: str, slot: int | None = None) -> None:
        """Drop every line of a read-only level (GLV, GL1, GLK, GLI): every CU's copy, or CU slot `slot`'s."""
        self.stats["invalidates"] += 1
        only = f"{level}.{slot}" if slot is not None and level in PER_CU else None
        arr = self.order.array(self.hb_now()[0]) if self.hb and slot is None else None
        for st in self.states.values():
            for name, lv in st.levels.items():
                if name == only or (only is None and base(name) == level):
                    if arr is None:
                        lv.valid[:] = False
                        lv.g_agent[:] = -1
                        continue
                    # a packet's invalidate (report mode): a copy filled at a point not ordered before it may
                    # have been filled after it in another schedule, so it survives
                    held = np.nonzero(lv.valid | (lv.g_agent >= 0))[0]
                    if held.size:
                        self._drop(st, lv, held, arr)

    def write_back(self, xcc: int | None = None) -> None:
        """GL2_WB / TC_WB: every dirty byte goes to DRAM; the lines stay, clean (every XCC's L2, or `xcc`'s)."""
        self.stats["write_backs"] += 1
        arr = self.order.array(self.hb_now()[0]) if self.hb and xcc is None else None
        for st, gl2 in self._l2_levels(xcc):
            if not gl2.dirty.any() and (arr is None or not (gl2.b_agent >= 0).any()):
                continue
            if arr is not None:  # a packet's write-back (report mode): only stores ordered before it are cleaned
                ghosts = np.nonzero(gl2.b_agent >= 0)[0]  # cleaned before; this one is ordered after those stores too:
                if ghosts.size:  # a reader ordered after either has them; unless the earlier is before this one, the
                    # ghost cannot say "after either" and goes (the weaker reading)
                    also = Order.covered(arr, gl2.s_agent[ghosts], gl2.s_clock[ghosts])
                    subsumes = Order.covered(arr, gl2.b_agent[ghosts], gl2.b_clock[ghosts])
                    gl2.b_agent[ghosts[also & ~subsumes]] = -1
                lines = np.nonzero(gl2.dirty.reshape(-1, LINE).any(axis=1))[0]
                lines = lines[Order.covered(arr, gl2.w_agent[lines], gl2.w_clock[lines])]
                if lines.size == 0:
                    continue
                mask = np.zeros(gl2.valid.size, bool)
                mask[lines] = True
                sel = np.repeat(mask, LINE) & gl2.dirty
                idx = np.nonzero(sel)[0]
                _, aid, clk = self.hb_now()  # what it cleaned keeps its epoch: a reader not after it may miss them
                gl2.s_agent[lines], gl2.s_clock[lines] = gl2.w_agent[lines], gl2.w_clock[lines]
                gl2.b_agent[lines], gl2.b_clock[lines] = aid, clk
                gl2.b_writer[lines] = gl2.writer[lines]
                gl2.b_bytes[np.repeat(mask, LINE)] = False
                gl2.b_bytes[idx] = True
                if self.dram_write_hooks:
                    for a, b in _runs(lines):
                        self.dram_written(st.start + a * LINE, min(b * LINE, st.size) - a * LINE, "GL2 write-back")
                gl2.dirty[idx] = False
                gl2.w_agent[lines], gl2.w_clock[lines] = -1, 0
                continue
            idx = np.nonzero(gl2.dirty)[0]
            if self.adversarial:  # report mode wrote DRAM with every store already
                st.dram[idx] = gl2.data[idx]
            if self.dram_write_hooks:
                for a, b in _runs(np.unique(idx >> LINE_SHIFT)):
                    self.dram_written(st.start + a * LINE, min(b * LINE, st.size) - a * LINE, "GL2 write-back")
            gl2.dirty[:] = False
            gl2.w_agent[:] = -1

    def invalidate_l2(self, xcc: int | None = None) -> None:
        """GL2_INV / TC: clean lines are dropped; a line with dirty bytes keeps them and re-reads the rest (an
        invalidate never loses data written through GL2: the weaker reading)."""
        self.stats["invalidates"] += 1
        arr = self.order.array(self.hb_now()[0]) if self.hb and xcc is None else None
        for st, gl2 in self._l2_levels(xcc):
            has_dirty = gl2.dirty.reshape(-1, LINE).any(axis=1)
            if arr is not None:  # report mode: copies filled at points not ordered before the invalidate survive it
                held = np.nonzero((gl2.valid & ~has_dirty) | (gl2.g_agent >= 0))[0]
                if held.size:
                    self._drop(st, gl2, held, arr)
            else:
                gl2.valid &= has_dirty
                gl2.g_agent[:] = -1
            if has_dirty.any():
                keep = np.repeat(has_dirty, LINE)[:st.size] & ~gl2.dirty[:st.size]
                gl2.data[:st.size][keep] = st.dram[keep]

    def discard_l2(self, xcc: int | None = None) -> None:
        """GL2_DISCARD: dirty lines are dropped without being written back (their data is lost)."""
        for st, gl2 in self._l2_levels(xcc):
            if not gl2.dirty.any():
                continue
            lines = np.nonzero(gl2.dirty.reshape(-1, LINE).any(axis=1))[0]
            if self.reporting:
                lo, hi = int(lines.min()) * LINE, (int(lines.max()) + 1) * LINE
                self.report("discarded", st.start + lo, hi - lo, self.describe(int(gl2.writer[lines[0]])),
                            "GL2_DISCARD", self.missing_write_back, level=self.level_name(self._name_of(st, gl2)),
                            detail="GL2_DISCARD dropped dirty lines: the data written there never reaches memory")
            gl2.valid[lines] = False
            gl2.dirty[:] = False
            gl2.w_agent[:] = -1

    def perform(self, ops: set[str], slot: int | None = None) -> None:
        """Cache actions by model name: WB (GL2 write-back) before the invalidates, as a forward SEQ does. A
        packet's act on every CU and every XCC's L2 (each XCC's CP runs the queue: facts 6.2); a shader
        instruction's (`slot`) on its own CU's copies and its own XCC's L2."""
        xcc = None if slot is None else slot // N_CU
        if "GL2_DISCARD" in ops:
            self.discard_l2(xcc)
        if "GL2_WB" in ops:
            self.write_back(xcc)
        if "GL2_INV" in ops:
            self.invalidate_l2(xcc)
        for level in ("GLV", "GL1", "GLK", "GLI"):
            if level + "_INV" in ops:
                self.invalidate(level, slot)

    # -- adversarial evictions ------------------------------------------------------------------------------

    def evict(self, choose) -> int:
        """The scheduler policy picks lines to evict now (`choose(n) -> indexes among n candidates`): a dirty GL2
        line is written back first. Candidates in a fixed order: mappings as first touched, levels, lines."""
        cands = []
        for st in self.states.values():
            for name in sorted(st.levels):
                cands += [(st, name, int(i)) for i in np.nonzero(st.levels[name].valid)[0]]
        if not cands:
            return 0
        picked = choose(len(cands)) or ()
        for k in picked:
            st, name, i = cands[k % len(cands)]
            lv = st.levels[name]
            lo, hi = i * LINE, min((i + 1) * LINE, st.size)
            if lv.dirty is not None and lv.dirty[lo:hi].any():
                sel = np.nonzero(lv.dirty[lo:hi])[0] + lo
                if self.adversarial:
                    st.dram[sel] = lv.data[sel]
                lv.dirty[lo:hi] = False
                self.dram_written(st.start + lo, hi - lo, "GL2 eviction")
            lv.valid[i] = False
        return len(picked)
