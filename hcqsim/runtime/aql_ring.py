"""A compute queue of type COMPUTE_AQL as the runtime drives it (`open_device(..., aql=True)`).

The command builders stay the same: `ComputeQueue.exec` on an AQL device emits an `AqlDispatch` (an
hsa_kernel_dispatch_packet_t; the CP derives registers and user SGPRs from the kernel descriptor itself),
and every run of PM4 packets between dispatches (signals, waits, copies, fills, timestamps, barriers, IB
jumps) goes into an indirect buffer that an AMD vendor PM4_IB packet runs, as ROCr's AqlQueue::ExecutePM4
does. Ring and IB arena space are reclaimed through the same private progress signal as `HardwareRing`.

Producer protocol (HARDWARE_FACTS 5.5): ring slots start INVALID; each 64-byte packet's body is written
first and its header+setup word last, then write_dispatch_id (amd_queue_t @56) is stored and the doorbell
rung with the index of the last packet written.
"""
from __future__ import annotations

import ctypes
import struct
from typing import TYPE_CHECKING

from .. import pm4
from .. import aql
from ..errors import QueueError
from .queues import HardwareRing, _pack

if TYPE_CHECKING:
    from .device import Device
    from .signal import Signal

IB_ARENA = 1 << 18  # PM4 bytes in flight for one queue's vendor packets


class AqlDispatch(list):
    """A kernel dispatch packet in a builder's packet list: its 16 dwords, plus the queue scratch the
    kernel needs ((TMPRING_SIZE, base) — the CP reads them from amd_queue_t, not from the packet)."""

    def __init__(self, raw: bytes, scratch: tuple[int, int] = (0, 0)):
        super().__init__(struct.unpack("<16I", raw))
        self.raw, self.scratch = raw, scratch


class AqlRing(HardwareRing):
    """One COMPUTE_AQL KFD queue: ring of AQL packets, an amd_queue_t block, an IB arena for the PM4."""

    def __init__(self, device: "Device", queue_id: int, ring_va: int, ring_size: int, amd_queue_va: int,
                 doorbell: int, progress: "Signal", ib_va: int, ib_size: int = IB_ARENA):
        super().__init__(device, "compute", queue_id, ring_va, ring_size, amd_queue_va + aql.QUEUE_WRITE_DISPATCH_ID,
                         amd_queue_va + aql.QUEUE_READ_DISPATCH_ID, doorbell, progress)
        self.amd_queue_va, self.unit = amd_queue_va, aql.PACKET_SIZE
        self.ib_va, self.ib_size = ib_va, ib_size
        self.ib_put = self.ib_reclaimed = 0  # unwrapped IB arena positions, like put / reclaimed
        self.ib_pending: dict[int, int] = {}  # progress seq -> IB arena end of that submission
        self.tmpring = 0

    def _layout(self, packets: list[list[int]]) -> list[AqlDispatch | bytes]:
        """Dispatches as they are; each run of PM4 between them as one IB's bytes."""
        out: list[AqlDispatch | bytes] = []
        run: list[bytes] = []
        for p in packets:
            if isinstance(p, AqlDispatch):
                if run:
                    out.append(b"".join(run))
                    run = []
                out.append(p)
            else:
                run.append(_pack(p))
        if run:
            out.append(b"".join(run))
        return out

    def _ib_places(self, entries) -> tuple[list[int], int]:
        """Arena positions of the IBs (an IB never straddles the arena end) and the arena end after them."""
        pos, places = self.ib_put, []
        for e in entries:
            if isinstance(e, bytes):
                if pos % self.ib_size + len(e) > self.ib_size:
                    pos += self.ib_size - pos % self.ib_size
                places.append(pos)
                pos += (len(e) + 63) & ~63
        return places, pos

    def submit(self, packets: list[list[int]]) -> int:
        seq = (self.seq + 1) % (1 << 32)
        entries = self._layout(packets + [self._progress_packet(seq)])
        need = aql.PACKET_SIZE * len(entries)
        ib_bytes = sum(len(e) for e in entries if isinstance(e, bytes))
        if need > self.ring_size or ib_bytes + need > self.ib_size // 2:  # with wrap padding it fits when drained
            raise QueueError(f"AQL submission of {len(entries)} packets / {ib_bytes} PM4 bytes does not fit in the "
                             f"{self.ring_size}-byte ring / {self.ib_size}-byte IB arena of {self.device.label}")
        places, ib_end = self._ib_places(entries)
        while (self.put + need - self.reclaimed > self.ring_size
               or ib_end - self.ib_reclaimed > self.ib_size):  # wait for older submissions: nothing written yet
            end, old = self.pending.popleft()
            if (self.progress.value & 0xFFFFFFFF) < old:  # a fence that landed needs no wait (nor its fault poll)
                self.device.wait_value(self.progress, old, f"AQL ring space (submission {old})")
            self.reclaimed, self.ib_reclaimed = end, self.ib_pending.pop(old, self.ib_reclaimed)
        ib_iter = iter(places)
        for e in entries:
            if isinstance(e, AqlDispatch):
                if e.scratch[1]:  # the queue's scratch: base and the largest wave size asked for
                    self.tmpring = max(self.tmpring, e.scratch[0])
                    q = self.amd_queue_va
                    ctypes.c_uint32.from_address(q + aql.QUEUE_TMPRING_SIZE).value = self.tmpring
                    ctypes.c_uint64.from_address(q + aql.QUEUE_SCRATCH_BASE).value = e.scratch[1]
                raw = e.raw
            else:
                at = next(ib_iter)
                va = self.ib_va + at % self.ib_size
                ctypes.memmove(va, e, len(e))
                raw = aql.pm4_ib_packet(va, len(e) // 4)
            self._write_packet(raw)
        self.ib_put = ib_end
        self.seq = seq
        self.pending.append((self.put, seq))
        self.ib_pending[seq] = ib_end
        index = self.put // aql.PACKET_SIZE
        ctypes.c_uint64.from_address(self.wptr_va).value = index  # write_dispatch_id
        self.device.os.ring_doorbell(self.doorbell, index - 1)  # the last packet's index
        return seq

    def _write_packet(self, raw: bytes) -> None:
        slot = self.ring_va + self.put % self.ring_size
        ctypes.memmove(slot + 4, raw[4:], aql.PACKET_SIZE - 4)
        ctypes.c_uint32.from_address(slot).value = struct.unpack_from("<I", raw)[0]  # header last
        self.put += aql.PACKET_SIZE

    def read_pointer(self) -> int:
        return (ctypes.c_uint64.from_address(self.rptr_va).value * aql.PACKET_SIZE) % self.ring_size

    def describe_state(self) -> str:
        rptr = self.read_pointer()
        dws = list(struct.unpack("<16I", ctypes.string_at(self.ring_va + rptr, aql.PACKET_SIZE)))
        try:
            text = aql.describe(dws)
            if dws[0] & 0xFF == aql.TYPE_VENDOR:
                ib = dws[1 + 1] | (dws[1 + 2] & 0xFFFF) << 32
                n = dws[1 + 3] & 0xFFFFF
                text += "; IB: " + pm4.disassemble(list(struct.unpack(f"<{n}I", ctypes.string_at(ib, 4 * n))),
                                                  self.device.family).replace("\n", "; ")
        except Exception as e:  # a report must not fail on a garbled ring
            text = f"(undecodable: {e})"
        return (f"AQL compute queue {self.queue_id}: read_dispatch_id {rptr // aql.PACKET_SIZE} (slot), "
                f"write_dispatch_id {self.put // aql.PACKET_SIZE}, packet at rptr: {text}")
