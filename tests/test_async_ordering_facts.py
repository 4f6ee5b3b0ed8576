"""Ordering of asynchronous dispatch, checked against HARDWARE_FACTS alone (sections 3.3, 4.6, 6.2, 6.3).

The rules come from the facts and the public API only (the first version was written before reading the
engines; they were read afterwards only to plant bugs and check each test catches one). Two kinds of test:

* what hardware is ALLOWED to do must happen under at least one explored schedule (a WRITE_DATA after a
  dispatch lands before the kernel's stores; two dispatches without CS_PARTIAL_FLUSH or AQL barrier bit
  overlap; the workgroups of a dispatch arrive out of launch order). Failure mode: "never observed".
* what hardware GUARANTEES must hold under every explored schedule (an end-of-pipe RELEASE_MEM writes, and
  takes its timestamp, after every earlier dispatch's stores; CS_PARTIAL_FLUSH and the AQL barrier bit wait
  for every earlier dispatch of their own queue and for nothing else; the AQL completion signal drops once,
  after the last wave; the CP does not stall on a dispatch, a RELEASE_MEM, an ACQUIRE_MEM or an IB return;
  the same seed gives the same trace).

Observers are in the GPU, not the host: a second queue (or a later packet) waits on the signal with
WAIT_REG_MEM and snapshots the kernel's output with one CP DMA_DATA, so "visible when the signal was seen"
does not depend on when the host happens to look. Waits are proved with a kernel that polls a flag a *later*
packet writes: the endless spinner livelocks (DeadlockError; the host then releases it with a different
value, so the value the kernel stored says who released it); the bounded spinner gives up after TRIES polls
and stores the 0 it last saw (cheap: no livelock detection).

Schedules: `Explorer`, an ExplicitChoices policy driven by a seeded RNG that picks the activity, its budget,
the workgroup launch order, the issuing PC and whether one wave of it issues ahead of the others; the in-order default (seed 0); the built-in seeded `random`
policy (determinism); free-running (a smoke of the guarantees). Both targets, PM4 and AQL queues.
The facts define RELEASE_MEM only with EVENT_INDEX 5 (end of pipe) and 6 (shader done); the emulator refuses
others, so there is no "non-end-of-pipe RELEASE_MEM" to race (test at the end).
"""
from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from hcqsim import aql, kernels, pm4
from hcqsim.coherence import default_model
from hcqsim.compiler import compile_llvm
from hcqsim.errors import DeadlockError
from hcqsim.gpu import OVERTAKE_STEPS, ExplicitChoices
from hcqsim.runtime import open_device
from hcqsim.runtime.aql_ring import AqlDispatch
from hcqsim.shader.core import DISPATCH_QUANTUM
from hcqsim.shader.spin import SPIN_ITERATIONS
from tests.async_kernels import ARRIVE_IR, NO_BOUND, SPIN_IR, counting_poll_ir

TARGETS = ["gfx1100", "gfx942"]
CONFIGS = [(t, q) for t in TARGETS for q in ("pm4", "aql")]
IDS = [f"{t}-{q}" for t, q in CONFIGS]
DIAGONAL = [("gfx1100", "pm4"), ("gfx942", "aql")]  # where one example per config is enough
N = 256  # iota over four workgroups of 64 work-items
SCHEDULES = range(1, 13)  # explored schedules for data races (seeds of Explorer); 0 = the in-order default
SPIN_SCHEDULES = range(1, 6)  # fewer for the spin tests: a livelock costs a detection each

# work-item 0 of every workgroup polls *flag until it is non-zero, then stores what it saw to out[0]
# (tests/async_kernels.py SPIN_IR); the bounded spinner is the same poll, at most %tries times, storing what it saw
# last (0: it gave up): cheap proof that something did NOT run while the kernel was in flight (an endless spinner
# costs a livelock detection per run) -- async_kernels.counting_poll_ir, which counts its tries in a register.
# work-item 0 stores `v` to *flag: a kernel that releases the spinner
STORE_IR = """
declare i32 @llvm.amdgcn.workitem.id.x()
define amdgpu_kernel void @store(ptr addrspace(1) %flag, i32 %v) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %first = icmp eq i32 %t, 0
  br i1 %first, label %st, label %exit
st:
  store volatile i32 %v, ptr addrspace(1) %flag, align 4
  br label %exit
exit:
  ret void
}
"""

# ARRIVE_IR (tests/async_kernels.py): the order in which waves and workgroups reached an atomic

HOST_RELEASE = 1  # the value the host stores to release a livelocked spinner
PACKET_RELEASE = 2  # the value a later packet (or kernel) stores


class Explorer(ExplicitChoices):
    """A replayable schedule: seed s picks every scheduler decision from random.Random(s); seed 0 (or outside
    a schedule) is the first-ready, run-until-blocked order."""

    name = "explorer"

    def __init__(self):
        super().__init__(self._pick, waves=self._waves, workgroups=self._workgroups, split=self._split)
        self.rng: random.Random | None = None

    def schedule(self, seed: int) -> "Explorer":
        self.rng = random.Random(seed) if seed else None
        return self

    def _pick(self, n: int) -> tuple[int, int]:
        if self.rng is None:
            return 0, 1 << 62
        return self.rng.randrange(n), self.rng.choice([1, 1, 2, 3, 5, 8, 24, 64, 500])

    def _waves(self, n: int) -> int:
        return self.rng.randrange(n) if self.rng else 0

    def _split(self, n: int):
        if self.rng is None:
            return None
        i = self.rng.randrange(n + 1)  # n of n + 1: the waves at the PC issue together
        return None if i == n else i

    def _workgroups(self, n: int):
        if self.rng is None:
            return None
        order = list(range(n))
        self.rng.shuffle(order)
        return order


