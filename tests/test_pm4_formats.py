"""PM4 packet formats: encode/decode round trips and hand-written golden dwords.

Every expected dword below is computed by hand from HARDWARE_FACTS.md section 3 (3.1 header formula,
3.3 bit tables) and written as a literal, never produced by hcqsim's encoder: a wrong table cannot
agree with itself. The arithmetic is spelled out next to each vector.
"""
import random
import struct

import pytest

from hcqsim import pm4

FAMILIES = ("gfx11", "gfx9")
HEADER_FIELDS = ("type", "count", "opcode")

# an arbitrary 48-bit GPU VA, 8-byte aligned: low dword 0x34567890, high dword 0x00007F12
A = 0x7F12_3456_7890
A_LO, A_HI = 0x34567890, 0x7F12
# a second one: low 0x00002000, high 0x00007F00
B = 0x7F00_0000_2000
B_LO, B_HI = 0x2000, 0x7F00


def fmt_of(family, name):
    return pm4.FORMATS[family][pm4.OP[name]]


# -- 3.1 header ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("opcode, count, expected", [
    (0x10, 0, 0xC0001000),       # 3<<30 | 0<<16 | 0x10<<8
    (0x10, 0x3FFF, 0xFFFF1000),  # 0xC0000000 | 0x3FFF0000 | 0x1000: the one-dword NOP
    (0x37, 3, 0xC0033700),       # WRITE_DATA with one data dword: count = N + 2
    (0x3C, 5, 0xC0053C00),       # WAIT_REG_MEM, 7 dwords
    (0x3F, 2, 0xC0023F00),       # INDIRECT_BUFFER, 4 dwords
    (0x49, 6, 0xC0064900),       # RELEASE_MEM, 8 dwords
    (0x58, 6, 0xC0065800),       # ACQUIRE_MEM gfx11, 8 dwords
    (0x58, 5, 0xC0055800),       # ACQUIRE_MEM gfx9, 7 dwords
    (0x76, 2, 0xC0027600),       # SET_SH_REG with two values
    (0x1E, 7, 0xC0071E00),       # ATOMIC_MEM, 9 dwords
])
def test_header_formula(opcode, count, expected):
    assert pm4.header(opcode, count) == expected
    assert expected >> 30 == 3
    assert (expected >> 16) & 0x3FFF == count
    assert (expected >> 8) & 0xFF == opcode


def test_header_shader_type_and_predicate_bits():
    assert pm4.header(0x49, 6, shader_type=1) == 0xC0064902  # bit 1
    assert pm4.header(0x49, 6, predicate=1) == 0xC0064901  # bit 0
    assert pm4.header(0x49, 6, shader_type=1, predicate=1) == 0xC0064903


def test_header_count_must_fit_14_bits():
    with pytest.raises(ValueError):
        pm4.header(0x10, 0x4000)


def test_packet_size_is_count_plus_two_and_nop_3fff_is_one_dword():
    assert pm4.packet_size(0xC0001000) == 2
    assert pm4.packet_size(0xC0053C00) == 7
    assert pm4.packet_size(0xC0064900) == 8
    assert pm4.packet_size(0xFFFF1000) == 1
    # count 0x3FFF on anything but NOP is an ordinary (huge) packet
    assert pm4.packet_size(0xFFFF3700) == 0x3FFF + 2


def test_nop_builders():
    assert pm4.nop(1) == [0xFFFF1000]
    assert pm4.nop(2) == [0xC0001000, 0]
    assert pm4.nop(5) == [0xC0031000, 0, 0, 0, 0]


# -- 3.2 opcode numbers --------------------------------------------------------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("name, opcode", [
    ("NOP", 0x10), ("DISPATCH_DIRECT", 0x15), ("DISPATCH_INDIRECT", 0x16), ("ATOMIC_MEM", 0x1E),
    ("WRITE_DATA", 0x37), ("WAIT_REG_MEM", 0x3C), ("INDIRECT_BUFFER", 0x3F), ("COPY_DATA", 0x40),
    ("EVENT_WRITE", 0x46), ("RELEASE_MEM", 0x49), ("DMA_DATA", 0x50), ("ACQUIRE_MEM", 0x58),
    ("SET_SH_REG", 0x76), ("SET_UCONFIG_REG", 0x79),
])
def test_opcode_numbers(family, name, opcode):
    assert pm4.OP[name] == opcode
    assert pm4.FORMATS[family][opcode].name == name


@pytest.mark.parametrize("family, name, size", [
    ("gfx11", "WAIT_REG_MEM", 7), ("gfx11", "INDIRECT_BUFFER", 4), ("gfx11", "RELEASE_MEM", 8),
    ("gfx11", "ACQUIRE_MEM", 8), ("gfx11", "COPY_DATA", 6), ("gfx11", "ATOMIC_MEM", 9), ("gfx11", "DMA_DATA", 7),
    ("gfx11", "DISPATCH_DIRECT", 5), ("gfx9", "RELEASE_MEM", 8), ("gfx9", "ACQUIRE_MEM", 7),
    ("gfx9", "WAIT_REG_MEM", 7), ("gfx9", "ATOMIC_MEM", 9),
])
def test_fixed_packet_sizes(family, name, size):
    assert fmt_of(family, name).size == size


# -- round trip: every format of both families -------------------------------------------------------------

ALL_FORMATS = [(fam, fmt.name) for fam in FAMILIES for fmt in pm4.FORMATS[fam].values()]


