"""gfx942 (CDNA3, GFX9 encodings): instruction decoder and LLVM-style printer.

`decode_gfx942(code, offset)` decodes the one instruction at a byte offset into an `InstrGfx9` (an `Instr` whose
`shape` and printing use the gfx942 tables); `decoder.decode(..., arch="gfx942")` and `decode_program` reach it
through `decoder.ARCHES`, `disasm.format_instr` / `disasm.disassemble` print through `format_instr_gfx9`.

Conventions (those of the gfx11 decoder, plus what GFX9 adds; formats_gfx9 documents the operand space):
* `fields` holds the raw field values of the family's table (`formats_gfx9.FORMATS[family]`), unsigned as stored:
  sign-extend SOPP/SOPK simm16, SMEM offset (21 bits, imm = 1) and GLOBAL/SCRATCH offset (13 bits) with `sext`.
* `literal` is the trailing 32-bit literal (also the K of v_fmamk/v_fmaak/v_madmk/v_madak). VOP3 has none on GFX9.
* SDWA (src0 = 249): `fields["sdwa"]` is the raw extension dword and its fields (`formats_gfx9.SDWA`, for VOPC
  `SDWA_VOPC`) are merged into `fields`: ext_src0, dst_sel, dst_unused, clamp, omod, src0_sel/sext/neg/abs, s0,
  src1_sel/sext/neg/abs, s1 (VOPC: sdst, sd instead of dst_sel .. omod).
* DPP (src0 = 250): `fields["dpp"]` is the raw dword, plus ext_src0, dpp_ctrl, bound_ctrl, src0/src1_neg/abs,
  bank_mask, row_mask. `formats_gfx9.src0_code` / `src1_code` give the real source operand codes.
* VOP3B (carry-out, div_scale, mad64): `fields["sdst"]` is the 64-bit lane-mask SGPR pair written.
* VOP3P_MAI (MFMA / SMFMAC): cbsz, abid, acc_cd (vdst and C are AccVGPRs), acc (bit 0: A, bit 1: B), blgp.
* FLAT / GLOBAL / SCRATCH and MUBUF carry gfx940's cache bits sc0 (glc: an atomic returns the old value only
  when set), nt and sc1 (hints); `acc` makes vdst / data AccVGPRs; saddr 0x7F is "off"; SCRATCH `sve` says the
  VGPR address is used. The FLAT segment's offset is unsigned, GLOBAL/SCRATCH's a signed 13-bit value.
  MUBUF `lds` loads into LDS (no vdata).
* An opcode missing from the tables decodes with `mnemonic` None (family, size and fields are still right);
  a word no family matches raises DecodeError naming the word and offset.
"""
from __future__ import annotations

from ..errors import DecodeError
from . import formats_gfx9 as f9
from . import opcodes_gfx942 as ops
from .decoder import Instr, _dword, sext
from .disasm import literal_text, swizzle_text

ARCH = "gfx942"


class InstrGfx9(Instr):
    """A decoded gfx942 instruction: the `Instr` record, with the gfx942 opcode tables behind `shape`."""

    arch = ARCH

    @property
    def shape(self) -> str | None:
        entry = ops.lookup(self.family, self.op)
        return None if entry is None else entry[1]

    def __str__(self) -> str:
        return format_instr_gfx9(self)


def decode_gfx942(code, offset: int) -> InstrGfx9:
    w0 = _dword(code, offset, "the first dword", offset)
    family = f9.family_of(w0)
    if family is None:
        raise DecodeError(f"gfx942: no instruction format matches word 0x{w0:08x} at offset 0x{offset:x}")
    fmt = f9.FORMATS[family]
    words = [w0]
    for i in range(1, fmt.size):
        words.append(_dword(code, offset + 4 * i, f"{family} dword {i}", offset))
    extra = f9.extra_dword(family, words)
    if extra:
        words.append(_dword(code, offset + 4 * len(words), f"the {family} {extra} dword", offset))
    fields = fmt.decode(words, check=False)
    literal = None
    if extra == "literal":
        literal = words[-1]
    elif extra == "sdwa":
        fields.update((f9.SDWA_VOPC if family == "VOPC" else f9.SDWA).decode(words[-1:], check=False))
        fields["sdwa"] = words[-1]
    elif extra == "dpp":
        fields.update(f9.DPP.decode(words[-1:], check=False))
        fields["dpp"] = words[-1]
    op = fields.get("op", 0)
    entry = ops.lookup(family, op)
    return InstrGfx9(offset, 4 * len(words), tuple(words), family, op, entry[0] if entry else None, fields, literal)


