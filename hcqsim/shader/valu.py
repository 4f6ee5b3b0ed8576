"""Vector ALU instructions (VOP1, VOP2, VOPC, VOP3, VOP3SD, VOP3P, VOPD) compiled to closures.

Semantics come from the tables in `alu`; this module wires operands, modifiers (abs/neg/opsel/clamp/omod,
true16 halves), EXEC, VCC and carry masks around them.
"""
from __future__ import annotations

import numpy as np

from . import alu, dpp, fpmode, matrix, sdwa
from . import formats as fm
from . import formats_gfx9 as fg9
from .alu import DTYPES, F16, F32, F64, U16, U32, U64, WIDTH
from . import fpmath
from .decoder import Instr
from .operands import (Context, Run, _advance, _float_post, _modifiers, check_no_int_modifiers, true16,
                       vdst_writer, vsrc)
from .waves import EXEC, VCC

def _sources(instr: Instr) -> list[int]:
    f = instr.fields
    if instr.family == "VOP1":
        return [f["src0"]]
    if instr.family in ("VOP2", "VOPC"):
        return [f["src0"], f["vsrc1"] + fm.VGPR_BASE]
    return [f["src0"], f["src1"], f["src2"]]


def _dpp(instr: Instr, ctx: Context, srcs: list[int]):
    """The DPP plan when src0 is a DPP operand (srcs[0] is replaced by the real VGPR), else None."""
    code = srcs[0]
    if code not in ((fm.DPP16, fm.DPP8, fm.DPP8FI) if ctx.true16 else (fm.DPP16,)):  # GFX9: no DPP8
        return None
    word = instr.fields.get("dpp")
    if word is None:
        raise ctx.unsupported(instr, "DPP operand without its control dword")
    try:
        plan = dpp.plan16(word, ctx.lanes, not ctx.true16) if code == fm.DPP16 or not ctx.true16 else \
            dpp.plan8(word, ctx.lanes, code == fm.DPP8FI)
    except ValueError as e:
        raise ctx.unsupported(instr, str(e)) from None
    srcs[0] = fm.VGPR_BASE + plan.src0
    return plan


def _with_dpp(plan, readers: list, lanes_of):
    """Wrap a run's operand gathering: src0 comes from the DPP-selected lanes, and lanes the control
    disables are not written."""
    def gather(W, w):
        lanes = lanes_of(W, w)
        args = [r(W, w) for r in readers]
        if plan is not None:
            args[0], allowed = plan.apply(W, w, np.broadcast_to(args[0], lanes.shape))
            lanes = lanes & allowed
        return args, lanes
    return gather


def compile_valu(instr: Instr, ctx: Context) -> Run:
    name = instr.mnemonic
    fam = instr.family
    f = instr.fields
    if "sdwa" in f:
        return _compile_sdwa(instr, ctx)
    if matrix.is_matrix(name):
        return matrix.compile_matrix(instr, ctx)
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
    plan = _dpp(instr, ctx, srcs)
    readers = _readers(instr, ctx, name, in_ts, srcs, plan)
    write = _result_writer(instr, ctx, name, out_t)
    vop3 = fam in ("VOP3", "VOP3SD")
    clamp = f.get("clamp", 0) if vop3 else 0
    post = _float_post(out_t, clamp, f.get("omod", 0), ctx.dx10_clamp) if vop3 else None
    saturate = None
    if clamp and not out_t.startswith("f"):
        if name not in SATURATING:
            raise ctx.unsupported(instr, "integer clamp on an operation without a saturating form")
        saturate = _saturator(out_t)
    variant = fpmath.minmax_family(name, ctx.ieee, ctx.true16)  # IEEE mode and the RDNA / CDNA NaN order
    if variant is not None:
        fn = variant
    dt = DTYPES[out_t]
    step = _advance(instr.size)
    gather = _with_dpp(plan, readers, lambda W, w: W.exec_lanes(w))

    flush_in, flush_out = _flushes(name, in_ts, out_t)

    def run(W, w):
        args, lanes = gather(W, w)
        if W.flushing:
            args = flush_in(W, w, args)
        if saturate is not None:
            value = saturate(fn(*[np.asarray(a).astype(np.int64) for a in args]))
        else:
            value = np.asarray(fn(*args)).astype(dt, copy=False)
        if post is not None:
            value = post(value)
        if W.flushing:
            value = flush_out(W, w, value)
        write(W, w, value, lanes)
        step(W, w)
    return run


