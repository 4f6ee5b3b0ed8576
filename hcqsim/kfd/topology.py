"""The sysfs topology (kfd_topology.c; HARDWARE_FACTS 2): the in-memory tree the emulated machine shows
under /sys/devices/virtual/kfd/kfd/topology, and reading it (`Sysfs`).

Node properties come from the target (hcqsim.targets) and the per-target facts below; gpu_ids are
deterministic, so the same machine has the same ids (and the same messages) on every run.
"""
from __future__ import annotations

import functools

import errno
import os
import zlib
from typing import Callable

from .. import kfd_uapi as k
from ..targets import Target

# Per-target node facts that hcqsim.targets does not carry (HARDWARE_FACTS 2.5; mem width/clock illustrative;
# the queue and SDMA engine counts are Target fields).
NODE_FACTS = {
    "gfx1100": dict(simd_id_base=2147488032, num_gws=64, max_slots_scratch_cu=32, vendor_id=4098,
                    location_id=34304, hive_id=0, max_engine_clk_fcompute=2482, fw_version=2140,
                    capability=671588992, capability2=0, debug_prop=1495, sdma_fw_version=20,
                    unique_id=11673270660693242239, mem_width=384, mem_clk_max=2500),
    "gfx942": dict(simd_id_base=2147487784, num_gws=64, max_slots_scratch_cu=32, vendor_id=4098,
                   location_id=18176, hive_id=10631624818852212319,
                   max_engine_clk_fcompute=2100, fw_version=166,
                   capability=746037888, capability2=0, debug_prop=1511, sdma_fw_version=22,
                   unique_id=4376936076086227261, mem_width=8192, mem_clk_max=1300),
}
CPU_CORES, CPU_CLOCK_MHZ, CPU_MEMORY = 16, 2400, 64 << 30

# GPU caches (kfd_crat.c kfd_fill_gpu_cache_info_from_gfx_config: one entry per group of `shared` CUs of a shader
# array that has an active CU; "array" groups span a shader array, "xcc" an XCC's L2, "device" the whole part).
# Sizes in KiB and line sizes from the parts' cache tables (gfx11 GC info: 32 KiB L0 per CU, 32/16 KiB SQC
# instruction/scalar per WGP, 256 KiB GL1 per array, 6 MiB L2, 96 MiB Infinity Cache; gc_9_4_3: 16 KiB TCP per
# CU, 64/16 KiB SQC per 2 CUs, 4 MiB L2 per XCC, 256 MiB MALL). caches_count follows from the CU layout below.
# A real 7900 XTX reports 206 entries, as here; a real MI300X 626 (its harvesting pattern differs from ours).
_DATA = k.HSA_CACHE_TYPE_DATA | k.HSA_CACHE_TYPE_HSACU
_INST = k.HSA_CACHE_TYPE_INSTRUCTION | k.HSA_CACHE_TYPE_HSACU
CACHE_FACTS = {  # (level, size KiB, line bytes, type, CUs sharing one: an int or "array" / "xcc" / "device")
    "gfx1100": ((1, 32, 128, _DATA, 1), (1, 32, 64, _INST, 2), (1, 16, 64, _DATA, 2), (1, 256, 128, _DATA, "array"),
                (2, 6144, 128, _DATA, "device"), (3, 98304, 64, _DATA, "device")),
    "gfx942": ((1, 16, 64, _DATA, 1), (1, 64, 64, _INST, 2), (1, 16, 64, _DATA, 2), (2, 4096, 128, _DATA, "xcc"),
               (3, 262144, 128, _DATA, "device")),
}
SIBLING_MAP_BITS = 32  # kfd prints each bit of the (here 4-byte) sibling map, comma-separated  # the emulated host CPU node (fixed: deterministic)


# ---------------------------------------------------------------------------------------------------
# the tree


def make_gpu_ids(target: str, n: int) -> list[int]:
    """16-bit nonzero, distinct, deterministic per index (the kernel hashes PCI identity; we hash the index)."""
    ids: list[int] = []
    for i in range(n):
        h = zlib.crc32(f"hcqsim {target} gpu {i}".encode()) & 0xFFFF
        while h == 0 or h in ids:
            h = (h + 1) & 0xFFFF
        ids.append(h)
    return ids


def _props_text(keys: tuple, values: dict) -> str:
    return "".join(f"{key} {values[key]}\n" for key in keys)


def _link(node_from: int, node_to: int, kind: int, weight: int) -> str:
    v = dict.fromkeys(k.IO_LINK_PROPERTY_KEYS, 0)
    v.update(type=kind, node_from=node_from, node_to=node_to, weight=weight, flags=k.HSA_IOLINK_FLAGS_ENABLED)
    return _props_text(k.IO_LINK_PROPERTY_KEYS, v)


