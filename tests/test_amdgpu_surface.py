"""The amdgpu surface a KFD client reads, used as a client would: open the render node, issue DRM ioctls
with ctypes structs through the emulated OS boundary, read amdgpu's sysfs.

Golden numbers come from the kernel headers (include/uapi/drm/drm.h, amdgpu_drm.h), the kernel's code
(drm_ioctl.c drm_ioctl / drm_version, amdgpu_kms.c amdgpu_info_ioctl, amdgpu_discovery.c) and the emulated
parts' facts (PCI ids, GC/SDMA/NBIO IP versions, the MEC/SDMA firmware KFD's topology reports).
"""
from __future__ import annotations

import ctypes
import errno

import pytest

from hcqsim import drm_uapi as d
from hcqsim import kfd_uapi as k
from hcqsim.kfd import EmulatedSystem
from kfd_client import GTT, VRAM, WRITABLE, Client

RENDER = "/dev/dri/renderD128"
DEVICE = "/sys/class/drm/renderD128/device"
TOPOLOGY_NODE = "/sys/devices/virtual/kfd/kfd/topology/nodes/1"
MiB = 1 << 20

# target -> (PCI device id, family, CUs, SEs per XCC, wave size, vram type, GC, SDMA, NBIO, XCCs, SDMA engines)
PARTS = {
    "gfx1100": (0x744C, 145, 96, 6, 32, 9, (11, 0, 0), (6, 0, 0), (4, 3, 0), 1, 2),  # Navi31, GDDR6
    "gfx942": (0x74A1, 141, 304, 4, 64, 6, (9, 4, 3), (4, 4, 2), (7, 9, 0), 8, 16),  # MI300X, HBM
}


@pytest.fixture(params=sorted(PARTS))
def part(request):
    system = EmulatedSystem(num_gpus=1, target=request.param, vram_size=8 << 30)
    yield request.param, system
    system.close()


@pytest.fixture
def system():
    s = EmulatedSystem(num_gpus=2, target="gfx1100", vram_size=4 << 30)
    yield s
    s.close()


def raises(err: int, fn, *args, **kwargs) -> OSError:
    with pytest.raises(OSError) as info:
        fn(*args, **kwargs)
    assert info.value.errno == err, f"expected {errno.errorcode[err]}, got {info.value!r}"
    return info.value


def info(os_, fd: int, query: int, answer: ctypes.Structure | ctypes._SimpleCData, size: int | None = None,
         **union) -> d.DrmAmdgpuInfo:
    """One DRM_IOCTL_AMDGPU_INFO call writing into `answer` (return_size = its size unless `size`)."""
    args = d.DrmAmdgpuInfo(return_pointer=ctypes.addressof(answer),
                           return_size=ctypes.sizeof(answer) if size is None else size, query=query)
    for member, fields in union.items():
        for name, value in fields.items():
            setattr(getattr(args, member), name, value)
    os_.ioctl(fd, d.DRM_IOCTL_AMDGPU_INFO, args)
    return args


# ---------------------------------------------------------------------------------------------------
# the UAPI as data: request numbers and layouts from the headers


def test_request_numbers_are_the_headers():
    assert d.DRM_IOCTL_AMDGPU_INFO == 0x40206445  # DRM_IOW(DRM_COMMAND_BASE + 0x05, struct drm_amdgpu_info)
    assert d.DRM_IOCTL_VERSION == 0xC0406400  # DRM_IOWR(0x00, struct drm_version)
    assert (d.AMDGPU_INFO_HW_IP_INFO, d.AMDGPU_INFO_FW_VERSION, d.AMDGPU_INFO_VRAM_GTT, d.AMDGPU_INFO_DEV_INFO,
            d.AMDGPU_INFO_MEMORY) == (0x02, 0x0E, 0x14, 0x16, 0x19)
    assert (d.AMDGPU_INFO_FW_GFX_MEC, d.AMDGPU_INFO_FW_SDMA) == (0x08, 0x0B)