def _flushes(name: str, in_ts, out_t: str):
    """(sources, result) flushers for a wave selection whose MODE flushes denormals (`fpmode`)."""
    exempt = name in fpmode.FLUSH_EXEMPT
    kinds = [t if t[0] == "f" and not exempt else None for t in in_ts]
    no_input_flush = name.startswith("v_div_fmas")  # ISA: input denormals are not flushed

    def flush_in(W, w, args):
        if no_input_flush:
            return args
        mode = W.mode[w]
        return [fpmode.flush(a, fpmode.flushes_inputs(mode, k)) if k else a for a, k in zip(args, kinds)]

    def flush_out(W, w, value):
        if out_t[0] != "f" or exempt:
            return value
        return fpmode.flush(value, fpmode.flushes_results(W.mode[w], out_t))
    return flush_in, flush_out


# integer operations whose VOP3 clamp bit saturates the result to the destination type's range
SATURATING = frozenset({"v_add_nc_u32", "v_sub_nc_u32", "v_subrev_nc_u32", "v_add_nc_i32", "v_sub_nc_i32",
                        "v_add_nc_u16", "v_sub_nc_u16", "v_subrev_nc_u16", "v_add_nc_i16", "v_sub_nc_i16"})
# GFX9 16-bit results that keep the destination's high half (all others zero it: LLVM's
# GCNSubtarget::zeroesHigh16BitsOfDest)
GFX9_KEEPS_HIGH_HALF = frozenset({"v_fmac_f16", "v_mac_f16", "v_fmamk_f16", "v_fmaak_f16", "v_madmk_f16",
                                  "v_madak_f16"})
_ACCUMULATOR = {"v_fmac_f32": 2, "v_fmac_f16": 2, "v_fmac_f64": 2, "v_mac_f32": 2, "v_mac_f16": 2}
_LITERAL_K = {"v_fmaak_f32": 2, "v_fmaak_f16": 2, "v_fmamk_f32": 1, "v_fmamk_f16": 1}
_OPSEL_SHIFT_AMOUNT = frozenset({"v_alignbit_b32", "v_alignbyte_b32"})  # op_sel[2]: src2 from its high half


def _saturator(out_t: str):
    info = np.iinfo(DTYPES[out_t])
    return lambda v: np.clip(v, info.min, info.max).astype(DTYPES[out_t])


