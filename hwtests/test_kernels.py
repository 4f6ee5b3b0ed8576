"""Real kernels through the whole path: LLVM IR -> code object -> load_program -> PM4 dispatch -> results,
compared with numpy. On --device=sim the shader core executes the machine code."""
import functools
import re

import numpy as np
import pytest

import kernel_corpus as K
from hcqsim.compiler import compile_llvm
from hcqsim.errors import DeviceFault


@functools.lru_cache(maxsize=None)
def _code_object(ir: str, arch: str) -> bytes:
    return compile_llvm(ir + K.DECLS, arch)


def run(device, ir, name, args, global_size, local_size):
    program = device.load_program(_code_object(ir, device.target), name)
    done = device.new_signal(0)
    device.compute_queue().exec(program, args, global_size, local_size).signal(done, 1).submit()
    done.wait(1)


def buffer_of(device, array: np.ndarray):
    buf = device.alloc(max(array.nbytes, 4))
    buf.view[:array.nbytes] = array.view(np.uint8).reshape(-1)
    return buf


def array_of(buf, dtype, n):
    return buf.view[:np.dtype(dtype).itemsize * n].view(dtype)


RNG = np.random.default_rng(7)
SHADER_CORE_TARGETS = ("gfx1100", "gfx942")  # what the emulator's shader core executes


@pytest.fixture(autouse=True)
def _runs_kernels(request):
    if "device" in request.fixturenames:
        device = request.getfixturevalue("device")
        if device.os.emulated and device.target not in SHADER_CORE_TARGETS:
            pytest.skip(f"the emulated shader core does not execute {device.target} code yet")


def test_saxpy_matches_numpy_with_a_bounds_check(device):
    n = 1000  # not a multiple of the group: the tail threads are masked by the kernel's own check
    x, y = RNG.random(n, np.float32), RNG.random(n, np.float32)
    bx, by = buffer_of(device, x), buffer_of(device, y)
    run(device, K.SAXPY, "saxpy", [bx, by, 2.5, n], 1024, 128)
    expect = (np.float64(2.5) * x.astype(np.float64) + y).astype(np.float32)  # one rounding, as fma
    assert np.array_equal(array_of(by, np.float32, n), expect)


