"""Buffer (MUBUF, V#) loads, stores and atomics: LLVM IR kernels using the llvm.amdgcn.raw/struct.buffer
intrinsics (and their ptr addrspace(8) forms), compiled for gfx1100 and gfx942, run through the runtime on
the emulator and compared bit-exactly with numpy, out-of-range accesses included (hcqsim/shader/buffer.py
states the rules)."""
import functools

import numpy as np
import pytest

from hcqsim.compiler import compile_llvm
from hcqsim.errors import DeviceFault
from hcqsim.runtime import open_device

TARGETS = ("gfx1100", "gfx942")
N = 64  # one workgroup of 64 work-items: two wave32s on gfx1100, one wave64 on gfx942

DECLS = """
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.raw.buffer.load.i32(<4 x i32>, i32, i32, i32 immarg)
declare <4 x i32> @llvm.amdgcn.raw.buffer.load.v4i32(<4 x i32>, i32, i32, i32 immarg)
declare <2 x i32> @llvm.amdgcn.raw.buffer.load.v2i32(<4 x i32>, i32, i32, i32 immarg)
declare i8 @llvm.amdgcn.raw.buffer.load.i8(<4 x i32>, i32, i32, i32 immarg)
declare i16 @llvm.amdgcn.raw.buffer.load.i16(<4 x i32>, i32, i32, i32 immarg)
declare float @llvm.amdgcn.raw.buffer.load.format.f32(<4 x i32>, i32, i32, i32 immarg)
declare i32 @llvm.amdgcn.raw.tbuffer.load.i32(<4 x i32>, i32, i32, i32 immarg, i32 immarg)
declare void @llvm.amdgcn.raw.buffer.store.i32(i32, <4 x i32>, i32, i32, i32 immarg)
declare void @llvm.amdgcn.raw.buffer.store.v4i32(<4 x i32>, <4 x i32>, i32, i32, i32 immarg)
declare void @llvm.amdgcn.raw.buffer.store.i8(i8, <4 x i32>, i32, i32, i32 immarg)
declare void @llvm.amdgcn.raw.buffer.store.i16(i16, <4 x i32>, i32, i32, i32 immarg)
declare i32 @llvm.amdgcn.struct.buffer.load.i32(<4 x i32>, i32, i32, i32, i32 immarg)
declare void @llvm.amdgcn.struct.buffer.store.i32(i32, <4 x i32>, i32, i32, i32, i32 immarg)
declare i32 @llvm.amdgcn.raw.buffer.atomic.add.i32(i32, <4 x i32>, i32, i32, i32 immarg)
declare i32 @llvm.amdgcn.raw.buffer.atomic.umax.i32(i32, <4 x i32>, i32, i32, i32 immarg)
declare i32 @llvm.amdgcn.raw.buffer.atomic.cmpswap.i32(i32, i32, <4 x i32>, i32, i32, i32 immarg)
declare i64 @llvm.amdgcn.raw.buffer.atomic.add.i64(i64, <4 x i32>, i32, i32, i32 immarg)
declare i32 @llvm.amdgcn.struct.buffer.atomic.add.i32(i32, <4 x i32>, i32, i32, i32, i32 immarg)
declare ptr addrspace(8) @llvm.amdgcn.make.buffer.rsrc.p8.p1(ptr addrspace(1), i16, i64, i32)
declare i32 @llvm.amdgcn.raw.ptr.buffer.load.i32(ptr addrspace(8), i32, i32, i32 immarg)
declare void @llvm.amdgcn.raw.ptr.buffer.store.i32(i32, ptr addrspace(8), i32, i32, i32 immarg)
declare i32 @llvm.amdgcn.struct.ptr.buffer.load.i32(ptr addrspace(8), i32, i32, i32, i32 immarg)
declare i32 @llvm.amdgcn.raw.ptr.buffer.atomic.add.i32(i32, ptr addrspace(8), i32, i32, i32 immarg)
"""

# the V# dword 3 a raw buffer needs: gfx1100 OOB_SELECT = 3 (raw: offset checked against NUM_RECORDS bytes)
# with a 32-bit format; gfx942 NUM_FORMAT float / DATA_FORMAT 32 (LLVM's usual CDNA flags)
RAW_FLAGS = {"gfx1100": 3 << 28 | 0x16 << 12, "gfx942": 0x27000}
STRUCT_FLAGS = {"gfx1100": 1 << 28 | 0x16 << 12, "gfx942": 0x27000}  # gfx1100 OOB_SELECT 1: index check
ADD_TID = 1 << 23


