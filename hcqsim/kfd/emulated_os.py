"""The emulated OS: the runtime's `OSBoundary` implemented over an `EmulatedSystem`.

System calls land where the kernel would send them: open/close keep fake file descriptors; ioctl goes to
the driver's table; mmap and munmap to the process's memory (and, for the KFD offsets, to the event page,
the doorbell slice and the HDP page); sysfs reads to the topology; the doorbell store to the queues.
Every entry holds the system lock, so a host with several threads (or the free-running GPU thread beside
it) never sees driver state half-updated.
"""
from __future__ import annotations

import ctypes
import errno
import os
import threading
from typing import TYPE_CHECKING

from .. import kfd_uapi as k
from ..boundary import KFD_PATH, MAP_ANONYMOUS, MAP_FIXED, OSBoundary
from ..errors import BlockedQueue
from ..memory import PAGE_SIZE
from .collector import COLLECTOR
from .drm import AmdgpuDrm
from .process import OpenFile

if TYPE_CHECKING:
    from .system import EmulatedSystem

FD_BASE = 1000  # fake file descriptors start here so they never collide with real small fds


class HostOrder:
    """`OSBoundary.host_order` of an emulated machine in report mode: the host's reads and writes of signals, as
    the runtime reports them, are acquires and releases of the host's clock (coherence.order). The host observing
    a value acquires the clock of the GPU write that left it; a value the host stores releases the host's clock to
    whoever observes it; the host's doorbells then order the work they publish after what the host knows."""

    def __init__(self, system: "EmulatedSystem"):
        self.system, self.order = system, system.order

    def observed(self, address: int) -> None:
        """The host read the (4- or 8-byte) value at `address` (a CPU address: the emulator maps GPU VA = host VA)."""
        with self.system.lock:
            self.order.host_acquire(address, ctypes.string_at(address & ~3, 4))

    def stored(self, address: int, size: int) -> None:
        """The host stored `size` bytes at `address`."""
        with self.system.lock:
            self.order.host_release(address, ctypes.string_at(address, size))


