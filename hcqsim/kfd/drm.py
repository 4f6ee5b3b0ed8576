"""The amdgpu side of the render nodes: DRM ioctls on /dev/dri/renderD<minor> and amdgpu's own sysfs.

A KFD client opens the render node for ACQUIRE_VM and BO mmaps, and many also ask amdgpu about the part:
DRM_IOCTL_VERSION for the driver name, DRM_IOCTL_AMDGPU_INFO for device, firmware, memory and IP facts, and
`/sys/class/drm/renderD*/device/...` (ip_discovery, vendor/device ids, mem_info_*). This module answers those
as the kernel does, from the emulated target's facts:

- dispatch follows drm_ioctl.c: an _IOC_TYPE other than 'd' is -ENOTTY; a driver nr past amdgpu's table or
  in one of its holes is -EINVAL; the user's _IOC_SIZE bytes are copied in, the kernel's struct zero-filled
  beyond them, and copied back out (for _IOC_READ commands) even when the handler failed;
- AMDGPU_INFO follows amdgpu_kms.c amdgpu_info_ioctl: -EINVAL without return_pointer/return_size or for an
  unknown query, at most min(return_size, sizeof(answer)) bytes written to return_pointer (-EFAULT if bad).

What the kernel has but hcqsim does not emulate (GEM/CS/CTX ioctls, other DRM core ioctls, AMDGPU_INFO
queries such as READ_MMR_REG or SENSOR) is -EOPNOTSUPP with a message saying so, never a made-up answer.
"""
from __future__ import annotations

import ctypes
import errno
from typing import TYPE_CHECKING, Callable

from .. import drm_uapi as d
from .. import kfd_uapi as k
from .process import _user_buffer  # the argument forms (ctypes object, buffer, address) KFD's ioctl takes
from .topology import CPU_MEMORY, NODE_FACTS
from .uaccess import read_user, write_user

if TYPE_CHECKING:
    from .system import EmulatedSystem

# amdgpu_drv.c / drm_ioctl.c facts
DRIVER_NAME, DRIVER_DESC = "amdgpu", "AMD GPU"
DRIVER_DATE = "0"  # drm_version reports "0" since the driver-date field was removed from struct drm_driver
KMS_DRIVER_VERSION = (3, 58, 0)  # KMS_DRIVER_MAJOR/MINOR/PATCHLEVEL of a recent amdgpu
AMDGPU_VM_RESERVED_VRAM = 8 << 20  # amdgpu_vm.h: VRAM kept back for page tables, not usable by clients
AMDGPU_GPU_PAGE_SIZE = 4096
GPU_COUNTER_FREQ_KHZ = 100_000  # amdgpu_asic_get_xclk() * 10: the 100 MHz reference clock of these dGPUs
# amdgpu_ctx_num_entities[]: at most this many rings per HW IP type are reported as available_rings
CTX_NUM_ENTITIES = {d.AMDGPU_HW_IP_GFX: 1, d.AMDGPU_HW_IP_COMPUTE: 4, d.AMDGPU_HW_IP_DMA: 2}
KERNEL_COMPUTE_RINGS = 8  # amdgpu_num_kcq default: kernel compute rings per XCC
# drm_ioctl.c: ARRAY_SIZE(drm_ioctls), one past the last core ioctl, DRM_IOCTL_GEM_CHANGE_HANDLE (0xD2, drm.h);
# a core nr from here on is -EINVAL (the last entry moves with kernel versions: 0xD0 CLOSEFB, 0xD1 SET_CLIENT_NAME)
DRM_CORE_IOCTL_COUNT = 0xD3

