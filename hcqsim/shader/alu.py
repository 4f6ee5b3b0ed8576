"""Scalar and vector ALU semantics, as tables of numpy functions keyed by LLVM mnemonic.

Length: the tables hold one entry per implemented ALU opcode with the small helpers their entries use; it is
the semantic reference of the instruction set and grows with it, so it stays one table.

VALU entries: mnemonic -> (result type, source types, function). The executor reads each source as its type
(a numpy array broadcastable to [waves, lanes]), calls the function, and writes the result in the
destination's type. Types: b32 u32 i32 f32, b16 u16 i16 f16, b64 u64 i64 f64 (b = raw bits, unsigned).
Float arithmetic is IEEE round-to-nearest-even with denormals kept (the mode LLVM requests; other modes are
rejected at dispatch). Transcendentals (rcp, rsq, sqrt, exp, log, sin, cos) are computed correctly rounded
where the hardware approximates to ~1 ulp. Fused multiply-adds are correctly rounded (`fpmath.fma`); min/max
follow the IEEE-mode rules (`fpmath.vmin`/`vmax`: -0 < +0, signalling NaNs quieted).

SALU entries: mnemonic -> function(a, b) -> (result, scc or None) on uint32 / uint64 arrays [waves].
Compares: mnemonic -> (type, predicate).
"""
from __future__ import annotations

import numpy as np

from . import fpmath, transcendental
from .fpmath import vmax, vmax3, vmed3, vmin, vmin3

U32, I32, F32, U64, I64, F64 = np.uint32, np.int32, np.float32, np.uint64, np.int64, np.float64
U16, I16, F16 = np.uint16, np.int16, np.float16
DTYPES = {"b32": U32, "u32": U32, "i32": I32, "f32": F32, "b16": U16, "u16": U16, "i16": I16, "f16": F16,
          "b64": U64, "u64": U64, "i64": I64, "f64": F64}
WIDTH = {t: np.dtype(d).itemsize * 8 for t, d in DTYPES.items()}


_fma = fpmath.fma


def _sh32(x):
    return (np.asarray(x).astype(U32) & U32(31))


def _sh64(x):
    return (np.asarray(x).astype(U64) & U64(63))


def _bfe_u32(x, off, width):
    off, width = _sh32(off), np.asarray(width).astype(U32) & U32(31)
    out = (x >> off) & ((U64(1) << width.astype(U64)).astype(U64) - U64(1)).astype(U32)
    return np.where(width == 0, U32(0), out)


def _bfe_i32(x, off, width):
    """v_bfe_i32: (S0.i32 >> offset) arithmetically, then the low `width` bits sign-extended."""
    off, width = _sh32(off), np.asarray(width).astype(U32) & U32(31)
    shifted = (x.view(I32) if x.dtype == U32 else x.astype(I32)).astype(I64) >> off.astype(I64)
    mask = (I64(1) << width.astype(I64)) - 1
    u = shifted & mask
    sign = I64(1) << np.maximum(width.astype(I64) - 1, 0)
    return np.where(width == 0, 0, (u ^ sign) - sign).astype(I32)


def _cvt_f32_to_int(x, dtype):
    info = np.iinfo(dtype)
    with np.errstate(invalid="ignore"):
        t = np.trunc(x.astype(F64))
    return np.where(np.isnan(t), 0, np.clip(t, info.min, info.max)).astype(dtype)


def _mul_hi_u32(a, b):
    return ((a.astype(U64) * b.astype(U64)) >> U64(32)).astype(U32)


def _mul_hi_i32(a, b):
    return ((a.astype(I64) * b.astype(I64)) >> I64(32)).astype(U32)


def _med3(a, b, c):
    return np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))


def _f(fn):
    """Float op with numpy's floating-point warnings silenced (hardware raises no traps by default)."""
    def wrapped(*args):
        with np.errstate(all="ignore"):
            return fn(*args)
    return wrapped


def _perm_b32(hi, lo, sel):
    """v_perm_b32: each result byte picks a byte of {S0, S1} (S0 most significant), a sign fill or 0x00/0xFF."""
    data = hi.astype(U64) << U64(32) | lo.astype(U64)
    out = np.zeros(np.broadcast(hi, lo, sel).shape, U32)
    for k in range(4):
        s_ = (sel >> U32(8 * k)) & U32(0xFF)
        byte = (data >> (np.minimum(s_, 7).astype(U64) * U64(8))) & U64(0xFF)
        sign_of = {8: 1, 9: 3, 10: 5, 11: 7}
        b = np.where(s_ <= 7, byte, 0)
        for code, src in sign_of.items():
            b = np.where(s_ == code, np.where((data >> U64(8 * src + 7)) & U64(1), 0xFF, 0), b)
        b = np.where(s_ == 12, 0, np.where(s_ >= 13, 0xFF, b))
        out |= b.astype(U32) << U32(8 * k)
    return out


def _ldexp(a, e):
    """a * 2^e rounded once: scaled exactly in float64 (exponents clipped to where the result is 0 or inf)."""
    lim = 2100 if a.dtype == F64 else 400
    if a.dtype == F64:
        return np.ldexp(a, np.clip(np.asarray(e).astype(np.int64), -lim, lim).astype(np.int32))
    return np.ldexp(a.astype(F64), np.clip(np.asarray(e).astype(np.int64), -lim, lim).astype(np.int32)).astype(a.dtype)


def _cls(a, bits):
    """v_cls_i32 / s_cls_i32: the position, counted from the MSB, of the first bit that differs from the sign
    bit (1 for 0x40000000 and 0xBFFFFFFF); -1 when every bit equals the sign bit."""
    a = np.asarray(a)
    u = a.view(U32 if bits == 32 else U64) if a.dtype.itemsize * 8 == bits else a.astype(U32 if bits == 32 else U64)
    neg = (u >> (U32(31) if bits == 32 else U64(63))) != 0
    x = np.where(neg, ~u, u)
    return np.where(x == 0, U32(0xFFFFFFFF), _clz(x, bits))


def _mul_hi_i32_i24(a, b):
    s24 = lambda x: ((x.astype(I32) << 8) >> 8).astype(I64)
    return ((s24(a) * s24(b)) >> I64(32)).astype(U32)


def saturator(typ: str):
    """Integer clamp: an exact (int64) result saturated to the range of `typ`."""
    info = np.iinfo(DTYPES[typ])
    return lambda v: np.clip(v, info.min, info.max).astype(DTYPES[typ])


def _alignbyte(a, b, s):
    return ((a.astype(U64) << U64(32) | b.astype(U64)) >> ((s.astype(U64) & U64(3)) * U64(8))).astype(U32)


def _f32_to_f16_rtz(x):
    """f32 -> f16 rounded toward zero (v_cvt_pk_rtz_f16_f32): the nearest-even result, stepped back toward
    zero where it rounded away (overflow saturates at the largest finite half, NaN stays NaN)."""
    with np.errstate(all="ignore"):
        r = fpmath.f32_to_f16(x)
        away = np.abs(r.astype(F64)) > np.abs(x.astype(F64))
        r = np.where(away & ~np.isnan(x), np.nextafter(r, F16(0)), r)
    return r.astype(F16)


