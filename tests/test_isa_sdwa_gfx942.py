"""gfx942 (CDNA3) SDWA forms of the VOP2 instructions (and a sample of VOP1 and VOPC), one at a time, against references written from the CDNA3/CDNA4
ISA guide's pseudocode (tests/isa_reference.py) and the SDWA rules (tests/isa_harness.sdwa_select / sdwa_place):
every source is a byte, word or dword of its register (SRCn_SEL), zero- or sign-extended (SEXT, integer sources),
then neg/abs (float sources); the result's low bits land in the byte/word DST_SEL names and DST_UNUSED decides the
rest (zeros, the placed part's sign above it, or the old bits). Random selects, an SGPR source now and then (GFX9
SDWA S0/S1), clamp and omod; operands weighted to special values; 192 operand vectors (3 wave64s) per instruction.

The VOP2 list is every VOP2 opcode LLVM's gfx942 assembler accepts with _sdwa (checked by
test_every_vop2_opcode_with_an_sdwa_form_is_covered), the carry-out ops included: LLVM's SIPeepholeSDWA turns
V_ADD_CO_U32 / V_SUB_CO_U32 (and the V_ADDC / V_SUBB that consume their carry) into _sdwa forms at O2, carry in and
out in VCC. clamp on a carry op saturates the result where it carried or borrowed and leaves the carry out as it is
(LLVM selects uaddsat/usubsat to the GFX8 carry-out adds with clamp: the result half is LLVM's; the untouched carry
out is derived, not documented)."""
from __future__ import annotations

import pytest

import isa_harness
import isa_reference as ref
from isa_harness import group_accepted, no_assembler_reason, sdwa_variants, verify

ARCH = "gfx942"
isa_harness.NAN_CLAMP = ref.ANY
F16, F32 = ref.F16, ref.F32

GROUPS: dict[str, list] = {}
REJECTED: list[str] = []
_PENDING: list[tuple[str, object]] = []
WANTED: set[str] = set()
# VOP2 opcodes LLVM assembles with _sdwa on gfx942 that have no SDWA semantics here, with the reason
NOT_COVERED = {"v_pk_fmac_f16": "a packed op under SDWA: neither the ISA guide nor LLVM's codegen (SIPeepholeSDWA "
                                "adds the accumulator only for v_mac/v_fmac) defines what the selects do to the two "
                                "halves and the accumulator; the core refuses it as not implemented"}


def S(key: str, name: str, srcs: tuple[str, ...], dst: str, fn, doc: str, **kw) -> None:
    WANTED.add(name)
    _PENDING.extend((key, c) for c in sdwa_variants(ARCH, name, srcs, dst, fn, doc, **kw))


def _carry(fn, adds: bool):
    """A carry-out reference with clamp: the result saturates (0xFFFFFFFF for adds, 0 for subtracts) where the
    32-bit operation carried or borrowed; the carry out is the operation's own."""
    def with_clamp(*args, clamp: bool = False):
        value, carry = fn(*args)
        if clamp and carry:
            value = 0xFFFFFFFF if adds else 0
        return value, carry
    return with_clamp


def _bitwise(op):
    return {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
            "xnor": lambda a, b: ~(a ^ b) & 0xFFFFFFFF}[op]


# float arithmetic, min/max
for k, f in (("f32", F32), ("f16", F16)):
    S("float", f"v_add_{k}", (k, k), k, ref.add(f), f"V_ADD_{k.upper()}: D0 = S0 + S1")
    S("float", f"v_sub_{k}", (k, k), k, ref.sub(f), f"V_SUB_{k.upper()}: D0 = S0 - S1")
    S("float", f"v_subrev_{k}", (k, k), k, ref.subrev(f), f"V_SUBREV_{k.upper()}: D0 = S1 - S0")
    S("float", f"v_mul_{k}", (k, k), k, ref.mul(f), f"V_MUL_{k.upper()}: D0 = S0 * S1")
    S("float", f"v_min_{k}", (k, k), k, ref.ieee_min(f), f"V_MIN_{k.upper()} (IEEE mode)")
    S("float", f"v_max_{k}", (k, k), k, ref.ieee_max(f), f"V_MAX_{k.upper()} (IEEE mode)")
S("float", "v_ldexp_f16", ("f16", "i16"), "f16", ref.ldexp_op(F16, 16), "V_LDEXP_F16: D0 = S0 * 2 ** S1.i16")
S("select", "v_cndmask_b32", ("b32", "b32", "bit"), "b32", ref.cndmask, "V_CNDMASK_B32: D0 = VCC[lane] ? S1 : S0",
  fmods="all", out_mods=False, sext_ok=False)
