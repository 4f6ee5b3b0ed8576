"""Instruction decoder: machine code bytes -> `Instr` records.

`decode(code, offset, arch)` decodes the one instruction at a byte offset; `decode_program(code, arch)` walks
a whole code blob (a kernel's .text, s_code_end padding included) from offset 0 to its end.

Conventions the executor relies on (see also the module docs of formats and opcodes_gfx11):
* `Instr.fields` holds the raw field values of the family's table (`formats.FORMATS[family]`), unsigned as
  stored: sign-extend SOPP/SOPK simm16, SMEM offset (21 bits) and GLOBAL/SCRATCH offset (13 bits) with `sext`.
* `Instr.literal` is the trailing 32-bit literal (also the K of v_fmamk/v_fmaak and the shared VOPD literal).
* A DPP instruction (src0 = 250 / 233 / 234) carries its control dword as `fields["dpp"]`.
* VOPD: `op` is opx << 5 | opy, `mnemonic` is "v_dual_X::v_dual_Y", `fields["vdsty"]` is the full VGPR number
  (the encoding stores vdstY >> 1; bit 0 is the inverse of vdstX's bit 0).
* An opcode missing from the tables decodes with `mnemonic` None (family, size and fields are still right);
  a word no family matches raises DecodeError naming the word and offset.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Callable

from ..errors import DecodeError
from . import formats as fm
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

    @property
    def shape(self) -> str | None:
        """Operand shape string of the opcode table (operand widths), None when unknown."""
        if self.family == "VOPD":
            return None
        entry = ops11.lookup(self.family, self.op)
        return None if entry is None else entry[1]

    @property
    def next_pc(self) -> int:
        return self.pc + self.size

    def __str__(self) -> str:
        from .disasm import format_instr
        return format_instr(self)


def sext(value: int, bits: int) -> int:
    """Sign-extend a `bits`-wide field value."""
    sign = 1 << (bits - 1)
    return (value & (sign - 1)) - (value & sign)


def _dword(code, offset: int, what: str, start: int) -> int:
    if offset + 4 > len(code):
        raise DecodeError(f"truncated instruction at offset 0x{start:x}: {what} needs bytes "
                          f"0x{offset:x}..0x{offset + 3:x} but the code ends at 0x{len(code):x}")
    return struct.unpack_from("<I", code, offset)[0]


@dataclass(frozen=True)
class Arch:
    """One instruction set: how to decode and what the opcode tables are."""

    name: str
    decode: Callable[..., Instr]
    tables: dict


def _decode_gfx11(code, offset: int) -> Instr:
    w0 = _dword(code, offset, "the first dword", offset)
    family = fm.family_of(w0)
    if family is None:
        raise DecodeError(f"gfx11: no instruction format matches word 0x{w0:08x} at offset 0x{offset:x}")
    fmt = fm.FORMATS[family]
    words = [w0]
    for i in range(1, fmt.size):
        words.append(_dword(code, offset + 4 * i, f"{family} dword {i}", offset))
    extra = fm.extra_dword(family, words)
    if extra:
        words.append(_dword(code, offset + 4 * len(words), f"the {family} {extra} dword", offset))
    fields = fmt.decode(words, check=False)
    literal = None
    if extra == "literal":
        literal = words[-1]
    elif extra == "dpp":
        fields["dpp"] = words[-1]
    elif extra == "nsa":
        fields["nsa_addrs"] = words[-1]
    if family == "VOPD":
        opx, opy = fields["opx"], fields["opy"]
        op = opx << 5 | opy
        fields["vdsty"] = fields["vdsty"] << 1 | (~fields["vdstx"] & 1)
        x, y = ops11.VOPD.get(opx), ops11.VOPD.get(opy)
        mnemonic = f"{x[0]}::{y[0]}" if x and y and opx <= ops11.VOPD_X_MAX else None
    else:
        op = fields.get("op", 0)
        entry = ops11.lookup(family, op)
        mnemonic = entry[0] if entry else None
    return Instr(offset, 4 * len(words), tuple(words), family, op, mnemonic, fields, literal)


def _decode_gfx942(code, offset: int) -> Instr:
    """gfx942 (CDNA3 / GFX9 encodings, ISA_FACTS 5.3): decoder_gfx9, imported on first use (it builds on Instr)."""
    from .decoder_gfx9 import decode_gfx942
    return decode_gfx942(code, offset)


ARCHES: dict[str, Arch] = {
    "gfx1100": Arch("gfx1100", _decode_gfx11, ops11.TABLES),
    "gfx942": Arch("gfx942", _decode_gfx942, ops942.TABLES),
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
