"""gfx1100 (RDNA3) VALU instructions, one at a time, against references written from the ISA guide's pseudocode
(tests/isa_reference.py): operands weighted to special values, random legal modifiers (neg, abs, .h/.l halves,
clamp, omod; each variant kept only when LLVM's assembler accepts it), 192 operand vectors (6 wave32s) per instruction in one run.
An instruction the shader core does not implement is an xfail with reason "unimplemented"."""
from __future__ import annotations

import pytest

import isa_harness
import isa_reference as ref
from isa_harness import (OMOD_TEXT, SRC_VGPRS, Check, Src, ValuCase, group_accepted, operand_text, rng, variants,
                         verify)

ARCH = "gfx1100"
isa_harness.NAN_CLAMP = ref.ANY
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


_PENDING: list[tuple[str, ValuCase]] = []


def _group(key: str, cases: list[ValuCase]) -> None:
    _PENDING.extend((key, c) for c in cases)


def _assemble_groups() -> None:
    """Keep the cases LLVM's assembler accepts: every text of the module in one assembler batch."""
    group_accepted(ARCH, _PENDING, GROUPS, REJECTED)


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
    _group("minmax", _float_variants(f"v_min_{k}", k, 2, ref.rdna_min(f) if k != "f64" else ref.ieee_min(f), ref.ieee_min.__doc__.split(":")[0] +
                                     f" ({k}) IEEE mode", e32=k != "f64", suffix64="_e64" if k != "f64" else ""))
    _group("minmax", _float_variants(f"v_max_{k}", k, 2, ref.rdna_max(f) if k != "f64" else ref.ieee_max(f), ref.ieee_max.__doc__.split(":")[0] +
                                     f" ({k}) IEEE mode", e32=k != "f64", suffix64="_e64" if k != "f64" else ""))



def _doc(fn) -> str:
    """The first line of a reference's docstring (of the factory that made it, for closures)."""
    d = fn.__doc__ or getattr(ref, fn.__qualname__.split(".")[0], None).__doc__ or ""
    return " ".join(d.split())[:160]


def V(key: str, name: str, srcs: tuple[str, ...], dst: str, fn, doc: str = "", **kw) -> None:
    _group(key, variants(ARCH, name, srcs, dst, fn, doc or _doc(fn), **kw))


F16, F32, F64 = ref.F16, ref.F32, ref.F64
# division helpers
V("div", "v_div_scale_f32", ("f32", "f32", "f32"), "f32", ref.div_scale(F32), forms=("vop3",), n64=6, sdst="mask",
  out_mods=False, compare=Check(nan="any"), abs_ok=False)
V("div", "v_div_scale_f64", ("f64", "f64", "f64"), "f64", ref.div_scale(F64), forms=("vop3",), n64=6, sdst="mask",
  out_mods=False, compare=Check(nan="any"), abs_ok=False)
V("div", "v_div_fmas_f32", ("f32", "f32", "f32", "bit"), "f32", ref.div_fmas_plain(F32), forms=("vop3",), n64=4,
  implicit_vcc=True)
V("div", "v_div_fmas_f64", ("f64", "f64", "f64", "bit"), "f64", ref.div_fmas_plain(F64), forms=("vop3",), n64=4,
  implicit_vcc=True)
for k, f in FLOATS.items():
    V("div", f"v_div_fixup_{k}", (k, k, k), k, ref.div_fixup(f), forms=("vop3",), n64=5)
# selects and classes
V("cndmask", "v_cndmask_b32", ("b32", "b32", "bit"), "b32", ref.cndmask, "V_CNDMASK_B32: D0 = VCC[lane] ? S1 : S0",
  fmods="all", n64=6, out_mods=False)
V("cndmask", "v_cndmask_b16", ("b16", "b16", "bit"), "b16", ref.cndmask, "V_CNDMASK_B16: D0.u16 = VCC[lane] ? S1 : S0",
  fmods="all", forms=("vop3",), n64=4, out_mods=False)
