"""pytest plugin: run the same tests on the emulator (`--device=sim`, default) or on a real GPU
(`--device=AMD`, `--device=AMD:1`).

Fixtures: `device` (one device) and `devices` (two; on sim the plugin builds a system with two GPUs).
Markers: `sim_only`, `hw_only`, `no_sanitize`. Each test on sim gets a fresh emulated system, so tests are
independent and deterministic (and safe under pytest-xdist).

**Coexisting with other projects.** pytest loads this plugin in every project of an environment where hcqsim
is installed, so it claims nothing a project may own. Every option has an hcqsim-prefixed name that is always
registered (`--hcqsim-device`, `--hcqsim-target`, `--hcqsim-policy`, `--hcqsim-sanitize`/`--hcqsim-no-sanitize`,
`--hcqsim-free-running`, `--hcqsim-aql`); the short names the design uses (`--device`, `--sim-target`,
`--sim-policy`, `--sim-sanitize`/`--no-sim-sanitize`, `--sim-free-running`, `--aql`) are added as aliases once
the initial conftests are loaded, each only if no conftest or plugin registered it. A project with its own
`--device` keeps it and reaches hcqsim through `--hcqsim-device`. Values live under `config.option.hcqsim_*`.
Importing the plugin loads neither the runtime nor the emulator: the runtime is imported when a fixture opens
a device or an option value other than the default has to be checked, and nothing is built for a run that
never asks for `device`/`devices`. The header line appears only when an hcqsim option is set (on the command
line or by a conftest, as hcqsim's hwtests set the sanitizer). `-p no:hcqsim` disables the plugin entirely;
with plugin autoloading off (PYTEST_DISABLE_PLUGIN_AUTOLOAD), `-p hcqsim.pytest_plugin` or a conftest's
`pytest_plugins = ["hcqsim.pytest_plugin"]` turns it on (aliases included; with autoloading on, pytest already
loaded it as `hcqsim` and refuses the second name, so list it only where autoloading is off). Options registered later by a
conftest below the initial ones (which pytest does not support for options anyway) are not seen.

`--sim-sanitize` / `--no-sim-sanitize` turn the runtime's sanitizer on or off (default off; a conftest may set
`config.option.hcqsim_sanitize` when neither was given, as hcqsim's own hwtests do). `--sim-free-running` runs
the emulated GPUs on a background thread (`EmulatedSystem(free_running=True)`), for clients that store
doorbells and spin on memory themselves. Bad option values are usage errors before any test runs.

When a test fails on sim -- an assertion, an exception, or a timeout from pytest-timeout (`--timeout=S`;
a stuck free-running client sleeps in WAIT_EVENTS or spins, and the timeout turns that into a failure) --
the report gets a section "hcqsim machine state" (every emulated system still open: a table of its queues with
their state and ring pointers, what each blocked queue waits for at which hex address, recent faults) and, for
a test that used the fixtures, a section "hcqsim sanitizer" saying whether the sanitizer was on and how to turn
it on.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import pytest

GROUP = "hcqsim"
FIXTURES = ("device", "devices", "fuzz_device", "fuzz_devices")


@dataclass(frozen=True)
class Option:
    """One plugin option: the name that is always registered, the design's short alias, argparse attributes."""

    name: str
    alias: str
    attrs: dict = field(default_factory=dict)

    @property
    def dest(self) -> str:
        return self.attrs["dest"]


