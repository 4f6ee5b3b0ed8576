"""The HDP (host data path): CPU stores to VRAM through the PCIe BAR wait in the HDP's write buffer, which GPU
engines do not read through, until an HDP flush (HARDWARE_FACTS 6.4).

The difficulty: hcqsim's host pages ARE the emulated DRAM, so a CPU store cannot be intercepted. What the HDP
does instead, for every VRAM range the process has mapped for the CPU (the emulated KFD says which: render-node
mmaps of VRAM BOs; GTT and USERPTR memory do not go through the HDP), is keep a copy of the bytes as the GPU last
saw them (`HostRange.seen`). Before the GPUs run (every progress point: a doorbell, a driver wait, a free-running
engine step), the bytes that differ from that copy are host stores the GPU has not been shown yet; after the GPUs
ran, what they wrote is taken into the copy. An HDP flush shows the host stores to the GPU:

* a store to offset 0 (HDP_MEM_FLUSH_CNTL) of the MMIO-remap page (facts 1.5). Offset 4 (HDP_REG_FLUSH_CNTL) is the
  register-path flush and leaves the memory writes buffered. Both are plain stores, seen at the next progress
  point through the value the page holds between them (`MMIO_IDLE`), as the doorbell slots are;
* PM4 WAIT_REG_MEM OPERATION 1 (write, then wait) on NBIO GPU_HDP_FLUSH_REQ / GPU_HDP_FLUSH_DONE;
* SDMA POLL_REGMEM with HDP_FLUSH = 1.

Each flush is a trace entry of its own (`hdp_flush`, on the queue that flushed or on `host`). The modes:

* `coherent`: nothing is tracked (today's behaviour and speed); flushes are still traced.
* `report`: a GPU read of bytes with an unflushed host store is reported (the cache model's DRAM read hook:
  `attach`); values are the coherent ones. A queue's poll is named by its waiting packet (`poller`), kernel code by
  the dispatch fetching it (`launch_fetch` and shader.cached's instruction fetch).
* `adversarial`: while the GPUs run, the unflushed host stores are really hidden (the DRAM holds the bytes the GPU
  last saw; the host's bytes are put back when control returns to the host). The HDP drains a page by itself only
  where the scheduler policy says so (`drain_choices`): never under the deterministic default, so a doorbell rung
  after a host store into VRAM without a flush reads the old bytes.

Weaker readings, where the emulator cannot see more (docs/memory_model.md, "HDP"):
* Host stores and the MMIO-page store are seen at the same progress point, not in program order: a flush seen
  there covers every host store made since the previous one (a store after the flush but before the doorbell
  counts as flushed).
* A GPU write to a byte with an unflushed host store cancels that store (as if the host store had landed first).
* Free-running systems (host threads run while the GPUs do): adversarial does not hide bytes (the host would read
  its own stores back stale), and host stores racing an engine step count as seen by the GPU.
* The HDP read cache (HDP 4.x/5.0, gfx942's HDP 4.4.2; none on gfx1100's HDP 6.0) is not modelled: CPU loads cannot
  be intercepted, and only the kernel invalidates it (docs/memory_model.md, "HDP", has the sources and the why); GPU
  writes become CPU-visible once they left GL2 (the cache model's business).
"""
from __future__ import annotations

import bisect
import ctypes
import random
from dataclasses import dataclass, field

import numpy as np

from ..kfd_uapi import KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL, KFD_MMIO_REMAP_HDP_REG_FLUSH_CNTL
from ..memory import PAGE_SIZE, host_view
from ..registers import hdp_flush_registers
from .report import MemoryReport

MODES = ("coherent", "report", "adversarial")
KIND = "unflushed host write"
_MEM_REG, _REG_REG = KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL // 4, KFD_MMIO_REMAP_HDP_REG_FLUSH_CNTL // 4  # u32 indices
MMIO_IDLE = 0xFFFFFFFF  # what the MMIO-remap page's flush registers read between host stores (emulator choice)
MISSING = "HDP flush"
FIXES = ("a 32-bit store of 0 to offset 0 (HDP_MEM_FLUSH_CNTL) of the MMIO-remap page before the doorbell or the "
         "signal that lets the GPU read",
         "PM4 WAIT_REG_MEM OPERATION 1 (write-wait) on GPU_HDP_FLUSH_REQ/DONE ahead of the reading packets",
         "SDMA POLL_REGMEM with HDP_FLUSH = 1 ahead of the reading packets")