for k, f in FLOATS.items():
    V("class", f"v_cmp_class_{k}", (k, "u32" if k != "f16" else "u16"), "bit", ref.cmp_class(f), n64=4,
      out_mods=False)
    V("class", f"v_cmpx_class_{k}", (k, "u32" if k != "f16" else "u16"), "bit", ref.cmp_class(f), n64=2,
      out_mods=False, sdst="exec")
# bit manipulation
V("bits", "v_alignbit_b32", ("b32", "b32", "b32"), "b32", ref.alignbit, forms=("vop3",), n64=2)
V("bits", "v_alignbyte_b32", ("b32", "b32", "b32"), "b32", ref.alignbyte, forms=("vop3",), n64=2)
V("bits", "v_cls_i32", ("b32",), "b32", ref.cls, n64=1)
V("bits", "v_clz_i32_u32", ("b32",), "b32", ref.clz, n64=1)
V("bits", "v_ctz_i32_b32", ("b32",), "b32", ref.ctz, n64=1)
V("bits", "v_bfe_u32", ("b32", "b32", "b32"), "b32", ref.bfe_u32, forms=("vop3",), n64=1)
V("bits", "v_bfe_i32", ("b32", "b32", "b32"), "b32", ref.bfe_i32, forms=("vop3",), n64=1)
V("bits", "v_bfi_b32", ("b32", "b32", "b32"), "b32", ref.bfi, forms=("vop3",), n64=1)
V("bits", "v_perm_b32", ("b32", "b32", "b32"), "b32", ref.perm, forms=("vop3",), n64=1)
V("bits", "v_bcnt_u32_b32", ("b32", "b32"), "b32", ref.bcnt, forms=("vop3",), n64=1)
V("bits", "v_bfrev_b32", ("b32",), "b32", ref.brev32, n64=1)
V("bits", "v_lshl_add_u32", ("b32", "b32", "b32"), "b32", ref.lshl_add, forms=("vop3",), n64=1)
V("bits", "v_add_lshl_u32", ("b32", "b32", "b32"), "b32", ref.add_lshl, forms=("vop3",), n64=1)
V("bits", "v_lshl_or_b32", ("b32", "b32", "b32"), "b32", ref.lshl_or, forms=("vop3",), n64=1)
V("bits", "v_xad_u32", ("b32", "b32", "b32"), "b32", ref.xad, forms=("vop3",), n64=1)
for nm, fn in (("v_sad_u8", ref.sad_u8), ("v_sad_hi_u8", ref.sad_hi_u8), ("v_sad_u16", ref.sad_u16),
               ("v_sad_u32", ref.sad_u32), ("v_msad_u8", ref.msad_u8)):
    V("sad", nm, ("b32", "b32", "b32"), "b32", fn, forms=("vop3",), n64=1, int_clamp=False, out_mods=False)
# integer arithmetic, saturating with clamp
for nm, bits, signed, sub, rev in (("v_add_nc_u32", 32, False, False, False), ("v_sub_nc_u32", 32, False, True, False),
                                   ("v_subrev_nc_u32", 32, False, True, True), ("v_add_nc_i32", 32, True, False, False),
                                   ("v_sub_nc_i32", 32, True, True, False), ("v_add_nc_u16", 16, False, False, False),
                                   ("v_sub_nc_u16", 16, False, True, False), ("v_add_nc_i16", 16, True, False, False),
                                   ("v_sub_nc_i16", 16, True, True, False)):
    k = ("i" if signed else "u") + str(bits)
    forms = ("e32", "e64") if nm in ("v_add_nc_u32", "v_sub_nc_u32", "v_subrev_nc_u32") else ("vop3",)
    V("sat", nm, (k, k), k, ref.add_nc(bits, signed, sub, rev), f"{nm.upper()}: D0 = S0 {'-' if sub else '+'} S1, "
      "saturating with clamp", forms=forms, n64=3, int_clamp=True)
