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


def rdna_min(f: Fmt) -> Callable[[int, int], int]:
    """RDNA3.5 16.12 V_MIN_F16/F32 (IEEE mode): sNaN S0 -> cvtToQuietNAN(S0); sNaN S1 -> cvtToQuietNAN(S1);
    qNaN S1 -> S0; qNaN S0 -> S1; LT_NEG_ZERO(S0, S1) (-0 < +0) ? S0 : S1."""
    def fn(a: int, b: int) -> int:
        if is_snan(a, f):
            return quiet(a, f)
        if is_snan(b, f):
            return quiet(b, f)
        if is_nan(b, f):
            return a
        if is_nan(a, f):
            return b
        return a if (f_lt(a, b, f) or (is_zero(a, f) and is_zero(b, f) and sign(a, f) and not sign(b, f))) else b
    return fn


def rdna_max(f: Fmt) -> Callable[[int, int], int]:
    """RDNA3.5 16.12 V_MAX_F16/F32 (IEEE mode): NaNs as V_MIN; GT_NEG_ZERO(S0, S1) (+0 > -0) ? S0 : S1."""
    def fn(a: int, b: int) -> int:
        if is_snan(a, f):
            return quiet(a, f)
        if is_snan(b, f):
            return quiet(b, f)
        if is_nan(b, f):
            return a
        if is_nan(a, f):
            return b
        return a if (f_lt(b, a, f) or (is_zero(a, f) and is_zero(b, f) and not sign(a, f) and sign(b, f))) else b
    return fn


def min3(mn: Callable) -> Callable[[int, int, int], int]:
    """V_MIN3_*: D0 = v_min(v_min(S0, S1), S2) (V_MAX3 likewise with v_max)."""
    return lambda a, b, c: mn(mn(a, b), c)


def med3_float(f: Fmt, mn: Callable, mx: Callable) -> Callable[[int, int, int], int]:
    """V_MED3_F32 (RDNA3.5 16.12, CDNA4 12.11): any NaN -> v_min3(S0, S1, S2); v_max3 == S0 -> v_max(S1, S2);
    v_max3 == S1 -> v_max(S0, S2); else v_max(S0, S1)."""
    def fn(a: int, b: int, c: int) -> int:
        if is_nan(a, f) or is_nan(b, f) or is_nan(c, f):
            return mn(mn(a, b), c)
        m = mx(mx(a, b), c)
        if f_eq(m, a, f):
            return mx(b, c)
        if f_eq(m, b, f):
            return mx(a, c)
        return mx(a, b)
    return fn


def med3_int(bits: int, signed: bool) -> Callable[[int, int, int], int]:
    """V_MED3_I32/U32/I16/U16: v_max3 == S0 -> v_max(S1, S2); v_max3 == S1 -> v_max(S0, S2); else v_max(S0, S1)."""
    key = (lambda x: sext(x, bits)) if signed else (lambda x: u(x, bits))
    def fn(a: int, b: int, c: int) -> int:
        return sorted([a, b, c], key=key)[1]
    return fn


def int_min(bits: int, signed: bool):
    key = (lambda x: sext(x, bits)) if signed else (lambda x: u(x, bits))
    return lambda a, b: a if key(a) < key(b) else b


def int_max(bits: int, signed: bool):
    key = (lambda x: sext(x, bits)) if signed else (lambda x: u(x, bits))
    return lambda a, b: a if key(a) >= key(b) else b


# ---------------------------------------------------------------------------------------------------------
# division helpers (RDNA3.5 16.12 / CDNA4 12.11 V_DIV_SCALE_*, V_DIV_FMAS_*, V_DIV_FIXUP_*)

ANY = -2  # marker: the pseudocode leaves the result open (UNDERFLOW_F32/OVERFLOW_F32 constants, ...): not asserted


def div_scale(f: Fmt) -> Callable[[int, int, int], tuple[int, int]]:
    """V_DIV_SCALE_F32/F64 (S0 = value to scale, S1 = denominator, S2 = numerator), returning (D0, VCC):
    VCC = 0; S2 == 0 || S1 == 0 -> NAN; exponent(S2) - exponent(S1) >= 96 (f64: 768) -> VCC = 1, and if S0 == S1
    D0 = ldexp(S0, 64) (f64: 128); S1 denormal -> ldexp(S0, 64); 1/S1 (in f64) denormal && S2/S1 denormal ->
    VCC = 1, S0 == S1 ? ldexp(S0, 64); 1/S1 denormal -> ldexp(S0, -64); S2/S1 denormal -> VCC = 1,
    S0 == S2 ? ldexp(S0, 64); exponent(S2) <= 23 (f64: 53) -> ldexp(S0, 64). Otherwise D0 = S0."""
    big = 96 if f is F32 else 768
    k = 64 if f is F32 else 128
    tiny = 23 if f is F32 else 53

    def denorm_quotient(n: int, d: int) -> bool:
        if _nan_in(f, n, d) or is_inf(n, f) or is_inf(d, f):
            return False
        return is_denorm(f_div(n, d, f), f)

    def recip_denorm(d: int) -> bool:
        """The guide writes `1.0 / 64'F(S1.f32) == DENORM.f64`, which no f32 S1 satisfies (1/FLT_MAX is a
        normal double); read literally, 8 / FLT_MAX comes out 1 ulp low through LLVM's fdiv expansion (the IR
        fuzzer's finding), because v_rcp_f32 of a huge denominator is an f32 denormal. The reading that keeps
        the macro exact tests 1/S1 against the f32 range; f64 tests the f64 range as written."""
        if _nan_in(f, d) or is_inf(d, f) or is_zero(d, f):
            return False
        if f is F32:
            return abs(1 / value(d, f)) < 2.0 ** -126
        return is_denorm(round_to(1 / value(d, f), F64), F64)

    def fn(s0: int, s1: int, s2: int) -> tuple[int, int]:
        d = s0
        vcc = 0
        if (not is_nan(s2, f) and is_zero(s2, f)) or (not is_nan(s1, f) and is_zero(s1, f)):
            return QNAN, 0
        if exponent(s2, f) - exponent(s1, f) >= big:
            vcc = 1
            if f_eq(s0, s1, f):
                d = ldexp(s0, k, f)
        elif is_denorm(s1, f):
            d = ldexp(s0, k, f)
        elif recip_denorm(s1) and denorm_quotient(s2, s1):
            vcc = 1
            if f_eq(s0, s1, f):  # the guide scales a huge S1 up by 2^k (it would overflow): not asserted
                return ANY, 1
        elif recip_denorm(s1):
            d = ldexp(s0, -k, f)
        elif denorm_quotient(s2, s1):
            vcc = 1
            if f_eq(s0, s2, f):
                d = ldexp(s0, k, f)
        elif exponent(s2, f) <= tiny:
            d = ldexp(s0, k, f)
        if is_nan(d, f):
            d = QNAN
        return d, vcc
    return fn


