"""PM4 type-3 packets (formats, builders, disassembler) and the compute command processor.

Layouts are HARDWARE_FACTS section 3, written once as `PacketFormat` tables per family (gfx11 = RDNA3,
gfx9 = CDNA3 gfx942; they differ in RELEASE_MEM cache bits and ACQUIRE_MEM). The same tables build
packets (`encode` and the builder functions the runtime uses), decode them in `ComputeQueue`, and
print them (`disassemble`, fault reports, traces).

Emulation model: memory is coherent and dispatches complete synchronously, so cache-control fields
(GCR bits, cache policies, WR_CONFIRM) decode and are checked but have nothing to act on, and an
end-of-pipe RELEASE_MEM writes as soon as the CP reaches it (all earlier work has finished).
"""
from __future__ import annotations

from array import array
from dataclasses import replace

from .atomics import OP_NAMES as ATOMIC_OP_NAMES
from .atomics import apply as apply_atomic
from .atomics import decode_op as decode_atomic
from .dispatch import SH_BASE, SH_END, UCONFIG_BASE, UCONFIG_END, decode_dispatch, reg_name
from .errors import DecodeError, UnsupportedError
from .fields import F, PacketFormat
from .queue import COMPARE, COMPARE_NAMES, Queue, Stream, Wait

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
FUNCTION = {k: v for k, v in COMPARE_NAMES.items()}
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
GCR_CNTL_FIELDS = (  # ACQUIRE_MEM dw7 on gfx11; SDMA GCR_REQ carries the same 19 bits
    ("gli_inv", 1, 0), ("gl1_range", 3, 2), ("glm_wb", 4, 4), ("glm_inv", 5, 5), ("glk_wb", 6, 6),
    ("glk_inv", 7, 7), ("glv_inv", 8, 8), ("gl1_inv", 9, 9), ("gl2_us", 10, 10), ("gl2_range", 12, 11),
    ("gl2_discard", 13, 13), ("gl2_inv", 14, 14), ("gl2_wb", 15, 15), ("seq", 17, 16), ("range_is_pa", 18, 18))


# Fields with no effect in the emulator (memory is coherent, the CP does not poll on a timer, one VMID):
# decoded for disassembly and traces, skipped on the execution fast path.
HINTS = {"type", "count", "opcode", "shader_type", "predicate", "cache_policy", "src_cache_policy",
         "dst_cache_policy", "wr_confirm", "engine_sel", "poll_interval", "optimize_ace_offload_mode",
         "offload_polling", "vmid", "offload_enable", "vmid_shift", "execute", "pq_exe_status", "loop_interval",
         "engine", "cp_sync", "raw_wait", "dis_wc", "coher_size", "coher_size_hi", "coher_base", "coher_base_hi",
         "gcr_seq", "glm_wb", "glm_inv", "glv_inv", "gl1_inv", "gl2_us", "gl2_range", "gl2_discard", "gl2_inv",
         "gl2_wb", "gli_inv", "gl1_range", "glk_wb", "glk_inv", "seq", "range_is_pa"}


def _fmt(name: str, fields: tuple, size: int | None = None, **kw) -> PacketFormat:
    fields = tuple(replace(f, hint=True) if f.name in HINTS or f.name.endswith("_action_ena") else f
                   for f in HEADER + tuple(fields))
    return PacketFormat(name, OP[name], fields, size=size, **kw)


def _addr(name: str, dw: int) -> object:
    return F(name, dw, 63, 0, address=True)


