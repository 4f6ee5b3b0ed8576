"""The gfx11 decoder and disassembler against LLVM (the encoding oracle).

1. Every opcode in the gfx11 tables: one representative instruction per opcode (operands built from the
   table's operand shape) is assembled by LLVM; the decode must give the family, opcode, mnemonic and size,
   and the disassembly must equal LLVM's canonical text. The same for a list of instructions exercising the
   operand space, modifiers and the special immediates.
2. Real kernels compiled by llvmlite for gfx1100: every instruction decodes with a known mnemonic and the
   listing (emit_assembly) matches the disassembly instruction by instruction.
3. Unknown opcodes decode with mnemonic None; garbage raises DecodeError.

The assembler is `hcqsim.compiler.assemble_each` (LLVM 22's clang -cc1as from the `ziglang` package, with
+real-true16 as LLVM's gfx1100 code generator uses; else an llvm-mc): one batch for all lines, giving each
line's encoding and LLVM's canonical text (`shader_decoder_support.Oracle`). Part 1 is skipped when there is no
assembler, or when the one found is older than LLVM 22 (the canonical text compared with, true16 operands and
all, is LLVM 22's).
"""
from __future__ import annotations

import functools
import io
import re

import pytest

from hcqsim.compiler import TRIPLE, AssemblerUnavailableError, assemble_each, assembler_for
from hcqsim.errors import DecodeError
from hcqsim.shader import Instr, decode, decode_program, disassemble, format_instr
from hcqsim.shader import formats as fm
from hcqsim.shader import opcodes_gfx11 as ops

pytest.register_assert_rewrite("shader_decoder_support")
import shader_decoder_support as support  # noqa: E402  (tests/shader_decoder_support.py)
from shader_decoder_support import pack_words, sgprs, vgprs  # noqa: E402

ORACLE_ARCH = "gfx1100"

# ---------------------------------------------------------------------------------------------------------
# representative instructions, built from the opcode tables' operand shapes

# distinct VGPRs (v1 upwards) so each operand of a line is recognisable
_regs = functools.partial(support.Regs, 1)


SOPK_OPERANDS = {"x": "0x1234", "k": "s2, 0x1234", "call": "s[2:3], 4", "loop": "s2, 4", "waitcnt": "null, 0x5",
                 "getreg": "s2, hwreg(HW_REG_MODE, 0, 4)", "setreg": "hwreg(HW_REG_MODE, 0, 4), s2",
                 "setreg_imm": "hwreg(HW_REG_MODE, 4, 4), 0x1234"}
SOPP_OPERANDS = {"opt": "", "d": "3", "x": "0x3", "br": "5", "waitcnt": "vmcnt(1) lgkmcnt(2)",
                 "delay": "instid0(VALU_DEP_1) | instskip(NEXT) | instid1(SALU_CYCLE_1)",
                 "sendmsg": "sendmsg(MSG_DEALLOC_VGPRS)", "depctr": "depctr_va_vdst(0)"}
GDS_ONLY = ("ds_gws_", "ds_add_gs_reg", "ds_sub_gs_reg", "ds_ordered_count")


def _valu_operands(family: str, op: int, name: str, shape: str) -> str:
    d, srcs = ops.parse_shape(shape)
    r = _regs()
    if family == "VOPC" or (family == "VOP3" and op < 0x100):
        lead = [] if name.startswith("v_cmpx") else ["vcc_lo" if family == "VOPC" else "s10"]
        return ", ".join(lead + [r(w) for w in srcs])
    if name == "v_readfirstlane_b32":
        return "s2, v4"
    if name == "v_readlane_b32":
        return "s2, v4, s6"
    if name == "v_writelane_b32":
        return "v1, s4, s6"
    if name in ("v_permlane16_b32", "v_permlanex16_b32"):
        return "v1, v2, s4, s6"
    if not d:
        return ""
    dst = r(d)
    if family == "VOP2":
        s0, s1 = r(srcs[0]), r(srcs[1])
        if name.startswith("v_fmamk"):
            return f"{dst}, {s0}, 0x1234, {s1}"
        if name.startswith("v_fmaak"):
            return f"{dst}, {s0}, {s1}, 0x1234"
        if name == "v_cndmask_b32":
            return f"{dst}, {s0}, {s1}, vcc_lo"
        if name.endswith("_co_ci_u32"):
            return f"{dst}, vcc_lo, {s0}, {s1}, vcc_lo"
        return f"{dst}, {s0}, {s1}"
    parts = [dst]
    if family == "VOP3" and op in fm.VOP3SD_OPS:
        parts.append("s10")
    src = [r(w) for w in srcs]
    if name.startswith("v_cndmask") or name.endswith("_co_ci_u32"):
        src[-1] = "s12" if name.endswith("_co_ci_u32") else "vcc_lo"
    return ", ".join(parts + src)