def _readers(instr: Instr, ctx: Context, name: str, in_ts, srcs: list[int], plan) -> list:
    """Readers of a VALU instruction's sources with their modifiers: true16 halves (e32), op_sel halves
    (VOP3), neg/abs from VOP3 or the DPP control, the accumulator of v_fmac/v_mac, the literal K of
    v_fmaak/v_fmamk, and VCC or an SGPR lane mask for v_cndmask."""
    f, fam = instr.fields, instr.family
    vop3 = fam in ("VOP3", "VOP3SD")
    abs_bits, neg_bits = (f.get("abs", 0), f.get("neg", 0)) if vop3 else (0, 0)
    if plan is not None and not vop3:  # e32 DPP carries the src0/src1 modifiers in its control dword
        abs_bits, neg_bits = plan.abs[0] | plan.abs[1] << 1, plan.neg[0] | plan.neg[1] << 1
    check_no_int_modifiers(ctx, instr, in_ts, abs_bits, neg_bits)
    opsel = f.get("opsel", 0) if vop3 else 0
    e32 = fam in ("VOP1", "VOP2") and ctx.true16
    readers = []
    for i, typ in enumerate(in_ts):
        if typ == "mask":  # v_cndmask: VCC in e32, an SGPR mask in VOP3 src2
            code = f["src2"] if vop3 else VCC
            readers.append(lambda W, w, c=code: W.lanes_of(w, c))
            continue
        hi = bool(opsel >> i & 1)
        if _ACCUMULATOR.get(name) == i:
            code = f["vdst"] + fm.VGPR_BASE
            hi = bool(opsel >> 3 & 1)  # the accumulator is the destination, in the destination's half
        elif _LITERAL_K.get(name) == i:
            code = fm.LITERAL
        elif name in _LITERAL_K and _LITERAL_K[name] == 1 and i == 2:
            code = srcs[1]
        else:
            code = srcs[i]
        if e32 and WIDTH[typ] == 16:
            code, hi = true16(code)
        if hi and WIDTH[typ] != 16:
            if not (name in _OPSEL_SHIFT_AMOUNT and i == 2):
                raise ctx.unsupported(instr, f"op_sel on 32-bit source {i}")
            r = vsrc(ctx, instr, code, "u16", hi=True)
            readers.append(lambda W, w, r=r: np.asarray(r(W, w)).astype(U32))
            continue
        r = vsrc(ctx, instr, code, typ, hi=hi)
        readers.append(_modifiers(r, typ, bool(abs_bits >> i & 1), bool(neg_bits >> i & 1)))
    return readers


def _result_writer(instr: Instr, ctx: Context, name: str, out_t: str):
    """The destination writer: true16 halves (gfx11 e32), op_sel[3] (VOP3), GFX9's zeroed high half."""
    f, fam = instr.fields, instr.family
    vop3 = fam in ("VOP3", "VOP3SD")
    opsel = f.get("opsel", 0) if vop3 else 0
    if fam in ("VOP1", "VOP2") and ctx.true16 and WIDTH[out_t] == 16:
        dst, dst_hi = true16(f["vdst"] + fm.VGPR_BASE)
        return vdst_writer(ctx, instr, dst - fm.VGPR_BASE, out_t, hi=dst_hi)
    hi = bool(opsel >> 3 & 1)
    if hi and WIDTH[out_t] != 16:
        raise ctx.unsupported(instr, "op_sel[3] (high half) on a 32-bit destination")
    zero_hi = WIDTH[out_t] == 16 and not ctx.true16 and not hi and name not in GFX9_KEEPS_HIGH_HALF
    return vdst_writer(ctx, instr, f["vdst"], out_t, hi=hi, zero_hi=zero_hi)


