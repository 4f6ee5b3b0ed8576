"""PM4 type-3 packets: formats, builders and disassembler (the language of the compute command processor).

Layouts are HARDWARE_FACTS section 3, written once as `PacketFormat` tables per family (gfx11 = RDNA3,
gfx9 = CDNA3 gfx942; they differ in RELEASE_MEM cache bits and ACQUIRE_MEM). The same tables build
packets (`encode` and the builder functions the runtime uses), decode them in the emulated command
processor (`hcqsim.engines.command_processor`), and print them (`disassemble`, fault reports, traces).

This module is shared by the runtime and the emulator, so it imports neither.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field, replace

from .atomics import OP_NAMES as ATOMIC_OP_NAMES
from .compare import NAMES as COMPARE_NAMES
from .fields import F, PacketFormat
from .registers import REGISTER_RANGES, SH_BASE, UCONFIG_BASE, canonical_register_values, register_writes

# ---------------------------------------------------------------------------------------------------
# header (HARDWARE_FACTS 3.1) and opcodes (3.2)

TYPE3 = 3
COUNT_MAX = 0x3FFF
NOP_ONE_DWORD = 0x3FFF  # a NOP whose count is 0x3FFF is a header-only packet

OPCODES = {
    0x10: "NOP", 0x11: "SET_BASE", 0x12: "CLEAR_STATE", 0x15: "DISPATCH_DIRECT", 0x16: "DISPATCH_INDIRECT",
    0x17: "INDIRECT_BUFFER_END", 0x1D: "ATOMIC_GDS", 0x1E: "ATOMIC_MEM", 0x1F: "OCCLUSION_QUERY",
    0x20: "SET_PREDICATION", 0x21: "REG_RMW", 0x22: "COND_EXEC", 0x23: "PRED_EXEC", 0x24: "DRAW_INDIRECT",
    0x25: "DRAW_INDEX_INDIRECT", 0x26: "INDEX_BASE", 0x27: "DRAW_INDEX_2", 0x28: "CONTEXT_CONTROL",
    0x2A: "INDEX_TYPE", 0x2D: "DRAW_INDEX_AUTO", 0x2F: "NUM_INSTANCES", 0x30: "DRAW_INDEX_MULTI_AUTO",
    0x32: "INDIRECT_BUFFER_PRIV", 0x33: "INDIRECT_BUFFER_CNST", 0x37: "WRITE_DATA", 0x39: "MEM_SEMAPHORE",
    0x3B: "COPY_DW", 0x3C: "WAIT_REG_MEM", 0x3F: "INDIRECT_BUFFER", 0x40: "COPY_DATA", 0x41: "CP_DMA",
    0x42: "PFP_SYNC_ME", 0x43: "SURFACE_SYNC", 0x45: "COND_WRITE", 0x46: "EVENT_WRITE", 0x47: "EVENT_WRITE_EOP",
    0x48: "EVENT_WRITE_EOS", 0x49: "RELEASE_MEM", 0x4A: "PREAMBLE_CNTL", 0x50: "DMA_DATA", 0x58: "ACQUIRE_MEM",
    0x59: "REWIND", 0x5A: "INTERRUPT", 0x5E: "LOAD_UCONFIG_REG", 0x5F: "LOAD_SH_REG", 0x60: "LOAD_CONFIG_REG",
    0x61: "LOAD_CONTEXT_REG", 0x62: "LOAD_COMPUTE_STATE", 0x63: "LOAD_SH_REG_INDEX", 0x68: "SET_CONFIG_REG",
    0x69: "SET_CONTEXT_REG", 0x73: "SET_CONTEXT_REG_INDIRECT", 0x76: "SET_SH_REG", 0x77: "SET_SH_REG_OFFSET",
    0x78: "SET_QUEUE_REG", 0x79: "SET_UCONFIG_REG", 0x7A: "SET_UCONFIG_REG_INDEX", 0x7D: "SCRATCH_RAM_WRITE",
    0x7E: "SCRATCH_RAM_READ", 0x90: "FRAME_CONTROL", 0x93: "WAIT_REG_MEM64", 0x94: "COND_PREEMPT",
    0x95: "HDP_FLUSH", 0x96: "COPY_DATA_RB", 0x98: "INVALIDATE_TLBS", 0x99: "AQL_PACKET",
    0x9A: "DMA_DATA_FILL_MULTI", 0x9B: "SET_SH_REG_INDEX", 0xA0: "SET_RESOURCES", 0xA1: "MAP_PROCESS",
    0xA2: "MAP_QUEUES", 0xA3: "UNMAP_QUEUES", 0xA4: "QUERY_STATUS", 0xA5: "RUN_LIST", 0xA6: "MAP_PROCESS_VM",
    0xD2: "RUN_CLEANER_SHADER",
}
OP = {name: op for op, name in OPCODES.items()}

HEADER = (F("type", 0, 31, 30), F("count", 0, 29, 16), F("opcode", 0, 15, 8), F("shader_type", 0, 1),
          F("predicate", 0, 0))

# enums shared by several packets
CACHE_POLICY = {0: "LRU", 1: "STREAM", 2: "NOA", 3: "BYPASS"}
FUNCTION = dict(COMPARE_NAMES)
MEM_SPACE = {0: "REGISTER", 1: "MEMORY"}
WAIT_OPERATION = {0: "WAIT", 1: "WRITE_WAIT", 3: "WAIT_PREEMPTABLE"}
WRITE_DATA_DST = {0: "REG", 1: "MEM_SYNC", 2: "TC_L2", 3: "GDS", 5: "MEM", 6: "ADC"}
EVENT_TYPES = {0x04: "CACHE_FLUSH_TS", 0x06: "CACHE_FLUSH", 0x07: "CS_PARTIAL_FLUSH",
               0x14: "CACHE_FLUSH_AND_INV_TS_EVENT", 0x16: "CACHE_FLUSH_AND_INV_EVENT", 0x17: "PERFCOUNTER_START",
               0x18: "PERFCOUNTER_STOP", 0x1B: "PERFCOUNTER_SAMPLE", 0x28: "BOTTOM_OF_PIPE_TS", 0x2F: "CS_DONE",
               0x33: "THREAD_TRACE_START", 0x34: "THREAD_TRACE_STOP", 0x35: "THREAD_TRACE_MARKER",
               0x36: "THREAD_TRACE_FLUSH", 0x37: "THREAD_TRACE_FINISH"}
EVENT_INDEX = {0: "OTHER", 1: "ZPASS", 2: "SAMPLE_PIPELINESTAT", 4: "CS_PARTIAL_FLUSH", 5: "END_OF_PIPE",
               6: "SHADER_DONE", 8: "SAMPLE_STREAMOUTSTATS", 9: "SAMPLE_STREAMOUTSTATS1",
               10: "SAMPLE_STREAMOUTSTATS2", 11: "SAMPLE_STREAMOUTSTATS3"}
RELEASE_DST = {0: "MEMORY", 1: "TC_L2", 2: "QUEUE_WPTR_REG", 3: "QUEUE_WPTR_POLL_MASK"}
INT_SEL = {0: "NONE", 1: "INT_ONLY", 2: "INT_AFTER_WRITE_CONFIRM", 3: "WRITE_CONFIRM_NO_INT",
           4: "INT_UNCONDITIONAL", 5: "INT_IF_EQ_32", 6: "INT_IF_EQ_64"}
DATA_SEL = {0: "NONE", 1: "DATA_32", 2: "DATA_64", 3: "GPU_CLOCK_64", 4: "SYSTEM_CLOCK_64", 5: "GDS",
            6: "SCLK_COUNTER"}
COPY_SRC = {0: "REG", 1: "MEM", 2: "TC_L2", 3: "GDS", 4: "PERF", 5: "IMM", 6: "ATOMIC_RETURN",
            7: "GDS_ATOMIC_RETURN_0", 8: "GDS_ATOMIC_RETURN_1", 9: "GPU_CLOCK", 10: "SYSTEM_CLOCK"}
COPY_DST = {0: "REG", 2: "TC_L2", 3: "GDS", 4: "PERF", 5: "MEM", 6: "REG_DC"}
DMA_SRC = {0: "ADDR", 1: "GDS", 2: "DATA", 3: "ADDR_L2"}
DMA_DST = {0: "ADDR", 1: "GDS", 3: "ADDR_L2"}
ATOMIC_COMMAND = {0: "SINGLE_PASS", 1: "LOOP_UNTIL_COMPARE", 2: "WAIT_FOR_WRITE_CONFIRM", 3: "SEND_AND_CONTINUE"}
TYPE_NAMES = {0: "type-0 (register write; privileged)", 1: "type-1 (reserved)", 2: "type-2 (legacy filler)"}
GCR_CNTL_FIELDS = (  # ACQUIRE_MEM dw7 on gfx11; SDMA GCR_REQ carries the same 19 bits
    ("gli_inv", 1, 0), ("gl1_range", 3, 2), ("glm_wb", 4, 4), ("glm_inv", 5, 5), ("glk_wb", 6, 6),
    ("glk_inv", 7, 7), ("glv_inv", 8, 8), ("gl1_inv", 9, 9), ("gl2_us", 10, 10), ("gl2_range", 12, 11),
    ("gl2_discard", 13, 13), ("gl2_inv", 14, 14), ("gl2_wb", 15, 15), ("seq", 17, 16), ("range_is_pa", 18, 18))



def code(enum: dict[int, str], name: str) -> int:
    """The value of `name` in one of the enum tables above (KeyError for a name the table lacks)."""
    for value, n in enum.items():
        if n == name:
            return value
    raise KeyError(f"no value named {name!r} in {sorted(enum.values())}")


def codes(enum: dict[int, str], *names: str) -> frozenset[int]:
    """The values of several names of one enum table, as a set to test membership against."""
    return frozenset(code(enum, n) for n in names)


# Events that only an end-of-pipe packet may carry (RELEASE_MEM; EVENT_WRITE refuses them).
END_OF_PIPE_EVENTS = codes(EVENT_TYPES, "CACHE_FLUSH_TS", "CACHE_FLUSH_AND_INV_TS_EVENT", "BOTTOM_OF_PIPE_TS",
                           "CS_DONE")
CS_PARTIAL_FLUSH = code(EVENT_TYPES, "CS_PARTIAL_FLUSH")


# Fields with no effect in the emulator (memory is coherent, the CP does not poll on a timer, one VMID):
# decoded for disassembly and traces, skipped on the execution fast path. (DMA_DATA CP_SYNC acts: queue.CpDma.)
HINTS = {"type", "count", "opcode", "shader_type", "predicate", "cache_policy", "src_cache_policy",
         "dst_cache_policy", "wr_confirm", "engine_sel", "poll_interval", "optimize_ace_offload_mode",
         "offload_polling", "vmid", "offload_enable", "vmid_shift", "execute", "pq_exe_status", "loop_interval",
         "engine", "raw_wait", "dis_wc", "coher_size", "coher_size_hi", "coher_base", "coher_base_hi",
         "gcr_seq", "glm_wb", "glm_inv", "glv_inv", "gl1_inv", "gl2_us", "gl2_range", "gl2_discard", "gl2_inv",
         "gl2_wb", "gli_inv", "gl1_range", "glk_wb", "glk_inv", "seq", "range_is_pa"}


@dataclass(eq=False)
class RegisterWrites(PacketFormat):
    """SET_SH_REG and its kind: the payload is the values of consecutive registers from the packet's base +
    REG_OFFSET, printed by register name (`COMPUTE_PGM_LO=0x00001000`) in listings, faults and traces."""

    family: str = "gfx11"
    shown: int = 32  # values printed before `...(+N)`

    def format(self, values, *, canon=None, skip=()) -> str:
        regs = values.get(self.payload) or []
        text = super().format({k: v for k, v in values.items() if k != self.payload}, canon=canon, skip=skip)
        if not regs or "reg_offset" not in values:
            return text
        if canon is not None:  # an address register whose parts are all in this packet: as one address
            first = REGISTER_RANGES[self.name][0] + values["reg_offset"]
            moved = canonical_register_values(first, regs[:self.shown], {}, canon)
            regs = [moved.get(i, v) for i, v in enumerate(regs)] if moved else regs
        named = register_writes(self.name, values["reg_offset"], regs[:self.shown], self.family)
        more = f" ...(+{len(regs) - self.shown})" if len(regs) > self.shown else ""
        return text + "".join(f" {label}=0x{v:08x}" for _, label, v in named) + more


def _fmt(name: str, fields: tuple, size: int | None = None, cls=PacketFormat, **kw) -> PacketFormat:
    fields = tuple(replace(f, hint=True) if f.name in HINTS or f.name.endswith("_action_ena") else f
                   for f in HEADER + tuple(fields))
    return cls(name, OP[name], fields, size=size, **kw)


def _register_writes(name: str, family: str, *extra) -> PacketFormat:
    """SET_*_REG: REG_OFFSET[15:0] in dw1 (SET_SH_REG adds VMID_SHIFT and INDEX), values from dw2 (facts 3.3)."""
    return _fmt(name, (F("reg_offset", 1, 15, 0),) + extra + (F("index", 1, 31, 28),), cls=RegisterWrites,
                family=family, payload="values", payload_dw=2)


def _addr(name: str, dw: int) -> object:
    return F(name, dw, 63, 0, address=True)


_COMMON = [
    _fmt("NOP", (), payload="body", payload_dw=1),
    _fmt("WRITE_DATA", (F("dst_sel", 1, 11, 8, enum=WRITE_DATA_DST, strict=True), F("wr_one_addr", 1, 16),
                        F("wr_confirm", 1, 20), F("cache_policy", 1, 26, 25, enum=CACHE_POLICY),
                        F("engine_sel", 1, 31, 30), _addr("dst_addr", 2)), payload="data", payload_dw=4),
    _fmt("WAIT_REG_MEM", (F("function", 1, 2, 0, enum=FUNCTION, strict=True),
                          F("mem_space", 1, 5, 4, enum=MEM_SPACE, strict=True),
                          F("operation", 1, 7, 6, enum=WAIT_OPERATION, strict=True),
                          F("engine_sel", 1, 9, 8), F("cache_policy", 1, 26, 25, enum=CACHE_POLICY),
                          _addr("poll_addr", 2), F("reference", 4, 31, 0), F("mask", 5, 31, 0),
                          F("poll_interval", 6, 15, 0), F("optimize_ace_offload_mode", 6, 31)), size=7),
    _fmt("INDIRECT_BUFFER", (_addr("ib_base", 1), F("ib_size", 3, 19, 0), F("chain", 3, 20),
                             F("offload_polling", 3, 21), F("valid", 3, 23), F("vmid", 3, 27, 24),
                             F("cache_policy", 3, 29, 28, enum=CACHE_POLICY), F("priv", 3, 31)), size=4),
    _fmt("EVENT_WRITE", (F("event_type", 1, 5, 0, enum=EVENT_TYPES), F("event_index", 1, 11, 8, enum=EVENT_INDEX),
                         F("offload_enable", 1, 31)), payload="address", payload_dw=2),
    _fmt("COPY_DATA", (F("src_sel", 1, 3, 0, enum=COPY_SRC, strict=True), F("dst_sel", 1, 11, 8, enum=COPY_DST,
                                                                              strict=True),
                       F("src_cache_policy", 1, 14, 13, enum=CACHE_POLICY), F("count_sel", 1, 16),
                       F("wr_confirm", 1, 20), F("dst_cache_policy", 1, 26, 25, enum=CACHE_POLICY),
                       F("pq_exe_status", 1, 29), _addr("src_addr", 2), _addr("dst_addr", 4)), size=6),
    _fmt("DMA_DATA", (F("engine", 1, 0), F("src_cache_policy", 1, 14, 13, enum=CACHE_POLICY),
                      F("dst_sel", 1, 21, 20, enum=DMA_DST, strict=True),
                      F("dst_cache_policy", 1, 26, 25, enum=CACHE_POLICY),
                      F("src_sel", 1, 30, 29, enum=DMA_SRC), F("cp_sync", 1, 31), _addr("src_addr", 2),
                      _addr("dst_addr", 4), F("byte_count", 6, 25, 0), F("sas", 6, 26), F("das", 6, 27),
                      F("saic", 6, 28), F("daic", 6, 29), F("raw_wait", 6, 30), F("dis_wc", 6, 31)), size=7),
    _fmt("DISPATCH_DIRECT", (F("dim_x", 1, 31, 0), F("dim_y", 2, 31, 0), F("dim_z", 3, 31, 0),
                             F("dispatch_initiator", 4, 31, 0)), size=5),
    _fmt("DISPATCH_INDIRECT", (_addr("addr", 1), F("dispatch_initiator", 3, 31, 0)), size=4),
]

def _atomic_mem(op_hi: int) -> PacketFormat:
    """ATOMIC_MEM: the TC_OP field is [6:0] on gfx11, [5:0] on gfx9."""
    return _fmt("ATOMIC_MEM", (F("atomic", 1, op_hi, 0, enum=ATOMIC_OP_NAMES),
                               F("command", 1, 11, 8, enum=ATOMIC_COMMAND, strict=True),
                               F("cache_policy", 1, 26, 25, enum=CACHE_POLICY), _addr("addr", 2),
                               F("src_data", 4, 63, 0), F("cmp_data", 6, 63, 0), F("loop_interval", 8, 12, 0)), size=9)


_RELEASE_TAIL = (F("dst_sel", 2, 17, 16, enum=RELEASE_DST), F("int_sel", 2, 26, 24, enum=INT_SEL, strict=True),
                 F("data_sel", 2, 31, 29, enum=DATA_SEL, strict=True), _addr("addr", 3), F("data", 5, 63, 0),
                 F("int_ctxid", 7, 31, 0))
# ACQUIRE_MEM's range start (facts 3.3): COHER_BASE = address >> 8, COHER_BASE_HI[23:0] continues it past 32 bits
_COHER_BASE = ((("coher_base", 8), ("coher_base_hi", 40)),)
_RELEASE_HEAD = (F("event_type", 1, 5, 0, enum=EVENT_TYPES), F("event_index", 1, 11, 8, enum=EVENT_INDEX))

_GFX11 = [
    _atomic_mem(6),
    _fmt("RELEASE_MEM", _RELEASE_HEAD + (
        F("glm_wb", 1, 12), F("glm_inv", 1, 13), F("glv_inv", 1, 14), F("gl1_inv", 1, 15), F("gl2_us", 1, 16),
        F("gl2_range", 1, 18, 17), F("gl2_discard", 1, 19), F("gl2_inv", 1, 20), F("gl2_wb", 1, 21),
        F("gcr_seq", 1, 23, 22), F("cache_policy", 1, 26, 25, enum=CACHE_POLICY), F("execute", 1, 28))
         + _RELEASE_TAIL, size=8),
    _fmt("ACQUIRE_MEM", (F("coher_cntl", 1, 30, 0), F("engine_sel", 1, 31), F("coher_size", 2, 31, 0),
                         F("coher_size_hi", 3, 7, 0), F("coher_base", 4, 31, 0), F("coher_base_hi", 5, 23, 0),
                         F("poll_interval", 6, 15, 0))
         + tuple(F(n, 7, hi, lo) for n, hi, lo in GCR_CNTL_FIELDS), size=8, split_addresses=_COHER_BASE),
]
_GFX9 = [
    _atomic_mem(5),
    _fmt("RELEASE_MEM", _RELEASE_HEAD + (
        F("tcl1_vol_action_ena", 1, 12), F("tc_vol_action_ena", 1, 13), F("tc_wb_action_ena", 1, 15),
        F("tcl1_action_ena", 1, 16), F("tc_action_ena", 1, 17), F("tc_nc_action_ena", 1, 19),
        F("tc_wc_action_ena", 1, 20), F("tc_md_action_ena", 1, 21), F("cache_policy", 1, 26, 25, enum=CACHE_POLICY),
        F("execute", 1, 28), F("pq_exe_status", 1, 29)) + _RELEASE_TAIL, size=8),
    _fmt("ACQUIRE_MEM", (F("tc_nc_action_ena", 1, 3), F("tc_wc_action_ena", 1, 4),
                         F("tc_inv_metadata_action_ena", 1, 5), F("tcl1_vol_action_ena", 1, 15),
                         F("tc_wb_action_ena", 1, 18), F("tcl1_action_ena", 1, 22), F("tc_action_ena", 1, 23),
                         F("cb_action_ena", 1, 25), F("db_action_ena", 1, 26), F("sh_kcache_action_ena", 1, 27),
                         F("sh_kcache_vol_action_ena", 1, 28), F("sh_icache_action_ena", 1, 29),
                         F("sh_kcache_wb_action_ena", 1, 30), F("coher_size", 2, 31, 0), F("coher_size_hi", 3, 23, 0),
                         F("coher_base", 4, 31, 0), F("coher_base_hi", 5, 23, 0), F("poll_interval", 6, 15, 0)),
         size=7, split_addresses=_COHER_BASE),
]

def _register_packets(family: str) -> list[PacketFormat]:
    return [_register_writes("SET_SH_REG", family, F("vmid_shift", 1, 27, 23)),
            _register_writes("SET_UCONFIG_REG", family)]


FORMATS: dict[str, dict[int, PacketFormat]] = {
    "gfx11": {f.opcode: f for f in _COMMON + _GFX11 + _register_packets("gfx11")},
    "gfx9": {f.opcode: f for f in _COMMON + _GFX9 + _register_packets("gfx9")},
}
# What listings decode besides what a compute queue executes: the register writes of graphics rings (same
# layout, facts 3.3), so a captured gfx stream reads with register names too. The engines use FORMATS only.
LISTING_FORMATS: dict[str, dict[int, PacketFormat]] = {
    family: {**fmts, **{f.opcode: f for f in (_register_writes("SET_CONFIG_REG", family),
                                               _register_writes("SET_CONTEXT_REG", family))}}
    for family, fmts in FORMATS.items()}


def formats(family: str = "gfx11") -> dict[int, PacketFormat]:
    try:
        return FORMATS[family]
    except KeyError:
        raise ValueError(f"unknown PM4 family {family!r}: gfx11 or gfx9") from None


# ---------------------------------------------------------------------------------------------------
# encoding: what runtimes and tests use to build streams


def header(opcode: int, count: int, shader_type: int = 0, predicate: int = 0) -> int:
    if not 0 <= count <= COUNT_MAX:
        raise ValueError(f"PM4 count {count} does not fit in 14 bits")
    return TYPE3 << 30 | count << 16 | (opcode & 0xFF) << 8 | (shader_type & 1) << 1 | (predicate & 1)


def encode(name: str, family: str = "gfx11", **values) -> list[int]:
    """A whole packet: fields by name, the header's type, count and opcode filled in."""
    fmt = formats(family)[OP[name]]
    shader_type, predicate = values.pop("shader_type", 0), values.pop("predicate", 0)
    dws = fmt.encode(**values)
    dws[0] = header(fmt.opcode, len(dws) - 2, shader_type, predicate)
    return dws


