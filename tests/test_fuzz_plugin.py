"""The pytest plugin's two schedule-fuzzing hooks (issue 16 item 4): `--sim-seed` seeds the emulated system (so
the random policy's choices) and shows in the header; `--hypothesis-profile hcqsim-<name>`, pytest's own
option from hypothesis' plugin, selects a fuzz profile that fuzz_settings() then follows."""
import pytest

pytest_plugins = ["pytester"]

QUIET = ("-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:xdist")


def test_sim_seed_reaches_the_emulated_system_and_the_header(pytester):
    pytester.makepyfile("def test_seed(device):\n"
                        "    assert device.os.system.gpus[0].seed == 7\n")
    result = pytester.runpytest_inprocess("--sim-seed=7", "--sim-policy=random", *QUIET)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["hcqsim: device sim, target gfx1100, policy random, sanitizer off, seed 7"])


@pytest.mark.parametrize("profile, examples", [("hcqsim-nightly", 3000), ("hcqsim-default", 100)])
def test_hypothesis_profile_option_selects_a_fuzz_profile(pytester, profile, examples):
    pytester.makepyfile("from hcqsim.strategies import fuzz_settings\n"
                        "def test_profile():\n"
                        f"    assert fuzz_settings().max_examples == {examples}\n")
    result = pytester.runpytest_inprocess(f"--hypothesis-profile={profile}", *QUIET)
    assert result.ret == 0, result.stdout.str()
