"""From a wrong program to the one operation that is wrong, on the lane values that show it.

1. Probe: the same DAG with every operation stored as an output. The first operation (in definition
   order) whose stored value is wrong on some lane is the suspect.
2. Isolate: a program of the suspect alone, its operands turned into per-lane inputs holding the values
   the device stored for them in the probe (right values: the suspect is the first wrong one, so an
   unspecified NaN becomes the NaN the device really made). If that program is still wrong, it is the
   minimal reproducer and its signature names the operation and its types.

Compilers fold and combine differently around an isolated operation, so a bug may vanish in step 2; the
signature then says "in context" and the probe program is the reproducer.
"""
from __future__ import annotations

from dataclasses import dataclass

from .dag import Node, Program
from .evaluate import Marker
from .run import Outcome, check


@dataclass
class Finding:
    signature: str  # e.g. "minimum.f32(f32, f32)"
    isolated: bool  # the suspect alone reproduces
    outcome: Outcome  # of the smallest program that reproduces


def signature(prog: Program, i: int) -> str:
    node = prog.nodes[i]
    arg_tys = ", ".join(prog.nodes[a].ty for a in node.args)
    op = node.op
    if op == "if":
        op = f"if[{'uniform' if node.attr[2] else 'divergent'}]({node.attr[0]}|{node.attr[1]})"
    elif op == "loop":
        op = f"loop({node.attr[0]})"
    return f"{op}.{node.ty}({arg_tys})"


def probe_program(prog: Program) -> Program:
    ops = tuple(i for i, n in enumerate(prog.nodes) if n.op not in ("input", "const"))
    return Program(prog.nodes, ops, prog.ops_used)


def isolate(prog: Program, i: int, values: dict[int, list]) -> tuple[Program, dict] | None:
    """The suspect node alone, with operands from `values` (node -> per-lane bit patterns); None when an
    operand has no known bit pattern."""
    node = prog.nodes[i]
    nodes: list[Node] = []
    inputs: dict[int, list[int]] = {}
    args = []
    for a in node.args:
        src = prog.nodes[a]
        if src.op == "const":
            nodes.append(src)
        else:
            lanes = values.get(a)
            if lanes is None or any(isinstance(v, Marker) for v in lanes):
                return None
            uniform = src.op == "input" and bool(src.attr[0])
            nodes.append(Node("input", src.ty, (), (uniform,)))
            inputs[len(nodes) - 1] = list(lanes)
        args.append(len(nodes) - 1)
    nodes.append(Node(node.op, node.ty, tuple(args), node.attr))
    return Program(tuple(nodes), (len(nodes) - 1,), frozenset({node.op})), inputs


def localize(prog: Program, target: str, opt: int, seed: int, first: Outcome) -> Finding:
    """Reduce a mismatch (`first`, the outcome of `check(prog, target, opt, seed)`)."""
    probe = probe_program(prog)
    p_out = check(probe, target, opt, seed)
    if p_out.kind != "mismatch":  # storing every value changed the code enough to hide it
        o, _ = first.first_bad
        return Finding("in context: " + signature(prog, prog.outputs[o]), False, first)
    cmp = p_out.comparison
    # the earliest wrong node over all wrong lanes
    suspect = min(probe.outputs[o] for o, _ in cmp.bad.values())
    values = dict(p_out.inputs)
    values.update({i: p_out.got[o] for o, i in enumerate(probe.outputs)})
    iso = isolate(probe, suspect, values)
    if iso is not None:
        small, inputs = iso
        s_out = check(small, target, opt, inputs=inputs)
        if s_out.kind == "mismatch":
            return Finding(signature(probe, suspect), True, s_out)
    return Finding("in context: " + signature(probe, suspect), False, p_out)
