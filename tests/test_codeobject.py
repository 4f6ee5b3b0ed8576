"""hcqsim.codeobject: loading AMDGPU code objects, kernel descriptors, metadata and the loadable image.

Expected descriptor values and argument offsets are those of ISA_FACTS 4.3 / 4.4 and HARDWARE_FACTS 4.4 / 4.5.
"""
import io
import os
import shutil
import struct
import subprocess

import pytest
from elftools.elf.elffile import ELFFile

from hcqsim.codeobject import CodeObject, decode_descriptor, unpack_msgpack
from hcqsim.compiler import compile_llvm

from ir_samples import DECLS, VADD, VADD_BODY, VADD_SIG  # noqa: E402  (tests/ir_samples.py)

# Every implicit input off. In LLVM 22 the workgroup id Y/Z SGPRs also need the cluster-id attributes.
NO_IMPLICIT = ('"amdgpu-no-dispatch-ptr" "amdgpu-no-queue-ptr" "amdgpu-no-dispatch-id" "amdgpu-no-implicitarg-ptr" '
               '"amdgpu-no-workgroup-id-y" "amdgpu-no-workgroup-id-z" "amdgpu-no-workitem-id-y" '
               '"amdgpu-no-workitem-id-z" "amdgpu-no-cluster-id-x" "amdgpu-no-cluster-id-y" "amdgpu-no-cluster-id-z"')
NO_IMPLICIT_EXCEPT_CLUSTER = NO_IMPLICIT.split(' "amdgpu-no-cluster-id-x"')[0]


def vadd_with(attrs: str) -> str:
    return VADD_SIG + " #0 {" + VADD_BODY + DECLS + f"attributes #0 = {{ {attrs} }}\n"


LDSREV = """
@lds = internal addrspace(3) global [256 x float] poison, align 4
define amdgpu_kernel void @ldsrev(ptr addrspace(1) %a) {
entry:
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %bid = call i32 @llvm.amdgcn.workgroup.id.x()
  %base = shl i32 %bid, 8
  %gid = add i32 %base, %tid
  %g64 = zext i32 %gid to i64
  %p = getelementptr float, ptr addrspace(1) %a, i64 %g64
  %v = load float, ptr addrspace(1) %p
  %lp = getelementptr [256 x float], ptr addrspace(3) @lds, i32 0, i32 %tid
  store float %v, ptr addrspace(3) %lp
  call void @llvm.amdgcn.s.barrier()
  %rt = sub i32 255, %tid
  %rp = getelementptr [256 x float], ptr addrspace(3) @lds, i32 0, i32 %rt
  %w = load float, ptr addrspace(3) %rp
  store float %w, ptr addrspace(1) %p
  ret void
}
"""


@pytest.fixture(scope="module")
def objs():
    """Compiled once for the whole file (compiling is the slow part)."""
    return {
        "vadd1100": compile_llvm(VADD, "gfx1100"),
        "vadd942": compile_llvm(VADD, "gfx942"),
        "bare1100": compile_llvm(vadd_with(NO_IMPLICIT), "gfx1100"),
        "bare942": compile_llvm(vadd_with(NO_IMPLICIT), "gfx942"),
        "nocluster1100": compile_llvm(vadd_with(NO_IMPLICIT_EXCEPT_CLUSTER), "gfx1100"),
        "two1100": compile_llvm(VADD + LDSREV, "gfx1100"),
    }


def load(objs, key) -> CodeObject:
    return CodeObject.from_bytes(objs[key])


# ---------------------------------------------------------------------------------------------------
# ELF patching helpers for the error and ET_DYN tests


def section_header_offset(elf_bytes: bytes, name: str) -> int:
    elf = ELFFile(io.BytesIO(elf_bytes))
    for i, sec in enumerate(elf.iter_sections()):
        if sec.name == name:
            return elf["e_shoff"] + i * elf["e_shentsize"]
    raise AssertionError(name)


def section_file_offset(elf_bytes: bytes, name: str) -> int:
    return ELFFile(io.BytesIO(elf_bytes)).get_section_by_name(name)["sh_offset"]


def symbol_entry_offset(elf_bytes: bytes, name: str) -> int:
    symtab = ELFFile(io.BytesIO(elf_bytes)).get_section_by_name(".symtab")
    for i, sym in enumerate(symtab.iter_symbols()):
        if sym.name == name:
            return symtab["sh_offset"] + i * symtab["sh_entsize"]
    raise AssertionError(name)


