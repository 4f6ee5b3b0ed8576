"""The hcqsim runtime: devices, buffers, signals and queues over one OS boundary.

`open_device("sim")` runs on the emulator (a fresh emulated system: KFD driver + GPUs), `open_device("AMD")`
on /dev/kfd. The code above the boundary is the same for both.
"""
from __future__ import annotations

from ..boundary import KFD_PATH, OSBoundary
from .device import Buffer, Device, KFDProcess
from .queues import ComputeQueue, CopyQueue
from .real_os import RealOS
from .schedule import Param, Schedule, region
from .signal import Signal

__all__ = ["open_device", "open_devices", "parse_spec", "Device", "Buffer", "Signal", "ComputeQueue", "CopyQueue",
           "OSBoundary", "RealOS", "NoDeviceError", "Schedule", "Param", "region"]

_real_process: KFDProcess | None = None


class NoDeviceError(RuntimeError):
    """The requested hardware is not present."""


def parse_spec(spec: str) -> tuple[str, int]:
    """"sim", "sim:2", "AMD", "AMD:1" -> (kind, index)."""
    kind, _, idx = spec.partition(":")
    if kind not in ("sim", "AMD") or (idx and not idx.isdigit()):
        raise ValueError(f"device spec {spec!r}: expected sim, sim:N, AMD or AMD:N")
    return kind, int(idx or 0)


class _SimOwner:
    """Closes an emulated system once all devices opened on it are closed."""

    def __init__(self, system, count: int):
        self.system, self.open = system, count

    def device_closed(self, device: Device) -> None:
        self.open -= 1
        if self.open == 0:
            self.system.close()


def open_devices(spec: str = "sim", count: int = 1, *, sanitize: bool = False, poison: int | bool | None = None,
                 aql: bool = False, **sim_options) -> list[Device]:
    """`count` devices starting at the spec's index. On "sim", one emulated system with that many GPUs
    (options: target, seed, policy); on "AMD", GPUs of this machine's KFD. `sanitize=True`: freed memory
    and signals are unmapped at once and their VA held back, so later GPU use is a VM fault naming them;
    `poison` (True or a 32-bit pattern) fills new allocations (docs/runtime.md, "Sanitizer mode"). `aql=True`: compute
    queues are COMPUTE_AQL queues (kernels as AQL dispatch packets, other commands as PM4 in vendor packets)."""
    kind, first = parse_spec(spec)
    checks = dict(sanitize=sanitize, poison=poison, aql=aql)
    if kind == "sim":
        from ..kfd import EmulatedSystem  # only here (and in the pytest plugin) is the emulator chosen
        system = EmulatedSystem(num_gpus=first + count, **sim_options)
        owner = _SimOwner(system, count)
        process = KFDProcess(system.os)
        devs = [Device(process, first + i, owner=owner, **checks) for i in range(count)]
        opened = getattr(sim_options.get("policy"), "devices_opened", None)
        if opened is not None:  # a policy object that reports in the runtime's terms (strategies.Interleaver)
            opened(devs)
        return devs
    process = _hardware_process()
    if first + count > len(process.nodes):
        raise NoDeviceError(f"{spec} needs {first + count} GPU(s); KFD reports {len(process.nodes)}")
    return [Device(process, first + i, **checks) for i in range(count)]


def open_device(spec: str = "sim", *, sanitize: bool = False, poison: int | bool | None = None,
                aql: bool = False, **sim_options) -> Device:
    """One device: "sim" / "sim:N" (emulated), "AMD" / "AMD:N" (real). `sanitize`, `poison`, `aql`: see
    open_devices."""
    kind, index = parse_spec(spec)
    if kind == "sim":
        return open_devices(f"sim:{index}", 1, sanitize=sanitize, poison=poison, aql=aql, **sim_options)[0]
    process = _hardware_process()
    existing = process.devices.get(process.nodes[index].gpu_id) if index < len(process.nodes) else None
    return existing or open_devices(spec, 1, sanitize=sanitize, poison=poison, aql=aql)[0]


def _hardware_process() -> KFDProcess:
    global _real_process
    if _real_process is None:
        os_ = RealOS()
        if not os_.exists(KFD_PATH):
            raise NoDeviceError(f"{KFD_PATH} does not exist: no AMD GPU with the KFD driver on this machine")
        _real_process = KFDProcess(os_)
    return _real_process
