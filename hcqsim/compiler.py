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
* LLVM aborts the process on IR that it accepts but cannot select instructions for (`llvm.sin.f64` on
  gfx1100); that cannot be caught from Python. So compiles run in a child process (one worker per calling
  process) and such an abort is a `CompileError` carrying LLVM's message. Code objects, listings and errors
  are cached on disk (`cache_dir()`: $HCQSIM_CACHE, else ~/.cache/hcqsim; HCQSIM_CACHE=off disables it),
  keyed by IR text, processor, opt level, ir_passes and the LLVM and llvmlite versions.

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

import atexit
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


def compile_llvm(ir_text: str, arch: str = "gfx1100", opt: int = 2, *, ir_passes: bool = False,
                 code_object_version: int | None = None, link: bool = False) -> bytes:
    """Compile LLVM IR text to a relocatable AMDGPU ELF code object (ET_REL, code object v6 with LLVM 22).

    For loaders that want what the ROCm toolchain ships (ROCr 5.x/6.1 accept code objects up to v5, and only
    shared objects): `code_object_version=5` (or 4) sets the module flag `amdhsa_code_object_version` (the IR must
    not carry module flags of its own), and `link=True` links the object with `ld.lld -shared` (the ziglang
    wheel's, as `python -m ziglang ld.lld`) into an ET_DYN code object.

    Raises CompileError (a ValueError, naming `arch` and LLVM's message) for IR that does not parse or verify,
    IR LLVM cannot select instructions for (which aborts LLVM: the compile runs in a child process), an unknown
    processor or a bad `opt`. Results are cached on disk (see `cache_dir`).
    """
    if code_object_version is not None:
        ir_text = _with_code_object_version(ir_text, code_object_version)
    obj = _compile("obj", ir_text, arch, opt, ir_passes)
    return _link_shared(obj, arch) if link else obj


CODE_OBJECT_VERSIONS = (4, 5, 6)


def _with_code_object_version(ir_text: str, version: int) -> str:
    if version not in CODE_OBJECT_VERSIONS:
        raise ValueError(f"code object version must be one of {CODE_OBJECT_VERSIONS}, not {version!r}")
    if not isinstance(ir_text, str):
        raise TypeError(f"LLVM IR must be text, not {type(ir_text).__name__}")
    if "!llvm.module.flags" in ir_text:
        raise ValueError("code_object_version= needs IR without !llvm.module.flags (set amdhsa_code_object_version "
                         "in the IR's own flags instead)")
    return (f"{ir_text}\n!llvm.module.flags = !{{!90001}}\n"
            f"!90001 = !{{i32 1, !\"amdhsa_code_object_version\", i32 {version * 100}}}\n")


def linker_unavailable() -> str | None:
    """Why `compile_llvm(..., link=True)` cannot link here (the ld.lld of the ziglang wheel is missing), or None."""
    if _have_ziglang():
        return None
    return ("linking a code object (link=True) needs ld.lld from the ziglang wheel: install hcqsim's isa extra "
            "(pip install 'hcqsim[isa]')")


