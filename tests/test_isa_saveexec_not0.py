"""The saveexec forms that negate S0 (RDNA3.5 / CDNA4 SOP1 pseudocode):
S_AND_NOT0_SAVEEXEC (GFX9 S_ANDN1_SAVEEXEC_B64): saveexec = EXEC; EXEC = (~S0 & EXEC); D0 = saveexec; SCC = EXEC != 0.
S_OR_NOT0_SAVEEXEC (GFX9 S_ORN1_SAVEEXEC_B64): EXEC = (~S0 | EXEC)."""
from __future__ import annotations

import pytest

from isa_harness import keep_accepted, no_assembler_reason, verify
from test_isa_salu_rest import saveexec_cases

CASES, REJECTED = [], []
for arch, ops in (("gfx1100", {"and_not0": lambda s, e: ~s & e, "or_not0": lambda s, e: ~s | e}),
                  ("gfx942", {"andn1": lambda s, e: ~s & e, "orn1": lambda s, e: ~s | e})):
    pending = saveexec_cases(arch, ops)
    ok, bad = keep_accepted(arch, pending) if not no_assembler_reason(arch) else (pending, [])
    CASES += ok
    REJECTED += bad


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_saveexec_negating_s0(case):
    verify(case)


def test_texts_assemble():
    assert not REJECTED, "\n".join(REJECTED)
