"""The HDP model's cost (issue 17, coherence/hdp.py), as `name: value` lines measured in the same run.

hdp_progress_point_us_<mode>_<MiB>MiB_clean: the HDP's work at one progress point whose GPUs access memory (before
  + after the GPUs run, nothing executed; a progress point where no GPU runs anything costs O(GPUs) in report) with that much VRAM mapped for the CPU and no host store since the last one (microseconds).
hdp_progress_point_us_<mode>_<MiB>MiB_<n>pages_stored: the same with the host having stored into n pages.
hdp_submit_ratio_<mode>_<MiB>MiB: a runtime loop (host store into a 4 KiB VRAM buffer, copy queue copy to GTT,
  synchronize) with that much host-mapped VRAM alive, wall time over the same loop in `coherent`.
hdp_peer_copy_into_pending_ratio_<mode>: GPU 0's copy queue writing 64 KiB into GPU 1's VRAM whose every page holds
  an unflushed host store (each GPU write is taken in as it happens: HostMappedVram.dram_written), wall time over the
  same loop into pages without host stores.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import best  # noqa: E402

from hcqsim.runtime import open_device, open_devices  # noqa: E402

MODES = ("report", "adversarial")


def progress_point_us(mode: str, mib: int, stored_pages: int = 0, rounds: int = 50) -> float:
    dev = open_device("sim", memory_model=mode)
    try:
        big = dev.alloc(mib << 20)  # VRAM, host-visible: mapped for the CPU, tracked by the HDP
        big.view[:] = 1
        vram = dev.os.system.gpus[0].hdp.vram
        vram.before_run()
        vram.look_if_owed()
        vram.after_run()  # (a first look takes the stores above in: flushed by nothing, they stay pending)
        vram.flush(dev.os.system.gpus[0].hdp)

        def one() -> None:
            for i in range(stored_pages):
                big.view[i * 4096] ^= 0xFF
            vram.before_run()
            vram.look_if_owed()  # a run that accesses memory (report defers the look to its first GPU access)
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


def peer_copy_loop_s(mode: str, pending: bool, n: int = 40, size: int = 64 << 10) -> float:
    devs = open_devices("sim", 2, memory_model=mode)
    try:
        src, dst = devs[0].alloc(size), devs[1].alloc(size)
        devs[1].map_to(dst, devs[0])
        q = devs[0].copy_queue()
        t = time.perf_counter()
        for i in range(n):
            if pending:  # a host store into every page of GPU 1's VRAM: GPU 1's HDP is never flushed here
                dst.view[::4096] = i & 0xFF
            q.copy(dst, src, size).submit()
            devs[0].synchronize()
        return time.perf_counter() - t
    finally:
        for d in devs:
            d.close()


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
    for mode in MODES:
        clean = min(peer_copy_loop_s(mode, False) for _ in range(3))
        ratio = min(peer_copy_loop_s(mode, True) for _ in range(3)) / clean
        print(f"hdp_peer_copy_into_pending_ratio_{mode}: {ratio:.2f}")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from timing import header, help_requested
    help_requested(__doc__)
    header("bench/hdp.py")
    main()
