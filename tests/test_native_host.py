"""The native host's own behaviour, without a ROCm stack: the deadlock watchdog (a queue blocked with nothing
changing ends the process with the machine's description, not a silent hang) and the exit status it uses."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from hcqsim.native.host import DEADLOCK_EXIT

BLOCKED_CLIENT = textwrap.dedent("""
    import time
    from hcqsim.native.build import interposer_path
    from hcqsim.native.host import NativeHost
    from hcqsim.runtime import open_device
    dev = open_device("sim", free_running=True)
    NativeHost(dev.os.system, interposer_path(), deadlock_timeout={timeout})
    sig = dev.new_signal(0)
    dev.compute_queue().wait(sig, 1).submit()  # nobody ever sets the signal
    {then}
    print("finished")
""")


FAULTED_CLIENT = textwrap.dedent("""
    import time
    from hcqsim.native.build import interposer_path
    from hcqsim.native.host import NativeHost
    from hcqsim.runtime import open_device
    dev = open_device("sim", free_running=True)
    NativeHost(dev.os.system, interposer_path(), deadlock_timeout=1.0)
    dev.copy_queue()._add([0x000000FF]).submit()  # an SDMA op no engine knows: the queue stops for good
    time.sleep(60)  # ... and the program waits for its work, as HIP does
    print("finished")
""")


def run_client(timeout: float, then: str) -> subprocess.CompletedProcess:
    code = BLOCKED_CLIENT.format(timeout=timeout, then=then)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_a_queue_a_fault_stopped_while_the_program_waits_is_reported_too():
    done = subprocess.run([sys.executable, "-c", FAULTED_CLIENT], capture_output=True, text=True, timeout=120)
    assert done.returncode == DEADLOCK_EXIT, done.stdout + done.stderr
    assert "finished" not in done.stdout
    assert "stopped by a fault: decode error" in done.stderr and "sdma" in done.stderr


def test_a_queue_blocked_forever_ends_the_program_with_the_machine_described():
    done = run_client(1.0, "time.sleep(60)")
    assert done.returncode == DEADLOCK_EXIT, done.stdout + done.stderr
    assert "finished" not in done.stdout
    assert "deadlock: 1 queue(s) or wave(s) waiting and nothing changed for 1 s" in done.stderr
    assert "WAIT_REG_MEM" in done.stderr and "awaited='(value & 0xffffffff) >= 0x1'" in done.stderr


def test_a_wait_the_host_ends_in_time_is_no_deadlock():
    done = run_client(3.0, "time.sleep(1); sig.value = 1; dev.synchronize()")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "finished" and "deadlock" not in done.stderr


def test_a_new_host_removes_the_sysfs_copies_of_processes_that_are_gone(tmp_path, monkeypatch):
    import os
    import tempfile

    from hcqsim.kfd import EmulatedSystem
    from hcqsim.native.build import interposer_path
    from hcqsim.native.host import SYSFS_PREFIX, NativeHost

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / f"{SYSFS_PREFIX}{2 ** 22 + 12345}-abc"  # above pid_max's default: no such process
    alive = tmp_path / f"{SYSFS_PREFIX}{os.getpid()}-abc"
    other = tmp_path / "unrelated"
    for d in (dead, alive, other):
        (d / "sys").mkdir(parents=True)
    with EmulatedSystem() as system:
        host = NativeHost(system, interposer_path())
        try:
            assert not dead.exists() and alive.exists() and other.exists()
            assert (tmp_path / os.path.basename(host.sysfs_root) / "sys/module/amdgpu/initstate").read_text() == "live\n"
        finally:
            host.close()
    assert not os.path.exists(host.sysfs_root)
