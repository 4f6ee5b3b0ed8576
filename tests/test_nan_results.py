"""NaN results are hcqsim's rule, bit for bit, whatever numpy's SIMD path does on this CPU.

The rule (docs/shader_semantics.md, "NaN results"): a float operation whose result is a NaN returns the first NaN
among its sources (operand order, after -/|| modifiers) converted to the result's format (sign kept, payload
left-aligned) and quieted; with no NaN source (0 * inf, inf - inf, sqrt(-1)) the default NaN, sign set
(0xffc00000, 0xfe00, 0xfff8000000000000). Operations whose pseudocode says otherwise keep their own rule:
v_frexp_mant returns S0 itself (a signalling NaN stays signalling).

Each instruction below runs once over every combination of signalling NaN, quiet NaN, +-inf, 0 and 1.5 in its
float sources, on both targets; the expected bits come from the rule written here on Python integers (no code
shared with the emulator), and whether a lane's result is a NaN from Python's own float arithmetic.
`test_same_bits_on_every_simd_path` runs this module again with numpy's wider SIMD paths switched off
(NPY_DISABLE_CPU_FEATURES): an operation that leaves a NaN to numpy fails here on any machine with AVX2 or AVX-512.
"""
from __future__ import annotations

import itertools
import math
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import isa_harness as H

FMT = {"f16": (10, 5), "f32": (23, 8), "f64": (52, 11)}  # mantissa bits, exponent bits
DEFAULT_NAN = {"f16": 0xFE00, "f32": 0xFFC00000, "f64": 0xFFF8000000000000}
VALUES = {  # signalling NaN (+, payload), quiet NaN (-, payload), 1.5, +inf, -inf, +0
    "f16": [0x7D23, 0xFE45, 0x3E00, 0x7C00, 0xFC00, 0x0000],
    "f32": [0x7FA12345, 0xFFC54321, 0x3FC00000, 0x7F800000, 0xFF800000, 0x00000000],
    "f64": [0x7FF4000012345678, 0xFFF8ABCD00000001, 0x3FF8000000000000, 0x7FF0000000000000,
            0xFFF0000000000000, 0],
    "i32": [0, 1, 0xFFFFFFFF, 5],
}


def is_nan(bits: int, fmt: str) -> bool:
    m, e = FMT[fmt]
    return (bits >> m) & ((1 << e) - 1) == (1 << e) - 1 and bits & ((1 << m) - 1) != 0


def quiet_as(bits: int, src: str, dst: str) -> int:
    """A NaN of format src as a quiet NaN of format dst: sign, payload's top bits, quiet bit."""
    ms, es = FMT[src]
    md, ed = FMT[dst]
    sign = bits >> (ms + es)
    payload = bits & ((1 << ms) - 1)
    payload = payload << (md - ms) if md >= ms else payload >> (ms - md)
    return sign << (md + ed) | ((1 << ed) - 1) << md | 1 << (md - 1) | payload & ((1 << md) - 1)


def to_float(bits: int, fmt: str) -> float:
    if fmt == "i32":
        return float(bits - (1 << 32) if bits >> 31 else bits)
    if fmt == "f16":
        return float(np.array(bits, np.uint16).view(np.float16))  # NaN-ness and value only
    if fmt == "f32":
        return struct.unpack("<f", struct.pack("<I", bits))[0]
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def negate(bits: int, fmt: str) -> int:
    return bits ^ (1 << sum(FMT[fmt]))


def absolute(bits: int, fmt: str) -> int:
    return bits & ~(1 << sum(FMT[fmt]))


def expected_nan(result_fmt: str, sources: list[tuple[int, str]]) -> int:
    for bits, fmt in sources:
        if fmt in FMT and is_nan(bits, fmt):
            return quiet_as(bits, fmt, result_fmt)
    return DEFAULT_NAN[result_fmt]


def fma(a, b, c):
    return a * b + c  # NaN-ness: the chosen values never overflow, so fused and unfused agree


def fract(a):
    return a - math.floor(a) if math.isfinite(a) else math.nan


def log2(a):
    return math.nan if math.isnan(a) or a < 0 else 0.0


def sqrt(a):
    return math.nan if math.isnan(a) or a < 0 else 0.0


def sine(a):
    return math.nan if not math.isfinite(a) else 0.0


def ident(a, *_):
    return a