def _random_values(fmt, rng, extreme=None):
    values = {}
    for f in fmt.fields:
        if f.name in HEADER_FIELDS:
            continue
        if f.strict and f.enum:
            keys = sorted(f.enum)
            v = keys[-1] if extreme == "max" else keys[0] if extreme == "min" else rng.choice(keys)
        else:
            v = f.mask if extreme == "max" else 0 if extreme == "min" else rng.randint(0, f.mask)
        values[f.name] = v
    if fmt.payload:
        n = 0 if extreme == "min" else rng.randint(1, 6)
        if fmt.name == "EVENT_WRITE":
            n = 2 if n else 0  # an address or nothing
        values[fmt.payload] = [rng.randint(0, 0xFFFFFFFF) for _ in range(n)]
    return values


def _check_round_trip(family, name, values):
    fmt = fmt_of(family, name)
    dws = pm4.encode(name, family, **dict(values))
    assert all(0 <= d <= 0xFFFFFFFF for d in dws)
    if fmt.size is not None:
        assert len(dws) == fmt.size
    hdr = dws[0]
    assert hdr >> 30 == 3 and (hdr >> 8) & 0xFF == fmt.opcode
    assert (hdr >> 16) & 0x3FFF == len(dws) - 2
    assert pm4.packet_size(hdr) == len(dws)
    got = fmt.decode(dws)
    assert got["type"] == 3 and got["opcode"] == fmt.opcode and got["count"] == len(dws) - 2
    for k, v in values.items():
        assert got[k] == v, f"{family} {name}.{k}: encoded {v!r}, decoded {got[k]!r}"


@pytest.mark.parametrize("family, name", ALL_FORMATS)
def test_round_trip_random(family, name):
    rng = random.Random(f"{family}/{name}")
    fmt = fmt_of(family, name)
    for _ in range(40):
        _check_round_trip(family, name, _random_values(fmt, rng))


@pytest.mark.parametrize("family, name", ALL_FORMATS)
@pytest.mark.parametrize("extreme", ["max", "min"])
def test_round_trip_extremes(family, name, extreme):
    """All fields at their maximum at once: overlapping fields would corrupt each other."""
    fmt = fmt_of(family, name)
    values = _random_values(fmt, random.Random(0), extreme)
    if fmt.payload and not values[fmt.payload] and fmt.name != "EVENT_WRITE":
        values[fmt.payload] = [0]  # NOP / SET_*_REG / WRITE_DATA need at least one body dword
    _check_round_trip(family, name, values)


@pytest.mark.parametrize("family, name", ALL_FORMATS)
def test_fields_lie_inside_the_packet(family, name):
    fmt = fmt_of(family, name)
    for f in fmt.fields:
        assert 0 <= f.lo <= f.hi
        last_dw = f.dw + f.hi // 32
        if fmt.size is not None:
            assert last_dw < fmt.size, f"{name}.{f.name} reaches dword {last_dw}"
        if fmt.payload:
            assert last_dw < fmt.payload_dw, f"{name}.{f.name} overlaps the {fmt.payload} payload"


# -- golden vectors (by hand from 3.3) ---------------------------------------------------------------------

def test_golden_write_data_memory():
    # dw1: DST_SEL 5 in [11:8] -> 0x500; WR_CONFIRM bit 20 -> 0x100000; WR_ONE_ADDR bit 16 -> 0x10000
    assert pm4.write_data(A, [0xDEADBEEF, 1], wr_confirm=0) == \
        [0xC0043700, 0x00000500, A_LO, A_HI, 0xDEADBEEF, 0x00000001]
    assert pm4.write_data(A, [7], wr_confirm=1) == [0xC0033700, 0x00100500, A_LO, A_HI, 7]
    assert pm4.write_data(A, [7, 8, 9], wr_confirm=0, one_addr=1) == \
        [0xC0053700, 0x00010500, A_LO, A_HI, 7, 8, 9]
    # DST_SEL 2 (TC_L2) -> 0x200, CACHE_POLICY 3 in [26:25] -> 0x06000000, WR_CONFIRM -> 0x00100000
    assert pm4.write_data(A, [7], dst_sel=2, cache_policy=3) == [0xC0033700, 0x06100200, A_LO, A_HI, 7]


def test_golden_write_data_register():
    # DST_SEL 0 (register), dw2 = register offset COMPUTE_USER_DATA_0 = 0x2E40
    assert pm4.write_data(0x2E40, [5], dst_sel=0, wr_confirm=0) == [0xC0033700, 0x00000000, 0x2E40, 0, 5]


def test_golden_wait_reg_mem():
    # FUNCTION 3 (==) in [2:0], MEM_SPACE 1 in [5:4] -> 0x10 | 3 = 0x13
    assert pm4.wait_reg_mem(A, 5, mask=0xFF, function=3) == [0xC0053C00, 0x13, A_LO, A_HI, 5, 0xFF, 4]
    # FUNCTION 5 (>=) -> 0x15, poll interval 0x20
    assert pm4.wait_reg_mem(A, 9, function=5, poll_interval=0x20) == \
        [0xC0053C00, 0x15, A_LO, A_HI, 9, 0xFFFFFFFF, 0x20]
    # amdgpu HDP flush: OPERATION 1 in [7:6] -> 0x40, MEM_SPACE 0, FUNCTION 3: dw1 = 0x43;
    # dw2 = GPU_HDP_FLUSH_REQ 0x106, dw3 = GPU_HDP_FLUSH_DONE 0x107, REF = MASK = cp2 bit (4), interval 0x20
    assert pm4.wait_reg_mem(0x107 << 32 | 0x106, 4, mask=4, function=3, mem_space=0, operation=1,
                            poll_interval=0x20) == [0xC0053C00, 0x43, 0x106, 0x107, 4, 4, 0x20]


