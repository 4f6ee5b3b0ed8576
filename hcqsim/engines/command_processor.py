"""The compute command processor: fetches, decodes and executes the PM4 of one user compute (MEC) queue.

Packets are read with the tables of `hcqsim.pm4`; every field value a handler compares against is
named from those tables, so this module holds behaviour, not layout.

Caches: with the default memory model memory is coherent and cache-control fields decode and are checked but
have nothing to act on; with `memory_model="report"` / `"adversarial"` (`gpu.coherence`, hcqsim.coherence) the
GCR / CP_COHER / EOP bits of RELEASE_MEM and ACQUIRE_MEM and the EVENT_WRITE cache events act on the modelled
caches, and WRITE_DATA / COPY_DATA / RELEASE_MEM writes to TC_L2 stay in GL2 until written back (docs/memory_model.md).
The HDP flush (WAIT_REG_MEM write-wait on GPU_HDP_FLUSH_REQ/DONE) drains the GPU's HDP (coherence/hdp.py).
Dispatches are asynchronous (HARDWARE_FACTS 6.3): DISPATCH_DIRECT
launches the waves and the CP reads the next packet; EVENT_WRITE CS_PARTIAL_FLUSH stalls the queue until every
earlier dispatch has finished; RELEASE_MEM is queued as an end-of-pipe event that writes (and interrupts) once
every earlier dispatch has finished, in order, without stalling the queue (facts 3); ACQUIRE_MEM, WRITE_DATA,
COPY_DATA and the rest act when the CP reaches them, whatever is still running. DMA_DATA copies and fills move in
chunks (`queue.COPY_CHUNK`) other queues, kernels and the host may interleave with; with CP_SYNC the queue's next
packet waits for the last one, without it the queue's CP DMA engine (`queue.CpDma`) moves them while the CP reads
on, and only a later DMA_DATA with CP_SYNC waits for them.
"""
from __future__ import annotations

import functools
from array import array
from collections.abc import Callable

from .. import pm4
from ..atomics import OP_NAMES as ATOMIC_OP_NAMES
from ..atomics import apply as apply_atomic
from ..atomics import decode_op as decode_atomic
from ..coherence import gcr
from ..compare import COMPARE, EQUAL
from ..errors import DecodeError, EngineError, UnsupportedError
from ..pm4 import (COPY_DST, COPY_SRC, COUNT_MAX, DATA_SEL, DMA_DST, DMA_SRC, EVENT_INDEX, EVENT_TYPES, INT_SEL,
                   NOP_ONE_DWORD, OP, OPCODES, RELEASE_DST, TYPE3, TYPE_NAMES, WRITE_DATA_DST, code, codes)
from ..registers import REG_ADDRESS_MASK, REGS, SH_BASE, SH_END, UCONFIG_BASE, UCONFIG_END, reg_name
from .dispatch import decode_dispatch
from .host import EngineHost
from .queue import EngineQueue, Stream, Transfer

# packets whose register values a displaced window's trace rewrites (gpu.EmulatedGPU.trace_packet, _canon_regs): the
# fast path records its packets itself and must leave these to the GPU's hook
TRACKED = frozenset({"SET_SH_REG", "DISPATCH_DIRECT"})

# Field values the handlers act on, named from the packet tables (the fast path compares plain ints).
_NOP = OP["NOP"]
_WRITE_REG = code(WRITE_DATA_DST, "REG")
_WRITE_MEMORY = codes(WRITE_DATA_DST, "MEM_SYNC", "TC_L2", "MEM")
_MEM_SPACE_MEMORY = code(pm4.MEM_SPACE, "MEMORY")
_WRITE_WAIT = code(pm4.WAIT_OPERATION, "WRITE_WAIT")
_CACHE_FLUSH_EVENTS = codes(EVENT_TYPES, "CACHE_FLUSH", "CACHE_FLUSH_AND_INV_EVENT")
_INDEX_OTHER, _INDEX_CS_PARTIAL_FLUSH = code(EVENT_INDEX, "OTHER"), code(EVENT_INDEX, "CS_PARTIAL_FLUSH")
_RELEASE_INDEXES = codes(EVENT_INDEX, "END_OF_PIPE", "SHADER_DONE")
_RELEASE_TO_MEMORY = codes(RELEASE_DST, "MEMORY", "TC_L2")
_DATA_NONE, _DATA_32, _DATA_64, _DATA_CLOCK = (code(DATA_SEL, n) for n in ("NONE", "DATA_32", "DATA_64",
                                                                            "GPU_CLOCK_64"))