def as_linked(et_rel: bytes, rodata_addr=0x1000, text_addr=0x2000) -> bytes:
    """Turn the compiled vadd ET_REL into what a linker would give: ET_DYN, sections and symbols at
    addresses, the descriptor's entry offset filled in."""
    b = bytearray(et_rel)
    struct.pack_into("<H", b, 16, 3)  # e_type = ET_DYN
    for name, addr in ((".rodata", rodata_addr), (".text", text_addr)):
        struct.pack_into("<Q", b, section_header_offset(et_rel, name) + 16, addr)  # sh_addr
    struct.pack_into("<Q", b, symbol_entry_offset(et_rel, "vadd") + 8, text_addr)  # st_value
    struct.pack_into("<Q", b, symbol_entry_offset(et_rel, "vadd.kd") + 8, rodata_addr)
    struct.pack_into("<q", b, section_file_offset(et_rel, ".rodata") + 16, text_addr - rodata_addr)
    return bytes(b)


def find_lld():
    for name in ["ld.lld"] + [f"ld.lld-{v}" for v in range(30, 16, -1)]:
        path = shutil.which(name)
        if path:
            return path
    return None


# ---------------------------------------------------------------------------------------------------
# kernels and descriptors


def test_kernel_is_found_by_its_descriptor_symbol(objs):
    co = load(objs, "vadd1100")
    assert co.kernel_names == ("vadd",) and co.elf_type == "ET_REL"


def test_gfx1100_vadd_descriptor_matches_the_facts(objs):
    k = load(objs, "vadd1100").kernel("vadd")
    assert (k.group_segment_fixed_size, k.private_segment_fixed_size, k.kernarg_size) == (0, 0, 288)
    assert (k.compute_pgm_rsrc1, k.compute_pgm_rsrc2, k.kernel_code_properties) == (0xE0AF0000, 0x139A, 0x041E)


def test_gfx942_vadd_descriptor_matches_the_facts(objs):
    k = load(objs, "vadd942").kernel("vadd")
    assert (k.group_segment_fixed_size, k.kernarg_size) == (0, 288)
    assert (k.compute_pgm_rsrc1, k.compute_pgm_rsrc2, k.kernel_code_properties) == (0x00AF0040, 0x1390, 0x001E)


@pytest.mark.parametrize("key,wave32,wave_size", [("vadd1100", True, 32), ("vadd942", False, 64)])
def test_wave32_bit_is_set_on_gfx1100_only(objs, key, wave32, wave_size):
    k = load(objs, key).kernel("vadd")
    assert (k.wavefront_size32, k.wavefront_size) == (wave32, wave_size)


def test_all_implicit_inputs_enabled_without_attributes(objs):
    k = load(objs, "vadd1100").kernel("vadd")
    assert (k.enable_sgpr_dispatch_ptr, k.enable_sgpr_queue_ptr, k.enable_sgpr_kernarg_segment_ptr,
            k.enable_sgpr_dispatch_id, k.enable_sgpr_private_segment_size) == (True, True, True, True, False)
    assert (k.enable_sgpr_workgroup_id_x, k.enable_sgpr_workgroup_id_y, k.enable_sgpr_workgroup_id_z) == (True,) * 3
    assert k.enable_vgpr_workitem_id == 2


def test_gfx1100_user_sgpr_count_is_13_with_all_implicit_inputs(objs):
    # 8 SGPRs of pointers and ids, padded so that user + 3 TGID SGPRs reach 16 (FeatureUserSGPRInit16Bug)
    assert load(objs, "vadd1100").kernel("vadd").user_sgpr_count == 13


def test_gfx1100_user_sgpr_count_is_padded_to_15_with_no_implicit_inputs(objs):
    k = load(objs, "bare1100").kernel("vadd")
    assert k.user_sgpr_count == 15  # kernarg s[0:1] + padding; TGID.x = s15
    assert k.kernel_code_properties == 0x0408  # kernarg segment ptr + wave32
    assert (k.enable_sgpr_workgroup_id_y, k.enable_sgpr_workgroup_id_z) == (False, False)


def test_gfx1100_workgroup_id_yz_stay_enabled_without_the_cluster_id_attributes(objs):
    # LLVM 22: amdgpu-no-workgroup-id-y/z alone do not drop TGID Y/Z; then 2 + padding + 3 = 16 -> 13
    k = load(objs, "nocluster1100").kernel("vadd")
    assert (k.enable_sgpr_workgroup_id_y, k.enable_sgpr_workgroup_id_z, k.user_sgpr_count) == (True, True, 13)


def test_gfx942_user_sgpr_count_is_2_with_no_implicit_inputs(objs):
    assert load(objs, "bare942").kernel("vadd").user_sgpr_count == 2


def test_no_implicitarg_ptr_drops_the_hidden_arguments(objs):
    k = load(objs, "bare1100").kernel("vadd")
    assert k.kernarg_size == 28 and k.hidden_args == {}


def test_static_lds_size_is_the_group_segment_size(objs):
    assert load(objs, "two1100").kernel("ldsrev").group_segment_fixed_size == 1024


