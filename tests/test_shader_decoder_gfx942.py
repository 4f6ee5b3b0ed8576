"""The gfx942 (CDNA3, GFX9 encodings) decoder and disassembler against LLVM (the encoding oracle).

1. Every opcode in the gfx942 tables: one representative instruction per opcode (operands built from the
   table's operand shape; several forms for memory instructions) is assembled by LLVM; the decode must give the
   family, opcode, mnemonic and size, and the disassembly must equal LLVM's canonical text. The same for a list
   of instructions exercising the operand space, SDWA / DPP, the VOP3 / VOP3P / MFMA modifiers, memory flags and
   the special immediates.
2. Kernels compiled by llvmlite for gfx942: every instruction decodes with a known mnemonic and the listing
   (assemble_listing) matches the disassembly instruction by instruction.
3. Hand-written encodings: extension-dword fields, VOP3B, MFMA and FLAT bits, unknown opcodes (mnemonic None),
   garbage (DecodeError).

The oracle is `hcqsim.compiler.assemble_each(lines, "gfx942")` (LLVM 22's assembler from the ziglang package),
called once for every line of part 1 (`shader_decoder_support.Oracle`); part 1 is skipped when it is unavailable
or older than LLVM 22.
"""
from __future__ import annotations

import functools
import io
import re

import pytest

from hcqsim.errors import DecodeError
from hcqsim.shader import Instr, decode, decode_program, disassemble, format_instr
from hcqsim.shader import formats_gfx9 as f9
from hcqsim.shader import opcodes_gfx942 as ops
from hcqsim.shader.decoder import InstrGfx9

pytest.register_assert_rewrite("shader_decoder_support")
import shader_decoder_support as support  # noqa: E402  (tests/shader_decoder_support.py)
from shader_decoder_support import pack_words, sgprs, vgprs  # noqa: E402

ARCH = "gfx942"

# ---------------------------------------------------------------------------------------------------------
# representative instructions, built from the opcode tables' operand shapes

# distinct VGPRs (v2 upwards); tuples start at an even register, as gfx90a+ requires
_regs = functools.partial(support.Regs, 2, even_tuples=True)


SOPK_OPERANDS = {"k": "s2, 0x1234", "fork": "s[2:3], 4", "call": "s[2:3], 4",
                 "getreg": "s2, hwreg(HW_REG_MODE, 0, 4)", "setreg": "hwreg(HW_REG_MODE, 0, 4), s2",
                 "setreg_imm": "hwreg(HW_REG_MODE, 4, 4), 0x1234"}
SOPP_OPERANDS = {"d": "3", "opt": "", "none": "", "br": "5", "waitcnt": "vmcnt(1) lgkmcnt(2)",
                 "sendmsg": "sendmsg(MSG_INTERRUPT)", "gpr_idx": "gpr_idx(SRC0,DST)"}
VOP2_CARRY_OUT = ("v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32")
VOP2_CARRY_IN = ("v_addc_co_u32", "v_subb_co_u32", "v_subbrev_co_u32")


def _valu_operands(family: str, op: int, name: str, shape: str) -> str:
    d, srcs = ops.parse_shape(shape)
    r = _regs()
    if family == "VOPC" or (family == "VOP3" and op < 0x100):
        return ", ".join(["vcc" if family == "VOPC" else "s[10:11]"] + [r(w) for w in srcs])
    special = {"v_readfirstlane_b32": "s2, v4", "v_readlane_b32": "s2, v4, s6", "v_writelane_b32": "v2, 5, s6",
               "v_accvgpr_mov_b32": "a2, a4", "v_accvgpr_read_b32": "v2, a4", "v_accvgpr_write_b32": "a2, v4"}
    if name in special:
        return special[name]
    if not d:
        return ""
    dst = r(d)
    if family == "VOP2":
        s0, s1 = r(srcs[0]), r(srcs[1])
        if name in ("v_fmamk_f32", "v_madmk_f16"):
            return f"{dst}, {s0}, 0x1234, {s1}"
        if name in ("v_fmaak_f32", "v_madak_f16"):
            return f"{dst}, {s0}, {s1}, 0x1234"
        if name == "v_cndmask_b32":
            return f"{dst}, {s0}, {s1}, vcc"
        if name in VOP2_CARRY_IN:
            return f"{dst}, vcc, {s0}, {s1}, vcc"
        if name in VOP2_CARRY_OUT:
            return f"{dst}, vcc, {s0}, {s1}"
        return f"{dst}, {s0}, {s1}"
    parts = [dst]
    if family == "VOP3" and op in f9.VOP3B_OPS:
        parts.append("s[10:11]")
    src = [r(w) for w in srcs]
    if name == "v_cndmask_b32" or name in VOP2_CARRY_IN:
        src[-1] = "s[12:13]"
    return ", ".join(parts + src)


def _mai_operands(name: str, shape: str) -> str:
    d, (a, b, c) = ops.parse_shape(shape)
    r = _regs()
    srca, srcb = r(a), r(b)
    if name.startswith("v_smfmac"):
        return f"{vgprs(32, d, 'a')}, {srca}, {srcb}, {r(c)}"
    return f"{vgprs(32, d, 'a')}, {srca}, {srcb}, {vgprs(32, c, 'a')}"


def _memory_operands(family: str, name: str, shape: str) -> list[str]:
    r = _regs()
    if family == "DS":
        d, (a, d0, d1) = ops.parse_shape(shape)
        parts = [r(w) for w in (d, a, d0, d1) if w]
        return [", ".join(parts) + (" gds" if name.startswith("ds_gws_") else "")]
    if family == "MUBUF":
        w = int(shape)
        if not w:
            return ["", "sc0 sc1"]
        base = f"{vgprs(2, w)}, off, s[4:7], 0"
        return [base, base + " sc0"] if "_atomic_" in name else [base]
    return support.flat_operand_lines(family, name, shape, "sc0")


