"""`Buffer`: device memory as the runtime hands it out (an allocation, or a view of part of one), with its bounds and
liveness checks. `Device` (runtime/device.py, its allocation part in runtime/allocation.py) makes and frees them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .. import kfd_uapi as K
from .checks import expect

if TYPE_CHECKING:
    from .device import Device


@dataclass(eq=False)
class Buffer:
    """Device memory: `va` (the same address on CPU and GPU), `size`, and `view` (numpy uint8) when the CPU
    can see it. `offset(off, size)` makes a view: a Buffer over part of this one, with its own bounds."""

    device: "Device"
    va: int
    size: int
    alloc_size: int
    flags: int
    handle: int
    mmap_offset: int
    _view: np.ndarray | None  # the CPU view; read it as `view`, which refuses once the device is closed
    mapped_on: set
    root: "Buffer | None" = None  # for a view: the allocation it is part of
    base_offset: int = 0  # for a view: where it starts in `root`
    freed_at: str | None = None  # where free() was called, once it was
    # how failure reports name it (runtime/names.py); allocated_at is None for the runtime's own memory
    name: str | None = None
    allocated_at: str | None = None
    number: int = 0

    @property
    def view(self) -> np.ndarray | None:
        """numpy uint8 over the buffer's memory (None when the CPU cannot see it); DeviceClosedError once
        the device is closed (its memory may be gone: a view of it must not be handed out)."""
        if self.device._closed:
            self.device._check_open()
        return self._view

    @view.setter
    def view(self, value: np.ndarray | None) -> None:
        self._view = value

    @property
    def host_visible(self) -> bool:
        return self._view is not None

    @property
    def allocation(self) -> "Buffer":
        """The allocation this buffer is (or, for a view, is part of)."""
        return self.root or self

    @property
    def live(self) -> bool:
        return self.allocation.freed_at is None

    def offset(self, offset: int, size: int | None = None) -> "Buffer":
        """A view of `size` bytes (default: to the end) starting `offset` bytes into this buffer. Queue
        builders, copyin/copyout and kernels take it like a buffer and keep to its bounds."""
        expect(offset, int, "Buffer.offset: offset")
        size = self.size - offset if size is None else expect(size, int, "Buffer.offset: size")
        self.check_range(offset, size, "Buffer.offset")
        root = self.allocation
        view = None if self.view is None else self.view[offset:offset + size]
        return Buffer(self.device, self.va + offset, size, root.alloc_size, self.flags, self.handle, self.mmap_offset,
                      view, root.mapped_on, root=root, base_offset=self.base_offset + offset)

    def check_range(self, offset: int, nbytes: int, what: str, on: "Device | None" = None) -> None:
        """ValueError unless this buffer is live, [offset, offset+nbytes) lies inside it, and (given `on`)
        it is mapped on that device's GPU."""
        root = self.allocation
        if root.freed_at is not None:
            raise ValueError(f"{what}: {self!r} of {self.device.label} was freed ({root.freed_at})")
        if not (isinstance(offset, int) and isinstance(nbytes, int)) or offset < 0 or nbytes < 0 \
                or offset + nbytes > self.size:
            raise ValueError(f"{what}: range [{offset!r}, {offset!r} + {nbytes!r}) is outside {self!r} "
                             f"({self.size} bytes) of {self.device.label}")
        if on is not None and on.gpu_id not in root.mapped_on:
            raise ValueError(f"{what}: {self!r} of {self.device.label} is not mapped on {on.label}; peer-map it "
                             f"first (Device.map_to(buf, other))")

    def __repr__(self) -> str:
        if self.root is not None:
            return f"Buffer(0x{self.va:x}, {self.size} B, view at +{self.base_offset} of {self.root!r})"
        state = ", freed" if self.freed_at is not None else ""
        return f"Buffer(0x{self.va:x}, {self.size} B, {K.describe_alloc_flags(self.flags)}{state})"