def _to_norm(x, signed: bool):
    """f32_to_snorm / f32_to_unorm: clamp to [-1, 1] ([0, 1]), scale by 32767 (65535), round to nearest even
    (exact: the scaled value is formed in float64); NaN gives 0."""
    lo, scale, dt = (-1.0, 32767.0, I16) if signed else (0.0, 65535.0, U16)
    with np.errstate(invalid="ignore"):  # a signalling NaN raises "invalid" in the f32 -> f64 conversion
        x = np.asarray(x).astype(F64)
        v = np.rint(np.clip(x, lo, 1.0) * scale)
    return np.where(np.isnan(x), 0, v).astype(dt)


def _to_u8(x):
    """f32_to_u8 (v_cvt_pk_u8_f32): round to nearest even, saturate to [0, 255], NaN gives 0."""
    with np.errstate(invalid="ignore"):  # a signalling NaN raises "invalid" in the f32 -> f64 conversion
        x = np.asarray(x).astype(F64)
        v = np.clip(np.rint(x), 0, 255)
    return np.where(np.isnan(x), 0, v).astype(U32)


def _pk_u8(x, sel, old):
    shift = (sel & U32(3)) * U32(8)
    return (old & ~(U32(0xFF) << shift)) | (_to_u8(x) << shift)


def _pack16(lo, hi):
    return np.asarray(lo).view(U16).astype(U32) | np.asarray(hi).view(U16).astype(U32) << U32(16)


def _sat(x, dtype):
    info = np.iinfo(dtype)
    return np.clip(np.asarray(x).astype(I64), info.min, info.max).astype(dtype)


def _sad_bytes(a, b, c, masked=False, hi=False):
    total = c.astype(U64)
    for k in range(4):
        x, y = (a >> U32(8 * k)) & U32(0xFF), (b >> U32(8 * k)) & U32(0xFF)
        d = np.where(x > y, x - y, y - x).astype(U64)
        if masked:  # v_msad_u8: reference bytes of zero do not count
            d = np.where(y == 0, U64(0), d)
        total = total + (d << U64(16) if hi else d)
    return (total & U64(0xFFFFFFFF)).astype(U32)


def _sad_u16(a, b, c):
    total = c.astype(U64)
    for k in (0, 16):
        x, y = (a >> U32(k)) & U32(0xFFFF), (b >> U32(k)) & U32(0xFFFF)
        total = total + np.where(x > y, x - y, y - x).astype(U64)
    return (total & U64(0xFFFFFFFF)).astype(U32)


def _lerp_u8(a, b, c):
    out = np.zeros(np.broadcast(a, b, c).shape, U32)
    for k in range(4):
        sh = U32(8 * k)
        x, y, r = (a >> sh) & U32(0xFF), (b >> sh) & U32(0xFF), (c >> sh) & U32(1)
        out |= (((x + y + r) >> U32(1)) & U32(0xFF)) << sh
    return out


def _frexp_mant(a):
    """v_frexp_mant: the mantissa in [0.5, 1) with S0's sign; +-inf and NaN are S0 itself (the pseudocode's
    `D0 = S0`: a signalling NaN stays signalling, whatever numpy's frexp makes of it on this CPU)."""
    m = np.frexp(a)[0].astype(a.dtype)
    return np.where(np.isinf(a) | np.isnan(a), a, m)


def _frexp_exp(a, dtype):
    e = np.frexp(a)[1]
    return np.where(np.isinf(a) | np.isnan(a), 0, e).astype(dtype)


_SIN_QUARTERS = np.array([0.0, 1.0, 0.0, -1.0])  # sin / cos at 0, 1/4, 1/2, 3/4 of a turn: exact values
_COS_QUARTERS = np.array([1.0, 0.0, -1.0, 0.0])


def _turns(a, sine: bool):
    """v_sin / v_cos: the operand is in revolutions (full range). It is reduced exactly to its fraction of a
    turn first (x - floor(x) is exact in float64 for every f16/f32 value: any |x| >= 2^24 is a whole number
    of turns), quarter turns give the exact values, the rest sin/cos(2*pi*t) (t's float64 angle) correctly
    rounded to the operand's type (`transcendental`)."""
    x = a.astype(F64)
    t = x - np.floor(x)  # [0, 1); +-inf and NaN give NaN
    q = t * 4
    exact = q == np.floor(q)
    quarters = _SIN_QUARTERS if sine else _COS_QUARTERS
    v = (transcendental.sin_of if sine else transcendental.cos_of)(2 * np.pi * t, a.dtype)
    v = np.where(exact, quarters[np.where(exact, q, 0).astype(np.int64) % 4].astype(a.dtype), v)
    if sine:
        v = np.where(x == 0, a, v)  # sin(+-0) = +-0 (the guide's functional examples)
    return v.astype(a.dtype)


def _fract(a):
    """v_fract: S0 + -floor(S0), clamped below 1.0 (the largest float under 1); +-inf and NaN give NaN."""
    below_one = np.nextafter(a.dtype.type(1), a.dtype.type(0))
    return np.minimum(a + -np.floor(a), below_one).astype(a.dtype)


def _dot_int(a, b, c, width, signed_a, signed_b, count):
    total = c.astype(I64)
    mask = (1 << width) - 1
    for k in range(count):
        x = ((a.astype(U64) >> U64(width * k)) & U64(mask)).astype(I64)
        y = ((b.astype(U64) >> U64(width * k)) & U64(mask)).astype(I64)
        if signed_a:
            x = np.where(x >= 1 << (width - 1), x - (1 << width), x)
        if signed_b:
            y = np.where(y >= 1 << (width - 1), y - (1 << width), y)
        total = total + x * y
    return total


def _dot2_f32_f16(a, b, c):
    """v_dot2_f32_f16: both f16 products and the f32 addend summed exactly, rounded once (the ISA does not
    specify the intermediate rounding; products of halves are exact in float64, the sum of three terms is
    rounded to odd in float64 and then to f32: a correctly rounded result)."""
    p = [((x >> U32(s)) & U32(0xFFFF)).astype(U16).view(F16).astype(F64) for x in (a.view(U32), b.view(U32))
         for s in (0, 16)]
    p0, p1 = p[0] * p[2], p[1] * p[3]
    s01 = fpmath.round_to_odd_sum(p0, p1)  # exact: both products fit 22 bits
    halves = [((x >> U32(s)) & U32(0xFFFF)).astype(U16).view(F16) for x in (a.view(U32), b.view(U32)) for s in (0, 16)]
    # the NaN rule over the real operands, the four halves (S0.lo, S0.hi, S1.lo, S1.hi) and S2
    return fpmath.propagate_nan(fpmath.round_to_odd_sum(s01, c.astype(F64)).astype(F32), *halves, c)