V("mul", "v_mul_hi_u32", ("u32", "u32"), "u32", ref.mul_hi_u32, forms=("vop3",), n64=1)
V("mul", "v_mul_hi_i32", ("i32", "i32"), "i32", ref.mul_hi_i32, forms=("vop3",), n64=1)
V("mul", "v_mul_lo_u32", ("u32", "u32"), "u32", ref.mul_lo_u32, forms=("vop3",), n64=1)
V("mul", "v_mul_i32_i24", ("i32", "i32"), "i32", ref.mul_i32_i24, n64=1, out_mods=False)
V("mul", "v_mul_hi_i32_i24", ("i32", "i32"), "i32", ref.mul_hi_i32_i24, n64=1, out_mods=False)
V("mul", "v_mul_u32_u24", ("u32", "u32"), "u32", ref.mul_u32_u24, n64=1, out_mods=False)
V("mul", "v_mul_hi_u32_u24", ("u32", "u32"), "u32", ref.mul_hi_u32_u24, n64=1, out_mods=False)
V("mul", "v_mad_u64_u32", ("u32", "u32", "u64"), "u64", ref.mad_u64_u32, forms=("vop3",), n64=2, sdst="mask",
  out_mods=False)
V("mul", "v_mad_i64_i32", ("i32", "i32", "i64"), "i64", ref.mad_i64_i32, forms=("vop3",), n64=2, sdst="mask",
  out_mods=False)
V("carry", "v_add_co_u32", ("u32", "u32"), "u32", ref.add_co, forms=("vop3",), n64=2, sdst="mask", out_mods=False)
V("carry", "v_sub_co_u32", ("u32", "u32"), "u32", ref.sub_co, forms=("vop3",), n64=2, sdst="mask", out_mods=False)
V("carry", "v_add_co_ci_u32", ("u32", "u32", "bit"), "u32", ref.addc_co, n64=2, sdst="mask", out_mods=False)
V("carry", "v_sub_co_ci_u32", ("u32", "u32", "bit"), "u32", ref.subb_co, n64=2, sdst="mask", out_mods=False)
# three-operand min/max/median
for k, f in FLOATS.items():
    if k == "f64":
        continue
    mn, mx = ref.rdna_min(f), ref.rdna_max(f)
    V("med3", f"v_min3_{k}", (k, k, k), k, ref.min3(mn), f"V_MIN3_{k.upper()}: v_min(v_min(S0, S1), S2)",
      forms=("vop3",), n64=3)
    V("med3", f"v_max3_{k}", (k, k, k), k, ref.min3(mx), f"V_MAX3_{k.upper()}: v_max(v_max(S0, S1), S2)",
      forms=("vop3",), n64=3)
    V("med3", f"v_med3_{k}", (k, k, k), k, ref.med3_float(f, mn, mx), forms=("vop3",), n64=4)
    V("med3", f"v_maxmin_{k}", (k, k, k), k, lambda a, b, c, mn=mn, mx=mx: mn(mx(a, b), c),
      f"V_MAXMIN_{k.upper()}: v_min(v_max(S0, S1), S2)", forms=("vop3",), n64=2)
    V("med3", f"v_minmax_{k}", (k, k, k), k, lambda a, b, c, mn=mn, mx=mx: mx(mn(a, b), c),
      f"V_MINMAX_{k.upper()}: v_max(v_min(S0, S1), S2)", forms=("vop3",), n64=2)
