"""Operands of shader instructions: the compile context, source readers and destination writers.

Readers and writers are built once per instruction at compile time (register numbers, inline constants,
literals, modifiers resolved) and called per execution with the wave state `W` and a wave selection `w`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import EngineError, UnsupportedError
from . import fast
from . import formats as fm
from .alu import DTYPES, U16, U32, U64, WIDTH
from .decoder import Instr
from .waves import EXEC, M0, NULL, VCC, Waves

SHARED_APERTURE = 1 << 48  # facts 1.2: the LDS aperture of flat addresses (high 32 bits in src_shared_base)
PRIVATE_APERTURE = 2 << 48
# src_shared_base / limit, src_private_base / limit: the aperture address each names (32-bit operands read its high
# 32 bits, as a register holding them; 16-bit operands one half of those)
APERTURE_CODES = {fm.SRC_SHARED_BASE: SHARED_APERTURE, fm.SRC_PRIVATE_BASE: PRIVATE_APERTURE,
                  fm.SRC_SHARED_LIMIT: SHARED_APERTURE + (1 << 32) - 1, fm.SRC_PRIVATE_LIMIT: PRIVATE_APERTURE + (1 << 32) - 1}


class ShaderUnsupported(UnsupportedError):
    pass


class ShaderFault(EngineError):
    kind = "shader fault"


@dataclass
class Context:
    """What compilation needs to know about the dispatch."""

    lanes: int
    vgprs: int
    space: object  # AddressSpace, for memory instructions
    kernel: str  # "kernel at 0x..." for messages
    arch: str = "gfx1100"
    ieee: bool = True  # RSRC1.IEEE_MODE: min/max quiet signalling NaNs
    dx10_clamp: bool = True  # RSRC1.DX10_CLAMP: clamp turns NaN into 0

    @property
    def null(self) -> int:
        """The NULL operand code: 124 on gfx11; GFX9 has none (124 is M0 there)."""
        return NULL if self.arch == "gfx1100" else -1

    @property
    def m0(self) -> int:
        return M0 if self.arch == "gfx1100" else 124

    @property
    def true16(self) -> bool:
        """gfx11 e32 16-bit operands name register halves (v0.h); GFX9 uses SDWA instead."""
        return self.arch == "gfx1100"

    def unsupported(self, instr: Instr, why: str) -> ShaderUnsupported:
        words = " ".join(f"{x:08x}" for x in instr.words)
        return ShaderUnsupported(f"{self.kernel}, PC +0x{instr.pc:x}: {instr.family} instruction {words} "
                                 f"({instr.mnemonic or 'unknown opcode ' + hex(instr.op)}): {why}")


Run = Callable[[Waves, object], None]


# ---------------------------------------------------------------------------------------------------
# operands


def _const_bits(code: int, bits: int, is_float: bool, literal: int | None, null: int = NULL) -> int | None:
    if code == fm.LITERAL:
        if literal is None:
            return None
        if bits == 64:  # a 32-bit literal for a 64-bit operand: the high half for floats, zero-extended else
            return literal << 32 if is_float else literal
        return literal & ((1 << bits) - 1)
    if code in APERTURE_CODES:  # a 64-bit operand reads the whole address (LLVM: s_mov_b64 s[0:1], src_shared_base)
        return APERTURE_CODES[code] if bits == 64 else APERTURE_CODES[code] >> 32
    if code == null:
        return 0
    return fm.inline_bits(code, bits, is_float)


def _to_type(raw, typ: str):
    """Raw bits (uint32 for <= 32-bit types, uint64 pairs for 64-bit) -> the type's numpy dtype."""
    dt = DTYPES[typ]
    if WIDTH[typ] == 16:
        return raw.astype(U16).view(dt) if isinstance(raw, np.ndarray) else np.array(raw, U16).view(dt)[()]
    if isinstance(raw, np.ndarray):
        return raw.view(dt)
    return np.array(raw, U64 if WIDTH[typ] == 64 else U32).view(dt)[()]


