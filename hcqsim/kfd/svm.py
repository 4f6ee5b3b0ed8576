"""Shared virtual memory (kfd_svm.c): AMDKFD_IOC_SVM's SET_ATTR and GET_ATTR over the process's own memory.

A program (ROCr's hsa_amd_svm_attributes_set, HIP's hipMallocManaged / hipMemAdvise / hipMemPrefetchAsync) gives
page ranges of its ordinary memory attributes: preferred and prefetch location, per-GPU access (ACCESS,
ACCESS_IN_PLACE, NO_ACCESS), flags and migration granularity. As in the kernel the attributes live on sorted,
disjoint ranges, split where a SET_ATTR starts or ends, with the kernel's defaults for pages new to SVM; GET_ATTR
folds the ranges it meets the kernel's way (a location only when every range agrees, access only where all allow
it, SET_FLAGS the AND and CLR_FLAGS the complement of the OR of the flags, the smallest granularity).

Mappings: every GPU with ACCESS or ACCESS_IN_PLACE gets the range in its page table at its own address (the
process's pages: GPU VA == CPU VA), writable unless GPU_RO is set or the CPU mapping is read-only, executable with
GPU_EXEC. With XNACK on, new ranges give every GPU access, as the kernel does; the kernel then maps them at the
GPU's first (retried) fault, the emulator at once, which a program cannot tell apart. Pages the CPU unmaps leave
SVM and every GPU page table before the GPUs next run (the kernel's MMU notifier).

Differences from the kernel, on purpose or not yet done:
- no migration: every page stays in host memory where CPU and GPU see the same bytes, so a prefetch or preferred
  location changes no byte and no address (the attributes are kept and reported);
- a GPU that loses access (NO_ACCESS) leaves the page table at once (the kernel keeps the old mapping until the
  range is next invalidated: a TODO in svm_range_set_attr);
- no ranges created by GPU faults on unregistered memory (XNACK on, svm_range_restore_pages);
- mprotect of a registered range is not noticed (only unmapping is, as for USERPTR BOs);
- an unknown op answers -EINVAL (the kernel returns +EINVAL, which user space sees as success).
"""
from __future__ import annotations

import bisect
import ctypes
import errno
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from .. import kfd_uapi as k
from ..memory import PAGE_SIZE
from .uaccess import host_range_mapped

if TYPE_CHECKING:
    from .process import KfdDriver

UNDEFINED, SYSMEM = k.KFD_IOCTL_SVM_LOCATION_UNDEFINED, k.KFD_IOCTL_SVM_LOCATION_SYSMEM
DEFAULT_FLAGS = k.KFD_IOCTL_SVM_FLAG_HOST_ACCESS | k.KFD_IOCTL_SVM_FLAG_COHERENT  # svm_range_set_default_attributes
DEFAULT_GRANULARITY = 9  # 2 MiB (2^9 pages)
MAX_GRANULARITY = 0x3F
_ACCESS_TYPES = (k.KFD_IOCTL_SVM_ATTR_ACCESS, k.KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE, k.KFD_IOCTL_SVM_ATTR_NO_ACCESS)
_MAPS_LINE = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S{4})")


@dataclass
class SvmRange:
    """One svm_range: [start, end) in bytes (page aligned) and its attributes; GPUs by process device index."""

    start: int
    end: int
    access: set = field(default_factory=set)  # bitmap_access
    in_place: set = field(default_factory=set)  # bitmap_aip
    preferred: int = UNDEFINED
    prefetch: int = UNDEFINED
    granularity: int = DEFAULT_GRANULARITY
    flags: int = DEFAULT_FLAGS

    def piece(self, start: int, end: int) -> "SvmRange":
        """A part of this range with the same attributes (svm_range_split_adjust)."""
        return SvmRange(start, end, set(self.access), set(self.in_place), self.preferred, self.prefetch,
                        self.granularity, self.flags)

    def mapped_on(self) -> set:
        return self.access | self.in_place


