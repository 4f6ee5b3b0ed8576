"""Fault injection: make the emulated machine fail the way hardware fails, so a runtime's error paths can be
tested on CI (issue 22 item 2).

`system.inject` (an `Injector`) offers one call per kind of failure, each reported to the process exactly as the
kernel reports the real one:

- `vm_fault(address, gpu=0)`: the page at `address` leaves the GPU's page table. The next GPU access to it is a
  real VM fault of the queue that makes it (the queue stops, `Fault` recorded, the KFD memory exception event
  fires with gpu_id, the page address and NotPresent, as kfd_signal_vm_fault_event fills it). An address not
  mapped yet is armed and taken out as soon as a BO maps it.
- `ecc_error(address, gpu=0)`: the whole BO holding `address` is poisoned. The next GPU access to it stops that
  queue and is reported as consumed poison (kfd_signal_poison_consumed_event): the memory exception event with
  ErrorType POISON_CONSUMED, imprecise, va 0, and the HW exception event with reset_cause ECC, memory_lost 1.
  The kernel also sends SIGBUS to the process; hcqsim does not (it would kill the test run).
- `hang_queue(queue_id)`: the KFD queue stops making progress, as a hung CP does: it leaves the run list, its
  read pointer stays, doorbells are accepted and ignored. A progress-point wait reports it as blocked (hung).
- `gpu_reset(gpu=0, cause="hang"|"ecc")`: every queue of the GPU stops (a `Fault` of kind "gpu reset" each) and
  the HW exception event fires as kfd_signal_reset_event fills it: reset_type WHOLE_GPU_RESET, memory_lost 1,
  reset_cause GPU_HANG or ECC (with ECC, the memory exception event too, ErrorType SRAM_ECC, imprecise).
- `lose_interrupts(gpu=0, count=1, rate=0.0)`: the next `count` completion interrupts of the GPU (CP end of pipe,
  SDMA trap) are dropped, and/or each one with probability `rate` (drawn from the injector's seeded RNG). The
  memory the packet wrote stays written; only the wake-up is lost, so a runtime that sleeps on WAIT_EVENTS
  without re-reading its signals waits for its timeout.

`HCQSIM_INJECT` applies a plan to every EmulatedSystem created while it is set (`;`-separated):
`vm_fault@0xADDR[:GPU]`, `ecc@0xADDR[:GPU]`, `lost_irq=N[:GPU]` (the next N), `lost_irq_rate=P[:GPU]`;
`HCQSIM_INJECT_SEED` seeds the RNG (default: the system's seed). `Injector.log` records what was armed and what
fired, in order; `describe()` is one line for reports.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import kfd_uapi as k
from ..errors import EngineError, HcqsimError
from ..memory import PAGE_SIZE

if TYPE_CHECKING:
    from .system import EmulatedSystem

ENV_PLAN, ENV_SEED = "HCQSIM_INJECT", "HCQSIM_INJECT_SEED"
_COMPLETIONS = ("cp_eop", "sdma_trap")


class InjectionError(HcqsimError):
    """A fault-injection request that cannot be applied (bad plan text, unknown queue or GPU)."""


@dataclass
class _Poison:
    gpu: int
    lo: int
    hi: int
    kind: str  # "vm_fault" or "ecc"


class Injector:
    """The fault injector of one EmulatedSystem (`system.inject`). Calls hold the system lock."""

    def __init__(self, system: "EmulatedSystem", seed: int = 0):
        self.system = system
        self.rng = random.Random(seed)
        self.seed = seed
        self.log: list[str] = []
        self._armed: list[_Poison] = []  # not mapped yet: applied when a BO maps the address
        self._holes: list[_Poison] = []
        self._lost: dict[int, int] = {}  # GPU index -> completion interrupts still to drop
        self._rate: dict[int, float] = {}
        self._wrapped: set[int] = set()
        self.plan = ""

    # -- the kinds -------------------------------------------------------------------------------

    def vm_fault(self, address: int, gpu: int = 0) -> None:
        self._poison(_Poison(self._gpu(gpu), address & ~(PAGE_SIZE - 1), (address & ~(PAGE_SIZE - 1)) + PAGE_SIZE,
                             "vm_fault"))

    def ecc_error(self, address: int, gpu: int = 0) -> None:
        self._poison(_Poison(self._gpu(gpu), address, address + 1, "ecc"))

    def hang_queue(self, queue_id: int) -> None:
        with self.system.lock:
            rec = self.system.driver.queues.records.get(queue_id)
            if rec is None:
                raise InjectionError(f"hang_queue: no KFD queue with id {queue_id}")
            self.system.driver.queues.hang(rec)
            self.log.append(f"hang: queue {queue_id} ({rec.queue.name}) on {rec.device.label}")

    def gpu_reset(self, gpu: int = 0, cause: str = "hang") -> None:
        if cause not in ("hang", "ecc"):
            raise InjectionError(f"gpu_reset: cause must be 'hang' or 'ecc', not {cause!r}")
        with self.system.lock:
            dev = self.system.driver.devices[self._gpu(gpu)]
            for q in [q for q in dev.gpu.queues if q.active]:
                err = EngineError(f"GPU reset (injected, cause {cause}): the queue was stopped by the reset")
                err.kind = "gpu reset"
                dev.gpu._record_fault(q, err)
            hw = k.HwExceptionData(reset_type=k.KFD_HW_EXCEPTION_WHOLE_GPU_RESET, memory_lost=1, gpu_id=dev.gpu_id,
                                   reset_cause=k.KFD_HW_EXCEPTION_ECC if cause == "ecc" else k.KFD_HW_EXCEPTION_GPU_HANG)
            mem = None
            if cause == "ecc":
                mem = k.MemoryExceptionData(gpu_id=dev.gpu_id, ErrorType=k.KFD_MEM_ERR_SRAM_ECC)
                mem.imprecise = 1
            self._signal(hw, mem)
            self.log.append(f"gpu_reset: {dev.label}, cause {cause}")
        self.system.wake()

    def lose_interrupts(self, gpu: int = 0, count: int = 1, rate: float = 0.0) -> None:
        if count < 0 or not 0.0 <= rate <= 1.0:
            raise InjectionError(f"lose_interrupts: count {count} must be >= 0 and rate {rate} in [0, 1]")
        with self.system.lock:
            g = self._gpu(gpu)
            self._lost[g] = self._lost.get(g, 0) + count
            if rate:
                self._rate[g] = rate
            self._wrap(g)
            self.log.append(f"lose_interrupts: GPU {g}, next {count}" + (f", rate {rate}" if rate else ""))

    def describe(self) -> str:
        """One line: the plan, the seed and how many injected faults fired."""
        fired = sum(1 for line in self.log if line.startswith("fired"))
        return f"fault injection {self.plan or '(API)'}, seed {self.seed}, {fired} fired"

    # -- plan text (HCQSIM_INJECT) ---------------------------------------------------------------

    def apply_plan(self, plan: str) -> None:
        self.plan = plan
        for item in filter(None, (x.strip() for x in plan.split(";"))):
            head, _, gpu = item.partition(":")
            g = int(gpu) if gpu else 0
            try:
                if head.startswith("vm_fault@"):
                    self.vm_fault(int(head[9:], 0), g)
                elif head.startswith("ecc@"):
                    self.ecc_error(int(head[4:], 0), g)
                elif head.startswith("lost_irq_rate="):
                    self.lose_interrupts(g, 0, float(head[14:]))
                elif head.startswith("lost_irq="):
                    self.lose_interrupts(g, int(head[9:], 0))
                else:
                    raise ValueError(head)
            except ValueError:
                raise InjectionError(f"{ENV_PLAN}: cannot read {item!r} (vm_fault@ADDR[:GPU], ecc@ADDR[:GPU], "
                                     f"lost_irq=N[:GPU], lost_irq_rate=P[:GPU])") from None

    # -- machinery ---------------------------------------------------------------------------------

    def _gpu(self, gpu: int) -> int:
        if not 0 <= gpu < len(self.system.gpus):
            raise InjectionError(f"GPU index {gpu} out of range: the system has {len(self.system.gpus)} GPU(s)")
        return gpu

    def _poison(self, p: _Poison) -> None:
        with self.system.lock:
            self._wrap(p.gpu)
            self._armed.append(p)
            self.log.append(f"armed {p.kind} at 0x{p.lo:x} on GPU {p.gpu}")
            self.apply_armed()

    def apply_armed(self) -> None:
        """Take armed addresses out of the page tables once something maps them (called before GPUs run)."""
        if not self._armed:
            return
        waiting = []
        for p in self._armed:
            space = self.system.gpus[p.gpu].memory
            m = space.find(p.lo)
            if m is None:
                waiting.append(p)
                continue
            if p.kind == "ecc":  # every page of the BO
                origin = m.origin or m
                p.lo, p.hi = origin.start, origin.end
                for piece in [x for x in space.mappings() if x is origin or x.origin is origin]:
                    space.punch(piece.start, piece.end)
            else:
                space.punch(p.lo, p.hi)
            self._holes.append(p)
        self._armed = waiting

    def _wrap(self, gpu: int) -> None:
        """Put one filter in front of the GPU's interrupt handlers (the KFD's): lost interrupts, poison."""
        if gpu in self._wrapped:
            return
        g = self.system.gpus[gpu]
        handlers = list(g.interrupt_handlers)

        def deliver(irq) -> None:
            if self._intercept(gpu, irq):
                return
            for h in handlers:
                h(irq)
        g.interrupt_handlers[:] = [deliver]
        self._wrapped.add(gpu)

    def _intercept(self, gpu: int, irq) -> bool:
        if irq.source in _COMPLETIONS:
            drop = self._lost.get(gpu, 0) > 0
            if drop:
                self._lost[gpu] -= 1
            elif self._rate.get(gpu) and self.rng.random() < self._rate[gpu]:
                drop = True
            if drop:
                self.log.append(f"fired lost interrupt: {irq.source} of {irq.queue} on GPU {gpu} at t={irq.timestamp}")
            return drop
        fault = irq.fault
        if irq.source == "vm_fault" and fault is not None and fault.address is not None:
            at = fault.page if fault.page is not None else fault.address  # the page that faulted
            hit = next((p for p in self._holes if p.gpu == gpu and p.lo <= at < p.hi), None)
            if hit is None:
                return False
            if hit.kind == "vm_fault":
                self.log.append(f"fired vm_fault at 0x{fault.address:x} on GPU {gpu} ({fault.queue})")
                return False  # delivered as the real VM fault it is
            fault.kind = "ECC error (poison consumed, injected)"
            dev = self.system.driver.devices[gpu]
            hw = k.HwExceptionData(reset_cause=k.KFD_HW_EXCEPTION_ECC, memory_lost=1, gpu_id=dev.gpu_id)
            mem = k.MemoryExceptionData(gpu_id=dev.gpu_id, ErrorType=k.KFD_MEM_ERR_POISON_CONSUMED)
            mem.imprecise = 1
            self._signal(hw, mem)
            self.log.append(f"fired ecc at 0x{fault.address:x} on GPU {gpu} ({fault.queue})")
            return True
        return False

    def _signal(self, hw, mem) -> None:
        """Set the process's HW exception (and memory exception) events with this data, as kfd_events.c does."""
        events = self.system.driver.events
        for ev in list(events.events.values()):
            if ev.type == k.KFD_IOC_EVENT_HW_EXCEPTION:
                ev.hw_data = bytes(hw)
                events._set_event(ev)
            elif ev.type == k.KFD_IOC_EVENT_MEMORY and mem is not None:
                ev.memory_data = bytes(mem)
                events._set_event(ev)


def from_environment(system: "EmulatedSystem", seed: int) -> Injector:
    """The system's injector, with the HCQSIM_INJECT plan applied when the variable is set."""
    env_seed = os.environ.get(ENV_SEED)
    inj = Injector(system, int(env_seed, 0) if env_seed else seed)
    plan = os.environ.get(ENV_PLAN, "").strip()
    if plan:
        inj.apply_plan(plan)
    return inj


def active_plan() -> str | None:
    """The HCQSIM_INJECT plan in force (for the pytest header), or None."""
    plan = os.environ.get(ENV_PLAN, "").strip()
    return plan or None

