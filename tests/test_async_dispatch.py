"""Dispatches are activities, not calls (issue 21): DISPATCH_DIRECT and AQL kernel dispatch launch their waves and
the command processor moves on (HARDWARE_FACTS 6.3); the waves advance in quanta beside later packets, other
queues and the host. What waits for a running dispatch is what hardware waits with: EVENT_WRITE CS_PARTIAL_FLUSH,
RELEASE_MEM's end-of-pipe event, the AQL barrier bit and completion signal. WRITE_DATA after a dispatch does not.

The kernels here are real code objects: a spin-wait on a flag the host sets, and the library's iota/scale.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, example, find, given, settings

from hcqsim import EmulatedGPU, kernels, pm4
from hcqsim.compiler import compile_llvm
from hcqsim.errors import DeadlockError, DeviceTimeout
from hcqsim.runtime import open_device
from hcqsim.strategies import Interleaver, interleavings
from tests.async_kernels import ARRIVE_IR, HASH_BODY, SPIN_IR, hash_result, loop_ir

TARGETS = ["gfx1100", "gfx942"]

# A kernel that waits for the host: work-item 0 polls *flag until it is non-zero, then stores it to out[0]
# (tests/async_kernels.py SPIN_IR, kernel "poll").


def spin_program(dev):
    return dev.load_program(compile_llvm(SPIN_IR, dev.target), "poll")


def u32(buf, n=1):
    return buf.view[:4 * n].view(np.uint32)


@pytest.fixture(params=[(t, aql) for t in TARGETS for aql in (False, True)],
                ids=[f"{t}-{'aql' if aql else 'pm4'}" for t in TARGETS for aql in (False, True)])
def device(request):
    target, aql = request.param
    dev = open_device("sim", target=target, aql=aql)
    yield dev
    dev.close()


@pytest.fixture(params=TARGETS)
def free_device(request):
    dev = open_device("sim", target=request.param, free_running=True)
    yield dev
    dev.close()


def launch_spin(dev):
    # the flag the host sets is coherent system memory, as a correct program's is: a CPU store into VRAM would
    # wait in the HDP, and the kernel's polls would hit its GL2 copy (HCQSIM_MEMORY_MODEL=report names both)
    flag, out, done = dev.alloc(4096, uncached=True), dev.alloc(4096), dev.new_signal(0)
    dev.compute_queue().exec(spin_program(dev), [flag, out], 64, 64).signal(done, 1).submit()
    return flag, out, done


# -- the host gets control back -----------------------------------------------------------------------------


def test_a_spin_wait_kernel_is_released_by_a_host_store_after_submit(device):
    flag, out, done = launch_spin(device)  # submit() returned while the kernel spins
    assert done.value == 0 and u32(out)[0] == 0
    u32(flag)[0] = 7
    done.wait(1)
    assert u32(out)[0] == 7


def test_a_spin_wait_kernel_is_released_by_a_host_store_free_running(free_device):
    flag, out, done = launch_spin(free_device)
    assert u32(out)[0] == 0
    u32(flag)[0] = 9
    done.wait(1, timeout_ms=60_000)
    assert u32(out)[0] == 9


def test_nobody_to_release_the_spin_is_a_livelock_report_naming_the_wave_and_address(device):
    flag, out, done = launch_spin(device)
    with pytest.raises(DeadlockError) as info:
        done.wait(1)
    e = info.value
    assert str(e).startswith("livelock:") and e.spinning
    w = e.spinning[0]
    assert w.workgroup == (0, 0, 0) and w.wave == 0 and w.address == flag.va and w.value == 0
    assert "load" in w.poll and w.pc >= 0 and w.instruction
    assert f"0x{flag.va:x}" in str(e)
    u32(flag)[0] = 1  # the report changed nothing: released, the kernel finishes
    done.wait(1)
    assert u32(out)[0] == 1


# A kernel that is merely long: a counting loop past several quanta (watched for spins all along), and one that
# stores every iteration; neither is a livelock.
STORING_HASH = "  store volatile i32 %i, ptr addrspace(1) %beat, align 4\n" + HASH_BODY  # a store every iteration


@pytest.mark.parametrize("stores", [True, False], ids=["storing", "registers-only"])
@pytest.mark.parametrize("target", TARGETS)
def test_a_merely_long_kernel_is_not_a_livelock(target, stores):
    dev = open_device("sim", target=target)
    try:
        prog = dev.load_program(compile_llvm(loop_ir(STORING_HASH if stores else HASH_BODY), dev.target), "loop")
        data, out, done = dev.alloc(4096), dev.alloc(4096), dev.new_signal(0)
        n = 3000  # well past a quantum of issue steps: watched, never repeating
        dev.compute_queue().exec(prog, [data, out, n], 1, 1).signal(done, 1).submit()
        done.wait(1, timeout_ms=600_000)
        assert list(u32(out, 3)) == [hash_result(n), n, n - 1 if stores else 0]
    finally:
        dev.close()


def test_free_running_wait_on_a_spin_times_out_as_on_hardware(free_device):
    flag, out, done = launch_spin(free_device)
    with pytest.raises(DeviceTimeout):
        done.wait(1, timeout_ms=300)
    u32(flag)[0] = 3
    done.wait(1, timeout_ms=60_000)
    assert u32(out)[0] == 3


def test_a_wait_another_host_thread_releases_is_not_a_deadlock():
    dev = open_device("sim")
    try:
        flag, out, done = launch_spin(dev)
        release = threading.Timer(0.3, lambda: u32(flag).__setitem__(0, 5))
        release.start()
        done.wait(1, timeout_ms=60_000)
        release.join()
        assert u32(out)[0] == 5
    finally:
        dev.close()


def _returns(call, timeout_s=60.0):
    """Run `call` on a thread; True when it returned (a hang would leave it running)."""
    result = []
    t = threading.Thread(target=lambda: result.append(call()), daemon=True)
    t.start()
    t.join(timeout_s)
    return not t.is_alive()


def test_driver_calls_and_close_return_promptly_during_a_spinning_kernel(free_device):
    dev = free_device
    flag, out, done = launch_spin(dev)
    assert _returns(lambda: dev.alloc(4096))  # ALLOC_MEMORY_OF_GPU + MAP while the kernel runs
    assert _returns(lambda: dev.new_signal(0))
    assert u32(out)[0] == 0 and done.value == 0  # still spinning
    assert _returns(dev.close)  # DESTROY_QUEUE for every queue, then the rest


# -- what waits for a running dispatch, and what does not ---------------------------------------------------


ORDERS = settings(max_examples=12, derandomize=True, database=None, deadline=None, phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck))
# a search for a bad order stops at the first one (shrinking it costs a minute and proves nothing more)
FIND = settings(max_examples=300, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
                suppress_health_check=list(HealthCheck))
N = 256  # four workgroups of 64


def _explored(target: str, **options):
    chooser = Interleaver()
    chooser.host_turns = True  # a choice may also end a progress point: the host looks while kernels run
    dev = open_device("sim", target=target, policy=chooser, **options)
    yield dev, chooser
    dev.close()


@pytest.fixture(scope="module", params=TARGETS)
def explored(request):
    """A device whose scheduler choices come from a list (hypothesis draws them): (device, chooser)."""
    yield from _explored(request.param)


@pytest.fixture(scope="module", params=TARGETS)
def explored_coherent(request):
    """`explored` in the coherent memory model, whatever HCQSIM_MEMORY_MODEL says: for the planted races below,
    which test the scheduler's orders (report mode rightly names their missing CS_PARTIAL_FLUSH)."""
    yield from _explored(request.param, memory_model="coherent")


