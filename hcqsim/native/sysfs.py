"""The emulated machine's sysfs as real files: what a native ROCm stack reads with open/fopen/opendir/stat.

The interposer rewrites paths under the directories the emulated machine owns (`OWNED`) to the same paths
under a private root, so libc does the reading (fscanf, readdir, readlink) unchanged. Besides the KFD
topology and amdgpu's files of `Sysfs`, the root holds what the kernel shows around them and the stacks
look at: `/sys/module/amdgpu/initstate` (rocminfo 6.x), `/sys/dev/char/226:N` with `device/drm`
(libdrm's drmNodeIsDRM; its card* entry names the primary node) and `device/subsystem` (drmParseSubsystemType), `/sys/class/kfd`.

Values that change (used_memory, mem_info_*_used: `live_files`) are written again each time the program opens
them (the interposer asks the host to refresh a path before libc opens its copy), so a read sees the value of the
moment, as from the kernel.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..boundary import SYSFS_TOPOLOGY

if TYPE_CHECKING:
    from ..kfd import EmulatedSystem

# the directories the interposer hands to the emulated machine (keep in step with interposer.c host_path)
OWNED = ("/sys/devices/virtual/kfd", "/sys/class/kfd", "/sys/class/drm", "/sys/module/amdgpu")
DRM_MAJOR = 226


def _write(root: Path, path: str, text: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def write(root: str | os.PathLike, path: str, text: str) -> None:
    """(Re)write one file of the copy under `root` (replaced whole, so a reader never sees half a value)."""
    target = Path(root) / path.lstrip("/")
    tmp = target.with_name(f".{target.name}.{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, target)


def live_files(system: "EmulatedSystem") -> dict:
    """The sysfs paths whose value changes while the machine runs -> the function giving it now."""
    return {path: value for path, value in system.sysfs.tree.items() if callable(value)}


def export(system: "EmulatedSystem", root: str | os.PathLike) -> list[tuple[str, str]]:
    """Write the system's sysfs under `root`; returns the (from, to) path-prefix rewrites for the interposer."""
    root = Path(root)
    for path, value in system.sysfs.tree.items():
        _write(root, path, value() if callable(value) else value)
    _write(root, "/sys/module/amdgpu/initstate", "live\n")
    (root / "sys/bus/pci/drivers/amdgpu").mkdir(parents=True, exist_ok=True)
    kfd_class = root / "sys/class/kfd/kfd"
    kfd_class.parent.mkdir(parents=True, exist_ok=True)
    kfd_class.symlink_to(Path(os.path.relpath(root / SYSFS_TOPOLOGY.lstrip("/"), kfd_class.parent)).parent)
    for i in range(len(system.gpus)):
        minor = system.props[i]["drm_render_minor"]
        node = root / f"sys/class/drm/renderD{minor}"
        device = node / "device"
        (device / "drm" / f"renderD{minor}").mkdir(parents=True, exist_ok=True)
        # the primary node's name: libdrm tells two devices apart by it (amdgpu_device_initialize's fd_compare
        # reads device/drm/card*); without one, every render node would be the same amdgpu device
        _write(root, f"/sys/class/drm/renderD{minor}/device/drm/card{i}/dev", f"{DRM_MAJOR}:{i}\n")
        _write(root, f"/sys/class/drm/renderD{minor}/device/drm/renderD{minor}/dev", f"{DRM_MAJOR}:{minor}\n")
        (device / "subsystem").symlink_to(os.path.relpath(root / "sys/bus/pci", device))
        (device / "driver").symlink_to(os.path.relpath(root / "sys/bus/pci/drivers/amdgpu", device))
        char = root / f"sys/dev/char/{DRM_MAJOR}:{minor}"
        char.parent.mkdir(parents=True, exist_ok=True)
        char.symlink_to(os.path.relpath(node, char.parent))
    chars = [f"/sys/dev/char/{DRM_MAJOR}:{system.props[i]['drm_render_minor']}" for i in range(len(system.gpus))]
    return [(prefix, str(root) + prefix) for prefix in (*OWNED, *chars)]
