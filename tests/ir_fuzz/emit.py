"""A `Program` as an LLVM IR kernel.

The kernel is `@fuzz(ptr addrspace(1) %in, ptr addrspace(1) %uni, ptr addrspace(1) %out)`:

* per-lane input k (the k-th `input` node that is not uniform) is element `gid` of the array of its type
  at `%in + k * REGION`; i1 inputs are stored as bytes (loaded as i8, truncated);
* uniform input j is the value of its type at `%uni + 8 * j` (the same address on every lane, so LLVM
  may load it with a scalar load);
* output o is stored at element `gid` of `%out + o * REGION`, as its own type (i1 zero-extended to a byte).

`gid` is workgroup id * the hidden group size + workitem id, as HIP computes it. Operations that would be
UB or poison are guarded the way `evaluate.py` assumes: divisors that are 0 (or -1 with INT_MIN) become 1,
shift amounts are masked to the width, fptosi/fptoui see 0.0 unless the value truncates into range.
"""
from __future__ import annotations

from fractions import Fraction

from . import fp
from .dag import LOCAL, VECTORS, WIDTH, Node, Program, count, elem, is_float

LLTYPE = {"i1": "i1", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "f16": "half", "f32": "float",
          "f64": "double"}
LLTYPE.update({v: f"<{n} x {LLTYPE[e]}>" for v, (e, n) in VECTORS.items()})
LLTYPE["v4i1"] = "<4 x i1>"  # only inside guards
REGION = 8 * 128  # bytes per input / output array: 8 bytes for each of up to 128 lanes
INTRINSIC_INT = {"smin", "smax", "umin", "umax", "sadd.sat", "uadd.sat", "ssub.sat", "usub.sat", "fshl", "fshr",
                 "ctpop", "bitreverse", "bswap"}
INTRINSIC_FLOAT = {"fabs", "copysign", "fma", "fmuladd", "minnum", "maxnum", "minimum", "maximum", "canonicalize",
                   "sqrt", "floor", "ceil", "ftrunc", "rint", "round", "roundeven"}
IR_FLOAT_BINARY = {"fadd", "fsub", "fmul", "fdiv", "frem"}
IR_INT_BINARY = {"add", "sub", "mul", "and", "or", "xor"}
GID = """  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %bid = call i32 @llvm.amdgcn.workgroup.id.x()
  %imp = call ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()
  %gsp = getelementptr i8, ptr addrspace(4) %imp, i64 12
  %gs16 = load i16, ptr addrspace(4) %gsp, align 2
  %gs = zext i16 %gs16 to i32
  %base = mul i32 %bid, %gs
  %gid = add i32 %base, %tid
  %gid64 = zext i32 %gid to i64
"""


def suffix(ty: str) -> str:
    """The overloaded-intrinsic suffix: i32, f16, v2f16, v4i8."""
    if ty in VECTORS:
        return f"v{count(ty)}{suffix(elem(ty))}"
    return ty if is_float(ty) else f"i{WIDTH[ty]}"


def splat(ty: str, text: str) -> str:
    """A constant of `ty` with every element `text` (the scalar itself for scalars)."""
    if ty in VECTORS:
        e = LLTYPE[elem(ty)]
        return "<" + ", ".join(f"{e} {text}" for _ in range(count(ty))) + ">"
    return text


def storage(ty: str) -> str:
    """The in-memory type: i1 (and i1 vectors) as bytes."""
    if elem(ty) == "i1":
        return "i8" if ty == "i1" else f"<{count(ty)} x i8>"
    return LLTYPE[ty]


def bits_of(value, ty: str) -> int:
    """A value (tuple for vectors) as one integer, element 0 in the low bits."""
    if ty in VECTORS:
        w = WIDTH[elem(ty)]
        return sum(v << (w * k) for k, v in enumerate(value))
    return value