def test_golden_indirect_buffer():
    # dw3: IB_SIZE 16 in [19:0], VALID bit 23 -> 0x00800010; CHAIN bit 20 -> 0x00900010
    ib = 0x7F00_0000_1000
    assert pm4.indirect_buffer(ib, 16) == [0xC0023F00, 0x00001000, 0x00007F00, 0x00800010]
    assert pm4.indirect_buffer(ib, 16, chain=1) == [0xC0023F00, 0x00001000, 0x00007F00, 0x00900010]


def test_golden_event_write():
    # CS_PARTIAL_FLUSH: EVENT_TYPE 7 in [5:0], EVENT_INDEX 4 in [11:8] -> 0x407; count 0
    assert pm4.cs_partial_flush() == [0xC0004600, 0x00000407]
    # a sample event carries an address: count 2; PERFCOUNTER_SAMPLE 0x1B, index 2 -> 0x21B
    assert pm4.event_write(0x1B, 2, address=A) == [0xC0024600, 0x0000021B, A_LO, A_HI]


def test_golden_set_sh_reg_compute_pgm():
    # COMPUTE_PGM_LO is absolute 0x2E0C -> SET_SH_REG offset 0x2E0C - 0x2C00 = 0x20C; two values (LO, HI): count 2
    assert pm4.set_sh_reg(0x2E0C, [0x12345678, 0x7F]) == [0xC0027600, 0x0000020C, 0x12345678, 0x0000007F]
    # COMPUTE_USER_DATA_0 0x2E40 -> 0x240
    assert pm4.set_sh_reg(0x2E40, [1, 2, 3]) == [0xC0037600, 0x00000240, 1, 2, 3]
    # GRBM_GFX_INDEX (UCONFIG 0xC200) -> SET_UCONFIG_REG offset 0x200
    assert pm4.set_uconfig_reg(0xC200, [0xE0000000]) == [0xC0017900, 0x00000200, 0xE0000000]


# the amdgpu gfx11 fence: GCR_SEQ|GL2_WB|GLM_INV|GLM_WB|CACHE_POLICY(3)|CACHE_FLUSH_AND_INV_TS_EVENT|INDEX(5)
#   dw1 = 0x14 | 5<<8 (0x500) | GLM_WB 1<<12 (0x1000) | GLM_INV 1<<13 (0x2000) | GL2_WB 1<<21 (0x200000)
#         | SEQ bit 22 (0x400000) | CACHE_POLICY 3<<25 (0x06000000) = 0x06603514
#   dw2 = DATA_SEL 2 <<29 (0x40000000) | INT_SEL 2 <<24 (0x02000000) = 0x42000000, DST_SEL 0
#   dw3/4 = address, dw5/6 = 64-bit data 0x1_00000002, dw7 = ctxid 7
AMDGPU_FENCE_GFX11 = [0xC0064900, 0x06603514, 0x42000000, A_LO, A_HI, 0x00000002, 0x00000001, 0x00000007]


def test_golden_release_mem_amdgpu_fence_gfx11():
    got = pm4.release_mem(A, 0x1_0000_0002, data_sel=2, int_sel=2, ctxid=7, glm_wb=1, glm_inv=1, gl2_wb=1,
                          gcr_seq=1, cache_policy=3)
    assert got == AMDGPU_FENCE_GFX11
    v = fmt_of("gfx11", "RELEASE_MEM").decode(AMDGPU_FENCE_GFX11)
    assert (v["event_type"], v["event_index"]) == (0x14, 5)
    assert (v["glm_wb"], v["glm_inv"], v["gl2_wb"], v["gcr_seq"], v["cache_policy"]) == (1, 1, 1, 1, 3)
    assert (v["glv_inv"], v["gl1_inv"], v["gl2_inv"], v["gl2_us"], v["gl2_discard"]) == (0, 0, 0, 0, 0)
    assert (v["dst_sel"], v["int_sel"], v["data_sel"]) == (0, 2, 2)
    assert v["addr"] == A and v["data"] == 0x1_0000_0002 and v["int_ctxid"] == 7


def test_golden_release_mem_gfx9():
    # amdgpu gfx9 fence: TCL1_ACTION_ENA 1<<16 | TC_ACTION_ENA 1<<17 | TC_MD_ACTION_ENA 1<<21 | TC_WB_ACTION_ENA 1<<15
    #   = 0x10000 | 0x20000 | 0x200000 | 0x8000 = 0x238000, | 0x500 | 0x14 -> 0x00238514; DATA_SEL 1 -> 0x20000000
    golden = [0xC0064900, 0x00238514, 0x20000000, A_LO, A_HI, 0x0000002A, 0, 0]
    assert pm4.release_mem(A, 42, data_sel=1, family="gfx9", tcl1_action_ena=1, tc_action_ena=1,
                           tc_md_action_ena=1, tc_wb_action_ena=1) == golden
    v = fmt_of("gfx9", "RELEASE_MEM").decode(golden)
    assert (v["tcl1_action_ena"], v["tc_action_ena"], v["tc_md_action_ena"], v["tc_wb_action_ena"]) == (1, 1, 1, 1)
    assert (v["tc_nc_action_ena"], v["tc_wc_action_ena"], v["tcl1_vol_action_ena"]) == (0, 0, 0)
    # tinygrad's gfx9 signal: TC_WB 1<<15 | TC_NC 1<<19 = 0x88000 -> dw1 0x00088514
    assert pm4.release_mem(A, 1, family="gfx9", tc_wb_action_ena=1, tc_nc_action_ena=1)[1] == 0x00088514


