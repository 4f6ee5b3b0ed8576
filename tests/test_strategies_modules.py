"""hcqsim.strategies is the public face of the schedule fuzzer; its parts live in hcqsim.fuzz, one concept per module
(issue 34 item 7). Every name a part defines at module level is still reachable as hcqsim.strategies.<name>, as the
same object (tests, docs and users import from hcqsim.strategies, private helpers included), and each part loads
without the emulator or the runtime, as the whole did."""
from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import hcqsim.fuzz
import hcqsim.strategies as strategies

PARTS = sorted(m.name for m in pkgutil.iter_modules(hcqsim.fuzz.__path__))


def defined_names(module: str) -> list[str]:
    path = Path(hcqsim.fuzz.__path__[0]) / f"{module}.py"
    names = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return names


def test_the_parts_are_the_ones_the_package_docstring_lists():
    assert PARTS == ["cases", "draws", "fuzzer", "interleaver", "interleavings", "profiles", "report", "schedules",
                     "seeds"]
    for part in PARTS:
        assert f"`{part}`" in hcqsim.fuzz.__doc__


@pytest.mark.parametrize("part", PARTS)
def test_every_name_of_a_part_is_reexported_by_strategies(part):
    module = __import__(f"hcqsim.fuzz.{part}", fromlist=["_"])
    names = defined_names(part)
    assert names
    for name in names:
        assert getattr(strategies, name) is getattr(module, name), name


@pytest.mark.parametrize("part", PARTS)
def test_a_part_loads_neither_the_emulator_nor_the_runtime(part):
    probe = (f"import sys, json\nimport hcqsim.fuzz.{part}\n"
             "print(json.dumps(sorted(m for m in sys.modules if m.startswith('hcqsim.'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    loaded = json.loads(out.splitlines()[-1])
    assert not [m for m in loaded if m.split(".")[1] in ("gpu", "engines", "kfd", "shader", "coherence", "memory",
                                                           "runtime")]
