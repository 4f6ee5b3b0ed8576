"""Livelocks that write (issue 21 item 2): a wave loop that polls with an atomic (an add of 0, a compare-swap that
fails) or stores the value already in memory every iteration changes nothing anyone can see. With nobody left to
change the polled memory it is a livelock, reported by the host's wait as one (naming wave, PC, instruction, the
polled address and its value) after a bounded number of issue steps -- while a kernel that is merely long (its
atomics or stores change memory, its registers count) is never reported.

How: while a dispatch is watched for spins, every wave store compares the bytes before and after
(shader.lanemem); only a store that changed memory counts as a write that makes a repeated wave state not a spin.
"""
from __future__ import annotations

import numpy as np
import pytest

from hcqsim.compiler import compile_llvm
from hcqsim.errors import DeadlockError
from hcqsim.runtime import open_device
from hcqsim.shader.core import DISPATCH_QUANTUM

TARGETS = ["gfx1100", "gfx942"]
CONFIGS = [(t, aql) for t in TARGETS for aql in (False, True)]
IDS = [f"{t}-{'aql' if aql else 'pm4'}" for t, aql in CONFIGS]

# Work-item 0 polls *flag until the poll says it was released, then stores the value it saw to out[0]; the other
# work-items end at once. Each body is the loop of one kind of poll (after `loop:`); `%seen` is what it saw.
SPIN_TEMPLATE = """
declare i32 @llvm.amdgcn.workitem.id.x()
define amdgpu_kernel void @poll(ptr addrspace(1) %flag, ptr addrspace(1) %out) {
entry:
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %first = icmp eq i32 %t, 0
  %beat = getelementptr i32, ptr addrspace(1) %out, i32 1
  br i1 %first, label %loop, label %exit
loop:
BODY
done:
  store volatile i32 %seen, ptr addrspace(1) %out, align 4
  br label %exit
exit:
  ret void
}
"""
POLLS = {
    # an atomic add of 0 returns the value and writes it back unchanged (volatile: LLVM must not make it a load)
    "atomic_add_0": ("""  %seen = atomicrmw volatile add ptr addrspace(1) %flag, i32 0 monotonic, align 4
  %z = icmp eq i32 %seen, 0
  br i1 %z, label %loop, label %done
""", "atomic", 1, 1),
    # compare-swap 1 -> 2 fails while *flag is 0; the host's 1 lets it succeed (out = 1, flag = 2)
    "failing_cmpswap": ("""  %r = cmpxchg volatile ptr addrspace(1) %flag, i32 1, i32 2 monotonic monotonic, align 4
  %seen = extractvalue { i32, i1 } %r, 0
  %ok = extractvalue { i32, i1 } %r, 1
  br i1 %ok, label %done, label %loop
""", "atomic", 1, 2),
    # a heartbeat store of the same value every iteration, then a load of the flag
    "same_value_store": ("""  store volatile i32 7, ptr addrspace(1) %beat, align 4
  %seen = load volatile i32, ptr addrspace(1) %flag, align 4
  %z = icmp eq i32 %seen, 0
  br i1 %z, label %loop, label %done
""", "load", 1, 1),
}


def u32(buf, n=1):
    return buf.view[:4 * n].view(np.uint32)


@pytest.fixture(scope="module", params=CONFIGS, ids=IDS)
def device(request):
    target, aql = request.param
    dev = open_device("sim", target=target, aql=aql)
    yield dev
    dev.close()


def core_of(dev):
    return dev.os.system.gpus[dev.index].shader_core  # test-only look inside the emulated machine


@pytest.mark.parametrize("poll", list(POLLS))
def test_a_spin_that_polls_with_an_atomic_or_stores_the_same_value_is_a_livelock(device, poll):
    body, poll_kind, release, final_flag = POLLS[poll]
    prog = device.load_program(compile_llvm(SPIN_TEMPLATE.replace("BODY", body), device.target), "poll")
    flag, out, done = device.alloc(4096), device.alloc(4096), device.new_signal(0)
    core = core_of(device)
    before = core.stats["issue_steps"]
    device.compute_queue().exec(prog, [flag, out], 64, 64).signal(done, 1).submit()
    with pytest.raises(DeadlockError) as info:
        done.wait(1)
    steps = core.stats["issue_steps"] - before
    e = info.value
    assert str(e).startswith("livelock:") and e.spinning, str(e)
    w = e.spinning[0]
    assert w.workgroup == (0, 0, 0) and w.wave == 0 and w.pc >= 0 and w.instruction
    assert poll_kind in w.poll and w.address == flag.va and w.value == 0, w
    assert f"0x{flag.va:x}" in str(e)
    # found within a bounded number of issue steps (the quantum before watching starts, then a few hundred):
    # what bounds the host's wait (bench/emulator.py prints the seconds)
    assert steps < 2 * DISPATCH_QUANTUM, f"{steps} issue steps before the report"
    if poll == "same_value_store":
        assert u32(out, 2)[1] == 7  # the heartbeat did store
    u32(flag)[0] = release  # the report changed nothing: released, the kernel finishes
    done.wait(1)
    assert u32(out)[0] == release and u32(flag)[0] == final_flag


