"""What the shader core launches: one dispatch's launch state, as the command processor decoded it from the
SH registers (DISPATCH_DIRECT, `hcqsim.engines.dispatch`) or from an AQL kernel dispatch packet and its
kernel descriptor (`hcqsim.engines.aql`). The shader core sits below the engines and knows nothing of
packets: this is the whole interface between them.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Dispatch:
    """One dispatch: what the shader core needs to launch its waves."""

    queue: str
    pgm_addr: int  # first instruction
    rsrc1: int
    rsrc2: int
    rsrc3: int
    user_data: list[int]  # USER_DATA_0 .. USER_DATA_{user_sgpr-1}
    groups: tuple[int, int, int]  # workgroup counts (including partial groups)
    start: tuple[int, int, int]
    group_size: tuple[int, int, int]  # NUM_THREAD_*.FULL
    partial_size: tuple[int, int, int]  # size of the trailing partial group per dim (0 = none)
    wave_size: int
    lds_bytes: int
    scratch_base: int
    tmpring_size: int
    resource_limits: int
    initiator: int