def test_struct_layouts_are_the_headers():
    sizes = {d.DrmVersion: 64, d.DrmAmdgpuInfo: 32, d.DrmAmdgpuQueryFw: 16, d.DrmAmdgpuInfoFirmware: 8,
             d.DrmAmdgpuInfoVramGtt: 24, d.DrmAmdgpuHeapInfo: 32, d.DrmAmdgpuMemoryInfo: 96,
             d.DrmAmdgpuInfoHwIp: 40, d.DrmAmdgpuInfoDevice: 448}
    assert {cls: ctypes.sizeof(cls) for cls in sizes} == sizes
    offsets = lambda cls: {name: off for name, off, _ in k.struct_fields(cls, flatten=True)}  # noqa: E731
    assert {n: offsets(d.DrmVersion)[n] for n in ("name_len", "name", "date_len", "desc")} == \
        dict(name_len=16, name=24, date_len=32, desc=56)
    assert offsets(d.DrmAmdgpuInfo)["query"] == 12 and d.DrmAmdgpuInfo.u.offset == 16
    dev = offsets(d.DrmAmdgpuInfoDevice)  # hand count of struct drm_amdgpu_info_device
    assert {n: dev[n] for n in ("family", "max_engine_clock", "cu_active_number", "ids_flags", "vram_type",
                                "wave_front_size", "tcc_disabled_mask", "mall_size", "userq_ip_mask")} == \
        dict(family=16, max_engine_clock=32, cu_active_number=48, ids_flags=136, vram_type=176,
             wave_front_size=240, tcc_disabled_mask=360, mall_size=408, userq_ip_mask=436)


# ---------------------------------------------------------------------------------------------------
# dispatch (drm_ioctl.c)


def test_a_kfd_ioctl_on_the_render_node_is_enotty(system):
    fd = system.os.open(RENDER)
    raises(errno.ENOTTY, system.os.ioctl, fd, k.AMDKFD_IOC_GET_VERSION, k.GetVersionArgs())


def test_a_driver_nr_past_the_amdgpu_table_or_in_a_hole_is_einval(system):
    fd = system.os.open(RENDER)
    for offset in (d.DRM_AMDGPU_NUM_IOCTLS, 0x0A):  # 0x0a..0x0f are NULL slots of amdgpu_ioctls_kms[]
        raises(errno.EINVAL, system.os.ioctl, fd, k.IOWR("d", d.DRM_COMMAND_BASE + offset, 8), bytearray(8))


def test_a_real_amdgpu_ioctl_hcqsim_does_not_emulate_says_so(system):
    fd = system.os.open(RENDER)
    err = raises(errno.EOPNOTSUPP, system.os.ioctl, fd, k.IOWR("d", 0x40, 32), bytearray(32))  # GEM_CREATE
    assert "GEM_CREATE" in str(err) and "not emulated" in str(err)


def test_drm_version_names_the_amdgpu_driver(system):
    fd = system.os.open(RENDER)
    probe = d.DrmVersion()  # zero lengths: the kernel reports the full lengths and copies nothing
    system.os.ioctl(fd, d.DRM_IOCTL_VERSION, probe)
    assert (probe.name_len, probe.desc_len) == (len("amdgpu"), len("AMD GPU"))
    assert probe.version_major == 3
    name, desc = ctypes.create_string_buffer(16), ctypes.create_string_buffer(3)
    v = d.DrmVersion(name_len=16, name=ctypes.addressof(name), desc_len=3, desc=ctypes.addressof(desc))
    system.os.ioctl(fd, d.DRM_IOCTL_VERSION, v)
    assert name.value == b"amdgpu" and v.name_len == 6
    assert desc.raw == b"AMD" and v.desc_len == 7  # truncated to the buffer, full length reported


# ---------------------------------------------------------------------------------------------------
# AMDGPU_INFO (amdgpu_kms.c amdgpu_info_ioctl)


def test_dev_info_describes_the_emulated_part(part):
    target, system = part
    device_id, family, cus, ses, wave, vram_type, *_ = PARTS[target]
    fd = system.os.open(RENDER)
    dev = d.DrmAmdgpuInfoDevice()
    info(system.os, fd, d.AMDGPU_INFO_DEV_INFO, dev)
    assert (dev.device_id, dev.family, dev.cu_active_number, dev.num_shader_engines, dev.wave_front_size,
            dev.vram_type) == (device_id, family, cus, ses, wave, vram_type)
    props = dict(line.split() for line in system.os.read_text(f"{TOPOLOGY_NODE}/properties").splitlines())
    assert dev.device_id == int(props["device_id"])  # amdgpu and KFD describe the same part
    assert dev.max_engine_clock == int(props["max_engine_clk_fcompute"]) * 1000  # kHz vs MHz
    assert dev.gpu_counter_freq == 100_000 and dev.gart_page_size == 4096


