"""Matrix instructions through the whole chain: LLVM IR kernels calling llvm.amdgcn.mfma.* (gfx942, with
AccVGPRs) and llvm.amdgcn.wmma.* (gfx1100, wave32 and wave64), compiled by LLVM, run on the emulator and
compared with numpy matrix products.

Each kernel is the same shape: every lane loads its A, B and C registers from per-lane arrays, runs one
matrix instruction and stores its D registers. The test places matrix elements in those per-lane arrays
with the lane layouts written here from the ISA documents (CDNA3 "matrix arithmetic", the AMD matrix
instruction calculator's tables; RDNA3 "WMMA"), independently of hcqsim/shader/matrix.py.

Exactness: inputs are small integers (scaled by powers of two for floats), so every product and partial sum
is exact in the result type and any summation order gives the same bits; integer forms compare exactly
with random bytes. One tolerance test per family uses random floats (hcqsim sums in float64 and rounds
once; hardware may round partial sums, so only closeness to the exact product is asserted).
"""
import functools

import numpy as np
import pytest

from hcqsim.compiler import compile_llvm
from hcqsim.errors import DeviceFault
from hcqsim.runtime import open_device

RNG = np.random.default_rng(5)


@functools.lru_cache(maxsize=None)
def _code(ir: str, arch: str, opt: int) -> bytes:
    return compile_llvm(ir, arch, opt)


def _run(dev, ir, args, lanes, opt=2):
    prog = dev.load_program(_code(ir, dev.target, opt), "k")
    done = dev.new_signal(0)
    dev.compute_queue().exec(prog, args, lanes, lanes).signal(done, 1).submit()
    done.wait(1)


def _buf(dev, array: np.ndarray):
    b = dev.alloc(max(array.nbytes, 4))
    b.view[:array.nbytes] = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
    return b


def _kernel(decl: str, call: str, ta: str, tb: str, tc: str, attrs: str = "") -> str:
    """IR: lane l loads A[l] (type ta), B[l], C[l] (tc), computes `call` and stores D[l]."""
    return f"""
declare i32 @llvm.amdgcn.workitem.id.x()
{decl}
define amdgpu_kernel void @k(ptr addrspace(1) %pa, ptr addrspace(1) %pb, ptr addrspace(1) %pc,
                             ptr addrspace(1) %pd) {attrs} {{
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %qa = getelementptr {ta}, ptr addrspace(1) %pa, i32 %tid
  %qb = getelementptr {tb}, ptr addrspace(1) %pb, i32 %tid
  %qc = getelementptr {tc}, ptr addrspace(1) %pc, i32 %tid
  %a = load {ta}, ptr addrspace(1) %qa
  %b = load {tb}, ptr addrspace(1) %qb
  %c = load {tc}, ptr addrspace(1) %qc
  %d = {call}
  %qd = getelementptr {tc}, ptr addrspace(1) %pd, i32 %tid
  store {tc} %d, ptr addrspace(1) %qd
  ret void
}}
"""


# -- MFMA (gfx942) ------------------------------------------------------------------------------------------

