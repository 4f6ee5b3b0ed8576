"""The wave's float mode (the MODE hardware register): denormal flushing, and the bits hcqsim refuses.

MODE[3:0] FP_ROUND (f32 [1:0], f16/f64 [3:2]; 0 = nearest even), MODE[7:4] FP_DENORM (f32 [5:4], f16/f64
[7:6]; 0 flush inputs and results, 1 flush results, 2 flush inputs, 3 keep both), MODE[8] DX10_CLAMP,
MODE[9] IEEE. A dispatch starts with RSRC1.FLOAT_MODE / DX10_CLAMP / IEEE_MODE (HARDWARE_FACTS 4.2);
`s_denorm_mode`, `s_round_mode` and `s_setreg*` of HW_REG_MODE change it per wave.

Denormal flushing is emulated: a flushed denormal becomes a zero of the same sign, per wave, for the float
sources and results of the VALU operations compiled from the `alu` tables (`FLUSH_EXEMPT` lists those that do
not flush; moves and selects are bit operations). Compares (class tests included), the division helpers
v_div_scale / v_div_fmas and packed math do not flush. Directed rounding is not emulated: a
wave that selects a round mode other than nearest-even stops with a fault naming the instruction, and so
does a write to the DX10_CLAMP or IEEE bits (the instruction compiler bakes both in).
"""
from __future__ import annotations

import numpy as np

from . import fpmath

DENORM_KEEP = 0xF  # FP_DENORM value with denormals kept for every type: no flushing anywhere
ROUND_MASK, DENORM_SHIFT, DX10_BIT, IEEE_BIT = 0xF, 4, 8, 9
FLUSH_EXEMPT = frozenset({"v_frexp_mant_f32", "v_frexp_exp_i32_f32"})


def initial_mode(rsrc1: int) -> int:
    """MODE at wave launch from COMPUTE_PGM_RSRC1: FLOAT_MODE [19:12], DX10_CLAMP [21], IEEE_MODE [23]."""
    return (rsrc1 >> 12) & 0xFF | ((rsrc1 >> 21) & 1) << DX10_BIT | ((rsrc1 >> 23) & 1) << IEEE_BIT


def _denorm_field(typ: str) -> int:
    return 0 if typ == "f32" else 2  # the f32 field, or the shared f16/f64 one


def flushes_inputs(mode: np.ndarray, typ: str) -> np.ndarray:
    """bool [waves]: the waves whose mode flushes denormal sources of this float type (values 0 and 2)."""
    field = (mode >> np.uint32(DENORM_SHIFT + _denorm_field(typ))) & np.uint32(3)
    return (field & np.uint32(1)) == 0


def flushes_results(mode: np.ndarray, typ: str) -> np.ndarray:
    """bool [waves]: the waves whose mode flushes denormal results of this float type (values 0 and 1)."""
    field = (mode >> np.uint32(DENORM_SHIFT + _denorm_field(typ))) & np.uint32(3)
    return (field & np.uint32(2)) == 0


def flush(x, waves: np.ndarray):
    """x with denormals replaced by zeros of their sign in the selected waves (bool [waves]); x is an array
    [waves, lanes] or [waves, 1], or a constant."""
    x = np.asarray(x)
    if not waves.any():
        return x
    denormal = fpmath.is_denormal(x)
    if not denormal.any():
        return x
    if x.ndim == 0:
        x = np.broadcast_to(x, (waves.shape[0], 1))
        denormal = np.broadcast_to(denormal, x.shape)
    hit = denormal & waves.reshape((-1,) + (1,) * (x.ndim - 1))
    return np.where(hit, np.copysign(x.dtype.type(0), x), x).astype(x.dtype, copy=False)


def check_writable(new_mode: int, old_mode: int, where: str) -> None:
    """Refuse MODE values hcqsim cannot execute (raised as a fault of the instruction that set them)."""
    from .operands import ShaderFault
    if new_mode & ROUND_MASK:
        raise ShaderFault(f"{where}: round mode 0x{new_mode & ROUND_MASK:x} (not round-to-nearest-even) is not "
                          f"emulated")
    if (new_mode ^ old_mode) & (1 << DX10_BIT | 1 << IEEE_BIT):
        raise ShaderFault(f"{where}: changing MODE.DX10_CLAMP / MODE.IEEE inside a kernel is not emulated")
