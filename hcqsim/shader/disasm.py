"""Disassembler: `Instr` -> LLVM-style assembly text (the syntax LLVM 22's AMDGPU printer uses).

Length: one printer per instruction format family and LLVM's operand spelling rules (registers, inline
constants, modifiers, DPP/VOPD/true16 forms) in one place, which the gfx942 printer (`disasm_gfx9`) reuses;
splitting it would separate the spelling rules from the only code that applies them.

`format_instr(instr)` prints one instruction with its architecture's printer (gfx1100: this module's; gfx942:
`disasm_gfx9`'s), `disassemble(code, arch)` a whole blob, one instruction per line. Branch targets print as
LLVM's raw signed dword offset (`s_cbranch_execz 5` jumps to pc + 4 + 5 * 4); `annotate=True` adds the byte
offset, the target and the raw dwords as a comment, `offsets=True` prints llvm-objdump style (offset first);
`listing(code, arch)` is the same as data (`ListingLine`s, for JSON).

The first part is what both printers share: operand text over an architecture's operand space (its formats
module), register ranges, source modifiers, immediates (literals, hwreg, s_waitcnt counters, ds_swizzle), the
SOPK / DS / FLAT / MUBUF operand lists and the VOP3P modifiers; each takes what differs between the two
architectures as arguments. Then the gfx11 printer (wave32 is assumed for lane masks: VCC / the v_cmp SGPR
destination print as 32-bit registers), and last `format_instr` / `disassemble`, for any architecture.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from . import formats as fm
from . import opcodes_gfx11 as ops
from .decoder import Instr, decode, get_arch, sext

# =========================================================================================================
# shared by the gfx11 and gfx942 printers

_FLOAT_TEXT = {240: "0.5", 241: "-0.5", 242: "1.0", 243: "-1.0", 244: "2.0", 245: "-2.0", 246: "4.0", 247: "-4.0"}


def _range(prefix: str, n: int, width: int) -> str:
    return f"{prefix}{n}" if width == 1 else f"{prefix}[{n}:{n + width - 1}]"


def literal_text(value: int) -> str:
    """LLVM prints a 32-bit immediate in decimal when it is in the inline range -16..64, else in hex."""
    v = sext(value & 0xFFFFFFFF, 32)
    return str(v) if -16 <= v <= 64 else f"0x{value & 0xFFFFFFFF:x}"


def operand_text(space: ModuleType, code: int, width: int = 1, literal: int | None = None) -> str:
    """Text of a 9-bit source operand code (SALU 8-bit and scalar 7-bit codes are the same numbers) in an
    architecture's operand space `space` (`formats` or `formats_gfx9`: SGPR_MAX, TTMP_BASE, REGISTER_PAIRS,
    SPECIAL_OPERANDS, LITERAL, VGPR_BASE). A literal code without a literal value is invalid."""
    if code <= space.SGPR_MAX:
        return _range("s", code, width)
    if code >= space.VGPR_BASE:
        return _range("v", code - space.VGPR_BASE, width)
    if space.TTMP_BASE <= code < space.TTMP_BASE + 16:
        return _range("ttmp", code - space.TTMP_BASE, width)
    if width == 2 and code in space.REGISTER_PAIRS:
        return space.REGISTER_PAIRS[code]
    if code in space.SPECIAL_OPERANDS:
        return space.SPECIAL_OPERANDS[code]
    i = fm.inline_int(code)  # the inline constants are the same on both
    if i is not None:
        return str(i)
    if code in _FLOAT_TEXT:
        return _FLOAT_TEXT[code]
    if code == 248:
        return "0.15915494309189532" if width == 2 else "0.15915494"
    if code == space.LITERAL and literal is not None:
        return literal_text(literal)
    return f"<invalid operand {code}>"


def vgpr(n: int, width: int = 1, acc: bool = False) -> str:
    """VGPR n (a range for width > 1); `acc`: the AccVGPR a[n] (gfx942)."""
    return _range("a" if acc else "v", n, width)


def source_mods(text: str, neg, abs_, sext_=0) -> str:
    """An operand with its source modifiers: -neg, |abs|, sext() (gfx942 SDWA)."""
    if sext_:
        text = f"sext({text})"
    if abs_:
        text = f"|{text}|"
    return f"-{text}" if neg else text


def operand_shape(ins: Instr):
    """(dst, (srcs...)) widths of the instruction's opcode-table shape (the shape syntax is the same on both)."""
    return ops.parse_shape(ins.shape or ":")


def signed_hex(v: int) -> str:
    return f"-0x{-v:x}" if v < 0 else f"0x{v:x}"


