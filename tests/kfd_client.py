"""A small KFD client that is *not* hcqsim's runtime: written against the Linux UAPI (include/uapi/linux/kfd_ioctl.h,
HARDWARE_FACTS sections 1-5) with only os, mmap-style calls and ctypes, the way other Python runtimes drive /dev/kfd.

It shares nothing with `hcqsim.runtime` or `hcqsim.kfd_uapi`: its own structs and request numbers, its own PM4 and
SDMA packets, hand-encoded kernel machine code, plain 64-bit stores to the mapped doorbell (no driver call), and
waits that spin on signal memory first and then sleep in WAIT_EVENTS with a finite timeout. It is handed an
object with the system calls it needs -- `open`, `close`, `ioctl(fd, request, ctypes struct)`, `mmap`, `munmap`,
`read_text`, `listdir` -- which is exactly what `hcqsim.kfd.EmulatedOS` offers (`LinuxOS` below does the same
with libc for a real /dev/kfd).
"""
from __future__ import annotations

import ctypes
import os
import struct
import time

PAGE = 4096
TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology/nodes"
PROT_NONE, PROT_RW = 0, 3
MAP_SHARED, MAP_PRIVATE, MAP_FIXED, MAP_ANONYMOUS, MAP_NORESERVE = 0x01, 0x02, 0x10, 0x20, 0x4000


# -- the UAPI (kfd_ioctl.h) -----------------------------------------------------------------------------------

class Struct(ctypes.Structure):
    _pack_ = 8


def fields(*spec):
    return [(n, {"u32": ctypes.c_uint32, "u64": ctypes.c_uint64}[t]) for t, n in spec]


class Version(Struct):
    _fields_ = fields(("u32", "major"), ("u32", "minor"))


class AcquireVm(Struct):
    _fields_ = fields(("u32", "drm_fd"), ("u32", "gpu_id"))


class Alloc(Struct):
    _fields_ = fields(("u64", "va_addr"), ("u64", "size"), ("u64", "handle"), ("u64", "mmap_offset"),
                      ("u32", "gpu_id"), ("u32", "flags"))


class MapToGpu(Struct):
    _fields_ = fields(("u64", "handle"), ("u64", "device_ids_array_ptr"), ("u32", "n_devices"), ("u32", "n_success"))


class CreateQueue(Struct):
    _fields_ = fields(("u64", "ring_base_address"), ("u64", "write_pointer_address"), ("u64", "read_pointer_address"),
                      ("u64", "doorbell_offset"), ("u32", "ring_size"), ("u32", "gpu_id"), ("u32", "queue_type"),
                      ("u32", "queue_percentage"), ("u32", "queue_priority"), ("u32", "queue_id"),
                      ("u64", "eop_buffer_address"), ("u64", "eop_buffer_size"), ("u64", "ctx_save_restore_address"),
                      ("u32", "ctx_save_restore_size"), ("u32", "ctl_stack_size"), ("u32", "sdma_engine_id"),
                      ("u32", "pad"))


class DestroyQueue(Struct):
    _fields_ = fields(("u32", "queue_id"), ("u32", "pad"))


class CreateEvent(Struct):
    _fields_ = fields(("u64", "event_page_offset"), ("u32", "event_trigger_data"), ("u32", "event_type"),
                      ("u32", "auto_reset"), ("u32", "node_id"), ("u32", "event_id"), ("u32", "event_slot_index"))


class EventData(Struct):  # kfd_event_data: a 32-byte union, an extension pointer, the event id
    _fields_ = [("union", ctypes.c_uint8 * 32), ("ext", ctypes.c_uint64), ("event_id", ctypes.c_uint32),
                ("pad", ctypes.c_uint32)]


class WaitEvents(Struct):
    _fields_ = fields(("u64", "events_ptr"), ("u32", "num_events"), ("u32", "wait_for_all"), ("u32", "timeout"),
                      ("u32", "wait_result"))


def _iowr(nr: int, struct_type, direction: int = 3) -> int:
    return direction << 30 | ctypes.sizeof(struct_type) << 16 | ord("K") << 8 | nr


