"""LLVM IR of the kernels the asynchronous-dispatch tests (tests/test_async_*.py) and bench/emulator.py run: polls
that wait for a flag, and long loops that are not livelocks. One source, so each test states only what it varies.
"""
from __future__ import annotations

# Work-item 0 polls *flag until the poll says it was released, then stores the value it saw to out[0]; the other
# work-items end at once. BODY is the loop after `loop:`: it defines %seen and branches to %loop or %done; %beat is
# out[1], for bodies that store as they poll.
POLL_TEMPLATE = """
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
# the plain poll: a volatile load until the flag is non-zero
LOAD_POLL = """  %seen = load volatile i32, ptr addrspace(1) %flag, align 4
  %z = icmp eq i32 %seen, 0
  br i1 %z, label %loop, label %done
"""
SPIN_IR = POLL_TEMPLATE.replace("BODY", LOAD_POLL)  # kernel "poll"(flag, out)

# The same poll counting its tries in a register, at most %bound of them (NO_BOUND: in practice none), optionally
# sleeping between polls (SLEEP: a call of llvm.amdgcn.s.sleep, or nothing); on leaving it stores the value it saw
# last to out[0] (0: it gave up) and the tries to out[1].
COUNTING_TEMPLATE = """
declare i32 @llvm.amdgcn.workitem.id.x()
declare void @llvm.amdgcn.s.sleep(i32)
define amdgpu_kernel void @counting_poll(ptr addrspace(1) %flag, ptr addrspace(1) %out, i32 %bound) {
entry:
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %first = icmp eq i32 %t, 0
  br i1 %first, label %loop, label %exit
loop:
  %tries = phi i32 [ 0, %entry ], [ %next, %loop ]
  %seen = load volatile i32, ptr addrspace(1) %flag, align 4
SLEEP
  %next = add i32 %tries, 1
  %unset = icmp eq i32 %seen, 0
  %more = icmp ult i32 %next, %bound
  %again = and i1 %unset, %more
  br i1 %again, label %loop, label %done
done:
  store volatile i32 %seen, ptr addrspace(1) %out, align 4
  %p = getelementptr i32, ptr addrspace(1) %out, i32 1
  store volatile i32 %next, ptr addrspace(1) %p, align 4
  br label %exit
exit:
  ret void
}
"""
NO_BOUND = 0xFFFFFFFF  # the count wraps long before: in practice a poll without a bound
SLEEP_2 = "  call void @llvm.amdgcn.s.sleep(i32 2)"


def counting_poll_ir(sleep: str = "") -> str:
    """Kernel "counting_poll"(flag, out, bound)."""
    return COUNTING_TEMPLATE.replace("SLEEP", sleep)


# lanes t with t % 32 == 0 (one per wave32, two per wave64) take a ticket from *counter and write who they are
# (workgroup * 1000 + t / 32) at order[ticket]: the order in which waves and workgroups reached the atomic
ARRIVE_IR = """
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()
define amdgpu_kernel void @arrive(ptr addrspace(1) %counter, ptr addrspace(1) %order) {
entry:
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %lane = and i32 %t, 31
  %first = icmp eq i32 %lane, 0
  br i1 %first, label %take, label %exit
take:
  %g = call i32 @llvm.amdgcn.workgroup.id.x()
  %w = lshr i32 %t, 5
  %g1000 = mul i32 %g, 1000
  %who = add i32 %g1000, %w
  %i = atomicrmw add ptr addrspace(1) %counter, i32 1 seq_cst, align 4
  %slot = getelementptr i32, ptr addrspace(1) %order, i32 %i
  store i32 %who, ptr addrspace(1) %slot, align 4
  br label %exit
exit:
  ret void
}
"""

# A loop of %n iterations (one work-item does all the work): BODY computes %acc2 from %acc (and %i); the kernel
# stores %acc2 to out[0] and the iterations to out[1]. %data is read-only input; %beat (out[2]) is for bodies that
# store as they go.
LOOP_TEMPLATE = """
define amdgpu_kernel void @loop(ptr addrspace(1) %data, ptr addrspace(1) %out, i32 %n) {
entry:
  %beat = getelementptr i32, ptr addrspace(1) %out, i32 2
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %j, %loop ]
  %acc = phi i32 [ 1, %entry ], [ %acc2, %loop ]
BODY
  %j = add i32 %i, 1
  %more = icmp ult i32 %j, %n
  br i1 %more, label %loop, label %done
done:
  store i32 %acc2, ptr addrspace(1) %out, align 4
  %p = getelementptr i32, ptr addrspace(1) %out, i32 1
  store i32 %j, ptr addrspace(1) %p, align 4
  ret void
}
"""
# acc ^= i * 2654435761: registers that never repeat and do not move by a constant step (no spin of either kind)
HASH_BODY = """  %x = mul i32 %i, 2654435761
  %acc2 = xor i32 %acc, %x
"""


def loop_ir(body: str = HASH_BODY) -> str:
    """Kernel "loop"(data, out, n)."""
    return LOOP_TEMPLATE.replace("BODY", body)


def hash_result(n: int) -> int:
    """What the HASH_BODY loop stores to out[0] after n iterations."""
    acc = 1
    for i in range(n):
        acc ^= (i * 2654435761) & 0xFFFFFFFF
    return acc
