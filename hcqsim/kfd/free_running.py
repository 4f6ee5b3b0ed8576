"""Free-running mode: the GPUs of an `EmulatedSystem` run on a background thread, beside the host, as
hardware does (issue 12). The thread notices doorbell stores by itself (a plain 64-bit store into the mapped
doorbell slice is enough; no call into the driver is needed), re-checks WAIT_REG_MEM / POLL_REGMEM stalls,
and raises the interrupts that wake WAIT_EVENTS sleepers.

Idle policy. Python threads share one interpreter lock, so "noticing" a store costs the host thread a GIL
hand-over; the policy keeps that cheap while work is arriving and free while nothing is:
- busy: run every GPU until no queue can advance, then look again at once;
- for `spin_s` after the last executed packet (or driver call): look every `spin_sleep_s` (a short wait on the
  system's condition, releasing the GIL so a host thread spinning on signal memory keeps running, and ended
  at once by a driver call) -- the low-latency phase;
- after that: sleep on the system's condition with a timeout doubling from `spin_sleep_s` to `max_sleep_s`;
  any driver call that may create work (a doorbell through the boundary, CREATE/UPDATE_QUEUE, WAIT_EVENTS,
  SET_EVENT) notifies the condition and restarts the low-latency phase. A store nobody announces is seen
  within `max_sleep_s`.

The engine step (doorbell delivery plus one bounded `EmulatedGPU.step` of `IdlePolicy.quantum` packets and issue
steps per GPU) holds the system lock, the same lock every ioctl, mmap and munmap takes, so driver state is never
seen half-updated; the lock is released between steps, so driver calls proceed within a quantum while a long
kernel runs. Host threads reading and writing GPU memory while the engines run need no lock (that is the normal
case, as on hardware). A machine with nothing but waves spinning on memory nobody writes counts as idle: the
thread sleeps as above and looks again (a host store that releases the spin is seen within `max_sleep_s`).

Python's automatic garbage collection is moved off this thread while it lives (`collector`): a client finalizer
that waits for GPU work, run here by a collection this thread's allocations triggered, would wedge every GPU.
"""
from __future__ import annotations

import ctypes
import sys
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .collector import COLLECTOR

if TYPE_CHECKING:
    from .system import EmulatedSystem


@dataclass(frozen=True)
class IdlePolicy:
    """How the GPU thread looks for work when there is none (see the module docstring)."""

    spin_s: float = 0.005
    spin_sleep_s: float = 0.00002
    max_sleep_s: float = 0.001
    # While the thread runs, the interpreter's switch interval is lowered to this so a host thread spinning in
    # pure Python hands the GIL over within tens of microseconds instead of the default 5 ms.
    switch_interval_s: float = 0.00005
    # Work (packets plus issue steps) per engine step: the system lock is released between steps, so ioctls,
    # doorbells, DESTROY_QUEUE and close() wait at most one quantum (~1-5 ms) while a long kernel runs.
    quantum: int = 256


_interval_lock = threading.Lock()
_interval_users = 0
_saved_interval = 0.005


def _lower_switch_interval(value: float) -> None:
    """Lowered while any free-running system lives; restored when the last one closes."""
    global _interval_users, _saved_interval
    with _interval_lock:
        if _interval_users == 0:
            _saved_interval = sys.getswitchinterval()
        _interval_users += 1
        sys.setswitchinterval(min(sys.getswitchinterval(), value))


def _restore_switch_interval() -> None:
    global _interval_users
    with _interval_lock:
        _interval_users -= 1
        if _interval_users == 0:
            sys.setswitchinterval(_saved_interval)


def _fine_timer_slack() -> None:
    """Linux rounds a sleeping thread's wake-up up by its timer slack (50 us by default): 1 us for this thread,
    so the low-latency phase's short sleeps are short (best effort; prctl PR_SET_TIMERSLACK = 29)."""
    try:
        ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _idle(gpu) -> bool:
    """No queue of `gpu` can change anything without a doorbell store or a driver call: each faulted or destroyed,
    or with no wait to re-check (a WAIT_REG_MEM polls host memory), no kernel or copy running, no packet left."""
    return all(not q.active or (q.wait is None and not q.inflight and not q.dma.pending and not q.has_work())
               for q in gpu.queues)


