"""The emulated KFD driver, driven the way a runtime drives /dev/kfd: EmulatedOS + kfd_uapi structs.

Expected numbers are written from HARDWARE_FACTS.md (sections 1 and 2) and the Linux sources cited in
hcqsim/kfd/, never read back from the module under test.
"""
import ctypes
import errno

import pytest

from hcqsim import kfd_uapi as k
from hcqsim import pm4, sdma
from hcqsim.boundary import (MAP_ANONYMOUS, MAP_FIXED, MAP_NORESERVE, MAP_PRIVATE, MAP_SHARED, PROT_NONE, PROT_READ,
                             PROT_WRITE)
from hcqsim.errors import DeadlockError
from hcqsim.kfd import EmulatedSystem, queue_sizes
from hcqsim.targets import get_target

ROOT = "/sys/devices/virtual/kfd/kfd/topology"
RW = PROT_READ | PROT_WRITE
COMMON = k.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | k.KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE | \
    k.KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE
GTT = k.KFD_IOC_ALLOC_MEM_FLAGS_GTT | k.KFD_IOC_ALLOC_MEM_FLAGS_COHERENT | k.KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED | COMMON
VRAM = k.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | k.KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC | COMMON


def parse(text: str) -> dict:
    return {key: int(v) for key, v in (line.split() for line in text.splitlines())}


class Mem:
    def __init__(self, va, size, handle, offset, gpu):
        self.va, self.size, self.handle, self.offset, self.gpu = va, size, handle, offset, gpu

    def u32(self, i=0):
        return ctypes.c_uint32.from_address(self.va + 4 * i)

    def u64(self, i=0):
        return ctypes.c_uint64.from_address(self.va + 8 * i)


class Queue:
    def __init__(self, qid, ring, ptrs, doorbell, gpu, unit):
        self.qid, self.ring, self.ptrs, self.doorbell, self.gpu, self.unit = qid, ring, ptrs, doorbell, gpu, unit
        self.wptr = 0  # in queue units


class Runtime:
    """A tiny KFD runtime written only against the OSBoundary, following the bring-up of facts 1.7."""

    target = "gfx1100"  # for the CWSR sizes a runtime computes from the node properties

    def __init__(self, os_, acquire=True):
        self.os = os_
        self.kfd = os_.open("/dev/kfd")
        self.gpus = []  # (gpu_id, properties, drm fd)
        for n in os_.listdir(f"{ROOT}/nodes"):
            gpu_id = int(os_.read_text(f"{ROOT}/nodes/{n}/gpu_id"))
            if gpu_id:
                props = parse(os_.read_text(f"{ROOT}/nodes/{n}/properties"))
                self.gpus.append((gpu_id, props, os_.open(f"/dev/dri/renderD{props['drm_render_minor']}")))
        self.version = self.ioctl("GET_VERSION")
        if acquire:
            for gpu_id, _, drm in self.gpus:
                self.ioctl("ACQUIRE_VM", drm_fd=drm, gpu_id=gpu_id)
        self.doorbells = {}

    def gpu_id(self, i=0):
        return self.gpus[i][0]

    def ioctl(self, name, **fields):
        args = k.IOCTLS[name].struct(**fields)
        self.os.ioctl(self.kfd, getattr(k, f"AMDKFD_IOC_{name}"), args)
        return args

    def reserve(self, size):
        return self.os.mmap(0, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)

    def alloc(self, size, flags=GTT, gpu=0, map_to=None, va=None):
        gpu_id, _, drm = self.gpus[gpu]
        map_to = (gpu,) if map_to is None else map_to
        va = self.reserve(size) if va is None else va
        a = self.ioctl("ALLOC_MEMORY_OF_GPU", va_addr=va, size=size, gpu_id=gpu_id, flags=flags)
        mem = Mem(va, size, a.handle, a.mmap_offset, gpu)
        if map_to:
            self.map(mem, [self.gpu_id(i) for i in map_to])
        if flags & (k.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | k.KFD_IOC_ALLOC_MEM_FLAGS_GTT):
            assert self.os.mmap(va, size, RW, MAP_SHARED | MAP_FIXED, drm, a.mmap_offset) == va
        return mem

    def map(self, mem, gpu_ids, name="MAP_MEMORY_TO_GPU"):
        ids = (ctypes.c_uint32 * len(gpu_ids))(*gpu_ids)
        return self.ioctl(name, handle=mem.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=len(ids))

    def free(self, mem, gpu_ids=None):
        self.map(mem, gpu_ids or [self.gpu_id(mem.gpu)], "UNMAP_MEMORY_FROM_GPU")
        self.ioctl("FREE_MEMORY_OF_GPU", handle=mem.handle)
        self.os.munmap(mem.va, mem.size)

    # -- events --------------------------------------------------------------------------------------

    def event_page(self, gpu=0, size=0x8000):
        self.events = self.alloc(size, GTT, gpu=gpu, map_to=range(len(self.gpus)))
        return self.ioctl("CREATE_EVENT", event_page_offset=self.events.handle, event_type=k.KFD_IOC_EVENT_SIGNAL,
                          auto_reset=1)

    def event(self, etype=k.KFD_IOC_EVENT_SIGNAL, auto_reset=1):
        return self.ioctl("CREATE_EVENT", event_type=etype, auto_reset=auto_reset).event_id

    def wait(self, ids, timeout=1000, all_=False, ages=None):
        data = (k.EventData * len(ids))()
        for i, eid in enumerate(ids):
            data[i].event_id = eid
            if ages:
                data[i].signal_event_data.last_event_age = ages[i]
        a = self.ioctl("WAIT_EVENTS", events_ptr=ctypes.addressof(data), num_events=len(ids),
                       wait_for_all=int(all_), timeout=timeout)
        return a.wait_result, data

    # -- queues --------------------------------------------------------------------------------------

    def compute_args(self, gpu=0, ring_size=0x1000):
        sizes = queue_sizes(get_target(self.target))
        ring, ptrs = self.alloc(ring_size, GTT, gpu=gpu), self.alloc(0x1000, GTT, gpu=gpu)
        eop = self.alloc(sizes.eop_buffer_size, VRAM, gpu=gpu)
        cwsr = self.alloc(sizes.cwsr_bo_size(), VRAM, gpu=gpu)
        args = dict(ring_base_address=ring.va, ring_size=ring_size, read_pointer_address=ptrs.va,
                    write_pointer_address=ptrs.va + 8, gpu_id=self.gpu_id(gpu),
                    queue_type=k.KFD_IOC_QUEUE_TYPE_COMPUTE, queue_percentage=100, queue_priority=7,
                    eop_buffer_address=eop.va, eop_buffer_size=sizes.eop_buffer_size,
                    ctx_save_restore_address=cwsr.va, ctx_save_restore_size=sizes.cwsr_size,
                    ctl_stack_size=sizes.ctl_stack_size)
        return args, ring, ptrs

    def compute_queue(self, gpu=0, ring_size=0x1000):
        args, ring, ptrs = self.compute_args(gpu, ring_size)
        return self.queue_from(args, ring, ptrs, gpu, 4)

    def sdma_queue(self, gpu=0, ring_size=0x1000):
        ring, ptrs = self.alloc(ring_size, GTT, gpu=gpu), self.alloc(0x1000, GTT, gpu=gpu)
        args = dict(ring_base_address=ring.va, ring_size=ring_size, read_pointer_address=ptrs.va,
                    write_pointer_address=ptrs.va + 8, gpu_id=self.gpu_id(gpu), queue_type=k.KFD_IOC_QUEUE_TYPE_SDMA,
                    queue_percentage=100, queue_priority=7)
        return self.queue_from(args, ring, ptrs, gpu, 1)

    def queue_from(self, args, ring, ptrs, gpu, unit):
        a = self.ioctl("CREATE_QUEUE", **args)
        slice_off, in_slice = k.doorbell_mmap(a.doorbell_offset)
        if gpu not in self.doorbells:
            self.doorbells[gpu] = self.os.mmap(0, k.KFD_DOORBELL_SLICE_SIZE, RW, MAP_SHARED, self.kfd, slice_off)
        return Queue(a.queue_id, ring, ptrs, self.doorbells[gpu] + in_slice, gpu, unit)

    def submit(self, q, dwords):
        raw = bytes(b for d in dwords for b in (d & 0xFFFFFFFF).to_bytes(4, "little"))
        off = q.wptr * q.unit % q.ring.size
        ctypes.memmove(q.ring.va + off, raw, len(raw))
        q.wptr += len(raw) // q.unit
        q.ptrs.u64(1).value = q.wptr  # the u64 write pointer, then the doorbell
        self.os.ring_doorbell(q.doorbell, q.wptr)


