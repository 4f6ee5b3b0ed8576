"""gfx942 AccVGPR moves against the CDNA4 12.10 pseudocode (V_ACCVGPR_READ: D0.b32 = S0.b32 with S0 an AGPR;
V_ACCVGPR_WRITE: D0.b32 = S0.b32 into an AGPR; V_ACCVGPR_MOV_B32: AGPR to AGPR), active lanes only. The harness
gives the core an ACCUM_OFFSET of 16: a[n] is unified register 16 + n (v16..v31 of the test's register file)."""
from __future__ import annotations

import numpy as np
import pytest

from isa_harness import LANES, Unimplemented, no_assembler_reason, rng, run_instruction

ARCH = "gfx942"
CASES: list = []  # whole-wave checks: none for `python3 -m tests.isa_harness --report`
ACC = 16
WAVES = 4


def _vgpr(r):
    return np.array([r.getrandbits(32) for _ in range(WAVES * LANES[ARCH])], np.uint32)


MOVES = [  # (line, destination unified register, source: ("v", unified register) / ("s", sgpr) / ("k", value))
    ("v_accvgpr_write_b32 a1, v10", ACC + 1, ("v", 10)),
    ("v_accvgpr_write_b32 a15, v12", ACC + 15, ("v", 12)),
    ("v_accvgpr_write_b32 a3, -7", ACC + 3, ("k", 0xFFFFFFF9)),
    ("v_accvgpr_write_b32 a4, 64", ACC + 4, ("k", 64)),
    ("v_accvgpr_read_b32 v2, a3", 2, ("v", ACC + 3)),
    ("v_accvgpr_read_b32 v5, a0", 5, ("v", ACC)),
    ("v_accvgpr_mov_b32 a2, a5", ACC + 2, ("v", ACC + 5)),
    ("v_accvgpr_mov_b32 a7, a7", ACC + 7, ("v", ACC + 7)),
]


@pytest.mark.parametrize("line,dst,src", MOVES, ids=[c[0] for c in MOVES])
def test_accvgpr_moves_follow_accum_offset(line, dst, src):
    if no_assembler_reason(ARCH):
        pytest.skip(no_assembler_reason(ARCH))
    r = rng(ARCH, line)
    regs = {reg: _vgpr(r) for reg in range(32) if reg not in (0, 1)}
    ex = np.array([r.random() < 0.8 for _ in range(WAVES * LANES[ARCH])], bool)
    try:
        st = run_instruction(ARCH, line, waves=WAVES, v=regs, exec_lanes=ex, accum_offset=ACC)
    except Unimplemented as e:
        pytest.xfail(f"unimplemented: {e}")
    kind, x = src
    value = regs[x] if kind == "v" else np.full(WAVES * LANES[ARCH], x, np.uint32)
    bad = []
    for reg in range(2, 32):
        want = np.where(ex, value, regs[reg]) if reg == dst else regs[reg]
        got = st.vector(reg)
        for lane in np.flatnonzero(got != want)[:4]:
            bad.append(f"unified v{reg} lane {lane}{'' if ex[lane] else ' (inactive)'}: got 0x{int(got[lane]):x}, "
                       f"want 0x{int(want[lane]):x}")
    assert not bad, f"{line} (ACCUM_OFFSET {ACC}): " + "; ".join(bad[:8])
