"""Submission machinery: many submits, ring wrap-around, the timeline and its wrap, memory reuse."""
import numpy as np
import pytest


def test_ten_thousand_submits_complete_in_order(device):
    sig = device.new_signal(0)
    q = device.compute_queue
    for i in range(1, 10_001):
        q().signal(sig, i).submit()
    sig.wait(10_000)
    assert sig.value == 10_000


def test_copy_ring_wraps_around_many_times(device):
    src, dst = device.alloc(4096), device.alloc(4096)
    sig = device.new_signal(0)
    for i in range(1, 3001):  # ~3000 x 60 bytes: several trips around a 64 KiB ring
        src.view[:4] = np.frombuffer(np.uint32(i).tobytes(), np.uint8)
        device.copy_queue().copy(dst, src, 4).signal(sig, i).submit()
        sig.wait(i)
        assert int(dst.view[:4].view(np.uint32)[0]) == i


def test_synchronize_waits_for_the_timeline(device):
    buf = device.alloc(4096)
    sig, value = device.next_timeline()
    device.compute_queue().fill(buf, 0x01020304, 4096).signal(sig, value).submit()
    device.synchronize()
    assert sig.value >= value and (buf.view.view(np.uint32) == 0x01020304).all()


def test_timeline_wraps_to_the_shadow_signal(device):
    device.timeline_wrap = 5
    first = device.timeline_signal
    seen = []
    for _ in range(12):
        sig, value = device.next_timeline()
        device.compute_queue().signal(sig, value).submit()
        seen.append((sig is first, value))
    device.synchronize()
    assert max(v for _, v in seen) < 5
    assert {s for s, _ in seen} == {True, False}  # both signals were used
    assert device.timeline_signal.value == device.timeline_value - 1


@pytest.mark.no_sanitize  # the sanitizer never reuses a freed range on purpose
def test_freed_buffers_are_reused(device):
    a = device.alloc(10_000)
    va = a.va
    device.free(a)
    b = device.alloc(10_000)
    assert b.va == va


def test_double_free_is_an_error(device):
    a = device.alloc(4096)
    device.free(a)
    try:
        device.free(a)
    except ValueError as e:
        assert "double free" in str(e)
    else:
        raise AssertionError("double free accepted")


def test_queue_disassembles_its_packets(device):
    sig = device.new_signal(0)
    text = device.compute_queue().wait(sig, 1).signal(sig, 2).disassemble()
    assert "WAIT_REG_MEM" in text and "RELEASE_MEM" in text
    text = device.copy_queue().wait(sig, 1).copy(0x1000, 0x2000, 8).disassemble()
    assert "POLL_REGMEM" in text and "COPY_LINEAR" in text


def test_freed_memory_beyond_the_cache_goes_back_to_the_driver(device):
    device.cache_limit = 0
    bufs = [device.alloc(1 << 20) for _ in range(4)]
    for b in bufs:
        device.free(b)
    again = device.alloc(1 << 20)  # a fresh allocation still works after real frees
    again.view[:] = 7
    assert (again.view == 7).all()
