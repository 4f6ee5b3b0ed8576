"""What the emulated KFD answers to bad requests, against what Linux answers: one table, each row citing the kernel
function (drivers/gpu/drm/amd/amdkfd, read in gregkh/linux's stable tree for this table) whose check it exercises.

Each row: (name, errno Linux returns, the kernel function and condition, call). A call gets a fresh `Runtime`
(tests/test_kfd_driver.py: the boundary-only runtime, VMs acquired unless the row says `unbound`) on a fresh
one-GPU system, and must fail with that errno. `python3 -m tests.audit --only errnos` prints how many rows equal
Linux; `tests/test_kfd_kernel_exact.py` requires all of them.

Rows follow current kernels where they changed: an nr outside the table is -ENOTTY since 57af162bfc8c ("drm/amdkfd:
return -ENOTTY for unsupported IOCTLs"; kfd_ioctl starts from retcode = -EINVAL, and both `nr >=
AMDKFD_CORE_IOCTL_COUNT` and an nr outside [AMDKFD_COMMAND_START, AMDKFD_COMMAND_END) now set retcode = -ENOTTY
before `goto err_i1`: re-read in gregkh/linux kfd_chardev.c at 01ffa1ba69d9; older kernels answer -EINVAL), an
event page below 32 KiB is -EINVAL since 8a70a26c9f34 ("drm/amdkfd: Fix out-of-bounds write in
kfd_event_page_set()"), both in the stable kernels. The render-node rows follow drm_ioctl.c drm_ioctl (an nr past
DRM_CORE_IOCTL_COUNT or past the driver's table is `goto err_i1` with retcode -EINVAL) and amdgpu_kms.c.

The emulated process is an ordinary one: no CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN (so CRIU_OP is -EACCES before
anything), nobody debugs it and no other process has a KFD process (DBG_TRAP answers as kfd_ioctl_set_debug_trap
does for such a process; enabling the debugger itself is -EOPNOTSUPP), and its amdgpu exports no dma-buf (so
GET_DMABUF_INFO is -EBADF or -EINVAL). Not covered: checks that need a privileged or debugged process, a second
process or a small-BAR part.
"""
from __future__ import annotations

import ctypes
import errno
import os
from dataclasses import dataclass
from typing import Callable

from hcqsim import kfd_uapi as k

ENOTSUPP = 524  # kernel-internal, leaks to user space from set_queue_properties_from_user
KERNEL_VA = 0xFFFF_8000_0000_0000  # access_ok() is false for it
UNMAPPED = 0x1000  # copy_from_user/copy_to_user fault on it (page 1 is never mapped)
BAD_GPU = 0xDEAD
CLOSED_FD = 1 << 30  # past any RLIMIT_NOFILE: never an open file


@dataclass(frozen=True)
class Row:
    name: str
    errno: int
    kernel: str  # file.c function: the check
    call: Callable  # (rt) -> None, raises OSError
    unbound: bool = False  # the runtime skips ACQUIRE_VM


def _io(name: str, **fields) -> Callable:
    return lambda rt: rt.ioctl(name, **fields)


def _gpu(name: str, **fields) -> Callable:
    """The ioctl with the runtime's real gpu_id in `gpu_id`."""
    return lambda rt: rt.ioctl(name, gpu_id=rt.gpu_id(), **fields)


def _nr(nr: int) -> Callable:
    return lambda rt: rt.os.ioctl(rt.kfd, k.IOWR("K", nr, 8), k.GetVersionArgs())


def _queue(**change) -> Callable:
    def call(rt):
        args, _, _ = rt.compute_args()
        rt.ioctl("CREATE_QUEUE", **dict(args, **change))
    return call


def _with_queue(name: str, **fields) -> Callable:
    """`name` on a live compute queue (fields may name `queue_id`; the real one is used otherwise)."""
    def call(rt):
        q = rt.compute_queue()
        rt.ioctl(name, **dict({"queue_id": q.qid}, **fields))
    return call


def _mem(name: str, **fields) -> Callable:
    """`name` on a fresh GTT BO's handle (`handle` may be replaced by a function of it)."""
    def call(rt):
        from tests.test_kfd_driver import GTT
        m = rt.alloc(4096, GTT)
        ids = (ctypes.c_uint32 * 1)(rt.gpu_id())
        f = {"handle": m.handle, "device_ids_array_ptr": ctypes.addressof(ids), "n_devices": 1}
        f.update({key: (v(m.handle) if callable(v) else v) for key, v in fields.items()})
        rt.ioctl(name, **{key: v for key, v in f.items() if key in dict(k.IOCTLS[name].struct._fields_)})
    return call


def _map_peer(name: str, peer: int) -> Callable:
    def call(rt):
        from tests.test_kfd_driver import GTT
        m = rt.alloc(4096, GTT, map_to=())
        ids = (ctypes.c_uint32 * 1)(peer)
        rt.ioctl(name, handle=m.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1)
    return call


def _event_page(size: int) -> Callable:
    def call(rt):
        from tests.test_kfd_driver import GTT
        m = rt.alloc(size, GTT)
        rt.ioctl("CREATE_EVENT", event_page_offset=m.handle, event_type=k.KFD_IOC_EVENT_SIGNAL, auto_reset=1)
    return call


def _second_event_page(rt) -> None:
    from tests.test_kfd_driver import GTT
    rt.event_page()
    other = rt.alloc(0x8000, GTT)
    rt.ioctl("CREATE_EVENT", event_page_offset=other.handle, event_type=k.KFD_IOC_EVENT_SIGNAL)


def _event_op(name: str, etype: int) -> Callable:
    return lambda rt: rt.ioctl(name, event_id=rt.event(etype))


def _wait(rt, ids, ptr=None) -> None:
    data = (k.EventData * max(len(ids), 1))()
    for i, eid in enumerate(ids):
        data[i].event_id = eid
    rt.ioctl("WAIT_EVENTS", events_ptr=ptr if ptr is not None else ctypes.addressof(data), num_events=len(ids),
             timeout=0)


def _acquire_again(rt) -> None:
    other = rt.os.open(f"/dev/dri/renderD{rt.gpus[0][1]['drm_render_minor']}")
    rt.ioctl("ACQUIRE_VM", drm_fd=other, gpu_id=rt.gpu_id())