OPTIONS = (
    Option("--hcqsim-device", "--device", dict(
        dest="hcqsim_device", default="sim", metavar="SPEC",
        help="where hcqsim's device fixtures run: sim (default), sim:N, AMD or AMD:N")),
    Option("--hcqsim-target", "--sim-target", dict(
        dest="hcqsim_target", default="gfx1100", metavar="TARGET", help="emulated GPU target on sim: gfx1100 (default) or gfx942")),
    Option("--hcqsim-policy", "--sim-policy", dict(
        dest="hcqsim_policy", default="run_to_block", metavar="POLICY",
        help="emulator scheduler policy: run_to_block (default), round_robin or random")),
    Option("--hcqsim-sanitize", "--sim-sanitize", dict(
        action="store_true", dest="hcqsim_sanitize", default=None,
        help="runtime sanitizer on sim: freed memory and signals unmapped, their VA held back, so stale GPU "
             "accesses are VM faults naming what was freed where")),
    Option("--hcqsim-no-sanitize", "--no-sim-sanitize", dict(
        action="store_false", dest="hcqsim_sanitize",
        help="turn the sanitizer off (where a conftest turns it on by default)")),
    Option("--hcqsim-free-running", "--sim-free-running", dict(
        action="store_true", dest="hcqsim_free_running", default=False,
        help="run the emulated GPUs on a background thread that notices doorbell stores by itself "
             "(not deterministic across host/GPU interleavings; see docs/kfd_clients.md)")),
    Option("--hcqsim-seed", "--sim-seed", dict(
        dest="hcqsim_seed", type=int, default=0, metavar="N",
        help="seed of the emulated system (the random policy's choices and GPU seeds), printed in the header")),
    Option("--hcqsim-memory-model", "--sim-memory-model", dict(
        dest="hcqsim_memory_model", default="coherent", metavar="MODEL",
        help="emulated cache model on sim: coherent (default), report (every access that could see a stale or "
             "not-written-back line is recorded; a test that leaves records fails) or adversarial (stale lines "
             "kept, dirty lines held until written back); docs/memory_model.md")),
    Option("--hcqsim-aql", "--aql", dict(
        action="store_true", dest="hcqsim_aql", default=False,
        help="the runtime's compute queues are COMPUTE_AQL queues (kernels as AQL dispatch packets, other "
             "commands as PM4 in vendor packets) instead of PM4 queues")),
    Option("--hcqsim-gpus", "--sim-gpus", dict(
        dest="hcqsim_gpus", type=int, default=None, metavar="N",
        help="GPUs of the emulated system the fuzz_device (default 1) and fuzz_devices (default 2) fixtures open")),
)
DEFAULTS = {o.dest: o.attrs["default"] for o in OPTIONS if "default" in o.attrs}
_USED = pytest.StashKey[dict]()  # on a test item: the device options its fixtures opened devices with
_MEMORY_REPORTS = pytest.StashKey[list]()  # on a test item: memory-model records its devices' systems left
_WATCHED = pytest.StashKey[bool]()  # on a test item: HCQSIM_MEMORY_MODEL is set, its records (SEEN) are checked


def pytest_addoption(parser, pluginmanager):
    group = parser.getgroup(GROUP, "hcqsim (emulated or real AMD GPUs)")
    for opt in OPTIONS:
        group.addoption(opt.name, **opt.attrs)
    if getattr(pluginmanager, "_conftest_plugins", None):
        # Loaded by a conftest's `pytest_plugins` (the initial conftests are loading, so the wrapper below is
        # not called for this run): the project opted in, so its short aliases are added now, where free.
        _add_free_aliases(parser)


def _add_free_aliases(parser) -> None:
    taken = _registered_names(parser)
    group = parser.getgroup(GROUP)
    for opt in OPTIONS:
        if opt.alias not in taken:
            group.addoption(opt.alias, **opt.attrs)


def _registered_names(parser) -> set[str]:
    groups = [parser._anonymous, *parser._groups]  # pytest keeps no public list of option names
    return {name for g in groups for opt in g.options for name in opt.names()}


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """After the initial conftests registered their options, add each short alias nobody took."""
    result = yield
    _add_free_aliases(parser)
    return result


def _alias_is_ours(config, opt: Option) -> bool:
    group = next((g for g in config._parser._groups if g.name == GROUP), None)
    return group is not None and any(opt.alias in a.names() for a in group.options)


def _name(config, canonical: str) -> str:
    """The name a user types for an option in this run: the short alias where it was free."""
    opt = next(o for o in OPTIONS if o.name == canonical)
    return opt.alias if _alias_is_ours(config, opt) else opt.name


@pytest.hookimpl(tryfirst=True)  # before hypothesis' own plugin loads --hypothesis-profile
def pytest_configure(config):
    if str(config.getoption("hypothesis_profile", None) or "").startswith("hcqsim-"):  # schedule-fuzzing profiles
        __import__("hcqsim.strategies").strategies.register_profiles()
    config.addinivalue_line("markers", "sim_only: runs only on the emulator (hcqsim --device=sim)")
    config.addinivalue_line("markers", "hw_only: runs only on a real GPU (hcqsim --device=AMD)")
    config.addinivalue_line("markers", "no_sanitize: the hcqsim device fixtures of this test never use the "
                                       "sanitizer (it checks behaviour the sanitizer changes on purpose)")
    _check_options(config)


