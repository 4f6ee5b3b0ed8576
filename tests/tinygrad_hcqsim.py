"""tinygrad's unmodified AMD runtime (its KFD interface, ops_amd.KFDIface) on an EmulatedSystem in this process.

tinygrad reaches the kernel through one class, `tinygrad.runtime.support.hcq.FileIOInterface`: open, ioctl, mmap
and read of `/dev/kfd`, `/dev/dri/renderD*` and the KFD/amdgpu sysfs files, plus its anonymous mmaps for GPU VA
(tinygrad's own MOCKGPU swaps that class the same way). `install(system)` swaps it for `EmulatedFileIO`, which
sends those calls to the system's `EmulatedOS` -- the same entry points the native interposer's host uses --
and everything else (other files, eventfds) to the real OS. Nothing of tinygrad is patched beyond that class:
its queues, signals, doorbell stores, kernarg and ring management, compiler and graph run as on a real GPU, and
the GPUs run free on hcqsim's GPU thread (a doorbell is a plain store the thread notices).

tinygrad compiles its LLVM IR through libLLVM >= 18 by ctypes; the host here has LLVM 15 and no comgr, so
`install` also points tinygrad's `AMDLLVMCompiler` at hcqsim's own compiler (llvmlite's LLVM 22, a dependency of
hcqsim): the same IR, the same "+cumode" processor, the same relocatable ELF that tinygrad's loader links.

This is test support: tinygrad is no dependency of hcqsim (tests/test_tinygrad_soak.py installs it into its
own cache directory), and nothing here is imported by hcqsim.
"""
from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hcqsim.kfd import EmulatedSystem

EMULATED_PREFIXES = ("/dev/kfd", "/dev/dri/renderD", "/sys/devices/virtual/kfd", "/sys/class/kfd",
                     "/sys/class/drm")
MAP_ANONYMOUS = 0x20


def _emulated(path: str) -> bool:
    return any(path == p or path.startswith(p) for p in EMULATED_PREFIXES)


class EmulatedFileIO:
    """tinygrad's FileIOInterface, on `EmulatedFileIO.system` for the emulated device files and sysfs."""

    system: "EmulatedSystem | None" = None
    _real = None  # tinygrad's own class, for everything that is not the emulated machine's

    def __init__(self, path: str = "", flags: int = os.O_RDONLY, fd: int | None = None):
        self.path, self.emulated_fd = path, None
        if fd is not None:
            self.fd = fd
        elif path.startswith("/dev/"):
            self.fd = self.emulated_fd = self._os().open(path, flags)  # FileNotFoundError past the last GPU
        elif _emulated(path):
            if not self._os().exists(path):
                raise FileNotFoundError(2, "No such file or directory", path)
            self.fd = -1  # a sysfs file: read through the topology
        else:
            self.fd = os.open(path, flags)

    @classmethod
    def _os(cls):
        if cls.system is None:
            raise RuntimeError("tinygrad_hcqsim.install(system) was not called")
        return cls.system.os

    def __del__(self):
        fd = getattr(self, "fd", -1)
        try:
            if self.emulated_fd is not None:
                self._os().close(self.emulated_fd)
            elif fd >= 0:
                os.close(fd)
        except (OSError, RuntimeError, AttributeError):
            pass

    # -- the device files --------------------------------------------------------------------------

    def ioctl(self, request: int, arg) -> int:
        if self.emulated_fd is None:
            import fcntl
            return fcntl.ioctl(self.fd, request, arg)
        self._os().ioctl(self.emulated_fd, request, arg)  # OSError(errno) as fcntl.ioctl raises it
        return 0

    def mmap(self, start: int, sz: int, prot: int, flags: int, offset: int) -> int:
        if self.emulated_fd is None:
            return self._real._mmap(start, sz, prot, flags, self.fd, offset)
        return self._os().mmap(start, sz, prot, flags, self.emulated_fd, offset & ((1 << 64) - 1))

    @staticmethod
    def anon_mmap(start: int, sz: int, prot: int, flags: int, offset: int) -> int:
        """tinygrad's GPU VA reservations and USERPTR host memory: GPU VA is host VA inside the emulator's window."""
        return EmulatedFileIO._os().mmap(start, sz, prot, flags | MAP_ANONYMOUS, -1, offset)

    @staticmethod
    def munmap(buf: int, sz: int) -> int:
        system = EmulatedFileIO.system
        if system is not None and system.window.base <= buf < system.window.base + system.window.size:
            system.os.munmap(buf, sz)
            return 0
        return EmulatedFileIO._real.munmap(buf, sz)

    # -- sysfs ---------------------------------------------------------------------------------------

    def read(self, size=None, binary: bool = False, offset=None):
        if self.fd != -1:
            return self._real.read(self, size, binary, offset)
        text = self._os().read_text(self.path)
        text = text[offset or 0:][:size] if size is not None or offset else text
        return text.encode() if binary else text

    def write(self, content, binary: bool = False, offset=None):
        if self.fd == -1:
            raise PermissionError(13, "emulated sysfs is read-only here", self.path)
        return self._real.write(self, content, binary, offset)

    def listdir(self) -> list[str]:
        return self._os().listdir(self.path) if _emulated(self.path) else os.listdir(self.path)

    def seek(self, offset: int) -> None:
        os.lseek(self.fd, offset, os.SEEK_SET)

    @staticmethod
    def exists(path: str) -> bool:
        return EmulatedFileIO._os().exists(path) if _emulated(path) else os.path.exists(path)

    @staticmethod
    def readlink(path: str) -> str:
        return os.readlink(path)

    @staticmethod
    def eventfd(initval, flags=None):
        return EmulatedFileIO(fd=os.eventfd(initval, flags))  # type: ignore[attr-defined]


