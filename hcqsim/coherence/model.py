"""The cache model of one GPU: the levels, the path each agent's accesses take, the cache operations.

Levels (HARDWARE_FACTS 6.1), each a set of 128-byte lines per mapping, held as numpy copies of the mapping:
  GLV  vector L0 (gfx9: TCP "TCL1"), write-through, may hold stale lines
  GL1  per-shader-array L1 (gfx11 only), read-only, write-through
  GLK  scalar cache (K$): s_load (kernel arguments, descriptors)
  GLI  instruction cache (I$): instruction fetch
  GL2  device L2 (gfx9: TCC "TC"), write-back for VRAM: a store sits in a dirty line until written back
GLV, GLK and GLI are kept once per CU (N_CU of them, "GLV.0", "GLV.1"; a dispatch runs on one, `cu_of`), GL1 and
GL2 once: a store updates its CU's copies only. Intra-kernel cross-CU staleness is not modelled (docs).

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

from ..memory import AddressSpace, Mapping, host_view
from .report import MemoryReport, ReportLog

LINE_SHIFT = 7
LINE = 1 << LINE_SHIFT
LEVELS = ("GLV", "GL1", "GLK", "GLI", "GL2")
PER_CU = frozenset({"GLV", "GLK", "GLI"})  # kept once per CU ("GLV.0", "GLV.1", ...); GL1 and GL2 are shared
N_CU = 2  # CUs modelled (one shader array): a dispatch runs on one of them (CacheModel.cu_of)
DEFAULT_MTYPE = {"vram": "rw", "gtt": "nc", "userptr": "nc", "doorbell": "uc", "mmio": "uc"}
# what a report names as missing, per family: the facts' names (GCR_CNTL on gfx11, CP_COHER_CNTL/EOP on gfx9)
INVALIDATE = {"gfx11": {"GLV": "GLV_INV", "GL1": "GL1_INV", "GLK": "GLK_INV", "GLI": "GLI_INV", "GL2": "GL2_INV"},
              "gfx9": {"GLV": "TCL1", "GLK": "SH_KCACHE", "GLI": "SH_ICACHE", "GL2": "TC"}}
WRITE_BACK = {"gfx11": "GL2_WB", "gfx9": "TC_WB"}
LEVEL_NAMES = {"gfx11": {n: n for n in LEVELS},
               "gfx9": {"GLV": "TCP (vector L1)", "GLK": "K$ (scalar)", "GLI": "I$", "GL2": "TCC (L2)"}}

# (address, bytes read from DRAM (a writable uint8 copy), reader) -> None: may change the bytes (adversarial) or
# record a report. Called for every DRAM read of a GPU engine the model performs: a miss fill, an uncached read.
DramReadHook = Callable[[int, np.ndarray, str], None]
# (address, size, writer) -> None: called after a GPU engine's write reached DRAM (write-through, write-back,
# uncached write).
DramWriteHook = Callable[[int, int, str], None]


def base(level: str) -> str:
    """The level of a per-CU copy's name: "GLV.1" -> "GLV"."""
    return level.partition(".")[0]


def on_cu(levels: tuple, cu: int) -> tuple:
    """A path with its per-CU levels named for CU `cu`."""
    return tuple(f"{x}.{cu}" if x in PER_CU else x for x in levels)


