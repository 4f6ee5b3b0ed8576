"""Buffer (MUBUF) loads, stores and atomics through a V# resource descriptor, for gfx1100 and gfx942.

The V# (four SGPRs, `srsrc` * 4 ..): as both ISA guides lay it out
* dword 0-1: base address [47:0], stride [61:48] (14 bits), swizzle control [63:62]
  (gfx11: SWIZZLE_ENABLE, 2 bits; gfx942: bit 62 is the gfx942 cache-swizzle hint, bit 63 SWIZZLE_ENABLE);
* dword 2: NUM_RECORDS;
* dword 3: DST_SEL / format fields (used only by the *_format_* forms, not executed here), INDEX_STRIDE [118:117],
  ADD_TID_ENABLE [119], and on gfx11 OOB_SELECT [125:124].

Addressing (non-swizzled):
    index  = (idxen ? vgpr_index : 0) + (ADD_TID_ENABLE ? lane id : 0)
    offset = (offen ? vgpr_offset : 0) + inst_offset          (both VGPRs: vaddr = index, vaddr+1 = offset)
    addr   = base + soffset + index * stride + offset

Range checking (a component out of range reads 0, and its store or atomic is dropped):
* gfx942 (GFX9 rules; NUM_RECORDS is in units of stride only for indexed accesses with stride != 0):
    indexed (idxen or ADD_TID) with stride != 0: out of range when index >= NUM_RECORDS;
    otherwise NUM_RECORDS is bytes: out of range when offset + component end > NUM_RECORDS.
* gfx1100 (OOB_SELECT): 0 index >= NUM_RECORDS or offset + component end > stride; 1 index >= NUM_RECORDS;
    2 NUM_RECORDS == 0 (no other check); 3 (raw) index * stride + offset + component end > NUM_RECORDS.
* soffset takes no part in the check on either target.
* Components: multi-dword loads and stores are checked per dword; byte / short accesses and atomics are
  checked whole ("all or nothing").
Uncertain (no hardware to confirm): whether a component that straddles NUM_RECORDS counts as in range
(hcqsim: it must fit entirely) and whether soffset is part of the check (hcqsim: it is not).

Not executed (a clean ShaderUnsupported / ShaderFault naming the instruction): the *_format_* forms (they
convert through the V# format), swizzled descriptors (SWIZZLE_ENABLE != 0), tfe, MUBUF `lds` loads,
buffer_atomic_csub_u32 and the f64 / packed-f16 atomics.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from . import cached, lanemem
from .alu import U16, U32, U64
from .decoder import Instr
from .gfx9_names import gfx11_name
from .memops import apply_atomics, atomic_kind, merge_half, scatter_dwords
from .operands import Context, Run, ShaderUnsupported, advance, ssrc

_LOAD = {"u8": (1, np.uint8), "i8": (1, np.int8), "u16": (2, np.uint16), "i16": (2, np.int16), "b32": (4, None),
         "b64": (8, None), "b96": (12, None), "b128": (16, None)}
_STORE = {"b8": 1, "b16": 2, "b32": 4, "b64": 8, "b96": 12, "b128": 16}


def buffer_op(name: str) -> str:
    """The operation part of a buffer mnemonic in gfx11 spelling: 'load_b32', 'store_d16_hi_b8',
    'atomic_add_u32' (GFX9 buffer_load_dword / buffer_atomic_smin_x2 are renamed like their global forms)."""
    rest = name[len("buffer_"):]
    return gfx11_name("global_" + rest)[len("global_"):]


class _Descriptor:
    """The V# fields of a selection of waves, each uint64 [nw, 1] so they broadcast over lanes."""

    def __init__(self, W, w, reg: int, arch: str):
        rs = W.s[w, reg:reg + 4].astype(U64)
        self.base = (rs[:, 0] | (rs[:, 1] & U64(0xFFFF)) << U64(32))[:, None]
        self.stride = ((rs[:, 1] >> U64(16)) & U64(0x3FFF))[:, None]
        # gfx942 bit 62 only steers cache placement (MI300 cache swizzle): addressing ignores it
        self.swizzle = (rs[:, 1] >> U64(31 if arch == "gfx942" else 30))[:, None]
        self.num = rs[:, 2][:, None]
        self.add_tid = ((rs[:, 3] >> U64(23)) & U64(1)).astype(bool)[:, None]
        self.oob = ((rs[:, 3] >> U64(28)) & U64(3))[:, None]


