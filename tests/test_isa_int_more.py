"""Integer, bit and miscellaneous VALU instructions on gfx1100 and gfx942 not covered elsewhere: shifts (16/32/64-bit),
logic (and/or/xor/not/xnor, 3-input forms), bfm, add3, 24- and 16-bit multiply-adds, 16/32-bit integer min/max,
v_mul_lo_u16, v_lerp_u8, v_cvt_off_f32_i4, v_sat_pk_u8_i16, v_cvt_i32_i16/u32_u16, v_mul_dx9_zero (gfx942
v_mul_legacy_f32), reversed carry subtracts, v_fmaak/v_fmamk, moves and (gfx942) v_lshl_add_u64 — against the
RDNA3.5 / CDNA4 pseudocode (tests/isa_reference.py). GFX9 16-bit shifts zero bits 31:16 (LLVM
zeroesHigh16BitsOfDest); the other GFX9 16-bit results' high bits are not asserted."""
from __future__ import annotations

import pytest

import isa_harness
import isa_reference as ref
from isa_harness import Check, Src, ValuCase, keep_accepted, no_assembler_reason, variants, verify

isa_harness.NAN_CLAMP = ref.ANY
GROUPS: dict[str, list] = {}
REJECTED: list[str] = []
WANTED: dict[str, set[str]] = {"gfx1100": set(), "gfx942": set()}


def _doc(fn) -> str:
    d = fn.__doc__ or ""
    return " ".join(d.split())[:160]


def _bitwise(op):
    return {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
            "xnor": lambda a, b: ~(a ^ b) & 0xFFFFFFFF}[op]


