"""Happens-before between the agents of one machine (report mode): vector clocks, so that a cache operation counts
as protecting a load only where it is ordered between the access that made the copy (or the dirty bytes) and the
reader, whatever order this one run happened to execute them in.

Agents (each a component of every clock): the host (0), and per queue two -- the queue's command processor (its
packets) and its *dispatch lane* (the dispatches it launched: dispatch number k is event k of the lane). A
queue's clock names the lane up to the dispatches known finished (a partial flush, a barrier, a wait satisfied
with nothing running); an end-of-pipe event's clock names every dispatch launched before it. Dispatches of one
queue are one lane because what is known of them is always a prefix (every wait on them waits for all earlier
ones); an AQL completion signal taken as covering the earlier dispatches of its queue too is the weaker reading.

An event's epoch is (agent, clock): it happened before whatever has a clock naming that agent at least that far.
Releases publish a copy of the releasing agent's clock with the bytes they wrote (`store`), then the agent's own
component advances, so its later events are not covered. An acquire (a wait satisfied on an address, the host
reading a signal) joins the published clock of the write whose bytes it observes (`observe`); bytes no recorded
write left there (a CPU store the runtime did not report, a shader store) join every clock: the weaker reading,
so an ordering the model cannot see never becomes a report.

The cache model (coherence.model) keeps, per line, the epoch of the access that filled it and of the store that
dirtied it; an invalidate drops, and a write-back cleans, only what its clock covers.
"""
from __future__ import annotations

import numpy as np

HOST = 0  # the host's agent id
MULTI = -2  # a GL2 line dirtied by stores of several agents: any write-back cleans it (the weaker reading)


def join(into: dict, other: dict) -> None:
    """Componentwise maximum, in place."""
    for k, v in other.items():
        if into.get(k, 0) < v:
            into[k] = v


