"""The SDMA engines: each fetches, decodes and executes the SDMA packets of its user queues.

Packets are read with the tables of `hcqsim.sdma`. An `SDMAEngine` holds what the queues of one engine
share (its engine-local TIMESTAMP counter); an `SDMAQueue` is one user queue on it.

Emulation model: memory is coherent (with the default memory model), so cache policies, MTYPE and GCR_REQ
decode and are checked but have nothing to act on. The HDP-flush handshake (POLL_REGMEM HDP_FLUSH) drains the
GPU's HDP (coherence/hdp.py). A COPY finishes before the next packet starts, so a FENCE after a COPY already
orders after its data, as on hardware. COPY_LINEAR and CONST_FILL move their bytes in chunks (`queue.COPY_CHUNK`,
one unit of the queue's budget each): other queues, kernels and the host may act, and see a part-done copy,
between two chunks; the ranges are checked before the first one.

Uncertain behaviour and the choice made here (HARDWARE_FACTS 5.2 / 7):
* POLL_REGMEM RETRY_COUNT is treated as "retry forever" whatever its value; INTERVAL is ignored
  (polls are re-checked at every progress point).
* SRBM_WRITE is rejected as a privileged packet (whether hardware faults or drops it is unknown).
* GCR_REQ (both sub-ops) acts on the modelled caches when `memory_model` is report/adversarial, else is a no-op.
  SDMA 5/6 reads and writes go through GL2 (writes through to memory); SDMA 4 goes around GL2 (coherence.space).
* COPY_LINEAR BACKWARDS and the SW (endian swap) fields have uncertain semantics: non-zero values
  raise UnsupportedError rather than guess. Overlapping source and destination (undefined on
  hardware) behave like memmove.
* IBs do not nest (an INDIRECT inside an IB is a DecodeError).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from ..atomics import OP_NAMES as ATOMIC_OP_NAMES
from ..atomics import apply as apply_atomic
from ..atomics import decode_op as decode_atomic
from ..coherence.gcr import gcr_cntl
from ..compare import COMPARE, EQUAL
from ..errors import DecodeError, UnsupportedError
from ..sdma import FILL_ELEMENT_BYTES, FORMATS, describe, lookup, packet_size, size_prefix, version_name
from .host import EngineHost
from .queue import COPY_CHUNK, EngineQueue, Stream

# Packets that move memory: they cost gpu.cost.copy(n) instead of gpu.cost.packet.
_MOVERS = ("COPY_LINEAR", "CONST_FILL")
# COPY_LINEAR flags `_execCOPY_LINEAR` refuses (its `_no_flags` list): a packet with none set is plain
_COPY_REFUSED = ("broadcast", "backwards", "encrypt", "tmz", "src_sw", "dst_sw")


@dataclass
class SDMAEngine:
    """One SDMA engine of a GPU: the state its queues share."""

    index: int
    timestamp_base: int = 0  # the engine-local counter: TIMESTAMP_SET's value ...
    timestamp_set_at: int = 0  # ... at this GPU clock; it counts on at the GPU clock rate

    def local_timestamp(self, clock: int) -> int:
        return (self.timestamp_base + clock - self.timestamp_set_at) & (2 ** 64 - 1)


class SDMAQueue(EngineQueue):
    """An SDMA queue: ring and pointers in bytes (u64 rptr written back), one IB level."""

    engine = "sdma"
    ptr_unit = 1  # wptr and doorbell values are byte counts
    max_ib_depth = 1  # INDIRECT may not appear inside an IB
    fast_paths = True  # a plain COPY_LINEAR moved at once (`execute_run`): tests turn it off to compare both paths

    def __init__(self, gpu: EngineHost, name: str, ring_va: int, ring_size: int, rptr_va: int, wptr_va: int,
                 sdma_engine: SDMAEngine):
        super().__init__(gpu, name, ring_va, ring_size, rptr_va, wptr_va)
        self.sdma_engine = sdma_engine
        self.version = version_name(gpu.target.sdma_version)
        self.fmts = FORMATS[self.version]
        self.count_bits = gpu.target.sdma_copy_count_bits
        self.copy_count_bits = gpu.target.sdma_linear_copy_count_bits or self.count_bits
        self._handlers = {key: getattr(self, "_exec" + fmt.name) for key, fmt in self.fmts.items()}
        # A plain COPY_LINEAR: OP/SUB_OP of COPY_LINEAR and none of the flags `_execCOPY_LINEAR` refuses set (the
        # header's and dw2's); its other fields are hints. `_plain_copy` tells one from its dwords.
        copy = self.fmts[(1, 0)]
        refused = [copy.by_name[f] for f in _COPY_REFUSED if f in copy.by_name]
        self._copy_format = copy
        self._copy_header_mask = 0xFFFF | sum(f.mask << f.lo for f in refused if f.dw == 0)
        self._copy_dw2_mask = sum(f.mask << f.lo for f in refused if f.dw == 2)
        assert all(f.dw in (0, 2) for f in refused) and copy.size == 7

    @property
    def ip(self) -> str:
        return "SDMA " + ".".join(map(str, self.gpu.target.sdma_version))

    def write_back_rptr(self) -> None:
        # RPTR_WRITEBACK: the unwrapped u64 byte position, same space as the wptr (HARDWARE_FACTS 5.5).
        self.gpu.memory.write_u64(self.rptr_va, self.ring.pos)

    def disassemble_at(self, stream: Stream, pos: int):
        hdr = stream.dwords(pos, 1)[0]
        avail = max(0, (stream.end - pos) // 4)
        fmt = self.fmts.get((hdr & 0xFF, (hdr >> 8) & 0xFF))
        if fmt is None:
            return hdr, describe([hdr], self.version)
        if avail < size_prefix(fmt):
            return hdr, describe(stream.dwords(pos, avail), self.version)
        n = packet_size(fmt, stream.dwords(pos, size_prefix(fmt)))
        return hdr, describe(stream.dwords(pos, min(n, avail)), self.version, canon=self.gpu.canonical)

    # -- the fetch/decode/execute step -------------------------------------------------------------

    def execute(self, stream: Stream) -> None:
        pos = stream.pos
        buf, i = stream.window(pos)  # the cached dwords (never past the end): slices where they hold enough
        hdr = buf[i]
        fmt = self.fmts.get((hdr & 0xFF, (hdr >> 8) & 0xFF)) or lookup(hdr, self.version)
        k = size_prefix(fmt)
        n = packet_size(fmt, buf[i:i + k] if i + k <= len(buf) else stream.dwords(pos, k))
        dws = buf[i:i + n] if i + n <= len(buf) else stream.dwords(pos, n)
        values = fmt.decode_fast(dws)
        self.gpu.trace_packet(self, stream, pos, fmt, dws)
        if fmt.name not in _MOVERS:
            self.gpu.tick(self.gpu.cost.packet)
        stream.pos = pos + 4 * n
        self._handlers[(fmt.opcode, fmt.sub_op)](stream, pos, values, dws)

    def execute_run(self, stream: Stream, budget: int) -> int:
        """One packet, as `execute`. A plain COPY_LINEAR (none of the flags its handler refuses, read from its dwords
        without the general decode; COUNT is checked by the shared `_copy_bytes`) goes to the handler's action
        (`_start_copy`) directly, and when all of its chunks fit in the rest of `budget` (what the in-order default
        gives) its Transfer runs to the end here: the run `advance` would make next. Returns the units: the packet
        and the chunks moved (counted in `chunks` here)."""
        pos = stream.pos
        buf, i = stream.window(pos)
        if (buf[i] & self._copy_header_mask) != 1 or not self.fast_paths or self.gpu.coherence is not None \
                or i + 7 > len(buf):
            self.execute(stream)
            return 1
        dws = buf[i:i + 7]
        if dws[2] & self._copy_dw2_mask:
            self.execute(stream)  # the general path refuses it with its message
            return 1
        gpu = self.gpu
        gpu.trace_packet(self, stream, pos, self._copy_format, dws)
        stream.pos = pos + 28
        self._start_copy(stream, pos, dws[5] | dws[6] << 32, dws[3] | dws[4] << 32, self._copy_bytes(dws[1]))
        t = self.transfer
        if t is None or -(-t.remaining // COPY_CHUNK) >= budget:
            return 1  # nothing to move, or more chunks than this turn allows: `advance` runs the Transfer
        moved = t.run(gpu, budget - 1)
        self.transfer = None
        t.finish()
        self.chunks += moved
        return 1 + moved

    # -- helpers -----------------------------------------------------------------------------------

    def _aligned(self, what: str, addr: int, align: int) -> int:
        if addr % align:
            raise DecodeError(f"{what} address 0x{addr:x} is not {align}-byte aligned")
        return addr

    def _byte_count(self, name: str, raw: int, bits: int | None = None) -> int:
        """COUNT (bytes - 1) of COPY_LINEAR / CONST_FILL, checked against the modelled IP's field width."""
        bits = bits or self.count_bits
        if raw >> bits:
            raise DecodeError(f"{name} COUNT 0x{raw:x} ({raw + 1} bytes) does not fit the {bits}-bit COUNT field "
                              f"of {self.ip} ({self.gpu.target.name}): one packet moves at most {1 << bits} bytes "
                              f"({(1 << bits) >> 20} MiB); larger transfers must be split")
        return raw + 1

    def _no_flags(self, name: str, v: dict, *flags: str) -> None:
        for f in flags:
            if v.get(f):
                raise UnsupportedError(f"{name} with {f.upper()} = {v[f]} is not emulated")

    # -- packets -----------------------------------------------------------------------------------

    def _execNOP(self, stream, pos, v, dws):
        pass

    def _execCOPY_LINEAR(self, stream, pos, v, dws):
        n = self._copy_bytes(dws[1])
        self._no_flags("COPY_LINEAR", v, *_COPY_REFUSED)
        self._start_copy(stream, pos, v["dst_addr"], v["src_addr"], n)

    def _copy_bytes(self, raw: int) -> int:
        return self._byte_count("COPY_LINEAR", raw, self.copy_count_bits)

    def _start_copy(self, stream, pos, dst: int, src: int, n: int) -> None:
        """COPY_LINEAR's action (both paths): both ranges checked, the packet's cost, then its bytes in chunks."""
        mem = self.gpu.memory
        mem.check(src, n, "read")
        mem.check(dst, n, "write")
        self.gpu.tick(self.gpu.cost.packet)
        self.start_transfer(stream, pos, "COPY_LINEAR", n, lambda off, k: mem.copy(dst + off, src + off, k),
                            lambda: self.gpu.trace_copy(self, dst, src, n), backwards=src < dst < src + n)

    def _execWRITE_UNTILED(self, stream, pos, v, dws):
        self._no_flags("WRITE_UNTILED", v, "encrypt", "tmz", "sw")
        addr = self._aligned("WRITE_UNTILED destination", v["dst_addr"], 4)
        data = v["data"]
        raw = struct.pack(f"<{len(data)}I", *data)
        self.gpu.memory.write(addr, raw)
        self.gpu.trace_write(self, addr, len(raw), int.from_bytes(raw, "little"))

    def _execINDIRECT(self, stream, pos, v, dws):
        self.last_jump = (stream, pos)  # named by a runaway report
        if not stream.is_ring:
            raise DecodeError("INDIRECT inside an indirect buffer: SDMA IBs do not nest")
        if v["priv"]:
            raise DecodeError("INDIRECT with PRIV = 1 is not allowed on a user queue")
        base, ndw = v["ib_base"], v["ib_size"]
        if base % 32:
            raise DecodeError(f"INDIRECT IB base 0x{base:x} is not 32-byte aligned")
        if ndw == 0:
            raise DecodeError("INDIRECT with IB_SIZE 0")
        next_dw = stream.offset(pos + 24) // 4
        if next_dw % 8:
            raise DecodeError(f"INDIRECT at ring offset 0x{stream.offset(pos):x} ends at ring dword {next_dw}, "
                              f"not on an 8-dword boundary: pad with {(2 - stream.offset(pos) // 4) & 7} NOP dwords "
                              f"before it")
        self.push_ib(base, 4 * ndw)

    def _execFENCE(self, stream, pos, v, dws):
        if v.get("gpa"):
            raise UnsupportedError("FENCE with GPA = 1 (a physical address) is not emulated: user queues use GPU VAs")
        addr = self._aligned("FENCE", v["addr"], 4)
        self.gpu.memory.write_u32(addr, v["data"])
        self.gpu.trace_write(self, addr, 4, v["data"])

    def _execTRAP(self, stream, pos, v, dws):
        self.gpu.interrupt("sdma_trap", v["int_context"] & 0x0FFFFFFF, self)

    def _execSEM(self, stream, pos, v, dws):
        raise UnsupportedError("SEM (legacy semaphore) is not emulated: use POLL_REGMEM and FENCE")

    def _execPOLL_REGMEM(self, stream, pos, v, dws):
        func, ref, mask = v["func"], v["value"], v["mask"]
        if v["hdp_flush"]:
            self._hdp_flush(stream, pos, v)
            return
        if not v["mem_poll"]:
            if func == 0:  # ALWAYS: the compare passes whatever the register holds (ROCr 6.1's first packet on gfx942)
                return
            raise UnsupportedError(f"POLL_REGMEM on register 0x{(v['addr'] & 0xFFFFFFFF) >> 2:x}: only memory polls "
                                   f"and the HDP-flush form are emulated")
        addr = self._aligned("POLL_REGMEM", v["addr"], 4)
        mem = self.gpu.memory
        mem.check(addr, 4, "read")

        def read() -> int:
            return mem.read_u32(addr)

        if COMPARE[func](read() & mask, ref):
            self.acquired(addr)
            return
        self.stall(stream, pos, read, func, ref, mask, addr)

    def _hdp_flush(self, stream, pos, v) -> None:
        """POLL_REGMEM HDP_FLUSH = 1 (amdgpu emit_hdp_flush, facts 5.2): VALUE is written to GPU_HDP_FLUSH_REQ (dw2 =
        its offset << 2), the HDP's buffered host stores reach VRAM, then GPU_HDP_FLUSH_DONE (dw1) is compared."""
        if v["mem_poll"]:
            raise DecodeError("POLL_REGMEM HDP_FLUSH needs MEM_POLL = 0 (the handshake uses NBIO registers)")
        addr = v["addr"]
        done, request = (addr & 0xFFFFFFFF) >> 2, (addr >> 32) >> 2
        hdp = self.gpu.hdp
        if not hdp.is_flush_handshake(request, done):
            want = "/".join(f"0x{r:x}" for r in hdp.flush_registers)
            raise UnsupportedError(f"POLL_REGMEM HDP_FLUSH on registers REQ 0x{request:x} / DONE 0x{done:x}: the "
                                   f"handshake uses GPU_HDP_FLUSH_REQ/DONE ({want})")
        hdp.flush_from(self.name, "POLL_REGMEM HDP_FLUSH on GPU_HDP_FLUSH_REQ/DONE")
        ref, mask, func = v["value"], v["mask"], v["func"]
        if not COMPARE[func](ref & mask, ref):  # DONE holds the bits written to REQ: a compare that fails never passes
            self.stall(stream, pos, lambda: ref, func, ref, mask, None)

    def _execCOND_EXE(self, stream, pos, v, dws):
        addr = self._aligned("COND_EXE", v["addr"], 4)
        if self.gpu.memory.read_u32(addr) == v["reference"]:
            return
        skip = 4 * v["exec_count"]
        if stream.pos + skip > stream.end:
            where = "write pointer" if stream.is_ring else "end of the IB"
            raise DecodeError(f"COND_EXE skips {v['exec_count']} dwords but only {(stream.end - stream.pos) // 4} "
                              f"follow before the {where}")
        stream.pos += skip

    def _execATOMIC(self, stream, pos, v, dws):
        self._no_flags("ATOMIC", v, "tmz")
        name, bits, _returns = decode_atomic(v["atomic_op"])
        size, full = bits // 8, (1 << bits) - 1
        addr = self._aligned(f"ATOMIC {ATOMIC_OP_NAMES[v['atomic_op']]}", v["addr"], size)
        mem = self.gpu.memory
        mem.check(addr, size, "write")

        def read() -> int:
            return mem.read_u64(addr) if size == 8 else mem.read_u32(addr)

        old, cmp = read(), v["cmp_data"] & full
        if v["loop"]:
            if name == "FCMPSWAP":
                raise UnsupportedError("ATOMIC LOOP with a floating-point compare-swap is not emulated")
            if name != "CMPSWAP":
                raise DecodeError(f"ATOMIC LOOP needs a compare-swap op, got {ATOMIC_OP_NAMES[v['atomic_op']]}")
            if old != cmp:
                # Retry until the compare succeeds: a wait on *addr == CMP_DATA, then execute again.
                self.stall(stream, pos, read, EQUAL, cmp, full, addr, retry=True)
                return
        new = apply_atomic(name, bits, old, v["src_data"], cmp)
        (mem.write_u64 if size == 8 else mem.write_u32)(addr, new)
        self.gpu.trace_write(self, addr, size, new)

    def _execCONST_FILL(self, stream, pos, v, dws):
        n = self._byte_count("CONST_FILL", dws[4])
        self._no_flags("CONST_FILL", v, "sw")
        elem = FILL_ELEMENT_BYTES[v["fillsize"]]
        data = v["data"].to_bytes(4, "little")
        pattern = data[:elem] if elem <= 4 else data * 2  # [uncertain] an 8-byte element repeats DATA
        dst, mem = v["dst_addr"], self.gpu.memory
        mem.check(dst, n, "write")
        self.gpu.tick(self.gpu.cost.packet)
        # chunks start at multiples of COPY_CHUNK from dst: the pattern (1-8 bytes) keeps its phase
        self.start_transfer(stream, pos, "CONST_FILL", n, lambda off, k: mem.fill(dst + off, pattern, k),
                            lambda: self.gpu.trace_copy(self, dst, None, n))

    def _execTIMESTAMP_SET(self, stream, pos, v, dws):
        # The engine-local counter then counts on from the value at the GPU clock rate.
        self.sdma_engine.timestamp_base, self.sdma_engine.timestamp_set_at = v["init_value"], self.gpu.clock

    def _execTIMESTAMP_GET(self, stream, pos, v, dws):
        addr = self._aligned("TIMESTAMP_GET", v["addr"], 8)
        value = self.sdma_engine.local_timestamp(self.gpu.clock)
        self.gpu.memory.write_u64(addr, value)
        self.gpu.trace_write(self, addr, 8, value)

    def _execTIMESTAMP_GET_GLOBAL(self, stream, pos, v, dws):
        addr = self._aligned("TIMESTAMP_GET_GLOBAL", v["addr"], 8)
        self.gpu.memory.write_u64(addr, self.gpu.clock)
        self.gpu.trace_write(self, addr, 8, self.gpu.clock)

    def _execSRBM_WRITE(self, stream, pos, v, dws):
        raise DecodeError(f"SRBM_WRITE (register 0x{v['reg_addr']:x}) is privileged: only kernel rings may write "
                          f"registers, a user SDMA queue rejects it")

    def _execGCR_REQ(self, stream, pos, v, dws):
        # The cache actions act on the modelled caches (memory_model report/adversarial); the coherent model has
        # nothing to act on. The range (BASE_VA/LIMIT_VA) is not honoured: the whole cache acts (docs/memory_model.md).
        coherence = self.gpu.coherence
        if coherence is not None:
            coherence.perform(gcr_cntl(lookup(dws[0], self.version).decode(dws, check=False)))

    _execGCR_REQ_USER = _execGCR_REQ