# The memory model (HCQSIM_MEMORY_MODEL=report): these streams leave out, on purpose, what the rules they probe are
# about -- Rig.kernel drops the CS_PARTIAL_FLUSH after each dispatch, Rig.eop carries no cache bits, and the dependent
# dispatches of producer_consumer have no write-back between them -- so report mode rightly names CS_PARTIAL_FLUSH and
# the L2 write-back (GL2_WB / TC_WB) for them (tests/test_memory_model_streams.py checks those rules themselves). A
# Rig is given the environment's model explicitly, so the pytest plugin leaves its records to the check below:
# the omissions made on purpose pass, any other record (a stale line, an unflushed host write: a mistake in a
# stream here or in the runtime) fails the test that left it.
ON_PURPOSE = frozenset({"CS_PARTIAL_FLUSH", "GL2_WB", "TC_WB"})
RIGS: list["Rig"] = []  # the open rigs, and the records of closed ones (their last test's)
LEFT: list = []


@pytest.fixture(autouse=True)
def only_the_omissions_made_on_purpose():
    yield
    records = LEFT[:] + [r for rig in RIGS for r in rig.take_records()]
    LEFT.clear()
    other = [r for r in records if r.missing not in ON_PURPOSE]
    assert not other, f"{len(other)} memory-model record(s) besides the omissions made on purpose:\n" + \
        "\n".join(map(str, other[:3]))


class Rig:
    """One device (one target, PM4 or AQL compute queues) with the kernels and buffers the tests use."""

    explorer: Explorer | None = None

    def __init__(self, target: str, kind: str, policy="run_to_block", seed: int = 0, **sim_options):
        sim_options.setdefault("memory_model", default_model())  # explicit: checked here (ON_PURPOSE)
        self.dev = open_device("sim", target=target, aql=(kind == "aql"), policy=policy, seed=seed, **sim_options)
        RIGS.append(self)
        self.target, self.kind, self.family = target, kind, self.dev.family
        self.iota = self.dev.load_program(kernels.code_object("iota", target), "iota")
        self.scale = self.dev.load_program(kernels.code_object("scale", target), "scale")
        self.spin = self.dev.load_program(compile_llvm(SPIN_IR, target), "poll")
        self.store = self.dev.load_program(compile_llvm(STORE_IR, target), "store")
        self.bounded_spin = self.dev.load_program(compile_llvm(counting_poll_ir(), target), "counting_poll")
        self.arrive = self.dev.load_program(compile_llvm(ARRIVE_IR, target), "arrive")
        self.ib = self.dev.alloc(1 << 20)  # our own PM4 IBs for AQL vendor packets (barrier bit of our choice)
        self.ib_put = 0

    def close(self):
        LEFT.extend(self.take_records())
        RIGS.remove(self)
        self.dev.close()

    def take_records(self) -> list:
        """The memory-model records the machine left since the last call (the list is emptied)."""
        records = self.dev.os.system.memory_reports
        taken = records[:]
        records.clear()
        return taken

    def buf(self, nbytes: int = 4 * N, *, uncached: bool = False):
        """A zeroed buffer in VRAM; `uncached`: coherent system memory, for a flag the host stores to while the
        GPU runs (a CPU store into VRAM would wait in the HDP, and a kernel's polls would hit its GL2 copy)."""
        b = self.dev.alloc(nbytes, uncached=uncached)
        b.view[:nbytes] = 0
        return b

    # -- building a queue: kernels and PM4 runs, each with an AQL barrier bit (ignored on PM4 queues) --

    def kernel(self, q, prog, args, n=N, local=64, *, barrier=0, completion=0):
        """A dispatch with no CS_PARTIAL_FLUSH after it (PM4), or an AQL dispatch packet with this barrier
        bit and completion signal."""
        q.exec(prog, args, n, local)
        if self.kind == "pm4":
            assert q.packets[-1] == pm4.cs_partial_flush()
            q.packets.pop()
            return q
        p = q.packets.pop()
        raw = bytearray(p.raw)
        hdr = struct.unpack_from("<H", raw)[0] & ~(1 << aql.HEADER_BARRIER) | barrier << aql.HEADER_BARRIER
        struct.pack_into("<H", raw, 0, hdr)
        struct.pack_into("<Q", raw, aql.COMPLETION_SIGNAL, completion)
        q.packets.append(AqlDispatch(bytes(raw), p.scratch))
        return q

    def pm4(self, q, *packets, barrier=0):
        """PM4 packets after what is queued: inline on PM4, one vendor PM4_IB packet on AQL."""
        if self.kind == "pm4":
            q.packets.extend(packets)
            return q
        dws = [d for p in packets for d in p]
        if self.ib_put + 4 * len(dws) > len(self.ib.view):  # every run synchronizes: older IBs are done
            self.ib_put = 0
        at = self.ib.va + self.ib_put
        self.ib.view[self.ib_put:self.ib_put + 4 * len(dws)] = np.array(dws, np.uint32).view(np.uint8)
        self.ib_put = (self.ib_put + 4 * len(dws) + 255) & ~255
        q.packets.append(AqlDispatch(aql.pm4_ib_packet(at, len(dws), barrier=barrier)))
        return q

    def eop(self, addr, value, event_type=0x14, event_index=5):
        return pm4.release_mem(addr, value, data_sel=1, event_type=event_type, event_index=event_index,
                               family=self.family)

    def snapshot(self, q, flag, src, dst, *, barrier=0):
        """Wait for *flag >= 1, then copy src to dst in one CP DMA: what was visible when the flag was seen."""
        return self.pm4(q, pm4.wait_reg_mem(flag.va, 1, function=5), pm4.dma_data(dst.va, src.va, 4 * N),
                        barrier=barrier)


def u32(buf, n=N):
    return buf.view[:4 * n].view(np.uint32)


def iota(start):
    return np.arange(start, start + N, dtype=np.uint32)


def explored_rig(target, kind):
    explorer = Explorer()
    r = Rig(target, kind, policy=explorer)
    r.explorer = explorer
    return r


@pytest.fixture(scope="module", params=CONFIGS, ids=IDS)
def rig(request):
    r = explored_rig(*request.param)
    yield r
    r.close()