_ALLOCA = re.compile(r"^(\s*)(%[\w.]+) = alloca ([^,\n]+)(, align \d+)?$", re.M)


def _alloca_in_private(m: re.Match) -> str:
    """LLVM 22's verifier wants AMDGPU allocas in addrspace(5); tinygrad's IR (written for LLVM 18-21) puts them in
    the default space. The same alloca in private memory, cast to a flat pointer for its users (which is what
    clang emits; InferAddressSpaces turns the accesses back into scratch ones)."""
    indent, name, ty, align = m.group(1), m.group(2), m.group(3), m.group(4) or ""
    return (f"{indent}{name}.private = alloca {ty}{align}, addrspace(5)\n"
            f"{indent}{name} = addrspacecast {ty} addrspace(5)* {name}.private to {ty}*")


def llvmlite_compiler():
    """tinygrad's AMDLLVMCompiler, compiling through hcqsim.compiler.compile_llvm (LLVM 22 of llvmlite)."""
    from tinygrad.device import CompileError, Compiler

    from hcqsim.compiler import CompileError as HcqCompileError
    from hcqsim.compiler import compile_llvm, target_machine

    class LlvmliteAMDCompiler(Compiler):
        def __init__(self, arch: str):
            self.arch = arch
            super().__init__(f"compile_llvmlite_{arch}")

        def __reduce__(self):
            return (type(self), (self.arch,))

        def compile(self, src: str) -> bytes:
            arch = f"{self.arch}:cumode+"
            if "target datalayout" not in src:  # tinygrad's IR has none; LLVM 22's verifier wants allocas in
                src = f'target datalayout = "{target_machine(arch).target_data}"\n{src}'  # addrspace(5): A5
            src = _ALLOCA.sub(_alloca_in_private, src)
            try:  # tinygrad's own pipeline: default<O2> IR passes, then the code generator at its default level
                return compile_llvm(src, arch, opt=2, ir_passes=True)
            except HcqCompileError as e:
                if os.environ.get("HCQSIM_TINYGRAD_SHOW_IR"):
                    print(src, file=sys.stderr)
                raise CompileError(str(e)) from e

    return LlvmliteAMDCompiler


def _c_compiler() -> None:
    """tinygrad's CPU device compiles its helper programs with `$CC` (clang). Without a clang on PATH: the clang of
    the ziglang wheel (hcqsim's assembler, `python -m ziglang clang`), through a two-line script."""
    import shutil
    import tempfile
    if "CC" in os.environ or shutil.which("clang"):
        return
    script = os.path.join(tempfile.gettempdir(), f"hcqsim-tinygrad-clang-{os.getpid()}")
    with open(script, "w") as f:
        f.write(f'#!/bin/sh\nexec "{sys.executable}" -m ziglang clang "$@"\n')
    os.chmod(script, 0o755)
    os.environ["CC"] = script