def host_vmas(lo: int, hi: int) -> list[tuple[int, int, str]]:
    """The process's memory mappings meeting [lo, hi): (start, end, 'rwxp') from /proc/self/maps."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            m = _MAPS_LINE.match(line)
            if m is None:
                continue
            a, b = int(m[1], 16), int(m[2], 16)
            if a < hi and lo < b:
                out.append((a, b, m[3]))
    return out


def _vmas_text(vmas: list[tuple[int, int, str]]) -> str:
    """The mappings an EFAULT was decided on, for its message (an intermittent one was once logged without them)."""
    return ", ".join(f"0x{a:x}-0x{b:x} {p}" for a, b, p in vmas[:8]) or "none"


class ProcessSvm:
    """The process's SVM ranges (svm_range_list) and the GPU mappings they make."""

    def __init__(self, driver: "KfdDriver"):
        self.driver = driver
        self.ranges: list[SvmRange] = []  # sorted by start, disjoint
        self.mapped: dict[int, dict[int, int]] = {i: {} for i in range(len(driver.devices))}  # GPU -> start -> end

    def ioctls(self) -> dict[str, Callable]:
        return {"SVM": self.svm}

    # -- what the other parts ask ------------------------------------------------------------------

    def overlaps(self, lo: int, hi: int) -> bool:
        return bool(self._meeting(lo, hi))

    def holds_queue_buffer(self, dev, lo: int, size: int) -> bool:
        """kfd_queue_buffer_svm_get: SVM ranges mapped on `dev` with GPU_ALWAYS_MAPPED cover [lo, lo+size).
        (The kernel also counts a queue reference on them; the emulator does not.)"""
        pos, hi = lo, lo + size
        while pos < hi:
            r = next(iter(self._meeting(pos, pos + 1)), None)
            if r is None or r.start not in self.mapped[dev.index] or dev.index not in r.mapped_on() \
                    or not r.flags & k.KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED:
                return False
            pos = r.end
        return True

    # -- the ioctl (kfd_ioctl_svm, svm_ioctl) ------------------------------------------------------

    def svm(self, args, io: k.Ioctl) -> None:
        if not self.driver.system.svm:
            raise OSError(errno.EPERM, f"{io.name}: this kernel has no SVM (built without CONFIG_HSA_AMD_SVM)")
        lo, size = args.start_addr, args.size
        if lo % PAGE_SIZE or size % PAGE_SIZE or not lo or not size:
            raise OSError(errno.EINVAL, f"{io.name}: start 0x{lo:x} and size {size:#x} must be nonzero and page "
                                        f"aligned")
        attrs = self._attributes(args, io.name)
        if args.op == k.KFD_IOCTL_SVM_OP_SET_ATTR:
            self._set(lo, lo + size, attrs, io.name)
        elif args.op == k.KFD_IOCTL_SVM_OP_GET_ATTR:
            self._get(lo, lo + size, attrs, io.name)
        else:
            raise OSError(errno.EINVAL, f"{io.name}: op {args.op} is neither SET_ATTR (0) nor GET_ATTR (1)")

    @staticmethod
    def _attributes(args, name: str):
        """The `nattr` attributes after the header, inside the bytes the request's size copied in (the thunk puts
        the attributes' size into the request). The kernel reads past its copy when nattr is larger; the
        emulator refuses."""
        views = [v for v in (args._objects or {}).values() if isinstance(v, memoryview)]  # the ioctl's kdata
        room = (views[0].nbytes if views else ctypes.sizeof(k.SvmArgs)) - ctypes.sizeof(k.SvmArgs)
        need = args.nattr * ctypes.sizeof(k.SvmAttribute)
        if need > room:
            raise OSError(errno.EINVAL, f"{name}: nattr {args.nattr} needs {need} bytes of attributes, the request "
                                        f"size carries {room}")
        base = ctypes.addressof(args) + ctypes.sizeof(k.SvmArgs)
        return (k.SvmAttribute * args.nattr).from_address(base) if args.nattr else []

    def _gpu_index(self, gpu_id: int) -> int | None:
        dev = self.driver.device_by_id(gpu_id)
        return None if dev is None else dev.index

    # -- SET_ATTR (svm_range_set_attr) -------------------------------------------------------------

    def _check_attrs(self, attrs, name: str) -> None:
        """svm_range_check_attr: known types; every GPU named is one of the process's."""
        for a in attrs:
            needs_gpu = (a.type == k.KFD_IOCTL_SVM_ATTR_PREFERRED_LOC and a.value not in (SYSMEM, UNDEFINED)
                         or a.type == k.KFD_IOCTL_SVM_ATTR_PREFETCH_LOC and a.value != SYSMEM
                         or a.type in _ACCESS_TYPES)
            if a.type > k.KFD_IOCTL_SVM_ATTR_GRANULARITY:
                raise OSError(errno.EINVAL, f"{name}: unknown attribute type {a.type}")
            if needs_gpu and self._gpu_index(a.value) is None:
                raise OSError(errno.EINVAL, f"{name}: attribute type {a.type} names gpu_id 0x{a.value:x}, which "
                                            f"is no GPU of this process")

    def _check_valid(self, lo: int, hi: int, name: str) -> list[tuple[int, int, str]]:
        """svm_range_is_valid: mapped memory of the process throughout, and no BO mapped on a GPU there."""
        vmas = host_vmas(lo, hi)
        pos = lo
        for a, b, _ in vmas:
            if a > pos:
                break
            pos = max(pos, b)
        if pos < hi:
            raise OSError(errno.EFAULT, f"{name}: 0x{pos:x} is not mapped in the process (range 0x{lo:x}+"
                                        f"{hi - lo:#x}; mappings there: {_vmas_text(vmas)})")
        for table in self.driver.memory.on:
            for start, end, bo in table.by_va.overlapping(lo, hi):
                if bo.mapped:
                    raise OSError(errno.EADDRINUSE, f"{name}: range 0x{lo:x}+{hi - lo:#x} meets BO 0x{bo.handle:x} "
                                                    f"mapped at 0x{start:x}+{end - start:#x}")
        return vmas

    def _set(self, lo: int, hi: int, attrs, name: str) -> None:
        self._check_attrs(attrs, name)
        vmas = self._check_valid(lo, hi, name)
        extent = self._split_and_fill(lo, hi)
        for r in self._meeting(lo, hi):
            self._apply(r, attrs)
        self._remap(extent[0], extent[1], vmas, name)

    def _meeting(self, lo: int, hi: int) -> list[SvmRange]:
        i = max(bisect.bisect_right([r.start for r in self.ranges], lo) - 1, 0)
        out = []
        while i < len(self.ranges) and self.ranges[i].start < hi:
            if self.ranges[i].end > lo:
                out.append(self.ranges[i])
            i += 1
        return out

    def _new_range(self, start: int, end: int) -> SvmRange:
        everyone = set(range(len(self.driver.devices))) if self.driver.xnack else set()
        return SvmRange(start, end, access=everyone)  # svm_range_new: XNACK on gives every GPU access

    def _split_and_fill(self, lo: int, hi: int) -> tuple[int, int]:
        """svm_range_add: ranges crossing lo or hi are split there, the holes in [lo, hi) become new ranges.
        Returns the extent whose GPU mappings must be redone (the old ranges' full extent and [lo, hi))."""
        old = self._meeting(lo, hi)
        extent = (min([lo] + [r.start for r in old]), max([hi] + [r.end for r in old]))
        pieces: list[SvmRange] = []
        pos = lo
        for r in old:
            if r.start < lo:
                pieces.append(r.piece(r.start, lo))
            if r.start > pos:
                pieces.append(self._new_range(pos, r.start))
            pieces.append(r.piece(max(r.start, lo), min(r.end, hi)))
            if r.end > hi:
                pieces.append(r.piece(hi, r.end))
            pos = min(r.end, hi)
        if pos < hi:
            pieces.append(self._new_range(pos, hi))
        kept = [r for r in self.ranges if not any(r is o for o in old)]
        self.ranges = sorted(kept + pieces, key=lambda r: r.start)
        return extent

    def _apply(self, r: SvmRange, attrs) -> None:
        """svm_range_apply_attrs."""
        for a in attrs:
            t = a.type
            if t == k.KFD_IOCTL_SVM_ATTR_PREFERRED_LOC:
                r.preferred = a.value
            elif t == k.KFD_IOCTL_SVM_ATTR_PREFETCH_LOC:
                r.prefetch = a.value
            elif t in _ACCESS_TYPES:
                gpu = self._gpu_index(a.value)
                r.access.discard(gpu)
                r.in_place.discard(gpu)
                if t == k.KFD_IOCTL_SVM_ATTR_ACCESS:
                    r.access.add(gpu)
                elif t == k.KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE:
                    r.in_place.add(gpu)
            elif t == k.KFD_IOCTL_SVM_ATTR_SET_FLAGS:
                r.flags |= a.value
            elif t == k.KFD_IOCTL_SVM_ATTR_CLR_FLAGS:
                r.flags &= ~a.value
            elif t == k.KFD_IOCTL_SVM_ATTR_GRANULARITY:
                r.granularity = min(a.value, MAX_GRANULARITY)

    # -- GPU page tables ---------------------------------------------------------------------------

    def _unmap_extent(self, lo: int, hi: int) -> None:
        for index, maps in self.mapped.items():
            space = self.driver.devices[index].gpu.memory
            for start in [s for s, e in maps.items() if s < hi and lo < e]:
                space.unmap(start)
                del maps[start]

    def _remap(self, lo: int, hi: int, vmas: list[tuple[int, int, str]], name: str) -> None:
        """Redo the GPU mappings of every range in [lo, hi) (svm_range_validate_and_map)."""
        self._unmap_extent(lo, hi)
        if not any(r.mapped_on() for r in self._meeting(lo, hi)):
            return
        vmas = vmas if vmas and vmas[0][0] <= lo and vmas[-1][1] >= hi else host_vmas(lo, hi)
        for r in self._meeting(lo, hi):
            gpus = sorted(r.mapped_on())
            if not gpus:
                continue
            perms = [p for a, b, p in vmas if a < r.end and r.start < b]
            if not perms or any(p[0] != "r" for p in perms):  # hmm_range_fault cannot fault such pages in
                raise OSError(errno.EFAULT, f"{name}: range 0x{r.start:x}+{r.end - r.start:#x} is not readable "
                                            f"memory of the process; cannot map it on a GPU (mappings there: "
                                            f"{_vmas_text([v for v in vmas if v[0] < r.end and r.start < v[1]])})")
            writable = all(p[1] == "w" for p in perms) and not r.flags & k.KFD_IOCTL_SVM_FLAG_GPU_RO
            for index in gpus:
                dev = self.driver.devices[index]
                if dev.drm_file is None:  # no VM on that GPU yet: nothing to map into
                    continue
                try:
                    dev.gpu.memory.map(r.start, r.end - r.start, "userptr", writable=writable,
                                       executable=bool(r.flags & k.KFD_IOCTL_SVM_FLAG_GPU_EXEC),
                                       name=f"svm 0x{r.start:x}")
                except ValueError as e:
                    raise OSError(errno.EADDRINUSE, f"{name}: cannot map SVM range 0x{r.start:x} on {dev.label}: "
                                                    f"{e}")
                self.mapped[index][r.start] = r.end

    def cpu_unmapped(self, lo: int, hi: int) -> None:
        """The process unmaps (or maps over) [lo, hi) through the emulator: those pages leave SVM and every GPU page
        table at once; the rest of the ranges they cut keeps its attributes and mappings."""
        if not self._meeting(lo, hi):
            return
        start, end = self._split_and_fill(lo, hi)
        self.ranges = [r for r in self.ranges if r.end <= lo or r.start >= hi]  # the new default pieces go too
        self._unmap_extent(start, end)
        outside = [(a, b) for a, b in ((start, lo), (hi, end)) if b > a]
        for a, b in outside:
            if any(r.mapped_on() for r in self._meeting(a, b)):
                self._remap(a, b, host_vmas(a, b), "munmap")

    def revalidate(self) -> None:
        """Before the GPUs run: pages the CPU unmapped leave SVM and every GPU page table (svm_range_unmap_from_cpu).
        One msync probe per range; the parts still mapped keep their attributes."""
        gone = [r for r in self.ranges if not host_range_mapped(r.start, r.end - r.start)]
        for r in gone:
            vmas = host_vmas(r.start, r.end)
            self._unmap_extent(r.start, r.end)
            self.ranges.remove(r)
            kept = [r.piece(max(a, r.start), min(b, r.end)) for a, b, _ in vmas]
            self.ranges = sorted(self.ranges + kept, key=lambda x: x.start)
            if kept:
                self._remap(r.start, r.end, vmas, "SVM revalidation")

    # -- GET_ATTR (svm_range_get_attr) -------------------------------------------------------------

    def _get(self, lo: int, hi: int, attrs, name: str) -> None:
        self._check_valid(lo, hi, name)
        for a in attrs:
            if a.type in (k.KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE, k.KFD_IOCTL_SVM_ATTR_NO_ACCESS) or \
                    a.type > k.KFD_IOCTL_SVM_ATTR_GRANULARITY:
                raise OSError(errno.EINVAL, f"{name}: GET_ATTR cannot ask for attribute type {a.type}")
        ranges = self._meeting(lo, hi)
        everyone = set(range(len(self.driver.devices)))
        if not ranges:  # the defaults
            preferred = prefetch = UNDEFINED
            granularity, flags_and, flags_or = DEFAULT_GRANULARITY, DEFAULT_FLAGS, DEFAULT_FLAGS
            access, in_place = (everyone if self.driver.xnack else set()), set()
        else:
            preferred = self._agreed([r.preferred for r in ranges])
            prefetch = self._agreed([r.prefetch for r in ranges])
            granularity = min(r.granularity for r in ranges)
            flags_and, flags_or = 0xFFFFFFFF, 0
            access, in_place = set(everyone), set(everyone)
            for r in ranges:
                flags_and &= r.flags
                flags_or |= r.flags
                access &= r.access
                in_place &= r.in_place
        for a in attrs:  # filled in order: a bad gpu_id fails with the earlier ones already written back
            t = a.type
            if t == k.KFD_IOCTL_SVM_ATTR_PREFERRED_LOC:
                a.value = preferred
            elif t == k.KFD_IOCTL_SVM_ATTR_PREFETCH_LOC:
                a.value = prefetch
            elif t == k.KFD_IOCTL_SVM_ATTR_ACCESS:
                gpu = self._gpu_index(a.value)
                if gpu is None:
                    raise OSError(errno.EINVAL, f"{name}: ACCESS asks about gpu_id 0x{a.value:x}, which is no GPU "
                                                f"of this process")
                a.type = (k.KFD_IOCTL_SVM_ATTR_ACCESS if gpu in access else k.KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE
                          if gpu in in_place else k.KFD_IOCTL_SVM_ATTR_NO_ACCESS)
            elif t == k.KFD_IOCTL_SVM_ATTR_SET_FLAGS:
                a.value = flags_and
            elif t == k.KFD_IOCTL_SVM_ATTR_CLR_FLAGS:
                a.value = ~flags_or & 0xFFFFFFFF
            elif t == k.KFD_IOCTL_SVM_ATTR_GRANULARITY:
                a.value = granularity

    @staticmethod
    def _agreed(values: list[int]) -> int:
        """A location over several ranges: the common one, UNDEFINED once any is undefined or two differ."""
        first = values[0]
        return first if all(v == first for v in values) else UNDEFINED

    def close(self) -> None:
        self._unmap_extent(0, 1 << 64)
        self.ranges.clear()