def test_integer_and_bit_ops_match_numpy(device):
    n = 512
    a = RNG.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
    b = RNG.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
    out = device.alloc(4 * n)
    run(device, K.INTOPS, "intops", [buffer_of(device, a), buffer_of(device, b), out], n, 64)
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    m = (a64 * b64) & 0xFFFFFFFF
    x = m ^ ((a64 >> 3) & 0xFFFFFFFF)
    s2 = (x + (a64 & b64 & 0xFFFFFFFF) - np.minimum(a64, b64)) & 0xFFFFFFFF
    bd = b64 | 1
    q = np.sign(a64) * np.sign(bd) * (np.abs(a64) // np.abs(bd))  # C division truncates toward zero
    r = (a64 & 0xFFFFFFFF) % (bd & 0xFFFFFFFF)
    s4 = ((s2 + q) & 0xFFFFFFFF) ^ r
    rot = ((s4 << 5) | (s4 >> 27)) & 0xFFFFFFFF
    assert np.array_equal(array_of(out, np.uint32, n), rot.astype(np.uint32))


def test_64bit_arithmetic_and_addressing(device):
    n = 256
    a = RNG.integers(0, 2 ** 63, n, dtype=np.uint64)
    out = device.alloc(8 * 3 * n)
    run(device, K.INT64, "int64", [buffer_of(device, a), out], n, 64)
    with np.errstate(over="ignore"):
        expect = (a * np.uint64(6364136223846793005)) ^ (a >> np.uint64(29))
        expect = expect + np.uint64(1442695040888963407)
    got = array_of(out, np.uint64, 3 * n)
    assert np.array_equal(got[::3], expect)
    assert not got[1::3].any() and not got[2::3].any()  # stride-3 stores touched nothing else


def test_divergent_loop_with_per_lane_trip_counts(device):
    n = 256
    v = RNG.integers(0, 1000, n, dtype=np.int32)
    out = device.alloc(4 * n)
    run(device, K.DIVLOOP, "divloop", [buffer_of(device, v), out], n, 64)
    expect = np.zeros(n, np.float32)
    for i, t in enumerate(v):
        acc = np.float32(0)
        for k in range(t & 31):
            acc = np.float32(acc + np.float32(np.float32(k) * np.float32(1.5)))
        expect[i] = acc
    assert np.array_equal(array_of(out, np.float32, n), expect)


def test_nested_branches(device):
    x = np.array(list(range(-40, 40)) + [1001, 1003, 2000, -5000] + [7] * 44, np.int32)
    n = x.size
    out = device.alloc(4 * n)
    run(device, K.NESTED, "nested", [buffer_of(device, x), out], n, 32)
    x64 = x.astype(np.int64)
    t3 = x64 * 3
    expect = np.where(x64 > 0, np.where(x64 & 1, np.where(x64 > 1000, t3 - 7, t3), x64 // 2), -x64)
    assert np.array_equal(array_of(out, np.int32, n), expect.astype(np.int32))


def test_lds_reduction_with_barriers_in_a_loop(device):
    groups = 8
    v = RNG.integers(0, 100, 256 * groups).astype(np.float32)  # integers: every summation order is exact
    out = device.alloc(4 * groups)
    run(device, K.LDS_REDUCE, "reduce", [buffer_of(device, v), out], 256 * groups, 256)
    assert np.array_equal(array_of(out, np.float32, groups), v.reshape(groups, 256).sum(axis=1))


def test_global_and_lds_atomics_build_a_histogram(device):
    n = 1024
    v = RNG.integers(0, 1 << 20, n).astype(np.uint32)
    hist, mx = device.alloc(64), device.alloc(4)
    hist.view[:] = 0
    mx.view[:] = 0
    run(device, K.ATOMICS, "hist", [buffer_of(device, v), hist, mx], n, 256)
    assert np.array_equal(array_of(hist, np.uint32, 16), np.bincount(v & 15, minlength=16).astype(np.uint32))
    assert array_of(mx, np.uint32, 1)[0] == v.max()


def test_fp16_scalar_and_packed(device):
    n = 128
    a, b, c = (RNG.random(n).astype(np.float16) for _ in range(3))
    pk = RNG.random(2 * n).astype(np.float16)
    bc, bpk = buffer_of(device, c), buffer_of(device, pk)
    run(device, K.FP16, "fp16", [buffer_of(device, a), buffer_of(device, b), bc, bpk], n, 64)
    expect = (a * b).astype(np.float16) + c  # two f16 roundings (LLVM may fuse: allow one ulp)
    got = array_of(bc, np.float16, n)
    assert np.allclose(got.astype(np.float32), expect.astype(np.float32), rtol=2 ** -10, atol=2 ** -14)
    sq = (pk * pk).astype(np.float16) + np.tile(np.array([1.0, 2.0], np.float16), n)
    assert np.allclose(array_of(bpk, np.float16, 2 * n).astype(np.float32), sq.astype(np.float32),
                       rtol=2 ** -10, atol=2 ** -14)


@pytest.mark.parametrize("global_size, local_size", [((32, 16, 1), (8, 8, 1)), ((8, 6, 4), (4, 2, 2)),
                                                     ((20, 6, 3), (8, 4, 2))])
def test_2d_and_3d_grids_including_partial_workgroups(device, global_size, local_size):
    nx, ny, nz = global_size
    out = device.alloc(4 * nx * ny * nz)
    out.view[:] = 0xFF
    run(device, K.GRID3D, "grid3d", [out, nx, ny], global_size, local_size)
    z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    assert np.array_equal(array_of(out, np.int32, nx * ny * nz).reshape(nz, ny, nx), z * 1000000 + y * 1000 + x)


def test_partial_workgroup_and_dispatch_packet_and_hidden_arguments(device):
    n, local = 1000, 64
    out = device.alloc(4 * 5 * 1024)
    out.view[:] = 0xEE
    run(device, K.LAUNCH_INFO, "launch_info", [out], n, local)
    rows = array_of(out, np.uint32, 5 * 1024).reshape(1024, 5)
    assert np.array_equal(rows[:n, 0], np.arange(n))
    assert (rows[:n, 1] == local).all()  # dispatch packet workgroup_size_x
    assert (rows[:n, 2] == n).all()  # dispatch packet grid_size_x (work-items)
    assert (rows[:n, 3] == -(-n // local)).all()  # hidden_block_count_x
    assert (rows[:n, 4] == n % local).all()  # hidden_remainder_x
    assert (rows[n:] == 0xEEEEEEEE).all()  # the partial group launched only its 1000 - 960 threads


def test_division_sqrt_and_conversions(device):
    n = 256
    x = (RNG.random(n) * 100 + 0.5).astype(np.float32)
    out = device.alloc(4 * n)
    run(device, K.MATH, "math", [buffer_of(device, x), out], n, 64)
    expect = (np.float32(1) / x) + (x / np.float32(3)) + np.sqrt(x) + np.trunc(x)
    assert np.allclose(array_of(out, np.float32, n), expect, rtol=1e-6)


def test_kernel_storing_to_an_unmapped_address_raises_device_fault(device):
    program = device.load_program(_code_object(K.STORE_TO, device.target), "store_to")
    done = device.new_signal(0)
    device.compute_queue().exec(program, [0x10000], 64, 64).signal(done, 1).submit()
    with pytest.raises(DeviceFault) as info:
        done.wait(1, timeout_ms=5000)
    assert "0x10000" in str(info.value)


@pytest.mark.sim_only
def test_shader_vm_fault_names_the_kernel_and_pc(device):
    program = device.load_program(_code_object(K.STORE_TO, device.target), "store_to")
    device.compute_queue().exec(program, [0x10000], 64, 64).submit()
    with pytest.raises(DeviceFault) as info:
        device.synchronize()
    text = str(info.value)
    # two waves store at 0x10000 and 0x10080; which one faults first is a scheduler choice (wave order)
    assert "kernel at 0x" in text and "PC +0x" in text and re.search(r"write of 4 bytes at 0x100[08]0\b", text)


@pytest.mark.sim_only
def test_unimplemented_instruction_is_an_error_naming_it(device):
    program = device.load_program(_code_object(K.BUFLOAD, device.target), "bufload")
    out = device.alloc(4 * 64)
    device.compute_queue().exec(program, [out, 0], 64, 64).submit()
    with pytest.raises(DeviceFault) as info:
        device.synchronize()
    text = str(info.value)
    assert "buffer_load_" in text and "MUBUF instruction" in text and "PC +0x" in text and "kernel at 0x" in text


def test_permlane16_picks_lanes_by_nibble(device):
    if device.target != "gfx1100":
        pytest.skip("v_permlane16_b32 / v_permlanex16_b32 are gfx10+ instructions")
    n = 64
    out = device.alloc(4 * 2 * n)
    run(device, K.PERMLANE, "permlane", [out], n, 32)
    got = array_of(out, np.uint32, 2 * n).reshape(n, 2)
    select = 1985229328 | (-19088744 & 0xFFFFFFFF) << 32  # nibbles of {src2, src1}
    lane = np.arange(n) % 32
    nib = np.array([(select >> (4 * (int(l) % 16))) & 15 for l in lane])
    base = np.arange(n) - lane
    assert np.array_equal(got[:, 0], base + (lane & ~15) + nib)
    assert np.array_equal(got[:, 1], base + ((lane & ~15) ^ 16) + nib)


def _dpp_model(v: np.ndarray, source, row_mask=0xF, bank_mask=0xF, bound_zero=False, old=7777):
    """Documented DPP16 semantics for one wave `v`: lane l reads source(l) (None = no such lane); rows and
    banks off in the masks keep `old`; a missing source writes 0 with bound_ctrl, else keeps `old`."""
    out = np.empty_like(v)
    for lane in range(v.size):
        src = source(lane)
        if not ((row_mask >> (lane // 16)) & 1 and (bank_mask >> ((lane // 4) % 4)) & 1):
            out[lane] = old
        elif src is None:
            out[lane] = 0 if bound_zero else old
        else:
            out[lane] = v[src]
    return out


def test_dpp_lane_moves_match_the_documented_controls(device):
    wave = 32 if device.target == "gfx1100" else 64
    n = 4 * wave
    out = device.alloc(4 * 9 * n)
    run(device, K.DPP, "dpp", [out], n, wave)
    got = array_of(out, np.uint32, 9 * n).reshape(n, 9)
    v = (np.arange(n) * 3).astype(np.uint32)
    row = lambda l: l & ~15  # noqa: E731
    models = [
        lambda w: _dpp_model(w, lambda l: (l & ~3) | [1, 0, 3, 2][l & 3]),
        lambda w: _dpp_model(w, lambda l: l + 1 if (l & 15) + 1 < 16 else None),
        lambda w: _dpp_model(w, lambda l: l - 3 if (l & 15) >= 3 else None, bound_zero=True),
        lambda w: _dpp_model(w, lambda l: row(l) | (((l & 15) - 4) & 15)),
        lambda w: _dpp_model(w, lambda l: row(l) | (15 - (l & 15))),
        lambda w: _dpp_model(w, lambda l: (l & ~7) | (7 - (l & 7))),
        lambda w: _dpp_model(w, lambda l: l - 1 if (l & 15) >= 1 else None, row_mask=0xA),
        lambda w: _dpp_model(w, lambda l: (l & ~3) | (3 - (l & 3)), bank_mask=0x5),
        lambda w: _dpp_model(w, lambda l: l),
    ]
    for j, model in enumerate(models):
        expect = np.concatenate([model(v[i:i + wave]) for i in range(0, n, wave)])
        assert np.array_equal(got[:, j], expect), f"control {j}"


def test_lds_crossbar_shuffles(device):
    wave = 32 if device.target == "gfx1100" else 64
    n = 2 * wave
    out = device.alloc(4 * 3 * n)
    run(device, K.SHUFFLES, "shuffles", [out], n, wave)
    got = array_of(out, np.uint32, 3 * n).reshape(n, 3)
    v = (np.arange(n) * 5).astype(np.uint32)
    lane = np.arange(n) % wave
    base = np.arange(n) - lane
    assert np.array_equal(got[:, 0], v[base + (31 - lane) % wave])  # bpermute: read lane 31 - l
    assert np.array_equal(got[:, 1], v[base + (lane - 1) % wave])  # permute: lane l sent its value to l + 1
    # swizzle 0x801F: quad mode, offset[7:0] = 0b00011111 picks lanes [3, 3, 1, 0] of each quad
    assert np.array_equal(got[:, 2], v[base + (lane & ~3) + np.array([3, 3, 1, 0])[lane & 3]])


def test_byte_and_halfword_arithmetic_on_packed_data(device):
    n = 256
    a = RNG.integers(0, 256, 4 * n, dtype=np.int64).astype(np.uint8)
    b = RNG.integers(0, 256, 4 * n, dtype=np.int64).astype(np.uint8)
    out = device.alloc(4 * n)
    run(device, K.PACKED_BYTES, "packed_bytes", [buffer_of(device, a), buffer_of(device, b), out], n, 64)
    m = ((a + b) * a).astype(np.uint8)  # uint8 wraps like i8
    expect = m.view(np.uint16) >> (b.view(np.uint16) & np.uint16(15))
    assert np.array_equal(array_of(out, np.uint16, 2 * n), expect)