def _memory_operands(family: str, name: str, shape: str) -> list[str]:
    r = _regs()
    if family == "DS":
        d, (a, d0, d1) = ops.parse_shape(shape)
        parts = [r(w) for w in (d, a, d0, d1) if w]
        return [", ".join(parts) + (" gds" if name.startswith(GDS_ONLY) else "")]
    if family == "MUBUF":
        w = int(shape)
        if not w:
            return [""]
        base = f"{vgprs(1, w)}, off, s[4:7], 0"
        return [base, base + " glc"] if "_atomic_" in name else [base]
    return support.flat_operand_lines(family, name, shape, "glc")


def representatives(family: str, op: int, name: str, shape: str) -> list[str]:
    """Assembly lines for one opcode (several operand forms for memory instructions)."""
    if family in ("VOP1", "VOP2", "VOPC", "VOP3"):
        mn = support.encoding_mnemonic(ops, family, op, name, promoted_below=0x200)
        return [f"{mn} {_valu_operands(family, op, name, shape)}".strip()]
    if family == "VOP3P":
        r = _regs()
        d, srcs = ops.parse_shape(shape)
        return [f"{name} " + ", ".join([r(d)] + [r(w) for w in srcs])]
    if family == "VINTERP":
        return [f"{name} v1, v2, v3, v4 wait_exp:0"]
    if family in ("DS", "MUBUF", "FLAT", "GLOBAL", "SCRATCH"):
        return [f"{name} {o}".strip() for o in _memory_operands(family, name, shape)]
    if family == "SOPK":
        return [f"{name} {SOPK_OPERANDS[shape]}"]
    if family == "SOPP":
        return [f"{name} {SOPP_OPERANDS[shape]}".strip()]
    d, srcs = ops.parse_shape(shape)
    if family == "SMEM":
        if not d:
            return [name]
        dst = sgprs(16 if d >= 4 else 2, d)
        return [f"{name} {dst}, {sgprs(4, srcs[0])}, 0x10"]
    parts = [sgprs(2, d)] if d else []
    for i, w in enumerate(srcs):
        parts.append("sendmsg(MSG_RTN_GET_REALTIME)" if w == "m" else sgprs(4 + 2 * i, w))
    return [f"{name} " + ", ".join(parts)]


FAMILIES = ("SOP1", "SOP2", "SOPC", "SOPK", "SOPP", "SMEM", "VOP1", "VOP2", "VOPC", "VOP3", "VOP3P", "VINTERP",
            "DS", "FLAT", "GLOBAL", "SCRATCH", "MUBUF")


def _family(table: str, op: int) -> str:
    return "VOP3SD" if table == "VOP3" and op in fm.VOP3SD_OPS else table


def _table_cases():
    return support.table_cases(ops.TABLES, FAMILIES, _family, representatives)


def _vopd_cases():
    """Every VOPD opcode as X (Y = mov) and as Y (X = mov); banks and parity chosen to be legal."""
    x_ops = {"1:1": "v0, v1", "1:1,1": "v0, v1, v2", "1:1,1,k": "v0, v1, v2, 0x1234", "1:1,k,1": "v0, v1, 0x1234, v2"}
    y_ops = {"1:1": "v3, v4", "1:1,1": "v3, v4, v7", "1:1,1,k": "v3, v4, v7, 0x1234", "1:1,k,1": "v3, v4, 0x1234, v7"}
    cases = []
    for op, (name, shape) in sorted(ops.VOPD.items()):
        if op <= ops.VOPD_X_MAX:
            cases.append(pytest.param(f"{name} {x_ops[shape]} :: v_dual_mov_b32 v3, v4", "VOPD", op << 5 | 8,
                                      f"{name}::v_dual_mov_b32", id=f"VOPD-X-{name}"))
        cases.append(pytest.param(f"v_dual_mov_b32 v0, v1 :: {name} {y_ops[shape]}", "VOPD", 8 << 5 | op,
                                  f"v_dual_mov_b32::{name}", id=f"VOPD-Y-{name}"))
    return cases


