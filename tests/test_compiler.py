"""hcqsim.compiler: LLVM IR -> AMDGPU code objects through llvmlite, and the instruction assembler.

Expected values come from ISA_FACTS (4.3 ELF and kernel descriptor, 5.x encodings), not from our code.
"""
import io
import struct
import time

import pytest
from elftools.elf.elffile import ELFFile

from hcqsim import compiler
from hcqsim.compiler import (AssemblerUnavailableError, assemble_instructions, assemble_listing, compile_llvm,
                             target_machine)

from ir_samples import VADD  # noqa: E402  (tests/ir_samples.py)

EM_AMDGPU = 224


def elf_header(obj: bytes):
    return ELFFile(io.BytesIO(obj)).header


def assembler_or_skip(arch):
    try:
        compiler.assembler_for(arch)
    except AssemblerUnavailableError as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("arch,e_flags", [("gfx1100", 0x41), ("gfx942", 0x54C)])
def test_vadd_compiles_to_relocatable_amdgpu_hsa_elf(arch, e_flags):
    obj = compile_llvm(VADD, arch)
    h = elf_header(obj)
    assert (h["e_type"], h["e_machine"], h["e_flags"]) == ("ET_REL", "EM_AMDGPU", e_flags)
    assert obj[7] == 64  # EI_OSABI = AMDGPU_HSA (pyelftools names 64 after ARM)


def test_object_is_code_object_v6():
    assert compile_llvm(VADD, "gfx1100")[8] == 4  # EI_ABIVERSION 4 = code object v6 (ISA_FACTS 4.3)


def test_listing_has_kernel_code_and_descriptor_directives():
    listing = assemble_listing(VADD, "gfx1100")
    assert ".amdhsa_kernel vadd" in listing
    assert ".amdhsa_user_sgpr_count 13" in listing
    assert "v_add_f32_e32" in listing and "global_store_b32" in listing


def test_listing_and_object_from_the_same_ir_text_both_emit():
    # one parsed module emitted twice aborts the process inside LLVM: each emit parses again
    assert "s_endpgm" in assemble_listing(VADD, "gfx942")
    assert compile_llvm(VADD, "gfx942")[:4] == b"\x7fELF"
    assert "s_endpgm" in assemble_listing(VADD, "gfx942")


def test_target_machine_is_cached_per_arch_and_opt():
    assert target_machine("gfx1100", 2) is target_machine("gfx1100", 2)
    assert target_machine("gfx1100", 0) is not target_machine("gfx1100", 2)


def test_small_kernel_compiles_quickly_with_the_cached_target_machine():
    compile_llvm(VADD, "gfx1100")
    start = time.perf_counter()
    for _ in range(10):
        compile_llvm(VADD, "gfx1100")
    assert time.perf_counter() - start < 5.0


def test_ir_that_does_not_parse_raises_value_error_naming_arch_and_llvm_message():
    with pytest.raises(ValueError, match=r"(?s)gfx1100.*expected type"):
        compile_llvm("define void @f( {", "gfx1100")


def test_ir_that_does_not_verify_raises_value_error():
    bad = "define i32 @f(i32 %a) {\nentry:\n  %b = add i32 %c, 1\n  %c = add i32 %a, 1\n  ret i32 %b\n}\n"
    with pytest.raises(ValueError, match=r"(?s)gfx942.*does not dominate"):
        compile_llvm(bad, "gfx942")


def test_listing_of_bad_ir_raises_value_error():
    with pytest.raises(ValueError, match="gfx1100"):
        assemble_listing("this is not IR", "gfx1100")


def test_unknown_processor_raises_value_error():
    with pytest.raises(ValueError, match="gfx9999"):
        compile_llvm(VADD, "gfx9999")


def test_malformed_processor_name_raises_value_error():
    with pytest.raises(ValueError, match="processor name"):
        compile_llvm(VADD, "rdna3")


def test_optimisation_level_outside_0_to_3_raises_value_error():
    with pytest.raises(ValueError, match="0..3"):
        compile_llvm(VADD, "gfx1100", opt=4)


