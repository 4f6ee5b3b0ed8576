"""Command queues: builders of PM4 (compute) and SDMA (copy) command lists, and the hardware rings
they are submitted to.

A `ComputeQueue` / `CopyQueue` collects packets (built with the packet tables of `hcqsim.pm4` and
`hcqsim.sdma`) through chainable calls; `submit(device)` writes them into that device's ring for the
engine, stores the write pointer and rings the doorbell, all through the OS boundary and memory.
"""
from __future__ import annotations

import ctypes
import functools
import struct
from collections import deque
from typing import TYPE_CHECKING, Union

import numpy as np

from .. import pm4, sdma
from ..errors import QueueError
from ..registers import HDP_FLUSH_SDMA0, hdp_flush_registers
from ..targets import get_target
from .signal import SIGNAL_VALUE_LIMIT, Signal, check_signal_value

if TYPE_CHECKING:
    from .device import Buffer, Device

Address = Union["Buffer", int]

PM4_DMA_MAX = (1 << 26) - 1  # DMA_DATA BYTE_COUNT is 26 bits
SDMA_COPY_MAX = 1 << 22  # 4 MiB: always legal on every SDMA generation (HARDWARE_FACTS 5.2)
SDMA_RING_ALIGN = 32  # bytes: an SDMA INDIRECT ends on an 8-dword boundary of the ring (HARDWARE_FACTS 5.2)
__all__ = ["ComputeQueue", "CopyQueue", "HardwareRing", "SIGNAL_VALUE_LIMIT", "SDMA_COPY_MAX", "PM4_DMA_MAX"]


def _check_value(value: int) -> int:
    return check_signal_value(value)


def _check_size(nbytes: int, what: str) -> int:
    if not isinstance(nbytes, int) or isinstance(nbytes, bool):
        raise TypeError(f"{what}: size must be an int, got {type(nbytes).__name__} {nbytes!r}")
    if nbytes < 0:
        raise ValueError(f"{what}: size {nbytes!r} must be a non-negative integer")
    return nbytes


def chunks(total: int, limit: int):
    off = 0
    while off < total:
        n = min(limit, total - off)
        yield off, n
        off += n


class HWQueue:
    """A list of packets for one engine, built by chainable calls."""

    engine = ""

    def __init__(self, device: "Device", index: int = 0):
        self.device, self.index = device, index  # index: which of the device's hardware queues of this engine
        self.packets: list[list[int]] = []
        self.signals: list[Signal] = []  # every signal a packet names: it may not be reused before they ran
        self.released: list[tuple[Signal, int]] = []  # (signal, value) the packets set
        self.buffers: list["Buffer"] = []  # every Buffer a packet names (checked again if submitted elsewhere)
        self.kernarg_arenas: list = []  # the device's kernarg arenas its kernels' arguments are in

    def _add(self, dws: list[int]) -> "HWQueue":
        self.packets.append(dws)
        return self

    def _sig(self, signal: Signal, value: int | None = None) -> Signal:
        check_usable_signal(signal, self.device, f"{self.engine} queue")
        self.signals.append(signal)
        if value is not None:
            self.released.append((signal, value))
        return signal

    def _va(self, x: Address, nbytes: int, what: str) -> int:
        """The address of `x`; a Buffer (or view) must be live, mapped on this device and hold `nbytes`."""
        from .device import Buffer
        if isinstance(x, int) and not isinstance(x, bool):
            if not 0 <= x < 1 << 64:
                raise ValueError(f"{self.engine} queue {what}: address {x:#x} is not a 64-bit address")
            return x
        if not isinstance(x, Buffer):
            raise TypeError(f"{self.engine} queue {what} must be a Buffer or an int address, got "
                            f"{type(x).__name__} {x!r}")
        x.check_range(0, nbytes, f"{self.engine} queue {what}", on=self.device)
        return x.va

    def _track(self, *xs: Address) -> None:
        """Remember the Buffers a packet names, once nothing about the packet can be refused any more."""
        self.buffers += [x for x in xs if not isinstance(x, int)]

    def submit(self, device: "Device | None" = None) -> None:
        target = device or self.device
        if target is not self.device:
            for buf in self.buffers:
                buf.check_range(0, 0, f"{self.engine} queue submitted to {target.label}", on=target)
            for sig in self.signals:
                check_usable_signal(sig, target, f"{self.engine} queue submitted to {target.label}")
        target.submit_packets(self.engine, self.packets, self.signals, self.released, index=self.index,
                              kernargs=self.kernarg_arenas)

    def disassemble(self) -> str:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self.packets)