@pytest.fixture(scope="module", params=TARGETS)
def pm4_rig(request):
    r = explored_rig(request.param, "pm4")
    yield r
    r.close()


@pytest.fixture(scope="module", params=TARGETS)
def aql_rig(request):
    r = explored_rig(request.param, "aql")
    yield r
    r.close()


def under(rig, seed):
    if rig.explorer is not None:  # else the device's own policy (free-running: thread timing) decides
        rig.explorer.schedule(seed)


# -- 6.3 / 3.3 DISPATCH_DIRECT: the CP goes on; WRITE_DATA does not wait ---------------------------------


def write_data_signal(rig, seed, *, flush=False):
    """iota(a) then a WRITE_DATA flag (optionally behind CS_PARTIAL_FLUSH); a second queue waits for the flag
    and snapshots a. Returns the snapshot."""
    a, snap, flag = rig.buf(), rig.buf(), rig.buf(64)
    under(rig, seed)
    q = rig.kernel(rig.dev.compute_queue(0), rig.iota, [a, 1, N])
    if flush:
        rig.pm4(q, pm4.cs_partial_flush(), pm4.write_data(flag.va, [1]))
    else:
        rig.pm4(q, pm4.write_data(flag.va, [1]))
    rig.snapshot(rig.dev.compute_queue(1), flag, a, snap).submit()
    q.submit()
    rig.dev.synchronize()
    under(rig, 0)
    assert np.array_equal(u32(a), iota(1))  # the kernel itself always finishes correctly
    return u32(snap).copy()


def test_write_data_after_a_dispatch_lands_before_the_kernels_stores_under_some_schedule(rig):
    """Facts 6.3: 'the CP does not wait for a dispatch to finish before processing later packets'; WRITE_DATA
    acts when the CP reaches it. On AQL the WRITE_DATA is in a vendor packet without the barrier bit."""
    early = [s for s in SCHEDULES if not np.array_equal(write_data_signal(rig, s), iota(1))]
    assert early, "never observed: a WRITE_DATA signal after a dispatch was always later than the kernel's stores"


def test_cs_partial_flush_before_a_write_data_signal_makes_it_safe_under_every_schedule(rig):
    """Facts 3.3 EVENT_WRITE: CS_PARTIAL_FLUSH waits until all previously launched compute work finished."""
    for s in (0, *SCHEDULES):
        assert np.array_equal(write_data_signal(rig, s, flush=True), iota(1)), f"schedule {s}"


# -- 6.2 / 3.3 RELEASE_MEM end-of-pipe: written after every earlier dispatch's stores --------------------

EOP_EVENTS = {"CACHE_FLUSH_AND_INV_TS": (0x14, 5), "BOTTOM_OF_PIPE_TS": (0x28, 5), "CS_DONE": (0x2F, 6)}


def eop_signal(rig, seed, event, *, observer="other queue"):
    """iota(a, 1), iota(b, 1001), then RELEASE_MEM(flag = 1) with no flush; the observer (a second queue, or
    the same queue's next packets) waits for the flag and snapshots a and b."""
    a, b, snap_a, snap_b, flag = rig.buf(), rig.buf(), rig.buf(), rig.buf(), rig.buf(64)
    under(rig, seed)
    q = rig.kernel(rig.dev.compute_queue(0), rig.iota, [a, 1, N])
    rig.kernel(q, rig.iota, [b, 1001, N])
    rig.pm4(q, rig.eop(flag.va, 1, *EOP_EVENTS[event]))
    obs = q if observer == "same queue" else rig.dev.compute_queue(1)
    rig.snapshot(obs, flag, a, snap_a)
    rig.snapshot(obs, flag, b, snap_b)
    if obs is not q:
        obs.submit()
    q.submit()
    rig.dev.synchronize()
    under(rig, 0)
    return u32(snap_a).copy(), u32(snap_b).copy()


@pytest.mark.parametrize("event", list(EOP_EVENTS))
def test_end_of_pipe_release_mem_is_written_after_every_earlier_dispatchs_stores(rig, event):
    """Facts 3.3 RELEASE_MEM: 'once all previously issued work has drained to the chosen point (EOP: all prior
    dispatch waves finished and their writes acknowledged) ... then writes the data'; 6.2: 'a consumer that
    sees the signal value also sees the kernel's writes'. CS_DONE is the shader-done point (index 6)."""
    for s in (0, *SCHEDULES):
        sa, sb = eop_signal(rig, s, event)
        assert np.array_equal(sa, iota(1)) and np.array_equal(sb, iota(1001)), f"schedule {s}"


def test_wait_reg_mem_on_an_end_of_pipe_value_orders_the_same_queue(rig):
    """Facts 3.3: 'follow with WAIT_REG_MEM on the written value if later work must wait'."""
    for s in (0, *SCHEDULES):
        sa, sb = eop_signal(rig, s, "CACHE_FLUSH_AND_INV_TS", observer="same queue")
        assert np.array_equal(sa, iota(1)) and np.array_equal(sb, iota(1001)), f"schedule {s}"


# -- spinning kernels: who may run while a dispatch is in flight -------------------------------------------


def spin_then(rig, seed, build_rest, before=None):
    """Launch the spinner on `flag`, then `build_rest(q, flag)` appends what follows it (`before(q, flag)`
    goes ahead of the spinner). Run; if the machine livelocks, the host releases the spinner with
    HOST_RELEASE. Returns (livelocked, value the spinner saw, final flag)."""
    flag, out = rig.buf(64, uncached=True), rig.buf(64)  # the host may store to the flag while the spinner runs
    under(rig, seed)
    q = rig.dev.compute_queue(0)
    if before:
        before(q, flag)
    rig.kernel(q, rig.spin, [flag, out], 64, 64)
    build_rest(q, flag)
    q.submit()
    livelocked = False
    try:
        rig.dev.synchronize()
    except DeadlockError as e:
        assert "livelock" in str(e) and f"0x{flag.va:x}" in str(e)
        livelocked = True
        under(rig, 0)
        u32(flag, 1)[0] = HOST_RELEASE
        rig.dev.synchronize()
    under(rig, 0)
    return livelocked, int(u32(out, 1)[0]), int(u32(flag, 1)[0])