def int_literal(bits: int, ty: str) -> str:
    w = WIDTH[ty] if ty in WIDTH else int(ty[1:])
    if w == 1:
        return "true" if bits & 1 else "false"
    v = bits & ((1 << w) - 1)
    return str(v - (1 << w) if v >> (w - 1) else v)


def float_literal(bits: int, ty: str) -> str:
    """A non-NaN constant as LLVM hex text (floats are written as the double of the same value)."""
    if ty == "f16":
        return f"0xH{bits:04X}"
    if ty == "f32":
        bits = fp.from_float(fp.to_float(bits, "f32"), "f64")
    return f"0x{bits:016X}"


def _step_into(bound: Fraction, ty: str, above: bool) -> int:
    """The representable finite value nearest to `bound` on the inside: the least value > bound (above)
    or the greatest value < bound."""
    big = fp.to_fraction(fp.max_finite(ty), ty)
    if above and bound < -big:
        return fp.max_finite(ty) | fp.sign_bit(ty)
    if not above and bound > big:
        return fp.max_finite(ty)
    r = fp.round_exact(bound, ty)
    while True:
        v = fp.to_fraction(r, ty)
        if above and v <= bound:
            r = next_float(r, ty, up=True)
        elif not above and v >= bound:
            r = next_float(r, ty, up=False)
        else:
            return r


def next_float(bits: int, ty: str, up: bool) -> int:
    """The neighbouring value above (up) or below a finite pattern (infinity past the largest)."""
    s = fp.sign_bit(ty)
    if fp.is_zero(bits, ty):
        return 1 if up else 1 | s
    if (bits & s == 0) == up:
        return bits + 1
    return bits - 1


def fptoi_bounds(src: str, w: int, signed: bool) -> tuple[int, int]:
    """(lo, hi) such that trunc(x) fits the integer type exactly when lo <= x <= hi (x not NaN)."""
    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1)
    return _step_into(Fraction(lo - 1), src, above=True), _step_into(Fraction(hi + 1), src, above=False)