def install(system: "EmulatedSystem") -> None:
    """Point tinygrad's device-file interface at `system` and its AMD LLVM compiler at llvmlite (before the first
    AMD device is opened). Compiles run in this process (PARALLEL=0): tinygrad's worker pool would rebuild the
    renderer, and with it tinygrad's own compiler, in a fresh interpreter."""
    os.environ["PARALLEL"] = "0"
    _c_compiler()
    from tinygrad import helpers
    from tinygrad.runtime.support import compiler_llvm, hcq

    helpers.PARALLEL.value = 0

    compiler_llvm.AMDLLVMCompiler = llvmlite_compiler()

    real = hcq.FileIOInterface if EmulatedFileIO._real is None else EmulatedFileIO._real
    EmulatedFileIO._real, EmulatedFileIO.system = real, system
    # tinygrad's ioctl helper (support/c.py _do_ioctl) sends an fd object through its own ioctl() when it is an
    # instance of hcq.FileIOInterface as looked up at call time; modules that imported the name get ours too
    hcq.FileIOInterface = EmulatedFileIO
    for name, module in list(sys.modules.items()):
        if name.startswith("tinygrad.") and getattr(module, "FileIOInterface", None) is real:
            module.FileIOInterface = EmulatedFileIO



# -- tinygrad itself: pinned, fetched once into hcqsim's cache (never a dependency of hcqsim) --------------------

TINYGRAD_VERSION = "0.14.0"
TINYGRAD_WHEEL = ("tinygrad-0.14.0-py3-none-any.whl",
                  "d2a5bea33c637fdf105963632329876b3d3253d38295ac1ffd2ff81646d93be3")
TINYGRAD_SDIST = ("tinygrad-0.14.0.tar.gz", "437be6bb7481ec26e332e4f4342f6ea09e41258e62c5c09f4a9ed7aeb7829a07")
SDIST_TESTS = ("test/test_tiny.py",)  # the tinygrad test files its source release ships


class TinygradUnavailable(RuntimeError):
    """tinygrad could not be fetched or checked: the message is one line saying why."""


def _sha256(path) -> str:
    import hashlib
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _download(where, filename: str, sha256: str, binary: bool) -> str:
    import subprocess
    path = os.path.join(where, filename)
    if not os.path.exists(path) or _sha256(path) != sha256:
        kind = ["--only-binary=:all:"] if binary else ["--no-binary=:all:"]
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", *kind, "-d", where,
                               f"tinygrad=={TINYGRAD_VERSION}"], capture_output=True, text=True, timeout=600)
        if proc.returncode or not os.path.exists(path):
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise TinygradUnavailable(f"pip download tinygrad=={TINYGRAD_VERSION} ({filename}) failed: {last}")
        if _sha256(path) != sha256:
            os.unlink(path)
            raise TinygradUnavailable(f"{filename} does not have the pinned sha256 {sha256}")
    return path


def fetch() -> tuple[str, str]:
    """(a directory holding the `tinygrad` package, a directory holding tinygrad's own test files), fetched once
    with pip from the package registry at the pinned version and sha256 into $HCQSIM_CACHE/tinygrad."""
    import tarfile
    import zipfile

    from hcqsim.native.build import cache_dir
    top = os.path.join(str(cache_dir()), "tinygrad", TINYGRAD_VERSION)
    site, tests = os.path.join(top, "site"), os.path.join(top, "tests")
    if os.path.exists(os.path.join(top, "complete")):
        return site, tests
    os.makedirs(top, exist_ok=True)
    wheel = _download(top, *TINYGRAD_WHEEL, binary=True)
    sdist = _download(top, *TINYGRAD_SDIST, binary=False)
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    with tarfile.open(sdist) as t:
        for name in SDIST_TESTS:
            member = t.getmember(f"tinygrad-{TINYGRAD_VERSION}/{name}")
            os.makedirs(os.path.dirname(os.path.join(tests, name)), exist_ok=True)
            with open(os.path.join(tests, name), "wb") as f:
                f.write(t.extractfile(member).read())
    open(os.path.join(top, "complete"), "w").close()
    return site, tests