@pytest.fixture
def system():
    s = EmulatedSystem(num_gpus=1)
    yield s
    s.close()


@pytest.fixture
def system2():
    s = EmulatedSystem(num_gpus=2)
    yield s
    s.close()


@pytest.fixture
def rt(system):
    return Runtime(system.os)


@pytest.fixture
def rt2(system2):
    return Runtime(system2.os)


def raises(err, fn, *a, **kw):
    with pytest.raises(OSError) as e:
        fn(*a, **kw)
    assert e.value.errno == err, e.value
    return e.value


# ---------------------------------------------------------------------------------------------------
# sysfs topology (facts 2)


def test_topology_has_cpu_node_0_then_one_node_per_gpu(system2):
    os_ = system2.os
    assert os_.listdir(f"{ROOT}/nodes") == ["0", "1", "2"]
    assert os_.read_text(f"{ROOT}/nodes/0/gpu_id") == "0\n"
    assert [int(os_.read_text(f"{ROOT}/nodes/{n}/gpu_id")) for n in "12"] == system2.gpu_ids


def test_gpu_properties_keys_are_in_kernel_print_order(system):
    text = system.os.read_text(f"{ROOT}/nodes/1/properties")
    keys = [line.split()[0] for line in text.splitlines()]
    assert keys == ["cpu_cores_count", "simd_count", "mem_banks_count", "caches_count", "io_links_count",
                    "p2p_links_count", "cpu_core_id_base", "simd_id_base", "max_waves_per_simd", "lds_size_in_kb",
                    "gds_size_in_kb", "num_gws", "wave_front_size", "array_count", "simd_arrays_per_engine",
                    "cu_per_simd_array", "simd_per_cu", "max_slots_scratch_cu", "gfx_target_version", "vendor_id",
                    "device_id", "location_id", "domain", "drm_render_minor", "hive_id", "num_sdma_engines",
                    "num_sdma_xgmi_engines", "num_sdma_queues_per_engine", "num_cp_queues",
                    "max_engine_clk_fcompute", "local_mem_size", "fw_version", "capability", "capability2",
                    "debug_prop", "sdma_fw_version", "unique_id", "num_xcc", "max_engine_clk_ccompute"]


def test_gfx1100_properties_carry_the_7900xtx_values(system):
    p = parse(system.os.read_text(f"{ROOT}/nodes/1/properties"))
    assert (p["simd_count"], p["max_waves_per_simd"], p["wave_front_size"], p["array_count"]) == (192, 16, 32, 12)
    assert (p["simd_arrays_per_engine"], p["cu_per_simd_array"], p["simd_per_cu"]) == (2, 8, 2)
    assert (p["gfx_target_version"], p["vendor_id"], p["device_id"]) == (110000, 4098, 29772)
    assert (p["drm_render_minor"], p["num_sdma_engines"], p["num_cp_queues"], p["num_xcc"]) == (128, 2, 8, 1)
    assert (p["capability"], p["local_mem_size"], p["lds_size_in_kb"]) == (671588992, 0, 64)


def test_gfx942_properties_carry_the_mi300x_values():
    with EmulatedSystem(target="gfx942") as s:
        p = parse(s.os.read_text(f"{ROOT}/nodes/1/properties"))
    assert (p["simd_count"], p["wave_front_size"], p["simd_per_cu"], p["num_xcc"]) == (1216, 64, 4, 8)
    assert (p["gfx_target_version"], p["device_id"], p["num_sdma_xgmi_engines"]) == (90402, 29857, 14)


def test_render_minor_counts_up_from_128(system2):
    minors = [parse(system2.os.read_text(f"{ROOT}/nodes/{n}/properties"))["drm_render_minor"] for n in "12"]
    assert minors == [128, 129]


def test_cpu_node_omits_gpu_only_keys(system):
    keys = [line.split()[0] for line in system.os.read_text(f"{ROOT}/nodes/0/properties").splitlines()]
    assert "fw_version" not in keys and "num_xcc" not in keys
    assert keys[-1] == "max_engine_clk_ccompute" and keys[0] == "cpu_cores_count"


def test_gpu_ids_are_16_bit_nonzero_distinct_and_deterministic():
    with EmulatedSystem(num_gpus=4) as a, EmulatedSystem(num_gpus=4) as b:
        assert a.gpu_ids == b.gpu_ids
    assert all(0 < g < 1 << 16 for g in a.gpu_ids) and len(set(a.gpu_ids)) == 4


def test_mem_bank_used_memory_follows_vram_allocations(rt, system):
    path = f"{ROOT}/nodes/1/mem_banks/0/used_memory"
    assert system.os.read_text(path) == "0\n"
    rt.alloc(0x200000, VRAM)
    assert system.os.read_text(path) == f"{0x200000}\n"


def test_mem_bank_and_io_link_keys_are_in_order(system):
    bank = system.os.read_text(f"{ROOT}/nodes/1/mem_banks/0/properties")
    assert [line.split()[0] for line in bank.splitlines()] == ["heap_type", "size_in_bytes", "flags", "width",
                                                               "mem_clk_max"]
    link = parse(system.os.read_text(f"{ROOT}/nodes/1/io_links/0/properties"))
    assert (link["type"], link["node_from"], link["node_to"]) == (2, 1, 0)


def test_missing_sysfs_file_is_enoent_and_directory_is_eisdir(system):
    raises(errno.ENOENT, system.os.read_text, f"{ROOT}/nodes/7/gpu_id")
    raises(errno.EISDIR, system.os.read_text, f"{ROOT}/nodes")
    assert system.os.exists(f"{ROOT}/nodes/1/properties") and not system.os.exists(f"{ROOT}/nodes/9")


def test_class_kfd_path_is_the_same_tree(system):
    assert system.os.read_text("/sys/class/kfd/kfd/topology/nodes/1/gpu_id") == \
        system.os.read_text(f"{ROOT}/nodes/1/gpu_id")


