"""Ordinary ordering bugs in hand-written runtime code, fuzzed the way docs/fuzzing.md shows (an Interleaver policy,
`interleavings()`, the default profile): each buggy version must be found, each fixed version must stay clean.

Three bugs race queues released together by one host store; seven are written the usual way (submit in program
order) and need host/GPU and cross-GPU interleaving: with the asynchronous-dispatch engine (issue 21) a choice
may hand the host a turn (`Interleaver.host_turns`), so a doorbell's work can still be pending when the host
reads, submits the next queue or waits, and an interleaving's priority order ranks the host, every queue and
every GPU. All ten are found wherever the module runs (alone, after the rest of the suite, under xdist): the
search draws the same interleavings in every process history (tests/test_fuzz_history.py).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from hcqsim.runtime import open_devices
from hcqsim.strategies import Interleaver, fuzz_settings, interleavings

N = 4096
chooser = Interleaver()  # as docs/fuzzing.md prints it: host turns are on by default


# one work-item adds 1 to counter[0] atomically (the `inc` kernel is the plain load, add, store)
ATOMIC_INC_IR = """
declare i32 @llvm.amdgcn.workitem.id.x()
define amdgpu_kernel void @atomic_inc(ptr addrspace(1) %counter) {
entry:
  %old = atomicrmw add ptr addrspace(1) %counter, i32 1 monotonic, align 4
  ret void
}
"""


class Machine:
    """Two emulated GPUs under the chooser, buffers reused by every example (reset each time)."""

    def __init__(self):
        self.d0, self.d1 = open_devices("sim", 2, policy=chooser)
        self.a, self.b, self.c = (self.d0.alloc(N) for _ in range(3))
        self.p = self.d1.alloc(N)  # on GPU 1
        self.d1.map_to(self.p, self.d0)  # GPU 0's queues copy out of p, GPU 1's into a
        self.d0.map_to(self.a, self.d1)
        self._progs = {}

    def prog(self, name):
        if name not in self._progs:
            from hcqsim.compiler import compile_llvm
            from hcqsim.kernels import code_object
            target = self.d0.target
            code = compile_llvm(ATOMIC_INC_IR, target) if name == "atomic_inc" else code_object(name, target)
            self._progs[name] = self.d0.load_program(code, name)
        return self._progs[name]

    def reset(self):
        for buf in (self.a, self.b, self.c, self.p):
            buf.view[:N] = 0

    def close(self):
        self.d0.close()
        self.d1.close()


@pytest.fixture
def m():
    """A fresh machine per test, so what a search finds does not depend on the tests before it."""
    machine = Machine()
    yield machine
    machine.close()


def search(m, program) -> None:
    """docs/fuzzing.md's fuzzing loop over `program(m, signals)`; an AssertionError inside is a found race."""
    @fuzz_settings()
    @given(interleavings())
    def prop(choices):
        m.reset()
        sigs = [m.d0.new_signal(0) for _ in range(4)]
        try:
            with chooser.using(choices):
                program(m, sigs)
        finally:
            m.d0.synchronize()
            m.d1.synchronize()
            for s in sigs:
                m.d0.free_signal(s)

    prop()


def words(buf, n=4):
    return list(buf.view[:4 * n].view(np.uint32))


# -- the racing queues are released by one host store -----------------------------------------------------


def gated_fill_then_copy(m, s, fixed=False):
    """Copy queue 0 fills a; copy queue 1 copies a -> b. Both wait for the host's go; the copy must also wait
    for the fill's signal (the bug: it does not)."""
    go, done = s[0], s[1]
    m.d0.copy_queue(0).wait(go, 1).fill(m.a, 7, N).signal(done, 1).submit()
    q = m.d0.copy_queue(1).wait(go, 1)
    (q.wait(done, 1) if fixed else q).copy(m.b, m.a, N).signal(s[2], 1).submit()
    go.value = 1
    s[2].wait(1)
    assert words(m.b) == [7] * 4


