"""Compiling a schedule: queue assignment, waits, signals, submits, device synchronisation, finalizers.

`plan(schedule)` walks the operations in program order and decides, without encoding a packet:
- which hardware queue runs each operation (`_assign`),
- which waits each needs: one per producer queue, on the latest of its operations this one depends on,
  dropped when the queue already knows (directly or through an earlier wait) that the producer got there,
- which operations signal (only those something waits for) and which of those wake the host,
- how a queue's operations are cut into submits (`batch_limit`, doubling),
- one finalizer per device of the schedule that waits for every queue that ran on or touched it and advances
  that device's timeline.
Every GPU queue starts after the timelines of all the schedule's devices (replay encodes those waits), so
work still in flight on any of them -- a peer copy into another device's memory included -- comes first.
The rules, with the reasons and what is left conservative, are in docs/schedule.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .hazards import Hazard, HazardTracker, Region
from .schedule import Operation

MAX_BATCH = 4096  # operations per submit at most, however often the limit doubled

# Deliberately broken rules, for the schedule fuzzer's mutation tests only (tests/test_schedule_mutants.py sets them
# through hcqsim.strategies.mutated): the fuzzer must catch each. Empty in normal use; a plan takes the set that is
# active when it is made, so a compiled schedule keeps its behaviour (replay reads `Plan.mutations`).
MUTATIONS = {
    "ignore_war": "write-after-read hazards are not tracked",
    "ignore_waw": "write-after-write hazards are not tracked",
    "range_end_inclusive": "a range's end is computed as offset + size - 1 and used as exclusive: its last byte is "
                           "not tracked",
    "elide_cross_queue_wait": "an operation's first cross-queue wait is left out",
    "drop_cross_device_wait": "dependency waits on a queue of another device are left out",
    "wait_older_signal": "waits target the producer's previous operation",
    "knowledge_from_current_state": "a wait teaches the waiter what the producer knows now, not what it knew at "
                                    "the awaited point",
    "drop_timeline_sync": "queues do not wait for the device timelines at their start",
    "batch_split_drops_signal": "the last operation of a submit that is not its queue's last does not signal",
    "no_patch_on_rebind": "buffer addresses are patched into the command buffers only on the first run",
    "no_param_patch": "parameters are patched into the command buffers only on the first run",
}
active_mutations: frozenset[str] = frozenset()


@dataclass(frozen=True)
class QueueId:
    device: int  # index into schedule.devices; -1 for the host
    engine: str  # compute, copy or host
    index: int

    # a dict key in every table of the planner and the replay: the hash (the dataclass' own value, the fields'
    # tuple's) is made once, and equality compares that tuple
    def __post_init__(self):
        key = (self.device, self.engine, self.index)
        object.__setattr__(self, "_key", key)
        object.__setattr__(self, "_hash", hash(key))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        if other.__class__ is self.__class__:
            return self._key == other._key
        return NotImplemented

    @property
    def is_host(self) -> bool:
        return self.engine == "host"

    def label(self, devices) -> str:
        if self.is_host:
            return "host"
        return f"{devices[self.device].label} {self.engine}{self.index}"


@dataclass
class Wait:
    """The waiting queue stalls until `queue` reached `point` (0: its start, n: its n-th operation)."""

    queue: QueueId
    point: int
    reason: str  # "dependency" or "device-sync"
    hazards: list[Hazard] = field(default_factory=list)  # for a dependency: what caused it
    device: int | None = None  # for a device-sync: whose memory is first touched


@dataclass
class Step:
    op: Operation
    queue: QueueId
    seq: int  # 1-based position on its queue
    waits: list[Wait]
    elided: list[tuple[Hazard, str]]  # dependencies that needed no wait, and why
    signal: bool = False  # something waits for this operation
    wakes_host: bool = False  # the host waits for it: signal with an interrupt


@dataclass
class PlannedQueue:
    id: QueueId
    steps: list[Step] = field(default_factory=list)
    entry_signal: bool = False  # someone waits for point 0 (this device's entry)
    touched: set = field(default_factory=set)  # devices whose memory this queue touches
    batches: list[range] = field(default_factory=list)  # step index ranges, one submit each
    finalizer: "Finalizer | None" = None


@dataclass
class Finalizer:
    device: int
    queue: QueueId
    waits: list[Wait]
    primary: bool  # waits for every queue of the schedule: its timeline value is run_async's result


@dataclass
class Plan:
    devices: list
    queues: dict[QueueId, PlannedQueue]
    steps: list[Step]  # by operation index
    finalizers: list[Finalizer]
    mutations: frozenset = frozenset()  # MUTATIONS in effect (tests only)

    @property
    def dependency_waits(self) -> list[Wait]:
        return [w for s in self.steps for w in s.waits if w.reason == "dependency"]

    @property
    def sync_waits(self) -> list[Wait]:
        return [w for s in self.steps for w in s.waits if w.reason == "device-sync"]

    @property
    def signals(self) -> int:
        return sum(s.signal for s in self.steps) + sum(q.entry_signal for q in self.queues.values())

    @property
    def submits(self) -> int:
        return sum(len(q.batches) for q in self.queues.values())


def entry_queue(device: int) -> QueueId:
    """Each device's entry and finalizer queue: its compute queue 0."""
    return QueueId(device, "compute", 0)


