"""The process and its devices (kfd_process.c), and the ioctl table (kfd_chardev.c).

`KfdDriver` is amdkfd for one emulated process. It keeps what belongs to the process (runtime state, XNACK
mode) and to each of its devices (`ProcessDevice`, the kernel's kfd_process_device: VM binding, scratch,
trap handler, cache policy), answers the process-setup ioctls, and assembles the ioctl table from its
parts, each of which owns its own state: `memory` (BOs, mappings, apertures), `queues` (user queues and
doorbells), `events` (events, interrupts, waits). `ioctl()` copies the argument in and out as kfd_ioctl
does and dispatches by command number; a failing command raises OSError(errno) and leaves state as it was.
"""
from __future__ import annotations

import ctypes
import dataclasses
import errno
import functools
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from .. import kfd_uapi as k
from ..errors import BlockedQueue
from ..gpu import PROGRESS_WORK, EmulatedGPU
from .events import ProcessEvents
from .memory import ProcessMemory
from .queues import ProcessQueues
from .svm import ProcessSvm
from .uaccess import kmalloc_check, read_user, write_user

# amdgpu_amdkfd_get_tile_config: ARRAY_SIZE of adev->gfx.config.tile_mode_array and macrotile_mode_array
TILE_CONFIGS, MACRO_TILE_CONFIGS = 32, 16

if TYPE_CHECKING:
    from .system import EmulatedSystem

Handler = Callable[[ctypes.Structure, k.Ioctl], None]


@dataclass(eq=False)
class OpenFile:
    """An open /dev/kfd or render node: what ACQUIRE_VM and mmap look at."""

    kind: str  # "kfd" or "render"
    gpu: int | None = None  # GPU index of a render node


class ProcessDevice:
    """Per-GPU process state (the kernel's kfd_process_device) and the device's facts."""

    def __init__(self, index: int, gpu: EmulatedGPU, gpu_id: int, props: dict, sizes: k.QueueBufferSizes):
        self.index, self.gpu, self.gpu_id, self.props, self.sizes = index, gpu, gpu_id, props, sizes
        self.label = gpu.label  # "GPU 0 (gpu_id 1829)"
        self.minor = props["drm_render_minor"]
        self.drm_file: OpenFile | None = None  # the render node whose VM this process uses (ACQUIRE_VM)
        self.scratch_va = self.tba = self.tma = 0
        self.policy = (0, 0, 0)