OMOD_TEXT = {1: " mul:2", 2: " mul:4", 3: " div:2"}
MIX_OPS = ("v_fma_mix_f32", "v_fma_mixlo_f16", "v_fma_mixhi_f16")


def hwreg_operand(imm: int, names: dict) -> str:
    """s_getreg / s_setreg's hwreg(): register [5:0], offset [10:6], size - 1 [15:11]; `names` is the
    architecture's register table."""
    reg, off, size = imm & 0x3F, (imm >> 6) & 0x1F, ((imm >> 11) & 0x1F) + 1
    name = names.get(reg, str(reg))
    return f"hwreg({name})" if off == 0 and size == 32 else f"hwreg({name}, {off}, {size})"


def waitcnt_counters(vm: int, exp: int, lgkm: int, lgkm_max: int) -> str:
    """s_waitcnt's counters as LLVM prints them: those below their maximum (vmcnt 63, expcnt 7, lgkmcnt
    `lgkm_max`), all three when none is."""
    parts = [(f"vmcnt({vm})", vm != 0x3F), (f"expcnt({exp})", exp != 7), (f"lgkmcnt({lgkm})", lgkm != lgkm_max)]
    shown = [t for t, keep in parts if keep]
    return " ".join(shown or [t for t, _ in parts])


def sopk_operands(ins: Instr, operand, hwreg_text) -> str:
    """SOPK operands by the table's kind: getreg / setreg (an SGPR and hwreg()), setreg_imm (hwreg() and the
    literal), call / fork (an SGPR pair and the branch offset), loop (an SGPR and the offset), x (the immediate
    alone), else k (an SGPR and the immediate). `operand` and `hwreg_text` are the architecture's."""
    f, kind = ins.fields, ins.shape
    imm, sdst = f["simm16"], f["sdst"]
    if kind == "x":
        return f"0x{imm:x}"
    if kind == "getreg":
        return f"{operand(sdst)}, {hwreg_text(imm)}"
    if kind == "setreg":
        return f"{hwreg_text(imm)}, {operand(sdst)}"
    if kind == "setreg_imm":
        return f"{hwreg_text(imm)}, {literal_text(ins.literal or 0)}"
    if kind in ("call", "fork"):
        return f"{operand(sdst, 2)}, {sext(imm, 16)}"
    if kind == "loop":
        return f"{operand(sdst)}, {sext(imm, 16)}"
    return f"{operand(sdst)}, 0x{imm:x}"  # k, waitcnt


def packed_modifiers(f: dict, n: int, mix: bool, neg: bool = True) -> str:
    """VOP3P modifiers after the operands: op_sel, op_sel_hi (shown unless all set; for v_fma_mix*, when any is
    set), neg_lo / neg_hi (unless `neg` is False: the caller printed them on the operands), clamp."""

    def bits(v):
        return [v >> i & 1 for i in range(n)]

    text = ""
    opsel, opsel_hi = bits(f["opsel"]), bits(f["opsel_hi"] | f["opsel_hi2"] << 2)
    if any(opsel):
        text += " op_sel:[" + ",".join(map(str, opsel)) + "]"
    if (any(opsel_hi) if mix else not all(opsel_hi)):
        text += " op_sel_hi:[" + ",".join(map(str, opsel_hi)) + "]"
    if neg:
        if any(bits(f["neg"])):
            text += " neg_lo:[" + ",".join(map(str, bits(f["neg"]))) + "]"
        if any(bits(f["neg_hi"])):
            text += " neg_hi:[" + ",".join(map(str, bits(f["neg_hi"]))) + "]"
    if f["clamp"]:
        text += " clamp"
    return text


def swizzle_text(imm: int) -> str:
    """ds_swizzle_b32 offset as LLVM prints it (the text after "offset:")."""
    if imm & 0xFF00 == 0x8000:
        return "swizzle(QUAD_PERM," + ",".join(str(imm >> (2 * i) & 3) for i in range(4)) + ")"
    if imm & 0xE000 == 0xE000:
        return f"swizzle(FFT,{imm & 0x1F})"
    if imm & 0xE000 == 0xC000:
        return f"swizzle(ROTATE,{imm >> 10 & 1},{imm >> 5 & 0x1F})"
    if imm & 0x8000:
        return str(imm)
    and_m, or_m, xor_m = imm & 0x1F, imm >> 5 & 0x1F, imm >> 10 & 0x1F
    if and_m == 0x1F and or_m == 0 and bin(xor_m).count("1") == 1:
        return f"swizzle(SWAP,{xor_m})"
    if and_m == 0x1F and or_m == 0 and xor_m and (xor_m + 1) & xor_m == 0:
        return f"swizzle(REVERSE,{xor_m + 1})"
    if xor_m == 0:
        for k in range(1, 6):  # group size 2**k: and keeps the group bits, or picks the lane
            size = 1 << k
            if and_m == 0x1F & ~(size - 1) and or_m < size:
                return f"swizzle(BROADCAST,{size},{or_m})"
    chars = []
    for bit in range(4, -1, -1):
        a, o, x = and_m >> bit & 1, or_m >> bit & 1, xor_m >> bit & 1
        chars.append(("i" if x else "p") if a and not o else str(o ^ x))
    return f'swizzle(BITMASK_PERM,"{"".join(chars)}")'


