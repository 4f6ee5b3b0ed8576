"""Reference semantics of AMD GPU ALU instructions, written from the ISA guides' pseudocode, for the instruction tests.

Sources (cited per function as "RDNA3.5 16.12 V_DIV_SCALE_F32" etc.): AMD "RDNA3.5 Instruction Set Architecture"
chapter 16 (VOP1/VOP2/VOP3/VOP3SD/VOPC/VOP3P and SOP1/SOP2/SOPC pseudocode; identical to RDNA3 for the opcodes
gfx1100 has) and AMD "CDNA3/CDNA4 Instruction Set Architecture" chapter 12 (VOP3A/VOP3B, VOP1, VOP2, VOPC).
Nothing here is taken from hcqsim's shader core.

Values are raw bit patterns (Python ints). Floating-point arithmetic is exact rational arithmetic (`Fraction`) with
one IEEE round-to-nearest-even at the end (`round_to`), so fused operations are fused by construction, denormals
are kept (the float mode hcqsim emulates: RSRC1 FLOAT_MODE 0xF0, IEEE on, DX10_CLAMP on).

NaN results of arithmetic: the guides say "quiet NaN" without fixing the payload, so arithmetic references return
`QNAN` (a marker) and the tests accept any quiet NaN there; min/max/med3/class/fixup/ldexp etc. return the exact
pattern their pseudocode names (cvtToQuietNAN of the input: the input with the quiet bit set).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable


# ---------------------------------------------------------------------------------------------------------
# float formats


@dataclass(frozen=True)
class Fmt:
    name: str
    ebits: int
    mbits: int

    @property
    def width(self) -> int:
        return 1 + self.ebits + self.mbits

    @property
    def bias(self) -> int:
        return (1 << (self.ebits - 1)) - 1

    @property
    def emax_field(self) -> int:
        return (1 << self.ebits) - 1

    @property
    def sign_bit(self) -> int:
        return 1 << (self.width - 1)

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1

    @property
    def quiet_bit(self) -> int:
        return 1 << (self.mbits - 1)

    @property
    def inf(self) -> int:
        return self.emax_field << self.mbits

    @property
    def max_normal(self) -> int:
        return self.inf - 1

    @property
    def one(self) -> int:
        return self.bias << self.mbits


F16 = Fmt("f16", 5, 10)
BF16 = Fmt("bf16", 8, 7)
F32 = Fmt("f32", 8, 23)
F64 = Fmt("f64", 11, 52)
FMTS = {"f16": F16, "bf16": BF16, "f32": F32, "f64": F64}

QNAN = -1  # marker: "some quiet NaN" (payload not specified by the ISA)


def exponent(x: int, f: Fmt) -> int:
    """The biased exponent field (the pseudocode's exponent())."""
    return (x >> f.mbits) & f.emax_field


def mantissa(x: int, f: Fmt) -> int:
    return x & ((1 << f.mbits) - 1)


def sign(x: int, f: Fmt) -> int:
    return (x >> (f.width - 1)) & 1


def is_nan(x: int, f: Fmt) -> bool:
    return exponent(x, f) == f.emax_field and mantissa(x, f) != 0


def is_snan(x: int, f: Fmt) -> bool:
    return is_nan(x, f) and not (x & f.quiet_bit)


def is_inf(x: int, f: Fmt) -> bool:
    return (x & ~f.sign_bit & f.mask) == f.inf


def is_zero(x: int, f: Fmt) -> bool:
    return (x & ~f.sign_bit & f.mask) == 0


def is_denorm(x: int, f: Fmt) -> bool:
    return exponent(x, f) == 0 and mantissa(x, f) != 0


def quiet(x: int, f: Fmt) -> int:
    """cvtToQuietNAN: the NaN with its quiet bit set (payload and sign kept)."""
    return x | f.quiet_bit


def fabs(x: int, f: Fmt) -> int:
    return x & ~f.sign_bit & f.mask


def fneg(x: int, f: Fmt) -> int:
    return x ^ f.sign_bit


def value(x: int, f: Fmt) -> Fraction:
    """The exact value of a finite pattern (zeros give 0; the sign of zero is lost)."""
    e, m = exponent(x, f), mantissa(x, f)
    if e == 0:
        v = Fraction(m) * Fraction(2) ** (1 - f.bias - f.mbits)
    else:
        v = Fraction(m | (1 << f.mbits)) * Fraction(2) ** (e - f.bias - f.mbits)
    return -v if sign(x, f) else v


def round_to(q: Fraction, f: Fmt, negative_zero: bool = False) -> int:
    """IEEE round-to-nearest-even of an exact value into format f (overflow -> inf, denormals kept).
    An exact zero gives -0 when `negative_zero`, else +0."""
    if q == 0:
        return f.sign_bit if negative_zero else 0
    s = f.sign_bit if q < 0 else 0
    a = -q if q < 0 else q
    n, d = a.numerator, a.denominator
    e = n.bit_length() - d.bit_length()  # 2^e <= a < 2^(e+1), after the fix-up below
    if (n << max(0, -e)) < (d << max(0, e)):
        e -= 1
    e = max(e, 1 - f.bias)  # denormals share the minimum exponent
    shift = f.mbits - e  # a * 2^shift has mbits + 1 integer bits for a normal
    num, den = (n << shift, d) if shift >= 0 else (n, d << -shift)
    m, r = divmod(num, den)
    if 2 * r > den or (2 * r == den and m & 1):
        m += 1
    bits = ((e + f.bias - 1) << f.mbits) + m  # a carry out of the mantissa moves into the exponent
    if bits >= f.inf:
        return s | f.inf
    return s | bits


def from_float(x: float, f: Fmt) -> int:
    """A Python float (an f64) rounded into format f."""
    if math.isnan(x):
        return QNAN
    if math.isinf(x):
        return f.inf | (f.sign_bit if x < 0 else 0)
    return round_to(Fraction(x), f, math.copysign(1.0, x) < 0)


def to_float(x: int, f: Fmt) -> float:
    if is_nan(x, f):
        return math.nan
    if is_inf(x, f):
        return -math.inf if sign(x, f) else math.inf
    v = float(value(x, f))
    return -0.0 if v == 0 and sign(x, f) else v


def convert(x: int, src: Fmt, dst: Fmt) -> int:
    """Float to float conversion (f16_to_f32, f32_to_f16, ...): NaN quieted with the payload's top bits kept."""
    if is_nan(x, src):
        payload = mantissa(x, src)
        shift = dst.mbits - src.mbits
        payload = payload << shift if shift >= 0 else payload >> -shift
        return (sign(x, src) << (dst.width - 1)) | dst.inf | dst.quiet_bit | payload
    if is_inf(x, src):
        return (sign(x, src) << (dst.width - 1)) | dst.inf
    return round_to(value(x, src), dst, bool(sign(x, src)))


# ---------------------------------------------------------------------------------------------------------
# IEEE arithmetic (round to nearest even, exact intermediate)


def _nan_in(f: Fmt, *xs: int) -> bool:
    return any(is_nan(x, f) for x in xs)


def f_add(a: int, b: int, f: Fmt) -> int:
    if _nan_in(f, a, b):
        return QNAN
    if is_inf(a, f) or is_inf(b, f):
        if is_inf(a, f) and is_inf(b, f) and sign(a, f) != sign(b, f):
            return QNAN
        return a if is_inf(a, f) else b
    q = value(a, f) + value(b, f)
    if q == 0:  # x + -x is +0; -0 + -0 is -0
        return round_to(q, f, bool(sign(a, f) and sign(b, f)))
    return round_to(q, f)


def f_mul(a: int, b: int, f: Fmt) -> int:
    if _nan_in(f, a, b):
        return QNAN
    s = sign(a, f) ^ sign(b, f)
    if is_inf(a, f) or is_inf(b, f):
        if is_zero(a, f) or is_zero(b, f):
            return QNAN
        return (s << (f.width - 1)) | f.inf
    return round_to(value(a, f) * value(b, f), f, bool(s))


def f_fma(a: int, b: int, c: int, f: Fmt) -> int:
    """fma(a, b, c) = a * b + c with one rounding (IEEE 754 fusedMultiplyAdd)."""
    if _nan_in(f, a, b, c):
        return QNAN
    ps = sign(a, f) ^ sign(b, f)
    if is_inf(a, f) or is_inf(b, f):
        if is_zero(a, f) or is_zero(b, f):
            return QNAN
        if is_inf(c, f) and sign(c, f) != ps:
            return QNAN
        return (ps << (f.width - 1)) | f.inf
    if is_inf(c, f):
        return c
    q = value(a, f) * value(b, f) + value(c, f)
    if q == 0:
        exact_zero_product = is_zero(a, f) or is_zero(b, f)
        if exact_zero_product and is_zero(c, f):
            return round_to(q, f, bool(ps and sign(c, f)))
        return round_to(q, f, False)
    return round_to(q, f)


def f_div(a: int, b: int, f: Fmt) -> int:
    if _nan_in(f, a, b):
        return QNAN
    s = sign(a, f) ^ sign(b, f)
    if is_inf(a, f):
        return QNAN if is_inf(b, f) else (s << (f.width - 1)) | f.inf
    if is_inf(b, f):
        return s << (f.width - 1)
    if is_zero(b, f):
        return QNAN if is_zero(a, f) else (s << (f.width - 1)) | f.inf
    return round_to(value(a, f) / value(b, f), f, bool(s))


def f_lt(a: int, b: int, f: Fmt) -> bool:
    if _nan_in(f, a, b):
        return False
    return _ordered_value(a, f) < _ordered_value(b, f)


def _ordered_value(x: int, f: Fmt):
    if is_inf(x, f):
        return -math.inf if sign(x, f) else math.inf
    return value(x, f)


def f_eq(a: int, b: int, f: Fmt) -> bool:
    if _nan_in(f, a, b):
        return False
    return _ordered_value(a, f) == _ordered_value(b, f)


def ldexp(x: int, n: int, f: Fmt) -> int:
    """x * 2^n, rounded (NaN quieted, inf and zero unchanged)."""
    if is_nan(x, f):
        return quiet(x, f)
    if is_inf(x, f) or is_zero(x, f):
        return x
    n = max(min(n, 4 * (f.bias + f.mbits)), -4 * (f.bias + f.mbits))  # beyond this the result saturates anyway
    return round_to(value(x, f) * Fraction(2) ** n, f, bool(sign(x, f)))


# ---------------------------------------------------------------------------------------------------------
# integer helpers


def mask(bits: int) -> int:
    return (1 << bits) - 1


def sext(x: int, bits: int) -> int:
    x &= mask(bits)
    return x - (1 << bits) if x >> (bits - 1) else x


def u(x: int, bits: int) -> int:
    return x & mask(bits)


def sat_signed(v: int, bits: int) -> int:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return u(max(lo, min(hi, v)), bits)


def sat_unsigned(v: int, bits: int) -> int:
    return max(0, min(mask(bits), v))


# ---------------------------------------------------------------------------------------------------------
# VALU float arithmetic. RDNA3.5 16.x / CDNA4 12.x: V_ADD_F32 "D0.f32 = S0.f32 + S1.f32", V_SUB_F32 "S0 - S1",
# V_SUBREV_F32 "S1 - S0", V_MUL_F32 "S0 * S1", V_FMA_F32 "D0.f32 = fma(S0.f32, S1.f32, S2.f32)",
# V_FMAC_F32 "D0.f32 = fma(S0.f32, S1.f32, D0.f32)" (likewise _f16 / _f64).


def add(f: Fmt) -> Callable[[int, int], int]:
    return lambda a, b: f_add(a, b, f)


def sub(f: Fmt) -> Callable[[int, int], int]:
    return lambda a, b: f_add(a, fneg(b, f), f) if not is_nan(b, f) else QNAN


def subrev(f: Fmt) -> Callable[[int, int], int]:
    return lambda a, b: f_add(b, fneg(a, f), f) if not is_nan(a, f) else QNAN


def mul(f: Fmt) -> Callable[[int, int], int]:
    return lambda a, b: f_mul(a, b, f)


def fma(f: Fmt) -> Callable[[int, int, int], int]:
    return lambda a, b, c: f_fma(a, b, c, f)


def ieee_min(f: Fmt) -> Callable[[int, int], int]:
    """V_MIN_F32 (CDNA4 12.8 / RDNA3.5 16.8), IEEE mode:
    sNaN S0 -> cvtToQuietNAN(S0); sNaN S1 -> cvtToQuietNAN(S1); NaN S0 -> S1; NaN S1 -> S0;
    (+0, -0) -> S1; (-0, +0) -> S0; else S0 < S1 ? S0 : S1."""
    def fn(a: int, b: int) -> int:
        if is_snan(a, f):
            return quiet(a, f)
        if is_snan(b, f):
            return quiet(b, f)
        if is_nan(a, f):
            return b
        if is_nan(b, f):
            return a
        if a == 0 and b == f.sign_bit:
            return b
        if a == f.sign_bit and b == 0:
            return a
        return a if f_lt(a, b, f) else b
    return fn


def ieee_max(f: Fmt) -> Callable[[int, int], int]:
    """V_MAX_F32, IEEE mode: as V_MIN_F32 for NaNs; (+0, -0) -> S0; (-0, +0) -> S1; else S0 >= S1 ? S0 : S1."""
    def fn(a: int, b: int) -> int:
        if is_snan(a, f):
            return quiet(a, f)
        if is_snan(b, f):
            return quiet(b, f)
        if is_nan(a, f):
            return b
        if is_nan(b, f):
            return a
        if a == 0 and b == f.sign_bit:
            return a
        if a == f.sign_bit and b == 0:
            return b
        return a if (f_lt(b, a, f) or f_eq(a, b, f)) else b
    return fn
