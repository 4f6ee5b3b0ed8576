"""RDNA3 (gfx11) machine-code format families as field tables, family identification, sizes, operands.

Each family is a `PacketFormat` (hcqsim.fields): named bit ranges over the instruction's fixed dwords
(dword 0 is the first little-endian dword of the instruction). The same tables decode (`decoder`), print
(`disasm`) and encode (tests, hand-written shader snippets). Facts: ISA_FACTS section 5, every field
position checked against LLVM's assembler (tests/test_shader_decoder.py).

Identification (`identify`, ISA_FACTS 5.1 decode order): bits [31:30] first.
  10 -> SALU: SOP1 / SOPC / SOPP by [31:23], SOPK by [31:28] = 1011, else SOP2 (the catch-all);
  0x -> VOP1 / VOPC by [31:25], else VOP2 ([31] = 0);
  11 -> by [31:26] (SMEM, VOP3, VOPD, DS, FLAT, MUBUF, MTBUF, MIMG, EXP) or [31:24] (VOP3P, VINTERP, LDSDIR).
FLAT, GLOBAL and SCRATCH share one encoding and are told apart by `seg` [17:16]: 0 FLAT, 1 SCRATCH, 2 GLOBAL.
VOP3SD (the carry-out / div_scale / mad64 ops) shares VOP3's fixed bits and is chosen by opcode.

Sizes (`instr_dwords`): the family's fixed dwords plus one literal dword when a 9-bit source (VALU) or 8-bit
ssrc (SALU) is 255, always for v_fmamk/v_fmaak (VOP2 and VOPD) and s_setreg_imm32_b32; plus one DPP control
dword when a VALU src0 is 250 (DPP16) or 233/234 (DPP8). VOPD shares one literal between its two halves.
`extension_fields` says how a DPP (or MIMG NSA) dword enters the decoded fields.

GFX9 (formats_gfx9) shares the SALU and VOP1/VOP2/VOPC layouts (`SHARED_LAYOUTS`) and their size rules
(`shared_extra_dword`, with each architecture's opcodes), the inline constants and `family_format`.
"""
from __future__ import annotations

import struct
from dataclasses import replace

from ..fields import F, PacketFormat

# --- 9-bit operand space (8-bit for SALU: the same values below 256) -----------------------------------

SGPR_MAX = 105
VCC_LO, VCC_HI = 106, 107
TTMP_BASE = 108  # ttmp0..ttmp15 = 108..123
NULL = 124
M0 = 125
EXEC_LO, EXEC_HI = 126, 127
INLINE_INT_ZERO = 128  # 128..192 = 0..64, 193..208 = -1..-16
DPP8, DPP8FI = 233, 234
SRC_SHARED_BASE, SRC_SHARED_LIMIT, SRC_PRIVATE_BASE, SRC_PRIVATE_LIMIT = 235, 236, 237, 238
SRC_POPS_EXITING_WAVE_ID = 239
DPP16 = 250
SRC_VCCZ, SRC_EXECZ, SRC_SCC, SRC_LDS_DIRECT = 251, 252, 253, 254
LITERAL = 255
VGPR_BASE = 256  # 256..511 = v0..v255

# 240..248: the inline float constants (value as a Python float; 248 is 1/(2*pi) rounded to the operand type)
INLINE_FLOATS = {240: 0.5, 241: -0.5, 242: 1.0, 243: -1.0, 244: 2.0, 245: -2.0, 246: 4.0, 247: -4.0,
                 248: 0.15915494309189535}
# bit patterns of 1/(2*pi) as LLVM and the hardware use them
INV_2PI_BITS = {16: 0x3118, 32: 0x3E22F983, 64: 0x3FC45F306DC9C882}

SPECIAL_OPERANDS = {VCC_LO: "vcc_lo", VCC_HI: "vcc_hi", NULL: "null", M0: "m0", EXEC_LO: "exec_lo",
                    EXEC_HI: "exec_hi", SRC_SHARED_BASE: "src_shared_base", SRC_SHARED_LIMIT: "src_shared_limit",
                    SRC_PRIVATE_BASE: "src_private_base", SRC_PRIVATE_LIMIT: "src_private_limit",
                    SRC_SCC: "src_scc"}
