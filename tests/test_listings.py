"""Listings a user reads: SDMA packets cut short, register names in emulator traces, shader ISA with offsets and
encodings (llvm-objdump style), and the same listings as data for `--json`. Expected text is written by hand."""
from __future__ import annotations

import pytest

from hcqsim import pm4, registers, sdma
from hcqsim.shader.disasm import disassemble, listing, objdump_line


def pack(*words: int) -> bytes:
    return b"".join(w.to_bytes(4, "little") for w in words)


# -- register naming (the language layer's function; traces and listings use it) ------------------------------

@pytest.mark.parametrize("addr, family, name", [
    (0x2E0C, "gfx11", "COMPUTE_PGM_LO"), (0x2E12, "gfx9", "COMPUTE_PGM_RSRC1"),
    (0x2E07, "gfx11", "COMPUTE_NUM_THREAD_X"),
    (0x2E40, "gfx11", "COMPUTE_USER_DATA_0"), (0x2E28, "gfx11", "COMPUTE_PGM_RSRC3"),
    (0x2E2D, "gfx9", "COMPUTE_PGM_RSRC3"), (0x2E2D, "gfx11", "COMPUTE_STATIC_THREAD_MGMT_SE6"),
    (0x2E0E, "gfx11", "COMPUTE_DISPATCH_PKT_ADDR_LO"), (0xC200, "gfx9", "GRBM_GFX_INDEX"),
])
def test_register_names_from_the_facts_table(addr, family, name):  # HARDWARE_FACTS 4.1, addresses by hand
    assert registers.register_name(addr, family) == name


def test_an_unnamed_register_is_its_address():
    assert registers.register_name(0x2E30) is None and registers.register_label(0x2E30) == "reg_0x2e30"
    assert registers.register_writes("SET_UCONFIG_REG", 0x200, [1, 2]) == [(0xC200, "GRBM_GFX_INDEX", 1),
                                                                           (0xC201, "reg_0xc201", 2)]


def test_emulator_traces_name_the_registers_a_packet_writes():
    from hcqsim import EmulatedGPU
    gpu = EmulatedGPU(target="gfx1100", seed=0)
    try:
        q = gpu.compute_queue()
        q.submit(pm4.set_sh_reg(registers.REGS["COMPUTE_USER_DATA_0"], [0x11, 0x22]))
        line = next(ln for ln in gpu.trace_lines() if "SET_SH_REG" in ln)
    finally:
        gpu.close()
    assert line.endswith("COMPUTE_USER_DATA_0=0x00000011 COMPUTE_USER_DATA_1=0x00000022"), line


# -- SDMA: a cut packet is shown as far as it goes, nothing invented -----------------------------------------------

def test_a_cut_sdma_fence_names_its_missing_data():
    # sdma6 FENCE (op 5): dw0 header with MTYPE 3 (UC) in [18:16], dw1-2 address, dw3 data; cut before dw3
    text = sdma.disassemble([0x00030005, 0x2000, 0x0])
    assert text.startswith("000000: FENCE ") and "addr=0x2000" in text
    assert text.endswith("(truncated: 3 of 4 dwords; missing data)") and "data=" not in text
    (p,), _ = sdma.decode_stream([0x00030005, 0x2000, 0x0])
    assert p.truncated and p.missing == ("data",) and p.as_json()["missing"] == ["data"]


# -- shader ISA: offsets and encodings ---------------------------------------------------------------------------

def test_objdump_style_lines_golden():
    # gfx11 SMEM s_load_b64 s[0:1], s[0:1], 0x0 = F4040000 F8000000; s_cbranch_execz -2 = BFA5FFFE; s_endpgm BFB00000
    lines = [objdump_line(ln, base=0x600) for ln in listing(pack(0xF4040000, 0xF8000000, 0xBFA5FFFE, 0xBFB00000))]
    assert lines == [
        "  0x0000: s_load_b64 s[0:1], s[0:1], 0x0" + " " * 9 + "// 000000000600: F4040000 F8000000",
        "  0x0008: s_cbranch_execz -2" + " " * 21 + "// 000000000608: BFA5FFFE  -> 0x0004",  # 8 + 4 - 8
        "  0x000c: s_endpgm" + " " * 31 + "// 00000000060C: BFB00000",
    ]


def test_offsets_are_what_faults_cite_and_undecodable_words_keep_their_place():
    # a word that starts no instruction is one entry, and the next instruction keeps its true offset
    lines = listing(pack(0xFFFFFFFF, 0xBFB00000))
    assert [ln.offset for ln in lines] == [0, 4] and not lines[0].decoded and lines[1].text == "s_endpgm"
    trailing = listing(pack(0xBFB00000) + b"\x01\x02")[-1]
    assert trailing.offset == 4 and trailing.words == () and trailing.text.startswith(".byte 0x01, 0x02")
    assert objdump_line(trailing) == "  0x0004: " + trailing.text


def test_listing_as_json_and_the_text_forms_agree():
    code = pack(0xF4040000, 0xF8000000, 0xBFB00000)
    entries = [ln.as_json(base=0x100) for ln in listing(code)]
    assert entries[0] == {"offset": 0, "address": 0x100, "words": [0xF4040000, 0xF8000000],
                          "text": "s_load_b64 s[0:1], s[0:1], 0x0", "decoded": True, "target": None}
    assert disassemble(code).splitlines() == [e["text"] for e in entries]
    assert disassemble(code, offsets=True, base=0x100).splitlines()[1].startswith("  0x0008: s_endpgm")
