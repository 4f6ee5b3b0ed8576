"""The HDP model's cost (issue 17, coherence/hdp.py), as `name: value` lines measured in the same run.

hdp_progress_point_us_<mode>_<MiB>MiB_clean: the HDP's work at one progress point (before + after the GPUs run,
  nothing executed) with that much VRAM mapped for the CPU and no host store since the last one (microseconds).
hdp_progress_point_us_<mode>_<MiB>MiB_<n>pages_stored: the same with the host having stored into n pages.
hdp_submit_ratio_<mode>_<MiB>MiB: a runtime loop (host store into a 4 KiB VRAM buffer, copy queue copy to GTT,
  synchronize) with that much host-mapped VRAM alive, wall time over the same loop in `coherent`.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import best  # noqa: E402

from hcqsim.runtime import open_device  # noqa: E402

MODES = ("report", "adversarial")


def progress_point_us(mode: str, mib: int, stored_pages: int = 0, rounds: int = 50) -> float:
    dev = open_device("sim", memory_model=mode)
    try:
        big = dev.alloc(mib << 20)  # VRAM, host-visible: mapped for the CPU, tracked by the HDP
        big.view[:] = 1
        vram = dev.os.system.gpus[0].hdp.vram
        vram.before_run()
        vram.after_run()  # (a first look takes the stores above in: flushed by nothing, they stay pending)
        vram.flush(dev.os.system.gpus[0].hdp)

        def one() -> None:
            for i in range(stored_pages):
                big.view[i * 4096] ^= 0xFF
            vram.before_run()
            vram.after_run()
            vram.flush(dev.os.system.gpus[0].hdp)

        return best(one, rounds) * 1e6
    finally:
        dev.close()


def submit_loop_s(mode: str, mib: int, n: int = 200) -> float:
    dev = open_device("sim", memory_model=mode)
    try:
        ballast = dev.alloc(mib << 20) if mib else None  # host-mapped VRAM the HDP looks at every progress point
        src, dst = dev.alloc(4096), dev.alloc(4096, uncached=True)
        q = dev.copy_queue()
        t = time.perf_counter()
        for i in range(n):
            src.view[:8] = np.frombuffer(i.to_bytes(8, "little"), np.uint8)
            q.copy(dst, src, 4096).submit()
            dev.synchronize()
        elapsed = time.perf_counter() - t
        del ballast
        return elapsed
    finally:
        dev.close()


def main() -> None:
    for mode in MODES:
        for mib in (1, 64):
            print(f"hdp_progress_point_us_{mode}_{mib}MiB_clean: {progress_point_us(mode, mib):.1f}")
            print(f"hdp_progress_point_us_{mode}_{mib}MiB_16pages_stored: {progress_point_us(mode, mib, 16):.1f}")
    for mib in (0, 16):
        base = min(submit_loop_s("coherent", mib) for _ in range(3))
        for mode in MODES:
            ratio = min(submit_loop_s(mode, mib) for _ in range(3)) / base
            print(f"hdp_submit_ratio_{mode}_{mib}MiB: {ratio:.2f}")


if __name__ == "__main__":
    main()