def _addressing(instr: Instr, ctx: Context) -> Callable:
    """f(W, w, lanes) -> (addresses uint64 [active], in_range(component offset, size) -> bool [active]) for the
    active lanes of a buffer instruction."""
    f = instr.fields
    offen, idxen = bool(f["offen"]), bool(f["idxen"])
    vaddr, inst_off = f["vaddr"], f["offset"]
    soffset = ssrc(ctx, instr, f["soffset"], 1)
    reg = f["srsrc"] * 4
    arch, lane_ids = ctx.arch, np.arange(ctx.lanes, dtype=U64)

    def get(W, w, lanes):
        d = _Descriptor(W, w, reg, arch)
        if (d.swizzle.astype(bool) & lanes.any(axis=1, keepdims=True)).any():
            raise ShaderUnsupported(f"{ctx.kernel}, PC +0x{instr.pc:x} ({instr.mnemonic}): swizzled buffer "
                                    f"descriptors (SWIZZLE_ENABLE) are not emulated")
        index = W.v[w, vaddr].astype(U64) if idxen else np.zeros(lanes.shape, U64)
        index = index + np.where(d.add_tid, lane_ids, U64(0))
        offset = (W.v[w, vaddr + idxen].astype(U64) if offen else np.zeros(lanes.shape, U64)) + U64(inst_off)
        so = np.broadcast_to(np.asarray(soffset(W, w), U32).astype(U64).reshape(-1, 1), lanes.shape)
        addr = (d.base + so + index * d.stride + offset)[lanes]
        index, offset = index[lanes], offset[lanes]
        rows = np.broadcast_to(np.arange(lanes.shape[0])[:, None], lanes.shape)[lanes]
        stride, num = d.stride[rows, 0], d.num[rows, 0]
        if arch == "gfx942":
            indexed = (idxen | d.add_tid[rows, 0]) & (stride != 0)

            def in_range(start: int, size: int) -> np.ndarray:
                return np.where(indexed, index < num, offset + U64(start + size) <= num)
        else:
            oob = d.oob[rows, 0]

            def in_range(start: int, size: int) -> np.ndarray:
                end = offset + U64(start + size)
                return np.select([oob == 0, oob == 1, oob == 2],
                                 [(index < num) & (end <= stride), index < num, num != 0],
                                 index * stride + end <= num)
        return addr, in_range
    return get


def _components(nbytes: int) -> list[tuple[int, int]]:
    """(offset, size) of the range-checked pieces of an access: dwords, or the whole sub-dword access."""
    return [(i, 4) for i in range(0, nbytes, 4)] if nbytes >= 4 else [(0, nbytes)]


def _load(space, addrs: np.ndarray, in_range: Callable, nbytes: int, mem=lanemem) -> np.ndarray:
    """uint8 [active, nbytes]: memory where in range, 0 elsewhere (nothing out of range is touched)."""
    parts = _components(nbytes)
    oks = [in_range(o, s) for o, s in parts]
    if all(ok.all() for ok in oks):
        return mem.load(space, addrs, nbytes) if addrs.size else np.zeros((0, nbytes), np.uint8)
    out = np.zeros((addrs.size, nbytes), np.uint8)
    for (o, s), ok in zip(parts, oks):
        if ok.any():
            out[ok, o:o + s] = mem.load(space, addrs[ok] + U64(o), s)
    return out


def _store(space, addrs: np.ndarray, in_range: Callable, data: np.ndarray, mem=lanemem) -> None:
    parts = _components(data.shape[1])
    oks = [in_range(o, s) for o, s in parts]
    if all(ok.all() for ok in oks):
        if addrs.size:
            mem.store(space, addrs, np.ascontiguousarray(data))
        return
    for (o, s), ok in zip(parts, oks):
        if ok.any():
            mem.store(space, addrs[ok] + U64(o), np.ascontiguousarray(data[ok, o:o + s]))


