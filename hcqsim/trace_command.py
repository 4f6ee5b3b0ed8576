"""`hcqsim trace`: the emulator's packet timeline as trace-event JSON (open in https://ui.perfetto.dev).

    hcqsim trace SCENARIO -o out.json [--target gfx942]     one conformance scenario
    hcqsim trace -o out.json -- python my_test.py [ARGS]     the user's own program, run in this process
    hcqsim trace -o out.json -- python -m pytest tests/x.py  (also `-- pytest ...`, `-- my_test.py`, `-- -m mod`)

Tracing a program: every `EmulatedGPU` the program creates (through `open_device("sim")`, `EmulatedSystem` or
directly) is remembered, closed or not, and after the program ends each one's trace becomes a process of the
output (a track per queue). The program runs as `python` would run it (`__main__`, its own `sys.argv`); its
exit status is the command's (1 if it raised; the output is written either way, its traceback printed as Python
would). Harness layer (it may import anything).
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import os
import runpy
import sys
import traceback

from .command_status import EXIT_DIFFERENT, usage, unavailable

log = logging.getLogger("hcqsim.trace")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario", nargs="?", help="a conformance scenario (hcqsim conformance --list); or give "
                                                    "a program after --")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="the trace-event JSON file to write")
    parser.add_argument("--target", default="gfx1100", choices=["gfx1100", "gfx942"], help="emulated target (scenario)")
    parser.add_argument("--suite", metavar="DIR", help="the conformance directory (default: the installed or "
                                                       "checked-out suite)")


def run(args, suite_loader) -> int:
    """`suite_loader(path)` returns the conformance package (cli.py finds it)."""
    program = getattr(args, "traced_program", None) or []
    if bool(program) == bool(args.scenario):
        raise usage("give a SCENARIO or a program after -- (e.g. hcqsim trace -o t.json -- python my_test.py)")
    check_writable(args.output)
    if program:
        return _trace_program(program, args.output)
    return _trace_scenario(suite_loader(args.suite), args.scenario, args.target, args.output)


def check_writable(path: str) -> None:
    """An output file's directory must exist (checked before any work, so a typo costs nothing)."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise unavailable(f"cannot write {path}: directory {parent} does not exist")
    if os.path.isdir(path):
        raise unavailable(f"cannot write {path}: it is a directory")
    if not os.access(parent, os.W_OK):
        raise unavailable(f"cannot write {path}: directory {parent} is not writable")


def _trace_scenario(suite, name: str, target: str, output: str) -> int:
    from . import trace_events
    if name not in suite.scenarios.NAMES:
        raise usage(f"no scenario {name!r} (hcqsim conformance --list names them)")
    sc = suite.scenarios.get(name)
    devs = suite.runner.open_for(sc, "sim", target)
    try:
        suite.runner.Run(sc, devs).run()
        events = []
        for i, d in enumerate(devs):
            gpu = d.os.system.gpus[d.index]
            events += trace_events.from_trace_lines(gpu.trace_lines(), pid=i, process=f"{d.label} {d.target}")
    finally:
        for d in devs:
            d.close()
    trace_events.write(output, events)
    print(f"{output}: {len(events)} trace events of scenario {sc['name']} "
          f"(open in https://ui.perfetto.dev or chrome://tracing)")
    return 0


@contextlib.contextmanager
def recording_gpus():
    """Every EmulatedGPU created inside the block, in creation order (the list is yielded and grows)."""
    from .gpu import EmulatedGPU
    created: list = []
    original = EmulatedGPU.__init__

    def init(self, *a, **kw):
        original(self, *a, **kw)
        created.append(self)

    EmulatedGPU.__init__ = init
    try:
        yield created
    finally:
        EmulatedGPU.__init__ = original


def _trace_program(program: list[str], output: str) -> int:
    from . import trace_events
    with recording_gpus() as gpus:
        status = run_program(program)
    events = []
    for pid, gpu in enumerate(gpus):
        events += trace_events.from_trace_lines(gpu.trace_lines(), pid=pid,
                                                process=f"{gpu.label} {gpu.target.name} (#{pid} created)")
    trace_events.write(output, events)
    print(f"{output}: {len(events)} trace events of {len(gpus)} emulated GPU(s) created by {' '.join(program)} "
          f"(open in https://ui.perfetto.dev or chrome://tracing)", file=sys.stderr)
    return status


def _split(program: list[str]) -> tuple[str, str, list[str]]:
    """('module' | 'path', what, argv) from `python X.py ...`, `python -m M ...`, `pytest ...`, `X.py ...`."""
    argv = list(program)
    if os.path.basename(argv[0]).startswith("python"):
        argv = argv[1:]
        if not argv:
            raise usage("trace -- python: give a script or -m MODULE")
    if argv[0] == "-m":
        if len(argv) < 2:
            raise usage("trace -- -m: give a module name")
        return "module", argv[1], argv[1:]
    if os.path.basename(argv[0]) in ("pytest", "py.test"):
        return "module", "pytest", argv
    if argv[0].startswith("-"):
        raise usage(f"trace --: {argv[0]} is not a script (only a script, -m MODULE or pytest run in-process)")
    if not os.path.isfile(argv[0]):
        raise unavailable(f"trace --: no script {argv[0]}")
    return "path", argv[0], argv


def run_program(program: list[str]) -> int:
    """Run a Python program in this process as `python` would; its exit status."""
    kind, what, argv = _split(program)
    saved_argv, entry = sys.argv, None
    sys.argv = argv
    if kind == "path":  # as python does: the script's directory first on sys.path
        entry = os.path.dirname(os.path.abspath(what))
        sys.path.insert(0, entry)
    log.info("tracing %s %s", kind, what)
    try:
        if kind == "module":
            runpy.run_module(what, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(what, run_name="__main__")
        return 0
    except SystemExit as e:
        code = e.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return EXIT_DIFFERENT
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # the program's own error: its traceback, as Python prints it
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, runpy.__file__, "<frozen runpy>"):
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb)
        return EXIT_DIFFERENT
    finally:
        sys.argv = saved_argv
        if entry is not None and entry in sys.path:
            sys.path.remove(entry)
