"""Signals: set and waited on by the CPU, by compute queues and by copy queues."""
import pytest


def test_cpu_sets_and_reads_a_signal(device):
    sig = device.new_signal(0)
    sig.value = 42
    assert sig.value == 42


def test_new_signal_starts_at_its_value(device):
    assert device.new_signal(7).value == 7


def test_compute_queue_sets_a_signal(device):
    sig = device.new_signal(0)
    device.compute_queue().signal(sig, 5).submit()
    sig.wait(5)
    assert sig.value == 5


def test_copy_queue_sets_a_signal(device):
    sig = device.new_signal(0)
    device.copy_queue().signal(sig, 9).submit()
    sig.wait(9)
    assert sig.value == 9


@pytest.mark.parametrize("engine", ["compute_queue", "copy_queue"])
def test_gpu_wait_is_released_by_a_cpu_write(device, engine):
    gate, done = device.new_signal(0), device.new_signal(0)
    getattr(device, engine)().wait(gate, 1).signal(done, 1).submit()
    assert done.value == 0  # the queue is stalled on the gate
    gate.value = 1
    done.wait(1)
    assert done.value == 1


def test_cpu_wait_returns_once_the_value_is_reached(device):
    sig = device.new_signal(0)
    device.compute_queue().signal(sig, 1).signal(sig, 2).signal(sig, 3).submit()
    sig.wait(3)
    assert sig.value == 3


def test_compute_waits_on_copy_and_copy_waits_on_compute(device):
    a, b, c = device.new_signal(0), device.new_signal(0), device.new_signal(0)
    device.compute_queue().wait(a, 1).signal(b, 1).submit()
    device.copy_queue().signal(a, 1).wait(b, 1).signal(c, 1).submit()  # one ring: a before the wait on b
    c.wait(1)
    assert (a.value, b.value, c.value) == (1, 1, 1)


@pytest.mark.parametrize("engine", ["compute_queue", "copy_queue"])
def test_timestamps_are_monotonic_on_one_queue(device, engine):
    sigs = [device.new_signal(0) for _ in range(4)]
    q = getattr(device, engine)()
    for s in sigs:
        q.timestamp(s)
    done = device.new_signal(0)
    q.signal(done, 1).submit()
    done.wait(1)
    stamps = [s.timestamp for s in sigs]
    assert stamps == sorted(stamps) and stamps[-1] > 0


def test_timestamps_are_ordered_across_queues_by_signals(device):
    first, second, gate, done = (device.new_signal(0) for _ in range(4))
    device.compute_queue().timestamp(first).signal(gate, 1).submit()
    device.copy_queue().wait(gate, 1).timestamp(second).signal(done, 1).submit()
    done.wait(1)
    assert second.timestamp >= first.timestamp > 0


def test_timestamp_microseconds_follow_the_100mhz_clock(device):
    sig, done = device.new_signal(0), device.new_signal(0)
    device.compute_queue().timestamp(sig).signal(done, 1).submit()
    done.wait(1)
    assert sig.timestamp_us == sig.timestamp / 100


def test_signal_values_are_limited_to_32_bits(device):
    with pytest.raises(ValueError, match="32 bits"):
        device.compute_queue().signal(device.new_signal(0), 1 << 32)


@pytest.mark.sim_only
def test_a_queue_waiting_on_its_own_later_signal_is_a_deadlock(device):
    a, b = device.new_signal(0), device.new_signal(0)
    device.copy_queue().wait(b, 1).signal(a, 1).submit()
    device.copy_queue().signal(b, 1).submit()  # behind the wait in the same ring: never reached
    if getattr(getattr(device.os, "system", None), "free_running", False):
        with pytest.raises(Exception, match="timed out"):  # free-running: as on hardware
            a.wait(1, timeout_ms=300)
        return
    with pytest.raises(Exception, match="deadlock"):
        a.wait(1)
