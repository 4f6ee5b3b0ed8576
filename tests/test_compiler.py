"""hcqsim.compiler: LLVM IR -> AMDGPU code objects through llvmlite, and the instruction assembler.

Expected values come from ISA_FACTS (4.3 ELF and kernel descriptor, 5.x encodings), not from our code.
"""
import io
import struct
import subprocess
import time

import pytest
from elftools.elf.elffile import ELFFile

from hcqsim import compiler
from hcqsim.compiler import (AssemblerUnavailableError, assemble_each, assemble_instructions, assemble_listing,
                             assembler_for, compile_llvm, target_machine)

from ir_samples import VADD  # noqa: E402  (tests/ir_samples.py)

EM_AMDGPU = 224


def elf_header(obj: bytes):
    return ELFFile(io.BytesIO(obj)).header


def assembler_or_skip(arch):
    try:
        assembler_for(arch)
    except AssemblerUnavailableError as e:
        pytest.skip(str(e))


VOPD = "v_dual_mov_b32 v1, 0 :: v_dual_and_b32 v4, 0x3ff, v0"
VOPD_CODE = struct.pack("<3I", 0xCA240080, 0x010400FF, 0x000003FF)  # ISA_FACTS 5.2


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
    code = assemble_instructions([VOPD], "gfx1100")
    assert code == VOPD_CODE
    assert assemble_each([VOPD], "gfx1100") == [(VOPD_CODE, VOPD)]


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


def test_gfx11_assembles_the_true16_operands_llvm_codegen_emits():
    # v_add_f16_e32 v1.l, 0.5, v2.l: VOP2 op 0x32, src0 = 0.5 (240), vsrc1 = v2, vdst = v1
    assembler_or_skip("gfx1100")
    code = struct.pack("<I", 0x32 << 25 | 1 << 17 | 2 << 9 | 240)
    assert assemble_each(["v_add_f16_e32 v1.l, 0.5, v2.l"], "gfx1100") == [(code, "v_add_f16_e32 v1.l, 0.5, v2.l")]


def test_instruction_that_does_not_assemble_raises_value_error():
    assembler_or_skip("gfx1100")
    with pytest.raises(ValueError, match=r"(?s)gfx1100.*invalid instruction"):
        assemble_instructions(["v_bogus_b32 v1, v2"], "gfx1100")


def test_error_names_the_line_that_does_not_assemble():
    assembler_or_skip("gfx1100")
    with pytest.raises(ValueError, match=r"line 2 'v_bogus_b32 v1, v2': invalid instruction"):
        assemble_instructions("s_nop 0\nv_bogus_b32 v1, v2\ns_endpgm", "gfx1100")


def test_assemble_each_gives_each_line_its_bytes_and_canonical_text():
    assembler_or_skip("gfx1100")
    lines = ["s_mov_b32 s1, 0x12345678", "v_bogus_b32 v1, v2", "v_add_f32 v1, v2, v3", "s_nop 0 ; a comment",
             "s_endpgm"]
    got = assemble_each(lines, "gfx1100")
    assert got[0] == (struct.pack("<2I", 0xBE8100FF, 0x12345678), "s_mov_b32 s1, 0x12345678")
    assert got[1][0] is None and "invalid instruction" in got[1][1]  # a rejected line spoils no other
    assert got[2] == (struct.pack("<I", 0x06020702), "v_add_f32_e32 v1, v2, v3")  # LLVM's canonical spelling
    assert got[3] == (struct.pack("<I", 0xBF800000), "s_nop 0")
    assert got[4] == (struct.pack("<I", 0xBFB00000), "s_endpgm")
    assert b"".join(code for code, _ in got if code) == assemble_instructions(lines[:1] + lines[2:], "gfx1100")


def test_assemble_each_resolves_branches_and_rejects_lines_only_the_object_stage_rejects():
    assembler_or_skip("gfx1100")
    got = assemble_each(["top:", "s_nop 0", "s_branch top", "s_branch nowhere", ".long 5"], "gfx1100")
    assert got[0] == (b"", "top:")
    assert got[2] == (struct.pack("<I", 0xBFA0FFFE), "s_branch top")  # -2 dwords from the next instruction
    assert got[3][0] is None and "nowhere" in got[3][1]
    assert got[4] == (struct.pack("<I", 5), ".long 5")
    assert assemble_each([], "gfx1100") == [] and assemble_instructions([], "gfx1100") == b""


