"""hcqsim: an emulator of AMD GPU user-mode queues, and a runtime that drives real or emulated GPUs.

Importing the package loads only the shared error types: `EmulatedGPU` is imported on first use, so a
program that drives a real GPU through `hcqsim.runtime` never loads the emulator.
"""
from __future__ import annotations

import os as _os
from importlib import metadata as _metadata
from typing import TYPE_CHECKING

from .errors import DeadlockError, DeviceFault, DeviceTimeout, Fault, HcqsimError

if TYPE_CHECKING:
    from .gpu import EmulatedGPU

if _os.environ.get("HCQSIM_LOG"):  # logging levels for library users too (hcqsim/log.py)
    from . import log as _log
    try:
        _log.configure()
    except ValueError as _e:
        import warnings as _warnings
        _warnings.warn(str(_e), stacklevel=2)

try:
    __version__ = _metadata.version("hcqsim")
except _metadata.PackageNotFoundError:  # a source tree on sys.path that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__", "EmulatedGPU", "Fault", "HcqsimError", "DeadlockError", "DeviceFault", "DeviceTimeout"]


def __getattr__(name: str):
    if name == "EmulatedGPU":
        from .gpu import EmulatedGPU
        return EmulatedGPU
    raise AttributeError(f"module 'hcqsim' has no attribute {name!r}")
