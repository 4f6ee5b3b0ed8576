"""SDMA packets: formats, builders and disassembler (the language of the SDMA engines).

Layouts are HARDWARE_FACTS section 5, written once as `PacketFormat` tables per SDMA generation:
"sdma6" (gfx11, SDMA 6.x), "sdma5" (gfx10, SDMA 5.x) and "sdma4" (gfx9 incl. gfx942's SDMA 4.4.2).
The generations differ in the width of the COPY_LINEAR / CONST_FILL COUNT (30 bits on 6.x, 22 bits
before), in the 6.x-only cache-policy fields and their CPV ("cache policy valid") bits, in FENCE's
dw0 flags (absent on 4.x) and in GCR_REQ (5.x/6.x only; op 17 is unknown to a 4.x engine).

dw0 of every packet is OP[7:0], SUB_OP[15:8] and op-specific flags in [31:16]. There is no generic
length field: the size follows from (OP, SUB_OP), except NOP and WRITE_UNTILED whose COUNT field gives
it. An (OP, SUB_OP) pair without a known layout therefore cannot be skipped; it stops the queue.

Uncertain layouts and the choice made here (HARDWARE_FACTS 5.2 / 7):
* CONST_FILL FILLSIZE: 0 = byte and 2 = dword elements are documented in Linux/libdrm SDMA headers;
  1 = 2-byte and 3 = 8-byte elements are inferred from the log2 progression. An element is the low
  bytes of DATA; an 8-byte element is DATA repeated twice (DATA is only 32 bits wide).
* GCR_REQ: sub-op 0 follows the Linux layout (SEQ = dw3[1:0], RANGE_IS_PA = dw3[2]); sub-op 1 is
  ROCr's USER_GCR with RANGE_IS_PA = dw3[0], SEQ = dw3[2:1].

The engine that executes these packets is `hcqsim.engines.sdma_engine`; this module is shared by the
runtime and the emulator, so it imports neither.
"""
from __future__ import annotations

import struct
from dataclasses import replace
from typing import Callable

from .atomics import OP_NAMES as ATOMIC_OP_NAMES
from .compare import NAMES as COMPARE_NAMES
from .errors import DecodeError, UnsupportedError
from .fields import F, Field, PacketFormat
from .pm4 import GCR_CNTL_FIELDS, DecodedPacket, present_fields, raw_line, split_dwords, trailing_line

VERSIONS = ("sdma6", "sdma5", "sdma4")

# ---------------------------------------------------------------------------------------------------
# opcodes and sub-ops (HARDWARE_FACTS 5.1): names for disassembly, layouts or not

_OPS_COMMON = {0: "NOP", 1: "COPY", 2: "WRITE", 4: "INDIRECT", 5: "FENCE", 6: "TRAP", 7: "SEM", 8: "POLL_REGMEM",
               9: "COND_EXE", 10: "ATOMIC", 11: "CONST_FILL", 12: "PTEPDE", 13: "TIMESTAMP", 14: "SRBM_WRITE",
               15: "PRE_EXE"}
OPCODES: dict[str, dict[int, str]] = {
    "sdma4": {**_OPS_COMMON, 16: "DUMMY_TRAP"},
    "sdma5": {**_OPS_COMMON, 16: "GPUVM_INV", 17: "GCR_REQ", 32: "DUMMY_TRAP"},
    "sdma6": {**_OPS_COMMON, 16: "GPUVM_INV", 17: "GCR_REQ", 32: "DUMMY_TRAP"},
}

