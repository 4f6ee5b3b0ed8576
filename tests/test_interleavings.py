"""The scheduler hook for interleaving fuzzing: hypothesis draws every scheduling choice (which ready queue,
how many packets) through `ExplicitChoices`, and can then find races that one fixed schedule hides."""
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hcqsim import EmulatedGPU, pm4, sdma
from hcqsim.gpu import ExplicitChoices

FAST = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def _two_queues(choices, racy: bool) -> int:
    """A compute queue and a copy queue, both gated by a CPU write. The copy queue reads `x`; in the race-free
    version it first waits for the compute queue's signal that x is final."""
    with EmulatedGPU(seed=0, autorun=False, policy=ExplicitChoices(lambda n: choices.draw(
            st.tuples(st.integers(0, n - 1), st.integers(1, 3))))) as gpu:
        mem = gpu.alloc(4096)
        gate, x, done, out = mem.va, mem.va + 8, mem.va + 16, mem.va + 24
        compute, copy = gpu.compute_queue(), gpu.sdma_queue()
        compute.submit(pm4.wait_reg_mem(gate, 1) + pm4.write_data(x, [1]) + pm4.write_data(x, [2])
                       + pm4.release_mem(done, 1, data_sel=1))
        copy.submit(sdma.poll_regmem(gate, 1) + ([] if racy else sdma.poll_regmem(done, 1))
                    + sdma.copy_linear(out, x, 4))
        mem.u32()[0] = 1  # open the gate: both queues are ready at the same progress point
        gpu.run()
        assert not gpu.faults and not gpu.blocked()
        return int(mem.u32()[6])


@FAST
@given(st.data())
def test_a_synchronised_reader_sees_the_final_value_under_every_interleaving(data):
    assert _two_queues(data, racy=False) == 2


def test_interleavings_expose_an_unsynchronised_read():
    seen = set()

    @FAST
    @given(st.data())
    def explore(data):
        seen.add(_two_queues(data, racy=True))

    explore()
    assert seen >= {0, 2}  # copied before the first write and after the last one, depending on the schedule
