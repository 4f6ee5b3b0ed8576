"""Schedule fuzzing (hcqsim.strategies): compiled schedules mean what their operations mean one at a time, under
every interleaving the emulator's scheduler can be driven through, over the cases the strategy draws (byte
ranges, rebinding and parameter replays, several submits per queue, three devices, work in flight on every
timeline). That the fuzzer bites (broken compiler rules caught) is tests/test_schedule_mutants.py; ordinary
runtime bugs found, tests/test_runtime_races.py."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from hcqsim.runtime import Schedule, open_device, open_devices, region
from hcqsim.strategies import (ALT, KERNEL_WORDS, FuzzCase, Fuzzer, Interleaver, fuzz_settings, interleavings,
                               register_profiles, replay, schedules, sequential_effects)


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


def test_the_sequential_meaning_is_program_order_per_run_on_the_bound_buffers():
    case = FuzzCase(1, (("fill", "d0b0", 0, 8, 5), ("copy", "d0b1", 3, "d0b0", 0, 5), ("fill", "d0b0", 0, 4, "p0")),
                    params=(("p0", 6),), runs=(((), ()), (("d0b0",), (("p0", 9),))))
    eff = sequential_effects(case)
    assert eff["d0b0"][:8] == bytes([6, 0, 0, 0, 5, 0, 0, 0])
    assert eff["d0b1"][3:8] == bytes([5, 0, 0, 0, 5])  # byte-granular
    assert eff["d0b0" + ALT][:8] == bytes([9, 0, 0, 0, 5, 0, 0, 0])  # the second run's binding and parameter


def test_the_strategy_draws_what_breaks_compilers():
    """Over the default profile's examples: sizes around the middle of max_ops, byte-granular and unaligned
    ranges, rebinding and parameter replays, small batch limits, three devices, in-flight work on devices other
    than 0 writing another device's memory."""
    cases = []

    @fuzz_settings()
    @given(schedules())
    def collect(case):
        cases.append(case)

    collect()
    ops = [len(c.ops) for c in cases]
    assert 3 <= sum(ops) / len(ops) <= 6  # max_ops=8
    flat = [op for c in cases for op in c.ops]
    assert any(op[0] == "copy" and (op[2] % 4 or op[5] % 4) for op in flat)
    assert any(op[0] == "host_write" and (op[2] % 4 or len(op[3]) % 4) for op in flat)
    assert any(len(c.runs) > 1 and any(r for r, _ in c.runs) for c in cases)
    assert any(any(p for _, p in c.runs) for c in cases)
    assert {c.batch_limit for c in cases} >= {1, 2, 32}
    assert any(c.devices == 3 for c in cases)
    assert any(k > 0 and op[1][:2] != f"d{k}" for c in cases for k, op in c.prelude)
    # buffers spanning several SDMA chunks, and copies or fills longer than one chunk on them (kernels stay small)
    from hcqsim.engines.queue import COPY_CHUNK
    long_moves = [op for c in cases if c.buffer_bytes >= 3 * COPY_CHUNK for op in c.ops
                  if (op[0] == "fill" and op[3] > COPY_CHUNK) or (op[0] == "copy" and op[5] > COPY_CHUNK)]
    assert len(long_moves) >= 2
    assert all(op[4] <= KERNEL_WORDS for c in cases for op in c.ops if op[0] == "kernel")
    # the relay motif (a wait's knowledge at the awaited point vs now; a submit split after an awaited op)
    assert sum(_has_relay(c.ops) for c in cases) >= 5


def _has_relay(ops) -> bool:
    """ops hold the strategy's relay motif: a write, inc, add, two ops writing one range (copies or scales), inc."""
    for i in range(len(ops) - 5):
        w, inc, add, q1, q2, last = ops[i:i + 6]
        if w[0] in ("fill", "copy") and inc[:2] == ("kernel", "inc") and add[:2] == ("kernel", "add") \
                and q1[0] == q2[0] and (q1[1:3] == q2[1:3] if q1[0] == "copy" else q1[2][1] == q2[2][1]) \
                and last[:2] == ("kernel", "inc"):
            return True
    return False