def test_system_properties_and_generation_id_parse(system):
    assert parse(system.os.read_text(f"{ROOT}/system_properties")) == dict(platform_oem=0, platform_id=0,
                                                                           platform_rev=0)
    assert int(system.os.read_text(f"{ROOT}/generation_id")) >= 1


# ---------------------------------------------------------------------------------------------------
# files and dispatch (kfd_chardev.c kfd_ioctl)


def test_open_unknown_device_is_enoent(system):
    raises(errno.ENOENT, system.os.open, "/dev/dri/renderD200")


def test_close_unknown_fd_is_ebadf(system):
    raises(errno.EBADF, system.os.close, 12345)


def test_kfd_ioctl_on_a_render_node_is_enotty(system):
    fd = system.os.open("/dev/dri/renderD128")
    raises(errno.ENOTTY, system.os.ioctl, fd, k.AMDKFD_IOC_GET_VERSION, k.GetVersionArgs())


def test_unknown_request_nr_is_enotty_then_valid_call_works(rt):
    raises(errno.ENOTTY, rt.os.ioctl, rt.kfd, k.IOWR("K", 0x40, 8), k.GetVersionArgs())
    raises(errno.ENOTTY, rt.os.ioctl, rt.kfd, k.IOR("K", 0x00, 8), k.GetVersionArgs())
    assert rt.ioctl("GET_VERSION").major_version == 1


def test_struct_smaller_than_request_is_efault_and_changes_nothing(rt):
    mem = rt.alloc(0x1000)
    raises(errno.EFAULT, rt.os.ioctl, rt.kfd, k.AMDKFD_IOC_FREE_MEMORY_OF_GPU, ctypes.c_uint32(mem.handle))
    rt.free(mem)  # the BO was not freed by the failed call


def test_old_88_byte_create_queue_request_copies_back_only_88_bytes(rt):
    args, _, _ = rt.compute_args()
    a = k.CreateQueueArgs(**args, sdma_engine_id=0x77, pad=0xDEAD)
    rt.os.ioctl(rt.kfd, k.AMDKFD_IOC_CREATE_QUEUE_PRE_1_17, a)
    assert a.doorbell_offset >> 62 == 3 and (a.sdma_engine_id, a.pad) == (0x77, 0xDEAD)


def test_retired_debugger_ioctl_is_eperm(rt):
    raises(errno.EPERM, rt.ioctl, "DBG_REGISTER_DEPRECATED", gpu_id=rt.gpu_id())


def test_unemulated_ioctl_is_enotsup_and_says_so(rt):
    e = raises(errno.EOPNOTSUPP, rt.ioctl, "SMI_EVENTS", gpuid=rt.gpu_id())
    assert "SMI_EVENTS" in str(e) and "not emulated" in str(e)


def test_ioctl_accepts_a_raw_pointer_and_bad_pointer_is_efault(rt):
    v = k.GetVersionArgs()
    rt.os.ioctl(rt.kfd, k.AMDKFD_IOC_GET_VERSION, ctypes.addressof(v))
    assert v.major_version == 1
    raises(errno.EFAULT, rt.os.ioctl, rt.kfd, k.AMDKFD_IOC_GET_VERSION, 8)


# ---------------------------------------------------------------------------------------------------
# queries


def test_get_version_reports_1_17(rt):
    v = rt.ioctl("GET_VERSION")
    assert (v.major_version, v.minor_version) == (1, 17)


def test_process_apertures_count_then_fill(rt2):
    assert rt2.ioctl("GET_PROCESS_APERTURES_NEW", num_of_nodes=0).num_of_nodes == 2
    arr = (k.ProcessDeviceApertures * 2)()
    a = rt2.ioctl("GET_PROCESS_APERTURES_NEW", kfd_process_device_apertures_ptr=ctypes.addressof(arr), num_of_nodes=2)
    assert a.num_of_nodes == 2 and [x.gpu_id for x in arr] == [rt2.gpu_id(0), rt2.gpu_id(1)]
    ap = arr[0]
    assert (ap.lds_base, ap.lds_limit) == (0x0001_0000_0000_0000, 0x0001_0000_FFFF_FFFF)
    assert (ap.scratch_base, ap.scratch_limit) == (0x0002_0000_0000_0000, 0x0002_0000_FFFF_FFFF)
    assert (ap.gpuvm_base, ap.gpuvm_limit) == (0x200000, (1 << 47) - 1)


def test_process_apertures_bad_pointer_is_efault(rt):
    raises(errno.EFAULT, rt.ioctl, "GET_PROCESS_APERTURES_NEW", kfd_process_device_apertures_ptr=16, num_of_nodes=1)


def test_clock_counters_give_the_virtual_gpu_clock(rt, system):
    system.gpus[0].clock = 12345
    c = rt.ioctl("GET_CLOCK_COUNTERS", gpu_id=rt.gpu_id())
    assert c.gpu_clock_counter == 12345 and c.system_clock_freq == 1_000_000_000
    assert c.cpu_clock_counter > 0 and c.system_clock_counter > 0


def test_available_memory_drops_by_vram_allocation(rt):
    before = rt.ioctl("AVAILABLE_MEMORY", gpu_id=rt.gpu_id()).available
    rt.alloc(4 << 20, VRAM)
    assert rt.ioctl("AVAILABLE_MEMORY", gpu_id=rt.gpu_id()).available == before - (4 << 20)


def test_available_memory_of_unknown_gpu_is_einval(rt):
    raises(errno.EINVAL, rt.ioctl, "AVAILABLE_MEMORY", gpu_id=1)


# ---------------------------------------------------------------------------------------------------
# process setup


def test_acquire_vm_twice_with_same_file_is_ok_other_file_ebusy(rt):
    gpu_id, _, drm = rt.gpus[0]
    rt.ioctl("ACQUIRE_VM", drm_fd=drm, gpu_id=gpu_id)
    other = rt.os.open("/dev/dri/renderD128")
    raises(errno.EBUSY, rt.ioctl, "ACQUIRE_VM", drm_fd=other, gpu_id=gpu_id)


def test_acquire_vm_with_another_gpus_render_node_is_einval(system2):
    r = Runtime(system2.os, acquire=False)
    raises(errno.EINVAL, r.ioctl, "ACQUIRE_VM", drm_fd=r.gpus[1][2], gpu_id=r.gpu_id(0))
    r.ioctl("ACQUIRE_VM", drm_fd=r.gpus[0][2], gpu_id=r.gpu_id(0))


def test_acquire_vm_with_unknown_fd_is_einval(rt):
    raises(errno.EINVAL, rt.ioctl, "ACQUIRE_VM", drm_fd=999, gpu_id=rt.gpu_id())


def test_alloc_before_acquire_vm_is_enodev(system):
    r = Runtime(system.os, acquire=False)
    raises(errno.ENODEV, r.ioctl, "ALLOC_MEMORY_OF_GPU", va_addr=r.reserve(0x1000), size=0x1000,
           gpu_id=r.gpu_id(), flags=GTT)


def test_runtime_enable_twice_is_ebusy(rt):
    rt.ioctl("RUNTIME_ENABLE", mode_mask=k.KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK)
    raises(errno.EBUSY, rt.ioctl, "RUNTIME_ENABLE", mode_mask=k.KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK)


