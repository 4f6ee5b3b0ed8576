"""The translating execution path (hcqsim.shader.translate) against the interpreter, its reference.

* block level: random straight-line programs of covered gfx1100 instructions (integer and f32 VALU, carries, compares,
  SALU, EXEC written mid-block), assembled by LLVM, run on random register state (special float values, NaNs,
  partial EXEC, an all-off wave) by the interpreter's closures one instruction at a time and by one translated block;
  every VGPR, SGPR, SCC and PC must be identical;
* kernel level: kernels run by the whole emulator with shader="interpret" and shader="translate" leave the same
  memory, the same shader-core stats (issue steps, wave and lane instructions) and the same runaway reports (PC and
  instruction named), at every max_kernel_steps around the block boundaries;
* planted bugs: each kind of translator bug the differential tests are meant to catch (wrong operation, EXEC ignored,
  carry wrong, NaN rule skipped, step count off by one) is planted and must be caught.
"""
from __future__ import annotations

import os
import random
import sys

import numpy as np
import pytest

from isa_harness import Rejected, assemble_all, encoding, no_assembler_reason, values

from hcqsim.shader import translate as T
from hcqsim.shader.compile import compile_instr
from hcqsim.shader.decoder import decode
from hcqsim.shader.operands import Context
from hcqsim.shader.waves import EXEC, VCC, Waves

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hwtests"))
import kernel_corpus as K  # noqa: E402

ARCH, LANES, VGPRS = "gfx1100", 32, 16
ARCHES = {"gfx1100": 32, "gfx942": 64}
pytestmark = pytest.mark.skipif(no_assembler_reason(ARCH) is not None, reason=str(no_assembler_reason(ARCH)))

_V2 = ["v_add_nc_u32", "v_sub_nc_u32", "v_subrev_nc_u32", "v_and_b32", "v_or_b32", "v_xor_b32", "v_lshlrev_b32",
       "v_lshrrev_b32", "v_ashrrev_i32", "v_min_u32", "v_max_u32", "v_min_i32", "v_max_i32"]
_VF2 = ["v_add_f32", "v_sub_f32", "v_subrev_f32", "v_mul_f32", "v_fmac_f32"]
_V3 = ["v_mul_lo_u32", "v_bfe_u32", "v_bfi_b32", "v_fma_f32", "v_add3_u32", "v_lshl_add_u32", "v_lshl_or_b32",
       "v_and_or_b32", "v_or3_b32", "v_xad_u32", "v_mul_u32_u24", "v_add_lshl_u32"]
_S2 = ["s_add_u32", "s_sub_u32", "s_addc_u32", "s_subb_u32", "s_add_i32", "s_sub_i32", "s_mul_i32", "s_and_b32",
       "s_or_b32", "s_xor_b32", "s_and_not1_b32", "s_or_not1_b32", "s_nand_b32", "s_nor_b32", "s_xnor_b32",
       "s_lshl_b32", "s_lshr_b32", "s_ashr_i32", "s_min_u32", "s_max_u32", "s_min_i32", "s_max_i32", "s_cselect_b32",
       "s_lshl1_add_u32", "s_lshl3_add_u32", "s_pack_ll_b32_b16", "s_pack_lh_b32_b16", "s_pack_hh_b32_b16",
       "s_pack_hl_b32_b16"]
_S2W = ["s_and_b64", "s_or_b64", "s_xor_b64", "s_nand_b64", "s_cselect_b64"]
_CONSTS = ["0", "1", "-1", "64", "-16", "0.5", "1.0", "-4.0", "0x12345678", "0x3fc00000", "0x7fc00001", "0xff800001"]


def _v(r):
    return f"v{r.randrange(VGPRS)}"


def _s(r):
    return f"s{r.randrange(0, 40)}"


def _src(r, vector_ok=True):
    roll = r.random()
    if roll < 0.55 and vector_ok:
        return _v(r)
    if roll < 0.75:
        return r.choice([_s(r), "vcc_lo", "exec_lo", "m0"])
    return r.choice(_CONSTS)


def _ssrc(r):
    return _s(r) if r.random() < 0.7 else r.choice(["0", "1", "-1", "63", "0x12345678", "scc", "vcc_lo"])


def _pair(r):
    return f"s[{2 * r.randrange(0, 19)}:{2 * r.randrange(0, 19) + 1}]".replace(":", ":") if False else \
        (lambda k: f"s[{k}:{k + 1}]")(2 * r.randrange(0, 19))


