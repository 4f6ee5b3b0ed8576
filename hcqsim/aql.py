"""The AQL packet language: HSA user-mode queue packets, the AMD signal and queue blocks they point at.

Layouts (HARDWARE_FACTS 4.6; ROCr hsa.h / amd_hsa_signal.h / amd_hsa_queue.h):

* The ring is an array of 64-byte packets. Read and write indices count packets and never wrap; the
  doorbell carries the index of the **last** packet written (write_dispatch_id - 1), the processor
  reports packets consumed as a u64 into `read_pointer_address` (amd_queue_t.read_dispatch_id).
* hsa_kernel_dispatch_packet_t: header u16 (type[7:0], barrier[8], acquire scope[10:9], release
  scope[12:11]), setup u16 (dimensions[1:0]), workgroup x/y/z u16 @4, grid x/y/z u32 @12 (work-items),
  private/group segment u32 @24/@28, kernel_object u64 @32, kernarg_address u64 @40, completion_signal @56.
* barrier-AND / barrier-OR: dep_signal[5] u64 @8..@40, completion_signal @56.
* AMD vendor packet AMD_AQL_FORMAT_PM4_IB (setup word = 1): ib_jump_cmd[4] @4 (a PM4 INDIRECT_BUFFER),
  dw_cnt_remain @20, completion_signal @56 (ROCr AqlQueue::ExecutePM4).
* amd_signal_t (64 bytes): kind i64 @0, value i64 @8, event_mailbox_ptr u64 @16, event_id u32 @24,
  start_ts @32, end_ts @40.
* amd_queue_t: write_dispatch_id @56, read_dispatch_id @128, read_dispatch_id_field_base_byte_offset u32
  @136 (how the CP finds the amd_queue_t from its rptr address: the queue_ptr SGPR), compute_tmpring_size
  u32 @140, scratch_backing_memory_location u64 @160, queue_properties @180 (bit 3 ENABLE_PROFILING).

This module is the language both sides read: the runtime builds packets with it, the emulator's AQL
packet processor (`hcqsim.engines.aql`) decodes them with it, and both disassemble with `describe`.
"""
from __future__ import annotations

import struct

from . import pm4

PACKET_SIZE = 64
TYPE_VENDOR, TYPE_INVALID, TYPE_KERNEL_DISPATCH, TYPE_BARRIER_AND, TYPE_AGENT_DISPATCH, TYPE_BARRIER_OR = range(6)
TYPE_NAMES = {0: "VENDOR_SPECIFIC", 1: "INVALID", 2: "KERNEL_DISPATCH", 3: "BARRIER_AND", 4: "AGENT_DISPATCH",
              5: "BARRIER_OR"}
SCOPE_NAMES = {0: "none", 1: "agent", 2: "system"}
AMD_AQL_FORMAT_PM4_IB = 1
# header bit positions (hsa_packet_header_t)
HEADER_BARRIER, HEADER_ACQUIRE, HEADER_RELEASE = 8, 9, 11
# amd_signal_t
SIGNAL_VALUE, SIGNAL_MAILBOX, SIGNAL_EVENT_ID = 8, 16, 24
SIGNAL_START_TS, SIGNAL_END_TS = 32, 40
# amd_queue_t
QUEUE_WRITE_DISPATCH_ID, QUEUE_READ_DISPATCH_ID, QUEUE_TMPRING_SIZE, QUEUE_SCRATCH_BASE = 56, 128, 140, 160
QUEUE_PROPERTIES, QUEUE_ENABLE_PROFILING = 180, 1 << 3  # amd_queue_properties_t bit 3
QUEUE_DESCRIPTOR_SIZE = 256
# hsa_kernel_dispatch_packet_t as one struct: header, setup, workgroup xyz, reserved, grid xyz, private,
# group, kernel_object, kernarg_address, reserved, completion_signal
DISPATCH_LAYOUT = "<HHHHHHIIIIIQQQQ"
COMPLETION_SIGNAL = 56
DEP_SIGNALS = 8  # five u64 dependency signals of a barrier packet


def header(ptype: int, *, barrier: int = 0, acquire: int = 0, release: int = 0) -> int:
    """An hsa_packet_header_t value."""
    return ptype | barrier << HEADER_BARRIER | acquire << HEADER_ACQUIRE | release << HEADER_RELEASE


