"""The import rule, checked at import time: the runtime never loads the emulator, the emulator never loads
the runtime, and the hardware's language loads neither (docs/architecture.md).

Each case runs in a fresh interpreter, because this test process has long since imported everything.
"""
from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import pytest

LANGUAGE = ["hcqsim.pm4", "hcqsim.sdma", "hcqsim.aql", "hcqsim.kfd_uapi", "hcqsim.drm_uapi", "hcqsim.boundary",
            "hcqsim.registers", "hcqsim.compare", "hcqsim.atomics", "hcqsim.fields", "hcqsim.errors", "hcqsim.targets",
            "hcqsim.trace_events"]
EMULATOR_PREFIXES = ("hcqsim.gpu", "hcqsim.engines", "hcqsim.kfd", "hcqsim.shader", "hcqsim.coherence",
                     "hcqsim.memory")
RUNTIME_PREFIXES = ("hcqsim.runtime",)
# Every module of the runtime package, listed explicitly: a module only some code path imports (aql_ring,
# loaded when a device has AQL queues) is checked like the package itself.
RUNTIME_MODULES = ["hcqsim.runtime.allocation", "hcqsim.runtime.aql_ring", "hcqsim.runtime.buffer", "hcqsim.runtime.checks",
                   "hcqsim.runtime.copies", "hcqsim.runtime.device", "hcqsim.runtime.exclusive", "hcqsim.runtime.hazards",
                   "hcqsim.runtime.names",
                   "hcqsim.runtime.plan", "hcqsim.runtime.profile", "hcqsim.runtime.program", "hcqsim.runtime.queues",
                   "hcqsim.runtime.real_os", "hcqsim.runtime.replay", "hcqsim.runtime.schedule",
                   "hcqsim.runtime.signal", "hcqsim.runtime.topology"]
# What the runtime's AQL path runs without a device: the dispatch packet a ComputeQueue builds on an AQL device,
# its disassembly, and the queue-block layout the device writes. The builders import lazily, so only running
# them shows what they load.
AQL_PATH = """
from hcqsim import aql
from hcqsim.runtime.aql_ring import AqlDispatch, AqlRing
p = AqlDispatch(aql.kernel_dispatch_packet(0x1000, 0x2000, (64, 1, 1), (64, 1, 1), dims=1))
assert aql.describe(list(p)).startswith("AQL KERNEL_DISPATCH")
assert aql.pm4_ib_packet(0x3000, 8)[:2] == aql.header(aql.TYPE_VENDOR, barrier=1, acquire=2, release=2).to_bytes(2, "little")
from types import SimpleNamespace
from hcqsim.runtime.queues import ComputeQueue
text = ComputeQueue.disassemble(SimpleNamespace(packets=[p], _family="gfx11"))
assert "KERNEL_DISPATCH" in text, text
"""


def loaded_after(code: str) -> set[str]:
    """The hcqsim modules a fresh interpreter holds after running `code`."""
    probe = (f"import sys, json\n{code}\n"
             "print(json.dumps(sorted(m for m in sys.modules if m == 'hcqsim' or m.startswith('hcqsim.'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def within(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    """Modules that are one of `prefixes` or inside one (hcqsim.kfd_uapi is not inside hcqsim.kfd)."""
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes))


def test_the_runtime_module_list_is_complete():
    import hcqsim.runtime
    found = {f"hcqsim.runtime.{m.name}" for m in pkgutil.iter_modules(hcqsim.runtime.__path__)}
    assert found == set(RUNTIME_MODULES)


@pytest.mark.parametrize("module", ["hcqsim.runtime", *RUNTIME_MODULES, *LANGUAGE])
def test_the_runtime_and_the_language_load_no_emulator_module(module):
    assert within(loaded_after(f"import {module}"), EMULATOR_PREFIXES) == []


def test_the_runtime_aql_path_loads_no_emulator_module():
    modules = loaded_after(AQL_PATH)
    assert "hcqsim.runtime.aql_ring" in modules and "hcqsim.aql" in modules
    assert within(modules, EMULATOR_PREFIXES) == []


@pytest.mark.parametrize("module, below", [
    ("hcqsim.shader.core", ("hcqsim.engines", "hcqsim.gpu", "hcqsim.kfd")),  # the core sits below the engines
    ("hcqsim.coherence.model", ("hcqsim.shader", "hcqsim.engines", "hcqsim.gpu", "hcqsim.kfd")),  # left of memory
    ("hcqsim.engines.queue", ("hcqsim.gpu", "hcqsim.kfd")),  # engines sit below the GPU that schedules them
    ("hcqsim.engines.command_processor", ("hcqsim.gpu", "hcqsim.kfd")),
    ("hcqsim.engines.aql", ("hcqsim.gpu", "hcqsim.kfd")),
])
def test_each_emulator_layer_loads_only_the_layers_below_it(module, below):
    modules = loaded_after(f"import {module}")
    assert module in modules
    assert within(modules, below) == []


def imported_names(path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import statement in `path`, at module level or inside a function;
    for `from X import a, b` both X and X.a, X.b (`from .. import gpu` names hcqsim.gpu)."""
    import ast
    from pathlib import Path
    path = Path(path)
    parts = path.relative_to(Path(__file__).resolve().parent.parent).with_suffix("").parts
    package = parts[:-1]  # the package the module is in (for __init__: itself)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1]) if node.level else ""
            mod = ".".join(x for x in (base, node.module or "") if x)
            found += [(node.lineno, mod)] + [(node.lineno, f"{mod}.{a.name}") for a in node.names]
    return found


def test_no_engine_module_imports_the_gpu_anywhere():
    """The engines sit below the GPU: `hcqsim.gpu` imports them, and they get what they need of it passed in at
    construction (`engines.host.EngineHost`). An import inside a function is a cycle too, though the import-time
    check above cannot see it; this one reads the source."""
    from pathlib import Path
    engines = Path(__file__).resolve().parent.parent / "hcqsim" / "engines"
    modules = sorted(engines.glob("*.py"))
    assert len(modules) >= 6
    bad = [f"{p.name}:{line} imports {name}" for p in modules for line, name in imported_names(p)
           if name == "hcqsim.gpu" or name.startswith("hcqsim.gpu.")]
    assert bad == []
