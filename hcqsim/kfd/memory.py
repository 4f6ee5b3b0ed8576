"""The process's GPU memory (amdgpu_amdkfd_gpuvm.c, kfd_flat_memory.c): buffer objects, their GPU
mappings, the apertures, and the process's share of the host VA window.

The emulator backs VRAM/GTT BOs with host memory at their VA when they are allocated (GPU VA == host
VA, DESIGN_NOTES 2), so CPU mappings of them cost nothing and the checks the kernel makes at map time
are made at allocation. Where the emulator cannot do what the kernel does (map one page at two
addresses), the error says "emulator limitation". A USERPTR BO is the exception to GPU VA == host VA: its GPU
pages map the user's pages at their own CPU address (the GPU page table's mapping carries that host address), so
hipHostRegister'd heap memory works at the GPU address the thunk chose.
"""
from __future__ import annotations

import bisect
import ctypes
import errno
import heapq
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from .. import kfd_uapi as k
from ..boundary import MAP_FIXED, PROT_NONE
from ..memory import PAGE_SIZE, Mapping, MemoryError_, VaWindow, page_align
from .uaccess import host_range_mapped, kmalloc_check, probe_user_pages, read_user, write_user

if TYPE_CHECKING:
    from .process import KfdDriver, ProcessDevice

GPUVM_BASE = 2 << 20  # AMDGPU_VA_RESERVED_BOTTOM (facts 1.2)
GPUVM_LIMIT = (1 << 47) - 1  # gpuvm_size - 1 (facts 1.2)
LDS_BASE, SCRATCH_BASE = 1 << 48, 2 << 48  # kfd_flat_memory.c, gfx9+ dGPU (facts 1.2)
APERTURE_LOW_LIMIT = 0xFFFFFFFF  # limit = base | 0xFFFFFFFF
DRM_FILE_PAGE_OFFSET_START = 0x100000 * PAGE_SIZE  # first DRM GEM fake mmap offset on 64-bit
VRAM_AVAILABILITY_ALIGN = 2 << 20  # amdgpu_amdkfd_get_available_memory rounds down to 2 MiB

_TYPE_TO_KIND = {k.KFD_IOC_ALLOC_MEM_FLAGS_VRAM: "vram", k.KFD_IOC_ALLOC_MEM_FLAGS_GTT: "gtt",
                 k.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR: "userptr", k.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL: "doorbell",
                 k.KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP: "mmio"}
_TYPE_PRECEDENCE = tuple(_TYPE_TO_KIND)  # dicts keep their order: VRAM, GTT, USERPTR, DOORBELL, MMIO_REMAP


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


# ---------------------------------------------------------------------------------------------------
# interval helpers for the VA bookkeeping: sorted lists of [lo, hi) ranges


