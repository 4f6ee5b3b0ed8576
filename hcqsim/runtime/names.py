"""What the addresses in a failure report are, in the user's terms: signals, buffers and kernels.

A DeadlockError, DeviceFault or DeviceTimeout that reaches the user through a runtime wait carries the
emulator's (or the driver's) report, which can only name virtual addresses. The runtime knows what it handed
out at those addresses, so it appends a section, "where these addresses are", with one line per address:

    0x200000009020: signal 'ready' #3 (created at test_x.py:42)
    0x20000000a614: kernel store_bad +0x14 (program loaded at test_x.py:50)
    0x20000000c010: buffer 'out' #5 +0x10 (256 bytes, allocated at test_x.py:44)

The original text stays as it was, above the section, and the exception keeps its type and attributes.
Addresses the report is about (a fault's VA, the value a blocked queue waits on) always get a line, even when
no object holds them ("in no live buffer, signal or kernel", with the nearest buffer named as *not* containing
it); any other hex number gets a line only when it falls inside an object, so register values and masks are
never dressed up as places. Creation sites are recorded once, when the object is made (`creation_site`).
"""
from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from .device import Buffer, Device

SECTION = "where these addresses are (hcqsim runtime):"
NEIGHBOURHOOD = 64 << 10  # an address this close to a buffer's end or start names it as the nearest one
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_inside: dict[str, bool] = {}  # co_filename -> is it a file of the hcqsim package


def creation_site() -> str:
    """'file.py:line' of the innermost frame outside the hcqsim package: the user's line that made the
    object. Costs one frame walk, at creation only."""
    f = sys._getframe(1)
    while f is not None:
        name = f.f_code.co_filename
        inside = _inside.get(name)
        if inside is None:
            inside = _inside[name] = os.path.abspath(name).startswith(_PACKAGE)
        if not inside:
            return f"{os.path.basename(name)}:{f.f_lineno}"
        f = f.f_back
    return "unknown location"


def signal_label(sig) -> str:
    name = f"'{sig.name}' #{sig.number}" if sig.name else f"#{sig.number}"
    return f"signal {name}"


def buffer_label(buf: "Buffer") -> str:
    root = buf.allocation
    name = f"'{root.name}' #{root.number}" if root.name else f"#{root.number}"
    return f"buffer {name}"


def _signal_line(sig, address: int, freed: bool) -> str:
    off = address - sig.va
    part = "" if off == 0 else (" timestamp" if off == 8 else f" +0x{off:x}")
    if freed:
        return f"freed {signal_label(sig)}{part} (created at {sig.created_at}, {sig.freed_at})"
    return f"{signal_label(sig)}{part} (created at {sig.created_at})"


def _program_line(program, address: int) -> str | None:
    base = program.image.va
    for symbol, start, size in program.symbols:
        if base + start <= address < base + start + size:
            return f"kernel {symbol} +0x{address - base - start:x} (program loaded at {program.loaded_at})"
    if base <= address < base + program.image.size:
        return (f"code object of kernel {program.name} +0x{address - base:x}, outside every kernel's code "
                f"(program loaded at {program.loaded_at})")
    return None


def _buffer_line(buf: "Buffer", address: int) -> str | None:
    off = address - buf.va
    if buf.allocated_at is None:  # the runtime's own memory: rings, kernargs, staging, event and signal pages
        return f"memory the runtime allocated for itself (+0x{off:x} in {buf!r})" if 0 <= off < buf.alloc_size \
            else None
    where = f"allocated at {buf.allocated_at}"
    if 0 <= off < buf.size:
        return f"{buffer_label(buf)} +0x{off:x} ({buf.size} bytes, {where})"
    if buf.size <= off < buf.alloc_size:
        return (f"0x{off - buf.size:x} bytes past the end of {buffer_label(buf)} ({buf.size} bytes, {where}), in "
                f"its page padding: not part of the buffer")
    return None


def _nearest_line(devices: Iterable["Device"], address: int) -> str:
    best = None
    for dev in devices:
        for buf in dev._buffers.values():
            if buf.allocated_at is None:
                continue
            gap = address - (buf.va + buf.alloc_size) if address >= buf.va else buf.va - address
            if 0 <= gap <= NEIGHBOURHOOD and (best is None or gap < best[0]):
                best = (gap, buf, address >= buf.va)
    text = "in no live buffer, signal or kernel of this process"
    if best is None:
        return text
    gap, buf, above = best
    side = f"0x{address - buf.va - buf.size:x} bytes past the end of" if above else f"0x{gap:x} bytes before"
    return f"{text}; nearest: {side} {buffer_label(buf)} ({buf.size} bytes, allocated at {buf.allocated_at})"


def describe_address(devices: list["Device"], address: int) -> str | None:
    """What `address` is among the live (or recently freed) objects of `devices`; None when nothing is there."""
    for dev in devices:
        for sig in dev._signals.values():
            if sig.va <= address < sig.va + 16:
                return _signal_line(sig, address, freed=False)
        for sig in dev._pending_signals:
            if sig.va <= address < sig.va + 16:
                return _signal_line(sig, address, freed=True)
    for dev in devices:
        for ref in dev._programs:
            program = ref()
            if program is not None and program.image.live and (line := _program_line(program, address)):
                return line
    for dev in devices:
        for buf in dev._buffers.values():
            if line := _buffer_line(buf, address):
                return line
    for dev in devices:
        if what := dev.freed_memory_at(address):
            return f"freed memory (sanitizer): {what}"
    return None


_HEX = re.compile(r"(?<![+\w])0x([0-9a-fA-F]+)")
_PC = re.compile(r"kernel at 0x([0-9a-fA-F]+)[^\n]*?PC \+0x([0-9a-fA-F]+)")
_SUBJECT = re.compile(r"(?:at VA|bytes at|value at|polling) 0x([0-9a-fA-F]+)")


def addresses_section(text: str, devices: list["Device"]) -> str | None:
    """The "where these addresses are" section for a report `text`, or None when it names no address."""
    subjects = {int(m.group(1), 16) for m in _SUBJECT.finditer(text)}
    found: dict[int, str] = {}
    entries = set()  # a kernel's first instruction, cited with a PC: named once, as entry + PC
    for m in _PC.finditer(text):  # a shader report: the instruction's address is the kernel's plus the PC
        entries.add(int(m.group(1), 16))
        address = int(m.group(1), 16) + int(m.group(2), 16)
        found.setdefault(address, describe_address(devices, address) or "")
    for m in _HEX.finditer(text):
        address = int(m.group(1), 16)
        if address in found or address in entries:
            continue
        line = describe_address(devices, address)
        if line is None and address in subjects:
            line = _nearest_line(devices, address)
        found[address] = line or ""
    lines = [f"  0x{a:x}: {line}" for a, line in found.items() if line]
    return "\n".join([SECTION, *lines]) if lines else None


def name_addresses(error: BaseException, device: "Device") -> None:
    """Append the section to `error`'s message in place (type and attributes unchanged); once only."""
    text = str(error)
    if SECTION in text:
        return
    devices = [d for d in device.process.devices.values() if not d._closed]
    try:
        section = addresses_section(text, devices)
    except Exception as e:  # naming must never hide the report it explains
        section = f"{SECTION}\n  (could not be worked out: {type(e).__name__}: {e})"
    if section:
        error.args = (f"{text}\n{section}",)
