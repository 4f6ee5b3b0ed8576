"""Matrix instructions: gfx11 WMMA (VOP3P v_wmma_*), gfx942 MFMA (VOP3P_MAI v_mfma_*) and the AccVGPR
moves (v_accvgpr_read/write/mov_b32).

`MATRIX_OPS` names the mnemonics this module executes; `compile_matrix(instr, ctx)` compiles one.
"""
from __future__ import annotations

from .decoder import Instr
from .operands import Context, Run

MATRIX_OPS: frozenset[str] = frozenset()


def is_matrix(name: str) -> bool:
    """True for every matrix-family mnemonic, executed here or not (so none falls through to packed math)."""
    return name.startswith(("v_wmma_", "v_mfma_", "v_smfmac_", "v_accvgpr_"))


def compile_matrix(instr: Instr, ctx: Context) -> Run:
    if instr.mnemonic not in MATRIX_OPS:
        raise ctx.unsupported(instr, "matrix instruction not implemented by the shader core")
    raise AssertionError("unreachable until MATRIX_OPS is filled")
