"""VALU compares (v_cmp_* / v_cmpx_*) on gfx1100 and gfx942, one instruction at a time, against references written
from the ISA guides' VOPC pseudocode: every predicate (ordered and unordered) over f16/f32/f64/i16/i32/i64/u16/u32/
u64, the VOPC e32 form (result in VCC) and the VOP3 e64 form (result in an SGPR pair or, for some cases, VCC named
explicitly) with random neg/abs (and gfx11 .l/.h halves) on float sources.

RDNA3.5 16.8 / CDNA4 12.8 (VOPC): "D0.u64[laneId] = S0 < S1" (V_CMP_LT_*), "S0 == S1" (EQ), "S0 <= S1" (LE), "S0 > S1"
(GT), "S0 <> S1" (LG: ordered and not equal), "S0 >= S1" (GE), "!isNAN(S0) && !isNAN(S1)" (O), "isNAN(S0) ||
isNAN(S1)" (U), "!(S0 >= S1)" (NGE), "!(S0 <> S1)" (NLG), "!(S0 > S1)" (NGT), "!(S0 <= S1)" (NLE), "!(S0 == S1)"
(NEQ), "!(S0 < S1)" (NLT), "0" (F), "1" (T / TRU); integers: LT EQ LE GT NE ("S0 <> S1") GE, F, T. Lanes outside EXEC
write 0. V_CMPX_*: "EXEC.u64[laneId] = <the compare>" (gfx11 writes only EXEC); GFX9 v_cmpx also writes its SDST
(VCC for e32) with the same bits (CDNA4 12.8: "EXEC = D = compare result")."""
from __future__ import annotations

import pytest

import isa_harness
import isa_reference as ref
from isa_harness import LANES, SDST_SGPR, ValuCase, keep_accepted, mask_operand, no_assembler_reason, variants, verify
from hcqsim.shader.waves import VCC

FLOAT_PREDS = {
    "f": lambda a, b, lt, eq, un: False,
    "lt": lambda a, b, lt, eq, un: lt(a, b),
    "eq": lambda a, b, lt, eq, un: eq(a, b),
    "le": lambda a, b, lt, eq, un: lt(a, b) or eq(a, b),
    "gt": lambda a, b, lt, eq, un: lt(b, a),
    "lg": lambda a, b, lt, eq, un: lt(a, b) or lt(b, a),
    "ge": lambda a, b, lt, eq, un: lt(b, a) or eq(a, b),
    "o": lambda a, b, lt, eq, un: not un(a, b),
    "u": lambda a, b, lt, eq, un: un(a, b),
    "nge": lambda a, b, lt, eq, un: not (lt(b, a) or eq(a, b)),
    "nlg": lambda a, b, lt, eq, un: not (lt(a, b) or lt(b, a)),
    "ngt": lambda a, b, lt, eq, un: not lt(b, a),
    "nle": lambda a, b, lt, eq, un: not (lt(a, b) or eq(a, b)),
    "neq": lambda a, b, lt, eq, un: not eq(a, b),
    "nlt": lambda a, b, lt, eq, un: not lt(a, b),
    "t": lambda a, b, lt, eq, un: True,
}
INT_PREDS = {
    "f": lambda x, y: False, "lt": lambda x, y: x < y, "eq": lambda x, y: x == y, "le": lambda x, y: x <= y,
    "gt": lambda x, y: x > y, "ne": lambda x, y: x != y, "ge": lambda x, y: x >= y, "t": lambda x, y: True,
}
FLOATS = {"f16": ref.F16, "f32": ref.F32, "f64": ref.F64}


def float_compare(pred: str, f: ref.Fmt):
    """V_CMP_<pred>_F*: IEEE comparisons (any NaN makes LT/EQ/GT false; -0 == +0), as in the module docstring."""
    test = FLOAT_PREDS[pred]

    def fn(a: int, b: int) -> int:
        return int(test(a, b, lambda x, y: ref.f_lt(x, y, f), lambda x, y: ref.f_eq(x, y, f),
                        lambda x, y: ref.is_nan(x, f) or ref.is_nan(y, f)))
    fn.__doc__ = f"V_CMP_{pred.upper()}_{f.name.upper()}"
    return fn


def int_compare(pred: str, bits: int, signed: bool):
    test = INT_PREDS[pred]

    def fn(a: int, b: int) -> int:
        x, y = (ref.sext(a, bits), ref.sext(b, bits)) if signed else (ref.u(a, bits), ref.u(b, bits))
        return int(test(x, y))
    fn.__doc__ = f"V_CMP_{pred.upper()}_{'I' if signed else 'U'}{bits}"
    return fn