class _Planner:
    def __init__(self, schedule):
        self.s = schedule
        self.devices = schedule.devices
        self.dev_index = {id(d): i for i, d in enumerate(self.devices)}
        self.queues: dict[QueueId, PlannedQueue] = {}
        self.known: dict[QueueId, dict[QueueId, int]] = {}  # queue -> producer -> highest point known reached
        self.synced: dict[QueueId, set[int]] = {}  # devices whose earlier timeline work the queue is after
        self.snap: dict[tuple[QueueId, int], tuple[dict, frozenset]] = {}  # knowledge at each point
        self.steps: list[Step] = []
        self.tracker = HazardTracker()
        self.mutations = frozenset(active_mutations)

    def queue(self, qid: QueueId) -> PlannedQueue:
        q = self.queues.get(qid)
        if q is None:
            q = self.queues[qid] = PlannedQueue(qid)
            self.known[qid] = {}
            # a GPU queue starts by waiting for every device's timeline (the first-use synchronisation): work in
            # flight on any of them, on its own memory or as a peer write into another's, is done first
            self.synced[qid] = set() if qid.is_host else set(range(len(self.devices)))
            self.snap[(qid, 0)] = ({qid: 0}, frozenset(self.synced[qid]))
        return q

    def device_of(self, dev) -> int:
        try:
            return self.dev_index[id(dev)]
        except KeyError:
            raise ValueError(f"{dev.label} is used by the schedule but not one of its devices") from None

    def _assign(self, op: Operation, hazards: list[Hazard]) -> QueueId:
        """Host operations on the host queue; kernels on a compute queue of their device, copies and fills on
        a copy queue of their (source) device. Among those: the caller's choice; else a queue whose last
        operation is one this one depends on (the chain continues without a wait); else the least loaded."""
        if op.engine == "host":
            return QueueId(-1, "host", 0)
        d = self.device_of(op.device)
        limit = self.s.compute_queues if op.engine == "compute" else self.s.copy_queues
        n = max(1, min(limit, op.device.queue_count(op.engine)))
        if op.queue_hint is not None:
            if not 0 <= op.queue_hint < n:
                raise ValueError(f"operation {op.index} ({op.name}) asks for {op.engine} queue {op.queue_hint}; "
                                 f"the schedule uses {n}")
            return QueueId(d, op.engine, op.queue_hint)
        cands = [QueueId(d, op.engine, i) for i in range(n)]
        producers = {h.producer for h in hazards}
        best, best_op = None, -1
        for c in cands:
            q = self.queues.get(c)
            if q and q.steps and q.steps[-1].op.index in producers and q.steps[-1].op.index > best_op:
                best, best_op = c, q.steps[-1].op.index
        if best is not None:
            return best
        return min(cands, key=lambda c: (len(self.queues[c].steps) if c in self.queues else 0, c.index))

    def _reduce(self, need: dict[QueueId, tuple[int, str, list, int | None]]) -> list[Wait]:
        """Drop a wait that another of the waits already implies (its producer had itself waited for it)."""
        keep = []
        items = sorted(need.items(), key=lambda kv: (-kv[1][0], kv[0].device, kv[0].engine, kv[0].index))
        for pq, (point, reason, hz, dev) in items:
            implied = any(self.snap[(oq, op_)][0].get(pq, -1) >= point
                          for oq, (op_, _, _, _) in items if oq != pq and (oq, op_) in self.snap)
            if not implied:
                keep.append(Wait(pq, point, reason, hz, dev))
        return keep

    def _mutate(self, qid: QueueId, waits: list[Wait]) -> list[Wait]:
        """The waits a broken compiler would emit, believing it emitted `waits` (mutation tests only)."""
        if "elide_cross_queue_wait" in self.mutations:
            waits = waits[1:]
        if "drop_cross_device_wait" in self.mutations and not qid.is_host:
            waits = [w for w in waits if w.queue.is_host or w.queue.device == qid.device]
        if "wait_older_signal" in self.mutations:
            waits = [Wait(w.queue, w.point - 1, w.reason, w.hazards, w.device) for w in waits]
            for w in waits:
                self._mark_signal(w.queue, w.point, waiter_is_host=qid.is_host)
        return waits

    def _learn(self, qid: QueueId, waits: list[Wait]) -> None:
        known, synced = self.known[qid], self.synced[qid]
        for w in waits:
            k, sdevs = self.snap[(w.queue, w.point)]
            if "knowledge_from_current_state" in self.mutations:  # (a mutation test's broken compiler)
                k, sdevs = self.known[w.queue] | {w.queue: w.point}, frozenset(self.synced[w.queue])
            for p, v in k.items():
                if known.get(p, -1) < v:
                    known[p] = v
            synced |= sdevs
            self._mark_signal(w.queue, w.point, waiter_is_host=qid.is_host)

    def _mark_signal(self, pq: QueueId, point: int, waiter_is_host: bool) -> None:
        q = self.queues[pq]
        if point == 0:
            q.entry_signal = True
            return
        step = q.steps[point - 1]
        step.signal = True
        step.wakes_host |= waiter_is_host

    def add(self, op: Operation) -> None:
        reads, writes = op.reads, op.writes
        if "range_end_inclusive" in self.mutations:  # (a mutation test's broken compiler)
            reads, writes = [_last_byte_lost(r) for r in reads], [_last_byte_lost(r) for r in writes]
        hazards = self.tracker.hazards(op.index, reads, writes, war="ignore_war" not in self.mutations,
                                       waw="ignore_waw" not in self.mutations)
        qid = self._assign(op, hazards)
        q = self.queue(qid)
        seq = len(q.steps) + 1
        need: dict[QueueId, tuple[int, str, list, int | None]] = {}
        elided = []
        known = self.known[qid]
        for h in hazards:
            prod = self.steps[h.producer]
            if prod.queue == qid:
                elided.append((h, "same queue (it runs in order)"))
            elif known.get(prod.queue, -1) >= prod.seq:
                elided.append((h, f"{prod.queue.label(self.devices)} already waited for"))
            else:
                point, _, hz, _ = need.get(prod.queue, (0, "", [], None))
                if prod.seq > point:
                    need[prod.queue] = (prod.seq, "dependency", [h], None)
                elif prod.seq == point:
                    hz.append(h)
                else:
                    elided.append((h, f"a later operation of {prod.queue.label(self.devices)} is waited for"))
        waits = self._reduce(need)
        self._learn(qid, waits)
        if self.mutations:
            waits = self._mutate(qid, waits)
        # first touch of another device's memory: wait until that device's entry queue has passed its
        # timeline wait (unless a producer this queue waited for had done so)
        touched = {self.device_of(r.device) for r in op.reads + op.writes}
        syncs = [Wait(entry_queue(d), 0, "device-sync", [], d) for d in sorted(touched - self.synced[qid])]
        for w in syncs:
            self.queue(w.queue)
        self._learn(qid, syncs)
        waits += syncs
        self.synced[qid] |= touched
        q.touched |= touched
        step = Step(op, qid, seq, waits, elided)
        q.steps.append(step)
        self.steps.append(step)
        snap_known = dict(known)
        snap_known[qid] = seq
        self.snap[(qid, seq)] = (snap_known, frozenset(self.synced[qid]))
        self.tracker.record(op.index, qid, reads, writes)

    def finish(self) -> Plan:
        # every device of the schedule gets a finalizer: its timeline advances past the schedule, and its entry
        # queue is where the others' timeline waits are (so even a device the operations never use counts)
        finalizers = []
        for d in range(len(self.devices)):
            fq = entry_queue(d)
            self.queue(fq)
            primary = d == 0
            need = {}
            for q in self.queues.values():
                if q.id == fq or not q.steps:
                    continue
                if primary or q.id.device == d or d in q.touched:
                    last = len(q.steps)
                    if self.known[fq].get(q.id, -1) < last:
                        need[q.id] = (last, "dependency", [], None)
            waits = self._reduce(need)
            self._learn(fq, waits)
            fin = Finalizer(d, fq, waits, primary)
            self.queues[fq].finalizer = fin
            finalizers.append(fin)
        for q in self.queues.values():
            q.batches = [] if q.id.is_host else _batches(len(q.steps), self.s.batch_limit)
        return Plan(self.devices, self.queues, self.steps, finalizers, self.mutations)