def test_runtime_enable_with_queues_is_eexist(rt):
    rt.compute_queue()
    raises(errno.EEXIST, rt.ioctl, "RUNTIME_ENABLE", mode_mask=k.KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK)


def test_runtime_disable_always_succeeds(rt):
    rt.compute_queue()
    rt.ioctl("RUNTIME_ENABLE", mode_mask=0)


def test_xnack_query_reports_disabled(rt):
    assert rt.ioctl("SET_XNACK_MODE", xnack_enabled=-1).xnack_enabled == 0


def test_xnack_enable_on_gfx1100_is_eperm(rt):
    raises(errno.EPERM, rt.ioctl, "SET_XNACK_MODE", xnack_enabled=1)


def test_xnack_enable_on_gfx942_works():
    with EmulatedSystem(target="gfx942") as s:
        r = Runtime(s.os)
        r.ioctl("SET_XNACK_MODE", xnack_enabled=1)
        assert r.ioctl("SET_XNACK_MODE", xnack_enabled=-1).xnack_enabled == 1


def test_xnack_change_with_queues_is_ebusy(rt):
    rt.compute_queue()
    raises(errno.EBUSY, rt.ioctl, "SET_XNACK_MODE", xnack_enabled=0)


def test_memory_policy_accepts_coherent_and_noncoherent(rt):
    rt.ioctl("SET_MEMORY_POLICY", gpu_id=rt.gpu_id(), default_policy=1, alternate_policy=0)


def test_memory_policy_value_2_is_einval(rt):
    raises(errno.EINVAL, rt.ioctl, "SET_MEMORY_POLICY", gpu_id=rt.gpu_id(), default_policy=2)


# ---------------------------------------------------------------------------------------------------
# memory


def test_vram_bo_is_zeroed_and_the_cpu_mapping_is_its_va(rt):
    mem = rt.alloc(0x4000, VRAM)
    assert bytes((ctypes.c_ubyte * 0x4000).from_address(mem.va)) == bytes(0x4000)
    mem.u32(3).value = 0xABCD
    assert mem.u32(3).value == 0xABCD


def test_bo_handle_carries_the_gpu_id(rt):
    assert rt.alloc(0x1000).handle >> 32 == rt.gpu_id()


def test_alloc_of_zero_bytes_is_einval(rt):
    raises(errno.EINVAL, rt.ioctl, "ALLOC_MEMORY_OF_GPU", va_addr=rt.reserve(0x1000), size=0, gpu_id=rt.gpu_id(),
           flags=GTT)


def test_alloc_needs_a_memory_type(rt):
    # two types are not an error: VRAM wins (tests/test_kfd_kernel_exact.py)
    va = rt.reserve(0x1000)
    raises(errno.EINVAL, rt.ioctl, "ALLOC_MEMORY_OF_GPU", va_addr=va, size=0x1000, gpu_id=rt.gpu_id(), flags=COMMON)


def test_alloc_on_unknown_gpu_is_einval_then_valid_alloc_works(rt):
    va = rt.reserve(0x1000)
    raises(errno.EINVAL, rt.ioctl, "ALLOC_MEMORY_OF_GPU", va_addr=va, size=0x1000, gpu_id=rt.gpu_id() ^ 1, flags=GTT)
    rt.alloc(0x1000, va=va)


def test_alloc_at_misaligned_va_is_einval_then_aligned_works(rt):
    va = rt.reserve(0x2000)
    raises(errno.EINVAL, rt.ioctl, "ALLOC_MEMORY_OF_GPU", va_addr=va + 8, size=0x1000, gpu_id=rt.gpu_id(), flags=GTT)
    rt.alloc(0x1000, va=va)


def test_alloc_overlapping_a_bo_is_einval_then_adjacent_works(rt):
    va = rt.reserve(0x3000)
    rt.alloc(0x2000, va=va)
    raises(errno.EINVAL, rt.ioctl, "ALLOC_MEMORY_OF_GPU", va_addr=va + 0x1000, size=0x1000, gpu_id=rt.gpu_id(),
           flags=GTT)
    rt.alloc(0x1000, va=va + 0x2000)


def test_alloc_below_the_gpuvm_aperture_is_einval(rt):
    raises(errno.EINVAL, rt.ioctl, "ALLOC_MEMORY_OF_GPU", va_addr=0x1000, size=0x1000, gpu_id=rt.gpu_id(), flags=GTT)


def test_alloc_rounds_the_size_up_to_whole_pages(rt, system):
    mem = rt.alloc(100, VRAM)
    assert system.driver.memory.vram_used(0) == 0x1000 and system.gpus[0].memory.find(mem.va).size == 0x1000


def test_vram_beyond_the_board_is_enomem():
    with EmulatedSystem(vram_size=8 << 20) as s:
        r = Runtime(s.os)
        raises(errno.ENOMEM, r.ioctl, "ALLOC_MEMORY_OF_GPU", va_addr=r.reserve(16 << 20), size=16 << 20,
               gpu_id=r.gpu_id(), flags=VRAM)


def test_userptr_wraps_host_memory_at_its_own_address(rt, system):
    host = rt.os.mmap(0, 0x2000, RW, MAP_PRIVATE | MAP_ANONYMOUS)
    a = rt.ioctl("ALLOC_MEMORY_OF_GPU", va_addr=host, size=0x2000, gpu_id=rt.gpu_id(), mmap_offset=host,
                 flags=k.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | COMMON)
    rt.map(Mem(host, 0x2000, a.handle, 0, 0), [rt.gpu_id()])
    assert system.gpus[0].memory.find(host + 0x1000).kind == "userptr"


def test_userptr_at_another_va_maps_the_host_pages_at_that_gpu_address(rt, system):
    # hsaKmtRegisterMemory picks the GPU VA itself; the GPU page table maps it onto the user's pages
    host = rt.os.mmap(0, 0x1000, RW, MAP_PRIVATE | MAP_ANONYMOUS)
    va = rt.reserve(0x1000)
    a = rt.ioctl("ALLOC_MEMORY_OF_GPU", va_addr=va, size=0x1000, gpu_id=rt.gpu_id(), mmap_offset=host,
                 flags=k.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | COMMON)
    rt.map(Mem(va, 0x1000, a.handle, 0, 0), [rt.gpu_id()])
    ctypes.c_uint32.from_address(host + 8).value = 0x5EED
    assert va != host and system.gpus[0].memory.read_u32(va + 8) == 0x5EED


def test_userptr_of_unmapped_host_memory_is_efault(rt):
    va = rt.reserve(0x1000)  # PROT_NONE: not readable
    raises(errno.EFAULT, rt.ioctl, "ALLOC_MEMORY_OF_GPU", va_addr=va, size=0x1000, gpu_id=rt.gpu_id(),
           mmap_offset=va, flags=k.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | COMMON)


def test_doorbell_bo_must_be_the_8k_slice(rt):
    raises(errno.EINVAL, rt.ioctl, "ALLOC_MEMORY_OF_GPU", va_addr=rt.reserve(0x1000), size=0x1000, gpu_id=rt.gpu_id(),
           flags=k.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL | COMMON)
    rt.alloc(0x2000, k.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL | COMMON)


