"""Disassembler: `Instr` -> LLVM-style assembly text (the syntax LLVM's AMDGPU printer uses for gfx11).

`format_instr(instr)` prints one instruction, `disassemble(code)` a whole blob, one instruction per line.
Branch targets print as LLVM's raw signed dword offset (`s_cbranch_execz 5` jumps to pc + 4 + 5 * 4);
`annotate=True` adds the byte offset, the target and the raw dwords as a comment. Wave32 is assumed for lane
masks (VCC / the v_cmp SGPR destination print as 32-bit registers).
"""
from __future__ import annotations

from . import formats as fm
from . import opcodes_gfx11 as ops
from .decoder import Instr, decode_program, sext

# --- operands -------------------------------------------------------------------------------------------

_FLOAT_TEXT = {240: "0.5", 241: "-0.5", 242: "1.0", 243: "-1.0", 244: "2.0", 245: "-2.0", 246: "4.0", 247: "-4.0"}


def _range(prefix: str, n: int, width: int) -> str:
    return f"{prefix}{n}" if width == 1 else f"{prefix}[{n}:{n + width - 1}]"


def literal_text(value: int) -> str:
    """LLVM prints a 32-bit immediate in decimal when it is in the inline range -16..64, else in hex."""
    v = sext(value & 0xFFFFFFFF, 32)
    return str(v) if -16 <= v <= 64 else f"0x{value & 0xFFFFFFFF:x}"


def operand(code: int, width: int = 1, literal: int | None = None) -> str:
    """Text of a 9-bit source operand code (0..511; SALU 8-bit codes are the same below 256)."""
    if code <= fm.SGPR_MAX:
        return _range("s", code, width)
    if code >= fm.VGPR_BASE:
        return _range("v", code - fm.VGPR_BASE, width)
    if fm.TTMP_BASE <= code < fm.NULL:
        return _range("ttmp", code - fm.TTMP_BASE, width)
    if code in (fm.VCC_LO, fm.EXEC_LO) and width == 2:
        return "vcc" if code == fm.VCC_LO else "exec"
    if code in fm.SPECIAL_OPERANDS:
        return fm.SPECIAL_OPERANDS[code]
    i = fm.inline_int(code)
    if i is not None:
        return str(i)
    if code in _FLOAT_TEXT:
        return _FLOAT_TEXT[code]
    if code == 248:
        return "0.15915494309189532" if width == 2 else "0.15915494"
    if code == fm.LITERAL:
        return "<missing literal>" if literal is None else literal_text(literal)
    return f"<invalid operand {code}>"


def sgpr_operand(code: int, width: int = 1) -> str:
    """A 7-bit scalar destination field (SGPR, VCC, TTMP, NULL, M0, EXEC)."""
    return operand(code, width)


def vgpr(n: int, width: int = 1) -> str:
    return _range("v", n, width)


def _t16(code: int) -> str:
    """A true16 register half in a VOP1/VOP2 8-bit field: bits [6:0] the VGPR, bit 7 the high half."""
    return f"v{code & 0x7F}.{'h' if code & 0x80 else 'l'}"


def _mods(text: str, neg: bool, abs_: bool) -> str:
    if abs_:
        text = f"|{text}|"
    return f"-{text}" if neg else text


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
    vm, exp, lgkm = (imm >> 10) & 0x3F, imm & 7, (imm >> 4) & 0x3F
    parts = [(f"vmcnt({vm})", vm != 0x3F), (f"expcnt({exp})", exp != 7), (f"lgkmcnt({lgkm})", lgkm != 0x3F)]
    shown = [t for t, keep in parts if keep]
    return " ".join(shown or [t for t, _ in parts])


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
    reg, off, size = imm & 0x3F, (imm >> 6) & 0x1F, ((imm >> 11) & 0x1F) + 1
    name = HWREG_NAMES.get(reg, str(reg))
    return f"hwreg({name})" if off == 0 and size == 32 else f"hwreg({name}, {off}, {size})"


# --- per-family printers -----------------------------------------------------------------------------------

def _shape(ins: Instr):
    return ops.parse_shape(ins.shape or ":")