def test_golden_release_mem_timestamp_and_interrupt_only():
    # BOTTOM_OF_PIPE_TS 0x28, index 5 -> dw1 0x528; DATA_SEL 3 (GPU clock) -> dw2 0x60000000
    assert pm4.release_mem(A, data_sel=3, event_type=0x28) == [0xC0064900, 0x528, 0x60000000, A_LO, A_HI, 0, 0, 0]
    # INT_SEL 1 (interrupt only), DATA_SEL 0 -> dw2 0x01000000; ctxid 0x1234 in dw7
    assert pm4.release_mem(0, data_sel=0, int_sel=1, ctxid=0x1234) == \
        [0xC0064900, 0x514, 0x01000000, 0, 0, 0, 0, 0x1234]


def test_golden_acquire_mem_full_sync_gfx11():
    # GCR_CNTL: GLI_INV=1 (0x1) | GLM_WB 0x10 | GLM_INV 0x20 | GLK_INV 0x80 | GLV_INV 0x100 | GL1_INV 0x200
    #           | GL2_INV 0x4000 | GL2_WB 0x8000 = 0xC3B1
    # dw1 COHER_CNTL 0, dw2 SIZE 0xFFFFFFFF, dw3 SIZE_HI 0xFF ([7:0]), dw4/5 base 0, dw6 POLL_INTERVAL 0x0A
    golden = [0xC0065800, 0, 0xFFFFFFFF, 0xFF, 0, 0, 0x0A, 0x0000C3B1]
    assert pm4.acquire_mem(gli_inv=1, glm_wb=1, glm_inv=1, glk_inv=1, glv_inv=1, gl1_inv=1, gl2_inv=1,
                           gl2_wb=1) == golden
    v = fmt_of("gfx11", "ACQUIRE_MEM").decode(golden)
    assert (v["gli_inv"], v["glm_wb"], v["glm_inv"], v["glk_inv"], v["glv_inv"], v["gl1_inv"], v["gl2_inv"],
            v["gl2_wb"]) == (1, 1, 1, 1, 1, 1, 1, 1)
    assert (v["glk_wb"], v["gl2_us"], v["gl2_range"], v["gl2_discard"], v["seq"], v["range_is_pa"]) == (0,) * 6
    assert (v["coher_size"], v["coher_size_hi"], v["poll_interval"]) == (0xFFFFFFFF, 0xFF, 0x0A)


def test_golden_acquire_mem_gfx9():
    # CP_COHER_CNTL = SH_ICACHE 1<<29 | SH_KCACHE 1<<27 | TC 1<<23 | TCL1 1<<22 | TC_WB 1<<18
    #               = 0x20000000 | 0x08000000 | 0x00800000 | 0x00400000 | 0x00040000 = 0x28C40000
    # 7 dwords: SIZE 0xFFFFFFFF, SIZE_HI 0xFFFFFF (24 bits), base 0, POLL_INTERVAL 0x0A; no GCR dword
    golden = [0xC0055800, 0x28C40000, 0xFFFFFFFF, 0x00FFFFFF, 0, 0, 0x0A]
    assert pm4.acquire_mem("gfx9", sh_icache_action_ena=1, sh_kcache_action_ena=1, tc_action_ena=1,
                           tcl1_action_ena=1, tc_wb_action_ena=1) == golden
    v = fmt_of("gfx9", "ACQUIRE_MEM").decode(golden)
    assert (v["sh_icache_action_ena"], v["sh_kcache_action_ena"], v["tc_action_ena"], v["tcl1_action_ena"],
            v["tc_wb_action_ena"]) == (1, 1, 1, 1, 1)
    assert (v["sh_kcache_wb_action_ena"], v["tc_nc_action_ena"], v["cb_action_ena"]) == (0, 0, 0)


def test_golden_copy_data():
    # SRC_SEL 2 [3:0], DST_SEL 2 [11:8] (0x200), COUNT_SEL bit 16, WR_CONFIRM bit 20 -> 0x00110202
    assert pm4.copy_data(A, B, count_sel=1) == [0xC0044000, 0x00110202, A_LO, A_HI, B_LO, B_HI]
    # immediate (SRC_SEL 5) to memory (DST_SEL 5), 32 bits, no confirm -> 0x505
    assert pm4.copy_data(0xCAFEF00D, A, src_sel=5, dst_sel=5, wr_confirm=0) == \
        [0xC0044000, 0x00000505, 0xCAFEF00D, 0, A_LO, A_HI]
    # GPU clock (SRC_SEL 9) 64 bits -> 0x00110509
    assert pm4.copy_data(0, A, src_sel=9, dst_sel=5, count_sel=1)[1] == 0x00110509


def test_golden_atomic_mem():
    # ADD_RTN_64 = 0x0F + 0x20 = 0x2F in [6:0], COMMAND 0; SRC_DATA 0x1_00000001 in dw4/5
    assert pm4.atomic_mem(A, 0x2F, 0x1_0000_0001) == [0xC0071E00, 0x2F, A_LO, A_HI, 1, 1, 0, 0, 0]
    # CMPSWAP_RTN_32 0x08, COMMAND 1 in [11:8] -> 0x108; src 5, cmp 3, LOOP_INTERVAL 0x10 in dw8
    assert pm4.atomic_mem(A, 0x08, 5, 3, command=1, loop_interval=0x10) == \
        [0xC0071E00, 0x108, A_LO, A_HI, 5, 0, 3, 0, 0x10]


