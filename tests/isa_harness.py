"""Run one shader instruction on hcqsim's shader core, directly: no kernel, no queue, no runtime.

An instruction's text is assembled by LLVM (`hcqsim.compiler.assemble_each`, all lines of a test module in one
batch, cached), decoded (`hcqsim.shader.decoder.decode`) and compiled (`hcqsim.shader.compile.compile_instr`) into
the closure `run(W, w)` the core's scheduler calls. The closure runs once over a `Waves` state of several waves, so a
few hundred operand vectors (waves x lanes) cost one call. Register conventions are the callers' choice; the
instruction tests use sources v10/v12/v14 (v[10:11] ... for 64-bit), destination v2 (v[2:3]), SGPR operands s20..,
scalar destinations s30...

`ShaderUnsupported` at compile time means "not implemented": `run_instruction` raises `Unimplemented`, which the
tests turn into xfail(reason="unimplemented: ...") and record in `UNIMPLEMENTED`.

`python3 -m tests.isa_harness --report` runs every instruction test case of the tests/test_isa_*.py modules and
prints, per target, the unimplemented instructions and every mismatch against the reference (first lanes).

`python3 -m tests.isa_harness --same-on-every-simd-path` runs the same cases once per numpy SIMD level this CPU
offers (all of them; without the AVX-512 levels; baseline only, by NPY_DISABLE_CPU_FEATURES) and fails unless every
instruction leaves bit-identical registers at every level: the reference accepts any quiet NaN where the ISA leaves
the payload open, so a result numpy's dispatch decides would pass the report on each machine and still differ
between machines.
"""
from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

from hcqsim.compiler import AssemblerUnavailableError, assemble_each, assembler_for
from hcqsim.shader.compile import compile_instr
from hcqsim.shader.decoder import decode
from hcqsim.shader.operands import Context, ShaderUnsupported
from hcqsim.shader.waves import EXEC, VCC, Waves

LANES = {"gfx1100": 32, "gfx942": 64}
VGPRS = 32  # v0..v31 are enough for every test; more would only cost memory
VECTORS = 192  # operand vectors per VALU instruction: 6 wave32s or 3 wave64s

UNIMPLEMENTED: dict[str, set[str]] = {"gfx1100": set(), "gfx942": set()}  # arch -> instruction texts
DIGESTS: list[tuple[str, str]] | None = None  # when a list: (arch: line, sha256 of the registers) per run


class Unimplemented(Exception):
    """The shader core rejected the instruction at compile time (ShaderUnsupported)."""


class Rejected(Exception):
    """LLVM's assembler rejected the instruction text."""


def no_assembler_reason(arch: str) -> str | None:
    """Why instructions for `arch` cannot be assembled here, or None."""
    try:
        assembler_for(arch)
    except AssemblerUnavailableError as e:
        return str(e)
    return None


_CODE: dict[tuple[str, str], tuple[bytes | None, str | None]] = {}


def assemble_all(arch: str, lines: Iterable[str]) -> None:
    """Assemble every line not yet cached, in one assembler batch."""
    todo = sorted({ln for ln in lines if (arch, ln) not in _CODE})
    if todo and (reason := no_assembler_reason(arch)):  # a test's own instruction: the oracle is the isa extra
        import pytest
        pytest.skip(reason)
    if todo:
        for line, result in zip(todo, assemble_each(todo, arch)):
            _CODE[(arch, line)] = result


def encoding(arch: str, line: str) -> bytes:
    """The machine code of one instruction line (assembled on demand when not batched before)."""
    assemble_all(arch, [line])
    code, text = _CODE[(arch, line)]
    if code is None:
        raise Rejected(f"{arch}: LLVM rejects {line!r}: {text}")
    return code


def accepted(arch: str, line: str) -> bool:
    """Does LLVM's assembler accept the line for `arch`?"""
    assemble_all(arch, [line])
    return _CODE[(arch, line)][0] is not None


@functools.lru_cache(maxsize=None)
def compiled(arch: str, line: str, accum_offset: int | None = None):
    """The shader core's closure for one instruction line; raises Unimplemented / Rejected. `accum_offset` (gfx942):
    AGPR a[n] is unified register accum_offset + n, as the core sets `ctx.accum_offset` from RSRC3 (None: no AGPRs)."""
    code = encoding(arch, line)
    instr = decode(code, 0, arch)
    if instr.size != len(code):
        raise AssertionError(f"{arch} {line!r}: decoded {instr.size} bytes, LLVM encoded {len(code)} ({code.hex()})")
    ctx = Context(LANES[arch], VGPRS, None, f"isa test {line!r}", arch)
    if accum_offset is not None:
        ctx.accum_offset = accum_offset
    try:
        return compile_instr(instr, ctx)
    except ShaderUnsupported as e:
        UNIMPLEMENTED[arch].add(line)
        raise Unimplemented(f"{arch} {line!r}: {e}") from None


@dataclass
class State:
    """Register state in and out of one instruction run, flattened over waves x lanes.

    `v[r]` uint32 [waves * lanes]; `s[r]` uint32 [waves]; `exec`/`vcc` bool [waves * lanes] lane masks (None: all
    lanes active / VCC zero); `scc` bool [waves]."""

    waves: int
    lanes: int
    W: Waves | None = None

    def vector(self, reg: int) -> np.ndarray:
        return self.W.v[:, reg, :].reshape(-1).copy()

    def vector64(self, reg: int) -> np.ndarray:
        return self.vector(reg).astype(np.uint64) | (self.vector(reg + 1).astype(np.uint64) << np.uint64(32))

    def scalar(self, reg: int) -> np.ndarray:
        return self.W.s[:, reg].copy()

    def scalar64(self, reg: int) -> np.ndarray:
        return self.scalar(reg).astype(np.uint64) | (self.scalar(reg + 1).astype(np.uint64) << np.uint64(32))

    def mask(self, reg: int) -> np.ndarray:
        """bool [waves * lanes]: the lane-mask register's bit for every lane (VCC, EXEC or an SGPR pair)."""
        return self.W.lanes_of(slice(None), reg).reshape(-1)

    @property
    def scc(self) -> np.ndarray:
        return self.W.scc.copy()


