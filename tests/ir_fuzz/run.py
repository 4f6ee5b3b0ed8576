"""Compile a program, run it on the emulated GPU through the runtime, compare with `evaluate`.

`check(prog, target, opt, seed)` returns an `Outcome`: "ok", "mismatch" (a wrong value: the message has
the IR, LLVM's listing and the first differing lane), "unsupported" (the shader core stopped on an
instruction it does not implement; `mnemonic` names it), "fault" (any other device fault or internal
error of the emulator) or "compile_error" (LLVM rejected the IR: a bug of the fuzzer).
"""
from __future__ import annotations

import itertools
import re
import time
from dataclasses import dataclass, field

import numpy as np

from hcqsim.compiler import assemble_listing, compile_llvm
from hcqsim.errors import DeviceFault
from hcqsim.runtime import open_device

from . import dag, fp
from .dag import VECTORS, WIDTH, Node, Program, count, elem, is_float
from .emit import REGION, input_slots, kernel_ir
from .evaluate import NAN_ANY, NAN_Q, UNKNOWN, Choices, Launch, Marker, evaluate

LANES = 128
LOCAL = dag.LOCAL  # work-items per workgroup: the LDS operations of the grammar assume it
WAVE = {"gfx1100": 32, "gfx942": 64}
FILL = 0xA5  # the output buffer's bytes before the kernel runs
MAX_CHOICE_VECTORS = 64

_devices: dict[str, object] = {}


def device(target: str):
    """One emulated device per target for the whole process (opening one is not free)."""
    dev = _devices.get(target)
    if dev is None:
        dev = _devices[target] = open_device("sim", target=target)
    return dev


def forget_device(target: str) -> None:
    """After a fault the device refuses further work: the next `device` call opens a fresh one."""
    dev = _devices.pop(target, None)
    if dev is not None:
        try:
            dev.close()
        except Exception:  # noqa: BLE001 - a faulted device may not close cleanly; a new one is opened
            pass


# ---------------------------------------------------------------------------------------------------
# inputs


def lane_values(ty: str, rng: np.random.Generator, n: int) -> list:
    """n bit patterns of `ty` (tuples for vectors): half special values, the rest random bits or small
    numbers."""
    if ty in VECTORS:
        e, k = VECTORS[ty]
        parts = [lane_values(e, rng, n) for _ in range(k)]
        return [tuple(p[i] for p in parts) for i in range(n)]
    w = WIDTH[ty]
    specials = dag.float_specials(ty) if is_float(ty) else dag.int_specials(ty)
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.5:
            out.append(specials[rng.integers(len(specials))])
        elif r < 0.75:
            out.append(int(rng.integers(0, 1 << w, dtype=np.uint64)) if w < 64 else
                       int(rng.integers(0, 1 << 63, dtype=np.uint64)) | (int(rng.integers(2)) << 63))
        elif is_float(ty):
            k = int(rng.integers(-40, 41))
            v = fp.int_to_float(k, ty) if rng.random() < 0.7 else fp.from_float(k / 8, ty)
            out.append(v)
        else:
            out.append(int(rng.integers(-20, 21)) & ((1 << w) - 1))
    return out


def make_inputs(prog: Program, seed: int) -> dict[int, list[int]]:
    rng = np.random.default_rng(seed)
    inputs = {}
    for i, node in enumerate(prog.nodes):
        if node.op == "input":
            if node.attr[0]:
                inputs[i] = lane_values(node.ty, rng, 1) * LANES
            else:
                inputs[i] = lane_values(node.ty, rng, LANES)
    return inputs


def _elem_size(ty: str) -> int:
    return 1 if elem(ty) == "i1" else WIDTH[elem(ty)] // 8


def _store_size(ty: str) -> int:
    return _elem_size(ty) * count(ty)


def _encode(v, ty: str) -> bytes:
    size = _elem_size(ty)
    if ty in VECTORS:
        return b"".join(int(x).to_bytes(size, "little") for x in v)
    return int(v).to_bytes(size, "little")


def _decode(raw: bytes, ty: str):
    size = _elem_size(ty)
    if ty in VECTORS:
        return tuple(int.from_bytes(raw[k * size:(k + 1) * size], "little") for k in range(count(ty)))
    return int.from_bytes(raw, "little")