def _check_options(config) -> None:
    """Bad values are one usage line now, instead of a setup error in every test; values left at their
    defaults are known good, so a run that does not set them imports nothing."""
    spec = config.getoption("hcqsim_device")
    if spec != DEFAULTS["hcqsim_device"]:
        from .runtime import parse_spec
        try:
            kind, _ = parse_spec(spec)
        except ValueError as e:
            raise pytest.UsageError(f"{_name(config, '--hcqsim-device')}={spec}: {e}") from None
        if kind == "AMD":
            from .boundary import KFD_PATH
            if not os.path.exists(KFD_PATH):
                raise pytest.UsageError(
                    f"{_name(config, '--hcqsim-device')}={spec}: {KFD_PATH} not found; this machine has no AMD "
                    f"GPU driven by KFD (use {_name(config, '--hcqsim-device')}=sim)")
    target = config.getoption("hcqsim_target")
    if target != DEFAULTS["hcqsim_target"]:
        from .targets import get_target
        try:
            get_target(target)
        except ValueError as e:
            raise pytest.UsageError(f"{_name(config, '--hcqsim-target')}={target}: {e}") from None
    model = config.getoption("hcqsim_memory_model")
    if model != DEFAULTS["hcqsim_memory_model"]:
        from .coherence import check_model  # the emulator's own list of model names; nothing is built
        try:
            check_model(model)
        except ValueError as e:
            raise pytest.UsageError(f"{_name(config, '--hcqsim-memory-model')}={model}: {e}") from None
    gpus = config.getoption("hcqsim_gpus")
    if gpus is not None and not 1 <= gpus <= 8:
        raise pytest.UsageError(f"{_name(config, '--hcqsim-gpus')}={gpus}: an emulated system has 1 to 8 GPUs")
    policy = config.getoption("hcqsim_policy")
    if policy != DEFAULTS["hcqsim_policy"]:
        import random

        from .gpu import make_policy  # the emulator's own list of policy names; nothing is built
        try:
            make_policy(policy, random.Random(0))
        except ValueError as e:
            raise pytest.UsageError(f"{_name(config, '--hcqsim-policy')}={policy}: {e}") from None


def _kind(config) -> str:
    return config.getoption("hcqsim_device").partition(":")[0]  # checked in pytest_configure


def _sanitize(config) -> bool:
    return bool(config.getoption("hcqsim_sanitize"))


def _options_set(config) -> bool:
    return any(config.getoption(dest) != default for dest, default in DEFAULTS.items())


def pytest_report_header(config) -> list[str] | None:
    lines = []
    inject = os.environ.get("HCQSIM_INJECT", "").strip()  # hcqsim/kfd/fault_injection.py: every system gets it
    if inject:
        lines.append(f"hcqsim: fault injection HCQSIM_INJECT={inject!r}, seed "
                     f"{os.environ.get('HCQSIM_INJECT_SEED', 'of each system')}")
    if _options_set(config):  # a project that does not use hcqsim sees no line of it
        lines.append(_device_header(config))
    return lines or None


def _device_header(config) -> str:
    spec = config.getoption("hcqsim_device")
    if _kind(config) != "sim":
        return f"hcqsim: device {spec}"
    return (f"hcqsim: device {spec}, target {config.getoption('hcqsim_target')}, policy "
            f"{config.getoption('hcqsim_policy')}, sanitizer {'on' if _sanitize(config) else 'off'}"
            f"{f', seed {seed}' if (seed := config.getoption('hcqsim_seed')) else ''}"
            f"{', free-running' if config.getoption('hcqsim_free_running') else ''}"
            f"{f', memory model {model}' if (model := config.getoption('hcqsim_memory_model')) != 'coherent' else ''}"
            f"{', AQL compute queues' if config.getoption('hcqsim_aql') else ''}"
            f"{f', {gpus} GPUs for fuzzing' if (gpus := config.getoption('hcqsim_gpus')) else ''}")


def pytest_collection_modifyitems(config, items):
    kind = _kind(config)
    for item in items:
        if kind == "AMD" and item.get_closest_marker("sim_only"):
            item.add_marker(pytest.mark.skip(reason="sim_only test on real hardware"))
        if kind == "sim" and item.get_closest_marker("hw_only"):
            item.add_marker(pytest.mark.skip(reason="hw_only test on the emulator"))


