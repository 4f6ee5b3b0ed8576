"""What every emulated user-mode queue shares: the ring, its pointers, indirect buffers, waits.

A queue owns a stack of `Stream`s: the ring (circular, unwrapped 64-bit positions, bounded by the write
pointer from the last doorbell) and, above it, the indirect buffers being executed. An engine subclass
(`command_processor.PM4Queue`, `sdma_engine.SDMAQueue`) implements `execute(stream)`: decode the packet at
the stream's position, move the position past it and act, or `stall` on it (a `Wait` the scheduler
re-checks).

The GPU's scheduler calls `ready()` and `advance(budget)`; an `EngineError` raised inside becomes a
fault record that stops this queue only.
"""
from __future__ import annotations

import ctypes
from array import array
from collections import deque
from dataclasses import dataclass
from typing import Callable

from ..compare import COMPARE, EQUAL as COMPARE_EQUAL, NAMES as COMPARE_NAMES
from ..errors import BlockedQueue, DecodeError, EngineError, QueueError, RunawayStop
from ..memory import AddressSpace
from .host import EngineHost


MIN_RING_SIZE = 1024  # facts 5.5: power of two, >= 1 KiB, base 256-byte aligned
RING_ALIGN = 256
# A packet that moves memory (SDMA COPY_LINEAR / CONST_FILL, CP DMA_DATA) moves it in chunks of this many bytes, each
# one unit of a queue's budget, so other queues, running kernels and the host can act between two chunks. A budget
# of many units moves many chunks in one memmove: the in-order default copies at memmove speed.
COPY_CHUNK = 4096