def _pack(buf: np.ndarray, offset: int, ty: str, values: list) -> None:
    raw = b"".join(_encode(v, ty) for v in values)
    buf[offset:offset + len(raw)] = np.frombuffer(raw, np.uint8)


# ---------------------------------------------------------------------------------------------------
# outcome


@dataclass
class Outcome:
    kind: str  # ok | mismatch | unsupported | fault | compile_error
    checks: int = 0  # lane-output comparisons made
    message: str = ""
    mnemonic: str = ""  # for unsupported: the instruction
    first_bad: tuple | None = None  # (output index, lane) of the first wrong value
    ir: str = ""
    seconds: dict = field(default_factory=dict)
    comparison: "Comparison | None" = None
    got: list | None = None
    inputs: dict | None = None

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


def matches(expect, got, ty: str) -> bool:
    if ty in VECTORS:
        if expect is UNKNOWN:
            return True
        return all(matches(e, g, elem(ty)) for e, g in zip(expect, got))
    if expect is UNKNOWN:
        return True
    if expect is NAN_Q:
        return fp.is_nan(got, ty) and not fp.is_snan(got, ty)
    if expect is NAN_ANY:
        return fp.is_nan(got, ty)
    if ty == "i1":
        return got == expect
    return got == expect


def show(v, ty: str) -> str:
    if isinstance(v, Marker):
        return repr(v)
    if ty in VECTORS:
        return "<" + ", ".join(show(x, elem(ty)) for x in v) + ">"
    digits = max(1, WIDTH[ty] // 4)
    text = f"0x{v:0{digits}x}"
    if is_float(ty):
        if fp.is_nan(v, ty):
            text += " (sNaN)" if fp.is_snan(v, ty) else " (qNaN)"
        else:
            text += f" ({fp.to_float(v, ty)!r})"
    elif WIDTH[ty] > 1:
        sv = v - (1 << WIDTH[ty]) if v >> (WIDTH[ty] - 1) else v
        text += f" ({v}" + (f" / {sv}" if sv != v else "") + ")"
    return text


_UNSUPPORTED = re.compile(r"\((v_\w+|s_\w+|ds_\w+|global_\w+|buffer_\w+|flat_\w+|scratch_\w+|unknown opcode \w+)"
                          r"(?:[^)]*)\):")


def _mnemonic(text: str) -> str:
    m = _UNSUPPORTED.search(text)
    return m.group(1) if m else "?"


def execute(code: bytes, target: str, prog: Program, inputs: dict[int, list[int]]) -> list[list[int]]:
    """Run the compiled kernel; the values stored for each output, per lane. Raises DeviceFault and
    whatever else the emulator raises."""
    dev = device(target)
    program = dev.load_program(code, "fuzz")
    slots = input_slots(prog)
    n_lane = sum(1 for u, _ in slots.values() if not u)
    n_uni = sum(1 for u, _ in slots.values() if u)
    inb = dev.alloc(max(1, n_lane) * REGION)
    unib = dev.alloc(max(1, n_uni) * 8)
    outb = dev.alloc(len(prog.outputs) * REGION)
    try:
        for i, (uniform, k) in slots.items():
            ty = prog.nodes[i].ty
            if uniform:
                _pack(unib.view, 8 * k, ty, inputs[i][:1])
            else:
                _pack(inb.view, k * REGION, ty, inputs[i])
        outb.view[:] = FILL
        done = dev.new_signal(0)
        dev.compute_queue().exec(program, [inb, unib, outb], LANES, LOCAL).signal(done, 1).submit()
        done.wait(1, timeout_ms=60_000)
        results = []
        for o, i in enumerate(prog.outputs):
            ty = prog.nodes[i].ty
            size = _store_size(ty)
            region = bytes(outb.view[o * REGION:(o + 1) * REGION])
            results.append([_decode(region[l * size:(l + 1) * size], ty) for l in range(LANES)])
            tail = region[LANES * size:]
            if tail != bytes([FILL]) * len(tail):
                raise AssertionError(f"output {o}: bytes beyond the {LANES} elements were written")
        return results
    finally:
        for b in (inb, unib, outb):
            try:
                dev.free(b)
            except Exception:  # noqa: BLE001 - freeing after a fault may fail; the device is replaced
                pass


@dataclass
class Comparison:
    checks: int
    bad: dict  # lane -> (index into outputs of its first wrong output, the evaluation that got furthest)
    default: list  # the evaluation with every choice at its default

    def first_bad(self) -> tuple[int, int] | None:
        if not self.bad:
            return None
        lane = min(self.bad)
        return self.bad[lane][0], lane


def compare(prog: Program, inputs, got: list[list[int]], wave: int) -> Comparison:
    """A lane is right when some resolution of LangRef's choices gives all its outputs. For a wrong lane,
    the evaluation whose first mismatch comes latest (in definition order) is kept."""
    launch = Launch(LANES, wave)
    order = sorted(range(len(prog.outputs)), key=lambda o: prog.outputs[o])
    bad: dict[int, tuple[int, list]] = {}
    pending = set(range(LANES))
    default = None
    queue: list[dict] = [{}]
    seen_vectors: set = set()
    keys: dict = {}
    while queue and pending and len(seen_vectors) < MAX_CHOICE_VECTORS:
        picks = queue.pop(0)
        frozen = tuple(sorted(picks.items(), key=repr))
        if frozen in seen_vectors:
            continue
        seen_vectors.add(frozen)
        ch = Choices(picks=dict(picks))
        vals = evaluate(prog, inputs, launch, ch)
        default = default or vals
        for lane in list(pending):
            first = next((o for o in order if not matches(vals[prog.outputs[o]][lane], got[o][lane],
                                                           prog.nodes[prog.outputs[o]].ty)), None)
            if first is None:
                pending.discard(lane)
                bad.pop(lane, None)
            elif lane not in bad or order.index(first) > order.index(bad[lane][0]):
                bad[lane] = (first, vals)
        new_keys = {k: n for k, n in ch.seen.items() if k not in keys}
        if new_keys:
            keys.update(new_keys)
            ks = sorted(keys, key=repr)
            queue.extend(dict(zip(ks, combo)) for combo in itertools.product(*[range(keys[k]) for k in ks]))
    return Comparison(LANES * len(prog.outputs), {l: bad[l] for l in pending}, default)


def describe_failure(prog: Program, ir: str, target: str, opt: int, inputs, got, vals, bad: tuple) -> str:
    o, lane = bad
    i = prog.outputs[o]
    ty = prog.nodes[i].ty
    lines = [f"wrong value on {target} at O{opt}: output {o} (%v{i} = {prog.nodes[i].describe()}), lane {lane}",
             f"  expected {show(vals[i][lane], ty)}", f"  got      {show(got[o][lane], ty)}", "  inputs of that lane:"]
    for k in sorted(inputs):
        lines.append(f"    %v{k} ({prog.nodes[k].ty}{', uniform' if prog.nodes[k].attr[0] else ''}) = "
                     f"{show(inputs[k][lane], prog.nodes[k].ty)}")
    lines.append("  all values the evaluator computed on that lane:")
    for k, node in enumerate(prog.nodes):
        if node.op not in ("input",):
            lines.append(f"    %v{k} = {node.describe()} -> {show(vals[k][lane], node.ty)}")
    lines += ["", "program:", prog.describe(), "", "IR:", ir, "listing:", _listing(ir, target, opt)]
    return "\n".join(lines)


def _listing(ir: str, target: str, opt: int) -> str:
    try:
        text = assemble_listing(ir, target, opt, ir_passes=True)
    except Exception as e:  # noqa: BLE001 - the listing is a courtesy in a failure message
        return f"(no listing: {e})"
    keep = [l for l in text.splitlines() if l.startswith("\t") and not l.startswith("\t.") or l.endswith(":")
            and not l.startswith(".")]
    return "\n".join(keep[:400])


# LLVM miscompiles the fuzzer can generate: (predicate on the program, target, opt) -> why. The emulator runs
# what LLVM emitted correctly; these are reported apart (kind "llvm_bug") so they do not hide emulator bugs.
KNOWN_LLVM_BUGS = (
    (lambda prog, target, opt: target == "gfx1100" and opt == 0
     and any(n.op == "bswap" and n.ty == "i64" for n in prog.nodes),
     "LLVM (real-true16, O0) lowers bswap.i64 with `v_mov_b16 v0.l, v1.l` and then a v_perm_b32 that reads all "
     "32 bits of v0, so the stale high half reaches the result"),
    (lambda prog, target, opt: any(_inserts_beside_negative_zero(prog, n) for n in prog.nodes),
     "LLVM (both targets, every level) folds insertelement into a <2 x half> constant whose other element is "
     "-0.0 (0x8000) as if it were +0.0: the stored high half is 0x0000"),
    (lambda prog, target, opt: any(n.op == "ballot" and prog.nodes[n.args[0]].op == "fcmp"
                                   and prog.nodes[n.args[0]].attr[:1] == ("one",) for n in prog.nodes),
     "LLVM (both targets, every level) computes ballot(fcmp one) with v_cmp_neq (unordered or not equal) when "
     "the compare has another use: NaN lanes come out set"),
    (lambda prog, target, opt: target == "gfx942"
     and any(n.op in ("fneg", "copysign") and n.ty == "v2f32" for n in prog.nodes),
     "LLVM (gfx942) lowers fneg <2 x float> (and copysign by a negative constant) to v_pk_add_f32 x, 0 with neg "
     "modifiers, an arithmetic add that quiets a signalling NaN; fneg/copysign must only set the sign bit"),
)


def _inserts_beside_negative_zero(prog: Program, node) -> bool:
    if node.op != "insertelement" or node.ty != "v2f16" or not node.args:
        return False
    src = prog.nodes[node.args[0]]
    if src.op != "const" or not src.attr:
        return False
    lanes, index = src.attr[0], node.attr[0] if node.attr else 0
    return isinstance(lanes, tuple) and len(lanes) == 2 and lanes[1 - index] == 0x8000


def known_llvm_bug(prog: Program, target: str, opt: int) -> str | None:
    for applies, why in KNOWN_LLVM_BUGS:
        if applies(prog, target, opt):
            return why
    return None


def check(prog: Program, target: str, opt: int, seed: int = 0, *, inputs: dict | None = None,
          explain: bool = True) -> Outcome:
    """Compile, run and compare one program on one target at one optimisation level, on the lane values
    `make_inputs(prog, seed)` (or `inputs`: node index -> one value per lane)."""
    wave = WAVE[target]
    t0 = time.perf_counter()
    ir = kernel_ir(prog, wave)
    llvm_bug = known_llvm_bug(prog, target, opt)
    if llvm_bug:
        return Outcome("llvm_bug", message=f"{llvm_bug}\n{ir}", ir=ir)
    inputs = make_inputs(prog, seed) if inputs is None else inputs
    try:
        code = compile_llvm(ir, target, opt, ir_passes=True)
    except ValueError as e:
        return Outcome("compile_error", message=f"{e}\n{ir}", ir=ir)
    try:
        got = execute(code, target, prog, inputs)
    except DeviceFault as e:
        forget_device(target)
        text = str(e)
        kind = "unsupported" if "unsupported" in text else "fault"
        return Outcome(kind, message=f"{text}\n\nIR:\n{ir}\nlisting:\n{_listing(ir, target, opt)}",
                       mnemonic=_mnemonic(text) if kind == "unsupported" else "", ir=ir)
    except Exception as e:  # noqa: BLE001 - anything else the emulator raises is its internal error
        forget_device(target)
        return Outcome("fault", message=f"internal error {type(e).__name__}: {e}\n\nIR:\n{ir}\nlisting:\n"
                       f"{_listing(ir, target, opt)}", mnemonic=f"internal {type(e).__name__}", ir=ir)
    t1 = time.perf_counter()
    cmp = compare(prog, inputs, got, wave)
    t2 = time.perf_counter()
    times = {"run": t1 - t0, "compare": t2 - t1}
    bad = cmp.first_bad()
    if bad is None:
        return Outcome("ok", checks=cmp.checks, ir=ir, seconds=times)
    vals = cmp.bad[bad[1]][1]
    msg = describe_failure(prog, ir, target, opt, inputs, got, vals, bad) if explain else ""
    return Outcome("mismatch", checks=cmp.checks, message=msg, first_bad=bad, ir=ir, seconds=times,
                   comparison=cmp, got=got, inputs=inputs)
