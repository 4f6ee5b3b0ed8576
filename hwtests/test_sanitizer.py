"""Sanitizer mode (issue 8 item 7): freed memory and signals are really unmapped and their VA held back,
so a stale GPU access is a VM fault whose report names what was freed, its size and where."""
import inspect

import pytest

from hcqsim.errors import DeviceFault
from hcqsim.runtime import open_device


@pytest.fixture
def sanitized():
    dev = open_device("sim", sanitize=True)
    yield dev
    dev.close()


def test_a_stale_fill_of_a_freed_buffer_is_a_vm_fault_naming_the_buffer_and_where_it_was_freed(sanitized):
    dev = sanitized
    buf = dev.alloc(8192)
    stale = dev.copy_queue().fill(buf, 0x11111111, 8192)  # built while the buffer lived
    dev.free(buf)
    line = inspect.currentframe().f_lineno - 1
    stale.submit()
    with pytest.raises(DeviceFault) as info:
        dev.synchronize()
    text = str(info.value)
    assert f"Buffer(0x{buf.va:x}, 8192 B" in text and "freed" in text
    assert f"test_sanitizer.py:{line}" in text


def test_the_next_allocation_does_not_get_the_freed_address(sanitized):
    dev = sanitized
    old = dev.alloc(4096)
    va = old.va
    dev.free(old)
    assert all(dev.alloc(4096).va != va for _ in range(8))


def test_a_stale_fill_does_not_land_in_the_next_owner(sanitized):
    dev = sanitized
    buf = dev.alloc(4096)
    stale = dev.copy_queue().fill(buf, 0x22222222, 4096)
    dev.free(buf)
    mine = dev.alloc(4096)
    dev.copyin(mine, bytes(4096))
    stale.submit()
    with pytest.raises(DeviceFault):
        dev.synchronize()
    assert bytes(mine.view) == bytes(4096)


def test_a_gpu_write_to_a_freed_signal_is_a_vm_fault_naming_the_signal(sanitized):
    dev = sanitized
    sig = dev.new_signal(0)
    stale = dev.compute_queue().signal(sig, 1)
    va = sig.va
    dev.free_signal(sig)
    stale.submit()
    with pytest.raises(DeviceFault) as info:
        dev.synchronize()
    assert f"signal 0x{va:x}" in str(info.value) and "test_sanitizer.py" in str(info.value)


def test_poison_fills_new_device_memory():
    dev = open_device("sim", sanitize=True, poison=0xA5A5A5A5)
    try:
        assert dev.copyout(dev.alloc(4096, host_visible=False), 8) == b"\xa5" * 8
        assert bytes(dev.alloc(64).view[:4]) == b"\xa5" * 4
    finally:
        dev.close()


@pytest.mark.sim_only
def test_hcqsims_own_hwtests_run_sanitized_unless_no_sim_sanitize_is_given(request, device):
    assert device.sanitize == (request.config.getoption("hcqsim_sanitize") is not False)
