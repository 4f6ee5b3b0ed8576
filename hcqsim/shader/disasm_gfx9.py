"""gfx942 (CDNA3, GFX9 encodings): the LLVM-style printer, and the gfx942 names of the decoder.

Decoding is `decoder.decode(..., arch="gfx942")` / `decode_program`: the shared skeleton driven by
`decoder.ARCHES["gfx942"]` (formats_gfx9, opcodes_gfx942), giving `InstrGfx9` records (re-exported here, with
`decode_gfx942`); `decoder`'s module doc lists what gfx942's fields hold (SDWA, DPP, VOP3B, MFMA, cache bits).
`disasm.format_instr` / `disasm.disassemble` print gfx942 instructions with this module's `PRINTERS` and
`printed_mnemonic` (`format_instr_gfx9` is the same), on the operand helpers `disasm` shares with gfx11.
"""
from __future__ import annotations

from . import formats_gfx9 as f9
from . import opcodes_gfx942 as ops
from .decoder import ARCHES, Instr, InstrGfx9, sext
from .disasm import (MIX_OPS, OMOD_TEXT, ds_operands, flag_text, flat_operands, format_instr, hwreg_operand,
                     mubuf_address, operand_shape, operand_text, packed_modifiers, signed_hex, sopk_operands,
                     source_mods, vgpr, waitcnt_counters)

ARCH = "gfx942"


def decode_gfx942(code, offset: int) -> InstrGfx9:
    """The gfx942 instruction at byte `offset` of `code` (`decoder.decode(code, offset, "gfx942")`)."""
    return ARCHES[ARCH].decode(code, offset)


# =========================================================================================================
# printing (the syntax LLVM 22's AMDGPU printer uses for gfx942)

def operand(code: int, width: int = 1, literal: int | None = None) -> str:
    """Text of a 9-bit source operand code (SALU 8-bit and scalar 7-bit codes are the same numbers)."""
    return operand_text(f9, code, width, literal)


def _reg(code: int, width: int, acc: bool) -> str:
    """A VALU source that may be an AccVGPR (VGPR codes 256+n mean a[n] when `acc`)."""
    return vgpr(code - f9.VGPR_BASE, width, True) if acc and code >= f9.VGPR_BASE else operand(code, width)


def _u16_text(v: int) -> str:
    """How LLVM prints the plain 16-bit immediates of s_nop, s_sleep, s_trap...: decimal up to 64, else hex."""
    return str(v) if v <= 64 else f"0x{v:x}"


# --- SALU special immediates -------------------------------------------------------------------------

HWREG_NAMES = {1: "HW_REG_MODE", 2: "HW_REG_STATUS", 3: "HW_REG_TRAPSTS", 4: "HW_REG_HW_ID", 5: "HW_REG_GPR_ALLOC",
               6: "HW_REG_LDS_ALLOC", 7: "HW_REG_IB_STS", 15: "HW_REG_SH_MEM_BASES", 16: "HW_REG_TBA_LO",
               17: "HW_REG_TBA_HI", 18: "HW_REG_TMA_LO", 19: "HW_REG_TMA_HI", 20: "HW_REG_XCC_ID",
               21: "HW_REG_SQ_PERF_SNAPSHOT_DATA", 22: "HW_REG_SQ_PERF_SNAPSHOT_DATA1",
               23: "HW_REG_SQ_PERF_SNAPSHOT_PC_LO", 24: "HW_REG_SQ_PERF_SNAPSHOT_PC_HI"}
# s_sendmsg: message id [3:0], operation [6:4], stream [9:8] (GFX9)
SENDMSG_NAMES = {1: "MSG_INTERRUPT", 2: "MSG_GS", 3: "MSG_GS_DONE", 4: "MSG_SAVEWAVE", 5: "MSG_STALL_WAVE_GEN",
                 6: "MSG_HALT_WAVES", 7: "MSG_ORDERED_PS_DONE", 8: "MSG_EARLY_PRIM_DEALLOC", 9: "MSG_GS_ALLOC_REQ",
                 10: "MSG_GET_DOORBELL", 15: "MSG_SYSMSG"}