def _sim_options(config) -> dict:
    opts = dict(target=config.getoption("hcqsim_target"), policy=config.getoption("hcqsim_policy"),
                seed=config.getoption("hcqsim_seed"))
    if config.getoption("hcqsim_free_running"):
        opts["free_running"] = True
    if config.getoption("hcqsim_memory_model") != "coherent":
        opts["memory_model"] = config.getoption("hcqsim_memory_model")
    return opts


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With HCQSIM_MEMORY_MODEL set (report), every test that leaves records fails: also machines the test built
    itself, which the fixtures never see (hcqsim.coherence.report.SEEN collects the records of every machine whose
    model came from the environment; one given memory_model= explicitly is checked by the test itself)."""
    if os.environ.get("HCQSIM_MEMORY_MODEL", "").strip() in ("", "coherent"):
        return (yield)
    from .coherence.report import SEEN
    SEEN.clear()  # SEEN is bounded: a count kept across tests would stop seeing new records once it is full
    item.stash[_WATCHED] = True
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    result = yield
    if item.stash.get(_WATCHED, False):
        from .coherence.report import SEEN
        fresh = list(SEEN)
        if fresh and not item.stash.get(_MEMORY_REPORTS, None):
            item.stash[_MEMORY_REPORTS] = fresh
            pytest.fail(f"hcqsim memory model (HCQSIM_MEMORY_MODEL): the test left {len(fresh)} record(s); the "
                        f"first:\n{fresh[0]}", pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    reports = item.stash.get(_MEMORY_REPORTS, None) if call.when == "teardown" else None
    if report.failed and reports:  # the fixture's teardown failed the test for what the memory model recorded
        report.sections.append(("hcqsim memory model", memory_model_section(reports)))
    elif report.failed:
        systems = _live_systems()
        if systems:
            report.sections.append(("hcqsim machine state", "\n\n".join(machine_state(s) for s in systems)))
        used = item.stash.get(_USED, None)
        if used is not None and used.get("kind") == "sim":
            report.sections.append(("hcqsim sanitizer", _sanitizer_note(item.config, used)))
    return report


def _live_systems() -> list:
    system = sys.modules.get("hcqsim.kfd.system")  # no emulator loaded: no system can be open
    return system.live_systems() if system is not None else []


def _sanitizer_note(config, used: dict) -> str:
    if used["sanitize"]:
        return ("on: a GPU access to freed memory or a freed signal would have been a VM fault naming the "
                "buffer and where it was freed")
    why = "(@pytest.mark.no_sanitize on this test)" if used["marked_off"] else ""
    how = f"rerun with {_name(config, '--hcqsim-sanitize')}" if not used["marked_off"] else \
        "remove the no_sanitize marker"
    return (f"off {why}: a GPU access to freed memory or a freed signal passes silently (it may land in the "
            f"next owner's data); {how}, or open_device('sim', sanitize=True), to make it a VM fault naming "
            f"the buffer and where it was freed").replace("off :", "off:")


# -- the memory-model section ------------------------------------------------------------------------------

def memory_model_section(reports: list) -> str:
    """The records a test left (hcqsim.coherence.MemoryReport), each as its readable text."""
    head = f"{len(reports)} record(s): an access that could have seen a stale cache line or a write not yet " \
           f"written back (docs/memory_model.md)"
    return "\n\n".join([head, *(str(r) for r in reports)])


def _check_memory_reports(request, devices: list) -> None:
    """Teardown of a sim fixture: a test whose systems recorded memory-model hazards fails here."""
    seen, reports = set(), []
    for dev in devices:
        system = getattr(getattr(dev, "os", None), "system", None)
        if system is None or id(system) in seen:
            continue
        seen.add(id(system))
        reports += list(getattr(system, "memory_reports", ()))
    if reports:
        request.node.stash[_MEMORY_REPORTS] = reports
        pytest.fail(f"hcqsim memory model: the test left {len(reports)} record(s) (see the 'hcqsim memory "
                    f"model' section); the first:\n{reports[0]}", pytrace=False)


# -- the machine-state section ---------------------------------------------------------------------------

def _hex(value) -> str:
    return "-" if value is None else f"0x{value:x}"


def _columns(rows: list[tuple], indent: str = "  ") -> list[str]:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(f"{str(c):{w}}" for c, w in zip(r, widths)).rstrip() for r in rows]


def _queue_state(q) -> str:
    if q.fault:
        return "faulted"
    if q.destroyed:
        return "destroyed"
    if q.wait:
        return "waiting"
    return "busy" if q.has_work() else "idle"


def machine_state(system) -> str:
    """One emulated system as tables: its queues, what the blocked ones wait for, recent faults."""
    with system.lock:
        mode = "free-running" if system.free_running else "progress points"
        lines = [f"emulated system: {len(system.gpus)} x {system.target.name}, {mode}"
                 f"{', closed' if system.closed else ''}"]
        thread = getattr(system, "thread", None)
        if thread is not None and thread.error is not None:
            lines.append(f"  GPU thread stopped by an emulator error: {thread.error!r}")
        queues = [("GPU", "queue", "engine", "state", "rptr", "wptr")]
        queues += [(gpu.label, q.name, q.engine, _queue_state(q), _hex(q.rptr), _hex(q.wptr))
                   for gpu in system.gpus for q in gpu.queues]
        lines += _columns(queues) if len(queues) > 1 else ["  no queues"]
        blocked = [b for gpu in system.gpus for b in gpu.blocked()]
        if blocked:
            lines.append("  blocked waits:")
            rows = [("GPU", "queue", "ring offset", "address", "wants", "current")]
            rows += [(b.gpu, b.queue, _hex(b.ring_offset), _hex(b.address), b.awaited,
                      "unreadable" if b.current is None else _hex(b.current)) for b in blocked]
            lines += _columns(rows, "    ")
            lines += [f"    {b.queue}: {b.packet}" for b in blocked]
        faults = [f for gpu in system.gpus for f in gpu.faults[-3:]]
        if faults:
            lines.append("  recent faults:")
            lines += [f"    {str(f).splitlines()[0]}" for f in faults]
        return "\n".join(lines)


# -- fixtures ----------------------------------------------------------------------------------------------

def _device_options(request) -> dict:
    marked_off = request.node.get_closest_marker("no_sanitize") is not None
    sanitize = _sanitize(request.config) and not marked_off
    request.node.stash[_USED] = dict(kind="sim", sanitize=sanitize, marked_off=marked_off)
    return dict(_sim_options(request.config), sanitize=sanitize)


@pytest.fixture
def device_spec(request) -> str:
    """The device spec of this run (`--device`/`--hcqsim-device`)."""
    return request.config.getoption("hcqsim_device")


@pytest.fixture
def device(request, device_spec):
    """One runtime device on the run's spec; on sim a fresh emulated system, closed after the test."""
    from .runtime import open_device
    kind = device_spec.partition(":")[0]
    dev = open_device(device_spec, **(_device_options(request) if kind == "sim" else {}),
                      aql=request.config.getoption("hcqsim_aql"))
    yield dev
    if kind == "sim":
        dev.close()
        _check_memory_reports(request, [dev])