class Order:
    """The clocks of one machine (one per EmulatedSystem, shared by its GPUs; one per lone EmulatedGPU)."""

    def __init__(self):
        self.names = ["the host"]
        self.host: dict[int, int] = {HOST: 1}
        self.latest: dict[int, int] = {HOST: 1}  # every agent's highest clock: "everything so far"
        self.sync: dict[int, tuple[bytes, dict]] = {}  # dword address -> (the 4 bytes a release wrote, its clock)
        self.context = None  # (clock, agent, counter) of an end-of-pipe action being performed
        self.precise_host = False  # the host reports its signal reads and writes (the runtime's host_order hook)
        self.stats = {"releases": 0, "acquires": 0, "unknown": 0}
        self._array = None  # (key, array) of the last clock made an array

    # -- agents ----------------------------------------------------------------------------------------

    def agent(self, name: str) -> int:
        self.names.append(name)
        return len(self.names) - 1

    def ids(self, q) -> tuple[int, int]:
        """(command-processor agent, dispatch lane) of queue `q` (made on first use; its clock starts at 1). The
        queue keeps them in its declared fields `hb_ids` and `hb_clock` (engines.queue.EngineQueue; None until then)."""
        ids = q.hb_ids
        if ids is None:
            ids = q.hb_ids = (self.agent(f"queue {q.name}"), self.agent(f"queue {q.name} dispatches"))
            q.hb_clock = {ids[0]: 1}
            self.latest[ids[0]] = 1
        return ids

    def clock(self, q) -> dict:
        """The live clock of queue `q`'s command processor."""
        if q.hb_ids is None:
            self.ids(q)
        return q.hb_clock

    def tick(self, q) -> None:
        """Queue `q` released: its later events are not covered by what it published."""
        qid = self.ids(q)[0]
        c = q.hb_clock
        c[qid] += 1
        self.latest[qid] = c[qid]

    def launched(self, q, seq: int) -> tuple[dict, int, int]:
        """Dispatch `seq` of `q` starts: its (clock, lane, counter). The clock is the queue's now, with the lane up to
        this dispatch (its own accesses; earlier undrained ones of the lane too -- the weaker reading)."""
        qid, lane = self.ids(q)
        vc = dict(q.hb_clock)
        vc[lane] = max(vc.get(lane, 0), seq + 1)
        if self.latest.get(lane, 0) < seq + 1:
            self.latest[lane] = seq + 1
        return vc, lane, seq + 1

    def drained(self, q, launched: int) -> None:
        """Queue `q`'s later packets are ordered after its first `launched` dispatches."""
        lane = self.ids(q)[1]
        c = q.hb_clock
        if c.get(lane, 0) < launched:
            c[lane] = launched

    def end_of_pipe(self, q, launched: int) -> tuple[dict, int, int]:
        """The context of an end-of-pipe action queued now: the queue's clock with the lane up to every dispatch
        launched before it. The queue's own component then advances (what follows is not before the action)."""
        qid, lane = self.ids(q)
        vc = dict(q.hb_clock)
        if vc.get(lane, 0) < launched:
            vc[lane] = launched
        ctx = (vc, qid, vc[qid])
        self.tick(q)
        return ctx

    # -- releases and acquires ---------------------------------------------------------------------------

    def store(self, address: int, data: bytes, vc: dict) -> None:
        """A small write (a signal, a flag) with clock `vc`: published per dword. A later write to the dword keeps
        the earlier one's clock too (a release sequence through read-modify-writes; for plain stores the weaker
        reading)."""
        self.stats["releases"] += 1
        snap = dict(vc)
        for off in range(0, len(data) - 3, 4):
            a = address + off
            old = self.sync.get(a)
            if old is not None:
                merged = dict(old[1])
                join(merged, snap)
                self.sync[a] = (bytes(data[off:off + 4]), merged)
            else:
                self.sync[a] = (bytes(data[off:off + 4]), snap)

    def observe(self, vc: dict, address: int, current: bytes | None) -> None:
        """An agent with clock `vc` observed the dword at `address` holding `current`: it acquires the clock of the
        recorded write of those bytes, or everything when no recorded write explains them."""
        self.stats["acquires"] += 1
        rec = self.sync.get(address & ~3)
        if rec is not None and current is not None and rec[0] == current:
            join(vc, rec[1])
            return
        self.stats["unknown"] += 1
        join(vc, self.latest)

    def doorbell(self, q) -> None:
        """The host rang `q`'s doorbell: the packets it publishes are ordered after what the host knows (with no
        report of the host's reads, after everything: the weaker reading)."""
        join(self.clock(q), self.host if self.precise_host else self.latest)

    def host_release(self, address: int, data: bytes) -> None:
        self.precise_host = True
        self.store(address, data, self.host)
        self.host[HOST] += 1
        self.latest[HOST] = self.host[HOST]

    def host_acquire(self, address: int, current: bytes | None) -> None:
        self.precise_host = True
        self.observe(self.host, address, current)

    def host_join(self, vc: dict) -> None:
        join(self.host, vc)

    # -- checks ------------------------------------------------------------------------------------------

    def array(self, vc: dict) -> np.ndarray:
        """`vc` as an array indexed by agent id (absent agents 0; read-only: the last one is reused while the clock
        and the agents are unchanged, as for the levels of one packet's cache actions)."""
        key = (len(self.names), tuple(vc.items()))
        if self._array is not None and self._array[0] == key:
            return self._array[1]
        arr = np.zeros(len(self.names) + 1, np.int64)
        if vc:
            arr[np.fromiter(vc.keys(), np.int64, len(vc))] = np.fromiter(vc.values(), np.int64, len(vc))
        arr.flags.writeable = False
        self._array = (key, arr)
        return arr

    @staticmethod
    def covered(arr: np.ndarray, agents: np.ndarray, clocks: np.ndarray) -> np.ndarray:
        """Per event (agents[i], clocks[i]): whether the clock `arr` covers it. Events with no epoch (agent < 0:
        not recorded, or several writers) count as covered."""
        ok = agents < 0
        known = ~ok
        if known.any():
            a = agents[known]
            ok[known] = arr[np.minimum(a, len(arr) - 1)] >= clocks[known]
        return ok