def _free_event_page(rt) -> None:
    rt.event_page()
    rt.map(rt.events, [rt.gpu_id()], "UNMAP_MEMORY_FROM_GPU")
    rt.ioctl("FREE_MEMORY_OF_GPU", handle=rt.events.handle)


def _tile(**fields) -> Callable:
    def call(rt):
        buf = (ctypes.c_uint32 * 64)()
        f = dict(gpu_id=rt.gpu_id(), tile_config_ptr=ctypes.addressof(buf), num_tile_configs=32,
                 macro_tile_config_ptr=ctypes.addressof(buf), num_macro_tile_configs=16)
        rt.ioctl("GET_TILE_CONFIG", **dict(f, **fields))
    return call


def _xnack_with_queue(rt) -> None:
    rt.compute_queue()
    rt.ioctl("SET_XNACK_MODE", xnack_enabled=1)


def _freed(name: str, **fields) -> Callable:
    """`name` on the handle of a GTT BO that was freed (its idr slot is gone)."""
    def call(rt):
        from tests.test_kfd_driver import GTT
        m = rt.alloc(4096, GTT)
        rt.free(m)
        ids = (ctypes.c_uint32 * 1)(rt.gpu_id())
        f = {"handle": m.handle, "device_ids_array_ptr": ctypes.addressof(ids), "n_devices": 1}
        f.update(fields)
        rt.ioctl(name, **{key: v for key, v in f.items() if key in dict(k.IOCTLS[name].struct._fields_)})
    return call


def _twice(first: Callable, second: Callable) -> Callable:
    """`first(rt)` -> an id, then `second(rt, id)` twice: the second time fails."""
    def call(rt):
        ident = first(rt)
        second(rt, ident)
        second(rt, ident)
    return call


def _destroyed_queue(name: str, **fields) -> Callable:
    def call(rt):
        q = rt.compute_queue()
        rt.ioctl("DESTROY_QUEUE", queue_id=q.qid)
        rt.ioctl(name, **dict({"queue_id": q.qid}, **fields))
    return call


def _destroyed_event(name: str) -> Callable:
    def call(rt):
        eid = rt.event()
        rt.ioctl("DESTROY_EVENT", event_id=eid)
        rt.ioctl(name, event_id=eid)
    return call


def _svm_range(rt) -> int:
    """A page range registered with SVM (SET_ATTR with no attributes): its start address."""
    va = rt.os.mmap(0, 0x2000, 3, 0x22)  # PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS
    rt.ioctl("SVM", start_addr=va, size=0x2000, op=k.KFD_IOCTL_SVM_OP_SET_ATTR, nattr=0)
    return va


def _alloc_over_svm(userptr: bool) -> Callable:
    def call(rt):
        va = _svm_range(rt)
        if userptr:  # the user pages are the SVM range; the GPU VA is elsewhere
            rt.ioctl("ALLOC_MEMORY_OF_GPU", gpu_id=rt.gpu_id(), va_addr=rt.reserve(0x2000), size=0x2000,
                     mmap_offset=va, flags=k.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | k.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE)
        else:
            rt.ioctl("ALLOC_MEMORY_OF_GPU", gpu_id=rt.gpu_id(), va_addr=va, size=0x2000,
                     flags=k.KFD_IOC_ALLOC_MEM_FLAGS_GTT | k.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE)
    return call


def _kfd_mmap(mtype: int, length: int, gpu: int | None = None) -> Callable:
    """mmap of /dev/kfd at the offset of `mtype` (a KFD_MMAP_TYPE_*) and a gpu_id (None: the runtime's GPU)."""
    def call(rt):
        gpu_id = rt.gpu_id() if gpu is None else gpu
        rt.os.mmap(0, length, 3, 0x01, rt.kfd, k.mmap_offset(mtype, gpu_id))  # MAP_SHARED
    return call


def _drm(request: int, arg) -> Callable:
    return lambda rt: rt.os.ioctl(rt.gpus[0][2], request, arg() if callable(arg) else arg)


def _info(query: int, size: int = 8, pointer: int | None = None, **union) -> Callable:
    """DRM_IOCTL_AMDGPU_INFO `query` on the render node, return_size `size`, into a buffer (or `pointer`)."""
    def call(rt):
        from hcqsim import drm_uapi as d
        out = (ctypes.c_uint8 * max(size, 64))()
        args = d.DrmAmdgpuInfo(return_pointer=ctypes.addressof(out) if pointer is None else pointer,
                               return_size=size, query=query)
        for member, fields in union.items():
            for name, value in fields.items():
                setattr(getattr(args, member), name, value)
        rt.os.ioctl(rt.gpus[0][2], d.DRM_IOCTL_AMDGPU_INFO, args)
    return call


def _drm_version_name_at(pointer: int) -> Callable:
    def call(rt):
        from hcqsim import drm_uapi as d
        rt.os.ioctl(rt.gpus[0][2], d.DRM_IOCTL_VERSION, d.DrmVersion(name_len=16, name=pointer))
    return call


def _ioctl_at(name: str, address: int) -> Callable:
    return lambda rt: rt.os.ioctl(rt.kfd, getattr(k, f"AMDKFD_IOC_{name}"), address)


def _dbg_trap(op: int, pid: int | None = None, dbg_fd: int = 0) -> Callable:
    """DBG_TRAP `op` on `pid` (None: this process), ENABLE's event file `dbg_fd`."""
    def call(rt):
        args = k.DbgTrapArgs(pid=os.getpid() if pid is None else pid, op=op)
        args.enable.dbg_fd = dbg_fd
        rt.os.ioctl(rt.kfd, k.AMDKFD_IOC_DBG_TRAP, args)
    return call