def run_instruction(arch: str, line: str, *, waves: int | None = None, v: dict[int, np.ndarray] | None = None,
                    s: dict[int, np.ndarray] | None = None, exec_lanes: np.ndarray | None = None,
                    vcc_lanes: np.ndarray | None = None, scc: np.ndarray | None = None,
                    accum_offset: int | None = None, mode: int | None = None) -> State:
    """Run one instruction once over `waves` waves (default: VECTORS lanes in all) and return the state after it.

    v: VGPR number -> uint32 [waves * lanes] (VGPRs not given start at 0; with `accum_offset`, a[n] is v-index
    accum_offset + n); s: SGPR operand number -> uint32 [waves]; exec_lanes / vcc_lanes: bool [waves * lanes];
    scc: bool [waves]; mode: the MODE register of every wave (default: fpmode's launch value for FLOAT_MODE 0xF0)."""
    run = compiled(arch, line) if accum_offset is None else compiled(arch, line, accum_offset)
    lanes = LANES[arch]
    n = waves if waves is not None else VECTORS // lanes
    W = Waves(n, lanes, VGPRS, 1, 64)
    for reg, values in (v or {}).items():
        W.v[:, reg, :] = np.asarray(values, np.uint32).reshape(n, lanes)
    for reg, values in (s or {}).items():
        W.s[:, reg] = np.broadcast_to(np.asarray(values, np.uint32), (n,))
    W.set_mask(slice(None), EXEC, np.ones((n, lanes), bool) if exec_lanes is None
               else np.asarray(exec_lanes, bool).reshape(n, lanes))
    if vcc_lanes is not None:
        W.set_mask(slice(None), VCC, np.asarray(vcc_lanes, bool).reshape(n, lanes))
    if scc is not None:
        W.scc[:] = np.asarray(scc, bool)
    if mode is not None:
        W.set_mode(slice(None), mode)
    block = _translated(arch, line) if TRANSLATE and accum_offset is None and not W.flushing else None
    if block is not None:  # HCQSIM_SHADER=translate: the translator's native block instead of the closure
        block.run(W)
        TRANSLATED[arch].add(line)
    else:
        run(W, slice(None))
    if DIGESTS is not None:
        DIGESTS.append((f"{arch}: {line}", _register_digest(W)))
    return State(n, lanes, W)


# HCQSIM_SHADER=translate: instructions the translator covers (hcqsim.shader.translate) run as its one-instruction
# blocks, so the corpus checks the translator's results against the reference too; TRANSLATED: the lines that did
TRANSLATE = os.environ.get("HCQSIM_SHADER") == "translate"
TRANSLATED: dict[str, set[str]] = {"gfx1100": set(), "gfx942": set()}


@functools.lru_cache(maxsize=None)
def _translated(arch: str, line: str):
    from hcqsim.shader.translate import translate
    code = encoding(arch, line)
    block = translate(code, 0, arch, LANES[arch], VGPRS, Context(LANES[arch], VGPRS, None, "isa test", arch))
    return block if block is not None and block.steps == 1 else None


def _register_digest(W: Waves) -> str:
    import hashlib
    h = hashlib.sha256()
    for part in (W.v, W.s, W.scc, W.mode):
        h.update(np.ascontiguousarray(part).tobytes())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------------------------------------------------
# operand values, weighted heavily to special values


def _float_specials(f) -> list[int]:
    from isa_reference import fneg
    one, inf, q = f.one, f.inf, f.quiet_bit
    pos = [0, 1, 2, 3, (1 << f.mbits) - 1, 1 << f.mbits, (1 << f.mbits) + 1, f.max_normal, f.max_normal - 1, inf,
           inf | q, inf | q | 1, inf | q | (q >> 1), inf | 1, inf | (q >> 1) | 5, inf | (q - 1), one, one + 1, one - 1,
           one >> 1 & ~((1 << f.mbits) - 1) | 0, (f.bias - 1) << f.mbits, (f.bias + 1) << f.mbits,
           (f.bias + 1) << f.mbits | (1 << (f.mbits - 1)), (f.bias - 1) << f.mbits | (1 << (f.mbits - 1)),
           (f.bias + f.mbits) << f.mbits, (f.bias + f.mbits + 1) << f.mbits | 1, (2 * f.bias - 1) << f.mbits,
           (f.bias + 3) << f.mbits | (1 << (f.mbits - 2)), 2 << f.mbits, (f.emax_field - 2) << f.mbits]
    return pos + [fneg(x, f) for x in pos]


def _float_random(r, f) -> int:
    roll = r.random()
    s = r.getrandbits(1) << (f.width - 1)
    if roll < 0.15:  # denormal
        return s | r.randrange(1, 1 << f.mbits)
    if roll < 0.30:  # near the extremes of the exponent range
        e = r.choice([1, 2, 3, f.emax_field - 1, f.emax_field - 2, f.emax_field - 3])
        return s | e << f.mbits | r.getrandbits(f.mbits)
    if roll < 0.40:  # NaN with a payload
        return s | f.inf | r.randrange(1, 1 << f.mbits)
    if roll < 0.65:  # moderate magnitudes, where sums cancel and products stay finite
        e = f.bias + r.randrange(-8, 9)
        return s | e << f.mbits | r.getrandbits(f.mbits)
    if roll < 0.75:  # small integers
        from isa_reference import from_float
        return from_float(float(r.randrange(-40, 41)), f)
    return r.getrandbits(f.width)


_INT32_SPECIALS = [0, 1, 2, 3, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFF, 0xFFFFFFFE, 0x7FFFFFFE, 31, 32, 33, 16,
                   15, 0x0000FFFF, 0x00010000, 0xFFFF0000, 0x00FFFFFF, 0x01000000, 0xFF800000, 0x00800000, 0x7F800000,
                   0x7FC00000, 0x55555555, 0xAAAAAAAA, 0x00000080, 0x000000FF, 0x00007FFF, 0x00008000, 0xFFFF8000,
                   0xFFFF7FFF, 0x3F800000, 0xBF800000]


def values(kind: str, n: int, r) -> list[int]:
    """n operand values of a type ("f32", "f16", "bf16", "f64", "u32"/"i32"/"b32", "u16"/"i16"/"b16", "u64"/"i64"/"b64",
    "bit"), about half of them special values, as raw bit patterns."""
    from isa_reference import FMTS
    if kind == "bit":
        return [r.getrandbits(1) for _ in range(n)]
    if kind in FMTS:
        f = FMTS[kind]
        specials = _float_specials(f)
        return [r.choice(specials) if r.random() < 0.5 else _float_random(r, f) for _ in range(n)]
    bits = int(kind[1:])
    out = []
    for _ in range(n):
        roll = r.random()
        if roll < 0.45:
            x = r.choice(_INT32_SPECIALS)
            if bits == 16:
                x = (x >> (16 * r.getrandbits(1))) & 0xFFFF
            elif bits == 64:
                x = r.choice([x, x | 0xFFFFFFFF00000000 if x >> 31 else x, x << 32, (x << 32) | r.getrandbits(32)])
        elif roll < 0.60:
            x = r.randrange(-70, 70) & ((1 << bits) - 1)
        elif roll < 0.75:
            x = (1 << r.randrange(bits)) + r.choice([-1, 0, 1])
        else:
            x = r.getrandbits(bits)
        out.append(x & ((1 << bits) - 1))
    return out


def rng(*key) -> "random.Random":
    """A deterministic generator for one test case (seeded from its identity, not from the process)."""
    import random
    import zlib
    return random.Random(zlib.crc32(repr(key).encode()))


# ---------------------------------------------------------------------------------------------------------
# one VALU instruction checked against a reference

WIDTH = {"f16": 16, "bf16": 16, "b16": 16, "u16": 16, "i16": 16, "f32": 32, "b32": 32, "u32": 32, "i32": 32,
         "f64": 64, "b64": 64, "u64": 64, "i64": 64, "bit": 1}
SRC_VGPRS = (10, 12, 14)
DST_VGPR = 2
CARRY_IN_SGPR = 40  # s40 (wave32) / s[40:41] (wave64): a lane-mask source of an e64 form
SDST_SGPR = 30  # s30 / s[30:31]: the lane-mask destination of an e64 form
SCALAR_SRC_SGPRS = (20, 22, 24)  # source i as an SGPR (GFX9 SDWA S0/S1): s20, s22, s24


