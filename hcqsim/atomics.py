"""TC_OP atomic operations, shared by PM4 ATOMIC_MEM and SDMA ATOMIC (same codes on both).

Codes (ROCr PM4 headers, HARDWARE_FACTS 3.3): 32-bit returning ops 0x01..0x19, 64-bit = +0x20,
non-returning = +0x40. "Returning" only matters for where the pre-op value goes (the engine keeps it
for COPY_DATA SRC_SEL 6); memory ends up the same either way.
"""
from __future__ import annotations

import struct

from .errors import UnsupportedError

BASE_OPS = {
    0x01: "FCMPSWAP", 0x02: "FMIN", 0x03: "FMAX",
    0x07: "SWAP", 0x08: "CMPSWAP", 0x0F: "ADD", 0x10: "SUB", 0x11: "SMIN", 0x12: "UMIN", 0x13: "SMAX",
    0x14: "UMAX", 0x15: "AND", 0x16: "OR", 0x17: "XOR", 0x18: "INC", 0x19: "DEC",
}

OP_NAMES: dict[int, str] = {}
for _code, _name in BASE_OPS.items():
    OP_NAMES[_code] = f"{_name}_RTN_32"
    OP_NAMES[_code + 0x20] = f"{_name}_RTN_64"
    OP_NAMES[_code + 0x40] = f"{_name}_32"
    OP_NAMES[_code + 0x60] = f"{_name}_64"


def decode_op(code: int) -> tuple[str, int, bool]:
    """(base name, width in bits, returns) of a TC_OP code; UnsupportedError when it is not one."""
    base = code & 0x1F
    if code > 0x7F or base not in BASE_OPS:
        raise UnsupportedError(f"atomic op 0x{code:x} is not a TC_OP atomic hcqsim knows")
    return BASE_OPS[base], 64 if code & 0x20 else 32, not code & 0x40


def _signed(v: int, bits: int) -> int:
    return v - (1 << bits) if v >> (bits - 1) else v


def _float(v: int, bits: int) -> float:
    return struct.unpack("<d" if bits == 64 else "<f", v.to_bytes(bits // 8, "little"))[0]


def apply(name: str, bits: int, old: int, src: int, cmp: int) -> int:
    """The new memory value of atomic `name` on `old` with operands `src` (and `cmp` for swaps)."""
    mask = (1 << bits) - 1
    old, src, cmp = old & mask, src & mask, cmp & mask
    if name == "SWAP":
        return src
    if name == "CMPSWAP":
        return src if old == cmp else old
    if name == "ADD":
        return (old + src) & mask
    if name == "SUB":
        return (old - src) & mask
    if name == "SMIN":
        return old if _signed(old, bits) <= _signed(src, bits) else src
    if name == "SMAX":
        return old if _signed(old, bits) >= _signed(src, bits) else src
    if name == "UMIN":
        return min(old, src)
    if name == "UMAX":
        return max(old, src)
    if name == "AND":
        return old & src
    if name == "OR":
        return old | src
    if name == "XOR":
        return old ^ src
    if name == "INC":  # wrapping increment: old >= src -> 0 (GPU atomic inc semantics)
        return 0 if old >= src else old + 1
    if name == "DEC":  # old == 0 or old > src -> src
        return src if old == 0 or old > src else old - 1
    if name == "FCMPSWAP":
        return src if _float(old, bits) == _float(cmp, bits) else old
    if name == "FMIN":
        return src if _float(src, bits) < _float(old, bits) else old
    if name == "FMAX":
        return src if _float(src, bits) > _float(old, bits) else old
    raise UnsupportedError(f"atomic {name} not emulated")