def _clip(intervals: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    return [(max(a, lo), min(b, hi)) for a, b in intervals if a < hi and lo < b]


def _minus(pieces: list[tuple[int, int]], holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = list(pieces)
    for hlo, hhi in holes:
        nxt = []
        for a, b in out:
            if hhi <= a or b <= hlo:
                nxt.append((a, b))
                continue
            if a < hlo:
                nxt.append((a, hlo))
            if hhi < b:
                nxt.append((hhi, b))
        out = nxt
    return sorted(out)


def _covered(intervals: list[tuple[int, int]], lo: int, hi: int) -> bool:
    return not _minus([(lo, hi)], intervals)


class RangeIndex:
    """Disjoint [lo, hi) ranges sorted by start, each with a value: overlap queries by bisection, so the
    driver's lookups stay O(log n) with 100,000 live BOs (issue 8 item 10)."""

    def __init__(self):
        self.starts: list[int] = []
        self.items: dict[int, tuple[int, object]] = {}  # start -> (end, value)

    def add(self, lo: int, hi: int, value: object = None) -> None:
        bisect.insort(self.starts, lo)
        self.items[lo] = (hi, value)

    def remove(self, lo: int) -> None:
        i = bisect.bisect_left(self.starts, lo)
        if i < len(self.starts) and self.starts[i] == lo:
            del self.starts[i]
            del self.items[lo]

    def overlapping(self, lo: int, hi: int) -> list[tuple[int, int, object]]:
        """(start, end, value) of every range meeting [lo, hi), in address order."""
        i = max(bisect.bisect_right(self.starts, lo) - 1, 0)
        out = []
        while i < len(self.starts) and self.starts[i] < hi:
            start = self.starts[i]
            end, value = self.items[start]
            if end > lo:
                out.append((start, end, value))
            i += 1
        return out

    def first_overlap(self, lo: int, hi: int) -> tuple[int, int, object] | None:
        found = self.overlapping(lo, hi) if hi > lo else []
        return found[0] if found else None

    def ranges(self) -> list[tuple[int, int]]:
        return [(a, self.items[a][0]) for a in self.starts]


# ---------------------------------------------------------------------------------------------------
# records


@dataclass(eq=False)
class BufferObject:
    """One KFD buffer object (kgd_mem)."""

    handle: int
    device: "ProcessDevice"
    va: int
    size: int  # page aligned, as the driver rounds it
    flags: int
    kind: str  # memory.KINDS
    mmap_offset: int
    backed: bool  # the driver backs host memory at va (VRAM/GTT)
    owns_reservation: bool = False  # its window range is reserved on its own behalf (see AddressBook)
    mapped: set = field(default_factory=set)  # GPU indices whose page table holds it
    queue_refs: dict = field(default_factory=dict)  # GPU index -> queue buffers using it there
    cpu_maps: list = field(default_factory=list)  # [lo, hi) ranges the process has mmapped through the render node
    freed: bool = False  # FREE_MEMORY_OF_GPU ran while a CPU mapping held it: released at the last munmap
    invalid: bool = False  # USERPTR whose host pages went away: out of every GPU page table until they return
    cpu: int | None = None  # USERPTR: the CPU address of the user pages it wraps (its GPU VA may differ)

    @property
    def host(self) -> int:
        """Where the BO's bytes are in this process: its CPU address for a USERPTR, else its VA."""
        return self.va if self.cpu is None else self.cpu

    @property
    def end(self) -> int:
        return self.va + self.size


class DeviceBOs:
    """The BOs of one device in this process (the kernel's per-device idr) and its special pages."""

    def __init__(self):
        self.bos: dict[int, BufferObject] = {}  # idr index -> BO
        self.free_ids: list[int] = []  # heap of freed idr indices below next_id (idr_alloc: lowest free)
        self.next_id = 0
        self.by_va = RangeIndex()  # the BOs' VA ranges on this device
        self.mapped_at: dict[int, BufferObject] = {}  # va -> BO mapped in this GPU's page table
        self.by_offset: dict[int, BufferObject] = {}  # DRM mmap offset -> BO
        self.next_offset = DRM_FILE_PAGE_OFFSET_START
        self.vram_used = 0
        self.doorbell_va: int | None = None  # the process doorbell slice (8 KiB), once allocated
        self.mmio_va: int | None = None  # the HDP flush page, once allocated

    def bo_of(self, handle: int) -> BufferObject | None:
        return self.bos.get(handle & 0xFFFFFFFF)

    def take_id(self) -> int:
        if self.free_ids:
            return heapq.heappop(self.free_ids)
        self.next_id += 1
        return self.next_id - 1

    def add(self, idr: int, bo: BufferObject) -> None:
        self.bos[idr] = bo
        self.by_va.add(bo.va, bo.end, bo)

    def remove(self, idr: int) -> BufferObject:
        bo = self.bos.pop(idr)
        self.by_va.remove(bo.va)
        heapq.heappush(self.free_ids, idr)
        return bo


class AddressBook:
    """Which parts of the shared VaWindow the emulated process holds, and why.

    `reserved` are the process's anonymous PROT_NONE mmaps (its VA reservations). A BO the driver backs
    inside a reservation keeps that reservation's pages; when the process munmaps the reservation while
    the BO lives, the BO takes the pages over (`owns_reservation`) and returns them when freed. A BO placed
    where nothing was reserved reserves its own range. `anon` are anonymous read/write mmaps (host memory,
    e.g. for USERPTR); a munmap is deferred while a live USERPTR BO still points into it. `fixed` are anonymous
    read/write MAP_FIXED maps the process placed inside its own reservations (the thunk's host memory, then
    registered as USERPTR): real pages at that address until munmapped or mapped over.
    """

    def __init__(self, window: VaWindow):
        self.window = window
        self.reserved: list[tuple[int, int]] = []
        self.anon: dict[int, int] = {}
        self.deferred_anon: dict[int, int] = {}
        self.fixed = RangeIndex()
        self.deferred_fixed: dict[int, int] = {}  # unmapped fixed maps a live USERPTR BO still holds: start -> end

    def reserve(self, length: int, at: int | None) -> int:
        va = self.window.reserve(length, PAGE_SIZE, at)
        bisect.insort(self.reserved, (va, va + page_align(length)))
        return va

    def _near(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """The reservations meeting [lo, hi) (found by bisection: they are sorted and disjoint)."""
        i = max(bisect.bisect_right(self.reserved, (lo, 1 << 64)) - 1, 0)
        j = bisect.bisect_left(self.reserved, (hi, 0))
        return [r for r in self.reserved[i:j] if r[1] > lo]

    def is_reserved(self, lo: int, hi: int) -> bool:
        return _covered(self._near(lo, hi), lo, hi)

    def take_for(self, lo: int, hi: int) -> bool:
        """Make [lo, hi) held for a new backing. Returns True if it had to reserve it itself (caller owns)."""
        if self.is_reserved(lo, hi):
            return False
        self.window.reserve(hi - lo, PAGE_SIZE, lo)  # MemoryError_ when partly taken by someone else
        return True

    def give_back(self, lo: int, hi: int) -> None:
        """Return an owned range, except parts the process still has reserved."""
        for a, b in _minus([(lo, hi)], self._near(lo, hi)):
            self.window.unreserve(a, b - a)

    def unmap_reserved(self, lo: int, hi: int, owned: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """munmap of (part of) reservations: returns the removed pieces still owned by live backings."""
        near = self._near(lo, hi)
        removed = _clip(near, lo, hi)
        if near:  # only the reservations meeting [lo, hi) change
            i = bisect.bisect_left(self.reserved, near[0])
            self.reserved[i:i + len(near)] = _minus(near, [(lo, hi)])
        for a, b in _minus(removed, owned):
            self.window.unreserve(a, b - a)
        return removed


# ---------------------------------------------------------------------------------------------------
# the part


class ProcessMemory:
    """BOs, GPU mappings, apertures and VA bookkeeping of one process; the memory ioctls."""

    def __init__(self, driver: "KfdDriver", window: VaWindow, vram_size: int):
        self.driver = driver
        self.book = AddressBook(window)
        self.vram_size = vram_size
        self.on: list[DeviceBOs] = [DeviceBOs() for _ in driver.devices]  # by device index
        self.special_pages: list[tuple[int, int]] = []  # doorbell slices, MMIO pages, driver event page
        self.backed = RangeIndex()  # window ranges the driver backs: VRAM/GTT BOs of every device, special pages
        self.userptrs: dict[int, BufferObject] = {}  # handle -> USERPTR BOs mapped on some GPU (revalidated)
        for dev in driver.devices:  # free-running: host threads store while the GPUs run (coherence/hdp.py)
            dev.gpu.hdp.vram.concurrent_host = driver.system.free_running

    def ioctls(self) -> dict[str, Callable]:
        return {"GET_PROCESS_APERTURES": self.get_process_apertures,
                "GET_PROCESS_APERTURES_NEW": self.get_process_apertures_new,
                "AVAILABLE_MEMORY": self.available_memory, "ALLOC_MEMORY_OF_GPU": self.alloc_memory_of_gpu,
                "FREE_MEMORY_OF_GPU": self.free_memory_of_gpu, "MAP_MEMORY_TO_GPU": self.map_memory_to_gpu,
                "UNMAP_MEMORY_FROM_GPU": self.unmap_memory_from_gpu}

    # -- what the other parts ask ------------------------------------------------------------------

    def bo_of(self, dev: "ProcessDevice", handle: int) -> BufferObject | None:
        return self.on[dev.index].bo_of(handle)

    def mapped_bo(self, dev: "ProcessDevice", addr: int) -> tuple[Mapping | None, BufferObject | None]:
        """The GPU mapping holding `addr` on `dev` and the BO mapped there (None, None when unmapped)."""
        m = dev.gpu.memory.find(addr)
        return m, (self.on[dev.index].mapped_at.get((m.origin or m).start) if m else None)

    def vram_used(self, index: int) -> int:
        return self.on[index].vram_used

    def doorbell_va(self, dev: "ProcessDevice") -> int | None:
        return self.on[dev.index].doorbell_va

    def owned_ranges(self) -> list[tuple[int, int]]:
        """Window ranges the driver backs: live VRAM/GTT BOs and its special pages."""
        return self.backed.ranges()

    def _owned_near(self, lo: int, hi: int) -> list[tuple[int, int]]:
        return [(a, b) for a, b, _ in self.backed.overlapping(lo, hi)]

    def special_page(self, size: int, va: int | None, name: str) -> int:
        """A driver page (doorbell slice, HDP page, event page): at `va`, or anywhere in the window."""
        if va is None:
            va = self.book.window.allocate(size)
        else:
            self._back(va, size, name)
        self.special_pages.append((va, va + size))
        self.backed.add(va, va + size, None)
        return va

    # -- apertures and availability ----------------------------------------------------------------

    def _aperture(self, dev: "ProcessDevice", ap) -> None:
        ap.gpu_id = dev.gpu_id
        ap.lds_base, ap.lds_limit = LDS_BASE, LDS_BASE | APERTURE_LOW_LIMIT
        ap.scratch_base, ap.scratch_limit = SCRATCH_BASE, SCRATCH_BASE | APERTURE_LOW_LIMIT
        ap.gpuvm_base, ap.gpuvm_limit = GPUVM_BASE, GPUVM_LIMIT

    def get_process_apertures(self, args, io: k.Ioctl) -> None:
        args.num_of_nodes = 0
        for dev in self.driver.devices[:k.NUM_OF_SUPPORTED_GPUS]:
            self._aperture(dev, args.process_apertures[args.num_of_nodes])
            args.num_of_nodes += 1

    def get_process_apertures_new(self, args, io: k.Ioctl) -> None:
        devices = self.driver.devices
        if args.num_of_nodes == 0:  # just the count, so user space can size its array
            args.num_of_nodes = len(devices)
            return
        # kzalloc(sizeof(apertures) * num_of_nodes) before anything else: -ENOMEM past what kmalloc gives
        kmalloc_check(ctypes.sizeof(k.ProcessDeviceApertures) * args.num_of_nodes,
                      f"{io.name}: num_of_nodes {args.num_of_nodes}")
        n = min(len(devices), args.num_of_nodes)
        arr = (k.ProcessDeviceApertures * n)()
        for i in range(n):
            self._aperture(devices[i], arr[i])
        args.num_of_nodes = n
        write_user(args.kfd_process_device_apertures_ptr, bytes(arr))

    def available_memory(self, args, io: k.Ioctl) -> None:
        dev = self.driver.device(args.gpu_id, io.name)
        free = self.vram_size - self.on[dev.index].vram_used
        args.available = max(0, free // VRAM_AVAILABILITY_ALIGN * VRAM_AVAILABILITY_ALIGN)

    # -- allocation --------------------------------------------------------------------------------

    def alloc_memory_of_gpu(self, args, io: k.Ioctl) -> None:
        name, flags = io.name, args.flags
        if args.size == 0:
            raise OSError(errno.EINVAL, f"{name}: size is 0")
        dev = self.driver.device(args.gpu_id, name)
        self.driver.bound(dev, name)
        table = self.on[dev.index]
        if flags & k.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL and args.size != k.KFD_DOORBELL_SLICE_SIZE:
            raise OSError(errno.EINVAL, f"{name}: a DOORBELL BO is the whole {k.KFD_DOORBELL_SLICE_SIZE}-byte "
                                        f"slice, not {args.size} bytes")
        if flags & k.KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP and args.size != PAGE_SIZE:
            raise OSError(errno.EINVAL, f"{name}: an MMIO_REMAP BO is one page, not {args.size} bytes")
        # amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu picks the domain by the first type flag present, in this
        # order (VRAM, then GTT, then USERPTR / DOORBELL / MMIO_REMAP), and answers -EINVAL for none
        types = next((t for t in _TYPE_PRECEDENCE if flags & t), None)
        if types is None:
            raise OSError(errno.EINVAL, f"{name}: flags {k.describe_alloc_flags(flags)} carry none of "
                                        f"VRAM, GTT, USERPTR, DOORBELL, MMIO_REMAP")
        kind, size = _TYPE_TO_KIND[types], page_align(args.size)  # the driver rounds the size up to pages
        va = args.va_addr
        self._check_va(dev, va, size, name)
        if self.driver.svm.overlaps(va, va + size):  # kfd_ioctl_alloc_memory_of_gpu checks the SVM ranges
            raise OSError(errno.EADDRINUSE, f"{name}: va range 0x{va:x}+{size:#x} is already allocated by SVM")
        user = args.mmap_offset & ~(PAGE_SIZE - 1)  # ... and the user pages a USERPTR would wrap, by page
        if flags & k.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR and \
                self.driver.svm.overlaps(user, page_align(args.mmap_offset + args.size)):
            raise OSError(errno.EADDRINUSE, f"{name}: user pages 0x{args.mmap_offset:x}+{args.size:#x} are already "
                                            f"allocated by SVM")
        if kind == "userptr":
            self._check_userptr(args.mmap_offset, args.size, name)
        if kind == "vram" and table.vram_used + size > self.vram_size:
            raise OSError(errno.ENOMEM, f"{name}: {size:#x} bytes of VRAM requested, "
                                        f"{self.vram_size - table.vram_used:#x} available")
        idr = table.free_ids[0] if table.free_ids else table.next_id  # idr_alloc: the lowest free index
        bo = BufferObject(k.make_handle(dev.gpu_id, idr), dev, va, size, flags, kind, 0,
                          backed=kind in ("vram", "gtt"), cpu=args.mmap_offset if kind == "userptr" else None)
        self._place(bo, name)
        table.take_id()
        if kind == "mmio":
            bo.mmap_offset = k.mmap_offset(k.KFD_MMAP_TYPE_MMIO, dev.gpu_id)
        else:
            bo.mmap_offset = table.next_offset
            table.next_offset += size
            table.by_offset[bo.mmap_offset] = bo
        table.add(idr, bo)
        if bo.backed:
            self.backed.add(bo.va, bo.end, bo)
        if kind == "vram":
            table.vram_used += size
        args.handle, args.mmap_offset = bo.handle, bo.mmap_offset

    def _check_va(self, dev: "ProcessDevice", va: int, size: int, name: str) -> None:
        # The kernel finds these at MAP time (amdgpu_vm_bo_map: -EINVAL); the emulator backs memory at
        # ALLOC time, so it checks here, with the same errno.
        if va % PAGE_SIZE:
            raise OSError(errno.EINVAL, f"{name}: va 0x{va:x} is not page aligned")
        if va < GPUVM_BASE or va + size - 1 > GPUVM_LIMIT:
            raise OSError(errno.EINVAL, f"{name}: va range 0x{va:x}+{size:#x} is outside the GPUVM aperture "
                                        f"[0x{GPUVM_BASE:x}, 0x{GPUVM_LIMIT:x}]")
        hit = self.on[dev.index].by_va.first_overlap(va, va + size)
        if hit is not None:
            bo = hit[2]
            raise OSError(errno.EINVAL, f"{name}: va range 0x{va:x}+{size:#x} overlaps BO 0x{bo.handle:x} "
                                        f"at 0x{bo.va:x}+{bo.size:#x} on {dev.label}")

    def _check_userptr(self, cpu: int, nbytes: int, name: str) -> None:
        if cpu == 0:
            raise OSError(errno.EINVAL, f"{name}: USERPTR needs the CPU address in mmap_offset")
        if cpu % PAGE_SIZE:
            raise OSError(errno.EINVAL, f"{name}: USERPTR CPU address 0x{cpu:x} is not page aligned")
        probe_user_pages(cpu, page_align(nbytes) // PAGE_SIZE)  # get_user_pages: every page must exist

    def _place(self, bo: BufferObject, name: str) -> None:
        """Give the BO its memory: back VRAM/GTT at its VA; doorbell/MMIO BOs sit on the special pages."""
        if bo.kind == "userptr":
            return
        if bo.kind in ("doorbell", "mmio"):
            table = self.on[bo.device.index]
            attr = "doorbell_va" if bo.kind == "doorbell" else "mmio_va"
            cur = getattr(table, attr)
            if cur is None:
                setattr(table, attr, self.special_page(bo.size, bo.va, name))
                if bo.kind == "mmio":  # the GPU's HDP watches the flush registers on it
                    bo.device.gpu.hdp.map_register_page(bo.va)
            elif cur != bo.va:
                raise OSError(errno.EINVAL, f"{name}: the {bo.kind} page of {bo.device.label} is already at "
                                            f"0x{cur:x}; emulator limitation: a {bo.kind.upper()} BO must use "
                                            f"that VA")
            return
        bo.owns_reservation = self._back(bo.va, bo.size, name)

    def _back(self, va: int, size: int, name: str) -> bool:
        """Back [va, va+size) with zeroed host memory; True when the range had to be reserved for it."""
        window = self.book.window
        if not window.contains(va, size):
            raise OSError(errno.EINVAL, f"{name}: va 0x{va:x}+{size:#x} is outside the emulator's VA window "
                                        f"0x{window.base:x}+{window.size:#x}; reserve VA with "
                                        f"mmap(PROT_NONE) through EmulatedOS")
        taken = self.backed.first_overlap(va, va + size)
        if taken is not None and taken[2] is not None and taken[2].freed:
            raise OSError(errno.EINVAL, f"{name}: va 0x{va:x}+{size:#x} overlaps freed BO 0x{taken[2].handle:x} "
                                        f"at 0x{taken[0]:x} that a CPU mapping still holds; emulator limitation: "
                                        f"GPU VA == host VA, so munmap it before reusing its VA")
        if taken is not None:
            raise OSError(errno.EINVAL, f"{name}: va 0x{va:x}+{size:#x} overlaps memory another GPU's BO "
                                        f"uses at 0x{taken[0]:x}; emulator limitation: all GPUs share one VA space")
        try:
            owner = self.book.take_for(va, va + size)
        except MemoryError_:
            raise OSError(errno.EINVAL, f"{name}: va 0x{va:x}+{size:#x} is partly in use by other host mappings")
        window.back(va, size)
        return owner

    def free_memory_of_gpu(self, args, io: k.Ioctl) -> None:
        if self.driver.events.owns_page(args.handle):
            raise OSError(errno.EPERM, f"{io.name}: BO 0x{args.handle:x} is the event page; it lives until the "
                                       f"process exits")
        dev = self.driver.device(args.handle >> 32, io.name)
        table = self.on[dev.index]
        bo = table.bo_of(args.handle)
        if bo is None:
            raise OSError(errno.EINVAL, f"{io.name}: no BO with handle 0x{args.handle:x} (already freed?)")
        if bo.mapped:
            on = ", ".join(self.driver.devices[i].label for i in sorted(bo.mapped))
            raise OSError(errno.EBUSY, f"{io.name}: BO 0x{bo.handle:x} is still mapped on {on}; "
                                       f"UNMAP_MEMORY_FROM_GPU first")
        table.remove(args.handle & 0xFFFFFFFF)
        table.by_offset.pop(bo.mmap_offset, None)
        bo.freed = True
        if bo.backed and bo.cpu_maps:
            # The handle is gone, but a CPU mapping still holds the BO (the VMA keeps its GEM object): its pages
            # stay, and the process reads what was there, until the last munmap (amdgpu_gem_object_free runs
            # when the last reference drops; amdgpu_amdkfd_release_notify unreserves the memory then).
            return
        self._release_pages(bo)
        if bo.kind == "userptr":
            self.release_deferred_anon()

    def _release_pages(self, bo: BufferObject) -> None:
        """The BO's memory goes back: unback its pages, return its window range, uncount its VRAM."""
        if bo.kind == "vram":
            self.on[bo.device.index].vram_used -= bo.size
            bo.device.gpu.hdp.host_unmapped(bo.va, bo.end)
        if bo.backed:
            self.backed.remove(bo.va)
            self.book.window.unback(bo.va)
            if bo.owns_reservation:
                self.book.give_back(bo.va, bo.end)

    def cpu_mapped(self, bo: BufferObject, length: int) -> None:
        """A render-node mmap of `bo` (at its own VA, the only place the emulator can map it)."""
        whole = (bo.va, bo.va + page_align(length))
        bo.cpu_maps = sorted(_minus(bo.cpu_maps, [whole]) + [whole])
        if bo.kind == "vram":  # CPU stores to it go through that GPU's HDP (facts 6.4); GTT/USERPTR do not
            bo.device.gpu.hdp.host_mapped(*whole, f"VRAM BO 0x{bo.handle:x} of {bo.device.label}")

    def _end_cpu_maps(self, lo: int, hi: int, freed_only: bool = False) -> None:
        """munmap (or a MAP_FIXED mapping over) [lo, hi): CPU mappings of BOs there end; a freed BO whose last
        CPU mapping ended releases its pages. `freed_only`: only those of freed BOs (a refused call may follow)."""
        for _, _, bo in self.backed.overlapping(lo, hi):
            if bo is None or not bo.cpu_maps or (freed_only and not bo.freed):
                continue
            bo.cpu_maps = _minus(bo.cpu_maps, [(lo, hi)])
            if bo.kind == "vram":
                bo.device.gpu.hdp.host_unmapped(max(lo, bo.va), min(hi, bo.end))
            if bo.freed and not bo.cpu_maps:
                self._release_pages(bo)

    # -- GPU mappings ------------------------------------------------------------------------------

    def _device_ids(self, args, name: str) -> list[int]:
        if args.n_devices == 0:
            raise OSError(errno.EINVAL, f"{name}: n_devices is 0")
        if args.n_success > args.n_devices:
            raise OSError(errno.EINVAL, f"{name}: n_success {args.n_success} exceeds n_devices {args.n_devices}")
        kmalloc_check(4 * args.n_devices, f"{name}: n_devices {args.n_devices}")  # kmalloc_array, then copy
        raw = read_user(args.device_ids_array_ptr, 4 * args.n_devices)
        return list(struct.unpack(f"<{args.n_devices}I", raw))

    def _bo_for_map(self, args, name: str) -> BufferObject:
        dev = self.driver.device(args.handle >> 32, name)
        self.driver.bound(dev, name)
        bo = self.bo_of(dev, args.handle)
        if bo is None:  # kfd_chardev.c answers -ENOMEM when the handle does not translate
            raise OSError(errno.ENOMEM, f"{name}: no BO with handle 0x{args.handle:x}")
        return bo

    def map_memory_to_gpu(self, args, io: k.Ioctl) -> None:
        ids = self._device_ids(args, io.name)
        bo = self._bo_for_map(args, io.name)
        for i in range(args.n_success, args.n_devices):  # n_success: leading devices done (a retry resumes)
            peer = self.driver.device(ids[i], io.name)
            self.driver.bound(peer, io.name)
            self._map_on(bo, peer, io.name)
            args.n_success = i + 1

    def _map_on(self, bo: BufferObject, peer: "ProcessDevice", name: str) -> None:
        if peer.index in bo.mapped:
            return  # already mapped there: the kernel skips mapped attachments
        if not bo.invalid:
            try:
                self._page_table_map(bo, peer)
            except ValueError as e:
                raise OSError(errno.EINVAL, f"{name}: cannot map BO 0x{bo.handle:x} on {peer.label}: {e}")
        bo.mapped.add(peer.index)
        self.on[peer.index].mapped_at[bo.va] = bo
        if bo.kind == "userptr":
            self.userptrs[bo.handle] = bo

    @staticmethod
    def _page_table_map(bo: BufferObject, peer: "ProcessDevice") -> None:
        m = peer.gpu.memory.map(bo.va, bo.size, bo.kind, writable=bool(bo.flags & k.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE),
                                executable=bool(bo.flags & k.KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE),
                                name=f"bo 0x{bo.handle:x}", host=bo.host)
        # the memory type the cache model gives the pages (facts 6.1): COHERENT / UNCACHED allocations (signals,
        # the event page) are coherent with the CPU without flushes: no GPU cache keeps them
        if bo.flags & (k.KFD_IOC_ALLOC_MEM_FLAGS_COHERENT | k.KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED):
            m.mtype = "uc"
        elif bo.kind == "vram" and bo.device is not peer:  # another GPU's VRAM: not local to this L2 (LLVM: NC)
            m.mtype = "nc"

    def _page_table_unmap(self, bo: BufferObject, index: int) -> None:
        if not bo.invalid:  # an invalidated USERPTR is in no page table already
            self.driver.devices[index].gpu.memory.unmap(bo.va)

    def revalidate_userptrs(self) -> None:
        """Before the GPUs run: a mapped USERPTR BO whose host pages were unmapped behind the driver's back
        leaves every GPU page table (so a GPU access to it is a VM fault of that queue, as after the kernel's
        MMU-notifier eviction, never a host segfault), and comes back once its pages are mapped again (the
        restore worker). Probed with one msync per BO, which answers ENOMEM for unmapped pages; a range
        made PROT_NONE with mprotect is not detected (documented limitation)."""
        for bo in list(self.userptrs.values()):
            present = host_range_mapped(bo.host, bo.size)
            if present == (not bo.invalid):
                continue
            for i in sorted(bo.mapped):
                if present:
                    self._page_table_map(bo, self.driver.devices[i])
                else:
                    self.driver.devices[i].gpu.memory.unmap(bo.va)
            bo.invalid = not present

    def unmap_memory_from_gpu(self, args, io: k.Ioctl) -> None:
        ids = self._device_ids(args, io.name)
        bo = self._bo_for_map(args, io.name)
        for i in range(args.n_success, args.n_devices):
            peer = self.driver.device(ids[i], io.name)
            if peer.index not in bo.mapped:
                raise OSError(errno.EINVAL, f"{io.name}: BO 0x{bo.handle:x} is not mapped on {peer.label}")
            if bo.queue_refs.get(peer.index):
                raise OSError(errno.EBUSY, f"{io.name}: BO 0x{bo.handle:x} backs a queue on {peer.label}; "
                                           f"destroy the queue first")
            self._page_table_unmap(bo, peer.index)
            bo.mapped.discard(peer.index)
            del self.on[peer.index].mapped_at[bo.va]
            if not bo.mapped:
                self.userptrs.pop(bo.handle, None)
            args.n_success = i + 1

    # -- CPU mappings (what EmulatedOS.mmap / munmap ask) ------------------------------------------

    def mmap_anonymous(self, addr: int, length: int, prot: int, flags: int) -> int:
        book = self.book
        if flags & MAP_FIXED:  # the pages there are replaced: they leave SVM (the kernel's MMU notifier)
            self.driver.svm.cpu_unmapped(addr, addr + page_align(length))
        try:
            if prot == PROT_NONE:  # the runtime reserving GPU VA
                if flags & MAP_FIXED:  # replaces whatever the CPU had mapped there
                    self._end_cpu_maps(addr, addr + page_align(length))
                if flags & MAP_FIXED and book.is_reserved(addr, addr + page_align(length)):
                    self._drop_fixed(addr, addr + page_align(length))  # mapped over: those pages are gone
                    return addr  # re-reserving its own reservation
                return book.reserve(length, addr if flags & MAP_FIXED else None)
            if flags & MAP_FIXED:
                return self._map_fixed(addr, length)
            va = book.window.allocate(length)  # host memory (e.g. for USERPTR), zeroed
            book.anon[va] = page_align(length)
            return va
        except MemoryError_ as e:
            raise OSError(errno.ENOMEM, f"mmap: {e}")

    def _map_fixed(self, addr: int, length: int) -> int:
        """Anonymous read/write MAP_FIXED: zeroed private pages at `addr`, as mmap gives, replacing what the range
        held. Inside the window only within the process's own reservations (the other pages are the emulator's)
        and not over a BO's pages (the emulator keeps one copy of each page)."""
        lo, hi = addr, addr + page_align(length)
        if not self.book.is_reserved(lo, hi):
            raise OSError(errno.EINVAL, f"mmap: anonymous MAP_FIXED at 0x{lo:x}+{hi - lo:#x}: emulator limitation: "
                                        f"inside the emulator's VA window only within the process's own PROT_NONE "
                                        f"reservations")
        self._end_cpu_maps(lo, hi, freed_only=True)  # a freed BO the CPU still mapped there goes now
        taken = self.backed.first_overlap(lo, hi)
        if taken is not None:
            raise OSError(errno.EINVAL, f"mmap: anonymous MAP_FIXED at 0x{lo:x}+{hi - lo:#x} over driver memory at "
                                        f"0x{taken[0]:x}: emulator limitation: a BO's pages cannot be replaced")
        self._drop_fixed(lo, hi)
        self.book.window.back(lo, hi - lo)
        self.book.fixed.add(lo, hi, None)
        return lo

    def _drop_fixed(self, lo: int, hi: int) -> None:
        """Unmap the fixed anonymous maps in [lo, hi): wholly, or split around the range (as munmap splits)."""
        window, live = self.book.window, self._live_userptr()
        for a, b, _ in self.book.fixed.overlapping(lo, hi):
            if _clip(live, a, b):  # a USERPTR BO still maps these pages on a GPU: they live until it is freed
                self.book.fixed.remove(a)
                self.book.deferred_fixed[a] = b
                continue
            kept = [(x, y, ctypes.string_at(x, y - x)) for x, y in ((a, min(b, lo)), (max(a, hi), b)) if y > x]
            self.book.fixed.remove(a)
            window.unback(a)
            for x, y, data in kept:  # the parts outside the range stay mapped, with their bytes
                window.back(x, y - x)
                ctypes.memmove(x, data, y - x)
                self.book.fixed.add(x, y, None)

    def bo_at_offset(self, dev: "ProcessDevice", offset: int, length: int) -> BufferObject:
        """The BO a render-node mmap offset names, checked against the mapping's length."""
        bo = self.on[dev.index].by_offset.get(offset)
        if bo is None:
            raise OSError(errno.EINVAL, f"mmap: offset 0x{offset:x} is not a BO of renderD{dev.minor}")
        if page_align(length) > bo.size:
            raise OSError(errno.EINVAL, f"mmap: {length:#x} bytes is larger than BO 0x{bo.handle:x} ({bo.size:#x})")
        return bo

    def doorbell_slice(self, dev: "ProcessDevice") -> int:
        table = self.on[dev.index]
        if table.doorbell_va is None:
            table.doorbell_va = self.special_page(k.KFD_DOORBELL_SLICE_SIZE, None, "mmap")
        return table.doorbell_va

    def mmio_page(self, dev: "ProcessDevice") -> int:
        table = self.on[dev.index]
        if table.mmio_va is None:
            table.mmio_va = self.special_page(PAGE_SIZE, None, "mmap")
            dev.gpu.hdp.map_register_page(table.mmio_va)  # its HDP watches the flush registers on it
        return table.mmio_va

    def munmap(self, addr: int, length: int) -> None:
        book, lo, hi = self.book, addr, addr + page_align(length)
        self.driver.svm.cpu_unmapped(lo, hi)  # svm_range_unmap_from_cpu, before the pages go
        if lo in book.anon:
            if book.anon[lo] != hi - lo:
                raise OSError(errno.EINVAL, "munmap: emulator limitation: unmap anonymous memory as it was mapped")
            size = book.anon.pop(lo)
            book.deferred_anon[lo] = size
            self.release_deferred_anon()
            return
        self._drop_fixed(lo, hi)
        removed = book.unmap_reserved(lo, hi, self._owned_near(lo, hi))
        for rlo, rhi in removed:  # live BOs in the removed part now hold their pages themselves
            for _, _, bo in self.backed.overlapping(rlo, rhi):
                if bo is not None:
                    bo.owns_reservation = True
        self._end_cpu_maps(lo, hi)
        # Other ranges (BO and doorbell/event/MMIO CPU mappings) need no work: the memory stays for the GPU.

    def _live_userptr(self) -> list[tuple[int, int]]:
        return sorted((b.host, b.host + b.size) for t in self.on for b in t.bos.values() if b.kind == "userptr")

    def release_deferred_anon(self) -> None:
        """Release munmapped anonymous memory no live USERPTR BO points into any more."""
        book = self.book
        live = self._live_userptr()
        for va, end in list(book.deferred_fixed.items()):
            if not _clip(live, va, end):
                del book.deferred_fixed[va]
                book.window.unback(va)
        for va, size in list(book.deferred_anon.items()):
            if not _clip(live, va, va + size):
                del book.deferred_anon[va]
                book.window.release(va)

    def close(self) -> None:
        for table in self.on:
            for bo in table.bos.values():
                for i in list(bo.mapped):
                    self._page_table_unmap(bo, i)
            table.bos.clear()
            table.mapped_at.clear()
