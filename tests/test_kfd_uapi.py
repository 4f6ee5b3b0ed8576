"""Specification of hcqsim.kfd_uapi: the KFD user API must be byte-identical to Linux kfd_ioctl.h.

Every expected number below is written by hand from HARDWARE_FACTS.md (sections 1.1-1.5 and 2), never computed
from the module, so a layout mistake in the module cannot hide behind the test.
"""
import ctypes

import pytest

from hcqsim import kfd_uapi as k

# -- 1.2: struct layouts, (name, offset, size) in declaration order ---------------------------------------------

LAYOUTS = {
    "GetVersionArgs": (8, [("major_version", 0, 4), ("minor_version", 4, 4)]),
    "CreateQueueArgs": (96, [
        ("ring_base_address", 0, 8), ("write_pointer_address", 8, 8), ("read_pointer_address", 16, 8),
        ("doorbell_offset", 24, 8), ("ring_size", 32, 4), ("gpu_id", 36, 4), ("queue_type", 40, 4),
        ("queue_percentage", 44, 4), ("queue_priority", 48, 4), ("queue_id", 52, 4),
        ("eop_buffer_address", 56, 8), ("eop_buffer_size", 64, 8), ("ctx_save_restore_address", 72, 8),
        ("ctx_save_restore_size", 80, 4), ("ctl_stack_size", 84, 4), ("sdma_engine_id", 88, 4), ("pad", 92, 4)]),
    "DestroyQueueArgs": (8, [("queue_id", 0, 4), ("pad", 4, 4)]),
    "UpdateQueueArgs": (24, [("ring_base_address", 0, 8), ("queue_id", 8, 4), ("ring_size", 12, 4),
                             ("queue_percentage", 16, 4), ("queue_priority", 20, 4)]),
    "SetMemoryPolicyArgs": (32, [("alternate_aperture_base", 0, 8), ("alternate_aperture_size", 8, 8),
                                 ("gpu_id", 16, 4), ("default_policy", 20, 4), ("alternate_policy", 24, 4),
                                 ("misc_process_flag", 28, 4)]),
    "GetClockCountersArgs": (40, [("gpu_clock_counter", 0, 8), ("cpu_clock_counter", 8, 8),
                                  ("system_clock_counter", 16, 8), ("system_clock_freq", 24, 8), ("gpu_id", 32, 4),
                                  ("pad", 36, 4)]),
    "ProcessDeviceApertures": (56, [("lds_base", 0, 8), ("lds_limit", 8, 8), ("scratch_base", 16, 8),
                                    ("scratch_limit", 24, 8), ("gpuvm_base", 32, 8), ("gpuvm_limit", 40, 8),
                                    ("gpu_id", 48, 4), ("pad", 52, 4)]),
    "GetProcessAperturesArgs": (400, [("process_apertures", 0, 392), ("num_of_nodes", 392, 4), ("pad", 396, 4)]),
    "GetProcessAperturesNewArgs": (16, [("kfd_process_device_apertures_ptr", 0, 8), ("num_of_nodes", 8, 4),
                                        ("pad", 12, 4)]),
    "CreateEventArgs": (32, [("event_page_offset", 0, 8), ("event_trigger_data", 8, 4), ("event_type", 12, 4),
                             ("auto_reset", 16, 4), ("node_id", 20, 4), ("event_id", 24, 4),
                             ("event_slot_index", 28, 4)]),
    "DestroyEventArgs": (8, [("event_id", 0, 4), ("pad", 4, 4)]),
    "SetEventArgs": (8, [("event_id", 0, 4), ("pad", 4, 4)]),
    "ResetEventArgs": (8, [("event_id", 0, 4), ("pad", 4, 4)]),
    "EventData": (48, [("u", 0, 32), ("kfd_event_data_ext", 32, 8), ("event_id", 40, 4), ("pad", 44, 4)]),
    "HwExceptionData": (16, [("reset_type", 0, 4), ("reset_cause", 4, 4), ("memory_lost", 8, 4), ("gpu_id", 12, 4)]),
    "SignalEventData": (8, [("last_event_age", 0, 8)]),
    "WaitEventsArgs": (24, [("events_ptr", 0, 8), ("num_events", 8, 4), ("wait_for_all", 12, 4), ("timeout", 16, 4),
                            ("wait_result", 20, 4)]),
    "AcquireVmArgs": (8, [("drm_fd", 0, 4), ("gpu_id", 4, 4)]),
    "AllocMemoryOfGpuArgs": (40, [("va_addr", 0, 8), ("size", 8, 8), ("handle", 16, 8), ("mmap_offset", 24, 8),
                                  ("gpu_id", 32, 4), ("flags", 36, 4)]),
    "FreeMemoryOfGpuArgs": (8, [("handle", 0, 8)]),
    "MapMemoryToGpuArgs": (24, [("handle", 0, 8), ("device_ids_array_ptr", 8, 8), ("n_devices", 16, 4),
                                ("n_success", 20, 4)]),
    "UnmapMemoryFromGpuArgs": (24, [("handle", 0, 8), ("device_ids_array_ptr", 8, 8), ("n_devices", 16, 4),
                                    ("n_success", 20, 4)]),
    "SetXnackModeArgs": (4, [("xnack_enabled", 0, 4)]),
    "AvailableMemoryArgs": (16, [("available", 0, 8), ("gpu_id", 8, 4), ("pad", 12, 4)]),
    "RuntimeEnableArgs": (16, [("r_debug", 0, 8), ("mode_mask", 8, 4), ("capabilities_mask", 12, 4)]),
    "RuntimeInfo": (16, [("r_debug", 0, 8), ("runtime_state", 8, 4), ("ttmp_setup", 12, 4)]),
    "SetCuMaskArgs": (16, [("queue_id", 0, 4), ("num_cu_mask", 4, 4), ("cu_mask_ptr", 8, 8)]),
    "SetScratchBackingVaArgs": (16, [("va_addr", 0, 8), ("gpu_id", 8, 4), ("pad", 12, 4)]),
    "SetTrapHandlerArgs": (24, [("tba_addr", 0, 8), ("tma_addr", 8, 8), ("gpu_id", 16, 4), ("pad", 20, 4)]),
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_struct_has_the_kernel_size_and_field_offsets(name):
    size, fields = LAYOUTS[name]
    cls = getattr(k, name)
    assert ctypes.sizeof(cls) == size
    assert k.struct_fields(cls) == fields


def test_memory_exception_data_is_32_bytes_with_the_failure_flags_first():
    assert ctypes.sizeof(k.MemoryExceptionData) == 32
    assert k.struct_fields(k.MemoryExceptionData, flatten=True) == [
        ("failure.NotPresent", 0, 4), ("failure.ReadOnly", 4, 4), ("failure.NoExecute", 8, 4),
        ("failure.imprecise", 12, 4), ("va", 16, 8), ("gpu_id", 24, 4), ("ErrorType", 28, 4)]


def test_memory_exception_flags_read_directly_as_in_the_facts_sheet():
    m = k.MemoryExceptionData()
    m.NotPresent = 1
    assert m.failure.NotPresent == 1


def test_event_data_union_members_all_start_at_offset_zero():
    ev = k.EventData()
    ev.signal_event_data.last_event_age = 0x1122334455667788
    assert ev.memory_exception_data.NotPresent == 0x55667788  # same bytes, seen through another member
    assert ev.hw_exception_data.reset_cause == 0x11223344
    assert ctypes.sizeof(k.EventDataUnion) == 32


def test_structs_are_little_endian():
    a = k.CreateQueueArgs(ring_size=0x11223344)
    assert bytes(a)[32:36] == b"\x44\x33\x22\x11"


def test_xnack_mode_is_signed_so_a_negative_value_queries():
    a = k.SetXnackModeArgs(xnack_enabled=k.KFD_XNACK_QUERY)
    assert a.xnack_enabled == -1 and bytes(a) == b"\xff\xff\xff\xff"


def test_create_queue_was_88_bytes_before_uapi_1_17():
    assert k.CREATE_QUEUE_ARGS_SIZE_PRE_1_17 == 88
    assert k.struct_fields(k.CreateQueueArgs)[-2] == ("sdma_engine_id", 88, 4)  # the 1.17 addition starts at 88


def test_old_process_apertures_holds_seven_56_byte_entries():
    assert k.NUM_OF_SUPPORTED_GPUS == 7
    assert ctypes.sizeof(k.GetProcessAperturesArgs().process_apertures) == 392


# -- 1.1: request numbers ---------------------------------------------------------------------------------------

REQUESTS = [  # name, nr, direction, arg size, request: copied from the 1.1 table
    ("GET_VERSION", 0x01, "R", 8, 0x80084B01),
    ("CREATE_QUEUE", 0x02, "RW", 96, 0xC0604B02),
    ("DESTROY_QUEUE", 0x03, "RW", 8, 0xC0084B03),
    ("SET_MEMORY_POLICY", 0x04, "W", 32, 0x40204B04),
    ("GET_CLOCK_COUNTERS", 0x05, "RW", 40, 0xC0284B05),
    ("GET_PROCESS_APERTURES", 0x06, "R", 400, 0x81904B06),
    ("UPDATE_QUEUE", 0x07, "W", 24, 0x40184B07),
    ("CREATE_EVENT", 0x08, "RW", 32, 0xC0204B08),
    ("DESTROY_EVENT", 0x09, "W", 8, 0x40084B09),
    ("SET_EVENT", 0x0A, "W", 8, 0x40084B0A),
    ("RESET_EVENT", 0x0B, "W", 8, 0x40084B0B),
    ("WAIT_EVENTS", 0x0C, "RW", 24, 0xC0184B0C),
    ("SET_SCRATCH_BACKING_VA", 0x11, "RW", 16, 0xC0104B11),
    ("GET_TILE_CONFIG", 0x12, "RW", 40, 0xC0284B12),
    ("SET_TRAP_HANDLER", 0x13, "W", 24, 0x40184B13),
    ("GET_PROCESS_APERTURES_NEW", 0x14, "RW", 16, 0xC0104B14),
    ("ACQUIRE_VM", 0x15, "W", 8, 0x40084B15),
    ("ALLOC_MEMORY_OF_GPU", 0x16, "RW", 40, 0xC0284B16),
    ("FREE_MEMORY_OF_GPU", 0x17, "W", 8, 0x40084B17),
    ("MAP_MEMORY_TO_GPU", 0x18, "RW", 24, 0xC0184B18),
    ("UNMAP_MEMORY_FROM_GPU", 0x19, "RW", 24, 0xC0184B19),
    ("SET_CU_MASK", 0x1A, "W", 16, 0x40104B1A),
    ("GET_QUEUE_WAVE_STATE", 0x1B, "RW", 24, 0xC0184B1B),
    ("GET_DMABUF_INFO", 0x1C, "RW", 32, 0xC0204B1C),
    ("IMPORT_DMABUF", 0x1D, "RW", 24, 0xC0184B1D),
    ("ALLOC_QUEUE_GWS", 0x1E, "RW", 16, 0xC0104B1E),
    ("SMI_EVENTS", 0x1F, "RW", 8, 0xC0084B1F),
    ("SVM", 0x20, "RW", 24, 0xC0184B20),
    ("SET_XNACK_MODE", 0x21, "RW", 4, 0xC0044B21),
    ("CRIU_OP", 0x22, "RW", 56, 0xC0384B22),
    ("AVAILABLE_MEMORY", 0x23, "RW", 16, 0xC0104B23),
    ("EXPORT_DMABUF", 0x24, "RW", 16, 0xC0104B24),
    ("RUNTIME_ENABLE", 0x25, "RW", 16, 0xC0104B25),
]


@pytest.mark.parametrize("name, nr, direction, size, value", REQUESTS, ids=[r[0] for r in REQUESTS])
def test_ioctl_request_value_matches_the_facts_table(name, nr, direction, size, value):
    io = k.IOCTLS[name]
    assert (io.nr, io.direction, io.size, io.request) == (nr, direction, size, value)
    assert getattr(k, f"AMDKFD_IOC_{name}") == value


def test_dbg_trap_request_uses_its_32_byte_union_struct():
    # Not in the 1.1 table ("union"); derived from the header: u32 pid, u32 op, 24-byte union.
    assert k.IOCTLS["DBG_TRAP"].size == 32
    assert k.AMDKFD_IOC_DBG_TRAP == 0xC0204B26


def test_retired_debugger_ioctls_occupy_0x0d_to_0x10():
    retired = {io.nr for io in k.IOCTLS.values() if io.retired}
    assert retired == {0x0D, 0x0E, 0x0F, 0x10}


def test_the_table_covers_every_core_command_nr():
    assert {io.nr for io in k.IOCTLS.values()} == set(range(0x01, 0x27))
    assert (k.AMDKFD_COMMAND_START, k.AMDKFD_COMMAND_END) == (0x01, 0x27)


def test_request_encoding_is_dir_size_type_nr():
    assert k.AMDKFD_IOCTL_BASE == 0x4B
    assert k._IOC(3, "K", 0x02, 96) == 0xC0604B02
    assert k.IOWR("K", 0x02, k.CreateQueueArgs) == 0xC0604B02
    assert k.IOR(0x4B, 0x01, 8) == 0x80084B01
    assert k.IOW("K", 0x04, 32) == 0x40204B04


def test_request_decodes_back_to_its_parts():
    assert k.ioc_decode(0xC0604B02) == (3, 0x4B, 0x02, 96)


def test_request_fields_must_fit_their_bit_widths():
    with pytest.raises(ValueError):
        k._IOC(3, "K", 0x02, 1 << 14)  # size has 14 bits
    with pytest.raises(ValueError):
        k._IOC(3, "K", 0x100, 8)


def test_old_88_byte_create_queue_request():
    assert k.AMDKFD_IOC_CREATE_QUEUE_PRE_1_17 == 0xC0584B02


# -- lookups ----------------------------------------------------------------------------------------------------


def test_lookup_by_nr_finds_the_command():
    assert k.ioctl_by_nr(0x02) is k.IOCTLS["CREATE_QUEUE"]
    assert k.ioctl_by_nr(0x0C).struct is k.WaitEventsArgs


def test_lookup_by_request_finds_the_command():
    assert k.ioctl_by_request(0xC0604B02).name == "CREATE_QUEUE"
    assert k.ioctl_by_request(0x80084B01).struct is k.GetVersionArgs


def test_lookup_of_an_unknown_command_raises_key_error():
    with pytest.raises(KeyError):
        k.ioctl_by_nr(0x27)
    with pytest.raises(KeyError):
        k.ioctl_by_request(0xC0604B7F)


def test_an_old_sized_request_is_dispatched_by_nr_like_the_kernel():
    with pytest.raises(KeyError):
        k.ioctl_by_request(0xC0584B02)  # not today's exact request...
    assert k.ioctl_by_nr(k.ioc_decode(0xC0584B02)[2]).name == "CREATE_QUEUE"  # ...but the kernel keys on nr


# -- 1.3: constants ---------------------------------------------------------------------------------------------


def test_queue_types():
    assert (k.KFD_IOC_QUEUE_TYPE_COMPUTE, k.KFD_IOC_QUEUE_TYPE_SDMA, k.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
            k.KFD_IOC_QUEUE_TYPE_SDMA_XGMI, k.KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID) == (0, 1, 2, 3, 4)
    assert k.names_of("KFD_IOC_QUEUE_TYPE_")[2] == "COMPUTE_AQL"


ALLOC_FLAGS = [("VRAM", 0x1), ("GTT", 0x2), ("USERPTR", 0x4), ("DOORBELL", 0x8), ("MMIO_REMAP", 0x10),
               ("CONTIGUOUS", 0x00800000), ("EXT_COHERENT", 0x01000000), ("UNCACHED", 0x02000000),
               ("COHERENT", 0x04000000), ("AQL_QUEUE_MEM", 0x08000000), ("NO_SUBSTITUTE", 0x10000000),
               ("PUBLIC", 0x20000000), ("EXECUTABLE", 0x40000000), ("WRITABLE", 0x80000000)]


@pytest.mark.parametrize("name, mask", ALLOC_FLAGS, ids=[f[0] for f in ALLOC_FLAGS])
def test_alloc_flag_mask(name, mask):
    assert getattr(k, f"KFD_IOC_ALLOC_MEM_FLAGS_{name}") == mask


def test_alloc_flags_describe_themselves_for_error_messages():
    flags = 0x2 | 0x04000000 | 0x02000000 | 0x10000000 | 0x40000000 | 0x80000000  # tinygrad's "uncached" BO
    assert k.describe_alloc_flags(flags) == "GTT|UNCACHED|COHERENT|NO_SUBSTITUTE|EXECUTABLE|WRITABLE"
    assert k.describe_alloc_flags(0x1 | 0x100) == "VRAM|0x100"


def test_event_types():
    assert [k.KFD_IOC_EVENT_SIGNAL, k.KFD_IOC_EVENT_NODECHANGE, k.KFD_IOC_EVENT_DEVICESTATECHANGE,
            k.KFD_IOC_EVENT_HW_EXCEPTION, k.KFD_IOC_EVENT_SYSTEM_EVENT, k.KFD_IOC_EVENT_DEBUG_EVENT,
            k.KFD_IOC_EVENT_PROFILE_EVENT, k.KFD_IOC_EVENT_QUEUE_EVENT, k.KFD_IOC_EVENT_MEMORY] == list(range(9))


def test_wait_results():
    assert (k.KFD_IOC_WAIT_RESULT_COMPLETE, k.KFD_IOC_WAIT_RESULT_TIMEOUT, k.KFD_IOC_WAIT_RESULT_FAIL) == (0, 1, 2)


def test_limits():
    assert k.KFD_SIGNAL_EVENT_LIMIT == 4096
    assert k.KFD_MAX_QUEUE_PERCENTAGE == 100
    assert k.KFD_MAX_QUEUE_PRIORITY == 15
    assert k.KFD_MIN_QUEUE_RING_SIZE == 1024
    assert k.KFD_INVALID_FD == 0xFFFFFFFF


def test_cache_policies():
    assert (k.KFD_IOC_CACHE_POLICY_COHERENT, k.KFD_IOC_CACHE_POLICY_NONCOHERENT) == (0, 1)


def test_version_we_model_is_1_17():
    assert (k.KFD_IOCTL_MAJOR_VERSION, k.KFD_IOCTL_MINOR_VERSION) == (1, 17)


def test_exception_enums():
    assert (k.KFD_MEM_ERR_NO_RAS, k.KFD_MEM_ERR_SRAM_ECC, k.KFD_MEM_ERR_POISON_CONSUMED,
            k.KFD_MEM_ERR_GPU_HANG) == (0, 1, 2, 3)
    assert (k.KFD_HW_EXCEPTION_WHOLE_GPU_RESET, k.KFD_HW_EXCEPTION_PER_ENGINE_RESET) == (0, 1)
    assert (k.KFD_HW_EXCEPTION_GPU_HANG, k.KFD_HW_EXCEPTION_ECC) == (0, 1)


def test_runtime_enable_mode_bits():
    assert (k.KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK, k.KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK) == (1, 2)


def test_event_slot_and_ids():
    assert k.UNSIGNALED_EVENT_SLOT == 0xFFFFFFFFFFFFFFFF
    assert k.KFD_SIGNAL_EVENT_PAGE_SIZE == 0x8000  # 4096 u64 slots
    assert k.KFD_FIRST_SIGNAL_EVENT_ID == 1
    assert k.KFD_FIRST_NONSIGNAL_EVENT_ID == 0x40000000


def test_bo_handle_carries_the_gpu_id_in_its_high_half():
    assert k.make_handle(4672, 3) == 0x0000124000000003
    assert k.split_handle(0x0000124000000003) == (4672, 3)


def test_mmio_remap_register_offsets():
    assert (k.KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL, k.KFD_MMIO_REMAP_HDP_REG_FLUSH_CNTL) == (0, 4)


# -- 1.5: mmap offsets and doorbells ----------------------------------------------------------------------------


def test_mmap_type_constants():
    assert k.KFD_MMAP_TYPE_DOORBELL == 0xC000000000000000
    assert k.KFD_MMAP_TYPE_EVENTS == 0x8000000000000000
    assert k.KFD_MMAP_TYPE_RESERVED_MEM == 0x4000000000000000
    assert k.KFD_MMAP_TYPE_MMIO == 0
    assert k.KFD_MMAP_GPU_ID_SHIFT == 46


@pytest.mark.parametrize("mtype", [0xC000000000000000, 0x8000000000000000, 0x4000000000000000, 0])
@pytest.mark.parametrize("gpu_id, value", [(0, 0), (4672, 0x1FF8), (0xFFFF, (1 << 46) - 1)])
def test_mmap_offset_round_trips(mtype, gpu_id, value):
    assert k.decode_mmap_offset(k.mmap_offset(mtype, gpu_id, value)) == (mtype, gpu_id, value)


def test_doorbell_offset_example():
    # gpu 4672 (0x1240), second doorbell of the slice (byte 8): DOORBELL | 0x1240 << 46 | 8
    off = k.mmap_offset(k.KFD_MMAP_TYPE_DOORBELL, 4672, 8)
    assert off == 0xC490000000000008
    assert k.doorbell_mmap(off) == (0xC490000000000000, 8)  # mmap the slice at off & ~0x1FFF, ring at +8


def test_mmio_remap_offset_for_a_gpu():
    assert k.mmap_offset(k.KFD_MMAP_TYPE_MMIO, 0x1240) == 0x0490000000000000


def test_mmap_offset_rejects_out_of_range_parts():
    with pytest.raises(ValueError):
        k.mmap_offset(k.KFD_MMAP_TYPE_DOORBELL, 1 << 16)
    with pytest.raises(ValueError):
        k.mmap_offset(k.KFD_MMAP_TYPE_DOORBELL, 1, 1 << 46)
    with pytest.raises(ValueError):
        k.mmap_offset(3, 1)  # a bare 2-bit type index is not a KFD_MMAP_TYPE_* constant


def test_doorbell_slice_is_1024_doorbells_of_8_bytes():
    assert (k.KFD_DOORBELL_SIZE, k.KFD_DOORBELL_SLICE_SIZE) == (8, 8192)


# -- 2: sysfs topology ------------------------------------------------------------------------------------------

NODE_KEYS_2_2 = [  # 2.2 in print order, grouped rows expanded
    "cpu_cores_count", "simd_count", "mem_banks_count", "caches_count", "io_links_count", "p2p_links_count",
    "cpu_core_id_base", "simd_id_base", "max_waves_per_simd", "lds_size_in_kb", "gds_size_in_kb", "num_gws",
    "wave_front_size", "array_count", "simd_arrays_per_engine", "cu_per_simd_array", "simd_per_cu",
    "max_slots_scratch_cu", "gfx_target_version", "vendor_id", "device_id", "location_id", "domain",
    "drm_render_minor", "hive_id", "num_sdma_engines", "num_sdma_xgmi_engines", "num_sdma_queues_per_engine",
    "num_cp_queues", "max_engine_clk_fcompute", "local_mem_size", "fw_version", "capability", "capability2",
    "debug_prop", "sdma_fw_version", "unique_id", "num_xcc", "max_engine_clk_ccompute"]

# 2.5, 7900 XTX capture (an older kernel: no capability2)
EXAMPLE_7900XTX_KEYS = """cpu_cores_count simd_count mem_banks_count caches_count io_links_count p2p_links_count
cpu_core_id_base simd_id_base max_waves_per_simd lds_size_in_kb gds_size_in_kb num_gws wave_front_size array_count
simd_arrays_per_engine cu_per_simd_array simd_per_cu max_slots_scratch_cu gfx_target_version vendor_id device_id
location_id domain drm_render_minor hive_id num_sdma_engines num_sdma_xgmi_engines num_sdma_queues_per_engine
num_cp_queues max_engine_clk_fcompute local_mem_size fw_version capability debug_prop sdma_fw_version unique_id
num_xcc max_engine_clk_ccompute""".split()


def test_node_property_keys_are_in_kernel_print_order():
    assert list(k.NODE_PROPERTY_KEYS) == NODE_KEYS_2_2


def test_real_capture_lists_its_keys_in_the_same_order():
    assert [key for key in k.NODE_PROPERTY_KEYS if key in EXAMPLE_7900XTX_KEYS] == EXAMPLE_7900XTX_KEYS


def test_cpu_nodes_omit_the_gpu_only_block_but_end_with_the_cpu_clock():
    assert k.GPU_ONLY_NODE_PROPERTY_KEYS[0] == "max_engine_clk_fcompute"
    assert k.GPU_ONLY_NODE_PROPERTY_KEYS[-1] == "num_xcc"
    assert "max_engine_clk_ccompute" not in k.GPU_ONLY_NODE_PROPERTY_KEYS


def test_64_bit_node_keys():
    assert k.NODE_PROPERTY_KEYS_64BIT == {"hive_id", "local_mem_size", "debug_prop", "unique_id"}


def test_sub_entry_keys():
    assert k.MEM_BANK_PROPERTY_KEYS == ("heap_type", "size_in_bytes", "flags", "width", "mem_clk_max")
    assert k.IO_LINK_PROPERTY_KEYS == (
        "type", "version_major", "version_minor", "node_from", "node_to", "weight", "min_latency", "max_latency",
        "min_bandwidth", "max_bandwidth", "recommended_transfer_size", "recommended_sdma_engine_id_mask", "flags")
    assert k.CACHE_PROPERTY_KEYS[0] == "processor_id_low" and k.CACHE_PROPERTY_KEYS[-1] == "sibling_map"


def test_capability_bits():
    assert (k.HSA_CAP_HOT_PLUGGABLE, k.HSA_CAP_ATS_PRESENT, k.HSA_CAP_SHARED_WITH_GRAPHICS) == (0x1, 0x2, 0x4)
    assert (k.HSA_CAP_QUEUE_SIZE_POW2, k.HSA_CAP_QUEUE_SIZE_32BIT) == (0x8, 0x10)
    assert (k.HSA_CAP_QUEUE_IDLE_EVENT, k.HSA_CAP_VA_LIMIT, k.HSA_CAP_WATCH_POINTS_SUPPORTED) == (0x20, 0x40, 0x80)
    assert k.HSA_CAP_AQL_QUEUE_DOUBLE_MAP == 0x4000
    assert (k.HSA_CAP_TRAP_DEBUG_SUPPORT, k.HSA_CAP_TRAP_DEBUG_WAVE_LAUNCH_TRAP_OVERRIDE_SUPPORTED,
            k.HSA_CAP_TRAP_DEBUG_WAVE_LAUNCH_MODE_SUPPORTED,
            k.HSA_CAP_TRAP_DEBUG_PRECISE_MEMORY_OPERATIONS_SUPPORTED) == (0x8000, 0x10000, 0x20000, 0x40000)
    assert (k.HSA_CAP_MEM_EDCSUPPORTED, k.HSA_CAP_RASEVENTNOTIFY) == (0x100000, 0x200000)
    assert (k.HSA_CAP_ASIC_REVISION_MASK, k.HSA_CAP_ASIC_REVISION_SHIFT) == (0x03C00000, 22)
    assert (k.HSA_CAP_SRAM_EDCSUPPORTED, k.HSA_CAP_SVMAPI_SUPPORTED,
            k.HSA_CAP_FLAGS_COHERENTHOSTACCESS) == (0x4000000, 0x8000000, 0x10000000)
    assert (k.HSA_CAP_TRAP_DEBUG_FIRMWARE_SUPPORTED, k.HSA_CAP_TRAP_DEBUG_PRECISE_ALU_OPERATIONS_SUPPORTED,
            k.HSA_CAP_PER_QUEUE_RESET_SUPPORTED) == (0x20000000, 0x40000000, 0x80000000)
    assert k.HSA_CAP2_PER_SDMA_QUEUE_RESET_SUPPORTED == 0x1


def test_7900xtx_capability_decodes_as_the_facts_sheet_says():
    cap = 671588992
    assert cap == 0x2807A280
    watch_log2 = (cap & k.HSA_CAP_WATCH_POINTS_TOTALBITS_MASK) >> k.HSA_CAP_WATCH_POINTS_TOTALBITS_SHIFT
    assert cap & k.HSA_CAP_WATCH_POINTS_SUPPORTED and 1 << watch_log2 == 4
    doorbell = (cap & k.HSA_CAP_DOORBELL_TYPE_TOTALBITS_MASK) >> k.HSA_CAP_DOORBELL_TYPE_TOTALBITS_SHIFT
    assert doorbell == k.HSA_CAP_DOORBELL_TYPE_2_0 == 2
    assert cap & k.HSA_CAP_SVMAPI_SUPPORTED and cap & k.HSA_CAP_TRAP_DEBUG_FIRMWARE_SUPPORTED


def test_heap_types_and_link_types():
    assert [k.HSA_MEM_HEAP_TYPE_SYSTEM, k.HSA_MEM_HEAP_TYPE_FB_PUBLIC, k.HSA_MEM_HEAP_TYPE_FB_PRIVATE,
            k.HSA_MEM_HEAP_TYPE_GPU_GDS, k.HSA_MEM_HEAP_TYPE_GPU_LDS, k.HSA_MEM_HEAP_TYPE_GPU_SCRATCH] == list(range(6))
    assert (k.HSA_IOLINK_TYPE_PCIEXPRESS, k.HSA_IOLINK_TYPE_XGMI) == (2, 11)
    assert (k.HSA_IOLINK_FLAGS_ENABLED, k.HSA_IOLINK_FLAGS_NON_COHERENT, k.HSA_IOLINK_FLAGS_NO_ATOMICS_32_BIT,
            k.HSA_IOLINK_FLAGS_NO_ATOMICS_64_BIT, k.HSA_IOLINK_FLAGS_NO_PEER_TO_PEER_DMA) == (1, 2, 4, 8, 16)
    assert (k.HSA_MEM_FLAGS_HOT_PLUGGABLE, k.HSA_MEM_FLAGS_NON_VOLATILE) == (1, 2)
    assert (k.HSA_CACHE_TYPE_DATA, k.HSA_CACHE_TYPE_INSTRUCTION, k.HSA_CACHE_TYPE_CPU,
            k.HSA_CACHE_TYPE_HSACU) == (1, 2, 4, 8)


# -- the module stays importable without the emulator -----------------------------------------------------------


def test_module_imports_nothing_from_the_emulator():
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(k))
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imported <= {"__future__", "ctypes", "dataclasses"}