GET_VERSION = _iowr(0x01, Version, 2)
CREATE_QUEUE = _iowr(0x02, CreateQueue)
DESTROY_QUEUE = _iowr(0x03, DestroyQueue)
CREATE_EVENT = _iowr(0x08, CreateEvent)
WAIT_EVENTS = _iowr(0x0C, WaitEvents)
ACQUIRE_VM = _iowr(0x15, AcquireVm, 1)
ALLOC_MEMORY = _iowr(0x16, Alloc)
MAP_MEMORY = _iowr(0x18, MapToGpu)

VRAM, GTT, MMIO_REMAP = 1 << 0, 1 << 1, 1 << 4
WRITABLE, EXECUTABLE, PUBLIC, COHERENT, UNCACHED = 1 << 31, 1 << 30, 1 << 29, 1 << 26, 1 << 25
EVENT_SIGNAL, EVENT_MEMORY = 0, 8
QUEUE_COMPUTE, QUEUE_SDMA = 0, 1
WAIT_COMPLETE, WAIT_TIMEOUT = 0, 1


# -- packets (PM4 type 3, SDMA), written from the facts tables ------------------------------------------------

def pm4(op: int, body: list[int]) -> list[int]:
    return [3 << 30 | (len(body) - 1) << 16 | op << 8] + body


def pm4_set_sh(reg: int, values: list[int]) -> list[int]:
    return pm4(0x76, [reg - 0x2C00] + values)


def pm4_release_mem(addr: int, value: int, ctxid: int = 0, interrupt: bool = False, gfx11: bool = True) -> list[int]:
    # EVENT_TYPE 0x14 (CACHE_FLUSH_AND_INV_TS), EVENT_INDEX 5 (end of pipe); DATA_SEL 1 (32 bits), INT_SEL 2;
    # write L2 back first so the host sees the kernel's VRAM stores (facts 6.2): gfx11 GCR_SEQ | GL2_WB, gfx9 TC_WB
    cache = 1 << 22 | 1 << 21 if gfx11 else 1 << 15
    data_cntl = 1 << 29 | (2 << 24 if interrupt else 0)
    return pm4(0x49, [0x14 | 5 << 8 | cache, data_cntl, addr & 0xFFFFFFFF, addr >> 32, value, 0, ctxid])


def pm4_wait_ge(addr: int, value: int) -> list[int]:
    # WAIT_REG_MEM: FUNCTION 5 (>=), MEM_SPACE 1 (memory); poll interval 4
    return pm4(0x3C, [5 | 1 << 4, addr & 0xFFFFFFFF, addr >> 32, value, 0xFFFFFFFF, 4])


def sdma_copy(dst: int, src: int, n: int) -> list[int]:
    return [1, n - 1, 0, src & 0xFFFFFFFF, src >> 32, dst & 0xFFFFFFFF, dst >> 32]


def sdma_fence(addr: int, value: int) -> list[int]:
    return [5, addr & 0xFFFFFFFF, addr >> 32, value]


def sdma_trap(event_id: int) -> list[int]:
    return [6, event_id & 0x0FFFFFFF]


# Each lane of one 64-lane workgroup writes 42 + its id to buf[id]; buf's address arrives in s[0:1] (USER_DATA_0/1).
# Encoded by hand from the ISA guides' VOP2 / FLAT / SOPP layouts.
KERNELS = {
    "gfx11": [0x30020082,  # v_lshlrev_b32 v1, 2, v0
              0x4A0400AA,  # v_add_nc_u32 v2, 42, v0
              0xDC6A0000, 0x00000201,  # global_store_b32 v1, v2, s[0:1]
              0xBFB00000],  # s_endpgm
    "gfx9": [0x24020082,  # v_lshlrev_b32 v1, 2, v0
             0x680400AA,  # v_add_u32 v2, 42, v0
             0xDC708000, 0x00000201,  # global_store_dword v1, v2, s[0:1]
             0xBF810000],  # s_endpgm
}


# -- the client -----------------------------------------------------------------------------------------------

class ClientTimeout(Exception):
    pass


