"""The whole stack (runtime -> emulated KFD -> GPU) is deterministic, under every scheduler policy.

A small multi-queue program (copies, fills, cross-queue waits, a kernel) runs on fresh emulated systems: the
same seed gives byte-identical GPU traces and identical memory; race-free programs give the same memory
under every policy and seed. When the VA window cannot sit at its preferred base (another system alive in the
process holds it), every address still prints as if it did: the traces stay byte-identical, PM4, SDMA and AQL,
on both targets.
"""
import contextlib
import json

import numpy as np
import pytest

from hcqsim import pm4, sdma, trace_events
from hcqsim.compiler import compile_llvm
from hcqsim.memory import VaWindow
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
CODE = {"gfx1100": compile_llvm(SCALE, "gfx1100")}


def code(target: str) -> bytes:
    if target not in CODE:
        CODE[target] = compile_llvm(SCALE, target)
    return CODE[target]


def program(policy: str, seed: int, target: str = "gfx1100", aql: bool = False) -> tuple[list[str], bytes]:
    """Both queues wait on a CPU gate, so when it opens both are ready at once: the policy picks the order.
    The side copy of c races with the fill of c (which one wins depends on the schedule), but the final copy
    overwrites all of b, so the program's result is schedule-independent."""
    dev = open_device("sim", policy=policy, seed=seed, target=target, aql=aql)
    try:
        kernel = dev.load_program(code(target), "scale")
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
        PLACES.append(gpu.window.base)
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


# -- a displaced VA window -------------------------------------------------------------------------

PLACES: list[int] = []  # where each program's window sat


@contextlib.contextmanager
def displaced_window():
    """While inside, the slot the next system's window would take is held by another window (as by another system
    alive in the process), so that window sits one slot further from its preferred base (the callers check it
    moved: after other tests in this process the preferred base itself may be held already)."""
    blocker = VaWindow()
    try:
        yield
    finally:
        blocker.close()


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
@pytest.mark.parametrize("aql", [False, True], ids=["pm4", "aql"])
def test_a_displaced_window_gives_the_same_trace_byte_for_byte(target, aql):
    normal = program("random", 3, target, aql)
    with displaced_window():
        displaced = program("random", 3, target, aql)
    assert PLACES[-1] != PLACES[-2]  # the second window really sat elsewhere
    assert displaced[1] == normal[1]
    assert "\n".join(displaced[0]) == "\n".join(normal[0])
    text = "\n".join(normal[0])  # what the comparison covers: SDMA, the kernel, and its launch
    assert "COPY_LINEAR" in text and "dispatch kernel at 0x2000" in text
    if aql:  # an AQL queue runs the schedule-free kernel from an AQL packet, the rest from PM4 IBs
        assert "aql_0" in text and "COMPUTE_PGM_LO=" not in text
    else:  # PM4: register writes holding addresses (the code entry; the pointers the descriptor asks for)
        assert "COMPUTE_PGM_LO=" in text and "COMPUTE_USER_DATA_0=" in text


def test_a_displaced_window_gives_the_same_trace_event_file(tmp_path):
    """`hcqsim trace` writes trace events from these lines: the JSON is byte-identical too."""
    files = []
    for where in (contextlib.nullcontext, displaced_window):
        with where():
            lines, _ = program("round_robin", 0)
        files.append(json.dumps(trace_events.document(trace_events.from_trace_lines(lines))))
    assert files[0] == files[1]


def raw_stream_trace(displace: bool) -> list[str]:
    """Hand-built packets whose address fields are split over several fields or registers (ACQUIRE_MEM's
    COHER_BASE, GCR_REQ's BASE_VA/LIMIT_VA, COMPUTE_PGM_LO and _HI written by separate packets), and a VM fault:
    what the runtime never emits, checked on an EmulatedGPU directly."""
    from hcqsim import EmulatedGPU
    with displaced_window() if displace else contextlib.nullcontext():
        gpu = EmulatedGPU("gfx1100")
        try:
            buf = gpu.alloc(1 << 16)
            va = buf.va + 0x1200
            q = gpu.compute_queue()
            q.submit(pm4.encode("ACQUIRE_MEM", coher_size=1, coher_base=(va >> 8) & 0xFFFFFFFF,
                                coher_base_hi=va >> 40)
                     + pm4.set_sh_reg(0x2E0C, [(va >> 8) & 0xFFFFFFFF]) + pm4.set_sh_reg(0x2E0D, [va >> 40])
                     + pm4.set_sh_reg(0x2E10, [(va >> 8) & 0xFFFFFFFF, va >> 40])
                     + pm4.write_data(buf.va + (1 << 36), [1]))  # unmapped, inside the window: a VM fault
            s = gpu.sdma_queue()
            s.submit(sdma.gcr_req(base=va, limit=va + 0x1000) + sdma.fence(va, 7))
            gpu.run()
            assert gpu.faults and gpu.faults[0].kind == "VM fault"
            return gpu.trace_lines(), gpu.window.base
        finally:
            gpu.close()


def test_split_addresses_and_fault_addresses_print_canonical_with_a_displaced_window():
    (normal, at), (displaced, moved) = raw_stream_trace(False), raw_stream_trace(True)
    assert at != moved
    assert displaced == normal
    text = "\n".join(normal)
    for shown in ("coher_base=0x12 coher_base_hi=0x20", "COMPUTE_PGM_LO=0x00000012", "COMPUTE_PGM_HI=0x00000020",
                  "COMPUTE_DISPATCH_SCRATCH_BASE_LO=0x00000012 COMPUTE_DISPATCH_SCRATCH_BASE_HI=0x00000020",
                  "base_va_lo=0x24 base_va_hi=0x2000", "limit_va_lo=0x44 limit_va_hi=0x2000",
                  "fault VM fault addr=0x201000000000"):
        assert shown in text, shown
