"""The Linux KFD user API (`include/uapi/linux/kfd_ioctl.h`) and the KFD sysfs topology vocabulary, as data.

Both sides of the /dev/kfd boundary import this module: the runtime packs these structs and issues the ioctls
on a real driver, and the emulated driver unpacks the very same bytes. Only ctypes/stdlib is imported, never
the emulator, so the runtime can use it without pulling the emulator in.

Layouts are little endian with natural C alignment and carry the kernel's field names, so a buffer written by
one side reads back identically on the other. We model uapi 1.17 (96-byte CREATE_QUEUE with `sdma_engine_id`).
Facts and their sources: HARDWARE_FACTS.md sections 1 (KFD user API) and 2 (sysfs topology).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

u32, u64, s32 = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int32

# --------------------------------------------------------------------------------------------------------------
# Struct plumbing
# --------------------------------------------------------------------------------------------------------------


class KfdStruct(ctypes.LittleEndianStructure):
    """Base of every argument struct (explicitly little endian; identical to ctypes.Structure on x86/arm64)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={_fmt(getattr(self, n))}' for n, *_ in self._fields_)})"


class KfdUnion(ctypes.LittleEndianUnion):
    def __repr__(self) -> str:
        return f"{type(self).__name__}(...)"  # which member is live depends on the event type


def _fmt(v: object) -> str:
    if isinstance(v, int):
        return f"0x{v:x}" if v > 9 else str(v)
    if isinstance(v, ctypes.Array):
        return f"[{', '.join(_fmt(x) for x in v)}]"
    return repr(v)


def _sized(size: int):
    """Class decorator: fail at import if a layout drifts from the kernel's sizeof (the ioctl number encodes it)."""

    def check(cls):
        if ctypes.sizeof(cls) != size:
            raise TypeError(f"{cls.__name__}: sizeof is {ctypes.sizeof(cls)}, the kernel's is {size}")
        return cls

    return check


def struct_fields(cls: type[ctypes.Structure] | type[ctypes.Union],
                  flatten: bool = False) -> list[tuple[str, int, int]]:
    """[(name, byte offset, byte size)] in declaration order.

    With flatten=True nested structs/unions are expanded to dotted names with absolute offsets
    (e.g. MemoryExceptionData -> "failure.NotPresent" @0), which is how the facts sheet lists them.
    """
    out: list[tuple[str, int, int]] = []
    for name, ctype, *_ in cls._fields_:
        desc = getattr(cls, name)
        if flatten and isinstance(ctype, type) and issubclass(ctype, (ctypes.Structure, ctypes.Union)):
            out += [(f"{name}.{n}", desc.offset + o, s) for n, o, s in struct_fields(ctype, flatten=True)]
        else:
            out.append((name, desc.offset, desc.size))
    return out


# --------------------------------------------------------------------------------------------------------------
# Argument structs (kernel kfd_ioctl_<x>_args -> <X>Args); comments give direction where it is not obvious
# --------------------------------------------------------------------------------------------------------------


@_sized(8)
class GetVersionArgs(KfdStruct):
    _fields_ = [("major_version", u32), ("minor_version", u32)]


@_sized(96)
class CreateQueueArgs(KfdStruct):
    _fields_ = [
        ("ring_base_address", u64),  # in: GPU VA of the ring, 256-byte aligned (MQD keeps addr >> 8)
        ("write_pointer_address", u64),  # in: VA of the u64 wptr the user writes (the header says "from KFD": wrong)
        ("read_pointer_address", u64),  # in: VA of the u64 the engine writes the rptr back to
        ("doorbell_offset", u64),  # out: DOORBELL mmap offset | byte offset of this queue's doorbell in the slice
        ("ring_size", u32),  # in: bytes, power of two
        ("gpu_id", u32),
        ("queue_type", u32),  # KFD_IOC_QUEUE_TYPE_*
        ("queue_percentage", u32),  # 0..100, 0 = inactive
        ("queue_priority", u32),  # 0..15
        ("queue_id", u32),  # out
        ("eop_buffer_address", u64),  # compute only
        ("eop_buffer_size", u64),
        ("ctx_save_restore_address", u64),  # compute only: CWSR area
        ("ctx_save_restore_size", u32),
        ("ctl_stack_size", u32),
        ("sdma_engine_id", u32),  # 1.17+: only for KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID
        ("pad", u32),
    ]


CREATE_QUEUE_ARGS_SIZE_PRE_1_17 = 88  # the struct ended after ctl_stack_size; such callers still work (see Ioctl)


@_sized(8)
class DestroyQueueArgs(KfdStruct):
    _fields_ = [("queue_id", u32), ("pad", u32)]


@_sized(24)
class UpdateQueueArgs(KfdStruct):
    _fields_ = [("ring_base_address", u64), ("queue_id", u32), ("ring_size", u32), ("queue_percentage", u32),
                ("queue_priority", u32)]


@_sized(16)
class SetCuMaskArgs(KfdStruct):
    # num_cu_mask: bit count, a nonzero multiple of 32, at most 1024
    _fields_ = [("queue_id", u32), ("num_cu_mask", u32), ("cu_mask_ptr", u64)]


@_sized(24)
class GetQueueWaveStateArgs(KfdStruct):
    _fields_ = [("ctl_stack_address", u64), ("ctl_stack_used_size", u32), ("save_area_used_size", u32),
                ("queue_id", u32), ("pad", u32)]


@_sized(16)
class AvailableMemoryArgs(KfdStruct):  # kernel: kfd_ioctl_get_available_memory_args
    _fields_ = [("available", u64), ("gpu_id", u32), ("pad", u32)]


GetAvailableMemoryArgs = AvailableMemoryArgs


@_sized(32)
class SetMemoryPolicyArgs(KfdStruct):
    # The last field is `pad` (must be 0) up to uapi 1.17 and was renamed misc_process_flag in 1.18; same bytes.
    _fields_ = [("alternate_aperture_base", u64), ("alternate_aperture_size", u64), ("gpu_id", u32),
                ("default_policy", u32), ("alternate_policy", u32), ("misc_process_flag", u32)]


