"""The shader core's fast paths (hcqsim.shader.fast) are exact shortcuts: the same kernels run with them on and
forced off (`fast.enabled = False`) end with the same registers of every wave, the same memory and the same faults,
bit for bit. Inputs are random bit patterns mixed with NaNs (quiet, signalling, with payloads), infinities,
denormals and signed zeros; kernels branch apart so EXEC is partial; both targets (wave32 gfx1100, wave64 gfx942).

Fast paths covered: whole-batch instructions run in chunks of waves (core._run_chunked; CHUNK_LANES is made small
so small grids use several chunks, with a remainder), chunked stores that check every address first
(memops._store_run), the instruction fetch that reuses the closure last compiled at a PC when the code bytes are
unchanged (ShaderCore.instruction), and the one-wave forms of scalar loads and VALU writes."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from hcqsim.compiler import compile_llvm
from hcqsim.runtime import open_device
from hcqsim.shader import core, fast, lanemem

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hwtests"))
import kernel_corpus as K  # noqa: E402

TARGETS = ["gfx1100", "gfx942"]
LANES = {"gfx1100": 32, "gfx942": 64}

# floats: c = f(a, b) along two paths (gid % 3), integer bit operations on the raw bits, a min/max pair (NaN order)
MIX = """
declare float @llvm.minnum.f32(float, float)
declare float @llvm.maxnum.f32(float, float)
define amdgpu_kernel void @mix(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %c, ptr addrspace(1) %d,
                               i32 %n) {
entry:""" + K.GID_X + """
  %in = icmp ult i32 %gid, %n
  br i1 %in, label %body, label %done
body:
  %pa = getelementptr float, ptr addrspace(1) %a, i32 %gid
  %pb = getelementptr float, ptr addrspace(1) %b, i32 %gid
  %pc = getelementptr float, ptr addrspace(1) %c, i32 %gid
  %pd = getelementptr i32, ptr addrspace(1) %d, i32 %gid
  %va = load float, ptr addrspace(1) %pa
  %vb = load float, ptr addrspace(1) %pb
  %m = urem i32 %gid, 3
  %two = icmp ne i32 %m, 0
  br i1 %two, label %x, label %y
x:
  %s1 = fadd float %va, %vb
  %s2 = fmul float %s1, %va
  %mn = call float @llvm.minnum.f32(float %s2, float %vb)
  store float %mn, ptr addrspace(1) %pc
  br label %ints
y:
  %q = call float @llvm.fma.f32(float %va, float %vb, float 1.5)
  %mx = call float @llvm.maxnum.f32(float %q, float %va)
  %dv = fdiv float %mx, %vb
  store float %dv, ptr addrspace(1) %pc
  br label %ints
ints:
  %ia = bitcast float %va to i32
  %ib = bitcast float %vb to i32
  %x1 = xor i32 %ia, %ib
  %sh = lshr i32 %x1, 7
  %ml = mul i32 %sh, %ib
  %ad = add i32 %ml, %gid
  store i32 %ad, ptr addrspace(1) %pd
  br label %done
done:
  ret void
}
"""

# a copy of 16 bytes per work item, as ROCr's blit kernels move data (b128 loads and stores)
COPY = """
define amdgpu_kernel void @copy(ptr addrspace(1) %src, ptr addrspace(1) %dst, i32 %n) {
entry:""" + K.GID_X + """
  %in = icmp ult i32 %gid, %n
  br i1 %in, label %body, label %done
body:
  %ps = getelementptr <4 x i32>, ptr addrspace(1) %src, i32 %gid
  %pd = getelementptr <4 x i32>, ptr addrspace(1) %dst, i32 %gid
  %v = load <4 x i32>, ptr addrspace(1) %ps
  store <4 x i32> %v, ptr addrspace(1) %pd
  br label %done
done:
  ret void
}
"""

# one lane (gid == bad) stores far past its buffer: the store faults, and no lane of it may have written
FAULT = """
define amdgpu_kernel void @fault(ptr addrspace(1) %a, i32 %bad) {
entry:""" + K.GID_X + """
  %isbad = icmp eq i32 %gid, %bad
  %far = select i1 %isbad, i32 268435456, i32 0
  %i = add i32 %gid, %far
  %p = getelementptr i32, ptr addrspace(1) %a, i32 %i
  store i32 %gid, ptr addrspace(1) %p
  ret void
}
"""


# two lanes of every 32 swap places: the addresses end where a run would, but are not one (a load and a store)
SWAP = """
define amdgpu_kernel void @swap(ptr addrspace(1) %a, ptr addrspace(1) %c) {
entry:""" + K.GID_X + """
  %m = and i32 %gid, 31
  %is5 = icmp eq i32 %m, 5
  %is6 = icmp eq i32 %m, 6
  %up = zext i1 %is5 to i32
  %down = zext i1 %is6 to i32
  %j0 = add i32 %gid, %up
  %j = sub i32 %j0, %down
  %pa = getelementptr i32, ptr addrspace(1) %a, i32 %j
  %pc = getelementptr i32, ptr addrspace(1) %c, i32 %j
  %v = load i32, ptr addrspace(1) %pa
  %w = add i32 %v, %gid
  store i32 %w, ptr addrspace(1) %pc
  ret void
}
"""

# flat (generic) accesses, per lane into LDS or global memory (a select the compiler cannot resolve), and all-global
FLAT_LDS = """
@tile = internal addrspace(3) global [256 x i32] undef, align 4
define amdgpu_kernel void @flatlds(ptr %g, ptr %out, i32 %k) {
entry:""" + K.GID_X + """
  %p3 = getelementptr [256 x i32], ptr addrspace(3) @tile, i32 0, i32 %tid
  %pl = addrspacecast ptr addrspace(3) %p3 to ptr
  %pg = getelementptr i32, ptr %g, i32 %gid
  %bit = and i32 %gid, %k
  %local = icmp ne i32 %bit, 0
  %p = select i1 %local, ptr %pl, ptr %pg
  store i32 %gid, ptr %p
  call void @llvm.amdgcn.s.barrier()
  %r = sub i32 255, %tid
  %q3 = getelementptr [256 x i32], ptr addrspace(3) @tile, i32 0, i32 %r
  %ql = addrspacecast ptr addrspace(3) %q3 to ptr
  %q = select i1 %local, ptr %ql, ptr %pg
  %v = load i32, ptr %q
  %po = getelementptr i32, ptr %out, i32 %gid
  store i32 %v, ptr %po
  ret void
}
"""

# LDS reads at data-chosen places, 4 dwords on (an instruction offset): with mask 31 all inside the workgroup's
# 256 bytes, with 1023 most past its end (out-of-range LDS reads give 0); lanes off for odd work items
LDS_GATHER = """
@t = internal addrspace(3) global [64 x i32] undef, align 4
define amdgpu_kernel void @ldsgather(ptr addrspace(1) %in, ptr addrspace(1) %out, i32 %mask, i32 %skip) {
entry:""" + K.GID_X + """
  %slot = and i32 %tid, 63
  %pw = getelementptr [64 x i32], ptr addrspace(3) @t, i32 0, i32 %slot
  store i32 %gid, ptr addrspace(3) %pw
  call void @llvm.amdgcn.s.barrier()
  %odd = and i32 %gid, %skip
  %off = icmp ne i32 %odd, 0
  br i1 %off, label %done, label %read
read:
  %pi = getelementptr i32, ptr addrspace(1) %in, i32 %gid
  %v = load i32, ptr addrspace(1) %pi
  %idx = and i32 %v, %mask
  %pr = getelementptr inbounds [64 x i32], ptr addrspace(3) @t, i32 0, i32 %idx
  %pr4 = getelementptr inbounds i32, ptr addrspace(3) %pr, i32 4
  %x = load i32, ptr addrspace(3) %pr4
  %po = getelementptr i32, ptr addrspace(1) %out, i32 %gid
  store i32 %x, ptr addrspace(1) %po
  br label %done
done:
  ret void
}
"""

# constant element offsets the compiler folds into the instructions' offset fields (a load and a store)
OFFSETS = """
define amdgpu_kernel void @offsets(ptr addrspace(1) %in, ptr addrspace(1) %out) {
entry:""" + K.GID_X + """
  %pi = getelementptr inbounds i32, ptr addrspace(1) %in, i32 %gid
  %pi5 = getelementptr inbounds i32, ptr addrspace(1) %pi, i32 5
  %v = load i32, ptr addrspace(1) %pi5
  %po = getelementptr inbounds i32, ptr addrspace(1) %out, i32 %gid
  %po7 = getelementptr inbounds i32, ptr addrspace(1) %po, i32 7
  store i32 %v, ptr addrspace(1) %po7
  ret void
}
"""


def special_floats(n: int, seed: int) -> np.ndarray:
    """uint32 [n]: random bit patterns, a third of them NaNs, infinities, denormals, zeros and normals near 1."""
    r = np.random.default_rng(seed)
    bits = r.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    specials = np.array([0x7FC00000, 0xFFC00001, 0x7F800001, 0x7FA5A5A5, 0x7F800000, 0xFF800000, 0x00000001,
                         0x807FFFFF, 0x00400000, 0x00000000, 0x80000000, 0x3F800000, 0xBF800001, 0x7F7FFFFF],
                        np.uint32)
    pick = r.random(n) < 0.35
    bits[pick] = r.choice(specials, int(pick.sum()))
    near = r.random(n) < 0.25  # ordinary values too, so arithmetic paths see normal results
    bits[near] = r.random(int(near.sum()), np.float32).view(np.uint32) | np.uint32(0x3F800000)
    return bits


class Recorder:
    """The final register state of every batch of waves a dispatch ran (ShaderCore._launch wrapped)."""

    def __init__(self, monkeypatch):
        self.states: list = []
        launch = core.ShaderCore._launch

        def recording(core_self, *args, **kwargs):
            W = launch(core_self, *args, **kwargs)
            self.states.append(W)
            return W
        monkeypatch.setattr(core.ShaderCore, "_launch", recording)

    def snapshot(self) -> list[dict[str, np.ndarray]]:
        return [{"v": W.v.copy(), "s": W.s.copy(), "scc": W.scc.copy(), "pc": W.pc.copy(), "alive": W.alive.copy(),
                 "lds": W.lds.copy(), "mode": W.mode.copy()} for W in self.states]


def run_kernel(monkeypatch, target: str, ir: str, name: str, buffers: list[np.ndarray], scalars: list[int],
               gsize, lsize, on: bool, rounds: int = 1):
    """Run the kernel on a fresh device with the fast paths on or off: (buffers after, register snapshots, faults)."""
    monkeypatch.setattr(fast, "enabled", on)
    rec = Recorder(monkeypatch)
    dev = open_device("sim", target=target)
    try:
        prog = dev.load_program(compile_llvm(ir + K.DECLS, dev.target), name)
        bufs = []
        for data in buffers:
            b = dev.alloc(data.nbytes)
            b.view[:] = data.view(np.uint8)
            bufs.append(b)
        error = None
        for _ in range(rounds):  # a second round runs the instructions compiled in the first
            done = dev.new_signal(0)
            try:
                dev.compute_queue().exec(prog, bufs + scalars, gsize, lsize).signal(done, 1).submit()
                done.wait(1, timeout_ms=20_000)
            except Exception as e:  # a fault: its text is part of what both paths must agree on
                error = f"{type(e).__name__}: {e}"
                break
        gpu = dev.os.system.gpus[dev.index]
        faults = [str(f) for f in gpu.faults]
        out = [np.array(b.view).copy() for b in bufs]
        return out, rec.snapshot(), faults, error
    finally:
        dev.close()
        monkeypatch.setattr(core.ShaderCore, "_launch", core.ShaderCore._launch)


def assert_same(general, fastrun):
    (out_g, regs_g, faults_g, err_g), (out_f, regs_f, faults_f, err_f) = general, fastrun
    assert err_f == err_g
    assert faults_f == faults_g
    assert len(out_f) == len(out_g)
    for i, (g, f) in enumerate(zip(out_g, out_f)):
        assert np.array_equal(g, f), f"buffer {i}: {np.count_nonzero(g != f)} bytes differ"
    assert len(regs_f) == len(regs_g) and regs_g
    for k, (g, f) in enumerate(zip(regs_g, regs_f)):
        for key in g:
            assert np.array_equal(g[key], f[key]), f"batch {k}: {key} differs"


def both(monkeypatch, *args, **kwargs):
    general = run_kernel(monkeypatch, *args, on=False, **kwargs)
    fastrun = run_kernel(monkeypatch, *args, on=True, **kwargs)
    return general, fastrun


@pytest.fixture(params=[64, 192], ids=["chunk64", "chunk192"])
def small_chunks(request, monkeypatch):
    """Chunks of 1-6 waves, so a few hundred work items run in several chunks with a remainder."""
    monkeypatch.setattr(core, "CHUNK_LANES", request.param)
    monkeypatch.setattr(lanemem, "RUN_LANES", 2)  # the one-slice path for runs of addresses, at these sizes too
    return request.param


@pytest.mark.parametrize("target", TARGETS)
def test_mixed_float_and_integer_kernel_with_partial_exec(monkeypatch, small_chunks, target):
    n = 1000  # not a multiple of the group: the last wave is partial too
    a, b = special_floats(1024, 1), special_floats(1024, 2)
    c, d = np.full(1024, 0xDEADBEEF, np.uint32), np.full(1024, 0xCAFEF00D, np.uint32)
    general, fastrun = both(monkeypatch, target, MIX, "mix", [a, b, c, d], [n], 1024, 128, rounds=2)
    assert_same(general, fastrun)
    assert not general[2] and general[3] is None
    assert np.count_nonzero(general[0][2].view(np.uint32) != 0xDEADBEEF) > 900  # the kernel did write


@pytest.mark.parametrize("target", TARGETS)
def test_lds_matmul_with_barriers(monkeypatch, small_chunks, target):
    m = 32
    A, B = special_floats(m * m, 3), special_floats(m * m, 4)
    general, fastrun = both(monkeypatch, target, K.MATMUL, "matmul", [A, B, np.zeros(m * m, np.uint32)], [m],
                            (m, m), (16, 16))
    assert_same(general, fastrun)


@pytest.mark.parametrize("target", TARGETS)
def test_copy_of_16_byte_items(monkeypatch, small_chunks, target):
    n = 700
    src = np.random.default_rng(5).integers(0, 1 << 32, 4 * 768, dtype=np.uint64).astype(np.uint32)
    dst = np.zeros(4 * 768, np.uint32)
    general, fastrun = both(monkeypatch, target, COPY, "copy", [src, dst], [n], 768, 256)
    assert_same(general, fastrun)
    assert np.array_equal(general[0][1].view(np.uint32)[:4 * n], src[:4 * n])


@pytest.mark.parametrize("bad", [3, 600])
@pytest.mark.parametrize("target", TARGETS)
def test_a_faulting_store_writes_no_lane_on_either_path(monkeypatch, small_chunks, target, bad):
    """One lane's address is unmapped: the store faults and no lane of it wrote, whichever chunk holds that lane."""
    a = np.full(1024, 0x5A5A5A5A, np.uint32)
    general, fastrun = both(monkeypatch, target, FAULT, "fault", [a], [bad], 1024, 256)
    assert_same(general, fastrun)
    assert general[3] is not None or general[2]  # it did fault
    assert np.all(general[0][0].view(np.uint32) == 0x5A5A5A5A)


