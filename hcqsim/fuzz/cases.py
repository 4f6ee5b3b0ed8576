"""A fuzz case as plain data (`FuzzCase`: operations on small buffers of one to three devices, in-flight prelude work,
parameters and runs), its text, and its sequential meaning computed in numpy."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .draws import U32

BUFFER_BYTES = 64  # small buffers, so random ranges overlap often
# the buffers of about one case in eight: three SDMA chunks (queue.COPY_CHUNK, 4 KiB) and a bit, so a copy or fill
# spans several chunks and another queue may run between them (a kernel's range stays at most KERNEL_WORDS words)
LONG_BUFFER_BYTES = 3 * 4096 + 64
KERNEL_WORDS = 16
BUFFERS_PER_DEVICE = 2
MAX_SCALAR = 1000  # kernel scalars and parameter values are 0..MAX_SCALAR
ALT = "'"  # "d0b1'" is the buffer a run may bind in place of d0b1

# kernel name -> (buffer arguments: (read?, write?) each, scalar arguments) for the ops drawn here
FUZZ_KERNELS = {"inc": ([(True, True)], 0), "add": ([(True, False), (True, False), (False, True)], 0),
                "scale": ([(True, False), (False, True)], 1)}


@dataclass(frozen=True)
class FuzzCase:
    """Operations as plain data. Buffers are "d<k>b<j>" (device k, `buffer_bytes` each); "d<k>b<j>'" is the
    buffer a run may bind in its place. An op is
    ("fill", buf, off, size, value) | ("copy", dst, doff, src, soff, size) | ("host_write", buf, off, [bytes])
    | ("kernel", name, [[buf, off], ...], [scalars], n): n words from each buffer argument's offset.
    A fill value or kernel scalar may be a parameter's name ("p0"). `params`: ((name, default), ...).
    `prelude`: (device, fill or copy) submitted straight to that device's timeline before the first run, still
    in flight (gated) when it starts. `runs`: per run of the one compiled schedule, (names rebound to their
    primed buffer, ((param, value), ...))."""

    devices: int
    ops: tuple
    prelude: tuple = ()
    batch_limit: int = 32
    params: tuple = ()
    runs: tuple = (((), ()),)
    buffer_bytes: int = BUFFER_BYTES  # every buffer's size (LONG_BUFFER_BYTES: copies and fills span SDMA chunks)

    @property
    def first_index(self) -> int:
        """The schedule index of ops[0]: with a prelude, op 0 is the host opening its gates."""
        return 1 if self.prelude else 0

    def text(self) -> str:
        lines = []
        if self.buffer_bytes != BUFFER_BYTES:
            lines.append(f"buffers of {self.buffer_bytes} bytes")
        if self.batch_limit != 32:
            lines.append(f"batch_limit={self.batch_limit}")
        if self.params:
            lines.append("params: " + ", ".join(f"{n}={v}" for n, v in self.params))
        lines += [f"prelude on GPU {k}: {_op_text(op)}  (timeline work in flight)" for k, op in self.prelude]
        if self.prelude:
            lines.append("#0: host opens the prelude gates")
        lines += [f"#{i + self.first_index}: {_op_text(op)}" for i, op in enumerate(self.ops)]
        if self.runs != (((), ()),):
            for r, (rebound, params) in enumerate(self.runs):
                what = [f"{n} -> {n}{ALT}" for n in rebound] + [f"{n}={v}" for n, v in params]
                lines.append(f"run {r}: " + (", ".join(what) if what else "as compiled"))
        return "\n".join(lines)


def _value_text(v) -> str:
    return v if isinstance(v, str) else f"0x{v:08x}"


def _op_text(op) -> str:
    if op[0] == "fill":
        return f"fill {op[1]}[{op[2]}:{op[2] + op[3]}] = {_value_text(op[4])}"
    if op[0] == "copy":
        return f"copy {op[1]}[{op[2]}:{op[2] + op[5]}] <- {op[3]}[{op[4]}:{op[4] + op[5]}]"
    if op[0] == "host_write":
        return f"host_write {op[1]}[{op[2]}:{op[2] + len(op[3])}] = {bytes(op[3]).hex()}"
    _, name, bufs, scalars, n = op
    return f"kernel {name}({', '.join(f'{b}+{o}' for b, o in bufs)}{''.join(f', {s}' for s in scalars)}, n={n})"


def buffer_names(devices: int) -> list[str]:
    return [f"d{d}b{j}" for d in range(devices) for j in range(BUFFERS_PER_DEVICE)]


def all_buffer_names(devices: int) -> list[str]:
    """The buffers of a case and the ones its runs may bind instead."""
    return [n + alt for n in buffer_names(devices) for alt in ("", ALT)]


# -- the sequential meaning (numpy) -----------------------------------------------------------------------


def initial_memory(devices: int, size: int = BUFFER_BYTES) -> dict[str, np.ndarray]:
    """Word j of the k-th buffer starts as (k + 1) << 24 | j."""
    return {name: (((k + 1) << 24) + np.arange(size // 4, dtype=np.uint64)).astype("<u4").view(np.uint8)
            for k, name in enumerate(all_buffer_names(devices))}


def _apply(mem: dict, op, bind=lambda n: n, param=lambda v: v) -> None:
    kind = op[0]
    if kind == "fill":
        _, b, off, size, v = op
        mem[bind(b)][off:off + size] = np.full(size // 4, int(param(v)) & U32, "<u4").view(np.uint8)
    elif kind == "copy":
        _, d, doff, s, soff, size = op
        mem[bind(d)][doff:doff + size] = mem[bind(s)][soff:soff + size].copy()
    elif kind == "host_write":
        _, b, off, data = op
        mem[bind(b)][off:off + len(data)] = np.asarray(data, np.uint8)
    else:
        _, name, bufs, scalars, n = op
        w = [mem[bind(b)][o:o + 4 * n].view("<u4").astype(np.uint64) for b, o in bufs]
        if name == "inc":
            out, res = bufs[0], w[0] + 1
        elif name == "add":
            out, res = bufs[2], w[0] + w[1]
        else:
            out, res = bufs[1], w[0] * int(param(scalars[0]))
        mem[bind(out[0])][out[1]:out[1] + 4 * n] = (res & U32).astype("<u4").view(np.uint8)


def sequential_effects(case: FuzzCase) -> dict[str, bytes]:
    """What the case means: the prelude, then for each run every operation, one at a time in program order,
    on the buffers that run binds and with its parameter values."""
    mem = initial_memory(case.devices, case.buffer_bytes)
    for _, op in case.prelude:
        _apply(mem, op)
    defaults = dict(case.params)
    for rebound, params in case.runs:
        values = defaults | dict(params)
        bind = lambda n, r=frozenset(rebound): n + ALT if n in r else n  # noqa: E731
        param = lambda v, vs=values: vs[v] if isinstance(v, str) else v  # noqa: E731
        for op in case.ops:
            _apply(mem, op, bind, param)
    return {k: v.tobytes() for k, v in mem.items()}
