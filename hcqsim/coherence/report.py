"""A memory-model report: one load (or release) that could have observed a stale line or a write not yet
written back, with both sides named and the cache operation that was missing, as the facts name it."""
from __future__ import annotations

from dataclasses import dataclass, field

# The operations a report may name as missing (HARDWARE_FACTS 6.2-6.4): gfx11 GCR names, gfx9 CP_COHER / EOP
# names, and the two that are not cache bits.
MISSING_NAMES = ("GL2_WB", "GL2_INV", "GLV_INV", "GL1_INV", "GLK_INV", "GLI_INV",  # gfx11 GCR_CNTL
                 "TC_WB", "TC", "TCL1", "SH_KCACHE", "SH_ICACHE",  # gfx9 CP_COHER_CNTL / RELEASE_MEM EOP bits
                 "HDP flush", "CS_PARTIAL_FLUSH")


@dataclass(eq=False)
class MemoryReport:
    """What `system.memory_reports` (and `gpu.memory_reports`) hold.

    `kind` is a short category: "stale line" (a cache level held an older copy than memory), "not written back"
    (a reader that bypasses a write-back cache read memory under a dirty line), "unflushed host write" (HDP),
    "no partial flush" (CP work or a dispatch not ordered after a running dispatch). `writer` and `reader` name
    queue + packet or kernel + PC (or "the host"); `missing` the flush / invalidate / write-back, e.g. "GL2_WB".
    `count` is how many accesses the record stands for (repeats of the same pair are merged into one record,
    its range widened)."""

    kind: str
    address: int
    size: int
    writer: str
    reader: str
    missing: str
    gpu: str = ""
    level: str = ""  # the cache level holding the line (GLV, GL1, GLK, GLI, GL2, HDP), "" when none applies
    detail: str = ""  # one sentence: why it matters
    count: int = 1
    key: tuple = field(default=(), repr=False)  # what repeats merge on

    @property
    def end(self) -> int:
        return self.address + self.size

    def widen(self, address: int, size: int) -> None:
        """Merge a repeat: the record's range grows to cover [address, address + size)."""
        lo, hi = min(self.address, address), max(self.end, address + size)
        self.address, self.size = lo, hi - lo
        self.count += 1

    def __str__(self) -> str:
        where = f" on {self.gpu}" if self.gpu else ""
        level = f" ({self.level})" if self.level else ""
        lines = [f"memory model: {self.kind}{level}{where}, missing {self.missing}",
                 f"  address: 0x{self.address:x}..0x{self.end:x} ({self.size} bytes)"
                 f"{f', {self.count} accesses' if self.count > 1 else ''}",
                 f"  writer:  {self.writer}",
                 f"  reader:  {self.reader}"]
        if self.detail:
            lines.append(f"  why:     {self.detail}")
        return "\n".join(lines)


# Every record a machine whose model came from HCQSIM_MEMORY_MODEL (built without memory_model=) added, oldest first
# (bounded): the pytest plugin's check of a whole run under HCQSIM_MEMORY_MODEL looks here, since tests may build
# machines the plugin never sees; a machine given its model explicitly is the test's own business (its records are
# what it checks), so they are not collected.
SEEN: list[MemoryReport] = []
SEEN_LIMIT = 10_000


class ReportLog:
    """The reports of one machine: a list (shared by its GPUs) plus the index that merges repeats. `watched`:
    the machine's model came from the environment, so its records also go to SEEN."""

    def __init__(self, records: list | None = None, limit: int = 1000, watched: bool = False):
        self.records: list[MemoryReport] = [] if records is None else records
        self.limit = limit
        self.watched = watched
        self._by_key: dict[tuple, MemoryReport] = {}

    def add(self, record: MemoryReport) -> MemoryReport:
        """Append `record`, or widen the earlier record with the same key (kind, missing, writer, reader, level)."""
        key = record.key or (record.kind, record.missing, record.writer, record.reader, record.level, record.gpu)
        old = self._by_key.get(key)
        if old is not None and old in self.records:
            old.widen(record.address, record.size)
            self._announce(old)  # a repeat is news to whoever cleared SEEN since (the plugin, at each test)
            return old
        if len(self.records) >= self.limit:  # a runaway of reports keeps the first ones
            self._announce(record)  # ...but SEEN still hears of it: a long-lived machine stays watched
            return record
        record.key = key
        self._by_key[key] = record
        self.records.append(record)
        self._announce(record)
        return record

    def _announce(self, record: MemoryReport) -> None:
        """Into SEEN, once since SEEN was last cleared. The pytest plugin clears SEEN before each test, so a record
        of a machine that outlives a test (module-scoped) and repeats in a later test -- merged into the record an
        earlier test made -- is that later test's too (tests/test_plugin_environment_model.py)."""
        if self.watched and len(SEEN) < SEEN_LIMIT and not any(r is record for r in SEEN):
            SEEN.append(record)