_SUB_COMMON = {
    0: {0: ""},
    1: {0: "LINEAR", 1: "TILED", 3: "SOA", 4: "LINEAR_SUB_WIND", 5: "TILED_SUB_WIND", 6: "T2T_SUB_WIND",
        7: "DIRTY_PAGE", 8: "LINEAR_PHY"},
    2: {0: "UNTILED", 1: "TILED"},
    4: {0: ""}, 5: {0: ""}, 6: {0: ""}, 7: {0: ""},
    8: {0: "", 1: "REG_WRITE_MEM", 2: "DBIT_WRITE_MEM", 3: "MEM_VERIFY"},
    9: {0: ""}, 10: {0: ""},
    11: {0: "", 1: "DATA_FILL_MULTI"},
    12: {0: "GEN", 1: "COPY", 2: "RMW", 3: "COPY_BACKWARDS"},
    13: {0: "SET", 1: "GET", 2: "GET_GLOBAL"},
    14: {0: ""}, 15: {0: ""}, 16: {0: ""},
}
_SUB_GFX10UP = {
    1: {**_SUB_COMMON[1], 16: "LINEAR_BC", 17: "TILED_BC", 20: "LINEAR_SUB_WIND_BC", 21: "TILED_SUB_WIND_BC",
        22: "T2T_SUB_WIND_BC"},
    2: {**_SUB_COMMON[2], 17: "TILED_BC"},
    8: {**_SUB_COMMON[8], 4: "VM_INVALIDATION"},
    17: {0: "", 1: "USER"}, 32: {0: ""},
}
SUB_OPS: dict[str, dict[int, dict[int, str]]] = {
    "sdma4": _SUB_COMMON,
    "sdma5": {**_SUB_COMMON, **_SUB_GFX10UP},
    "sdma6": {**_SUB_COMMON, **_SUB_GFX10UP, 1: {**_SUB_GFX10UP[1], 36: "LINEAR_SUB_WIND_LARGE"}},
}


def packet_name(op: int, sub_op: int, version: str = "sdma6") -> str | None:
    """The name of (op, sub_op) on that SDMA generation, None when the pair does not exist there."""
    base = OPCODES[version].get(op)
    subs = SUB_OPS[version].get(op, {})
    if base is None or sub_op not in subs:
        return None
    return f"{base}_{subs[sub_op]}" if subs[sub_op] else base


# ---------------------------------------------------------------------------------------------------
# packet layouts (HARDWARE_FACTS 5.2)

FUNCTION = dict(COMPARE_NAMES)
FILLSIZE = {0: "BYTE", 1: "WORD", 2: "DWORD", 3: "QWORD"}
FILL_ELEMENT_BYTES = {0: 1, 1: 2, 2: 4, 3: 8}
MTYPE = {3: "UC"}

# Packets whose size is `base + COUNT` instead of fixed: NOP (1 + COUNT), WRITE_UNTILED (4 + COUNT + 1).
_COUNTED = {"NOP": 1, "WRITE_UNTILED": 5}


def _addr(name: str, dw: int) -> Field:
    return F(name, dw, 63, 0, address=True)


# Fields with no effect in the emulator (memory is coherent, polls are re-checked at progress points, one
# VMID, GCR_REQ is a no-op): decoded for disassembly and traces, skipped on the execution fast path.
HINTS = {"op", "sub_op", "cpv", "cache_policy", "src_cache_policy", "dst_cache_policy", "mtype", "gcc", "sys", "snp",
         "l2_policy", "llc_policy", "interval", "retry_count", "loop_interval", "vmid", "csa_addr",
         "base_va_lo", "base_va_hi", "limit_va_lo", "limit_va_hi"} | {n for n, _hi, _lo in GCR_CNTL_FIELDS}


def _pkt(name: str, op: int, sub_op: int, fields, size: int | None = None, **kw) -> PacketFormat:
    head = (F("op", 0, 7, 0, default=op), F("sub_op", 0, 15, 8, default=sub_op))
    fields = tuple(replace(f, hint=True) if f.name in HINTS else f for f in head + tuple(fields) if f is not None)
    return PacketFormat(name, op, fields, size=size, sub_op=sub_op, **kw)


# GCR_REQ's range: BASE_VA[31:7] in dw1[31:7], BASE_VA[47:32] in dw2[15:0], LIMIT_VA likewise (facts 5.2)
_GCR_RANGE = ((("base_va_lo", 7), ("base_va_hi", 32)), (("limit_va_lo", 7), ("limit_va_hi", 32)))


def _gcr_fields(seq: Field, range_is_pa: Field) -> tuple[Field, ...]:
    """GCR_REQ: GCR_CONTROL[15:0] sits in dw2[31:16]; SEQ and RANGE_IS_PA in dw3 (placement varies)."""
    low = tuple(F(n, 2, 16 + hi, 16 + lo) for n, hi, lo in GCR_CNTL_FIELDS if hi <= 15)
    return (F("base_va_lo", 1, 31, 7), F("base_va_hi", 2, 15, 0)) + low + (
        seq, range_is_pa, F("limit_va_lo", 3, 31, 7), F("limit_va_hi", 4, 15, 0), F("vmid", 4, 27, 24))


