"""The pytest plugin lives beside other projects (issue 15 item 2): pytest loads it in every project of an
environment where hcqsim is installed, so a project that defines its own `--device` keeps it, a run that never
asks for the fixtures builds no emulator (and imports neither the runtime nor the emulator), and hcqsim stays
reachable through its prefixed option names. Failure reports say whether the sanitizer was on (item 5)."""
import re

import pytest

pytest_plugins = ["pytester"]

QUIET = ("-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:hypothesispytest", "-p", "no:xdist")
OWN_DEVICE = """
def pytest_addoption(parser):
    parser.addoption("--device", default="cpu", help="this project's own device")
    parser.addoption("--aql", action="store_true", help="this project's own flag")
"""
NOTHING_LOADED = """
import sys

def test_hcqsim_loaded_nothing(request):
    assert request.config.getoption("--device") == "{expected}"
    loaded = sorted(m for m in sys.modules if m.startswith(("hcqsim.runtime", "hcqsim.kfd", "hcqsim.gpu",
                                                           "hcqsim.engines", "hcqsim.shader", "numpy")))
    assert loaded == []
"""


def hcqsim_output(out: str) -> list[str]:
    """What the plugin itself prints: its header line and its report sections."""
    return re.findall(r"hcqsim(?::| machine state| sanitizer).*", out)


def test_a_project_with_its_own_device_option_keeps_it_and_loads_nothing_of_hcqsim(pytester):
    pytester.makeconftest(OWN_DEVICE)
    pytester.makepyfile(NOTHING_LOADED.format(expected="gpu0"))
    result = pytester.runpytest_subprocess("--device=gpu0", *QUIET)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    assert hcqsim_output(result.stdout.str()) == []  # no header line, no section


def test_a_project_without_a_device_option_gets_hcqsims_and_still_builds_nothing(pytester):
    pytester.makepyfile(NOTHING_LOADED.format(expected="sim"))
    result = pytester.runpytest_subprocess(*QUIET)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    assert hcqsim_output(result.stdout.str()) == []


def test_the_prefixed_names_reach_hcqsim_beside_a_projects_own_options(pytester):
    pytester.makeconftest(OWN_DEVICE)
    pytester.makepyfile("""
def test_both(request, device):
    assert request.config.getoption("--device") == "gpu0" and request.config.getoption("--aql")
    assert device.target == "gfx942" and not device.aql and device.sanitize
""")
    result = pytester.runpytest_inprocess("--device=gpu0", "--aql", "--hcqsim-device=sim", "--sim-target=gfx942",
                                          "--hcqsim-sanitize", *QUIET)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["hcqsim: device sim, target gfx942, policy run_to_block, sanitizer on"])


def test_a_usage_error_names_the_option_as_the_user_typed_it(pytester):
    pytester.makeconftest(OWN_DEVICE)
    pytester.makepyfile("def test_x(): pass\n")
    result = pytester.runpytest_inprocess("--hcqsim-device=XYZ", *QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("ERROR: --hcqsim-device=XYZ: device spec 'XYZ'"), errors


def test_the_short_alias_is_the_name_in_messages_where_it_is_hcqsims(pytester):
    pytester.makepyfile("def test_x(): pass\n")
    result = pytester.runpytest_inprocess("--device=XYZ", *QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.errlines if line.strip()][0].startswith("ERROR: --device=XYZ:")


BLOCKED = """
import pytest

def test_stuck(device):
    sig = device.new_signal(0)
    device.compute_queue().wait(sig, 7).submit()
    assert sig.value == 7, "the queue never ran"
"""


def test_a_failed_sim_test_reports_the_machine_as_a_table_and_that_the_sanitizer_was_off(pytester):
    pytester.makepyfile(BLOCKED)
    result = pytester.runpytest_inprocess(*QUIET)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "hcqsim machine state" in out and "blocked waits:" in out
    result.stdout.re_match_lines([r"\s+GPU\s+queue\s+engine\s+state\s+rptr\s+wptr",
                                  r"\s+GPU 0 \(gpu_id \d+\)\s+\S+\s+pm4\s+waiting\s+0x[0-9a-f]+\s+0x[0-9a-f]+",
                                  r"\s+GPU 0 \(gpu_id \d+\)\s+\S+\s+0x[0-9a-f]+\s+0x[0-9a-f]+\s+.*7.*\s+0x0"],
                                 consecutive=False)
    assert "hcqsim sanitizer" in out and "off: a GPU access to freed memory" in out and "--sim-sanitize" in out


def test_the_sanitizer_note_says_on_when_it_was_on(pytester):
    pytester.makepyfile(BLOCKED)
    result = pytester.runpytest_inprocess("--sim-sanitize", *QUIET)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "on: a GPU access to freed memory or a freed signal would have been a VM fault" in result.stdout.str()


def test_a_failing_test_that_never_used_the_fixtures_gets_no_hcqsim_section(pytester):
    pytester.makepyfile("def test_x():\n    assert 1 == 2\n")
    result = pytester.runpytest_subprocess(*QUIET)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert hcqsim_output(result.stdout.str()) == []


def test_with_autoload_off_a_project_opts_in_through_pytest_plugins_and_gets_the_short_names(pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeconftest('pytest_plugins = ["hcqsim.pytest_plugin"]\n')
    pytester.makepyfile("def test_it(device):\n    assert device.target == 'gfx942'\n")
    result = pytester.runpytest_subprocess("--device=sim", "--sim-target=gfx942", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