def _compile_sdwa(instr: Instr, ctx: Context) -> Run:
    """A GFX9 VOP1/VOP2/VOPC instruction with an SDWA dword: sources are byte/word selects of 32-bit
    registers (VGPRs, or SGPRs/constants with S0/S1), the result is placed per DST_SEL / DST_UNUSED."""
    f, name = instr.fields, instr.mnemonic
    cmp = alu.compare(name)
    entry = alu.VALU.get(name)
    if cmp is None and entry is None:
        raise ctx.unsupported(instr, "VALU operation not implemented with SDWA")
    in_ts = (cmp[0], cmp[0]) if cmp else tuple(t for t in entry[1] if t != "mask")
    takes_vcc = entry is not None and "mask" in entry[1]
    codes = [fg9.src0_code(f)] + ([fg9.src1_code(f)] if instr.family in ("VOP2", "VOPC") else [])
    if name in ("v_fmac_f32", "v_mac_f32"):
        codes.append(f["vdst"] + fm.VGPR_BASE)
    readers = []
    for i, (code, typ) in enumerate(zip(codes, in_ts)):
        raw = vsrc(ctx, instr, code, "b32")
        sel, sext = f.get(f"src{i}_sel", 6), bool(f.get(f"src{i}_sext", 0))
        abs_, neg = bool(f.get(f"src{i}_abs", 0)), bool(f.get(f"src{i}_neg", 0))
        readers.append(_modifiers(lambda W, w, r=raw, s=sel, x=sext, t=typ: _as_type(sdwa.select(r(W, w), s, x), t),
                                  typ, abs_, neg))
    if takes_vcc:  # v_cndmask_b32_sdwa: the lane mask is VCC
        readers.append(lambda W, w: W.lanes_of(w, VCC))
    step = _advance(instr.size)
    if cmp is not None:
        typ, pred, writes_exec = cmp
        dst = VCC if not f.get("sd") else f["sdst"]

        def run_cmp(W, w):
            lanes = W.exec_lanes(w)
            result = np.broadcast_to(pred(*[r(W, w) for r in readers]), lanes.shape) & lanes
            W.set_mask(w, dst, result)
            if writes_exec:
                W.set_mask(w, EXEC, result)
            step(W, w)
        return run_cmp
    out_t, _, fn = entry
    dst = f["vdst"]
    if dst >= ctx.vgprs:
        raise ctx.unsupported(instr, f"writes v{dst}, beyond the {ctx.vgprs} VGPRs the kernel allocated")
    post = _float_post(out_t, f.get("clamp", 0), f.get("omod", 0), ctx.dx10_clamp)
    saturate = None
    if f.get("clamp", 0) and not out_t.startswith("f"):
        if name not in SATURATING:
            raise ctx.unsupported(instr, "integer clamp on an operation without a saturating form")
        saturate = _saturator(out_t)
    dst_sel, unused = f["dst_sel"], f["dst_unused"]

    def run(W, w):
        lanes = W.exec_lanes(w)
        args = [r(W, w) for r in readers]
        if saturate is not None:
            value = saturate(fn(*[np.asarray(a).astype(np.int64) for a in args]))
        else:
            value = np.asarray(fn(*args)).astype(DTYPES[out_t], copy=False)
        if post is not None:
            value = post(value)
        bits = value.view(U16).astype(U32) if WIDTH[out_t] == 16 else value.view(U32)
        old = W.v[w, dst]
        W.v[w, dst] = np.where(lanes, sdwa.place(np.broadcast_to(bits, lanes.shape), old, dst_sel, unused), old)
        step(W, w)
    return run


def _as_type(raw32: np.ndarray, typ: str):
    """A selected 32-bit operand read as the operation's type (16-bit types take the low half)."""
    if WIDTH[typ] == 16:
        return (raw32 & U32(0xFFFF)).astype(U16).view(DTYPES[typ])
    return raw32.view(DTYPES[typ])


def _mask_dst(instr: Instr) -> int:
    """Where a VOPC / carry lane mask goes: VCC for e32, the SGPR in vdst (VOP3) or sdst (VOP3SD)."""
    if instr.family == "VOPC" or instr.family == "VOP2":
        return VCC
    return instr.fields["sdst"] if instr.family == "VOP3SD" else instr.fields["vdst"]