class Mem:
    def __init__(self, va: int, size: int, handle: int):
        self.va, self.size, self.handle = va, size, handle

    def u32(self, i: int = 0) -> ctypes.c_uint32:
        return ctypes.c_uint32.from_address(self.va + 4 * i)

    def u64(self, i: int = 0) -> ctypes.c_uint64:
        return ctypes.c_uint64.from_address(self.va + 8 * i)


class Queue:
    def __init__(self, client: "Client", qid: int, ring: Mem, ptrs: Mem, doorbell: int, unit: int):
        self.client, self.qid, self.ring, self.ptrs, self.doorbell, self.unit = client, qid, ring, ptrs, doorbell, unit
        self.put = 0  # bytes written, unwrapped

    def submit(self, dwords: list[int]) -> None:
        raw = struct.pack(f"<{len(dwords)}I", *dwords)
        for i in range(0, len(raw), 4):  # wrap dword by dword
            ctypes.memmove(self.ring.va + (self.put + i) % self.ring.size, raw[i:i + 4], 4)
        self.put += len(raw)
        self.ptrs.u64(1).value = self.put // self.unit  # the 64-bit write pointer in memory...
        self.client.hdp_flush()  # ...CPU stores to VRAM (code, data) out of the HDP (facts 6.4)...
        ctypes.c_uint64.from_address(self.doorbell).value = self.put // self.unit  # ...then a plain doorbell store


