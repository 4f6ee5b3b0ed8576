"""The state of the caches: the levels and their names per family, and per mapping a `MapState` holding each level's
`Lines` (valid, dirty, the bytes, and per line the epochs of the access that filled it and the store that dirtied
it). The cache model (coherence.model) moves bytes through them."""
from __future__ import annotations

import numpy as np

from ..memory import Mapping, host_view

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
