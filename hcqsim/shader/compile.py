"""Decoded instructions -> closures that execute them for a selection of waves at once.

`compile_instr(instr, ctx)` returns `run(W, w)`: W is the `Waves` state, w a selection of waves that all
sit at this instruction. The closure reads operands for all those waves (arrays [waves, lanes] or
[waves]), computes, writes under EXEC and sets the waves' next PC. Operand decoding (register, inline
constant, literal, modifiers) happens once, at compile time (`operands`); the families live in `valu`,
`salu` and `memops`.

An instruction the core does not implement raises `ShaderUnsupported` at compile time, naming the
instruction word, its format, mnemonic and PC; nothing runs with a wrong answer.
"""
from __future__ import annotations

from .decoder import Instr
from .disasm import format_instr
from .memops import compile_ds, compile_flat, compile_mubuf, compile_smem
from .operands import Context, Run, ShaderFault, ShaderUnsupported
from .salu import compile_sop1, compile_sop2, compile_sopc, compile_sopk, compile_sopp
from .valu import compile_valu, compile_vop3p, compile_vopd

# ---------------------------------------------------------------------------------------------------

__all__ = ["compile_instr", "COMPILERS", "Context", "Run", "ShaderFault", "ShaderUnsupported"]

COMPILERS = {
    "SOP1": compile_sop1, "SOP2": compile_sop2, "SOPC": compile_sopc, "SOPK": compile_sopk, "SOPP": compile_sopp,
    "SMEM": compile_smem, "VOP1": compile_valu, "VOP2": compile_valu, "VOPC": compile_valu, "VOP3": compile_valu,
    "VOP3SD": compile_valu, "VOP3P": compile_vop3p, "VOPD": compile_vopd, "DS": compile_ds, "FLAT": compile_flat, "GLOBAL": compile_flat,
    "SCRATCH": compile_flat, "MUBUF": compile_mubuf,
}


def compile_instr(instr: Instr, ctx: Context) -> Run:
    if instr.mnemonic is None:
        raise ctx.unsupported(instr, "unknown opcode")
    compiler = COMPILERS.get(instr.family)
    if compiler is None:
        raise ctx.unsupported(instr, f"the {instr.family} format is not executed by the compute shader core")
    run = compiler(instr, ctx)
    run.text = format_instr(instr)  # for fault reports
    return run
