"""Packed VOP3P math: v_pk_* on 16-bit halves (OPSEL / OPSEL_HI pick each result half's sources), the
gfx942 two-lane f32 forms on register pairs, and the mixed-precision v_fma_mix* forms. Matrix VOP3P forms
(WMMA, MFMA) are routed to `matrix`."""
from __future__ import annotations

import numpy as np

from . import formats as fm
from . import fpmath, matrix
from .alu import DTYPES, F16, F32, U16, U32, saturator
from .decoder import Instr
from .operands import Context, Run, advance, float_post, source_modifiers, vdst_writer, vsrc


_PACKED = {  # v_pk_* -> (half type, number of sources, function on the halves' arrays)
    "v_pk_add_f16": ("f16", 2, lambda a, b: a + b), "v_pk_mul_f16": ("f16", 2, lambda a, b: a * b),
    "v_pk_fma_f16": ("f16", 3, fpmath.fma),
    "v_pk_min_f16": ("f16", 2, fpmath.vmin), "v_pk_max_f16": ("f16", 2, fpmath.vmax),
    "v_pk_add_u16": ("u16", 2, lambda a, b: a + b), "v_pk_sub_u16": ("u16", 2, lambda a, b: a - b),
    "v_pk_add_i16": ("i16", 2, lambda a, b: a + b), "v_pk_sub_i16": ("i16", 2, lambda a, b: a - b),
    "v_pk_mul_lo_u16": ("u16", 2, lambda a, b: a * b),
    "v_pk_mad_u16": ("u16", 3, lambda a, b, c: a * b + c), "v_pk_mad_i16": ("i16", 3, lambda a, b, c: a * b + c),
    "v_pk_lshlrev_b16": ("u16", 2, lambda s, x: x << (s & 15)),
    "v_pk_lshrrev_b16": ("u16", 2, lambda s, x: x >> (s & 15)),
    "v_pk_ashrrev_i16": ("i16", 2, lambda s, x: x >> (s & 15)),
    "v_pk_max_i16": ("i16", 2, np.maximum), "v_pk_min_i16": ("i16", 2, np.minimum),
    "v_pk_max_u16": ("u16", 2, np.maximum), "v_pk_min_u16": ("u16", 2, np.minimum),
}
_PACKED_SATURATING = frozenset({"v_pk_add_u16", "v_pk_sub_u16", "v_pk_add_i16", "v_pk_sub_i16"})
_FMA_MIX = {"v_fma_mix_f32": None, "v_fma_mixlo_f16": False, "v_fma_mixhi_f16": True,
            "v_mad_mix_f32": None, "v_mad_mixlo_f16": False, "v_mad_mixhi_f16": True}  # -> f16 result half


def compile_vop3p(instr: Instr, ctx: Context) -> Run:
    """Packed 16-bit math: each half of the result from the halves OPSEL (low) and OPSEL_HI (high) pick."""
    f, name = instr.fields, instr.mnemonic
    if matrix.is_matrix(name):
        return matrix.compile_matrix(instr, ctx)
    if name in _FMA_MIX:
        return _compile_fma_mix(instr, ctx)
    if name in _PACKED_F32:
        return _compile_packed_f32(instr, ctx)
    if name not in _PACKED:
        raise ctx.unsupported(instr, "VOP3P operation not implemented")
    typ, nsrc, fn = _PACKED[name]
    opsel, opsel_hi = f["opsel"], f["opsel_hi"] | f["opsel_hi2"] << 2
    neg_lo, neg_hi = f["neg"], f["neg_hi"]
    is_float = typ == "f16"
    if not is_float and (neg_lo | neg_hi) & ((1 << nsrc) - 1):
        raise ctx.unsupported(instr, "neg_lo/neg_hi on integer packed sources")
    nan_rule = is_float  # fpmath's NaN rule, except where min/max define their NaN results themselves
    if name in ("v_pk_min_f16", "v_pk_max_f16"):
        fn = fpmath.minmax_family(name, ctx.ieee, ctx.true16)
        nan_rule = False
    halves = []
    for i in range(nsrc):
        code = f[f"src{i}"]
        if fm.is_inline_constant(code):
            lo, hi = (_packed_constant(code, is_float, typ, bool(sel >> i & 1)) for sel in (opsel, opsel_hi))
        else:
            lo = vsrc(ctx, instr, code, typ, hi=bool(opsel >> i & 1))
            hi = vsrc(ctx, instr, code, typ, hi=bool(opsel_hi >> i & 1))
        halves.append((source_modifiers(lo, typ, False, is_float and bool(neg_lo >> i & 1)),
                       source_modifiers(hi, typ, False, is_float and bool(neg_hi >> i & 1))))
    dst = f["vdst"]
    if dst >= ctx.vgprs:
        raise ctx.unsupported(instr, f"writes v{dst}, beyond the {ctx.vgprs} VGPRs the kernel allocated")
    clamp = bool(f["clamp"])
    if clamp and not is_float and name not in _PACKED_SATURATING:
        raise ctx.unsupported(instr, "integer clamp on a packed operation without a saturating form")
    post = float_post(typ, 1, 0, ctx.dx10_clamp) if clamp and is_float else None
    saturate = saturator(typ) if clamp and not is_float else None
    dt = DTYPES[typ]
    step = advance(instr.size)

    def half(args):
        with np.errstate(all="ignore"):
            if saturate is not None:
                return saturate(fn(*[np.asarray(a).astype(np.int64) for a in args]))
            value = np.asarray(fn(*args)).astype(dt)
            if nan_rule:
                value = fpmath.propagate_nan(value, *args)
        return post(value) if post is not None else value

    def run(W, w):
        lanes = W.exec_lanes(w)
        lo = half([h[0](W, w) for h in halves])
        hi = half([h[1](W, w) for h in halves])
        bits = np.asarray(lo).view(U16).astype(U32) | np.asarray(hi).view(U16).astype(U32) << U32(16)
        W.v[w, dst] = np.where(lanes, bits, W.v[w, dst])
        step(W, w)
    return run


