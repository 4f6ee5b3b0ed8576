"""Python's garbage collection, kept off the GPU thread while a free-running system lives (issue 22's wedge).

CPython runs a collection -- and with it the finalizers (`__del__`, weakref callbacks) of the garbage it finds -- in
whichever thread's allocation crosses the generation-0 threshold. The GPU thread allocates more than any host
thread, so a client's finalizers ran there, inside an engine step that holds the system lock. A finalizer that
waits for GPU work then waits for ever: the thread that would deliver its doorbell and run its packets is the one
waiting. tinygrad's do (`HCQGraph.__del__` waits for its last timeline value, a freed buffer synchronizes its
device), so after ~150 of tinygrad's own tests on 6 GPUs every GPU stopped: doorbells undelivered, queues busy,
no fault, the thread alive (it was spinning in tinygrad's wait, releasing the lock only inside WAIT_EVENTS). On
hardware no code of the process runs on the GPU.

So while any free-running system lives, automatic collection is off (`gc.disable()`) and a helper thread,
"hcqsim-gc", runs the collections CPython's thresholds call for, outside the system lock: a finalizer waiting for
the GPUs waits there while they run. The thread applies CPython's generational rule (`generation_due`), including
its check that a full collection waits until the objects promoted to the oldest generation since the last one
reach a quarter of what it held then, so collections cost what they cost without hcqsim. Thresholds the client
sets (`gc.set_threshold`) are honoured; a client that had collection disabled keeps it so (nothing is collected
for it); a `gc.enable()` while a system lives is taken back at the next look (it would put collections on the
GPU thread again) and counted in `Collector.retaken`. The last system's close restores automatic collection.
What differs from a plain interpreter: finalizers run on the helper thread, beside the client's threads, not
inside them (CPython already runs them in any thread that happens to allocate).
"""
from __future__ import annotations

import gc
import threading


def generation_due(count: tuple[int, int, int], threshold: tuple[int, int, int], pending: int,
                   total: int) -> int | None:
    """The generation CPython's automatic collection would collect now (gc_collect_generations), or None.
    `pending`: objects promoted to the oldest generation since its last collection; `total`: what it held then."""
    if threshold[0] == 0:  # gc.set_threshold(0): automatic collection off
        return None
    for gen in (2, 1, 0):
        if count[gen] > threshold[gen]:
            if gen == 2 and pending < total // 4:
                continue  # a full collection waits for 25% more long-lived objects
            return gen
    return None


class Collector:
    """The helper thread doing the automatic collections while free-running systems live (reference-counted)."""

    def __init__(self, interval_s: float = 0.005):
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._users = 0
        self._was_enabled = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.pending = self.total = 0  # CPython's long_lived_pending / long_lived_total, as estimated here
        self.collections = [0, 0, 0]  # by generation, for tests
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
            self.pending, self.total = 0, len(gc.get_objects(2))
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

    def _main(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval_s):
            if gc.isenabled():  # automatic collection would run on the GPU thread again
                gc.disable()
                self.retaken += 1
            try:
                self.collect_due()
            except Exception:  # never die: the next look tries again (finalizer errors never reach here)
                pass

    def collect_due(self) -> int | None:
        """Run the collection that is due, if any; returns its generation. Survivors of a generation-1 collection
        are promoted to the oldest generation (what CPython adds to long_lived_pending)."""
        gen = generation_due(gc.get_count(), gc.get_threshold(), self.pending, self.total)
        if gen == 2:
            gc.collect(2)
            self.pending, self.total = 0, len(gc.get_objects(2))
        elif gen == 1:
            young = len(gc.get_objects(0)) + len(gc.get_objects(1))
            self.pending += max(0, young - gc.collect(1))
        elif gen == 0:
            gc.collect(0)
        if gen is not None:
            self.collections[gen] += 1
        return gen


COLLECTOR = Collector()  # one per process: the collector state is the interpreter's