# 239 (pops_exiting_wave_id), 251 (vccz), 252 (execz) and 254 (lds_direct) are not gfx11 operands (LLVM
# rejects them for gfx1100); the disassembler prints them as invalid
# 64-bit operands starting at these codes print as one register name
REGISTER_PAIRS = {VCC_LO: "vcc", EXEC_LO: "exec"}


def inline_int(code: int) -> int | None:
    """The integer an inline-constant code stands for (128..208), else None."""
    if 128 <= code <= 192:
        return code - 128
    if 193 <= code <= 208:
        return 192 - code
    return None


def inline_bits(code: int, bits: int = 32, is_float: bool = True) -> int | None:
    """Bit pattern (of `bits` width) an inline constant code produces for an operand of that width.

    Integers are sign-extended to the width. Floats (240..248) are encoded in the operand's float format
    when `is_float`; an integer operand receives the f32 pattern (the hardware's rule for 32-bit integer
    operands; 64-bit integer operands get the f64 pattern)."""
    i = inline_int(code)
    mask = (1 << bits) - 1
    if i is not None:
        return i & mask
    if code not in INLINE_FLOATS:
        return None
    if code == 248:
        return INV_2PI_BITS[bits if bits in INV_2PI_BITS else 32]
    v = INLINE_FLOATS[code]
    if bits == 64:
        return struct.unpack("<Q", struct.pack("<d", v))[0]
    if bits == 16:
        return struct.unpack("<H", struct.pack("<e", v))[0]
    return struct.unpack("<I", struct.pack("<f", v))[0]


def is_inline_constant(code: int) -> bool:
    return 128 <= code <= 208 or 240 <= code <= 248


# --- the format families ---------------------------------------------------------------------------------

def family_format(name: str, enc: int, fields, size: int, doc: str = "") -> PacketFormat:
    """A family table; its `encoding` field defaults to the family's fixed bits, so `encode` builds valid words."""
    fields = tuple(replace(f, default=enc) if f.name == "encoding" else f for f in fields)
    return PacketFormat(name, enc, fields, size=size, doc=doc)


_fmt = family_format  # short name for the table below


VOP3_SRCS = (F("src0", 1, 8, 0), F("src1", 1, 17, 9), F("src2", 1, 26, 18))