GS_OPS = ("GS_OP_NOP", "GS_OP_CUT", "GS_OP_EMIT", "GS_OP_EMIT_CUT")
SYSMSG_OPS = {1: "SYSMSG_OP_ECC_ERR_INTERRUPT", 2: "SYSMSG_OP_REG_RD", 3: "SYSMSG_OP_HOST_TRAP_ACK",
              4: "SYSMSG_OP_TTRACE_PC"}
GPR_IDX_MODES = ("SRC0", "SRC1", "SRC2", "DST")


def waitcnt_text(imm: int) -> str:
    """GFX9 s_waitcnt: vmcnt [3:0] + [15:14], expcnt [6:4], lgkmcnt [11:8]; counters at their maximum are omitted."""
    return waitcnt_counters((imm & 0xF) | (imm >> 14 & 3) << 4, imm >> 4 & 7, imm >> 8 & 0xF, 0xF)


def sendmsg_text(imm: int) -> str:
    msg, op, stream = imm & 0xF, imm >> 4 & 7, imm >> 8 & 3
    name = SENDMSG_NAMES.get(msg)
    if name is not None:
        if msg in (2, 3):  # MSG_GS / MSG_GS_DONE: an operation, and a stream unless GS_OP_NOP
            if (msg == 3 or op != 0) and op < 4 and (op != 0 or stream == 0) and imm >> 10 == 0:
                return f"sendmsg({name}, {GS_OPS[op]}" + (f", {stream})" if op else ")")
        elif msg == 15:
            if op in SYSMSG_OPS and stream == 0 and imm >> 10 == 0:
                return f"sendmsg({name}, {SYSMSG_OPS[op]})"
        elif imm == msg:
            return f"sendmsg({name})"
    if imm >> 10 == 0:
        return f"sendmsg({msg}, {op}, {stream})"
    return str(imm)


def hwreg_text(imm: int) -> str:
    return hwreg_operand(imm, HWREG_NAMES)


def gpr_idx_text(imm: int) -> str:
    if imm > 15:
        return str(imm)
    return "gpr_idx(" + ",".join(m for i, m in enumerate(GPR_IDX_MODES) if imm >> i & 1) + ")"


# --- per-family printers -----------------------------------------------------------------------------------

