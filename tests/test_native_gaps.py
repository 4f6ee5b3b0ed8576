"""The emulated kernel behaviours a native ROCm stack needs (NATIVE_ROCM_FACTS section 3), as the kernel has them,
driven through the emulated OS boundary like a thunk would (no native code here: tests/test_native_rocminfo.py
runs the real stack).

- READ_MMR_REG answers GB_ADDR_CONFIG (what libdrm's amdgpu_device_initialize reads) and refuses other offsets
  with amdgpu_info_ioctl's errnos;
- anonymous read/write MAP_FIXED inside the process's reservation gives real, zeroed pages there (libhsakmt's
  host memory, then registered as USERPTR), munmap and mapping over work on parts of it as on Linux;
- GPU nodes list their caches (kfd_crat.c's rule): L1 per CU, SQC per 2 CUs, GL1 per array (gfx11), L2, L3.
"""
from __future__ import annotations

import ctypes
import errno

import pytest

from hcqsim import drm_uapi as d
from hcqsim import kfd_uapi as k
from hcqsim.boundary import MAP_ANONYMOUS, MAP_FIXED, MAP_NORESERVE, MAP_PRIVATE, PROT_NONE, PROT_READ, PROT_WRITE
from hcqsim.kfd import EmulatedSystem
from hcqsim.kfd.drm import GB_ADDR_CONFIG

RW = PROT_READ | PROT_WRITE
ANON = MAP_PRIVATE | MAP_ANONYMOUS
TOPO = "/sys/devices/virtual/kfd/kfd/topology/nodes/1"
READ_MMR_REG = 0x15


def raises(err: int, fn, *args) -> OSError:
    with pytest.raises(OSError) as info:
        fn(*args)
    assert info.value.errno == err, f"expected {errno.errorcode[err]}, got {info.value!r}"
    return info.value


@pytest.fixture(params=["gfx1100", "gfx942"])
def system(request):
    s = EmulatedSystem(target=request.param, vram_size=1 << 30)
    yield s
    s.close()


def read_mmr(system, offset: int, count: int = 1, instance: int = 0xFFFFFFFF) -> list[int]:
    fd = system.os.open("/dev/dri/renderD128")
    out = (ctypes.c_uint32 * max(count, 1))()
    args = d.DrmAmdgpuInfo(return_pointer=ctypes.addressof(out), return_size=4 * count, query=READ_MMR_REG)
    args.read_mmr_reg.dword_offset, args.read_mmr_reg.count, args.read_mmr_reg.instance = offset, count, instance
    system.os.ioctl(fd, d.DRM_IOCTL_AMDGPU_INFO, args)
    return list(out[:count])


# -- READ_MMR_REG ----------------------------------------------------------------------------------------


def test_read_mmr_reg_answers_gb_addr_config_as_libdrm_reads_it(system):
    # amdgpu_query_gpu_info_init: offset 0x263e, one register, SE/SH broadcast (instance all ones)
    assert read_mmr(system, 0x263E) == [GB_ADDR_CONFIG[system.target.name]]
    assert read_mmr(system, 0x263E, instance=0) == [GB_ADDR_CONFIG[system.target.name]]  # SE 0 SH 0


def test_read_mmr_reg_of_a_register_outside_the_allow_list_is_efault(system):
    e = raises(errno.EFAULT, read_mmr, system, 0x2000)
    assert "0x2000" in str(e)
    raises(errno.EFAULT, read_mmr, system, 0x263E, 2)  # the second register is not readable


def test_read_mmr_reg_checks_count_and_instance_as_amdgpu_kms(system):
    raises(errno.EINVAL, read_mmr, system, 0x263E, 129)
    raises(errno.EINVAL, read_mmr, system, 0x263E, 1, 8)  # SE index 8 (AMDGPU_GFX_MAX_SE is 8)
    raises(errno.EINVAL, read_mmr, system, 0x263E, 1, 2 << 8)  # SH index 2


# -- anonymous MAP_FIXED inside a reservation --------------------------------------------------------------


def reserve(system, size: int) -> int:
    return system.os.mmap(0, size, PROT_NONE, ANON | MAP_NORESERVE)