VALU: dict[str, tuple[str, tuple[str, ...], object]] = {
    # moves and selects
    "v_mov_b32": ("b32", ("b32",), lambda a: a),
    "v_cndmask_b32": ("b32", ("b32", "b32", "mask"), lambda a, b, m: np.where(m, b, a)),
    # 32-bit integer
    "v_add_nc_u32": ("u32", ("u32", "u32"), lambda a, b: a + b),
    "v_sub_nc_u32": ("u32", ("u32", "u32"), lambda a, b: a - b),
    "v_subrev_nc_u32": ("u32", ("u32", "u32"), lambda a, b: b - a),
    "v_add_nc_i32": ("i32", ("i32", "i32"), lambda a, b: a + b),
    "v_sub_nc_i32": ("i32", ("i32", "i32"), lambda a, b: a - b),
    "v_add3_u32": ("u32", ("u32", "u32", "u32"), lambda a, b, c: a + b + c),
    "v_mul_lo_u32": ("u32", ("u32", "u32"), lambda a, b: a * b),
    "v_mul_hi_u32": ("u32", ("u32", "u32"), _mul_hi_u32),
    "v_mul_hi_i32": ("u32", ("i32", "i32"), _mul_hi_i32),
    "v_mul_u32_u24": ("u32", ("u32", "u32"), lambda a, b: (a & U32(0xFFFFFF)) * (b & U32(0xFFFFFF))),
    "v_mul_i32_i24": ("i32", ("i32", "i32"), lambda a, b: ((a << 8) >> 8) * ((b << 8) >> 8)),
    "v_mad_u32_u24": ("u32", ("u32", "u32", "u32"), lambda a, b, c: (a & U32(0xFFFFFF)) * (b & U32(0xFFFFFF)) + c),
    "v_mad_i32_i24": ("i32", ("i32", "i32", "i32"), lambda a, b, c: ((a << 8) >> 8) * ((b << 8) >> 8) + c),
    "v_mul_hi_u32_u24": ("u32", ("u32", "u32"), lambda a, b: _mul_hi_u32(a & U32(0xFFFFFF), b & U32(0xFFFFFF))),
    "v_min_u32": ("u32", ("u32", "u32"), np.minimum), "v_max_u32": ("u32", ("u32", "u32"), np.maximum),
    "v_min_i32": ("i32", ("i32", "i32"), np.minimum), "v_max_i32": ("i32", ("i32", "i32"), np.maximum),
    "v_min3_u32": ("u32", ("u32",) * 3, lambda a, b, c: np.minimum(np.minimum(a, b), c)),
    "v_max3_u32": ("u32", ("u32",) * 3, lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_min3_i32": ("i32", ("i32",) * 3, lambda a, b, c: np.minimum(np.minimum(a, b), c)),
    "v_max3_i32": ("i32", ("i32",) * 3, lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_med3_i32": ("i32", ("i32",) * 3, _med3), "v_med3_u32": ("u32", ("u32",) * 3, _med3),
    "v_maxmin_i32": ("i32", ("i32",) * 3, lambda a, b, c: np.minimum(np.maximum(a, b), c)),
    "v_minmax_i32": ("i32", ("i32",) * 3, lambda a, b, c: np.maximum(np.minimum(a, b), c)),
    "v_maxmin_u32": ("u32", ("u32",) * 3, lambda a, b, c: np.minimum(np.maximum(a, b), c)),
    "v_minmax_u32": ("u32", ("u32",) * 3, lambda a, b, c: np.maximum(np.minimum(a, b), c)),
    "v_perm_b32": ("b32", ("b32",) * 3, _perm_b32),
    "v_alignbyte_b32": ("b32", ("b32", "b32", "u32"), _alignbyte),
    "v_cvt_pk_rtz_f16_f32": ("b32", ("f32", "f32"), _f(lambda a, b: _pack16(_f32_to_f16_rtz(a), _f32_to_f16_rtz(b)))),
    "v_cvt_pk_u16_u32": ("b32", ("u32", "u32"), lambda a, b: _pack16(np.minimum(a, U32(0xFFFF)).astype(U16),
                                                                     np.minimum(b, U32(0xFFFF)).astype(U16))),
    "v_cvt_pk_i16_i32": ("b32", ("i32", "i32"), lambda a, b: _pack16(_sat(a, I16), _sat(b, I16))),
    "v_cvt_pk_u16_f32": ("b32", ("f32", "f32"), lambda a, b: _pack16(_cvt_f32_to_int(a, U16), _cvt_f32_to_int(b, U16))),
    "v_cvt_pk_i16_f32": ("b32", ("f32", "f32"), lambda a, b: _pack16(_cvt_f32_to_int(a, I16), _cvt_f32_to_int(b, I16))),
    "v_cvt_pk_norm_i16_f32": ("b32", ("f32", "f32"), lambda a, b: _pack16(_to_norm(a, True), _to_norm(b, True))),
    "v_cvt_pk_norm_u16_f32": ("b32", ("f32", "f32"), lambda a, b: _pack16(_to_norm(a, False), _to_norm(b, False))),
    "v_cvt_pk_norm_i16_f16": ("b32", ("f16", "f16"), lambda a, b: _pack16(_to_norm(a, True), _to_norm(b, True))),
    "v_cvt_pk_norm_u16_f16": ("b32", ("f16", "f16"), lambda a, b: _pack16(_to_norm(a, False), _to_norm(b, False))),
    "v_cvt_pk_u8_f32": ("b32", ("f32", "u32", "u32"), _pk_u8),
    "v_cvt_i32_i16": ("i32", ("i16",), lambda a: a.astype(I32)),
    "v_cvt_u32_u16": ("u32", ("u16",), lambda a: a.astype(U32)),
    "v_mad_u32_u16": ("u32", ("u16", "u16", "u32"), lambda a, b, c: a.astype(U32) * b.astype(U32) + c),
    "v_mad_i32_i16": ("i32", ("i16", "i16", "i32"), lambda a, b, c: a.astype(I32) * b.astype(I32) + c),
    "v_sad_u8": ("u32", ("u32",) * 3, _sad_bytes), "v_sad_hi_u8": ("u32", ("u32",) * 3, lambda a, b, c: _sad_bytes(a, b, c, hi=True)),
    "v_msad_u8": ("u32", ("u32",) * 3, lambda a, b, c: _sad_bytes(a, b, c, masked=True)),
    "v_sad_u16": ("u32", ("u32",) * 3, _sad_u16),
    "v_sad_u32": ("u32", ("u32",) * 3, lambda a, b, c: (np.where(a > b, a - b, b - a) + c).astype(U32)),
    "v_lerp_u8": ("u32", ("u32",) * 3, _lerp_u8),
    "v_sat_pk_u8_i16": ("u16", ("u32",), lambda a: (_sat((a & U32(0xFFFF)).astype(U16).view(I16), np.uint8).astype(U16)
                                                      | _sat((a >> U32(16)).astype(U16).view(I16), np.uint8).astype(U16) << U16(8))),
    "v_cvt_off_f32_i4": ("f32", ("u32",), lambda a: (((a & U32(15)).astype(I32) ^ 8) - 8).astype(F32) / F32(16)),
    "v_dot4_u32_u8": ("u32", ("u32",) * 3, lambda a, b, c: _dot_int(a, b, c, 8, False, False, 4).astype(U32)),
    "v_dot8_u32_u4": ("u32", ("u32",) * 3, lambda a, b, c: _dot_int(a, b, c, 4, False, False, 8).astype(U32)),
    "v_dot2_u32_u16": ("u32", ("u32",) * 3, lambda a, b, c: _dot_int(a, b, c, 16, False, False, 2).astype(U32)),
    "v_dot2_i32_i16": ("u32", ("u32", "u32", "i32"), lambda a, b, c: _dot_int(a, b, c, 16, True, True, 2).astype(U32)),
    "v_dot4_i32_i8": ("u32", ("u32", "u32", "i32"), lambda a, b, c: _dot_int(a, b, c, 8, True, True, 4).astype(U32)),
    "v_dot8_i32_i4": ("u32", ("u32", "u32", "i32"), lambda a, b, c: _dot_int(a, b, c, 4, True, True, 8).astype(U32)),
    "v_dot2_f32_f16": ("f32", ("f32", "f32", "f32"), _f(_dot2_f32_f16)),
    "v_mul_hi_i32_i24": ("u32", ("i32", "i32"), _mul_hi_i32_i24),
    "v_mov_b64": ("b64", ("b64",), lambda a: a),
    "v_and_b32": ("b32", ("b32", "b32"), np.bitwise_and), "v_or_b32": ("b32", ("b32", "b32"), np.bitwise_or),
    "v_xor_b32": ("b32", ("b32", "b32"), np.bitwise_xor),
    "v_xnor_b32": ("b32", ("b32", "b32"), lambda a, b: ~(a ^ b)),
    "v_not_b32": ("b32", ("b32",), np.invert),
    "v_or3_b32": ("b32", ("b32",) * 3, lambda a, b, c: a | b | c),
    "v_and_or_b32": ("b32", ("b32",) * 3, lambda a, b, c: (a & b) | c),
    "v_xor3_b32": ("b32", ("b32",) * 3, lambda a, b, c: a ^ b ^ c),
    "v_lshlrev_b32": ("b32", ("u32", "b32"), lambda s, x: x << _sh32(s)),
    "v_lshrrev_b32": ("b32", ("u32", "b32"), lambda s, x: x >> _sh32(s)),
    "v_ashrrev_i32": ("i32", ("u32", "i32"), lambda s, x: x >> _sh32(s).astype(I32)),
    "v_lshl_or_b32": ("b32", ("b32", "u32", "b32"), lambda x, s, c: (x << _sh32(s)) | c),
    "v_lshl_add_u32": ("u32", ("u32", "u32", "u32"), lambda x, s, c: (x << _sh32(s)) + c),
    "v_add_lshl_u32": ("u32", ("u32", "u32", "u32"), lambda a, b, s: (a + b) << _sh32(s)),
    "v_xad_u32": ("u32", ("u32",) * 3, lambda a, b, c: (a ^ b) + c),
    "v_bfe_u32": ("u32", ("u32", "u32", "u32"), _bfe_u32),
    "v_bfe_i32": ("i32", ("i32", "u32", "u32"), _bfe_i32),
    "v_bfi_b32": ("b32", ("b32",) * 3, lambda m, a, b: (m & a) | (~m & b)),
    "v_alignbit_b32": ("b32", ("b32", "b32", "u32"), lambda a, b, s: (
        ((a.astype(U64) << U64(32) | b.astype(U64)) >> (s.astype(U64) & U64(31))) & U64(0xFFFFFFFF)).astype(U32)),
    "v_bfm_b32": ("b32", ("u32", "u32"), lambda w, o: (((U64(1) << (w & U32(31)).astype(U64)) - U64(1))
                                                       .astype(U32) << _sh32(o))),
    "v_bcnt_u32_b32": ("u32", ("b32", "u32"), lambda a, b: np.bitwise_count(a).astype(U32) + b),
    "v_bfrev_b32": ("b32", ("b32",), lambda a: _bitrev32(a)),
    "v_cvt_f32_ubyte0": ("f32", ("u32",), lambda a: (a & U32(0xFF)).astype(F32)),
    "v_cvt_f32_ubyte1": ("f32", ("u32",), lambda a: ((a >> U32(8)) & U32(0xFF)).astype(F32)),
    "v_cvt_f32_ubyte2": ("f32", ("u32",), lambda a: ((a >> U32(16)) & U32(0xFF)).astype(F32)),
    "v_cvt_f32_ubyte3": ("f32", ("u32",), lambda a: (a >> U32(24)).astype(F32)),
    # 64-bit integer
    "v_lshlrev_b64": ("b64", ("u32", "b64"), lambda s, x: x << _sh64(s)),
    "v_lshrrev_b64": ("b64", ("u32", "b64"), lambda s, x: x >> _sh64(s)),
    "v_ashrrev_i64": ("i64", ("u32", "i64"), lambda s, x: x >> _sh64(s).astype(I64)),
    "v_lshl_add_u64": ("u64", ("u64", "u32", "u64"), lambda x, s, c: (x << (s.astype(U64) & U64(7))) + c),
    # 32-bit float
    "v_add_f32": ("f32", ("f32", "f32"), _f(lambda a, b: a + b)),
    "v_sub_f32": ("f32", ("f32", "f32"), _f(lambda a, b: a - b)),
    "v_subrev_f32": ("f32", ("f32", "f32"), _f(lambda a, b: b - a)),
    "v_mul_f32": ("f32", ("f32", "f32"), _f(lambda a, b: a * b)),
    "v_mul_legacy_f32": ("f32", ("f32", "f32"), _f(lambda a, b: np.where((a == 0) | (b == 0), F32(0), a * b))),
    "v_mul_dx9_zero_f32": ("f32", ("f32", "f32"), _f(lambda a, b: np.where((a == 0) | (b == 0), F32(0), a * b))),
    "v_fma_f32": ("f32", ("f32",) * 3, _fma),
    "v_fmac_f32": ("f32", ("f32", "f32", "f32"), _fma),  # third source is the destination
    "v_fmaak_f32": ("f32", ("f32", "f32", "f32"), _fma),  # third source is the literal K
    "v_fmamk_f32": ("f32", ("f32", "f32", "f32"), _f(lambda a, k, b: _fma(a, k, b))),
    "v_mad_f32": ("f32", ("f32",) * 3, _f(lambda a, b, c: a * b + c)),
    "v_min_f32": ("f32", ("f32", "f32"), vmin), "v_max_f32": ("f32", ("f32", "f32"), vmax),
    "v_min3_f32": ("f32", ("f32",) * 3, vmin3), "v_max3_f32": ("f32", ("f32",) * 3, vmax3),
    "v_med3_f32": ("f32", ("f32",) * 3, vmed3),
    "v_maxmin_f32": ("f32", ("f32",) * 3, lambda a, b, c: vmin(vmax(a, b), c)),
    "v_minmax_f32": ("f32", ("f32",) * 3, lambda a, b, c: vmax(vmin(a, b), c)),
    "v_rcp_f32": ("f32", ("f32",), _f(lambda a: (F32(1) / a).astype(F32))),
    "v_rcp_iflag_f32": ("f32", ("f32",), _f(lambda a: (F32(1) / a).astype(F32))),
    "v_sqrt_f32": ("f32", ("f32",), _f(np.sqrt)),
    "v_rsq_f32": ("f32", ("f32",), _f(lambda a: (F32(1) / np.sqrt(a)).astype(F32))),
    "v_exp_f32": ("f32", ("f32",), _f(transcendental.exp2)), "v_log_f32": ("f32", ("f32",), _f(transcendental.log2)),
    "v_sin_f32": ("f32", ("f32",), _f(lambda a: _turns(a, True))),
    "v_cos_f32": ("f32", ("f32",), _f(lambda a: _turns(a, False))),
    "v_floor_f32": ("f32", ("f32",), _f(np.floor)), "v_ceil_f32": ("f32", ("f32",), _f(np.ceil)),
    "v_trunc_f32": ("f32", ("f32",), _f(np.trunc)), "v_rndne_f32": ("f32", ("f32",), _f(np.rint)),
    "v_fract_f32": ("f32", ("f32",), _f(_fract)),
    "v_ldexp_f32": ("f32", ("f32", "i32"), _f(_ldexp)),
    "v_frexp_mant_f32": ("f32", ("f32",), _f(_frexp_mant)),
    "v_frexp_exp_i32_f32": ("i32", ("f32",), _f(lambda a: _frexp_exp(a, I32))),
    "v_cvt_f32_i32": ("f32", ("i32",), lambda a: a.astype(F32)),
    "v_cvt_f32_u32": ("f32", ("u32",), lambda a: a.astype(F32)),
    "v_cvt_i32_f32": ("i32", ("f32",), lambda a: _cvt_f32_to_int(a, I32)),
    "v_cvt_u32_f32": ("u32", ("f32",), lambda a: _cvt_f32_to_int(a, U32)),
    "v_cvt_floor_i32_f32": ("i32", ("f32",), _f(lambda a: _cvt_f32_to_int(np.floor(a), I32))),
    "v_cvt_nearest_i32_f32": ("i32", ("f32",), _f(lambda a: _cvt_f32_to_int(np.floor(a + F32(0.5)), I32))),
    "v_div_fixup_f32": ("f32", ("f32", "f32", "f32"), fpmath.div_fixup),
    # 16-bit float and integer (unpacked)
    "v_add_f16": ("f16", ("f16", "f16"), _f(lambda a, b: a + b)),
    "v_sub_f16": ("f16", ("f16", "f16"), _f(lambda a, b: a - b)),
    "v_subrev_f16": ("f16", ("f16", "f16"), _f(lambda a, b: b - a)),
    "v_mul_f16": ("f16", ("f16", "f16"), _f(lambda a, b: a * b)),
    "v_fma_f16": ("f16", ("f16",) * 3, _fma), "v_fmac_f16": ("f16", ("f16",) * 3, _fma),
    "v_max_f16": ("f16", ("f16", "f16"), vmax), "v_min_f16": ("f16", ("f16", "f16"), vmin),
    "v_min3_f16": ("f16", ("f16",) * 3, vmin3), "v_max3_f16": ("f16", ("f16",) * 3, vmax3),
    "v_med3_f16": ("f16", ("f16",) * 3, vmed3),
    "v_maxmin_f16": ("f16", ("f16",) * 3, lambda a, b, c: vmin(vmax(a, b), c)),
    "v_minmax_f16": ("f16", ("f16",) * 3, lambda a, b, c: vmax(vmin(a, b), c)),
    "v_min3_i16": ("i16", ("i16",) * 3, lambda a, b, c: np.minimum(np.minimum(a, b), c)),
    "v_max3_i16": ("i16", ("i16",) * 3, lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_min3_u16": ("u16", ("u16",) * 3, lambda a, b, c: np.minimum(np.minimum(a, b), c)),
    "v_max3_u16": ("u16", ("u16",) * 3, lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_med3_i16": ("i16", ("i16",) * 3, _med3), "v_med3_u16": ("u16", ("u16",) * 3, _med3),
    "v_ldexp_f16": ("f16", ("f16", "i16"), _f(_ldexp)),
    "v_fmaak_f16": ("f16", ("f16",) * 3, _fma), "v_fmamk_f16": ("f16", ("f16",) * 3, _fma),
    "v_div_fixup_f16": ("f16", ("f16",) * 3, fpmath.div_fixup),
    "v_subrev_nc_u16": ("u16", ("u16", "u16"), lambda a, b: b - a),
    "v_cvt_f16_f32": ("f16", ("f32",), _f(fpmath.f32_to_f16)),
    "v_cvt_f32_f16": ("f32", ("f16",), _f(lambda a: fpmath.quiet(a.astype(F32)))),
    "v_add_nc_u16": ("u16", ("u16", "u16"), lambda a, b: a + b),
    "v_sub_nc_u16": ("u16", ("u16", "u16"), lambda a, b: a - b),
    "v_mul_lo_u16": ("u16", ("u16", "u16"), lambda a, b: a * b),
    "v_lshlrev_b16": ("b16", ("u16", "b16"), lambda s, x: x << (s & U16(15))),
    "v_lshrrev_b16": ("b16", ("u16", "b16"), lambda s, x: x >> (s & U16(15))),
    "v_pack_b32_f16": ("b32", ("b16", "b16"), lambda a, b: a.astype(U32) | b.astype(U32) << U32(16)),
    "v_and_b16": ("b16", ("b16", "b16"), np.bitwise_and), "v_or_b16": ("b16", ("b16", "b16"), np.bitwise_or),
    "v_xor_b16": ("b16", ("b16", "b16"), np.bitwise_xor), "v_not_b16": ("b16", ("b16",), np.invert),
    "v_mov_b16": ("b16", ("b16",), lambda a: a),
    "v_ashrrev_i16": ("i16", ("u16", "i16"), lambda s, x: x >> (s & U16(15)).astype(I16)),
    "v_max_u16": ("u16", ("u16", "u16"), np.maximum), "v_min_u16": ("u16", ("u16", "u16"), np.minimum),
    "v_max_i16": ("i16", ("i16", "i16"), np.maximum), "v_min_i16": ("i16", ("i16", "i16"), np.minimum),
    "v_add_nc_i16": ("i16", ("i16", "i16"), lambda a, b: a + b), "v_sub_nc_i16": ("i16", ("i16", "i16"), lambda a, b: a - b),
    "v_mad_u16": ("u16", ("u16",) * 3, lambda a, b, c: a * b + c), "v_mad_i16": ("i16", ("i16",) * 3, lambda a, b, c: a * b + c),
    "v_cndmask_b16": ("b16", ("b16", "b16", "mask"), lambda a, b, m: np.where(m, b, a)),
    # bit counts
    "v_clz_i32_u32": ("u32", ("u32",), lambda a: _clz(a, 32)),
    "v_ctz_i32_b32": ("u32", ("u32",), lambda a: _ctz(a, 32)),
    "v_cls_i32": ("u32", ("i32",), lambda a: _cls(a, 32)),
    # more float: rounding and 16/64-bit forms
    "v_fract_f16": ("f16", ("f16",), _f(_fract)),
    "v_frexp_mant_f16": ("f16", ("f16",), _f(_frexp_mant)),
    "v_frexp_exp_i16_f16": ("i16", ("f16",), _f(lambda a: _frexp_exp(a, I16))),
    "v_sin_f16": ("f16", ("f16",), _f(lambda a: _turns(a, True))),
    "v_cos_f16": ("f16", ("f16",), _f(lambda a: _turns(a, False))),
    "v_floor_f16": ("f16", ("f16",), _f(np.floor)), "v_ceil_f16": ("f16", ("f16",), _f(np.ceil)),
    "v_trunc_f16": ("f16", ("f16",), _f(np.trunc)), "v_rndne_f16": ("f16", ("f16",), _f(np.rint)),
    "v_sqrt_f16": ("f16", ("f16",), _f(np.sqrt)), "v_rcp_f16": ("f16", ("f16",), _f(lambda a: (1 / a).astype(F16))),
    "v_rsq_f16": ("f16", ("f16",), _f(lambda a: (1 / np.sqrt(a)).astype(F16))),
    "v_exp_f16": ("f16", ("f16",), _f(transcendental.exp2)), "v_log_f16": ("f16", ("f16",), _f(transcendental.log2)),
    "v_cvt_i16_f16": ("i16", ("f16",), lambda a: _cvt_f32_to_int(a, I16)),
    "v_cvt_u16_f16": ("u16", ("f16",), lambda a: _cvt_f32_to_int(a, U16)),
    "v_cvt_f16_i16": ("f16", ("i16",), lambda a: a.astype(F16)),
    "v_cvt_f16_u16": ("f16", ("u16",), _f(lambda a: a.astype(F16))),  # 65520 and up round to +inf: "overflow"
    "v_max_f64": ("f64", ("f64", "f64"), vmax), "v_min_f64": ("f64", ("f64", "f64"), vmin),
    "v_rcp_f64": ("f64", ("f64",), _f(lambda a: 1 / a)), "v_sqrt_f64": ("f64", ("f64",), _f(np.sqrt)),
    "v_rsq_f64": ("f64", ("f64",), _f(lambda a: 1 / np.sqrt(a))),
    "v_floor_f64": ("f64", ("f64",), _f(np.floor)), "v_ceil_f64": ("f64", ("f64",), _f(np.ceil)),
    "v_trunc_f64": ("f64", ("f64",), _f(np.trunc)), "v_rndne_f64": ("f64", ("f64",), _f(np.rint)),
    "v_fract_f64": ("f64", ("f64",), _f(_fract)),
    "v_ldexp_f64": ("f64", ("f64", "i32"), _f(_ldexp)),
    "v_frexp_mant_f64": ("f64", ("f64",), _f(_frexp_mant)),
    "v_frexp_exp_i32_f64": ("i32", ("f64",), _f(lambda a: _frexp_exp(a, I32))),
    "v_cvt_u32_f64": ("u32", ("f64",), lambda a: _cvt_f32_to_int(a, U32)),
    "v_div_fixup_f64": ("f64", ("f64", "f64", "f64"), fpmath.div_fixup),
    # 64-bit float
    "v_add_f64": ("f64", ("f64", "f64"), _f(lambda a, b: a + b)),
    "v_mul_f64": ("f64", ("f64", "f64"), _f(lambda a, b: a * b)),
    "v_fma_f64": ("f64", ("f64",) * 3, _fma), "v_fmac_f64": ("f64", ("f64",) * 3, _fma),
    "v_cvt_f64_f32": ("f64", ("f32",), _f(lambda a: fpmath.quiet(a.astype(F64)))),
    "v_cvt_f32_f64": ("f32", ("f64",), _f(lambda a: fpmath.quiet(a.astype(F32)))),
    "v_cvt_f64_i32": ("f64", ("i32",), lambda a: a.astype(F64)),
    "v_cvt_f64_u32": ("f64", ("u32",), lambda a: a.astype(F64)),
    "v_cvt_i32_f64": ("i32", ("f64",), lambda a: _cvt_f32_to_int(a, I32)),
}

# Entries whose functions define their NaN results themselves, as the ISA pseudocode does: min/max/med3 (IEEE
# mode's quieting and the architecture's operand order, fpmath.vmin), v_frexp_mant (S0 itself), v_div_fixup (its
# default NaN and S2-before-S1 order), v_dot2_f32_f16 (the rule over its f16 halves). Every other float result
# takes fpmath's NaN rule (propagate_nan): first NaN source quieted, else the default NaN.
OWN_NAN_RULE = frozenset(
    [f"v_{op}_{t}" for op in ("min", "max", "min3", "max3", "med3", "maxmin", "minmax") for t in ("f16", "f32", "f64")]
    + [f"v_frexp_mant_{t}" for t in ("f16", "f32", "f64")] + [f"v_div_fixup_{t}" for t in ("f16", "f32", "f64")]
    + ["v_dot2_f32_f16"])
for _name, (_out_t, _in_ts, _fn) in list(VALU.items()):
    if _out_t[0] == "f" and _name not in OWN_NAN_RULE:
        VALU[_name] = (_out_t, _in_ts, fpmath.nan_rule(_fn))




def _bitrev32(a):
    b = a.astype(U32)
    b = ((b >> U32(1)) & U32(0x55555555)) | ((b & U32(0x55555555)) << U32(1))
    b = ((b >> U32(2)) & U32(0x33333333)) | ((b & U32(0x33333333)) << U32(2))
    b = ((b >> U32(4)) & U32(0x0F0F0F0F)) | ((b & U32(0x0F0F0F0F)) << U32(4))
    b = ((b >> U32(8)) & U32(0x00FF00FF)) | ((b & U32(0x00FF00FF)) << U32(8))
    return (b >> U32(16)) | (b << U32(16))


# carry-chain ops (VOP2 with VCC, VOP3SD with an SGPR carry): (a, b, carry_in) -> (result, carry_out)
def _add_co(a, b, ci):
    a, b = np.asarray(a, U32), np.asarray(b, U32)  # 32-bit wrapping sums: a carry is a sum below its addend
    s = a + b
    if ci is None:  # no carry in (the shader core's fast path): the same as adding a zero one
        return s, s < a
    t = s + np.asarray(ci).astype(U32)
    return t, (s < a) | (t < s)


def _sub_co(a, b, ci):
    a, b = np.asarray(a, U32), np.asarray(b, U32)  # 32-bit wrapping differences: a borrow is a subtrahend too big
    d = a - b
    if ci is None:  # no borrow in (fast path)
        return d, a < b
    c = np.asarray(ci).astype(U32)
    return d - c, (a < b) | (d < c)


CARRY = {
    "v_add_co_u32": (_add_co, False, False), "v_add_co_ci_u32": (_add_co, True, False),
    "v_sub_co_u32": (_sub_co, False, False), "v_sub_co_ci_u32": (_sub_co, True, False),
    "v_subrev_co_u32": (_sub_co, False, True), "v_subrev_co_ci_u32": (_sub_co, True, True),
}  # mnemonic -> (function, reads a carry in, swaps the operands)


# VALU compares: base op -> predicate on (a, b)
_CMP = {
    "f": lambda a, b: np.zeros(np.broadcast(a, b).shape, bool), "t": lambda a, b: np.ones(np.broadcast(a, b).shape, bool),
    "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater, "ne": np.not_equal,
    "lg": lambda a, b: (a < b) | (a > b), "ge": np.greater_equal,
    "tru": lambda a, b: np.ones(np.broadcast(a, b).shape, bool),  # GFX9 spelling of "t"
    "o": lambda a, b: ~(np.isnan(a) | np.isnan(b)), "u": lambda a, b: np.isnan(a) | np.isnan(b),
    "nge": lambda a, b: ~(a >= b), "nlg": lambda a, b: ~((a < b) | (a > b)), "ngt": lambda a, b: ~(a > b),
    "nle": lambda a, b: ~(a <= b), "neq": lambda a, b: ~(a == b), "nlt": lambda a, b: ~(a < b),
}


def compare(mnemonic: str):
    """(type, predicate, writes_exec) for v_cmp_* / v_cmpx_* mnemonics, None when not a compare."""
    parts = mnemonic.split("_")
    if len(parts) != 4 or parts[0] != "v" or parts[1] not in ("cmp", "cmpx"):
        return None
    op, typ = parts[2], parts[3]
    if typ not in DTYPES or op not in _CMP:
        return None

    def pred(a, b, _p=_CMP[op]):
        with np.errstate(invalid="ignore"):
            return _p(a, b)
    return typ, pred, parts[1] == "cmpx"


# ---------------------------------------------------------------------------------------------------
# scalar ALU: uint32 or uint64 arrays [waves] -> (result, scc)

def _nz(r):
    return r != 0


def _s32(x):
    return x.view(I32) if x.dtype == U32 else x.astype(I32)


def _s64(x):
    return x.view(I64) if x.dtype == U64 else x.astype(I64)


def sadd_i32(a, b):
    r = (a + b)
    ov = ((_s32(a) >= 0) == (_s32(b) >= 0)) & ((_s32(r) >= 0) != (_s32(a) >= 0))
    return r, ov


def _ssub_i32(a, b):
    r = (a - b)
    ov = ((_s32(a) >= 0) != (_s32(b) >= 0)) & ((_s32(r) >= 0) != (_s32(a) >= 0))
    return r, ov


def _bfe_s(x, spec, signed, bits):
    """s_bfe_*: S1[4:0] (or [5:0]) offset, S1[22:16] width; the signed forms shift arithmetically first and
    sign-extend the field; SCC = result != 0."""
    off = (spec & (U32(31) if bits == 32 else U32(63))).astype(np.int64)
    width = ((spec >> U32(16)) & U32(0x7F)).astype(np.int64)
    if signed:
        v = (x.astype(U32).view(I32).astype(np.int64) if bits == 32 else x.astype(U64).view(I64)) >> off
        keep = width >= bits
        w = np.where(keep, 1, width)
        field = v & ((np.int64(1) << w) - 1) if bits == 32 else np.where(keep, v, v & ((np.int64(1) << np.minimum(w, 63)) - 1))
        sign = np.int64(1) << (w - 1)
        r = np.where(keep, v, np.where(width == 0, 0, (field ^ sign) - sign))
        r = (r & 0xFFFFFFFF).astype(U32) if bits == 32 else r.astype(I64).view(U64)
    else:
        xv = x.astype(U64)
        mask = np.where(width >= bits, ~U64(0), (U64(1) << width.astype(U64)) - U64(1))
        r = ((xv >> off.astype(U64)) & mask).astype(U32 if bits == 32 else U64)
    return r, r != 0


SALU2 = {  # two sources
    "s_add_u32": lambda a, b: ((a + b), (a.astype(U64) + b) > U64(0xFFFFFFFF)),
    "s_sub_u32": lambda a, b: ((a - b), b > a),
    "s_add_i32": sadd_i32, "s_sub_i32": _ssub_i32,
    "s_mul_i32": lambda a, b: (a * b, None),
    "s_mul_hi_u32": lambda a, b: (_mul_hi_u32(a, b), None),
    "s_mul_hi_i32": lambda a, b: (_mul_hi_i32(_s32(a), _s32(b)), None),
    "s_min_i32": lambda a, b: (np.where(_s32(a) < _s32(b), a, b), _s32(a) < _s32(b)),
    "s_max_i32": lambda a, b: (np.where(_s32(a) > _s32(b), a, b), _s32(a) > _s32(b)),
    "s_min_u32": lambda a, b: (np.minimum(a, b), a < b), "s_max_u32": lambda a, b: (np.maximum(a, b), a > b),
    "s_cselect_b32": None, "s_cselect_b64": None,  # need SCC: executor special-cases
    "s_and_b32": lambda a, b: (a & b, _nz(a & b)), "s_and_b64": lambda a, b: (a & b, _nz(a & b)),
    "s_or_b32": lambda a, b: (a | b, _nz(a | b)), "s_or_b64": lambda a, b: (a | b, _nz(a | b)),
    "s_xor_b32": lambda a, b: (a ^ b, _nz(a ^ b)), "s_xor_b64": lambda a, b: (a ^ b, _nz(a ^ b)),
    "s_and_not1_b32": lambda a, b: (a & ~b, _nz(a & ~b)), "s_and_not1_b64": lambda a, b: (a & ~b, _nz(a & ~b)),
    "s_or_not1_b32": lambda a, b: (a | ~b, _nz(a | ~b)), "s_or_not1_b64": lambda a, b: (a | ~b, _nz(a | ~b)),
    "s_nand_b32": lambda a, b: (~(a & b), _nz(~(a & b))), "s_nand_b64": lambda a, b: (~(a & b), _nz(~(a & b))),
    "s_nor_b32": lambda a, b: (~(a | b), _nz(~(a | b))), "s_nor_b64": lambda a, b: (~(a | b), _nz(~(a | b))),
    "s_xnor_b32": lambda a, b: (~(a ^ b), _nz(~(a ^ b))), "s_xnor_b64": lambda a, b: (~(a ^ b), _nz(~(a ^ b))),
    "s_lshl_b32": lambda a, b: (a << (b & U32(31)), _nz(a << (b & U32(31)))),
    "s_lshr_b32": lambda a, b: (a >> (b & U32(31)), _nz(a >> (b & U32(31)))),
    "s_ashr_i32": lambda a, b: ((_s32(a) >> _s32(b & U32(31))).view(U32), _nz(_s32(a) >> _s32(b & U32(31)))),
    "s_lshl_b64": lambda a, b: (a << (b.astype(U64) & U64(63)), _nz(a << (b.astype(U64) & U64(63)))),
    "s_lshr_b64": lambda a, b: (a >> (b.astype(U64) & U64(63)), _nz(a >> (b.astype(U64) & U64(63)))),
    "s_ashr_i64": lambda a, b: ((_s64(a) >> (b.astype(I64) & I64(63))).view(U64),
                                _nz(_s64(a) >> (b.astype(I64) & I64(63)))),
    "s_lshl1_add_u32": lambda a, b: ((a << U32(1)) + b, ((a.astype(U64) << U64(1)) + b) > U64(0xFFFFFFFF)),
    "s_lshl2_add_u32": lambda a, b: ((a << U32(2)) + b, ((a.astype(U64) << U64(2)) + b) > U64(0xFFFFFFFF)),
    "s_lshl3_add_u32": lambda a, b: ((a << U32(3)) + b, ((a.astype(U64) << U64(3)) + b) > U64(0xFFFFFFFF)),
    "s_lshl4_add_u32": lambda a, b: ((a << U32(4)) + b, ((a.astype(U64) << U64(4)) + b) > U64(0xFFFFFFFF)),
    "s_bfe_u32": lambda a, b: _bfe_s(a, b, False, 32), "s_bfe_i32": lambda a, b: _bfe_s(a, b, True, 32),
    "s_bfe_u64": lambda a, b: _bfe_s(a, b.astype(U32), False, 64),
    "s_bfe_i64": lambda a, b: _bfe_s(a, b.astype(U32), True, 64),
    "s_bfm_b32": lambda a, b: ((((U64(1) << (a & U32(31)).astype(U64)) - U64(1)).astype(U32) << (b & U32(31))), None),
    "s_pack_ll_b32_b16": lambda a, b: ((a & U32(0xFFFF)) | (b << U32(16)), None),
    "s_pack_lh_b32_b16": lambda a, b: ((a & U32(0xFFFF)) | (b & U32(0xFFFF0000)), None),
    "s_pack_hh_b32_b16": lambda a, b: ((a >> U32(16)) | (b & U32(0xFFFF0000)), None),
    "s_pack_hl_b32_b16": lambda a, b: ((a >> U32(16)) | (b << U32(16)), None),
    "s_bfm_b64": lambda a, b: (((U64(1) << (a & U32(63)).astype(U64)) - U64(1)) << (b & U32(63)).astype(U64), None),
    "s_absdiff_i32": lambda a, b: ((r := _absdiff32(a, b)), r != 0),
}

SALU_CARRY = {"s_addc_u32": lambda a, b, c: _add_co(a, b, c), "s_subb_u32": lambda a, b, c: _sub_co(a, b, c)}

SALU1 = {  # one source
    "s_mov_b32": lambda a: (a, None), "s_mov_b64": lambda a: (a, None),
    "s_not_b32": lambda a: (~a, _nz(~a)), "s_not_b64": lambda a: (~a, _nz(~a)),
    "s_brev_b32": lambda a: (_bitrev32(a), None),
    "s_bcnt0_i32_b64": lambda a: ((r := (64 - np.bitwise_count(a)).astype(U32)), r != 0),
    "s_ff0_i32_b32": lambda a: (_ctz(~a.astype(U32), 32), None), "s_ff0_i32_b64": lambda a: (_ctz(~a.astype(U64), 64), None),
    "s_bitreplicate_b64_b32": lambda a: (_bitreplicate(a), None),
    "s_quadmask_b32": lambda a: ((r := _quadmask(a, 8)), r != 0), "s_quadmask_b64": lambda a: ((r := _quadmask(a, 16)), r != 0),
    "s_wqm_b32": lambda a: ((r := _wqm(a, 32)), r != 0), "s_wqm_b64": lambda a: ((r := _wqm(a, 64)), r != 0),
    "s_brev_b64": lambda a: (_bitrev32((a >> U64(32)).astype(U32)).astype(U64)
                             | _bitrev32((a & U64(0xFFFFFFFF)).astype(U32)).astype(U64) << U64(32), None),
    "s_cls_i32": lambda a: (_cls(a, 32), None), "s_cls_i32_i64": lambda a: (_cls(a, 64), None),
    "s_bcnt0_i32_b32": lambda a: ((r := (32 - np.bitwise_count(a)).astype(U32)), r != 0),
    "s_bcnt1_i32_b32": lambda a: ((r := np.bitwise_count(a).astype(U32)), r != 0),
    "s_bcnt1_i32_b64": lambda a: ((r := np.bitwise_count(a).astype(U32)), r != 0),
    "s_ctz_i32_b32": lambda a: (_ctz(a, 32), None), "s_ctz_i32_b64": lambda a: (_ctz(a, 64), None),
    "s_clz_i32_u32": lambda a: (_clz(a, 32), None), "s_clz_i32_u64": lambda a: (_clz(a, 64), None),
    "s_sext_i32_i8": lambda a: (a.astype(np.int8).astype(I32).view(U32), None),
    "s_sext_i32_i16": lambda a: (a.astype(I16).astype(I32).view(U32), None),
    "s_abs_i32": lambda a: ((r := np.abs(_s32(a).astype(I64)).astype(U32)), r != 0),
}


def _absdiff32(a, b):
    """s_absdiff_i32: S0 - S1 wrapped to 32 bits, then its absolute value (abs(INT_MIN) stays INT_MIN)."""
    d = (a.astype(U32) - b.astype(U32)).view(I32)
    with np.errstate(over="ignore"):
        return np.where(d < 0, -d.astype(I64), d.astype(I64)).astype(np.int64).astype(U32)


def _bitreplicate(a):
    """s_bitreplicate_b64_b32: each bit of the 32-bit source doubled into two adjacent result bits."""
    a = a.astype(U64)
    out = np.zeros(a.shape, U64)
    for i in range(32):
        bit = (a >> U64(i)) & U64(1)
        out |= (bit | bit << U64(1)) << U64(2 * i)
    return out


def _quadmask(a, quads):
    """s_quadmask: result bit i = any of source bits 4i..4i+3."""
    a = a.astype(U64)
    out = np.zeros(a.shape, U64)
    for i in range(quads):
        out |= (((a >> U64(4 * i)) & U64(15)) != 0).astype(U64) << U64(i)
    return out.astype(U32 if quads == 8 else U64)


def _wqm(a, bits):
    """s_wqm: each 4-bit group of the result is all ones where the source group has any bit set."""
    a = a.astype(U64)
    out = np.zeros(a.shape, U64)
    for i in range(bits // 4):
        out |= np.where(((a >> U64(4 * i)) & U64(15)) != 0, U64(15), U64(0)) << U64(4 * i)
    return out.astype(U32 if bits == 32 else U64)


def _ctz(a, bits):
    """Trailing zeros (0xFFFFFFFF for 0): the bits below the lowest set bit, counted."""
    a = a.astype(U64)
    below = (a & (~a + U64(1))) - U64(1)  # the lowest set bit's lower bits, all ones
    return np.where(a == 0, U32(0xFFFFFFFF), np.bitwise_count(below).astype(U32))


def _clz(a, bits):
    """Leading zeros (0xFFFFFFFF for 0): the value's bits smeared down from its top bit, the rest counted."""
    a = a.astype(U64)
    smear = a
    for shift in (1, 2, 4, 8, 16, 32):
        smear = smear | (smear >> U64(shift))
    return np.where(a == 0, U32(0xFFFFFFFF), (bits - np.bitwise_count(smear).astype(np.int64)).astype(U32))


# saveexec family: (new exec from (src, exec)), the old exec goes to sdst, SCC = new exec != 0
SAVEEXEC = {
    "and": lambda s, e: s & e, "or": lambda s, e: s | e, "xor": lambda s, e: s ^ e,
    "nand": lambda s, e: ~(s & e), "nor": lambda s, e: ~(s | e), "xnor": lambda s, e: ~(s ^ e),
    "and_not0": lambda s, e: ~s & e, "or_not0": lambda s, e: ~s | e,  # NOT0: the source is negated
    "and_not1": lambda s, e: s & ~e, "or_not1": lambda s, e: s | ~e,
}

SCMP = {"eq": np.equal, "lg": np.not_equal, "gt": np.greater, "ge": np.greater_equal, "lt": np.less,
        "le": np.less_equal}