def _link_shared(obj: bytes, arch: str) -> bytes:
    """`ld.lld -shared` of one AMDGPU object (what hipcc does): the ET_DYN code object ROCr loads."""
    import hashlib
    import tempfile
    key = hashlib.sha256(b"ld.lld -shared\0" + obj).hexdigest()
    where = cache_dir()
    cached = os.path.join(where, "linked", key + ".so") if where else None
    if cached and os.path.exists(cached):
        with open(cached, "rb") as f:
            return f.read()
    if (why := linker_unavailable()) is not None:
        raise CompileError(f"{arch}: {why}")
    with tempfile.TemporaryDirectory(prefix="hcqsim-link-") as tmp:
        src, out = os.path.join(tmp, "k.o"), os.path.join(tmp, "k.so")
        with open(src, "wb") as f:
            f.write(obj)
        try:
            done = subprocess.run([sys.executable, "-m", "ziglang", "ld.lld", "-shared", "-o", out, src],
                                  capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise CompileError(f"{arch}: ld.lld could not run: {e}") from None
        if done.returncode != 0:
            raise CompileError(f"{arch}: ld.lld -shared failed: {done.stderr.strip()}")
        with open(out, "rb") as f:
            linked = f.read()
    if cached:
        os.makedirs(os.path.dirname(cached), exist_ok=True)
        tmp_path = f"{cached}.{os.getpid()}"
        with open(tmp_path, "wb") as f:
            f.write(linked)
        os.replace(tmp_path, cached)
    return linked


def assemble_listing(ir_text: str, arch: str = "gfx1100", opt: int = 2, *, ir_passes: bool = False) -> str:
    """The assembly text LLVM produces for the IR (a separate parse from any object emit); errors and caching
    as `compile_llvm`."""
    return _compile("asm", ir_text, arch, opt, ir_passes).decode()


def _emit(kind: str, ir_text: str, arch: str, opt: int, ir_passes: bool) -> bytes:
    """The in-process compile: only ever run inside the compile worker, where an LLVM abort kills no caller."""
    tm = target_machine(arch, opt)
    module = _parse(ir_text, arch, tm, ir_passes, opt)
    with _emit_lock:
        return tm.emit_object(module) if kind == "obj" else tm.emit_assembly(module).encode()


# ---------------------------------------------------------------------------------------------------
# compiling safely: a child process, and a disk cache
#
# LLVM reports IR it accepts but cannot select instructions for (llvm.sin.f64 on gfx1100) with abort(), which
# no Python code survives. So every compile runs in a worker process (one per calling process, started on the
# first compile, restarted after it died); a worker that dies turns into a CompileError with what LLVM printed.
# The worker costs a round trip per compile and its start-up once; the disk cache makes reruns free.

CACHE_FORMAT = 1  # bump when what is cached (or how it is keyed) changes
_MAGIC = b"HCQC"
_WORKER_TIMEOUT = 600  # seconds one compile may take before the worker is declared hung


class CompileError(ValueError):
    """LLVM could not compile the IR (parse, verify, or instruction selection) or the target is unknown; the
    message names the processor and carries LLVM's own message."""


def cache_dir() -> str | None:
    """Where compiled code objects are kept: $HCQSIM_CACHE, else $XDG_CACHE_HOME/hcqsim, else ~/.cache/hcqsim
    (a `llvm` directory inside). HCQSIM_CACHE=off disables the cache."""
    root = os.environ.get("HCQSIM_CACHE")
    if root is None:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hcqsim")
    if root.lower() in ("off", "0", "none", ""):
        return None
    return os.path.join(root, "llvm")


def _cache_key(kind: str, ir_text: str, arch: str, opt: int, ir_passes: bool) -> str:
    import hashlib
    import llvmlite
    meta = f"{CACHE_FORMAT}|{kind}|{arch}|{opt}|{int(ir_passes)}|LLVM {_llvm_version()}|llvmlite {llvmlite.__version__}"
    return hashlib.sha256(meta.encode() + b"\0" + ir_text.encode()).hexdigest()


def _cache_read(key: str) -> tuple[bool, bytes] | None:
    """(ok, code or error message) from the cache, or None (missing, unreadable or not ours)."""
    data = read_cache_file(cache_dir(), key)
    if data is None or data[:4] != _MAGIC or data[4:5] not in (b"O", b"E"):
        return None
    return data[4:5] == b"O", data[5:]


def _cache_write(key: str, ok: bool, payload: bytes) -> None:
    write_cache_file(cache_dir(), key, _MAGIC + (b"O" if ok else b"E") + payload)


def read_cache_file(directory: str | None, key: str) -> bytes | None:
    """The bytes of a cache entry, or None (no cache directory, missing or unreadable)."""
    if directory is None:
        return None
    try:
        with open(os.path.join(directory, key), "rb") as f:
            return f.read()
    except OSError:
        return None


def write_cache_file(directory: str | None, key: str, data: bytes) -> None:
    """Atomic: written to a private temporary file in the cache directory, then renamed over the key, so
    concurrent writers (pytest-xdist workers) and readers only ever see whole entries. A read-only or full disk
    costs speed, not correctness: the entry is then not written."""
    if directory is None:
        return
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, os.path.join(directory, key))
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass


def _compile(kind: str, ir_text: str, arch: str, opt: int, ir_passes: bool) -> bytes:
    if not isinstance(ir_text, str):
        raise TypeError(f"LLVM IR must be text, not {type(ir_text).__name__}")
    split_arch(arch)  # a malformed name is the caller's error, found without a worker
    if opt not in (0, 1, 2, 3):
        raise ValueError(f"{arch}: optimisation level must be 0..3, not {opt!r}")
    key = _cache_key(kind, ir_text, arch, opt, bool(ir_passes))
    hit = _cache_read(key)
    if hit is None:
        ok, payload, cacheable = _worker.run((kind, ir_text, arch, opt, bool(ir_passes)))
        if cacheable:
            _cache_write(key, ok, payload)
    else:
        ok, payload = hit
    if not ok:
        raise CompileError(payload.decode(errors="replace"))
    return payload


