"""Instruction decoder: machine code bytes -> `Instr` records, for every architecture in `ARCHES`.

`decode(code, offset, arch)` decodes the one instruction at a byte offset; `decode_program(code, arch)` walks
a whole code blob (a kernel's .text, s_code_end padding included) from offset 0 to its end.

One decode skeleton (`decode_instr`) serves both instruction sets; an `Arch` describes one: its formats module
(`formats` for gfx1100, `formats_gfx9` for gfx942: FORMATS, the identification `family_of`, `extra_dword`,
`extension_fields`), its opcode tables (`opcodes_gfx11`, `opcodes_gfx942`), its `Instr` class and how the opcode
and mnemonic follow from the fields (gfx11's VOPD has two).

Conventions the executor relies on (see also the module docs of the formats and opcode modules):
* `Instr.fields` holds the raw field values of the family's table (`FORMATS[family]`), unsigned as stored:
  sign-extend SOPP/SOPK simm16, SMEM offset (21 bits) and GLOBAL/SCRATCH offset (13 bits) with `sext`.
* `Instr.literal` is the trailing 32-bit literal (also the K of v_fmamk/v_fmaak, v_madmk/v_madak on gfx942, and
  the shared VOPD literal). gfx942's VOP3 has none.
* An opcode missing from the tables decodes with `mnemonic` None (family, size and fields are still right);
  a word no family matches raises DecodeError naming the word and offset.

gfx1100:
* A DPP instruction (src0 = 250 / 233 / 234) carries its control dword as `fields["dpp"]`.
* VOPD: `op` is opx << 5 | opy, `mnemonic` is "v_dual_X::v_dual_Y", `fields["vdsty"]` is the full VGPR number
  (the encoding stores vdstY >> 1; bit 0 is the inverse of vdstX's bit 0).

gfx942 (`InstrGfx9`; formats_gfx9 documents the operand space):
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
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from types import ModuleType
from typing import Callable

from ..errors import DecodeError
from . import formats as fm
from . import formats_gfx9 as f9
from . import opcodes_gfx11 as ops11
from . import opcodes_gfx942 as ops942


@dataclass
class Instr:
    pc: int  # byte offset of the instruction in the decoded code
    size: int  # bytes, literal / DPP dword included
    words: tuple[int, ...]  # all dwords of the instruction
    family: str  # "SOP1", ..., "VOP3SD", "VOPD", "GLOBAL", ...
    op: int
    mnemonic: str | None  # LLVM base name (no _e32/_e64), None for an unknown opcode
    fields: dict = field(default_factory=dict)
    literal: int | None = None

    arch = "gfx1100"  # the instruction set (a class attribute: `InstrGfx9` says "gfx942")

    @property
    def shape(self) -> str | None:
        """Operand shape string of the opcode table (operand widths), None when unknown."""
        if self.family == "VOPD":
            return None
        entry = ARCHES[self.arch].opcodes.lookup(self.family, self.op)
        return None if entry is None else entry[1]

    @property
    def next_pc(self) -> int:
        return self.pc + self.size

    def __str__(self) -> str:
        from .disasm import format_instr
        return format_instr(self)


class InstrGfx9(Instr):
    """A decoded gfx942 instruction: the `Instr` record, with the gfx942 opcode tables behind `shape` and the
    gfx942 printer behind `str`."""

    arch = "gfx942"


def sext(value: int, bits: int) -> int:
    """Sign-extend a `bits`-wide field value."""
    sign = 1 << (bits - 1)
    return (value & (sign - 1)) - (value & sign)


def _dword(code, offset: int, what: str, start: int) -> int:
    if offset + 4 > len(code):
        raise DecodeError(f"truncated instruction at offset 0x{start:x}: {what} needs bytes "
                          f"0x{offset:x}..0x{offset + 3:x} but the code ends at 0x{len(code):x}")
    return struct.unpack_from("<I", code, offset)[0]


def _table_opcode(opcodes: ModuleType, family: str, fields: dict) -> tuple[int, str | None]:
    """(op, mnemonic) of an instruction with one opcode field: the table's entry."""
    op = fields.get("op", 0)
    entry = opcodes.lookup(family, op)
    return op, entry[0] if entry else None


