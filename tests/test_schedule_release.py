"""CompiledSchedule.release(): a finished schedule's own memory (state, kernargs, command buffers) goes back to
its devices for reuse -- the next compile takes it without allocation ioctls, peer mappings are undone first, the
released schedule refuses to run -- and the Fuzzer, which releases after each idle example, gives an example
the same result and the same interleaving on reused memory as on fresh memory."""
from __future__ import annotations

import re

import pytest

from hcqsim import kfd_uapi as K
from tests.counting_os import CountingOS
from hcqsim.runtime import open_devices
from hcqsim.runtime.schedule import Schedule, region
from hcqsim.strategies import Fuzzer, FuzzCase, Interleaving, sequential_effects




def two_device_copy(devs, a, b, c):
    s = Schedule(devs)
    s.copy(region(b, 0, 64), region(a, 0, 64))
    s.copy(region(c, 0, 64), region(b, 0, 64))  # c on device 1: a cross-device wait, peer-mapped state
    return s.compile()


def test_release_gives_the_memory_back_and_the_next_compile_reuses_it():
    devs = open_devices("sim", 2)
    try:
        a, b, c = devs[0].alloc(64), devs[0].alloc(64), devs[1].alloc(64)
        a.view[:] = 7
        first = two_device_copy(devs, a, b, c)
        first.run()
        own = list(first._state.values()) + list(first._kernarg_bufs.values())
        assert any(len(buf.mapped_on) > 1 for buf in own)  # the state buffers are peer-mapped
        first.release()
        assert all(not buf.live for buf in own)
        with pytest.raises(ValueError, match="released"):
            first.run()
        counting = CountingOS(devs[0].os)
        for d in devs:
            d.os = d.process.os = counting
        second = two_device_copy(devs, a, b, c)
        assert counting.counts.get(K.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, 0) == 0, counting.counts
        for buf in list(second._state.values()) + list(second._kernarg_bufs.values()):
            assert buf.mapped_on <= {d.gpu_id for d in devs}
        a.view[:] = 9
        second.run()
        assert bytes(c.view[:64]) == b"\x09" * 64
    finally:
        for d in devs:
            d.close()


def test_released_memory_is_mapped_only_where_its_next_user_maps_it():
    devs = open_devices("sim", 2)
    try:
        a, b, c = devs[0].alloc(64), devs[0].alloc(64), devs[1].alloc(64)
        s = two_device_copy(devs, a, b, c)
        s.run()
        own = [buf for buf in list(s._state.values()) + list(s._kernarg_bufs.values())
               + [b for v in s._variants.values() for b in v.buffers.values()] if buf.device is devs[0]]
        s.release()
        again = [devs[0].alloc(buf.size, uncached=True) for buf in own]
        assert {buf.va for buf in again} == {buf.va for buf in own}  # the freed buffers, reused
        for buf in again:  # none still mapped on device 1: a compiler's missing map_to still faults
            assert buf.mapped_on == {devs[0].gpu_id}, buf
    finally:
        for d in devs:
            d.close()


CASES = [  # (case, interleaving): a kernel, copies across devices, a prelude in flight, two runs
    (FuzzCase(2, (("kernel", "inc", [["d0b0", 8]], [], 4), ("copy", "d1b0", 0, "d0b0", 4, 20),
                  ("fill", "d0b1", 16, 16, 0x01020304)), prelude=((1, ("fill", "d1b1", 0, 32, 0xAABBCCDD)),),
              batch_limit=1), Interleaving([(1, 3), (0, 2), (2, 1)], priority=5)),
    (FuzzCase(1, (("copy", "d0b1", 0, "d0b0", 0, 40), ("kernel", "scale", [["d0b1", 0], ["d0b0", 16]], ["p0"], 3)),
              params=(("p0", 3),), runs=(((), ()), (("d0b0",), (("p0", 7),)))), Interleaving([(1, 1)], priority=0)),
    (FuzzCase(2, (("fill", "d1b1", 4, 8, 5), ("copy", "d0b0", 2, "d1b1", 0, 30))), Interleaving([], priority=11)),
]


def run_case(fz: Fuzzer, case, choices):
    fz.check(case, choices)  # raises RaceFound on a wrong result
    # dispatch numbers count a queue's dispatches since it was created (history, not this example)
    return re.sub(r"dispatch #\d+", "dispatch #N", fz.policy.steps_text())


def test_an_example_on_reused_memory_runs_as_on_fresh_memory():
    """Each case on a fresh Fuzzer, then all of them on one Fuzzer in both orders (its compiled memory reused from
    the example before): the same effects (the sequential meaning: check raises otherwise) and the same
    scheduling decisions, packet by packet."""
    fresh = {}
    for i, (case, choices) in enumerate(CASES):
        fz = Fuzzer("gfx1100", devices=2, host_turns=True)
        try:
            fresh[i] = run_case(fz, case, choices)
        finally:
            fz.close()
    for order in (range(len(CASES)), reversed(range(len(CASES)))):
        fz = Fuzzer("gfx1100", devices=2, host_turns=True)
        try:
            for i in order:
                case, choices = CASES[i]
                assert run_case(fz, case, choices) == fresh[i], f"case {i} after others"
        finally:
            fz.close()
