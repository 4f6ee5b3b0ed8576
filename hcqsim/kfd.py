"""The emulated KFD driver (/dev/kfd, /dev/dri/renderD*) and the emulated OS boundary.

`EmulatedSystem` is one emulated machine: N `EmulatedGPU`s sharing ONE `VaWindow` (so a peer mapping is the
same host range at the same VA on every GPU), the sysfs topology as an in-memory tree, the driver (`KfdDriver`,
the state amdkfd keeps for one process) and `.os`, an `EmulatedOS` implementing the runtime's `OSBoundary`.

The driver answers the very ioctls a runtime issues on real hardware, with the kernel's checks and errnos
(sources: HARDWARE_FACTS.md section 1 and Linux drivers/gpu/drm/amd/amdkfd/{kfd_chardev,kfd_queue,kfd_events}.c,
amdgpu/amdgpu_amdkfd_gpuvm.c). A failing ioctl raises OSError(errno, message) and leaves driver state as it was.
Where the emulator cannot do what the kernel does (e.g. map one page at two addresses), it fails with a message
that says "emulator limitation" rather than silently doing something else.

Progress points (DESIGN_NOTES 3): a doorbell store through `EmulatedOS.ring_doorbell`, and WAIT_EVENTS, which
drives every GPU until the awaited events fire or the machine is quiet (then: DeadlockError).
"""
from __future__ import annotations

import ctypes
import dataclasses
import errno
import os
import struct
import time
import zlib
from dataclasses import dataclass, field
from typing import Callable

from . import kfd_uapi as k
from .errors import DeadlockError, Fault
from .boundary import KFD_PATH, MAP_ANONYMOUS, MAP_FIXED, PROT_NONE, OSBoundary
from .engines.queue import EngineQueue as Queue
from .gpu import EmulatedGPU, Interrupt
from .memory import PAGE_SIZE, MemoryError_, VaWindow, page_align
from .targets import Target, get_target

# ---------------------------------------------------------------------------------------------------
# constants the UAPI module does not carry (sources in comments)

ENOTSUPP = 524  # kernel-internal errno that leaks to user space (kfd_chardev.c: unknown queue_type)
GPUVM_BASE = 2 << 20  # AMDGPU_VA_RESERVED_BOTTOM (facts 1.2)
GPUVM_LIMIT = (1 << 47) - 1  # gpuvm_size - 1 (facts 1.2)
LDS_BASE, SCRATCH_BASE = 1 << 48, 2 << 48  # kfd_flat_memory.c, gfx9+ dGPU (facts 1.2)
APERTURE_LOW_LIMIT = 0xFFFFFFFF  # limit = base | 0xFFFFFFFF
TASK_SIZE_MAX = (1 << 47) - PAGE_SIZE  # x86-64 access_ok() bound
DRM_FILE_PAGE_OFFSET_START = 0x100000 * PAGE_SIZE  # first DRM GEM fake mmap offset on 64-bit
VRAM_AVAILABILITY_ALIGN = 2 << 20  # amdgpu_amdkfd_get_available_memory rounds down to 2 MiB
KFD_SIGNAL_OLD_ABI_SLOTS = 256  # slots usable before the driver's event page is mmapped (kfd_events.c)
FD_BASE = 1000  # fake file descriptors start here so they never collide with real small fds
SOC15_DOORBELL_MIRROR = 512  # KFD_QUEUE_DOORBELL_MIRROR_OFFSET: doorbell ids of odd SDMA queues
SDMA_DOORBELL_BASE = 0x100  # emulator layout: SDMA doorbells live in ids 0x100..0x1FF (+ mirror 0x300..0x3FF)

_SIGNAL_TYPES = (k.KFD_IOC_EVENT_SIGNAL, k.KFD_IOC_EVENT_DEBUG_EVENT)  # own an event-page slot
_TYPE_TO_KIND = {k.KFD_IOC_ALLOC_MEM_FLAGS_VRAM: "vram", k.KFD_IOC_ALLOC_MEM_FLAGS_GTT: "gtt",
                 k.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR: "userptr", k.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL: "doorbell",
                 k.KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP: "mmio"}

# Per-target node facts that hcqsim.targets does not carry (HARDWARE_FACTS 2.5; mem width/clock illustrative).
NODE_FACTS = {
    "gfx1100": dict(simd_id_base=2147488032, num_gws=64, max_slots_scratch_cu=32, vendor_id=4098,
                    location_id=34304, hive_id=0, num_sdma_engines=2, num_sdma_xgmi_engines=0,
                    num_sdma_queues_per_engine=6, num_cp_queues=8, max_engine_clk_fcompute=2482, fw_version=2140,
                    capability=671588992, capability2=0, debug_prop=1495, sdma_fw_version=20,
                    unique_id=11673270660693242239, mem_width=384, mem_clk_max=2500),
    "gfx942": dict(simd_id_base=2147487784, num_gws=64, max_slots_scratch_cu=32, vendor_id=4098,
                   location_id=18176, hive_id=10631624818852212319, num_sdma_engines=2, num_sdma_xgmi_engines=14,
                   num_sdma_queues_per_engine=8, num_cp_queues=24, max_engine_clk_fcompute=2100, fw_version=166,
                   capability=746037888, capability2=0, debug_prop=1511, sdma_fw_version=22,
                   unique_id=4376936076086227261, mem_width=8192, mem_clk_max=1300),
}
CPU_CORES, CPU_CLOCK_MHZ, CPU_MEMORY = 16, 2400, 64 << 30  # the emulated host CPU node (fixed: deterministic)


def _fail(err: int, msg: str) -> OSError:
    return OSError(err, msg)


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _access_ok(addr: int, size: int) -> bool:
    """x86-64 access_ok(): the range lies below the user address-space limit."""
    return addr + size <= TASK_SIZE_MAX


# ---------------------------------------------------------------------------------------------------
# CWSR / control stack sizes (kfd_queue.c kfd_queue_ctx_save_restore_size, facts 1.6)


def queue_sizes(target: Target) -> k.QueueBufferSizes:
    """The node values CREATE_QUEUE checks compute queues against (facts 1.6; formula in kfd_uapi)."""
    return k.queue_buffer_sizes(dict(
        gfx_target_version=target.gfx_target_version, simd_count=target.simd_count, simd_per_cu=target.simd_per_cu,
        num_xcc=target.num_xcc, array_count=target.array_count, simd_arrays_per_engine=target.simd_arrays_per_engine,
        lds_size_in_kb=target.lds_size_in_kb))


# ---------------------------------------------------------------------------------------------------
# user memory: copy_from_user / copy_to_user that return EFAULT instead of crashing the interpreter


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.process_vm_readv.restype = _libc.process_vm_writev.restype = ctypes.c_ssize_t
_libc.write.restype = _libc.read.restype = ctypes.c_ssize_t
_libc.write.argtypes = _libc.read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
_use_pipe = False  # set when process_vm_* is unavailable (seccomp); then a pipe does the probing copy


def _vm_copy(func, local: int, remote: int, n: int) -> bool:
    global _use_pipe
    lo, re = _Iovec(local, n), _Iovec(remote, n)
    got = func(os.getpid(), ctypes.byref(lo), 1, ctypes.byref(re), 1, 0)
    if got == n:
        return True
    if got < 0 and ctypes.get_errno() in (errno.ENOSYS, errno.EPERM):
        _use_pipe = True
    return False


def _pipe_copy(src: int, dst: int, n: int) -> bool:
    """Move n bytes src -> dst through a pipe: the kernel reports EFAULT for a bad side instead of a SIGSEGV."""
    r, w = os.pipe()
    try:
        done = 0
        while done < n:
            chunk = min(n - done, 1 << 16)
            if _libc.write(w, src + done, chunk) != chunk or _libc.read(r, dst + done, chunk) != chunk:
                return False
            done += chunk
        return True
    finally:
        os.close(r)
        os.close(w)


def read_user(addr: int, n: int) -> bytes:
    """copy_from_user: n bytes at a user address, or OSError(EFAULT)."""
    buf = ctypes.create_string_buffer(max(n, 1))
    if n and not (0 < addr and _access_ok(addr, n)):
        raise _fail(errno.EFAULT, f"bad user address 0x{addr:x} (+{n} bytes)")
    ok = n == 0 or (not _use_pipe and _vm_copy(_libc.process_vm_readv, ctypes.addressof(buf), addr, n))
    if not ok and _use_pipe:
        ok = _pipe_copy(addr, ctypes.addressof(buf), n)
    if not ok:
        raise _fail(errno.EFAULT, f"cannot read {n} bytes of user memory at 0x{addr:x}")
    return buf.raw[:n]


def write_user(addr: int, data: bytes) -> None:
    """copy_to_user: store bytes at a user address, or OSError(EFAULT)."""
    n = len(data)
    if n and not (0 < addr and _access_ok(addr, n)):
        raise _fail(errno.EFAULT, f"bad user address 0x{addr:x} (+{n} bytes)")
    buf = ctypes.create_string_buffer(bytes(data), max(n, 1))
    ok = n == 0 or (not _use_pipe and _vm_copy(_libc.process_vm_writev, ctypes.addressof(buf), addr, n))
    if not ok and _use_pipe:
        ok = _pipe_copy(ctypes.addressof(buf), addr, n)
    if not ok:
        raise _fail(errno.EFAULT, f"cannot write {n} bytes of user memory at 0x{addr:x}")


# ---------------------------------------------------------------------------------------------------
# interval helpers for the VA bookkeeping