for arch in ("gfx1100", "gfx942"):
    pending = []
    gfx11 = arch == "gfx1100"

    def V(key, name, srcs, dst, fn, doc="", **kw):
        WANTED[arch].add(name)
        if not gfx11 and isa_harness.WIDTH.get(dst) == 16 and "zero_hi" not in kw:
            kw.setdefault("hi_any", True)
        kw.setdefault("out_mods", False)
        kw.setdefault("n64", 1)
        pending.extend((key, c) for c in variants(arch, name, srcs, dst, fn, doc or _doc(fn), **kw))

    # shifts
    for kind, nm in (("lshl", "lshlrev"), ("lshr", "lshrrev"), ("ashr", "ashrrev")):
        t = "i" if kind == "ashr" else "b"
        V("shift", f"v_{nm}_{t}32", ("u32", "u32"), "u32", ref.shift_rev(32, kind), ref.shift_rev.__doc__)
        V("shift", f"v_{nm}_{t}16", ("u16", "u16"), "u16", ref.shift_rev(16, kind), ref.shift_rev.__doc__,
          forms=("e32", "e64"), **({} if gfx11 else {"zero_hi": True}))
        V("shift", f"v_{nm}_{t}64", ("u32", "u64"), "u64", ref.shift_rev(64, kind), ref.shift_rev.__doc__,
          forms=("vop3",))
    # logic
    for op in ("and", "or", "xor", "xnor"):
        V("logic", f"v_{op}_b32", ("b32", "b32"), "b32", _bitwise(op), f"V_{op.upper()}_B32: D0 = S0 {op} S1")
        if gfx11 and op != "xnor":
            V("logic", f"v_{op}_b16", ("b16", "b16"), "b16", lambda a, b, op=op: _bitwise(op)(a, b) & 0xFFFF,
              f"V_{op.upper()}_B16: D0.u16 = S0.u16 {op} S1.u16", forms=("vop3",))
    V("logic", "v_not_b32", ("b32",), "b32", lambda a: ~a & 0xFFFFFFFF, "V_NOT_B32: D0 = ~S0")
    if gfx11:
        V("logic", "v_not_b16", ("b16",), "b16", lambda a: ~a & 0xFFFF, "V_NOT_B16: D0.u16 = ~S0.u16")
        V("logic", "v_xor3_b32", ("b32",) * 3, "b32", lambda a, b, c: a ^ b ^ c, "V_XOR3_B32: D0 = S0 ^ S1 ^ S2",
          forms=("vop3",))
    V("logic", "v_or3_b32", ("b32",) * 3, "b32", lambda a, b, c: a | b | c, "V_OR3_B32: D0 = S0 | S1 | S2",
      forms=("vop3",))
    V("logic", "v_and_or_b32", ("b32",) * 3, "b32", lambda a, b, c: (a & b) | c, "V_AND_OR_B32: D0 = (S0 & S1) | S2",
      forms=("vop3",))
    V("logic", "v_bfm_b32", ("b32", "b32"), "b32", ref.bfm, forms=("vop3",) if gfx11 else ("e32", "e64"))
    # arithmetic
    V("arith", "v_add3_u32", ("u32",) * 3, "u32", ref.add3, forms=("vop3",))
    V("arith", "v_mad_u32_u24", ("u32",) * 3, "u32", ref.mad_24(False), ref.mad_24.__doc__, forms=("vop3",))
    V("arith", "v_mad_i32_i24", ("i32",) * 3, "i32", ref.mad_24(True), ref.mad_24.__doc__, forms=("vop3",))
    V("arith", "v_mad_u16", ("u16",) * 3, "u16", ref.mad_16(False, False), ref.mad_16.__doc__, forms=("vop3",))
    V("arith", "v_mad_i16", ("i16",) * 3, "i16", ref.mad_16(True, False), ref.mad_16.__doc__, forms=("vop3",))
    V("arith", "v_mad_u32_u16", ("u16", "u16", "u32"), "u32", ref.mad_16(False, True), ref.mad_16.__doc__,
      forms=("vop3",))
    V("arith", "v_mad_i32_i16", ("i16", "i16", "i32"), "i32", ref.mad_16(True, True), ref.mad_16.__doc__,
      forms=("vop3",))
    if not gfx11:
        V("arith", "v_mad_legacy_u16", ("u16",) * 3, "u16", ref.mad_16(False, False), ref.mad_16.__doc__,
          forms=("vop3",))
        V("arith", "v_mad_legacy_i16", ("i16",) * 3, "i16", ref.mad_16(True, False), ref.mad_16.__doc__,
          forms=("vop3",))
        V("arith", "v_lshl_add_u64", ("u64", "u32", "u64"), "u64", ref.lshl_add_u64, forms=("vop3",))
    V("arith", "v_mul_lo_u16", ("u16", "u16"), "u16", ref.mul_lo_u16, forms=("vop3",) if gfx11 else ("e32", "e64"))
    for bits in (16, 32):
        for signed in (True, False):
            k = ("i" if signed else "u") + str(bits)
            forms = ("vop3",) if (gfx11 and bits == 16) else ("e32", "e64")
            V("minmax", f"v_min_{k}", (k, k), k, ref.int_min(bits, signed), f"V_MIN_{k.upper()}: S0 < S1 ? S0 : S1",
              forms=forms)
            V("minmax", f"v_max_{k}", (k, k), k, ref.int_max(bits, signed), f"V_MAX_{k.upper()}: S0 >= S1 ? S0 : S1",
              forms=forms)
    V("misc", "v_lerp_u8", ("b32",) * 3, "b32", ref.lerp_u8, forms=("vop3",))
    V("misc", "v_cvt_off_f32_i4", ("b32",), "f32", ref.cvt_off_f32_i4, out_mods=True, n64=2)
    V("misc", "v_sat_pk_u8_i16", ("b32",), "b16", ref.sat_pk_u8_i16)  # "a packed 16-bit value": D0.b16
    if gfx11:
        V("misc", "v_cvt_i32_i16", ("i16",), "i32", lambda x: ref.u(ref.sext(x, 16), 32),
          "V_CVT_I32_I16: D0.i32 = 32'I(signext(S0.i16))")
        V("misc", "v_cvt_u32_u16", ("u16",), "u32", lambda x: x & 0xFFFF, "V_CVT_U32_U16: D0 = 32'U(S0.u16)")
        V("misc", "v_mul_dx9_zero_f32", ("f32", "f32"), "f32", ref.mul_dx9_zero, out_mods=True, n64=3)
        V("carry", "v_subrev_co_u32", ("u32", "u32"), "u32", ref.subrev_co, forms=("vop3",), sdst="mask", n64=2)
        V("carry", "v_subrev_co_ci_u32", ("u32", "u32", "bit"), "u32", ref.subrevb_co, sdst="mask", n64=2)
        V("move", "v_mov_b16", ("b16",), "b16", lambda x: x, "V_MOV_B16: D0.b16 = S0.b16", fmods=False)
    else:
        V("misc", "v_mul_legacy_f32", ("f32", "f32"), "f32", ref.mul_dx9_zero, out_mods=True, n64=3)
        V("carry", "v_subrev_co_u32", ("u32", "u32"), "u32", ref.subrev_co, sdst="mask", n64=2)
        V("carry", "v_subbrev_co_u32", ("u32", "u32", "bit"), "u32", ref.subrevb_co, sdst="mask", n64=2)
    V("move", "v_mov_b32", ("b32",), "b32", lambda x: x, "V_MOV_B32: D0.b32 = S0.b32", fmods=False)
    # v_fmaak / v_fmamk: a literal K
    r = isa_harness.rng(arch, "fmak")
    for k in (("f16", "f32") if gfx11 else ("f32",)):
        f = ref.FMTS[k]
        for _ in range(3):
            K = isa_harness.values(k, 1, r)[0]
            if ref.is_nan(K, f):
                K = f.one
            dst = "v2" if k == "f32" else "v2.l"
            s = [isa_harness.operand_text(arch, k, x, hi=False if (gfx11 and k == "f16") else None) for x in (10, 12)]
            for name, fn, line in (
                    (f"v_fmaak_{k}", lambda a, b, K=K, f=f: ref.f_fma(a, b, K, f), f"v_fmaak_{k} {dst}, {s[0]}, {s[1]}, 0x{K:x}"),
                    (f"v_fmamk_{k}", lambda a, b, K=K, f=f: ref.f_fma(a, K, b, f), f"v_fmamk_{k} {dst}, {s[0]}, 0x{K:x}, {s[1]}")):
                WANTED[arch].add(name)
                pending.append(("fmak", ValuCase(arch, line, fn, [Src(k), Src(k)], k, doc=f"{name.upper()}: D0 = fma(S0, "
                                                 f"{'S1, K' if 'aak' in name else 'K, S1'})",
                                                 hi_any=not gfx11 and k == "f16")))
    cases = [c for _, c in pending]
    ok, bad = keep_accepted(arch, cases) if not no_assembler_reason(arch) else (cases, [])
    keep = {id(c) for c in ok}
    for key, c in pending:
        GROUPS.setdefault(key, [])
        if id(c) in keep:
            GROUPS[key].append(c)
    REJECTED += bad

