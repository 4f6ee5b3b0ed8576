"""Decoded instructions -> closures that execute them for a selection of waves at once.

`compile_instr(instr, ctx)` returns `run(W, w)`: W is the `Waves` state, w a selection of waves that all
sit at this instruction. The closure reads operands for all those waves (arrays [waves, lanes] or
[waves]), computes, writes under EXEC and sets the waves' next PC. Operand decoding (register, inline
constant, literal, modifiers) happens once here, not per execution.

An instruction the core does not implement raises `ShaderUnsupported` at compile time, naming the
instruction word, its format, mnemonic and PC; nothing runs with a wrong answer.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import EngineError, UnsupportedError
from . import alu
from . import formats as fm
from . import lanemem
from .alu import DTYPES, F16, F32, F64, I32, U16, U32, U64, WIDTH
from .decoder import Instr, sext
from .disasm import format_instr
from .waves import EXEC, M0, NULL, VCC, Waves

SHARED_APERTURE = 1 << 48  # facts 1.2: the LDS aperture of flat addresses (high 32 bits in src_shared_base)
PRIVATE_APERTURE = 2 << 48


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

    def unsupported(self, instr: Instr, why: str) -> ShaderUnsupported:
        words = " ".join(f"{x:08x}" for x in instr.words)
        return ShaderUnsupported(f"{self.kernel}, PC +0x{instr.pc:x}: {instr.family} instruction {words} "
                                 f"({instr.mnemonic or 'unknown opcode ' + hex(instr.op)}): {why}")


Run = Callable[[Waves, object], None]


# ---------------------------------------------------------------------------------------------------
# operands


def _const_bits(code: int, bits: int, is_float: bool, literal: int | None) -> int | None:
    if code == fm.LITERAL:
        if literal is None:
            return None
        if bits == 64:  # a 32-bit literal for a 64-bit operand: the high half for floats, zero-extended else
            return literal << 32 if is_float else literal
        return literal & ((1 << bits) - 1)
    if code == fm.SRC_SHARED_BASE:
        return SHARED_APERTURE >> 32
    if code == fm.SRC_PRIVATE_BASE:
        return PRIVATE_APERTURE >> 32
    if code == fm.SRC_SHARED_LIMIT:
        return (SHARED_APERTURE + (1 << 32) - 1) >> 32
    if code == fm.SRC_PRIVATE_LIMIT:
        return (PRIVATE_APERTURE + (1 << 32) - 1) >> 32
    if code == NULL:
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
    if code < 128 and code != NULL:
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
    else:
        value = _const_bits(code, bits, is_float, instr.literal)
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


def _modifiers(read: Callable, typ: str, abs_: bool, neg: bool) -> Callable:
    if not (abs_ or neg):
        return read
    if not typ.startswith("f"):
        return read  # integer operands ignore the float modifiers
    def mod(W, w):
        x = read(W, w)
        if abs_:
            x = np.abs(x)
        return -x if neg else x
    return mod


def vdst_writer(ctx: Context, instr: Instr, reg: int, typ: str, hi: bool = False) -> Callable:
    """Writer of a VALU result to VGPR `reg`: f(W, w, value, lanes)."""
    bits = WIDTH[typ]
    if reg + (2 if bits == 64 else 1) > ctx.vgprs:
        raise ctx.unsupported(instr, f"writes v{reg}, beyond the {ctx.vgprs} VGPRs the kernel allocated")
    if bits == 64:
        def write64(W, w, value, lanes):
            u = np.broadcast_to(np.asarray(value).view(U64) if np.asarray(value).dtype.itemsize == 8
                                else np.asarray(value).astype(U64), lanes.shape)
            W.v[w, reg] = np.where(lanes, (u & U64(0xFFFFFFFF)).astype(U32), W.v[w, reg])
            W.v[w, reg + 1] = np.where(lanes, (u >> U64(32)).astype(U32), W.v[w, reg + 1])
        return write64
    if bits == 16:
        sh = U32(16 if hi else 0)
        keep = U32(0x0000FFFF if hi else 0xFFFF0000)
        def write16(W, w, value, lanes):
            u = np.asarray(value).view(U16).astype(U32) << sh
            old = W.v[w, reg]
            W.v[w, reg] = np.where(lanes, (old & keep) | u, old)
        return write16
    def write32(W, w, value, lanes):
        v = np.asarray(value)
        u = v.view(U32) if v.dtype.itemsize == 4 else v.astype(U32)
        W.v[w, reg] = np.where(lanes, u, W.v[w, reg])
    return write32


def _float_post(typ: str, clamp: int, omod: int) -> Callable | None:
    if not typ.startswith("f") or not (clamp or omod):
        return None
    scale = {0: None, 1: 2.0, 2: 4.0, 3: 0.5}[omod]
    def post(x):
        if scale is not None:
            x = (x * x.dtype.type(scale)).astype(x.dtype)
        if clamp:
            x = np.clip(x, 0, 1).astype(x.dtype)
        return x
    return post


def _advance(size: int):
    s = np.int64(size)
    def step(W, w):
        W.pc[w] += s
    return step


# ---------------------------------------------------------------------------------------------------
# VALU


def _sources(instr: Instr) -> list[int]:
    f = instr.fields
    if instr.family == "VOP1":
        return [f["src0"]]
    if instr.family in ("VOP2", "VOPC"):
        return [f["src0"], f["vsrc1"] + fm.VGPR_BASE]
    return [f["src0"], f["src1"], f["src2"]]


def compile_valu(instr: Instr, ctx: Context) -> Run:
    name = instr.mnemonic
    fam = instr.family
    f = instr.fields
    cmp = alu.compare(name)
    if cmp is not None:
        return _compile_vcmp(instr, ctx, *cmp)
    if name in alu.CARRY:
        return _compile_carry(instr, ctx)
    special = _SPECIAL_VALU.get(name)
    if special is not None:
        return special(instr, ctx)
    if name not in alu.VALU:
        raise ctx.unsupported(instr, "VALU operation not implemented by the shader core")
    out_t, in_ts, fn = alu.VALU[name]
    srcs = _sources(instr)
    vop3 = fam in ("VOP3", "VOP3SD")
    abs_bits, neg_bits = (f.get("abs", 0), f.get("neg", 0)) if vop3 else (0, 0)
    opsel = f.get("opsel", 0) if vop3 else 0
    readers = []
    e32 = fam in ("VOP1", "VOP2")
    for i, typ in enumerate(in_ts):
        if typ == "mask":  # v_cndmask: VCC in e32, an SGPR mask in VOP3 src2
            code = f["src2"] if vop3 else VCC
            readers.append(lambda W, w, c=code: W.lanes_of(w, c))
            continue
        if name in ("v_fmac_f32", "v_fmac_f16") and i == 2:
            code = f["vdst"] + fm.VGPR_BASE
        elif name == "v_fmaak_f32" and i == 2 or name == "v_fmamk_f32" and i == 1:
            code = fm.LITERAL
        elif name == "v_fmamk_f32" and i == 2:
            code = srcs[1]
        else:
            code = srcs[i]
        if e32 and WIDTH[typ] == 16:
            code, hi = true16(code)
        else:
            hi = bool(opsel >> i & 1)
        r = vsrc(ctx, instr, code, typ, hi=hi)
        readers.append(_modifiers(r, typ, bool(abs_bits >> i & 1), bool(neg_bits >> i & 1)))
    if e32 and WIDTH[out_t] == 16:
        dst, dst_hi = true16(f["vdst"] + fm.VGPR_BASE)
        write = vdst_writer(ctx, instr, dst - fm.VGPR_BASE, out_t, hi=dst_hi)
    else:
        write = vdst_writer(ctx, instr, f["vdst"], out_t, hi=bool(opsel >> 3 & 1))
    post = _float_post(out_t, f.get("clamp", 0), f.get("omod", 0)) if vop3 else None
    if vop3 and f.get("clamp") and not out_t.startswith("f"):
        raise ctx.unsupported(instr, "integer clamp (saturation) is not emulated")
    dt = DTYPES[out_t]
    step = _advance(instr.size)

    def run(W, w):
        lanes = W.exec_lanes(w)
        value = fn(*[r(W, w) for r in readers])
        value = np.asarray(value).astype(dt, copy=False)
        if post is not None:
            value = post(value)
        write(W, w, value, lanes)
        step(W, w)
    return run


def _mask_dst(instr: Instr) -> int:
    """Where a VOPC / carry lane mask goes: VCC for e32, the SGPR in vdst (VOP3) or sdst (VOP3SD)."""
    if instr.family == "VOPC" or instr.family == "VOP2":
        return VCC
    return instr.fields["sdst"] if instr.family == "VOP3SD" else instr.fields["vdst"]


def _compile_vcmp(instr: Instr, ctx: Context, typ: str, pred, writes_exec: bool) -> Run:
    srcs = _sources(instr)
    f = instr.fields
    vop3 = instr.family == "VOP3"
    abs_bits, neg_bits = (f.get("abs", 0), f.get("neg", 0)) if vop3 else (0, 0)
    opsel = f.get("opsel", 0) if vop3 else 0
    (c0, h0), (c1, h1) = [true16(c) if not vop3 and WIDTH[typ] == 16 else (c, bool(opsel >> i & 1))
                          for i, c in enumerate(srcs[:2])]
    ra = _modifiers(vsrc(ctx, instr, c0, typ, h0), typ, bool(abs_bits & 1), bool(neg_bits & 1))
    rb = _modifiers(vsrc(ctx, instr, c1, typ, h1), typ, bool(abs_bits & 2), bool(neg_bits & 2))
    dst = EXEC if writes_exec else _mask_dst(instr)
    step = _advance(instr.size)

    def run(W, w):
        lanes = W.exec_lanes(w)
        result = np.broadcast_to(pred(ra(W, w), rb(W, w)), lanes.shape) & lanes  # inactive lanes read 0
        W.set_mask(w, dst, result)
        step(W, w)
    return run


def _compile_carry(instr: Instr, ctx: Context) -> Run:
    fn, carry_in, swap = alu.CARRY[instr.mnemonic]
    srcs = _sources(instr)
    ra, rb = vsrc(ctx, instr, srcs[0], "u32"), vsrc(ctx, instr, srcs[1], "u32")
    if swap:
        ra, rb = rb, ra
    vop3 = instr.family == "VOP3SD"
    cin = (srcs[2] if vop3 else VCC) if carry_in else None
    cout = _mask_dst(instr)
    write = vdst_writer(ctx, instr, instr.fields["vdst"], "u32")
    step = _advance(instr.size)

    def run(W, w):
        lanes = W.exec_lanes(w)
        ci = W.lanes_of(w, cin) if cin is not None else np.zeros(lanes.shape, bool)
        value, carry = fn(ra(W, w), rb(W, w), ci)
        write(W, w, value, lanes)
        if cout != NULL:
            W.set_mask(w, cout, np.broadcast_to(carry, lanes.shape) & lanes)
        step(W, w)
    return run


def _compile_mad64(instr: Instr, ctx: Context) -> Run:
    signed = instr.mnemonic == "v_mad_i64_i32"
    srcs = _sources(instr)
    ra = vsrc(ctx, instr, srcs[0], "i32" if signed else "u32")
    rb = vsrc(ctx, instr, srcs[1], "i32" if signed else "u32")
    rc = vsrc(ctx, instr, srcs[2], "i64" if signed else "u64")
    write = vdst_writer(ctx, instr, instr.fields["vdst"], "u64")
    cout = instr.fields["sdst"]
    step = _advance(instr.size)

    def run(W, w):
        lanes = W.exec_lanes(w)
        a, b, c = ra(W, w), rb(W, w), rc(W, w)
        if signed:  # the 64-bit sum wraps; the carry-out of the signed form is not modelled (always 0)
            value = np.asarray(a.astype(np.int64) * b.astype(np.int64) + c).view(U64)
            carry = np.zeros(lanes.shape, bool)
        else:
            prod = a.astype(U64) * b.astype(U64)
            value = prod + c
            carry = np.broadcast_to(value < prod, lanes.shape)
        write(W, w, np.broadcast_to(value, lanes.shape), lanes)
        if cout != NULL:
            W.set_mask(w, cout, carry & lanes)
        step(W, w)
    return run


def _compile_div_scale(instr: Instr, ctx: Context) -> Run:
    """v_div_scale_*: hcqsim never scales (exact division below); VCC (sdst) = 0, result = src0."""
    typ = "f64" if instr.mnemonic.endswith("f64") else "f32"
    ra = vsrc(ctx, instr, instr.fields["src0"], typ)
    write = vdst_writer(ctx, instr, instr.fields["vdst"], typ)
    cout = instr.fields["sdst"]
    step = _advance(instr.size)
    f = instr.fields

    def run(W, w):
        lanes = W.exec_lanes(w)
        a = ra(W, w)
        if f.get("neg", 0) & 1:
            a = -a
        write(W, w, np.broadcast_to(a, lanes.shape), lanes)
        if cout != NULL:
            W.set_mask(w, cout, np.zeros(lanes.shape, bool))
        step(W, w)
    return run


def _compile_readfirstlane(instr: Instr, ctx: Context) -> Run:
    src = vsrc(ctx, instr, instr.fields["src0"], "b32")
    sdst = instr.fields["vdst"]
    step = _advance(instr.size)

    def run(W, w):
        lanes = W.exec_lanes(w)
        values = np.broadcast_to(src(W, w), lanes.shape)
        first = np.where(lanes.any(axis=1), lanes.argmax(axis=1), 0)
        W.s[w, sdst] = values[np.arange(values.shape[0]), first]
        step(W, w)
    return run


def _compile_readlane(instr: Instr, ctx: Context) -> Run:
    src = vsrc(ctx, instr, instr.fields["src0"], "b32")
    lane = vsrc(ctx, instr, instr.fields["src1"], "u32")
    sdst = instr.fields["vdst"]
    step = _advance(instr.size)

    def run(W, w):
        values = np.broadcast_to(src(W, w), (W.s[w, 0].shape[0], W.lanes))
        sel = np.broadcast_to(lane(W, w), (values.shape[0], 1))[:, 0].astype(np.int64) % W.lanes
        W.s[w, sdst] = values[np.arange(values.shape[0]), sel]
        step(W, w)
    return run


def _compile_writelane(instr: Instr, ctx: Context) -> Run:
    src = vsrc(ctx, instr, instr.fields["src0"], "b32")
    lane = vsrc(ctx, instr, instr.fields["src1"], "u32")
    dst = instr.fields["vdst"]
    step = _advance(instr.size)

    def run(W, w):
        n = W.s[w, 0].shape[0]
        value = np.broadcast_to(src(W, w), (n, 1))[:, 0]
        sel = np.broadcast_to(lane(W, w), (n, 1))[:, 0].astype(np.int64) % W.lanes
        mask = np.zeros((n, W.lanes), bool)
        mask[np.arange(n), sel] = True
        W.v[w, dst] = np.where(mask, value[:, None], W.v[w, dst])
        step(W, w)
    return run


def _compile_cmp_class(instr: Instr, ctx: Context) -> Run:
    typ = instr.mnemonic.rsplit("_", 1)[1]
    srcs = _sources(instr)
    ra, rb = vsrc(ctx, instr, srcs[0], typ), vsrc(ctx, instr, srcs[1], "u32")
    dst = EXEC if instr.mnemonic.startswith("v_cmpx") else _mask_dst(instr)
    step = _advance(instr.size)

    def run(W, w):
        lanes = W.exec_lanes(w)
        x, m = np.broadcast_to(ra(W, w), lanes.shape), np.broadcast_to(rb(W, w), lanes.shape)
        bits = x.view(U16 if x.dtype == F16 else U32 if x.dtype == F32 else U64)
        info = np.finfo(x.dtype)
        quiet_bit = {2: 0x200, 4: 0x400000, 8: 0x8000000000000}[x.dtype.itemsize]
        neg = np.signbit(x)
        nan = np.isnan(x)
        classes = [nan & ((bits & bits.dtype.type(quiet_bit)) == 0), nan & ((bits & bits.dtype.type(quiet_bit)) != 0),
                   np.isneginf(x), neg & (np.abs(x) >= info.tiny) & ~np.isinf(x) & ~nan,
                   neg & (x != 0) & (np.abs(x) < info.tiny), neg & (x == 0), ~neg & (x == 0),
                   ~neg & (x != 0) & (np.abs(x) < info.tiny) & ~nan, ~neg & (x >= info.tiny) & ~np.isinf(x),
                   np.isposinf(x)]
        hit = np.zeros(lanes.shape, bool)
        for i, c in enumerate(classes):
            hit |= c & ((m >> U32(i)) & U32(1)).astype(bool)
        W.set_mask(w, dst, hit & lanes)
        step(W, w)
    return run


def _compile_mbcnt(instr: Instr, ctx: Context) -> Run:
    """v_mbcnt_lo/hi_u32_b32: count of the mask bits below each lane (low or high 32 lanes), plus src1."""
    srcs = _sources(instr)
    mask, add = vsrc(ctx, instr, srcs[0], "u32"), vsrc(ctx, instr, srcs[1], "u32")
    hi = instr.mnemonic.startswith("v_mbcnt_hi")
    write = vdst_writer(ctx, instr, instr.fields["vdst"], "u32")
    step = _advance(instr.size)

    def run(W, w):
        lanes = W.exec_lanes(w)
        lane = W.lane_ids.astype(np.int64) - (32 if hi else 0)
        below = np.where(lane >= 32, 0xFFFFFFFF, (np.left_shift(1, np.clip(lane, 0, 32)) - 1)).astype(np.uint64)
        m = np.broadcast_to(mask(W, w), lanes.shape).astype(np.uint64)
        value = np.bitwise_count(m & below).astype(U32) + add(W, w)
        write(W, w, np.broadcast_to(value, lanes.shape), lanes)
        step(W, w)
    return run


_SPECIAL_VALU = {
    "v_mbcnt_lo_u32_b32": _compile_mbcnt, "v_mbcnt_hi_u32_b32": _compile_mbcnt,
    "v_readfirstlane_b32": _compile_readfirstlane, "v_readlane_b32": _compile_readlane,
    "v_writelane_b32": _compile_writelane, "v_mad_u64_u32": _compile_mad64, "v_mad_i64_i32": _compile_mad64,
    "v_div_scale_f32": _compile_div_scale, "v_div_scale_f64": _compile_div_scale,
    "v_cmp_class_f32": _compile_cmp_class, "v_cmp_class_f16": _compile_cmp_class,
    "v_cmp_class_f64": _compile_cmp_class, "v_cmpx_class_f32": _compile_cmp_class,
    "v_nop": lambda instr, ctx: _advance(instr.size),
}


def compile_vopd(instr: Instr, ctx: Context) -> Run:
    """Two VOP2-like halves sharing EXEC and the literal: both read their sources before either writes."""
    f = instr.fields
    from . import opcodes_gfx11 as ops
    halves = []
    for x, src0, vsrc1, vdst in (("x", f["srcx0"], f["vsrcx1"], f["vdstx"]), ("y", f["srcy0"], f["vsrcy1"], f["vdsty"])):
        op = f["opx"] if x == "x" else f["opy"]
        name = "v_" + ops.VOPD[op][0][len("v_dual_"):]
        if name not in alu.VALU:
            raise ctx.unsupported(instr, f"VOPD half {name} not implemented")
        out_t, in_ts, fn = alu.VALU[name]
        codes = {"v_fmac_f32": [src0, vsrc1 + 256, vdst + 256], "v_fmaak_f32": [src0, vsrc1 + 256, fm.LITERAL],
                 "v_fmamk_f32": [src0, fm.LITERAL, vsrc1 + 256]}.get(name, [src0, vsrc1 + 256])
        readers = []
        for typ, code in zip(in_ts, codes + [None] * 3):
            if typ == "mask":
                readers.append(lambda W, w: W.lanes_of(w, VCC))
            else:
                readers.append(vsrc(ctx, instr, code, typ))
        halves.append((readers, fn, DTYPES[out_t], vdst_writer(ctx, instr, vdst, out_t)))
    step = _advance(instr.size)

    def run(W, w):
        lanes = W.exec_lanes(w)
        results = [np.asarray(fn(*[r(W, w) for r in readers])).astype(dt, copy=False)
                   for readers, fn, dt, _ in halves]
        for (_, _, _, write), value in zip(halves, results):
            write(W, w, value, lanes)
        step(W, w)
    return run


_PACKED = {  # v_pk_* -> (half type, function on the two halves' arrays)
    "v_pk_add_f16": ("f16", lambda a, b: a + b), "v_pk_mul_f16": ("f16", lambda a, b: a * b),
    "v_pk_fma_f16": ("f16", lambda a, b, c: (a.astype(F64) * b + c).astype(F16)),
    "v_pk_min_f16": ("f16", np.fmin), "v_pk_max_f16": ("f16", np.fmax),
    "v_pk_add_u16": ("u16", lambda a, b: a + b), "v_pk_sub_u16": ("u16", lambda a, b: a - b),
    "v_pk_add_i16": ("i16", lambda a, b: a + b), "v_pk_sub_i16": ("i16", lambda a, b: a - b),
    "v_pk_mul_lo_u16": ("u16", lambda a, b: a * b),
    "v_pk_mad_u16": ("u16", lambda a, b, c: a * b + c), "v_pk_mad_i16": ("i16", lambda a, b, c: a * b + c),
    "v_pk_lshlrev_b16": ("u16", lambda s, x: x << (s & U16(15))),
    "v_pk_lshrrev_b16": ("u16", lambda s, x: x >> (s & U16(15))),
    "v_pk_ashrrev_i16": ("i16", lambda s, x: x >> (s & 15).astype(np.int16)),
    "v_pk_max_i16": ("i16", np.maximum), "v_pk_min_i16": ("i16", np.minimum),
    "v_pk_max_u16": ("u16", np.maximum), "v_pk_min_u16": ("u16", np.minimum),
}


def compile_vop3p(instr: Instr, ctx: Context) -> Run:
    """Packed 16-bit math: each half of the result from the halves OPSEL (low) and OPSEL_HI (high) pick."""
    f, name = instr.fields, instr.mnemonic
    if name not in _PACKED:
        raise ctx.unsupported(instr, "VOP3P operation not implemented")
    typ, fn = _PACKED[name]
    nsrc = fn.__code__.co_argcount
    opsel, opsel_hi = f["opsel"], f["opsel_hi"] | f["opsel_hi2"] << 2
    neg_lo, neg_hi = f["neg"], f["neg_hi"]
    is_float = typ == "f16"
    halves = []
    for i in range(nsrc):
        code = f[f"src{i}"]
        lo = vsrc(ctx, instr, code, typ, hi=bool(opsel >> i & 1))
        hi = vsrc(ctx, instr, code, typ, hi=bool(opsel_hi >> i & 1))
        if fm.is_inline_constant(code):  # an inline constant feeds both halves
            hi = lo
        halves.append((_modifiers(lo, typ, False, is_float and bool(neg_lo >> i & 1)),
                       _modifiers(hi, typ, False, is_float and bool(neg_hi >> i & 1))))
    dst = f["vdst"]
    if dst >= ctx.vgprs:
        raise ctx.unsupported(instr, f"writes v{dst}, beyond the {ctx.vgprs} VGPRs the kernel allocated")
    clamp = f["clamp"] and is_float
    dt = DTYPES[typ]
    step = _advance(instr.size)

    def run(W, w):
        lanes = W.exec_lanes(w)
        with np.errstate(all="ignore"):
            lo = np.asarray(fn(*[h[0](W, w) for h in halves])).astype(dt)
            hi = np.asarray(fn(*[h[1](W, w) for h in halves])).astype(dt)
        if clamp:
            lo, hi = np.clip(lo, 0, 1).astype(dt), np.clip(hi, 0, 1).astype(dt)
        bits = lo.view(U16).astype(U32) | hi.view(U16).astype(U32) << U32(16)
        W.v[w, dst] = np.where(lanes, bits, W.v[w, dst])
        step(W, w)
    return run


# ---------------------------------------------------------------------------------------------------
# SALU and program flow


def ssrc(ctx: Context, instr: Instr, code: int, dwords: int) -> Callable:
    """Scalar source reader: f(W, w) -> uint32 [nw] (or uint64 [nw] for 2-dword operands)."""
    if code < 128 and code != NULL:
        if dwords == 2:
            return lambda W, w: W.s[w, code].astype(U64) | W.s[w, code + 1].astype(U64) << U64(32)
        return lambda W, w: W.s[w, code]
    if code == fm.SRC_SCC:
        return lambda W, w: W.scc[w].astype(U64 if dwords == 2 else U32)
    if code == fm.SRC_EXECZ or code == fm.SRC_VCCZ:
        reg = EXEC if code == fm.SRC_EXECZ else VCC
        return lambda W, w: (W.mask64(w, reg) == 0).astype(U64 if dwords == 2 else U32)
    value = _const_bits(code, 64 if dwords == 2 else 32, False, instr.literal)
    if value is None:
        raise ctx.unsupported(instr, f"scalar operand {code} is not supported")
    if dwords == 2 and code == fm.LITERAL:  # a 32-bit literal of a 64-bit SALU operand is zero-extended
        value = instr.literal
    c = U64(value) if dwords == 2 else U32(value & 0xFFFFFFFF)
    return lambda W, w: c


def sdst_writer(ctx: Context, instr: Instr, reg: int, dwords: int) -> Callable:
    if reg == NULL:
        return lambda W, w, v: None
    if reg >= 128 or (reg > 105 and reg not in (VCC, VCC + 1, M0, EXEC, EXEC + 1) and not 108 <= reg < 124):
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


def _shape(instr: Instr) -> list[int]:
    """Operand widths in dwords from the opcode table's shape "D:S0,S1"."""
    shape = instr.shape or "1:1,1"
    dst, _, srcs = shape.partition(":")
    return [int(dst or 0)] + [int(x) if x.isdigit() else 1 for x in srcs.split(",") if x]


