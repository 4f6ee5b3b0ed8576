"""One emulated machine: N `EmulatedGPU`s sharing one VA window, their sysfs topology, the emulated KFD
driver for one process, and `.os`, the `EmulatedOS` a runtime talks through."""
from __future__ import annotations

from ..gpu import EmulatedGPU
from ..memory import VaWindow
from ..targets import get_target
from .emulated_os import EmulatedOS
from .process import KfdDriver, ProcessDevice
from .queues import queue_sizes
from .topology import NODE_FACTS, Sysfs, build_topology, gpu_node_properties, make_gpu_ids


class EmulatedSystem:
    """N emulated GPUs behind one emulated KFD, sharing one VA window (so a peer mapping is the same host
    range at the same VA on every GPU). `.os` is the runtime's boundary."""

    def __init__(self, num_gpus: int = 1, target: str = "gfx1100", seed: int = 0, policy="run_to_block",
                 vram_size: int = 16 << 30):
        if num_gpus < 1:
            raise ValueError("an emulated system needs at least one GPU")
        self.target = get_target(target)
        if self.target.name not in NODE_FACTS:
            raise ValueError(f"no sysfs node facts for {self.target.name}")
        self.vram_size = vram_size
        self.window = VaWindow()
        self.gpu_ids = make_gpu_ids(self.target.name, num_gpus)
        self.gpus = [EmulatedGPU(target, seed=seed + i, index=i, gpu_id=self.gpu_ids[i], window=self.window,
                                 policy=policy) for i in range(num_gpus)]
        self.props = [gpu_node_properties(self.target, i, num_gpus) for i in range(num_gpus)]
        sizes = queue_sizes(self.target)
        devices = [ProcessDevice(i, g, self.gpu_ids[i], self.props[i], sizes) for i, g in enumerate(self.gpus)]
        self.driver = KfdDriver(self, devices)
        self.sysfs = Sysfs(build_topology(self.target, self.gpu_ids, vram_size, self.driver.memory.vram_used))
        self.os = EmulatedOS(self)
        self.closed = False

    def render_path(self, index: int) -> str:
        return f"/dev/dri/renderD{self.props[index]['drm_render_minor']}"

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.driver.close()
        for gpu in self.gpus:
            gpu.close()
        self.window.close()

    def __enter__(self) -> "EmulatedSystem":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