@pytest.mark.parametrize("target", TARGETS)
def test_addresses_that_only_look_like_a_run(monkeypatch, small_chunks, target):
    a = np.random.default_rng(6).integers(0, 1 << 32, 1024, dtype=np.uint64).astype(np.uint32)
    c = np.zeros(1024, np.uint32)
    general, fastrun = both(monkeypatch, target, SWAP, "swap", [a, c], [], 1024, 256)
    assert_same(general, fastrun)
    got, j = general[0][1].view(np.uint32), np.arange(1024)
    j = j + (j % 32 == 5) - (j % 32 == 6)
    assert np.array_equal(got[j], a[j] + np.arange(1024, dtype=np.uint32))


@pytest.mark.parametrize("k", [1, 0], ids=["some-lanes-lds", "all-global"])
@pytest.mark.parametrize("target", TARGETS)
def test_flat_accesses_to_lds_and_global_memory(monkeypatch, small_chunks, target, k):
    g, out = np.full(1024, 7, np.uint32), np.zeros(1024, np.uint32)
    general, fastrun = both(monkeypatch, target, FLAT_LDS, "flatlds", [g, out], [k], 1024, 256)
    assert_same(general, fastrun)
    assert not general[2] and general[3] is None


def _store_constant(k: int) -> list[int]:
    """gfx1100: v_mov_b32 v1, k (literal); v_mov_b32 v2, 0; global_store_b32 v2, v1, s[0:1]; s_endpgm."""
    return [0x7E0202FF, k, 0x7E040280, 0xDC6A0000, 0x00000102, 0xBFB00000]


