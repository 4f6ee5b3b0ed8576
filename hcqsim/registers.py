"""Compute dispatch registers: addresses, ranges a user queue may write, and the layouts of the fields
a dispatcher programs (HARDWARE_FACTS 4.1 addresses, 4.2-4.3 field layouts).

The runtime writes these registers with SET_SH_REG; the emulated command processor reads them back when
DISPATCH_DIRECT launches. Both take the numbers from this one table, which the tests check against
hand-written values from the facts.
"""
from __future__ import annotations

from .fields import F, PacketFormat

SH_BASE, SH_END = 0x2C00, 0x3000  # SET_SH_REG writes [SH_BASE, SH_END)
UCONFIG_BASE, UCONFIG_END = 0xC000, 0xC400  # SET_UCONFIG_REG writes [UCONFIG_BASE, UCONFIG_END)
REG_ADDRESS_MASK = 0x3FFFF  # a register operand in a packet's address field is a dword address in [17:0]

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

# Registers that hold an address (facts 4.1), as (register, the address bit its bit 0 holds, its address bits): the code
# entry and the architected-flat-scratch base, both address >> 8 with HI carrying bits from 40. Traces canonicalise
# them as one address each (USER_DATA holds addresses only by the kernel's ABI: codeobject.user_sgpr_layout).
ADDRESS_REGISTERS: tuple[tuple[tuple[str, int, int], ...], ...] = (
    (("COMPUTE_PGM_LO", 8, 32), ("COMPUTE_PGM_HI", 40, 8)),
    (("COMPUTE_DISPATCH_SCRATCH_BASE_LO", 8, 32), ("COMPUTE_DISPATCH_SCRATCH_BASE_HI", 40, 32)),
)
ADDRESS_REGISTER_PARTS: dict[int, tuple[tuple[int, int, int], ...]] = {
    REGS[name]: tuple((REGS[n], shift, bits) for n, shift, bits in parts)
    for parts in ADDRESS_REGISTERS for name, _, _ in parts}  # register -> every part of its address

# COMPUTE_PGM_RSRC3 moved between generations (facts 4.1): the packet family picks the address.
RSRC3_REG = {"gfx11": 0x2E28, "gfx9": 0x2E2D}


# Register ranges each SET_*_REG packet writes (HARDWARE_FACTS 3.2-3.3): packet name -> (base, end).
CONFIG_BASE, CONFIG_END = 0x2000, 0x2C00
CONTEXT_BASE, CONTEXT_END = 0xA000, 0xA400
REGISTER_RANGES = {"SET_SH_REG": (SH_BASE, SH_END), "SET_UCONFIG_REG": (UCONFIG_BASE, UCONFIG_END),
                   "SET_CONFIG_REG": (CONFIG_BASE, CONFIG_END), "SET_CONTEXT_REG": (CONTEXT_BASE, CONTEXT_END)}

# Registers at different addresses per generation (facts 4.1), and ones the CP manages that a listing may show.
_FAMILY_NAMES = {
    "gfx11": {0x2E28: "COMPUTE_PGM_RSRC3", 0x2E2A: "COMPUTE_SHADER_CHKSUM",
              **{0x2E2B + i: f"COMPUTE_STATIC_THREAD_MGMT_SE{4 + i}" for i in range(4)}},
    "gfx9": {0x2E2D: "COMPUTE_PGM_RSRC3", 0x2E2C: "COMPUTE_SHADER_CHKSUM"},
}
_LISTING_NAMES = {0x2E0E: "COMPUTE_DISPATCH_PKT_ADDR_LO", 0x2E0F: "COMPUTE_DISPATCH_PKT_ADDR_HI"}


def register_name(addr: int, family: str = "gfx11") -> str | None:
    """The name of the register at absolute dword address `addr` on `family` (gfx11 or gfx9), None if unknown."""
    return _FAMILY_NAMES.get(family, {}).get(addr) or REG_NAMES.get(addr) or _LISTING_NAMES.get(addr)


def register_label(addr: int, family: str = "gfx11") -> str:
    """A register as a listing shows it: its name, or `reg_0x2e30` for an address the tables do not name."""
    return register_name(addr, family) or f"reg_0x{addr:x}"


