"""Random expression DAGs: the programs the fuzzer compiles, and hypothesis strategies that draw them.

A `Program` is a list of `Node`s in definition order; a node's arguments are indices of earlier nodes.
Leaves are `input` (a per-lane value loaded from the input buffer at the lane's global id, or, with
`uniform`, one value for the whole dispatch), and `const`. `if` and `loop` nodes become control flow:

* `if(c, a, b)` with attr (then_op, else_op, uniform): branch on `c` (made wave-uniform with
  readfirstlane when `uniform`), compute `then_op(a, b)` or `else_op(a, b)` in the arm, join with a phi.
* `loop(init, n, b)` with attr (op,): `acc = init`, then `n & 7` times `acc = op(acc, b)`, a per-lane
  trip count (a divergent loop).

The value semantics live in `evaluate.py`, the IR text in `emit.py`; this module only says which
operations exist at which types (`SIGNATURES`) and how to draw them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from . import fp

INTS = ("i1", "i8", "i16", "i32", "i64")
FLOATS = ("f16", "f32", "f64")
SCALARS = INTS + FLOATS
# vectors: name -> (element type, element count); their values are tuples of element values
VECTORS = {"v2i1": ("i1", 2), "v4i8": ("i8", 4), "v2i16": ("i16", 2), "v2i32": ("i32", 2), "v2f16": ("f16", 2),
           "v2f32": ("f32", 2)}
TYPES = SCALARS + tuple(VECTORS)
WIDTH = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "f16": 16, "f32": 32, "f64": 64}
WIDTH.update({v: WIDTH[e] * n for v, (e, n) in VECTORS.items()})
WIDE_INTS = INTS[1:]  # integer types that take arithmetic


def elem(ty: str) -> str:
    """The element type of a vector, or the type itself."""
    return VECTORS[ty][0] if ty in VECTORS else ty


def count(ty: str) -> int:
    return VECTORS[ty][1] if ty in VECTORS else 1


def is_float(ty: str) -> bool:
    return elem(ty) in FLOATS


def vector_of(e: str, n: int) -> str | None:
    """The vector type of n elements of `e`, if the grammar has it (n == 1: `e` itself)."""
    if n == 1:
        return e
    return next((v for v, (ve, vn) in VECTORS.items() if ve == e and vn == n), None)


@dataclass(frozen=True)
class Node:
    op: str
    ty: str
    args: tuple[int, ...] = ()
    attr: tuple = ()

    def describe(self) -> str:
        a = f" {self.attr}" if self.attr else ""
        return f"{self.op}.{self.ty}({', '.join(f'%v{i}' for i in self.args)}){a}"


@dataclass(frozen=True)
class Program:
    nodes: tuple[Node, ...]
    outputs: tuple[int, ...]
    ops_used: frozenset = field(default=frozenset(), compare=False)

    @property
    def inputs(self) -> list[int]:
        return [i for i, n in enumerate(self.nodes) if n.op == "input"]

    def describe(self) -> str:
        lines = [f"%v{i} = {n.describe()}" for i, n in enumerate(self.nodes)]
        return "\n".join(lines) + f"\noutputs: {', '.join(f'%v{i}' for i in self.outputs)}"


# ---------------------------------------------------------------------------------------------------
# signatures: op -> list of (result type, argument types)

INT_BINARY = ("add", "sub", "mul", "and", "or", "xor", "shl", "lshr", "ashr", "udiv", "sdiv", "urem", "srem",
              "smin", "smax", "umin", "umax", "sadd.sat", "uadd.sat", "ssub.sat", "usub.sat")
I1_BINARY = ("and", "or", "xor")
INT_UNARY = ("abs", "ctpop", "ctlz", "cttz", "bitreverse", "bswap")
FLOAT_BINARY = ("fadd", "fsub", "fmul", "fdiv", "frem", "copysign", "minnum", "maxnum", "minimum", "maximum")
FLOAT_UNARY = ("fneg", "fabs", "canonicalize", "sqrt", "floor", "ceil", "ftrunc", "rint", "round", "roundeven")
FLOAT_TERNARY = ("fma", "fmuladd")
ICMP_PREDS = ("eq", "ne", "ugt", "uge", "ult", "ule", "sgt", "sge", "slt", "sle")
FCMP_PREDS = ("oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult", "ule", "une", "uno")
WAVE_OPS = ("readfirstlane", "readlane", "ballot", "mbcnt")
# cross-lane moves of 8/16/32-bit values: through LDS (`lds.swap`, `lds.rake`) or the crossbar / DPP
# (`dpp`, `swizzle`, `bpermute`, on i32 after zext/sext, truncated back, as rocPRIM moves bytes)
LOCAL = 64  # work-items per workgroup (the runner launches 128 lanes in 2 workgroups)
LDS_OPS = ("lds.swap", "lds.rake")
SHUFFLE_OPS = ("dpp", "swizzle", "bpermute")
LDS_TYPES = ("i8", "i16", "i32", "i64", "f16", "f32", "f64", "v4i8", "v2i16", "v2f16", "v2i32", "v2f32")
SHUFFLE_TYPES = ("i8", "i16", "i32")
RAKE_STRIDES = (8, 16, 32)  # lanes below the stride fold LDS[tid], LDS[tid + stride], ... < LOCAL; the third
# attribute keeps the loop a loop (llvm.loop.unroll.disable): loop strength reduction then makes LDS bases below 0
SWAP_MODES = ("xor", "rev", "rot", "down")  # LDS[tid ^ k], LDS[LOCAL-1-tid], LDS[(tid + k) % LOCAL], LDS[tid - k | tid]
DPP_CONTROLS = ("quad_perm", "row_shl", "row_shr", "row_ror", "row_mirror", "row_half_mirror")
SQRT_TYPES = ("f32", "f64")  # f16 sqrt is not correctly rounded on hardware (v_sqrt_f16)


def binops(ty: str) -> tuple[str, ...]:
    """Same-type binary operations: what `if` arms and `loop` bodies apply."""
    if ty == "i1":
        return I1_BINARY
    if is_float(ty):
        return FLOAT_BINARY
    return INT_BINARY


def _signatures() -> dict[str, list[tuple[str, tuple[str, ...]]]]:
    sig: dict[str, list[tuple[str, tuple[str, ...]]]] = {}

    def add(op, res, args):
        sig.setdefault(op, []).append((res, tuple(args)))

    for t in WIDE_INTS:
        for op in INT_BINARY:
            add(op, t, (t, t))
        for op in ("fshl", "fshr"):
            add(op, t, (t, t, t))
        for op in INT_UNARY:
            if op != "bswap" or t != "i8":
                add(op, t, (t,))
    for op in I1_BINARY:
        add(op, "i1", ("i1", "i1"))
    for t in INTS:
        add("icmp", "i1", (t, t))
    for t in SCALARS:
        add("select", t, ("i1", t, t))
        add("if", t, ("i1", t, t))
        add("loop", t, (t, "i32", t))
    for t in FLOATS:
        for op in FLOAT_BINARY:
            add(op, t, (t, t))
        for op in FLOAT_UNARY:
            if op != "sqrt" or t in SQRT_TYPES:
                add(op, t, (t,))
        for op in FLOAT_TERNARY:
            add(op, t, (t, t, t))
        add("fcmp", "i1", (t, t))
        add("is.fpclass", "i1", (t,))
    for a in INTS:
        for b in INTS:
            if WIDTH[b] < WIDTH[a]:
                add("trunc", b, (a,))
            if WIDTH[b] > WIDTH[a]:
                add("zext", b, (a,))
                add("sext", b, (a,))
    for a in FLOATS:
        for b in FLOATS:
            if WIDTH[b] < WIDTH[a]:
                add("fptrunc", b, (a,))
            if WIDTH[b] > WIDTH[a]:
                add("fpext", b, (a,))
    for i in INTS:
        for f in FLOATS:
            add("sitofp", f, (i,))
            add("uitofp", f, (i,))
            if i != "i1":
                for op in ("fptosi", "fptoui", "fptosi.sat", "fptoui.sat"):
                    add(op, i, (f,))
    # elementwise forms on vectors: every scalar signature whose types all have a vector of that size
    for op, forms in list(sig.items()):
        if op in ("if", "loop"):
            continue
        for res, args in list(forms):
            for n in (2, 4):
                vres, vargs = vector_of(res, n), tuple(vector_of(a, n) for a in args)
                if vres and all(vargs):
                    add(op, vres, vargs)
                    if op == "select":  # a scalar condition for the whole vector
                        add(op, vres, ("i1",) + vargs[1:])
    for v in VECTORS:
        if v != "v2i1":
            add("if", v, ("i1", v, v))
            add("loop", v, (v, "i32", v))
        add("extractelement", elem(v), (v,))
        add("insertelement", v, (v, elem(v)))
        add("shufflevector", v, (v, v))
    same_size = {}
    for t in TYPES:
        if t not in ("i1", "v2i1"):
            same_size.setdefault(WIDTH[t], []).append(t)
    for group in same_size.values():
        for a in group:
            for b in group:
                if a != b and (is_float(a) or is_float(b) or a in VECTORS or b in VECTORS):
                    add("bitcast", b, (a,))
    add("readfirstlane", "i32", ("i32",))
    add("readfirstlane", "f32", ("f32",))
    add("readfirstlane", "i64", ("i64",))
    add("readlane", "i32", ("i32",))
    add("ballot", "i64", ("i1",))
    add("mbcnt", "i32", ("i32", "i32"))
    for t in LDS_TYPES:
        for op in LDS_OPS:
            add(op, t, (t,))
    for t in SHUFFLE_TYPES:
        add("dpp", t, (t, t))  # (old, src): lanes whose source is outside the row keep `old` (or read 0)
        add("swizzle", t, (t,))
        add("bpermute", t, (t,))
    return sig


SIGNATURES = _signatures()

# how often each op is drawn (ops not listed: 1)
WEIGHTS = {"fneg": 3, "fabs": 3, "copysign": 2, "select": 3, "icmp": 2, "fcmp": 3, "fadd": 2, "fmul": 2, "fma": 2, "fmuladd": 2, "add": 2,
           "if": 2, "loop": 2, "lds.rake": 2, "lds.swap": 2, "dpp": 2, "trunc": 2, "zext": 2, "sext": 2, "sitofp": 2, "uitofp": 2, "fptosi.sat": 2,
           "fptoui.sat": 2}

ALL_OPS = tuple(SIGNATURES)


# ---------------------------------------------------------------------------------------------------
# special values, as bit patterns


def int_specials(ty: str) -> list[int]:
    w = WIDTH[ty]
    mask = (1 << w) - 1
    if w == 1:
        return [0, 1]
    vals = [0, 1, mask, 1 << (w - 1), (1 << (w - 1)) - 1, 2, w - 1, w, w + 1, (1 << (w - 1)) + 1, mask - 1,
            0x55 & mask, (0xAA << (w - 8)) & mask, 7, 3, 0x80 & mask, 0xFF & mask, 0x7F]
    return sorted({v & mask for v in vals})


def float_specials(ty: str) -> list[int]:
    e, m, bias, w = fp.fields(ty)
    s = fp.sign_bit(ty)
    one = bias << m
    qnan = fp.inf(ty) | (1 << (m - 1))
    vals = [0, s, one, one | s, fp.inf(ty), fp.inf(ty, True), qnan, qnan | s, qnan | 1, qnan | 0x15 | s,
            fp.inf(ty) | 1, fp.inf(ty) | (1 << (m - 2)) | s, fp.inf(ty) | ((1 << (m - 1)) - 1),
            1, 1 | s, (1 << m) - 1, ((1 << m) - 1) | s, 1 << m, (1 << m) | s, fp.max_finite(ty),
            fp.max_finite(ty) | s, one + 1, one - 1, (bias + 1) << m, ((bias - 1) << m) | s,
            ((bias - 1) << m) | (1 << (m - 1)), ((bias + 1) << m) | (1 << (m - 1)) | s]
    # integer boundaries 2^15, 2^31, 2^63 and neighbours, where the format reaches them
    for k in (7, 8, 15, 16, 31, 32, 63, 64):
        if k + bias < (1 << e) - 1:
            p = (k + bias) << m
            vals += [p, p | s, p - 1, p + 1, (p - 1) | s, (p + 1) | s]
    return sorted(set(vals))


def values(ty: str) -> st.SearchStrategy:
    """Bit patterns of `ty` (tuples of them for vectors), special values weighted heavily."""
    if ty in VECTORS:
        e, n = VECTORS[ty]
        return st.tuples(*[values(e)] * n)
    w = WIDTH[ty]
    if is_float(ty):
        specials = float_specials(ty)
        e, m, bias, _ = fp.fields(ty)
        small = st.builds(lambda k, sgn: fp.int_to_float(k, ty) ^ (fp.sign_bit(ty) if sgn else 0),
                          st.integers(0, 64), st.booleans())
        sub = st.builds(lambda f, sgn: f | (fp.sign_bit(ty) if sgn else 0), st.integers(1, (1 << m) - 1),
                        st.booleans())
        return st.one_of(st.sampled_from(specials), small, st.integers(0, (1 << w) - 1), sub)
    return st.one_of(st.sampled_from(int_specials(ty)), st.integers(0, (1 << w) - 1),
                     st.integers(-16, 16)).map(lambda v: v & ((1 << w) - 1))


# ---------------------------------------------------------------------------------------------------
# program strategy

MAX_INPUTS = 6


def _attr(draw, op: str, res: str, args: tuple[str, ...]) -> tuple:
    if op == "icmp":
        return (draw(st.sampled_from(ICMP_PREDS)),)
    if op == "fcmp":
        return (draw(st.sampled_from(FCMP_PREDS)),)
    if op == "is.fpclass":
        return (draw(st.one_of(st.sampled_from([3, 1, 2, 0x204, 0x90, 0x60, 0x108, 0x3FC, 0x21]),
                               st.integers(1, 1023))),)
    if op == "readlane":
        return (draw(st.integers(0, 31)),)
    if op == "extractelement":
        return (draw(st.integers(0, count(args[0]) - 1)),)
    if op == "insertelement":
        return (draw(st.integers(0, count(res) - 1)),)
    if op == "shufflevector":
        n = count(res)
        return (tuple(draw(st.integers(0, 2 * n - 1)) for _ in range(n)),)
    if op == "if":
        ops = binops(res)
        return (draw(st.sampled_from(ops)), draw(st.sampled_from(ops)), draw(st.booleans()))
    if op == "loop":
        return (draw(st.sampled_from(binops(res))),)
    if op == "lds.rake":
        return (draw(st.sampled_from(binops(res))), draw(st.sampled_from(RAKE_STRIDES)), draw(st.booleans()))
    if op == "lds.swap":
        return (draw(st.sampled_from(SWAP_MODES)), draw(st.integers(1, LOCAL - 1)))
    if op == "dpp":
        kind = draw(st.sampled_from(DPP_CONTROLS))
        n = {"quad_perm": draw(st.integers(0, 255)), "row_mirror": 0, "row_half_mirror": 0}.get(
            kind, draw(st.integers(1, 15)))
        return (kind, n, draw(st.booleans()), draw(st.booleans()))  # control, bound_ctrl, sign-extend to i32
    if op == "swizzle":  # bit-mask mode within 32 lanes (and, or, xor masks) or quad-permute mode
        if draw(st.booleans()):
            return ("quad_perm", draw(st.integers(0, 255)), draw(st.booleans()))
        return ("bitmask", draw(st.integers(0, 31)) | draw(st.integers(0, 31)) << 5 | draw(st.integers(0, 31)) << 10,
                draw(st.booleans()))
    if op == "bpermute":  # lane (lane ^ k) of the wave, k < 64 (wave32: k & 31)
        return (draw(st.integers(1, 63)), draw(st.booleans()))
    return ()


@st.composite
def programs(draw, max_nodes: int = 12, ops: tuple[str, ...] | None = None,
             types: tuple[str, ...] = TYPES) -> Program:
    """A random program of 1..max_nodes operations (plus its leaves) over `ops` and result `types`."""
    def allowed(sig_: tuple) -> bool:
        r, args = sig_
        return r in types and all(a in types or (op_ == "loop" and a == "i32") or a == "i1" for a in args)

    menu = []
    for op_ in ops or ALL_OPS:
        if any(allowed(s_) for s_ in SIGNATURES[op_]):
            menu += [op_] * WEIGHTS.get(op_, 1)
    nodes: list[Node] = []
    users: set[int] = set()
    count = draw(st.integers(1, max_nodes))

    def leaf(ty: str) -> int:
        n_inputs = sum(1 for n in nodes if n.op == "input")
        kinds = ["input", "const", "uniform"] if n_inputs < MAX_INPUTS else ["const"]
        kind = draw(st.sampled_from(kinds))
        if kind == "const":
            nodes.append(Node("const", ty, (), (draw(values(ty)),)))
        else:
            nodes.append(Node("input", ty, (), (kind == "uniform",)))
        return len(nodes) - 1

    def arg(ty: str) -> int:
        cands = [i for i, n in enumerate(nodes) if n.ty == ty]
        pick = draw(st.integers(0, min(len(cands), 4)))
        idx = leaf(ty) if pick == 0 else cands[-pick]
        users.add(idx)
        return idx

    for _ in range(count):
        op = op_ = draw(st.sampled_from(menu))
        sigs = [s_ for s_ in SIGNATURES[op] if allowed(s_)]
        res, arg_tys = draw(st.sampled_from(sigs))
        attr = _attr(draw, op, res, arg_tys)
        args = tuple(arg(t) for t in arg_tys)
        nodes.append(Node(op, res, args, attr))
    sinks = [i for i, n in enumerate(nodes) if n.op not in ("input", "const") and i not in users]
    # also store some intermediate values: a wrong value that later operations would hide still shows
    inner = [i for i, n in enumerate(nodes) if n.op not in ("input", "const") and i in users]
    extra = [i for i in inner if draw(st.integers(0, 3)) == 0]
    outputs = tuple(sorted(set(sinks[-4:] + extra[-4:]))) or (len(nodes) - 1,)
    return Program(tuple(nodes), outputs, frozenset(n.op for n in nodes))