# 24-bit multiplies
for nm, fn, kind in (("v_mul_i32_i24", ref.mul_i32_i24, "i32"), ("v_mul_hi_i32_i24", ref.mul_hi_i32_i24, "i32"),
                     ("v_mul_u32_u24", ref.mul_u32_u24, "u32"), ("v_mul_hi_u32_u24", ref.mul_hi_u32_u24, "u32")):
    S("int", nm, (kind, kind), kind, fn, fn.__doc__ or nm, out_mods=False)
# integer min/max, 32 and 16 bits
for bits in (32, 16):
    for signed in (True, False):
        k = ("i" if signed else "u") + str(bits)
        S("int", f"v_min_{k}", (k, k), k, ref.int_min(bits, signed), f"V_MIN_{k.upper()}: S0 < S1 ? S0 : S1",
          out_mods=False)
        S("int", f"v_max_{k}", (k, k), k, ref.int_max(bits, signed), f"V_MAX_{k.upper()}: S0 >= S1 ? S0 : S1",
          out_mods=False)
# shifts and logic
for kind, nm in (("lshl", "lshlrev"), ("lshr", "lshrrev"), ("ashr", "ashrrev")):
    t = "i" if kind == "ashr" else "b"
    S("bits", f"v_{nm}_{t}32", ("u32", "u32"), "u32", ref.shift_rev(32, kind), ref.shift_rev.__doc__, out_mods=False)
    S("bits", f"v_{nm}_{t}16", ("u16", "u16"), "u16", ref.shift_rev(16, kind), ref.shift_rev.__doc__, out_mods=False)
for op in ("and", "or", "xor", "xnor"):
    S("bits", f"v_{op}_b32", ("b32", "b32"), "b32", _bitwise(op), f"V_{op.upper()}_B32: D0 = S0 {op} S1",
      out_mods=False, fmods=False)
# integer add/sub without carry (clamp saturates), v_mul_lo_u16
for bits in (32, 16):
    for nm, sub, rev in (("add", False, False), ("sub", True, False), ("subrev", True, True)):
        S("sat", f"v_{nm}_u{bits}", (f"u{bits}", f"u{bits}"), f"u{bits}", ref.add_nc(bits, False, sub, rev),
          f"V_{nm.upper()}_U{bits}: D0 = S0 {'-' if sub else '+'} S1, saturating with clamp", int_clamp=True)
S("int", "v_mul_lo_u16", ("u16", "u16"), "u16", ref.mul_lo_u16, "V_MUL_LO_U16: D0.u16 = S0.u16 * S1.u16",
  out_mods=False)
# carry out (VCC) and carry in (VCC)
for nm, fn, adds, n_in in (("v_add_co_u32", ref.add_co, True, 2), ("v_sub_co_u32", ref.sub_co, False, 2),
                           ("v_subrev_co_u32", ref.subrev_co, False, 2), ("v_addc_co_u32", ref.addc_co, True, 3),
                           ("v_subb_co_u32", ref.subb_co, False, 3), ("v_subbrev_co_u32", ref.subrevb_co, False, 3)):
    S("carry", nm, ("u32", "u32", "bit")[:n_in], "u32", _carry(fn, adds), fn.__doc__, sdst="mask", int_clamp=True,
      n=10)

# VOP1: moves, bit ops, conversions, rounding (a sample: SDWA on VOP1 shares the select/place path of VOP2)
for nm, src, dst, fn, kw in (
        ("v_mov_b32", "b32", "b32", lambda x: x, {"fmods": False}),
        ("v_not_b32", "b32", "b32", lambda x: ~x & 0xFFFFFFFF, {"fmods": False}),
        ("v_bfrev_b32", "b32", "b32", ref.brev32, {"fmods": False}),
        ("v_ffbh_u32", "b32", "b32", ref.clz, {"fmods": False}),
        ("v_cvt_f32_ubyte1", "b32", "f32", ref.cvt_ubyte(1), {"fmods": False}),
        ("v_cvt_f32_f16", "f16", "f32", ref.f_to_f(F16, F32), {}),
        ("v_cvt_f16_f32", "f32", "f16", ref.f_to_f(F32, F16), {}),
        ("v_cvt_f32_i32", "i32", "f32", ref.int_to_f(F32, 32, True), {}),
        ("v_cvt_f32_u32", "u32", "f32", ref.int_to_f(F32, 32, False), {}),
        ("v_cvt_f16_i16", "i16", "f16", ref.int_to_f(F16, 16, True), {}),
        ("v_cvt_f16_u16", "u16", "f16", ref.int_to_f(F16, 16, False), {}),
        ("v_cvt_i32_f32", "f32", "i32", ref.f_to_int(F32, 32, True), {"out_mods": False}),
        ("v_cvt_u16_f16", "f16", "u16", ref.f_to_int(F16, 16, False), {"out_mods": False}),
        ("v_frexp_mant_f32", "f32", "f32", ref.frexp_mant(F32), {})):
    S("vop1", nm, (src,), dst, fn, fn.__doc__ or nm, **kw)


