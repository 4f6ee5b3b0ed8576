"""Scalar ALU and program-flow instructions (SOP1, SOP2, SOPC, SOPK, SOPP) compiled to closures."""
from __future__ import annotations

from typing import Callable

import numpy as np

from . import alu, fast, fpmode
from . import formats as fm
from .alu import U32, U64
from .decoder import Instr, sext
from .operands import Context, Run, advance, set_scc, operand_shape, sdst_writer, ssrc
from .waves import EXEC, VCC

def _salu_run(fn: Callable, sources: tuple, write: Callable, step: Callable) -> Run:
    """The common SALU shape: result and SCC (or None: SCC kept) from the sources, then the next PC."""
    def run(W, w):
        r, scc = fn(*[src(W, w) for src in sources])
        write(W, w, r)
        set_scc(W, w, scc)
        step(W, w)
    return run


def compile_sop2(instr: Instr, ctx: Context) -> Run:
    f, name = instr.fields, instr.mnemonic
    d, s0w, s1w = (operand_shape(instr) + [1, 1, 1])[:3]
    a, b = ssrc(ctx, instr, f["ssrc0"], s0w), ssrc(ctx, instr, f["ssrc1"], s1w)
    write = sdst_writer(ctx, instr, f["sdst"], d)
    step = advance(instr.size)
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
    return _salu_run(fn, (a, b), write, step)


def compile_sop1(instr: Instr, ctx: Context) -> Run:
    f, name = instr.fields, instr.mnemonic
    d, s0w = (operand_shape(instr) + [1, 1])[:2]
    step = advance(instr.size)
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
    if name.startswith(("s_bitset0_", "s_bitset1_")):  # D[S0 bit index] <- 0 / 1, the other bits kept
        wide = name.endswith("b64")
        dt = U64 if wide else U32
        a = ssrc(ctx, instr, f["ssrc0"], 1)
        old = ssrc(ctx, instr, f["sdst"], 2 if wide else 1)
        write = sdst_writer(ctx, instr, f["sdst"], 2 if wide else 1)
        set_one = name.startswith("s_bitset1")

        def run(W, w):
            bit = dt(1) << (a(W, w).astype(dt) & dt(63 if wide else 31))
            value = old(W, w).astype(dt)
            write(W, w, value | bit if set_one else value & ~bit)
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
    return _salu_run(fn, (ssrc(ctx, instr, f["ssrc0"], s0w),), sdst_writer(ctx, instr, f["sdst"], d), step)


def compile_sopc(instr: Instr, ctx: Context) -> Run:
    f, name = instr.fields, instr.mnemonic
    parts = name.split("_")  # s_cmp_eq_u32, s_bitcmp1_b32
    step = advance(instr.size)
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
    step = advance(instr.size)
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
            r, ov = alu.sadd_i32(W.s[w, reg], c)
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
    if name in ("s_setreg_b32", "s_setreg_imm32_b32", "s_getreg_b32"):
        return _compile_hwreg(instr, ctx, name, f["simm16"], reg, step)
    raise ctx.unsupported(instr, "SOPK operation not implemented")


HW_REG_MODE = 1


def _compile_hwreg(instr: Instr, ctx: Context, name: str, spec: int, reg: int, step) -> Run:
    """s_setreg / s_getreg of hwreg(HW_REG_MODE, offset, size): the float mode (`fpmode`). Other hardware
    registers are refused."""
    hwreg, offset, size = spec & 0x3F, (spec >> 6) & 0x1F, ((spec >> 11) & 0x1F) + 1
    if hwreg != HW_REG_MODE:
        raise ctx.unsupported(instr, f"hardware register {hwreg} (only HW_REG_MODE is emulated)")
    mask = U32(((1 << size) - 1) << offset & 0xFFFFFFFF)
    where = f"{ctx.kernel}, PC +0x{instr.pc:x}"
    if name == "s_getreg_b32":
        write = sdst_writer(ctx, instr, reg, 1)
        def get(W, w):
            write(W, w, (W.mode[w] & mask) >> U32(offset))
            step(W, w)
        return get
    value = ssrc(ctx, instr, fm.LITERAL, 1) if name == "s_setreg_imm32_b32" else ssrc(ctx, instr, reg, 1)

    def set_(W, w):
        old = W.mode[w]
        new = (old & ~mask) | ((np.broadcast_to(value(W, w), old.shape).astype(U32) << U32(offset)) & mask)
        for o, n in zip(np.atleast_1d(old), np.atleast_1d(new)):
            fpmode.check_writable(int(n), int(o), where)
        W.set_mode(w, new)
        step(W, w)
    return set_


_NOP_SOPP = {"s_nop", "s_waitcnt", "s_delay_alu", "s_clause", "s_set_inst_prefetch_distance", "s_sleep",
             "s_setprio", "s_icache_inv", "s_ttracedata", "s_wait_idle", "s_waitcnt_depctr", "s_wait_event",
             "s_inst_prefetch"}


def compile_sopp(instr: Instr, ctx: Context) -> Run:
    name = instr.mnemonic
    imm = instr.fields["simm16"]
    step = advance(instr.size)
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
    if name == "s_denorm_mode":  # MODE.FP_DENORM <- imm[3:0]
        bits = U32((imm & 0xF) << fpmode.DENORM_SHIFT)
        def run(W, w):
            W.set_mode(w, (W.mode[w] & ~U32(0xF0)) | bits)
            step(W, w)
        return run
    if name == "s_round_mode":
        if imm & 0xF:
            raise ctx.unsupported(instr, f"round mode 0x{imm:x} (not round-to-nearest-even) is not emulated")
        return step
    if name == "s_code_end":
        raise ctx.unsupported(instr, "execution ran into s_code_end padding (past the end of the kernel)")
    target = np.int64(4 + 4 * sext(imm, 16))
    if name == "s_branch":
        def run(W, w):
            if W.n == 1 and fast.enabled:  # fast path: one wave, an element update
                W.pc[0] += target
            else:
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
        if W.n == 1 and fast.enabled:  # fast path: one wave, an element update
            W.pc[0] += target if cond(W, w)[0] else fallthrough
        else:
            W.pc[w] += np.where(cond(W, w), target, fallthrough)
    return run
