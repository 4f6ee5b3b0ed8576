"""A Device's host <-> device and device <-> device copies with its copy queue: staged through two host buffers in
chunks, or straight from the caller's own pages (registered as a USERPTR BO) from DIRECT_COPY_MIN bytes on.
`DeviceCopies` is a part of `Device` (runtime/device.py): it holds no state of its own."""
from __future__ import annotations

import numpy as np

from .. import kfd_uapi as K
from ..boundary import MAP_ANONYMOUS, MAP_NORESERVE, MAP_PRIVATE, PROT_NONE
from ..errors import DeadlockError, DeviceFault, DeviceTimeout
from .allocation import BASE_FLAGS, PAGE, UNCACHED_FLAGS, _page_align
from .buffer import Buffer
from .checks import expect
from .exclusive import exclusive
from .queues import chunks
from .signal import Signal

STAGING_CHUNK = 16 << 20
# copyin/copyout of at least this many bytes go straight between the caller's pages and the device (the pages
# registered as a USERPTR BO for the copy, as ROCr locks pageable memory): one copy instead of two through staging
DIRECT_COPY_MIN = 4 << 20
# how the caller's pages are registered: system memory snooped and uncached on the GPU, like the staging buffers
DIRECT_FLAGS = K.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | K.KFD_IOC_ALLOC_MEM_FLAGS_COHERENT | \
    K.KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED | BASE_FLAGS


