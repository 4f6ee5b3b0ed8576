"""Emulator throughput, as `name: value` lines measured against baselines taken in the same run.

pm4_packets_per_s_<mix>: PM4 packets executed per second (NOP, WRITE_DATA, RELEASE_MEM and a mix).
sdma_copy_vs_numpy_<size>: SDMA COPY_LINEAR throughput divided by a plain numpy copy of the same size
(numpy copying between the same two buffers).
Targets (issue 2): >= 200k PM4 packets/s; SDMA copy >= 0.5x numpy at >= 1 MiB.
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import best  # noqa: E402

from hcqsim import EmulatedGPU, pm4, sdma


def pm4_rate(gpu: EmulatedGPU, packets: list[list[int]], batches: int = 20) -> float:
    """Packets per second: pre-built batches submitted through the ring, executed by the CP."""
    q = gpu.compute_queue(ring_size=1 << 20)
    batch = [d for p in packets for d in p]
    def run():
        for _ in range(batches):
            q.submit(batch)
    seconds = best(run, 3)
    return len(packets) * batches / seconds


def sdma_vs_numpy(gpu: EmulatedGPU, size: int) -> float:
    src, dst = gpu.alloc(size), gpu.alloc(size)
    src.view[:] = np.arange(size, dtype=np.uint64).astype(np.uint8)
    q = gpu.sdma_queue()
    limit = gpu.target.sdma_copy_max
    cmds = [d for off in range(0, size, limit) for d in sdma.copy_linear(dst.va + off, src.va + off,
                                                                          min(limit, size - off))]
    repeat = max(5, min(400, (256 << 20) // size))
    t_sdma = best(lambda: q.submit(cmds), repeat)
    assert np.array_equal(dst.view, src.view)
    # the baseline copies the same bytes between the same two buffers: the ratio is the emulator's overhead
    # (submit, decode, checks), not a difference between kinds of host memory
    t_numpy = best(lambda: np.copyto(dst.view, src.view), repeat)
    gpu.free(src), gpu.free(dst)
    return t_numpy / t_sdma


def main() -> None:
    with EmulatedGPU(target="gfx1100", seed=0, trace_limit=1000) as gpu:
        sig = gpu.alloc(4096)
        n = 2000
        mixes = {
            "nop": [pm4.nop(2)] * n,
            "write_data": [pm4.write_data(sig.va + 8 * (i % 64), [i]) for i in range(n)],
            "release_mem": [pm4.release_mem(sig.va + 8 * (i % 64), i, data_sel=1) for i in range(n)],
        }
        mixes["mixed"] = [p for i in range(n // 3) for p in (mixes["nop"][i], mixes["write_data"][i],
                                                             mixes["release_mem"][i])]
        for name, packets in mixes.items():
            print(f"pm4_packets_per_s_{name}: {pm4_rate(gpu, packets):.0f}")
    for label, size in (("4KiB", 4 << 10), ("1MiB", 1 << 20), ("64MiB", 64 << 20)):
        with EmulatedGPU(target="gfx1100", seed=0, trace_limit=1000) as gpu:
            print(f"sdma_copy_vs_numpy_{label}: {sdma_vs_numpy(gpu, size):.2f}")


if __name__ == "__main__":
    main()