def ds_operands(ins: Instr, two_addr: bool, acc: bool = False) -> str:
    """DS operands and modifiers: vdst, addr, data0, data1 (as the shape has them), offset0/offset1 for the
    two-address forms, else offset (ds_swizzle_b32's as swizzle()), gds. `acc`: vdst and data are AccVGPRs."""
    f = ins.fields
    d, (a, d0, d1) = operand_shape(ins)
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
    if two_addr:
        for name in ("offset0", "offset1"):
            if f[name]:
                text += f" {name}:{f[name]}"
    else:
        offset = f["offset1"] << 8 | f["offset0"]
        if offset:
            text += " offset:" + (swizzle_text(offset) if ins.mnemonic == "ds_swizzle_b32" else str(offset))
    if f["gds"]:
        text += " gds"
    return text


def flat_operands(ins: Instr, operand, *, returns: str, saddr_off: int, offset_bits: int, acc: bool = False) -> str:
    """FLAT / GLOBAL / SCRATCH operands and offset: vdst (loads; atomics when the `returns` bit is set), the
    address (GLOBAL: a VGPR pair without saddr, one VGPR with it, none for *_addtid; SCRATCH: one VGPR when sve
    is set, else off; FLAT: a pair), data (stores, atomics), saddr (GLOBAL, SCRATCH; off when it is `saddr_off`),
    offset (FLAT: the low `offset_bits` unsigned, else signed 13-bit). `operand` prints saddr; `acc`: vdst and
    data are AccVGPRs. The cache bits are the caller's."""
    f, name, fam = ins.fields, ins.mnemonic, ins.family
    r, (w,) = operand_shape(ins)
    atomic = "_atomic_" in name
    parts = []
    if r and (not atomic or f[returns]):
        parts.append(vgpr(f["vdst"], r, acc))
    no_saddr = f["saddr"] == saddr_off
    if fam == "GLOBAL":
        if "addtid" not in name:
            parts.append(vgpr(f["addr"], 2 if no_saddr else 1))
    elif fam == "SCRATCH":
        parts.append(vgpr(f["addr"]) if f["sve"] else "off")
    else:
        parts.append(vgpr(f["addr"], 2))
    if w and (atomic or not r):
        parts.append(vgpr(f["data"], w, acc))
    if fam == "GLOBAL":
        parts.append("off" if no_saddr else operand(f["saddr"], 2))
    elif fam == "SCRATCH":
        parts.append("off" if no_saddr else operand(f["saddr"]))
    text = ", ".join(parts)
    offset = f["offset"] & ((1 << offset_bits) - 1) if fam == "FLAT" else sext(f["offset"], 13)
    return text + f" offset:{offset}" if offset else text


def flag_text(f: dict, names) -> str:
    """The single-bit modifiers among `names` that are set, each after a space."""
    return "".join(f" {name}" for name in names if f[name])


def mubuf_address(f: dict) -> tuple[str, str]:
    """MUBUF's vaddr operand (idxen and offen each take a VGPR; off without either) and the modifiers that go with
    it (idxen, offen, offset)."""
    n_addr = f["offen"] + f["idxen"]
    vaddr = vgpr(f["vaddr"], n_addr) if n_addr else "off"
    return vaddr, flag_text(f, ("idxen", "offen")) + (f" offset:{f['offset']}" if f["offset"] else "")


# =========================================================================================================
# the gfx11 printer

def operand(code: int, width: int = 1, literal: int | None = None) -> str:
    """Text of a gfx11 9-bit source operand code (0..511; SALU 8-bit codes are the same below 256)."""
    if code == fm.LITERAL and literal is None:
        return "<missing literal>"
    return operand_text(fm, code, width, literal)


def sgpr_operand(code: int, width: int = 1) -> str:
    """A 7-bit scalar destination field (SGPR, VCC, TTMP, NULL, M0, EXEC)."""
    return operand(code, width)


