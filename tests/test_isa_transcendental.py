"""Rounding (v_floor/v_ceil/v_trunc/v_rndne/v_fract) and approximate (v_rcp/v_rcp_iflag/v_rsq/v_sqrt/v_exp/v_log)
VOP1 instructions on gfx1100 and gfx942, f16/f32/f64, one at a time against references from the RDNA3.5 / CDNA4
VOP1 pseudocode (tests/isa_reference.py), with random neg/abs/clamp/omod (and gfx11 .l/.h halves).

Rounding ops are exact. The approximate ones are compared with the exactly computed value (mpmath, 160 bits) within
the guides' bounds: f32 "1ULP accuracy", f16 "0.51ULP" (asserted as 1 ulp of the correctly rounded value), f64
v_rcp/v_rsq/v_sqrt "(2**29)ULP accuracy"; the special values the pseudocode or its functional examples fix (+-0,
+-inf, negative inputs of sqrt/rsq/log, NaN) are asserted exactly (a NaN result: any quiet NaN). The f32 notes say
"denormals are flushed": lanes with a denormal input, or a result below the normal range, are not asserted (ANY),
since hcqsim keeps denormals as FLOAT_MODE 0xF0 asks and hardware flushes there. GFX9: f16 results zero bits 31:16
(LLVM GCNSubtarget::zeroesHigh16BitsOfDest lists every one of these)."""
from __future__ import annotations

import pytest

import isa_harness
import isa_reference as ref
from isa_harness import Check, keep_accepted, no_assembler_reason, variants, verify

isa_harness.NAN_CLAMP = ref.ANY
FLOATS = {"f16": ref.F16, "f32": ref.F32, "f64": ref.F64}
ULP = {"f16": Check(ulp=1.0), "f32": Check(ulp=1.0), "f64": Check(ulp=2.0 ** 29)}

GROUPS: dict[str, list] = {"round": [], "approx": []}
REJECTED: list[str] = []
WANTED: dict[str, set[str]] = {"gfx1100": set(), "gfx942": set()}


def _doc(fn) -> str:
    d = fn.__doc__ or ""
    return " ".join(d.split())[:160]


for arch in ("gfx1100", "gfx942"):
    pending = []

    def V(key, name, k, fn, factory=None, **kw):
        WANTED[arch].add(name)
        if factory is not None:
            fn.__doc__ = factory.__doc__
        if arch == "gfx942" and k == "f16":
            kw.setdefault("zero_hi", True)
        for c in variants(arch, name, (k,), k, fn, _doc(fn), n64=2, **kw):
            pending.append((key, c))

    for k, f in FLOATS.items():
        for mode in ("floor", "ceil", "trunc", "rndne"):
            fn = ref.round_int(f, mode)
            fn.__doc__ = ref.round_int.__doc__
            V("round", f"v_{mode}_{k}", k, fn)
        V("round", f"v_fract_{k}", k, ref.fract(f), ref.fract)
        flush = k == "f32"
        for nm, mk in (("rcp", ref.rcp), ("rsq", ref.rsq), ("sqrt", ref.sqrt)):
            V("approx", f"v_{nm}_{k}", k, mk(f, flush), mk, compare=ULP[k])
        if k != "f64":
            V("approx", f"v_exp_{k}", k, ref.exp2(f, flush), ref.exp2, compare=ULP[k])
            V("approx", f"v_log_{k}", k, ref.log2(f, flush), ref.log2, compare=ULP[k])
    V("approx", "v_rcp_iflag_f32", "f32", ref.rcp(ref.F32, True), ref.rcp, compare=ULP["f32"])
    cases = [c for _, c in pending]
    ok, bad = keep_accepted(arch, cases) if not no_assembler_reason(arch) else (cases, [])
    keep = {id(c) for c in ok}
    for key, c in pending:
        if id(c) in keep:
            GROUPS[key].append(c)
    REJECTED += bad

CASES = [c for cs in GROUPS.values() for c in cs]


@pytest.mark.parametrize("case", GROUPS["round"], ids=[c.id for c in GROUPS["round"]])
def test_rounding_to_integers_and_fract_are_exact(case):
    verify(case)


@pytest.mark.parametrize("case", GROUPS["approx"], ids=[c.id for c in GROUPS["approx"]])
def test_transcendentals_within_the_documented_ulp_and_exact_at_special_values(case):
    verify(case)


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_every_opcode_keeps_an_assembled_form(arch):
    if no_assembler_reason(arch):
        pytest.skip(no_assembler_reason(arch))
    kept = {c.line.split()[0].removesuffix("_e32").removesuffix("_e64") for c in CASES if c.arch == arch}
    assert WANTED[arch] <= kept, f"no assembled form of {sorted(WANTED[arch] - kept)}:\n" + "\n".join(REJECTED[:20])
