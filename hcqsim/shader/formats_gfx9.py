"""CDNA3 (gfx942, GFX9 encodings) machine-code format families as field tables, identification, sizes, operands.

The gfx942 counterpart of `formats` (gfx11): the same conventions, the GFX9 bit layouts. Facts: ISA_FACTS 5.3,
every field position checked against LLVM 22's assembler for gfx942 (tests/test_shader_decoder_gfx942.py).

Identification (`identify`): bits [31:30] first.
  10 -> SALU, exactly as gfx11 (the SOP* bit patterns are shared; only the opcode numbers differ):
        SOP1 / SOPC / SOPP by [31:23] = 0x17D / 0x17E / 0x17F, SOPK by [31:28] = 1011, else SOP2;
  0x -> VOP1 ([31:25] = 0x3F) / VOPC (0x3E), else VOP2 ([31] = 0), the gfx11 layouts;
  11 -> VOP3P when [31:23] = 0x1A7 (it lives inside VOP3's 0x34 space: VOP3 opcodes 0x380-0x3FF), else by
        [31:26]: 0x30 SMEM, 0x31 EXP, 0x32 VINTRP, 0x34 VOP3, 0x36 DS, 0x37 FLAT, 0x38 MUBUF, 0x3A MTBUF, 0x3C MIMG.
`family_of` refines by opcode and segment: VOP3 -> VOP3B (carry-out / div_scale / mad64 forms, sdst in [14:8]),
VOP3P -> VOP3P_MAI (MFMA / SMFMAC: cbsz, abid, acc_cd, acc, blgp instead of the packed-math modifiers),
FLAT -> FLAT / SCRATCH / GLOBAL by seg [15:14] = 0 / 1 / 2 (3 is reserved: no family).

Sizes (`instr_dwords`): the family's fixed dwords, plus one dword when VOP1 / VOP2 / VOPC src0 is
255 (literal), 249 (SDWA) or 250 (DPP), always for v_fmamk_f32 / v_fmaak_f32 / v_madmk_f16 / v_madak_f16 (the
K literal), a SALU ssrc of 255 (literal) and s_setreg_imm32_b32. VOP3, VOP3B and VOP3P never take a literal on
GFX9 (a source code of 255 there is not an operand), and there is no DPP8, VOPD or VOP3 DPP.

Extension dwords decode into `fields` with their own tables (`SDWA`, `SDWA_VOPC`, `DPP`, merged into the
instruction's fields); `ext_src0` is the src0 byte they carry (the real src0: `src0_code`).

Operand space (9-bit VALU sources, 8-bit SALU sources and 7-bit scalar destinations; differences to gfx11
in capitals): 0-101 s0-s101, 102/103 FLAT_SCRATCH_LO/HI, 104/105 XNACK_MASK_LO/HI, 106/107 vcc_lo/hi,
108-123 ttmp0-15, 124 M0, 125 RESERVED (no null register), 126/127 exec_lo/hi, 128-208 the integers 0..64 and
-1..-16, 235-238 src_shared_base/limit, src_private_base/limit, 239 src_pops_exiting_wave_id, 240-248 the
float constants, 249 SDWA, 250 DPP, 251 src_vccz, 252 src_execz, 253 src_scc, 254 lds_direct (rejected by
LLVM for gfx942), 255 literal, 256-511 v0-v255. EXEC and VCC are 64-bit (wave64): lane masks are SGPR pairs.
AccVGPRs (a0-a255) have no codes of their own: an acc bit of the instruction (DS, FLAT, MUBUF `acc`; MFMA
`acc` / `acc_cd`) or the opcode (v_accvgpr_*) says that a VGPR-coded operand (256+n) means a[n].
"""
from __future__ import annotations

from ..fields import F, PacketFormat
from . import formats as fm
from .formats import INLINE_FLOATS, INV_2PI_BITS, inline_bits, inline_int, is_inline_constant  # same on GFX9

__all__ = ["FORMATS", "identify", "family_of", "extra_dword", "instr_dwords", "base_dwords", "extension_fields",
           "src0_code", "src1_code", "inline_int", "inline_bits", "is_inline_constant", "INLINE_FLOATS", "INV_2PI_BITS"]

# --- operand space -------------------------------------------------------------------------------------

