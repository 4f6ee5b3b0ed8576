"""The emulated GPU: memory, queues, scheduler, virtual clock, faults, interrupts and trace.

Nothing runs on a thread. Work happens at progress points: a doorbell, `run()` / `run_until()`, and
the driver's waits. At a progress point the scheduler policy repeatedly picks a ready queue and a packet
budget until no queue can advance (or the awaited condition holds).

Time is virtual: `clock` is the GPU's 100 MHz reference counter (what timestamps read), advanced by
the cost model below for every packet and byte moved, so the same inputs give the same timestamps.
"""
from __future__ import annotations

import random
import re
import traceback
from collections import deque
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .aql import QUEUE_READ_DISPATCH_ID, QUEUE_WRITE_DISPATCH_ID
from .coherence import MemoryReport, ReportLog, check_model, default_model, make_model
from .coherence.space import CachedSpace
from .coherence.hdp import HostDataPath
from .engines.aql import AQLQueue
from .engines.command_processor import TRACKED as _TRACKED, PM4Queue
from .engines.queue import EngineQueue, Stream
from .engines.sdma_engine import SDMAEngine, SDMAQueue
from .errors import BlockedQueue, DeadlockError, EngineError, Fault, QueueError, VMFaultError, gpu_label
from .fields import PacketFormat
from .codeobject import KD_SIZE, decode_descriptor, user_sgpr_layout
from .memory import PAGE_SIZE, AddressSpace, VaWindow, host_view, page_align
from .registers import ADDRESS_REGISTER_PARTS, REGS, SH_BASE
from .shader.core import DISPATCH_QUANTUM, EPOCH
from .shader.spin import RUNS
from .targets import Target, get_target

_HEADER_NOISE = ("type", "opcode", "op")
# The runaway bound: packets executed plus waves launched (WAVES_PER_PACKET to a packet) by one queue in one
# progress point. Past it the queue faults (kind "runaway") and the others go on. ~1-3 s of emulation; the longest legitimate stream a
# 64 KiB ring holds without IBs is 16K packets.
MAX_PACKETS_PER_RUN = 1_000_000
# A launched wave costs 1/WAVES_PER_PACKET of a packet against the bound: a legitimate kernel of millions of
# waves (2^26 threads is 1-2M waves) must not read as a runaway, while a billion-workgroup grid still does.
WAVES_PER_PACKET = 64
# A bounded progress point (a doorbell, the driver's waits, a free-running quantum) hands control back after about
# this much work (packets plus issue steps) when it is not quiet yet: ~0.1-0.6 s of emulation at most.
PROGRESS_WORK = 1 << 16
# In order, a running dispatch holds back its queue's later packets until it ends, unless it is found spinning or
# has changed no memory for this many issue steps (16 quanta): the liveness backstop for polls the spin finding
# cannot recognise (their registers change, not by a constant step: shader.spin), at the price of letting a later
# packet overtake a kernel that computes that long without storing anything.
OVERTAKE_STEPS = 16 * DISPATCH_QUANTUM
_HEX = re.compile(r"0x([0-9a-fA-F]+)")  # addresses in messages are canonicalised in traces
USER_DATA_0, PGM_LO, PGM_HI = REGS["COMPUTE_USER_DATA_0"], REGS["COMPUTE_PGM_LO"], REGS["COMPUTE_PGM_HI"]
KD_SEARCH = 1 << 20  # how far from a PM4 launch's code entry its kernel descriptor is looked for (traces only)


@dataclass(frozen=True)
class CostModel:
    """Virtual time, in 10 ns ticks of the 100 MHz counter.

    Deliberately simple and documented rather than realistic: every packet costs `packet`, a packet
    that moves memory costs `bytes_per_tick` bytes per tick on top, and a dispatch costs `wave` per
    wave launched.
    """

    packet: int = 2
    bytes_per_tick: int = 512  # ~51 GB/s
    wave: int = 1

    def copy(self, nbytes: int) -> int:
        return self.packet + nbytes // self.bytes_per_tick


@dataclass
class Interrupt:
    """An interrupt delivered to the event sink (the emulated KFD listens here)."""

    source: str  # "cp_eop" (RELEASE_MEM int_sel), "sdma_trap", "vm_fault", "queue_error"
    ctxid: int
    queue: str
    timestamp: int
    fault: Fault | None = None