def _compile_vcmp(instr: Instr, ctx: Context, typ: str, pred, writes_exec: bool, typ_b: str | None = None) -> Run:
    """v_cmp_* / v_cmpx_* (and v_cmp_class_*, whose second source is the class mask of type `typ_b`)."""
    srcs = _sources(instr)
    plan = _dpp(instr, ctx, srcs)
    f = instr.fields
    vop3 = instr.family == "VOP3"
    types = (typ, typ_b or typ)
    abs_bits, neg_bits = (f.get("abs", 0), f.get("neg", 0)) if vop3 else (0, 0)
    if plan is not None and not vop3:
        abs_bits, neg_bits = plan.abs[0] | plan.abs[1] << 1, plan.neg[0] | plan.neg[1] << 1
    check_no_int_modifiers(ctx, instr, types, abs_bits, neg_bits)
    opsel = f.get("opsel", 0) if vop3 else 0
    readers = []
    for i, (code, t) in enumerate(zip(srcs[:2], types)):
        if not vop3 and ctx.true16 and WIDTH[t] == 16:
            code, hi = true16(code)
        else:
            hi = bool(opsel >> i & 1)
            if hi and WIDTH[t] != 16:
                raise ctx.unsupported(instr, f"op_sel on 32-bit source {i}")
        readers.append(_modifiers(vsrc(ctx, instr, code, t, hi), t, bool(abs_bits >> i & 1), bool(neg_bits >> i & 1)))
    dst = EXEC if writes_exec else _mask_dst(instr)
    also = _mask_dst(instr) if writes_exec and not ctx.true16 else None  # GFX9 v_cmpx writes VCC/sdst too
    step = _advance(instr.size)
    gather = _with_dpp(plan, readers, lambda W, w: W.exec_lanes(w))

    def run(W, w):
        (a, b), lanes = gather(W, w)
        result = np.broadcast_to(pred(a, b), lanes.shape) & lanes  # inactive lanes read 0
        if also is not None:
            W.set_mask(w, also, result)
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
        if cout != ctx.null:
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
        if signed:  # { D1, D0 } = 65-bit signed sum: D1 is its bit 64, i.e. the sign of the exact sum
            prod = a.astype(np.int64) * b.astype(np.int64)  # exact: |a*b| <= 2^62
            with np.errstate(over="ignore"):
                total = prod + c
            overflow = (np.signbit(prod) == np.signbit(c)) & (np.signbit(total) != np.signbit(c))
            value = np.asarray(total).view(U64)
            carry = np.broadcast_to(np.where(overflow, np.signbit(c), np.signbit(total)), lanes.shape)
        else:
            prod = a.astype(U64) * b.astype(U64)
            value = prod + c
            carry = np.broadcast_to(value < prod, lanes.shape)
        write(W, w, np.broadcast_to(value, lanes.shape), lanes)
        if cout != ctx.null:
            W.set_mask(w, cout, carry & lanes)
        step(W, w)
    return run


def _compile_div_scale(instr: Instr, ctx: Context) -> Run:
    """v_div_scale_f32/f64: D0 and the post-scaling lane mask (VCC or the VOP3SD sdst), `fpmath.div_scale`."""
    typ = "f64" if instr.mnemonic.endswith("f64") else "f32"
    readers = _readers(instr, ctx, instr.mnemonic, (typ,) * 3, _sources(instr), None)
    write = vdst_writer(ctx, instr, instr.fields["vdst"], typ)
    cout = instr.fields["sdst"]
    post = _float_post(typ, instr.fields.get("clamp", 0), instr.fields.get("omod", 0), ctx.dx10_clamp)
    step = _advance(instr.size)

    def run(W, w):
        lanes = W.exec_lanes(w)
        value, vcc = fpmath.div_scale(*[np.broadcast_to(r(W, w), lanes.shape) for r in readers])
        write(W, w, post(value) if post else value, lanes)
        if cout != ctx.null:
            W.set_mask(w, cout, vcc & lanes)
        step(W, w)
    return run


def _compile_div_fmas(instr: Instr, ctx: Context) -> Run:
    """v_div_fmas_f32/f64: a fused multiply-add post-scaled in the lanes VCC marks (`fpmath.div_fmas`)."""
    typ = "f64" if instr.mnemonic.endswith("f64") else "f32"
    readers = _readers(instr, ctx, instr.mnemonic, (typ,) * 3, _sources(instr), None)
    write = vdst_writer(ctx, instr, instr.fields["vdst"], typ)
    post = _float_post(typ, instr.fields.get("clamp", 0), instr.fields.get("omod", 0), ctx.dx10_clamp)
    step = _advance(instr.size)

    def run(W, w):
        lanes = W.exec_lanes(w)
        value = fpmath.div_fmas(*[np.broadcast_to(r(W, w), lanes.shape) for r in readers], W.lanes_of(w, VCC))
        write(W, w, post(value) if post else value, lanes)
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
    mask_t = "u16" if typ == "f16" else "u32"
    return _compile_vcmp(instr, ctx, typ, fpmath.fp_class, instr.mnemonic.startswith("v_cmpx"), mask_t)


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