def _last_byte_lost(r: Region) -> Region:
    """The "range_end_inclusive" mutation: [offset, offset + size - 1] taken as a half-open range."""
    return Region(r.buffer, r.offset, max(r.size - 1, 0))


def _batches(n: int, limit: int) -> list[range]:
    """Consecutive operations in submits of `limit`, 2*limit, 4*limit, ... (at most MAX_BATCH); a queue with
    no operations (an entry/finalizer queue) still has one submit."""
    out, start = [], 0
    while start < n or not out:
        end = min(n, start + limit)
        out.append(range(start, end))
        start, limit = end, min(limit * 2, MAX_BATCH)
    return out


def plan(schedule) -> Plan:
    p = _Planner(schedule)
    for op in schedule.ops:
        p.add(op)
    return p.finish()


# ---------------------------------------------------------------------------------------------------
# describe


def _range_text(schedule, r) -> str:
    return f"{schedule.buffer_name(r.buffer)}[{r.offset}:{r.end}]"


def _op_text(schedule, op: Operation) -> str:
    parts = [f"#{op.index} {op.kind} {op.name}"]
    if op.reads:
        parts.append("reads " + ", ".join(_range_text(schedule, r) for r in op.reads))
    if op.writes:
        parts.append("writes " + ", ".join(_range_text(schedule, r) for r in op.writes))
    return "  ".join(parts)