def test_info_writes_at_most_return_size_bytes(system):
    fd = system.os.open(RENDER)
    buf = (ctypes.c_uint8 * ctypes.sizeof(d.DrmAmdgpuInfoDevice))(*([0xAA] * ctypes.sizeof(d.DrmAmdgpuInfoDevice)))
    info(system.os, fd, d.AMDGPU_INFO_DEV_INFO, buf, size=8)  # an old client asking for device_id, chip_rev
    assert int.from_bytes(bytes(buf[:4]), "little") == 0x744C
    assert bytes(buf[8:]) == b"\xAA" * (len(buf) - 8)


def test_fw_version_of_mec_and_sdma_is_what_the_kfd_topology_reports(part):
    target, system = part
    sdma_engines = PARTS[target][10]
    fd = system.os.open(RENDER)
    props = dict(line.split() for line in system.os.read_text(f"{TOPOLOGY_NODE}/properties").splitlines())
    mec, sdma = d.DrmAmdgpuInfoFirmware(), d.DrmAmdgpuInfoFirmware()
    info(system.os, fd, d.AMDGPU_INFO_FW_VERSION, mec, query_fw=dict(fw_type=d.AMDGPU_INFO_FW_GFX_MEC))
    assert mec.ver == int(props["fw_version"])
    last = dict(fw_type=d.AMDGPU_INFO_FW_SDMA, index=sdma_engines - 1)  # every SDMA instance answers
    info(system.os, fd, d.AMDGPU_INFO_FW_VERSION, sdma, query_fw=last)
    assert sdma.ver == int(props["sdma_fw_version"])
    fw = d.DrmAmdgpuInfoFirmware()
    for bad in (dict(fw_type=d.AMDGPU_INFO_FW_SDMA, index=sdma_engines),  # past the SDMA instances
                dict(fw_type=d.AMDGPU_INFO_FW_GFX_MEC, index=2),  # MEC1 and MEC2 only
                dict(fw_type=d.AMDGPU_INFO_FW_GFX_MEC, ip_instance=1),  # one instance of each IP
                dict(fw_type=0x09)):  # no such firmware type
        raises(errno.EINVAL, info, system.os, fd, d.AMDGPU_INFO_FW_VERSION, fw, query_fw=bad)


def test_memory_heaps_follow_the_kernels_arithmetic_and_the_clients_allocations():
    system = EmulatedSystem(num_gpus=1, target="gfx1100", vram_size=1 << 30)
    try:
        client = Client(system.os)
        mem = d.DrmAmdgpuMemoryInfo()
        info(system.os, client.drm, d.AMDGPU_INFO_MEMORY, mem)
        before_vram, before_gtt = mem.vram.heap_usage, mem.gtt.heap_usage
        assert mem.vram.total_heap_size == 1 << 30
        assert mem.vram.usable_heap_size == (1 << 30) - 8 * MiB  # AMDGPU_VM_RESERVED_VRAM
        assert mem.vram.max_allocation == mem.vram.usable_heap_size * 3 // 4
        assert mem.cpu_accessible_vram.total_heap_size == 1 << 30  # large BAR: all VRAM is visible
        assert mem.gtt.total_heap_size == 32 << 30  # half of the emulated host's 64 GiB
        client.alloc(4 * MiB, VRAM | WRITABLE)
        client.alloc(2 * MiB, GTT | WRITABLE)
        info(system.os, client.drm, d.AMDGPU_INFO_MEMORY, mem)
        assert (mem.vram.heap_usage - before_vram, mem.gtt.heap_usage - before_gtt) == (4 * MiB, 2 * MiB)
        used = ctypes.c_uint64()
        info(system.os, client.drm, d.AMDGPU_INFO_VRAM_USAGE, used)
        assert used.value == mem.vram.heap_usage
        assert int(system.os.read_text(f"{DEVICE}/mem_info_vram_used")) == mem.vram.heap_usage
        assert int(system.os.read_text(f"{DEVICE}/mem_info_gtt_used")) == mem.gtt.heap_usage
        vram_gtt = d.DrmAmdgpuInfoVramGtt()
        info(system.os, client.drm, d.AMDGPU_INFO_VRAM_GTT, vram_gtt)
        assert (vram_gtt.vram_size, vram_gtt.vram_cpu_accessible_size, vram_gtt.gtt_size) == \
            ((1 << 30) - 8 * MiB, (1 << 30) - 8 * MiB, 32 << 30)
    finally:
        system.close()


