"""The AQL packet processor of a COMPUTE_AQL queue: an HSA ring of 64-byte packets on the MEC.

The packet, signal and queue-block layouts are the language module `hcqsim.aql` (HARDWARE_FACTS 4.6); this
module is the emulator's behaviour for them.

Behaviour: a slot whose header type is INVALID stops the processor there (the producer has bumped the
write index but not yet published the header); it resumes once the header changes. Malformed packets
(reserved types or scopes, bad dimensions, zero sizes, an unaligned kernel object) fault the queue naming
the packet index. A kernel dispatch launches its waves on the shared shader core and the processor moves
on to the next packet; a packet with the barrier bit set starts only once every earlier dispatch of the
queue has finished, and a dispatch's completion signal is decremented when its last wave ends (fence
scopes are checked, and with a memory model on act on the modelled caches: `_fence`). Completion: the signal's value is decremented
(the processor is the only writer while it runs) and, when the signal has an event mailbox, the event id
is written there and a CP end-of-pipe interrupt with ctxid = event id is raised, as ROCr's interrupt
signals expect; with ENABLE_PROFILING in amd_queue_t.queue_properties the signal's start_ts/end_ts get
the GPU clock at the packet's start and completion. Not modelled: agent-dispatch packets, kernarg
preloading, and resetting consumed slots to INVALID (the producer does that in ROCr).
"""
from __future__ import annotations

import struct

from ..aql import (AMD_AQL_FORMAT_PM4_IB, HEADER_ACQUIRE, HEADER_BARRIER, HEADER_RELEASE, PACKET_SIZE, QUEUE_ENABLE_PROFILING,
                   QUEUE_PROPERTIES, QUEUE_SCRATCH_BASE, QUEUE_TMPRING_SIZE, SIGNAL_END_TS, SIGNAL_EVENT_ID,
                   SIGNAL_MAILBOX, SIGNAL_START_TS, SIGNAL_VALUE, TYPE_BARRIER_AND, TYPE_BARRIER_OR, TYPE_INVALID,
                   TYPE_KERNEL_DISPATCH, TYPE_NAMES, TYPE_VENDOR, describe)
from ..codeobject import KD_SIZE, decode_descriptor
from ..compare import EQUAL
from ..errors import DecodeError, UnsupportedError
from ..pm4 import OP, TYPE3
from ..registers import LDS_GRANULE, RSRC2, initiator as initiator_bits
from ..shader.dispatch import Dispatch
from .command_processor import PM4Queue
from .host import EngineHost
from .queue import Stream

_INDIRECT_BUFFER = OP["INDIRECT_BUFFER"]
_U64 = (1 << 64) - 1


