"""IEEE-754 arithmetic the hardware does and numpy does not: correctly rounded fused multiply-add for f16,
f32 and f64, IEEE-mode min/max (signed zeros ordered, signalling NaNs quieted), and the division helpers
(`v_div_scale`, `v_div_fmas`, `v_div_fixup`) as the ISA pseudocode defines them.

All functions take and return numpy arrays (any broadcastable shapes) of one float dtype, round to nearest
even, keep denormals and raise no floating-point warnings.

Fused multiply-add without a hardware FMA: for f16 and f32 the product of two inputs is exact in float64,
so one addition remains; it is done in float64 with *round to odd* (the TwoSum error term picks the odd
neighbour when the sum is inexact), and round-to-odd at 53 bits followed by one round-to-nearest to 24 or 11
bits is a correctly rounded result (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved
algorithms using rounding to odd", IEEE TC 2008). For f64 the product is split exactly (Veltkamp/Dekker)
and the same odd-rounding step gives RN(a*b + c); lanes where the split could overflow or the product's low
part could underflow, and non-finite lanes, are computed exactly with Python integers instead.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from . import fast, hostjit

F16, F32, F64 = np.float16, np.float32, np.float64
_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}
_SINT = {2: np.int16, 4: np.int32, 8: np.int64}
_QUIET = {2: 0x200, 4: 0x400000, 8: 0x8000000000000}
_MANT = {2: 10, 4: 23, 8: 52}
_EXP_MASK = {2: 0x1F, 4: 0xFF, 8: 0x7FF}


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(_UINT[x.dtype.itemsize])


def exponent(x: np.ndarray) -> np.ndarray:
    """The biased exponent field (the ISA's `exponent()`), as int64."""
    n = x.dtype.itemsize
    return ((_bits(x) >> _UINT[n](_MANT[n])) & _UINT[n](_EXP_MASK[n])).astype(np.int64)


def is_snan(x: np.ndarray) -> np.ndarray:
    n = x.dtype.itemsize
    return np.isnan(x) & ((_bits(x) & _UINT[n](_QUIET[n])) == 0)


def quiet(x: np.ndarray) -> np.ndarray:
    """NaNs with the quiet bit set (payload and sign kept); other values unchanged."""
    n = x.dtype.itemsize
    b = _bits(x)
    return np.where(np.isnan(x), b | _UINT[n](_QUIET[n]), b).view(x.dtype)


def f32_to_f16(x: np.ndarray) -> np.ndarray:
    """f32 -> f16 rounded to nearest even; a NaN keeps its sign and top payload bits and comes out quiet."""
    x = np.asarray(x, F32)
    with np.errstate(all="ignore"):
        r = x.astype(F16)
    b = x.view(np.uint32)
    nan16 = ((b >> np.uint32(16)) & np.uint32(0x8000)) | np.uint32(0x7E00) | ((b >> np.uint32(13)) & np.uint32(0x3FF))
    return np.where(np.isnan(x), nan16.astype(np.uint16), r.view(np.uint16)).view(F16)


# ---------------------------------------------------------------------------------------------------
# NaN results: one rule, never numpy's (docs/shader_semantics.md, "NaN results")

# The NaN an operation makes when no source is one (0 * inf, inf - inf, sqrt(-1)): the pseudocode's own default
# NaN (V_DIV_FIXUP's 0xffc00000 / 0xfe00), sign bit set.
DEFAULT_NAN = {2: 0xFE00, 4: 0xFFC00000, 8: 0xFFF8000000000000}
_FLOAT_OF = {2: F16, 4: F32, 8: F64}


def nan_as(x: np.ndarray, dtype) -> np.ndarray:
    """The raw bits (unsigned, of `dtype`'s width) of x's NaNs as quiet NaNs of `dtype`: sign kept, the payload's
    top bits kept (left-aligned, as a wider format extends it and a narrower one truncates it). Other lanes'
    values are meaningless."""
    x = np.asarray(x)
    src, dst = x.dtype.itemsize, np.dtype(dtype).itemsize
    b = _bits(x).astype(np.uint64)
    payload = b & np.uint64((1 << _MANT[src]) - 1)
    shift = _MANT[dst] - _MANT[src]
    payload = payload << np.uint64(shift) if shift >= 0 else payload >> np.uint64(-shift)
    sign = (b >> np.uint64(8 * src - 1)) << np.uint64(8 * dst - 1)
    top = np.uint64(_EXP_MASK[dst] << _MANT[dst] | _QUIET[dst])
    return (sign | top | payload).astype(_UINT[dst])


def propagate_nan(result: np.ndarray, *sources: np.ndarray) -> np.ndarray:
    """`result` with each NaN lane replaced by hcqsim's NaN rule: the first NaN among the float `sources` (in
    operand order, after source modifiers) converted to the result's format and quieted; where no source is
    a NaN, DEFAULT_NAN. Which NaN numpy returns depends on its SIMD path (operand order inside a vector loop,
    F16C conversions), so no result may keep numpy's."""
    result = np.asarray(result)
    nan = np.isnan(result)
    if not nan.any():
        return result
    n = result.dtype.itemsize
    pick = np.full(result.shape, DEFAULT_NAN[n], _UINT[n])
    for s in reversed(sources):
        s = np.asarray(s)
        if s.dtype.kind == "f":
            pick = np.where(np.isnan(s), nan_as(s, result.dtype), pick)
    return np.where(nan, pick.view(result.dtype), result)


def nan_rule(fn):
    """fn(*sources) with its NaN results set by `propagate_nan` (and numpy's floating-point warnings silenced:
    hardware raises no traps by default)."""
    def wrapped(*sources):
        with np.errstate(all="ignore"):
            return propagate_nan(fn(*sources), *sources)
    wrapped.__wrapped__ = fn
    return wrapped


def is_denormal(x: np.ndarray) -> np.ndarray:
    return (x != 0) & (exponent(x) == 0)


def fp_class(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """v_cmp_class_*: true where x is in one of the classes the mask's bits name (0 signalling NaN,
    1 quiet NaN, 2 -inf, 3 -normal, 4 -denormal, 5 -0, 6 +0, 7 +denormal, 8 +normal, 9 +inf)."""
    x = np.asarray(x)
    m = np.asarray(mask).astype(np.uint32)
    nan, neg, inf = np.isnan(x), np.signbit(x), np.isinf(x)
    zero, denorm = x == 0, is_denormal(x)
    normal = ~nan & ~inf & ~zero & ~denorm
    snan = is_snan(x)
    classes = (snan, nan & ~snan, inf & neg, normal & neg, denorm & neg, zero & neg, zero & ~neg, denorm & ~neg,
               normal & ~neg, inf & ~neg)
    hit = np.zeros(np.broadcast(x, m).shape, bool)
    for i, c in enumerate(classes):
        hit |= c & (((m >> np.uint32(i)) & np.uint32(1)) != 0)
    return hit


# ---------------------------------------------------------------------------------------------------
# fused multiply-add


def round_to_odd_sum(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x + y in float64 rounded to odd: exact sums unchanged, inexact ones land on the neighbour whose last
    mantissa bit is 1. Non-finite sums are returned as rounded."""
    s = x + y
    bv = s - x
    err = (x - (s - bv)) + (y - bv)  # TwoSum: x + y == s + err exactly (for finite values)
    bits = s.view(np.int64)
    adjust = (err != 0) & np.isfinite(err) & ((bits & 1) == 0)
    away = np.signbit(err) == np.signbit(s)  # the exact sum lies farther from zero than s
    bits = np.where(adjust, bits + np.where(away, 1, -1), bits)
    return bits.view(F64)


def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a * b + c with a single rounding, in the inputs' dtype (f16, f32 or f64)."""
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    if not (fast.enabled and a.shape == b.shape == c.shape):  # fast path: shapes that need no broadcasting
        a, b, c = np.broadcast_arrays(a, b, c)
    dt = np.result_type(a, b, c)
    if hostjit.enabled and dt != F16:  # LLVM's fma for the host CPU: one call instead of the emulation below
        return hostjit.fma(a.astype(dt, copy=False), b.astype(dt, copy=False), c.astype(dt, copy=False))
    with np.errstate(all="ignore"):
        if dt == F64:
            return _fma64(a.astype(F64), b.astype(F64), c.astype(F64))
        p = a.astype(F64) * b.astype(F64)  # exact: at most 48 significant bits, no under/overflow
        c64 = c.astype(F64)
        s = p + c64
        # RN(RN64(x)) == RN(x) unless RN64(x) is exactly a tie of the narrow format (a tie is representable in
        # float64, so none lies strictly between x and RN64(x)). Ties are rare: only their lanes, and results
        # in the narrow format's denormal range, take the round-to-odd path.
        slow = _needs_round_to_odd(s, dt)
        if slow.any():
            s = np.where(slow, round_to_odd_sum(p, c64), s)
        return s.astype(dt)


def _needs_round_to_odd(s, dt) -> np.ndarray:
    """The float64 sums `s` that `fma` rounds again through round_to_odd_sum: exact ties of the narrow format `dt`
    and results in its denormal range (0 < |s| < its smallest normal; a zero sum is exact)."""
    drop, tiny = (29, 2.0 ** -126) if dt == F32 else (42, 2.0 ** -14)
    bits = s.view(np.uint64)
    low = bits & np.uint64((1 << drop) - 1)
    if fast.enabled:  # fast path: the same test on the bits, 0 < |s| < tiny as |s|'s bits - 1 < tiny's - 1 (unsigned)
        magnitude = bits & np.uint64(0x7FFFFFFFFFFFFFFF)
        return (low == np.uint64(1 << (drop - 1))) | (
            magnitude - np.uint64(1) < np.uint64(np.float64(tiny).view(np.uint64) - np.uint64(1)))
    return (low == np.uint64(1 << (drop - 1))) | ((np.abs(s) < tiny) & (s != 0))


_SPLIT = F64(134217729.0)  # 2^27 + 1


def _two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = a * b
    t = _SPLIT * a
    ah = t - (t - a)
    al = a - ah
    t = _SPLIT * b
    bh = t - (t - b)
    bl = b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def _fma64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    p, e = _two_prod(a, b)  # a*b == p + e
    th = c + p
    bv = th - c
    tl = (c - (th - bv)) + (p - bv)  # c + p == th + tl
    v = round_to_odd_sum(tl, e)  # the two low parts, rounded to odd
    result = th + v
    result = np.where(result == 0, th, result)  # an exact zero takes its sign from the plain sum (-0 + -0)
    ea, eb = exponent(a), exponent(b)
    # the split is exact only when a*b neither overflows in the splitting nor loses its low part to underflow
    finite = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    safe = (finite & (ea < 2046 - 28) & (eb < 2046 - 28) & (ea + eb > 1023 + 110) & (np.abs(c) < F64(2.0) ** 1020)
            & ((c == 0) | (exponent(c) > 110)) & np.isfinite(result))
    if safe.all():
        return result
    # Lanes whose result needs no rounding of a sum, decided without the split (zeros and non-finite operands are
    # most of the unsafe lanes in real kernels: inactive lanes, zero-initialised accumulators):
    zero_product = finite & ((a == 0) | (b == 0))  # +-0 + c: exact (c, or IEEE's sign of a zero sum)
    zero_addend = finite & (c == 0) & ~zero_product  # RN(a*b + 0) = RN(a*b), the sign of a product rounding to 0
    infinite_addend = np.isfinite(a) & np.isfinite(b) & ~np.isfinite(c)  # a finite product never cancels it
    nonfinite_factor = ~(np.isfinite(a) & np.isfinite(b))  # inf*0, inf - inf, NaN: the plain operations decide
    result = np.where(zero_product | nonfinite_factor, a * b + c, result)
    result = np.where(zero_addend, a * b, result)
    result = np.where(infinite_addend, c + F64(0), result)
    rest = ~(safe | zero_product | zero_addend | infinite_addend | nonfinite_factor)
    if rest.any():  # extreme exponents (the split could overflow, its low part underflow, the result overflow)
        result = np.array(result, copy=True)
        lanes = np.argwhere(np.atleast_1d(rest))
        EXACT_FALLBACK["fma64_lanes"] += len(lanes)
        for i in lanes:
            i = tuple(i) if result.ndim else ()
            result[i] = fma_exact(float(a[i]), float(b[i]), float(c[i]))
    return result


EXACT_FALLBACK = {"fma64_lanes": 0, "div_fmas64_lanes": 0}  # lanes computed with Python rationals, counted


def fma_exact(a: float, b: float, c: float, scale: int = 0) -> float:
    """Correctly rounded (a*b + c) * 2^scale for Python floats (binary64), with exact rational arithmetic."""
    import math
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.ldexp(a * b + c, scale)  # an infinite or NaN factor decides the result with c
    if not math.isfinite(c):
        return c + 0.0  # a finite product never cancels an infinite addend; a NaN addend comes out quieted
    exact = (Fraction(a) * Fraction(b) + Fraction(c)) * Fraction(2) ** scale
    if exact == 0:
        prod_negative = (math.copysign(1.0, a) * math.copysign(1.0, b)) < 0
        both_negative_zeros = (a == 0 or b == 0) and prod_negative and math.copysign(1.0, c) < 0
        return -0.0 if both_negative_zeros else 0.0
    try:
        return exact.numerator / exact.denominator  # int true division rounds correctly, subnormals too
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


# ---------------------------------------------------------------------------------------------------
# IEEE-mode min/max (v_min_*, v_max_*, and the 3-input forms built from them)


def vmin(a: np.ndarray, b: np.ndarray, ieee: bool = True, rdna: bool = False) -> np.ndarray:
    """v_min_f*: a signalling NaN (IEEE mode) returns that NaN quieted; else a NaN operand yields the other
    operand; -0 orders below +0. With two quiet NaNs, CDNA returns S1 and RDNA S0 (`rdna`: the RDNA3.5
    guide tests isQuietNAN(S1) first; the CDNA3 guide tests isNAN(S0) first)."""
    return _minmax(a, b, ieee, rdna, lambda x, y: (x < y) | ((x == y) & np.signbit(x)))


def vmax(a: np.ndarray, b: np.ndarray, ieee: bool = True, rdna: bool = False) -> np.ndarray:
    return _minmax(a, b, ieee, rdna, lambda x, y: (x > y) | ((x == y) & ~np.signbit(x)))


def _minmax(a, b, ieee, rdna, first_wins):
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    with np.errstate(invalid="ignore"):
        out = np.where(first_wins(a, b), a, b)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if not (nan_a.any() or nan_b.any()):  # the common case: the ordered comparison alone decides
        return out.astype(a.dtype, copy=False)
    if rdna:  # the check applied last decides when both are NaN
        out = np.where(nan_a, b, out)
        out = np.where(nan_b, a, out)
    else:
        out = np.where(nan_b, a, out)
        out = np.where(nan_a, b, out)
    if ieee:
        out = np.where(is_snan(b), quiet(b), out)
        out = np.where(is_snan(a), quiet(a), out)
    return out.astype(a.dtype, copy=False)


def vmin3(a, b, c, ieee: bool = True, rdna: bool = False):
    return vmin(vmin(a, b, ieee, rdna), c, ieee, rdna)


def vmax3(a, b, c, ieee: bool = True, rdna: bool = False):
    return vmax(vmax(a, b, ieee, rdna), c, ieee, rdna)


def vmed3(a, b, c, ieee: bool = True, rdna: bool = False):
    """v_med3_f*: with any NaN operand the result is v_min3; else the median (ISA pseudocode)."""
    a, b, c = np.broadcast_arrays(np.asarray(a), np.asarray(b), np.asarray(c))
    mx = vmax3(a, b, c, ieee, rdna)
    med = np.where(_same(mx, a), vmax(b, c, ieee, rdna),
                   np.where(_same(mx, b), vmax(a, c, ieee, rdna), vmax(a, b, ieee, rdna)))
    nan = np.isnan(a) | np.isnan(b) | np.isnan(c)
    return np.where(nan, vmin3(a, b, c, ieee, rdna), med).astype(a.dtype, copy=False)


def minmax_family(name: str, ieee: bool, rdna: bool):
    """The function of a float min/max-family mnemonic (v_min/max/min3/max3/med3/maxmin/minmax_f16/f32/f64,
    v_pk_min/max_f16) for the wave's IEEE mode and the architecture's NaN order; None for other names."""
    base = name[2:].rsplit("_", 1)[0].replace("pk_", "")
    typ = name.rsplit("_", 1)[-1]
    if typ not in ("f16", "f32", "f64"):
        return None
    rdna = rdna and typ != "f64"  # the RDNA3.5 guide keeps the CDNA order for the f64 forms
    two = {"min": vmin, "max": vmax}
    three = {"min3": vmin3, "max3": vmax3, "med3": vmed3}
    if base in two:
        op = two[base]
        return lambda x, y: op(x, y, ieee, rdna)
    if base in three:
        op3 = three[base]
        return lambda x, y, z: op3(x, y, z, ieee, rdna)
    if base == "maxmin":
        return lambda x, y, z: vmin(vmax(x, y, ieee, rdna), z, ieee, rdna)
    if base == "minmax":
        return lambda x, y, z: vmax(vmin(x, y, ieee, rdna), z, ieee, rdna)
    return None


def _same(x, y):
    return _bits(x) == _bits(y)


# ---------------------------------------------------------------------------------------------------
# division helpers


def div_scale(s0: np.ndarray, s1: np.ndarray, s2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """v_div_scale_f32/f64 (S0 = value to scale, S1 = denominator, S2 = numerator) -> (D0, VCC).

    The ISA pseudocode, with its "== DENORM" tests read as "is denormal". One branch is corrected so that
    the division macro stays exact: when the denominator is huge (1/S1 denormal) *and* the quotient would be
    denormal, the pseudocode scales the denominator up by 2^64 (which would overflow it); the denominator is
    scaled down instead, matching the post-scale direction of v_div_fmas. For f32, "1/S1 is denormal" is
    tested against the f32 range (docs/shader_semantics.md)."""
    s0, s1, s2 = np.broadcast_arrays(*(np.asarray(v) for v in (s0, s1, s2)))
    dt = s0.dtype
    wide = dt == F64
    big, lim_tiny, k = (768, 53, 128) if wide else (96, 23, 64)
    # fast path: every lane's exponents are far from each rule (no zero, denormal, huge or special operand,
    # quotient far from overflow and underflow): D0 = S0, VCC = 0 everywhere
    top, low = (2045, -1020) if wide else (253, -124)
    e1, e2 = exponent(s1), exponent(s2)
    diff = e2 - e1
    if ((e1 > 0) & (e1 < top) & (e2 > lim_tiny) & (e2 < top + 2) & (diff < big) & (diff > low)).all():
        return s0.copy(), np.zeros(s0.shape, bool)
    d = s0.copy()
    vcc = np.zeros(d.shape, bool)
    with np.errstate(all="ignore"):
        recip = 1.0 / s1.astype(F64)
        # "1/S1 == DENORM": for f32 the pseudocode computes 1/S1 in f64, where it is never denormal; what
        # keeps the macro exact (v_rcp's result must be a normal f32) is the f32 range: |1/S1| < 2^-126
        recip_denorm = is_denormal(recip) if wide else (recip != 0) & (np.abs(recip) < F64(2.0) ** -126)
        quot_denorm = is_denormal((s2 / s1).astype(dt))
        up, down = np.ldexp(s0, k).astype(dt), np.ldexp(s0, -k).astype(dt)
    done = np.zeros(d.shape, bool)

    def case(cond, value=None, set_vcc=False):
        nonlocal d, vcc, done
        hit = cond & ~done
        if value is not None:
            d = np.where(hit, value, d)
        if set_vcc:
            vcc = vcc | hit
        done = done | hit

    case((s2 == 0) | (s1 == 0), np.full(d.shape, np.nan, dt))
    near_max = diff >= big
    case(near_max & (s0 == s1), up, True)
    case(near_max, None, True)
    case(is_denormal(s1), up)
    both = recip_denorm & quot_denorm
    case(both & (s0 == s1), down, True)
    case(both, None, True)
    case(recip_denorm, down)
    case(quot_denorm & (s0 == s2), up, True)
    case(quot_denorm, None, True)
    case(e2 <= lim_tiny, up)
    return d.astype(dt, copy=False), vcc


def div_fmas(a: np.ndarray, b: np.ndarray, c: np.ndarray, vcc: np.ndarray) -> np.ndarray:
    """v_div_fmas: fma(a, b, c), post-scaled where VCC is set, with one rounding for the scaled result (a
    denormal quotient is rounded once, as the division needs). The pseudocode's fixed factor (2^32 / 2^64)
    cannot undo v_div_scale's 2^64 / 2^128 scaling; the factor used is the one that does: 2^(+k) when the
    quotient estimate S2 is >= 2 (the denominator was scaled up), else 2^(-k) (the numerator was)."""
    a, b, c, vcc = np.broadcast_arrays(*(np.asarray(v) for v in (a, b, c)), np.asarray(vcc))
    r = propagate_nan(fma(a, b, c), a, b, c)
    if not vcc.any():
        return r
    dt = r.dtype
    k, bias = (128, 1023) if dt == F64 else (64, 127)
    scale = np.where(exponent(c) > bias, k, -k)
    with np.errstate(all="ignore"):
        if dt == F64:
            scaled = r.copy()
            lanes = np.argwhere(np.atleast_1d(vcc))
            EXACT_FALLBACK["div_fmas64_lanes"] += len(lanes)
            for i in lanes:
                i = tuple(i) if r.ndim else ()
                scaled[i] = fma_exact(float(a[i]), float(b[i]), float(c[i]), int(scale[i]))
        else:  # the odd-rounded float64 sum is scaled exactly, then rounded once to f16/f32
            odd = round_to_odd_sum(a.astype(F64) * b.astype(F64), c.astype(F64))
            scaled = np.ldexp(odd, scale).astype(dt)
    return propagate_nan(np.where(vcc, scaled, r), a, b, c)


def div_fixup(q: np.ndarray, d: np.ndarray, n: np.ndarray) -> np.ndarray:
    """v_div_fixup_f16/f32/f64 (S0 = quotient, S1 = denominator, S2 = numerator), per the ISA pseudocode.
    Where the pseudocode would pass a NaN estimate through for valid operands (the Newton-Raphson steps
    overflowed: the quotient is beyond the format's range), the result is the overflow value, +-inf."""
    q, d, n = np.broadcast_arrays(*(np.asarray(v) for v in (q, d, n)))
    dt = q.dtype
    nb = dt.itemsize
    sign = np.signbit(d) ^ np.signbit(n)
    inf = np.where(sign, -np.inf, np.inf).astype(dt)
    zero = np.where(sign, -0.0, 0.0).astype(dt)
    default_nan = np.array({2: 0xFE00, 4: 0xFFC00000, 8: 0xFFF8000000000000}[nb], _UINT[nb]).view(dt)
    with np.errstate(all="ignore"):
        out = np.where(sign, -np.abs(q), np.abs(q)).astype(dt)
        ordinary = np.isfinite(d) & np.isfinite(n) & (d != 0) & (n != 0) & ~np.isnan(q)
        if nb != 2:
            ordinary &= (exponent(n) - exponent(d)) >= -({4: 127, 8: 1023}[nb] + _MANT[nb] + 1)
        if ordinary.all():  # no special case in any lane: the sign-corrected estimate
            return out
        out = np.where(np.isnan(q), inf, out)  # the macro's estimate overflowed on valid operands
        mant, bias = _MANT[nb], {2: 15, 4: 127, 8: 1023}[nb]
        if nb != 2:  # the f16 form has no underflow rule
            underflow = (exponent(n) - exponent(d)) < -(bias + mant + 1)
            out = np.where(underflow, zero, out)
        out = np.where((np.abs(d) == np.inf) | (n == 0), zero, out)
        out = np.where((d == 0) | (np.abs(n) == np.inf), inf, out)
        out = np.where((np.abs(d) == np.inf) & (np.abs(n) == np.inf), default_nan, out)
        out = np.where((d == 0) & (n == 0), default_nan, out)
        out = np.where(np.isnan(d), quiet(d), out)
        out = np.where(np.isnan(n), quiet(n), out)
    return out.astype(dt, copy=False)
