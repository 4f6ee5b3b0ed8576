"""What the documentation says each target is, as the reference model needs it: written from
/work/shared/HARDWARE_FACTS.md (2.2 node properties, 2.5 the example `properties` files of an RX 7900 XTX and an
MI300X, 5.2 the SDMA count widths) — never from the device under test and never from hcqsim.targets, so an
emulator (or a driver) that under-reports its queues disagrees with the reference instead of agreeing with itself.

Standard library only (the reference model imports no hcqsim module).
"""
from __future__ import annotations

# sysfs node properties a runtime reads to size itself (HARDWARE_FACTS 2.2 keys, 2.5 values). Only properties of
# the GPU model are here, nothing that varies per board or per boot (ids, clocks, firmware versions).
TOPOLOGY: dict[str, dict[str, int]] = {
    "gfx1100": {"gfx_target_version": 110000, "vendor_id": 4098, "wave_front_size": 32, "simd_per_cu": 2,
                "max_waves_per_simd": 16, "lds_size_in_kb": 64, "num_sdma_engines": 2, "num_sdma_xgmi_engines": 0,
                "num_sdma_queues_per_engine": 6, "num_cp_queues": 8, "num_xcc": 1},
    "gfx942": {"gfx_target_version": 90402, "vendor_id": 4098, "wave_front_size": 64, "simd_per_cu": 4,
               "max_waves_per_simd": 8, "lds_size_in_kb": 64, "num_sdma_engines": 2, "num_sdma_xgmi_engines": 14,
               "num_sdma_queues_per_engine": 8, "num_cp_queues": 24, "num_xcc": 8},
}

# COPY_LINEAR / CONST_FILL COUNT width in bits (HARDWARE_FACTS 5.2: 22 on SDMA 4.4.x, 30 on SDMA 6.x)
SDMA_COUNT_BITS = {"gfx1100": 30, "gfx942": 22}


def targets() -> list[str]:
    return sorted(TOPOLOGY)


def facts(target: str) -> dict[str, int]:
    try:
        return TOPOLOGY[target]
    except KeyError:
        raise ValueError(f"the reference model has no documented facts for {target!r} (it knows "
                         f"{', '.join(targets())})") from None


def queue_counts(target: str, devices: int = 1) -> dict[int, dict[str, int]]:
    """Hardware queues per engine a runtime may use: num_cp_queues compute queues, num_sdma_engines x
    num_sdma_queues_per_engine SDMA queues (HARDWARE_FACTS 2.2), the same on every GPU of the system."""
    f = facts(target)
    one = {"compute": f["num_cp_queues"], "copy": f["num_sdma_engines"] * f["num_sdma_queues_per_engine"]}
    return {d: dict(one) for d in range(devices)}