class GpuThread:
    """The background thread of one free-running system."""

    def __init__(self, system: "EmulatedSystem", policy: IdlePolicy = IdlePolicy()):
        self.system, self.policy = system, policy
        self._stop = self._closed = False
        self._kick = False  # a driver call announced possible work: restart the low-latency phase
        # every queue idle after the last full step (nothing waiting on memory, running, or left to execute), and no
        # driver call since: then only a doorbell store can make work, and a step looks at the doorbells alone
        self._quiet = False
        self.steps = 0  # engine steps that executed something (for tests and benchmarks)
        self.error: BaseException | None = None  # the last emulator error a step raised (the thread goes on)
        self.errors = 0  # how many steps raised
        self.worked_at: deque[float] = deque(maxlen=4096)  # perf_counter() after each step that executed something
        self.in_step = False  # inside the locked part of step() (see suspended_in_step)
        _lower_switch_interval(policy.switch_interval_s)
        COLLECTOR.acquire()  # the client's finalizers must never run on this thread (kfd/collector.py)
        self._thread = threading.Thread(target=self._main, name="hcqsim-gpus", daemon=True)
        self._thread.start()

    def kick(self) -> None:
        """Possible new work (called with the system lock held or not)."""
        with self.system.cond:
            self._kick = True
            self._quiet = False  # a driver call may have changed queues or events: the next step looks in full
            self.system.cond.notify_all()

    def work_arrived(self) -> None:
        """A doorbell store was delivered (called with the system lock held, on any thread): the next step looks in
        full. Without it a store delivered by another thread left the quiet thread looking at the doorbells alone,
        which no longer showed it (tests/test_free_running.py)."""
        self._quiet = False

    def step(self) -> tuple[int, bool]:
        """One engine step under the system lock: deliver doorbell stores, run every GPU until quiet. Returns
        (packets plus issue steps executed, whether work remains: False once quiet or only spinning)."""
        system = self.system
        with system.lock:
            if self._stop or system.closed:
                return 0, False
            driver = system.driver
            if self._quiet and not driver.queues.doorbells_pending():
                return 0, False  # every queue idle, no driver call, no doorbell store: a full step finds nothing
            self.in_step = True
            try:
                executed = driver.queues.poll_doorbells()
                executed += sum(d.gpu.step(self.policy.quantum) for d in driver.devices)
            finally:
                self.in_step = False
            if executed:
                self.worked_at.append(time.perf_counter())
                system.cond.notify_all()  # sleepers re-check their conditions (WAIT_EVENTS, the runtime)
            # quiet, or only waves spinning on memory nobody writes: idle until a store
            busy = bool(executed) and not driver.settled()
            self._quiet = not busy and all(_idle(d.gpu) for d in driver.devices)
            return executed, busy

    def suspended_in_step(self) -> list[str] | None:
        """Asked with the system lock held: the thread's innermost frames when it is inside an engine step all the
        same -- code running on it released the lock in the middle of one (a wait inside a client's finalizer did:
        the issue-22 wedge) -- else None."""
        if not self.in_step:
            return None
        frame = sys._current_frames().get(self._thread.ident)
        return traceback.format_stack(frame)[-6:] if frame is not None else []

    def _main(self) -> None:
        _fine_timer_slack()
        p = self.policy
        self.last_work = time.monotonic()  # when a step last executed something, or a driver call kicked
        backoff = p.spin_sleep_s
        try:
            while not self._stop:
                try:
                    executed, busy = self.step()
                except Exception as e:  # never die: keep the evidence, keep the other queues running
                    self.error, self.errors = e, self.errors + 1
                    time.sleep(p.spin_sleep_s)
                    continue
                if executed:  # also the step that ran the last packet and left the machine quiet: the client
                    self.steps += 1  # is likely to store its next doorbell soon (the low-latency phase)
                    self.last_work, backoff = time.monotonic(), p.spin_sleep_s
                if busy:
                    time.sleep(0)  # hand the GIL over: a thread waiting for the system lock takes it now
                    continue
                low_latency = time.monotonic() - self.last_work < p.spin_s
                with self.system.cond:  # a kick (driver call) ends either wait at once; plain stores are polled
                    if not self._kick and not self._stop:
                        self.system.cond.wait(p.spin_sleep_s if low_latency else backoff)
                    if self._kick:
                        self._kick, self.last_work, backoff = False, time.monotonic(), p.spin_sleep_s
                    elif not low_latency:
                        backoff = min(backoff * 2, p.max_sleep_s)
        except BaseException as e:  # interpreter shutdown and the like: keep it for close() and the reports
            self.error = e

    def close(self, timeout_s: float = 10.0) -> None:
        self._stop = True
        self.kick()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout_s)
        if not self._closed:
            self._closed = True
            _restore_switch_interval()
            COLLECTOR.release()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()