def test_mmio_remap_bo_gives_the_kfd_mmio_offset(rt):
    mem = rt.alloc(0x1000, k.KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP | COMMON)
    assert mem.offset == rt.gpu_id() << 46  # type MMIO (0) | gpu_id << 46
    assert rt.os.mmap(0, 0x1000, RW, MAP_SHARED, rt.kfd, mem.offset) == mem.va


def test_render_mmap_at_unknown_offset_or_too_large_is_einval(rt):
    mem = rt.alloc(0x1000, map_to=())
    drm = rt.gpus[0][2]
    raises(errno.EINVAL, rt.os.mmap, mem.va, 0x1000, RW, MAP_SHARED | MAP_FIXED, drm, mem.offset + 0x1000)
    raises(errno.EINVAL, rt.os.mmap, mem.va, 0x2000, RW, MAP_SHARED | MAP_FIXED, drm, mem.offset)


def test_double_free_is_einval_then_alloc_still_works(rt):
    mem = rt.alloc(0x1000)
    rt.free(mem)
    raises(errno.EINVAL, rt.ioctl, "FREE_MEMORY_OF_GPU", handle=mem.handle)
    rt.alloc(0x1000)


def test_free_while_still_mapped_is_ebusy(rt):
    mem = rt.alloc(0x1000)
    raises(errno.EBUSY, rt.ioctl, "FREE_MEMORY_OF_GPU", handle=mem.handle)
    rt.free(mem)


def test_freed_bo_range_is_reusable_after_munmap(rt):
    mem = rt.alloc(0x1000)
    rt.free(mem)
    assert rt.os.mmap(mem.va, 0x1000, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED) == mem.va


def test_map_with_no_devices_is_einval(rt):
    mem = rt.alloc(0x1000, map_to=())
    raises(errno.EINVAL, rt.ioctl, "MAP_MEMORY_TO_GPU", handle=mem.handle, n_devices=0)


def test_map_to_a_device_that_does_not_exist_is_einval_after_the_good_ones(rt2, system2):
    mem = rt2.alloc(0x1000, map_to=())
    ids = (ctypes.c_uint32 * 3)(rt2.gpu_id(0), 0xBEEF, rt2.gpu_id(1))
    a = k.MapMemoryToGpuArgs(handle=mem.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=3)
    raises(errno.EINVAL, rt2.os.ioctl, rt2.kfd, k.AMDKFD_IOC_MAP_MEMORY_TO_GPU, a)
    assert a.n_success == 1 and system2.gpus[0].memory.find(mem.va) and not system2.gpus[1].memory.find(mem.va)
    rt2.map(mem, [rt2.gpu_id(1)])  # the valid device still maps afterwards
    assert system2.gpus[1].memory.find(mem.va)


def test_map_device_array_at_bad_pointer_is_efault(rt):
    mem = rt.alloc(0x1000, map_to=())
    raises(errno.EFAULT, rt.ioctl, "MAP_MEMORY_TO_GPU", handle=mem.handle, device_ids_array_ptr=8, n_devices=1)


def test_map_of_unknown_handle_is_enomem(rt):
    ids = (ctypes.c_uint32 * 1)(rt.gpu_id())
    raises(errno.ENOMEM, rt.ioctl, "MAP_MEMORY_TO_GPU", handle=rt.gpu_id() << 32 | 77,
           device_ids_array_ptr=ctypes.addressof(ids), n_devices=1)


def test_mapping_permissions_follow_the_alloc_flags(rt, system):
    mem = rt.alloc(0x1000, k.KFD_IOC_ALLOC_MEM_FLAGS_GTT)  # neither WRITABLE nor EXECUTABLE
    m = system.gpus[0].memory.find(mem.va)
    assert (m.readable, m.writable, m.executable, m.kind) == (True, False, False, "gtt")


def test_unmap_removes_the_gpu_mapping_and_unmapping_again_is_einval(rt, system):
    mem = rt.alloc(0x1000)
    rt.map(mem, [rt.gpu_id()], "UNMAP_MEMORY_FROM_GPU")
    assert system.gpus[0].memory.find(mem.va) is None
    raises(errno.EINVAL, rt.map, mem, [rt.gpu_id()], "UNMAP_MEMORY_FROM_GPU")


def test_unmapping_a_queue_ring_is_ebusy(rt):
    q = rt.compute_queue()
    raises(errno.EBUSY, rt.map, q.ring, [rt.gpu_id()], "UNMAP_MEMORY_FROM_GPU")


# ---------------------------------------------------------------------------------------------------
# queues (facts 1.6)


def test_queue_sizes_match_the_worked_examples():
    x = queue_sizes(get_target("gfx1100"))
    assert (x.ctl_stack_size, x.cwsr_size, x.debug_memory_size, x.cwsr_bo_size()) == \
        (0xA000, 0x2BEA000, 0x18000, 0x2C02000)
    m = queue_sizes(get_target("gfx942"))
    assert (m.ctl_stack_size, m.cwsr_size, m.debug_memory_size, m.cwsr_bo_size()) == \
        (0x3000, 0x1621000, 0xBE00, 0xB167000)


def test_create_compute_queue_returns_id_and_doorbell_offset(rt):
    args, _, _ = rt.compute_args()
    a = rt.ioctl("CREATE_QUEUE", **args)
    assert a.queue_id == 0
    assert a.doorbell_offset >> 62 == 3 and (a.doorbell_offset >> 46) & 0xFFFF == rt.gpu_id()
    assert a.doorbell_offset & 0x1FFF < 0x2000 and a.doorbell_offset & 7 == 0


def test_ring_size_not_power_of_two_is_einval_then_valid_create_works(rt):
    args, _, _ = rt.compute_args()
    raises(errno.EINVAL, rt.ioctl, "CREATE_QUEUE", **dict(args, ring_size=0x1800))
    rt.ioctl("CREATE_QUEUE", **args)


def test_small_ring_size_is_clamped_to_1024_and_written_back(rt):
    args, _, _ = rt.compute_args()
    a = k.CreateQueueArgs(**dict(args, ring_size=256))
    rt.os.ioctl(rt.kfd, k.AMDKFD_IOC_CREATE_QUEUE, a)
    assert a.ring_size == 1024


def test_queue_percentage_over_100_is_einval(rt):
    args, _, _ = rt.compute_args()
    raises(errno.EINVAL, rt.ioctl, "CREATE_QUEUE", **dict(args, queue_percentage=101))


def test_queue_priority_over_15_is_einval(rt):
    args, _, _ = rt.compute_args()
    raises(errno.EINVAL, rt.ioctl, "CREATE_QUEUE", **dict(args, queue_priority=16))


def test_queue_on_unknown_gpu_is_einval(rt):
    args, _, _ = rt.compute_args()
    raises(errno.EINVAL, rt.ioctl, "CREATE_QUEUE", **dict(args, gpu_id=rt.gpu_id() ^ 1))


def test_ring_smaller_than_its_mapping_is_einval(rt):
    args, _, _ = rt.compute_args(ring_size=0x2000)
    raises(errno.EINVAL, rt.ioctl, "CREATE_QUEUE", **dict(args, ring_size=0x1000))