def test_golden_dma_data():
    # fill: SRC_SEL 2 (DATA) in [30:29] -> 0x40000000, CP_SYNC bit 31 -> 0x80000000; dw2 = the data
    assert pm4.dma_data(A, 0xABCD1234, 256, src_sel=2) == \
        [0xC0055000, 0xC0000000, 0xABCD1234, 0, A_LO, A_HI, 256]
    # copy B -> A, 64 bytes, SAIC bit 28 -> 0x10000040, DAIC bit 29 -> 0x20000040
    assert pm4.dma_data(A, B, 64, saic=1) == [0xC0055000, 0x80000000, B_LO, B_HI, A_LO, A_HI, 0x10000040]
    assert pm4.dma_data(A, B, 64, daic=1, cp_sync=0) == [0xC0055000, 0, B_LO, B_HI, A_LO, A_HI, 0x20000040]
    # DST_SEL 3 (address via L2) [21:20] -> 0x300000, SRC_SEL 3 -> 0x60000000
    assert pm4.dma_data(A, B, 4, src_sel=3, dst_sel=3, cp_sync=0)[1] == 0x60300000


def test_golden_dispatch_direct():
    # tinygrad initiator COMPUTE_SHADER_EN | FORCE_START_AT_000 | CS_W32_EN = 0x8005
    assert pm4.dispatch_direct(4, 2, 1, 0x8005) == [0xC0031500, 4, 2, 1, 0x8005]


def test_decode_golden_write_data_and_wait():
    v = fmt_of("gfx11", "WRITE_DATA").decode([0xC0043700, 0x00110500, A_LO, A_HI, 0xDEADBEEF, 1])
    assert (v["dst_sel"], v["wr_one_addr"], v["wr_confirm"], v["engine_sel"]) == (5, 1, 1, 0)
    assert v["dst_addr"] == A and v["data"] == [0xDEADBEEF, 1]
    v = fmt_of("gfx9", "WAIT_REG_MEM").decode([0xC0053C00, 0x43, 0x106, 0x107, 4, 4, 0x20])
    assert (v["function"], v["mem_space"], v["operation"]) == (3, 0, 1)
    assert v["poll_addr"] == 0x107 << 32 | 0x106 and (v["reference"], v["mask"], v["poll_interval"]) == (4, 4, 0x20)
    v = fmt_of("gfx11", "INDIRECT_BUFFER").decode([0xC0023F00, 0x1000, 0x7F00, 0x80900010])
    assert (v["ib_base"], v["ib_size"], v["chain"], v["valid"], v["priv"]) == (0x7F00_0000_1000, 16, 1, 1, 1)


def test_decode_golden_dma_data_flags():
    v = fmt_of("gfx11", "DMA_DATA").decode([0xC0055000, 0xC0000000, 0xABCD1234, 0, A_LO, A_HI, 0x3C000100])
    assert (v["src_sel"], v["dst_sel"], v["cp_sync"]) == (2, 0, 1)
    assert v["byte_count"] == 0x100
    assert (v["sas"], v["das"], v["saic"], v["daic"], v["raw_wait"], v["dis_wc"]) == (1, 1, 1, 1, 0, 0)


def test_gfx9_atomic_field_is_six_bits():
    """3.3 ATOMIC_MEM dw1: ATOMIC = TC_OP in [6:0] on gfx11 but [5:0] on gfx9."""
    dws = [0xC0071E00, 0x7F, A_LO, A_HI, 0, 0, 0, 0, 0]
    assert fmt_of("gfx11", "ATOMIC_MEM").decode(dws, check=False)["atomic"] == 0x7F
    assert fmt_of("gfx9", "ATOMIC_MEM").decode(dws, check=False)["atomic"] == 0x3F


def test_bad_field_values_are_rejected_by_the_encoder():
    with pytest.raises(ValueError):
        pm4.indirect_buffer(A, 1 << 20)  # IB_SIZE is 20 bits
    with pytest.raises(ValueError):
        pm4.wait_reg_mem(A, 1, function=8)  # FUNCTION is 3 bits
    with pytest.raises(TypeError):
        pm4.encode("NOP", no_such_field=1)


def test_reserved_enum_values_fail_to_decode():
    from hcqsim.errors import DecodeError
    with pytest.raises(DecodeError):  # FUNCTION 7 is not a compare function
        fmt_of("gfx11", "WAIT_REG_MEM").decode([0xC0053C00, 0x17, A_LO, A_HI, 0, 0, 4])
    with pytest.raises(DecodeError):  # INT_SEL 7 is reserved
        fmt_of("gfx11", "RELEASE_MEM").decode([0xC0064900, 0x514, 0x27000000, A_LO, A_HI, 0, 0, 0])
    with pytest.raises(DecodeError):  # DATA_SEL 7 is reserved
        fmt_of("gfx11", "RELEASE_MEM").decode([0xC0064900, 0x514, 0xE0000000, A_LO, A_HI, 0, 0, 0])


# -- disassembler ------------------------------------------------------------------------------------------

def test_disassemble_names_packet_and_fields():
    text = pm4.disassemble(AMDGPU_FENCE_GFX11)
    assert text.startswith("000000: RELEASE_MEM")
    for part in ("event_type=", "event_index=", "gl2_wb=1", "glm_wb=1", "gcr_seq=1", "data_sel=", "(2)",
                 "int_sel=", f"addr=0x{A:x}", "int_ctxid=7"):
        assert part in text, part
    text = pm4.disassemble(pm4.write_data(A, [0xDEADBEEF]))
    assert "WRITE_DATA" in text and "dst_sel=" in text and "(5)" in text and f"dst_addr=0x{A:x}" in text
    assert "0xdeadbeef" in text