# name: (intrinsic, A/B IR type, elements per lane, element kind, C/D IR type, registers of D, M, N, K, blocks)
MFMA = {
    "v_mfma_f32_32x32x8_f16": ("mfma.f32.32x32x8f16", "<4 x half>", "f16", "<16 x float>", 16, 32, 32, 8, 1),
    "v_mfma_f32_16x16x16_f16": ("mfma.f32.16x16x16f16", "<4 x half>", "f16", "<4 x float>", 4, 16, 16, 16, 1),
    "v_mfma_f32_4x4x4_16b_f16": ("mfma.f32.4x4x4f16", "<4 x half>", "f16", "<4 x float>", 4, 4, 4, 4, 16),
    "v_mfma_f32_32x32x4_2b_f16": ("mfma.f32.32x32x4f16", "<4 x half>", "f16", "<32 x float>", 32, 32, 32, 4, 2),
    "v_mfma_f32_16x16x4_4b_f16": ("mfma.f32.16x16x4f16", "<4 x half>", "f16", "<16 x float>", 16, 16, 16, 4, 4),
    "v_mfma_f32_32x32x2_f32": ("mfma.f32.32x32x2f32", "float", "f32", "<16 x float>", 16, 32, 32, 2, 1),
    "v_mfma_f32_16x16x4_f32": ("mfma.f32.16x16x4f32", "float", "f32", "<4 x float>", 4, 16, 16, 4, 1),
    "v_mfma_f32_32x32x1_2b_f32": ("mfma.f32.32x32x1f32", "float", "f32", "<32 x float>", 32, 32, 32, 1, 2),
    "v_mfma_f32_16x16x1_4b_f32": ("mfma.f32.16x16x1f32", "float", "f32", "<16 x float>", 16, 16, 16, 1, 4),
    "v_mfma_f32_4x4x1_16b_f32": ("mfma.f32.4x4x1f32", "float", "f32", "<4 x float>", 4, 4, 4, 1, 16),
    "v_mfma_f32_32x32x8_bf16": ("mfma.f32.32x32x8bf16.1k", "<4 x i16>", "bf16", "<16 x float>", 16, 32, 32, 8, 1),
    "v_mfma_f32_16x16x16_bf16": ("mfma.f32.16x16x16bf16.1k", "<4 x i16>", "bf16", "<4 x float>", 4, 16, 16, 16, 1),
    "v_mfma_f32_32x32x4_2b_bf16": ("mfma.f32.32x32x4bf16.1k", "<4 x i16>", "bf16", "<32 x float>", 32, 32, 32, 4, 2),
    "v_mfma_f32_16x16x4_4b_bf16": ("mfma.f32.16x16x4bf16.1k", "<4 x i16>", "bf16", "<16 x float>", 16, 16, 16, 4, 4),
    "v_mfma_f32_4x4x4_16b_bf16": ("mfma.f32.4x4x4bf16.1k", "<4 x i16>", "bf16", "<4 x float>", 4, 4, 4, 4, 16),
    "v_mfma_i32_32x32x16_i8": ("mfma.i32.32x32x16.i8", "i64", "i8", "<16 x i32>", 16, 32, 32, 16, 1),
    "v_mfma_i32_16x16x32_i8": ("mfma.i32.16x16x32.i8", "i64", "i8", "<4 x i32>", 4, 16, 16, 32, 1),
    "v_mfma_i32_32x32x4_2b_i8": ("mfma.i32.32x32x4i8", "i32", "i8", "<32 x i32>", 32, 32, 32, 4, 2),
    "v_mfma_i32_16x16x4_4b_i8": ("mfma.i32.16x16x4i8", "i32", "i8", "<16 x i32>", 16, 16, 16, 4, 4),
    "v_mfma_i32_4x4x4_16b_i8": ("mfma.i32.4x4x4i8", "i32", "i8", "<4 x i32>", 4, 4, 4, 4, 16),
}


def mfma_ir(name: str, cbsz: int = 0) -> str:
    intr, tab, _, tc, *_ = MFMA[name]
    decl = f"declare {tc} @llvm.amdgcn.{intr}({tab}, {tab}, {tc}, i32, i32, i32)"
    call = f"call {tc} @llvm.amdgcn.{intr}({tab} %a, {tab} %b, {tc} %c, i32 {cbsz}, i32 0, i32 0)"
    return _kernel(decl, call, tab, tab, tc)


