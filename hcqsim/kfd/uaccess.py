"""copy_from_user / copy_to_user for the emulated driver: a bad user pointer becomes OSError(EFAULT), as the
kernel returns, instead of a segfault of the interpreter.

The probing copy goes through process_vm_readv/writev on our own pid, which the kernel checks page by
page; where those calls are forbidden (seccomp), a pipe does the same job.
"""
from __future__ import annotations

import ctypes
import errno
import os
import re

from ..memory import PAGE_SIZE

TASK_SIZE_MAX = (1 << 47) - PAGE_SIZE  # x86-64 access_ok() bound
# include/linux/slab.h: KMALLOC_SHIFT_MAX = MAX_PAGE_ORDER (10) + PAGE_SHIFT (12) for SLUB; kmalloc/kzalloc/
# kmalloc_array/memdup_user of more than this fail (NULL: the ioctls answer -ENOMEM) without allocating anything
KMALLOC_MAX_SIZE = 1 << 22


def kmalloc_check(nbytes: int, what: str) -> None:
    """OSError(ENOMEM) where the kernel's kmalloc of `nbytes` for a user-given count fails: the count is
    checked before the emulator allocates anything for it."""
    if nbytes > KMALLOC_MAX_SIZE:
        raise OSError(errno.ENOMEM, f"{what}: {nbytes:#x} bytes is more than kmalloc gives "
                                    f"(KMALLOC_MAX_SIZE {KMALLOC_MAX_SIZE:#x})")


def access_ok(addr: int, size: int) -> bool:
    """x86-64 access_ok(): the range lies below the user address-space limit."""
    return addr + size <= TASK_SIZE_MAX


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.process_vm_readv.restype = _libc.process_vm_writev.restype = ctypes.c_ssize_t
_libc.write.restype = _libc.read.restype = ctypes.c_ssize_t
_libc.write.argtypes = _libc.read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
_libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
MS_ASYNC = 1
_use_pipe = False  # set when process_vm_* is unavailable (seccomp); then a pipe does the probing copy


def _vm_copy(func, local: int, remote: int, n: int) -> bool:
    global _use_pipe
    lo, re = _Iovec(local, n), _Iovec(remote, n)
    got = func(os.getpid(), ctypes.byref(lo), 1, ctypes.byref(re), 1, 0)
    if got == n:
        return True
    if got < 0 and ctypes.get_errno() in (errno.ENOSYS, errno.EPERM):
        _use_pipe = True
    return False


def _pipe_copy(src: int, dst: int, n: int) -> bool:
    """Move n bytes src -> dst through a pipe: the kernel reports EFAULT for a bad side instead of a SIGSEGV."""
    r, w = os.pipe()
    try:
        done = 0
        while done < n:
            chunk = min(n - done, 1 << 16)
            if _libc.write(w, src + done, chunk) != chunk or _libc.read(r, dst + done, chunk) != chunk:
                return False
            done += chunk
        return True
    finally:
        os.close(r)
        os.close(w)


def read_user(addr: int, n: int) -> bytes:
    """copy_from_user: n bytes at a user address, or OSError(EFAULT)."""
    buf = ctypes.create_string_buffer(max(n, 1))
    if n and not (0 < addr and access_ok(addr, n)):
        raise OSError(errno.EFAULT, f"bad user address 0x{addr:x} (+{n} bytes)")
    ok = n == 0 or (not _use_pipe and _vm_copy(_libc.process_vm_readv, ctypes.addressof(buf), addr, n))
    if not ok and _use_pipe:
        ok = _pipe_copy(addr, ctypes.addressof(buf), n)
    if not ok:
        raise OSError(errno.EFAULT, f"cannot read {n} bytes of user memory at 0x{addr:x}")
    return buf.raw[:n]


def write_user(addr: int, data: bytes) -> None:
    """copy_to_user: store bytes at a user address, or OSError(EFAULT)."""
    n = len(data)
    if n and not (0 < addr and access_ok(addr, n)):
        raise OSError(errno.EFAULT, f"bad user address 0x{addr:x} (+{n} bytes)")
    buf = ctypes.create_string_buffer(bytes(data), max(n, 1))
    ok = n == 0 or (not _use_pipe and _vm_copy(_libc.process_vm_writev, ctypes.addressof(buf), addr, n))
    if not ok and _use_pipe:
        ok = _pipe_copy(ctypes.addressof(buf), addr, n)
    if not ok:
        raise OSError(errno.EFAULT, f"cannot write {n} bytes of user memory at 0x{addr:x}")


IOV_MAX = 1024  # UIO_MAXIOV: iovecs one process_vm_readv takes


def probe_user_pages(addr: int, npages: int) -> None:
    """`read_user(addr + i * PAGE_SIZE, 1)` for each page i in order (get_user_pages: every page must exist), with
    one process_vm_readv per IOV_MAX pages (a one-byte iovec per page: the kernel stops at the first that faults).
    A batch that does not read whole goes page by page from where it stopped, so the OSError is read_user's own
    for the first page that fails."""
    import numpy as np  # (here: the driver's other user copies do not need it)
    if anonymous_readable(addr, npages * PAGE_SIZE):
        return  # every byte of readable anonymous memory reads (untouched pages as zeros): no page can fail
    i = 0
    while i < npages:
        k = min(IOV_MAX, npages - i)
        first = addr + i * PAGE_SIZE
        got = -1
        if not _use_pipe and 0 < first and access_ok(first + (k - 1) * PAGE_SIZE, 1):
            remote = np.empty((k, 2), np.uint64)  # struct iovec {base, len} per page
            remote[:, 0] = first + PAGE_SIZE * np.arange(k, dtype=np.uint64)
            remote[:, 1] = 1
            local = ctypes.create_string_buffer(k)
            got = _libc.process_vm_readv(os.getpid(), ctypes.byref(_Iovec(ctypes.addressof(local), k)), 1,
                                         ctypes.c_void_p(remote.ctypes.data), k, 0)
        for j in range(max(got, 0), k) if got != k else ():
            read_user(first + j * PAGE_SIZE, 1)  # raises for the first page that cannot be read
        i += k


_MAPS_LINE = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ (\S+) (\d+)\s*(.*)$")


def anonymous_readable(addr: int, size: int) -> bool:
    """Whether [addr, addr+size) lies in private anonymous mappings (no file: inode 0, no path, or the [heap]) that
    are readable, one after another without a gap (/proc/self/maps). False whenever unsure."""
    pos, end = addr, addr + size
    with open("/proc/self/maps") as f:
        for line in f:
            m = _MAPS_LINE.match(line)
            if m is None:
                return False
            a, b = int(m[1], 16), int(m[2], 16)
            if b <= pos:
                continue
            if a > pos or m[3][0] != "r" or m[3][3] != "p" or m[5] != "0" or m[6] not in ("", "[heap]"):
                return False
            pos = b
            if pos >= end:
                return True
    return False


def host_range_mapped(addr: int, size: int) -> bool:
    """Whether every page of [addr, addr+size) is mapped in this process (msync answers ENOMEM otherwise;
    MS_ASYNC does no I/O). Protection is not checked."""
    lo = addr & ~(PAGE_SIZE - 1)
    return _libc.msync(lo, addr + size - lo, MS_ASYNC) == 0
