"""Runtime calls users get wrong: refused calls change nothing, memory operations keep to their buffers,
signals keep their slots and their 32 bits, and a fault is never forgotten (issue 8, items 3-6)."""
import pytest

from hcqsim.errors import DeviceFault, QueueError


# -- a refused call changes nothing (item 3) --------------------------------------------------------

def test_a_submission_too_big_for_the_ring_is_refused_and_the_device_keeps_working(device):
    sig = device.new_signal(0)
    q = device.compute_queue()
    for _ in range(20000):  # far more than the 64 KiB ring holds
        q.timestamp(sig)
    with pytest.raises(QueueError, match="does not fit"):
        q.submit()
    device.synchronize()  # before the fix: deadlock, the ring's seq had moved without its fence
    device.compute_queue().signal(sig, 1).submit()
    sig.wait(1)
    device.synchronize()


def test_a_refused_submission_on_the_device_timeline_does_not_wedge_synchronize(device):
    sig, value = device.next_timeline()
    q = device.copy_queue()
    for _ in range(20000):
        q.timestamp(sig)
    q.signal(sig, value)
    with pytest.raises(QueueError):
        q.submit()
    device.synchronize()  # before the fix: waited forever for a timeline value nothing will write
    buf = device.alloc(4096)
    device.copyin(buf, b"hello")
    assert device.copyout(buf, 5) == b"hello"


# -- bounds on every memory operation (item 4) ------------------------------------------------------

def test_copyin_at_a_negative_offset_is_refused_and_the_neighbour_keeps_its_data(device):
    first, second = device.alloc(4096), device.alloc(4096)
    device.copyin(first, bytes(range(256)) * 16)
    with pytest.raises(ValueError) as info:
        device.copyin(second, b"\xff" * 16, offset=-16)
    text = str(info.value)
    assert f"0x{second.va:x}" in text and "4096 bytes" in text and "[-16, -16 + 16)" in text
    assert device.label in text
    assert device.copyout(first) == bytes(range(256)) * 16


def test_copyout_past_the_end_of_a_buffer_is_refused(device):
    buf = device.alloc(4096)
    with pytest.raises(ValueError, match=r"range \[4000, 4000 \+ 200\) is outside .* \(4096 bytes\)"):
        device.copyout(buf, 200, offset=4000)


def test_queue_copy_longer_than_its_source_buffer_is_refused(device):
    src, dst = device.alloc(256), device.alloc(8192)
    with pytest.raises(ValueError, match="256 bytes"):
        device.copy_queue().copy(dst, src, 4096)
    with pytest.raises(ValueError, match="256 bytes"):
        device.compute_queue().copy(dst, src, 4096)


def test_queue_fill_with_a_negative_size_is_refused(device):
    buf = device.alloc(4096)
    with pytest.raises(ValueError, match="non-negative"):
        device.copy_queue().fill(buf, 0, -4)


def test_queue_fill_of_a_freed_buffer_is_refused(device):
    buf = device.alloc(4096)
    device.free(buf)
    with pytest.raises(ValueError, match="was freed"):
        device.copy_queue().fill(buf, 0, 4096)


def test_a_buffer_view_is_written_at_its_offset_and_keeps_its_own_bounds(device):
    buf = device.alloc(4096)
    device.copyin(buf, bytes(4096))
    view = buf.offset(1024, 64)
    assert (view.va, view.size) == (buf.va + 1024, 64)
    sig = device.new_signal(0)
    device.copy_queue().fill(view, 0x01010101, 64).signal(sig, 1).submit()
    sig.wait(1)
    data = device.copyout(buf)
    assert data[1024:1088] == b"\x01" * 64 and data[:1024] == bytes(1024) and data[1088:] == bytes(3008)
    with pytest.raises(ValueError, match="64 bytes"):
        device.copy_queue().fill(view, 0, 128)  # the parent has room; the view does not
    with pytest.raises(ValueError, match="64 bytes"):
        device.copyin(view, b"x" * 65)


def test_a_view_past_the_end_of_its_buffer_is_refused(device):
    buf = device.alloc(4096)
    with pytest.raises(ValueError, match="outside"):
        buf.offset(4000, 200)


def test_a_view_cannot_be_freed(device):
    buf = device.alloc(4096)
    with pytest.raises(ValueError, match="view"):
        device.free(buf.offset(0, 16))


def test_a_queue_refuses_a_buffer_of_another_device_without_a_peer_mapping(devices):
    a, b = devices
    other = b.alloc(4096)
    with pytest.raises(ValueError) as info:
        a.copy_queue().fill(other, 0, 4096)
    assert "not mapped on" in str(info.value) and a.label in str(info.value) and b.label in str(info.value)
    a.map_to(other, a)
    sig = a.new_signal(0)
    a.copy_queue().fill(other, 7, 4096).signal(sig, 1).submit()
    sig.wait(1)


def test_transfer_of_more_bytes_than_the_source_holds_is_refused(devices):
    a, b = devices
    src, dst = a.alloc(1024), b.alloc(8192)
    with pytest.raises(ValueError, match="1024 bytes"):
        b.transfer(dst, src, 4096)


# -- signals (item 5) -------------------------------------------------------------------------------

def test_freeing_a_signal_twice_is_an_error(device):
    sig = device.new_signal(0)
    device.free_signal(sig)
    with pytest.raises(ValueError, match="double free"):
        device.free_signal(sig)


@pytest.mark.no_sanitize  # with the sanitizer the late write is a VM fault (hwtests/test_sanitizer.py)
def test_a_freed_signal_slot_is_not_reused_while_a_queued_packet_may_write_it(device):
    gate, sig = device.new_signal(0), device.new_signal(0)
    device.compute_queue().wait(gate, 1).signal(sig, 7).submit()  # stalled: sig is still to be written
    device.free_signal(sig)
    fresh = [device.new_signal(0) for _ in range(600)]  # more than a page of slots
    assert sig.va not in {s.va for s in fresh}
    gate.value = 1
    device.synchronize()
    assert all(s.value == 0 for s in fresh)  # the late write landed in no live signal


def test_signal_values_outside_32_bits_are_refused_everywhere(device):
    with pytest.raises(ValueError, match="32 bits"):
        device.new_signal(1 << 32)
    sig = device.new_signal(0)
    with pytest.raises(ValueError, match="32 bits"):
        sig.value = -1
    with pytest.raises(ValueError, match="32 bits"):
        sig.wait(1 << 32)
    with pytest.raises(ValueError, match="32 bits"):
        device.compute_queue().signal(sig, 1 << 33)


def test_a_freed_signal_cannot_be_used(device):
    sig = device.new_signal(0)
    device.free_signal(sig)
    with pytest.raises(ValueError, match="freed"):
        device.copy_queue().signal(sig, 1)


# -- after a fault, say so (item 6) -----------------------------------------------------------------

def test_every_wait_after_a_fault_raises_device_fault_naming_the_faulted_queue(device):
    dst = device.alloc(4096)
    done = device.new_signal(0)
    device.copy_queue().copy(dst, 0x1000, 64).signal(done, 1).submit()
    with pytest.raises(DeviceFault) as first:
        done.wait(1)
    report = str(first.value)
    other = device.new_signal(0)
    other.value = 1
    for wait in (lambda: done.wait(1), lambda: other.wait(1), device.synchronize):
        with pytest.raises(DeviceFault) as later:
            wait()
        assert "0x1000" in str(later.value) and all(line in str(later.value) for line in report.splitlines()[1:])
    if device.os.emulated:  # the emulator's report names the engine queue
        assert "sdma queue" in report
