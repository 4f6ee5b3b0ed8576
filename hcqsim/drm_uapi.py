"""The DRM / amdgpu user API a compute client uses on a render node, as data.

Sources: Linux `include/uapi/drm/drm.h` (DRM_IOCTL_BASE, DRM_COMMAND_BASE, struct drm_version) and
`include/uapi/drm/amdgpu_drm.h` (DRM_AMDGPU_*, AMDGPU_INFO_*, AMDGPU_HW_IP_*, AMDGPU_FAMILY_*, the info
structs), plus amdgpu's sysfs names (`amdgpu_discovery.c` hw_id_names, `soc15_hw_ip.h` HWIDs).

Like `kfd_uapi`, this is a language module: both a client and the emulated amdgpu import it, and it imports
only ctypes and the ioctl encoding from `kfd_uapi`. Layouts are the kernel's field for field, little endian
with natural alignment; `_sized` fails at import if one drifts from the kernel's sizeof.
"""
from __future__ import annotations

import ctypes

from .kfd_uapi import IOW, IOWR, KfdStruct, KfdUnion, _sized

u8, u32, u64, s32 = ctypes.c_uint8, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int32

# --------------------------------------------------------------------------------------------------------------
# drm.h: the ioctl space of a DRM file
# --------------------------------------------------------------------------------------------------------------

DRM_IOCTL_BASE = ord("d")  # 0x64; any other _IOC_TYPE on a DRM file is -ENOTTY (drm_ioctl.c)
DRM_COMMAND_BASE, DRM_COMMAND_END = 0x40, 0xA0  # driver ioctls live in nr [BASE, END)


@_sized(64)
class DrmVersion(KfdStruct):
    """struct drm_version: the *_len fields are in/out (buffer size in, the value's full length out)."""

    _fields_ = [("version_major", s32), ("version_minor", s32), ("version_patchlevel", s32),
                ("name_len", u64), ("name", u64),  # __kernel_size_t, char __user * (an address)
                ("date_len", u64), ("date", u64),
                ("desc_len", u64), ("desc", u64)]


DRM_IOCTL_VERSION = IOWR(DRM_IOCTL_BASE, 0x00, DrmVersion)

# --------------------------------------------------------------------------------------------------------------
# amdgpu_drm.h: driver command numbers (nr = DRM_COMMAND_BASE + these)
# --------------------------------------------------------------------------------------------------------------

DRM_AMDGPU = {  # name -> offset from DRM_COMMAND_BASE
    "GEM_CREATE": 0x00, "GEM_MMAP": 0x01, "CTX": 0x02, "BO_LIST": 0x03, "CS": 0x04, "INFO": 0x05,
    "GEM_METADATA": 0x06, "GEM_WAIT_IDLE": 0x07, "GEM_VA": 0x08, "WAIT_CS": 0x09, "GEM_OP": 0x10,
    "GEM_USERPTR": 0x11, "WAIT_FENCES": 0x12, "VM": 0x13, "FENCE_TO_HANDLE": 0x14, "SCHED": 0x15,
    "USERQ": 0x16, "USERQ_SIGNAL": 0x17, "USERQ_WAIT": 0x18, "GEM_LIST_HANDLES": 0x19,
}
DRM_AMDGPU_NUM_IOCTLS = max(DRM_AMDGPU.values()) + 1  # amdgpu_ioctls_kms[] is indexed by offset; gaps are NULL

# AMDGPU_INFO queries (drm_amdgpu_info.query)
AMDGPU_INFO_ACCEL_WORKING = 0x00
AMDGPU_INFO_HW_IP_INFO = 0x02
AMDGPU_INFO_HW_IP_COUNT = 0x03
AMDGPU_INFO_TIMESTAMP = 0x05
AMDGPU_INFO_FW_VERSION = 0x0E
AMDGPU_INFO_VRAM_USAGE = 0x10
AMDGPU_INFO_GTT_USAGE = 0x11
AMDGPU_INFO_VRAM_GTT = 0x14
AMDGPU_INFO_DEV_INFO = 0x16
AMDGPU_INFO_VIS_VRAM_USAGE = 0x17
AMDGPU_INFO_MEMORY = 0x19

