"""Every path of the `hcqsim` command ends in one line on stderr and a documented exit status, never a
traceback (issue 15 item 3; statuses in hcqsim/command_status.py). Device checks happen before any scenario runs.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hcqsim import __version__
from hcqsim.boundary import KFD_PATH
from hcqsim.cli import main
from hcqsim.command_status import EXIT_BROKEN_PIPE, EXIT_UNAVAILABLE, EXIT_USAGE

NO_KFD = not os.path.exists(KFD_PATH)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """main(argv) -> (status, stdout, stderr); argparse's own exits count as a status too."""
    try:
        status = main(list(argv))
    except SystemExit as e:
        status = e.code
    out, err = capsys.readouterr()
    return status, out, err


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def scenarios_ran(monkeypatch):
    """Records every scenario the runner starts (so a check can prove it came first)."""
    from hcqsim.cli import load_suite
    runner = load_suite().runner
    started = []
    original = runner.run_scenario
    monkeypatch.setattr(runner, "run_scenario", lambda sc, *a, **kw: started.append(sc["name"]) or original(sc, *a, **kw))
    return started


@pytest.mark.skipif(not NO_KFD, reason="this machine has /dev/kfd")
def test_conformance_on_amd_without_kfd_is_refused_before_any_scenario_runs(capsys, scenarios_ran):
    status, out, err = run(capsys, "conformance", "--device", "AMD")
    assert status == EXIT_UNAVAILABLE and out == "" and scenarios_ran == []
    assert one_line(err) == (f"hcqsim conformance: --device AMD: {KFD_PATH} not found; this machine has no AMD GPU "
                             f"driven by KFD (use --device sim)")


@pytest.mark.parametrize("argv, status, message", [
    (["conformance", "--device", "XYZ"], EXIT_USAGE,
     "hcqsim conformance: --device XYZ: device spec 'XYZ': expected sim, sim:N, AMD or AMD:N"),
    (["conformance", "--target", "gfx1100", "--compare", "missing.json", "kernel_iota"], EXIT_UNAVAILABLE,
     "hcqsim conformance: --compare missing.json: no such file"),
    (["conformance", "no_such_scenario"], EXIT_USAGE,
     "hcqsim conformance: no scenario 'no_such_scenario' (hcqsim conformance --list names them)"),
    (["conformance", "--target", "gfx1100", "--record", "/nonexistent/dir/r.json", "kernel_iota"], EXIT_UNAVAILABLE,
     "hcqsim conformance: cannot write /nonexistent/dir/r.json: directory /nonexistent/dir does not exist"),
    (["conformance", "--record", "r.json", "kernel_iota"], EXIT_USAGE,
     "hcqsim conformance: --record is about one configuration: add --target gfx1100 or --target gfx942 (and --aql "
     "for AQL compute queues); without them conformance runs all 4"),
    (["conformance", "--suite", "/nonexistent"], EXIT_UNAVAILABLE,
     "hcqsim conformance: --suite /nonexistent: no conformance suite there (scenarios.py missing)"),
    (["info", "--gpus", "0"], EXIT_USAGE, "hcqsim info: --gpus 0: show at least one GPU"),
    (["info", "--device", "sim:x"], EXIT_USAGE,
     "hcqsim info: --device sim:x: device spec 'sim:x': expected sim, sim:N, AMD or AMD:N"),
    (["trace", "kernel_iota", "-o", "/nonexistent/dir/x.json"], EXIT_UNAVAILABLE,
     "hcqsim trace: cannot write /nonexistent/dir/x.json: directory /nonexistent/dir does not exist"),
    (["trace", "no_such_scenario", "-o", "x.json"], EXIT_USAGE,
     "hcqsim trace: no scenario 'no_such_scenario' (hcqsim conformance --list names them)"),
    (["trace", "-o", "x.json"], EXIT_USAGE,
     "hcqsim trace: give a SCENARIO or a program after -- (e.g. hcqsim trace -o t.json -- python my_test.py)"),
    (["trace", "-o", "x.json", "--", "python", "/nonexistent/my_test.py"], EXIT_UNAVAILABLE,
     "hcqsim trace: trace --: no script /nonexistent/my_test.py"),
])
def test_a_bad_invocation_is_one_line_and_a_documented_status(capsys, scenarios_ran, tmp_path, monkeypatch,
                                                              argv, status, message):
    monkeypatch.chdir(tmp_path)
    got, out, err = run(capsys, *argv)
    assert (got, one_line(err)) == (status, message)
    assert scenarios_ran == [] and not (tmp_path / "x.json").exists()


