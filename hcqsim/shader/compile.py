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

from collections import OrderedDict
from dataclasses import replace

from . import coverage
from .cached import CACHE_CONTROL, compile_control, model_of
from .decoder import Instr
from .gfx9_names import gfx11_name
from .disasm import format_instr
from .matrix import acc_operands, compile_matrix
from .memops import compile_ds, compile_flat, compile_mubuf, compile_smem
from .operands import Context, Run, ShaderFault, ShaderUnsupported
from .salu import compile_sop1, compile_sop2, compile_sopc, compile_sopk, compile_sopp
from .packed import compile_vop3p
from .valu import compile_valu, compile_vopd

# ---------------------------------------------------------------------------------------------------

__all__ = ["compile_instr", "COMPILERS", "Context", "InstructionCache", "Run", "ShaderFault", "ShaderUnsupported"]

COMPILERS = {
    "SOP1": compile_sop1, "SOP2": compile_sop2, "SOPC": compile_sopc, "SOPK": compile_sopk, "SOPP": compile_sopp,
    "SMEM": compile_smem, "VOP1": compile_valu, "VOP2": compile_valu, "VOPC": compile_valu, "VOP3": compile_valu,
    "VOP3SD": compile_valu, "VOP3P": compile_vop3p, "VOPD": compile_vopd, "DS": compile_ds, "FLAT": compile_flat, "GLOBAL": compile_flat,
    "SCRATCH": compile_flat, "MUBUF": compile_mubuf, "VOP3P_MAI": compile_matrix,
}


def compile_instr(instr: Instr, ctx: Context) -> Run:
    if instr.mnemonic is None:
        raise ctx.unsupported(instr, "unknown opcode")
    named = (instr.family, instr.mnemonic)  # the architecture's own names, for the coverage record
    if instr.mnemonic in CACHE_CONTROL and model_of(ctx) is not None:  # acts on the modelled caches
        run = compile_control(instr, ctx, instr.mnemonic)
        coverage.note(ctx.arch, *named)
        run.text = format_instr(instr)
        return run
    if ctx.arch == "gfx942":
        instr = acc_operands(gfx9_as_gfx11(instr, ctx), ctx)
    compiler = COMPILERS.get(instr.family)
    if compiler is None:
        raise ctx.unsupported(instr, f"the {instr.family} format is not executed by the compute shader core")
    run = compiler(instr, ctx)
    coverage.note(ctx.arch, *named)
    run.text = format_instr(instr)  # for fault reports
    return run


def gfx9_as_gfx11(instr: Instr, ctx: Context) -> Instr:
    """A GFX9 instruction renamed and re-fielded into the gfx11 vocabulary the compilers speak: the same
    operation, family names (VOP3B -> VOP3SD), SMEM offsets, FLAT return bit and ds_cmpst operand order."""
    f = dict(instr.fields)
    family = {"VOP3B": "VOP3SD"}.get(instr.family, instr.family)
    name = gfx11_name(instr.mnemonic)
    if family == "SMEM":  # GFX9: IMM selects an immediate offset; SOE adds SGPR soffset; else offset is an SGPR
        if f["imm"]:
            f["soffset"] = f["soffset"] if f["soe"] else ctx.null
        else:
            f["soffset"], f["offset"] = f["offset"] & 0x7F, 0
    if family in ("FLAT", "GLOBAL", "SCRATCH"):
        f["glc"] = f.get("sc0", 0)  # gfx940: SC0 on an atomic asks for the pre-op value
    if name.startswith("ds_cmpst_"):  # GFX9 ds_cmpst: data0 = compare, data1 = new (gfx11 cmpstore swaps them)
        name = name.replace("ds_cmpst_", "ds_cmpstore_")
        f["data0"], f["data1"] = f["data1"], f["data0"]
    return replace(instr, family=family, mnemonic=name, fields=f)


class InstructionCache:
    """Compiled instructions by key (the core's (pc, code, lanes, vgprs, accum_offset)), least recently used first
    out past `capacity` entries: memory stays bounded however many distinct kernels a process runs, and an evicted
    instruction is only compiled again (a closure depends on nothing but its key)."""

    CAPACITY = 32768  # entries (the core keys each instruction twice): the hot instructions of any real kernel fit

    def __init__(self, capacity: int | None = None):
        self.capacity = capacity or self.CAPACITY
        self._runs: OrderedDict = OrderedDict()
        self.evictions = 0

    def get(self, key) -> Run | None:
        run = self._runs.get(key)
        if run is not None:
            self._runs.move_to_end(key)
        return run

    def __setitem__(self, key, run: Run) -> None:
        self._runs[key] = run
        self._runs.move_to_end(key)
        while len(self._runs) > self.capacity:
            self._runs.popitem(last=False)
            self.evictions += 1

    def __len__(self) -> int:
        return len(self._runs)

    def __contains__(self, key) -> bool:
        return key in self._runs