def _vp(r):
    """An even-aligned VGPR pair (gfx942 requires the alignment; gfx1100 accepts it)."""
    k = 2 * r.randrange(VGPRS // 2)
    return f"v[{k}:{k + 1}]"


def _src64(r):
    roll = r.random()
    if roll < 0.6:
        return _vp(r)
    if roll < 0.8:
        return _pair(r)
    return r.choice(["0", "1", "-1", "64", "-16"])


def _vb(r, banks):
    """A VGPR in one of the given banks (register number mod 4): VOPD's X and Y sources must differ in bank."""
    return f"v{4 * r.randrange(VGPRS // 4) + r.choice(banks)}"


_DUAL = ["v_dual_add_f32", "v_dual_sub_f32", "v_dual_subrev_f32", "v_dual_mul_f32", "v_dual_add_nc_u32",
         "v_dual_lshlrev_b32", "v_dual_and_b32", "v_dual_fmac_f32", "v_dual_cndmask_b32"]


def _dual_half(r, banks, dst, second: bool) -> str:
    y_only = ["v_dual_add_nc_u32", "v_dual_lshlrev_b32", "v_dual_and_b32"]  # opcodes past VOPD_X_MAX
    op = r.choice([o for o in _DUAL if o not in y_only] + ["v_dual_mov_b32", "v_dual_fmaak_f32", "v_dual_fmamk_f32"]
                  if not second else _DUAL + ["v_dual_mov_b32"])
    s0 = _vb(r, banks) if r.random() < 0.7 else r.choice([_s(r), "0", "1.0", "-4.0", "0x3fc00000"])
    if op == "v_dual_mov_b32":
        return f"{op} {dst}, {s0}"
    if op == "v_dual_fmaak_f32":
        return f"{op} {dst}, {s0}, {_vb(r, banks)}, 0x3fc00000"
    if op == "v_dual_fmamk_f32":
        return f"{op} {dst}, {s0}, 0x3fc00000, {_vb(r, banks)}"
    if op == "v_dual_cndmask_b32":
        return f"{op} {dst}, {s0}, {_vb(r, banks)}"
    return f"{op} {dst}, {s0}, {_vb(r, banks)}"


def _mod(r, operand: str) -> str:
    """A VOP3 source with a random source modifier (-x, |x|, -|x|); constants and SGPRs too."""
    return r.choice([f"-{operand}", f"|{operand}|", f"-|{operand}|"])


def random_modifier_line(r, gfx9: bool = False) -> str:
    """f32 and raw-bit VALU with source modifiers (VOP3 forms), gfx1100 or GFX9 syntax."""
    k = r.randrange(4)
    if k == 0:
        op = r.choice(["v_add_f32_e64", "v_sub_f32_e64", "v_mul_f32_e64", "v_subrev_f32_e64"])
        return f"{op} {_v(r)}, {_mod(r, _v(r))}, {_mod(r, _v(r)) if r.random() < 0.5 else _v(r)}"
    if k == 1:
        return f"v_fma_f32 {_v(r)}, {_mod(r, _v(r))}, {_v(r)}, {_mod(r, _v(r))}"
    if k == 2:
        mask = _pair(r) if gfx9 else _s(r)
        return f"v_cndmask_b32_e64 {_v(r)}, {_mod(r, _v(r))}, {_mod(r, _v(r))}, {mask}"
    dst = _pair(r) if gfx9 else _s(r)
    return f"v_cmp_{r.choice(['lt', 'eq', 'nge', 'u'])}_f32_e64 {dst}, {_mod(r, _v(r))}, {_mod(r, _v(r))}"


_FCMP = ["f", "lt", "eq", "le", "gt", "lg", "ge", "o", "u", "nge", "nlg", "ngt", "nle", "neq", "nlt", "t"]


def random_line_new(r) -> str:
    """The families added second (64-bit VALU, VOPD, v_cmpx, saveexec), gfx1100 syntax."""
    k = r.randrange(7)
    if k == 6:
        return random_modifier_line(r)
    if k == 5:
        op = r.choice(_FCMP)
        return r.choice([f"v_cmp_{op}_f32 vcc_lo, {_src(r)}, {_v(r)}",
                         f"v_cmp_{op}_f32_e64 {_s(r)}, {_src(r)}, {_src(r)}", f"v_cmpx_{op}_f32 {_src(r)}, {_v(r)}"])
    if k == 0:
        op = r.choice(["v_mad_u64_u32", "v_mad_i64_i32"])
        return f"{op} {_vp(r)}, {r.choice([_s(r), 'vcc_lo', 'null'])}, {_src(r)}, {_src(r)}, {_src64(r)}"
    if k == 1:
        return r.choice([f"{r.choice(['v_lshlrev_b64', 'v_lshrrev_b64', 'v_ashrrev_i64'])} {_vp(r)}, {_src(r)}, "
                         f"{_src64(r)}", f"v_mad_u32_u24 {_v(r)}, {_src(r)}, {_src(r)}, {_v(r)}"])
    if k == 2:
        x = 2 * r.randrange(VGPRS // 2)
        y = 2 * r.randrange(VGPRS // 2) + 1
        return f"{_dual_half(r, (0, 1), f'v{x}', False)} :: {_dual_half(r, (2, 3), f'v{y}', True)}"
    if k == 3:
        op, t = r.choice(["eq", "ne", "lt", "le", "gt", "ge"]), r.choice(["u32", "i32"])
        return f"v_cmpx_{op}_{t} {_src(r)}, {_v(r)}" if r.random() < 0.5 else \
            f"v_cmpx_{op}_{t}_e64 {_src(r)}, {_src(r)}"
    op = r.choice(["and", "or", "xor", "nand", "nor", "xnor", "and_not0", "or_not0", "and_not1", "or_not1"])
    return f"s_{op}_saveexec_b32 {r.choice([_s(r), 'vcc_lo'])}, {_ssrc(r)}"


def random_line(r) -> str:
    if r.random() < 0.25:
        return random_line_new(r)
    k = r.randrange(16)
    if k < 4:
        return f"{r.choice(_V2)} {_v(r)}, {_src(r)}, {_v(r)}"
    if k < 6:
        return f"{r.choice(_VF2)} {_v(r)}, {_src(r)}, {_v(r)}"
    if k == 6:
        return f"{r.choice(_V3)} {_v(r)}, {_src(r)}, {_src(r)}, {_v(r)}" if r.random() < 0.5 else \
            f"{r.choice(['v_mul_lo_u32', 'v_add_nc_u32_e64', 'v_min_i32_e64', 'v_mul_hi_u32', 'v_mul_hi_i32'])} " \
            f"{_v(r)}, {_src(r)}, {_src(r)}"
    if k == 7:
        return r.choice([f"v_mov_b32 {_v(r)}, {_src(r)}", f"v_not_b32 {_v(r)}, {_src(r)}",
                         f"{r.choice(['v_cvt_f32_u32', 'v_cvt_f32_i32', 'v_cvt_u32_f32', 'v_cvt_i32_f32'])} "
                         f"{_v(r)}, {_src(r)}",
                         f"v_cndmask_b32 {_v(r)}, {_src(r)}, {_v(r)}, vcc_lo",
                         f"v_cndmask_b32_e64 {_v(r)}, {_v(r)}, {_src(r)}, {_s(r)}",
                         f"v_fmaak_f32 {_v(r)}, {_v(r)}, {_v(r)}, 0x3fc00000",
                         f"v_fmamk_f32 {_v(r)}, {_v(r)}, 0x7fc00002, {_v(r)}"])
    if k == 8:
        return r.choice([f"v_add_co_ci_u32 {_v(r)}, vcc_lo, {_src(r)}, {_v(r)}, vcc_lo",
                         f"v_sub_co_ci_u32 {_v(r)}, vcc_lo, {_src(r)}, {_v(r)}, vcc_lo",
                         f"v_subrev_co_ci_u32 {_v(r)}, vcc_lo, {_src(r)}, {_v(r)}, vcc_lo",
                         f"v_add_co_u32 {_v(r)}, {_s(r)}, {_src(r)}, {_src(r)}",
                         f"v_sub_co_u32 {_v(r)}, {_s(r)}, {_src(r)}, {_src(r)}",
                         f"v_add_co_ci_u32_e64 {_v(r)}, {_s(r)}, {_v(r)}, {_src(r)}, {_s(r)}"])
    if k == 9:
        op = r.choice(["eq", "ne", "lt", "le", "gt", "ge"])
        t = r.choice(["u32", "i32"])
        return f"v_cmp_{op}_{t} vcc_lo, {_src(r)}, {_v(r)}" if r.random() < 0.5 else \
            f"v_cmp_{op}_{t}_e64 {_s(r)}, {_src(r)}, {_src(r)}"
    if k < 12:
        return f"{r.choice(_S2)} {_s(r)}, {_ssrc(r)}, {_ssrc(r)}"
    if k == 12:
        return f"{r.choice(_S2W)} {_pair(r)}, {_pair(r)}, {_pair(r)}"
    if k == 13:
        return r.choice([f"s_mov_b32 {_s(r)}, {_ssrc(r)}", f"s_not_b32 {_s(r)}, {_ssrc(r)}",
                         f"s_mov_b64 {_pair(r)}, {_pair(r)}", f"s_movk_i32 {_s(r)}, {r.randrange(-40000, 40000)}",
                         f"s_lshl_b64 {_pair(r)}, {_pair(r)}, {_ssrc(r)}", "s_nop 0",
                         f"s_and_b32 exec_lo, exec_lo, {_s(r)}", f"s_mov_b32 exec_lo, {_s(r)}",
                         f"s_mov_b32 vcc_lo, {_s(r)}"])
    op = r.choice(["eq", "lg", "gt", "ge", "lt", "le"])
    return f"s_cmp_{op}_{r.choice(['u32', 'i32'])} {_ssrc(r)}, {_ssrc(r)}"


_V2_GFX9 = ["v_add_u32", "v_sub_u32", "v_subrev_u32"] + _V2[3:]
_S2_GFX9 = [{"s_and_not1_b32": "s_andn2_b32", "s_or_not1_b32": "s_orn2_b32"}.get(x, x) for x in _S2]


def _pair64(r):
    return r.choice([_pair(r), "vcc", "exec"]) if r.random() < 0.3 else _pair(r)


def random_line_gfx942_new(r) -> str:
    """random_line_new's families in GFX9 syntax (no VOPD on gfx942)."""
    k = r.randrange(6)
    if k == 5:
        return random_modifier_line(r, True)
    if k == 4:
        op = r.choice(_FCMP)
        return r.choice([f"v_cmp_{op}_f32 vcc, {_src(r)}, {_v(r)}",
                         f"v_cmp_{op}_f32_e64 {_pair(r)}, {_src(r)}, {_src(r)}",
                         f"v_cmpx_{op}_f32 vcc, {_src(r)}, {_v(r)}"])
    if k == 0:
        op = r.choice(["v_mad_u64_u32", "v_mad_i64_i32"])
        return f"{op} {_vp(r)}, {r.choice([_pair(r), 'vcc'])}, {_src(r)}, {_src(r)}, {_src64(r)}"
    if k == 1:
        return r.choice([f"{r.choice(['v_lshlrev_b64', 'v_lshrrev_b64', 'v_ashrrev_i64'])} {_vp(r)}, {_src(r)}, "
                         f"{_src64(r)}", f"v_lshl_add_u64 {_vp(r)}, {_src64(r)}, {r.randrange(5)}, {_src64(r)}",
                         f"v_mov_b64 {_vp(r)}, {_src64(r)}", f"v_mad_u32_u24 {_v(r)}, {_src(r)}, {_src(r)}, {_v(r)}"])
    if k == 2:
        op, t = r.choice(["eq", "ne", "lt", "le", "gt", "ge"]), r.choice(["u32", "i32"])
        return f"v_cmpx_{op}_{t} vcc, {_src(r)}, {_v(r)}" if r.random() < 0.5 else \
            f"v_cmpx_{op}_{t}_e64 {_pair(r)}, {_src(r)}, {_src(r)}"
    op = r.choice(["and", "or", "xor", "nand", "nor", "xnor", "andn1", "orn1", "andn2", "orn2"])
    return f"s_{op}_saveexec_b64 {r.choice([_pair(r), 'vcc'])}, {_pair64(r)}"


def random_line_gfx942(r) -> str:
    """random_line's shapes in GFX9 syntax (wave64: lane masks are SGPR pairs, vcc, exec)."""
    if r.random() < 0.25:
        return random_line_gfx942_new(r)
    k = r.randrange(16)
    if k < 4:
        return f"{r.choice(_V2_GFX9)} {_v(r)}, {_src(r)}, {_v(r)}"
    if k < 6:
        return f"{r.choice(_VF2)} {_v(r)}, {_src(r)}, {_v(r)}"
    if k == 6:
        return f"{r.choice(_V3)} {_v(r)}, {_src(r)}, {_src(r)}, {_v(r)}" if r.random() < 0.5 else \
            f"{r.choice(['v_mul_lo_u32', 'v_add_u32_e64', 'v_min_i32_e64', 'v_mul_hi_u32', 'v_mul_hi_i32'])} " \
            f"{_v(r)}, {_src(r)}, {_src(r)}"
    if k == 7:
        return r.choice([f"v_mov_b32 {_v(r)}, {_src(r)}", f"v_not_b32 {_v(r)}, {_src(r)}",
                         f"{r.choice(['v_cvt_f32_u32', 'v_cvt_f32_i32', 'v_cvt_u32_f32', 'v_cvt_i32_f32'])} "
                         f"{_v(r)}, {_src(r)}",
                         f"v_cndmask_b32 {_v(r)}, {_src(r)}, {_v(r)}, vcc",
                         f"v_cndmask_b32_e64 {_v(r)}, {_v(r)}, {_src(r)}, {_pair64(r)}",
                         f"v_fmaak_f32 {_v(r)}, {_v(r)}, {_v(r)}, 0x3fc00000",
                         f"v_fmamk_f32 {_v(r)}, {_v(r)}, 0x7fc00002, {_v(r)}"])
    if k == 8:
        return r.choice([f"v_addc_co_u32 {_v(r)}, vcc, {_src(r)}, {_v(r)}, vcc",
                         f"v_subb_co_u32 {_v(r)}, vcc, {_src(r)}, {_v(r)}, vcc",
                         f"v_subbrev_co_u32 {_v(r)}, vcc, {_src(r)}, {_v(r)}, vcc",
                         f"v_add_co_u32 {_v(r)}, vcc, {_src(r)}, {_v(r)}",
                         f"v_sub_co_u32_e64 {_v(r)}, {_pair(r)}, {_src(r)}, {_src(r)}",
                         f"v_add_co_u32_e64 {_v(r)}, {_pair(r)}, {_src(r)}, {_src(r)}",
                         f"v_addc_co_u32_e64 {_v(r)}, {_pair(r)}, {_v(r)}, {_src(r)}, {_pair64(r)}"])
    if k == 9:
        op = r.choice(["eq", "ne", "lt", "le", "gt", "ge"])
        t = r.choice(["u32", "i32"])
        return f"v_cmp_{op}_{t} vcc, {_src(r)}, {_v(r)}" if r.random() < 0.5 else \
            f"v_cmp_{op}_{t}_e64 {_pair(r)}, {_src(r)}, {_src(r)}"
    if k < 12:
        return f"{r.choice(_S2_GFX9)} {_s(r)}, {_ssrc(r)}, {_ssrc(r)}"
    if k == 12:
        return f"{r.choice(_S2W)} {_pair64(r)}, {_pair64(r)}, {_pair64(r)}"
    if k == 13:
        return r.choice([f"s_mov_b32 {_s(r)}, {_ssrc(r)}", f"s_not_b32 {_s(r)}, {_ssrc(r)}",
                         f"s_mov_b64 {_pair64(r)}, {_pair(r)}", f"s_movk_i32 {_s(r)}, {r.randrange(-40000, 40000)}",
                         f"s_lshl_b64 {_pair(r)}, {_pair(r)}, {_ssrc(r)}", "s_nop 0",
                         f"s_and_b64 exec, exec, {_pair(r)}", f"s_mov_b32 exec_lo, {_s(r)}",
                         f"s_mov_b32 vcc_hi, {_s(r)}"])
    op = r.choice(["eq", "lg", "gt", "ge", "lt", "le"])
    return f"s_cmp_{op}_{r.choice(['u32', 'i32'])} {_ssrc(r)}, {_ssrc(r)}"


def random_state(r, n: int = 5, lanes: int = LANES) -> Waves:
    W = Waves(n, lanes, VGPRS, 1, 64)
    for reg in range(VGPRS):
        kind = r.choice(["f32", "u32", "f32"])
        W.v[:, reg, :] = np.array(values(kind, n * lanes, r), np.uint32).reshape(n, lanes)
    W.s[:, :106] = np.array(values("u32", n * 106, r), np.uint32).reshape(n, 106)
    for reg in (VCC, VCC + 1, 124, 125):
        W.s[:, reg] = [r.getrandbits(32) for _ in range(n)]
    W.s[:, EXEC] = [0xFFFFFFFF, 0] + [r.getrandbits(32) for _ in range(n - 2)]
    W.s[:, EXEC + 1] = [0xFFFFFFFF, 0] + [r.getrandbits(32) for _ in range(n - 2)] if lanes == 64 else 0
    W.scc[:] = [r.getrandbits(1) for _ in range(n)]
    W.exec_written()
    return W


def _context(arch: str = ARCH) -> Context:
    return Context(ARCHES[arch], VGPRS, None, "translate test", arch)


def interpret(lines: list[str], W: Waves, arch: str = ARCH) -> None:
    ctx = _context(arch)
    with np.errstate(all="ignore"):  # as the core runs instructions: IEEE exceptions are flags, not warnings
        for line in lines:
            code = encoding(arch, line)
            run = compile_instr(decode(code, 0, arch), ctx)
            run(W, slice(None))


def translated(lines: list[str], arch: str = ARCH) -> T.Block:
    code = b"".join(encoding(arch, line) for line in lines)
    block = T.translate(code, 0, arch, ARCHES[arch], VGPRS, _context(arch))
    assert block is not None and block.steps == len(lines), \
        f"the translator covered {0 if block is None else block.steps} of {len(lines)}: {lines}"
    return block


def compare(lines: list[str], seed: int, arch: str = ARCH) -> None:
    """Interpreter and translator from the same state: every register identical (AssertionError naming the first
    difference otherwise)."""
    A = random_state(random.Random(seed), lanes=ARCHES[arch])
    B = random_state(random.Random(seed), lanes=ARCHES[arch])
    interpret(lines, A, arch)
    translated(lines, arch).run(B)
    for what, x, y in (("VGPRs", A.v, B.v), ("SGPRs", A.s, B.s), ("SCC", A.scc, B.scc), ("PC", A.pc, B.pc)):
        if not np.array_equal(x, y):
            where = tuple(int(i[0]) for i in np.nonzero(x != y))
            raise AssertionError(f"{what} differ at {where}: interpreter {x[where]:#x} translator {y[where]:#x} "
                                 f"after {lines}")


def programs(count: int, length: int, seed: int, arch: str = ARCH) -> list[list[str]]:
    r = random.Random(seed)
    line = random_line if arch == "gfx1100" else random_line_gfx942
    candidates = [[line(r) for _ in range(length)] for _ in range(count)]
    for p in candidates:  # half the programs end in a branch (a block's only possible last instruction)
        if r.random() < 0.5:
            p.append(f"{r.choice(sorted(T.BRANCHES))} {r.randrange(-300, 300)}")
    assemble_all(arch, [ln for p in candidates for ln in p])
    out = []
    for p in candidates:
        keep = []
        for ln in p:
            try:
                encoding(arch, ln)
                keep.append(ln)
            except Rejected:
                pass
        out.append(keep)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_random_blocks_match_the_interpreter(seed, monkeypatch):
    if seed < 2:  # the O2 tier (a block's first run tiers up), the others the first tier (O0, no passes)
        monkeypatch.setattr(T, "TIER_UP", 1)
    for i, lines in enumerate(programs(25, 12, seed)):
        compare(lines, seed * 1000 + i)


@pytest.mark.parametrize("seed", range(4))
def test_random_gfx942_blocks_match_the_interpreter(seed, monkeypatch):
    if seed < 1:
        monkeypatch.setattr(T, "TIER_UP", 1)
    if no_assembler_reason("gfx942") is not None:
        pytest.skip(no_assembler_reason("gfx942"))
    for i, lines in enumerate(programs(25, 12, 100 + seed, "gfx942")):
        compare(lines, seed * 1000 + i, "gfx942")


def test_every_gfx942_template_is_covered_and_assembles():
    if no_assembler_reason("gfx942") is not None:
        pytest.skip(no_assembler_reason("gfx942"))
    r = random.Random(8)
    lines = [random_line_gfx942(r) for _ in range(600)]
    assemble_all("gfx942", lines)
    ok = []
    for ln in lines:
        try:
            encoding("gfx942", ln)
            ok.append(ln)
        except Rejected:
            pass
    assert len(ok) > 450, len(ok)
    names = {ln.split()[0] for ln in ok}
    assert len(names) > 55, sorted(names)
    for ln in ok:
        translated([ln], "gfx942")


def test_every_template_is_covered_and_assembles():
    """The generator's instruction shapes all assemble and all translate (so the differential runs each of them)."""
    r = random.Random(7)
    lines = [random_line(r) for _ in range(600)]
    assemble_all(ARCH, lines)
    ok = [ln for ln in lines if _accepted(ln)]
    assert len(ok) > 500, len(ok)
    names = {ln.split()[0] for ln in ok}
    assert len(names) > 60, sorted(names)
    for ln in ok:
        translated([ln])


def _accepted(line):
    try:
        encoding(ARCH, line)
        return True
    except Rejected:
        return False


# -- the whole emulator ---------------------------------------------------------------------------------------

ALU_LOOP = K.ALU_LOOP + K.DECLS


def _run_kernel(mode: str, ir: str, name: str, n_items: int, args_fn, max_steps: int | None = None,
                watch_spins: bool = True, target: str = "gfx1100"):
    """(output bytes, shader-core stats, error text or None, translator stats) of one dispatch in `mode`."""
    from hcqsim.compiler import compile_llvm
    from hcqsim.runtime import open_device
    old = os.environ.get("HCQSIM_SHADER")
    os.environ["HCQSIM_SHADER"] = mode
    try:
        dev = open_device("sim", target=target)
    finally:
        if old is None:
            del os.environ["HCQSIM_SHADER"]
        else:
            os.environ["HCQSIM_SHADER"] = old
    try:
        gpu = dev.os.system.gpus[dev.index]
        core = gpu.shader_core
        assert core.mode == mode
        if max_steps is not None:
            core.max_kernel_steps = max_steps
        core.watch_spins = watch_spins
        prog = dev.load_program(compile_llvm(ir, dev.target), name)
        out = dev.alloc(4 * n_items)
        error = None
        try:
            done = dev.new_signal(0)
            dev.compute_queue().exec(prog, args_fn(out), n_items, min(n_items, 64)).signal(done, 1).submit()
            done.wait(1)
        except Exception as e:  # a runaway report: compared as text
            error = f"{type(e).__name__}: {e}"
        data = bytes(np.asarray(out.view))
        tstats = dict(core.translator.stats) if core.translator is not None else None
        return data, dict(core.stats), error, tstats
    finally:
        dev.close()


def _both(ir, name, n_items, args_fn, max_steps=None, target="gfx1100"):
    a = _run_kernel("interpret", ir, name, n_items, args_fn, max_steps, target=target)
    b = _run_kernel("translate", ir, name, n_items, args_fn, max_steps, target=target)
    return a, b


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_kernel_memory_and_stats_match(target):
    a, b = _both(ALU_LOOP, "alu", 256, lambda out: [out, 37, 1.5], target=target)
    assert a[2] is None and b[2] is None, (a[2], b[2])
    assert a[0] == b[0]
    assert a[1] == b[1]
    assert b[3]["block_steps"] > 0.5 * b[1]["issue_steps"], b[3]  # most issue steps ran translated


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_blocks_tiering_up_mid_kernel_keep_memory_and_stats(monkeypatch, target):
    """A block recompiled at O2 between two of its runs (TIER_UP small): the kernel's memory and stats unchanged."""
    monkeypatch.setattr(T, "TIER_UP", 64)
    T.COMPILED.clear()
    try:
        ups = T.STATS["tier_ups"]
        a, b = _both(ALU_LOOP, "alu", 256, lambda out: [out, 37, 1.5], target=target)
        assert a[2] is None and b[2] is None, (a[2], b[2])
        assert a[0] == b[0] and a[1] == b[1]
        assert T.STATS["tier_ups"] > ups
    finally:
        T.COMPILED.clear()


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_runaway_reports_match_at_every_bound(target):
    """max_kernel_steps around the loop's block boundaries: the same RunawayStop text (PC, instruction) and stats."""
    base = None
    for steps in range(40, 75):
        a, b = _both(ALU_LOOP, "alu", 64, lambda out: [out, 1000, 1.5], max_steps=steps, target=target)
        assert a[2] is not None and f"more than {steps} issue steps" in a[2], a[2]
        assert a[2] == b[2], (steps, a[2], b[2])
        assert a[1] == b[1], steps
        base = base or b[3]
    assert base["block_runs"] > 0


def test_gpu_argument_and_environment():
    from hcqsim import EmulatedGPU
    g = EmulatedGPU(shader="translate")
    try:
        assert g.shader_core.mode == "translate" and g.shader_core.translator is not None
    finally:
        g.close()
    g = EmulatedGPU()
    try:
        assert g.shader_core.translator is None or g.shader_core.mode == "translate"
    finally:
        g.close()
    with pytest.raises(ValueError):
        EmulatedGPU(shader="jit")


# -- planted bugs: each must be caught ----------------------------------------------------------------------

BUG_PROGRAMS = {
    "wrong_op": ["v_add_nc_u32 v1, v2, v3"],
    "exec_ignored": ["v_xor_b32 v1, v2, v3"],
    "carry_wrong": ["v_add_co_ci_u32 v1, vcc_lo, v2, v3, vcc_lo"],
    # x86's own NaN choice matches the rule for a - b (first NaN operand, quieted), not for subrev's b - a
    "nan_rule_skipped": ["v_add_f32 v1, v2, v3", "v_mul_f32 v4, v5, v6", "v_subrev_f32 v7, v8, v9"],
    # the families added second: one planted bug each
    "shift64_amount_31": ["v_lshlrev_b64 v[2:3], v1, v[4:5]"],
    "mad64_signed_as_unsigned": ["v_mad_i64_i32 v[2:3], s10, v1, v5, v[6:7]"],
    "vopd_y_reads_after_x_writes": ["v_dual_mov_b32 v2, v5 :: v_dual_add_nc_u32 v3, v2, v7"],
    "cmpx_exec_not_written": ["v_cmpx_gt_u32_e64 v1, v2", "v_mov_b32 v3, v4"],
    "saveexec_wrong_op": ["s_and_saveexec_b32 s10, s11", "v_mov_b32 v3, v4"],
    "mul_hi_signed_as_unsigned": ["v_mul_hi_i32 v1, v2, v3"],
    "fcmp_lt_unordered": ["v_cmp_lt_f32 vcc_lo, v1, v2", "v_cmp_lt_f32_e64 s10, v3, v4"],
    "neg_as_abs": ["v_add_f32_e64 v1, -v2, v3", "v_fma_f32 v4, v5, -v6, v7"],
}
NEW_BUGS = ["shift64_amount_31", "mad64_signed_as_unsigned", "vopd_y_reads_after_x_writes", "cmpx_exec_not_written",
            "saveexec_wrong_op", "mul_hi_signed_as_unsigned", "fcmp_lt_unordered",
            "neg_as_abs"]


def _plant(monkeypatch, bug: str) -> None:
    T.COMPILED.clear()
    if bug == "wrong_op":
        monkeypatch.setitem(T.V_INT, "v_add_nc_u32", lambda e, a, b: T._b(e, "sub", a, b))
    elif bug == "exec_ignored":
        real = T._Emit.sload

        def sload(self, k):
            return "-1" if k == EXEC else real(self, k)
        monkeypatch.setattr(T._Emit, "sload", sload)
    elif bug == "carry_wrong":
        real = T._Builder._carry

        def carry(self, a, b, ci, sub):  # the carry in dropped
            return real(self, a, b, None, sub)
        monkeypatch.setattr(T._Builder, "_carry", carry)
    elif bug == "nan_rule_skipped":
        monkeypatch.setattr(T._Builder, "_nan_rule", lambda self, bits, r, srcs, fl: bits)
    elif bug == "shift64_amount_31":
        monkeypatch.setitem(T.V_WIDE, "v_lshlrev_b64", lambda e, sh, x: T._b(e, "shl", x, T._b(
            e, "and", e.zext64(sh), 31, "i64"), "i64"))
    elif bug == "mad64_signed_as_unsigned":
        monkeypatch.setitem(T.MAD64, "v_mad_i64_i32", "zext")
    elif bug == "vopd_y_reads_after_x_writes":
        monkeypatch.setattr(T._Builder, "VOPD_READS_FIRST", False)
    elif bug == "cmpx_exec_not_written":
        real_store = T._Builder._store_mask

        def store_mask(self, code, mask):
            if code != EXEC:
                real_store(self, code, mask)
        monkeypatch.setattr(T._Builder, "_store_mask", store_mask)
    elif bug == "saveexec_wrong_op":
        monkeypatch.setitem(T.SAVEEXEC, "and", T.SAVEEXEC["or"])
    elif bug == "mul_hi_signed_as_unsigned":
        monkeypatch.setitem(T.V_INT, "v_mul_hi_i32", lambda e, a, b: e.mul_hi(a, b, "zext"))
    elif bug == "fcmp_lt_unordered":  # NaN operands compare true
        monkeypatch.setitem(T.F_CMP, "lt", "ult")
    elif bug == "neg_as_abs":
        real_apply = T._Builder._apply_modifiers
        monkeypatch.setattr(T._Builder, "_apply_modifiers", lambda self, v, a, n: real_apply(self, v, a or n, False))
    elif bug == "steps_off_by_one":
        real = T.Block.__init__

        def init(self, pc, code, steps, *rest):
            real(self, pc, code, steps + 1, *rest)
        monkeypatch.setattr(T.Block, "__init__", init)


@pytest.mark.parametrize("tier", [0, 1])
@pytest.mark.parametrize("bug", ["wrong_op", "exec_ignored", "carry_wrong", "nan_rule_skipped"] + NEW_BUGS)
def test_planted_bug_is_caught_at_block_level(monkeypatch, bug, tier):
    _plant(monkeypatch, bug)
    if tier:
        monkeypatch.setattr(T, "TIER_UP", 1)
    try:
        caught = 0
        for seed in range(3):
            try:
                compare(BUG_PROGRAMS[bug], seed)
            except AssertionError:
                caught += 1
        assert caught, f"planted bug {bug} not caught"
    finally:
        T.COMPILED.clear()


def test_planted_step_count_bug_is_caught(monkeypatch):
    _plant(monkeypatch, "steps_off_by_one")
    try:
        a, b = _both(ALU_LOOP, "alu", 64, lambda out: [out, 5, 1.5])
        assert a[1] != b[1], "a block counting one step too many went unnoticed"
    finally:
        T.COMPILED.clear()


@pytest.mark.parametrize("quantum", [3, 5, 8, 13])
def test_quanta_end_at_the_same_steps(monkeypatch, quantum):
    """With a small quantum, every advance() of the dispatch returns the same number of steps in both modes: a
    block runs only when the budget covers it, so a quantum never ends inside one. (Spin watching, which a
    dispatch starts after its first quantum and during which nothing is translated, is off here.)"""
    import hcqsim.gpu
    from hcqsim.shader.core import ActiveDispatch
    monkeypatch.setattr(hcqsim.gpu, "DISPATCH_QUANTUM", quantum)
    real = ActiveDispatch.advance
    log: list = []

    def advance(self, budget):
        n = real(self, budget)
        log.append((budget, n, self.steps))
        return n
    monkeypatch.setattr(ActiveDispatch, "advance", advance)
    runs = []
    for mode in ("interpret", "translate"):
        log.clear()
        out = _run_kernel(mode, ALU_LOOP, "alu", 128, lambda out: [out, 30, 1.5], watch_spins=False)
        runs.append((list(log), out[0], out[1]))
        if mode == "translate":
            assert out[3]["block_runs"] > 0
    assert runs[0] == runs[1]


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_a_long_kernel_keeps_translating_under_the_spin_watch(monkeypatch, target):
    """Past its first quantum a dispatch is watched for spins; blocks still run in the watch's quiet phase
    (SpinWatch.skip), and every advance(), the stats and memory stay those of the interpreter."""
    from hcqsim.shader.core import ActiveDispatch
    real = ActiveDispatch.advance
    log: list = []

    def advance(self, budget):
        n = real(self, budget)
        log.append((budget, n, self.steps, self.watching, self.spin.quiet, self.spin.wait))
        return n
    monkeypatch.setattr(ActiveDispatch, "advance", advance)
    runs = []
    for mode in ("interpret", "translate"):
        log.clear()
        out = _run_kernel(mode, ALU_LOOP, "alu", 64, lambda out: [out, 3000, 1.5], target=target)
        runs.append((list(log), out[0], out[1], out[2]))
        tstats = out[3]
    assert runs[0] == runs[1]
    assert any(entry[3] for entry in runs[0][0]), "the dispatch was never watched"
    assert tstats["block_steps"] > 0.6 * runs[1][2]["issue_steps"], tstats


def test_disk_cache_reuses_object_code_and_survives_corruption(monkeypatch, tmp_path):
    """Blocks' object code under $HCQSIM_CACHE/translate: a second compilation of the same IR (a fresh process, here
    an emptied COMPILED) reads it, a corrupted entry is ignored and rewritten, HCQSIM_CACHE=off writes nothing."""
    lines = ["v_add_nc_u32 v1, v2, v3", "v_mad_u64_u32 v[4:5], s10, v1, v6, v[8:9]", "s_add_u32 s1, s2, s3"]
    monkeypatch.setenv("HCQSIM_CACHE", str(tmp_path))
    T.COMPILED.clear()
    try:
        compare(lines, 1)
        files = sorted((tmp_path / "translate").iterdir())
        assert len(files) == 1, files
        hits = T.STATS["disk_hits"]
        T.COMPILED.clear()
        compare(lines, 2)
        assert T.STATS["disk_hits"] == hits + 1
        files[0].write_bytes(files[0].read_bytes()[:-8] + b"\0" * 8)  # a corrupted entry: compiled again
        T.COMPILED.clear()
        compare(lines, 3)
        assert T.STATS["disk_hits"] == hits + 1
        assert T._disk_read(files[0].name) is not None  # rewritten whole
        monkeypatch.setenv("HCQSIM_CACHE", "off")
        T.COMPILED.clear()
        made = []
        import tempfile  # the cache's writer (compiler.write_cache_file) makes its temporary files with it
        real_mkstemp = tempfile.mkstemp
        monkeypatch.setattr(tempfile, "mkstemp", lambda *a, **k: made.append(a) or real_mkstemp(*a, **k))
        compare(lines + ["s_nop 0"], 4)
        assert T._disk_dir() is None and not made
    finally:
        T.COMPILED.clear()