def test_fixed_anonymous_memory_inside_a_reservation_is_zeroed_host_memory_there(system):
    base = reserve(system, 0x10000)
    va = base + 0x4000
    assert system.os.mmap(va, 0x2000, RW, ANON | MAP_FIXED) == va
    cells = (ctypes.c_uint32 * 0x800).from_address(va)
    assert set(cells) == {0}
    cells[0], cells[0x7FF] = 0x12345678, 0x9ABCDEF0
    assert (cells[0], cells[0x7FF]) == (0x12345678, 0x9ABCDEF0)


def test_fixed_anonymous_memory_outside_the_process_reservations_is_refused(system):
    base = reserve(system, 0x4000)
    e = raises(errno.EINVAL, system.os.mmap, base + 0x2000, 0x4000, RW, ANON | MAP_FIXED)  # runs past its end
    assert "reservation" in str(e)


def test_fixed_anonymous_memory_can_back_a_userptr_bo(system):
    os_ = system.os
    kfd, drm = os_.open("/dev/kfd"), os_.open("/dev/dri/renderD128")
    gpu_id = system.gpu_ids[0]
    os_.ioctl(kfd, k.AMDKFD_IOC_ACQUIRE_VM, k.AcquireVmArgs(drm_fd=drm, gpu_id=gpu_id))
    va = reserve(system, 0x2000)
    os_.mmap(va, 0x2000, RW, ANON | MAP_FIXED)
    args = k.AllocMemoryOfGpuArgs(va_addr=va, size=0x2000, gpu_id=gpu_id, mmap_offset=va,
                                  flags=k.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | k.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE)
    os_.ioctl(kfd, k.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, args)
    ids = (ctypes.c_uint32 * 1)(gpu_id)
    os_.ioctl(kfd, k.AMDKFD_IOC_MAP_MEMORY_TO_GPU, k.MapMemoryToGpuArgs(
        handle=args.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1))
    ctypes.c_uint32.from_address(va + 0x1000).value = 77
    assert system.gpus[0].memory.find(va + 0x1000).kind == "userptr"
    assert system.gpus[0].memory.read_u32(va + 0x1000) == 77  # the GPU sees the CPU's store
    os_.munmap(va, 0x2000)  # unmapped while the BO lives: the pages stay for the GPU until it is freed
    assert system.gpus[0].memory.read_u32(va + 0x1000) == 77


def test_munmap_of_part_of_a_fixed_map_keeps_the_rest_with_its_bytes(system):
    base = reserve(system, 0x10000)
    system.os.mmap(base, 0x4000, RW, ANON | MAP_FIXED)
    for page in range(4):
        ctypes.c_uint32.from_address(base + page * 0x1000).value = 100 + page
    system.os.munmap(base + 0x1000, 0x2000)  # the middle two pages
    assert ctypes.c_uint32.from_address(base).value == 100
    assert ctypes.c_uint32.from_address(base + 0x3000).value == 103
    # the hole is reserved VA again: a new fixed map there is fresh, zeroed memory... once re-reserved
    system.os.mmap(base + 0x1000, 0x2000, PROT_NONE, ANON | MAP_FIXED | MAP_NORESERVE)
    assert system.os.mmap(base + 0x1000, 0x1000, RW, ANON | MAP_FIXED) == base + 0x1000
    assert ctypes.c_uint32.from_address(base + 0x1000).value == 0


def test_mapping_a_fixed_map_over_gives_fresh_zeroed_pages(system):
    base = reserve(system, 0x4000)
    system.os.mmap(base, 0x4000, RW, ANON | MAP_FIXED)
    ctypes.c_uint32.from_address(base + 0x2000).value = 5
    system.os.mmap(base + 0x2000, 0x1000, RW, ANON | MAP_FIXED)  # replaces that page, as mmap does
    assert ctypes.c_uint32.from_address(base + 0x2000).value == 0


# -- caches ------------------------------------------------------------------------------------------------


def caches(system) -> list[dict]:
    props = dict(line.split() for line in system.os.read_text(f"{TOPO}/properties").splitlines())
    out = []
    for i in range(int(props["caches_count"])):
        text = system.os.read_text(f"{TOPO}/caches/{i}/properties")
        out.append({key: value for key, value in (line.split(" ", 1) for line in text.splitlines())})
    return out