def nop(ndw: int = 2) -> list[int]:
    """A NOP filling `ndw` dwords (1 = the header-only form)."""
    if ndw == 1:
        return [header(OP["NOP"], NOP_ONE_DWORD)]
    return encode("NOP", body=[0] * (ndw - 1))


def write_data(addr: int, data: list[int], *, dst_sel: int = 5, wr_confirm: int = 1, one_addr: int = 0,
               cache_policy: int = 0) -> list[int]:
    return encode("WRITE_DATA", dst_sel=dst_sel, wr_confirm=wr_confirm, wr_one_addr=one_addr,
                  cache_policy=cache_policy, dst_addr=addr, data=data)


def wait_reg_mem(addr: int, reference: int, *, mask: int = 0xFFFFFFFF, function: int = 5, mem_space: int = 1,
                 operation: int = 0, poll_interval: int = 4) -> list[int]:
    return encode("WAIT_REG_MEM", function=function, mem_space=mem_space, operation=operation, poll_addr=addr,
                  reference=reference, mask=mask, poll_interval=poll_interval)


def release_mem(addr: int = 0, data: int = 0, *, data_sel: int = 1, int_sel: int = 0, ctxid: int = 0,
                event_type: int = 0x14, event_index: int = 5, family: str = "gfx11", **cache) -> list[int]:
    return encode("RELEASE_MEM", family, event_type=event_type, event_index=event_index, data_sel=data_sel,
                  int_sel=int_sel, addr=addr, data=data, int_ctxid=ctxid, **cache)