for bits in (32, 16):
    for signed in (True, False):
        k = ("i" if signed else "u") + str(bits)
        mn, mx = ref.int_min(bits, signed), ref.int_max(bits, signed)
        V("med3", f"v_min3_{k}", (k, k, k), k, ref.min3(mn), forms=("vop3",), n64=1)
        V("med3", f"v_max3_{k}", (k, k, k), k, ref.min3(mx), forms=("vop3",), n64=1)
        V("med3", f"v_med3_{k}", (k, k, k), k, ref.med3_int(bits, signed), forms=("vop3",), n64=1)
        if bits == 32:
            V("med3", f"v_maxmin_{k}", (k, k, k), k, lambda a, b, c, mn=mn, mx=mx: mn(mx(a, b), c), forms=("vop3",),
              n64=1)
            V("med3", f"v_minmax_{k}", (k, k, k), k, lambda a, b, c, mn=mn, mx=mx: mx(mn(a, b), c), forms=("vop3",),
              n64=1)
# exponent manipulation
V("exp", "v_ldexp_f32", ("f32", "i32"), "f32", ref.ldexp_op(F32), forms=("vop3",), n64=4)
V("exp", "v_ldexp_f64", ("f64", "i32"), "f64", ref.ldexp_op(F64), forms=("vop3",), n64=4)
V("exp", "v_ldexp_f16", ("f16", "i16"), "f16", ref.ldexp_op(F16, 16), n64=4)
for k, f in FLOATS.items():
    V("exp", f"v_frexp_mant_{k}", (k,), k, ref.frexp_mant(f), n64=2)
    V("exp", f"v_frexp_exp_{'i16' if k == 'f16' else 'i32'}_{k}", (k,), "i16" if k == "f16" else "i32",
      ref.frexp_exp(f, 16 if k == "f16" else 32), n64=2, out_mods=False)
# conversions
for k, f in FLOATS.items():
    for bits, signed in ((16, True), (16, False)) if k == "f16" else ((32, True), (32, False)):
        ik = ("i" if signed else "u") + str(bits)
        V("cvt", f"v_cvt_{ik}_{k}", (k,), ik, ref.f_to_int(f, bits, signed), n64=2, out_mods=False)
        if True:
            V("cvt", f"v_cvt_{k}_{ik}", (ik,), k, ref.int_to_f(f, bits, signed), n64=2)
V("cvt", "v_cvt_floor_i32_f32", ("f32",), "i32", ref.f_to_int(F32, 32, True, "floor"), n64=2, out_mods=False)
V("cvt", "v_cvt_nearest_i32_f32", ("f32",), "i32", ref.f_to_int(F32, 32, True, "nearest"), n64=2, out_mods=False)
V("cvt", "v_cvt_f32_f16", ("f16",), "f32", ref.f_to_f(F16, F32), n64=3)
V("cvt", "v_cvt_f16_f32", ("f32",), "f16", ref.f_to_f(F32, F16), n64=3)
V("cvt", "v_cvt_f64_f32", ("f32",), "f64", ref.f_to_f(F32, F64), n64=3)
V("cvt", "v_cvt_f32_f64", ("f64",), "f32", ref.f_to_f(F64, F32), n64=3)
for i in range(4):
    V("cvt", f"v_cvt_f32_ubyte{i}", ("b32",), "f32", ref.cvt_ubyte(i), n64=1)
V("cvt", "v_cvt_pk_norm_i16_f32", ("f32", "f32"), "b32", ref.cvt_pknorm(F32, True), forms=("vop3",), n64=2,
  out_mods=False)
V("cvt", "v_cvt_pk_norm_u16_f32", ("f32", "f32"), "b32", ref.cvt_pknorm(F32, False), forms=("vop3",), n64=2,
  out_mods=False)
V("cvt", "v_cvt_pk_norm_i16_f16", ("f16", "f16"), "b32", ref.cvt_pknorm(F16, True), forms=("vop3",), n64=2,
  out_mods=False)
V("cvt", "v_cvt_pk_norm_u16_f16", ("f16", "f16"), "b32", ref.cvt_pknorm(F16, False), forms=("vop3",), n64=2,
  out_mods=False)
