"""GPU virtual memory: GPU VA equals host VA.

A `VaWindow` reserves a range of host address space (an anonymous PROT_NONE mapping at a fixed,
configurable base) and backs allocations inside it with real shared memory at the same address, so the
CPU (runtime, tests, numpy) and the emulated GPU see the same bytes. Python's `mmap` module cannot map
at a fixed address, hence libc through ctypes.

An `AddressSpace` is one GPU's page table: page-granular mappings with a kind and permissions. Every
engine access goes through `AddressSpace.check`, so a bad GPU address becomes a `VMFaultError` (which
the GPU records as a VM fault) instead of a segfault or a silent write.
"""
from __future__ import annotations

import bisect
import ctypes
import ctypes.util
import errno
import os
from dataclasses import dataclass

import numpy as np

from .errors import HcqsimError, VMFaultError

PAGE_SIZE = 4096

PROT_NONE, PROT_READ, PROT_WRITE = 0x0, 0x1, 0x2
MAP_SHARED, MAP_PRIVATE, MAP_FIXED, MAP_ANONYMOUS = 0x01, 0x02, 0x10, 0x20
MAP_NORESERVE, MAP_FIXED_NOREPLACE = 0x4000, 0x100000
MAP_FAILED = ctypes.c_void_p(-1).value



class _Kernel:
    """mmap/munmap of the emulator's own memory, as system calls: under hcqsim's LD_PRELOAD interposer (the
    in-process native host) libc's `mmap` symbol is the interposer's, which would route the emulator's own window
    and backing mappings back into the emulated driver."""

    _NUMBERS = {"x86_64": (9, 11), "aarch64": (222, 215)}  # (SYS_mmap, SYS_munmap)

    def __init__(self):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        numbers = self._NUMBERS.get(os.uname().machine)
        if numbers is None:  # elsewhere: libc's functions (no interposer there either)
            self.mmap, self.munmap = libc.mmap, libc.munmap
            self.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_long]
            self.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
            self.mmap.restype, self.munmap.restype = ctypes.c_void_p, ctypes.c_int
            return
        syscall = libc.syscall
        syscall.restype = ctypes.c_long
        syscall.argtypes = [ctypes.c_long] * 7
        nr_mmap, nr_munmap = numbers
        self.mmap = lambda addr, size, prot, flags, fd, off: _address(syscall(nr_mmap, addr or 0, size, prot, flags,
                                                                              fd, off))
        self.munmap = lambda addr, size: 0 if syscall(nr_munmap, addr, size, 0, 0, 0, 0) == 0 else -1


def _address(result: int) -> int:
    return MAP_FAILED if result == -1 else result & 0xFFFFFFFFFFFFFFFF


_libc = _Kernel()


class MemoryError_(HcqsimError):
    """Host-side memory management failed (window exhausted, bad range)."""


def page_align(n: int) -> int:
    return (n + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1)


def _mmap(addr: int, size: int, prot: int, flags: int) -> int:
    got = _libc.mmap(addr, size, prot, flags, -1, 0)
    if got in (None, MAP_FAILED):
        err = ctypes.get_errno()
        raise OSError(err, f"mmap(0x{addr:x}, 0x{size:x}) failed: {os.strerror(err)}")
    return got


def host_view(address: int, size: int) -> np.ndarray:
    """A numpy uint8 array over host memory at `address` (no copy, no check)."""
    if size == 0:
        return np.zeros(0, np.uint8)
    return np.frombuffer((ctypes.c_uint8 * size).from_address(address), dtype=np.uint8)


# ---------------------------------------------------------------------------------------------------
# the host side: a reserved window and deterministic allocation inside it

PARKED_LIMIT = 16  # closed windows kept mapped (see VaWindow.close); beyond this the oldest is really unmapped
_parked: dict[tuple[int, int], bool] = {}  # (base, size) of closed windows, oldest first