def _sop1(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, operand_shape(ins)
    parts = [operand(f["sdst"], d)] if d else []
    if srcs:
        parts.append(operand(f["ssrc0"], srcs[0], ins.literal))
    return ", ".join(parts)


def _sop2(ins: Instr) -> str:
    f, (d, (s0, s1)) = ins.fields, operand_shape(ins)
    parts = [operand(f["sdst"], d)] if d else []
    return ", ".join(parts + [operand(f["ssrc0"], s0, ins.literal), operand(f["ssrc1"], s1, ins.literal)])


def _sopc(ins: Instr) -> str:
    f, (_, (s0, s1)) = ins.fields, operand_shape(ins)
    second = gpr_idx_text(f["ssrc1"]) if s1 == "g" else operand(f["ssrc1"], s1, ins.literal)
    return f"{operand(f['ssrc0'], s0, ins.literal)}, {second}"


def _sopk(ins: Instr) -> str:
    return sopk_operands(ins, operand, hwreg_text)


def _sopp(ins: Instr) -> str:
    imm, kind = ins.fields["simm16"], ins.shape
    if kind == "none":
        return ""
    if kind == "opt":
        return str(imm) if imm else ""
    if kind == "br":
        return str(sext(imm, 16))
    if kind == "waitcnt":
        return waitcnt_text(imm)
    if kind == "sendmsg":
        return sendmsg_text(imm)
    if kind == "gpr_idx":
        return gpr_idx_text(imm)
    return _u16_text(imm)  # d


def _smem(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, operand_shape(ins)
    b = srcs[0] if srcs else 0
    parts = []
    if d == "i":
        parts.append(str(f["sdata"]))
    elif d:
        parts.append(operand(f["sdata"], d))
    if b:
        parts.append(operand(f["sbase"] * 2, b))
        if f["soe"]:
            where = operand(f["soffset"])
            parts.append(f"{where} offset:{signed_hex(sext(f['offset'], 21))}" if f["imm"] else where)
        elif f["imm"]:
            parts.append(signed_hex(sext(f["offset"], 21)))
        else:
            parts.append(operand(f["offset"] & 0x7F))
    return ", ".join(parts) + (" glc" if f["glc"] else "")


# DPP controls (GFX9): quad_perm 0x00-0xff, row_shl/shr/ror 1-15, wave shifts, mirrors, broadcasts, row_newbcast
_DPP_ROWS = ((0x101, "row_shl"), (0x111, "row_shr"), (0x121, "row_ror"))
_DPP_FIXED = {0x130: "wave_shl:1", 0x134: "wave_rol:1", 0x138: "wave_shr:1", 0x13C: "wave_ror:1",
              0x140: "row_mirror", 0x141: "row_half_mirror", 0x142: "row_bcast:15", 0x143: "row_bcast:31"}


def dpp_text(f: dict) -> str:
    ctrl = f["dpp_ctrl"]
    if ctrl <= 0xFF:
        text = "quad_perm:[" + ",".join(str(ctrl >> (2 * i) & 3) for i in range(4)) + "]"
    elif ctrl in _DPP_FIXED:
        text = _DPP_FIXED[ctrl]
    elif 0x150 <= ctrl <= 0x15F:
        text = f"row_newbcast:{ctrl - 0x150}"
    else:
        text = next((f"{name}:{ctrl - lo + 1}" for lo, name in _DPP_ROWS if lo <= ctrl <= lo + 14),
                    "/* Invalid dpp_ctrl value */")
    text += f" row_mask:0x{f['row_mask']:x} bank_mask:0x{f['bank_mask']:x}"
    return " " + text + (" bound_ctrl:1" if f["bound_ctrl"] else "")


def _sel(v: int) -> str:
    return f9.SDWA_SELS[v] if v < len(f9.SDWA_SELS) else str(v)


def _sdwa_text(ins: Instr, n_srcs: int) -> str:
    f = ins.fields
    text = ""
    if ins.family != "VOPC":
        text += (" clamp" if f["clamp"] else "") + OMOD_TEXT.get(f["omod"], "")
        if ins.mnemonic not in ops.SDWA_NO_DST_SEL:
            unused = f9.SDWA_UNUSED[f["dst_unused"]] if f["dst_unused"] < 3 else str(f["dst_unused"])
            text += f" dst_sel:{_sel(f['dst_sel'])} dst_unused:{unused}"
    text += f" src0_sel:{_sel(f['src0_sel'])}"
    if n_srcs > 1:
        text += f" src1_sel:{_sel(f['src1_sel'])}"
    return text


def _ext_mods(f: dict, i: int, text: str) -> str:
    """Source i of VOP1/VOP2/VOPC with the modifiers its SDWA (neg, abs, sext) or DPP (neg, abs) dword gives it."""
    if "sdwa" in f:
        return source_mods(text, f[f"src{i}_neg"], f[f"src{i}_abs"], f[f"src{i}_sext"])
    if "dpp" in f:
        return source_mods(text, f[f"src{i}_neg"], f[f"src{i}_abs"])
    return text


def _src0(ins: Instr, width: int, acc: bool = False) -> str:
    """src0 of VOP1/VOP2/VOPC with its SDWA / DPP extension and modifiers resolved."""
    code = f9.src0_code(ins.fields)
    return _ext_mods(ins.fields, 0, _reg(code, width, acc) if code != f9.LITERAL else operand(code, width, ins.literal))


def _src1(ins: Instr, width: int) -> str:
    return _ext_mods(ins.fields, 1, operand(f9.src1_code(ins.fields), width))


def _ext_text(ins: Instr, n_srcs: int) -> str:
    if "sdwa" in ins.fields:
        return _sdwa_text(ins, n_srcs)
    if "dpp" in ins.fields:
        return dpp_text(ins.fields)
    return ""


def _vop1(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, operand_shape(ins)
    name = ins.mnemonic
    if not d:  # v_nop: LLVM shows the DPP controls, not the SDWA selects
        return dpp_text(f).strip() if "dpp" in f else ""
    if name == "v_readfirstlane_b32":
        dst = operand(f["vdst"])
    else:
        dst = vgpr(f["vdst"], d, name in ops.ACC_DST)
    return f"{dst}, {_src0(ins, srcs[0], name in ops.ACC_SRC0)}" + _ext_text(ins, 1)


def _vop2(ins: Instr) -> str:
    f, (d, (s0w, s1w)) = ins.fields, operand_shape(ins)
    name = ins.mnemonic
    dst, s0, s1 = vgpr(f["vdst"], d), _src0(ins, s0w), _src1(ins, s1w)
    if name in ("v_fmamk_f32", "v_madmk_f16"):
        text = f"{dst}, {s0}, 0x{ins.literal or 0:x}, {s1}"
    elif name in ("v_fmaak_f32", "v_madak_f16"):
        text = f"{dst}, {s0}, {s1}, 0x{ins.literal or 0:x}"
    elif name == "v_cndmask_b32":
        text = f"{dst}, {s0}, {s1}, vcc"
    elif name in ("v_addc_co_u32", "v_subb_co_u32", "v_subbrev_co_u32"):
        text = f"{dst}, vcc, {s0}, {s1}, vcc"
    elif name in ("v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32"):
        text = f"{dst}, vcc, {s0}, {s1}"
    else:
        text = f"{dst}, {s0}, {s1}"
    return text + _ext_text(ins, 2)


def _vopc(ins: Instr) -> str:
    f, (_, (s0w, s1w)) = ins.fields, operand_shape(ins)
    dst = operand(f["sdst"], 2) if "sdwa" in f and f["sd"] else "vcc"
    return f"{dst}, {_src0(ins, s0w)}, {_src1(ins, s1w)}" + _ext_text(ins, 2)


def _vop3(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, operand_shape(ins)
    name, op = ins.mnemonic, ins.op
    parts = []
    if op < 0x100:  # VOPC in VOP3 encoding: the lane mask goes to the SGPR pair in vdst (v_cmpx too, on GFX9)
        parts.append(operand(f["vdst"], 2))
    elif name == "v_readlane_b32":
        parts.append(operand(f["vdst"]))
    elif d:
        parts.append(vgpr(f["vdst"], d))
    if ins.family == "VOP3B":
        parts.append(operand(f["sdst"], 2))
    neg, abs_ = f["neg"], f.get("abs", 0)
    for i, w in enumerate(srcs):
        parts.append(source_mods(operand(f[f"src{i}"], w), neg >> i & 1, abs_ >> i & 1))
    text = ", ".join(parts)
    opsel = f.get("opsel", 0)
    if opsel and name in ops.VOP3_OPSEL:
        n = 3 if name in ops.OPSEL_ALL_BITS else len(srcs)
        text += " op_sel:[" + ",".join(str(opsel >> i & 1) for i in range(n)) + f",{opsel >> 3 & 1}]"
    if f["clamp"]:
        text += " clamp"
    return text + OMOD_TEXT.get(f["omod"], "")


def _vop3p(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, operand_shape(ins)
    name = ins.mnemonic
    mix = name in MIX_OPS
    parts = [vgpr(f["vdst"], d, name in ops.ACC_DST)]
    for i, w in enumerate(srcs):
        text = _reg(f[f"src{i}"], w, i == 0 and name in ops.ACC_SRC0)
        # mix: neg_lo is the operand's neg, neg_hi its abs
        parts.append(source_mods(text, f["neg"] >> i & 1, f["neg_hi"] >> i & 1) if mix else text)
    return ", ".join(parts) + packed_modifiers(f, len(srcs), mix, neg=not mix)


def _mai(ins: Instr) -> str:
    f, (d, (a, b, c)) = ins.fields, operand_shape(ins)
    name = ins.mnemonic
    acc_cd, acc = f["acc_cd"], f["acc"]
    parts = [vgpr(f["vdst"], d, acc_cd), _reg(f["src0"], a, acc & 1), _reg(f["src1"], b, acc >> 1 & 1)]
    if name.startswith("v_smfmac"):
        parts.append(operand(f["src2"], c))  # the sparsity index VGPR
    else:
        parts.append(_reg(f["src2"], c, acc_cd) if f["src2"] >= f9.VGPR_BASE else operand(f["src2"], min(c, 2)))
    text = ", ".join(parts)
    if f["cbsz"]:
        text += f" cbsz:{f['cbsz']}"
    if f["abid"]:
        text += f" abid:{f['abid']}"
    if f["blgp"]:
        if name.startswith("v_mfma_f64"):
            text += " neg:[" + ",".join(str(f["blgp"] >> i & 1) for i in range(3)) + "]"
        else:
            text += f" blgp:{f['blgp']}"
    return text


_DS_2ADDR = ("ds_write2", "ds_read2", "ds_wrxchg2")


def _ds(ins: Instr) -> str:
    return ds_operands(ins, ins.mnemonic.startswith(_DS_2ADDR), bool(ins.fields["acc"])).strip()


_CACHE_BITS = ("sc0", "nt", "sc1")


def _flat(ins: Instr) -> str:
    text = flat_operands(ins, operand, returns="sc0", saddr_off=f9.SADDR_OFF, offset_bits=13,
                         acc=bool(ins.fields["acc"]))
    return text + flag_text(ins.fields, _CACHE_BITS)


def _mubuf(ins: Instr) -> str:
    f = ins.fields
    w = int(ins.shape or "0")
    if not w:
        return flag_text(f, _CACHE_BITS).strip()
    vaddr, modifiers = mubuf_address(f)
    parts = [] if f["lds"] else [vgpr(f["vdata"], w, bool(f["acc"]))]
    text = ", ".join(parts + [vaddr, operand(f["srsrc"] * 4, 4), operand(f["soffset"])])
    return text + modifiers + flag_text(f, _CACHE_BITS + ("lds",))


PRINTERS = {"SOP1": _sop1, "SOP2": _sop2, "SOPC": _sopc, "SOPK": _sopk, "SOPP": _sopp, "SMEM": _smem,
            "VOP1": _vop1, "VOP2": _vop2, "VOPC": _vopc, "VOP3": _vop3, "VOP3B": _vop3, "VOP3P": _vop3p,
            "VOP3P_MAI": _mai, "DS": _ds, "FLAT": _flat, "GLOBAL": _flat, "SCRATCH": _flat, "MUBUF": _mubuf}


def printed_mnemonic(ins: Instr) -> str | None:
    """The mnemonic as LLVM prints it for this encoding (with _e32 / _e64 / _sdwa / _dpp)."""
    if ins.mnemonic is None or ins.mnemonic in ops.NO_SUFFIX:
        return ins.mnemonic
    if "sdwa" in ins.fields:
        return ins.mnemonic + "_sdwa"
    if "dpp" in ins.fields:
        return ins.mnemonic + "_dpp"
    return ins.mnemonic + ops.encoding_suffix(ins.family, ins.op)


def format_instr_gfx9(ins: Instr) -> str:
    """One gfx942 instruction in LLVM syntax; an unknown opcode prints as its raw dwords with a comment."""
    return format_instr(ins, ARCH)