class AQLQueue(PM4Queue):
    """A COMPUTE_AQL queue: the ring holds AQL packets; PM4 runs only inside vendor PM4_IB packets' IBs."""

    engine = "aql"
    ptr_unit = PACKET_SIZE
    max_ib_depth = 2  # the vendor packet's IB and one chained/nested level below it

    def __init__(self, gpu: EngineHost, name: str, ring_va: int, ring_size: int, rptr_va: int, wptr_va: int):
        super().__init__(gpu, name, ring_va, ring_size, rptr_va, wptr_va)
        self.in_ib: int | None = None  # ring position of the vendor packet whose IB is running
        self.started: tuple[int, int] = (-1, 0)  # (ring position, clock) of the packet being processed
        self.aql_dispatches = 0

    # -- pointers ----------------------------------------------------------------------------------

    def doorbell(self, value: int) -> None:
        """The doorbell carries the index of the last packet written (facts 5.5): the end is one past it.
        A value at or behind what the processor already knows (a stale slot value seen after the
        write_dispatch_id poll moved on) changes nothing: the write index only grows."""
        if (value + 1) * PACKET_SIZE <= self.ring.end:
            return
        super().doorbell((value + 1) & _U64)

    def write_back_rptr(self) -> None:
        self.gpu.memory.write_u64(self.rptr_va, self.rptr)  # read_dispatch_id, unwrapped packets

    def submit(self, data) -> None:
        """Direct-API submission of whole packets: bodies first, then write_dispatch_id, then the doorbell
        with the last packet's index (the HSA producer protocol)."""
        raw = bytes(data)
        if not raw or len(raw) % PACKET_SIZE:
            raise DecodeError(f"queue {self.name}: AQL submissions are whole 64-byte packets, got {len(raw)} bytes")
        if self.submitted + len(raw) - self.ring.pos > self.ring_size:
            self.gpu.run()
        if self.submitted + len(raw) - self.ring.pos > self.ring_size:
            raise DecodeError(f"queue {self.name}: ring full ({len(raw) // PACKET_SIZE} packets do not fit)")
        mem = self.gpu.memory
        for off in range(0, len(raw), PACKET_SIZE):
            slot = self.ring_va + (self.submitted + off) % self.ring_size
            mem.write(slot + 4, raw[off + 4:off + PACKET_SIZE])
            mem.write(slot, raw[off:off + 4])  # header + setup last, as one 32-bit store
        self.submitted += len(raw)
        index = self.submitted // PACKET_SIZE
        mem.write_u64(self.wptr_va, index)
        self.gpu.ring_doorbell(self, index - 1)

    @property
    def queue_ptr(self) -> int:
        """amd_queue_t address: the rptr address less read_dispatch_id_field_base_byte_offset (ROCr fills it)."""
        return self.rptr_va - self.gpu.memory.read_u32(self.rptr_va + 8)

    # -- fetch / decode / execute ------------------------------------------------------------------

    def execute_run(self, stream: Stream, budget: int) -> int:
        if not stream.is_ring:
            return super().execute_run(stream, budget)  # PM4 inside a vendor packet's IB
        self.execute(stream)
        return 1

    def execute(self, stream: Stream) -> None:
        if not stream.is_ring:
            return super().execute(stream)  # PM4 inside a vendor packet's IB
        pos = stream.pos
        index = pos // PACKET_SIZE
        if self.in_ib == pos:  # the vendor packet's IB has finished: now it completes
            self.in_ib = None
            stream.pos = pos + PACKET_SIZE
            self._complete(self.gpu.memory.read_u64(stream.address(pos) + 56), index)
            return
        # read fresh, not through the stream's cache: a slot changes under the processor until its header
        # is published (slots never straddle the ring end: 64 divides the ring size)
        raw = self.gpu.memory.read(stream.address(pos), PACKET_SIZE)
        hdr = raw[0] | raw[1] << 8
        ptype = hdr & 0xFF
        if ptype == TYPE_INVALID:  # not yet published: wait for the producer's header store
            read = lambda: int(self.gpu.memory.read_u32(stream.address(pos)) & 0xFF != TYPE_INVALID)
            self.stall(stream, pos, read, EQUAL, 1, 1, stream.address(pos), retry=True)
            return
        if self.started[0] != pos:  # a barrier re-checked or a vendor IB: the packet began the first time
            self.started = (pos, self.gpu.clock)
        where = f"AQL packet {index} (ring slot {index % (self.ring_size // PACKET_SIZE)}) of queue {self.name}"
        if ptype not in TYPE_NAMES:
            raise DecodeError(f"{where}: header type {ptype} is reserved (0-5 are defined)")
        for name, bit in (("acquire", HEADER_ACQUIRE), ("release", HEADER_RELEASE)):
            if (hdr >> bit) & 3 == 3:
                raise DecodeError(f"{where}: {name} fence scope 3 is reserved (0 none, 1 agent, 2 system)")
        if hdr >> HEADER_BARRIER & 1 and not self.drain_dispatches(stream, pos, f"{where} barrier bit", retry=True):
            return  # the barrier bit: the packet starts once every earlier packet has completed
        self.gpu.clock += self._packet_cost
        if self.gpu.coherence is not None:
            self._fence(hdr >> HEADER_ACQUIRE & 3, acquire=True)
        if ptype == TYPE_KERNEL_DISPATCH:
            running = self._dispatch(raw, stream, pos, index, where)
            stream.pos = pos + PACKET_SIZE  # consumed once launched: a faulting packet is not counted
            signal, started = struct.unpack_from("<Q", raw, 56)[0], self.started[1]
            release = hdr >> HEADER_RELEASE & 3
            if running is None:
                self._fence(release, acquire=False)
                self._complete(signal, index, started)
            else:  # completes with its last wave; the processor goes on to the next packet
                running.on_done.append(lambda: (self._fence(release, acquire=False), signal and self._released(index),
                                                self._complete(signal, index, started)))
        elif ptype in (TYPE_BARRIER_AND, TYPE_BARRIER_OR):
            self._barrier(stream, pos, raw, ptype == TYPE_BARRIER_OR, index, where)
        elif ptype == TYPE_VENDOR:
            self._vendor(stream, pos, raw, where)
        else:
            raise UnsupportedError(f"{where}: AGENT_DISPATCH packets are not emulated")

    def _fence(self, scope: int, *, acquire: bool) -> None:
        """A packet's acquire (at its start) or release (at its completion) fence with the cache model on: agent
        scope invalidates the CU-side levels / (gfx942, an L2 per XCC) writes L2 back; system scope also
        invalidates / writes back GL2 (HSA fence scopes, LLVM AMDGPUUsage's agent and system sequences)."""
        model = self.gpu.coherence
        if model is None or not scope:
            return
        if acquire:  # an L2 per XCC (gfx942): agent scope invalidates L2 too (LLVM's buffer_inv sc1)
            model.perform({"GLV_INV", "GL1_INV", "GLK_INV", "GLI_INV"}
                          | ({"GL2_INV"} if scope == 2 or model.n_xcc > 1 else set()))
        elif scope == 2 or not self.gpu.target.is_gfx11:
            model.perform({"GL2_WB"})

    def _released(self, index: int) -> None:
        if self.gpu.coherence is not None:  # report mode: what the packet's work left dirty in GL2 is named
            self.gpu.coherence.released(self, f"queue {self.name}: AQL packet {index}'s completion signal")

    def _signal_value(self, signal: int) -> int:
        v = self.gpu.memory.read_u64(signal + SIGNAL_VALUE)
        return v - (1 << 64) if v >> 63 else v  # hsa_signal_value_t is signed

    def _complete(self, signal: int, index: int, started: int | None = None) -> None:
        """Decrement the completion signal; wake its waiters through the event mailbox and an interrupt."""
        if not signal:
            return
        mem = self.gpu.memory
        if mem.read_u32(self.queue_ptr + QUEUE_PROPERTIES) & QUEUE_ENABLE_PROFILING:  # ROCr's kernel timing
            mem.write_u64(signal + SIGNAL_START_TS, self.started[1] if started is None else started)
            mem.write_u64(signal + SIGNAL_END_TS, self.gpu.clock)
        mem.write_u64(signal + SIGNAL_VALUE, (mem.read_u64(signal + SIGNAL_VALUE) - 1) & _U64)
        self.gpu.trace_write(self, signal + SIGNAL_VALUE, 8, mem.read_u64(signal + SIGNAL_VALUE))
        mailbox = mem.read_u64(signal + SIGNAL_MAILBOX)
        if mailbox:
            event_id = mem.read_u32(signal + SIGNAL_EVENT_ID)
            mem.write_u32(mailbox, event_id)
            self.gpu.interrupt("cp_eop", event_id, self)

    def _barrier(self, stream: Stream, pos: int, raw: bytes, any_: bool, index: int, where: str) -> None:
        deps = [d for d in struct.unpack_from("<5Q", raw, 8) if d]
        for d in deps:
            self.gpu.memory.check(d + SIGNAL_VALUE, 8, "read")
        def met() -> int:
            values = [self._signal_value(d) for d in deps]
            if not values:
                return 1  # no dependencies: nothing to wait for
            return int(any(v == 0 for v in values) if any_ else all(v == 0 for v in values))
        if not met():
            self.stall(stream, pos, met, EQUAL, 1, 1, deps[0] + SIGNAL_VALUE, retry=True)
            return
        stream.pos = pos + PACKET_SIZE
        for d in deps:  # the dependencies observed (report mode's happens-before)
            self.acquired(d + SIGNAL_VALUE)
        self._complete(struct.unpack_from("<Q", raw, 56)[0], index)

    def _vendor(self, stream: Stream, pos: int, raw: bytes, where: str) -> None:
        fmt = struct.unpack_from("<H", raw, 2)[0]
        if fmt != AMD_AQL_FORMAT_PM4_IB:
            raise UnsupportedError(f"{where}: vendor-specific packet format {fmt} (only AMD_AQL_FORMAT_PM4_IB = 1)")
        jump = list(struct.unpack_from("<4I", raw, 4))
        if jump[0] >> 30 != TYPE3 or (jump[0] >> 8) & 0xFF != _INDIRECT_BUFFER:
            raise DecodeError(f"{where}: PM4_IB packet does not hold an INDIRECT_BUFFER (dword 0x{jump[0]:08x})")
        fmt_ib = self.fmts[_INDIRECT_BUFFER]
        v = fmt_ib.decode(jump)
        if v["chain"]:
            raise DecodeError(f"{where}: the PM4_IB jump may not CHAIN")
        # the PM4 handler checks VALID/PRIV/alignment/size and pushes the IB; the ring waits at this packet
        self._execINDIRECT_BUFFER(stream, pos, v)
        self.in_ib = pos

    def _dispatch(self, raw: bytes, stream: Stream, pos: int, index: int, where: str):
        packet_va = stream.address(pos)
        (_, setup, wx, wy, wz, _, gx, gy, gz, private, group, kobj, kernarg, _, _) = struct.unpack(
            "<HHHHHHIIIIIQQQQ", raw)
        dims = setup & 3
        if dims == 0:
            raise DecodeError(f"{where}: setup.dimensions is 0 (1 to 3)")
        wg, grid = (wx, wy, wz), (gx, gy, gz)
        if 0 in wg or 0 in grid:
            raise DecodeError(f"{where}: workgroup {wg} / grid {grid} has a zero dimension")
        if any(w != 1 or g != 1 for w, g in zip(wg[dims:], grid[dims:])):
            raise DecodeError(f"{where}: dimensions beyond setup.dimensions = {dims} must be 1 (workgroup {wg}, "
                              f"grid {grid})")
        if wx * wy * wz > 1024:
            raise DecodeError(f"{where}: workgroup {wg} has more than 1024 work-items")
        if not kobj or kobj % 64:
            raise DecodeError(f"{where}: kernel_object 0x{kobj:x} is not a 64-byte aligned kernel descriptor")
        if kernarg % 16:
            raise DecodeError(f"{where}: kernarg_address 0x{kernarg:x} is not 16-byte aligned")
        self.gpu.memory.check(kobj, KD_SIZE, "read")
        kd = decode_descriptor(self.gpu.memory.read(kobj, KD_SIZE))
        target = self.gpu.target
        if kd["wavefront_size32"] and not target.is_gfx11:
            raise DecodeError(f"{where}: descriptor at 0x{kobj:x} asks for wave32; {target.name} is wave64 only")
        if kd["enable_sgpr_private_segment_buffer"] or kd["enable_sgpr_flat_scratch_init"]:
            raise DecodeError(f"{where}: descriptor asks for a private segment buffer / flat scratch init SGPRs, "
                              f"which architected-flat-scratch targets do not have")
        if kd["kernarg_preload_length"]:
            raise UnsupportedError(f"{where}: kernarg preloading is not emulated")
        if kd["uses_dynamic_stack"] and not private:
            raise DecodeError(f"{where}: the kernel uses a dynamic stack but private_segment_size is 0")
        queue_ptr = self.queue_ptr
        user: list[int] = []
        for enabled, value in ((kd["enable_sgpr_dispatch_ptr"], packet_va), (kd["enable_sgpr_queue_ptr"], queue_ptr),
                               (kd["enable_sgpr_kernarg_segment_ptr"], kernarg),
                               (kd["enable_sgpr_dispatch_id"], index)):
            if enabled:
                user += [value & 0xFFFFFFFF, value >> 32]
        if kd["enable_sgpr_private_segment_size"]:
            user.append(private)
        n_user = min(kd["user_sgpr_count"], 16)
        if len(user) > n_user:
            raise DecodeError(f"{where}: {len(user)} user SGPRs enabled, descriptor RSRC2.USER_SGPR is {n_user}")
        user += [0] * (n_user - len(user))
        lds = -(-group // LDS_GRANULE)
        if lds > 0x1FF:
            raise DecodeError(f"{where}: group_segment_size {group} exceeds the LDS")
        # the CP programs LDS_SIZE from the packet (the descriptor's RSRC2 leaves it 0)
        rsrc2 = (kd["compute_pgm_rsrc2"] & ~(0x1FF << 15)) | lds << 15
        tmpring = scratch = 0
        if RSRC2.decode([rsrc2])["scratch_en"]:  # scratch comes from the queue (ROCr sizes it per queue)
            mem = self.gpu.memory
            tmpring = mem.read_u32(queue_ptr + QUEUE_TMPRING_SIZE)
            scratch = mem.read_u64(queue_ptr + QUEUE_SCRATCH_BASE)
        d = Dispatch(queue=self.name, pgm_addr=kobj + kd["kernel_code_entry_byte_offset"],
                     rsrc1=kd["compute_pgm_rsrc1"], rsrc2=rsrc2, rsrc3=kd["compute_pgm_rsrc3"], user_data=user,
                     groups=tuple(-(-g // w) for g, w in zip(grid, wg)), start=(0, 0, 0), group_size=wg,
                     partial_size=tuple(g % w for g, w in zip(grid, wg)),
                     wave_size=32 if kd["wavefront_size32"] else 64, lds_bytes=lds * LDS_GRANULE,
                     scratch_base=scratch, tmpring_size=tmpring, resource_limits=0,
                     initiator=initiator_bits(compute_shader_en=1, force_start_at_000=1,
                                              cs_w32_en=int(kd["wavefront_size32"]), use_thread_dimensions=1,
                                              partial_tg_en=1))
        self.gpu.memory.check(d.pgm_addr, 4, "execute")
        core = self.gpu.shader_core
        if core is None:
            raise UnsupportedError(f"{where}: no shader core is attached to this GPU")
        self.dispatches += 1
        self.aql_dispatches += 1
        self.launch(core, d, stream, pos)
        return self.inflight[-1] if self.inflight and self.inflight[-1].seq == self.launched - 1 else None

    # -- reports -----------------------------------------------------------------------------------

    def disassemble_at(self, stream: Stream, pos: int) -> tuple[int, str]:
        if not stream.is_ring:
            return super().disassemble_at(stream, pos)
        dws = list(struct.unpack("<16I", self.gpu.memory.read(stream.address(pos), PACKET_SIZE)))
        return dws[0], describe(dws, self.gpu.canonical)

    def disassembly_later(self, stream: Stream, pos: int):
        if not stream.is_ring:
            return super().disassembly_later(stream, pos)
        raw = self.gpu.memory.read(stream.address(pos), PACKET_SIZE)  # the packet now: the host may reuse the slot
        return lambda: describe(list(struct.unpack("<16I", raw)), self.gpu.canonical)

