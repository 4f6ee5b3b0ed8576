"""The scheduler hook for interleaving fuzzing: hypothesis draws every scheduling choice (which ready queue,
how many packets) through `ExplicitChoices`, and can then find races that one fixed schedule hides."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hcqsim import EmulatedGPU, pm4, sdma
from hcqsim.gpu import ExplicitChoices
from hcqsim.strategies import integers

FAST = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def _two_queues(choices, racy: bool) -> int:
    """A compute queue and a copy queue, both gated by a CPU write. The copy queue reads `x`; in the race-free
    version it first waits for the compute queue's signal that x is final."""
    with EmulatedGPU(seed=0, autorun=False, policy=ExplicitChoices(lambda n: choices.draw(
            st.tuples(integers(0, n - 1), integers(1, 3))))) as gpu:
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


# -- the schedule fuzzer's interleavings drive every choice the engine offers -------------------------------


def test_interleavings_choose_which_gpu_steps_first():
    """Two GPUs released by one host store: each copies the other's flag, then sets its own. Under some drawn
    interleavings GPU 0 runs first (GPU 1 copies a set flag), under others GPU 1 does: cross-GPU order is a choice
    (a priority seed's `device_order`), not always GPU 0 first."""
    from hcqsim.runtime import open_devices
    from hcqsim.strategies import Interleaver, fuzz_settings, interleavings
    chooser = Interleaver()
    d0, d1 = open_devices("sim", 2, policy=chooser)
    mem = d0.alloc(4096)
    d0.map_to(mem, d1)
    gate, flags, seen = mem.offset(0, 8), [mem.offset(64 * k, 4) for k in (1, 2)], [mem.offset(64 * k, 4) for k in (3, 4)]
    orders = set()
    try:
        @fuzz_settings(max_examples=30)
        @given(interleavings())
        def explore(choices):
            mem.view[:512] = 0
            go = d0.new_signal(0)
            d0.map_to(go, d1)
            with chooser.using(choices):
                for me, dev in enumerate((d0, d1)):
                    dev.copy_queue(0).wait(go, 1).copy(seen[me], flags[1 - me], 4).fill(flags[me], 1, 4).submit()
                go.value = 1
                d0.synchronize()
                d1.synchronize()
            orders.add((int(seen[0].view[0]), int(seen[1].view[0])))
            d0.free_signal(go)

        explore()
    finally:
        d0.close()
        d1.close()
    assert {(0, 1), (1, 0)} <= orders  # GPU 0 first; GPU 1 first


def test_interleavings_choose_the_order_inside_a_dispatch():
    """An in-place reverse over four workgroups reads what other workgroups already wrote: its result depends on
    the workgroup launch order and wave issue order, which a priority seed chooses (the in-order default gives one
    result)."""
    from hcqsim.kernels import code_object
    from hcqsim.runtime import open_device
    from hcqsim.strategies import Interleaver, fuzz_settings, interleavings
    chooser = Interleaver()
    dev = open_device("sim", policy=chooser)
    n = 256
    x = dev.alloc(4 * n)
    prog = dev.load_program(code_object("reverse", dev.target), "reverse")
    results = set()
    try:
        @fuzz_settings(max_examples=30)
        @given(interleavings())
        def explore(choices):
            x.view[:4 * n] = np.arange(n, dtype=np.uint32).view(np.uint8)
            with chooser.using(choices):
                dev.compute_queue(0).exec(prog, [x, x, n], n, 64).submit()
                dev.synchronize()
            results.add(x.view[:4 * n].tobytes())

        explore()
    finally:
        dev.close()
    assert len(results) >= 2
