"""The PM4 compute engine, opcode by opcode, from HARDWARE_FACTS sections 3.3, 4.1-4.3, 5.4 and 5.5.

Streams are built with hand-checked builders (see test_pm4_formats.py) or, where a malformed packet is
needed, with literal dwords. Results are observed the way a runtime would: through memory, the fault
records, interrupts, and the trace.
"""
import contextlib
import ctypes
import random
import signal
import struct

import pytest

from hcqsim import EmulatedGPU, pm4
from hcqsim.errors import DeadlockError, QueueError

SENTINEL = 0xA5A5A5A5

# register addresses (HARDWARE_FACTS 4.1)
COMPUTE_NUM_THREAD_X = 0x2E07
COMPUTE_PGM_LO = 0x2E0C
COMPUTE_USER_DATA_0 = 0x2E40
GRBM_GFX_INDEX = 0xC200

# TC_OP codes (3.3): 32-bit returning; +0x20 = 64-bit; +0x40 = non-returning
SWAP, CMPSWAP, ADD, SUB, SMIN, UMIN, SMAX, UMAX, AND, OR, XOR, INC, DEC = \
    0x07, 0x08, 0x0F, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19
FCMPSWAP, FMIN, FMAX = 0x01, 0x02, 0x03


def faults_of(gpu, q):
    return [f for f in gpu.faults if f.queue == q.name]


def only_fault(gpu, q):
    fs = faults_of(gpu, q)
    assert len(fs) == 1, fs
    return fs[0]


def no_faults(gpu):
    assert gpu.faults == [], "\n".join(str(f) for f in gpu.faults)


def u32_at(addr):
    return ctypes.c_uint32.from_address(addr).value


def u64_at(addr):
    return ctypes.c_uint64.from_address(addr).value


