"""The error hierarchy shared by the emulator and the runtime.

Errors are values with places: each carries where it happened (GPU, engine, queue, ring offset or PC,
address) and prints as one readable paragraph. This module imports nothing from the emulator, so the
runtime may use it too.
"""
from __future__ import annotations

from dataclasses import dataclass


class HcqsimError(Exception):
    """Base of every error hcqsim raises on purpose."""


def gpu_label(index: int, gpu_id: int | None = None) -> str:
    """How every message names a GPU: its index in the machine and, once the driver gave it one, its
    gpu_id (`GPU 0 (gpu_id 1829)`), so a report can be matched with the topology and the ioctls."""
    return f"GPU {index}" if gpu_id is None else f"GPU {index} (gpu_id {gpu_id})"


# ---------------------------------------------------------------------------------------------------
# raised inside engines, caught by the GPU and turned into a Fault record that stops the queue


class EngineError(HcqsimError):
    """Something an engine cannot execute. The GPU adds the place (queue, ring offset, packet)."""

    kind = "engine error"


class DecodeError(EngineError):
    """A malformed packet: bad header, reserved value, count past the write pointer, bad size."""

    kind = "decode error"


class UnsupportedError(EngineError):
    """A packet, field value or instruction that is valid on hardware but not emulated (yet)."""

    kind = "unsupported"


class VMFaultError(EngineError):
    """An access to a GPU virtual address that is unmapped or lacks the needed permission."""

    kind = "VM fault"

    def __init__(self, address: int, size: int, access: str, reason: str, page: int | None = None):
        self.address, self.size, self.access, self.reason = address, size, access, reason
        # the first page of the access that faulted: what hardware reports (the UTCL2 fault address is a page,
        # KFD's memory exception va = page_addr << PAGE_SHIFT), not the start of an access that began on a good page
        self.page = (address if page is None else page) & ~0xFFF
        super().__init__(f"{access} of {size} bytes at 0x{address:x}: {reason}")


class RunawayStop(EngineError):
    """A queue executed more packets (or launched more waves) in one progress point than the GPU's bound, or a
    kernel more wave-instructions than the shader core's: a stream or a kernel that does not end. The queue
    stops alone."""

    kind = "runaway"


@dataclass
class Fault:
    """What the GPU records when a queue stops on an error (a VM fault or a bad packet)."""

    gpu: int
    engine: str  # "pm4", "sdma", "shader"
    queue: str
    kind: str  # EngineError.kind
    message: str
    ring_offset: int | None = None  # byte offset in the ring (or IB) of the packet
    header: int | None = None  # raw dword 0 of the packet
    packet: str | None = None  # disassembly of the packet, when it decoded
    address: int | None = None  # faulting VA for VM faults: where the access started
    page: int | None = None  # VM faults: the first page of the access that faulted (what KFD reports)
    size: int | None = None
    access: str | None = None  # "read", "write", "execute"
    timestamp: int = 0  # virtual GPU clock at the fault
    where: str | None = None  # "ring" or "IB at 0x..."; for shader faults the kernel and PC
    gpu_id: int | None = None  # the driver's name of GPU `gpu`, when it has one

    @property
    def is_vm_fault(self) -> bool:
        return self.address is not None

    def __str__(self) -> str:
        place = f"{gpu_label(self.gpu, self.gpu_id)} {self.engine} queue {self.queue}"
        if self.ring_offset is not None:
            place += f", {self.where or 'ring'} offset 0x{self.ring_offset:x}"
        elif self.where:
            place += f", {self.where}"
        text = f"{self.kind} on {place} at t={self.timestamp}: {self.message}"
        if self.header is not None:
            text += f"\n  header dword 0x{self.header:08x}"
        if self.packet:
            text += f"\n  packet: {self.packet}"
        return text


# ---------------------------------------------------------------------------------------------------
# raised to the user


class QueueError(HcqsimError):
    """A queue was used wrongly (destroyed, faulted, ring full)."""


@dataclass
class BlockedQueue:
    queue: str
    packet: str  # disassembly of the waiting packet
    address: int | None
    awaited: str  # e.g. ">= 0x5 (mask 0xffffffff)"
    current: int | None
    ring_offset: int | None = None
    gpu: str = ""  # the GPU's label, e.g. "GPU 0 (gpu_id 1829)"