def gated_overlapping_writers(m, s, fixed=False):
    """Two copy queues write overlapping ranges of c (fill 1 then fill 2 in program order); the second must wait
    for the first."""
    go, first = s[0], s[1]
    m.d0.copy_queue(0).wait(go, 1).fill(m.c, 1, N).signal(first, 1).submit()
    q = m.d0.copy_queue(1).wait(go, 1)
    (q.wait(first, 1) if fixed else q).fill(m.c.offset(0, 64), 2, 64).signal(s[2], 1).submit()
    go.value = 1
    s[2].wait(1)
    first.wait(1)
    assert words(m.c, 17) == [2] * 16 + [1]


def gated_fill_racing_copy_out(m, s, fixed=False):
    """A copy out of a (queue 0) and a fill of a (queue 1) on different queues: the fill must wait for the copy
    (write after read)."""
    go, copied = s[0], s[1]
    m.a.view[:16] = 5
    m.d0.copy_queue(0).wait(go, 1).copy(m.b, m.a, 16).signal(copied, 1).submit()
    q = m.d0.copy_queue(1).wait(go, 1)
    (q.wait(copied, 1) if fixed else q).fill(m.a, 9, 16).signal(s[2], 1).submit()
    go.value = 1
    s[2].wait(1)
    copied.wait(1)
    assert list(m.b.view[:16]) == [5] * 16


# -- written the usual way: submit in program order (need host turns) ----------------------------------


def copy_then_compute_read(m, s, fixed=False):
    """A copy queue fills a; the compute queue copies a -> b with no cross-queue wait."""
    m.d0.copy_queue(0).fill(m.a, 3, N).signal(s[0], 1).submit()
    q = m.d0.compute_queue(0)
    (q.wait(s[0], 1) if fixed else q).copy(m.b, m.a, N).signal(s[1], 1).submit()
    s[1].wait(1)
    assert words(m.b) == [3] * 4


def host_reads_right_after_submit(m, s, fixed=False):
    """The host reads b right after submit(), without waiting for the signal."""
    m.d0.copy_queue(0).fill(m.b, 4, N).signal(s[0], 1).submit()
    if fixed:
        s[0].wait(1)
    assert words(m.b) == [4] * 4


def signal_value_reused_across_rounds(m, s, fixed=False):
    """Two rounds signal the same value 1 on one signal: the second round's wait is satisfied by the first."""
    for rnd in (1, 2):
        value = rnd if fixed else 1
        m.d0.copy_queue(0).fill(m.a, rnd, N).signal(s[0], value).submit()
        m.d0.compute_queue(0).wait(s[0], value).copy(m.b, m.a, N).signal(s[1], rnd).submit()
        s[1].wait(rnd)
    assert words(m.b) == [2] * 4


def gpu0_reads_a_peer_copy_from_gpu1(m, s, fixed=False):
    """GPU 1's copy queue fills p (its memory); GPU 0 copies p -> b without waiting for it."""
    done = m.d1.new_signal(0)
    m.d1.map_to(done, m.d0)
    try:
        m.d1.copy_queue(0).fill(m.p, 6, N).signal(done, 1).submit()
        q = m.d0.copy_queue(0)
        (q.wait(done, 1) if fixed else q).copy(m.b, m.p, N).signal(s[0], 1).submit()
        s[0].wait(1)
        assert words(m.b) == [6] * 4
    finally:
        m.d1.synchronize()
        m.d1.free_signal(done)


def gpu1_reads_a_peer_copy_from_gpu0(m, s, fixed=False):
    """The same with the GPUs swapped: GPU 0 fills a, GPU 1 copies a -> p without waiting."""
    m.d0.map_to(s[0], m.d1)  # GPU 1 polls GPU 0's signal
    m.d0.copy_queue(0).fill(m.a, 8, N).signal(s[0], 1).submit()
    done = m.d1.new_signal(0)
    try:
        q = m.d1.copy_queue(0)
        (q.wait(s[0], 1) if fixed else q).copy(m.p, m.a, N).signal(done, 1).submit()
        done.wait(1)
        assert words(m.p) == [8] * 4
    finally:
        m.d1.free_signal(done)