# the cache actions of an end-of-pipe release, per family (ComputeQueue._release)
_RELEASE_CACHE = {"gfx11": dict(gcr_seq=1, gl2_wb=1, gl2_inv=1, gl1_inv=1, glv_inv=1, glm_wb=1, glm_inv=1, cache_policy=3),
                  "gfx9": dict(tc_wb_action_ena=1, tc_nc_action_ena=1)}


class ComputeQueue(HWQueue):
    """PM4 packets for a compute (MEC) queue."""

    engine = "compute"

    @property
    def _family(self) -> str:
        return self.device.family

    def _release(self, addr: int, data: int, data_sel: int, int_sel: int = 0, ctxid: int = 0) -> list[int]:
        # End-of-pipe release with write-back so the CPU and other engines see prior writes (facts 6.2).
        family = self.device.family
        return pm4.release_mem(addr, data, data_sel=data_sel, int_sel=int_sel, ctxid=ctxid, family=family,
                               **_RELEASE_CACHE["gfx11" if family == "gfx11" else "gfx9"])

    def wait(self, signal: Signal, value: int) -> "ComputeQueue":
        return self._add(pm4.wait_reg_mem(self._sig(signal).value_addr, _check_value(value), function=5))

    def signal(self, signal: Signal, value: int) -> "ComputeQueue":
        self._add(self._release(self._sig(signal, _check_value(value)).value_addr, value, data_sel=1))
        slot, event_id = self.device.completion_slot()  # wake host waiters: mailbox, then interrupt
        return self._add(self._release(slot, event_id, data_sel=1, int_sel=2, ctxid=event_id))

    def timestamp(self, signal: Signal) -> "ComputeQueue":
        return self._add(self._release(self._sig(signal).timestamp_addr, 0, data_sel=3))

    def memory_barrier(self) -> "ComputeQueue":
        """So this queue sees what other agents wrote (facts 6.3, 6.4): an HDP flush (the host's stores to VRAM
        through its mapping), then the full cache acquire, as tinygrad's memory_barrier."""
        self._add(hdp_flush_packet(self.device.target))
        return self._add(full_acquire(self._family))

    def copy(self, dst: Address, src: Address, nbytes: int) -> "ComputeQueue":
        _check_size(nbytes, "copy")
        d, s = self._va(dst, nbytes, "copy destination"), self._va(src, nbytes, "copy source")
        self._track(dst, src)
        for off, n in chunks(nbytes, PM4_DMA_MAX):
            self._add(pm4.dma_data(d + off, s + off, n))
        return self

    def fill(self, dst: Address, value: int, nbytes: int) -> "ComputeQueue":
        d = self._va(dst, _check_size(nbytes, "fill"), "fill destination")
        _check_fill(d, nbytes)
        self._track(dst)
        for off, n in chunks(nbytes, PM4_DMA_MAX & ~3):
            self._add(pm4.dma_data(d + off, value & 0xFFFFFFFF, n, src_sel=2))
        return self

    def exec(self, program, args, global_size, local_size) -> "ComputeQueue":
        """Launch `program` over `global_size` work-items in groups of `local_size` (1 to 3 dims each).
        `args` are buffers (or addresses) and numbers, in the kernel's order. Everything that can refuse is
        checked before the kernarg arena, the dispatch id, scratch or this queue change."""
        from . import program as P
        from .device import Buffer
        P.check_program(program, self.device)
        gsize, lsize = P.launch_dims(global_size, "global_size"), P.launch_dims(local_size, "local_size")
        ndims = max(len(global_size) if not isinstance(global_size, int) else 1,
                    len(local_size) if not isinstance(local_size, int) else 1)
        if lsize[0] * lsize[1] * lsize[2] > 1024:
            raise ValueError(f"workgroup {lsize} has more than 1024 work-items")
        launch = P.Launch(gsize, lsize, ndims)
        if not isinstance(args, (list, tuple)):
            raise TypeError(f"exec: args must be a list or tuple of buffers and numbers, got {type(args).__name__}")
        buffers = [a for a in args if isinstance(a, Buffer)]
        for b in buffers:  # live and mapped here
            b.check_range(0, 0, f"{self.engine} queue kernel argument", on=self.device)
        k = program.kernel
        ka_size = (k.kernarg_segment_size + 63) & ~63
        extra = (P.AQL_PACKET_SIZE if k.enable_sgpr_dispatch_ptr else 0) + \
            (P.QUEUE_DESCRIPTOR_SIZE if k.enable_sgpr_queue_ptr else 0)
        staged = np.zeros(ka_size + extra, np.uint8)
        P.write_kernargs(k, staged, args, launch)  # argument count, kinds and values: refused here, if at all
        P.user_sgprs(k, 0, 0, 0, 0)
        if k.uses_dynamic_stack:
            raise ValueError(f"{k.name} uses a dynamic stack: its scratch size is unknown at dispatch")
        if k.private_segment_fixed_size:
            P.scratch_layout(k.private_segment_fixed_size, self._family)
        va, view = self.device.kernarg_alloc(ka_size + extra, self)  # refuses an oversized segment before taking it
        # -- nothing is refused from here on --
        self.buffers += buffers
        view[:] = staged
        dispatch_ptr = queue_ptr = 0
        pos = ka_size
        if k.enable_sgpr_dispatch_ptr:
            dispatch_ptr = va + pos
            view[pos:pos + P.AQL_PACKET_SIZE] = memoryview(P.aql_packet(k, program.descriptor_va, va, launch)).cast("B")
            pos += P.AQL_PACKET_SIZE
        if k.enable_sgpr_queue_ptr:
            queue_ptr = va + pos
        user = P.user_sgprs(k, dispatch_ptr, queue_ptr, va, self.device.next_dispatch_id())
        scratch = (0, 0)
        if k.private_segment_fixed_size:
            tmpring, nbytes = P.scratch_layout(k.private_segment_fixed_size, self._family)
            scratch = (tmpring, self.device.scratch_memory(nbytes).va)
        if self.device.aql:  # the CP builds registers and user SGPRs from the descriptor itself
            from .. import aql
            from .aql_ring import AqlDispatch
            if k.uses_dynamic_stack:
                raise ValueError(f"{k.name} uses a dynamic stack: its scratch size is unknown at dispatch")
            return self._add(AqlDispatch(aql.kernel_dispatch_packet(
                program.descriptor_va, va, gsize, lsize, dims=ndims, private_segment_size=k.private_segment_fixed_size,
                group_segment_size=k.group_segment_fixed_size), scratch))
        for packet in P.dispatch_packets(program, launch, user, self._family, scratch):
            self._add(packet)
        return self

    def disassemble(self) -> str:
        from ..aql import describe
        from .aql_ring import AqlDispatch
        parts: list[str] = []
        run: list[int] = []
        for p in self.packets:  # on an AQL device kernels are AQL packets between runs of PM4
            if isinstance(p, AqlDispatch):
                if run:
                    parts.append(pm4.disassemble(run, self._family))
                    run = []
                parts.append(describe(list(p)))
            else:
                run += p
        if run:
            parts.append(pm4.disassemble(run, self._family))
        return "\n".join(parts)