FORMATS: dict[str, PacketFormat] = {f.name: f for f in (
    _fmt("SOP2", 0b10, (F("ssrc0", 0, 7, 0), F("ssrc1", 0, 15, 8), F("sdst", 0, 22, 16), F("op", 0, 29, 23),
                        F("encoding", 0, 31, 30)), 1),
    _fmt("SOPK", 0b1011, (F("simm16", 0, 15, 0), F("sdst", 0, 22, 16), F("op", 0, 27, 23),
                          F("encoding", 0, 31, 28)), 1),
    _fmt("SOP1", 0x17D, (F("ssrc0", 0, 7, 0), F("op", 0, 15, 8), F("sdst", 0, 22, 16),
                         F("encoding", 0, 31, 23)), 1),
    _fmt("SOPC", 0x17E, (F("ssrc0", 0, 7, 0), F("ssrc1", 0, 15, 8), F("op", 0, 22, 16),
                         F("encoding", 0, 31, 23)), 1),
    _fmt("SOPP", 0x17F, (F("simm16", 0, 15, 0), F("op", 0, 22, 16), F("encoding", 0, 31, 23)), 1),
    _fmt("SMEM", 0x3D, (F("sbase", 0, 5, 0, doc="SGPR pair (or quad) index / 2"), F("sdata", 0, 12, 6),
                        F("dlc", 0, 13, hint=True), F("glc", 0, 14, hint=True), F("op", 0, 25, 18),
                        F("encoding", 0, 31, 26), F("offset", 1, 20, 0, doc="signed 21-bit byte offset"),
                        F("soffset", 1, 31, 25, doc="SGPR byte offset; 124 (null) = none")), 2),
    _fmt("VOP1", 0x3F, (F("src0", 0, 8, 0), F("op", 0, 16, 9), F("vdst", 0, 24, 17), F("encoding", 0, 31, 25)), 1),
    _fmt("VOP2", 0, (F("src0", 0, 8, 0), F("vsrc1", 0, 16, 9), F("vdst", 0, 24, 17), F("op", 0, 30, 25),
                     F("encoding", 0, 31)), 1),
    _fmt("VOPC", 0x3E, (F("src0", 0, 8, 0), F("vsrc1", 0, 16, 9), F("op", 0, 24, 17), F("encoding", 0, 31, 25)), 1),
    _fmt("VOP3", 0x35, (F("vdst", 0, 7, 0), F("abs", 0, 10, 8), F("opsel", 0, 14, 11), F("clamp", 0, 15),
                        F("op", 0, 25, 16), F("encoding", 0, 31, 26), *VOP3_SRCS, F("omod", 1, 28, 27),
                        F("neg", 1, 31, 29)), 2),
    _fmt("VOP3SD", 0x35, (F("vdst", 0, 7, 0), F("sdst", 0, 14, 8), F("clamp", 0, 15), F("op", 0, 25, 16),
                          F("encoding", 0, 31, 26), *VOP3_SRCS, F("omod", 1, 28, 27), F("neg", 1, 31, 29)), 2),
    _fmt("VOP3P", 0xCC, (F("vdst", 0, 7, 0), F("neg_hi", 0, 10, 8), F("opsel", 0, 13, 11), F("opsel_hi2", 0, 14),
                         F("clamp", 0, 15), F("op", 0, 22, 16), F("encoding", 0, 31, 24), *VOP3_SRCS,
                         F("opsel_hi", 1, 28, 27), F("neg", 1, 31, 29, doc="neg_lo")), 2),
    _fmt("VOPD", 0x32, (F("srcx0", 0, 8, 0), F("vsrcx1", 0, 16, 9), F("opy", 0, 21, 17), F("opx", 0, 25, 22),
                        F("encoding", 0, 31, 26), F("srcy0", 1, 8, 0), F("vsrcy1", 1, 16, 9),
                        F("vdsty", 1, 23, 17, doc="vdstY >> 1 as stored; the decoder replaces it by the full VGPR"),
                        F("vdstx", 1, 31, 24)), 2),
    _fmt("VINTERP", 0xCD, (F("vdst", 0, 7, 0), F("waitexp", 0, 10, 8), F("opsel", 0, 14, 11), F("clamp", 0, 15),
                           F("op", 0, 22, 16), F("encoding", 0, 31, 24), *VOP3_SRCS, F("neg", 1, 31, 29)), 2),
    _fmt("LDSDIR", 0xCE, (F("vdst", 0, 7, 0), F("attr_chan", 0, 9, 8), F("attr", 0, 15, 10),
                          F("waitvdst", 0, 19, 16), F("op", 0, 21, 20), F("encoding", 0, 31, 24)), 1),
    _fmt("DS", 0x36, (F("offset0", 0, 7, 0), F("offset1", 0, 15, 8), F("gds", 0, 17), F("op", 0, 25, 18),
                      F("encoding", 0, 31, 26), F("addr", 1, 7, 0), F("data0", 1, 15, 8), F("data1", 1, 23, 16),
                      F("vdst", 1, 31, 24)), 2),
    _fmt("FLAT", 0x37, (F("offset", 0, 12, 0, doc="13-bit, signed for GLOBAL/SCRATCH"), F("dlc", 0, 13, hint=True),
                        F("glc", 0, 14), F("slc", 0, 15, hint=True), F("seg", 0, 17, 16), F("op", 0, 24, 18),
                        F("encoding", 0, 31, 26), F("addr", 1, 7, 0), F("data", 1, 15, 8), F("saddr", 1, 22, 16),
                        F("sve", 1, 23), F("vdst", 1, 31, 24)), 2),
    _fmt("MUBUF", 0x38, (F("offset", 0, 11, 0), F("slc", 0, 12, hint=True), F("dlc", 0, 13, hint=True),
                         F("glc", 0, 14), F("op", 0, 25, 18), F("encoding", 0, 31, 26), F("vaddr", 1, 7, 0),
                         F("vdata", 1, 15, 8), F("srsrc", 1, 20, 16, doc="SGPR quad index / 4"), F("tfe", 1, 21),
                         F("offen", 1, 22), F("idxen", 1, 23), F("soffset", 1, 31, 24)), 2),
    _fmt("MTBUF", 0x3A, (F("offset", 0, 11, 0), F("slc", 0, 12, hint=True), F("dlc", 0, 13, hint=True),
                         F("glc", 0, 14), F("op", 0, 18, 15), F("format", 0, 25, 19), F("encoding", 0, 31, 26),
                         F("vaddr", 1, 7, 0), F("vdata", 1, 15, 8), F("srsrc", 1, 20, 16), F("tfe", 1, 21),
                         F("offen", 1, 22), F("idxen", 1, 23), F("soffset", 1, 31, 24)), 2),
    _fmt("MIMG", 0x3C, (F("nsa", 0, 0), F("dim", 0, 4, 2), F("dmask", 0, 11, 8), F("op", 0, 25, 18),
                        F("encoding", 0, 31, 26), F("vaddr", 1, 7, 0), F("vdata", 1, 15, 8),
                        F("srsrc", 1, 20, 16), F("ssamp", 1, 27, 23)), 2),
    _fmt("EXP", 0x3E, (F("en", 0, 3, 0), F("target", 0, 9, 4), F("done", 0, 11), F("vm", 0, 12), F("row", 0, 13),
                       F("encoding", 0, 31, 26), F("vsrc0", 1, 7, 0), F("vsrc1", 1, 15, 8), F("vsrc2", 1, 23, 16),
                       F("vsrc3", 1, 31, 24)), 2),
)}
# FLAT, GLOBAL and SCRATCH are one encoding; the family name tells the segment
FORMATS["GLOBAL"] = FORMATS["SCRATCH"] = FORMATS["FLAT"]
FLAT_SEGMENTS = {0: "FLAT", 1: "SCRATCH", 2: "GLOBAL"}
# the SALU and VOP1/VOP2/VOPC layouts, which GFX9 shares (formats_gfx9 takes these tables, `shared_extra_dword`)
SHARED_LAYOUTS = ("SOP1", "SOP2", "SOPC", "SOPK", "SOPP", "VOP1", "VOP2", "VOPC")

