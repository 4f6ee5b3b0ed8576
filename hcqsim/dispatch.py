"""Compute dispatch state: the SH registers a DISPATCH_DIRECT launches from, decoded and checked.

The CP hands a `Dispatch` to the shader core. Everything in it comes from registers programmed by the
command stream (SET_SH_REG) and from the DISPATCH_DIRECT packet, exactly what hardware would use.
Register addresses: HARDWARE_FACTS 4.1; field layouts: 4.2 and 4.3.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import DecodeError
from .fields import F, PacketFormat

SH_BASE, SH_END = 0x2C00, 0x3000
UCONFIG_BASE, UCONFIG_END = 0xC000, 0xC400

REGS = {
    "COMPUTE_DISPATCH_INITIATOR": 0x2E00, "COMPUTE_DIM_X": 0x2E01, "COMPUTE_DIM_Y": 0x2E02, "COMPUTE_DIM_Z": 0x2E03,
    "COMPUTE_START_X": 0x2E04, "COMPUTE_START_Y": 0x2E05, "COMPUTE_START_Z": 0x2E06,
    "COMPUTE_NUM_THREAD_X": 0x2E07, "COMPUTE_NUM_THREAD_Y": 0x2E08, "COMPUTE_NUM_THREAD_Z": 0x2E09,
    "COMPUTE_PIPELINESTAT_ENABLE": 0x2E0A, "COMPUTE_PERFCOUNT_ENABLE": 0x2E0B,
    "COMPUTE_PGM_LO": 0x2E0C, "COMPUTE_PGM_HI": 0x2E0D,
    "COMPUTE_DISPATCH_SCRATCH_BASE_LO": 0x2E10, "COMPUTE_DISPATCH_SCRATCH_BASE_HI": 0x2E11,
    "COMPUTE_PGM_RSRC1": 0x2E12, "COMPUTE_PGM_RSRC2": 0x2E13, "COMPUTE_VMID": 0x2E14,
    "COMPUTE_RESOURCE_LIMITS": 0x2E15, "COMPUTE_STATIC_THREAD_MGMT_SE0": 0x2E16,
    "COMPUTE_STATIC_THREAD_MGMT_SE1": 0x2E17, "COMPUTE_TMPRING_SIZE": 0x2E18,
    "COMPUTE_STATIC_THREAD_MGMT_SE2": 0x2E19, "COMPUTE_STATIC_THREAD_MGMT_SE3": 0x2E1A,
    "COMPUTE_RESTART_X": 0x2E1B, "COMPUTE_RESTART_Y": 0x2E1C, "COMPUTE_RESTART_Z": 0x2E1D,
    "COMPUTE_THREAD_TRACE_ENABLE": 0x2E1E, "COMPUTE_MISC_RESERVED": 0x2E1F, "COMPUTE_DISPATCH_ID": 0x2E20,
    "COMPUTE_THREADGROUP_ID": 0x2E21,
    **{f"COMPUTE_USER_DATA_{i}": 0x2E40 + i for i in range(16)},
    "GRBM_GFX_INDEX": 0xC200,
}
REG_NAMES = {v: k for k, v in REGS.items()}


def reg_name(addr: int, rsrc3: int | None = None) -> str:
    if addr == rsrc3:
        return "COMPUTE_PGM_RSRC3"
    return REG_NAMES.get(addr, f"reg 0x{addr:x}")


# register layouts as data (same bits as the kernel descriptor fields)
RSRC2 = PacketFormat("COMPUTE_PGM_RSRC2", 0, (
    F("scratch_en", 0, 0), F("user_sgpr", 0, 5, 1), F("trap_present", 0, 6), F("tgid_x_en", 0, 7),
    F("tgid_y_en", 0, 8), F("tgid_z_en", 0, 9), F("tg_size_en", 0, 10), F("tidig_comp_cnt", 0, 12, 11),
    F("excp_en_msb", 0, 14, 13), F("lds_size", 0, 23, 15), F("excp_en", 0, 30, 24)), size=1)
INITIATOR = PacketFormat("COMPUTE_DISPATCH_INITIATOR", 0, (
    F("compute_shader_en", 0, 0), F("partial_tg_en", 0, 1), F("force_start_at_000", 0, 2),
    F("ordered_append_enbl", 0, 3), F("ordered_append_mode", 0, 4), F("use_thread_dimensions", 0, 5),
    F("order_mode", 0, 6), F("scalar_l1_inv_vol", 0, 10), F("vector_l1_inv_vol", 0, 11),
    F("tunnel_enable", 0, 13), F("restore", 0, 14), F("cs_w32_en", 0, 15), F("amp_shader_en", 0, 16),
    F("disable_disp_prempt_en", 0, 17)), size=1)


@dataclass
class Dispatch:
    """One DISPATCH_DIRECT, decoded from registers: what the shader core needs to launch waves."""

    queue: str
    pgm_addr: int  # first instruction
    rsrc1: int
    rsrc2: int
    rsrc3: int
    user_data: list[int]  # USER_DATA_0 .. USER_DATA_{user_sgpr-1}
    groups: tuple[int, int, int]  # workgroup counts (including partial groups)
    start: tuple[int, int, int]
    group_size: tuple[int, int, int]  # NUM_THREAD_*.FULL
    partial_size: tuple[int, int, int]  # size of the trailing partial group per dim (0 = none)
    wave_size: int
    lds_bytes: int
    scratch_base: int
    tmpring_size: int
    resource_limits: int
    initiator: int

    @property
    def rsrc2_fields(self) -> dict[str, int]:
        return RSRC2.decode([self.rsrc2])


def decode_dispatch(queue: str, regs: dict[int, int], dims: tuple[int, int, int], initiator: int,
                    *, wave32_capable: bool, rsrc3_reg: int) -> Dispatch:
    """Check the programmed state and build the Dispatch, or raise DecodeError naming what is wrong."""
    init = INITIATOR.decode([initiator])
    if not init["compute_shader_en"]:
        raise DecodeError("DISPATCH_DIRECT with COMPUTE_SHADER_EN = 0 launches nothing")
    if init["cs_w32_en"] and not wave32_capable:
        raise DecodeError("DISPATCH_INITIATOR.CS_W32_EN is reserved on this target (wave64 only)")
    pgm = (regs.get(REGS["COMPUTE_PGM_LO"], 0) | (regs.get(REGS["COMPUTE_PGM_HI"], 0) & 0xFF) << 32) << 8
    if pgm == 0:
        raise DecodeError("DISPATCH_DIRECT before COMPUTE_PGM_LO/HI were set")
    rsrc2 = regs.get(REGS["COMPUTE_PGM_RSRC2"], 0)
    f2 = RSRC2.decode([rsrc2])
    n_user = min(f2["user_sgpr"], 16)
    user = [regs.get(REGS[f"COMPUTE_USER_DATA_{i}"], 0) for i in range(n_user)]
    full = tuple(regs.get(REGS[f"COMPUTE_NUM_THREAD_{d}"], 0) & 0xFFFF for d in "XYZ")
    if 0 in full:
        raise DecodeError(f"COMPUTE_NUM_THREAD_X/Y/Z = {full}: a workgroup dimension is 0")
    start = (0, 0, 0) if init["force_start_at_000"] else tuple(regs.get(REGS[f"COMPUTE_START_{d}"], 0) for d in "XYZ")
    if init["use_thread_dimensions"]:
        if not init["partial_tg_en"]:
            raise DecodeError("USE_THREAD_DIMENSIONS without PARTIAL_TG_EN cannot launch partial groups")
        groups = tuple(-(-t // s) for t, s in zip(dims, full))
        partial = tuple(t % s for t, s in zip(dims, full))
    else:
        groups, partial = dims, (0, 0, 0)
    return Dispatch(queue=queue, pgm_addr=pgm, rsrc1=regs.get(REGS["COMPUTE_PGM_RSRC1"], 0), rsrc2=rsrc2,
                    rsrc3=regs.get(rsrc3_reg, 0), user_data=user, groups=tuple(groups), start=tuple(start),
                    group_size=full, partial_size=tuple(partial),
                    wave_size=32 if init["cs_w32_en"] else 64, lds_bytes=f2["lds_size"] * 512,
                    scratch_base=(regs.get(REGS["COMPUTE_DISPATCH_SCRATCH_BASE_LO"], 0)
                                  | regs.get(REGS["COMPUTE_DISPATCH_SCRATCH_BASE_HI"], 0) << 32) << 8,
                    tmpring_size=regs.get(REGS["COMPUTE_TMPRING_SIZE"], 0),
                    resource_limits=regs.get(REGS["COMPUTE_RESOURCE_LIMITS"], 0), initiator=initiator)