def _t16(code: int) -> str:
    """A true16 register half in a VOP1/VOP2 8-bit field: bits [6:0] the VGPR, bit 7 the high half."""
    return f"v{code & 0x7F}.{'h' if code & 0x80 else 'l'}"


# --- SALU special immediates -------------------------------------------------------------------------

HWREG_NAMES = {1: "HW_REG_MODE", 2: "HW_REG_STATUS", 3: "HW_REG_TRAPSTS", 5: "HW_REG_GPR_ALLOC",
               6: "HW_REG_LDS_ALLOC", 7: "HW_REG_IB_STS", 15: "HW_REG_SH_MEM_BASES",
               18: "HW_REG_PERF_SNAPSHOT_PC_LO", 19: "HW_REG_PERF_SNAPSHOT_PC_HI", 20: "HW_REG_FLAT_SCR_LO",
               21: "HW_REG_FLAT_SCR_HI", 23: "HW_REG_HW_ID1", 24: "HW_REG_HW_ID2", 27: "HW_REG_PERF_SNAPSHOT_DATA",
               29: "HW_REG_SHADER_CYCLES"}
SENDMSG_NAMES = {1: "MSG_INTERRUPT", 2: "MSG_HS_TESSFACTOR", 3: "MSG_DEALLOC_VGPRS", 5: "MSG_STALL_WAVE_GEN",
                 6: "MSG_HALT_WAVES", 9: "MSG_GS_ALLOC_REQ", 0x80: "MSG_RTN_GET_DOORBELL", 0x81: "MSG_RTN_GET_DDID",
                 0x82: "MSG_RTN_GET_TMA", 0x83: "MSG_RTN_GET_REALTIME", 0x84: "MSG_RTN_SAVE_WAVE",
                 0x85: "MSG_RTN_GET_TBA", 0x86: "MSG_RTN_GET_TBA_TO_PC"}
DELAY_INSTID = ("NO_DEP", "VALU_DEP_1", "VALU_DEP_2", "VALU_DEP_3", "VALU_DEP_4", "TRANS32_DEP_1", "TRANS32_DEP_2",
                "TRANS32_DEP_3", "FMA_ACCUM_CYCLE_1", "SALU_CYCLE_1", "SALU_CYCLE_2", "SALU_CYCLE_3")
DELAY_SKIP = ("SAME", "NEXT", "SKIP_1", "SKIP_2", "SKIP_3", "SKIP_4")
# s_waitcnt_depctr fields: name, shift, width (default = all ones)
DEPCTR_FIELDS = (("depctr_hold_cnt", 7, 1), ("depctr_sa_sdst", 0, 1), ("depctr_va_vdst", 12, 4),
                 ("depctr_va_sdst", 9, 3), ("depctr_va_ssrc", 8, 1), ("depctr_va_vcc", 1, 1),
                 ("depctr_vm_vsrc", 2, 3))
DEPCTR_USED = sum(((1 << w) - 1) << s for _, s, w in DEPCTR_FIELDS)


def waitcnt_text(imm: int) -> str:
    """gfx11 s_waitcnt: expcnt [2:0], lgkmcnt [9:4], vmcnt [15:10]; counters at their maximum are omitted."""
    return waitcnt_counters((imm >> 10) & 0x3F, imm & 7, (imm >> 4) & 0x3F, 0x3F)


def delay_alu_text(imm: int) -> str:
    id0, skip, id1 = imm & 0xF, (imm >> 4) & 7, (imm >> 7) & 0xF
    if imm == 0:
        return "0"
    bad_id, bad_skip = "/* invalid instid value */", "/* invalid instskip value */"
    parts = []
    if id0:
        parts.append(f"instid0({DELAY_INSTID[id0] if id0 < len(DELAY_INSTID) else bad_id})")
    if skip:
        parts.append(f"instskip({DELAY_SKIP[skip] if skip < len(DELAY_SKIP) else bad_skip})")
    if id1:
        parts.append(f"instid1({DELAY_INSTID[id1] if id1 < len(DELAY_INSTID) else bad_id})")
    return " | ".join(parts)


def sendmsg_text(imm: int) -> str:
    msg = imm & 0xFF  # gfx11: the message id is the low byte, there are no operation / stream fields
    if msg in SENDMSG_NAMES:
        return f"sendmsg({SENDMSG_NAMES[msg]})"
    if msg == imm:
        return f"sendmsg({msg}, 0, 0)"
    return str(imm)