def _park(base: int, size: int) -> None:
    """Replace a closed window by one fresh anonymous mapping (its pages are freed; reads give zeros)."""
    flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED
    try:
        _mmap(base, size, PROT_READ | PROT_WRITE, flags)
    except OSError:  # strict overcommit refuses even NORESERVE writable memory: stale reads still work
        _mmap(base, size, PROT_READ, flags)
    _parked[(base, size)] = True
    while len(_parked) > PARKED_LIMIT:
        old = next(iter(_parked))
        del _parked[old]
        _libc.munmap(old[0], old[1])


def _unpark_overlapping(base: int, size: int) -> bool:
    """Really unmap the parked windows meeting [base, base+size); whether there were any."""
    hits = [(b, n) for b, n in _parked if b < base + size and base < b + n]
    for b, n in hits:
        del _parked[(b, n)]
        _libc.munmap(b, n)
    return bool(hits)


class VaWindow:
    """A reserved host VA range in which GPU memory is allocated at GPU VA == host VA.

    The window is placed at `preferred_base` when that range is free (MAP_FIXED_NOREPLACE) and at the
    next free slot of the same size otherwise. Allocation is first-fit by address, so the same sequence
    of calls gives the same addresses; `canonical(va)` rewrites an address as if the window sat at its
    preferred base, which keeps traces identical even when it could not.
    """

    DEFAULT_BASE = 0x2000_0000_0000
    DEFAULT_SIZE = 1 << 38  # 256 GiB of address space; only allocated pages cost memory

    def __init__(self, preferred_base: int = DEFAULT_BASE, size: int = DEFAULT_SIZE):
        if preferred_base % PAGE_SIZE or size % PAGE_SIZE or size <= 0:
            raise ValueError("window base and size must be page aligned")
        self.preferred_base, self.size = preferred_base, size
        self.base = self._reserve(preferred_base, size)
        self._free: list[tuple[int, int]] = [(self.base, self.base + size)]  # sorted, disjoint
        self._backed: dict[int, int] = {}  # va -> size of live allocations
        self._backed_starts: list[int] = []  # their addresses, sorted: overlap checks by bisection
        self.closed = False

    @staticmethod
    def _reserve(base: int, size: int) -> int:
        flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE
        for slot in range(64):
            want = base + slot * size
            if _parked.pop((want, size), None) is not None:  # a closed window's range: ours to take over
                return _mmap(want, size, PROT_NONE, flags | MAP_FIXED)
            try:
                got = _mmap(want, size, PROT_NONE, flags | MAP_FIXED_NOREPLACE)
            except OSError as e:
                if e.errno == errno.EEXIST and _unpark_overlapping(want, size):
                    try:  # parked windows of another size were in the way: they are gone now
                        got = _mmap(want, size, PROT_NONE, flags | MAP_FIXED_NOREPLACE)
                    except OSError:
                        continue
                elif e.errno in (errno.EEXIST, errno.ENOMEM):
                    continue
                else:
                    raise
            if got == want:
                return got
            _libc.munmap(got, size)  # old kernels ignore NOREPLACE and return a hint address
        raise MemoryError_(f"no free {size:#x}-byte window for GPU memory near 0x{base:x}")

    def contains(self, va: int, size: int = 1) -> bool:
        return self.base <= va and va + size <= self.base + self.size

    def canonical(self, va: int) -> int:
        """The address as it would be with the window at its preferred base (for traces)."""
        if self.contains(va):
            return va - self.base + self.preferred_base
        return va

    # -- allocation --------------------------------------------------------------------------------

    def allocate(self, size: int, align: int = PAGE_SIZE, at: int | None = None) -> int:
        """Reserve and back `size` bytes (rounded to pages) of zeroed shared memory; return the address."""
        va = self.reserve(size, align, at)
        self.back(va, size)
        return va

    def release(self, va: int) -> int:
        """Undo `allocate`: the range returns to the window's free space; its contents are gone."""
        size = self.unback(va)
        self.unreserve(va, size)
        return size

    def reserve(self, size: int, align: int = PAGE_SIZE, at: int | None = None) -> int:
        """Take a range out of the free space without backing it (still PROT_NONE)."""
        if size <= 0:
            raise ValueError(f"allocation size must be positive, got {size}")
        if align < PAGE_SIZE or align & (align - 1):
            raise ValueError(f"alignment must be a power of two >= {PAGE_SIZE}, got {align}")
        size = page_align(size)
        return self._take(size, align) if at is None else self._take_at(at, size)

    def unreserve(self, va: int, size: int) -> None:
        self._give(va, page_align(size))

    def back(self, va: int, size: int) -> None:
        """Back a reserved range with zeroed, read-write memory at the same address."""
        size = page_align(size)
        if not self.contains(va, size):
            raise MemoryError_(f"range 0x{va:x}+{size:#x} is outside the window")
        i = bisect.bisect_left(self._backed_starts, va + size)
        if i and (prev := self._backed_starts[i - 1]) + self._backed[prev] > va:
            raise MemoryError_(f"range 0x{va:x}+{size:#x} overlaps memory already backed")
        # private, not shared: adjacent private anonymous mappings merge into one kernel VMA, so 100,000 live
        # BOs do not hit vm.max_map_count (65530 by default); one process sees the same bytes either way
        _mmap(va, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED)
        self._backed[va] = size
        self._backed_starts.insert(i, va)

    def unback(self, va: int) -> int:
        """Return a backed range to PROT_NONE (still reserved); returns its size."""
        size = self._backed.pop(va, None)
        if size is None:
            raise MemoryError_(f"0x{va:x} is not a live allocation of this window")
        del self._backed_starts[bisect.bisect_left(self._backed_starts, va)]
        _mmap(va, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED)
        return size

    def allocation_size(self, va: int) -> int | None:
        return self._backed.get(va)

    def _take(self, size: int, align: int) -> int:
        for i, (lo, hi) in enumerate(self._free):
            start = (lo + align - 1) & ~(align - 1)
            if start + size <= hi:
                self._carve(i, start, start + size)
                return start
        raise MemoryError_(f"GPU VA window exhausted: no {size:#x} bytes free")

    def _take_at(self, va: int, size: int) -> int:
        if va % PAGE_SIZE:
            raise MemoryError_(f"address 0x{va:x} is not page aligned")
        i = bisect.bisect_right(self._free, (va, 1 << 64)) - 1
        if i < 0 or not (self._free[i][0] <= va and va + size <= self._free[i][1]):
            raise MemoryError_(f"range 0x{va:x}+{size:#x} is not free in the window")
        self._carve(i, va, va + size)
        return va

    def _carve(self, i: int, lo: int, hi: int) -> None:
        flo, fhi = self._free.pop(i)
        pieces = [(a, b) for a, b in ((flo, lo), (hi, fhi)) if b > a]
        self._free[i:i] = pieces

    def _give(self, va: int, size: int) -> None:
        """Return [va, va+size) to the free list, merged with the neighbours it touches (only they change)."""
        lo, hi = va, va + size
        i = bisect.bisect_left(self._free, (lo, hi))
        if i < len(self._free) and self._free[i][0] == hi:
            hi = self._free.pop(i)[1]
        if i and self._free[i - 1][1] == lo:
            i -= 1
            lo = self._free.pop(i)[0]
        self._free.insert(i, (lo, hi))

    def close(self) -> None:
        """Drop every page of the window at once, but keep its address range mapped (parked): a thread still
        reading or writing through an old pointer (a numpy view, a signal address) then sees fresh zero pages
        instead of a segfault. The next window wanting the same range takes the parked one over, so closed
        windows cost no memory and the same sequence of systems gets the same addresses."""
        if not self.closed:
            _park(self.base, self.size)
            self._backed.clear()
            self._backed_starts.clear()
            self.closed = True

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


