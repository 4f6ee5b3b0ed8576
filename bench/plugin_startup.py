"""What the auto-loaded pytest plugin costs a project that does not use hcqsim, as `name: value` lines.

A temporary project with its own conftest defining `--device` and one trivial test runs `pytest` in a subprocess,
with the plugin (as every project in an environment with hcqsim installed gets it) and with `-p no:hcqsim`
(the baseline). Runs alternate so machine load hits both alike; each figure is the fastest of the runs (the
least disturbed by other processes on a shared machine).

plugin_startup_ms_with / plugin_startup_ms_without: wall time of the whole pytest run (milliseconds).
plugin_startup_ms_added: their difference (what the plugin adds per run).
plugin_startup_ratio: with / without.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

CONFTEST = 'def pytest_addoption(parser):\n    parser.addoption("--device", default="cpu")\n'
TEST = 'def test_own_device(request):\n    assert request.config.getoption("--device") == "gpu0"\n'
RUNS = 15


def _project(root: str) -> None:
    with open(os.path.join(root, "conftest.py"), "w") as f:
        f.write(CONFTEST)
    with open(os.path.join(root, "test_own.py"), "w") as f:
        f.write(TEST)


def _run(root: str, *extra: str) -> float:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--device=gpu0", *extra],
                         cwd=root, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"pytest failed in the unrelated project:\n{out.stdout}{out.stderr}")
    return elapsed


def main() -> None:
    with tempfile.TemporaryDirectory() as root:
        _project(root)
        _run(root)  # warm the file cache and bytecode
        with_, without = [], []
        for _ in range(RUNS):
            with_.append(_run(root))
            without.append(_run(root, "-p", "no:hcqsim"))
    w, wo = min(with_) * 1e3, min(without) * 1e3
    print(f"plugin_startup_ms_with: {w:.0f}")
    print(f"plugin_startup_ms_without: {wo:.0f}")
    print(f"plugin_startup_ms_added: {w - wo:.0f}")
    print(f"plugin_startup_ratio: {w / wo:.2f}")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from timing import header, help_requested
    help_requested(__doc__)
    header("bench/plugin_startup.py")
    main()
