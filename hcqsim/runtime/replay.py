"""Replay: a planned schedule built once into command buffers in GPU memory, patched and launched per run.

Each submit of the plan (hcqsim.runtime.plan) is one indirect buffer (IB) in a command buffer of its device;
a run writes only INDIRECT_BUFFER (PM4) / INDIRECT (SDMA) packets into the rings. What changes between runs
(buffer addresses, scalar parameters, the device timeline's signal and values, the scratch base) sits at
recorded patch sites in the IBs and kernarg segments, rewritten in place when its value changed.
"""
from __future__ import annotations

import ctypes
import functools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from .. import pm4, sdma
from ..registers import REGS, SH_BASE
from . import program as P
from .hazards import Region, as_region
from .plan import Plan, QueueId, Step, Wait, describe
from .queues import ComputeQueue, CopyQueue, chunks
from .schedule import Param, scalar_bytes
from .schedule import _host_view as _schedule_host_view

SLOT = 16  # bytes per schedule signal / per timestamp pair
IB_ALIGN = 32  # SDMA IB base alignment (facts 5.2); PM4 needs 4
IB_MAX_DWORDS = (1 << 20) - 1  # IB_SIZE is 20 bits on PM4 and SDMA


# (compute, target, family, SDMA version, SDMA engines) -> the memory barrier's packets (CompiledSchedule._barrier)
_BARRIERS: dict[tuple, tuple] = {}


class _Slot:
    """A 64-bit value in schedule state memory the host reads and writes (what Device.wait_value polls). `order`:
    the OS boundary's optional host_order hook, told of every read and write as Signal tells it (boundary.py)."""

    def __init__(self, va: int, order=None):
        self.va = self.value_addr = va
        self.order = order

    @property
    def value(self) -> int:
        value = ctypes.c_uint64.from_address(self.va).value
        if self.order is not None:
            self.order.observed(self.va)
        return value

    @value.setter
    def value(self, v: int) -> None:
        ctypes.c_uint64.from_address(self.va).value = v
        if self.order is not None:
            self.order.stored(self.va, 8)


@dataclass
class _Site:
    mem: np.ndarray  # uint8 view of host-visible memory
    offset: int  # byte offset of the dword the field starts in
    lo: int
    width: int
    transform: Any  # int addend, or a callable value -> field value

    def write(self, value) -> None:
        v = self.transform(value) if callable(self.transform) else value + self.transform
        n = 4 if self.lo + self.width <= 32 else 8
        raw = self.mem[self.offset:self.offset + n]
        old = int.from_bytes(raw.tobytes(), "little")
        mask = ((1 << self.width) - 1) << self.lo
        new = (old & ~mask) | ((v << self.lo) & mask)
        raw[:] = np.frombuffer(new.to_bytes(n, "little"), np.uint8)


class PatchTable:
    """Patch sites grouped by what their value depends on (a buffer, a parameter, a timeline value); a key is
    written only when its value differs from what its sites hold."""

    def __init__(self):
        self.sites: dict[Any, list[_Site]] = {}
        self.last: dict[Any, Any] = {}

    def add(self, key, mem, offset: int, lo: int, width: int, transform=0) -> None:
        self.sites.setdefault(key, []).append(_Site(mem, offset, lo, width, transform))

    def apply(self, values: Mapping[Any, Any]) -> int:
        """Write every key whose value changed; returns the number of sites written."""
        written = 0
        for key, sites in self.sites.items():
            v = values[key]
            if self.last.get(key, _MISSING) == v:
                continue
            for s in sites:
                s.write(v)
            self.last[key] = v
            written += len(sites)
        return written

    def __len__(self) -> int:
        return sum(len(s) for s in self.sites.values())


_MISSING = object()