# VOP3 opcodes encoded as VOP3SD (sdst in [14:8] instead of abs/opsel)
VOP3SD_OPS = frozenset({0x120, 0x121, 0x122, 0x2FC, 0x2FD, 0x2FE, 0x2FF, 0x300, 0x301, 0x302})

# families an executor of compute kernels meets; the others only identify and size (graphics)
COMPUTE_FAMILIES = ("SOP1", "SOP2", "SOPC", "SOPK", "SOPP", "SMEM", "VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD",
                    "VOP3P", "VOPD", "DS", "FLAT", "GLOBAL", "SCRATCH", "MUBUF")

# [31:26] of the 11xxxxxx families with a 6-bit pattern; 0x33 is split by [25:24]
_TOP6 = {0x3D: "SMEM", 0x35: "VOP3", 0x32: "VOPD", 0x36: "DS", 0x37: "FLAT", 0x38: "MUBUF", 0x3A: "MTBUF",
         0x3C: "MIMG", 0x3E: "EXP"}
_TOP8_33 = {0xCC: "VOP3P", 0xCD: "VINTERP", 0xCE: "LDSDIR"}


def identify(w0: int) -> str | None:
    """Format family of an instruction from its first dword (None when no gfx11 family matches).

    Returns "VOP3" for VOP3SD too and "FLAT" for GLOBAL/SCRATCH: `family_of` refines them."""
    top = w0 >> 30
    if top == 0b10:
        h9 = w0 >> 23
        if h9 == 0x17D:
            return "SOP1"
        if h9 == 0x17E:
            return "SOPC"
        if h9 == 0x17F:
            return "SOPP"
        if w0 >> 28 == 0b1011:
            return "SOPK"
        return "SOP2"
    if top < 0b10:
        h7 = w0 >> 25
        if h7 == 0x3F:
            return "VOP1"
        if h7 == 0x3E:
            return "VOPC"
        return "VOP2"
    h6 = w0 >> 26
    if h6 == 0x33:
        return _TOP8_33.get(w0 >> 24)
    return _TOP6.get(h6)


