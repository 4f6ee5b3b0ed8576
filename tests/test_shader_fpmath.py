"""The shader core's IEEE arithmetic (hcqsim.shader.fpmath) against exact rational arithmetic.

The oracle shares no code with the implementation: Python's Fraction computes a*b + c exactly and rounding to
the target format is done here by comparing the neighbours of the candidate result.
"""
import math
from fractions import Fraction

import numpy as np
import pytest

from hcqsim.shader import fpmath, hostjit

RNG = np.random.default_rng(20261201)
FLOATS = (np.float16, np.float32, np.float64)
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def bits(x):
    x = np.asarray(x)
    return x.view(UINT[x.dtype.itemsize])


def round_exact(value: Fraction, dt) -> np.floating:
    """`value` rounded to nearest-even in `dt`, by choosing among the neighbours of a close candidate."""
    finfo = np.finfo(dt)
    top = Fraction(float(finfo.max))
    ulp_top = top - Fraction(float(np.nextafter(finfo.max, dt(0))))
    if abs(value) >= top + ulp_top / 2:
        return dt(math.inf if value > 0 else -math.inf)
    guess = dt(float(value))
    with np.errstate(over="ignore"):
        cands = {guess, np.nextafter(guess, dt(math.inf)), np.nextafter(guess, dt(-math.inf))}
    cands = [c for c in cands if np.isfinite(c)]
    return min(cands, key=lambda c: (abs(Fraction(float(c)) - value), int(bits(c)) & 1))


def operands(dt, n):
    """Random values over the whole exponent range, special values, and addends that cancel the product."""
    info = np.finfo(dt)
    special = np.array([0.0, -0.0, 1.0, -1.0, float(info.tiny), -float(info.tiny), float(info.smallest_subnormal),
                        float(info.max), -float(info.max), float(info.eps), 3.0, -0.75], dt)
    exps = RNG.integers(int(info.minexp) - int(info.nmant), int(info.maxexp), (3, n))
    with np.errstate(all="ignore"):
        wide = (RNG.standard_normal((3, n)) * np.exp2(exps.astype(float))).astype(dt)
    pick = RNG.random((3, n)) < 0.25
    a, b, c = np.where(pick, RNG.choice(special, (3, n)), wide).astype(dt)
    with np.errstate(all="ignore"):
        cancel = (-(a.astype(np.float64) * b)).astype(dt)
        nudge = np.where(RNG.random(n) < 0.5, cancel, np.nextafter(cancel, dt(0)))
    c = np.where(RNG.random(n) < 0.3, nudge, c).astype(dt)
    finite = [np.where(np.isfinite(v), v, dt(1.5)).astype(dt) for v in (a, b, c)]
    return tuple(finite)


def exact_fma(a, b, c, dt):
    x, y, z = float(a), float(b), float(c)
    value = Fraction(x) * Fraction(y) + Fraction(z)
    if value == 0:  # the sign of an exact zero: -0 only for (-0 product) + (-0)
        negative = (x == 0 or y == 0) and math.copysign(1, x) * math.copysign(1, y) < 0 and math.copysign(1, z) < 0
        return dt(-0.0 if negative else 0.0)
    return round_exact(value, dt)


@pytest.fixture(params=["host-jit", "numpy"])
def fma_path(request, monkeypatch):
    """Both FMA paths: LLVM's fma compiled for the host (hostjit, f32/f64) and the numpy emulation."""
    monkeypatch.setattr(hostjit, "enabled", request.param == "host-jit")
    return request.param


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: np.dtype(d).name)
def test_fma_is_correctly_rounded_for_finite_operands(dt, fma_path):
    a, b, c = operands(dt, 3000)
    got = fpmath.fma(a, b, c)
    for i in range(len(a)):
        expect = exact_fma(a[i], b[i], c[i], dt)
        assert bits(got[i]) == bits(expect), (dt, float(a[i]).hex(), float(b[i]).hex(), float(c[i]).hex(),
                                               float(expect).hex(), float(got[i]).hex())