# Merely long kernels that write as they go: a loop of n iterations that counts with an atomic add of 1 (memory
# changes every iteration), and one that stores the same heartbeat value but counts in a register. Neither repeats
# a state with memory unchanged, so neither is a livelock, however long the host waits.
LONG_TEMPLATE = """
define amdgpu_kernel void @long(ptr addrspace(1) %out, i32 %n) {
entry:
  %beat = getelementptr i32, ptr addrspace(1) %out, i32 1
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %j, %loop ]
BODY
  %j = add i32 %i, 1
  %more = icmp ult i32 %j, %n
  br i1 %more, label %loop, label %done
done:
  %p = getelementptr i32, ptr addrspace(1) %out, i32 2
  store i32 %j, ptr addrspace(1) %p, align 4
  ret void
}
"""
LONG = {
    "atomic_count": "  %old = atomicrmw volatile add ptr addrspace(1) %out, i32 1 monotonic, align 4\n",
    "same_value_store_counting": "  store volatile i32 7, ptr addrspace(1) %beat, align 4\n",
}


@pytest.mark.parametrize("kind", list(LONG))
@pytest.mark.parametrize("target", TARGETS)
def test_a_long_kernel_whose_writes_or_registers_progress_is_not_a_livelock(target, kind):
    dev = open_device("sim", target=target)
    try:
        prog = dev.load_program(compile_llvm(LONG_TEMPLATE.replace("BODY", LONG[kind]), dev.target), "long")
        out, done = dev.alloc(4096), dev.new_signal(0)
        n = 2000  # several quanta of issue steps: watched for spins most of the way
        before = core_of(dev).stats["issue_steps"]
        dev.compute_queue().exec(prog, [out, n], 1, 1).signal(done, 1).submit()
        done.wait(1, timeout_ms=600_000)
        assert core_of(dev).stats["issue_steps"] - before > 2 * DISPATCH_QUANTUM  # long enough to be watched
        want = [n if kind == "atomic_count" else 0, 7 if kind != "atomic_count" else 0, n]
        assert list(u32(out, 3)) == want
    finally:
        dev.close()


# A wave whose registers repeat while memory does not: it bumps a counter nobody reads (an atomic add whose result
# is unused) and polls a flag. Its state recurs every iteration, but memory changed in between, so it is not a
# spin on memory nobody writes; it runs into the kernel's runaway bound instead (lowered here to keep it short).
# (Conservative by design: any change of memory, even of a location the wave never reads, defers the verdict.)
COUNTER_POLL_IR = SPIN_TEMPLATE.replace("BODY", """  %old = atomicrmw volatile add ptr addrspace(1) %beat, i32 1 monotonic, align 4
  %seen = load volatile i32, ptr addrspace(1) %flag, align 4
  %z = icmp eq i32 %seen, 0
  br i1 %z, label %loop, label %done
""")


@pytest.mark.parametrize("target", TARGETS)
def test_a_wave_that_changes_memory_every_iteration_is_never_called_a_livelock(target):
    from hcqsim.errors import DeviceFault
    dev = open_device("sim", target=target)
    try:
        core_of(dev).max_kernel_steps = 8 * DISPATCH_QUANTUM
        prog = dev.load_program(compile_llvm(COUNTER_POLL_IR, dev.target), "poll")
        flag, out, done = dev.alloc(4096), dev.alloc(4096), dev.new_signal(0)
        dev.compute_queue().exec(prog, [flag, out], 64, 64).signal(done, 1).submit()
        with pytest.raises(DeviceFault, match="runaway") as info:
            done.wait(1)
        assert not isinstance(info.value, DeadlockError) and not str(info.value).startswith("livelock")
        assert u32(out, 2)[1] > 1000  # it did count all along
    finally:
        dev.close()