def acquire_mem(family: str = "gfx11", **cache) -> list[int]:
    """Whole-range cache acquire (COHER_SIZE all ones, base 0, poll interval 0x0A)."""
    hi = 0xFF if family == "gfx11" else 0xFFFFFF
    return encode("ACQUIRE_MEM", family, coher_size=0xFFFFFFFF, coher_size_hi=hi, poll_interval=0x0A, **cache)


def event_write(event_type: int, event_index: int, address: int | None = None) -> list[int]:
    extra = [] if address is None else [address & 0xFFFFFFFF, address >> 32]
    return encode("EVENT_WRITE", event_type=event_type, event_index=event_index, address=extra)


def cs_partial_flush() -> list[int]:
    return event_write(CS_PARTIAL_FLUSH, code(EVENT_INDEX, "CS_PARTIAL_FLUSH"))


def set_sh_reg(reg: int, values: list[int]) -> list[int]:
    """SET_SH_REG for absolute register dword address `reg` (0x2C00..0x3000)."""
    return encode("SET_SH_REG", reg_offset=reg - SH_BASE, values=values)


def set_uconfig_reg(reg: int, values: list[int]) -> list[int]:
    return encode("SET_UCONFIG_REG", reg_offset=reg - UCONFIG_BASE, values=values)