@_sized(40)
class GetClockCountersArgs(KfdStruct):
    # out: gpu counter, CLOCK_MONOTONIC_RAW ns, CLOCK_BOOTTIME ns, frequency (always 1e9); in: gpu_id
    _fields_ = [("gpu_clock_counter", u64), ("cpu_clock_counter", u64), ("system_clock_counter", u64),
                ("system_clock_freq", u64), ("gpu_id", u32), ("pad", u32)]


@_sized(56)
class ProcessDeviceApertures(KfdStruct):  # kernel: struct kfd_process_device_apertures
    _fields_ = [("lds_base", u64), ("lds_limit", u64), ("scratch_base", u64), ("scratch_limit", u64),
                ("gpuvm_base", u64), ("gpuvm_limit", u64), ("gpu_id", u32), ("pad", u32)]


NUM_OF_SUPPORTED_GPUS = 7  # fixed array size of the deprecated GET_PROCESS_APERTURES


@_sized(400)
class GetProcessAperturesArgs(KfdStruct):  # deprecated: limited to 7 GPUs
    _fields_ = [("process_apertures", ProcessDeviceApertures * NUM_OF_SUPPORTED_GPUS), ("num_of_nodes", u32),
                ("pad", u32)]


@_sized(16)
class GetProcessAperturesNewArgs(KfdStruct):
    # num_of_nodes: in = capacity of the user array (0 = just count), out = entries filled / available
    _fields_ = [("kfd_process_device_apertures_ptr", u64), ("num_of_nodes", u32), ("pad", u32)]


@_sized(8)
class DbgRegisterArgs(KfdStruct):  # 0x0D-0x10: the old debugger API; the kernel now answers -EPERM
    _fields_ = [("gpu_id", u32), ("pad", u32)]


DbgUnregisterArgs = DbgRegisterArgs


@_sized(16)
class DbgAddressWatchArgs(KfdStruct):
    _fields_ = [("content_ptr", u64), ("gpu_id", u32), ("buf_size_in_bytes", u32)]


DbgWaveControlArgs = DbgAddressWatchArgs


@_sized(32)
class CreateEventArgs(KfdStruct):
    _fields_ = [
        ("event_page_offset", u64),  # in (first call): handle of a user event-page BO; out: EVENTS mmap offset or 0
        ("event_trigger_data", u32),  # out: == event_id for signal events
        ("event_type", u32),  # KFD_IOC_EVENT_*
        ("auto_reset", u32),
        ("node_id", u32),
        ("event_id", u32),  # out
        ("event_slot_index", u32),  # out: slot in the event page (== event_id for signal events)
    ]


@_sized(8)
class DestroyEventArgs(KfdStruct):
    _fields_ = [("event_id", u32), ("pad", u32)]


@_sized(8)
class SetEventArgs(KfdStruct):
    _fields_ = [("event_id", u32), ("pad", u32)]


@_sized(8)
class ResetEventArgs(KfdStruct):
    _fields_ = [("event_id", u32), ("pad", u32)]


@_sized(16)
class MemoryExceptionFailure(KfdStruct):  # kernel: struct kfd_memory_exception_failure
    _fields_ = [("NotPresent", u32), ("ReadOnly", u32), ("NoExecute", u32), ("imprecise", u32)]


@_sized(32)
class MemoryExceptionData(KfdStruct):  # kernel: struct kfd_hsa_memory_exception_data
    _anonymous_ = ("failure",)  # so .NotPresent etc. read directly, as the facts sheet lists them
    _fields_ = [("failure", MemoryExceptionFailure), ("va", u64), ("gpu_id", u32), ("ErrorType", u32)]


@_sized(16)
class HwExceptionData(KfdStruct):  # kernel: struct kfd_hsa_hw_exception_data
    _fields_ = [("reset_type", u32), ("reset_cause", u32), ("memory_lost", u32), ("gpu_id", u32)]


@_sized(8)
class SignalEventData(KfdStruct):  # kernel: struct kfd_hsa_signal_event_data (1.14+, in/out)
    _fields_ = [("last_event_age", u64)]


@_sized(32)
class EventDataUnion(KfdUnion):
    _fields_ = [("memory_exception_data", MemoryExceptionData), ("hw_exception_data", HwExceptionData),
                ("signal_event_data", SignalEventData)]


@_sized(48)
class EventData(KfdStruct):  # kernel: struct kfd_event_data, element of the WAIT_EVENTS array
    _anonymous_ = ("u",)  # the kernel's union is anonymous: ev.signal_event_data works as in C
    _fields_ = [("u", EventDataUnion), ("kfd_event_data_ext", u64), ("event_id", u32), ("pad", u32)]


@_sized(24)
class WaitEventsArgs(KfdStruct):
    # timeout in ms: 0 = poll once, 0xFFFFFFFF = forever; wait_result out: KFD_IOC_WAIT_RESULT_*
    _fields_ = [("events_ptr", u64), ("num_events", u32), ("wait_for_all", u32), ("timeout", u32),
                ("wait_result", u32)]


@_sized(16)
class SetScratchBackingVaArgs(KfdStruct):
    _fields_ = [("va_addr", u64), ("gpu_id", u32), ("pad", u32)]


@_sized(40)
class GetTileConfigArgs(KfdStruct):
    _fields_ = [("tile_config_ptr", u64), ("macro_tile_config_ptr", u64), ("num_tile_configs", u32),
                ("num_macro_tile_configs", u32), ("gpu_id", u32), ("gb_addr_config", u32), ("num_banks", u32),
                ("num_ranks", u32)]


@_sized(24)
class SetTrapHandlerArgs(KfdStruct):
    _fields_ = [("tba_addr", u64), ("tma_addr", u64), ("gpu_id", u32), ("pad", u32)]


@_sized(8)
class AcquireVmArgs(KfdStruct):
    _fields_ = [("drm_fd", u32), ("gpu_id", u32)]  # drm_fd: open /dev/dri/renderD<drm_render_minor> of gpu_id