class Emitter:
    def __init__(self, prog: Program, wave: int):
        self.prog, self.wave = prog, wave
        self.lines: list[str] = []
        self.decls: dict[str, str] = {}
        self.block = "entry"
        self.operand: dict[int, str] = {}
        self.globals: list[str] = []  # LDS arrays
        self.metadata: list[str] = []  # loop metadata (one node, shared by every loop that asks for it)

    def declare(self, ret: str, name: str, params: list[str]) -> str:
        self.decls[name] = f"declare {ret} @{name}({', '.join(params)})"
        return name

    def call(self, dst: str, ret: str, name: str, args: list[tuple[str, str]]) -> None:
        self.declare(ret, name, [t for t, _ in args])
        self.lines.append(f"  {dst} = call {ret} @{name}({', '.join(f'{t} {v}' for t, v in args)})")

    def emit_op(self, dst: str, op: str, ty: str, arg_tys: tuple[str, ...], ops: list[str], attr: tuple) -> None:
        """The instruction(s) computing `op` into `dst` (no control flow)."""
        T = LLTYPE[ty]
        A = LLTYPE[arg_tys[0]] if arg_tys else T
        L = self.lines.append
        w = WIDTH[elem(ty)]
        C = lambda v: splat(ty, str(v))  # noqa: E731 - a constant of the result type
        CA = lambda v: splat(arg_tys[0], v)  # noqa: E731 - a constant of the first operand's type
        COND = LLTYPE[vector_cond(ty)]
        if op in IR_INT_BINARY and not is_float(ty):
            L(f"  {dst} = {op} {T} {ops[0]}, {ops[1]}")
        elif op in ("shl", "lshr", "ashr"):
            L(f"  {dst}.m = and {T} {ops[1]}, {C(w - 1)}")
            L(f"  {dst} = {op} {T} {ops[0]}, {dst}.m")
        elif op in ("udiv", "urem"):
            L(f"  {dst}.z = icmp eq {T} {ops[1]}, {C(0)}")
            L(f"  {dst}.d = select {COND} {dst}.z, {T} {C(1)}, {T} {ops[1]}")
            L(f"  {dst} = {op} {T} {ops[0]}, {dst}.d")
        elif op in ("sdiv", "srem"):
            L(f"  {dst}.z = icmp eq {T} {ops[1]}, {C(0)}")
            L(f"  {dst}.m1 = icmp eq {T} {ops[1]}, {C(-1)}")
            L(f"  {dst}.mn = icmp eq {T} {ops[0]}, {C(-(1 << (w - 1)))}")
            L(f"  {dst}.o = and {COND} {dst}.m1, {dst}.mn")
            L(f"  {dst}.bad = or {COND} {dst}.z, {dst}.o")
            L(f"  {dst}.d = select {COND} {dst}.bad, {T} {C(1)}, {T} {ops[1]}")
            L(f"  {dst} = {op} {T} {ops[0]}, {dst}.d")
        elif op in INTRINSIC_INT:
            self.call(dst, T, f"llvm.{op}.{suffix(ty)}", [(T, o) for o in ops])
        elif op in ("abs", "ctlz", "cttz"):
            self.call(dst, T, f"llvm.{op}.{suffix(ty)}", [(T, ops[0]), ("i1", "false")])
        elif op == "icmp":
            L(f"  {dst} = icmp {attr[0]} {A} {ops[0]}, {ops[1]}")
        elif op == "select":
            L(f"  {dst} = select {A} {ops[0]}, {T} {ops[1]}, {T} {ops[2]}")
        elif op == "extractelement":
            L(f"  {dst} = extractelement {A} {ops[0]}, i32 {attr[0]}")
        elif op == "insertelement":
            L(f"  {dst} = insertelement {T} {ops[0]}, {LLTYPE[elem(ty)]} {ops[1]}, i32 {attr[0]}")
        elif op == "shufflevector":
            mask = ", ".join(f"i32 {k}" for k in attr[0])
            L(f"  {dst} = shufflevector {T} {ops[0]}, {T} {ops[1]}, <{count(ty)} x i32> <{mask}>")
        elif op in ("trunc", "zext", "sext", "fptrunc", "fpext", "sitofp", "uitofp", "bitcast"):
            L(f"  {dst} = {op} {A} {ops[0]} to {T}")
        elif op == "fneg":
            L(f"  {dst} = fneg {T} {ops[0]}")
        elif op in IR_FLOAT_BINARY:
            L(f"  {dst} = {op} {T} {ops[0]}, {ops[1]}")
        elif op in INTRINSIC_FLOAT:
            name = "trunc" if op == "ftrunc" else op
            self.call(dst, T, f"llvm.{name}.{suffix(ty)}", [(T, o) for o in ops])
        elif op == "fcmp":
            L(f"  {dst} = fcmp {attr[0]} {A} {ops[0]}, {ops[1]}")
        elif op == "is.fpclass":
            self.call(dst, T, f"llvm.is.fpclass.{suffix(arg_tys[0])}", [(A, ops[0]), ("i32", str(attr[0]))])
        elif op in ("fptosi", "fptoui"):
            src = elem(arg_tys[0])
            lo, hi = fptoi_bounds(src, w, op == "fptosi")
            L(f"  {dst}.lo = fcmp oge {A} {ops[0]}, {CA(float_literal(lo, src))}")
            L(f"  {dst}.hi = fcmp ole {A} {ops[0]}, {CA(float_literal(hi, src))}")
            L(f"  {dst}.ok = and {COND} {dst}.lo, {dst}.hi")
            L(f"  {dst}.x = select {COND} {dst}.ok, {A} {ops[0]}, {A} {CA('0.0')}")
            L(f"  {dst} = {op} {A} {dst}.x to {T}")
        elif op in ("fptosi.sat", "fptoui.sat"):
            self.call(dst, T, f"llvm.{op}.{suffix(ty)}.{suffix(arg_tys[0])}", [(A, ops[0])])
        elif op == "readfirstlane":
            self.call(dst, T, f"llvm.amdgcn.readfirstlane.{suffix(ty)}", [(T, ops[0])])
        elif op == "readlane":
            self.call(dst, T, "llvm.amdgcn.readlane.i32", [(T, ops[0]), ("i32", str(attr[0] % self.wave))])
        elif op == "ballot":
            if self.wave == 32:
                self.call(f"{dst}.b", "i32", "llvm.amdgcn.ballot.i32", [("i1", ops[0])])
                L(f"  {dst} = zext i32 {dst}.b to i64")
            else:
                self.call(dst, "i64", "llvm.amdgcn.ballot.i64", [("i1", ops[0])])
        elif op == "mbcnt":
            self.call(f"{dst}.lo", "i32", "llvm.amdgcn.mbcnt.lo", [("i32", ops[0]), ("i32", "0")])
            self.call(dst, "i32", "llvm.amdgcn.mbcnt.hi", [("i32", ops[1]), ("i32", f"{dst}.lo")])
        else:
            raise KeyError(f"cannot emit {op}.{ty}")

    def new_block(self, name: str) -> None:
        self.lines.append(f"{name}:")
        self.block = name

    def node(self, i: int, node: Node, input_slot: dict[int, tuple[bool, int]]) -> None:
        L = self.lines.append
        T = LLTYPE[node.ty]
        dst = f"%v{i}"
        ops = [self.operand[a] for a in node.args]
        arg_tys = tuple(self.prog.nodes[a].ty for a in node.args)
        if node.op == "const":
            if is_float(node.ty) or node.ty in VECTORS:
                w = WIDTH[node.ty]
                L(f"  {dst} = bitcast i{w} {int_literal(bits_of(node.attr[0], node.ty), f'i{w}')} to {T}")
            else:
                self.operand[i] = int_literal(node.attr[0], node.ty)
                return
        elif node.op == "input":
            uniform, k = input_slot[i]
            mem = storage(node.ty)
            if uniform:
                L(f"  {dst}.p = getelementptr inbounds i8, ptr addrspace(1) %uni, i64 {8 * k}")
            else:
                L(f"  {dst}.r = getelementptr inbounds i8, ptr addrspace(1) %in, i64 {k * REGION}")
                L(f"  {dst}.p = getelementptr inbounds {mem}, ptr addrspace(1) {dst}.r, i64 %gid64")
            if elem(node.ty) == "i1":
                L(f"  {dst}.b = load {mem}, ptr addrspace(1) {dst}.p")
                L(f"  {dst} = trunc {mem} {dst}.b to {T}")
            else:
                L(f"  {dst} = load {T}, ptr addrspace(1) {dst}.p")
        elif node.op == "if":
            then_op, else_op, uniform = node.attr
            cond = ops[0]
            if uniform:
                L(f"  {dst}.cz = zext i1 {cond} to i32")
                self.call(f"{dst}.cr", "i32", "llvm.amdgcn.readfirstlane.i32", [("i32", f"{dst}.cz")])
                L(f"  {dst}.c = icmp ne i32 {dst}.cr, 0")
                cond = f"{dst}.c"
            L(f"  br i1 {cond}, label %b{i}.t, label %b{i}.f")
            self.new_block(f"b{i}.t")
            self.emit_op(f"{dst}.t", then_op, node.ty, (node.ty, node.ty), ops[1:], ())
            L(f"  br label %b{i}.j")
            self.new_block(f"b{i}.f")
            self.emit_op(f"{dst}.f", else_op, node.ty, (node.ty, node.ty), ops[1:], ())
            L(f"  br label %b{i}.j")
            self.new_block(f"b{i}.j")
            L(f"  {dst} = phi {T} [{dst}.t, %b{i}.t], [{dst}.f, %b{i}.f]")
        elif node.op in ("lds.swap", "lds.rake"):
            self.lds(i, node, ops[0])
        elif node.op in ("dpp", "swizzle", "bpermute"):
            self.shuffle(i, node, ops)
        elif node.op == "loop":
            prev = self.block
            L(f"  {dst}.n = and i32 {ops[1]}, 7")
            L(f"  br label %b{i}.h")
            self.new_block(f"b{i}.h")
            L(f"  {dst}.i = phi i32 [0, %{prev}], [{dst}.i1, %b{i}.b]")
            L(f"  {dst} = phi {T} [{ops[0]}, %{prev}], [{dst}.nx, %b{i}.b]")
            L(f"  {dst}.c = icmp ult i32 {dst}.i, {dst}.n")
            L(f"  br i1 {dst}.c, label %b{i}.b, label %b{i}.x")
            self.new_block(f"b{i}.b")
            self.emit_op(f"{dst}.nx", node.attr[0], node.ty, (node.ty, node.ty), [dst, ops[2]], ())
            L(f"  {dst}.i1 = add i32 {dst}.i, 1")
            L(f"  br label %b{i}.h")
            self.new_block(f"b{i}.x")
        else:
            self.emit_op(dst, node.op, node.ty, arg_tys, ops, node.attr)
        self.operand[i] = dst

    def lds(self, i: int, node: Node, x: str) -> None:
        """Every lane stores x at element tid of a workgroup array of its own, a barrier, then either a load of
        another lane's element (lds.swap) or, on lanes below the stride, a raking fold of every stride-th element
        in a loop (lds.rake: rocPRIM's raking reduce; loop strength reduction makes LDS bases below zero)."""
        L = self.lines.append
        T = LLTYPE[node.ty]
        dst, arr = f"%v{i}", f"@lds{i}"
        self.globals.append(f"{arr} = internal addrspace(3) global [{LOCAL} x {T}] poison, align 16")
        self.declare("void", "llvm.amdgcn.s.barrier", [])
        L(f"  {dst}.sp = getelementptr inbounds [{LOCAL} x {T}], ptr addrspace(3) {arr}, i32 0, i32 %tid")
        L(f"  store {T} {x}, ptr addrspace(3) {dst}.sp")
        L('  fence syncscope("workgroup") release')
        L("  call void @llvm.amdgcn.s.barrier()")
        L('  fence syncscope("workgroup") acquire')
        if node.op == "lds.swap":
            mode, k = node.attr
            if mode == "xor":
                L(f"  {dst}.ix = xor i32 %tid, {k}")
            elif mode == "rev":
                L(f"  {dst}.ix = sub i32 {LOCAL - 1}, %tid")
            elif mode == "rot":
                L(f"  {dst}.s = add i32 %tid, {k}")
                L(f"  {dst}.ix = and i32 {dst}.s, {LOCAL - 1}")
            else:  # down: LDS[tid - k] where tid >= k, else the lane's own element
                L(f"  {dst}.ge = icmp uge i32 %tid, {k}")
                L(f"  {dst}.s = sub i32 %tid, {k}")
                L(f"  {dst}.ix = select i1 {dst}.ge, i32 {dst}.s, i32 %tid")
            L(f"  {dst}.lp = getelementptr inbounds [{LOCAL} x {T}], ptr addrspace(3) {arr}, i32 0, i32 {dst}.ix")
            L(f"  {dst} = load {T}, ptr addrspace(3) {dst}.lp")
            return
        op, stride = node.attr[:2]
        keep = len(node.attr) > 2 and node.attr[2]
        prev = self.block
        L(f"  {dst}.c = icmp ult i32 %tid, {stride}")
        L(f"  br i1 {dst}.c, label %b{i}.r, label %b{i}.j")
        self.new_block(f"b{i}.r")
        L(f"  {dst}.a0 = load {T}, ptr addrspace(3) {dst}.sp")
        if keep:
            # a pointer that starts one stride before the lane's element and loads two strides on, in a loop kept
            # a loop: at O0 LLVM emits rocPRIM's `v_sub_nc_u32 v, tid, stride` + `ds_load ... offset:2*stride*size`
            # (an LDS base below zero on lanes below the stride)
            L(f"  {dst}.b = sub i32 %tid, {stride}")
            L(f"  {dst}.p0 = getelementptr {T}, ptr addrspace(3) {arr}, i32 {dst}.b")
        else:
            L(f"  {dst}.i0 = add i32 %tid, {stride}")
        L(f"  br label %b{i}.h")
        self.new_block(f"b{i}.h")
        if keep:
            L(f"  {dst}.k = phi i32 [1, %b{i}.r], [{dst}.k1, %b{i}.h]")
            L(f"  {dst}.p = phi ptr addrspace(3) [{dst}.p0, %b{i}.r], [{dst}.p1, %b{i}.h]")
            L(f"  {dst}.acc = phi {T} [{dst}.a0, %b{i}.r], [{dst}.nx, %b{i}.h]")
            L(f"  {dst}.lp = getelementptr {T}, ptr addrspace(3) {dst}.p, i32 {2 * stride}")
        else:
            L(f"  {dst}.ix = phi i32 [{dst}.i0, %b{i}.r], [{dst}.i1, %b{i}.h]")
            L(f"  {dst}.acc = phi {T} [{dst}.a0, %b{i}.r], [{dst}.nx, %b{i}.h]")
            L(f"  {dst}.lp = getelementptr inbounds [{LOCAL} x {T}], ptr addrspace(3) {arr}, i32 0, i32 {dst}.ix")
        L(f"  {dst}.e = load {T}, ptr addrspace(3) {dst}.lp")
        self.emit_op(f"{dst}.nx", op, node.ty, (node.ty, node.ty), [f"{dst}.acc", f"{dst}.e"], ())
        if keep:
            L(f"  {dst}.p1 = getelementptr {T}, ptr addrspace(3) {dst}.p, i32 {stride}")
            L(f"  {dst}.k1 = add i32 {dst}.k, 1")
            L(f"  {dst}.more = icmp ult i32 {dst}.k1, {LOCAL // stride}")
            L(f"  br i1 {dst}.more, label %b{i}.h, label %b{i}.x, !llvm.loop !0")
            self.metadata = ['!0 = distinct !{!0, !1}', '!1 = !{!"llvm.loop.unroll.disable"}']
        else:
            L(f"  {dst}.i1 = add i32 {dst}.ix, {stride}")
            L(f"  {dst}.more = icmp ult i32 {dst}.i1, {LOCAL}")
            L(f"  br i1 {dst}.more, label %b{i}.h, label %b{i}.x")
        self.new_block(f"b{i}.x")
        L(f"  br label %b{i}.j")
        self.new_block(f"b{i}.j")
        L(f"  {dst} = phi {T} [{x}, %{prev}], [{dst}.nx, %b{i}.x]")

    def shuffle(self, i: int, node: Node, ops: list[str]) -> None:
        """A cross-lane move of an i8/i16/i32 value as rocPRIM writes it: extended to i32 (zext or sext), moved by
        llvm.amdgcn.update.dpp / ds.swizzle / ds.bpermute, truncated back."""
        L = self.lines.append
        T = LLTYPE[node.ty]
        dst = f"%v{i}"
        sext = node.attr[-1]
        wide = []
        for k, o in enumerate(ops):
            if node.ty == "i32":
                wide.append(o)
            else:
                L(f"  {dst}.w{k} = {'sext' if sext else 'zext'} {T} {o} to i32")
                wide.append(f"{dst}.w{k}")
        out = dst if node.ty == "i32" else f"{dst}.m"
        if node.op == "dpp":
            kind, n, bound, _ = node.attr
            ctrl = {"quad_perm": n, "row_shl": 0x100 + n, "row_shr": 0x110 + n, "row_ror": 0x120 + n,
                    "row_mirror": 0x140, "row_half_mirror": 0x141}[kind]
            self.call(out, "i32", "llvm.amdgcn.update.dpp.i32",
                      [("i32", wide[0]), ("i32", wide[1]), ("i32", str(ctrl)), ("i32", "15"), ("i32", "15"),
                       ("i1", "true" if bound else "false")])
        elif node.op == "swizzle":
            mode, n, _ = node.attr
            pattern = 0x8000 | n if mode == "quad_perm" else n
            self.call(out, "i32", "llvm.amdgcn.ds.swizzle", [("i32", wide[0]), ("i32", str(pattern))])
        else:
            k = node.attr[0] % self.wave
            L(f"  {dst}.l = and i32 %tid, {self.wave - 1}")
            L(f"  {dst}.s = xor i32 {dst}.l, {k}")
            L(f"  {dst}.a = shl i32 {dst}.s, 2")
            self.call(out, "i32", "llvm.amdgcn.ds.bpermute", [("i32", f"{dst}.a"), ("i32", wide[0])])
        if node.ty != "i32":
            L(f"  {dst} = trunc i32 {out} to {T}")

    def kernel(self) -> str:
        slots = input_slots(self.prog)
        self.declare("i32", "llvm.amdgcn.workitem.id.x", [])
        self.declare("i32", "llvm.amdgcn.workgroup.id.x", [])
        self.declare("ptr addrspace(4)", "llvm.amdgcn.implicitarg.ptr", [])
        for i, node in enumerate(self.prog.nodes):
            self.node(i, node, slots)
        for o, i in enumerate(self.prog.outputs):
            ty = self.prog.nodes[i].ty
            val, T = self.operand[i], LLTYPE[ty]
            if elem(ty) == "i1":
                self.lines.append(f"  %o{o}.z = zext {T} {val} to {storage(ty)}")
                val, T = f"%o{o}.z", storage(ty)
            self.lines.append(f"  %o{o}.r = getelementptr inbounds i8, ptr addrspace(1) %out, i64 {o * REGION}")
            self.lines.append(f"  %o{o}.p = getelementptr inbounds {T}, ptr addrspace(1) %o{o}.r, i64 %gid64")
            self.lines.append(f"  store {T} {val}, ptr addrspace(1) %o{o}.p")
        head = ("define amdgpu_kernel void @fuzz(ptr addrspace(1) noalias readonly %in, "
                "ptr addrspace(1) noalias readonly %uni, ptr addrspace(1) noalias %out) {\nentry:\n")
        return ("\n".join(self.globals + list(self.decls.values())) + "\n\n" + head + GID + "\n".join(self.lines)
                + "\n  ret void\n}\n" + "".join(m + "\n" for m in self.metadata))


def vector_cond(ty: str) -> str:
    """The condition type of a select producing `ty` elementwise: i1, or <n x i1>."""
    return "i1" if ty not in VECTORS else {2: "v2i1", 4: "v4i1"}[count(ty)]


def input_slots(prog: Program) -> dict[int, tuple[bool, int]]:
    """node index -> (uniform, slot): per-lane inputs and uniform inputs are numbered separately."""
    slots: dict[int, tuple[bool, int]] = {}
    counts = [0, 0]
    for i, n in enumerate(prog.nodes):
        if n.op == "input":
            u = bool(n.attr[0])
            slots[i] = (u, counts[u])
            counts[u] += 1
    return slots


def kernel_ir(prog: Program, wave: int) -> str:
    """The LLVM IR text of `prog` for a target with `wave` lanes per wave (ballot's width depends on it)."""
    return Emitter(prog, wave).kernel()
