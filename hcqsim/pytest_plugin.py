"""pytest plugin: run the same tests on the emulator (`--device=sim`, default) or on a real GPU
(`--device=AMD`, `--device=AMD:1`).

Fixtures: `device` (one device) and `devices` (two; on sim the plugin builds a system with two GPUs).
Markers: `sim_only`, `hw_only`, `slow`. Each test on sim gets a fresh emulated system, so tests are
independent and deterministic (and safe under pytest-xdist). `--sim-sanitize` / `--no-sim-sanitize` turn the
runtime's sanitizer on or off (default off; a conftest may set `config.option.sim_sanitize` when neither was
given, as hcqsim's own hwtests do). `--sim-free-running` runs the emulated GPUs on a background thread
(`EmulatedSystem(free_running=True)`), for clients that store doorbells and spin on memory themselves. Bad
option values are usage errors before any test runs; the header says what the run uses.

When a test fails on sim -- an assertion, an exception, or a timeout from pytest-timeout (`--timeout=S`;
a stuck free-running client sleeps in WAIT_EVENTS or spins, and the timeout turns that into a failure) --
the report gets a section "hcqsim machine state": every emulated system still open, each queue's state,
what each blocked queue waits for (packet, address, awaited and current value) and recent faults.
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
    group.addoption("--sim-sanitize", action="store_true", dest="sim_sanitize", default=None,
                    help="runtime sanitizer on --device=sim: freed memory and signals unmapped, their VA held back, "
                         "so stale GPU accesses are VM faults naming what was freed where")
    group.addoption("--no-sim-sanitize", action="store_false", dest="sim_sanitize",
                    help="turn the sanitizer off (where a conftest turns it on by default)")
    group.addoption("--sim-free-running", action="store_true", default=False,
                    help="run the emulated GPUs on a background thread that notices doorbell stores by itself "
                         "(not deterministic across host/GPU interleavings; see README)")
    group.addoption("--aql", action="store_true", default=False,
                    help="the runtime's compute queues are COMPUTE_AQL queues (kernels as AQL dispatch packets, "
                         "other commands as PM4 in vendor packets) instead of PM4 queues")


def pytest_configure(config):
    config.addinivalue_line("markers", "sim_only: runs only on the emulator (--device=sim)")
    config.addinivalue_line("markers", "hw_only: runs only on a real GPU (--device=AMD)")
    config.addinivalue_line("markers", "slow: long fuzzing or very large sizes")
    config.addinivalue_line("markers", "no_sanitize: the device fixtures of this test never use the sanitizer "
                                       "(it checks behaviour the sanitizer changes on purpose, e.g. buffer reuse)")
    spec = config.getoption("--device")
    try:
        kind, _ = parse_spec(spec)
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None
    if kind == "AMD" and not RealOS().exists(KFD_PATH):
        raise pytest.UsageError(f"--device={spec}: {KFD_PATH} not found; this machine has no AMD GPU driven by KFD "
                                f"(use --device=sim)")
    if kind == "sim":
        _check_sim_options(config)


def _check_sim_options(config) -> None:
    """Open (and close) one emulated device with the options, so a bad value is one usage line now instead
    of a setup error with a traceback in every test."""
    opts = _sim_options(config)
    for name in opts:  # one option at a time, so the message names the one that is wrong
        try:
            open_device("sim", **{name: opts[name]}).close()
        except (ValueError, TypeError) as e:
            raise pytest.UsageError(f"--sim-{name}={opts[name]}: {e}") from None


def _sanitize(config) -> bool:
    return bool(config.getoption("sim_sanitize"))


def pytest_report_header(config) -> str:
    spec = config.getoption("--device")
    if parse_spec(spec)[0] != "sim":
        return f"hcqsim: device {spec}"
    return (f"hcqsim: device {spec}, target {config.getoption('--sim-target')}, policy "
            f"{config.getoption('--sim-policy')}, sanitizer {'on' if _sanitize(config) else 'off'}"
            f"{', free-running' if config.getoption('--sim-free-running') else ''}"
            f"{', AQL compute queues' if config.getoption('--aql') else ''}")


def pytest_collection_modifyitems(config, items):
    kind, _ = parse_spec(config.getoption("--device"))
    for item in items:
        if kind == "AMD" and item.get_closest_marker("sim_only"):
            item.add_marker(pytest.mark.skip(reason="sim_only test on real hardware"))
        if kind == "sim" and item.get_closest_marker("hw_only"):
            item.add_marker(pytest.mark.skip(reason="hw_only test on the emulator"))


def _sim_options(config) -> dict:
    opts = dict(target=config.getoption("--sim-target"), policy=config.getoption("--sim-policy"))
    if config.getoption("--sim-free-running"):
        opts["free_running"] = True
    return opts


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    from .kfd.system import live_systems  # the emulator, only once a test failed
    systems = live_systems()
    if systems:
        report.sections.append(("hcqsim machine state", "\n".join(s.describe() for s in systems)))


def _device_options(request) -> dict:
    sanitize = _sanitize(request.config) and request.node.get_closest_marker("no_sanitize") is None
    return dict(_sim_options(request.config), sanitize=sanitize)


@pytest.fixture
def device_spec(request) -> str:
    return request.config.getoption("--device")


@pytest.fixture
def device(request, device_spec):
    kind, _ = parse_spec(device_spec)
    dev = open_device(device_spec, **(_device_options(request) if kind == "sim" else {}),
                      aql=request.config.getoption("--aql"))
    yield dev
    if kind == "sim":
        dev.close()


@pytest.fixture
def devices(request, device_spec):
    kind, first = parse_spec(device_spec)
    try:
        devs = open_devices(device_spec, 2, **(_device_options(request) if kind == "sim" else {}),
                            aql=request.config.getoption("--aql"))
    except NoDeviceError as e:
        pytest.skip(str(e))
    yield devs
    if kind == "sim":
        for d in devs:
            d.close()