def _no_flush(q):
    """Drop the CS_PARTIAL_FLUSH the runtime emits after every DISPATCH_DIRECT (the planted runtime bug)."""
    assert q.packets[-1] == pm4.cs_partial_flush()
    q.packets.pop()
    return q


def run_iota_then_signal(dev, chooser, choices, *, signal: str):
    """iota(out, 1, N) then the signal, the host waits for it and reads `out` at once: what the host saw."""
    prog = dev.load_program(kernels.code_object("iota", dev.target), "iota")
    out, sig = dev.alloc(4 * N), dev.new_signal(0)
    with chooser.using(choices):
        q = dev.compute_queue().exec(prog, [out, 1, N], N, 64)
        if signal == "write_data":  # the bug: WRITE_DATA acts when the CP reaches it, the kernel may still run
            _no_flush(q).packets.append(pm4.write_data(sig.value_addr, [1]))
        elif signal == "release_mem":  # end of pipe: written once the kernel finished, no flush needed
            _no_flush(q).signal(sig, 1)
        else:
            q.signal(sig, 1)  # what the runtime emits: flush + end-of-pipe release
        q.submit()
        sig.wait(1)
        seen = u32(out, N).copy()
    dev.synchronize()
    dev.free(out)
    dev.free_signal(sig)
    return seen


