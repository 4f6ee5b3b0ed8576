"""The whole stack (runtime -> emulated KFD -> GPU) is deterministic, under every scheduler policy.

A small multi-queue program (copies, fills, cross-queue waits, a kernel) runs on fresh emulated systems: the
same seed gives byte-identical GPU traces and identical memory; race-free programs give the same memory
under every policy and seed.
"""
import numpy as np
import pytest

from hcqsim.compiler import compile_llvm
from hcqsim.runtime import open_device

SCALE = """
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()
define amdgpu_kernel void @scale(ptr addrspace(1) %p) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %g = call i32 @llvm.amdgcn.workgroup.id.x()
  %b = mul i32 %g, 64
  %i = add i32 %b, %t
  %q = getelementptr i32, ptr addrspace(1) %p, i32 %i
  %v = load i32, ptr addrspace(1) %q
  %w = mul i32 %v, 3
  store i32 %w, ptr addrspace(1) %q
  ret void
}
"""
CODE = compile_llvm(SCALE, "gfx1100")


def program(policy: str, seed: int) -> tuple[list[str], bytes]:
    """Both queues wait on a CPU gate, so when it opens both are ready at once: the policy picks the order.
    The side copy of c races with the fill of c (which one wins depends on the schedule), but the final copy
    overwrites all of b, so the program's result is schedule-independent."""
    dev = open_device("sim", policy=policy, seed=seed)
    try:
        kernel = dev.load_program(CODE, "scale")
        a, b, c = dev.alloc(4096), dev.alloc(4096), dev.alloc(4096)
        gate, staged, scaled, copied, side = (dev.new_signal(0) for _ in range(5))
        dev.copy_queue().wait(gate, 1).fill(a, 7, 4096).signal(staged, 1).copy(b, c, 64).signal(side, 1).submit()
        dev.compute_queue().wait(gate, 1).fill(c, 5, 4096).wait(staged, 1).exec(kernel, [a], 1024, 64) \
            .signal(scaled, 1).submit()
        gate.value = 1  # both queues become runnable at the next progress point
        scaled.wait(1)
        side.wait(1)
        dev.copy_queue().wait(scaled, 1).copy(b, a, 4096).signal(copied, 1).submit()
        copied.wait(1)
        gpu = dev.os.system.gpus[0]  # test-only look inside the emulated machine
        return gpu.trace_lines(), bytes(b.view)
    finally:
        dev.close()


def test_same_seed_same_trace_byte_for_byte():
    first, second = program("random", 3), program("random", 3)
    assert first[0] == second[0] and first[1] == second[1]
    assert any("DISPATCH_DIRECT" in line for line in first[0]) and any("COPY_LINEAR" in line for line in first[0])


@pytest.mark.parametrize("policy, seed", [("run_to_block", 0), ("round_robin", 0), ("random", 1), ("random", 2),
                                          ("random", 9)])
def test_race_free_program_gives_the_same_memory_under_every_schedule(policy, seed):
    _, memory = program(policy, seed)
    assert (np.frombuffer(memory, np.uint32) == 21).all()  # 7, scaled by 3, copied


def test_different_seeds_interleave_differently():
    traces = {tuple(program("random", seed)[0]) for seed in range(4)}
    assert len(traces) > 1