def _set_scc(W, w, scc):
    if scc is not None:
        W.scc[w] = np.asarray(scc).astype(bool)


def compile_sop2(instr: Instr, ctx: Context) -> Run:
    f, name = instr.fields, instr.mnemonic
    d, s0w, s1w = (_shape(instr) + [1, 1, 1])[:3]
    a, b = ssrc(ctx, instr, f["ssrc0"], s0w), ssrc(ctx, instr, f["ssrc1"], s1w)
    write = sdst_writer(ctx, instr, f["sdst"], d)
    step = _advance(instr.size)
    if name in ("s_cselect_b32", "s_cselect_b64"):
        def run(W, w):
            write(W, w, np.where(W.scc[w], a(W, w), b(W, w)))
            step(W, w)
        return run
    if name in alu.SALU_CARRY:
        fn = alu.SALU_CARRY[name]
        def run(W, w):
            r, c = fn(a(W, w), b(W, w), W.scc[w])
            write(W, w, r)
            W.scc[w] = c
            step(W, w)
        return run
    fn = alu.SALU2.get(name)
    if fn is None:
        raise ctx.unsupported(instr, "SALU operation not implemented")

    def run(W, w):
        r, scc = fn(a(W, w), b(W, w))
        write(W, w, r)
        _set_scc(W, w, scc)
        step(W, w)
    return run