# (instruction text per target, [(register, format, modifier)], result format, NaN-ness, own rule)
# Register 2 is the destination; a 16-bit source or result sits in the register's low half.
def _ops(arch: str) -> list[tuple]:
    gfx11 = arch == "gfx1100"
    l = ".l" if gfx11 else ""  # noqa: E741 - the true16 low-half suffix
    f32 = [(10, "f32", ""), (12, "f32", ""), (14, "f32", "")]
    f16 = [(10, "f16", ""), (12, "f16", ""), (14, "f16", "")]
    f64 = [(10, "f64", ""), (12, "f64", ""), (14, "f64", "")]
    return [
        ("v_add_f32 v2, v10, v12", f32[:2], "f32", lambda a, b: a + b),
        ("v_add_f32_e64 v2, -v10, |v12|", [(10, "f32", "neg"), (12, "f32", "abs")], "f32", lambda a, b: a + b),
        ("v_mul_f32 v2, v10, v12", f32[:2], "f32", lambda a, b: a * b),
        ("v_fma_f32 v2, v10, v12, v14", f32, "f32", fma),
        ("v_div_fmas_f32 v2, v10, v12, v14", f32, "f32", fma),
        (f"v_add_f16 v2{l}, v10{l}, v12{l}", f16[:2], "f16", lambda a, b: a + b),
        (f"v_fma_f16 v2{l}, v10{l}, v12{l}, v14{l}", f16, "f16", fma),
        ("v_add_f64 v[2:3], v[10:11], v[12:13]", f64[:2], "f64", lambda a, b: a + b),
        ("v_fma_f64 v[2:3], v[10:11], v[12:13], v[14:15]", f64, "f64", fma),
        ("v_exp_f32 v2, v10", f32[:1], "f32", ident),
        ("v_log_f32 v2, v10", f32[:1], "f32", log2),
        ("v_sin_f32 v2, v10", f32[:1], "f32", sine),
        ("v_sqrt_f32 v2, v10", f32[:1], "f32", sqrt),
        ("v_rcp_f32 v2, v10", f32[:1], "f32", ident),
        ("v_rsq_f32 v2, v10", f32[:1], "f32", sqrt),
        ("v_floor_f32 v2, v10", f32[:1], "f32", ident),
        ("v_rndne_f32 v2, v10", f32[:1], "f32", ident),
        ("v_fract_f32 v2, v10", f32[:1], "f32", fract),
        (f"v_exp_f16 v2{l}, v10{l}", f16[:1], "f16", ident),
        ("v_ldexp_f32 v2, v10, v12", [(10, "f32", ""), (12, "i32", "")], "f32", ident),
        ("v_cvt_f64_f32 v[2:3], v10", f32[:1], "f64", ident),
        ("v_cvt_f32_f64 v2, v[10:11]", f64[:1], "f32", ident),
        (f"v_cvt_f32_f16 v2, v10{l}", f16[:1], "f32", ident),
        (f"v_cvt_f16_f32 v2{l}, v10", f32[:1], "f16", ident),
        ("v_fma_mix_f32 v2, v10, v12, v14 op_sel_hi:[1,0,1]", [f16[0], f32[1], f16[2]], "f32", fma),
        ("v_fma_mixlo_f16 v2, v10, v12, v14 op_sel_hi:[1,1,1]", f16, "f16", fma),
        ("v_frexp_mant_f32 v2, v10", f32[:1], "f32", "S0"),
        ("v_frexp_mant_f64 v[2:3], v[10:11]", f64[:1], "f64", "S0"),
    ]