def _as_bytes(data) -> bytes:
    """Packets as bytes: a list of dwords, bytes, or a numpy array."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if hasattr(data, "tobytes"):
        return data.tobytes()
    try:
        return array("I", data).tobytes()
    except OverflowError:
        return array("I", (d & 0xFFFFFFFF for d in data)).tobytes()


class Stream:
    """A run of command dwords: the ring (circular) or an indirect buffer (linear).

    Positions are byte offsets: unwrapped and monotonic for the ring, from 0 for an IB. Dwords are
    fetched through the GPU's address-space checks and cached until the end moves.
    """

    def __init__(self, queue: "EngineQueue", kind: str, base: int, size: int, pos: int, end: int):
        self.queue, self.kind, self.base, self.size = queue, kind, base, size
        self.place = (kind == "ring", base, size)  # what the trace keeps of a stream (not its dword cache)
        self.pos, self.end = pos, end
        self._buf: list[int] = []
        self._buf_pos = self._buf_end = pos

    @property
    def is_ring(self) -> bool:
        return self.kind == "ring"

    @property
    def label(self) -> str:
        return "ring" if self.is_ring else f"IB at 0x{self.queue.gpu.canonical(self.base):x}"

    def offset(self, pos: int | None = None) -> int:
        """Byte offset inside the ring (wrapped) or IB of a position."""
        pos = self.pos if pos is None else pos
        return pos % self.size if self.is_ring else pos

    def address(self, pos: int) -> int:
        return self.base + self.offset(pos)

    @property
    def exhausted(self) -> bool:
        return self.pos >= self.end

    def dwords(self, pos: int, n: int) -> list[int]:
        """`n` dwords starting at byte position `pos`; DecodeError if they run past the end."""
        end = pos + 4 * n
        if end > self.end:
            what = "write pointer" if self.is_ring else "end of the IB"
            raise DecodeError(f"packet of {n} dwords at offset 0x{self.offset(pos):x} runs past the {what} "
                              f"({(self.end - pos) // 4} dwords available)")
        if not (self._buf_pos <= pos and end <= self._buf_end):
            self._load(pos)
        i = (pos - self._buf_pos) >> 2
        return self._buf[i:i + n]

    def window(self, pos: int) -> tuple[list[int], int]:
        """The cached dwords and the index of byte position `pos` in them, loading from `pos` when it lies
        outside. The cache never reaches past the end, so a decoder's fast path may slice a whole packet
        out of it and fall back to `dwords` (which raises the descriptive error) when the slice is short."""
        buf = self._buf
        i = (pos - self._buf_pos) >> 2
        if 0 <= i < len(buf):
            return buf, i
        self.dwords(pos, 1)  # loads from pos, or raises DecodeError past the end
        return self._buf, 0

    def _load(self, pos: int) -> None:
        mem = self.queue.gpu.memory
        nbytes = self.end - pos
        if type(mem) is AddressSpace:  # plain memory (no memory model): the dwords straight from the mapping's view
            addr = self.base + (pos % self.size if self.is_ring else pos)
            m = mem.find(addr)
            if m is not None and m.readable and not (addr | nbytes) & 3 and addr + nbytes <= m.end and (
                    not self.is_ring or pos % self.size + nbytes <= self.size):  # one piece: what mem.read reads
                i = (addr - m.start) >> 2
                self._buf = m.u32[i:i + (nbytes >> 2)].tolist()
                self._buf_pos, self._buf_end = pos, self.end
                return
        if self.is_ring:
            start = pos % self.size
            first = min(nbytes, self.size - start)
            data = mem.read(self.base + start, first)
            if nbytes > first:
                data += mem.read(self.base, nbytes - first)
        else:
            data = mem.read(self.base + pos, nbytes)
        self._buf = memoryview(data).cast("I").tolist()
        self._buf_pos, self._buf_end = pos, self.end

    def frozen(self, pos: int) -> "Stream":
        """A copy of this stream as it is now, for decoding the packet at `pos` later: its dwords from `pos` to the end
        are loaded now (as a decode now would load them), and the copy reads only those (its end and cache are its
        own; the cache list is replaced, never changed in place, by a load or `invalidate`)."""
        if pos < self.end and not (self._buf_pos <= pos < self._buf_end):
            self._load(pos)
        copy = Stream.__new__(Stream)
        copy.__dict__.update(self.__dict__)
        return copy

    def invalidate(self) -> None:
        self._buf, self._buf_pos, self._buf_end = [], self.pos, self.pos


@dataclass
class Wait:
    """A queue stalled on a memory (or register) compare: WAIT_REG_MEM / POLL_REGMEM.

    `packet` (the stalled packet's disassembly, for deadlock reports) is made when first read: `disassembly` is the
    text or a function making it from what the packet was when the queue stalled (`EngineQueue.disassembly_later`).
    Most waits end without anyone reading it."""

    disassembly: str | Callable[[], str | None] | None
    size: int  # packet size in bytes, skipped once the wait is satisfied
    read: Callable[[], int]  # current value (may raise VMFaultError)
    func: int
    reference: int
    mask: int
    address: int | None = None
    ring_offset: int | None = None
    reason: str | None = None  # what is awaited when it is not a memory value (earlier dispatches finishing)

    @property
    def packet(self) -> str | None:
        if callable(self.disassembly):
            self.disassembly = self.disassembly()
        return self.disassembly

    def satisfied(self) -> bool:
        return COMPARE[self.func](self.read() & self.mask, self.reference)

    def awaited(self) -> str:
        if self.reason is not None:
            return self.reason
        return f"(value & 0x{self.mask:x}) {COMPARE_NAMES[self.func]} 0x{self.reference:x}"


class Transfer:
    """A memory-moving packet in progress: `total` bytes, moved `COPY_CHUNK` bytes per unit of budget by
    `move(offset, nbytes)`. Overlapping copies to a higher address move from the end down (memmove's result).
    `finish()` runs once the last byte moved (the trace entry). `origin` is the packet, where a fault is reported."""

    def __init__(self, what: str, total: int, move: Callable[[int, int], None], finish: Callable[[], None],
                 origin: tuple, *, backwards: bool = False, bytes_per_tick: int = 512):
        self.what, self.total, self.move, self.finish, self.origin = what, total, move, finish, origin
        self.backwards, self.bytes_per_tick = backwards, bytes_per_tick
        self.done = 0  # bytes moved so far

    @property
    def remaining(self) -> int:
        return self.total - self.done

    def run(self, gpu, units: int) -> int:
        """Move up to `units` chunks at once; returns the chunks moved. Virtual time: one tick per
        `bytes_per_tick` bytes moved in all, the same total as moving them in one piece."""
        chunks = min(units, -(-self.remaining // COPY_CHUNK))
        n = min(self.remaining, chunks * COPY_CHUNK)
        off = self.total - self.done - n if self.backwards else self.done
        self.move(off, n)
        before, self.done = self.done, self.done + n
        gpu.tick(self.done // self.bytes_per_tick - before // self.bytes_per_tick)
        return chunks

    def describe(self) -> str:
        return f"{self.what}: {self.done} of {self.total} bytes moved"


class CpDma:
    """A queue's CP DMA engine: DMA_DATA packets without CP_SYNC, moving their bytes while the CP reads on. An
    activity of the GPU's scheduler beside the queue's packets and dispatches (kind "cp_dma"): `advance(budget)`
    moves up to `budget` chunks of the oldest transfer; transfers run one after another, in packet order.

    What waits for it (derived: PAL's compute postamble and barriers say the ring does not wait for CP DMAs and
    a bottom-of-pipe event cannot be used; the only wait is a DMA_DATA with CP_SYNC, which PAL issues with zero
    bytes): a later DMA_DATA of the queue queues behind the running ones, and one with CP_SYNC stalls the CP until
    every earlier one has finished. RELEASE_MEM, EVENT_WRITE, WAIT_REG_MEM and the end of the stream do not."""

    kind = "cp_dma"

    def __init__(self, queue: "EngineQueue"):
        self.queue = queue
        self.pending: deque[Transfer] = deque()
        self.chunks = 0  # chunks moved, for statistics

    @property
    def name(self) -> str:
        return f"{self.queue.name} CP DMA"

    def ready(self) -> bool:
        return bool(self.pending) and self.queue.active

    def start(self, t: "Transfer") -> None:
        self.pending.append(t)

    def advance(self, budget: int) -> int:
        """Move up to `budget` chunks (the oldest transfer first; its `finish` runs with its last byte)."""
        done = 0
        while done < budget and self.pending:
            t = self.pending[0]
            done += t.run(self.queue.gpu, budget - done)
            if t.remaining:
                break
            self.pending.popleft()
            t.finish()
        self.chunks += done
        return done

    def stop(self) -> None:
        self.pending.clear()

    def describe(self) -> str:
        return "; ".join(f"CP DMA {t.describe()}" for t in self.pending)


class EngineQueue:
    """Base of the emulated queues. Subclasses set `engine`, `ptr_unit` and implement `execute`."""

    engine = "queue"
    kind = "queue"  # an activity of the GPU's scheduler (the other kind: a running dispatch)
    ptr_unit = 4  # bytes per write-pointer unit (PM4: dwords, SDMA: bytes)
    max_ib_depth = 1

    def __init__(self, gpu: EngineHost, name: str, ring_va: int, ring_size: int, rptr_va: int, wptr_va: int):
        if ring_size < MIN_RING_SIZE or ring_size & (ring_size - 1):
            raise QueueError(f"ring size {ring_size} must be a power of two >= {MIN_RING_SIZE} bytes")
        if ring_va % RING_ALIGN:
            raise QueueError(f"ring base 0x{ring_va:x} is not {RING_ALIGN}-byte aligned (the MQD stores base >> 8)")
        self.gpu, self.name = gpu, name
        self.ring_va, self.ring_size, self.rptr_va, self.wptr_va = ring_va, ring_size, rptr_va, wptr_va
        self.ring = Stream(self, "ring", ring_va, ring_size, 0, 0)
        self.stack: list[Stream] = [self.ring]
        self.wait: Wait | None = None
        self.fault = None  # errors.Fault once the queue stopped
        self.destroyed = False
        self.packets = 0  # executed, for statistics
        self.waves = 0  # launched by dispatches; counts towards the runaway bound like packets
        self.wave_budget = 1 << 62  # waves a dispatch may still launch in this progress point (set by the GPU)
        self.last_jump: tuple[Stream, int] | None = None  # the last IB packet executed: a loop's likely culprit
        self.current: tuple[Stream, int] | None = None  # where the last error happened (for fault reports)
        self.submitted = 0  # host-side write position in bytes, for submit()
        self._wptr_word, self._wptr_word_at = None, None  # submit()'s ctypes view of the 64-bit wptr (made once)
        # dispatches this queue launched whose waves still run (shader.core.ActiveDispatch), oldest first; the
        # GPU's scheduler advances them beside the queue's packets
        self.inflight: list = []
        self.launched = 0  # dispatches launched so far (the next one's number)
        self.streak = 0  # packets (+ waves / WAVES_PER_PACKET) since the queue last blocked or ran dry: runaway bound
        self.eop_events: deque = deque()  # (launch bound, action): end-of-pipe work queued behind running dispatches
        self.yield_turn = False  # a packet launched a dispatch: end this turn so the scheduler sees it
        self.transfer: Transfer | None = None  # a COPY/fill packet part-way through its chunks
        self.dma = CpDma(self)  # DMA_DATA without CP_SYNC: moving beside the packets (PM4 queues only)
        self.chunks = 0  # chunks of transfers moved (units of work beside packets; not packets)
        # memory model, report mode (hcqsim.coherence): the queue's happens-before agents (command processor,
        # dispatch lane) and its command processor's live vector clock, made by `coherence.order.Order.ids` on
        # first use; and its dispatches launched since the last partial flush (`CacheModel.launched` / `drained`)
        self.hb_ids: tuple[int, int] | None = None
        self.hb_clock: dict[int, int] | None = None
        self.unfenced: list = []

    # -- pointers ----------------------------------------------------------------------------------

    @property
    def rptr(self) -> int:
        """Read pointer in queue units (unwrapped)."""
        return self.ring.pos // self.ptr_unit

    @property
    def wptr(self) -> int:
        return self.ring.end // self.ptr_unit

    def doorbell(self, value: int) -> None:
        """The doorbell carries the new write pointer (in queue units)."""
        end = value * self.ptr_unit
        if end < self.ring.pos or end - self.ring.pos > self.ring_size:
            raise QueueError(f"queue {self.name}: doorbell value {value} is outside [rptr {self.rptr}, "
                             f"rptr + ring size]: the ring would overflow or run backwards")
        self.ring.end = end
        self.ring.invalidate()  # the cached dwords must never reach past the end

    def submit(self, data) -> None:
        """Direct-API submission, as a runtime would: write the packets into the ring (wrapping), store
        the new 64-bit write pointer to memory, then ring the doorbell with it."""
        raw = _as_bytes(data)
        if len(raw) % 4:
            raise QueueError(f"queue {self.name}: submission of {len(raw)} bytes is not whole dwords")
        pos = self.submitted
        if pos + len(raw) - self.ring.pos > self.ring_size:
            self.gpu.run()  # make room if the engine can consume
            if pos + len(raw) - self.ring.pos > self.ring_size:
                raise QueueError(f"queue {self.name}: ring full ({len(raw)} bytes do not fit; rptr {self.rptr}, "
                                 f"wptr {self.wptr})")
        start = pos % self.ring_size
        first = min(len(raw), self.ring_size - start)
        ctypes.memmove(self.ring_va + start, raw[:first], first)
        if first < len(raw):
            ctypes.memmove(self.ring_va, raw[first:], len(raw) - first)
        self.submitted = pos + len(raw)
        wptr = self._wptr_word
        if wptr is None or self._wptr_word_at != self.wptr_va:
            wptr = self._wptr_word = ctypes.c_uint64.from_address(self.wptr_va)
            self._wptr_word_at = self.wptr_va
        wptr.value = self.submitted // self.ptr_unit
        self.gpu.ring_doorbell(self, self.submitted // self.ptr_unit)

    def replace_ring(self, base: int, size: int) -> None:
        """Point an idle queue at a new ring (UPDATE_QUEUE), keeping its unwrapped read/write positions."""
        if self.has_work() or self.wait is not None:
            raise QueueError(f"queue {self.name}: the ring can only move while the queue is idle")
        pos = self.ring.pos
        self.ring_va, self.ring_size = base, size
        self.ring = Stream(self, "ring", base, size, pos, pos)
        self.stack = [self.ring]

    def write_back_rptr(self) -> None:
        """Engines report their read pointer to memory; subclasses define the unit and width."""

    # -- scheduling --------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self.fault is None and not self.destroyed

    def has_work(self) -> bool:
        return self.transfer is not None or len(self.stack) > 1 or not self.ring.exhausted

    def ready(self) -> bool:
        """Could `advance` execute at least one packet now? (The scheduler asks every queue at every turn, so
        `active` and `has_work` are spelled out here.)"""
        if self.fault is not None or self.destroyed:
            return False
        if self.transfer is not None:
            return True
        if self.wait is not None:
            try:
                return self.wait.satisfied()
            except EngineError:
                return True  # let advance() run into the error and record the fault
        return len(self.stack) > 1 or self.ring.pos < self.ring.end

    def advance(self, budget: int) -> int:
        """Execute up to `budget` units -- packets, and chunks of a transfer in progress; stop early when blocked or
        out of work. Returns the count of units."""
        done = chunks = 0
        moved_before = self.chunks  # an engine's execute_run may move whole transfers itself (counted there)
        stack = self.stack
        execute_run = self.execute_run
        stream, pos = stack[-1], stack[-1].pos
        try:
            while done < budget:
                if self.transfer is not None:
                    t = self.transfer
                    stream, pos = t.origin
                    n = t.run(self.gpu, budget - done)
                    done += n
                    chunks += n
                    if t.remaining:
                        break
                    self.transfer = None
                    t.finish()
                    continue
                stream = stack[-1]
                pos = stream.pos
                if self.wait is not None:
                    if not self.wait.satisfied():
                        break
                    stream.pos += self.wait.size
                    address, self.wait = self.wait.address, None
                    if self.gpu.coherence is not None:
                        self.acquired(address)
                        self.gpu.coherence.waited(self)
                    done += 1
                    continue
                if pos >= stream.end:
                    if len(stack) == 1:
                        break
                    stack.pop()
                    continue
                done += execute_run(stream, budget - done)
                if self.yield_turn:  # a dispatch was launched: the scheduler decides what runs next
                    self.yield_turn = False
                    break
        except EngineError as e:
            self.current = getattr(e, "at", None) or (stream, pos)  # where the fault report points
            raise
        finally:
            self.packets += done - chunks - (self.chunks - moved_before)
            self.chunks += chunks
            if done:
                self.write_back_rptr()
        return done

    def start_transfer(self, stream: Stream, pos: int, what: str, total: int, move: Callable[[int, int], None],
                       finish: Callable[[], None], *, backwards: bool = False) -> None:
        """The packet at `pos` moves `total` bytes: in chunks, the first ones right away when the budget allows
        (`advance`). Its ranges are checked before (a bad address faults the packet with nothing moved)."""
        if total > 0:
            self.transfer = Transfer(what, total, move, finish, (stream, pos), backwards=backwards,
                                     bytes_per_tick=self.gpu.cost.bytes_per_tick)
        else:
            finish()

    def execute(self, stream: Stream) -> None:
        raise NotImplementedError

    def execute_run(self, stream: Stream, budget: int) -> int:
        """Execute packets of `stream` from its position: at least one, at most `budget`, stopping where the queue's
        state changes (a wait, a transfer, a pushed stream, a yielded turn). Returns the count. An engine whose
        per-packet cost matters loops here itself (an error then carries the failing packet's place as `at`)."""
        self.execute(stream)
        return 1

    def stall(self, stream: Stream, pos: int, read: Callable[[], int], func: int, reference: int, mask: int,
              address: int | None, *, retry: bool = False) -> None:
        """Stop at the packet at `pos` (already stepped past) until `(read() & mask) func reference`; then
        skip it, or execute it again when `retry` (a compare-swap loop). The scheduler re-checks the wait."""
        size = 0 if retry else stream.pos - pos
        stream.pos = pos
        coherence = self.gpu.coherence
        if coherence is not None:  # re-checked from the scheduler: the read takes this queue's cache path
            plain = read
            read = lambda: coherence.as_agent(self, plain)
        self.wait = Wait(self.disassembly_later(stream, pos), size, read, func, reference, mask, address,
                         stream.offset(pos))

    # -- running dispatches ----------------------------------------------------------------------------

    def launched_dispatch(self, running) -> None:
        """A packet launched a dispatch (`running` None: it already finished). The CP moves on (facts 6.3); this
        turn ends so the scheduler can choose between the new waves and the next packet."""
        if running is not None:
            running.seq = self.launched
            self.inflight.append(running)
        if self.gpu.coherence is not None:
            self.gpu.coherence.launched(self, running)
        self.launched += 1
        self.yield_turn = True

    def retire(self, running) -> None:
        """The last wave of `running` ended: end-of-pipe events no longer behind a running dispatch fire."""
        if running in self.inflight:
            self.inflight.remove(running)
        self.fire_eop_events()

    def at_end_of_pipe(self, action: Callable[[], None]) -> None:
        """Queue `action` as an end-of-pipe event (RELEASE_MEM): it runs once every dispatch launched before it
        has finished, in order with the queue's other such events; the queue does not stall (facts 3, 6.2)."""
        if self.gpu.coherence is not None:  # report mode: the action keeps the clock it has now (coherence.order)
            action = self.gpu.coherence.end_of_pipe(self, action)
        if not self.eop_events and not self.inflight:  # nothing before it: it acts now (what firing would do)
            action()
            return
        self.eop_events.append((self.launched, action))
        self.fire_eop_events()

    def fire_eop_events(self) -> None:
        oldest = self.inflight[0].seq if self.inflight else self.launched
        while self.eop_events and self.eop_events[0][0] <= oldest:
            self.eop_events.popleft()[1]()

    def acquired(self, address: int | None) -> None:
        """This queue observed the memory at `address` (a wait or poll passed): with the memory model on, it is
        ordered after the write it saw (report mode's happens-before, coherence.order)."""
        if address is not None and self.gpu.coherence is not None:
            self.gpu.coherence.acquired(self, address)

    def drain_dispatches(self, stream: Stream, pos: int, what: str, *, retry: bool = False) -> bool:
        """Stall at the packet at `pos` until every dispatch this queue launched before it has finished (CS_PARTIAL_FLUSH,
        an AQL barrier bit). True when there was nothing to wait for."""
        if self.gpu.coherence is not None:
            self.gpu.coherence.drained(self)
        if not self.inflight:
            return True
        self.stall(stream, pos, lambda: int(not self.inflight), COMPARE_EQUAL, 1, 1, None, retry=retry)
        self.wait.reason = f"{what}: earlier dispatches to finish ({len(self.inflight)} running)"
        return False

    def stop_dispatches(self) -> None:
        """The queue faulted or was destroyed: its waves stop, its CP DMA transfers stop, its queued end-of-pipe
        events never fire."""
        for running in self.inflight:
            running.done = True
        self.inflight.clear()
        self.eop_events.clear()
        self.dma.stop()

    # -- indirect buffers --------------------------------------------------------------------------

    def push_ib(self, base: int, size_bytes: int) -> None:
        if len(self.stack) > self.max_ib_depth:
            raise DecodeError(f"indirect buffer nested deeper than {self.max_ib_depth} levels")
        self.gpu.memory.check(base, size_bytes, "read")
        self.stack.append(Stream(self, "ib", base, size_bytes, 0, size_bytes))

    # -- reports -----------------------------------------------------------------------------------

    def runaway(self, bound: int) -> RunawayStop:
        """The error for a queue past the runaway bound, with `current` set to the looping packet: the last
        INDIRECT_BUFFER it executed (a self-chain or an IB loop), else the packet it would execute next."""
        top = self.stack[-1]
        self.current = self.last_jump or (top, top.pos)
        culprit = "the stream entered by the last indirect buffer packet (reported here) does not end" \
            if self.last_jump else "the stream does not end"
        stream, pos = self.current
        if stream.address(pos) != top.address(top.pos):  # say where it stopped too (a chain is a new Stream)
            here = f"{top.label} offset 0x{top.offset():x}"
            try:
                here += f" ({self.disassemble_at(top, top.pos)[1]})"
            except Exception:  # the report keeps what could be read
                pass
            culprit += f"; stopped before {here}"
        return RunawayStop(f"more than {bound} packets and waves in one progress point, IB depth "
                           f"{len(self.stack) - 1}: {culprit}. Raise EmulatedGPU(max_packets_per_run=...) if "
                           f"the stream is meant to be this long")

    def disassemble_at(self, stream: Stream, pos: int) -> tuple[int | None, str | None]:
        """(header dword, one-line disassembly) of the packet at `pos`, as far as it can be read."""
        raise NotImplementedError

    def disassembly_later(self, stream: Stream, pos: int) -> Callable[[], str | None]:
        """A function giving `disassemble_at(stream, pos)[1]` as it is now, made when called (a stall's text is
        rarely read). What it decodes is kept now: `stream` frozen (`Stream.frozen`: its cached dwords from `pos`
        to its end, the same list a later load would replace, never change). An engine whose disassembly reads
        memory directly (AQL) overrides this."""
        frozen = stream.frozen(pos)
        return lambda: self.disassemble_at(frozen, pos)[1]

    def blocked_report(self) -> BlockedQueue | None:
        if self.wait is None:
            return None
        try:
            current = self.wait.read() & 0xFFFFFFFFFFFFFFFF
        except EngineError:
            current = None
        return BlockedQueue(self.name, self.wait.packet, self.wait.address, self.wait.awaited(), current,
                            self.wait.ring_offset, gpu=self.gpu.label)

    def status(self) -> str:
        state = "faulted" if self.fault else "destroyed" if self.destroyed else "waiting" if self.wait else \
            "busy" if self.has_work() else "running kernels" if self.inflight else "idle"
        running = f", {len(self.inflight)} dispatch(es) running" if self.inflight else ""
        moving = f", {self.transfer.describe()}" if self.transfer is not None else ""
        if self.dma.pending:
            moving += f", {self.dma.describe()}"
        return f"{self.engine} queue {self.name}: {state}, rptr {self.rptr}, wptr {self.wptr}{running}{moving}"
