"""The `hcqsim` command: conformance, info, disasm, trace.

    hcqsim conformance --device sim [--target gfx1100|gfx942] [--record FILE] [--compare FILE] [--json]
    hcqsim info [--device sim|AMD] [--gpus N] [--target ...]
    hcqsim disasm pm4|sdma|isa|code-object [WORDS... | --file F|-] [--family/--sdma-version/--arch ...] (disasm_command.py)
    hcqsim trace SCENARIO -o out.json [--target ...]

The conformance scenarios live in the checkout's top-level `conformance/` directory (they are data and a
reference model, not part of the installed package); the command finds it next to the `hcqsim` package or at
`--suite DIR`. Harness layer: it may import anything (docs/architecture.md).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from . import disasm_command

EXIT_DIFFERENT = 1
EXIT_USAGE = 2


def _suite(path: str | None):
    """Import the top-level `conformance` package (from --suite, or the checkout holding this package)."""
    root = Path(path).resolve().parent if path else Path(__file__).resolve().parent.parent
    if not (root / "conformance" / "scenarios.py").exists():
        raise SystemExit(f"hcqsim: no conformance suite at {root / 'conformance'} (run from a checkout, or --suite DIR)")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    import conformance.effects
    import conformance.reference
    import conformance.runner
    import conformance.scenarios
    return conformance


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


def cmd_conformance(args) -> int:
    suite = _suite(args.suite)
    scen = suite.scenarios
    chosen = [scen.get(n) for n in args.scenario] if args.scenario else scen.SCENARIOS
    target = args.target
    records, errors = {}, {}
    progress = Progress(len(chosen), enabled=not args.json)
    diffs: dict[str, list[str]] = {}
    ran = []
    t0 = time.perf_counter()
    for i, sc in enumerate(chosen):
        progress.show(i, sc["name"])
        try:
            effects, counts = suite.runner.run_scenario(sc, args.device, target)
        except Exception as e:  # a scenario that cannot run is a failure of that scenario, not of the command
            errors[sc["name"]] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            continue
        records[sc["name"]] = effects
        ran.append(sc["name"])
        if not args.no_reference:
            expected = suite.reference.expected_effects(sc, counts)
            diffs.setdefault(sc["name"], []).extend(f"reference: {d}" for d in suite.effects.differences(expected, effects))
    progress.show(len(chosen), "")
    device_name = args.device.split(":")[0]
    record = suite.effects.record_file(device_name, target if device_name == "sim" else _hw_target(args.device), records)
    compare_paths = list(args.compare or [])
    if not compare_paths and not args.no_golden:  # the three-way comparison: a hardware golden when there is one
        golden = Path(suite.__file__).parent / "golden" / f"AMD-{record['target']}.json"
        if golden.exists() and device_name != "AMD":
            compare_paths.append(str(golden))
    for path in compare_paths:
        other = suite.effects.load(path)
        label = os.path.basename(path)
        for name, ds in suite.effects.compare_files({"scenarios": {k: v for k, v in other["scenarios"].items()
                                                                   if k in records}}, {"scenarios": records}).items():
            diffs.setdefault(name, []).extend(f"{label}: {d}" for d in ds)
    if args.record:
        Path(args.record).write_text(suite.effects.dumps(record))
    failed = sorted(set(errors) | {n for n, d in diffs.items() if d})
    if args.json:
        print(json.dumps({"device": args.device, "target": record["target"], "scenarios": len(chosen),
                          "passed": len(chosen) - len(failed), "failed": failed, "errors": errors,
                          "differences": {n: d for n, d in diffs.items() if d},
                          "compared_with": ["reference"] * (not args.no_reference) + compare_paths},
                         sort_keys=True, indent=1))
    else:
        rows = []
        for sc in chosen:
            n = sc["name"]
            if n in errors:
                rows.append((n, "ERROR", errors[n]))
            elif diffs.get(n):
                more = f" (+{len(diffs[n]) - 1} more)" if len(diffs[n]) > 1 else ""
                rows.append((n, "FAIL", diffs[n][0] + more))
            else:
                rows.append((n, "pass", ""))
        print(_table(rows))
        against = ", ".join(["reference model"] * (not args.no_reference) + compare_paths) or "nothing"
        print(f"\n{len(chosen) - len(failed)}/{len(chosen)} scenarios pass on {args.device} ({record['target']}), "
              f"compared with {against}, in {time.perf_counter() - t0:.1f} s"
              + (f"; effects recorded in {args.record}" if args.record else ""))
    return EXIT_DIFFERENT if failed else 0


def _hw_target(spec: str) -> str:
    from .runtime import open_device
    return open_device(spec).target


def cmd_info(args) -> int:
    from .boundary import SYSFS_TOPOLOGY
    from .runtime import open_devices
    from .runtime.topology import parse_properties
    kw = {"target": args.target} if args.device.startswith("sim") else {}
    devs = open_devices(args.device, args.gpus, **kw)
    try:
        out = []
        for d in devs:
            p = d.node.props
            bank = parse_properties(d.os.read_text(f"{SYSFS_TOPOLOGY}/nodes/{d.node.node}/mem_banks/0/properties"))
            info = {"label": d.label, "target": d.target, "family": d.family, "sdma": d.sdma_version,
                    "emulated": bool(d.os.emulated), "vram_bytes": bank.get("size_in_bytes", 0),
                    "compute_queues": d.queue_count("compute"), "copy_queues": d.queue_count("copy"),
                    "sdma_engines": p.get("num_sdma_engines", 0),
                    "sdma_xgmi_engines": p.get("num_sdma_xgmi_engines", 0),
                    "sdma_queues_per_engine": p.get("num_sdma_queues_per_engine", 0),
                    "simd_count": p.get("simd_count", 0), "num_xcc": p.get("num_xcc", 1),
                    "wave_front_size": p.get("wave_front_size", 0), "drm_render_minor": p.get("drm_render_minor", 0)}
            out.append(info)
        if args.json:
            print(json.dumps(out, indent=1, sort_keys=True))
        else:
            for info in out:
                print(f"{info['label']}: {info['target']} ({info['family']}, {info['sdma']}), "
                      f"{'emulated' if info['emulated'] else 'hardware'}")
                print(f"  memory: {info['vram_bytes'] / (1 << 30):.1f} GiB VRAM (host visible)")
                print(f"  queues: {info['compute_queues']} compute, {info['copy_queues']} copy "
                      f"({info['sdma_engines']} SDMA engines + {info['sdma_xgmi_engines']} XGMI, "
                      f"{info['sdma_queues_per_engine']} queues each)")
                print(f"  shader: {info['simd_count']} SIMDs, {info['num_xcc']} XCC(s), wave{info['wave_front_size']}")
    finally:
        for d in devs:
            d.close()
    return 0


def cmd_trace(args) -> int:
    from . import trace_events
    suite = _suite(args.suite)
    sc = suite.scenarios.get(args.scenario)
    devs = suite.runner.open_for(sc, "sim", args.target)
    try:
        suite.runner.Run(sc, devs).run()
        events = []
        for i, d in enumerate(devs):
            gpu = d.os.system.gpus[d.index]
            events += trace_events.from_trace_lines(gpu.trace_lines(), pid=i, process=f"{d.label} {d.target}")
        trace_events.write(args.output, events)
    finally:
        for d in devs:
            d.close()
    print(f"{args.output}: {len(events)} trace events of scenario {sc['name']} "
          f"(open in https://ui.perfetto.dev or chrome://tracing)")
    return 0


def _version() -> str:
    from . import __version__
    return __version__


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hcqsim", description="hcqsim: emulated AMD GPU queues and the runtime over them")
    p.add_argument("--version", action="version", version=f"hcqsim {_version()}")
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("conformance", help="run the conformance scenarios and compare their effects")
    c.add_argument("--device", default="sim", help="sim (default), sim:N, AMD or AMD:N")
    c.add_argument("--target", default="gfx1100", choices=["gfx1100", "gfx942"], help="emulated target (sim)")
    c.add_argument("--record", metavar="FILE", help="write the effect records (canonical JSON) to FILE")
    c.add_argument("--compare", metavar="FILE", action="append",
                   help="compare with a recorded effect file (repeatable); default: conformance/golden/AMD-<target>.json "
                        "when it exists")
    c.add_argument("--json", action="store_true", help="print the result as JSON (no progress bar)")
    c.add_argument("--no-reference", action="store_true", help="do not compare with the reference model")
    c.add_argument("--no-golden", action="store_true", help="do not compare with a hardware golden file by default")
    c.add_argument("--suite", metavar="DIR", help="the conformance directory (default: the checkout's)")
    c.add_argument("scenario", nargs="*", help="only these scenarios (default: all)")
    c.set_defaults(fn=cmd_conformance)

    i = sub.add_parser("info", help="the topology as the runtime sees it")
    i.add_argument("--device", default="sim")
    i.add_argument("--gpus", type=int, default=1, help="how many GPUs (sim: the emulated system's size)")
    i.add_argument("--target", default="gfx1100", choices=["gfx1100", "gfx942"])
    i.add_argument("--json", action="store_true")
    i.set_defaults(fn=cmd_info)

    d = sub.add_parser("disasm", help="disassemble PM4 / SDMA streams, raw ISA or code objects")
    disasm_command.add_arguments(d)
    d.set_defaults(fn=disasm_command.run)

    t = sub.add_parser("trace", help="run one scenario on the emulator and write its timeline (trace-event JSON)")
    t.add_argument("scenario")
    t.add_argument("-o", "--output", required=True)
    t.add_argument("--target", default="gfx1100", choices=["gfx1100", "gfx942"])
    t.add_argument("--suite", metavar="DIR")
    t.set_defaults(fn=cmd_trace)

    from .native import command as native_command  # `hcqsim run`: hcqsim/native/command.py
    r = sub.add_parser("run", help="run an unmodified native ROCm program (rocminfo, HIP) on an emulated machine")
    native_command.add_arguments(r)
    r.set_defaults(fn=native_command.run)
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args, extra = p.parse_known_args(argv)
    if extra and args.command == "disasm" and not any(x.startswith("-") for x in extra):
        args.words = list(args.words) + extra  # hex words after an option (argparse stops at the first option)
    elif extra:
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.fn(args)
    except KeyError as e:  # an unknown scenario name
        print(f"hcqsim: {e.args[0]}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