_INT_ONLY = code(INT_SEL, "INT_ONLY")
_INT_ALWAYS = codes(INT_SEL, "INT_ONLY", "INT_AFTER_WRITE_CONFIRM", "INT_UNCONDITIONAL")
_INT_IF_EQ = {code(INT_SEL, "INT_IF_EQ_32"): 4, code(INT_SEL, "INT_IF_EQ_64"): 8}  # -> compared width
_COPY_FROM_MEMORY = codes(COPY_SRC, "MEM", "TC_L2")
_COPY_IMM, _COPY_FROM_REG = code(COPY_SRC, "IMM"), code(COPY_SRC, "REG")
_COPY_ATOMIC_RETURN, _COPY_CLOCK = code(COPY_SRC, "ATOMIC_RETURN"), code(COPY_SRC, "GPU_CLOCK")
_COPY_TO_MEMORY, _COPY_TO_REG = codes(COPY_DST, "TC_L2", "MEM"), code(COPY_DST, "REG")
_LOOP_UNTIL_COMPARE = code(pm4.ATOMIC_COMMAND, "LOOP_UNTIL_COMPARE")
_DMA_FROM_DATA, _DMA_SRC_GDS, _DMA_DST_GDS = code(DMA_SRC, "DATA"), code(DMA_SRC, "GDS"), code(DMA_DST, "GDS")
_TO_L2 = code(WRITE_DATA_DST, "TC_L2")
_RELEASE_TO_L2 = code(RELEASE_DST, "TC_L2")
_COPY_TO_L2 = code(COPY_DST, "TC_L2")
_BYPASS = code(pm4.CACHE_POLICY, "BYPASS")
_DISPATCH_REGS = tuple(REGS[n] for n in ("COMPUTE_DISPATCH_INITIATOR", "COMPUTE_DIM_X", "COMPUTE_DIM_Y",
                                         "COMPUTE_DIM_Z"))


_HEADERS_KEPT = 4096  # distinct header values a queue remembers (`PM4Queue._header`)