class _IB:
    """The dwords of one submit while it is built, with its patch sites (dword index, field)."""

    def __init__(self, family: str, version: str, engine: str):
        self.family, self.version, self.engine = family, version, engine
        self.dws: list[int] = []
        self.sites: list[tuple[Any, int, int, int, Any]] = []  # (key, dword index, lo, width, transform)

    def add(self, packet: list[int], patches: Mapping[str, tuple[Any, Any]] = ()) -> None:
        """Append a packet; `patches` maps its field names to (key, transform)."""
        if patches:
            fmt = pm4.formats(self.family)[(packet[0] >> 8) & 0xFF] if self.engine == "compute" else \
                sdma.lookup(packet[0], self.version)
            for name, (key, transform) in patches.items():
                f = fmt.by_name[name]
                self.sites.append((key, len(self.dws) + f.dw, f.lo, f.hi - f.lo + 1, transform))
        self.dws += [d & 0xFFFFFFFF for d in packet]

    def add_raw_site(self, packet: list[int], dw: int, key, transform) -> None:
        """A patch site on a whole payload dword of the packet about to be added (SET_SH_REG values)."""
        self.sites.append((key, len(self.dws) + dw, 0, 32, transform))


@dataclass
class _Variant:
    """One build of the command buffers (with or without profiling timestamps)."""

    profile: bool
    buffers: dict[int, Any]  # device index -> command buffer
    ibs: dict[QueueId, list[tuple[int, int]]]  # queue -> [(IB address, dwords)] per submit
    patches: PatchTable