def test_disassemble_one_line_per_packet_with_byte_offsets():
    stream = pm4.nop(1) + pm4.cs_partial_flush() + pm4.wait_reg_mem(A, 3) + pm4.nop(3)
    lines = pm4.disassemble(stream).splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("000000: NOP")
    assert lines[1].startswith("000004: EVENT_WRITE") and "event_type=" in lines[1]
    assert lines[2].startswith("00000c: WAIT_REG_MEM") and "reference=3" in lines[2]
    assert lines[3].startswith("000028: NOP")
    # bytes give the same text as dwords
    assert pm4.disassemble(struct.pack(f"<{len(stream)}I", *stream)) == "\n".join(lines)


def test_disassemble_gfx9_cache_bits_and_unknown_opcode():
    text = pm4.disassemble(pm4.release_mem(A, 1, family="gfx9", tc_wb_action_ena=1), family="gfx9")
    assert "RELEASE_MEM" in text and "tc_wb_action_ena=1" in text
    text = pm4.disassemble([pm4.header(0xEE, 0), 0x55])
    assert "0xee" in text.lower()


def test_disassemble_truncated_stream_keeping_all_fields():
    # cut after the last field dword of WRITE_DATA: the data dwords are missing
    text = pm4.disassemble(pm4.write_data(A, [1, 2, 3])[:5])
    assert "WRITE_DATA" in text and "truncated" in text


@pytest.mark.parametrize("name, dws", [
    ("WAIT_REG_MEM", pm4.wait_reg_mem(A, 3)[:4]),
    ("RELEASE_MEM", pm4.release_mem(A, 1)[:5]),
    ("INDIRECT_BUFFER", pm4.indirect_buffer(A, 4)[:3]),
])
def test_disassemble_truncated_stream_cut_inside_fields(name, dws):
    text = pm4.disassemble(dws)
    assert name in text and "truncated" in text


@pytest.mark.parametrize("dws, name", [
    ([0xC0023C00, 0x13, A_LO, A_HI], "WAIT_REG_MEM"),  # count 2: 4 dwords, the packet has 7
    ([0xC0034900, 0x514, 0x20000000, A_LO, A_HI], "RELEASE_MEM"),  # count 3: 5 dwords of 8
])
def test_disassemble_fixed_packet_with_too_small_count(dws, name):
    text = pm4.disassemble(dws)
    assert text.startswith(f"000000: {name}")


# -- every field's bit position, from the 3.3 tables ---------------------------------------------------------
# (field, dword, hi, lo) written by hand from HARDWARE_FACTS 3.3; 64-bit addresses are (dw, 63, 0): low dword then
# high dword (the low address bits are dropped at execution, see test_pm4_engine).

_RELEASE_COMMON = [("event_type", 1, 5, 0), ("event_index", 1, 11, 8), ("cache_policy", 1, 26, 25),
                   ("execute", 1, 28, 28), ("dst_sel", 2, 17, 16), ("int_sel", 2, 26, 24), ("data_sel", 2, 31, 29),
                   ("addr", 3, 63, 0), ("data", 5, 63, 0), ("int_ctxid", 7, 31, 0)]