def register_writes(packet: str, reg_offset: int, values, family: str = "gfx11") -> list[tuple[int, str, int]]:
    """(absolute address, label, value) of each register a SET_*_REG packet writes: `values` go to consecutive
    registers from the packet's base + `reg_offset`. KeyError for a packet that writes no register range."""
    base = REGISTER_RANGES[packet][0]
    return [(base + reg_offset + i, register_label(base + reg_offset + i, family), v) for i, v in enumerate(values)]


def canonical_register_values(first: int, values, regs: dict[int, int], canon) -> dict[int, int]:
    """{index into `values`: canonical value} for the address registers among `values` (written to consecutive
    registers from absolute address `first`), each address made of these writes and `regs` (the registers' values
    before them) for its other parts. Empty when `canon` moves nothing."""
    out: dict[int, int] = {}
    written = {first + i: v for i, v in enumerate(values)}
    for reg in written.keys() & ADDRESS_REGISTER_PARTS.keys():
        parts = ADDRESS_REGISTER_PARTS[reg]
        addr = sum((written.get(r, regs.get(r, 0)) & ((1 << bits) - 1)) << shift for r, shift, bits in parts)
        moved = canon(addr)
        if moved != addr:
            shift, bits = next((s, b) for r, s, b in parts if r == reg)
            mask = (1 << bits) - 1
            out[reg - first] = (written[reg] & ~mask & 0xFFFFFFFF) | ((moved >> shift) & mask)
    return out


def reg_name(addr: int, rsrc3: int | None = None) -> str:
    """The register's name, or `reg 0x...` for one the table does not know."""
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
LDS_GRANULE = 512  # RSRC2.LDS_SIZE counts 512-byte granules on gfx9 and gfx11


def initiator(**bits: int) -> int:
    """A COMPUTE_DISPATCH_INITIATOR value from named bits (e.g. `compute_shader_en=1`)."""
    return INITIATOR.encode(**bits)[0]


# NBIO GPU_HDP_FLUSH_REQ / GPU_HDP_FLUSH_DONE: the HDP flush handshake a ring performs (facts 6.4), register dword
# offsets relative to NBIO base segment 2 (BASE_IDX 2), by NBIO IP version. Sources: Linux
# drivers/gpu/drm/amd/include/asic_reg/nbio/nbio_4_3_0_offset.h (regBIF_BX_PF_GPU_HDP_FLUSH_REQ 0x0106 / _DONE 0x0107,
# gfx11 parts; facts 6.4) and nbio_7_9_0_offset.h (regBIF_BX_PF0_GPU_HDP_FLUSH_REQ 0x0106 / _DONE 0x0107, BASE_IDX 2,
# read for gfx942: nbio_v7_9.c get_hdp_flush_req/done_offset return these). A ring carries them plus the NBIO
# segment-2 base (SOC15_REG_OFFSET: adev->reg_offset[NBIO_HWIP][0][2] + reg), which is 0xD20 on these parts
# (NBIO_BASE = {0, 0x14, 0xD20, 0x10400, ...} in Linux's *_ip_offset.h headers: navi10, vangogh, cyan_skillfish;
# the same table IP discovery gives gfx11 and gfx942): what tinygrad's KFD path writes (0xE26 / 0xE27).
NBIO_SEGMENT2_BASE = 0xD20
HDP_FLUSH_REGS = {(4, 3, 0): (NBIO_SEGMENT2_BASE + 0x106, NBIO_SEGMENT2_BASE + 0x107),
                  (7, 9, 0): (NBIO_SEGMENT2_BASE + 0x106, NBIO_SEGMENT2_BASE + 0x107)}
# The client bits of GPU_HDP_FLUSH_REQ/DONE (facts 6.4): cp0..cp9 = bits 0..9 (gfx ring cp0, MEC1 pipes cp2+pipe,
# MEC2 pipes cp6+pipe), sdma0 / sdma1 = bits 10 / 11.
HDP_FLUSH_CP0, HDP_FLUSH_SDMA0 = 1 << 0, 1 << 10


def hdp_flush_registers(nbio_version: tuple[int, int, int]) -> tuple[int, int]:
    """(GPU_HDP_FLUSH_REQ, GPU_HDP_FLUSH_DONE) dword offsets for an NBIO IP version; KeyError for one not tabled."""
    try:
        return HDP_FLUSH_REGS[tuple(nbio_version)]
    except KeyError:
        raise KeyError(f"no GPU_HDP_FLUSH_REQ/DONE offsets for NBIO {'.'.join(map(str, nbio_version))}") from None