def compile_sop1(instr: Instr, ctx: Context) -> Run:
    f, name = instr.fields, instr.mnemonic
    d, s0w = (_shape(instr) + [1, 1])[:2]
    step = _advance(instr.size)
    if name.endswith("_saveexec_b32") or name.endswith("_saveexec_b64"):
        op = name[2:name.index("_saveexec")]
        fn = alu.SAVEEXEC.get(op)
        if fn is None:
            raise ctx.unsupported(instr, "saveexec variant not implemented")
        a = ssrc(ctx, instr, f["ssrc0"], s0w)
        write = sdst_writer(ctx, instr, f["sdst"], d)
        wide = name.endswith("b64")

        def run(W, w):
            old = W.mask64(w, EXEC) if wide else W.s[w, EXEC].copy()
            new = fn(a(W, w), old)
            write(W, w, old)
            sdst_writer(ctx, instr, EXEC, 2 if wide else 1)(W, w, new)
            W.scc[w] = new != 0
            step(W, w)
        return run
    if name == "s_getpc_b64":
        write = sdst_writer(ctx, instr, f["sdst"], 2)
        def run(W, w):
            write(W, w, W.pc[w].astype(U64) + U64(instr.size))
            step(W, w)
        return run
    if name in ("s_setpc_b64", "s_swappc_b64"):
        a = ssrc(ctx, instr, f["ssrc0"], 2)
        write = sdst_writer(ctx, instr, f["sdst"], 2) if name == "s_swappc_b64" else None
        def run(W, w):
            target = a(W, w).astype(np.int64)
            if write is not None:
                write(W, w, W.pc[w].astype(U64) + U64(instr.size))
            W.pc[w] = target
        return run
    if name in ("s_cmov_b32", "s_cmov_b64"):
        a = ssrc(ctx, instr, f["ssrc0"], s0w)
        reg = f["sdst"]
        write = sdst_writer(ctx, instr, reg, d)
        old = ssrc(ctx, instr, reg, d)
        def run(W, w):
            write(W, w, np.where(W.scc[w], a(W, w), old(W, w)))
            step(W, w)
        return run
    fn = alu.SALU1.get(name)
    if fn is None:
        raise ctx.unsupported(instr, "SALU operation not implemented")
    a = ssrc(ctx, instr, f["ssrc0"], s0w)
    write = sdst_writer(ctx, instr, f["sdst"], d)

    def run(W, w):
        r, scc = fn(a(W, w))
        write(W, w, r)
        _set_scc(W, w, scc)
        step(W, w)
    return run


