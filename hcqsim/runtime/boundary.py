"""The one narrow OS boundary the runtime talks through.

Everything the runtime needs from the kernel goes through an `OSBoundary`: open a device file, ioctl with
a ctypes UAPI struct, mmap/munmap, read the sysfs topology, ring a doorbell (a 64-bit store) and a
memory fence. `RealOS` does it with os/fcntl/libc on /dev/kfd and /dev/dri/renderD*; the emulated driver
(`hcqsim.kfd.EmulatedOS`) implements the same methods over an `EmulatedGPU`. The runtime never imports
the emulator: `open_device` (or the pytest plugin) picks the implementation.

Errors are the kernel's: a failing ioctl raises `OSError` with the errno the driver returned.
"""
from __future__ import annotations

import abc
import ctypes
import ctypes.util
import fcntl
import os

PROT_NONE, PROT_READ, PROT_WRITE, PROT_EXEC = 0x0, 0x1, 0x2, 0x4
MAP_SHARED, MAP_PRIVATE, MAP_FIXED, MAP_ANONYMOUS, MAP_NORESERVE = 0x01, 0x02, 0x10, 0x20, 0x4000

KFD_PATH = "/dev/kfd"
SYSFS_TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology"


class OSBoundary(abc.ABC):
    """The interface. Every method mirrors one system call (or one CPU store) of a KFD runtime."""

    emulated = False

    @abc.abstractmethod
    def open(self, path: str, flags: int = os.O_RDWR | os.O_CLOEXEC) -> int:
        raise NotImplementedError

    @abc.abstractmethod
    def close(self, fd: int) -> None:
        raise NotImplementedError

    @abc.abstractmethod
    def ioctl(self, fd: int, request: int, arg: ctypes.Structure) -> None:
        """Issue `request` with `arg` (read and written in place). Raises OSError(errno) on failure."""
        raise NotImplementedError

    @abc.abstractmethod
    def mmap(self, addr: int, length: int, prot: int, flags: int, fd: int = -1, offset: int = 0) -> int:
        raise NotImplementedError

    @abc.abstractmethod
    def munmap(self, addr: int, length: int) -> None:
        raise NotImplementedError

    @abc.abstractmethod
    def read_text(self, path: str) -> str:
        """A sysfs file's contents."""
        raise NotImplementedError

    @abc.abstractmethod
    def listdir(self, path: str) -> list[str]:
        raise NotImplementedError

    @abc.abstractmethod
    def exists(self, path: str) -> bool:
        raise NotImplementedError

    @abc.abstractmethod
    def ring_doorbell(self, address: int, value: int) -> None:
        """A single 64-bit store of `value` to a mapped doorbell (after a full memory fence)."""
        raise NotImplementedError

    def fault_details(self, gpu_id: int) -> list[str]:
        """Extra text about recent GPU faults, where the platform can tell (the emulator can; a real
        kernel only logs them), for DeviceFault reports."""
        return []


# ---------------------------------------------------------------------------------------------------
# the real kernel


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
