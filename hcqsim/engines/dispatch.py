"""What the command processor hands the shader core: one DISPATCH_DIRECT, decoded from the SH registers
the command stream programmed (SET_SH_REG) and the packet itself, checked as hardware would need them.

The register addresses and field layouts are the hardware's language (`hcqsim.registers`); this module is
the emulator's reading of them.
"""
from __future__ import annotations

from ..errors import DecodeError
from ..registers import INITIATOR, LDS_GRANULE, REGS, RSRC2
from ..shader.dispatch import Dispatch


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
                    wave_size=32 if init["cs_w32_en"] else 64, lds_bytes=f2["lds_size"] * LDS_GRANULE,
                    scratch_base=(regs.get(REGS["COMPUTE_DISPATCH_SCRATCH_BASE_LO"], 0)
                                  | regs.get(REGS["COMPUTE_DISPATCH_SCRATCH_BASE_HI"], 0) << 32) << 8,
                    tmpring_size=regs.get(REGS["COMPUTE_TMPRING_SIZE"], 0),
                    resource_limits=regs.get(REGS["COMPUTE_RESOURCE_LIMITS"], 0), initiator=initiator)