# instructions exercising the operand space, literals, modifiers and special immediates, written as LLVM
# prints them (expected family, expected mnemonic)
SPECIAL_LINES = """
s_mov_b32 s1, 0x12345678
s_mov_b32 s1, -1
s_mov_b32 s1, 0.5
s_mov_b32 s1, 0xffffffef
s_mov_b32 vcc_lo, exec_lo
s_mov_b64 vcc, exec
s_mov_b64 s[2:3], 0x12345678
s_mov_b64 exec, 0
s_mov_b32 m0, s1
s_mov_b32 s1, src_scc
s_mov_b32 ttmp0, s1
s_mov_b64 ttmp[4:5], s[2:3]
s_mov_b32 s105, null
s_add_u32 s1, s2, 0x41
s_add_u32 s1, s2, 64
s_lshl_b64 s[2:3], s[4:5], 2
s_cselect_b32 s1, 1, 0
s_and_b64 s[2:3], exec, vcc
s_and_saveexec_b32 s0, vcc_lo
s_and_not1_saveexec_b32 s0, s2
s_cmp_lt_u32 s1, 0x100
s_cmp_eq_u64 s[2:3], 0
s_bitcmp1_b32 s1, 3
s_movk_i32 s1, 0xffff
s_addk_i32 s1, 0xfff0
s_getreg_b32 s1, hwreg(HW_REG_MODE)
s_getreg_b32 s1, hwreg(HW_REG_HW_ID1)
s_getreg_b32 s1, hwreg(HW_REG_STATUS, 8, 1)
s_getreg_b32 s1, hwreg(52, 8, 3)
s_getreg_b32 s1, hwreg(0)
s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 4), 15
s_call_b64 s[30:31], 32
s_waitcnt vmcnt(0)
s_waitcnt lgkmcnt(0)
s_waitcnt expcnt(0)
s_waitcnt vmcnt(63) expcnt(7) lgkmcnt(63)
s_waitcnt vmcnt(0) expcnt(0) lgkmcnt(0)
s_waitcnt vmcnt(4) expcnt(4) lgkmcnt(35)
s_delay_alu instid0(VALU_DEP_1)
s_delay_alu instid0(VALU_DEP_1) | instskip(SKIP_1) | instid1(VALU_DEP_1)
s_delay_alu instid0(TRANS32_DEP_1) | instid1(SALU_CYCLE_2)
s_delay_alu instskip(SKIP_3)
s_delay_alu instid0(VALU_DEP_3) | instskip(SKIP_4)
s_clause 0x3f
s_set_inst_prefetch_distance 0x2
s_sendmsg sendmsg(MSG_INTERRUPT)
s_sendmsg sendmsg(MSG_RTN_GET_DOORBELL)
s_sendmsg sendmsg(4, 0, 0)
s_sendmsg_rtn_b32 s1, sendmsg(MSG_RTN_GET_DOORBELL)
s_sendmsg_rtn_b64 s[2:3], sendmsg(MSG_RTN_GET_REALTIME)
s_branch -3
s_branch 32767
s_branch -32768
s_cbranch_scc0 -1
s_cbranch_vccnz 2
s_endpgm
s_endpgm 3
s_nop 7
s_code_end
s_waitcnt_depctr 0xfffe
s_waitcnt_depctr depctr_sa_sdst(0)
s_waitcnt_depctr depctr_va_sdst(0) depctr_vm_vsrc(0)
s_waitcnt_depctr depctr_hold_cnt(1) depctr_sa_sdst(1) depctr_va_vdst(15) depctr_va_sdst(7) depctr_va_ssrc(1) depctr_va_vcc(1) depctr_vm_vsrc(7)
s_waitcnt_vscnt null, 0x0
s_load_b32 s1, s[2:3], 0x10
s_load_b32 s1, s[2:3], -0x10
s_load_b32 s1, s[2:3], 0xfffff
s_load_b32 s1, s[2:3], s4
s_load_b32 s1, s[2:3], s4 offset:0x10
s_load_b32 s1, s[2:3], m0
s_load_b32 s1, s[2:3], 0x10 glc dlc
s_load_b128 s[0:3], s[4:5], 0x0
s_buffer_load_b32 s1, s[4:7], s8
v_add_f32_e32 v1, 0.5, v2
v_add_f32_e32 v1, 0.15915494, v2
v_add_f32_e32 v1, -4.0, v2
v_add_f32_e32 v1, 0x3f000001, v2
v_add_f32_e32 v1, -1, v2
v_add_f32_e32 v1, 64, v2
v_add_f32_e32 v1, -16, v2
v_add_nc_u32_e32 v1, 0.5, v2
v_add_nc_u32_e32 v1, 0xffffffef, v2
v_add_f64 v[0:1], 0.15915494309189532, v[2:3]
v_add_f64 v[0:1], 0x40091eb8, v[2:3]
v_add_f64 v[1:2], s[2:3], v[4:5]
v_add_f64 v[1:2], vcc, v[4:5]
v_add_f64 v[1:2], exec, v[4:5]
v_add_f64 v[1:2], ttmp[2:3], v[4:5]
v_add_f16_e32 v1.l, 0.5, v2.l
v_add_f16_e32 v1.h, v2.h, v3.l
v_add_f16_e32 v1.l, 0x1234, v3.h
v_add_f16_e32 v1.h, s2, v3.l
v_add_f16_e64 v1.h, v2.l, v3.h op_sel:[0,1,1]
v_add_f16_e64 v1.h, -|v2.l|, s3 op_sel:[0,0,1] clamp
v_add_f16_e64 v129.l, v2.l, v3.l
v_cvt_f32_f16_e32 v1, v2.h
v_cvt_f16_f32_e32 v1.h, v2
v_cvt_f16_f32_e64 v129.h, v2 op_sel:[0,1]
v_cmp_lt_f16_e32 vcc_lo, v1.h, v2.l
v_cmpx_lt_f16_e32 v1.h, v2.l
v_fma_f16 v1.l, v2.h, v3.l, v4.h op_sel:[1,0,1,0]
v_pack_b32_f16 v1, v2.l, v3.h op_sel:[0,1,0]
v_mad_u32_u16 v1, v2.l, v3.h, v4 op_sel:[0,1,0,0]
v_cndmask_b16 v1.l, v2.l, v3.h, vcc_lo
v_mov_b16_e32 v1.h, v2.l
v_pk_add_f16 v1, 0.5, v2
v_pk_add_f16 v1, 0x12345678, v2
v_pk_add_u16 v1, 7, v2
v_pk_fma_f16 v1, v2, v3, v4 op_sel:[1,0,0] op_sel_hi:[0,1,1] neg_lo:[1,0,0] neg_hi:[0,1,0]
v_pk_add_f16 v1, v2, v3 op_sel_hi:[0,0]
v_pk_add_f16 v1, v2, v3 clamp
v_pk_add_u16 v1, v2, v3 op_sel:[1,1]
v_fma_mix_f32 v1, v2, v3, v4 op_sel_hi:[1,1,1]
v_fma_mix_f32 v1, v2, v3, v4 op_sel:[1,0,0] op_sel_hi:[1,0,1]
v_lshlrev_b64 v[0:1], 2, v[0:1]
v_add_f32_e64 v1, -v2, |v3|
v_add_f32_e64 v1, -|v2|, v3 clamp
v_add_f32_e64 v1, v2, v3 mul:2
v_add_f32_e64 v1, v2, v3 div:2
v_add_f32_e64 v1, v2, v3 clamp mul:4
v_fma_f32 v1, v2, -v3, -v4
v_fma_f32 v1, s2, 0x1234, v4
v_cmp_lt_f32_e64 s1, v2, v3
v_cmp_lt_f32_e64 vcc_lo, -v2, |v3|
v_cmpx_lt_f32_e64 -v2, v3
v_cmp_class_f32_e64 s1, v2, 3
v_cndmask_b32_e64 v1, -v2, |v3|, s4
v_cndmask_b32_e64 v1, 0, 1, vcc_lo
v_cndmask_b32_e32 v1, 0, v3, vcc_lo
v_add_co_u32 v1, s4, v2, v3 clamp
v_add_co_ci_u32_e64 v1, s4, v2, v3, s5
v_add_co_ci_u32_e32 v1, vcc_lo, 0, v3, vcc_lo
v_mad_u64_u32 v[2:3], null, 10, v5, 0
v_div_scale_f32 v1, vcc_lo, -v2, v3, v4
v_readlane_b32 s1, v2, m0
v_writelane_b32 v1, 5, s3
v_mov_b32_e32 v1, vcc_hi
v_mov_b32_e32 v1, exec_hi
v_mov_b32_e32 v1, m0
v_mov_b32_e32 v1, ttmp5
v_mov_b32_e32 v1, null
v_mov_b32_e32 v1, src_scc
v_mov_b32_e32 v1, src_shared_base
v_mov_b32_e32 v1, src_private_limit
v_mov_b32_e32 v1, src_shared_limit
v_fmaak_f32 v1, v2, v3, 0x5
v_dual_fmaak_f32 v0, v1, v2, 0x5 :: v_dual_mov_b32 v3, v4
v_dot2_f32_f16_e64_dpp v1, v2, v3, v4 row_shl:1 row_mask:0xf bank_mask:0xf
v_mov_b32_e32 v1, s105
v_mov_b32_e32 v255, v255
v_mov_b32_e32 v1, -2.0
v_mov_b32_e32 v1, 0x80000000
v_cvt_f64_i32_e32 v[1:2], s3
v_fmamk_f32 v1, s2, 0x3f800000, v3
v_fmaak_f32 v1, 1.0, v3, 0x3f800000
v_fmac_f32_e32 v1, 1.0, v3
v_lshl_or_b32 v1, v2, 2, 0x400
v_bfe_u32 v1, v2, 8, 8
v_mov_b32_dpp v1, v2 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf
v_mov_b32_dpp v1, v2 row_shr:3 row_mask:0xf bank_mask:0xf
v_mov_b32_dpp v1, v2 row_mirror row_mask:0xf bank_mask:0xf
v_mov_b32_dpp v1, v2 row_xmask:5 row_mask:0xf bank_mask:0xf
v_mov_b32_dpp v1, v2 quad_perm:[0,1,2,3] row_mask:0x3 bank_mask:0x5 bound_ctrl:1 fi:1
v_mov_b32_dpp v1, v2 dpp8:[7,6,5,4,3,2,1,0]
v_mov_b32_dpp v1, v2 dpp8:[7,6,5,4,3,2,1,0] fi:1
v_add_f32_dpp v1, -v2, |v3| row_shl:2 row_mask:0xf bank_mask:0xf
v_fma_f32_e64_dpp v1, v2, v3, v4 row_shl:1 row_mask:0xf bank_mask:0xf
v_cmp_lt_f32 vcc_lo, v1, v2 row_shl:1 row_mask:0xf bank_mask:0xf
v_dual_mov_b32 v0, 0x1234 :: v_dual_mov_b32 v1, 0x1234
v_dual_add_f32 v0, s1, v2 :: v_dual_mul_f32 v3, 1.0, v7
v_dual_fmaak_f32 v0, v1, v2, 0x1234 :: v_dual_mov_b32 v3, 0x1234
v_dual_mov_b32 v255, v1 :: v_dual_mov_b32 v254, v4
v_dual_fmac_f32 v0, -1.0, v2 :: v_dual_add_nc_u32 v3, 0, v7
v_dual_mov_b32 v1, 0 :: v_dual_and_b32 v4, 0x3ff, v0
ds_load_b32 v1, v2 offset:1020
ds_load_b32 v1, v2 offset:65535
ds_store_2addr_b32 v1, v2, v3 offset0:1 offset1:2
ds_store_2addr_b32 v1, v2, v3 offset1:255
ds_load_2addr_stride64_b32 v[1:2], v3 offset0:4 offset1:8
ds_add_u32 v1, v2 offset:8 gds
ds_swizzle_b32 v1, v2 offset:swizzle(QUAD_PERM,0,1,2,3)
ds_swizzle_b32 v1, v2 offset:swizzle(BITMASK_PERM,"10i01")
ds_swizzle_b32 v1, v2 offset:swizzle(BITMASK_PERM,"01pip")
ds_swizzle_b32 v1, v2 offset:swizzle(SWAP,16)
ds_swizzle_b32 v1, v2 offset:swizzle(REVERSE,8)
ds_swizzle_b32 v1, v2 offset:swizzle(BROADCAST,8,3)
ds_swizzle_b32 v1, v2 offset:swizzle(BROADCAST,32,31)
ds_swizzle_b32 v1, v2 offset:swizzle(FFT,5)
ds_swizzle_b32 v1, v2 offset:swizzle(ROTATE,0,3)
ds_swizzle_b32 v1, v2 offset:swizzle(BITMASK_PERM,"ppppp")
ds_permute_b32 v1, v2, v3 offset:4
ds_append v1 offset:4
global_load_b32 v1, v0, s[0:1] offset:-4
global_load_b32 v1, v[2:3], off offset:4095
global_load_b32 v1, v[2:3], off offset:-4096
global_load_b32 v1, v[2:3], off glc slc dlc
global_store_b32 v0, v2, s[2:3] offset:16
global_atomic_add_u32 v1, v2, v4, s[2:3] glc
global_atomic_cmpswap_b64 v[1:2], v[3:4], v[5:8], off glc
global_load_b32 v1, v0, vcc
flat_load_b32 v1, v[2:3] offset:4095
flat_load_b32 v1, v[2:3] glc slc
scratch_load_b32 v1, v2, s3 offset:16
scratch_load_b32 v1, off, off
scratch_load_b32 v1, off, off offset:-16
scratch_store_b32 off, v1, s3 offset:4
buffer_load_b32 v1, v2, s[4:7], 0 offen
buffer_load_b32 v1, v2, s[4:7], 0 idxen
buffer_load_b32 v1, v[2:3], s[4:7], 0 idxen offen
buffer_load_b32 v1, off, s[4:7], 0 offset:4095
buffer_load_b32 v1, off, s[4:7], 0 glc slc dlc
buffer_load_b32 v1, off, s[4:7], m0
buffer_load_b32 v1, off, s[8:11], null
buffer_load_b32 v1, off, s[4:7], s8 offset:16 glc
buffer_load_b32 v[1:2], off, s[4:7], 0 tfe
v_interp_p10_f32 v1, v2, v3, v4 wait_exp:3
""".strip().splitlines()