def compile_sopc(instr: Instr, ctx: Context) -> Run:
    f, name = instr.fields, instr.mnemonic
    parts = name.split("_")  # s_cmp_eq_u32, s_bitcmp1_b32
    step = _advance(instr.size)
    if parts[1] in ("bitcmp0", "bitcmp1"):
        wide = parts[2] == "b64"
        a, b = ssrc(ctx, instr, f["ssrc0"], 2 if wide else 1), ssrc(ctx, instr, f["ssrc1"], 1)
        want = parts[1] == "bitcmp1"
        def run(W, w):
            bit = (a(W, w).astype(U64) >> (b(W, w).astype(U64) & U64(63 if wide else 31))) & U64(1)
            W.scc[w] = (bit == 1) == want
            step(W, w)
        return run
    if len(parts) != 4 or parts[1] != "cmp" or parts[2] not in alu.SCMP:
        raise ctx.unsupported(instr, "scalar compare not implemented")
    wide = parts[3].endswith("64")
    a, b = ssrc(ctx, instr, f["ssrc0"], 2 if wide else 1), ssrc(ctx, instr, f["ssrc1"], 2 if wide else 1)
    pred, signed = alu.SCMP[parts[2]], parts[3].startswith("i")

    def run(W, w):
        x, y = a(W, w), b(W, w)
        if signed:
            x, y = np.asarray(x).view(np.int32), np.asarray(y).view(np.int32)
        W.scc[w] = pred(x, y)
        step(W, w)
    return run