@_sized(40)
class AllocMemoryOfGpuArgs(KfdStruct):
    _fields_ = [
        ("va_addr", u64),  # GPU VA chosen (and reserved) by the caller
        ("size", u64),
        ("handle", u64),  # out: gpu_id << 32 | idr index
        ("mmap_offset", u64),  # in: CPU address for USERPTR; out: render-node (VRAM/GTT) or KFD (MMIO) mmap offset
        ("gpu_id", u32),
        ("flags", u32),  # KFD_IOC_ALLOC_MEM_FLAGS_*
    ]


@_sized(8)
class FreeMemoryOfGpuArgs(KfdStruct):
    _fields_ = [("handle", u64)]


@_sized(24)
class MapMemoryToGpuArgs(KfdStruct):
    # n_success: in/out, number of leading devices already done, so a retry resumes there
    _fields_ = [("handle", u64), ("device_ids_array_ptr", u64), ("n_devices", u32), ("n_success", u32)]


@_sized(24)
class UnmapMemoryFromGpuArgs(KfdStruct):
    _fields_ = [("handle", u64), ("device_ids_array_ptr", u64), ("n_devices", u32), ("n_success", u32)]


@_sized(16)
class AllocQueueGwsArgs(KfdStruct):
    _fields_ = [("queue_id", u32), ("num_gws", u32), ("first_gws", u32), ("pad", u32)]


@_sized(32)
class GetDmabufInfoArgs(KfdStruct):
    _fields_ = [("size", u64), ("metadata_ptr", u64), ("metadata_size", u32), ("gpu_id", u32), ("flags", u32),
                ("dmabuf_fd", u32)]


@_sized(24)
class ImportDmabufArgs(KfdStruct):
    _fields_ = [("va_addr", u64), ("handle", u64), ("gpu_id", u32), ("dmabuf_fd", u32)]


@_sized(16)
class ExportDmabufArgs(KfdStruct):
    _fields_ = [("handle", u64), ("flags", u32), ("dmabuf_fd", u32)]


@_sized(8)
class SmiEventsArgs(KfdStruct):
    _fields_ = [("gpuid", u32), ("anon_fd", u32)]


@_sized(8)
class SvmAttribute(KfdStruct):  # kernel: struct kfd_ioctl_svm_attribute
    _fields_ = [("type", u32), ("value", u32)]


@_sized(24)
class SvmArgs(KfdStruct):  # followed in memory by `nattr` SvmAttribute (C flexible array, not in sizeof)
    _fields_ = [("start_addr", u64), ("size", u64), ("op", u32), ("nattr", u32)]


# AMDKFD_IOC_SVM (kfd_ioctl.h): ops, attribute types, locations, flags
KFD_IOCTL_SVM_OP_SET_ATTR, KFD_IOCTL_SVM_OP_GET_ATTR = 0, 1
(KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, KFD_IOCTL_SVM_ATTR_ACCESS,
 KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE, KFD_IOCTL_SVM_ATTR_NO_ACCESS, KFD_IOCTL_SVM_ATTR_SET_FLAGS,
 KFD_IOCTL_SVM_ATTR_CLR_FLAGS, KFD_IOCTL_SVM_ATTR_GRANULARITY) = range(8)
KFD_IOCTL_SVM_LOCATION_SYSMEM, KFD_IOCTL_SVM_LOCATION_UNDEFINED = 0, 0xFFFFFFFF
KFD_IOCTL_SVM_FLAG_HOST_ACCESS, KFD_IOCTL_SVM_FLAG_COHERENT, KFD_IOCTL_SVM_FLAG_HIVE_LOCAL = 0x1, 0x2, 0x4
KFD_IOCTL_SVM_FLAG_GPU_RO, KFD_IOCTL_SVM_FLAG_GPU_EXEC, KFD_IOCTL_SVM_FLAG_GPU_READ_MOSTLY = 0x8, 0x10, 0x20
KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED, KFD_IOCTL_SVM_FLAG_EXT_COHERENT = 0x40, 0x80


@_sized(4)
class SetXnackModeArgs(KfdStruct):
    _fields_ = [("xnack_enabled", s32)]  # signed: < 0 queries (see KFD_XNACK_*)


@_sized(56)
class CriuArgs(KfdStruct):
    _fields_ = [("devices", u64), ("bos", u64), ("priv_data", u64), ("priv_data_size", u64), ("num_devices", u32),
                ("num_bos", u32), ("num_objects", u32), ("pid", u32), ("op", u32)]  # 52 B of fields, padded to 56


@_sized(16)
class RuntimeEnableArgs(KfdStruct):
    _fields_ = [("r_debug", u64), ("mode_mask", u32), ("capabilities_mask", u32)]  # mode_mask: KFD_RUNTIME_ENABLE_*


@_sized(16)
class RuntimeInfo(KfdStruct):  # kernel: struct kfd_runtime_info
    _fields_ = [("r_debug", u64), ("runtime_state", u32), ("ttmp_setup", u32)]


@_sized(24)
class DbgTrapEnableArgs(KfdStruct):
    _fields_ = [("exception_mask", u64), ("rinfo_ptr", u64), ("rinfo_size", u32), ("dbg_fd", u32)]


@_sized(24)
class DbgTrapUnion(KfdUnion):
    # The kernel's union has one member per debug op, the largest 24 bytes; only `enable` is spelt out here
    # (we do not emulate the debugger), `raw` gives access to the rest.
    _fields_ = [("enable", DbgTrapEnableArgs), ("raw", u64 * 3)]


@_sized(32)
class DbgTrapArgs(KfdStruct):
    _anonymous_ = ("u",)
    _fields_ = [("pid", u32), ("op", u32), ("u", DbgTrapUnion)]


# --------------------------------------------------------------------------------------------------------------
# ioctl request numbers (asm-generic/ioctl.h layout: nr[7:0] type[15:8] size[29:16] dir[31:30])
# --------------------------------------------------------------------------------------------------------------

IOC_NONE, IOC_WRITE, IOC_READ = 0, 1, 2  # WRITE = user -> kernel (_IOW), READ = kernel -> user (_IOR)
_IOC_NRBITS, _IOC_TYPEBITS, _IOC_SIZEBITS, _IOC_DIRBITS = 8, 8, 14, 2
_IOC_NRSHIFT, _IOC_TYPESHIFT, _IOC_SIZESHIFT, _IOC_DIRSHIFT = 0, 8, 16, 30

