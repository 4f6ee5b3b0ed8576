"""Two devices: peer-mapped copies."""
import numpy as np


def test_transfer_copies_between_devices(devices):
    a, b = devices
    src = a.alloc(1 << 20)
    dst = b.alloc(1 << 20)
    src.view[:] = np.arange(1 << 20, dtype=np.uint32).astype(np.uint8)
    sig, value = a.transfer(dst, src, 1 << 20)
    sig.wait(value)
    assert np.array_equal(dst.view, src.view)


def test_devices_have_distinct_gpu_ids(devices):
    a, b = devices
    assert a.gpu_id != b.gpu_id and a.gpu_id and b.gpu_id


def test_device_waits_on_a_signal_of_another_device(devices):
    a, b = devices
    gate = a.new_signal(0)
    done = b.new_signal(0)
    a.map_to(gate, b)  # b's queue polls memory of a
    b.copy_queue().wait(gate, 1).signal(done, 1).submit()
    a.compute_queue().signal(gate, 1).submit()
    done.wait(1)
    assert done.value == 1
