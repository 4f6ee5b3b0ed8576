"""What a program computes, per lane, from the LLVM LangRef semantics of each operation.

Values are bit patterns (Python ints, integers unsigned modulo 2^w) or one of three markers where LangRef
leaves a choice that later operations cannot see through:

* `NAN_Q`: some quiet NaN, sign and payload unspecified (e.g. `fadd` with a qNaN operand, 0 * inf,
  `canonicalize` of any NaN);
* `NAN_ANY`: some NaN, maybe signalling (a NaN result of arithmetic with an sNaN operand may propagate it
  unchanged);
* `UNKNOWN`: anything (the bits of such a NaN seen as an integer, ...). Outputs that are UNKNOWN are not
  checked.

Where LangRef allows one of a few *specific* answers (fmuladd fused or not; minnum(+0, -0) either zero;
minnum with a signalling NaN operand giving a qNaN or the other operand), the evaluation takes a `Choices`
vector: `evaluate` under several vectors, and a lane is right if any vector gives its results.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import fp
from .dag import LOCAL, VECTORS, WIDTH, Node, Program, count, elem, is_float


class Marker:
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


NAN_Q = Marker("<any quiet NaN>")
NAN_ANY = Marker("<any NaN>")
UNKNOWN = Marker("<unknown>")
Value = "int | Marker"


@dataclass
class Choices:
    """One resolution of LangRef's nondeterminism: key -> alternative index (default 0). Records the keys
    that were asked for, so the caller can enumerate the alternatives that mattered."""

    picks: dict = field(default_factory=dict)
    seen: dict = field(default_factory=dict)  # key -> number of alternatives

    def pick(self, key, n: int) -> int:
        self.seen[key] = n
        return self.picks.get(key, 0)


def _mask(w: int) -> int:
    return (1 << w) - 1


def _signed(v: int, w: int) -> int:
    return v - (1 << w) if v >> (w - 1) & 1 else v


# ---------------------------------------------------------------------------------------------------
# floating point helpers on values that may be markers


def _nanlike(v, ty: str) -> bool:
    return v is NAN_Q or v is NAN_ANY or (isinstance(v, int) and fp.is_nan(v, ty))


def _maybe_snan(v, ty: str) -> bool:
    return v is NAN_ANY or (isinstance(v, int) and fp.is_snan(v, ty))


def _nan_result(args, ty: str):
    """The NaN an arithmetic operation returns: quiet unless an sNaN operand may be propagated as is."""
    return NAN_ANY if any(_maybe_snan(a, ty) for a in args) else NAN_Q


def _arith(ty: str, args, compute):
    """Common NaN handling for arithmetic: NaN in -> NaN out; compute returns bits or None (= a NaN)."""
    if any(a is UNKNOWN for a in args):
        return UNKNOWN
    if any(_nanlike(a, ty) for a in args):
        return _nan_result(args, ty)
    r = compute(*args)
    return _nan_result(args, ty) if r is None else r


def _f(bits: int, ty: str) -> float:
    return fp.to_float(bits, ty)


def _fround(x: float, ty: str):
    return None if math.isnan(x) else fp.from_float(x, ty)


def _add(a, b, ty):
    fa, fb = _f(a, ty), _f(b, ty)
    if math.isinf(fa) and math.isinf(fb) and fa != fb:
        return None
    return _fround(fa + fb, ty)  # IEEE float64 add: exact zero sign rules are the same


def _mul(a, b, ty):
    return _fround(_f(a, ty) * _f(b, ty), ty) if not _inf_times_zero(a, b, ty) else None


def _inf_times_zero(a, b, ty):
    return (fp.is_inf(a, ty) and fp.is_zero(b, ty)) or (fp.is_zero(a, ty) and fp.is_inf(b, ty))


def _div(a, b, ty):
    fa, fb = _f(a, ty), _f(b, ty)
    if (fa == 0 and fb == 0) or (math.isinf(fa) and math.isinf(fb)):
        return None
    neg = fp.negative(a, ty) != fp.negative(b, ty)
    if fb == 0:
        return fp.inf(ty, neg)
    if math.isinf(fb):
        return fp.zero(ty, neg)
    return _fround(fa / fb, ty)


def _rem(a, b, ty):
    fa, fb = _f(a, ty), _f(b, ty)
    if math.isinf(fa) or fb == 0:
        return None
    if math.isinf(fb):
        return a
    r = math.fmod(fa, fb)  # exact; the sign of a zero result is the dividend's
    if r == 0:
        return fp.zero(ty, fp.negative(a, ty))
    return fp.from_float(r, ty)


def _sqrt(a, ty):
    if fp.is_zero(a, ty):
        return a
    fa = _f(a, ty)
    if fa < 0:
        return None
    if math.isinf(fa):
        return a
    if ty == "f64":
        return fp.from_float(math.sqrt(fa), ty)
    return fp.from_float(math.sqrt(fa), ty)  # f32/f16: sqrt in float64 then one rounding is correct


def _round_integral(a, ty, mode: str):
    if fp.is_inf(a, ty) or fp.is_zero(a, ty):
        return a
    fr = fp.to_fraction(a, ty)
    if fr.denominator == 1:
        return a
    if mode == "floor":
        k = math.floor(fr)
    elif mode == "ceil":
        k = math.ceil(fr)
    elif mode == "ftrunc":
        k = math.trunc(fr)
    elif mode == "round":  # half away from zero
        k = math.floor(abs(fr) + fp.Fraction(1, 2)) * (1 if fr > 0 else -1)
    else:  # rint / roundeven: half to even
        k = round(fr)
    if k == 0:
        return fp.zero(ty, fr < 0)
    return fp.round_exact(fp.Fraction(k), ty)


def _lt(a, b, ty) -> bool:
    return _f(a, ty) < _f(b, ty)


def _minmax_num(a, b, ty, is_max: bool, choices: Choices, key):
    if a is UNKNOWN or b is UNKNOWN:
        return UNKNOWN
    an, bn = _nanlike(a, ty), _nanlike(b, ty)
    if an and bn:
        return _nan_result((a, b), ty)
    if an or bn:
        nan, other = (a, b) if an else (b, a)
        if _maybe_snan(nan, ty) and choices.pick(key, 2):  # sNaN: the other operand, or a quiet NaN
            return NAN_Q
        return other
    fa, fb = _f(a, ty), _f(b, ty)
    if fa == fb and a != b:  # +0 and -0: either
        return (a, b)[choices.pick(key + ("zero",), 2)]
    return (a if fa > fb else b) if is_max else (a if fa < fb else b)


def _minmax_ieee(a, b, ty, is_max: bool):
    if a is UNKNOWN or b is UNKNOWN:
        return UNKNOWN
    if _nanlike(a, ty) or _nanlike(b, ty):
        return _nan_result((a, b), ty)
    fa, fb = _f(a, ty), _f(b, ty)
    if fa == fb:  # -0 < +0
        neg = fp.negative(a, ty) and fp.negative(b, ty) if is_max else fp.negative(a, ty) or fp.negative(b, ty)
        return a if fp.negative(a, ty) == neg else b
    return (a if fa > fb else b) if is_max else (a if fa < fb else b)


def _fcmp(pred: str, a, b, ty):
    if a is UNKNOWN or b is UNKNOWN:
        return UNKNOWN
    if _nanlike(a, ty) or _nanlike(b, ty):
        return int(pred.startswith("u") or pred == "uno") if pred != "ord" else 0
    if pred in ("ord",):
        return 1
    if pred == "uno":
        return 0
    fa, fb = _f(a, ty), _f(b, ty)
    rel = pred[1:]
    return int({"eq": fa == fb, "gt": fa > fb, "ge": fa >= fb, "lt": fa < fb, "le": fa <= fb,
                "ne": fa != fb}[rel])


def _fpclass(v, mask: int, ty: str):
    if v is UNKNOWN:
        return UNKNOWN
    if v is NAN_Q:
        return int(bool(mask & 2))
    if v is NAN_ANY:
        return int(bool(mask & 3)) if mask & 3 in (0, 3) else UNKNOWN
    neg = fp.negative(v, ty)
    if fp.is_nan(v, ty):
        bit = 0 if fp.is_snan(v, ty) else 1
    elif fp.is_inf(v, ty):
        bit = 2 if neg else 9
    elif fp.is_zero(v, ty):
        bit = 5 if neg else 6
    elif fp.is_subnormal(v, ty):
        bit = 4 if neg else 7
    else:
        bit = 3 if neg else 8
    return int(bool(mask >> bit & 1))


def _copysign(mag, sgn, ty):
    if mag is UNKNOWN or sgn is UNKNOWN:
        return UNKNOWN
    if isinstance(sgn, Marker):  # a NaN of unknown sign
        if isinstance(mag, Marker):
            return mag
        return (NAN_ANY if fp.is_snan(mag, ty) else NAN_Q) if fp.is_nan(mag, ty) else UNKNOWN
    if isinstance(mag, Marker):
        return mag
    s = fp.sign_bit(ty)
    return (mag & ~s) | (sgn & s)


def _fp_to_int(v, src: str, w: int, signed: bool, saturate: bool):
    """fptosi/fptoui: the emitter guards the plain forms so that only in-range values reach them; the
    saturating forms clamp and give 0 for NaN."""
    if v is UNKNOWN:
        return UNKNOWN
    if _nanlike(v, src):
        return 0
    if fp.is_inf(v, src):
        k = -(1 << 64) if fp.negative(v, src) else 1 << 64
    else:
        k = fp.float_to_int_trunc(v, src)
    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1)
    if not saturate and not lo <= k <= hi:
        return 0  # the emitter's guard replaced the operand by 0.0
    return max(lo, min(hi, k)) & _mask(w)


def in_range_for_fptoi(v: int, src: str, w: int, signed: bool) -> bool:
    """Whether truncating `v` fits: what the emitter's guard tests with two fcmps."""
    if fp.is_nan(v, src) or fp.is_inf(v, src):
        return False
    k = fp.float_to_int_trunc(v, src)
    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1)
    return lo <= k <= hi