def _packets(version: str) -> list[PacketFormat]:
    v6 = version == "sdma6"
    v5 = version in ("sdma5", "sdma6")  # 5.x and 6.x

    def only6(f: Field) -> Field | None:
        return f if v6 else None

    def only5(f: Field) -> Field | None:
        return f if v5 else None

    count_hi = 29 if v6 else 21  # COPY_LINEAR / CONST_FILL COUNT: 30 bits on 6.x, 22 before
    fence_flags = (F("mtype", 0, 18, 16, enum=MTYPE), F("gcc", 0, 19), F("sys", 0, 20), F("snp", 0, 22),
                   F("gpa", 0, 23), F("l2_policy", 0, 25, 24)) if v5 else ()
    packets = [
        _pkt("NOP", 0, 0, (F("count", 0, 29, 16),), payload="body", payload_dw=1,
             doc="COUNT extra dwords follow and are skipped; an all-zero dword is a 1-dword NOP"),
        _pkt("COPY_LINEAR", 1, 0, (
            F("encrypt", 0, 16), F("tmz", 0, 18), only6(F("cpv", 0, 19)), only5(F("backwards", 0, 25)),
            F("broadcast", 0, 27), F("count", 1, count_hi, 0, doc="bytes - 1"),
            F("dst_sw", 2, 17, 16), only6(F("dst_cache_policy", 2, 20, 18)), F("src_sw", 2, 25, 24),
            only6(F("src_cache_policy", 2, 28, 26)), _addr("src_addr", 3), _addr("dst_addr", 5)), size=7),
        _pkt("WRITE_UNTILED", 2, 0, (
            F("encrypt", 0, 16), F("tmz", 0, 18), only6(F("cpv", 0, 28)), _addr("dst_addr", 1),
            F("count", 3, 19, 0, doc="data dwords - 1"), F("sw", 3, 25, 24), only6(F("cache_policy", 3, 28, 26))),
             payload="data", payload_dw=4),
        _pkt("INDIRECT", 4, 0, (F("vmid", 0, 19, 16), F("priv", 0, 31), _addr("ib_base", 1),
                                F("ib_size", 3, 19, 0, doc="dwords"), _addr("csa_addr", 4)), size=6),
        _pkt("FENCE", 5, 0, fence_flags + (only6(F("llc_policy", 0, 26)), only6(F("cpv", 0, 28)),
                                           _addr("addr", 1), F("data", 3, 31, 0)), size=4),
        _pkt("TRAP", 6, 0, (F("int_context", 1, 27, 0),), size=2),
        _pkt("SEM", 7, 0, (F("write_one", 0, 29), F("signal", 0, 30), F("mailbox", 0, 31), _addr("addr", 1)), size=3),
        _pkt("POLL_REGMEM", 8, 0, (
            only6(F("cache_policy", 0, 22, 20)), only6(F("cpv", 0, 24)), F("hdp_flush", 0, 26),
            F("func", 0, 30, 28, enum=FUNCTION, strict=True), F("mem_poll", 0, 31),
            _addr("addr", 1), F("value", 3, 31, 0), F("mask", 4, 31, 0), F("interval", 5, 15, 0),
            F("retry_count", 5, 27, 16)), size=6),
        _pkt("COND_EXE", 9, 0, (only6(F("cache_policy", 0, 26, 24)), only6(F("cpv", 0, 28)), _addr("addr", 1),
                                F("reference", 3, 31, 0), F("exec_count", 4, 13, 0)), size=5),
        _pkt("ATOMIC", 10, 0, (
            F("loop", 0, 16), F("tmz", 0, 18), only6(F("cache_policy", 0, 22, 20)), only6(F("cpv", 0, 24)),
            F("atomic_op", 0, 31, 25, enum=ATOMIC_OP_NAMES), _addr("addr", 1), F("src_data", 3, 63, 0),
            F("cmp_data", 5, 63, 0), F("loop_interval", 7, 12, 0)), size=8),
        _pkt("CONST_FILL", 11, 0, (
            F("sw", 0, 17, 16), only6(F("cache_policy", 0, 26, 24)), only6(F("cpv", 0, 28)),
            F("fillsize", 0, 31, 30, enum=FILLSIZE), _addr("dst_addr", 1), F("data", 3, 31, 0),
            F("count", 4, count_hi, 0, doc="bytes - 1")), size=5),
        _pkt("TIMESTAMP_SET", 13, 0, (F("init_value", 1, 63, 0),), size=3),
        _pkt("TIMESTAMP_GET", 13, 1, (_addr("addr", 1),), size=3),
        _pkt("TIMESTAMP_GET_GLOBAL", 13, 2, (only6(F("l2_policy", 0, 25, 24)), only6(F("llc_policy", 0, 26)),
                                             only6(F("cpv", 0, 28)), _addr("addr", 1)), size=3),
        _pkt("SRBM_WRITE", 14, 0, (F("byte_en", 0, 31, 28), F("reg_addr", 1, 17, 0),
                                   only5(F("aperture_id", 1, 31, 20)), F("data", 2, 31, 0)), size=3),
    ]
    if v5:
        packets += [
            _pkt("GCR_REQ", 17, 0, _gcr_fields(F("seq", 3, 1, 0), F("range_is_pa", 3, 2)), size=5,
                 split_addresses=_GCR_RANGE,
                 doc="Linux layout of GCR_CONTROL[18:16] in dw3[2:0]"),
            _pkt("GCR_REQ_USER", 17, 1, _gcr_fields(F("seq", 3, 2, 1), F("range_is_pa", 3, 0)), size=5,
                 split_addresses=_GCR_RANGE,
                 doc="ROCr USER_GCR layout: RANGE_IS_PA dw3[0], SEQ dw3[2:1]"),
        ]
    return packets


