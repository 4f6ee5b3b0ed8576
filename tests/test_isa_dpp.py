"""DPP16 forms (e32 with a DPP dword) of VOP1/VOP2 instructions on gfx942 (wave64) and gfx1100 (wave32), one at a
time: src0 is read from the lane the DPP control names (tests/isa_harness.dpp_source_lane, from the GFX9 / RDNA3
guides' DPP_CTRL list), then the operation runs as without DPP (references: tests/isa_reference.py). Every control of
each architecture is drawn (quad_perm, row_shl/shr/ror, row_mirror, row_half_mirror; gfx942 wave_shl/shr/rol/ror and
row_bcast:15/31, row_newbcast (also the one control of 64-bit DPP); gfx1100 row_share/row_xmask), with random ROW_MASK / BANK_MASK (lanes outside are not written),
BOUND_CTRL (a missing or inactive source lane reads 0; without it the lane is not written), gfx1100 FI, DPP8
and VOP3 DPP (with clamp/omod), neg/abs on float sources, and a tenth of the lanes inactive. LLVM emits DPP for wave reductions and scans (the atomic optimizer,
llvm.amdgcn.update.dpp), carry-out adds included for 64-bit ones."""
from __future__ import annotations

import pytest

import isa_harness
import isa_reference as ref
from isa_harness import dpp_variants, keep_accepted, verify

isa_harness.NAN_CLAMP = ref.ANY
F16, F32 = ref.F16, ref.F32
GROUPS: dict[str, list] = {}
REJECTED: list[str] = []
WANTED: dict[str, set[str]] = {"gfx1100": set(), "gfx942": set()}


def _carry(fn):
    return lambda *args: fn(*args)


for arch in ("gfx942", "gfx1100"):
    gfx11 = arch == "gfx1100"
    pending = []

    def D(key, name, srcs, dst, fn, doc, **kw):
        WANTED[arch].add(name)
        pending.extend((key, c) for c in dpp_variants(arch, name, srcs, dst, fn, doc, **kw))

    D("float", "v_add_f32", ("f32", "f32"), "f32", ref.add(F32), "V_ADD_F32: D0 = S0 + S1")
    D("float", "v_mul_f32", ("f32", "f32"), "f32", ref.mul(F32), "V_MUL_F32: D0 = S0 * S1")
    D("float", "v_max_f32", ("f32", "f32"), "f32", ref.ieee_max(F32) if not gfx11 else ref.rdna_max(F32),
      "V_MAX_F32 (IEEE mode)")
    D("float", "v_min_f32", ("f32", "f32"), "f32", ref.ieee_min(F32) if not gfx11 else ref.rdna_min(F32),
      "V_MIN_F32 (IEEE mode)")
    D("int", "v_add_u32" if not gfx11 else "v_add_nc_u32", ("u32", "u32"), "u32", ref.add_nc(32, False),
      "V_ADD_U32: D0 = S0 + S1")
    D("int", "v_max_i32", ("i32", "i32"), "i32", ref.int_max(32, True), "V_MAX_I32")
    D("int", "v_min_u32", ("u32", "u32"), "u32", ref.int_min(32, False), "V_MIN_U32")
    D("int", "v_and_b32", ("b32", "b32"), "b32", lambda a, b: a & b, "V_AND_B32: D0 = S0 & S1", fmods=False)
    D("int", "v_xor_b32", ("b32", "b32"), "b32", lambda a, b: a ^ b, "V_XOR_B32: D0 = S0 ^ S1", fmods=False)
    D("int", "v_lshlrev_b32", ("u32", "u32"), "u32", ref.shift_rev(32, "lshl"), ref.shift_rev.__doc__)
    D("int", "v_mul_u32_u24", ("u32", "u32"), "u32", ref.mul_u32_u24, "V_MUL_U32_U24")
    D("move", "v_mov_b32", ("b32",), "b32", lambda x: x, "V_MOV_B32: D0 = S0", fmods=False)
    D("move", "v_cvt_f32_i32", ("i32",), "f32", ref.int_to_f(F32, 32, True), "V_CVT_F32_I32")
    D("move", "v_cndmask_b32", ("b32", "b32", "bit"), "b32", ref.cndmask, "V_CNDMASK_B32: D0 = VCC ? S1 : S0",
      fmods="all")
    if gfx11:
        D("carry", "v_add_co_ci_u32", ("u32", "u32", "bit"), "u32", ref.addc_co, ref.addc_co.__doc__, sdst="mask",
          n=10)
        D("carry", "v_sub_co_ci_u32", ("u32", "u32", "bit"), "u32", ref.subb_co, ref.subb_co.__doc__, sdst="mask",
          n=10)
    else:
        D("float", "v_add_f16", ("f16", "f16"), "f16", ref.add(F16), "V_ADD_F16: D0 = S0 + S1", zero_hi=True)
        D("int", "v_add_u16", ("u16", "u16"), "u16", ref.add_nc(16, False), "V_ADD_U16: D0 = S0 + S1", zero_hi=True)
        # 64-bit DPP (DP ALU DPP, gfx90a+): row_newbcast only
        D("wide", "v_mov_b64", ("b64",), "b64", lambda x: x, "V_MOV_B64: D0 = S0", fmods=False,
          controls=("row_newbcast",))
        D("wide", "v_fmac_f64", ("f64", "f64"), "f64", ref.fma(ref.F64), "V_FMAC_F64: D0 = fma(S0, S1, D0)",
          controls=("row_newbcast",), acc=True)
        for nm, fn, n_in in (("v_add_co_u32", ref.add_co, 2), ("v_sub_co_u32", ref.sub_co, 2),
                             ("v_subrev_co_u32", ref.subrev_co, 2), ("v_addc_co_u32", ref.addc_co, 3),
                             ("v_subb_co_u32", ref.subb_co, 3), ("v_subbrev_co_u32", ref.subrevb_co, 3)):
            D("carry", nm, ("u32", "u32", "bit")[:n_in], "u32", fn, fn.__doc__, sdst="mask", n=10)
    if gfx11:  # VOP3 DPP: LLVM's DPP combine folds DPP moves into VOP3 forms on gfx11
        D("vop3", "v_add_f32", ("f32", "f32"), "f32", ref.add(F32), "V_ADD_F32: D0 = S0 + S1", vop3=True)
        D("vop3", "v_mul_f32", ("f32", "f32"), "f32", ref.mul(F32), "V_MUL_F32: D0 = S0 * S1", vop3=True)
        D("vop3", "v_fma_f32", ("f32", "f32", "f32"), "f32", ref.fma(F32), "V_FMA_F32: D0 = fma(S0, S1, S2)",
          vop3=True)
        D("vop3", "v_max_f32", ("f32", "f32"), "f32", ref.rdna_max(F32), "V_MAX_F32 (IEEE mode)", vop3=True)
        D("vop3", "v_add3_u32", ("u32", "u32", "u32"), "u32", ref.add3, "V_ADD3_U32", vop3=True)
        D("vop3", "v_lshl_or_b32", ("b32", "b32", "b32"), "b32", ref.lshl_or, "V_LSHL_OR_B32", vop3=True, fmods=False)
    if gfx11:  # 16-bit operations on true16 halves (.l/.h) under DPP: rocPRIM's byte reductions move bytes with
        # DPP and add them with v_add_nc_u16 on .l halves; LLVM folds the DPP move into the add where it can
        D("half", "v_add_nc_u16", ("u16", "u16"), "u16", ref.add_nc(16, False), "V_ADD_NC_U16: D0.u16 = S0.u16 + S1.u16",
          vop3=True)
        D("half", "v_max_i16", ("i16", "i16"), "i16", ref.int_max(16, True), "V_MAX_I16", vop3=True)
        D("half", "v_add_f16", ("f16", "f16"), "f16", ref.add(F16), "V_ADD_F16: D0.f16 = S0.f16 + S1.f16")
        D("half", "v_mul_lo_u16", ("u16", "u16"), "u16", ref.mul_lo_u16, "V_MUL_LO_U16: D0.u16 = S0.u16 * S1.u16",
          vop3=True)
    if gfx11:  # VOPC DPP (gfx942's assembler has no VOPC DPP forms)
        for vop3 in (False, True):
            D("cmp", "v_cmp_lt_f32", ("f32", "f32"), "bit", lambda a, b: ref.f_lt(a, b, F32), "V_CMP_LT_F32", vop3=vop3)
            D("cmp", "v_cmp_eq_u32", ("u32", "u32"), "bit", lambda a, b: a == b, "V_CMP_EQ_U32", vop3=vop3)
            D("cmp", "v_cmp_gt_i32", ("i32", "i32"), "bit",
              lambda a, b: ref.sext(a, 32) > ref.sext(b, 32), "V_CMP_GT_I32", vop3=vop3)
    cases = [c for _, c in pending]
    ok, bad = keep_accepted(arch, cases)
    keep = {id(c) for c in ok}
    for key, c in pending:
        GROUPS.setdefault(key, [])
        if id(c) in keep:
            GROUPS[key].append(c)
    REJECTED += bad