def indirect_buffer(addr: int, ndw: int, *, chain: int = 0) -> list[int]:
    return encode("INDIRECT_BUFFER", ib_base=addr, ib_size=ndw, chain=chain, valid=1)


def copy_data(src: int, dst: int, *, src_sel: int = 2, dst_sel: int = 2, count_sel: int = 0,
              wr_confirm: int = 1) -> list[int]:
    return encode("COPY_DATA", src_sel=src_sel, dst_sel=dst_sel, count_sel=count_sel, wr_confirm=wr_confirm,
                  src_addr=src, dst_addr=dst)


def atomic_mem(addr: int, op: int, src: int, cmp: int = 0, *, command: int = 0, loop_interval: int = 0) -> list[int]:
    return encode("ATOMIC_MEM", atomic=op, command=command, addr=addr, src_data=src, cmp_data=cmp,
                  loop_interval=loop_interval)


def dma_data(dst: int, src: int, nbytes: int, *, src_sel: int = 0, dst_sel: int = 0, cp_sync: int = 1,
             **flags) -> list[int]:
    return encode("DMA_DATA", src_sel=src_sel, dst_sel=dst_sel, cp_sync=cp_sync, src_addr=src, dst_addr=dst,
                  byte_count=nbytes, **flags)


def dispatch_direct(x: int, y: int, z: int, initiator: int) -> list[int]:
    return encode("DISPATCH_DIRECT", dim_x=x, dim_y=y, dim_z=z, dispatch_initiator=initiator)