RELEASED_BY_THE_PACKET = (False, PACKET_RELEASE, PACKET_RELEASE)
TRIES = 64  # polls of the bounded spinner: a few hundred issue steps, many scheduler turns under Explorer


def bounded_spin_then(rig, seed, build_rest, tries=TRIES):
    """The bounded spinner on `flag`, then `build_rest(q, flag)`. Returns (value the spinner last saw, final
    flag): (0, PACKET_RELEASE) means the later packet ran only after the kernel had given up."""
    flag, out = rig.buf(64), rig.buf(64)
    u32(out, 1)[0] = 0xDEAD
    under(rig, seed)
    q = rig.kernel(rig.dev.compute_queue(0), rig.bounded_spin, [flag, out, tries], 64, 64)
    build_rest(q, flag)
    q.submit()
    rig.dev.synchronize()
    under(rig, 0)
    return int(u32(out, 1)[0]), int(u32(flag, 1)[0])


HELD_BACK = (0, PACKET_RELEASE)


def _write_flag(rig, barrier=0, before=()):
    return lambda q, flag: rig.pm4(q, *before, pm4.write_data(flag.va, [PACKET_RELEASE]), barrier=barrier)


def test_a_later_write_data_runs_while_the_dispatch_is_in_flight_under_every_schedule(rig):
    """Facts 6.3: the CP does not wait for a dispatch before later packets: the WRITE_DATA after a spinning
    kernel always releases it (a synchronous dispatch would livelock). In order too."""
    for s in (0, *SPIN_SCHEDULES):
        assert spin_then(rig, s, _write_flag(rig)) == RELEASED_BY_THE_PACKET, f"schedule {s}"


def test_acquire_mem_and_a_satisfied_wait_reg_mem_do_not_wait_for_the_dispatch(rig):
    """Facts 3.3 ACQUIRE_MEM: 'performs the cache actions when the CP reaches it; it does not by itself wait for
    earlier dispatches' [uncertain, the facts' stated assumption]; WAIT_REG_MEM stalls only on its condition."""
    done = rig.buf(64)
    u32(done, 1)[0] = 1
    acquire = (pm4.acquire_mem("gfx11", glv_inv=1, gl1_inv=1, glk_inv=1) if rig.family == "gfx11"
               else pm4.acquire_mem("gfx9", tcl1_action_ena=1, sh_kcache_action_ena=1))
    before = (acquire, pm4.wait_reg_mem(done.va, 1, function=3))
    for s in SPIN_SCHEDULES:
        assert spin_then(rig, s, _write_flag(rig, before=before)) == RELEASED_BY_THE_PACKET, f"schedule {s}"


def test_the_queue_does_not_stall_on_an_end_of_pipe_release_mem(rig):
    """Facts 3.3 RELEASE_MEM: 'The queue does not stall on it — later packets are processed immediately'. The
    release is queued behind the spinner; the WRITE_DATA after it releases the spinner; then the release lands."""
    done = rig.buf(64)
    for s in SPIN_SCHEDULES:
        got = spin_then(rig, s, _write_flag(rig, before=(rig.eop(done.va, 7),)))
        assert got == RELEASED_BY_THE_PACKET and u32(done, 1)[0] == 7, f"schedule {s}"
        u32(done, 1)[0] = 0


def test_an_end_of_pipe_release_mem_is_not_written_while_the_dispatch_runs(rig):
    """The other side of the same rule: a RELEASE_MEM writing the spinner's flag is queued behind the spinner,
    so the spinner never sees it (a RELEASE_MEM that wrote when the CP reached it would be seen)."""
    for event in EOP_EVENTS.values():
        for s in (0, 1, 2):
            got = bounded_spin_then(rig, s, lambda q, flag: rig.pm4(q, rig.eop(flag.va, PACKET_RELEASE, *event)))
            assert got == HELD_BACK, f"event {event}, schedule {s}"


def test_cs_partial_flush_waits_for_the_running_dispatch_under_every_schedule(rig):
    """Facts 3.3 EVENT_WRITE CS_PARTIAL_FLUSH: 'the CP waits until all previously launched compute work of this
    queue has finished before processing further packets': the WRITE_DATA behind it can never release the
    spinner. Endless spinner: the machine livelocks, the host releases it, only then the WRITE_DATA runs."""
    flush_then_write = _write_flag(rig, before=(pm4.cs_partial_flush(),))
    if (rig.target, rig.kind) in DIAGONAL:  # a livelock detection costs ~0.5 s: two configs are enough
        assert spin_then(rig, 0, flush_then_write) == (True, HOST_RELEASE, PACKET_RELEASE)
    for s in (0, *SPIN_SCHEDULES):
        assert bounded_spin_then(rig, s, flush_then_write) == HELD_BACK, f"schedule {s}"
    # every earlier dispatch, not just the latest: a short kernel between the spinner and the flush
    b = rig.buf()
    short_then_flush = lambda q, flag: flush_then_write(rig.kernel(q, rig.iota, [b, 1, N]), flag)
    for s in (0, *SPIN_SCHEDULES):
        assert bounded_spin_then(rig, s, short_then_flush) == HELD_BACK, f"schedule {s}"


def test_two_dispatches_without_cs_partial_flush_overlap_under_some_schedule(rig):
    """Facts 6.3: without CS_PARTIAL_FLUSH the next dispatch may start while the first runs: a kernel that stores
    the spinner's flag releases it (AQL: the second dispatch packet has no barrier bit)."""
    release = lambda q, flag: rig.kernel(q, rig.store, [flag, PACKET_RELEASE], 64, 64)
    runs = [spin_then(rig, s, release) for s in SPIN_SCHEDULES]
    assert RELEASED_BY_THE_PACKET in runs, f"never observed an overlap: {runs}"


