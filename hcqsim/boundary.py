"""The one narrow OS boundary the runtime talks through: the interface and its constants.

Everything the runtime needs from the kernel goes through an `OSBoundary`: open a device file, ioctl with
a ctypes UAPI struct, mmap/munmap, read the sysfs topology, ring a doorbell (a 64-bit store) and a
memory fence. `hcqsim.runtime.real_os.RealOS` does it with os/fcntl/libc on /dev/kfd and
/dev/dri/renderD*; the emulated driver (`hcqsim.kfd.EmulatedOS`) implements the same methods over
`EmulatedGPU`s. Both sides import this module and neither imports the other: `open_device` (or the pytest
plugin) picks the implementation.

Errors are the kernel's: a failing ioctl raises `OSError` with the errno the driver returned.
"""
from __future__ import annotations

import abc
import ctypes
import os

PROT_NONE, PROT_READ, PROT_WRITE, PROT_EXEC = 0x0, 0x1, 0x2, 0x4
MAP_SHARED, MAP_PRIVATE, MAP_FIXED, MAP_ANONYMOUS, MAP_NORESERVE = 0x01, 0x02, 0x10, 0x20, 0x4000

KFD_PATH = "/dev/kfd"
SYSFS_TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology"


class OSBoundary(abc.ABC):
    """The interface. Every method mirrors one system call (or one CPU store) of a KFD runtime."""

    emulated = False
    # Optional, emulator only: an object with `observed(address)` and `stored(address, size)` that the runtime calls
    # when the host reads or writes a signal's value, so the emulator's memory model (report mode) orders the host
    # after the GPU work whose value it saw and the GPU work it releases after the host (docs/memory_model.md,
    # "Happens-before"). None: nobody listens (real hardware, or no memory model).
    host_order = None

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

    def deadlock_report(self) -> "list | None":
        """Optional, emulator only: when the machine behind this boundary can no longer change without the host
        (every queue idle or blocked on memory), the blocked queues (`errors.BlockedQueue`, possibly none);
        otherwise, and wherever the platform cannot tell (real hardware: this default), None.

        A runtime that is itself the only host thread may treat a report as a deadlock at once, with the full
        diagnosis, instead of sleeping out its timeout; WAIT_EVENTS itself keeps the kernel's contract (a
        finite timeout returns KFD_IOC_WAIT_RESULT_TIMEOUT)."""
        return None

    def fault_details(self, gpu_id: int) -> list[str]:
        """Extra text about recent GPU faults, where the platform can tell (the emulator can; a real
        kernel only logs them), for DeviceFault reports."""
        return []
