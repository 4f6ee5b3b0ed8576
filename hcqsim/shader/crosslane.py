"""Cross-lane VALU instructions: each lane's result depends on other lanes (readlane, readfirstlane,
writelane, mbcnt, permlane16/x16/64)."""
from __future__ import annotations

import numpy as np

from . import formats as fm
from .alu import U32
from .decoder import Instr
from .operands import Context, Run, advance, vdst_writer, vsrc


def compile_readfirstlane(instr: Instr, ctx: Context) -> Run:
    src = vsrc(ctx, instr, instr.fields["src0"], "b32")
    sdst = instr.fields["vdst"]
    step = advance(instr.size)

    def run(W, w):
        lanes = W.exec_lanes(w)
        values = np.broadcast_to(src(W, w), lanes.shape)
        first = np.where(lanes.any(axis=1), lanes.argmax(axis=1), 0)
        W.s[w, sdst] = values[np.arange(values.shape[0]), first]
        step(W, w)
    return run


def compile_readlane(instr: Instr, ctx: Context) -> Run:
    src = vsrc(ctx, instr, instr.fields["src0"], "b32")
    lane = vsrc(ctx, instr, instr.fields["src1"], "u32")
    sdst = instr.fields["vdst"]
    step = advance(instr.size)

    def run(W, w):
        values = np.broadcast_to(src(W, w), (W.s[w, 0].shape[0], W.lanes))
        sel = np.broadcast_to(lane(W, w), (values.shape[0], 1))[:, 0].astype(np.int64) % W.lanes
        W.s[w, sdst] = values[np.arange(values.shape[0]), sel]
        step(W, w)
    return run


def compile_writelane(instr: Instr, ctx: Context) -> Run:
    src = vsrc(ctx, instr, instr.fields["src0"], "b32")
    lane = vsrc(ctx, instr, instr.fields["src1"], "u32")
    dst = instr.fields["vdst"]
    step = advance(instr.size)

    def run(W, w):
        n = W.s[w, 0].shape[0]
        value = np.broadcast_to(src(W, w), (n, 1))[:, 0]
        sel = np.broadcast_to(lane(W, w), (n, 1))[:, 0].astype(np.int64) % W.lanes
        mask = np.zeros((n, W.lanes), bool)
        mask[np.arange(n), sel] = True
        W.v[w, dst] = np.where(mask, value[:, None], W.v[w, dst])
        step(W, w)
    return run


def compile_mbcnt(instr: Instr, ctx: Context) -> Run:
    """v_mbcnt_lo/hi_u32_b32: count of the mask bits below each lane (low or high 32 lanes), plus src1."""
    f = instr.fields
    src1 = f["vsrc1"] + fm.VGPR_BASE if instr.family == "VOP2" else f["src1"]
    mask, add = vsrc(ctx, instr, f["src0"], "u32"), vsrc(ctx, instr, src1, "u32")
    hi = instr.mnemonic.startswith("v_mbcnt_hi")
    write = vdst_writer(ctx, instr, instr.fields["vdst"], "u32")
    step = advance(instr.size)

    def run(W, w):
        lanes = W.exec_lanes(w)
        lane = W.lane_ids.astype(np.int64) - (32 if hi else 0)
        below = np.where(lane >= 32, 0xFFFFFFFF, (np.left_shift(1, np.clip(lane, 0, 32)) - 1)).astype(np.uint64)
        m = np.broadcast_to(mask(W, w), lanes.shape).astype(np.uint64)
        value = np.bitwise_count(m & below).astype(U32) + add(W, w)
        write(W, w, np.broadcast_to(value, lanes.shape), lanes)
        step(W, w)
    return run


def compile_permlane16(instr: Instr, ctx: Context) -> Run:
    """v_permlane16_b32 / v_permlanex16_b32: each lane reads src0 from the lane of its row (x16: of the other
    row of its 32-lane half) picked by its nibble of the 64-bit select {src2, src1}. OPSEL bit 0 = FI (read
    inactive lanes), bit 1 = BOUND_CTRL (an inactive source reads 0 instead of leaving the lane unwritten)."""
    f = instr.fields
    src, sel_lo, sel_hi = (vsrc(ctx, instr, f[k], "b32") for k in ("src0", "src1", "src2"))
    fetch_inactive, bound_zero = bool(f["opsel"] & 1), bool(f["opsel"] & 2)
    cross = instr.mnemonic == "v_permlanex16_b32"
    dst = f["vdst"]
    step = advance(instr.size)
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


def compile_permlane64(instr: Instr, ctx: Context) -> Run:
    if ctx.lanes != 64:
        raise ctx.unsupported(instr, "v_permlane64_b32 exchanges wave halves: wave64 only")
    src = vsrc(ctx, instr, instr.fields["src0"], "b32")
    dst = instr.fields["vdst"]
    step = advance(instr.size)
    swap = np.arange(64) ^ 32

    def run(W, w):
        lanes = W.exec_lanes(w)
        values = np.broadcast_to(src(W, w), lanes.shape)
        W.v[w, dst] = np.where(lanes & lanes[:, swap], values[:, swap], W.v[w, dst])
        step(W, w)
    return run
