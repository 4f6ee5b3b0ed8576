"""The cache model of one GPU: the levels, the paths of each agent, the cache operations.

Skeleton: the hooks and the report entry point other parts build on (see /work/team/CONTRACT_memory_model.md).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..memory import AddressSpace
from .report import MemoryReport, ReportLog

# (address, bytes read from DRAM (a writable uint8 copy), reader) -> None: may change the bytes (adversarial) or
# record a report. Called for every DRAM read of a GPU engine the model performs: a miss fill, an uncached read.
DramReadHook = Callable[[int, np.ndarray, str], None]
# (address, size, writer) -> None: called after a GPU engine's write reached DRAM (write-through, write-back,
# uncached write).
DramWriteHook = Callable[[int, int, str], None]


class CacheModel:
    """`report` or `adversarial` model of one GPU (`gpu.coherence`)."""

    def __init__(self, gpu, mode: str, log: ReportLog):
        self.gpu, self.mode, self.log = gpu, mode, log
        self.adversarial = mode == "adversarial"
        self.dram_read_hooks: list[DramReadHook] = []
        self.dram_write_hooks: list[DramWriteHook] = []

    # -- reports ------------------------------------------------------------------------------------

    def report(self, kind: str, address: int, size: int, writer: str, reader: str, missing: str, *,
               level: str = "", detail: str = "") -> MemoryReport:
        """Record one hazard (repeats of the same writer/reader/missing pair widen the earlier record)."""
        return self.log.add(MemoryReport(kind, address, size, writer, reader, missing, gpu=self.gpu.label,
                                         level=level, detail=detail))

    # -- DRAM, where every level ends ----------------------------------------------------------------

    def dram_read(self, address: int, size: int, reader: str) -> np.ndarray:
        """A GPU engine reads DRAM (host pages): a writable copy, after the read hooks (HDP) had their say."""
        data = np.frombuffer(bytearray(AddressSpace.read(self.gpu.memory, address, size)), np.uint8)
        for hook in self.dram_read_hooks:
            hook(address, data, reader)
        return data

    def dram_written(self, address: int, size: int, writer: str) -> None:
        for hook in self.dram_write_hooks:
            hook(address, size, writer)
