"""pytest plugin: run the same tests on the emulator (`--device=sim`, default) or on a real GPU
(`--device=AMD`, `--device=AMD:1`).

Fixtures: `device` (one device) and `devices` (two; on sim the plugin builds a system with two GPUs).
Markers: `sim_only`, `hw_only`, `slow`. Each test on sim gets a fresh emulated system, so tests are
independent and deterministic (and safe under pytest-xdist).
"""
from __future__ import annotations

import pytest

from .boundary import KFD_PATH
from .runtime import NoDeviceError, RealOS, open_device, open_devices, parse_spec


def pytest_addoption(parser):
    group = parser.getgroup("hcqsim")
    group.addoption("--device", default="sim", help="where runtime tests run: sim (default), sim:N, AMD or AMD:N")
    group.addoption("--sim-target", default="gfx1100", help="emulated GPU target on --device=sim (gfx1100, gfx942)")
    group.addoption("--sim-policy", default="run_to_block",
                    help="emulator scheduler policy: run_to_block, round_robin or random")


def pytest_configure(config):
    config.addinivalue_line("markers", "sim_only: runs only on the emulator (--device=sim)")
    config.addinivalue_line("markers", "hw_only: runs only on a real GPU (--device=AMD)")
    config.addinivalue_line("markers", "slow: long fuzzing or very large sizes")
    spec = config.getoption("--device")
    try:
        kind, _ = parse_spec(spec)
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None
    if kind == "AMD" and not RealOS().exists(KFD_PATH):
        raise pytest.UsageError(f"--device={spec}: {KFD_PATH} not found; this machine has no AMD GPU driven by KFD "
                                f"(use --device=sim)")


def pytest_collection_modifyitems(config, items):
    kind, _ = parse_spec(config.getoption("--device"))
    for item in items:
        if kind == "AMD" and item.get_closest_marker("sim_only"):
            item.add_marker(pytest.mark.skip(reason="sim_only test on real hardware"))
        if kind == "sim" and item.get_closest_marker("hw_only"):
            item.add_marker(pytest.mark.skip(reason="hw_only test on the emulator"))


def _sim_options(config) -> dict:
    return dict(target=config.getoption("--sim-target"), policy=config.getoption("--sim-policy"))


@pytest.fixture
def device_spec(request) -> str:
    return request.config.getoption("--device")


@pytest.fixture
def device(request, device_spec):
    kind, _ = parse_spec(device_spec)
    dev = open_device(device_spec, **(_sim_options(request.config) if kind == "sim" else {}))
    yield dev
    if kind == "sim":
        dev.close()


@pytest.fixture
def devices(request, device_spec):
    kind, first = parse_spec(device_spec)
    try:
        devs = open_devices(device_spec, 2, **(_sim_options(request.config) if kind == "sim" else {}))
    except NoDeviceError as e:
        pytest.skip(str(e))
    yield devs
    if kind == "sim":
        for d in devs:
            d.close()
