"""Instruction forms whose meaning is easy to get subtly wrong, each pinned by one behaviour (the IR fuzzer
and the instruction tests found the first three wrong)."""
import numpy as np

from isa_harness import LANES, run_instruction


def lanes_of(arch: str, value: int) -> np.ndarray:
    return np.full(LANES[arch], value, np.uint32)


def test_a_packed_integer_inline_constant_is_a_32_bit_value_so_its_high_half_is_zero():
    st = run_instruction("gfx1100", "v_pk_sub_u16 v2, v10, 5", waves=1, v={10: lanes_of("gfx1100", 0x00080010)})
    assert st.W.v[0, 2, 0] == 0x0008000B  # <0x10 - 5, 8 - 0>


def test_a_negative_packed_integer_inline_constant_is_sign_extended_into_both_halves():
    st = run_instruction("gfx942", "v_pk_add_u16 v2, v10, -1", waves=1, v={10: lanes_of("gfx942", 0x00080010)})
    assert st.W.v[0, 2, 0] == 0x0007000F


def test_a_packed_f16_inline_float_constant_has_its_value_in_the_low_half_only():
    st = run_instruction("gfx1100", "v_pk_add_f16 v2, v10, 1.0", waves=1, v={10: lanes_of("gfx1100", 0x3C003C00)})
    assert st.W.v[0, 2, 0] == 0x3C004000  # <1 + 1, 1 + 0>


def test_op_sel_hi_zero_reads_the_low_half_of_a_packed_constant_for_both_results():
    st = run_instruction("gfx1100", "v_pk_add_f16 v2, v10, 1.0 op_sel_hi:[1,0]", waves=1,
                         v={10: lanes_of("gfx1100", 0x3C003C00)})
    assert st.W.v[0, 2, 0] == 0x40004000


def test_gfx942_packed_f32_add_takes_each_result_dword_from_the_dwords_op_sel_picks():
    st = run_instruction("gfx942", "v_pk_add_f32 v[2:3], v[10:11], v[12:13] op_sel:[1,0] op_sel_hi:[0,1]", waves=1,
                         v={10: lanes_of("gfx942", 0x3F800000), 11: lanes_of("gfx942", 0x40000000),
                            12: lanes_of("gfx942", 0x40400000), 13: lanes_of("gfx942", 0x40800000)})
    got = st.W.v[0, 2:4, 0].view(np.float32)
    assert list(got) == [2.0 + 3.0, 1.0 + 4.0]


def test_v_swap_exchanges_the_two_registers():
    st = run_instruction("gfx942", "v_swap_b32 v2, v10", waves=1,
                         v={2: lanes_of("gfx942", 0x11112222), 10: lanes_of("gfx942", 0x33334444)})
    assert (st.W.v[0, 2, 0], st.W.v[0, 10, 0]) == (0x33334444, 0x11112222)


def test_v_swap_b16_exchanges_register_halves_and_keeps_the_other_halves():
    st = run_instruction("gfx1100", "v_swap_b16 v2.h, v10.l", waves=1,
                         v={2: lanes_of("gfx1100", 0x11112222), 10: lanes_of("gfx1100", 0x33334444)})
    assert (st.W.v[0, 2, 0], st.W.v[0, 10, 0]) == (0x44442222, 0x33331111)


def test_src_shared_base_read_as_64_bits_is_the_whole_aperture_address():
    st = run_instruction("gfx1100", "s_mov_b64 s[30:31], src_shared_base", waves=1)
    assert (int(st.W.s[0, 31]) << 32 | int(st.W.s[0, 30])) == 1 << 48


def test_v_pk_mov_reads_both_sources_before_writing_a_destination_that_is_one_of_them():
    """Found by the IR fuzzer (gfx942 O0 shufflevector): the high result read the already written low dword."""
    st = run_instruction("gfx942", "v_pk_mov_b32 v[2:3], s[20:21], v[2:3] op_sel:[1,0]", waves=1,
                         v={2: lanes_of("gfx942", 7), 3: lanes_of("gfx942", 9)}, s={20: 42, 21: 0xFF4})
    assert (st.W.v[0, 2, 0], st.W.v[0, 3, 0]) == (0xFF4, 7)


def test_v_pack_b32_f16_puts_s0_in_the_low_half_and_s1_in_the_high_half():
    st = run_instruction("gfx1100", "v_pack_b32_f16 v2, v10.h, -v12.l", waves=1,
                         v={10: lanes_of("gfx1100", 0x3C00BC00), 12: lanes_of("gfx1100", 0x00004000)})
    assert st.W.v[0, 2, 0] == 0xC0003C00  # low: v10.h = 1.0; high: -(v12.l = 2.0)


