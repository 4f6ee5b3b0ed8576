"""The in-process host: a Python program that is itself on the emulator loads ROCr / HIP with ctypes and calls
them, with the EmulatedSystem in its own address space (GPU VA == host VA: a test can read a hipMalloc'd buffer
through the emulator, or inspect the queues ROCr created).

The interposer must be preloaded into this process before libc's symbols are bound (glibc cannot interpose a
library dlopened later), so such a program runs under `hcqsim run`: it reuses the program's interpreter.

    hcqsim run --stack debian13-hip -- python my_test.py      # my_test.py: hip, host = hcqsim.native.load(...)
    hcqsim run --stack debian13-hip -- python -m pytest -p hcqsim.native.pytest_plugin tests/...   # hsa / hip fixtures
"""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

from . import host as host_module

if TYPE_CHECKING:
    from ..kfd import EmulatedSystem


class NotInterposed(RuntimeError):
    """This process was not started with the interposer (one line: how to start it)."""


def interposer_loaded() -> bool:
    """Whether hcqsim's interposer is in this process's global symbol scope."""
    return hasattr(ctypes.CDLL(None), "hcq_register")


def current_host() -> "host_module.NativeHost | None":
    return host_module.active()


def start(system: "EmulatedSystem | None" = None, target: str | None = None,
          gpus: int | None = None) -> "host_module.NativeHost":
    """The host of this process's device calls, started on `system` if none runs yet (default: a free-running
    system of `gpus` x `target`, by default what `hcqsim run` was given). Once one runs, another system is an
    error (one process, one driver)."""
    if not interposer_loaded():
        raise NotInterposed("the hcqsim interposer is not loaded in this process: start it as "
                            "`hcqsim run [--stack debian13-hip] -- python ...`")
    active = host_module.active()
    if active is None:
        if system is None:
            system = host_module.system_from_env(target, gpus)
        active = host_module.activate(host_module.NativeHost(system, log=host_module.log_from_env()))
    elif system is not None and system is not active.system:
        raise ValueError("this process's device calls already go to another EmulatedSystem")
    return active


def load(library: str, system: "EmulatedSystem | None" = None, target: str | None = None,
         gpus: int | None = None) -> tuple[ctypes.CDLL, "host_module.NativeHost"]:
    """(the native library loaded with ctypes, the host): `start(...)`, then `ctypes.CDLL(library)`."""
    host = start(system, target, gpus)
    return ctypes.CDLL(library), host
