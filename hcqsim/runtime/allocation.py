"""A Device's memory: KFD allocations mapped for the CPU and the GPU, the free cache, the sanitizer's quarantine and
poison, peer mappings. `DeviceMemory` is a part of `Device` (runtime/device.py): it holds no state of its own,
`Device.__init__` sets what these methods use."""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

import numpy as np

from .. import kfd_uapi as K
from ..boundary import (MAP_ANONYMOUS, MAP_FIXED, MAP_NORESERVE, MAP_PRIVATE, MAP_SHARED, PROT_NONE, PROT_READ,
                        PROT_WRITE)
from ..errors import DeadlockError, DeviceFault, DeviceTimeout
from .buffer import Buffer
from .checks import caller_location, expect
from .exclusive import exclusive
from .names import buffer_label, creation_site
from .signal import Signal

if TYPE_CHECKING:
    from .device import Device

PAGE = 4096
BASE_FLAGS = K.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | K.KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE | \
    K.KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE
UNCACHED_FLAGS = K.KFD_IOC_ALLOC_MEM_FLAGS_GTT | K.KFD_IOC_ALLOC_MEM_FLAGS_COHERENT | \
    K.KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED
QUARANTINE_BYTES = 64 << 30  # sanitizer: freed VA held back (reserved, unmapped) up to this much...
QUARANTINE_COUNT = 16384  # ...and this many ranges, oldest returned first
DEFAULT_POISON = 0xDEADBEEF


def _page_align(n: int) -> int:
    return (n + PAGE - 1) & ~(PAGE - 1)


