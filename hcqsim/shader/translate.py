"""The translating execution path (issue 28, first slice): runs of straight, register-only instructions (gfx1100
and gfx942), optionally ending in a branch, turned into native code by LLVM (llvmlite's MCJIT) and run for every
wave of a batch in one call.

Off by default: `HCQSIM_SHADER=translate` in the environment or `EmulatedGPU(shader="translate")` turns it on.
The interpreter (compile.py's closures) stays the reference and the fallback: a block is only ever formed from
instructions this module covers exactly, and everything else runs on the interpreter. docs/translator.md has the
design: how a block is formed, how its steps keep budgets, stats and the runaway bound, what falls back, how
compiled code is cached, and which parts of an instruction's meaning are shared with the interpreter.

A block is a function `void f(i32* v, i32* s, i8* scc, i64* pc, i64 n)` over the `Waves` buffers: `v` the VGPR file
([vgprs, waves, lanes] in memory), `s` the scalar operand space ([waves, 128]), `scc` one byte per wave. For each
wave in order it runs the block's instructions in program order, then steps the wave's PC (`pc`, one i64 per
wave); a vector instruction loops over the lanes and writes only the lanes whose EXEC bit is on. Waves of a
straight, register-only run are independent, so running them wave-major gives the same registers as the
interpreter's instruction-major order.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import threading
import time

from . import formats as fm
from .alu import VALU
from .decoder import decode, sext
from .operands import _const_bits, operand_shape
from .salu import _NOP_SOPP
from .valu import _sources as source_codes  # the interpreter's operand order: one definition

MODES = ("interpret", "translate")


def mode_from_environment() -> str:
    m = os.environ.get("HCQSIM_SHADER", "interpret") or "interpret"
    if m not in MODES:
        raise ValueError(f"HCQSIM_SHADER={m!r}: expected one of {MODES}")
    return m


MAX_BLOCK = 256  # instructions per block (a longer run is several blocks)
EXEC_REGS = (fm.EXEC_LO, fm.EXEC_HI)

# -- what the translator covers: mnemonic -> the operation, as IR over typed 32-bit operands -------------------
# Operand types (and their order, which the NaN rule follows) come from alu.VALU, the interpreter's table; the
# operation itself is written here a second time, as LLVM IR (see docs/translator.md, "the seam").

def _b(e, opc: str, a: str, b, t: str = "i32") -> str:
    """One binary IR instruction: `opc t a, b`."""
    return e.op(f"{opc} {t} {a}, {b}")


def _not(e, a: str, t: str = "i32") -> str:
    return _b(e, "xor", a, -1, t)


def _shamt(e, s: str) -> str:
    return _b(e, "and", s, 31)


V_INT = {  # name -> IR builder over i32 operands (e: the emitter)
    "v_mov_b32": lambda e, a: a,
    "v_add_nc_u32": lambda e, a, b: _b(e, "add", a, b),
    "v_sub_nc_u32": lambda e, a, b: _b(e, "sub", a, b),
    "v_subrev_nc_u32": lambda e, a, b: _b(e, "sub", b, a),
    "v_mul_lo_u32": lambda e, a, b: _b(e, "mul", a, b),
    "v_and_b32": lambda e, a, b: _b(e, "and", a, b),
    "v_or_b32": lambda e, a, b: _b(e, "or", a, b),
    "v_xor_b32": lambda e, a, b: _b(e, "xor", a, b),
    "v_not_b32": lambda e, a: _not(e, a),
    "v_lshlrev_b32": lambda e, s, x: _b(e, "shl", x, _shamt(e, s)),
    "v_lshrrev_b32": lambda e, s, x: _b(e, "lshr", x, _shamt(e, s)),
    "v_ashrrev_i32": lambda e, s, x: _b(e, "ashr", x, _shamt(e, s)),
    "v_min_u32": lambda e, a, b: e.sel(_b(e, "icmp ult", a, b), a, b),
    "v_max_u32": lambda e, a, b: e.sel(_b(e, "icmp ugt", a, b), a, b),
    "v_min_i32": lambda e, a, b: e.sel(_b(e, "icmp slt", a, b), a, b),
    "v_max_i32": lambda e, a, b: e.sel(_b(e, "icmp sgt", a, b), a, b),
    "v_bfe_u32": lambda e, x, o, w: e.bfe_u32(x, o, w),
    "v_bfi_b32": lambda e, m, a, b: _b(e, "or", _b(e, "and", m, a), _b(e, "and", _not(e, m), b)),
    "v_add3_u32": lambda e, a, b, c: _b(e, "add", _b(e, "add", a, b), c),
    "v_lshl_add_u32": lambda e, x, s, c: _b(e, "add", _b(e, "shl", x, _shamt(e, s)), c),
    "v_lshl_or_b32": lambda e, x, s, c: _b(e, "or", _b(e, "shl", x, _shamt(e, s)), c),
    "v_and_or_b32": lambda e, a, b, c: _b(e, "or", _b(e, "and", a, b), c),
    "v_or3_b32": lambda e, a, b, c: _b(e, "or", _b(e, "or", a, b), c),
    "v_xad_u32": lambda e, a, b, c: _b(e, "add", _b(e, "xor", a, b), c),
    "v_add_lshl_u32": lambda e, a, b, s: _b(e, "shl", _b(e, "add", a, b), _shamt(e, s)),
    "v_mul_hi_u32": lambda e, a, b: e.mul_hi(a, b, "zext"),
    "v_mul_hi_i32": lambda e, a, b: e.mul_hi(a, b, "sext"),
    "v_mad_u32_u24": lambda e, a, b, c: _b(e, "add", _b(e, "mul", _b(e, "and", a, 0xFFFFFF), _b(e, "and", b, 0xFFFFFF)),
                                           c),
    "v_mul_u32_u24": lambda e, a, b: _b(e, "mul", _b(e, "and", a, 0xFFFFFF), _b(e, "and", b, 0xFFFFFF)),
    "v_cndmask_b32": None,  # special: the lane's mask bit picks src1
    # conversions (alu: numpy's astype rounds to nearest even; _cvt_f32_to_int truncates, saturates, NaN -> 0)
    "v_cvt_f32_u32": lambda e, a: e.op(f"bitcast float {e.op(f'uitofp i32 {a} to float')} to i32"),
    "v_cvt_f32_i32": lambda e, a: e.op(f"bitcast float {e.op(f'sitofp i32 {a} to float')} to i32"),
    "v_cvt_u32_f32": lambda e, a: e.op(f"call i32 @llvm.fptoui.sat.i32.f32(float {e.op(f'bitcast i32 {a} to float')})"),
    "v_cvt_i32_f32": lambda e, a: e.op(f"call i32 @llvm.fptosi.sat.i32.f32(float {e.op(f'bitcast i32 {a} to float')})"),
}
V_FLOAT = {  # name -> IR builder over float operands; the NaN rule is applied after it
    "v_add_f32": lambda e, a, b: _b(e, "fadd", a, b, "float"),
    "v_sub_f32": lambda e, a, b: _b(e, "fsub", a, b, "float"),
    "v_subrev_f32": lambda e, a, b: _b(e, "fsub", b, a, "float"),
    "v_mul_f32": lambda e, a, b: _b(e, "fmul", a, b, "float"),
    "v_fma_f32": lambda e, a, b, c: e.fma(a, b, c),
    "v_fmac_f32": lambda e, a, b, c: e.fma(a, b, c),
    "v_fmaak_f32": lambda e, a, b, k: e.fma(a, b, k),
    "v_fmamk_f32": lambda e, a, k, b: e.fma(a, k, b),
}
_ACCUMULATOR = {"v_fmac_f32": 2}
_LITERAL_K = {"v_fmaak_f32": 2, "v_fmamk_f32": 1}
V_CARRY = {  # name -> (subtract, reads a carry in, swaps the operands): alu.CARRY's shape
    "v_add_co_u32": (False, False, False), "v_add_co_ci_u32": (False, True, False),
    "v_sub_co_u32": (True, False, False), "v_sub_co_ci_u32": (True, True, False),
    "v_subrev_co_u32": (True, False, True), "v_subrev_co_ci_u32": (True, True, True),
}
# 64-bit VALU: name -> IR builder over (i32 / i64 operands as alu.VALU types them) -> i64, written to a VGPR pair
V_WIDE = {
    "v_lshlrev_b64": lambda e, s, x: _b(e, "shl", x, _shamt64(e, s), "i64"),
    "v_lshrrev_b64": lambda e, s, x: _b(e, "lshr", x, _shamt64(e, s), "i64"),
    "v_ashrrev_i64": lambda e, s, x: _b(e, "ashr", x, _shamt64(e, s), "i64"),
    "v_lshl_add_u64": lambda e, x, s, c: _b(e, "add", _b(e, "shl", x, _b(e, "and", e.zext64(s), 7, "i64"), "i64"), c,
                                            "i64"),
    "v_mov_b64": lambda e, a: a,
}
MAD64 = {"v_mad_u64_u32": "zext", "v_mad_i64_i32": "sext"}  # how the 32-bit factors widen
# VOPD halves covered (gfx1100): v_dual_X is v_X's operation on X's VOP2 operands
VOPD_HALVES = ("v_fmac_f32", "v_fmaak_f32", "v_fmamk_f32", "v_mul_f32", "v_add_f32", "v_sub_f32", "v_subrev_f32",
               "v_mov_b32", "v_cndmask_b32", "v_add_nc_u32", "v_lshlrev_b32", "v_and_b32")
# f32 compares (alu._CMP on float32: ordered unless the name negates, NaN != NaN) -> fcmp predicates
F_CMP = {"f": "false", "lt": "olt", "eq": "oeq", "le": "ole", "gt": "ogt", "lg": "one", "ge": "oge", "o": "ord",
         "u": "uno", "nge": "ult", "nlg": "ueq", "ngt": "ule", "nle": "ugt", "neq": "une", "nlt": "uge", "t": "true",
         "tru": "true", "ne": "une"}
V_CMP = {"eq": "eq", "ne": "ne", "lg": "ne", "lt": "{s}lt", "le": "{s}le", "gt": "{s}gt", "ge": "{s}ge"}

S_SCC_NZ, S_SCC_KEEP = "nz", "keep"


def WIDTH64(typ: str) -> bool:
    return typ.endswith("64")


def _shamt64(e, b: str) -> str:
    return _b(e, "and", e.zext64(b), 63, "i64")


def _carry_out_shl_add(k: int):
    def scc(e, a, b, r):
        wide = _b(e, "add", _b(e, "shl", e.zext64(a), k, "i64"), e.zext64(b), "i64")
        return _b(e, "icmp ugt", wide, 0xFFFFFFFF, "i64")
    return scc


S2 = {  # name -> (IR builder (e, a, b, t) -> result, SCC rule: "nz", "keep", or a builder (e, a, b, r) -> i1)
    "s_and_b32": (lambda e, a, b, t: _b(e, "and", a, b, t), S_SCC_NZ),
    "s_or_b32": (lambda e, a, b, t: _b(e, "or", a, b, t), S_SCC_NZ),
    "s_xor_b32": (lambda e, a, b, t: _b(e, "xor", a, b, t), S_SCC_NZ),
    "s_and_not1_b32": (lambda e, a, b, t: _b(e, "and", a, _not(e, b, t), t), S_SCC_NZ),
    "s_or_not1_b32": (lambda e, a, b, t: _b(e, "or", a, _not(e, b, t), t), S_SCC_NZ),
    "s_nand_b32": (lambda e, a, b, t: _not(e, _b(e, "and", a, b, t), t), S_SCC_NZ),
    "s_nor_b32": (lambda e, a, b, t: _not(e, _b(e, "or", a, b, t), t), S_SCC_NZ),
    "s_xnor_b32": (lambda e, a, b, t: _not(e, _b(e, "xor", a, b, t), t), S_SCC_NZ),
    "s_lshl_b32": (lambda e, a, b, t: _b(e, "shl", a, _shamt(e, b)), S_SCC_NZ),
    "s_lshr_b32": (lambda e, a, b, t: _b(e, "lshr", a, _shamt(e, b)), S_SCC_NZ),
    "s_ashr_i32": (lambda e, a, b, t: _b(e, "ashr", a, _shamt(e, b)), S_SCC_NZ),
    "s_lshl_b64": (lambda e, a, b, t: _b(e, "shl", a, _shamt64(e, b), "i64"), S_SCC_NZ),
    "s_lshr_b64": (lambda e, a, b, t: _b(e, "lshr", a, _shamt64(e, b), "i64"), S_SCC_NZ),
    "s_add_u32": (lambda e, a, b, t: _b(e, "add", a, b), lambda e, a, b, r: _b(e, "icmp ult", r, a)),
    "s_sub_u32": (lambda e, a, b, t: _b(e, "sub", a, b), lambda e, a, b, r: _b(e, "icmp ugt", b, a)),
    "s_add_i32": (lambda e, a, b, t: _b(e, "add", a, b), lambda e, a, b, r: e.overflow(a, b, r, False)),
    "s_sub_i32": (lambda e, a, b, t: _b(e, "sub", a, b), lambda e, a, b, r: e.overflow(a, b, r, True)),
    "s_mul_i32": (lambda e, a, b, t: _b(e, "mul", a, b), S_SCC_KEEP),
    "s_min_u32": (lambda e, a, b, t: e.sel(_b(e, "icmp ult", a, b), a, b), lambda e, a, b, r: _b(e, "icmp ult", a, b)),
    "s_max_u32": (lambda e, a, b, t: e.sel(_b(e, "icmp ugt", a, b), a, b), lambda e, a, b, r: _b(e, "icmp ugt", a, b)),
    "s_min_i32": (lambda e, a, b, t: e.sel(_b(e, "icmp slt", a, b), a, b), lambda e, a, b, r: _b(e, "icmp slt", a, b)),
    "s_max_i32": (lambda e, a, b, t: e.sel(_b(e, "icmp sgt", a, b), a, b), lambda e, a, b, r: _b(e, "icmp sgt", a, b)),
    "s_pack_ll_b32_b16": (lambda e, a, b, t: _b(e, "or", _b(e, "and", a, 0xFFFF), _b(e, "shl", b, 16)), S_SCC_KEEP),
    "s_pack_lh_b32_b16": (lambda e, a, b, t: _b(e, "or", _b(e, "and", a, 0xFFFF), _b(e, "and", b, -65536)),
                          S_SCC_KEEP),
    "s_pack_hh_b32_b16": (lambda e, a, b, t: _b(e, "or", _b(e, "lshr", a, 16), _b(e, "and", b, -65536)), S_SCC_KEEP),
    "s_pack_hl_b32_b16": (lambda e, a, b, t: _b(e, "or", _b(e, "lshr", a, 16), _b(e, "shl", b, 16)), S_SCC_KEEP),
}
for _k in ("and", "or", "xor", "and_not1", "or_not1", "nand", "nor", "xnor"):
    S2[f"s_{_k}_b64"] = S2[f"s_{_k}_b32"]
for _k in (1, 2, 3, 4):
    S2[f"s_lshl{_k}_add_u32"] = (lambda e, a, b, t, k=_k: _b(e, "add", _b(e, "shl", a, k), b), _carry_out_shl_add(_k))
S1 = {
    "s_mov_b32": (lambda e, a, t: a, S_SCC_KEEP), "s_mov_b64": (lambda e, a, t: a, S_SCC_KEEP),
    "s_not_b32": (lambda e, a, t: _not(e, a, t), S_SCC_NZ),
    "s_not_b64": (lambda e, a, t: _not(e, a, t), S_SCC_NZ),
}
SAVEEXEC = {  # alu.SAVEEXEC: (source, old EXEC) -> new EXEC
    "and": lambda e, s, x, t: _b(e, "and", s, x, t), "or": lambda e, s, x, t: _b(e, "or", s, x, t),
    "xor": lambda e, s, x, t: _b(e, "xor", s, x, t), "nand": lambda e, s, x, t: _not(e, _b(e, "and", s, x, t), t),
    "nor": lambda e, s, x, t: _not(e, _b(e, "or", s, x, t), t),
    "xnor": lambda e, s, x, t: _not(e, _b(e, "xor", s, x, t), t),
    "and_not0": lambda e, s, x, t: _b(e, "and", _not(e, s, t), x, t),
    "or_not0": lambda e, s, x, t: _b(e, "or", _not(e, s, t), x, t),
    "and_not1": lambda e, s, x, t: _b(e, "and", s, _not(e, x, t), t),
    "or_not1": lambda e, s, x, t: _b(e, "or", s, _not(e, x, t), t),
}
SCMP = {"eq": "eq", "lg": "ne", "gt": "{s}gt", "ge": "{s}ge", "lt": "{s}lt", "le": "{s}le"}


# branches that may end a block: mnemonic -> None (always taken) or (what is tested, "0"/"1" or "z"/"nz")
BRANCHES = {"s_branch": None, "s_cbranch_scc0": ("scc", "0"), "s_cbranch_scc1": ("scc", "1"),
            "s_cbranch_vccz": ("vcc", "z"), "s_cbranch_vccnz": ("vcc", "nz"), "s_cbranch_execz": ("exec", "z"),
            "s_cbranch_execnz": ("exec", "nz")}


class Refused(Exception):
    """The translator does not cover this instruction (the block ends before it)."""


class _Emit:
    """Text of an LLVM IR function, SSA names numbered."""

    def __init__(self):
        self.lines: list[str] = []
        self.n = 0
        self.cur = "wave"  # the basic block being written

    def op(self, text: str) -> str:
        self.n += 1
        name = f"%t{self.n}"
        self.lines.append(f"  {name} = {text}")
        return name

    def raw(self, text: str) -> None:
        self.lines.append(text)

    def label(self, stem: str) -> str:
        self.n += 1
        return f"{stem}{self.n}"

    def start(self, label: str) -> None:
        self.lines.append(f"{label}:")
        self.cur = label

    def sel(self, cond: str, a: str, b: str, t: str = "i32") -> str:
        return self.op(f"select i1 {cond}, {t} {a}, {t} {b}")

    def fma(self, a: str, b: str, c: str) -> str:
        return self.op(f"call float @llvm.fma.f32(float {a}, float {b}, float {c})")

    def zext64(self, a: str) -> str:
        return self.op(f"zext i32 {a} to i64")

    def mul_hi(self, a: str, b: str, ext: str) -> str:
        """The high 32 bits of the 64-bit product of a and b, widened by `ext` (zext / sext)."""
        p = self.op(f"mul i64 {self.op(f'{ext} i32 {a} to i64')}, {self.op(f'{ext} i32 {b} to i64')}")
        return self.op(f"trunc i64 {self.op(f'lshr i64 {p}, 32')} to i32")

    def bfe_u32(self, x: str, off: str, width: str) -> str:
        o = self.op(f"and i32 {off}, 31")
        w = self.op(f"and i32 {width}, 31")
        mask = self.op(f"sub i32 {self.op(f'shl i32 1, {w}')}, 1")  # width 0: mask 0, the result 0
        return self.op(f"and i32 {self.op(f'lshr i32 {x}, {o}')}, {mask}")

    def overflow(self, a: str, b: str, r: str, sub: bool) -> str:
        """Signed overflow of a 32-bit add (sub): operand signs equal (different), result's sign differs from a's."""
        sa, sb, sr = (self.op(f"icmp slt i32 {x}, 0") for x in (a, b, r))
        same = self.op(f"icmp {'ne' if sub else 'eq'} i1 {sa}, {sb}")
        return self.op(f"and i1 {same}, {self.op(f'icmp ne i1 {sr}, {sa}')}")

    # -- the wave state ------------------------------------------------------------------------------
    def sptr(self, k: int) -> str:
        return self.op(f"getelementptr i32, i32* %sp, i64 {k}")

    def sload(self, k: int) -> str:
        return self.op(f"load i32, i32* {self.sptr(k)}")

    def sstore(self, k: int, value: str) -> None:
        self.raw(f"  store i32 {value}, i32* {self.sptr(k)}")

    def sload64(self, k: int) -> str:
        lo, hi = self.zext64(self.sload(k)), self.zext64(self.sload(k + 1))
        return self.op(f"or i64 {lo}, {self.op(f'shl i64 {hi}, 32')}")

    def sstore64(self, k: int, value: str) -> None:
        self.sstore(k, self.op(f"trunc i64 {value} to i32"))
        self.sstore(k + 1, self.op(f"trunc i64 {self.op(f'lshr i64 {value}, 32')} to i32"))

    def scc(self) -> str:
        return self.op(f"icmp ne i8 {self.op('load i8, i8* %sccp')}, 0")

    def set_scc(self, bit: str) -> None:
        self.raw(f"  store i8 {self.op(f'zext i1 {bit} to i8')}, i8* %sccp")

    def vrow(self, r: int) -> str:
        """Pointer to v[r] of this wave, lane 0."""
        row = self.op(f"mul i64 %rs, {r}")
        return self.op(f"getelementptr i32, i32* %v, i64 {self.op(f'add i64 %vb, {row}')}")


class Block:
    """A translated block: `steps` instructions, `size` bytes of code starting at `pc`, `code` their bytes."""

    def __init__(self, pc: int, code: bytes, steps: int, texts: list[str], entry, writes_exec: bool, ir: str,
                 branches: bool = False):
        self.pc, self.code, self.steps, self.size = pc, code, steps, len(code)
        self.entry = entry  # COMPILED's [function, IR, tier, symbol]: shared by blocks of the same code
        self.fn = entry[0]
        self.texts, self.writes_exec, self.ir = texts, writes_exec, ir
        self.runs = self.wave_runs = 0  # calls, and waves run through them (what TIER_UP counts)
        self.branches = branches  # ends with a branch: the waves' PCs may differ after it

    def run(self, W) -> None:
        v = W.v
        if v.strides != (W.lanes * 4, W.n * W.lanes * 4, 4) or not W.s.flags.c_contiguous \
                or not W.pc.flags.c_contiguous:
            raise AssertionError("translated block: the Waves layout is not the one the block was compiled for")
        self.runs += 1
        self.wave_runs += W.n
        if self.wave_runs >= TIER_UP and self.entry[2] == 0:
            tier_up(self.entry)
        if self.fn is not self.entry[0]:
            self.fn = self.entry[0]
        self.fn(v.ctypes.data, W.s.ctypes.data, W.scc.ctypes.data, W.pc.ctypes.data, W.n)  # PCs stepped there too
        if self.writes_exec:
            W.exec_written()


class _Builder:
    """One block's IR: instructions appended one by one (`add` raises Refused for what is not covered)."""

    VOPD_READS_FIRST = True  # False only as a planted bug (tests): the Y half reads after the X half wrote

    def __init__(self, lanes: int, vgprs: int, arch: str, ctx=None):
        self.lanes, self.vgprs, self.arch = lanes, vgprs, arch
        self.e = _Emit()
        self.writes_exec = False
        # NULL and M0 operand codes: gfx11 124 / 125; GFX9 has no NULL and M0 is 124 (operands.Context)
        self.null = ctx.null if ctx is not None else fm.NULL
        self.m0 = ctx.m0 if ctx is not None else fm.M0
        self.offset = 0  # bytes of the block before the instruction being added
        self.pc_delta: str | None = None  # a branch's per-wave PC step (IR value); None: the block's size
        self.ends = False  # a branch ended the block

    # -- operands ------------------------------------------------------------------------------------
    def _vsource(self, instr, code: int, typ: str):
        """A VALU source as ("v", row pointer) or ("u", uniform i32 value), read before the lane loop."""
        e = self.e
        if code in fm.DPP_SRC0:
            raise Refused("DPP")
        if code >= fm.VGPR_BASE:
            r = code - fm.VGPR_BASE
            if r >= self.vgprs:
                raise Refused("VGPR out of range")
            return ("v", e.vrow(r))
        if code < 128 and code != self.null:
            return ("u", e.sload(code))
        if code == fm.SRC_SCC:
            return ("u", e.op(f"zext i1 {e.scc()} to i32"))
        value = _const_bits(code, 32, typ.startswith("f"), instr.literal, self.null)
        if value is None:
            raise Refused("operand")
        return ("u", str(value - (1 << 32) if value >= 1 << 31 else value))

    def _mask_source(self, code: int) -> str:
        """A lane mask in SGPRs, as i64 (wave32: the low dword)."""
        if not (code < 106 or code in (fm.VCC_LO, fm.EXEC_LO)):
            raise Refused("mask operand")
        if self.lanes == 32:
            return self.e.zext64(self.e.sload(code))
        return self.e.sload64(code)

    def _mask_dest(self, code: int) -> int | None:
        if code == self.null:
            return None
        if not (code < 106 - (self.lanes // 32 - 1) or code in (fm.VCC_LO, fm.EXEC_LO)):
            raise Refused("mask destination")
        return code

    def _store_mask(self, code: int | None, mask: str) -> None:
        if code is None:
            return
        if code == fm.EXEC_LO:
            self.writes_exec = True
        if self.lanes == 32:
            self.e.sstore(code, self.e.op(f"trunc i64 {mask} to i32"))
        else:
            self.e.sstore64(code, mask)

    def _ssource(self, instr, code: int, dwords: int) -> str:
        e = self.e
        if code < 128 and code != self.null:
            if dwords == 2:
                if code + 1 >= 128:
                    raise Refused("operand")
                return e.sload64(code)
            return e.sload(code)
        if code == fm.SRC_SCC:
            return e.op(f"zext i1 {e.scc()} to {'i64' if dwords == 2 else 'i32'}")
        if code in (fm.SRC_EXECZ, fm.SRC_VCCZ):
            reg = fm.EXEC_LO if code == fm.SRC_EXECZ else fm.VCC_LO
            m = e.zext64(e.sload(reg)) if self.lanes == 32 else e.sload64(reg)
            return e.op(f"zext i1 {e.op(f'icmp eq i64 {m}, 0')} to {'i64' if dwords == 2 else 'i32'}")
        value = _const_bits(code, 64 if dwords == 2 else 32, False, instr.literal, self.null)
        if value is None:
            raise Refused("operand")
        if dwords == 2 and code == fm.LITERAL:
            value = instr.literal
        bits = 64 if dwords == 2 else 32
        value &= (1 << bits) - 1
        return str(value - (1 << bits) if value >= 1 << (bits - 1) else value)

    def _sdest(self, reg: int, dwords: int):
        if reg == self.null:
            return None
        ok = reg < 106 or reg in (fm.VCC_LO, fm.VCC_HI, self.m0, fm.EXEC_LO, fm.EXEC_HI)
        if not ok or reg + dwords > 128 or (dwords == 2 and reg + 1 > 105 and reg not in (fm.VCC_LO, fm.EXEC_LO)):
            raise Refused("scalar destination")
        if reg in EXEC_REGS or (dwords == 2 and reg + 1 in EXEC_REGS):
            self.writes_exec = True
        return reg

    def _swrite(self, reg, dwords: int, value: str) -> None:
        if reg is None:
            return
        if dwords == 2:
            self.e.sstore64(reg, value)
        else:
            self.e.sstore(reg, value)

    # -- instructions ----------------------------------------------------------------------------------
    def add(self, instr) -> None:
        fam, name, f = instr.family, instr.mnemonic, instr.fields
        if fam == "SOPP":
            if name in _NOP_SOPP:
                return
            if name in BRANCHES:  # ends the block: each wave's PC steps to the target or past the branch
                return self._branch(instr)
            raise Refused("program flow")
        if fam in ("SOP1", "SOP2", "SOPC", "SOPK"):
            return self._salu(instr)
        if fam == "VOPD":
            return self._vopd(instr)
        if fam in ("VOP1", "VOP2", "VOP3", "VOP3SD", "VOPC"):
            if fam in ("VOP3", "VOP3SD") and (f.get("opsel", 0) or f.get("clamp", 0) or f.get("omod", 0)):
                raise Refused("modifiers")
            if name in MAD64 or name in V_WIDE:
                if f.get("abs", 0) or f.get("neg", 0):
                    raise Refused("modifiers")
                return self._wide(instr)
            return self._valu(instr)
        raise Refused(fam)

    def _branch(self, instr) -> None:
        """salu.compile_sopp's branches: target = PC + 4 + 4 * simm16 where the wave's condition holds."""
        e = self.e
        taken = self.offset + 4 + 4 * sext(instr.fields["simm16"], 16)
        past = self.offset + instr.size
        cond = BRANCHES[instr.mnemonic]
        if cond is None:
            self.pc_delta = str(taken)
        else:
            if cond[0] == "scc":
                c = e.scc()
                if cond[1] == "0":
                    c = e.op(f"xor i1 {c}, true")
            else:
                reg = fm.VCC_LO if cond[0] == "vcc" else fm.EXEC_LO
                m = e.zext64(e.sload(reg)) if self.lanes == 32 else e.sload64(reg)
                c = e.op(f"icmp {'eq' if cond[1] == 'z' else 'ne'} i64 {m}, 0")
            self.pc_delta = e.sel(c, str(taken), str(past), "i64")
        self.ends = True

    def _salu(self, instr) -> None:
        e, f, name, fam = self.e, instr.fields, instr.mnemonic, instr.family
        if fam == "SOPK":
            if name.startswith("s_waitcnt") or name == "s_version":  # no-ops, as salu.compile_sopk runs them
                return
            if name != "s_movk_i32" or not f["sdst"] < 106:
                raise Refused(name)
            e.sstore(f["sdst"], str(sext(f["simm16"], 16)))
            return
        shape = operand_shape(instr)
        if fam == "SOPC":
            parts = name.split("_")
            if len(parts) != 4 or parts[1] != "cmp" or parts[2] not in SCMP or parts[3] not in ("u32", "i32", "u64"):
                raise Refused(name)
            dw = 2 if parts[3] == "u64" else 1
            a, b = self._ssource(instr, f["ssrc0"], dw), self._ssource(instr, f["ssrc1"], dw)
            pred = SCMP[parts[2]].format(s="s" if parts[3] == "i32" else "u")
            e.set_scc(e.op(f"icmp {pred} {'i64' if dw == 2 else 'i32'} {a}, {b}"))
            return
        if fam == "SOP1" and name.endswith(("_saveexec_b32", "_saveexec_b64")):
            op = SAVEEXEC.get(name[2:name.index("_saveexec")])
            if op is None:
                raise Refused(name)
            wide = name.endswith("b64")
            t = "i64" if wide else "i32"
            a = self._ssource(instr, f["ssrc0"], 2 if wide else 1)
            dst = self._sdest(f["sdst"], 2 if wide else 1)
            old = e.sload64(fm.EXEC_LO) if wide else e.sload(fm.EXEC_LO)
            new = op(e, a, old, t)
            self._swrite(dst, 2 if wide else 1, old)  # salu.compile_sop1: the old EXEC to sdst, then EXEC
            self._swrite(fm.EXEC_LO, 2 if wide else 1, new)
            self.writes_exec = True
            e.set_scc(e.op(f"icmp ne {t} {new}, 0"))
            return
        if fam == "SOP1":
            if name not in S1:
                raise Refused(name)
            d, s0w = (shape + [1, 1])[:2]
            fn, rule = S1[name]
            t = "i64" if d == 2 else "i32"
            a = self._ssource(instr, f["ssrc0"], s0w)
            dst = self._sdest(f["sdst"], d)
            r = fn(e, a, t)
            self._swrite(dst, d, r)
            if rule == S_SCC_NZ:
                e.set_scc(e.op(f"icmp ne {t} {r}, 0"))
            return
        d, s0w, s1w = (shape + [1, 1, 1])[:3]
        if name in ("s_cselect_b32", "s_cselect_b64", "s_addc_u32", "s_subb_u32") or name in S2:
            a, b = self._ssource(instr, f["ssrc0"], s0w), self._ssource(instr, f["ssrc1"], s1w)
            dst = self._sdest(f["sdst"], d)
            t = "i64" if d == 2 else "i32"
        else:
            raise Refused(name)
        if name.startswith("s_cselect"):
            self._swrite(dst, d, e.sel(e.scc(), a, b, t))
            return
        if name in ("s_addc_u32", "s_subb_u32"):
            r, carry = self._carry(a, b, e.op(f"zext i1 {e.scc()} to i32"), name == "s_subb_u32")
            self._swrite(dst, d, r)
            e.set_scc(carry)
            return
        fn, rule = S2[name]
        r = fn(e, a, b, t)
        self._swrite(dst, d, r)
        if rule == S_SCC_NZ:
            e.set_scc(e.op(f"icmp ne {t} {r}, 0"))
        elif rule != S_SCC_KEEP:
            e.set_scc(rule(e, a, b, r))

    def _carry(self, a: str, b: str, ci: str | None, sub: bool) -> tuple[str, str]:
        """alu._add_co / _sub_co on i32: (result, carry or borrow out as i1)."""
        e = self.e
        if not sub:
            s = e.op(f"add i32 {a}, {b}")
            c1 = e.op(f"icmp ult i32 {s}, {a}")
            if ci is None:
                return s, c1
            t = e.op(f"add i32 {s}, {ci}")
            return t, e.op(f"or i1 {c1}, {e.op(f'icmp ult i32 {t}, {s}')}")
        d = e.op(f"sub i32 {a}, {b}")
        c1 = e.op(f"icmp ult i32 {a}, {b}")
        if ci is None:
            return d, c1
        return e.op(f"sub i32 {d}, {ci}"), e.op(f"or i1 {c1}, {e.op(f'icmp ult i32 {d}, {ci}')}")

    def _valu(self, instr) -> None:
        e, f, name, fam = self.e, instr.fields, instr.mnemonic, instr.family
        srcs = source_codes(instr)
        if any(c in fm.DPP_SRC0 for c in srcs[:1]):
            raise Refused("DPP")
        if fam == "VOPC" or (fam == "VOP3" and name.startswith("v_cmp")):
            parts = name.split("_")
            if len(parts) != 4 or parts[1] not in ("cmp", "cmpx") or not (
                    (parts[2] in V_CMP and parts[3] in ("u32", "i32")) or (parts[2] in F_CMP and parts[3] == "f32")):
                raise Refused(name)
            types = ("f32", "f32") if parts[3] == "f32" else ("u32", "u32")  # f32: inline constants as floats
            dst_mask = self._mask_dest(fm.VCC_LO if fam == "VOPC" else f["vdst"])
            also_mask = None
            if parts[1] == "cmpx":  # valu._compile_vcmp: EXEC; GFX9's also writes VCC / its sdst (first)
                also_mask = dst_mask if self.arch == "gfx942" else None
                dst_mask = fm.EXEC_LO
            kind = "cmp"
        elif name in V_CARRY:
            sub, carry_in, swap = V_CARRY[name]
            types = ("u32", "u32")
            if fam == "VOP2":
                cin, dst_mask = (fm.VCC_LO if carry_in else None), fm.VCC_LO
            elif fam == "VOP3SD":
                cin, dst_mask = (srcs[2] if carry_in else None), self._mask_dest(f["sdst"])
            else:
                raise Refused(name)
            kind = "carry"
        elif name in V_INT or name in V_FLOAT:
            out_t, types, _ = VALU[name]
            if fam == "VOP3SD":
                raise Refused(name)
            kind = "float" if name in V_FLOAT else "int"
            dst_mask = None
        else:
            raise Refused(name)
        # sources: everything uniform is read before the lane loop
        operands, mask_in, mods = [], None, []
        if fam != "VOP3" and (f.get("abs", 0) or f.get("neg", 0)):
            raise Refused("modifiers")
        if (kind == "carry" or name in _ACCUMULATOR) and (f.get("abs", 0) or f.get("neg", 0)):
            raise Refused("modifiers")
        if any((f.get("abs", 0) | f.get("neg", 0)) >> i & 1 for i, t in enumerate(types) if t == "mask"):
            raise Refused("modifiers")
        for i, typ in enumerate(types):
            if typ == "mask":  # v_cndmask: VCC in e32, an SGPR mask in VOP3 src2
                mask_in = self._mask_source(f["src2"] if fam == "VOP3" else fm.VCC_LO)
                continue
            if _ACCUMULATOR.get(name) == i:
                code = f["vdst"] + fm.VGPR_BASE
            elif _LITERAL_K.get(name) == i:
                code = fm.LITERAL
            elif name in _LITERAL_K and _LITERAL_K[name] == 1 and i == 2:
                code = srcs[1]
            else:
                code = srcs[i]
            operands.append(self._vsource(instr, code, typ))
            mods.append(self._modifiers(instr, i, typ))
        if kind == "carry" and cin is not None:
            mask_in = self._mask_source(cin)
        vdst = None
        if kind != "cmp":
            vdst = f["vdst"]
            if vdst >= self.vgprs:
                raise Refused("VGPR out of range")
            dst_row = e.vrow(vdst)
        lanes = self.lanes
        exec_ = e.zext64(e.sload(fm.EXEC_LO)) if lanes == 32 else e.sload64(fm.EXEC_LO)
        pre = e.cur
        loop, done = e.label("lane"), e.label("lanes_done")
        e.raw(f"  br label %{loop}")
        e.start(loop)
        lane = e.op("phi i64 [0, %" + pre + "], [%NEXT, %" + loop + "]")
        acc = None
        if dst_mask is not None or kind == "cmp":
            acc = e.op("phi i64 [0, %" + pre + "], [%ACC, %" + loop + "]")
        bit = e.op(f"and i64 {e.op(f'lshr i64 {exec_}, {lane}')}, 1")
        on = e.op(f"icmp ne i64 {bit}, 0")
        vals = []
        for (kind_, x), mod in zip(operands, mods):
            value = e.op(f"load i32, i32* {e.op(f'getelementptr i32, i32* {x}, i64 {lane}')}") if kind_ == "v" else x
            vals.append(self._apply_modifiers(value, *mod))
        lane_mask_bit = None
        if mask_in is not None:
            lane_mask_bit = e.op(f"and i64 {e.op(f'lshr i64 {mask_in}, {lane}')}, 1")
        out_bit = None
        if kind == "int":
            if name == "v_cndmask_b32":
                result = e.sel(e.op(f"icmp ne i64 {lane_mask_bit}, 0"), vals[1], vals[0])
            else:
                result = V_INT[name](e, *vals)
        elif kind == "float":
            fl = [e.op(f"bitcast i32 {x} to float") for x in vals]
            r = V_FLOAT[name](e, *fl)
            result = self._nan_rule(e.op(f"bitcast float {r} to i32"), r, vals, fl)
        elif kind == "carry":
            a, b = (vals[1], vals[0]) if swap else (vals[0], vals[1])
            ci = e.op(f"trunc i64 {lane_mask_bit} to i32") if lane_mask_bit is not None else None
            result, out_bit = self._carry(a, b, ci, sub)
        else:
            parts = name.split("_")
            if parts[3] == "f32":
                fa, fb = (e.op(f"bitcast i32 {x} to float") for x in vals[:2])
                out_bit = e.op(f"fcmp {F_CMP[parts[2]]} float {fa}, {fb}")
            else:
                pred = V_CMP[parts[2]].format(s="s" if parts[3] == "i32" else "u")
                out_bit = e.op(f"icmp {pred} i32 {vals[0]}, {vals[1]}")
            result = None
        if result is not None:
            p = e.op(f"getelementptr i32, i32* {dst_row}, i64 {lane}")
            old = e.op(f"load i32, i32* {p}")
            e.raw(f"  store i32 {e.sel(on, result, old)}, i32* {p}")
        if acc is not None:
            contributes = e.op(f"and i64 {e.op(f'zext i1 {out_bit} to i64')}, {bit}")  # inactive lanes: 0
            new_acc = e.op(f"or i64 {acc}, {e.op(f'shl i64 {contributes}, {lane}')}")
            e.lines[:] = [ln.replace("%ACC", new_acc) for ln in e.lines]
        nxt = e.op(f"add i64 {lane}, 1")
        e.lines[:] = [ln.replace("%NEXT", nxt) for ln in e.lines]
        e.raw(f"  br i1 {e.op(f'icmp eq i64 {nxt}, {lanes}')}, label %{done}, label %{loop}")
        e.start(done)
        if acc is not None:
            final = e.op("phi i64 [" + new_acc + ", %" + loop + "]")
            if kind == "cmp" and also_mask is not None:
                self._store_mask(also_mask, final)
            self._store_mask(dst_mask, final)

    # -- lane loops for the 64-bit and dual-issue instructions ------------------------------------------
    def _vsource64(self, instr, code: int):
        """A 64-bit VALU source: ("v", low row, high row) or ("u", i64 value)."""
        e = self.e
        if code in fm.DPP_SRC0:
            raise Refused("DPP")
        if code >= fm.VGPR_BASE:
            r = code - fm.VGPR_BASE
            if r + 2 > self.vgprs:
                raise Refused("VGPR out of range")
            return ("v", e.vrow(r), e.vrow(r + 1))
        if code < 128 and code != self.null:
            if code + 1 >= 128:
                raise Refused("operand")
            return ("u", e.sload64(code))
        if code == fm.SRC_SCC:
            return ("u", e.op(f"zext i1 {e.scc()} to i64"))
        value = _const_bits(code, 64, False, instr.literal, self.null)
        if value is None:
            raise Refused("operand")
        value &= (1 << 64) - 1
        return ("u", str(value - (1 << 64) if value >= 1 << 63 else value))

    def _load(self, operand, lane: str) -> str:
        """An operand's value in this lane (i32, or i64 for a _vsource64 operand)."""
        e = self.e
        if operand[0] == "u":
            return operand[1]
        lo = e.op(f"load i32, i32* {e.op(f'getelementptr i32, i32* {operand[1]}, i64 {lane}')}")
        if len(operand) == 2:
            return lo
        hi = e.op(f"load i32, i32* {e.op(f'getelementptr i32, i32* {operand[2]}, i64 {lane}')}")
        return e.op(f"or i64 {e.zext64(lo)}, {e.op(f'shl i64 {e.zext64(hi)}, 32')}")

    def _lane_loop(self, body, dst_mask: int | None = None, mask: bool = False) -> None:
        """A loop over the lanes: `body(lane)` emits the lane's reads and operation and returns (stores, bit):
        stores a list of (row pointer, i32 value) written where the lane's EXEC bit is on (all of the lane's reads
        come before its writes), bit an i1 collected into a lane mask (0 in inactive lanes) stored to `dst_mask`
        after the loop when `mask`."""
        e = self.e
        exec_ = e.zext64(e.sload(fm.EXEC_LO)) if self.lanes == 32 else e.sload64(fm.EXEC_LO)
        pre = e.cur
        loop, done = e.label("lane"), e.label("lanes_done")
        e.raw(f"  br label %{loop}")
        e.start(loop)
        lane = e.op("phi i64 [0, %" + pre + "], [%NEXT, %" + loop + "]")
        acc = e.op("phi i64 [0, %" + pre + "], [%ACC, %" + loop + "]") if mask else None
        bit = e.op(f"and i64 {e.op(f'lshr i64 {exec_}, {lane}')}, 1")
        on = e.op(f"icmp ne i64 {bit}, 0")
        stores, out_bit = body(lane)
        for row, value in stores:
            p = e.op(f"getelementptr i32, i32* {row}, i64 {lane}")
            old = e.op(f"load i32, i32* {p}")
            e.raw(f"  store i32 {e.sel(on, value, old)}, i32* {p}")
        if acc is not None:
            contributes = e.op(f"and i64 {e.op(f'zext i1 {out_bit} to i64')}, {bit}")
            new_acc = e.op(f"or i64 {acc}, {e.op(f'shl i64 {contributes}, {lane}')}")
            e.lines[:] = [ln.replace("%ACC", new_acc) for ln in e.lines]
        nxt = e.op(f"add i64 {lane}, 1")
        e.lines[:] = [ln.replace("%NEXT", nxt) for ln in e.lines]
        e.raw(f"  br i1 {e.op(f'icmp eq i64 {nxt}, {self.lanes}')}, label %{done}, label %{loop}")
        e.start(done)
        if acc is not None:
            self._store_mask(dst_mask, e.op("phi i64 [" + new_acc + ", %" + loop + "]"))

    def _split64(self, value: str) -> tuple[str, str]:
        e = self.e
        return e.op(f"trunc i64 {value} to i32"), e.op(f"trunc i64 {e.op(f'lshr i64 {value}, 32')} to i32")

    def _wide(self, instr) -> None:
        """v_mad_u64_u32 / v_mad_i64_i32 (valu._compile_mad64: VGPR pair, carry mask to sdst) and V_WIDE."""
        e, f, name = self.e, instr.fields, instr.mnemonic
        srcs = source_codes(instr)
        # valu._compile_mad64's source types (not in alu.VALU); V_WIDE's from alu.VALU
        types = (("i32", "i32", "i64") if name == "v_mad_i64_i32" else ("u32", "u32", "u64")) if name in MAD64 \
            else VALU[name][1]
        operands = [self._vsource64(instr, c) if WIDTH64(t) else self._vsource(instr, c, t)
                    for c, t in zip(srcs, types)]
        vdst = f["vdst"]
        if vdst + 2 > self.vgprs:
            raise Refused("VGPR out of range")
        lo_row, hi_row = e.vrow(vdst), e.vrow(vdst + 1)
        dst_mask = None
        if name in MAD64:
            if instr.family != "VOP3SD":
                raise Refused(name)
            dst_mask = self._mask_dest(f["sdst"])
        signed = MAD64.get(name) == "sext"

        def body(lane):
            vals = [self._load(x, lane) for x in operands]
            carry = None
            if name in MAD64:
                ext = MAD64[name]
                a, b = (e.op(f"{ext} i32 {x} to i64") for x in vals[:2])
                prod = e.op(f"mul i64 {a}, {b}")
                value = e.op(f"add i64 {prod}, {vals[2]}")
                if signed:  # the 65-bit sum's sign: overflow -> the addend's sign, else the sum's
                    sp, sc, st = (e.op(f"icmp slt i64 {x}, 0") for x in (prod, vals[2], value))
                    ovf = e.op(f"and i1 {e.op(f'icmp eq i1 {sp}, {sc}')}, {e.op(f'icmp ne i1 {st}, {sc}')}")
                    carry = e.sel(ovf, sc, st, "i1")
                else:
                    carry = e.op(f"icmp ult i64 {value}, {prod}")
            else:
                value = V_WIDE[name](e, *vals)
            lo, hi = self._split64(value)
            return [(lo_row, lo), (hi_row, hi)], carry

        self._lane_loop(body, dst_mask, mask=dst_mask is not None)

    def _vopd(self, instr) -> None:
        """valu.compile_vopd: two VOP2-like halves on the same lanes; both read their sources before either
        writes (here: per lane, every load of both halves before the two stores)."""
        from . import opcodes_gfx11 as ops
        e, f = self.e, instr.fields
        halves = []
        for x in "xy":
            entry = ops.VOPD.get(f["op" + x])
            if entry is None:
                raise Refused("VOPD")
            name = "v_" + entry[0][len("v_dual_"):]
            if name not in VOPD_HALVES:
                raise Refused(name)
            src0, vsrc1, vdst = f[f"src{x}0"], f[f"vsrc{x}1"] + fm.VGPR_BASE, f[f"vdst{x}"]
            if vdst >= self.vgprs:
                raise Refused("VGPR out of range")
            codes = {"v_fmac_f32": [src0, vsrc1, vdst + fm.VGPR_BASE], "v_fmaak_f32": [src0, vsrc1, fm.LITERAL],
                     "v_fmamk_f32": [src0, fm.LITERAL, vsrc1]}.get(name, [src0, vsrc1])
            _, types, _ = VALU[name]
            operands = [self._vsource(instr, c, t) for c, t in zip(codes, types) if t != "mask"]
            halves.append((name, operands, e.vrow(vdst)))
        mask_in = self._mask_source(fm.VCC_LO) if any(h[0] == "v_cndmask_b32" for h in halves) else None

        def body(lane):
            loaded = [[self._load(x, lane) for x in ops_] for _, ops_, _ in halves]
            if not self.VOPD_READS_FIRST:  # the planted bug of tests/test_shader_translate.py: Y reads after X writes
                stores = half(lane, *halves[0], loaded[0])
                p = e.op(f"getelementptr i32, i32* {stores[0][0]}, i64 {lane}")
                e.raw(f"  store i32 {stores[0][1]}, i32* {p}")
                loaded[1] = [self._load(x, lane) for x in halves[1][1]]
            return [s for h, vals in zip(halves, loaded) for s in half(lane, *h, vals)], None

        def half(lane, name, _, row, vals):
            stores = []
            if name == "v_cndmask_b32":
                m = e.op(f"and i64 {e.op(f'lshr i64 {mask_in}, {lane}')}, 1")
                stores.append((row, e.sel(e.op(f"icmp ne i64 {m}, 0"), vals[1], vals[0])))
            elif name in V_FLOAT:
                fl = [e.op(f"bitcast i32 {v} to float") for v in vals]
                r = V_FLOAT[name](e, *fl)
                stores.append((row, self._nan_rule(e.op(f"bitcast float {r} to i32"), r, vals, fl)))
            else:
                stores.append((row, V_INT[name](e, *vals)))
            return stores

        self._lane_loop(body)

    def _modifiers(self, instr, i: int, typ: str) -> tuple[bool, bool]:
        """(abs, neg) of VOP3 source i (operands.source_modifiers): on f32 and raw-bit operands they act on the sign
        bit; an integer operand with one is refused (the interpreter refuses it too)."""
        f = instr.fields
        abs_, neg = bool(f.get("abs", 0) >> i & 1), bool(f.get("neg", 0) >> i & 1)
        if (abs_ or neg) and typ not in ("f32", "b32"):
            raise Refused("modifier on an integer operand")
        return abs_, neg

    def _apply_modifiers(self, value: str, abs_: bool, neg: bool) -> str:
        if abs_:
            value = self.e.op(f"and i32 {value}, 2147483647")
        if neg:
            value = self.e.op(f"xor i32 {value}, -2147483648")
        return value

    def _nan_rule(self, bits: str, r: str, srcs: list[str], fl: list[str]) -> str:
        """fpmath.propagate_nan: a NaN result becomes the first NaN source (in operand order) quieted, or the
        default NaN 0xFFC00000 when no source is a NaN."""
        e = self.e
        pick = str(0xFFC00000 - (1 << 32))
        for x, xf in reversed(list(zip(srcs, fl))):
            quiet = e.op(f"or i32 {x}, 4194304")
            pick = e.sel(e.op(f"fcmp uno float {xf}, 0.0"), quiet, pick)
        return e.sel(e.op(f"fcmp uno float {r}, 0.0"), pick, bits)

    def ir(self, name: str, size: int) -> str:
        body = "\n".join(self.e.lines)
        delta = self.pc_delta if self.pc_delta is not None else str(size)
        return f"""declare float @llvm.fma.f32(float, float, float)
declare i32 @llvm.fptoui.sat.i32.f32(float)
declare i32 @llvm.fptosi.sat.i32.f32(float)

define void @{name}(i32* noalias %v, i32* noalias %s, i8* noalias %scc, i64* noalias %pc, i64 %n) {{
entry:
  %empty = icmp eq i64 %n, 0
  %rs = mul i64 %n, {self.lanes}
  br i1 %empty, label %exit, label %wave
wave:
  %w = phi i64 [0, %entry], [%wnext, %wend]
  %sb = mul i64 %w, 128
  %sp = getelementptr i32, i32* %s, i64 %sb
  %sccp = getelementptr i8, i8* %scc, i64 %w
  %vb = mul i64 %w, {self.lanes}
{body}
  %pcp = getelementptr i64, i64* %pc, i64 %w
  %pcw = load i64, i64* %pcp
  %pcn = add i64 %pcw, {delta}
  store i64 %pcn, i64* %pcp
  br label %wend
wend:
  %wnext = add i64 %w, 1
  %done = icmp eq i64 %wnext, %n
  br i1 %done, label %exit, label %wave
exit:
  ret void
}}
"""


# -- compilation -------------------------------------------------------------------------------------------------

_lock = threading.Lock()
_engines: dict = {}  # tier -> one MCJIT engine (with its target machine); every block of a tier is a module in it
_SIGNATURE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_int64)
COMPILED: dict = {}  # (version, arch, lanes, vgprs, code bytes) -> [ctypes function, IR text, tier, symbol]
STATS = {"blocks": 0, "compile_s": 0.0, "instructions": 0, "disk_hits": 0, "tier_ups": 0, "tier_up_s": 0.0}

# Two tiers. A block is first compiled cheaply: no IR pass pipeline, the fast instruction selector (codegen O0):
# ~4 ms a block instead of ~140 ms with O2 (docs/translator.md, "Compile latency"); its code runs about half as
# fast as O2's (64 waves of a 12-instruction block: 68 us against 30 us). A block that has run for TIER_UP waves in
# all (a call runs every wave of the batch) is compiled again with the O2 module pipeline (the lane loops
# vectorize) and codegen O2, and its later runs use that: about where the O2 compile pays for itself.
TIER_UP = 1 << 17
_TIERS = {0: (0, None), 1: (2, 2)}  # tier -> (codegen opt level, pass pipeline speed level or None: no passes)
CACHE_FORMAT = 1


def _disk_dir() -> str | None:
    """Compiled blocks on disk: $HCQSIM_CACHE/translate (compiler.cache_dir's root; HCQSIM_CACHE=off: none)."""
    from ..compiler import cache_dir
    d = cache_dir()
    return None if d is None else os.path.join(os.path.dirname(d), "translate")


def _disk_key(ir: str, tier: int) -> str:
    """The object code's key: hcqsim's version, llvmlite's and LLVM's, the host, the tier, and the IR itself (which
    the arch, wave size, VGPR count and code bytes determine; hashing the IR also keeps a changed translator or a
    planted bug from reading another IR's object)."""
    import llvmlite
    import llvmlite.binding as llvm
    meta = (f"{CACHE_FORMAT}|{_version()}|llvmlite {llvmlite.__version__}|LLVM {llvm.llvm_version_info}|"
            f"{llvm.get_default_triple()}|{llvm.get_host_cpu_name()}|tier {tier}")
    return hashlib.sha256(meta.encode() + b"\0" + ir.encode()).hexdigest()


_MAGIC = b"HQTB"  # a cache file: magic, the first 16 bytes of the object code's SHA-256, the object code


def _disk_read(key: str) -> bytes | None:
    """Object code from the disk cache, or None (no cache, missing, unreadable, or failing its checksum)."""
    from ..compiler import read_cache_file
    data = read_cache_file(_disk_dir(), key)
    if data is None:
        return None
    obj = data[20:]
    if data[:4] != _MAGIC or not obj or hashlib.sha256(obj).digest()[:16] != data[4:20]:
        return None
    return obj


def _disk_write(key: str, obj: bytes) -> None:
    """Atomic (compiler.write_cache_file): concurrent processes only see whole entries."""
    from ..compiler import write_cache_file
    write_cache_file(_disk_dir(), key, _MAGIC + hashlib.sha256(obj).digest()[:16] + obj)


def _engine(tier: int):
    import llvmlite.binding as llvm
    eng = _engines.get(tier)
    if eng is None:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        opt, _ = _TIERS[tier]
        machine = llvm.Target.from_default_triple().create_target_machine(opt=opt)
        eng = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine)
        eng.pending = {}  # module name -> (disk key, object code read from disk or None), while being finalized

        def notify(module, buffer: bytes) -> None:  # MCJIT compiled a module: keep its object code
            key, _ = eng.pending.get(module.name, (None, None))
            if key is not None:
                _disk_write(key, buffer)

        def getbuffer(module):  # before compiling a module: the object code read from disk, if any
            return eng.pending.get(module.name, (None, None))[1]

        eng.set_object_cache(notify, getbuffer)
        eng.machine = machine
        _engines[tier] = eng
    return eng