def test_gfx1100_lists_the_206_caches_of_a_7900_xtx():
    with EmulatedSystem(target="gfx1100", vram_size=1 << 30) as system:
        entries = caches(system)
    assert len(entries) == 206  # what the real part's node reports (HARDWARE_FACTS 2.5)
    by_kind = {}
    for c in entries:
        key = (int(c["level"]), int(c["size"]), int(c["type"]))
        by_kind[key] = by_kind.get(key, 0) + 1
    assert by_kind == {(1, 32, 9): 96, (1, 32, 10): 48, (1, 16, 9): 48, (1, 256, 9): 12, (2, 6144, 9): 1,
                       (3, 98304, 9): 1}


def test_every_gpu_cache_is_a_cu_cache_with_the_keys_and_sibling_map_kfd_prints(system):
    entries = caches(system)
    cus = system.target.simd_count // system.target.simd_per_cu
    assert [key for key in entries[0]] == list(k.CACHE_PROPERTY_KEYS)
    assert all(int(c["type"]) & k.HSA_CACHE_TYPE_HSACU for c in entries)
    # kfd's order: every CU's vector L1 (one sibling each), then the instruction caches
    assert all(c["level"] == "1" and c["sibling_map"].count("1") == 1 for c in entries[:cus])
    assert int(entries[cus]["type"]) & k.HSA_CACHE_TYPE_INSTRUCTION
    assert {int(c["level"]) for c in entries} == {1, 2, 3}
    l2 = [c for c in entries if c["level"] == "2"]
    assert len(l2) == system.target.num_xcc  # one L2 per XCC


# -- SDMA POLL_REGMEM on a register --------------------------------------------------------------------------


@pytest.mark.parametrize("target, version", [("gfx942", "sdma4"), ("gfx1100", "sdma6")])
def test_sdma_poll_regmem_on_a_register_with_function_always_passes_at_once(target, version):
    # ROCr 6.1 opens its gfx942 SDMA queues with this packet: the compare ALWAYS holds, whatever the register says
    from hcqsim import EmulatedGPU, sdma
    gpu = EmulatedGPU(target=target, seed=0)
    try:
        buf = gpu.alloc(4096)
        q = gpu.sdma_queue()
        always = sdma.encode("POLL_REGMEM", version, mem_poll=0, func=0, addr=1 << 63, value=0, mask=0)
        q.submit(always + sdma.fence(buf.va, 42, version=version))
        assert gpu.faults == [] and int(buf.u32()[0]) == 42
        waits = sdma.encode("POLL_REGMEM", version, mem_poll=0, func=3, addr=0x1000 << 2, value=1, mask=1)
        q.submit(waits)  # a real compare of a register hcqsim does not model: a clean fault, not a guess
        assert len(gpu.faults) == 1 and "POLL_REGMEM on register" in str(gpu.faults[0])
    finally:
        gpu.close()


# -- CREATE_QUEUE's buffer-size rules of older kernels -----------------------------------------------------


def thunk_5x(node_sizes):
    """What a 5.x thunk asks for: its own control-stack and save-area sizes (smaller than the node's)."""
    def sizes(client):
        ctl, cwsr, cwsr_bo = node_sizes(client)
        return ctl // 2, cwsr - 0x10000, cwsr_bo
    return sizes


def test_create_queue_refuses_a_5x_thunks_cwsr_sizes_by_default_and_accepts_them_as_kernel_6_11(monkeypatch):
    from kfd_client import GTT, Client, pm4_release_mem
    monkeypatch.setattr(Client, "_cwsr_sizes", thunk_5x(Client._cwsr_sizes))
    with EmulatedSystem(target="gfx1100", vram_size=1 << 30) as system:
        client = Client(system.os)
        e = raises(errno.EINVAL, client.compute_queue)
        assert "ctl_stack_size" in str(e)
    with EmulatedSystem(target="gfx1100", vram_size=1 << 30, kernel_version=(6, 11), free_running=True) as system:
        client = Client(system.os)
        q = client.compute_queue()
        out = client.alloc(4096, GTT)
        q.submit(pm4_release_mem(out.va, 7))
        client.wait(out.va, 7)
        assert out.u32(0).value == 7  # the queue runs
