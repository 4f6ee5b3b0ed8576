"""Report mode: what is ordered before what, as the cache model sees it. The happens-before clocks of the agents
(coherence.order: the host, each queue's command processor and dispatch lane) as the accessor of the moment, and
the dispatches of a queue not yet fenced by a partial flush (their footprints, for the "no partial flush" reports).
`Ordering` is a part of `CacheModel` (coherence.model): `CacheModel.__init__` sets the state it uses."""
from __future__ import annotations

import numpy as np

from ..memory import AddressSpace
from .lines import LINE_SHIFT
from .order import HOST, Order


class Ordering:
    """Happens-before and partial-flush bookkeeping (a part of `CacheModel`)."""

    # -- happens-before (report mode) ---------------------------------------------------------------------

    def hb_now(self) -> tuple[dict, int, int]:
        """(clock, agent, counter) of whoever accesses memory now: an end-of-pipe action being performed, a
        dispatch (its launch clock), a queue's command processor (or its CP DMA), else the host."""
        order = self.order
        if order.context is not None:
            return order.context
        a = self.agent
        if a is None:
            return order.host, HOST, order.host[HOST]
        if a.kind == "dispatch":
            e = a.hb_epoch
            if e is not None:
                return e
            a = a.queue
        q = a if a.kind == "queue" else a.queue
        vc = order.clock(q)
        qid = q.hb_ids[0]
        return vc, qid, vc[qid]

    def hb_snapshot(self) -> dict:
        """A copy of the current accessor's clock (what an interrupt raised now carries to the host)."""
        return dict(self.hb_now()[0])

    def acquired(self, queue, address: int) -> None:
        """`queue` observed the dword at `address` (a wait satisfied, a poll passed): it acquires its writer's clock."""
        if not self.hb:
            return
        try:
            cur = AddressSpace.read(self.gpu.memory, address & ~3, 4)
        except Exception:  # an unmapped address faults elsewhere; nothing is learnt here
            cur = None
        self.order.observe(self.order.clock(queue), address, cur)

    def end_of_pipe(self, queue, action):
        """`action` (a RELEASE_MEM's work) queued now, performed once earlier dispatches finished: it runs with the
        clock it has now, covering every dispatch launched before it."""
        if not self.hb:
            return action
        ctx = self.order.end_of_pipe(queue, queue.launched)
        order = self.order

        def run():
            saved, order.context = order.context, ctx
            try:
                action()
            finally:
                order.context = saved
        return run

    def _published(self, address: int, data: np.ndarray) -> None:
        """An engine's small write (a signal, a fence, a flag): a release of the writer's clock."""
        vc, _, _ = self.hb_now()
        self.order.store(address, data.tobytes(), vc)
        a = self.agent
        if self.order.context is None and a is not None and a.kind != "dispatch":
            self.order.tick(a if a.kind == "queue" else a.queue)

    def _hb_filter(self, agents: np.ndarray, clocks: np.ndarray) -> np.ndarray:
        """Per event: covered by the current accessor's clock."""
        return Order.covered(self.order.array(self.hb_now()[0]), agents, clocks)

    def as_agent(self, agent, fn):
        """Call `fn()` with `agent` as the accessing activity (a queue's wait re-checked by the scheduler)."""
        saved, self.agent = self.agent, agent
        try:
            return fn()
        finally:
            self.agent = saved

    # -- partial-flush hazards (report mode) --------------------------------------------------------------

    def _footprint(self, dispatch, st, lines, write: bool, reader) -> None:
        fp = self.footprints.get(dispatch)
        if fp is None:
            return
        reads, writes, peers = fp
        keys = (lines + (st.start >> LINE_SHIFT)).tolist()
        (writes if write else reads).update(keys)
        for peer in peers:
            pfp = self.footprints.get(peer)
            if pfp is None:
                continue
            pr, pw = pfp[0], pfp[1]
            hit = [k for k in keys if k in pw or (write and k in pr)]
            if hit:
                who = reader() if callable(reader) else reader
                first, last = min(hit) << LINE_SHIFT, (max(hit) + 1) << LINE_SHIFT
                self.report("no partial flush", first, last - first, f"{peer.name} (kernel at "
                            f"0x{peer.d.pgm_addr:x})" if hasattr(peer, "d") else str(peer), who, "CS_PARTIAL_FLUSH",
                            detail="two dispatches of one queue touch the same lines, one writing, with no "
                                   "CS_PARTIAL_FLUSH (or barrier) between them: they may run at the same time")

    # -- partial-flush bookkeeping (report mode) ----------------------------------------------------------

    def launched(self, queue, dispatch) -> None:
        """A dispatch starts: it may overlap every dispatch of its queue launched since the last partial flush."""
        if self.hb and dispatch is not None:
            dispatch.hb_epoch = self.order.launched(queue, dispatch.seq)
        if not self.reporting or dispatch is None:
            return
        peers = list(queue.unfenced)
        self.footprints[dispatch] = (set(), set(), peers)
        for p in peers:
            fp = self.footprints.get(p)
            if fp is not None:
                fp[2].append(dispatch)
        queue.unfenced = peers + [dispatch]

    def drained(self, queue) -> None:
        """CS_PARTIAL_FLUSH (or an AQL barrier): later work of the queue is ordered after its earlier dispatches."""
        if self.hb:
            self.order.drained(queue, queue.launched)
        for d in queue.unfenced:
            self.footprints.pop(d, None)
        queue.unfenced = []

    def waited(self, queue) -> None:
        """A wait of `queue` was satisfied with none of its dispatches running and no end-of-pipe event pending: the
        wait was on their completion (a RELEASE_MEM value, say), so later work is ordered after them."""
        if not queue.inflight and not queue.eop_events:
            self.drained(queue)

    def cp_access(self, queue, address: int, size: int, write: bool, what: str) -> None:
        """A CP packet touches memory while dispatches launched before it are not known finished (no partial
        flush since): a write may land before the kernel's own accesses, a read before its writes."""
        if not self.reporting:
            return
        for d in queue.unfenced:
            fp = self.footprints.get(d)
            lines = set(range(address >> LINE_SHIFT, ((address + max(size, 1) - 1) >> LINE_SHIFT) + 1))
            overlap = fp is not None and (lines & fp[1] or (write and lines & fp[0]))
            if write or overlap:
                self.report("no partial flush", address, size, f"{d.name} (kernel at 0x{self.gpu.canonical(d.d.pgm_addr):x})",
                            what, "CS_PARTIAL_FLUSH",
                            detail="the CP does not wait for a dispatch before the next packet (facts 6.3): this "
                                   "access may happen while the kernel still runs"
                                   + (" and touches what it touches" if overlap else
                                      "; whoever waits for this value may see the kernel unfinished"))
