"""Errors that must surface as reports, never hangs: VM faults and unsatisfiable waits."""
import time

import pytest

from hcqsim.errors import DeadlockError, DeviceFault, DeviceTimeout


def test_copy_from_an_unmapped_address_raises_device_fault(device):
    dst = device.alloc(4096)
    done = device.new_signal(0)
    device.copy_queue().copy(dst, 0x1000, 64).signal(done, 1).submit()
    with pytest.raises(DeviceFault) as info:
        done.wait(1, timeout_ms=2000)
    assert "0x1000" in str(info.value)


def test_fault_is_reported_on_the_next_call(device):
    device.compute_queue().copy(0x2000, 0x1000, 8).submit()
    # A GPU beside the host (hardware, or the free-running emulator) faults some time after the submit: the
    # first call after that reports it. At progress points the doorbell already ran the copy.
    deadline = time.monotonic() + 5
    with pytest.raises(DeviceFault):
        while time.monotonic() < deadline:
            device.alloc(4096)


@pytest.mark.sim_only
def test_wait_nobody_satisfies_reports_a_deadlock_on_sim(device):
    gate, done = device.new_signal(0), device.new_signal(0)
    device.compute_queue().wait(gate, 1).signal(done, 1).submit()
    if getattr(getattr(device.os, "system", None), "free_running", False):
        # free-running, another thread could still store the gate: the wait times out, as on hardware
        with pytest.raises(DeviceTimeout) as info:
            done.wait(1, timeout_ms=300)
    else:
        with pytest.raises(DeadlockError) as info:
            done.wait(1)
    text = str(info.value)
    assert "WAIT_REG_MEM" in text and f"0x{gate.value_addr:x}" in text


@pytest.mark.hw_only
def test_wait_nobody_satisfies_times_out_on_hardware(device):
    gate, done = device.new_signal(0), device.new_signal(0)
    device.compute_queue().wait(gate, 1).signal(done, 1).submit()
    with pytest.raises(DeviceTimeout) as info:
        done.wait(1, timeout_ms=500)
    assert "rptr" in str(info.value)
    gate.value = 1  # release the queue so the device stays usable
    done.wait(1)
