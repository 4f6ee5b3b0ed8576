"""LLVM IR -> AMDGPU code objects, through llvmlite; and an instruction assembler for encoding checks.

`compile_llvm(ir, arch)` returns the relocatable ELF (ET_REL) code object that llvmlite's LLVM emits for the
`amdgcn-amd-amdhsa` triple; `hcqsim.codeobject.CodeObject.from_bytes` loads it. `assemble_listing` gives
the assembly text of the same compile.

Things that are easy to get wrong (ISA_FACTS "llvmlite as the compiler"):

* One parsed module is emitted once. Emitting assembly and then an object from the same module aborts
  the whole process inside LLVM, so every emit here parses the IR afresh.
* The module's data layout comes from the target machine; the triple is forced to amdgcn-amd-amdhsa.
* `opt` is the code generator's optimisation level (the target machine's). The IR optimisation pipeline is
  *not* run unless `ir_passes=True`: that pipeline includes LLVM's AMDGPU attributor, which adds
  `amdgpu-no-*` attributes and so changes the kernel descriptor (fewer user SGPRs, no hidden arguments).
  Without it, every implicit kernel input is enabled, as measured in ISA_FACTS 4.3.
* An unknown processor is only a warning inside LLVM (it compiles for "gfx000"). The target machine is
  checked once by emitting an empty module and reading the machine number from the ELF flags.
* LLVM can still abort the process on IR that it accepts but cannot select instructions for; that cannot
  be caught from Python.

Assembling instruction text (the encoding oracle of the instruction decoder's tests):

* `assemble_instructions(lines, arch)`: the .text bytes of all the lines (ValueError if any is rejected).
* `assemble_each(lines, arch)`: per line, (its bytes, LLVM's canonical text), or (None, the error message)
  for a line LLVM rejects. Thousands of lines cost two assembler runs, not one per line.
* `assembler_for(arch)` names the assembler; `assembler_llvm_version(arch)` gives its LLVM version.

llvmlite cannot do this: its wheels (LLVM 22) carry the AMDGPU code generator but not the AMDGPU assembly
parser, and emitting a module with `module asm` aborts the process ("Inline asm not supported by this
streamer because we don't have an asm parser for this target"). The assembler is therefore an LLVM
executable: the `clang -cc1as` in the ziglang wheel (a pip-installable LLVM 22, run as
`sys.executable -m ziglang`), else an `llvm-mc` that knows the processor ($HCQSIM_LLVM_MC if set, which then
is the only one tried; else llvm-mc-N / llvm-mc on PATH or in /opt/rocm/llvm/bin, newest first). With none,
AssemblerUnavailableError. For gfx11 `+real-true16` is added: LLVM 22's gfx11 code generator emits true16
operands (v1.l, v2.h), which only that mode accepts and prints.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib.util
import io
import os
import re
import subprocess
import sys
import tempfile
import threading

import llvmlite.binding as llvm
from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

TRIPLE = "amdgcn-amd-amdhsa"
EF_AMDGPU_MACH_MASK = 0xFF

_init_lock = threading.Lock()
_initialised = False
# llvmlite target machines are not documented as thread-safe: one emit at a time.
_emit_lock = threading.Lock()


class AssemblerUnavailableError(RuntimeError):
    """No assembler on this machine can encode instructions for the requested processor."""


def _init_llvm() -> None:
    global _initialised
    with _init_lock:
        if not _initialised:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            _initialised = True


def split_arch(arch: str) -> tuple[str, str]:
    """'gfx90a:xnack+:sramecc-' -> ('gfx90a', '+xnack,-sramecc'); 'gfx1100' -> ('gfx1100', '')."""
    if not isinstance(arch, str) or not re.fullmatch(r"gfx[0-9a-f]+(:[a-z0-9_-]+[+-])*", arch):
        raise ValueError(f"bad AMDGPU processor name {arch!r}: expected e.g. 'gfx1100' or 'gfx90a:xnack+'")
    cpu, *feats = arch.split(":")
    return cpu, ",".join(f[-1] + f[:-1] for f in feats)


@functools.lru_cache(maxsize=None)
def target_machine(arch: str = "gfx1100", opt: int = 2) -> llvm.TargetMachine:
    """The llvmlite target machine for `arch` at code generator level `opt` (0-3), created once."""
    if opt not in (0, 1, 2, 3):
        raise ValueError(f"{arch}: optimisation level must be 0..3, not {opt!r}")
    cpu, features = split_arch(arch)
    _init_llvm()
    tm = llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=cpu, features=features, opt=opt)
    # An unknown processor only prints a warning in LLVM and compiles for gfx000 (machine number 0).
    probe = llvm.parse_assembly("")
    probe.triple = TRIPLE
    probe.data_layout = str(tm.target_data)
    with _emit_lock:
        obj = tm.emit_object(probe)
    if ELFFile(io.BytesIO(obj))["e_flags"] & EF_AMDGPU_MACH_MASK == 0:
        raise ValueError(f"{arch}: LLVM {_llvm_version()} does not know the AMDGPU processor {cpu!r}")
    return tm


def _llvm_version() -> str:
    return ".".join(map(str, llvm.llvm_version_info))


def _parse(ir_text: str, arch: str, tm: llvm.TargetMachine, ir_passes: bool, opt: int) -> llvm.ModuleRef:
    if not isinstance(ir_text, str):
        raise TypeError(f"LLVM IR must be text, not {type(ir_text).__name__}")
    try:
        module = llvm.parse_assembly(ir_text)
    except RuntimeError as e:
        raise ValueError(f"{arch}: invalid LLVM IR: {str(e).strip()}") from None
    if module.triple and not module.triple.startswith("amdgcn"):
        raise ValueError(f"{arch}: the IR is for target triple {module.triple!r}, not {TRIPLE!r}")
    module.triple = TRIPLE
    module.data_layout = str(tm.target_data)
    try:
        module.verify()
    except RuntimeError as e:
        raise ValueError(f"{arch}: invalid LLVM IR: {str(e).strip()}") from None
    if ir_passes:
        tuning = llvm.create_pipeline_tuning_options(speed_level=opt)
        builder = llvm.create_pass_builder(tm, tuning)
        builder.getModulePassManager().run(module, builder)
    return module


def compile_llvm(ir_text: str, arch: str = "gfx1100", opt: int = 2, *, ir_passes: bool = False) -> bytes:
    """Compile LLVM IR text to a relocatable AMDGPU ELF code object (ET_REL, code object v6 with LLVM 22).

    Raises ValueError (naming `arch` and LLVM's message) for IR that does not parse or verify, an unknown
    processor or a bad `opt`.
    """
    tm = target_machine(arch, opt)
    module = _parse(ir_text, arch, tm, ir_passes, opt)
    with _emit_lock:
        return tm.emit_object(module)


def assemble_listing(ir_text: str, arch: str = "gfx1100", opt: int = 2, *, ir_passes: bool = False) -> str:
    """The assembly text LLVM produces for the IR (a separate parse from any object emit)."""
    tm = target_machine(arch, opt)
    module = _parse(ir_text, arch, tm, ir_passes, opt)
    with _emit_lock:
        return tm.emit_assembly(module)


# ---------------------------------------------------------------------------------------------------
# assembling instruction text


@dataclasses.dataclass(frozen=True)
class _Tool:
    """An assembler command: ziglang's `clang -cc1as` ("cc1as") or an `llvm-mc` executable ("llvm-mc")."""

    name: str
    argv: tuple[str, ...]
    kind: str

    def command(self, arch: str, src: str, out: str, filetype: str) -> list[str]:
        cpu, features = _features(arch)
        if self.kind == "cc1as":
            cmd = [*self.argv, "-triple", TRIPLE, "-target-cpu", cpu]
            for feature in features:
                cmd += ["-target-feature", feature]
            return cmd + ["-filetype", filetype, src, "-o", out]
        cmd = [*self.argv, f"-triple={TRIPLE}", f"-mcpu={cpu}", f"-filetype={filetype}", src, "-o", out]
        return cmd + ([f"-mattr={','.join(features)}"] if features else [])


_ZIGLANG = _Tool("ziglang clang -cc1as", (sys.executable, "-m", "ziglang", "clang", "-cc1as"), "cc1as")
_tool_for: dict[tuple[str, str | None], _Tool | None] = {}  # (arch, $HCQSIM_LLVM_MC) -> the tool, probed once
_tool_lock = threading.Lock()
_TIMEOUT = 300
# A symbol (not a .L temporary: those stay out of the symbol table) before each line and after the last.
_LABEL = "__hcqsim_line_{}"
_LABEL_LINE = re.compile(r"__hcqsim_line_(\d+):")


def _features(arch: str) -> tuple[str, list[str]]:
    """The processor and target features to assemble for. gfx11 gets +real-true16 (unless the arch names it):
    LLVM 22's gfx11 code generator emits true16 operands (v1.l, v2.h), and only that mode parses them."""
    cpu, features = split_arch(arch)
    flags = [f for f in features.split(",") if f]
    if re.fullmatch(r"gfx11[0-9a-f]{2}", cpu) and not any(f[1:] == "real-true16" for f in flags):
        flags.append("+real-true16")
    return cpu, flags


def _have_ziglang() -> bool:
    return importlib.util.find_spec("ziglang") is not None


def _llvm_mc_candidates() -> list[str]:
    """$HCQSIM_LLVM_MC alone when set, else llvm-mc / llvm-mc-N on PATH or in /opt/rocm/llvm/bin, newest first."""
    env = os.environ.get("HCQSIM_LLVM_MC")
    if env:
        return [env]
    found: dict[str, tuple[int, str]] = {}
    for d in os.environ.get("PATH", "").split(os.pathsep) + ["/opt/rocm/llvm/bin"]:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            m = re.fullmatch(r"llvm-mc(?:-(\d+))?", name)
            path = os.path.join(d, name)
            if m and name not in found and os.access(path, os.X_OK):
                # newest versioned name first; a plain 'llvm-mc' (version unknown) is tried last
                found[name] = (int(m.group(1) or 0), path)
    return [p for _, p in sorted(found.values(), reverse=True)]


def _candidates() -> list[_Tool]:
    mc = [_Tool(path, (path,), "llvm-mc") for path in _llvm_mc_candidates()]
    if os.environ.get("HCQSIM_LLVM_MC") or not _have_ziglang():
        return mc
    return [_ZIGLANG, *mc]


class _Run:
    """One assembler run over `source` (lines, numbered from 1): its output and its diagnostics."""

    def __init__(self, tool: _Tool, arch: str, source: list[str], filetype: str):
        # A listing goes to stdout: an assembler deletes its output file on errors, and the listing of the
        # lines that did assemble is wanted then too.
        with tempfile.TemporaryDirectory(prefix="hcqsim-asm-") as tmp:
            src, out = os.path.join(tmp, "in.s"), os.path.join(tmp, "out.o") if filetype == "obj" else "-"
            with open(src, "w", encoding="utf-8") as f:
                f.write("\n".join([*source, ""]))
            proc = subprocess.run(tool.command(arch, src, out, filetype), capture_output=True, timeout=_TIMEOUT)
            self.output = proc.stdout
            if filetype == "obj":
                self.output = None
                if os.path.exists(out):
                    with open(out, "rb") as f:
                        self.output = f.read()
        self.stderr = proc.stderr.decode(errors="replace").replace(src, "<input>").strip()
        self.errors: dict[int, list[str]] = {}  # source line -> messages
        self.unplaced: list[str] = []  # errors without a line, and a failure that printed no error
        for line in self.stderr.splitlines():
            m = re.match(r"<input>:(\d+):\d+: error: (.*)", line)
            if m:
                self.errors.setdefault(int(m.group(1)), []).append(m.group(2))
            elif re.match(r"(?:\S+:\s*)?(?:fatal )?error: |LLVM ERROR", line) or "not a recognized processor" in line:
                self.unplaced.append(line.strip())
        if (proc.returncode != 0 or self.output is None) and not self.errors and not self.unplaced:
            self.unplaced.append(f"{tool.name} exited with {proc.returncode}: {self.stderr[-2000:]}".strip())

    @property
    def ok(self) -> bool:
        return not self.errors and not self.unplaced


def _probe(tool: _Tool, arch: str) -> bool:
    try:
        return _Run(tool, arch, ["s_endpgm"], "obj").ok
    except (OSError, subprocess.SubprocessError):
        return False


def _tool(arch: str) -> _Tool:
    """The first candidate that assembles s_endpgm for `arch` (probed once per arch and $HCQSIM_LLVM_MC)."""
    split_arch(arch)
    key = (arch, os.environ.get("HCQSIM_LLVM_MC"))
    with _tool_lock:
        if key not in _tool_for:
            _tool_for[key] = next((t for t in _candidates() if _probe(t, arch)), None)
        tool = _tool_for[key]
    if tool is None:
        tried = ", ".join(t.name for t in _candidates()) or "none found"
        raise AssemblerUnavailableError(
            f"{arch}: no assembler knows {split_arch(arch)[0]} (tried: {tried}). llvmlite's LLVM has no AMDGPU "
            f"assembly parser; install ziglang (pip install ziglang, which ships LLVM's clang -cc1as), or a "
            f"recent LLVM's llvm-mc on PATH, or point HCQSIM_LLVM_MC at one")
    return tool


def assembler_for(arch: str = "gfx1100") -> str:
    """The assembler used for `arch`: 'ziglang clang -cc1as' or the path of an llvm-mc.

    Tried in this order: $HCQSIM_LLVM_MC when set (and then nothing else); ziglang's clang -cc1as (run as
    `sys.executable -m ziglang`); llvm-mc-N / llvm-mc on PATH or in /opt/rocm/llvm/bin, newest first. The first
    that assembles for the processor wins. Raises AssemblerUnavailableError when none does, ValueError for a
    malformed processor name.
    """
    return _tool(arch).name


@functools.lru_cache(maxsize=None)
def _tool_version(tool: _Tool) -> tuple[int, ...]:
    argv = [*tool.argv[:-1], "--version"] if tool.kind == "cc1as" else [*tool.argv, "--version"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=_TIMEOUT).stdout
    m = re.search(r"version (\d+)\.(\d+)\.(\d+)", out)
    if m is None:
        raise RuntimeError(f"{tool.name}: no LLVM version in {out.strip()[:200]!r}")
    return tuple(map(int, m.groups()))


def assembler_llvm_version(arch: str = "gfx1100") -> tuple[int, ...]:
    """The LLVM version of `assembler_for(arch)`, e.g. (22, 1, 8): canonical text differs between versions."""
    return _tool_version(_tool(arch))


def _lines(lines) -> list[str]:
    if isinstance(lines, str):
        lines = lines.splitlines()
    lines = [str(line) for line in lines]
    if any("\n" in line or "\r" in line for line in lines):
        raise ValueError("one instruction per line: a line contains a newline")
    return lines


def _text_section(obj: bytes, who: str) -> tuple[bytes, int, ELFFile]:
    """(.text bytes, .text section index, the ELF) of an object file."""
    try:
        elf = ELFFile(io.BytesIO(obj))
        for index, section in enumerate(elf.iter_sections()):
            if section.name == ".text":
                return section.data(), index, elf
    except ELFError as e:
        raise RuntimeError(f"{who} produced no ELF object: {e}") from None
    return b"", -1, elf


def _messages(run: _Run, line_of) -> tuple[dict[int, str], list[str]]:
    """Errors per input line (via line_of(source line) -> index or None) and the ones no line owns."""
    per_line: dict[int, list[str]] = {}
    unplaced = list(run.unplaced)
    for source_line, messages in run.errors.items():
        index = line_of(source_line)
        if index is None:
            unplaced += messages
        else:
            per_line.setdefault(index, []).extend(messages)
    return {i: "; ".join(m) for i, m in per_line.items()}, unplaced


def _fail(arch: str, lines: list[str], errors: dict[int, str], unplaced: list[str]) -> ValueError:
    parts = [f"line {i + 1} {lines[i]!r}: {msg}" for i, msg in sorted(errors.items())][:20] + unplaced
    return ValueError(f"{arch}: cannot assemble: " + "; ".join(parts))


def assemble_instructions(lines, arch: str = "gfx1100") -> bytes:
    """Assemble instruction text (a list of lines, or one string of lines) into the .text bytes, in one run.

    Raises ValueError naming `arch`, the offending lines and the assembler's messages for text that does not
    assemble, and AssemblerUnavailableError when no assembler on this machine handles `arch`.
    """
    lines = _lines(lines)
    tool = _tool(arch)
    run = _Run(tool, arch, lines, "obj")
    if not run.ok:
        raise _fail(arch, lines, *_messages(run, lambda n: n - 1 if 1 <= n <= len(lines) else None))
    return _text_section(run.output, tool.name)[0]


def _labelled(lines: list[str], indices: list[int]) -> list[str]:
    """The lines at `indices`, each after its label, and a closing label: line k sits at source line 2k + 2."""
    out = []
    for i in indices:
        out += [_LABEL.format(i) + ":", lines[i]]
    return out + [_LABEL.format(len(lines)) + ":"]


_BLOCK_COMMENT = re.compile(r"/\*.*?\*/")


def _printed(listing: str, n: int) -> list[str]:
    """The statements LLVM printed for each line (between its label and the next), comments dropped."""
    printed: list[list[str]] = [[] for _ in range(n)]
    current = None
    for raw in listing.splitlines():
        raw = _BLOCK_COMMENT.sub("", raw)  # LLVM echoes a /* */ comment in front of the next label
        m = _LABEL_LINE.fullmatch(raw.strip())
        if m:
            current = int(m.group(1))
            continue
        statement = " ".join(raw.split(";", 1)[0].split())
        if statement and current is not None and current < n:
            printed[current].append(statement)
    return ["\n".join(p) for p in printed]


def _split(obj: bytes, who: str, indices: list[int], n: int) -> dict[int, bytes]:
    """Each line's bytes: .text between its label and the next line's (or the closing) label."""
    data, text_index, elf = _text_section(obj, who)
    offsets = {}
    for sym in elf.get_section_by_name(".symtab").iter_symbols():
        m = _LABEL_LINE.fullmatch(sym.name + ":")
        if m and sym["st_shndx"] == text_index:
            offsets[int(m.group(1))] = sym["st_value"]
    bounds = [*indices, n]
    missing = [i for i in bounds if i not in offsets]
    if missing:
        raise ValueError(f"{who}: the label before line {missing[0] + 1} is not in .text (did a line change section?)")
    return {i: data[offsets[i]:offsets[j]] for i, j in zip(indices, bounds[1:])}


def assemble_each(lines, arch: str = "gfx1100") -> list[tuple[bytes | None, str | None]]:
    """Assemble each line on its own terms, all in one batch: per line (its bytes, LLVM's canonical text).

    A line LLVM rejects gives (None, its error message) and does not spoil the others. The text is what the
    assembler prints for the line (whitespace normalised, comments dropped; several statements joined by
    newlines); the bytes are the line's share of .text in the object, so branches to labels are resolved.
    Two assembler runs whatever the number of lines: a listing (text and per-line errors) and an object of
    the lines that assembled, split at a symbol placed before every line (another run only if the object
    stage rejects a line the listing accepted, e.g. a branch out of range).
    Raises ValueError for errors that belong to no line, AssemblerUnavailableError as assemble_instructions.
    """
    lines = _lines(lines)
    n = len(lines)
    tool = _tool(arch)

    def owner(indices):
        return lambda s: indices[s // 2 - 1] if s % 2 == 0 and 2 <= s <= 2 * len(indices) else None

    everything = list(range(n))
    listing = _Run(tool, arch, _labelled(lines, everything), "asm")
    errors, unplaced = _messages(listing, owner(everything))
    if unplaced:
        raise _fail(arch, lines, errors, unplaced)
    while True:
        good = [i for i in everything if i not in errors]
        run = _Run(tool, arch, _labelled(lines, good), "obj")
        if run.ok:
            break
        more, unplaced = _messages(run, owner(good))
        if unplaced or not more:
            raise _fail(arch, lines, {**errors, **more}, unplaced)
        errors.update(more)
    code = _split(run.output, tool.name, good, n)
    text = _printed((listing.output or b"").decode(errors="replace"), n)
    return [(None, errors[i]) if i in errors else (code[i], text[i]) for i in everything]