AMDKFD_IOCTL_BASE = ord("K")  # 0x4B
AMDKFD_COMMAND_START, AMDKFD_COMMAND_END = 0x01, 0x27  # valid core nr range is [START, END)


def _size_of(size: int | type) -> int:
    return size if isinstance(size, int) else ctypes.sizeof(size)


def _IOC(dir: int, type: int | str, nr: int, size: int) -> int:
    t = ord(type) if isinstance(type, str) else type
    for what, v, bits in (("dir", dir, _IOC_DIRBITS), ("type", t, _IOC_TYPEBITS), ("nr", nr, _IOC_NRBITS),
                          ("size", size, _IOC_SIZEBITS)):
        if not 0 <= v < 1 << bits:
            raise ValueError(f"ioctl {what} {v} does not fit in {bits} bits")
    return dir << _IOC_DIRSHIFT | size << _IOC_SIZESHIFT | t << _IOC_TYPESHIFT | nr << _IOC_NRSHIFT


def IOR(type: int | str, nr: int, size: int | type) -> int:
    return _IOC(IOC_READ, type, nr, _size_of(size))


def IOW(type: int | str, nr: int, size: int | type) -> int:
    return _IOC(IOC_WRITE, type, nr, _size_of(size))


def IOWR(type: int | str, nr: int, size: int | type) -> int:
    return _IOC(IOC_READ | IOC_WRITE, type, nr, _size_of(size))


def ioc_decode(request: int) -> tuple[int, int, int, int]:
    """request -> (dir, type, nr, size), the inverse of _IOC."""
    field_ = lambda shift, bits: (request >> shift) & ((1 << bits) - 1)  # noqa: E731
    return (field_(_IOC_DIRSHIFT, _IOC_DIRBITS), field_(_IOC_TYPESHIFT, _IOC_TYPEBITS),
            field_(_IOC_NRSHIFT, _IOC_NRBITS), field_(_IOC_SIZESHIFT, _IOC_SIZEBITS))


_DIR_NAMES = {IOC_NONE: "", IOC_READ: "R", IOC_WRITE: "W", IOC_READ | IOC_WRITE: "RW"}


@dataclass(frozen=True)
class Ioctl:
    """One KFD command.

    The real kernel (kfd_ioctl()) dispatches on `nr` alone and uses its own direction and size: it copies
    the *user's* _IOC_SIZE bytes in and out and zero-fills up to its own struct size. So an older, shorter
    struct (e.g. the 88-byte CREATE_QUEUE) still works; an emulated driver should look up by nr, not request.
    """

    name: str
    nr: int
    dir: int  # IOC_READ / IOC_WRITE bits, as in the kernel's AMDKFD_IOR/IOW/IOWR
    struct: type[ctypes.Structure]
    retired: bool = False  # slot kept for ABI, the kernel handler always fails with -EPERM
    size: int = field(init=False)
    request: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", ctypes.sizeof(self.struct))
        object.__setattr__(self, "request", _IOC(self.dir, AMDKFD_IOCTL_BASE, self.nr, self.size))

    @property
    def direction(self) -> str:
        return _DIR_NAMES[self.dir]


_R, _W, _RW = IOC_READ, IOC_WRITE, IOC_READ | IOC_WRITE
_IOCTL_TABLE: tuple[tuple[str, int, int, type[ctypes.Structure]], ...] = (
    ("GET_VERSION", 0x01, _R, GetVersionArgs),
    ("CREATE_QUEUE", 0x02, _RW, CreateQueueArgs),
    ("DESTROY_QUEUE", 0x03, _RW, DestroyQueueArgs),
    ("SET_MEMORY_POLICY", 0x04, _W, SetMemoryPolicyArgs),
    ("GET_CLOCK_COUNTERS", 0x05, _RW, GetClockCountersArgs),
    ("GET_PROCESS_APERTURES", 0x06, _R, GetProcessAperturesArgs),  # deprecated in favour of _NEW, still works
    ("UPDATE_QUEUE", 0x07, _W, UpdateQueueArgs),
    ("CREATE_EVENT", 0x08, _RW, CreateEventArgs),
    ("DESTROY_EVENT", 0x09, _W, DestroyEventArgs),
    ("SET_EVENT", 0x0A, _W, SetEventArgs),
    ("RESET_EVENT", 0x0B, _W, ResetEventArgs),
    ("WAIT_EVENTS", 0x0C, _RW, WaitEventsArgs),
    ("DBG_REGISTER_DEPRECATED", 0x0D, _W, DbgRegisterArgs),
    ("DBG_UNREGISTER_DEPRECATED", 0x0E, _W, DbgUnregisterArgs),
    ("DBG_ADDRESS_WATCH_DEPRECATED", 0x0F, _W, DbgAddressWatchArgs),
    ("DBG_WAVE_CONTROL_DEPRECATED", 0x10, _W, DbgWaveControlArgs),
    ("SET_SCRATCH_BACKING_VA", 0x11, _RW, SetScratchBackingVaArgs),
    ("GET_TILE_CONFIG", 0x12, _RW, GetTileConfigArgs),
    ("SET_TRAP_HANDLER", 0x13, _W, SetTrapHandlerArgs),
    ("GET_PROCESS_APERTURES_NEW", 0x14, _RW, GetProcessAperturesNewArgs),
    ("ACQUIRE_VM", 0x15, _W, AcquireVmArgs),
    ("ALLOC_MEMORY_OF_GPU", 0x16, _RW, AllocMemoryOfGpuArgs),
    ("FREE_MEMORY_OF_GPU", 0x17, _W, FreeMemoryOfGpuArgs),
    ("MAP_MEMORY_TO_GPU", 0x18, _RW, MapMemoryToGpuArgs),
    ("UNMAP_MEMORY_FROM_GPU", 0x19, _RW, UnmapMemoryFromGpuArgs),
    ("SET_CU_MASK", 0x1A, _W, SetCuMaskArgs),
    ("GET_QUEUE_WAVE_STATE", 0x1B, _RW, GetQueueWaveStateArgs),
    ("GET_DMABUF_INFO", 0x1C, _RW, GetDmabufInfoArgs),
    ("IMPORT_DMABUF", 0x1D, _RW, ImportDmabufArgs),
    ("ALLOC_QUEUE_GWS", 0x1E, _RW, AllocQueueGwsArgs),
    ("SMI_EVENTS", 0x1F, _RW, SmiEventsArgs),
    ("SVM", 0x20, _RW, SvmArgs),
    ("SET_XNACK_MODE", 0x21, _RW, SetXnackModeArgs),
    ("CRIU_OP", 0x22, _RW, CriuArgs),
    ("AVAILABLE_MEMORY", 0x23, _RW, AvailableMemoryArgs),
    ("EXPORT_DMABUF", 0x24, _RW, ExportDmabufArgs),
    ("RUNTIME_ENABLE", 0x25, _RW, RuntimeEnableArgs),
    ("DBG_TRAP", 0x26, _RW, DbgTrapArgs),
)

