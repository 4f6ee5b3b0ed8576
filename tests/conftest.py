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
