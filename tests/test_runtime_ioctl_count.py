"""The runtime's hot path makes only the driver calls it needs (counted at the OS boundary, not timed): once a
ring has wrapped, a submission whose ring space is already free (its old fence landed) polls for faults once,
as every submission does, and waits for nothing."""
from __future__ import annotations

import pytest

from hcqsim import kfd_uapi as K
from tests.counting_os import CountingOS
from hcqsim.runtime import open_device




@pytest.mark.parametrize("engine,aql", [("compute", False), ("copy", False), ("compute", True)])
def test_a_submission_into_free_ring_space_after_a_wrap_polls_once(engine, aql):
    dev = open_device("sim", aql=aql)
    try:
        sig = dev.new_signal(0)
        queue = dev.compute_queue if engine == "compute" else dev.copy_queue
        ring = dev.hardware_ring(engine, 0)
        v = 0
        while ring.put < 2 * ring.ring_size:  # wrapped: every later submission reclaims an older one's space
            v += 1
            queue().signal(sig, v).submit()
        dev.synchronize()
        counting = dev.os = dev.process.os = CountingOS(dev.os)
        queue().signal(sig, v + 1).submit()
        assert ring.reclaimed > 0 and (sig.value & 0xFFFFFFFF) == v + 1
        assert counting.counts.get(K.AMDKFD_IOC_WAIT_EVENTS, 0) == 1, counting.counts  # submit_packets' poll
    finally:
        dev.close()