def test_ring_not_at_the_start_of_its_mapping_is_einval(rt):
    args, ring, _ = rt.compute_args(ring_size=0x2000)
    raises(errno.EINVAL, rt.ioctl, "CREATE_QUEUE", **dict(args, ring_base_address=ring.va + 0x1000, ring_size=0x1000))


def test_write_pointer_in_a_two_page_bo_is_einval(rt):
    args, _, _ = rt.compute_args()
    big = rt.alloc(0x2000)
    raises(errno.EINVAL, rt.ioctl, "CREATE_QUEUE", **dict(args, write_pointer_address=big.va))


def test_unmapped_read_pointer_is_einval(rt):
    args, _, _ = rt.compute_args()
    raises(errno.EINVAL, rt.ioctl, "CREATE_QUEUE", **dict(args, read_pointer_address=rt.reserve(0x1000)))


def test_eop_size_other_than_4096_is_einval(rt):
    args, _, _ = rt.compute_args()
    raises(errno.EINVAL, rt.ioctl, "CREATE_QUEUE", **dict(args, eop_buffer_size=0x2000))


def test_ctl_stack_size_other_than_the_node_value_is_einval(rt):
    args, _, _ = rt.compute_args()
    raises(errno.EINVAL, rt.ioctl, "CREATE_QUEUE", **dict(args, ctl_stack_size=0x9000))


def test_ctx_save_restore_size_below_node_cwsr_is_einval(rt):
    args, _, _ = rt.compute_args()
    raises(errno.EINVAL, rt.ioctl, "CREATE_QUEUE", **dict(args, ctx_save_restore_size=0x2BE9000))


def test_cwsr_bo_of_the_wrong_size_is_einval(rt):
    args, _, _ = rt.compute_args()
    small = rt.alloc(0x2BEA000, VRAM)  # lacks the debug area
    raises(errno.EINVAL, rt.ioctl, "CREATE_QUEUE", **dict(args, ctx_save_restore_address=small.va))


def test_compute_aql_queue_is_created_with_the_compute_queue_checks(rt):
    """kfd_chardev.c makes COMPUTE_AQL a KFD_QUEUE_TYPE_COMPUTE of format AQL: same EOP/CWSR checks."""
    args, _, _ = rt.compute_args()
    aql = dict(args, queue_type=k.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL)
    raises(errno.EINVAL, rt.ioctl, "CREATE_QUEUE", **dict(aql, ctl_stack_size=0x9000))
    out = rt.ioctl("CREATE_QUEUE", **aql)
    assert out.doorbell_offset


def test_unknown_queue_type_is_kernel_enotsupp(rt):
    args, _, _ = rt.compute_args()
    raises(524, rt.ioctl, "CREATE_QUEUE", **dict(args, queue_type=9))


def test_create_queue_before_acquire_vm_is_esrch(system):
    r = Runtime(system.os, acquire=False)
    raises(errno.ESRCH, r.ioctl, "CREATE_QUEUE", gpu_id=r.gpu_id(), ring_size=0x1000)


def test_sdma_queue_by_engine_id_beyond_the_engines_is_einval(rt):
    args, _, _ = rt.compute_args()
    raises(errno.EINVAL, rt.ioctl, "CREATE_QUEUE", **dict(args, queue_type=k.KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID,
                                                          sdma_engine_id=2))


def test_queue_ids_and_doorbells_differ_per_queue(rt):
    a, b = rt.compute_queue(), rt.compute_queue()
    assert a.qid != b.qid and a.doorbell != b.doorbell


def test_destroy_unknown_queue_is_einval(rt):
    raises(errno.EINVAL, rt.ioctl, "DESTROY_QUEUE", queue_id=5)


def test_destroyed_queue_is_gone_for_destroy_update_and_doorbell(rt, system):
    q = rt.compute_queue()
    rt.ioctl("DESTROY_QUEUE", queue_id=q.qid)
    raises(errno.EINVAL, rt.ioctl, "DESTROY_QUEUE", queue_id=q.qid)
    raises(errno.EFAULT, rt.ioctl, "UPDATE_QUEUE", queue_id=q.qid, ring_base_address=q.ring.va, ring_size=0x1000,
           queue_percentage=100)
    rt.submit(q, pm4.nop(2))  # a store to a dead doorbell does nothing
    assert system.gpus[0].queues == []
    q2 = rt.compute_queue()
    rt.submit(q2, pm4.write_data(q2.ptrs.va + 64, [7]))
    assert q2.ptrs.u32(16).value == 7


def test_update_queue_changes_priority(rt, system):
    q = rt.compute_queue()
    rt.ioctl("UPDATE_QUEUE", queue_id=q.qid, ring_base_address=q.ring.va, ring_size=0x1000, queue_percentage=100,
             queue_priority=15)
    assert system.driver.queues.records[q.qid].priority == 15


def test_update_queue_with_percentage_0_parks_the_queue_until_reenabled(rt):
    q = rt.compute_queue()
    rt.ioctl("UPDATE_QUEUE", queue_id=q.qid, ring_base_address=q.ring.va, ring_size=0x1000, queue_percentage=0)
    rt.submit(q, pm4.write_data(q.ptrs.va + 64, [9]))
    assert q.ptrs.u32(16).value == 0
    rt.ioctl("UPDATE_QUEUE", queue_id=q.qid, ring_base_address=q.ring.va, ring_size=0x1000, queue_percentage=100)
    rt.wait([rt.event()], timeout=0)  # a progress point
    assert q.ptrs.u32(16).value == 9


def test_update_queue_with_ring_0_disables_and_the_same_ring_reenables(rt):
    q = rt.compute_queue()
    rt.ioctl("UPDATE_QUEUE", queue_id=q.qid, ring_base_address=0, ring_size=0x1000, queue_percentage=100)
    rt.submit(q, pm4.write_data(q.ptrs.va + 64, [3]))
    assert q.ptrs.u32(16).value == 0
    rt.ioctl("UPDATE_QUEUE", queue_id=q.qid, ring_base_address=q.ring.va, ring_size=0x1000, queue_percentage=100)
    rt.wait([rt.event()], timeout=0)
    assert q.ptrs.u32(16).value == 3


def test_cu_mask_must_be_a_nonzero_multiple_of_32_bits(rt):
    q = rt.compute_queue()
    mask = (ctypes.c_uint32 * 4)(*[0xFFFFFFFF] * 4)
    raises(errno.EINVAL, rt.ioctl, "SET_CU_MASK", queue_id=q.qid, num_cu_mask=0, cu_mask_ptr=ctypes.addressof(mask))
    raises(errno.EINVAL, rt.ioctl, "SET_CU_MASK", queue_id=q.qid, num_cu_mask=40, cu_mask_ptr=ctypes.addressof(mask))
    rt.ioctl("SET_CU_MASK", queue_id=q.qid, num_cu_mask=128, cu_mask_ptr=ctypes.addressof(mask))


def test_cu_mask_of_unknown_queue_is_efault(rt):
    mask = (ctypes.c_uint32 * 1)(1)
    raises(errno.EFAULT, rt.ioctl, "SET_CU_MASK", queue_id=3, num_cu_mask=32, cu_mask_ptr=ctypes.addressof(mask))


