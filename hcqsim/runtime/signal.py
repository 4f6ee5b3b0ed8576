"""Signals: 16 bytes of GPU-visible memory, a 64-bit value and a 64-bit timestamp.

The GPU writes them with end-of-pipe RELEASE_MEM (compute) or FENCE / TIMESTAMP (copy); the CPU reads
and writes them directly (they live in coherent, uncached GTT). Values the GPU writes are 32-bit
(RELEASE_MEM DATA_SEL 1, one SDMA FENCE), so the device keeps timeline values below 2^32.
"""
from __future__ import annotations

import ctypes
import numbers
from typing import TYPE_CHECKING

from ..errors import DeadlockError, DeviceFault, DeviceTimeout
from .names import creation_site

if TYPE_CHECKING:
    from .device import Device

SIGNAL_SIZE = 16
VALUE_OFFSET, TIMESTAMP_OFFSET = 0, 8
TICKS_PER_US = 100  # the GPU reference counter runs at 100 MHz
SIGNAL_VALUE_LIMIT = 1 << 32  # the GPU writes and compares 32-bit signal values


def check_signal_value(value: int, what: str = "signal value") -> int:
    """`value` if the GPU can write and compare it (0 <= value < 2^32), else ValueError. One rule for
    new_signal, Signal.value = ..., wait and the queue builders, so no path accepts what another refuses."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{what} must be an int (0 <= value < 2**32), got {type(value).__name__} {value!r}")
    if not 0 <= value < SIGNAL_VALUE_LIMIT:
        raise ValueError(f"{what} {value!r} is outside the 32 bits the GPU writes and compares "
                         f"(0 <= value < 2**32)")
    return int(value)


class Signal:
    def __init__(self, device: "Device", va: int, value: int = 0, *, name: str | None = None,
                 created_at: str | None = None, number: int = 0):
        self.device, self.va = device, va
        # how failure reports name it (runtime/names.py): `name` if given, else `#number`, and the user's line
        self.name, self.created_at, self.number = name, created_at or creation_site(), number
        self.freed_at: str | None = None  # where free_signal was called, once it was
        self.page = None  # the Buffer (page) holding the slot, set by the device
        # engine -> ring submission seq of the last submission naming this signal: the slot may be handed
        # out again only once those have completed (a queued packet may still write it)
        self.last_use: dict[str, int] = {}
        self.value = value
        self.timestamp = 0

    def check_live(self) -> "Signal":
        """This signal, if it may be used: not freed, and its device not closed (DeviceClosedError)."""
        self.device._check_open()
        if self.freed_at is not None:
            raise ValueError(f"{self!r} of {self.device.label} was freed ({self.freed_at}); it cannot be used")
        return self

    @property
    def value_addr(self) -> int:
        return self.va + VALUE_OFFSET

    @property
    def timestamp_addr(self) -> int:
        return self.va + TIMESTAMP_OFFSET

    @property
    def value(self) -> int:
        if self.freed_at is not None or self.device._closed:  # never read a freed slot (under the sanitizer
            self.check_live()  # its page is unmapped) nor the memory of a closed device
        value = ctypes.c_uint64.from_address(self.value_addr).value
        order = self.device.os.host_order  # the emulator's memory model: the host saw this value (boundary.py)
        if order is not None:
            order.observed(self.value_addr)
        return value

    @value.setter
    def value(self, v: int) -> None:
        self.check_live()
        ctypes.c_uint64.from_address(self.value_addr).value = check_signal_value(v)
        order = self.device.os.host_order  # the emulator's memory model: the host released this value
        if order is not None:
            order.stored(self.value_addr, 8)

    @property
    def timestamp(self) -> int:
        """Raw 100 MHz GPU ticks written by the last timestamp() command."""
        self.check_live()
        return ctypes.c_uint64.from_address(self.timestamp_addr).value

    @timestamp.setter
    def timestamp(self, v: int) -> None:
        self.check_live()
        if not isinstance(v, numbers.Integral) or not 0 <= v < 1 << 64:
            raise TypeError(f"Signal.timestamp must be a 64-bit unsigned int, got {type(v).__name__} {v!r}")
        ctypes.c_uint64.from_address(self.timestamp_addr).value = v

    @property
    def timestamp_us(self) -> float:
        return self.timestamp / TICKS_PER_US

    def wait(self, value: int, timeout_ms: int = 30_000) -> None:
        """Until the low 32 bits of the value reach `value` (the GPU compares 32 bits too)."""
        self.device.wait_signal(self, check_signal_value(value, "wait value"), timeout_ms)

    def __repr__(self) -> str:
        if self.freed_at is not None or self.device._closed:
            return f"Signal(0x{self.va:x}, {'freed' if self.freed_at else 'device closed'})"
        return f"Signal(0x{self.va:x}, value={self.value})"


def __tracebackhide__(excinfo) -> bool:
    """pytest hides Signal.wait's frame when the wait ended in the runtime's own error (runtime/device.py)."""
    return excinfo is not None and excinfo.errisinstance((DeadlockError, DeviceFault, DeviceTimeout))