def test_cs_partial_flush_keeps_the_next_dispatch_from_starting(rig):
    def release(q, flag):
        rig.pm4(q, pm4.cs_partial_flush())
        return rig.kernel(q, rig.store, [flag, PACKET_RELEASE], 64, 64)
    for s in (0, *SPIN_SCHEDULES):
        assert bounded_spin_then(rig, s, release) == HELD_BACK, f"schedule {s}"


def cp_dma_then_probe(rig, seed, *, wait=False):
    """One queue: a DMA_DATA copy without CP_SYNC (facts 3.3 CP_SYNC[31]), [a zero-byte DMA_DATA with CP_SYNC,]
    then a COPY_DATA of the copy's last dword to a probe (AQL: all in one vendor PM4 IB). Returns (probe, want)."""
    src, dst, probe = rig.buf(), rig.buf(), rig.buf(64)
    u32(src)[:] = iota(7)
    under(rig, seed)
    wait_dma = (pm4.dma_data(0, 0, 0),) if wait else ()
    q = rig.pm4(rig.dev.compute_queue(0), pm4.dma_data(dst.va, src.va, 4 * N, cp_sync=0), *wait_dma,
                pm4.copy_data(dst.va + 4 * N - 4, probe.va))
    q.submit()
    rig.dev.synchronize()
    under(rig, 0)
    assert np.array_equal(u32(dst), iota(7))  # the copy itself always completes
    return int(u32(probe, 1)[0]), int(iota(7)[-1])


def test_a_packet_after_a_dma_data_without_cp_sync_may_overtake_it_never_in_order(rig):
    """Without CP_SYNC the CP reads on while its DMA engine copies (derived: PAL waits for such 'CP blts' with a
    DMA_DATA that has CP_SYNC; the ring does not wait for them): a later COPY_DATA may read the copy's last dword
    before it landed under some schedule; in order never, and never behind a CP_SYNC DMA_DATA."""
    seen, want = cp_dma_then_probe(rig, 0)
    assert seen == want
    explored = [cp_dma_then_probe(rig, s)[0] for s in SCHEDULES]
    assert 0 in explored, f"no schedule let the COPY_DATA overtake the copy: {explored}"
    for s in (0, *SCHEDULES):
        assert cp_dma_then_probe(rig, s, wait=True)[0] == want, f"schedule {s}"


def spin_on_queue0_then(rig, seed, other_packets, *, barrier=0):
    """The spinner on queue 0, `other_packets(flag)` on queue 1 (one vendor packet with `barrier` on AQL).
    Queue 1 first waits for a gate queue 0 opens just before its dispatch: both are ready while it runs."""
    gate = rig.buf(64)

    def before(q, flag):
        q1 = rig.pm4(rig.dev.compute_queue(1), pm4.wait_reg_mem(gate.va, 1, function=5))
        rig.pm4(q1, *other_packets(flag), barrier=barrier).submit()  # AQL: its barrier bit is checked here
        rig.pm4(q, pm4.write_data(gate.va, [1]))
    return spin_then(rig, seed, lambda q, flag: q, before)


def test_cs_partial_flush_waits_only_for_its_own_queue(rig):
    """Facts 3.3: CS_PARTIAL_FLUSH waits for 'previously launched compute work *of this queue*': on another queue
    it does not wait for queue 0's running dispatch (over-waiting would livelock)."""
    flush_then_write = lambda flag: (pm4.cs_partial_flush(), pm4.write_data(flag.va, [PACKET_RELEASE]))
    for s in SPIN_SCHEDULES:
        assert spin_on_queue0_then(rig, s, flush_then_write) == RELEASED_BY_THE_PACKET, f"schedule {s}"


def test_end_of_pipe_release_mem_on_another_queue_does_not_wait_for_this_queues_dispatch(rig):
    """Facts 3.3: the EOP tracking lives in *the queue's* EOP buffer [derived: an EOP event drains its own
    queue's work], so a RELEASE_MEM on queue 1 with nothing before it writes while queue 0's kernel spins."""
    for s in SPIN_SCHEDULES:
        got = spin_on_queue0_then(rig, s, lambda flag: (rig.eop(flag.va, PACKET_RELEASE),))
        assert got == RELEASED_BY_THE_PACKET, f"schedule {s}"


def test_end_of_pipe_release_mem_does_not_wait_for_a_later_dispatch(rig):
    """Facts 3.3: the event waits for 'all previously issued work' only: iota(a), RELEASE_MEM, then a kernel
    that spins on the value it writes, is always released, and a was complete when it was."""
    flag, out, a, snap = rig.buf(64), rig.buf(64), rig.buf(), rig.buf()
    for s in SPIN_SCHEDULES:
        u32(flag, 1)[0] = u32(out, 1)[0] = 0
        under(rig, s)
        q = rig.kernel(rig.dev.compute_queue(0), rig.iota, [a, 1, N])
        rig.pm4(q, rig.eop(flag.va, PACKET_RELEASE))
        rig.kernel(q, rig.spin, [flag, out], 64, 64).submit()
        rig.snapshot(rig.dev.compute_queue(1), flag, a, snap).submit()
        rig.dev.synchronize()  # a livelock here would be a DeadlockError
        under(rig, 0)
        assert u32(out, 1)[0] == PACKET_RELEASE and np.array_equal(u32(snap), iota(1)), f"schedule {s}"


def producer_consumer(rig, seed, *, flush: bool):
    """iota(a); [CS_PARTIAL_FLUSH | AQL barrier bit]; scale(a -> b, 3): what b holds."""
    a, b = rig.buf(), rig.buf()
    under(rig, seed)
    q = rig.kernel(rig.dev.compute_queue(0), rig.iota, [a, 1, N])
    if flush and rig.kind == "pm4":
        rig.pm4(q, pm4.cs_partial_flush())
    rig.kernel(q, rig.scale, [a, b, 3, N], barrier=int(flush)).submit()
    rig.dev.synchronize()
    under(rig, 0)
    return u32(b).copy()