V("cvt", "v_cvt_pk_i16_i32", ("i32", "i32"), "b32", ref.cvt_pk_i16_i32, forms=("vop3",), n64=1, out_mods=False)
V("cvt", "v_cvt_pk_u16_u32", ("u32", "u32"), "b32", ref.cvt_pk_u16_u32, forms=("vop3",), n64=1, out_mods=False)
V("cvt", "v_cvt_pk_rtz_f16_f32", ("f32", "f32"), "b32", ref.cvt_pkrtz, n64=2, out_mods=False)
V("cvt", "v_cvt_pk_u8_f32", ("f32", "b32", "b32"), "b32", ref.cvt_pk_u8_f32, forms=("vop3",), n64=2, out_mods=False)

_assemble_groups()
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


@pytest.mark.parametrize("case", GROUPS["div"], ids=_ids(GROUPS["div"]))
def test_division_helpers_follow_the_pseudocode(case):
    verify(case)


@pytest.mark.parametrize("case", GROUPS["cndmask"], ids=_ids(GROUPS["cndmask"]))
def test_cndmask_applies_neg_and_abs_to_the_selected_bits(case):
    verify(case)


@pytest.mark.parametrize("case", GROUPS["class"], ids=_ids(GROUPS["class"]))
def test_cmp_class_classifies_the_modified_operand(case):
    verify(case)


@pytest.mark.parametrize("case", GROUPS["bits"], ids=_ids(GROUPS["bits"]))
def test_bit_manipulation(case):
    verify(case)


@pytest.mark.parametrize("case", GROUPS["sad"], ids=_ids(GROUPS["sad"]))
def test_sums_of_absolute_differences(case):
    verify(case)


@pytest.mark.parametrize("case", GROUPS["sat"], ids=_ids(GROUPS["sat"]))
def test_integer_add_sub_wrap_and_saturate_with_clamp(case):
    verify(case)


@pytest.mark.parametrize("case", GROUPS["mul"], ids=_ids(GROUPS["mul"]))
def test_integer_multiplies(case):
    verify(case)


@pytest.mark.parametrize("case", GROUPS["carry"], ids=_ids(GROUPS["carry"]))
def test_carry_chain_sets_the_lane_mask(case):
    verify(case)


@pytest.mark.parametrize("case", GROUPS["med3"], ids=_ids(GROUPS["med3"]))
def test_three_operand_min_max_median(case):
    verify(case)


@pytest.mark.parametrize("case", GROUPS["exp"], ids=_ids(GROUPS["exp"]))
def test_ldexp_and_frexp(case):
    verify(case)


@pytest.mark.parametrize("case", GROUPS["cvt"], ids=_ids(GROUPS["cvt"]))
def test_conversions_round_and_saturate(case):
    verify(case)


CLAMP_NAN = [ValuCase(ARCH, line, fn, srcs, k, clamp=True, doc="clamp: NaN -> +0 with DX10_CLAMP (AMDGPUUsage "
                      "COMPUTE_PGM_RSRC1.DX10_CLAMP; LLVM sets it in every kernel)")
             for line, fn, srcs, k in (("v_add_f32_e64 v2, v10, v12 clamp", ref.add(F32), [Src("f32"), Src("f32")], "f32"),
                                       ("v_mul_f64 v[2:3], v[10:11], v[12:13] clamp", ref.mul(F64),
                                        [Src("f64"), Src("f64")], "f64"),
                                       ("v_fma_f32 v2, v10, v12, v14 clamp", ref.fma(F32), [Src("f32")] * 3, "f32"))]


@pytest.mark.parametrize("case", CLAMP_NAN, ids=_ids(CLAMP_NAN))
def test_clamp_turns_a_nan_result_into_zero(case, monkeypatch):
    monkeypatch.setattr(isa_harness, "NAN_CLAMP", 0)
    verify(case)


def test_every_generated_instruction_text_assembles():
    """The variant generator only writes modifiers LLVM accepts (rejections would silently shrink coverage)."""
    assert not REJECTED, "\n".join(REJECTED)