@pytest.mark.skipif(not NO_KFD, reason="this machine has /dev/kfd")
def test_info_on_amd_without_kfd_is_one_line(capsys):
    status, out, err = run(capsys, "info", "--device", "AMD")
    assert status == EXIT_UNAVAILABLE and out == ""
    assert one_line(err).startswith(f"hcqsim info: --device AMD: {KFD_PATH} not found")


@pytest.mark.parametrize("argv", [["conformance", "--target", "gfx9000"], ["info", "--gpus", "two"],
                                  ["frobnicate"], ["conformance", "--no-such-option"], []])
def test_argparse_usage_errors_are_one_line_with_status_2(capsys, argv):
    status, out, err = run(capsys, *argv)
    assert status == EXIT_USAGE and out == ""
    assert "error:" in one_line(err)


@pytest.mark.parametrize("level", [[], ["conformance"], ["info"], ["trace"], ["disasm"]])
def test_version_on_every_subcommand_level(capsys, level):
    status, out, err = run(capsys, *level, "--version")
    assert (status, out.strip(), err) == (0, f"hcqsim {__version__}", "")


def test_conformance_list_names_every_scenario_with_what_it_checks(capsys):
    from hcqsim.cli import load_suite
    scenarios = load_suite().scenarios.SCENARIOS
    status, out, err = run(capsys, "conformance", "--list")
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == [s["name"] for s in scenarios]
    assert all(s["doc"] in line for s, line in zip(scenarios, lines))
    status, out, _ = run(capsys, "conformance", "--list", "--json")
    assert [s["name"] for s in json.loads(out)] == [s["name"] for s in scenarios]


def test_conformance_runs_on_aql_queues(capsys):
    status, out, err = run(capsys, "conformance", "--aql", "kernel_iota", "compute_queue_create_signal")
    assert status == 0, out + err
    assert "2/2 scenarios pass on sim (gfx1100, AQL)" in out


def test_hcqsim_log_and_v_set_the_logging_level(capsys, monkeypatch):
    status, _, err = run(capsys, "conformance", "kernel_iota")
    assert status == 0 and "INFO" not in err
    status, _, err = run(capsys, "-v", "conformance", "kernel_iota")
    assert status == 0 and "hcqsim INFO hcqsim.cli: scenario kernel_iota: ran in" in err
    monkeypatch.setenv("HCQSIM_LOG", "debug")
    status, _, err = run(capsys, "conformance", "kernel_iota")
    assert status == 0 and "hcqsim INFO hcqsim.cli: conformance suite:" in err
    monkeypatch.setenv("HCQSIM_LOG", "loud")
    status, _, err = run(capsys, "info")
    assert status == EXIT_USAGE
    assert one_line(err) == "hcqsim info: HCQSIM_LOG=loud: expected one of debug, info, warning, error"


def test_a_scenario_error_is_a_table_row_and_its_traceback_only_at_debug(capsys, monkeypatch):
    from hcqsim.cli import load_suite
    runner = load_suite().runner

    def broken(sc, *a, **kw):
        raise RuntimeError("planted failure\nsecond line")

    monkeypatch.setattr(runner, "run_scenario", broken)
    status, out, err = run(capsys, "conformance", "--target", "gfx1100", "kernel_iota")
    assert status == 1 and "ERROR   RuntimeError: planted failure" in out and "Traceback" not in out + err
    status, out, err = run(capsys, "conformance", "kernel_iota")  # the matrix: a column each, the first's reason
    assert status == 1 and "kernel_iota  ERROR    ERROR        ERROR   ERROR       gfx1100: RuntimeError: planted " \
        "failure" in out and "0/4 configurations pass" in out
    status, out, err = run(capsys, "-vv", "conformance", "--target", "gfx1100", "kernel_iota")
    assert status == 1 and "Traceback" in err and "planted failure" in err


