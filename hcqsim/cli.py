"""The `hcqsim` command: conformance, info, disasm, trace.

    hcqsim conformance [--device sim|AMD] [--target gfx1100|gfx942] [--aql|--pm4] [--record F] [--compare F]
                       [--json] [--list] [NAME...]
        on sim, by default the matrix: gfx1100 and gfx942, each with PM4 and with AQL compute queues; --target,
        --aql or --pm4 pick one configuration (--record and --compare need one)
    hcqsim info [--device sim|AMD] [--gpus N] [--target ...] [--json]                       (info_command.py)
    hcqsim disasm pm4|sdma|isa|code-object [WORDS... | --file F|-] [--family/--sdma-version/--arch ...]
                                                                                            (disasm_command.py)
    hcqsim trace SCENARIO -o out.json [--target ...]  |  hcqsim trace -o out.json -- python my_test.py
                                                                                            (trace_command.py)
    global: --version (also on every subcommand), -v / -vv (logging: info / debug; or HCQSIM_LOG=...)

Every error ends in one line on stderr (`hcqsim <command>: ...`) and a documented exit status
(hcqsim/command_status.py: 0 ok, 1 differences, 2 usage, 3 device or file unavailable, 4 internal error,
130 interrupted, 141 stdout closed); never a traceback (`-vv` logs one for an internal error).

The conformance suite (scenarios, reference model, runner, golden records) is the repository's top-level
`conformance/` directory; the wheel ships the same files as the subpackage `hcqsim.conformance`. The command
uses `--suite DIR`, else the checkout's directory beside this package, else the installed subpackage.
Harness layer: it may import anything (docs/architecture.md).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import sys
import time
from pathlib import Path

from . import disasm_command, info_command, trace_command
from . import log as hcqsim_log
from .command_status import (EXIT_BROKEN_PIPE, EXIT_DIFFERENT, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_UNAVAILABLE,
                             EXIT_USAGE, CommandError, unavailable, usage)

log = logging.getLogger("hcqsim.cli")
SUITE_MODULES = ("effects", "reference", "runner", "scenarios")


def load_suite(path: str | None = None):
    """The conformance package: `--suite DIR`, the checkout's `conformance/` beside the hcqsim package, or the
    installed `hcqsim.conformance` (the same files, mapped into the wheel by pyproject.toml)."""
    if path:
        root = Path(path).resolve()
        if not (root / "scenarios.py").is_file():
            raise unavailable(f"--suite {path}: no conformance suite there (scenarios.py missing)")
        return _import_suite(root.parent, root.name)
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "conformance" / "scenarios.py").is_file():
        return _import_suite(checkout, "conformance")
    try:
        return _import_suite(None, "hcqsim.conformance")
    except ImportError:
        raise unavailable("no conformance suite: neither a checkout's conformance/ beside the hcqsim package nor "
                          "an installed hcqsim.conformance (give --suite DIR)") from None


def _import_suite(parent: Path | None, name: str):
    if parent is not None and str(parent) not in sys.path:
        sys.path.insert(0, str(parent))
    package = importlib.import_module(name)
    for module in SUITE_MODULES:
        importlib.import_module(f"{name}.{module}")
    log.info("conformance suite: %s", os.path.dirname(package.__file__))
    return package


class Progress:
    """A one-line progress bar on a terminal (stderr), plain lines elsewhere; nothing with --json."""

    def __init__(self, total: int, enabled: bool = True, width: int = 30):
        self.total, self.enabled, self.width = total, enabled, width
        self.tty = enabled and sys.stderr.isatty()

    def show(self, done: int, label: str) -> None:
        if not self.enabled:
            return
        if self.tty:
            filled = self.width * done // max(1, self.total)
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {done}/{self.total} {label[:40]:40s}")
            if done == self.total:
                sys.stderr.write("\n")
        elif label:
            sys.stderr.write(f"[{done}/{self.total}] {label}\n")
        sys.stderr.flush()


def _table(rows: list[tuple[str, str, str]]) -> str:
    w0 = max([len("scenario")] + [len(r[0]) for r in rows])
    lines = [f"{'scenario':{w0}}  result  first difference", f"{'-' * w0}  ------  {'-' * 16}"]
    lines += [f"{name:{w0}}  {result:6}  {diff}" for name, result, diff in rows]
    return "\n".join(lines)


TARGETS = ("gfx1100", "gfx942")


def _configurations(args, kind: str) -> list[tuple[str | None, bool]]:
    """(target, aql) pairs to run. On sim with none of --target / --aql / --pm4: the matrix, both targets with PM4
    and with AQL compute queues; any of them: one configuration (--target alone: PM4; --aql alone: gfx1100).
    A real GPU is its own target: PM4, or AQL with --aql."""
    if kind != "sim":
        return [(None, bool(args.aql))]
    if args.target is None and not args.aql and not args.pm4:
        if args.record or args.compare:
            flag = "--record" if args.record else "--compare"
            raise usage(f"{flag} is about one configuration: add --target gfx1100 or --target gfx942 (and --aql for "
                        f"AQL compute queues); without them conformance runs all {2 * len(TARGETS)}")
        return [(t, aql) for t in TARGETS for aql in (False, True)]
    return [(args.target or TARGETS[0], bool(args.aql))]


def _label(target: str, aql: bool) -> str:
    return target + ("+aql" if aql else "")


def cmd_conformance(args) -> int:
    suite = load_suite(args.suite)
    scen = suite.scenarios
    if args.list:
        return _list_scenarios(scen.SCENARIOS, args.json)
    kind = _device_kind(args.device)
    unknown = [n for n in args.scenario if n not in scen.NAMES]
    if unknown:
        raise usage(f"no scenario {', '.join(map(repr, unknown))} (hcqsim conformance --list names them)")
    chosen = [scen.get(n) for n in args.scenario] if args.scenario else scen.SCENARIOS
    configs = _configurations(args, kind)
    compare_paths = list(args.compare or [])
    others = {path: _load_record(suite, path) for path in compare_paths}  # before any scenario runs
    if args.record:
        trace_command.check_writable(args.record)
    hw_target = None if kind == "sim" else _hardware_target(args.device)
    progress = Progress(len(chosen) * len(configs), enabled=not args.json)
    t0 = time.perf_counter()
    runs = []
    for k, (target, aql) in enumerate(configs):
        prefix = f"{_label(target, aql)}: " if len(configs) > 1 else ""
        runs.append(_run_configuration(suite, args, chosen, kind, target or hw_target, aql, compare_paths, others,
                                       lambda i, name: progress.show(k * len(chosen) + i, prefix + name)))
    progress.show(len(chosen) * len(configs), "")
    if args.record:
        Path(args.record).write_text(suite.effects.dumps(runs[0]["record"]))
    if args.json:
        docs = [_json_result(args, chosen, r) for r in runs]
        if len(runs) == 1:
            print(json.dumps(docs[0], sort_keys=True, indent=1))
        else:
            print(json.dumps({"device": args.device, "configurations": {r["label"]: d for r, d in zip(runs, docs)},
                              "scenarios": len(chosen) * len(runs),
                              "passed": sum(d["passed"] for d in docs),
                              "failed": [f"{r['label']}: {n}" for r in runs for n in r["failed"]]},
                             sort_keys=True, indent=1))
    else:
        if len(runs) == 1:
            r = runs[0]
            print(_table([_row(sc["name"], r["errors"], r["diffs"]) for sc in chosen]))
            print()
        else:
            print(_matrix_table(chosen, runs))
            print()
        for r in runs:
            against = ", ".join(["reference model"] * (not args.no_reference) + r["compare_paths"]) or "nothing"
            print(f"{len(chosen) - len(r['failed'])}/{len(chosen)} scenarios pass on {args.device} ({r['target']}"
                  f"{', AQL' if r['aql'] else ''}), compared with {against}, in {r['seconds']:.1f} s"
                  + (f"; effects recorded in {args.record}" if args.record else ""))
        if len(runs) > 1:
            bad = [r["label"] for r in runs if r["failed"]]
            print(f"{len(runs) - len(bad)}/{len(runs)} configurations pass ({', '.join(r['label'] for r in runs)})"
                  f"{'; failing: ' + ', '.join(bad) if bad else ''}, in {time.perf_counter() - t0:.1f} s; "
                  f"one configuration: --target gfx1100|gfx942 [--aql]")
    return EXIT_DIFFERENT if any(r["failed"] for r in runs) else 0


def _run_configuration(suite, args, chosen: list[dict], kind: str, target: str, aql: bool, compare_paths: list[str],
                       others: dict, show) -> dict:
    """Every chosen scenario on one (target, queue kind), compared with the reference model and the records."""
    options = {"aql": True} if aql else {}
    records, errors = {}, {}
    diffs: dict[str, list[str]] = {}
    t0 = time.perf_counter()
    for i, sc in enumerate(chosen):
        show(i, sc["name"])
        started = time.perf_counter()
        try:
            with _memory_records() as left:
                effects, _ = suite.runner.run_scenario(sc, args.device, target if kind == "sim" else None, **options)
        except Exception as e:  # a scenario that cannot run is a failure of that scenario, not of the command
            errors[sc["name"]] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            log.debug("scenario %s raised", sc["name"], exc_info=True)
            continue
        records[sc["name"]] = effects
        if left:  # HCQSIM_MEMORY_MODEL=report: a record is a missing flush in the scenario's stream or the runtime
            diffs.setdefault(sc["name"], []).extend(" / ".join(line.strip() for line in str(r).splitlines()[:4])
                                                    for r in left)  # "memory model: <kind>, missing <op> / ..."
        if not args.no_reference:
            expected = suite.reference.expected_effects(sc, target)  # the target's documented facts, not the device's
            diffs.setdefault(sc["name"], []).extend(f"reference: {d}" for d in suite.effects.differences(expected, effects))
        log.info("scenario %s%s: %s in %.2f s", sc["name"], " (AQL)" if aql else "",
                 "differs" if diffs.get(sc["name"]) else "ran", time.perf_counter() - started)
    record = suite.effects.record_file(kind, target, records)
    paths, others = list(compare_paths), dict(others)
    if not paths and not args.no_golden:  # the three-way comparison: the committed sim records (as the
        for which in ("sim", "AMD"):      # tests compare) and a hardware golden when there is one
            golden = Path(suite.__file__).parent / "golden" / f"{which}-{record['target']}.json"
            if golden.exists() and not (which == "AMD" and kind == "AMD"):
                paths.append(str(golden))
                others[str(golden)] = _load_record(suite, str(golden))
    for path in paths:
        label = os.path.basename(path)
        mine = {k: v for k, v in others[path]["scenarios"].items() if k in records}
        for name, ds in suite.effects.compare_files({"scenarios": mine}, {"scenarios": records}).items():
            diffs.setdefault(name, []).extend(f"{label}: {d}" for d in ds)
    failed = sorted(set(errors) | {n for n, d in diffs.items() if d})
    return {"label": _label(record["target"], aql), "target": record["target"], "aql": aql, "record": record,
            "errors": errors, "diffs": diffs, "failed": failed, "compare_paths": paths,
            "seconds": time.perf_counter() - t0}


def _json_result(args, chosen: list[dict], r: dict) -> dict:
    return {"device": args.device, "target": r["target"], "aql": r["aql"], "scenarios": len(chosen),
            "passed": len(chosen) - len(r["failed"]), "failed": r["failed"], "errors": r["errors"],
            "differences": {n: d for n, d in r["diffs"].items() if d},
            "compared_with": ["reference"] * (not args.no_reference) + r["compare_paths"]}


def _matrix_table(chosen: list[dict], runs: list[dict]) -> str:
    """One row per scenario, one column per configuration, then the first difference of the first failing one."""
    labels = [r["label"] for r in runs]
    w0 = max([len("scenario")] + [len(sc["name"]) for sc in chosen])
    widths = [max(len(lb), 6) for lb in labels]
    head = f"{'scenario':{w0}}  " + "  ".join(f"{lb:{w}}" for lb, w in zip(labels, widths)) + "  first difference"
    lines = [head, f"{'-' * w0}  " + "  ".join("-" * w for w in widths) + "  " + "-" * 16]
    for sc in chosen:
        cells = [_row(sc["name"], r["errors"], r["diffs"]) for r in runs]
        first = next((f"{r['label']}: {c[2]}" for r, c in zip(runs, cells) if c[1] != "pass"), "")
        lines.append(f"{sc['name']:{w0}}  " + "  ".join(f"{c[1]:{w}}" for c, w in zip(cells, widths)) + f"  {first}")
    return "\n".join(line.rstrip() for line in lines)


@contextlib.contextmanager
def _memory_records():
    """The memory-model records the machines of one scenario left (those whose model came from
    HCQSIM_MEMORY_MODEL: hcqsim.coherence.report.SEEN), given back in the list yielded; SEEN keeps them too."""
    from .coherence.report import SEEN
    saved, left = SEEN[:], []
    SEEN.clear()
    try:
        yield left
    finally:
        left.extend(SEEN)
        SEEN[:] = saved + left


def _row(name: str, errors: dict, diffs: dict) -> tuple[str, str, str]:
    if name in errors:
        return name, "ERROR", errors[name]
    if diffs.get(name):
        more = f" (+{len(diffs[name]) - 1} more)" if len(diffs[name]) > 1 else ""
        return name, "FAIL", diffs[name][0] + more
    return name, "pass", ""


def _list_scenarios(scenarios: list[dict], as_json: bool) -> int:
    if as_json:
        print(json.dumps([{"name": s["name"], "doc": s["doc"], "devices": s.get("devices", 1)} for s in scenarios],
                         indent=1))
        return 0
    width = max(len(s["name"]) for s in scenarios)
    for s in scenarios:
        devices = f" [{s['devices']} GPUs]" if s.get("devices", 1) > 1 else ""
        print(f"{s['name']:{width}}  {s['doc']}{devices}")
    return 0


def _device_kind(spec: str) -> str:
    from .runtime import parse_spec
    try:
        return parse_spec(spec)[0]
    except ValueError as e:
        raise usage(f"--device {spec}: {e}") from None


def _hardware_target(spec: str) -> str:
    """The target of a real GPU, checked before any scenario runs: a missing /dev/kfd or GPU is one line now."""
    from .boundary import KFD_PATH
    from .runtime import NoDeviceError, open_device
    if not os.path.exists(KFD_PATH):
        raise unavailable(f"--device {spec}: {KFD_PATH} not found; this machine has no AMD GPU driven by KFD "
                          f"(use --device sim)")
    try:
        return open_device(spec).target
    except (NoDeviceError, IndexError) as e:
        raise unavailable(f"--device {spec}: {e}") from None


def _load_record(suite, path: str) -> dict:
    try:
        return suite.effects.load(path)
    except FileNotFoundError:
        raise unavailable(f"--compare {path}: no such file") from None
    except OSError as e:
        raise unavailable(f"--compare {path}: cannot read it ({e.strerror or e})") from None
    except ValueError as e:  # not JSON, or not an effect record
        raise unavailable(f"--compare {path}: not an effect record ({str(e).splitlines()[0]})") from None


def _version() -> str:
    from . import __version__
    return __version__


class Parser(argparse.ArgumentParser):
    """Usage errors as one line (`hcqsim conformance: error: ... (see --help)`), exit status 2."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _common(p: argparse.ArgumentParser, top: bool = False) -> None:
    p.add_argument("--version", action="version", version=f"hcqsim {_version()}", help="print hcqsim's version")
    p.add_argument("-v", "--verbose", action="count", default=0 if top else argparse.SUPPRESS,
                   help="log progress (-v) or everything (-vv) to stderr; also HCQSIM_LOG=info|debug")


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="hcqsim", description="hcqsim: emulated AMD GPU queues and the runtime over them",
               epilog="exit status: 0 ok, 1 differences, 2 usage, 3 device or file unavailable, 4 internal error, "
                      "130 interrupted, 141 stdout closed (hcqsim/command_status.py)")
    _common(p, top=True)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    c = sub.add_parser("conformance", help="run the conformance scenarios and compare their effects")
    _common(c)
    c.add_argument("--device", default="sim", help="sim (default), sim:N, AMD or AMD:N")
    c.add_argument("--target", choices=list(TARGETS),
                   help="emulated target (sim): run only this one (with PM4 compute queues unless --aql); default: "
                        "both targets, each with PM4 and with AQL compute queues (four configurations)")
    queues = c.add_mutually_exclusive_group()
    queues.add_argument("--aql", action="store_true", help="only COMPUTE_AQL compute queues (kernels as AQL dispatch "
                                                           "packets); gfx1100 unless --target")
    queues.add_argument("--pm4", action="store_true", help="only PM4 compute queues; gfx1100 unless --target")
    c.add_argument("--record", metavar="FILE", help="write the effect records (canonical JSON) to FILE")
    c.add_argument("--compare", metavar="FILE", action="append",
                   help="compare with a recorded effect file (repeatable); default: conformance/golden/sim-<target>.json "
                        "and AMD-<target>.json "
                        "when it exists")
    c.add_argument("--json", action="store_true", help="print the result (or --list) as JSON (no progress bar)")
    c.add_argument("--list", action="store_true", help="list the scenarios (name and what each checks) and exit")
    c.add_argument("--no-reference", action="store_true", help="do not compare with the reference model")
    c.add_argument("--no-golden", action="store_true", help="do not compare with the golden files by default")
    c.add_argument("--suite", metavar="DIR", help="the conformance directory (default: the checkout's, else the "
                                                  "installed hcqsim.conformance)")
    c.add_argument("scenario", nargs="*", help="only these scenarios (default: all; see --list)")
    c.set_defaults(fn=cmd_conformance)

    i = sub.add_parser("info", help="every GPU agent: CUs, SIMDs, waves, LDS, memory pools, queues, SDMA, firmware")
    _common(i)
    info_command.add_arguments(i)
    i.set_defaults(fn=info_command.run)

    d = sub.add_parser("disasm", help="disassemble PM4 / SDMA streams, raw ISA or code objects")
    disasm_command.add_arguments(d)
    d.set_defaults(fn=disasm_command.run)

    t = sub.add_parser("trace", help="write the emulator's timeline (trace-event JSON) of a scenario or of your "
                                     "program (hcqsim trace -o t.json -- python my_test.py)")
    _common(t)
    trace_command.add_arguments(t)
    t.set_defaults(fn=lambda args: trace_command.run(args, load_suite))

    from .native import command as native_command  # `hcqsim run`: hcqsim/native/command.py
    r = sub.add_parser("run", help="run an unmodified native ROCm program (rocminfo, HIP) on an emulated machine")
    _common(r)
    native_command.add_arguments(r)
    r.set_defaults(fn=native_command.run)
    return p