# AMDGPU_INFO_READ_MMR_REG (amdgpu_kms.c; soc15.c / soc21.c *_read_register): only registers of the ASIC's
# allow list are readable; GB_ADDR_CONFIG (GC segment-0 offset 0x63e: absolute dword 0x263e on soc15 and soc21,
# what libdrm's amdgpu_query_gpu_info_init reads) answers adev->gfx.config.gb_addr_config. The values are composed
# from the target's layout (NUM_PIPES [2:0] log2, MAX_COMPRESSED_FRAGS [7:6], gfx11 NUM_PKRS [10:8], gfx9
# NUM_SHADER_ENGINES [20:19] log2 per XCC) and are illustrative: nothing hcqsim emulates depends on them. The
# allow list's status registers (GRBM_STATUS, CP_STAT, SDMA*_STATUS, ...) are not modelled and answer like an
# offset outside the list (the ioctl's -EFAULT).
AMDGPU_INFO_READ_MMR_REG = 0x15  # amdgpu_drm.h
MMR_GB_ADDR_CONFIG = 0x263E
GB_ADDR_CONFIG = {"gfx1100": 0x544, "gfx942": 0x100043}
MMR_MAX_COUNT = 128  # the kernel refuses longer reads with -EINVAL
AMDGPU_GFX_MAX_SE, AMDGPU_GFX_MAX_SH_PER_SE = 8, 2
MMR_INDEX_MASK = 0xFF  # SE index [7:0], SH index [15:8]; all ones = broadcast

# amdgpu_info_ioctl's switch: the queries the kernel answers (others are -EINVAL)
KNOWN_INFO_QUERIES = frozenset({0x00, 0x01, 0x02, 0x03, 0x05, 0x0E, 0x0F, 0x10, 0x11, 0x13, 0x14, 0x15, 0x16,
                                0x17, 0x18, 0x19, 0x1A, 0x1B, 0x1C, 0x1D, 0x1E, 0x1F, 0x20, 0x21, 0x22, 0x23,
                                0x24})