def _compile_permlane16(instr: Instr, ctx: Context) -> Run:
    """v_permlane16_b32 / v_permlanex16_b32: each lane reads src0 from the lane of its row (x16: of the other
    row of its 32-lane half) picked by its nibble of the 64-bit select {src2, src1}. OPSEL bit 0 = FI (read
    inactive lanes), bit 1 = BOUND_CTRL (an inactive source reads 0 instead of leaving the lane unwritten)."""
    f = instr.fields
    src, sel_lo, sel_hi = (vsrc(ctx, instr, f[k], "b32") for k in ("src0", "src1", "src2"))
    fetch_inactive, bound_zero = bool(f["opsel"] & 1), bool(f["opsel"] & 2)
    cross = instr.mnemonic == "v_permlanex16_b32"
    dst = f["vdst"]
    step = _advance(instr.size)
    lane = np.arange(ctx.lanes)

    def run(W, w):
        lanes = W.exec_lanes(w)
        n = lanes.shape[0]
        select = (np.broadcast_to(sel_lo(W, w), (n, 1))[:, 0].astype(np.uint64)
                  | np.broadcast_to(sel_hi(W, w), (n, 1))[:, 0].astype(np.uint64) << np.uint64(32))
        nibble = ((select[:, None] >> (np.uint64(4) * (lane % 16).astype(np.uint64))) & np.uint64(15)).astype(np.int64)
        row = (lane & ~15) ^ (16 if cross else 0)
        source = row[None, :] + nibble
        values = np.broadcast_to(src(W, w), lanes.shape)
        rows = np.arange(n)[:, None]
        ok = np.ones_like(lanes) if fetch_inactive else lanes[rows, source]
        picked = np.where(ok, values[rows, source], 0).astype(U32)
        write = lanes if bound_zero else lanes & ok
        W.v[w, dst] = np.where(write, picked, W.v[w, dst])
        step(W, w)
    return run


def _compile_permlane64(instr: Instr, ctx: Context) -> Run:
    if ctx.lanes != 64:
        raise ctx.unsupported(instr, "v_permlane64_b32 exchanges wave halves: wave64 only")
    src = vsrc(ctx, instr, instr.fields["src0"], "b32")
    dst = instr.fields["vdst"]
    step = _advance(instr.size)
    swap = np.arange(64) ^ 32

    def run(W, w):
        lanes = W.exec_lanes(w)
        values = np.broadcast_to(src(W, w), lanes.shape)
        W.v[w, dst] = np.where(lanes & lanes[:, swap], values[:, swap], W.v[w, dst])
        step(W, w)
    return run