def _jit(ir: str, name: str, tier: int = 0):
    import llvmlite.binding as llvm
    with _lock:
        eng = _engine(tier)
        sym = f"{name}_t{tier}"
        module = llvm.parse_assembly(ir.replace(f"@{name}(", f"@{sym}("))
        module.name = sym
        key = _disk_key(ir, tier)
        opt, speed = _TIERS[tier]
        cached = _disk_read(key)
        eng.pending[sym] = (key, cached)
        try:
            if cached is None:
                module.verify()
                if speed is not None:  # skipped on a disk hit: MCJIT takes the object code as it is
                    pto = llvm.create_pipeline_tuning_options(speed_level=speed)
                    pb = llvm.create_pass_builder(eng.machine, pto)
                    pb.getModulePassManager().run(module, pb)
            eng.add_module(module)
            eng.finalize_object()
            if cached is not None:
                STATS["disk_hits"] += 1
            return _SIGNATURE(eng.get_function_address(sym))
        finally:
            eng.pending.pop(sym, None)


def _version() -> str:
    from .. import __version__
    return __version__


def tier_up(entry: list) -> None:
    """Compile a hot block's IR again at the higher tier; `entry` (a COMPILED value) then holds the new function."""
    if entry[2] >= 1:
        return
    t = time.perf_counter()
    entry[0] = _jit(entry[1], entry[3], 1)
    entry[2] = 1
    STATS["tier_up_s"] += time.perf_counter() - t
    STATS["tier_ups"] += 1