# AMDGPU_INFO_FW_VERSION sub-queries (drm_amdgpu_query_fw.fw_type)
AMDGPU_INFO_FW = {
    "VCE": 0x01, "UVD": 0x02, "GMC": 0x03, "GFX_ME": 0x04, "GFX_PFP": 0x05, "GFX_CE": 0x06, "GFX_RLC": 0x07,
    "GFX_MEC": 0x08, "SMC": 0x0A, "SDMA": 0x0B, "SOS": 0x0C, "ASD": 0x0D, "VCN": 0x0E,
    "GFX_RLC_RESTORE_LIST_CNTL": 0x0F, "GFX_RLC_RESTORE_LIST_GPM_MEM": 0x10,
    "GFX_RLC_RESTORE_LIST_SRM_MEM": 0x11, "DMCU": 0x12, "TA": 0x13, "DMCUB": 0x14, "TOC": 0x15, "CAP": 0x16,
    "GFX_RLCP": 0x17, "GFX_RLCV": 0x18, "MES_KIQ": 0x19, "MES": 0x1A, "IMU": 0x1B, "VPE": 0x1C,
}
AMDGPU_INFO_FW_GFX_MEC, AMDGPU_INFO_FW_SDMA = AMDGPU_INFO_FW["GFX_MEC"], AMDGPU_INFO_FW["SDMA"]

# hardware IP types (drm_amdgpu_info.query_hw_ip.type)
AMDGPU_HW_IP_GFX, AMDGPU_HW_IP_COMPUTE, AMDGPU_HW_IP_DMA = 0, 1, 2
AMDGPU_HW_IP_UVD, AMDGPU_HW_IP_VCE, AMDGPU_HW_IP_UVD_ENC = 3, 4, 5
AMDGPU_HW_IP_VCN_DEC, AMDGPU_HW_IP_VCN_ENC, AMDGPU_HW_IP_VCN_JPEG, AMDGPU_HW_IP_VPE = 6, 7, 8, 9
AMDGPU_HW_IP_NUM = 10
AMDGPU_HW_IP_INSTANCE_MAX_COUNT = 1

# GPU families (drm_amdgpu_info_device.family)
AMDGPU_FAMILY_AI = 141  # Vega10 and the other GC 9.x dGPUs (gfx942 included)
AMDGPU_FAMILY_GC_11_0_0 = 145

# video memory types (drm_amdgpu_info_device.vram_type)
AMDGPU_VRAM_TYPE_HBM, AMDGPU_VRAM_TYPE_GDDR6 = 6, 9


# --------------------------------------------------------------------------------------------------------------
# AMDGPU_INFO argument and result structs
# --------------------------------------------------------------------------------------------------------------


@_sized(16)
class DrmAmdgpuQueryFw(KfdStruct):
    _fields_ = [("fw_type", u32), ("ip_instance", u32), ("index", u32), ("_pad", u32)]


class _ModeCrtc(KfdStruct):
    _fields_ = [("id", u32), ("_pad", u32)]


class _QueryHwIp(KfdStruct):
    _fields_ = [("type", u32), ("ip_instance", u32)]  # ip_instance is ignored by HW_IP_COUNT


class _ReadMmrReg(KfdStruct):
    _fields_ = [("dword_offset", u32), ("count", u32), ("instance", u32), ("flags", u32)]


class _VbiosInfo(KfdStruct):
    _fields_ = [("type", u32), ("offset", u32)]


class _TypeOnly(KfdStruct):
    _fields_ = [("type", u32)]


@_sized(16)
class _DrmAmdgpuInfoQuery(KfdUnion):
    _fields_ = [("mode_crtc", _ModeCrtc), ("query_hw_ip", _QueryHwIp), ("read_mmr_reg", _ReadMmrReg),
                ("query_fw", DrmAmdgpuQueryFw), ("vbios_info", _VbiosInfo), ("sensor_info", _TypeOnly),
                ("video_cap", _TypeOnly)]


@_sized(32)
class DrmAmdgpuInfo(KfdStruct):
    """struct drm_amdgpu_info: the kernel writes min(return_size, sizeof(answer)) bytes to return_pointer."""

    _anonymous_ = ("u",)
    _fields_ = [("return_pointer", u64), ("return_size", u32), ("query", u32), ("u", _DrmAmdgpuInfoQuery)]


DRM_IOCTL_AMDGPU_INFO = IOW(DRM_IOCTL_BASE, DRM_COMMAND_BASE + DRM_AMDGPU["INFO"], DrmAmdgpuInfo)


@_sized(8)
class DrmAmdgpuInfoFirmware(KfdStruct):
    _fields_ = [("ver", u32), ("feature", u32)]


@_sized(24)
class DrmAmdgpuInfoVramGtt(KfdStruct):
    _fields_ = [("vram_size", u64), ("vram_cpu_accessible_size", u64), ("gtt_size", u64)]


@_sized(32)
class DrmAmdgpuHeapInfo(KfdStruct):
    _fields_ = [("total_heap_size", u64), ("usable_heap_size", u64), ("heap_usage", u64),
                ("max_allocation", u64)]


@_sized(96)
class DrmAmdgpuMemoryInfo(KfdStruct):
    _fields_ = [("vram", DrmAmdgpuHeapInfo), ("cpu_accessible_vram", DrmAmdgpuHeapInfo),
                ("gtt", DrmAmdgpuHeapInfo)]