@dataclass
class Src:
    """One source of a VALU instruction as the test drives it: type, modifiers, where it lives."""

    kind: str
    neg: bool = False
    abs: bool = False
    hi: bool = False  # op_sel / .h: the high 16 bits of the register
    where: str = "v"  # "v": VGPR SRC_VGPRS[i]; "s": SGPR SCALAR_SRC_SGPRS[i] (one value per wave); "vcc" /
    # "sgpr": a lane mask ("bit" operands); "dst": the destination register's old value (accumulators)
    sel: int = 6  # SDWA SRCn_SEL (0-3 BYTE_n, 4/5 WORD_0/1, 6 DWORD) and SEXT: the part of the register read
    sext: bool = False


@dataclass(frozen=True)
class Check:
    """How results compare: exact bits (NaN from a QNAN reference: any quiet NaN), or within `ulp` units in the last
    place for approximate (transcendental) operations."""

    ulp: float = 0.0
    nan: str = "quiet"  # "quiet": QNAN accepts any quiet NaN; "any": any NaN
    abs_tol: float = 0.0  # an absolute error allowed besides `ulp` (sin/cos near their zeros)


def _fmt_of(kind: str):
    from isa_reference import FMTS
    return FMTS.get(kind)


def _apply_mods(x: int, s: Src) -> int:
    f = _fmt_of(s.kind)
    if f is None:
        return x
    if s.abs:
        x &= ~f.sign_bit & f.mask
    if s.neg:
        x ^= f.sign_bit
    return x


NAN_CLAMP = 0  # what clamp makes of a NaN (DX10_CLAMP: +0); instruction tests set it to ANY (one root cause, tested
# once by test_clamp_turns_a_nan_result_into_zero)


def _omod_clamp(x: int, kind: str, omod: int, clamp: bool) -> int:
    """Output modifiers of a float result: omod (1: *2, 2: *4, 3: /2) then clamp to [0, 1]: with DX10_CLAMP (set in
    every kernel LLVM emits) NaN clamps to +0; -0 stays -0 (LLVM SIISelLowering performClampCombine folds
    clamp(x) to 0 only for x < 0 or NaN with DX10Clamp, to 1 for x > 1)."""
    from isa_reference import QNAN, f_lt, from_float, is_nan, ldexp
    f = _fmt_of(kind)
    if omod and x != QNAN:
        x = ldexp(x, {1: 1, 2: 2, 3: -1}[omod], f)
    if clamp:
        if x == QNAN or is_nan(x, f):
            return NAN_CLAMP
        if f_lt(x, 0, f):
            return 0
        if f_lt(f.one, x, f):
            return f.one
    return x