# ---------------------------------------------------------------------------------------------------
# decoding and disassembly


def packet_size(hdr: int) -> int:
    """Packet length in dwords from its header (type 3 only)."""
    count = (hdr >> 16) & COUNT_MAX
    if (hdr >> 8) & 0xFF == OP["NOP"] and count == NOP_ONE_DWORD:
        return 1
    return count + 2


@dataclass
class DecodedPacket:
    """One packet of a listing: what its dwords say, and what they do not (a cut stream, a short count).

    `fields` holds only fields whose dwords are all present; `missing` names the others. Nothing is invented:
    a truncated packet is never shown with zero fields."""

    offset: int  # byte offset in the stream
    dwords: list[int]  # the dwords present
    size: int  # dwords the header says the packet has
    name: str | None = None  # None: a header this family does not decode (see `text`)
    fields: dict = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    registers: list[tuple[int, str, int]] = field(default_factory=list)  # SET_*_REG: (address, name, value)
    error: str | None = None  # why the packet could not be decoded
    text: str = ""

    @property
    def truncated(self) -> bool:
        return len(self.dwords) < self.size

    def as_json(self) -> dict:
        return {"offset": self.offset, "dwords": list(self.dwords), "size": self.size, "name": self.name,
                "fields": dict(self.fields), "missing": list(self.missing), "truncated": self.truncated,
                "registers": [{"address": a, "name": n, "value": v} for a, n, v in self.registers],
                "error": self.error, "text": self.text}


