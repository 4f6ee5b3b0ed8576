"""A test that fails in a runtime wait shows the user's line and the runtime's message, not the wait loop's
frames (issue 15 item 5): runtime/device.py, the Device's parts runtime/allocation.py and runtime/copies.py, and
runtime/signal.py hide their frames from pytest for the runtime's own wait errors (DeadlockError, DeviceFault,
DeviceTimeout), and only for those."""
import pytest

pytest_plugins = ["pytester"]

QUIET = ("-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:hypothesispytest", "-p", "no:xdist")


def test_a_deadlocked_wait_reports_the_users_line_and_the_deadlock_not_the_wait_loop(pytester):
    pytester.makepyfile("""
def test_stuck(device):
    sig = device.new_signal(0)
    device.compute_queue().wait(sig, 5).submit()
    sig.wait(1)  # the user's line
""")
    result = pytester.runpytest_inprocess(*QUIET)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "sig.wait(1)  # the user's line" in out and "DeadlockError: deadlock: waiting for signal" in out
    assert "runtime/device.py" not in out and "runtime/signal.py" not in out
    assert "runtime/allocation.py" not in out and "runtime/copies.py" not in out
    assert "def wait_value" not in out and "deadline = time.monotonic()" not in out


def test_other_errors_from_the_runtime_keep_their_frames(pytester):
    pytester.makepyfile("""
def test_bad_range(device):
    buf = device.alloc(4096)
    device.copyin(buf, b"x" * 8192)
""")
    result = pytester.runpytest_inprocess(*QUIET)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "runtime/copies.py" in result.stdout.str()  # Device.copyin (runtime/device.py before the split)
