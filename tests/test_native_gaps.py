"""The emulated kernel behaviours a native ROCm stack needs (NATIVE_ROCM_FACTS section 3), as the kernel has them,
driven through the emulated OS boundary like a thunk would (no native code here: tests/test_native_rocminfo.py
runs the real stack).

- READ_MMR_REG answers GB_ADDR_CONFIG (what libdrm's amdgpu_device_initialize reads) and refuses other offsets
  with amdgpu_info_ioctl's errnos;
- anonymous read/write MAP_FIXED inside the process's reservation gives real, zeroed pages there (libhsakmt's
  host memory, then registered as USERPTR), munmap and mapping over work on parts of it as on Linux;
- GPU nodes list their caches (kfd_crat.c's rule): L1 per CU, SQC per 2 CUs, GL1 per array (gfx11), L2, L3;
- a USERPTR BO at a GPU address other than its CPU address (hipHostRegister of heap memory: the thunk picks the GPU
  VA) maps the user's pages there: shader stores, SDMA copies and PM4 writes through the GPU address land in the
  user's memory, a range spanning two such BOs reads each from its own pages, and unmapping the user's pages takes
  the BO out of the page table (a VM fault, never a stray host access).
"""
from __future__ import annotations

import ctypes
import errno
import mmap

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


# -- USERPTR at a GPU address other than its CPU address ----------------------------------------------------


def user_pages(size: int) -> tuple[mmap.mmap, int]:
    """Ordinary anonymous host memory outside the emulator's window (like heap memory) and its address."""
    pages = mmap.mmap(-1, size)
    return pages, ctypes.addressof(ctypes.c_char.from_buffer(pages))


def register(client, cpu: int, size: int, va: int | None = None) -> int:
    """hsaKmtRegisterMemory's way: a GPU VA of the thunk's own (a reservation), USERPTR wrapping `cpu`, mapped."""
    from kfd_client import ALLOC_MEMORY, MAP_MEMORY, Alloc, MapToGpu
    if va is None:
        va = client.os.mmap(0, size, PROT_NONE, ANON | MAP_NORESERVE)
    # zeroed host pages at the GPU VA too: an emulator that used them instead of the user's gives wrong bytes
    client.os.mmap(va, size, RW, ANON | MAP_FIXED)
    a = Alloc(va_addr=va, size=size, gpu_id=client.gpu_id, mmap_offset=cpu,
              flags=k.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | k.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE)
    client.os.ioctl(client.kfd, ALLOC_MEMORY, a)
    ids = (ctypes.c_uint32 * 1)(client.gpu_id)
    client.os.ioctl(client.kfd, MAP_MEMORY, MapToGpu(handle=a.handle, device_ids_array_ptr=ctypes.addressof(ids),
                                                     n_devices=1))
    return va


@pytest.fixture(params=["gfx1100", "gfx942"])
def client(request):
    from kfd_client import Client
    with EmulatedSystem(target=request.param, vram_size=1 << 30, free_running=True) as system:
        c = Client(system.os, hdp_flush=True)  # its kernel code is a CPU store into VRAM (facts 6.4)
        yield c
        c.close()


def test_gpu_writes_through_a_userptr_at_another_address_land_in_the_users_pages(client):
    from kfd_client import GTT, Mem, pm4_release_mem, sdma_copy, sdma_fence
    pages, cpu = user_pages(0x2000)
    cells = (ctypes.c_uint32 * 0x800).from_address(cpu)
    cells[0x600] = 0xC0FFEE  # the CPU's store, for the GPU to read through its own address
    va = register(client, cpu, 0x2000)
    assert va != cpu
    q = client.compute_queue()
    q.submit(client.dispatch_packets(client.load_kernel(), Mem(va, 0x2000, 0)) + pm4_release_mem(va + 0x400, 7))
    client.wait(cpu + 0x400, 7)  # the release_mem's write, seen at the CPU address
    assert list(cells[:64]) == [42 + i for i in range(64)]  # the kernel's 64 stores through the GPU VA
    sdma = client.sdma_queue()
    out = client.alloc(0x1000, GTT)
    sdma.submit(sdma_copy(out.va, va + 0x1800, 4) + sdma_copy(va + 0x1000, out.va, 4) + sdma_fence(out.va + 8, 1))
    client.wait(out.va + 8, 1)
    assert out.u32(0).value == 0xC0FFEE  # read from the user's pages
    assert cells[0x400] == 0xC0FFEE  # and written back to them through the GPU VA
    assert client.os.system.gpus[0].faults == []
    pages.close()