def mfma_places(m, n, k, blocks):
    """Where each matrix element lives, per the CDNA3 matrix tables: A[b,i,k] -> (lane, element),
    B[b,k,j] -> (lane, element), D[b,i,j] -> (lane, register)."""
    e = k * m * blocks // 64  # A (and B) elements per lane
    a = {(b, i, kk): (i + m * b + m * blocks * (kk // e), kk % e)
         for b in range(blocks) for i in range(m) for kk in range(k)}
    bm = {(b, kk, j): (j + n * b + n * blocks * (kk // e), kk % e)
          for b in range(blocks) for kk in range(k) for j in range(n)}
    d = {}
    for b in range(blocks):
        for i in range(m):
            for j in range(n):
                if m == 4:  # 4x4 blocks: block b in lanes 4b..4b+3, row i in register i
                    d[b, i, j] = (j + 4 * b, i)
                elif blocks == 1 and m == 32:  # 32x32: rows 8r'+4h+s in lane half h, register 4r'+s
                    d[b, i, j] = (j + 32 * ((i // 4) % 2), 4 * (i // 8) + i % 4)
                elif m == 32:  # 32x32 blocks, 16 registers each
                    d[b, i, j] = (j + 32 * ((i // 4) % 2), 16 * b + 4 * (i // 8) + i % 4)
                else:  # 16x16 (blocks of 4 registers): row 4g+s in lane group g, register s
                    d[b, i, j] = (j + 16 * (i // 4), 4 * b + i % 4)
    return a, bm, d, e


def _to_bits(x: np.ndarray, kind: str) -> np.ndarray:
    if kind == "f16":
        return x.astype(np.float16)
    if kind == "bf16":
        return (x.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)  # exact: few bits
    if kind == "f32":
        return x.astype(np.float32)
    return x.astype(np.int8)


def run_mfma(dev, name, a, b, c, opt=2):
    """D registers of `name` for A [blocks, M, K], B [blocks, K, N], C [blocks, M, N] -> D [blocks, M, N]."""
    _, _, kind, _, nd, m, n, k, blocks = MFMA[name]
    pa, pb, pd, e = mfma_places(m, n, k, blocks)
    la = np.zeros((64, e), _to_bits(np.zeros(1), kind).dtype)
    lb = np.zeros_like(la)
    for (bb, i, kk), (lane, el) in pa.items():
        la[lane, el] = _to_bits(np.array([a[bb, i, kk]]), kind)[0]
    for (bb, kk, j), (lane, el) in pb.items():
        lb[lane, el] = _to_bits(np.array([b[bb, kk, j]]), kind)[0]
    out_t = np.int32 if kind == "i8" else np.float32
    lc = np.zeros((64, nd), out_t)
    for (bb, i, j), (lane, r) in pd.items():
        lc[lane, r] = c[bb, i, j]
    dbuf = dev.alloc(64 * nd * 4)
    _run(dev, mfma_ir(name), [_buf(dev, la), _buf(dev, lb), _buf(dev, lc), dbuf], 64, opt)
    ld = dbuf.view[:64 * nd * 4].view(out_t).reshape(64, nd)
    d = np.zeros((blocks, m, n), out_t)
    for (bb, i, j), (lane, r) in pd.items():
        d[bb, i, j] = ld[lane, r]
    return d


@pytest.fixture(scope="module")
def gfx942():
    d = open_device("sim", target="gfx942")
    yield d
    d.close()


def _exact_inputs(name):
    _, _, kind, _, _, m, n, k, blocks = MFMA[name]
    if kind == "i8":
        return (RNG.integers(-128, 128, (blocks, m, k)), RNG.integers(-128, 128, (blocks, k, n)),
                RNG.integers(-2 ** 31, 2 ** 31, (blocks, m, n)))
    # small integers times powers of two: products and sums are exact in f32 (and in bf16/f16 inputs)
    a = RNG.integers(-15, 16, (blocks, m, k)) * 2.0 ** RNG.integers(-3, 3, (blocks, m, k))
    b = RNG.integers(-15, 16, (blocks, k, n)) * 2.0 ** RNG.integers(-3, 3, (blocks, k, n))
    c = RNG.integers(-1000, 1000, (blocks, m, n)) / 8.0
    return a, b, c


@pytest.mark.parametrize("name", sorted(MFMA))
def test_mfma_matches_numpy_exactly(gfx942, name):
    a, b, c = _exact_inputs(name)
    d = run_mfma(gfx942, name, a, b, c)
    if MFMA[name][2] == "i8":
        expect = ((np.einsum("bik,bkj->bij", a, b) + c) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    else:
        expect = (np.einsum("bik,bkj->bij", a, b) + c).astype(np.float32)
    assert np.array_equal(d, expect)


def test_i8_mfma_accumulator_wraps_modulo_2_32(gfx942):
    name = "v_mfma_i32_16x16x32_i8"
    a = np.full((1, 16, 32), -128)
    b = np.full((1, 32, 16), -128)
    c = np.full((1, 16, 16), 2 ** 31 - 1)
    d = run_mfma(gfx942, name, a, b, c)
    assert (d == np.int32(np.int64(2 ** 31 - 1 + 32 * 16384 - 2 ** 32))).all()


@pytest.mark.parametrize("opt", [0, 3])
def test_mfma_at_o0_spills_through_accvgpr_moves_and_matches(gfx942, opt):
    name = "v_mfma_f32_32x32x8_f16"
    a, b, c = _exact_inputs(name)
    d = run_mfma(gfx942, name, a, b, c, opt=opt)
    assert np.array_equal(d, (np.einsum("bik,bkj->bij", a, b) + c).astype(np.float32))


def test_mfma_f16_random_floats_close_to_the_exact_product(gfx942):
    name = "v_mfma_f32_16x16x16_f16"
    a = RNG.standard_normal((1, 16, 16)).astype(np.float16).astype(np.float64)
    b = RNG.standard_normal((1, 16, 16)).astype(np.float16).astype(np.float64)
    c = RNG.standard_normal((1, 16, 16)).astype(np.float32).astype(np.float64)
    d = run_mfma(gfx942, name, a, b, c)
    exact = np.einsum("bik,bkj->bij", a, b) + c
    assert np.allclose(d, exact, rtol=1e-6, atol=1e-6)


def test_mfma_zero_accumulator_constant_and_agpr_stores(gfx942):
    """C = zeroinitializer becomes the inline constant 0 in src2; LLVM stores D straight from AGPRs."""
    intr, tab, tc = "mfma.f32.32x32x2f32", "float", "<16 x float>"
    decl = f"declare {tc} @llvm.amdgcn.{intr}({tab}, {tab}, {tc}, i32, i32, i32)"
    call = f"call {tc} @llvm.amdgcn.{intr}({tab} %a, {tab} %b, {tc} zeroinitializer, i32 0, i32 0, i32 0)"
    ir = _kernel(decl, call, tab, tab, tc)
    pa, pb, pd, _ = mfma_places(32, 32, 2, 1)
    a, b = RNG.integers(-50, 50, (32, 2)).astype(np.float32), RNG.integers(-50, 50, (2, 32)).astype(np.float32)
    la, lb = np.zeros((64, 1), np.float32), np.zeros((64, 1), np.float32)
    for (_, i, kk), (lane, e) in pa.items():
        la[lane, e] = a[i, kk]
    for (_, kk, j), (lane, e) in pb.items():
        lb[lane, e] = b[kk, j]
    dbuf = gfx942.alloc(64 * 64)
    _run(gfx942, ir, [_buf(gfx942, la), _buf(gfx942, lb), gfx942.alloc(64 * 64), dbuf], 64)
    ld = dbuf.view[:64 * 64].view(np.float32).reshape(64, 16)
    d = np.zeros((32, 32), np.float32)
    for (_, i, j), (lane, r) in pd.items():
        d[i, j] = ld[lane, r]
    assert np.array_equal(d, a @ b)


def _fault(target, ir, args, lanes):
    dev = open_device("sim", target=target)
    try:
        prog = dev.load_program(_code(ir, target, 2), "k")
        dev.compute_queue().exec(prog, args(dev), lanes, lanes).submit()
        with pytest.raises(DeviceFault) as info:
            dev.synchronize()
        return str(info.value)
    finally:
        dev.close()


def test_mfma_block_broadcast_is_a_clean_fault():
    text = _fault("gfx942", mfma_ir("v_mfma_f32_32x32x4_2b_f16", cbsz=1),
                  lambda d: [d.alloc(4096), d.alloc(4096), d.alloc(64 * 128), d.alloc(64 * 128)], 64)
    assert "v_mfma_f32_32x32x4_2b_f16" in text and "cbsz = 1" in text and "not emulated" in text


def test_unimplemented_mfma_form_is_a_clean_fault():
    tc = "<4 x float>"
    decl = f"declare {tc} @llvm.amdgcn.mfma.f32.16x16x32.fp8.fp8(i64, i64, {tc}, i32, i32, i32)"
    call = f"call {tc} @llvm.amdgcn.mfma.f32.16x16x32.fp8.fp8(i64 %a, i64 %b, {tc} %c, i32 0, i32 0, i32 0)"
    text = _fault("gfx942", _kernel(decl, call, "i64", "i64", tc),
                  lambda d: [d.alloc(4096), d.alloc(4096), d.alloc(4096), d.alloc(4096)], 64)
    assert "v_mfma_f32_16x16x32_fp8_fp8" in text and "not implemented" in text


def test_mfma_with_partial_exec_is_a_clean_fault():
    text = _fault("gfx942", mfma_ir("v_mfma_f32_16x16x4_f32"),
                  lambda d: [d.alloc(4096), d.alloc(4096), d.alloc(4096), d.alloc(4096)], 48)
    assert "EXEC not all ones" in text and "v_mfma_f32_16x16x4_f32" in text


# -- WMMA (gfx1100) ----------------------------------------------------------------------------------------

WAVE64 = '"target-features"="+wavefrontsize64"'


def wmma_ir(kind: str, wave: int, flags=(0, 0, 0)) -> str:
    """kind: f32_f16, f32_bf16, f16_f16, bf16_bf16, i32_iu8, i32_iu4; flags: (opsel | a signed, b signed, clamp)."""
    nc = 8 * 32 // wave
    out, inp = kind.split("_")
    tab = {"f16": "<16 x half>", "bf16": "<16 x i16>", "iu8": "<4 x i32>", "iu4": "<2 x i32>"}[inp]
    tc = {"f32": f"<{nc} x float>", "i32": f"<{nc} x i32>", "f16": f"<{2 * nc} x half>",
          "bf16": f"<{2 * nc} x i16>"}[out]
    sfx = {"<16 x half>": "v16f16", "<16 x i16>": "v16i16", "<4 x i32>": "v4i32", "<2 x i32>": "v2i32",
           f"<{nc} x float>": f"v{nc}f32", f"<{nc} x i32>": f"v{nc}i32", f"<{2 * nc} x half>": f"v{2 * nc}f16",
           f"<{2 * nc} x i16>": f"v{2 * nc}i16"}
    intr = f"llvm.amdgcn.wmma.{out}.16x16x16.{inp}.{sfx[tc]}.{sfx[tab]}"
    if inp.startswith("iu"):
        decl = f"declare {tc} @{intr}(i1, {tab}, i1, {tab}, {tc}, i1)"
        call = f"call {tc} @{intr}(i1 {flags[0]}, {tab} %a, i1 {flags[1]}, {tab} %b, {tc} %c, i1 {flags[2]})"
    elif out in ("f16", "bf16"):
        decl = f"declare {tc} @{intr}({tab}, {tab}, {tc}, i1)"
        call = f"call {tc} @{intr}({tab} %a, {tab} %b, {tc} %c, i1 {flags[0]})"
    else:
        decl = f"declare {tc} @{intr}({tab}, {tab}, {tc})"
        call = f"call {tc} @{intr}({tab} %a, {tab} %b, {tc} %c)"
    attrs = "#0" if wave == 64 else ""
    ir = _kernel(decl, call, tab, tab, tc, attrs)
    return ir + (f"attributes #0 = {{ {WAVE64} }}\n" if wave == 64 else "")


def _pack_k(x: np.ndarray, inp: str) -> np.ndarray:
    """[16, 16 k] matrix rows -> the uint32 registers of one lane each (K packed from the low bits)."""
    x = np.ascontiguousarray(x)
    if inp == "f16":
        return x.astype(np.float16).view(np.uint32)
    if inp == "bf16":
        return (x.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16).view(np.uint32)
    if inp == "iu8":
        return (x.astype(np.int64) & 0xFF).astype(np.uint8).view(np.uint32)
    nib = (x.astype(np.int64) & 0xF).astype(np.uint32).reshape(16, 2, 8)
    return (nib << (np.uint32(4) * np.arange(8, dtype=np.uint32))).sum(axis=2, dtype=np.uint32)


def run_wmma(dev, kind, wave, a, b, c, flags=(0, 0, 0), c_other=None):
    """D [16, 16] of WMMA `kind` for A [16 rows, 16 k], B [16 k, 16 columns], C [16, 16]. RDNA3 layout: A row i
    (B column j) in lane i (j), replicated into every 16-lane group; C/D element (row, col) in lane
    16 * (row % (wave / 16)) + col, register row // (wave / 16). 16-bit results: the op_sel half; `c_other`
    fills the other half and the test checks it is kept."""
    out, inp = kind.split("_")
    groups, nc = wave // 16, 8 * 32 // wave
    la = np.tile(_pack_k(a, inp), (groups, 1))
    lb = np.tile(_pack_k(b.T, inp), (groups, 1))
    lane_of = lambda i, j: 16 * (i % groups) + j
    if out in ("f32", "i32"):
        lc = np.zeros((wave, nc), np.float32 if out == "f32" else np.int32)
        for i in range(16):
            for j in range(16):
                lc[lane_of(i, j), i // groups] = c[i, j]
        lc = lc.view(np.uint32)
    else:
        half = lambda x: x.astype(np.float16).view(np.uint16) if out == "f16" else \
            (x.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
        lc16 = np.zeros((wave, nc, 2), np.uint16)
        hi = flags[0]
        for i in range(16):
            for j in range(16):
                lc16[lane_of(i, j), i // groups, hi] = half(np.array([c[i, j]]))[0]
                lc16[lane_of(i, j), i // groups, 1 - hi] = half(np.array([c_other[i, j]]))[0]
        lc = lc16.view(np.uint32).reshape(wave, nc)
    dbuf = dev.alloc(wave * nc * 4)
    _run(dev, wmma_ir(kind, wave, flags), [_buf(dev, la), _buf(dev, lb), _buf(dev, lc), dbuf], wave)
    ld = dbuf.view[:wave * nc * 4].view(np.uint32).reshape(wave, nc)
    d = np.zeros((16, 16), np.uint32)
    other = np.zeros((16, 16), np.uint32)
    for i in range(16):
        for j in range(16):
            word = int(ld[lane_of(i, j), i // groups])
            if out in ("f32", "i32"):
                d[i, j] = word
            else:
                d[i, j], other[i, j] = (word >> 16, word & 0xFFFF) if flags[0] else (word & 0xFFFF, word >> 16)
    return d, other


@pytest.fixture(scope="module")
def gfx1100():
    d = open_device("sim", target="gfx1100")
    yield d
    d.close()


def _wmma_inputs(inp):
    if inp == "iu8":
        return RNG.integers(-128, 128, (16, 16)), RNG.integers(-128, 128, (16, 16))
    if inp == "iu4":
        return RNG.integers(-8, 8, (16, 16)), RNG.integers(-8, 8, (16, 16))
    return (RNG.integers(-15, 16, (16, 16)) * 2.0 ** RNG.integers(-2, 2, (16, 16)),
            RNG.integers(-15, 16, (16, 16)) * 2.0 ** RNG.integers(-2, 2, (16, 16)))


@pytest.mark.parametrize("wave", [32, 64])
@pytest.mark.parametrize("kind", ["f32_f16", "f32_bf16"])
def test_wmma_f32_results_match_numpy_exactly(gfx1100, kind, wave):
    a, b = _wmma_inputs(kind.split("_")[1])
    c = RNG.integers(-1000, 1000, (16, 16)) / 4.0
    d, _ = run_wmma(gfx1100, kind, wave, a, b, c)
    assert np.array_equal(d.view(np.float32), (a @ b + c).astype(np.float32))


@pytest.mark.parametrize("wave", [32, 64])
@pytest.mark.parametrize("opsel", [0, 1])
@pytest.mark.parametrize("kind", ["f16_f16", "bf16_bf16"])
def test_wmma_16bit_results_go_to_the_op_sel_half_and_keep_the_other(gfx1100, kind, opsel, wave):
    # integers with |D| < 256 are exact in bf16 (8 significant bits); halves |D| < 1024 in f16
    scale = 2.0 if kind == "f16_f16" else 1.0
    a, b = RNG.integers(-3, 4, (16, 16)) / scale, RNG.integers(-3, 4, (16, 16)) / scale
    c = RNG.integers(-64, 64, (16, 16)) / scale
    c_other = RNG.integers(-64, 64, (16, 16)).astype(np.float64)
    d, other = run_wmma(gfx1100, kind, wave, a, b, c, (opsel, 0, 0), c_other)
    if kind == "f16_f16":
        expect, keep = (a @ b + c).astype(np.float16).view(np.uint16), c_other.astype(np.float16).view(np.uint16)
    else:
        expect = ((a @ b + c).astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
        keep = (c_other.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    assert np.array_equal(d, expect.astype(np.uint32)) and np.array_equal(other, keep.astype(np.uint32))


@pytest.mark.parametrize("wave", [32, 64])
@pytest.mark.parametrize("signs", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("inp", ["iu8", "iu4"])
def test_wmma_integer_signedness_per_operand(gfx1100, inp, signs, wave):
    bits = 8 if inp == "iu8" else 4
    raw_a, raw_b = RNG.integers(0, 2 ** bits, (16, 16)), RNG.integers(0, 2 ** bits, (16, 16))
    val = lambda x, s: np.where(s & (x >= 2 ** (bits - 1)), x - 2 ** bits, x)
    c = RNG.integers(-2 ** 20, 2 ** 20, (16, 16))
    d, _ = run_wmma(gfx1100, "i32_" + inp, wave, raw_a, raw_b, c, (signs[0], signs[1], 0))
    expect = val(raw_a, signs[0]) @ val(raw_b, signs[1]) + c
    assert np.array_equal(d.view(np.int32), expect.astype(np.int32))


@pytest.mark.parametrize("clamp", [0, 1])
def test_wmma_iu8_clamp_saturates_instead_of_wrapping(gfx1100, clamp):
    a = np.full((16, 16), 127)
    b = np.full((16, 16), 127)
    c = np.full((16, 16), 2 ** 31 - 1000)
    d, _ = run_wmma(gfx1100, "i32_iu8", 32, a, b, c, (1, 1, clamp))
    exact = 2 ** 31 - 1000 + 16 * 127 * 127
    expect = min(exact, 2 ** 31 - 1) if clamp else exact - 2 ** 32
    assert (d.view(np.int32) == expect).all()


def test_wmma_random_floats_close_to_the_exact_product(gfx1100):
    a = RNG.standard_normal((16, 16)).astype(np.float16).astype(np.float64)
    b = RNG.standard_normal((16, 16)).astype(np.float16).astype(np.float64)
    c = RNG.standard_normal((16, 16)).astype(np.float32).astype(np.float64)
    d, _ = run_wmma(gfx1100, "f32_f16", 32, a, b, c)
    assert np.allclose(d.view(np.float32), a @ b + c, rtol=1e-6, atol=1e-6)


def test_wmma_with_partial_exec_is_a_clean_fault():
    text = _fault("gfx1100", wmma_ir("f32_f16", 32),
                  lambda d: [d.alloc(4096), d.alloc(4096), d.alloc(4096), d.alloc(4096)], 24)
    assert "EXEC not all ones" in text and "v_wmma_f32_16x16x16_f16" in text


ACC_MEMORY = """
declare i32 @llvm.amdgcn.workitem.id.x()
declare <4 x float> @llvm.amdgcn.mfma.f32.16x16x4f32(float, float, <4 x float>, i32, i32, i32)
declare void @llvm.amdgcn.raw.buffer.store.v4f32(<4 x float>, <4 x i32>, i32, i32, i32 immarg)
declare void @llvm.amdgcn.s.barrier()
@lds = internal addrspace(3) global [64 x <4 x float>] undef, align 16
define amdgpu_kernel void @k(ptr addrspace(1) %a, <4 x i32> %rsrc) {
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr float, ptr addrspace(1) %a, i32 %tid
  %va = load float, ptr addrspace(1) %pa
  %r = call <4 x float> @llvm.amdgcn.mfma.f32.16x16x4f32(float %va, float %va, <4 x float> zeroinitializer, i32 0, i32 0, i32 0)
  %pl = getelementptr [64 x <4 x float>], ptr addrspace(3) @lds, i32 0, i32 %tid
  store <4 x float> %r, ptr addrspace(3) %pl
  call void @llvm.amdgcn.s.barrier()
  %t2 = xor i32 %tid, 1
  %pl2 = getelementptr [64 x <4 x float>], ptr addrspace(3) @lds, i32 0, i32 %t2
  %x = load <4 x float>, ptr addrspace(3) %pl2
  %r2 = call <4 x float> @llvm.amdgcn.mfma.f32.16x16x4f32(float %va, float %va, <4 x float> %x, i32 0, i32 0, i32 0)
  %off = shl i32 %tid, 4
  call void @llvm.amdgcn.raw.buffer.store.v4f32(<4 x float> %r2, <4 x i32> %rsrc, i32 %off, i32 0, i32 0)
  ret void
}
"""


def test_agpr_data_of_lds_and_buffer_accesses_with_accum_offset_4(gfx942):
    """LLVM keeps D in AGPRs through ds_write_b128 / ds_read_b128 / buffer_store (the acc bit), with
    ACCUM_OFFSET 4; D2 = A B + (D1 of the neighbouring lane)."""
    _, pb, pd, _ = mfma_places(16, 16, 4, 1)
    va = RNG.integers(-20, 20, 64).astype(np.float32)
    am = np.zeros((16, 4)), np.zeros((4, 16))
    a, b = am
    for (_, kk, j), (lane, _) in pb.items():
        b[kk, j] = va[lane]
    a[:] = b.T  # A[i][k] sits in lane i + 16k, as B[k][i]
    d1 = np.zeros((64, 4), np.float32)
    for (_, i, j), (lane, r) in pd.items():
        d1[lane, r] = (a @ b)[i, j]
    c = np.zeros((16, 16))
    for (_, i, j), (lane, r) in pd.items():
        c[i, j] = d1[lane ^ 1, r]
    out = gfx942.alloc(64 * 16)
    rsrc = out.va | (64 * 16) << 64 | 0x27000 << 96
    _run(gfx942, ACC_MEMORY, [_buf(gfx942, va), rsrc], 64)
    ld = out.view[:64 * 16].view(np.float32).reshape(64, 4)
    d2 = np.zeros((16, 16), np.float32)
    for (_, i, j), (lane, r) in pd.items():
        d2[i, j] = ld[lane, r]
    assert np.array_equal(d2, (a @ b + c).astype(np.float32))