def _run_rewritten(on: bool) -> list[int]:
    """One wave at the same code address, its literal rewritten in place before each dispatch (and once the same
    bytes again): the value each dispatch stored."""
    from hcqsim import EmulatedGPU, pm4
    from hcqsim.registers import REGS, initiator
    fast.enabled = on
    try:
        with EmulatedGPU(seed=0) as g:
            code, out = g.alloc(4096, executable=True), g.alloc(4096)
            got = []
            for k in (5, 6, 6, 0x7F800001, 5):
                code.u32()[:6] = _store_constant(k)
                g.compute_queue().submit(
                    pm4.acquire_mem("gfx11", gli_inv=1, glv_inv=1, gl1_inv=1, gl2_inv=1)
                    + pm4.set_sh_reg(REGS["COMPUTE_PGM_LO"], [code.va >> 8 & 0xFFFFFFFF, code.va >> 40])
                    + pm4.set_sh_reg(REGS["COMPUTE_PGM_RSRC1"], [0, 2 << 1])
                    + pm4.set_sh_reg(REGS["COMPUTE_USER_DATA_0"], [out.va & 0xFFFFFFFF, out.va >> 32])
                    + pm4.set_sh_reg(REGS["COMPUTE_NUM_THREAD_X"], [32, 1, 1])
                    + pm4.dispatch_direct(1, 1, 1, initiator(compute_shader_en=1, force_start_at_000=1, cs_w32_en=1)))
                got.append(int(out.u32()[0]))
                assert not g.faults
            return got
    finally:
        fast.enabled = True