def field_span(f) -> int:
    """How many dwords from the packet start a field needs."""
    return f.dw + (2 if f.hi > 31 else 1)


def present_fields(fmt: PacketFormat, dws, size: int) -> tuple[dict, tuple[str, ...]]:
    """(values of the fields wholly inside the first min(len(dws), size) dwords, names of the others). A payload
    is the dwords present after its start; it is missing only when the packet has some and none are present."""
    have = min(len(dws), size)
    padded = list(dws[:have]) + [0] * max(0, fmt.min_dwords - have)
    decoded = fmt.decode(padded, check=False)
    values = {f.name: decoded[f.name] for f in fmt.fields if field_span(f) <= have}
    missing = [f.name for f in fmt.fields if field_span(f) > have]
    if fmt.payload:
        if have > fmt.payload_dw or size <= fmt.payload_dw:
            values[fmt.payload] = list(dws[fmt.payload_dw:have])
        else:
            missing.append(fmt.payload)
    return values, tuple(missing)


def decode_packet(dws, family: str = "gfx11", canon=None, offset: int = 0) -> DecodedPacket:
    """The packet starting at `dws[0]`, from the dwords present (fewer than its size when the stream is cut)."""
    dws = list(dws)
    hdr = dws[0]
    if hdr >> 30 != TYPE3:
        return DecodedPacket(offset, dws[:1], 1, error=TYPE_NAMES[hdr >> 30],
                             text=f"type-{hdr >> 30} packet 0x{hdr:08x}")
    op, count, size = (hdr >> 8) & 0xFF, (hdr >> 16) & COUNT_MAX, packet_size(hdr)
    present = dws[:size]
    formats(family)  # ValueError for an unknown family
    fmt = LISTING_FORMATS[family].get(op)
    if fmt is None:
        name = OPCODES.get(op, f"UNKNOWN_OPCODE_0x{op:02x}")
        text = f"{name} count={count} body=[{' '.join(f'0x{d:08x}' for d in present[1:9])}]"
        return DecodedPacket(offset, present, size, name=name, fields={"count": count},
                             error="layout not modelled", text=text + _cut_note(present, size, ()))
    if fmt.size is None and size < fmt.min_dwords:  # the count leaves no room for the fields: nothing to decode
        why = f"{fmt.name} header count {count} makes {size} dwords, its fields need {fmt.min_dwords}"
        return DecodedPacket(offset, present, size, name=fmt.name, error=why, text=raw_line(present, why))
    values, missing = present_fields(fmt, present, size)
    by_count = tuple(f.name for f in fmt.fields if field_span(f) > size)  # never in the packet, whatever follows
    text = fmt.format(values, canon=canon, skip=("type", "opcode"))
    if by_count:
        text += f"  (header count {count} makes {size} dwords of {fmt.size}: {', '.join(by_count)} not in the packet)"
    text += _cut_note(present, size, tuple(m for m in missing if m not in by_count))
    regs = []
    if isinstance(fmt, RegisterWrites) and "reg_offset" in values:
        regs = register_writes(fmt.name, values["reg_offset"], values.get(fmt.payload, []), family)
    return DecodedPacket(offset, present, size, name=fmt.name, fields=values, missing=missing, registers=regs,
                         text=text)