def representatives(family: str, op: int, name: str, shape: str) -> list[str]:
    """Assembly lines for one opcode (several operand forms for memory instructions)."""
    if family in ("VOP1", "VOP2", "VOPC", "VOP3"):
        mn = support.encoding_mnemonic(ops, family, op, name, promoted_below=0x1C0)
        return [f"{mn} {_valu_operands(family, op, name, shape)}".strip()]
    if family == "VOP3P":
        if op in f9.MAI_OPS:
            return [f"{name} {_mai_operands(name, shape)}"]
        if name in ("v_accvgpr_read_b32", "v_accvgpr_write_b32"):
            return [f"{name} {_valu_operands(family, op, name, shape)}"]
        r = _regs()
        d, srcs = ops.parse_shape(shape)
        mix = " op_sel_hi:[1,1,1]" if name.startswith("v_fma_mix") else ""
        return [f"{name} " + ", ".join([r(d)] + [r(w) for w in srcs]) + mix]
    if family in ("DS", "MUBUF", "FLAT", "GLOBAL", "SCRATCH"):
        return [f"{name} {o}".strip() for o in _memory_operands(family, name, shape)]
    if family == "SOPK":
        return [f"{name} {SOPK_OPERANDS[shape]}"]
    if family == "SOPP":
        return [f"{name} {SOPP_OPERANDS[shape]}".strip()]
    d, srcs = ops.parse_shape(shape)
    if family == "SMEM":
        b = srcs[0] if srcs else 0
        if d == "i":
            return [f"{name} 4, {sgprs(4, b)}, 0x10"]
        if not b:
            return [f"{name} {sgprs(2, d)}" if d else name]
        if not d:
            return [f"{name} {sgprs(4, b)}, 0x10"]
        line = f"{name} {sgprs(16 if d >= 4 else 2, d)}, {sgprs(4, b)}, 0x10"
        return [line, line + " glc"] if "_atomic_" in name else [line]
    if family == "SOPC" and srcs[1] == "g":
        return [f"{name} s4, gpr_idx(SRC0,DST)"]
    parts = [sgprs(2, d)] if d else []
    parts += [sgprs(4 + 2 * i, w) for i, w in enumerate(srcs)]
    return [f"{name} " + ", ".join(parts)]


FAMILIES = ("SOP1", "SOP2", "SOPC", "SOPK", "SOPP", "SMEM", "VOP1", "VOP2", "VOPC", "VOP3", "VOP3P", "DS", "FLAT",
            "GLOBAL", "SCRATCH", "MUBUF")


def _family(table: str, op: int) -> str:
    if table == "VOP3" and op in f9.VOP3B_OPS:
        return "VOP3B"
    if table == "VOP3P" and op in f9.MAI_OPS:
        return "VOP3P_MAI"
    return table


def _table_cases():
    return support.table_cases(ops.TABLES, FAMILIES, _family, representatives)