@_sized(40)
class DrmAmdgpuInfoHwIp(KfdStruct):
    _fields_ = [("hw_ip_version_major", u32), ("hw_ip_version_minor", u32), ("capabilities_flags", u64),
                ("ib_start_alignment", u32), ("ib_size_alignment", u32), ("available_rings", u32),
                ("ip_discovery_version", u32),  # bits 23:16 major, 15:8 minor, 7:0 revision
                ("userq_num_slots", u32)]


_CU4x4 = (u32 * 4) * 4


@_sized(448)  # hand count of the header: 444 bytes of fields, 8-aligned
class DrmAmdgpuInfoDevice(KfdStruct):
    """struct drm_amdgpu_info_device, every field through userq_ip_mask (the newest header)."""

    _fields_ = [
        ("device_id", u32), ("chip_rev", u32), ("external_rev", u32), ("pci_rev", u32), ("family", u32),
        ("num_shader_engines", u32), ("num_shader_arrays_per_engine", u32),
        ("gpu_counter_freq", u32),  # kHz
        ("max_engine_clock", u64), ("max_memory_clock", u64),  # kHz
        ("cu_active_number", u32), ("cu_ao_mask", u32), ("cu_bitmap", _CU4x4),
        ("enabled_rb_pipes_mask", u32), ("num_rb_pipes", u32), ("num_hw_gfx_contexts", u32), ("pcie_gen", u32),
        ("ids_flags", u64), ("virtual_address_offset", u64), ("virtual_address_max", u64),
        ("virtual_address_alignment", u32), ("pte_fragment_size", u32), ("gart_page_size", u32),
        ("ce_ram_size", u32), ("vram_type", u32), ("vram_bit_width", u32), ("vce_harvest_config", u32),
        ("gc_double_offchip_lds_buf", u32),
        ("prim_buf_gpu_addr", u64), ("pos_buf_gpu_addr", u64), ("cntl_sb_buf_gpu_addr", u64),
        ("param_buf_gpu_addr", u64),
        ("prim_buf_size", u32), ("pos_buf_size", u32), ("cntl_sb_buf_size", u32), ("param_buf_size", u32),
        ("wave_front_size", u32), ("num_shader_visible_vgprs", u32), ("num_cu_per_sh", u32),
        ("num_tcc_blocks", u32), ("gs_vgt_table_depth", u32), ("gs_prim_buffer_depth", u32),
        ("max_gs_waves_per_vgt", u32), ("pcie_num_lanes", u32), ("cu_ao_bitmap", _CU4x4),
        ("high_va_offset", u64), ("high_va_max", u64), ("pa_sc_tile_steering_override", u32),
        ("tcc_disabled_mask", u64), ("min_engine_clock", u64), ("min_memory_clock", u64),
        ("tcp_cache_size", u32), ("num_sqc_per_wgp", u32), ("sqc_data_cache_size", u32),
        ("sqc_inst_cache_size", u32), ("gl1c_cache_size", u32), ("gl2c_cache_size", u32), ("mall_size", u64),
        ("enabled_rb_pipes_mask_hi", u32), ("shadow_size", u32), ("shadow_alignment", u32), ("csa_size", u32),
        ("csa_alignment", u32), ("userq_ip_mask", u32), ("pad", u32),
    ]


# --------------------------------------------------------------------------------------------------------------
# amdgpu sysfs: /sys/class/drm/renderD<minor>/device/ip_discovery/die/<die>/<hw_id>/<instance>/<attr>
# --------------------------------------------------------------------------------------------------------------

# soc15_hw_ip.h hardware ids and their amdgpu_discovery.c hw_id_names (each name is a link to the number)
GC_HWID, SDMA0_HWID, SDMA1_HWID, NBIF_HWID = 11, 42, 43, 108  # NBIO_HWIP is found under NBIF_HWID
HW_ID_NAMES = {GC_HWID: "GC", SDMA0_HWID: "SDMA0", SDMA1_HWID: "SDMA1", NBIF_HWID: "NBIF"}
# amdgpu_discovery.c ip_hw_attr[]: the files of one IP instance directory, in the kernel's order
IP_INSTANCE_ATTRS = ("hw_id", "num_instance", "major", "minor", "revision", "harvest", "num_base_addresses",
                     "base_addr")
DRM_MAJOR = 226  # char major of /dev/dri/* (drm_ioctl.h)
PCI_VENDOR_ID_ATI = 0x1002


def ip_version_maj_min_rev(version: tuple[int, int, int]) -> int:
    """IP_VERSION_MAJ_MIN_REV: the packing of drm_amdgpu_info_hw_ip.ip_discovery_version."""
    major, minor, rev = version
    return major << 16 | minor << 8 | rev
