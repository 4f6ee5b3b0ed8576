"""The GPU generations hcqsim models, and what differs between them."""
from __future__ import annotations

from dataclasses import dataclass

from .registers import RSRC3_REG


@dataclass(frozen=True)
class Target:
    name: str  # "gfx1100"
    family: str  # "gfx11" (RDNA3) or "gfx9" (CDNA3)
    gfx_target_version: int  # sysfs gfx_target_version
    wave_size: int
    sdma_version: tuple[int, int, int]
    sdma_copy_count_bits: int  # width of COPY_LINEAR / CONST_FILL COUNT (bytes - 1)
    # sysfs topology facts (HARDWARE_FACTS 2.5)
    simd_count: int
    array_count: int
    simd_arrays_per_engine: int
    cu_per_simd_array: int
    simd_per_cu: int
    max_waves_per_simd: int
    device_id: int
    num_xcc: int = 1
    lds_size_in_kb: int = 64
    # Queue resources KFD reports in sysfs (facts 2.2/2.5; amdgpu sdma_v6_0.c has 2 instances on gfx1100;
    # MI300X (sdma_v4_4_2.c, GC 9.4.3) has 16, of which KFD reports 2 as PCIe and 14 as XGMI engines).
    sdma_engines: int = 2  # num_sdma_engines: PCIe SDMA engines KFD hands out for queue type SDMA
    sdma_xgmi_engines: int = 0  # num_sdma_xgmi_engines: the extra engines for SDMA_XGMI queues
    sdma_queues_per_engine: int = 6  # num_sdma_queues_per_engine (user queues per engine)
    cp_queues: int = 8  # num_cp_queues: compute HQD slots available to KFD
    # amdgpu's view (ip_discovery sysfs, DRM AMDGPU_INFO): IP versions as amdgpu_discovery.c matches them
    # (GC 11.0.0 = gfx1100, GC 9.4.3 = gfx942; NBIO 4.3.0 -> nbio_v4_3, 7.9.0 -> nbio_v7_9), the
    # amdgpu_drm.h family and AMDGPU_VRAM_TYPE_* of the part.
    gc_version: tuple[int, int, int] = (0, 0, 0)
    nbio_version: tuple[int, int, int] = (0, 0, 0)
    amdgpu_family: int = 0  # AMDGPU_FAMILY_*
    vram_type: int = 0  # AMDGPU_VRAM_TYPE_*
    # How ip discovery enumerates the SDMA engines (amdgpu_discovery.c reg_base_init comment): Navi parts
    # give each engine its own HWID (SDMA0 = 42, SDMA1 = 43, each instance 0); Arcturus-style parts (and
    # GC 9.4.3, whose harvest table masks SDMA0_HWID instance bits) list them as instances of SDMA0.
    sdma_hwid_per_engine: bool = False
    # COPY_LINEAR's COUNT where the engine takes more than sdma_copy_count_bits (CONST_FILL keeps those): ROCr's
    # CreateBlitSdma issues single copies of up to 2^30 - 1 bytes on gfx9.4+ and gfx90a (SDMA 4.4.x) -- observed:
    # ROCr 6.1 sends one 64 MiB COPY_LINEAR on gfx942 -- and keeps fills at 2^22 - 4 bytes on every part
    sdma_linear_copy_count_bits: int | None = None

    @property
    def rsrc3_reg(self) -> int:
        """Absolute dword address of COMPUTE_PGM_RSRC3 (it moved between generations)."""
        return RSRC3_REG[self.family]

    @property
    def is_gfx11(self) -> bool:
        return self.family == "gfx11"

    @property
    def sdma_copy_max(self) -> int:
        """Largest COPY_LINEAR / CONST_FILL in bytes that one packet can carry."""
        return 1 << self.sdma_copy_count_bits


TARGETS = {
    "gfx1100": Target("gfx1100", "gfx11", 110000, 32, (6, 0, 0), 30,
                      simd_count=192, array_count=12, simd_arrays_per_engine=2, cu_per_simd_array=8,
                      simd_per_cu=2, max_waves_per_simd=16, device_id=0x744C,
                      gc_version=(11, 0, 0), nbio_version=(4, 3, 0), amdgpu_family=145, vram_type=9,  # GDDR6
                      sdma_hwid_per_engine=True),
    "gfx942": Target("gfx942", "gfx9", 90402, 64, (4, 4, 2), 22,
                     simd_count=1216, array_count=32, simd_arrays_per_engine=1, cu_per_simd_array=10,
                     simd_per_cu=4, max_waves_per_simd=8, device_id=0x74A1, num_xcc=8,
                     sdma_engines=2, sdma_xgmi_engines=14, sdma_queues_per_engine=8, cp_queues=24,
                     gc_version=(9, 4, 3), nbio_version=(7, 9, 0), amdgpu_family=141, vram_type=6,  # AI, HBM
                     sdma_linear_copy_count_bits=30),
}


def get_target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError(f"unknown target {name!r}; hcqsim models {sorted(TARGETS)}") from None
