"""The remaining SALU instructions on gfx1100 and gfx942 against the RDNA3.5 / CDNA4 SOP1/SOP2/SOPC/SOPK
pseudocode: *_saveexec (D0 = EXEC; EXEC = S0 op EXEC; SCC = EXEC != 0), s_cmov/s_cmovk (D0 = S0 if SCC; SCC
unchanged), s_bitcmp0/1 (SCC = S0[S1[4:0]] == 0/1; 64-bit: S1[5:0]), s_bitset0/1_b64 (D0[S0[5:0]] = 0/1), SOPK
s_movk/s_addk/s_mulk/s_cmpk (the i32 forms sign-extend the 16-bit immediate, the u32 compares zero-extend it;
s_addk's SCC = signed overflow), s_quadmask (D0[i] = S0[4i+3:4i] != 0), s_wqm (each quad all ones when any bit is
set), gfx942 s_ff0 (the first zero bit, -1 for none). References take the sources, the old destination, SCC and
EXEC and return (D0 or None = unchanged, SCC or None = unchanged, EXEC or None = unchanged)."""
from __future__ import annotations

import numpy as np
import pytest

import isa_reference as ref
from isa_harness import LANES, keep_accepted, no_assembler_reason, rng, run_instruction, values, verify
from hcqsim.shader.waves import EXEC

WAVES = 96
SRC = (10, 12)
DST = 2
M32, M64 = ref.mask(32), ref.mask(64)


class Case:
    def __init__(self, arch, line, fn, srcs, dst_bits, doc="", dst_low_only=False):
        self.arch, self.line, self.fn, self.srcs, self.dst_bits, self.doc = arch, line, fn, srcs, dst_bits, doc
        self.dst_low_only = dst_low_only  # wave32 b64 saveexec: EXEC_HI (and so D0[63:32], SCC) not asserted

    @property
    def id(self):
        return f"{self.arch}: {self.line}"

    def check(self):
        lanes = LANES[self.arch]
        r = rng(self.arch, self.line)
        cols = [values(f"b{w}", WAVES, r) for w in self.srcs]
        for i in range(WAVES):  # small bit indices now and then (bitcmp, bitset)
            if cols and r.random() < 0.3:
                cols[-1][i] = r.randrange(0, 80)
        old = values("b64", WAVES, r)
        scc_in = [r.getrandbits(1) for _ in range(WAVES)]
        exec_in = []
        for i in range(WAVES):
            e = r.choice([0, ref.mask(lanes), r.getrandbits(lanes), 1 << r.randrange(lanes)])
            exec_in.append(e)
        s = {}
        for reg, w, col in zip(SRC, self.srcs, cols):
            a = np.array(col, np.uint64)
            s[reg] = (a & np.uint64(M32)).astype(np.uint32)
            if w == 64:
                s[reg + 1] = (a >> np.uint64(32)).astype(np.uint32)
        o = np.array(old, np.uint64)
        s[DST] = (o & np.uint64(M32)).astype(np.uint32)
        s[DST + 1] = (o >> np.uint64(32)).astype(np.uint32)
        ex = np.array([[(e >> k) & 1 for k in range(lanes)] for e in exec_in], bool)
        st = run_instruction(self.arch, self.line, waves=WAVES, s=s, scc=np.array(scc_in, bool),
                             exec_lanes=ex.reshape(-1))
        got = st.scalar64(DST)
        got_exec = st.mask(EXEC).reshape(WAVES, lanes)
        bad = []
        for i in range(WAVES):
            d, scc, e = self.fn(*[c[i] for c in cols], old[i], scc_in[i], exec_in[i])
            if d is None:
                want_d = old[i]
            elif self.dst_bits == 64:
                want_d = d & M64
            else:
                want_d = (old[i] & ~M32) | (d & M32)
            want_scc = scc_in[i] if scc is None else scc
            want_e = exec_in[i] if e is None else e & ref.mask(lanes)
            g = int(got[i])
            ge = sum(int(b) << k for k, b in enumerate(got_exec[i]))
            gd = g & M32 if self.dst_low_only else g
            wd = want_d & M32 if self.dst_low_only else want_d
            scc_ok = self.dst_low_only or int(st.scc[i]) == want_scc  # wave32 b64: SCC sees EXEC_HI too
            if gd != wd or not scc_ok or ge != want_e:
                bad.append(f"wave {i}: sources ({', '.join(hex(c[i]) for c in cols)}), old 0x{old[i]:x}, SCC in "
                           f"{scc_in[i]}, EXEC in 0x{exec_in[i]:x}: got 0x{g:x} SCC {int(st.scc[i])} EXEC 0x{ge:x}, "
                           f"want 0x{want_d:x} SCC {want_scc} EXEC 0x{want_e:x}")
        if bad:
            return f"{self.line}: {len(bad)} of {WAVES} waves differ ({self.doc})\n    " + "\n    ".join(bad[:6])
        return None