class Lines:
    """One level's copy of one mapping: bytes and a valid bit per line (dirty bytes and writers for GL2)."""

    def __init__(self, size: int, write_back: bool):
        n = -(-size // LINE)
        self.data = np.zeros(n * LINE, np.uint8)
        self.valid = np.zeros(n, bool)
        self.seq = np.zeros(n, np.int64)  # the model's write count when each line was filled or last written
        # report mode, per-CU levels: the dispatch whose access filled each copy, and the actor id of a store by
        # another dispatch since (it may have run on another CU: a copy like this one could have stayed old)
        self.filler = np.full(n, -1, np.int64)
        self.elsewhere = np.full(n, -1, np.int32)
        self.dirty = np.zeros(n * LINE, bool) if write_back else None
        self.writer = np.full(n, -1, np.int32) if write_back else None  # actor id of the last dirtying store

    def any_valid(self) -> bool:
        return bool(self.valid.any())


class MapState:
    """Everything the model keeps about one mapping."""

    def __init__(self, m: Mapping):
        self.m, self.start, self.size = m, m.start, m.end - m.start
        self.mtype = getattr(m, "mtype", None) or DEFAULT_MTYPE.get(m.kind, "uc")
        self.dram = host_view(m.host, self.size)  # the host pages behind the mapping (a USERPTR may sit elsewhere)
        self.levels: dict[str, Lines] = {}
        self.last_writer = np.full(-(-self.size // LINE), -1, np.int32)  # who last wrote each line, anywhere
        self.write_seq = np.zeros(-(-self.size // LINE), np.int64)  # the model's write count at that write

    def level(self, name: str) -> Lines:
        lv = self.levels.get(name)
        if lv is None:
            lv = self.levels[name] = Lines(self.size, name == "GL2")
        return lv


def _runs(idx: np.ndarray) -> list[tuple[int, int]]:
    """Sorted unique ints as (first, last + 1) runs of consecutive values."""
    if idx.size == 0:
        return []
    breaks = np.nonzero(np.diff(idx) != 1)[0]
    starts = np.concatenate(([idx[0]], idx[breaks + 1]))
    ends = np.concatenate((idx[breaks], [idx[-1]])) + 1
    return list(zip(starts.tolist(), ends.tolist()))


class CacheModel:
    """`report` or `adversarial` model of one GPU (`gpu.coherence`)."""

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
        b, _, cu = level.partition(".")
        return LEVEL_NAMES[self.family].get(b, b) + (f" of CU {cu}" if cu else "")

    def missing_invalidate(self, level: str) -> str:
        return INVALIDATE[self.family][base(level)]

    def cu_of(self, dispatch) -> int:
        """The CU a dispatch's waves run on (every wave of it on one): the policy's `choose_cu(n_cus)` when it has
        one, else CU 0 (the deterministic default: one copy, as if every dispatch ran on the CU of the last)."""
        if dispatch is None:
            return 0
        cu = getattr(dispatch, "cache_cu", None)
        if cu is None:
            choose = getattr(self.gpu.policy, "choose_cu", None)
            cu = dispatch.cache_cu = choose(N_CU) % N_CU if choose is not None else 0
        return cu

    @property
    def missing_write_back(self) -> str:
        return WRITE_BACK[self.family]

    def as_agent(self, agent, fn):
        """Call `fn()` with `agent` as the accessing activity (a queue's wait re-checked by the scheduler)."""
        saved, self.agent = self.agent, agent
        try:
            return fn()
        finally:
            self.agent = saved

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
        for i in range(len(levels) - 1, -1, -1):
            need = lines[first > i]
            if need.size == 0:
                continue
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

    def engine_read(self, st: MapState, lo: int, size: int, route: str, reader) -> np.ndarray:
        """Bytes [lo, lo+size) of a mapping as an engine sees them. `route`: "gl2" (a GL2 client that does not
        allocate: the CP, SDMA 5/6), "dram" (around GL2: SDMA 4)."""
        hi = lo + size
        coherent = st.dram[lo:hi]
        gl2 = st.levels.get("GL2") if st.mtype == "rw" else None
        if route == "dram":
            data = self._dram_fill(st, lo, hi, reader)
            if gl2 is not None and gl2.dirty[lo:hi].any():
                self._dirty_read(st, gl2, lo, hi, reader)
            return data if self.adversarial else coherent.copy()
        if gl2 is None or not gl2.valid[lo >> LINE_SHIFT:((hi - 1) >> LINE_SHIFT) + 1].any():
            data = self._dram_fill(st, lo, hi, reader)
            return data if self.adversarial else coherent.copy()
        data = self._dram_fill(st, lo, hi, reader)
        lines = np.arange(lo >> LINE_SHIFT, ((hi - 1) >> LINE_SHIFT) + 1)
        hit = np.repeat(gl2.valid[lines], LINE)[(lo - lines[0] * LINE):(lo - lines[0] * LINE) + size]
        data[hit] = gl2.data[lo:hi][hit]
        if not self.adversarial:
            self._compare(st, "GL2", lo, data, reader)
            return coherent.copy()
        return data

    def engine_write(self, st: MapState, lo: int, data: np.ndarray, route: str, writer_id: int) -> None:
        """An engine's write: `route` "l2" (into GL2, left dirty), "through" (GL2 lines present updated and clean,
        DRAM written), "dram" (DRAM only: GL2 lines present keep their old bytes -- SDMA 4)."""
        hi = lo + len(data)
        st.last_writer[lo >> LINE_SHIFT:((hi - 1) >> LINE_SHIFT) + 1] = writer_id  # (no CU-side level sees it)
        self.seq += 1
        st.write_seq[lo >> LINE_SHIFT:((hi - 1) >> LINE_SHIFT) + 1] = self.seq
        gl2 = st.levels.get("GL2") if st.mtype == "rw" else None
        if route == "l2" and st.mtype == "rw":
            lines = np.arange(lo >> LINE_SHIFT, ((hi - 1) >> LINE_SHIFT) + 1)
            self._fill(st, ("GL2",), lines, lambda: self.describe(writer_id))
            gl2 = st.levels["GL2"]
            gl2.data[lo:hi] = data
            gl2.dirty[lo:hi] = True
            gl2.writer[lines] = writer_id
            gl2.seq[lines] = self.seq
            if not self.adversarial:
                st.dram[lo:hi] = data
            return
        if route != "dram" and gl2 is not None:
            lines = np.arange(lo >> LINE_SHIFT, ((hi - 1) >> LINE_SHIFT) + 1)
            present = np.repeat(gl2.valid[lines], LINE)[(lo - lines[0] * LINE):(lo - lines[0] * LINE) + len(data)]
            gl2.data[lo:hi][present] = data[present]
            gl2.dirty[lo:hi][present] = False
            gl2.seq[lines[gl2.valid[lines]]] = self.seq
        self._dram_write(st, lo, data, lambda: self.describe(writer_id))

    # -- shader accesses: per-lane byte addresses -------------------------------------------------------

    def lanes_load(self, st: MapState, offs: np.ndarray, nbytes: int, levels: tuple, reader, dispatch) -> np.ndarray:
        """uint8 [k, nbytes]: what lanes reading `nbytes` at mapping offsets `offs` get through `levels`."""
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
                return data if self.adversarial else coherent
            return coherent
        self._dispatch_key = id(dispatch) if dispatch is not None else -1
        first = self._fill(st, levels, lines, reader)
        top = st.levels[levels[0]]
        data = top.data[B]
        if not self.adversarial:
            bad = data != coherent
            if bad.any():
                self._stale(st, levels, lines, first, B, bad, reader)
            elif base(levels[0]) in PER_CU and dispatch is not None:
                self._other_cu(st, levels[0], top, lines, first, id(dispatch), reader)
        return data if self.adversarial else coherent

    def lanes_store(self, st: MapState, offs: np.ndarray, data: np.ndarray, update: tuple, write_back: bool,
                    writer_id: int, dispatch, reader) -> None:
        """Lanes store `data` [k, nbytes] at mapping offsets `offs`: lines present in the `update` levels take the
        bytes (write-through); with `write_back` (VRAM through GL2) the bytes land in GL2 lines, dirty, else
        DRAM is written."""
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
                lv.data[B[present]] = flat[present]
                held = lines[lv.valid[lines]]
                lv.seq[held] = self.seq
                if self.reporting and base(name) in PER_CU:  # a copy another dispatch filled: it may be elsewhere
                    other = held[lv.filler[held] != key]
                    lv.elsewhere[other] = writer_id
        if write_back and st.mtype == "rw":
            self._fill(st, ("GL2",), lines, lambda: self.describe(writer_id))
            gl2 = st.levels["GL2"]
            gl2.data[B] = flat
            gl2.dirty[B] = True
            gl2.writer[lines] = writer_id
            gl2.seq[lines] = self.seq
            if not self.adversarial:
                st.dram[B] = flat
            return
        gl2 = st.levels.get("GL2") if st.mtype == "rw" else None
        if gl2 is not None:  # a write-through store (system scope): GL2 lines present are updated and clean
            present = gl2.valid[B >> LINE_SHIFT]
            gl2.data[B[present]] = flat[present]
            gl2.dirty[B[present]] = False
            gl2.seq[lines[gl2.valid[lines]]] = self.seq
        st.dram[B] = flat
        if self.dram_write_hooks:
            who = self.describe(writer_id)
            for a, b in _runs(lines):
                self.dram_written(st.start + a * LINE, min(b * LINE, st.size) - a * LINE, who)

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

    def _other_cu(self, st, level, lv, lines, first, reader_key: int, reader) -> None:
        """Report mode: the copy this load hit was filled by one dispatch and written by another since; had the writer
        run on another CU (the hardware's choice), this CU's copy would still hold the old bytes."""
        hit = lines[first == 0]
        marked = hit[lv.elsewhere[hit] >= 0]
        if marked.size == 0:
            return
        writers = lv.elsewhere[marked]
        for w in np.unique(writers).tolist():
            if self.actor_dispatch.get(w) == reader_key:
                continue
            ls = marked[writers == w]
            lo, hi = int(ls.min()) * LINE, min((int(ls.max()) + 1) * LINE, st.size)
            self.report("stale line", st.start + lo, hi - lo, self.describe(w), reader() if callable(reader) else reader,
                        self.missing_invalidate(level), level=self.level_name(base(level)) + " of another CU",
                        detail="a dispatch on another CU wrote these lines after this CU's copy was filled; no "
                               "invalidate of the vector cache came between, so this load could have read the "
                               "old copy (the CU a dispatch runs on is the hardware's choice)")

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
                    self.missing_write_back, level=self.level_name("GL2"),
                    detail="the reader goes around GL2 and reads memory while GL2 holds newer, dirty bytes")

    def released(self, queue, what: str) -> None:
        """`queue` signalled (an end-of-pipe write or interrupt): bytes its own earlier work left dirty in GL2 are
        not visible to the host or a peer reading VRAM through the BAR (facts 6.2, 6.4): each is a record."""
        if not self.reporting:
            return
        mine = self.queue_actors.get(queue)
        if not mine:
            return
        for st in list(self.states.values()):
            gl2 = st.levels.get("GL2")
            if gl2 is None or not gl2.dirty.any():
                continue
            dirty_lines = np.nonzero(gl2.dirty.reshape(-1, LINE).any(axis=1))[0]
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
                            level=self.level_name("GL2"),
                            detail=f"{what} signalled completion while this queue's earlier writes were still dirty "
                                   f"in GL2; a reader through the BAR sees the old bytes")

    # -- partial-flush hazards (report mode) --------------------------------------------------------------

    def _footprint(self, dispatch, st, lines, write: bool, reader) -> None:
        fp = self.footprints.get(dispatch)
        if fp is None:
            return
        reads, writes, peers = fp
        keys = (lines + (st.start >> LINE_SHIFT)).tolist()
        (writes if write else reads).update(keys)
        for peer in peers:
            pfp = self.footprints.get(peer)
            if pfp is None:
                continue
            pr, pw = pfp[0], pfp[1]
            hit = [k for k in keys if k in pw or (write and k in pr)]
            if hit:
                who = reader() if callable(reader) else reader
                first, last = min(hit) << LINE_SHIFT, (max(hit) + 1) << LINE_SHIFT
                self.report("no partial flush", first, last - first, f"{peer.name} (kernel at "
                            f"0x{peer.d.pgm_addr:x})" if hasattr(peer, "d") else str(peer), who, "CS_PARTIAL_FLUSH",
                            detail="two dispatches of one queue touch the same lines, one writing, with no "
                                   "CS_PARTIAL_FLUSH (or barrier) between them: they may run at the same time")

    # -- cache operations ---------------------------------------------------------------------------------

    def invalidate(self, level: str) -> None:
        """Drop every line of a read-only level (GLV, GL1, GLK, GLI)."""
        self.stats["invalidates"] += 1
        for st in self.states.values():
            for name, lv in st.levels.items():
                if base(name) == level:  # every CU's copy
                    lv.valid[:] = False

    def write_back(self) -> None:
        """GL2_WB / TC_WB: every dirty byte goes to DRAM; the lines stay, clean."""
        self.stats["write_backs"] += 1
        for st in self.states.values():
            gl2 = st.levels.get("GL2")
            if gl2 is None or not gl2.dirty.any():
                continue
            idx = np.nonzero(gl2.dirty)[0]
            if self.adversarial:  # report mode wrote DRAM with every store already
                st.dram[idx] = gl2.data[idx]
            if self.dram_write_hooks:
                for a, b in _runs(np.unique(idx >> LINE_SHIFT)):
                    self.dram_written(st.start + a * LINE, min(b * LINE, st.size) - a * LINE, "GL2 write-back")
            gl2.dirty[:] = False

    def invalidate_l2(self) -> None:
        """GL2_INV / TC: clean lines are dropped; a line with dirty bytes keeps them and re-reads the rest (an
        invalidate never loses data written through GL2: the weaker reading)."""
        self.stats["invalidates"] += 1
        for st in self.states.values():
            gl2 = st.levels.get("GL2")
            if gl2 is None:
                continue
            has_dirty = gl2.dirty.reshape(-1, LINE).any(axis=1)
            gl2.valid &= has_dirty
            if has_dirty.any():
                keep = np.repeat(has_dirty, LINE)[:st.size] & ~gl2.dirty[:st.size]
                gl2.data[:st.size][keep] = st.dram[keep]

    def discard_l2(self) -> None:
        """GL2_DISCARD: dirty lines are dropped without being written back (their data is lost)."""
        for st in self.states.values():
            gl2 = st.levels.get("GL2")
            if gl2 is None or not gl2.dirty.any():
                continue
            lines = np.nonzero(gl2.dirty.reshape(-1, LINE).any(axis=1))[0]
            if self.reporting:
                lo, hi = int(lines.min()) * LINE, (int(lines.max()) + 1) * LINE
                self.report("discarded", st.start + lo, hi - lo, self.describe(int(gl2.writer[lines[0]])),
                            "GL2_DISCARD", self.missing_write_back, level=self.level_name("GL2"),
                            detail="GL2_DISCARD dropped dirty lines: the data written there never reaches memory")
            gl2.valid[lines] = False
            gl2.dirty[:] = False

    def perform(self, ops: set[str]) -> None:
        """Cache actions by model name: WB (GL2 write-back) before the invalidates, as a forward SEQ does."""
        if "GL2_DISCARD" in ops:
            self.discard_l2()
        if "GL2_WB" in ops:
            self.write_back()
        if "GL2_INV" in ops:
            self.invalidate_l2()
        for level in ("GLV", "GL1", "GLK", "GLI"):
            if level + "_INV" in ops:
                self.invalidate(level)

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

    # -- partial-flush bookkeeping (report mode) ----------------------------------------------------------

    def launched(self, queue, dispatch) -> None:
        """A dispatch starts: it may overlap every dispatch of its queue launched since the last partial flush."""
        if not self.reporting or dispatch is None:
            return
        peers = list(getattr(queue, "unfenced", ()))
        self.footprints[dispatch] = (set(), set(), peers)
        for p in peers:
            fp = self.footprints.get(p)
            if fp is not None:
                fp[2].append(dispatch)
        queue.unfenced = peers + [dispatch]

    def drained(self, queue) -> None:
        """CS_PARTIAL_FLUSH (or an AQL barrier): later work of the queue is ordered after its earlier dispatches."""
        for d in getattr(queue, "unfenced", ()):
            self.footprints.pop(d, None)
        queue.unfenced = []

    def waited(self, queue) -> None:
        """A wait of `queue` was satisfied with none of its dispatches running and no end-of-pipe event pending: the
        wait was on their completion (a RELEASE_MEM value, say), so later work is ordered after them."""
        if not queue.inflight and not queue.eop_events:
            self.drained(queue)

    def cp_access(self, queue, address: int, size: int, write: bool, what: str) -> None:
        """A CP packet touches memory while dispatches launched before it are not known finished (no partial
        flush since): a write may land before the kernel's own accesses, a read before its writes."""
        if not self.reporting:
            return
        for d in getattr(queue, "unfenced", ()):
            fp = self.footprints.get(d)
            lines = set(range(address >> LINE_SHIFT, ((address + max(size, 1) - 1) >> LINE_SHIFT) + 1))
            overlap = fp is not None and (lines & fp[1] or (write and lines & fp[0]))
            if write or overlap:
                self.report("no partial flush", address, size, f"{d.name} (kernel at 0x{self.gpu.canonical(d.d.pgm_addr):x})",
                            what, "CS_PARTIAL_FLUSH",
                            detail="the CP does not wait for a dispatch before the next packet (facts 6.3): this "
                                   "access may happen while the kernel still runs"
                                   + (" and touches what it touches" if overlap else
                                      "; whoever waits for this value may see the kernel unfinished"))