def _wait_text(schedule, plan_: Plan, w: Wait) -> str:
    who = w.queue.label(plan_.devices)
    if w.reason == "device-sync":
        return f"wait {who} >= start  (first use of {plan_.devices[w.device].label} memory on this queue)"
    if not w.hazards:
        return f"wait {who} >= #{plan_.queues[w.queue].steps[w.point - 1].op.index} (its last operation)"
    h = w.hazards[0]
    more = f" (+{len(w.hazards) - 1} more)" if len(w.hazards) > 1 else ""
    return (f"wait {who} >= #{h.producer}  because #{h.consumer} {h.kind} "
            f"{schedule.buffer_name(h.buffer)}[{h.lo}:{h.hi}] with #{h.producer}{more}")


def describe(schedule, plan_: Plan) -> str:
    """The queues, the operations on each in order, every inserted wait with the dependency that caused it,
    signals, submits and finalizers."""
    devs = plan_.devices
    lines = [f"schedule: {len(plan_.steps)} operations on {len(plan_.queues)} queues of {len(devs)} device(s); "
             f"{len(plan_.dependency_waits)} dependency waits, {len(plan_.sync_waits)} device-sync waits, "
             f"{plan_.signals} signals, {plan_.submits} submits; every GPU queue starts after every device's timeline"]
    for qid, q in plan_.queues.items():
        head = f"{qid.label(devs)}:"
        if not qid.is_host:
            head += f" {len(q.steps)} ops in {len(q.batches)} submit(s) of {[len(b) for b in q.batches]}"
        lines.append(head)
        if q.entry_signal:
            lines.append("    signal start (other devices' queues wait for it)")
        for step in q.steps:
            for w in step.waits:
                lines.append("    " + _wait_text(schedule, plan_, w))
            tail = "  -> signal" + (" (wakes host)" if step.wakes_host else "") if step.signal else ""
            lines.append(f"  {_op_text(schedule, step.op)}{tail}")
        if q.finalizer:
            f = q.finalizer
            for w in f.waits:
                lines.append("    " + _wait_text(schedule, plan_, w))
            lines.append(f"  finalizer: signal {devs[f.device].label} timeline"
                         + (" (completion of the whole schedule)" if f.primary else ""))
    elided = [(s.op.index, h, why) for s in plan_.steps for h, why in s.elided]
    if elided:
        lines.append(f"no wait needed for {len(elided)} dependencies:")
        for _, h, why in elided[:20]:
            lines.append(f"  #{h.consumer} {h.kind} {schedule.buffer_name(h.buffer)}[{h.lo}:{h.hi}] with "
                         f"#{h.producer}: {why}")
        if len(elided) > 20:
            lines.append(f"  ... {len(elided) - 20} more")
    return "\n".join(lines)