CASES = [c for cs in GROUPS.values() for c in cs]


def _cases(key: str):
    return pytest.mark.parametrize("case", GROUPS[key], ids=[c.id for c in GROUPS[key]])


@_cases("float")
def test_float_ops_read_src0_from_the_lane_the_control_names(case):
    verify(case)


@_cases("int")
def test_integer_ops_read_src0_from_the_lane_the_control_names(case):
    verify(case)


@_cases("move")
def test_moves_conversions_and_selects_under_dpp(case):
    verify(case)


@_cases("vop3")
def test_gfx11_vop3_dpp_forms_apply_the_vop3_modifiers_to_the_moved_source(case):
    verify(case)


@_cases("half")
def test_gfx11_16_bit_ops_under_dpp_read_the_moved_low_half_and_keep_the_high_half(case):
    verify(case)


@_cases("cmp")
def test_gfx11_compares_under_dpp_set_the_lane_mask(case):
    verify(case)


@_cases("wide")
def test_gfx942_64_bit_dpp_moves_whole_register_pairs(case):
    verify(case)


@_cases("carry")
def test_carry_ops_under_dpp_take_and_give_the_carry_in_vcc(case):
    verify(case)


def test_every_opcode_keeps_assembled_forms():
    kept: dict[tuple[str, str], int] = {}
    for c in CASES:
        key = (c.arch, c.line.split()[0].removesuffix("_dpp").removesuffix("_e64"))
        kept[key] = kept.get(key, 0) + 1
    thin = sorted((a, n) for a, names in WANTED.items() for n in names if kept.get((a, n), 0) < 3)
    assert not thin, f"fewer than three assembled DPP forms of {thin}:\n" + "\n".join(REJECTED)
