"""Python's garbage collection, kept off the GPU thread while a free-running system lives (issue 22's wedge).

CPython runs a collection -- and with it the finalizers (`__del__`, weakref callbacks) of the garbage it finds -- in
whichever thread's allocation crosses the generation-0 threshold. The GPU thread allocates more than any host
thread, so a client's finalizers ran there, inside an engine step that holds the system lock. A finalizer that
waits for GPU work then waits for ever: the thread that would deliver its doorbell and run its packets is the one
waiting. tinygrad's do (`HCQGraph.__del__` waits for its last timeline value, a freed buffer synchronizes its
device), so after ~150 of tinygrad's own tests on 6 GPUs every GPU stopped: doorbells undelivered, queues busy,
no fault, the thread alive (it was spinning in tinygrad's wait, releasing the lock only inside WAIT_EVENTS). On
hardware no code of the process runs on the GPU.

So while any free-running system lives, automatic collection is off (`gc.disable()`) and a collection CPython's
thresholds call for (`generation_due`) runs where CPython would have run it, in a client thread, at a point where
the client calls into hcqsim: `at_call()`, at the top of every ioctl, mmap and munmap of the emulated OS, before
the system lock is taken, so a finalizer waiting for the GPUs waits while they run. Running them on a helper thread
instead, at any bytecode of the client, was tried first and broke tinygrad: its finalizers (`Tensor.__del__`)
remove entries from a dict the main thread iterates (`all_tensors`), and a collection between two iterations
raised "dictionary changed size during iteration" (3 failures in 320 of tinygrad's tests); CPython collects only
inside an allocation, and those loops allocate nothing a collection counts. A helper thread, "hcqsim-gc", still
watches: a collection due for `GRACE_S` with no call into hcqsim (a client computing on its own, or sleeping) runs
there, so garbage stays bounded. In place of CPython's check that a full collection waits for the long-lived
objects to grow by a quarter (which needs their count: `gc.get_objects` cannot give it safely, see below), a full
collection waits until at least `FULL_SPACING` times the last one's duration has passed, so full collections take
at most ~5% of the time. `gc.get_objects` is never called: the list it returns holds references to objects other
threads are still building, and CPython's in-place tuple resizing then fails (`SystemError:
Objects/tupleobject.c: bad argument to internal function`, twice in 1250 s of tinygrad's tests when this module
counted generations that way). Thresholds the client sets (`gc.set_threshold`) are honoured; a client that had
collection disabled keeps it so (nothing is collected for it); a `gc.enable()` while a system lives is taken back
at the next look (it would put collections on the GPU thread again) and counted in `Collector.retaken`. The last
system's close restores automatic collection.
"""
from __future__ import annotations

import gc
import threading
import time


FULL_SPACING = 20  # a full collection waits this many times the last one's duration after it (<= ~5% of the time)
GRACE_S = 1.0  # a collection due this long with no call into hcqsim runs on the helper thread


def generation_due(count: tuple[int, int, int], threshold: tuple[int, int, int], full_allowed: bool) -> int | None:
    """The generation to collect now, CPython's thresholds (gc_collect_generations), or None; the oldest one only
    when `full_allowed` (else the next younger one due is collected, as CPython does when it skips a full one)."""
    if threshold[0] == 0:  # gc.set_threshold(0): automatic collection off
        return None
    for gen in (2, 1, 0):
        if count[gen] > threshold[gen]:
            if gen == 2 and not full_allowed:
                continue
            return gen
    return None


class Collector:
    """The helper thread doing the automatic collections while free-running systems live (reference-counted)."""

    def __init__(self, interval_s: float = 0.005, grace_s: float = GRACE_S):
        self.interval_s, self.grace_s = interval_s, grace_s
        self._lock = threading.Lock()
        self._users = 0
        self._was_enabled = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.full_done_at = self.full_took = 0.0  # monotonic end and duration of the last full collection
        self.collections = [0, 0, 0]  # by generation, for tests
        self.on_helper = 0  # of those, how many ran on the helper thread (no call into hcqsim for grace_s)
        self._due_since: float | None = None  # monotonic time the helper first saw a collection due
        self.retaken = 0  # gc.enable() calls taken back while a system lived

    @property
    def active(self) -> bool:
        return self._thread is not None

    def acquire(self) -> None:
        with self._lock:
            self._users += 1
            if self._users > 1:
                return
            self._was_enabled = gc.isenabled()
            if not self._was_enabled:
                return  # the client collects by hand (or not at all): nothing to move
            gc.disable()
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._main, args=(self._stop,), name="hcqsim-gc", daemon=True)
            self._thread.start()

    def release(self, timeout_s: float = 10.0) -> None:
        with self._lock:
            self._users -= 1
            if self._users or self._thread is None:
                return
            self._stop.set()
            if self._thread is not threading.current_thread():  # a finalizer may close the last system
                self._thread.join(timeout_s)
            self._thread = None
            gc.enable()  # under the lock: a system opened meanwhile sees the client's own setting

    def at_call(self) -> int | None:
        """A client thread calls into hcqsim: the collection that is due, if any, runs here and now (returns its
        generation), as CPython runs one inside the allocation that makes it due."""
        if self._thread is None:
            return None
        return self.collect_due()

    def _main(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval_s):
            if gc.isenabled():  # automatic collection would run on the GPU thread again
                gc.disable()
                self.retaken += 1
            try:
                self._collect_if_overdue()
            except Exception:  # never die: the next look tries again (finalizer errors never reach here)
                pass

    def _collect_if_overdue(self) -> None:
        now = time.monotonic()
        if self._due(now) is None:
            self._due_since = None
        elif self._due_since is None:
            self._due_since = now
        elif now - self._due_since >= self.grace_s and self.collect_due() is not None:
            self.on_helper += 1

    def _due(self, now: float) -> int | None:
        return generation_due(gc.get_count(), gc.get_threshold(),
                              now - self.full_done_at >= FULL_SPACING * self.full_took)

    def collect_due(self) -> int | None:
        """Run the collection that is due, if any; returns its generation."""
        now = time.monotonic()
        gen = self._due(now)
        if gen is None:
            return None
        self._due_since = None
        gc.collect(gen)
        if gen == 2:
            self.full_done_at = time.monotonic()
            self.full_took = self.full_done_at - now
        self.collections[gen] += 1
        return gen


COLLECTOR = Collector()  # one per process: the collector state is the interpreter's
