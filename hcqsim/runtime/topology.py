"""Reading the KFD sysfs topology through the OS boundary."""
from __future__ import annotations

from dataclasses import dataclass

from ..boundary import SYSFS_TOPOLOGY, OSBoundary


def parse_properties(text: str) -> dict[str, int]:
    """`key value` lines (decimal) -> dict."""
    props = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            props[parts[0]] = int(parts[1])
    return props


def target_name(gfx_target_version: int) -> str:
    """sysfs gfx_target_version (major*10000 + minor*100 + stepping) -> "gfx1100", "gfx942", "gfx90a"."""
    major, minor, step = gfx_target_version // 10000, gfx_target_version // 100 % 100, gfx_target_version % 100
    return f"gfx{major}{minor:x}{step:x}"


@dataclass
class GpuNode:
    node: int  # sysfs node number
    gpu_id: int
    props: dict[str, int]

    @property
    def target(self) -> str:
        return target_name(self.props["gfx_target_version"])

    @property
    def family(self) -> str:
        """Packet-format family: gfx11 (gfx10+ forms) or gfx9."""
        return "gfx11" if self.props["gfx_target_version"] >= 100000 else "gfx9"

    @property
    def render_path(self) -> str:
        return f"/dev/dri/renderD{self.props['drm_render_minor']}"


def gpu_nodes(os_: OSBoundary) -> list[GpuNode]:
    """The GPU nodes (gpu_id != 0), in node order."""
    nodes_dir = f"{SYSFS_TOPOLOGY}/nodes"
    out = []
    for name in sorted(os_.listdir(nodes_dir), key=int):
        gpu_id = int(os_.read_text(f"{nodes_dir}/{name}/gpu_id").strip() or 0)
        if gpu_id:
            out.append(GpuNode(int(name), gpu_id, parse_properties(os_.read_text(f"{nodes_dir}/{name}/properties"))))
    return out
