"""The GPU memory model (issue 17): caches and write-back as hardware has them, switchable.

`coherent` (default): one coherent copy, no model object at all (`gpu.coherence is None`), today's speed.
`report`: values stay coherent; every access that could have observed a stale line or a write not yet written
back is recorded as a `MemoryReport` in `gpu.memory_reports` / `system.memory_reports`.
`adversarial`: stale lines are really kept and dirty lines really held until written back, so a missing flush
gives a wrong value.

Layering: the package sits just left of `hcqsim.memory` (kfd -> gpu -> engines -> shader -> coherence -> memory);
it imports only `memory`, `errors` and the standard library / numpy. docs/memory_model.md lists every level and
ordering rule modelled.
"""
from __future__ import annotations

import importlib
import importlib.util
import os

from .report import MISSING_NAMES, MemoryReport, ReportLog

MODELS = ("coherent", "report", "adversarial")
ENVIRONMENT = "HCQSIM_MEMORY_MODEL"  # the default model of every machine built without memory_model=


def default_model() -> str:
    return check_model(os.environ.get(ENVIRONMENT, "").strip() or "coherent")


def check_model(name: str) -> str:
    """The model name, or ValueError naming the three."""
    if name not in MODELS:
        raise ValueError(f"unknown memory model {name!r}: expected one of {', '.join(MODELS)}")
    return name


def make_model(gpu, name: str, log: ReportLog):
    """The model object of one GPU (None for `coherent`)."""
    check_model(name)
    if name == "coherent":
        return None
    from .model import CacheModel
    model = CacheModel(gpu, name, log)
    if importlib.util.find_spec(f"{__name__}.hdp") is not None:  # the HDP write buffer attaches its hooks
        importlib.import_module(f"{__name__}.hdp").attach(model)
    return model


__all__ = ["ENVIRONMENT", "MODELS", "MISSING_NAMES", "MemoryReport", "ReportLog", "check_model", "default_model",
           "make_model"]
