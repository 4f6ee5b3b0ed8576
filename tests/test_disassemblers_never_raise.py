"""Disassemblers never raise on bytes (issue 8 item 9).

PM4, SDMA and shader listings print what they cannot decode as a `.long` (or `.byte`) line saying why, and go
on with the next packet or dword.
"""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hcqsim import pm4, sdma
from hcqsim.shader import disassemble

# dwords that look like packets or instructions often enough to reach the decoders' deeper paths
_PM4_HEADER = st.builds(lambda op, n, bits: 0xC0000000 | n << 16 | op << 8 | bits, st.integers(0, 255),
                        st.integers(0, 20), st.integers(0, 3))
_SDMA_HEADER = st.builds(lambda op, sub, hi: op | sub << 8 | hi << 16, st.integers(0, 40), st.integers(0, 8),
                         st.integers(0, 0xFFFF))
_DWORDS = st.lists(st.one_of(_PM4_HEADER, _SDMA_HEADER, st.integers(0, 0xFFFFFFFF)), max_size=16)
_BYTES = st.binary(max_size=64)
FAST = settings(max_examples=100, deadline=None)


def test_pm4_header_shorter_than_its_format_prints_a_raw_line():
    text = pm4.disassemble([0xC0003700])  # WRITE_DATA with count 0: two dwords, its fields need four
    assert text.startswith("000000: .long 0xc0003700  ; cannot decode: WRITE_DATA header count 0")


def test_pm4_trailing_bytes_print_as_a_byte_line():
    lines = pm4.disassemble(bytes(pm4.nop(1)[0].to_bytes(4, "little")) + b"\x07").splitlines()
    assert lines[0].startswith("000000: NOP") and lines[1].startswith("000004: .byte 0x07  ; cannot decode")


def test_sdma_dwords_after_an_unknown_packet_are_listed_raw():
    lines = sdma.disassemble([0x00000003, 0x11]).splitlines()
    assert lines[1] == "000004: .long 0x00000011  ; cannot decode: after a packet of unknown size"


def test_shader_listing_goes_on_after_a_word_without_a_format():
    code = (0xC0045402).to_bytes(4, "little") + (0xBFB00000).to_bytes(4, "little")
    lines = disassemble(code, "gfx1100").splitlines()
    assert lines[0].startswith(".long 0xc0045402  ; cannot decode:") and lines[1] == "s_endpgm"


def test_shader_truncated_instruction_and_trailing_bytes_print_raw():
    lines = disassemble((0xC0020002).to_bytes(4, "little") + b"\x01", "gfx942").splitlines()
    assert "truncated instruction" in lines[0] and lines[1].startswith(".byte 0x01  ; cannot decode")


@FAST
@given(_DWORDS, st.sampled_from(["gfx11", "gfx9"]))
def test_pm4_disassemble_never_raises_on_dwords(dws, family):
    assert len(pm4.disassemble(dws, family).splitlines()) <= len(dws)


@FAST
@given(_DWORDS, st.sampled_from(sdma.VERSIONS))
def test_sdma_disassemble_never_raises_on_dwords(dws, version):
    assert len(sdma.disassemble(dws, version).splitlines()) <= len(dws)


@FAST
@given(_BYTES)
def test_pm4_and_sdma_disassemble_never_raise_on_bytes(data):
    pm4.disassemble(data)
    sdma.disassemble(data)


@FAST
@given(st.one_of(_BYTES, _DWORDS.map(lambda d: b"".join(w.to_bytes(4, "little") for w in d))),
       st.sampled_from(["gfx1100", "gfx942"]), st.booleans())
def test_shader_disassemble_never_raises_on_bytes(code, arch, annotate):
    text = disassemble(code, arch, annotate=annotate)
    assert len(text.splitlines()) <= len(code) // 4 + 1


# -- code objects: a corrupt file is a ValueError naming what is wrong, never another exception -----------------

def _corrupt(data: bytes, rng) -> bytes:
    """One of three damages a file really suffers: a few bytes changed, cut short, a run of bytes overwritten."""
    data = bytearray(data)
    mode = rng.random()
    if mode < 0.4:
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif mode < 0.7:
        data = data[:rng.randrange(len(data))]
    else:
        j = rng.randrange(64, len(data) - 8)
        data[j:j + 8] = rng.randbytes(8)
    return bytes(data)


def test_corrupt_code_objects_raise_only_value_errors():
    import random
    from hcqsim.codeobject import CodeObject
    from hcqsim.kernels import code_object
    good = [code_object("inc", arch) for arch in ("gfx1100", "gfx942")]
    rng = random.Random(7)  # deterministic: the same 600 files every run
    for i in range(600):
        data = _corrupt(good[i % 2], rng)
        try:
            CodeObject(data)
        except ValueError as e:
            assert str(e), "an error without a message"
        except Exception as e:  # pragma: no cover - the failure report
            raise AssertionError(f"case {i}: {type(e).__name__}: {e}") from e


def test_code_object_limits_and_links_are_checked():
    from hcqsim.codeobject import _Msgpack
    import pytest
    with pytest.raises(ValueError, match="map key"):
        _Msgpack(bytes([0x81, 0x81, 0x01, 0x02, 0x03])).value()  # {{1: 2}: 3}: a map as a key