_COMMON_LAYOUT = {
    "WRITE_DATA": [("dst_sel", 1, 11, 8), ("wr_one_addr", 1, 16, 16), ("wr_confirm", 1, 20, 20),
                   ("cache_policy", 1, 26, 25), ("engine_sel", 1, 31, 30), ("dst_addr", 2, 63, 0)],
    "WAIT_REG_MEM": [("function", 1, 2, 0), ("mem_space", 1, 5, 4), ("operation", 1, 7, 6), ("engine_sel", 1, 9, 8),
                     ("cache_policy", 1, 26, 25), ("poll_addr", 2, 63, 0), ("reference", 4, 31, 0),
                     ("mask", 5, 31, 0), ("poll_interval", 6, 15, 0), ("optimize_ace_offload_mode", 6, 31, 31)],
    "INDIRECT_BUFFER": [("ib_base", 1, 63, 0), ("ib_size", 3, 19, 0), ("chain", 3, 20, 20),
                        ("offload_polling", 3, 21, 21), ("valid", 3, 23, 23), ("vmid", 3, 27, 24),
                        ("cache_policy", 3, 29, 28), ("priv", 3, 31, 31)],
    "EVENT_WRITE": [("event_type", 1, 5, 0), ("event_index", 1, 11, 8)],
    "SET_SH_REG": [("reg_offset", 1, 15, 0), ("vmid_shift", 1, 27, 23), ("index", 1, 31, 28)],
    "SET_UCONFIG_REG": [("reg_offset", 1, 15, 0)],
    "COPY_DATA": [("src_sel", 1, 3, 0), ("dst_sel", 1, 11, 8), ("src_cache_policy", 1, 14, 13),
                  ("count_sel", 1, 16, 16), ("wr_confirm", 1, 20, 20), ("dst_cache_policy", 1, 26, 25),
                  ("pq_exe_status", 1, 29, 29), ("src_addr", 2, 63, 0), ("dst_addr", 4, 63, 0)],
    "ATOMIC_MEM": [("command", 1, 11, 8), ("cache_policy", 1, 26, 25), ("addr", 2, 63, 0),
                   ("src_data", 4, 63, 0), ("cmp_data", 6, 63, 0), ("loop_interval", 8, 12, 0)],
    "DMA_DATA": [("engine", 1, 0, 0), ("src_cache_policy", 1, 14, 13), ("dst_sel", 1, 21, 20),
                 ("dst_cache_policy", 1, 26, 25), ("src_sel", 1, 30, 29), ("cp_sync", 1, 31, 31),
                 ("src_addr", 2, 63, 0), ("dst_addr", 4, 63, 0), ("byte_count", 6, 25, 0), ("sas", 6, 26, 26),
                 ("das", 6, 27, 27), ("saic", 6, 28, 28), ("daic", 6, 29, 29), ("raw_wait", 6, 30, 30),
                 ("dis_wc", 6, 31, 31)],
    "DISPATCH_DIRECT": [("dim_x", 1, 31, 0), ("dim_y", 2, 31, 0), ("dim_z", 3, 31, 0),
                        ("dispatch_initiator", 4, 31, 0)],
}
LAYOUT = {
    "gfx11": dict(_COMMON_LAYOUT, **{
        "RELEASE_MEM": _RELEASE_COMMON + [
            ("glm_wb", 1, 12, 12), ("glm_inv", 1, 13, 13), ("glv_inv", 1, 14, 14), ("gl1_inv", 1, 15, 15),
            ("gl2_us", 1, 16, 16), ("gl2_range", 1, 18, 17), ("gl2_discard", 1, 19, 19), ("gl2_inv", 1, 20, 20),
            ("gl2_wb", 1, 21, 21), ("gcr_seq", 1, 23, 22)],
        "ACQUIRE_MEM": [
            ("coher_cntl", 1, 30, 0), ("engine_sel", 1, 31, 31), ("coher_size", 2, 31, 0),
            ("coher_size_hi", 3, 7, 0), ("coher_base", 4, 31, 0), ("coher_base_hi", 5, 23, 0),
            ("poll_interval", 6, 15, 0), ("gli_inv", 7, 1, 0), ("gl1_range", 7, 3, 2), ("glm_wb", 7, 4, 4),
            ("glm_inv", 7, 5, 5), ("glk_wb", 7, 6, 6), ("glk_inv", 7, 7, 7), ("glv_inv", 7, 8, 8),
            ("gl1_inv", 7, 9, 9), ("gl2_us", 7, 10, 10), ("gl2_range", 7, 12, 11), ("gl2_discard", 7, 13, 13),
            ("gl2_inv", 7, 14, 14), ("gl2_wb", 7, 15, 15), ("seq", 7, 17, 16), ("range_is_pa", 7, 18, 18)],
        "ATOMIC_MEM": _COMMON_LAYOUT["ATOMIC_MEM"] + [("atomic", 1, 6, 0)],
    }),
    "gfx9": dict(_COMMON_LAYOUT, **{
        "RELEASE_MEM": _RELEASE_COMMON + [
            ("tcl1_vol_action_ena", 1, 12, 12), ("tc_vol_action_ena", 1, 13, 13), ("tc_wb_action_ena", 1, 15, 15),
            ("tcl1_action_ena", 1, 16, 16), ("tc_action_ena", 1, 17, 17), ("tc_nc_action_ena", 1, 19, 19),
            ("tc_wc_action_ena", 1, 20, 20), ("tc_md_action_ena", 1, 21, 21), ("pq_exe_status", 1, 29, 29)],
        "ACQUIRE_MEM": [
            ("tc_nc_action_ena", 1, 3, 3), ("tc_wc_action_ena", 1, 4, 4), ("tc_inv_metadata_action_ena", 1, 5, 5),
            ("tcl1_vol_action_ena", 1, 15, 15), ("tc_wb_action_ena", 1, 18, 18), ("tcl1_action_ena", 1, 22, 22),
            ("tc_action_ena", 1, 23, 23), ("cb_action_ena", 1, 25, 25), ("db_action_ena", 1, 26, 26),
            ("sh_kcache_action_ena", 1, 27, 27), ("sh_kcache_vol_action_ena", 1, 28, 28),
            ("sh_icache_action_ena", 1, 29, 29), ("sh_kcache_wb_action_ena", 1, 30, 30),
            ("coher_size", 2, 31, 0), ("coher_size_hi", 3, 23, 0), ("coher_base", 4, 31, 0),
            ("coher_base_hi", 5, 23, 0), ("poll_interval", 6, 15, 0)],
    }),
}
LAYOUT_CASES = [pytest.param(fam, name, *field, id=f"{fam}-{name}-{field[0]}")
                for fam in FAMILIES for name, fields in LAYOUT[fam].items() for field in fields]


def _bits(n, dw, hi, lo, *, invert=False):
    """n dwords with bits [hi:lo] of dword dw (hi may run into dw+1) set, or everything but them."""
    value = ((1 << (hi - lo + 1)) - 1) << lo
    dws = [(value >> (32 * i)) & 0xFFFFFFFF if 0 <= i < 3 else 0 for i in range(-dw, n - dw)]
    return [d ^ 0xFFFFFFFF for d in dws] if invert else dws


@pytest.mark.parametrize("family, name, field, dw, hi, lo", LAYOUT_CASES)
def test_field_bit_positions(family, name, field, dw, hi, lo):
    fmt = fmt_of(family, name)
    n = fmt.size or fmt.payload_dw + 1
    width = hi - lo + 1
    assert fmt.decode(_bits(n, dw, hi, lo), check=False)[field] == (1 << width) - 1, "field misses its bits"
    assert fmt.decode(_bits(n, dw, hi, lo, invert=True), check=False)[field] == 0, "field covers other bits"
    values = {field: (1 << width) - 1}
    if fmt.payload and name != "EVENT_WRITE":
        values[fmt.payload] = [0]
    got = pm4.encode(name, family, **values)  # only this field set
    assert got[1:] == _bits(len(got), dw, hi, lo)[1:]


