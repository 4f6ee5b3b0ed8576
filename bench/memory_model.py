"""The cache model's cost and verdicts (issue 17 item 4): the conformance suite's 77 scenarios (hwtests-like work:
copies, fills, signals, waits, kernels, faults) run under each memory model on both targets; prints `name: value`
lines: seconds per model, the ratios to coherent, whether every scenario's effects match the coherent ones, and
how many memory-model records were left.

    python3 bench/memory_model.py [--target gfx1100 gfx942] [--repeat 1]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conformance import runner, scenarios  # noqa: E402
from hcqsim.runtime import open_devices  # noqa: E402

MODELS = ("coherent", "report", "adversarial")


def run_all(target: str, model: str) -> tuple[float, dict, int]:
    """(seconds, effects per scenario, records left) of every scenario under one model."""
    effects, records = {}, 0
    start = time.perf_counter()
    for sc in scenarios.SCENARIOS:
        devs = open_devices("sim", sc.get("devices", 1), target=target, memory_model=model)
        try:
            r = runner.Run(sc, devs).run()
            effects[sc["name"]] = r.effects()
        finally:
            system = devs[0].os.system
            records += len(system.memory_reports)
            for rep in system.memory_reports[:3]:
                print(f"# {target} {model} {sc['name']}:\n# " + str(rep).replace("\n", "\n# "))
            for d in devs:
                d.close()
    return time.perf_counter() - start, effects, records


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", nargs="+", default=["gfx1100", "gfx942"])
    args = p.parse_args()
    for target in args.target:
        base = None
        for model in MODELS:
            secs, effects, records = run_all(target, model)
            if base is None:
                base = (secs, effects)
            same = sum(effects[k] == base[1][k] for k in effects)
            print(f"conformance_{target}_{model}_seconds: {secs:.2f}")
            print(f"conformance_{target}_{model}_vs_coherent: {secs / base[0]:.2f}")
            print(f"conformance_{target}_{model}_same_effects: {same}/{len(effects)}")
            print(f"conformance_{target}_{model}_records: {records}")


if __name__ == "__main__":
    main()