def test_v_cvt_pk_u16_and_i16_f32_truncate_and_saturate_each_half():
    """f32_to_u16 / f32_to_i16: round toward zero, saturate, NaN -> 0 (LLVM lowers fptoui.sat/fptosi.sat
    <2 x i16> to these; the IR fuzzer checks that lowering end to end)."""
    cases = [(2.9, 70000.0, 0xFFFF0002, 0x7FFF0002), (-3.7, float("nan"), 0x00000000, 0x0000FFFD),
             (65535.5, -40000.0, 0x0000FFFF, 0x80007FFF)]
    for a, b, want_u, want_i in cases:
        v = {10: lanes_of("gfx1100", int(np.float32(a).view(np.uint32))),
             12: lanes_of("gfx1100", int(np.float32(b).view(np.uint32)))}
        assert run_instruction("gfx1100", "v_cvt_pk_u16_f32 v2, v10, v12", waves=1, v=v).W.v[0, 2, 0] == want_u
        assert run_instruction("gfx1100", "v_cvt_pk_i16_f32 v2, v10, v12", waves=1, v=v).W.v[0, 2, 0] == want_i


def test_a_16_bit_op_reading_an_aperture_constant_reads_the_low_half_of_its_32_bit_value():
    """src_shared_limit reads as the 32-bit register value 0x00010000 (the high half of the aperture limit
    0x0001_0000_ffff_ffff; issue 22: an "internal emulator error" before); a 16-bit operand takes bits 15:0 of it,
    as of any 32-bit register."""
    for arch, line in (("gfx942", "v_add_u16_e32 v2, src_shared_limit, v10"),
                       ("gfx1100", "v_add_nc_u16 v2.l, src_shared_limit, v10.l")):
        st = run_instruction(arch, line, waves=1, v={2: lanes_of(arch, 0xAAAA0000), 10: lanes_of(arch, 0x00050003)})
        low = int(st.W.v[0, 2, 0]) & 0xFFFF
        assert low == 0x0000 + 3, (arch, hex(int(st.W.v[0, 2, 0])))
    st = run_instruction("gfx942", "v_add_f16_e32 v2, src_shared_base, v10", waves=1,
                         v={10: lanes_of("gfx942", 0x3C00)})  # 0x0000 (+0.0) + 1.0
    assert int(st.W.v[0, 2, 0]) == 0x3C00


def test_a_packed_16_bit_op_reads_both_halves_of_an_aperture_constant():
    st = run_instruction("gfx942", "v_pk_add_u16 v2, src_private_base, v10", waves=1,
                         v={10: lanes_of("gfx942", 0x00050003)})
    assert int(st.W.v[0, 2, 0]) == 0x00070003  # src_private_base = 0x00020000: <0x0000 + 3, 0x0002 + 5>


def test_vopd_halves_flush_denormals_in_a_flushing_mode():
    """MODE.FP_DENORM f32 = 0 flushes the sources and results of each VOPD half as of the VOP2 form (the VOPD path
    kept denormals before)."""
    line = "v_dual_add_f32 v2, v10, v12 :: v_dual_mul_f32 v3, v13, v15"  # VOPD: sources in different banks
    v = {10: lanes_of("gfx1100", 0x00000001), 12: lanes_of("gfx1100", 0x00000000),  # denormal + 0
         13: lanes_of("gfx1100", 0x00800000), 15: lanes_of("gfx1100", 0x3F000000)}  # 2^-126 * 0.5: a denormal
    kept = run_instruction("gfx1100", line, waves=1, v=v)
    assert (int(kept.W.v[0, 2, 0]), int(kept.W.v[0, 3, 0])) == (0x00000001, 0x00400000)
    flushed = run_instruction("gfx1100", line, waves=1, v=v, mode=0x3C0)
    assert (int(flushed.W.v[0, 2, 0]), int(flushed.W.v[0, 3, 0])) == (0, 0)


def test_vopd_halves_read_their_sources_before_either_writes():
    """Found writing the test above: a v_dual_mov result was a view of its source register, so the other half's
    write changed it (the swap gave both registers the same value)."""
    st = run_instruction("gfx1100", "v_dual_mov_b32 v2, v3 :: v_dual_mov_b32 v3, v2", waves=1,
                         v={2: lanes_of("gfx1100", 0x11111111), 3: lanes_of("gfx1100", 0x22222222)})
    assert (int(st.W.v[0, 2, 0]), int(st.W.v[0, 3, 0])) == (0x22222222, 0x11111111)