# instructions exercising the operand space, literals, modifiers and special immediates, written as LLVM
# prints them
SPECIAL_LINES = """
s_mov_b32 s1, 0x12345678
s_mov_b32 s1, -1
s_mov_b32 s1, 0.5
s_mov_b32 s1, 0xffffffef
s_mov_b32 s1, 0.15915494
s_mov_b32 vcc_lo, exec_lo
s_mov_b32 vcc_hi, exec_hi
s_mov_b64 vcc, exec
s_mov_b64 s[2:3], 0x12345678
s_mov_b64 exec, -1
s_mov_b64 s[2:3], flat_scratch
s_mov_b64 s[2:3], xnack_mask
s_mov_b32 s1, flat_scratch_hi
s_mov_b32 s1, xnack_mask_lo
s_mov_b32 m0, s1
s_mov_b32 s101, s1
s_mov_b32 s1, src_scc
s_mov_b32 s1, src_vccz
s_mov_b32 s1, src_execz
s_mov_b32 s1, src_shared_base
s_mov_b32 s1, src_pops_exiting_wave_id
s_mov_b32 ttmp0, s1
s_mov_b64 ttmp[4:5], s[2:3]
s_add_u32 s1, s2, 0x41
s_lshl_b64 s[2:3], s[4:5], 2
s_and_saveexec_b64 s[2:3], vcc
s_andn2_b64 exec, exec, s[2:3]
s_cselect_b32 s1, 1, 0
s_cmp_lt_u32 s1, 0x100
s_cmp_eq_u64 s[2:3], 0
s_bitcmp1_b32 s1, 3
s_set_gpr_idx_on s2, gpr_idx()
s_set_gpr_idx_on s2, gpr_idx(SRC0,SRC1,SRC2,DST)
s_movk_i32 s1, 0xffff
s_getreg_b32 s1, hwreg(HW_REG_MODE)
s_getreg_b32 s1, hwreg(HW_REG_HW_ID)
s_getreg_b32 s1, hwreg(HW_REG_XCC_ID)
s_getreg_b32 s1, hwreg(HW_REG_SQ_PERF_SNAPSHOT_PC_HI, 8, 1)
s_getreg_b32 s1, hwreg(HW_REG_TBA_LO)
s_getreg_b32 s1, hwreg(26)
s_getreg_b32 s1, hwreg(63, 31, 32)
s_setreg_imm32_b32 hwreg(HW_REG_MODE), 0x12345
s_call_b64 s[30:31], -32
s_cbranch_i_fork s[2:3], -3
s_waitcnt vmcnt(0)
s_waitcnt lgkmcnt(0)
s_waitcnt expcnt(3)
s_waitcnt vmcnt(15)
s_waitcnt vmcnt(62)
s_waitcnt vmcnt(63) expcnt(7) lgkmcnt(15)
s_waitcnt vmcnt(0) expcnt(0) lgkmcnt(0)
s_waitcnt vmcnt(20) lgkmcnt(3)
s_sendmsg sendmsg(MSG_SAVEWAVE)
s_sendmsg sendmsg(MSG_GET_DOORBELL)
s_sendmsg sendmsg(MSG_GS, GS_OP_EMIT_CUT, 3)
s_sendmsg sendmsg(MSG_GS_DONE, GS_OP_NOP)
s_sendmsg sendmsg(MSG_GS_DONE, GS_OP_EMIT, 1)
s_sendmsg sendmsg(MSG_SYSMSG, SYSMSG_OP_ECC_ERR_INTERRUPT)
s_sendmsg sendmsg(11, 0, 0)
s_sendmsg 65535
s_set_gpr_idx_mode gpr_idx()
s_nop 7
s_nop 0x41
s_sleep 0xffff
s_trap 2
s_setprio 3
s_endpgm 3
s_branch -3
s_branch 32767
s_branch -32768
s_cbranch_scc0 -1
s_cbranch_execz 2
s_load_dword s1, s[2:3], 0x10
s_load_dword s1, s[2:3], -0x10
s_load_dword s1, s[2:3], 0xfffff
s_load_dword s1, s[2:3], -0x100000
s_load_dword s1, s[2:3], s4
s_load_dword s1, s[2:3], m0
s_load_dword s1, s[2:3], s4 offset:0x10
s_load_dword s1, s[2:3], ttmp0 offset:-0x8
s_load_dword s1, s[2:3], 0x10 glc
s_load_dwordx4 s[0:3], s[4:5], 0x0
s_load_dwordx16 s[0:15], s[4:5], 0x40
s_buffer_load_dword s1, s[4:7], 0xfffff
s_buffer_load_dword s1, s[4:7], s8
s_store_dword s1, s[2:3], s4 offset:0x4 glc
s_memtime s[2:3]
s_dcache_discard s[4:5], s2
v_mov_b32_e32 v1, s101
v_mov_b32_e32 v1, flat_scratch_lo
v_mov_b32_e32 v1, xnack_mask_hi
v_mov_b32_e32 v1, vcc_hi
v_mov_b32_e32 v1, exec_lo
v_mov_b32_e32 v1, m0
v_mov_b32_e32 v1, ttmp15
v_mov_b32_e32 v1, src_shared_limit
v_mov_b32_e32 v1, src_private_base
v_mov_b32_e32 v1, src_private_limit
v_mov_b32_e32 v1, src_vccz
v_mov_b32_e32 v1, src_execz
v_mov_b32_e32 v1, src_scc
v_mov_b32_e32 v255, v255
v_mov_b32_e32 v1, 0.15915494
v_mov_b32_e32 v1, -2.0
v_mov_b32_e32 v1, 0x80000000
v_mov_b32_e32 v1, -16
v_mov_b32_e32 v1, 64
v_mov_b64_e32 v[2:3], 0x64
v_mov_b64_e32 v[2:3], 1.0
v_mov_b64_e32 v[2:3], s[4:5]
v_add_f32_e32 v1, 0x3f000001, v2
v_add_f16_e32 v1, 0x1234, v2
v_add_f16_e32 v1, 0.5, v2
v_add_u32_e32 v1, 0xffffffef, v2
v_cvt_f64_i32_e32 v[2:3], s3
v_fmamk_f32 v1, v2, 0x3f800000, v3
v_fmaak_f32 v1, 1.0, v3, 0x5
v_madmk_f16 v2, v4, 0x1234, v6
v_cndmask_b32_e32 v1, 0, v3, vcc
v_addc_co_u32_e32 v1, vcc, 0, v3, vcc
v_cmp_gt_u32_e32 vcc, s0, v0
v_cmpx_lt_f32_e32 vcc, 1.0, v2
v_cmp_class_f64_e32 vcc, v[2:3], v4
v_add_f64 v[0:1], 0.15915494309189532, v[2:3]
v_add_f64 v[0:1], xnack_mask, v[2:3]
v_add_f64 v[0:1], flat_scratch, v[2:3]
v_add_f64 v[0:1], vcc, v[2:3]
v_add_f64 v[0:1], exec, v[2:3]
v_add_f64 v[0:1], ttmp[2:3], v[2:3]
v_add_f64 v[0:1], -v[2:3], |v[4:5]| clamp div:2
v_add_f32_e64 v1, -v2, |v3|
v_add_f32_e64 v1, -|v2|, v3 clamp
v_add_f32_e64 v1, v2, v3 mul:2
v_add_f32_e64 v1, v2, v3 clamp mul:4
v_add_u32_e64 v1, v2, v3 clamp
v_fma_f32 v1, v2, -v3, -v4
v_fma_f32 v1, s2, 0.5, v4
v_cmp_lt_f32_e64 s[2:3], v1, v2
v_cmp_lt_f32_e64 vcc, -v2, |v3|
v_cmpx_lt_f32_e64 s[2:3], v1, v2
v_cmp_class_f32_e64 s[2:3], v2, 3
v_cndmask_b32_e64 v1, -v2, |v3|, s[4:5]
v_cndmask_b32_e64 v1, 0, 1, vcc
v_add_co_u32_e64 v1, s[4:5], v2, v3
v_add_co_u32_e64 v1, vcc, v2, v3 clamp
v_addc_co_u32_e64 v1, s[4:5], v2, v3, s[6:7]
v_subbrev_co_u32_e64 v1, s[4:5], 0, v3, vcc
v_div_scale_f32 v1, vcc, -v2, v3, v4
v_div_scale_f64 v[2:3], s[4:5], v[4:5], v[6:7], v[8:9]
v_mad_u64_u32 v[2:3], s[4:5], v1, v2, v[4:5]
v_mad_i64_i32 v[2:3], vcc, 10, v5, 0
v_lshl_add_u64 v[2:3], s[4:5], v7, v[8:9]
v_lshl_add_u64 v[2:3], v[4:5], 3, s[2:3]
v_lshl_add_u64 v[2:3], v[4:5], 0, 1
v_lshlrev_b64 v[0:1], 2, v[0:1]
v_readlane_b32 s1, v2, m0
v_readfirstlane_b32 ttmp1, v2
v_writelane_b32 v1, 5, s3
v_mul_lo_u32 v1, v2, s3
v_pack_b32_f16 v1, v2, v3 op_sel:[1,0,1]
v_fma_f16 v1, v2, v3, v4 op_sel:[1,0,1,0]
v_mad_u32_u16 v1, v2, v3, v4 op_sel:[0,0,1,1]
v_max3_f16 v1, v2, v3, v4 op_sel:[0,0,0,1]
v_add_i16 v1, v2, v3 op_sel:[1,0,1] clamp
v_cvt_pk_fp8_f32 v1, -v2, |v3| op_sel:[0,0,1]
v_cvt_sr_bf8_f32 v1, v2, v3 op_sel:[0,0,1,1]
v_cvt_sr_fp8_f32 v1, -|s2|, v3
v_mov_b32_sdwa v1, v2 dst_sel:BYTE_1 dst_unused:UNUSED_PAD src0_sel:WORD_1
v_mov_b32_sdwa v1, 1 dst_sel:DWORD dst_unused:UNUSED_PRESERVE src0_sel:DWORD
v_cvt_f32_f16_sdwa v1, -|v2| dst_sel:DWORD dst_unused:UNUSED_PRESERVE src0_sel:WORD_1
v_cvt_f32_i32_sdwa v1, sext(v2) dst_sel:DWORD dst_unused:UNUSED_PRESERVE src0_sel:WORD_1
v_cvt_f32_fp8_sdwa v1, s3 src0_sel:BYTE_1
v_cvt_pk_f32_bf8_sdwa v[2:3], s3 clamp mul:2 src0_sel:WORD_1
v_add_f32_sdwa v1, v2, v3 dst_sel:WORD_1 dst_unused:UNUSED_SEXT src0_sel:BYTE_2 src1_sel:BYTE_3
v_add_f32_sdwa v1, -v2, |v3| clamp mul:2 dst_sel:DWORD dst_unused:UNUSED_PRESERVE src0_sel:DWORD src1_sel:DWORD
v_add_f32_sdwa v1, v2, v3 div:2 dst_sel:DWORD dst_unused:UNUSED_PRESERVE src0_sel:DWORD src1_sel:DWORD
v_add_f32_sdwa v1, s2, v3 dst_sel:DWORD dst_unused:UNUSED_PRESERVE src0_sel:DWORD src1_sel:DWORD
v_add_u32_sdwa v1, sext(v2), sext(v3) dst_sel:DWORD dst_unused:UNUSED_PRESERVE src0_sel:BYTE_0 src1_sel:BYTE_1
v_add_u32_sdwa v1, v2, s3 dst_sel:DWORD dst_unused:UNUSED_PRESERVE src0_sel:DWORD src1_sel:DWORD
v_add_u32_sdwa v1, v2, 5 dst_sel:DWORD dst_unused:UNUSED_PRESERVE src0_sel:DWORD src1_sel:DWORD
v_add_u32_sdwa v1, v2, v3 clamp dst_sel:DWORD dst_unused:UNUSED_PRESERVE src0_sel:DWORD src1_sel:DWORD
v_add_co_u32_sdwa v1, vcc, v2, v3 dst_sel:DWORD dst_unused:UNUSED_PRESERVE src0_sel:DWORD src1_sel:DWORD
v_addc_co_u32_sdwa v1, vcc, v2, v3, vcc dst_sel:DWORD dst_unused:UNUSED_PRESERVE src0_sel:DWORD src1_sel:DWORD
v_cndmask_b32_sdwa v1, v2, v3, vcc dst_sel:WORD_0 dst_unused:UNUSED_PRESERVE src0_sel:DWORD src1_sel:DWORD
v_cmp_class_f32_sdwa vcc, v1, v2 src0_sel:WORD_1 src1_sel:DWORD
v_cmp_lt_f32_sdwa vcc, -v1, |v2| src0_sel:WORD_1 src1_sel:DWORD
v_cmp_lt_i32_sdwa s[2:3], sext(v1), v2 src0_sel:BYTE_0 src1_sel:DWORD
v_cmpx_lt_f32_sdwa s[2:3], v1, s2 src0_sel:WORD_1 src1_sel:DWORD
v_cmp_lt_f32_sdwa vcc, s1, v2 src0_sel:DWORD src1_sel:DWORD
v_nop
v_mov_b32_dpp v1, v2 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf
v_mov_b32_dpp v1, v2 row_shl:1 row_mask:0xf bank_mask:0xf bound_ctrl:1
v_mov_b32_dpp v1, v2 row_shr:15 row_mask:0xf bank_mask:0xf
v_mov_b32_dpp v1, v2 row_ror:7 row_mask:0xf bank_mask:0xf
v_mov_b32_dpp v1, v2 wave_shl:1 row_mask:0xf bank_mask:0xf
v_mov_b32_dpp v1, v2 wave_rol:1 row_mask:0xf bank_mask:0xf
v_mov_b32_dpp v1, v2 wave_shr:1 row_mask:0xf bank_mask:0xf
v_mov_b32_dpp v1, v2 wave_ror:1 row_mask:0xf bank_mask:0xf
v_mov_b32_dpp v1, v2 row_mirror row_mask:0xf bank_mask:0xf
v_mov_b32_dpp v1, v2 row_half_mirror row_mask:0x3 bank_mask:0x5
v_mov_b32_dpp v1, v2 row_bcast:15 row_mask:0xa bank_mask:0xf
v_mov_b32_dpp v1, v2 row_bcast:31 row_mask:0xf bank_mask:0x0
v_mov_b32_dpp v1, v2 row_newbcast:15 row_mask:0xf bank_mask:0xf
v_mov_b64_dpp v[2:3], v[4:5] row_newbcast:1 row_mask:0xf bank_mask:0xf
v_cvt_pk_f32_fp8_dpp v[0:1], v3 row_newbcast:3 row_mask:0xf bank_mask:0xf
v_cvt_f32_f16_dpp v1, -|v2| quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf
v_add_f32_dpp v1, -v2, |v3| row_shl:2 row_mask:0xf bank_mask:0xf
v_cndmask_b32_dpp v1, v2, v3, vcc quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf
v_addc_co_u32_dpp v1, vcc, v2, v3, vcc quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf
v_mac_f16_dpp v1, v2, v3 quad_perm:[0,1,2,3] row_mask:0x1 bank_mask:0x2
v_nop quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf
v_pk_add_f16 v1, 0.5, v2
v_pk_add_u16 v1, 7, v2
v_pk_add_f16 v1, v2, v3 op_sel:[1,0] op_sel_hi:[0,1] neg_lo:[1,0] neg_hi:[0,1] clamp
v_pk_fma_f16 v1, v2, v3, v4 op_sel:[1,0,0] op_sel_hi:[0,1,1] neg_lo:[1,0,0] neg_hi:[0,1,0]
v_pk_fma_f32 v[2:3], v[4:5], v[6:7], v[8:9] op_sel_hi:[0,0,0]
v_pk_mul_f32 v[2:3], v[4:5], v[6:7] op_sel_hi:[0,0]
v_pk_add_f32 v[2:3], v[4:5], v[6:7] op_sel_hi:[1,0] neg_lo:[1,0]
v_pk_mov_b32 v[2:3], v[4:5], v[6:7] op_sel:[1,0]
v_pk_mov_b32 v[2:3], s[4:5], v[6:7]
v_fma_mix_f32 v1, v2, v3, v4
v_fma_mix_f32 v1, -v2, |v3|, v4 op_sel:[1,0,0] op_sel_hi:[1,0,1]
v_fma_mixlo_f16 v1, v2, v3, v4 op_sel_hi:[1,1,1] clamp
v_dot2_f32_f16 v1, v2, v3, v4 clamp
v_dot4_i32_i8 v1, v2, v3, 5
v_accvgpr_read_b32 v1, a255
v_accvgpr_write_b32 a1, s2
v_accvgpr_write_b32 a1, 7
v_accvgpr_mov_b32 a1, a2
v_mfma_f32_32x32x8_f16 a[0:15], v[0:1], v[2:3], a[0:15] cbsz:1 abid:2 blgp:3
v_mfma_f32_32x32x8_f16 v[0:15], v[0:1], v[2:3], v[0:15]
v_mfma_f32_32x32x8_f16 a[0:15], a[0:1], a[2:3], 0
v_mfma_f32_32x32x8_f16 a[0:15], v[0:1], a[2:3], a[0:15] abid:15 blgp:7
v_mfma_f32_16x16x4_f32 a[0:3], v0, v1, 1.0
v_mfma_f32_32x32x1_2b_f32 a[0:31], v0, v1, a[0:31]
v_mfma_f32_16x16x32_fp8_fp8 a[0:3], v[0:1], v[2:3], a[0:3] cbsz:1 abid:1 blgp:1
v_mfma_f64_16x16x4_f64 a[0:7], v[0:1], v[2:3], a[0:7] neg:[1,0,0]
v_mfma_f64_4x4x4_4b_f64 v[0:1], v[2:3], v[4:5], 0
v_mfma_i32_16x16x32_i8 v[0:3], v[4:5], v[6:7], v[0:3]
v_mfma_f32_32x32x4_xf32 a[0:15], v[0:1], v[2:3], a[0:15]
v_smfmac_f32_16x16x32_f16 v[0:3], a[4:5], v[8:11], v3 cbsz:3 abid:1
ds_read_b32 v1, v2 offset:1020
ds_read_b32 v1, v2 offset:65535
ds_read_b32 a1, v2 offset:4
ds_read_b128 a[0:3], v2
ds_write_b32 v1, a2
ds_write2_b32 v1, v2, v3 offset0:1 offset1:2
ds_write2st64_b32 v1, v2, v3 offset1:255
ds_read2st64_b32 v[2:3], v3 offset0:4 offset1:8
ds_wrxchg2_rtn_b32 v[2:3], v3, v4, v5 offset0:1 offset1:2
ds_add_rtn_u32 v1, v2, v3
ds_pk_add_rtn_f16 a3, v2, a1
ds_swizzle_b32 v1, v2 offset:swizzle(QUAD_PERM,0,1,2,3)
ds_swizzle_b32 v1, v2 offset:swizzle(BITMASK_PERM,"01pip")
ds_swizzle_b32 v1, v2 offset:swizzle(SWAP,16)
ds_swizzle_b32 v1, v2 offset:swizzle(BROADCAST,8,3)
ds_swizzle_b32 v1, v2 offset:swizzle(FFT,31)
ds_swizzle_b32 v1, v2 offset:swizzle(ROTATE,0,3)
ds_bpermute_b32 v1, v2, v3 offset:4
ds_append v1 offset:4
ds_gws_init v4 offset:3 gds
ds_gws_sema_v gds
ds_nop
global_load_dword v1, v[2:3], off
global_load_dword v1, v2, s[4:5] offset:-16
global_load_dword v1, v[2:3], off offset:4095
global_load_dword v1, v[2:3], off offset:-4096
global_load_dword v1, v[2:3], off sc0
global_load_dword v1, v[2:3], off nt
global_load_dword v1, v[2:3], off sc1
global_load_dword v1, v[2:3], off sc0 nt sc1
global_load_dword a1, v[2:3], off
global_load_dword v1, v2, vcc
global_store_dword v[2:3], a1, off
global_store_dwordx4 v0, v[4:7], s[2:3] offset:16
global_atomic_add v0, v[2:3], v1, off sc0
global_atomic_add v[2:3], v1, off sc1
global_atomic_cmpswap_x2 v[0:1], v[2:3], v[4:7], off sc0
global_atomic_add_f32 v0, v[0:1], v2, off sc0 sc1
global_atomic_pk_add_bf16 a4, v[2:3], a1, off sc0
global_load_lds_dword v[2:3], off offset:4
global_load_lds_dword v2, s[4:5] sc0 nt sc1
flat_load_dword v1, v[2:3]
flat_load_dword v1, v[2:3] offset:4095
flat_load_dword v1, v[2:3] sc0 nt sc1
flat_atomic_add_f64 v[0:1], v[0:1], v[2:3] sc0 sc1
flat_store_dword v[2:3], a1
scratch_load_dword v1, v2, off
scratch_load_dword v1, off, s3 offset:16
scratch_load_dword v1, off, off
scratch_load_dword v1, v2, s3 offset:-16
scratch_store_dword off, v1, s3 offset:4
scratch_store_dword v2, v1, off offset:-4096
scratch_load_lds_dword off, off offset:4
buffer_load_dword v1, off, s[4:7], 0
buffer_load_dword v1, v2, s[4:7], 0 offen offset:4095
buffer_load_dword v1, v2, s[4:7], s8 idxen sc0 nt sc1
buffer_load_dword v1, v[2:3], s[4:7], 0 idxen offen
buffer_load_dword a1, v2, s[4:7], 0 offen
buffer_load_dword v1, off, s[4:7], m0
buffer_load_dword v1, off, s[8:11], ttmp3 offset:16
buffer_load_dword off, s[4:7], 0 lds
buffer_load_dword v1, s[4:7], 0 offen lds
buffer_load_ubyte off, s[4:7], 0 offset:8 sc0 lds
buffer_store_dword v1, off, s[4:7], s2 offset:4 nt
buffer_atomic_add v1, off, s[4:7], 0 sc0
buffer_atomic_cmpswap v[2:3], v4, s[4:7], 0 offen sc0
buffer_wbl2 sc1
buffer_inv sc0 sc1
""".strip().splitlines()


