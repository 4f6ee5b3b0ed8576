"""tinygrad's unmodified AMD runtime on hcqsim (issue 22: the 6-GPU long-run wedge), behind `-m slow`.

tinygrad is no dependency of hcqsim: `tests.tinygrad_hcqsim.fetch()` downloads the pinned 0.14.0 wheel and
source release (sha256 checked) into hcqsim's cache once; a registry that cannot be reached fails these tests
with a one-line reason, never a skip. Each test runs tinygrad in a fresh interpreter on an EmulatedSystem of
6 free-running gfx1100 GPUs through tests/tinygrad_hcqsim.py (tinygrad's device-file interface pointed at the
emulated KFD; its LLVM IR compiled by llvmlite): tinygrad's own test file that its source release ships, and
tests/native/tinygrad_soak.py (kernels, reductions, TinyJit graphs, peer copies, subbuffers and sharded
all-reduces on every GPU, every result checked against numpy). Both end with the machine's health: the GPU
thread alive, no fault, every queue idle.
"""
import os
import subprocess
import sys

import pytest

from tests import tinygrad_hcqsim

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tinygrad():
    try:
        return tinygrad_hcqsim.fetch()
    except tinygrad_hcqsim.TinygradUnavailable as e:
        pytest.fail(f"tinygrad unavailable: {e}", pytrace=False)


def run(site: str, argv: list[str], timeout: float) -> tuple[subprocess.CompletedProcess, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, site]), DEV="AMD", HCQSIM_TINYGRAD_GPUS="6")
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=ROOT)
    return proc, proc.stdout + proc.stderr


def assert_healthy(out: str) -> None:
    health = out[out.index("hcqsim health:"):]
    assert health.startswith("hcqsim health: GPU thread alive, 0 fault(s)"), health
    states = [line for line in health.splitlines() if ": pm4 queue" in line or ": sdma queue" in line]
    assert states and all(": idle," in line for line in states), health


def test_tinygrads_own_test_file_passes_on_six_emulated_gpus(tinygrad):
    site, tests = tinygrad
    proc, out = run(site, ["-m", "pytest", "-p", "tests.tinygrad_hcqsim", "-p", "no:cacheprovider", "-q",
                           "-o", "addopts=", os.path.join(tests, "test/test_tiny.py")], timeout=1800)
    assert proc.returncode == 0, out[-4000:]
    assert " passed" in out and " failed" not in out, out[-2000:]
    assert_healthy(out)


def test_a_tinygrad_soak_over_six_free_running_gpus_gets_every_result_right(tinygrad):
    site, _ = tinygrad
    rounds = int(os.environ.get("HCQSIM_TINYGRAD_SOAK_ROUNDS", "10"))
    proc, out = run(site, [os.path.join(ROOT, "tests", "native", "tinygrad_soak.py"), str(rounds), "6"],
                    timeout=3600)
    assert proc.returncode == 0, out[-4000:]
    line = next(x for x in out.splitlines() if x.startswith("soak: rounds"))
    assert f"rounds {rounds}, gpus 6," in line and ", wrong 0," in line, line
    assert_healthy(out)
