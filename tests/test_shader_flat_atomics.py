"""Flat (generic address space) atomics of real kernels on global memory, both targets."""
import numpy as np
import pytest

from hcqsim.compiler import compile_llvm
from hcqsim.errors import DeviceFault
from hcqsim.runtime import open_device

KERNEL = """
declare i32 @llvm.amdgcn.workitem.id.x()
define amdgpu_kernel void @k(ptr addrspace(1) %g, ptr addrspace(1) %old) {
  %i = call i32 @llvm.amdgcn.workitem.id.x()
  %gp = addrspacecast ptr addrspace(1) %g to ptr
  %slot = and i32 %i, 3
  %p = getelementptr i32, ptr %gp, i32 %slot
  %o = atomicrmw OP ptr %p, i32 %i seq_cst
  %po = getelementptr i32, ptr addrspace(1) %old, i32 %i
  store i32 %o, ptr addrspace(1) %po
  ret void
}
"""
LDS_KERNEL = """
@lds = internal addrspace(3) global [4 x i32] undef
define amdgpu_kernel void @k(ptr addrspace(1) %g, ptr addrspace(1) %old) {
  %lp = addrspacecast ptr addrspace(3) @lds to ptr
  %o = atomicrmw add ptr %lp, i32 1 seq_cst
  store i32 %o, ptr addrspace(1) %old
  ret void
}
"""


@pytest.fixture(scope="module", params=("gfx1100", "gfx942"))
def device(request):
    dev = open_device("sim", target=request.param)
    yield dev
    dev.close()


def run(device, ir: str, n: int, initial: np.ndarray):
    program = device.load_program(compile_llvm(ir, device.target, 2), "k")
    g, old = device.alloc(16), device.alloc(4 * n)
    g.view[:16] = initial.view(np.uint8)
    done = device.new_signal(0)
    device.compute_queue().exec(program, [g, old], n, n).signal(done, 1).submit()
    done.wait(1)
    return g.view[:16].view(np.uint32).copy(), old.view[:4 * n].view(np.uint32).copy()


@pytest.mark.parametrize("op, combine", [("add", lambda a, b: a + b), ("or", lambda a, b: a | b),
                                         ("max", max), ("umin", min)])
def test_flat_atomics_on_global_memory_apply_every_lane_in_order(device, op, combine):
    n = 64
    start = np.array([5, 1 << 20, 7, 0], np.uint32)
    final, old = run(device, KERNEL.replace("OP", op), n, start)
    for slot in range(4):
        value = int(start[slot])
        for lane in range(slot, n, 4):  # lanes apply in lane order: each sees the previous lanes' effect
            assert old[lane] == value
            value = combine(value, lane) & 0xFFFFFFFF
        assert final[slot] == value


def test_a_flat_atomic_on_lds_faults_instead_of_guessing(device):
    with pytest.raises(DeviceFault, match="flat atomic"):
        run(device, LDS_KERNEL, 1, np.zeros(4, np.uint32))
