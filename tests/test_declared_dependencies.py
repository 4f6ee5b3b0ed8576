"""Every import in the repository is the standard library, the repository's own code, or a declared dependency.

CI once passed only because its machine had a package (mpmath) installed by hand. This test reads
pyproject.toml and every .py file of the repository (with `ast`, nothing is imported) and checks:
- the installed package (`hcqsim/`) imports, at module level, only the standard library and the core
  `dependencies`; an optional extra (`plot`) may be imported only inside a function, so importing hcqsim never
  needs it;
- tests, hwtests, conformance and bench import only what the core dependencies and the `test` extra declare.
"""
from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# import name -> distribution name, where the two differ (the rest are spelled alike)
DISTRIBUTION_OF = {"elftools": "pyelftools", "xdist": "pytest-xdist", "_pytest": "pytest", "yaml": "pyyaml"}

# harness modules inside the package and the test tool each is for: pytest loads its own plugin, and
# hcqsim.strategies is a library of hypothesis strategies (docs/fuzzing.md: imported only by tests and harness code),
# hcqsim.interleaved its @interleaved decorator for tests (imported only by the tests that use it)
HARNESS_MODULES = {"pytest_plugin.py": {"pytest"}, "strategies.py": {"hypothesis", "pytest"},
                   "interleaved.py": {"hypothesis"}}
# harness packages inside the package, likewise: hcqsim/fuzz/ holds the parts hcqsim.strategies re-exports
HARNESS_PACKAGES = {"hcqsim/fuzz": {"hypothesis", "pytest"}}

# top-level names that are the repository's own code (packages, and test helper modules on sys.path)
OWN_TOP_LEVEL = {"hcqsim", "tests", "hwtests", "conformance", "bench"}


def _requirement_name(req: str) -> str:
    return re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].strip().lower()


def declared() -> dict[str, set[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = {"core": {_requirement_name(r) for r in project["dependencies"]}}
    for extra, reqs in project.get("optional-dependencies", {}).items():
        groups[extra] = {_requirement_name(r) for r in reqs}
    return groups


def python_files(*tops: str) -> list[Path]:
    return sorted(p for top in tops for p in (ROOT / top).rglob("*.py") if "__pycache__" not in p.parts)


def repository_modules() -> set[str]:
    """Modules and packages of the test and harness folders: they import each other by bare name via sys.path."""
    names: set[str] = set()
    for top in ("tests", "hwtests", "conformance", "bench"):
        for p in (ROOT / top).iterdir():
            if p.suffix == ".py":
                names.add(p.stem)
            elif p.is_dir() and (p / "__init__.py").exists():
                names.add(p.name)
    return names


def imports(path: Path) -> list[tuple[str, int, bool]]:
    """(top-level module name, line, at module level?) for every absolute import in the file."""
    tree = ast.parse(path.read_text(), str(path))
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = not top or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            guarded = isinstance(child, ast.Try)  # `try: import x except ImportError` is an optional import
            if isinstance(child, ast.Import):
                found.extend((a.name.split(".")[0], child.lineno, top) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                found.append((child.module.split(".")[0], child.lineno, top))
            visit(child, top and not nested and not guarded)

    visit(tree, True)
    return found


def third_party(path: Path) -> list[tuple[str, int, bool]]:
    own = OWN_TOP_LEVEL | repository_modules()
    return [(m, line, top) for m, line, top in imports(path)
            if m not in sys.stdlib_module_names and m not in own and m != "__future__"]


def distribution(module: str) -> str:
    return DISTRIBUTION_OF.get(module, module).lower()


def test_the_declaration_is_read():
    groups = declared()
    assert "numpy" in groups["core"] and "pytest" in groups["test"]  # the check below is not vacuous


@pytest.mark.parametrize("path", python_files("hcqsim"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_package_imports_only_declared_dependencies(path):
    groups = declared()
    optional = set().union(*(reqs for extra, reqs in groups.items() if extra not in ("core", "test")))
    wrong = []
    for module, line, top in third_party(path):
        dist = distribution(module)
        if dist in groups["core"]:
            continue
        if dist in optional and not top:
            continue  # an optional extra, imported only where that feature is used
        tools = HARNESS_MODULES.get(path.name, set()) | HARNESS_PACKAGES.get(path.parent.relative_to(ROOT).as_posix(),
                                                                            set())
        if dist in tools:
            continue  # a harness module of the package, only ever loaded where its test tool is installed
        wrong.append(f"line {line}: {module} ({dist}; {'module level' if top else 'lazy'})")
    assert wrong == [], f"{path.relative_to(ROOT)} imports undeclared or optional packages eagerly: {wrong}"


@pytest.mark.parametrize("path", python_files("tests", "hwtests", "conformance", "bench"),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_tests_and_harness_import_only_declared_dependencies(path):
    groups = declared()
    allowed = groups["core"] | groups["test"]
    optional = set().union(*(reqs for extra, reqs in groups.items() if extra not in ("core", "test")))
    wrong = [f"line {line}: {module} ({distribution(module)})" for module, line, top in third_party(path)
             if distribution(module) not in allowed and not (distribution(module) in optional and not top)]
    assert wrong == [], f"{path.relative_to(ROOT)} imports packages pyproject.toml does not declare: {wrong}"


def test_a_planted_undeclared_import_is_caught(tmp_path):
    # the check bites: a file importing a package nobody declared is reported, a lazy optional one is not
    planted = tmp_path / "planted.py"
    planted.write_text("import numpy\nimport mpmath_typo\n\ndef f():\n    import matplotlib\n")
    found = {m: top for m, _, top in third_party(planted)}
    assert found == {"numpy": True, "mpmath_typo": True, "matplotlib": False}
    groups = declared()
    assert distribution("mpmath_typo") not in groups["core"] | groups["test"]