IOCTLS: dict[str, Ioctl] = {
    name: Ioctl(name, nr, d, st, retired=name.endswith("_DEPRECATED")) for name, nr, d, st in _IOCTL_TABLE
}
IOCTLS_BY_NR: dict[int, Ioctl] = {io.nr: io for io in IOCTLS.values()}
IOCTLS_BY_REQUEST: dict[int, Ioctl] = {io.request: io for io in IOCTLS.values()}

# AMDKFD_IOC_<NAME> = request value, exactly the kernel's macro names (generated from the table above).
globals().update({f"AMDKFD_IOC_{io.name}": io.request for io in IOCTLS.values()})
AMDKFD_IOC_CREATE_QUEUE_PRE_1_17 = IOWR(AMDKFD_IOCTL_BASE, 0x02, CREATE_QUEUE_ARGS_SIZE_PRE_1_17)  # 0xC0584B02


def ioctl_by_nr(nr: int) -> Ioctl:
    """The command for a nr (how the kernel dispatches). KeyError if there is none."""
    return IOCTLS_BY_NR[nr]


def ioctl_by_request(request: int) -> Ioctl:
    """The command whose current (uapi 1.17) request value is exactly `request`. KeyError otherwise."""
    return IOCTLS_BY_REQUEST[request]


# --------------------------------------------------------------------------------------------------------------
# Versions and constants (kfd_ioctl.h unless noted)
# --------------------------------------------------------------------------------------------------------------

KFD_IOCTL_MAJOR_VERSION = 1
KFD_IOCTL_MINOR_VERSION = 17  # what we model; upstream is at 1.18 (only renames set_memory_policy.pad)

# queue_type
KFD_IOC_QUEUE_TYPE_COMPUTE = 0x0  # PM4 ring on the MEC
KFD_IOC_QUEUE_TYPE_SDMA = 0x1  # SDMA ring, engine chosen by KFD
KFD_IOC_QUEUE_TYPE_COMPUTE_AQL = 0x2  # AQL ring on the MEC
KFD_IOC_QUEUE_TYPE_SDMA_XGMI = 0x3  # SDMA ring on an XGMI engine
KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID = 0x4  # SDMA ring on CreateQueueArgs.sdma_engine_id (1.17+)

KFD_MAX_QUEUE_PERCENTAGE = 100
KFD_MAX_QUEUE_PRIORITY = 15
KFD_MIN_QUEUE_RING_SIZE = 1024  # newer kernels clamp smaller rings up to this

# set_memory_policy
KFD_IOC_CACHE_POLICY_COHERENT = 0
KFD_IOC_CACHE_POLICY_NONCOHERENT = 1
KFD_PROC_FLAG_MFMA_HIGH_PRECISION = 1 << 0  # misc_process_flag bit, 1.18

KFD_INVALID_FD = 0xFFFFFFFF

# event_type (matches HSA_EVENTTYPE)
KFD_IOC_EVENT_SIGNAL = 0
KFD_IOC_EVENT_NODECHANGE = 1
KFD_IOC_EVENT_DEVICESTATECHANGE = 2
KFD_IOC_EVENT_HW_EXCEPTION = 3
KFD_IOC_EVENT_SYSTEM_EVENT = 4
KFD_IOC_EVENT_DEBUG_EVENT = 5
KFD_IOC_EVENT_PROFILE_EVENT = 6
KFD_IOC_EVENT_QUEUE_EVENT = 7
KFD_IOC_EVENT_MEMORY = 8

# wait_events
KFD_IOC_WAIT_RESULT_COMPLETE = 0
KFD_IOC_WAIT_RESULT_TIMEOUT = 1
KFD_IOC_WAIT_RESULT_FAIL = 2
KFD_EVENT_TIMEOUT_IMMEDIATE = 0  # kfd_events.h
KFD_EVENT_TIMEOUT_INFINITE = 0xFFFFFFFF

# signal events and the event page (kfd_events.h / kfd_events.c)
KFD_SIGNAL_EVENT_LIMIT = 4096  # slots in a full event page
KFD_SIGNAL_SLOT_SIZE = 8  # each slot is a u64
KFD_SIGNAL_EVENT_PAGE_SIZE = KFD_SIGNAL_EVENT_LIMIT * KFD_SIGNAL_SLOT_SIZE  # 32 KiB, the largest mappable page
KFD_SIGNAL_EVENT_LIMIT_UNMAPPED = 256  # usable slots before a page is supplied/mapped (old ABI default)
UNSIGNALED_EVENT_SLOT = 0xFFFF_FFFF_FFFF_FFFF  # all ones = not signalled, a byte pattern so memset works
KFD_FIRST_SIGNAL_EVENT_ID = 1  # id 0 is reserved at process creation (fast path for CP interrupts without id)
KFD_FIRST_NONSIGNAL_EVENT_ID = 0x40000000  # (INT_MAX >> 1) + 1; older kernels used 0x80000000
KFD_LAST_NONSIGNAL_EVENT_ID = 0x7FFFFFFF  # INT_MAX

# hw_exception_data.reset_type / reset_cause
KFD_HW_EXCEPTION_WHOLE_GPU_RESET = 0
KFD_HW_EXCEPTION_PER_ENGINE_RESET = 1
KFD_HW_EXCEPTION_GPU_HANG = 0
KFD_HW_EXCEPTION_ECC = 1

