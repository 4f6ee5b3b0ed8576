"""Matrix instructions: gfx11 WMMA (VOP3P v_wmma_*), gfx942 MFMA (VOP3P_MAI v_mfma_*) and the AccVGPR
moves (v_accvgpr_read/write/mov_b32).

`MATRIX_OPS` names the mnemonics this module executes; `compile_matrix(instr, ctx)` compiles one.

AccVGPRs (gfx942). The kernel's VGPRs and AGPRs share one register file (RSRC1.VGPRS counts both): the
architectural VGPRs come first and a[n] is unified register ACCUM_OFFSET + n, where ACCUM_OFFSET =
(COMPUTE_PGM_RSRC3[5:0] + 1) * 4 (`ctx.accum_offset`, set by the core). `agpr(ctx, n)` maps one.

MFMA (gfx942, wave64). D = A * B + C per block, with the lane layouts of the CDNA3 ISA's matrix
chapter (as the AMD matrix instruction calculator prints them), for M x N x K with B blocks and
E = K * M * B / 64 elements of A per lane:
    A[b][i][k]: lane i + M * b + M * B * (k // E), element k % E of the lane's A registers
    B[b][k][j]: lane j + N * b + N * B * (k // E), element k % E
    C/D[b][i][j]: rows in chunks of four, chunk q = b * M / 4 + i // 4 over G = 64 / N lane groups:
                  lane j + N * (q % G), register 4 * (q // G) + i % 4
Elements fill a register from its low bits (f16/bf16: low half first; i8: byte 0 first).
Non-zero cbsz / abid / blgp (the block broadcast controls) fault cleanly, as do the xf32, fp8/bf8, f64
and sparse (v_smfmac) forms.

WMMA (gfx11). 16x16x16; A: lane i (of each 16-lane group; hcqsim reads lanes 0-15, the others must hold the
same values, as the ISA requires) holds row i, K element k in register k // P at sub-position k % P (P = 2
halves, 4 bytes or 8 nibbles per register); B: lane j holds column j likewise. C/D (f32/i32): register r of
lane l holds row (lanes / 16) * r + l // 16, column l % 16 (wave32: 8 registers, rows interleaved between
the two half-waves; wave64: 4 registers). f16/bf16 results use the same layout in the low (op_sel[2] = 0)
or high half of each register; C is read from that half and the other half of D keeps C's other half.
iu8/iu4: neg_lo[0] / neg_lo[1] make A / B signed, clamp saturates to i32. A float WMMA with neg/abs
modifiers, clamp, or other op_sel bits faults cleanly (LLVM's gfx11 intrinsics emit none).

EXEC: MFMA and WMMA need every lane of the wave enabled (ISA); a partial EXEC is a clean fault.

Rounding (not specified by the ISA; hardware may differ in the last place): the K products of one output
element and C are summed in float64 in k order and rounded once (round to nearest even) to the result type.
f16/bf16 products are exact in float64, so results are exact whenever the true sum fits the result type
exactly (the tests choose such inputs) and within one rounding of the exact value otherwise, while
hardware may round partial sums. Integer forms are exact (i32 wrap, or saturation with clamp).
"""
from __future__ import annotations

import re

import numpy as np

from .alu import F32, F64, U16, U32
from .decoder import Instr
from .operands import Context, Run, ShaderFault, advance, vsrc
from . import formats as fm
from . import fpmath