class CopyQueue(HWQueue):
    """SDMA packets for a copy queue."""

    engine = "copy"

    @property
    def _version(self) -> str:
        return self.device.sdma_version

    def wait(self, signal: Signal, value: int) -> "CopyQueue":
        return self._add(sdma.poll_regmem(self._sig(signal).value_addr, _check_value(value), mask=0xFFFFFFFF, func=5,
                                           version=self._version))

    def signal(self, signal: Signal, value: int) -> "CopyQueue":
        self._add(sdma.fence(self._sig(signal, _check_value(value)).value_addr, value, self._version))
        slot, event_id = self.device.completion_slot()  # wake host waiters: mailbox, then trap
        self._add(sdma.fence(slot, event_id, self._version))
        return self._add(sdma.trap(event_id, self._version))

    def timestamp(self, signal: Signal) -> "CopyQueue":
        return self._add(sdma.timestamp_global(self._sig(signal).timestamp_addr, self._version))

    def memory_barrier(self) -> "CopyQueue":
        """So this queue sees what other agents wrote: an HDP flush (POLL_REGMEM HDP_FLUSH, facts 5.2/6.4: the
        host's stores to VRAM), then write back and invalidate the caches SDMA goes through (GCR_REQ 0xC3A1; SDMA
        4.x has none: it goes around L2)."""
        engines = max(1, self.device.node.props.get("num_sdma_engines", 1))
        # this engine's client bit in GPU_HDP_FLUSH_REQ/DONE: sdma0 bit 10, sdma1 bit 11 (facts 5.2)
        req, done = hdp_flush_registers_of(self.device.target)
        self._add(sdma.hdp_flush(req, done, HDP_FLUSH_SDMA0 << (self.index % engines % 2), self._version))
        for packet in sdma_cache_sync(self._version):
            self._add(packet)
        return self

    def copy(self, dst: Address, src: Address, nbytes: int) -> "CopyQueue":
        _check_size(nbytes, "copy")
        d, s = self._va(dst, nbytes, "copy destination"), self._va(src, nbytes, "copy source")
        self._track(dst, src)
        for off, n in chunks(nbytes, self.device.copy_max_bytes):
            self._add(sdma.copy_linear(d + off, s + off, n, self._version))
        return self

    def fill(self, dst: Address, value: int, nbytes: int) -> "CopyQueue":
        d = self._va(dst, _check_size(nbytes, "fill"), "fill destination")
        _check_fill(d, nbytes)
        self._track(dst)
        for off, n in chunks(nbytes, self.device.copy_max_bytes):
            self._add(sdma.const_fill(d + off, value & 0xFFFFFFFF, n, 2, self._version))
        return self

    def disassemble(self) -> str:
        return sdma.disassemble([d for p in self.packets for d in p], self._version)