def div_fmas_plain(f: Fmt) -> Callable[[int, int, int, int], int]:
    """V_DIV_FMAS_F32/F64 with VCC = 0: D0 = fma(S0, S1, S2). With VCC = 1 the guide's pseudocode says
    2.0 ** 32 * fma(...) (f64: 2.0 ** 64), which cannot be the post-scale of V_DIV_SCALE's 2 ** 64 (f64: 2 ** 128):
    those lanes are not asserted (ANY); the division sequence test checks them end to end."""
    def fn(a: int, b: int, c: int, vcc: int) -> int:
        return ANY if vcc else f_fma(a, b, c, f)
    return fn


def div_fixup(f: Fmt) -> Callable[[int, int, int], int]:
    """V_DIV_FIXUP_F16/F32/F64 (S0 = quotient, S1 = denominator, S2 = numerator): sign_out = sign(S1) ^ sign(S2);
    NaN S2 -> quiet(S2); NaN S1 -> quiet(S1); 0/0 and inf/inf -> 0xffc00000 (f16 0xfe00, f64 0xfff8...);
    S1 == 0 || |S2| == inf -> +-inf; |S1| == inf || S2 == 0 -> +-0; exponent(S2) - exponent(S1) < -150 (f64 -1075;
    not in the f16 form) -> +-UNDERFLOW (not asserted); else sign_out ? -|S0| : |S0|."""
    under = {16: None, 32: -150, 64: -1075}[f.width]

    def fn(s0: int, s1: int, s2: int) -> int:
        so = sign(s1, f) ^ sign(s2, f)
        sgn = f.sign_bit if so else 0
        if is_nan(s2, f):
            return quiet(s2, f)
        if is_nan(s1, f):
            return quiet(s1, f)
        if is_zero(s1, f) and is_zero(s2, f):
            return f.sign_bit | f.inf | f.quiet_bit
        if is_inf(s1, f) and is_inf(s2, f):
            return f.sign_bit | f.inf | f.quiet_bit
        if is_zero(s1, f) or is_inf(s2, f):
            return sgn | f.inf
        if is_inf(s1, f) or is_zero(s2, f):
            return sgn
        if under is not None and exponent(s2, f) - exponent(s1, f) < under:
            return ANY
        if is_nan(s0, f):  # a NaN quotient with finite operands: the guide's last line would give +-|NaN|; not asserted
            return ANY
        return sgn | fabs(s0, f)
    return fn


# ---------------------------------------------------------------------------------------------------------
# class, select, ldexp, frexp


def cmp_class(f: Fmt) -> Callable[[int, int], int]:
    """V_CMP_CLASS_F32: S1 bits select classes of S0: 0 sNaN, 1 qNaN, 2 -inf, 3 -normal, 4 -denormal, 5 -0, 6 +0,
    7 +denormal, 8 +normal, 9 +inf; D = S1[class(S0)]."""
    def fn(x: int, m: int) -> int:
        if is_nan(x, f):
            c = 0 if is_snan(x, f) else 1
        else:
            neg = sign(x, f)
            if is_inf(x, f):
                c = 2 if neg else 9
            elif is_zero(x, f):
                c = 5 if neg else 6
            elif is_denorm(x, f):
                c = 4 if neg else 7
            else:
                c = 3 if neg else 8
        return (m >> c) & 1
    return fn


def cndmask(a: int, b: int, vcc: int) -> int:
    """V_CNDMASK_B32: D0.u32 = VCC.u64[laneId] ? S1.u32 : S0.u32 (float modifiers act on the sign bit)."""
    return b if vcc else a


def ldexp_op(f: Fmt, ebits: int = 32) -> Callable[[int, int], int]:
    """V_LDEXP_F32: D0.f32 = S0.f32 * 2.0F ** S1.i32 (f16: S1.i16; f64: S1.i32), one rounding."""
    return lambda x, n: ldexp(x, sext(n, ebits), f)


def frexp_mant(f: Fmt) -> Callable[[int], int]:
    """V_FREXP_MANT_F32: "if S0 == +-INF || isNAN(S0) then D0 = S0 else D0 = mantissa(S0)" (in [0.5, 1) with S0's
    sign). A denormal input is not asserted (ANY): mantissa() of a denormal is not defined by the guide."""
    def fn(x: int) -> int:
        if is_nan(x, f) or is_inf(x, f) or is_zero(x, f):
            return x
        if is_denorm(x, f):
            return ANY
        v = abs(value(x, f))
        e = 0
        while v >= 1:
            v /= 2
            e += 1
        while v < Fraction(1, 2):
            v *= 2
            e -= 1
        return round_to(-v if sign(x, f) else v, f)
    return fn


def frexp_exp(f: Fmt, bits: int = 32) -> Callable[[int], int]:
    """V_FREXP_EXP_I32_F32: "if S0 == +-INF || isNAN(S0) then D0 = 0 else D0 = exponent(S0) - 127 + 1". Zero and
    denormal inputs are not asserted (ANY): read literally the field gives -126, C's frexp gives 0 / the true
    exponent, and the guide's invariant S0 = significand * 2 ** exponent does not decide it."""
    def fn(x: int) -> int:
        if is_nan(x, f) or is_inf(x, f):
            return 0
        if is_zero(x, f) or is_denorm(x, f):
            return ANY
        v = abs(value(x, f))
        e = 0
        while v >= 1:
            v /= 2
            e += 1
        while v < Fraction(1, 2):
            v *= 2
            e -= 1
        return u(e, bits)
    return fn


# ---------------------------------------------------------------------------------------------------------
# integer and bit operations


def add_nc(bits: int, signed: bool, subtract: bool = False, reverse: bool = False):
    """V_ADD_NC_U32 / V_SUB_NC_U32 / V_ADD_NC_I16 ...: D0 = S0 +- S1 modulo 2^bits; with clamp the result
    saturates to the type's range (RDNA3.5 16.12 notes "Supports saturation")."""
    def fn(a: int, b: int, clamp: bool = False) -> int:
        if reverse:
            a, b = b, a
        x, y = (sext(a, bits), sext(b, bits)) if signed else (u(a, bits), u(b, bits))
        r = x - y if subtract else x + y
        if clamp:
            return sat_signed(r, bits) if signed else sat_unsigned(r, bits)
        return u(r, bits)
    return fn