def _oracle_lines() -> list[str]:
    return [c.values[0] for c in _table_cases() + _vopd_cases()] + SPECIAL_LINES


ORACLE = support.Oracle(ORACLE_ARCH, _oracle_lines, hint=" (pip install 'hcqsim[isa]')")


@pytest.mark.parametrize("line, family, op, mnemonic", _table_cases() + _vopd_cases())
def test_table_entry_round_trip(line, family, op, mnemonic):
    ins = ORACLE.check_line(line)
    assert (ins.family, ins.op, ins.mnemonic) == (family, op, mnemonic), line


@pytest.mark.parametrize("line", SPECIAL_LINES)
def test_special_operands_round_trip(line):
    ins = ORACLE.check_line(line)
    expect = line.split()[0]
    if ins.family == "VOPD":
        expect = f"{expect}::{line.split(' :: ')[1].split()[0]}"
    assert ins.mnemonic is not None and re.sub(r"(_e32|_e64|_dpp)+$", "", expect) == ins.mnemonic


def test_oracle_gives_each_line_of_a_batch_its_own_encoding():
    """The oracle assembles all lines in one batch and hands each line its own bytes and text."""
    try:
        assembler_for(ORACLE_ARCH)
    except AssemblerUnavailableError as e:
        pytest.skip(str(e))
    lines = ["s_mov_b32 s1, 0x12345678", "v_add_f32_e32 v1, v2, v3", "s_endpgm"]
    results = assemble_each(lines, ORACLE_ARCH)
    parts = [code for code, _ in results]
    assert [len(p) for p in parts] == [8, 4, 4]
    assert [decode(p, 0).mnemonic for p in parts] == ["s_mov_b32", "v_add_f32", "s_endpgm"]
    assert [text for _, text in results] == lines