FORMATS: dict[str, dict[tuple[int, int], PacketFormat]] = {
    v: {(p.opcode, p.sub_op): p for p in _packets(v)} for v in VERSIONS}
BY_NAME: dict[str, dict[str, PacketFormat]] = {v: {p.name: p for p in fmts.values()} for v, fmts in FORMATS.items()}


def version_name(version) -> str:
    """"sdma6" / "sdma5" / "sdma4" from such a name or an SDMA IP version tuple like (6, 0, 0)."""
    if isinstance(version, str):
        if version not in FORMATS:
            raise ValueError(f"unknown SDMA version {version!r}: one of {VERSIONS}")
        return version
    major = version[0]
    if major not in (4, 5, 6):
        raise ValueError(f"SDMA IP {'.'.join(map(str, version))} is not modelled (4.x, 5.x and 6.x are)")
    return f"sdma{major}"


def formats(version="sdma6") -> dict[tuple[int, int], PacketFormat]:
    return FORMATS[version_name(version)]


def format_named(name: str, version="sdma6") -> PacketFormat:
    version = version_name(version)
    try:
        return BY_NAME[version][name]
    except KeyError:
        raise ValueError(f"{version} has no packet {name!r}; it has {sorted(BY_NAME[version])}") from None


# ---------------------------------------------------------------------------------------------------
# sizes

def size_prefix(fmt: PacketFormat) -> int:
    """How many leading dwords must be read to know the packet's size."""
    if fmt.name in _COUNTED:
        return fmt.by_name["count"].dw + 1
    return 1


def packet_size(fmt: PacketFormat, dws) -> int:
    """Size in dwords of a packet of format `fmt` from at least its `size_prefix` dwords."""
    if fmt.name in _COUNTED:
        f = fmt.by_name["count"]
        return _COUNTED[fmt.name] + ((dws[f.dw] >> f.lo) & f.mask)
    return fmt.size


def packet_dwords(dws, version="sdma6") -> int:
    """Size in dwords of the packet starting at `dws[0]` (DecodeError / UnsupportedError when unknown)."""
    fmt = lookup(dws[0], version)
    if len(dws) < size_prefix(fmt):
        raise DecodeError(f"{fmt.name}: {size_prefix(fmt)} dwords are needed to know its size, {len(dws)} given")
    return packet_size(fmt, dws)


def lookup(hdr: int, version="sdma6") -> PacketFormat:
    """The format of the packet whose header is `hdr`.

    DecodeError for an (op, sub_op) pair the generation does not have (its size is unknown, so the
    engine cannot step over it); UnsupportedError for a real packet hcqsim has no layout for.
    """
    version = version_name(version)
    op, sub = hdr & 0xFF, (hdr >> 8) & 0xFF
    fmt = FORMATS[version].get((op, sub))
    if fmt is not None:
        return fmt
    name = packet_name(op, sub, version)
    if name is None:
        base = OPCODES[version].get(op)
        what = f"op {op} (0x{op:02x}{', ' + base if base else ''}) sub_op {sub} (0x{sub:02x})"
        raise DecodeError(f"unknown SDMA packet {what} on {version} (header 0x{hdr:08x}): its size is unknown, "
                          f"the engine cannot step over it")
    raise UnsupportedError(f"SDMA {name} (op {op}, sub_op {sub}) is not emulated (no layout modelled)")


