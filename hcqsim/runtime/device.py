"""Devices: KFD bring-up, events, signals, kernargs, hardware queues, waits and the timeline; a Device's memory is
runtime/allocation.py (`DeviceMemory`) and its copies runtime/copies.py (`DeviceCopies`), both parts of `Device`.

All of it goes through an `OSBoundary` and GPU-visible memory. The bring-up follows HARDWARE_FACTS 1.7:
open /dev/kfd, read the topology, open the render node, GET_VERSION, ACQUIRE_VM, RUNTIME_ENABLE, the
event page and events, then queues on demand.
"""
from __future__ import annotations

import ctypes
import time
import weakref
from collections import OrderedDict, deque

import numpy as np

from .. import kfd_uapi as K
from ..boundary import KFD_PATH, MAP_SHARED, PROT_READ, PROT_WRITE, OSBoundary
from ..errors import DeadlockError, DeviceClosedError, DeviceFault, DeviceTimeout, gpu_label
from .allocation import (BASE_FLAGS, DEFAULT_POISON, PAGE, QUARANTINE_BYTES, QUARANTINE_COUNT,  # noqa: F401
                         UNCACHED_FLAGS, DeviceMemory)
from .buffer import Buffer
from .checks import caller_location, expect  # noqa: F401
from .copies import DIRECT_COPY_MIN, DIRECT_FLAGS, STAGING_CHUNK, DeviceCopies  # noqa: F401
from .exclusive import Turn, exclusive
from .queues import SDMA_COPY_MAX, ComputeQueue, CopyQueue, HardwareRing, submission_sync
from .names import creation_site, name_addresses, signal_label
from .signal import SIGNAL_SIZE, Signal, check_signal_value
from .topology import GpuNode, gpu_nodes

EVENT_PAGE_SIZE = K.KFD_SIGNAL_EVENT_PAGE_SIZE
KERNARG_ARENA = 1 << 20
KERNARG_ARENAS = 16  # arenas with kernels in flight before a full one waits (Device._next_kernarg_arena)
WAIT_SLICE_MS = 100


class KFDProcess:
    """This process's /dev/kfd on one OS boundary: version, topology, the event page, process-wide state."""

    def __init__(self, os_: OSBoundary):
        self.os = os_
        self.fd = os_.open(KFD_PATH)
        ver = K.GetVersionArgs()
        os_.ioctl(self.fd, K.AMDKFD_IOC_GET_VERSION, ver)
        self.version = (ver.major_version, ver.minor_version)
        self.nodes: list[GpuNode] = gpu_nodes(os_)
        self.runtime_enabled = False
        self.event_page: Buffer | None = None
        self.devices: dict[int, Device] = {}

    def ioctl(self, request: int, args: ctypes.Structure) -> ctypes.Structure:
        self.os.ioctl(self.fd, request, args)
        return args

    def create_event(self, event_type: int, auto_reset: int, page_handle: int = 0) -> K.CreateEventArgs:
        return self.ioctl(K.AMDKFD_IOC_CREATE_EVENT, K.CreateEventArgs(event_page_offset=page_handle,
                                                                      event_type=event_type, auto_reset=auto_reset))

    def label(self, gpu_id: int) -> str:
        """How messages name the GPU `gpu_id` of this process: `GPU <index> (gpu_id <gpu_id>)`."""
        index = next((i for i, n in enumerate(self.nodes) if n.gpu_id == gpu_id), None)
        return f"gpu_id {gpu_id}" if index is None else gpu_label(index, gpu_id)

    def close(self) -> None:
        self.os.close(self.fd)


class KernargArena:
    """One KERNARG_ARENA-byte block of kernarg memory: the builders that took kernargs from it (weakly: a builder
    dropped after submitting lets go), and per ring the last submission of theirs (the fence)."""

    def __init__(self, buffer: "Buffer"):
        self.buffer = buffer
        self.holders: weakref.WeakSet = weakref.WeakSet()
        self.fence: dict = {}  # HardwareRing -> submission seq

    def free(self) -> bool:
        return not self.holders and all((ring.progress.value & 0xFFFFFFFF) >= seq for ring, seq in self.fence.items())