# ---------------------------------------------------------------------------------------------------------
# real kernels compiled by llvmlite

@functools.lru_cache(maxsize=None)
def _target_machine():
    import llvmlite.binding as llvm
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm.Target.from_triple(TRIPLE).create_target_machine(cpu="gfx1100", opt=2)


def compile_kernel(ir: str) -> tuple[str, bytes]:
    """(assembly listing, .text bytes) of an IR module for gfx1100; each emit from a fresh parse."""
    import llvmlite.binding as llvm
    from elftools.elf.elffile import ELFFile
    tm = _target_machine()
    ir = f'target triple = "{TRIPLE}"\n' + ir

    def parse():
        m = llvm.parse_assembly(ir)
        m.data_layout = str(tm.target_data)
        return m

    listing = tm.emit_assembly(parse())
    obj = tm.emit_object(parse())
    return listing, ELFFile(io.BytesIO(obj)).get_section_by_name(".text").data()


KERNELS = {
    **support.KERNELS,  # vadd, divloop, ldsrev, mixed
    "uloop": """
@tile = internal addrspace(3) global [64 x float] poison, align 4
declare i32 @llvm.amdgcn.workitem.id.x()
declare void @llvm.amdgcn.s.barrier()
declare float @llvm.fma.f32(float, float, float)
define amdgpu_kernel void @uloop(ptr addrspace(1) %a, ptr addrspace(1) %out, i32 %n) {
entry:
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %lp = getelementptr [64 x float], ptr addrspace(3) @tile, i32 0, i32 %tid
  %r = xor i32 %tid, 1
  %lr = getelementptr [64 x float], ptr addrspace(3) @tile, i32 0, i32 %r
  br label %loop
loop:
  %k = phi i32 [0, %entry], [%k1, %loop]
  %acc = phi float [0.0, %entry], [%acc1, %loop]
  %row = shl i32 %k, 6
  %i = add i32 %row, %tid
  %p = getelementptr float, ptr addrspace(1) %a, i32 %i
  %x = load float, ptr addrspace(1) %p
  store float %x, ptr addrspace(3) %lp
  fence syncscope("workgroup") release
  call void @llvm.amdgcn.s.barrier()
  fence syncscope("workgroup") acquire
  %y = load float, ptr addrspace(3) %lr
  %acc1 = call float @llvm.fma.f32(float %x, float %y, float %acc)
  fence syncscope("workgroup") release
  call void @llvm.amdgcn.s.barrier()
  fence syncscope("workgroup") acquire
  %k1 = add i32 %k, 1
  %c = icmp ult i32 %k1, %n
  br i1 %c, label %loop, label %exit
exit:
  %po = getelementptr float, ptr addrspace(1) %out, i32 %tid
  store float %acc1, ptr addrspace(1) %po
  ret void
}
""",
}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_compiled_kernel_decodes_like_the_listing(name):
    listing, text = compile_kernel(KERNELS[name])
    expected = support.listing_instructions(listing, name)
    program = decode_program(text)
    # alignment padding and the s_code_end tail are not in the listing
    j = support.assert_decodes_like_listing(program, text, expected, padding=("s_nop", "s_code_end"))
    assert program[j - 1 if j else 0].mnemonic is not None


