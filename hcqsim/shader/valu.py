"""Vector ALU instructions (VOP1, VOP2, VOPC, VOP3, VOP3SD, VOP3P, VOPD) compiled to closures.

Semantics come from the tables in `alu`; this module wires operands, modifiers (abs/neg/opsel/clamp/omod,
true16 halves), EXEC, VCC and carry masks around them.
"""
from __future__ import annotations

import numpy as np

from . import alu, crosslane, dpp, fast, fpmode, matrix, sdwa
from . import formats as fm
from . import formats_gfx9 as fg9
from .alu import DTYPES, U16, U32, U64, WIDTH
from . import fpmath
from .decoder import Instr
from .operands import (Context, Run, advance, bcast, float_post, source_modifiers, check_no_int_modifiers, true16,
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
    post = float_post(out_t, clamp, f.get("omod", 0), ctx.dx10_clamp) if vop3 else None
    saturate = None
    if clamp and not out_t.startswith("f"):
        if name not in SATURATING:
            raise ctx.unsupported(instr, "integer clamp on an operation without a saturating form")
        saturate = alu.saturator(out_t)
    variant = fpmath.minmax_family(name, ctx.ieee, ctx.true16)  # IEEE mode and the RDNA / CDNA NaN order
    if variant is not None:
        fn = variant
    dt = DTYPES[out_t]
    step = advance(instr.size)
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

    def flush_in(W, w, args):
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
        readers.append(source_modifiers(r, typ, bool(abs_bits >> i & 1), bool(neg_bits >> i & 1)))
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


def _sdwa_readers(instr: Instr, ctx: Context, in_ts) -> list:
    """Readers of an SDWA instruction's sources: each a byte/word/dword select of a 32-bit register (VGPR, or
    SGPR/constant with S0/S1), zero- or (SEXT) sign-extended, read as the operation's type, then neg/abs on
    float types. neg/abs bits on an integer source and SEXT on a float one have no meaning and are refused."""
    f, name = instr.fields, instr.mnemonic
    codes = [fg9.src0_code(f)] + ([fg9.src1_code(f)] if instr.family in ("VOP2", "VOPC") else [])
    if name in ("v_fmac_f32", "v_mac_f32"):
        codes.append(f["vdst"] + fm.VGPR_BASE)
    abs_bits = sum(f.get(f"src{i}_abs", 0) << i for i in range(len(codes)))
    neg_bits = sum(f.get(f"src{i}_neg", 0) << i for i in range(len(codes)))
    check_no_int_modifiers(ctx, instr, in_ts, abs_bits, neg_bits)
    readers = []
    for i, (code, typ) in enumerate(zip(codes, in_ts)):
        raw = vsrc(ctx, instr, code, "b32")
        sel, sext = f.get(f"src{i}_sel", 6), bool(f.get(f"src{i}_sext", 0))
        if sext and typ[0] == "f":  # LLVM's assembler refuses sext() on float operands; no guide defines it
            raise ctx.unsupported(instr, f"SDWA SEXT on float source {i} ({typ})")
        readers.append(source_modifiers(lambda W, w, r=raw, s=sel, x=sext, t=typ: _as_type(sdwa.select(r(W, w), s, x), t),
                                        typ, bool(abs_bits >> i & 1), bool(neg_bits >> i & 1)))
    return readers


def _sdwa_dst(instr: Instr, ctx: Context):
    """(vdst, writer(W, w, bits32, lanes)): the result's low bits placed at DST_SEL, the rest per DST_UNUSED."""
    f = instr.fields
    dst = f["vdst"]
    if dst >= ctx.vgprs:
        raise ctx.unsupported(instr, f"writes v{dst}, beyond the {ctx.vgprs} VGPRs the kernel allocated")
    dst_sel, unused = f["dst_sel"], f["dst_unused"]

    def write(W, w, bits, lanes):
        old = W.v[w, dst]
        W.v[w, dst] = np.where(lanes, sdwa.place(np.broadcast_to(bits, lanes.shape), old, dst_sel, unused), old)
    return write


def _compile_sdwa(instr: Instr, ctx: Context) -> Run:
    """A GFX9 VOP1/VOP2/VOPC instruction with an SDWA dword: sources are byte/word selects of 32-bit
    registers (VGPRs, or SGPRs/constants with S0/S1), the result is placed per DST_SEL / DST_UNUSED."""
    f, name = instr.fields, instr.mnemonic
    if name in alu.CARRY:
        return _compile_sdwa_carry(instr, ctx)
    cmp = alu.compare(name)
    cmp_ts = (cmp[0], cmp[0]) if cmp else None
    if name.startswith(("v_cmp_class_", "v_cmpx_class_")):  # S1 is the class mask
        typ = name.rsplit("_", 1)[1]
        cmp, cmp_ts = (typ, fpmath.fp_class, name.startswith("v_cmpx")), (typ, "u16" if typ == "f16" else "u32")
    entry = alu.VALU.get(name)
    if cmp is None and entry is None:
        raise ctx.unsupported(instr, "VALU operation not implemented with SDWA")
    in_ts = cmp_ts if cmp else tuple(t for t in entry[1] if t != "mask")
    takes_vcc = entry is not None and "mask" in entry[1]
    readers = _sdwa_readers(instr, ctx, in_ts)
    if takes_vcc:  # v_cndmask_b32_sdwa: the lane mask is VCC
        readers.append(lambda W, w: W.lanes_of(w, VCC))
    step = advance(instr.size)
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
    write = _sdwa_dst(instr, ctx)
    post = float_post(out_t, f.get("clamp", 0), f.get("omod", 0), ctx.dx10_clamp)
    saturate = None
    if f.get("clamp", 0) and not out_t.startswith("f"):
        if name not in SATURATING:
            raise ctx.unsupported(instr, "integer clamp on an operation without a saturating form")
        saturate = alu.saturator(out_t)
    flush_in, flush_out = _flushes(name, entry[1], out_t)  # a flushing MODE applies as without SDWA
    fn = fpmath.minmax_family(name, ctx.ieee, ctx.true16) or fn  # IEEE mode and the CDNA NaN order, as without SDWA

    def run(W, w):
        lanes = W.exec_lanes(w)
        args = [r(W, w) for r in readers]
        if W.flushing:
            args = flush_in(W, w, args)
        if saturate is not None:
            value = saturate(fn(*[np.asarray(a).astype(np.int64) for a in args]))
        else:
            value = np.asarray(fn(*args)).astype(DTYPES[out_t], copy=False)
        if post is not None:
            value = post(value)
        if W.flushing:
            value = flush_out(W, w, value)
        write(W, w, value.view(U16).astype(U32) if WIDTH[out_t] == 16 else value.view(U32), lanes)
        step(W, w)
    return run


def _compile_sdwa_carry(instr: Instr, ctx: Context) -> Run:
    """v_add/sub/subrev_co_u32 and v_addc/subb/subbrev_co_u32 with SDWA: the 32-bit operation on the selected
    (zero- or sign-extended) operands; the carry in is VCC, the carry/borrow out goes to VCC (VOP2 SDWA has no
    SDST), the 32-bit result is placed per DST_SEL / DST_UNUSED. clamp saturates the result (`carry_clamp`)."""
    fn, carry_in, swap = alu.CARRY[instr.mnemonic]
    ra, rb = _sdwa_readers(instr, ctx, ("u32", "u32"))
    if swap:
        ra, rb = rb, ra
    write = _sdwa_dst(instr, ctx)
    clamp = carry_clamp(instr.mnemonic) if instr.fields.get("clamp", 0) else None
    step = advance(instr.size)

    def run(W, w):
        lanes = W.exec_lanes(w)
        ci = W.lanes_of(w, VCC) if carry_in else np.zeros(lanes.shape, bool)
        value, carry = fn(ra(W, w), rb(W, w), ci)
        if clamp is not None:
            value = clamp(value, carry)
        write(W, w, value, lanes)
        W.set_mask(w, VCC, np.broadcast_to(carry, lanes.shape) & lanes)
        step(W, w)
    return run


def carry_clamp(name: str):
    """clamp on a carry-out add/subtract: the result saturates where the 32-bit operation carried (adds: to
    0xFFFFFFFF) or borrowed (subtracts: to 0); the carry/borrow out itself is not changed. LLVM relies on the
    result half: it selects uaddsat / usubsat to V_ADD_CO_U32_e64 / V_SUB_CO_U32_e64 with clamp on GFX8."""
    limit = U32(0xFFFFFFFF) if alu.CARRY[name][0] is alu.CARRY["v_add_co_u32"][0] else U32(0)
    return lambda value, carry: np.where(carry, limit, value).astype(U32)


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
        readers.append(source_modifiers(vsrc(ctx, instr, code, t, hi), t, bool(abs_bits >> i & 1), bool(neg_bits >> i & 1)))
    dst = EXEC if writes_exec else _mask_dst(instr)
    also = _mask_dst(instr) if writes_exec and not ctx.true16 else None  # GFX9 v_cmpx writes VCC/sdst too
    step = advance(instr.size)
    gather = _with_dpp(plan, readers, lambda W, w: W.exec_lanes(w))

    def run(W, w):
        (a, b), lanes = gather(W, w)
        result = bcast(pred(a, b), lanes.shape) & lanes  # inactive lanes read 0
        if also is not None:
            W.set_mask(w, also, result)
        W.set_mask(w, dst, result)
        step(W, w)
    return run


def _compile_carry(instr: Instr, ctx: Context) -> Run:
    fn, carry_in, swap = alu.CARRY[instr.mnemonic]
    srcs = _sources(instr)
    plan = _dpp(instr, ctx, srcs)  # e32 DPP: src0 from the lanes the control picks
    if plan is not None and (any(plan.neg) or any(plan.abs)):
        raise ctx.unsupported(instr, "neg/abs modifier on an integer DPP source")
    gather = _with_dpp(plan, [vsrc(ctx, instr, srcs[0], "u32"), vsrc(ctx, instr, srcs[1], "u32")],
                       lambda W, w: W.exec_lanes(w))
    vop3 = instr.family == "VOP3SD"
    if vop3:
        check_no_int_modifiers(ctx, instr, ("u32",) * 3, instr.fields.get("abs", 0), instr.fields.get("neg", 0))
    cin = (srcs[2] if vop3 else VCC) if carry_in else None
    cout = _mask_dst(instr)
    write = vdst_writer(ctx, instr, instr.fields["vdst"], "u32")
    clamp = carry_clamp(instr.mnemonic) if vop3 and instr.fields.get("clamp", 0) else None
    step = advance(instr.size)

    def run(W, w):
        (a, b), lanes = gather(W, w)
        if swap:
            a, b = b, a
        if cin is not None:  # the carry in as 0 / 1 (what the operations add)
            ci = W.lane_bits_u32(w, cin)
        else:  # no carry in: zero (fast path: the function skips adding it)
            ci = None if fast.enabled else np.zeros(lanes.shape, bool)
        value, carry = fn(a, b, ci)
        if clamp is not None:
            value = clamp(value, carry)
        write(W, w, value, lanes)
        if cout != ctx.null:
            W.set_mask(w, cout, bcast(carry, lanes.shape) & lanes)
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
    step = advance(instr.size)

    def run(W, w):
        lanes = W.exec_lanes(w)
        a, b, c = ra(W, w), rb(W, w), rc(W, w)
        if signed:  # { D1, D0 } = 65-bit signed sum: D1 is its bit 64, i.e. the sign of the exact sum
            prod = a.astype(np.int64) * b.astype(np.int64)  # exact: |a*b| <= 2^62
            with np.errstate(over="ignore"):
                total = prod + c
            value = np.asarray(total).view(U64)
            carry = None
            if cout != ctx.null or not fast.enabled:  # fast path: no carry worked out for a null destination
                overflow = (np.signbit(prod) == np.signbit(c)) & (np.signbit(total) != np.signbit(c))
                carry = np.broadcast_to(np.where(overflow, np.signbit(c), np.signbit(total)), lanes.shape)
        else:
            prod = a.astype(U64) * b.astype(U64)
            value = prod + c
            carry = np.broadcast_to(value < prod, lanes.shape) if cout != ctx.null or not fast.enabled else None
        write(W, w, bcast(value, lanes.shape), lanes)
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
    post = float_post(typ, instr.fields.get("clamp", 0), instr.fields.get("omod", 0), ctx.dx10_clamp)
    step = advance(instr.size)

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
    post = float_post(typ, instr.fields.get("clamp", 0), instr.fields.get("omod", 0), ctx.dx10_clamp)
    step = advance(instr.size)

    def run(W, w):
        lanes = W.exec_lanes(w)
        value = fpmath.div_fmas(*[np.broadcast_to(r(W, w), lanes.shape) for r in readers], W.lanes_of(w, VCC))
        write(W, w, post(value) if post else value, lanes)
        step(W, w)
    return run


def _compile_cmp_class(instr: Instr, ctx: Context) -> Run:
    typ = instr.mnemonic.rsplit("_", 1)[1]
    mask_t = "u16" if typ == "f16" else "u32"
    return _compile_vcmp(instr, ctx, typ, fpmath.fp_class, instr.mnemonic.startswith("v_cmpx"), mask_t)


def _compile_swap(instr: Instr, ctx: Context) -> Run:
    """v_swap_b32 / v_swap_b16: the destination VGPR (or half) and the src0 VGPR exchange values in the
    active lanes; both are read before either is written."""
    f = instr.fields
    typ = "b16" if instr.mnemonic == "v_swap_b16" else "b32"
    src = f["src0"]
    if src < fm.VGPR_BASE:
        raise ctx.unsupported(instr, "v_swap with a non-VGPR source")
    if typ == "b16":
        (dcode, dhi), (scode, shi) = true16(f["vdst"] + fm.VGPR_BASE), true16(src)
    else:
        (dcode, dhi), (scode, shi) = (f["vdst"] + fm.VGPR_BASE, False), (src, False)
    read_d, read_s = vsrc(ctx, instr, dcode, typ, hi=dhi), vsrc(ctx, instr, scode, typ, hi=shi)
    write_d = vdst_writer(ctx, instr, dcode - fm.VGPR_BASE, typ, hi=dhi)
    write_s = vdst_writer(ctx, instr, scode - fm.VGPR_BASE, typ, hi=shi)
    step = advance(instr.size)

    def run(W, w):
        lanes = W.exec_lanes(w)
        d, s_ = np.array(read_d(W, w)), np.array(read_s(W, w))
        write_d(W, w, s_, lanes)
        write_s(W, w, d, lanes)
        step(W, w)
    return run


_SPECIAL_VALU = {
    "v_swap_b32": _compile_swap, "v_swap_b16": _compile_swap,
    "v_permlane16_b32": crosslane.compile_permlane16, "v_permlanex16_b32": crosslane.compile_permlane16,
    "v_permlane64_b32": crosslane.compile_permlane64,
    "v_mbcnt_lo_u32_b32": crosslane.compile_mbcnt, "v_mbcnt_hi_u32_b32": crosslane.compile_mbcnt,
    "v_readfirstlane_b32": crosslane.compile_readfirstlane, "v_readlane_b32": crosslane.compile_readlane,
    "v_writelane_b32": crosslane.compile_writelane, "v_mad_u64_u32": _compile_mad64, "v_mad_i64_i32": _compile_mad64,
    "v_div_scale_f32": _compile_div_scale, "v_div_scale_f64": _compile_div_scale,
    "v_div_fmas_f32": _compile_div_fmas, "v_div_fmas_f64": _compile_div_fmas,
    **{f"v_cmp{x}_class_{t}": _compile_cmp_class for x in ("", "x") for t in ("f16", "f32", "f64")},
    "v_nop": lambda instr, ctx: advance(instr.size),
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
        halves.append((readers, fn, DTYPES[out_t], vdst_writer(ctx, instr, vdst, out_t), _flushes(name, in_ts, out_t)))
    step = advance(instr.size)

    def half(W, w, readers, fn, dt, flushes):
        """One half's result as its own array: a move's result would be a view of its source register, which
        the other half's write could change before this half writes."""
        args = [r(W, w) for r in readers]
        if not W.flushing:
            return np.array(fn(*args), dt)
        flush_in, flush_out = flushes  # a flushing MODE applies to each half as to the VOP2 form
        return np.array(flush_out(W, w, np.asarray(fn(*flush_in(W, w, args))).astype(dt, copy=False)), dt)

    def run(W, w):
        lanes = W.exec_lanes(w)
        results = [half(W, w, readers, fn, dt, flushes) for readers, fn, dt, _, flushes in halves]
        for (_, _, _, write, _), value in zip(halves, results):
            write(W, w, value, lanes)
        step(W, w)
    return run