# ---------------------------------------------------------------------------------------------------
# encoding: what runtimes and tests use to build streams


def encode(name: str, version="sdma6", **fields) -> list[int]:
    """A whole packet from field values by name; OP and SUB_OP (and NOP / WRITE counts) are filled in."""
    fmt = format_named(name, version)
    if name == "NOP":
        fields.setdefault("count", len(fields.get("body", [])))
    elif name == "WRITE_UNTILED":
        data = fields.get("data", [])
        if not data:
            raise ValueError("WRITE_UNTILED needs at least one data dword")
        fields.setdefault("count", len(data) - 1)
    return fmt.encode(**fields)


def nop(ndw: int = 1, version="sdma6") -> list[int]:
    """A NOP filling `ndw` dwords: the all-zero dword for 1, a burst NOP (COUNT = ndw - 1) otherwise."""
    if ndw < 1:
        raise ValueError(f"a NOP is at least one dword, got {ndw}")
    return encode("NOP", version, body=[0] * (ndw - 1))


def _check_size(what: str, nbytes: int, version: str) -> None:
    bits = format_named("COPY_LINEAR", version).by_name["count"].width
    if not 1 <= nbytes <= 1 << bits:
        raise ValueError(f"{what} of {nbytes} bytes: one packet carries 1..{1 << bits} bytes on {version} "
                         f"({bits}-bit COUNT); split larger transfers")


def copy_linear(dst: int, src: int, nbytes: int, version="sdma6", **flags) -> list[int]:
    """Copy `nbytes` (any alignment) from `src` to `dst`."""
    version = version_name(version)
    _check_size("COPY_LINEAR", nbytes, version)
    return encode("COPY_LINEAR", version, count=nbytes - 1, src_addr=src, dst_addr=dst, **flags)


def write_untiled(addr: int, dwords, version="sdma6", **flags) -> list[int]:
    """Write the inline `dwords` to the dword-aligned `addr`."""
    return encode("WRITE_UNTILED", version, dst_addr=addr, data=[int(d) & 0xFFFFFFFF for d in dwords], **flags)


def fence(addr: int, value: int, version="sdma6", **flags) -> list[int]:
    """Write the 32-bit `value` to the 4-byte aligned `addr` once earlier packets completed.

    On 5.x/6.x MTYPE defaults to 3 (UC), as drivers emit it (facts 5.2); 4.x has no FENCE flags."""
    version = version_name(version)
    if version != "sdma4":
        flags.setdefault("mtype", 3)
    return encode("FENCE", version, addr=addr, data=value & 0xFFFFFFFF, **flags)


def trap(ctx: int, version="sdma6") -> list[int]:
    """Raise an SDMA trap interrupt carrying the 28-bit context `ctx`."""
    return encode("TRAP", version, int_context=ctx)


def poll_regmem(addr: int, ref: int, mask: int = 0xFFFFFFFF, func: int = 5, *, interval: int = 4,
                retry_count: int = 0xFFF, version="sdma6", **flags) -> list[int]:
    """Stall the queue until `(*addr & mask) func ref` (memory form; func 5 is >=)."""
    return encode("POLL_REGMEM", version, mem_poll=1, func=func, addr=addr, value=ref, mask=mask, interval=interval,
                  retry_count=retry_count, **flags)


def hdp_flush(request_reg: int = 0xD20 + 0x106, done_reg: int = 0xD20 + 0x107, engine_bit: int = 1 << 10,
              version="sdma6") -> list[int]:
    """The HDP-flush handshake form of POLL_REGMEM (amdgpu emit_hdp_flush): register dword offsets of
    GPU_HDP_FLUSH_REQ / _DONE (defaults: NBIO 4.3 on gfx11, segment base 0xD20 included) and this engine's bit (sdma0 = bit 10)."""
    addr = (done_reg << 2) | (request_reg << 2) << 32  # dw1 = DONE offset << 2, dw2 = REQ offset << 2
    return encode("POLL_REGMEM", version, hdp_flush=1, mem_poll=0, func=3, addr=addr, value=engine_bit,
                  mask=engine_bit, interval=10, retry_count=0xFFF)