# =========================================================================================================
# printing (the syntax LLVM 22's AMDGPU printer uses for gfx942)

_FLOAT_TEXT = {240: "0.5", 241: "-0.5", 242: "1.0", 243: "-1.0", 244: "2.0", 245: "-2.0", 246: "4.0", 247: "-4.0"}


def _range(prefix: str, n: int, width: int) -> str:
    return f"{prefix}{n}" if width == 1 else f"{prefix}[{n}:{n + width - 1}]"


def operand(code: int, width: int = 1, literal: int | None = None) -> str:
    """Text of a 9-bit source operand code (SALU 8-bit and scalar 7-bit codes are the same numbers)."""
    if code <= f9.SGPR_MAX:
        return _range("s", code, width)
    if code >= f9.VGPR_BASE:
        return _range("v", code - f9.VGPR_BASE, width)
    if f9.TTMP_BASE <= code < f9.M0:
        return _range("ttmp", code - f9.TTMP_BASE, width)
    if width == 2 and code in f9.REGISTER_PAIRS:
        return f9.REGISTER_PAIRS[code]
    if code in f9.SPECIAL_OPERANDS:
        return f9.SPECIAL_OPERANDS[code]
    i = f9.inline_int(code)
    if i is not None:
        return str(i)
    if code in _FLOAT_TEXT:
        return _FLOAT_TEXT[code]
    if code == 248:
        return "0.15915494309189532" if width == 2 else "0.15915494"
    if code == f9.LITERAL and literal is not None:
        return literal_text(literal)
    return f"<invalid operand {code}>"


def vgpr(n: int, width: int = 1, acc: bool = False) -> str:
    return _range("a" if acc else "v", n, width)


def _reg(code: int, width: int, acc: bool) -> str:
    """A VALU source that may be an AccVGPR (VGPR codes 256+n mean a[n] when `acc`)."""
    return vgpr(code - f9.VGPR_BASE, width, True) if acc and code >= f9.VGPR_BASE else operand(code, width)


def _mods(text: str, neg, abs_, sext_=0) -> str:
    if sext_:
        text = f"sext({text})"
    if abs_:
        text = f"|{text}|"
    return f"-{text}" if neg else text


def _shape(ins: Instr):
    return ops.parse_shape(ins.shape or ":")


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
    vm, exp, lgkm = (imm & 0xF) | (imm >> 14 & 3) << 4, imm >> 4 & 7, imm >> 8 & 0xF
    parts = [(f"vmcnt({vm})", vm != 0x3F), (f"expcnt({exp})", exp != 7), (f"lgkmcnt({lgkm})", lgkm != 0xF)]
    shown = [t for t, keep in parts if keep]
    return " ".join(shown or [t for t, _ in parts])


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
    reg, off, size = imm & 0x3F, imm >> 6 & 0x1F, (imm >> 11 & 0x1F) + 1
    name = HWREG_NAMES.get(reg, str(reg))
    return f"hwreg({name})" if off == 0 and size == 32 else f"hwreg({name}, {off}, {size})"


def gpr_idx_text(imm: int) -> str:
    if imm > 15:
        return str(imm)
    return "gpr_idx(" + ",".join(m for i, m in enumerate(GPR_IDX_MODES) if imm >> i & 1) + ")"


# --- per-family printers -----------------------------------------------------------------------------------