def waits_on_the_wrong_signal(m, s, fixed=False):
    """The consumer waits for an earlier, unrelated signal (already set) instead of the producer's."""
    s[2].value = 1  # an earlier round's signal
    m.d0.copy_queue(0).fill(m.a, 11, N).signal(s[0], 1).submit()
    m.d0.compute_queue(0).wait(s[0] if fixed else s[2], 1).copy(m.b, m.a, N).signal(s[1], 1).submit()
    s[1].wait(1)
    assert words(m.b) == [11] * 4


def waits_on_the_previous_timeline_value(m, s, fixed=False):
    """After `run_async`-style timeline use, the host waits for the value before the one it just submitted."""
    sig, value = m.d0.next_timeline()
    m.d0.copy_queue(0).fill(m.b, 12, N).signal(sig, value).submit()
    m.d0.wait_value(sig, value if fixed else value - 1, "timeline")
    assert words(m.b) == [12] * 4


# -- more of the same, written the usual way: kernels, host writes, the wrong device ----------------------


def kernel_then_copy_out(m, s, fixed=False):
    """The compute queue increments a in a kernel; a copy queue copies a -> b without waiting for it."""
    m.a.view[:16] = np.full(4, 1, np.uint32).view(np.uint8)
    m.d0.compute_queue(0).exec(m.prog("inc"), [m.a, 4], 4, 64).signal(s[0], 1).submit()
    q = m.d0.copy_queue(0)
    (q.wait(s[0], 1) if fixed else q).copy(m.b, m.a, 16).signal(s[1], 1).submit()
    s[1].wait(1)
    s[0].wait(1)
    assert words(m.b) == [2] * 4


def copy_then_kernel_reads(m, s, fixed=False):
    """A copy queue fills a; the compute queue scales a -> b by 2 without waiting for the fill."""
    m.d0.copy_queue(0).fill(m.a, 3, N).signal(s[0], 1).submit()
    q = m.d0.compute_queue(0)
    (q.wait(s[0], 1) if fixed else q).exec(m.prog("scale"), [m.a, m.b, 2, 4], 4, 64).signal(s[1], 1).submit()
    s[1].wait(1)
    s[0].wait(1)
    assert words(m.b) == [6] * 4


def host_rewrites_the_input_of_a_pending_copy(m, s, fixed=False):
    """The host stages round 1 in a, submits a -> b, then stages round 2 in a before round 1's copy finished."""
    for rnd in (1, 2):
        m.a.view[:16] = np.full(4, rnd, np.uint32).view(np.uint8)
        m.d0.copy_queue(0).copy(m.b.offset(16 * rnd, 16), m.a, 16).signal(s[0], rnd).submit()
        if fixed:
            s[0].wait(rnd)
    s[0].wait(2)
    assert words(m.b, 12)[4:] == [1] * 4 + [2] * 4


def two_queues_write_one_range(m, s, fixed=False):
    """The compute queue fills c with 1, then a copy queue overwrites its first 64 bytes with 2 without waiting
    (write after write on two queues)."""
    m.d0.compute_queue(0).fill(m.c, 1, N).signal(s[0], 1).submit()
    q = m.d0.copy_queue(0)
    (q.wait(s[0], 1) if fixed else q).fill(m.c.offset(0, 64), 2, 64).signal(s[1], 1).submit()
    s[1].wait(1)
    s[0].wait(1)
    assert words(m.c, 17) == [2] * 16 + [1]


def host_waits_for_one_of_two_producers(m, s, fixed=False):
    """Two queues fill b and c; the host waits for b's signal only and reads both."""
    m.d0.copy_queue(0).fill(m.b, 13, N).signal(s[0], 1).submit()
    m.d0.copy_queue(1).fill(m.c, 14, N).signal(s[1], 1).submit()
    s[0].wait(1)
    if fixed:
        s[1].wait(1)
    assert words(m.b) == [13] * 4 and words(m.c) == [14] * 4
    s[1].wait(1)