def alignbit(a: int, b: int, c: int) -> int:
    """V_ALIGNBIT_B32: D0.u32 = 32'U(({ S0.u32, S1.u32 } >> S2.u32[4 : 0]) & 0xffffffff)."""
    return ((a << 32 | b) >> (c & 31)) & 0xFFFFFFFF


def alignbyte(a: int, b: int, c: int) -> int:
    """V_ALIGNBYTE_B32: D0.u32 = 32'U(({ S0.u32, S1.u32 } >> (S2.u32[1 : 0] * 8)) & 0xffffffff)."""
    return ((a << 32 | b) >> ((c & 3) * 8)) & 0xFFFFFFFF


def clz(x: int) -> int:
    """V_CLZ_I32_U32 (gfx11) / V_FFBH_U32 (gfx9): index of the first 1 from the MSB; -1 (0xffffffff) for 0."""
    return 0xFFFFFFFF if x == 0 else 32 - x.bit_length()


def ctz(x: int) -> int:
    """V_CTZ_I32_B32 / V_FFBL_B32: index of the first 1 from the LSB; -1 for 0."""
    return 0xFFFFFFFF if x == 0 else (x & -x).bit_length() - 1


def cls(x: int) -> int:
    """V_CLS_I32 / V_FFBH_I32: D0.i32 = -1; for i in 1 .. 31: if S0[31 - i] != S0[31] then D0 = i; break.
    The count of leading bits equal to the sign bit, excluding the sign bit: -1 for 0 and 0xffffffff."""
    top = x >> 31
    for i in range(1, 32):
        if (x >> (31 - i)) & 1 != top:
            return i
    return 0xFFFFFFFF


def bfe_u32(a: int, b: int, c: int) -> int:
    """V_BFE_U32: D0 = (S0 >> S1[4:0]) & ((1 << S2[4:0]) - 1)."""
    return (a >> (b & 31)) & ((1 << (c & 31)) - 1)


def bfe_i32(a: int, b: int, c: int) -> int:
    """V_BFE_I32: tmp = (S0.i32 >> S1[4:0]) & ((1 << S2[4:0]) - 1); D0 = signext_from_bit(tmp, S2[4:0])
    (width 0 gives 0)."""
    w = c & 31
    t = (sext(a, 32) >> (b & 31)) & ((1 << w) - 1)
    return 0 if w == 0 else u(sext(t, w), 32)


def bfi(a: int, b: int, c: int) -> int:
    """V_BFI_B32: D0 = (S0 & S1) | (~S0 & S2)."""
    return (a & b) | (~a & c & 0xFFFFFFFF)


def perm(a: int, b: int, c: int) -> int:
    """V_PERM_B32: each result byte = BYTE_PERMUTE({S0, S1}, S2 byte): sel >= 13 -> 0xff, 12 -> 0, 11/10/9/8 ->
    sign of input byte 7/5/3/1 replicated, else input byte sel (S1 holds bytes 0-3, S0 bytes 4-7)."""
    data = (a << 32) | b
    out = 0
    for i in range(4):
        sel = (c >> (8 * i)) & 0xFF
        if sel >= 13:
            byte = 0xFF
        elif sel == 12:
            byte = 0
        elif sel >= 8:
            src = {8: 1, 9: 3, 10: 5, 11: 7}[sel]
            byte = 0xFF if (data >> (8 * src + 7)) & 1 else 0
        else:
            byte = (data >> (8 * sel)) & 0xFF
        out |= byte << (8 * i)
    return out


def sad_u8(a: int, b: int, c: int) -> int:
    """V_SAD_U8: tmp = S2; tmp += |S0 byte i - S1 byte i| for the 4 bytes; D0 = tmp (mod 2^32)."""
    t = c
    for i in range(4):
        t += abs(((a >> 8 * i) & 0xFF) - ((b >> 8 * i) & 0xFF))
    return t & 0xFFFFFFFF


def sad_hi_u8(a: int, b: int, c: int) -> int:
    """V_SAD_HI_U8: D0 = (v_sad_u8(S0, S1, 0) << 16) + S2."""
    return ((sad_u8(a, b, 0) << 16) + c) & 0xFFFFFFFF


def sad_u16(a: int, b: int, c: int) -> int:
    """V_SAD_U16: tmp = S2 + |S0[15:0] - S1[15:0]| + |S0[31:16] - S1[31:16]|."""
    return (c + abs((a & 0xFFFF) - (b & 0xFFFF)) + abs((a >> 16) - (b >> 16))) & 0xFFFFFFFF


def sad_u32(a: int, b: int, c: int) -> int:
    """V_SAD_U32: D0 = |S0 - S1| + S2."""
    return (abs(a - b) + c) & 0xFFFFFFFF


def msad_u8(a: int, b: int, c: int) -> int:
    """V_MSAD_U8: as V_SAD_U8, skipping bytes where S1's byte is 0."""
    t = c
    for i in range(4):
        if (b >> 8 * i) & 0xFF:
            t += abs(((a >> 8 * i) & 0xFF) - ((b >> 8 * i) & 0xFF))
    return t & 0xFFFFFFFF


def mul_hi_u32(a: int, b: int) -> int:
    """V_MUL_HI_U32: D0 = (64'U(S0) * 64'U(S1)) >> 32."""
    return (a * b) >> 32


def mul_hi_i32(a: int, b: int) -> int:
    """V_MUL_HI_I32: D0 = (64'I(S0) * 64'I(S1)) >> 32."""
    return u((sext(a, 32) * sext(b, 32)) >> 32, 32)


def mul_lo_u32(a: int, b: int) -> int:
    return (a * b) & 0xFFFFFFFF


def mul_i32_i24(a: int, b: int) -> int:
    """V_MUL_I32_I24: D0 = 32'I(S0.i24) * 32'I(S1.i24)."""
    return u(sext(a, 24) * sext(b, 24), 32)


def mul_hi_i32_i24(a: int, b: int) -> int:
    """V_MUL_HI_I32_I24: D0 = (64'I(S0.i24) * 64'I(S1.i24)) >> 32."""
    return u((sext(a, 24) * sext(b, 24)) >> 32, 32)


def mul_u32_u24(a: int, b: int) -> int:
    return ((a & 0xFFFFFF) * (b & 0xFFFFFF)) & 0xFFFFFFFF


def mul_hi_u32_u24(a: int, b: int) -> int:
    return ((a & 0xFFFFFF) * (b & 0xFFFFFF)) >> 32