def test_a_peer_copy_in_flight_on_another_device_timeline_is_waited_for():
    """The gap docs/schedule.md used to list: GPU 0's timeline still copies into GPU 1 memory when a schedule
    whose GPU 1 queue reads that memory starts. Every queue now starts after every schedule device's timeline."""
    d0, d1 = open_devices("sim", 2)
    try:
        src, dst, out = d0.alloc(4096), d1.alloc(4096), d1.alloc(4096)
        src.view[:16] = np.arange(16, dtype=np.uint8)
        gate = d0.new_signal(0)
        d1.map_to(dst, d0)
        q = d0.copy_queue(1).wait(gate, 1).copy(dst.offset(0, 16), src.offset(0, 16), 16)
        q.signal(*d0.next_timeline()).submit()  # in flight on GPU 0's timeline, held until the schedule runs
        s = Schedule([d0, d1])
        s.host(lambda: setattr(gate, "value", 1), name="open gate")
        s.copy(region(out, 0, 16), region(dst, 0, 16))  # a GPU 1 copy queue reads what GPU 0 is writing
        s.compile().run()
        assert out.view[:16].tobytes() == bytes(range(16))
    finally:
        d0.close()
        d1.close()


def test_host_writes_and_reads_follow_a_rebinding_and_other_host_code_refuses_one(device):
    a, b, a2, b2 = (device.alloc(4096) for _ in range(4))
    got = bytearray(4)
    s = Schedule(device)
    s.name(a, "a")
    s.name(b, "b")
    s.host_write(region(a, 0, 4), b"\x01\x02\x03\x04")
    s.copy(region(b, 0, 4), region(a, 0, 4))
    s.host_read(region(b, 0, 4), got)
    compiled = s.compile()
    compiled.run(buffers={"a": a2, "b": b2})
    assert a2.view[:4].tobytes() == b2.view[:4].tobytes() == bytes(got) == b"\x01\x02\x03\x04"
    assert a.view[:4].tobytes() == b"\x00" * 4  # the compiled buffer was not touched
    s2 = Schedule(device)
    s2.name(a, "a")
    s2.host(lambda: None, writes=[region(a, 0, 4)], name="mine")
    s2.fill(region(a, 0, 4), 1)
    with pytest.raises(ValueError, match=r"host operation #0 \(mine\) touches it through its own code"):
        s2.compile().run(buffers={"a": a2})


# docs/fuzzing.md's example for users' own runtime code, as a test
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


def test_a_user_test_failure_carries_the_steps_and_a_seed_that_replays_it():
    dev = open_device("sim", policy=chooser)
    a = dev.alloc(4096)
    s = dev.new_signal(0)

    def body(choices):
        with chooser.using(choices):
            dev.copy_queue(0).fill(a, 9, 4096).signal(s, 1).submit()
            s.wait(1)
            assert a.view[0] == 0, "planted failure"

    try:
        with pytest.raises(AssertionError) as caught:
            body([])
        note = "\n".join(caught.value.__notes__)
        assert "GPU 0 copy0 ran" in note and "CONST_FILL" in note and "packet trace" in note
        seed = note.split("replay(")[1].split(",")[0].strip("'")
        with pytest.raises(AssertionError, match="planted failure"):
            replay(seed, body)
    finally:
        dev.close()


def test_fuzz_profiles_are_registered_with_hypothesis_and_followed():
    from hypothesis import settings
    register_profiles()
    before = settings._current_profile
    try:
        settings.load_profile("hcqsim-nightly")
        assert fuzz_settings().max_examples == 3000
    finally:
        settings.load_profile(before)
    assert fuzz_settings().max_examples == 100


@pytest.mark.slow
def test_nightly_profile_on_both_targets():
    for target in ("gfx1100", "gfx942"):
        fz = Fuzzer(target)

        @fuzz_settings("nightly")
        @given(schedules(max_ops=12), interleavings())
        def prop(case, choices):
            fz.check(case, choices)

        try:
            prop()
        finally:
            fz.close()