def test_the_fetch_fast_path_sees_code_rewritten_at_the_same_address():
    """The fetch reuses the closure last run at a PC only while the code bytes there are the same."""
    assert _run_rewritten(False) == _run_rewritten(True) == [5, 6, 6, 0x7F800001, 5]


@pytest.mark.parametrize("target", TARGETS)
def test_one_wave_kernels(monkeypatch, target):
    """One wave (the one-wave fast paths: scalar loads from Python addresses, cached all-lanes EXEC, no carry
    work for null destinations), twice on one device (the second time through the fetch fast path)."""
    lanes = LANES[target]
    a, b = special_floats(lanes, 7), special_floats(lanes, 8)
    c, d = np.full(lanes, 0xDEADBEEF, np.uint32), np.full(lanes, 0xCAFEF00D, np.uint32)
    for n in (lanes, lanes - 3):  # every lane, then a partial EXEC
        general, fastrun = both(monkeypatch, target, MIX, "mix", [a, b, c, d], [n], lanes, lanes, rounds=2)
        assert_same(general, fastrun)
    src = np.random.default_rng(9).integers(0, 1 << 32, 4 * lanes, dtype=np.uint64).astype(np.uint32)
    general, fastrun = both(monkeypatch, target, COPY, "copy", [src, np.zeros_like(src)], [lanes], lanes, lanes,
                            rounds=2)
    assert_same(general, fastrun)
    assert np.array_equal(general[0][1].view(np.uint32), src)