def family_of(w0: int) -> str | None:
    """`identify` refined: VOP3SD by opcode, GLOBAL/SCRATCH by seg (seg 3 is reserved: None)."""
    fam = identify(w0)
    if fam == "VOP3":
        return "VOP3SD" if (w0 >> 16) & 0x3FF in VOP3SD_OPS else "VOP3"
    if fam == "FLAT":
        return FLAT_SEGMENTS.get((w0 >> 16) & 3)
    return fam


# --- sizes -------------------------------------------------------------------------------------------------

VOP2_MADK_OPS = frozenset({0x2C, 0x2D, 0x37, 0x38})  # v_fmamk_f32, v_fmaak_f32, v_fmamk_f16, v_fmaak_f16
VOPD_MADK_OPS = frozenset({1, 2})  # FMAAK, FMAMK
SOPK_IMM32_OPS = frozenset({0x13})  # s_setreg_imm32_b32
DPP_SRC0 = frozenset({DPP16, DPP8, DPP8FI})
SRC0_EXTENSIONS = {code: "dpp" for code in DPP_SRC0}  # VALU src0 codes announcing an extension dword
# the field an extension dword is stored as (`extension_fields`)
EXTENSION_FIELDS = {"dpp": "dpp", "nsa": "nsa_addrs"}


def base_dwords(family: str) -> int:
    return FORMATS[family].size


def shared_extra_dword(family: str, w0: int, sopk_imm32_ops, vop2_madk_ops, src0_extensions) -> str | None:
    """`extra_dword` of the layouts gfx11 and GFX9 share (SHARED_LAYOUTS), given the architecture's opcodes that
    always carry a literal (SOPK, VOP2) and the extensions its VOP1/VOP2/VOPC src0 codes announce."""
    if family in ("SOP1", "SOP2", "SOPC"):
        if w0 & 0xFF == LITERAL or (family != "SOP1" and (w0 >> 8) & 0xFF == LITERAL):
            return "literal"
        return None
    if family == "SOPK":
        return "literal" if (w0 >> 23) & 0x1F in sopk_imm32_ops else None
    if family in ("VOP1", "VOP2", "VOPC"):
        src0 = w0 & 0x1FF
        if src0 == LITERAL or (family == "VOP2" and (w0 >> 25) & 0x3F in vop2_madk_ops):
            return "literal"
        return src0_extensions.get(src0)
    return None  # SOPP


def extra_dword(family: str, words) -> str | None:
    """What follows the fixed dwords: "literal", "dpp", "nsa" or None. `words` needs the fixed dwords only."""
    w0 = words[0]
    if family in SHARED_LAYOUTS:
        return shared_extra_dword(family, w0, SOPK_IMM32_OPS, VOP2_MADK_OPS, SRC0_EXTENSIONS)
    if family in ("VOP3", "VOP3SD", "VOP3P"):
        w1 = words[1]
        if LITERAL in (w1 & 0x1FF, (w1 >> 9) & 0x1FF, (w1 >> 18) & 0x1FF):
            return "literal"
        return "dpp" if w1 & 0x1FF in DPP_SRC0 else None
    if family == "VOPD":
        if (w0 & 0x1FF == LITERAL or words[1] & 0x1FF == LITERAL or (w0 >> 22) & 0xF in VOPD_MADK_OPS
                or (w0 >> 17) & 0x1F in VOPD_MADK_OPS):
            return "literal"
        return None
    if family == "MIMG":
        return "nsa" if w0 & 1 else None  # gfx11 NSA: up to 4 more address VGPRs in one dword
    return None


def instr_dwords(family: str, words) -> int:
    """Total size in dwords, given at least the family's fixed dwords."""
    n = FORMATS[family].size
    return n + 1 if extra_dword(family, words) else n


def extension_fields(family: str, kind: str, word: int) -> dict:
    """The fields an extension dword (`extra_dword` other than "literal") adds: the raw DPP control dword as
    "dpp", the NSA address dword as "nsa_addrs"."""
    return {EXTENSION_FIELDS[kind]: word}
