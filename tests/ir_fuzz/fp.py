"""IEEE-754 binary16/32/64 on bit patterns, written from the standard (not from any emulator code).

Values are plain Python ints holding the bit pattern. Exact arithmetic goes through `fractions.Fraction`
and `round_exact`, which rounds to nearest, ties to even, with gradual underflow and overflow to infinity.
Ops that are correctly rounded when computed in float64 and rounded once more (add, sub, mul, div, sqrt of
f32/f16 operands: 53 >= 2p + 2) use Python floats and numpy's float64 -> narrower conversion, which is
itself a single correct rounding; `tests/test_shader_fuzz.py` checks that against `round_exact`.
"""
from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np

# (exponent bits, fraction bits) per format
FORMATS: dict[str, tuple[int, int]] = {"f16": (5, 10), "f32": (8, 23), "f64": (11, 52)}
WIDTH: dict[str, int] = {"f16": 16, "f32": 32, "f64": 64}


def fields(ty: str) -> tuple[int, int, int, int]:
    """(exponent bits, fraction bits, exponent bias, total width)."""
    e, m = FORMATS[ty]
    return e, m, (1 << (e - 1)) - 1, 1 + e + m


def sign_bit(ty: str) -> int:
    return 1 << (WIDTH[ty] - 1)


def is_nan(bits: int, ty: str) -> bool:
    e, m, _, _ = fields(ty)
    return (bits >> m) & ((1 << e) - 1) == (1 << e) - 1 and bits & ((1 << m) - 1) != 0


def is_snan(bits: int, ty: str) -> bool:
    _, m, _, _ = fields(ty)
    return is_nan(bits, ty) and not (bits >> (m - 1)) & 1


def is_inf(bits: int, ty: str) -> bool:
    e, m, _, _ = fields(ty)
    return bits & ~sign_bit(ty) == ((1 << e) - 1) << m


def is_zero(bits: int, ty: str) -> bool:
    return bits & ~sign_bit(ty) == 0


def is_subnormal(bits: int, ty: str) -> bool:
    e, m, _, _ = fields(ty)
    return (bits >> m) & ((1 << e) - 1) == 0 and bits & ((1 << m) - 1) != 0


def negative(bits: int, ty: str) -> bool:
    return bool(bits & sign_bit(ty))


def inf(ty: str, neg: bool = False) -> int:
    e, m, _, _ = fields(ty)
    return (((1 << e) - 1) << m) | (sign_bit(ty) if neg else 0)


def zero(ty: str, neg: bool = False) -> int:
    return sign_bit(ty) if neg else 0


def quiet(bits: int, ty: str) -> int:
    """The NaN with its quiet bit set (IEEE's quieting keeps sign and payload)."""
    _, m, _, _ = fields(ty)
    return bits | (1 << (m - 1))


def max_finite(ty: str) -> int:
    return inf(ty) - 1


def to_fraction(bits: int, ty: str) -> Fraction:
    """The exact value of a finite pattern (zeros of both signs give 0)."""
    e, m, bias, _ = fields(ty)
    exp = (bits >> m) & ((1 << e) - 1)
    frac = bits & ((1 << m) - 1)
    if exp == 0:
        mag = Fraction(frac, 1 << (m + bias - 1))
    else:
        mag = Fraction((1 << m) | frac) * Fraction(2) ** (exp - bias - m)
    return -mag if negative(bits, ty) else mag


def round_exact(value: Fraction, ty: str, negative_zero: bool = False) -> int:
    """Round an exact real to `ty`, nearest-even; `negative_zero` picks the sign when `value` is 0."""
    e, m, bias, _ = fields(ty)
    if value == 0:
        return zero(ty, negative_zero)
    neg = value < 0
    a = -value if neg else value
    # exponent: 2^k <= a < 2^(k+1)
    k = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** k > a:
        k -= 1
    emin = 1 - bias
    k = max(k, emin)
    # a = q * 2^(k - m) with q rounded to an integer (m + 1 significant bits when normal)
    scaled = a / Fraction(2) ** (k - m)
    q, rem = divmod(scaled.numerator, scaled.denominator)
    twice = 2 * rem
    if twice > scaled.denominator or (twice == scaled.denominator and q & 1):
        q += 1
    if q == 1 << (m + 1):
        q >>= 1
        k += 1
    if k > bias:
        return inf(ty, neg)
    if q < (1 << m):  # subnormal (k == emin) or rounded to zero
        bits = q
    else:
        bits = ((k + bias) << m) | (q - (1 << m))
    return bits | (sign_bit(ty) if neg else 0)


def to_float(bits: int, ty: str) -> float:
    """The value as a Python float (exact: every f16/f32/f64 value is a float64 value). Not for NaNs
    whose payload matters."""
    if ty == "f64":
        return struct.unpack("<d", struct.pack("<Q", bits))[0]
    if ty == "f32":
        return float(np.array([bits], np.uint32).view(np.float32)[0])
    return float(np.array([bits], np.uint16).view(np.float16)[0])


def from_float(x: float, ty: str) -> int:
    """A float64 rounded once (nearest-even) to `ty`. numpy's double -> float / half conversions round
    directly, with subnormals and overflow to infinity."""
    if ty == "f64":
        return struct.unpack("<Q", struct.pack("<d", x))[0]
    with np.errstate(over="ignore", under="ignore"):
        if ty == "f32":
            return int(np.array([x], np.float64).astype(np.float32).view(np.uint32)[0])
        return int(np.array([x], np.float64).astype(np.float16).view(np.uint16)[0])


def int_to_float(value: int, ty: str) -> int:
    """A mathematical integer, correctly rounded to `ty` (no double rounding through float64)."""
    if abs(value) <= 1 << 53:
        return from_float(float(value), ty)
    return round_exact(Fraction(value), ty)


def float_to_int_trunc(bits: int, ty: str) -> int:
    """The finite value truncated toward zero, as a Python int."""
    return math.trunc(to_fraction(bits, ty))


def fma_exact(a: int, b: int, c: int, ty: str) -> int | None:
    """a * b + c with a single rounding. None when the result is a NaN (any NaN input, inf * 0,
    inf - inf); the caller decides which NaN."""
    if is_nan(a, ty) or is_nan(b, ty) or is_nan(c, ty):
        return None
    prod_neg = negative(a, ty) != negative(b, ty)
    if is_inf(a, ty) or is_inf(b, ty):
        if is_zero(a, ty) or is_zero(b, ty):
            return None
        if is_inf(c, ty) and negative(c, ty) != prod_neg:
            return None
        return inf(ty, prod_neg)
    if is_inf(c, ty):
        return c
    prod = to_fraction(a, ty) * to_fraction(b, ty)
    total = prod + to_fraction(c, ty)
    if total == 0:
        if prod == 0 and is_zero(c, ty):  # both addends zero: -0 only if both are -0
            return zero(ty, prod_neg and negative(c, ty))
        return zero(ty, False)  # exact cancellation rounds to +0 in round-to-nearest
    return round_exact(total, ty)
