"""gfx1100 (RDNA3) VALU instructions, one at a time, against references written from the ISA guide's pseudocode
(tests/isa_reference.py): operands weighted to special values, random legal modifiers (neg, abs, .h/.l halves,
clamp, omod; each variant kept only when LLVM's assembler accepts it), 256 operand vectors per instruction in one run.
An instruction the shader core does not implement is an xfail with reason "unimplemented"."""
from __future__ import annotations

import pytest

import isa_reference as ref
from isa_harness import SRC_VGPRS, OMOD_TEXT, Src, ValuCase, keep_accepted, operand_text, rng, verify

ARCH = "gfx1100"
FLOATS = {"f16": ref.F16, "f32": ref.F32, "f64": ref.F64}


def _float_variants(name: str, kind: str, nsrc: int, fn, doc: str, *, e32: bool = True, n_e64: int = 4,
                    acc: bool = False, dst: str | None = None, suffix64: str = "_e64") -> list[ValuCase]:
    """Cases of one float opcode: the e32 form (no modifiers) and `n_e64` VOP3 forms with random neg/abs, clamp,
    omod and (16-bit) register halves. `acc`: a v_fmac-style accumulator in the destination register."""
    r = rng(ARCH, name)
    dst = dst or kind
    half = kind == "f16"
    out = []
    for form in (["e32"] if e32 else []) + ["e64"] * n_e64:
        mods = form != "e32"
        srcs, texts = [], []
        dst_hi = half and r.random() < 0.5
        for i in range(nsrc):
            neg, ab = mods and r.random() < 0.4, mods and r.random() < 0.3
            hi = (r.random() < 0.5) if half else None
            if half and form == "e32" and i == 0:
                hi = hi  # e32 true16: src0 may name either half as well
            srcs.append(Src(kind, neg=neg, abs=ab, hi=bool(hi)))
            texts.append(operand_text(ARCH, kind, SRC_VGPRS[i], neg, ab, hi))
        if acc:
            srcs.append(Src(kind, hi=dst_hi, where="dst"))
        clamp = mods and r.random() < 0.3
        omod = r.choice([0, 0, 1, 2, 3]) if mods else 0
        d = operand_text(ARCH, dst, 2, hi=dst_hi if half else None)
        mn = name + ("_e32" if form == "e32" else suffix64)
        line = f"{mn} {d}, {', '.join(texts)}" + (" clamp" if clamp else "") + OMOD_TEXT[omod]
        out.append(ValuCase(ARCH, line, fn, srcs, dst, dst_hi=dst_hi, clamp=clamp, omod=omod, doc=doc))
    return out


GROUPS: dict[str, list[ValuCase]] = {}
REJECTED: list[str] = []


def _group(key: str, cases: list[ValuCase]) -> None:
    ok, bad = keep_accepted(ARCH, cases)
    GROUPS.setdefault(key, []).extend(ok)
    REJECTED.extend(bad)


for k, f in FLOATS.items():
    if k != "f64":
        _group("arith", _float_variants(f"v_add_{k}", k, 2, ref.add(f), f"V_ADD_{k.upper()}: D0 = S0 + S1"))
        _group("arith", _float_variants(f"v_sub_{k}", k, 2, ref.sub(f), f"V_SUB_{k.upper()}: D0 = S0 - S1"))
        _group("arith", _float_variants(f"v_subrev_{k}", k, 2, ref.subrev(f), f"V_SUBREV_{k.upper()}: D0 = S1 - S0"))
        _group("arith", _float_variants(f"v_mul_{k}", k, 2, ref.mul(f), f"V_MUL_{k.upper()}: D0 = S0 * S1"))
        _group("fmac", _float_variants(f"v_fmac_{k}", k, 2, ref.fma(f), f"V_FMAC_{k.upper()}: D0 = fma(S0, S1, D0)",
                                       acc=True))
    else:
        _group("arith", _float_variants("v_add_f64", k, 2, ref.add(f), "V_ADD_F64: D0 = S0 + S1", e32=False,
                                        suffix64=""))
        _group("arith", _float_variants("v_mul_f64", k, 2, ref.mul(f), "V_MUL_F64: D0 = S0 * S1", e32=False,
                                        suffix64=""))
    _group("fma", _float_variants(f"v_fma_{k}", k, 3, ref.fma(f), f"V_FMA_{k.upper()}: D0 = fma(S0, S1, S2)",
                                  e32=False, n_e64=6, suffix64=""))
    _group("minmax", _float_variants(f"v_min_{k}", k, 2, ref.ieee_min(f), ref.ieee_min.__doc__.split(":")[0] +
                                     f" ({k}) IEEE mode", e32=k != "f64", suffix64="_e64" if k != "f64" else ""))
    _group("minmax", _float_variants(f"v_max_{k}", k, 2, ref.ieee_max(f), ref.ieee_max.__doc__.split(":")[0] +
                                     f" ({k}) IEEE mode", e32=k != "f64", suffix64="_e64" if k != "f64" else ""))

CASES = [c for cases in GROUPS.values() for c in cases]


def _ids(cases):
    return [c.line for c in cases]


@pytest.mark.parametrize("case", GROUPS["arith"], ids=_ids(GROUPS["arith"]))
def test_add_sub_mul_round_once_to_nearest_even(case):
    verify(case)


@pytest.mark.parametrize("case", GROUPS["fma"], ids=_ids(GROUPS["fma"]))
def test_fma_is_fused_with_a_single_rounding(case):
    verify(case)


@pytest.mark.parametrize("case", GROUPS["fmac"], ids=_ids(GROUPS["fmac"]))
def test_fmac_accumulates_into_the_destination_with_a_single_rounding(case):
    verify(case)


@pytest.mark.parametrize("case", GROUPS["minmax"], ids=_ids(GROUPS["minmax"]))
def test_min_max_order_minus_zero_below_plus_zero_and_quiet_signalling_nans(case):
    verify(case)


def test_every_generated_instruction_text_assembles():
    """The variant generator only writes modifiers LLVM accepts (rejections would silently shrink coverage)."""
    assert not REJECTED, "\n".join(REJECTED)