class Client:
    def __init__(self, os_, gpu_index: int = 0, *, hdp_flush: bool = False):
        """`hdp_flush`: flush the HDP (MMIO-remap page) before every doorbell, as a correct runtime does after CPU
        stores to VRAM (facts 6.4). Off by default: tests of the HDP itself allocate that page and flush by hand."""
        self.os = os_
        self.kfd = os_.open("/dev/kfd")
        ver = Version()
        os_.ioctl(self.kfd, GET_VERSION, ver)
        self.version = (ver.major, ver.minor)
        nodes = sorted((n for n in os_.listdir(TOPOLOGY) if int(os_.read_text(f"{TOPOLOGY}/{n}/gpu_id"))), key=int)
        node = nodes[gpu_index]
        self.gpu_id = int(os_.read_text(f"{TOPOLOGY}/{node}/gpu_id"))
        self.props = {k: int(v) for k, v in (line.split() for line in
                                             os_.read_text(f"{TOPOLOGY}/{node}/properties").splitlines() if line)}
        self.gfx = self.props["gfx_target_version"]
        self.drm = os_.open(f"/dev/dri/renderD{self.props['drm_render_minor']}")
        os_.ioctl(self.kfd, ACQUIRE_VM, AcquireVm(self.drm, self.gpu_id))
        self.doorbells = None
        self.event_page = self.alloc(0x8000, GTT | COHERENT | UNCACHED)
        sig = CreateEvent(event_page_offset=self.event_page.handle, event_type=EVENT_SIGNAL, auto_reset=1)
        os_.ioctl(self.kfd, CREATE_EVENT, sig)
        self.event_id = sig.event_id
        mem = CreateEvent(event_type=EVENT_MEMORY, auto_reset=1)
        os_.ioctl(self.kfd, CREATE_EVENT, mem)
        self.memory_event = mem.event_id
        self.queues: list[Queue] = []
        self.hdp_page = self._mmio_remap_page() if hdp_flush else None

    def _mmio_remap_page(self) -> int:
        """The MMIO-remap page (facts 1.5, 6.4): allocated with MMIO_REMAP, mapped from /dev/kfd at its offset."""
        va = self.os.mmap(0, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)
        a = Alloc(va_addr=va, size=PAGE, gpu_id=self.gpu_id, flags=MMIO_REMAP | WRITABLE)
        self.os.ioctl(self.kfd, ALLOC_MEMORY, a)
        ids = (ctypes.c_uint32 * 1)(self.gpu_id)
        self.os.ioctl(self.kfd, MAP_MEMORY, MapToGpu(handle=a.handle, device_ids_array_ptr=ctypes.addressof(ids),
                                                     n_devices=1))
        return self.os.mmap(0, PAGE, PROT_RW, MAP_SHARED, self.kfd, a.mmap_offset)

    def hdp_flush(self) -> None:
        """A 32-bit 0 at offset 0 (HDP_MEM_FLUSH_CNTL): the GPU sees what the CPU stored into VRAM."""
        if self.hdp_page is not None:
            ctypes.c_uint32.from_address(self.hdp_page).value = 0

    # memory: reserve the VA, allocate at it, map it for the GPU, then for the CPU at the same address
    def alloc(self, size: int, flags: int) -> Mem:
        size = (size + PAGE - 1) // PAGE * PAGE
        va = self.os.mmap(0, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)
        a = Alloc(va_addr=va, size=size, gpu_id=self.gpu_id, flags=flags | WRITABLE | EXECUTABLE | PUBLIC)
        self.os.ioctl(self.kfd, ALLOC_MEMORY, a)
        ids = (ctypes.c_uint32 * 1)(self.gpu_id)
        m = MapToGpu(handle=a.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1)
        self.os.ioctl(self.kfd, MAP_MEMORY, m)
        assert m.n_success == 1
        self.os.mmap(va, size, PROT_RW, MAP_SHARED | MAP_FIXED, self.drm, a.mmap_offset)
        return Mem(va, size, a.handle)

    def _cwsr_sizes(self) -> tuple[int, int, int]:
        """(ctl_stack_size, cwsr_size, CWSR BO size) from the node properties, as kfd_queue.c computes them."""
        p, gfx = self.props, self.gfx
        xcc = p.get("num_xcc", 1) or 1
        cus = p["simd_count"] // p["simd_per_cu"] // xcc
        waves = cus * 32 if gfx >= 100100 else min(cus * 40, p["array_count"] // p["simd_arrays_per_engine"] * 512)
        vgpr = 0x80000 if gfx in (90010, 90402, 90500) else 0x60000 if gfx in (110000, 110001, 120000, 120001) \
            else 0x40000
        align = lambda n, a=PAGE: (n + a - 1) // a * a
        wg_data = align(cus * (vgpr + 0x4000 + 0x10000 + 0x1000))
        ctl = align(40 + waves * (12 if gfx >= 100100 else 8) + 8)
        debug = align(waves * 32, 64)
        return ctl, ctl + wg_data, align((ctl + wg_data + debug) * xcc)

    def _queue(self, qtype: int, unit: int, ring_size: int = 0x4000) -> Queue:
        ring, ptrs = self.alloc(ring_size, GTT | COHERENT | UNCACHED), self.alloc(PAGE, GTT | COHERENT | UNCACHED)
        args = CreateQueue(ring_base_address=ring.va, write_pointer_address=ptrs.va + 8, read_pointer_address=ptrs.va,
                           ring_size=ring_size, gpu_id=self.gpu_id, queue_type=qtype, queue_percentage=100,
                           queue_priority=7)
        if qtype == QUEUE_COMPUTE:
            ctl, cwsr, cwsr_bo = self._cwsr_sizes()
            eop, save = self.alloc(PAGE, VRAM), self.alloc(cwsr_bo, VRAM)
            args.eop_buffer_address, args.eop_buffer_size = eop.va, PAGE
            args.ctx_save_restore_address, args.ctx_save_restore_size, args.ctl_stack_size = save.va, cwsr, ctl
        self.os.ioctl(self.kfd, CREATE_QUEUE, args)
        if self.doorbells is None:  # the 8 KiB doorbell slice, mapped once
            self.doorbells = self.os.mmap(0, 0x2000, PROT_RW, MAP_SHARED, self.kfd, args.doorbell_offset & ~0x1FFF)
        q = Queue(self, args.queue_id, ring, ptrs, self.doorbells + (args.doorbell_offset & 0x1FFF), unit)
        self.queues.append(q)
        return q

    def compute_queue(self) -> Queue:
        return self._queue(QUEUE_COMPUTE, 4)

    def sdma_queue(self) -> Queue:
        return self._queue(QUEUE_SDMA, 1)

    def slot(self) -> int:
        return self.event_page.va + 8 * self.event_id

    def signal_packets(self, q: Queue, addr: int, value: int) -> list[int]:
        """Write `value` to `addr`, then signal the completion event (its slot, and an interrupt naming it)."""
        if q.unit == 1:
            return sdma_fence(addr, value) + sdma_fence(self.slot(), self.event_id) + sdma_trap(self.event_id)
        gfx11 = self.gfx >= 110000
        return pm4_release_mem(addr, value, gfx11=gfx11) + pm4_release_mem(self.slot(), self.event_id, self.event_id,
                                                                           True, gfx11=gfx11)

    def dispatch_packets(self, code: Mem, buf: Mem) -> list[int]:
        """PM4 for one workgroup of 64 lanes running the kernel at `code` with buf's address in s[0:1]."""
        gfx11 = self.gfx >= 110000
        rsrc1 = 0xF0 << 12 | (0 if gfx11 else 1 << 6)  # FLOAT_MODE: round to nearest, denormals kept; few VGPRs
        rsrc2 = 2 << 1  # USER_SGPR = 2
        return (pm4_set_sh(0x2E0C, [(code.va >> 8) & 0xFFFFFFFF, code.va >> 40])
                + pm4_set_sh(0x2E12, [rsrc1, rsrc2])
                + pm4_set_sh(0x2E40, [buf.va & 0xFFFFFFFF, buf.va >> 32])
                + pm4_set_sh(0x2E07, [64, 1, 1])
                + pm4_set_sh(0x2E18, [0])  # COMPUTE_TMPRING_SIZE: no scratch
                + pm4(0x15, [1, 1, 1, 1 | 1 << 2]))  # DISPATCH_DIRECT 1x1x1, COMPUTE_SHADER_EN | FORCE_START_AT_000

    def load_kernel(self) -> Mem:
        words = KERNELS["gfx11" if self.gfx >= 110000 else "gfx9"]
        code = self.alloc(PAGE, VRAM)
        ctypes.memmove(code.va, struct.pack(f"<{len(words)}I", *words), 4 * len(words))
        return code

    def wait_events(self, timeout_ms: int) -> int:
        data = (EventData * 2)()
        data[0].event_id, data[1].event_id = self.event_id, self.memory_event
        args = WaitEvents(events_ptr=ctypes.addressof(data), num_events=2, timeout=timeout_ms)
        self.os.ioctl(self.kfd, WAIT_EVENTS, args)
        return args.wait_result

    def wait(self, addr: int, value: int, timeout_s: float = 10.0, spin_s: float = 0.002) -> None:
        """Spin on memory for `spin_s`, then sleep in WAIT_EVENTS slices of at most 100 ms, until
        `*addr >= value` or `timeout_s` elapsed (ClientTimeout)."""
        word = ctypes.c_uint32.from_address(addr)
        start = time.monotonic()
        while time.monotonic() - start < spin_s:
            if word.value >= value:
                return
        while word.value < value:
            left = timeout_s - (time.monotonic() - start)
            if left <= 0:
                raise ClientTimeout(f"0x{addr:x} is {word.value}, not >= {value}, after {timeout_s} s")
            self.wait_events(max(1, min(100, int(left * 1000))))

    def close(self) -> None:
        for q in self.queues:
            self.os.ioctl(self.kfd, DESTROY_QUEUE, DestroyQueue(q.qid))
        self.os.close(self.drm)
        self.os.close(self.kfd)


class LinuxOS:
    """The same calls on a real machine (libc through ctypes), for running this client on hardware."""

    def __init__(self):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.mmap.restype = ctypes.c_void_p
        self.libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                   ctypes.c_long]
        self.libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]

    def open(self, path: str) -> int:
        return os.open(path, os.O_RDWR | os.O_CLOEXEC)

    def close(self, fd: int) -> None:
        os.close(fd)

    def ioctl(self, fd: int, request: int, arg) -> None:
        if self.libc.ioctl(fd, request, ctypes.addressof(arg)) < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))

    def mmap(self, addr: int, length: int, prot: int, flags: int, fd: int = -1, offset: int = 0) -> int:
        va = self.libc.mmap(addr or None, length, prot, flags, fd, offset)
        if va in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        return va

    def munmap(self, addr: int, length: int) -> None:
        self.libc.munmap(ctypes.c_void_p(addr), ctypes.c_size_t(length))

    def read_text(self, path: str) -> str:
        with open(path) as f:
            return f.read()

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)