def _oracle_lines() -> list[str]:
    return [c.values[0] for c in _table_cases()] + SPECIAL_LINES


ORACLE = support.Oracle(ARCH, _oracle_lines)


@pytest.mark.parametrize("line, family, op, mnemonic", _table_cases())
def test_table_entry_round_trip(line, family, op, mnemonic):
    ins = ORACLE.check_line(line)
    assert (ins.family, ins.op, ins.mnemonic) == (family, op, mnemonic), line


@pytest.mark.parametrize("line", SPECIAL_LINES)
def test_special_operands_round_trip(line):
    ins = ORACLE.check_line(line)
    expect = re.sub(r"(_e32|_e64|_sdwa|_dpp)$", "", line.split()[0])
    assert ins.mnemonic == expect


# ---------------------------------------------------------------------------------------------------------
# the tables themselves

def test_table_sets_agree_with_the_formats():
    """MAI_OPS / VOP3B_OPS (formats) name exactly the MFMA and carry-out opcodes of the tables."""
    assert f9.MAI_OPS == {op for op, (name, _) in ops.VOP3P.items() if name.startswith(("v_mfma", "v_smfmac"))}
    vop3b = {"v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32", "v_addc_co_u32", "v_subb_co_u32",
             "v_subbrev_co_u32", "v_div_scale_f32", "v_div_scale_f64", "v_mad_u64_u32", "v_mad_i64_i32"}
    assert f9.VOP3B_OPS == {op for op, (name, _) in ops.VOP3.items() if name in vop3b}
    assert ops.VOP3_OPSEL <= {name for name, _ in ops.VOP3.values()}
    for table, offset in ops.VOP3_OFFSET.items():  # VOP1/VOP2/VOPC ops promoted to VOP3 keep their shape
        for op, (name, shape) in ops.TABLES[table].items():
            promoted = ops.VOP3.get(op + offset)
            if promoted and promoted[0] == name and name not in ("v_cndmask_b32",) + VOP2_CARRY_IN:
                assert promoted[1] == shape, name
    assert all(op < 0x380 for op in ops.VOP3)  # 0x380-0x3ff is VOP3P's encoding space
    # the instructions a compute kernel needs are all there
    names = {name for table in ops.TABLES.values() for name, _ in table.values()}
    assert {"v_lshl_add_u64", "v_mov_b64", "global_load_lds_dword", "buffer_wbl2", "buffer_inv", "s_dcache_wb",
            "ds_read_b128", "v_pk_fma_f32", "v_mfma_f32_32x32x8_f16", "v_accvgpr_read_b32"} <= names
    assert not {"s_code_end", "v_mac_f32", "v_mad_f32", "v_madmk_f32", "buffer_wbinvl1"} & names