_COMMON = [
    _fmt("NOP", (), payload="body", payload_dw=1),
    _fmt("WRITE_DATA", (F("dst_sel", 1, 11, 8, enum=WRITE_DATA_DST, strict=True), F("wr_one_addr", 1, 16),
                        F("wr_confirm", 1, 20), F("cache_policy", 1, 26, 25, enum=CACHE_POLICY),
                        F("engine_sel", 1, 31, 30), _addr("dst_addr", 2)), payload="data", payload_dw=4),
    _fmt("WAIT_REG_MEM", (F("function", 1, 2, 0, enum=FUNCTION, strict=True),
                          F("mem_space", 1, 5, 4, enum={0: "REGISTER", 1: "MEMORY"}, strict=True),
                          F("operation", 1, 7, 6, enum={0: "WAIT", 1: "WRITE_WAIT", 3: "WAIT_PREEMPTABLE"},
                            strict=True),
                          F("engine_sel", 1, 9, 8), F("cache_policy", 1, 26, 25, enum=CACHE_POLICY),
                          _addr("poll_addr", 2), F("reference", 4, 31, 0), F("mask", 5, 31, 0),
                          F("poll_interval", 6, 15, 0), F("optimize_ace_offload_mode", 6, 31)), size=7),
    _fmt("INDIRECT_BUFFER", (_addr("ib_base", 1), F("ib_size", 3, 19, 0), F("chain", 3, 20),
                             F("offload_polling", 3, 21), F("valid", 3, 23), F("vmid", 3, 27, 24),
                             F("cache_policy", 3, 29, 28, enum=CACHE_POLICY), F("priv", 3, 31)), size=4),
    _fmt("EVENT_WRITE", (F("event_type", 1, 5, 0, enum=EVENT_TYPES), F("event_index", 1, 11, 8, enum=EVENT_INDEX),
                         F("offload_enable", 1, 31)), payload="address", payload_dw=2),
    _fmt("SET_SH_REG", (F("reg_offset", 1, 15, 0), F("vmid_shift", 1, 27, 23), F("index", 1, 31, 28)),
         payload="values", payload_dw=2),
    _fmt("SET_UCONFIG_REG", (F("reg_offset", 1, 15, 0), F("index", 1, 31, 28)), payload="values", payload_dw=2),
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
         + tuple(F(n, 7, hi, lo) for n, hi, lo in GCR_CNTL_FIELDS), size=8),
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
         size=7),
]

FORMATS: dict[str, dict[int, PacketFormat]] = {
    "gfx11": {f.opcode: f for f in _COMMON + _GFX11},
    "gfx9": {f.opcode: f for f in _COMMON + _GFX9},
}


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
    return event_write(0x07, 4)


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


def describe(dws, family: str = "gfx11", canon=None) -> str:
    """One line for one packet's dwords (UMR style)."""
    hdr = dws[0]
    if hdr >> 30 != TYPE3:
        return f"type-{hdr >> 30} packet 0x{hdr:08x}"
    op = (hdr >> 8) & 0xFF
    fmt = formats(family).get(op)
    if fmt is None:
        name = OPCODES.get(op, f"UNKNOWN_OPCODE_0x{op:02x}")
        return f"{name} count={(hdr >> 16) & COUNT_MAX} body=[{' '.join(f'0x{d:08x}' for d in dws[1:9])}]"
    need = max(packet_size(hdr), fmt.size or 0)
    if len(dws) < need:  # a truncated packet, or a header count too small for the format, still prints
        dws = list(dws) + [0] * (need - len(dws))
    values = fmt.decode(dws, check=False)
    return fmt.format(values, canon=canon, skip=("type", "opcode"))


def disassemble(data, family: str = "gfx11") -> str:
    """One line per packet: `offset: NAME field=value ...` (offsets in bytes)."""
    import struct
    dws = list(struct.unpack(f"<{len(data) // 4}I", bytes(data))) if isinstance(data, (bytes, bytearray)) \
        else [int(d) & 0xFFFFFFFF for d in data]
    lines, i = [], 0
    while i < len(dws):
        hdr = dws[i]
        n = packet_size(hdr) if hdr >> 30 == TYPE3 else 1
        chunk = dws[i:i + n]
        text = describe(chunk, family)
        if len(chunk) < n:
            text += f"  (truncated: {n} dwords expected, {len(chunk)} present)"
        lines.append(f"{4 * i:06x}: {text}")
        i += n
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------
# the compute command processor (one MEC queue)


