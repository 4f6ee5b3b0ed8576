"""More SALU instructions on gfx1100 and gfx942 against the RDNA3.5 / CDNA4 SOP1/SOP2/SOPC pseudocode: 32/64-bit
logic (SCC = result != 0), shifts (SCC = result != 0), add/sub with carry/borrow in SCC (and the signed forms' SCC =
overflow), s_mul_i32 / s_bfm / s_mov / s_pack (SCC unchanged), s_cselect (reads SCC), s_cmp_* (SCC = the compare).
References take SCC in as their last argument and return (D0 or None when no destination, SCC or None = unchanged)."""
from __future__ import annotations

import numpy as np
import pytest

import isa_reference as ref
from isa_harness import keep_accepted, no_assembler_reason, rng, run_instruction, values, verify

WAVES = 128
SRC = (10, 12)
DST = 2
M32, M64 = ref.mask(32), ref.mask(64)


class Case:
    def __init__(self, arch, line, fn, srcs, dst_bits, doc=""):
        self.arch, self.line, self.fn, self.srcs, self.dst_bits, self.doc = arch, line, fn, srcs, dst_bits, doc

    @property
    def id(self):
        return f"{self.arch}: {self.line}"

    def check(self):
        r = rng(self.arch, self.line)
        cols = [values(f"b{w}", WAVES, r) for w in self.srcs]
        for i in range(WAVES):  # equal operands now and then (compares, xor)
            if len(cols) == 2 and r.random() < 0.15:
                cols[1][i] = cols[0][i] & ref.mask(self.srcs[1])
        old = values("b64", WAVES, r)
        scc_in = [r.getrandbits(1) for _ in range(WAVES)]
        s = {}
        for reg, w, col in zip(SRC, self.srcs, cols):
            a = np.array(col, np.uint64)
            s[reg] = (a & np.uint64(M32)).astype(np.uint32)
            if w == 64:
                s[reg + 1] = (a >> np.uint64(32)).astype(np.uint32)
        o = np.array(old, np.uint64)
        s[DST] = (o & np.uint64(M32)).astype(np.uint32)
        s[DST + 1] = (o >> np.uint64(32)).astype(np.uint32)
        st = run_instruction(self.arch, self.line, waves=WAVES, s=s, scc=np.array(scc_in, bool))
        got = st.scalar64(DST)
        bad = []
        for i in range(WAVES):
            d, scc = self.fn(*[c[i] for c in cols], scc_in[i])
            want_d = old[i] if d is None else (d if self.dst_bits == 64 else (old[i] & ~M32) | d)
            want_scc = scc_in[i] if scc is None else scc
            g = int(got[i])
            if g != want_d or int(st.scc[i]) != want_scc:
                bad.append(f"wave {i}: sources ({', '.join(hex(c[i]) for c in cols)}), SCC in {scc_in[i]}: got "
                           f"0x{g:x} SCC {int(st.scc[i])}, want 0x{want_d:x} SCC {want_scc}")
        if bad:
            return f"{self.line}: {len(bad)} of {WAVES} waves differ ({self.doc})\n    " + "\n    ".join(bad[:6])
        return None


def reg(r, w):
    return f"s[{r}:{r + 1}]" if w == 64 else f"s{r}"


def nz(bits, op):
    def fn(*a):
        d = op(*a[:-1]) & ref.mask(bits)
        return d, int(d != 0)
    return fn


def keep(op):
    return lambda *a: (op(*a[:-1]), None)


def add_u(a, b, c):
    t = a + b
    return t & M32, int(t >> 32 != 0)


def sub_u(a, b, c):
    return (a - b) & M32, int(b > a)


def addc(a, b, c):
    t = a + b + c
    return t & M32, int(t >> 32 != 0)


def subb(a, b, c):
    return (a - b - c) & M32, int(b + c > a)


def add_i(a, b, c):
    """S_ADD_I32: D0 = S0 + S1; SCC = the signs of S0 and S1 agree and differ from D0's (signed overflow)."""
    d = (a + b) & M32
    return d, int((a >> 31) == (b >> 31) and (a >> 31) != (d >> 31))


def sub_i(a, b, c):
    """S_SUB_I32: D0 = S0 - S1; SCC = S0 and S1 differ in sign and D0's sign differs from S0's."""
    d = (a - b) & M32
    return d, int((a >> 31) != (b >> 31) and (a >> 31) != (d >> 31))