def cond_exe(addr: int, reference: int, exec_count: int, version="sdma6", **flags) -> list[int]:
    """Execute the next `exec_count` dwords only if the u32 at `addr` equals `reference`."""
    return encode("COND_EXE", version, addr=addr, reference=reference, exec_count=exec_count, **flags)


def atomic(addr: int, op: int, src: int, cmp: int = 0, loop: int = 0, *, loop_interval: int = 0,
           version="sdma6", **flags) -> list[int]:
    """TC_OP atomic `op` on `addr` (e.g. 0x2F = 64-bit add); LOOP repeats a compare-swap until it succeeds."""
    return encode("ATOMIC", version, atomic_op=op, loop=loop, addr=addr, src_data=src & (2 ** 64 - 1),
                  cmp_data=cmp & (2 ** 64 - 1), loop_interval=loop_interval, **flags)


def const_fill(dst: int, value: int, nbytes: int, fillsize: int = 2, version="sdma6", **flags) -> list[int]:
    """Fill `nbytes` at `dst` with elements of `value` (FILLSIZE 0/1/2/3 = 1/2/4/8-byte elements)."""
    version = version_name(version)
    _check_size("CONST_FILL", nbytes, version)
    return encode("CONST_FILL", version, fillsize=fillsize, dst_addr=dst, data=value & 0xFFFFFFFF,
                  count=nbytes - 1, **flags)


def timestamp_set(value: int, version="sdma6") -> list[int]:
    """Set the engine-local 64-bit timestamp counter."""
    return encode("TIMESTAMP_SET", version, init_value=value)


def timestamp_get(addr: int, version="sdma6") -> list[int]:
    """Write the engine-local counter (64 bits) to the 8-byte aligned `addr`."""
    return encode("TIMESTAMP_GET", version, addr=addr)


def timestamp_global(addr: int, version="sdma6", **flags) -> list[int]:
    """Write the global 100 MHz GPU timestamp (64 bits) to the 8-byte aligned `addr`."""
    return encode("TIMESTAMP_GET_GLOBAL", version, addr=addr, **flags)


def srbm_write(reg: int, value: int, byte_en: int = 0xF, version="sdma6") -> list[int]:
    """A register write (privileged: kernel rings only; a user queue rejects it)."""
    return encode("SRBM_WRITE", version, byte_en=byte_en, reg_addr=reg, data=value)


def gcr_fields(control: int) -> dict[str, int]:
    """The 19-bit GCR_CONTROL value split into its named bits (same layout as PM4 GCR_CNTL)."""
    if not 0 <= control < 1 << 19:
        raise ValueError(f"GCR_CONTROL 0x{control:x} does not fit in 19 bits")
    return {n: (control >> lo) & ((1 << (hi - lo + 1)) - 1) for n, hi, lo in GCR_CNTL_FIELDS}


def gcr_req(control: int = 0xC3A1, base: int = 0, limit: int = 0, vmid: int = 0, *, user: bool = False,
            version="sdma6") -> list[int]:
    """Cache-control request over [base, limit] (128-byte granules; 0, 0 = whole cache). The default
    0xC3A1 is what amdgpu emits at the start of each SDMA IB. `user` picks ROCr's USER_GCR sub-op 1."""
    if version_name(version) == "sdma4":
        raise ValueError("SDMA 4.x has no GCR_REQ packet (use a compute-queue RELEASE_MEM before signalling)")
    return encode("GCR_REQ_USER" if user else "GCR_REQ", version, base_va_lo=(base >> 7) & 0x1FFFFFF,
                  base_va_hi=(base >> 32) & 0xFFFF, limit_va_lo=(limit >> 7) & 0x1FFFFFF,
                  limit_va_hi=(limit >> 32) & 0xFFFF, vmid=vmid, **gcr_fields(control))


def indirect(addr: int, ndw: int, version="sdma6", *, vmid: int = 0, csa: int = 0) -> list[int]:
    """Execute the `ndw`-dword IB at the 32-byte aligned `addr`. The packet must end on an 8-dword
    boundary of the ring: put `indirect_padding(ring_pos)` zero dwords in front of it."""
    return encode("INDIRECT", version, vmid=vmid, ib_base=addr, ib_size=ndw, csa_addr=csa)


