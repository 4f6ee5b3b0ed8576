"""Running an unmodified native executable on an emulated machine (the embedded host).

The program runs through its stack's dynamic loader with the interposer preloaded (`--preload`, so only this
process is affected, not its children). The interposer starts CPython inside the program at the first call
that needs the emulator (NATIVE_ROCM_FACTS section 4, "embedded": dlopen libpython, Py_InitializeEx, import
hcqsim.native.host, release the GIL); the variables below tell it which interpreter and which machine.
"""
from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

from .build import interposer_path
from .stacks import Unpacked, fetch


class LaunchError(RuntimeError):
    """The program or the interpreter to embed cannot be found (one line: why)."""


def libpython() -> str:
    """The shared libpython of this interpreter (the embedded host must be the same Python)."""
    libdir, name = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
    path = Path(libdir or "", name or "")
    if not sysconfig.get_config_var("Py_ENABLE_SHARED") or not path.is_file():
        raise LaunchError(f"this Python ({sys.executable}) has no shared libpython to embed "
                          f"(looked for {path}); use a Python built with --enable-shared")
    return str(path)


def find_program(name: str, stack: Unpacked) -> str:
    """A program of the stack (by bare name), else a path, else one on PATH."""
    if "/" not in name:
        found = stack.program(name) or shutil.which(name)
        if found is None:
            raise LaunchError(f"no program {name!r} in stack {stack.stack.name} or on PATH")
        return str(found)
    if not os.path.isfile(name):
        raise LaunchError(f"no program {name}")
    return name


def site_dirs() -> list[str]:
    """This interpreter's site directories (a virtual environment's own, then the user's when enabled): the
    embedded host reads their .pth files, which is all an editable install puts there."""
    import site
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    if site.ENABLE_USER_SITE and site.USER_SITE:
        dirs.append(site.USER_SITE)
    return [d for d in dirs if os.path.isdir(d)]


def environment(target: str, gpus: int, stack: Unpacked, log: str | None = None, trace: bool = False,
                deadlock_timeout: float = 0) -> dict:
    """The variables the embedded host reads (added to the current environment)."""
    env = dict(os.environ)
    env.update(HCQSIM_NATIVE_EMBED="1", HCQSIM_NATIVE_LIB=str(interposer_path()), HCQSIM_NATIVE_LIBPYTHON=libpython(),
               HCQSIM_NATIVE_PYTHONHOME=sys.base_prefix, HCQSIM_NATIVE_SYSPATH=os.pathsep.join(sys.path),
               HCQSIM_NATIVE_SITEDIRS=os.pathsep.join(site_dirs()),
               HCQSIM_NATIVE_TARGET=target, HCQSIM_NATIVE_GPUS=str(gpus),
               HCQSIM_NATIVE_DEADLOCK_TIMEOUT=str(deadlock_timeout),
               HCQSIM_NATIVE_REDIRECTS="".join(f"{a}={b}\n" for a, b in stack.redirects()))
    if log:
        env["HCQSIM_NATIVE_LOG"] = log
    if trace:
        env["HCQSIM_NATIVE_TRACE"] = "1"
    return env


def command(argv: list[str], stack: Unpacked) -> list[str]:
    """The exec vector: the stack's loader, its libraries, the interposer preloaded, then the program."""
    program = find_program(argv[0], stack)
    return [str(stack.loader), "--library-path", stack.library_path, "--preload", str(interposer_path()),
            "--argv0", argv[0], program, *argv[1:]]


def prepare(argv: list[str], target: str = "gfx1100", gpus: int = 1, stack: str = "debian13",
            log: str | None = None, trace: bool = False, deadlock_timeout: float = 0) -> tuple[list[str], dict]:
    """(exec vector, environment) for running `argv` on an emulated machine of `gpus` x `target`."""
    if not argv:
        raise LaunchError("no program given (hcqsim run [options] -- PROGRAM [ARGS...])")
    unpacked = fetch(stack)
    return command(argv, unpacked), environment(target, gpus, unpacked, log, trace, deadlock_timeout)