def _float_cmp(pred: str, f):
    lt, eq = (lambda a, b: ref.f_lt(a, b, f)), (lambda a, b: ref.f_eq(a, b, f))
    nan = lambda a, b: ref.is_nan(a, f) or ref.is_nan(b, f)  # noqa: E731
    return {"lt": lambda a, b: lt(a, b), "eq": lambda a, b: eq(a, b), "ge": lambda a, b: lt(b, a) or eq(a, b),
            "u": nan, "nlt": lambda a, b: not lt(a, b), "lg": lambda a, b: lt(a, b) or lt(b, a)}[pred]


def _int_cmp(pred: str, bits: int, signed: bool):
    def fn(a: int, b: int) -> bool:
        x, y = (ref.sext(a, bits), ref.sext(b, bits)) if signed else (ref.u(a, bits), ref.u(b, bits))
        return {"lt": x < y, "eq": x == y, "ge": x >= y, "ne": x != y, "gt": x > y}[pred]
    return fn


# VOPC: the compare bit per lane in VCC or an SGPR pair (IEEE compares: NaN unordered, -0 == +0)
for k, f in (("f32", F32), ("f16", F16)):
    for pred in ("lt", "eq", "ge", "u", "nlt", "lg"):
        S("vopc", f"v_cmp_{pred}_{k}", (k, k), "bit", _float_cmp(pred, f), f"V_CMP_{pred.upper()}_{k.upper()}")
for bits in (32, 16):
    for signed in (True, False):
        k = ("i" if signed else "u") + str(bits)
        for pred in ("lt", "eq", "ge", "ne", "gt"):
            S("vopc", f"v_cmp_{pred}_{k}", (k, k), "bit", _int_cmp(pred, bits, signed),
              f"V_CMP_{pred.upper()}_{k.upper()}")
S("vopc", "v_cmp_class_f32", ("f32", "u32"), "bit", ref.cmp_class(F32), "V_CMP_CLASS_F32", sext_ok=False)
S("vopc", "v_cmpx_lt_f32", ("f32", "f32"), "bit", _float_cmp("lt", F32), "V_CMPX_LT_F32: EXEC = VCC = S0 < S1")
S("vopc", "v_cmpx_ne_u16", ("u16", "u16"), "bit", _int_cmp("ne", 16, False), "V_CMPX_NE_U16: EXEC = VCC = S0 != S1")
S("vopc", "v_cmpx_class_f16", ("f16", "u16"), "bit", ref.cmp_class(F16), "V_CMPX_CLASS_F16", sext_ok=False)


def _assemble_groups() -> None:
    group_accepted(ARCH, _PENDING, GROUPS, REJECTED)


_assemble_groups()
CASES = [c for cases in GROUPS.values() for c in cases]


def _cases(key: str):
    return pytest.mark.parametrize("case", GROUPS[key], ids=[c.line for c in GROUPS[key]])


@_cases("float")
def test_float_ops_read_the_selected_part_and_place_the_result(case):
    verify(case)


@_cases("select")
def test_cndmask_selects_the_modified_selected_bits(case):
    verify(case)


@_cases("int")
def test_integer_ops_read_zero_or_sign_extended_bytes_and_words(case):
    verify(case)


@_cases("bits")
def test_shifts_and_logic_on_selected_parts(case):
    verify(case)


@_cases("sat")
def test_add_sub_wrap_and_saturate_with_clamp(case):
    verify(case)


@_cases("carry")
def test_carry_ops_take_and_give_the_carry_in_vcc(case):
    verify(case)


@_cases("vop1")
def test_vop1_ops_read_the_selected_part_and_place_the_result(case):
    verify(case)


@_cases("vopc")
def test_compares_of_selected_parts_set_the_lane_mask(case):
    verify(case)


def _base(line: str) -> str:
    return line.split()[0].removesuffix("_sdwa")


def test_every_opcode_keeps_an_assembled_form():
    """Random modifiers LLVM rejects (sext on a float, two SGPRs) drop that variant only; every opcode keeps at
    least two forms, so coverage cannot shrink silently."""
    kept: dict[str, int] = {}
    for c in CASES:
        kept[_base(c.line)] = kept.get(_base(c.line), 0) + 1
    thin = sorted(n for n in WANTED if kept.get(n, 0) < 2)
    assert not thin, f"fewer than two assembled SDWA forms of {thin}:\n" + "\n".join(REJECTED)