class ComputeQueue(Queue):
    """A PM4 compute queue: ring in dwords, 64-bit wptr, rptr reported to memory, up to two IB levels."""

    engine = "pm4"
    ptr_unit = 4
    max_ib_depth = 2  # IB1 and IB2

    def __init__(self, gpu, name, ring_va, ring_size, rptr_va, wptr_va):
        super().__init__(gpu, name, ring_va, ring_size, rptr_va, wptr_va)
        self.family = gpu.target.family
        self.fmts = formats(self.family)
        self.regs: dict[int, int] = {}  # this queue's SH register state (absolute dword address -> value)
        self.atomic_return = 0  # pre-op value of the last ATOMIC_MEM, for COPY_DATA SRC_SEL 6
        self.dispatches = 0
        handlers = {OP[name[5:]]: getattr(self, name) for name in dir(self) if name.startswith("_exec")
                    and name[5:] in OP}
        self._ops = {op: (fmt, handlers[op], fmt.size) for op, fmt in self.fmts.items()}  # the decode table
        self._packet_cost = gpu.cost.packet

    def write_back_rptr(self) -> None:
        # The CP reports its read offset as a wrapped dword offset (amdgpu reads 32 bits). [uncertain]
        ring_dw = self.ring_size // 4
        self.gpu.memory.write_u32(self.rptr_va, self.rptr % ring_dw)

    def disassemble_at(self, stream: Stream, pos: int):
        hdr = stream.dwords(pos, 1)[0]
        n = packet_size(hdr) if hdr >> 30 == TYPE3 else 1
        try:
            dws = stream.dwords(pos, n)
        except DecodeError:
            avail = max(0, (stream.end - pos) // 4)
            return hdr, describe(stream.dwords(pos, avail) if avail else [hdr], self.family) + " (truncated)"
        return hdr, describe(dws, self.family, canon=self.gpu.canonical)

    # -- the fetch/decode/execute step -------------------------------------------------------------

    def execute(self, stream: Stream) -> None:
        pos = stream.pos
        buf, i = stream._buf, (pos - stream._buf_pos) >> 2
        hdr = buf[i] if 0 <= i < len(buf) else stream.dword(pos)  # cached ring dwords: the fast path
        if hdr >> 30 != TYPE3:
            kind = {0: "type-0 (register write; privileged)", 1: "type-1 (reserved)", 2: "type-2 (legacy filler)"}
            raise DecodeError(f"{kind[hdr >> 30]} packet 0x{hdr:08x} is not accepted on a user compute queue")
        op = (hdr >> 8) & 0xFF
        entry = self._ops.get(op)
        if entry is None:
            if op in OPCODES:
                raise UnsupportedError(f"PM4 {OPCODES[op]} (opcode 0x{op:02x}) is not emulated on compute queues")
            raise DecodeError(f"unknown PM4 opcode 0x{op:02x}")
        fmt, handler, size = entry
        count = (hdr >> 16) & COUNT_MAX
        n = 1 if op == 0x10 and count == NOP_ONE_DWORD else count + 2
        if size is not None and n != size:
            raise DecodeError(f"{fmt.name}: header count {n - 2} makes {n} dwords, the packet is {size}")
        dws = buf[i:i + n] if 0 <= i and i + n <= len(buf) and pos + 4 * n <= stream.end else stream.dwords(pos, n)
        values = fmt.decode_fast(dws)
        if hdr & 1:
            raise UnsupportedError(f"{fmt.name}: predicated packets (SET_PREDICATION state) are not emulated")
        gpu = self.gpu
        gpu.trace.append((gpu.clock, self.name, "packet", (stream, pos, fmt, dws)))
        gpu.clock += self._packet_cost
        stream.pos = pos + 4 * n
        handler(stream, pos, values)

    # -- packets -----------------------------------------------------------------------------------

    def _execNOP(self, stream, pos, v):
        pass

    def _execWRITE_DATA(self, stream, pos, v):
        data = v["data"]
        if not data:
            raise DecodeError("WRITE_DATA without data dwords")
        sel = v["dst_sel"]
        if sel == 0:
            for i, d in enumerate(data):
                self.write_register(v["dst_addr"] & 0x3FFFF if v["wr_one_addr"] else (v["dst_addr"] & 0x3FFFF) + i, d)
            return
        if sel not in (1, 2, 5):
            raise UnsupportedError(f"WRITE_DATA DST_SEL {WRITE_DATA_DST[sel]} is not emulated")
        addr = v["dst_addr"] & ~3  # the address field is [31:2]: low bits ignored
        mem = self.gpu.memory
        if len(data) == 1 or v["wr_one_addr"]:
            for d in data:
                mem.write_u32(addr, d)
            gpu = self.gpu
            gpu.trace.append((gpu.clock, self.name, "write", (addr, 4, data[-1])))
        else:
            mem.write(addr, _pack(data))
            self.gpu.trace_write(self, addr, 4 * len(data), _join(data))

    def _execWAIT_REG_MEM(self, stream, pos, v):
        func, ref, mask = v["function"], v["reference"], v["mask"]
        if v["operation"] == 1:  # write REFERENCE to a register, then poll another: the HDP flush handshake
            if v["mem_space"] != 0:
                raise DecodeError("WAIT_REG_MEM OPERATION WRITE_WAIT needs MEM_SPACE REGISTER")
            # HDP flush request/done: no host write buffer exists in the emulator, the flush is done at once.
            self.gpu.tick(self.gpu.cost.packet)
            return
        if v["mem_space"] == 1:
            addr = v["poll_addr"] & ~3
            self.gpu.memory.check(addr, 4, "read")
            read = lambda: self.gpu.memory.read_u32(addr)
        else:
            reg = v["poll_addr"] & 0x3FFFF
            addr = None
            read = lambda: self.read_register(reg)
        if COMPARE[func](read() & mask, ref):
            return
        stream.pos = pos  # stall here; the scheduler re-checks the condition
        self.wait = Wait(self.disassemble_at(stream, pos)[1], 28, read, func, ref, mask, addr, stream.offset(pos))

    def _execINDIRECT_BUFFER(self, stream, pos, v):
        if not v["valid"]:
            raise DecodeError("INDIRECT_BUFFER with VALID = 0")
        if v["priv"]:
            raise DecodeError("INDIRECT_BUFFER with PRIV = 1 is not allowed on a user queue")
        if v["ib_base"] & 3:
            raise DecodeError(f"INDIRECT_BUFFER base 0x{v['ib_base']:x} is not dword aligned")
        if v["ib_size"] == 0:
            raise DecodeError("INDIRECT_BUFFER with IB_SIZE 0")
        if v["chain"] and not stream.is_ring:
            self.stack.pop()  # CHAIN: the new IB replaces the current one instead of returning to it
        self.push_ib(v["ib_base"], 4 * v["ib_size"])

    def _execEVENT_WRITE(self, stream, pos, v):
        etype, index = v["event_type"], v["event_index"]
        name = EVENT_TYPES.get(etype, f"event 0x{etype:x}")
        if etype == 0x07:  # CS_PARTIAL_FLUSH: wait for earlier dispatches; they completed synchronously
            if index != 4:
                raise DecodeError(f"EVENT_WRITE CS_PARTIAL_FLUSH needs EVENT_INDEX 4, got {index}")
        elif etype in (0x06, 0x16):  # cache flush (and invalidate): memory is coherent in the emulator
            if index != 0:
                raise DecodeError(f"EVENT_WRITE {name} needs EVENT_INDEX 0, got {index}")
        elif etype in (0x04, 0x14, 0x28, 0x2F):
            raise DecodeError(f"EVENT_WRITE {name} is an end-of-pipe/timestamp event: use RELEASE_MEM")
        else:
            raise UnsupportedError(f"EVENT_WRITE {name} (index {index}) is not emulated")
        if v["address"]:
            raise DecodeError(f"EVENT_WRITE {name} carries an address; only sample events have one")

    def _execSET_SH_REG(self, stream, pos, v):
        if v["index"] not in (0, 1):
            raise UnsupportedError(f"SET_SH_REG INDEX {v['index']} is not emulated")
        self._set_regs("SET_SH_REG", SH_BASE, SH_END, v)

    def _execSET_UCONFIG_REG(self, stream, pos, v):
        if v["index"] != 0:
            raise UnsupportedError(f"SET_UCONFIG_REG INDEX {v['index']} is not emulated")
        self._set_regs("SET_UCONFIG_REG", UCONFIG_BASE, UCONFIG_END, v)

    def _set_regs(self, name, base, end, v):
        values = v["values"]
        if not values:
            raise DecodeError(f"{name} without register values")
        first = base + v["reg_offset"]
        if first + len(values) > end:
            raise DecodeError(f"{name} writes registers 0x{first:x}..0x{first + len(values) - 1:x}, "
                              f"past the end of its range 0x{base:x}..0x{end - 1:x}")
        for i, value in enumerate(values):
            self.write_register(first + i, value)

    def _execRELEASE_MEM(self, stream, pos, v):
        etype, index = v["event_type"], v["event_index"]
        if index not in (5, 6):
            raise DecodeError(f"RELEASE_MEM EVENT_INDEX {index}: must be 5 (END_OF_PIPE) or 6 (SHADER_DONE)")
        if etype not in (0x04, 0x14, 0x28, 0x2F):
            raise UnsupportedError(f"RELEASE_MEM event {EVENT_TYPES.get(etype, hex(etype))} is not an end-of-pipe "
                                   f"event hcqsim emulates")
        if v["dst_sel"] not in (0, 1):
            raise UnsupportedError(f"RELEASE_MEM DST_SEL {RELEASE_DST[v['dst_sel']]} is not emulated")
        data_sel, int_sel = v["data_sel"], v["int_sel"]
        if int_sel == 1 and data_sel != 0:
            raise DecodeError("RELEASE_MEM INT_SEL INT_ONLY requires DATA_SEL NONE")
        if int_sel in (5, 6) and data_sel != 0:
            raise DecodeError("RELEASE_MEM INT_SEL 5/6 compare against memory: DATA_SEL must be NONE")
        mem = self.gpu.memory
        if data_sel == 1:
            addr = v["addr"] & ~3
            mem.write_u32(addr, v["data"])
            self.gpu.trace_write(self, addr, 4, v["data"] & 0xFFFFFFFF)
        elif data_sel in (2, 3):
            addr = v["addr"] & ~7
            value = v["data"] if data_sel == 2 else self.gpu.clock
            mem.write_u64(addr, value)
            self.gpu.trace_write(self, addr, 8, value)
        elif data_sel != 0:
            raise UnsupportedError(f"RELEASE_MEM DATA_SEL {DATA_SEL[data_sel]} is not emulated")
        if int_sel in (2, 4) or (int_sel == 1):
            self.gpu.interrupt("cp_eop", v["int_ctxid"], self)
        elif int_sel in (5, 6):
            width = 4 if int_sel == 5 else 8
            addr = v["addr"] & ~(width - 1)
            cur = mem.read_u32(addr) if width == 4 else mem.read_u64(addr)
            if cur == v["data"] & ((1 << 8 * width) - 1):
                self.gpu.interrupt("cp_eop", v["int_ctxid"], self)

    def _execACQUIRE_MEM(self, stream, pos, v):
        if self.family == "gfx11" and v["coher_cntl"]:
            raise UnsupportedError(f"ACQUIRE_MEM legacy COHER_CNTL 0x{v['coher_cntl']:x} (0 on gfx10+)")
        # Cache invalidation/write-back has nothing to act on: emulated memory is coherent.

    def _execCOPY_DATA(self, stream, pos, v):
        size = 8 if v["count_sel"] else 4
        src_sel, dst_sel = v["src_sel"], v["dst_sel"]
        if src_sel in (1, 2):
            addr = v["src_addr"] & ~(size - 1)
            value = self.gpu.memory.read_u64(addr) if size == 8 else self.gpu.memory.read_u32(addr)
        elif src_sel == 5:
            value = v["src_addr"] & ((1 << 8 * size) - 1)
        elif src_sel == 0:
            reg = v["src_addr"] & 0x3FFFF
            value = self.read_register(reg) | (self.read_register(reg + 1) << 32 if size == 8 else 0)
        elif src_sel == 6:
            value = self.atomic_return & ((1 << 8 * size) - 1)
        elif src_sel == 9:
            value = self.gpu.clock & ((1 << 8 * size) - 1)
        else:
            raise UnsupportedError(f"COPY_DATA SRC_SEL {COPY_SRC[src_sel]} is not emulated")
        if dst_sel in (2, 5):
            addr = v["dst_addr"] & ~(size - 1)
            (self.gpu.memory.write_u64 if size == 8 else self.gpu.memory.write_u32)(addr, value)
            self.gpu.trace_write(self, addr, size, value)
        elif dst_sel == 0:
            reg = v["dst_addr"] & 0x3FFFF
            self.write_register(reg, value & 0xFFFFFFFF)
            if size == 8:
                self.write_register(reg + 1, value >> 32)
        else:
            raise UnsupportedError(f"COPY_DATA DST_SEL {COPY_DST[dst_sel]} is not emulated")

    def _execATOMIC_MEM(self, stream, pos, v):
        name, bits, returns = decode_atomic(v["atomic"])
        size = bits // 8
        addr = v["addr"]
        if addr % size:
            raise DecodeError(f"ATOMIC_MEM {ATOMIC_OP_NAMES[v['atomic']]} address 0x{addr:x} is not "
                              f"{size}-byte aligned")
        mem = self.gpu.memory
        read = (lambda: mem.read_u64(addr)) if size == 8 else (lambda: mem.read_u32(addr))
        mem.check(addr, size, "write")
        old = read()
        if v["command"] == 1:  # loop until the compare-swap succeeds: a wait on memory == CMP_DATA
            if name not in ("CMPSWAP", "FCMPSWAP"):
                raise DecodeError(f"ATOMIC_MEM COMMAND LOOP_UNTIL_COMPARE needs a compare-swap op, got {name}")
            if old != v["cmp_data"] & ((1 << bits) - 1):
                stream.pos = pos
                self.wait = Wait(self.disassemble_at(stream, pos)[1], 0, read, 3, v["cmp_data"] & ((1 << bits) - 1),
                                 (1 << bits) - 1, addr, stream.offset(pos))  # size 0: re-execute
                return
        new = apply_atomic(name, bits, old, v["src_data"], v["cmp_data"])
        (mem.write_u64 if size == 8 else mem.write_u32)(addr, new)
        if returns:  # only RTN ops deliver the pre-op value (COPY_DATA SRC_SEL 6)
            self.atomic_return = old
        self.gpu.trace_write(self, addr, size, new)

    def _execDMA_DATA(self, stream, pos, v):
        n = v["byte_count"]
        if v["sas"] or v["das"]:
            raise UnsupportedError("DMA_DATA with register source/destination (SAS/DAS) is not emulated")
        if v["dst_sel"] == 1 or v["src_sel"] == 1:
            raise UnsupportedError("DMA_DATA to or from GDS is not emulated")
        mem, dst = self.gpu.memory, v["dst_addr"]
        if n == 0:
            return
        if v["src_sel"] == 2:  # immediate: fill with the DATA dword
            pattern = (v["src_addr"] & 0xFFFFFFFF).to_bytes(4, "little")
            if v["daic"]:
                mem.write(dst, pattern[:min(n, 4)])
            else:
                mem.fill(dst, pattern, n)
        else:
            src = v["src_addr"]
            if v["saic"] and v["daic"]:
                mem.copy(dst, src, min(n, 4))
            elif v["saic"]:  # source address does not increment: repeat the dword at src
                mem.fill(dst, mem.read(src, 4), n)
            elif v["daic"]:  # destination does not increment: the last dword lands
                mem.check(src, n, "read")
                mem.copy(dst, src + max(0, (n - 1) // 4 * 4), min(4, n))
            else:
                mem.copy(dst, src, n)
        self.gpu.tick(self.gpu.cost.copy(n))
        self.gpu.trace_copy(self, dst, None if v["src_sel"] == 2 else v["src_addr"], n)

    def _execDISPATCH_DIRECT(self, stream, pos, v):
        dims = (v["dim_x"], v["dim_y"], v["dim_z"])
        d = decode_dispatch(self.name, self.regs, dims, v["dispatch_initiator"],
                            wave32_capable=self.gpu.target.is_gfx11, rsrc3_reg=self.gpu.target.rsrc3_reg)
        self.gpu.memory.check(d.pgm_addr, 4, "execute")
        core = self.gpu.shader_core
        if core is None:
            raise UnsupportedError(f"DISPATCH_DIRECT {dims} of the program at 0x{d.pgm_addr:x}: no shader core is "
                                   f"attached to this GPU (registers decoded and checked)")
        for reg, value in zip((0x2E00, 0x2E01, 0x2E02, 0x2E03), (v["dispatch_initiator"], *dims)):
            self.regs[reg] = value
        self.dispatches += 1
        waves = core.dispatch(self, d)
        self.gpu.tick(self.gpu.cost.wave * (waves or 0))

    def _execDISPATCH_INDIRECT(self, stream, pos, v):
        raise UnsupportedError("DISPATCH_INDIRECT on a compute queue is not emulated (layout uncertain)")

    # -- registers ---------------------------------------------------------------------------------

    def write_register(self, reg: int, value: int) -> None:
        if SH_BASE <= reg < SH_END:
            self.regs[reg] = value & 0xFFFFFFFF
        elif UCONFIG_BASE <= reg < UCONFIG_END:
            self.gpu.uconfig[reg] = value & 0xFFFFFFFF
        else:
            raise UnsupportedError(f"write to {reg_name(reg)} (0x{reg:x}): only SH and UCONFIG registers are "
                                   f"modelled on a user queue")

    def read_register(self, reg: int) -> int:
        if SH_BASE <= reg < SH_END:
            return self.regs.get(reg, 0)
        if UCONFIG_BASE <= reg < UCONFIG_END:
            return self.gpu.uconfig.get(reg, 0)
        raise UnsupportedError(f"read of {reg_name(reg)} (0x{reg:x}): only SH and UCONFIG registers are modelled")


def _pack(data: list[int]) -> bytes:
    return array("I", data).tobytes()


def _join(data: list[int]) -> int:
    """Dwords as one little-endian integer (for the trace)."""
    return int.from_bytes(_pack(data), "little")
