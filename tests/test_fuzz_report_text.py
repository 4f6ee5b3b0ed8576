"""A user test's failure note is something a runtime author can act on (issue 29 item 4): each host turn names the
host line it happened at, unbounded turns say "until it blocks or ends" (not 2**62), dispatches are numbered
within the block, and a dispatch's register set-up is one line of the trace."""
from __future__ import annotations

import pytest

from hcqsim.kernels import code_object
from hcqsim.runtime import open_device
from hcqsim.strategies import Interleaver, Interleaving


@pytest.fixture(scope="module")
def setup():
    chooser = Interleaver()
    dev = open_device("sim", policy=chooser)
    prog = dev.load_program(code_object("inc", dev.target), "inc")
    yield chooser, dev, prog
    dev.close()


def failing_note(setup, choices) -> str:
    chooser, dev, prog = setup
    a, b = dev.alloc(4096), dev.alloc(4096)
    a.view[:4096] = 0
    b.view[:4096] = 0
    done, copied = dev.new_signal(0), dev.new_signal(0)
    try:
        with pytest.raises(AssertionError) as caught:
            with chooser.using(choices):
                dev.compute_queue(0).exec(prog, [a, 4], 4, 64).signal(done, 1).submit()
                dev.copy_queue(0).copy(b, a, 16).signal(copied, 1).submit()  # HOST LINE: no wait for the kernel
                copied.wait(1)
                done.wait(1)
                assert b.view[0] == 1, "copied before the kernel"
        return "\n".join(caught.value.__notes__)
    finally:
        dev.synchronize()
        for s in (done, copied):
            dev.free_signal(s)
        dev.free(a), dev.free(b)


CHOICES = Interleaving([(1, 1)] * 3, priority=5)  # the host goes on after the kernel's submit; the copy runs first


def test_host_turns_name_the_host_line(setup):
    note = failing_note(setup, CHOICES)
    turns = [ln for ln in note.splitlines() if "host took a turn" in ln]
    assert turns and all("tests/test_fuzz_report_text.py:" in ln for ln in turns), note
    assert any("# HOST LINE" in ln or ".copy(b, a, 16)" in ln for ln in turns), note


def test_unbounded_turns_and_dispatch_numbers_read_as_a_person_would(setup):
    for _ in range(2):  # dispatch numbers restart in every block (not counted since the device opened)
        note = failing_note(setup, CHOICES)
        assert str(1 << 62) not in note, note
        assert "waves of dispatch #1 (until it blocks or ends)" in note, note
        assert "dispatch #2" not in note


def test_a_dispatch_set_up_is_one_trace_line(setup):
    note = failing_note(setup, CHOICES)
    trace = note.split("packet trace")[1]
    assert "SET_SH_REG x9 (register set-up: COMPUTE_PGM_LO .. COMPUTE_PERFCOUNT_ENABLE" in trace, trace
    assert " SET_SH_REG count=" not in trace, trace
    assert "SET_SH_REG x9" in note.split("packet trace")[0]  # the step line too


def test_register_set_up_collapses_wherever_the_packets_came_from():
    """Ring and indirect-buffer lines alike (an IB line once crashed the note of a schedule fuzzer's failure)."""
    from hcqsim.strategies import _collapse_setup
    lines = ["  18 pm4_0    ring+0x0040 SET_SH_REG count=2 A=1 B=2", "  20 pm4_0    ib+0x10 SET_SH_REG count=1 C=1",
             "  22 pm4_0    SET_SH_REG count=1 D=1", "  24 pm4_0    ring+0x0050 DISPATCH_DIRECT count=3"]
    assert _collapse_setup(lines) == ["  18 pm4_0    ring+0x0040 SET_SH_REG x3 (register set-up: A .. D, 4 registers)",
                                      lines[3]]
    assert _collapse_setup(lines[:2]) == lines[:2]  # two are left as they are


def test_the_note_names_queues_buffers_signals_and_kernels(setup):
    note = failing_note(setup, CHOICES)
    steps, _, rest = note.partition("packet trace")
    assert "GPU 0 compute0 ran" in steps and "GPU 0 copy0 ran" in steps  # the runtime's queue names
    section = rest.split("where these addresses are (hcqsim runtime):")[1]
    assert "kernel inc +0x0" in section and "allocated at test_fuzz_report_text.py:" in section, section
    assert "signal" in section and "created at test_fuzz_report_text.py:" in section, section