def _clip(intervals: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    return [(max(a, lo), min(b, hi)) for a, b in intervals if a < hi and lo < b]


def _minus(pieces: list[tuple[int, int]], holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = list(pieces)
    for hlo, hhi in holes:
        nxt = []
        for a, b in out:
            if hhi <= a or b <= hlo:
                nxt.append((a, b))
                continue
            if a < hlo:
                nxt.append((a, hlo))
            if hhi < b:
                nxt.append((hhi, b))
        out = nxt
    return sorted(out)


def _covered(intervals: list[tuple[int, int]], lo: int, hi: int) -> bool:
    return not _minus([(lo, hi)], intervals)


# ---------------------------------------------------------------------------------------------------
# driver state records


@dataclass(eq=False)
class _File:
    kind: str  # "kfd" or "render"
    gpu: int | None = None  # GPU index of a render node


@dataclass(eq=False)
class _Bo:
    """One KFD buffer object (kgd_mem)."""

    handle: int
    node: "_Node"
    va: int
    size: int  # page aligned, as the driver rounds it
    flags: int
    kind: str  # memory.KINDS
    mmap_offset: int
    backed: bool  # the driver backs host memory at va (VRAM/GTT)
    owns_reservation: bool = False  # its window range is reserved on its own behalf (see _AddressBook)
    mapped: set = field(default_factory=set)  # GPU indices whose page table holds it
    queue_refs: dict = field(default_factory=dict)  # GPU index -> queue buffers using it there

    @property
    def end(self) -> int:
        return self.va + self.size


@dataclass(eq=False)
class _QueueRec:
    qid: int
    node: "_Node"
    queue: Queue
    qtype: int
    engine: int | None  # SDMA engine
    sdma_slot: int | None
    doorbell_id: int
    percentage: int
    priority: int
    ring_base: int
    ring_size: int
    bufs: list  # [(bo, gpu index)] holding a queue reference
    seq: int
    active: bool = True
    last_doorbell: int | None = None
    cu_mask: tuple = ()

    @property
    def doorbell_offset(self) -> int:
        return self.doorbell_id * k.KFD_DOORBELL_SIZE


@dataclass(eq=False)
class _Waiter:
    event: "_Event"
    activated: bool
    age_enabled: bool = False


@dataclass(eq=False)
class _Event:
    id: int
    type: int
    auto_reset: bool
    signaled: bool = False
    age: int = 1  # kfd_event_create: event_age = 1 (0 is "no age" in the wait array)
    waiters: list = field(default_factory=list)
    memory_data: bytes = bytes(32)
    hw_data: bytes = bytes(16)


@dataclass(eq=False)
class _SignalPage:
    va: int
    size: int  # bytes of slots backing it (<= 32 KiB)
    handle: int | None  # user BO handle (dGPU path) or None (driver allocated)


class _Node:
    """Per-GPU process state (the kernel's kfd_process_device)."""

    def __init__(self, index: int, gpu: EmulatedGPU, gpu_id: int, props: dict, sizes: k.QueueBufferSizes):
        self.index, self.gpu, self.gpu_id, self.props, self.sizes = index, gpu, gpu_id, props, sizes
        self.minor = props["drm_render_minor"]
        self.drm_file: _File | None = None
        self.bos: dict[int, _Bo] = {}  # idr index -> BO
        self.mapped_at: dict[int, _Bo] = {}  # va -> BO mapped in this GPU's page table
        self.by_offset: dict[int, _Bo] = {}  # DRM mmap offset -> BO
        self.next_offset = DRM_FILE_PAGE_OFFSET_START
        self.doorbell_va: int | None = None  # the process doorbell slice (8 KiB), once allocated
        self.mmio_va: int | None = None  # the HDP flush page, once allocated
        self.vram_used = 0
        self.cp_doorbells: set[int] = set()
        self.sdma_used: set[tuple[int, int]] = set()  # (engine, slot)
        self.scratch_va = self.tba = self.tma = 0
        self.policy = (0, 0, 0)

    def bo_of(self, handle: int) -> _Bo | None:
        return self.bos.get(handle & 0xFFFFFFFF)


# ---------------------------------------------------------------------------------------------------
# the process's view of the shared window


class _AddressBook:
    """Which parts of the shared VaWindow the emulated process holds, and why.

    `reserved` are the process's anonymous PROT_NONE mmaps (its VA reservations). A BO the driver backs
    inside a reservation keeps that reservation's pages; when the process munmaps the reservation while
    the BO lives, the BO takes the pages over (`owns_reservation`) and returns them when freed. A BO placed
    where nothing was reserved reserves its own range. `anon` are anonymous read/write mmaps (host memory,
    e.g. for USERPTR); a munmap is deferred while a live USERPTR BO still points into it.
    """

    def __init__(self, window: VaWindow):
        self.window = window
        self.reserved: list[tuple[int, int]] = []
        self.anon: dict[int, int] = {}
        self.deferred_anon: dict[int, int] = {}

    def reserve(self, length: int, at: int | None) -> int:
        va = self.window.reserve(length, PAGE_SIZE, at)
        self.reserved = sorted(self.reserved + [(va, va + page_align(length))])
        return va

    def is_reserved(self, lo: int, hi: int) -> bool:
        return _covered(self.reserved, lo, hi)

    def take_for(self, lo: int, hi: int) -> bool:
        """Make [lo, hi) held for a new backing. Returns True if it had to reserve it itself (caller owns)."""
        if self.is_reserved(lo, hi):
            return False
        self.window.reserve(hi - lo, PAGE_SIZE, lo)  # MemoryError_ when partly taken by someone else
        return True

    def give_back(self, lo: int, hi: int) -> None:
        """Return an owned range, except parts the process still has reserved."""
        for a, b in _minus([(lo, hi)], self.reserved):
            self.window.unreserve(a, b - a)

    def unmap_reserved(self, lo: int, hi: int, owned: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """munmap of (part of) reservations: returns the removed pieces still owned by live backings."""
        removed = _clip(self.reserved, lo, hi)
        self.reserved = _minus(self.reserved, [(lo, hi)])
        for a, b in _minus(removed, owned):
            self.window.unreserve(a, b - a)
        return removed


# ---------------------------------------------------------------------------------------------------
# the driver


class KfdDriver:
    """amdkfd for one emulated process: files, BOs, queues, events. Ioctls dispatch through `handlers`."""

    def __init__(self, system: "EmulatedSystem"):
        self.system = system
        self.nodes: list[_Node] = system.nodes
        self.book: _AddressBook = system.book
        self.queues: dict[int, _QueueRec] = {}
        self.events: dict[int, _Event] = {}
        self.signal_page: _SignalPage | None = None
        self.signal_mapped_size = 0
        self.signal_count = 1  # id 0 is reserved at process creation (kfd_event_init_process)
        self.special_pages: list[tuple[int, int]] = []  # doorbell slices, MMIO pages, driver event page
        self.runtime_state = k.DEBUG_RUNTIME_STATE_DISABLED
        self.runtime_r_debug = 0
        self.xnack = 0
        self._seq = 0
        # The dispatch table: nr -> handler. A method ioctl_<name> per emulated command.
        self.handlers: dict[int, Callable] = {}
        for io in k.IOCTLS.values():
            method = getattr(self, f"ioctl_{io.name.lower()}", None)
            self.handlers[io.nr] = self._retired if io.retired else method or self._not_emulated
        self._installed = [(node.gpu, self._irq_handler(node)) for node in self.nodes]
        for gpu, handler in self._installed:
            gpu.interrupt_handlers.append(handler)

    # -- dispatch (kfd_chardev.c kfd_ioctl) --------------------------------------------------------

    def ioctl(self, request: int, arg) -> None:
        _dir, _type, nr, usize = k.ioc_decode(request)
        io = k.IOCTLS_BY_NR.get(nr)
        if io is None or not k.AMDKFD_COMMAND_START <= nr < k.AMDKFD_COMMAND_END:
            raise _fail(errno.ENOTTY, f"ioctl 0x{request:08x}: no KFD command nr 0x{nr:02x}")
        addr, avail = _user_buffer(arg)
        # The kernel uses its own direction and copies the user's _IOC_SIZE bytes, zero-filling up to its
        # own struct size; a user object shorter than that size would be read/written past its end.
        if avail is not None and usize > avail:
            raise _fail(errno.EFAULT, f"{io.name}: request says {usize} bytes but the argument object has "
                                      f"{avail} (struct {type(arg).__name__} does not match the request)")
        kdata = bytearray(max(usize, io.size))
        if io.dir & k.IOC_WRITE and usize:
            kdata[:usize] = ctypes.string_at(addr, usize) if avail is not None else read_user(addr, usize)
        args = io.struct.from_buffer(kdata)
        error = None
        try:
            self.handlers[nr](args, io)
        except OSError as e:
            error = e
        if io.dir & k.IOC_READ and usize:  # copied out even when the handler failed, as the kernel does
            out = bytes(kdata[:usize])
            if avail is not None:
                ctypes.memmove(addr, out, usize)
            else:
                write_user(addr, out)
        if error is not None:
            raise error

    def _retired(self, args, io) -> None:
        raise _fail(errno.EPERM, f"{io.name}: the old debugger API is retired (kfd_chardev.c returns -EPERM)")

    def _not_emulated(self, args, io) -> None:
        raise _fail(errno.EOPNOTSUPP, f"{io.name} is not emulated by hcqsim")

    # -- lookups -----------------------------------------------------------------------------------

    def node_by_id(self, gpu_id: int) -> _Node | None:
        return next((n for n in self.nodes if n.gpu_id == gpu_id), None)

    def _node(self, gpu_id: int, name: str) -> _Node:
        node = self.node_by_id(gpu_id)
        if node is None:
            raise _fail(errno.EINVAL, f"{name}: no GPU with gpu_id {gpu_id} (see topology nodes/*/gpu_id)")
        return node

    def _bound(self, node: _Node, name: str, err: int = errno.ENODEV) -> None:
        """kfd_bind_process_to_device: needs ACQUIRE_VM first (-ENODEV; callers that override use ESRCH)."""
        if node.drm_file is None:
            raise _fail(err, f"{name}: gpu_id {node.gpu_id} has no VM yet; ACQUIRE_VM with its render node first")

    def _queue(self, qid: int, name: str, err: int) -> _QueueRec:
        rec = self.queues.get(qid)
        if rec is None:
            raise _fail(err, f"{name}: no queue with id {qid} (destroyed or never created)")
        return rec

    def owned_ranges(self) -> list[tuple[int, int]]:
        """Window ranges the driver backs: live VRAM/GTT BOs and its special pages."""
        bos = [(b.va, b.end) for n in self.nodes for b in n.bos.values() if b.backed]
        return sorted(bos + self.special_pages)

    # -- simple queries ----------------------------------------------------------------------------

    def ioctl_get_version(self, args, io) -> None:
        args.major_version, args.minor_version = k.KFD_IOCTL_MAJOR_VERSION, k.KFD_IOCTL_MINOR_VERSION

    def _aperture(self, node: _Node, ap) -> None:
        ap.gpu_id = node.gpu_id
        ap.lds_base, ap.lds_limit = LDS_BASE, LDS_BASE | APERTURE_LOW_LIMIT
        ap.scratch_base, ap.scratch_limit = SCRATCH_BASE, SCRATCH_BASE | APERTURE_LOW_LIMIT
        ap.gpuvm_base, ap.gpuvm_limit = GPUVM_BASE, GPUVM_LIMIT

    def ioctl_get_process_apertures(self, args, io) -> None:
        args.num_of_nodes = 0
        for node in self.nodes[:k.NUM_OF_SUPPORTED_GPUS]:
            self._aperture(node, args.process_apertures[args.num_of_nodes])
            args.num_of_nodes += 1

    def ioctl_get_process_apertures_new(self, args, io) -> None:
        if args.num_of_nodes == 0:  # just the count, so user space can size its array
            args.num_of_nodes = len(self.nodes)
            return
        n = min(len(self.nodes), args.num_of_nodes)
        arr = (k.ProcessDeviceApertures * n)()
        for i in range(n):
            self._aperture(self.nodes[i], arr[i])
        args.num_of_nodes = n
        write_user(args.kfd_process_device_apertures_ptr, bytes(arr))

    def ioctl_get_clock_counters(self, args, io) -> None:
        node = self.node_by_id(args.gpu_id)
        args.gpu_clock_counter = node.gpu.clock if node else 0  # 0 for a node without a GPU
        args.cpu_clock_counter = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
        args.system_clock_counter = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        args.system_clock_freq = 1_000_000_000

    def ioctl_available_memory(self, args, io) -> None:
        node = self._node(args.gpu_id, io.name)
        free = self.system.vram_size - node.vram_used
        args.available = max(0, free // VRAM_AVAILABILITY_ALIGN * VRAM_AVAILABILITY_ALIGN)

    def ioctl_get_tile_config(self, args, io) -> None:
        self._node(args.gpu_id, io.name)
        args.num_tile_configs = args.num_macro_tile_configs = 0  # gfx9+: no legacy tiling tables emulated
        args.gb_addr_config = args.num_banks = args.num_ranks = 0

    # -- process setup -----------------------------------------------------------------------------

    def ioctl_acquire_vm(self, args, io) -> None:
        f = self.system.os.files.get(args.drm_fd)
        if f is None:
            raise _fail(errno.EINVAL, f"{io.name}: drm_fd {args.drm_fd} is not an open file")
        node = self._node(args.gpu_id, io.name)
        if node.drm_file is not None:
            if node.drm_file is not f:
                raise _fail(errno.EBUSY, f"{io.name}: gpu_id {node.gpu_id} already has a VM from another file")
            return
        if f.kind != "render" or f.gpu != node.index:
            raise _fail(errno.EINVAL, f"{io.name}: fd {args.drm_fd} is not /dev/dri/renderD{node.minor} "
                                      f"(the render node of gpu_id {node.gpu_id})")
        node.drm_file = f

    def ioctl_runtime_enable(self, args, io) -> None:
        if not args.mode_mask & k.KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK:
            self.runtime_state = k.DEBUG_RUNTIME_STATE_DISABLED  # runtime_disable() always succeeds
            return
        if self.runtime_state != k.DEBUG_RUNTIME_STATE_DISABLED:
            raise _fail(errno.EBUSY, f"{io.name}: runtime already enabled")
        if any(r.active for r in self.queues.values()):
            raise _fail(errno.EEXIST, f"{io.name}: the process already has user queues")
        self.runtime_state, self.runtime_r_debug = k.DEBUG_RUNTIME_STATE_ENABLED, args.r_debug

    def ioctl_set_xnack_mode(self, args, io) -> None:
        want = args.xnack_enabled
        if want < 0:
            args.xnack_enabled = self.xnack
            return
        if self.queues:
            raise _fail(errno.EBUSY, f"{io.name}: cannot change XNACK mode while the process has queues")
        if want == self.xnack:
            return
        if want and any(n.gpu.target.gfx_target_version not in (90010, 90402) for n in self.nodes):
            raise _fail(errno.EPERM, f"{io.name}: XNACK cannot be enabled on every GPU of this process "
                                     f"(only gfx90a/gfx942 support per-process XNACK)")
        self.xnack = want

    def ioctl_set_memory_policy(self, args, io) -> None:
        for name in ("default_policy", "alternate_policy"):
            if getattr(args, name) not in (k.KFD_IOC_CACHE_POLICY_COHERENT, k.KFD_IOC_CACHE_POLICY_NONCOHERENT):
                raise _fail(errno.EINVAL, f"{io.name}: {name} {getattr(args, name)} is not 0 (coherent) "
                                          f"or 1 (noncoherent)")
        node = self._node(args.gpu_id, io.name)
        self._bound(node, io.name, errno.ESRCH)
        node.policy = (args.default_policy, args.alternate_policy, args.misc_process_flag)

    def ioctl_set_scratch_backing_va(self, args, io) -> None:
        node = self._node(args.gpu_id, io.name)
        self._bound(node, io.name)
        node.scratch_va = args.va_addr

    def ioctl_set_trap_handler(self, args, io) -> None:
        node = self._node(args.gpu_id, io.name)
        self._bound(node, io.name, errno.ESRCH)
        node.tba, node.tma = args.tba_addr, args.tma_addr

    # -- memory ------------------------------------------------------------------------------------

    def ioctl_alloc_memory_of_gpu(self, args, io) -> None:
        name, flags = io.name, args.flags
        if args.size == 0:
            raise _fail(errno.EINVAL, f"{name}: size is 0")
        node = self._node(args.gpu_id, name)
        self._bound(node, name)
        if flags & k.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL and args.size != k.KFD_DOORBELL_SLICE_SIZE:
            raise _fail(errno.EINVAL, f"{name}: a DOORBELL BO is the whole {k.KFD_DOORBELL_SLICE_SIZE}-byte slice, "
                                      f"not {args.size} bytes")
        if flags & k.KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP and args.size != PAGE_SIZE:
            raise _fail(errno.EINVAL, f"{name}: an MMIO_REMAP BO is one page, not {args.size} bytes")
        types = flags & k.KFD_ALLOC_MEM_TYPE_MASK
        if not _is_pow2(types):
            raise _fail(errno.EINVAL, f"{name}: flags {k.describe_alloc_flags(flags)} must carry exactly one of "
                                      f"VRAM, GTT, USERPTR, DOORBELL, MMIO_REMAP")
        kind, size = _TYPE_TO_KIND[types], page_align(args.size)  # the driver rounds the size up to pages
        va = args.va_addr
        self._check_va(node, va, size, name)
        if kind == "userptr":
            self._check_userptr(args.mmap_offset, va, args.size, name)
        if kind == "vram" and node.vram_used + size > self.system.vram_size:
            raise _fail(errno.ENOMEM, f"{name}: {size:#x} bytes of VRAM requested, "
                                      f"{self.system.vram_size - node.vram_used:#x} available")
        idr = next(i for i in range(len(node.bos) + 1) if i not in node.bos)  # idr_alloc: lowest free
        bo = _Bo(k.make_handle(node.gpu_id, idr), node, va, size, flags, kind, 0, backed=kind in ("vram", "gtt"))
        self._place(bo, name)
        if kind == "mmio":
            bo.mmap_offset = k.mmap_offset(k.KFD_MMAP_TYPE_MMIO, node.gpu_id)
        else:
            bo.mmap_offset = node.next_offset
            node.next_offset += size
            node.by_offset[bo.mmap_offset] = bo
        node.bos[idr] = bo
        if kind == "vram":
            node.vram_used += size
        args.handle, args.mmap_offset = bo.handle, bo.mmap_offset

    def _check_va(self, node: _Node, va: int, size: int, name: str) -> None:
        # The kernel finds these at MAP time (amdgpu_vm_bo_map: -EINVAL); the emulator backs memory at
        # ALLOC time, so it checks here, with the same errno.
        if va % PAGE_SIZE:
            raise _fail(errno.EINVAL, f"{name}: va 0x{va:x} is not page aligned")
        if va < GPUVM_BASE or va + size - 1 > GPUVM_LIMIT:
            raise _fail(errno.EINVAL, f"{name}: va range 0x{va:x}+{size:#x} is outside the GPUVM aperture "
                                      f"[0x{GPUVM_BASE:x}, 0x{GPUVM_LIMIT:x}]")
        for bo in node.bos.values():
            if bo.va < va + size and va < bo.end:
                raise _fail(errno.EINVAL, f"{name}: va range 0x{va:x}+{size:#x} overlaps BO 0x{bo.handle:x} "
                                          f"at 0x{bo.va:x}+{bo.size:#x} on gpu_id {node.gpu_id}")

    def _check_userptr(self, cpu: int, va: int, nbytes: int, name: str) -> None:
        if cpu == 0:
            raise _fail(errno.EINVAL, f"{name}: USERPTR needs the CPU address in mmap_offset")
        if cpu % PAGE_SIZE:
            raise _fail(errno.EINVAL, f"{name}: USERPTR CPU address 0x{cpu:x} is not page aligned")
        if cpu != va:
            raise _fail(errno.EINVAL, f"{name}: USERPTR at va 0x{va:x} wraps CPU address 0x{cpu:x}; emulator "
                                      f"limitation: GPU VA must equal the CPU address (va_addr == mmap_offset)")
        for off in range(0, page_align(nbytes), PAGE_SIZE):  # get_user_pages: every page must exist
            read_user(cpu + off, 1)

    def _place(self, bo: _Bo, name: str) -> None:
        """Give the BO its memory: back VRAM/GTT at its VA; doorbell/MMIO BOs sit on the special pages."""
        if bo.kind == "userptr":
            return
        if bo.kind in ("doorbell", "mmio"):
            attr = "doorbell_va" if bo.kind == "doorbell" else "mmio_va"
            cur = getattr(bo.node, attr)
            if cur is None:
                setattr(bo.node, attr, self._special_page(bo.size, bo.va, name))
            elif cur != bo.va:
                raise _fail(errno.EINVAL, f"{name}: the {bo.kind} page of gpu_id {bo.node.gpu_id} is already at "
                                          f"0x{cur:x}; emulator limitation: a {bo.kind.upper()} BO must use that VA")
            return
        bo.owns_reservation = self._back(bo.va, bo.size, name)

    def _back(self, va: int, size: int, name: str) -> bool:
        """Back [va, va+size) with zeroed host memory; True when the range had to be reserved for it."""
        if not self.book.window.contains(va, size):
            raise _fail(errno.EINVAL, f"{name}: va 0x{va:x}+{size:#x} is outside the emulator's VA window "
                                      f"0x{self.book.window.base:x}+{self.book.window.size:#x}; reserve VA with "
                                      f"mmap(PROT_NONE) through EmulatedOS")
        for lo, hi in self.owned_ranges():
            if lo < va + size and va < hi:
                raise _fail(errno.EINVAL, f"{name}: va 0x{va:x}+{size:#x} overlaps memory another GPU's BO uses at "
                                          f"0x{lo:x}; emulator limitation: all GPUs share one VA space")
        try:
            owner = self.book.take_for(va, va + size)
        except MemoryError_:
            raise _fail(errno.EINVAL, f"{name}: va 0x{va:x}+{size:#x} is partly in use by other host mappings")
        self.book.window.back(va, size)
        return owner

    def _special_page(self, size: int, va: int | None, name: str) -> int:
        """A driver page (doorbell slice, HDP page, event page): at `va`, or anywhere in the window."""
        if va is None:
            va = self.book.window.allocate(size)
        else:
            self._back(va, size, name)
        self.special_pages.append((va, va + size))
        return va

    def ioctl_free_memory_of_gpu(self, args, io) -> None:
        if self.signal_page and self.signal_page.handle == args.handle:
            raise _fail(errno.EPERM, f"{io.name}: BO 0x{args.handle:x} is the event page; it lives until the "
                                     f"process exits")
        node = self._node(args.handle >> 32, io.name)
        bo = node.bo_of(args.handle)
        if bo is None:
            raise _fail(errno.EINVAL, f"{io.name}: no BO with handle 0x{args.handle:x} (already freed?)")
        if bo.mapped:
            ids = sorted(self.nodes[i].gpu_id for i in bo.mapped)
            raise _fail(errno.EBUSY, f"{io.name}: BO 0x{bo.handle:x} is still mapped on gpu_ids {ids}; "
                                     f"UNMAP_MEMORY_FROM_GPU first")
        del node.bos[args.handle & 0xFFFFFFFF]
        node.by_offset.pop(bo.mmap_offset, None)
        if bo.kind == "vram":
            node.vram_used -= bo.size
        if bo.backed:
            self.book.window.unback(bo.va)
            if bo.owns_reservation:
                self.book.give_back(bo.va, bo.end)
        if bo.kind == "userptr":
            self.system.os.release_deferred_anon()

    def _device_ids(self, args, name: str) -> list[int]:
        if args.n_devices == 0:
            raise _fail(errno.EINVAL, f"{name}: n_devices is 0")
        if args.n_success > args.n_devices:
            raise _fail(errno.EINVAL, f"{name}: n_success {args.n_success} exceeds n_devices {args.n_devices}")
        raw = read_user(args.device_ids_array_ptr, 4 * args.n_devices)
        return list(struct.unpack(f"<{args.n_devices}I", raw))

    def _bo_for_map(self, args, name: str) -> tuple[_Node, _Bo]:
        node = self._node(args.handle >> 32, name)
        self._bound(node, name)
        bo = node.bo_of(args.handle)
        if bo is None:  # kfd_chardev.c answers -ENOMEM when the handle does not translate
            raise _fail(errno.ENOMEM, f"{name}: no BO with handle 0x{args.handle:x}")
        return node, bo

    def ioctl_map_memory_to_gpu(self, args, io) -> None:
        ids = self._device_ids(args, io.name)
        _, bo = self._bo_for_map(args, io.name)
        for i in range(args.n_success, args.n_devices):  # n_success: leading devices done (a retry resumes)
            peer = self._node(ids[i], io.name)
            self._bound(peer, io.name)
            self._map_on(bo, peer, io.name)
            args.n_success = i + 1

    def _map_on(self, bo: _Bo, peer: _Node, name: str) -> None:
        if peer.index in bo.mapped:
            return  # already mapped there: the kernel skips mapped attachments
        try:
            peer.gpu.memory.map(bo.va, bo.size, bo.kind, writable=bool(bo.flags & k.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE),
                                executable=bool(bo.flags & k.KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE),
                                name=f"bo 0x{bo.handle:x}")
        except ValueError as e:
            raise _fail(errno.EINVAL, f"{name}: cannot map BO 0x{bo.handle:x} on gpu_id {peer.gpu_id}: {e}")
        bo.mapped.add(peer.index)
        peer.mapped_at[bo.va] = bo

    def ioctl_unmap_memory_from_gpu(self, args, io) -> None:
        ids = self._device_ids(args, io.name)
        _, bo = self._bo_for_map(args, io.name)
        for i in range(args.n_success, args.n_devices):
            peer = self._node(ids[i], io.name)
            if peer.index not in bo.mapped:
                raise _fail(errno.EINVAL, f"{io.name}: BO 0x{bo.handle:x} is not mapped on gpu_id {peer.gpu_id}")
            if bo.queue_refs.get(peer.index):
                raise _fail(errno.EBUSY, f"{io.name}: BO 0x{bo.handle:x} backs a queue on gpu_id {peer.gpu_id}; "
                                         f"destroy the queue first")
            peer.gpu.memory.unmap(bo.va)
            bo.mapped.discard(peer.index)
            del peer.mapped_at[bo.va]
            args.n_success = i + 1

    # -- queues ------------------------------------------------------------------------------------

    def _queue_args(self, args, name: str) -> None:
        """set_queue_properties_from_user (and the same checks in UPDATE_QUEUE)."""
        if args.queue_percentage & 0xFF > k.KFD_MAX_QUEUE_PERCENTAGE:
            raise _fail(errno.EINVAL, f"{name}: queue_percentage {args.queue_percentage & 0xFF} > 100")
        if args.queue_priority > k.KFD_MAX_QUEUE_PRIORITY:
            raise _fail(errno.EINVAL, f"{name}: queue_priority {args.queue_priority} > 15")
        if args.ring_base_address and not _access_ok(args.ring_base_address, 8):
            raise _fail(errno.EFAULT, f"{name}: ring base 0x{args.ring_base_address:x} is not a user address")
        if args.ring_size and not _is_pow2(args.ring_size):
            raise _fail(errno.EINVAL, f"{name}: ring_size {args.ring_size} is not a power of two")
        args.ring_size = max(args.ring_size, k.KFD_MIN_QUEUE_RING_SIZE)  # clamped, and written back

    def _buffer(self, node: _Node, addr: int, expected: int, what: str, name: str, err: int = errno.EINVAL) -> _Bo:
        """kfd_queue_buffer_get: addr's page must start a GPU mapping of exactly `expected` bytes (page units)."""
        m = node.gpu.memory.find(addr)
        bo = node.mapped_at.get(m.start) if m else None
        pages = expected // PAGE_SIZE
        if bo is None or addr // PAGE_SIZE != bo.va // PAGE_SIZE or (pages and bo.size != pages * PAGE_SIZE):
            have = "nothing" if bo is None else f"BO 0x{bo.handle:x} mapped at 0x{bo.va:x}+{bo.size:#x}"
            raise _fail(err, f"{name}: {what} 0x{addr:x} must start a mapping of exactly {expected:#x} bytes on "
                             f"gpu_id {node.gpu_id}; found {have}")
        return bo

    def ioctl_create_queue(self, args, io) -> None:
        name, qt = io.name, args.queue_type
        self._queue_args(args, name)
        for what in ("read_pointer_address", "write_pointer_address"):
            if not _access_ok(getattr(args, what), 4):
                raise _fail(errno.EFAULT, f"{name}: {what} 0x{getattr(args, what):x} is not a user address")
        for what in ("eop_buffer_address", "ctx_save_restore_address"):
            if getattr(args, what) and not _access_ok(getattr(args, what), 4):
                raise _fail(errno.EFAULT, f"{name}: {what} 0x{getattr(args, what):x} is not a user address")
        if qt not in k.names_of("KFD_IOC_QUEUE_TYPE_"):
            raise _fail(ENOTSUPP, f"{name}: unknown queue_type {qt}")
        if qt == k.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL:
            raise _fail(errno.EOPNOTSUPP, f"{name}: COMPUTE_AQL queues are not emulated by hcqsim "
                                          f"(use COMPUTE, a PM4 queue)")
        node = self._node(args.gpu_id, name)
        self._bound(node, name, errno.ESRCH)
        props = node.props
        max_engine = props["num_sdma_engines"] + props["num_sdma_xgmi_engines"] - 1
        if qt == k.KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID and args.sdma_engine_id > max_engine:
            raise _fail(errno.EINVAL, f"{name}: sdma_engine_id {args.sdma_engine_id} exceeds {max_engine}")
        bufs = self._queue_buffers(node, args, name)
        qid = next((i for i in range(k.KFD_MAX_NUM_OF_QUEUES_PER_PROCESS) if i not in self.queues), None)
        if qid is None:
            raise _fail(errno.ENOMEM, f"{name}: the process already has {len(self.queues)} queues")
        engine, slot, doorbell_id = self._queue_slots(node, qt, args.sdma_engine_id, name)
        queue = self._make_queue(node, qt, engine, args, name)
        self._seq += 1
        rec = _QueueRec(qid, node, queue, qt, engine, slot, doorbell_id, args.queue_percentage & 0xFF,
                        args.queue_priority, args.ring_base_address, args.ring_size, bufs, self._seq)
        for bo in bufs:
            bo.queue_refs[node.index] = bo.queue_refs.get(node.index, 0) + 1
        if slot is not None:
            node.sdma_used.add((engine, slot))
        else:
            node.cp_doorbells.add(doorbell_id)
        if node.doorbell_va is not None:  # a reused doorbell may hold the old queue's last value
            rec.last_doorbell = ctypes.c_uint64.from_address(node.doorbell_va + rec.doorbell_offset).value
        self.queues[qid] = rec
        self._set_active(rec, rec.percentage > 0)
        args.queue_id = qid
        args.doorbell_offset = k.mmap_offset(k.KFD_MMAP_TYPE_DOORBELL, node.gpu_id, rec.doorbell_offset)

    def _queue_buffers(self, node: _Node, args, name: str) -> list[_Bo]:
        """kfd_queue_acquire_buffers (facts 1.6): wptr, rptr, ring; compute: EOP, control stack, CWSR."""
        bufs = [self._buffer(node, args.write_pointer_address, PAGE_SIZE, "write pointer", name),
                self._buffer(node, args.read_pointer_address, PAGE_SIZE, "read pointer", name),
                self._buffer(node, args.ring_base_address, page_align(args.ring_size), "ring", name)]
        if args.queue_type != k.KFD_IOC_QUEUE_TYPE_COMPUTE:
            return bufs
        sizes = node.sizes
        if args.eop_buffer_address:
            if args.eop_buffer_size != sizes.eop_buffer_size:
                raise _fail(errno.EINVAL, f"{name}: eop_buffer_size {args.eop_buffer_size:#x} is not the node's "
                                          f"{sizes.eop_buffer_size:#x}")
            bufs.append(self._buffer(node, args.eop_buffer_address, sizes.eop_buffer_size, "EOP buffer", name))
        if args.ctl_stack_size != sizes.ctl_stack_size:
            raise _fail(errno.EINVAL, f"{name}: ctl_stack_size {args.ctl_stack_size:#x} is not the node's "
                                      f"{sizes.ctl_stack_size:#x}")
        if args.ctx_save_restore_size < sizes.cwsr_size:
            raise _fail(errno.EINVAL, f"{name}: ctx_save_restore_size {args.ctx_save_restore_size:#x} is below the "
                                      f"node's cwsr size {sizes.cwsr_size:#x}")
        bufs.append(self._buffer(node, args.ctx_save_restore_address,
                                 sizes.cwsr_bo_size(args.ctx_save_restore_size), "CWSR area", name))
        return bufs

    def _queue_slots(self, node: _Node, qt: int, eng_id: int, name: str) -> tuple[int | None, int | None, int]:
        """(SDMA engine, SDMA queue slot, doorbell id). SDMA slots as allocate_sdma_queue hands them out."""
        props = node.props
        if qt == k.KFD_IOC_QUEUE_TYPE_COMPUTE:
            free = (i for i in range(k.KFD_MAX_NUM_OF_QUEUES_PER_PROCESS)
                    if i not in node.cp_doorbells and not SDMA_DOORBELL_BASE <= i % SOC15_DOORBELL_MIRROR < 0x200)
            db = next(free, None)
            if db is None:
                raise _fail(errno.EBUSY, f"{name}: no free doorbell on gpu_id {node.gpu_id}")
            return None, None, db
        n_pcie, n_xgmi, per = (props["num_sdma_engines"], props["num_sdma_xgmi_engines"],
                               props["num_sdma_queues_per_engine"])
        if qt == k.KFD_IOC_QUEUE_TYPE_SDMA:
            cands = [(b % n_pcie, b // n_pcie) for b in range(n_pcie * per)]
        elif qt == k.KFD_IOC_QUEUE_TYPE_SDMA_XGMI:
            cands = [(n_pcie + b % n_xgmi, b // n_xgmi) for b in range(n_xgmi * per)] if n_xgmi else []
        else:
            cands = [(eng_id, s) for s in range(per)]
        pick = next((c for c in cands if c not in node.sdma_used), None)
        if pick is None:
            raise _fail(errno.ENOMEM, f"{name}: no more SDMA queues of type {k.names_of('KFD_IOC_QUEUE_TYPE_')[qt]} "
                                      f"on gpu_id {node.gpu_id}")
        engine, slot = pick
        db = SDMA_DOORBELL_BASE + engine * 8 + (slot >> 1) + (slot & 1) * SOC15_DOORBELL_MIRROR
        return engine, slot, db

    def _make_queue(self, node: _Node, qt: int, engine: int | None, args, name: str) -> Queue:
        ring = args.ring_base_address & ~0xFF  # the MQD keeps the ring base >> 8
        rptr, wptr = args.read_pointer_address, args.write_pointer_address
        if qt == k.KFD_IOC_QUEUE_TYPE_COMPUTE:
            return node.gpu.create_compute_queue(ring, args.ring_size, rptr, wptr)
        try:
            return node.gpu.create_sdma_queue(ring, args.ring_size, rptr, wptr, engine)
        except ImportError as e:
            raise _fail(errno.EOPNOTSUPP, f"{name}: the SDMA engine is not available in this build ({e})")

    def _set_active(self, rec: _QueueRec, active: bool) -> None:
        """An inactive queue (percentage 0 or no ring) is out of the GPU's run list, as in the kernel's runlist."""
        gpu, q = rec.node.gpu, rec.queue
        if rec.active and not active and q in gpu.queues:
            gpu.queues.remove(q)
        elif active and not rec.active and q not in gpu.queues:
            later = [r.queue for r in self.queues.values() if r.node is rec.node and r.seq > rec.seq]
            pos = next((i for i, other in enumerate(gpu.queues) if other in later), len(gpu.queues))
            gpu.queues.insert(pos, q)
        rec.active = active

    def ioctl_destroy_queue(self, args, io) -> None:
        rec = self._queue(args.queue_id, io.name, errno.EINVAL)
        node = rec.node
        if rec.queue in node.gpu.queues:
            node.gpu.destroy_queue(rec.queue)
        rec.queue.destroyed = True
        for bo in rec.bufs:
            bo.queue_refs[node.index] -= 1
        node.sdma_used.discard((rec.engine, rec.sdma_slot))
        node.cp_doorbells.discard(rec.doorbell_id)
        del self.queues[rec.qid]

    def ioctl_update_queue(self, args, io) -> None:
        self._queue_args(args, io.name)
        rec = self._queue(args.queue_id, io.name, errno.EFAULT)  # pqm_update_queue_properties: -EFAULT
        base, size, q = args.ring_base_address, args.ring_size, rec.queue
        if base:  # ring 0 only disables the queue (pqm_update_queue_properties)
            ring_bo = self._buffer(rec.node, base, page_align(size), "ring", io.name, errno.EFAULT)
        if base and (base & ~0xFF, size) != (q.ring_va, q.ring_size):
            if q.wait is not None or len(q.stack) > 1 or not q.ring.exhausted:
                raise _fail(errno.EBUSY, f"{io.name}: queue {rec.qid} still has work; emulator limitation: "
                                         f"the ring can only be moved while the queue is idle")
            q.replace_ring(base & ~0xFF, size)
            old = rec.bufs[2]
            old.queue_refs[rec.node.index] -= 1
            ring_bo.queue_refs[rec.node.index] = ring_bo.queue_refs.get(rec.node.index, 0) + 1
            rec.bufs[2] = ring_bo
        rec.ring_base, rec.ring_size = base, size
        rec.percentage, rec.priority = args.queue_percentage & 0xFF, args.queue_priority
        self._set_active(rec, bool(base) and rec.percentage > 0)

    def ioctl_set_cu_mask(self, args, io) -> None:
        if args.num_cu_mask % 32 or args.num_cu_mask == 0:
            raise _fail(errno.EINVAL, f"{io.name}: num_cu_mask {args.num_cu_mask} must be a nonzero multiple of 32")
        count = min(args.num_cu_mask, 1024)
        mask = struct.unpack(f"<{count // 32}I", read_user(args.cu_mask_ptr, count // 8))
        rec = self._queue(args.queue_id, io.name, errno.EFAULT)
        rec.cu_mask = mask  # recorded; the emulator has no CUs to mask

    # -- events (kfd_events.c) ---------------------------------------------------------------------

    def _slot(self, event_id: int) -> ctypes.c_uint64:
        return ctypes.c_uint64.from_address(self.signal_page.va + 8 * event_id)

    def ioctl_create_event(self, args, io) -> None:
        if args.event_page_offset:  # the first call may hand over a user-allocated event page
            self._kmap_event_page(args.event_page_offset, io.name)
        args.event_page_offset = 0
        etype = args.event_type
        if etype in _SIGNAL_TYPES:
            eid = self._new_signal_id(io.name)
            args.event_page_offset, args.event_slot_index = k.KFD_MMAP_TYPE_EVENTS, eid
        else:
            used = {i for i in self.events if i >= k.KFD_FIRST_NONSIGNAL_EVENT_ID}
            eid = next(i for i in range(k.KFD_FIRST_NONSIGNAL_EVENT_ID, k.KFD_LAST_NONSIGNAL_EVENT_ID + 1)
                       if i not in used)
        self.events[eid] = _Event(eid, etype, bool(args.auto_reset))
        args.event_id = args.event_trigger_data = eid

    def _kmap_event_page(self, handle: int, name: str) -> None:
        if self.signal_page is not None:
            raise _fail(errno.EINVAL, f"{name}: the event page is already set (event_page_offset must be 0 now)")
        node = self._node(handle >> 32, name)
        self._bound(node, name)
        bo = node.bo_of(handle)
        if bo is None:
            raise _fail(errno.EINVAL, f"{name}: event page handle 0x{handle:x} is not a BO")
        if bo.kind != "gtt":
            raise _fail(errno.EINVAL, f"{name}: the event page BO must be GTT, not {bo.kind.upper()}")
        size = min(bo.size, k.KFD_SIGNAL_EVENT_PAGE_SIZE)
        ctypes.memset(bo.va, 0xFF, size)  # every slot unsignalled
        self.signal_page, self.signal_mapped_size = _SignalPage(bo.va, size, handle), size

    def _new_signal_id(self, name: str) -> int:
        if self.signal_mapped_size and self.signal_count == self.signal_mapped_size // 8:
            raise _fail(errno.ENOSPC, f"{name}: all {self.signal_mapped_size // 8 - 1} signal event slots are used")
        if self.signal_page is None:  # no user page: the driver allocates one (old ABI: 256 slots until mmapped)
            size = k.KFD_SIGNAL_EVENT_PAGE_SIZE
            va = self._special_page(size, None, name)
            ctypes.memset(va, 0xFF, size)
            self.signal_page, self.signal_mapped_size = _SignalPage(va, size, None), KFD_SIGNAL_OLD_ABI_SLOTS * 8
        eid = next((i for i in range(1, self.signal_mapped_size // 8) if i not in self.events), None)
        if eid is None:
            raise _fail(errno.ENOSPC, f"{name}: no free signal event slot")
        self._slot(eid).value = k.UNSIGNALED_EVENT_SLOT
        self.signal_count += 1
        return eid

    def _event(self, eid: int, name: str) -> _Event:
        ev = self.events.get(eid)
        if ev is None:
            raise _fail(errno.EINVAL, f"{name}: no event with id {eid}")
        return ev

    def ioctl_destroy_event(self, args, io) -> None:
        ev = self._event(args.event_id, io.name)
        for w in ev.waiters:
            w.event = None
        if ev.type in _SIGNAL_TYPES:
            self.signal_count -= 1
        del self.events[ev.id]

    def ioctl_set_event(self, args, io) -> None:
        ev = self._event(args.event_id, io.name)
        if ev.type != k.KFD_IOC_EVENT_SIGNAL:
            raise _fail(errno.EINVAL, f"{io.name}: event {ev.id} is not a SIGNAL event")
        self._set_event(ev)

    def ioctl_reset_event(self, args, io) -> None:
        ev = self._event(args.event_id, io.name)
        if ev.type != k.KFD_IOC_EVENT_SIGNAL:
            raise _fail(errno.EINVAL, f"{io.name}: event {ev.id} is not a SIGNAL event")
        ev.signaled = False

    def _set_event(self, ev: _Event) -> None:
        # Auto-reset events stay signalled only when nobody is waiting (a waiter consumes the signal).
        ev.signaled = not ev.auto_reset or not ev.waiters
        ev.age = ev.age + 1 if ev.age + 1 < 1 << 64 else 2
        for w in ev.waiters:
            w.activated = True

    # -- interrupts --------------------------------------------------------------------------------

    def _irq_handler(self, node: _Node) -> Callable[[Interrupt], None]:
        def handle(irq: Interrupt) -> None:
            if irq.source == "cp_eop":
                self._signal_interrupt(irq.ctxid & 0xFFFFFFFF, 32)
            elif irq.source == "sdma_trap":
                self._signal_interrupt(irq.ctxid & 0x0FFFFFFF, 28)
            elif irq.source == "vm_fault" and irq.fault is not None:
                self._memory_exception(node, irq.fault)
            elif irq.source == "queue_error":
                self._hw_exception(node)
        return handle

    def _signalled(self, eid: int) -> bool:
        return 8 * eid < self.signal_page.size and self._slot(eid).value != k.UNSIGNALED_EVENT_SLOT

    def _lookup_partial(self, eid: int, bits: int) -> _Event | None:
        """lookup_signaled_event_by_partial_id: the event only counts if its slot is not all-ones."""
        if self.signal_page is None or eid >= k.KFD_SIGNAL_EVENT_LIMIT:
            return None
        if bits > 31 or 1 << bits >= k.KFD_SIGNAL_EVENT_LIMIT:
            return self.events.get(eid) if self._signalled(eid) else None
        while eid < k.KFD_SIGNAL_EVENT_LIMIT:
            if self._signalled(eid) and eid in self.events:
                return self.events[eid]
            eid += 1 << bits
        return None

    def _signal_interrupt(self, partial: int, bits: int) -> None:
        ev = self._lookup_partial(partial, bits)
        if ev is not None:
            self._set_from_interrupt(ev)
        elif self.signal_page is not None:  # invalid id: scan every slot for signalled events
            for eid in sorted(i for i in self.events if i < k.KFD_SIGNAL_EVENT_LIMIT):
                if self._signalled(eid):
                    self._set_from_interrupt(self.events[eid])

    def _set_from_interrupt(self, ev: _Event) -> None:
        if ev.type in _SIGNAL_TYPES:
            self._slot(ev.id).value = k.UNSIGNALED_EVENT_SLOT  # acknowledge, then wake
            self._set_event(ev)

    def _memory_exception(self, node: _Node, fault: Fault) -> None:
        data = k.MemoryExceptionData(gpu_id=node.gpu_id, va=fault.address & ~(PAGE_SIZE - 1))  # page address
        m = node.gpu.memory.find(fault.address)
        if m is None:
            data.NotPresent = 1
        elif fault.access == "write" and not m.writable:
            data.ReadOnly = 1
        elif fault.access == "execute" and not m.executable:
            data.NoExecute = 1
        else:
            data.NotPresent = 1  # a later page of the access was missing
        for ev in self.events.values():
            if ev.type == k.KFD_IOC_EVENT_MEMORY:
                ev.memory_data = bytes(data)
                self._set_event(ev)

    def _hw_exception(self, node: _Node) -> None:
        data = k.HwExceptionData(reset_type=k.KFD_HW_EXCEPTION_PER_ENGINE_RESET,
                                 reset_cause=k.KFD_HW_EXCEPTION_GPU_HANG, memory_lost=0, gpu_id=node.gpu_id)
        for ev in self.events.values():
            if ev.type == k.KFD_IOC_EVENT_HW_EXCEPTION:
                ev.hw_data = bytes(data)
                self._set_event(ev)

    # -- waiting -----------------------------------------------------------------------------------

    def ioctl_wait_events(self, args, io) -> None:
        n, size = args.num_events, ctypes.sizeof(k.EventData)
        try:
            raw = read_user(args.events_ptr, n * size) if n else b""
            data = [k.EventData.from_buffer_copy(raw, i * size) for i in range(n)]
            for d in data:  # checked before any waiter consumes an auto-reset signal
                self._event(d.event_id, io.name)
        except OSError:
            args.wait_result = k.KFD_IOC_WAIT_RESULT_FAIL
            raise
        waiters = [self._add_waiter(self.events[d.event_id], d) for d in data]
        try:
            done = lambda: self._condition(waiters, bool(args.wait_for_all)) != k.KFD_IOC_WAIT_RESULT_TIMEOUT
            if not done():
                self.progress(done)
            result = self._condition(waiters, bool(args.wait_for_all))
            if result == k.KFD_IOC_WAIT_RESULT_TIMEOUT and args.timeout != k.KFD_EVENT_TIMEOUT_IMMEDIATE:
                raise DeadlockError(self._describe_wait(data, args), self.blocked())
            args.wait_result = result
            if result == k.KFD_IOC_WAIT_RESULT_COMPLETE:
                self._copy_event_data(waiters, args.events_ptr, io.name)
            elif result == k.KFD_IOC_WAIT_RESULT_FAIL:
                raise _fail(errno.EIO, f"{io.name}: an awaited event was destroyed")
        finally:
            for w in waiters:
                if w.event is not None and w in w.event.waiters:
                    w.event.waiters.remove(w)

    def _add_waiter(self, ev: _Event, d: k.EventData) -> _Waiter:
        w = _Waiter(ev, ev.signaled)
        ev.signaled = ev.signaled and not ev.auto_reset  # a waiter consumes an auto-reset signal
        last = d.signal_event_data.last_event_age
        if ev.type == k.KFD_IOC_EVENT_SIGNAL and last:
            w.age_enabled = True
            w.activated = w.activated or ev.age != last
        if not w.activated:  # only a waiter still waiting sits on the event's wait queue
            ev.waiters.append(w)
        return w

    @staticmethod
    def _condition(waiters: list[_Waiter], all_: bool) -> int:
        if any(w.event is None for w in waiters):
            return k.KFD_IOC_WAIT_RESULT_FAIL
        hits = sum(w.activated for w in waiters)
        if (hits and not all_) or hits == len(waiters):
            return k.KFD_IOC_WAIT_RESULT_COMPLETE
        return k.KFD_IOC_WAIT_RESULT_TIMEOUT

    def _copy_event_data(self, waiters: list[_Waiter], ptr: int, name: str) -> None:
        size = ctypes.sizeof(k.EventData)
        for i, w in enumerate(waiters):
            if not w.activated:
                continue
            ev = w.event
            if ev.type == k.KFD_IOC_EVENT_MEMORY:
                write_user(ptr + i * size, ev.memory_data)
            elif ev.type == k.KFD_IOC_EVENT_HW_EXCEPTION:
                write_user(ptr + i * size, ev.hw_data)
            elif ev.type == k.KFD_IOC_EVENT_SIGNAL and w.age_enabled:
                write_user(ptr + i * size, struct.pack("<Q", ev.age))

    def _describe_wait(self, data: list, args) -> str:
        ids = ", ".join(str(d.event_id) for d in data)
        mode = "all" if args.wait_for_all else "any"
        timeout = "infinite" if args.timeout == k.KFD_EVENT_TIMEOUT_INFINITE else f"{args.timeout} ms"
        return f"WAIT_EVENTS on events [{ids}] ({mode}, timeout {timeout})"

    def blocked(self) -> list:
        return [dataclasses.replace(b, queue=f"gpu{n.index}:{b.queue}") for n in self.nodes for b in n.gpu.blocked()]

    def progress(self, done: Callable[[], bool] | None = None) -> None:
        """A progress point: deliver pending doorbell stores, run every GPU until quiet (or `done`)."""
        while done is None or not done():
            executed = self.system.os.poll_doorbells()
            executed += sum(n.gpu.run() for n in self.nodes)
            if executed == 0:
                return

    def close(self) -> None:
        for gpu, handler in self._installed:
            if handler in gpu.interrupt_handlers:
                gpu.interrupt_handlers.remove(handler)
        for rec in list(self.queues.values()):
            rec.queue.destroyed = True
            if rec.queue in rec.node.gpu.queues:
                rec.node.gpu.queues.remove(rec.queue)
        self.queues.clear()
        self.events.clear()
        for node in self.nodes:
            for bo in node.bos.values():
                for i in list(bo.mapped):
                    self.nodes[i].gpu.memory.unmap(bo.va)
            node.bos.clear()
            node.mapped_at.clear()


def _user_buffer(arg) -> tuple[int, int | None]:
    """(address, bytes available) of an ioctl argument; None when it is a bare pointer."""
    if isinstance(arg, int):
        return arg, None
    try:
        return ctypes.addressof(arg), ctypes.sizeof(arg)  # any ctypes object
    except TypeError:
        pass
    buf = (ctypes.c_char * len(arg)).from_buffer(arg)  # bytearray / writable memoryview
    return ctypes.addressof(buf), len(arg)


# ---------------------------------------------------------------------------------------------------
# sysfs topology (facts 2)


def _gpu_ids(target: str, n: int) -> list[int]:
    """16-bit nonzero, distinct, deterministic per index (the kernel hashes PCI identity; we hash the index)."""
    ids: list[int] = []
    for i in range(n):
        h = zlib.crc32(f"hcqsim {target} gpu {i}".encode()) & 0xFFFF
        while h == 0 or h in ids:
            h = (h + 1) & 0xFFFF
        ids.append(h)
    return ids


def _props_text(keys: tuple, values: dict) -> str:
    return "".join(f"{key} {values[key]}\n" for key in keys)


def _link(node_from: int, node_to: int, kind: int, weight: int) -> str:
    v = dict.fromkeys(k.IO_LINK_PROPERTY_KEYS, 0)
    v.update(type=kind, node_from=node_from, node_to=node_to, weight=weight, flags=k.HSA_IOLINK_FLAGS_ENABLED)
    return _props_text(k.IO_LINK_PROPERTY_KEYS, v)


def gpu_node_properties(target: Target, index: int, num_gpus: int) -> dict:
    """The `properties` values of GPU node `index` (facts 2.2 keys, facts 2.5 values)."""
    f = NODE_FACTS[target.name]
    return dict(
        cpu_cores_count=0, simd_count=target.simd_count, mem_banks_count=1, caches_count=0, io_links_count=1,
        p2p_links_count=num_gpus - 1, cpu_core_id_base=0, simd_id_base=f["simd_id_base"] + index * 0x1000,
        max_waves_per_simd=target.max_waves_per_simd, lds_size_in_kb=target.lds_size_in_kb, gds_size_in_kb=0,
        num_gws=f["num_gws"], wave_front_size=target.wave_size, array_count=target.array_count,
        simd_arrays_per_engine=target.simd_arrays_per_engine, cu_per_simd_array=target.cu_per_simd_array,
        simd_per_cu=target.simd_per_cu, max_slots_scratch_cu=f["max_slots_scratch_cu"],
        gfx_target_version=target.gfx_target_version, vendor_id=f["vendor_id"], device_id=target.device_id,
        location_id=f["location_id"] + (index << 8), domain=0, drm_render_minor=128 + index, hive_id=f["hive_id"],
        num_sdma_engines=f["num_sdma_engines"], num_sdma_xgmi_engines=f["num_sdma_xgmi_engines"],
        num_sdma_queues_per_engine=f["num_sdma_queues_per_engine"], num_cp_queues=f["num_cp_queues"],
        max_engine_clk_fcompute=f["max_engine_clk_fcompute"], local_mem_size=0, fw_version=f["fw_version"],
        capability=f["capability"], capability2=f["capability2"], debug_prop=f["debug_prop"],
        sdma_fw_version=f["sdma_fw_version"], unique_id=(f["unique_id"] + index) % (1 << 64),
        num_xcc=target.num_xcc, max_engine_clk_ccompute=CPU_CLOCK_MHZ)


def cpu_node_properties(num_gpus: int) -> dict:
    v = dict.fromkeys(k.NODE_PROPERTY_KEYS, 0)
    v.update(cpu_cores_count=CPU_CORES, mem_banks_count=1, io_links_count=num_gpus,
             max_engine_clk_ccompute=CPU_CLOCK_MHZ)
    return v


def build_topology(target: Target, gpu_ids: list[int], vram_size: int,
                   used: Callable[[int], int]) -> dict[str, str | Callable[[], str]]:
    """path -> file text (or a function giving it, for values that change, like used_memory)."""
    root, n = k.KFD_TOPOLOGY_ROOT, len(gpu_ids)
    tree: dict[str, str | Callable[[], str]] = {
        f"{root}/generation_id": "1\n",
        f"{root}/system_properties": "".join(f"{key} 0\n" for key in k.SYSTEM_PROPERTY_KEYS),
    }
    cpu_keys = tuple(key for key in k.NODE_PROPERTY_KEYS if key not in k.GPU_ONLY_NODE_PROPERTY_KEYS)
    cpu = f"{root}/nodes/0"
    tree.update({f"{cpu}/gpu_id": "0\n", f"{cpu}/name": "\n",
                 f"{cpu}/properties": _props_text(cpu_keys, cpu_node_properties(n)),
                 f"{cpu}/mem_banks/0/properties": _props_text(k.MEM_BANK_PROPERTY_KEYS, dict(
                     heap_type=k.HSA_MEM_HEAP_TYPE_SYSTEM, size_in_bytes=CPU_MEMORY, flags=0, width=64,
                     mem_clk_max=3200))})
    for i in range(n):
        tree[f"{cpu}/io_links/{i}/properties"] = _link(0, i + 1, k.HSA_IOLINK_TYPE_PCIEXPRESS, 20)
    facts = NODE_FACTS[target.name]
    for i, gid in enumerate(gpu_ids):
        d = f"{root}/nodes/{i + 1}"
        tree.update({f"{d}/gpu_id": f"{gid}\n", f"{d}/name": "ip discovery\n",
                     f"{d}/properties": _props_text(k.NODE_PROPERTY_KEYS, gpu_node_properties(target, i, n)),
                     f"{d}/mem_banks/0/properties": _props_text(k.MEM_BANK_PROPERTY_KEYS, dict(
                         heap_type=k.HSA_MEM_HEAP_TYPE_FB_PUBLIC, size_in_bytes=vram_size, flags=0,
                         width=facts["mem_width"], mem_clk_max=facts["mem_clk_max"])),
                     f"{d}/mem_banks/0/used_memory": (lambda i=i: f"{used(i)}\n"),
                     f"{d}/io_links/0/properties": _link(i + 1, 0, k.HSA_IOLINK_TYPE_PCIEXPRESS, 20)})
        xgmi = facts["hive_id"] != 0
        peers = [j for j in range(n) if j != i]
        for m, j in enumerate(peers):
            kind = k.HSA_IOLINK_TYPE_XGMI if xgmi else k.HSA_IOLINK_TYPE_PCIEXPRESS
            tree[f"{d}/p2p_links/{m}/properties"] = _link(i + 1, j + 1, kind, 15 if xgmi else 40)
    return tree


# ---------------------------------------------------------------------------------------------------
# the machine


class EmulatedSystem:
    """N emulated GPUs behind one emulated KFD, sharing one VA window. `.os` is the runtime's boundary."""

    def __init__(self, num_gpus: int = 1, target: str = "gfx1100", seed: int = 0, policy="run_to_block",
                 vram_size: int = 16 << 30):
        if num_gpus < 1:
            raise ValueError("an emulated system needs at least one GPU")
        self.target = get_target(target)
        if self.target.name not in NODE_FACTS:
            raise ValueError(f"no sysfs node facts for {self.target.name}")
        self.vram_size = vram_size
        self.window = VaWindow()
        self.gpus = [EmulatedGPU(target, seed=seed + i, index=i, window=self.window, policy=policy)
                     for i in range(num_gpus)]
        self.gpu_ids = _gpu_ids(self.target.name, num_gpus)
        sizes = queue_sizes(self.target)
        self.nodes = [_Node(i, g, self.gpu_ids[i], gpu_node_properties(self.target, i, num_gpus), sizes)
                      for i, g in enumerate(self.gpus)]
        self.book = _AddressBook(self.window)
        self.topology = build_topology(self.target, self.gpu_ids, vram_size, lambda i: self.nodes[i].vram_used)
        self.os = EmulatedOS(self)
        self.driver = KfdDriver(self)
        self.closed = False

    def render_path(self, index: int) -> str:
        return f"/dev/dri/renderD{self.nodes[index].minor}"

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.driver.close()
        for gpu in self.gpus:
            gpu.close()
        self.window.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class EmulatedOS(OSBoundary):
    """The runtime's OS boundary over an EmulatedSystem: fake fds, the emulated driver, sysfs, mmap, doorbells."""

    emulated = True

    def __init__(self, system: EmulatedSystem):
        self.system = system
        self.files: dict[int, _File] = {}
        self._next_fd = FD_BASE
        self._reported: dict[int, int] = {}  # GPU index -> faults already handed out by fault_details

    # -- files -------------------------------------------------------------------------------------

    def open(self, path: str, flags: int = os.O_RDWR | os.O_CLOEXEC) -> int:
        if path == KFD_PATH:
            f = _File("kfd")
        else:
            f = next((_File("render", n.index) for n in self.system.nodes
                      if path == self.system.render_path(n.index)), None)
            if f is None:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        fd, self._next_fd = self._next_fd, self._next_fd + 1
        self.files[fd] = f
        return fd

    def close(self, fd: int) -> None:
        if self.files.pop(fd, None) is None:
            raise _fail(errno.EBADF, f"close: fd {fd} is not open")

    def _file(self, fd: int, what: str) -> _File:
        f = self.files.get(fd)
        if f is None:
            raise _fail(errno.EBADF, f"{what}: fd {fd} is not open")
        return f

    def ioctl(self, fd: int, request: int, arg) -> None:
        f = self._file(fd, "ioctl")
        if f.kind != "kfd":
            raise _fail(errno.ENOTTY, f"ioctl 0x{request:08x} on a render node: DRM ioctls are not emulated")
        self.system.driver.ioctl(request, arg)

    # -- memory mappings ---------------------------------------------------------------------------

    def mmap(self, addr: int, length: int, prot: int, flags: int, fd: int = -1, offset: int = 0) -> int:
        if length <= 0 or (flags & MAP_FIXED and addr % PAGE_SIZE):
            raise _fail(errno.EINVAL, f"mmap: bad length {length} or unaligned fixed address 0x{addr:x}")
        if flags & MAP_ANONYMOUS:
            return self._mmap_anon(addr, length, prot, flags)
        f = self._file(fd, "mmap")
        if f.kind == "render":
            return self._mmap_bo(self.system.nodes[f.gpu], addr, length, flags, offset)
        return self._mmap_kfd(addr, length, flags, offset)

    def _mmap_anon(self, addr: int, length: int, prot: int, flags: int) -> int:
        book = self.system.book
        try:
            if prot == PROT_NONE:  # the runtime reserving GPU VA
                if flags & MAP_FIXED and book.is_reserved(addr, addr + page_align(length)):
                    return addr  # re-reserving its own reservation: nothing changes
                return book.reserve(length, addr if flags & MAP_FIXED else None)
            if flags & MAP_FIXED:
                raise _fail(errno.EINVAL, "mmap: emulator limitation: anonymous read/write MAP_FIXED is not emulated")
            va = book.window.allocate(length)  # host memory (e.g. for USERPTR), zeroed
            book.anon[va] = page_align(length)
            return va
        except MemoryError_ as e:
            raise _fail(errno.ENOMEM, f"mmap: {e}")

    @staticmethod
    def _at(va: int, addr: int, flags: int, what: str) -> int:
        if flags & MAP_FIXED and addr != va:
            raise _fail(errno.EINVAL, f"mmap: {what} lives at 0x{va:x}; emulator limitation: it cannot be mapped a "
                                      f"second time at 0x{addr:x} (map it at its own address)")
        return va

    def _mmap_bo(self, node: _Node, addr: int, length: int, flags: int, offset: int) -> int:
        bo = node.by_offset.get(offset)
        if bo is None:
            raise _fail(errno.EINVAL, f"mmap: offset 0x{offset:x} is not a BO of renderD{node.minor}")
        if page_align(length) > bo.size:
            raise _fail(errno.EINVAL, f"mmap: {length:#x} bytes is larger than BO 0x{bo.handle:x} ({bo.size:#x})")
        return self._at(bo.va, addr, flags, f"BO 0x{bo.handle:x}")

    def _mmap_kfd(self, addr: int, length: int, flags: int, offset: int) -> int:
        driver = self.system.driver
        mtype, gpu_id, _ = k.decode_mmap_offset(offset)
        node = driver.node_by_id(gpu_id) if gpu_id else None
        if mtype == k.KFD_MMAP_TYPE_EVENTS:
            if page_align(length) > k.KFD_SIGNAL_EVENT_PAGE_SIZE:
                raise _fail(errno.EINVAL, f"mmap: event page mapping of {length:#x} bytes exceeds 32 KiB")
            if driver.signal_page is None:
                raise _fail(errno.EINVAL, "mmap: there is no event page yet (create a signal event first)")
            va = self._at(driver.signal_page.va, addr, flags, "the event page")
            driver.signal_mapped_size = min(page_align(length), driver.signal_page.size)
            return va
        if node is None:
            raise _fail(errno.ENODEV, f"mmap: offset 0x{offset:x} names no GPU")
        if mtype == k.KFD_MMAP_TYPE_DOORBELL:
            if length != k.KFD_DOORBELL_SLICE_SIZE:
                raise _fail(errno.EINVAL, f"mmap: the doorbell slice is {k.KFD_DOORBELL_SLICE_SIZE:#x} bytes, "
                                          f"not {length:#x}")
            return self._at(self.doorbell_slice(node), addr, flags, "the doorbell slice")
        if mtype == k.KFD_MMAP_TYPE_MMIO:
            if length != PAGE_SIZE:
                raise _fail(errno.EINVAL, f"mmap: the MMIO page is one page, not {length:#x} bytes")
            if node.mmio_va is None:
                node.mmio_va = driver._special_page(PAGE_SIZE, None, "mmap")
            return self._at(node.mmio_va, addr, flags, "the MMIO page")
        raise _fail(errno.EINVAL, "mmap: RESERVED_MEM offsets are not emulated")

    def doorbell_slice(self, node: _Node) -> int:
        if node.doorbell_va is None:
            node.doorbell_va = self.system.driver._special_page(k.KFD_DOORBELL_SLICE_SIZE, None, "mmap")
        return node.doorbell_va

    def munmap(self, addr: int, length: int) -> None:
        if addr % PAGE_SIZE or length <= 0:
            raise _fail(errno.EINVAL, f"munmap: bad range 0x{addr:x}+{length:#x}")
        book, lo, hi = self.system.book, addr, addr + page_align(length)
        if lo in book.anon:
            if book.anon[lo] != hi - lo:
                raise _fail(errno.EINVAL, "munmap: emulator limitation: unmap anonymous memory as it was mapped")
            size = book.anon.pop(lo)
            book.deferred_anon[lo] = size
            self.release_deferred_anon()
            return
        driver = self.system.driver
        removed = book.unmap_reserved(lo, hi, driver.owned_ranges())
        for node in self.system.nodes:  # live BOs in the removed part now hold their pages themselves
            for bo in node.bos.values():
                if bo.backed and _clip(removed, bo.va, bo.end):
                    bo.owns_reservation = True
        # Other ranges (BO and doorbell/event/MMIO CPU mappings) need no work: the memory stays for the GPU.

    def release_deferred_anon(self) -> None:
        """Release munmapped anonymous memory no live USERPTR BO points into any more."""
        book = self.system.book
        live = [(b.va, b.end) for n in self.system.nodes for b in n.bos.values() if b.kind == "userptr"]
        for va, size in list(book.deferred_anon.items()):
            if not _clip(live, va, va + size):
                del book.deferred_anon[va]
                book.window.release(va)

    # -- sysfs -------------------------------------------------------------------------------------

    def _sys_path(self, path: str) -> str:
        path = path.rstrip("/")
        alias = "/sys/class/kfd/kfd/topology"
        return k.KFD_TOPOLOGY_ROOT + path[len(alias):] if path.startswith(alias) else path

    def _children(self, path: str) -> list[str]:
        prefix = path + "/"
        names = {p[len(prefix):].split("/", 1)[0] for p in self.system.topology if p.startswith(prefix)}
        return sorted(names, key=lambda s: (not s.isdigit(), int(s) if s.isdigit() else 0, s))

    def read_text(self, path: str) -> str:
        p = self._sys_path(path)
        value = self.system.topology.get(p)
        if value is None:
            if self._children(p):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        return value() if callable(value) else value

    def listdir(self, path: str) -> list[str]:
        p = self._sys_path(path)
        names = self._children(p)
        if not names:
            if p in self.system.topology:
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        return names

    def exists(self, path: str) -> bool:
        p = self._sys_path(path)
        return p in self.system.topology or bool(self._children(p)) or p in ("/dev/kfd",) or any(
            p == self.system.render_path(n.index) for n in self.system.nodes)

    # -- doorbells and faults ----------------------------------------------------------------------

    def _doorbell_target(self, address: int) -> tuple[_Node | None, _QueueRec | None]:
        for node in self.system.nodes:
            base = node.doorbell_va
            if base is not None and base <= address < base + k.KFD_DOORBELL_SLICE_SIZE:
                rec = next((r for r in self.system.driver.queues.values()
                            if r.node is node and base + r.doorbell_offset == address), None)
                return node, rec
        return None, None

    def ring_doorbell(self, address: int, value: int) -> None:
        node, rec = self._doorbell_target(address)
        if node is None or address % 8:
            raise _fail(errno.EFAULT, f"ring_doorbell: 0x{address:x} is not a doorbell in a mapped doorbell slice")
        ctypes.c_uint64.from_address(address).value = value & 0xFFFFFFFFFFFFFFFF
        if rec is not None:
            self._deliver(rec, value)

    def _deliver(self, rec: _QueueRec, value: int) -> None:
        rec.last_doorbell = value
        if rec.queue.active:  # a faulted or destroyed queue ignores its doorbell, as hardware does
            rec.node.gpu.ring_doorbell(rec.queue, value)

    def poll_doorbells(self) -> int:
        """Doorbell slots stored to directly (not through ring_doorbell) are seen at the next progress point."""
        rung = 0
        for rec in list(self.system.driver.queues.values()):
            base = rec.node.doorbell_va
            if base is None:
                continue
            value = ctypes.c_uint64.from_address(base + rec.doorbell_offset).value
            if value != (rec.last_doorbell or 0) and rec.queue.active:
                self._deliver(rec, value)
                rung += 1
        return rung

    def fault_details(self, gpu_id: int) -> list[str]:
        node = self.system.driver.node_by_id(gpu_id)
        if node is None:
            return []
        seen = self._reported.get(node.index, 0)
        self._reported[node.index] = len(node.gpu.faults)
        return [str(f) for f in node.gpu.faults[seen:]]
