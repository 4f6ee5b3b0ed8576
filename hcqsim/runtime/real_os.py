"""The real kernel behind the OS boundary: /dev/kfd and /dev/dri/renderD* through os, fcntl and libc."""
from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import os

from ..boundary import OSBoundary


class RealOS(OSBoundary):
    """/dev/kfd and /dev/dri/renderD* through os, fcntl and libc. Untestable without an AMD GPU: keep it thin."""

    def __init__(self):
        self._libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self._libc.mmap.restype = ctypes.c_void_p
        self._libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                    ctypes.c_long]
        self._libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        try:  # a full fence before the doorbell store; libatomic exports C11 atomic_thread_fence
            fence = ctypes.CDLL(ctypes.util.find_library("atomic") or "libatomic.so.1").atomic_thread_fence
            fence.argtypes = [ctypes.c_int]
            self._fence = lambda: fence(5)  # memory_order_seq_cst
        except (OSError, AttributeError):
            self._fence = lambda: None  # x86 TSO: stores to WB memory are ordered; the UC doorbell store drains WC

    def open(self, path: str, flags: int = os.O_RDWR | os.O_CLOEXEC) -> int:
        return os.open(path, flags)

    def close(self, fd: int) -> None:
        os.close(fd)

    def ioctl(self, fd: int, request: int, arg: ctypes.Structure) -> None:
        fcntl.ioctl(fd, request, arg, True)

    def mmap(self, addr: int, length: int, prot: int, flags: int, fd: int = -1, offset: int = 0) -> int:
        if offset >= 1 << 63:  # KFD offsets set bit 63 (doorbell/event types): pass off_t's bit pattern
            offset -= 1 << 64
        got = self._libc.mmap(addr, length, prot, flags, fd, offset)
        if got in (None, ctypes.c_void_p(-1).value):
            err = ctypes.get_errno()
            raise OSError(err, f"mmap: {os.strerror(err)}")
        return got

    def munmap(self, addr: int, length: int) -> None:
        if self._libc.munmap(addr, length) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"munmap: {os.strerror(err)}")

    def read_text(self, path: str) -> str:
        with open(path) as f:
            return f.read()

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def ring_doorbell(self, address: int, value: int) -> None:
        self._fence()
        ctypes.c_uint64.from_address(address).value = value