def test_a_gpu_copy_spanning_two_userptrs_reads_and_writes_each_ones_own_pages(client):
    from kfd_client import GTT, sdma_copy, sdma_fence
    (p1, cpu1), (p2, cpu2) = user_pages(0x1000), user_pages(0x1000)
    ctypes.memmove(cpu1, b"A" * 0x1000, 0x1000)
    ctypes.memmove(cpu2, b"B" * 0x1000, 0x1000)
    va = client.os.mmap(0, 0x2000, PROT_NONE, ANON | MAP_NORESERVE)
    register(client, cpu1, 0x1000, va)
    register(client, cpu2, 0x1000, va + 0x1000)  # adjacent on the GPU, far apart on the host
    out = client.alloc(0x1000, GTT)
    ctypes.memmove(out.va + 0x100, b"0123456789abcdef", 16)
    sdma = client.sdma_queue()
    sdma.submit(sdma_copy(out.va, va + 0xFF8, 16) + sdma_copy(va + 0xFF8, out.va + 0x100, 16)
                + sdma_fence(out.va + 0x200, 1))
    client.wait(out.va + 0x200, 1)
    assert ctypes.string_at(out.va, 16) == b"A" * 8 + b"B" * 8
    assert ctypes.string_at(cpu1 + 0xFF0, 16) == b"A" * 8 + b"01234567"
    assert ctypes.string_at(cpu2, 16) == b"89abcdef" + b"B" * 8
    space = client.os.system.gpus[0].memory
    space.fill(va + 0xFFC, b"\x01\x02", 8)  # a pattern fill across the boundary
    assert ctypes.string_at(cpu1 + 0xFFC, 4) + ctypes.string_at(cpu2, 4) == b"\x01\x02" * 4
    assert space.read_u64(va + 0xFFC) == int.from_bytes(b"\x01\x02" * 4, "little")  # an unaligned straddling read
    p1.close(), p2.close()


def test_unmapping_the_users_pages_takes_the_userptr_out_of_the_gpu_page_table(client):
    pages, cpu = user_pages(0x1000)
    va = register(client, cpu, 0x1000)
    system = client.os.system
    system.driver.before_gpus_run()
    assert system.gpus[0].memory.find(va).kind == "userptr"
    pages.close()  # the user's pages go behind the driver's back (free() of a large block)
    system.driver.before_gpus_run()  # probes the CPU address, not the GPU VA
    assert system.gpus[0].memory.find(va) is None  # a GPU access is a VM fault now, not a host access


def test_a_queue_in_a_userptr_at_another_address_is_refused_naming_the_limitation(client):
    from kfd_client import CREATE_QUEUE, QUEUE_SDMA, CreateQueue
    (pages, cpu), (ptr_pages, ptr_cpu) = user_pages(0x4000), user_pages(0x1000)
    ring, ptrs = register(client, cpu, 0x4000), register(client, ptr_cpu, 0x1000)
    args = CreateQueue(ring_base_address=ring, write_pointer_address=ptrs + 8, read_pointer_address=ptrs,
                       ring_size=0x4000, gpu_id=client.gpu_id, queue_type=QUEUE_SDMA, queue_percentage=100,
                       queue_priority=7)
    e = raises(errno.EINVAL, client.os.ioctl, client.kfd, CREATE_QUEUE, args)
    assert "queue memory must be at its CPU address" in str(e)


def test_a_page_table_mapping_onto_other_host_pages_keeps_them_when_punched():
    from hcqsim.memory import AddressSpace
    (pa, a), (pb, b) = user_pages(0x3000), user_pages(0x3000)  # GPU VA a, host pages at b
    for page in range(3):
        ctypes.c_uint32.from_address(a + page * 0x1000).value = 100 + page
        ctypes.c_uint32.from_address(b + page * 0x1000).value = 200 + page
    space = AddressSpace()
    space.map(a, 0x3000, "userptr", host=b)
    assert [space.read_u32(a + p * 0x1000) for p in range(3)] == [200, 201, 202]
    space.punch(a + 0x1000, a + 0x2000)  # fault injection cuts the middle page out
    assert space.read(a + 0x2000, 4) == (202).to_bytes(4, "little") and space.read_u32(a) == 200
    space.write_u32(a + 0x2000, 7)
    assert ctypes.c_uint32.from_address(b + 0x2000).value == 7 and ctypes.c_uint32.from_address(a + 0x2000).value == 102
    space.find(a)  # the other piece is the last one used: the next accesses take the slow paths
    space.write_u64(a + 0x2002, 0x1122334455667788)  # unaligned
    assert ctypes.string_at(b + 0x2002, 8) == (0x1122334455667788).to_bytes(8, "little")
    space.find(a)
    assert space.read_u32(a + 0x2004) == 0x33445566 and ctypes.c_uint32.from_address(a + 0x2004).value == 0
    pa.close(), pb.close()