def test_thousands_of_lines_take_a_few_assembler_runs(monkeypatch):
    assembler_or_skip("gfx1100")
    runs = []
    real_run = subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: runs.append(a[0]) or real_run(*a, **k))
    lines = [f"v_add_nc_u32 v{i % 200}, s{i % 100}, v{(i + 1) % 200}" for i in range(3000)] + ["v_bogus v1"]
    start = time.perf_counter()
    got = assemble_each(lines, "gfx1100")
    assert len(runs) == 2 and time.perf_counter() - start < 10.0
    assert all(len(code) == 4 for code, _ in got[:-1]) and got[-1][0] is None
    assert got[1] == (struct.pack("<I", 0x4A000000 | 1 << 17 | 2 << 9 | 1), "v_add_nc_u32_e32 v1, s1, v2")


def test_lines_with_newlines_are_refused():
    with pytest.raises(ValueError, match="one instruction per line"):
        assemble_each(["s_nop 0\ns_endpgm"], "gfx1100")


def test_unknown_or_malformed_processor():
    with pytest.raises(ValueError, match="processor name"):
        assembler_for("rdna3")
    with pytest.raises(AssemblerUnavailableError, match="gfx9999"):
        assemble_instructions(["s_endpgm"], "gfx9999")


def test_no_assembler_raises_assembler_unavailable_error(monkeypatch):
    monkeypatch.setattr(compiler, "_have_ziglang", lambda: False)
    monkeypatch.setattr(compiler, "_tool_for", {})
    monkeypatch.setenv("HCQSIM_LLVM_MC", "/nonexistent/llvm-mc")
    with pytest.raises(AssemblerUnavailableError, match="gfx1100"):
        assemble_instructions(["s_endpgm"], "gfx1100")
    monkeypatch.delenv("HCQSIM_LLVM_MC")
    monkeypatch.setattr(compiler, "_llvm_mc_candidates", lambda: [])
    with pytest.raises(AssemblerUnavailableError, match=r"(?s)gfx1100.*pip install 'hcqsim\[isa\]'"):
        assemble_each(["s_endpgm"], "gfx1100")


def _llvm_mc_for_gfx1100() -> str | None:
    for path in compiler._llvm_mc_candidates():
        if compiler._probe(compiler._Tool(path, (path,), "llvm-mc"), "gfx1100"):
            return path
    return None


def test_ziglang_is_preferred_and_hcqsim_llvm_mc_overrides_it(monkeypatch):
    monkeypatch.delenv("HCQSIM_LLVM_MC", raising=False)
    if compiler._have_ziglang():
        assert assembler_for("gfx1100") == "ziglang clang -cc1as"
        assert compiler.assembler_llvm_version("gfx1100") >= (22,)
    mc = _llvm_mc_for_gfx1100()
    if mc is None:
        pytest.skip("no llvm-mc on PATH knows gfx1100: the llvm-mc path is not exercised")
    monkeypatch.setenv("HCQSIM_LLVM_MC", mc)
    assert assembler_for("gfx1100") == mc
    assert assemble_instructions([VOPD], "gfx1100") == VOPD_CODE
    assert assemble_each(["v_bogus_b32 v1", VOPD], "gfx1100")[1] == (VOPD_CODE, VOPD)


def test_llvm_mc_on_path_is_found_newest_first(monkeypatch, tmp_path):
    monkeypatch.delenv("HCQSIM_LLVM_MC", raising=False)
    for name in ("llvm-mc", "llvm-mc-19", "llvm-mc-21", "llvm-mca"):
        (tmp_path / name).write_text("#!/bin/sh\nexit 1\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert compiler._llvm_mc_candidates()[:3] == [str(tmp_path / n) for n in ("llvm-mc-21", "llvm-mc-19", "llvm-mc")]


def test_gfx11_gets_real_true16_unless_the_arch_says_otherwise():
    assert compiler._features("gfx1100") == ("gfx1100", ["+real-true16"])
    assert compiler._features("gfx1151") == ("gfx1151", ["+real-true16"])
    assert compiler._features("gfx1100:real-true16-") == ("gfx1100", ["-real-true16"])
    assert compiler._features("gfx90a:xnack+:sramecc-") == ("gfx90a", ["+xnack", "-sramecc"])
    assert compiler._features("gfx1200") == ("gfx1200", [])


def test_assemble_each_keeps_the_text_of_the_line_after_a_block_comment():
    assembler_or_skip("gfx1100")
    results = compiler.assemble_each(["s_nop 0 /* pad */", "s_endpgm"], "gfx1100")
    assert [text for _, text in results] == ["s_nop 0", "s_endpgm"]
