"""WAIT_EVENTS on an event another thread destroys while the wait sleeps: the kernel wakes the waiter and the
ioctl fails (kfd_wait_on_events: a destroyed event's waiter answers -EIO with KFD_IOC_WAIT_RESULT_FAIL), in
progress-point mode with two host threads."""
import ctypes
import errno
import threading
import time

import pytest

from hcqsim import kfd_uapi as k
from tests.test_kfd_driver import Runtime, system  # noqa: F401  (the fixture)


@pytest.fixture
def rt(system):  # noqa: F811
    return Runtime(system.os)


def _wait_args(ids, all_=False, timeout=5000):
    data = (k.EventData * len(ids))()
    for i, eid in enumerate(ids):
        data[i].event_id = eid
    return data, k.WaitEventsArgs(events_ptr=ctypes.addressof(data), num_events=len(ids), wait_for_all=int(all_),
                                  timeout=timeout)


@pytest.mark.parametrize("all_", [False, True])
def test_an_event_destroyed_during_a_wait_fails_the_wait_with_eio(rt, all_):
    gone, kept = rt.event(), rt.event()
    data, args = _wait_args([kept, gone], all_)
    outcome = {}

    def waiter():
        try:
            rt.os.ioctl(rt.kfd, k.AMDKFD_IOC_WAIT_EVENTS, args)
            outcome["returned"] = args.wait_result
        except OSError as e:
            outcome["errno"] = e.errno

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.2)  # the waiter is asleep on both events (nothing signals them)
    assert t.is_alive()
    rt.ioctl("DESTROY_EVENT", event_id=gone)
    t.join(10)
    assert not t.is_alive()
    assert outcome == {"errno": errno.EIO}
    assert args.wait_result == k.KFD_IOC_WAIT_RESULT_FAIL

