"""The schedule fuzzer bites: every deliberately broken compiler rule (hcqsim.runtime.plan.MUTATIONS) is caught
by the default (CI) profile within its examples, shrunk to a few operations, and its report replays.

Each row says how small the shrunk case must be. All eleven are found by the search wherever the test runs
(alone, after the rest of the suite, under xdist: the search draws the same examples in every process history,
tests/test_fuzz_history.py). knowledge_from_current_state (a queue learning, through a second queue, of a third
queue's operation the second waited for only after the awaited point) and batch_split_drops_signal are reached
through the strategy's relay motif (hcqsim.strategies._relay); their hand-written programs, searched over
interleavings only, are caught too.
"""
from __future__ import annotations

import pytest
from hypothesis import given

from hcqsim.runtime import plan
from hcqsim.strategies import (FuzzCase, Fuzzer, RaceFound, fuzz_settings, interleavings, mutated, replay,
                               schedules)

# mutation -> at most this many operations after shrinking
MUTANTS = {
    "ignore_war": 3,
    "ignore_waw": 4,
    "range_end_inclusive": 5,
    "elide_cross_queue_wait": 3,
    "drop_cross_device_wait": 3,
    "wait_older_signal": 6,
    "knowledge_from_current_state": 6,
    "drop_timeline_sync": 2,
    "batch_split_drops_signal": 5,
    "no_patch_on_rebind": 2,
    "no_param_patch": 2,
}

# the relay motif's programs, written by hand: (case, an interleaving that exposed it when written)
HAND_WRITTEN = {
    # copy1 waits for compute0's #1 only; compute0 had meanwhile waited for copy0's fill #0. A compiler that takes
    # compute0's knowledge *now* (not at #1) believes copy1 is ordered after #0 and drops #4's wait: #4 reads
    # d0b0 before the fill when copy1 runs first
    "knowledge_from_current_state": (FuzzCase(2, (
        ("fill", "d0b0", 0, 16, 7), ("kernel", "inc", [["d0b1", 0]], [], 4),
        ("kernel", "add", [["d0b0", 0], ["d0b1", 0], ["d0b1", 16]], [], 4),
        ("copy", "d1b0", 0, "d0b1", 0, 16), ("copy", "d1b0", 0, "d0b0", 0, 16))), [(0, 24), (1, 24)]),
    # copy0's submits are [#0] [#2]; #1 (compute0) waits for #0, #2 waits for #1: without #0's signal at the end
    # of the first submit nothing ever releases #1
    "batch_split_drops_signal": (FuzzCase(1, (
        ("fill", "d0b0", 0, 32, 7), ("kernel", "inc", [["d0b0", 0]], [], 4),
        ("copy", "d0b0", 8, "d0b1", 0, 16)), batch_limit=1), []),
}


def test_every_mutation_has_a_row():
    assert set(MUTANTS) == set(plan.MUTATIONS)


@pytest.fixture
def fuzzer():
    """A fresh machine per test: what a search finds must not depend on which tests ran before on this worker
    (ring positions and timeline values change packet counts, so budgets cut elsewhere)."""
    fz = Fuzzer("gfx1100")
    yield fz
    fz.close()


@pytest.mark.parametrize("mutation", sorted(MUTANTS))
def test_a_broken_compiler_rule_is_caught_and_shrunk(fuzzer, mutation):
    bound = MUTANTS[mutation]
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
    assert len(report.case.ops) <= bound, report.text()
    check_report(report)


@pytest.mark.parametrize("mutation", sorted(HAND_WRITTEN))
def test_the_relay_mutants_are_caught_on_their_hand_written_program(fuzzer, mutation):
    """Given the program, the default profile's search over interleavings finds the mutant; the correct
    compiler stays clean under the same search."""
    case, _ = HAND_WRITTEN[mutation]

    def search(mutations):
        @fuzz_settings()
        @given(interleavings())
        def prop(choices):
            fuzzer.check(case, choices, mutations)
        prop()

    search(())
    with pytest.raises(RaceFound) as caught:
        search((mutation,))
    check_report(caught.value.report)


def check_report(report) -> None:
    text = report.text()
    for part in ("operations:", "compiled queues (describe()):", "first difference:",
                 "interleaving (queue/packet steps):", "packet trace of the failing run", "replay: "):
        assert part in text
    assert " ran " in report.steps  # queue/packet steps, not (index, budget) pairs
    assert report.trace and all(report.trace.values())
    assert report.expected != report.seen
    # the seed replays the same race on fresh devices
    again = replay(report.seed)
    assert again is not None and again.kind == report.kind
    if report.kind == "data":
        assert again.seen == report.seen


def test_mutations_are_off_unless_a_test_switches_them_on(device):
    from hcqsim.runtime import Schedule, region
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
