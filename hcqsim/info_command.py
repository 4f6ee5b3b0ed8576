"""`hcqsim info`: every GPU agent as the runtime sees it through the OS boundary, on a par with rocminfo's
useful fields, as text or `--json`.

Per agent: name and target, PCI identity, compute units, SIMDs, wave limits, LDS/GDS/scratch, memory pools with
sizes, hardware queues per engine, SDMA engines, firmware versions, clock and links. Everything is read from the
KFD topology in sysfs (`/sys/devices/virtual/kfd/kfd/topology/nodes/N/...`) and the amdgpu render node's
`device/mem_info_*` files, the same way on the emulator and on a real GPU; nothing is taken from hcqsim's target
tables, so on hardware it shows the hardware. Harness layer (it may import anything).
"""
from __future__ import annotations

import argparse
import json

from . import kfd_uapi as K
from .boundary import KFD_PATH, SYSFS_TOPOLOGY
from .command_status import unavailable, usage

HEAP_TYPES = {K.HSA_MEM_HEAP_TYPE_SYSTEM: "system", K.HSA_MEM_HEAP_TYPE_FB_PUBLIC: "VRAM (CPU-visible)",
              K.HSA_MEM_HEAP_TYPE_FB_PRIVATE: "VRAM (private)", K.HSA_MEM_HEAP_TYPE_GPU_GDS: "GDS",
              K.HSA_MEM_HEAP_TYPE_GPU_LDS: "LDS", K.HSA_MEM_HEAP_TYPE_GPU_SCRATCH: "scratch"}
LINK_TYPES = {K.HSA_IOLINK_TYPE_PCIEXPRESS: "PCIe", K.HSA_IOLINK_TYPE_XGMI: "XGMI",
              K.HSA_IOLINK_TYPE_HYPERTRANSPORT: "HyperTransport"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="sim", help="sim (default), sim:N, AMD or AMD:N: the first agent shown")
    parser.add_argument("--gpus", type=int, default=None, metavar="N",
                        help="how many GPUs to show (sim: the emulated system's size, default 1; AMD: default "
                             "every GPU from the first one on)")
    parser.add_argument("--target", default="gfx1100", choices=["gfx1100", "gfx942"], help="emulated target (sim)")
    parser.add_argument("--json", action="store_true", help="print a JSON list, one object per agent")


def run(args) -> int:
    from .runtime import NoDeviceError, open_devices, parse_spec
    try:
        kind, first = parse_spec(args.device)
    except ValueError as e:
        raise usage(f"--device {args.device}: {e}") from None
    if args.gpus is not None and args.gpus < 1:
        raise usage(f"--gpus {args.gpus}: show at least one GPU")
    if kind == "AMD":
        import os
        if not os.path.exists(KFD_PATH):
            raise unavailable(f"--device {args.device}: {KFD_PATH} not found; this machine has no AMD GPU driven "
                              f"by KFD (hcqsim info --device sim shows the emulated one)")
    try:
        if kind == "sim":
            devs = open_devices(args.device, args.gpus or 1, target=args.target)
        else:
            devs = open_devices(args.device, 1)
            count = args.gpus or max(1, len(devs[0].process.nodes) - first)
            if count > 1:
                devs += open_devices(f"AMD:{first + 1}", count - 1)
    except (NoDeviceError, IndexError) as e:
        raise unavailable(f"--device {args.device}: {e}") from None
    try:
        agents = [agent_info(d) for d in devs]
    finally:
        for d in devs:
            d.close()
    print(json.dumps(agents, indent=1, sort_keys=True) if args.json else "\n\n".join(map(describe, agents)))
    return 0


def _properties(dev, path: str) -> dict[str, int]:
    from .runtime.topology import parse_properties
    return parse_properties(dev.os.read_text(path))


def _entries(dev, path: str) -> list[str]:
    try:
        return sorted(dev.os.listdir(path), key=lambda n: int(n) if n.isdigit() else n)
    except OSError:
        return []


def _read_int(dev, path: str) -> int | None:
    try:
        return int(dev.os.read_text(path).strip(), 0)
    except (OSError, ValueError):
        return None


def _pci(location_id: int, domain: int) -> str:
    """KFD's location_id is the PCI bus/device/function as (bus << 8) | (device << 3) | function."""
    return f"{domain:04x}:{location_id >> 8:02x}:{(location_id >> 3) & 0x1F:02x}.{location_id & 7}"