def translate(code: bytes, pc: int, arch: str, lanes: int, vgprs: int, ctx=None, base: int = 0) -> Block | None:
    """The block of covered instructions at the start of `code` (the bytes at `pc` onward), or None when the first
    instruction is not covered. With `ctx`, every instruction must also compile for the interpreter
    (compile.compile_instr): a block never runs an instruction the interpreter would refuse."""
    if arch not in ("gfx1100", "gfx942") or (arch == "gfx942" and ctx is None):
        return None
    from .compile import compile_instr, gfx9_as_gfx11
    b = _Builder(lanes, vgprs, arch, ctx)
    offset, texts = 0, []
    while len(texts) < MAX_BLOCK and offset + 4 <= len(code):
        try:
            instr = decode(code, offset, arch)
        except Exception:
            break
        if instr.mnemonic is None or offset + instr.size > len(code):
            break
        saved = (list(b.e.lines), b.e.n, b.e.cur, b.writes_exec)
        try:
            if ctx is not None:
                instr.pc = pc + offset - base
                compile_instr(instr, ctx)
            if arch == "gfx942":  # the gfx11 vocabulary the interpreter also translates GFX9 code into
                if "sdwa" in instr.fields or "dpp" in instr.fields:
                    raise Refused("SDWA / DPP")
                instr = gfx9_as_gfx11(instr, ctx)
            b.offset = offset
            b.add(instr)
        except Exception:  # Refused, or the interpreter's own refusal: the block ends before this instruction
            b.e.lines, b.e.n, b.e.cur, b.writes_exec = saved
            break
        texts.append(instr.mnemonic)
        offset += instr.size
        if b.ends:
            break
    if not texts:
        return None
    body = code[:offset]
    key = (_version(), arch, lanes, vgprs, body)
    found = COMPILED.get(key)
    if found is None:
        name = "blk_" + hashlib.sha256(repr(key).encode()).hexdigest()[:24]
        ir = b.ir(name, offset)
        t = time.perf_counter()
        fn = _jit(ir, name)
        STATS["compile_s"] += time.perf_counter() - t
        STATS["blocks"] += 1
        STATS["instructions"] += len(texts)
        found = COMPILED[key] = [fn, ir, 0, name]
    return Block(pc, body, len(texts), texts, found, b.writes_exec, found[1], b.ends)