def compile_sopk(instr: Instr, ctx: Context) -> Run:
    f, name = instr.fields, instr.mnemonic
    imm = sext(f["simm16"], 16)
    reg = f["sdst"]
    step = _advance(instr.size)
    if name.startswith("s_waitcnt") or name == "s_version":
        return step
    if name == "s_movk_i32":
        c = U32(imm & 0xFFFFFFFF)
        def run(W, w):
            W.s[w, reg] = c
            step(W, w)
        return run
    if name == "s_cmovk_i32":
        c = U32(imm & 0xFFFFFFFF)
        def run(W, w):
            W.s[w, reg] = np.where(W.scc[w], c, W.s[w, reg])
            step(W, w)
        return run
    if name == "s_addk_i32":
        c = U32(imm & 0xFFFFFFFF)
        def run(W, w):
            r, ov = alu._sadd_i32(W.s[w, reg], c)
            W.s[w, reg] = r
            W.scc[w] = ov
            step(W, w)
        return run
    if name == "s_mulk_i32":
        c = U32(imm & 0xFFFFFFFF)
        def run(W, w):
            W.s[w, reg] = W.s[w, reg] * c
            step(W, w)
        return run
    if name.startswith("s_cmpk_"):
        _, _, op, typ = name.split("_")
        pred = alu.SCMP[op]
        c = np.int32(imm) if typ == "i32" else U32(f["simm16"])
        def run(W, w):
            x = W.s[w, reg].view(np.int32) if typ == "i32" else W.s[w, reg]
            W.scc[w] = pred(x, c)
            step(W, w)
        return run
    raise ctx.unsupported(instr, "SOPK operation not implemented")


_NOP_SOPP = {"s_nop", "s_waitcnt", "s_delay_alu", "s_clause", "s_set_inst_prefetch_distance", "s_sleep",
             "s_setprio", "s_icache_inv", "s_ttracedata", "s_wait_idle", "s_waitcnt_depctr", "s_wait_event",
             "s_inst_prefetch"}


def compile_sopp(instr: Instr, ctx: Context) -> Run:
    name = instr.mnemonic
    imm = instr.fields["simm16"]
    step = _advance(instr.size)
    if name in _NOP_SOPP:
        return step
    if name == "s_endpgm":
        def run(W, w):
            W.alive[w] = False
        run.ends = True
        return run
    if name == "s_barrier":
        def run(W, w):
            W.at_barrier[w] = True
            step(W, w)
        run.barrier = True
        return run
    if name == "s_sendmsg":
        if imm & 0xFF == 3:  # MSG_DEALLOC_VGPRS: releases registers early; nothing to model
            return step
        raise ctx.unsupported(instr, f"s_sendmsg message {imm & 0xFF} is not emulated")
    if name == "s_denorm_mode":
        if imm & 0xF != 0xF:  # hcqsim computes with denormals kept; other modes are not emulated
            raise ctx.unsupported(instr, f"denormal mode 0x{imm:x} (flushing) is not emulated")
        return step
    if name == "s_round_mode":
        if imm & 0xF:
            raise ctx.unsupported(instr, f"round mode 0x{imm:x} (not round-to-nearest-even) is not emulated")
        return step
    if name == "s_code_end":
        raise ctx.unsupported(instr, "execution ran into s_code_end padding (past the end of the kernel)")
    target = np.int64(4 + 4 * sext(imm, 16))
    if name == "s_branch":
        def run(W, w):
            W.pc[w] += target
        return run
    cond = {
        "s_cbranch_scc0": lambda W, w: ~W.scc[w], "s_cbranch_scc1": lambda W, w: W.scc[w],
        "s_cbranch_vccz": lambda W, w: W.mask64(w, VCC) == 0, "s_cbranch_vccnz": lambda W, w: W.mask64(w, VCC) != 0,
        "s_cbranch_execz": lambda W, w: W.mask64(w, EXEC) == 0,
        "s_cbranch_execnz": lambda W, w: W.mask64(w, EXEC) != 0,
    }.get(name)
    if cond is None:
        raise ctx.unsupported(instr, "SOPP operation not implemented")
    fallthrough = np.int64(instr.size)

    def run(W, w):
        W.pc[w] += np.where(cond(W, w), target, fallthrough)
    return run


# ---------------------------------------------------------------------------------------------------
# memory


