"""Packed VOP3P instructions on gfx1100 and gfx942 against the RDNA3.5 16.10 / CDNA4 12.10 pseudocode
(tests/isa_reference.py): every v_pk_* 16-bit opcode (halves chosen by op_sel for the low result and op_sel_hi for
the high one, neg_lo/neg_hi on float halves, clamp: saturation for v_pk_add/sub_u16/i16, [0, 1] for f16), inline
constants (32-bit values per LLVM AMDGPUBaseInfo getInlineEncodingV216: integers sign-extended, f16 instructions'
floats the f16 value in the low half and 0 above, 16-bit integer instructions' floats the f32 value; op_sel /
op_sel_hi pick halves of that), gfx942's packed f32 forms on register pairs (op_sel picks each source's dword for
the low result, op_sel_hi for the high; v_pk_mov_b32: D0[31:0] = S0's dword op_sel[0], D0[63:32] = S1's dword
op_sel[1]), and v_fma_mix_f32 / v_fma_mixlo_f16 / v_fma_mixhi_f16 (each source f32 when op_sel_hi[i] = 0, else the
f16 half op_sel[i] picks; neg_lo = neg, neg_hi = abs; the other half of a mixlo/hi destination kept).

NaN results under clamp are not asserted (DX10_CLAMP's NaN -> 0 is tested once elsewhere); arithmetic NaNs: any
quiet NaN."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest

import isa_reference as ref
from isa_harness import LANES, keep_accepted, no_assembler_reason, rng, run_instruction, values, verify

VECTORS = 192
SRC = (10, 12, 14)
DST = 2
F16, F32 = ref.F16, ref.F32

# inline constants: text -> (value for f16 instructions, for 16-bit integer instructions, for packed f32)
_F = {"0.5": (0x3800, 0x3F000000), "1.0": (0x3C00, 0x3F800000), "2.0": (0x4000, 0x40000000),
      "4.0": (0x4400, 0x40800000), "0.15915494": (0x3118, 0x3E22F983)}
CONSTS: dict[str, tuple[int, int, int | None]] = {}
for _t, (_h, _s) in _F.items():
    CONSTS[_t] = (_h, _s, None)
    if _t != "0.15915494":
        CONSTS["-" + _t] = (_h | 0x8000, _s | 0x80000000, None)
for _i in (0, 1, 7, 64, -1, -5, -16):
    CONSTS[str(_i)] = (_i & 0xFFFFFFFF, _i & 0xFFFFFFFF, _i & 0xFFFFFFFFFFFFFFFF)


def _clamp_float(x: int, f) -> int:
    """clamp to [0, 1]; -0 stays -0; a NaN under clamp is not asserted."""
    if x == ref.QNAN or ref.is_nan(x, f):
        return ref.ANY
    if ref.f_lt(x, 0, f):
        return 0
    if ref.f_lt(f.one, x, f):
        return f.one
    return x


@dataclass
class PackedCase:
    """One VOP3P instruction. `kinds` per source: "f16"/"u16"/"i16"/"b16" (a 32-bit register of two halves) or
    "f32" (gfx942 packed f32: a register pair). `consts`: source index -> the constant's 32-bit (packed f32: 64-bit)
    value. `fn` is the per-half operation on the selected (modified) halves; `int_clamp`: it takes clamp."""

    arch: str
    line: str
    fn: Callable
    kinds: tuple[str, ...]
    sel: tuple[int, ...]
    sel_hi: tuple[int, ...]
    neg_lo: tuple[int, ...]
    neg_hi: tuple[int, ...]
    clamp: bool = False
    int_clamp: bool = False
    consts: dict = field(default_factory=dict)
    mov: bool = False  # v_pk_mov_b32: low from S0 dword op_sel[0], high from S1 dword op_sel[1]
    doc: str = ""

    @property
    def id(self):
        return f"{self.arch}: {self.line}"

    @property
    def wide(self) -> bool:
        return self.kinds[0] == "f32" or self.mov

    def _half(self, col: int, i: int, j: int) -> int:
        """Source i's operand for result half j."""
        s = self.sel[i] if j == 0 else self.sel_hi[i]
        if self.mov:
            s = self.sel[i]
        k = self.kinds[i]
        w = 32 if self.wide else 16
        x = (col >> (w * s)) & ref.mask(w)
        f = ref.FMTS.get(k)
        if f is not None and (self.neg_lo if j == 0 else self.neg_hi)[i]:
            x = ref.fneg(x, f)
        return x

    def expected_halves(self, cols: list[int]) -> list[int]:
        if self.mov:
            return [self._half(cols[0], 0, 0), self._half(cols[1], 1, 1)]
        out = []
        for j in (0, 1):
            args = [self._half(c, i, j) for i, c in enumerate(cols)]
            r = self.fn(*args, clamp=self.clamp) if self.int_clamp else self.fn(*args)
            f = ref.FMTS.get(self.kinds[0])
            if self.clamp and not self.int_clamp and f is not None and r != ref.ANY:
                r = _clamp_float(r, f)
            out.append(r)
        return out

    def check(self) -> str | None:
        r = rng(self.arch, self.line)
        n = VECTORS
        lanes = LANES[self.arch]
        w = 32 if self.wide else 16
        cols_all = []
        for i, k in enumerate(self.kinds):
            if i in self.consts:
                cols_all.append([self.consts[i]] * n)
                continue
            kind = k if k in ref.FMTS else f"b{w}"
            lo, hi = values(kind, n, r), values(kind, n, r)
            cols_all.append([a | b << w for a, b in zip(lo, hi)])
        old = [r.getrandbits(64 if self.wide else 32) for _ in range(n)]
        exec_lanes = [r.random() < 0.9 for _ in range(n)]
        v = {}
        for i, col in enumerate(cols_all):
            if i in self.consts:
                continue
            a = np.array(col, np.uint64)
            v[SRC[i]] = (a & np.uint64(0xFFFFFFFF)).astype(np.uint32)
            if self.wide:
                v[SRC[i] + 1] = (a >> np.uint64(32)).astype(np.uint32)
        o = np.array(old, np.uint64)
        v[DST] = (o & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        v[DST + 1] = (o >> np.uint64(32)).astype(np.uint32)
        st = run_instruction(self.arch, self.line, waves=n // lanes, v=v, exec_lanes=np.array(exec_lanes, bool))
        got = st.vector64(DST) if self.wide else st.vector(DST)
        f = ref.FMTS.get(self.kinds[0]) if not self.mov else None
        bad = []
        for lane in range(n):
            g = int(got[lane])
            if not exec_lanes[lane]:
                if g != old[lane]:
                    bad.append(f"lane {lane}: inactive lane written: 0x{g:x}, was 0x{old[lane]:x}")
                continue
            want = self.expected_halves([c[lane] for c in cols_all])
            for j, res in enumerate(want):
                part = (g >> (w * j)) & ref.mask(w)
                if res == ref.ANY:
                    continue
                if res == ref.QNAN:
                    ok = ref.is_nan(part, f) and bool(part & f.quiet_bit)
                else:
                    ok = part == res
                if not ok:
                    ops = ", ".join(f"0x{c[lane]:x}" for c in cols_all)
                    bad.append(f"lane {lane}: sources ({ops}): {'low' if j == 0 else 'high'} half 0x{part:x}, want "
                               f"{'a quiet NaN' if res == ref.QNAN else hex(res)}")
        if not bad:
            return None
        return f"{self.line}: {len(bad)} lane halves differ ({self.doc})\n    " + "\n    ".join(bad[:6])


def _mods_text(name: str, vals: tuple[int, ...], default: int) -> str:
    if all(x == default for x in vals):
        return ""
    return f" {name}:[{','.join(str(x) for x in vals)}]"


def _src_text(i: int, kind: str, wide: bool) -> str:
    return f"v[{SRC[i]}:{SRC[i] + 1}]" if wide else f"v{SRC[i]}"


CASES: list = []
REJECTED: list[str] = []
WANTED: dict[str, set[str]] = {"gfx1100": set(), "gfx942": set()}


def _pk_cases(arch: str, name: str, kinds: tuple[str, ...], fn, doc: str, *, n: int = 4, clamp_ok: bool = False,
              int_clamp: bool = False, const_srcs: int = 2, mov: bool = False) -> list[PackedCase]:
    r = rng(arch, name)
    nsrc = len(kinds)
    is_f = kinds[0] in ref.FMTS
    wide = kinds[0] == "f32" or mov
    out = []
    WANTED[arch].add(name)
    for t in range(n + const_srcs):
        consts = {}
        const_text = {}
        sel = tuple(r.getrandbits(1) for _ in range(nsrc))
        sel_hi = tuple(r.getrandbits(1) for _ in range(nsrc)) if not mov else (1,) * nsrc
        if t == 0:
            sel, sel_hi = (0,) * nsrc, (1,) * nsrc  # the plain form
        neg_lo = tuple(int(is_f and r.random() < 0.35) for _ in range(nsrc))
        neg_hi = tuple(int(is_f and r.random() < 0.35) for _ in range(nsrc))
        if t >= n:  # a constant operand
            i = r.randrange(nsrc)
            if wide:
                txt = r.choice([k for k, c in CONSTS.items() if c[2] is not None] + list(_F))
                if CONSTS[txt][2] is None:  # a float constant: only its dword 0 (dword 1 is not documented)
                    consts[i] = CONSTS[txt][1]
                    sel = tuple(0 if k == i else s for k, s in enumerate(sel))
                    sel_hi = tuple(0 if k == i else s for k, s in enumerate(sel_hi))
                else:
                    consts[i] = CONSTS[txt][2]
            else:
                txt = r.choice(list(CONSTS))
                consts[i] = CONSTS[txt][0] if kinds[0] == "f16" else CONSTS[txt][1]
            const_text[i] = txt
        clamp = bool(clamp_ok and r.random() < 0.35)
        srcs = [const_text.get(i, _src_text(i, kinds[i], wide)) for i in range(nsrc)]
        dst = f"v[{DST}:{DST + 1}]" if wide else f"v{DST}"
        line = (f"{name} {dst}, {', '.join(srcs)}" + _mods_text("op_sel", sel, 0) + _mods_text("op_sel_hi", sel_hi, 1)
                + _mods_text("neg_lo", neg_lo, 0) + _mods_text("neg_hi", neg_hi, 0) + (" clamp" if clamp else ""))
        out.append(PackedCase(arch, line, fn, kinds, sel, sel_hi, neg_lo, neg_hi, clamp=clamp, int_clamp=int_clamp,
                              consts=consts, mov=mov, doc=doc))
    return out


for arch in ("gfx1100", "gfx942"):
    g11 = arch == "gfx1100"
    mn, mx = (ref.rdna_min(F16), ref.rdna_max(F16)) if g11 else (ref.ieee_min(F16), ref.ieee_max(F16))
    pend: list[PackedCase] = []
    P = lambda *a, **k: pend.extend(_pk_cases(arch, *a, **k))  # noqa: E731
    for s, t in (("i", "i16"), ("u", "u16")):
        P(f"v_pk_add_{t}", (t, t), ref.pk_add_int(s == "i"), "V_PK_ADD: tmp = S0 + S1 (clamp: saturate)",
          clamp_ok=True, int_clamp=True)
        P(f"v_pk_sub_{t}", (t, t), ref.pk_add_int(s == "i", True), "V_PK_SUB: tmp = S0 - S1 (clamp: saturate)",
          clamp_ok=True, int_clamp=True)
        P(f"v_pk_min_{t}", (t, t), ref.int_min(16, s == "i"), "V_PK_MIN: S0 < S1 ? S0 : S1")
        P(f"v_pk_max_{t}", (t, t), ref.int_max(16, s == "i"), "V_PK_MAX: S0 >= S1 ? S0 : S1")
        P(f"v_pk_mad_{t}", (t, t, t), ref.pk_mad16, ref.pk_mad16.__doc__)
    P("v_pk_mul_lo_u16", ("u16", "u16"), ref.pk_mul_lo_u16, ref.pk_mul_lo_u16.__doc__)
    P("v_pk_lshlrev_b16", ("b16", "b16"), ref.pk_shift("lshl"), ref.pk_shift.__doc__)
    P("v_pk_lshrrev_b16", ("b16", "b16"), ref.pk_shift("lshr"), ref.pk_shift.__doc__)
    P("v_pk_ashrrev_i16", ("b16", "b16"), ref.pk_shift("ashr"), ref.pk_shift.__doc__)
    P("v_pk_add_f16", ("f16", "f16"), ref.add(F16), "V_PK_ADD_F16: tmp.f16 = S0.f16 + S1.f16", clamp_ok=True, n=6)
    P("v_pk_mul_f16", ("f16", "f16"), ref.mul(F16), "V_PK_MUL_F16: tmp.f16 = S0.f16 * S1.f16", clamp_ok=True, n=6)
    P("v_pk_fma_f16", ("f16",) * 3, ref.fma(F16), "V_PK_FMA_F16: tmp.f16 = fma(S0, S1, S2) (fused)", clamp_ok=True,
      n=8, const_srcs=3)
    P("v_pk_min_f16", ("f16", "f16"), mn, "V_PK_MIN_F16: v_min_f16 of each half (IEEE: sNaN quieted, -0 < +0)",
      clamp_ok=True, n=6)
    P("v_pk_max_f16", ("f16", "f16"), mx, "V_PK_MAX_F16: v_max_f16 of each half (IEEE: sNaN quieted, -0 < +0)",
      clamp_ok=True, n=6)
    if not g11:
        P("v_pk_add_f32", ("f32", "f32"), ref.add(F32), "V_PK_ADD_F32: tmp[31:0].f32 = S0[31:0] + S1[31:0]",
          clamp_ok=True, n=6)
        P("v_pk_mul_f32", ("f32", "f32"), ref.mul(F32), "V_PK_MUL_F32: tmp[31:0].f32 = S0[31:0] * S1[31:0]",
          clamp_ok=True, n=6)
        P("v_pk_fma_f32", ("f32",) * 3, ref.fma(F32), "V_PK_FMA_F32: tmp.f32 = fma(S0, S1, S2) per dword (fused)",
          clamp_ok=True, n=8, const_srcs=3)
        P("v_pk_mov_b32", ("b32", "b32"), None, "V_PK_MOV_B32: D0[31:0] = S0 dword OPSEL[0]; D0[63:32] = S1 dword "
          "OPSEL[1]", mov=True, n=5, const_srcs=0)
    ok, bad = keep_accepted(arch, pend) if not no_assembler_reason(arch) else (pend, [])
    CASES += ok
    REJECTED += bad


# ---------------------------------------------------------------------------------------------------------
# v_fma_mix_f32 / v_fma_mixlo_f16 / v_fma_mixhi_f16


@dataclass
class MixCase:
    arch: str
    line: str
    form: str  # "f32", "lo", "hi"
    sel: tuple[int, ...]
    sel_hi: tuple[int, ...]
    neg: tuple[int, ...]
    abs_: tuple[int, ...]
    clamp: bool
    doc: str = ""

    @property
    def id(self):
        return f"{self.arch}: {self.line}"

    def expected(self, a: int, b: int, c: int, old: int) -> tuple[int, int, int]:
        """(result bits, shift, width) of the written part; the rest of the destination keeps `old`."""
        ins = [ref.mix_input(x, self.sel[i], self.sel_hi[i], bool(self.neg[i]), bool(self.abs_[i]))
               for i, x in enumerate((a, b, c))]
        if self.form == "f32":
            res, f = ref.f_fma(*ins, F32), F32
        else:
            res, f = ref.mix_to_f16(*ins), F16
        if self.clamp and res != ref.ANY:
            res = _clamp_float(res, f)
        return res, (16 if self.form == "hi" else 0), f

    def check(self) -> str | None:
        r = rng(self.arch, self.line)
        n = VECTORS
        cols = []
        for i in range(3):
            if self.sel_hi[i]:
                lo, hi = values("f16", n, r), values("f16", n, r)
                cols.append([x | y << 16 for x, y in zip(lo, hi)])
            else:
                cols.append(values("f32", n, r))
        old = [r.getrandbits(32) for _ in range(n)]
        exec_lanes = [r.random() < 0.9 for _ in range(n)]
        v = {SRC[i]: np.array(cols[i], np.uint32) for i in range(3)}
        v[DST] = np.array(old, np.uint32)
        st = run_instruction(self.arch, self.line, waves=n // LANES[self.arch], v=v,
                             exec_lanes=np.array(exec_lanes, bool))
        got = st.vector(DST)
        bad = []
        for lane in range(n):
            g = int(got[lane])
            if not exec_lanes[lane]:
                if g != old[lane]:
                    bad.append(f"lane {lane}: inactive lane written")
                continue
            res, shift, f = self.expected(cols[0][lane], cols[1][lane], cols[2][lane], old[lane])
            part = (g >> shift) & f.mask
            rest_ok = f.width == 32 or (g & ~(0xFFFF << shift) & 0xFFFFFFFF) == (old[lane] & ~(0xFFFF << shift)
                                                                                   & 0xFFFFFFFF)
            if res == ref.ANY:
                ok = True
            elif res == ref.QNAN:
                ok = ref.is_nan(part, f) and bool(part & f.quiet_bit)
            else:
                ok = part == res
            if not (ok and rest_ok):
                ops = ", ".join(f"0x{c[lane]:x}" for c in cols)
                bad.append(f"lane {lane}: sources ({ops}), old 0x{old[lane]:x}: got 0x{g:x}, want "
                           f"{'a quiet NaN' if res == ref.QNAN else hex(res if res != ref.ANY else 0)} at bit "
                           f"{shift}{'' if rest_ok else ' (other half changed)'}")
        if not bad:
            return None
        return f"{self.line}: {len(bad)} lanes differ ({self.doc})\n    " + "\n    ".join(bad[:6])


MIX_DOC = ("V_FMA_MIX*: in[i] = OPSEL_HI[i] ? f16_to_f32(S[i] half OPSEL[i]) : S[i].f32; NEG_HI = abs, NEG_LO = neg; "
           "D0 = in0 * in1 + in2 (MIXLO/HI: f32_to_f16 into D0[15:0] / D0[31:16])")
MIX_CASES: list[MixCase] = []
for arch in ("gfx1100", "gfx942"):
    pend = []
    for form in ("f32", "lo", "hi"):
        name = {"f32": "v_fma_mix_f32", "lo": "v_fma_mixlo_f16", "hi": "v_fma_mixhi_f16"}[form]
        WANTED[arch].add(name)
        r = rng(arch, name)
        for t in range(8):
            sel = tuple(r.getrandbits(1) for _ in range(3))
            sel_hi = tuple(int(r.random() < 0.6) for _ in range(3))
            if t == 0:
                sel_hi = (0, 0, 0)  # all f32
            elif t == 1:
                sel_hi = (1, 1, 1)  # all f16
            sel = tuple(s if h else 0 for s, h in zip(sel, sel_hi))  # op_sel without op_sel_hi means nothing
            neg = tuple(int(r.random() < 0.35) for _ in range(3))
            ab = tuple(int(r.random() < 0.3) for _ in range(3))
            clamp = r.random() < 0.3
            srcs = []
            for i in range(3):
                s = f"v{SRC[i]}"
                if ab[i]:
                    s = f"|{s}|"
                if neg[i]:
                    s = "-" + s
                srcs.append(s)
            line = (f"{name} v{DST}, {', '.join(srcs)}" + _mods_text("op_sel", sel, 0)
                    + _mods_text("op_sel_hi", sel_hi, 0) + (" clamp" if clamp else ""))
            pend.append(MixCase(arch, line, form, sel, sel_hi, neg, ab, clamp, MIX_DOC))
    ok, bad = keep_accepted(arch, pend) if not no_assembler_reason(arch) else (pend, [])
    MIX_CASES += ok
    REJECTED += bad


def _verify(case):
    verify(case)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_packed_halves_follow_op_sel_neg_and_clamp(case):
    _verify(case)


@pytest.mark.parametrize("case", MIX_CASES, ids=[c.id for c in MIX_CASES])
def test_fma_mix_reads_f32_or_a_selected_f16_half(case):
    _verify(case)


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_every_packed_opcode_keeps_an_assembled_form(arch):
    if no_assembler_reason(arch):
        pytest.skip(no_assembler_reason(arch))
    kept = {c.line.split()[0] for c in CASES + MIX_CASES if c.arch == arch}
    assert WANTED[arch] <= kept, f"no assembled form of {sorted(WANTED[arch] - kept)}"


def test_generated_texts_assemble():
    assert not REJECTED, "\n".join(REJECTED)
