"""The shader core: decoding, disassembly and execution of gfx1100 (RDNA3) and gfx942 (CDNA3) machine code.

`decode(code, offset, arch)` -> `Instr`; `decode_program(code, arch)` -> list of `Instr`;
`disassemble(code, arch)` -> LLVM-style listing. Formats: `formats` (gfx11) and `formats_gfx9`; opcode tables
per architecture: `opcodes_gfx11`, `opcodes_gfx942` (`decoder.ARCHES`); printers: `disasm` (gfx11 and shared helpers), `disasm_gfx9`. Execution: `core.ShaderCore`
(scheduler), `compile` (instruction -> closure: `operands`, `valu`, `salu`, `memops`), `alu` (semantics),
`waves` (state), `lanemem` (checked per-lane memory), `gfx9_names` (GFX9 mnemonics -> gfx11 semantics).
"""
from .decoder import ARCHES, Instr, decode, decode_program, sext
from .disasm import disassemble, format_instr

__all__ = ["ARCHES", "Instr", "decode", "decode_program", "disassemble", "format_instr", "sext"]
