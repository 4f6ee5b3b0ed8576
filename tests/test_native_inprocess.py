"""The in-process host: a pytest run inside `hcqsim run` whose tests call ROCr and HIP through ctypes with the
`hsa` / `hip` / `native_host` fixtures (hcqsim.native.pytest_plugin), the EmulatedSystem in the same process
(tests/native/inprocess_checks.py holds those tests)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hcqsim.native import build, stacks
from hcqsim.native.inprocess import NotInterposed, start

CHECKS = Path(__file__).with_name("native") / "inprocess_checks.py"


@pytest.mark.parametrize("target", ["gfx942", "gfx1100"])
def test_python_tests_call_hsa_and_hip_in_process(target):
    try:
        stacks.fetch("debian13-hip")
        build.interposer_path()
    except (stacks.StackUnavailable, build.BuildError) as e:
        pytest.fail(f"native HIP stack unavailable: {e}", pytrace=False)
    cmd = [sys.executable, "-m", "hcqsim", "run", "--stack", "debian13-hip", "--target", target, "--",
           sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "hcqsim.native.pytest_plugin",
           "-p", "no:xdist", str(CHECKS)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=CHECKS.parent.parent.parent)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "5 passed" in done.stdout


def test_the_in_process_host_needs_the_interposer():
    with pytest.raises(NotInterposed, match="hcqsim run"):
        start()  # this test process was not started under `hcqsim run`