def _gfx11_opcode(opcodes: ModuleType, family: str, fields: dict) -> tuple[int, str | None]:
    """(op, mnemonic) on gfx11: VOPD pairs two opcodes (and stores vdstY halved, made whole here)."""
    if family != "VOPD":
        return _table_opcode(opcodes, family, fields)
    opx, opy = fields["opx"], fields["opy"]
    fields["vdsty"] = fields["vdsty"] << 1 | (~fields["vdstx"] & 1)
    x, y = opcodes.VOPD.get(opx), opcodes.VOPD.get(opy)
    return opx << 5 | opy, f"{x[0]}::{y[0]}" if x and y and opx <= opcodes.VOPD_X_MAX else None


@dataclass(frozen=True)
class Arch:
    """One instruction set, as the decode skeleton needs it."""

    name: str  # "gfx1100", "gfx942"
    isa: str  # what decode errors call it
    formats: ModuleType  # FORMATS, family_of (identification), extra_dword, extension_fields
    opcodes: ModuleType  # TABLES, lookup
    instr: type  # the Instr class of its instructions
    opcode: Callable[[ModuleType, str, dict], tuple[int, str | None]] = _table_opcode

    @property
    def tables(self) -> dict:
        return self.opcodes.TABLES

    def decode(self, code, offset: int) -> Instr:
        return decode_instr(self, code, offset)


def decode_instr(arch: Arch, code, offset: int) -> Instr:
    """The instruction at byte `offset`: the fixed dwords of its family, the extra dword (literal or extension)
    the fixed dwords announce, the family's fields, the opcode's mnemonic."""
    formats = arch.formats
    w0 = _dword(code, offset, "the first dword", offset)
    family = formats.family_of(w0)
    if family is None:
        raise DecodeError(f"{arch.isa}: no instruction format matches word 0x{w0:08x} at offset 0x{offset:x}")
    fmt = formats.FORMATS[family]
    words = [w0]
    for i in range(1, fmt.size):
        words.append(_dword(code, offset + 4 * i, f"{family} dword {i}", offset))
    extra = formats.extra_dword(family, words)
    if extra:
        words.append(_dword(code, offset + 4 * len(words), f"the {family} {extra} dword", offset))
    fields = fmt.decode(words, check=False)
    literal = None
    if extra == "literal":
        literal = words[-1]
    elif extra:
        fields.update(formats.extension_fields(family, extra, words[-1]))
    op, mnemonic = arch.opcode(arch.opcodes, family, fields)
    return arch.instr(offset, 4 * len(words), tuple(words), family, op, mnemonic, fields, literal)


ARCHES: dict[str, Arch] = {
    "gfx1100": Arch("gfx1100", "gfx11", fm, ops11, Instr, _gfx11_opcode),
    "gfx942": Arch("gfx942", "gfx942", f9, ops942, InstrGfx9),
}


def get_arch(arch: str) -> Arch:
    try:
        return ARCHES[arch]
    except KeyError:
        raise ValueError(f"unknown shader architecture {arch!r}; known: {sorted(ARCHES)}") from None


def decode(code: bytes, offset: int = 0, arch: str = "gfx1100") -> Instr:
    """Decode the instruction at byte `offset` of `code`."""
    if offset % 4:
        raise DecodeError(f"instruction offset 0x{offset:x} is not dword aligned")
    return get_arch(arch).decode(code, offset)


def decode_program(code: bytes, arch: str = "gfx1100") -> list[Instr]:
    """Decode every instruction of `code` from offset 0 to its end (a trailing partial dword is an error)."""
    dec = get_arch(arch).decode
    out, offset, end = [], 0, len(code)
    if end % 4:
        raise DecodeError(f"code size {end} is not a multiple of 4 bytes")
    while offset < end:
        ins = dec(code, offset)
        out.append(ins)
        offset += ins.size
    return out