def active_cus(target: Target) -> list[list[int]]:
    """Per shader array (all XCCs), the active CU slots. Parts with fewer CUs than slots (gfx942: 304 of 320)
    lose the last slot of every other array, spread evenly (hcqsim's choice; real parts harvest per die)."""
    arrays, slots = target.array_count, target.cu_per_simd_array
    missing = arrays * slots - target.simd_count // target.simd_per_cu
    step = arrays // missing if missing else 0
    return [list(range(slots - 1 if step and a % step == step - 1 and a // step < missing else slots))
            for a in range(arrays)]


def gpu_caches(target: Target, simd_id_base: int) -> list[dict]:
    """The cache entries of a GPU node, in kfd's order (each cache kind over the whole part, CU order)."""
    return [dict(entry) for entry in _gpu_caches(target, simd_id_base)]


@functools.lru_cache(maxsize=32)
def _gpu_caches(target: Target, simd_id_base: int) -> tuple[dict, ...]:
    # computed once per (target, node): building the entries was most of the cost of a new emulated system
    per_array = active_cus(target)
    arrays_per_xcc = target.array_count // target.num_xcc
    first_cu, n = [], 0
    for cus in per_array:
        first_cu.append(n)
        n += len(cus)
    out = []
    for level, size, line, kind, shared in CACHE_FACTS[target.name]:
        groups: list[tuple[int, int]] = []  # (first CU id, CUs in the group)
        if shared == "device":
            groups = [(0, n)]
        elif shared == "xcc":
            for x in range(target.num_xcc):
                a0 = x * arrays_per_xcc
                groups.append((first_cu[a0], sum(len(c) for c in per_array[a0:a0 + arrays_per_xcc])))
        else:  # groups of `shared` CU slots (or the whole array), kept where a CU of the group is active
            width = target.cu_per_simd_array if shared == "array" else shared
            for a, cus in enumerate(per_array):
                for g in range(0, target.cu_per_simd_array, width):
                    members = [c for c in cus if g <= c < g + width]
                    if members:
                        groups.append((first_cu[a] + cus.index(members[0]), len(members)))
        for cu, count in groups:
            sibling = ",".join("1" if i < min(count, SIBLING_MAP_BITS) else "0" for i in range(SIBLING_MAP_BITS))
            out.append(dict(processor_id_low=simd_id_base + cu, level=level, size=size, cache_line_size=line,
                            cache_lines_per_tag=1, association=16, latency=0, type=kind, sibling_map=sibling))
    return tuple(out)


def gpu_node_properties(target: Target, index: int, num_gpus: int, svm: bool = True) -> dict:
    """The `properties` values of GPU node `index` (facts 2.2 keys, facts 2.5 values). `svm=False`: as a kernel
    built without CONFIG_HSA_AMD_SVM reports the node (no HSA_CAP_SVMAPI_SUPPORTED)."""
    f = NODE_FACTS[target.name]
    capability = f["capability"] if svm else f["capability"] & ~k.HSA_CAP_SVMAPI_SUPPORTED
    return dict(
        cpu_cores_count=0, simd_count=target.simd_count, mem_banks_count=1,
        caches_count=len(gpu_caches(target, 0)), io_links_count=1,
        p2p_links_count=num_gpus - 1, cpu_core_id_base=0, simd_id_base=f["simd_id_base"] + index * 0x1000,
        max_waves_per_simd=target.max_waves_per_simd, lds_size_in_kb=target.lds_size_in_kb, gds_size_in_kb=0,
        num_gws=f["num_gws"], wave_front_size=target.wave_size, array_count=target.array_count,
        simd_arrays_per_engine=target.simd_arrays_per_engine, cu_per_simd_array=target.cu_per_simd_array,
        simd_per_cu=target.simd_per_cu, max_slots_scratch_cu=f["max_slots_scratch_cu"],
        gfx_target_version=target.gfx_target_version, vendor_id=f["vendor_id"], device_id=target.device_id,
        location_id=f["location_id"] + (index << 8), domain=0, drm_render_minor=128 + index, hive_id=f["hive_id"],
        num_sdma_engines=target.sdma_engines, num_sdma_xgmi_engines=target.sdma_xgmi_engines,
        num_sdma_queues_per_engine=target.sdma_queues_per_engine, num_cp_queues=target.cp_queues,
        max_engine_clk_fcompute=f["max_engine_clk_fcompute"], local_mem_size=0, fw_version=f["fw_version"],
        capability=capability, capability2=f["capability2"], debug_prop=f["debug_prop"],
        sdma_fw_version=f["sdma_fw_version"], unique_id=(f["unique_id"] + index) % (1 << 64),
        num_xcc=target.num_xcc, max_engine_clk_ccompute=CPU_CLOCK_MHZ)


def cpu_node_properties(num_gpus: int) -> dict:
    v = dict.fromkeys(k.NODE_PROPERTY_KEYS, 0)
    v.update(cpu_cores_count=CPU_CORES, mem_banks_count=1, io_links_count=num_gpus,
             max_engine_clk_ccompute=CPU_CLOCK_MHZ)
    return v


def build_topology(target: Target, gpu_ids: list[int], vram_size: int,
                   used: Callable[[int], int], svm: bool = True) -> dict[str, str | Callable[[], str]]:
    """path -> file text (or a function giving it, for values that change, like used_memory)."""
    root, n = k.KFD_TOPOLOGY_ROOT, len(gpu_ids)
    tree: dict[str, str | Callable[[], str]] = {
        f"{root}/generation_id": "1\n",
        f"{root}/system_properties": "".join(f"{key} 0\n" for key in k.SYSTEM_PROPERTY_KEYS),
    }
    cpu_keys = tuple(key for key in k.NODE_PROPERTY_KEYS if key not in k.GPU_ONLY_NODE_PROPERTY_KEYS)
    cpu = f"{root}/nodes/0"
    tree.update({f"{cpu}/gpu_id": "0\n", f"{cpu}/name": "\n",
                 f"{cpu}/properties": _props_text(cpu_keys, cpu_node_properties(n)),
                 f"{cpu}/mem_banks/0/properties": _props_text(k.MEM_BANK_PROPERTY_KEYS, dict(
                     heap_type=k.HSA_MEM_HEAP_TYPE_SYSTEM, size_in_bytes=CPU_MEMORY, flags=0, width=64,
                     mem_clk_max=3200))})
    for i in range(n):
        tree[f"{cpu}/io_links/{i}/properties"] = _link(0, i + 1, k.HSA_IOLINK_TYPE_PCIEXPRESS, 20)
    facts = NODE_FACTS[target.name]
    for i, gid in enumerate(gpu_ids):
        d = f"{root}/nodes/{i + 1}"
        tree.update({f"{d}/gpu_id": f"{gid}\n", f"{d}/name": "ip discovery\n",
                     f"{d}/properties": _props_text(k.NODE_PROPERTY_KEYS, gpu_node_properties(target, i, n, svm)),
                     f"{d}/mem_banks/0/properties": _props_text(k.MEM_BANK_PROPERTY_KEYS, dict(
                         heap_type=k.HSA_MEM_HEAP_TYPE_FB_PUBLIC, size_in_bytes=vram_size, flags=0,
                         width=facts["mem_width"], mem_clk_max=facts["mem_clk_max"])),
                     f"{d}/mem_banks/0/used_memory": (lambda i=i: f"{used(i)}\n"),
                     f"{d}/io_links/0/properties": _link(i + 1, 0, k.HSA_IOLINK_TYPE_PCIEXPRESS, 20)})
        simd_id_base = gpu_node_properties(target, i, n)["simd_id_base"]
        for c, cache in enumerate(gpu_caches(target, simd_id_base)):
            tree[f"{d}/caches/{c}/properties"] = _props_text(k.CACHE_PROPERTY_KEYS, cache)
        xgmi = facts["hive_id"] != 0
        peers = [j for j in range(n) if j != i]
        for m, j in enumerate(peers):
            kind = k.HSA_IOLINK_TYPE_XGMI if xgmi else k.HSA_IOLINK_TYPE_PCIEXPRESS
            tree[f"{d}/p2p_links/{m}/properties"] = _link(i + 1, j + 1, kind, 15 if xgmi else 40)
    return tree


class Sysfs:
    """Reads of the topology tree as the kernel's sysfs answers them (files, directories, errnos)."""

    ALIAS = "/sys/class/kfd/kfd/topology"  # the class link to the same directory

    def __init__(self, tree: dict[str, str | Callable[[], str]]):
        self.tree = tree

    def path(self, path: str) -> str:
        path = path.rstrip("/")
        return k.KFD_TOPOLOGY_ROOT + path[len(self.ALIAS):] if path.startswith(self.ALIAS) else path

    def _children(self, path: str) -> list[str]:
        prefix = path + "/"
        names = {p[len(prefix):].split("/", 1)[0] for p in self.tree if p.startswith(prefix)}
        return sorted(names, key=lambda s: (not s.isdigit(), int(s) if s.isdigit() else 0, s))

    def read_text(self, path: str) -> str:
        p = self.path(path)
        value = self.tree.get(p)
        if value is None:
            if self._children(p):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        return value() if callable(value) else value

    def listdir(self, path: str) -> list[str]:
        p = self.path(path)
        names = self._children(p)
        if not names:
            if p in self.tree:
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        return names

    def exists(self, path: str) -> bool:
        p = self.path(path)
        return p in self.tree or bool(self._children(p))
