"""The process's events and interrupts (kfd_events.c, kfd_int_process_v9.c): signal events in the event
page, memory and hardware exception events, the interrupts the GPUs raise, and WAIT_EVENTS.

WAIT_EVENTS keeps the kernel's contract (kfd_wait_on_events): timeout 0 polls; a finite timeout returns
with wait_result KFD_IOC_WAIT_RESULT_TIMEOUT written into the caller's struct. In progress-point mode it is a
progress point (DESIGN_NOTES 3): it keeps driving every GPU in bounded progress points until the awaited events
fire, the timeout elapses, or the machine is settled (quiet, or nothing but waves spinning on memory nobody
writes); settled with a finite timeout, nothing but the host can change anything any more, so it returns TIMEOUT
at once instead of sleeping out a timeout nobody can end. An infinite timeout on a settled machine would hang
the process for ever: in single-threaded use that one case raises DeadlockError (a documented deviation; the
report names blocked queues and spinning waves). Once several host threads have waited on the machine, another
may still release the wait, so it waits as on hardware. In free-running mode it
sleeps on the system's condition until an awaited event fires (the GPU thread's interrupts notify it) or
the timeout elapses. hcqsim's runtime gets its instant deadlock diagnosis from the separate, emulator-only
`OSBoundary.deadlock_report` query, not from this ioctl.
"""
from __future__ import annotations

import ctypes
import errno
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from .. import kfd_uapi as k
from ..coherence.order import join
from ..errors import DeadlockError, Fault
from ..gpu import Interrupt
from ..memory import PAGE_SIZE, page_align
from .uaccess import read_user, write_user

if TYPE_CHECKING:
    from .process import KfdDriver, ProcessDevice

# kfd_wait_on_events allocates one struct kfd_event_waiter (a wait_queue_entry_t of 40 bytes, the event pointer,
# two bools: 56 bytes) per event with kcalloc before reading the user's array; past KMALLOC_MAX_SIZE (4 MiB with
# 4 KiB pages, MAX_ORDER 10) the allocation fails: ENOMEM. [derived from kfd_events.c and the slab limits]
WAITER_BYTES = 56
KMALLOC_MAX_SIZE = 4 << 20
KFD_SIGNAL_OLD_ABI_SLOTS = 256  # slots usable before the driver's event page is mmapped (kfd_events.c)
_SIGNAL_TYPES = (k.KFD_IOC_EVENT_SIGNAL, k.KFD_IOC_EVENT_DEBUG_EVENT)  # own an event-page slot


@dataclass(eq=False)
class Waiter:
    """One WAIT_EVENTS caller's entry on one event."""

    event: "Event | None"  # None once the event was destroyed
    activated: bool
    age_enabled: bool = False


@dataclass(eq=False)
class Event:
    id: int
    type: int
    auto_reset: bool
    signaled: bool = False
    age: int = 1  # kfd_event_create: event_age = 1 (0 is "no age" in the wait array)
    waiters: list[Waiter] = field(default_factory=list)
    memory_data: bytes = bytes(32)
    hw_data: bytes = bytes(16)
    # memory model, report mode: the clock of the interrupts that signalled it (coherence.order); a waiter it wakes
    # joins it. None until an interrupt sets it
    hb: dict | None = field(default=None, repr=False)


@dataclass(eq=False)
class SignalPage:
    va: int
    size: int  # bytes of slots backing it (<= 32 KiB)
    handle: int | None  # user BO handle (dGPU path) or None (driver allocated)