SGPR_MAX = 101
FLAT_SCRATCH_LO, FLAT_SCRATCH_HI = 102, 103
XNACK_MASK_LO, XNACK_MASK_HI = 104, 105
VCC_LO, VCC_HI = 106, 107
TTMP_BASE = 108  # ttmp0..ttmp15 = 108..123
M0 = 124
RESERVED_125 = 125  # gfx11's null: reserved on GFX9 (printed "null", as LLVM's disassembler does)
EXEC_LO, EXEC_HI = 126, 127
INLINE_INT_ZERO = 128
SRC_SHARED_BASE, SRC_SHARED_LIMIT, SRC_PRIVATE_BASE, SRC_PRIVATE_LIMIT = 235, 236, 237, 238
SRC_POPS_EXITING_WAVE_ID = 239
SDWA_SRC0, DPP_SRC0 = 249, 250  # VOP1/VOP2/VOPC src0 values announcing the extension dword
SRC_VCCZ, SRC_EXECZ, SRC_SCC, SRC_LDS_DIRECT = 251, 252, 253, 254
LITERAL = 255
VGPR_BASE = 256
SADDR_OFF = 0x7F  # FLAT/GLOBAL/SCRATCH saddr: no SGPR address

SPECIAL_OPERANDS = {FLAT_SCRATCH_LO: "flat_scratch_lo", FLAT_SCRATCH_HI: "flat_scratch_hi",
                    XNACK_MASK_LO: "xnack_mask_lo", XNACK_MASK_HI: "xnack_mask_hi", VCC_LO: "vcc_lo",
                    VCC_HI: "vcc_hi", M0: "m0", EXEC_LO: "exec_lo", EXEC_HI: "exec_hi",
                    SRC_SHARED_BASE: "src_shared_base", SRC_SHARED_LIMIT: "src_shared_limit",
                    SRC_PRIVATE_BASE: "src_private_base", SRC_PRIVATE_LIMIT: "src_private_limit",
                    SRC_POPS_EXITING_WAVE_ID: "src_pops_exiting_wave_id", SRC_VCCZ: "src_vccz",
                    SRC_EXECZ: "src_execz", SRC_SCC: "src_scc",
                    # not operands on gfx942 (LLVM 22's assembler rejects them); LLVM's disassembler names them so
                    RESERVED_125: "null", SRC_LDS_DIRECT: "src_lds_direct"}
# 64-bit operands starting at these codes print as one register name
REGISTER_PAIRS = {FLAT_SCRATCH_LO: "flat_scratch", XNACK_MASK_LO: "xnack_mask", VCC_LO: "vcc", EXEC_LO: "exec"}


# --- the format families -----------------------------------------------------------------------------------

_fmt = fm.family_format
VOP3_SRCS = fm.VOP3_SRCS  # src0 [40:32], src1 [49:41], src2 [58:50]