def vsharp(base: int, num_records: int, flags: int, stride: int = 0, swizzle: int = 0) -> int:
    """A V# as the 128-bit integer a <4 x i32> kernel argument takes."""
    w1 = (base >> 32) & 0xFFFF | (stride & 0x3FFF) << 16 | swizzle << 30
    return (base & 0xFFFFFFFF) | w1 << 32 | (num_records & 0xFFFFFFFF) << 64 | (flags & 0xFFFFFFFF) << 96


@pytest.fixture(scope="module", params=TARGETS)
def dev(request):
    d = open_device("sim", target=request.param)
    yield d
    d.close()


@functools.lru_cache(maxsize=None)
def _code(ir: str, arch: str, opt: int) -> bytes:
    return compile_llvm(DECLS + ir, arch, opt)


def launch(dev, ir: str, name: str, args, n: int = N, local: int = N, opt: int = 2) -> None:
    prog = dev.load_program(_code(ir, dev.target, opt), name)
    done = dev.new_signal(0)
    dev.compute_queue().exec(prog, args, n, local).signal(done, 1).submit()
    done.wait(1)


def buf(dev, array: np.ndarray):
    b = dev.alloc(max(array.nbytes, 4))
    b.view[:array.nbytes] = array.view(np.uint8).reshape(-1)
    return b


def got(b, dtype, n):
    return b.view[:np.dtype(dtype).itemsize * n].view(dtype).copy()


@pytest.fixture
def fresh(dev):
    """A device of the same target for a kernel that faults (a fault stops its queue for good)."""
    d = open_device("sim", target=dev.target)
    yield d
    d.close()


def run_fault(dev, ir: str, name: str, args) -> str:
    prog = dev.load_program(_code(ir, dev.target, 2), name)
    dev.compute_queue().exec(prog, args, N, N).submit()
    with pytest.raises(DeviceFault) as info:
        dev.synchronize()
    return str(info.value)


RNG = np.random.default_rng(11)

# out[tid] = load(rsrc, tid * 4 + soff (SGPR) + 8 (immediate)) * 3; then store(rsrc, tid * 4) = that
RAW_COPY = """
define amdgpu_kernel void @raw_copy(ptr addrspace(1) %out, <4 x i32> %rsrc, <4 x i32> %dst, i32 %so) {
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %off = shl i32 %tid, 2
  %o8 = add i32 %off, 8
  %v = call i32 @llvm.amdgcn.raw.buffer.load.i32(<4 x i32> %rsrc, i32 %o8, i32 %so, i32 0)
  %m = mul i32 %v, 3
  call void @llvm.amdgcn.raw.buffer.store.i32(i32 %m, <4 x i32> %dst, i32 %off, i32 0, i32 0)
  %q = getelementptr i32, ptr addrspace(1) %out, i32 %tid
  store i32 %v, ptr addrspace(1) %q
  ret void
}
"""