def indirect_padding(ring_pos: int) -> list[int]:
    """Zero (NOP) dwords to place at byte position `ring_pos` so that a 6-dword INDIRECT written after
    them ends on an 8-dword boundary (amdgpu inserts `(2 - wptr_dw) & 7` NOPs)."""
    return [0] * ((2 - ring_pos // 4) & 7)


# ---------------------------------------------------------------------------------------------------
# decoding and disassembly


def _dwords(data) -> list[int]:
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        return list(struct.unpack(f"<{len(raw) // 4}I", raw[:len(raw) // 4 * 4]))
    return [int(d) & 0xFFFFFFFF for d in data]


def decode_packet(dws, version="sdma6", canon: Callable[[int], int] | None = None,
                  offset: int = 0) -> DecodedPacket:
    """The packet starting at `dws[0]`, from the dwords present; a cut packet keeps only the fields wholly
    present and names the rest (`missing`), never shown as zeros."""
    version = version_name(version)
    dws = _dwords(dws)
    hdr = dws[0]
    op, sub = hdr & 0xFF, (hdr >> 8) & 0xFF
    fmt = FORMATS[version].get((op, sub))
    if fmt is None:
        name = packet_name(op, sub, version)
        label = name if name else f"UNKNOWN op=0x{op:02x} sub_op=0x{sub:02x}"
        note = "layout not modelled" if name else f"not an {version} packet"
        return DecodedPacket(offset, dws[:1], 0, name=name, error=note, text=f"{label} header=0x{hdr:08x} ({note})")
    total = packet_size(fmt, dws) if len(dws) >= size_prefix(fmt) else None
    body = dws[:total] if total else dws
    values, missing = present_fields(fmt, body, total or len(body) + 1)
    text = fmt.format(values, canon=canon, skip=("op", "sub_op"))
    if total is None or len(body) < total:
        lost = f"; missing {', '.join(missing)}" if missing else ""
        text += f" (truncated: {len(body)} of {total or '?'} dwords{lost})"
    return DecodedPacket(offset, body, total or 0, name=fmt.name, fields=values, missing=missing, text=text)


def describe(dws, version="sdma6", canon: Callable[[int], int] | None = None) -> str:
    """One line for one packet's dwords (UMR style); a short packet is shown as far as it goes."""
    return decode_packet(dws, version, canon).text


def decode_stream(data, version="sdma6") -> tuple[list[DecodedPacket], bytes]:
    """(every packet of a stream, trailing bytes short of a dword). A packet without a known size ends the
    stream: it is listed, and every dword after it is a `.long` entry (nothing after it can be located)."""
    version = version_name(version)
    dws, tail = split_dwords(data)
    packets, i = [], 0
    while i < len(dws):
        hdr = dws[i]
        fmt = FORMATS[version].get((hdr & 0xFF, (hdr >> 8) & 0xFF))
        rest = dws[i:]
        try:
            if fmt is None:
                p = decode_packet([hdr], version, offset=4 * i)
                p.text += "; size unknown, listing stops"
                packets.append(p)
                why = "after a packet of unknown size"
                packets += [DecodedPacket(4 * j, [d], 1, error=why, text=raw_line([d], why))
                            for j, d in enumerate(rest[1:], i + 1)]
                break
            if len(rest) < size_prefix(fmt):
                packets.append(decode_packet(rest, version, offset=4 * i))
                break
            n = packet_size(fmt, rest)
            packets.append(decode_packet(rest[:n], version, offset=4 * i))
        except Exception as e:  # a listing shows every dword, decoded or not
            n = 1
            why = f"{type(e).__name__}: {e}"
            packets.append(DecodedPacket(4 * i, [hdr], 1, error=why, text=raw_line([hdr], why)))
        i += n
    return packets, tail


def disassemble(data, version="sdma6") -> str:
    """One line per packet: `offset: NAME field=value ...` (offsets in bytes). A packet without a known
    size ends the listing (nothing after it can be located)."""
    packets, tail = decode_stream(data, version)
    lines = [f"{p.offset:06x}: {p.text}" for p in packets]
    if tail:
        lines.append(trailing_line(len(data) - len(tail), tail))
    return "\n".join(lines)