FORMATS: dict[str, PacketFormat] = {
    # the SALU and VOP1/VOP2/VOPC layouts are gfx11's (ISA_FACTS 5.3: same fixed bits, other opcode numbers)
    **{name: fm.FORMATS[name] for name in fm.SHARED_LAYOUTS},
    **{f.name: f for f in (
        _fmt("SMEM", 0x30, (F("sbase", 0, 5, 0, doc="SGPR pair (buffer: quad) index / 2"), F("sdata", 0, 12, 6),
                            F("soe", 0, 14, doc="imm=1: soffset [63:57] is added too"), F("nv", 0, 15, hint=True),
                            F("glc", 0, 16), F("imm", 0, 17, doc="1: offset is an immediate"), F("op", 0, 25, 18),
                            F("encoding", 0, 31, 26),
                            F("offset", 1, 20, 0, doc="imm=1: byte offset (21-bit signed for s_load/s_store, "
                                                      "20-bit unsigned for s_buffer_*); imm=0: [6:0] is the "
                                                      "offset SGPR code"),
                            F("soffset", 1, 31, 25, doc="soe=1: SGPR code of a second offset")), 2),
        _fmt("VOP3", 0x34, (F("vdst", 0, 7, 0), F("abs", 0, 10, 8), F("opsel", 0, 14, 11), F("clamp", 0, 15),
                            F("op", 0, 25, 16), F("encoding", 0, 31, 26), *VOP3_SRCS, F("omod", 1, 28, 27),
                            F("neg", 1, 31, 29)), 2),
        _fmt("VOP3B", 0x34, (F("vdst", 0, 7, 0), F("sdst", 0, 14, 8, doc="64-bit lane mask (SGPR pair) out"),
                             F("clamp", 0, 15), F("op", 0, 25, 16), F("encoding", 0, 31, 26), *VOP3_SRCS,
                             F("omod", 1, 28, 27), F("neg", 1, 31, 29)), 2),
        _fmt("VOP3P", 0x1A7, (F("vdst", 0, 7, 0), F("neg_hi", 0, 10, 8), F("opsel", 0, 13, 11),
                              F("opsel_hi2", 0, 14), F("clamp", 0, 15), F("op", 0, 22, 16), F("encoding", 0, 31, 23),
                              *VOP3_SRCS, F("opsel_hi", 1, 28, 27), F("neg", 1, 31, 29, doc="neg_lo")), 2),
        _fmt("VOP3P_MAI", 0x1A7, (F("vdst", 0, 7, 0), F("cbsz", 0, 10, 8), F("abid", 0, 14, 11),
                                  F("acc_cd", 0, 15, doc="vdst and src2 (C) are AccVGPRs"), F("op", 0, 22, 16),
                                  F("encoding", 0, 31, 23), *VOP3_SRCS,
                                  F("acc", 1, 28, 27, doc="bit 0: src0 (A) is an AccVGPR, bit 1: src1 (B)"),
                                  F("blgp", 1, 31, 29, doc="v_mfma_f64: neg of A, B, C")), 2),
        _fmt("DS", 0x36, (F("offset0", 0, 7, 0), F("offset1", 0, 15, 8), F("gds", 0, 16), F("op", 0, 24, 17),
                          F("acc", 0, 25, doc="vdst and data are AccVGPRs"), F("encoding", 0, 31, 26),
                          F("addr", 1, 7, 0), F("data0", 1, 15, 8), F("data1", 1, 23, 16), F("vdst", 1, 31, 24)), 2),
        _fmt("FLAT", 0x37, (F("offset", 0, 12, 0, doc="signed for GLOBAL/SCRATCH, unsigned for FLAT"),
                            F("sve", 0, 13, doc="SCRATCH: the VGPR address is used (gfx940 SVE)"),
                            F("seg", 0, 15, 14), F("sc0", 0, 16, doc="glc: atomics return the old value"),
                            F("nt", 0, 17, hint=True), F("op", 0, 24, 18), F("sc1", 0, 25, hint=True),
                            F("encoding", 0, 31, 26), F("addr", 1, 7, 0), F("data", 1, 15, 8),
                            F("saddr", 1, 22, 16, doc="SGPR (pair) base; 0x7F = off"),
                            F("acc", 1, 23, doc="vdst and data are AccVGPRs"), F("vdst", 1, 31, 24)), 2),
        _fmt("MUBUF", 0x38, (F("offset", 0, 11, 0), F("offen", 0, 12), F("idxen", 0, 13),
                             F("sc0", 0, 14, doc="glc: atomics return the old value"), F("sc1", 0, 15, hint=True),
                             F("lds", 0, 16, doc="load into LDS (no vdata)"), F("nt", 0, 17, hint=True),
                             F("op", 0, 24, 18), F("encoding", 0, 31, 26), F("vaddr", 1, 7, 0), F("vdata", 1, 15, 8),
                             F("srsrc", 1, 20, 16, doc="SGPR quad index / 4"),
                             F("acc", 1, 23, doc="vdata is an AccVGPR"), F("soffset", 1, 31, 24)), 2),
        # graphics families: identified and sized, not tabulated (LLVM rejects them for gfx942)
        _fmt("MTBUF", 0x3A, (F("offset", 0, 11, 0), F("offen", 0, 12), F("idxen", 0, 13), F("glc", 0, 14),
                             F("op", 0, 18, 15), F("dfmt", 0, 22, 19), F("nfmt", 0, 25, 23), F("encoding", 0, 31, 26),
                             F("vaddr", 1, 7, 0), F("vdata", 1, 15, 8), F("srsrc", 1, 20, 16), F("slc", 1, 22),
                             F("tfe", 1, 23), F("soffset", 1, 31, 24)), 2),
        _fmt("MIMG", 0x3C, (F("dmask", 0, 11, 8), F("glc", 0, 13), F("op", 0, 24, 18), F("encoding", 0, 31, 26),
                            F("vaddr", 1, 7, 0), F("vdata", 1, 15, 8), F("srsrc", 1, 20, 16),
                            F("ssamp", 1, 25, 21)), 2),
        _fmt("EXP", 0x31, (F("en", 0, 3, 0), F("target", 0, 9, 4), F("compr", 0, 10), F("done", 0, 11),
                           F("vm", 0, 12), F("encoding", 0, 31, 26), F("vsrc0", 1, 7, 0), F("vsrc1", 1, 15, 8),
                           F("vsrc2", 1, 23, 16), F("vsrc3", 1, 31, 24)), 2),
        _fmt("VINTRP", 0x32, (F("vsrc", 0, 7, 0), F("attr_chan", 0, 9, 8), F("attr", 0, 15, 10), F("op", 0, 17, 16),
                              F("vdst", 0, 25, 18), F("encoding", 0, 31, 26)), 1),
    )},
}
# FLAT, GLOBAL and SCRATCH are one encoding; the family name tells the segment
FORMATS["GLOBAL"] = FORMATS["SCRATCH"] = FORMATS["FLAT"]
FLAT_SEGMENTS = {0: "FLAT", 1: "SCRATCH", 2: "GLOBAL"}