_PACKED_F32 = {  # gfx90a+ two-lane f32 math on register pairs -> (number of sources, function)
    "v_pk_add_f32": (2, lambda a, b: a + b), "v_pk_mul_f32": (2, lambda a, b: a * b), "v_pk_fma_f32": (3, fpmath.fma),
    "v_pk_mov_b32": (2, None),
}


def _dword_of(ctx: Context, instr: Instr, code: int, k: int):
    """Dword k (0 or 1) of a 64-bit packed source: a VGPR or SGPR pair, or an inline constant: dword 0 is its
    32-bit value (LLVM writes a splat of 1.0 as `1.0 op_sel_hi:[..,0]`), dword 1 the sign extension of an
    integer constant; dword 1 of a float constant is refused (not documented)."""
    if fm.is_inline_constant(code):
        i = fm.inline_int(code)
        if k and i is None:
            raise ctx.unsupported(instr, "op_sel picks the high dword of a float inline constant (not documented)")
        if k:  # an integer constant is sign-extended to the 64-bit operand
            value = U32(0xFFFFFFFF if i < 0 else 0)
        else:
            value = U32(fm.inline_bits(code, 32, True))
        return lambda W, w: value
    if code >= fm.VGPR_BASE:
        r = code - fm.VGPR_BASE
        if r + 2 > ctx.vgprs:
            raise ctx.unsupported(instr, f"reads v[{r}:{r + 1}], beyond the {ctx.vgprs} VGPRs the kernel allocated")
        return lambda W, w: W.v[w, r + k]
    if code < 128:
        return lambda W, w: W.s[w, code + k][:, None]
    raise ctx.unsupported(instr, f"operand {code} of a packed f32 instruction")