def test_vadd_kernel_facts():
    """ISA_FACTS 4.1: the vadd kernel's encodings (VOP3SD carry pair, saddr=off global access)."""
    _, text = compile_kernel(KERNELS["vadd"])
    program = decode_program(text)
    by_name = {}
    for ins in program:
        by_name.setdefault(ins.mnemonic, ins)
    assert by_name["v_add_co_u32"].family == "VOP3SD" and by_name["v_add_co_u32"].op == 0x300
    co_ci = by_name["v_add_co_ci_u32"]
    assert co_ci.family == "VOP3SD" and co_ci.op == 0x120 and co_ci.fields["sdst"] == fm.NULL
    g = by_name["global_load_b32"]
    assert g.family == "GLOBAL" and g.fields["saddr"] == fm.NULL and g.fields["seg"] == 2
    assert by_name["v_and_b32"].literal == 0x3FF and by_name["v_and_b32"].size == 8
    assert program[-1].mnemonic == "s_code_end" and len(text) % 4 == 0


# ---------------------------------------------------------------------------------------------------------
# hand-written encodings (ISA_FACTS 5), unknown opcodes and garbage

def test_vopd_dsty_parity_and_shared_literal():
    ins = decode(pack_words(0xCA240080, 0x010400FF, 0x000003FF))
    assert ins.family == "VOPD" and ins.size == 12 and ins.literal == 0x3FF
    assert ins.mnemonic == "v_dual_mov_b32::v_dual_and_b32" and ins.op == (8 << 5 | 18)
    assert ins.fields["vdstx"] == 1 and ins.fields["vdsty"] == 4  # stored 2, bit 0 = not vdstx bit 0
    assert format_instr(ins) == "v_dual_mov_b32 v1, 0 :: v_dual_and_b32 v4, 0x3ff, v0"


