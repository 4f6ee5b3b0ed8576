"""Memory instructions compiled to closures: scalar loads (SMEM), global/flat/scratch loads, stores and
atomics, LDS (DS) and the buffer cache-control forms. Per-lane traffic goes through `lanemem` (checked
against the GPU's page table) or the workgroup's LDS array."""
from __future__ import annotations

from typing import Callable

import numpy as np

from . import cached, fast, lanemem
from .alu import F32, U16, U32, U64
from .decoder import Instr, sext
from .operands import SHARED_APERTURE, Context, Run, ShaderFault, advance
from .waves import EXEC, Waves

def compile_smem(instr: Instr, ctx: Context) -> Run:
    f, name = instr.fields, instr.mnemonic
    step = advance(instr.size)
    if name in ("s_dcache_inv", "s_gl1_inv", "s_icache_inv"):
        return step
    if not name.startswith("s_load_b"):
        raise ctx.unsupported(instr, "scalar memory operation not implemented (s_buffer_load needs a V#)")
    n = int(name[len("s_load_b"):]) // 32
    base_reg, dst = f["sbase"] * 2, f["sdata"]
    offset = sext(f["offset"], 21)
    soff = f["soffset"]
    space = ctx.space
    mem = cached.scalar(instr, ctx)  # lanemem itself when the memory model is off
    plain, null = mem is lanemem, ctx.null

    def run(W, w):
        if plain and W.n == 1 and fast.enabled:  # fast path: one wave, its address in Python ints
            row = W.s[0]
            addr = ((int(row[base_reg]) | int(row[base_reg + 1]) << 32) + offset) & _MASK64
            if soff != null:
                addr = (addr + int(row[soff])) & _MASK64
            addr &= ~3
            m = space.find(addr)
            if m is not None and m.readable and addr + 4 * n <= m.end:  # else the general path checks / faults
                first = (addr - m.start) >> 2
                W.s[0, dst:dst + n] = lanemem._view32(m)[first:first + n]
                if dst <= EXEC + 1 and EXEC < dst + n:
                    W.exec_written()
                step(W, w)
                return
        base = W.s[w, base_reg].astype(U64) | W.s[w, base_reg + 1].astype(U64) << U64(32)
        addr = base + U64(offset & 0xFFFFFFFFFFFFFFFF)
        if soff != ctx.null:
            addr = addr + W.s[w, soff].astype(U64)
        addr = addr & ~U64(3)  # scalar loads are dword aligned
        data = mem.load(space, addr, 4 * n).view(U32)
        W.s[w, dst:dst + n] = data.reshape(-1, n)
        if dst <= EXEC + 1 and EXEC < dst + n:
            W.exec_written()
        step(W, w)
    return run


_MASK64 = (1 << 64) - 1


