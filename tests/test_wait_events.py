"""WAIT_EVENTS keeps kfd_events.c's contract in both modes: timeout 0 polls, a finite timeout returns with
wait_result TIMEOUT written into the caller's struct (no error); hcqsim's runtime gets its instant deadlock
diagnosis from the emulator-only `deadlock_report` boundary query instead."""
import ctypes
import errno
import threading
import time

import pytest

from hcqsim import kfd_uapi as k
from hcqsim import pm4
from hcqsim.boundary import OSBoundary
from hcqsim.errors import DeadlockError, DeviceTimeout
from hcqsim.kfd import EmulatedSystem
from hcqsim.runtime import RealOS, open_device

from test_kfd_driver import Runtime


@pytest.fixture(params=[False, True], ids=["progress-points", "free-running"])
def rt(request):
    system = EmulatedSystem(free_running=request.param)
    yield Runtime(system.os)
    system.close()


def blocked_signal(rt):
    """A queue stalled on WAIT_REG_MEM of a flag nobody set, then signalling event `sig`."""
    sig = rt.event_page().event_id
    q, flag = rt.compute_queue(), rt.alloc(0x1000)
    rt.submit(q, pm4.wait_reg_mem(flag.va, 1) + pm4.release_mem(rt.events.va + 8 * sig, sig, int_sel=2, ctxid=sig))
    return sig, flag


def test_a_finite_timeout_returns_timeout_in_the_struct(rt):
    sig, _ = blocked_signal(rt)
    timeout_ms = 300 if rt.os.system.free_running else 3000
    start = time.monotonic()
    assert rt.wait([sig], timeout=timeout_ms)[0] == k.KFD_IOC_WAIT_RESULT_TIMEOUT
    took = time.monotonic() - start
    # free-running: the kernel sleeps out the timeout; progress points: nothing but the host can change anything,
    # so it returns at once (well under the 3 s asked for, even on a loaded machine)
    assert took >= 0.29 if rt.os.system.free_running else took < 1.5


def test_timeout_zero_polls(rt):
    sig, _ = blocked_signal(rt)
    assert rt.wait([sig], timeout=0)[0] == k.KFD_IOC_WAIT_RESULT_TIMEOUT


def test_a_host_store_then_a_wait_completes(rt):
    sig, flag = blocked_signal(rt)
    flag.u32().value = 1
    assert rt.wait([sig], timeout=5000)[0] == k.KFD_IOC_WAIT_RESULT_COMPLETE


def test_deadlock_report_names_the_blocked_queue_and_none_while_work_can_run(rt):
    sig, flag = blocked_signal(rt)
    if rt.os.system.free_running:  # another thread (the GPU's, or the host's) may still release any wait
        assert rt.os.deadlock_report() is None
        flag.u32().value = 1
        assert rt.wait([sig], timeout=5000)[0] == k.KFD_IOC_WAIT_RESULT_COMPLETE
        return
    report = rt.os.deadlock_report()
    assert len(report) == 1 and "WAIT_REG_MEM" in report[0].packet and report[0].address == flag.va
    flag.u32().value = 1
    assert rt.wait([sig], timeout=5000)[0] == k.KFD_IOC_WAIT_RESULT_COMPLETE
    assert rt.wait([sig], timeout=0)[0] == k.KFD_IOC_WAIT_RESULT_TIMEOUT
    assert rt.os.deadlock_report() == []  # quiet, nothing blocked


def test_real_hardware_cannot_tell_a_deadlock():
    assert RealOS.deadlock_report is OSBoundary.deadlock_report
    assert OSBoundary.deadlock_report(RealOS()) is None


def test_the_runtime_still_reports_a_deadlock_at_once_at_progress_points():
    dev = open_device("sim")
    gate, done = dev.new_signal(0), dev.new_signal(0)
    dev.compute_queue().wait(gate, 1).signal(done, 1).submit()
    with pytest.raises(DeadlockError) as info:
        done.wait(1, timeout_ms=60_000)  # reported, not timed out
    assert "WAIT_REG_MEM" in str(info.value) and f"0x{gate.value_addr:x}" in str(info.value)
    dev.close()


def test_a_free_running_wait_the_host_could_still_release_times_out_as_on_hardware():
    dev = open_device("sim", free_running=True)
    gate, done = dev.new_signal(0), dev.new_signal(0)
    dev.compute_queue().wait(gate, 1).signal(done, 1).submit()
    with pytest.raises(DeviceTimeout) as info:
        done.wait(1, timeout_ms=200)
    assert "timed out" in str(info.value)
    gate.value = 1  # it was not a deadlock: the host releases it
    done.wait(1, timeout_ms=60_000)
    dev.close()


def test_a_wait_another_host_thread_is_waiting_beside_is_not_reported_at_once():
    system = EmulatedSystem()
    rt = Runtime(system.os)
    sig, flag = blocked_signal(rt)
    results = []
    other = threading.Thread(target=lambda: results.append(rt.wait([sig], timeout=10_000)[0]))
    other.start()
    try:
        assert rt.os.deadlock_report() is None  # the other thread could store the flag
        flag.u32().value = 1
    finally:
        other.join()
        system.close()
    assert results == [k.KFD_IOC_WAIT_RESULT_COMPLETE]  # it waited, and the store released it


def test_an_infinite_wait_on_a_quiet_machine_at_progress_points_is_a_deadlock():
    system = EmulatedSystem()
    rt = Runtime(system.os)
    sig, _ = blocked_signal(rt)
    with pytest.raises(DeadlockError, match="WAIT_EVENTS on events"):
        rt.wait([sig], timeout=k.KFD_EVENT_TIMEOUT_INFINITE)
    system.close()


def test_a_free_running_wait_wakes_when_another_host_thread_stores():
    import threading
    system = EmulatedSystem(free_running=True)
    rt = Runtime(system.os)
    sig, flag = blocked_signal(rt)
    timer = threading.Timer(0.05, lambda: setattr(ctypes.c_uint32.from_address(flag.va), "value", 1))
    timer.start()
    start = time.monotonic()
    assert rt.wait([sig], timeout=k.KFD_EVENT_TIMEOUT_INFINITE)[0] == k.KFD_IOC_WAIT_RESULT_COMPLETE
    assert time.monotonic() - start < 5
    timer.join(5)
    system.close()


@pytest.mark.parametrize("num_events", [1 << 17, (1 << 32) - 1])
def test_a_huge_num_events_is_enomem_before_anything_is_read_or_allocated(num_events):
    """kfd_wait_on_events kcallocs one waiter per event first: past the slab limit that is ENOMEM (issue 22:
    the emulator used to read and zero num_events * 8 bytes before any check). The pointer is never read."""
    system = EmulatedSystem()
    rt = Runtime(system.os)
    import tracemalloc
    tracemalloc.start()
    try:
        with pytest.raises(OSError) as info:
            rt.ioctl("WAIT_EVENTS", events_ptr=8, num_events=num_events, wait_for_all=0, timeout=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        system.close()
    assert info.value.errno == errno.ENOMEM
    assert peak < 1 << 20  # nothing of the size the count asks for was allocated


def test_a_num_events_within_the_limit_still_reads_the_array():
    system = EmulatedSystem()
    rt = Runtime(system.os)
    with pytest.raises(OSError) as info:  # a bad pointer for a modest count: the copy from user faults
        rt.ioctl("WAIT_EVENTS", events_ptr=8, num_events=4, wait_for_all=0, timeout=0)
    system.close()
    assert info.value.errno == errno.EFAULT