class Device(DeviceMemory, DeviceCopies):
    """One GPU through KFD. Use `open_device(spec)` to get one. Its memory (alloc, free, map_to) is
    `allocation.DeviceMemory`, its copies (copyin, copyout, transfer) `copies.DeviceCopies`; the state of both is
    set here."""

    def __init__(self, process: KFDProcess, index: int, *, owner=None, sanitize: bool = False,
                 poison: int | bool | None = None, aql: bool = False):
        if not 0 <= index < len(process.nodes):
            raise ValueError(f"GPU index {index} out of range: the topology has {len(process.nodes)} GPU(s)")
        self.process, self.os, self.index = process, process.os, index
        self.node = process.nodes[index]
        self.gpu_id, self.target, self.family = self.node.gpu_id, self.node.target, self.node.family
        self.label = gpu_label(index, self.gpu_id)
        self.sdma_version = "sdma6" if self.family == "gfx11" else "sdma4"
        self.copy_max_bytes = SDMA_COPY_MAX
        self._owner = owner  # keeps an emulated system alive as long as its devices
        self._turn = Turn()  # one host thread at a time inside this Device (runtime/exclusive.py)
        self.aql = bool(aql)  # compute queues are COMPUTE_AQL (kernels as AQL packets, the rest as PM4 IBs)
        self._closed = False
        self._free_cache: OrderedDict[tuple[int, int], list[Buffer]] = OrderedDict()
        self._cached_bytes, self.cache_limit = 0, 256 << 20
        self._buffers: dict[int, Buffer] = {}
        self._rings: dict[tuple[str, int], HardwareRing] = {}  # (engine, queue index) -> ring
        self._doorbell_base: int | None = None
        self._signal_pages: list[Buffer] = []
        self._signal_page_at: dict[int, Buffer] = {}  # page VA -> the page's Buffer
        self._free_signals: list[int] = []
        self.faults: list[str] = []
        # sanitizer (docs/runtime.md, "Sanitizer mode"): frees unmap at once, freed VA stays reserved for a while, new
        # memory optionally poisoned; `_graveyard` remembers what was freed where, for fault reports
        self.sanitize = bool(sanitize)
        self.poison = DEFAULT_POISON if poison is True else (None if poison is False else poison)
        if self.poison is not None and not 0 <= self.poison < 1 << 32:
            raise ValueError(f"poison pattern {self.poison!r} must be a 32-bit value")
        self._quarantine: deque[tuple[int, int]] = deque()  # (va, size) of freed ranges still reserved
        self._quarantine_bytes = 0
        self._graveyard: dict[int, tuple[int, str]] = {}  # va -> (size, "what, freed at where")
        self._pending_signals: list[Signal] = []  # freed, waiting for their last submissions to finish
        # what failure reports can name (runtime/names.py): live signals by VA, loaded programs (weakly)
        self._signals: dict[int, Signal] = {}
        self._programs: list[weakref.ref] = []
        self._object_number = 0
        self._timeline_submitted = 0  # the highest timeline value a successful submission signals
        self._bring_up()
        self.timeline_wrap = 1 << 32
        self.timeline_signal = self.new_signal(0, name=f"{self.label} timeline")
        self._shadow_signal = self.new_signal(0, name=f"{self.label} timeline")
        self.timeline_value = 1  # the value the next timeline submission signals
        self._staging: list[Buffer] = []
        self._kernargs: KernargArena | None = None
        self._kernarg_pos = 0
        self._retired_kernargs: list[KernargArena] = []  # full arenas, reused once free
        self._dispatch_id = 0
        self._scratch: Buffer | None = None

    # -- bring-up ----------------------------------------------------------------------------------

    def _bring_up(self) -> None:
        p = self.process
        self.drm_fd = self.os.open(self.node.render_path)
        p.ioctl(K.AMDKFD_IOC_ACQUIRE_VM, K.AcquireVmArgs(drm_fd=self.drm_fd, gpu_id=self.gpu_id))
        if not p.runtime_enabled and p.version >= (1, 14):
            p.ioctl(K.AMDKFD_IOC_RUNTIME_ENABLE, K.RuntimeEnableArgs(r_debug=0, mode_mask=0))
            p.runtime_enabled = True
        if p.event_page is None:  # the process's event page lives in GTT of the first device opened
            p.event_page = self._alloc(EVENT_PAGE_SIZE, UNCACHED_FLAGS | BASE_FLAGS)
            first = p.create_event(K.KFD_IOC_EVENT_SIGNAL, 1, p.event_page.handle)
        else:  # this GPU writes event slots too: map the page into its address space
            p.event_page.device._map(p.event_page, [self.gpu_id])
            first = p.create_event(K.KFD_IOC_EVENT_SIGNAL, 1)
        self.completion_event = first.event_id
        self._completion_slot = p.event_page.va + 8 * first.event_slot_index
        self.memory_event = p.create_event(K.KFD_IOC_EVENT_MEMORY, 1).event_id
        self.hw_event = p.create_event(K.KFD_IOC_EVENT_HW_EXCEPTION, 1).event_id
        p.devices[self.gpu_id] = self
        mmio = self._alloc(PAGE, K.KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP | K.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
                           cpu_map=False)
        self.hdp_flush_addr = self.os.mmap(0, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, p.fd, mmio.mmap_offset)
        self._mmio = mmio

    def hdp_flush(self) -> None:
        """Flush the HDP write buffer (facts 6.4): CPU stores to this GPU's VRAM through a host mapping are not
        visible to the GPU until then. The CPU-side flush: a 32-bit 0 at offset 0 (HDP_MEM_FLUSH_CNTL) of the
        MMIO-remap page. Every submission does it before the doorbell; code that writes VRAM and then releases
        a GPU queue waiting on a signal (rather than submitting) must call it before the release."""
        self._check_open()
        ctypes.c_uint32.from_address(self.hdp_flush_addr).value = 0

    def completion_slot(self) -> tuple[int, int]:
        """(event-page slot address, event id) that GPU commands write and interrupt with to wake waiters."""
        return self._completion_slot, self.completion_event

    # -- signals -----------------------------------------------------------------------------------

    @exclusive
    def new_signal(self, value: int = 0, *, name: str | None = None) -> Signal:
        """A signal (16 bytes of coherent memory) starting at `value` (32 bits, as the GPU compares). Failure
        reports name it by `name` (else `#number`) and the caller's line, recorded here."""
        check_signal_value(value, "new_signal value")
        if name is not None:
            expect(name, str, "new_signal: name")
        self._check_faults()
        sig = self._new_signal(value, name)
        self._signals[sig.va] = sig
        return sig

    def _new_signal(self, value: int, name: str | None) -> Signal:
        site, number = creation_site(), self._next_number()
        if self.sanitize:  # a page of its own, so freeing it can really unmap it
            page = self._alloc(PAGE, UNCACHED_FLAGS | BASE_FLAGS)
            sig = Signal(self, page.va, value, name=name, created_at=site, number=number)
            sig.page = page
            return sig
        if not self._free_signals:
            self._reclaim_signals()
        if not self._free_signals:
            page = self._alloc(PAGE, UNCACHED_FLAGS | BASE_FLAGS)
            self._signal_pages.append(page)
            self._signal_page_at[page.va] = page
            self._free_signals = [page.va + off for off in range(PAGE - SIGNAL_SIZE, -1, -SIGNAL_SIZE)]
        sig = Signal(self, self._free_signals.pop(), value, name=name, created_at=site, number=number)
        sig.page = self._signal_page_at[sig.va & ~(PAGE - 1)]
        return sig

    def _reclaim_signals(self) -> None:
        """Freed slots whose last submissions have all completed become free for new signals."""
        waiting = []
        for sig in self._pending_signals:
            if all(ring.completed(seq) for ring, seq in sig.last_use.items()):
                self._free_signals.append(sig.va)
            else:
                waiting.append(sig)
        self._pending_signals = waiting

    @exclusive
    def free_signal(self, signal: Signal) -> None:
        """Give the slot back. It is handed out again only after every submission that named the signal
        has completed; with the sanitizer its page is unmapped at once (a later GPU write is a VM fault)."""
        self._check_open()
        expect(signal, Signal, "free_signal: signal")
        if signal.device is not self:
            raise ValueError(f"free_signal of {signal!r} on {self.label}: it belongs to {signal.device.label}")
        if signal.freed_at is not None:
            raise ValueError(f"double free of signal 0x{signal.va:x} on {self.label}: already {signal.freed_at}")
        if signal is self.timeline_signal or signal is self._shadow_signal:
            raise ValueError(f"free_signal: signal 0x{signal.va:x} is {self.label}'s timeline; it cannot be freed")
        signal.freed_at = f"freed at {caller_location()}"
        self._signals.pop(signal.va, None)
        if self.sanitize:  # the signal has its page to itself
            page = signal.page
            page.freed_at = signal.freed_at
            self._release(page, quarantine=f"signal 0x{signal.va:x} ({signal_label(signal)}, "
                                                    f"created at {signal.created_at})")
            return
        self._pending_signals.append(signal)

    @exclusive
    def next_timeline(self) -> tuple[Signal, int]:
        """(signal, value) for the next submission on the device timeline. Before the 32-bit value would
        wrap, everything is synchronised and the shadow signal takes over from 0."""
        self._check_open()
        if self.timeline_value >= self.timeline_wrap:
            self.synchronize()
            self.timeline_signal, self._shadow_signal = self._shadow_signal, self.timeline_signal
            self.timeline_signal.value = 0
            self.timeline_value = 1
            self._timeline_submitted = 0
        value = self.timeline_value
        self.timeline_value += 1
        return self.timeline_signal, value

    # -- programs ----------------------------------------------------------------------------------

    @exclusive
    def load_program(self, code_object, name: str):
        """Copy a code object's image into executable GPU memory; returns the kernel `name` as a Program."""
        from .program import load_program
        self._check_faults()
        program = load_program(self, code_object, name)
        self._programs = [ref for ref in self._programs if ref() is not None] + [weakref.ref(program)]
        return program

    @exclusive
    def kernarg_alloc(self, nbytes: int, holder=None) -> tuple[int, np.ndarray]:
        """(address, uint8 view) of `nbytes` of kernarg memory, 64-byte aligned, from the current arena. `holder`
        (the queue builder that will submit it) keeps the arena from reuse while it lives, and each of its
        submissions adds to the arena's fence (see _next_kernarg_arena)."""
        self._check_open()
        nbytes = (nbytes + 63) & ~63
        if nbytes > KERNARG_ARENA:
            raise ValueError(f"kernarg segment of {nbytes} bytes exceeds the {KERNARG_ARENA}-byte arena")
        if self._kernargs is None:
            self._kernargs = KernargArena(self._alloc(KERNARG_ARENA, UNCACHED_FLAGS | BASE_FLAGS))
        if self._kernarg_pos + nbytes > KERNARG_ARENA:
            self._next_kernarg_arena()
        arena, off = self._kernargs, self._kernarg_pos
        self._kernarg_pos += nbytes
        if holder is not None:
            arena.holders.add(holder)
            if arena not in holder.kernarg_arenas:
                holder.kernarg_arenas.append(arena)
        return arena.buffer.va + off, arena.buffer.view[off:off + nbytes]

    def _next_kernarg_arena(self) -> None:
        """The arena is full: the kernargs go on in a retired arena that is free -- no live builder holds it (a
        builder may submit again) and every submission of its kernels has completed (its fence) -- or in a new
        one, without waiting. Waiting for every queue here (as this did) wedged a program whose submitted queues
        wait for work it has not submitted yet: a copy waiting on the signal of the kernel being built waited
        forever, after 1638 kernels (tests/audit.py's soak); and it reused an arena still holding the kernargs of
        an unsubmitted builder. Past KERNARG_ARENAS arenas it waits for the oldest one's fence, or refuses when
        live builders hold them all."""
        self._retired_kernargs.append(self._kernargs)
        free = next((a for a in self._retired_kernargs if a.free()), None)
        if free is None and len(self._retired_kernargs) < KERNARG_ARENAS:
            self._kernargs = KernargArena(self._alloc(KERNARG_ARENA, UNCACHED_FLAGS | BASE_FLAGS))
        else:
            if free is None:
                free = next((a for a in self._retired_kernargs if not a.holders), None)
                if free is None:
                    self._kernargs = self._retired_kernargs.pop()  # unchanged: the refused call took nothing
                    raise RuntimeError(f"{self.label}: {KERNARG_ARENAS} kernarg arenas of {KERNARG_ARENA} bytes are "
                                       f"held by live queue builders (kept for resubmission?); drop some, or use "
                                       f"a Schedule for work replayed many times")
                for ring, seq in free.fence.items():
                    self.wait_value(ring.progress, seq, f"kernarg arena free ({ring.engine} submission {seq})")
            self._retired_kernargs.remove(free)
            self._kernargs = free
        self._kernarg_pos = 0

    @exclusive
    def scratch_memory(self, nbytes: int) -> Buffer:
        """The device's scratch (private segment) backing, grown when a kernel needs more. Grow only after
        everything submitted has finished: running kernels may be using the old one."""
        if self._scratch is None or self._scratch.size < nbytes:
            if self._scratch is not None:
                self.synchronize()
                self._buffers.pop(self._scratch.va, None)
                self._release(self._scratch)
            self._scratch = self._alloc(nbytes, K.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | BASE_FLAGS, cpu_map=False)
        return self._scratch

    @exclusive
    def next_dispatch_id(self) -> int:
        self._dispatch_id += 1
        return self._dispatch_id

    # -- queues ------------------------------------------------------------------------------------

    @exclusive
    def compute_queue(self, index: int = 0) -> ComputeQueue:
        """A PM4 command builder for hardware compute queue `index` (0 .. queue_count("compute") - 1). Each
        index is its own KFD queue (ring, doorbell, EOP and CWSR buffers), created at its first submission."""
        self._check_open()
        return ComputeQueue(self, self._queue_index("compute", index))

    @exclusive
    def copy_queue(self, index: int = 0) -> CopyQueue:
        """An SDMA command builder for hardware copy queue `index`; queue i runs on SDMA engine
        i % num_sdma_engines, so consecutive indices spread over the engines."""
        self._check_open()
        return CopyQueue(self, self._queue_index("copy", index))

    def queue_count(self, engine: str) -> int:
        """Hardware queues of `engine` ("compute" / "copy") this device offers: the node's num_cp_queues
        compute HQDs; num_sdma_engines x num_sdma_queues_per_engine SDMA queues (sysfs, facts 2.2)."""
        p = self.node.props
        if engine == "compute":
            return max(1, p.get("num_cp_queues", 1))
        return max(1, p.get("num_sdma_engines", 1) * p.get("num_sdma_queues_per_engine", 1))

    def _queue_index(self, engine: str, index: int) -> int:
        if not isinstance(index, int) or not 0 <= index < self.queue_count(engine):
            raise ValueError(f"{engine} queue index {index!r} out of range: {self.label} has "
                             f"{self.queue_count(engine)} {engine} queues")
        return index

    @exclusive
    def hardware_ring(self, engine: str, index: int = 0) -> HardwareRing:
        """The ring of hardware queue `index` of `engine`, created through CREATE_QUEUE on first use."""
        self._check_open()
        ring = self._rings.get((engine, index))
        return ring if ring is not None else self._create_ring(engine, index)

    @exclusive
    def submit_packets(self, engine: str, packets: list[list[int]], signals: list[Signal] = (),
                       released: list[tuple[Signal, int]] = (), index: int = 0,
                       kernargs: list["KernargArena"] = ()) -> None:
        """Write `packets` to the engine's ring and ring its doorbell. `signals` are the signals they name
        (their slots are not reused before this submission completed), `released` the (signal, value) they
        set, `kernargs` the arenas holding their kernels' arguments (likewise); `index` picks the engine's
        hardware queue. Refused: nothing changed."""
        self._check_faults()
        ring = self.hardware_ring(engine, index)
        self.hdp_flush()  # CPU writes to VRAM (rings, kernargs, code, data) reach the GPU before it is told
        seq = ring.submit(submission_sync(engine, self.family, self.sdma_version) + list(packets))
        for sig in signals:
            sig.last_use[ring] = seq
        for arena in kernargs:
            arena.fence[ring] = seq
        for sig, value in released:
            if sig is self.timeline_signal:  # what synchronize waits for: only values really submitted
                self._timeline_submitted = max(self._timeline_submitted, value)

    def _create_ring(self, engine: str, index: int = 0, ring_size: int = 1 << 16) -> HardwareRing:
        if engine == "compute" and self.aql:
            return self._create_aql_ring(index, ring_size)
        ring = self._alloc(ring_size, UNCACHED_FLAGS | BASE_FLAGS)
        ptrs = self._alloc(PAGE, UNCACHED_FLAGS | BASE_FLAGS)  # rptr at +0, wptr at +8, both u64
        args = K.CreateQueueArgs(ring_base_address=ring.va, write_pointer_address=ptrs.va + 8,
                                 read_pointer_address=ptrs.va, ring_size=ring_size, gpu_id=self.gpu_id,
                                 queue_percentage=K.KFD_MAX_QUEUE_PERCENTAGE, queue_priority=7)
        if engine == "compute":
            sizes = K.queue_buffer_sizes(self.node.props)
            eop = self._alloc(K.KFD_EOP_BUFFER_SIZE, K.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | BASE_FLAGS, cpu_map=False)
            cwsr = self._alloc(sizes.cwsr_bo_size(), K.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | BASE_FLAGS, cpu_map=False)
            args.queue_type = K.KFD_IOC_QUEUE_TYPE_COMPUTE
            args.eop_buffer_address, args.eop_buffer_size = eop.va, K.KFD_EOP_BUFFER_SIZE
            args.ctx_save_restore_address, args.ctx_save_restore_size = cwsr.va, sizes.cwsr_size
            args.ctl_stack_size = sizes.ctl_stack_size
        elif self.process.version >= (1, 17):  # pick the engine: queue i on engine i % num_sdma_engines
            args.queue_type = K.KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID
            args.sdma_engine_id = index % max(1, self.node.props.get("num_sdma_engines", 1))
        else:  # older KFD chooses the engine itself (round robin over free slots)
            args.queue_type = K.KFD_IOC_QUEUE_TYPE_SDMA
        self.process.ioctl(K.AMDKFD_IOC_CREATE_QUEUE, args)
        doorbell = self._doorbell(args.doorbell_offset)
        ring_ = HardwareRing(self, engine, args.queue_id, ring.va, ring_size, ptrs.va + 8, ptrs.va, doorbell,
                             self.new_signal(0, name=f"{engine} queue {index} progress"))
        ring_.index = index
        self._rings[(engine, index)] = ring_
        return ring_

    def _create_aql_ring(self, index: int, ring_size: int) -> HardwareRing:
        """A COMPUTE_AQL queue laid out as ROCr does: ring slots INVALID, rptr/wptr = the amd_queue_t's
        read/write_dispatch_id, read_dispatch_id_field_base_byte_offset set (the CP's queue_ptr)."""
        from .. import aql
        from .aql_ring import IB_ARENA, AqlRing
        ring = self._alloc(ring_size, UNCACHED_FLAGS | BASE_FLAGS)
        ring.view[::aql.PACKET_SIZE] = aql.TYPE_INVALID
        block = self._alloc(PAGE, UNCACHED_FLAGS | BASE_FLAGS)
        q = block.va
        ctypes.c_uint64.from_address(q + 8).value = ring.va  # hsa_queue_t.base_address
        ctypes.c_uint32.from_address(q + 24).value = ring_size // aql.PACKET_SIZE  # hsa_queue_t.size (packets)
        ctypes.c_uint32.from_address(q + aql.QUEUE_READ_DISPATCH_ID + 8).value = aql.QUEUE_READ_DISPATCH_ID
        ib = self._alloc(IB_ARENA, UNCACHED_FLAGS | BASE_FLAGS)
        sizes = K.queue_buffer_sizes(self.node.props)
        eop = self._alloc(K.KFD_EOP_BUFFER_SIZE, K.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | BASE_FLAGS, cpu_map=False)
        cwsr = self._alloc(sizes.cwsr_bo_size(), K.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | BASE_FLAGS, cpu_map=False)
        args = K.CreateQueueArgs(ring_base_address=ring.va, write_pointer_address=q + aql.QUEUE_WRITE_DISPATCH_ID,
                                 read_pointer_address=q + aql.QUEUE_READ_DISPATCH_ID, ring_size=ring_size,
                                 gpu_id=self.gpu_id, queue_percentage=K.KFD_MAX_QUEUE_PERCENTAGE, queue_priority=7,
                                 queue_type=K.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL, eop_buffer_address=eop.va,
                                 eop_buffer_size=K.KFD_EOP_BUFFER_SIZE, ctx_save_restore_address=cwsr.va,
                                 ctx_save_restore_size=sizes.cwsr_size, ctl_stack_size=sizes.ctl_stack_size)
        self.process.ioctl(K.AMDKFD_IOC_CREATE_QUEUE, args)
        ring_ = AqlRing(self, args.queue_id, ring.va, ring_size, q, self._doorbell(args.doorbell_offset),
                        self.new_signal(0, name=f"compute queue {index} progress"), ib.va)
        ring_.index = index
        self._rings[("compute", index)] = ring_
        return ring_

    def _doorbell(self, doorbell_offset: int) -> int:
        """Map the doorbell slice once; a queue's doorbell is at its offset inside it."""
        slice_size = 8192
        if self._doorbell_base is None:
            self._doorbell_base = self.os.mmap(0, slice_size, PROT_READ | PROT_WRITE, MAP_SHARED, self.process.fd,
                                               doorbell_offset & ~(slice_size - 1))
        return self._doorbell_base + (doorbell_offset & (slice_size - 1))

    # -- waiting -----------------------------------------------------------------------------------

    @exclusive
    def wait_signal(self, signal: Signal, value: int, timeout_ms: int = 30_000) -> None:
        expect(signal, Signal, "wait_signal: signal")
        check_signal_value(value, "wait value")
        self.wait_value(signal, value, f"signal 0x{signal.va:x} >= {value}", timeout_ms)

    @exclusive
    def wait_value(self, signal: Signal, value: int, what: str, timeout_ms: int = 30_000) -> None:
        """Poll the signal, then sleep on KFD events; faults surface as DeviceFault, an emulated machine
        that can no longer progress as DeadlockError, real hardware running out of time as DeviceTimeout.
        Their reports end with what the addresses in them are (runtime/names.py)."""
        try:
            self._wait_value(signal, value, what, timeout_ms)
        except (DeadlockError, DeviceFault, DeviceTimeout) as e:
            name_addresses(e, self)
            raise

    def _wait_value(self, signal: Signal, value: int, what: str, timeout_ms: int) -> None:
        self._check_open()
        if not isinstance(timeout_ms, (int, float)) or isinstance(timeout_ms, bool):
            raise TypeError(f"wait: timeout_ms must be a number of milliseconds, got {type(timeout_ms).__name__}")
        self._raise_if_faulted()
        done = lambda: (signal.value & 0xFFFFFFFF) >= value
        deadline = time.monotonic() + timeout_ms / 1000
        for _ in range(64):  # a short poll: most waits on a running GPU end here
            if done():
                return self._check_faults()
        while True:
            self._check_faults()
            if done():
                return
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0:
                raise DeviceTimeout(f"timed out after {timeout_ms} ms waiting for {what} (current "
                                    f"{signal.value}) on {self.label}:\n  "
                                    + "\n  ".join(r.describe_state() for r in self._rings.values()))
            # The emulator can say at once that nothing but this host can change the machine any more (an
            # optional boundary query; real hardware answers None and the wait sleeps out its timeout).
            stuck = self.os.deadlock_report()
            if stuck is not None:
                self._check_faults()
                if done():
                    return
                raise DeadlockError(f"{what} on {self.label} (current {signal.value & 0xFFFFFFFF})", stuck)
            result, data = self._wait_events([self.completion_event, self.memory_event, self.hw_event],
                                             min(left_ms, WAIT_SLICE_MS))
            if result == K.KFD_IOC_WAIT_RESULT_COMPLETE:  # this wait may have consumed an exception event
                self._report_exceptions(data[1], data[2])

    def _wait_events(self, event_ids: list[int], timeout_ms: int) -> tuple[int, ctypes.Array]:
        data = (K.EventData * len(event_ids))()
        for d, eid in zip(data, event_ids):
            d.event_id = eid
        args = K.WaitEventsArgs(events_ptr=ctypes.addressof(data), num_events=len(event_ids), wait_for_all=0,
                                timeout=timeout_ms)
        self.process.ioctl(K.AMDKFD_IOC_WAIT_EVENTS, args)
        return args.wait_result, data

    def _check_open(self) -> None:
        """DeviceClosedError once `close()` ran: buffers, signals and queues of a closed device (and, on the
        emulator, the memory of its system) are gone, so nothing may touch them."""
        if self._closed:
            raise DeviceClosedError(f"{self.label} is closed; its buffers, signals and queues can no longer be "
                                    f"used")

    def _raise_if_faulted(self) -> None:
        """Once a queue faulted, every wait raises DeviceFault with the original reports: the faulted queue
        never completes, so a wait would only end in a DeadlockError that hides why."""
        if self.faults:
            raise DeviceFault([f"{self.label} faulted earlier; every wait on it fails. The original report:",
                               *self.faults])

    def _check_faults(self) -> None:
        """Raise DeviceFault if a memory or hardware exception was reported since the last call."""
        self._check_open()
        poll = self.__dict__.get("_fault_poll")
        if poll is None:  # made once: this look runs before every submit, allocation and wait
            data = (K.EventData * 2)()
            poll = self._fault_poll = (data, K.WaitEventsArgs(events_ptr=ctypes.addressof(data), num_events=2,
                                                              wait_for_all=0, timeout=0))
        data, args = poll
        ctypes.memset(data, 0, ctypes.sizeof(data))  # the kernel writes exception data into the entries it fires
        data[0].event_id, data[1].event_id = self.memory_event, self.hw_event
        args.wait_result = 0
        self.process.ioctl(K.AMDKFD_IOC_WAIT_EVENTS, args)
        if args.wait_result == K.KFD_IOC_WAIT_RESULT_COMPLETE:
            self._report_exceptions(data[0], data[1])

    def _report_exceptions(self, mem_data: K.EventData, hw_data: K.EventData) -> None:
        """DeviceFault if a wait returned exception data (gpu_id is set only for an event that fired)."""
        mem, hw = mem_data.memory_exception_data, hw_data.hw_exception_data
        if not (mem.gpu_id or hw.gpu_id):
            return
        new = []
        if mem.gpu_id:
            flags = [n for n in ("NotPresent", "ReadOnly", "NoExecute") if getattr(mem.failure, n)]
            new.append(f"{self.process.label(mem.gpu_id)} memory exception at VA 0x{mem.va:x} ({', '.join(flags) or 'fault'})")
        if hw.gpu_id:
            new.append(f"{self.process.label(hw.gpu_id)} hardware exception (reset type {hw.reset_type}, cause {hw.reset_cause})")
        new += self.os.fault_details(self.gpu_id)
        if mem.gpu_id and (what := self.freed_memory_at(mem.va)):
            new.append(f"sanitizer: VA 0x{mem.va:x} is in freed memory: {what}")
        if not new:
            new.append(f"{self.label} reported an exception event")
        self.faults += new
        raise DeviceFault(new)

    @property
    def memory_reports(self) -> list:
        """The emulated memory model's records (hcqsim.coherence.MemoryReport) of this device's GPU, oldest first:
        accesses that could have seen a stale cache line or a write not yet written back (docs/memory_model.md).
        Empty on real hardware and under the coherent model."""
        system = getattr(self._owner, "system", None)
        if system is None:
            return []
        return [r for r in system.memory_reports if r.gpu in ("", self.label)]

    def clear_memory_reports(self) -> None:
        """Forget the records of the emulated system this device belongs to (every GPU of it): what a fuzzing
        loop does before each example, so each example's records are its own."""
        system = getattr(self._owner, "system", None)
        if system is not None:
            del system.memory_reports[:]

    @exclusive
    def synchronize(self, timeout_ms: int = 30_000) -> None:
        """Wait until everything submitted so far has completed: the timeline and every queue's ring.
        After a queue faulted it raises DeviceFault with the original reports (what completes is unknown)."""
        try:
            self._synchronize(timeout_ms)
        except (DeadlockError, DeviceFault, DeviceTimeout) as e:
            name_addresses(e, self)
            raise

    def _synchronize(self, timeout_ms: int) -> None:
        self._check_open()
        self._check_faults()
        self._raise_if_faulted()
        if self._timeline_submitted:
            self.wait_value(self.timeline_signal, self._timeline_submitted,
                            f"device timeline {self._timeline_submitted}", timeout_ms)
        for ring in self._rings.values():
            if ring.seq:
                self.wait_value(ring.progress, ring.seq, f"{ring.engine} queue drained (submission {ring.seq})",
                                timeout_ms)

    # -- lifetime ----------------------------------------------------------------------------------

    @exclusive
    def close(self) -> None:
        if self._closed:
            return
        for ring in self._rings.values():
            try:
                self.process.ioctl(K.AMDKFD_IOC_DESTROY_QUEUE, K.DestroyQueueArgs(queue_id=ring.queue_id))
            except OSError:
                pass
        self._rings.clear()
        self._closed = True
        if self._owner is not None and hasattr(self._owner, "device_closed"):
            self._owner.device_closed(self)

    def __repr__(self) -> str:
        return f"Device({self.target}, gpu_id={self.gpu_id}, {'emulated' if self.os.emulated else 'hardware'})"


# pytest leaves this module's frames out of a failed test's report when the error is the runtime's own wait
# outcome (a deadlock, a device fault, a timeout): its message names what was awaited; the frames are internals.
def __tracebackhide__(excinfo) -> bool:
    return excinfo is not None and excinfo.errisinstance((DeadlockError, DeviceFault, DeviceTimeout))