def test_a_dependent_dispatch_without_flush_or_barrier_reads_stale_data_under_some_schedule(rig):
    assert any(not np.array_equal(producer_consumer(rig, s, flush=False), 3 * iota(1)) for s in SCHEDULES), \
        "never observed: the consumer always saw the producer finished"


def test_a_dependent_dispatch_behind_cs_partial_flush_or_barrier_bit_reads_the_producers_data(rig):
    for s in (0, *SCHEDULES):
        assert np.array_equal(producer_consumer(rig, s, flush=True), 3 * iota(1)), f"schedule {s}"


# -- the in-order default keeps program order for kernels longer than a quantum -------------------------------

# iota after a delay: every work-item counts to %n in registers first (thousands of issue steps: several quanta),
# then stores start + t to out[t]
DELAYED_IOTA_IR = """
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()
define amdgpu_kernel void @delayed_iota(ptr addrspace(1) %out, i32 %start, i32 %n) {
entry:
  br label %delay
delay:
  %i = phi i32 [ 0, %entry ], [ %j, %delay ]
  %j = add i32 %i, 1
  %more = icmp ult i32 %j, %n
  br i1 %more, label %delay, label %store
store:
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %g = call i32 @llvm.amdgcn.workgroup.id.x()
  %g64 = mul i32 %g, 64
  %gt = add i32 %g64, %t
  %v = add i32 %gt, %start
  %p = getelementptr i32, ptr addrspace(1) %out, i32 %gt
  store i32 %v, ptr addrspace(1) %p, align 4
  ret void
}
"""
DELAY = 2500  # iterations: more than two quanta of issue steps
@pytest.fixture(scope="module", params=CONFIGS, ids=IDS)
def in_order_rig(request):
    """The real default policy (run_to_block), with the long kernels."""
    r = Rig(*request.param)
    r.delayed_iota = r.dev.load_program(compile_llvm(DELAYED_IOTA_IR, r.target), "delayed_iota")
    r.counting_spin = r.bounded_spin  # with NO_BOUND: polls counting its tries (a counting spin, shader.spin)
    yield r
    r.close()


def test_in_order_a_write_data_after_a_long_kernel_is_never_seen_before_its_stores(in_order_rig):
    """The in-order default keeps program order however long a kernel runs: a WRITE_DATA signal after a kernel of
    several quanta (no flush, no barrier bit) is observed only after the kernel's stores. (Under explored schedules
    it races: the first test of this module.)"""
    rig = in_order_rig
    a, snap, flag = rig.buf(), rig.buf(), rig.buf(64)
    q = rig.kernel(rig.dev.compute_queue(0), rig.delayed_iota, [a, 1, DELAY])
    rig.pm4(q, pm4.write_data(flag.va, [1]))
    rig.snapshot(rig.dev.compute_queue(1), flag, a, snap).submit()
    q.submit()
    rig.dev.synchronize()
    assert np.array_equal(u32(a), iota(1)) and np.array_equal(u32(snap), iota(1))


def test_in_order_a_dispatch_after_a_long_kernel_reads_its_results(in_order_rig):
    """Two dependent dispatches with no CS_PARTIAL_FLUSH or barrier bit: in order the consumer starts only after
    the long producer ended."""
    rig = in_order_rig
    a, b = rig.buf(), rig.buf()
    q = rig.kernel(rig.dev.compute_queue(0), rig.delayed_iota, [a, 1, DELAY])
    rig.kernel(q, rig.scale, [a, b, 3, N]).submit()
    rig.dev.synchronize()
    assert np.array_equal(u32(b), 3 * iota(1))


@pytest.mark.parametrize("overtake", ["counting_spin", "backstop"])
def test_in_order_a_spin_only_a_later_packet_releases_still_completes(in_order_rig, overtake):
    """Where progress needs it, a later packet overtakes a running kernel even in order: the exact spinner is
    found spinning (the WRITE_DATA after it releases it, the first spin tests above); a poll that counts its
    tries is found as a counting spin after `spin_iterations` iterations (shader.spin) and overtaken then; with
    counting spins never reported (spin_iterations=None), only the backstop is left: overtaken once it has changed
    no memory for `overtake_steps` issue steps (16 quanta by default; lowered to 2 quanta here)."""
    rig = in_order_rig
    gpu = rig.dev.os.system.gpus[0]  # test-only look inside the emulated machine
    core = gpu.shader_core
    if overtake == "backstop":
        gpu.overtake_steps, core.spin_iterations = 2 * DISPATCH_QUANTUM, None
    try:
        flag, out = rig.buf(64), rig.buf(64)
        q = rig.kernel(rig.dev.compute_queue(0), rig.counting_spin, [flag, out, NO_BOUND], 64, 64)
        rig.pm4(q, pm4.write_data(flag.va, [PACKET_RELEASE])).submit()
        rig.dev.synchronize()
        assert u32(out, 2)[0] == PACKET_RELEASE
        tries = int(u32(out, 2)[1])
        if overtake == "backstop":
            assert tries * 12 >= gpu.overtake_steps  # it polled (<= 12 issue steps a try) until overtaken
        else:  # found once it had counted spin_iterations tries, long before the backstop
            assert SPIN_ITERATIONS <= tries and tries * 4 < gpu.overtake_steps, tries
    finally:
        gpu.overtake_steps, core.spin_iterations = OVERTAKE_STEPS, SPIN_ITERATIONS


# -- order inside one dispatch ------------------------------------------------------------------------------


def arrival_order(rig, seed, groups, local):
    counter, order = rig.buf(64), rig.buf(4096)
    under(rig, seed)
    q = rig.kernel(rig.dev.compute_queue(0), rig.arrive, [counter, order], groups * local, local)
    rig.pm4(q, pm4.cs_partial_flush()).submit()
    rig.dev.synchronize()
    under(rig, 0)
    n = int(u32(counter, 1)[0])
    assert n == groups * local // 32
    return list(u32(order, n))