def full_acquire(family: str) -> list[int]:
    """The full cache acquire (facts 6.3): amdgpu's emit_mem_sync 0xC3B1 on gfx11 (every GPU cache invalidated, GL2
    and its metadata written back), ICACHE|KCACHE|TC|TCL1|TC_WB on gfx9."""
    return list(_full_acquire(family))


@functools.lru_cache(maxsize=None)
def _full_acquire(family: str) -> tuple[int, ...]:  # the same dwords every time: built once per family
    if family == "gfx11":
        return tuple(pm4.acquire_mem("gfx11", gli_inv=1, glm_wb=1, glm_inv=1, glk_inv=1, glv_inv=1, gl1_inv=1,
                                     gl2_inv=1, gl2_wb=1))
    return tuple(pm4.acquire_mem("gfx9", sh_icache_action_ena=1, sh_kcache_action_ena=1, tc_action_ena=1,
                                 tcl1_action_ena=1, tc_wb_action_ena=1))


def sdma_cache_sync(version: str) -> list[list[int]]:
    """What SDMA issues before reading others' data (facts 5.2, 6.2): GCR_REQ 0xC3A1 on SDMA 5/6 (its traffic
    goes through GL2); nothing on SDMA 4 (no GCR packet: it goes around L2)."""
    return [] if version == "sdma4" else [sdma.gcr_req(0xC3A1, version=version)]


def submission_sync(engine: str, family: str, version: str) -> list[list[int]]:
    """The packets every submission starts with, as amdgpu starts every IB (emit_mem_sync, facts 6.3): whatever
    other agents wrote before the host submitted -- the host itself through the BAR (HDP-flushed at the doorbell),
    SDMA 4 around L2, another queue -- is seen by this submission's work, whoever wrote it and whatever the caches
    of this GPU still hold from earlier work."""
    return [list(p) for p in _submission_sync(engine, family, version)]