C, E, Q, P = "kfd_chardev.c", "kfd_events.c", "kfd_process_queue_manager.c", "kfd_process.c"
SQ = f"{C} set_queue_properties_from_user"
ROWS: tuple[Row, ...] = (
    # dispatch: kfd_ioctl
    *(Row(f"command nr 0x{nr:02x} outside the table", errno.ENOTTY,
          f"{C} kfd_ioctl: nr >= AMDKFD_CORE_IOCTL_COUNT or outside [AMDKFD_COMMAND_START, AMDKFD_COMMAND_END)",
          _nr(nr)) for nr in (0x00, k.AMDKFD_COMMAND_END, 0x40, 0xFF)),
    Row("argument at an unmapped address", errno.EFAULT, f"{C} kfd_ioctl: copy_from_user of the argument",
        lambda rt: rt.os.ioctl(rt.kfd, k.AMDKFD_IOC_GET_CLOCK_COUNTERS, UNMAPPED)),
    *(Row(f"{n} (retired debugger API)", errno.EPERM, f"{C} kfd_ioctl_dbg_*: return -EPERM", _io(n))
      for n in ("DBG_REGISTER_DEPRECATED", "DBG_UNREGISTER_DEPRECATED", "DBG_ADDRESS_WATCH_DEPRECATED",
                "DBG_WAVE_CONTROL_DEPRECATED")),
    # queues
    Row("CREATE_QUEUE queue_percentage 101", errno.EINVAL, f"{SQ}: percentage > KFD_MAX_QUEUE_PERCENTAGE",
        _queue(queue_percentage=101)),
    Row("CREATE_QUEUE queue_priority 16", errno.EINVAL, f"{SQ}: priority > KFD_MAX_QUEUE_PRIORITY",
        _queue(queue_priority=16)),
    Row("CREATE_QUEUE ring base a kernel address", errno.EFAULT, f"{SQ}: !access_ok(ring_base_address)",
        _queue(ring_base_address=KERNEL_VA)),
    Row("CREATE_QUEUE ring_size not a power of two", errno.EINVAL, f"{SQ}: !is_power_of_2(ring_size)",
        _queue(ring_size=0x1800)),
    Row("CREATE_QUEUE read pointer a kernel address", errno.EFAULT, f"{SQ}: !access_ok(read_pointer_address)",
        _queue(read_pointer_address=KERNEL_VA)),
    Row("CREATE_QUEUE write pointer a kernel address", errno.EFAULT, f"{SQ}: !access_ok(write_pointer_address)",
        _queue(write_pointer_address=KERNEL_VA)),
    Row("CREATE_QUEUE EOP buffer a kernel address", errno.EFAULT, f"{SQ}: !access_ok(eop_buffer_address)",
        _queue(eop_buffer_address=KERNEL_VA)),
    Row("CREATE_QUEUE CWSR area a kernel address", errno.EFAULT, f"{SQ}: !access_ok(ctx_save_restore_address)",
        _queue(ctx_save_restore_address=KERNEL_VA)),
    Row("CREATE_QUEUE unknown queue_type", ENOTSUPP, f"{SQ}: queue_type not COMPUTE/SDMA/... -> -ENOTSUPP",
        _queue(queue_type=9)),
    Row("CREATE_QUEUE unknown gpu_id", errno.EINVAL, f"{C} kfd_ioctl_create_queue: no pdd for gpu_id",
        _queue(gpu_id=BAD_GPU)),
    Row("CREATE_QUEUE before ACQUIRE_VM", errno.ESRCH, f"{C} kfd_ioctl_create_queue: bind fails -> -ESRCH",
        lambda rt: rt.ioctl("CREATE_QUEUE", gpu_id=rt.gpu_id(), queue_type=k.KFD_IOC_QUEUE_TYPE_SDMA,
                            ring_size=0x1000, queue_percentage=100), unbound=True),
    Row("CREATE_QUEUE SDMA_BY_ENG_ID past the engines", errno.EINVAL,
        f"{C} kfd_ioctl_create_queue: sdma_engine_id > max_sdma_eng_id",
        _queue(queue_type=k.KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID, sdma_engine_id=64, eop_buffer_address=0,
               eop_buffer_size=0, ctx_save_restore_address=0, ctx_save_restore_size=0, ctl_stack_size=0)),
    Row("DESTROY_QUEUE unknown queue", errno.EINVAL, f"{Q} pqm_destroy_queue: no queue with that id",
        _io("DESTROY_QUEUE", queue_id=77)),
    Row("UPDATE_QUEUE queue_percentage 101", errno.EINVAL, f"{C} kfd_ioctl_update_queue: percentage > 100",
        _with_queue("UPDATE_QUEUE", queue_percentage=101, ring_size=0x1000)),
    Row("UPDATE_QUEUE queue_priority 16", errno.EINVAL, f"{C} kfd_ioctl_update_queue: priority > 15",
        _with_queue("UPDATE_QUEUE", queue_priority=16, queue_percentage=100, ring_size=0x1000)),
    Row("UPDATE_QUEUE ring base a kernel address", errno.EFAULT, f"{C} kfd_ioctl_update_queue: !access_ok",
        _with_queue("UPDATE_QUEUE", ring_base_address=KERNEL_VA, queue_percentage=100, ring_size=0x1000)),
    Row("UPDATE_QUEUE ring_size not a power of two", errno.EINVAL, f"{C} kfd_ioctl_update_queue: !is_power_of_2",
        _with_queue("UPDATE_QUEUE", ring_size=0x1800, queue_percentage=100)),
    Row("UPDATE_QUEUE unknown queue", errno.EFAULT, f"{Q} pqm_update_queue_properties: no queue -> -EFAULT",
        _io("UPDATE_QUEUE", queue_id=77, queue_percentage=100, ring_size=0x1000)),
    Row("SET_CU_MASK num_cu_mask not a multiple of 32", errno.EINVAL, f"{C} kfd_ioctl_set_cu_mask: % 32",
        _with_queue("SET_CU_MASK", num_cu_mask=33, cu_mask_ptr=UNMAPPED)),
    Row("SET_CU_MASK num_cu_mask 0", errno.EINVAL, f"{C} kfd_ioctl_set_cu_mask: count == 0",
        _with_queue("SET_CU_MASK", num_cu_mask=0, cu_mask_ptr=UNMAPPED)),
    Row("SET_CU_MASK mask at an unmapped address", errno.EFAULT, f"{C} kfd_ioctl_set_cu_mask: copy_from_user",
        _with_queue("SET_CU_MASK", num_cu_mask=32, cu_mask_ptr=UNMAPPED)),
    # process-wide settings
    Row("SET_MEMORY_POLICY default_policy 2", errno.EINVAL, f"{C} kfd_ioctl_set_memory_policy: not (NON)COHERENT",
        _gpu("SET_MEMORY_POLICY", default_policy=2)),
    Row("SET_MEMORY_POLICY alternate_policy 2", errno.EINVAL, f"{C} kfd_ioctl_set_memory_policy: not (NON)COHERENT",
        _gpu("SET_MEMORY_POLICY", alternate_policy=2)),
    Row("SET_MEMORY_POLICY unknown gpu_id", errno.EINVAL, f"{C} kfd_ioctl_set_memory_policy: no pdd",
        _io("SET_MEMORY_POLICY", gpu_id=BAD_GPU)),
    Row("SET_MEMORY_POLICY before ACQUIRE_VM", errno.ESRCH, f"{C} kfd_ioctl_set_memory_policy: bind -> -ESRCH",
        _gpu("SET_MEMORY_POLICY"), unbound=True),
    Row("SET_TRAP_HANDLER unknown gpu_id", errno.EINVAL, f"{C} kfd_ioctl_set_trap_handler: no pdd",
        _io("SET_TRAP_HANDLER", gpu_id=BAD_GPU)),
    Row("SET_TRAP_HANDLER before ACQUIRE_VM", errno.ESRCH, f"{C} kfd_ioctl_set_trap_handler: bind -> -ESRCH",
        _gpu("SET_TRAP_HANDLER"), unbound=True),
    Row("SET_SCRATCH_BACKING_VA unknown gpu_id", errno.EINVAL, f"{C} kfd_ioctl_set_scratch_backing_va: no pdd",
        _io("SET_SCRATCH_BACKING_VA", gpu_id=BAD_GPU)),
    Row("SET_SCRATCH_BACKING_VA before ACQUIRE_VM", errno.ENODEV,
        f"{C} kfd_ioctl_set_scratch_backing_va: PTR_ERR(kfd_bind_process_to_device) ({P}: no drm_priv -> -ENODEV)",
        _gpu("SET_SCRATCH_BACKING_VA"), unbound=True),
    Row("GET_TILE_CONFIG unknown gpu_id", errno.EINVAL, f"{C} kfd_ioctl_get_tile_config: no pdd",
        _tile(gpu_id=BAD_GPU)),
    Row("GET_TILE_CONFIG tile array at an unmapped address", errno.EFAULT,
        f"{C} kfd_ioctl_get_tile_config: copy_to_user(tile_config_ptr)", _tile(tile_config_ptr=UNMAPPED)),
    Row("GET_TILE_CONFIG macro tile array at an unmapped address", errno.EFAULT,
        f"{C} kfd_ioctl_get_tile_config: copy_to_user(macro_tile_config_ptr)", _tile(macro_tile_config_ptr=UNMAPPED)),
    Row("ACQUIRE_VM fd that is not open", errno.EINVAL, f"{C} kfd_ioctl_acquire_vm: fget fails",
        _gpu("ACQUIRE_VM", drm_fd=9999)),
    Row("ACQUIRE_VM unknown gpu_id", errno.EINVAL, f"{C} kfd_ioctl_acquire_vm: no pdd",
        lambda rt: rt.ioctl("ACQUIRE_VM", drm_fd=rt.gpus[0][2], gpu_id=BAD_GPU)),
    Row("ACQUIRE_VM again with another render-node file", errno.EBUSY,
        f"{C} kfd_ioctl_acquire_vm: pdd->drm_file != drm_file", _acquire_again),
    Row("AVAILABLE_MEMORY unknown gpu_id", errno.EINVAL, f"{C} kfd_ioctl_get_available_memory: no pdd",
        _io("AVAILABLE_MEMORY", gpu_id=BAD_GPU)),
    Row("GET_PROCESS_APERTURES_NEW array at an unmapped address", errno.EFAULT,
        f"{C} kfd_ioctl_get_process_apertures_new: copy_to_user",
        _io("GET_PROCESS_APERTURES_NEW", kfd_process_device_apertures_ptr=UNMAPPED, num_of_nodes=1)),
    Row("GET_PROCESS_APERTURES_NEW 2^32-1 nodes", errno.ENOMEM,
        f"{C} kfd_ioctl_get_process_apertures_new: kcalloc(num_of_nodes) fails",
        _io("GET_PROCESS_APERTURES_NEW", kfd_process_device_apertures_ptr=UNMAPPED, num_of_nodes=0xFFFFFFFF)),
    Row("SMI_EVENTS unknown gpu_id", errno.EINVAL, f"{C} kfd_ioctl_smi_events: no pdd", _io("SMI_EVENTS", gpuid=BAD_GPU)),
    Row("SET_XNACK_MODE with a queue alive", errno.EBUSY, f"{C} kfd_ioctl_set_xnack_mode: user queues exist",
        _xnack_with_queue),
    Row("SVM start not page aligned", errno.EINVAL, f"{C} kfd_ioctl_svm: start_addr & ~PAGE_MASK",
        _io("SVM", start_addr=0x1001, size=0x1000)),
    Row("SVM size 0", errno.EINVAL, f"{C} kfd_ioctl_svm: !size", _io("SVM", start_addr=0x10000, size=0)),
    # memory
    Row("ALLOC_MEMORY_OF_GPU size 0", errno.EINVAL, f"{C} kfd_ioctl_alloc_memory_of_gpu: size == 0",
        _gpu("ALLOC_MEMORY_OF_GPU", size=0, va_addr=0x10000, flags=k.KFD_IOC_ALLOC_MEM_FLAGS_GTT)),
    Row("ALLOC_MEMORY_OF_GPU unknown gpu_id", errno.EINVAL, f"{C} kfd_ioctl_alloc_memory_of_gpu: no pdd",
        _io("ALLOC_MEMORY_OF_GPU", gpu_id=BAD_GPU, size=4096, va_addr=0x10000, flags=k.KFD_IOC_ALLOC_MEM_FLAGS_GTT)),
    Row("ALLOC_MEMORY_OF_GPU before ACQUIRE_VM", errno.ENODEV,
        f"{C} kfd_ioctl_alloc_memory_of_gpu: PTR_ERR(kfd_bind_process_to_device) ({P}: -ENODEV)",
        _gpu("ALLOC_MEMORY_OF_GPU", size=4096, va_addr=0x10000, flags=k.KFD_IOC_ALLOC_MEM_FLAGS_GTT), unbound=True),
    Row("ALLOC_MEMORY_OF_GPU DOORBELL of the wrong size", errno.EINVAL,
        f"{C} kfd_ioctl_alloc_memory_of_gpu: size != kfd_doorbell_process_slice",
        _gpu("ALLOC_MEMORY_OF_GPU", size=4096, va_addr=0x10000, flags=k.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL)),
    Row("ALLOC_MEMORY_OF_GPU MMIO_REMAP of two pages", errno.EINVAL,
        f"{C} kfd_ioctl_alloc_memory_of_gpu: size != PAGE_SIZE",
        _gpu("ALLOC_MEMORY_OF_GPU", size=8192, va_addr=0x10000, flags=k.KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP)),
    Row("FREE_MEMORY_OF_GPU handle of an unknown GPU", errno.EINVAL, f"{C} kfd_ioctl_free_memory_of_gpu: no pdd",
        _io("FREE_MEMORY_OF_GPU", handle=k.make_handle(BAD_GPU, 1))),
    Row("FREE_MEMORY_OF_GPU unknown idr", errno.EINVAL, f"{C} kfd_ioctl_free_memory_of_gpu: translate_handle fails",
        lambda rt: rt.ioctl("FREE_MEMORY_OF_GPU", handle=k.make_handle(rt.gpu_id(), 999))),
    Row("FREE_MEMORY_OF_GPU the event page", errno.EPERM, f"{C} kfd_ioctl_free_memory_of_gpu: signal BO",
        _free_event_page),
    *(r for name in ("MAP_MEMORY_TO_GPU", "UNMAP_MEMORY_FROM_GPU") for r in (
        Row(f"{name} n_devices 0", errno.EINVAL, f"{C} kfd_ioctl_{name.lower()}: !n_devices",
            _mem(name, n_devices=0)),
        Row(f"{name} n_success > n_devices", errno.EINVAL, f"{C} kfd_ioctl_{name.lower()}: n_success > n_devices",
            _mem(name, n_success=2)),
        Row(f"{name} 2^32-1 devices", errno.ENOMEM, f"{C} kfd_ioctl_{name.lower()}: kmalloc_array fails",
            _mem(name, n_devices=0xFFFFFFFF)),
        Row(f"{name} id array at an unmapped address", errno.EFAULT, f"{C} kfd_ioctl_{name.lower()}: copy_from_user",
            _mem(name, device_ids_array_ptr=UNMAPPED)),
        Row(f"{name} handle of an unknown GPU", errno.EINVAL, f"{C} kfd_ioctl_{name.lower()}: no pdd for the handle",
            _mem(name, handle=lambda h: k.make_handle(BAD_GPU, h & 0xFFFFFFFF))),
        Row(f"{name} unknown idr", errno.ENOMEM, f"{C} kfd_ioctl_{name.lower()}: translate_handle fails -> -ENOMEM",
            _mem(name, handle=lambda h: h + 999)),
        Row(f"{name} unknown peer gpu_id", errno.EINVAL, f"{C} kfd_ioctl_{name.lower()}: no peer pdd",
            _map_peer(name, BAD_GPU)),
    )),
    Row("EXPORT_DMABUF handle of an unknown GPU", errno.EINVAL, f"{C} kfd_ioctl_export_dmabuf: kfd_device_by_id",
        _io("EXPORT_DMABUF", handle=k.make_handle(BAD_GPU, 1))),
    Row("EXPORT_DMABUF unknown idr", errno.EINVAL, f"{C} kfd_ioctl_export_dmabuf: translate_handle fails",
        lambda rt: rt.ioctl("EXPORT_DMABUF", handle=k.make_handle(rt.gpu_id(), 999))),
    Row("IMPORT_DMABUF unknown gpu_id", errno.EINVAL, f"{C} kfd_ioctl_import_dmabuf: no pdd",
        _io("IMPORT_DMABUF", gpu_id=BAD_GPU, dmabuf_fd=3)),
    Row("IMPORT_DMABUF before ACQUIRE_VM", errno.ENODEV,
        f"{C} kfd_ioctl_import_dmabuf: PTR_ERR(kfd_bind_process_to_device) ({P}: -ENODEV)",
        _gpu("IMPORT_DMABUF", dmabuf_fd=3), unbound=True),
    # events
    Row("CREATE_EVENT page handle of an unknown GPU", errno.EINVAL, f"{E} kfd_kmap_event_page: no pdd",
        _io("CREATE_EVENT", event_page_offset=k.make_handle(BAD_GPU, 1))),
    Row("CREATE_EVENT page handle that is no BO", errno.EINVAL, f"{E} kfd_kmap_event_page: translate_handle fails",
        lambda rt: rt.ioctl("CREATE_EVENT", event_page_offset=k.make_handle(rt.gpu_id(), 999))),
    Row("CREATE_EVENT second event page", errno.EINVAL, f"{E} kfd_kmap_event_page: p->signal_page already set",
        _second_event_page),
    Row("CREATE_EVENT event page below 32 KiB", errno.EINVAL,
        f"{E} kfd_event_page_set: size < KFD_SIGNAL_EVENT_LIMIT * 8 (8a70a26c9f34)", _event_page(0x1000)),
    Row("DESTROY_EVENT unknown id", errno.EINVAL, f"{E} kfd_event_destroy: no event",
        _io("DESTROY_EVENT", event_id=4000)),
    Row("SET_EVENT unknown id", errno.EINVAL, f"{E} kfd_set_event: no event", _io("SET_EVENT", event_id=4000)),
    Row("SET_EVENT on a MEMORY event", errno.EINVAL, f"{E} kfd_set_event: !event_can_be_cpu_signaled",
        _event_op("SET_EVENT", k.KFD_IOC_EVENT_MEMORY)),
    Row("RESET_EVENT unknown id", errno.EINVAL, f"{E} kfd_reset_event: no event", _io("RESET_EVENT", event_id=4000)),
    Row("RESET_EVENT on a HW_EXCEPTION event", errno.EINVAL, f"{E} kfd_reset_event: !event_can_be_cpu_signaled",
        _event_op("RESET_EVENT", k.KFD_IOC_EVENT_HW_EXCEPTION)),
    Row("WAIT_EVENTS unknown id", errno.EINVAL, f"{E} kfd_wait_on_events: init_event_waiter finds no event",
        lambda rt: _wait(rt, [4000])),
    Row("WAIT_EVENTS array at an unmapped address", errno.EFAULT, f"{E} kfd_wait_on_events: copy_from_user",
        lambda rt: _wait(rt, [1], UNMAPPED)),
    Row("WAIT_EVENTS 2^32-1 events", errno.ENOMEM, f"{E} kfd_wait_on_events: alloc_event_waiters (kcalloc) fails",
        lambda rt: rt.ioctl("WAIT_EVENTS", events_ptr=UNMAPPED, num_events=0xFFFFFFFF, timeout=0)),
    # dispatch: the argument copies of kfd_ioctl for each direction
    Row("GET_VERSION (_IOR) argument at an unmapped address", errno.EFAULT,
        f"{C} kfd_ioctl: copy_to_user of the result", _ioctl_at("GET_VERSION", UNMAPPED)),
    Row("CREATE_QUEUE (_IOWR) argument at an unmapped address", errno.EFAULT,
        f"{C} kfd_ioctl: copy_from_user of the argument", _ioctl_at("CREATE_QUEUE", UNMAPPED)),
    Row("WAIT_EVENTS argument at a kernel address", errno.EFAULT, f"{C} kfd_ioctl: copy_from_user (access_ok)",
        _ioctl_at("WAIT_EVENTS", KERNEL_VA)),
    # queues, by id: what pqm_* answer for a queue that is gone
    Row("DESTROY_QUEUE twice", errno.EINVAL, f"{Q} pqm_destroy_queue: no queue with that id",
        _destroyed_queue("DESTROY_QUEUE")),
    Row("UPDATE_QUEUE a destroyed queue", errno.EFAULT, f"{Q} pqm_update_queue_properties: no queue -> -EFAULT",
        _destroyed_queue("UPDATE_QUEUE", queue_percentage=100, ring_size=0x1000)),
    Row("SET_CU_MASK unknown queue", errno.EFAULT, f"{Q} pqm_update_mqd: no queue -> -EFAULT",
        lambda rt: rt.ioctl("SET_CU_MASK", queue_id=77, num_cu_mask=32,
                            cu_mask_ptr=ctypes.addressof(ctypes.c_uint32(0xFFFFFFFF)))),
    Row("SET_CU_MASK a destroyed queue", errno.EFAULT, f"{Q} pqm_update_mqd: no queue -> -EFAULT",
        _destroyed_queue("SET_CU_MASK", num_cu_mask=32, cu_mask_ptr=ctypes.addressof(ctypes.c_uint32(0xFFFFFFFF)))),
    Row("SET_CU_MASK one CU of a WGP pair (gfx11)", errno.EINVAL,
        f"{Q} pqm_update_mqd: GC >= 10.0 needs CU pairs enabled together",
        _with_queue("SET_CU_MASK", num_cu_mask=32, cu_mask_ptr=ctypes.addressof(ctypes.c_uint32(0x1)))),
    Row("GET_QUEUE_WAVE_STATE unknown queue", errno.EFAULT, f"{Q} pqm_get_wave_state: no queue -> -EFAULT",
        _io("GET_QUEUE_WAVE_STATE", queue_id=77, ctl_stack_address=UNMAPPED)),
    Row("ALLOC_QUEUE_GWS unknown queue", errno.EINVAL, f"{C} kfd_ioctl_alloc_queue_gws: pqm_get_user_queue NULL",
        _io("ALLOC_QUEUE_GWS", queue_id=77, num_gws=1)),
    # memory: handles that are gone, SVM overlap, the remaining argument checks
    Row("FREE_MEMORY_OF_GPU twice", errno.EINVAL, f"{C} kfd_ioctl_free_memory_of_gpu: translate_handle fails",
        _freed("FREE_MEMORY_OF_GPU")),
    Row("MAP_MEMORY_TO_GPU a freed BO", errno.ENOMEM, f"{C} kfd_ioctl_map_memory_to_gpu: translate_handle -> -ENOMEM",
        _freed("MAP_MEMORY_TO_GPU")),
    Row("UNMAP_MEMORY_FROM_GPU a freed BO", errno.ENOMEM,
        f"{C} kfd_ioctl_unmap_memory_from_gpu: translate_handle -> -ENOMEM", _freed("UNMAP_MEMORY_FROM_GPU")),
    Row("EXPORT_DMABUF a freed BO", errno.EINVAL, f"{C} kfd_ioctl_export_dmabuf: translate_handle fails",
        _freed("EXPORT_DMABUF")),
    Row("MAP_MEMORY_TO_GPU n_success past n_devices by 2^31", errno.EINVAL,
        f"{C} kfd_ioctl_map_memory_to_gpu: n_success > n_devices", _mem("MAP_MEMORY_TO_GPU", n_success=1 << 31)),
    Row("ALLOC_MEMORY_OF_GPU at a VA SVM holds", errno.EADDRINUSE,
        f"{C} kfd_ioctl_alloc_memory_of_gpu: interval_tree_iter_first(svms, va_addr)", _alloc_over_svm(False)),
    Row("ALLOC_MEMORY_OF_GPU USERPTR of pages SVM holds", errno.EADDRINUSE,
        f"{C} kfd_ioctl_alloc_memory_of_gpu: interval_tree_iter_first(svms, mmap_offset)", _alloc_over_svm(True)),
    Row("SVM size not page aligned", errno.EINVAL, f"{C} kfd_ioctl_svm: size & ~PAGE_MASK",
        _io("SVM", start_addr=0x10000, size=0x1001)),
    Row("SVM start 0", errno.EINVAL, f"{C} kfd_ioctl_svm: !start_addr", _io("SVM", start_addr=0, size=0x1000)),
    Row("SET_XNACK_MODE enable on gfx11", errno.EPERM,
        f"{C} kfd_ioctl_set_xnack_mode: !kfd_process_xnack_mode(p, true) ({P}: GC >= 10.1.1 has no XNACK)",
        _io("SET_XNACK_MODE", xnack_enabled=1)),
    Row("ACQUIRE_VM with the /dev/kfd file", errno.EINVAL,
        f"{P} kfd_process_device_init_vm: amdgpu_file_to_fpriv (f_op is not amdgpu's) -> -EINVAL",
        lambda rt: rt.ioctl("ACQUIRE_VM", drm_fd=rt.kfd, gpu_id=rt.gpu_id()), unbound=True),
    # events: ids that are gone, types that the CPU cannot signal
    Row("DESTROY_EVENT twice", errno.EINVAL, f"{E} kfd_event_destroy: no event", _destroyed_event("DESTROY_EVENT")),
    Row("SET_EVENT a destroyed event", errno.EINVAL, f"{E} kfd_set_event: no event", _destroyed_event("SET_EVENT")),
    Row("RESET_EVENT a destroyed event", errno.EINVAL, f"{E} kfd_reset_event: no event",
        _destroyed_event("RESET_EVENT")),
    Row("WAIT_EVENTS a destroyed event", errno.EINVAL, f"{E} kfd_wait_on_events: init_event_waiter finds no event",
        lambda rt: _wait(rt, [_destroyed_id(rt)])),
    Row("WAIT_EVENTS a live event then an unknown one", errno.EINVAL,
        f"{E} kfd_wait_on_events: init_event_waiter of the second entry", lambda rt: _wait(rt, [rt.event(), 4000])),
    Row("SET_EVENT on a HW_EXCEPTION event", errno.EINVAL, f"{E} kfd_set_event: !event_can_be_cpu_signaled",
        _event_op("SET_EVENT", k.KFD_IOC_EVENT_HW_EXCEPTION)),
    Row("SET_EVENT on a DEBUG event", errno.EINVAL, f"{E} kfd_set_event: only SIGNAL events (not DEBUG)",
        _event_op("SET_EVENT", k.KFD_IOC_EVENT_DEBUG_EVENT)),
    Row("RESET_EVENT on a MEMORY event", errno.EINVAL, f"{E} kfd_reset_event: !event_can_be_cpu_signaled",
        _event_op("RESET_EVENT", k.KFD_IOC_EVENT_MEMORY)),
    Row("RESET_EVENT on a DEBUG event", errno.EINVAL, f"{E} kfd_reset_event: only SIGNAL events (not DEBUG)",
        _event_op("RESET_EVENT", k.KFD_IOC_EVENT_DEBUG_EVENT)),
    # mmap of /dev/kfd (kfd_chardev.c kfd_mmap and the per-type handlers)
    Row("mmap doorbells of an unknown GPU", errno.ENODEV, f"{C} kfd_mmap: DOORBELL and !dev",
        _kfd_mmap(k.KFD_MMAP_TYPE_DOORBELL, 0x2000, BAD_GPU)),
    Row("mmap doorbells of the wrong size", errno.EINVAL,
        "kfd_doorbell.c kfd_doorbell_mmap: size != kfd_doorbell_process_slice", _kfd_mmap(k.KFD_MMAP_TYPE_DOORBELL, 0x1000)),
    Row("mmap the MMIO page of an unknown GPU", errno.ENODEV, f"{C} kfd_mmap: MMIO and !dev",
        _kfd_mmap(k.KFD_MMAP_TYPE_MMIO, 0x1000, BAD_GPU)),
    Row("mmap two pages of MMIO", errno.EINVAL, f"{C} kfd_mmio_mmap: size != PAGE_SIZE",
        _kfd_mmap(k.KFD_MMAP_TYPE_MMIO, 0x2000)),
    Row("mmap RESERVED_MEM of an unknown GPU", errno.ENODEV, f"{C} kfd_mmap: RESERVED_MEM and !dev",
        _kfd_mmap(k.KFD_MMAP_TYPE_RESERVED_MEM, 0x2000, BAD_GPU)),
    Row("mmap the event page before there is one", errno.EINVAL, f"{E} kfd_event_mmap: !p->signal_page",
        _kfd_mmap(k.KFD_MMAP_TYPE_EVENTS, 0x8000, 0)),
    Row("mmap more event page than the event limit", errno.EINVAL,
        f"{E} kfd_event_mmap: get_order(size) > get_order(KFD_SIGNAL_EVENT_LIMIT * 8)",
        lambda rt: (rt.event_page(), _kfd_mmap(k.KFD_MMAP_TYPE_EVENTS, 0x10000, 0)(rt))),
    # the debugger runtime
    Row("RUNTIME_ENABLE twice", errno.EBUSY, f"{C} runtime_enable: runtime_state != DEBUG_RUNTIME_STATE_DISABLED",
        lambda rt: [rt.ioctl("RUNTIME_ENABLE", mode_mask=k.KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK) for _ in range(2)]),
    Row("RUNTIME_ENABLE with a queue alive", errno.EEXIST, f"{C} runtime_enable: pdd->qpd.queue_count",
        lambda rt: (rt.compute_queue(), rt.ioctl("RUNTIME_ENABLE", mode_mask=k.KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK))),
    # checkpoint/restore: kfd_ioctl checks the capability before anything (the emulated process has none)
    Row("CRIU_OP PROCESS_INFO without CAP_CHECKPOINT_RESTORE", errno.EACCES,
        f"{C} kfd_ioctl: KFD_IOC_FLAG_CHECKPOINT_RESTORE && !capable(CAP_CHECKPOINT_RESTORE) && "
        f"!capable(CAP_SYS_ADMIN)", _io("CRIU_OP", op=k.KFD_CRIU_OP_PROCESS_INFO)),
    Row("CRIU_OP argument at an unmapped address, without the capability", errno.EACCES,
        f"{C} kfd_ioctl: the capability check comes before copy_from_user", _ioctl_at("CRIU_OP", UNMAPPED)),
    # dma-buf info (amdgpu_amdkfd.c amdgpu_amdkfd_get_dmabuf_info: dma_buf_get)
    Row("GET_DMABUF_INFO metadata buffer past kmalloc", errno.ENOMEM,
        f"{C} kfd_ioctl_get_dmabuf_info: kzalloc(metadata_size) fails, before the fd is looked at",
        _io("GET_DMABUF_INFO", metadata_ptr=UNMAPPED, metadata_size=0xFFFFFFFF, dmabuf_fd=CLOSED_FD)),
    Row("GET_DMABUF_INFO closed fd", errno.EBADF, "dma-buf.c dma_buf_get: fget(fd) fails",
        _io("GET_DMABUF_INFO", dmabuf_fd=CLOSED_FD)),
    Row("GET_DMABUF_INFO negative fd", errno.EBADF, "dma-buf.c dma_buf_get: fget(-1) fails (dmabuf_fd is a u32 "
        "passed as int)", _io("GET_DMABUF_INFO", dmabuf_fd=0xFFFFFFFF)),
    Row("GET_DMABUF_INFO an fd that is no dma-buf", errno.EINVAL, "dma-buf.c dma_buf_get: !is_dma_buf_file(file)",
        lambda rt: rt.ioctl("GET_DMABUF_INFO", dmabuf_fd=rt.kfd)),
    # the debugger (kfd_ioctl_set_debug_trap, kfd_debug.c kfd_dbg_trap_enable)
    Row("DBG_TRAP for a pid that does not exist", errno.ESRCH, f"{C} kfd_ioctl_set_debug_trap: !find_get_pid(pid)",
        _dbg_trap(k.KFD_IOC_DBG_TRAP_DISABLE, pid=0x7FFFFFFF)),
    Row("DBG_TRAP ENABLE for a pid that does not exist", errno.ESRCH,
        f"{C} kfd_ioctl_set_debug_trap: !find_get_pid(pid)", _dbg_trap(k.KFD_IOC_DBG_TRAP_ENABLE, pid=0x7FFFFFFF)),
    Row("DBG_TRAP DISABLE before ENABLE", errno.EINVAL,
        f"{C} kfd_ioctl_set_debug_trap: op != ENABLE && !target->debug_trap_enabled",
        _dbg_trap(k.KFD_IOC_DBG_TRAP_DISABLE)),
    Row("DBG_TRAP an unknown op before ENABLE", errno.EINVAL,
        f"{C} kfd_ioctl_set_debug_trap: op != ENABLE && !target->debug_trap_enabled", _dbg_trap(0x7F)),
    Row("DBG_TRAP ENABLE with a closed event fd", errno.EBADF, "kfd_debug.c kfd_dbg_trap_enable: !fget(dbg_fd)",
        _dbg_trap(k.KFD_IOC_DBG_TRAP_ENABLE, dbg_fd=CLOSED_FD)),
    # the render node (drm_ioctl.c drm_ioctl, amdgpu_kms.c amdgpu_info_ioctl, drm_ioctl.c drm_version)
    Row("DRM ioctl of another type on the render node", errno.ENOTTY, "drm_ioctl.c drm_ioctl: _IOC_TYPE != 'd'",
        _drm(k.AMDKFD_IOC_GET_VERSION, k.GetVersionArgs)),
    Row("DRM core nr past the core table", errno.EINVAL, "drm_ioctl.c drm_ioctl: nr >= DRM_CORE_IOCTL_COUNT",
        _drm(k.IOWR("d", 0xE0, 8), lambda: bytearray(8))),
    Row("DRM driver nr past amdgpu's table", errno.EINVAL,
        "drm_ioctl.c drm_ioctl: nr - DRM_COMMAND_BASE >= num_ioctls", _drm(k.IOWR("d", 0x9F, 8), lambda: bytearray(8))),
    Row("DRM_IOCTL_VERSION name buffer at an unmapped address", errno.EFAULT,
        "drm_ioctl.c drm_copy_field: copy_to_user fails", _drm_version_name_at(UNMAPPED)),
    Row("AMDGPU_INFO unknown query", errno.EINVAL, "amdgpu_kms.c amdgpu_info_ioctl: default case", _info(0x7F)),
    Row("AMDGPU_INFO return_size 0", errno.EINVAL, "amdgpu_kms.c amdgpu_info_ioctl: !size", _info(0x16, size=0)),
    Row("AMDGPU_INFO return_pointer 0", errno.EINVAL, "amdgpu_kms.c amdgpu_info_ioctl: !out", _info(0x16, pointer=0)),
    Row("AMDGPU_INFO answer to an unmapped address", errno.EFAULT, "amdgpu_kms.c amdgpu_info_ioctl: copy_to_user",
        _info(0x16, pointer=UNMAPPED)),
)


def _destroyed_id(rt) -> int:
    eid = rt.event()
    rt.ioctl("DESTROY_EVENT", event_id=eid)
    return eid


def check(row: Row) -> tuple[bool, str]:
    """(whether the emulated KFD answers `row.errno`, what it answered) on a fresh one-GPU system."""
    from hcqsim.kfd import EmulatedSystem
    from tests.test_kfd_driver import Runtime
    system = EmulatedSystem(num_gpus=1)
    try:
        rt = Runtime(system.os, acquire=not row.unbound)
        try:
            row.call(rt)
        except OSError as e:
            return e.errno == row.errno, errno.errorcode.get(e.errno, str(e.errno))
        except Exception as e:  # noqa: BLE001 - anything but an errno is a wrong answer
            return False, f"{type(e).__name__}: {e}"
        return False, "0 (accepted)"
    finally:
        system.close()


def run() -> dict:
    """Every row: how many equal Linux, and what the others answered."""
    wrong = {}
    for row in ROWS:
        ok, got = check(row)
        if not ok:
            wrong[row.name] = f"{got}, Linux {errno.errorcode.get(row.errno, row.errno)} ({row.kernel})"
    return {"rows": len(ROWS), "equal": len(ROWS) - len(wrong), "wrong": wrong}