def test_workgroups_of_one_dispatch_reach_memory_out_of_launch_order_under_some_schedule(rig):
    """Nothing in the facts orders the workgroups of a dispatch (4.3/4.5 only give their ids): a later
    workgroup's atomic may come first."""
    orders = [arrival_order(rig, s, 8, 32) for s in SCHEDULES]
    assert all(sorted(o) == [g * 1000 for g in range(8)] for o in orders)  # each workgroup exactly once
    assert any(o != sorted(o) for o in orders), "never observed: workgroups always arrived in launch order"


def test_waves_of_one_workgroup_reach_memory_out_of_wave_order_under_some_schedule(rig):
    """The waves of a workgroup run independently between barriers (no s_barrier here): wave 1's atomic may
    come before wave 0's. Workgroup of 128: four wave32s on gfx1100, two wave64s on gfx942."""
    orders = [arrival_order(rig, s, 1, 128) for s in (0, *SCHEDULES)]
    assert all(sorted(o) == [0, 1, 2, 3] for o in orders)
    assert orders[0] == [0, 1, 2, 3]  # the in-order default: waves at one PC issue together, in wave order
    assert any(o != sorted(o) for o in orders), f"never observed: waves always in order ({orders[:3]}...)"


# -- 3.3 INDIRECT_BUFFER: 'executes the IB's dwords to completion', not its dispatches ----------------------


def test_a_dispatch_launched_from_an_indirect_buffer_runs_past_the_ib_return(pm4_rig):
    """The ring's WRITE_DATA after an IB that launched the spinner releases it (the CP returned from the IB
    with the dispatch still running); a CS_PARTIAL_FLUSH in the ring after the IB waits for that dispatch.
    (PM4 rings; on AQL every PM4 run is already an IB of a vendor packet.)"""
    rig = pm4_rig

    def in_ib(q, flag, *after):
        dws = [d for p in q.packets for d in p]
        at = rig.ib.va + rig.ib_put
        if rig.ib_put + 4 * len(dws) > len(rig.ib.view):
            rig.ib_put, at = 0, rig.ib.va
        rig.ib.view[rig.ib_put:rig.ib_put + 4 * len(dws)] = np.array(dws, np.uint32).view(np.uint8)
        rig.ib_put = (rig.ib_put + 4 * len(dws) + 255) & ~255
        q.packets[:] = [pm4.indirect_buffer(at, len(dws)), *after, pm4.write_data(flag.va, [PACKET_RELEASE])]
        return q
    for s in (0, *SPIN_SCHEDULES):
        assert spin_then(rig, s, in_ib) == RELEASED_BY_THE_PACKET, f"schedule {s}"
    flushed = lambda q, flag: in_ib(q, flag, pm4.cs_partial_flush())
    assert spin_then(rig, 0, flushed) == (True, HOST_RELEASE, PACKET_RELEASE)


# -- 4.6 AQL: barrier bit, completion signal ----------------------------------------------------------------


def test_aql_packet_with_the_barrier_bit_waits_for_the_running_dispatch(aql_rig):
    """HSA barrier bit (facts 4.6 header BARRIER[8]): the packet starts only after every earlier packet
    completed. A vendor PM4 packet with it set never releases the spinner; without it, it always does (the
    packet processor goes on past a dispatch)."""
    for s in (0, *SPIN_SCHEDULES):
        assert bounded_spin_then(aql_rig, s, _write_flag(aql_rig, barrier=1)) == HELD_BACK, f"schedule {s}"
    for s in SPIN_SCHEDULES:
        assert spin_then(aql_rig, s, _write_flag(aql_rig, barrier=0)) == RELEASED_BY_THE_PACKET, f"schedule {s}"


def test_aql_dispatch_with_the_barrier_bit_waits_for_the_running_dispatch(aql_rig):
    release = lambda q, flag: aql_rig.kernel(q, aql_rig.store, [flag, PACKET_RELEASE], 64, 64, barrier=1)
    for s in (0, *SPIN_SCHEDULES):
        assert bounded_spin_then(aql_rig, s, release) == HELD_BACK, f"schedule {s}"


def test_aql_barrier_bit_waits_only_for_its_own_queue(aql_rig):
    """HSA: the barrier bit orders a packet after the earlier packets *of its queue*; a barrier-bit packet on
    queue 1 does not wait for queue 0's dispatch."""
    write = lambda flag: (pm4.write_data(flag.va, [PACKET_RELEASE]),)
    for s in SPIN_SCHEDULES:
        assert spin_on_queue0_then(aql_rig, s, write, barrier=1) == RELEASED_BY_THE_PACKET, f"schedule {s}"


def new_amd_signal(rig, value: int):
    """An amd_signal_t (facts 4.6 via aql.py: kind i64 @0, value i64 @8) in device memory."""
    sig = rig.buf(64)
    struct.pack_into("<qq", sig.view, 0, 1, value)
    return sig


def completion_signal_run(rig, seed, groups: int):
    """iota(a) over `groups` workgroups with a completion signal (value 1), no barrier after it; a vendor packet
    without the barrier bit waits for the signal's low word == 0 and snapshots a."""
    a, snap = rig.buf(4 * 64 * groups), rig.buf(4 * 64 * groups)
    sig = new_amd_signal(rig, 1)
    under(rig, seed)
    q = rig.kernel(rig.dev.compute_queue(0), rig.iota, [a, 1, 64 * groups], 64 * groups, 64,
                   completion=sig.va)
    rig.pm4(q, pm4.wait_reg_mem(sig.va + aql.SIGNAL_VALUE, 0, function=3),
            pm4.dma_data(snap.va, a.va, 4 * 64 * groups))
    q.submit()
    rig.dev.synchronize()
    under(rig, 0)
    return u32(snap, 64 * groups).copy(), struct.unpack_from("<q", sig.view, aql.SIGNAL_VALUE)[0]