def _fp_convert(v, src: str, dst: str):
    if v is UNKNOWN:
        return UNKNOWN
    if _nanlike(v, src):
        return _nan_result((v,), src)
    if fp.is_inf(v, src):
        return fp.inf(dst, fp.negative(v, src))
    if fp.is_zero(v, src):
        return fp.zero(dst, fp.negative(v, src))
    return fp.from_float(_f(v, src), dst)  # widening is exact; narrowing from f64/f32 rounds once


# ---------------------------------------------------------------------------------------------------
# integer helpers


def _int_binary(op: str, a: int, b: int, w: int) -> int:
    m = _mask(w)
    sa, sb = _signed(a, w), _signed(b, w)
    if op == "add":
        return (a + b) & m
    if op == "sub":
        return (a - b) & m
    if op == "mul":
        return (a * b) & m
    if op == "and":
        return a & b
    if op == "or":
        return a | b
    if op == "xor":
        return a ^ b
    if op == "shl":
        return (a << (b % w)) & m
    if op == "lshr":
        return a >> (b % w)
    if op == "ashr":
        return (sa >> (b % w)) & m
    if op in ("udiv", "urem"):
        d = b if b else 1  # the emitter's guard: a zero divisor becomes 1
        return (a // d) if op == "udiv" else (a % d)
    if op in ("sdiv", "srem"):
        d = sb if sb and not (sa == -(1 << (w - 1)) and sb == -1) else 1  # guard: 0 and INT_MIN / -1
        q = abs(sa) // abs(d) * (1 if (sa < 0) == (d < 0) else -1)  # truncating division
        return (q if op == "sdiv" else sa - q * d) & m
    if op == "smin":
        return a if sa <= sb else b
    if op == "smax":
        return a if sa >= sb else b
    if op == "umin":
        return min(a, b)
    if op == "umax":
        return max(a, b)
    if op == "sadd.sat":
        return max(-(1 << (w - 1)), min((1 << (w - 1)) - 1, sa + sb)) & m
    if op == "ssub.sat":
        return max(-(1 << (w - 1)), min((1 << (w - 1)) - 1, sa - sb)) & m
    if op == "uadd.sat":
        return min(m, a + b)
    if op == "usub.sat":
        return max(0, a - b)
    raise KeyError(op)


def _int_unary(op: str, a: int, w: int) -> int:
    if op == "abs":
        return abs(_signed(a, w)) & _mask(w)
    if op == "ctpop":
        return bin(a).count("1")
    if op == "ctlz":
        return w - a.bit_length()
    if op == "cttz":
        return w if a == 0 else (a & -a).bit_length() - 1
    if op == "bitreverse":
        return int(format(a, f"0{w}b")[::-1], 2)
    if op == "bswap":
        return int.from_bytes(a.to_bytes(w // 8, "little"), "big")
    raise KeyError(op)


def _icmp(pred: str, a: int, b: int, w: int) -> int:
    if pred[0] == "s":
        a, b = _signed(a, w), _signed(b, w)
    rel = pred if pred in ("eq", "ne") else pred[1:]
    return int({"eq": a == b, "ne": a != b, "gt": a > b, "ge": a >= b, "lt": a < b, "le": a <= b}[rel])


# ---------------------------------------------------------------------------------------------------
# one operation on one lane


def _to_bits(v, ty: str):
    """A value as one integer of WIDTH[ty] bits (vector element 0 in the low bits); None for markers."""
    if ty in VECTORS:
        e = elem(ty)
        if any(isinstance(x, Marker) for x in v):
            return None
        return sum(x << (WIDTH[e] * k) for k, x in enumerate(v))
    return None if isinstance(v, Marker) else v


def _from_bits(bits: int, ty: str):
    if ty in VECTORS:
        e, n = VECTORS[ty]
        return tuple((bits >> (WIDTH[e] * k)) & _mask(WIDTH[e]) for k in range(n))
    return bits


def apply(op: str, ty: str, arg_tys: tuple[str, ...], args: tuple, attr: tuple, choices: Choices, key) -> object:
    """The result of `op` at result type `ty` on one lane's argument values (no control flow, no wave ops).
    Vector operations apply the scalar one per element, except the element moves and bitcast."""
    if op == "bitcast":
        src = arg_tys[0]
        if is_float(src) and src not in VECTORS and is_float(ty) and ty not in VECTORS:
            return args[0]
        bits = _to_bits(args[0], src)
        if bits is None:  # a NaN of unspecified bits: the marker survives only a float-to-float-vector move
            return UNKNOWN
        return _from_bits(bits, ty)
    if op in ("extractelement", "insertelement", "shufflevector") and any(isinstance(a, Marker) and t in VECTORS
                                                                          for a, t in zip(args, arg_tys)):
        return UNKNOWN
    if op == "extractelement":
        return args[0][attr[0]]
    if op == "insertelement":
        v = list(args[0])
        v[attr[0]] = args[1]
        return tuple(v)
    if op == "shufflevector":
        both = tuple(args[0]) + tuple(args[1])
        return tuple(both[k] for k in attr[0])
    if ty in VECTORS or any(t in VECTORS for t in arg_tys):
        n = count(ty) if ty in VECTORS else count(next(t for t in arg_tys if t in VECTORS))
        e_args = tuple(elem(t) for t in arg_tys)
        lanes = [apply(op, elem(ty), e_args,
                       tuple(a[k] if t in VECTORS and not isinstance(a, Marker) else a for a, t in zip(args, arg_tys)),
                       attr, choices, key + (k,)) for k in range(n)]
        return tuple(lanes) if ty in VECTORS else lanes[0]
    if op == "select":
        c, a, b = args
        return UNKNOWN if c is UNKNOWN else (a if c else b)
    if is_float(ty) or (arg_tys and is_float(arg_tys[0])):
        return _apply_float(op, ty, arg_tys, args, attr, choices, key)
    if any(a is UNKNOWN or isinstance(a, Marker) for a in args):
        return UNKNOWN
    w = WIDTH[ty]
    if op == "icmp":
        return _icmp(attr[0], args[0], args[1], WIDTH[arg_tys[0]])
    if op in ("fshl", "fshr"):
        a, b, c = args
        s = c % w
        cat = (a << w) | b
        if op == "fshl":
            return (cat << s >> w) & _mask(w)
        return (cat >> s) & _mask(w)
    if op == "trunc":
        return args[0] & _mask(w)
    if op == "zext":
        return args[0]
    if op == "sext":
        return _signed(args[0], WIDTH[arg_tys[0]]) & _mask(w)
    if len(args) == 2:
        return _int_binary(op, args[0], args[1], w)
    return _int_unary(op, args[0], w)


def _apply_float(op, ty, arg_tys, args, attr, choices, key):
    src = arg_tys[0] if arg_tys else ty
    if op == "fneg":
        a = args[0]
        return a if isinstance(a, Marker) else a ^ fp.sign_bit(ty)
    if op == "fabs":
        a = args[0]
        return a if isinstance(a, Marker) else a & ~fp.sign_bit(ty)
    if op == "copysign":
        return _copysign(args[0], args[1], ty)
    if op == "fadd":
        return _arith(ty, args, lambda a, b: _add(a, b, ty))
    if op == "fsub":
        return _arith(ty, args, lambda a, b: _add(a, b ^ fp.sign_bit(ty), ty))
    if op == "fmul":
        return _arith(ty, args, lambda a, b: _mul(a, b, ty))
    if op == "fdiv":
        return _arith(ty, args, lambda a, b: _div(a, b, ty))
    if op == "frem":
        return _arith(ty, args, lambda a, b: _rem(a, b, ty))
    if op == "fma":
        return _arith(ty, args, lambda a, b, c: fp.fma_exact(a, b, c, ty))
    if op == "fmuladd":
        if choices.pick(key, 2):  # unfused: the product rounded, then the sum
            p = _arith(ty, args[:2], lambda a, b: _mul(a, b, ty))
            return _arith(ty, (p, args[2]), lambda a, b: _add(a, b, ty))
        return _arith(ty, args, lambda a, b, c: fp.fma_exact(a, b, c, ty))
    if op in ("minnum", "maxnum"):
        return _minmax_num(args[0], args[1], ty, op == "maxnum", choices, key)
    if op in ("minimum", "maximum"):
        return _minmax_ieee(args[0], args[1], ty, op == "maximum")
    if op == "canonicalize":
        a = args[0]
        if a is UNKNOWN:
            return UNKNOWN
        return NAN_Q if _nanlike(a, ty) else a  # IEEE denormal mode: everything else unchanged
    if op == "sqrt":
        return _arith(ty, args, lambda a: _sqrt(a, ty))
    if op in ("floor", "ceil", "ftrunc", "rint", "round", "roundeven"):
        return _arith(ty, args, lambda a: _round_integral(a, ty, op))
    if op == "fcmp":
        return _fcmp(attr[0], args[0], args[1], src)
    if op == "is.fpclass":
        return _fpclass(args[0], attr[0], src)
    if op in ("fptrunc", "fpext"):
        return _fp_convert(args[0], src, ty)
    if op in ("sitofp", "uitofp"):
        a = args[0]
        if a is UNKNOWN:
            return UNKNOWN
        return fp.int_to_float(_signed(a, WIDTH[src]) if op == "sitofp" else a, ty)  # i1 true is -1 signed
    if op in ("fptosi", "fptoui", "fptosi.sat", "fptoui.sat"):
        return _fp_to_int(args[0], src, WIDTH[ty], op.startswith("fptosi"), op.endswith(".sat"))
    raise KeyError(f"no float semantics for {op}.{ty}")


# ---------------------------------------------------------------------------------------------------
# a whole program over all lanes


def dpp_source(kind: str, n: int, lane: int) -> int | None:
    """The lane whose value `lane` reads under a DPP16 control, None past the edge of its row of 16 lanes (the
    RDNA3 / GFX9 guides' DPP_CTRL list: quad_perm within the quad, row_shl:n n lanes up, row_shr:n n lanes down,
    row_ror:n rotated down within the row, row_mirror / row_half_mirror reversed row / half row)."""
    base, idx = lane - lane % 16, lane % 16
    if kind == "quad_perm":
        return lane - lane % 4 + (n >> 2 * (lane % 4) & 3)
    if kind == "row_shl":
        return lane + n if idx + n < 16 else None
    if kind == "row_shr":
        return lane - n if idx >= n else None
    if kind == "row_ror":
        return base + (idx - n) % 16
    if kind == "row_mirror":
        return base + 15 - idx
    if kind == "row_half_mirror":
        return lane - lane % 8 + 7 - lane % 8
    raise ValueError(kind)


@dataclass
class Launch:
    """The lanes a program runs on: `lanes` work-items in waves of `wave` (all launched lanes active)."""

    lanes: int
    wave: int


def evaluate(prog: Program, inputs: dict[int, list[int]], launch: Launch, choices: Choices) -> list[list]:
    """Every node's value on every lane: result[node][lane]."""
    n, ws = launch.lanes, launch.wave
    vals: list[list] = []
    for i, node in enumerate(prog.nodes):
        arg_tys = tuple(prog.nodes[a].ty for a in node.args)
        argv = [vals[a] for a in node.args]
        op = node.op
        if op == "input":
            out = list(inputs[i])
        elif op == "const":
            out = [node.attr[0]] * n
        elif op == "if":
            then_op, else_op, uniform = node.attr
            conds = argv[0]
            if uniform:
                conds = [conds[lane - lane % ws] for lane in range(n)]
            out = []
            for lane in range(n):
                c = conds[lane]
                if c is UNKNOWN:
                    out.append(UNKNOWN)
                    continue
                sub = then_op if c else else_op
                out.append(apply(sub, node.ty, (node.ty, node.ty), (argv[1][lane], argv[2][lane]), (), choices,
                                 (i, "arm", int(bool(c)))))
        elif op == "loop":
            body = node.attr[0]
            out = []
            for lane in range(n):
                acc, cnt = argv[0][lane], argv[1][lane]
                if cnt is UNKNOWN:
                    out.append(UNKNOWN)
                    continue
                for _ in range(cnt & 7):
                    acc = apply(body, node.ty, (node.ty, node.ty), (acc, argv[2][lane]), (), choices, (i, "body"))
                out.append(acc)
        elif op == "lds.swap":
            mode, k = node.attr
            out = []
            for lane in range(n):
                tid = lane % LOCAL
                src = {"xor": tid ^ k, "rev": LOCAL - 1 - tid, "rot": (tid + k) % LOCAL,
                       "down": tid - k if tid >= k else tid}[mode]
                out.append(argv[0][lane - tid + src])
        elif op == "lds.rake":
            body, stride = node.attr[:2]
            out = []
            for lane in range(n):
                tid = lane % LOCAL
                acc = argv[0][lane]
                if tid < stride:
                    for src in range(tid + stride, LOCAL, stride):
                        acc = apply(body, node.ty, (node.ty, node.ty), (acc, argv[0][lane - tid + src]), (), choices,
                                    (i, "rake"))
                out.append(acc)
        elif op == "dpp":
            kind, ctl, bound, _ = node.attr
            out = []
            for lane in range(n):
                src = dpp_source(kind, ctl, lane)
                out.append(argv[1][src] if src is not None else 0 if bound else argv[0][lane])
        elif op == "swizzle":
            mode, ctl, _ = node.attr
            out = []
            for lane in range(n):
                if mode == "quad_perm":
                    src = lane - lane % 4 + (ctl >> 2 * (lane % 4) & 3)
                else:
                    src = lane - lane % 32 + ((((lane % 32) & ctl) | (ctl >> 5 & 31)) ^ (ctl >> 10 & 31))
                out.append(argv[0][src])
        elif op == "bpermute":
            k = node.attr[0] % ws
            out = [argv[0][lane - lane % ws + ((lane % ws) ^ k)] for lane in range(n)]
        elif op in ("readfirstlane", "readlane"):
            k = 0 if op == "readfirstlane" else node.attr[0] % ws
            out = [argv[0][lane - lane % ws + k] for lane in range(n)]
        elif op == "ballot":
            out = []
            for lane in range(n):
                base = lane - lane % ws
                bits = argv[0][base:base + ws]
                out.append(UNKNOWN if any(b is UNKNOWN for b in bits) else sum(int(b) << j for j, b in enumerate(bits)))
        elif op == "mbcnt":
            out = []
            for lane in range(n):
                a, b = argv[0][lane], argv[1][lane]
                if a is UNKNOWN or b is UNKNOWN:
                    out.append(UNKNOWN)
                    continue
                l = lane % ws
                lo = bin(a & ((1 << min(l, 32)) - 1)).count("1")
                hi = bin(b & ((1 << max(l - 32, 0)) - 1)).count("1")
                out.append((lo + hi) & 0xFFFFFFFF)
        else:
            out = [apply(op, node.ty, arg_tys, tuple(a[lane] for a in argv), node.attr, choices, (i,))
                   for lane in range(n)]
        vals.append(out)
    return vals
