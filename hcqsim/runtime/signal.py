"""Signals: 16 bytes of GPU-visible memory, a 64-bit value and a 64-bit timestamp.

The GPU writes them with end-of-pipe RELEASE_MEM (compute) or FENCE / TIMESTAMP (copy); the CPU reads
and writes them directly (they live in coherent, uncached GTT). Values the GPU writes are 32-bit
(RELEASE_MEM DATA_SEL 1, one SDMA FENCE), so the device keeps timeline values below 2^32.
"""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .device import Device

SIGNAL_SIZE = 16
VALUE_OFFSET, TIMESTAMP_OFFSET = 0, 8
TICKS_PER_US = 100  # the GPU reference counter runs at 100 MHz


class Signal:
    def __init__(self, device: "Device", va: int, value: int = 0):
        self.device, self.va = device, va
        self.value = value
        self.timestamp = 0

    @property
    def value_addr(self) -> int:
        return self.va + VALUE_OFFSET

    @property
    def timestamp_addr(self) -> int:
        return self.va + TIMESTAMP_OFFSET

    @property
    def value(self) -> int:
        return ctypes.c_uint64.from_address(self.value_addr).value

    @value.setter
    def value(self, v: int) -> None:
        ctypes.c_uint64.from_address(self.value_addr).value = v

    @property
    def timestamp(self) -> int:
        """Raw 100 MHz GPU ticks written by the last timestamp() command."""
        return ctypes.c_uint64.from_address(self.timestamp_addr).value

    @timestamp.setter
    def timestamp(self, v: int) -> None:
        ctypes.c_uint64.from_address(self.timestamp_addr).value = v

    @property
    def timestamp_us(self) -> float:
        return self.timestamp / TICKS_PER_US

    def wait(self, value: int, timeout_ms: int = 30_000) -> None:
        """Until the low 32 bits of the value reach `value` (the GPU compares 32 bits too)."""
        self.device.wait_signal(self, value, timeout_ms)

    def __repr__(self) -> str:
        return f"Signal(0x{self.va:x}, value={self.value})"