def f32(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


@pytest.fixture
def buf(gpu):
    b = gpu.alloc(4096, name="data")
    b.u32()[:] = SENTINEL
    return b


# -- NOP -------------------------------------------------------------------------------------------------

def test_nop_forms_are_skipped(gpu, buf):
    q = gpu.compute_queue()
    stream = pm4.nop(1) + pm4.nop(2) + pm4.nop(9) + pm4.nop(1) + pm4.write_data(buf.va, [1])
    q.submit(stream)
    no_faults(gpu)
    assert buf.u32()[0] == 1
    assert q.rptr == len(stream)


def test_nop_body_is_not_executed(gpu, buf):
    hidden = pm4.write_data(buf.va, [0xBAD])
    q = gpu.compute_queue()
    q.submit(pm4.encode("NOP", body=hidden) + pm4.write_data(buf.va + 4, [1]))
    no_faults(gpu)
    assert buf.u32()[0] == SENTINEL and buf.u32()[1] == 1


# -- WRITE_DATA --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dst_sel", [1, 2, 5])  # memory sync (GRBM), TC/L2, memory async
def test_write_data_memory_increments(gpu, buf, dst_sel):
    q = gpu.compute_queue()
    q.submit(pm4.write_data(buf.va + 8, [1, 2, 3], dst_sel=dst_sel))
    no_faults(gpu)
    assert list(buf.u32()[1:6]) == [SENTINEL, 1, 2, 3, SENTINEL]


def test_write_data_wr_one_addr_writes_every_dword_to_one_address(gpu, buf):
    q = gpu.compute_queue()
    q.submit(pm4.write_data(buf.va + 4, [1, 2, 3], one_addr=1))
    no_faults(gpu)
    assert list(buf.u32()[:4]) == [SENTINEL, 3, SENTINEL, SENTINEL]


def test_write_data_two_dwords_is_a_64_bit_value(gpu, buf):
    q = gpu.compute_queue()
    q.submit(pm4.write_data(buf.va + 16, [0x89ABCDEF, 0x01234567]))
    assert int(buf.u64()[2]) == 0x0123456789ABCDEF


def test_write_data_ignores_low_two_address_bits(gpu, buf):
    """5.4: PM4 addresses for WRITE_DATA ignore the low 2 bits (DST address is [31:2])."""
    q = gpu.compute_queue()
    q.submit(pm4.write_data(buf.va + 8 + 3, [0x11223344]))
    no_faults(gpu)
    assert list(buf.u32()[1:4]) == [SENTINEL, 0x11223344, SENTINEL]


def test_write_data_register_destination_sets_sh_registers(gpu, buf):
    q = gpu.compute_queue()
    q.submit(pm4.write_data(COMPUTE_USER_DATA_0, [0x1111, 0x2222], dst_sel=0)
             + pm4.write_data(COMPUTE_USER_DATA_0 + 4, [7, 8, 9], dst_sel=0, one_addr=1)
             # read the registers back through the CP: COPY_DATA register -> memory
             + pm4.copy_data(COMPUTE_USER_DATA_0, buf.va, src_sel=0, dst_sel=5)
             + pm4.copy_data(COMPUTE_USER_DATA_0 + 1, buf.va + 4, src_sel=0, dst_sel=5)
             + pm4.copy_data(COMPUTE_USER_DATA_0 + 4, buf.va + 8, src_sel=0, dst_sel=5))
    no_faults(gpu)
    assert q.regs[COMPUTE_USER_DATA_0] == 0x1111 and q.regs[COMPUTE_USER_DATA_0 + 1] == 0x2222
    assert q.regs[COMPUTE_USER_DATA_0 + 4] == 9 and COMPUTE_USER_DATA_0 + 5 not in q.regs
    assert list(buf.u32()[:3]) == [0x1111, 0x2222, 9]


def test_write_data_to_unmapped_memory_is_a_vm_fault(gpu, buf):
    bad = buf.va + 0x10_0000  # inside the window, nothing mapped there
    q = gpu.compute_queue()
    q.submit(pm4.write_data(bad, [1]) + pm4.write_data(buf.va, [2]))
    f = only_fault(gpu, q)
    assert f.kind == "VM fault" and f.address == bad and f.access == "write"
    assert f"0x{bad:x}" in str(f)
    assert buf.u32()[0] == SENTINEL  # the queue stopped


def test_write_data_to_read_only_memory_is_a_vm_fault(gpu):
    ro = gpu.alloc(4096, writable=False)
    q = gpu.compute_queue()
    q.submit(pm4.write_data(ro.va + 4, [1]))
    f = only_fault(gpu, q)
    assert f.kind == "VM fault" and f.address == ro.va + 4 and f.access == "write"
    assert ro.u32()[1] == 0


# -- WAIT_REG_MEM ------------------------------------------------------------------------------------------

# memory holds RAW; with MASK 0x0000FF00 the compared value is 0x5000. Each case: (function, a reference that
# passes at once, a reference that blocks, a RAW value that then releases the blocked wait). Several pass/block
# choices would flip if the mask were ignored (RAW itself is 0xFFFF50FF).
RAW, MASK = 0xFFFF50FF, 0x0000FF00
WAIT_CASES = [
    (0, 0x12345678, None, None),             # always
    (1, 0x5001, 0x5000, 0x00004F00),         # <   (RAW < 0x5001 is false: proves the mask)
    (2, 0x5000, 0x4FFF, 0x12344FAB),         # <=
    (3, 0x5000, 0x5100, 0xABCD51FF),         # ==  (RAW != 0x5000: passing proves the mask)
    (4, 0x4000, 0x5000, 0x00005100),         # !=
    (5, 0x5000, 0x5001, 0x0000FF00),         # >=
    (6, 0x4FFF, 0x5000, 0x00005100),         # >   (RAW > 0x5000 would pass: proves the mask)
]


@pytest.mark.parametrize("function, ref_pass, ref_block, release", WAIT_CASES)
def test_wait_reg_mem_compare_functions_with_mask(gpu, buf, function, ref_pass, ref_block, release):
    poll, flag = buf.va, buf.va + 64
    buf.u32()[0] = RAW
    buf.u32()[16] = 0
    q = gpu.compute_queue()
    q.submit(pm4.wait_reg_mem(poll, ref_pass, mask=MASK, function=function) + pm4.write_data(flag, [1]))
    no_faults(gpu)
    assert buf.u32()[16] == 1 and q.wait is None
    if ref_block is None:
        return
    q.submit(pm4.wait_reg_mem(poll, ref_block, mask=MASK, function=function) + pm4.write_data(flag, [2]))
    gpu.run()
    assert buf.u32()[16] == 1, "the wait should block"
    assert q.wait is not None
    [b] = gpu.blocked()
    assert b.queue == q.name and b.address == poll and b.current == RAW
    buf.u32()[0] = release
    gpu.run()
    no_faults(gpu)
    assert buf.u32()[16] == 2 and q.wait is None and gpu.blocked() == []


def test_wait_released_by_another_compute_queue(gpu, buf):
    sig, out = buf.va, buf.va + 8
    buf.u32()[0] = 0
    waiter, signaller = gpu.compute_queue(), gpu.compute_queue()
    waiter.submit(pm4.wait_reg_mem(sig, 1, function=5) + pm4.write_data(out, [7]))
    assert buf.u32()[2] == SENTINEL and waiter.wait is not None
    signaller.submit(pm4.write_data(buf.va + 16, [5]))  # unrelated work leaves it blocked
    assert buf.u32()[2] == SENTINEL
    signaller.submit(pm4.release_mem(sig, 1, data_sel=1))  # the doorbell is a progress point
    no_faults(gpu)
    assert buf.u32()[2] == 7 and waiter.wait is None


def test_wait_released_by_cpu_store_and_run(gpu, buf):
    sig, out = buf.va, buf.va + 8
    buf.u32()[0] = 0
    q = gpu.compute_queue()
    q.submit(pm4.wait_reg_mem(sig, 3, function=3) + pm4.write_data(out, [7]))
    gpu.run()
    assert buf.u32()[2] == SENTINEL
    buf.u32()[0] = 3  # a plain host store; the engine sees it at the next progress point
    assert buf.u32()[2] == SENTINEL
    gpu.run()
    assert buf.u32()[2] == 7


def test_blocked_queue_does_not_block_other_queues(gpu, buf):
    buf.u32()[0] = 0
    q1, q2 = gpu.compute_queue(), gpu.compute_queue()
    q1.submit(pm4.wait_reg_mem(buf.va, 1, function=3))
    q2.submit(pm4.write_data(buf.va + 4, [42]))
    assert buf.u32()[1] == 42 and q1.wait is not None


def test_wait_inside_an_indirect_buffer_resumes_there(gpu, buf):
    ibm = gpu.alloc(4096)
    sig = buf.va
    buf.u32()[0] = 0
    ib = pm4.write_data(buf.va + 4, [1]) + pm4.wait_reg_mem(sig, 1, function=3) + pm4.write_data(buf.va + 8, [2])
    ibm.u32()[:len(ib)] = ib
    q = gpu.compute_queue()
    q.submit(pm4.indirect_buffer(ibm.va, len(ib)) + pm4.write_data(buf.va + 12, [3]))
    assert list(buf.u32()[1:4]) == [1, SENTINEL, SENTINEL]
    buf.u32()[0] = 1
    gpu.run()
    no_faults(gpu)
    assert list(buf.u32()[1:4]) == [1, 2, 3]


def test_wait_on_a_register(gpu, buf):
    q = gpu.compute_queue()
    q.submit(pm4.set_sh_reg(COMPUTE_USER_DATA_0, [0x5A5])
             + pm4.wait_reg_mem(COMPUTE_USER_DATA_0, 0x5A5, function=3, mem_space=0) + pm4.write_data(buf.va, [1]))
    no_faults(gpu)
    assert buf.u32()[0] == 1


def test_hdp_flush_write_then_wait_completes(gpu, buf):
    """6.4: amdgpu's HDP flush (OPERATION 1, register space) completes at once in the emulator."""
    q = gpu.compute_queue()
    q.submit(pm4.wait_reg_mem(0xE27 << 32 | 0xE26, 4, mask=4, function=3, mem_space=0, operation=1,
                              poll_interval=0x20) + pm4.write_data(buf.va, [1]))
    no_faults(gpu)
    assert buf.u32()[0] == 1


def test_impossible_wait_is_a_deadlock_naming_queue_address_and_values(gpu, buf):
    sig = buf.va + 0x40
    buf.u32()[0x10] = 3
    q = gpu.compute_queue()
    q.submit(pm4.wait_reg_mem(sig, 5, function=3) + pm4.release_mem(buf.va, 1, data_sel=1))
    with pytest.raises(DeadlockError) as ei:
        gpu.run_until(lambda: buf.u32()[0] == 1, "the fence")
    e = ei.value
    msg = str(e)
    assert "the fence" in msg
    assert q.name in msg
    assert f"0x{sig:x}" in msg
    assert "== 0x5" in msg  # the awaited condition
    assert "current 0x3" in msg
    [b] = e.blocked
    assert (b.queue, b.address, b.current) == (q.name, sig, 3)
    assert "WAIT_REG_MEM" in b.packet


def test_run_until_returns_when_condition_holds(gpu, buf):
    buf.u32()[0] = 0
    q1, q2 = gpu.compute_queue(), gpu.compute_queue()
    q1.submit(pm4.wait_reg_mem(buf.va, 1, function=3) + pm4.write_data(buf.va + 4, [9]))
    q2.submit(pm4.write_data(buf.va, [1]))
    gpu.run_until(lambda: buf.u32()[1] == 9, "q1's write")


def test_run_until_without_any_blocked_queue_still_reports_deadlock(gpu, buf):
    gpu.compute_queue().submit(pm4.nop(2))
    with pytest.raises(DeadlockError, match="no queue"):
        gpu.run_until(lambda: False, "something nothing will do")


# -- RELEASE_MEM -------------------------------------------------------------------------------------------

def test_release_mem_data_sel_0_writes_nothing(gpu, buf):
    q = gpu.compute_queue()
    q.submit(pm4.release_mem(buf.va, 0x1234, data_sel=0) + pm4.write_data(buf.va + 8, [1]))
    no_faults(gpu)
    assert buf.u32()[0] == SENTINEL and buf.u32()[1] == SENTINEL and buf.u32()[2] == 1
    assert [i for i in gpu.interrupts if i.source == "cp_eop"] == []


def test_release_mem_data_sel_1_writes_low_32_bits(gpu, buf):
    q = gpu.compute_queue()
    q.submit(pm4.release_mem(buf.va + 8, 0x1_2345_6789, data_sel=1))
    no_faults(gpu)
    assert list(buf.u32()[1:4]) == [SENTINEL, 0x23456789, SENTINEL]


def test_release_mem_data_sel_2_writes_64_bits(gpu, buf):
    q = gpu.compute_queue()
    q.submit(pm4.release_mem(buf.va + 8, 0xFEDC_BA98_7654_3210, data_sel=2))
    no_faults(gpu)
    assert int(buf.u64()[1]) == 0xFEDC_BA98_7654_3210
    assert buf.u32()[1] == SENTINEL and buf.u32()[4] == SENTINEL


def test_release_mem_data_sel_3_timestamps_follow_the_virtual_clock(gpu, buf):
    q = gpu.compute_queue()
    start = gpu.clock
    k = 5
    q.submit(pm4.release_mem(buf.va, data_sel=3, event_type=0x28) + pm4.nop(2) * k
             + pm4.release_mem(buf.va + 8, data_sel=3))
    no_faults(gpu)
    t0, t1 = int(buf.u64()[0]), int(buf.u64()[1])
    assert start < t0 < t1 <= gpu.clock
    # the cost model: every packet costs cost.packet ticks (k NOPs and the second RELEASE_MEM lie between)
    assert t1 - t0 == (k + 1) * gpu.cost.packet
    q.submit(pm4.release_mem(buf.va + 16, data_sel=3))
    assert t1 < int(buf.u64()[2]) <= gpu.clock


def test_release_mem_interrupt_after_write_carries_ctxid(gpu, buf):
    seen = []
    gpu.interrupt_handlers.append(lambda irq: seen.append((irq.source, irq.ctxid, u32_at(buf.va))))
    q = gpu.compute_queue()
    q.submit(pm4.release_mem(buf.va, 77, data_sel=1, int_sel=2, ctxid=0xC0DE))
    no_faults(gpu)
    # the data is written before the interrupt is raised
    assert seen == [("cp_eop", 0xC0DE, 77)]
    irq = gpu.interrupts[-1]
    assert irq.queue == q.name and irq.ctxid == 0xC0DE and irq.source == "cp_eop"


@pytest.mark.parametrize("int_sel, data_sel, writes, interrupts", [
    (0, 1, True, False),   # none
    (1, 0, False, True),   # interrupt only
    (2, 1, True, True),    # interrupt after write confirm
    (3, 1, True, False),   # write confirmed, no interrupt
    (4, 1, True, True),    # unconditional interrupt with ctxid
])
def test_release_mem_int_sel(gpu, buf, int_sel, data_sel, writes, interrupts):
    q = gpu.compute_queue()
    q.submit(pm4.release_mem(buf.va, 5, data_sel=data_sel, int_sel=int_sel, ctxid=0x99))
    no_faults(gpu)
    assert bool(buf.u32()[0] == 5) is writes
    got = [(i.source, i.ctxid) for i in gpu.interrupts]
    assert got == ([("cp_eop", 0x99)] if interrupts else [])


@pytest.mark.parametrize("memory, cmp, interrupts", [(9, 9, True), (9, 8, False)])
def test_release_mem_int_sel_5_compares_32_bits(gpu, buf, memory, cmp, interrupts):
    buf.u32()[0] = memory
    q = gpu.compute_queue()
    q.submit(pm4.release_mem(buf.va, cmp, data_sel=0, int_sel=5, ctxid=3))
    no_faults(gpu)
    assert buf.u32()[0] == memory
    assert len([i for i in gpu.interrupts if i.source == "cp_eop"]) == int(interrupts)


@pytest.mark.parametrize("cmp, interrupts", [(0x1_0000_0009, True), (0x2_0000_0009, False)])
def test_release_mem_int_sel_6_compares_64_bits(gpu, buf, cmp, interrupts):
    buf.u64()[0] = 0x1_0000_0009
    q = gpu.compute_queue()
    q.submit(pm4.release_mem(buf.va, cmp, data_sel=0, int_sel=6, ctxid=3))
    no_faults(gpu)
    assert len([i for i in gpu.interrupts if i.source == "cp_eop"]) == int(interrupts)


def test_release_mem_interrupt_only_with_data_is_rejected(gpu, buf):
    """3.3: INT_SEL 1 (interrupt only) requires DATA_SEL 0."""
    q = gpu.compute_queue()
    q.submit(pm4.release_mem(buf.va, 5, data_sel=1, int_sel=1))
    f = only_fault(gpu, q)
    assert f.kind == "decode error" and "RELEASE_MEM" in f.packet


def test_release_mem_does_not_stall_the_queue(gpu, buf):
    q = gpu.compute_queue()
    q.submit(pm4.release_mem(buf.va, 1) + pm4.write_data(buf.va + 4, [2]))
    assert list(buf.u32()[:2]) == [1, 2]


def test_release_mem_gfx9_form(gfx942):
    b = gfx942.alloc(4096)
    q = gfx942.compute_queue()
    q.submit(pm4.release_mem(b.va, 0x1_0000_0002, data_sel=2, int_sel=2, ctxid=5, family="gfx9",
                             tcl1_action_ena=1, tc_action_ena=1, tc_md_action_ena=1, tc_wb_action_ena=1))
    no_faults(gfx942)
    assert int(b.u64()[0]) == 0x1_0000_0002
    assert [(i.source, i.ctxid) for i in gfx942.interrupts] == [("cp_eop", 5)]


# -- ACQUIRE_MEM --------------------------------------------------------------------------------------------

def test_acquire_mem_full_sync_gfx11(gpu, buf):
    q = gpu.compute_queue()
    q.submit(pm4.acquire_mem(gli_inv=1, glm_wb=1, glm_inv=1, glk_inv=1, glv_inv=1, gl1_inv=1, gl2_inv=1, gl2_wb=1)
             + pm4.write_data(buf.va, [1]))
    no_faults(gpu)
    assert buf.u32()[0] == 1


def test_acquire_mem_gfx9_form(gfx942):
    b = gfx942.alloc(4096)
    q = gfx942.compute_queue()
    q.submit(pm4.acquire_mem("gfx9", sh_icache_action_ena=1, sh_kcache_action_ena=1, tc_action_ena=1,
                             tcl1_action_ena=1, tc_wb_action_ena=1) + pm4.write_data(b.va, [1]))
    no_faults(gfx942)
    assert b.u32()[0] == 1


def test_acquire_mem_of_the_other_family_is_malformed(gpu, gfx942):
    q = gpu.compute_queue()
    q.submit(pm4.acquire_mem("gfx9"))  # 7 dwords on a gfx11 queue, which expects 8
    assert only_fault(gpu, q).kind == "decode error"
    q9 = gfx942.compute_queue()
    q9.submit(pm4.acquire_mem("gfx11"))  # 8 dwords on a gfx9 queue, which expects 7
    assert only_fault(gfx942, q9).kind == "decode error"


# -- EVENT_WRITE -------------------------------------------------------------------------------------------

def test_event_write_cs_partial_flush(gpu, buf):
    q = gpu.compute_queue()
    q.submit(pm4.write_data(buf.va, [1]) + pm4.cs_partial_flush() + pm4.write_data(buf.va + 4, [2]))
    no_faults(gpu)
    assert list(buf.u32()[:2]) == [1, 2]


def test_event_write_unsupported_event_stops_only_that_queue(gpu, buf):
    q, other = gpu.compute_queue(), gpu.compute_queue()
    q.submit(pm4.event_write(0x33, 0) + pm4.write_data(buf.va, [1]))  # THREAD_TRACE_START
    f = only_fault(gpu, q)
    assert f.kind == "unsupported" and f.ring_offset == 0 and "EVENT_WRITE" in f.packet
    assert buf.u32()[0] == SENTINEL
    other.submit(pm4.write_data(buf.va + 4, [2]))
    assert buf.u32()[1] == 2


# -- SET_SH_REG / SET_UCONFIG_REG ----------------------------------------------------------------------

def test_set_sh_reg_writes_consecutive_registers(gpu, buf):
    q = gpu.compute_queue()
    q.submit(pm4.set_sh_reg(COMPUTE_PGM_LO, [0x12345678, 0x7F])
             + pm4.set_sh_reg(0x2FFF, [0xEE])  # the last SH register
             + pm4.copy_data(COMPUTE_PGM_LO, buf.va, src_sel=0, dst_sel=5, count_sel=1))
    no_faults(gpu)
    assert q.regs[0x2E0C] == 0x12345678 and q.regs[0x2E0D] == 0x7F and q.regs[0x2FFF] == 0xEE
    assert int(buf.u64()[0]) == 0x7F_1234_5678


def test_set_uconfig_reg_writes_the_gpu_register_file(gpu, buf):
    q = gpu.compute_queue()
    q.submit(pm4.set_uconfig_reg(GRBM_GFX_INDEX, [0xE0000000]) + pm4.set_uconfig_reg(0xC3FF, [1]))
    no_faults(gpu)
    assert gpu.uconfig[GRBM_GFX_INDEX] == 0xE0000000 and gpu.uconfig[0xC3FF] == 1


@pytest.mark.parametrize("packet", [
    pm4.encode("SET_SH_REG", reg_offset=0x3FF, values=[1, 2]),   # 0x2FFF, 0x3000: runs past the end
    pm4.encode("SET_SH_REG", reg_offset=0x400, values=[1]),      # 0x3000
    pm4.encode("SET_UCONFIG_REG", reg_offset=0x400, values=[1]),  # 0xC400
    pm4.encode("SET_UCONFIG_REG", reg_offset=0x3FE, values=[1, 2, 3]),
], ids=["sh-straddle", "sh-past", "uconfig-past", "uconfig-straddle"])
def test_register_write_out_of_range_faults(gpu, buf, packet):
    q = gpu.compute_queue()
    q.submit(pm4.write_data(buf.va, [1]) + packet + pm4.write_data(buf.va + 4, [2]))
    f = only_fault(gpu, q)
    assert f.ring_offset == 20 and f.header == packet[0] and f.kind in ("decode error", "unsupported")
    assert list(buf.u32()[:2]) == [1, SENTINEL]
    assert 0x3000 not in q.regs and 0xC400 not in gpu.uconfig


# -- INDIRECT_BUFFER ---------------------------------------------------------------------------------------

def _place(gpu, dws):
    m = gpu.alloc(max(4096, 4 * len(dws)), name="ib")
    m.u32()[:len(dws)] = dws
    return m


def test_indirect_buffer_executes_then_returns_to_the_ring(gpu, buf):
    x, y, z = buf.va, buf.va + 4, buf.va + 8
    ib = pm4.copy_data(x, y, dst_sel=5) + pm4.write_data(x, [2])
    ibm = _place(gpu, ib)
    q = gpu.compute_queue()
    ring = pm4.write_data(x, [1]) + pm4.indirect_buffer(ibm.va, len(ib)) + pm4.copy_data(x, z, dst_sel=5) \
        + pm4.write_data(x, [3])
    q.submit(ring)
    no_faults(gpu)
    assert list(buf.u32()[:3]) == [3, 1, 2]
    assert q.rptr == len(ring) and len(q.stack) == 1


def test_nested_ib2_returns_to_ib1(gpu, buf):
    a, b, c, d = (buf.va + 4 * i for i in range(4))
    ib2 = pm4.copy_data(a, b, dst_sel=5) + pm4.write_data(a, [2])
    ib2m = _place(gpu, ib2)
    ib1 = pm4.write_data(a, [1]) + pm4.indirect_buffer(ib2m.va, len(ib2)) + pm4.copy_data(a, c, dst_sel=5)
    ib1m = _place(gpu, ib1)
    q = gpu.compute_queue()
    q.submit(pm4.indirect_buffer(ib1m.va, len(ib1)) + pm4.write_data(d, [4]))
    no_faults(gpu)
    assert list(buf.u32()[:4]) == [2, 1, 2, 4]


def test_chained_ib_does_not_return_to_the_chaining_ib(gpu, buf):
    a, b, c, e = (buf.va + 4 * i for i in range(4))
    ib1b = pm4.write_data(b, [2])
    ib1bm = _place(gpu, ib1b)
    ib1 = pm4.write_data(a, [1]) + pm4.indirect_buffer(ib1bm.va, len(ib1b), chain=1) + pm4.write_data(e, [99])
    ib1m = _place(gpu, ib1)
    q = gpu.compute_queue()
    q.submit(pm4.indirect_buffer(ib1m.va, len(ib1)) + pm4.write_data(c, [3]))
    no_faults(gpu)
    assert list(buf.u32()[:4]) == [1, 2, 3, SENTINEL]


@pytest.mark.parametrize("fields", [dict(ib_size=0, valid=1), dict(ib_size=4, valid=0)],
                         ids=["ib_size-0", "valid-0"])
def test_bad_indirect_buffer_packets_fault(gpu, buf, fields):
    ibm = _place(gpu, pm4.write_data(buf.va, [1]))
    packet = pm4.encode("INDIRECT_BUFFER", ib_base=ibm.va, **fields)
    q = gpu.compute_queue()
    q.submit(pm4.nop(2) + packet + pm4.write_data(buf.va + 4, [2]))
    f = only_fault(gpu, q)
    assert f.kind == "decode error" and f.ring_offset == 8 and f.header == 0xC0023F00
    assert "INDIRECT_BUFFER" in f.packet
    assert list(buf.u32()[:2]) == [SENTINEL, SENTINEL]


def test_indirect_buffer_outside_mapped_memory_is_a_vm_fault(gpu, buf):
    bad = buf.va + 0x20_0000
    q = gpu.compute_queue()
    q.submit(pm4.indirect_buffer(bad, 16) + pm4.write_data(buf.va, [1]))
    f = only_fault(gpu, q)
    assert f.kind == "VM fault" and f.address == bad and f.access == "read"
    assert f"0x{bad:x}" in str(f) and "INDIRECT_BUFFER" in f.packet
    assert buf.u32()[0] == SENTINEL


def test_indirect_buffer_running_off_its_mapping_is_a_vm_fault(gpu, buf):
    q = gpu.compute_queue()
    ibm = gpu.alloc(4096)
    gpu.free(gpu.alloc(4096))  # make sure the page after ibm is not mapped
    assert gpu.memory.find(ibm.va + 4096) is None
    ibm.u32()[-4:] = pm4.nop(4)
    start = ibm.va + 4096 - 16
    q.submit(pm4.indirect_buffer(start, 16))
    f = only_fault(gpu, q)
    assert f.kind == "VM fault" and f.address is not None and start <= f.address < ibm.va + 4096 + 64


def test_malformed_packet_inside_an_ib_is_reported_at_its_ib_offset(gpu, buf):
    ib = pm4.write_data(buf.va, [1]) + [pm4.header(0xEE, 0), 0]
    ibm = _place(gpu, ib)
    q = gpu.compute_queue()
    q.submit(pm4.nop(2) + pm4.indirect_buffer(ibm.va, len(ib)) + pm4.write_data(buf.va + 4, [2]))
    f = only_fault(gpu, q)
    assert f.kind == "decode error" and f.header == 0xC000EE00 and f.ring_offset == 20
    assert f.where.startswith("IB")
    assert list(buf.u32()[:2]) == [1, SENTINEL]


# -- COPY_DATA --------------------------------------------------------------------------------------------

def test_copy_data_memory_32_and_64(gpu, buf):
    src = buf.va
    buf.u32()[0:2] = [0x11223344, 0x55667788]
    q = gpu.compute_queue()
    q.submit(pm4.copy_data(src, buf.va + 16) + pm4.copy_data(src, buf.va + 32, count_sel=1))
    no_faults(gpu)
    assert list(buf.u32()[4:6]) == [0x11223344, SENTINEL]
    assert list(buf.u32()[8:10]) == [0x11223344, 0x55667788]


def test_copy_data_gfx9_memory_selects(gfx942):
    b = gfx942.alloc(4096)
    b.u32()[0] = 0xCAFE
    q = gfx942.compute_queue()
    q.submit(pm4.copy_data(b.va, b.va + 8, src_sel=1, dst_sel=5))  # SRC_SEL 1 / DST_SEL 5 = memory on gfx9
    no_faults(gfx942)
    assert b.u32()[2] == 0xCAFE


def test_copy_data_immediate(gpu, buf):
    q = gpu.compute_queue()
    q.submit(pm4.copy_data(0x1122334455667788, buf.va, src_sel=5, dst_sel=5)
             + pm4.copy_data(0x1122334455667788, buf.va + 16, src_sel=5, dst_sel=5, count_sel=1))
    no_faults(gpu)
    assert list(buf.u32()[0:2]) == [0x55667788, SENTINEL]
    assert int(buf.u64()[2]) == 0x1122334455667788


def test_copy_data_gpu_clock(gpu, buf):
    q = gpu.compute_queue()
    before = gpu.clock
    q.submit(pm4.copy_data(0, buf.va, src_sel=9, dst_sel=5, count_sel=1) + pm4.nop(2)
             + pm4.copy_data(0, buf.va + 8, src_sel=9, dst_sel=5, count_sel=1)
             + pm4.release_mem(buf.va + 16, data_sel=3))
    no_faults(gpu)
    c0, c1, ts = (int(v) for v in buf.u64()[:3])
    assert before < c0 < c1 < ts <= gpu.clock


def test_copy_data_atomic_return_value(gpu, buf):
    buf.u32()[0] = 10
    buf.u64()[1] = 0xFFFF_FFFF
    q = gpu.compute_queue()
    q.submit(pm4.atomic_mem(buf.va, ADD, 5) + pm4.copy_data(0, buf.va + 32, src_sel=6, dst_sel=5)
             + pm4.atomic_mem(buf.va + 8, ADD + 0x20, 1)
             + pm4.copy_data(0, buf.va + 40, src_sel=6, dst_sel=5, count_sel=1))
    no_faults(gpu)
    assert buf.u32()[0] == 15 and buf.u32()[8] == 10
    assert int(buf.u64()[1]) == 0x1_0000_0000 and int(buf.u64()[5]) == 0xFFFF_FFFF


def test_copy_data_memory_to_register(gpu, buf):
    buf.u32()[0] = 0xABCD
    q = gpu.compute_queue()
    q.submit(pm4.copy_data(buf.va, COMPUTE_USER_DATA_0 + 3, dst_sel=0))
    no_faults(gpu)
    assert q.regs[COMPUTE_USER_DATA_0 + 3] == 0xABCD


# -- ATOMIC_MEM --------------------------------------------------------------------------------------------

M32, M64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF
# (op, width, old, src, cmp, new) by hand from each op's definition; INC/DEC are the GPU's wrapping forms:
# INC: old >= src ? 0 : old + 1;  DEC: (old == 0 or old > src) ? src : old - 1
ATOMIC_CASES = [
    (SWAP, 32, 5, 9, 0, 9),
    (CMPSWAP, 32, 5, 9, 5, 9),
    (CMPSWAP, 32, 5, 9, 4, 5),
    (ADD, 32, M32, 2, 0, 1),
    (SUB, 32, 1, 2, 0, M32),
    (SMIN, 32, M32, 1, 0, M32),      # -1 < 1
    (UMIN, 32, M32, 1, 0, 1),
    (SMAX, 32, M32, 1, 0, 1),
    (UMAX, 32, M32, 1, 0, M32),
    (AND, 32, 0xF0F0, 0xFF00, 0, 0xF000),
    (OR, 32, 0xF0F0, 0x0F0F, 0, 0xFFFF),
    (XOR, 32, 0xFF00, 0x0FF0, 0, 0xF0F0),
    (INC, 32, 3, 10, 0, 4),
    (INC, 32, 10, 10, 0, 0),
    (DEC, 32, 3, 10, 0, 2),
    (DEC, 32, 0, 10, 0, 10),
    (DEC, 32, 11, 10, 0, 10),
    (SWAP, 64, 5, 0x1_0000_0009, 0, 0x1_0000_0009),
    (CMPSWAP, 64, 0x7_0000_0005, 9, 0x7_0000_0005, 9),
    (CMPSWAP, 64, 0x7_0000_0005, 9, 0x8_0000_0005, 0x7_0000_0005),
    (ADD, 64, 0xFFFF_FFFF, 1, 0, 0x1_0000_0000),   # carries into the high dword
    (SUB, 64, 0x1_0000_0000, 1, 0, 0xFFFF_FFFF),
    (SMIN, 64, M64, 1, 0, M64),
    (UMIN, 64, M64, 1, 0, 1),
    (SMAX, 64, 0x8000_0000_0000_0000, 0x7FFF_FFFF_FFFF_FFFF, 0, 0x7FFF_FFFF_FFFF_FFFF),
    (UMAX, 64, 0x8000_0000_0000_0000, 0x7FFF_FFFF_FFFF_FFFF, 0, 0x8000_0000_0000_0000),
    (AND, 64, 0xFF00_0000_FF00, 0xF000_0000_F000, 0, 0xF000_0000_F000),
    (OR, 64, 0x1_0000_0000, 1, 0, 0x1_0000_0001),
    (XOR, 64, M64, 0x1_0000_0001, 0, 0xFFFF_FFFE_FFFF_FFFE),
    (INC, 64, 0xFFFF_FFFF, 0x1_0000_0000, 0, 0x1_0000_0000),
    (DEC, 64, 0x1_0000_0000, 0x2_0000_0000, 0, 0xFFFF_FFFF),
]


@pytest.mark.parametrize("returning", [True, False], ids=["rtn", "no-rtn"])
@pytest.mark.parametrize("op, width, old, src, cmp, new", ATOMIC_CASES)
def test_atomic_mem_ops(gpu, buf, op, width, old, src, cmp, new, returning):
    code = op + (0x20 if width == 64 else 0) + (0 if returning else 0x40)
    addr = buf.va + 64
    if width == 64:
        buf.u64()[8] = old
    else:
        buf.u32()[16] = old
    q = gpu.compute_queue()
    q.submit(pm4.atomic_mem(addr, code, src, cmp))
    no_faults(gpu)
    got = int(buf.u64()[8]) if width == 64 else int(buf.u32()[16])
    assert got == new, f"op 0x{code:02x}: old {old:#x} src {src:#x} cmp {cmp:#x} -> {got:#x}, expected {new:#x}"
    if width == 32:
        assert buf.u32()[17] == SENTINEL  # a 32-bit atomic touches one dword
    if returning:  # the pre-op value is available to COPY_DATA SRC_SEL 6
        q.submit(pm4.copy_data(0, buf.va, src_sel=6, dst_sel=5, count_sel=1 if width == 64 else 0))
        ret = int(buf.u64()[0]) if width == 64 else int(buf.u32()[0])
        assert ret == old


@pytest.mark.parametrize("op, old, src, cmp, new", [
    (FMIN, 2.5, 1.5, 0.0, 1.5), (FMIN, 1.5, 2.5, 0.0, 1.5),
    (FMAX, 2.5, 1.5, 0.0, 2.5), (FMAX, -1.0, 3.0, 0.0, 3.0),
    (FCMPSWAP, 2.0, 7.0, 2.0, 7.0), (FCMPSWAP, 2.0, 7.0, 3.0, 2.0),
])
def test_atomic_mem_float_ops_32(gpu, buf, op, old, src, cmp, new):
    buf.u32()[0] = f32(old)
    q = gpu.compute_queue()
    q.submit(pm4.atomic_mem(buf.va, op, f32(src), f32(cmp)))
    no_faults(gpu)
    assert buf.u32()[0] == f32(new)


def test_atomic_mem_loop_until_compare_blocks_until_another_agent_writes(gpu, buf):
    x = buf.va
    buf.u32()[0] = 1
    q, other = gpu.compute_queue(), gpu.compute_queue()
    q.submit(pm4.atomic_mem(x, CMPSWAP, 7, 3, command=1, loop_interval=0x10) + pm4.write_data(buf.va + 4, [1]))
    gpu.run()
    assert buf.u32()[0] == 1 and buf.u32()[1] == SENTINEL and q.wait is not None
    [b] = gpu.blocked()
    assert b.queue == q.name and b.address == x and b.current == 1
    other.submit(pm4.write_data(x, [2]))  # still not the compare value
    assert buf.u32()[0] == 2 and buf.u32()[1] == SENTINEL
    other.submit(pm4.write_data(x, [3]))
    no_faults(gpu)
    assert buf.u32()[0] == 7 and buf.u32()[1] == 1 and q.wait is None


def test_atomic_mem_loop_64_released_by_cpu(gpu, buf):
    buf.u64()[0] = 0
    q = gpu.compute_queue()
    q.submit(pm4.atomic_mem(buf.va, CMPSWAP + 0x20, 0x5_0000_0000, 0x4_0000_0001, command=1)
             + pm4.write_data(buf.va + 8, [1]))
    assert buf.u32()[2] == SENTINEL
    buf.u64()[0] = 0x1  # low dword matches, high does not: still blocked
    gpu.run()
    assert buf.u32()[2] == SENTINEL
    buf.u64()[0] = 0x4_0000_0001
    gpu.run()
    no_faults(gpu)
    assert int(buf.u64()[0]) == 0x5_0000_0000 and buf.u32()[2] == 1


def test_atomic_mem_loop_that_can_never_succeed_is_a_deadlock(gpu, buf):
    buf.u32()[0] = 1
    q = gpu.compute_queue()
    q.submit(pm4.atomic_mem(buf.va, CMPSWAP, 7, 3, command=1) + pm4.release_mem(buf.va + 8, 1))
    with pytest.raises(DeadlockError) as ei:
        gpu.run_until(lambda: buf.u32()[2] == 1, "the fence after the atomic")
    assert q.name in str(ei.value) and f"0x{buf.va:x}" in str(ei.value)


def test_atomic_mem_misaligned_64_bit_faults(gpu, buf):
    q = gpu.compute_queue()
    q.submit(pm4.atomic_mem(buf.va + 4, ADD + 0x20, 1))
    f = only_fault(gpu, q)
    assert f.ring_offset == 0 and "ATOMIC_MEM" in f.packet


def test_atomic_mem_unknown_op_faults(gpu, buf):
    q = gpu.compute_queue()
    q.submit(pm4.atomic_mem(buf.va, 0x05, 1))
    f = only_fault(gpu, q)
    assert f.kind in ("decode error", "unsupported") and buf.u32()[0] == SENTINEL


# -- DMA_DATA ---------------------------------------------------------------------------------------------

def test_dma_data_copy(gpu, buf):
    src = gpu.alloc(4096)
    src.view[:] = (list(range(256)) * 16)[:4096]
    q = gpu.compute_queue()
    q.submit(pm4.dma_data(buf.va + 4, src.va + 1, 101))
    no_faults(gpu)
    assert bytes(buf.view[4:105]) == bytes(range(1, 102))
    assert buf.u32()[0] == SENTINEL and bytes(buf.view[105:108]) == b"\xa5\xa5\xa5"


@pytest.mark.parametrize("src_sel, dst_sel", [(0, 3), (3, 0), (3, 3)])
def test_dma_data_copy_via_l2_selects(gpu, buf, src_sel, dst_sel):
    buf.u32()[0:4] = [1, 2, 3, 4]
    q = gpu.compute_queue()
    q.submit(pm4.dma_data(buf.va + 64, buf.va, 16, src_sel=src_sel, dst_sel=dst_sel))
    no_faults(gpu)
    assert list(buf.u32()[16:21]) == [1, 2, 3, 4, SENTINEL]


def test_dma_data_fill_with_immediate_data(gpu, buf):
    q = gpu.compute_queue()
    q.submit(pm4.dma_data(buf.va + 8, 0xA1B2C3D4, 64, src_sel=2))
    no_faults(gpu)
    assert list(buf.u32()[1:19]) == [SENTINEL] + [0xA1B2C3D4] * 16 + [SENTINEL]


def test_dma_data_source_address_does_not_increment(gpu, buf):
    buf.u32()[0:4] = [0x11111111, 0x22222222, 0x33333333, 0x44444444]
    q = gpu.compute_queue()
    q.submit(pm4.dma_data(buf.va + 64, buf.va, 16, saic=1))
    no_faults(gpu)
    assert list(buf.u32()[16:21]) == [0x11111111] * 4 + [SENTINEL]


def test_dma_data_destination_address_does_not_increment(gpu, buf):
    buf.u32()[0:4] = [0x11111111, 0x22222222, 0x33333333, 0x44444444]
    q = gpu.compute_queue()
    q.submit(pm4.dma_data(buf.va + 64, buf.va, 16, daic=1) + pm4.dma_data(buf.va + 96, 0x77, 16, src_sel=2, daic=1)
             + pm4.dma_data(buf.va + 128, buf.va + 4, 16, saic=1, daic=1))
    no_faults(gpu)
    assert list(buf.u32()[16:18]) == [0x44444444, SENTINEL]  # the last dword lands, at one address
    assert list(buf.u32()[24:26]) == [0x77, SENTINEL]
    assert list(buf.u32()[32:34]) == [0x22222222, SENTINEL]


def test_dma_data_to_unmapped_memory_is_a_vm_fault(gpu, buf):
    bad = buf.va + 0x30_0000
    q = gpu.compute_queue()
    q.submit(pm4.dma_data(bad, buf.va, 64))
    f = only_fault(gpu, q)
    assert f.kind == "VM fault" and f.address == bad and f.access == "write"


def test_dma_data_gds_is_unsupported(gpu, buf):
    q = gpu.compute_queue()
    q.submit(pm4.dma_data(0, buf.va, 16, dst_sel=1))
    assert only_fault(gpu, q).kind == "unsupported"


# -- DISPATCH_DIRECT ---------------------------------------------------------------------------------------

def test_dispatch_direct_without_a_shader_core_is_unsupported(gpu, buf):
    gpu.shader_core = None
    code = gpu.alloc(4096, executable=True, name="code")
    q = gpu.compute_queue()
    q.submit(pm4.set_sh_reg(COMPUTE_PGM_LO, [code.va >> 8, code.va >> 40])
             + pm4.set_sh_reg(COMPUTE_NUM_THREAD_X, [64, 1, 1])
             + pm4.dispatch_direct(1, 1, 1, 0x5) + pm4.write_data(buf.va, [1]))
    f = only_fault(gpu, q)
    assert f.kind == "unsupported" and "DISPATCH_DIRECT" in f.packet and f.ring_offset == 4 * (4 + 5)
    assert buf.u32()[0] == SENTINEL


def test_dispatch_direct_without_compute_pgm_is_a_decode_error(gpu, buf):
    gpu.shader_core = None
    q = gpu.compute_queue()
    q.submit(pm4.set_sh_reg(COMPUTE_NUM_THREAD_X, [64, 1, 1]) + pm4.dispatch_direct(1, 1, 1, 0x5))
    f = only_fault(gpu, q)
    assert f.kind == "decode error" and "COMPUTE_PGM" in f.message and f.header == 0xC0031500


# -- ring: wrap-around, pointers ---------------------------------------------------------------------------

def test_small_ring_wraps_thousands_of_packets(gpu, buf):
    q = gpu.compute_queue(ring_size=1024)
    rng = random.Random(1)
    total, expected = 0, [SENTINEL] * 1024
    for i in range(3000):
        slot = i % 1000
        pkt = pm4.write_data(buf.va + 4 * slot, [i]) + pm4.nop(rng.choice([1, 2, 3, 6]))
        q.submit(pkt)
        total += len(pkt)
        expected[slot] = i
    no_faults(gpu)
    assert list(buf.u32()) == expected
    assert total > 10 * 256  # wrapped many times
    assert q.rptr == total and q.wptr == total
    assert u64_at(q.wptr_va) == total  # 5.5: wptr in memory is total dwords, never wrapped
    assert u32_at(q.rptr_va) % 256 == total % 256  # rptr report: dwords (wrapped or not)


def test_batched_submissions_straddle_the_ring_end(gpu, buf):
    q = gpu.compute_queue(ring_size=1024)
    rng = random.Random(2)
    n = 0
    for _ in range(200):
        batch = []
        for _ in range(rng.randint(1, 9)):  # at most 9 * 7 = 63 dwords per submission
            batch += pm4.write_data(buf.va + 4 * (n % 1024), [n]) + pm4.nop(rng.randint(1, 2))
            n += 1
        q.submit(batch)
    no_faults(gpu)
    got = buf.u32()
    assert n > 700
    for i in range(max(0, n - 1024), n):
        assert got[i % 1024] == i


def test_packet_straddling_the_ring_end(gpu, buf):
    q = gpu.compute_queue(ring_size=1024)
    q.submit(pm4.nop(254))  # 1016 bytes: the next packet starts 2 dwords before the end
    pkt = pm4.write_data(buf.va, [0xFEEDFACE])
    q.submit(pkt)
    no_faults(gpu)
    assert buf.u32()[0] == 0xFEEDFACE
    ring = q.ring_va
    assert [u32_at(ring + 1016), u32_at(ring + 1020)] == pkt[:2]
    assert [u32_at(ring), u32_at(ring + 4), u32_at(ring + 8)] == pkt[2:]
    assert q.rptr == 254 + 5 and u32_at(q.rptr_va) % 256 == 3


def test_wait_straddling_the_ring_end_blocks_and_resumes(gpu, buf):
    q = gpu.compute_queue(ring_size=1024)
    buf.u32()[0] = 0
    q.submit(pm4.nop(253))
    q.submit(pm4.wait_reg_mem(buf.va, 1, function=3) + pm4.write_data(buf.va + 4, [5]))
    assert buf.u32()[1] == SENTINEL
    buf.u32()[0] = 1
    gpu.run()
    no_faults(gpu)
    assert buf.u32()[1] == 5


def test_nothing_runs_before_the_doorbell_or_progress_point():
    g = EmulatedGPU(target="gfx1100", seed=0, autorun=False)
    try:
        b = g.alloc(4096)
        q = g.compute_queue(ring_size=1024)
        q.submit(pm4.write_data(b.va, [1]))
        assert b.u32()[0] == 0 and q.rptr == 0 and q.wptr == 5
        g.run()
        assert b.u32()[0] == 1 and q.rptr == 5
        assert u32_at(q.rptr_va) == 5
    finally:
        g.close()


def test_ring_overflow_is_refused(gpu):
    q = gpu.compute_queue(ring_size=1024)
    with pytest.raises(QueueError):
        q.submit(pm4.nop(257))


# -- malformed streams --------------------------------------------------------------------------------------

MALFORMED = {
    "unknown-opcode": ([0xC001EE00, 1, 2], "0xee"),
    "type-0": ([0x00012E40, 1, 2], "type-0"),
    "type-2": ([0x80000000], "type-2"),
    "count-past-wptr": ([0xC00A3700, 0x500, 0, 0], "WRITE_DATA"),  # claims 12 dwords, 4 present
    "fixed-size-too-long": ([0xC0074900, 0x514, 0, 0, 0, 0, 0, 0, 0], "RELEASE_MEM"),  # count 7: 9 dwords
}
MALFORMED_SHORT = {
    "fixed-size-too-short": ([0xC0023C00, 0x13, 0, 0], "WAIT_REG_MEM"),  # count 2: 4 dwords, the packet is 7
    "fixed-size-too-short-ib": ([0xC0013F00, 0x1000, 0], "INDIRECT_BUFFER"),
}


def _check_malformed(gpu, buf, bad, name_in_packet):
    q, other = gpu.compute_queue(), gpu.compute_queue()
    q.submit(pm4.write_data(buf.va, [1]) + bad + pm4.write_data(buf.va + 4, [2]))
    f = only_fault(gpu, q)
    assert f.kind == "decode error"
    assert f.queue == q.name and f.engine == "pm4" and f.gpu == gpu.index
    assert f.ring_offset == 20 and f.where == "ring"
    assert f.header == bad[0]
    assert f.packet and name_in_packet.lower() in f.packet.lower()
    text = str(f)
    assert q.name in text and "0x14" in text and f"0x{bad[0]:08x}" in text
    assert q.fault is f and q.status().startswith("pm4 queue") and "faulted" in q.status()
    assert list(buf.u32()[:2]) == [1, SENTINEL]  # earlier packets ran, later ones did not
    assert any(i.source == "queue_error" and i.queue == q.name for i in gpu.interrupts)
    other.submit(pm4.write_data(buf.va + 8, [3]))  # the rest of the GPU keeps working
    assert buf.u32()[2] == 3 and len(gpu.faults) == 1
    with pytest.raises(QueueError):
        q.submit(pm4.nop(2))


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_stream_stops_only_that_queue(gpu, buf, case):
    _check_malformed(gpu, buf, *MALFORMED[case])


@pytest.mark.parametrize("case", sorted(MALFORMED_SHORT))
def test_malformed_short_fixed_packet_stops_only_that_queue(gpu, buf, case):
    _check_malformed(gpu, buf, *MALFORMED_SHORT[case])


def test_predicated_packet_is_not_silently_executed(gpu, buf):
    pkt = pm4.write_data(buf.va, [1])
    pkt[0] |= 1  # predicate bit
    q = gpu.compute_queue()
    q.submit(pkt)
    f = only_fault(gpu, q)
    assert f.kind == "unsupported" and buf.u32()[0] == SENTINEL


# -- determinism and scheduling ----------------------------------------------------------------------------

def _program(g):
    """A two-queue program touching most packet kinds; returns the memory it produced."""
    data, sig = g.alloc(8192, name="data"), g.alloc(4096, name="signals")
    ib_dws = pm4.write_data(data.va + 0x100, [0xAA, 0xBB]) + pm4.atomic_mem(data.va + 0x200, ADD, 1)
    ibm = g.alloc(4096, name="ib")
    ibm.u32()[:len(ib_dws)] = ib_dws
    producer, consumer = g.compute_queue(), g.compute_queue(ring_size=1024)
    consumer.submit(pm4.wait_reg_mem(sig.va, 1, function=5) + pm4.acquire_mem(glv_inv=1, glk_inv=1)
                    + pm4.dma_data(data.va + 0x1000, data.va, 64)
                    + pm4.atomic_mem(data.va + 0x200, ADD, 10)
                    + pm4.copy_data(data.va + 0x100, data.va + 0x300, count_sel=1)
                    + pm4.release_mem(sig.va + 8, 2, data_sel=1, int_sel=2, ctxid=2))
    for i in range(16):
        producer.submit(pm4.write_data(data.va + 4 * i, [i * i]))
    producer.submit(pm4.indirect_buffer(ibm.va, len(ib_dws)) + pm4.cs_partial_flush()
                    + pm4.release_mem(sig.va + 16, data_sel=3)
                    + pm4.release_mem(sig.va, 1, data_sel=1, int_sel=2, ctxid=1))
    g.run_until(lambda: sig.u32()[2] == 2, "the consumer's fence")
    return bytes(data.view)


@pytest.mark.parametrize("policy", ["run_to_block", "round_robin", "random"])
def test_trace_is_deterministic(policy):
    g1 = EmulatedGPU(target="gfx1100", seed=0, policy=policy)
    g2 = EmulatedGPU(target="gfx1100", seed=0, policy=policy)  # alive together: its window is elsewhere
    try:
        assert g1.window.base != g2.window.base
        m1, m2 = _program(g1), _program(g2)
        no_faults(g1)
        assert m1 == m2
        t1, t2 = g1.trace_lines(), g2.trace_lines()
        assert len(t1) > 30
        assert t1 == t2
        assert [(i.source, i.ctxid, i.timestamp) for i in g1.interrupts] == \
               [(i.source, i.ctxid, i.timestamp) for i in g2.interrupts]
    finally:
        g1.close()
        g2.close()


def _faulting_program(g):
    b = g.alloc(4096)
    q = g.compute_queue()
    q.submit(pm4.write_data(b.va, [1]) + pm4.write_data(b.va + 0x10_0000, [2]))
    g.compute_queue().submit(pm4.indirect_buffer(b.va + 0x20_0000, 4))
    return g.trace_lines()


def test_trace_with_vm_faults_is_deterministic():
    g1 = EmulatedGPU(target="gfx1100", seed=0)
    g2 = EmulatedGPU(target="gfx1100", seed=0)
    try:
        assert g1.window.base != g2.window.base
        t1, t2 = _faulting_program(g1), _faulting_program(g2)
        assert len(g1.faults) == 2
        assert t1 == t2
    finally:
        g1.close()
        g2.close()


def test_random_policy_with_the_same_seed_is_reproducible_sequentially():
    runs = []
    for _ in range(2):
        with EmulatedGPU(target="gfx1100", seed=7, policy="random") as g:
            _program(g)
            runs.append(g.trace_lines())
    assert runs[0] == runs[1]


def test_policies_agree_on_final_memory_of_a_race_free_program():
    results = {}
    for policy, seed in [("run_to_block", 0), ("round_robin", 0), ("random", 1), ("random", 2), ("random", 3)]:
        with EmulatedGPU(target="gfx1100", seed=seed, policy=policy, autorun=False) as g:
            mem = _program(g)
            no_faults(g)
            results[(policy, seed)] = mem
    first = results[("run_to_block", 0)]
    assert first[:4] == struct.pack("<I", 0)
    assert struct.unpack_from("<I", first, 0x200)[0] == 11  # both atomics landed
    assert struct.unpack_from("<I", first, 0x1000 + 4 * 15)[0] == 225  # the DMA copied after the wait
    for key, mem in results.items():
        assert mem == first, key


def test_round_robin_interleaves_queues():
    with EmulatedGPU(target="gfx1100", seed=0, policy="round_robin", autorun=False) as g:
        b = g.alloc(4096)
        q1, q2 = g.compute_queue(), g.compute_queue()
        q1.submit(sum((pm4.write_data(b.va + 4 * i, [1]) for i in range(3)), []))
        q2.submit(sum((pm4.write_data(b.va + 64 + 4 * i, [2]) for i in range(3)), []))
        g.run()
        order = [line.split()[1] for line in g.trace_lines() if "WRITE_DATA" in line]
        assert order == [q1.name, q2.name] * 3


# -- more ring rules and address handling (5.4, 5.5) --------------------------------------------------------

def test_wait_and_release_ignore_low_two_address_bits(gpu, buf):
    """5.4: PM4 addresses for RELEASE_MEM / WAIT_REG_MEM ignore the low 2 bits."""
    buf.u32()[1] = 4
    q = gpu.compute_queue()
    q.submit(pm4.wait_reg_mem(buf.va + 4 + 2, 4, function=3) + pm4.release_mem(buf.va + 8 + 1, 0x77, data_sel=1))
    no_faults(gpu)
    assert list(buf.u32()[1:4]) == [4, 0x77, SENTINEL]


@pytest.mark.parametrize("value, why", [(4, "behind the read pointer"), (8 + 257, "more than a ring ahead"),
                                        (1 << 40, "far past the ring")])
def test_a_doorbell_running_backwards_or_overflowing_faults_that_queue_alone(gpu, buf, value, why):
    """A doorbell is a plain store that cannot fail (issue 22): a bad value stops its queue with a fault."""
    q, other = gpu.compute_queue(ring_size=1024), gpu.compute_queue()
    q.submit(pm4.nop(8))
    gpu.ring_doorbell(q, value)
    [f] = gpu.faults
    assert (f.queue, f.kind) == (q.name, "bad doorbell") and f"doorbell value {value}" in f.message
    with pytest.raises(QueueError):  # the faulted queue ignores later doorbells
        gpu.ring_doorbell(q, 8)
    other.submit(pm4.write_data(buf.va, [5]))  # the others go on
    assert buf.u32()[0] == 5


def test_submission_into_a_full_ring_behind_a_blocked_wait_is_refused(gpu, buf):
    buf.u32()[0] = 0
    q = gpu.compute_queue(ring_size=1024)
    q.submit(pm4.wait_reg_mem(buf.va, 1, function=3))
    q.submit(pm4.nop(249))  # 7 + 249 = 256 dwords: exactly full
    with pytest.raises(QueueError, match="full"):
        q.submit(pm4.nop(1))
    buf.u32()[0] = 1
    gpu.run()
    q.submit(pm4.write_data(buf.va + 4, [9]))  # room again
    no_faults(gpu)
    assert buf.u32()[1] == 9


def test_ring_rejects_non_power_of_two_size(gpu):
    with pytest.raises(QueueError):
        gpu.compute_queue(ring_size=1000)


@pytest.mark.parametrize("offset, size", [(4, 1024), (0x80, 1024), (0, 512), (0, 256)])
def test_ring_base_alignment_and_minimum_size(gpu, offset, size):
    ring, ptrs = gpu.alloc(1 << 16), gpu.alloc(4096)
    with pytest.raises(QueueError):
        gpu.create_compute_queue(ring.va + offset, size, ptrs.va, ptrs.va + 8)


def test_freeing_memory_a_queue_polls_is_a_vm_fault_not_a_crash(gpu, buf):
    polled = gpu.alloc(4096)
    q = gpu.compute_queue()
    q.submit(pm4.wait_reg_mem(polled.va, 1, function=3) + pm4.write_data(buf.va, [1]))
    gpu.free(polled)
    gpu.run()
    f = only_fault(gpu, q)
    assert f.kind == "VM fault" and f.address == polled.va and f.access == "read"
    assert buf.u32()[0] == SENTINEL


def test_dispatch_of_non_executable_code_is_a_vm_fault(gpu, buf):
    gpu.shader_core = None
    data = gpu.alloc(4096)  # not executable
    q = gpu.compute_queue()
    q.submit(pm4.set_sh_reg(COMPUTE_PGM_LO, [data.va >> 8, data.va >> 40])
             + pm4.set_sh_reg(COMPUTE_NUM_THREAD_X, [64, 1, 1]) + pm4.dispatch_direct(1, 1, 1, 0x5))
    f = only_fault(gpu, q)
    assert f.kind == "VM fault" and f.address == data.va and f.access == "execute"


def test_timestamps_respect_cross_queue_causality(gpu, buf):
    sig = buf.va
    buf.u32()[0] = 0
    waiter, signaller = gpu.compute_queue(), gpu.compute_queue()
    waiter.submit(pm4.wait_reg_mem(sig, 1, function=3) + pm4.release_mem(buf.va + 16, data_sel=3))
    signaller.submit(pm4.nop(2) * 10 + pm4.release_mem(buf.va + 8, data_sel=3) + pm4.release_mem(sig, 1))
    no_faults(gpu)
    t_signal, t_after = int(buf.u64()[1]), int(buf.u64()[2])
    assert 0 < t_signal < t_after <= gpu.clock
    stamps = [i.timestamp for i in gpu.interrupts]
    assert stamps == sorted(stamps)


def test_write_data_without_data_is_malformed(gpu, buf):
    q = gpu.compute_queue()
    q.submit([0xC0023700, 0x500, buf.va & 0xFFFFFFFF, buf.va >> 32])  # count 2: no data dwords
    f = only_fault(gpu, q)
    assert f.kind == "decode error" and f.header == 0xC0023700


def test_destroyed_queue_does_not_run(gpu, buf):
    q = gpu.compute_queue()
    gpu.destroy_queue(q)
    with pytest.raises(QueueError):
        q.submit(pm4.write_data(buf.va, [1]))
    gpu.run()
    assert buf.u32()[0] == SENTINEL


class _Hang(BaseException):  # not an Exception: the GPU turns those into faults
    pass


@contextlib.contextmanager
def _time_limit(seconds):
    def on_alarm(signum, frame):
        raise _Hang(f"still running after {seconds} s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("policy", ["run_to_block", "round_robin", "random"])
def test_self_chaining_ib_is_stopped_as_runaway(policy):
    with EmulatedGPU(target="gfx1100", seed=0, policy=policy, max_packets_per_run=2000) as g:
        ibm = g.alloc(4096)
        ibm.u32()[:6] = pm4.nop(2) + pm4.indirect_buffer(ibm.va, 6, chain=1)
        q = g.compute_queue()
        with _time_limit(5):
            q.submit(pm4.indirect_buffer(ibm.va, 6))
        assert [(f.kind, f.queue) for f in g.faults] == [("runaway", q.name)]


def test_non_returning_atomic_does_not_replace_the_returned_value(gpu, buf):
    buf.u32()[0], buf.u32()[1] = 10, 20
    q = gpu.compute_queue()
    q.submit(pm4.atomic_mem(buf.va, ADD, 1) + pm4.atomic_mem(buf.va + 4, ADD + 0x40, 1)
             + pm4.copy_data(0, buf.va + 8, src_sel=6, dst_sel=5))
    no_faults(gpu)
    assert list(buf.u32()[:3]) == [11, 21, 10]


def test_shader_type_compute_bit_is_accepted(gpu, buf):
    """3.1: header bit 1 = PACKET3_COMPUTE; MEC queues accept it set or clear."""
    q = gpu.compute_queue()
    stream = pm4.write_data(buf.va, [1]) + pm4.release_mem(buf.va + 8, 2) + pm4.nop(2)
    for i in (0, 5, 13):
        stream[i] |= 2
    q.submit(stream)
    no_faults(gpu)
    assert buf.u32()[0] == 1 and buf.u32()[2] == 2


def test_doorbell_rung_from_an_interrupt_handler_runs_in_the_same_progress_point(gpu, buf):
    q1, q2 = gpu.compute_queue(), gpu.compute_queue()

    def on_irq(irq):
        if irq.source == "cp_eop" and irq.ctxid == 1:
            q2.submit(pm4.write_data(buf.va + 4, [2]))

    gpu.interrupt_handlers.append(on_irq)
    q1.submit(pm4.release_mem(buf.va, 1, int_sel=2, ctxid=1))
    no_faults(gpu)
    assert list(buf.u32()[:2]) == [1, 2]


def test_vm_fault_raises_a_vm_fault_interrupt_carrying_the_fault(gpu, buf):
    bad = buf.va + 0x40_0000
    q = gpu.compute_queue()
    q.submit(pm4.release_mem(bad, 1))
    f = only_fault(gpu, q)
    irqs = [i for i in gpu.interrupts if i.source == "vm_fault"]
    assert len(irqs) == 1 and irqs[0].fault is f and irqs[0].queue == q.name
    assert f.address == bad and f.access == "write" and f.is_vm_fault


def test_random_policy_explores_different_interleavings():
    orders = set()
    for seed in range(12):
        with EmulatedGPU(target="gfx1100", seed=seed, policy="random", autorun=False) as g:
            b = g.alloc(4096)
            qs = [g.compute_queue(), g.compute_queue()]
            for n, q in enumerate(qs):
                q.submit(sum((pm4.write_data(b.va + 64 * n + 4 * i, [i]) for i in range(6)), []))
            g.run()
            no_faults(g)
            orders.add(tuple(line.split()[1] for line in g.trace_lines() if "WRITE_DATA" in line))
            assert list(b.u32()[:6]) == list(range(6)) and list(b.u32()[16:22]) == list(range(6))
    assert len(orders) > 1


# -- DISPATCH_DIRECT with a recording shader core: the register state handed over (4.1-4.3) -------------------

class RecordingCore:
    """A shader core that records what the CP launches and runs nothing (the launch finishes at once)."""

    def __init__(self):
        self.calls = []

    def launch(self, queue, d, policy=None):
        self.calls.append((queue.name, d))
        return None


RSRC3_REG = {"gfx1100": 0x2E28, "gfx942": 0x2E2D}


def _dispatch_state(code_va, *, rsrc2, num_thread=(64, 1, 1), start=(0, 0, 0), user=(), rsrc3_reg=0x2E28):
    return (pm4.set_sh_reg(0x2E0C, [(code_va >> 8) & 0xFFFFFFFF, code_va >> 40])  # COMPUTE_PGM_LO/HI
            + pm4.set_sh_reg(0x2E12, [0x00AC0000 | 7, rsrc2])                      # COMPUTE_PGM_RSRC1/2
            + pm4.set_sh_reg(rsrc3_reg, [0x11])                                   # COMPUTE_PGM_RSRC3
            + pm4.set_sh_reg(0x2E18, [0x00401000])                                # COMPUTE_TMPRING_SIZE
            + pm4.set_sh_reg(0x2E10, [0x12345, 0x7])                              # DISPATCH_SCRATCH_BASE_LO/HI
            + pm4.set_sh_reg(0x2E1B, [0, 0, 0])                                   # COMPUTE_RESTART_X..Z
            + (pm4.set_sh_reg(0x2E40, list(user)) if user else [])                # COMPUTE_USER_DATA_*
            + pm4.set_sh_reg(0x2E15, [0])                                         # COMPUTE_RESOURCE_LIMITS
            + pm4.set_sh_reg(0x2E04, [*start, *num_thread, 0, 0]))               # START_X..Z, NUM_THREAD_X..Z


@pytest.mark.parametrize("target, initiator, wave", [("gfx1100", 0x8005, 32), ("gfx1100", 0x5, 64),
                                                     ("gfx942", 0x5, 64)])
def test_dispatch_hands_the_programmed_state_to_the_shader_core(target, initiator, wave):
    with EmulatedGPU(target=target, seed=0) as g:
        core = g.shader_core = RecordingCore()
        code = g.alloc(1 << 16, executable=True, align=1 << 16, name="code")
        # RSRC2: USER_SGPR = 4 in [5:1] (0x8), TGID_X_EN bit 7 (0x80), LDS_SIZE = 3 granules in [23:15]
        rsrc2 = 4 << 1 | 1 << 7 | 3 << 15
        q = g.compute_queue()
        q.submit(_dispatch_state(code.va + 0x100, rsrc2=rsrc2, num_thread=(64, 2, 1), start=(5, 6, 7),
                                 user=(0xA, 0xB, 0xC, 0xD, 0xE), rsrc3_reg=RSRC3_REG[target])
                 + pm4.dispatch_direct(4, 3, 2, initiator) + pm4.cs_partial_flush())
        no_faults(g)
        [(qname, d)] = core.calls
        assert qname == q.name and d.queue == q.name
        assert d.pgm_addr == code.va + 0x100
        assert d.rsrc1 == 0x00AC0007 and d.rsrc2 == rsrc2 and d.rsrc3 == 0x11
        assert d.user_data == [0xA, 0xB, 0xC, 0xD]  # USER_SGPR = 4 of the 5 programmed
        assert d.groups == (4, 3, 2) and d.group_size == (64, 2, 1) and d.partial_size == (0, 0, 0)
        assert d.start == (0, 0, 0)  # FORCE_START_AT_000 (bit 2) ignores START_X/Y/Z
        assert d.wave_size == wave
        assert d.lds_bytes == 3 * 512
        assert d.scratch_base == (0x7 << 32 | 0x12345) << 8
        assert d.tmpring_size == 0x00401000 and d.initiator == initiator
        # the CP copies the packet into COMPUTE_DISPATCH_INITIATOR and COMPUTE_DIM_X/Y/Z
        assert [q.regs.get(r) for r in (0x2E00, 0x2E01, 0x2E02, 0x2E03)] == [initiator, 4, 3, 2]


def test_dispatch_start_registers_and_thread_dimensions():
    with EmulatedGPU(target="gfx1100", seed=0) as g:
        core = g.shader_core = RecordingCore()
        code = g.alloc(4096, executable=True)
        q = g.compute_queue()
        state = _dispatch_state(code.va, rsrc2=0, num_thread=(64, 4, 1), start=(5, 6, 7))
        # initiator COMPUTE_SHADER_EN | PARTIAL_TG_EN (bit 1) | USE_THREAD_DIMENSIONS (bit 5), no FORCE_START
        q.submit(state + pm4.dispatch_direct(100, 8, 3, 0x23))
        no_faults(g)
        [(_, d)] = core.calls
        assert d.start == (5, 6, 7)
        assert d.groups == (2, 2, 3) and d.partial_size == (36, 0, 0)
        assert d.user_data == []


def test_dispatch_pgm_hi_uses_only_bits_7_0():
    with EmulatedGPU(target="gfx1100", seed=0) as g:
        core = g.shader_core = RecordingCore()
        code = g.alloc(4096, executable=True)
        q = g.compute_queue()
        q.submit(_dispatch_state(code.va, rsrc2=0) + pm4.set_sh_reg(0x2E0D, [0xAB00 | (code.va >> 40)])
                 + pm4.dispatch_direct(1, 1, 1, 0x5))
        no_faults(g)
        assert core.calls[0][1].pgm_addr == code.va


@pytest.mark.parametrize("target, initiator", [("gfx942", 0x8005), ("gfx1100", 0x8004), ("gfx942", 0x4)],
                         ids=["w32-on-gfx942", "no-shader-en", "no-shader-en-gfx942"])
def test_dispatch_with_a_reserved_or_empty_initiator_is_a_decode_error(target, initiator):
    with EmulatedGPU(target=target, seed=0) as g:
        core = g.shader_core = RecordingCore()
        code = g.alloc(4096, executable=True)
        q = g.compute_queue()
        q.submit(_dispatch_state(code.va, rsrc2=0, rsrc3_reg=RSRC3_REG[target])
                 + pm4.dispatch_direct(1, 1, 1, initiator))
        f = only_fault(g, q)
        assert f.kind == "decode error" and "DISPATCH_DIRECT" in f.packet and core.calls == []


def test_dispatch_user_sgprs_beyond_16_are_ignored():
    with EmulatedGPU(target="gfx1100", seed=0) as g:
        core = g.shader_core = RecordingCore()
        code = g.alloc(4096, executable=True)
        q = g.compute_queue()
        q.submit(_dispatch_state(code.va, rsrc2=20 << 1, user=range(100, 116)) + pm4.dispatch_direct(1, 1, 1, 0x5))
        no_faults(g)
        assert core.calls[0][1].user_data == list(range(100, 116))


def test_dispatch_costs_virtual_time_per_wave():
    with EmulatedGPU(target="gfx1100", seed=0) as g:
        core = g.shader_core = RecordingCore()
        code, b = g.alloc(4096, executable=True), g.alloc(4096)
        q = g.compute_queue()
        q.submit(_dispatch_state(code.va, rsrc2=0) + pm4.release_mem(b.va, data_sel=3)
                 + pm4.dispatch_direct(40, 1, 1, 0x5) + pm4.release_mem(b.va + 8, data_sel=3))
        no_faults(g)
        t0, t1 = int(b.u64()[0]), int(b.u64()[1])
        [(_, d)] = core.calls
        waves = 40 * -(-(d.group_size[0] * d.group_size[1] * d.group_size[2]) // d.wave_size)
        assert waves >= 40 and t1 - t0 == 2 * g.cost.packet + waves * g.cost.wave


def test_the_trace_does_not_keep_executed_indirect_buffers_alive():
    """The trace keeps each packet's dwords and where it was, not the Stream (whose dword cache is the whole IB):
    1 MiB IBs that chain away after their first packet, run 30 times, must not stay in memory (issue 22)."""
    import tracemalloc
    with EmulatedGPU(target="gfx1100", seed=0) as g:
        tail, out = g.alloc(4096), g.alloc(4096)
        tail.u32()[:5] = pm4.write_data(out.va, [1])
        big = g.alloc(1 << 20)
        big.u32()[:4] = pm4.indirect_buffer(tail.va, 5, chain=1)
        q = g.compute_queue()
        q.submit(pm4.indirect_buffer(big.va, (1 << 20) // 4))  # warm up
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(30):
                q.submit(pm4.indirect_buffer(big.va, (1 << 20) // 4))
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        no_faults(g)
        assert out.u32()[0] == 1
        assert grown < 8 << 20, grown  # each run's cached IB alone would be ~2 MiB of list
        assert "IB at 0x" in "\n".join(g.trace_lines())  # the trace still says where each packet was
