"""The host side of the interposer: the callbacks that put a native process's KFD calls on an EmulatedSystem.

`NativeHost(system)` registers five ctypes callbacks (open, close, ioctl, mmap, munmap) with the interposer
library, together with the emulator's VA window and the sysfs rewrites (`hcqsim.native.sysfs`). Every
callback answers as the kernel would: a result, or -errno (the OSError's errno the emulated driver raised);
an unexpected Python exception is printed and answered -EIO, so a bug in hcqsim never unwinds through
native frames. Failed calls are remembered (`failures`) and, with `log=`, written one per line.

`start_embedded()` is what the interposer runs inside an unmodified executable (HCQSIM_NATIVE_EMBED=1):
it builds the system the launcher described in HCQSIM_NATIVE_* variables and registers it.
"""
from __future__ import annotations

import atexit
import ctypes
import errno
import os
import re
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from typing import TYPE_CHECKING, TextIO

from .. import kfd_uapi as k
from . import sysfs

if TYPE_CHECKING:
    from ..kfd import EmulatedSystem

OPEN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p)
CLOSE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)
IOCTL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)
MMAP = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                        ctypes.c_int64)
_SPIN_PC = re.compile(r"spins at PC \+0x[0-9a-f]+: [^\n]*")
DEADLOCK_EXIT = 3  # the process's exit status when the deadlock watchdog ends it

MUNMAP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64)
REFRESH = ctypes.CFUNCTYPE(None, ctypes.c_char_p)


SYSFS_PREFIX = "hcqsim-sysfs-"  # + pid: an embedded host never runs Python's exit handlers, so the next host removes
#                                 the copies of processes that are gone


