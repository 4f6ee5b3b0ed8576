"""Schedules: a list of operations on buffers, compiled once into multi-queue command streams and replayed.

    sched = Schedule(dev, compute_queues=2, copy_queues=2)
    sched.fill(a, 0, a.size)
    sched.kernel(prog, [a, b, n], 1024, 64, reads=[a], writes=[b])
    sched.copy(c, b, b.size)
    compiled = sched.compile()          # queues, waits, signals, command buffers: once
    compiled.run()                      # or: signal, value = compiled.run_async()
    print(compiled.describe())

The meaning of a schedule is its operations executed one after another in program order
(`run_sequential`, the reference). `compile` (hcqsim.runtime.plan) assigns operations to hardware queues and
inserts exactly the waits the byte ranges they read and write require; `hcqsim.runtime.replay` builds the
command buffers and launches them; docs/schedule.md lists every rule.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .hazards import Region, allocation_of, as_region

__all__ = ["Schedule", "Param", "Operation", "region"]


def region(buf, offset: int = 0, size: int | None = None) -> Region:
    """`size` bytes at `offset` of a buffer (or view): what an operation reads or writes."""
    return as_region(buf, offset, size)


@dataclass(frozen=True)
class Param:
    """A scalar that may change between runs: a kernel argument or a fill value. `run(params={name: v})`."""

    name: str
    default: int | float

    def __repr__(self) -> str:
        return f"Param({self.name}={self.default})"


@dataclass(eq=False)
class Operation:
    """One recorded operation. `kind` is kernel, copy, fill or host; `reads` / `writes` the byte ranges."""

    index: int
    kind: str
    device: Any  # where it runs (None for host operations)
    engine: str  # compute, copy or host
    reads: list[Region]
    writes: list[Region]
    name: str
    queue_hint: int | None = None
    # kind-specific
    program: Any = None
    args: Sequence = ()
    global_size: Any = None
    local_size: Any = None
    dst: Region | None = None
    src: Region | None = None
    nbytes: int = 0
    value: int | Param = 0
    fn: Callable | None = None
    # host_write / host_read: fn(view_of) takes the host view of a region through `view_of`, so a run that
    # rebinds the buffer (run(buffers=...)) reads or writes the bound one; other host functions cannot follow
    rebindable: bool = False


class Schedule:
    """Records operations on one or more devices. `compute_queues` / `copy_queues`: how many hardware
    queues of each engine per device the compiler may use; `batch_limit`: operations in a queue's first
    submit (each further submit of that queue takes twice as many)."""

    def __init__(self, devices, *, compute_queues: int = 2, copy_queues: int = 2, batch_limit: int = 32):
        self.devices = list(devices) if isinstance(devices, (list, tuple)) else [devices]
        if not self.devices:
            raise ValueError("a schedule needs at least one device")
        if compute_queues < 1 or copy_queues < 1 or batch_limit < 1:
            raise ValueError("compute_queues, copy_queues and batch_limit must be at least 1")
        self.compute_queues, self.copy_queues, self.batch_limit = compute_queues, copy_queues, batch_limit
        self.ops: list[Operation] = []
        self.params: dict[str, Param] = {}
        self._names: dict[int, str] = {}  # id(allocation) -> name
        self._allocations: dict[int, Any] = {}  # id(allocation) -> allocation, in order of first use

    # -- naming ------------------------------------------------------------------------------------

    def name(self, buf, name: str) -> Any:
        """Call a buffer `name` in describe() and profiles, and bind it by that name in `run(buffers=...)`."""
        root, _ = allocation_of(buf)
        if name in self._names.values() and self._names.get(id(root)) != name:
            raise ValueError(f"buffer name {name!r} is already used in this schedule")
        self._names[id(root)] = name
        self._allocations.setdefault(id(root), root)
        return buf

    def buffer_name(self, alloc) -> str:
        return self._names.get(id(alloc)) or f"buf{list(self._allocations).index(id(alloc))}"

    def param(self, name: str, default: int | float) -> Param:
        """A named scalar for kernel arguments and fill values, replaced per run by `run(params=...)`."""
        if name in self.params:
            raise ValueError(f"parameter {name!r} already exists")
        p = self.params[name] = Param(name, default)
        return p

    def _regions(self, xs) -> list[Region]:
        out = []
        for x in xs or ():
            r = as_region(x)
            self._allocations.setdefault(id(r.buffer), r.buffer)
            out.append(r)
        return out

    def _add(self, **kw) -> Operation:
        op = Operation(index=len(self.ops), **kw)
        for r in op.reads + op.writes:
            self._allocations.setdefault(id(r.buffer), r.buffer)
        self.ops.append(op)
        return op

    def _check_device(self, dev) -> None:
        if dev not in self.devices:
            raise ValueError(f"{dev.label} is not one of this schedule's devices")

    # -- operations --------------------------------------------------------------------------------

    def kernel(self, program, args: Sequence, global_size, local_size, *, reads=None, writes=None,
               queue: int | None = None, name: str | None = None) -> Operation:
        """Launch `program` (on its device). Buffer arguments are read and written, whole, unless `reads` /
        `writes` (buffers, views or regions) narrow what the kernel touches."""
        self._check_device(program.device)
        buffers = [a for a in args if not isinstance(a, (int, float, Param))]
        if reads is None and writes is None:
            rs = ws = self._regions(buffers)
        else:
            rs, ws = self._regions(reads), self._regions(writes)
        for a in args:
            if isinstance(a, Param) and self.params.get(a.name) is not a:
                raise ValueError(f"{a!r} was not made by this schedule's param()")
        return self._add(kind="kernel", device=program.device, engine="compute", reads=rs, writes=ws,
                         name=name or program.name, queue_hint=queue, program=program, args=list(args),
                         global_size=global_size, local_size=local_size)

    def copy(self, dst, src, nbytes: int | None = None, *, queue: int | None = None,
             name: str | None = None) -> Operation:
        """Copy `nbytes` from `src` to `dst` (buffers, views or regions; same or different devices) on a copy
        queue of the source device; the destination is peer-mapped there at compile time."""
        s, d = as_region(src), as_region(dst)
        nbytes = min(s.size, d.size) if nbytes is None else nbytes
        s, d = as_region(s, 0, nbytes), as_region(d, 0, nbytes)
        self._check_device(s.device)
        return self._add(kind="copy", device=s.device, engine="copy", reads=self._regions([s]),
                         writes=self._regions([d]), name=name or "copy", queue_hint=queue, dst=d, src=s,
                         nbytes=nbytes)

    def fill(self, dst, value: int | Param, nbytes: int | None = None, *, queue: int | None = None,
             name: str | None = None) -> Operation:
        """Fill `nbytes` of `dst` with the 32-bit pattern `value` (dword aligned), on a copy queue of its device."""
        d = as_region(dst)
        nbytes = d.size if nbytes is None else nbytes
        d = as_region(d, 0, nbytes)
        if d.va % 4 or nbytes % 4:
            raise ValueError(f"fill of {nbytes} bytes at 0x{d.va:x}: address and size must be multiples of 4")
        self._check_device(d.device)
        return self._add(kind="fill", device=d.device, engine="copy", reads=[], writes=self._regions([d]),
                         name=name or "fill", queue_hint=queue, dst=d, nbytes=nbytes, value=value)

    def host(self, fn: Callable[[], Any], *, reads=(), writes=(), name: str = "host") -> Operation:
        """Run `fn()` on the host once every earlier operation touching `reads`/`writes` is done; later GPU
        operations touching them wait for it. Host-visible buffers only."""
        return self._add(kind="host", device=None, engine="host", reads=self._regions(reads),
                         writes=self._regions(writes), name=name, fn=fn)

    def host_write(self, dst, data, *, name: str = "host_write") -> Operation:
        """Write `data` (bytes-like, taken at run time if callable) into a host-visible buffer."""
        d = as_region(dst, 0, len(data) if not callable(data) else None)

        def write(view_of=_host_view):
            raw = memoryview(data() if callable(data) else data).cast("B")
            view_of(d)[:len(raw)] = raw
        op = self.host(write, writes=[d], name=name)
        op.rebindable = True
        return op

    def host_read(self, src, out: bytearray | memoryview, *, name: str = "host_read") -> Operation:
        """Copy a host-visible buffer's bytes into `out` once everything writing them is done."""
        out_mv = memoryview(out).cast("B")
        s = as_region(src, 0, len(out_mv))

        def read(view_of=_host_view):
            out_mv[:] = view_of(s)[:len(out_mv)].tobytes()
        op = self.host(read, reads=[s], name=name)
        op.rebindable = True
        return op

    # -- compile and reference ---------------------------------------------------------------------

    def compile(self):
        """Plan (queues, waits, signals, submits) and build the command buffers once: a CompiledSchedule."""
        from .plan import plan
        from .replay import CompiledSchedule
        return CompiledSchedule(self, plan(self))

    def run_sequential(self, params: dict | None = None) -> None:
        """The reference: every operation alone, in program order, each waited for before the next."""
        values = {n: p.default for n, p in self.params.items()} | dict(params or {})
        for op in self.ops:
            if op.kind == "host":
                op.fn()
                continue
            dev = op.device
            sig, v = dev.next_timeline()
            if op.kind == "kernel":
                args = [values[a.name] if isinstance(a, Param) else a for a in op.args]
                args = [a.va if isinstance(a, Region) else a for a in args]
                q = dev.compute_queue().exec(op.program, args, op.global_size, op.local_size)
            elif op.kind == "copy":
                _map_for(dev, op.dst.buffer)
                q = dev.copy_queue().copy(op.dst.va, op.src.va, op.nbytes)
            else:
                value = values[op.value.name] if isinstance(op.value, Param) else op.value
                q = dev.copy_queue().fill(op.dst.va, int(value), op.nbytes)
            q.signal(sig, v).submit()
            sig.wait(v)


def _host_view(r: Region):
    view = r.buffer.view
    if view is None:
        raise ValueError(f"host operation on {r!r}: the buffer is not host visible")
    return view[r.offset:r.end]


def _map_for(dev, alloc) -> None:
    """Peer-map an allocation into `dev` if it lives elsewhere (what a copy of another device's memory needs)."""
    if alloc.device is not dev:
        alloc.device.map_to(alloc, dev)


def scalar_bytes(value: int | float, size: int) -> bytes:
    """A by-value kernel argument as the kernarg segment holds it (ints little-endian, floats IEEE)."""
    if isinstance(value, float):
        return struct.pack("<f" if size == 4 else "<d", value)
    return int(value).to_bytes(size, "little", signed=int(value) < 0)