# memory_exception_data.ErrorType
KFD_MEM_ERR_NO_RAS = 0
KFD_MEM_ERR_SRAM_ECC = 1
KFD_MEM_ERR_POISON_CONSUMED = 2
KFD_MEM_ERR_GPU_HANG = 3

# alloc_memory_of_gpu.flags: exactly one memory-type bit (0-4) plus attribute bits
KFD_IOC_ALLOC_MEM_FLAGS_VRAM = 1 << 0
KFD_IOC_ALLOC_MEM_FLAGS_GTT = 1 << 1
KFD_IOC_ALLOC_MEM_FLAGS_USERPTR = 1 << 2  # mmap_offset carries the CPU address of the pages to wrap
KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL = 1 << 3  # size must equal the doorbell slice
KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP = 1 << 4  # size must be one page (HDP flush registers)
KFD_IOC_ALLOC_MEM_FLAGS_CONTIGUOUS = 1 << 23  # 1.16+
KFD_IOC_ALLOC_MEM_FLAGS_EXT_COHERENT = 1 << 24
KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED = 1 << 25
KFD_IOC_ALLOC_MEM_FLAGS_COHERENT = 1 << 26
KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM = 1 << 27
KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE = 1 << 28
KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC = 1 << 29  # CPU-visible VRAM; fails on small-BAR boards
KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE = 1 << 30
KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE = 1 << 31
KFD_ALLOC_MEM_TYPE_MASK = 0x1F  # ours, not the kernel's: the five memory-type bits

# set_xnack_mode.xnack_enabled semantics (values ours; the kernel tests the sign): on return it holds the mode
KFD_XNACK_QUERY = -1  # any negative value: leave unchanged, just report
KFD_XNACK_DISABLE = 0
KFD_XNACK_ENABLE = 1  # any positive value

# runtime_enable.mode_mask and kfd_runtime_info.runtime_state
KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK = 1  # set: enable runtime for debugging; clear: disable
KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK = 2  # trap temporaries setup (ignored on disable)
DEBUG_RUNTIME_STATE_DISABLED = 0
DEBUG_RUNTIME_STATE_ENABLED = 1
DEBUG_RUNTIME_STATE_ENABLED_BUSY = 2
DEBUG_RUNTIME_STATE_ENABLED_ERROR = 3
KFD_IOC_DBG_TRAP_ENABLE, KFD_IOC_DBG_TRAP_DISABLE = 0, 1  # enum kfd_dbg_trap_operations (the first two of 15)
KFD_CRIU_OP_PROCESS_INFO, KFD_CRIU_OP_CHECKPOINT = 0, 1  # enum kfd_criu_op (then UNPAUSE, RESTORE, RESUME)

# register offsets inside the MMIO_REMAP page
KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL = 0
KFD_MMIO_REMAP_HDP_REG_FLUSH_CNTL = 4

# BO handles (kfd_chardev.c): gpu_id in the high half, per-device idr index in the low half
KFD_HANDLE_GPU_ID_SHIFT = 32


def make_handle(gpu_id: int, idr: int) -> int:
    return gpu_id << KFD_HANDLE_GPU_ID_SHIFT | idr


def split_handle(handle: int) -> tuple[int, int]:
    """handle -> (gpu_id, idr index)."""
    return handle >> KFD_HANDLE_GPU_ID_SHIFT, handle & 0xFFFFFFFF


def names_of(prefix: str) -> dict[int, str]:
    """{value: name without prefix} of this module's constants, e.g. names_of("KFD_IOC_QUEUE_TYPE_")."""
    return {v: k[len(prefix):] for k, v in globals().items() if k.startswith(prefix) and isinstance(v, int)}


def describe_alloc_flags(flags: int) -> str:
    """e.g. 'GTT|UNCACHED|COHERENT|NO_SUBSTITUTE|EXECUTABLE|WRITABLE'; unknown bits are shown in hex."""
    known = names_of("KFD_IOC_ALLOC_MEM_FLAGS_")
    parts = [known[1 << b] for b in range(32) if flags >> b & 1 and 1 << b in known]
    if rest := flags & ~sum(known):
        parts.append(f"0x{rest:x}")
    return "|".join(parts) or "0"


# --------------------------------------------------------------------------------------------------------------
# mmap offsets on /dev/kfd (kfd_priv.h): type[63:62] | gpu_id[61:46] | value[45:0], byte offsets
# --------------------------------------------------------------------------------------------------------------

KFD_MMAP_TYPE_SHIFT = 62
KFD_MMAP_TYPE_MASK = 0x3 << KFD_MMAP_TYPE_SHIFT
KFD_MMAP_TYPE_DOORBELL = 0x3 << KFD_MMAP_TYPE_SHIFT
KFD_MMAP_TYPE_EVENTS = 0x2 << KFD_MMAP_TYPE_SHIFT  # also what CREATE_EVENT returns in event_page_offset
KFD_MMAP_TYPE_RESERVED_MEM = 0x1 << KFD_MMAP_TYPE_SHIFT
KFD_MMAP_TYPE_MMIO = 0x0 << KFD_MMAP_TYPE_SHIFT
KFD_GPU_ID_HASH_WIDTH = 16
KFD_MMAP_GPU_ID_SHIFT = 46
KFD_MMAP_GPU_ID_MASK = ((1 << KFD_GPU_ID_HASH_WIDTH) - 1) << KFD_MMAP_GPU_ID_SHIFT
KFD_MMAP_OFFSET_VALUE_MASK = (1 << KFD_MMAP_GPU_ID_SHIFT) - 1