def test_fma_rounds_once_where_a_product_rounded_first_would_not(fma_path):
    a, b = np.float32(1 + 2 ** -23), np.float32(1 - 2 ** -23)
    c = np.float32(-1.0)
    assert fpmath.fma(a, b, c) == np.float32(-(2.0 ** -46))  # a*b rounded to f32 first would give 0


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: np.dtype(d).name)
def test_fma_infinities_and_nans_follow_ieee(dt, fma_path):
    inf, nan = dt(np.inf), dt(np.nan)
    a = np.array([inf, inf, 0, 1, 1, nan], dt)
    b = np.array([0, 1, 1, 1, 1, 1], dt)
    c = np.array([1, -inf, inf, nan, -inf, 1], dt)
    got = fpmath.fma(a, b, c)
    assert np.isnan(got[0]) and np.isnan(got[1]) and got[2] == inf and np.isnan(got[3]) and got[4] == -inf
    assert np.isnan(got[5])


def test_fma64_of_a_finite_product_beside_an_infinite_addend_is_the_addend(fma_path):
    big = np.float64(1e300)
    assert fpmath.fma(np.array([big]), np.array([big]), np.array([-np.inf]))[0] == -np.inf


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: np.dtype(d).name)
def test_ieee_min_max_order_negative_zero_below_positive_zero(dt):
    z, nz = np.array([0.0], dt), np.array([-0.0], dt)
    assert np.signbit(fpmath.vmin(z, nz)[0]) and np.signbit(fpmath.vmin(nz, z)[0])
    assert not np.signbit(fpmath.vmax(z, nz)[0]) and not np.signbit(fpmath.vmax(nz, z)[0])


def snan(dt):
    n = np.dtype(dt).itemsize
    pattern = {2: 0x7D01, 4: 0x7F800123, 8: 0x7FF0000000000123}[n]
    return np.array([pattern], UINT[n]).view(dt)


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: np.dtype(d).name)
def test_ieee_min_max_quiet_a_signalling_nan_and_keep_its_payload(dt):
    s = snan(dt)
    one = np.array([1.0], dt)
    for op in (fpmath.vmin, fpmath.vmax):
        got = op(s, one)
        assert np.isnan(got[0]) and not fpmath.is_snan(got)[0]
        assert bits(got)[0] == bits(fpmath.quiet(s))[0]
        assert bits(op(one, s))[0] == bits(fpmath.quiet(s))[0]


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: np.dtype(d).name)
def test_min_max_return_the_number_beside_a_quiet_nan_and_outside_ieee_mode_beside_any_nan(dt):
    q = np.array([np.nan], dt)
    two = np.array([2.0], dt)
    assert fpmath.vmin(q, two)[0] == 2 and fpmath.vmax(two, q)[0] == 2
    assert fpmath.vmin(snan(dt), two, ieee=False)[0] == 2


def test_med3_of_ordinary_values_is_the_median_and_with_a_nan_is_min3():
    a, b, c = (np.array(v, np.float32) for v in ([1, 5, 3, np.nan], [2, 4, 3, 1], [3, 6, -1, 2]))
    got = fpmath.vmed3(a, b, c)
    assert list(got[:3]) == [2, 5, 3]
    assert got[3] == 1  # min3(nan, 1, 2): the NaN is skipped


def test_fp_class_names_every_class_once():
    x = np.concatenate([snan(np.float32), np.array([np.nan, -np.inf, -1.0, -1e-40, -0.0, 0.0, 1e-40, 1.0, np.inf],
                                                   np.float32)])
    for i in range(10):
        hits = fpmath.fp_class(x, np.uint32(1 << i))
        assert list(np.nonzero(hits)[0]) == [i]


def division_macro(n, d):
    """LLVM's f32/f64 fdiv expansion (AMDGPUCodeGenPrepare / SIISelLowering lowerFDIV32/64), on fpmath."""
    dt = n.dtype
    one = dt.type(1)
    den, _ = fpmath.div_scale(d, d, n)
    num, vcc = fpmath.div_scale(n, d, n)
    with np.errstate(all="ignore"):
        r = (one / den.astype(np.float64)).astype(dt)  # v_rcp: correctly rounded here
    e = fpmath.fma(-den, r, one)
    r1 = fpmath.fma(e, r, r)
    if dt == np.float64:
        e = fpmath.fma(-den, r1, one)
        r1 = fpmath.fma(r1, e, r1)
    with np.errstate(all="ignore"):
        q = (num * r1).astype(dt)
    e2 = fpmath.fma(-den, q, num)
    q1 = fpmath.fma(e2, r1, q)
    e3 = fpmath.fma(-den, q1, num)
    if dt == np.float64:
        fm = fpmath.div_fmas(e3, r1, q1, vcc)
    else:
        fm = fpmath.div_fmas(e3, r1, q1, vcc)
    return fpmath.div_fixup(fm, d, n)


