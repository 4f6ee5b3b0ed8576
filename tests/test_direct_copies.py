"""Device.copyin / copyout of DIRECT_COPY_MIN bytes or more go straight between the caller's pages and the device
(the pages registered as a USERPTR BO for the copy, then released): the bytes are the staged path's, at any host
alignment and device offset, nothing else is written, no BO or VA is left behind, and a driver that refuses the
registration falls back to staging with the same result."""
from __future__ import annotations

import numpy as np
import pytest

from hcqsim import kfd_uapi as K
from hcqsim.runtime import device as D
from hcqsim.runtime import open_device

SIZE = D.DIRECT_COPY_MIN + 4096 + 5  # a direct copy that is not a whole number of pages


@pytest.fixture
def dev():
    d = open_device("sim")
    yield d
    d.close()


def _userptr_allocs(dev, monkeypatch) -> list[int]:
    """Counts the USERPTR ALLOC ioctls the device makes (and the handles freed)."""
    seen = []
    ioctl = dev.process.ioctl

    def counting(request, args, *a, **kw):
        if request == K.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU and args.flags & K.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR:
            seen.append(args.mmap_offset)
        return ioctl(request, args, *a, **kw)

    monkeypatch.setattr(dev.process, "ioctl", counting)
    return seen


def _live_bos(dev) -> int:
    """Mappings in the GPU's page table (a USERPTR BO left mapped would add one)."""
    gpu = dev.os.system.gpus[dev.index]
    return len(gpu.memory.mappings())


@pytest.mark.parametrize("host_offset", [0, 1, 4095])
@pytest.mark.parametrize("device_offset", [0, 3])
def test_copyin_and_copyout_move_exactly_the_bytes(dev, monkeypatch, host_offset, device_offset):
    allocs = _userptr_allocs(dev, monkeypatch)
    rng = np.random.default_rng(host_offset + device_offset)
    backing = rng.integers(0, 256, SIZE + 3 * 4096, dtype=np.uint8)
    start = (-backing.ctypes.data) % 4096 + host_offset  # the data's address: host_offset past a page boundary
    data = backing[start:start + SIZE]
    assert data.ctypes.data % 4096 == host_offset
    buf = dev.alloc(SIZE + 16, host_visible=True)
    buf.view[:] = 0xAA
    warm = dev.new_signal(0)
    dev.copy_queue().signal(warm, 1).submit()  # the copy queue's own ring and pointers exist from here on
    warm.wait(1)
    mappings = _live_bos(dev)
    dev.copyin(buf, data, offset=device_offset)
    assert np.array_equal(buf.view[device_offset:device_offset + SIZE], data)
    assert (buf.view[:device_offset] == 0xAA).all() and (buf.view[device_offset + SIZE:] == 0xAA).all()
    out = np.full(SIZE + 3 * 4096, 0x55, np.uint8)
    start = (-out.ctypes.data) % 4096 + host_offset
    dest = out[start:start + SIZE]
    assert dev.copyout(buf, SIZE, offset=device_offset, out=dest) is dest
    assert np.array_equal(dest, data)
    assert (out[:start] == 0x55).all() and (out[start + SIZE:] == 0x55).all()  # nothing else written
    assert dev.copyout(buf, SIZE, offset=device_offset) == data.tobytes()  # a fresh bytes result, direct too
    assert len(allocs) == 3 and not dev._staging  # all three went direct; no staging buffer was made
    assert _live_bos(dev) == mappings  # every registration was undone


def test_a_refused_registration_falls_back_to_staging(dev, monkeypatch):
    ioctl = dev.process.ioctl
    refused = []

    def refusing(request, args, *a, **kw):
        if request == K.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU and args.flags & K.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR:
            refused.append(args.size)
            raise OSError(14, "EFAULT: pages the driver cannot pin")
        return ioctl(request, args, *a, **kw)

    monkeypatch.setattr(dev.process, "ioctl", refusing)
    data = np.random.default_rng(7).integers(0, 256, SIZE, dtype=np.uint8)
    buf = dev.alloc(SIZE, host_visible=False)
    dev.copyin(buf, data)
    assert dev.copyout(buf) == data.tobytes()
    assert len(refused) == 2 and dev._staging  # both tried direct, then staged


def test_small_copies_are_staged(dev, monkeypatch):
    allocs = _userptr_allocs(dev, monkeypatch)
    data = bytes(range(256)) * 16
    buf = dev.alloc(len(data), host_visible=False)
    dev.copyin(buf, data)
    assert dev.copyout(buf) == data and allocs == []


def test_copyin_from_read_only_bytes(dev):
    data = np.random.default_rng(3).integers(0, 256, SIZE, dtype=np.uint8).tobytes()  # an immutable bytes object
    buf = dev.alloc(SIZE, host_visible=False)
    dev.copyin(buf, data)
    assert dev.copyout(buf) == data