# ---------------------------------------------------------------------------------------------------------
# kernels compiled by llvmlite for gfx942

KERNELS = {
    **support.KERNELS,  # vadd, divloop, ldsrev, mixed
    "addr64": """
declare i32 @llvm.amdgcn.workitem.id.x()
define amdgpu_kernel void @addr64(ptr addrspace(1) %p, i64 %stride, i64 %n) {
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %t = zext i32 %tid to i64
  %i = mul i64 %t, %stride
  %q = getelementptr double, ptr addrspace(1) %p, i64 %i
  %v = load double, ptr addrspace(1) %q
  %w = fmul double %v, 2.0
  %q2 = getelementptr double, ptr addrspace(1) %q, i64 %n
  store double %w, ptr addrspace(1) %q2
  ret void
}
""",
}


@functools.lru_cache(maxsize=None)
def compile_kernel(name: str) -> tuple[str, bytes]:
    """(assembly listing, .text bytes) of one of KERNELS for gfx942."""
    from elftools.elf.elffile import ELFFile

    from hcqsim.compiler import assemble_listing, compile_llvm
    ir = KERNELS[name]
    obj = compile_llvm(ir, ARCH)
    return assemble_listing(ir, ARCH), ELFFile(io.BytesIO(obj)).get_section_by_name(".text").data()


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_compiled_kernel_decodes_like_the_listing(name):
    listing, text = compile_kernel(name)
    expected = support.listing_instructions(listing, name)
    program = decode_program(text, ARCH)
    assert all(isinstance(ins, InstrGfx9) for ins in program)
    # gfx942 pads .text with s_nop 0 (there is no s_code_end); alignment padding is s_nop too
    support.assert_decodes_like_listing(program, text, expected, padding=("s_nop",))