def lshl_add(a: int, b: int, c: int) -> int:
    """V_LSHL_ADD_U32: D0 = (S0 << S1[4:0]) + S2."""
    return ((a << (b & 31)) + c) & 0xFFFFFFFF


def add_lshl(a: int, b: int, c: int) -> int:
    """V_ADD_LSHL_U32: D0 = (S0 + S1) << S2[4:0]."""
    return ((a + b) << (c & 31)) & 0xFFFFFFFF


def lshl_or(a: int, b: int, c: int) -> int:
    """V_LSHL_OR_B32: D0 = (S0 << S1[4:0]) | S2."""
    return ((a << (b & 31)) & 0xFFFFFFFF) | c


def xad(a: int, b: int, c: int) -> int:
    return ((a ^ b) + c) & 0xFFFFFFFF


def bcnt(a: int, b: int) -> int:
    """V_BCNT_U32_B32: D0 = popcount(S0) + S1."""
    return (bin(a).count("1") + b) & 0xFFFFFFFF


def brev32(x: int) -> int:
    return int(f"{x:032b}"[::-1], 2)


def mad_u64_u32(a: int, b: int, c: int) -> tuple[int, int]:
    """V_MAD_U64_U32: { D1.u1, D0.u64 } = 65'U(S0.u32) * 65'U(S1.u32) + 65'U(S2.u64): (D0, carry out)."""
    r = a * b + c
    return r & mask(64), r >> 64 & 1


def mad_i64_i32(a: int, b: int, c: int) -> tuple[int, int]:
    """V_MAD_I64_I32: { D1.i1, D0.i64 } = 65'I(S0.i32) * 65'I(S1.i32) + 65'I(S2.i64): D1 is bit 64 of the 65-bit
    signed result."""
    r = sext(a, 32) * sext(b, 32) + sext(c, 64)
    return r & mask(64), (r >> 64) & 1


def add_co(a: int, b: int) -> tuple[int, int]:
    """V_ADD_CO_U32: tmp = 64'U(S0) + 64'U(S1); VCC = tmp >= 2^32; D0 = tmp."""
    r = a + b
    return r & 0xFFFFFFFF, int(r >> 32 != 0)


def sub_co(a: int, b: int) -> tuple[int, int]:
    """V_SUB_CO_U32: D0 = S0 - S1; VCC = S1 > S0 (borrow)."""
    return (a - b) & 0xFFFFFFFF, int(b > a)


def addc_co(a: int, b: int, cin: int) -> tuple[int, int]:
    """V_ADD_CO_CI_U32: tmp = 64'U(S0) + 64'U(S1) + VCC[lane]; VCC = tmp >= 2^32; D0 = tmp."""
    r = a + b + cin
    return r & 0xFFFFFFFF, int(r >> 32 != 0)


def subb_co(a: int, b: int, cin: int) -> tuple[int, int]:
    """V_SUB_CO_CI_U32: tmp = S0 - S1 - VCC[lane]; VCC = 64'U(S1) + VCC[lane] > 64'U(S0)."""
    return (a - b - cin) & 0xFFFFFFFF, int(b + cin > a)


# ---------------------------------------------------------------------------------------------------------
# conversions


def f_to_int(f: Fmt, bits: int, signed: bool, mode: str = "trunc") -> Callable[[int], int]:
    """V_CVT_I32_F32 / U32 / I16 / U16 / I32_F64 ...: round toward zero (mode "trunc"), out-of-range values and
    infinities saturate, NaN -> 0 ("1ULP accuracy, out-of-range floating point values (including infinity)
    saturate. NAN is converted to 0"). mode "floor": V_CVT_FLOOR_I32_F32 = f32_to_i32(floor(S0));
    "nearest": V_CVT_NEAREST_I32_F32 = f32_to_i32(floor(S0 + 0.5))."""
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)

    def fn(x: int) -> int:
        if is_nan(x, f):
            return 0
        if is_inf(x, f):
            return u(lo if sign(x, f) else hi, bits)
        v = value(x, f)
        if mode == "floor":
            n = math.floor(v)
        elif mode == "nearest":
            n = math.floor(v + Fraction(1, 2)) if False else _floor_of_sum_half(x, f)
        else:
            n = math.trunc(v)
        return u(max(lo, min(hi, n)), bits)
    return fn


def _floor_of_sum_half(x: int, f: Fmt) -> int:
    """floor(S0 + 0.5) where the sum is a rounded float operation of the format (pseudocode `S0.f32 + 0.5F`)."""
    s = f_add(x, round_to(Fraction(1, 2), f), f)
    if is_inf(s, f):
        return -(1 << 40) if sign(s, f) else 1 << 40
    return math.floor(value(s, f))


def int_to_f(f: Fmt, bits: int, signed: bool) -> Callable[[int], int]:
    """V_CVT_F32_I32 / F32_U32 / F64_I32 / F16_I16 ...: round to nearest even."""
    return lambda x: round_to(Fraction(sext(x, bits) if signed else u(x, bits)), f)


def f_to_f(src: Fmt, dst: Fmt) -> Callable[[int], int]:
    """V_CVT_F32_F16 / F16_F32 / F64_F32 / F32_F64: IEEE conversion, round to nearest even, NaN quieted
    (payload: the source's top mantissa bits)."""
    def fn(x: int) -> int:
        if is_nan(x, src):
            return QNAN if dst.width < src.width else convert(x, src, dst)
        return convert(x, src, dst)
    return fn


def cvt_ubyte(n: int) -> Callable[[int], int]:
    """V_CVT_F32_UBYTEn: D0.f32 = u32_to_f32(S0[8n+7 : 8n])."""
    return lambda x: round_to(Fraction((x >> (8 * n)) & 0xFF), F32)


def cvt_pknorm(src: Fmt, signed: bool) -> Callable[[int, int], int]:
    """V_CVT_PK_NORM_I16_F32 / U16 (gfx11 names; gfx9 v_cvt_pknorm_*): D0[15:0] = f32_to_snorm(S0),
    D0[31:16] = f32_to_snorm(S1): clamp to [-1, 1] ([0, 1]), scale by 32767 (65535), round to nearest even; NaN -> 0."""
    scale = 32767 if signed else 65535

    def one(x: int) -> int:
        if is_nan(x, src):
            return 0
        v = Fraction(-1 if sign(x, src) else 1) if is_inf(x, src) else value(x, src)
        v = max(Fraction(-1 if signed else 0), min(Fraction(1), v)) * scale
        n = math.floor(v)
        r = v - n
        if r > Fraction(1, 2) or (r == Fraction(1, 2) and n & 1):
            n += 1
        return u(n, 16)
    return lambda a, b: one(a) | one(b) << 16