def _sop1(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, _shape(ins)
    parts = [sgpr_operand(f["sdst"], d)] if d else []
    if srcs == ("m",):
        parts.append(sendmsg_text(f["ssrc0"]))
    elif srcs:
        parts.append(operand(f["ssrc0"], srcs[0], ins.literal))
    return ", ".join(parts)


def _sop2(ins: Instr) -> str:
    f, (d, (s0, s1)) = ins.fields, _shape(ins)
    srcs = f"{operand(f['ssrc0'], s0, ins.literal)}, {operand(f['ssrc1'], s1, ins.literal)}"
    return f"{sgpr_operand(f['sdst'], d)}, {srcs}"


def _sopc(ins: Instr) -> str:
    f, (_, (s0, s1)) = ins.fields, _shape(ins)
    return f"{operand(f['ssrc0'], s0, ins.literal)}, {operand(f['ssrc1'], s1, ins.literal)}"


def _sopk(ins: Instr) -> str:
    f, kind = ins.fields, ins.shape
    imm, sdst = f["simm16"], f["sdst"]
    if kind == "x":
        return f"0x{imm:x}"
    if kind == "getreg":
        return f"{sgpr_operand(sdst)}, {hwreg_text(imm)}"
    if kind == "setreg":
        return f"{hwreg_text(imm)}, {sgpr_operand(sdst)}"
    if kind == "setreg_imm":
        return f"{hwreg_text(imm)}, {literal_text(ins.literal or 0)}"
    if kind == "call":
        return f"{sgpr_operand(sdst, 2)}, {sext(imm, 16)}"
    if kind == "loop":
        return f"{sgpr_operand(sdst)}, {sext(imm, 16)}"
    return f"{sgpr_operand(sdst)}, 0x{imm:x}"  # k, waitcnt


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


def _signed_hex(v: int) -> str:
    return f"-0x{-v:x}" if v < 0 else f"0x{v:x}"


def _smem(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, _shape(ins)
    if not d:
        return ""
    text = f"{sgpr_operand(f['sdata'], d)}, {sgpr_operand(f['sbase'] * 2, srcs[0])}, "
    offset = sext(f["offset"], 21)
    if f["soffset"] == fm.NULL:
        text += _signed_hex(offset)
    else:
        text += sgpr_operand(f["soffset"])
        if offset:
            text += f" offset:{_signed_hex(offset)}"
    return text + (" glc" if f["glc"] else "") + (" dlc" if f["dlc"] else "")


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
            text = _mods(text, dpp >> 20 & 1, dpp >> 21 & 1)
        return text
    if src0 >= fm.VGPR_BASE:
        return _vgpr_e32(src0 - fm.VGPR_BASE, width)
    return operand(src0, ops.dwords(width), ins.literal)


def _vsrc1_e32(ins: Instr, width) -> str:
    text = _vgpr_e32(ins.fields["vsrc1"], width)
    if ins.fields.get("src0") == fm.DPP16 and "dpp" in ins.fields:
        dpp = ins.fields["dpp"]
        text = _mods(text, dpp >> 22 & 1, dpp >> 23 & 1)
    return text


def _vop1(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, _shape(ins)
    if not d:
        return ""
    dst = sgpr_operand(f["vdst"], d) if ins.mnemonic == "v_readfirstlane_b32" else _vgpr_e32(f["vdst"], d)
    return f"{dst}, {_src0_e32(ins, srcs[0])}" + (_dpp_text(ins) if "dpp" in f else "")


def _vop2(ins: Instr) -> str:
    text = _vop2_operands(ins)
    return text + _dpp_text(ins) if "dpp" in ins.fields else text


def _vop2_operands(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, _shape(ins)
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
    _, srcs = _shape(ins)
    text = f"{_src0_e32(ins, srcs[0])}, {_vsrc1_e32(ins, srcs[1])}"
    if "dpp" in ins.fields:
        text += _dpp_text(ins)
    return text if ins.mnemonic.startswith("v_cmpx") else f"vcc_lo, {text}"


_OMOD = {1: " mul:2", 2: " mul:4", 3: " div:2"}


def _vop3(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, _shape(ins)
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
        parts.append(_mods(text, neg >> i & 1, abs_ >> i & 1))
    text = ", ".join(parts)
    if opsel and name not in ops.OPSEL_IN_NAMES_ONLY:
        bits = [opsel >> i & 1 for i in range(len(srcs))] + [opsel >> 3 & 1]
        text += " op_sel:[" + ",".join(map(str, bits)) + "]"
    if f["clamp"]:
        text += " clamp"
    text += _OMOD.get(f["omod"], "")
    if dpp:
        text += _dpp_text(ins)
    return text


_MIX_OPS = ("v_fma_mix_f32", "v_fma_mixlo_f16", "v_fma_mixhi_f16")


def _vop3p(ins: Instr) -> str:
    f, (d, srcs) = ins.fields, _shape(ins)
    n = len(srcs)
    parts = [vgpr(f["vdst"], d)]
    dpp = "dpp" in f
    for i, w in enumerate(srcs):
        parts.append(vgpr(f["dpp"] & 0xFF, w) if i == 0 and dpp else operand(f[f"src{i}"], w, ins.literal))
    text = ", ".join(parts)

    def bits(v):
        return [v >> i & 1 for i in range(n)]

    opsel, opsel_hi = bits(f["opsel"]), bits(f["opsel_hi"] | f["opsel_hi2"] << 2)
    if any(opsel):
        text += " op_sel:[" + ",".join(map(str, opsel)) + "]"
    if (any(opsel_hi) if ins.mnemonic in _MIX_OPS else not all(opsel_hi)):
        text += " op_sel_hi:[" + ",".join(map(str, opsel_hi)) + "]"
    if any(bits(f["neg"])):
        text += " neg_lo:[" + ",".join(map(str, bits(f["neg"]))) + "]"
    if any(bits(f["neg_hi"])):
        text += " neg_hi:[" + ",".join(map(str, bits(f["neg_hi"]))) + "]"
    if f["clamp"]:
        text += " clamp"
    if dpp:
        text += _dpp_text(ins)
    return text


def _vinterp(ins: Instr) -> str:
    f = ins.fields
    srcs = [_mods(operand(f[f"src{i}"]), f["neg"] >> i & 1, False) for i in range(3)]
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


def _ds(ins: Instr) -> str:
    f = ins.fields
    d, (a, d0, d1) = _shape(ins)
    parts = []
    if d:
        parts.append(vgpr(f["vdst"], d))
    if a:
        parts.append(vgpr(f["addr"], a))
    if d0:
        parts.append(vgpr(f["data0"], d0))
    if d1:
        parts.append(vgpr(f["data1"], d1))
    text = ", ".join(parts)
    if "2addr" in ins.mnemonic:
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


def _flat(ins: Instr) -> str:
    f, name, fam = ins.fields, ins.mnemonic, ins.family
    r, (w,) = _shape(ins)
    atomic = "_atomic_" in name
    parts = []
    if r and (not atomic or f["glc"]):
        parts.append(vgpr(f["vdst"], r))
    saddr_off = f["saddr"] == fm.NULL
    if fam == "GLOBAL":
        if "addtid" not in name:
            parts.append(vgpr(f["addr"], 2 if saddr_off else 1))
    elif fam == "SCRATCH":
        parts.append(vgpr(f["addr"]) if f["sve"] else "off")
    else:
        parts.append(vgpr(f["addr"], 2))
    if w and (atomic or not r):
        parts.append(vgpr(f["data"], w))
    if fam == "GLOBAL":
        parts.append("off" if saddr_off else sgpr_operand(f["saddr"], 2))
    elif fam == "SCRATCH":
        parts.append("off" if saddr_off else sgpr_operand(f["saddr"]))
    text = ", ".join(parts)
    offset = f["offset"] & 0xFFF if fam == "FLAT" else sext(f["offset"], 13)
    if offset:
        text += f" offset:{offset}"
    for flag in ("glc", "slc", "dlc"):
        if f[flag]:
            text += f" {flag}"
    return text


def _mubuf(ins: Instr) -> str:
    f = ins.fields
    w = int(ins.shape or "0")
    if not w:
        return ""
    n_addr = f["offen"] + f["idxen"]
    vaddr = vgpr(f["vaddr"], n_addr) if n_addr else "off"
    text = (f"{vgpr(f['vdata'], w + f['tfe'])}, {vaddr}, {sgpr_operand(f['srsrc'] * 4, 4)}, "
            f"{operand(f['soffset'])}")
    if f["idxen"]:
        text += " idxen"
    if f["offen"]:
        text += " offen"
    if f["offset"]:
        text += f" offset:{f['offset']}"
    for flag in ("glc", "slc", "dlc", "tfe"):
        if f[flag]:
            text += f" {flag}"
    return text


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


def format_instr(ins: Instr, arch: str | None = None) -> str:
    """One instruction in LLVM syntax; an unknown opcode prints as its raw dwords with a comment.

    `arch` defaults to the instruction's own (gfx942 instructions are `decoder_gfx9.InstrGfx9`, printed there)."""
    arch = arch or getattr(ins, "arch", "gfx1100")
    if arch == "gfx942":
        from .decoder_gfx9 import format_instr_gfx9
        return format_instr_gfx9(ins)
    if arch != "gfx1100":
        raise NotImplementedError(f"{arch}: no disassembler yet")
    printer = PRINTERS.get(ins.family)
    if ins.mnemonic is None or printer is None:
        raw = ", ".join(f"0x{w:08x}" for w in ins.words)
        return f".long {raw}  ; unknown {ins.family} opcode 0x{ins.op:x}"
    ops_text = printer(ins)
    if ins.family == "VOPD":
        return ops_text
    name = printed_mnemonic(ins)
    return f"{name} {ops_text}" if ops_text else name


def disassemble(code: bytes, arch: str = "gfx1100", *, annotate: bool = False) -> str:
    """The listing of a code blob, one instruction per line."""
    lines = []
    for ins in decode_program(code, arch):
        text = format_instr(ins, arch)
        if annotate:
            note = f"{ins.pc:06x}: " + " ".join(f"{w:08X}" for w in ins.words)
            if ins.family == "SOPP" and ins.shape == "br":
                note += f"  -> 0x{ins.pc + 4 + 4 * sext(ins.fields['simm16'], 16):x}"
            text = f"{text:60s} // {note}"
        lines.append(text)
    return "\n".join(lines)