class PM4Queue(EngineQueue):
    """A PM4 compute queue: ring in dwords, 64-bit wptr, rptr reported to memory, up to two IB levels."""

    engine = "pm4"
    ptr_unit = 4
    max_ib_depth = 2  # IB1 and IB2
    fast_paths = True  # the common-case paths (`_fast<NAME>`): tests turn them off to compare with the general ones

    def __init__(self, gpu: EngineHost, name: str, ring_va: int, ring_size: int, rptr_va: int, wptr_va: int):
        super().__init__(gpu, name, ring_va, ring_size, rptr_va, wptr_va)
        self.family = gpu.target.family
        self.fmts = pm4.formats(self.family)
        self.regs: dict[int, int] = {}  # this queue's SH register state (absolute dword address -> value)
        self.atomic_return = 0  # pre-op value of the last ATOMIC_MEM, for COPY_DATA SRC_SEL 6
        self.dispatches = 0
        handlers = {OP[name[5:]]: getattr(self, name) for name in dir(self) if name.startswith("_exec")
                    and name[5:] in OP}
        # the decode table: opcode -> (format, handler, fixed size, dwords the fast decoder needs, fast decoder,
        # whether the trace may rewrite its register values, (fast check, its action) or None)
        fast = {OP[name[5:]]: (getattr(self, name), getattr(self, "_do" + name[5:])) for name in dir(self)
                if name.startswith("_fast") and name[5:] in OP}
        self.coherence = gpu.coherence  # None: the coherent memory model (no cache work at all)
        if self.coherence is not None:  # the cache bits are hints on the fast path: the general handler runs
            fast.pop(OP["RELEASE_MEM"], None)
        self._ops = {op: (fmt, handlers[op], fmt.size, fmt.min_dwords, fmt.fast_decoder, fmt.name in TRACKED,
                          fast.get(op) if self.fast_paths else None) for op, fmt in self.fmts.items()}
        self._plain = _plain_shapes(self.family)
        plain = self._plain["RELEASE_MEM"]
        self._release_key, self._release_shapes, self._release_fields = plain.key, plain.shapes, plain.fields
        self._headers: dict[int, tuple] = {}  # header dword -> what it tells (`_header`)
        self._packet_cost = gpu.cost.packet

    def write_back_rptr(self) -> None:
        # The CP reports its read offset as a wrapped dword offset (amdgpu reads 32 bits). [uncertain]
        ring_dw = self.ring_size // 4
        self.gpu.memory.write_u32(self.rptr_va, self.rptr % ring_dw)

    def disassemble_at(self, stream: Stream, pos: int) -> tuple[int, str]:
        hdr = stream.dwords(pos, 1)[0]
        n = pm4.packet_size(hdr) if hdr >> 30 == TYPE3 else 1
        try:
            dws = stream.dwords(pos, n)
        except DecodeError:
            avail = max(0, (stream.end - pos) // 4)
            return hdr, pm4.describe(stream.dwords(pos, avail) if avail else [hdr], self.family) + " (truncated)"
        return hdr, pm4.describe(dws, self.family, canon=self.gpu.canonical)

    # -- the fetch/decode/execute step -------------------------------------------------------------

    def execute(self, stream: Stream) -> None:
        self.execute_run(stream, 1)

    def execute_run(self, stream: Stream, budget: int) -> int:
        """Execute up to `budget` packets of `stream` in one loop (the engine's per-packet cost is this loop): it
        stops after a packet that changes what runs next -- a wait, a transfer, another stream, a launched
        dispatch -- and at the stream's end. Returns the packets executed. A packet's errors (DecodeError, ...)
        carry its place as `at`."""
        gpu, cost, stack, headers = self.gpu, self._packet_cost, self.stack, self._headers
        trace, name, place = gpu.trace.append, self.name, stream.place
        done, pos = 0, stream.pos
        try:
            while True:
                buf = stream._buf  # cached ring dwords (Stream.window, inline): a packet is one slice of them
                i, size = (pos - stream._buf_pos) >> 2, len(buf)
                if not 0 <= i < size:
                    buf, i = stream.window(pos)
                    size = len(buf)
                hdr = buf[i]
                known = headers.get(hdr)  # what the header tells, decided once per header value (`_header`)
                if known is None:
                    known = self._header(hdr)
                n, fmt, handler, min_dw, decode, tracked, plain, act = known
                dws = buf[i:i + n] if i + n <= size else stream.dwords(pos, n)
                if plain is not None and (values := plain(dws)) is not None:
                    handler = None  # a plain shape: `act` acts on the fields, no checks left to make
                else:
                    values = decode(dws) if n >= min_dw else fmt.decode_fast(dws)  # short: the descriptive error
                    if hdr & 1:
                        raise UnsupportedError(f"{fmt.name}: predicated packets (SET_PREDICATION state) are not "
                                               f"emulated")
                if tracked:  # register writes a displaced VA window's trace may rewrite
                    gpu.trace_packet(self, stream, pos, fmt, dws)
                else:  # what gpu.trace_packet records for every other packet
                    trace((gpu.clock, name, "packet", (place, pos, fmt, dws, None)))
                gpu.clock += cost
                stream.pos = pos + (n << 2)
                if handler is None:
                    act(values)
                else:
                    handler(stream, pos, values)
                done += 1
                pos = stream.pos
                if done >= budget or pos >= stream.end or self.wait is not None or self.transfer is not None \
                        or self.yield_turn or stack[-1] is not stream:
                    return done
        except EngineError as e:
            e.at = (stream, pos)  # where the fault report points
            raise

    def _header(self, hdr: int) -> tuple:
        """What a header dword tells: (packet dwords, format, handler, dwords the fast decoder needs, fast decoder,
        traced with register values, the fast path's check and action or None, None), or the error of a header a
        compute queue refuses. Kept in `_headers` (a function of the header value alone: type, opcode, count,
        PREDICATE)."""
        if hdr >> 30 != TYPE3:
            raise DecodeError(f"{TYPE_NAMES[hdr >> 30]} packet 0x{hdr:08x} is not accepted on a user compute queue")
        op = (hdr >> 8) & 0xFF
        entry = self._ops.get(op)
        if entry is None:
            if op in OPCODES:
                raise UnsupportedError(f"PM4 {OPCODES[op]} (opcode 0x{op:02x}) is not emulated on compute queues")
            raise DecodeError(f"unknown PM4 opcode 0x{op:02x}")
        fmt, handler, size, min_dw, decode, tracked, fast = entry
        count = (hdr >> 16) & COUNT_MAX
        n = 1 if op == _NOP and count == NOP_ONE_DWORD else count + 2
        if size is not None and n != size:
            raise DecodeError(f"{fmt.name}: header count {n - 2} makes {n} dwords, the packet is {size}")
        # the fast path's check and action when this header may take it (long enough for its decoder, no PREDICATE)
        plain, act = fast if fast is not None and n >= min_dw and not hdr & 1 else (None, None)
        known = (n, fmt, handler, min_dw, decode, tracked, plain, act)
        if len(self._headers) < _HEADERS_KEPT:
            self._headers[hdr] = known
        return known

    # -- the common cases ----------------------------------------------------------------------------
    # A packet whose control fields select a plain behaviour skips the general decode and checks: `_fast<NAME>(dws)`
    # returns the few fields its `_do<NAME>(fields)` acts on, or None (the general path). The plain shapes are the
    # control values the general handler accepts (`_plain_shapes`, decided by the same code); the action is the one the
    # general handler ends in. tests/test_pm4_fast_paths.py runs both paths on the same packets. (WRITE_DATA had
    # one too: no faster than its general path, measured, so removed.)

    def _fastNOP(self, d):
        return _NO_FIELDS

    def _doNOP(self, v):
        pass

    def _fastRELEASE_MEM(self, d):
        """A data write with nothing queued before it acts now (what `at_end_of_pipe` would do). Not installed with a
        memory model (`__init__`): the general handler decodes the whole packet for the cache bits."""
        if self.inflight or self.eop_events or self._release_key(d) not in self._release_shapes:
            return None
        return self._release_fields(d)

    # -- packets -----------------------------------------------------------------------------------

    def _execNOP(self, stream, pos, v):
        pass

    def _execWRITE_DATA(self, stream, pos, v):
        data = v["data"]
        if not data:
            raise DecodeError("WRITE_DATA without data dwords")
        sel = v["dst_sel"]
        if sel == _WRITE_REG:
            reg = v["dst_addr"] & REG_ADDRESS_MASK
            for i, d in enumerate(data):
                self.write_register(reg if v["wr_one_addr"] else reg + i, d)
            return
        if sel not in _WRITE_MEMORY:
            raise UnsupportedError(f"WRITE_DATA DST_SEL {WRITE_DATA_DST[sel]} is not emulated")
        addr = v["dst_addr"] & ~3  # the address field is [31:2]: low bits ignored
        mem = self.gpu.memory
        if self.coherence is not None:
            self._modelled_write(stream, pos, "WRITE_DATA", addr, data[-1:] if v["wr_one_addr"] else data,
                                 sel == _TO_L2, "cache_policy")
            return
        if len(data) == 1 or v["wr_one_addr"]:
            for d in data:
                mem.write_u32(addr, d)
            self.gpu.trace_write(self, addr, 4, data[-1])
        else:
            mem.write(addr, _pack(data))
            self.gpu.trace_write(self, addr, 4 * len(data), _join(data))

    def _execWAIT_REG_MEM(self, stream, pos, v):
        func, ref, mask = v["function"], v["reference"], v["mask"]
        if v["operation"] == _WRITE_WAIT:  # write REFERENCE to a register, then poll another: the HDP flush
            self._hdp_flush(stream, pos, v)
            return
        if v["mem_space"] == _MEM_SPACE_MEMORY:
            addr = v["poll_addr"] & ~3
            self.gpu.memory.check(addr, 4, "read")
            read = lambda: self.gpu.memory.read_u32(addr)
        else:
            reg = v["poll_addr"] & REG_ADDRESS_MASK
            addr = None
            read = lambda: self.read_register(reg)
        if COMPARE[func](read() & mask, ref):
            self.acquired(addr)
            return
        self.stall(stream, pos, read, func, ref, mask, addr)

    def _hdp_flush(self, stream, pos, v) -> None:
        """WAIT_REG_MEM OPERATION 1 on NBIO GPU_HDP_FLUSH_REQ (written) / GPU_HDP_FLUSH_DONE (polled), facts 6.4: the
        HDP's buffered host stores reach VRAM, then DONE shows the requested client bits and the compare runs."""
        if v["mem_space"] == _MEM_SPACE_MEMORY:
            raise DecodeError("WAIT_REG_MEM OPERATION WRITE_WAIT needs MEM_SPACE REGISTER")
        request, done = v["poll_addr"] & REG_ADDRESS_MASK, (v["poll_addr"] >> 32) & REG_ADDRESS_MASK
        hdp = self.gpu.hdp
        if not hdp.is_flush_handshake(request, done):
            want = "/".join(f"0x{r:x}" for r in hdp.flush_registers)
            raise UnsupportedError(f"WAIT_REG_MEM write-wait on registers 0x{request:x}/0x{done:x}: only the HDP flush "
                                   f"handshake on GPU_HDP_FLUSH_REQ/DONE ({want}) is emulated")
        hdp.flush_from(self.name, "WAIT_REG_MEM write-wait on GPU_HDP_FLUSH_REQ/DONE")
        self.gpu.tick(self.gpu.cost.packet)
        ref, mask, func = v["reference"], v["mask"], v["function"]
        if not COMPARE[func](ref & mask, ref):  # DONE holds the bits written to REQ: a compare that fails never passes
            self.stall(stream, pos, lambda: ref, func, ref, mask, None)

    def _execINDIRECT_BUFFER(self, stream, pos, v):
        self.last_jump = (stream, pos)  # named by a runaway report
        if not v["valid"]:
            raise DecodeError("INDIRECT_BUFFER with VALID = 0")
        if v["priv"]:
            raise DecodeError("INDIRECT_BUFFER with PRIV = 1 is not allowed on a user queue")
        if v["ib_base"] & 3:
            raise DecodeError(f"INDIRECT_BUFFER base 0x{v['ib_base']:x} is not dword aligned")
        if v["ib_size"] == 0:
            raise DecodeError("INDIRECT_BUFFER with IB_SIZE 0")
        if v["chain"] and not stream.is_ring:
            self.stack.pop()  # CHAIN: the new IB replaces the current one instead of returning to it
        self.push_ib(v["ib_base"], 4 * v["ib_size"])

    def _execEVENT_WRITE(self, stream, pos, v):
        etype, index = v["event_type"], v["event_index"]
        name = EVENT_TYPES.get(etype, f"event 0x{etype:x}")
        if etype == pm4.CS_PARTIAL_FLUSH:  # the CP waits for every earlier dispatch of this queue (facts 3)
            if index != _INDEX_CS_PARTIAL_FLUSH:
                raise DecodeError(f"EVENT_WRITE CS_PARTIAL_FLUSH needs EVENT_INDEX {_INDEX_CS_PARTIAL_FLUSH}, "
                                  f"got {index}")
            if v["address"]:
                raise DecodeError(f"EVENT_WRITE {name} carries an address; only sample events have one")
            self.drain_dispatches(stream, pos, "CS_PARTIAL_FLUSH")
            return
        elif etype in _CACHE_FLUSH_EVENTS:  # cache flush (and invalidate): acts on the modelled caches, if any
            if index != _INDEX_OTHER:
                raise DecodeError(f"EVENT_WRITE {name} needs EVENT_INDEX {_INDEX_OTHER}, got {index}")
            if self.coherence is not None and not v["address"]:
                self.coherence.perform(gcr.EVENTS[name])
        elif etype in pm4.END_OF_PIPE_EVENTS:
            raise DecodeError(f"EVENT_WRITE {name} is an end-of-pipe/timestamp event: use RELEASE_MEM")
        else:
            raise UnsupportedError(f"EVENT_WRITE {name} (index {index}) is not emulated")
        if v["address"]:
            raise DecodeError(f"EVENT_WRITE {name} carries an address; only sample events have one")

    def _execSET_SH_REG(self, stream, pos, v):
        if v["index"] not in (0, 1):  # 0 and 1 write the registers plainly; other indexes are not modelled
            raise UnsupportedError(f"SET_SH_REG INDEX {v['index']} is not emulated")
        self._set_regs("SET_SH_REG", SH_BASE, SH_END, v)

    def _execSET_UCONFIG_REG(self, stream, pos, v):
        if v["index"] != 0:
            raise UnsupportedError(f"SET_UCONFIG_REG INDEX {v['index']} is not emulated")
        self._set_regs("SET_UCONFIG_REG", UCONFIG_BASE, UCONFIG_END, v)

    def _set_regs(self, name: str, base: int, end: int, v: dict) -> None:
        values = v["values"]
        if not values:
            raise DecodeError(f"{name} without register values")
        first = base + v["reg_offset"]
        if first + len(values) > end:
            raise DecodeError(f"{name} writes registers 0x{first:x}..0x{first + len(values) - 1:x}, "
                              f"past the end of its range 0x{base:x}..0x{end - 1:x}")
        for i, value in enumerate(values):
            self.write_register(first + i, value)

    def _execRELEASE_MEM(self, stream, pos, v):
        data_sel, int_sel = v["data_sel"], v["int_sel"]
        error = _release_error(v["event_type"], v["event_index"], v["dst_sel"], data_sel, int_sel)
        if error is not None:
            raise error
        if data_sel != _DATA_NONE or int_sel in _INT_IF_EQ:  # a bad address faults this packet, not a later one
            width = 4 if data_sel == _DATA_32 else 8 if data_sel != _DATA_NONE else _INT_IF_EQ[int_sel]
            self.gpu.memory.check(v["addr"] & ~(width - 1), width, "write" if data_sel != _DATA_NONE else "read")
        if self.coherence is not None:  # the cache bits are hints on the fast path: the whole packet, decoded
            v = {**self._full(stream, pos), "where": self._where(stream, pos, "RELEASE_MEM")}
        # queued as an end-of-pipe event: it acts once every earlier dispatch finished; later packets go on
        self.at_end_of_pipe(lambda: self._release(v))

    def _release(self, v: dict) -> None:
        """What a RELEASE_MEM does at end of pipe: the cache actions, the data write, then the interrupt."""
        mem = self.gpu.memory
        data_sel, int_sel = v["data_sel"], v["int_sel"]
        store = self._modelled_release(v, data_sel, int_sel) if self.coherence is not None else self._plain_store
        if data_sel == _DATA_32:
            addr = v["addr"] & ~3
            store(addr, 4, v["data"] & 0xFFFFFFFF)
            self.gpu.trace_write(self, addr, 4, v["data"] & 0xFFFFFFFF)
        elif data_sel == _DATA_64 or data_sel == _DATA_CLOCK:
            addr = v["addr"] & ~7
            value = v["data"] if data_sel == _DATA_64 else self.gpu.clock
            store(addr, 8, value)
            self.gpu.trace_write(self, addr, 8, value)
        if int_sel in _INT_ALWAYS:
            self.gpu.interrupt("cp_eop", v["int_ctxid"], self)
        elif int_sel in _INT_IF_EQ:
            width = _INT_IF_EQ[int_sel]
            addr = v["addr"] & ~(width - 1)
            cur = mem.read_u32(addr) if width == 4 else mem.read_u64(addr)
            if cur == v["data"] & ((1 << 8 * width) - 1):
                self.gpu.interrupt("cp_eop", v["int_ctxid"], self)

    _doRELEASE_MEM = _release  # the plain shapes' action: the general handler's end-of-pipe action, at once

    def _plain_store(self, addr: int, width: int, value: int) -> None:
        """A RELEASE_MEM data write with the coherent memory model: straight to memory."""
        if width == 4:
            self.gpu.memory.write_u32(addr, value)
        else:
            self.gpu.memory.write_u64(addr, value)

    def _execACQUIRE_MEM(self, stream, pos, v):
        if self.family == "gfx11" and v["coher_cntl"]:
            raise UnsupportedError(f"ACQUIRE_MEM legacy COHER_CNTL 0x{v['coher_cntl']:x} (0 on gfx10+)")
        # The cache actions happen when the CP reaches the packet; it does not wait for running dispatches (facts
        # 3.3, 7). With the coherent model there is nothing to act on.
        if self.coherence is not None:
            self.coherence.perform(gcr.acquire(self._full(stream, pos), self.family))

    def _execCOPY_DATA(self, stream, pos, v):
        size = 8 if v["count_sel"] else 4
        src_sel, dst_sel = v["src_sel"], v["dst_sel"]
        mem = self.gpu.memory
        if src_sel in _COPY_FROM_MEMORY:
            addr = v["src_addr"] & ~(size - 1)
            value = mem.read_u64(addr) if size == 8 else mem.read_u32(addr)
        elif src_sel == _COPY_IMM:
            value = v["src_addr"] & ((1 << 8 * size) - 1)
        elif src_sel == _COPY_FROM_REG:
            reg = v["src_addr"] & REG_ADDRESS_MASK
            value = self.read_register(reg) | (self.read_register(reg + 1) << 32 if size == 8 else 0)
        elif src_sel == _COPY_ATOMIC_RETURN:
            value = self.atomic_return & ((1 << 8 * size) - 1)
        elif src_sel == _COPY_CLOCK:
            value = self.gpu.clock & ((1 << 8 * size) - 1)
        else:
            raise UnsupportedError(f"COPY_DATA SRC_SEL {COPY_SRC[src_sel]} is not emulated")
        if dst_sel in _COPY_TO_MEMORY:
            addr = v["dst_addr"] & ~(size - 1)
            if self.coherence is not None:
                self._modelled_write(stream, pos, "COPY_DATA", addr, [value & 0xFFFFFFFF, value >> 32][:size // 4],
                                     dst_sel == _COPY_TO_L2, "dst_cache_policy")
                return
            (mem.write_u64 if size == 8 else mem.write_u32)(addr, value)
            self.gpu.trace_write(self, addr, size, value)
        elif dst_sel == _COPY_TO_REG:
            reg = v["dst_addr"] & REG_ADDRESS_MASK
            self.write_register(reg, value & 0xFFFFFFFF)
            if size == 8:
                self.write_register(reg + 1, value >> 32)
        else:
            raise UnsupportedError(f"COPY_DATA DST_SEL {COPY_DST[dst_sel]} is not emulated")

    def _execATOMIC_MEM(self, stream, pos, v):
        name, bits, returns = decode_atomic(v["atomic"])
        size = bits // 8
        addr = v["addr"]
        if addr % size:
            raise DecodeError(f"ATOMIC_MEM {ATOMIC_OP_NAMES[v['atomic']]} address 0x{addr:x} is not "
                              f"{size}-byte aligned")
        mem = self.gpu.memory
        read = (lambda: mem.read_u64(addr)) if size == 8 else (lambda: mem.read_u32(addr))
        mem.check(addr, size, "write")
        if self.coherence is not None:
            self.coherence.cp_access(self, addr, size, True, self._where(stream, pos, "ATOMIC_MEM"))
        old = read()
        if v["command"] == _LOOP_UNTIL_COMPARE:  # a wait on memory == CMP_DATA, then the swap
            if name not in ("CMPSWAP", "FCMPSWAP"):
                raise DecodeError(f"ATOMIC_MEM COMMAND LOOP_UNTIL_COMPARE needs a compare-swap op, got {name}")
            full = (1 << bits) - 1
            if old != v["cmp_data"] & full:
                self.stall(stream, pos, read, EQUAL, v["cmp_data"] & full, full, addr, retry=True)
                return
        new = apply_atomic(name, bits, old, v["src_data"], v["cmp_data"])
        (mem.write_u64 if size == 8 else mem.write_u32)(addr, new)
        if returns:  # only RTN ops deliver the pre-op value (COPY_DATA SRC_SEL 6)
            self.atomic_return = old
        self.gpu.trace_write(self, addr, size, new)

    def _execDMA_DATA(self, stream, pos, v):
        n = v["byte_count"]
        if v["sas"] or v["das"]:
            raise UnsupportedError("DMA_DATA with register source/destination (SAS/DAS) is not emulated")
        if v["dst_sel"] == _DMA_DST_GDS or v["src_sel"] == _DMA_SRC_GDS:
            raise UnsupportedError("DMA_DATA to or from GDS is not emulated")
        sync = v["cp_sync"]
        if sync and self.dma.pending:  # CP_SYNC: the CP waits for every earlier CP DMA, then runs this one
            self.stall(stream, pos, lambda: int(not self.dma.pending), EQUAL, 1, 1, None, retry=True)
            self.wait.reason = f"DMA_DATA CP_SYNC: earlier CP DMA to finish ({self.dma.describe()})"
            return
        mem, dst = self.gpu.memory, v["dst_addr"]
        if n == 0:
            return
        if self.coherence is not None:
            self.coherence.cp_access(self, dst, n, True, self._where(stream, pos, "DMA_DATA"))
        fill = v["src_sel"] == _DMA_FROM_DATA
        src = None if fill else v["src_addr"]
        finish = lambda: self.gpu.trace_copy(self, dst, src, n)
        if fill and not v["daic"]:  # immediate: fill with the DATA dword, in chunks
            pattern = (v["src_addr"] & 0xFFFFFFFF).to_bytes(4, "little")
            mem.check(dst, n, "write")
            self._chunked(stream, pos, n, lambda off, k: mem.fill(dst + off, pattern, k), finish, sync=sync)
            return
        if not fill and not v["saic"] and not v["daic"]:  # a plain copy, in chunks
            mem.check(src, n, "read")
            mem.check(dst, n, "write")
            self._chunked(stream, pos, n, lambda off, k: mem.copy(dst + off, src + off, k), finish,
                          backwards=src < dst < src + n, sync=sync)
            return
        if not fill and v["saic"] and not v["daic"]:  # source address does not increment: repeat the dword at src
            mem.check(src, 4, "read")
            mem.check(dst, n, "write")
            self._chunked(stream, pos, n, lambda off, k: mem.fill(dst + off, mem.read(src, 4), k), finish, sync=sync)
            return
        # the forms that move at most one dword: a single step
        if fill:
            once = lambda: mem.write(dst, (v["src_addr"] & 0xFFFFFFFF).to_bytes(4, "little")[:min(n, 4)])
        elif v["saic"]:
            once = lambda: mem.copy(dst, src, min(n, 4))
        else:  # destination does not increment: the last dword lands
            mem.check(src, n, "read")
            once = lambda: mem.copy(dst, src + max(0, (n - 1) // 4 * 4), min(4, n))
        if not sync:  # behind the earlier CP DMA transfers, as one chunk
            self._chunked(stream, pos, min(n, 4), lambda off, k: once(), finish, sync=0)
            return
        once()
        self.gpu.tick(self.gpu.cost.copy(n))
        finish()

    def _chunked(self, stream, pos, n: int, move, finish, *, backwards: bool = False, sync: int = 1) -> None:
        """A DMA_DATA that moves n bytes in chunks the scheduler may interleave. CP_SYNC: this queue's next packet
        waits for the last chunk. Without it the CP DMA engine moves them (`queue.CpDma`) while the CP reads on;
        this turn ends so the scheduler chooses between the copy and the next packet (in order: the copy first)."""
        self.gpu.tick(self.gpu.cost.packet)
        if sync:
            self.start_transfer(stream, pos, "DMA_DATA", n, move, finish, backwards=backwards)
            return
        self.dma.start(Transfer("DMA_DATA", n, move, finish, (stream, pos), backwards=backwards,
                                bytes_per_tick=self.gpu.cost.bytes_per_tick))
        self.yield_turn = True

    def _execDISPATCH_DIRECT(self, stream, pos, v):
        dims = (v["dim_x"], v["dim_y"], v["dim_z"])
        target = self.gpu.target
        d = decode_dispatch(self.name, self.regs, dims, v["dispatch_initiator"],
                            wave32_capable=target.is_gfx11, rsrc3_reg=target.rsrc3_reg)
        self.gpu.memory.check(d.pgm_addr, 4, "execute")
        core = self.gpu.shader_core
        if core is None:
            raise UnsupportedError(f"DISPATCH_DIRECT {dims} of the program at 0x{d.pgm_addr:x}: no shader core is "
                                   f"attached to this GPU (registers decoded and checked)")
        for reg, value in zip(_DISPATCH_REGS, (v["dispatch_initiator"], *dims)):  # the CP latches them
            self.regs[reg] = value
        self.dispatches += 1
        self.launch(core, d, stream, pos)

    def launch(self, core, d, stream: Stream, pos: int) -> None:
        """Hand the dispatch to the shader core and move on (facts 6.3): its waves run as an activity of their own."""
        running = core.launch(self, d, self.gpu.policy)
        if running is not None:
            running.origin = (stream, pos)  # a fault of its waves is reported at the launching packet
        waves = running.total_waves if running is not None else _waves_of(d)
        self.waves += waves
        self.gpu.tick(self.gpu.cost.wave * waves)
        self.launched_dispatch(running)

    def _execDISPATCH_INDIRECT(self, stream, pos, v):
        raise UnsupportedError("DISPATCH_INDIRECT on a compute queue is not emulated (layout uncertain)")

    # -- the memory model (report / adversarial) ------------------------------------------------------

    def _full(self, stream: Stream, pos: int) -> dict:
        """Every field of the packet at `pos`, the hint fields (cache bits) included."""
        hdr = stream.dwords(pos, 1)[0]
        fmt = self.fmts[(hdr >> 8) & 0xFF]
        return fmt.decode(stream.dwords(pos, ((hdr >> 16) & COUNT_MAX) + 2), check=False)

    def _where(self, stream: Stream, pos: int, name: str) -> str:
        return f"queue {self.name}: {name} at {stream.label}+0x{stream.offset(pos):x}"

    def _modelled_write(self, stream, pos, name: str, addr: int, data: list[int], to_l2: bool, policy_field: str) -> None:
        """A CP data write with the cache model on: into GL2 (left dirty for VRAM) when the packet selects TC_L2
        without the BYPASS cache policy, else through GL2 to memory (MEM / MEM_SYNC: the weaker reading)."""
        mem = self.gpu.memory
        self.coherence.cp_access(self, addr, 4 * len(data), True, self._where(stream, pos, name))
        policy = self._full(stream, pos).get(policy_field, 0) if to_l2 else 0
        (mem.write_l2 if to_l2 and policy != _BYPASS else mem.write)(addr, _pack(data))
        self.gpu.trace_write(self, addr, 4 * len(data), _join(data))

    def _modelled_release(self, v: dict, data_sel: int, int_sel: int) -> Callable[[int, int, int], None]:
        """RELEASE_MEM at end of pipe with the cache model on: the cache actions first, then (report mode) what this
        queue's work left dirty is named; returns how the data write stores (DST_SEL TC_L2 without BYPASS stays in
        GL2)."""
        model, mem = self.coherence, self.gpu.memory
        model.perform(gcr.release(v, self.family))
        if data_sel in (_DATA_32, _DATA_64) or int_sel in _INT_ALWAYS:
            model.released(self, v["where"])
        write = mem.write_l2 if v["dst_sel"] == _RELEASE_TO_L2 and v.get("cache_policy", 0) != _BYPASS else mem.write
        return lambda addr, width, value: write(addr, (value & (1 << 8 * width) - 1).to_bytes(width, "little"))

    # -- registers ---------------------------------------------------------------------------------

    def write_register(self, reg: int, value: int) -> None:
        if SH_BASE <= reg < SH_END:
            self.regs[reg] = value & 0xFFFFFFFF
        elif UCONFIG_BASE <= reg < UCONFIG_END:
            self.gpu.uconfig[reg] = value & 0xFFFFFFFF
        else:
            raise UnsupportedError(f"write to {reg_name(reg)} (0x{reg:x}): only SH and UCONFIG registers are "
                                   f"modelled on a user queue")

    def read_register(self, reg: int) -> int:
        if SH_BASE <= reg < SH_END:
            return self.regs.get(reg, 0)
        if UCONFIG_BASE <= reg < UCONFIG_END:
            return self.gpu.uconfig.get(reg, 0)
        raise UnsupportedError(f"read of {reg_name(reg)} (0x{reg:x}): only SH and UCONFIG registers are modelled")


class _Plain:
    """The plain shapes of one packet: `key(dws)` keeps its control bits, `shapes` the keys of the plain behaviour,
    `fields(dws)` decodes what the action reads."""

    def __init__(self, fmt, control: tuple[str, ...], accepted: list[dict], fields: tuple[str, ...]):
        self.key = fmt.control_key(control)
        self.shapes = frozenset(self.key(fmt.encode(**values)) for values in accepted)
        self.fields = fmt.subset_decoder(fields)


@functools.lru_cache(maxsize=None)
def _plain_shapes(family: str) -> dict[str, _Plain]:
    fmts = {f.name: f for f in pm4.formats(family).values()}
    release = [dict(event_type=e, event_index=i, dst_sel=dst, data_sel=data, int_sel=irq)
               for e in pm4.END_OF_PIPE_EVENTS for i in _RELEASE_INDEXES for dst in _RELEASE_TO_MEMORY
               for data in (_DATA_32, _DATA_64, _DATA_CLOCK) for irq in INT_SEL if irq not in _INT_IF_EQ
               and _release_error(e, i, dst, data, irq) is None]
    return {"RELEASE_MEM": _Plain(fmts["RELEASE_MEM"], ("event_type", "event_index", "dst_sel", "data_sel", "int_sel"),
                                  release, ("addr", "data", "int_ctxid", "data_sel", "int_sel"))}


_NO_FIELDS: dict = {}


def _release_error(etype: int, index: int, dst_sel: int, data_sel: int, int_sel: int) -> EngineError | None:
    """Why RELEASE_MEM with these control fields is refused (the error to raise), or None. The general handler
    and the plain shapes of the fast path (`_RELEASE_PLAIN`) are both decided here."""
    if index not in _RELEASE_INDEXES:
        return DecodeError(f"RELEASE_MEM EVENT_INDEX {index}: must be 5 (END_OF_PIPE) or 6 (SHADER_DONE)")
    if etype not in pm4.END_OF_PIPE_EVENTS:
        return UnsupportedError(f"RELEASE_MEM event {EVENT_TYPES.get(etype, hex(etype))} is not an end-of-pipe "
                                f"event hcqsim emulates")
    if dst_sel not in _RELEASE_TO_MEMORY:
        return UnsupportedError(f"RELEASE_MEM DST_SEL {RELEASE_DST[dst_sel]} is not emulated")
    if int_sel == _INT_ONLY and data_sel != _DATA_NONE:
        return DecodeError("RELEASE_MEM INT_SEL INT_ONLY requires DATA_SEL NONE")
    if int_sel in _INT_IF_EQ and data_sel != _DATA_NONE:
        return DecodeError("RELEASE_MEM INT_SEL 5/6 compare against memory: DATA_SEL must be NONE")
    if data_sel not in (_DATA_NONE, _DATA_32, _DATA_64, _DATA_CLOCK):
        return UnsupportedError(f"RELEASE_MEM DATA_SEL {DATA_SEL[data_sel]} is not emulated")
    return None


def _waves_of(d) -> int:
    groups = d.groups[0] * d.groups[1] * d.groups[2]
    return groups * -(-(d.group_size[0] * d.group_size[1] * d.group_size[2]) // d.wave_size)


def _pack(data: list[int]) -> bytes:
    return array("I", data).tobytes()


def _join(data: list[int]) -> int:
    """Dwords as one little-endian integer (for the trace)."""
    return int.from_bytes(_pack(data), "little")