class CompareCase(ValuCase):
    """A compare: a quarter of the lanes compare a value with itself, its negation or its neighbour (equal operands,
    +-0 pairs, adjacent values), so EQ/LE/GE/NE are decided both ways. `sdst_too`: GFX9 v_cmpx also writes its
    SDST (`sdst_reg`) with the compare bits."""

    sdst_too: int | None = None

    def inputs(self):
        raw, old, exec_lanes = super().inputs()
        r = isa_harness.rng(self.arch, self.line, "pairs")
        k = self.srcs[0].kind
        width = isa_harness.WIDTH[k]
        a, b = raw[0], list(raw[1])
        for i in range(len(b)):
            roll = r.random()
            if roll < 0.12:
                b[i] = a[i]
            elif roll < 0.18:  # flip a sign bit (16-bit halves: either half)
                b[i] = a[i] ^ (1 << (width - 1)) ^ ((1 << 31) if width == 16 else 0)
            elif roll < 0.25:
                b[i] = (a[i] + r.choice([1, -1, 1 << 16, -(1 << 16)])) & ((1 << (32 if width <= 32 else 64)) - 1)
        return [a, b] + raw[2:], old, exec_lanes

    def run(self, raw, old, exec_lanes):
        st = super().run(raw, old, exec_lanes)
        self._state = st
        return st

    def check(self):
        problem = super().check()
        if problem is not None or self.sdst_too is None:
            return problem
        raw, old, exec_lanes = self.inputs()
        want = self.expected(raw, old, exec_lanes)
        got = self._state.mask(self.sdst_too)
        bad = [f"lane {i}: sources (0x{raw[0][i]:x}, 0x{raw[1][i]:x}): sdst bit {int(got[i])}, want "
               f"{bit if exec_lanes[i] else 0}" for i, (_, bit) in enumerate(want)
               if int(got[i]) != (bit if exec_lanes[i] else 0)]
        if bad:
            return f"{self.line}: v_cmpx SDST: {len(bad)} lanes differ\n    " + "\n    ".join(bad[:6])
        return None


def _as_compare(cases, sdst_too: bool = False):
    out = []
    for c in cases:
        cc = CompareCase(**{k: getattr(c, k) for k in ValuCase.__dataclass_fields__})
        if sdst_too:
            cc.sdst_too = VCC if "_e32 vcc," in c.line else SDST_SGPR
        out.append(cc)
    return out


def _int_kinds(arch: str):
    for bits in (16, 32, 64):
        for signed in (True, False):
            yield ("i" if signed else "u") + str(bits), bits, signed


CASES: list[CompareCase] = []
REJECTED: list[str] = []
WANTED: dict[str, set[str]] = {"gfx1100": set(), "gfx942": set()}

for arch in ("gfx1100", "gfx942"):
    pending = []
    for k, f in FLOATS.items():
        for pred in FLOAT_PREDS:
            p = "tru" if (pred == "t" and arch == "gfx942") else pred
            fn = float_compare(pred, f)
            for x in ("cmp", "cmpx"):
                name = f"v_{x}_{p}_{k}"
                WANTED[arch].add(name)
                cs = variants(arch, name, (k, k), "bit", fn, fn.__doc__, n64=2 if x == "cmp" else 1,
                              out_mods=False, sdst="exec" if x == "cmpx" else None, seed="cmp")
                pending += _as_compare(cs, sdst_too=x == "cmpx" and arch == "gfx942")
    for k, bits, signed in _int_kinds(arch):
        for pred in INT_PREDS:
            if arch == "gfx1100" and bits == 16 and pred in ("f", "t"):
                continue  # RDNA3 has no 16-bit integer F/T compares
            fn = int_compare(pred, bits, signed)
            for x in ("cmp", "cmpx"):
                name = f"v_{x}_{pred}_{k}"
                WANTED[arch].add(name)
                cs = variants(arch, name, (k, k), "bit", fn, fn.__doc__, n64=1, out_mods=False,
                              sdst="exec" if x == "cmpx" else None, seed="cmp")
                pending += _as_compare(cs, sdst_too=x == "cmpx" and arch == "gfx942")
    # the VOP3 form naming VCC as its destination
    sgpr_dst = mask_operand(arch, "sgpr_out")
    for c in list(pending):
        if c.sdst == "sgpr" and c.line.split()[0].endswith("_e64") and ("_eq_" in c.line or "_nge_" in c.line or
                                                                        "_lt_i64" in c.line or "_ge_u16" in c.line):
            vc = CompareCase(**{k: getattr(c, k) for k in ValuCase.__dataclass_fields__})
            vc.line = c.line.replace(sgpr_dst, mask_operand(arch, "vcc"), 1)
            vc.sdst = "vcc"
            pending.append(vc)
    if not no_assembler_reason(arch):
        ok, bad = keep_accepted(arch, pending)
    else:
        ok, bad = pending, []
    CASES += ok
    REJECTED += bad


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_compare_sets_the_lane_mask_per_the_predicate(case):
    verify(case)


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_every_compare_opcode_keeps_an_assembled_form(arch):
    if no_assembler_reason(arch):
        pytest.skip(no_assembler_reason(arch))
    kept = {c.line.split()[0].removesuffix("_e32").removesuffix("_e64") for c in CASES if c.arch == arch}
    assert WANTED[arch] <= kept, f"no assembled form of {sorted(WANTED[arch] - kept)}:\n" + "\n".join(REJECTED[:20])