def _sop1(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, _shape(ins)
    parts = [operand(f["sdst"], d)] if d else []
    if srcs:
        parts.append(operand(f["ssrc0"], srcs[0], ins.literal))
    return ", ".join(parts)


def _sop2(ins: Instr) -> str:
    f, (d, (s0, s1)) = ins.fields, _shape(ins)
    parts = [operand(f["sdst"], d)] if d else []
    return ", ".join(parts + [operand(f["ssrc0"], s0, ins.literal), operand(f["ssrc1"], s1, ins.literal)])


def _sopc(ins: Instr) -> str:
    f, (_, (s0, s1)) = ins.fields, _shape(ins)
    second = gpr_idx_text(f["ssrc1"]) if s1 == "g" else operand(f["ssrc1"], s1, ins.literal)
    return f"{operand(f['ssrc0'], s0, ins.literal)}, {second}"


def _sopk(ins: Instr) -> str:
    f, kind = ins.fields, ins.shape
    imm, sdst = f["simm16"], f["sdst"]
    if kind == "getreg":
        return f"{operand(sdst)}, {hwreg_text(imm)}"
    if kind == "setreg":
        return f"{hwreg_text(imm)}, {operand(sdst)}"
    if kind == "setreg_imm":
        return f"{hwreg_text(imm)}, {literal_text(ins.literal or 0)}"
    if kind in ("call", "fork"):
        return f"{operand(sdst, 2)}, {sext(imm, 16)}"
    return f"{operand(sdst)}, 0x{imm:x}"  # k


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


def _signed_hex(v: int) -> str:
    return f"-0x{-v:x}" if v < 0 else f"0x{v:x}"


def _smem(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, _shape(ins)
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
            parts.append(f"{where} offset:{_signed_hex(sext(f['offset'], 21))}" if f["imm"] else where)
        elif f["imm"]:
            parts.append(_signed_hex(sext(f["offset"], 21)))
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


_OMOD = {1: " mul:2", 2: " mul:4", 3: " div:2"}

def _sdwa_text(ins: Instr, n_srcs: int) -> str:
    f = ins.fields
    text = ""
    if ins.family != "VOPC":
        text += (" clamp" if f["clamp"] else "") + _OMOD.get(f["omod"], "")
        if ins.mnemonic not in ops.SDWA_NO_DST_SEL:
            unused = f9.SDWA_UNUSED[f["dst_unused"]] if f["dst_unused"] < 3 else str(f["dst_unused"])
            text += f" dst_sel:{_sel(f['dst_sel'])} dst_unused:{unused}"
    text += f" src0_sel:{_sel(f['src0_sel'])}"
    if n_srcs > 1:
        text += f" src1_sel:{_sel(f['src1_sel'])}"
    return text


def _src0(ins: Instr, width: int, acc: bool = False) -> str:
    """src0 of VOP1/VOP2/VOPC with its SDWA / DPP extension and modifiers resolved."""
    f = ins.fields
    code = f9.src0_code(f)
    text = _reg(code, width, acc) if code != f9.LITERAL else operand(code, width, ins.literal)
    if "sdwa" in f:
        return _mods(text, f["src0_neg"], f["src0_abs"], f["src0_sext"])
    if "dpp" in f:
        return _mods(text, f["src0_neg"], f["src0_abs"])
    return text


def _src1(ins: Instr, width: int) -> str:
    f = ins.fields
    text = operand(f9.src1_code(f), width)
    if "sdwa" in f:
        return _mods(text, f["src1_neg"], f["src1_abs"], f["src1_sext"])
    if "dpp" in f:
        return _mods(text, f["src1_neg"], f["src1_abs"])
    return text


def _ext_text(ins: Instr, n_srcs: int) -> str:
    if "sdwa" in ins.fields:
        return _sdwa_text(ins, n_srcs)
    if "dpp" in ins.fields:
        return dpp_text(ins.fields)
    return ""


def _vop1(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, _shape(ins)
    name = ins.mnemonic
    if not d:  # v_nop: LLVM shows the DPP controls, not the SDWA selects
        return dpp_text(f).strip() if "dpp" in f else ""
    if name == "v_readfirstlane_b32":
        dst = operand(f["vdst"])
    else:
        dst = vgpr(f["vdst"], d, name in ops.ACC_DST)
    return f"{dst}, {_src0(ins, srcs[0], name in ops.ACC_SRC0)}" + _ext_text(ins, 1)


def _vop2(ins: Instr) -> str:
    f, (d, (s0w, s1w)) = ins.fields, _shape(ins)
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
    f, (_, (s0w, s1w)) = ins.fields, _shape(ins)
    dst = operand(f["sdst"], 2) if "sdwa" in f and f["sd"] else "vcc"
    return f"{dst}, {_src0(ins, s0w)}, {_src1(ins, s1w)}" + _ext_text(ins, 2)


def _vop3(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, _shape(ins)
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
        parts.append(_mods(operand(f[f"src{i}"], w), neg >> i & 1, abs_ >> i & 1))
    text = ", ".join(parts)
    opsel = f.get("opsel", 0)
    if opsel and name in ops.VOP3_OPSEL:
        n = 3 if name in ops.OPSEL_ALL_BITS else len(srcs)
        text += " op_sel:[" + ",".join(str(opsel >> i & 1) for i in range(n)) + f",{opsel >> 3 & 1}]"
    if f["clamp"]:
        text += " clamp"
    return text + _OMOD.get(f["omod"], "")


_MIX_OPS = ("v_fma_mix_f32", "v_fma_mixlo_f16", "v_fma_mixhi_f16")


def _vop3p(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, _shape(ins)
    name = ins.mnemonic
    n = len(srcs)
    mix = name in _MIX_OPS

    def bits(v):
        return [v >> i & 1 for i in range(n)]

    neg_lo, neg_hi = bits(f["neg"]), bits(f["neg_hi"])
    parts = [vgpr(f["vdst"], d, name in ops.ACC_DST)]
    for i, w in enumerate(srcs):
        text = _reg(f[f"src{i}"], w, i == 0 and name in ops.ACC_SRC0)
        parts.append(_mods(text, neg_lo[i], neg_hi[i]) if mix else text)  # mix: neg_lo = neg, neg_hi = abs
    text = ", ".join(parts)
    opsel, opsel_hi = bits(f["opsel"]), bits(f["opsel_hi"] | f["opsel_hi2"] << 2)
    if any(opsel):
        text += " op_sel:[" + ",".join(map(str, opsel)) + "]"
    if (any(opsel_hi) if mix else not all(opsel_hi)):
        text += " op_sel_hi:[" + ",".join(map(str, opsel_hi)) + "]"
    if not mix:
        if any(neg_lo):
            text += " neg_lo:[" + ",".join(map(str, neg_lo)) + "]"
        if any(neg_hi):
            text += " neg_hi:[" + ",".join(map(str, neg_hi)) + "]"
    if f["clamp"]:
        text += " clamp"
    return text


def _mai(ins: Instr) -> str:
    f, (d, (a, b, c)) = ins.fields, _shape(ins)
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
    f = ins.fields
    d, (a, d0, d1) = _shape(ins)
    acc = bool(f["acc"])
    parts = []
    if d:
        parts.append(vgpr(f["vdst"], d, acc))
    if a:
        parts.append(vgpr(f["addr"], a))
    if d0:
        parts.append(vgpr(f["data0"], d0, acc))
    if d1:
        parts.append(vgpr(f["data1"], d1, acc))
    text = ", ".join(parts)
    if ins.mnemonic.startswith(_DS_2ADDR):
        for name in ("offset0", "offset1"):
            if f[name]:
                text += f" {name}:{f[name]}"
    else:
        offset = f["offset1"] << 8 | f["offset0"]
        if offset:
            text += " offset:" + (swizzle_text(offset) if ins.mnemonic == "ds_swizzle_b32" else str(offset))
    if f["gds"]:
        text += " gds"
    return text.strip()


def _cache_bits(f: dict) -> str:
    return (" sc0" if f["sc0"] else "") + (" nt" if f["nt"] else "") + (" sc1" if f["sc1"] else "")


def _flat(ins: Instr) -> str:
    f, name, fam = ins.fields, ins.mnemonic, ins.family
    r, (w,) = _shape(ins)
    atomic = "_atomic_" in name
    acc = bool(f["acc"])
    parts = []
    if r and (not atomic or f["sc0"]):
        parts.append(vgpr(f["vdst"], r, acc))
    saddr_off = f["saddr"] == f9.SADDR_OFF
    if fam == "GLOBAL":
        parts.append(vgpr(f["addr"], 2 if saddr_off else 1))
    elif fam == "SCRATCH":
        parts.append(vgpr(f["addr"]) if f["sve"] else "off")
    else:
        parts.append(vgpr(f["addr"], 2))
    if w and (atomic or not r):
        parts.append(vgpr(f["data"], w, acc))
    if fam == "GLOBAL":
        parts.append("off" if saddr_off else operand(f["saddr"], 2))
    elif fam == "SCRATCH":
        parts.append("off" if saddr_off else operand(f["saddr"]))
    text = ", ".join(parts)
    offset = f["offset"] if fam == "FLAT" else sext(f["offset"], 13)
    if offset:
        text += f" offset:{offset}"
    return text + _cache_bits(f)


def _mubuf(ins: Instr) -> str:
    f = ins.fields
    w = int(ins.shape or "0")
    if not w:
        return _cache_bits(f).strip()
    n_addr = f["offen"] + f["idxen"]
    parts = [] if f["lds"] else [vgpr(f["vdata"], w, bool(f["acc"]))]
    parts += [vgpr(f["vaddr"], n_addr) if n_addr else "off", operand(f["srsrc"] * 4, 4), operand(f["soffset"])]
    text = ", ".join(parts)
    if f["idxen"]:
        text += " idxen"
    if f["offen"]:
        text += " offen"
    if f["offset"]:
        text += f" offset:{f['offset']}"
    return text + _cache_bits(f) + (" lds" if f["lds"] else "")


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
    printer = PRINTERS.get(ins.family)
    if ins.mnemonic is None or printer is None:
        raw = ", ".join(f"0x{w:08x}" for w in ins.words)
        return f".long {raw}  ; unknown {ins.family} opcode 0x{ins.op:x}"
    text = printer(ins)
    name = printed_mnemonic(ins)
    return f"{name} {text}" if text else name