def _lanes(sources, lanes_per_wave: int):
    """Every combination of the sources' values, padded to whole waves: a list of per-source bit lists."""
    combos = list(itertools.product(*(VALUES[fmt] for _, fmt, _ in sources)))
    combos = list(itertools.islice(itertools.cycle(combos), -(-len(combos) // lanes_per_wave) * lanes_per_wave))
    return [list(col) for col in zip(*combos)]


def _registers(sources, columns) -> dict[int, np.ndarray]:
    v = {}
    for (reg, fmt, _), col in zip(sources, columns):
        a = np.array(col, np.uint64)
        v[reg] = (a & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        if fmt == "f64":
            v[reg + 1] = (a >> np.uint64(32)).astype(np.uint32)
    return v


def _modified(bits: int, fmt: str, mod: str) -> int:
    return negate(bits, fmt) if mod == "neg" else absolute(bits, fmt) if mod == "abs" else bits


def _result(state, fmt: str) -> list[int]:
    if fmt == "f64":
        return [int(x) for x in state.vector64(2)]
    mask = 0xFFFF if fmt == "f16" else 0xFFFFFFFF
    return [int(x) & mask for x in state.vector(2)]


CASES = [(arch, op) for arch in ("gfx1100", "gfx942") for op in _ops(arch)]


@pytest.mark.parametrize("arch, op", CASES, ids=[f"{a}: {op[0]}" for a, op in CASES])
def test_nan_results_follow_the_rule(arch, op):
    reason = H.no_assembler_reason(arch)
    if reason:
        pytest.skip(reason)
    line, sources, result_fmt, nan_of = op
    lanes = H.LANES[arch]
    columns = _lanes(sources, lanes)
    state = H.run_instruction(arch, line, waves=len(columns[0]) // lanes, v=_registers(sources, columns))
    got = _result(state, result_fmt)
    bad = []
    for lane, raw in enumerate(zip(*columns)):
        srcs = [(_modified(b, fmt, mod), fmt) for b, (_, fmt, mod) in zip(raw, sources)]
        if nan_of == "S0":
            if not is_nan(srcs[0][0], srcs[0][1]):
                continue
            want = srcs[0][0]
        else:
            if not math.isnan(nan_of(*(to_float(b, fmt) for b, fmt in srcs))):
                continue
            want = expected_nan(result_fmt, srcs)
        if got[lane] != want:
            bad.append(f"sources {[hex(b) for b, _ in srcs]}: got {got[lane]:#x}, want {want:#x}")
    assert not bad, f"{line} on {arch}: {len(bad)} NaN lanes break the rule\n  " + "\n  ".join(bad[:8])


PACKED = [("v_pk_add_f16 v2, v10, v12", 2, lambda a, b: a + b), ("v_pk_mul_f16 v2, v10, v12", 2, lambda a, b: a * b),
          ("v_pk_fma_f16 v2, v10, v12, v14", 3, fma)]


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
@pytest.mark.parametrize("line, n, value", PACKED, ids=[p[0] for p in PACKED])
def test_packed_halves_follow_the_rule(arch, line, n, value):
    """Each half by itself: the low halves hold the combinations, the high halves the same ones reversed."""
    reason = H.no_assembler_reason(arch)
    if reason:
        pytest.skip(reason)
    lanes = H.LANES[arch]
    lo = _lanes([(0, "f16", "")] * n, lanes)
    hi = [list(reversed(col)) for col in lo]
    regs = {10 + 2 * i: np.array(lo[i], np.uint32) | np.array(hi[i], np.uint32) << np.uint32(16) for i in range(n)}
    state = H.run_instruction(arch, line, waves=len(lo[0]) // lanes, v=regs)
    got = [int(x) for x in state.vector(2)]
    bad = []
    for lane in range(len(lo[0])):
        for shift, cols in ((0, lo), (16, hi)):
            srcs = [(col[lane], "f16") for col in cols]
            if math.isnan(value(*(to_float(b, "f16") for b, _ in srcs))):
                want, g = expected_nan("f16", srcs), (got[lane] >> shift) & 0xFFFF
                if g != want:
                    bad.append(f"half {shift // 16} sources {[hex(b) for b, _ in srcs]}: got {g:#x}, want {want:#x}")
    assert not bad, f"{line} on {arch}:\n  " + "\n  ".join(bad[:8])


def test_matrix_nan_elements_are_the_default_nan():
    from hcqsim.shader import matrix
    x = np.array([np.nan, -np.nan, 1.5, np.inf])
    assert [int(b) for b in matrix._round_to(x, "f32")] == [0xFFC00000, 0xFFC00000, 0x3FC00000, 0x7F800000]
    assert [int(b) for b in matrix._round_to(x, "f16")] == [0xFE00, 0xFE00, 0x3E00, 0x7C00]
    assert [int(b) for b in matrix._round_to(x, "bf16")] == [0xFFC0, 0xFFC0, 0x3FC0, 0x7F80]


def _simd_levels_off() -> list[str]:
    return [v for v in H.simd_levels().values() if v]


@pytest.mark.skipif(os.environ.get("NPY_DISABLE_CPU_FEATURES") is not None, reason="already the inner run")
@pytest.mark.parametrize("disabled", _simd_levels_off() or [None], ids=lambda d: f"off:{d}" if d else "none")
def test_same_bits_on_every_simd_path(disabled):
    """This module's rule tests, again with numpy's wider SIMD levels switched off: the result bits above are
    exact, so a NaN that numpy's dispatch picks fails on every machine that has more than the baseline."""
    if disabled is None:
        pytest.skip("this CPU offers numpy no SIMD level beyond its baseline")
    env = dict(os.environ, NPY_DISABLE_CPU_FEATURES=disabled)
    here = os.path.dirname(os.path.abspath(__file__))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "-x", os.path.abspath(__file__), "-k", "not simd_path"], cwd=os.path.dirname(here),
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
