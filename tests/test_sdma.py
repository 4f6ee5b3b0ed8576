"""SDMA packets and the SDMA engine, as specifications (HARDWARE_FACTS section 5).

Golden dword vectors are written by hand from the bit tables of HARDWARE_FACTS 5.2, never produced by
the encoder under test. Fixtures `gpu` (gfx1100, SDMA 6.0) and `gfx942` (SDMA 4.4.2) come from conftest.
"""
from __future__ import annotations

import numpy as np
import pytest

from hcqsim import pm4, sdma
from hcqsim.errors import DeadlockError, DecodeError, QueueError
from hcqsim.fields import PacketFormat


def u32(buf, i: int = 0) -> int:
    return int(buf.u32()[i])


def u64(buf, i: int = 0) -> int:
    return int(buf.u64()[i])


def only_fault(gpu):
    assert len(gpu.faults) == 1, [str(f) for f in gpu.faults]
    return gpu.faults[0]


# ---------------------------------------------------------------------------------------------------
# golden vectors, written by hand from the bit tables


def test_golden_copy_linear_sdma6():
    # dw0 OP 1; dw1 COUNT = 0x1000 - 1; dw2 no swap/policy; dw3/4 src lo/hi; dw5/6 dst lo/hi
    assert sdma.copy_linear(0x2_0000_0040, 0x1_2345_6780, 0x1000) == [
        0x00000001, 0x00000FFF, 0x00000000, 0x23456780, 0x00000001, 0x00000040, 0x00000002]


def test_golden_fence_sdma6_is_written_uncached():
    # dw0 OP 5 | MTYPE 3 (UC) << 16
    assert sdma.fence(0x7000_1000, 0xDEADBEEF) == [0x00030005, 0x70001000, 0x00000000, 0xDEADBEEF]


def test_golden_fence_sdma4_header_is_plain_op():
    assert sdma.fence(0x7000_1000, 0xDEADBEEF, version="sdma4") == [0x00000005, 0x70001000, 0x00000000, 0xDEADBEEF]


def test_golden_poll_regmem_memory_greater_equal():
    # dw0 OP 8 | FUNC 5 << 28 | MEM_POLL << 31; dw5 RETRY 0xFFF << 16 | INTERVAL 4
    assert sdma.poll_regmem(0x1234_5678_9ABC, 7) == [
        0xD0000008, 0x56789ABC, 0x00001234, 0x00000007, 0xFFFFFFFF, 0x0FFF0004]


def test_golden_poll_regmem_hdp_flush_form():
    # dw0 OP 8 | HDP_FLUSH << 26 | FUNC 3 << 28; dw1 DONE (0xD20 + 0x107) << 2; dw2 REQ (0xD20 + 0x106) << 2;
    # bit 10 = sdma0
    assert sdma.hdp_flush() == [0x34000008, 0x0000389C, 0x00003898, 0x00000400, 0x00000400, 0x0FFF000A]


def test_golden_trap():
    assert sdma.trap(0x0ABCDEF) == [0x00000006, 0x00ABCDEF]


def test_golden_timestamps():
    assert sdma.timestamp_set(0x1_0000_0002) == [0x0000000D, 0x00000002, 0x00000001]
    assert sdma.timestamp_get(0x8) == [0x0000010D, 0x00000008, 0x00000000]
    assert sdma.timestamp_global(0x4_0000_8000) == [0x0000020D, 0x00008000, 0x00000004]


def test_golden_gcr_req_amdgpu_whole_cache_flush():
    # dw2[31:16] = GCR_CONTROL[15:0] = 0xC3A1; base = limit = 0
    assert sdma.gcr_req(0xC3A1) == [0x00000011, 0x00000000, 0xC3A10000, 0x00000000, 0x00000000]


def test_golden_gcr_req_range_and_seq_linux_layout():
    # base 0x1234_5678_9A80 -> dw1 [31:7] 0x56789A80, dw2 [15:0] 0x1234; GL2_WB (bit 15) | SEQ 1 (bit 16):
    # dw2 high half 0x8000, dw3 bit 0 (SEQ = dw3[1:0]); limit 0x1234_5678_FF80 -> dw3 0x5678FF80, dw4 0x1234 | VMID 3
    assert sdma.gcr_req(0x18000, base=0x1234_5678_9A80, limit=0x1234_5678_FF80, vmid=3) == [
        0x00000011, 0x56789A80, 0x80001234, 0x5678FF81, 0x03001234]


def test_golden_gcr_req_user_rocr_layout_moves_seq_and_range_is_pa():
    # SUB_OP 1; RANGE_IS_PA (GCR bit 18) -> dw3 bit 0, SEQ 1 -> dw3[2:1] = 1 -> bit 1
    assert sdma.gcr_req((1 << 18) | (1 << 16), user=True) == [0x00000111, 0, 0, 0x00000003, 0]
    # the Linux layout puts the same bits at dw3[2] and dw3[1:0]
    assert sdma.gcr_req((1 << 18) | (1 << 16)) == [0x00000011, 0, 0, 0x00000005, 0]


