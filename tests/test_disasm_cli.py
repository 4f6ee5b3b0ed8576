"""`hcqsim disasm` as a user runs it: every bad input is one line on stderr with its documented exit status, never
a traceback; stdin, `--json`, offsets and encodings, and the `--sdma-version` spelling."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hcqsim import disasm_command, pm4, sdma

ROOT = Path(__file__).resolve().parent.parent


def hcqsim(*argv: str, stdin: bytes | None = b"", shell_pipe: str | None = None) -> subprocess.CompletedProcess:
    """Run `python -m hcqsim ARGV` in a fresh interpreter (stdin as given; shell_pipe: `| CMD` after it)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "hcqsim", *argv]
    if shell_pipe:
        import shlex
        line = " ".join(shlex.quote(c) for c in cmd) + f" | {shell_pipe}; echo \"rc=${{PIPESTATUS[0]}}\""
        return subprocess.run(["bash", "-c", line], input=stdin, capture_output=True, env=env, timeout=120)
    return subprocess.run(cmd, input=stdin, capture_output=True, env=env, timeout=120)


def words_text(dws) -> str:
    return " ".join(f"{w:08x}" for w in dws)


def assert_one_line_error(r: subprocess.CompletedProcess, status: int, *phrases: str) -> None:
    err = r.stderr.decode()
    assert b"Traceback" not in r.stderr + r.stdout, err
    assert r.returncode == status, (r.returncode, err)
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("hcqsim disasm: "), err
    for p in phrases:
        assert p in err, (p, err)


@pytest.fixture(scope="module")
def code_object_file(tmp_path_factory) -> Path:
    from hcqsim.kernels import code_object
    path = tmp_path_factory.mktemp("co") / "inc.co"
    path.write_bytes(code_object("inc", "gfx942"))
    return path


# -- errors: one line each, documented status ------------------------------------------------------------------

@pytest.mark.parametrize("argv, status, phrases", [
    (["pm4", "zzzz"], disasm_command.EXIT_INPUT, ["'zzzz'", "not a hex word"]),
    (["pm4", "c0001000", "1ffffffff"], disasm_command.EXIT_INPUT, ["'1ffffffff'", "word 2", "wider than 32 bits"]),
    (["pm4", "-1"], disasm_command.EXIT_INPUT, ["'-1'", "negative"]),
    (["sdma", "--sdma-version", "sdma9", "1"], disasm_command.EXIT_USAGE, ["sdma9", "sdma6"]),
    (["sdma", "--version", "sdma5", "1"], disasm_command.EXIT_USAGE, ["--sdma-version sdma5"]),
    (["code-object", "--file", "/bin/ls"], disasm_command.EXIT_INPUT, ["/bin/ls", "not an AMDGPU code object"]),
    (["code-object", "--file", "/nonexistent/k.co"], disasm_command.EXIT_INPUT, ["cannot read", "No such file"]),
    (["code-object"], disasm_command.EXIT_USAGE, ["--file"]),
    (["code-object", "c0001000"], disasm_command.EXIT_USAGE, ["not words"]),
    (["pm4"], disasm_command.EXIT_USAGE, ["nothing to disassemble"]),
    (["pm4", "--hex", "--file", "-"], disasm_command.EXIT_INPUT, ["stdin is empty"]),
    (["pm4", "--file", "/nonexistent"], disasm_command.EXIT_INPUT, ["cannot read /nonexistent"]),
    (["pm4", "1", "--file", "/bin/ls"], disasm_command.EXIT_USAGE, ["not both"]),
])
def test_each_bad_input_is_one_line_with_its_exit_status(argv, status, phrases):
    r = hcqsim("disasm", *argv)
    assert_one_line_error(r, status, *phrases)


def test_a_truncated_code_object_is_an_input_error(code_object_file, tmp_path):
    cut = tmp_path / "cut.co"
    cut.write_bytes(code_object_file.read_bytes()[:300])
    assert_one_line_error(hcqsim("disasm", "code-object", "--file", str(cut)), disasm_command.EXIT_INPUT,
                          str(cut), "malformed")


def test_a_code_object_for_an_unknown_target_asks_for_arch(code_object_file, tmp_path):
    data = bytearray(code_object_file.read_bytes())
    data[48] = 0x30  # e_flags (offset 48 in the ELF64 header): EF_AMDGPU_MACH 0x30, not one hcqsim disassembles
    other = tmp_path / "other.co"
    other.write_bytes(bytes(data))
    assert_one_line_error(hcqsim("disasm", "code-object", "--file", str(other)), disasm_command.EXIT_INPUT,
                          "EF_AMDGPU_MACH 0x30", "--arch")
    r = hcqsim("disasm", "code-object", "--arch", "gfx942", "--file", str(other))
    assert r.returncode == 0 and r.stdout.decode().startswith("inc:  ; gfx942"), r.stderr.decode()


def test_a_directory_is_not_a_file(tmp_path):
    assert_one_line_error(hcqsim("disasm", "pm4", "--file", str(tmp_path)), disasm_command.EXIT_INPUT,
                          f"cannot read {tmp_path}")


def test_a_binary_file_given_as_hex_text_is_an_input_error(code_object_file):
    assert_one_line_error(hcqsim("disasm", "pm4", "--hex", "--file", str(code_object_file)),
                          disasm_command.EXIT_INPUT, "not text of hex words", "without --hex")


