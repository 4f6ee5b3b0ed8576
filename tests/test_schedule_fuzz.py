"""Schedule fuzzing (hcqsim.strategies): compiled schedules mean what their operations mean one at a time, under
every interleaving the emulator's scheduler can be driven through; and the fuzzer bites: each deliberately
broken compiler rule (hcqsim.runtime.plan.MUTATIONS) is caught within the default example budget and shrunk to
a handful of operations, with a report that replays."""
from __future__ import annotations

import pytest
from hypothesis import given

from hcqsim.runtime import Schedule, open_device, plan, region
from hcqsim.strategies import (Fuzzer, Interleaver, RaceFound, fuzz_settings, interleavings, mutated, replay,
                               schedules, sequential_effects)


@pytest.fixture(scope="module")
def fuzzer():
    fz = Fuzzer("gfx1100")
    yield fz
    fz.close()


def test_compiled_schedules_equal_the_sequential_meaning_under_every_interleaving(fuzzer):
    @fuzz_settings()
    @given(schedules(), interleavings())
    def prop(case, choices):
        fuzzer.check(case, choices)

    prop()


# every mutation: caught by the default profile, shrunk to at most this many operations (+ in-flight prelude)
MUTATION_BOUNDS = {"ignore_war": 3, "elide_cross_queue_wait": 3, "wait_older_signal": 5, "drop_timeline_sync": 2}


@pytest.mark.parametrize("mutation", sorted(MUTATION_BOUNDS))
def test_a_broken_compiler_rule_is_caught_and_shrunk(fuzzer, mutation):
    reports = []

    @fuzz_settings()
    @given(schedules(), interleavings())
    def prop(case, choices):
        try:
            fuzzer.check(case, choices, (mutation,))
        except RaceFound as e:
            reports.append(e.report)
            raise

    with pytest.raises(RaceFound) as caught:
        prop()
    report = caught.value.report  # hypothesis re-raises the shrunk example last
    assert report is reports[-1]
    assert len(report.case.ops) <= MUTATION_BOUNDS[mutation] and len(report.case.prelude) <= 1
    text = report.text()
    assert "operations:" in text and "compiled queues (describe()):" in text and "first difference:" in text
    assert report.describe.startswith("schedule:")
    assert report.expected != report.seen
    # the seed replays the same race on fresh devices
    again = replay(report.seed)
    assert again is not None and again.kind == report.kind
    if report.kind == "data":
        assert again.seen == report.seen


def test_mutations_are_off_unless_a_test_switches_them_on(device):
    assert plan.active_mutations == frozenset()
    a, b = device.alloc(4096), device.alloc(4096)

    def compiled():
        s = Schedule(device)
        s.copy(b, a, 256)
        s.fill(region(a, 0, 256), 7)
        return s.compile()

    normal = compiled().describe()
    with mutated("ignore_war"):
        broken = compiled().describe()
    assert plan.active_mutations == frozenset()
    assert "WAR" in normal and "WAR" not in broken
    assert compiled().describe() == normal
    with pytest.raises(ValueError, match="unknown mutations"):
        with mutated("no_such_rule"):
            pass


def test_the_sequential_meaning_is_program_order():
    from hcqsim.strategies import FuzzCase
    case = FuzzCase(1, (("fill", "d0b0", 0, 8, 5), ("copy", "d0b1", 4, "d0b0", 0, 8), ("fill", "d0b0", 0, 4, 6)))
    eff = sequential_effects(case)
    assert eff["d0b0"][:8] == bytes([6, 0, 0, 0, 5, 0, 0, 0])
    assert eff["d0b1"][4:12] == bytes([5, 0, 0, 0, 5, 0, 0, 0])


# the README's ten-line example for users' own runtime code, as a test
chooser = Interleaver()


@fuzz_settings(max_examples=25)
@given(interleavings())
def test_users_point_the_interleavings_at_their_own_runtime_code(choices):
    dev = open_device("sim", policy=chooser)
    a, b = dev.alloc(4096), dev.alloc(4096)
    s = dev.new_signal(0)
    with chooser.using(choices):
        dev.copy_queue(0).fill(a, 9, 4096).signal(s, 1).submit()
        dev.compute_queue(0).wait(s, 1).copy(b, a, 4096).signal(s, 2).submit()
        s.wait(2)
    assert b.view[:4].tobytes() == bytes([9, 0, 0, 0])
    dev.close()


@pytest.mark.slow
def test_nightly_profile_on_both_targets():
    for target in ("gfx1100", "gfx942"):
        fz = Fuzzer(target)

        @fuzz_settings("nightly")
        @given(schedules(max_ops=10), interleavings())
        def prop(case, choices):
            fz.check(case, choices)

        try:
            prop()
        finally:
            fz.close()
