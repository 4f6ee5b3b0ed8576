"""Shared fixtures: fresh emulated GPUs, closed (memory unmapped, VA window released) after each test."""
import pytest

from hcqsim import EmulatedGPU


@pytest.fixture
def gpu():
    """An RDNA3 (gfx1100, PM4 family gfx11) GPU with the default run-to-block scheduler."""
    g = EmulatedGPU(target="gfx1100", seed=0)
    yield g
    g.close()


@pytest.fixture
def gfx942():
    """A CDNA3 (gfx942, PM4 family gfx9) GPU."""
    g = EmulatedGPU(target="gfx942", seed=0)
    yield g
    g.close()


def pytest_sessionfinish(session):
    """Record which shader instructions this test process compiled (`hcqsim.shader.coverage`); one file per
    pytest worker, read by `python3 -m hcqsim.shader.coverage` and bench/shader.py."""
    import os
    import sys
    coverage = sys.modules.get("hcqsim.shader.coverage")
    if coverage is None or not coverage.EXERCISED:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    suite = os.path.basename(os.path.dirname(os.path.abspath(__file__)))
    coverage.record(session.config.rootpath / coverage.RECORD_DIR / f"{suite}-{worker}.json")
