"""Interleaved A/B runs of a bench script: `--against REV` runs this tree's script on REV's hcqsim (extracted with
git archive; the script puts PACKAGE_ROOT first on sys.path) and on this tree's, alternately (A B A B ...), each run a fresh process, and prints every `name: value` line of each
run with the load average, then `name[new/baseline]` ratios of the best of each. On a shared machine the ratios
are what to compare (both sides saw the same load).

    python3 bench/emulator.py --against main --only pm4,sdma
"""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE_ROOT = os.environ.get("AB_TREE", ROOT)  # the hcqsim a bench script measures (another tree's under --against)
LOWER_IS_BETTER = ("_s", "_us", "_ms", "_median", "_p90", "_percent")


def tree(rev: str) -> str:
    """REV's files, extracted once into /tmp (the bench scripts of REV run against REV's hcqsim)."""
    base = f"/tmp/hcqsim-bench-{subprocess.run(['git', '-C', ROOT, 'rev-parse', '--short', rev], check=True, capture_output=True, text=True).stdout.strip()}"
    if not os.path.exists(base):
        os.makedirs(base)
        archive = subprocess.run(["git", "-C", ROOT, "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", base], input=archive, check=True)
    return base


def against(script: str, rev: str, args: list[str], rounds: int = int(os.environ.get("AB_ROUNDS", "3"))) -> None:
    """Run `script args` (a path relative to the checkout) on REV and on this tree, interleaved, and compare."""
    base = tree(rev)
    results: dict[str, dict[str, list[float]]] = {"baseline": {}, "new": {}}
    for r in range(rounds):
        for who, root in (("baseline", base), ("new", ROOT)):
            load = os.getloadavg()[0]  # this tree's script, measuring the hcqsim of `root` (PACKAGE_ROOT)
            out = subprocess.run([sys.executable, os.path.join(ROOT, script), *args],
                                 env={**os.environ, "PYTHONPATH": root, "AB_TREE": root}, cwd=root,
                                 check=True, capture_output=True, text=True).stdout
            for line in out.splitlines():
                name, sep, value = line.partition(": ")
                try:
                    number = float(value.split()[0])
                except (ValueError, IndexError):
                    continue
                results[who].setdefault(name, []).append(number)
                print(f"{name}[{who} {rev if who == 'baseline' else 'HEAD'}, round {r}]: {value}  (load: {load:.1f})")
    for name, new in results["new"].items():
        old = results["baseline"].get(name)
        if not old:
            continue
        lower = name.endswith(LOWER_IS_BETTER) and not name.endswith("_per_s")
        pick = min if lower else max
        print(f"{name}[new/baseline]: {pick(new) / max(pick(old), 1e-12):.2f}  (best of {len(new)} each: "
              f"{pick(new):.4g} vs {pick(old):.4g}{'; lower is better' if lower else ''})")


def main_or_against(script: str, main) -> None:
    """The `__main__` of a bench script: `--against REV` compares (the other arguments go to each run), else
    `main(argv)`."""
    from timing import header, help_requested
    help_requested(sys.modules["__main__"].__doc__)
    header(script)
    argv = sys.argv[1:]
    if "--against" in argv:
        i = argv.index("--against")
        rev = argv[i + 1]
        against(script, rev, argv[:i] + argv[i + 2:])
    else:
        main(argv)