class ProcessEvents:
    """Events, the signal page and the GPUs' interrupt handlers of one process; the event ioctls."""

    def __init__(self, driver: "KfdDriver"):
        self.driver = driver
        self._irq_clock = None  # report mode: the clock of the interrupt being handled (coherence.order)
        self.events: dict[int, Event] = {}
        self.signal_page: SignalPage | None = None
        self.signal_mapped_size = 0
        self.signal_count = 1  # id 0 is reserved at process creation (kfd_event_init_process)
        self._installed = [(dev.gpu, self._irq_handler(dev)) for dev in driver.devices]
        for gpu, handler in self._installed:
            gpu.interrupt_handlers.append(handler)

    def ioctls(self) -> dict[str, Callable]:
        return {"CREATE_EVENT": self.create_event, "DESTROY_EVENT": self.destroy_event, "SET_EVENT": self.set_event,
                "RESET_EVENT": self.reset_event, "WAIT_EVENTS": self.wait_events}

    # -- the event page ----------------------------------------------------------------------------

    def owns_page(self, handle: int) -> bool:
        """Is BO `handle` the user-allocated event page (which lives until the process exits)?"""
        return self.signal_page is not None and self.signal_page.handle == handle

    def page_to_map(self, length: int) -> int:
        """The event page's address for an mmap of the KFD_MMAP_TYPE_EVENTS offset (checked, nothing changed)."""
        if page_align(length) > k.KFD_SIGNAL_EVENT_PAGE_SIZE:
            raise OSError(errno.EINVAL, f"mmap: event page mapping of {length:#x} bytes exceeds 32 KiB")
        if self.signal_page is None:
            raise OSError(errno.EINVAL, "mmap: there is no event page yet (create a signal event first)")
        return self.signal_page.va

    def page_mapped(self, length: int) -> None:
        """The mmap succeeded: `length` bytes of slots are usable from now on."""
        self.signal_mapped_size = min(page_align(length), self.signal_page.size)

    def _slot(self, event_id: int) -> ctypes.c_uint64:
        return ctypes.c_uint64.from_address(self.signal_page.va + 8 * event_id)

    # -- create / destroy / set --------------------------------------------------------------------

    def create_event(self, args, io: k.Ioctl) -> None:
        if args.event_page_offset:  # the first call may hand over a user-allocated event page
            self._kmap_event_page(args.event_page_offset, io.name)
        args.event_page_offset = 0
        etype = args.event_type
        if etype in _SIGNAL_TYPES:
            eid = self._new_signal_id(io.name)
            args.event_page_offset, args.event_slot_index = k.KFD_MMAP_TYPE_EVENTS, eid
        else:
            used = {i for i in self.events if i >= k.KFD_FIRST_NONSIGNAL_EVENT_ID}
            eid = next(i for i in range(k.KFD_FIRST_NONSIGNAL_EVENT_ID, k.KFD_LAST_NONSIGNAL_EVENT_ID + 1)
                       if i not in used)
        self.events[eid] = Event(eid, etype, bool(args.auto_reset))
        args.event_id = args.event_trigger_data = eid

    def _kmap_event_page(self, handle: int, name: str) -> None:
        if self.signal_page is not None:
            raise OSError(errno.EINVAL, f"{name}: the event page is already set (event_page_offset must be 0 now)")
        dev = self.driver.device(handle >> 32, name)
        self.driver.bound(dev, name)
        bo = self.driver.memory.bo_of(dev, handle)
        if bo is None:
            raise OSError(errno.EINVAL, f"{name}: event page handle 0x{handle:x} is not a BO")
        if bo.kind != "gtt":
            raise OSError(errno.EINVAL, f"{name}: the event page BO must be GTT, not {bo.kind.upper()}")
        if bo.size < k.KFD_SIGNAL_EVENT_LIMIT * 8:  # kfd_event_page_set (upstream 8a70a26c9f34, in the stable kernels)
            raise OSError(errno.EINVAL, f"{name}: the event page BO is {bo.size:#x} bytes; it must hold all "
                                        f"{k.KFD_SIGNAL_EVENT_LIMIT} slots ({k.KFD_SIGNAL_EVENT_LIMIT * 8:#x} bytes)")
        size = min(bo.size, k.KFD_SIGNAL_EVENT_PAGE_SIZE)
        ctypes.memset(bo.va, 0xFF, size)  # every slot unsignalled
        self.signal_page, self.signal_mapped_size = SignalPage(bo.va, size, handle), size

    def _new_signal_id(self, name: str) -> int:
        if self.signal_mapped_size and self.signal_count == self.signal_mapped_size // 8:
            raise OSError(errno.ENOSPC, f"{name}: all {self.signal_mapped_size // 8 - 1} signal event slots are used")
        if self.signal_page is None:  # no user page: the driver allocates one (old ABI: 256 slots until mmapped)
            size = k.KFD_SIGNAL_EVENT_PAGE_SIZE
            va = self.driver.memory.special_page(size, None, name)
            ctypes.memset(va, 0xFF, size)
            self.signal_page, self.signal_mapped_size = SignalPage(va, size, None), KFD_SIGNAL_OLD_ABI_SLOTS * 8
        eid = next((i for i in range(1, self.signal_mapped_size // 8) if i not in self.events), None)
        if eid is None:
            raise OSError(errno.ENOSPC, f"{name}: no free signal event slot")
        self._slot(eid).value = k.UNSIGNALED_EVENT_SLOT
        self.signal_count += 1
        return eid

    def _event(self, eid: int, name: str) -> Event:
        ev = self.events.get(eid)
        if ev is None:
            raise OSError(errno.EINVAL, f"{name}: no event with id {eid}")
        return ev

    def destroy_event(self, args, io: k.Ioctl) -> None:
        ev = self._event(args.event_id, io.name)
        for w in ev.waiters:
            w.event = None
        if ev.type in _SIGNAL_TYPES:
            self.signal_count -= 1
        del self.events[ev.id]

    def set_event(self, args, io: k.Ioctl) -> None:
        ev = self._event(args.event_id, io.name)
        if ev.type != k.KFD_IOC_EVENT_SIGNAL:
            raise OSError(errno.EINVAL, f"{io.name}: event {ev.id} is not a SIGNAL event")
        self._set_event(ev)

    def reset_event(self, args, io: k.Ioctl) -> None:
        ev = self._event(args.event_id, io.name)
        if ev.type != k.KFD_IOC_EVENT_SIGNAL:
            raise OSError(errno.EINVAL, f"{io.name}: event {ev.id} is not a SIGNAL event")
        ev.signaled = False

    def _set_event(self, ev: Event) -> None:
        # Auto-reset events stay signalled only when nobody is waiting (a waiter consumes the signal).
        ev.signaled = not ev.auto_reset or not ev.waiters
        ev.age = ev.age + 1 if ev.age + 1 < 1 << 64 else 2
        for w in ev.waiters:
            w.activated = True
        if ev.waiters:
            self.driver.system.wake()  # sleepers in WAIT_EVENTS (free-running, or other host threads)

    # -- interrupts --------------------------------------------------------------------------------

    def _irq_handler(self, dev: "ProcessDevice") -> Callable[[Interrupt], None]:
        def handle(irq: Interrupt) -> None:
            model = dev.gpu.coherence
            self._irq_clock = model.hb_snapshot() if model is not None and model.hb else None
            if irq.source == "cp_eop":
                self._signal_interrupt(irq.ctxid & 0xFFFFFFFF, 32)
            elif irq.source == "sdma_trap":
                self._signal_interrupt(irq.ctxid & 0x0FFFFFFF, 28)
            elif irq.source == "vm_fault" and irq.fault is not None:
                self._memory_exception(dev, irq.fault)
            elif irq.source == "queue_error":
                self._hw_exception(dev)
        return handle

    def _signalled(self, eid: int) -> bool:
        return 8 * eid < self.signal_page.size and self._slot(eid).value != k.UNSIGNALED_EVENT_SLOT

    def _lookup_partial(self, eid: int, bits: int) -> Event | None:
        """lookup_signaled_event_by_partial_id: the event only counts if its slot is not all-ones."""
        if self.signal_page is None or eid >= k.KFD_SIGNAL_EVENT_LIMIT:
            return None
        if bits > 31 or 1 << bits >= k.KFD_SIGNAL_EVENT_LIMIT:
            return self.events.get(eid) if self._signalled(eid) else None
        while eid < k.KFD_SIGNAL_EVENT_LIMIT:
            if self._signalled(eid) and eid in self.events:
                return self.events[eid]
            eid += 1 << bits
        return None

    def _signal_interrupt(self, partial: int, bits: int) -> None:
        ev = self._lookup_partial(partial, bits)
        if ev is not None:
            self._set_from_interrupt(ev)
        elif self.signal_page is not None:  # invalid id: scan every slot for signalled events
            for eid in sorted(i for i in self.events if i < k.KFD_SIGNAL_EVENT_LIMIT):
                if self._signalled(eid):
                    self._set_from_interrupt(self.events[eid])

    def _set_from_interrupt(self, ev: Event) -> None:
        if ev.type in _SIGNAL_TYPES:
            if self._irq_clock is not None:  # report mode: a waiter woken by it is ordered after the interrupt
                if ev.hb is None:
                    ev.hb = {}
                join(ev.hb, self._irq_clock)
            self._slot(ev.id).value = k.UNSIGNALED_EVENT_SLOT  # acknowledge, then wake
            self._set_event(ev)

    def _memory_exception(self, dev: "ProcessDevice", fault: Fault) -> None:
        # kfd_signal_vm_fault_event: va = page_addr << PAGE_SHIFT, the first page of the access that faulted
        page = fault.page if fault.page is not None else fault.address & ~(PAGE_SIZE - 1)
        data = k.MemoryExceptionData(gpu_id=dev.gpu_id, va=page)
        m = dev.gpu.memory.find(page)
        if m is not None and fault.access == "write" and not m.writable:
            data.ReadOnly = 1
        elif m is not None and fault.access == "execute" and not m.executable:
            data.NoExecute = 1
        else:
            data.NotPresent = 1
        for ev in self.events.values():
            if ev.type == k.KFD_IOC_EVENT_MEMORY:
                ev.memory_data = bytes(data)
                self._set_event(ev)

    def _hw_exception(self, dev: "ProcessDevice") -> None:
        data = k.HwExceptionData(reset_type=k.KFD_HW_EXCEPTION_PER_ENGINE_RESET,
                                 reset_cause=k.KFD_HW_EXCEPTION_GPU_HANG, memory_lost=0, gpu_id=dev.gpu_id)
        for ev in self.events.values():
            if ev.type == k.KFD_IOC_EVENT_HW_EXCEPTION:
                ev.hw_data = bytes(data)
                self._set_event(ev)

    # -- waiting -----------------------------------------------------------------------------------

    def wait_events(self, args, io: k.Ioctl) -> None:
        n, size = args.num_events, ctypes.sizeof(k.EventData)
        if n * WAITER_BYTES > KMALLOC_MAX_SIZE:  # checked before anything is read or allocated, as Linux does
            args.wait_result = k.KFD_IOC_WAIT_RESULT_FAIL
            raise OSError(errno.ENOMEM, f"{io.name}: num_events {n} needs more waiter memory than one kernel "
                                        f"allocation holds ({KMALLOC_MAX_SIZE} bytes)")
        try:
            raw = read_user(args.events_ptr, n * size) if n else b""
            data = [k.EventData.from_buffer_copy(raw, i * size) for i in range(n)]
            for d in data:  # checked before any waiter consumes an auto-reset signal
                self._event(d.event_id, io.name)
        except OSError:
            args.wait_result = k.KFD_IOC_WAIT_RESULT_FAIL
            raise
        waiters = [self._add_waiter(self.events[d.event_id], d) for d in data]
        try:
            all_, timeout = bool(args.wait_for_all), k.KFD_IOC_WAIT_RESULT_TIMEOUT
            done = lambda: self._condition(waiters, all_) != timeout
            system = self.driver.system
            result = self._condition(waiters, all_)  # re-read only after something that may have signalled
            if result == timeout and system.thread is None:
                self.driver.progress(done)
                result = self._condition(waiters, all_)
            if result == timeout and args.timeout != k.KFD_EVENT_TIMEOUT_IMMEDIATE:
                if system.thread is not None:
                    self._sleep(done, args.timeout)
                else:
                    self._drive(done, args.timeout, data, args)
                result = self._condition(waiters, all_)
            args.wait_result = result
            if result == k.KFD_IOC_WAIT_RESULT_COMPLETE:
                self._copy_event_data(waiters, args.events_ptr)
                order = system.order
                for w in waiters if order is not None else ():  # report mode: the host woke after the interrupts
                    if w.activated and w.event is not None and w.event.hb is not None:
                        order.host_join(w.event.hb)
            elif result == k.KFD_IOC_WAIT_RESULT_FAIL:
                raise OSError(errno.EIO, f"{io.name}: an awaited event was destroyed")
        finally:
            for w in waiters:
                if w.event is not None and w in w.event.waiters:
                    w.event.waiters.remove(w)

    def _drive(self, done: Callable[[], bool], timeout_ms: int, data: list, args) -> None:
        """Progress-point mode: keep advancing the GPUs (bounded progress points) until `done()`, the timeout, or
        nothing but the host can change the machine. Settled with a finite timeout: TIMEOUT at once (nobody can
        end it). Settled with an infinite one, single-threaded: DeadlockError (a documented deviation: it would
        hang the process for ever). Once several host threads waited here, another may still release it: the
        wait sleeps briefly and looks again, as a sleeper woken by another thread's driver call would."""
        system = self.driver.system
        system.host_threads.add(threading.get_ident())
        infinite = timeout_ms == k.KFD_EVENT_TIMEOUT_INFINITE
        deadline = time.monotonic() + timeout_ms / 1000
        while not done():
            if not infinite and time.monotonic() >= deadline:
                return
            if self.driver.settled():
                if system.single_host_thread():
                    if infinite:
                        raise DeadlockError(self._describe_wait(data, args),
                                            self.driver.blocked() + self.driver.spinning())
                    return
                if system.closed:
                    raise OSError(errno.EINTR, "WAIT_EVENTS: the emulated system was closed while waiting")
                system.cond.wait(0.001)  # the lock released: another thread may store or call in
            self.driver.progress(done)

    def _sleep(self, done: Callable[[], bool], timeout_ms: int) -> None:
        """Free-running: sleep (the system lock released) until `done()` or the timeout elapsed."""
        system = self.driver.system
        infinite = timeout_ms == k.KFD_EVENT_TIMEOUT_INFINITE
        deadline = time.monotonic() + timeout_ms / 1000
        system.wake()  # a client may have stored a doorbell just before sleeping: the GPU thread looks now
        while not done():
            left = 1.0 if infinite else deadline - time.monotonic()
            if left <= 0:
                return
            if system.closed:
                raise OSError(errno.EINTR, "WAIT_EVENTS: the emulated system was closed while waiting")
            system.cond.wait(min(left, 1.0))

    def _add_waiter(self, ev: Event, d: k.EventData) -> Waiter:
        w = Waiter(ev, ev.signaled)
        ev.signaled = ev.signaled and not ev.auto_reset  # a waiter consumes an auto-reset signal
        last = d.signal_event_data.last_event_age
        if ev.type == k.KFD_IOC_EVENT_SIGNAL and last:
            w.age_enabled = True
            w.activated = w.activated or ev.age != last
        if not w.activated:  # only a waiter still waiting sits on the event's wait queue
            ev.waiters.append(w)
        return w

    @staticmethod
    def _condition(waiters: list[Waiter], all_: bool) -> int:
        hits = 0
        for w in waiters:  # one pass (it runs at every look of a waiting driver call)
            if w.event is None:
                return k.KFD_IOC_WAIT_RESULT_FAIL
            hits += w.activated
        if (hits and not all_) or hits == len(waiters):
            return k.KFD_IOC_WAIT_RESULT_COMPLETE
        return k.KFD_IOC_WAIT_RESULT_TIMEOUT

    def _copy_event_data(self, waiters: list[Waiter], ptr: int) -> None:
        size = ctypes.sizeof(k.EventData)
        for i, w in enumerate(waiters):
            if not w.activated:
                continue
            ev = w.event
            if ev.type == k.KFD_IOC_EVENT_MEMORY:
                write_user(ptr + i * size, ev.memory_data)
            elif ev.type == k.KFD_IOC_EVENT_HW_EXCEPTION:
                write_user(ptr + i * size, ev.hw_data)
            elif ev.type == k.KFD_IOC_EVENT_SIGNAL and w.age_enabled:
                write_user(ptr + i * size, struct.pack("<Q", ev.age))

    def _describe_wait(self, data: list, args) -> str:
        ids = ", ".join(str(d.event_id) for d in data)
        mode = "all" if args.wait_for_all else "any"
        timeout = "infinite" if args.timeout == k.KFD_EVENT_TIMEOUT_INFINITE else f"{args.timeout} ms"
        return f"WAIT_EVENTS on events [{ids}] ({mode}, timeout {timeout})"

    def close(self) -> None:
        for gpu, handler in self._installed:
            if handler in gpu.interrupt_handlers:
                gpu.interrupt_handlers.remove(handler)
        self.events.clear()