def compile_smem(instr: Instr, ctx: Context) -> Run:
    f, name = instr.fields, instr.mnemonic
    step = _advance(instr.size)
    if name in ("s_dcache_inv", "s_gl1_inv", "s_icache_inv"):
        return step
    if not name.startswith("s_load_b"):
        raise ctx.unsupported(instr, "scalar memory operation not implemented (s_buffer_load needs a V#)")
    n = int(name[len("s_load_b"):]) // 32
    base_reg, dst = f["sbase"] * 2, f["sdata"]
    offset = sext(f["offset"], 21)
    soff = f["soffset"]
    space = ctx.space

    def run(W, w):
        base = W.s[w, base_reg].astype(U64) | W.s[w, base_reg + 1].astype(U64) << U64(32)
        addr = base + U64(offset & 0xFFFFFFFFFFFFFFFF)
        if soff != NULL:
            addr = addr + W.s[w, soff].astype(U64)
        addr = addr & ~U64(3)  # scalar loads are dword aligned
        data = lanemem.load(space, addr, 4 * n).view(U32)
        W.s[w, dst:dst + n] = data.reshape(-1, n)
        if dst <= EXEC + 1 and EXEC < dst + n:
            W.exec_written()
        step(W, w)
    return run


def _flat_address(instr: Instr, ctx: Context) -> Callable:
    """f(W, w) -> uint64 [nw, lanes] per-lane addresses of a FLAT/GLOBAL instruction."""
    f = instr.fields
    offset = sext(f["offset"], 13) if instr.family != "FLAT" else f["offset"] & 0xFFF
    addr, saddr = f["addr"], f["saddr"]
    if saddr in (NULL, 0x7F) or instr.family == "FLAT":  # 64-bit address in a VGPR pair
        def get(W, w):
            return (W.v[w, addr].astype(U64) | W.v[w, addr + 1].astype(U64) << U64(32)) + U64(offset & (2 ** 64 - 1))
        return get

    def get_saddr(W, w):
        base = W.s[w, saddr].astype(U64) | W.s[w, saddr + 1].astype(U64) << U64(32)
        return base[:, None] + W.v[w, addr].astype(U64) + U64(offset & (2 ** 64 - 1))
    return get_saddr


def _scratch_address(instr: Instr, ctx: Context) -> Callable:
    """Per-lane addresses of a SCRATCH instruction: private offset = SGPR (saddr) + VGPR (when SVE) + offset,
    placed in the lane's slice of its wave's private segment (architected flat scratch)."""
    f = instr.fields
    offset = sext(f["offset"], 13)
    saddr, vaddr = f["saddr"], f["addr"] if f["sve"] else None

    def get(W, w):
        if W.scratch_base is None:
            raise ShaderFault(f"{ctx.kernel}: scratch instruction at PC +0x{instr.pc:x} but RSRC2.SCRATCH_EN is off")
        off = np.full((W.s[w, 0].shape[0], W.lanes), offset, np.int64)
        if saddr not in (NULL, 0x7F):
            off += W.s[w, saddr].astype(np.int64)[:, None]
        if vaddr is not None:
            off += W.v[w, vaddr].astype(np.int64)
        lanes = W.exec_lanes(w)
        bad = lanes & ((off < 0) | (off + 4 > W.scratch_lane))
        if bad.any():
            raise ShaderFault(f"{ctx.kernel}, PC +0x{instr.pc:x}: private offset {int(off[bad][0])} outside the "
                              f"{W.scratch_lane}-byte private segment of a lane")
        base = W.scratch_base[w] if not isinstance(w, slice) else W.scratch_base
        lane_base = base[:, None] + np.arange(W.lanes, dtype=np.uint64) * np.uint64(W.scratch_lane)
        return lane_base + off.astype(np.uint64)
    return get


_LOAD = {"u8": (1, np.uint8), "i8": (1, np.int8), "u16": (2, np.uint16), "i16": (2, np.int16), "b32": (4, None),
         "b64": (8, None), "b96": (12, None), "b128": (16, None)}
_STORE = {"b8": 1, "b16": 2, "b32": 4, "b64": 8, "b96": 12, "b128": 16}


