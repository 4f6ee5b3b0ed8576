"""Several hardware queues per engine: each index is its own KFD queue (ring, doorbell, EOP/CWSR)."""
import pytest

from hcqsim.targets import get_target


def test_each_queue_index_is_its_own_kfd_queue(device):
    sigs = [device.new_signal(0) for _ in range(4)]
    for i in range(2):
        device.compute_queue(i).signal(sigs[i], 1).submit()
        device.copy_queue(i).signal(sigs[2 + i], 1).submit()
    for s in sigs:
        s.wait(1)
    rings = [device.hardware_ring(e, i) for e in ("compute", "copy") for i in range(2)]
    assert len({r.queue_id for r in rings}) == 4
    assert len({r.doorbell for r in rings}) == 4
    assert len({r.ring_va for r in rings}) == 4


def test_queues_of_one_engine_wait_on_each_other(device):
    gate, done = device.new_signal(0), device.new_signal(0)
    device.compute_queue(1).wait(gate, 1).signal(done, 1).submit()  # blocked until queue 0 releases it
    device.compute_queue(0).signal(gate, 1).submit()
    done.wait(1)
    assert done.value == 1


def test_queue_counts_come_from_the_topology(device):
    p = device.node.props
    assert device.queue_count("compute") == p["num_cp_queues"]
    assert device.queue_count("copy") == p["num_sdma_engines"] * p["num_sdma_queues_per_engine"]
    with pytest.raises(ValueError, match="out of range"):
        device.compute_queue(device.queue_count("compute"))


@pytest.mark.sim_only
def test_copy_queues_spread_over_the_sdma_engines(device):
    gpu = device.os.system.gpus[device.index]
    for i in range(2):
        device.copy_queue(i).fill(device.alloc(4096), i, 4096).submit()
    device.synchronize()
    engines = {q.sdma_engine.index for q in gpu.queues if q.engine == "sdma"}
    assert engines == {0, 1}


def test_sdma_engine_counts_per_target():
    # amdgpu: gfx1100 (SDMA 6.0.0) has 2 instances; MI300X (SDMA 4.4.2) 16: KFD reports 2 PCIe + 14 XGMI
    assert (get_target("gfx1100").sdma_engines, get_target("gfx1100").sdma_xgmi_engines) == (2, 0)
    assert (get_target("gfx942").sdma_engines, get_target("gfx942").sdma_xgmi_engines) == (2, 14)