def test_trap_handler_needs_a_known_gpu_with_a_vm(system):
    r = Runtime(system.os, acquire=False)
    raises(errno.EINVAL, r.ioctl, "SET_TRAP_HANDLER", gpu_id=r.gpu_id() ^ 1)
    raises(errno.ESRCH, r.ioctl, "SET_TRAP_HANDLER", gpu_id=r.gpu_id())


def test_update_queue_to_a_new_ring_runs_from_it(rt):
    q = rt.compute_queue()
    ring2 = rt.alloc(0x1000)
    rt.ioctl("UPDATE_QUEUE", queue_id=q.qid, ring_base_address=ring2.va, ring_size=0x1000, queue_percentage=100)
    q.ring = ring2
    rt.submit(q, pm4.write_data(q.ptrs.va + 64, [5]))
    assert q.ptrs.u32(16).value == 5


def test_update_queue_to_an_unmapped_ring_is_efault(rt):
    q = rt.compute_queue()
    raises(errno.EFAULT, rt.ioctl, "UPDATE_QUEUE", queue_id=q.qid, ring_base_address=rt.reserve(0x1000),
           ring_size=0x1000, queue_percentage=100)


def test_sdma_queue_is_created(rt):
    q = rt.sdma_queue()
    assert q.qid == 0


# ---------------------------------------------------------------------------------------------------
# events (facts 1.5, kfd_events.c)


def test_first_signal_event_is_id_1_in_slot_1(rt):
    a = rt.event_page()
    assert (a.event_id, a.event_slot_index, a.event_trigger_data) == (1, 1, 1)
    assert a.event_page_offset == k.KFD_MMAP_TYPE_EVENTS


def test_event_page_is_filled_with_ones(rt):
    rt.event_page()
    assert all(rt.events.u64(i).value == 0xFFFF_FFFF_FFFF_FFFF for i in range(0, 4096, 511))


def test_non_signal_events_count_from_0x40000000(rt):
    rt.event_page()
    assert rt.event(k.KFD_IOC_EVENT_MEMORY) == 0x40000000
    assert rt.event(k.KFD_IOC_EVENT_HW_EXCEPTION) == 0x40000001


def test_second_event_page_is_einval(rt):
    rt.event_page()
    other = rt.alloc(0x8000)
    raises(errno.EINVAL, rt.ioctl, "CREATE_EVENT", event_page_offset=other.handle, event_type=0)
    assert rt.event() == 2


def test_freeing_the_event_page_is_eperm(rt):
    rt.event_page()
    rt.map(rt.events, [rt.gpu_id()], "UNMAP_MEMORY_FROM_GPU")
    raises(errno.EPERM, rt.ioctl, "FREE_MEMORY_OF_GPU", handle=rt.events.handle)


def test_an_event_page_below_32_kib_is_einval(rt):
    # kfd_events.c kfd_event_page_set: size < KFD_SIGNAL_EVENT_LIMIT * 8 is -EINVAL (upstream 8a70a26c9f34, "Fix
    # out-of-bounds write in kfd_event_page_set()", in the stable kernels): the page is memset whole
    raises(errno.EINVAL, rt.event_page, size=0x1000)
    assert rt.event_page(size=0x8000).event_id  # the same process may then give a full page


def test_signal_events_run_out_at_page_size_over_8(rt):
    rt.event_page(size=0x8000)  # 4096 slots: ids 1..4095
    for _ in range(4094):
        rt.event()
    raises(errno.ENOSPC, rt.ioctl, "CREATE_EVENT", event_type=0)


def test_without_a_user_page_the_driver_page_is_mmapped_from_kfd(rt):
    a = rt.ioctl("CREATE_EVENT", event_type=0, auto_reset=1)
    page = rt.os.mmap(0, 0x8000, RW, MAP_SHARED, rt.kfd, a.event_page_offset)
    assert ctypes.c_uint64.from_address(page + 8 * a.event_id).value == 0xFFFF_FFFF_FFFF_FFFF


def test_set_event_on_a_memory_event_is_einval(rt):
    raises(errno.EINVAL, rt.ioctl, "SET_EVENT", event_id=rt.event(k.KFD_IOC_EVENT_MEMORY))


def test_destroy_unknown_event_is_einval(rt):
    raises(errno.EINVAL, rt.ioctl, "DESTROY_EVENT", event_id=77)


def test_auto_reset_event_is_consumed_by_one_wait(rt):
    eid = rt.event()
    rt.ioctl("SET_EVENT", event_id=eid)
    assert rt.wait([eid], timeout=0)[0] == k.KFD_IOC_WAIT_RESULT_COMPLETE
    assert rt.wait([eid], timeout=0)[0] == k.KFD_IOC_WAIT_RESULT_TIMEOUT


def test_manual_reset_event_stays_set_until_reset(rt):
    eid = rt.event(auto_reset=0)
    rt.ioctl("SET_EVENT", event_id=eid)
    assert rt.wait([eid], timeout=0)[0] == rt.wait([eid], timeout=0)[0] == k.KFD_IOC_WAIT_RESULT_COMPLETE
    rt.ioctl("RESET_EVENT", event_id=eid)
    assert rt.wait([eid], timeout=0)[0] == k.KFD_IOC_WAIT_RESULT_TIMEOUT


def test_wait_for_all_needs_every_event(rt):
    a, b = rt.event(auto_reset=0), rt.event(auto_reset=0)
    rt.ioctl("SET_EVENT", event_id=a)
    assert rt.wait([a, b], timeout=0, all_=True)[0] == k.KFD_IOC_WAIT_RESULT_TIMEOUT
    assert rt.wait([a, b], timeout=0)[0] == k.KFD_IOC_WAIT_RESULT_COMPLETE


def test_wait_on_unknown_event_is_einval_with_fail_result(rt):
    data = (k.EventData * 1)()
    data[0].event_id = 99
    a = k.WaitEventsArgs(events_ptr=ctypes.addressof(data), num_events=1, timeout=0)
    raises(errno.EINVAL, rt.os.ioctl, rt.kfd, k.AMDKFD_IOC_WAIT_EVENTS, a)
    assert a.wait_result == k.KFD_IOC_WAIT_RESULT_FAIL


def test_event_age_reports_new_signals_since_the_given_age(rt):
    eid = rt.event(auto_reset=0)
    rt.ioctl("SET_EVENT", event_id=eid)
    result, data = rt.wait([eid], timeout=0, ages=[1])
    assert result == k.KFD_IOC_WAIT_RESULT_COMPLETE and data[0].signal_event_data.last_event_age == 2
    rt.ioctl("RESET_EVENT", event_id=eid)
    assert rt.wait([eid], timeout=0, ages=[2])[0] == k.KFD_IOC_WAIT_RESULT_TIMEOUT


# ---------------------------------------------------------------------------------------------------
# the machine through the boundary: bring-up, interrupts, faults, deadlock, peers


