"""`CachedSpace`: the GPU's address space when a memory model is on (report / adversarial).

The engines keep calling `gpu.memory.read/write/...`; here those accesses take the path of whoever makes them
(`model.agent`, set by the GPU's scheduler for the activity it advances): the CP (a GL2 client that does not
allocate on reads; its plain writes go through GL2 to memory), SDMA 5/6 (the same), SDMA 4 (around GL2).
With no agent (the host, the driver) an access is plain memory, as before. Explicit forms the CP's packets
choose (`write_l2`: a write left dirty in GL2) are methods of their own. Checks and faults are unchanged:
every range is checked before the model sees it.
"""
from __future__ import annotations

import numpy as np

from ..memory import AddressSpace, Mapping


class CachedSpace(AddressSpace):
    model = None  # the CacheModel (set once by the GPU)

    # -- who is accessing -----------------------------------------------------------------------------------

    def _engine(self):
        """(queue, route for reads, route for writes) of the current agent, or None for the host."""
        agent = self.model.agent
        if agent is None:
            return None
        q = agent if agent.kind == "queue" else agent.queue
        if q.engine == "sdma" and not self.model.sdma_through_gl2:
            return q, "dram", "dram"
        return q, "gl2", "through"

    def _pieces(self, addr: int, size: int):
        """(mapping, offset in it, bytes, offset in the access) for a checked range spanning mappings."""
        pos, end = addr, addr + size
        while pos < end:
            m = self.find(pos)
            n = min(end, m.end) - pos
            yield m, pos - m.start, n, pos - addr
            pos += n

    # -- reads ------------------------------------------------------------------------------------------------

    def read(self, addr: int, size: int) -> bytes:
        self.check(addr, size, "read")
        who = self._engine()
        if who is None:
            return AddressSpace.read(self, addr, size)
        q, route, _ = who
        model = self.model
        out = bytearray(size)
        reader = lambda: f"queue {q.name} (engine read)"
        for m, off, n, at in self._pieces(addr, size):
            out[at:at + n] = model.engine_read(model.state(m), off, n, route, reader).tobytes()
        return bytes(out)

    def read_u32(self, addr: int) -> int:
        if self.model.agent is None:
            return AddressSpace.read_u32(self, addr)
        return int.from_bytes(self.read(addr, 4), "little")

    def read_u64(self, addr: int) -> int:
        if self.model.agent is None:
            return AddressSpace.read_u64(self, addr)
        return int.from_bytes(self.read(addr, 8), "little")

    def ifetch(self, addr: int, size: int) -> bytes:
        """Instruction fetch bypassing the model (the shader's GLI path is `coherence.lanes`)."""
        return AddressSpace.read(self, addr, size)

    # -- writes ----------------------------------------------------------------------------------------------

    def _write(self, addr: int, data: bytes, route: str | None) -> None:
        self.check(addr, len(data), "write")
        who = self._engine()
        if who is None:
            AddressSpace.write(self, addr, data)
            return
        q, _, default = who
        model = self.model
        writer = model.engine_actor(q)
        arr = np.frombuffer(bytes(data), np.uint8)
        for m, off, n, at in self._pieces(addr, len(data)):
            model.engine_write(model.state(m), off, arr[at:at + n], route or default, writer)

    def write(self, addr: int, data) -> None:
        self._write(addr, data, None)

    def write_l2(self, addr: int, data) -> None:
        """A CP write into GL2 (WRITE_DATA / COPY_DATA DST_SEL TC_L2 and the like): left dirty for VRAM."""
        self._write(addr, data, "l2" if self._engine() is not None and self._engine()[2] == "through" else None)

    def write_u32(self, addr: int, value: int) -> None:
        if self.model.agent is None:
            AddressSpace.write_u32(self, addr, value)
            return
        self._write(addr, (value & 0xFFFFFFFF).to_bytes(4, "little"), None)

    def write_u64(self, addr: int, value: int) -> None:
        if self.model.agent is None:
            AddressSpace.write_u64(self, addr, value)
            return
        self._write(addr, (value & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little"), None)

    def copy(self, dst: int, src: int, size: int) -> None:
        if size <= 0:
            return
        if self.model.agent is None:
            AddressSpace.copy(self, dst, src, size)
            return
        self.check(src, size, "read")
        self.check(dst, size, "write")
        self._write(dst, self.read(src, size), None)

    def fill(self, dst: int, pattern: bytes, size: int) -> None:
        if size <= 0:
            return
        if self.model.agent is None:
            AddressSpace.fill(self, dst, pattern, size)
            return
        self.check(dst, size, "write")
        reps = -(-size // len(pattern))
        self._write(dst, (bytes(pattern) * reps)[:size], None)

    # -- the page table ------------------------------------------------------------------------------------

    def unmap(self, va: int) -> Mapping:
        m = AddressSpace.unmap(self, va)
        for x in [x for x in self.model.states if x is m or x.origin is m]:
            self.model.forget(x)
        return m
