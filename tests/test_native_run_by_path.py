"""`hcqsim run` called by path from a virtual environment that was never activated (CI scripts, pipx-style
installs): `venv/bin/hcqsim run -- rocminfo`.

The embedded host is CPython started inside the program from the base installation (PYTHONHOME is
sys.base_prefix), so it sees the launcher's sys.path but never read the environment's .pth files; an editable
install is only such a file (a path, or a finder on sys.meta_path), and the host failed with
`ModuleNotFoundError: No module named 'hcqsim'`. The test makes a fresh environment in tmp with an editable install
of this checkout (its dependencies come from the running environment through a plain path file, which adds that
directory without reading its .pth files, so `import hcqsim` works there only through the fresh install's own
.pth), then runs its `bin/hcqsim` by path with no VIRTUAL_ENV, no PYTHONPATH and PATH without either
environment's bin directory, and again through a symlink in another directory (what pipx installs). The wheel
case is tests/test_wheel.py.
"""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from hcqsim.native import build, stacks

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def stack():
    try:
        unpacked = stacks.fetch("debian13")
        build.interposer_path()
    except (stacks.StackUnavailable, build.BuildError) as e:
        pytest.fail(f"native ROCm stack unavailable: {e}", pytrace=False)
    return unpacked


def clean_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = "/usr/bin:/bin"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def editable_venv(tmp_path_factory) -> Path:
    """A fresh venv (no pip of its own: the running environment's, through the path file) with `pip install -e`
    of this checkout (its build backend from the index, as any editable install gets it)."""
    if not (REPO / "pyproject.toml").is_file():
        pytest.skip("not running from a source checkout (no pyproject.toml beside tests/): nothing to install -e")
    venv = tmp_path_factory.mktemp("by-path") / "venv"
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True,
                       text=True, timeout=120)
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"cannot create a virtual environment here: {e}")
    purelib = Path(subprocess.run([str(venv / "bin/python"), "-c", "import sysconfig; print(sysconfig.get_path("
                                   "'purelib'))"], check=True, capture_output=True, text=True).stdout.strip())
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (purelib / "running-environment.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    probe = subprocess.run([str(venv / "bin/python"), "-c", "import hcqsim"], capture_output=True, text=True,
                           env=clean_env(), cwd="/")
    assert probe.returncode != 0, "the fresh environment imports hcqsim before any install: the test proves nothing"
    done = subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q", "--no-deps", "-e",
                           str(REPO)], capture_output=True, text=True, env=clean_env(),
                          cwd="/", timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return venv


@pytest.mark.parametrize("how", ["by path", "through a symlink elsewhere (pipx-style)"])
def test_hcqsim_run_by_path_from_an_editable_venv(stack, editable_venv, tmp_path, how):
    log = tmp_path / "calls.log"
    command = editable_venv / "bin/hcqsim"
    if how != "by path":  # pipx puts a symlink to the venv's script in ~/.local/bin
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin/hcqsim").symlink_to(command)
        command = tmp_path / "bin/hcqsim"
    done = subprocess.run([str(command), "run", "--log", str(log), "--", "rocminfo"],
                          capture_output=True, text=True, env=clean_env(), cwd=str(tmp_path), timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "No module named" not in done.stderr
    assert "amdgcn-amd-amdhsa--gfx1100" in done.stdout
    assert not (log.read_text().splitlines() if log.exists() else [])
