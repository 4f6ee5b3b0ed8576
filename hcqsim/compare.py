"""Compare functions of PM4 WAIT_REG_MEM and SDMA POLL_REGMEM (the same 3-bit codes on both engines).

`NAMES` prints a code, `COMPARE` evaluates it on `(masked value, reference)`; `EQUAL` and
`GREATER_EQUAL` are the two codes runtimes and engines spell out (a signal wait, a compare-swap retry).
"""
from __future__ import annotations

from typing import Callable

NAMES: dict[int, str] = {0: "always", 1: "<", 2: "<=", 3: "==", 4: "!=", 5: ">=", 6: ">"}
COMPARE: dict[int, Callable[[int, int], bool]] = {
    0: lambda v, r: True,
    1: lambda v, r: v < r,
    2: lambda v, r: v <= r,
    3: lambda v, r: v == r,
    4: lambda v, r: v != r,
    5: lambda v, r: v >= r,
    6: lambda v, r: v > r,
}
EQUAL, GREATER_EQUAL = 3, 5
