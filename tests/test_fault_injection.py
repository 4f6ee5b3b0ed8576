"""Fault injection drives a runtime's error paths (issue 22 item 2): each injected failure reaches the process the
way the kernel reports the real one, and the hcqsim runtime turns it into the error its users see."""
import ctypes
import os
import subprocess
import sys

import pytest

from hcqsim import kfd_uapi as k
from hcqsim import sdma
from hcqsim.errors import DeadlockError, DeviceFault
from hcqsim.kfd import EmulatedSystem
from hcqsim.kfd.fault_injection import InjectionError
from hcqsim.runtime import open_device

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def dev():
    d = open_device("sim")
    yield d
    d.close()


def injector(device):
    return device._owner.system.inject


def test_an_injected_vm_fault_is_reported_through_the_memory_exception_event_with_its_page(dev):
    buf = dev.alloc(3 * 4096)
    injector(dev).vm_fault(buf.va + 4096 + 20)  # the middle page only
    sig = dev.new_signal(0)
    dev.copy_queue().fill(buf.offset(0, 4096), 0x11111111, 4096).signal(sig, 1).submit()
    sig.wait(1)  # the page before is still mapped
    dev.copy_queue().fill(buf.offset(4096, 8192), 0x22222222, 8192).signal(sig, 2).submit()
    with pytest.raises(DeviceFault) as info:
        sig.wait(2)
    text = str(info.value)
    assert f"memory exception at VA 0x{buf.va + 4096:x} (NotPresent)" in text  # the page, as the kernel reports
    assert "VM fault" in text and "sdma queue" in text
    assert any(line.startswith("fired vm_fault") for line in injector(dev).log)


def test_an_injected_ecc_error_is_reported_as_consumed_poison_and_stops_that_queue(dev):
    buf = dev.alloc(8192)
    injector(dev).ecc_error(buf.va + 100)
    sig = dev.new_signal(0)
    dev.copy_queue().fill(buf.offset(4096, 4096), 7, 4096).signal(sig, 1).submit()  # any page of the BO
    with pytest.raises(DeviceFault) as info:
        sig.wait(1)
    text = str(info.value)
    # kfd_signal_poison_consumed_event: memory exception va 0 (imprecise), HW exception reset_cause ECC
    assert "memory exception at VA 0x0" in text and "hardware exception (reset type 0, cause 1)" in text
    assert "ECC error (poison consumed, injected)" in text


def test_an_injected_gpu_reset_stops_every_queue_and_fires_the_hw_exception_event(dev):
    gate, sig = dev.new_signal(0), dev.new_signal(0)
    dev.compute_queue().wait(gate, 1).signal(sig, 1).submit()  # stalled on the gate
    dev.copy_queue().wait(gate, 1).signal(sig, 2).submit()
    injector(dev).gpu_reset(cause="hang")
    with pytest.raises(DeviceFault) as info:
        sig.wait(1)
    text = str(info.value)
    assert "hardware exception (reset type 0, cause 0)" in text  # WHOLE_GPU_RESET, GPU_HANG
    assert text.count("gpu reset") == 2  # both queues stopped by it


def test_an_injected_queue_hang_is_a_deadlock_naming_the_hung_queue(dev):
    sig = dev.new_signal(0)
    dev.copy_queue().signal(sig, 1).submit()
    sig.wait(1)
    ring = dev._rings[("copy", 0)]
    injector(dev).hang_queue(ring.queue_id)
    dev.copy_queue().signal(sig, 2).submit()
    with pytest.raises(DeadlockError) as info:
        sig.wait(2)
    assert "hung" in str(info.value)
    assert sig.value == 1