@pytest.fixture
def devices(request, device_spec):
    """Two runtime devices (on sim one emulated system with two GPUs); skipped where the machine has one."""
    from .runtime import NoDeviceError, open_devices
    kind = device_spec.partition(":")[0]
    try:
        devs = open_devices(device_spec, 2, **(_device_options(request) if kind == "sim" else {}),
                            aql=request.config.getoption("hcqsim_aql"))
    except NoDeviceError as e:
        pytest.skip(str(e))
    yield devs
    if kind == "sim":
        for d in devs:
            d.close()
        _check_memory_reports(request, devs)


def _fuzz_devices(request, default_count: int) -> list:
    """Devices on one emulated system under a fresh Interleaver (`dev.interleaver`), opened with the run's target,
    memory model (the option, else HCQSIM_MEMORY_MODEL, given explicitly: the records are checked per example by
    @interleaved, not at teardown for the whole test), AQL, sanitizer, seed and --sim-gpus."""
    from .runtime import open_devices
    from .strategies import Interleaver
    config = request.config
    if _kind(config) != "sim":
        pytest.skip("interleaving fuzzing needs the emulator (--device=sim)")
    if config.getoption("hcqsim_free_running"):
        pytest.skip("interleaving fuzzing chooses every scheduling decision: not with --sim-free-running")
    opts = _device_options(request)
    opts.pop("policy", None)
    opts.pop("free_running", None)
    model = opts.get("memory_model") or os.environ.get("HCQSIM_MEMORY_MODEL", "").strip() or "coherent"
    opts["memory_model"] = model
    chooser = Interleaver()
    count = config.getoption("hcqsim_gpus") or default_count
    devs = open_devices("sim", count, policy=chooser, aql=config.getoption("hcqsim_aql"), **opts)
    for d in devs:
        d.interleaver = chooser
    chooser.name_queues(devs)
    return devs


@pytest.fixture
def fuzz_device(request):
    """One emulated device under an Interleaver (`fuzz_device.interleaver`), for `@hcqsim.interleaved.interleaved`
    tests: the run's --sim-target, --sim-memory-model, --aql, --sim-sanitize, --sim-seed; --sim-gpus N opens N GPUs
    (this is the first)."""
    devs = _fuzz_devices(request, 1)
    yield devs[0]
    for d in devs:
        d.close()
    _check_memory_reports(request, devs)


@pytest.fixture
def fuzz_devices(request):
    """`--sim-gpus` (default 2) emulated devices of one system under one Interleaver; see fuzz_device."""
    devs = _fuzz_devices(request, 2)
    yield devs
    for d in devs:
        d.close()
    _check_memory_reports(request, devs)