class _Worker:
    """The compile worker of this process: `python -c 'from hcqsim.compiler import _serve; _serve()'` reading
    pickled requests on stdin and answering (ok, payload) on stdout; its stderr goes to a file so that what LLVM
    printed before aborting can be read after the process is gone."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.pid = 0  # the process that started `proc`: a forked child must not share its pipes
        self.stderr = None
        self.lock = threading.Lock()

    def close(self) -> None:
        """Stop the worker (at exit): closing its stdin ends its loop."""
        proc, self.proc = self.proc, None
        if proc is not None and self.pid == os.getpid():
            proc.stdin.close()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _start(self) -> None:
        import hcqsim
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.abspath(hcqsim.__file__)))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self.stderr = tempfile.TemporaryFile(prefix="hcqsim-llvm-")
        self.proc = subprocess.Popen([sys.executable, "-c", "from hcqsim.compiler import _serve; _serve()"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, env=env)
        self.pid = os.getpid()

    def run(self, request: tuple) -> tuple[bool, bytes, bool]:
        """(ok, code or message, cacheable) for one compile request."""
        import pickle
        import select
        import struct as st
        kind, _ir, arch, _opt, _passes = request
        with self.lock:
            if self.proc is None or self.pid != os.getpid() or self.proc.poll() is not None:
                self._start()
            proc = self.proc
            start = self.stderr.seek(0, os.SEEK_END)
            try:
                data = pickle.dumps(request)
                proc.stdin.write(st.pack("<Q", len(data)) + data)
                proc.stdin.flush()
                if not select.select([proc.stdout], [], [], _WORKER_TIMEOUT)[0]:
                    proc.kill()
                    proc.wait()
                    self.proc = None
                    return False, f"{arch}: LLVM did not finish within {_WORKER_TIMEOUT} s (killed)".encode(), False
                head = proc.stdout.read(8)
                body = proc.stdout.read(st.unpack("<Q", head)[0]) if len(head) == 8 else b""
                if len(head) < 8:
                    raise EOFError
            except (OSError, EOFError, st.error):
                return self._died(arch, start)
            ok, payload = pickle.loads(body)
            return ok, payload, True

    def _died(self, arch: str, start: int) -> tuple[bool, bytes, bool]:
        """The worker is gone: what it printed becomes the error. An LLVM abort (SIGABRT after 'LLVM ERROR')
        is a property of the IR and is cached; any other death is not."""
        proc, self.proc = self.proc, None
        code = proc.wait()
        self.stderr.seek(start)
        text = self.stderr.read().decode(errors="replace").strip()
        lines = text.splitlines()
        first = next((i for i, line in enumerate(lines) if "LLVM ERROR" in line), None)
        shown = "\n".join(lines[first:first + 40] if first is not None else lines[-40:])
        how = f"signal {-code}" if code < 0 else f"exit status {code}"
        message = f"{arch}: LLVM aborted the compile ({how}): {shown or 'no message'}"
        return False, message.encode(), first is not None and code == -6


_worker = _Worker()
atexit.register(_worker.close)


def _serve() -> None:
    """The compile worker's loop (see _Worker): one request at a time until stdin closes."""
    import pickle
    import struct as st
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        head = stdin.read(8)
        if len(head) < 8:
            return
        kind, ir_text, arch, opt, ir_passes = pickle.loads(stdin.read(st.unpack("<Q", head)[0]))
        try:
            reply = (True, _emit(kind, ir_text, arch, opt, ir_passes))
        except ValueError as e:  # bad IR, unknown processor: LLVM's message, the worker lives on
            reply = (False, str(e).encode())
        data = pickle.dumps(reply)
        stdout.write(st.pack("<Q", len(data)) + data)
        stdout.flush()


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
            f"assembly parser; install hcqsim's isa extra (pip install 'hcqsim[isa]': the ziglang wheel, which ships "
            f"LLVM's clang -cc1as), or a recent LLVM's llvm-mc on PATH, or point HCQSIM_LLVM_MC at one")
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