def test_raw_load_adds_vgpr_immediate_and_sgpr_offsets(dev):
    src = RNG.integers(0, 2 ** 32, N + 16, dtype=np.uint64).astype(np.uint32)
    bsrc, out, dst = buf(dev, src), dev.alloc(4 * N), dev.alloc(4 * N)
    so = 12
    launch(dev, RAW_COPY, "raw_copy", [out, vsharp(bsrc.va, 4 * (N + 16), RAW_FLAGS[dev.target]),
                                       vsharp(dst.va, 4 * N, RAW_FLAGS[dev.target]), so])
    expect = src[np.arange(N) + 2 + so // 4]
    assert np.array_equal(got(out, np.uint32, N), expect)
    assert np.array_equal(got(dst, np.uint32, N), expect * np.uint32(3))


def test_raw_load_past_num_records_reads_zero_and_store_is_dropped(dev):
    src = RNG.integers(1, 2 ** 31, N + 2, dtype=np.int64).astype(np.uint32)
    bsrc, out = buf(dev, src), dev.alloc(4 * N)
    dst = buf(dev, np.full(N, 0xDEADBEEF, np.uint32))
    valid = 40  # bytes [0, 4 * valid + 8) are in range for the load (it reads at tid * 4 + 8)
    launch(dev, RAW_COPY, "raw_copy", [out, vsharp(bsrc.va, 4 * valid + 8, RAW_FLAGS[dev.target]),
                                       vsharp(dst.va, 4 * 20, RAW_FLAGS[dev.target]), 0])
    expect = np.where(np.arange(N) < valid, src[np.arange(N) + 2], 0).astype(np.uint32)
    assert np.array_equal(got(out, np.uint32, N), expect)
    stored = got(dst, np.uint32, N)
    assert np.array_equal(stored[:20], expect[:20] * np.uint32(3))
    assert (stored[20:] == 0xDEADBEEF).all()  # stores past NUM_RECORDS (80 bytes) never landed


def test_zero_num_records_touches_no_memory_even_at_a_null_base(dev):
    out = dev.alloc(4 * N)
    out.view[:] = 0xAB
    # base 0 is unmapped: an access would be a VM fault; out of range, nothing is accessed
    launch(dev, RAW_COPY, "raw_copy", [out, vsharp(0, 0, RAW_FLAGS[dev.target]),
                                       vsharp(0, 0, RAW_FLAGS[dev.target]), 0])
    assert not got(out, np.uint32, N).any()


VEC4 = """
define amdgpu_kernel void @vec4(ptr addrspace(1) %out, <4 x i32> %rsrc) {
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %off = shl i32 %tid, 4
  %v = call <4 x i32> @llvm.amdgcn.raw.buffer.load.v4i32(<4 x i32> %rsrc, i32 %off, i32 0, i32 0)
  %q = getelementptr <4 x i32>, ptr addrspace(1) %out, i32 %tid
  store <4 x i32> %v, ptr addrspace(1) %q
  ret void
}
"""


def test_multi_dword_load_is_range_checked_per_dword(dev):
    src = RNG.integers(1, 2 ** 31, 4 * N, dtype=np.int64).astype(np.uint32)
    bsrc, out = buf(dev, src), dev.alloc(16 * N)
    num = 16 * 10 + 8  # lane 10 gets its first two dwords only
    launch(dev, VEC4, "vec4", [out, vsharp(bsrc.va, num, RAW_FLAGS[dev.target])])
    expect = np.where(np.arange(4 * N) * 4 + 4 <= num, src, 0).astype(np.uint32)
    assert np.array_equal(got(out, np.uint32, 4 * N), expect)


VEC4_STORE = """
define amdgpu_kernel void @vec4_store(ptr addrspace(1) %in, <4 x i32> %rsrc) {
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %p = getelementptr <4 x i32>, ptr addrspace(1) %in, i32 %tid
  %v = load <4 x i32>, ptr addrspace(1) %p
  %off = shl i32 %tid, 4
  call void @llvm.amdgcn.raw.buffer.store.v4i32(<4 x i32> %v, <4 x i32> %rsrc, i32 %off, i32 0, i32 0)
  ret void
}
"""


def test_multi_dword_store_drops_only_the_out_of_range_dwords(dev):
    src = RNG.integers(0, 2 ** 31, 4 * N, dtype=np.int64).astype(np.uint32)
    dst = buf(dev, np.full(4 * N, 7, np.uint32))
    num = 16 * 5 + 12
    launch(dev, VEC4_STORE, "vec4_store", [buf(dev, src), vsharp(dst.va, num, RAW_FLAGS[dev.target])])
    expect = np.where(np.arange(4 * N) * 4 + 4 <= num, src, 7).astype(np.uint32)
    assert np.array_equal(got(dst, np.uint32, 4 * N), expect)


SMALL = """
define amdgpu_kernel void @small(ptr addrspace(1) %out, <4 x i32> %rsrc, <4 x i32> %dst) {
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %o2 = shl i32 %tid, 1
  %b = call i8 @llvm.amdgcn.raw.buffer.load.i8(<4 x i32> %rsrc, i32 %tid, i32 0, i32 0)
  %h = call i16 @llvm.amdgcn.raw.buffer.load.i16(<4 x i32> %rsrc, i32 %o2, i32 0, i32 0)
  %bs = sext i8 %b to i32
  %hz = zext i16 %h to i32
  %q = getelementptr [2 x i32], ptr addrspace(1) %out, i32 %tid, i32 0
  store i32 %bs, ptr addrspace(1) %q
  %q1 = getelementptr [2 x i32], ptr addrspace(1) %out, i32 %tid, i32 1
  store i32 %hz, ptr addrspace(1) %q1
  %b1 = add i8 %b, 1
  call void @llvm.amdgcn.raw.buffer.store.i8(i8 %b1, <4 x i32> %dst, i32 %tid, i32 0, i32 0)
  %h1 = xor i16 %h, -1
  %o2b = add i32 %o2, 64
  call void @llvm.amdgcn.raw.buffer.store.i16(i16 %h1, <4 x i32> %dst, i32 %o2b, i32 0, i32 0)
  ret void
}
"""


def test_byte_and_short_loads_extend_and_stores_write_only_their_bytes(dev):
    src = RNG.integers(0, 256, 2 * N, dtype=np.int64).astype(np.uint8)
    dst = buf(dev, np.full(256, 0x55, np.uint8))
    out = dev.alloc(8 * N)
    num = 50  # bytes: the byte load of lane 50 and the short load of lane 25 are the first out of range
    launch(dev, SMALL, "small", [out, vsharp(buf(dev, src).va, num, RAW_FLAGS[dev.target]),
                                 vsharp(dst.va, 64 + 2 * 20, RAW_FLAGS[dev.target])])
    lane = np.arange(N)
    b = np.where(lane < num, src[:N].view(np.int8), 0).astype(np.int32)
    h = np.where(2 * lane + 2 <= num, src.view(np.uint16)[:N], 0).astype(np.int32)
    res = got(out, np.int32, 2 * N).reshape(N, 2)
    assert np.array_equal(res[:, 0], b) and np.array_equal(res[:, 1], h)
    stored = got(dst, np.uint8, 256)
    assert np.array_equal(stored[:N], (b + 1).astype(np.uint8))  # all 64 bytes are in range
    halves = stored[64:192].view(np.uint16)
    assert np.array_equal(halves[:20], (~h[:20]).astype(np.uint16))
    assert (stored[64 + 40:] == 0x55).all()


STRUCT = """
define amdgpu_kernel void @structured(ptr addrspace(1) %out, <4 x i32> %rsrc) {
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %v = call i32 @llvm.amdgcn.struct.buffer.load.i32(<4 x i32> %rsrc, i32 %tid, i32 4, i32 0, i32 0)
  call void @llvm.amdgcn.struct.buffer.store.i32(i32 %tid, <4 x i32> %rsrc, i32 %tid, i32 8, i32 0, i32 0)
  %q = getelementptr i32, ptr addrspace(1) %out, i32 %tid
  store i32 %v, ptr addrspace(1) %q
  ret void
}
"""


def test_structured_access_indexes_by_stride_and_checks_the_index(dev):
    records, stride = 40, 12
    src = RNG.integers(0, 2 ** 31, 3 * N, dtype=np.int64).astype(np.uint32)
    bsrc, out = buf(dev, src), dev.alloc(4 * N)
    launch(dev, STRUCT, "structured", [out, vsharp(bsrc.va, records, STRUCT_FLAGS[dev.target], stride)])
    rows = src.reshape(N, 3)
    lane = np.arange(N)
    assert np.array_equal(got(out, np.uint32, N), np.where(lane < records, rows[:, 1], 0).astype(np.uint32))
    after = got(bsrc, np.uint32, 3 * N).reshape(N, 3)
    assert np.array_equal(after[:, 2], np.where(lane < records, lane, rows[:, 2]).astype(np.uint32))
    assert np.array_equal(after[:, :2], rows[:, :2])


def test_num_records_counts_bytes_on_gfx11_raw_mode_but_strides_on_gfx942(dev):
    """The same structured V# (stride 12, NUM_RECORDS 200): gfx942 indexes 200 records (all 64 lanes in
    range); gfx1100 with OOB_SELECT = 3 (raw) compares index * stride + offset with 200 bytes."""
    stride, num = 12, 200
    src = RNG.integers(0, 2 ** 31, 3 * N, dtype=np.int64).astype(np.uint32)
    bsrc, out = buf(dev, src), dev.alloc(4 * N)
    launch(dev, STRUCT, "structured", [out, vsharp(bsrc.va, num, RAW_FLAGS[dev.target], stride)])
    lane = np.arange(N)
    ok = lane < num if dev.target == "gfx942" else lane * stride + 4 + 4 <= num
    assert np.array_equal(got(out, np.uint32, N), np.where(ok, src.reshape(N, 3)[:, 1], 0).astype(np.uint32))


def test_gfx11_oob_select_zero_also_checks_the_offset_against_the_stride():
    dev = open_device("sim", target="gfx1100")
    try:
        stride = 8  # the load at offset 4 fits in the record; the store at offset 8 does not
        src = RNG.integers(0, 2 ** 31, 2 * N, dtype=np.int64).astype(np.uint32)
        bsrc, out = buf(dev, src), dev.alloc(4 * N)
        launch(dev, STRUCT, "structured", [out, vsharp(bsrc.va, 30, 0x16 << 12, stride)])
        rows = src.reshape(N, 2)
        assert np.array_equal(got(out, np.uint32, N), np.where(np.arange(N) < 30, rows[:, 1], 0).astype(np.uint32))
        assert np.array_equal(got(bsrc, np.uint32, 2 * N), src)  # every store was out of its record
    finally:
        dev.close()


ADDTID = """
define amdgpu_kernel void @addtid(ptr addrspace(1) %out, <4 x i32> %rsrc) {
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %v = call i32 @llvm.amdgcn.raw.buffer.load.i32(<4 x i32> %rsrc, i32 0, i32 0, i32 0)
  %q = getelementptr i32, ptr addrspace(1) %out, i32 %tid
  store i32 %v, ptr addrspace(1) %q
  ret void
}
"""


def test_add_tid_indexes_by_lane_within_the_wave(dev):
    src = RNG.integers(0, 2 ** 31, N, dtype=np.int64).astype(np.uint32)
    bsrc, out = buf(dev, src), dev.alloc(4 * N)
    flags = (STRUCT_FLAGS if dev.target == "gfx1100" else RAW_FLAGS)[dev.target] | ADD_TID
    launch(dev, ADDTID, "addtid", [out, vsharp(bsrc.va, N, flags, 4)])
    wave = 32 if dev.target == "gfx1100" else 64
    assert np.array_equal(got(out, np.uint32, N), src[np.arange(N) % wave])


ATOMICS = """
define amdgpu_kernel void @atomics(ptr addrspace(1) %out, <4 x i32> %rsrc) {
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %slot = and i32 %tid, 3
  %off = shl i32 %slot, 2
  %old = call i32 @llvm.amdgcn.raw.buffer.atomic.add.i32(i32 %tid, <4 x i32> %rsrc, i32 %off, i32 0, i32 0)
  %o16 = add i32 %off, 16
  %mx = call i32 @llvm.amdgcn.raw.buffer.atomic.umax.i32(i32 %tid, <4 x i32> %rsrc, i32 %o16, i32 0, i32 0)
  %o32 = shl i32 %tid, 2
  %o32b = add i32 %o32, 32
  %cs = call i32 @llvm.amdgcn.raw.buffer.atomic.cmpswap.i32(i32 %tid, i32 5, <4 x i32> %rsrc, i32 %o32b, i32 0, i32 0)
  %q = getelementptr [3 x i32], ptr addrspace(1) %out, i32 %tid, i32 0
  store i32 %old, ptr addrspace(1) %q
  %q1 = getelementptr [3 x i32], ptr addrspace(1) %out, i32 %tid, i32 1
  store i32 %mx, ptr addrspace(1) %q1
  %q2 = getelementptr [3 x i32], ptr addrspace(1) %out, i32 %tid, i32 2
  store i32 %cs, ptr addrspace(1) %q2
  ret void
}
"""


def test_atomics_return_pre_op_values_in_lane_order(dev):
    mem = np.zeros(8 + N, np.uint32)
    mem[8:] = np.where(np.arange(N) % 2 == 0, 5, 9)  # cmpswap(5 -> tid) succeeds on even lanes
    bmem, out = buf(dev, mem), dev.alloc(12 * N)
    launch(dev, ATOMICS, "atomics", [out, vsharp(bmem.va, 4 * len(mem), RAW_FLAGS[dev.target])])
    lane = np.arange(N, dtype=np.uint32)
    res = got(out, np.uint32, 3 * N).reshape(N, 3)
    # lanes hitting the same slot apply in lane order: lane l sees the sum of the earlier lanes of its slot
    expect_old = np.array([sum(k for k in range(l) if k % 4 == l % 4) for l in range(N)], np.uint32)
    expect_max = np.array([max([0] + [k for k in range(l) if k % 4 == l % 4]) for l in range(N)], np.uint32)
    assert np.array_equal(res[:, 0], expect_old) and np.array_equal(res[:, 1], expect_max)
    assert np.array_equal(res[:, 2], mem[8:])
    after = got(bmem, np.uint32, 8 + N)
    assert np.array_equal(after[:4], [sum(range(s, N, 4)) for s in range(4)])
    assert np.array_equal(after[4:8], [max(range(s, N, 4)) for s in range(4)])
    assert np.array_equal(after[8:], np.where(lane % 2 == 0, lane, 9))


def test_out_of_range_atomic_is_dropped_and_returns_zero(dev):
    mem = np.full(8 + N, 100, np.uint32)
    bmem, out = buf(dev, mem), dev.alloc(12 * N)
    num = 4 * (8 + 10)  # cmpswap slots of lanes >= 10 are out of range (umax/add slots are in)
    launch(dev, ATOMICS, "atomics", [out, vsharp(bmem.va, num, RAW_FLAGS[dev.target])])
    res = got(out, np.uint32, 3 * N).reshape(N, 3)
    assert (res[:10, 2] == 100).all() and (res[10:, 2] == 0).all()
    assert (got(bmem, np.uint32, 8 + N)[8:] == 100).all()  # 100 != 5: no swap anywhere


ATOMIC64 = """
define amdgpu_kernel void @atomic64(ptr addrspace(1) %out, <4 x i32> %rsrc) {
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %t = zext i32 %tid to i64
  %big = shl i64 %t, 33
  %old = call i64 @llvm.amdgcn.raw.buffer.atomic.add.i64(i64 %big, <4 x i32> %rsrc, i32 0, i32 0, i32 0)
  %q = getelementptr i64, ptr addrspace(1) %out, i32 %tid
  store i64 %old, ptr addrspace(1) %q
  ret void
}
"""


def test_64bit_atomic_add_carries_into_the_high_dword(dev):
    mem = np.array([2 ** 32 - 1], np.uint64)
    bmem, out = buf(dev, mem), dev.alloc(8 * N)
    launch(dev, ATOMIC64, "atomic64", [out, vsharp(bmem.va, 8, RAW_FLAGS[dev.target])])
    adds = np.arange(N, dtype=np.uint64) << np.uint64(33)
    expect = np.uint64(2 ** 32 - 1) + np.concatenate([[0], np.cumsum(adds)[:-1]]).astype(np.uint64)
    assert np.array_equal(got(out, np.uint64, N), expect)
    assert got(bmem, np.uint64, 1)[0] == np.uint64(2 ** 32 - 1) + adds.sum()


PTR8 = """
define amdgpu_kernel void @ptr8(ptr addrspace(1) %in, ptr addrspace(1) %out, i64 %n, i32 %flags, i16 %stride) {
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %rin = call ptr addrspace(8) @llvm.amdgcn.make.buffer.rsrc.p8.p1(ptr addrspace(1) %in, i16 0, i64 %n, i32 %flags)
  %rout = call ptr addrspace(8) @llvm.amdgcn.make.buffer.rsrc.p8.p1(ptr addrspace(1) %out, i16 0, i64 %n, i32 %flags)
  %rs = call ptr addrspace(8) @llvm.amdgcn.make.buffer.rsrc.p8.p1(ptr addrspace(1) %in, i16 %stride, i64 16, i32 %flags)
  %off = shl i32 %tid, 2
  %v = call i32 @llvm.amdgcn.raw.ptr.buffer.load.i32(ptr addrspace(8) %rin, i32 %off, i32 0, i32 0)
  %s = call i32 @llvm.amdgcn.struct.ptr.buffer.load.i32(ptr addrspace(8) %rs, i32 %tid, i32 0, i32 0, i32 0)
  %x = add i32 %v, %s
  %a = call i32 @llvm.amdgcn.raw.ptr.buffer.atomic.add.i32(i32 1, ptr addrspace(8) %rout, i32 256, i32 0, i32 0)
  %y = add i32 %x, %a
  call void @llvm.amdgcn.raw.ptr.buffer.store.i32(i32 %y, ptr addrspace(8) %rout, i32 %off, i32 0, i32 0)
  ret void
}
"""


def test_ptr_addrspace8_forms_from_make_buffer_rsrc(dev):
    src = RNG.integers(0, 2 ** 20, N, dtype=np.int64).astype(np.uint32)
    bsrc, out = buf(dev, src), dev.alloc(4 * N + 4)
    out.view[:] = 0
    flags = RAW_FLAGS[dev.target]
    launch(dev, PTR8, "ptr8", [bsrc, out, 4 * N + 4, flags, 8])
    lane = np.arange(N)
    # the strided descriptor: 16 bytes of raw range on gfx1100 (index * 8 + 4 <= 16), 16 records on gfx942
    ok = lane < 16 if dev.target == "gfx942" else lane * 8 + 4 <= 16
    strided = np.where(ok, src[np.minimum(2 * lane, N - 1)], 0)
    res = got(out, np.uint32, N + 1)
    assert np.array_equal(res[:N], (src + strided + lane).astype(np.uint32))  # the counter's pre-op values
    assert res[N] == N


FORMAT = """
define amdgpu_kernel void @fmt(ptr addrspace(1) %out, <4 x i32> %rsrc) {
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %off = shl i32 %tid, 2
  %v = call float @llvm.amdgcn.raw.buffer.load.format.f32(<4 x i32> %rsrc, i32 %off, i32 0, i32 0)
  %q = getelementptr float, ptr addrspace(1) %out, i32 %tid
  store float %v, ptr addrspace(1) %q
  ret void
}
"""


def test_typed_format_load_is_a_clean_fault_naming_it(fresh):
    out = fresh.alloc(4 * N)
    text = run_fault(fresh, FORMAT, "fmt", [out, vsharp(out.va, 4 * N, RAW_FLAGS[fresh.target])])
    assert "buffer_load_format_x" in text and "not emulated" in text and "PC +0x" in text


TBUFFER = """
define amdgpu_kernel void @tbuf(ptr addrspace(1) %out, <4 x i32> %rsrc) {
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %off = shl i32 %tid, 2
  %v = call i32 @llvm.amdgcn.raw.tbuffer.load.i32(<4 x i32> %rsrc, i32 %off, i32 0, i32 22, i32 0)
  %q = getelementptr i32, ptr addrspace(1) %out, i32 %tid
  store i32 %v, ptr addrspace(1) %q
  ret void
}
"""


def test_typed_mtbuf_load_is_a_clean_fault_on_gfx11(fresh):
    if fresh.target != "gfx1100":
        pytest.skip("LLVM emits MTBUF (tbuffer_*) for gfx11 only here")
    out = fresh.alloc(4 * N)
    text = run_fault(fresh, TBUFFER, "tbuf", [out, vsharp(out.va, 4 * N, RAW_FLAGS[fresh.target])])
    assert "MTBUF instruction" in text and "PC +0x" in text and "kernel at 0x" in text


def test_swizzled_descriptor_is_a_clean_fault(fresh):
    out = fresh.alloc(4 * (N + 16))
    text = run_fault(fresh, RAW_COPY, "raw_copy", [out, vsharp(out.va, 4 * N, RAW_FLAGS[fresh.target], 4, swizzle=2),
                                                 vsharp(out.va, 4 * N, RAW_FLAGS[fresh.target]), 0])
    assert "swizzled buffer descriptors" in text and "buffer_load_" in text


def test_in_range_access_to_unmapped_memory_is_a_vm_fault(fresh):
    out = fresh.alloc(4 * N)
    text = run_fault(fresh, RAW_COPY, "raw_copy", [out, vsharp(0x10000, 4 * (N + 16), RAW_FLAGS[fresh.target]),
                                                 vsharp(out.va, 4 * N, RAW_FLAGS[fresh.target]), 0])
    assert "read of 4 bytes at 0x10008" in text and "kernel at 0x" in text


@pytest.mark.parametrize("opt", [0, 3])
def test_raw_copy_at_other_optimisation_levels(dev, opt):
    src = RNG.integers(0, 2 ** 32, N + 16, dtype=np.uint64).astype(np.uint32)
    bsrc, out, dst = buf(dev, src), dev.alloc(4 * N), dev.alloc(4 * N)
    launch(dev, RAW_COPY, "raw_copy", [out, vsharp(bsrc.va, 4 * (N + 16), RAW_FLAGS[dev.target]),
                                       vsharp(dst.va, 4 * N, RAW_FLAGS[dev.target]), 4], opt=opt)
    expect = src[np.arange(N) + 3]
    assert np.array_equal(got(out, np.uint32, N), expect)
    assert np.array_equal(got(dst, np.uint32, N), expect * np.uint32(3))