def test_decode_descriptor_rejects_a_wrong_size():
    with pytest.raises(ValueError, match="64 bytes"):
        decode_descriptor(bytes(63))


# ---------------------------------------------------------------------------------------------------
# relocation and code


def test_relocatable_object_leaves_the_entry_offset_zero(objs):
    raw = objs["vadd1100"]
    assert struct.unpack_from("<q", raw, section_file_offset(raw, ".rodata") + 16)[0] == 0


def test_relocation_sets_entry_offset_to_function_minus_descriptor(objs):
    co = load(objs, "vadd1100")
    k = co.kernel("vadd")
    function = co.section_offsets[".text"] + 0  # vadd is the first symbol in .text (st_value 0)
    descriptor = co.section_offsets[".rodata"] + 0  # vadd.kd at .rodata + 0
    assert k.kernel_code_entry_byte_offset == function - descriptor == k.code_offset - k.descriptor_offset > 0
    assert struct.unpack_from("<q", k.descriptor, 16)[0] == k.kernel_code_entry_byte_offset


def test_relocation_addend_is_used(objs):
    # addend 16 -> 20: entry moves by 4 bytes and is no longer 256-byte aligned
    raw = bytearray(objs["vadd1100"])
    struct.pack_into("<q", raw, section_file_offset(raw, ".rela.rodata") + 16, 20)
    with pytest.raises(ValueError, match="256-byte aligned"):
        CodeObject.from_bytes(bytes(raw))


@pytest.mark.parametrize("key,size", [("vadd1100", 172), ("vadd942", 132)])
def test_code_is_the_function_symbol_bytes(objs, key, size):
    co = load(objs, key)
    k = co.kernel("vadd")
    text = ELFFile(io.BytesIO(objs[key])).get_section_by_name(".text").data()
    assert len(k.code) == size and k.code == text[:size]  # sizes: ISA_FACTS 4.1


def test_unsupported_relocation_type_raises_value_error(objs):
    raw = bytearray(objs["vadd1100"])
    info_at = section_file_offset(raw, ".rela.rodata") + 8
    info = struct.unpack_from("<Q", raw, info_at)[0]
    struct.pack_into("<Q", raw, info_at, (info & ~0xFFFFFFFF) | 7)  # R_AMDGPU_GOTPCREL
    with pytest.raises(ValueError, match="GOTPCREL"):
        CodeObject.from_bytes(bytes(raw))


# ---------------------------------------------------------------------------------------------------
# metadata


def test_explicit_args_have_offsets_sizes_and_kinds(objs):
    k = load(objs, "vadd1100").kernel("vadd")
    assert [(a.name, a.offset, a.size, a.value_kind) for a in k.explicit_args] == [
        ("a", 0, 8, "global_buffer"), ("b", 8, 8, "global_buffer"), ("c", 16, 8, "global_buffer"),
        ("n", 24, 4, "by_value")]


def test_hidden_args_follow_the_code_object_v5_layout(objs):
    hidden = load(objs, "vadd1100").kernel("vadd").hidden_args
    start = hidden["hidden_block_count_x"].offset
    assert start == 32  # explicit args end at 28, rounded up to 8
    expected = {  # HARDWARE_FACTS 4.5: offset within the implicit arguments, size
        "hidden_block_count_x": (0, 4), "hidden_block_count_y": (4, 4), "hidden_block_count_z": (8, 4),
        "hidden_group_size_x": (12, 2), "hidden_group_size_y": (14, 2), "hidden_group_size_z": (16, 2),
        "hidden_remainder_x": (18, 2), "hidden_remainder_y": (20, 2), "hidden_remainder_z": (22, 2),
        "hidden_global_offset_x": (40, 8), "hidden_global_offset_y": (48, 8), "hidden_global_offset_z": (56, 8),
        "hidden_grid_dims": (64, 2), "hidden_hostcall_buffer": (80, 8), "hidden_multigrid_sync_arg": (88, 8),
        "hidden_heap_v1": (96, 8), "hidden_default_queue": (104, 8), "hidden_completion_action": (112, 8),
        "hidden_queue_ptr": (200, 8),
    }
    assert {kind: (a.offset - start, a.size) for kind, a in hidden.items()} == expected


@pytest.mark.parametrize("key,wave", [("vadd1100", 32), ("vadd942", 64)])
def test_kernel_metadata_fields(objs, key, wave):
    k = load(objs, key).kernel("vadd")
    assert (k.kernarg_segment_size, k.metadata[".group_segment_fixed_size"], k.metadata[".wavefront_size"]) == (
        288, 0, wave)
    assert k.sgpr_count > 0 and k.vgpr_count > 0


@pytest.mark.parametrize("key,arch", [("vadd1100", "gfx1100"), ("vadd942", "gfx942")])
def test_target_comes_from_the_metadata(objs, key, arch):
    co = load(objs, key)
    assert (co.target, co.arch) == (f"amdgcn-amd-amdhsa--{arch}", arch)