def _by_name(program):
    out = {}
    for ins in program:
        out.setdefault(ins.mnemonic, ins)
    return out


def test_vadd_kernel_facts():
    """ISA_FACTS 4.1 for gfx942: 64-bit EXEC, v_lshl_add_u64 addressing, saddr=off global access, no VOPD."""
    _, text = compile_kernel("vadd")
    program = decode_program(text, ARCH)
    by_name = _by_name(program)
    saveexec = by_name["s_and_saveexec_b64"]
    assert saveexec.family == "SOP1" and saveexec.shape == "2:2" and saveexec.fields["ssrc0"] == f9.VCC_LO
    lshl = by_name["v_lshl_add_u64"]
    assert lshl.family == "VOP3" and lshl.op == 0x208 and lshl.shape == "2:2,1,2"
    g = by_name["global_load_dword"]
    assert g.family == "GLOBAL" and g.fields["saddr"] == f9.SADDR_OFF and g.fields["seg"] == 2 and g.size == 8
    assert by_name["v_cmp_gt_u32"].family == "VOPC" and by_name["v_and_b32"].literal == 0x3FF
    assert by_name["s_endpgm"].family == "SOPP" and program[-1].mnemonic == "s_nop"
    assert all(ins.family in f9.COMPUTE_FAMILIES for ins in program)