def test_ir_for_another_triple_raises_value_error():
    with pytest.raises(ValueError, match="x86_64"):
        compile_llvm('target triple = "x86_64-unknown-linux-gnu"\n' + VADD, "gfx1100")


def test_ir_passes_let_llvm_infer_no_implicit_input_attributes():
    # the O2 IR pipeline runs the AMDGPU attributor: no dispatch ptr, queue ptr, dispatch id; padded to 15
    listing = assemble_listing(VADD, "gfx1100", ir_passes=True)
    assert ".amdhsa_user_sgpr_dispatch_ptr 0" in listing
    assert ".amdhsa_user_sgpr_count 15" in listing


# ---------------------------------------------------------------------------------------------------
# assembling instruction text (the encoding oracle)


def test_vopd_pair_assembles_to_the_encoding_in_the_facts():
    assembler_or_skip("gfx1100")
    code = assemble_instructions(["v_dual_mov_b32 v1, 0 :: v_dual_and_b32 v4, 0x3ff, v0"], "gfx1100")
    assert code == struct.pack("<3I", 0xCA240080, 0x010400FF, 0x000003FF)  # ISA_FACTS 5.2


def test_gfx11_smem_load_has_the_facts_field_layout():
    assembler_or_skip("gfx1100")
    lo, hi = struct.unpack("<2I", assemble_instructions(["s_load_b64 s[0:1], s[4:5], 0x10"], "gfx1100"))
    assert lo >> 26 == 0x3D  # SMEM
    assert lo & 0x3F == 2  # sbase = SGPR pair s[4:5] / 2
    assert (lo >> 6) & 0x7F == 0  # sdata s0
    assert hi & 0x1FFFFF == 0x10  # offset [52:32]
    assert hi >> 25 == 124  # soffset = NULL


def test_vop2_literal_appends_one_dword():
    assembler_or_skip("gfx1100")
    lo, lit = struct.unpack("<2I", assemble_instructions(["v_and_b32_e32 v0, 0x3ff, v0"], "gfx1100"))
    assert lo >> 31 == 0 and lo & 0x1FF == 255 and lit == 0x3FF


def test_gfx942_vop3_and_smem_use_the_gfx9_prefixes():
    assembler_or_skip("gfx942")
    code = assemble_instructions(["v_lshl_add_u64 v[0:1], v[0:1], 2, s[0:1]", "s_load_dwordx2 s[0:1], s[4:5], 0x10"],
                                 "gfx942")
    vop3, _, smem, _ = struct.unpack("<4I", code)
    assert vop3 >> 26 == 0x34 and smem >> 26 == 0x30  # ISA_FACTS 5.3


def test_instruction_that_does_not_assemble_raises_value_error():
    assembler_or_skip("gfx1100")
    with pytest.raises(ValueError, match=r"(?s)gfx1100.*invalid instruction"):
        assemble_instructions(["v_bogus_b32 v1, v2"], "gfx1100")


def test_no_assembler_raises_assembler_unavailable_error(monkeypatch):
    monkeypatch.setattr(compiler, "_llvmlite_can_assemble", False)
    monkeypatch.setattr(compiler, "_llvm_mc_for", {})
    monkeypatch.setenv("HCQSIM_LLVM_MC", "/nonexistent/llvm-mc")
    with pytest.raises(AssemblerUnavailableError, match="gfx1100"):
        assemble_instructions(["s_endpgm"], "gfx1100")


def test_llvmlite_module_asm_runs_in_a_child_so_a_missing_asm_parser_cannot_abort_us():
    # llvmlite 0.50 has no AMDGPU asm parser: LLVM aborts in the child, we get None (or the bytes, if it has one)
    text = compiler._assemble_llvmlite(["v_dual_mov_b32 v1, 0 :: v_dual_and_b32 v4, 0x3ff, v0"], "gfx1100")
    assert text in (None, struct.pack("<3I", 0xCA240080, 0x010400FF, 0x000003FF))


def test_module_asm_text_is_escaped():
    ir = compiler._module_asm_ir(['s_nop 0 ; "quoted" \\'])
    assert 'module asm ".text"' in ir and '\\22quoted\\22 \\5C"' in ir