def synchronizes_the_wrong_device(m, s, fixed=False):
    """GPU 1 fills p (its memory); the host synchronizes GPU 0 and reads p."""
    m.d1.copy_queue(0).fill(m.p, 15, N).submit()
    (m.d1 if fixed else m.d0).synchronize()
    assert words(m.p) == [15] * 4


def plain_and_atomic_increment_of_one_counter(m, s, fixed=False):
    """Two compute queues each add 1 to one counter: one with an atomic add, the other with the plain load, add,
    store of `inc` (the bug: it must be atomic too, or wait for the other)."""
    m.d0.compute_queue(0).exec(m.prog("atomic_inc"), [m.a], 1, 64).signal(s[0], 1).submit()
    q = m.d0.compute_queue(1)
    (q.wait(s[0], 1) if fixed else q).exec(m.prog("inc"), [m.a, 1], 1, 64).signal(s[1], 1).submit()
    s[0].wait(1)
    s[1].wait(1)
    assert words(m.a, 1) == [2]


GATED = [gated_fill_then_copy, gated_overlapping_writers, gated_fill_racing_copy_out]
IN_ORDER = [copy_then_compute_read, host_reads_right_after_submit, signal_value_reused_across_rounds,
               gpu0_reads_a_peer_copy_from_gpu1, gpu1_reads_a_peer_copy_from_gpu0, waits_on_the_wrong_signal,
               waits_on_the_previous_timeline_value, kernel_then_copy_out, copy_then_kernel_reads,
               host_rewrites_the_input_of_a_pending_copy, two_queues_write_one_range,
               host_waits_for_one_of_two_producers, synchronizes_the_wrong_device]
KERNEL_RACES = [plain_and_atomic_increment_of_one_counter]  # kernel against kernel: issue 29 item 3
BUGS = [pytest.param(b, id=b.__name__) for b in GATED + IN_ORDER + KERNEL_RACES]


@pytest.mark.parametrize("bug", BUGS)
def test_the_fuzzer_finds_the_bug(m, bug):
    # hypothesis raises an ExceptionGroup when it found several distinct failures (e.g. a wrong value and a wait
    # that never ends): each leaf is a finding with its own note
    with pytest.raises((AssertionError, ExceptionGroup)) as caught:
        search(m, bug)
    leaves = list(_leaves(caught.value))
    assert any(isinstance(e, AssertionError) for e in leaves)
    assert all("hcqsim interleaving of this failure" in "\n".join(getattr(e, "__notes__", [])) for e in leaves)


def _leaves(e):
    if isinstance(e, BaseExceptionGroup):
        for sub in e.exceptions:
            yield from _leaves(sub)
    else:
        yield e


@pytest.mark.parametrize("bug", BUGS)
def test_the_fixed_version_is_clean(m, bug):
    search(m, lambda m_, s: bug(m_, s, fixed=True))


def found_by_seed(m, program, seed: int) -> bool:
    """One random search of the default profile's size (hypothesis seed `seed`, not derandomized, no shrinking):
    did an example fail?"""
    from hypothesis import Phase
    from hypothesis import seed as hypothesis_seed

    @hypothesis_seed(seed)
    @fuzz_settings(derandomize=False, phases=[Phase.generate])
    @given(interleavings())
    def prop(choices):
        m.reset()
        sigs = [m.d0.new_signal(0) for _ in range(4)]
        try:
            with chooser.using(choices):
                program(m, sigs)
        finally:
            m.d0.synchronize()
            for s in sigs:
                m.d0.free_signal(s)

    try:
        prop()
    except AssertionError:
        return True
    return False


def test_the_kernel_race_is_found_by_most_random_seeds(m):
    """An atomic and a plain increment of one counter on two queues: only a change point inside the plain kernel,
    between its load and its store, shows the lost update (hcqsim.fuzz.interleaver._change_points). Issue 29 asks for 4 of 5
    random seeds within the default profile's 100 examples; measured 10 of 10 (first at examples 3-74)."""
    found = sum(found_by_seed(m, plain_and_atomic_increment_of_one_counter, seed) for seed in range(1, 6))
    assert found >= 4, f"found by {found} of 5 seeds"
