"""DPP: data-parallel primitives, src0 read from another lane of the same wave.

A DPP16 control dword (src0 operand 250) holds the real src0 VGPR [7:0], DPP_CTRL [16:8], FI [18] (fetch
from inactive lanes), BOUND_CTRL [19], src0/src1 neg/abs [23:20], BANK_MASK [27:24], ROW_MASK [31:28].
DPP8 (operands 233 / 234 = with FI) holds src0 [7:0] and eight 3-bit lane selects [31:8], per group of 8.

Per lane, `select` says which lane src0 comes from and whether that lane exists for the control; a lane
whose row (lane / 16) is off in ROW_MASK or whose bank ((lane / 4) % 4) is off in BANK_MASK is not written.
A source lane that does not exist or is inactive (without FI) reads 0 when BOUND_CTRL is set and disables
the lane's write otherwise (RDNA3 and GFX9 ISA, DPP chapter). DPP8 reads 0 from such lanes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class DppPlan:
    src0: int  # the real src0 VGPR number
    source: np.ndarray  # int64 [lanes]: source lane per lane
    exists: np.ndarray  # bool [lanes]: the control names a lane of this wave
    writable: np.ndarray  # bool [lanes]: row/bank masks allow the write
    fetch_inactive: bool
    bound_zero: bool  # a missing source reads 0 (else the lane is not written)
    neg: tuple[bool, bool] = (False, False)
    abs: tuple[bool, bool] = (False, False)

    def apply(self, W, w, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(src0 per lane, lanes allowed to write) for the selected waves; values are [nw, lanes]."""
        active = W.exec_lanes(w)
        valid = self.exists[None, :] & (True if self.fetch_inactive else active[:, self.source])
        moved = np.take(values, self.source, axis=1)
        moved = np.where(valid, moved, 0).astype(values.dtype)
        write = np.broadcast_to(self.writable[None, :], active.shape)
        if not self.bound_zero:
            write = write & valid
        return moved, write


def _ctrl16(ctrl: int, lanes: int, gfx9: bool) -> tuple[np.ndarray, np.ndarray]:
    lane = np.arange(lanes)
    row, idx = lane & ~15, lane & 15
    if ctrl <= 0xFF:  # quad_perm
        sel = np.array([(ctrl >> (2 * (i & 3))) & 3 for i in range(lanes)])
        return (lane & ~3) | sel, np.ones(lanes, bool)
    if 0x101 <= ctrl <= 0x10F:  # row_shl: lane reads lane + n within its row
        n = ctrl & 0xF
        return lane + n, idx + n < 16
    if 0x111 <= ctrl <= 0x11F:  # row_shr
        n = ctrl & 0xF
        return lane - n, idx - n >= 0
    if 0x121 <= ctrl <= 0x12F:  # row_ror
        n = ctrl & 0xF
        return row | ((idx - n) & 15), np.ones(lanes, bool)
    if ctrl == 0x140:  # row_mirror
        return row | (15 - idx), np.ones(lanes, bool)
    if ctrl == 0x141:  # row_half_mirror
        return (lane & ~7) | (7 - (lane & 7)), np.ones(lanes, bool)
    if gfx9:
        if ctrl == 0x130:  # wave_shl1
            return lane + 1, lane + 1 < lanes
        if ctrl == 0x134:  # wave_rol1
            return (lane + 1) % lanes, np.ones(lanes, bool)
        if ctrl == 0x138:  # wave_shr1
            return lane - 1, lane >= 1
        if ctrl == 0x13C:  # wave_ror1
            return (lane - 1) % lanes, np.ones(lanes, bool)
        if ctrl == 0x142:  # row_bcast:15: row r (r > 0) reads lane 15 of row r-1
            return row - 1, (lane >> 4) > 0
        if ctrl == 0x143:  # row_bcast:31: rows 2 and 3 read lane 31
            return np.full(lanes, 31), (lane >> 4) >= 2
        if 0x150 <= ctrl <= 0x15F:  # row_newbcast:n (gfx90a+; the only control of 64-bit DPP): lane n of the row
            return row | (ctrl & 0xF), np.ones(lanes, bool)
    else:
        if 0x150 <= ctrl <= 0x15F:  # row_share: every lane reads lane n of its row
            return row | (ctrl & 0xF), np.ones(lanes, bool)
        if 0x160 <= ctrl <= 0x16F:  # row_xmask: lane ^ n within the row
            return row | (idx ^ (ctrl & 0xF)), np.ones(lanes, bool)
    raise ValueError(f"DPP_CTRL 0x{ctrl:x} is reserved")


def plan16(dword: int, lanes: int, gfx9: bool) -> DppPlan:
    ctrl = (dword >> 8) & 0x1FF
    source, exists = _ctrl16(ctrl, lanes, gfx9)
    source = np.where(exists, source, 0).astype(np.int64)
    lane = np.arange(lanes)
    row_mask, bank_mask = (dword >> 28) & 0xF, (dword >> 24) & 0xF
    writable = (((row_mask >> (lane >> 4)) & 1) & ((bank_mask >> ((lane >> 2) & 3)) & 1)).astype(bool)
    return DppPlan(dword & 0xFF, source, exists.astype(bool), writable, bool(dword >> 18 & 1),
                   bool(dword >> 19 & 1), (bool(dword >> 20 & 1), bool(dword >> 22 & 1)),
                   (bool(dword >> 21 & 1), bool(dword >> 23 & 1)))


def plan8(dword: int, lanes: int, fetch_inactive: bool) -> DppPlan:
    lane = np.arange(lanes)
    sel = np.array([(dword >> (8 + 3 * (i & 7))) & 7 for i in range(lanes)])
    return DppPlan(dword & 0xFF, ((lane & ~7) | sel).astype(np.int64), np.ones(lanes, bool),
                   np.ones(lanes, bool), fetch_inactive, True)