_MFMA_RE = re.compile(r"v_mfma_(f32|i32)_(\d+)x(\d+)x(\d+)(?:_(\d+)b)?_(f32|f16|bf16|i8)")
_WMMA = {  # mnemonic -> (input type, result type)
    "v_wmma_f32_16x16x16_f16": ("f16", "f32"), "v_wmma_f32_16x16x16_bf16": ("bf16", "f32"),
    "v_wmma_f16_16x16x16_f16": ("f16", "f16"), "v_wmma_bf16_16x16x16_bf16": ("bf16", "bf16"),
    "v_wmma_i32_16x16x16_iu8": ("iu8", "i32"), "v_wmma_i32_16x16x16_iu4": ("iu4", "i32"),
}
_MFMA = frozenset({
    "v_mfma_f32_32x32x1_2b_f32", "v_mfma_f32_16x16x1_4b_f32", "v_mfma_f32_4x4x1_16b_f32",
    "v_mfma_f32_32x32x2_f32", "v_mfma_f32_16x16x4_f32",
    "v_mfma_f32_32x32x4_2b_f16", "v_mfma_f32_16x16x4_4b_f16", "v_mfma_f32_4x4x4_16b_f16",
    "v_mfma_f32_32x32x8_f16", "v_mfma_f32_16x16x16_f16",
    "v_mfma_f32_32x32x4_2b_bf16", "v_mfma_f32_16x16x4_4b_bf16", "v_mfma_f32_4x4x4_16b_bf16",
    "v_mfma_f32_32x32x8_bf16", "v_mfma_f32_16x16x16_bf16",
    "v_mfma_i32_32x32x4_2b_i8", "v_mfma_i32_16x16x4_4b_i8", "v_mfma_i32_4x4x4_16b_i8",
    "v_mfma_i32_32x32x16_i8", "v_mfma_i32_16x16x32_i8",
})
_MOVES = frozenset({"v_accvgpr_read_b32", "v_accvgpr_write_b32", "v_accvgpr_mov_b32"})
MATRIX_OPS: frozenset[str] = _MOVES | _MFMA | frozenset(_WMMA)


def is_matrix(name: str) -> bool:
    """True for every matrix-family mnemonic, executed here or not (so none falls through to packed math)."""
    return name.startswith(("v_wmma_", "v_mfma_", "v_smfmac_", "v_accvgpr_"))


def accum_offset(ctx: Context) -> int:
    """Unified register number of a0 (gfx942); kernels without RSRC3 information put AGPRs after all VGPRs."""
    return getattr(ctx, "accum_offset", ctx.vgprs)


def agpr(ctx: Context, instr: Instr, n: int, count: int = 1) -> int:
    """Unified register number of a[n] (checked that a[n .. n+count-1] were allocated)."""
    reg = accum_offset(ctx) + n
    if reg + count > ctx.vgprs:
        raise ctx.unsupported(instr, f"uses a[{n}:{n + count - 1}], beyond the {ctx.vgprs - accum_offset(ctx)} "
                                     f"AccVGPRs the kernel allocated (ACCUM_OFFSET {accum_offset(ctx)})")
    return reg


def acc_operands(instr: Instr, ctx: Context) -> Instr:
    """A gfx942 memory instruction whose `acc` bit says its data / destination registers are AccVGPRs, with
    those fields renumbered to unified registers (FLAT/GLOBAL/SCRATCH data, vdst; DS data0/1, vdst; MUBUF
    vdata), so the memory compilers need not know about AGPRs."""
    f = instr.fields
    if instr.family not in ("FLAT", "GLOBAL", "SCRATCH", "DS", "MUBUF") or not f.get("acc"):
        return instr
    base = accum_offset(ctx)
    names = {"DS": ("data0", "data1", "vdst"), "MUBUF": ("vdata",)}.get(instr.family, ("data", "vdst"))
    fields = dict(f, **{k: f[k] + base for k in names})
    top = max(fields[k] for k in names)
    if top >= ctx.vgprs:
        raise ctx.unsupported(instr, f"an AccVGPR operand beyond the {ctx.vgprs - base} the kernel allocated")
    from dataclasses import replace
    return replace(instr, fields=fields)


def compile_matrix(instr: Instr, ctx: Context) -> Run:
    name = instr.mnemonic
    if name not in MATRIX_OPS:
        raise ctx.unsupported(instr, "matrix instruction not implemented by the shader core")
    if name in _MOVES:
        return _compile_move(instr, ctx)
    if name in _MFMA:
        return _compile_mfma(instr, ctx)
    return _compile_wmma(instr, ctx)


def _full_exec(instr: Instr, ctx: Context):
    def check(W, w, lanes):
        if not lanes.all():
            raise ShaderFault(f"{ctx.kernel}, PC +0x{instr.pc:x} ({instr.mnemonic}): a matrix instruction with "
                              f"EXEC not all ones (the ISA leaves the result undefined)")
    return check


# -- AccVGPR moves -----------------------------------------------------------------------------------------


