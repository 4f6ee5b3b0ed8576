"""The pytest plugin's options (issue 8 items 7 and 12): bad values are one usage line before any test runs,
and the header says which device, target, policy and sanitizer a run uses."""
import pytest

pytest_plugins = ["pytester"]

QUIET = ("-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:hypothesispytest", "-p", "no:xdist")
ONE_TEST = "def test_uses_the_device(device):\n    assert device.new_signal(0).value == 0\n"


@pytest.mark.parametrize("option", ["--sim-target=gfx9999", "--sim-policy=fifo"])
def test_an_unknown_sim_option_value_is_a_one_line_usage_error(pytester, option):
    pytester.makepyfile(ONE_TEST)
    result = pytester.runpytest_inprocess(option, *QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert len(errors) == 1 and errors[0].startswith(f"ERROR: {option}:"), result.errlines


def test_the_header_shows_device_target_policy_and_sanitizer(pytester):
    pytester.makepyfile(ONE_TEST)
    result = pytester.runpytest_inprocess("--sim-target=gfx942", "--sim-policy=random", *QUIET)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["hcqsim: device sim, target gfx942, policy random, sanitizer off"])


def test_device_sim_alone_is_the_default_and_adds_no_header_line(pytester):
    """docs/testing.md, "The header line": only an option that differs from its default adds the line."""
    pytester.makepyfile(ONE_TEST)
    result = pytester.runpytest_inprocess("--device=sim", *QUIET)
    assert result.ret == 0
    assert [line for line in result.outlines if line.startswith("platform ")]  # the header was printed
    assert not [line for line in result.outlines if line.startswith("hcqsim:")]


def test_sim_sanitize_gives_tests_a_sanitizing_device(pytester):
    pytester.makepyfile("def test_it(device):\n    assert device.sanitize\n")
    assert pytester.runpytest_inprocess("--sim-sanitize", *QUIET).ret == 0