CASES: list[Case] = []
REJECTED: list[str] = []
for arch in ("gfx1100", "gfx942"):
    g11 = arch == "gfx1100"
    andn, orn = ("and_not1", "or_not1") if g11 else ("andn2", "orn2")
    rows = []  # (mnemonic, source widths, destination width or 0, reference, doc)
    for w in (32, 64):
        m = ref.mask(w)
        b = f"b{w}"
        for nm, op in (("and", lambda x, y: x & y), ("or", lambda x, y: x | y), ("xor", lambda x, y: x ^ y),
                       ("nand", lambda x, y, m=m: ~(x & y) & m), ("nor", lambda x, y, m=m: ~(x | y) & m),
                       ("xnor", lambda x, y, m=m: ~(x ^ y) & m), (andn, lambda x, y, m=m: x & ~y & m),
                       (orn, lambda x, y, m=m: (x | ~y) & m)):
            rows.append((f"s_{nm}_{b}", (w, w), w, nz(w, op), f"S_{nm.upper()}_{b.upper()}: SCC = D0 != 0"))
        rows.append((f"s_not_{b}", (w,), w, nz(w, lambda x, m=m: ~x & m), "S_NOT: D0 = ~S0; SCC = D0 != 0"))
        rows.append((f"s_mov_{b}", (w,), w, keep(lambda x: x), "S_MOV: D0 = S0; SCC unchanged"))
        rows.append((f"s_lshl_{b}", (w, 32), w, nz(w, lambda x, y, w=w: x << (y & (w - 1))),
                     "S_LSHL: D0 = S0 << S1[4:0] (64: [5:0]); SCC = D0 != 0"))
        rows.append((f"s_lshr_{b}", (w, 32), w, nz(w, lambda x, y, w=w: x >> (y & (w - 1))),
                     "S_LSHR: D0 = S0 >> S1[4:0]; SCC = D0 != 0"))
        rows.append((f"s_ashr_i{w}", (w, 32), w, nz(w, lambda x, y, w=w: ref.sext(x, w) >> (y & (w - 1))),
                     "S_ASHR: D0.i = S0.i >> S1[4:0]; SCC = D0 != 0"))
        rows.append((f"s_bfm_{b}", (32, 32), w, keep(lambda x, y, m=m: ((1 << (x & 31 if m == M32 else x & 63)) - 1)
                                                     << (y & (31 if m == M32 else 63)) & m),
                     "S_BFM: D0 = ((1 << S0[4:0]) - 1) << S1[4:0] (64: [5:0]); SCC unchanged"))
        rows.append((f"s_cselect_{b}", (w, w), w, lambda x, y, c: (x if c else y, None),
                     "S_CSELECT: D0 = SCC ? S0 : S1; SCC unchanged"))
    rows += [("s_add_u32", (32, 32), 32, add_u, "S_ADD_U32: SCC = carry out"),
             ("s_sub_u32", (32, 32), 32, sub_u, "S_SUB_U32: SCC = borrow (S1 > S0)"),
             ("s_addc_u32", (32, 32), 32, addc, "S_ADDC_U32: D0 = S0 + S1 + SCC; SCC = carry out"),
             ("s_subb_u32", (32, 32), 32, subb, "S_SUBB_U32: D0 = S0 - S1 - SCC; SCC = borrow"),
             ("s_add_i32", (32, 32), 32, add_i, add_i.__doc__), ("s_sub_i32", (32, 32), 32, sub_i, sub_i.__doc__),
             ("s_mul_i32", (32, 32), 32, keep(lambda x, y: (x * y) & M32), "S_MUL_I32: SCC unchanged"),
             ("s_pack_ll_b32_b16", (32, 32), 32, keep(lambda x, y: (x & 0xFFFF) | (y & 0xFFFF) << 16), "S_PACK_LL"),
             ("s_pack_lh_b32_b16", (32, 32), 32, keep(lambda x, y: (x & 0xFFFF) | (y & 0xFFFF0000)), "S_PACK_LH"),
             ("s_pack_hh_b32_b16", (32, 32), 32, keep(lambda x, y: (x >> 16) | (y & 0xFFFF0000)), "S_PACK_HH")]
    if g11:
        rows.append(("s_pack_hl_b32_b16", (32, 32), 32, keep(lambda x, y: (x >> 16) | (y & 0xFFFF) << 16),
                     "S_PACK_HL"))
    cmps = {"eq": lambda x, y: x == y, "lg": lambda x, y: x != y, "gt": lambda x, y: x > y,
            "ge": lambda x, y: x >= y, "lt": lambda x, y: x < y, "le": lambda x, y: x <= y}
    for p, op in cmps.items():
        for t in ("i32", "u32"):
            conv = (lambda x: ref.sext(x, 32)) if t == "i32" else (lambda x: x)
            rows.append((f"s_cmp_{p}_{t}", (32, 32), 0, lambda x, y, c, op=op, conv=conv: (None, int(op(conv(x), conv(y)))),
                         f"S_CMP_{p.upper()}_{t.upper()}: SCC = S0 {p} S1"))
    for p in ("eq", "lg"):
        rows.append((f"s_cmp_{p}_u64", (64, 64), 0, lambda x, y, c, op=cmps[p]: (None, int(op(x, y))),
                     f"S_CMP_{p.upper()}_U64: SCC = S0 {p} S1"))
    pending = []
    for nm, srcs, dw, fn, doc in rows:
        ops = ", ".join(reg(r, w) for r, w in zip(SRC, srcs))
        line = f"{nm} {reg(DST, dw)}, {ops}" if dw else f"{nm} {ops}"
        pending.append(Case(arch, line, fn, srcs, dw or 64, doc))
    ok, bad = keep_accepted(arch, pending) if not no_assembler_reason(arch) else (pending, [])
    CASES += ok
    REJECTED += bad


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_scalar_result_and_scc_follow_the_pseudocode(case):
    verify(case)


def test_every_generated_instruction_text_assembles():
    assert not REJECTED, "\n".join(REJECTED)