def _compile_move(instr: Instr, ctx: Context) -> Run:
    """v_accvgpr_read_b32 v, a / v_accvgpr_write_b32 a, v|const / v_accvgpr_mov_b32 a, a (under EXEC)."""
    f, name = instr.fields, instr.mnemonic
    src, dst = f["src0"], f["vdst"]
    if name != "v_accvgpr_write_b32":  # the source is an AGPR
        if src < fm.VGPR_BASE:
            raise ctx.unsupported(instr, "AccVGPR source operand that is not a register")
        src = fm.VGPR_BASE + agpr(ctx, instr, src - fm.VGPR_BASE)
    read = vsrc(ctx, instr, src, "b32")
    if name == "v_accvgpr_read_b32":
        if dst >= accum_offset(ctx):
            raise ctx.unsupported(instr, f"writes v{dst}, beyond the {accum_offset(ctx)} architectural VGPRs")
    else:
        dst = agpr(ctx, instr, dst)
    step = advance(instr.size)

    def run(W, w):
        lanes = W.exec_lanes(w)
        W.v[w, dst] = np.where(lanes, read(W, w), W.v[w, dst])
        step(W, w)
    return run


# -- register blocks --------------------------------------------------------------------------------------


def _block_reader(ctx: Context, instr: Instr, code: int, count: int, is_acc: bool):
    """f(W, w) -> uint32 [nw, lanes, count]: `count` consecutive registers from operand `code` (a VGPR, an
    AGPR when `is_acc`, or a constant repeated in every register)."""
    if code >= fm.VGPR_BASE:
        n = code - fm.VGPR_BASE
        reg = agpr(ctx, instr, n, count) if is_acc else n
        if not is_acc and reg + count > accum_offset(ctx):
            raise ctx.unsupported(instr, f"reads v[{reg}:{reg + count - 1}], beyond the architectural VGPRs")
        return lambda W, w: np.moveaxis(W.v[w, reg:reg + count], -2, -1)
    if not fm.is_inline_constant(code):
        raise ctx.unsupported(instr, f"matrix operand {code} is not a register or an inline constant")
    value = vsrc(ctx, instr, code, "b32")
    return lambda W, w: np.full((W.s[w, 0].shape[0], ctx.lanes, count), value(W, w), U32)


def _block_writer(ctx: Context, instr: Instr, reg_code: int, count: int, is_acc: bool):
    reg = agpr(ctx, instr, reg_code, count) if is_acc else reg_code
    if not is_acc and reg + count > accum_offset(ctx):
        raise ctx.unsupported(instr, f"writes v[{reg}:{reg + count - 1}], beyond the architectural VGPRs")

    def write(W, w, values):  # values: uint32 [nw, lanes, count]
        W.v[w, reg:reg + count] = np.moveaxis(values, -1, -2)
    return write


def _elements(regs: np.ndarray, typ: str) -> np.ndarray:
    """uint32 registers [..., r] -> the packed elements [..., r * per-register] as float64 / int64."""
    regs = np.ascontiguousarray(regs)
    if typ == "f32":
        return regs.view(F32).astype(F64)
    if typ == "f16":
        return np.ascontiguousarray(regs).view(np.float16).astype(F64)
    if typ == "bf16":
        halves = np.ascontiguousarray(regs).view(U16).astype(U32) << U32(16)
        return halves.view(F32).astype(F64)
    if typ in ("i8", "iu8s"):
        return np.ascontiguousarray(regs).view(np.int8).astype(np.int64)
    if typ == "iu8":
        return np.ascontiguousarray(regs).view(np.uint8).astype(np.int64)
    if typ in ("iu4", "iu4s"):
        nib = (regs[..., :, None] >> (U32(4) * np.arange(8, dtype=U32))) & U32(0xF)
        nib = nib.reshape(*regs.shape[:-1], -1).astype(np.int64)
        return np.where(nib >= 8, nib - 16, nib) if typ == "iu4s" else nib
    raise AssertionError(typ)