EXPECTED = np.arange(1, N + 1, dtype=np.uint32)


def test_write_data_signal_after_a_dispatch_races_under_some_order_never_in_order(explored_coherent):
    dev, chooser = explored_coherent
    assert np.array_equal(run_iota_then_signal(dev, chooser, [], signal="write_data"), EXPECTED)
    bad = find(interleavings(), lambda c: not np.array_equal(run_iota_then_signal(dev, chooser, c,
                                                                                   signal="write_data"), EXPECTED),
               settings=FIND)
    assert bad  # a non-empty interleaving: the in-order default never shows it
    assert not np.array_equal(run_iota_then_signal(dev, chooser, bad, signal="write_data"), EXPECTED)  # replays


# Orders that put the queue's packets after the dispatch ahead of its waves, then hand the host control: the
# launch, the rest of the queue, host turns (index n_ready) at the progress points the runtime's own calls make
# (submit's fault poll, the wait's first look). Where a signal could land early, these show it.
HOST_TURNS = [(1, 1)] * 6
QUEUE_FIRST = [[(0, 24), (1, 24)] + HOST_TURNS, [(0, 24), (0, 24), (1, 24)] + HOST_TURNS,
               [(0, 24), (1, 1)] + HOST_TURNS]


@pytest.mark.parametrize("signal", ["release_mem", "runtime"])
def test_end_of_pipe_signals_see_the_kernel_finished_under_every_order(explored, signal):
    dev, chooser = explored

    @given(interleavings())
    @ORDERS
    @example(QUEUE_FIRST[0])
    @example(QUEUE_FIRST[1])
    @example(QUEUE_FIRST[2])
    def check(choices):
        assert np.array_equal(run_iota_then_signal(dev, chooser, choices, signal=signal), EXPECTED)
    check()


def run_producer_consumer(dev, chooser, choices, *, flush: bool):
    """iota(a, 1, N); scale(a, b, 3, N) on one queue, then the runtime's signal: what b holds."""
    iota = dev.load_program(kernels.code_object("iota", dev.target), "iota")
    scale = dev.load_program(kernels.code_object("scale", dev.target), "scale")
    a, b, sig = dev.alloc(4 * N), dev.alloc(4 * N), dev.new_signal(0)
    with chooser.using(choices):
        q = dev.compute_queue().exec(iota, [a, 1, N], N, 64)
        if not flush:
            _no_flush(q)
        q.exec(scale, [a, b, 3, N], N, 64).signal(sig, 1).submit()
        sig.wait(1)
    seen = u32(b, N).copy()
    dev.synchronize()
    for buf in (a, b):
        dev.free(buf)
    dev.free_signal(sig)
    return seen


def test_dependent_kernels_without_cs_partial_flush_overlap_under_some_order_never_in_order(explored_coherent):
    dev, chooser = explored_coherent
    expected = 3 * EXPECTED
    assert np.array_equal(run_producer_consumer(dev, chooser, [], flush=False), expected)
    bad = find(interleavings(), lambda c: not np.array_equal(run_producer_consumer(dev, chooser, c, flush=False),
                                                             expected), settings=FIND)
    assert bad


def test_cs_partial_flush_orders_dependent_kernels_under_every_order(explored):
    dev, chooser = explored

    @given(interleavings())
    @ORDERS
    @example(QUEUE_FIRST[0])
    @example([(0, 24), (1, 24), (0, 1), (1, 24)])
    def check(choices):
        assert np.array_equal(run_producer_consumer(dev, chooser, choices, flush=True), 3 * EXPECTED)
    check()


# -- the order of workgroups is a scheduler choice ---------------------------------------------------------