def test_golden_atomic_add64_decrement():
    # dw0 OP 10 | ATOMIC_OP 0x2F << 25 = 0x5E00000A; SRC_DATA = -1 (64-bit)
    assert sdma.atomic(0x1000, 0x2F, -1) == [0x5E00000A, 0x1000, 0, 0xFFFFFFFF, 0xFFFFFFFF, 0, 0, 0]


def test_golden_atomic_cmpswap_loop():
    # ATOMIC_OP 0x08 << 25 = 0x10000000, LOOP << 16; CMP_DATA in dw5/6; LOOP_INTERVAL dw7
    assert sdma.atomic(0x1_0000_2000, 0x08, 5, cmp=3, loop=1, loop_interval=0x10) == [
        0x1001000A, 0x00002000, 0x00000001, 5, 0, 3, 0, 0x10]


def test_golden_nops():
    assert sdma.nop(1) == [0x00000000]
    assert sdma.nop(4) == [0x00030000, 0, 0, 0]  # COUNT[29:16] = 3 extra dwords


def test_golden_write_untiled_two_dwords():
    # dw3 COUNT = N - 1 = 1
    assert sdma.write_untiled(0x1_0000_1000, [0x11, 0x22]) == [
        0x00000002, 0x00001000, 0x00000001, 0x00000001, 0x00000011, 0x00000022]


@pytest.mark.parametrize("fillsize,dw0", [(0, 0x0000000B), (1, 0x4000000B), (2, 0x8000000B), (3, 0xC000000B)])
def test_golden_const_fill_fillsize_bits(fillsize, dw0):
    assert sdma.const_fill(0x2000, 0xA5A5A5A5, 256, fillsize=fillsize) == [dw0, 0x2000, 0, 0xA5A5A5A5, 0xFF]


def test_golden_indirect_and_cond_exe_and_srbm_write():
    assert sdma.indirect(0x10_0000, 16) == [0x00000004, 0x00100000, 0, 16, 0, 0]
    assert sdma.cond_exe(0x3000, 1, 4) == [0x00000009, 0x3000, 0, 1, 4]
    assert sdma.srbm_write(0x1234, 0x55) == [0xF000000E, 0x1234, 0x55]  # BYTE_EN 0xF << 28


def test_hand_written_sem_decodes_to_its_fields():
    fmt = sdma.format_named("SEM")
    v = fmt.decode([0x40000007, 0x00001000, 0x00000002])  # SIGNAL bit 30
    assert (v["signal"], v["mailbox"], v["write_one"], v["addr"]) == (1, 0, 0, 0x2_0000_1000)


def test_hand_written_copy_count_width_differs_by_version():
    dws = [0x00000001, 0xFFFFFFFF, 0, 0, 0, 0, 0]
    assert sdma.format_named("COPY_LINEAR", "sdma6").decode(dws)["count"] == 0x3FFFFFFF  # [29:0]
    assert sdma.format_named("COPY_LINEAR", "sdma4").decode(dws)["count"] == 0x3FFFFF  # [21:0]


# ---------------------------------------------------------------------------------------------------
# the tables themselves


def _sample(f, i: int) -> int:
    if f.strict and f.enum:
        return max(f.enum)
    return (0x9E3779B97F4A7C15 >> (i % 11)) & f.mask or 1


ALL_FORMATS = [(v, name) for v in sdma.VERSIONS for name in sorted(sdma.BY_NAME[v])]


@pytest.mark.parametrize("version,name", ALL_FORMATS)
def test_every_format_round_trips_through_encode_and_decode(version, name):
    fmt = sdma.format_named(name, version)
    values = {f.name: _sample(f, i) for i, f in enumerate(fmt.fields) if f.name not in ("op", "sub_op")}
    if fmt.payload:
        values.pop("count")
        values[fmt.payload] = [0xCAFE0001, 0xCAFE0002, 0xCAFE0003]
    dws = sdma.encode(name, version, **values)
    assert len(dws) == sdma.packet_size(fmt, dws)
    decoded = fmt.decode(dws)
    assert (decoded.pop("op"), decoded.pop("sub_op")) == (fmt.opcode, fmt.sub_op)
    if fmt.payload:
        decoded.pop("count")
    assert decoded == values