# -- listings: register names and cut packets (golden text) ----------------------------------------------------
# Words below are literals from 3.1/3.3 and 4.1: SET_SH_REG header 0xC0027600 (count 2 = two values), dw1 =
# REG_OFFSET = absolute - 0x2C00; count = number of values.

@pytest.mark.parametrize("family, words, expected", [
    ("gfx11", [0xC0027600, 0x20C, 0x12345678, 0x9A],  # 0x2E0C - 0x2C00 = 0x20C: PGM_LO, PGM_HI
     "000000: SET_SH_REG count=2 shader_type=0 predicate=0 reg_offset=0x20c vmid_shift=0 index=0 "
     "COMPUTE_PGM_LO=0x12345678 COMPUTE_PGM_HI=0x0000009a"),
    ("gfx11", [0xC0027600, 0x207, 64, 1],  # 0x2E07: NUM_THREAD_X, _Y
     "000000: SET_SH_REG count=2 shader_type=0 predicate=0 reg_offset=0x207 vmid_shift=0 index=0 "
     "COMPUTE_NUM_THREAD_X=0x00000040 COMPUTE_NUM_THREAD_Y=0x00000001"),
    ("gfx11", [0xC0027600, 0x24E, 7, 8],  # 0x2E4E, 0x2E4F: the last two user-data registers
     "000000: SET_SH_REG count=2 shader_type=0 predicate=0 reg_offset=0x24e vmid_shift=0 index=0 "
     "COMPUTE_USER_DATA_14=0x00000007 COMPUTE_USER_DATA_15=0x00000008"),
    ("gfx11", [0xC0017600, 0x228, 5],  # RSRC3 is 0x2E28 on gfx11 ...
     "000000: SET_SH_REG count=1 shader_type=0 predicate=0 reg_offset=0x228 vmid_shift=0 index=0 "
     "COMPUTE_PGM_RSRC3=0x00000005"),
    ("gfx9", [0xC0017600, 0x22D, 5],  # ... and 0x2E2D on gfx9.4.3
     "000000: SET_SH_REG count=1 shader_type=0 predicate=0 reg_offset=0x22d vmid_shift=0 index=0 "
     "COMPUTE_PGM_RSRC3=0x00000005"),
    ("gfx9", [0xC0017600, 0x228, 5],  # 0x2E28 names nothing on gfx9: the address, not a guess
     "000000: SET_SH_REG count=1 shader_type=0 predicate=0 reg_offset=0x228 vmid_shift=0 index=0 "
     "reg_0x2e28=0x00000005"),
    ("gfx11", [0xC0017900, 0x200, 0xE0000000],  # UCONFIG 0xC000 + 0x200 = GRBM_GFX_INDEX
     "000000: SET_UCONFIG_REG count=1 shader_type=0 predicate=0 reg_offset=0x200 index=0 "
     "GRBM_GFX_INDEX=0xe0000000"),
    ("gfx11", [0xC0016900, 0x10, 3],  # SET_CONTEXT_REG (0x69), base 0xA000: listed, though compute never runs it
     "000000: SET_CONTEXT_REG count=1 shader_type=0 predicate=0 reg_offset=0x10 index=0 reg_0xa010=0x00000003"),
])
def test_register_writes_are_listed_by_register_name(family, words, expected):
    assert pm4.disassemble(words, family) == expected


def test_register_names_are_data_for_json_and_traces():
    packets, rest = pm4.decode_stream([0xC0027600, 0x212, 0xAAAA, 0xBBBB], "gfx11")  # RSRC1, RSRC2
    assert rest == b"" and len(packets) == 1
    assert packets[0].registers == [(0x2E12, "COMPUTE_PGM_RSRC1", 0xAAAA), (0x2E13, "COMPUTE_PGM_RSRC2", 0xBBBB)]
    assert packets[0].as_json()["registers"][1] == {"address": 0x2E13, "name": "COMPUTE_PGM_RSRC2", "value": 0xBBBB}


def test_a_cut_packet_shows_only_what_is_present():
    # WRITE_DATA, count 3 (one data dword): header, control (dst_sel 5 = MEM: 5 << 8), addr lo; addr hi and data cut
    text = pm4.disassemble([0xC0033700, 0x500, A_LO])
    assert text == ("000000: WRITE_DATA count=3 shader_type=0 predicate=0 dst_sel=MEM(5) wr_one_addr=0 wr_confirm=0 "
                    "cache_policy=LRU(0) engine_sel=0  (truncated: 3 of 5 dwords; missing dst_addr, data)")
    (p,), _ = pm4.decode_stream([0xC0033700, 0x500, A_LO])
    assert p.truncated and p.missing == ("dst_addr", "data") and "dst_addr" not in p.fields and "data" not in p.fields
    # cut inside the payload: the data present is shown, nothing after it
    text = pm4.disassemble([0xC0043700, 0x500, A_LO, A_HI, 0x11])  # count 4: two data dwords, one present
    assert text.endswith("dst_addr=0x7f1234567890 data=[0x00000011]  (truncated: 5 of 6 dwords)")


def test_a_count_too_small_for_a_fixed_packet_names_the_fields_outside_it():
    # RELEASE_MEM (8 dwords) with count 3: 5 dwords; DATA (dw5-6) and INT_CTXID (dw7) are not in the packet
    text = pm4.disassemble([0xC0034900, 0x514, 0x20000000, A_LO, A_HI])
    assert text.endswith("addr=0x7f1234567890  (header count 3 makes 5 dwords of 8: data, int_ctxid not in the "
                         "packet)")
    assert "data=" not in text.split("data_sel")[1] and "int_ctxid=" not in text
