"""The import rule, checked at import time: the runtime never loads the emulator, the emulator never loads
the runtime, and the hardware's language loads neither (docs/architecture.md).

Each case runs in a fresh interpreter, because this test process has long since imported everything.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

LANGUAGE = ["hcqsim.pm4", "hcqsim.sdma", "hcqsim.kfd_uapi", "hcqsim.drm_uapi", "hcqsim.boundary",
            "hcqsim.registers", "hcqsim.compare", "hcqsim.atomics", "hcqsim.fields", "hcqsim.errors", "hcqsim.targets",
            "hcqsim.trace_events"]
EMULATOR_PREFIXES = ("hcqsim.gpu", "hcqsim.engines", "hcqsim.kfd", "hcqsim.shader", "hcqsim.memory")
RUNTIME_PREFIXES = ("hcqsim.runtime",)


def loaded_after(code: str) -> set[str]:
    """The hcqsim modules a fresh interpreter holds after running `code`."""
    probe = (f"import sys, json\n{code}\n"
             "print(json.dumps(sorted(m for m in sys.modules if m == 'hcqsim' or m.startswith('hcqsim.'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def within(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    """Modules that are one of `prefixes` or inside one (hcqsim.kfd_uapi is not inside hcqsim.kfd)."""
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes))


@pytest.mark.parametrize("module", ["hcqsim.runtime", *LANGUAGE])
def test_the_runtime_and_the_language_load_no_emulator_module(module):
    assert within(loaded_after(f"import {module}"), EMULATOR_PREFIXES) == []


@pytest.mark.parametrize("module", LANGUAGE)
def test_the_language_loads_no_runtime_module(module):
    assert within(loaded_after(f"import {module}"), RUNTIME_PREFIXES) == []


@pytest.mark.parametrize("code", ["import hcqsim.gpu", "import hcqsim.kfd",
                                  "from hcqsim import EmulatedGPU; EmulatedGPU(seed=0).close()",
                                  "from hcqsim.kfd import EmulatedSystem; EmulatedSystem(num_gpus=2).close()"])
def test_the_emulator_loads_no_runtime_module(code):
    modules = loaded_after(code)
    assert "hcqsim.gpu" in modules  # the probe really loaded the emulator
    assert within(modules, RUNTIME_PREFIXES) == []


def test_the_package_exposes_the_emulator_lazily():
    assert within(loaded_after("import hcqsim"), EMULATOR_PREFIXES) == []
    assert "hcqsim.gpu" in loaded_after("import hcqsim; hcqsim.EmulatedGPU")


def test_open_device_is_where_the_emulator_is_chosen():
    # the check above would pass vacuously if nothing could ever load the emulator from the runtime
    modules = loaded_after("from hcqsim.runtime import open_device; open_device('sim').close()")
    assert {"hcqsim.gpu", "hcqsim.kfd"} <= modules