def mmap_offset(type: int, gpu_id: int, value: int = 0) -> int:
    """Compose a /dev/kfd mmap offset; `type` is one of the KFD_MMAP_TYPE_* constants (already shifted)."""
    if type & ~KFD_MMAP_TYPE_MASK:
        raise ValueError(f"mmap type 0x{type:x} is not a KFD_MMAP_TYPE_* constant")
    if not 0 <= gpu_id < 1 << KFD_GPU_ID_HASH_WIDTH:
        raise ValueError(f"gpu_id {gpu_id} does not fit in {KFD_GPU_ID_HASH_WIDTH} bits")
    if not 0 <= value <= KFD_MMAP_OFFSET_VALUE_MASK:
        raise ValueError(f"mmap value 0x{value:x} does not fit in {KFD_MMAP_GPU_ID_SHIFT} bits")
    return type | gpu_id << KFD_MMAP_GPU_ID_SHIFT | value


def decode_mmap_offset(off: int) -> tuple[int, int, int]:
    """offset -> (KFD_MMAP_TYPE_* constant, gpu_id, value)."""
    return off & KFD_MMAP_TYPE_MASK, (off & KFD_MMAP_GPU_ID_MASK) >> KFD_MMAP_GPU_ID_SHIFT, \
        off & KFD_MMAP_OFFSET_VALUE_MASK


# Doorbells on SOC15+ (gfx9..gfx12): each process owns, per GPU, a slice of 1024 64-bit doorbells.
KFD_MAX_NUM_OF_QUEUES_PER_PROCESS = 1024
KFD_DOORBELL_SIZE = 8  # bytes; ring with one 64-bit store
KFD_DOORBELL_SLICE_SIZE = KFD_MAX_NUM_OF_QUEUES_PER_PROCESS * KFD_DOORBELL_SIZE  # 8 KiB = 2 pages


def doorbell_mmap(doorbell_offset: int) -> tuple[int, int]:
    """CREATE_QUEUE doorbell_offset -> (offset to mmap the 8 KiB slice at, byte offset of the doorbell in it)."""
    return doorbell_offset & ~(KFD_DOORBELL_SLICE_SIZE - 1), doorbell_offset & (KFD_DOORBELL_SLICE_SIZE - 1)


# --------------------------------------------------------------------------------------------------------------
# sysfs topology (kfd_topology.c, include/uapi/linux/kfd_sysfs.h)
# --------------------------------------------------------------------------------------------------------------

KFD_TOPOLOGY_ROOT = "/sys/devices/virtual/kfd/kfd/topology"  # same tree as /sys/class/kfd/kfd/topology
SYSTEM_PROPERTY_KEYS = ("platform_oem", "platform_id", "platform_rev")  # all u64

# nodes/N/properties, in print order; one "key value" line each, decimal (%u, or %llu for NODE_PROPERTY_KEYS_64BIT)
NODE_PROPERTY_KEYS = (
    "cpu_cores_count", "simd_count", "mem_banks_count", "caches_count", "io_links_count", "p2p_links_count",
    "cpu_core_id_base", "simd_id_base", "max_waves_per_simd", "lds_size_in_kb", "gds_size_in_kb", "num_gws",
    "wave_front_size", "array_count", "simd_arrays_per_engine", "cu_per_simd_array", "simd_per_cu",
    "max_slots_scratch_cu", "gfx_target_version", "vendor_id", "device_id", "location_id", "domain",
    "drm_render_minor", "hive_id", "num_sdma_engines", "num_sdma_xgmi_engines", "num_sdma_queues_per_engine",
    "num_cp_queues",
    # printed for GPU nodes only (kfd_topology.c node_show: the `if (dev->gpu)` block)
    "max_engine_clk_fcompute", "local_mem_size", "fw_version", "capability", "capability2", "debug_prop",
    "sdma_fw_version", "unique_id", "num_xcc",
    # every node, always last
    "max_engine_clk_ccompute",
)
GPU_ONLY_NODE_PROPERTY_KEYS = NODE_PROPERTY_KEYS[NODE_PROPERTY_KEYS.index("max_engine_clk_fcompute"):-1]
NODE_PROPERTY_KEYS_64BIT = frozenset({"hive_id", "local_mem_size", "debug_prop", "unique_id"})

MEM_BANK_PROPERTY_KEYS = ("heap_type", "size_in_bytes", "flags", "width", "mem_clk_max")  # size_in_bytes is u64
CACHE_PROPERTY_KEYS = ("processor_id_low", "level", "size", "cache_line_size", "cache_lines_per_tag",
                       "association", "latency", "type", "sibling_map")  # sibling_map: comma-separated 0/1
IO_LINK_PROPERTY_KEYS = ("type", "version_major", "version_minor", "node_from", "node_to", "weight", "min_latency",
                         "max_latency", "min_bandwidth", "max_bandwidth", "recommended_transfer_size",
                         "recommended_sdma_engine_id_mask", "flags")  # also used for p2p_links

# `capability` bits
HSA_CAP_HOT_PLUGGABLE = 0x00000001
HSA_CAP_ATS_PRESENT = 0x00000002
HSA_CAP_SHARED_WITH_GRAPHICS = 0x00000004
HSA_CAP_QUEUE_SIZE_POW2 = 0x00000008
HSA_CAP_QUEUE_SIZE_32BIT = 0x00000010
HSA_CAP_QUEUE_IDLE_EVENT = 0x00000020
HSA_CAP_VA_LIMIT = 0x00000040
HSA_CAP_WATCH_POINTS_SUPPORTED = 0x00000080
HSA_CAP_WATCH_POINTS_TOTALBITS_MASK = 0x00000F00  # log2(number of watch points)
HSA_CAP_WATCH_POINTS_TOTALBITS_SHIFT = 8
HSA_CAP_DOORBELL_TYPE_TOTALBITS_MASK = 0x00003000
HSA_CAP_DOORBELL_TYPE_TOTALBITS_SHIFT = 12
HSA_CAP_DOORBELL_TYPE_PRE_1_0 = 0x0
HSA_CAP_DOORBELL_TYPE_1_0 = 0x1
HSA_CAP_DOORBELL_TYPE_2_0 = 0x2  # every gfx9+ part
HSA_CAP_AQL_QUEUE_DOUBLE_MAP = 0x00004000
HSA_CAP_TRAP_DEBUG_SUPPORT = 0x00008000
HSA_CAP_TRAP_DEBUG_WAVE_LAUNCH_TRAP_OVERRIDE_SUPPORTED = 0x00010000
HSA_CAP_TRAP_DEBUG_WAVE_LAUNCH_MODE_SUPPORTED = 0x00020000
HSA_CAP_TRAP_DEBUG_PRECISE_MEMORY_OPERATIONS_SUPPORTED = 0x00040000
HSA_CAP_RESERVED_WAS_SRAM_EDCSUPPORTED = 0x00080000  # must stay 0: old user mode depends on it
HSA_CAP_MEM_EDCSUPPORTED = 0x00100000
HSA_CAP_RASEVENTNOTIFY = 0x00200000
HSA_CAP_ASIC_REVISION_MASK = 0x03C00000
HSA_CAP_ASIC_REVISION_SHIFT = 22
HSA_CAP_SRAM_EDCSUPPORTED = 0x04000000
HSA_CAP_SVMAPI_SUPPORTED = 0x08000000
HSA_CAP_FLAGS_COHERENTHOSTACCESS = 0x10000000
HSA_CAP_TRAP_DEBUG_FIRMWARE_SUPPORTED = 0x20000000
HSA_CAP_TRAP_DEBUG_PRECISE_ALU_OPERATIONS_SUPPORTED = 0x40000000
HSA_CAP_PER_QUEUE_RESET_SUPPORTED = 0x80000000
HSA_CAP2_PER_SDMA_QUEUE_RESET_SUPPORTED = 0x00000001  # `capability2`