@dataclass
class Allocation:
    """GPU memory from `EmulatedGPU.alloc`: `va` (same on CPU and GPU) and a numpy uint8 `view`."""

    va: int
    size: int
    kind: str
    view: np.ndarray

    def u32(self) -> np.ndarray:
        return self.view[: self.size // 4 * 4].view(np.uint32)

    def u64(self) -> np.ndarray:
        return self.view[: self.size // 8 * 8].view(np.uint64)


# ---------------------------------------------------------------------------------------------------
# scheduler policies. At each decision the GPU offers the ready activities: per queue (creation order) its
# running dispatches (oldest first), then its CP DMA engine (kind "cp_dma": DMA_DATA without CP_SYNC still moving),
# then its packet processor (a dispatch found spinning, or idle for overtake_steps, behind it); a queue whose oldest
# dispatch used up a quantum goes behind the other queues. ready[0] is the in-order choice (`EmulatedGPU._activities`).
# `choose(ready) -> (activity, budget)`: budget is packets for a queue (a queue part-way through a COPY/fill packet,
# `queue.transfer`, counts each chunk of queue.COPY_CHUNK bytes as one), chunks for a CP DMA engine, issue steps for
# a dispatch (capped at DISPATCH_QUANTUM); `(None, 0)` hands control back to the host (the progress point ends there). Optional hooks a
# policy may define: `workgroup_order(n_groups) -> permutation | None` (launch order of a dispatch's workgroups,
# None: the CP's order), `choose_waves(n_pcs) -> index` (which of the distinct PCs of runnable waves issues
# next, sorted ascending; without the hook the lowest PC issues first) and `split_waves(n_waves) -> index | None`
# (asked when n_waves > 1 waves sit at that PC: index i issues only the i-th of them, in wave order, ahead of the
# others; None, or no hook, issues them all together in wave order). Waves of one workgroup (and of different
# workgroups) thus reach memory in any order a policy picks. For the adversarial memory model,
# `evict_lines(n_lines) -> indexes` (cache lines that leave early at a progress point; without it lines stay until a
# cache operation), `choose_cu(n_cus) -> index` and `choose_xcc(n_xcc) -> index` (asked per workgroup: the CU and
# the XCC it runs on; without them the model's deterministic default placement), docs/memory_model.md.


class RunToBlock:
    """The first ready activity runs until it blocks, runs dry or (a kernel) uses up a quantum. Fast default, in
    order: a kernel finishes before the next packet of its queue is read, unless it spins on memory only a later
    packet (or the host) can change (see `EmulatedGPU._activities`)."""

    name = "run_to_block"

    def choose(self, ready: list) -> tuple:
        return ready[0], 1 << 62


class RoundRobin:
    """One packet (or issue step) per turn, activities in rotation."""

    name = "round_robin"

    def __init__(self):
        self._next = 0

    def choose(self, ready: list) -> tuple:
        q = ready[self._next % len(ready)]
        self._next += 1
        return q, 1


class SeededRandom:
    """A random ready activity and a random budget of 1..max_budget, a random workgroup order (up to
    `max_shuffle` workgroups), a random PC to issue next and, with chance `split_chance`, one random wave of it
    issuing ahead of the others, all from one seeded generator."""

    name = "random"

    def __init__(self, rng: random.Random, max_budget: int = 4, max_shuffle: int = 4096,
                 split_chance: float = 0.125):
        self.rng, self.max_budget, self.max_shuffle = rng, max_budget, max_shuffle
        self.split_chance = split_chance

    def choose(self, ready: list) -> tuple:
        return self.rng.choice(ready), self.rng.randint(1, self.max_budget)

    def workgroup_order(self, n_groups: int):
        if n_groups < 2 or n_groups > self.max_shuffle:
            return None
        order = list(range(n_groups))
        self.rng.shuffle(order)
        return order

    def choose_waves(self, n_pcs: int) -> int:
        return self.rng.randrange(n_pcs)

    def split_waves(self, n_waves: int) -> int | None:
        # rarely, so waves that split apart mostly issue together again (each split costs issue steps)
        return self.rng.randrange(n_waves) if self.rng.random() < self.split_chance else None

    def choose_cu(self, n_cus: int) -> int:
        """Memory model only: the CU (of the modelled ones per XCC) a workgroup runs on."""
        return self.rng.randrange(n_cus)

    def choose_xcc(self, n_xcc: int) -> int:
        """Memory model only, several XCCs (gfx942): the XCC (and so the L2) a workgroup runs on."""
        return self.rng.randrange(n_xcc)

    def evict_lines(self, n_lines: int) -> list[int]:
        """Adversarial memory model only (called at each progress point): now and then a few cache lines leave
        early (a dirty one is written back first)."""
        if self.rng.random() >= 0.25:
            return []
        return [self.rng.randrange(n_lines) for _ in range(self.rng.randint(1, 4))]


class ExplicitChoices:
    """Choices supplied from outside (hypothesis draws them): `pick(n) -> (index, budget)` over the ready
    activities; with `host_turns`, index n_ready (of n = n_ready + 1) ends the progress point, handing control
    back to the host. `waves(n_pcs) -> index`, `split(n_waves) -> index | None` and `workgroups(n_groups) ->
    permutation | None`, when given, choose inside dispatches (the policy hooks above)."""

    name = "explicit"
    host_turns = False

    def __init__(self, pick: Callable[[int], tuple[int, int]], *, waves: Callable[[int], int] | None = None,
                 workgroups: Callable[[int], list[int] | None] | None = None,
                 split: Callable[[int], int | None] | None = None,
                 evictions: Callable[[int], list[int]] | None = None, cus: Callable[[int], int] | None = None,
                 xccs: Callable[[int], int] | None = None):
        self.pick = pick
        if waves is not None:
            self.choose_waves = waves
        if split is not None:
            self.split_waves = split
        if evictions is not None:  # adversarial memory model: which of n cache lines leave at a progress point
            self.evict_lines = evictions
        if cus is not None:  # memory model: which of n CUs (per-CU vector, scalar, instruction caches) a workgroup uses
            self.choose_cu = cus
        if xccs is not None:  # memory model: which of n XCCs (an L2 each, gfx942) a workgroup uses
            self.choose_xcc = xccs
        if workgroups is not None:
            self.workgroup_order = workgroups

    def choose(self, ready: list) -> tuple:
        n = len(ready) + (1 if self.host_turns else 0)
        i, budget = self.pick(n)
        i %= n
        if i == len(ready):
            return None, 0
        return ready[i], max(1, budget)


def make_policy(policy, rng: random.Random):
    if not isinstance(policy, str):
        return policy
    if policy == "run_to_block":
        return RunToBlock()
    if policy == "round_robin":
        return RoundRobin()
    if policy == "random":
        return SeededRandom(rng)
    raise ValueError(f"unknown scheduler policy {policy!r}: run_to_block, round_robin, random or an object")


# ---------------------------------------------------------------------------------------------------


class EmulatedGPU:
    """One emulated AMD GPU.

    >>> gpu = EmulatedGPU(target="gfx1100", seed=0)
    >>> buf = gpu.alloc(4096); q = gpu.compute_queue()
    >>> q.submit(pm4.write_data(buf.va, [1, 2])); gpu.run()

    `index` is its place in the machine and `gpu_id` what the driver calls it (the emulated KFD sets it);
    `label` names the GPU in every message. `memory_model` is "coherent" (default: one coherent copy), "report"
    (coherent values, every access that could have seen a stale or not-written-back line recorded in
    `memory_reports`) or "adversarial" (stale lines kept, dirty lines held until written back): docs/memory_model.md.
    """

    def __init__(self, target: str = "gfx1100", seed: int = 0, *, policy="run_to_block",
                 window: VaWindow | None = None, index: int = 0, gpu_id: int | None = None, autorun: bool = True,
                 trace_limit: int = 200_000, interrupt_limit: int = 200_000, max_packets_per_run: int = MAX_PACKETS_PER_RUN,
                 cost: CostModel = CostModel(), shader: bool | str = True, max_kernel_steps: int | None = None,
                 memory_model: str | None = None, memory_reports: list | None = None,
                 spin_iterations: int | None = -1):
        self.target: Target = get_target(target)
        # None: HCQSIM_MEMORY_MODEL, else coherent; a model from the environment is watched by the pytest plugin
        # (its records go to hcqsim.coherence.report.SEEN), an explicit one is the caller's to check
        self.memory_model_from_environment = memory_model is None
        memory_model = default_model() if memory_model is None else memory_model
        self.memory_model = check_model(memory_model)
        # MemoryReport records (hcqsim.coherence); an EmulatedSystem passes one list shared by its GPUs
        self.memory_reports: list = [] if memory_reports is None else memory_reports
        self._report_log = ReportLog(self.memory_reports, watched=self.memory_model_from_environment)
        self.seed, self.index, self.gpu_id, self.autorun = seed, index, gpu_id, autorun
        self.label = gpu_label(index, gpu_id)
        self.rng = random.Random(seed)
        self.policy = make_policy(policy, self.rng)
        self._own_window = window is None
        self.window = window or VaWindow()
        # coherent: a plain AddressSpace and no model object at all (no cost); else every engine access takes its
        # cache path (hcqsim.coherence.space.CachedSpace)
        self.memory = AddressSpace() if memory_model == "coherent" else CachedSpace()
        self.coherence = make_model(self, memory_model, self._report_log)
        if self.coherence is not None:
            self.memory.model = self.coherence
        self.queues: list[EngineQueue] = []
        self.clock = 0
        self.cost = cost
        self.faults: list[Fault] = []
        self.interrupts: deque[Interrupt] = deque(maxlen=interrupt_limit)  # the latest, like the trace
        self.interrupt_handlers: list[Callable[[Interrupt], None]] = []
        self.trace: deque = deque(maxlen=trace_limit)
        self.max_packets_per_run = max_packets_per_run
        self.uconfig: dict[int, int] = {}  # UCONFIG register file (absolute dword address -> value)
        self.sdma_engines: dict[int, SDMAEngine] = {}  # created with their first queue
        self.shader_core = None  # .dispatch(queue, Dispatch) -> waves; None: DISPATCH_DIRECT is unsupported
        if shader:
            from .shader.core import ShaderCore
            # shader=True: the mode HCQSIM_SHADER names (interpret unless set); or "interpret" / "translate"
            self.shader_core = ShaderCore(self, mode=shader if isinstance(shader, str) else None)
            if max_kernel_steps is not None:
                self.shader_core.max_kernel_steps = max_kernel_steps
            if spin_iterations != -1:  # None: a loop that only counts is never called a spin
                self.shader_core.spin_iterations = spin_iterations
        self._buffers: dict[int, Allocation] = {}
        self.hdp = HostDataPath(self)  # host stores to CPU-mapped VRAM and the HDP flushes (coherence/hdp.py)
        self._running = False
        self._counts: dict[str, int] = {}
        self._yielded: set = set()  # dispatches that used up a quantum: their queue goes last in the next choices
        # a running dispatch that changed no memory for this many issue steps no longer holds back the later packets
        # of its queue in the in-order default (see _activities)
        self.overtake_steps = OVERTAKE_STEPS
        # trace canonicalisation with a displaced window (_canon_regs): per queue, the trace entry that last wrote
        # each USER_DATA register; code entry -> its kernel descriptor's address
        self._reg_writers: dict[str, dict[int, tuple[dict, int]]] = {}
        self._descriptors: dict[int, int] = {}
        self.livelocked = False  # the last progress point ended with nothing but spinning waves

    # -- memory ------------------------------------------------------------------------------------

    def alloc(self, nbytes: int, kind: str = "gtt", *, executable: bool = False, writable: bool = True,
              align: int = PAGE_SIZE, name: str = "") -> Allocation:
        """Allocate zeroed memory, mapped for this GPU and the CPU at the same address."""
        va = self.window.allocate(nbytes, align)
        size = page_align(nbytes)
        self.memory.map(va, size, kind, writable=writable, executable=executable, name=name or kind)
        buf = Allocation(va, nbytes, kind, host_view(va, nbytes))
        self._buffers[va] = buf
        return buf

    def free(self, buf: Allocation) -> None:
        if self._buffers.pop(buf.va, None) is None:
            raise ValueError(f"0x{buf.va:x} is not a live allocation of {self.label}")
        self.memory.unmap(buf.va)
        self.window.release(buf.va)

    def canonical(self, va: int) -> int:
        return self.window.canonical(va)

    # -- queues ------------------------------------------------------------------------------------

    def _name(self, engine: str) -> str:
        n = self._counts.get(engine, 0)
        self._counts[engine] = n + 1
        return f"{engine}{n}"

    def add_queue(self, queue: EngineQueue) -> EngineQueue:
        self.queues.append(queue)
        return queue

    def create_compute_queue(self, ring_va: int, ring_size: int, rptr_va: int, wptr_va: int) -> PM4Queue:
        """A PM4 compute queue on caller-provided memory (the KFD CREATE_QUEUE path)."""
        return self.add_queue(PM4Queue(self, self._name("pm4_"), ring_va, ring_size, rptr_va, wptr_va))

    def create_aql_queue(self, ring_va: int, ring_size: int, rptr_va: int, wptr_va: int) -> AQLQueue:
        """A COMPUTE_AQL queue on caller-provided memory (the KFD CREATE_QUEUE path); same shader core."""
        return self.add_queue(AQLQueue(self, self._name("aql_"), ring_va, ring_size, rptr_va, wptr_va))

    def aql_queue(self, ring_size: int = 1 << 16) -> AQLQueue:
        """An AQL queue with its ring and an amd_queue_t block allocated here (the direct API): rptr and
        wptr are its read_dispatch_id / write_dispatch_id, and read_dispatch_id_field_base_byte_offset
        is filled so the queue_ptr SGPR points at the block, as ROCr lays it out."""
        ring, block = self.alloc(ring_size, name="aql ring"), self.alloc(PAGE_SIZE, name="amd_queue_t")
        ring.view[::64] = 1  # every slot starts with header type INVALID (facts 5.5)
        block.u32()[(QUEUE_READ_DISPATCH_ID + 8) // 4] = QUEUE_READ_DISPATCH_ID
        q = self.create_aql_queue(ring.va, ring_size, block.va + QUEUE_READ_DISPATCH_ID,
                                  block.va + QUEUE_WRITE_DISPATCH_ID)
        q.owned_buffers = [ring, block]
        q.amd_queue = block
        return q

    def sdma_engine(self, index: int) -> SDMAEngine:
        engine = self.sdma_engines.get(index)
        if engine is None:
            engine = self.sdma_engines[index] = SDMAEngine(index)
        return engine

    def create_sdma_queue(self, ring_va: int, ring_size: int, rptr_va: int, wptr_va: int,
                          engine: int = 0) -> SDMAQueue:
        """An SDMA queue of engine `engine` on caller-provided memory (the KFD CREATE_QUEUE path)."""
        return self.add_queue(SDMAQueue(self, self._name("sdma_"), ring_va, ring_size, rptr_va, wptr_va,
                                        self.sdma_engine(engine)))

    def compute_queue(self, ring_size: int = 1 << 16) -> PM4Queue:
        """A PM4 compute queue with its ring and pointer page allocated here (the direct API)."""
        ring, ptrs = self.alloc(ring_size, name="pm4 ring"), self.alloc(PAGE_SIZE, name="pm4 rptr/wptr")
        q = self.create_compute_queue(ring.va, ring_size, ptrs.va, ptrs.va + 8)
        q.owned_buffers = [ring, ptrs]
        return q

    def sdma_queue(self, ring_size: int = 1 << 16, engine: int = 0) -> SDMAQueue:
        ring, ptrs = self.alloc(ring_size, name="sdma ring"), self.alloc(PAGE_SIZE, name="sdma rptr/wptr")
        q = self.create_sdma_queue(ring.va, ring_size, ptrs.va, ptrs.va + 8, engine)
        q.owned_buffers = [ring, ptrs]
        return q

    def destroy_queue(self, queue: EngineQueue) -> None:
        if queue not in self.queues:
            raise QueueError(f"queue {queue.name} does not belong to {self.label}")
        queue.destroyed = True
        queue.stop_dispatches()
        self.queues.remove(queue)

    def ring_doorbell(self, queue: EngineQueue, value: int) -> None:
        """A doorbell write: the new write pointer. A progress point when `autorun` is on."""
        if not queue.active:
            raise QueueError(f"doorbell on {'faulted' if queue.fault else 'destroyed'} queue {queue.name}")
        try:
            queue.doorbell(value)
            if self.coherence is not None and self.coherence.hb:  # the host publishes: ordered after what it knows
                self.coherence.order.doorbell(queue)
        except QueueError as e:  # a doorbell is a plain store that cannot fail: a bad value faults this queue alone
            err = EngineError(str(e))
            err.kind = "bad doorbell"
            self._record_fault(queue, err)
            return
        if self.autorun:
            self.step()

    # -- progress ----------------------------------------------------------------------------------

    def run(self) -> int:
        """Progress point: advance queues and running kernels until none can, or until nothing but spinning waves
        remains (`livelocked`). Returns the work done (packets plus issue steps)."""
        return self._progress(None)

    def step(self, work_limit: int = PROGRESS_WORK) -> int:
        """A bounded progress point: as `run`, but hands control back after about `work_limit` packets plus issue
        steps even when work remains (a doorbell, the driver's waits, the free-running thread's quanta)."""
        return self._progress(None, work_limit)

    def run_until(self, condition: Callable[[], bool], waiting_for: str) -> None:
        """Advance until `condition()` holds; DeadlockError when the machine goes quiet first, or when nothing but
        waves spinning on memory nobody writes is left (a livelock: the report names them)."""
        self._progress(condition)
        if not condition():
            raise DeadlockError(waiting_for, self.blocked() + self.spinning())

    @property
    def settled(self) -> bool:
        """Nothing can advance, or only waves spinning on memory nobody writes (as of the last progress point)."""
        return self.livelocked or not self._activities()

    def _activities(self) -> list:
        """What could advance now, in the in-order default's order. Per queue (creation order): its running
        dispatches, oldest first, then its packets -- so in order a dispatch finishes before the packets behind it
        run, however long it takes. Two exceptions keep that live: a dispatch found spinning (looping on memory
        nobody writes, see ActiveDispatch) goes behind its queue's packets, and so does one that has changed no
        memory for `overtake_steps` issue steps (a poll whose registers change, not by a constant step, that the
        spin finding cannot see). A queue whose oldest dispatch used up a quantum goes behind the other queues, so a
        long kernel never starves another queue."""
        front, back = [], []
        yielded, overtake = self._yielded, self.overtake_steps
        for q in self.queues:
            inflight = q.inflight
            if inflight or q.dma.pending:
                acts, behind = [], []
                for d in inflight:
                    (behind if d.spinning or d.steps - d.changed_at >= overtake else acts).append(d)
                if q.dma.pending and q.active:  # DMA_DATA without CP_SYNC still moving: in order, before what follows
                    acts.append(q.dma)
                if q.ready():
                    acts.append(q)
                acts += behind
                if not acts:
                    continue
            elif q.wait is None and q.transfer is None and q.ring.pos >= q.ring.end and len(q.stack) == 1:
                continue  # nothing to execute (what q.ready() answers for an idle queue, without the call)
            elif q.ready():
                acts = [q]
            else:
                continue
            (back if yielded and acts[0] in yielded else front).append(acts)
        return [a for group in front + back for a in group] if back or len(front) != 1 else front[0]

    def _progress(self, condition: Callable[[], bool] | None, work_limit: int | None = None) -> int:
        if self._running:  # a doorbell rung from inside the run (interrupt handler): the loop sees it
            return 0
        self._running = True
        self.livelocked = False
        RUNS[0] += 1  # the host may have stored since the last progress point: spin verdicts are stale
        work = 0
        bound = self.max_packets_per_run
        coherence = self.coherence
        if coherence is not None:
            evict = getattr(self.policy, "evict_lines", None)  # adversarial: the policy may evict lines here
            if evict is not None and coherence.adversarial:
                coherence.evict(evict)
        vram, ran = self.hdp.vram, None
        try:
            vram.before_run()  # host stores and HDP-flush register stores since the last run (coherence/hdp.py)
            while condition is None or not condition():
                ready = self._activities()
                if not ready:
                    break
                if vram.owed:  # the HDP's look for host stores, before the first GPU access of this run
                    vram.look_if_owed()
                for a in ready:  # (a loop, not all(generator): this runs at every decision)
                    if a.kind != "dispatch":
                        break
                else:
                    if self._all_spinning(ready):
                        self.livelocked = True  # only waves looping on memory nobody writes: nothing will change
                        break
                if work_limit is not None and work >= work_limit:
                    break
                act, budget = self.policy.choose(ready)
                if act is None:  # the policy hands control back to the host here
                    break
                self._yielded.discard(act)
                if coherence is not None:
                    coherence.agent = act  # the engine accesses of this turn take the activity's cache path
                if act.kind == "dispatch":
                    work += self._advance_dispatch(act, min(max(1, budget), DISPATCH_QUANTUM))
                    continue
                if act.kind == "cp_dma":
                    work += self._advance_cp_dma(act, max(1, budget))
                    continue
                q = act
                before = q.streak
                q.wave_budget = (bound - before) * WAVES_PER_PACKET  # a dispatch checks it before launching
                waves, packets, chunks = q.waves, q.packets, q.chunks
                work += self._advance(q, min(budget, bound - before))
                # the runaway bound counts packets (and waves), not the chunks of a long copy
                ran = q.packets - packets or (0 if q.chunks != chunks else 1)
                q.streak = total = before + ran + -(-(q.waves - waves) // WAVES_PER_PACKET)
                if q.ready():
                    if total >= bound:  # past the bound with work left: this queue alone stops
                        self._record_fault(q, q.runaway(bound))
                else:
                    q.streak = 0  # blocked or dry: the stream paused
            ran = work  # the run ended normally: `work` says whether anything executed
        finally:
            vram.after_run(ran)
            self._running = False
            if coherence is not None:
                coherence.agent = None  # back to the host: its accesses are plain memory
        return work

    def _all_spinning(self, dispatches: list) -> bool:
        """Only running kernels are left: watch the long-running ones for spins; True once every one spins."""
        verdict = True
        for d in dispatches:
            if not d.watching and d.steps >= DISPATCH_QUANTUM:
                d.watch()
            verdict = verdict and d.spinning
        return verdict

    def spinning(self) -> list:
        """The waves of kernels found spinning (for livelock reports)."""
        return [w for q in self.queues for d in q.inflight if d.spinning for w in d.spinning_waves()]

    def _advance_dispatch(self, d, budget: int) -> int:
        q = d.queue
        try:
            n = d.advance(budget)
        except EngineError as e:
            self._dispatch_fault(d, e)
            return 1
        except Exception as e:  # an emulator bug: stop the queue, keep the GPU, keep the evidence
            err = EngineError(f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}")
            err.kind = "internal emulator error"
            self._dispatch_fault(d, err)
            return 1
        if d.done:
            try:
                q.retire(d)
            except EngineError as e:  # an end-of-pipe write that faults
                self._record_fault(q, e)
                q.stop_dispatches()
        else:
            if not d.watching and d.steps >= DISPATCH_QUANTUM:
                d.watch()  # a long kernel: look for a spin, which lets the packets behind it run
            if n >= budget or d.spinning:
                self._yielded.add(d)  # a quantum used up (or a spin found): other queues get a turn first
        return max(n, 1)

    def _advance_cp_dma(self, dma, budget: int) -> int:
        """Move up to `budget` chunks of a queue's CP DMA transfers (DMA_DATA without CP_SYNC)."""
        q = dma.queue
        try:
            n = dma.advance(budget)
        except Exception as e:  # ranges are checked at the packet: only the memory model or an emulator bug
            if not isinstance(e, EngineError):
                e = EngineError(f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}")
                e.kind = "internal emulator error"
            if dma.pending:
                q.current = dma.pending[0].origin
            self._record_fault(q, e)
            return 1
        if n:
            EPOCH[0] += 1  # chunks wrote memory: spin verdicts taken before are stale
        return max(n, 1)

    def _dispatch_fault(self, d, e: EngineError) -> None:
        q = d.queue
        if d.origin is not None:
            q.current = d.origin
        self._yielded.discard(d)
        if q.active:
            self._record_fault(q, e)
        q.stop_dispatches()

    def _advance(self, q: EngineQueue, budget: int) -> int:
        """Advance a queue by up to `budget` units (packets, transfer chunks); returns the units (at least 1)."""
        before = q.packets + q.chunks
        try:
            q.advance(budget)
        except EngineError as e:
            self._record_fault(q, e)
        except Exception as e:  # an emulator bug: stop the queue, keep the GPU, keep the evidence
            err = EngineError(f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}")
            err.kind = "internal emulator error"
            self._record_fault(q, err)
        units = q.packets + q.chunks - before
        if units:
            EPOCH[0] += 1  # packets and chunks may have written memory: spin verdicts taken before are stale
        return max(units, 1)

    def _record_fault(self, q: EngineQueue, e: EngineError) -> Fault:
        stream, pos = q.current if q.current else (q.stack[-1], q.stack[-1].pos)
        q.current = None
        header, text = None, None
        try:
            header = stream.dwords(pos, 1)[0]
        except EngineError:
            pass
        try:
            header, text = q.disassemble_at(stream, pos)
        except Exception:  # the report keeps what could be read
            pass
        f = Fault(self.index, q.engine, q.name, e.kind, str(e), ring_offset=stream.offset(pos), header=header,
                  packet=text, timestamp=self.clock, where=stream.label, gpu_id=self.gpu_id)
        if isinstance(e, VMFaultError):
            f.address, f.size, f.access, f.page = e.address, e.size, e.access, e.page
        q.fault = f
        q.stop_dispatches()
        self.faults.append(f)
        self.trace.append((self.clock, q.name, "fault", f))
        self.interrupt("vm_fault" if f.is_vm_fault else "queue_error", 0, q, fault=f)
        return f

    def blocked(self) -> list[BlockedQueue]:
        """Every queue stalled on a wait, with what it waits for (for deadlock reports)."""
        return [b for q in self.queues if (b := q.blocked_report())]

    # -- what engines call -------------------------------------------------------------------------

    def add_memory_report(self, record: MemoryReport) -> MemoryReport:
        """Record a memory-model hazard (any emulator part may: the cache model, the HDP write buffer). A repeat
        of an earlier record's (kind, missing, writer, reader, level) widens that record instead."""
        if not record.gpu:
            record.gpu = self.label
        return self._report_log.add(record)

    def tick(self, cost: int) -> None:
        self.clock += cost

    def interrupt(self, source: str, ctxid: int, queue: EngineQueue, fault: Fault | None = None) -> None:
        irq = Interrupt(source, ctxid, queue.name, self.clock, fault)
        self.interrupts.append(irq)
        if source in ("cp_eop", "sdma_trap"):
            self.trace.append((self.clock, queue.name, "interrupt", irq))
        for handler in self.interrupt_handlers:
            handler(irq)

    # Every engine records through these three: entries are (clock, queue name, kind, data), decoded and
    # printed only when `trace_lines` asks (the raw dwords are kept, not text, to stay off the hot path).

    def trace_packet(self, queue: EngineQueue, stream: Stream, pos: int, fmt: PacketFormat, dws: list[int]) -> None:
        # the stream's place, not the stream: a Stream holds its dword cache (a whole IB), the trace must not
        canon = None
        if self.window.base != self.window.preferred_base and fmt.name in _TRACKED:  # displaced: see _canon_regs
            canon = self._canon_regs(queue, fmt, dws)
        self.trace.append((self.clock, queue.name, "packet", (stream.place, pos, fmt, dws, canon)))

    def trace_write(self, queue: EngineQueue, addr: int, size: int, value: int) -> None:
        self.trace.append((self.clock, queue.name, "write", (addr, size, value)))

    def trace_copy(self, queue: EngineQueue, dst: int, src: int | None, size: int) -> None:
        self.trace.append((self.clock, queue.name, "copy", (dst, src, size)))

    def _canon_regs(self, queue: EngineQueue, fmt: PacketFormat, dws) -> dict[int, int] | None:
        """With the window away from its preferred base, the register values of this packet that hold addresses,
        canonical ({payload index: value}; filled in later for USER_DATA). Which values are addresses is data:
        the address registers of `registers.ADDRESS_REGISTERS`, and the USER_DATA the next DISPATCH_DIRECT's
        kernel descriptor makes pointers (`codeobject.user_sgpr_layout`). Called before the packet executes, so
        `queue.regs` holds the registers' values before it."""
        regs = getattr(queue, "regs", None)
        if regs is None or len(dws) < 2:
            return None
        writers = self._reg_writers.setdefault(queue.name, {})
        if fmt.name == "DISPATCH_DIRECT":
            self._canon_user_data(regs, writers)
            return None
        first, canon = SH_BASE + (dws[1] & 0xFFFF), {}
        written = {first + i: v for i, v in enumerate(dws[2:])}
        for reg in written:  # USER_DATA writes wait for the dispatch that tells what they hold
            if USER_DATA_0 <= reg < USER_DATA_0 + 16 or reg in ADDRESS_REGISTER_PARTS:
                writers[reg] = (canon, reg - first)
        for parts in {ADDRESS_REGISTER_PARTS[r] for r in written.keys() & ADDRESS_REGISTER_PARTS.keys()}:
            if all(r in writers for r, _, _ in parts):  # each part written by some packet: this address is
                self._canon_address(parts, lambda r: written.get(r, regs.get(r, 0)), writers)  # (re)done now
        return canon

    def _canon_address(self, parts, value_of, writers) -> None:
        """Rewrite the address `parts` ((register, shift, bits), ...) make, in the entries that last wrote them."""
        addr = sum((value_of(r) & ((1 << bits) - 1)) << shift for r, shift, bits in parts)
        moved = self.canonical(addr)
        if moved == addr:
            return
        for r, shift, bits in parts:
            canon, index = writers[r]
            mask = (1 << bits) - 1
            canon[index] = (value_of(r) & ~mask & 0xFFFFFFFF) | ((moved >> shift) & mask)

    def _canon_user_data(self, regs: dict[int, int], writers: dict[int, tuple[dict, int]]) -> None:
        """A DISPATCH_DIRECT: canonicalise the USER_DATA pairs its kernel descriptor makes addresses, in the trace
        entries that last wrote them."""
        kd = self._descriptor_of(((regs.get(PGM_LO, 0) | (regs.get(PGM_HI, 0) & 0xFF) << 32) << 8))
        if kd is None:
            return
        for _, sgpr, n, is_address in user_sgpr_layout(kd):
            lo, hi = USER_DATA_0 + sgpr, USER_DATA_0 + sgpr + 1
            if is_address and sgpr + n <= 16 and lo in writers and hi in writers:
                self._canon_address(((lo, 0, 32), (hi, 32, 32)), lambda r: regs.get(r, 0), writers)

    def _descriptor_of(self, entry: int) -> dict | None:
        """The decoded kernel descriptor whose code entry is `entry` (PM4 launches name the code, not the
        descriptor): the 64-byte aligned descriptor in the code's mapping with descriptor + kernel_code_entry_byte_
        offset == entry, searched within KD_SEARCH bytes; None when there is none (a hand-built program)."""
        cached = self._descriptors.get(entry)
        m = self.memory.find(entry)
        if m is None:
            return None
        if cached is None or not (m.start <= cached < m.end):
            lo = max(m.start, (entry - KD_SEARCH) & ~63)
            hi = min(m.end, entry + KD_SEARCH) & ~63
            try:
                raw = np.frombuffer(self.memory.read(lo, hi - lo), np.int64)
            except EngineError:
                return None
            offsets = raw[2::8]  # kernel_code_entry_byte_offset of each 64-byte slot
            slots = lo + 64 * np.arange(len(offsets), dtype=np.int64)
            hits = np.flatnonzero(offsets == entry - slots)
            if not len(hits):
                return None
            cached = self._descriptors[entry] = int(slots[hits[0]])
        try:
            kd = decode_descriptor(self.memory.read(cached, KD_SIZE))
        except EngineError:
            return None
        return kd if cached + kd["kernel_code_entry_byte_offset"] == entry else None

    # -- trace -------------------------------------------------------------------------------------

    def trace_lines(self) -> list[str]:
        """The trace as text, addresses canonicalised: the same seed and inputs give the same lines."""
        return [self._format_trace(e) for e in self.trace]

    def _format_trace(self, entry) -> str:
        t, q, kind, data = entry
        head = f"{t:>12} {q:<8} "
        if kind == "packet":
            (is_ring, base, size), pos, fmt, dws, canon = data
            label = "ring" if is_ring else f"IB at 0x{self.canonical(base):x}"
            offset = pos % size if is_ring else pos
            values = fmt.decode(dws, check=False)
            if canon:
                values[fmt.payload] = [canon.get(i, v) for i, v in enumerate(values[fmt.payload])]
            return head + f"{label}+0x{offset:04x} {fmt.format(values, canon=self.canonical, skip=_HEADER_NOISE)}"
        if kind == "write":
            addr, size, value = data
            return head + f"write {size}B 0x{self.canonical(addr):x} <- 0x{value:x}"
        if kind == "copy":
            dst, src, size = data
            what = "fill" if src is None else f"copy from 0x{self.canonical(src):x}"
            return head + f"{what} {size}B to 0x{self.canonical(dst):x}"
        if kind == "interrupt":
            return head + f"interrupt {data.source} ctxid=0x{data.ctxid:x}"
        if kind == "fault":
            f = data
            addr = "" if f.address is None else f" addr=0x{self.canonical(f.address):x}"
            message = _HEX.sub(lambda m: f"0x{self.canonical(int(m.group(1), 16)):x}", f.message.splitlines()[0])
            return head + f"fault {f.kind}{addr} at {f.where}+0x{f.ring_offset or 0:x}: {message}"
        return head + f"{kind} {data}"

    # -- lifetime ----------------------------------------------------------------------------------

    def close(self) -> None:
        for q in list(self.queues):
            q.destroyed = True
            q.stop_dispatches()
        self.queues.clear()
        for va in list(self._buffers):
            self.memory.unmap(va)
            self.window.release(va)
        self._buffers.clear()
        if self._own_window:
            self.window.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
