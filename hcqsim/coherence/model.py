"""The cache model of one GPU: the levels, the path each agent's accesses take, the cache operations.

Levels (HARDWARE_FACTS 6.1), each a set of 128-byte lines per mapping, held as numpy copies of the mapping:
  GLV  vector L0 (gfx9: TCP "TCL1"), write-through, may hold stale lines
  GL1  per-shader-array L1 (gfx11 only), read-only, write-through
  GLK  scalar cache (K$): s_load (kernel arguments, descriptors)
  GLI  instruction cache (I$): instruction fetch
  GL2  device L2 (gfx9: TCC "TC"), write-back for VRAM: a store sits in a dirty line until written back
GLV, GLK and GLI are kept once per CU (N_CU per XCC: "GLV.0", "GLV.1", ...), GL1 once, GL2 once per XCC (gfx942's
target.num_xcc of them: "GL2" for XCC 0, "GL2.1" ...; gfx1100 has one). A workgroup runs on one slot (XCC, CU):
`CacheModel.place` (a policy choice); `slot` is the one the shader access being served runs on. A store updates
its own slot's copies only, so another CU's copy, or another XCC's L2, goes stale.

Memory types (mapping attribute `mtype`, set by the emulated KFD from the allocation flags, else from the kind):
  "rw" VRAM, cached at every level, GL2 write-back;
  "nc" system memory (GTT, userptr): cached in GLV/GL1/GLK/GLI, GL2 kept coherent (snooped; the weaker reading);
  "uc" COHERENT/UNCACHED allocations, doorbells, MMIO: no level holds them.

Modes: `report` keeps DRAM (the host pages) coherent -- every write lands there too -- and compares what a level
would have returned with it; `adversarial` returns what the level holds and writes DRAM only on write-back (and
for write-through paths), so a missing flush gives a wrong value.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..memory import AddressSpace, Mapping
from .findings import Findings
from .lines import (DEFAULT_MTYPE, INVALIDATE, LEVEL_NAMES, LEVELS, LINE, LINE_SHIFT, N_CU, PER_CU,  # noqa: F401
                    WRITE_BACK, Lines, MapState, _runs, base, l2_name, on_slot)
from .operations import CacheOperations
from .order import MULTI, Order
from .ordering import Ordering
from .report import ReportLog

# (address, bytes read from DRAM (a writable uint8 copy), reader) -> None: may change the bytes (adversarial) or
# record a report. Called for every DRAM read of a GPU engine the model performs: a miss fill, an uncached read.
DramReadHook = Callable[[int, np.ndarray, str], None]
# (address, size, writer) -> None: called after a GPU engine's write reached DRAM (write-through, write-back,
# uncached write).
DramWriteHook = Callable[[int, int, str], None]


class CacheModel(Ordering, Findings, CacheOperations):
    """`report` or `adversarial` model of one GPU (`gpu.coherence`). This module holds the accesses (DRAM, fills,
    engine and shader reads and writes); its parts hold the rest, on the state set here: `ordering.Ordering`
    (happens-before, partial-flush bookkeeping), `findings.Findings` (reports), `operations.CacheOperations`
    (invalidate, write back, evict). The line state is `lines.MapState`."""

    def __init__(self, gpu, mode: str, log: ReportLog):
        self.gpu, self.mode, self.log = gpu, mode, log
        self.adversarial = mode == "adversarial"
        self.family = "gfx11" if gpu.target.is_gfx11 else "gfx9"
        self.sdma_through_gl2 = self.family == "gfx11"  # SDMA 5.x/6.x use GL2; SDMA 4.x goes around it (facts 6.2)
        self.dram_read_hooks: list[DramReadHook] = []
        self.dram_write_hooks: list[DramWriteHook] = []
        self.states: dict[Mapping, MapState] = {}
        self.agent = None  # the activity whose engine accesses go through gpu.memory now (None: the host)
        self.actors: list = []  # actor id -> description (a str or a callable giving one)
        self.queue_actors: dict = {}  # queue -> ids of the actors that are its work (releases check their own)
        self._actor_ids: dict = {}
        self.footprints: dict = {}  # dispatch -> (lines read, lines written): partial-flush checks (report mode)
        self.stats = {"fills": 0, "write_backs": 0, "invalidates": 0}
        self.seq = 1  # GPU writes so far (+1): a copy newer than every GPU write that differs saw an unseen writer
        self._dispatch_key = -1  # the dispatch whose shader access the model is serving (report-mode marks)
        self.actor_dispatch: dict[int, int] = {}  # actor id -> its dispatch's key (shader writers)
        # where workgroups run: XCCs (each with its own L2 on gfx942: facts 6.1) x N_CU CUs; `slot` is the CU slot
        # of the shader access being served (set by the shader core per workgroup placement, `place`)
        self.n_xcc = max(1, int(getattr(gpu.target, "num_xcc", 1)))
        self.n_slots = self.n_xcc * N_CU
        self.l2_names = tuple(l2_name(x) for x in range(self.n_xcc))
        self.slot = 0
        # the deterministic default placement: workgroup w (linear id) on default_slots[w % 2], two slots that
        # differ in CU and (with several XCCs) in XCC, so neighbouring workgroups do; workgroup 0 on slot 0
        self.default_slots = (0, (1 % self.n_xcc) * N_CU + 1)
        # report mode: happens-before between agents (coherence.order; an EmulatedSystem shares one between its
        # GPUs): a packet's invalidate drops, and its write-back cleans, only what its clock covers
        self.order = Order()
        self.hb = mode == "report"

    def place(self, dispatch, linear_ids: np.ndarray) -> np.ndarray:
        """The CU slot (xcc * N_CU + cu) each workgroup of `dispatch` (by linear id) runs on: the policy's
        `choose_xcc(n_xcc)` / `choose_cu(n_cus)` per workgroup where it has them (the hardware's choice), else the
        deterministic default (`default_slots`, alternating by workgroup)."""
        policy = self.gpu.policy
        default = np.asarray(self.default_slots, np.int64)[linear_ids % 2]
        choose_xcc, choose_cu = getattr(policy, "choose_xcc", None), getattr(policy, "choose_cu", None)
        if choose_xcc is None and choose_cu is None:
            return default
        xcc, cu = default // N_CU, default % N_CU
        if choose_xcc is not None and self.n_xcc > 1:
            xcc = np.array([choose_xcc(self.n_xcc) % self.n_xcc for _ in range(len(linear_ids))], np.int64)
        if choose_cu is not None:
            cu = np.array([choose_cu(N_CU) % N_CU for _ in range(len(linear_ids))], np.int64)
        return xcc * N_CU + cu

    # -- mappings ------------------------------------------------------------------------------------

    def state(self, m: Mapping) -> MapState:
        st = self.states.get(m)
        if st is None:
            st = self.states[m] = MapState(m)
        return st

    def forget(self, m: Mapping) -> None:
        """The mapping is gone (freed): its lines go with it (a new allocation at the VA starts cold)."""
        self.states.pop(m, None)

    # -- DRAM, where every level ends ----------------------------------------------------------------

    def dram_read(self, address: int, size: int, reader: str) -> np.ndarray:
        """A GPU engine reads DRAM (host pages): a writable copy, after the read hooks (HDP) had their say."""
        data = np.frombuffer(bytearray(AddressSpace.read(self.gpu.memory, address, size)), np.uint8)
        for hook in self.dram_read_hooks:
            hook(address, data, reader)
        return data

    def _dram_fill(self, st: MapState, lo: int, hi: int, reader) -> np.ndarray:
        """Bytes [lo, hi) of a mapping as DRAM has them, through the read hooks (offsets in the mapping)."""
        data = st.dram[lo:hi].copy()
        if self.dram_read_hooks:
            who = reader() if callable(reader) else reader
            for hook in self.dram_read_hooks:
                hook(st.start + lo, data, who)
        return data

    def dram_written(self, address: int, size: int, writer: str) -> None:
        for hook in self.dram_write_hooks:
            hook(address, size, writer)

    def _dram_write(self, st: MapState, lo: int, data: np.ndarray, writer) -> None:
        st.dram[lo:lo + len(data)] = data
        if self.dram_write_hooks:
            who = writer() if callable(writer) else writer
            self.dram_written(st.start + lo, len(data), who)

    # -- lines: fill and look-up ----------------------------------------------------------------------

    def _fill(self, st: MapState, levels: tuple, lines: np.ndarray, reader) -> list[int]:
        """Bring `lines` (unique line indexes of `st`) into every level of `levels` (top first) that misses them,
        each from the level below it (or DRAM): what the top level then holds is what the access returns.
        Returns, per line, the index in `levels` of the level that supplied it (len(levels): DRAM)."""
        first = np.full(lines.size, len(levels), np.int64)
        for i in range(len(levels) - 1, -1, -1):
            lv = st.levels.get(levels[i])
            if lv is not None:
                first[lv.valid[lines]] = i
        epoch = None
        for i in range(len(levels) - 1, -1, -1):
            need = lines[first > i]
            if need.size == 0:
                continue
            if self.hb:
                if epoch is None:
                    epoch = self.hb_now()[1:]
                lv_ = st.level(levels[i])
                lv_.f_agent[need], lv_.f_clock[need] = epoch
                lv_.g_agent[need] = -1
            lv = st.level(levels[i])
            below = st.levels[levels[i + 1]] if i + 1 < len(levels) else None
            for a, b in _runs(need):
                lo, hi = a * LINE, min(b * LINE, st.size)
                lv.data[lo:hi] = below.data[lo:hi] if below is not None else self._dram_fill(st, lo, hi, reader)
            lv.valid[need] = True
            lv.seq[need] = below.seq[need] if below is not None else self.seq  # as new as what it copied
            lv.filler[need] = self._dispatch_key
            lv.elsewhere[need] = -1
            self.stats["fills"] += int(need.size)
        return first

    # -- engine (CP, SDMA) accesses: byte ranges ------------------------------------------------------

    def _l2s(self, st: MapState) -> list[Lines]:
        """The L2 copies of a mapping (one per XCC that holds any of it); none for memory GL2 keeps coherent."""
        if st.mtype != "rw":
            return []
        return [lv for lv in (st.levels.get(n) for n in self.l2_names) if lv is not None]

    def engine_read(self, st: MapState, lo: int, size: int, route: str, reader) -> np.ndarray:
        """Bytes [lo, lo+size) of a mapping as an engine sees them. `route`: "gl2" (a GL2 client that does not
        allocate: the CP, SDMA 5/6), "dram" (around GL2: SDMA 4). With an L2 per XCC the CP reads through XCC 0's
        and sees any XCC's dirty bytes (every XCC's CP runs the queue: the weaker reading)."""
        hi = lo + size
        coherent = st.dram[lo:hi]
        l2s = self._l2s(st)
        data = self._dram_fill(st, lo, hi, reader)
        if route == "dram":
            for gl2 in l2s:
                if gl2.dirty[lo:hi].any():  # one record: the first XCC's L2 holding the bytes dirty
                    self._dirty_read(st, gl2, lo, hi, reader)
                    break
            else:
                if self.hb:
                    self._cleaned_unordered(st, l2s, lo, hi, reader)
            return data if self.adversarial else coherent.copy()
        first_line, last_line = lo >> LINE_SHIFT, ((hi - 1) >> LINE_SHIFT) + 1
        if not any(gl2.valid[first_line:last_line].any() for gl2 in l2s):
            return data if self.adversarial else coherent.copy()
        lines = np.arange(first_line, last_line)
        cut = slice(lo - first_line * LINE, lo - first_line * LINE + size)
        gl2 = st.levels.get("GL2") if st.mtype == "rw" else None
        if gl2 is not None:  # XCC 0's copy where it has one
            hit = np.repeat(gl2.valid[lines], LINE)[cut]
            data[hit] = gl2.data[lo:hi][hit]
        for other in l2s:  # and every XCC's dirty bytes
            dirty = other.dirty[lo:hi]
            if other is not gl2 and dirty.any():
                data[dirty] = other.data[lo:hi][dirty]
        if not self.adversarial:
            self._compare(st, "GL2", lo, data, reader)
            return coherent.copy()
        return data

    def engine_write(self, st: MapState, lo: int, data: np.ndarray, route: str, writer_id: int) -> None:
        """An engine's write: `route` "l2" (into GL2, left dirty: every XCC's, as every XCC's CP runs the packet),
        "through" (GL2 lines present updated and clean, DRAM written), "dram" (DRAM only: GL2 lines present keep
        their old bytes -- SDMA 4)."""
        hi = lo + len(data)
        if self.hb and len(data) <= 32:
            self._published(st.start + lo, data)
        first_line, last_line = lo >> LINE_SHIFT, ((hi - 1) >> LINE_SHIFT) + 1
        st.last_writer[first_line:last_line] = writer_id  # (no CU-side level sees it)
        self.seq += 1
        st.write_seq[first_line:last_line] = self.seq
        lines = np.arange(first_line, last_line)
        if route == "l2" and st.mtype == "rw":
            for name in self.l2_names:
                self._fill(st, (name,), lines, lambda: self.describe(writer_id))
                gl2 = st.levels[name]
                gl2.data[lo:hi] = data
                gl2.dirty[lo:hi] = True
                gl2.writer[lines] = writer_id
                gl2.seq[lines] = self.seq
                if self.hb:
                    self._dirtied(gl2, lines)
            if not self.adversarial:
                st.dram[lo:hi] = data
            return
        if route != "dram":
            cut = slice(lo - first_line * LINE, lo - first_line * LINE + len(data))
            for gl2 in self._l2s(st):
                present = np.repeat(gl2.valid[lines] | (gl2.g_agent[lines] >= 0), LINE)[cut]  # ghosts too
                gl2.data[lo:hi][present] = data[present]
                gl2.dirty[lo:hi][present] = False
                gl2.seq[lines[gl2.valid[lines]]] = self.seq
        self._dram_write(st, lo, data, lambda: self.describe(writer_id))

    # -- shader accesses: per-lane byte addresses -------------------------------------------------------

    def lanes_load(self, st: MapState, offs: np.ndarray, nbytes: int, levels: tuple, reader, dispatch,
                   every_l2: bool = False) -> np.ndarray:
        """uint8 [k, nbytes]: what lanes reading `nbytes` at mapping offsets `offs` get through `levels`. With
        `every_l2` and no levels (an atomic where there is an L2 per XCC), memory with any XCC's dirty bytes."""
        B = offs[:, None] + np.arange(nbytes, dtype=np.int64)
        lines = np.unique(B >> LINE_SHIFT)
        if dispatch is not None and self.reporting:
            self._footprint(dispatch, st, lines, False, reader)
        coherent = st.dram[B]
        if not levels:
            if self.dram_read_hooks:  # an uncached read: DRAM through the hooks, per contiguous run
                data = coherent.copy()
                for a, b in _runs(lines):
                    lo, hi = a * LINE, min(b * LINE, st.size)
                    got = self._dram_fill(st, lo, hi, reader)
                    sel = (B >= lo) & (B < hi)
                    data[sel] = got[B[sel] - lo]
                if every_l2 and self.adversarial:
                    self._overlay_dirty(st, B, data)
                return data if self.adversarial else coherent
            if every_l2 and self.adversarial:
                data = coherent.copy()
                self._overlay_dirty(st, B, data)
                return data
            return coherent
        self._dispatch_key = id(dispatch) if dispatch is not None else -1
        if self.hb:
            self._ghosts(st, levels, lines, B, coherent, reader)
        first = self._fill(st, levels, lines, reader)
        top = st.levels[levels[0]]
        data = top.data[B]
        if not self.adversarial:
            bad = data != coherent
            if bad.any():
                self._stale(st, levels, lines, first, B, bad, reader)
            elif base(levels[0]) in PER_CU and dispatch is not None:
                self._other_cu(st, levels[0], top, lines, first, id(dispatch), reader)
            if self.n_xcc > 1 and st.mtype == "rw" and base(levels[-1]) == "GL2":
                self._other_l2(st, levels[-1], B, reader)
                if dispatch is not None:
                    self._dirty_elsewhere(st, levels[-1], B, id(dispatch), reader)
                    self._other_cu(st, levels[-1], st.levels[levels[-1]], lines, first, id(dispatch), reader,
                                   len(levels) - 1)  # the lines the L2 supplied (the levels above missed)
        return data if self.adversarial else coherent

    def _overlay_dirty(self, st: MapState, B: np.ndarray, data: np.ndarray) -> None:
        """Put every XCC's dirty bytes at byte offsets B over `data` (what a coherent reader sees)."""
        for gl2 in self._l2s(st):
            dirty = gl2.dirty[B]
            if dirty.any():
                data[dirty] = gl2.data[B][dirty]

    def lanes_store(self, st: MapState, offs: np.ndarray, data: np.ndarray, update: tuple, write_back: bool,
                    writer_id: int, dispatch, reader, l2: str = "GL2") -> None:
        """Lanes store `data` [k, nbytes] at mapping offsets `offs`: lines present in the `update` levels take the
        bytes (write-through); with `write_back` (VRAM through GL2) the bytes land in lines of the writer's L2
        (`l2`), dirty, else DRAM is written (and every L2's copy present updated: the weaker reading)."""
        nbytes = data.shape[1]
        B = (offs[:, None] + np.arange(nbytes, dtype=np.int64)).ravel()
        flat = np.ascontiguousarray(data).ravel()
        lines = np.unique(B >> LINE_SHIFT)
        if dispatch is not None and self.reporting:
            self._footprint(dispatch, st, lines, True, reader)
        st.last_writer[lines] = writer_id
        self.seq += 1
        st.write_seq[lines] = self.seq
        key = id(dispatch) if dispatch is not None else -1
        for name in update:
            lv = st.levels.get(name)
            if lv is not None:
                present = lv.valid[B >> LINE_SHIFT]
                if self.hb:  # a ghost copy (coherence.order) would have been updated had it been there
                    present = present | (lv.g_agent[B >> LINE_SHIFT] >= 0)
                lv.data[B[present]] = flat[present]
                held = lines[lv.valid[lines]]
                lv.seq[held] = self.seq
                if self.reporting and base(name) in PER_CU:  # a copy another dispatch filled: it may be elsewhere
                    other = held[lv.filler[held] != key]
                    lv.elsewhere[other] = writer_id
        if write_back and st.mtype == "rw":
            gl2 = st.levels.get(l2)
            if gl2 is not None and self.reporting and self.n_xcc > 1:  # copies another dispatch filled: may be
                held = lines[gl2.valid[lines]]  # on another XCC, where this store does not reach them
                gl2.elsewhere[held[gl2.filler[held] != key]] = writer_id
            self._dispatch_key = key
            self._fill(st, (l2,), lines, lambda: self.describe(writer_id))
            gl2 = st.levels[l2]
            gl2.data[B] = flat
            gl2.dirty[B] = True
            gl2.writer[lines] = writer_id
            gl2.seq[lines] = self.seq
            if self.hb:
                self._dirtied(gl2, lines)
            if not self.adversarial:
                st.dram[B] = flat
            return
        for gl2 in self._l2s(st):  # a write-through store (system scope, atomics): GL2 copies updated, clean
            present = gl2.valid[B >> LINE_SHIFT] | (gl2.g_agent[B >> LINE_SHIFT] >= 0)  # ghosts too
            gl2.data[B[present]] = flat[present]
            gl2.dirty[B[present]] = False
            gl2.seq[lines[gl2.valid[lines]]] = self.seq
        st.dram[B] = flat
        if self.dram_write_hooks:
            who = self.describe(writer_id)
            for a, b in _runs(lines):
                self.dram_written(st.start + a * LINE, min(b * LINE, st.size) - a * LINE, who)

    def _drop(self, st: MapState, lv: Lines, held: np.ndarray, arr: np.ndarray) -> None:
        """A packet's invalidate with clock `arr` (report mode), over lines `held` (valid, or ghosts of an earlier
        invalidate): copies whose fill it covers are dropped, keeping their bytes as a ghost with its epoch. A copy
        (or ghost) whose fill it does not cover survives, but as a copy filled after it would be: with memory's bytes
        now (the run's older bytes are not what a schedule in which it survives would hold; the weaker reading takes
        memory, not the level below)."""
        cov = Order.covered(arr, lv.f_agent[held], lv.f_clock[held])
        keep = held[~cov]  # survivors, and ghosts: a copy present after this invalidate was filled after it
        if keep.size:
            for a, b in _runs(keep):
                lo, hi = a * LINE, min(b * LINE, st.size)
                lv.data[lo:hi] = st.dram[lo:hi]
            lv.seq[keep] = self.seq
            lv.elsewhere[keep] = -1
        ghost = lv.g_agent[held] >= 0
        # a ghost of an earlier invalidate this one is ordered after stays (a reader ordered after this one is after
        # that one too); one of an invalidate not before this one cannot say "after either" and goes
        subsumes = Order.covered(arr, lv.g_agent[held], lv.g_clock[held])
        gone = held[cov & ghost & ~lv.valid[held] & ~subsumes]
        lv.g_agent[gone] = -1
        drop = held[cov & lv.valid[held]]
        if drop.size:
            _, aid, clk = self.hb_now()
            lv.valid[drop] = False
            lv.g_agent[drop], lv.g_clock[drop] = aid, clk

    def _ghosts(self, st, levels, lines, B, coherent, reader) -> None:
        """Report mode, before a load fills its path: a line missing at a level but kept there as a ghost (dropped
        by an invalidate this reader is not ordered after) could have been hit; if its bytes are old, a record."""
        open_ = np.ones(lines.size, bool)
        arr = None
        for name in levels:
            lv = st.levels.get(name)
            if lv is None:
                continue
            valid = lv.valid[lines]
            cand = open_ & ~valid & (lv.g_agent[lines] >= 0)
            if cand.any():
                if arr is None:
                    arr = self.order.array(self.hb_now()[0])
                idx = np.nonzero(cand)[0]
                hit = idx[~Order.covered(arr, lv.g_agent[lines[idx]], lv.g_clock[lines[idx]])]
                if hit.size:
                    sel = np.isin(B >> LINE_SHIFT, lines[hit])
                    bad = sel & (lv.data[B] != coherent)
                    if bad.any():
                        offs = B[bad]
                        line = int(offs.min() >> LINE_SHIFT)
                        self.report("stale line", st.start + int(offs.min()), int(offs.max() - offs.min()) + 1,
                                    self._newer_writer(st, name, line), reader() if callable(reader) else reader,
                                    self.missing_invalidate(name), level=self.level_name(name),
                                    detail=f"an invalidate dropped this {self.level_name(name)} copy in this run, but "
                                           f"nothing orders it before this read (a wait for the queue that "
                                           f"invalidated, after the invalidate): the read could have come first")
                    open_[hit] = False
            open_ &= ~valid

    def _cleaned_unordered(self, st, l2s, lo: int, hi: int, reader) -> None:
        """Report mode, a read around GL2: bytes a packet's write-back cleaned in this run, where nothing orders
        that write-back before this read, could still have been dirty."""
        a, b = lo >> LINE_SHIFT, ((hi - 1) >> LINE_SHIFT) + 1
        for gl2 in l2s:
            g = np.nonzero(gl2.b_agent[a:b] >= 0)[0] + a
            if g.size == 0:
                continue
            arr = self.order.array(self.hb_now()[0])
            g = g[~Order.covered(arr, gl2.b_agent[g], gl2.b_clock[g])]
            if g.size:
                mask = np.zeros(gl2.valid.size, bool)
                mask[g] = True
                hit = np.nonzero(np.repeat(mask, LINE)[lo:hi] & gl2.b_bytes[lo:hi])[0] + lo  # bytes it cleaned
                if hit.size == 0:
                    continue
                first, last = int(hit.min()), int(hit.max()) + 1
                g = g[[bool(gl2.b_bytes[x * LINE:(x + 1) * LINE][max(lo - x * LINE, 0):max(hi - x * LINE, 0)].any())
                       for x in g.tolist()]]
                self.report("not written back", st.start + first, last - first, self.describe(int(gl2.b_writer[g[0]])),
                            reader() if callable(reader) else reader, self.missing_write_back,
                            level=self.level_name(self._name_of(st, gl2)),
                            detail="a write-back cleaned these bytes in this run, but nothing orders it before this "
                                   "read around GL2 (a wait for the queue that wrote back, after it): the read could "
                                   "have come first and read memory under the dirty line")
                return

    def _dirtied(self, gl2: Lines, lines: np.ndarray) -> None:
        """Report mode: `lines` of an L2 copy were just dirtied by the current accessor; a line another agent's
        stores left dirty becomes MULTI (any write-back cleans it: the weaker reading)."""
        _, aid, clk = self.hb_now()
        wa = gl2.w_agent[lines]
        other = (wa != aid) & (wa != -1)
        gl2.w_agent[lines] = np.where(other, MULTI, aid)
        gl2.w_clock[lines] = np.maximum(gl2.w_clock[lines], clk)
        gl2.b_agent[lines] = -1  # dirty again: the newer stores are what a reader may miss
