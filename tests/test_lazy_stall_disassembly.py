"""A stalled packet's disassembly (Wait.packet, in deadlock and blocked reports) is made only when read, from what the
packet was when its queue stalled: the same text an eager disassembly at the stall gave, even after the host has
overwritten the packet's memory and rung the doorbell again (which makes the queue reload its dword cache)."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from hcqsim import EmulatedGPU, aql, pm4, sdma
from hcqsim.engines.aql import AQLQueue
from hcqsim.engines.queue import EngineQueue


@pytest.fixture
def eager(monkeypatch):
    """Records, at each stall, the text an eager disassembly gives then; the wait gets the lazy one."""
    seen: list[str | None] = []

    def recording(lazy):
        def both(self, stream, pos):
            seen.append(self.disassemble_at(stream, pos)[1])
            return lazy(self, stream, pos)
        return both

    for cls in (EngineQueue, AQLQueue):  # every definition of disassembly_later
        monkeypatch.setattr(cls, "disassembly_later", recording(cls.__dict__["disassembly_later"]))
    return seen


def _signal(g: EmulatedGPU, value: int) -> int:
    s = g.alloc(64)
    s.view[:32] = np.frombuffer(struct.pack("<qqQI4x", 1, value, 0, 0), np.uint8)
    return s.va


def _overwrite_and_ring(g: EmulatedGPU, q, offset: int, new: bytes, filler) -> None:
    """Overwrite the ring bytes of the stalled packet, then submit more (the doorbell drops the cached dwords)."""
    g.memory.write(q.ring_va + offset, new)
    q.submit(filler)


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_pm4_wait_reg_mem_text_is_the_one_at_the_stall(eager, target):
    with EmulatedGPU(target=target, seed=0) as g:
        flag = g.alloc(4096)
        q = g.compute_queue()
        q.submit(pm4.wait_reg_mem(flag.va, 0x1234))
        assert q.wait is not None and len(eager) == 1 and "WAIT_REG_MEM" in eager[0]
        other = np.array(pm4.wait_reg_mem(flag.va + 64, 0x9999), np.uint32).tobytes()
        _overwrite_and_ring(g, q, q.wait.ring_offset, other, pm4.nop(2))
        assert q.disassemble_at(q.ring, q.ring.pos)[1] != eager[0]  # the packet's memory now reads differently
        assert q.wait.packet == eager[0]
        assert g.blocked()[0].packet == eager[0]


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_sdma_poll_regmem_text_is_the_one_at_the_stall(eager, target):
    with EmulatedGPU(target=target, seed=0) as g:
        flag = g.alloc(4096)
        q = g.sdma_queue()
        q.submit(sdma.poll_regmem(flag.va, 0x1234))
        assert q.wait is not None and len(eager) == 1 and "POLL_REGMEM" in eager[0]
        other = np.array(sdma.poll_regmem(flag.va + 64, 0x9999), np.uint32).tobytes()
        _overwrite_and_ring(g, q, q.wait.ring_offset, other, sdma.nop())
        assert q.disassemble_at(q.ring, q.ring.pos)[1] != eager[0]
        assert q.wait.packet == eager[0]


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_aql_barrier_text_is_the_one_at_the_stall(eager, target):
    with EmulatedGPU(target=target, seed=0) as g:
        q = g.aql_queue()
        a, b = _signal(g, 1), _signal(g, 1)
        q.submit(aql.barrier_packet([a]))
        assert q.wait is not None and len(eager) == 1 and "BARRIER_AND" in eager[0]
        g.memory.write(q.ring_va + q.wait.ring_offset, aql.barrier_packet([b]))  # the host reuses the slot
        assert q.disassemble_at(q.ring, q.ring.pos)[1] != eager[0]
        assert q.wait.packet == eager[0]


def test_the_text_is_made_once_and_only_when_read(monkeypatch):
    with EmulatedGPU(target="gfx1100", seed=0) as g:
        flag = g.alloc(4096)
        q = g.compute_queue()
        calls = []
        real = type(q).disassemble_at
        monkeypatch.setattr(type(q), "disassemble_at", lambda self, s, p: calls.append(p) or real(self, s, p))
        q.submit(pm4.wait_reg_mem(flag.va, 1))
        assert q.wait is not None and calls == []
        text = q.wait.packet
        assert "WAIT_REG_MEM" in text and q.wait.packet == text and len(calls) == 1