def test_hw_ip_info_and_count_for_gfx_compute_and_dma(part):
    target, system = part
    *_, gc, sdma, _nbio, xccs, sdma_engines = PARTS[target]
    fd = system.os.open(RENDER)
    ips = {}
    for hw_ip in (d.AMDGPU_HW_IP_GFX, d.AMDGPU_HW_IP_COMPUTE, d.AMDGPU_HW_IP_DMA):
        ip, count = d.DrmAmdgpuInfoHwIp(), ctypes.c_uint32()
        info(system.os, fd, d.AMDGPU_INFO_HW_IP_INFO, ip, query_hw_ip=dict(type=hw_ip))
        info(system.os, fd, d.AMDGPU_INFO_HW_IP_COUNT, count, query_hw_ip=dict(type=hw_ip))
        ips[hw_ip] = ((ip.hw_ip_version_major, ip.hw_ip_version_minor), ip.ip_discovery_version,
                      ip.available_rings, (ip.ib_start_alignment, ip.ib_size_alignment), count.value)
    packed = lambda v: v[0] << 16 | v[1] << 8 | v[2]  # noqa: E731
    gfx_rings = 0x1 if target == "gfx1100" else 0x0  # gfx942 has no graphics ring
    assert ips == {
        d.AMDGPU_HW_IP_GFX: (gc[:2], packed(gc), gfx_rings, (32, 32), xccs),
        d.AMDGPU_HW_IP_COMPUTE: (gc[:2], packed(gc), 0xF, (32, 32), xccs),  # 4 = amdgpu_ctx_num_entities
        d.AMDGPU_HW_IP_DMA: (sdma[:2], packed(sdma), 0x3, (256, 4), sdma_engines),
    }


def test_hw_ip_queries_without_the_ip_block(system):
    fd = system.os.open(RENDER)
    ip = d.DrmAmdgpuInfoHwIp(hw_ip_version_major=77)
    info(system.os, fd, d.AMDGPU_INFO_HW_IP_INFO, ip, query_hw_ip=dict(type=d.AMDGPU_HW_IP_VCN_DEC))
    assert bytes(ip) == bytes(ctypes.sizeof(ip))  # the kernel answers 0 and a zeroed struct
    count = ctypes.c_uint32()
    raises(errno.EINVAL, info, system.os, fd, d.AMDGPU_INFO_HW_IP_COUNT, count,
           query_hw_ip=dict(type=d.AMDGPU_HW_IP_VCN_DEC))
    raises(errno.EINVAL, info, system.os, fd, d.AMDGPU_INFO_HW_IP_INFO, ip,
           query_hw_ip=dict(type=d.AMDGPU_HW_IP_NUM))
    raises(errno.EINVAL, info, system.os, fd, d.AMDGPU_INFO_HW_IP_INFO, ip,
           query_hw_ip=dict(type=d.AMDGPU_HW_IP_GFX, ip_instance=1))


def test_info_errnos(system):
    fd = system.os.open(RENDER)
    out = ctypes.c_uint64()
    raises(errno.EINVAL, info, system.os, fd, 0x7F, out)  # not a query amdgpu knows
    raises(errno.EINVAL, info, system.os, fd, d.AMDGPU_INFO_DEV_INFO, out, size=0)  # return_size 0
    raises(errno.EINVAL, system.os.ioctl, fd, d.DRM_IOCTL_AMDGPU_INFO,
           d.DrmAmdgpuInfo(return_pointer=0, return_size=8, query=d.AMDGPU_INFO_DEV_INFO))
    raises(errno.EFAULT, system.os.ioctl, fd, d.DRM_IOCTL_AMDGPU_INFO,
           d.DrmAmdgpuInfo(return_pointer=1 << 60, return_size=8, query=d.AMDGPU_INFO_VRAM_USAGE))
    err = raises(errno.EOPNOTSUPP, info, system.os, fd, 0x1D, out)  # SENSOR: real, but not emulated
    assert "not emulated" in str(err)


def test_each_render_node_answers_for_its_own_gpu(system):
    for i in range(2):
        fd = system.os.open(f"/dev/dri/renderD{128 + i}")
        ok = ctypes.c_uint32()
        info(system.os, fd, d.AMDGPU_INFO_ACCEL_WORKING, ok)
        assert ok.value == 1