# mem_banks heap_type / flags
HSA_MEM_HEAP_TYPE_SYSTEM = 0
HSA_MEM_HEAP_TYPE_FB_PUBLIC = 1  # VRAM fully CPU-visible (large BAR)
HSA_MEM_HEAP_TYPE_FB_PRIVATE = 2
HSA_MEM_HEAP_TYPE_GPU_GDS = 3
HSA_MEM_HEAP_TYPE_GPU_LDS = 4
HSA_MEM_HEAP_TYPE_GPU_SCRATCH = 5
HSA_MEM_FLAGS_HOT_PLUGGABLE = 0x1
HSA_MEM_FLAGS_NON_VOLATILE = 0x2

# caches type bits
HSA_CACHE_TYPE_DATA = 0x1
HSA_CACHE_TYPE_INSTRUCTION = 0x2
HSA_CACHE_TYPE_CPU = 0x4
HSA_CACHE_TYPE_HSACU = 0x8

# io_links type (CRAT link types) / flags
HSA_IOLINK_TYPE_UNDEFINED = 0
HSA_IOLINK_TYPE_HYPERTRANSPORT = 1
HSA_IOLINK_TYPE_PCIEXPRESS = 2
HSA_IOLINK_TYPE_AMBA = 3
HSA_IOLINK_TYPE_MIPI = 4
HSA_IOLINK_TYPE_QPI_1_1 = 5
HSA_IOLINK_TYPE_RAPID_IO = 8
HSA_IOLINK_TYPE_INFINIBAND = 9
HSA_IOLINK_TYPE_XGMI = 11
HSA_IOLINK_TYPE_XGOP = 12
HSA_IOLINK_TYPE_GZ = 13
HSA_IOLINK_TYPE_ETHERNET_RDMA = 14
HSA_IOLINK_TYPE_RDMA_OTHER = 15
HSA_IOLINK_TYPE_OTHER = 16
HSA_IOLINK_FLAGS_ENABLED = 1 << 0
HSA_IOLINK_FLAGS_NON_COHERENT = 1 << 1
HSA_IOLINK_FLAGS_NO_ATOMICS_32_BIT = 1 << 2
HSA_IOLINK_FLAGS_NO_ATOMICS_64_BIT = 1 << 3
HSA_IOLINK_FLAGS_NO_PEER_TO_PEER_DMA = 1 << 4


# --------------------------------------------------------------------------------------------------------------
# Compute-queue buffer sizes the driver checks at CREATE_QUEUE (kfd_queue.c, facts 1.6): both the runtime,
# which must allocate them, and the emulated driver, which validates them, compute them here.
# --------------------------------------------------------------------------------------------------------------

KFD_EOP_BUFFER_SIZE = 4096  # gfx9+


@dataclass(frozen=True)
class QueueBufferSizes:
    ctl_stack_size: int
    cwsr_size: int  # per-XCC context save area: what ctx_save_restore_size must at least be
    debug_memory_size: int
    num_xcc: int
    eop_buffer_size: int = KFD_EOP_BUFFER_SIZE

    def cwsr_bo_size(self, ctx_save_restore_size: int | None = None) -> int:
        """Bytes the CWSR BO must span: (ctx save size + debug area) per XCC, page aligned."""
        ctx = self.cwsr_size if ctx_save_restore_size is None else ctx_save_restore_size
        return _align((ctx + self.debug_memory_size) * self.num_xcc, 4096)


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def queue_buffer_sizes(props: dict[str, int]) -> QueueBufferSizes:
    """kfd_queue_ctx_save_restore_size() from a GPU node's sysfs properties."""
    ver = props["gfx_target_version"]
    num_xcc = max(props.get("num_xcc", 1), 1)
    cu_num = props["simd_count"] // props["simd_per_cu"] // num_xcc
    if ver < 100100:
        wave_num = min(cu_num * 40, props["array_count"] // props["simd_arrays_per_engine"] * 512)
    else:
        wave_num = cu_num * 32
    if ver in (90010, 90402, 90500):  # gfx90a, gfx942, gfx950: unified VGPR+AGPR file
        vgpr = 0x80000
    elif ver in (110000, 110001, 120000, 120001):  # gfx1100, gfx1101, gfx1200, gfx1201
        vgpr = 0x60000
    else:
        vgpr = 0x40000
    lds = props["lds_size_in_kb"] * 1024 if ver == 90500 else 0x10000
    wg_data = _align(cu_num * (vgpr + 0x4000 + lds + 0x1000), 4096)
    ctl_stack = _align(40 + wave_num * (12 if ver >= 100100 else 8) + 8, 4096)
    if 100100 <= ver < 110000:
        ctl_stack = min(ctl_stack, 0x7000)
    return QueueBufferSizes(ctl_stack, ctl_stack + wg_data, _align(wave_num * 32, 64), num_xcc)