# the extension dwords of VOP1 / VOP2 / VOPC (src0 = 249: SDWA, 250: DPP), decoded into the instruction's fields
SDWA = PacketFormat("SDWA", SDWA_SRC0, (
    F("ext_src0", 0, 7, 0, doc="src0: a VGPR number, or with s0 = 1 an SGPR / inline-constant code"),
    F("dst_sel", 0, 10, 8, doc="0-3 BYTE_0-3, 4/5 WORD_0/1, 6 DWORD"),
    F("dst_unused", 0, 12, 11, doc="0 UNUSED_PAD, 1 UNUSED_SEXT, 2 UNUSED_PRESERVE"), F("clamp", 0, 13),
    F("omod", 0, 15, 14), F("src0_sel", 0, 18, 16), F("src0_sext", 0, 19), F("src0_neg", 0, 20),
    F("src0_abs", 0, 21), F("s0", 0, 23), F("src1_sel", 0, 26, 24), F("src1_sext", 0, 27), F("src1_neg", 0, 28),
    F("src1_abs", 0, 29), F("s1", 0, 31, doc="src1 is the scalar code in vsrc1 (not a VGPR)")), size=1)
SDWA_VOPC = PacketFormat("SDWA_VOPC", SDWA_SRC0, (
    F("ext_src0", 0, 7, 0), F("sdst", 0, 14, 8, doc="sd = 1: the SGPR pair the compare writes"),
    F("sd", 0, 15, doc="0: the result goes to VCC"), F("src0_sel", 0, 18, 16), F("src0_sext", 0, 19),
    F("src0_neg", 0, 20), F("src0_abs", 0, 21), F("s0", 0, 23), F("src1_sel", 0, 26, 24), F("src1_sext", 0, 27),
    F("src1_neg", 0, 28), F("src1_abs", 0, 29), F("s1", 0, 31)), size=1)
DPP = PacketFormat("DPP", DPP_SRC0, (
    F("ext_src0", 0, 7, 0, doc="src0 VGPR number"), F("dpp_ctrl", 0, 16, 8), F("bound_ctrl", 0, 19),
    F("src0_neg", 0, 20), F("src0_abs", 0, 21), F("src1_neg", 0, 22), F("src1_abs", 0, 23),
    F("bank_mask", 0, 27, 24), F("row_mask", 0, 31, 28)), size=1)
SDWA_SELS = ("BYTE_0", "BYTE_1", "BYTE_2", "BYTE_3", "WORD_0", "WORD_1", "DWORD")
SDWA_UNUSED = ("UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE")

# VOP3 opcodes encoded as VOP3B: v_add/sub/subrev_co_u32, v_addc/subb/subbrev_co_u32, v_div_scale_f32/f64,
# v_mad_u64_u32, v_mad_i64_i32
VOP3B_OPS = frozenset({0x119, 0x11A, 0x11B, 0x11C, 0x11D, 0x11E, 0x1E0, 0x1E1, 0x1E8, 0x1E9})
# VOP3P opcodes encoded as VOP3P_MAI (v_mfma_*, v_smfmac_*): 0x3E-0x7F except the unused ones
MAI_OPS = frozenset({0x3E, 0x3F, 0x40, 0x41, 0x42, 0x44, 0x45, 0x48, 0x49, 0x4A, 0x4C, 0x4D, 0x50, 0x51, 0x52,
                     0x56, 0x57, 0x5D, 0x5E, 0x5F, 0x60, 0x61, 0x62, 0x64, 0x66, 0x68, 0x6A, 0x6C, 0x6E, 0x6F,
                     *range(0x70, 0x80)})