@functools.lru_cache(maxsize=None)
def _submission_sync(engine: str, family: str, version: str) -> tuple[tuple[int, ...], ...]:  # built once
    if engine == "compute":
        return (_full_acquire(family),)
    # one 8-dword chunk, so what follows keeps its ring alignment (an SDMA INDIRECT must end on 8 dwords, 5.2)
    return tuple(tuple(p + sdma.nop(8 - len(p), version)) for p in sdma_cache_sync(version))


def hdp_flush_registers_of(target: str) -> tuple[int, int]:
    """(GPU_HDP_FLUSH_REQ, GPU_HDP_FLUSH_DONE) of the target's NBIO (facts 6.4)."""
    return hdp_flush_registers(get_target(target).nbio_version)


def hdp_flush_packet(target: str) -> list[int]:
    """The HDP flush from a PM4 ring (facts 6.4): WAIT_REG_MEM write-then-wait on the NBIO request/done registers,
    with tinygrad's reference = mask = all clients (no need to know which MEC pipe the queue is on)."""
    return list(_hdp_flush_packet(target))


@functools.lru_cache(maxsize=None)
def _hdp_flush_packet(target: str) -> tuple[int, ...]:  # the same dwords every time: built once per target
    req, done = hdp_flush_registers_of(target)
    return tuple(pm4.wait_reg_mem(done << 32 | req, 0xFFFFFFFF, mask=0xFFFFFFFF, function=5, mem_space=0,
                                  operation=1, poll_interval=4))


def check_usable_signal(signal: Signal, device: "Device", what: str) -> None:
    """ValueError unless `signal` is a live Signal whose page `device`'s GPU can write (its own, or peer-mapped
    with Device.map_to): a foreign signal would be a VM fault that kills every later wait of the device."""
    if not isinstance(signal, Signal):
        raise TypeError(f"{what}: signal must be a Signal, got {type(signal).__name__} {signal!r}")
    signal.check_live()
    if signal.device is not device and device.gpu_id not in signal.page.allocation.mapped_on:
        raise ValueError(f"{what}: {signal!r} belongs to {signal.device.label} and is not mapped on {device.label}; "
                         f"peer-map it first (Device.map_to(signal, other))")


def _check_fill(dst: int, nbytes: int) -> None:
    if dst % 4 or nbytes % 4:
        raise ValueError(f"fill of {nbytes} bytes at 0x{dst:x}: fills write 32-bit patterns, so the address and "
                         f"size must be multiples of 4")


# ---------------------------------------------------------------------------------------------------