def vsrc(ctx: Context, instr: Instr, code: int, typ: str, hi: bool = False) -> Callable:
    """Reader of a VALU source: f(W, w) -> array [nw, lanes] or [nw, 1] or a scalar, of the type's dtype.
    `hi` selects the high 16 bits of a 32-bit register for 16-bit operands (opsel)."""
    bits = WIDTH[typ]
    if code in fm.DPP_SRC0:
        raise ctx.unsupported(instr, "DPP operands are not emulated")
    if code >= fm.VGPR_BASE:
        r = code - fm.VGPR_BASE
        if r + (2 if bits == 64 else 1) > ctx.vgprs:
            raise ctx.unsupported(instr, f"reads v{r}, beyond the {ctx.vgprs} VGPRs the kernel allocated")
        if bits == 64:
            return lambda W, w: (W.v[w, r].astype(U64) | W.v[w, r + 1].astype(U64) << U64(32)).view(DTYPES[typ])
        if bits == 16:
            sh = U32(16 if hi else 0)
            return lambda W, w: ((W.v[w, r] >> sh) & U32(0xFFFF)).astype(U16).view(DTYPES[typ])
        dt = DTYPES[typ]
        return lambda W, w: W.v[w, r].view(dt)
    if code < 128 and code != ctx.null:
        if bits == 64:
            return lambda W, w: (W.s[w, code].astype(U64) | W.s[w, code + 1].astype(U64) << U64(32)).view(
                DTYPES[typ])[:, None]
        if bits == 16:
            sh = U32(16 if hi else 0)
            return lambda W, w: ((W.s[w, code] >> sh) & U32(0xFFFF)).astype(U16).view(DTYPES[typ])[:, None]
        dt = DTYPES[typ]
        return lambda W, w: W.s[w, code].view(dt)[:, None]
    if code == fm.SRC_SCC:
        return lambda W, w: W.scc[w].astype(U32).view(DTYPES[typ])[:, None] if bits == 32 else \
            W.scc[w].astype(DTYPES[typ])[:, None]
    is_float = typ.startswith("f")
    if bits == 16 and code == fm.LITERAL and instr.literal is not None:  # a packed literal holds both halves
        value = (instr.literal >> 16 if hi else instr.literal) & 0xFFFF
    elif bits == 16 and code in APERTURE_CODES:  # a 32-bit register value: a 16-bit operand reads one half of it
        value = (_const_bits(code, 32, False, None, ctx.null) >> (16 if hi else 0)) & 0xFFFF
    else:
        value = _const_bits(code, bits, is_float, instr.literal, ctx.null)
    if value is None:
        raise ctx.unsupported(instr, f"operand {code} is not an operand the shader core knows")
    c = _to_type(value, typ)
    return lambda W, w: c


def true16(code: int) -> tuple[int, bool]:
    """gfx11 true16 e32 encoding of a 16-bit VGPR operand: bit 7 of the register number picks the high half
    (v0.h), so only v0..v127 are reachable. Non-VGPR operands are unchanged."""
    if code < fm.VGPR_BASE:
        return code, False
    r = code - fm.VGPR_BASE
    return fm.VGPR_BASE + (r & 0x7F), bool(r & 0x80)


_SIGN = {16: U16(0x8000), 32: U32(0x80000000), 64: U64(0x8000000000000000)}
_BITS = {16: U16, 32: U32, 64: U64}


def source_modifiers(read: Callable, typ: str, abs_: bool, neg: bool) -> Callable:
    """Source modifiers: |x| and -x on float operands; on raw-bit operands (v_cndmask_b32, v_mov) the same
    operations on the sign bit, as the hardware applies them. Integer operands take none (callers refuse
    modifier bits on them: `check_no_int_modifiers`)."""
    if not (abs_ or neg) or typ[0] in "ui":
        return read
    if typ[0] == "b":
        sign = _SIGN[WIDTH[typ]]
        dt = _BITS[WIDTH[typ]]

        def mod_bits(W, w):
            x = np.asarray(read(W, w)).astype(dt, copy=False)
            if abs_:
                x = x & ~sign
            return x ^ sign if neg else x
        return mod_bits

    sign = _SIGN[WIDTH[typ]]
    bits_t = _BITS[WIDTH[typ]]

    def mod(W, w):  # on the sign bit, as the hardware does: numpy's abs/negative of a NaN is its SIMD path's choice
        x = np.asarray(read(W, w))
        if x.dtype.itemsize != bits_t().itemsize:
            raise AssertionError(f"a {typ} source read as {x.dtype}")
        b = x.view(bits_t)
        if abs_:
            b = b & ~sign
        return (b ^ sign if neg else b).view(x.dtype)
    return mod


def check_no_int_modifiers(ctx: "Context", instr: Instr, types, abs_bits: int, neg_bits: int) -> None:
    """neg/abs bits on an integer operand have no defined meaning: refuse them instead of ignoring them."""
    for i, typ in enumerate(types):
        if typ[0] in "ui" and ((abs_bits >> i) & 1 or (neg_bits >> i) & 1):
            raise ctx.unsupported(instr, f"neg/abs modifier on integer source {i} ({typ})")


def vdst_writer(ctx: Context, instr: Instr, reg: int, typ: str, hi: bool = False, zero_hi: bool = False) -> Callable:
    """Writer of a VALU result to VGPR `reg`: f(W, w, value, lanes). A 16-bit result goes to the low or
    (`hi`) high half, keeping the other half, or with `zero_hi` zeroing the high half (GFX9 16-bit ops)."""
    bits = WIDTH[typ]
    if reg + (2 if bits == 64 else 1) > ctx.vgprs:
        raise ctx.unsupported(instr, f"writes v{reg}, beyond the {ctx.vgprs} VGPRs the kernel allocated")
    if bits == 64:
        def write64(W, w, value, lanes):
            u = bcast(np.asarray(value).view(U64) if np.asarray(value).dtype.itemsize == 8
                      else np.asarray(value).astype(U64), lanes.shape)
            lo, hi = u.astype(U32), (u >> U64(32)).astype(U32)  # astype keeps the low 32 bits
            if W.all_lanes(lanes):
                W.v[w, reg], W.v[w, reg + 1] = lo, hi
            else:
                W.v[w, reg] = np.where(lanes, lo, W.v[w, reg])
                W.v[w, reg + 1] = np.where(lanes, hi, W.v[w, reg + 1])
        return write64
    if bits == 16:
        sh = U32(16 if hi else 0)
        keep = U32(0x0000FFFF if hi else (0 if zero_hi else 0xFFFF0000))
        def write16(W, w, value, lanes):
            u = np.asarray(value).view(U16).astype(U32) << sh
            old = W.v[w, reg]
            W.v[w, reg] = np.where(lanes, (old & keep) | u, old)
        return write16
    def write32(W, w, value, lanes):
        v = np.asarray(value)
        u = v.view(U32) if v.dtype.itemsize == 4 else v.astype(U32)
        if W.all_lanes(lanes):  # every lane active (the common case): a plain store, no merge with the old value
            W.v[w, reg] = u
        else:
            W.v[w, reg] = np.where(lanes, u, W.v[w, reg])
    return write32