def compile_buffer(instr: Instr, ctx: Context) -> Run:
    """A MUBUF load, store or atomic (cache invalidates are handled by the caller)."""
    f, name = instr.fields, instr.mnemonic
    if f.get("tfe"):
        raise ctx.unsupported(instr, "buffer access with tfe (texture fail enable) is not emulated")
    if f.get("lds"):
        raise ctx.unsupported(instr, "buffer loads into LDS (lds bit) are not emulated")
    op = buffer_op(name)
    if "format" in op:
        raise ctx.unsupported(instr, "typed buffer access (*_format_*: V# format conversion) is not emulated")
    address = _addressing(instr, ctx)
    space, step, vdata = ctx.space, advance(instr.size), f["vdata"]
    mem = cached.vector(instr, ctx)  # lanemem itself when the memory model is off
    if op.startswith("load_") and op[5:] in _LOAD:
        nbytes, ext = _LOAD[op[5:]]
        ndw = max(1, nbytes // 4)

        def run(W, w):
            lanes = W.exec_lanes(w)
            addrs, in_range = address(W, w, lanes)
            data = _load(space, addrs, in_range, nbytes, mem)
            if ext is None:
                vals = data.view(U32).reshape(-1, ndw)
            else:  # 8/16-bit loads zero- or sign-extend to the dword
                vals = data.view(ext).reshape(-1).astype(np.int64).astype(U32)[:, None]
            scatter_dwords(W, w, vdata, lanes, vals)
            step(W, w)
        return run
    if op.startswith("load_d16_"):  # into one half of the VGPR, the other half kept
        kind = op[len("load_d16_"):]
        hi = kind.startswith("hi_")
        nbytes, ext = {"u8": (1, np.uint8), "i8": (1, np.int8), "b16": (2, np.uint16)}[kind[3:] if hi else kind]

        def run(W, w):
            lanes = W.exec_lanes(w)
            addrs, in_range = address(W, w, lanes)
            data = _load(space, addrs, in_range, nbytes, mem)
            merge_half(W, w, vdata, lanes, data.view(ext).reshape(-1).astype(np.int64).astype(U16), hi)
            step(W, w)
        return run
    if op.startswith("store_d16_hi_") or (op.startswith("store_") and op[6:] in _STORE):
        hi = op.startswith("store_d16_hi_")
        nbytes = {"b8": 1, "b16": 2}[op[13:]] if hi else _STORE[op[6:]]
        ndw = max(1, nbytes // 4)

        def run(W, w):
            lanes = W.exec_lanes(w)
            addrs, in_range = address(W, w, lanes)
            if hi:
                data = (W.v[w, vdata][lanes] >> U32(16)).astype(U16).view(np.uint8).reshape(-1, 2)[:, :nbytes]
            else:
                regs = np.stack([W.v[w, vdata + i] for i in range(ndw)], axis=-1)[lanes]
                data = regs.astype(U32).view(np.uint8).reshape(-1, 4 * ndw)[:, :nbytes]
            _store(space, addrs, in_range, data, mem)
            step(W, w)
        return run
    if op.startswith("atomic_"):
        return _compile_atomic(instr, ctx, op[len("atomic_"):], address)
    raise ctx.unsupported(instr, "buffer operation not implemented")


def _compile_atomic(instr: Instr, ctx: Context, op: str, address: Callable) -> Run:
    f = instr.fields
    if op.startswith("csub"):
        raise ctx.unsupported(instr, "buffer_atomic_csub_u32 is not emulated")
    fn, dt, size, cmpswap = atomic_kind(ctx, instr, op)
    ndw = size // 4
    vdata, returns = f["vdata"], bool(f.get("glc", f.get("sc0", 0)))
    space, step = ctx.space, advance(instr.size)
    mem = cached.atomic(instr, ctx)  # lanemem itself when the memory model is off

    def run(W, w):
        lanes = W.exec_lanes(w)
        addrs, in_range = address(W, w, lanes)
        ok = in_range(0, size)  # atomics are range-checked all or nothing
        regs = np.stack([W.v[w, vdata + i] for i in range(ndw * (2 if cmpswap else 1))], axis=-1)[lanes]
        vals = np.ascontiguousarray(regs[:, :ndw]).view(dt).reshape(-1)
        cmps = np.ascontiguousarray(regs[:, ndw:]).view(dt).reshape(-1) if cmpswap else vals
        rets = np.zeros(addrs.size, dt)  # an out-of-range atomic returns 0
        if ok.any():
            a = addrs[ok]
            mem.check(space, a, size, "write")
            old_of = lambda x: mem.load(space, x, size).view(dt).reshape(-1)
            write = lambda x, v: mem.store(space, x, np.ascontiguousarray(v).view(np.uint8).reshape(-1, size))
            rets[ok] = apply_atomics(old_of, write, a, vals[ok], cmps[ok], fn, dt, cmpswap)
        if returns:
            scatter_dwords(W, w, vdata, lanes, np.ascontiguousarray(rets).view(U32).reshape(-1, ndw))
        step(W, w)
    return run