# ---------------------------------------------------------------------------------------------------
# the GPU side: one page table per GPU

KINDS = ("vram", "gtt", "userptr", "doorbell", "mmio")


@dataclass(eq=False)
class Mapping:
    start: int
    end: int
    kind: str
    readable: bool = True
    writable: bool = True
    executable: bool = False
    name: str = ""
    origin: "Mapping | None" = None  # for a piece left by AddressSpace.punch: the mapping it was cut from
    host: int | None = None  # host address of `start`: `start` itself (GPU VA == host VA) unless the page table
    #                         maps these GPU pages onto host pages elsewhere (a USERPTR BO with va != its CPU address)

    def __post_init__(self):
        if self.host is None:
            self.host = self.start
        self.shift = self.host - self.start  # add to a GPU address in this mapping to get its host address
        # dword and qword views of the host memory behind the mapping: aligned scalar accesses index
        # these (much cheaper than a ctypes object per access)
        raw = memoryview((ctypes.c_char * (self.end - self.start)).from_address(self.host)).cast("B")
        self.u32, self.u64 = raw.cast("I"), raw.cast("Q")

    @property
    def size(self) -> int:
        return self.end - self.start

    def perms(self) -> str:
        return ("r" if self.readable else "-") + ("w" if self.writable else "-") + ("x" if self.executable else "-")