class CompiledSchedule:
    """A schedule built for replay. `run()` / `run_async()` launch it; `describe()` explains it."""

    def __init__(self, schedule, plan: Plan):
        self.schedule, self.plan = schedule, plan
        self.devices = plan.devices
        s = schedule
        self._extent: dict[int, int] = {}  # id(allocation) -> bytes used from its start
        self._roots: dict[int, Any] = {}
        self._mapped_on: dict[int, set[int]] = {}  # id(allocation) -> device indices that must map it
        for step in plan.steps:
            op = step.op
            for r in op.reads + op.writes:
                self._roots[id(r.buffer)] = r.buffer
                self._extent[id(r.buffer)] = max(self._extent.get(id(r.buffer), 0), r.end)
                if not step.queue.is_host:
                    self._mapped_on.setdefault(id(r.buffer), set()).add(step.queue.device)
            for a in op.args:
                if not isinstance(a, (int, float, Param)):
                    r = as_region(a)
                    self._roots[id(r.buffer)] = r.buffer
                    self._extent[id(r.buffer)] = max(self._extent.get(id(r.buffer), 0), r.end)
                    self._mapped_on.setdefault(id(r.buffer), set()).add(step.queue.device)
        for key, devs in self._mapped_on.items():
            for d in devs:
                _map(self._roots[key], self.devices[d])
        self._state_layout()
        self._kernargs = PatchTable()
        self._kernarg_bufs: dict[int, Any] = {}
        self._kernarg_of: dict[int, tuple[int, int]] = {}  # op index -> (kernarg address, dispatch pointer)
        self._scratch: dict[tuple[int, int], int] = {}  # (device, bytes) -> address baked in
        self._build_kernargs()
        self._variants: dict[bool, _Variant] = {}
        self._variant(False)
        self._last_run: list[tuple[Any, Any, int]] = []  # (device, timeline signal, value) of the last run
        self.last_profile = None
        self._clock_offsets: dict[int, float] = {}
        self.host_times: dict[int, tuple[float, float]] = {}
        self._timelines_mapped: set[tuple[int, int]] = set()  # (timeline signal VA, device index) mapped there
        self._bound: dict[int, Any] = {}  # id(allocation) -> the buffer this run binds in its place
        self._first_values: dict = {}
        self.runs = 0
        self.released = False

    # -- state memory: schedule signals and timestamps ---------------------------------------------

    def _state_layout(self) -> None:
        """One coherent buffer per device: a signal slot per queue of that device (the host's and the kick on
        device 0), then a timestamp pair per operation on it; every device maps every other's."""
        self._slot_of: dict[QueueId, tuple[int, int]] = {}  # queue -> (device, byte offset)
        self._ts_of: dict[int, tuple[int, int]] = {}  # op index -> (device, byte offset)
        sizes = {d: 0 for d in range(len(self.devices))}
        for qid, q in self.plan.queues.items():
            d = 0 if qid.is_host else qid.device
            self._slot_of[qid] = (d, sizes[d])
            sizes[d] += SLOT
            if not qid.is_host:
                for step in q.steps:
                    self._ts_of[step.op.index] = (d, None)
        self._kick = (0, sizes[0])
        sizes[0] += SLOT
        for op_index, (d, _) in list(self._ts_of.items()):
            self._ts_of[op_index] = (d, sizes[d])
            sizes[d] += SLOT
        self._state = {}
        used = [d for d in sizes if sizes[d]]
        for d in used:
            self._state[d] = self.devices[d].alloc(sizes[d], uncached=True)
        for d in used:
            for e in used:
                if e != d:
                    self.devices[d].map_to(self._state[d], self.devices[e])

    def _addr(self, where: tuple[int, int]) -> int:
        return self._state[where[0]].va + where[1]

    def _slot(self, qid: QueueId) -> _Slot:
        return _Slot(self._addr(self._slot_of[qid]), self.devices[0].os.host_order)

    # -- kernargs ------------------------------------------------------------------------------------

    def _build_kernargs(self) -> None:
        """A kernarg segment per kernel, written once; buffer and parameter arguments are patch sites."""
        sizes: dict[int, int] = {}
        layout = []
        for step in self.plan.steps:
            op = step.op
            if op.kind != "kernel":
                continue
            k = op.program.kernel
            ka = (k.kernarg_segment_size + 63) & ~63
            extra = (P.AQL_PACKET_SIZE if k.enable_sgpr_dispatch_ptr else 0) + \
                (P.QUEUE_DESCRIPTOR_SIZE if k.enable_sgpr_queue_ptr else 0)
            d = step.queue.device
            layout.append((step, d, sizes.get(d, 0), ka, extra))
            sizes[d] = sizes.get(d, 0) + ((ka + extra + 63) & ~63)
        for d, n in sizes.items():
            self._kernarg_bufs[d] = self.devices[d].alloc(max(n, 64), uncached=True)
        for step, d, off, ka, extra in layout:
            op, buf = step.op, self._kernarg_bufs[d]
            k = op.program.kernel
            view = buf.view[off:off + ka + extra]
            va = buf.va + off
            view[:] = 0
            launch = _launch_of(op)
            values = []
            for a in op.args:
                if isinstance(a, Param):
                    values.append(a.default)
                elif isinstance(a, (int, float)):
                    values.append(a)
                else:
                    values.append(as_region(a).va)
            P.write_kernargs(k, view, values, launch)
            for arg, a in zip(k.explicit_args, op.args):
                if isinstance(a, Param):
                    self._kernargs.add(("param", a.name), buf.view, off + arg.offset, 0, 8 * arg.size,
                                       _param_encoder(arg.size, isinstance(a.default, float)))
                elif not isinstance(a, (int, float)):
                    r = as_region(a)
                    self._kernargs.add(("buf", id(r.buffer)), buf.view, off + arg.offset, 0, 64, r.offset)
            dispatch_ptr = 0
            if k.enable_sgpr_dispatch_ptr:
                dispatch_ptr = va + ka
                view[ka:ka + P.AQL_PACKET_SIZE] = np.frombuffer(
                    P.aql_packet(k, op.program.descriptor_va, va, launch), np.uint8)
            self._kernarg_of[op.index] = (va, dispatch_ptr)
        # what the sites hold now: the compile-time values
        self._kernargs.last.update(self._default_values())

    # -- command buffers ------------------------------------------------------------------------------

    def _variant(self, profile: bool) -> _Variant:
        v = self._variants.get(profile)
        if v is None:
            v = self._variants[profile] = self._build(profile)
        return v

    def _build(self, profile: bool) -> _Variant:
        ibs_by_queue: dict[QueueId, list[_IB]] = {}
        for qid, q in self.plan.queues.items():
            if qid.is_host:
                continue
            ibs_by_queue[qid] = [self._encode_batch(qid, q, i, b, profile) for i, b in enumerate(q.batches)]
        patches = PatchTable()
        buffers, ibs = {}, {}
        per_dev: dict[int, list[tuple[QueueId, _IB]]] = {}
        for qid, lst in ibs_by_queue.items():
            for ib in lst:
                per_dev.setdefault(qid.device, []).append((qid, ib))
        for d, items in per_dev.items():
            offs, total = [], 0
            for _, ib in items:
                if len(ib.dws) > IB_MAX_DWORDS:
                    raise ValueError(f"a submit of {len(ib.dws)} dwords exceeds IB_SIZE; lower batch_limit")
                offs.append(total)
                total += (4 * len(ib.dws) + IB_ALIGN - 1) & ~(IB_ALIGN - 1)
            buf = buffers[d] = self.devices[d].alloc(max(total, 64), uncached=True)
            words = buf.view[:total // 4 * 4].view(np.uint32)
            for (qid, ib), off in zip(items, offs):
                words[off // 4:off // 4 + len(ib.dws)] = np.asarray(ib.dws, dtype=np.uint32)
                ibs.setdefault(qid, []).append((buf.va + off, len(ib.dws)))
                for key, dw, lo, width, transform in ib.sites:
                    patches.add(key, buf.view, off + 4 * dw, lo, width, transform)
        patches.last.update(self._default_values())
        return _Variant(profile, buffers, ibs, patches)

    def _default_values(self) -> dict:
        """The values compile time wrote into every site (timeline sites hold placeholders: never equal)."""
        vals: dict[Any, Any] = {("buf", k): r.va for k, r in self._roots.items()}
        vals.update({("param", n): p.default for n, p in self.schedule.params.items()})
        vals.update({("scratch",) + k: va for k, va in self._scratch.items()})
        return vals

    def _encode_batch(self, qid: QueueId, q, index: int, steps: range, profile: bool) -> _IB:
        dev = self.devices[qid.device]
        ib = _IB(dev.family, dev.sdma_version, qid.engine)
        compute = qid.engine == "compute"
        if index == 0:  # the gate, then the first-use synchronisation with every device's timeline
            self._wait(ib, dev, self._addr(self._kick), 1)
            if "drop_timeline_sync" not in self.plan.mutations:  # (a mutation test's broken compiler)
                for d in range(len(self.devices)):
                    self._wait(ib, dev, 0, 0, patches={"addr": (("tl_addr", d), 0), "ref": (("tl_wait", d), 0)})
            self._barrier(ib, dev, compute)
            if q.entry_signal:
                self._signal(ib, dev, self._addr(self._slot_of[qid]), 1, wakes_host=True)
        drop_last_signal = "batch_split_drops_signal" in self.plan.mutations and index < len(q.batches) - 1
        for i in steps:
            step = q.steps[i]
            for w in step.waits:
                self._wait_for(ib, dev, w)
            if step.waits:
                self._barrier(ib, dev, compute)
            ts = self._addr(self._ts_of[step.op.index])
            if profile:
                self._timestamp(ib, dev, compute, ts)
            self._encode_op(ib, dev, step)
            if profile:
                self._timestamp(ib, dev, compute, ts + 8)
            if step.signal and not (drop_last_signal and i == steps[-1]):  # (the mutation: a broken compiler)
                self._signal(ib, dev, self._addr(self._slot_of[qid]), step.seq + 1, step.wakes_host)
        if index == len(q.batches) - 1 and q.finalizer is not None:
            for w in q.finalizer.waits:
                self._wait_for(ib, dev, w)
            cq = ComputeQueue(dev)  # finalizers run on compute queue 0: PM4
            ib.add(cq._release(0, 0, data_sel=1), {"addr": (("tl_addr", qid.device), 0),
                                                         "data": (("tl_final", qid.device), 0)})
            slot, event_id = dev.completion_slot()
            ib.add(cq._release(slot, event_id, data_sel=1, int_sel=2, ctxid=event_id))
        if not compute:  # SDMA IBs are padded to a multiple of 8 dwords (facts 5.2)
            pad = (-len(ib.dws)) % 8
            if pad:
                ib.add(sdma.nop(pad, dev.sdma_version))
        return ib

    # packet helpers: one place for each engine's form

    @staticmethod
    def _wait(ib: _IB, dev, addr: int, value: int, patches=None) -> None:
        packet = _wait_packet(ib.engine == "compute", dev.sdma_version, addr, value)
        if ib.engine == "compute":
            ib.add(packet, {"poll_addr": patches["addr"], "reference": patches["ref"]} if patches else ())
        else:
            ib.add(packet, {"addr": patches["addr"], "value": patches["ref"]} if patches else ())

    def _wait_for(self, ib: _IB, dev, w: Wait) -> None:
        self._wait(ib, dev, self._addr(self._slot_of[w.queue]), w.point + 1)

    @staticmethod
    def _barrier(ib: _IB, dev, compute: bool) -> None:
        """After waiting for another queue: make its writes visible here (facts 6.3; SDMA 6 GCR_REQ)."""
        key = (compute, dev.target, dev.family, dev.sdma_version, dev.node.props.get("num_sdma_engines", 1))
        packets = _BARRIERS.get(key)
        if packets is None:  # the same packets for every device of a kind: built once
            builder = ComputeQueue(dev) if compute else CopyQueue(dev)
            builder.memory_barrier()
            packets = _BARRIERS[key] = tuple(tuple(p) for p in builder.packets)
        for p in packets:
            ib.add(p)

    @staticmethod
    def _signal(ib: _IB, dev, addr: int, value: int, wakes_host: bool) -> None:
        slot, event_id = dev.completion_slot()
        if ib.engine == "compute":
            cq = ComputeQueue(dev)
            ib.add(cq._release(addr, value, data_sel=1))
            if wakes_host:  # mailbox, then interrupt: what wakes a KFD event waiter
                ib.add(cq._release(slot, event_id, data_sel=1, int_sel=2, ctxid=event_id))
        else:
            ib.add(sdma.fence(addr, value, dev.sdma_version))
            if wakes_host:
                ib.add(sdma.fence(slot, event_id, dev.sdma_version))
                ib.add(sdma.trap(event_id, dev.sdma_version))

    @staticmethod
    def _timestamp(ib: _IB, dev, compute: bool, addr: int) -> None:
        if compute:
            ib.add(ComputeQueue(dev)._release(addr, 0, data_sel=3))
        else:
            ib.add(sdma.timestamp_global(addr, dev.sdma_version))

    def _encode_op(self, ib: _IB, dev, step: Step) -> None:
        op, d = step.op, step.queue.device
        if op.kind == "kernel":
            k = op.program.kernel
            va, dispatch_ptr = self._kernarg_of[op.index]
            queue_ptr = va + ((k.kernarg_segment_size + 63) & ~63) + (P.AQL_PACKET_SIZE if dispatch_ptr else 0) \
                if k.enable_sgpr_queue_ptr else 0
            user = P.user_sgprs(k, dispatch_ptr, queue_ptr, va, dev.next_dispatch_id())
            scratch = (0, 0)
            if k.private_segment_fixed_size:
                tmpring, nbytes = P.scratch_layout(k.private_segment_fixed_size, dev.family)
                base = dev.scratch_memory(nbytes).va
                self._scratch[(d, nbytes)] = base
                scratch = (tmpring, base)
            scratch_reg = REGS["COMPUTE_DISPATCH_SCRATCH_BASE_LO"] - SH_BASE
            for packet in P.dispatch_packets(op.program, _launch_of(op), user, dev.family, scratch):
                if scratch[1] and (packet[0] >> 8) & 0xFF == pm4.OP["SET_SH_REG"] and packet[1] & 0xFFFF == scratch_reg:
                    key = ("scratch", d, nbytes)  # the device may grow (move) its scratch between runs
                    ib.add_raw_site(packet, 2, key, lambda v: (v >> 8) & 0xFFFFFFFF)
                    ib.add_raw_site(packet, 3, key, lambda v: v >> 40)
                ib.add(packet)
        elif op.kind == "copy":
            dk, sk = ("buf", id(op.dst.buffer)), ("buf", id(op.src.buffer))
            for off, n in chunks(op.nbytes, dev.copy_max_bytes):
                ib.add(sdma.copy_linear(op.dst.va + off, op.src.va + off, n, dev.sdma_version),
                       {"dst_addr": (dk, op.dst.offset + off), "src_addr": (sk, op.src.offset + off)})
        elif op.kind == "fill":
            value = op.value.default if isinstance(op.value, Param) else op.value
            dk = ("buf", id(op.dst.buffer))
            for off, n in chunks(op.nbytes, dev.copy_max_bytes):
                patches = {"dst_addr": (dk, op.dst.offset + off)}
                if isinstance(op.value, Param):
                    patches["data"] = (("param", op.value.name), lambda v: int(v) & 0xFFFFFFFF)
                ib.add(sdma.const_fill(op.dst.va + off, int(value) & 0xFFFFFFFF, n, 2, dev.sdma_version), patches)
        else:
            raise AssertionError(op.kind)

    # -- running ---------------------------------------------------------------------------------------

    def _bind(self, buffers, params) -> dict:
        """Site values for this run: bound buffers (checked), parameters, scratch bases."""
        values = self._default_values()
        names = {self.schedule.buffer_name(r): k for k, r in self._roots.items()}
        pairs = list(buffers.items()) if isinstance(buffers, Mapping) else list(buffers or ())
        bound: dict[int, Any] = {}
        for old, new in pairs:
            if isinstance(old, str):
                if old not in names:
                    raise KeyError(f"no buffer named {old!r} in this schedule (names: {sorted(names)})")
                key = names[old]
            else:
                key = id(as_region(old).buffer)
                if key not in self._roots:
                    raise KeyError(f"{old!r} is not used by this schedule")
            root = self._roots[key]
            if new.size < self._extent[key]:
                raise ValueError(f"{new!r} bound for {self.schedule.buffer_name(root)} holds {new.size} bytes; the "
                                 f"schedule uses {self._extent[key]}")
            if new.device is not root.device:
                raise ValueError(f"{new!r} bound for {self.schedule.buffer_name(root)} is on {new.device.label}, "
                                 f"the schedule was compiled for {root.device.label}")
            bound[key] = new
            values[("buf", key)] = new.va
        for key, root in self._roots.items():  # what this run touches must still exist (a freed buffer's memory
            buf = bound.get(key, root)  # may belong to someone else by now)
            if not buf.live:
                raise ValueError(f"schedule run: {self.schedule.buffer_name(root)} is {buf!r}, which was freed "
                                 f"({buf.allocation.freed_at}); bind a live buffer with run(buffers=...)")
        if bound:  # distinct buffers must stay distinct: the plan's hazards assumed they do not overlap
            spans = sorted((values[("buf", k)], values[("buf", k)] + self._extent[k], k) for k in self._roots)
            for (a0, a1, ka), (b0, b1, kb) in zip(spans, spans[1:]):
                if b0 < a1:
                    raise ValueError(f"bound buffers overlap ({self.schedule.buffer_name(self._roots[ka])} and "
                                     f"{self.schedule.buffer_name(self._roots[kb])}): the compiled waits assume "
                                     f"distinct memory")
            for key, new in bound.items():
                for d in self._mapped_on.get(key, ()):
                    _map(new, self.devices[d])
            self._check_host_ops_follow(bound)
        for name, v in (params or {}).items():
            if name not in self.schedule.params:
                raise KeyError(f"no parameter {name!r} (parameters: {sorted(self.schedule.params)})")
            values[("param", name)] = v
        for (d, nbytes) in self._scratch:
            values[("scratch", d, nbytes)] = self.devices[d].scratch_memory(nbytes).va
        self._bound = bound
        return values

    def _check_host_ops_follow(self, bound: dict) -> None:
        """host_write / host_read follow a rebinding; a host function of the caller's own cannot (it holds its
        buffers itself): refuse to rebind what one of those touches rather than run it on the old buffer."""
        for step in self.plan.steps:
            op = step.op
            if op.kind == "host" and not op.rebindable:
                for r in op.reads + op.writes:
                    if id(r.buffer) in bound:
                        raise ValueError(f"cannot rebind {self.schedule.buffer_name(r.buffer)}: host operation "
                                         f"#{op.index} ({op.name}) touches it through its own code, which would "
                                         f"still use the old buffer (use host_write / host_read)")

    def _host_view(self, r: Region):
        """The host view of a region in this run's binding (host_write / host_read)."""
        buf = self._bound.get(id(r.buffer))
        if buf is None:
            return _schedule_host_view(r)
        if buf.view is None:
            raise ValueError(f"host operation on {buf!r}: the buffer is not host visible")
        return buf.view[r.offset:r.end]

    def wait_idle(self) -> None:
        """Until the previous run finished (its command buffers may be patched again)."""
        for dev, sig, value in self._last_run:
            dev.wait_value(sig, value, f"previous run of the schedule (timeline {value})")
        self._last_run = []

    def run_async(self, *, buffers: Mapping | Iterable = (), params: Mapping | None = None,
                  profile: bool = False) -> tuple[Any, int]:
        """Launch once: patch, reset the schedule's signals, ring every queue. Host operations run here, in
        order, so with any this returns after the last. Returns (signal, value) that marks completion: device
        0's timeline. `buffers` rebinds buffers (name -> Buffer, or (old, new) pairs), `params` parameters."""
        if self.released:
            raise ValueError("this compiled schedule was released (its command buffers are freed); compile again")
        self.wait_idle()
        values = self._bind(buffers, params)
        variant = self._variant(profile)
        timeline = {}
        for d in sorted({f.device for f in self.plan.finalizers}):
            dev = self.devices[d]
            sig, v = dev.next_timeline()
            timeline[d] = (sig, v)
            values[("tl_addr", d)] = sig.value_addr
            values[("tl_wait", d)] = v - 1
            values[("tl_final", d)] = v
        self._map_timelines(timeline)
        if self.runs and self.plan.mutations & {"no_patch_on_rebind", "no_param_patch"}:
            values = self._stale(values)  # (a mutation test's broken compiler)
        self._kernargs.apply(values)
        variant.patches.apply(values)
        for qid in self.plan.queues:
            self._slot(qid).value = 0
        _Slot(self._addr(self._kick), self.devices[0].os.host_order).value = 0
        if profile:
            for d, off in self._ts_of.values():
                ctypes.memset(self._state[d].va + off, 0, SLOT)
        # every submit into its ring (round by round: each queue's first submits first), all held at the gate;
        # then the kick: the queues start together and no queue runs while the host still writes rings
        rounds = max(len(b) for b in variant.ibs.values())
        for r in range(rounds):
            for qid, ibs in variant.ibs.items():
                if r < len(ibs):
                    self._launch(qid, ibs[r], timeline if r == len(ibs) - 1 else {})
        _Slot(self._addr(self._kick), self.devices[0].os.host_order).value = 1
        self._run_host(values)
        self._last_run = [(self.devices[d], sig, v) for d, (sig, v) in timeline.items()]
        if not self.runs:
            self._first_values = values
        self.runs += 1
        self._profiled = profile
        return timeline[0]

    def _map_timelines(self, timeline: dict) -> None:
        """Every device's queues poll every other device's timeline signal: map its page there (once per signal;
        a device's timeline moves to its shadow signal when the value wraps)."""
        for e, (sig, _) in timeline.items():
            for d, dev in enumerate(self.devices):
                if d != e and (sig.va, d) not in self._timelines_mapped:
                    self.devices[e].map_to(sig, dev)
                    self._timelines_mapped.add((sig.va, d))

    def _stale(self, values: dict) -> dict:
        """What the "no_patch_on_rebind" / "no_param_patch" mutations patch after the first run: buffer
        addresses / parameters as the first run left them (a compiler that forgot to patch on replay)."""
        kinds = {k for m, k in (("no_patch_on_rebind", "buf"), ("no_param_patch", "param")) if m in self.plan.mutations}
        first = self._first_values
        return {k: first.get(k, v) if k[0] in kinds else v for k, v in values.items()}

    def _launch(self, qid: QueueId, ib: tuple[int, int], timeline: dict) -> None:
        dev = self.devices[qid.device]
        addr, ndw = ib
        fin = self.plan.queues[qid].finalizer
        released, signals = [], []
        if fin is not None and timeline:
            sig, v = timeline[fin.device]
            released, signals = [(sig, v)], [sig]
        if qid.engine == "compute":
            packets = [pm4.indirect_buffer(addr, ndw)]
        else:
            # INDIRECT must end on an 8-dword boundary of the ring: pad to 32 bytes, then 2 NOPs + INDIRECT
            put = dev.hardware_ring("copy", qid.index).put
            pad = (-put % 32) // 4
            packets = ([sdma.nop(pad, dev.sdma_version)] if pad else []) + \
                [[0, 0] + sdma.indirect(addr, ndw, dev.sdma_version)]
        dev.submit_packets(qid.engine, packets, signals, released, index=qid.index)

    def _run_host(self, values) -> None:
        host = QueueId(-1, "host", 0)
        q = self.plan.queues.get(host)
        if q is None:
            return
        slot = self._slot(host)
        for step in q.steps:
            for w in step.waits:
                dev = self.devices[w.queue.device]
                dev.wait_value(self._slot(w.queue), w.point + 1, f"host operation #{step.op.index} waiting for "
                                                                  f"{w.queue.label(self.devices)}")
            t0 = time.perf_counter()
            if step.op.rebindable:
                step.op.fn(self._host_view)
            else:
                step.op.fn()
            self.host_times[step.op.index] = (t0, time.perf_counter())
            for dev in _devices_of(step.op.writes):  # the GPU queues this releases read VRAM, not the HDP
                dev.hdp_flush()
            if step.signal:
                slot.value = step.seq + 1

    def run(self, *, buffers: Mapping | Iterable = (), params: Mapping | None = None, profile: bool = False):
        """Launch and wait for completion on every device. With `profile`, returns the Profile (also kept in
        `last_profile`): a timestamp pair per operation, mapped to host time."""
        self.run_async(buffers=buffers, params=params, profile=profile)
        self.wait_idle()
        if profile:
            from .profile import collect
            self.last_profile = collect(self)
            return self.last_profile
        return None

    def release(self) -> None:
        """Free the schedule's own memory (signal and timestamp state, kernarg segments, command buffers) for the
        devices to reuse; the schedule cannot run again. Only once no queue can still read it: every run waited for
        and every queue it ran on idle (a queue still blocked inside a command buffer would read reused memory).
        Peer mappings are undone first, so reused memory is mapped only where its next user maps it."""
        if self.released:
            return
        self.released = True
        own = list(self._state.values()) + list(self._kernarg_bufs.values())
        own += [b for v in self._variants.values() for b in v.buffers.values()]
        for buf in own:
            buf.device.unmap_peers(buf)
            buf.device.free(buf)

    # -- inspection ------------------------------------------------------------------------------------

    def describe(self) -> str:
        return describe(self.schedule, self.plan)

    def timestamps(self, op_index: int) -> tuple[int, int]:
        """(start, end) GPU ticks the last profiled run recorded for a GPU operation."""
        d, off = self._ts_of[op_index]
        va = self._state[d].va + off
        return ctypes.c_uint64.from_address(va).value, ctypes.c_uint64.from_address(va + 8).value

    @property
    def patch_sites(self) -> int:
        return len(self._kernargs) + sum(len(v.patches) for v in self._variants.values())


@functools.lru_cache(maxsize=4096)
def _wait_packet(compute: bool, sdma_version: str, addr: int, value: int) -> tuple[int, ...]:
    """A queue's wait for `addr` >= `value` (a schedule reuses its state slots' addresses: most are made before)."""
    if compute:
        return tuple(pm4.wait_reg_mem(addr, value, function=5))
    return tuple(sdma.poll_regmem(addr, value, mask=0xFFFFFFFF, func=5, version=sdma_version))


def _launch_of(op) -> P.Launch:
    gs, ls = op.global_size, op.local_size
    ndims = max(len(gs) if not isinstance(gs, int) else 1, len(ls) if not isinstance(ls, int) else 1)
    return P.Launch(P.launch_dims(gs), P.launch_dims(ls), ndims)


def _param_encoder(size: int, is_float: bool) -> Callable:
    def enc(v):
        v = float(v) if is_float else v
        return int.from_bytes(scalar_bytes(v, size), "little")
    return enc


def _devices_of(regions) -> list:
    """The devices whose memory `regions` lie in, each once, in order of first appearance."""
    return list({id(r.device): r.device for r in regions}.values())


def _map(alloc, dev) -> None:
    if alloc.device is not dev:
        alloc.device.map_to(alloc, dev)