def test_lds_kernel_facts():
    _, text = compile_kernel("ldsrev")
    by_name = _by_name(decode_program(text, ARCH))
    assert by_name["ds_write_b32"].family == "DS" and by_name["ds_read_b32"].shape == "1:1,0,0"
    assert by_name["s_barrier"].family == "SOPP"
    assert by_name["s_waitcnt"].shape == "waitcnt"


# ---------------------------------------------------------------------------------------------------------
# hand-written encodings (ISA_FACTS 5.3), unknown opcodes and garbage

def test_sdwa_fields():
    """v_add_u32_sdwa v1, v2, s3 dst_sel:WORD_1 ... : the extension dword decodes into fields."""
    ins = decode(pack_words(0x680206F9, 0x86051502), 0, ARCH)
    f = ins.fields
    assert ins.size == 8 and ins.mnemonic == "v_add_u32" and f["src0"] == f9.SDWA_SRC0 and f["sdwa"] == 0x86051502
    assert (f["ext_src0"], f["dst_sel"], f["dst_unused"], f["src0_sel"], f["s0"], f["s1"]) == (2, 5, 2, 5, 0, 1)
    assert f9.src0_code(f) == 256 + 2 and f9.src1_code(f) == 3  # s1: vsrc1 holds the SGPR code
    assert format_instr(ins) == ("v_add_u32_sdwa v1, v2, s3 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE "
                                 "src0_sel:WORD_1 src1_sel:DWORD")
    vopc = decode(pack_words(0x7C8204F9, 0x06058401), 0, ARCH)  # v_cmp_lt_f32_sdwa s[4:5], v1, v2
    assert vopc.fields["sd"] == 1 and vopc.fields["sdst"] == 4 and "dst_sel" not in vopc.fields


def test_dpp_fields():
    ins = decode(pack_words(0x020206FA, 0x1230E402), 0, ARCH)  # v_add_f32_dpp, quad_perm, src0 neg/abs, bound_ctrl
    f = ins.fields
    assert ins.size == 8 and f["dpp"] == 0x1230E402 and f9.src0_code(f) == 256 + 2
    assert (f["dpp_ctrl"], f["bound_ctrl"], f["src0_neg"], f["src0_abs"], f["row_mask"], f["bank_mask"]) == \
        (0xE4, 0, 1, 1, 1, 2)
    assert format_instr(ins) == ("v_add_f32_dpp v1, -|v2|, v3 quad_perm:[0,1,2,3] row_mask:0x1 bank_mask:0x2")
    bad = decode(pack_words(0x7E0202FA, 0xFF014402), 0, ARCH)  # dpp_ctrl 0x144 is not a GFX9 control
    assert "Invalid dpp_ctrl" in format_instr(bad)


def test_vop3b_sdst_and_mai_fields():
    ins = decode(pack_words(0xD1190401, 0x00020702), 0, ARCH)  # v_add_co_u32_e64 v1, s[4:5], v2, v3
    assert ins.family == "VOP3B" and ins.fields["sdst"] == 4 and ins.shape == "1:1,1"
    assert format_instr(ins) == "v_add_co_u32_e64 v1, s[4:5], v2, v3"
    mfma = decode(pack_words(0xD3CC9100, 0x64020500), 0, ARCH)  # a[0:15], v[0:1], v[2:3], a[0:15] cbsz:1 abid:2 blgp:3
    f = mfma.fields
    assert mfma.family == "VOP3P_MAI" and mfma.op == 0x4C
    assert (f["acc_cd"], f["acc"], f["cbsz"], f["abid"], f["blgp"]) == (1, 0, 1, 2, 3)
    assert mfma.shape == "16:2,2,16"


