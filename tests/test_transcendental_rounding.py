"""v_exp / v_log / v_sin / v_cos results are correctly rounded, and so the same on every host.

The oracle is mpmath at 200 bits, rounded to f32 by mpmath itself: no code shared with hcqsim.shader.transcendental.
The hard inputs below were found by searching millions of random f32 operands for float64 values within 2^-40
(relative) of an f32 rounding boundary: there, a float64 exp2/log2/sin/cos a few ulp off (another CPU's SIMD path,
another C library) would round the other way unless the lane is recomputed exactly. The perturbation tests stand in
for that other host: numpy's float64 function is replaced by one off by a few ulp, and the results must not move.
"""
from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from hcqsim.shader import transcendental

HARD = {  # f32 operands (bits) whose float64 results lie within 2^-40 of an f32 rounding boundary
    "exp2": [0x41CE6939, 0xC19EC01C, 0xC2358FC5, 0xC273600E, 0x4246703B, 0xC2B8139E, 0x42F24FF9, 0xC29DB007],
    "log2": [0x647FED76, 0x19A2493F, 0x4EA36112, 0x4F0F6680, 0x188D3526, 0x22928E33, 0x1166DA80, 0x6C778194],
    "sin": [0x406819AD, 0xC041D2B7, 0xC03BA348, 0xC041D81A, 0x406256C1, 0xBE820C8A, 0x4037E653, 0x3F121516],
    "cos": [0x401819AD, 0xBEFB635D, 0x3F8B0CED, 0xC077C21E, 0xC03819AD, 0x3FBF34B6, 0x407B7D91, 0x3F672FB6],
}


def f32(bits: list[int]) -> np.ndarray:
    return np.array(bits, np.uint32).view(np.float32)


def turn_angle(x: float) -> float:
    """The float64 angle hcqsim takes the sine of: 2*pi times the operand's fraction of a turn (IEEE operations)."""
    return 2 * math.pi * (x - math.floor(x))


def oracle(name: str, x: float) -> float:
    """The f32 value nearest the exact result (normal range), by mpmath."""
    with mpmath.workprec(200):
        v = {"exp2": lambda: mpmath.power(2, mpmath.mpf(x)), "log2": lambda: mpmath.log(mpmath.mpf(x), 2),
             "sin": lambda: mpmath.sin(mpmath.mpf(turn_angle(x))),
             "cos": lambda: mpmath.cos(mpmath.mpf(turn_angle(x)))}[name]()
    with mpmath.workprec(24):
        return float(+v)  # mpmath rounds to the working precision, to nearest


def hcqsim_f32(name: str, a: np.ndarray) -> np.ndarray:
    if name in ("exp2", "log2"):
        return getattr(transcendental, name)(a)
    t = a.astype(np.float64)
    angle = 2 * np.pi * (t - np.floor(t))
    return (transcendental.sin_of if name == "sin" else transcendental.cos_of)(angle, np.float32)


def operands(name: str) -> np.ndarray:
    rng = np.random.default_rng(11)
    spread = {"exp2": rng.uniform(-120, 120, 3000), "log2": np.exp(rng.uniform(-80, 80, 3000)),
              "sin": rng.uniform(-4, 4, 3000), "cos": rng.uniform(-4, 4, 3000)}[name].astype(np.float32)
    return np.concatenate([f32(HARD[name]), spread])


@pytest.mark.parametrize("name", sorted(HARD))
def test_correctly_rounded_against_mpmath(name):
    a = operands(name)
    got = hcqsim_f32(name, a)
    bad = [(hex(int(x.view(np.uint32))), float(g), oracle(name, float(x))) for x, g in zip(a, got)
           if float(g) != oracle(name, float(x))]
    assert not bad, f"{name}: {len(bad)} results not correctly rounded, e.g. {bad[:4]}"


@pytest.mark.parametrize("error", [-2.0 ** -42, -2.0 ** -52, 2.0 ** -52, 2.0 ** -42])
@pytest.mark.parametrize("name", sorted(HARD))
def test_a_float64_function_slightly_off_changes_nothing(monkeypatch, name, error):
    """Another host's float64 exp2/log2/sin/cos, off by `error` (relative; 2^-52 is about one float64 ulp, 2^-42
    about a thousand, still inside the band transcendental.BAND recomputes exactly)."""
    a = f32(HARD[name])
    want = hcqsim_f32(name, a)
    real = getattr(np, name)
    monkeypatch.setattr(transcendental.np, name, lambda x: real(x) * (1 + error))
    got = hcqsim_f32(name, a)
    assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()


@pytest.mark.parametrize("x, dtype, want", [
    (-150.0, np.float32, 0.0),  # 2^-150: exactly halfway between 0 and the smallest f32 denormal: to even, 0
    (-149.0, np.float32, 2.0 ** -149), (-25.0, np.float16, 0.0), (-24.0, np.float16, 2.0 ** -24),
    (128.0, np.float32, math.inf), (15.0, np.float16, 32768.0), (16.0, np.float16, math.inf),
])
def test_exp2_of_an_integer_is_exact_ties_included(x, dtype, want):
    assert float(transcendental.exp2(np.array([x], dtype))[0]) == want


def test_log2_of_a_power_of_two_is_exact():
    a = np.array([2.0 ** k for k in range(-149, 128)], np.float32)
    assert transcendental.log2(a).tolist() == [float(k) for k in range(-149, 128)]


def test_round_fraction_rounds_ties_to_even_and_overflows_past_the_threshold():
    from fractions import Fraction
    one_and_half_ulp = Fraction(1) + Fraction(3, 2 ** 24)  # between 1 + 1 ulp (odd) and 1 + 2 ulp (even)
    assert transcendental.round_fraction(one_and_half_ulp, np.float32) == 1 + 2 * 2.0 ** -23
    assert transcendental.round_fraction(Fraction(1) + Fraction(1, 2 ** 24), np.float32) == 1.0
    largest = float(np.finfo(np.float32).max)
    threshold = Fraction(largest) + Fraction(2 ** 103)  # half a step above the largest f32
    assert transcendental.round_fraction(threshold - 1, np.float32) == largest
    assert transcendental.round_fraction(threshold, np.float32) == math.inf
    assert transcendental.round_fraction(-Fraction(3, 2 ** 150), np.float32) == -(2.0 ** -148)  # 1.5 denormal ulp: 2
    assert transcendental.round_fraction(-Fraction(3, 2 ** 151), np.float32) == -(2.0 ** -149)  # 0.75 ulp: 1