def reg(r, w):
    return f"s[{r}:{r + 1}]" if w == 64 else f"s{r}"


def saveexec(op, bits):
    def fn(s0, old, scc, ex):
        s0 &= ref.mask(bits)
        new = op(s0, ex) & ref.mask(bits)
        return ex, int(new != 0), new
    return fn


def bitcmp(one, bits):
    return lambda s0, s1, old, scc, ex: (None, int(((s0 >> (s1 & (bits - 1))) & 1) == one), None)


def bitset64(one):
    def fn(s0, old, scc, ex):
        b = 1 << (s0 & 63)
        return ((old | b) if one else (old & ~b)) & M64, None, None
    return fn


def quadmask(bits):
    def fn(s0, old, scc, ex):
        d = 0
        for i in range(bits // 4):
            if (s0 >> (4 * i)) & 15:
                d |= 1 << i
        return d, int(d != 0), None
    return fn


def wqm(bits):
    def fn(s0, old, scc, ex):
        d = 0
        for i in range(bits // 4):
            if (s0 >> (4 * i)) & 15:
                d |= 15 << (4 * i)
        return d, int(d != 0), None
    return fn


def ff0(bits):
    def fn(s0, old, scc, ex):
        for i in range(bits):
            if not (s0 >> i) & 1:
                return i, None, None
        return M32, None, None
    return fn


def saveexec_cases(arch, ops):
    """D0 = EXEC; EXEC = op(S0, EXEC); SCC = EXEC != 0 (b32 and b64 on gfx11, b64 on gfx942). Wave32 b64 forms:
    EXEC_HI (and so D0[63:32] and SCC) is not asserted; the low half follows the rule."""
    g11, lanes = arch == "gfx1100", LANES[arch]
    out = []
    for nm, op in ops.items():
        for bits in ((32, 64) if g11 else (64,)):
            out.append(Case(arch, f"s_{nm}_saveexec_b{bits} {reg(DST, bits)}, {reg(SRC[0], bits)}",
                            saveexec(op, min(bits, lanes)), (bits,), bits,
                            f"S_{nm.upper()}_SAVEEXEC: D0 = EXEC; EXEC = S0 {nm} EXEC; SCC = EXEC != 0",
                            dst_low_only=bits > lanes))
    return out


CASES: list[Case] = []
REJECTED: list[str] = []
for arch in ("gfx1100", "gfx942"):
    g11 = arch == "gfx1100"
    lanes = LANES[arch]
    pending = []

    def add(line, fn, srcs, dst_bits, doc, **kw):
        pending.append(Case(arch, line, fn, srcs, dst_bits, doc, **kw))

    ops = {"and": lambda s, e: s & e, "or": lambda s, e: s | e, "xor": lambda s, e: s ^ e,
           "nand": lambda s, e: ~(s & e), "nor": lambda s, e: ~(s | e), "xnor": lambda s, e: ~(s ^ e)}
    # (the ~S0 forms, s_and_not0/s_or_not0 and GFX9 s_andn1/s_orn1, are in test_isa_saveexec_not0.py)
    ops.update({"and_not1": lambda s, e: s & ~e, "or_not1": lambda s, e: s | ~e} if g11 else
               {"andn2": lambda s, e: s & ~e, "orn2": lambda s, e: s | ~e})
    pending += saveexec_cases(arch, ops)
    for bits in (32, 64):
        add(f"s_cmov_b{bits} {reg(DST, bits)}, {reg(SRC[0], bits)}",
            lambda s0, old, scc, ex: (s0 if scc else None, None, None), (bits,), bits,
            "S_CMOV: if SCC then D0 = S0; SCC unchanged")
        for one in (0, 1):
            add(f"s_bitcmp{one}_b{bits} {reg(SRC[0], bits)}, s{SRC[1]}", bitcmp(one, bits), (bits, 32), 64,
                f"S_BITCMP{one}: SCC = S0[S1[{4 if bits == 32 else 5}:0]] == {one}")
        add(f"s_quadmask_b{bits} {reg(DST, bits)}, {reg(SRC[0], bits)}", quadmask(bits), (bits,), bits,
            "S_QUADMASK: D0[i] = S0[4i+3:4i] != 0; SCC = D0 != 0")
        add(f"s_wqm_b{bits} {reg(DST, bits)}, {reg(SRC[0], bits)}", wqm(bits), (bits,), bits,
            "S_WQM: each quad of D0 = 0xF when S0's quad != 0; SCC = D0 != 0")
        if not g11:
            add(f"s_ff0_i32_b{bits} s{DST}, {reg(SRC[0], bits)}", ff0(bits), (bits,), 32,
                "S_FF0_I32: the index of the first zero bit from the LSB, -1 when none; SCC unchanged")
    for one in (0, 1):
        add(f"s_bitset{one}_b64 s[{DST}:{DST + 1}], s{SRC[0]}", bitset64(one), (32,), 64,
            f"S_BITSET{one}_B64: D0[S0[5:0]] = {one}; SCC unchanged")
    r = rng(arch, "sopk")
    imms = [0, 1, 0x7FFF, 0x8000, 0xFFFF, 0x1234, 0xFF80, r.getrandbits(16)]
    for k in imms:
        ks = ref.sext(k, 16)
        add(f"s_movk_i32 s{DST}, 0x{k:x}", lambda old, scc, ex, ks=ks: (ks & M32, None, None), (), 32,
            "S_MOVK_I32: D0 = signext(SIMM16)")
        add(f"s_cmovk_i32 s{DST}, 0x{k:x}", lambda old, scc, ex, ks=ks: ((ks & M32) if scc else None, None, None), (),
            32, "S_CMOVK_I32: if SCC then D0 = signext(SIMM16)")

        def addk(old, scc, ex, ks=ks):
            a = old & M32
            d = (a + ks) & M32
            ov = (a >> 31) == ((ks & M32) >> 31) and (a >> 31) != (d >> 31)
            return d, int(ov), None
        add(f"s_addk_i32 s{DST}, 0x{k:x}", addk, (), 32,
            "S_ADDK_I32: D0 = D0 + signext(SIMM16); SCC = signed overflow")
        add(f"s_mulk_i32 s{DST}, 0x{k:x}", lambda old, scc, ex, ks=ks: ((old & M32) * ks & M32, None, None), (), 32,
            "S_MULK_I32: D0 = D0 * signext(SIMM16); SCC unchanged")
        cmps = {"eq": lambda x, y: x == y, "lg": lambda x, y: x != y, "gt": lambda x, y: x > y,
                "ge": lambda x, y: x >= y, "lt": lambda x, y: x < y, "le": lambda x, y: x <= y}
        for p, op in cmps.items():
            add(f"s_cmpk_{p}_i32 s{SRC[0]}, 0x{k:x}",
                lambda s0, old, scc, ex, op=op, ks=ks: (None, int(op(ref.sext(s0, 32), ks)), None), (32,), 64,
                f"S_CMPK_{p.upper()}_I32: SCC = S0.i32 {p} signext(SIMM16)")
            add(f"s_cmpk_{p}_u32 s{SRC[0]}, 0x{k:x}",
                lambda s0, old, scc, ex, op=op, k=k: (None, int(op(s0, k)), None), (32,), 64,
                f"S_CMPK_{p.upper()}_U32: SCC = S0.u32 {p} 32'U(SIMM16)")
    ok, bad = keep_accepted(arch, pending) if not no_assembler_reason(arch) else (pending, [])
    CASES += ok
    REJECTED += bad


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_scalar_result_scc_and_exec_follow_the_pseudocode(case):
    verify(case)


def test_every_generated_instruction_text_assembles():
    assert not REJECTED, "\n".join(REJECTED)