def _remove_stale_sysfs_copies() -> None:
    import shutil
    root = tempfile.gettempdir()
    for name in os.listdir(root):
        if not name.startswith(SYSFS_PREFIX):
            continue
        pid = name[len(SYSFS_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


class HostStruct(ctypes.Structure):
    """struct hcq_host of interposer.c."""

    _fields_ = [("open", OPEN), ("close", CLOSE), ("ioctl", IOCTL), ("mmap", MMAP), ("munmap", MUNMAP),
                ("window_base", ctypes.c_uint64), ("window_size", ctypes.c_uint64), ("redirects", ctypes.c_char_p),
                ("refresh", REFRESH)]


def request_name(request: int) -> str:
    """AMDKFD_IOC_<NAME>, DRM_IOCTL_<nr> or the number, for logs."""
    _dir, kind, nr, _size = k.ioc_decode(request)
    if kind == k.AMDKFD_IOCTL_BASE and nr in k.IOCTLS_BY_NR:
        return f"AMDKFD_IOC_{k.IOCTLS_BY_NR[nr].name}"
    if kind == ord("d"):
        return f"DRM_IOCTL nr 0x{nr:02x}"
    return f"ioctl 0x{request:08x}"


class NativeHost:
    """Routes one native process's device calls to `system` (an EmulatedSystem, free-running for native code)."""

    def __init__(self, system: "EmulatedSystem", library: str | os.PathLike | None = None,
                 log: TextIO | None = None, trace: bool = False, deadlock_timeout: float = 0):
        self.system, self.log, self.trace = system, log, trace
        self.failures: list[str] = []
        self.calls: Counter = Counter()
        self._lock = threading.Lock()
        _remove_stale_sysfs_copies()
        self.sysfs_root = tempfile.mkdtemp(prefix=f"{SYSFS_PREFIX}{os.getpid()}-")
        rewrites = sysfs.export(system, self.sysfs_root)
        self._live = sysfs.live_files(system)
        self._callbacks = (OPEN(self._open), CLOSE(self._close), IOCTL(self._ioctl), MMAP(self._mmap),
                           MUNMAP(self._munmap))
        self._refresh_callback = REFRESH(self._refresh)
        self._redirects = "".join(f"{a}={b}\n" for a, b in rewrites).encode()
        self.struct = HostStruct(*self._callbacks, system.window.base, system.window.size, self._redirects,
                                 self._refresh_callback)
        self.lib = ctypes.CDLL(str(library) if library else None)  # None: the interposer preloaded in this process
        self.lib.hcq_register(ctypes.byref(self.struct))
        # A Python program's exit finalizes the interpreter before libc's destructors run ROCr's teardown: from
        # then on the interposer answers by itself (an embedded host never finalizes, so this never runs there).
        atexit.register(self._at_python_exit)
        self._closed = threading.Event()
        self._faults_seen = [0] * len(system.gpus)
        if log is not None:  # GPU faults are reported as they happen: the native program may never ask
            threading.Thread(target=self._watch_faults, name="hcqsim-native-faults", daemon=True).start()
        self.deadlock_timeout = deadlock_timeout
        if deadlock_timeout:
            threading.Thread(target=self._watch_deadlock, name="hcqsim-native-deadlock", daemon=True).start()

    def _quiet_state(self) -> list[str] | None:
        """What the machine waits on when every GPU is quiet or only spins (blocked queues, spinning waves, queues a
        fault stopped: a malformed packet stops its queue for good, and the runtime never hears of it)."""
        with self.system.lock:
            driver = self.system.driver
            driver.queues.poll_doorbells()
            if not driver.settled():
                return None
            # a spinning wave's PC moves around its loop: what it polls, and the value there, identify the wait
            stopped = [f"stopped by a fault: {str(f).splitlines()[0]}" for g in self.system.gpus for f in g.faults]
            return [str(b) for b in driver.blocked()] + [_SPIN_PC.sub("spins", str(w)) for w in driver.spinning()] \
                + stopped or None

    def _watch_deadlock(self) -> None:
        """A queue blocked on memory with the machine otherwise quiet, unchanged for `deadlock_timeout` seconds:
        the program waits for something nothing will do. Report the machine (describe()) and end the process
        with DEADLOCK_EXIT instead of hanging silently."""
        since, last = None, None
        while not self._closed.wait(0.5):
            state = self._quiet_state()
            if state is None or state != last:
                since, last = (time.monotonic() if state else None), state
                continue
            if time.monotonic() - since >= self.deadlock_timeout:
                text = (f"hcqsim native: deadlock: {len(state)} queue(s) or wave(s) waiting and nothing changed for "
                        f"{self.deadlock_timeout:g} s:\n" + "\n".join(f"  {x.strip()}" for x in state) +
                        f"\nthe machine:\n{self.system.describe()}")
                for out in {sys.stderr, self.log} - {None}:
                    print(text, file=out, flush=True)
                os._exit(DEADLOCK_EXIT)

    def _at_python_exit(self) -> None:
        """A Python program is exiting: shut ROCr down while the interpreter still runs its callbacks (ROCr counts
        hsa_init calls; HIP's own later hsa_shut_down then finds it down), then detach the interposer."""
        try:
            rocr = ctypes.CDLL("libhsa-runtime64.so.1", mode=os.RTLD_NOLOAD)
        except OSError:
            rocr = None
        for _ in range(64):  # HSA_STATUS_SUCCESS while references remain
            if rocr is None or rocr.hsa_shut_down() != 0:
                break
        self.lib.hcq_detach()

    def _watch_faults(self) -> None:
        while not self._closed.wait(0.2):
            with self.system.lock:
                new = [(i, str(f)) for i, g in enumerate(self.system.gpus) for f in g.faults[self._faults_seen[i]:]]
                self._faults_seen = [len(g.faults) for g in self.system.gpus]
            for i, text in new:
                print(f"hcqsim native: GPU {i} fault: {text}", file=self.log, flush=True)

    # -- bookkeeping ---------------------------------------------------------------------------------

    def _failed(self, what: str, e: OSError) -> int:
        err = e.errno or errno.EIO
        line = f"{what} -> {errno.errorcode.get(err, err)}: {e.strerror or e}"
        with self._lock:
            self.failures.append(line)
        if self.log is not None:
            print(f"hcqsim native: {line}", file=self.log, flush=True)
        return -err

    def _crashed(self, what: str) -> int:
        text = traceback.format_exc()
        with self._lock:
            self.failures.append(f"{what} -> EIO: hcqsim error: {text.strip().splitlines()[-1]}")
        print(f"hcqsim native: {what} raised inside hcqsim (answered EIO):\n{text}", file=sys.stderr, flush=True)
        return -errno.EIO

    def _call(self, what: str, kind: str, fn):
        self.calls[kind] += 1
        if self.trace:
            print(f"hcqsim native: {what}", file=self.log or sys.stderr, flush=True)
        try:
            return fn()
        except OSError as e:
            return self._failed(what, e)
        except Exception:  # noqa: BLE001 - never unwind through the native caller's frames
            return self._crashed(what)

    # -- the callbacks -------------------------------------------------------------------------------

    def _open(self, path: bytes) -> int:
        p = path.decode(errors="replace")
        return self._call(f"open {p}", "open", lambda: self.system.os.open(p))

    def _close(self, fd: int) -> int:
        def close() -> int:
            self.system.os.close(fd)
            return 0
        return self._call(f"close {fd}", "close", close)

    def _ioctl(self, fd: int, request: int, arg: int | None) -> int:
        def ioctl() -> int:
            self.system.os.ioctl(fd, request, arg or 0)
            return 0
        return self._call(f"{request_name(request)} (fd {fd})", "ioctl", ioctl)

    def _mmap(self, addr: int, length: int, prot: int, flags: int, fd: int, offset: int) -> int:
        offset &= (1 << 64) - 1  # KFD offsets use the top bits (type << 62)
        what = f"mmap 0x{addr:x}+{length:#x} prot {prot} flags {flags:#x} fd {fd} offset 0x{offset:x}"
        return self._call(what, "mmap", lambda: self.system.os.mmap(addr, length, prot, flags, fd, offset))

    def _munmap(self, addr: int, length: int) -> int:
        def munmap() -> int:
            self.system.os.munmap(addr, length)
            return 0
        return self._call(f"munmap 0x{addr:x}+{length:#x}", "munmap", munmap)

    def _refresh(self, path: bytes) -> None:
        """A sysfs path is about to be opened: a file whose value changes is rewritten as it is now."""
        try:
            value = self._live.get(self.system.sysfs.path(path.decode(errors="replace")))
            if value is not None:
                with self.system.lock:
                    text = value()
                sysfs.write(self.sysfs_root, self.system.sysfs.path(path.decode()), text)
        except Exception:  # noqa: BLE001 - never unwind through the native caller's frames
            self._crashed(f"refresh {path!r}")

    def close(self) -> None:
        """Unregister (later calls pass through to the real kernel) and remove the sysfs copy."""
        import shutil
        self._closed.set()
        self.lib.hcq_unregister()
        shutil.rmtree(self.sysfs_root, ignore_errors=True)


_active: NativeHost | None = None


def active() -> NativeHost | None:
    """The host this process's device calls go to, if one was started."""
    return _active


def activate(host: NativeHost) -> NativeHost:
    global _active
    _active = host
    return host


def log_from_env() -> TextIO | None:
    path = os.environ.get("HCQSIM_NATIVE_LOG")
    return open(path, "a", buffering=1) if path else None  # noqa: SIM115 - lives as long as the process


def system_from_env(target: str | None = None, gpus: int | None = None) -> "EmulatedSystem":
    """The machine `hcqsim run` described in HCQSIM_NATIVE_TARGET / _GPUS / _KERNEL_VERSION / _SVM (free-running:
    native code never calls into the emulator to make progress)."""
    from ..kfd import EmulatedSystem

    env = os.environ
    kernel = tuple(int(x) for x in env.get("HCQSIM_NATIVE_KERNEL_VERSION", "6.12").split("."))
    return EmulatedSystem(num_gpus=gpus or int(env.get("HCQSIM_NATIVE_GPUS", "1")),
                          target=target or env.get("HCQSIM_NATIVE_TARGET", "gfx1100"), free_running=True,
                          kernel_version=kernel, svm=env.get("HCQSIM_NATIVE_SVM", "1") != "0")


def start_embedded() -> NativeHost:
    """Inside a native executable: build the system the launcher described and register it."""
    env = os.environ
    return activate(NativeHost(system_from_env(), env.get("HCQSIM_NATIVE_LIB"), log=log_from_env(),
                               trace=env.get("HCQSIM_NATIVE_TRACE") == "1",
                               deadlock_timeout=float(env.get("HCQSIM_NATIVE_DEADLOCK_TIMEOUT", "0"))))
