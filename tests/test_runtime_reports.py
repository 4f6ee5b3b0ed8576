"""Failure reports that reach a runtime user name the user's objects, not raw addresses (issue 15 item 5).

A wait that ends in DeadlockError / DeviceFault / DeviceTimeout keeps its report and its attributes and gains a
section, "where these addresses are": each address that falls in a live signal, buffer or kernel is named with
the line that created it (runtime/names.py). An address in no object is said to be in none, with the nearest
buffer named as *not* containing it; nothing is attributed to an object that does not hold the address.
"""
import inspect
import re

import pytest

from hcqsim.compiler import compile_llvm
from hcqsim.errors import DeadlockError, DeviceFault
from hcqsim.runtime import open_device
from hcqsim.runtime.names import SECTION

HERE = "test_runtime_reports.py"
# two kernels in one code object: a report must name the one that ran, at its own PC
TWO_KERNELS = """
define amdgpu_kernel void @first(ptr addrspace(1) %g) {
  store i32 1, ptr addrspace(1) %g
  ret void
}
define amdgpu_kernel void @second(ptr addrspace(1) %g) {
  %p = getelementptr i32, ptr addrspace(1) %g, i32 3
  store i32 2, ptr addrspace(1) %p
  ret void
}
"""


def line_below() -> int:
    """The line after the caller's: where the object under test is created."""
    return inspect.currentframe().f_back.f_lineno + 1


def section_of(error: BaseException) -> dict[int, str]:
    """The report's address section as {address: what}; {} when it has none."""
    text = str(error)
    if SECTION not in text:
        return {}
    lines = text.split(SECTION, 1)[1].strip("\n").splitlines()
    return {int(m.group(1), 16): m.group(2) for m in (re.fullmatch(r"  0x([0-9a-f]+): (.*)", l) for l in lines)}


@pytest.fixture
def device():
    dev = open_device("sim", target="gfx1100")
    yield dev
    dev.close()


def load(device, kernel: str):
    return device.load_program(compile_llvm(TWO_KERNELS, device.target, 2), kernel)


def run(device, program, address: int) -> None:
    done = device.new_signal(0)
    device.compute_queue().exec(program, [address], 1, 1).signal(done, 1).submit()
    done.wait(1)


def fault_in_kernel(device, program, address: int) -> DeviceFault:
    with pytest.raises(DeviceFault) as info:
        run(device, program, address)
    return info.value


def test_a_deadlock_on_a_signal_nobody_signals_names_that_signal_and_the_line_that_created_it(device):
    device.new_signal(0, name="bystander")  # live, but not in the report: must not be named
    line = line_below()
    ready = device.new_signal(0, name="ready")
    device.compute_queue().wait(ready, 5).submit()
    with pytest.raises(DeadlockError) as info:
        ready.wait(1)
    e = info.value
    assert str(e).startswith(f"deadlock: waiting for signal 0x{ready.va:x} >= 1")  # the original text first
    assert e.blocked[0].address == ready.value_addr and e.waiting_for.startswith("signal 0x")  # attributes kept
    assert section_of(e) == {ready.va: f"signal 'ready' #{ready.number} (created at {HERE}:{line})"}


def test_an_unnamed_signal_is_named_by_its_number(device):
    line = line_below()
    sig = device.new_signal(0)
    device.compute_queue().wait(sig, 2).submit()
    with pytest.raises(DeadlockError) as info:
        sig.wait(2)
    assert section_of(info.value) == {sig.va: f"signal #{sig.number} (created at {HERE}:{line})"}


def test_a_vm_fault_in_a_kernel_names_the_kernels_symbol_and_pc(device):
    load(device, "first")  # loaded first: its code sits below `second`'s
    e = fault_in_kernel(device, load(device, "second"), 0x1234000 - 12)  # `second` stores at +12
    original = "\n".join(e.faults)
    assert SECTION not in original  # DeviceFault.faults is the driver's report, unchanged
    assert str(e).startswith(f"device fault:\n{original}\n{SECTION}\n")  # the report as raised, then the section
    entry, pc = (int(x, 16) for x in re.search(r"kernel at 0x([0-9a-f]+), PC \+0x([0-9a-f]+)", original).groups())
    names = section_of(e)
    assert names[entry + pc].startswith(f"kernel second +0x{pc:x} (program loaded at {HERE}:")
    assert names[0x1234000] == "in no live buffer, signal or kernel of this process"  # far from everything
    assert len(names) == 2  # header dwords, masks, ring offsets are not dressed up as places


def test_a_fault_just_past_a_buffers_end_names_it_as_the_nearest_not_as_the_owner(device):
    program, scratch = load(device, "first"), device.alloc(64)
    run(device, program, scratch.va)  # rings, kernargs, signal pages and code exist before `near`: none above it
    line = line_below()
    near = device.alloc(4096, name="near")
    e = fault_in_kernel(device, program, near.va + 4096 + 0x40)
    what = section_of(e)[near.va + 4096 + 0x40]
    assert what == (f"in no live buffer, signal or kernel of this process; nearest: 0x40 bytes past the end of "
                    f"buffer 'near' #{near.number} (4096 bytes, allocated at {HERE}:{line})")


def test_a_fault_in_a_freed_buffer_names_it_as_freed_never_as_live(device):
    dev = open_device("sim", target="gfx1100", sanitize=True)
    try:
        line = line_below()
        gone = dev.alloc(256, name="gone")
        number, va = gone.number, gone.va
        dev.free(gone)
        fresh = dev.alloc(256, name="fresh")  # live memory allocated since: must not take the blame
        e = fault_in_kernel(dev, load(dev, "first"), va)
    finally:
        dev.close()
    what = section_of(e)[va]
    assert what.startswith(f"freed memory (sanitizer): Buffer(0x{va:x}, 256 B, ")
    assert f"(buffer 'gone' #{number}, allocated at {HERE}:{line}), freed at " in what
    assert f"{HERE}:{line + 2} in test_a_fault_in_a_freed" in what  # the free() line
    assert "fresh" not in str(e)
    assert fresh.va != va


def test_a_wait_nothing_was_queued_for_still_names_the_awaited_signal(device):
    """No queue is blocked, so the report's only address is the one in the awaited `what`."""
    line = line_below()
    sig = device.new_signal(0)
    with pytest.raises(DeadlockError) as info:
        sig.wait(1)
    assert "no queue is blocked" in str(info.value)
    assert section_of(info.value) == {sig.va: f"signal #{sig.number} (created at {HERE}:{line})"}