class HardwareRing:
    """One KFD queue's ring as the runtime drives it: write packets, publish wptr, ring the doorbell.

    Ring space is reclaimed through a private progress signal written at the end of each submission
    (the PM4 rptr report is not reliable for flow control, facts 5.5), so the runtime never overwrites
    packets the engine has not consumed.
    """

    def __init__(self, device: "Device", engine: str, queue_id: int, ring_va: int, ring_size: int, wptr_va: int,
                 rptr_va: int, doorbell: int, progress: Signal):
        self.device, self.engine, self.queue_id = device, engine, queue_id
        self.ring_va, self.ring_size, self.wptr_va, self.rptr_va, self.doorbell = (ring_va, ring_size, wptr_va,
                                                                                  rptr_va, doorbell)
        self.unit = 4 if engine == "compute" else 1  # PM4 pointers count dwords, SDMA pointers bytes
        self.put = 0  # bytes written, unwrapped
        self.reclaimed = 0  # bytes known consumed
        self.progress, self.seq = progress, 0
        self.pending: deque[tuple[int, int]] = deque()  # (end position, progress seq) of submissions

    def _progress_packet(self, seq: int) -> list[int]:
        if self.engine == "compute":
            return ComputeQueue(self.device)._release(self.progress.value_addr, seq, data_sel=1)
        return sdma.fence(self.progress.value_addr, seq, self.device.sdma_version)

    def submit(self, packets: list[list[int]]) -> int:
        """Write `packets` and the progress fence, publish, ring. Returns the submission's seq.
        Everything that can refuse happens before any state moves: a refused submission changes nothing
        (a seq that moved without its fence would make every later synchronize wait forever)."""
        seq = (self.seq + 1) % (1 << 32)
        data = [_pack(p) for p in packets + [self._progress_packet(seq)]]
        wrap = 0 if self.engine == "compute" else max(len(d) for d in data) + SDMA_RING_ALIGN  # _write's wrap pad
        need = sum(len(d) for d in data) + wrap
        if need > self.ring_size:
            raise QueueError(f"{self.engine} submission of {need} bytes does not fit in the {self.ring_size}-byte "
                             f"ring of {self.device.label}")
        self._reserve(need)  # may wait (and raise): nothing of this submission is written yet
        for chunk in data:
            self._write(chunk)
        self.seq = seq
        self.pending.append((self.put, seq))
        ctypes.c_uint64.from_address(self.wptr_va).value = self.put // self.unit
        self.device.os.ring_doorbell(self.doorbell, self.put // self.unit)
        return seq

    def completed(self, seq: int) -> bool:
        """Whether submission `seq` of this ring has finished (its progress fence landed); seq wraps at 2^32."""
        done = self.progress.value & 0xFFFFFFFF
        return (self.seq - seq) % (1 << 32) >= (self.seq - done) % (1 << 32)

    def _reserve(self, nbytes: int) -> None:
        while self.put + nbytes - self.reclaimed > self.ring_size:
            end, seq = self.pending.popleft()
            if (self.progress.value & 0xFFFFFFFF) < seq:  # what the wait would look at first: a fence that
                # already landed needs no wait (nor its fault poll: submit_packets polled just before)
                self.device.wait_value(self.progress, seq, f"{self.engine} ring space (submission {seq})")
            self.reclaimed = end

    def _write(self, chunk: bytes) -> None:
        start = self.put % self.ring_size
        if self.engine == "copy" and start + len(chunk) > self.ring_size:
            # SDMA: never straddle the ring end (zero dwords are NOPs), and land at the same offset mod 32 as
            # `put` was: an INDIRECT padded against `put` must still end on an 8-dword boundary (facts 5.2)
            keep = start % SDMA_RING_ALIGN
            ctypes.memset(self.ring_va + start, 0, self.ring_size - start)
            ctypes.memset(self.ring_va, 0, keep)
            self.put += self.ring_size - start + keep
            start = keep
        first = min(len(chunk), self.ring_size - start)
        ctypes.memmove(self.ring_va + start, chunk, first)
        if first < len(chunk):
            ctypes.memmove(self.ring_va, chunk[first:], len(chunk) - first)
        self.put += len(chunk)

    def read_pointer(self) -> int:
        """The engine's reported read pointer, in bytes from the ring start (wrapped)."""
        raw = ctypes.c_uint64.from_address(self.rptr_va).value
        return (raw * self.unit) % self.ring_size if self.engine == "compute" else raw % self.ring_size

    def describe_state(self) -> str:
        """rptr/wptr and the packet at rptr, disassembled: what a timeout report needs."""
        rptr = self.read_pointer()
        nbytes = min(64, self.ring_size - rptr)
        dws = list(struct.unpack(f"<{nbytes // 4}I", ctypes.string_at(self.ring_va + rptr, nbytes)))
        try:
            if self.engine == "compute":
                text = pm4.describe(dws[:pm4.packet_size(dws[0])], self.device.family)
            else:
                text = sdma.describe(dws, self.device.sdma_version)
        except Exception as e:  # a report must not fail on a garbled ring
            text = f"(undecodable: {e})"
        return (f"{self.engine} queue {self.queue_id}: rptr 0x{rptr:x} (ring offset), wptr {self.put // self.unit} "
                f"({self.put % self.ring_size:#x}), packet at rptr: {text}")


def _pack(dws: list[int]) -> bytes:
    return struct.pack(f"<{len(dws)}I", *(d & 0xFFFFFFFF for d in dws))