def _round_to(x: np.ndarray, typ: str) -> np.ndarray:
    """float64 / int64 results -> uint32 register bits (f32, i32) or uint16 (f16, bf16), rounded to nearest even.
    A NaN element is the default NaN (fpmath.DEFAULT_NAN; bf16: its f32 form's top half): which NaN a sum of
    several keeps is the summation's choice, not one the ISA documents, and must not be numpy's."""
    if typ == "i32":
        return (x & 0xFFFFFFFF).astype(np.uint64).astype(U32)
    nan = np.isnan(x)
    if typ == "f32":
        return np.where(nan, U32(fpmath.DEFAULT_NAN[4]), x.astype(F32).view(U32))
    if typ == "f16":
        return np.where(nan, U16(fpmath.DEFAULT_NAN[2]), x.astype(np.float16).view(U16))
    if typ == "bf16":
        f = x.astype(F32)
        bits = f.view(U32).astype(np.uint64)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # RNE on the dropped 16 bits
        return np.where(nan, fpmath.DEFAULT_NAN[4] >> 16, rounded).astype(U16)
    raise AssertionError(typ)


# -- MFMA (gfx942) -------------------------------------------------------------------------------------------


def mfma_layout(m: int, n: int, k: int, blocks: int, lanes: int = 64):
    """Index arrays of the MFMA layouts (module doc): A (lane, element) [B, M, K], B (lane, element) [B, K, N],
    D (lane, register) [B, M, N]."""
    e = k * m * blocks // lanes
    b, i, kk = np.meshgrid(np.arange(blocks), np.arange(m), np.arange(k), indexing="ij")
    a_lane, a_elem = i + m * b + m * blocks * (kk // e), kk % e
    b2, kk2, j = np.meshgrid(np.arange(blocks), np.arange(k), np.arange(n), indexing="ij")
    b_lane, b_elem = j + n * b2 + n * blocks * (kk2 // e), kk2 % e
    b3, i3, j3 = np.meshgrid(np.arange(blocks), np.arange(m), np.arange(n), indexing="ij")
    groups = lanes // n
    q = b3 * (m // 4) + i3 // 4
    d_lane, d_reg = j3 + n * (q % groups), 4 * (q // groups) + i3 % 4
    return (a_lane, a_elem), (b_lane, b_elem), (d_lane, d_reg)


def _compile_mfma(instr: Instr, ctx: Context) -> Run:
    f, name = instr.fields, instr.mnemonic
    out_t, m, n, k, blocks, in_t = _MFMA_RE.fullmatch(name).groups()
    m, n, k, blocks = int(m), int(n), int(k), int(blocks or 1)
    for field in ("cbsz", "abid", "blgp"):
        if f[field]:
            raise ctx.unsupported(instr, f"MFMA {field} = {f[field]} (block broadcast / lane-group pattern) "
                                         f"is not emulated")
    if ctx.lanes != 64:
        raise ctx.unsupported(instr, "MFMA needs wave64")
    nd, na, nb, nc = (int(x) for x in instr.shape.replace(":", ",").split(","))
    read_a = _block_reader(ctx, instr, f["src0"], na, bool(f["acc"] & 1))
    read_b = _block_reader(ctx, instr, f["src1"], nb, bool(f["acc"] & 2))
    read_c = _block_reader(ctx, instr, f["src2"], nc, bool(f["acc_cd"]))
    write_d = _block_writer(ctx, instr, f["vdst"], nd, bool(f["acc_cd"]))
    (al, ae), (bl, be), (dl, dr) = mfma_layout(m, n, k, blocks)
    c_t = "i32" if out_t == "i32" else "f32"
    check, step = _full_exec(instr, ctx), advance(instr.size)

    def run(W, w):
        lanes = W.exec_lanes(w)
        check(W, w, lanes)
        a = _elements(read_a(W, w), in_t)[:, al, ae]  # [nw, B, M, K]
        b = _elements(read_b(W, w), in_t)[:, bl, be]  # [nw, B, K, N]
        c = read_c(W, w)[:, dl, dr]  # [nw, B, M, N] raw bits
        c = c.view(np.int32).astype(np.int64) if c_t == "i32" else c.view(F32).astype(F64)
        with np.errstate(all="ignore"):
            d = _matmul(a, b, c)
        out = np.zeros((lanes.shape[0], 64, nd), U32)
        out[:, dl, dr] = _round_to(d, c_t)
        write_d(W, w, out)
        step(W, w)
    return run


def _matmul(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """c + a @ b over the last two axes, the K products added to C in k order (float64 or int64)."""
    acc = c.copy()
    for kk in range(a.shape[-1]):
        acc = acc + a[..., :, kk, None] * b[..., kk, None, :]
    return acc


# -- WMMA (gfx11) --------------------------------------------------------------------------------------------


def wmma_layout(lanes: int):
    """(row, column) index arrays [lanes, registers] of a WMMA C/D element (module doc)."""
    regs = 8 * 32 // lanes
    lane, r = np.meshgrid(np.arange(lanes), np.arange(regs), indexing="ij")
    return (lanes // 16) * r + lane // 16, lane % 16


def _compile_wmma(instr: Instr, ctx: Context) -> Run:
    f, name = instr.fields, instr.mnemonic
    in_t, out_t = _WMMA[name]
    integer = in_t.startswith("iu")
    neg_lo, neg_hi, opsel, clamp = f["neg"], f["neg_hi"], f["opsel"], f["clamp"]
    if integer:
        if neg_hi or (neg_lo & 4) or opsel:
            raise ctx.unsupported(instr, "WMMA iu8/iu4 with neg_hi, neg_lo[2] or op_sel is not defined")
        a_t = in_t + ("s" if neg_lo & 1 else "")
        b_t = in_t + ("s" if neg_lo & 2 else "")
    else:
        if neg_lo or neg_hi or clamp or (opsel & 3):
            raise ctx.unsupported(instr, "float WMMA with neg/abs modifiers, clamp or op_sel[1:0] is not emulated")
        a_t = b_t = in_t
    half_out = out_t in ("f16", "bf16")
    hi = bool(opsel & 4) if half_out else False
    if opsel & 4 and not half_out:
        raise ctx.unsupported(instr, "op_sel[2] on a 32-bit-result WMMA is not defined")
    n_ab = {"f16": 8, "bf16": 8, "iu8": 4, "iu4": 2}[in_t]
    n_cd = 8 * 32 // ctx.lanes
    read_a = _block_reader(ctx, instr, f["src0"], n_ab, False)
    read_b = _block_reader(ctx, instr, f["src1"], n_ab, False)
    read_c = _block_reader(ctx, instr, f["src2"], n_cd, False)
    write_d = _block_writer(ctx, instr, f["vdst"], n_cd, False)
    rows, cols = wmma_layout(ctx.lanes)
    check, step = _full_exec(instr, ctx), advance(instr.size)
    c_is_const = f["src2"] < fm.VGPR_BASE
    if c_is_const and half_out and f["src2"] != fm.INLINE_INT_ZERO:
        raise ctx.unsupported(instr, "a 16-bit-result WMMA with a non-zero constant C is not emulated")

    def run(W, w):
        lanes = W.exec_lanes(w)
        check(W, w, lanes)
        nw = lanes.shape[0]
        a = _elements(read_a(W, w)[:, :16], a_t)  # [nw, 16 rows, 16 k]
        b = _elements(read_b(W, w)[:, :16], b_t)  # [nw, 16 columns, 16 k]
        c_regs = np.ascontiguousarray(read_c(W, w))
        if half_out:
            bits = c_regs if c_is_const else (c_regs >> U32(16 if hi else 0))  # constants fill both halves
            c = _elements(np.ascontiguousarray(bits & U32(0xFFFF)).astype(U32), out_t)[..., ::2]
        elif out_t == "i32":
            c = c_regs.view(np.int32).astype(np.int64)
        else:
            c = c_regs.view(F32).astype(F64)
        cm = np.zeros((nw, 16, 16), c.dtype)
        cm[:, rows, cols] = c
        with np.errstate(all="ignore"):
            d = _matmul(a, np.swapaxes(b, 1, 2), cm)[:, rows, cols]  # back to [nw, lanes, registers]
        if out_t == "i32" and clamp:
            d = np.clip(d, -2 ** 31, 2 ** 31 - 1)
        res = _round_to(d, out_t)
        if half_out:
            keep = np.ascontiguousarray(c_regs) & U32(0x0000FFFF if hi else 0xFFFF0000)
            res = keep | (res.astype(U32) << U32(16 if hi else 0))
        write_d(W, w, res)
        step(W, w)
    return run