class DeviceMemory:
    """Allocation, free, release and peer mapping of device memory (a part of `Device`)."""

    def _alloc(self, size: int, flags: int, *, cpu_map: bool = True) -> Buffer:
        alloc_size = _page_align(max(size, 1))
        va = self.os.mmap(0, alloc_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)
        args = K.AllocMemoryOfGpuArgs(va_addr=va, size=alloc_size, gpu_id=self.gpu_id, flags=flags)
        try:
            self.process.ioctl(K.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, args)
        except OSError:
            self.os.munmap(va, alloc_size)
            raise
        buf = Buffer(self, va, size, alloc_size, flags, args.handle, args.mmap_offset, None, set())
        self._map(buf, [self.gpu_id])
        if cpu_map:
            self.os.mmap(va, alloc_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, self.drm_fd, args.mmap_offset)
            buf.view = np.frombuffer((ctypes.c_uint8 * size).from_address(va), dtype=np.uint8)
        self._buffers[va] = buf
        return buf

    def _map(self, buf: Buffer, gpu_ids: list[int]) -> None:
        ids = (ctypes.c_uint32 * len(gpu_ids))(*gpu_ids)
        self.process.ioctl(K.AMDKFD_IOC_MAP_MEMORY_TO_GPU, K.MapMemoryToGpuArgs(
            handle=buf.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=len(gpu_ids)))
        buf.mapped_on.update(gpu_ids)

    @exclusive
    def alloc(self, nbytes: int, *, host_visible: bool = True, uncached: bool = False,
              name: str | None = None) -> Buffer:
        """Device memory (VRAM, +PUBLIC when `host_visible`) or, `uncached`, coherent system memory (GTT).
        Freed buffers of the same size and kind are reused (LRU). `name` (and the caller's line, recorded
        here) is how failure reports name addresses inside it."""
        self._check_faults()
        expect(nbytes, int, "alloc: nbytes")
        if name is not None:
            expect(name, str, "alloc: name")
        buf = self._alloc_memory(nbytes, host_visible, uncached)
        buf.name, buf.allocated_at, buf.number = name, creation_site(), self._next_number()
        return buf

    def _next_number(self) -> int:
        self._object_number += 1
        return self._object_number

    def _alloc_memory(self, nbytes: int, host_visible: bool, uncached: bool) -> Buffer:
        if nbytes <= 0:
            raise ValueError(f"allocation size must be a positive integer, got {nbytes!r} (on {self.label})")
        if uncached:
            flags = UNCACHED_FLAGS | BASE_FLAGS
        else:
            flags = K.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | BASE_FLAGS | (K.KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC if host_visible
                                                                  else 0)
        key = (_page_align(nbytes), flags)
        cached = self._free_cache.get(key)
        if cached:
            old = cached.pop()
            if not cached:
                del self._free_cache[key]
            self._cached_bytes -= old.alloc_size
            # a new Buffer object: the freed one stays freed, so a stale reference is refused, not aliased
            view = None if old.view is None else np.frombuffer((ctypes.c_uint8 * nbytes).from_address(old.va),
                                                               dtype=np.uint8)
            buf = Buffer(self, old.va, nbytes, old.alloc_size, old.flags, old.handle, old.mmap_offset, view,
                         old.mapped_on)
            self._buffers[buf.va] = buf
            return buf
        buf = self._alloc(nbytes, flags, cpu_map=uncached or host_visible)
        if self.poison is not None:
            self._poison(buf)
        return buf

    def _poison(self, buf: Buffer) -> None:
        """Fill fresh memory with the poison pattern, so reads of memory nobody wrote show."""
        if buf.view is not None:
            whole = np.frombuffer((ctypes.c_uint8 * buf.alloc_size).from_address(buf.va), dtype=np.uint32)
            whole[:] = self.poison
            return
        sig, value = self.next_timeline()
        self.copy_queue().fill(buf.va, self.poison, buf.alloc_size).signal(sig, value).submit()
        self.wait_value(sig, value, f"poison fill of {buf!r}")

    @exclusive
    def free(self, buf: Buffer) -> None:
        """Return a buffer: it is kept for reuse (LRU) up to `cache_limit` bytes, then released. With the
        sanitizer it is released at once and its VA held back, so later GPU use of it is a VM fault."""
        self._check_open()
        expect(buf, Buffer, "free: buf")
        if buf.root is not None:
            raise ValueError(f"free of {buf!r}: a view is not an allocation; free the buffer it is part of")
        if buf.device is not self:
            raise ValueError(f"free of {buf!r} on {self.label}: it was allocated on {buf.device.label}")
        if buf.freed_at is not None:
            raise ValueError(f"double free of {buf!r} on {self.label}: already freed ({buf.freed_at})")
        if self._buffers.get(buf.va) is not buf:
            raise ValueError(f"free of {buf!r}: not a live allocation of {self.label}")
        del self._buffers[buf.va]
        buf.freed_at = f"freed at {caller_location()}"
        view, buf.view = buf.view, None  # the freed object no longer reaches the memory
        if self.sanitize:
            self._release(buf, quarantine=f"{buf!r} ({buffer_label(buf)}, allocated at {buf.allocated_at})")
            return
        cached = Buffer(self, buf.va, buf.size, buf.alloc_size, buf.flags, buf.handle, buf.mmap_offset, view,
                        buf.mapped_on)
        key = (cached.alloc_size, cached.flags)
        self._free_cache.setdefault(key, []).append(cached)
        self._free_cache.move_to_end(key)
        self._cached_bytes += cached.alloc_size
        while self._cached_bytes > self.cache_limit:
            _, bufs = self._free_cache.popitem(last=False)
            for old in bufs:
                self._cached_bytes -= old.alloc_size
                self._release(old)

    @exclusive
    def unmap_peers(self, buf: Buffer) -> None:
        """Undo `map_to` of an allocation of this device: it stays mapped on this device's GPU only."""
        self._check_open()
        expect(buf, Buffer, "unmap_peers: buf")
        root = buf.allocation
        if root.device is not self:
            raise ValueError(f"unmap_peers of {buf!r} on {self.label}: it was allocated on {root.device.label}")
        peers = sorted(root.mapped_on - {self.gpu_id})
        if not peers:
            return
        arr = (ctypes.c_uint32 * len(peers))(*peers)
        self.process.ioctl(K.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, K.UnmapMemoryFromGpuArgs(
            handle=root.handle, device_ids_array_ptr=ctypes.addressof(arr), n_devices=len(peers)))
        root.mapped_on.difference_update(peers)

    def _release(self, buf: Buffer, quarantine: str | None = None) -> None:
        """Unmap from every GPU first: the driver refuses to free a BO that is still mapped (EBUSY).
        `quarantine` (the sanitizer; what the memory was): keep the VA reserved but inaccessible for a while,
        so nothing new lands there and a stale GPU access faults; remember it for the fault report."""
        ids = sorted(buf.mapped_on)
        arr = (ctypes.c_uint32 * len(ids))(*ids)
        self.process.ioctl(K.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, K.UnmapMemoryFromGpuArgs(
            handle=buf.handle, device_ids_array_ptr=ctypes.addressof(arr), n_devices=len(ids)))
        buf.mapped_on.clear()
        self.process.ioctl(K.AMDKFD_IOC_FREE_MEMORY_OF_GPU, K.FreeMemoryOfGpuArgs(handle=buf.handle))
        buf.view = None
        if quarantine is None:
            self.os.munmap(buf.va, buf.alloc_size)
            return
        # replace the CPU mapping by a PROT_NONE reservation (a no-op on the emulator, which already did)
        self.os.mmap(buf.va, buf.alloc_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED)
        self._graveyard[buf.va] = (buf.alloc_size, f"{quarantine}, {buf.freed_at}")
        self._quarantine.append((buf.va, buf.alloc_size))
        self._quarantine_bytes += buf.alloc_size
        while self._quarantine_bytes > QUARANTINE_BYTES or len(self._quarantine) > QUARANTINE_COUNT:
            va, size = self._quarantine.popleft()
            self._quarantine_bytes -= size
            self._graveyard.pop(va, None)
            self.os.munmap(va, size)

    @exclusive
    def freed_memory_at(self, address: int) -> str | None:
        """Sanitizer: what freed allocation `address` falls in and where it was freed (None: none known)."""
        for va, (size, what) in self._graveyard.items():
            if va <= address < va + size:
                return what
        return None

    @exclusive
    def map_to(self, buf: "Buffer | Signal", other: "Device") -> None:
        """Peer-map `buf` (a view: its whole allocation; a signal: the page holding it) into another device's
        GPU address space (same VA), so that device's queues may use it."""
        from .device import Device  # (here: runtime/device.py imports this module)
        self._check_open()
        expect(other, Device, "map_to: other")
        if isinstance(buf, Signal):
            buf = buf.check_live().page
        expect(buf, Buffer, "map_to: buf (a Buffer or a Signal)")
        buf.check_range(0, 0, "map_to")
        root = buf.allocation
        if other.gpu_id not in root.mapped_on:
            root.device._map(root, [other.gpu_id])


# pytest leaves this module's frames out of a failed test's report when the error is the runtime's own wait
# outcome (a deadlock, a device fault, a timeout), as for runtime/device.py.
def __tracebackhide__(excinfo) -> bool:
    return excinfo is not None and excinfo.errisinstance((DeadlockError, DeviceFault, DeviceTimeout))
