"""Runtime round trips on the emulator, as `name: value` lines (baselines measured in the same run).

submit_signal_wait_us: one compute submission that signals, and the CPU wait for it (microseconds).
copyin_vs_numpy_64MiB / copyout_vs_numpy_64MiB: staged host transfers vs a plain numpy copy of 64 MiB
(both ends already touched, as the baseline's are). Staging means two copies, so 0.5 is the ceiling.
alloc_us_at_100k_live_bos: one 4 KiB device allocation (mmap, ALLOC, MAP, CPU map) with 100,000 buffers
alive, the mean of the last 1,000 (microseconds; the emulated KFD's lookups are O(log n)).
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import best  # noqa: E402

from hcqsim.runtime import open_device


def main(spec: str = "sim") -> None:
    dev = open_device(spec)
    sig = dev.new_signal(0)
    n = 2000
    counter = iter(range(1, 10 ** 9))

    def round_trip():
        v = next(counter)
        dev.compute_queue().signal(sig, v).submit()
        sig.wait(v)

    t = best(lambda: [round_trip() for _ in range(n)], 3)
    print(f"submit_signal_wait_us: {t / n * 1e6:.1f}")

    size = 64 << 20
    data = np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8)
    buf = dev.alloc(size, host_visible=False)
    host = np.empty(size, np.uint8)
    t_numpy = best(lambda: np.copyto(host, data), 5)
    t_in = best(lambda: dev.copyin(buf, data), 3)
    print(f"copyin_vs_numpy_64MiB: {t_numpy / t_in:.2f}")
    t_out = best(lambda: dev.copyout(buf, out=host), 3)  # into warm host memory, like the baseline
    print(f"copyout_vs_numpy_64MiB: {t_numpy / t_out:.2f}")
    assert dev.copyout(buf, 4096) == data[:4096].tobytes()
    dev.close()
    alloc_at_scale(spec)


def alloc_at_scale(spec: str, live: int = 100_000, last: int = 1000) -> None:
    dev = open_device(spec)
    bufs = [dev.alloc(4096) for _ in range(live - last)]
    t = time.perf_counter()
    bufs += [dev.alloc(4096) for _ in range(last)]
    print(f"alloc_us_at_100k_live_bos: {(time.perf_counter() - t) / last * 1e6:.1f}")
    dev.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sim")
