"""The shader core's front end: gfx11 (RDNA3) instruction decoding and disassembly.

`decode(code, offset, arch)` -> `Instr`; `decode_program(code, arch)` -> list of `Instr`;
`disassemble(code, arch)` -> LLVM-style listing. Formats live in `formats`, opcode tables per architecture in
`opcodes_gfx11` (gfx942 / CDNA3 comes later: `decoder.ARCHES`).
"""
from .decoder import ARCHES, Instr, decode, decode_program, sext
from .disasm import disassemble, format_instr

__all__ = ["ARCHES", "Instr", "decode", "decode_program", "disassemble", "format_instr", "sext"]