def compile_flat(instr: Instr, ctx: Context) -> Run:
    name = instr.mnemonic
    f = instr.fields
    prefix = {"GLOBAL": "global_", "FLAT": "flat_", "SCRATCH": "scratch_"}[instr.family]
    op = name[len(prefix):]
    address = _scratch_address(instr, ctx) if instr.family == "SCRATCH" else _flat_address(instr, ctx)
    space = ctx.space
    step = _advance(instr.size)
    flat = instr.family == "FLAT"
    if op.startswith("load_") and op[5:] in _LOAD:
        nbytes, ext = _LOAD[op[5:]]
        dst = f["vdst"]
        ndw = max(1, nbytes // 4)

        def run(W, w):
            lanes = W.exec_lanes(w)
            addrs = address(W, w)
            active = addrs[lanes]
            data = _flat_load(W, w, lanes, space, active, nbytes) if flat else lanemem.load(space, active, nbytes)
            if ext is not None:
                vals = data.view(ext).reshape(-1).astype(np.int64).astype(U32) if ext in (np.int8, np.int16) \
                    else data.view(ext).reshape(-1).astype(U32)
                _scatter_dwords(W, w, dst, lanes, vals[:, None])
            else:
                _scatter_dwords(W, w, dst, lanes, data.view(U32).reshape(-1, ndw))
            step(W, w)
        return run
    if op.startswith("load_d16_"):  # 8/16-bit load into one half of the VGPR, the other half kept
        kind = op[len("load_d16_"):]
        hi = kind.startswith("hi_")
        nbytes, ext = {"u8": (1, np.uint8), "i8": (1, np.int8), "b16": (2, np.uint16)}[kind[3:] if hi else kind]
        dst = f["vdst"]

        def run(W, w):
            lanes = W.exec_lanes(w)
            active = address(W, w)[lanes]
            data = _flat_load(W, w, lanes, space, active, nbytes) if flat else lanemem.load(space, active, nbytes)
            _merge_half(W, w, dst, lanes, data.view(ext).reshape(-1).astype(np.int64).astype(U16), hi)
            step(W, w)
        return run
    if op.startswith("store_d16_hi_"):
        nbytes = {"b8": 1, "b16": 2}[op[len("store_d16_hi_"):]]
        src = f["data"]

        def run(W, w):
            lanes = W.exec_lanes(w)
            addrs = address(W, w)[lanes]
            data = (W.v[w, src][lanes] >> U32(16)).astype(U16).view(np.uint8).reshape(-1, 2)[:, :nbytes]
            if flat:
                _flat_store(W, w, lanes, space, addrs, data)
            else:
                lanemem.store(space, addrs, np.ascontiguousarray(data))
            step(W, w)
        return run
    if op.startswith("store_") and op[6:] in _STORE:
        nbytes = _STORE[op[6:]]
        src = f["data"]
        ndw = max(1, nbytes // 4)

        def run(W, w):
            lanes = W.exec_lanes(w)
            addrs = address(W, w)[lanes]
            regs = np.stack([W.v[w, src + i] for i in range(ndw)], axis=-1)[lanes]  # [active, ndw]
            data = regs.astype(U32).view(np.uint8).reshape(-1, 4 * ndw)[:, :nbytes]
            if flat:
                _flat_store(W, w, lanes, space, addrs, data)
            else:
                lanemem.store(space, addrs, np.ascontiguousarray(data))
            step(W, w)
        return run
    if op.startswith("atomic_"):
        return _compile_global_atomic(instr, ctx, op[len("atomic_"):], address)
    raise ctx.unsupported(instr, "memory operation not implemented")


def _scatter_dwords(W: Waves, w, dst: int, lanes: np.ndarray, values: np.ndarray) -> None:
    """Write [active, ndw] dwords to VGPRs dst.. of the active lanes."""
    for i in range(values.shape[1]):
        full = W.v[w, dst + i]
        full[lanes] = values[:, i]
        W.v[w, dst + i] = full


def _merge_half(W: Waves, w, dst: int, lanes: np.ndarray, vals16: np.ndarray, hi: bool) -> None:
    """Write 16-bit values [active] into the low or high half of VGPR dst, keeping the other half."""
    full = W.v[w, dst]
    old = full[lanes]
    full[lanes] = (old & U32(0x0000FFFF)) | vals16.astype(U32) << U32(16) if hi else \
        (old & U32(0xFFFF0000)) | vals16.astype(U32)
    W.v[w, dst] = full


def _split_flat(W, w, lanes, addrs):
    """Which active flat addresses fall in the LDS aperture."""
    return (addrs >> U64(32)) == U64(SHARED_APERTURE >> 32)


def _flat_load(W, w, lanes, space, addrs, nbytes):
    lds = _split_flat(W, w, lanes, addrs)
    out = np.empty((addrs.size, nbytes), np.uint8)
    if (~lds).any():
        out[~lds] = lanemem.load(space, addrs[~lds], nbytes)
    if lds.any():
        groups = np.broadcast_to(W.group[w][:, None] if not isinstance(w, slice) else W.group[:, None],
                                 lanes.shape)[lanes][lds]
        out[lds] = _lds_load(W, groups, (addrs[lds] & U64(0xFFFFFFFF)).astype(np.int64), nbytes)
    return out


def _flat_store(W, w, lanes, space, addrs, data):
    lds = _split_flat(W, w, lanes, addrs)
    if (~lds).any():
        lanemem.store(space, addrs[~lds], np.ascontiguousarray(data[~lds]))
    if lds.any():
        groups = np.broadcast_to(W.group[w][:, None] if not isinstance(w, slice) else W.group[:, None],
                                 lanes.shape)[lanes][lds]
        _lds_store(W, groups, (addrs[lds] & U64(0xFFFFFFFF)).astype(np.int64), np.ascontiguousarray(data[lds]))


_ATOMIC_FNS = {
    "add": lambda o, s: o + s, "sub": lambda o, s: o - s, "swap": lambda o, s: s,
    "and": lambda o, s: o & s, "or": lambda o, s: o | s, "xor": lambda o, s: o ^ s,
    "min": np.minimum, "max": np.maximum,
    "inc": lambda o, s: np.where(o >= s, 0, o + 1).astype(o.dtype),
    "dec": lambda o, s: np.where((o == 0) | (o > s), s, o - 1).astype(o.dtype),
}


def _atomic_kind(ctx: Context, instr: Instr, op: str):
    """(function, dtype, width bytes, compare-swap?) of an atomic op name like add_u32 / cmpswap_b64 / add_f32."""
    base, _, typ = op.rpartition("_")
    dt = {"u32": U32, "i32": np.int32, "b32": U32, "f32": F32, "u64": U64, "i64": np.int64, "b64": U64}.get(typ)
    if dt is None:
        raise ctx.unsupported(instr, f"atomic type {typ} not implemented")
    if base == "cmpswap":
        return None, dt, np.dtype(dt).itemsize, True
    key = base.replace("_rtn", "")
    fn = _ATOMIC_FNS.get(key)
    if fn is None:
        raise ctx.unsupported(instr, f"atomic {base} not implemented")
    return fn, dt, np.dtype(dt).itemsize, False


def _apply_atomics(old_of, write, addrs, srcs, cmps, fn, dt, cmpswap):
    """Apply per-lane atomics in lane order (lanes on the same address see each other); returns pre-op values."""
    uniq, first = np.unique(addrs, return_index=True)
    rets = np.empty(addrs.size, dt)
    if uniq.size == addrs.size:  # no two lanes share an address: one vector step
        old = old_of(addrs)
        rets[:] = old
        new = np.where(old == cmps, srcs, old) if cmpswap else fn(old, srcs)
        write(addrs, np.asarray(new).astype(dt))
        return rets
    current = dict(zip(uniq.tolist(), old_of(uniq).tolist()))
    for i, a in enumerate(addrs.tolist()):
        old = dt(current[a])
        rets[i] = old
        new = (srcs[i] if old == cmps[i] else old) if cmpswap else fn(np.array([old], dt), np.array([srcs[i]], dt))[0]
        current[a] = dt(new)
    keys = np.array(list(current.keys()), dtype=addrs.dtype)
    write(keys, np.array([current[k] for k in current.keys()], dt))
    return rets


def _compile_global_atomic(instr: Instr, ctx: Context, op: str, address: Callable) -> Run:
    f = instr.fields
    fn, dt, size, cmpswap = _atomic_kind(ctx, instr, op)
    ndw = size // 4
    src, dst, returns = f["data"], f["vdst"], bool(f["glc"])
    space = ctx.space
    step = _advance(instr.size)
    if instr.family == "FLAT":
        raise ctx.unsupported(instr, "flat atomics are not emulated (use global)")

    def run(W, w):
        lanes = W.exec_lanes(w)
        addrs = address(W, w)[lanes]
        regs = np.stack([W.v[w, src + i] for i in range(ndw * (2 if cmpswap else 1))], axis=-1)[lanes]
        vals = np.ascontiguousarray(regs[:, :ndw]).view(dt).reshape(-1)
        cmps = np.ascontiguousarray(regs[:, ndw:]).view(dt).reshape(-1) if cmpswap else vals
        if addrs.size:
            lanemem.check(space, addrs, size, "write")
        old_of = lambda a: lanemem.load(space, a, size).view(dt).reshape(-1)
        write = lambda a, v: lanemem.store(space, a, np.ascontiguousarray(v).view(np.uint8).reshape(-1, size))
        rets = _apply_atomics(old_of, write, addrs, vals, cmps, fn, dt, cmpswap) if addrs.size else \
            np.zeros(0, dt)
        if returns:
            _scatter_dwords(W, w, dst, lanes, np.ascontiguousarray(rets).view(U32).reshape(-1, ndw))
        step(W, w)
    return run


# -- LDS -----------------------------------------------------------------------------------------------


def _lds_load(W: Waves, groups: np.ndarray, addrs: np.ndarray, nbytes: int) -> np.ndarray:
    """Bytes from each lane's workgroup LDS; out-of-range addresses read 0 (hardware LDS bounds)."""
    size = W.lds.shape[1]
    ok = (addrs >= 0) & (addrs + nbytes <= size)
    flat = W.lds.reshape(-1)
    idx = (groups * size + np.where(ok, addrs, 0))[:, None] + np.arange(nbytes)
    return np.where(ok[:, None], flat[idx], 0).astype(np.uint8)


def _lds_store(W: Waves, groups: np.ndarray, addrs: np.ndarray, data: np.ndarray) -> None:
    size = W.lds.shape[1]
    nbytes = data.shape[1]
    ok = (addrs >= 0) & (addrs + nbytes <= size)  # out-of-range writes are dropped
    flat = W.lds.reshape(-1)
    idx = (groups[ok] * size + addrs[ok])[:, None] + np.arange(nbytes)
    flat[idx] = data[ok]


_DS_LOAD = {"b32": 4, "b64": 8, "b96": 12, "b128": 16, "u8": 1, "i8": 1, "u16": 2, "i16": 2}
_DS_STORE = {"b32": 4, "b64": 8, "b96": 12, "b128": 16, "b8": 1, "b16": 2}


def compile_ds(instr: Instr, ctx: Context) -> Run:
    f, name = instr.fields, instr.mnemonic
    if f.get("gds"):
        raise ctx.unsupported(instr, "GDS is not emulated")
    op = name[len("ds_"):]
    addr_reg, d0, d1, dst = f["addr"], f["data0"], f["data1"], f["vdst"]
    off0, off1 = f["offset0"], f["offset1"]
    step = _advance(instr.size)

    def lane_groups(W, w, lanes):
        g = W.group if isinstance(w, slice) else W.group[w]
        return np.broadcast_to(g[:, None], lanes.shape)[lanes]

    def addresses(W, w, lanes):
        return W.v[w, addr_reg][lanes].astype(np.int64)

    if op.startswith("load_2addr") or op.startswith("store_2addr"):
        stride64 = "stride64" in op
        width = 8 if op.endswith("b64") else 4
        scale = width * (64 if stride64 else 1)
        ndw = width // 4
        if op.startswith("load"):
            def run(W, w):
                lanes = W.exec_lanes(w)
                g, a = lane_groups(W, w, lanes), addresses(W, w, lanes)
                first = _lds_load(W, g, a + off0 * scale, width).view(U32).reshape(-1, ndw)
                second = _lds_load(W, g, a + off1 * scale, width).view(U32).reshape(-1, ndw)
                _scatter_dwords(W, w, dst, lanes, np.concatenate([first, second], axis=1))
                step(W, w)
            return run

        def run(W, w):
            lanes = W.exec_lanes(w)
            g, a = lane_groups(W, w, lanes), addresses(W, w, lanes)
            for reg, off in ((d0, off0), (d1, off1)):
                regs = np.stack([W.v[w, reg + i] for i in range(ndw)], axis=-1)[lanes]
                _lds_store(W, g, a + off * scale, np.ascontiguousarray(regs.astype(U32)).view(np.uint8).reshape(-1, width))
            step(W, w)
        return run
    offset = off0 | off1 << 8
    if op.endswith("_d16") or op.endswith("_d16_hi"):  # ds_load_u8_d16(_hi), ds_store_b16_d16_hi, ...
        hi = op.endswith("_hi")
        kind = op.split("_")[1]
        nbytes = {"u8": 1, "i8": 1, "u16": 2, "b8": 1, "b16": 2}[kind]
        if op.startswith("load_"):
            ext = {"u8": np.uint8, "i8": np.int8, "u16": np.uint16}[kind]

            def run(W, w):
                lanes = W.exec_lanes(w)
                data = _lds_load(W, lane_groups(W, w, lanes), addresses(W, w, lanes) + offset, nbytes)
                _merge_half(W, w, dst, lanes, data.view(ext).reshape(-1).astype(np.int64).astype(U16), hi)
                step(W, w)
            return run

        def run(W, w):
            lanes = W.exec_lanes(w)
            data = (W.v[w, d0][lanes] >> U32(16)).astype(U16).view(np.uint8).reshape(-1, 2)[:, :nbytes]
            _lds_store(W, lane_groups(W, w, lanes), addresses(W, w, lanes) + offset, np.ascontiguousarray(data))
            step(W, w)
        return run
    if op.startswith("load_") and op[5:] in _DS_LOAD:
        nbytes = _DS_LOAD[op[5:]]
        signed = op[5:] in ("i8", "i16")
        ndw = max(1, nbytes // 4)

        def run(W, w):
            lanes = W.exec_lanes(w)
            data = _lds_load(W, lane_groups(W, w, lanes), addresses(W, w, lanes) + offset, nbytes)
            if nbytes < 4:
                dt = {1: np.int8 if signed else np.uint8, 2: np.int16 if signed else np.uint16}[nbytes]
                vals = data.view(dt).reshape(-1).astype(np.int64).astype(U32)[:, None]
            else:
                vals = data.view(U32).reshape(-1, ndw)
            _scatter_dwords(W, w, dst, lanes, vals)
            step(W, w)
        return run
    if op.startswith("store_") and op[6:] in _DS_STORE:
        nbytes = _DS_STORE[op[6:]]
        ndw = max(1, nbytes // 4)

        def run(W, w):
            lanes = W.exec_lanes(w)
            regs = np.stack([W.v[w, d0 + i] for i in range(ndw)], axis=-1)[lanes]
            data = np.ascontiguousarray(regs.astype(U32)).view(np.uint8).reshape(-1, 4 * ndw)[:, :nbytes]
            _lds_store(W, lane_groups(W, w, lanes), addresses(W, w, lanes) + offset, np.ascontiguousarray(data))
            step(W, w)
        return run
    # LDS atomics: ds_add_u32, ds_add_rtn_u32, ds_cmpstore_b32, ds_max_i32 ...
    base = op.replace("_rtn", "")
    returns = "_rtn" in op
    kind, _, typ = base.rpartition("_")
    if kind in ("cmpstore", "cmpswap"):
        fn, cmpswap = None, True
    else:
        fn, cmpswap = _ATOMIC_FNS.get({"rsub": "sub"}.get(kind, kind)), False
    dt = {"u32": U32, "i32": np.int32, "b32": U32, "f32": F32, "u64": U64, "i64": np.int64, "b64": U64}.get(typ)
    if dt is None or (fn is None and not cmpswap) or kind == "rsub":
        raise ctx.unsupported(instr, "LDS operation not implemented")
    size = np.dtype(dt).itemsize
    ndw = size // 4

    def run(W, w):
        lanes = W.exec_lanes(w)
        g, a = lane_groups(W, w, lanes), addresses(W, w, lanes) + offset
        flat_addr = g * W.lds.shape[1] + a  # one address space over all groups' LDS
        vals = np.ascontiguousarray(np.stack([W.v[w, d0 + i] for i in range(ndw)], axis=-1)[lanes]).view(dt).reshape(-1)
        # ds_cmpstore: data0 is the new value, data1 the compare value (MEM = MEM == cmp ? src : MEM)
        cmps = np.ascontiguousarray(np.stack([W.v[w, d1 + i] for i in range(ndw)], axis=-1)[lanes]).view(dt).reshape(-1) \
            if cmpswap else vals
        old_of = lambda fa: _lds_load(W, fa // W.lds.shape[1], fa % W.lds.shape[1], size).view(dt).reshape(-1)
        write = lambda fa, v: _lds_store(W, fa // W.lds.shape[1], fa % W.lds.shape[1],
                                         np.ascontiguousarray(np.asarray(v, dt)).view(np.uint8).reshape(-1, size))
        rets = _apply_atomics(old_of, write, flat_addr, vals, cmps, fn, dt, cmpswap) if flat_addr.size else \
            np.zeros(0, dt)
        if returns:
            _scatter_dwords(W, w, dst, lanes, np.ascontiguousarray(rets).view(U32).reshape(-1, ndw))
        step(W, w)
    return run


def compile_mubuf(instr: Instr, ctx: Context) -> Run:
    if instr.mnemonic in ("buffer_gl0_inv", "buffer_gl1_inv"):  # cache invalidates: memory is coherent here
        return _advance(instr.size)
    raise ctx.unsupported(instr, "buffer (V#) memory instructions are not emulated")


# ---------------------------------------------------------------------------------------------------

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