@dataclass
class SpinningWave:
    """A wave of a running kernel that loops on memory nobody writes (a livelock report's line)."""

    queue: str
    dispatch: int  # the queue's launch number
    kernel: str  # "0x..." address of its first instruction
    workgroup: tuple[int, int, int]
    wave: int  # within its workgroup
    pc: int  # offset from the kernel's first instruction
    instruction: str
    poll_pc: int | None = None  # the load it polls with (offset), when one ran while it was watched
    poll: str | None = None
    address: int | None = None  # the address that load reads (first active lane)
    value: int | None = None  # the u32 there now
    gpu: str = ""
    # a loop whose only change is a count (shader.spin): (register, change per iteration, value now) and the
    # iterations seen with the polled memory unchanged; () for a loop whose whole state recurs
    counting: tuple = ()
    iterations: int = 0

    def __str__(self) -> str:
        on = f" on {self.gpu}" if self.gpu else ""
        text = (f"  wave {self.wave} of workgroup {self.workgroup}, dispatch {self.dispatch} (kernel at {self.kernel}) "
                f"of queue {self.queue}{on} spins at PC +0x{self.pc:x}: {self.instruction}")
        if self.poll is not None:
            where = "an address it could not work out" if self.address is None else f"0x{self.address:x}"
            now = "" if self.value is None else f" (value now 0x{self.value:x})"
            text += f"\n    polling {where}{now} with +0x{self.poll_pc:x}: {self.poll}"
        if self.counting:
            regs = ", ".join(f"{r} ({d:+d} per iteration, now {v})" for r, d, v in self.counting)
            text += (f"\n    for {self.iterations} iterations with that memory unchanged, counting in {regs}: if "
                     f"the loop leaves once a count reaches a bound, hardware would leave then (EmulatedGPU("
                     f"spin_iterations=...) lets it count longer)")
        return text


class DeadlockError(HcqsimError):
    """A wait that can never be satisfied: the machine is quiescent (or nothing but spinning waves remains:
    a livelock) and the condition is false. `blocked` lists the blocked queues, `spinning` the spinning waves."""

    def __init__(self, waiting_for: str, blocked: list):
        self.waiting_for = waiting_for
        self.blocked = [b for b in blocked if isinstance(b, BlockedQueue)]
        self.spinning = [b for b in blocked if isinstance(b, SpinningWave)]
        if self.spinning:
            lines = [f"livelock: waiting for {waiting_for}, but nothing runs except waves that loop on memory "
                     f"nobody writes"]
        else:
            lines = [f"deadlock: waiting for {waiting_for}, but no queue can make progress"]
        if not blocked:
            lines.append("  no queue is blocked on a wait: nothing that could ever satisfy it is queued")
        lines += [str(w) for w in self.spinning]
        for b in self.blocked:
            cur = "unreadable" if b.current is None else f"0x{b.current:x}"
            addr = "" if b.address is None else f" at 0x{b.address:x}"
            off = "" if b.ring_offset is None else f" (ring offset 0x{b.ring_offset:x})"
            on = f" on {b.gpu}" if b.gpu else ""
            lines.append(f"  queue {b.queue}{on} blocked{off}: wants value{addr} {b.awaited}, current {cur}")
            lines.append(f"    {b.packet}")
        super().__init__("\n".join(lines))


class RunawayError(HcqsimError):
    """A progress point executed more packets than its bound (e.g. an IB chain that loops forever)."""


class DeviceFault(HcqsimError):
    """Raised by the runtime on its next call after a queue of the device faulted."""

    def __init__(self, faults: list):
        self.faults = list(faults)
        super().__init__("device fault:\n" + "\n".join(str(f) for f in self.faults))


class DeviceTimeout(HcqsimError):
    """A wait on real hardware ran out of time; carries each queue's state."""


class ConcurrentUseError(HcqsimError, RuntimeError):
    """A second host thread called into a Device while another was inside it (runtime/exclusive.py): refused at
    once, nothing done; the other thread's call is unharmed."""


class DeviceClosedError(HcqsimError):
    """A device (or the emulated system under it) was closed: its memory, signals and queues are gone, so every
    later use is refused with this error instead of touching memory that may no longer exist."""