@pytest.mark.parametrize("target", TARGETS)
def test_a_trailing_partial_workgroup(monkeypatch, small_chunks, target):
    """A grid that is no multiple of the group: the last group is partial (its own thread layout and EXEC)."""
    a, b = special_floats(1024, 10), special_floats(1024, 11)
    c, d = np.full(1024, 0xDEADBEEF, np.uint32), np.full(1024, 0xCAFEF00D, np.uint32)
    for gsize, lsize in ((1000, 128), (40, 64)):  # several groups, then one partial group alone
        general, fastrun = both(monkeypatch, target, MIX, "mix", [a, b, c, d], [1024], gsize, lsize)
        assert_same(general, fastrun)
        assert np.all(general[0][3].view(np.uint32)[gsize:] == 0xCAFEF00D)
        assert not np.any(general[0][3].view(np.uint32)[:gsize] == 0xCAFEF00D)


@pytest.mark.parametrize("target", TARGETS)
def test_one_workgroup_per_batch(monkeypatch, target):
    """Batches of one workgroup (BATCH_BYTES tiny): each batch's group ids come from its own position (x, y)."""
    monkeypatch.setattr(core, "BATCH_BYTES", 1)
    m = 48
    A, B = special_floats(m * m, 12), special_floats(m * m, 13)
    general, fastrun = both(monkeypatch, target, K.MATMUL, "matmul", [A, B, np.zeros(m * m, np.uint32)], [m],
                            (m, m), (16, 16))
    assert_same(general, fastrun)
    assert len(general[1]) == 9  # one batch per group