def test_flat_segments_and_cache_bits():
    g = decode(pack_words(0xDE538FFF, 0x01FF0002), 0, ARCH)  # global_load_dword a1, v[2:3], off offset:4095 sc0 nt sc1
    f = g.fields
    assert g.family == "GLOBAL" and (f["sc0"], f["nt"], f["sc1"], f["acc"], f["seg"]) == (1, 1, 1, 1, 2)
    assert format_instr(g) == "global_load_dword a1, v[2:3], off offset:4095 sc0 nt sc1"
    s = decode(pack_words(0xDC506000, 0x017F0002), 0, ARCH)  # scratch_load_dword v1, v2, off: sve set
    assert s.family == "SCRATCH" and s.fields["sve"] == 1
    with pytest.raises(DecodeError, match="0xdc50c000"):
        decode(pack_words(0xDC50C000, 0), 0, ARCH)  # seg 3 is reserved


def test_sizes_from_fields():
    assert decode(pack_words(0xBE8000FF, 0x12345678), 0, ARCH).size == 8  # SOP1 literal
    assert decode(pack_words(0xBA001901, 15), 0, ARCH).size == 8  # s_setreg_imm32_b32
    assert decode(pack_words(0x2E020702, 0x3F800000), 0, ARCH).size == 8  # v_fmamk_f32: always a literal
    assert decode(pack_words(0x7E0202FF, 0x12345678), 0, ARCH).size == 8  # VOP1 literal
    assert decode(pack_words(0xD2800000, 0x000204FF), 0, ARCH).size == 8  # VOP3: never a literal on GFX9
    assert decode(pack_words(0x7E0202F9, 0x00061602), 0, ARCH).size == 8  # SDWA
    assert decode(pack_words(0x7E0202FA, 0xFF00E402), 0, ARCH).size == 8  # DPP
    assert decode(pack_words(0x7E0202EA), 0, ARCH).size == 4  # 233/234 are not DPP8 on GFX9


def test_unknown_opcode_decodes_with_mnemonic_none():
    unknown = [
        (pack_words(0xBE807F00), "SOP1", 0x7F, 4),
        (pack_words(0xBE807FFF, 0xDEADBEEF), "SOP1", 0x7F, 8),  # size still counts the literal
        (pack_words(0x7E02FF02), "VOP1", 0x7F, 4),
        (pack_words(0xD2FF0000, 0x00000000), "VOP3", 0x2FF, 8),
        (pack_words(0xD3CF0000, 0x00000000), "VOP3P", 0x4F, 8),
        (pack_words(0xD82C0000, 0x00000000), "DS", 0x16, 8),
        (pack_words(0xDDFC8000, 0x007F0000), "GLOBAL", 0x7F, 8),
        (pack_words(0xE0F80000, 0x00000000), "MUBUF", 0x3E, 8),  # buffer_wbinvl1: not on gfx940+
        (pack_words(0xE8000000, 0x00000000), "MTBUF", 0, 8),  # graphics family: identified, not tabulated
        (pack_words(0xC8000000), "VINTRP", 0, 4),
    ]
    support.assert_unknown_opcodes_decode(unknown, ARCH)


def test_garbage_raises_decode_error():
    for word in (0xCC000000, 0xD4000000, 0xE4000000, 0xFC000000):  # [31:26] = 0x33, 0x35, 0x39, 0x3f
        with pytest.raises(DecodeError, match=f"gfx942.*0x{word:08x}.*offset 0x4"):
            decode(pack_words(0xBF800000, word), 4, ARCH)
    with pytest.raises(DecodeError, match="truncated"):
        decode(pack_words(0xBE8000FF), 0, ARCH)  # s_mov_b32 with its literal missing
    with pytest.raises(DecodeError, match="truncated"):
        decode(pack_words(0xC0020041), 0, ARCH)  # SMEM is two dwords
    with pytest.raises(DecodeError, match="truncated"):
        decode(pack_words(0x7E0202F9), 0, ARCH)  # the SDWA dword is missing
    with pytest.raises(DecodeError):
        decode_program(b"\x00\x00\x80\xbf\x00", ARCH)


def test_random_words_decode_or_raise_decode_error():
    """Any word sequence either decodes (and prints) or raises DecodeError: fault reports may print garbage."""
    support.assert_random_words_decode_or_raise(ARCH, 942)


def test_arch_dispatch_and_annotations():
    code = pack_words(0xBF800000, 0xBF88FFFE, 0xBF810000)  # s_nop 0; s_cbranch_execz -2; s_endpgm
    program = decode_program(code, ARCH)
    assert [i.mnemonic for i in program] == ["s_nop", "s_cbranch_execz", "s_endpgm"]
    assert isinstance(program[0], Instr) and program[0].arch == ARCH and str(program[1]) == "s_cbranch_execz -2"
    listing = disassemble(code, ARCH, annotate=True).splitlines()
    assert listing[2].startswith("s_endpgm") and "-> 0x0" in listing[1]
    assert decode(pack_words(0xBF810000), 0).mnemonic == "s_setkill"  # the same word on gfx11


def test_format_tables_encode_what_they_decode():
    sop1 = f9.FORMATS["SOP1"].encode(op=0x20, sdst=2, ssrc0=f9.VCC_LO)
    assert format_instr(decode(pack_words(*sop1), 0, ARCH)) == "s_and_saveexec_b64 s[2:3], vcc"
    vop3 = f9.FORMATS["VOP3"].encode(op=0x1CB, vdst=1, src0=258, src1=259, src2=260, neg=0b100)
    assert format_instr(decode(pack_words(*vop3), 0, ARCH)) == "v_fma_f32 v1, v2, v3, -v4"
    glb = f9.FORMATS["GLOBAL"].encode(op=0x14, seg=2, vdst=1, addr=2, saddr=f9.SADDR_OFF)
    assert format_instr(decode(pack_words(*glb), 0, ARCH)) == "global_load_dword v1, v[2:3], off"
    smem = f9.FORMATS["SMEM"].encode(op=2, sdata=4, sbase=2, imm=1, offset=0x10)
    assert format_instr(decode(pack_words(*smem), 0, ARCH)) == "s_load_dwordx4 s[4:7], s[4:5], 0x10"