def test_a_reader_that_went_away_gets_no_traceback(tmp_path):
    """`hcqsim disasm ... | head -3`: the write fails with EPIPE once the reader is gone. The reader here closes
    before anything is written, so the failure is certain (a real `head` may or may not beat the writer)."""
    f = tmp_path / "many.txt"
    f.write_text(words_text(pm4.write_data(0x1000, [1, 2, 3]) * 5000))
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        r = subprocess.run([sys.executable, "-m", "hcqsim", "disasm", "pm4", "--hex", "--file", str(f)],
                           stdout=write_end, stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                           timeout=120)
    finally:
        os.close(write_end)
    assert r.stderr == b"", r.stderr.decode()
    assert r.returncode == disasm_command.EXIT_BROKEN_PIPE


def test_head_sees_the_first_lines(tmp_path):
    f = tmp_path / "many.txt"
    f.write_text(words_text(pm4.write_data(0x1000, [1, 2, 3]) * 5000))
    r = hcqsim("disasm", "pm4", "--hex", "--file", str(f), shell_pipe="head -3")
    out = r.stdout.decode().splitlines()
    assert r.stderr == b"", r.stderr.decode()
    assert len(out) == 4 and out[0].startswith("000000: WRITE_DATA")
    assert out[-1] in (f"rc={disasm_command.EXIT_BROKEN_PIPE}", "rc=0")  # whether head beat the writer


# -- input sources ---------------------------------------------------------------------------------------------

def test_words_from_a_pipe_a_file_and_the_command_line_list_the_same():
    dws = pm4.write_data(0x1000, [7]) + pm4.nop(2)
    by_args = hcqsim("disasm", "pm4", *words_text(dws).split())
    by_pipe = hcqsim("disasm", "pm4", stdin=words_text(dws).encode())
    by_hex_stdin = hcqsim("disasm", "pm4", "--hex", "--file", "-", stdin=words_text(dws).encode())
    by_binary_stdin = hcqsim("disasm", "pm4", "--file", "-", stdin=b"".join(d.to_bytes(4, "little") for d in dws))
    for r in (by_args, by_pipe, by_hex_stdin, by_binary_stdin):
        assert r.returncode == 0, r.stderr.decode()
    assert by_args.stdout == by_pipe.stdout == by_hex_stdin.stdout == by_binary_stdin.stdout
    assert by_args.stdout.decode().splitlines()[0].startswith("000000: WRITE_DATA")


def test_a_code_object_on_stdin(code_object_file):
    r = hcqsim("disasm", "code-object", "--file", "-", stdin=code_object_file.read_bytes())
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().startswith("inc:  ; gfx942")


def test_hex_tokens_accept_0x_and_commas_and_refuse_what_does_not_fit():
    assert disasm_command.hex_words(["0xc0031000,1", "ffffffff"]) == [0xC0031000, 1, 0xFFFFFFFF]
    with pytest.raises(disasm_command.InputError, match="wider than 32 bits"):
        disasm_command.hex_words(["100000000"])
    with pytest.raises(disasm_command.InputError, match="not a hex word"):
        disasm_command.hex_words(["12g4"])


def test_sdma_version_option():
    dws = sdma.fence(0x2000, 5, version="sdma5")
    r = hcqsim("disasm", "sdma", "--sdma-version", "sdma5", *words_text(dws).split())
    assert r.returncode == 0 and r.stdout.decode().startswith("000000: FENCE"), r.stderr.decode()


def test_version_prints_hcqsim_version():
    from hcqsim import __version__
    r = hcqsim("disasm", "--version")
    assert r.returncode == 0 and r.stdout.decode().strip() == f"hcqsim {__version__}"


# -- listings: offsets and encodings by default, JSON ------------------------------------------------------------

def test_code_objects_list_kernel_offsets_and_raw_words_by_default(code_object_file):
    out = hcqsim("disasm", "code-object", "--file", str(code_object_file)).stdout.decode().splitlines()
    # gfx942 s_load_dword s0, s[4:5], 0x1c = C0020002 0000001C (the kernel's first instruction, image offset 0x600)
    assert out[0] == "inc:  ; gfx942, code at image offset 0x600, 108 bytes"
    assert out[1] == "  0x0000: s_load_dword s0, s[4:5], 0x1c" + " " * 10 + "// 000000000600: C0020002 0000001C"
    plain = hcqsim("disasm", "code-object", "--no-encodings", "--file", str(code_object_file)).stdout.decode()
    assert plain.splitlines()[1] == "s_load_dword s0, s[4:5], 0x1c"


def test_json_listings_are_the_same_packets_and_instructions(code_object_file):
    import json
    words = [0xC0027600, 0x20C, 0x1000, 0x0, 0xC0033700, 0x500, 0x2000]  # SET_SH_REG PGM_LO/HI; a cut WRITE_DATA
    doc = json.loads(hcqsim("disasm", "pm4", "--json", *words_text(words).split()).stdout)
    assert doc["kind"] == "pm4" and [p["name"] for p in doc["packets"]] == ["SET_SH_REG", "WRITE_DATA"]
    assert [r["name"] for r in doc["packets"][0]["registers"]] == ["COMPUTE_PGM_LO", "COMPUTE_PGM_HI"]
    assert doc["packets"][1]["truncated"] and doc["packets"][1]["missing"] == ["dst_addr", "data"]
    assert doc["packets"][1]["offset"] == 16 and doc["packets"][1]["dwords"] == words[4:]
    doc = json.loads(hcqsim("disasm", "code-object", "--json", "--file", str(code_object_file)).stdout)
    first = doc["kernels"][0]["instructions"][0]
    assert doc["arch"] == "gfx942" and doc["kernels"][0]["name"] == "inc"
    assert first == {"offset": 0, "address": 0x600, "words": [0xC0020002, 0x1C], "decoded": True, "target": None,
                     "text": "s_load_dword s0, s[4:5], 0x1c"}
    doc = json.loads(hcqsim("disasm", "sdma", "--json", "00030005", "2000", "0").stdout)
    assert doc["version"] == "sdma6" and doc["packets"][0]["missing"] == ["data"]
