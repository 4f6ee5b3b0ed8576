"""How much of each instruction set the shader core executes, and how much of it tests exercised.

* `executable(arch)`: every opcode of the decoder's tables, encoded with ordinary register operands, decoded
  and handed to the instruction compiler; those it compiles are executable (a `ShaderUnsupported` means
  not). Forms that need particular operands (a DPP word, an integer clamp) are not probed.
* `EXERCISED`: (arch, family, mnemonic) of every instruction compiled in this process. `record(path)`
  writes them out (the test suite's conftest does, per pytest worker, under `.hcqsim/isa-exercised/`) and
  `exercised_on_disk()` reads them back.

    python3 -m hcqsim.shader.coverage    # prints the table (reads the last test run's records)
"""
from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

from . import formats as fm
from . import formats_gfx9 as f9
from . import opcodes_gfx11 as ops11
from . import opcodes_gfx942 as ops942

EXERCISED: set[tuple[str, str, str]] = set()
RECORD_DIR = Path(".hcqsim") / "isa-exercised"
_TABLES = {"gfx1100": (ops11, fm), "gfx942": (ops942, f9)}
_SKIP_FAMILIES = {"VOPD", "VINTERP", "LDSDIR", "EXP", "MIMG", "MTBUF", "VIMAGE", "VSAMPLE"}
_REGISTERS = {  # operand fields set to ordinary registers: v4/v8/v12 sources, v16 destination, s20 scalars
    "src0": 256 + 4, "src1": 256 + 8, "src2": 256 + 12, "vsrc1": 8, "vdst": 16, "sdst": 20, "ssrc0": 4,
    "ssrc1": 6, "addr": 4, "data": 8, "data0": 8, "data1": 12, "vaddr": 4, "vdata": 8, "sbase": 2, "srsrc": 2,
    "saddr": 124, "soffset": 124,
}


def note(arch: str, family: str, mnemonic: str | None) -> None:
    """Called by the instruction compiler for every instruction it compiles."""
    if mnemonic is not None:
        EXERCISED.add((arch, family, mnemonic))


def _probe_instr(arch: str, family: str, op: int):
    from .decoder import decode
    ops, formats = _TABLES[arch]
    fmt = formats.FORMATS.get(family)
    if fmt is None:
        return None
    names = {f.name for f in fmt.fields}
    values = {k: v for k, v in _REGISTERS.items() if k in names}
    if family == "VOP3P_MAI":
        values.update(src0=256 + 4, src1=256 + 8, src2=256 + 12)
    try:
        words = fmt.encode(op=op, **values)
        code = struct.pack(f"<{len(words)}I", *words) + b"\0" * 8  # room for a literal or extension dword
        instr = decode(code, 0, arch)
    except Exception:  # noqa: BLE001 - an encoding the probe cannot build is simply not probed
        return None
    return instr if instr.family == family or family in ("VOP3B", "GLOBAL", "SCRATCH") else None


def executable(arch: str) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """({(family, mnemonic)} the core compiles, {(family, mnemonic)} it refuses) over the decoder's tables."""
    from .compile import compile_instr
    from .operands import Context, ShaderUnsupported
    ops, _ = _TABLES[arch]
    ctx = Context(64 if arch == "gfx942" else 32, 256, None, "coverage probe", arch)
    ctx.accum_offset = 128
    yes, no = set(), set()
    saved = set(EXERCISED)
    for family, table in ops.TABLES.items():
        if family in _SKIP_FAMILIES:
            continue
        for op, entry in table.items():
            instr = _probe_instr(arch, family, op)
            if instr is None or instr.mnemonic is None:
                continue
            try:
                compile_instr(instr, ctx)
                yes.add((instr.family, instr.mnemonic))
            except ShaderUnsupported:
                no.add((instr.family, instr.mnemonic))
            except Exception:  # noqa: BLE001 - the probe's operands did not suit this form
                no.add((instr.family, instr.mnemonic))
    EXERCISED.clear()
    EXERCISED.update(saved)
    return yes, no - yes


def record(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(sorted(EXERCISED)))


def exercised_on_disk(root: Path = RECORD_DIR) -> set[tuple[str, str, str]]:
    out: set[tuple[str, str, str]] = set()
    if root.is_dir():
        for f in root.glob("*.json"):
            try:
                out.update(tuple(x) for x in json.loads(f.read_text()))
            except (OSError, ValueError):
                continue
    return out


def summary_lines(exercised: set[tuple[str, str, str]] | None = None) -> list[str]:
    """`name: value` lines per target: opcodes in the tables, executable, and exercised by the last test run."""
    exercised = exercised_on_disk() if exercised is None else exercised
    lines = []
    for arch in _TABLES:
        yes, no = executable(arch)
        seen = {(f, m) for a, f, m in exercised if a == arch}
        lines += [f"isa_{arch}_opcodes_probed: {len(yes) + len(no)}", f"isa_{arch}_opcodes_executable: {len(yes)}",
                  f"isa_{arch}_opcodes_exercised_by_tests: {len(seen)}"]
    return lines


def main(argv: list[str]) -> int:
    for line in summary_lines():
        print(line)
    if "--missing" in argv:
        for arch in _TABLES:
            _, no = executable(arch)
            print(f"{arch} not executable: " + " ".join(sorted(m for _, m in no)))
    if not exercised_on_disk():
        print(f"(no test-run records under {RECORD_DIR}: run the test suite first)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