def _cut_note(present, size: int, missing: tuple[str, ...]) -> str:
    if len(present) >= size:
        return ""
    lost = f"; missing {', '.join(missing)}" if missing else ""
    return f"  (truncated: {len(present)} of {size} dwords{lost})"


def describe(dws, family: str = "gfx11", canon=None) -> str:
    """One line for one packet's dwords (UMR style); a cut packet shows what is present and says what is not."""
    return decode_packet(dws, family, canon).text


def raw_line(dws, why: str) -> str:
    """What a disassembler prints for dwords it cannot decode: the raw data and the reason."""
    return f".long {', '.join(f'0x{d:08x}' for d in dws[:9])}{' ...' if len(dws) > 9 else ''}  ; cannot decode: {why}"


def split_dwords(data) -> tuple[list[int], bytes]:
    """(dwords, trailing bytes that are not a whole dword) of bytes-like data or a sequence of dwords."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        whole = len(raw) // 4 * 4
        return list(struct.unpack(f"<{whole // 4}I", raw[:whole])), raw[whole:]
    return [int(d) & 0xFFFFFFFF for d in data], b""


def trailing_line(offset: int, rest: bytes) -> str:
    return f"{offset:06x}: .byte {', '.join(f'0x{b:02x}' for b in rest)}  ; cannot decode: {len(rest)} trailing " \
           f"byte{'s' if len(rest) > 1 else ''}, not a whole dword"


def decode_stream(data, family: str = "gfx11") -> tuple[list[DecodedPacket], bytes]:
    """(every packet of a stream, trailing bytes short of a dword). Never raises on the bytes: a packet that
    cannot be decoded is a DecodedPacket with `error` set and a `.long` text."""
    formats(family)  # an unknown family is the caller's error, not the stream's
    dws, rest = split_dwords(data)
    packets, i = [], 0
    while i < len(dws):
        hdr = dws[i]
        n = packet_size(hdr) if hdr >> 30 == TYPE3 else 1
        chunk = dws[i:i + n]
        try:
            packets.append(decode_packet(chunk, family, offset=4 * i))
        except Exception as e:  # a listing shows every dword, decoded or not
            why = f"{type(e).__name__}: {e}"
            packets.append(DecodedPacket(4 * i, chunk, n, error=why, text=raw_line(chunk, why)))
        i += n
    return packets, rest


def disassemble(data, family: str = "gfx11") -> str:
    """One line per packet: `offset: NAME field=value ...` (offsets in bytes; SET_*_REG values by register name).
    Never raises on the bytes: what cannot be decoded prints as a `.long` line saying why, a cut packet says so."""
    packets, rest = decode_stream(data, family)
    lines = [f"{p.offset:06x}: {p.text}" for p in packets]
    if rest:
        lines.append(trailing_line(len(data) - len(rest), rest))
    return "\n".join(lines)