def _flat_address(instr: Instr, ctx: Context) -> Callable:
    """f(W, w) -> uint64 [nw, lanes] per-lane addresses of a FLAT/GLOBAL instruction."""
    f = instr.fields
    offset = sext(f["offset"], 13) if instr.family != "FLAT" else f["offset"] & 0xFFF
    addr, saddr = f["addr"], f["saddr"]
    if saddr in (ctx.null, 0x7F) or instr.family == "FLAT":  # 64-bit address in a VGPR pair
        def get(W, w):
            pair = W.v[w, addr].astype(U64) | W.v[w, addr + 1].astype(U64) << U64(32)
            if offset == 0 and fast.enabled:  # fast path: nothing to add
                return pair
            return pair + U64(offset & (2 ** 64 - 1))
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
        if saddr not in (ctx.null, 0x7F):
            off += W.s[w, saddr].astype(np.int64)[:, None]
        if vaddr is not None:
            off += W.v[w, vaddr].astype(np.int64)
        lanes = W.exec_lanes(w)
        bad = lanes & ((off < 0) | (off + 4 > W.scratch_lane))
        if bad.any():
            raise ShaderFault(f"{ctx.kernel}, PC +0x{instr.pc:x}: private offset {int(off[bad][0])} outside the "
                              f"{W.scratch_lane}-byte private segment of a lane")
        base = W.scratch_base[w]
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
    step = advance(instr.size)
    flat = instr.family == "FLAT"
    mem = cached.vector(instr, ctx)  # lanemem itself when the memory model is off
    if op.startswith("load_") and op[5:] in _LOAD:
        nbytes, ext = _LOAD[op[5:]]
        dst, ndw = f["vdst"], max(1, nbytes // 4)

        def to_vgprs(W, w, lanes, data):
            if ext is None:
                scatter_dwords(W, w, dst, lanes, data.view(U32).reshape(-1, ndw))
            else:  # 8/16-bit loads zero- or sign-extend to the whole dword
                scatter_dwords(W, w, dst, lanes, data.view(ext).reshape(-1).astype(np.int64).astype(U32)[:, None])
        return _load_run(address, flat, space, step, nbytes, to_vgprs, mem)
    if op.startswith("load_d16_"):  # 8/16-bit load into one half of the VGPR, the other half kept
        kind = op[len("load_d16_"):]
        hi = kind.startswith("hi_")
        nbytes, ext = {"u8": (1, np.uint8), "i8": (1, np.int8), "b16": (2, np.uint16)}[kind[3:] if hi else kind]
        dst = f["vdst"]

        def to_half(W, w, lanes, data):
            merge_half(W, w, dst, lanes, data.view(ext).reshape(-1).astype(np.int64).astype(U16), hi)
        return _load_run(address, flat, space, step, nbytes, to_half, mem)
    if op.startswith("store_d16_hi_"):
        nbytes = {"b8": 1, "b16": 2}[op[len("store_d16_hi_"):]]
        src = f["data"]

        def high_half(W, w, lanes):
            return (W.v[w, src][lanes] >> U32(16)).astype(U16).view(np.uint8).reshape(-1, 2)[:, :nbytes]
        return _store_run(address, flat, space, step, high_half, mem, nbytes)
    if op.startswith("store_") and op[6:] in _STORE:
        nbytes = _STORE[op[6:]]
        src, ndw = f["data"], max(1, nbytes // 4)

        def dwords(W, w, lanes):
            regs = _active(W, _dword_stack(W, w, src, ndw), lanes)  # [active, ndw]
            return regs.astype(U32).view(np.uint8).reshape(-1, 4 * ndw)[:, :nbytes]
        return _store_run(address, flat, space, step, dwords, mem, nbytes)
    if op.startswith("atomic_"):
        return _compile_global_atomic(instr, ctx, op[len("atomic_"):], address)
    raise ctx.unsupported(instr, "memory operation not implemented")


def _load_run(address: Callable, flat: bool, space, step: Callable, nbytes: int, consume: Callable, mem=lanemem) -> Run:
    """A load: per-lane addresses of the active lanes, `nbytes` each from memory (or LDS through the flat
    aperture), handed to `consume(W, w, lanes, data)` to land in registers."""
    def run(W, w):
        lanes = W.exec_lanes(w)
        active = _active(W, address(W, w), lanes)
        data = _flat_load(W, w, lanes, space, active, nbytes, mem) if flat else mem.load(space, active, nbytes)
        consume(W, w, lanes, data)
        step(W, w)
    return run


def _store_run(address: Callable, flat: bool, space, step: Callable, payload: Callable, mem=lanemem,
               nbytes: int = 0) -> Run:
    """A store: `payload(W, w, lanes)` gives the active lanes' bytes, written at their addresses."""
    def run(W, w):
        lanes = W.exec_lanes(w)
        addrs = _active(W, address(W, w), lanes)
        data = payload(W, w, lanes)
        if flat:
            _flat_store(W, w, lanes, space, addrs, data, mem)
        else:
            mem.store(space, addrs, np.ascontiguousarray(data))
        step(W, w)

    def chunked(W, chunk: int) -> bool:
        """Fast path for a whole large batch (core._run_chunked): when every active lane's address lies in one
        writable mapping (all checked before any byte moves, as `lanemem.resolve` does), the store runs `chunk`
        waves at a time in wave order. False, with nothing done, when it does not apply (the general run then
        checks, faults or stores)."""
        if mem is not lanemem or space.__dict__.get("watch_stores") is not None:
            return False
        every = W.exec_lanes(_ALL)
        lo, hi = None, None
        for start in range(0, W.n, chunk):
            part = slice(start, start + chunk)
            addrs = address(W, part)[every[part]]
            if addrs.size:
                if flat and _split_flat(W, part, None, addrs).any():
                    return False
                a, b = int(addrs.min()), int(addrs.max())
                lo, hi = (a, b) if lo is None else (min(lo, a), max(hi, b))
        if lo is not None:
            m = space.find(lo)
            if m is None or hi + nbytes > m.end or not m.writable:
                return False
            for start in range(0, W.n, chunk):
                part = slice(start, start + chunk)
                lanes = every[part]
                addrs = _active(W, address(W, part), lanes)
                if addrs.size:
                    lanemem.store_to(m, addrs, payload(W, part, lanes))
        step(W, _ALL)
        return True
    run.chunked = chunked if nbytes else None
    return run


_ALL = slice(None)


def _dword_stack(W: Waves, w, src: int, ndw: int) -> np.ndarray:
    """[nw, lanes, ndw]: VGPRs src .. src + ndw - 1 side by side (one register: a view, fast path)."""
    if ndw == 1 and fast.enabled:
        return W.v[w, src][..., None]
    return np.stack([W.v[w, src + i] for i in range(ndw)], axis=-1)


def _active(W: Waves, x: np.ndarray, lanes: np.ndarray) -> np.ndarray:
    """`x[lanes]` of an [nw, lanes, ...] array: the active lanes' rows in (wave, lane) order. Fast path: with every
    lane on, the same rows by a reshape instead of a masked copy (callers only read the result)."""
    if fast.enabled and W.all_lanes(lanes):
        return x.reshape(-1, *x.shape[2:])
    return x[lanes]


def scatter_dwords(W: Waves, w, dst: int, lanes: np.ndarray, values: np.ndarray) -> None:
    """Write [active, ndw] dwords to VGPRs dst.. of the active lanes."""
    if W.all_lanes(lanes):  # every lane active: the values are the registers' rows, in lane order
        for i in range(values.shape[1]):
            W.v[w, dst + i] = values[:, i].reshape(lanes.shape)
        return
    for i in range(values.shape[1]):
        full = W.v[w, dst + i]
        full[lanes] = values[:, i]
        W.v[w, dst + i] = full


def merge_half(W: Waves, w, dst: int, lanes: np.ndarray, vals16: np.ndarray, hi: bool) -> None:
    """Write 16-bit values [active] into the low or high half of VGPR dst, keeping the other half."""
    full = W.v[w, dst]
    old = full[lanes]
    full[lanes] = (old & U32(0x0000FFFF)) | vals16.astype(U32) << U32(16) if hi else \
        (old & U32(0xFFFF0000)) | vals16.astype(U32)
    W.v[w, dst] = full


def _split_flat(W, w, lanes, addrs):
    """Which active flat addresses fall in the LDS aperture."""
    return (addrs >> U64(32)) == U64(SHARED_APERTURE >> 32)


def _flat_load(W, w, lanes, space, addrs, nbytes, mem=lanemem):
    lds = _split_flat(W, w, lanes, addrs)
    if fast.enabled and not lds.any():  # fast path: no lane in the LDS aperture, all go to memory as they are
        return mem.load(space, addrs, nbytes)
    out = np.empty((addrs.size, nbytes), np.uint8)
    if (~lds).any():
        out[~lds] = mem.load(space, addrs[~lds], nbytes)
    if lds.any():
        groups = np.broadcast_to(W.group[w][:, None],
                                 lanes.shape)[lanes][lds]
        out[lds] = _lds_load(W, groups, (addrs[lds] & U64(0xFFFFFFFF)).astype(np.int64), nbytes)
    return out


def _flat_store(W, w, lanes, space, addrs, data, mem=lanemem):
    lds = _split_flat(W, w, lanes, addrs)
    if fast.enabled and not lds.any():  # fast path: no lane in the LDS aperture
        mem.store(space, addrs, np.ascontiguousarray(data))
        return
    if (~lds).any():
        mem.store(space, addrs[~lds], np.ascontiguousarray(data[~lds]))
    if lds.any():
        groups = np.broadcast_to(W.group[w][:, None],
                                 lanes.shape)[lanes][lds]
        _lds_store(W, groups, (addrs[lds] & U64(0xFFFFFFFF)).astype(np.int64), np.ascontiguousarray(data[lds]))


_ATOMIC_FNS = {
    "add": lambda o, s: o + s, "sub": lambda o, s: o - s, "swap": lambda o, s: s,
    "and": lambda o, s: o & s, "or": lambda o, s: o | s, "xor": lambda o, s: o ^ s,
    "min": np.minimum, "max": np.maximum,
    "inc": lambda o, s: np.where(o >= s, 0, o + 1).astype(o.dtype),
    "dec": lambda o, s: np.where((o == 0) | (o > s), s, o - 1).astype(o.dtype),
}


def atomic_kind(ctx: Context, instr: Instr, op: str):
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


# integer atomics whose lane-order application is a left fold: old, then each lane's source (swap keeps the last)
_SCANS = {id(_ATOMIC_FNS[k]): u for k, u in (("add", np.add), ("sub", np.subtract), ("and", np.bitwise_and),
                                             ("or", np.bitwise_or), ("xor", np.bitwise_xor), ("min", np.minimum),
                                             ("max", np.maximum), ("swap", "last"))}


def _scan_atomics(old_of, write, addrs, uniq, srcs, scan, dt, rets):
    """apply_atomics for a fold: lanes grouped by address (a stable sort keeps lane order within a group); each
    lane returns the group's value before it, the group's last value is written. Integer scans wrap as the
    hardware's adders do."""
    order = np.argsort(addrs, kind="stable")
    values = np.asarray(srcs, dt)[order]
    bounds = np.flatnonzero(np.r_[True, addrs[order][1:] != addrs[order][:-1], True])
    olds = np.asarray(old_of(uniq), dt)
    finals = np.empty(uniq.size, dt)
    for g in range(uniq.size):
        lo, hi = bounds[g], bounds[g + 1]
        chain = np.concatenate((olds[g:g + 1], values[lo:hi]))
        if scan != "last":
            chain = scan.accumulate(chain, dtype=dt)
        rets[order[lo:hi]] = chain[:-1]
        finals[g] = chain[-1]
    write(uniq, finals)
    return rets


def apply_atomics(old_of, write, addrs, srcs, cmps, fn, dt, cmpswap):
    """Apply per-lane atomics in lane order (lanes on the same address see each other); returns pre-op values."""
    uniq, first = np.unique(addrs, return_index=True)
    rets = np.empty(addrs.size, dt)
    if uniq.size == addrs.size:  # no two lanes share an address: one vector step
        old = old_of(addrs)
        rets[:] = old
        new = np.where(old == cmps, srcs, old) if cmpswap else fn(old, srcs)
        write(addrs, np.asarray(new).astype(dt))
        return rets
    scan = None if cmpswap or np.dtype(dt).kind not in "iu" else _SCANS.get(id(fn))
    if scan is not None:  # lanes sharing an address: each address's lanes folded in lane order, one scan a group
        return _scan_atomics(old_of, write, addrs, uniq, srcs, scan, dt, rets)
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
    fn, dt, size, cmpswap = atomic_kind(ctx, instr, op)
    ndw = size // 4
    src, dst, returns = f["data"], f["vdst"], bool(f["glc"])
    space = ctx.space
    step = advance(instr.size)
    flat = instr.family == "FLAT"
    where = f"{ctx.kernel}, PC +0x{instr.pc:x}"
    mem = cached.atomic(instr, ctx)  # lanemem itself when the memory model is off

    def run(W, w):
        lanes = W.exec_lanes(w)
        addrs = address(W, w)[lanes]
        if flat and addrs.size and _split_flat(W, w, lanes, addrs).any():  # global memory only (below)
            raise ShaderFault(f"{where}: a flat atomic on an LDS-aperture address is not emulated")
        regs = np.stack([W.v[w, src + i] for i in range(ndw * (2 if cmpswap else 1))], axis=-1)[lanes]
        vals = np.ascontiguousarray(regs[:, :ndw]).view(dt).reshape(-1)
        cmps = np.ascontiguousarray(regs[:, ndw:]).view(dt).reshape(-1) if cmpswap else vals
        if addrs.size:
            mem.check(space, addrs, size, "write")
        old_of = lambda a: mem.load(space, a, size).view(dt).reshape(-1)
        write = lambda a, v: mem.store(space, a, np.ascontiguousarray(v).view(np.uint8).reshape(-1, size))
        rets = apply_atomics(old_of, write, addrs, vals, cmps, fn, dt, cmpswap) if addrs.size else \
            np.zeros(0, dt)
        if returns:
            scatter_dwords(W, w, dst, lanes, np.ascontiguousarray(rets).view(U32).reshape(-1, ndw))
        step(W, w)
    return run


# -- LDS -----------------------------------------------------------------------------------------------


def _lds_load(W: Waves, groups: np.ndarray, addrs: np.ndarray, nbytes: int) -> np.ndarray:
    """Bytes from each lane's workgroup LDS; out-of-range addresses read 0 (hardware LDS bounds)."""
    size = W.lds.shape[1]
    ok = (addrs >= 0) & (addrs + nbytes <= size)
    inside = bool(ok.all())
    safe = addrs if inside else np.where(ok, addrs, 0)
    if nbytes % 4 == 0 and size % 4 == 0 and not (safe & 3).any():  # aligned dwords: gather words, not bytes
        words = W.lds.reshape(-1).view(np.uint32)
        first = groups * (size // 4) + (safe >> 2)
        out = words[first[:, None] + np.arange(nbytes // 4)] if nbytes > 4 else words[first][:, None]
        if not inside:
            out[~ok] = 0
        return out.view(np.uint8)
    flat = W.lds.reshape(-1)
    idx = (groups * size + safe)[:, None] + np.arange(nbytes)
    return np.where(ok[:, None], flat[idx], 0).astype(np.uint8)


def _lds_dwords(W: Waves, w, reg: int, offset: int) -> np.ndarray | None:
    """Fast path of a dword LDS load with every lane on: uint32 [nw, lanes], each lane's dword at VGPR `reg` +
    `offset` of its workgroup's LDS, when every address is dword-aligned and inside it (else None: the general
    path, which reads 0 out of range, runs instead)."""
    size = W.lds.shape[1]
    a = W.v[w, reg]
    if size % 4 or offset % 4 or a.size == 0 or int(a.max()) + offset + 4 > size or (a & U32(3)).any():
        return None
    words = W.lds.reshape(-1).view(np.uint32)
    return words[(W.group[w] * (size // 4) + offset // 4)[:, None] + (a >> U32(2))]


def _lds_store(W: Waves, groups: np.ndarray, addrs: np.ndarray, data: np.ndarray) -> None:
    size = W.lds.shape[1]
    nbytes = data.shape[1]
    ok = (addrs >= 0) & (addrs + nbytes <= size)  # out-of-range writes are dropped
    if nbytes % 4 == 0 and size % 4 == 0 and not (addrs & 3).any() and data.flags.c_contiguous:  # aligned dwords
        words = W.lds.reshape(-1).view(np.uint32)
        first = groups[ok] * (size // 4) + (addrs[ok] >> 2)
        values = data.view(np.uint32)[ok]
        if nbytes == 4:
            words[first] = values[:, 0]
        else:
            words[first[:, None] + np.arange(nbytes // 4)] = values
        return
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
    step = advance(instr.size)

    def lane_groups(W, w, lanes):
        g = W.group[w]
        return _active(W, np.broadcast_to(g[:, None], lanes.shape), lanes)

    def addresses(W, w, lanes, offset):
        """Each active lane's LDS address: ADDR + the instruction offset in a 32-bit adder, so a "negative" ADDR
        (0xFFFFFFE0) plus offset:64 is 0x20 (LLVM folds constants into DS offsets over any base on gfx7+:
        GCNSubtarget::hasUsableDSOffset); the sum is then checked against the LDS size."""
        return (_active(W, W.v[w, addr_reg], lanes).astype(np.int64) + offset) & 0xFFFFFFFF

    if op in ("bpermute_b32", "permute_b32", "swizzle_b32"):
        return _compile_lane_shuffle(instr, ctx, op)
    if op.startswith("load_2addr") or op.startswith("store_2addr"):
        stride64 = "stride64" in op
        width = 8 if op.endswith("b64") else 4
        scale = width * (64 if stride64 else 1)
        ndw = width // 4
        if op.startswith("load"):
            def run(W, w):
                lanes = W.exec_lanes(w)
                g = lane_groups(W, w, lanes)
                first = _lds_load(W, g, addresses(W, w, lanes, off0 * scale), width).view(U32).reshape(-1, ndw)
                second = _lds_load(W, g, addresses(W, w, lanes, off1 * scale), width).view(U32).reshape(-1, ndw)
                scatter_dwords(W, w, dst, lanes, np.concatenate([first, second], axis=1))
                step(W, w)
            return run

        def run(W, w):
            lanes = W.exec_lanes(w)
            g = lane_groups(W, w, lanes)
            for reg, off in ((d0, off0), (d1, off1)):
                regs = _active(W, np.stack([W.v[w, reg + i] for i in range(ndw)], axis=-1), lanes)
                _lds_store(W, g, addresses(W, w, lanes, off * scale), np.ascontiguousarray(regs.astype(U32)).view(np.uint8).reshape(-1, width))
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
                data = _lds_load(W, lane_groups(W, w, lanes), addresses(W, w, lanes, offset), nbytes)
                merge_half(W, w, dst, lanes, data.view(ext).reshape(-1).astype(np.int64).astype(U16), hi)
                step(W, w)
            return run

        def run(W, w):
            lanes = W.exec_lanes(w)
            data = (W.v[w, d0][lanes] >> U32(16)).astype(U16).view(np.uint8).reshape(-1, 2)[:, :nbytes]
            _lds_store(W, lane_groups(W, w, lanes), addresses(W, w, lanes, offset), np.ascontiguousarray(data))
            step(W, w)
        return run
    if op.startswith("load_") and op[5:] in _DS_LOAD:
        nbytes = _DS_LOAD[op[5:]]
        signed = op[5:] in ("i8", "i16")
        ndw = max(1, nbytes // 4)

        def run(W, w):
            lanes = W.exec_lanes(w)
            if nbytes == 4 and fast.enabled and W.all_lanes(lanes):
                got = _lds_dwords(W, w, addr_reg, offset)
                if got is not None:
                    W.v[w, dst] = got
                    step(W, w)
                    return
            data = _lds_load(W, lane_groups(W, w, lanes), addresses(W, w, lanes, offset), nbytes)
            if nbytes < 4:
                dt = {1: np.int8 if signed else np.uint8, 2: np.int16 if signed else np.uint16}[nbytes]
                vals = data.view(dt).reshape(-1).astype(np.int64).astype(U32)[:, None]
            else:
                vals = data.view(U32).reshape(-1, ndw)
            scatter_dwords(W, w, dst, lanes, vals)
            step(W, w)
        return run
    if op.startswith("store_") and op[6:] in _DS_STORE:
        nbytes = _DS_STORE[op[6:]]
        ndw = max(1, nbytes // 4)

        def run(W, w):
            lanes = W.exec_lanes(w)
            regs = _active(W, np.stack([W.v[w, d0 + i] for i in range(ndw)], axis=-1), lanes)
            data = np.ascontiguousarray(regs.astype(U32)).view(np.uint8).reshape(-1, 4 * ndw)[:, :nbytes]
            _lds_store(W, lane_groups(W, w, lanes), addresses(W, w, lanes, offset), np.ascontiguousarray(data))
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
        g, a = lane_groups(W, w, lanes), addresses(W, w, lanes, offset)
        inside = a + size <= W.lds.shape[1]  # outside the allocation: nothing changes, the lane reads 0
        flat_addr = (g * W.lds.shape[1] + a)[inside]  # one address space over all groups' LDS
        vals = np.ascontiguousarray(np.stack([W.v[w, d0 + i] for i in range(ndw)], axis=-1)[lanes]).view(dt).reshape(-1)
        # ds_cmpstore: data0 is the new value, data1 the compare value (MEM = MEM == cmp ? src : MEM)
        cmps = np.ascontiguousarray(np.stack([W.v[w, d1 + i] for i in range(ndw)], axis=-1)[lanes]).view(dt).reshape(-1) \
            if cmpswap else vals
        vals, cmps = vals[inside], cmps[inside]
        old_of = lambda fa: _lds_load(W, fa // W.lds.shape[1], fa % W.lds.shape[1], size).view(dt).reshape(-1)
        write = lambda fa, v: _lds_store(W, fa // W.lds.shape[1], fa % W.lds.shape[1],
                                         np.ascontiguousarray(np.asarray(v, dt)).view(np.uint8).reshape(-1, size))
        rets = np.zeros(inside.size, dt)
        if flat_addr.size:
            rets[inside] = apply_atomics(old_of, write, flat_addr, vals, cmps, fn, dt, cmpswap)
        if returns:
            scatter_dwords(W, w, dst, lanes, np.ascontiguousarray(rets).view(U32).reshape(-1, ndw))
        step(W, w)
    return run


def _swizzle_sources(offset: int, lanes: int) -> np.ndarray | None:
    """Source lane per lane for ds_swizzle_b32's offset: quad-permute mode (bit 15) or the bit-mask mode
    (lane = ((lane & and) | or) ^ xor within groups of 32); None for the other (FFT / rotate) modes."""
    lane = np.arange(lanes)
    if offset & 0x8000:
        if offset >= 0xE000:
            return None
        return (lane & ~3) | (offset >> (2 * (lane & 3))) & 3
    and_mask, or_mask, xor_mask = offset & 0x1F, (offset >> 5) & 0x1F, (offset >> 10) & 0x1F
    return (lane & ~31) | (((lane & 31) & and_mask) | or_mask) ^ xor_mask


def _compile_lane_shuffle(instr: Instr, ctx: Context, op: str) -> Run:
    """Cross-lane moves through the LDS crossbar (no LDS memory touched): ds_bpermute_b32 (each lane reads
    data0 of lane addr/4), ds_permute_b32 (each lane writes its data0 to lane addr/4), ds_swizzle_b32 (a
    fixed pattern in the offset). Inactive source lanes read 0; only active lanes are written."""
    f = instr.fields
    addr_reg, d0, dst = f["addr"], f["data0"], f["vdst"]
    offset = f["offset0"] | f["offset1"] << 8
    step = advance(instr.size)
    pattern = _swizzle_sources(offset, ctx.lanes) if op == "swizzle_b32" else None
    if op == "swizzle_b32" and pattern is None:
        raise ctx.unsupported(instr, f"ds_swizzle_b32 offset 0x{offset:x} (FFT/rotate modes) is not emulated")

    def run(W, w):
        lanes = W.exec_lanes(w)
        n = lanes.shape[0]
        rows = np.arange(n)[:, None]
        if op == "swizzle_b32":
            src = W.v[w, addr_reg]  # swizzle moves its addr operand (data lives in the address field)
            picked = np.where(lanes[:, pattern], src[:, pattern], 0)
        else:
            target = ((W.v[w, addr_reg].astype(np.int64) + offset) >> 2) % W.lanes
            data = W.v[w, d0]
            if op == "bpermute_b32":
                picked = np.where(lanes[rows, target], data[rows, target], 0)
            else:  # permute: scatter active lanes' data to their targets, highest lane last
                picked = np.zeros_like(data)
                r, c = np.nonzero(lanes)
                picked[r, target[r, c]] = data[r, c]
        W.v[w, dst] = np.where(lanes, picked, W.v[w, dst]).astype(U32)
        step(W, w)
    return run


def compile_mubuf(instr: Instr, ctx: Context) -> Run:
    if instr.mnemonic in ("buffer_gl0_inv", "buffer_gl1_inv"):  # cache invalidates: memory is coherent here
        return advance(instr.size)
    from .buffer import compile_buffer  # buffer.py builds on this module's helpers
    return compile_buffer(instr, ctx)