def test_an_internal_error_is_one_line_with_status_4(capsys, monkeypatch):
    import hcqsim.info_command as info
    monkeypatch.setattr(info, "agent_info", lambda dev: {}["planted"])
    status, out, err = run(capsys, "info")
    assert status == 4
    assert one_line(err) == ("hcqsim info: internal error: KeyError: 'planted' (a bug in hcqsim; -vv logs the "
                             "traceback)")


def _subprocess(*argv: str, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.run([sys.executable, "-m", "hcqsim", *argv], text=True, env=env, **kw)


@pytest.mark.parametrize("argv", [["conformance", "--list"], ["info", "--gpus", "2"], ["conformance", "kernel_iota"]])
def test_a_closed_pipe_ends_quietly_with_status_141(argv):
    """`hcqsim ... | head -1` where head has gone: the reading end is closed before the command writes, so the
    first write fails (EPIPE) whatever the output's size."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        out = _subprocess(*argv, stdout=write_end, stderr=subprocess.PIPE)
    finally:
        os.close(write_end)
    assert out.returncode == EXIT_BROKEN_PIPE
    assert "Traceback" not in out.stderr and "Exception" not in out.stderr and "Broken" not in out.stderr


def test_trace_runs_the_users_own_program_and_writes_its_gpus_timeline(tmp_path):
    script = tmp_path / "my_test.py"
    script.write_text(
        "import sys\n"
        "from hcqsim.runtime import open_device\n"
        "dev = open_device('sim')\n"
        "sig = dev.new_signal(0)\n"
        "dev.copy_queue().fill(dev.alloc(4096), 7, 4096).signal(sig, 1).submit()\n"
        "sig.wait(1)\n"
        "dev.close()\n"
        "print('ran with', sys.argv[1:])\n")
    trace = tmp_path / "t.json"
    out = _subprocess("trace", "-o", str(trace), "--", "python", str(script), "a", "b")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "ran with ['a', 'b']\n" and "1 emulated GPU(s) created by" in out.stderr
    from hcqsim import trace_events
    doc = json.loads(trace.read_text())
    trace_events.validate(doc)
    names = " ".join(e.get("name", "") for e in doc["traceEvents"])
    assert "FILL" in names.upper() and "FENCE" in names.upper(), names


def test_trace_returns_the_programs_failure_and_still_writes_the_trace(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text("from hcqsim.runtime import open_device\nopen_device('sim')\nraise ValueError('boom')\n")
    trace = tmp_path / "t.json"
    out = _subprocess("trace", "-o", str(trace), "--", str(script))
    assert out.returncode == 1 and trace.exists()
    assert "ValueError: boom" in out.stderr and 'bad.py", line 3' in out.stderr and "trace_command" not in out.stderr


def test_trace_runs_pytest_on_the_users_tests_and_records_the_fixtures_gpus(tmp_path):
    (tmp_path / "test_mine.py").write_text(
        "def test_fill(device):\n"
        "    buf, sig = device.alloc(4096), device.new_signal(0)\n"
        "    device.copy_queue().fill(buf, 7, 4096).signal(sig, 1).submit()\n"
        "    sig.wait(1)\n")
    trace = tmp_path / "t.json"
    out = _subprocess("trace", "-o", str(trace), "--", "python", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                      str(tmp_path / "test_mine.py"), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed" in out.stdout and "1 emulated GPU(s) created by python -m pytest" in out.stderr
    names = " ".join(e.get("name", "") for e in json.loads(trace.read_text())["traceEvents"]).upper()
    assert "FILL" in names and "FENCE" in names