def depctr_text(imm: int) -> str:
    if imm & ~DEPCTR_USED & 0xFFFF:
        return f"0x{imm:x}"
    vals = [(name, (imm >> s) & ((1 << w) - 1), (1 << w) - 1) for name, s, w in DEPCTR_FIELDS]
    shown = [f"{n}({v})" for n, v, d in vals if v != d] or [f"{n}({v})" for n, v, _ in vals]
    return " ".join(shown)


def hwreg_text(imm: int) -> str:
    return hwreg_operand(imm, HWREG_NAMES)


# --- per-family printers -----------------------------------------------------------------------------------

def _sop1(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, operand_shape(ins)
    parts = [sgpr_operand(f["sdst"], d)] if d else []
    if srcs == ("m",):
        parts.append(sendmsg_text(f["ssrc0"]))
    elif srcs:
        parts.append(operand(f["ssrc0"], srcs[0], ins.literal))
    return ", ".join(parts)


def _sop2(ins: Instr) -> str:
    f, (d, (s0, s1)) = ins.fields, operand_shape(ins)
    srcs = f"{operand(f['ssrc0'], s0, ins.literal)}, {operand(f['ssrc1'], s1, ins.literal)}"
    return f"{sgpr_operand(f['sdst'], d)}, {srcs}"


def _sopc(ins: Instr) -> str:
    f, (_, (s0, s1)) = ins.fields, operand_shape(ins)
    return f"{operand(f['ssrc0'], s0, ins.literal)}, {operand(f['ssrc1'], s1, ins.literal)}"


def _sopk(ins: Instr) -> str:
    return sopk_operands(ins, sgpr_operand, hwreg_text)


def _sopp(ins: Instr) -> str:
    imm, kind = ins.fields["simm16"], ins.shape
    if kind == "opt":
        return str(imm) if imm else ""
    if kind == "d":
        return str(imm)
    if kind == "x":
        return f"0x{imm:x}"
    if kind == "br":
        return str(sext(imm, 16))
    if kind == "waitcnt":
        return waitcnt_text(imm)
    if kind == "delay":
        return delay_alu_text(imm)
    if kind == "sendmsg":
        return sendmsg_text(imm)
    if kind == "depctr":
        return depctr_text(imm)
    return str(imm)


def _smem(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, operand_shape(ins)
    if not d:
        return ""
    text = f"{sgpr_operand(f['sdata'], d)}, {sgpr_operand(f['sbase'] * 2, srcs[0])}, "
    offset = sext(f["offset"], 21)
    if f["soffset"] == fm.NULL:
        text += signed_hex(offset)
    else:
        text += sgpr_operand(f["soffset"])
        if offset:
            text += f" offset:{signed_hex(offset)}"
    return text + flag_text(f, ("glc", "dlc"))


_DPP_CTRL = ((0x101, 0x10F, "row_shl"), (0x111, 0x11F, "row_shr"), (0x121, 0x12F, "row_ror"),
             (0x150, 0x15F, "row_share"), (0x160, 0x16F, "row_xmask"))


def _dpp_text(ins: Instr) -> str:
    dpp = ins.fields["dpp"]
    src0 = ins.fields.get("src0", 0)
    if src0 in (fm.DPP8, fm.DPP8FI):
        lanes = ",".join(str((dpp >> (8 + 3 * i)) & 7) for i in range(8))
        return f" dpp8:[{lanes}]" + (" fi:1" if src0 == fm.DPP8FI else "")
    ctrl = (dpp >> 8) & 0x1FF
    if ctrl <= 0xFF:
        text = "quad_perm:[" + ",".join(str((ctrl >> (2 * i)) & 3) for i in range(4)) + "]"
    elif ctrl == 0x140:
        text = "row_mirror"
    elif ctrl == 0x141:
        text = "row_half_mirror"
    else:
        text = next((f"{name}:{ctrl - lo + (1 if name in ('row_shl', 'row_shr', 'row_ror') else 0)}"
                     for lo, hi, name in _DPP_CTRL if lo <= ctrl <= hi), f"/* invalid dpp_ctrl 0x{ctrl:x} */")
    text += f" row_mask:0x{dpp >> 28:x} bank_mask:0x{(dpp >> 24) & 0xF:x}"
    if dpp >> 19 & 1:
        text += " bound_ctrl:1"
    if dpp >> 18 & 1:
        text += " fi:1"
    return " " + text


def _vgpr_e32(n: int, width) -> str:
    """An 8-bit VGPR field of VOP1/VOP2/VOPC; a 16-bit operand ("h") uses bit 7 as the half select."""
    return _t16(n) if width == "h" else vgpr(n, width)


def _src0_e32(ins: Instr, width, mods: bool = True) -> str:
    """src0 of VOP1/VOP2/VOPC, resolving DPP (the real src0 VGPR is in the DPP dword) and its modifiers."""
    src0 = ins.fields["src0"]
    if "dpp" in ins.fields:
        dpp = ins.fields["dpp"]
        text = _vgpr_e32(dpp & 0xFF, width)
        if src0 == fm.DPP16 and mods:
            text = source_mods(text, dpp >> 20 & 1, dpp >> 21 & 1)
        return text
    if src0 >= fm.VGPR_BASE:
        return _vgpr_e32(src0 - fm.VGPR_BASE, width)
    return operand(src0, ops.dwords(width), ins.literal)


def _vsrc1_e32(ins: Instr, width) -> str:
    text = _vgpr_e32(ins.fields["vsrc1"], width)
    if ins.fields.get("src0") == fm.DPP16 and "dpp" in ins.fields:
        dpp = ins.fields["dpp"]
        text = source_mods(text, dpp >> 22 & 1, dpp >> 23 & 1)
    return text


def _vop1(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, operand_shape(ins)
    if not d:
        return ""
    dst = sgpr_operand(f["vdst"], d) if ins.mnemonic == "v_readfirstlane_b32" else _vgpr_e32(f["vdst"], d)
    return f"{dst}, {_src0_e32(ins, srcs[0])}" + (_dpp_text(ins) if "dpp" in f else "")


def _vop2(ins: Instr) -> str:
    text = _vop2_operands(ins)
    return text + _dpp_text(ins) if "dpp" in ins.fields else text


def _vop2_operands(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, operand_shape(ins)
    if not d:
        return ""
    name = ins.mnemonic
    dst, s0, s1 = _vgpr_e32(f["vdst"], d), _src0_e32(ins, srcs[0]), _vsrc1_e32(ins, srcs[1])
    if name in ("v_fmamk_f32", "v_fmamk_f16"):
        return f"{dst}, {s0}, 0x{ins.literal or 0:x}, {s1}"
    if name in ("v_fmaak_f32", "v_fmaak_f16"):
        return f"{dst}, {s0}, {s1}, 0x{ins.literal or 0:x}"
    if name == "v_cndmask_b32":
        return f"{dst}, {s0}, {s1}, vcc_lo"
    if name.endswith("_co_ci_u32"):
        return f"{dst}, vcc_lo, {s0}, {s1}, vcc_lo"
    return f"{dst}, {s0}, {s1}"


def _vopc(ins: Instr) -> str:
    _, srcs = operand_shape(ins)
    text = f"{_src0_e32(ins, srcs[0])}, {_vsrc1_e32(ins, srcs[1])}"
    if "dpp" in ins.fields:
        text += _dpp_text(ins)
    return text if ins.mnemonic.startswith("v_cmpx") else f"vcc_lo, {text}"


def _vop3(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, operand_shape(ins)
    name, op = ins.mnemonic, ins.op
    parts = []
    opsel = f.get("opsel", 0)
    if op < 0x100:  # VOPC in VOP3 encoding: the lane mask goes to the SGPR in vdst (v_cmpx: to EXEC)
        if not name.startswith("v_cmpx"):
            parts.append(sgpr_operand(f["vdst"]))
    elif name == "v_readlane_b32":
        parts.append(sgpr_operand(f["vdst"]))
    elif d == "h":
        parts.append(f"v{f['vdst']}.{'h' if opsel >> 3 & 1 else 'l'}")
    elif d:
        parts.append(vgpr(f["vdst"], d))
    if ins.family == "VOP3SD":
        parts.append(sgpr_operand(f["sdst"]))
    neg, abs_ = f["neg"], f.get("abs", 0)
    dpp = "dpp" in f
    for i, w in enumerate(srcs):
        code = (f["dpp"] & 0xFF) + fm.VGPR_BASE if i == 0 and dpp else f[f"src{i}"]
        if w == "h" and code >= fm.VGPR_BASE:
            text = f"v{code - fm.VGPR_BASE}.{'h' if opsel >> i & 1 else 'l'}"
        else:
            text = operand(code, ops.dwords(w), ins.literal)
        parts.append(source_mods(text, neg >> i & 1, abs_ >> i & 1))
    text = ", ".join(parts)
    if opsel and name not in ops.OPSEL_IN_NAMES_ONLY:
        bits = [opsel >> i & 1 for i in range(len(srcs))] + [opsel >> 3 & 1]
        text += " op_sel:[" + ",".join(map(str, bits)) + "]"
    if f["clamp"]:
        text += " clamp"
    text += OMOD_TEXT.get(f["omod"], "")
    if dpp:
        text += _dpp_text(ins)
    return text


def _vop3p(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, operand_shape(ins)
    parts = [vgpr(f["vdst"], d)]
    dpp = "dpp" in f
    for i, w in enumerate(srcs):
        parts.append(vgpr(f["dpp"] & 0xFF, w) if i == 0 and dpp else operand(f[f"src{i}"], w, ins.literal))
    text = ", ".join(parts) + packed_modifiers(f, len(srcs), ins.mnemonic in MIX_OPS)
    if dpp:
        text += _dpp_text(ins)
    return text


def _vinterp(ins: Instr) -> str:
    f = ins.fields
    srcs = [source_mods(operand(f[f"src{i}"]), f["neg"] >> i & 1, False) for i in range(3)]
    text = f"{vgpr(f['vdst'])}, " + ", ".join(srcs)
    if f["opsel"]:
        text += " op_sel:[" + ",".join(str(f["opsel"] >> i & 1) for i in range(4)) + "]"
    if f["clamp"]:
        text += " clamp"
    return text + f" wait_exp:{f['waitexp']}"


def _vopd_half(name: str, shape: str, vdst: int, src0: int, vsrc1: int, literal) -> str:
    dst, s0 = vgpr(vdst), operand(src0, 1, literal)
    if shape == "1:1":
        return f"{name} {dst}, {s0}"
    k = f"0x{(literal or 0):x}"
    if shape.endswith(",k"):
        return f"{name} {dst}, {s0}, {vgpr(vsrc1)}, {k}"
    if ",k," in shape:
        return f"{name} {dst}, {s0}, {k}, {vgpr(vsrc1)}"
    return f"{name} {dst}, {s0}, {vgpr(vsrc1)}"


def _vopd(ins: Instr) -> str:
    f = ins.fields
    x, y = ops.VOPD[f["opx"]], ops.VOPD[f["opy"]]
    return (_vopd_half(x[0], x[1], f["vdstx"], f["srcx0"], f["vsrcx1"], ins.literal) + " :: "
            + _vopd_half(y[0], y[1], f["vdsty"], f["srcy0"], f["vsrcy1"], ins.literal))


def _ds(ins: Instr) -> str:
    return ds_operands(ins, "2addr" in ins.mnemonic)


def _flat(ins: Instr) -> str:
    text = flat_operands(ins, sgpr_operand, returns="glc", saddr_off=fm.NULL, offset_bits=12)
    return text + flag_text(ins.fields, ("glc", "slc", "dlc"))


def _mubuf(ins: Instr) -> str:
    f = ins.fields
    w = int(ins.shape or "0")
    if not w:
        return ""
    vaddr, modifiers = mubuf_address(f)
    text = (f"{vgpr(f['vdata'], w + f['tfe'])}, {vaddr}, {sgpr_operand(f['srsrc'] * 4, 4)}, "
            f"{operand(f['soffset'])}")
    return text + modifiers + flag_text(f, ("glc", "slc", "dlc", "tfe"))


PRINTERS = {"SOP1": _sop1, "SOP2": _sop2, "SOPC": _sopc, "SOPK": _sopk, "SOPP": _sopp, "SMEM": _smem,
            "VOP1": _vop1, "VOP2": _vop2, "VOPC": _vopc, "VOP3": _vop3, "VOP3SD": _vop3, "VOP3P": _vop3p,
            "VINTERP": _vinterp, "VOPD": _vopd, "DS": _ds, "FLAT": _flat, "GLOBAL": _flat, "SCRATCH": _flat,
            "MUBUF": _mubuf}


def printed_mnemonic(ins: Instr) -> str | None:
    """The mnemonic as LLVM prints it for this encoding (with _e32 / _e64 / _dpp / _e64_dpp)."""
    if ins.mnemonic is None or ins.family == "VOPD":
        return ins.mnemonic
    suffix = ops.encoding_suffix(ins.family, ins.op)
    if "dpp" in ins.fields:
        if ins.family == "VOPC":
            return ins.mnemonic  # LLVM prints VOPC DPP without a suffix
        suffix = "_e64_dpp" if ins.family in ("VOP3", "VOP3SD", "VOP3P") else "_dpp"
    return ins.mnemonic + suffix


# =========================================================================================================
# any architecture

def _printer(arch: str):
    """(per-family printers, printed_mnemonic) of an architecture."""
    if arch == "gfx1100":
        return PRINTERS, printed_mnemonic
    if arch == "gfx942":
        from . import disasm_gfx9 as gfx9  # the gfx942 printer builds on this module
        return gfx9.PRINTERS, gfx9.printed_mnemonic
    raise NotImplementedError(f"{arch}: no disassembler yet")


def format_instr(ins: Instr, arch: str | None = None) -> str:
    """One instruction in LLVM syntax; an unknown opcode prints as its raw dwords with a comment.

    `arch` defaults to the instruction's own (`Instr.arch`: gfx942 instructions are `InstrGfx9`)."""
    printers, mnemonic_of = _printer(arch or ins.arch)
    printer = printers.get(ins.family)
    if ins.mnemonic is None or printer is None:
        raw = ", ".join(f"0x{w:08x}" for w in ins.words)
        return f".long {raw}  ; unknown {ins.family} opcode 0x{ins.op:x}"
    ops_text = printer(ins)
    if ins.family == "VOPD":
        return ops_text  # both halves carry their mnemonics
    name = mnemonic_of(ins)
    return f"{name} {ops_text}" if ops_text else name


@dataclass(frozen=True)
class ListingLine:
    """One entry of a listing: an instruction, a dword that starts none (`decoded` False), or trailing bytes."""

    offset: int  # byte offset in the blob
    words: tuple[int, ...]  # its dwords (for trailing bytes: empty)
    text: str  # the instruction in LLVM syntax, or the `.long` / `.byte` line saying why it is not one
    decoded: bool = True
    target: int | None = None  # a branch's target, as a byte offset in the blob

    def as_json(self, base: int = 0) -> dict:
        return {"offset": self.offset, "address": base + self.offset, "words": list(self.words), "text": self.text,
                "decoded": self.decoded, "target": self.target}


def listing(code: bytes, arch: str = "gfx1100") -> list[ListingLine]:
    """Every instruction of a code blob, in order. Never raises on the bytes: a dword that starts no instruction
    it can decode (or print) is an entry saying why, and decoding goes on at the next dword; trailing bytes short
    of a dword are a last `.byte` entry."""
    get_arch(arch)  # an unknown architecture is the caller's error, not the code's
    code = bytes(code)
    lines, offset, end = [], 0, len(code) // 4 * 4
    while offset < end:
        try:
            ins = decode(code[:end], offset, arch)
            text = format_instr(ins, arch)
        except Exception as e:  # a listing shows every dword, decoded or not
            word = int.from_bytes(code[offset:offset + 4], "little")
            lines.append(ListingLine(offset, (word,), f".long 0x{word:08x}  ; cannot decode: {type(e).__name__}: {e}",
                                     decoded=False))
            offset += 4
            continue
        target = None
        if ins.family == "SOPP" and ins.shape == "br":
            target = offset + 4 + 4 * sext(ins.fields["simm16"], 16)
        lines.append(ListingLine(offset, tuple(ins.words), text, target=target))
        offset += ins.size
    if end < len(code):
        rest = code[end:]
        lines.append(ListingLine(end, (), f".byte {', '.join(f'0x{b:02x}' for b in rest)}  ; cannot decode: "
                                          f"{len(rest)} trailing byte{'s' if len(rest) > 1 else ''}, not a whole dword",
                                 decoded=False))
    return lines


def objdump_line(line: ListingLine, base: int = 0, width: int = 48) -> str:
    """`  0x0010: s_load_b64 s[0:1], s[0:1], 0x0   // 000000000610: F4040000 F8000000`: the offset in the blob
    (what faults cite as `PC +0x10`), the instruction, and llvm-objdump's comment (address `base` + offset, words)."""
    text = f"  0x{line.offset:04x}: {line.text}"
    comment = f"// {base + line.offset:012X}:" + "".join(f" {w:08X}" for w in line.words)
    if line.target is not None:
        comment += f"  -> 0x{line.target:04x}"
    return f"{text:<{width}} {comment}" if line.words else text


def disassemble(code: bytes, arch: str = "gfx1100", *, annotate: bool = False, offsets: bool = False,
                base: int = 0) -> str:
    """The listing of a code blob, one instruction per line (see `listing`). `annotate=True` appends the byte
    offset, the raw dwords and a branch's target as a comment; `offsets=True` prints llvm-objdump style instead
    (`objdump_line`: offset first, the comment's address counted from `base`)."""
    out = []
    for line in listing(code, arch):
        if offsets:
            out.append(objdump_line(line, base))
        elif annotate and line.words:
            note = f"{line.offset:06x}: " + " ".join(f"{w:08X}" for w in line.words)
            if line.target is not None:
                note += f"  -> 0x{line.target:x}"
            out.append(f"{line.text:60s} // {note}")
        else:
            out.append(line.text)
    return "\n".join(out)
