"""The Chrome / Perfetto trace-event format (JSON object form): building, checking and writing timelines.

Both sides use it: the runtime's schedule profiles (hcqsim.runtime.profile) and the emulator's own packet
trace (`from_trace_lines` on `EmulatedGPU.trace_lines()`), so the two open side by side in
https://ui.perfetto.dev or chrome://tracing. Times are microseconds. Tracks are (pid, tid): one process per
device, one thread per hardware queue.
"""
from __future__ import annotations

import json
from typing import Iterable

PHASES = {"X", "B", "E", "i", "I", "s", "t", "f", "M", "C"}


def metadata(pid: int, name: str, tid: int | None = None) -> dict:
    """Name a process (device) or, with `tid`, a thread (queue) track."""
    if tid is None:
        return {"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": name}}
    return {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}}


def complete(name: str, pid: int, tid: int, ts: float, dur: float, cat: str = "op", args: dict | None = None) -> dict:
    """A slice of `dur` microseconds starting at `ts`."""
    return {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": ts, "dur": max(dur, 0.0),
            "args": args or {}}


def instant(name: str, pid: int, tid: int, ts: float, cat: str = "event", args: dict | None = None) -> dict:
    return {"ph": "i", "s": "t", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": ts, "args": args or {}}


def flow(flow_id: int, name: str, src: tuple[int, int, float], dst: tuple[int, int, float],
         cat: str = "wait") -> list[dict]:
    """An arrow from the slice enclosing `src` (pid, tid, ts) to the slice enclosing `dst`."""
    return [{"ph": "s", "id": flow_id, "name": name, "cat": cat, "pid": src[0], "tid": src[1], "ts": src[2]},
            {"ph": "f", "bp": "e", "id": flow_id, "name": name, "cat": cat, "pid": dst[0], "tid": dst[1],
             "ts": dst[2]}]


def document(events: Iterable[dict]) -> dict:
    return {"traceEvents": list(events), "displayTimeUnit": "ns"}


def validate(doc: dict) -> None:
    """ValueError unless `doc` is a well-formed trace-event document: the keys each phase needs, numeric
    times, non-negative durations, every flow start with a finish of the same id."""
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise ValueError("a trace-event document is an object with a traceEvents list")
    starts, finishes = set(), set()
    for i, e in enumerate(doc["traceEvents"]):
        where = f"traceEvents[{i}]"
        if not isinstance(e, dict) or e.get("ph") not in PHASES:
            raise ValueError(f"{where}: unknown phase {e.get('ph') if isinstance(e, dict) else e!r}")
        for key in ("pid", "tid", "name"):
            if key not in e:
                raise ValueError(f"{where}: missing {key!r}")
        if e["ph"] != "M" and not isinstance(e.get("ts"), (int, float)):
            raise ValueError(f"{where}: ts must be a number of microseconds")
        if e["ph"] == "X" and not (isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0):
            raise ValueError(f"{where}: a complete event needs a non-negative dur")
        if e["ph"] == "s":
            starts.add(e["id"])
        if e["ph"] == "f":
            finishes.add(e["id"])
    if starts != finishes:
        raise ValueError(f"flow ids without both ends: {sorted(starts ^ finishes)}")


def write(path: str, events: Iterable[dict]) -> str:
    doc = document(events)
    validate(doc)
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def from_trace_lines(lines: Iterable[str], pid: int = 0, process: str = "GPU", ticks_per_us: float = 100.0,
                     queue_tids: dict[str, int] | None = None) -> list[dict]:
    """The emulator's trace (`EmulatedGPU.trace_lines()`: "<clock> <queue> <what>") as trace events: each
    packet a slice on its queue's track lasting until that queue's next entry, writes, copies, interrupts
    and faults as instants. Clock ticks are 100 MHz (10 ns). One GPU's trace is on that GPU's virtual clock,
    which counts only its own work and stands still while its queues wait: the traces of two GPUs of one system
    are not on one time base (a schedule profile is: hcqsim.runtime.profile)."""
    tids = {} if queue_tids is None else queue_tids
    parsed = []
    for line in lines:
        parts = line.split(None, 2)
        if len(parts) < 3:
            continue
        parsed.append((int(parts[0]), parts[1], parts[2]))
    events = [metadata(pid, process)]
    pending: dict[str, tuple[int, str]] = {}  # queue -> (start clock, packet text) of its open packet slice

    def tid_of(q: str) -> int:
        if q not in tids:
            tids[q] = len(tids) + 1
            events.append(metadata(pid, q, tids[q]))
        return tids[q]

    def close(q: str, until: int) -> None:
        if q in pending:
            t0, text = pending.pop(q)
            words = text.split()  # "ring+0x0010 NAME fields" or "IB at 0x...+0x0010 NAME fields"
            name = words[3] if words[0] == "IB" and len(words) > 3 else words[1] if len(words) > 1 else text
            events.append(complete(name, pid, tid_of(q),
                                   t0 / ticks_per_us, max(until - t0, 1) / ticks_per_us, "packet", {"packet": text}))

    for t, q, what in parsed:
        kind = what.split()[0]
        if kind.startswith(("ring+", "IB")):
            close(q, t)
            pending[q] = (t, what)
        else:
            events.append(instant(kind, pid, tid_of(q), t / ticks_per_us, kind, {"detail": what}))
    end = max((t for t, _, _ in parsed), default=0)
    for q in list(pending):
        close(q, end + 1)
    return events
