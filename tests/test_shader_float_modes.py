"""Float modes of real kernels: LLVM's denormal attributes become RSRC1.FLOAT_MODE and s_denorm_mode /
s_setreg(HW_REG_MODE) instructions; the shader core flushes denormals as the mode says."""
import numpy as np
import pytest

from hcqsim.compiler import compile_llvm
from hcqsim.runtime import open_device

TARGETS = ("gfx1100", "gfx942")
DENORMAL = np.float32(1e-40)  # an f32 denormal
TINY = np.float32(2.0 ** -70)  # TINY * TINY = 2^-140: a denormal result

KERNEL = """
declare i32 @llvm.amdgcn.workitem.id.x()
define amdgpu_kernel void @k(ptr addrspace(1) %pa, ptr addrspace(1) %pb, ptr addrspace(1) %po) #0 {
  %i = call i32 @llvm.amdgcn.workitem.id.x()
  %ia = getelementptr float, ptr addrspace(1) %pa, i32 %i
  %ib = getelementptr float, ptr addrspace(1) %pb, i32 %i
  %io = getelementptr float, ptr addrspace(1) %po, i32 %i
  %a = load float, ptr addrspace(1) %ia
  %b = load float, ptr addrspace(1) %ib
  %r = OP
  store float %r, ptr addrspace(1) %io
  ret void
}
attributes #0 = { "denormal-fp-math-f32"="MODE" }
"""


@pytest.fixture(scope="module", params=TARGETS)
def device(request):
    dev = open_device("sim", target=request.param)
    yield dev
    dev.close()


def run(device, op: str, mode: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ir = KERNEL.replace("OP", op).replace("MODE", mode)
    program = device.load_program(compile_llvm(ir, device.target, 2), "k")
    bufs = []
    for arr in (a, b):
        buf = device.alloc(arr.nbytes)
        buf.view[:arr.nbytes] = arr.view(np.uint8)
        bufs.append(buf)
    out = device.alloc(a.nbytes)
    done = device.new_signal(0)
    device.compute_queue().exec(program, bufs + [out], len(a), len(a)).signal(done, 1).submit()
    done.wait(1)
    return out.view[:a.nbytes].view(np.float32).copy()


def test_flushing_mode_turns_a_denormal_product_into_a_signed_zero(device):
    a = np.array([TINY, -TINY, 1.0, 2.0], np.float32)
    b = np.array([TINY, TINY, 3.0, DENORMAL], np.float32)
    got = run(device, "fmul float %a, %b", "preserve-sign,preserve-sign", a, b)
    assert got[0] == 0 and not np.signbit(got[0])
    assert got[1] == 0 and np.signbit(got[1])
    assert got[2] == 3.0
    assert got[3] == 0  # a denormal source is flushed before the multiply


def test_ieee_denormal_mode_keeps_the_denormal_product(device):
    a = np.array([TINY, 2.0], np.float32)
    b = np.array([TINY, DENORMAL], np.float32)
    got = run(device, "fmul float %a, %b", "ieee,ieee", a, b)
    assert got[0] == np.float32(2.0 ** -140) and got[1] == np.float32(2 * DENORMAL)


def test_fdiv_in_flushing_mode_is_correct_for_normal_operands(device):
    """LLVM brackets the division macro with a mode switch (s_denorm_mode / s_setreg) to keep denormals in
    the Newton-Raphson steps; the result is IEEE-correct for normal operands and results."""
    rng = np.random.default_rng(3)
    a = (rng.standard_normal(64) * 1e3).astype(np.float32)
    b = (rng.standard_normal(64) * 1e-3).astype(np.float32)
    got = run(device, "fdiv float %a, %b", "preserve-sign,preserve-sign", a, b)
    assert np.array_equal(got, (a.astype(np.float64) / b).astype(np.float32))
