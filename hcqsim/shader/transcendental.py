"""Transcendental results (v_exp, v_log, v_sin, v_cos in f16 and f32) correctly rounded, and the same on every
host.

numpy's exp2/log2/sin/cos are not: float32 loops have SIMD implementations per CPU level (AVX-512, AVX2,
baseline) that differ from each other and from the C library in the last place, and float64 ones may too (SVML
on AVX-512). So each function is evaluated in float64 (any implementation within a few float64 ulp will do) and
rounded to the result format once; only where that float64 value lies so close to a rounding boundary of the
result format that an implementation's error could put it on either side (within `BAND`, relative: thousands of
float64 ulp) is the lane recomputed exactly with Python's `decimal` (60 significant digits) and rounded from
that. The float64 path decides the rest, and it decides them alike everywhere: a lane whose float64 value is
farther than BAND from every boundary rounds the same from any implementation's value.

Exact ties cannot occur except where the result is exact: exp2 of an integer (2^n, also a tie between two
denormals or 0) and log2 of a power of two (an integer); both are computed exactly.
"""
from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Callable

import numpy as np

F16, F32, F64 = np.float16, np.float32, np.float64
BAND = 2.0 ** -40  # relative distance to a rounding boundary below which a lane is recomputed exactly
_DIGITS = 60
_FORMAT = {F16: (10, 15), F32: (23, 127)}  # mantissa bits, exponent bias


def _ln2() -> Decimal:
    with localcontext() as ctx:
        ctx.prec = _DIGITS + 10
        return Decimal(2).ln()


_LN2 = _ln2()


def round_fraction(q: Fraction, dtype) -> float:
    """q rounded to nearest even in the format `dtype` (f16 or f32), denormals and overflow included, as a float
    (every such value is exact in float64)."""
    mant, bias = _FORMAT[np.dtype(dtype).type]
    if q == 0:
        return 0.0
    sign = -1.0 if q < 0 else 1.0
    q = abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()  # 2^e <= q < 2^(e+2)
    if Fraction(2) ** e > q:
        e -= 1
    elif Fraction(2) ** (e + 1) <= q:
        e += 1
    ulp_exp = max(e, 1 - bias) - mant  # the last place of q's binade (of the denormals below the normal range)
    scaled = q / Fraction(2) ** ulp_exp
    whole = scaled.numerator // scaled.denominator
    rest = scaled - whole
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and whole % 2):
        whole += 1
    value = math.ldexp(whole, ulp_exp)
    largest = math.ldexp(2 ** (mant + 1) - 1, bias - mant)
    return sign * (math.inf if value > largest else value)


def _near_boundary(x64: np.ndarray, r: np.ndarray) -> np.ndarray:
    """bool: the finite float64 values x64 within BAND of the rounding boundary between their rounding r (in
    r's format) and r's neighbour on x64's side (the overflow threshold included)."""
    dt = r.dtype.type
    r64 = r.astype(F64)
    with np.errstate(all="ignore"):
        largest = F64(np.finfo(dt).max)
        top_step = largest - F64(np.nextafter(np.finfo(dt).max, dt(0)))
        up = np.nextafter(r, dt(np.inf)).astype(F64)
        down = np.nextafter(r, dt(-np.inf)).astype(F64)
        up = np.where(np.isinf(up) & np.isfinite(r64), r64 + top_step, up)  # past the largest: the next step
        down = np.where(np.isinf(down) & np.isfinite(r64), r64 - top_step, down)
        boundary = np.where(x64 >= r64, (r64 + up) / 2, (r64 + down) / 2)
        overflow = np.copysign(largest + top_step / 2, x64)
        boundary = np.where(np.isinf(r64), overflow, boundary)
        near = np.abs(x64 - boundary) <= BAND * np.abs(x64)
    return near & np.isfinite(x64)


def correctly_rounded(x64: np.ndarray, dtype, exact: Callable[[int], Fraction]) -> np.ndarray:
    """float64 approximations `x64` of a function's values rounded to `dtype`; lanes near a rounding boundary
    take round_fraction(exact(flat_index), dtype) instead."""
    x64 = np.asarray(x64, F64)
    with np.errstate(all="ignore"):
        r = x64.astype(dtype)
    near = _near_boundary(x64, r)
    if near.any():
        r = np.array(r, copy=True)
        flat = r.reshape(-1)
        for i in np.flatnonzero(near):
            flat[i] = round_fraction(exact(int(i)), dtype)
    return r


def _decimal(fn: Callable[[], Decimal]) -> Fraction:
    with localcontext() as ctx:
        ctx.prec = _DIGITS
        return Fraction(fn())


def exp2_exact(x: float) -> Fraction:
    if x == math.floor(x):
        return Fraction(2) ** int(x)
    return _decimal(lambda: (Decimal(x) * _LN2).exp())


def log2_exact(x: float) -> Fraction:
    m, e = math.frexp(x)
    if m == 0.5:
        return Fraction(e - 1)
    return _decimal(lambda: Decimal(x).ln() / _LN2)


def _taylor(x: Decimal, term: Decimal, n: int) -> Decimal:
    """sum of term * (-x^2)^k / ((n+1)...(n+2k)) over k >= 0: sin (term x, n 1) and cos (term 1, n 0)."""
    total, x2, tiny = term, x * x, Decimal(10) ** -(_DIGITS + 8)
    while abs(term) > tiny:
        term = -term * x2 / ((n + 1) * (n + 2))
        n += 2
        total += term
    return total


def sin_exact(x: float) -> Fraction:
    """sin of the float64 value x (|x| < 8: the operand after the reduction to one turn)."""
    return _decimal(lambda: _taylor(Decimal(x), Decimal(x), 1))


def cos_exact(x: float) -> Fraction:
    return _decimal(lambda: _taylor(Decimal(x), Decimal(1), 0))


def exp2(a: np.ndarray) -> np.ndarray:
    """v_exp_f16/f32: 2^a, correctly rounded."""
    x = np.asarray(a).astype(F64)
    with np.errstate(all="ignore"):
        y = np.exp2(x)
    return correctly_rounded(y, a.dtype, lambda i: exp2_exact(float(x.reshape(-1)[i])))


def log2(a: np.ndarray) -> np.ndarray:
    """v_log_f16/f32: log2(a), correctly rounded (-inf at +-0, NaN below 0)."""
    x = np.asarray(a).astype(F64)
    with np.errstate(all="ignore"):
        y = np.log2(x)
    return correctly_rounded(y, a.dtype, lambda i: log2_exact(float(x.reshape(-1)[i])))


def sin_of(arg: np.ndarray, dtype) -> np.ndarray:
    """sin of float64 arguments, correctly rounded to dtype."""
    with np.errstate(all="ignore"):
        y = np.sin(arg)
    return correctly_rounded(y, dtype, lambda i: sin_exact(float(arg.reshape(-1)[i])))


def cos_of(arg: np.ndarray, dtype) -> np.ndarray:
    with np.errstate(all="ignore"):
        y = np.cos(arg)
    return correctly_rounded(y, dtype, lambda i: cos_exact(float(arg.reshape(-1)[i])))
