"""hcqsim installed from its wheel runs the main job (issue 15 item 3): the wheel ships every package, the
conformance suite as `hcqsim.conformance` with its golden records, the LICENSE and both entry points; installed
into a fresh virtual environment (outside the checkout, no PYTHONPATH) `hcqsim conformance --device sim` finds
the installed suite and passes. The wheel is built with `pip wheel --no-deps` from a copy of the repository's
files in a temporary directory (nothing is written into the checkout)."""
from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "hcqsim", "conformance")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    src.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(work / "dist"), str(src)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    (built,) = (work / "dist").glob("hcqsim-*.whl")
    return built


def _tree_files(top: str) -> set[str]:
    """The files of the repository under `top` (git's list where there is one, else every .py/.json/.c file)."""
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--", top], capture_output=True, text=True)
    if out.returncode == 0 and out.stdout.strip():
        return {str(Path(f).relative_to(top)) for f in out.stdout.split()}
    return {str(p.relative_to(ROOT / top)) for p in (ROOT / top).rglob("*")
            if p.suffix in (".py", ".json", ".c") and "__pycache__" not in p.parts}


def test_the_wheel_ships_every_file_of_the_package_and_the_conformance_suite(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"hcqsim/{f}" for f in _tree_files("hcqsim")} | {f"hcqsim/conformance/{f}"
                                                               for f in _tree_files("conformance")}
    assert expected - names == set(), "left out of the wheel (pyproject.toml [tool.setuptools] packages, package-data)"
    assert {"hcqsim/conformance/scenarios.py", "hcqsim/conformance/golden/sim-gfx1100.json",
            "hcqsim/conformance/golden/sim-gfx942.json"} <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE") for n in names)


def test_the_wheel_declares_the_command_and_the_pytest_plugin(wheel):
    with zipfile.ZipFile(wheel) as z:
        (entry_points,) = [n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt")]
        ini = configparser.ConfigParser()
        ini.read_string(z.read(entry_points).decode())
    assert ini["console_scripts"]["hcqsim"].strip() == "hcqsim.cli:main"
    assert ini["pytest11"]["hcqsim"].strip() == "hcqsim.pytest_plugin"


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh venv with only the wheel installed; its dependencies (numpy, llvmlite, ...) come from this
    interpreter's site-packages through a path entry, which adds their directory without running its .pth
    files, so the checkout's editable install is not visible there."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    out = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                          str(wheel)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "hcqsim_test_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv


def _run_installed(venv: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HCQSIM_LOG")}
    env["PYTHONNOUSERSITE"] = "1"
    return subprocess.run([str(venv / "bin" / "hcqsim"), *argv], capture_output=True, text=True, cwd=cwd, env=env)


def test_an_installed_wheel_finds_its_own_suite_and_runs_a_scenario(installed, tmp_path):
    out = _run_installed(installed, "-v", "conformance", "--device", "sim", "kernel_iota", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"conformance suite: {installed}" in out.stderr and "site-packages/hcqsim/conformance" in out.stderr
    assert "1/1 scenarios pass on sim (gfx1100)" in out.stdout


@pytest.mark.slow
def test_an_installed_wheel_runs_the_main_job(installed, tmp_path):
    out = _run_installed(installed, "conformance", "--device", "sim", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    from hcqsim.cli import load_suite
    NAMES = load_suite().scenarios.NAMES
    assert f"{len(NAMES)}/{len(NAMES)} scenarios pass on sim (gfx1100)" in out.stdout


def test_an_installed_wheel_runs_a_native_program_called_by_path(installed, tmp_path):
    """`venv/bin/hcqsim run -- rocminfo` from a wheel install, no activation (issue 34; the editable and pipx-style
    cases are tests/test_native_run_by_path.py)."""
    from hcqsim.native import build, stacks
    try:
        stacks.fetch("debian13")
        build.interposer_path()
    except (stacks.StackUnavailable, build.BuildError) as e:
        pytest.fail(f"native ROCm stack unavailable: {e}", pytrace=False)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "HCQSIM_LOG")}
    env.update(PYTHONNOUSERSITE="1", PATH="/usr/bin:/bin")
    out = subprocess.run([str(installed / "bin" / "hcqsim"), "run", "--", "rocminfo"], capture_output=True,
                         text=True, cwd=tmp_path, env=env, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "amdgcn-amd-amdhsa--gfx1100" in out.stdout