def test_a_lost_completion_interrupt_leaves_wait_events_asleep_but_the_memory_written():
    from test_kfd_driver import Runtime
    system = EmulatedSystem(1)
    try:
        rt = Runtime(system.os)
        eid = rt.event_page()
        system.inject.lose_interrupts(count=1)
        q = rt.sdma_queue()
        slot = rt.events.va + 8 * eid.event_slot_index
        trap = sdma.fence(slot, eid.event_id, "sdma6") + sdma.trap(eid.event_id, "sdma6")
        rt.submit(q, trap)
        result, _ = rt.wait([eid.event_id], timeout=0)
        assert result == k.KFD_IOC_WAIT_RESULT_TIMEOUT  # the interrupt never came...
        assert ctypes.c_uint32.from_address(slot).value == eid.event_id  # ...though the mailbox was written
        rt.submit(q, trap)  # the next one is delivered again
        result, _ = rt.wait([eid.event_id], timeout=0)
        assert result == k.KFD_IOC_WAIT_RESULT_COMPLETE
        assert [line.split(":")[0] for line in system.inject.log if line.startswith("fired")] == ["fired lost interrupt"]
    finally:
        system.close()


def test_the_runtime_survives_lost_interrupts_because_it_rereads_its_signals(dev):
    injector(dev).lose_interrupts(count=1000)
    buf, sig = dev.alloc(4096), dev.new_signal(0)
    for i in range(1, 6):
        dev.copy_queue().fill(buf, i, 4096).signal(sig, i).submit()
        sig.wait(i)
    assert dev.copyout(buf, 4) == (5).to_bytes(4, "little")


def test_lost_interrupt_rates_are_seeded():
    def drops(seed):
        system = EmulatedSystem(1, seed=seed)
        try:
            system.inject.lose_interrupts(rate=0.5)
            from test_kfd_driver import Runtime
            rt = Runtime(system.os)
            e = rt.event_page()
            q = rt.sdma_queue()
            for _ in range(24):
                rt.submit(q, sdma.trap(e.event_id, "sdma6"))
            return [line for line in system.inject.log if line.startswith("fired")]
        finally:
            system.close()
    first, again, other = drops(1), drops(1), drops(2)
    assert first == again and first != other and 0 < len(first) < 24


def test_the_environment_plan_applies_to_every_new_system():
    probe = open_device("sim")
    va = probe.alloc(4096).va  # the same sequence gives the same address in the next system
    probe.close()
    code = f"""
from hcqsim.runtime import open_device
from hcqsim.errors import DeviceFault
dev = open_device("sim")
buf, sig = dev.alloc(4096), dev.new_signal(0)
assert buf.va == {va}
dev.copy_queue().fill(buf, 1, 4096).signal(sig, 1).submit()
try:
    sig.wait(1)
    print("no fault")
except DeviceFault as e:
    print("fault", "0x{va:x}" in str(e), dev._owner.system.inject.describe())
"""
    env = dict(os.environ, PYTHONPATH=ROOT, HCQSIM_INJECT=f"vm_fault@0x{va:x}", HCQSIM_INJECT_SEED="3")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.split() == ["fault", "True", "fault", "injection", f"vm_fault@0x{va:x},", "seed", "3,",
                                  "1", "fired"], out.stderr


def test_the_pytest_header_shows_the_injection_plan(monkeypatch):
    from hcqsim import pytest_plugin as plugin

    class Config:  # no hcqsim option set: only the injection line
        def getoption(self, dest):
            return plugin.DEFAULTS[dest]
    assert plugin.pytest_report_header(Config()) is None
    monkeypatch.setenv("HCQSIM_INJECT", "lost_irq=2")
    monkeypatch.setenv("HCQSIM_INJECT_SEED", "9")
    assert plugin.pytest_report_header(Config()) == ["hcqsim: fault injection HCQSIM_INJECT='lost_irq=2', seed 9"]


def test_a_bad_plan_is_refused_naming_the_forms(monkeypatch):
    monkeypatch.setenv("HCQSIM_INJECT", "explode@now")
    with pytest.raises(InjectionError, match="vm_fault@ADDR"):
        EmulatedSystem(1)