def kernel_dispatch_packet(kernel_object: int, kernarg_address: int, grid: tuple[int, int, int],
                           workgroup: tuple[int, int, int], *, dims: int = 3, private_segment_size: int = 0,
                           group_segment_size: int = 0, completion_signal: int = 0, barrier: int = 1,
                           acquire: int = 2, release: int = 2) -> bytes:
    """hsa_kernel_dispatch_packet_t, header included."""
    return struct.pack(DISPATCH_LAYOUT, header(TYPE_KERNEL_DISPATCH, barrier=barrier, acquire=acquire,
                                               release=release), dims, *workgroup, 0, *grid,
                       private_segment_size, group_segment_size, kernel_object, kernarg_address, 0,
                       completion_signal)


def barrier_packet(deps: list[int], *, any_: bool = False, completion_signal: int = 0, barrier: int = 1) -> bytes:
    """hsa_barrier_and_packet_t / hsa_barrier_or_packet_t (`any_`) with up to five dependency signals."""
    if len(deps) > 5:
        raise ValueError(f"a barrier packet holds at most 5 dependency signals, got {len(deps)}")
    ptype = TYPE_BARRIER_OR if any_ else TYPE_BARRIER_AND
    return struct.pack("<HHI6QQ", header(ptype, barrier=barrier, acquire=2, release=2), 0, 0,
                       *(list(deps) + [0] * (5 - len(deps))), 0, completion_signal)


def pm4_ib_packet(ib_va: int, ib_dwords: int, *, completion_signal: int = 0, barrier: int = 1) -> bytes:
    """The AMD vendor packet that runs a PM4 indirect buffer (amd_aql_pm4_ib, ROCr AqlQueue::ExecutePM4)."""
    jump = pm4.indirect_buffer(ib_va, ib_dwords)
    return struct.pack("<HH4II8IQ", header(TYPE_VENDOR, barrier=barrier, acquire=2, release=2),
                       AMD_AQL_FORMAT_PM4_IB, *jump, 10, *([0] * 8), completion_signal)


def invalid_packet() -> bytes:
    return struct.pack("<H62x", TYPE_INVALID)


def describe(dws: list[int], canon=lambda a: a) -> str:
    """One line for an AQL packet (16 dwords; fewer print what they can)."""
    hdr = dws[0] & 0xFFFF
    ptype = hdr & 0xFF
    name = TYPE_NAMES.get(ptype, f"type {ptype}")
    flags = (f"barrier={hdr >> 8 & 1} acquire={SCOPE_NAMES.get(hdr >> 9 & 3, 3)} "
             f"release={SCOPE_NAMES.get(hdr >> 11 & 3, 3)}")
    if len(dws) < 16:
        return f"AQL {name} {flags} (truncated: {len(dws)} dwords)"
    raw = struct.pack("<16I", *dws)
    sig = struct.unpack_from("<Q", raw, COMPLETION_SIGNAL)[0]
    if ptype == TYPE_KERNEL_DISPATCH:
        _, setup, wx, wy, wz, _, gx, gy, gz, priv, group, kobj, ka, _, _ = struct.unpack(DISPATCH_LAYOUT, raw)
        return (f"AQL KERNEL_DISPATCH {flags} dims={setup & 3} workgroup=({wx},{wy},{wz}) grid=({gx},{gy},{gz}) "
                f"private={priv} group={group} kernel_object=0x{canon(kobj):x} kernarg=0x{canon(ka):x} "
                f"completion_signal=0x{canon(sig) if sig else 0:x}")
    if ptype in (TYPE_BARRIER_AND, TYPE_BARRIER_OR):
        deps = ", ".join(f"0x{canon(d):x}" for d in struct.unpack_from("<5Q", raw, DEP_SIGNALS) if d)
        return f"AQL {name} {flags} dep_signal=[{deps}] completion_signal=0x{canon(sig) if sig else 0:x}"
    if ptype == TYPE_VENDOR:
        return f"AQL VENDOR_SPECIFIC format={dws[0] >> 16} {flags} ib_jump={[hex(d) for d in dws[1:5]]}"
    return f"AQL {name} {flags}"