def test_msgpack_decoder_handles_the_types_the_metadata_uses():
    data = bytes.fromhex(
        "86"  # fixmap, 6 entries
        "a161" "92" "01" "ff"  # "a": [1, -1]
        "d90162" "cd0120"  # str8 "b": uint16 288
        "a163" "dc0002" "c0" "c3"  # "c": array16 [None, True]
        "a164" "cb3ff8000000000000"  # "d": float64 1.5
        "a165" "c40201ff"  # "e": bin8 b"\x01\xff"
        "a166" "d0f0"  # "f": int8 -16
    )
    assert unpack_msgpack(data) == {"a": [1, -1], "b": 288, "c": [None, True], "d": 1.5, "e": b"\x01\xff", "f": -16}


@pytest.mark.parametrize("data,message", [(b"\x92\x01", "truncated"), (b"\x01\x02", "trailing"),
                                          (b"\xc1", "reserved")])
def test_msgpack_decoder_rejects_malformed_input(data, message):
    with pytest.raises(ValueError, match=message):
        unpack_msgpack(data)


# ---------------------------------------------------------------------------------------------------
# the image


def test_image_places_every_kernels_code_256_aligned_at_descriptor_plus_entry(objs):
    co = load(objs, "two1100")
    image = co.image()
    assert co.kernel_names == ("vadd", "ldsrev") and len(image) == co.image_size and len(image) % 256 == 0
    for k in co.kernels:
        assert k.descriptor_offset % 64 == 0 and k.code_offset % 256 == 0
        assert image[k.descriptor_offset:k.descriptor_offset + 64] == k.descriptor
        entry = k.descriptor_offset + k.kernel_code_entry_byte_offset
        assert image[entry:entry + len(k.code)] == k.code


def test_image_is_the_same_at_any_base_when_all_relocations_are_pc_relative(objs):
    co = load(objs, "two1100")
    assert co.image(0x7F00_0000_0000) == co.image(0)


def test_image_base_must_be_256_aligned(objs):
    with pytest.raises(ValueError, match="multiple of 256"):
        load(objs, "vadd1100").image(0x1080)


# ---------------------------------------------------------------------------------------------------
# linked (ET_DYN) code objects


def test_linked_object_uses_virtual_addresses_as_image_offsets(objs):
    co = CodeObject.from_bytes(as_linked(objs["vadd1100"]))
    k = co.kernel("vadd")
    assert co.elf_type == "ET_DYN"
    assert (k.descriptor_offset, k.code_offset, k.kernel_code_entry_byte_offset) == (0x1000, 0x2000, 0x1000)
    assert co.image()[0x2000:0x2000 + 172] == k.code and len(k.code) == 172


def test_object_linked_by_lld_loads_with_the_facts_layout(objs, tmp_path):
    lld = find_lld()
    if lld is None:
        pytest.skip("no ld.lld on PATH")
    (tmp_path / "k.o").write_bytes(objs["vadd1100"])
    subprocess.run([lld, "-shared", "--no-undefined", "-o", str(tmp_path / "k.hsaco"), str(tmp_path / "k.o")],
                   check=True, capture_output=True)
    k = CodeObject.from_file(os.fspath(tmp_path / "k.hsaco")).kernel("vadd")
    assert (k.descriptor_offset, k.code_offset, k.kernel_code_entry_byte_offset) == (0x900, 0x1A00, 4352)


# ---------------------------------------------------------------------------------------------------
# errors


def test_bytes_that_are_not_an_elf_raise_value_error():
    with pytest.raises(ValueError, match="not an ELF"):
        CodeObject.from_bytes(b"MZ" + bytes(100))


def test_truncated_elf_raises_value_error(objs):
    with pytest.raises(ValueError, match="malformed|truncated"):
        CodeObject.from_bytes(objs["vadd1100"][:1000])


def test_elf_for_another_machine_raises_value_error(objs):
    raw = bytearray(objs["vadd1100"])
    struct.pack_into("<H", raw, 18, 62)  # EM_X86_64
    with pytest.raises(ValueError, match=r"e_machine is 62.*224"):
        CodeObject.from_bytes(bytes(raw))


def test_non_hsa_code_object_raises_value_error(objs):
    raw = bytearray(objs["vadd1100"])
    raw[7] = 65  # AMDGPU_PAL
    with pytest.raises(ValueError, match="PAL"):
        CodeObject.from_bytes(bytes(raw))


def test_unknown_kernel_name_raises_value_error_listing_the_available_ones(objs):
    with pytest.raises(ValueError, match=r"no kernel 'vsub'.*available: vadd, ldsrev"):
        load(objs, "two1100").kernel("vsub")