@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_fma_picks_the_same_sums_to_round_again(monkeypatch, dt):
    """fpmath.fma's test for sums it must round through round-to-odd (ties of the narrow format, its denormal
    range), on the bits (fast) and on the values (general): the same mask over boundaries and specials."""
    from hcqsim.shader import fpmath
    tiny = np.float64(2.0 ** -126 if dt == np.float32 else 2.0 ** -14)
    r = np.random.default_rng(14)
    edges = [0.0, -0.0, tiny, -tiny, np.nextafter(tiny, 0), -np.nextafter(tiny, 0), np.nextafter(tiny, 1),
             5e-324, -5e-324, np.inf, -np.inf, np.nan, -np.nan, 1.0, 1.5, 2.0 ** -1022]
    bits = r.integers(0, 1 << 64, 20000, dtype=np.uint64, endpoint=False)
    near = (tiny * r.uniform(-2, 2, 20000)).view(np.uint64)
    ties = (r.integers(0, 1 << 40, 2000, dtype=np.uint64) << np.uint64(29)) | np.uint64(1 << 28)
    s = np.concatenate([np.array(edges), bits.view(np.float64), near.view(np.float64), ties.view(np.float64)])
    with np.errstate(all="ignore"):
        monkeypatch.setattr(fast, "enabled", False)
        general = fpmath._needs_round_to_odd(s, dt)
        monkeypatch.setattr(fast, "enabled", True)
        quick = fpmath._needs_round_to_odd(s, dt)
    assert np.array_equal(general, quick)
    assert general.any() and not general.all()


@pytest.mark.parametrize("mask, skip", [(31, 0), (1023, 0), (31, 1)], ids=["inside", "past-the-end", "lanes-off"])
@pytest.mark.parametrize("target", TARGETS)
def test_lds_reads_at_data_chosen_places(monkeypatch, target, mask, skip):
    idx = np.random.default_rng(15).integers(0, 1 << 32, 512, dtype=np.uint64).astype(np.uint32)
    out = np.full(512, 0x12345678, np.uint32)
    general, fastrun = both(monkeypatch, target, LDS_GATHER, "ldsgather", [idx, out], [mask, skip], 512, 64)
    assert_same(general, fastrun)
    got = general[0][1].view(np.uint32)
    gid = np.arange(512)
    place = (idx & mask) + 4
    want = np.where(place < 64, (gid // 64) * 64 + place, 0).astype(np.uint32)
    read = (gid & skip) == 0
    assert np.array_equal(got[read], want[read]) and np.all(got[~read] == 0x12345678)


@pytest.mark.parametrize("target", TARGETS)
def test_address_offsets_in_the_instructions(monkeypatch, small_chunks, target):
    data = np.random.default_rng(16).integers(0, 1 << 32, 1024 + 8, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(1024 + 8, np.uint32)
    general, fastrun = both(monkeypatch, target, OFFSETS, "offsets", [data, out], [], 1024, 256)
    assert_same(general, fastrun)
    assert np.array_equal(general[0][1].view(np.uint32)[7:7 + 1024], data[5:5 + 1024])