_WORDS = PAGE_SIZE // 8
_CHUNK_PAGES = 256  # pages compared at once when looking for host stores (bounds the temporaries)

_libc = ctypes.CDLL(None)
_libc.memcmp.restype = ctypes.c_int
_libc.memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]


@dataclass(eq=False)
class _Pending:
    """One page of a host range with host stores the GPU has not been shown."""

    host: np.ndarray  # the page as the CPU stored it (a copy)
    stored: np.ndarray  # bool per byte: the CPU changed it and the GPU has not seen the change
    readers: set = field(default_factory=set)  # readers already reported for this page


class HostRange:
    """A VRAM range the CPU has mapped: its bytes as the GPU last saw them, and its pages with unflushed stores."""

    def __init__(self, hdp: "HostDataPath", lo: int, hi: int, label: str):
        self.hdp, self.lo, self.hi, self.label = hdp, lo, hi, label
        self.view = host_view(lo, hi - lo)
        self.seen = self.view.copy()
        self.seen_addr = self.seen.ctypes.data  # (numpy's .ctypes costs microseconds: taken once)
        self.pending: dict[int, _Pending] = {}  # page index -> page

    def page(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(DRAM bytes, seen bytes) of page `i` (views)."""
        a, b = i * PAGE_SIZE, (i + 1) * PAGE_SIZE
        return self.view[a:b], self.seen[a:b]

    def find_host_stores(self) -> bool:
        """Pages whose bytes differ from what the GPU last saw hold host stores (the GPU is not running).
        Whether some page has unflushed stores now."""
        size = self.hi - self.lo
        if not self.pending and _libc.memcmp(self.lo, self.seen_addr, size) == 0:
            return False  # the common case: the host stored nothing here
        cur, old = self.view.view(np.uint64), self.seen.view(np.uint64)
        changed = []
        for first in range(0, size // PAGE_SIZE, _CHUNK_PAGES):
            a, b = first * _WORDS, min((first + _CHUNK_PAGES) * _WORDS, cur.size)
            rows = (cur[a:b] != old[a:b]).reshape(-1, _WORDS).any(axis=1)
            changed += (first + np.flatnonzero(rows)).tolist()
        pending = {}
        for i in changed:
            now, seen = self.page(i)
            before = self.pending.get(i)
            pending[i] = _Pending(now.copy(), now != seen, before.readers if before else set())
        self.pending = pending
        return bool(pending)

    def hide(self) -> None:
        """Adversarial: the GPU reads the bytes it last saw; the host's stay in the HDP (`_Pending.host`)."""
        for i in self.pending:
            now, seen = self.page(i)
            now[:] = seen

    def land(self, i: int, hidden: bool) -> None:
        """Page `i`'s host stores reach DRAM (a flush or a drain): the GPU sees them from now on."""
        p = self.pending.pop(i)
        now, seen = self.page(i)
        if hidden:  # the DRAM holds what the GPU saw plus what it wrote since: the host stores it did not overwrite
            stores = p.stored & (now == seen)
            now[stores] = p.host[stores]
        seen[:] = now

    def absorb_gpu_writes(self, hidden: bool) -> None:
        """After the GPUs ran: what they wrote is what they saw; pending host stores they overwrote are gone, the
        others go back into DRAM for the host (adversarial)."""
        if not self.pending:
            ctypes.memmove(self.seen_addr, self.lo, self.hi - self.lo)
            return
        for i in list(self.pending):
            p = self.pending[i]
            now, seen = self.page(i)
            wrote = now != (seen if hidden else p.host)
            if wrote.any():
                p.stored &= ~wrote
                p.host[wrote] = now[wrote]
                seen[wrote] = now[wrote]
            if hidden:
                now[:] = p.host
            if not p.stored.any():
                del self.pending[i]
        self._copy_unpending()

    def _copy_unpending(self) -> None:
        """seen := DRAM everywhere except the pending pages."""
        start = 0
        for i in sorted(self.pending) + [(self.hi - self.lo) // PAGE_SIZE]:
            a, b = start * PAGE_SIZE, i * PAGE_SIZE
            if b > a:
                ctypes.memmove(self.seen_addr + a, self.lo + a, b - a)
            start = i + 1

    def stored_pages(self, lo: int, hi: int) -> list[tuple[int, _Pending]]:
        """(page index, pending page) of the pages whose unflushed host stores meet [lo, hi)."""
        out = []
        lo, hi = max(lo, self.lo) - self.lo, min(hi, self.hi) - self.lo
        for i in range(lo // PAGE_SIZE, (hi - 1) // PAGE_SIZE + 1):
            p = self.pending.get(i)
            if p is not None and p.stored[max(lo - i * PAGE_SIZE, 0):min(hi - i * PAGE_SIZE, PAGE_SIZE)].any():
                out.append((i, p))
        return out

    def gpu_wrote(self, lo: int, hi: int) -> None:
        """A GPU write of [lo, hi) reached DRAM outside a run: the GPU sees it, and it cancels host stores there."""
        a, b = lo - self.lo, hi - self.lo
        self.seen[a:b] = self.view[a:b]
        for i in range(a // PAGE_SIZE, (b - 1) // PAGE_SIZE + 1):
            p = self.pending.get(i)
            if p is None:
                continue
            x, y = max(a - i * PAGE_SIZE, 0), min(b - i * PAGE_SIZE, PAGE_SIZE)
            p.stored[x:y] = False
            p.host[x:y] = self.view[i * PAGE_SIZE + x:i * PAGE_SIZE + y]
            if not p.stored.any():
                del self.pending[i]


class HostMappedVram:
    """The host-mapped VRAM of one machine (its GPUs share one VA window) in one memory model: finds host stores,
    hides them while the GPUs run (adversarial), takes GPU writes in, reports GPU reads of them (report)."""

    def __init__(self, mode: str = "coherent", *, policy=None, seed: int = 0):
        if mode not in MODES:
            raise ValueError(f"unknown memory model {mode!r}: expected one of {', '.join(MODES)}")
        self.mode = mode
        self.tracking = mode != "coherent"
        self.concurrent_host = False  # free-running: host threads run while the GPUs do (the KFD says so)
        self.paths: list[HostDataPath] = []
        self.ranges: list[HostRange] = []  # sorted by start, disjoint
        self._starts: list[int] = []
        self.policy = policy
        self.rng = random.Random(seed ^ 0x4844_5000)  # drain choices of the seeded policy (not the GPU's stream)
        self._depth = 0  # GPUs of this machine running now (a progress point nests no other)
        self.hidden = False
        # report mode, host not concurrent: this run's look for host stores is not taken yet. It is taken at the
        # run's first GPU access (`look_if_owed`: the first activity the run advances, a DRAM read or write hook,
        # an engine's flush), so a progress point where no GPU does anything (a driver call's fault check on an
        # idle machine) costs O(GPUs), not a compare of every host-mapped range (tests/test_kfd_scale.py)
        self.owed = False
        self.dirty: list[HostRange] = []  # the ranges with pending pages
        self.pending_pages = 0  # pending pages over all ranges (the read hook's fast test)
        self.stats = {"progress_points": 0, "host_store_pages": 0, "flushes": 0, "drains": 0, "reports": 0}

    # -- what the emulated KFD says ----------------------------------------------------------------

    def track(self, hdp: "HostDataPath", lo: int, hi: int, label: str) -> None:
        """The CPU mapped VRAM [lo, hi) of `hdp`'s GPU: its stores go through that HDP from now on."""
        if not self.tracking:
            return
        overlap = self._overlapping(lo, hi)
        if any(r.lo <= lo and hi <= r.hi for r in overlap):
            return  # mapped already (a second mmap of the same BO)
        if overlap:  # a longer mapping of the same BO: one range over both (their pending stores land)
            lo, hi = min([lo] + [r.lo for r in overlap]), max([hi] + [r.hi for r in overlap])
            self.untrack(lo, hi)
        i = bisect.bisect_left(self._starts, lo)
        self.ranges.insert(i, HostRange(hdp, lo, hi, label))
        self._starts.insert(i, lo)

    def untrack(self, lo: int, hi: int) -> None:
        """The CPU mapping of [lo, hi) ended (munmap, free): what the host stored stays in DRAM."""
        gone = self._overlapping(lo, hi)
        if not gone:
            return
        for r in gone:
            if self.hidden:  # not between progress points; keep the host's bytes if it happens
                for i in list(r.pending):
                    r.land(i, True)
        first = bisect.bisect_left(self._starts, gone[0].lo)  # `gone` is consecutive in `ranges`: one slice
        del self.ranges[first:first + len(gone)]
        del self._starts[first:first + len(gone)]
        if any(r.pending for r in gone):
            self.dirty = [r for r in self.dirty if r not in gone]
        self._count()

    def _overlapping(self, lo: int, hi: int) -> list[HostRange]:
        i = max(bisect.bisect_right(self._starts, lo) - 1, 0)
        out = []
        while i < len(self.ranges) and self.ranges[i].lo < hi:
            if self.ranges[i].hi > lo:
                out.append(self.ranges[i])
            i += 1
        return out

    def _range_at(self, addr: int) -> HostRange | None:
        i = bisect.bisect_right(self._starts, addr) - 1
        return self.ranges[i] if i >= 0 and addr < self.ranges[i].hi else None

    # -- around every run of the GPUs --------------------------------------------------------------

    def before_run(self) -> None:
        self._depth += 1
        if self._depth > 1:
            return
        for hdp in self.paths:  # (every GPU step of every progress point: the look is inline, the work is not)
            page = hdp.register_page
            if page is not None and (page[_MEM_REG] != MMIO_IDLE or page[_REG_REG] != MMIO_IDLE):
                hdp.poll_register_page()
        if not self.tracking:
            return
        self.stats["progress_points"] += 1
        if self.mode == "report" and not self.concurrent_host and not any(h._flush_seen for h in self.paths):
            self.owed = True  # (a flush seen now needs the host stores found now: looked for at once)
            return
        self._look()

    def look_if_owed(self) -> None:
        """Before a GPU access of this run: the report-mode look `before_run` left for later, taken now. Exact, as
        the host does not run inside a progress point (not free-running) and no GPU access happened before."""
        if self.owed:
            self._look()

    def _look(self) -> None:
        """Host stores since the last run, flushes seen with them, drains and (adversarial) hiding."""
        self.owed = False
        self.dirty = [r for r in self.ranges if r.find_host_stores()]
        self._count()
        for hdp in self.paths:  # a flush seen now covers every host store seen now (weaker reading: no order)
            hdp.apply_pending_flush()
        self._drain_chosen()
        self._count()
        self.stats["host_store_pages"] += self.pending_pages
        if self.mode == "adversarial" and not self.concurrent_host and self.pending_pages:
            for r in self.dirty:
                r.hide()
            self.hidden = True

    def after_run(self, work: int | None = None) -> None:
        """The GPUs ran (`work`: packets plus issue steps executed; None: unknown, e.g. the run raised)."""
        self._depth -= 1
        if self._depth or not self.tracking:
            return
        if self.owed:  # no GPU access in this run (each takes the look first): nothing to take in
            self.owed = False
            return
        if work == 0 and not self.hidden:
            return  # nothing executed: nothing written, nothing to put back
        for r in self.ranges:
            r.absorb_gpu_writes(self.hidden)
        self.hidden = False
        self._count()

    def _drain_chosen(self) -> None:
        """Adversarial: pages the HDP writes to DRAM by itself now, as the scheduler policy chooses."""
        if self.mode != "adversarial" or not self.pending_pages:
            return
        pages = [(r, i) for r in self.dirty for i in sorted(r.pending)]
        for (r, i), drain in zip(pages, drain_choices(self.policy, self.rng, len(pages))):
            if drain:
                r.land(i, False)
                self.stats["drains"] += 1

    def flush(self, hdp: "HostDataPath") -> None:
        """`hdp`'s buffered host stores reach DRAM (now, also in the middle of a run)."""
        if not self.tracking:
            return
        self.look_if_owed()
        for r in self.dirty:
            if r.hdp is hdp:
                for i in list(r.pending):
                    r.land(i, self.hidden)
        self.stats["flushes"] += 1
        self._count()

    def _count(self) -> None:
        self.dirty = [r for r in self.dirty if r.pending]
        self.pending_pages = sum(len(r.pending) for r in self.dirty)

    # -- the cache model's DRAM hooks ----------------------------------------------------------------

    def dram_read(self, gpu, addr: int, data: np.ndarray, reader: str) -> None:
        """A GPU engine read [addr, addr + len(data)) from DRAM (the cache model's read hook). Report: name the
        unflushed host stores it met. Adversarial with a concurrent host (nothing hidden): give it the bytes the
        GPU saw before them."""
        if self.owed:
            self._look()
        if not self.pending_pages:
            return
        hi = addr + max(len(data), 1)
        i = max(bisect.bisect_right(self._starts, addr) - 1, 0)
        while i < len(self.ranges) and self.ranges[i].lo < hi:
            r = self.ranges[i]
            i += 1
            if r.hi <= addr:
                continue
            for page, p in r.stored_pages(addr, hi):
                if self.mode == "report":
                    self._report(gpu, r, page, p, addr, len(data), reader)
                elif not self.hidden:
                    self._substitute(r, page, p, addr, data)

    def dram_written(self, addr: int, size: int) -> None:
        """A GPU write reached DRAM (the cache model's write hook): what the GPU saw from now on, and it cancels the
        unflushed host stores it overwrote. Inside a run only pages with pending stores need it (`after_run`
        copies every other page whole); there it is needed, because `after_run` finds GPU writes by comparing
        with what the GPU saw, and a GPU write of the byte the GPU already saw compares equal (a peer's copy of
        a word with a zero byte into hidden zeros: the host's store came back over it)."""
        if self.owed:
            self._look()
        if not self.ranges or (self._depth and not self.pending_pages):
            return
        hi = addr + size
        for r in self._overlapping(addr, hi):
            if r.pending or not self._depth:
                r.gpu_wrote(max(addr, r.lo), min(hi, r.hi))
        self._count()

    def _substitute(self, r: HostRange, page: int, p: "_Pending", addr: int, data: np.ndarray) -> None:
        base = r.lo + page * PAGE_SIZE
        lo, hi = max(addr, base), min(addr + len(data), base + PAGE_SIZE)
        seen = r.seen[lo - r.lo:hi - r.lo]
        stored = p.stored[lo - base:hi - base]
        data[lo - addr:hi - addr][stored] = seen[stored]

    def _report(self, gpu, r: HostRange, page: int, p: "_Pending", addr: int, size: int, reader: str) -> None:
        """One record per page and reader: the bytes of the read the CPU stored since the last HDP flush."""
        poll = poller(gpu)
        launch = None if poll else launch_fetch(gpu, addr)
        reader = poll or launch or reader
        if reader in p.readers:
            return
        if launch is None:  # (the launch look reads 4 bytes: the waves' fetch then widens the same record)
            p.readers.add(reader)
        base = r.lo + page * PAGE_SIZE
        a, b = max(addr, base) - base, min(addr + size, base + PAGE_SIZE) - base
        idx = a + np.flatnonzero(p.stored[a:b])
        detail = (f"the CPU stored these bytes since the last HDP flush of {r.hdp.gpu_label}, and GPU engines read "
                  f"VRAM around the HDP (facts 6.4); any one of these makes them visible: " + "; ".join(FIXES))
        if " instruction fetch at " in reader:
            detail += (". These bytes are kernel code: the dispatch's waves fetch them (through the instruction "
                       "cache, from VRAM) around the HDP, so code the CPU wrote needs the flush before the dispatch "
                       "as data does")
        if poll is not None:
            detail += (". This read is a wait's poll: it compared the host's unflushed value here, but the GPU need "
                       "not see that value before an HDP flush, which nothing ahead of the wait does (on hardware it "
                       "may poll the old value forever: adversarial mode deadlocks here)")
        if r.hdp.register_flush_since:
            detail += (". The MMIO-remap page was written at offset 4 (HDP_REG_FLUSH_CNTL): that flushes the register "
                       "path, not the memory writes")
        self.stats["reports"] += 1
        gpu.add_memory_report(MemoryReport(KIND, base + int(idx[0]), int(idx[-1] - idx[0]) + 1,
                                           f"the host (CPU store through the BAR into {r.label})", reader, MISSING,
                                           level="HDP", detail=detail))


def poller(gpu) -> str | None:
    """The waiting packet whose poll the current GPU read is, named for a report (None: not a poll). A queue that
    waits (WAIT_REG_MEM, POLL_REGMEM, an AQL barrier, a compare-swap retry) reads nothing but its wait's memory."""
    model = gpu.coherence
    q = model.agent if model is not None else None
    wait = getattr(q, "wait", None) if getattr(q, "kind", "") == "queue" else None
    if wait is None:
        return None
    where = ""
    if wait.ring_offset is not None:
        stream = q.stack[-1] if getattr(q, "stack", None) else None
        place = "ring" if stream is None or stream.is_ring else f"IB at 0x{gpu.canonical(stream.base):x}"
        where = f" at {place}+0x{wait.ring_offset:x}"
    polled = f", polling 0x{gpu.canonical(wait.address):x}" if wait.address is not None else ""
    packet = (wait.packet or "a wait").split()[0]
    return f"queue {q.name}: {packet}{where}{polled} until {wait.awaited()}"


def launch_fetch(gpu, addr: int) -> str | None:
    """The shader core's look at a kernel's first instruction as its queue launches it (an empty kernel's waves only
    end; shader.core) stands for the first wave's instruction fetch: named as that fetch is (shader.cached), so both
    make one record. None when the read is not that look."""
    model = gpu.coherence
    q = model.agent if model is not None else None
    if getattr(q, "kind", "") != "queue" or not gpu.trace:
        return None
    entry = gpu.trace[-1]  # the launch's trace entry comes right before the look (shader.core.launch)
    if entry[1] != q.name or entry[2] != "dispatch" or not isinstance(entry[3], str):
        return None
    kernel = entry[3].partition(":")[0]
    if kernel != f"kernel at 0x{gpu.canonical(addr):x}":
        return None
    return f"{q.name} dispatch {q.launched} ({kernel}) instruction fetch at 0x{addr:x}"


def drain_choices(policy, rng: random.Random, n: int) -> list[bool]:
    """Which of `n` pending pages the HDP drains by itself now: the policy's `hdp_drains(n)` hook if it has one; a
    coin per page for a seeded random policy; none otherwise (the deterministic default: the latest drain the
    facts allow is never, so a missing flush shows)."""
    hook = getattr(policy, "hdp_drains", None)
    if hook is not None:
        return [bool(x) for x in hook(n)][:n]
    if getattr(policy, "name", None) == "random":
        return [rng.random() < 0.5 for _ in range(n)]
    return [False] * n


def machine_vram(gpu) -> HostMappedVram:
    """The host-mapped VRAM of `gpu`'s machine: GPUs sharing a VA window (an EmulatedSystem's) share one, kept on
    the window (host-mapped VRAM is a matter of host addresses)."""
    vram = getattr(gpu.window, "host_mapped_vram", None)
    if vram is None:
        vram = gpu.window.host_mapped_vram = HostMappedVram(gpu.memory_model, policy=gpu.policy, seed=gpu.seed)
    elif vram.mode != gpu.memory_model:
        raise ValueError(f"{gpu.label} is in memory model {gpu.memory_model!r}, the other GPUs of its VA window in "
                         f"{vram.mode!r}")
    return vram


def attach(model) -> None:
    """The cache model of a GPU (report / adversarial) sends its DRAM reads and writes here (coherence/__init__)."""
    gpu = model.gpu
    model.dram_read_hooks.append(lambda addr, data, reader: gpu.hdp.vram.dram_read(gpu, addr, data, reader))
    model.dram_write_hooks.append(lambda addr, size, writer: gpu.hdp.vram.dram_written(addr, size))


class HostDataPath:
    """One GPU's HDP: its flush register page (MMIO remap), its flush handshake registers, and its flushes."""

    def __init__(self, gpu):
        self.gpu = gpu
        self.gpu_label = gpu.label
        self.flush_registers = hdp_flush_registers(gpu.target.nbio_version)  # (GPU_HDP_FLUSH_REQ, _DONE)
        self.register_page: memoryview | None = None  # u32 view of the MMIO-remap page
        self.flushes = 0
        self.register_flushes = 0
        self.register_flush_since = False  # offset 4 was written since the last memory flush (named by reports)
        self._flush_seen = False
        self.vram = machine_vram(gpu)
        self.vram.paths.append(self)

    # -- the KFD's side --------------------------------------------------------------------------------

    def map_register_page(self, va: int) -> None:
        """The MMIO-remap page of this GPU lives at `va` (the KFD allocated it): its flush registers read idle."""
        self.register_page = memoryview((ctypes.c_uint32 * (PAGE_SIZE // 4)).from_address(va)).cast("B").cast("I")
        self.register_page[KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL // 4] = MMIO_IDLE
        self.register_page[KFD_MMIO_REMAP_HDP_REG_FLUSH_CNTL // 4] = MMIO_IDLE

    def host_mapped(self, lo: int, hi: int, label: str) -> None:
        self.vram.track(self, lo, hi, label)

    def host_unmapped(self, lo: int, hi: int) -> None:
        self.vram.untrack(lo, hi)

    def poll_register_page(self) -> None:
        """Host stores to the flush registers since the last progress point (plain stores, like doorbells)."""
        page = self.register_page
        if page is None:
            return
        mem, reg = KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL // 4, KFD_MMIO_REMAP_HDP_REG_FLUSH_CNTL // 4
        if page[reg] != MMIO_IDLE:
            page[reg] = MMIO_IDLE
            self.register_flushes += 1
            self.register_flush_since = True
            self._trace("host", "HDP_REG_FLUSH_CNTL (MMIO-remap page offset 4): register path only, memory writes "
                                "stay buffered", kind="hdp_reg_flush")
        if page[mem] != MMIO_IDLE:
            page[mem] = MMIO_IDLE
            self.flushes += 1
            self._trace("host", "HDP_MEM_FLUSH_CNTL (MMIO-remap page offset 0)")
            self._flush_seen = self.vram.tracking

    def apply_pending_flush(self) -> None:
        """A flush-register store seen by `poll_register_page` acts once the host stores are found."""
        if self._flush_seen:
            self._flush_seen = False
            self.register_flush_since = False
            self.vram.flush(self)

    # -- the engines' side -------------------------------------------------------------------------

    def is_flush_handshake(self, request_reg: int, done_reg: int) -> bool:
        return (request_reg, done_reg) == self.flush_registers

    def flush_from(self, queue_name: str, how: str) -> None:
        """An engine's flush handshake (PM4 write-wait / SDMA POLL_REGMEM HDP_FLUSH): done when it returns."""
        self.flushes += 1
        self.register_flush_since = False
        self._trace(queue_name, how)
        self.vram.flush(self)

    def _trace(self, who: str, how: str, kind: str = "hdp_flush") -> None:
        self.gpu.trace.append((self.gpu.clock, who, kind, how))
