"""SDWA (GFX9 sub-dword addressing): VOP1/VOP2/VOPC sources read a byte or word of a register, and the
result lands in a byte or word of the destination.

Source selects (SRCn_SEL): BYTE_0..3, WORD_0/1, DWORD; the selected bits are zero- or (SEXT) sign-extended to
32 bits before the operation reads them. DST_SEL places the result's low bits; DST_UNUSED says what the rest
of the destination becomes: 0 zeros (PAD), 1 the sign of the placed part (SEXT), 2 unchanged (PRESERVE).
"""
from __future__ import annotations

import numpy as np

U32 = np.uint32
_SHIFT_BITS = {0: (0, 8), 1: (8, 8), 2: (16, 8), 3: (24, 8), 4: (0, 16), 5: (16, 16), 6: (0, 32)}


def select(raw: np.ndarray, sel: int, sext: bool) -> np.ndarray:
    """uint32 [...] -> the selected byte/word/dword as a zero- or sign-extended uint32."""
    shift, bits = _SHIFT_BITS[sel]
    if bits == 32:
        return raw
    part = (raw >> U32(shift)) & U32((1 << bits) - 1)
    if sext:
        sign = U32(1 << (bits - 1))
        part = ((part ^ sign) - sign).astype(U32)
    return part


def place(result: np.ndarray, old: np.ndarray, sel: int, unused: int) -> np.ndarray:
    """The destination dword: the result's low bits at DST_SEL, the rest per DST_UNUSED."""
    shift, bits = _SHIFT_BITS[sel]
    if bits == 32:
        return result
    mask = U32(((1 << bits) - 1) << shift)
    part = (result << U32(shift)) & mask
    if unused == 2:
        return (old & ~mask) | part
    if unused == 1:  # the placed part's sign bit fills the bits above it
        top = shift + bits
        negative = ((part >> U32(top - 1)) & U32(1)).astype(bool)
        fill = U32((0xFFFFFFFF << top) & 0xFFFFFFFF) if top < 32 else U32(0)
        return np.where(negative, part | fill, part)
    return part
