"""An SDMA ring wraps without breaking INDIRECT alignment: a compiled schedule's copy submission (cache sync,
NOP pad, INDIRECT, progress fence) run until the copy ring has wrapped several times, at whatever ring offset
the wrap falls, keeps every INDIRECT ending on an 8-dword ring boundary (facts 5.2), so every run copies."""
from __future__ import annotations

import numpy as np
import pytest

from hcqsim.runtime import open_device
from hcqsim.runtime.schedule import Schedule, region


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_compiled_copy_keeps_running_across_sdma_ring_wraps(target):
    dev = open_device("sim", target=target)
    try:
        a, b = dev.alloc(64), dev.alloc(64)
        s = Schedule(dev)
        s.copy(region(b, 0, 16), region(a, 0, 16))
        compiled = s.compile()
        ring = None
        wraps, last = 0, 0
        for i in range(4000):
            a.view[:16] = np.full(16, i % 251, np.uint8)
            compiled.run()
            dev.synchronize()
            assert b.view[:16].tobytes() == bytes([i % 251]) * 16, f"run {i}"
            ring = ring or dev.hardware_ring("copy", 0)
            now = ring.put // ring.ring_size
            wraps, last = wraps + (now != last), now
            if wraps >= 2:
                break
        assert wraps >= 2, "the copy ring never wrapped: the test did not test anything"
    finally:
        dev.close()
