"""docs/fuzzing.md's pattern works as printed (issue 29): `Interleaver()` hands the host turns by default, and a
failure whose block offered the interleaving nothing to choose says so in its note."""
from __future__ import annotations

import pytest
from hypothesis import given

from hcqsim.runtime import open_device
from hcqsim.strategies import Interleaver, Interleaving, fuzz_settings, interleavings


def test_host_turns_are_on_by_default():
    assert Interleaver().host_turns is True


def _read_right_after_submit(chooser, choices):
    dev = open_device("sim", policy=chooser)
    try:
        a = dev.alloc(4096)
        done = dev.new_signal(0)
        with chooser.using(choices):
            dev.copy_queue(0).fill(a, 4, 4096).signal(done, 1).submit()
            assert a.view[0] == 4, "read before the fill"  # the bug: no done.wait(1) first
        done.wait(1)
    finally:
        dev.close()


def test_the_documented_pattern_as_printed_finds_a_read_right_after_submit():
    chooser = Interleaver()  # as printed: nothing switched on

    @fuzz_settings(max_examples=20)
    @given(interleavings())
    def prop(choices):
        _read_right_after_submit(chooser, choices)

    with pytest.raises(AssertionError, match="read before the fill"):
        prop()


def test_a_block_with_nothing_to_choose_says_so():
    chooser = Interleaver()
    chooser.host_turns = False  # every submit() drains the GPU: the read always sees the fill

    def planted(choices):
        with chooser.using(choices):
            dev.copy_queue(0).fill(a, 4, 4096).submit()
            assert a.view[0] == 0, "planted failure"

    dev = open_device("sim", policy=chooser)
    try:
        a = dev.alloc(4096)
        with pytest.raises(AssertionError) as caught:
            planted(Interleaving([(1, 3)] * 4, priority=7))
        note = "\n".join(caught.value.__notes__)
        assert "no interleaving was explored in this block: host_turns is off" in note
        chooser.host_turns = True
        with pytest.raises(AssertionError) as caught:  # in order: the host never took a turn
            planted(Interleaving([]))
        note = "\n".join(caught.value.__notes__)
        assert "no two activities were ever ready together and the host never took a turn" in note
    finally:
        dev.close()


def test_a_block_where_the_host_took_a_turn_has_no_such_warning():
    chooser = Interleaver()
    with pytest.raises(AssertionError) as caught:
        _read_right_after_submit(chooser, Interleaving([(1, 1)]))  # index 1 of (fill queue, host): the host
    note = "\n".join(caught.value.__notes__)
    assert "host took a turn" in note and "no interleaving was explored" not in note
