"""Copies and fills on both engines, staged host transfers."""
import numpy as np
import pytest

SIZES = [1, 3, 4, 255, 4096, 65537, (4 << 20) + 5, (9 << 20) + 3]


def _roundtrip(device, engine, size, src_off, dst_off):
    rng = np.random.default_rng(size)
    src = device.alloc(size + src_off + 16)
    dst = device.alloc(size + dst_off + 16)
    payload = rng.integers(0, 256, size, dtype=np.uint8)
    src.view[src_off:src_off + size] = payload
    dst.view[:] = 0xAA
    done = device.new_signal(0)
    getattr(device, engine)().copy(dst.va + dst_off, src.va + src_off, size).signal(done, 1).submit()
    done.wait(1)
    assert np.array_equal(dst.view[dst_off:dst_off + size], payload)
    assert (dst.view[:dst_off] == 0xAA).all() and (dst.view[dst_off + size:] == 0xAA).all()


@pytest.mark.parametrize("size", SIZES)
def test_copy_queue_copies_any_size_at_unaligned_offsets(device, size):
    _roundtrip(device, "copy_queue", size, src_off=3, dst_off=5)


@pytest.mark.parametrize("size", [1, 7, 4096, 1 << 20])
def test_compute_queue_copies_with_dma_data(device, size):
    _roundtrip(device, "compute_queue", size, src_off=1, dst_off=2)


def test_copy_larger_than_the_packet_limit_is_split(device):
    q = device.copy_queue().copy(0x10000, 0x20000, 3 * device.copy_max_bytes + 1)
    assert len(q) == 4


def test_copy_of_64_mib(device):
    _roundtrip(device, "copy_queue", 64 << 20, src_off=7, dst_off=1)


@pytest.mark.parametrize("engine", ["compute_queue", "copy_queue"])
def test_fill_writes_the_pattern_and_nothing_else(device, engine):
    buf = device.alloc(8192)
    buf.view[:] = 0
    done = device.new_signal(0)
    getattr(device, engine)().fill(buf.va + 64, 0x11223344, 4096).signal(done, 1).submit()
    done.wait(1)
    words = buf.view.view(np.uint32)
    assert (words[16:16 + 1024] == 0x11223344).all()
    assert (words[:16] == 0).all() and (words[16 + 1024:] == 0).all()


def test_fill_rejects_unaligned_ranges(device):
    with pytest.raises(ValueError, match="multiples of 4"):
        device.copy_queue().fill(0x1001, 0, 8)


@pytest.mark.parametrize("size", [1, 4097, 5 << 20])
def test_copyin_then_copyout_round_trips(device, size):
    data = np.random.default_rng(1).integers(0, 256, size, dtype=np.uint8).tobytes()
    buf = device.alloc(size, host_visible=False)
    device.copyin(buf, data)
    assert device.copyout(buf) == data


def test_copyin_at_an_offset_leaves_the_rest(device):
    buf = device.alloc(64)
    buf.view[:] = 1
    device.copyin(buf, b"\x07" * 8, offset=10)
    assert device.copyout(buf, 20) == b"\x01" * 10 + b"\x07" * 8 + b"\x01" * 2


def test_copy_waits_for_compute_by_signal(device):
    src, dst = device.alloc(4096), device.alloc(4096)
    gate, done = device.new_signal(0), device.new_signal(0)
    device.copy_queue().wait(gate, 1).copy(dst, src, 4096).signal(done, 1).submit()
    device.compute_queue().fill(src, 0x5A5A5A5A, 4096).signal(gate, 1).submit()
    done.wait(1)
    assert (dst.view == 0x5A).all()