def _compile_packed_f32(instr: Instr, ctx: Context) -> Run:
    """v_pk_add/mul/fma_f32, v_pk_mov_b32 (gfx942): the low result dword from the source dwords OPSEL picks,
    the high one from those OPSEL_HI picks; NEG_LO / NEG_HI negate the float sources of each half."""
    f, name = instr.fields, instr.mnemonic
    nsrc, fn = _PACKED_F32[name]
    opsel, opsel_hi = f["opsel"], f["opsel_hi"] | f["opsel_hi2"] << 2
    dst = f["vdst"]
    if dst + 2 > ctx.vgprs:
        raise ctx.unsupported(instr, f"writes v[{dst}:{dst + 1}], beyond the {ctx.vgprs} VGPRs the kernel allocated")
    step = advance(instr.size)
    if fn is None:  # v_pk_mov_b32: D.lo = S0 dword OPSEL[0], D.hi = S1 dword OPSEL[1]
        lo = _dword_of(ctx, instr, f["src0"], opsel & 1)
        hi = _dword_of(ctx, instr, f["src1"], opsel >> 1 & 1)

        def move(W, w):
            lanes = W.exec_lanes(w)
            # copies: a source may be the destination pair itself (v_pk_mov_b32 v[2:3], s[0:1], v[2:3])
            a, b = (np.array(np.broadcast_to(r(W, w), lanes.shape)) for r in (lo, hi))
            W.v[w, dst] = np.where(lanes, a, W.v[w, dst])
            W.v[w, dst + 1] = np.where(lanes, b, W.v[w, dst + 1])
            step(W, w)
        return move
    halves = []
    for sel, neg in ((opsel, f["neg"]), (opsel_hi, f["neg_hi"])):
        readers = []
        for i in range(nsrc):
            r = _dword_of(ctx, instr, f[f"src{i}"], sel >> i & 1)
            readers.append(source_modifiers(lambda W, w, r=r: np.asarray(r(W, w)).view(F32), "f32", False, bool(neg >> i & 1)))
        halves.append(readers)
    post = float_post("f32", f["clamp"], 0, ctx.dx10_clamp)

    def run(W, w):
        lanes = W.exec_lanes(w)
        out = []
        for readers in halves:
            with np.errstate(all="ignore"):
                args = [np.broadcast_to(r(W, w), lanes.shape) for r in readers]
                value = fpmath.propagate_nan(np.asarray(fn(*args)).astype(F32), *args)
            out.append((post(value) if post else value).view(U32))
        W.v[w, dst] = np.where(lanes, out[0], W.v[w, dst])
        W.v[w, dst + 1] = np.where(lanes, out[1], W.v[w, dst + 1])
        step(W, w)
    return run


def _packed_constant(code: int, is_float: bool, typ: str, high: bool):
    """One half of a packed instruction's inline constant. The constant is a 32-bit value (LLVM's
    getInlineEncodingV216 documents the hardware): integers sign-extended to 32 bits, floats as the f16 value
    in the low half and 0 above for f16 instructions, as the f32 value for 16-bit integer instructions; op_sel
    / op_sel_hi pick a half of that."""
    value = fm.inline_int(code)
    value = value & 0xFFFFFFFF if value is not None else fm.inline_bits(code, 16 if is_float else 32, True)
    half = np.array((value >> 16 if high else value) & 0xFFFF, U16).view(DTYPES[typ])[()]
    return lambda W, w: half


def _compile_fma_mix(instr: Instr, ctx: Context) -> Run:
    """v_fma_mix_f32 / v_fma_mixlo_f16 / v_fma_mixhi_f16 (and GFX9's v_mad_mix*): each source is an f32
    (OPSEL_HI[i] = 0) or the f16 half OPSEL[i] picks, converted exactly; NEG_LO negates and NEG_HI takes the
    absolute value; fma in f32 (correctly rounded), then for mixlo/hi rounded to f16 into that half."""
    f, name = instr.fields, instr.mnemonic
    opsel, opsel_hi = f["opsel"], f["opsel_hi"] | f["opsel_hi2"] << 2
    readers = []
    for i in range(3):
        code = f[f"src{i}"]
        if opsel_hi >> i & 1:
            r16 = vsrc(ctx, instr, code, "f16", hi=bool(opsel >> i & 1))
            r = (lambda W, w, r16=r16: np.asarray(r16(W, w)).astype(F32))
        else:
            r = vsrc(ctx, instr, code, "f32")
        readers.append(source_modifiers(r, "f32", bool(f["neg_hi"] >> i & 1), bool(f["neg"] >> i & 1)))
    to_half = _FMA_MIX[name]
    clamp = float_post("f32" if to_half is None else "f16", f["clamp"], 0, ctx.dx10_clamp)
    write = vdst_writer(ctx, instr, f["vdst"], "f32" if to_half is None else "f16", hi=bool(to_half))
    step = advance(instr.size)
    fused = name.startswith("v_fma")

    def run(W, w):
        lanes = W.exec_lanes(w)
        a, b, c = (np.broadcast_to(r(W, w), lanes.shape) for r in readers)
        with np.errstate(all="ignore"):
            value = fpmath.propagate_nan(fpmath.fma(a, b, c) if fused else (a * b + c).astype(F32), a, b, c)
            if to_half is not None:
                value = fpmath.f32_to_f16(value)
        write(W, w, clamp(value) if clamp else value, lanes)
        step(W, w)
    return run