def test_every_vop2_opcode_with_an_sdwa_form_is_covered():
    """Every VOP2 opcode of the gfx942 table that LLVM's assembler takes with _sdwa is tested here or named in
    NOT_COVERED with the reason."""
    reason = no_assembler_reason(ARCH)
    if reason:
        pytest.skip(reason)
    from hcqsim.shader.opcodes_gfx942 import VOP2
    tail = " dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:DWORD"
    shapes = ("v2, v10, v12", "v2, vcc, v10, v12", "v2, vcc, v10, v12, vcc", "v2, v10, v12, vcc")
    with_sdwa = {name for name, _ in VOP2.values()
                 if any(isa_harness.accepted(ARCH, f"{name}_sdwa {ops}{tail}") for ops in shapes)}
    vop2 = WANTED & {name for name, _ in VOP2.values()}
    assert with_sdwa - vop2 - set(NOT_COVERED) == set()
    assert vop2 - with_sdwa == set(), "tested opcodes LLVM does not assemble with _sdwa"


def test_pk_fmac_with_sdwa_is_refused_cleanly():
    """The one VOP2 SDWA form without semantics here is a clean "not implemented" naming the instruction."""
    if no_assembler_reason(ARCH):
        pytest.skip(no_assembler_reason(ARCH))
    line = "v_pk_fmac_f16_sdwa v2, v10, v12 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1 src1_sel:DWORD"
    with pytest.raises(isa_harness.Unimplemented, match="v_pk_fmac_f16"):
        isa_harness.compiled(ARCH, line)


def _run_sdwa(line: str, v: dict[int, int], *, mode: int = 0x3F0, ieee: bool = True) -> int:
    """Lane 0 of v2 after `line` on one wave64 with MODE `mode` and RSRC1.IEEE_MODE `ieee`."""
    import numpy as np

    from hcqsim.shader.compile import compile_instr
    from hcqsim.shader.decoder import decode
    from hcqsim.shader.operands import Context
    from hcqsim.shader.waves import EXEC, Waves
    if no_assembler_reason(ARCH):
        pytest.skip(no_assembler_reason(ARCH))
    ctx = Context(64, isa_harness.VGPRS, None, f"isa test {line!r}", ARCH, ieee=ieee)
    run = compile_instr(decode(isa_harness.encoding(ARCH, line), 0, ARCH), ctx)
    W = Waves(1, 64, isa_harness.VGPRS, 1, 64)
    for reg, value in v.items():
        W.v[:, reg, :] = value
    W.set_mask(slice(None), EXEC, np.ones((1, 64), bool))
    W.set_mode(slice(None), mode)
    run(W, slice(None))
    return int(W.v[0, 2, 0])


SDWA_DWORD = " dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:DWORD"


def test_a_flushing_mode_flushes_sdwa_float_sources_and_results():
    """MODE.FP_DENORM f32 = 0 (flush in and out) applies to the SDWA form as to the others: a denormal source
    reads as zero (found while writing the docs: the SDWA path kept denormals)."""
    line = "v_add_f32_sdwa v2, v10, v12" + SDWA_DWORD
    assert _run_sdwa(line, {10: 0x00000001, 12: 0x00000000}) == 0x00000001  # denormals kept (0x3F0)
    assert _run_sdwa(line, {10: 0x00000001, 12: 0x00000000}, mode=0x3C0) == 0x00000000  # flushed


def test_min_with_sdwa_follows_the_ieee_mode_bit():
    """IEEE mode off: a signalling NaN is not quieted but treated as a quiet one, so min gives the number."""
    line = "v_min_f32_sdwa v2, v10, v12" + SDWA_DWORD
    v = {10: 0x7F800001, 12: 0x3F800000}  # min(sNaN, 1.0)
    assert _run_sdwa(line, v, ieee=True) & 0x7FC00000 == 0x7FC00000  # IEEE: the sNaN quieted
    assert _run_sdwa(line, v, ieee=False) == 0x3F800000


def test_modifier_bits_without_a_meaning_are_refused_not_ignored():
    """neg on an integer SDWA source and SEXT on a float one (hand-encoded: LLVM's assembler takes neither) are a
    clean "not implemented" naming the instruction."""
    from hcqsim.shader.compile import compile_instr
    from hcqsim.shader.decoder import decode
    from hcqsim.shader.operands import Context, ShaderUnsupported
    if no_assembler_reason(ARCH):
        pytest.skip(no_assembler_reason(ARCH))
    for line, bit, why in (("v_add_u32_sdwa v2, v10, v12" + SDWA_DWORD, 20, "neg/abs modifier on integer source 0"),
                           ("v_add_f32_sdwa v2, v10, v12" + SDWA_DWORD, 19, "SEXT on float source 0")):
        code = bytearray(isa_harness.encoding(ARCH, line))
        word = int.from_bytes(code[4:8], "little") | 1 << bit
        code[4:8] = word.to_bytes(4, "little")
        with pytest.raises(ShaderUnsupported, match=why):
            compile_instr(decode(bytes(code), 0, ARCH), Context(64, isa_harness.VGPRS, None, "test", ARCH))