def test_full_bringup_release_mem_interrupt_completes_wait_events(rt):
    assert (rt.version.major_version, rt.version.minor_version) >= (1, 14)
    rt.ioctl("RUNTIME_ENABLE", mode_mask=0)
    sig = rt.event_page().event_id
    mem_ev, hw_ev = rt.event(k.KFD_IOC_EVENT_MEMORY), rt.event(k.KFD_IOC_EVENT_HW_EXCEPTION)
    q = rt.compute_queue()
    rt.submit(q, pm4.release_mem(rt.events.va + 8 * sig, sig, data_sel=1, int_sel=2, ctxid=sig))
    result, data = rt.wait([sig, mem_ev, hw_ev])
    assert result == k.KFD_IOC_WAIT_RESULT_COMPLETE
    assert data[1].memory_exception_data.gpu_id == 0 and data[2].hw_exception_data.gpu_id == 0
    assert rt.events.u64(sig).value == 0xFFFF_FFFF_FFFF_FFFF  # the driver acknowledged the slot
    s = rt.sdma_queue()
    assert s.qid != q.qid and s.doorbell != q.doorbell
    rt.submit(s, sdma.fence(rt.events.va + 8 * sig, sig) + sdma.trap(sig))
    assert rt.wait([sig])[0] == k.KFD_IOC_WAIT_RESULT_COMPLETE


def test_interrupt_with_an_unsignalled_slot_does_not_set_the_event(rt):
    sig = rt.event_page().event_id
    q = rt.compute_queue()
    rt.submit(q, pm4.release_mem(data_sel=0, int_sel=1, ctxid=sig))  # interrupt, but no slot write
    assert rt.wait([sig], timeout=0)[0] == k.KFD_IOC_WAIT_RESULT_TIMEOUT


def test_interrupt_with_a_bad_context_id_scans_the_slots(rt):
    sig = rt.event_page().event_id
    q = rt.compute_queue()
    rt.submit(q, pm4.release_mem(rt.events.va + 8 * sig, 1, data_sel=1, int_sel=2, ctxid=0x123456))
    assert rt.wait([sig])[0] == k.KFD_IOC_WAIT_RESULT_COMPLETE


def test_vm_fault_sets_the_memory_event_with_the_faulting_va(rt):
    rt.event_page()
    mem_ev = rt.event(k.KFD_IOC_EVENT_MEMORY)
    q = rt.compute_queue()
    hole = rt.reserve(0x2000)  # reserved VA, never given to the GPU
    rt.submit(q, pm4.write_data(hole + 0x1010, [1]))
    result, data = rt.wait([mem_ev])
    d = data[0].memory_exception_data
    assert result == k.KFD_IOC_WAIT_RESULT_COMPLETE
    assert (d.va, d.gpu_id, d.NotPresent, d.ReadOnly, d.NoExecute) == (hole + 0x1000, rt.gpu_id(), 1, 0, 0)


def test_write_to_a_read_only_mapping_reports_read_only(rt):
    mem_ev = rt.event(k.KFD_IOC_EVENT_MEMORY)
    q = rt.compute_queue()
    ro = rt.alloc(0x1000, k.KFD_IOC_ALLOC_MEM_FLAGS_GTT)
    rt.submit(q, pm4.write_data(ro.va, [1]))
    d = rt.wait([mem_ev])[1][0].memory_exception_data
    assert (d.NotPresent, d.ReadOnly) == (0, 1)


def test_bad_packet_sets_the_hw_exception_event(rt):
    hw_ev = rt.event(k.KFD_IOC_EVENT_HW_EXCEPTION)
    q = rt.compute_queue()
    rt.submit(q, [0xC000FF00, 0])  # type-3 header of an unknown opcode
    result, data = rt.wait([hw_ev])
    assert result == k.KFD_IOC_WAIT_RESULT_COMPLETE and data[0].hw_exception_data.gpu_id == rt.gpu_id()


def test_fault_details_reports_each_fault_once(rt):
    q = rt.compute_queue()
    rt.submit(q, pm4.write_data(rt.reserve(0x1000), [1]))
    first = rt.os.fault_details(rt.gpu_id())
    assert len(first) == 1 and "VM fault" in first[0]
    assert rt.os.fault_details(rt.gpu_id()) == []


def test_wait_with_nothing_pending_is_a_deadlock_naming_the_blocked_queue(rt):
    sig = rt.event_page().event_id
    q = rt.compute_queue()
    flag = rt.alloc(0x1000)
    rt.submit(q, pm4.wait_reg_mem(flag.va, 1) + pm4.release_mem(rt.events.va + 8 * sig, sig, int_sel=2, ctxid=sig))
    with pytest.raises(DeadlockError) as e:
        rt.wait([sig], timeout=0xFFFFFFFF)
    assert "WAIT_EVENTS on events [1]" in str(e.value)
    assert len(e.value.blocked) == 1 and "WAIT_REG_MEM" in e.value.blocked[0].packet
    assert e.value.blocked[0].address == flag.va


def test_host_store_releases_a_blocked_queue_at_the_next_wait(rt):
    sig = rt.event_page().event_id
    q = rt.compute_queue()
    flag = rt.alloc(0x1000)
    rt.submit(q, pm4.wait_reg_mem(flag.va, 1) + pm4.release_mem(rt.events.va + 8 * sig, sig, int_sel=2, ctxid=sig))
    flag.u32().value = 1
    assert rt.wait([sig])[0] == k.KFD_IOC_WAIT_RESULT_COMPLETE


def test_doorbell_stored_directly_is_seen_at_the_next_wait(rt):
    sig = rt.event_page().event_id
    q = rt.compute_queue()
    pkt = pm4.release_mem(rt.events.va + 8 * sig, sig, int_sel=2, ctxid=sig)
    ctypes.memmove(q.ring.va, bytes(b for d in pkt for b in d.to_bytes(4, "little")), 4 * len(pkt))
    ctypes.c_uint64.from_address(q.doorbell).value = len(pkt)  # a plain store, no ring_doorbell call
    assert rt.wait([sig])[0] == k.KFD_IOC_WAIT_RESULT_COMPLETE


def test_ring_doorbell_outside_a_doorbell_slice_is_efault(rt):
    raises(errno.EFAULT, rt.os.ring_doorbell, rt.alloc(0x1000).va, 1)


def test_doorbell_slice_mmap_must_be_8k(rt):
    off = k.mmap_offset(k.KFD_MMAP_TYPE_DOORBELL, rt.gpu_id())
    raises(errno.EINVAL, rt.os.mmap, 0, 0x1000, RW, MAP_SHARED, rt.kfd, off)
    assert rt.os.mmap(0, 0x2000, RW, MAP_SHARED, rt.kfd, off)


def test_doorbell_mmap_for_unknown_gpu_is_enodev(rt):
    off = k.mmap_offset(k.KFD_MMAP_TYPE_DOORBELL, rt.gpu_id() ^ 1)
    raises(errno.ENODEV, rt.os.mmap, 0, 0x2000, RW, MAP_SHARED, rt.kfd, off)


def test_peer_mapping_lets_gpu1_write_gpu0_vram(rt2):
    target = rt2.alloc(0x1000, VRAM, gpu=0, map_to=(0, 1))
    q = rt2.compute_queue(gpu=1)
    rt2.submit(q, pm4.write_data(target.va + 16, [0xFEEDF00D]))
    assert target.u32(4).value == 0xFEEDF00D


def test_without_the_peer_mapping_gpu1_faults_on_gpu0_vram(rt2, system2):
    target = rt2.alloc(0x1000, VRAM, gpu=0, map_to=(0,))
    q = rt2.compute_queue(gpu=1)
    rt2.submit(q, pm4.write_data(target.va, [1]))
    assert target.u32().value == 0 and system2.gpus[1].faults[0].address == target.va