def cvt_pk_i16_i32(a: int, b: int) -> int:
    """V_CVT_PK_I16_I32: each half = S (signed 32-bit) saturated to signed 16 bits."""
    return sat_signed(sext(a, 32), 16) | sat_signed(sext(b, 32), 16) << 16


def cvt_pk_u16_u32(a: int, b: int) -> int:
    """V_CVT_PK_U16_U32: each half = S (unsigned 32-bit) saturated to 16 bits."""
    return min(a, 0xFFFF) | min(b, 0xFFFF) << 16


def cvt_pkrtz(a: int, b: int) -> int:
    """V_CVT_PK_RTZ_F16_F32: both f32 inputs converted to f16 rounding toward zero, packed (S0 low)."""
    return _f32_to_f16_rtz(a) | _f32_to_f16_rtz(b) << 16


def _f32_to_f16_rtz(x: int) -> int:
    if is_nan(x, F32):
        return convert(x, F32, F16)
    if is_inf(x, F32):
        return (sign(x, F32) << 15) | F16.inf
    v = value(x, F32)
    s = 0x8000 if sign(x, F32) else 0
    a = abs(v)
    # truncate toward zero: largest f16 magnitude <= a (max normal on overflow)
    r = round_to(a, F16)
    if r == F16.inf or value(r, F16) > a:
        r = r - 1 if r != F16.inf else F16.max_normal
        if value(r, F16) > a:
            r -= 1
    return s | r


def cvt_pk_u8_f32(a: int, b: int, c: int) -> int:
    """V_CVT_PK_U8_F32: tmp = S2 & ~(0xff << (S1[1:0] * 8)); tmp |= (f32_to_u8(S0) & 255) << (S1[1:0] * 8).
    f32_to_u8: round to nearest even (as V_CVT_F32 conversions, 0.5ULP), saturating to [0, 255], NaN -> 0."""
    sh = (b & 3) * 8
    if is_nan(a, F32):
        q = 0
    elif is_inf(a, F32):
        q = 0 if sign(a, F32) else 255
    else:
        v = value(a, F32)
        n = math.floor(v)
        r = v - n
        if r > Fraction(1, 2) or (r == Fraction(1, 2) and n & 1):
            n += 1
        q = max(0, min(255, n))
    return (c & ~(0xFF << sh) & 0xFFFFFFFF) | (q << sh)


# ---------------------------------------------------------------------------------------------------------
# SALU (RDNA3.5 16.1 SOP2, 16.3 SOP1; CDNA4 12.1/12.3): (D0, SCC) with SCC None where the opcode leaves it alone


def s_bcnt(bits: int, ones: bool):
    """S_BCNT1_I32_B32/B64: D0 = count of 1 bits (S_BCNT0: of 0 bits); SCC = D0 != 0."""
    def fn(x: int):
        n = bin(x & mask(bits)).count("1")
        d = n if ones else bits - n
        return d, int(d != 0)
    return fn


def s_ff1(bits: int):
    """S_FF1_I32_B32/B64 (gfx11 S_CTZ_I32_B32/B64): lowest set bit's index, -1 for 0; SCC unchanged."""
    return lambda x: (0xFFFFFFFF if x == 0 else (x & -x).bit_length() - 1, None)


def s_flbit(bits: int):
    """S_FLBIT_I32_B32/B64 (gfx11 S_CLZ_I32_U32/U64): index of the first 1 from the MSB, -1 for 0; SCC unchanged."""
    return lambda x: (0xFFFFFFFF if x == 0 else bits - x.bit_length(), None)


def s_cls(bits: int):
    """S_CLS_I32 / S_CLS_I32_I64 (GFX9 S_FLBIT_I32 / _I64): D0 = -1; for i in 1 .. bits-1: if S0[bits-1-i] !=
    S0[bits-1] then D0 = i; break. SCC unchanged."""
    def fn(x: int):
        top = x >> (bits - 1) & 1
        for i in range(1, bits):
            if (x >> (bits - 1 - i)) & 1 != top:
                return i, None
        return 0xFFFFFFFF, None
    return fn


def s_brev(bits: int):
    """S_BREV_B32/B64: D0[i] = S0[bits-1-i]; SCC unchanged."""
    return lambda x: (int(f"{x:0{bits}b}"[::-1], 2), None)


def s_abs(x: int):
    """S_ABS_I32: D0.i32 = S0.i32 < 0 ? -S0.i32 : S0.i32; SCC = D0.i32 != 0."""
    d = u(abs(sext(x, 32)), 32)
    return d, int(d != 0)


def s_absdiff(a: int, b: int):
    """S_ABSDIFF_I32: D0.i32 = S0.i32 - S1.i32; if D0.i32 < 0 then D0.i32 = -D0.i32; SCC = D0.i32 != 0
    (the subtraction wraps to 32 bits first)."""
    d = sext(a - b, 32)
    d = u(-d if d < 0 else d, 32)
    return d, int(d != 0)


def s_lshl_add(n: int):
    """S_LSHLn_ADD_U32: tmp = (64'U(S0) << n) + 64'U(S1); SCC = tmp >= 2^32; D0 = tmp."""
    def fn(a: int, b: int):
        t = (a << n) + b
        return t & 0xFFFFFFFF, int(t >> 32 != 0)
    return fn


def s_mul_hi(signed: bool):
    """S_MUL_HI_U32 / S_MUL_HI_I32: D0 = (64-bit S0 * S1) >> 32; SCC unchanged."""
    if signed:
        return lambda a, b: (u((sext(a, 32) * sext(b, 32)) >> 32, 32), None)
    return lambda a, b: ((a * b) >> 32, None)


def s_minmax(signed: bool, is_min: bool):
    """S_MIN_I32: SCC = S0 < S1; D0 = SCC ? S0 : S1 (S_MAX: SCC = S0 >= S1 ... per RDNA3.5 "S0 > S1"
    for max selects S0 on SCC; either way equal values are identical)."""
    def fn(a: int, b: int):
        x, y = (sext(a, 32), sext(b, 32)) if signed else (a, b)
        c = x < y if is_min else x > y
        return (a if c else b), int(c)
    return fn