def test_aql_completion_signal_drops_once_after_all_waves(aql_rig):
    """HSA completion signal (facts 4.6 completion_signal @56): decremented when the dispatch completed, i.e.
    after all its waves; once (1 -> 0, not once per wave or workgroup)."""
    for groups in (1, 4):
        for s in (0, *SCHEDULES):
            snap, value = completion_signal_run(aql_rig, s, groups)
            assert value == 0, f"schedule {s}: completion signal ended at {value}"
            assert np.array_equal(snap, np.arange(1, 64 * groups + 1, dtype=np.uint32)), f"schedule {s}"


# -- 6.2 / 3.3 the timestamp of an end-of-pipe RELEASE_MEM ------------------------------------------------


def test_an_end_of_pipe_timestamp_is_taken_after_the_kernel_ends(rig):
    """Facts 3.3 RELEASE_MEM DATA_SEL 3 (GPU clock) is data written at end of pipe. Queue 0: spinner,
    RELEASE_MEM timestamp, WRITE_DATA gate (so the CP has reached the RELEASE_MEM); queue 1: wait for the gate,
    read the GPU clock (COPY_DATA SRC_SEL 9), release the spinner. The timestamp is not earlier than that read."""
    ts_eop, ts_release, gate = rig.buf(64), rig.buf(64), rig.buf(64)
    clock_to_memory = pm4.copy_data(0, ts_release.va, src_sel=9, dst_sel=5 if rig.family == "gfx9" else 2,
                                    count_sel=1)

    def before(q, flag):
        q1 = rig.pm4(rig.dev.compute_queue(1), pm4.wait_reg_mem(gate.va, 1, function=5))
        rig.pm4(q1, clock_to_memory, pm4.write_data(flag.va, [PACKET_RELEASE])).submit()
        return q
    after = lambda q, flag: rig.pm4(q, pm4.release_mem(ts_eop.va, 0, data_sel=3, family=rig.family),
                                    pm4.write_data(gate.va, [1]))
    for s in (0, *SPIN_SCHEDULES):
        u32(gate, 1)[0] = 0
        assert spin_then(rig, s, after, before) == RELEASED_BY_THE_PACKET, f"schedule {s}"
        t_eop, t_release = (struct.unpack_from("<Q", b.view, 0)[0] for b in (ts_eop, ts_release))
        assert t_release and t_eop >= t_release, f"schedule {s}: EOP timestamp {t_eop} < release at {t_release}"


# -- free-running: the GPU thread's own interleaving keeps the guarantees -----------------------------------


@pytest.mark.parametrize("target, kind", DIAGONAL)
def test_free_running_keeps_end_of_pipe_and_flush_guarantees(target, kind):
    r = Rig(target, kind, free_running=True)
    try:
        for _ in range(2):
            sa, sb = eop_signal(r, 0, "CACHE_FLUSH_AND_INV_TS")
            assert np.array_equal(sa, iota(1)) and np.array_equal(sb, iota(1001))
            assert np.array_equal(write_data_signal(r, 0, flush=True), iota(1))
            assert bounded_spin_then(r, 0, _write_flag(r, before=(pm4.cs_partial_flush(),))) == HELD_BACK
    finally:
        r.close()


# -- determinism -------------------------------------------------------------------------------------------


def traced_program(target, kind, policy, seed):
    """A program whose outcome depends on the schedule (a WRITE_DATA racing a kernel, a spinner released by a
    later packet, an end-of-pipe signal): its GPU trace and memory."""
    r = Rig(target, kind, policy=policy, seed=seed)
    try:
        a, snap, flag, spin_flag, out, done = r.buf(), r.buf(), r.buf(64), r.buf(64), r.buf(64), r.buf(64)
        q = r.kernel(r.dev.compute_queue(0), r.iota, [a, 1, N])
        r.pm4(q, pm4.write_data(flag.va, [1]))
        r.kernel(q, r.spin, [spin_flag, out], 64, 64)
        r.pm4(q, r.eop(done.va, 5), pm4.write_data(spin_flag.va, [PACKET_RELEASE]))
        r.snapshot(r.dev.compute_queue(1), flag, a, snap).submit()
        q.submit()
        r.dev.synchronize()
        gpu = r.dev.os.system.gpus[0]  # test-only look inside the emulated machine
        return gpu.trace_lines(), bytes(snap.view[:4 * N]) + bytes(out.view[:4]) + bytes(done.view[:4])
    finally:
        r.close()


@pytest.mark.parametrize("target, kind, policy, seed", [("gfx1100", "pm4", "run_to_block", 0),
                                                       ("gfx942", "aql", "run_to_block", 0),
                                                       ("gfx1100", "aql", "random", 7), ("gfx942", "pm4", "random", 7)])
def test_same_policy_and_seed_give_a_byte_identical_trace(target, kind, policy, seed):
    first, second = traced_program(target, kind, policy, seed), traced_program(target, kind, policy, seed)
    assert first[0] == second[0] and first[1] == second[1]
    assert sum("dispatch kernel at" in ln for ln in first[0]) == 2


def test_a_release_mem_that_is_not_end_of_pipe_or_shader_done_is_refused_not_run_early():
    """Facts 3.3 RELEASE_MEM EVENT_INDEX: 5 = END_OF_PIPE, 6 = SHADER_DONE; nothing else is defined, so an
    index 0 release is a fault naming the field, never a write that skips the wait."""
    from hcqsim.errors import DeviceFault
    r = Rig("gfx1100", "pm4")
    try:
        a, flag = r.buf(), r.buf(64)
        q = r.kernel(r.dev.compute_queue(0), r.iota, [a, 1, N])
        r.pm4(q, r.eop(flag.va, 1, event_index=0)).submit()
        with pytest.raises(DeviceFault, match="RELEASE_MEM EVENT_INDEX 0"):
            r.dev.synchronize()
        assert u32(flag, 1)[0] == 0
    finally:
        r.close()