def test_branch_offsets_and_signed_fields():
    ins = decode(pack_words(0xBFA5FFFD))  # s_cbranch_execz -3
    assert ins.mnemonic == "s_cbranch_execz" and format_instr(ins) == "s_cbranch_execz -3"
    assert "-> 0x0" in disassemble(pack_words(0xBF800000, 0xBFA5FFFE), annotate=True).splitlines()[1]
    smem = decode(pack_words(0xF4000041, 0xF81FFFF0))
    assert format_instr(smem) == "s_load_b32 s1, s[2:3], -0x10"


def test_sizes_from_fields():
    assert decode(pack_words(0xBE8000FF, 0x12345678)).size == 8  # SOP1 literal
    assert decode(pack_words(0xBF0A01FF, 0x100)).size == 8  # SOPC literal in ssrc0
    assert decode(pack_words(0xB9801801, 15)).size == 8  # s_setreg_imm32_b32
    assert decode(pack_words(0x58020602, 0x3F800000)).size == 8  # v_fmamk_f32: always a literal
    assert decode(pack_words(0xD6560001, 0x03FD0502, 0x400)).size == 12  # VOP3 with a literal
    assert decode(pack_words(0x7E0202FA, 0xFF0101FF)).size == 8  # DPP16
    assert decode(pack_words(0xC8100101, 0x00020104)).size == 8  # VOPD without literal