class KfdDriver:
    """amdkfd for one emulated process: its devices, its parts, and the ioctl table they make up."""

    def __init__(self, system: "EmulatedSystem", devices: list[ProcessDevice]):
        self.system = system
        self.devices = devices
        self.runtime_state = k.DEBUG_RUNTIME_STATE_DISABLED
        self.runtime_r_debug = 0
        self.xnack = 0
        self.memory = ProcessMemory(self, system.window, system.vram_size)
        self.queues = ProcessQueues(self)
        self.events = ProcessEvents(self)
        self.svm = ProcessSvm(self)
        by_name: dict[str, Handler] = {}
        for part in (self, self.memory, self.queues, self.events, self.svm):
            for name, handler in part.ioctls().items():
                if name not in k.IOCTLS or name in by_name:
                    raise ValueError(f"ioctl table: {name} is unknown or handled twice")
                by_name[name] = handler
        self.handlers: dict[int, Handler] = {  # command nr -> handler
            io.nr: self._retired if io.retired else by_name.get(io.name, self._not_emulated)
            for io in k.IOCTLS.values()}

    def ioctls(self) -> dict[str, Handler]:
        return {"GET_VERSION": self.get_version, "GET_CLOCK_COUNTERS": self.get_clock_counters,
                "GET_TILE_CONFIG": self.get_tile_config, "ACQUIRE_VM": self.acquire_vm,
                "RUNTIME_ENABLE": self.runtime_enable, "SET_XNACK_MODE": self.set_xnack_mode,
                "SET_MEMORY_POLICY": self.set_memory_policy, "SET_SCRATCH_BACKING_VA": self.set_scratch_backing_va,
                "SET_TRAP_HANDLER": self.set_trap_handler, "SMI_EVENTS": self.smi_events,
                "EXPORT_DMABUF": self.export_dmabuf, "IMPORT_DMABUF": self.import_dmabuf,
                "GET_DMABUF_INFO": self.get_dmabuf_info, "DBG_TRAP": self.dbg_trap}

    # -- dispatch (kfd_chardev.c kfd_ioctl) --------------------------------------------------------

    def ioctl(self, request: int, arg) -> None:
        _dir, _type, nr, usize = _decode(request)
        io = k.IOCTLS_BY_NR.get(nr)
        if io is None or not k.AMDKFD_COMMAND_START <= nr < k.AMDKFD_COMMAND_END:
            raise OSError(errno.ENOTTY, f"ioctl 0x{request:08x}: no KFD command nr 0x{nr:02x}")
        if io.name in CHECKPOINT_RESTORE:  # kfd_ioctl: KFD_IOC_FLAG_CHECKPOINT_RESTORE, before the copy-in
            raise OSError(errno.EACCES, f"{io.name}: the emulated process has neither CAP_CHECKPOINT_RESTORE nor "
                                        f"CAP_SYS_ADMIN (only the CRIU plugin's checkpoint/restore may call it)")
        addr, avail = _user_buffer(arg)
        # The kernel uses its own direction and copies the user's _IOC_SIZE bytes, zero-filling up to its
        # own struct size; a user object shorter than that size would be read/written past its end.
        if avail is not None and usize > avail:
            raise OSError(errno.EFAULT, f"{io.name}: request says {usize} bytes but the argument object has "
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
        finally:
            if self.system.thread is not None:  # queues or events may have changed: the GPU thread looks
                self.system.thread.kick()
        if io.dir & k.IOC_READ and usize:  # copied out even when the handler failed, as the kernel does
            out = bytes(kdata[:usize])
            if avail is not None:
                ctypes.memmove(addr, out, usize)
            else:
                write_user(addr, out)
        if error is not None:
            raise error

    def _retired(self, args, io: k.Ioctl) -> None:
        raise OSError(errno.EPERM, f"{io.name}: the old debugger API is retired (kfd_chardev.c returns -EPERM)")

    def _not_emulated(self, args, io: k.Ioctl) -> None:
        raise OSError(errno.EOPNOTSUPP, f"{io.name} is not emulated by hcqsim")

    # -- lookups (the parts use them) --------------------------------------------------------------

    def device_by_id(self, gpu_id: int) -> ProcessDevice | None:
        return next((d for d in self.devices if d.gpu_id == gpu_id), None)

    def device(self, gpu_id: int, name: str) -> ProcessDevice:
        """The device `gpu_id` names, or EINVAL as kfd_process_device_data_by_id's callers return."""
        dev = self.device_by_id(gpu_id)
        if dev is None:
            raise OSError(errno.EINVAL, f"{name}: no GPU with gpu_id {gpu_id} (see topology nodes/*/gpu_id)")
        return dev

    def bound(self, dev: ProcessDevice, name: str, err: int = errno.ENODEV) -> None:
        """kfd_bind_process_to_device: needs ACQUIRE_VM first (-ENODEV; callers that override use ESRCH)."""
        if dev.drm_file is None:
            raise OSError(err, f"{name}: {dev.label} has no VM yet; ACQUIRE_VM with its render node first")

    # -- simple queries ----------------------------------------------------------------------------

    def get_version(self, args, io: k.Ioctl) -> None:
        args.major_version, args.minor_version = k.KFD_IOCTL_MAJOR_VERSION, k.KFD_IOCTL_MINOR_VERSION

    def get_clock_counters(self, args, io: k.Ioctl) -> None:
        dev = self.device_by_id(args.gpu_id)
        args.gpu_clock_counter = dev.gpu.clock if dev else 0  # 0 for a node without a GPU
        args.cpu_clock_counter = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
        args.system_clock_counter = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        args.system_clock_freq = 1_000_000_000

    def get_tile_config(self, args, io: k.Ioctl) -> None:
        """kfd_ioctl_get_tile_config: amdgpu_amdkfd_get_tile_config reports its two tables at their array sizes
        (32 and 16 entries; all zero from gfx9 on, as are num_banks/num_ranks), each copied out up to the count the
        caller gave; a table that cannot be copied zeroes its count and is -EFAULT."""
        self.device(args.gpu_id, io.name)
        args.gb_addr_config = args.num_banks = args.num_ranks = 0
        for count, ptr, entries in (("num_tile_configs", "tile_config_ptr", TILE_CONFIGS),
                                    ("num_macro_tile_configs", "macro_tile_config_ptr", MACRO_TILE_CONFIGS)):
            n = min(getattr(args, count), entries)
            setattr(args, count, n)
            if n:
                try:
                    write_user(getattr(args, ptr), bytes(4 * n))
                except OSError:
                    setattr(args, count, 0)
                    raise

    # -- ioctls hcqsim does not emulate: their argument checks still answer as Linux does ----------

    def smi_events(self, args, io: k.Ioctl) -> None:
        self.device(args.gpuid, io.name)  # kfd_ioctl_smi_events: no pdd -> -EINVAL
        self._not_emulated(args, io)

    def export_dmabuf(self, args, io: k.Ioctl) -> None:
        dev = self.device(args.handle >> 32, io.name)  # kfd_ioctl_export_dmabuf: no device / pdd -> -EINVAL
        if self.memory.bo_of(dev, args.handle) is None:
            raise OSError(errno.EINVAL, f"{io.name}: no BO with handle 0x{args.handle:x}")
        self._not_emulated(args, io)

    def import_dmabuf(self, args, io: k.Ioctl) -> None:
        self.bound(self.device(args.gpu_id, io.name), io.name)  # kfd_ioctl_import_dmabuf: -EINVAL, then bind
        self._not_emulated(args, io)

    def get_dmabuf_info(self, args, io: k.Ioctl) -> None:
        """kfd_ioctl_get_dmabuf_info: the metadata buffer is kzalloc'd first, then amdgpu_amdkfd_get_dmabuf_info's
        dma_buf_get(fd) answers -EBADF for a closed fd and -EINVAL for a file that is no dma-buf, and it refuses
        dma-bufs not exported by amdgpu (-EINVAL). hcqsim's amdgpu exports none (EXPORT_DMABUF is not emulated), so
        every open fd is -EINVAL: the ioctl is complete for this machine."""
        if args.metadata_ptr:
            kmalloc_check(args.metadata_size, io.name)
        if not self._fd_open(args.dmabuf_fd):
            raise OSError(errno.EBADF, f"{io.name}: dmabuf_fd {args.dmabuf_fd} is not open")
        raise OSError(errno.EINVAL, f"{io.name}: fd {args.dmabuf_fd} is not a dma-buf exported by amdgpu (hcqsim "
                                    f"exports none)")

    def dbg_trap(self, args, io: k.Ioctl) -> None:
        """kfd_ioctl_set_debug_trap, for a process nobody debugs: only this process has a KFD process here (another
        pid, existing or not: -ESRCH); any op but ENABLE needs debugging enabled first (-EINVAL); ENABLE's
        kfd_dbg_trap_enable takes the event file dbg_fd (-EBADF if it is not open). Enabling the debugger itself is
        not emulated (-EOPNOTSUPP)."""
        if args.pid != os.getpid():
            raise OSError(errno.ESRCH, f"{io.name}: no KFD process with pid {args.pid} (only this process, "
                                       f"pid {os.getpid()}, has one)")
        if args.op != k.KFD_IOC_DBG_TRAP_ENABLE:
            raise OSError(errno.EINVAL, f"{io.name}: op {args.op} needs debugging enabled (op ENABLE) first")
        if not self._fd_open(args.enable.dbg_fd):
            raise OSError(errno.EBADF, f"{io.name}: dbg_fd {args.enable.dbg_fd} is not open")
        self._not_emulated(args, io)

    def _fd_open(self, fd: int) -> bool:
        """fget(fd) succeeds: an emulated device file, or a real file of this process. `fd` comes from a u32 field
        that the kernel passes as an int."""
        fd = fd - (1 << 32) if fd >= 1 << 31 else fd
        if fd < 0:
            return False
        if fd in self.system.os.files:
            return True
        try:
            os.fstat(fd)
        except OSError:
            return False
        return True

    # -- process setup -----------------------------------------------------------------------------

    def acquire_vm(self, args, io: k.Ioctl) -> None:
        f = self.system.os.files.get(args.drm_fd)
        if f is None:
            raise OSError(errno.EINVAL, f"{io.name}: drm_fd {args.drm_fd} is not an open file")
        dev = self.device(args.gpu_id, io.name)
        if dev.drm_file is not None:
            if dev.drm_file is not f:
                raise OSError(errno.EBUSY, f"{io.name}: {dev.label} already has a VM from another file")
            return
        if f.kind != "render" or f.gpu != dev.index:
            raise OSError(errno.EINVAL, f"{io.name}: fd {args.drm_fd} is not /dev/dri/renderD{dev.minor} "
                                        f"(the render node of {dev.label})")
        dev.drm_file = f

    def runtime_enable(self, args, io: k.Ioctl) -> None:
        if not args.mode_mask & k.KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK:
            self.runtime_state = k.DEBUG_RUNTIME_STATE_DISABLED  # runtime_disable() always succeeds
            return
        if self.runtime_state != k.DEBUG_RUNTIME_STATE_DISABLED:
            raise OSError(errno.EBUSY, f"{io.name}: runtime already enabled")
        if self.queues.any_active():
            raise OSError(errno.EEXIST, f"{io.name}: the process already has user queues")
        self.runtime_state, self.runtime_r_debug = k.DEBUG_RUNTIME_STATE_ENABLED, args.r_debug

    def set_xnack_mode(self, args, io: k.Ioctl) -> None:
        want = args.xnack_enabled
        if want < 0:
            args.xnack_enabled = self.xnack
            return
        if self.queues.records:
            raise OSError(errno.EBUSY, f"{io.name}: cannot change XNACK mode while the process has queues")
        if want == self.xnack:
            return
        if want and any(d.gpu.target.gfx_target_version not in (90010, 90402) for d in self.devices):
            raise OSError(errno.EPERM, f"{io.name}: XNACK cannot be enabled on every GPU of this process "
                                       f"(only gfx90a/gfx942 support per-process XNACK)")
        self.xnack = want

    def set_memory_policy(self, args, io: k.Ioctl) -> None:
        for name in ("default_policy", "alternate_policy"):
            if getattr(args, name) not in (k.KFD_IOC_CACHE_POLICY_COHERENT, k.KFD_IOC_CACHE_POLICY_NONCOHERENT):
                raise OSError(errno.EINVAL, f"{io.name}: {name} {getattr(args, name)} is not 0 (coherent) "
                                            f"or 1 (noncoherent)")
        dev = self.device(args.gpu_id, io.name)
        self.bound(dev, io.name, errno.ESRCH)
        dev.policy = (args.default_policy, args.alternate_policy, args.misc_process_flag)

    def set_scratch_backing_va(self, args, io: k.Ioctl) -> None:
        dev = self.device(args.gpu_id, io.name)
        self.bound(dev, io.name)
        dev.scratch_va = args.va_addr

    def set_trap_handler(self, args, io: k.Ioctl) -> None:
        dev = self.device(args.gpu_id, io.name)
        self.bound(dev, io.name, errno.ESRCH)
        dev.tba, dev.tma = args.tba_addr, args.tma_addr

    # -- progress ----------------------------------------------------------------------------------

    def blocked(self) -> list[BlockedQueue]:
        hung = [BlockedQueue(r.queue.name, "(hung: fault injection)", None, "progress (the queue is hung)", None,
                             gpu=r.device.label) for r in self.queues.hung()]
        return [b for d in self.devices for b in d.gpu.blocked()] + hung

    def before_gpus_run(self) -> None:
        """What the kernel would have done by the time the GPUs look at memory: USERPTR BOs whose host pages
        went away are evicted (MMU notifier), armed fault injections take effect."""
        self.memory.revalidate_userptrs()
        self.svm.revalidate()
        inject = getattr(self.system, "inject", None)
        if inject is not None:
            inject.apply_armed()

    def spinning(self) -> list:
        return [w for d in self.devices for w in d.gpu.spinning()]

    def progress(self, done: Callable[[], bool] | None = None, work_limit: int | None = None) -> None:
        """A progress point: deliver pending doorbell stores, run every GPU until quiet, `done`, nothing but
        spinning waves left (`settled`), or about `work_limit` packets plus issue steps (default PROGRESS_WORK):
        the host always gets control back."""
        limit = PROGRESS_WORK if work_limit is None else work_limit
        work = 0
        # which GPU steps first is the policy's choice where it has one (`device_order(n) -> permutation`)
        order = getattr(self.devices[0].gpu.policy, "device_order", None) if len(self.devices) > 1 else None
        while done is None or not done():
            executed = self.queues.poll_doorbells()
            devices = self.devices if order is None else [self.devices[i] for i in order(len(self.devices))]
            for d in devices:
                executed += d.gpu.step(max(1, limit - work))
            work += executed
            if executed == 0 or work >= limit or self.settled():
                return

    def settled(self) -> bool:
        """Every GPU is quiet or has nothing but spinning waves left."""
        return all(d.gpu.settled for d in self.devices)

    def close(self) -> None:
        self.events.close()
        self.queues.close()
        self.svm.close()
        self.memory.close()


# ioctls kfd_ioctl lets through only with CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN (KFD_IOC_FLAG_CHECKPOINT_RESTORE):
# the emulated process is an ordinary one without either, as every runtime's process is (CRIU's plugin has them)
CHECKPOINT_RESTORE = frozenset({"CRIU_OP"})

_decode = functools.lru_cache(maxsize=256)(k.ioc_decode)  # a handful of requests, decoded at every call


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
