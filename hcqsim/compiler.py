"""LLVM IR -> AMDGPU code objects, through llvmlite; and an instruction assembler for encoding checks.

`compile_llvm(ir, arch)` returns the relocatable ELF (ET_REL) code object that llvmlite's LLVM emits for the
`amdgcn-amd-amdhsa` triple; `hcqsim.codeobject.CodeObject.from_bytes` loads it. `assemble_listing` gives
the assembly text of the same compile. `assemble_instructions(lines, arch)` turns instruction text into
machine code bytes (the encoding oracle for the instruction decoder).

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

Assembling instruction text: the llvmlite 0.50 wheels (LLVM 22) contain the AMDGPU code generator but
**not** the AMDGPU assembly parser, and emitting an object from a module with `module asm` then aborts the
process ("Inline asm not supported by this streamer because we don't have an asm parser for this target").
So `assemble_instructions` runs the llvmlite path (module asm in an otherwise empty module, placed in
.text) in a child process, where an abort cannot take the caller down, and falls back to an `llvm-mc`
executable that knows the processor (`$HCQSIM_LLVM_MC`, else `llvm-mc`/`llvm-mc-N` on PATH or in
/opt/rocm/llvm/bin, newest first). With neither it raises `AssemblerUnavailableError`.
"""
from __future__ import annotations

import functools
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


def _module_asm_ir(lines: list[str]) -> str:
    """An otherwise empty module whose module-level inline asm holds the lines, in .text."""

    def quote(s: str) -> str:
        return "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else f"\\{ord(c):02X}" for c in s)

    body = "".join(f'module asm "{quote(line)}"\n' for line in [".text", *lines])
    return f'target triple = "{TRIPLE}"\n{body}'


# Runs in a child process: an LLVM abort (no asm parser, bad instruction) must not kill the caller.
_CHILD = r"""
import sys
import llvmlite.binding as llvm
cpu, features = sys.argv[1], sys.argv[2]
llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()
init_parsers = getattr(llvm, "initialize_all_asmparsers", None)
if init_parsers is not None:
    init_parsers()
tm = llvm.Target.from_triple("amdgcn-amd-amdhsa").create_target_machine(cpu=cpu, features=features, opt=0)
module = llvm.parse_assembly(sys.stdin.read())
module.data_layout = str(tm.target_data)
sys.stdout.buffer.write(tm.emit_object(module))
"""

_NO_ASM_PARSER = "don't have an asm parser"
_llvmlite_can_assemble: bool | None = None  # None: not tried yet in this process
_llvm_mc_for: dict[str, str | None] = {}
_assembler_lock = threading.Lock()


def _text_section(obj: bytes, who: str) -> bytes:
    try:
        text = ELFFile(io.BytesIO(obj)).get_section_by_name(".text")
    except ELFError as e:
        raise RuntimeError(f"{who} produced no ELF object: {e}") from None
    return b"" if text is None else text.data()


def _assemble_llvmlite(lines: list[str], arch: str) -> bytes | None:
    """The .text bytes, or None when this llvmlite cannot assemble AMDGPU code at all."""
    global _llvmlite_can_assemble
    if _llvmlite_can_assemble is False:
        return None
    cpu, features = split_arch(arch)
    proc = subprocess.run([sys.executable, "-c", _CHILD, cpu, features], input=_module_asm_ir(lines).encode(),
                          capture_output=True, timeout=120)
    err = proc.stderr.decode(errors="replace").strip()
    if proc.returncode != 0 or "is not a recognized processor" in err:
        if _NO_ASM_PARSER in err:
            _llvmlite_can_assemble = False
            return None
        raise ValueError(f"{arch}: cannot assemble: {err or f'llvmlite child exited with {proc.returncode}'}")
    _llvmlite_can_assemble = True
    return _text_section(proc.stdout, "llvmlite")


def _llvm_mc_candidates() -> list[str]:
    env = os.environ.get("HCQSIM_LLVM_MC")
    if env:
        return [env]
    found: dict[str, tuple[int, str]] = {}
    dirs = os.environ.get("PATH", "").split(os.pathsep) + ["/opt/rocm/llvm/bin"]
    for d in dirs:
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


def _run_llvm_mc(tool: str, lines: list[str], arch: str) -> tuple[bytes | None, str]:
    cpu, features = split_arch(arch)
    with tempfile.TemporaryDirectory(prefix="hcqsim-mc-") as tmp:
        out = os.path.join(tmp, "a.o")
        cmd = [tool, f"-triple={TRIPLE}", f"-mcpu={cpu}", "-filetype=obj", "-o", out]
        if features:
            cmd.append(f"-mattr={features}")
        proc = subprocess.run(cmd, input="\n".join([*lines, ""]).encode(), capture_output=True, timeout=120)
        err = proc.stderr.decode(errors="replace").strip()
        if proc.returncode != 0 or "is not a recognized processor" in err or not os.path.exists(out):
            return None, err or f"{tool} exited with {proc.returncode}"
        with open(out, "rb") as f:
            return f.read(), err


def _llvm_mc(arch: str) -> str | None:
    """The first llvm-mc that assembles for `arch` (probed once per arch with s_endpgm)."""
    if arch not in _llvm_mc_for:
        _llvm_mc_for[arch] = None
        for tool in _llvm_mc_candidates():
            try:
                obj, _ = _run_llvm_mc(tool, ["s_endpgm"], arch)
            except (OSError, subprocess.SubprocessError):
                continue
            if obj is not None:
                _llvm_mc_for[arch] = tool
                break
    return _llvm_mc_for[arch]


def assembler_for(arch: str = "gfx1100") -> str:
    """Which assembler `assemble_instructions` uses for `arch`: 'llvmlite', a path to llvm-mc, or raises
    AssemblerUnavailableError."""
    with _assembler_lock:
        if _llvmlite_can_assemble is None:
            try:
                _assemble_llvmlite(["s_endpgm"], arch)
            except ValueError:
                pass
        if _llvmlite_can_assemble:
            return "llvmlite"
        tool = _llvm_mc(arch)
    if tool is None:
        raise AssemblerUnavailableError(
            f"{arch}: no assembler: llvmlite's LLVM {_llvm_version()} has no AMDGPU assembly parser, and no "
            f"llvm-mc that knows {split_arch(arch)[0]} was found (install a recent LLVM's llvm-mc, e.g. Debian's "
            f"llvm-19, or point HCQSIM_LLVM_MC at one)")
    return tool


def assemble_instructions(lines: list[str], arch: str = "gfx1100") -> bytes:
    """Assemble instruction text (one instruction or directive per line) and return the .text bytes.

    Raises ValueError naming `arch` and the assembler's message for text that does not assemble, and
    AssemblerUnavailableError when no assembler on this machine handles `arch`.
    """
    if isinstance(lines, str):
        lines = lines.splitlines()
    lines = [str(line) for line in lines]
    if any("\n" in line for line in lines):
        raise ValueError("one instruction per line: a line contains a newline")
    split_arch(arch)
    backend = assembler_for(arch)
    if backend == "llvmlite":
        text = _assemble_llvmlite(lines, arch)
        if text is not None:
            return text
        backend = assembler_for(arch)
    obj, err = _run_llvm_mc(backend, lines, arch)
    if obj is None:
        raise ValueError(f"{arch}: cannot assemble: {err}")
    return _text_section(obj, backend)