@dataclass
class ValuCase:
    """A VALU instruction text, how its operands are driven, and its reference.

    `ref(*sources, **kw)` takes the modified source values (abs, neg, half selection applied) and returns the
    destination value, or (destination, lane bit) for instructions with a lane-mask result as well; "bit"
    destinations (compares) return the bit. Output modifiers of float results (omod, clamp) are applied here
    unless the reference takes `clamp` itself (integer saturation: `int_clamp`)."""

    arch: str
    line: str
    ref: Callable
    srcs: list[Src]
    dst: str  # result type; "bit" for a compare; "none" when only `sdst` counts
    sdst: str | None = None  # "vcc", "sgpr", "exec" (v_cmpx) for a lane-mask result, or None
    dst_hi: bool = False
    clamp: bool = False
    omod: int = 0
    int_clamp: bool = False  # the reference handles clamp (saturation) itself
    zero_hi: bool = False  # a 16-bit result zeroes bits 31:16 (GFX9) instead of keeping them (GFX11)
    hi_any: bool = False  # bits 31:16 beside a 16-bit result are not asserted (not documented for the opcode)
    compare: Check = Check()
    vectors: int = VECTORS
    doc: str = ""  # the pseudocode line the reference follows

    @property
    def id(self) -> str:
        return f"{self.arch}: {self.line}"

    def inputs(self):
        r = rng(self.arch, self.line)
        n = self.vectors
        raw = []  # per source: the register contents (lists of ints; 64-bit as ints too)
        for s in self.srcs:
            if s.kind == "bit":
                raw.append(values("bit", n, r))
            elif WIDTH[s.kind] == 16:
                lo, hi = values(s.kind, n, r), values(s.kind, n, r)
                raw.append([a | b << 16 for a, b in zip(lo, hi)])
            else:
                raw.append(values(s.kind, n, r))
        lanes = LANES[self.arch]
        for i, s in enumerate(self.srcs):
            if s.where == "s":  # an SGPR source holds one value per wave
                raw[i] = [raw[i][k - k % lanes] for k in range(n)]
        old = [r.getrandbits(64) for _ in range(n)]
        for s, col in zip(self.srcs, raw):
            if s.where == "dst":  # an accumulator read from the destination register (v_fmac, v_mac)
                width = 64 if WIDTH[s.kind] == 64 else 32
                old = [(o & ~((1 << width) - 1)) | x for o, x in zip(old, col)]
        exec_lanes = [r.random() < 0.9 for _ in range(n)]
        return raw, old, exec_lanes

    def expected(self, raw, old, exec_lanes):
        """Per lane: (register value of the destination or None, lane-mask bit or None)."""
        out = []
        kw = {"clamp": self.clamp} if self.int_clamp else {}
        for lane in range(self.vectors):
            args = []
            for s, col in zip(self.srcs, raw):
                x = col[lane]
                if s.kind != "bit" and WIDTH[s.kind] == 16:
                    x = (x >> 16) & 0xFFFF if s.hi else x & 0xFFFF
                args.append(_apply_mods(x, s))
            res = self.ref(*args, **kw)
            bit = None
            if self.sdst is not None and self.dst != "bit":
                res, bit = res
            if self.dst == "bit":
                out.append((None, int(res)))
                continue
            from isa_reference import ANY
            if bit == ANY:
                bit = None
            if res != ANY and self.dst != "none" and _fmt_of(self.dst) is not None and not self.int_clamp:
                res = _omod_clamp(res, self.dst, self.omod, self.clamp)
            out.append((res, bit))
        return out

    def run(self, raw, old, exec_lanes) -> State:
        n = self.vectors
        v, s = {}, {}
        vcc = None
        for i, (src, col) in enumerate(zip(self.srcs, raw)):
            if src.where == "dst":
                continue
            if src.where == "s":
                s[SCALAR_SRC_SGPRS[i]] = np.array(col[::LANES[self.arch]], np.uint32)
                continue
            if src.kind == "bit":
                lanes = np.array(col, bool)
                if src.where == "vcc":
                    vcc = lanes
                else:
                    mask = (lanes.reshape(-1, LANES[self.arch]).astype(np.uint64) <<
                            np.arange(LANES[self.arch], dtype=np.uint64)).sum(axis=1, dtype=np.uint64)
                    s[CARRY_IN_SGPR] = (mask & np.uint64(0xFFFFFFFF)).astype(np.uint32)
                    s[CARRY_IN_SGPR + 1] = (mask >> np.uint64(32)).astype(np.uint32)
                continue
            a = np.array(col, np.uint64)
            v[SRC_VGPRS[i]] = (a & np.uint64(0xFFFFFFFF)).astype(np.uint32)
            if WIDTH[src.kind] == 64:
                v[SRC_VGPRS[i] + 1] = (a >> np.uint64(32)).astype(np.uint32)
        o = np.array(old, np.uint64)
        v[DST_VGPR] = (o & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        v[DST_VGPR + 1] = (o >> np.uint64(32)).astype(np.uint32)
        return run_instruction(self.arch, self.line, waves=n // LANES[self.arch], v=v, s=s,
                               exec_lanes=np.array(exec_lanes, bool), vcc_lanes=vcc)

    def _dst_expect(self, res: int, old: int) -> int:
        if WIDTH[self.dst] == 16:
            old32 = old & 0xFFFFFFFF
            if self.dst_hi:
                return (old32 & 0xFFFF) | (res << 16)
            return res if self.zero_hi else (old32 & 0xFFFF0000) | res
        return res & ((1 << WIDTH[self.dst]) - 1)

    def _matches(self, res: int, got: int, old: int) -> bool:
        """Does the destination register value `got` hold the reference result `res` (QNAN: any quiet NaN; within
        the ulp bound for approximate operations), with the rest of the register as the write rules leave it?"""
        from isa_reference import ANY, QNAN, is_nan, to_float
        if res == ANY:
            return True
        f = _fmt_of(self.dst)
        if res != QNAN and not (self.compare.ulp and f is not None):
            if self.hi_any and WIDTH[self.dst] == 16:
                return (got & 0xFFFF) == res
            return got == self._dst_expect(res, old)
        shift = 16 if (WIDTH[self.dst] == 16 and self.dst_hi) else 0
        part = (got >> shift) & f.mask
        if WIDTH[self.dst] == 16 and not self.hi_any and (got & ~(0xFFFF << shift) & 0xFFFFFFFF) != \
                (self._dst_expect(0, old) & ~(0xFFFF << shift) & 0xFFFFFFFF):
            return False
        if res == QNAN:
            return is_nan(part, f) and (self.compare.nan == "any" or bool(part & f.quiet_bit))
        if is_nan(res, f) or is_nan(part, f):
            return res == part
        wv, gv = to_float(res, f), to_float(part, f)
        if wv == gv:
            return wv != 0 or res == part  # zeros: the sign counts
        return abs(wv - gv) <= self.compare.ulp * _ulp(wv, f) + self.compare.abs_tol

    def check(self) -> str | None:
        """Run and compare; None when every lane matches, else a description of the first mismatching lanes."""
        raw, old, exec_lanes = self.inputs()
        want = self.expected(raw, old, exec_lanes)
        st = self.run(raw, old, exec_lanes)
        bad = []
        got_v = None
        if self.dst not in ("bit", "none"):
            got_v = st.vector64(DST_VGPR) if WIDTH[self.dst] == 64 else st.vector(DST_VGPR)
        got_m = None
        if self.sdst is not None or self.dst == "bit":
            reg = {"vcc": VCC, "exec": EXEC, "sgpr": SDST_SGPR}[self.sdst or "vcc"]
            got_m = st.mask(reg)
        for lane, (res, bit) in enumerate(want):
            active = exec_lanes[lane]
            o = old[lane] if WIDTH.get(self.dst, 32) == 64 else old[lane] & 0xFFFFFFFF
            problems = []
            if got_v is not None:
                g = int(got_v[lane])
                if not active:
                    if g != o:
                        problems.append(f"inactive lane written: 0x{g:x}, was 0x{o:x}")
                elif res is not None and not self._matches(res, g, old[lane]):
                    from isa_reference import QNAN
                    problems.append(f"got 0x{g:x}, want "
                                    f"{'a quiet NaN' if res == QNAN else hex(self._dst_expect(res, old[lane]))}"
                                    f"{'' if not self.compare.ulp else f' within {self.compare.ulp} ulp'}")
            if got_m is not None and bit is not None:
                g = int(got_m[lane])
                w = bit if active else (0 if self.sdst != "exec" else 0)
                if g != w:
                    problems.append(f"lane-mask bit {g}, want {w}{'' if active else ' (inactive lane)'}")
            if problems:
                ops = ", ".join(f"0x{raw[i][lane]:x}" for i in range(len(self.srcs)))
                bad.append(f"lane {lane}: sources ({ops}): " + "; ".join(problems))
        if not bad:
            return None
        return f"{self.line}: {len(bad)} of {len(want)} lanes differ ({self.doc})\n    " + "\n    ".join(bad[:6])


def _ulp(x: float, f) -> float:
    import math
    if x == 0 or math.isinf(x):
        return 2.0 ** (1 - f.bias - f.mbits)
    e = max(math.frexp(abs(x))[1] - 1, 1 - f.bias)
    return 2.0 ** (e - f.mbits)


# ---------------------------------------------------------------------------------------------------------
# instruction texts with random legal modifiers


def operand_text(arch: str, kind: str, reg: int, neg: bool = False, abs_: bool = False, hi: bool | None = None) -> str:
    """v10, v[10:11], v10.h (gfx11 true16 halves), with -x / |x| float modifiers."""
    if WIDTH.get(kind) == 64:
        t = f"v[{reg}:{reg + 1}]"
    elif WIDTH.get(kind) == 16 and arch == "gfx1100" and hi is not None:
        t = f"v{reg}.{'h' if hi else 'l'}"
    else:
        t = f"v{reg}"
    if abs_:
        t = f"|{t}|"
    return f"-{t}" if neg else t


OMOD_TEXT = {0: "", 1: " mul:2", 2: " mul:4", 3: " div:2"}


def mask_operand(arch: str, where: str) -> str:
    """The text of a lane-mask operand: VCC, or the SGPR (pair) the harness uses for e64 forms."""
    if where == "vcc":
        return "vcc_lo" if LANES[arch] == 32 else "vcc"
    reg = CARRY_IN_SGPR if where == "sgpr_in" else SDST_SGPR
    return f"s{reg}" if LANES[arch] == 32 else f"s[{reg}:{reg + 1}]"


def variants(arch: str, name: str, srcs: tuple[str, ...], dst: str, fn: Callable, doc: str, *,
             forms: tuple[str, ...] = ("e32", "e64"), n64: int = 3, fmods: bool | None = None, acc: bool = False,
             int_clamp: bool = False, out_mods: bool | None = None, sdst: str | None = None, zero_hi: bool = False,
             seed: str = "", compare: Check = Check(), halves: bool = True,
             implicit_vcc: bool = False, hi_any: bool = False, abs_ok: bool = True) -> list[ValuCase]:
    """Cases of one VALU opcode over forms: "e32" (no modifiers), "e64" (mnemonic_e64) and "vop3" (no suffix; VOP3-only
    opcodes) with `n64` random modifier sets each: neg/abs on float sources (`fmods`, default: float sources), clamp
    and omod (`out_mods`, default: float results), register halves of 16-bit operands (gfx11 .l/.h when `halves`).
    A "bit" source is the lane mask VCC (e32) or an SGPR (e64); `sdst` "mask" adds a lane-mask result (VCC for
    e32 forms, an SGPR for e64; "exec" for v_cmpx). `acc`: an accumulator in the destination (v_fmac). `abs_ok`
    False for VOP3SD forms (v_div_scale): their encoding has no abs bits (gfx11's assembler drops |x| silently,
    gfx942's rejects it), so hardware never sees one."""
    r = rng(arch, name, seed)
    true16 = arch == "gfx1100" and halves
    if fmods is None:
        fmods = any(_fmt_of(k) is not None for k in srcs)
    if out_mods is None:
        out_mods = _fmt_of(dst) is not None or int_clamp
    out = []
    for form in forms:
        for _ in range(1 if form == "e32" else n64):
            mods = form != "e32"
            case_srcs, texts = [], []
            dst_hi = true16 and WIDTH.get(dst) == 16 and r.random() < 0.5
            vi = 0
            for k in srcs:
                if k == "bit" and implicit_vcc:  # read from VCC whatever the encoding (v_div_fmas)
                    case_srcs.append(Src("bit", where="vcc"))
                    continue
                if k == "bit":
                    where = "vcc" if form == "e32" else "sgpr_in"
                    case_srcs.append(Src("bit", where="vcc" if form == "e32" else "sgpr"))
                    texts.append(mask_operand(arch, where))
                    continue
                is_f = _fmt_of(k) is not None or fmods == "all"
                neg = bool(mods and fmods and is_f and r.random() < 0.4)
                ab = bool(mods and fmods and is_f and abs_ok and r.random() < 0.3)
                hi = (r.random() < 0.5) if (true16 and WIDTH[k] == 16) else None
                as_float = {16: "f16", 32: "f32", 64: "f64"}[WIDTH[k]]  # float modifiers on untyped bits: the sign
                case_srcs.append(Src(k if _fmt_of(k) is not None or not (neg or ab) else as_float, neg=neg, abs=ab,
                                     hi=bool(hi)))
                texts.append(operand_text(arch, k, SRC_VGPRS[vi], neg, ab, hi))
                vi += 1
            if acc:
                case_srcs.append(Src(dst, hi=dst_hi, where="dst"))
            clamp = bool(mods and out_mods and r.random() < 0.35)
            omod = r.choice([0, 0, 1, 2, 3]) if (mods and out_mods and _fmt_of(dst) is not None) else 0
            parts = []
            if dst not in ("bit", "none"):
                parts.append(operand_text(arch, dst, DST_VGPR, hi=dst_hi if (true16 and WIDTH[dst] == 16) else None))
            mask_dst = None
            if sdst == "exec":
                mask_dst = "exec"
                if arch == "gfx942":  # GFX9 v_cmpx also writes its sdst (VCC for e32)
                    parts.append(mask_operand(arch, "vcc" if form == "e32" else "sgpr_out"))
            elif sdst == "mask" or dst == "bit":
                mask_dst = "vcc" if form == "e32" else "sgpr"
                parts.append(mask_operand(arch, "vcc" if form == "e32" else "sgpr_out"))
            mn = name + {"e32": "_e32", "e64": "_e64", "vop3": ""}[form]
            line = f"{mn} {', '.join(parts + texts)}" + (" clamp" if clamp else "") + OMOD_TEXT[omod]
            out.append(ValuCase(arch, line, fn, case_srcs, dst, sdst=mask_dst, dst_hi=dst_hi, clamp=clamp, omod=omod,
                                int_clamp=int_clamp, zero_hi=zero_hi, hi_any=hi_any, compare=compare, doc=doc))
    return out


# ---------------------------------------------------------------------------------------------------------
# GFX9 SDWA forms: byte/word selects of the sources, the result placed in a byte/word of the destination

SDWA_SELS = ("BYTE_0", "BYTE_1", "BYTE_2", "BYTE_3", "WORD_0", "WORD_1", "DWORD")
SDWA_UNUSED = ("UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE")
_SDWA_FIELD = {0: (0, 8), 1: (8, 8), 2: (16, 8), 3: (24, 8), 4: (0, 16), 5: (16, 16), 6: (0, 32)}  # (shift, bits)


def sdwa_select(raw32: int, sel: int, sext: bool) -> int:
    """SRCn_SEL / SRCn_SEXT: the selected byte or word of a 32-bit register, zero- or sign-extended to 32 bits."""
    shift, bits = _SDWA_FIELD[sel]
    x = (raw32 >> shift) & ((1 << bits) - 1)
    if sext and bits < 32 and x >> (bits - 1):
        x |= 0xFFFFFFFF ^ ((1 << bits) - 1)
    return x


def sdwa_place(result: int, old32: int, sel: int, unused: int) -> int:
    """DST_SEL / DST_UNUSED: the result's low bits in the selected byte or word; the other bits zero
    (UNUSED_PAD), or the bits above the sign of the placed part and zeros below (UNUSED_SEXT), or the old
    register's bits (UNUSED_PRESERVE)."""
    shift, bits = _SDWA_FIELD[sel]
    if bits == 32:
        return result & 0xFFFFFFFF
    field_mask = ((1 << bits) - 1) << shift
    placed = (result << shift) & field_mask
    if unused == 2:
        return (old32 & ~field_mask & 0xFFFFFFFF) | placed
    top = shift + bits
    if unused == 1 and placed >> (top - 1) & 1:
        return placed | (0xFFFFFFFF & ~((1 << top) - 1))
    return placed


@dataclass
class SdwaCase(ValuCase):
    """A VOP1/VOP2/VOPC instruction with an SDWA dword: each source's `sel`/`sext` picks what the operation reads,
    `dst_sel`/`dst_unused` where its result goes. A 16-bit result under DST_SEL:DWORD leaves bits 31:16 open
    (not asserted)."""

    dst_sel: int = 6
    dst_unused: int = 0

    def expected(self, raw, old, exec_lanes):
        from isa_reference import ANY
        out = []
        kw = {"clamp": self.clamp} if self.int_clamp else {}
        for lane in range(self.vectors):
            args = []
            for s, col in zip(self.srcs, raw):
                x = col[lane]
                if s.kind != "bit":
                    x = sdwa_select(x & 0xFFFFFFFF, s.sel, s.sext)
                    if WIDTH[s.kind] == 16:
                        x &= 0xFFFF
                args.append(_apply_mods(x, s))
            res = self.ref(*args, **kw)
            if self.dst == "bit":  # a compare: only the lane-mask bit
                out.append((None, int(res)))
                continue
            bit = None
            if self.sdst is not None:
                res, bit = res
            if res != ANY and _fmt_of(self.dst) is not None and not self.int_clamp:
                res = _omod_clamp(res, self.dst, self.omod, self.clamp)
            out.append((res, bit))
        return out

    def _dst_expect(self, res: int, old: int) -> int:
        return sdwa_place(res, old & 0xFFFFFFFF, self.dst_sel, self.dst_unused)

    def _matches(self, res: int, got: int, old: int) -> bool:
        from isa_reference import ANY, QNAN, is_nan
        if res == ANY:
            return True
        width = WIDTH[self.dst]
        shift, bits = _SDWA_FIELD[self.dst_sel]
        landed = min(bits, width)  # result bits that reach the register
        field = (got >> shift) & ((1 << landed) - 1)
        if res == QNAN:  # any quiet NaN; a part of one (BYTE of an f16, WORD of an f32) is any bits
            f = _fmt_of(self.dst)
            if landed == width and not (is_nan(field, f) and (self.compare.nan == "any" or field & f.quiet_bit)):
                return False
            res = field
        if bits == 32 and width == 16:
            return (got & 0xFFFF) == res
        return got == self._dst_expect(res, old)


def sdwa_variants(arch: str, name: str, srcs: tuple[str, ...], dst: str, fn: Callable, doc: str, *, n: int = 6,
                  int_clamp: bool = False, out_mods: bool | None = None, fmods: bool | str | None = None,
                  sdst: str | None = None, sext_ok: bool = True, seed: str = "") -> list[SdwaCase]:
    """`n` SDWA forms (name_sdwa) of one VOP1/VOP2 opcode with random selects: SRCn_SEL and (integer and bit
    sources, `sext_ok`) SEXT per source, neg/abs on float sources (`fmods`), sometimes one source in an SGPR
    (GFX9 SDWA S0/S1), DST_SEL and DST_UNUSED, clamp and omod (`out_mods`). A "bit" source is VCC; `sdst` "mask"
    adds VCC as a carry-out destination (VOP2 SDWA has no SDST). A "bit" result (VOPC) goes to VCC or an SGPR pair
    (v_cmpx: and to EXEC, which is what its cases check)."""
    r = rng(arch, name, "sdwa", seed)
    if fmods is None:
        fmods = any(_fmt_of(k) is not None for k in srcs)
    if out_mods is None:
        out_mods = _fmt_of(dst) is not None or int_clamp
    out = []
    for _ in range(n):
        data = [i for i, k in enumerate(srcs) if k != "bit"]
        # one SGPR source at most, and none beside VCC: the constant bus takes one scalar value
        scalar = r.choice(data) if data and "bit" not in srcs and r.random() < 0.25 else None
        case_srcs, texts, sels = [], [], []
        for i, k in enumerate(srcs):
            if k == "bit":
                case_srcs.append(Src("bit", where="vcc"))
                texts.append(mask_operand(arch, "vcc"))
                continue
            is_f = _fmt_of(k) is not None or fmods == "all"
            neg = bool(fmods and is_f and r.random() < 0.35)
            ab = bool(fmods and is_f and r.random() < 0.25)
            sext = bool(sext_ok and _fmt_of(k) is None and not (neg or ab) and r.random() < 0.4)
            sel = r.choice(range(7))
            as_float = {16: "f16", 32: "f32"}[WIDTH[k]]
            case_srcs.append(Src(k if _fmt_of(k) is not None or not (neg or ab) else as_float, neg=neg, abs=ab,
                                 where="s" if i == scalar else "v", sel=sel, sext=sext))
            t = f"s{SCALAR_SRC_SGPRS[i]}" if i == scalar else f"v{SRC_VGPRS[i]}"
            t = f"sext({t})" if sext else t
            t = f"|{t}|" if ab else t
            texts.append(f"-{t}" if neg else t)
            sels.append(f"src{len(sels)}_sel:{SDWA_SELS[sel]}")
        if dst == "bit":  # VOPC: the compare bits go to VCC or (SD) an SGPR pair; no DST_SEL, no output modifiers
            mask_dst = r.choice(["vcc", "sgpr"])
            line = (f"{name}_sdwa {mask_operand(arch, 'vcc' if mask_dst == 'vcc' else 'sgpr_out')}, "
                    f"{', '.join(texts)} " + " ".join(sels))
            # v_cmpx: the bits go to EXEC as well (GFX9 writes both); EXEC is what the case checks
            out.append(SdwaCase(arch, line, fn, case_srcs, dst, sdst="exec" if "_cmpx_" in name else mask_dst,
                                doc=doc))
            continue
        clamp = bool(out_mods and r.random() < 0.35)
        omod = r.choice([0, 0, 1, 2, 3]) if (out_mods and _fmt_of(dst) is not None) else 0
        dst_sel, unused = r.choice(range(7)), r.choice(range(3))
        parts = [f"v{DST_VGPR}"] + ([mask_operand(arch, "vcc")] if sdst == "mask" else [])
        line = (f"{name}_sdwa {', '.join(parts + texts)}" + (" clamp" if clamp else "") + OMOD_TEXT[omod] +
                f" dst_sel:{SDWA_SELS[dst_sel]} dst_unused:{SDWA_UNUSED[unused]} " + " ".join(sels))
        out.append(SdwaCase(arch, line, fn, case_srcs, dst, sdst="vcc" if sdst == "mask" else None, clamp=clamp,
                            omod=omod, int_clamp=int_clamp, doc=doc, dst_sel=dst_sel, dst_unused=unused))
    return out


# ---------------------------------------------------------------------------------------------------------
# DPP16 forms (e32 with a DPP dword): src0 read from another lane of the wave

KEEP = -3  # marker: the lane is not written (a DPP row/bank mask or a missing source lane without BOUND_CTRL)


def dpp_source_lane(control: tuple[str, int], lane: int, lanes: int) -> int | None:
    """The lane whose src0 lane `lane` reads under a DPP16 control (kind, n), None when the control names no lane
    (shifted past its row or the wave, row 0 of row_bcast:15, rows 0-1 of row_bcast:31), from the GFX9 / RDNA3
    guides' DPP_CTRL list: quad_perm picks within the quad, row_shl:n reads n lanes up, row_shr:n n lanes down,
    row_ror:n rotates down within the row, wave_* by one lane across the wave (GFX9), row_mirror / row_half_mirror
    reverse the row / half row, row_bcast:15 gives each row lane 15 of the row before, row_bcast:31 rows 2-3 lane 31
    (GFX9), row_share:n lane n of the row, row_xmask:n lane (index ^ n) (gfx11)."""
    kind, n = control
    base, idx = lane - lane % 16, lane % 16
    if kind == "quad_perm":
        return lane - lane % 4 + (n >> (2 * (lane % 4)) & 3)
    if kind == "row_shl":
        return lane + n if idx + n < 16 else None
    if kind == "row_shr":
        return lane - n if idx - n >= 0 else None
    if kind == "row_ror":
        return base + (idx - n) % 16
    if kind == "wave_shl":
        return lane + 1 if lane + 1 < lanes else None
    if kind == "wave_shr":
        return lane - 1 if lane >= 1 else None
    if kind == "wave_rol":
        return (lane + 1) % lanes
    if kind == "wave_ror":
        return (lane - 1) % lanes
    if kind == "row_mirror":
        return base + 15 - idx
    if kind == "row_half_mirror":
        return lane - lane % 8 + 7 - lane % 8
    if kind == "row_bcast15":
        return base - 1 if base else None
    if kind == "row_bcast31":
        return 31 if lane >= 32 else None
    if kind in ("row_share", "row_newbcast"):  # gfx11 row_share, gfx90a+ row_newbcast: lane n of the row
        return base + n
    if kind == "row_xmask":
        return base + (idx ^ n)
    if kind == "dpp8":  # gfx11 DPP8: lane i of each group of 8 reads lane sel[i] (3 bits each) of its group
        return lane - lane % 8 + (n >> (3 * (lane % 8)) & 7)
    raise ValueError(kind)


def _dpp_control_text(control: tuple[str, int]) -> str:  # noqa: C901 - one line per control
    kind, n = control
    if kind == "quad_perm":
        return "quad_perm:[" + ",".join(str(n >> (2 * i) & 3) for i in range(4)) + "]"
    if kind in ("row_mirror", "row_half_mirror"):
        return kind
    if kind.startswith("wave_"):
        return f"{kind}:1"
    if kind.startswith("row_bcast"):
        return f"row_bcast:{kind[9:]}"
    if kind == "dpp8":
        return "dpp8:[" + ",".join(str(n >> (3 * i) & 7) for i in range(8)) + "]"
    return f"{kind}:{n}"


@dataclass
class DppCase(ValuCase):
    """A VOP1/VOP2 instruction with a DPP16 (or gfx11 DPP8) dword: src0 comes from the lane `control` names
    (gfx11 FI: inactive lanes are sources too; DPP8: no masks, a source not fetched reads 0). A lane whose source
    lane is missing or inactive reads 0 with BOUND_CTRL, else is not written; lanes outside ROW_MASK / BANK_MASK
    are not written (their lane-mask bits not asserted). BOUND_CTRL and the masks are read from the assembled DPP
    dword (bits 19, 27:24 bank, 31:28 row). A lane reading BOUND_CTRL's 0 through neg/abs is not asserted."""

    control: tuple[str, int] = ("quad_perm", 0xE4)
    vop3: bool = False  # gfx11 VOP3 DPP (name_e64_dpp): the DPP dword follows two VOP3 dwords

    def expected(self, raw, old, exec_lanes):
        from isa_reference import ANY
        code = encoding(self.arch, self.line)
        word = int.from_bytes(code[8:12] if self.vop3 else code[4:8], "little")
        src0 = int.from_bytes(code[4:8], "little") & 0x1FF if self.vop3 else int.from_bytes(code[:4], "little") & 0x1FF
        bound, bank_mask, row_mask = bool(word >> 19 & 1), word >> 24 & 0xF, word >> 28 & 0xF
        fetch_inactive = self.arch == "gfx1100" and bool(word >> 18 & 1)  # gfx11 FI: inactive lanes are sources
        if self.control[0] == "dpp8":  # no masks; a source not fetched reads 0; FI is src0 = 234 (DPP8FI)
            bound, bank_mask, row_mask, fetch_inactive = True, 0xF, 0xF, src0 == 234
        lanes = LANES[self.arch]
        out = []
        for lane in range(self.vectors):
            wave0, i = lane - lane % lanes, lane % lanes
            written = bool(row_mask >> (i // 16) & 1 and bank_mask >> (i % 16 // 4) & 1)
            src = dpp_source_lane(self.control, i, lanes)
            valid = src is not None and (fetch_inactive or exec_lanes[wave0 + src])
            args, open_ = [], False
            for k, (s, col) in enumerate(zip(self.srcs, raw)):
                x = col[lane]
                if k == 0:
                    x = col[wave0 + src] if valid else 0
                    open_ = not valid and (s.neg or s.abs)
                if s.kind != "bit" and WIDTH[s.kind] == 16:
                    x &= 0xFFFF
                args.append(_apply_mods(x, s))
            if not written or not (valid or bound):
                out.append((None if self.dst == "bit" else KEEP, None))
                continue
            res = self.ref(*args)
            if self.dst == "bit":  # a compare: the lane-mask bit only
                out.append((None, None) if open_ else (None, int(res)))
                continue
            bit = None
            if self.sdst is not None:
                res, bit = res
            if res != ANY and _fmt_of(self.dst) is not None:
                res = _omod_clamp(res, self.dst, self.omod, self.clamp)
            out.append((ANY, None) if open_ else (res, bit))
        return out

    def _dst_expect(self, res: int, old: int) -> int:
        return old & ((1 << max(32, WIDTH[self.dst])) - 1) if res == KEEP else super()._dst_expect(res, old)

    def _matches(self, res: int, got: int, old: int) -> bool:
        if res == KEEP:
            return got == old & ((1 << max(32, WIDTH[self.dst])) - 1)
        return super()._matches(res, got, old)


def dpp_variants(arch: str, name: str, srcs: tuple[str, ...], dst: str, fn: Callable, doc: str, *, n: int = 6,
                 fmods: bool | str | None = None, sdst: str | None = None, zero_hi: bool = False,
                 hi_any: bool = False, seed: str = "", vop3: bool = False,
                 controls: tuple[str, ...] | None = None, acc: bool = False) -> list[DppCase]:
    """`n` DPP16 forms (name_dpp) of one VOP1/VOP2 opcode: a random control of the architecture's list, ROW_MASK,
    BANK_MASK (mostly all rows and banks), BOUND_CTRL, neg/abs on float sources (`fmods`). A "bit" source is VCC;
    `sdst` "mask" adds VCC as the carry-out destination. `vop3` (gfx11): the VOP3 form name_e64_dpp, with clamp and
    omod on float results and neg/abs from the VOP3 dword (also under DPP8)."""
    r = rng(arch, name, "dpp", seed, vop3)
    if fmods is None:
        fmods = any(_fmt_of(k) is not None for k in srcs)
    kinds = ["quad_perm", "row_shl", "row_shr", "row_ror", "row_mirror", "row_half_mirror"]
    kinds += ["wave_shl", "wave_shr", "wave_rol", "wave_ror", "row_bcast15", "row_bcast31", "row_newbcast"] \
        if arch == "gfx942" \
        else ["row_share", "row_xmask", "dpp8", "dpp8"]
    kinds = list(controls) if controls else kinds
    out = []
    for _ in range(n):
        kind = r.choice(kinds)
        if kind == "quad_perm":
            amount = r.getrandbits(8)
        elif kind in ("row_shl", "row_shr", "row_ror"):
            amount = r.randrange(1, 16)
        elif kind in ("row_share", "row_xmask", "row_newbcast"):
            amount = r.randrange(16)
        elif kind == "dpp8":
            amount = r.getrandbits(24)
        else:
            amount = 0
        control = (kind, amount)
        rows = 0xF if r.random() < 0.6 else r.randrange(1, 16)
        if kind == "row_bcast15":  # row 0 reads no lane: keep it out of the checked rows
            rows = (rows & 0xE) or 0xA
        if kind == "row_bcast31":
            rows = (rows & 0xC) or 0xC
        rows &= (1 << (LANES[arch] // 16)) - 1
        banks = 0xF if r.random() < 0.6 else r.randrange(1, 16)
        case_srcs, texts = [], []
        for i, k in enumerate(srcs):
            if k == "bit":
                case_srcs.append(Src("bit", where="vcc"))
                texts.append(mask_operand(arch, "vcc"))
                continue
            is_f = _fmt_of(k) is not None or fmods == "all"
            mods_ok = fmods and is_f and (kind != "dpp8" or vop3)  # the DPP8 dword has no neg/abs bits
            neg = bool(mods_ok and r.random() < 0.35)
            ab = bool(mods_ok and r.random() < 0.25)
            as_float = {16: "f16", 32: "f32", 64: "f64"}[WIDTH[k]]
            case_srcs.append(Src(k if _fmt_of(k) is not None or not (neg or ab) else as_float, neg=neg, abs=ab))
            texts.append(operand_text(arch, k, SRC_VGPRS[i], neg, ab))
        if acc:  # an accumulator in the destination (v_fmac)
            case_srcs.append(Src(dst, where="dst"))
        parts = [operand_text(arch, dst, DST_VGPR)] + ([mask_operand(arch, "vcc")] if sdst == "mask" else [])
        if dst == "bit":  # VOPC: the compare bits go to VCC (e32) or an SGPR (VOP3)
            parts = [mask_operand(arch, "sgpr_out" if vop3 else "vcc")]
            sdst = "sgpr" if vop3 else "vcc"
        clamp = bool(vop3 and _fmt_of(dst) is not None and r.random() < 0.3)
        omod = r.choice([0, 0, 1, 2, 3]) if vop3 and _fmt_of(dst) is not None else 0
        outs = (" clamp" if clamp else "") + OMOD_TEXT[omod]
        line = f"{name}{'_e64' if vop3 else ''}_dpp {', '.join(parts + texts)}{outs} {_dpp_control_text(control)}"
        if kind != "dpp8":
            line += f" row_mask:0x{rows:x} bank_mask:0x{banks:x}" + (" bound_ctrl:1" if r.random() < 0.5 else "")
        if arch == "gfx1100" and r.random() < 0.4:
            line += " fi:1"
        out.append(DppCase(arch, line, fn, case_srcs, dst, sdst="vcc" if sdst == "mask" else sdst, doc=doc,
                           zero_hi=zero_hi, hi_any=hi_any, control=control, vop3=vop3, clamp=clamp, omod=omod))
    return out


def verify(case) -> None:
    """The body of every instruction test: run the case, xfail when unimplemented, fail on a mismatch."""
    import pytest
    reason = no_assembler_reason(case.arch)
    if reason:
        pytest.skip(reason)
    try:
        problem = case.check()
    except Unimplemented as e:
        pytest.xfail(f"unimplemented: {e}")
    assert problem is None, problem


def keep_accepted(arch: str, cases: list) -> tuple[list, list[str]]:
    """The cases whose text LLVM's assembler accepts (assembled in one batch), and the rejected texts."""
    if no_assembler_reason(arch):
        return cases, []
    assemble_all(arch, [c.line for c in cases])
    ok = [c for c in cases if _CODE[(arch, c.line)][0] is not None]
    return ok, [f"{c.line}: {_CODE[(arch, c.line)][1]}" for c in cases if _CODE[(arch, c.line)][0] is None]


def group_accepted(arch: str, pending: list[tuple[str, object]], groups: dict[str, list],
                   rejected: list[str]) -> None:
    """Fill `groups` (key -> cases, in drawing order) with the pending (key, case) pairs LLVM's assembler
    accepts, and `rejected` with the texts it refuses: one assembler batch for a whole test module."""
    ok, bad = keep_accepted(arch, [c for _, c in pending])
    accepted = {id(c) for c in ok}
    for key, c in pending:
        groups.setdefault(key, [])
        if id(c) in accepted:
            groups[key].append(c)
    rejected.extend(bad)


# ---------------------------------------------------------------------------------------------------------
# the report


def _isa_modules():
    import importlib
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    names = [m[:-3] for m in sorted(os.listdir(here)) if m.startswith("test_isa_") and m.endswith(".py")]
    harness = importlib.import_module("isa_harness")  # the module the tests use (this file runs as __main__)
    return harness, [importlib.import_module(name) for name in names]


def _report() -> int:
    import traceback

    harness, modules = _isa_modules()
    mismatches: list[str] = []
    checked = 0
    for mod in modules:
        for case in mod.CASES:
            try:
                problem = case.check()
            except harness.Unimplemented:
                continue
            except harness.Rejected as e:
                print(f"rejected by the assembler: {e}")
                continue
            except Exception:  # an internal error of the core is a finding too
                mismatches.append(f"[{case.arch}] {case.line}: internal error\n{traceback.format_exc(limit=3)}")
                continue
            checked += 1
            if problem:
                mismatches.append(f"[{case.arch}] {problem}")
    for arch, lines in harness.UNIMPLEMENTED.items():
        print(f"== {arch}: {len(lines)} unimplemented instruction forms")
        for line in sorted(lines):
            print(f"   {line}")
    if harness.TRANSLATE:
        for arch, lines in harness.TRANSLATED.items():
            print(f"== {arch}: {len(lines)} instruction forms ran as translated blocks (HCQSIM_SHADER=translate)")
    print(f"== {checked} instruction forms checked, {len(mismatches)} mismatching")
    for m in mismatches:
        print(m)
    return 1 if mismatches else 0


def _digest() -> int:
    """Print one `sha256  arch: line` row per instruction run of the ISA corpus (registers after the run)."""
    harness, modules = _isa_modules()
    harness.DIGESTS = []
    for mod in modules:
        for case in [*mod.CASES, *getattr(mod, "MIX_CASES", [])]:
            try:
                case.check()
            except (harness.Unimplemented, harness.Rejected):
                continue
    for key, digest in harness.DIGESTS:
        print(f"{digest}  {key}")
    return 0


def simd_levels() -> dict[str, str]:
    """name -> NPY_DISABLE_CPU_FEATURES value for each numpy SIMD level this CPU offers beyond the baseline: every
    level on (""), the AVX-512 ones off (the AVX2-only machines' path) where there are any, all off (baseline)."""
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:  # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    found = [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]
    levels = {"all": ""}
    wide = [f for f in found if "AVX512" in f or f in ("X86_V4",)]
    if wide and len(wide) < len(found):
        levels["no-avx512"] = " ".join(wide)
    if found:
        levels["baseline"] = " ".join(found)
    return levels


def _same_on_every_simd_path() -> int:
    import os
    import subprocess
    runs = {}
    for name, disabled in simd_levels().items():
        env = dict(os.environ, NPY_DISABLE_CPU_FEATURES=disabled)
        out = subprocess.run([sys.executable, "-m", "tests.isa_harness", "--digest"], env=env, capture_output=True,
                             text=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        if out.returncode:
            print(f"== {name}: the digest run failed (exit {out.returncode})\n{out.stderr[-3000:]}")
            return 1
        runs[name] = out.stdout.splitlines()
        print(f"== {name} (NPY_DISABLE_CPU_FEATURES={disabled!r}): {len(runs[name])} instruction runs")
    first, *rest = runs
    differ = 0
    for name in rest:
        if len(runs[name]) != len(runs[first]):
            print(f"== {name}: {len(runs[name])} runs, {first}: {len(runs[first])}")
            differ += 1
            continue
        for a, b in zip(runs[first], runs[name]):
            if a != b:
                differ += 1
                print(f"== differs between {first} and {name}: {a.split('  ', 1)[1]}")
    print(f"== {differ} instruction runs differ between SIMD levels {', '.join(runs)}")
    return 1 if differ else 0


if __name__ == "__main__":
    if "--report" in sys.argv:
        sys.exit(_report())
    if "--digest" in sys.argv:
        sys.exit(_digest())
    if "--same-on-every-simd-path" in sys.argv:
        sys.exit(_same_on_every_simd_path())
    print(__doc__)