class Translator:
    """A shader core's blocks by start PC and wave shape, each checked against the code bytes on every entry. A PC
    is translated on its `HOT`-th issue (earlier issues interpret it): code that runs once, such as a one-batch
    kernel's prologue, is never compiled."""

    SCAN = MAX_BLOCK * 12  # code bytes read when a block is formed
    HOT = 2
    CAPACITY = 32768  # PCs remembered; past that the table starts over (blocks stay in COMPILED)

    def __init__(self, arch: str):
        self.arch = arch
        self.blocks: dict = {}  # (pc, lanes, vgprs) -> (bytes that must still be there, Block or None)
        self.visits: dict = {}  # (pc, lanes, vgprs) -> issues seen before its block was formed
        self.stats = {"block_runs": 0, "block_steps": 0}

    def block(self, pc: int, W, memory, ctx=None, base: int = 0) -> Block | None:
        m = memory.find(pc)
        if m is None or not (m.executable and m.readable):
            return None
        key = (pc, W.lanes, W.vgprs)
        hit = self.blocks.get(key)
        if hit is not None:
            code, blk = hit
            if pc + len(code) <= m.end and ctypes.string_at(pc + m.shift, len(code)) == code:
                return blk
        seen = self.visits.get(key, 0) + 1
        if seen < self.HOT:
            self.visits[key] = seen
            return None
        self.visits.pop(key, None)
        if len(self.blocks) >= self.CAPACITY:
            self.blocks.clear()
            self.visits.clear()
        code = ctypes.string_at(pc + m.shift, min(self.SCAN, m.end - pc))
        blk = translate(code, pc, self.arch, W.lanes, W.vgprs, ctx, base)
        self.blocks[key] = (blk.code if blk is not None else code[:16], blk)
        return blk