@pytest.mark.parametrize("dt", (np.float32, np.float64), ids=lambda d: np.dtype(d).name)
def test_the_division_macro_built_from_the_helpers_is_correctly_rounded(dt):
    n, d, _ = operands(dt, 3000)
    got = division_macro(n, d)
    with np.errstate(all="ignore"):
        expect = n / d  # numpy's division is IEEE: correctly rounded
    same = (bits(got) == bits(expect)) | (np.isnan(got) & np.isnan(expect))
    bad = np.nonzero(~same)[0]
    assert bad.size == 0, [(float(n[i]).hex(), float(d[i]).hex(), float(expect[i]).hex(), float(got[i]).hex())
                           for i in bad[:5]]


@pytest.mark.parametrize("n, d", [(8.0, 3.4028234663852886e38), (1.0, 3.4028234663852886e38),
                                  (2.0, 2.0 ** 127), (3.0, 2.0 ** 126 * 1.5)])
def test_the_division_macro_is_exact_for_huge_denominators(n, d):
    """8 / FLT_MAX: 1/d is an f32 denormal, so both operands are scaled down first (found by the IR fuzzer)."""
    num, den = np.array([n], np.float32), np.array([d], np.float32)
    got = division_macro(num, den)
    assert bits(got)[0] == bits((num.astype(np.float64) / den).astype(np.float32))[0]


def test_div_fixup_keeps_the_sign_of_a_zero_quotient():
    q = np.array([0.0, 0.0], np.float32)
    d = np.array([-3.0, 3.0], np.float32)
    n = np.array([0.0, -0.0], np.float32)
    got = fpmath.div_fixup(q, d, n)
    assert np.signbit(got).tolist() == [True, True]


def test_div_scale_scales_a_denormal_denominator_and_the_numerator_alike():
    d = np.array([1e-40], np.float32)
    n = np.array([1e-30], np.float32)  # the quotient 1e10 is far from overflow: the denormal rule applies
    den, vcc_d = fpmath.div_scale(d, d, n)
    num, vcc_n = fpmath.div_scale(n, d, n)
    assert den[0] == np.float32(np.ldexp(np.float64(d[0]), 64)) and num[0] == np.float32(np.ldexp(np.float64(n[0]), 64))
    assert not vcc_d[0] and not vcc_n[0]


def test_fma64_zero_and_nonfinite_lanes_are_exact_without_the_rational_fallback(fma_path):
    """Zeros (inactive lanes, zeroed accumulators), signed zeros, infinities and NaNs in every position: exact
    (the rational oracle decides finite results; non-finite ones follow IEEE), and none of these lanes takes the
    per-lane Python fallback, which is kept for extreme exponents only."""
    specials = [0.0, -0.0, 1.5, -3.0, 2.0 ** -1074, -(2.0 ** 1023), np.inf, -np.inf, np.nan, 1e-300, 1e300]
    grid = np.array(np.meshgrid(specials, specials, specials)).reshape(3, -1)
    a, b, c = grid
    before = fpmath.EXACT_FALLBACK["fma64_lanes"]
    got = fpmath.fma(a, b, c)
    fallback = fpmath.EXACT_FALLBACK["fma64_lanes"] - before
    for x, y, z, g in zip(a, b, c, got):
        if not (np.isfinite(x) and np.isfinite(y)):
            with np.errstate(all="ignore"):
                want = x * y + z  # an infinite or NaN factor: the plain operations are IEEE's fma
            assert (np.isnan(g) and np.isnan(want)) or g == want, (x, y, z, g, want)
            continue
        if not np.isfinite(z):  # a finite product never cancels an infinite or NaN addend
            assert (np.isnan(g) and np.isnan(z)) or g == z, (x, y, z, g)
            continue
        assert bits(g) == bits(exact_fma(x, y, z, np.float64)), (float(x).hex(), float(y).hex(), float(z).hex())
    zero_or_special = ~(np.isfinite(a) & np.isfinite(b) & np.isfinite(c)) | (a == 0) | (b == 0) | (c == 0)
    assert fallback <= int((~zero_or_special).sum())  # only lanes with three finite nonzero operands may fall back