def _split_program(argv: list[str]) -> tuple[list[str], list[str]]:
    """`hcqsim trace ... -- CMD ARGS`: the command after `--` is the program to trace, not hcqsim's."""
    if "--" in argv and "trace" in argv[:argv.index("--")]:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1:]
    return argv, []


def main(argv: list[str] | None = None) -> int:
    argv, program = _split_program(list(sys.argv[1:] if argv is None else argv))
    p = parser()
    args, extra = p.parse_known_args(argv)
    if extra and args.command == "disasm" and not any(x.startswith("-") for x in extra):
        args.words = list(args.words) + extra  # hex words after an option (argparse stops at the first option)
    elif extra:
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    args.traced_program = program  # the program after `--` of `hcqsim trace`
    name = f"hcqsim {args.command}"
    try:
        hcqsim_log.configure(getattr(args, "verbose", 0))
    except ValueError as e:
        print(f"{name}: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        status = args.fn(args)
        sys.stdout.flush()
        return status
    except CommandError as e:
        print(f"{name}: {e}", file=sys.stderr)
        return e.status
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as e:  # a file or device the command needed
        where = f"{e.filename}: " if e.filename else ""
        print(f"{name}: {where}{e.strerror or e}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except Exception as e:
        log.debug("internal error", exc_info=True)
        first = str(e).splitlines()[0] if str(e) else ""
        print(f"{name}: internal error: {type(e).__name__}: {first} (a bug in hcqsim; -vv logs the traceback)",
              file=sys.stderr)
        return EXIT_INTERNAL


def _silence_stdout() -> None:
    """The reader went away: point stdout at /dev/null so the interpreter's final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