def agent_info(dev) -> dict:
    """One GPU agent's fields (the JSON object of `hcqsim info --json`)."""
    p = dev.node.props
    node = f"{SYSFS_TOPOLOGY}/nodes/{dev.node.node}"
    simd_per_cu = max(1, p.get("simd_per_cu", 1))
    pools = []
    for bank in _entries(dev, f"{node}/mem_banks"):
        b = _properties(dev, f"{node}/mem_banks/{bank}/properties")
        pools.append({"kind": HEAP_TYPES.get(b.get("heap_type"), f"heap type {b.get('heap_type')}"),
                      "size_bytes": b.get("size_in_bytes", 0), "width_bits": b.get("width", 0),
                      "max_clock_mhz": b.get("mem_clk_max", 0)})
    render = f"/sys/class/drm/renderD{p.get('drm_render_minor', 0)}/device"
    gtt = _read_int(dev, f"{render}/mem_info_gtt_total")
    if gtt is not None:
        pools.append({"kind": "GTT (system memory the GPU maps)", "size_bytes": gtt, "width_bits": 0,
                      "max_clock_mhz": 0})
    links = []
    for link in _entries(dev, f"{node}/io_links"):
        lp = _properties(dev, f"{node}/io_links/{link}/properties")
        links.append({"to_node": lp.get("node_to", 0), "type": LINK_TYPES.get(lp.get("type"), f"type {lp.get('type')}"),
                      "weight": lp.get("weight", 0)})
    arrays_per_engine = max(1, p.get("simd_arrays_per_engine", 1))
    return {
        "label": dev.label, "gpu_id": dev.gpu_id, "node": dev.node.node, "name": dev.target, "target": dev.target,
        "family": dev.family, "gfx_target_version": p.get("gfx_target_version", 0),
        "emulated": bool(dev.os.emulated), "vendor_id": p.get("vendor_id", 0), "device_id": p.get("device_id", 0),
        "pci": _pci(p.get("location_id", 0), p.get("domain", 0)), "drm_render_minor": p.get("drm_render_minor", 0),
        "compute_units": p.get("simd_count", 0) // simd_per_cu, "simds_per_cu": simd_per_cu,
        "simd_count": p.get("simd_count", 0), "shader_arrays": p.get("array_count", 0),
        "shader_engines": p.get("array_count", 0) // arrays_per_engine, "num_xcc": max(1, p.get("num_xcc", 1)),
        "wavefront_size": p.get("wave_front_size", 0), "max_waves_per_simd": p.get("max_waves_per_simd", 0),
        "max_waves_per_cu": p.get("max_waves_per_simd", 0) * simd_per_cu,
        "lds_bytes": p.get("lds_size_in_kb", 0) * 1024, "gds_bytes": p.get("gds_size_in_kb", 0) * 1024,
        "gws": p.get("num_gws", 0), "scratch_slots_per_cu": p.get("max_slots_scratch_cu", 0),
        "max_engine_clock_mhz": p.get("max_engine_clk_fcompute", 0),
        "memory_pools": pools,
        "queues": {"compute": dev.queue_count("compute"), "copy": dev.queue_count("copy")},
        "sdma": {"version": dev.sdma_version, "engines": p.get("num_sdma_engines", 0),
                 "xgmi_engines": p.get("num_sdma_xgmi_engines", 0),
                 "queues_per_engine": p.get("num_sdma_queues_per_engine", 0)},
        "firmware": {"mec": p.get("fw_version", 0), "sdma": p.get("sdma_fw_version", 0)},
        "io_links": links,
    }


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}".replace(".0 ", " ")
    return f"{n} B"


def describe(a: dict) -> str:
    """The text form of one agent: aligned `field  value` lines under the agent's label."""
    pools = "; ".join(f"{p['kind']} {_size(p['size_bytes'])}"
                      + (f" ({p['width_bits']}-bit, {p['max_clock_mhz']} MHz)" if p["width_bits"] else "")
                      for p in a["memory_pools"])
    sdma = a["sdma"]
    rows = [
        ("device", f"0x{a['device_id']:04x} (vendor 0x{a['vendor_id']:04x}), PCI {a['pci']}, KFD node {a['node']}, "
                   f"/dev/dri/renderD{a['drm_render_minor']}"),
        ("compute", f"{a['compute_units']} CUs x {a['simds_per_cu']} SIMDs = {a['simd_count']} SIMDs, "
                    f"{a['shader_engines']} shader engines ({a['shader_arrays']} arrays), {a['num_xcc']} XCC(s)"),
        ("waves", f"wave{a['wavefront_size']}, up to {a['max_waves_per_simd']} per SIMD, {a['max_waves_per_cu']} per CU"),
        ("on-chip", f"LDS {_size(a['lds_bytes'])} per workgroup, GDS {_size(a['gds_bytes'])}, {a['gws']} GWS, "
                    f"{a['scratch_slots_per_cu']} scratch slots per CU"),
        ("memory pools", pools or "none"),
        ("queues", f"{a['queues']['compute']} compute, {a['queues']['copy']} copy"),
        ("SDMA", f"{sdma['version']}: {sdma['engines']} engines + {sdma['xgmi_engines']} XGMI engines, "
                 f"{sdma['queues_per_engine']} queues per engine"),
        ("firmware", f"MEC {a['firmware']['mec']}, SDMA {a['firmware']['sdma']}"),
        ("clock", f"{a['max_engine_clock_mhz']} MHz max engine clock"),
        ("links", ", ".join(f"node {link['to_node']} ({link['type']}, weight {link['weight']})"
                            for link in a["io_links"]) or "none"),
    ]
    width = max(len(k) for k, _ in rows)
    head = f"{a['label']}: {a['name']} ({a['family']}, gfx_target_version {a['gfx_target_version']}), " \
           f"{'emulated' if a['emulated'] else 'hardware'}"
    return "\n".join([head] + [f"  {k:{width}}  {v}" for k, v in rows])