class EmulatedOS(OSBoundary):
    """The runtime's OS boundary over an EmulatedSystem: fake fds, the emulated driver, sysfs, mmap, doorbells."""

    emulated = True

    def __init__(self, system: "EmulatedSystem"):
        self.system = system
        self.files: dict[int, OpenFile] = {}
        self._next_fd = FD_BASE
        self._reported: dict[int, int] = {}  # GPU index -> faults already handed out by fault_details
        self.drm = AmdgpuDrm(system)  # the render nodes' DRM ioctls; its sysfs files join the topology's
        system.sysfs.tree.update(self.drm.sysfs_tree())
        # report mode: one happens-before clock set for the machine (coherence.order), shared by its GPUs, and the
        # runtime's host-side signal reads and writes as its edges (boundary.OSBoundary.host_order)
        models = [g.coherence for g in system.gpus if g.coherence is not None and g.coherence.hb]
        system.order = models[0].order if models else None
        for m in models:
            m.order = system.order
        self.host_order = HostOrder(system) if models else None

    # -- files -------------------------------------------------------------------------------------

    def open(self, path: str, flags: int = os.O_RDWR | os.O_CLOEXEC) -> int:
        with self.system.lock:
            return self._open(path)

    def _open(self, path: str) -> int:
        if path == KFD_PATH:
            f = OpenFile("kfd")
        else:
            f = next((OpenFile("render", i) for i in range(len(self.system.gpus))
                      if path == self.system.render_path(i)), None)
            if f is None:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        fd, self._next_fd = self._next_fd, self._next_fd + 1
        self.files[fd] = f
        return fd

    def close(self, fd: int) -> None:
        with self.system.lock:
            f = self.files.pop(fd, None)
        if f is None:
            raise OSError(errno.EBADF, f"close: fd {fd} is not open")

    def _file(self, fd: int, what: str) -> OpenFile:
        f = self.files.get(fd)
        if f is None:
            raise OSError(errno.EBADF, f"{what}: fd {fd} is not open")
        return f

    def ioctl(self, fd: int, request: int, arg) -> None:
        COLLECTOR.at_call()  # outside the lock: a finalizer may wait for the GPUs (kfd/collector.py)
        with self.system.lock:
            f = self._file(fd, "ioctl")
            if f.kind != "kfd":
                self.drm.ioctl(f.gpu, request, arg)
                return
            self.system.driver.ioctl(request, arg)

    # -- memory mappings ---------------------------------------------------------------------------

    def mmap(self, addr: int, length: int, prot: int, flags: int, fd: int = -1, offset: int = 0) -> int:
        COLLECTOR.at_call()
        with self.system.lock:
            return self._mmap(addr, length, prot, flags, fd, offset)

    def _mmap(self, addr: int, length: int, prot: int, flags: int, fd: int, offset: int) -> int:
        if length <= 0 or (flags & MAP_FIXED and addr % PAGE_SIZE):
            raise OSError(errno.EINVAL, f"mmap: bad length {length} or unaligned fixed address 0x{addr:x}")
        memory = self.system.driver.memory
        if flags & MAP_ANONYMOUS:
            return memory.mmap_anonymous(addr, length, prot, flags)
        f = self._file(fd, "mmap")
        if f.kind == "render":
            bo = memory.bo_at_offset(self.system.driver.devices[f.gpu], offset, length)
            va = self._at(bo.va, addr, flags, f"BO 0x{bo.handle:x}")
            memory.cpu_mapped(bo, length)
            return va
        return self._mmap_kfd(addr, length, flags, offset)

    @staticmethod
    def _at(va: int, addr: int, flags: int, what: str) -> int:
        """Memory the emulator has at `va` can be mapped there only (one page cannot have two addresses)."""
        if flags & MAP_FIXED and addr != va:
            raise OSError(errno.EINVAL, f"mmap: {what} lives at 0x{va:x}; emulator limitation: it cannot be mapped "
                                        f"a second time at 0x{addr:x} (map it at its own address)")
        return va

    def _mmap_kfd(self, addr: int, length: int, flags: int, offset: int) -> int:
        driver = self.system.driver
        mtype, gpu_id, _ = k.decode_mmap_offset(offset)
        dev = driver.device_by_id(gpu_id) if gpu_id else None
        if mtype == k.KFD_MMAP_TYPE_EVENTS:
            va = self._at(driver.events.page_to_map(length), addr, flags, "the event page")
            driver.events.page_mapped(length)
            return va
        if dev is None:
            raise OSError(errno.ENODEV, f"mmap: offset 0x{offset:x} names no GPU")
        if mtype == k.KFD_MMAP_TYPE_DOORBELL:
            if length != k.KFD_DOORBELL_SLICE_SIZE:
                raise OSError(errno.EINVAL, f"mmap: the doorbell slice is {k.KFD_DOORBELL_SLICE_SIZE:#x} bytes, "
                                            f"not {length:#x}")
            return self._at(driver.memory.doorbell_slice(dev), addr, flags, "the doorbell slice")
        if mtype == k.KFD_MMAP_TYPE_MMIO:
            if length != PAGE_SIZE:
                raise OSError(errno.EINVAL, f"mmap: the MMIO page is one page, not {length:#x} bytes")
            return self._at(driver.memory.mmio_page(dev), addr, flags, "the MMIO page")
        raise OSError(errno.EINVAL, "mmap: RESERVED_MEM offsets are not emulated")

    def munmap(self, addr: int, length: int) -> None:
        if addr % PAGE_SIZE or length <= 0:
            raise OSError(errno.EINVAL, f"munmap: bad range 0x{addr:x}+{length:#x}")
        COLLECTOR.at_call()
        with self.system.lock:
            self.system.driver.memory.munmap(addr, length)

    # -- sysfs -------------------------------------------------------------------------------------

    def read_text(self, path: str) -> str:
        return self.system.sysfs.read_text(path)

    def listdir(self, path: str) -> list[str]:
        return self.system.sysfs.listdir(path)

    def exists(self, path: str) -> bool:
        sysfs = self.system.sysfs
        p = sysfs.path(path)
        return sysfs.exists(p) or p == KFD_PATH or any(
            p == self.system.render_path(i) for i in range(len(self.system.gpus)))

    # -- doorbells and faults ----------------------------------------------------------------------

    def ring_doorbell(self, address: int, value: int) -> None:
        with self.system.lock:
            self.system.driver.queues.ring_doorbell(address, value)
        self.system.wake()

    def fault_details(self, gpu_id: int) -> list[str]:
        with self.system.lock:
            dev = self.system.driver.device_by_id(gpu_id)
            if dev is None:
                return []
            seen = self._reported.get(dev.index, 0)
            self._reported[dev.index] = len(dev.gpu.faults)
            return [str(f) for f in dev.gpu.faults[seen:]]

    def deadlock_report(self) -> list[BlockedQueue] | None:
        """Emulator only (see OSBoundary): the blocked queues (and spinning waves) once nothing but this host
        thread can change anything. Free-running, or with other host threads that might store to memory, the
        answer is None: a wait behaves as on hardware and times out."""
        system = self.system
        system.host_threads.add(threading.get_ident())
        if system.thread is not None or not system.single_host_thread():
            system.stuck()  # still delivers pending doorbells / advances a progress point
            return None
        return system.stuck()