# ---------------------------------------------------------------------------------------------------
# sysfs (amdgpu_discovery.c ip_discovery; PCI ids; mem_info_*)


# target -> the ip discovery directories: Navi31 gives each SDMA engine its own HWID (42, 43), MI300X lists
# its 16 engines as instances of SDMA0 and its 8 XCCs as instances of GC
DISCOVERY = {
    "gfx1100": (["11", "42", "43", "108", "GC", "NBIF", "SDMA0", "SDMA1"],
                [("GC", 11, "gc", 1), ("SDMA0", 42, "sdma", 1), ("SDMA1", 43, "sdma", 1), ("NBIF", 108, "nbio", 1)]),
    "gfx942": (["11", "42", "108", "GC", "NBIF", "SDMA0"],
               [("GC", 11, "gc", 8), ("SDMA0", 42, "sdma", 16), ("NBIF", 108, "nbio", 1)]),
}


def test_ip_discovery_shows_gc_sdma_and_nbio_versions(part):
    target, system = part
    *_, gc, sdma, nbio, _xccs, _sdma_engines = PARTS[target]
    versions = dict(gc=gc, sdma=sdma, nbio=nbio)
    read = system.os.read_text
    die = f"{DEVICE}/ip_discovery/die/0"
    assert system.os.listdir(f"{DEVICE}/ip_discovery/die") == ["0"]
    names, ips = DISCOVERY[target]
    assert system.os.listdir(die) == names  # hw ids and their named links
    for name, hw_id, ip, instances in ips:
        version = versions[ip]
        assert system.os.listdir(f"{die}/{name}") == [str(n) for n in range(instances)]
        for n in range(instances):
            files = {a: read(f"{die}/{name}/{n}/{a}") for a in ("hw_id", "num_instance", "major", "minor",
                                                                 "revision", "harvest")}
            assert files == dict(hw_id=f"{hw_id}\n", num_instance=f"{n}\n", major=f"{version[0]}\n",
                                 minor=f"{version[1]}\n", revision=f"{version[2]}\n", harvest="0x0\n")
            assert read(f"{die}/{hw_id}/{n}/major") == files["major"]  # the link and the number agree


def test_pci_ids_and_memory_totals(part):
    target, system = part
    read = system.os.read_text
    assert read(f"{DEVICE}/vendor") == "0x1002\n"
    assert read(f"{DEVICE}/device") == f"0x{PARTS[target][0]:04x}\n"
    assert read("/sys/class/drm/renderD128/dev") == "226:128\n"
    assert int(read(f"{DEVICE}/mem_info_vram_total")) == 8 << 30
    assert int(read(f"{DEVICE}/mem_info_gtt_total")) == 32 << 30


def test_sysfs_paths_behave_like_linux(system):
    assert system.os.listdir("/sys/class/drm") == ["renderD128", "renderD129"]
    assert system.os.exists(f"{DEVICE}/ip_discovery/die/0/GC/0/major")
    assert not system.os.exists(f"{DEVICE}/ip_discovery/die/0/VCN")
    raises(errno.ENOENT, system.os.read_text, f"{DEVICE}/ip_discovery/die/0/GC/1/major")  # one XCC on gfx1100
    raises(errno.ENOENT, system.os.read_text, f"{DEVICE}/pp_dpm_sclk")
    raises(errno.ENOENT, system.os.listdir, "/sys/class/drm/renderD130")
    raises(errno.EISDIR, system.os.read_text, f"{DEVICE}/ip_discovery")
    raises(errno.ENOTDIR, system.os.listdir, f"{DEVICE}/vendor")


def test_the_argument_may_be_a_struct_a_buffer_or_a_bare_address(system):
    fd = system.os.open(RENDER)
    used = ctypes.c_uint64(123)
    args = d.DrmAmdgpuInfo(return_pointer=ctypes.addressof(used), return_size=8, query=d.AMDGPU_INFO_VRAM_USAGE)
    system.os.ioctl(fd, d.DRM_IOCTL_AMDGPU_INFO, ctypes.addressof(args))  # copied in through copy_from_user
    assert used.value == 0  # nothing allocated yet
    system.os.ioctl(fd, d.DRM_IOCTL_AMDGPU_INFO, bytearray(bytes(args)))
    raises(errno.EFAULT, system.os.ioctl, fd, d.DRM_IOCTL_AMDGPU_INFO, bytearray(16))  # shorter than _IOC_SIZE