class AmdgpuDrm:
    """amdgpu for the render nodes of one emulated system: `ioctl` per open node, `sysfs_tree` for the files."""

    def __init__(self, system: "EmulatedSystem"):
        self.system = system
        self.target = system.target
        self.facts = NODE_FACTS[self.target.name]
        self.by_offset = {off: name for name, off in d.DRM_AMDGPU.items()}
        self.sdma_instances = self.target.sdma_engines + self.target.sdma_xgmi_engines

    # -- dispatch (drm_ioctl.c drm_ioctl) ----------------------------------------------------------

    def ioctl(self, gpu: int, request: int, arg) -> None:
        udir, utype, nr, usize = k.ioc_decode(request)
        if utype != d.DRM_IOCTL_BASE:
            raise OSError(errno.ENOTTY, f"ioctl 0x{request:08x} on a render node: not a DRM ioctl (type "
                                        f"0x{utype:02x}, DRM is 0x{d.DRM_IOCTL_BASE:02x})")
        handler, struct, kdir = self._lookup(request, nr)
        addr, avail = _user_buffer(arg)
        in_size = usize if udir & kdir & k.IOC_WRITE else 0
        out_size = usize if udir & kdir & k.IOC_READ else 0
        if avail is not None and max(in_size, out_size) > avail:
            raise OSError(errno.EFAULT, f"ioctl 0x{request:08x}: request says {usize} bytes but the argument "
                                        f"object has {avail}")
        kdata = bytearray(max(in_size, out_size, ctypes.sizeof(struct)))
        if in_size:
            kdata[:in_size] = ctypes.string_at(addr, in_size) if avail is not None else read_user(addr, in_size)
        error = None
        try:
            handler(gpu, struct.from_buffer(kdata))
        except OSError as e:
            error = e
        if out_size:  # copied back whatever the handler returned, as drm_ioctl does
            out = bytes(kdata[:out_size])
            if avail is not None:
                ctypes.memmove(addr, out, out_size)
            else:
                write_user(addr, out)
        if error is not None:
            raise error

    def _lookup(self, request: int, nr: int) -> tuple[Callable, type[ctypes.Structure], int]:
        if d.DRM_COMMAND_BASE <= nr < d.DRM_COMMAND_END:
            name = self.by_offset.get(nr - d.DRM_COMMAND_BASE)
            if name is None:  # past amdgpu_ioctls_kms[] or a NULL slot: drm_ioctl's -EINVAL
                raise OSError(errno.EINVAL, f"ioctl 0x{request:08x}: amdgpu has no driver ioctl nr 0x{nr:02x}")
            if name != "INFO":
                raise OSError(errno.EOPNOTSUPP, f"DRM_IOCTL_AMDGPU_{name} is not emulated by hcqsim (only "
                                                f"AMDGPU_INFO; KFD clients allocate memory through /dev/kfd)")
            return self.info, d.DrmAmdgpuInfo, k.IOC_WRITE
        if nr == 0x00:
            return self.version, d.DrmVersion, k.IOC_READ | k.IOC_WRITE
        if nr >= DRM_CORE_IOCTL_COUNT:  # drm_ioctl: `if (nr >= DRM_CORE_IOCTL_COUNT) goto err_i1` (-EINVAL)
            raise OSError(errno.EINVAL, f"ioctl 0x{request:08x}: DRM core nr 0x{nr:02x} is past the core ioctl table "
                                        f"(DRM_CORE_IOCTL_COUNT 0x{DRM_CORE_IOCTL_COUNT:02x})")
        raise OSError(errno.EOPNOTSUPP, f"DRM core ioctl nr 0x{nr:02x} is not emulated by hcqsim "
                                        f"(only DRM_IOCTL_VERSION)")

    # -- DRM_IOCTL_VERSION (drm_ioctl.c drm_version / drm_copy_field) ------------------------------

    def version(self, gpu: int, v: d.DrmVersion) -> None:
        v.version_major, v.version_minor, v.version_patchlevel = KMS_DRIVER_VERSION
        for field, text in (("name", DRIVER_NAME), ("date", DRIVER_DATE), ("desc", DRIVER_DESC)):
            raw = text.encode()
            n = min(len(raw), getattr(v, f"{field}_len"))
            setattr(v, f"{field}_len", len(raw))  # the full length, so a client can size its buffer
            if n and getattr(v, field):
                write_user(getattr(v, field), raw[:n])  # not NUL-terminated, as the kernel copies it

    # -- DRM_IOCTL_AMDGPU_INFO (amdgpu_kms.c amdgpu_info_ioctl) ------------------------------------

    def info(self, gpu: int, info: d.DrmAmdgpuInfo) -> None:
        if not info.return_size or not info.return_pointer:
            raise OSError(errno.EINVAL, "AMDGPU_INFO: return_pointer and return_size must be nonzero")
        answers: dict[int, Callable[[int, d.DrmAmdgpuInfo], ctypes.Structure | ctypes._SimpleCData]] = {
            d.AMDGPU_INFO_ACCEL_WORKING: lambda g, i: ctypes.c_uint32(1),
            d.AMDGPU_INFO_HW_IP_INFO: self._hw_ip_info, d.AMDGPU_INFO_HW_IP_COUNT: self._hw_ip_count,
            d.AMDGPU_INFO_TIMESTAMP: lambda g, i: ctypes.c_uint64(self.system.gpus[g].clock),
            d.AMDGPU_INFO_FW_VERSION: self._fw_version,
            d.AMDGPU_INFO_VRAM_USAGE: lambda g, i: ctypes.c_uint64(self._vram_used(g)),
            d.AMDGPU_INFO_VIS_VRAM_USAGE: lambda g, i: ctypes.c_uint64(self._vram_used(g)),
            d.AMDGPU_INFO_GTT_USAGE: lambda g, i: ctypes.c_uint64(self._gtt_used(g)),
            d.AMDGPU_INFO_VRAM_GTT: self._vram_gtt, d.AMDGPU_INFO_DEV_INFO: self._dev_info,
            d.AMDGPU_INFO_MEMORY: self._memory, AMDGPU_INFO_READ_MMR_REG: self._read_mmr_reg,
        }
        answer = answers.get(info.query)
        if answer is None:
            if info.query in KNOWN_INFO_QUERIES:
                raise OSError(errno.EOPNOTSUPP, f"AMDGPU_INFO query 0x{info.query:02x} is not emulated by hcqsim")
            raise OSError(errno.EINVAL, f"AMDGPU_INFO: unknown query 0x{info.query:02x}")
        out = bytes(answer(gpu, info))
        write_user(info.return_pointer, out[:min(info.return_size, len(out))])

    def _read_mmr_reg(self, gpu: int, info: d.DrmAmdgpuInfo) -> ctypes.Array:
        q = info.read_mmr_reg
        se, sh = q.instance & MMR_INDEX_MASK, (q.instance >> 8) & MMR_INDEX_MASK
        if se != MMR_INDEX_MASK and se >= AMDGPU_GFX_MAX_SE:
            raise OSError(errno.EINVAL, f"AMDGPU_INFO_READ_MMR_REG: SE index {se} (at most {AMDGPU_GFX_MAX_SE - 1})")
        if sh != MMR_INDEX_MASK and sh >= AMDGPU_GFX_MAX_SH_PER_SE:
            raise OSError(errno.EINVAL, f"AMDGPU_INFO_READ_MMR_REG: SH index {sh} (at most "
                                        f"{AMDGPU_GFX_MAX_SH_PER_SE - 1})")
        if q.count > MMR_MAX_COUNT:
            raise OSError(errno.EINVAL, f"AMDGPU_INFO_READ_MMR_REG: count {q.count} > {MMR_MAX_COUNT}")
        allowed = {MMR_GB_ADDR_CONFIG: GB_ADDR_CONFIG[self.target.name]}
        values = (ctypes.c_uint32 * q.count)()
        for i in range(q.count):
            reg = q.dword_offset + i
            if reg not in allowed:
                raise OSError(errno.EFAULT, f"AMDGPU_INFO_READ_MMR_REG: register 0x{reg:x} is not readable (amdgpu's "
                                            f"allow list; hcqsim models GB_ADDR_CONFIG 0x{MMR_GB_ADDR_CONFIG:x} of it)")
            values[i] = allowed[reg]
        return values

    # memory: a large-BAR part (all VRAM CPU-visible), nothing pinned; GTT is TTM's default, half of RAM

    def _vram_used(self, gpu: int) -> int:
        return self.system.driver.memory.vram_used(gpu)

    def _gtt_used(self, gpu: int) -> int:
        bos = self.system.driver.memory.on[gpu].bos.values()
        return sum(bo.size for bo in bos if bo.kind == "gtt")

    @property
    def gtt_size(self) -> int:
        return CPU_MEMORY // 2

    def _vram_gtt(self, gpu: int, info) -> d.DrmAmdgpuInfoVramGtt:
        usable = self.system.vram_size - AMDGPU_VM_RESERVED_VRAM
        return d.DrmAmdgpuInfoVramGtt(vram_size=usable, vram_cpu_accessible_size=usable, gtt_size=self.gtt_size)

    def _memory(self, gpu: int, info) -> d.DrmAmdgpuMemoryInfo:
        total = self.system.vram_size
        usable = total - AMDGPU_VM_RESERVED_VRAM
        heap = lambda total_, usable_, used: d.DrmAmdgpuHeapInfo(  # noqa: E731
            total_heap_size=total_, usable_heap_size=usable_, heap_usage=used, max_allocation=usable_ * 3 // 4)
        vram_used = self._vram_used(gpu)
        return d.DrmAmdgpuMemoryInfo(vram=heap(total, usable, vram_used),
                                     cpu_accessible_vram=heap(total, usable, vram_used),
                                     gtt=heap(self.gtt_size, self.gtt_size, self._gtt_used(gpu)))

    def _dev_info(self, gpu: int, info) -> d.DrmAmdgpuInfoDevice:
        t, f = self.target, self.facts
        engine_khz = f["max_engine_clk_fcompute"] * 1000
        memory_khz = f["mem_clk_max"] * 1000
        return d.DrmAmdgpuInfoDevice(
            device_id=t.device_id, family=t.amdgpu_family,
            num_shader_engines=t.array_count // (t.simd_arrays_per_engine * t.num_xcc),  # per XCC
            num_shader_arrays_per_engine=t.simd_arrays_per_engine, gpu_counter_freq=GPU_COUNTER_FREQ_KHZ,
            # no DPM emulated: the kernel's default-clock branch, min = max
            max_engine_clock=engine_khz, min_engine_clock=engine_khz,
            max_memory_clock=memory_khz, min_memory_clock=memory_khz,
            cu_active_number=t.simd_count // t.simd_per_cu, num_cu_per_sh=t.cu_per_simd_array,
            wave_front_size=t.wave_size, vram_type=t.vram_type, vram_bit_width=f["mem_width"],
            virtual_address_alignment=AMDGPU_GPU_PAGE_SIZE, gart_page_size=AMDGPU_GPU_PAGE_SIZE)

    # firmware: the MEC and SDMA versions the KFD topology reports (kfd_topology.c reads the same
    # adev->gfx.mec_fw_version / sdma.instance[0].fw_version); features and other firmware are not modelled

    def _fw_version(self, gpu: int, info: d.DrmAmdgpuInfo) -> d.DrmAmdgpuInfoFirmware:
        q = info.query_fw
        if q.ip_instance != 0:
            raise OSError(errno.EINVAL, f"AMDGPU_INFO_FW_VERSION: ip_instance {q.ip_instance} (only 0)")
        if q.fw_type == d.AMDGPU_INFO_FW_GFX_MEC:
            if q.index > 1:
                raise OSError(errno.EINVAL, f"AMDGPU_INFO_FW_VERSION: MEC index {q.index} (0 = MEC1, 1 = MEC2)")
            return d.DrmAmdgpuInfoFirmware(ver=self.facts["fw_version"] if q.index == 0 else 0)
        if q.fw_type == d.AMDGPU_INFO_FW_SDMA:
            if q.index >= self.sdma_instances:
                raise OSError(errno.EINVAL, f"AMDGPU_INFO_FW_VERSION: SDMA index {q.index}, the part has "
                                            f"{self.sdma_instances} instances")
            return d.DrmAmdgpuInfoFirmware(ver=self.facts["sdma_fw_version"])
        if q.fw_type == d.AMDGPU_INFO_FW["TA"]:
            raise OSError(errno.EOPNOTSUPP, "AMDGPU_INFO_FW_VERSION: TA firmware is not emulated by hcqsim")
        if q.fw_type in d.AMDGPU_INFO_FW.values():
            return d.DrmAmdgpuInfoFirmware()  # a firmware the driver did not load answers 0/0 too
        raise OSError(errno.EINVAL, f"AMDGPU_INFO_FW_VERSION: unknown fw_type 0x{q.fw_type:02x}")

    # hardware IPs: GFX (also COMPUTE) and SDMA exist; video/VPE blocks are not emulated (no IP block)

    def _ip_block(self, hw_ip: int) -> tuple[int, int, int] | None:
        """The discovery version of the amdgpu IP block serving `hw_ip`, None when there is none."""
        if hw_ip in (d.AMDGPU_HW_IP_GFX, d.AMDGPU_HW_IP_COMPUTE):
            return self.target.gc_version
        if hw_ip == d.AMDGPU_HW_IP_DMA:
            return self.target.sdma_version
        return None

    def _hw_ip_info(self, gpu: int, info: d.DrmAmdgpuInfo) -> d.DrmAmdgpuInfoHwIp:
        q = info.query_hw_ip
        if q.ip_instance >= d.AMDGPU_HW_IP_INSTANCE_MAX_COUNT or q.type >= d.AMDGPU_HW_IP_NUM:
            raise OSError(errno.EINVAL, f"AMDGPU_INFO_HW_IP_INFO: type {q.type} instance {q.ip_instance}")
        version = self._ip_block(q.type)
        if version is None:
            return d.DrmAmdgpuInfoHwIp()  # amdgpu_hw_ip_info returns 0 and a zeroed answer without the block
        t = self.target
        rings = {d.AMDGPU_HW_IP_GFX: 1 if t.is_gfx11 else 0,  # gfx942 has no graphics ring
                 d.AMDGPU_HW_IP_COMPUTE: KERNEL_COMPUTE_RINGS * t.num_xcc,
                 d.AMDGPU_HW_IP_DMA: self.sdma_instances}[q.type]
        rings = min(CTX_NUM_ENTITIES[q.type], rings)
        start, size = (256, 4) if q.type == d.AMDGPU_HW_IP_DMA else (32, 32)
        # the amdgpu IP block's own major.minor: gfx_v11_0 / gfx_v9_4_3, sdma_v6_0 / sdma_v4_4_2
        return d.DrmAmdgpuInfoHwIp(hw_ip_version_major=version[0], hw_ip_version_minor=version[1],
                                   ib_start_alignment=start, ib_size_alignment=size,
                                   available_rings=(1 << rings) - 1,
                                   ip_discovery_version=d.ip_version_maj_min_rev(version))

    def _hw_ip_count(self, gpu: int, info: d.DrmAmdgpuInfo) -> ctypes.c_uint32:
        hw_ip = info.query_hw_ip.type
        if self._ip_block(hw_ip) is None:
            raise OSError(errno.EINVAL, f"AMDGPU_INFO_HW_IP_COUNT: no IP block for type {hw_ip}")
        # gfx942 (SPX: one partition holding every XCC and SDMA engine) counts the partition's instances
        if hw_ip == d.AMDGPU_HW_IP_DMA:
            return ctypes.c_uint32(self.sdma_instances)
        return ctypes.c_uint32(self.target.num_xcc)

    # -- sysfs (amdgpu_discovery.c ip_discovery, amdgpu_device.c / amdgpu_vram_mgr.c / amdgpu_gtt_mgr.c) ---

    def sysfs_tree(self) -> dict[str, str | Callable[[], str]]:
        """path -> text (or a function giving it) for every render node's amdgpu files."""
        tree: dict[str, str | Callable[[], str]] = {}
        t = self.target
        if t.sdma_hwid_per_engine:  # only two SDMA HWIDs are modelled: enough for the parts emulated
            assert self.sdma_instances <= 2, t.name
            sdma = [(hw_id, t.sdma_version, 1) for hw_id in (d.SDMA0_HWID, d.SDMA1_HWID)[:self.sdma_instances]]
        else:
            sdma = [(d.SDMA0_HWID, t.sdma_version, self.sdma_instances)]
        ips = [(d.GC_HWID, t.gc_version, t.num_xcc), *sdma, (d.NBIF_HWID, t.nbio_version, 1)]
        for dev in self.system.driver.devices:
            node = f"/sys/class/drm/renderD{dev.minor}"
            base = f"{node}/device"
            i = dev.index
            tree.update({
                f"{node}/dev": f"{d.DRM_MAJOR}:{dev.minor}\n",
                f"{base}/vendor": f"0x{d.PCI_VENDOR_ID_ATI:04x}\n", f"{base}/device": f"0x{t.device_id:04x}\n",
                f"{base}/mem_info_vram_total": f"{self.system.vram_size}\n",
                f"{base}/mem_info_vis_vram_total": f"{self.system.vram_size}\n",
                f"{base}/mem_info_vram_used": (lambda i=i: f"{self._vram_used(i)}\n"),
                f"{base}/mem_info_vis_vram_used": (lambda i=i: f"{self._vram_used(i)}\n"),
                f"{base}/mem_info_gtt_total": f"{self.gtt_size}\n",
                f"{base}/mem_info_gtt_used": (lambda i=i: f"{self._gtt_used(i)}\n"),
            })
            die = f"{base}/ip_discovery/die/0"
            for hw_id, (major, minor, rev), count in ips:
                for instance in range(count):
                    files = dict(hw_id=f"{hw_id}\n", num_instance=f"{instance}\n", major=f"{major}\n",
                                 minor=f"{minor}\n", revision=f"{rev}\n", harvest="0x0\n",
                                 num_base_addresses="0\n", base_addr="")  # register bases not modelled
                    # die/0/<hw_id>/ and its named link die/0/<name>/ (sysfs_create_link) show the same files
                    for name in (str(hw_id), d.HW_ID_NAMES[hw_id]):
                        tree.update({f"{die}/{name}/{instance}/{a}": files[a] for a in d.IP_INSTANCE_ATTRS})
        return tree