_SPECIAL_VALU = {
    "v_permlane16_b32": _compile_permlane16, "v_permlanex16_b32": _compile_permlane16,
    "v_permlane64_b32": _compile_permlane64,
    "v_mbcnt_lo_u32_b32": _compile_mbcnt, "v_mbcnt_hi_u32_b32": _compile_mbcnt,
    "v_readfirstlane_b32": _compile_readfirstlane, "v_readlane_b32": _compile_readlane,
    "v_writelane_b32": _compile_writelane, "v_mad_u64_u32": _compile_mad64, "v_mad_i64_i32": _compile_mad64,
    "v_div_scale_f32": _compile_div_scale, "v_div_scale_f64": _compile_div_scale,
    "v_div_fmas_f32": _compile_div_fmas, "v_div_fmas_f64": _compile_div_fmas,
    **{f"v_cmp{x}_class_{t}": _compile_cmp_class for x in ("", "x") for t in ("f16", "f32", "f64")},
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
        fn = fpmath.minmax_family(name, ctx.ieee, ctx.true16) or fn
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
    if name in ("v_pk_min_f16", "v_pk_max_f16"):
        fn = fpmath.minmax_family(name, ctx.ieee, ctx.true16)
    halves = []
    for i in range(nsrc):
        code = f[f"src{i}"]
        if fm.is_inline_constant(code):
            lo, hi = (_packed_constant(code, is_float, typ, bool(sel >> i & 1)) for sel in (opsel, opsel_hi))
        else:
            lo = vsrc(ctx, instr, code, typ, hi=bool(opsel >> i & 1))
            hi = vsrc(ctx, instr, code, typ, hi=bool(opsel_hi >> i & 1))
        halves.append((_modifiers(lo, typ, False, is_float and bool(neg_lo >> i & 1)),
                       _modifiers(hi, typ, False, is_float and bool(neg_hi >> i & 1))))
    dst = f["vdst"]
    if dst >= ctx.vgprs:
        raise ctx.unsupported(instr, f"writes v{dst}, beyond the {ctx.vgprs} VGPRs the kernel allocated")
    clamp = bool(f["clamp"])
    if clamp and not is_float and name not in _PACKED_SATURATING:
        raise ctx.unsupported(instr, "integer clamp on a packed operation without a saturating form")
    post = _float_post(typ, 1, 0, ctx.dx10_clamp) if clamp and is_float else None
    saturate = _saturator(typ) if clamp and not is_float else None
    dt = DTYPES[typ]
    step = _advance(instr.size)

    def half(args):
        with np.errstate(all="ignore"):
            if saturate is not None:
                return saturate(fn(*[np.asarray(a).astype(np.int64) for a in args]))
            value = np.asarray(fn(*args)).astype(dt)
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
    """Dword k (0 or 1) of a 64-bit packed source: a VGPR or SGPR pair, or an inline constant's 32-bit value
    (LLVM selects only its dword 0: `1.0 op_sel_hi:[..,0]` for a splat); its dword 1 is refused."""
    if fm.is_inline_constant(code):
        if k:
            raise ctx.unsupported(instr, "op_sel picks the high dword of an inline constant (not documented)")
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
    step = _advance(instr.size)
    if fn is None:  # v_pk_mov_b32: D.lo = S0 dword OPSEL[0], D.hi = S1 dword OPSEL[1]
        lo = _dword_of(ctx, instr, f["src0"], opsel & 1)
        hi = _dword_of(ctx, instr, f["src1"], opsel >> 1 & 1)

        def move(W, w):
            lanes = W.exec_lanes(w)
            a, b = np.broadcast_to(lo(W, w), lanes.shape), np.broadcast_to(hi(W, w), lanes.shape)
            W.v[w, dst] = np.where(lanes, a, W.v[w, dst])
            W.v[w, dst + 1] = np.where(lanes, b, W.v[w, dst + 1])
            step(W, w)
        return move
    halves = []
    for sel, neg in ((opsel, f["neg"]), (opsel_hi, f["neg_hi"])):
        readers = []
        for i in range(nsrc):
            r = _dword_of(ctx, instr, f[f"src{i}"], sel >> i & 1)
            readers.append(_modifiers(lambda W, w, r=r: np.asarray(r(W, w)).view(F32), "f32", False, bool(neg >> i & 1)))
        halves.append(readers)
    post = _float_post("f32", f["clamp"], 0, ctx.dx10_clamp)

    def run(W, w):
        lanes = W.exec_lanes(w)
        out = []
        for readers in halves:
            with np.errstate(all="ignore"):
                value = np.asarray(fn(*[np.broadcast_to(r(W, w), lanes.shape) for r in readers])).astype(F32)
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
        readers.append(_modifiers(r, "f32", bool(f["neg_hi"] >> i & 1), bool(f["neg"] >> i & 1)))
    to_half = _FMA_MIX[name]
    clamp = _float_post("f32" if to_half is None else "f16", f["clamp"], 0, ctx.dx10_clamp)
    write = vdst_writer(ctx, instr, f["vdst"], "f32" if to_half is None else "f16", hi=bool(to_half))
    step = _advance(instr.size)
    fused = name.startswith("v_fma")

    def run(W, w):
        lanes = W.exec_lanes(w)
        a, b, c = (np.broadcast_to(r(W, w), lanes.shape) for r in readers)
        with np.errstate(all="ignore"):
            value = fpmath.fma(a, b, c) if fused else (a * b + c).astype(F32)
            if to_half is not None:
                value = value.astype(F16)
        write(W, w, clamp(value) if clamp else value, lanes)
        step(W, w)
    return run