def s_bfe(bits: int, signed: bool):
    """S_BFE_U32/I32/U64/I64: offset = S1[4:0] (64: S1[5:0]), width = S1[22:16];
    tmp = (S0 >> offset) & ((1 << width) - 1), sign-extended from bit width-1 for the signed forms (width 0 gives 0);
    SCC = D0 != 0. Where offset + width reaches past the operand, the signed forms give the arithmetically shifted
    operand (S0.i >> offset: the field's top bits are copies of the sign), as LLVM's constant folding of BFE_I32
    does (AMDGPUISelLowering constantFoldBFE). A width above the operand size is not asserted (ANY)."""
    def fn(a: int, b: int):
        off = b & (bits - 1)
        w = (b >> 16) & 0x7F
        if w > bits:
            return ANY, ANY
        if signed and w and off + w >= bits:
            t = u(sext(a, bits) >> off, bits)
        else:
            t = (a >> off) & ((1 << w) - 1) if w < bits else a >> off
            if signed and w:
                t = u(sext(t, min(w, bits)), bits)
        t &= mask(bits)
        return t, int(t != 0)
    return fn


def s_bitset(one: bool):
    """S_BITSET1_B32 / S_BITSET0_B32: D0[S0[4:0]] = 1 (0); other bits of D0 kept; SCC unchanged."""
    def fn(x: int, d: int):
        bit = 1 << (x & 31)
        return ((d | bit) if one else (d & ~bit & 0xFFFFFFFF)), None
    return fn


def s_bitreplicate(x: int):
    """S_BITREPLICATE_B64_B32: for i in 0..31: D0[2i] = D0[2i+1] = S0[i]; SCC unchanged."""
    d = 0
    for i in range(32):
        if (x >> i) & 1:
            d |= 3 << (2 * i)
    return d, None


def s_sext(bits: int):
    """S_SEXT_I32_I8 / I16: D0.i32 = sign-extended S0[bits-1:0]; SCC unchanged."""
    return lambda x: (u(sext(x, bits), 32), None)


# ---------------------------------------------------------------------------------------------------------
# rounding to integers and transcendentals (RDNA3.5 16.9 / CDNA4 12.9 VOP1)


def _nan_or(x: int, f: Fmt):
    return QNAN if is_nan(x, f) else None


def round_int(f: Fmt, mode: str) -> Callable[[int], int]:
    """V_TRUNC_F32 "D0 = trunc(S0)"; V_FLOOR_F32 "D0 = trunc(S0); if S0 < 0 && S0 != D0 then D0 += -1.0";
    V_CEIL_F32 "D0 = trunc(S0); if S0 > 0 && S0 != D0 then D0 += 1.0"; V_RNDNE_F32 "D0 = floor(S0 + 0.5); if
    isEven(floor(S0)) && fract(S0) == 0.5 then D0 -= 1.0" read in exact arithmetic (IEEE roundToIntegralTiesToEven,
    which LLVM selects v_rndne for). A zero result keeps the sign of S0 (trunc(-0.5) = -0; the D0 += 1.0 steps start
    from trunc's signed zero: ceil(-0.5) = -0, floor(0.5) = +0). NaN -> quiet NaN; inf unchanged."""
    def fn(x: int) -> int:
        if is_nan(x, f):
            return QNAN
        if is_inf(x, f) or is_zero(x, f):
            return x
        v = value(x, f)
        if mode == "trunc":
            n = math.trunc(v)
        elif mode == "floor":
            n = math.floor(v)
        elif mode == "ceil":
            n = math.ceil(v)
        else:
            n = math.floor(v + Fraction(1, 2))
            if math.floor(v) % 2 == 0 and v - math.floor(v) == Fraction(1, 2):
                n -= 1
        return round_to(Fraction(n), f, bool(sign(x, f)))
    return fn


def fract(f: Fmt) -> Callable[[int], int]:
    """V_FRACT_F32: "D0 = S0 + -floor(S0)", "0.5ULP accuracy, denormals are accepted", "result clamped to 0x3f7fffff"
    (the largest value below 1: fract(-2^-30) = 1 - 2^-30 rounds to 1.0 and is clamped). fract(-0) = -0 + +0 = +0.
    NaN -> quiet NaN. +-inf: inf + -inf is NaN by the formula, but "clamped" is a min and LLVM's constant folding
    of amdgcn.fract (ConstantFolding.cpp) returns NaN for inf too; asserted as a quiet NaN."""
    almost_one = f.one - 1

    def fn(x: int) -> int:
        if is_nan(x, f) or is_inf(x, f):
            return QNAN
        if is_zero(x, f):
            return 0
        v = value(x, f)
        r = round_to(v - math.floor(v), f)
        return almost_one if r == f.one else r
    return fn


def _mpf_to_fraction(x) -> Fraction:
    import mpmath
    neg, man, exp, _ = mpmath.mpf(x)._mpf_  # (sign, mantissa, exponent, bit count); man_exp drops the sign
    man = -int(man) if neg else int(man)
    return Fraction(man) * (Fraction(2) ** int(exp)) if exp >= 0 else Fraction(man, 1 << -int(exp))


def _transcendental(f: Fmt, special, exact, flush_in: bool, flush_out: bool):
    """A reference for an approximate operation: `special(x)` returns the result the pseudocode or the guide's
    functional examples fix (or None), `exact(v)` the exact value of a finite input as an mpmath number (or a
    Fraction). "Denormals are flushed" (the f32 notes of v_rcp/v_rsq/v_sqrt/v_exp/v_log): a denormal input
    (`flush_in`) or a result below the normal range (`flush_out`) may be flushed or not (ANY)."""
    min_normal = Fraction(2) ** (1 - f.bias)

    def fn(x: int) -> int:
        if is_nan(x, f):
            return QNAN
        s = special(x)
        if s is not None:
            return s
        if flush_in and is_denorm(x, f):
            return ANY
        q = exact(value(x, f))
        if not isinstance(q, Fraction):
            q = _mpf_to_fraction(q)
        if flush_out and q != 0 and abs(q) < min_normal:
            return ANY
        return round_to(q, f)
    return fn


def _mp():
    import mpmath
    mpmath.mp.prec = 160
    return mpmath


def rcp(f: Fmt, flush: bool) -> Callable[[int], int]:
    """V_RCP_F32 "D0 = 1.0 / S0" (1ULP; rcp(+-0) = +-inf, rcp(+-inf) = +-0)."""
    def special(x):
        if is_zero(x, f):
            return (x & f.sign_bit) | f.inf
        if is_inf(x, f):
            return x & f.sign_bit
        return None
    return _transcendental(f, special, lambda v: 1 / v, flush, flush)


def sqrt(f: Fmt, flush: bool) -> Callable[[int], int]:
    """V_SQRT_F32 "D0 = sqrt(S0)": sqrt(-inf) = NaN, sqrt(-0) = -0, sqrt(+0) = +0, sqrt(+inf) = +inf, a negative
    input gives NaN."""
    def special(x):
        if is_zero(x, f) or x == f.inf:
            return x
        if sign(x, f):
            return QNAN
        return None
    return _transcendental(f, special, lambda v: _mp().sqrt(_mp().mpf(v.numerator) / v.denominator), flush, False)