def bcast(x, shape):
    """`np.broadcast_to(x, shape)`, for callers that only read the result; an array of that shape already is
    returned as it is (fast path: broadcast_to costs microseconds per call)."""
    if fast.enabled and getattr(x, "shape", None) == shape:
        return x
    return np.broadcast_to(x, shape)


def float_post(typ: str, clamp: int, omod: int, dx10_clamp: bool = True) -> Callable | None:
    """Output modifiers of float results: omod scales by 2, 4 or 0.5, then clamp to [0, 1] (a NaN clamps to
    0 in DX10 mode, and stays NaN otherwise)."""
    if not typ.startswith("f") or not (clamp or omod):
        return None
    scale = {0: None, 1: 2.0, 2: 4.0, 3: 0.5}[omod]
    def post(x):
        with np.errstate(all="ignore"):
            if scale is not None:
                x = (x * x.dtype.type(scale)).astype(x.dtype)
            if clamp:
                nan = np.isnan(x)
                x = np.clip(x, 0, 1).astype(x.dtype)
                x = np.where(nan, x.dtype.type(0) if dx10_clamp else x, x)
        return x
    return post


def advance(size: int):
    s = np.int64(size)
    def step(W, w):
        if W.n == 1 and fast.enabled:  # fast path: one wave (any selection is that wave), an element update
            W.pc[0] += s
        else:
            W.pc[w] += s
    return step



def ssrc(ctx: Context, instr: Instr, code: int, dwords: int) -> Callable:
    """Scalar source reader: f(W, w) -> uint32 [nw] (or uint64 [nw] for 2-dword operands)."""
    if code < 128 and code != ctx.null:
        if dwords == 2:
            return lambda W, w: W.s[w, code].astype(U64) | W.s[w, code + 1].astype(U64) << U64(32)
        return lambda W, w: W.s[w, code]
    if code == fm.SRC_SCC:
        return lambda W, w: W.scc[w].astype(U64 if dwords == 2 else U32)
    if code == fm.SRC_EXECZ or code == fm.SRC_VCCZ:
        reg = EXEC if code == fm.SRC_EXECZ else VCC
        return lambda W, w: (W.mask64(w, reg) == 0).astype(U64 if dwords == 2 else U32)
    value = _const_bits(code, 64 if dwords == 2 else 32, False, instr.literal, ctx.null)
    if value is None:
        raise ctx.unsupported(instr, f"scalar operand {code} is not supported")
    if dwords == 2 and code == fm.LITERAL:  # a 32-bit literal of a 64-bit SALU operand is zero-extended
        value = instr.literal
    c = U64(value) if dwords == 2 else U32(value & 0xFFFFFFFF)
    return lambda W, w: c


def sdst_writer(ctx: Context, instr: Instr, reg: int, dwords: int) -> Callable:
    if reg == ctx.null:
        return lambda W, w, v: None
    if reg >= 128 or (reg > 105 and reg not in (VCC, VCC + 1, ctx.m0, EXEC, EXEC + 1) and not 108 <= reg < 124):
        raise ctx.unsupported(instr, f"scalar destination {reg} is not writable")
    touches_exec = reg in (EXEC, EXEC + 1) or (dwords == 2 and reg + 1 == EXEC)
    if dwords == 2:
        def write64(W, w, v):
            v = np.asarray(v).astype(U64)
            W.s[w, reg] = (v & U64(0xFFFFFFFF)).astype(U32)
            W.s[w, reg + 1] = (v >> U64(32)).astype(U32)
            if touches_exec:
                W.exec_written()
        return write64
    def write32(W, w, v):
        W.s[w, reg] = np.asarray(v).astype(U32)
        if touches_exec:
            W.exec_written()
    return write32


def operand_shape(instr: Instr) -> list[int]:
    """Operand widths in dwords from the opcode table's shape "D:S0,S1"."""
    shape = instr.shape or "1:1,1"
    dst, _, srcs = shape.partition(":")
    return [int(dst or 0)] + [int(x) if x.isdigit() else 1 for x in srcs.split(",") if x]


def set_scc(W, w, scc):
    if scc is not None:
        W.scc[w] = np.asarray(scc).astype(bool)