# -- as a pytest plugin (`-p tests.tinygrad_hcqsim`): tinygrad's own test files on an emulated machine ------------

def pytest_configure(config) -> None:
    """One free-running EmulatedSystem for the whole session: HCQSIM_TINYGRAD_GPUS GPUs (6) of
    HCQSIM_TINYGRAD_TARGET (gfx1100)."""
    from hcqsim.kfd import EmulatedSystem

    system = EmulatedSystem(num_gpus=int(os.environ.get("HCQSIM_TINYGRAD_GPUS", "6")),
                            target=os.environ.get("HCQSIM_TINYGRAD_TARGET", "gfx1100"), free_running=True)
    install(system)
    config._hcqsim_system = system
    _report_wait_timeouts(system)


def _report_wait_timeouts(system: "EmulatedSystem") -> None:
    """tinygrad's signal wait gives up after 30 s without progress: print at that moment what the machine holds
    (the signal's value then and 2 s later, every queue's pointers), so a slow machine and a wedge tell apart."""
    import time

    from tinygrad.runtime.support import hcq

    real_wait = hcq.HCQSignal.wait

    def wait(self, value: int, timeout: int | None = None):
        try:
            return real_wait(self, value, timeout)
        except RuntimeError as e:
            if "Wait timeout" not in str(e):
                raise
            before, steps = self.value, getattr(system.thread, "steps", None)
            text = health(system)
            time.sleep(2)  # the host thread is quiet now: a GPU thread that can still work shows it here
            print(f"hcqsim: tinygrad wait for {value} on the signal at 0x{self.base_buf.va_addr:x} timed out: value "
                  f"{before} then, {self.value} 2 s later; GPU-thread steps that did work {steps} then, "
                  f"{getattr(system.thread, 'steps', None)} 2 s later\n{text}\n2 s later:\n{pointers(system)}",
                  file=sys.stderr, flush=True)
            raise

    hcq.HCQSignal.wait = wait


def pytest_report_header(config) -> str:
    system = getattr(config, "_hcqsim_system", None)
    return "" if system is None else f"hcqsim: tinygrad on {len(system.gpus)} emulated {system.target.name} GPUs, " \
                                     f"free-running"


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    system = getattr(config, "_hcqsim_system", None)
    if system is not None:
        terminalreporter.write_line(health(system))


def health(system: "EmulatedSystem") -> str:
    """The GPU thread's state and every queue's (what a wedge leaves behind: a queue busy with dwords left)."""
    thread = system.thread
    alive = thread is not None and thread.alive
    return f"hcqsim health: GPU thread {'alive' if alive else 'NOT RUNNING'}, " \
           f"{sum(len(g.faults) for g in system.gpus)} fault(s)\n{system.describe()}\n{pointers(system)}"


def pointers(system: "EmulatedSystem") -> str:
    """Per queue, what the runtime stored (the write pointer in memory, the doorbell slot) beside what the emulator
    took from them: a store the emulator never saw shows here as a write pointer ahead of the queue's."""
    import ctypes
    lines = []
    with system.lock:
        driver = system.driver
        for rec in driver.queues.records.values():
            q, base = rec.queue, driver.memory.doorbell_va(rec.device)
            slot = ctypes.c_uint64.from_address(base + rec.doorbell_offset).value if base is not None else None
            wptr = ctypes.c_uint64.from_address(q.wptr_va).value
            lines.append(f"  {rec.device.gpu.label} {q.name}: emulator rptr {q.rptr} wptr {q.wptr}; memory wptr {wptr}, "
                         f"doorbell slot {slot} (last delivered {rec.last_doorbell})")
    return "queue pointers:\n" + "\n".join(lines)


def _pytest_hookwrapper(fn):
    import pytest
    return pytest.hookimpl(hookwrapper=True)(fn)


@_pytest_hookwrapper
def pytest_runtest_makereport(item, call):
    """A failed test's report carries the machine's state at that moment (the first sign of a wedge)."""
    outcome = yield
    report = outcome.get_result()
    system = getattr(item.config, "_hcqsim_system", None)
    if report.failed and system is not None:
        faults = [f"{gpu.label} fault: {f}" for gpu in system.gpus for f in gpu.faults[:3]]
        report.sections.append(("hcqsim machine", health(system) + "".join(f"\n{x}" for x in faults)))
