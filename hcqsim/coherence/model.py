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

from ..memory import AddressSpace, Mapping, host_view
from .order import HOST, MULTI, Order
from .report import MemoryReport, ReportLog

LINE_SHIFT = 7
LINE = 1 << LINE_SHIFT
LEVELS = ("GLV", "GL1", "GLK", "GLI", "GL2")
PER_CU = frozenset({"GLV", "GLK", "GLI"})  # kept once per CU slot ("GLV.0", "GLV.1", ...); GL1 is shared
N_CU = 2  # CUs modelled per XCC (one shader array): slot = xcc * N_CU + cu
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


def l2_name(xcc: int) -> str:
    """The name of XCC `xcc`'s L2 ("GL2" for XCC 0: the only one on single-XCC targets)."""
    return "GL2" if xcc == 0 else f"GL2.{xcc}"


def on_slot(levels: tuple, slot: int) -> tuple:
    """A path with its per-CU levels named for CU slot `slot` and its GL2 for that slot's XCC."""
    return tuple(f"{x}.{slot}" if x in PER_CU else l2_name(slot // N_CU) if x == "GL2" else x for x in levels)


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
        # report mode, happens-before (coherence.order): the epoch (agent, clock) of the access that filled each
        # line, and (GL2) of the stores that dirtied it (agent MULTI: several agents; -1: clean or unknown)
        self.f_agent = np.full(n, -1, np.int32)
        self.f_clock = np.zeros(n, np.int64)
        self.w_agent = np.full(n, -1, np.int32) if write_back else None
        self.w_clock = np.zeros(n, np.int64) if write_back else None
        # a copy a packet's invalidate dropped keeps its bytes and the invalidate's epoch (g_*): a reader the
        # invalidate is not ordered before could still have met it. GL2: bytes a packet's write-back cleaned keep
        # the write-back's epoch (b_*) and their stores' (s_*): a reader around GL2 it is not ordered before, or a
        # release, could still have met them dirty
        self.g_agent = np.full(n, -1, np.int32)
        self.g_clock = np.zeros(n, np.int64)
        if write_back:
            self.b_agent = np.full(n, -1, np.int32)
            self.b_clock = np.zeros(n, np.int64)
            self.s_agent = np.full(n, -1, np.int32)
            self.s_clock = np.zeros(n, np.int64)
            self.b_writer = np.full(n, -1, np.int32)
            self.b_bytes = np.zeros(n * LINE, bool)  # which bytes of a line with a write-back ghost it cleaned

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
            lv = self.levels[name] = Lines(self.size, base(name) == "GL2")
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

    # -- happens-before (report mode) ---------------------------------------------------------------------

    def hb_now(self) -> tuple[dict, int, int]:
        """(clock, agent, counter) of whoever accesses memory now: an end-of-pipe action being performed, a
        dispatch (its launch clock), a queue's command processor (or its CP DMA), else the host."""
        order = self.order
        if order.context is not None:
            return order.context
        a = self.agent
        if a is None:
            return order.host, HOST, order.host[HOST]
        if a.kind == "dispatch":
            e = a.hb_epoch
            if e is not None:
                return e
            a = a.queue
        q = a if a.kind == "queue" else a.queue
        vc = order.clock(q)
        qid = q.hb_ids[0]
        return vc, qid, vc[qid]

    def hb_snapshot(self) -> dict:
        """A copy of the current accessor's clock (what an interrupt raised now carries to the host)."""
        return dict(self.hb_now()[0])

    def acquired(self, queue, address: int) -> None:
        """`queue` observed the dword at `address` (a wait satisfied, a poll passed): it acquires its writer's clock."""
        if not self.hb:
            return
        try:
            cur = AddressSpace.read(self.gpu.memory, address & ~3, 4)
        except Exception:  # an unmapped address faults elsewhere; nothing is learnt here
            cur = None
        self.order.observe(self.order.clock(queue), address, cur)

    def end_of_pipe(self, queue, action):
        """`action` (a RELEASE_MEM's work) queued now, performed once earlier dispatches finished: it runs with the
        clock it has now, covering every dispatch launched before it."""
        if not self.hb:
            return action
        ctx = self.order.end_of_pipe(queue, queue.launched)
        order = self.order

        def run():
            saved, order.context = order.context, ctx
            try:
                action()
            finally:
                order.context = saved
        return run

    def _published(self, address: int, data: np.ndarray) -> None:
        """An engine's small write (a signal, a fence, a flag): a release of the writer's clock."""
        vc, _, _ = self.hb_now()
        self.order.store(address, data.tobytes(), vc)
        a = self.agent
        if self.order.context is None and a is not None and a.kind != "dispatch":
            self.order.tick(a if a.kind == "queue" else a.queue)

    def _hb_filter(self, agents: np.ndarray, clocks: np.ndarray) -> np.ndarray:
        """Per event: covered by the current accessor's clock."""
        return Order.covered(self.order.array(self.hb_now()[0]), agents, clocks)

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

    # -- partial-flush bookkeeping (report mode) ----------------------------------------------------------

    def launched(self, queue, dispatch) -> None:
        """A dispatch starts: it may overlap every dispatch of its queue launched since the last partial flush."""
        if self.hb and dispatch is not None:
            dispatch.hb_epoch = self.order.launched(queue, dispatch.seq)
        if not self.reporting or dispatch is None:
            return
        peers = list(queue.unfenced)
        self.footprints[dispatch] = (set(), set(), peers)
        for p in peers:
            fp = self.footprints.get(p)
            if fp is not None:
                fp[2].append(dispatch)
        queue.unfenced = peers + [dispatch]

    def drained(self, queue) -> None:
        """CS_PARTIAL_FLUSH (or an AQL barrier): later work of the queue is ordered after its earlier dispatches."""
        if self.hb:
            self.order.drained(queue, queue.launched)
        for d in queue.unfenced:
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
        for d in queue.unfenced:
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