@pytest.mark.parametrize("version,name", ALL_FORMATS)
def test_no_two_fields_of_a_packet_share_a_bit(version, name):
    fmt: PacketFormat = sdma.format_named(name, version)
    owner: dict[tuple[int, int], str] = {}
    for f in fmt.fields:
        for bit in range(f.lo, f.hi + 1):
            key = (f.dw + bit // 32, bit % 32)
            assert key not in owner, f"{name}: {f.name} overlaps {owner[key]} at dw{key[0]} bit {key[1]}"
            owner[key] = f.name
        if fmt.size is not None:
            assert f.dw + f.hi // 32 < fmt.size, f"{name}.{f.name} lies outside the {fmt.size}-dword packet"


def test_cache_policy_valid_bits_exist_only_on_sdma6():
    for name in ("COPY_LINEAR", "WRITE_UNTILED", "FENCE", "POLL_REGMEM", "COND_EXE", "ATOMIC", "CONST_FILL",
                 "TIMESTAMP_GET_GLOBAL"):
        assert "cpv" in sdma.format_named(name, "sdma6").by_name, name
        assert "cpv" not in sdma.format_named(name, "sdma5").by_name, name
        assert "cpv" not in sdma.format_named(name, "sdma4").by_name, name


def test_fence_has_no_header_flags_on_sdma4():
    names = [f.name for f in sdma.format_named("FENCE", "sdma4").fields]
    assert names == ["op", "sub_op", "addr", "data"]
    assert "mtype" in sdma.format_named("FENCE", "sdma5").by_name


def test_gcr_req_exists_only_on_sdma5_and_sdma6():
    assert "GCR_REQ" in sdma.BY_NAME["sdma6"] and "GCR_REQ" in sdma.BY_NAME["sdma5"]
    assert "GCR_REQ" not in sdma.BY_NAME["sdma4"]
    with pytest.raises(ValueError):
        sdma.gcr_req(version="sdma4")


def test_version_follows_the_target_sdma_ip(gpu, gfx942):
    assert gpu.sdma_queue().version == "sdma6"
    assert gfx942.sdma_queue().version == "sdma4"


def test_copy_builder_refuses_sizes_beyond_the_count_field():
    assert sdma.copy_linear(0, 0, 1 << 22, version="sdma4")[1] == 0x3FFFFF
    with pytest.raises(ValueError, match="split"):
        sdma.copy_linear(0, 0, (1 << 22) + 1, version="sdma4")
    assert sdma.copy_linear(0, 0, (1 << 22) + 1)[1] == 0x400000
    with pytest.raises(ValueError):
        sdma.copy_linear(0, 0, 0)


def test_unknown_op_and_sub_op_are_decode_errors_naming_both():
    with pytest.raises(DecodeError, match=r"op 3 .*sub_op 0"):
        sdma.lookup(0x00000003)
    with pytest.raises(DecodeError, match=r"op 1 .*COPY.*sub_op 2"):
        sdma.lookup(0x00000201)
    with pytest.raises(DecodeError, match="op 17"):
        sdma.lookup(0x00000011, "sdma4")


def test_indirect_padding_makes_the_packet_end_on_8_dwords():
    for pos in range(0, 128, 4):
        pad = sdma.indirect_padding(pos)
        assert (pos // 4 + len(pad) + 6) % 8 == 0 and len(pad) < 8


# ---------------------------------------------------------------------------------------------------
# disassembly


def test_disassemble_lists_each_packet_at_its_byte_offset():
    text = sdma.disassemble(sdma.nop(3) + sdma.fence(0x100, 7) + sdma.trap(5))
    lines = text.splitlines()
    assert lines[0].startswith("000000: NOP count=2")
    assert lines[1].startswith("00000c: FENCE") and "addr=0x100" in lines[1] and "data=7" in lines[1]
    assert lines[2].startswith("00001c: TRAP int_context=5")


def test_disassemble_accepts_bytes_and_versions():
    raw = b"".join(d.to_bytes(4, "little") for d in [0x00000005, 0x40, 0, 9])
    assert sdma.disassemble(raw, version="sdma4") == "000000: FENCE addr=0x40 data=9"


def test_disassemble_stops_at_a_packet_of_unknown_size():
    text = sdma.disassemble(sdma.trap(1) + [0x00000003] + sdma.trap(2))
    lines = text.splitlines()
    assert len(lines) == 4
    assert "UNKNOWN op=0x03 sub_op=0x00" in lines[1] and "listing stops" in lines[1]
    assert all(".long" in line and "after a packet of unknown size" in line for line in lines[2:])  # raw, not lost


def test_disassemble_names_packets_without_a_layout():
    assert sdma.describe([0x0000010C]).startswith("PTEPDE_COPY")
    assert sdma.describe([0x0000000F]).startswith("PRE_EXE")
    assert sdma.describe([0x00000020]).startswith("DUMMY_TRAP")


def test_disassemble_marks_a_truncated_packet():
    assert "truncated: 3 of 7 dwords" in sdma.disassemble(sdma.copy_linear(0x10, 0x20, 4)[:3])


# ---------------------------------------------------------------------------------------------------
# pointers


def test_wptr_and_rptr_are_unwrapped_byte_counts(gpu):
    q = gpu.sdma_queue(ring_size=1024)
    sig = gpu.alloc(4096)
    for i in range(100):
        q.submit(sdma.fence(sig.va, i))
    assert q.wptr == q.rptr == 1600
    assert int(np.frombuffer(q.owned_buffers[1].view[:8].tobytes(), np.uint64)[0]) == 1600  # u64 at rptr_va


def test_all_zero_dwords_are_one_dword_nops(gpu):
    q, sig = gpu.sdma_queue(), gpu.alloc(4096)
    q.submit([0, 0, 0] + sdma.fence(sig.va, 3))
    assert u32(sig) == 3 and not gpu.faults


def test_burst_nop_skips_its_count_dwords_unparsed(gpu):
    q, sig = gpu.sdma_queue(), gpu.alloc(4096)
    q.submit([0x00020000, 0x00000003, 0xFFFFFFFF] + sdma.fence(sig.va, 4))  # body holds an invalid op
    assert u32(sig) == 4 and not gpu.faults


# ---------------------------------------------------------------------------------------------------
# COPY_LINEAR


@pytest.mark.parametrize("src_off,dst_off,n", [(0, 0, 1), (1, 3, 7), (3, 5, 4093), (2, 0, 65), (7, 1, 8191)])
def test_copy_linear_moves_any_byte_count_at_any_alignment(gpu, src_off, dst_off, n):
    q = gpu.sdma_queue()
    src, dst = gpu.alloc(16384), gpu.alloc(16384)
    src.view[:] = np.random.default_rng(n).integers(0, 256, 16384, dtype=np.uint8)
    dst.view[:] = 0xEE
    q.submit(sdma.copy_linear(dst.va + dst_off, src.va + src_off, n))
    assert not gpu.faults
    assert bytes(dst.view[dst_off:dst_off + n]) == bytes(src.view[src_off:src_off + n])
    assert set(dst.view[:dst_off]) <= {0xEE} and set(dst.view[dst_off + n:]) == {0xEE}


def test_copy_past_a_mapping_is_a_vm_fault_naming_address_and_ring_offset(gpu):
    q, sig = gpu.sdma_queue(), gpu.alloc(4096)
    src = gpu.alloc(4096)
    hole = gpu.alloc(4096)
    dst = gpu.alloc(8192)
    gpu.free(hole)  # the page after src is now unmapped (and nothing is allocated after this)
    dst.view[:] = 0xEE
    q.submit(sdma.fence(sig.va, 1) + sdma.copy_linear(dst.va, src.va + 4000, 200) + sdma.fence(sig.va, 2))
    f = only_fault(gpu)
    assert f.is_vm_fault and f.address == src.va + 4000 and f.size == 200 and f.access == "read"
    assert (f.engine, f.queue, f.ring_offset, f.header) == ("sdma", q.name, 16, 0x00000001)
    assert f.packet.startswith("COPY_LINEAR")
    assert set(dst.view) == {0xEE}  # nothing was written
    assert u32(sig) == 1  # the queue stopped at the copy


def _raw_copy(dst: int, src: int, count: int) -> list[int]:
    return [0x00000001, count, 0, src & 0xFFFFFFFF, src >> 32, dst & 0xFFFFFFFF, dst >> 32]


def test_copy_count_beyond_30_bits_is_rejected_on_gfx942(gfx942):
    q = gfx942.sdma_queue()
    src, dst = gfx942.alloc(4096), gfx942.alloc(4096)
    q.submit(_raw_copy(dst.va, src.va, 0x40000000))  # 1 GiB + 1 bytes: checked before any byte moves
    f = only_fault(gfx942)
    assert f.kind == "decode error" and "30-bit" in f.message and str(1 << 30) in f.message
    assert f.header == 0x00000001 and f.ring_offset == 0


def test_one_copy_beyond_4_mib_runs_on_gfx942_as_rocr_issues_it(gfx942):
    # ROCr 6.1 (CreateBlitSdma: 2^30 - 1 bytes per COPY_LINEAR on gfx9.4+) copies 64 MiB of pageable host memory
    # in one packet; the engine takes the wider COUNT for COPY_LINEAR (CONST_FILL stays at 22 bits)
    q = gfx942.sdma_queue()
    n = (8 << 20) + 12
    src, dst = gfx942.alloc(n), gfx942.alloc(n)
    src.view[:] = np.arange(n, dtype=np.uint64).astype(np.uint8)
    q.submit(_raw_copy(dst.va, src.va, n - 1))
    assert gfx942.faults == [] and np.array_equal(dst.view, src.view)


def test_copy_of_exactly_4_mib_is_accepted_on_gfx942(gfx942):
    q = gfx942.sdma_queue()
    src, dst = gfx942.alloc(4 << 20), gfx942.alloc(4 << 20)
    src.view[-1] = 0x5A
    q.submit(sdma.copy_linear(dst.va, src.va, 4 << 20, version="sdma4"))
    assert not gfx942.faults and dst.view[-1] == 0x5A


def test_copy_count_beyond_22_bits_is_accepted_on_gfx1100(gpu):
    q = gpu.sdma_queue()
    src, dst = gpu.alloc((4 << 20) + 4096), gpu.alloc((4 << 20) + 4096)
    src.view[(4 << 20)] = 0x77
    q.submit(_raw_copy(dst.va, src.va, 0x400000))
    assert not gpu.faults and dst.view[4 << 20] == 0x77


def test_copy_count_beyond_30_bits_is_rejected_on_gfx1100(gpu):
    q = gpu.sdma_queue()
    buf = gpu.alloc(4096)
    q.submit(_raw_copy(buf.va, buf.va, 0x40000000))
    f = only_fault(gpu)
    assert "30-bit" in f.message and f.kind == "decode error"


def test_copy_advances_the_clock_by_the_cost_model(gpu):
    q, src, dst = gpu.sdma_queue(), gpu.alloc(65536), gpu.alloc(65536)
    before = gpu.clock
    q.submit(sdma.copy_linear(dst.va, src.va, 65536))
    assert gpu.clock - before == gpu.cost.copy(65536)


# ---------------------------------------------------------------------------------------------------
# WRITE_UNTILED, FENCE, TRAP


def test_write_untiled_writes_count_plus_one_dwords(gpu):
    q, buf = gpu.sdma_queue(), gpu.alloc(4096)
    buf.view[:] = 0xEE
    q.submit([0x00000002, buf.va & 0xFFFFFFFF, buf.va >> 32, 0x00000002, 0x11, 0x22, 0x33])  # COUNT 2 -> 3
    assert list(buf.u32()[:4]) == [0x11, 0x22, 0x33, 0xEEEEEEEE]


def test_fence_writes_exactly_32_bits(gpu):
    q, buf = gpu.sdma_queue(), gpu.alloc(4096)
    buf.view[:] = 0xEE
    q.submit(sdma.fence(buf.va + 4, 0x12345678))
    assert list(buf.u32()[:3]) == [0xEEEEEEEE, 0x12345678, 0xEEEEEEEE]


def test_fence_to_a_misaligned_address_is_a_decode_error(gpu):
    q, buf = gpu.sdma_queue(), gpu.alloc(4096)
    q.submit(sdma.fence(buf.va + 2, 1))
    f = only_fault(gpu)
    assert f.kind == "decode error" and "4-byte aligned" in f.message and f.header == 0x00030005


def test_trap_raises_an_sdma_interrupt_with_the_28_bit_context(gpu):
    q = gpu.sdma_queue()
    q.submit([0x00000006, 0xF1234567])  # bits [31:28] are not part of INT_CONTEXT
    traps = [i for i in gpu.interrupts if i.source == "sdma_trap"]
    assert [(i.ctxid, i.queue) for i in traps] == [(0x1234567, q.name)]


# ---------------------------------------------------------------------------------------------------
# POLL_REGMEM


POLL_CASES = [  # (FUNC, memory value, reference, mask, condition holds)
    (0, 5, 9, 0xFFFFFFFF, True),
    (1, 4, 5, 0xFFFFFFFF, True), (1, 5, 5, 0xFFFFFFFF, False),
    (2, 5, 5, 0xFFFFFFFF, True), (2, 6, 5, 0xFFFFFFFF, False),
    (3, 5, 5, 0xFFFFFFFF, True), (3, 4, 5, 0xFFFFFFFF, False),
    (4, 4, 5, 0xFFFFFFFF, True), (4, 5, 5, 0xFFFFFFFF, False),
    (5, 5, 5, 0xFFFFFFFF, True), (5, 4, 5, 0xFFFFFFFF, False),
    (6, 6, 5, 0xFFFFFFFF, True), (6, 5, 5, 0xFFFFFFFF, False),
    (3, 0xABCD0005, 5, 0x0000FFFF, True), (3, 0xABCD0005, 5, 0xFFFFFFFF, False),  # mask applies first
    (5, 0x80000000, 1, 0xFFFFFFFF, True),  # unsigned compare
]


@pytest.mark.parametrize("func,value,ref,mask,holds", POLL_CASES)
def test_poll_regmem_compares_masked_memory_with_each_function(gpu, func, value, ref, mask, holds):
    q, mem, flag = gpu.sdma_queue(), gpu.alloc(4096), gpu.alloc(4096)
    mem.u32()[0] = value
    q.submit(sdma.poll_regmem(mem.va, ref, mask=mask, func=func) + sdma.fence(flag.va, 1))
    assert not gpu.faults
    assert (u32(flag) == 1) is holds
    assert (q.wait is None) is holds


def test_blocked_poll_is_released_by_a_cpu_write_and_run(gpu):
    q, sem, flag = gpu.sdma_queue(), gpu.alloc(4096), gpu.alloc(4096)
    q.submit(sdma.poll_regmem(sem.va, 5) + sdma.fence(flag.va, 1))
    assert u32(flag) == 0 and q.wait is not None
    gpu.run()
    assert u32(flag) == 0  # nothing changed, still waiting
    sem.u32()[0] = 5
    gpu.run()
    assert u32(flag) == 1 and q.wait is None and q.rptr == q.wptr


def test_blocked_poll_is_released_by_a_pm4_queue_writing_the_value(gpu):
    sq, cq = gpu.sdma_queue(), gpu.compute_queue()
    sem, flag = gpu.alloc(4096), gpu.alloc(4096)
    sq.submit(sdma.poll_regmem(sem.va, 1) + sdma.fence(flag.va, 0xAB))
    assert u32(flag) == 0
    cq.submit(pm4.write_data(sem.va, [1]))
    assert u32(flag) == 0xAB and not gpu.faults


def test_impossible_poll_is_a_deadlock_naming_the_sdma_queue(gpu):
    q, sem, flag = gpu.sdma_queue(), gpu.alloc(4096), gpu.alloc(4096)
    q.submit(sdma.poll_regmem(sem.va, 1) + sdma.fence(flag.va, 1))
    with pytest.raises(DeadlockError) as e:
        gpu.run_until(lambda: u32(flag) == 1, "the SDMA fence")
    assert q.name in str(e.value) and "POLL_REGMEM" in str(e.value)
    assert [b.queue for b in e.value.blocked] == [q.name]
    assert e.value.blocked[0].address == sem.va and e.value.blocked[0].current == 0


def test_hdp_flush_poll_completes_at_once(gpu):
    q, flag = gpu.sdma_queue(), gpu.alloc(4096)
    q.submit(sdma.hdp_flush() + sdma.fence(flag.va, 1))
    assert u32(flag) == 1 and not gpu.faults


def test_register_poll_is_unsupported(gpu):
    q = gpu.sdma_queue()
    q.submit([0x30000008, 0x1000, 0, 1, 1, 0x0FFF0004])  # FUNC 3, MEM_POLL 0, HDP_FLUSH 0
    f = only_fault(gpu)
    assert f.kind == "unsupported" and "register" in f.message


def test_poll_regmem_sub_ops_other_than_0_are_unsupported(gpu):
    q = gpu.sdma_queue()
    q.submit([0x00000108, 0, 0, 0])  # POLL_REG_WRITE_MEM
    f = only_fault(gpu)
    assert f.kind == "unsupported" and "POLL_REGMEM_REG_WRITE_MEM" in f.message


def test_poll_regmem_reserved_function_7_is_a_decode_error(gpu):
    q, mem = gpu.sdma_queue(), gpu.alloc(4096)
    q.submit([0xF0000008, mem.va & 0xFFFFFFFF, mem.va >> 32, 0, 0xFFFFFFFF, 0x0FFF0004])
    assert only_fault(gpu).kind == "decode error"


# ---------------------------------------------------------------------------------------------------
# COND_EXE


def test_cond_exe_executes_the_next_dwords_when_memory_equals_reference(gpu):
    q, cond, a, b = gpu.sdma_queue(), gpu.alloc(4096), gpu.alloc(4096), gpu.alloc(4096)
    cond.u32()[0] = 1
    q.submit(sdma.cond_exe(cond.va, 1, 4) + sdma.fence(a.va, 1) + sdma.fence(b.va, 2))
    assert (u32(a), u32(b)) == (1, 2)


def test_cond_exe_skips_the_next_dwords_otherwise(gpu):
    q, cond, a, b = gpu.sdma_queue(), gpu.alloc(4096), gpu.alloc(4096), gpu.alloc(4096)
    q.submit(sdma.cond_exe(cond.va, 1, 4) + sdma.fence(a.va, 1) + sdma.fence(b.va, 2))
    assert (u32(a), u32(b)) == (0, 2) and not gpu.faults


# ---------------------------------------------------------------------------------------------------
# ATOMIC


def test_atomic_add64_carries_into_the_high_dword(gpu):
    q, buf = gpu.sdma_queue(), gpu.alloc(4096)
    buf.u64()[0] = 0xFFFFFFFF
    q.submit(sdma.atomic(buf.va, 0x2F, 1))  # ADD_RTN_64
    assert u64(buf) == 0x1_0000_0000


def test_atomic_add64_of_minus_one_decrements_a_signal(gpu):
    q, buf = gpu.sdma_queue(), gpu.alloc(4096)
    buf.u64()[0] = 5
    q.submit(sdma.atomic(buf.va, 0x2F, -1))
    assert u64(buf) == 4


def test_atomic_cmpswap_swaps_only_on_match(gpu):
    q, buf = gpu.sdma_queue(), gpu.alloc(4096)
    buf.u32()[0], buf.u32()[1] = 3, 4
    q.submit(sdma.atomic(buf.va, 0x08, 9, cmp=3) + sdma.atomic(buf.va + 4, 0x08, 9, cmp=3))
    assert list(buf.u32()[:2]) == [9, 4]


def test_atomic_cmpswap_loop_waits_until_it_succeeds(gpu):
    q, buf, flag = gpu.sdma_queue(), gpu.alloc(4096), gpu.alloc(4096)
    q.submit(sdma.atomic(buf.va, 0x08, 7, cmp=1, loop=1) + sdma.fence(flag.va, 1))
    assert q.wait is not None and u32(flag) == 0 and u32(buf) == 0
    buf.u32()[0] = 1
    gpu.run()
    assert u32(buf) == 7 and u32(flag) == 1


def test_atomic_64_bit_on_a_misaligned_address_is_a_decode_error(gpu):
    q, buf = gpu.sdma_queue(), gpu.alloc(4096)
    q.submit(sdma.atomic(buf.va + 4, 0x2F, 1))
    assert "8-byte aligned" in only_fault(gpu).message


def test_atomic_with_an_unknown_op_is_unsupported(gpu):
    q, buf = gpu.sdma_queue(), gpu.alloc(4096)
    q.submit(sdma.atomic(buf.va, 0x05, 1))
    assert only_fault(gpu).kind == "unsupported"


# ---------------------------------------------------------------------------------------------------
# CONST_FILL


@pytest.mark.parametrize("fillsize,pattern", [
    (0, bytes([0x78])),
    (1, bytes([0x78, 0x56])),
    (2, bytes([0x78, 0x56, 0x34, 0x12])),
    (3, bytes([0x78, 0x56, 0x34, 0x12]) * 2),  # [uncertain] the 8-byte element repeats the 32-bit DATA
])
def test_const_fill_repeats_an_element_of_fillsize(gpu, fillsize, pattern):
    q, buf = gpu.sdma_queue(), gpu.alloc(4096)
    buf.view[:] = 0xEE
    q.submit(sdma.const_fill(buf.va, 0x12345678, 13, fillsize=fillsize))
    assert bytes(buf.view[:13]) == (pattern * 13)[:13]
    assert buf.view[13] == 0xEE


def test_const_fill_count_beyond_22_bits_is_rejected_on_gfx942(gfx942):
    q, buf = gfx942.sdma_queue(), gfx942.alloc(4096)
    q.submit([0x8000000B, buf.va & 0xFFFFFFFF, buf.va >> 32, 0, 0x400000])
    assert "22-bit" in only_fault(gfx942).message


# ---------------------------------------------------------------------------------------------------
# TIMESTAMP


def test_global_timestamps_are_monotonic_and_follow_the_gpu_clock(gpu):
    q, a, b = gpu.sdma_queue(), gpu.alloc(4096), gpu.alloc(4096)
    q.submit(sdma.timestamp_global(a.va) + sdma.copy_linear(a.va + 64, a.va + 128, 2048)
             + sdma.timestamp_global(b.va))
    assert 0 < u64(a) < u64(b) <= gpu.clock


def test_local_timestamp_counts_on_from_the_set_value(gpu):
    q, a, b = gpu.sdma_queue(), gpu.alloc(4096), gpu.alloc(4096)
    q.submit(sdma.timestamp_set(1_000_000) + sdma.timestamp_get(a.va) + sdma.nop(4) + sdma.timestamp_get(b.va))
    assert 1_000_000 < u64(a) < u64(b) < 1_000_100


def test_timestamp_to_a_misaligned_address_is_a_decode_error(gpu):
    q, a = gpu.sdma_queue(), gpu.alloc(4096)
    q.submit(sdma.timestamp_global(a.va + 4))
    assert "8-byte aligned" in only_fault(gpu).message


# ---------------------------------------------------------------------------------------------------
# GCR_REQ, SRBM_WRITE, SEM


def test_gcr_req_is_accepted_on_gfx1100(gpu):
    q, flag = gpu.sdma_queue(), gpu.alloc(4096)
    q.submit(sdma.gcr_req() + sdma.gcr_req(user=True) + sdma.fence(flag.va, 1))
    assert u32(flag) == 1 and not gpu.faults


def test_gcr_req_is_an_unknown_op_on_gfx942(gfx942):
    q, flag = gfx942.sdma_queue(), gfx942.alloc(4096)
    q.submit([0x00000011, 0, 0xC3A10000, 0, 0] + sdma.fence(flag.va, 1, version="sdma4"))
    f = only_fault(gfx942)
    assert f.kind == "decode error" and "op 17" in f.message and f.header == 0x00000011
    assert u32(flag) == 0


def test_srbm_write_is_rejected_as_privileged(gpu):
    q = gpu.sdma_queue()
    q.submit(sdma.srbm_write(0x1234, 1))
    f = only_fault(gpu)
    assert "privileged" in f.message and f.header == 0xF000000E


def test_sem_decodes_but_does_not_execute(gpu):
    q = gpu.sdma_queue()
    q.submit([0x40000007, 0x1000, 0])
    f = only_fault(gpu)
    assert f.kind == "unsupported" and f.packet.startswith("SEM")


# ---------------------------------------------------------------------------------------------------
# INDIRECT


def _ib(gpu, dwords):
    ib = gpu.alloc(4096)
    ib.u32()[:len(dwords)] = dwords
    return ib


def test_indirect_executes_its_ib_then_returns_to_the_ring(gpu):
    q, sig = gpu.sdma_queue(), gpu.alloc(4096)
    ib = _ib(gpu, sdma.fence(sig.va, 1) + sdma.fence(sig.va + 4, 2))  # 8 dwords
    q.submit(sdma.indirect_padding(0) + sdma.indirect(ib.va, 8) + sdma.fence(sig.va + 4, 3))
    assert not gpu.faults
    assert list(sig.u32()[:2]) == [1, 3]  # the ring's fence ran after the IB's


def test_indirect_not_ending_on_an_8_dword_boundary_is_a_decode_error(gpu):
    q, sig = gpu.sdma_queue(), gpu.alloc(4096)
    ib = _ib(gpu, sdma.fence(sig.va, 1) + sdma.nop(4))
    q.submit(sdma.indirect(ib.va, 8))  # dwords 0..5: the next dword is 6
    f = only_fault(gpu)
    assert "8-dword boundary" in f.message and f.ring_offset == 0 and u32(sig) == 0


def test_indirect_base_must_be_32_byte_aligned(gpu):
    q = gpu.sdma_queue()
    ib = _ib(gpu, [0] * 16)
    q.submit(sdma.indirect_padding(0) + sdma.indirect(ib.va + 16, 8))
    assert "32-byte aligned" in only_fault(gpu).message


def test_indirect_inside_an_ib_is_a_decode_error(gpu):
    q, sig = gpu.sdma_queue(), gpu.alloc(4096)
    inner = _ib(gpu, sdma.fence(sig.va, 1) + sdma.nop(4))
    outer = _ib(gpu, [0, 0] + sdma.indirect(inner.va, 8))
    q.submit(sdma.indirect_padding(0) + sdma.indirect(outer.va, 8))
    f = only_fault(gpu)
    assert "do not nest" in f.message and f.where.startswith("IB at") and f.ring_offset == 8
    assert u32(sig) == 0


def test_indirect_ib_packets_may_not_run_past_the_ib_end(gpu):
    q, sig = gpu.sdma_queue(), gpu.alloc(4096)
    ib = _ib(gpu, sdma.fence(sig.va, 1))
    q.submit(sdma.indirect_padding(0) + sdma.indirect(ib.va, 2))
    assert "end of the IB" in only_fault(gpu).message


# ---------------------------------------------------------------------------------------------------
# ring wrap-around


def test_many_submits_wrap_a_1_kib_ring(gpu):
    q, sig, src, dst = gpu.sdma_queue(ring_size=1024), gpu.alloc(4096), gpu.alloc(4096), gpu.alloc(4096)
    src.view[:] = np.arange(4096, dtype=np.uint32).astype(np.uint8)
    for i in range(150):
        q.submit(sdma.copy_linear(dst.va + i, src.va + i, 3) + sdma.fence(sig.va, i))  # 44 bytes each
        assert u32(sig) == i
    assert q.rptr == q.wptr == 150 * 44 and not gpu.faults
    assert bytes(dst.view[:152]) == bytes(src.view[:152])


def test_a_packet_straddling_the_ring_end_executes(gpu):
    q, src, dst, sig = gpu.sdma_queue(ring_size=1024), gpu.alloc(4096), gpu.alloc(4096), gpu.alloc(4096)
    src.view[:64] = np.arange(64, dtype=np.uint8)
    q.submit(sdma.nop(250))  # 1000 bytes: the copy occupies ring bytes 1000..1027
    q.submit(sdma.copy_linear(dst.va, src.va, 64) + sdma.write_untiled(sig.va, [7, 8]))
    assert not gpu.faults and bytes(dst.view[:64]) == bytes(range(64)) and list(sig.u32()[:2]) == [7, 8]
    assert q.ring.offset() == (1000 + 28 + 24) % 1024


# ---------------------------------------------------------------------------------------------------
# malformed streams stop only their queue


MALFORMED = {
    # name: (packets after a 16-byte FENCE, ring offset of the bad packet, header, words in the message)
    "unknown op": ([0x00000003, 0, 0], 16, 0x00000003, "op 3"),
    "packet past wptr": ([0x00000001, 0x3F, 0], 16, 0x00000001, "write pointer"),
    "IB size 0": ([0] * 6 + [0x00000004, 0x1000, 0, 0, 0, 0], 40, 0x00000004, "IB_SIZE 0"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_stream_stops_only_its_queue_with_a_placed_fault(gpu, case):
    packets, offset, header, words = MALFORMED[case]
    bad, good = gpu.sdma_queue(), gpu.sdma_queue()
    sig = gpu.alloc(4096)
    bad.submit(sdma.fence(sig.va, 1) + packets)
    f = only_fault(gpu)
    assert (f.queue, f.engine, f.ring_offset, f.header) == (bad.name, "sdma", offset, header)
    assert words in f.message and f.kind == "decode error"
    assert f"queue {bad.name}" in str(f) and f"0x{header:08x}" in str(f)
    assert any(i.source == "queue_error" and i.queue == bad.name for i in gpu.interrupts)
    good.submit(sdma.fence(sig.va + 4, 2))
    assert list(sig.u32()[:2]) == [1, 2]
    with pytest.raises(QueueError):
        bad.submit(sdma.fence(sig.va, 3))


def test_trace_shows_sdma_packets_and_writes(gpu):
    q, sig = gpu.sdma_queue(), gpu.alloc(4096)
    q.submit(sdma.fence(sig.va, 9))
    lines = gpu.trace_lines()
    assert any(q.name in line and "FENCE" in line for line in lines)
    assert any("write 4B" in line and "<- 0x9" in line for line in lines)


def test_packet_dwords_sizes_packets_from_their_dwords():
    assert sdma.packet_dwords([0x00000000]) == 1
    assert sdma.packet_dwords([0x00050000]) == 6  # burst NOP COUNT 5
    assert sdma.packet_dwords([0x00000002, 0, 0, 0x00000003]) == 8  # WRITE_UNTILED COUNT 3 -> 4 + 4
    assert sdma.packet_dwords([0x00000001]) == 7
    assert sdma.packet_dwords([0x00000011]) == 5
    with pytest.raises(DecodeError):
        sdma.packet_dwords([0x00000011], "sdma4")


def test_fence_with_a_physical_address_is_unsupported(gpu):
    q, sig = gpu.sdma_queue(), gpu.alloc(4096)
    q.submit([0x00830005, sig.va & 0xFFFFFFFF, sig.va >> 32, 1])  # MTYPE 3 | GPA (bit 23)
    assert only_fault(gpu).kind == "unsupported" and u32(sig) == 0