def rsq(f: Fmt, flush: bool) -> Callable[[int], int]:
    """V_RSQ_F32 "D0 = 1.0 / sqrt(S0)": rsq(-inf) = NaN, rsq(-0) = -inf, rsq(+0) = +inf, rsq(+inf) = +0, a negative
    input gives NaN."""
    def special(x):
        if is_zero(x, f):
            return (x & f.sign_bit) | f.inf
        if x == f.inf:
            return 0
        if sign(x, f):
            return QNAN
        return None
    return _transcendental(f, special, lambda v: 1 / _mp().sqrt(_mp().mpf(v.numerator) / v.denominator), flush,
                           flush)


def exp2(f: Fmt, flush: bool) -> Callable[[int], int]:
    """V_EXP_F32 "D0 = pow(2.0, S0)": exp(-inf) = 0, exp(-0) = 1, exp(+inf) = +inf."""
    big = 4 * (f.bias + f.mbits)

    def special(x):
        if is_inf(x, f):
            return 0 if sign(x, f) else f.inf
        if is_zero(x, f):
            return f.one
        return None

    def exact(v):
        if v > big:
            return Fraction(2) ** (2 * big)  # overflows the format
        if v < -big:
            return Fraction(0)
        m = _mp()
        return m.power(2, m.mpf(v.numerator) / v.denominator)
    return _transcendental(f, special, exact, False, flush)


def log2(f: Fmt, flush: bool) -> Callable[[int], int]:
    """V_LOG_F32 "D0 = log2(S0)": log(-inf) = NaN, log(-1) = NaN, log(+-0) = -inf, log(1) = 0, log(+inf) = +inf."""
    def special(x):
        if is_zero(x, f):
            return f.sign_bit | f.inf
        if sign(x, f):
            return QNAN
        if x == f.inf:
            return f.inf
        if x == f.one:
            return 0
        return None

    def exact(v):
        m = _mp()
        return m.log(m.mpf(v.numerator) / v.denominator, 2)
    return _transcendental(f, special, exact, flush, False)


def sincos(f: Fmt, cosine: bool) -> Callable[[int], int]:
    """V_SIN_F32 "D0 = sin(S0 * 2 PI)" / V_COS_F32 "cos(S0 * 2 PI)": the operand is in revolutions; "Full range input
    is supported"; the functional examples fix sin(+-inf) = NaN, sin(-0) = -0, sin(0.25) = 1, sin(-MaxFloat) = 0,
    cos(-0) = 1, cos(0.25) = 0, cos(-MaxFloat) = 1 — so the product with 2 PI is exact (the argument is reduced in
    revolutions: every float of magnitude >= 2^mbits is an integer, whose sine is 0 and cosine 1). An exact zero
    result is +0 (sin(-MaxFloat) => 0x00000000), except sin(-0) = -0."""
    def fn(x: int) -> int:
        if is_nan(x, f) or is_inf(x, f):
            return QNAN
        if is_zero(x, f):
            return f.one if cosine else x
        v = value(x, f)
        r = v - math.floor(v)  # the fraction of a turn, exact
        if r == 0:
            return f.one if cosine else 0
        if r == Fraction(1, 2):
            return (f.sign_bit | f.one) if cosine else 0
        if r == Fraction(1, 4):
            return 0 if cosine else f.one
        if r == Fraction(3, 4):
            return 0 if cosine else f.sign_bit | f.one
        m = _mp()
        t = m.mpf(r.numerator) / r.denominator
        q = m.cospi(2 * t) if cosine else m.sinpi(2 * t)
        return round_to(_mpf_to_fraction(q), f)
    return fn


# ---------------------------------------------------------------------------------------------------------
# more integer and bit operations (RDNA3.5 16.8-16.12 / CDNA4 12.7-12.11 VOP1/VOP2/VOP3)


def shift_rev(bits: int, kind: str) -> Callable[[int, int], int]:
    """V_LSHLREV_B32 "D0 = S1 << S0[4:0]", V_LSHRREV_B32 "D0 = S1 >> S0[4:0]", V_ASHRREV_I32 "D0.i32 = S1.i32 >>
    S0[4:0]" (B16: S0[3:0], 16-bit S1; B64: S0[5:0], 64-bit S1)."""
    sh_mask = bits - 1

    def fn(a: int, b: int) -> int:
        n = a & sh_mask
        if kind == "lshl":
            return (b << n) & mask(bits)
        if kind == "lshr":
            return u(b, bits) >> n
        return u(sext(b, bits) >> n, bits)
    return fn


def bfm(a: int, b: int) -> int:
    """V_BFM_B32: D0 = ((1 << S0[4:0]) - 1) << S1[4:0]."""
    return (((1 << (a & 31)) - 1) << (b & 31)) & 0xFFFFFFFF


def add3(a: int, b: int, c: int) -> int:
    """V_ADD3_U32: D0 = S0 + S1 + S2."""
    return (a + b + c) & 0xFFFFFFFF


def mad_24(signed: bool) -> Callable[[int, int, int], int]:
    """V_MAD_U32_U24: D0 = 32'U(S0.u24) * 32'U(S1.u24) + S2; V_MAD_I32_I24: 32'I(S0.i24) * 32'I(S1.i24) + S2.i32."""
    if signed:
        return lambda a, b, c: u(sext(a, 24) * sext(b, 24) + sext(c, 32), 32)
    return lambda a, b, c: ((a & 0xFFFFFF) * (b & 0xFFFFFF) + c) & 0xFFFFFFFF


def mad_16(signed: bool, wide: bool) -> Callable[[int, int, int], int]:
    """V_MAD_U16: D0.u16 = S0.u16 * S1.u16 + S2.u16; V_MAD_I16 likewise signed (16-bit result); V_MAD_U32_U16:
    D0.u32 = 32'U(S0.u16) * 32'U(S1.u16) + S2.u32; V_MAD_I32_I16: 32'I(S0.i16) * 32'I(S1.i16) + S2.i32."""
    bits = 32 if wide else 16

    def fn(a: int, b: int, c: int) -> int:
        if signed:
            return u(sext(a, 16) * sext(b, 16) + sext(c, bits), bits)
        return u(u(a, 16) * u(b, 16) + u(c, bits), bits)
    return fn


def mul_lo_u16(a: int, b: int) -> int:
    """V_MUL_LO_U16: D0.u16 = S0.u16 * S1.u16."""
    return (a * b) & 0xFFFF