# Work-item 0 of each workgroup takes a ticket from a counter: out[workgroup] = the order it ran in.
TICKET_IR = """
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()
define amdgpu_kernel void @ticket(ptr addrspace(1) %counter, ptr addrspace(1) %out) {
entry:
  %wi = call i32 @llvm.amdgcn.workitem.id.x()
  %wg = call i32 @llvm.amdgcn.workgroup.id.x()
  %first = icmp eq i32 %wi, 0
  br i1 %first, label %take, label %done
take:
  %t = atomicrmw add ptr addrspace(1) %counter, i32 1 monotonic
  %p = getelementptr i32, ptr addrspace(1) %out, i32 %wg
  store i32 %t, ptr addrspace(1) %p
  br label %done
done:
  ret void
}
"""
GROUPS = 8


def ticket_order(policy, seed=0):
    """The order in which the workgroups' atomics ran. In the coherent memory model whatever HCQSIM_MEMORY_MODEL
    says: with a model the workgroups are placed on CU slots (even / odd by default, docs/memory_model.md) and the
    waves issuing one memory instruction run it slot by slot (core._run_placed: slot 0's workgroups, then slot
    1's, an order hardware allows), so the tickets are not the launch order this test is about."""
    dev = open_device("sim", policy=policy, seed=seed, memory_model="coherent")
    try:
        prog = dev.load_program(compile_llvm(TICKET_IR, dev.target), "ticket")
        counter, out, done = dev.alloc(4096), dev.alloc(4096), dev.new_signal(0)
        dev.compute_queue().exec(prog, [counter, out], 64 * GROUPS, 64).signal(done, 1).submit()
        done.wait(1)
        return list(u32(out, GROUPS))
    finally:
        dev.close()


def test_workgroups_launch_in_the_cps_order_by_default():
    assert ticket_order("run_to_block") == list(range(GROUPS))


def test_a_policy_chooses_the_workgroup_order():
    from hcqsim.gpu import ExplicitChoices
    reverse = ExplicitChoices(lambda n: (0, 1 << 62), workgroups=lambda n: list(range(n))[::-1])
    assert ticket_order(reverse) == list(range(GROUPS))[::-1]
    orders = {tuple(ticket_order("random", seed)) for seed in range(4)}
    assert all(sorted(o) == list(range(GROUPS)) for o in orders)
    assert len(orders) > 1  # seeded random orders differ between seeds


# -- so is the order of the waves of one workgroup --------------------------------------------------------

# Work-items 0, 32, 64, ... (the first lane of every wave32, two per wave64) take a ticket (async_kernels.ARRIVE_IR:
# order[ticket] = t / 32 in one workgroup); wave_ticket_order gives each one's turn.
SLOTS = 8  # one workgroup of 256 work-items: 8 wave32s or 4 wave64s


def wave_ticket_order(policy, target="gfx1100", seed=0):
    dev = open_device("sim", target=target, policy=policy, seed=seed)
    try:
        prog = dev.load_program(compile_llvm(ARRIVE_IR, dev.target), "arrive")
        counter, order, done = dev.alloc(4096), dev.alloc(4096), dev.new_signal(0)
        dev.compute_queue().exec(prog, [counter, order], 32 * SLOTS, 32 * SLOTS).signal(done, 1).submit()
        done.wait(1)
        arrived = list(u32(order, SLOTS))
        return [arrived.index(who) for who in range(SLOTS)]
    finally:
        dev.close()


@pytest.mark.parametrize("target", TARGETS)
def test_waves_of_a_workgroup_issue_in_wave_order_by_default_and_in_any_order_a_policy_picks(target):
    from hcqsim.gpu import ExplicitChoices
    assert wave_ticket_order("run_to_block", target) == list(range(SLOTS))
    last_first = ExplicitChoices(lambda n: (0, 1 << 62), split=lambda n: n - 1)  # the last wave at a PC goes first
    got = wave_ticket_order(last_first, target)
    # wave64 (gfx942): its two ticket lanes take consecutive turns inside one instruction
    per_wave = 1 if target == "gfx1100" else 2
    assert got == [(SLOTS // per_wave - 1 - s // per_wave) * per_wave + s % per_wave for s in range(SLOTS)]
    orders = {tuple(wave_ticket_order("random", target, seed)) for seed in range(6)}
    assert all(sorted(o) == list(range(SLOTS)) for o in orders)
    assert len(orders) > 1  # seeded random wave orders differ between seeds