CASES = [c for cs in GROUPS.values() for c in cs]
ALL = sorted(GROUPS)


def _cases(key):
    return pytest.mark.parametrize("case", GROUPS.get(key, []), ids=[c.id for c in GROUPS.get(key, [])])


@_cases("shift")
def test_shifts_take_the_amount_from_src0(case):
    verify(case)


@_cases("logic")
def test_bitwise_logic(case):
    verify(case)


@_cases("arith")
def test_integer_multiply_adds(case):
    verify(case)


@_cases("minmax")
def test_integer_min_max(case):
    verify(case)


@_cases("misc")
def test_byte_and_packing_helpers(case):
    verify(case)


@_cases("carry")
def test_reversed_subtracts_set_the_borrow(case):
    verify(case)


@_cases("move")
def test_moves(case):
    verify(case)


@_cases("fmak")
def test_fmaak_fmamk_with_a_literal(case):
    verify(case)


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_every_opcode_keeps_an_assembled_form(arch):
    if no_assembler_reason(arch):
        pytest.skip(no_assembler_reason(arch))
    kept = {c.line.split()[0].removesuffix("_e32").removesuffix("_e64") for c in CASES if c.arch == arch}
    assert WANTED[arch] <= kept, f"no assembled form of {sorted(WANTED[arch] - kept)}:\n" + "\n".join(REJECTED)