def lerp_u8(a: int, b: int, c: int) -> int:
    """V_LERP_U8: per byte i: (S0.byte[i] + S1.byte[i] + S2.u32[8i]) >> 1."""
    out = 0
    for i in range(4):
        out |= ((((a >> 8 * i) & 0xFF) + ((b >> 8 * i) & 0xFF) + ((c >> 8 * i) & 1)) >> 1) << (8 * i)
    return out


def cvt_off_f32_i4(x: int) -> int:
    """V_CVT_OFF_F32_I4: D0.f32 = CVT_OFF_TABLE[S0[3:0]]: the signed 4-bit value / 16 (1000 -> -0.5, 0111 -> 0.4375)."""
    return round_to(Fraction(sext(x & 15, 4), 16), F32)


def sat_pk_u8_i16(x: int) -> int:
    """V_SAT_PK_U8_I16: D0.b16 = { SAT8(S0[31:16].i16), SAT8(S0[15:0].i16) } (a 16-bit result: gfx11 keeps the
    other half of the register)."""
    return max(0, min(255, sext(x, 16))) | max(0, min(255, sext(x >> 16, 16))) << 8


def mul_dx9_zero(a: int, b: int) -> int:
    """V_MUL_DX9_ZERO_F32 / V_MUL_LEGACY_F32: "if 64'F(S0) == 0.0 || 64'F(S1) == 0.0 then D0 = 0.0F else D0 = S0 *
    S1": a zero operand gives +0 even times inf or NaN."""
    if is_zero(a, F32) or is_zero(b, F32):
        return 0
    return f_mul(a, b, F32)


def subrev_co(a: int, b: int) -> tuple[int, int]:
    """V_SUBREV_CO_U32: D0 = S1 - S0; VCC = S0 > S1 (borrow)."""
    return (b - a) & 0xFFFFFFFF, int(a > b)


def subrevb_co(a: int, b: int, cin: int) -> tuple[int, int]:
    """V_SUBREV_CO_CI_U32 / V_SUBBREV_CO_U32: D0 = S1 - S0 - VCC[lane]; VCC = 64'U(S0) + VCC[lane] > 64'U(S1)."""
    return (b - a - cin) & 0xFFFFFFFF, int(a + cin > b)


def lshl_add_u64(a: int, b: int, c: int) -> int:
    """V_LSHL_ADD_U64: D0.u64 = (S0.u64 << S1.u32[2:0]) + S2.u64 (shift 0..4; CDNA4 12.11)."""
    return ((a << (b & 7)) + c) & mask(64) if (b & 7) <= 4 else ANY


# ---------------------------------------------------------------------------------------------------------
# VOP3P packed math (RDNA3.5 16.10 / CDNA4 12.10): each 16-bit (gfx942 packed f32: 32-bit) half of the result is
# the scalar operation on the halves op_sel (low result) / op_sel_hi (high result) pick; the per-half references
# below take those (modified) halves. V_PK_ADD_U16 "tmp[15:0].u16 = S0[15:0].u16 + S1[15:0].u16" etc.; with clamp
# the integer add/sub saturate to the half's type.


def pk_add_int(signed: bool, subtract: bool = False) -> Callable[..., int]:
    """V_PK_ADD/SUB_U16/I16: tmp.{u,i}16 = S0 +- S1 (wrapping; clamp: saturating)."""
    def fn(a: int, b: int, clamp: bool = False) -> int:
        x, y = (sext(a, 16), sext(b, 16)) if signed else (a & 0xFFFF, b & 0xFFFF)
        v = x - y if subtract else x + y
        if not clamp:
            return u(v, 16)
        return sat_signed(v, 16) if signed else sat_unsigned(v, 16)
    return fn


def pk_shift(kind: str) -> Callable[[int, int], int]:
    """V_PK_LSHLREV_B16 "tmp[15:0].u16 = S1[15:0].u16 << S0.u32[3:0]" (high: S0[19:16]); LSHRREV >>; ASHRREV
    S1.i16 >> (arithmetic)."""
    def fn(a: int, b: int) -> int:
        n = a & 15
        if kind == "lshl":
            return (b << n) & 0xFFFF
        if kind == "lshr":
            return (b & 0xFFFF) >> n
        return u(sext(b, 16) >> n, 16)
    return fn


def pk_mad16(a: int, b: int, c: int) -> int:
    """V_PK_MAD_U16 / V_PK_MAD_I16: tmp = S0 * S1 + S2 (16 bits kept; the same bits signed or unsigned)."""
    return (a * b + c) & 0xFFFF


def pk_mul_lo_u16(a: int, b: int) -> int:
    """V_PK_MUL_LO_U16: tmp.u16 = S0.u16 * S1.u16 (low 16 bits)."""
    return (a * b) & 0xFFFF


# V_FMA_MIX_F32 / V_FMA_MIXLO_F16 / V_FMA_MIXHI_F16 (RDNA3.5 16.10; CDNA4 V_MAD_MIX*): in[i] = S[i].f32 when
# !OPSEL_HI[i], else f16_to_f32 of the half OPSEL[i] picks; NEG_HI is abs, NEG_LO neg; D0.f32 = in0 * in1 + in2
# (fused, one rounding); MIXLO: D0[15:0].f16 = f32_to_f16(in0 * in1 + in2), MIXHI into D0[31:16].


def mix_input(raw: int, opsel: int, opsel_hi: int, neg: bool, abs_: bool) -> int:
    """The f32 bits of one mix input (before the multiply-add): the register's f32 or one f16 half widened."""
    if not opsel_hi:
        x = raw & 0xFFFFFFFF
    else:
        x = convert((raw >> (16 * opsel)) & 0xFFFF, F16, F32)
    if abs_:
        x = fabs(x, F32)
    if neg:
        x = fneg(x, F32)
    return x


def mix_to_f16(a: int, b: int, c: int) -> int:
    """f32_to_f16(in0 * in1 + in2) for the MIXLO/MIXHI forms. The guide does not say whether the sum is rounded to
    f32 first (LLVM selects fptrunc(fma f32) to it, so double rounding) or straight to f16: lanes where the two
    differ are ANY."""
    r32 = f_fma(a, b, c, F32)
    if r32 == QNAN:
        return QNAN
    double = convert(r32, F32, F16)
    if is_inf(r32, F32) or is_zero(r32, F32) or any(is_inf(x, F32) for x in (a, b, c)):
        return double
    once = round_to(value(a, F32) * value(b, F32) + value(c, F32), F16, bool(sign(r32, F32)))
    return double if once == double else ANY