def test_unknown_opcode_decodes_with_mnemonic_none():
    unknown = [
        (pack_words(0xBE807F00), "SOP1", 0x7F, 4),
        (pack_words(0xBE807FFF, 0xDEADBEEF), "SOP1", 0x7F, 8),  # size still counts the literal
        (pack_words(0x7E02FF02), "VOP1", 0x7F, 4),
        (pack_words(0xD7FF0000, 0x00000000), "VOP3", 0x3FF, 8),
        (pack_words(0xDBF40000, 0x00000000), "DS", 0xFD, 8),
        (pack_words(0xDDFE0000, 0x00007C00), "GLOBAL", 0x7F, 8),
        (pack_words(0xE8000000, 0x00000000), "MTBUF", 0, 8),  # graphics family: identified, not tabulated
    ]
    support.assert_unknown_opcodes_decode(unknown, ORACLE_ARCH)


def test_garbage_raises_decode_error():
    for word in (0xFFFFFFFF, 0xC0000000, 0xCF000000, 0xD0000000):
        with pytest.raises(DecodeError, match=f"0x{word:08x}.*offset 0x4"):
            decode(pack_words(0xBF800000, word), 4)
    with pytest.raises(DecodeError, match="truncated"):
        decode(pack_words(0xBE8000FF), 0)  # s_mov_b32 with its literal missing
    with pytest.raises(DecodeError, match="truncated"):
        decode(pack_words(0xF4000041), 0)
    with pytest.raises(DecodeError):
        decode_program(b"\x00\x00\x80\xbf\x00")


def test_arch_registry():
    assert decode_program(pack_words(0xBFB00000), "gfx1100")[0].mnemonic == "s_endpgm"
    assert decode(pack_words(0xBF810000), 0, "gfx942").mnemonic == "s_endpgm"  # the same word on GFX9
    with pytest.raises(ValueError):
        decode(pack_words(0xBF810000), 0, "gfx9999")


def test_instr_is_a_plain_record():
    ins = decode(pack_words(0x06040702))
    assert isinstance(ins, Instr)
    assert (ins.pc, ins.size, ins.words, ins.family, ins.op, ins.mnemonic, ins.literal) == \
        (0, 4, (0x06040702,), "VOP2", 3, "v_add_f32", None)
    assert ins.fields["src0"] == 0x102 and ins.fields["vsrc1"] == 3 and ins.fields["vdst"] == 2
    assert ins.shape == "1:1,1" and str(ins) == "v_add_f32_e32 v2, v2, v3"


def test_random_words_decode_or_raise_decode_error():
    """Any word sequence either decodes (and prints) or raises DecodeError: fault reports may disassemble garbage."""
    support.assert_random_words_decode_or_raise(ORACLE_ARCH, 1234)


def test_format_tables_encode_what_they_decode():
    sop1 = fm.FORMATS["SOP1"].encode(op=0, sdst=1, ssrc0=2)
    assert format_instr(decode(pack_words(*sop1))) == "s_mov_b32 s1, s2"
    vop3 = fm.FORMATS["VOP3"].encode(op=0x213, vdst=1, src0=258, src1=259, src2=260, neg=0b100)
    assert format_instr(decode(pack_words(*vop3))) == "v_fma_f32 v1, v2, v3, -v4"
    glb = fm.FORMATS["GLOBAL"].encode(op=0x14, seg=2, vdst=1, addr=2, saddr=fm.NULL)
    assert format_instr(decode(pack_words(*glb))) == "global_load_b32 v1, v[2:3], off"


def test_inline_constant_values():
    assert fm.inline_bits(128) == 0 and fm.inline_bits(192) == 64 and fm.inline_bits(193) == 0xFFFFFFFF
    assert fm.inline_bits(208, 64) == (-16) & (2 ** 64 - 1)
    assert fm.inline_bits(242) == 0x3F800000 and fm.inline_bits(242, 64) == 0x3FF0000000000000
    assert fm.inline_bits(242, 16) == 0x3C00 and fm.inline_bits(248) == 0x3E22F983
    assert fm.inline_bits(255) is None