class DeviceCopies:
    """copyin, copyout and transfer (a part of `Device`)."""

    def _staging_buffers(self) -> list[Buffer]:
        if not self._staging:
            self._staging = [self._alloc(STAGING_CHUNK, UNCACHED_FLAGS | BASE_FLAGS) for _ in range(2)]
        return self._staging

    def _direct_copy(self, device_va: int, host: np.ndarray, *, to_device: bool) -> bool:
        """Copy between the device address and the host array's own pages with the copy queue: the pages are
        registered as a USERPTR BO (GPU VA from a fresh reservation) and mapped on this GPU for the copy, then
        released. False, with nothing copied, when the driver will not register them (the caller stages)."""
        addr, n = host.ctypes.data, len(host)
        lo = addr & ~(PAGE - 1)
        size = _page_align(addr + n - lo)
        va = self.os.mmap(0, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)
        args = K.AllocMemoryOfGpuArgs(va_addr=va, size=size, gpu_id=self.gpu_id, flags=DIRECT_FLAGS, mmap_offset=lo)
        try:
            self.process.ioctl(K.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, args)
        except OSError:
            self.os.munmap(va, size)
            return False
        pages = Buffer(self, va, size, size, DIRECT_FLAGS, args.handle, args.mmap_offset, None, set())
        try:
            self._map(pages, [self.gpu_id])
            gpu_addr = va + addr - lo
            dst, src = (device_va, gpu_addr) if to_device else (gpu_addr, device_va)
            sig, value = self.next_timeline()
            self.copy_queue().copy(dst, src, n).signal(sig, value).submit()
            self.wait_value(sig, value, "copyin" if to_device else "copyout")
        finally:
            if pages.mapped_on:
                self._release(pages)
            else:  # the map failed: the BO is not in any page table
                self.process.ioctl(K.AMDKFD_IOC_FREE_MEMORY_OF_GPU, K.FreeMemoryOfGpuArgs(handle=pages.handle))
                self.os.munmap(va, size)
        return True

    @exclusive
    def copyin(self, buf: Buffer, data, offset: int = 0) -> None:
        """Host bytes -> device buffer with the copy queue: straight from the data's own pages from DIRECT_COPY_MIN
        bytes on (`_direct_copy`), else through host staging buffers, in chunks. Ends synchronised."""
        self._check_open()
        expect(buf, Buffer, "copyin: buf")
        try:
            src = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
        except TypeError:
            raise TypeError(f"copyin: data must be a bytes-like object (bytes, bytearray, numpy array...), got "
                            f"{type(data).__name__}") from None
        buf.check_range(offset, len(src), "copyin", on=self)
        if len(src) >= DIRECT_COPY_MIN and self._direct_copy(buf.va + offset, src, to_device=True):
            self.synchronize()  # as the staged path ends
            return
        stages = self._staging_buffers()
        inflight: list[tuple[Signal, int] | None] = [None, None]
        for i, (off, n) in enumerate(chunks(len(src), STAGING_CHUNK)):
            k = i % 2
            if inflight[k]:
                self.wait_value(*inflight[k], "staging buffer free")
            stages[k].view[:n] = src[off:off + n]
            sig, value = self.next_timeline()
            self.copy_queue().copy(buf.va + offset + off, stages[k].va, n).signal(sig, value).submit()
            inflight[k] = (sig, value)
        self.synchronize()

    @exclusive
    def copyout(self, buf: Buffer, nbytes: int | None = None, offset: int = 0, out=None):
        """Device buffer -> host with the copy queue (into the destination's own pages from DIRECT_COPY_MIN bytes on,
        else through the staging buffers). Returns bytes, or fills and returns `out` (any writable buffer of at
        least `nbytes`) when given."""
        self._check_open()
        expect(buf, Buffer, "copyout: buf")
        expect(offset, int, "copyout: offset")
        nbytes = buf.size - offset if nbytes is None else expect(nbytes, int, "copyout: nbytes")
        buf.check_range(offset, nbytes, "copyout", on=self)
        if out is None:
            dst = np.empty(nbytes, np.uint8)
        else:  # a writable buffer, checked before anything is copied
            try:
                view = memoryview(out).cast("B")
            except TypeError:
                raise TypeError(f"copyout: out must be a writable bytes-like object, got {type(out).__name__}") \
                    from None
            if view.readonly:
                raise TypeError(f"copyout: out ({type(out).__name__}) is read-only; pass a bytearray or a "
                                f"writable array")
            dst = np.frombuffer(view, np.uint8)
        if len(dst) < nbytes:
            raise ValueError(f"copyout of {nbytes} bytes into a buffer of {len(dst)}")
        if nbytes >= DIRECT_COPY_MIN and self._direct_copy(buf.va + offset, dst[:nbytes], to_device=False):
            return dst.tobytes() if out is None else out
        stage = self._staging_buffers()[0]
        for off, n in chunks(nbytes, STAGING_CHUNK):
            sig, value = self.next_timeline()
            self.copy_queue().copy(stage.va, buf.va + offset + off, n).signal(sig, value).submit()
            self.wait_value(sig, value, "copyout chunk")
            dst[off:off + n] = stage.view[:n]
        return dst.tobytes() if out is None else out

    @exclusive
    def transfer(self, dst: Buffer, src: Buffer, nbytes: int) -> tuple[Signal, int]:
        """Copy between devices with this device's SDMA engine (dst is peer-mapped here first).
        Returns the timeline (signal, value) that marks completion."""
        self._check_open()
        expect(dst, Buffer, "transfer: dst")
        expect(src, Buffer, "transfer: src")
        expect(nbytes, int, "transfer: nbytes")
        src.check_range(0, nbytes, f"transfer source on {self.label}")  # before anything is mapped
        dst.check_range(0, nbytes, f"transfer destination on {self.label}")
        self.map_to(dst, self)
        self.map_to(src, self)
        sig, value = self.next_timeline()
        self.copy_queue().copy(dst, src, nbytes).signal(sig, value).submit()
        return sig, value


# pytest leaves this module's frames out of a failed test's report when the error is the runtime's own wait
# outcome (a deadlock, a device fault, a timeout), as for runtime/device.py.
def __tracebackhide__(excinfo) -> bool:
    return excinfo is not None and excinfo.errisinstance((DeadlockError, DeviceFault, DeviceTimeout))
