"""The register state of a batch of waves, held as numpy arrays so one instruction runs for many waves.

Layout:
* `s`   uint32 [waves, 128]: the scalar operand space 0..127 indexed by operand number (s0..s105, VCC_LO/HI,
        TTMPs, NULL, M0, EXEC_LO/HI), so an SALU operand number is directly a column.
* `v`   uint32 [waves, vgprs, lanes]: the VGPRs the kernel allocated, stored register-major ([vgprs, waves, lanes]
        in memory, `v` a transposed view), so one register of every wave, `v[:, r]`, is one contiguous block: numpy
        then runs a register operand as one loop instead of one short loop per wave.
* `scc` bool [waves]; `pc` int64 [waves] (byte address); `alive`, `at_barrier` bool [waves].
* `group` int64 [waves]: index of the wave's workgroup in the batch (its LDS slice).
* `lds` uint8 [groups, lds_bytes].

Selections of waves (`w`) are either a slice (`slice(None)`: every wave; a slice of consecutive waves when a large
batch runs in chunks, core._run_chunked: numpy views, no gathers) or an index array.
"""
from __future__ import annotations

import functools
import sys

import numpy as np

from . import fast
from . import formats as fm

VCC, EXEC, M0, NULL = fm.VCC_LO, fm.EXEC_LO, fm.M0, fm.NULL
_LITTLE = sys.byteorder == "little"  # masks pack and unpack as the bytes of their dwords
_ALL = slice(None)
_LANES32 = np.arange(32, dtype=np.uint32)
_LANES32.flags.writeable = False


@functools.lru_cache(maxsize=4)
def _lane_constants(lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """Lane numbers and their mask bits, uint64 [lanes] each: made once per wave size, read-only (every Waves of
    that size shares them)."""
    ids = np.arange(lanes, dtype=np.uint64)
    bits = (np.uint64(1) << ids).astype(np.uint64)
    ids.flags.writeable = bits.flags.writeable = False
    return ids, bits


class Waves:
    def __init__(self, n: int, lanes: int, vgprs: int, groups: int, lds_bytes: int):
        self.n, self.lanes, self.vgprs = n, lanes, vgprs
        self.s = np.zeros((n, 128), np.uint32)
        self.v = np.zeros((vgprs, n, lanes), np.uint32).transpose(1, 0, 2)
        self.scc = np.zeros(n, bool)
        self.pc = np.zeros(n, np.int64)
        self.alive = np.ones(n, bool)
        self.at_barrier = np.zeros(n, bool)
        self.group = np.zeros(n, np.int64)
        self.lds = np.zeros((groups, max(lds_bytes, 4)), np.uint8)
        self.lane_ids, self.lane_bits = _lane_constants(lanes)
        self._exec_cache = None
        self._exec_all: bool | None = None  # whether every lane of the cached EXEC is on (fast path; None: not known)
        self.mode = np.full(n, 0x3F0, np.uint32)  # MODE (fpmode): denormals kept, DX10 clamp, IEEE; launch sets it
        self.flushing = False  # some wave flushes denormals: float operations must look at `mode`
        self.scratch_base: np.ndarray | None = None  # uint64 [waves]: each wave's private segment
        self.scratch_lane = 0  # bytes of private segment per lane

    def set_mode(self, w, mode) -> None:
        """MODE <- mode for the selected waves (fpmode checks what hcqsim can execute before this)."""
        self.mode[w] = mode
        self.flushing = bool((((self.mode >> np.uint32(4)) & np.uint32(0xF)) != np.uint32(0xF)).any())

    # -- masks -------------------------------------------------------------------------------------

    def mask64(self, w, reg: int) -> np.ndarray:
        """A lane mask held in SGPRs (EXEC, VCC or a compare result) as uint64 [nw]."""
        lo = self.s[w, reg].astype(np.uint64)
        if self.lanes == 32:
            return lo
        return lo | (self.s[w, reg + 1].astype(np.uint64) << np.uint64(32))

    def lanes_of(self, w, reg: int) -> np.ndarray:
        """bool [nw, lanes]: the bits of a lane mask register."""
        if _LITTLE:  # the register's dwords as bytes, unpacked low bit first: lane i is bit i
            dwords = np.ascontiguousarray(self.s[w, reg:reg + self.lanes // 32])
            return np.unpackbits(dwords.view(np.uint8), axis=1, bitorder="little").view(bool)
        return (self.mask64(w, reg)[:, None] & self.lane_bits) != 0

    def lane_bits_u32(self, w, reg: int) -> np.ndarray:
        """uint32 [nw, lanes] 0 / 1: the bits of a lane mask register, `lanes_of(w, reg).astype(uint32)` for
        wave32 with two numpy operations instead of an unpack (fast path)."""
        if self.lanes == 32 and fast.enabled:
            return (self.s[w, reg][:, None] >> _LANES32) & np.uint32(1)
        return self.lanes_of(w, reg).astype(np.uint32)

    def exec_lanes(self, w) -> np.ndarray:
        """EXEC as bool [nw, lanes]; cached for the whole batch until EXEC is written (a slice of waves reads
        the cached rows, or its own rows when there is no cache)."""
        if w.__class__ is slice:
            cache = self._exec_cache
            if w == _ALL:
                if cache is None:
                    cache = self._exec_cache = self.lanes_of(w, EXEC)
                return cache
            return cache[w] if cache is not None else self.lanes_of(w, EXEC)
        return self.lanes_of(w, EXEC)

    def exec_written(self) -> None:
        self._exec_cache = self._exec_all = None

    def all_lanes(self, lanes: np.ndarray) -> bool:
        """`lanes.all()`; for the cached EXEC of the whole batch (fast path) worked out once per EXEC value."""
        if lanes is self._exec_cache and fast.enabled:
            if self._exec_all is None:
                self._exec_all = bool(lanes.all())
            return self._exec_all
        return bool(lanes.all())

    def set_mask(self, w, reg: int, lanes: np.ndarray) -> None:
        """Write bool [nw, lanes] as a lane mask into SGPR reg (and reg+1 for wave64)."""
        if reg in (EXEC, EXEC + 1):
            self._exec_cache = self._exec_all = None
        if _LITTLE:  # lane i -> bit i, packed into the register's dwords
            dwords = np.packbits(lanes, axis=1, bitorder="little").view(np.uint32)
            self.s[w, reg:reg + self.lanes // 32] = dwords
            return
        bits = (lanes.astype(np.uint64) * self.lane_bits).sum(axis=1, dtype=np.uint64)
        self.s[w, reg] = (bits & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        if self.lanes == 64:
            self.s[w, reg + 1] = (bits >> np.uint64(32)).astype(np.uint32)

    # -- writes ------------------------------------------------------------------------------------

    def write_v(self, w, reg: int, value, lanes: np.ndarray) -> None:
        """VGPR reg <- value in the given lanes (bool [nw, lanes]); other lanes keep their value."""
        if reg >= self.vgprs:
            raise IndexError(reg)
        old = self.v[w, reg]
        self.v[w, reg] = np.where(lanes, np.asarray(value, dtype=np.uint32) if not isinstance(value, np.ndarray)
                                  or value.dtype != np.uint32 else value, old)