# families an executor of compute kernels meets; the others only identify and size (graphics)
COMPUTE_FAMILIES = ("SOP1", "SOP2", "SOPC", "SOPK", "SOPP", "SMEM", "VOP1", "VOP2", "VOPC", "VOP3", "VOP3B",
                    "VOP3P", "VOP3P_MAI", "DS", "FLAT", "GLOBAL", "SCRATCH", "MUBUF")

_TOP6 = {0x30: "SMEM", 0x31: "EXP", 0x32: "VINTRP", 0x34: "VOP3", 0x36: "DS", 0x37: "FLAT", 0x38: "MUBUF",
         0x3A: "MTBUF", 0x3C: "MIMG"}


def identify(w0: int) -> str | None:
    """Format family of an instruction from its first dword (None when no GFX9 family matches).

    Returns "VOP3" for VOP3B too, "VOP3P" for VOP3P_MAI and "FLAT" for GLOBAL/SCRATCH: `family_of` refines them."""
    if w0 >> 30 != 0b11:
        return fm.identify(w0)  # the SALU and VOP1 / VOP2 / VOPC patterns are gfx11's
    if w0 >> 23 == 0x1A7:
        return "VOP3P"
    return _TOP6.get(w0 >> 26)


def family_of(w0: int) -> str | None:
    """`identify` refined: VOP3B and VOP3P_MAI by opcode, GLOBAL/SCRATCH by seg (seg 3 is reserved: None)."""
    fam = identify(w0)
    if fam == "VOP3":
        return "VOP3B" if (w0 >> 16) & 0x3FF in VOP3B_OPS else "VOP3"
    if fam == "VOP3P":
        return "VOP3P_MAI" if (w0 >> 16) & 0x7F in MAI_OPS else "VOP3P"
    if fam == "FLAT":
        return FLAT_SEGMENTS.get((w0 >> 14) & 3)
    return fam


# --- sizes -------------------------------------------------------------------------------------------------

VOP2_MADK_OPS = frozenset({0x17, 0x18, 0x24, 0x25})  # v_fmamk_f32, v_fmaak_f32, v_madmk_f16, v_madak_f16
SOPK_IMM32_OPS = frozenset({0x14})  # s_setreg_imm32_b32
SRC0_EXTENSIONS = {SDWA_SRC0: "sdwa", DPP_SRC0: "dpp"}


def base_dwords(family: str) -> int:
    return FORMATS[family].size


def extra_dword(family: str, words) -> str | None:
    """What follows the fixed dwords: "literal", "sdwa", "dpp" or None. `words` needs the fixed dwords only.

    Only the layouts shared with gfx11 take one (the rules are gfx11's, with the GFX9 opcodes)."""
    if family in fm.SHARED_LAYOUTS:
        return fm.shared_extra_dword(family, words[0], SOPK_IMM32_OPS, VOP2_MADK_OPS, SRC0_EXTENSIONS)
    return None


def instr_dwords(family: str, words) -> int:
    """Total size in dwords, given at least the family's fixed dwords."""
    n = FORMATS[family].size
    return n + 1 if extra_dword(family, words) else n


def extension_fields(family: str, kind: str, word: int) -> dict:
    """The fields an SDWA or DPP dword adds: its own table's fields (`SDWA`, for VOPC `SDWA_VOPC`, `DPP`) and
    the raw dword as "sdwa" / "dpp"."""
    table = DPP if kind == "dpp" else SDWA_VOPC if family == "VOPC" else SDWA
    return {**table.decode([word], check=False), kind: word}


# --- operands an executor reads ------------------------------------------------------------------------------

def src0_code(fields: dict) -> int:
    """The 9-bit operand code of VOP1 / VOP2 / VOPC src0 with an SDWA or DPP extension resolved (DPP: always a
    VGPR; SDWA: a VGPR unless s0 = 1). Without an extension, fields["src0"] itself."""
    if "dpp" in fields:
        return VGPR_BASE + fields["ext_src0"]
    if "sdwa" in fields:
        return fields["ext_src0"] if fields["s0"] else VGPR_BASE + fields["ext_src0"]
    return fields["src0"]


def src1_code(fields: dict) -> int:
    """The 9-bit operand code of VOP2 / VOPC src1 (the vsrc1 VGPR, or with SDWA s1 = 1 the scalar code in vsrc1)."""
    if "sdwa" in fields and fields["s1"]:
        return fields["vsrc1"]
    return VGPR_BASE + fields["vsrc1"]