_PERM_ATTR = {"read": "readable", "write": "writable", "execute": "executable"}


class AddressSpace:
    """One GPU's virtual address space: which host ranges it may touch, and how.

    All engine memory traffic goes through the methods here. Each checks the whole range first and
    raises `VMFaultError` (nothing is written) when any byte is unmapped or lacks the permission.
    """

    def __init__(self):
        self._starts: list[int] = []
        self._maps: list[Mapping] = []
        self._last: Mapping | None = None
        self.holes: list[tuple[int, int, Mapping]] = []  # [lo, hi) punched out of a mapping (fault injection)

    # -- page table --------------------------------------------------------------------------------

    def map(self, va: int, size: int, kind: str, *, readable: bool = True, writable: bool = True,
            executable: bool = False, name: str = "", host: int | None = None) -> Mapping:
        """Map [va, va+size) onto the host memory at `host` (default: at `va` itself)."""
        if kind not in KINDS:
            raise ValueError(f"unknown mapping kind {kind!r}; expected one of {KINDS}")
        if va % PAGE_SIZE or size <= 0:
            raise ValueError(f"mapping 0x{va:x}+{size:#x} must start on a page and be non-empty")
        end = va + page_align(size)
        i = bisect.bisect_left(self._starts, va)
        if (i > 0 and self._maps[i - 1].end > va) or (i < len(self._maps) and self._maps[i].start < end):
            raise ValueError(f"mapping 0x{va:x}..0x{end:x} overlaps an existing mapping")
        m = Mapping(va, end, kind, readable, writable, executable, name, host=host)
        self._starts.insert(i, va)
        self._maps.insert(i, m)
        return m

    def unmap(self, va: int) -> Mapping:
        punched = next((o for _, _, o in self.holes if o.start == va), None)
        if punched is not None:  # a punched mapping goes whole: its pieces and its holes
            self._remove(lambda m: m.origin is punched)
            self.holes = [h for h in self.holes if h[2] is not punched]
            return punched
        i = bisect.bisect_left(self._starts, va)
        if i == len(self._starts) or self._starts[i] != va:
            raise ValueError(f"no mapping starts at 0x{va:x}")
        self._starts.pop(i)
        m = self._maps.pop(i)
        if self._last is m:
            self._last = None
        return m

    def punch(self, lo: int, hi: int) -> Mapping | None:
        """Take the pages of [lo, hi) out of the mapping holding `lo` (fault injection): a GPU access there is
        a VM fault, through every path (the pieces left are ordinary mappings). Returns the original mapping,
        or None when `lo` is not mapped. `unmap` of the original's start removes the pieces and the hole."""
        m = self.find(lo)
        if m is None:
            return None
        lo, hi = lo & ~(PAGE_SIZE - 1), min(page_align(hi), m.end)
        origin = m.origin or m
        self._remove(lambda x: x is m)
        for a, b in ((m.start, lo), (hi, m.end)):
            if b > a:
                piece = Mapping(a, b, m.kind, m.readable, m.writable, m.executable, m.name, origin,
                                m.host + a - m.start)
                i = bisect.bisect_left(self._starts, a)
                self._starts.insert(i, a)
                self._maps.insert(i, piece)
        self.holes.append((lo, hi, origin))
        return origin

    def _remove(self, which) -> None:
        keep = [m for m in self._maps if not which(m)]
        self._maps, self._starts = keep, [m.start for m in keep]
        self._last = None

    def find(self, addr: int) -> Mapping | None:
        m = self._last
        if m is not None and m.start <= addr < m.end:
            return m
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0 and addr < self._maps[i].end:
            self._last = self._maps[i]
            return self._last
        return None

    def mappings(self) -> list[Mapping]:
        return list(self._maps)

    # -- checks ------------------------------------------------------------------------------------

    def check(self, addr: int, size: int, access: str = "read") -> None:
        """Raise VMFaultError unless [addr, addr+size) is mapped with the permission `access`."""
        m = self._last
        attr = _PERM_ATTR[access]
        if m is not None and m.start <= addr and addr + size <= m.end and getattr(m, attr):
            return
        i = bisect.bisect_right(self._starts, addr) - 1  # inside one mapping that permits it: what the loop finds
        if i >= 0:
            m = self._maps[i]
            if addr < m.end and addr + size <= m.end and getattr(m, attr):
                self._last = m
                return
        if addr < 0 or addr + size > 1 << 64:
            raise VMFaultError(addr, size, access, "address outside the 64-bit space")
        pos, end = addr, addr + max(size, 1)
        while pos < end:  # a range may span several adjacent mappings
            m = self.find(pos)
            if m is None:
                raise VMFaultError(addr, size, access, f"page 0x{pos & ~(PAGE_SIZE - 1):x} is not mapped", page=pos)
            if not getattr(m, attr):
                raise VMFaultError(addr, size, access, f"mapping '{m.name or m.kind}' at 0x{m.start:x} is {m.perms()}",
                                   page=pos)
            pos = m.end

    # -- accesses ----------------------------------------------------------------------------------
    # A checked range's bytes are at its host address: the GPU address plus its mapping's shift (0 unless a
    # USERPTR maps host pages elsewhere), piece by piece when it spans mappings.

    def _host_pieces(self, addr: int, size: int) -> list[tuple[int, int]]:
        """(host address, length) of each mapping's part of the checked range [addr, addr+size)."""
        pieces, pos, end = [], addr, addr + size
        while pos < end:
            m = self.find(pos)
            n = min(m.end, end) - pos
            pieces.append((pos + m.shift, n))
            pos += n
        return pieces

    def _gather(self, addr: int, size: int) -> bytes:
        m = self.find(addr)
        if addr + size <= m.end:
            return ctypes.string_at(addr + m.shift, size)
        return b"".join(ctypes.string_at(h, n) for h, n in self._host_pieces(addr, size))

    def _scatter(self, addr: int, data: bytes) -> None:
        m = self.find(addr)
        if addr + len(data) <= m.end:
            ctypes.memmove(addr + m.shift, data, len(data))
            return
        done = 0
        for h, n in self._host_pieces(addr, len(data)):
            ctypes.memmove(h, data[done:done + n], n)
            done += n

    def read(self, addr: int, size: int) -> bytes:
        self.check(addr, size, "read")
        return self._gather(addr, size) if size > 0 else b""

    def write(self, addr: int, data: bytes | bytearray | memoryview) -> None:
        self.check(addr, len(data), "write")
        if len(data):
            self._scatter(addr, bytes(data))

    def read_u32(self, addr: int) -> int:
        m = self._last  # aligned, inside the last mapping used, permitted: one index (the common case)
        if m is not None and m.start <= addr and addr + 4 <= m.end and not addr & 3 and m.readable:
            return m.u32[(addr - m.start) >> 2]
        self.check(addr, 4, "read")
        return int.from_bytes(self._gather(addr, 4), "little")

    def read_u64(self, addr: int) -> int:
        m = self._last  # as read_u32
        if m is not None and m.start <= addr and addr + 8 <= m.end and not addr & 7 and m.readable:
            return m.u64[(addr - m.start) >> 3]
        self.check(addr, 8, "read")
        return int.from_bytes(self._gather(addr, 8), "little")

    def write_u32(self, addr: int, value: int) -> None:
        m = self._last  # as read_u32
        if m is not None and m.start <= addr and addr + 4 <= m.end and not addr & 3 and m.writable:
            m.u32[(addr - m.start) >> 2] = value & 0xFFFFFFFF
            return
        self.check(addr, 4, "write")
        m = self.find(addr)
        if addr + 4 <= m.end and not addr & 3:  # one aligned store, as the fast path
            m.u32[(addr - m.start) >> 2] = value & 0xFFFFFFFF
            return
        self._scatter(addr, (value & 0xFFFFFFFF).to_bytes(4, "little"))

    def write_u64(self, addr: int, value: int) -> None:
        """One 8-byte store (as a 64-bit signal write lands on hardware)."""
        m = self._last  # as read_u32
        if m is not None and m.start <= addr and addr + 8 <= m.end and not addr & 7 and m.writable:
            m.u64[(addr - m.start) >> 3] = value & 0xFFFFFFFFFFFFFFFF
            return
        self.check(addr, 8, "write")
        m = self.find(addr)
        if addr + 8 <= m.end and not addr & 7:
            m.u64[(addr - m.start) >> 3] = value & 0xFFFFFFFFFFFFFFFF
            return
        self._scatter(addr, (value & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little"))

    def read_dwords(self, addr: int, count: int) -> memoryview:
        """`count` dwords at `addr` as a memoryview of unsigned ints (a copy)."""
        return memoryview(self.read(addr, 4 * count)).cast("I")

    def copy(self, dst: int, src: int, size: int) -> None:
        """memmove within GPU memory, both ranges checked first."""
        if size <= 0:
            return
        s, d = self.find(src), self.find(dst)
        if s is not None and d is not None and src + size <= s.end and dst + size <= d.end and s.readable \
                and d.writable:  # each range inside one mapping that permits it: what the checks pass
            ctypes.memmove(dst + d.shift, src + s.shift, size)
            return
        self.check(src, size, "read")
        self.check(dst, size, "write")
        s, d = self.find(src), self.find(dst)
        if src + size <= s.end and dst + size <= d.end:
            ctypes.memmove(dst + d.shift, src + s.shift, size)
        else:  # spans mappings: through a copy (memmove's overlap rule holds)
            self._scatter(dst, self._gather(src, size))

    def fill(self, dst: int, pattern: bytes, size: int) -> None:
        """Fill `size` bytes with a repeated pattern (1, 2, 4 or 8 bytes long)."""
        if size <= 0:
            return
        self.check(dst, size, "write")
        m = self.find(dst)
        if dst + size > m.end:  # spans mappings
            self._scatter(dst, np.resize(np.frombuffer(pattern, np.uint8), size).tobytes())
            return
        view = host_view(dst + m.shift, size)
        if len(pattern) == 1 or len(set(pattern)) == 1:
            view.fill(pattern[0])
            return
        view[:] = np.resize(np.frombuffer(pattern, np.uint8), size)
