"""Running fuzz cases on emulated devices: `Fuzzer` compiles a case with the schedule compiler, runs it under an
interleaving and compares every buffer with the sequential meaning; `mutated` switches on broken compiler rules;
`replay` runs a seed again."""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, field

from ..errors import DeadlockError, DeviceFault
from .cases import (ALT, FUZZ_KERNELS, LONG_BUFFER_BYTES, FuzzCase, _op_text, all_buffer_names, buffer_names,
                    initial_memory, sequential_effects)
from .interleaver import Interleaver
from .interleavings import Interleaving
from .report import RaceFound, RaceReport
from .seeds import _decode, decode_seed, encode_seed

MAX_DEVICES = 3
PRELUDE_QUEUE = 3  # copy queue index for in-flight timeline work: one the schedules here never use
COPY_QUEUES = 3  # copy queues a fuzzed schedule may use (0 .. 2)


@contextlib.contextmanager
def mutated(*names: str):
    """Compile with deliberately broken rules (hcqsim.runtime.plan.MUTATIONS) inside the block."""
    from ..runtime import plan
    unknown = set(names) - set(plan.MUTATIONS)
    if unknown:
        raise ValueError(f"unknown mutations {sorted(unknown)}; known: {', '.join(plan.MUTATIONS)}")
    before = plan.active_mutations
    plan.active_mutations = frozenset(names)
    try:
        yield
    finally:
        plan.active_mutations = before


@dataclass
class Fuzzer:
    """Devices (opened once, with an Interleaver) and their buffers, reused by every example. `host_turns`: the
    interleavings may also let the host go on while GPU work is pending (launching the next run, host operations,
    its waits), so host/GPU orders are explored too."""

    target: str = "gfx1100"
    devices: int = MAX_DEVICES
    policy: Interleaver = field(default_factory=Interleaver)
    host_turns: bool = True

    def __post_init__(self):
        self.policy.host_turns = self.host_turns
        self.policy.host_lines = False  # its host is hcqsim's own loop: the notes (launched run r, wrote ...) say it
        from ..runtime import open_devices
        self.devs = open_devices("sim", self.devices, target=self.target, policy=self.policy)
        self.gpus = self.devs[0].os.system.gpus
        self.bufs = {name: self.devs[int(name[1])].alloc(LONG_BUFFER_BYTES) for name in all_buffer_names(self.devices)}
        self.gates = [d.new_signal(0) for d in self.devs]
        # every hardware queue a case may use exists from the start, in one order: the emulator's ready list
        # (and so what a choice means) must not depend on which earlier examples created which queue
        for d in self.devs:
            for i in range(2):
                d.compute_queue(i).submit()
            for i in range(PRELUDE_QUEUE + 1):
                d.copy_queue(i).submit()
        self.policy.name_queues(self.devs)
        self.progs: dict = {}
        self.schedules = 0  # schedules compiled and run
        self.runs = 0  # runs of them
        self.ops = 0  # operations executed (ops x runs)
        self._describe = str  # the last compiled schedule's describe(), made when asked

    def close(self) -> None:
        for d in self.devs:
            d.close()

    def _program(self, name: str, dev):
        key = (name, dev.index)
        if key not in self.progs:
            from ..kernels import code_object
            self.progs[key] = dev.load_program(code_object(name, dev.target), name)
        return self.progs[key]

    def _build(self, case: FuzzCase):
        from ..runtime import Schedule, region
        devs = self.devs[:case.devices]
        s = Schedule(devs, copy_queues=COPY_QUEUES, batch_limit=case.batch_limit)
        for name in buffer_names(case.devices):
            s.name(self.bufs[name], name)
        params = {n: s.param(n, v) for n, v in case.params}
        p = lambda v: params[v] if isinstance(v, str) else v  # noqa: E731
        if case.prelude:  # the host opens the in-flight work's gates as the schedule starts (touches nothing)
            s.host(self._open_gates, name="open prelude gates")
        for op in case.ops:
            kind = op[0]
            if kind == "fill":
                s.fill(region(self.bufs[op[1]], op[2], op[3]), p(op[4]))
            elif kind == "copy":
                s.copy(region(self.bufs[op[1]], op[2], op[5]), region(self.bufs[op[3]], op[4], op[5]))
            elif kind == "host_write":
                s.host_write(region(self.bufs[op[1]], op[2], len(op[3])), _NotedBytes(self.policy, op))
            else:
                _, name, bargs, scalars, n = op
                dev = self.bufs[bargs[0][0]].device
                rw = FUZZ_KERNELS[name][0]
                regs = [region(self.bufs[b], o, 4 * n) for b, o in bargs]
                s.kernel(self._program(name, dev), [self.bufs[b].offset(o) for b, o in bargs]
                         + [p(v) for v in scalars] + [n], n, 64,
                         reads=[r for r, (rd, _) in zip(regs, rw) if rd],
                         writes=[r for r, (_, wr) in zip(regs, rw) if wr])
        return s

    def _open_gates(self) -> None:
        self.policy.note("opened the prelude gates (the in-flight timeline work may run)")
        for g in self.gates:
            g.value = 1

    def _prelude(self, case: FuzzCase) -> None:
        for g in self.gates:
            g.value = 0
        previous = None
        for k, op in case.prelude:
            dev = self.devs[k]
            names = (op[1],) if op[0] == "fill" else (op[1], op[3])
            for n in names:  # a peer buffer must be mapped where the in-flight work runs
                owner = self.bufs[n].device
                if owner is not dev:
                    owner.map_to(self.bufs[n], dev)
            q = dev.copy_queue(PRELUDE_QUEUE).wait(self.gates[k], 1)
            if previous is not None:  # in-flight work in list order (across devices too): what it means
                prev_dev, sig, value = previous
                if prev_dev is not dev:
                    prev_dev.map_to(sig, dev)
                q.wait(sig, value)
            if op[0] == "fill":
                q.fill(self.bufs[op[1]].offset(op[2], op[3]), op[4], op[3])
            else:
                q.copy(self.bufs[op[1]].offset(op[2], op[5]), self.bufs[op[3]].offset(op[4], op[5]), op[5])
            sig, value = dev.next_timeline()
            q.signal(sig, value).submit()
            previous = dev, sig, value

    @property
    def last_describe(self) -> str:
        """describe() of the last compiled schedule (text only a report needs: made on first use)."""
        return self._describe()

    def effects(self, case: FuzzCase, choices=(), mutations=()) -> tuple[dict[str, bytes], str]:
        """(buffer bytes after the case ran under `choices`, describe() of its compiled schedule)."""
        return self._effects(case, choices, mutations), self.last_describe

    def _effects(self, case: FuzzCase, choices, mutations) -> dict[str, bytes]:
        size = case.buffer_bytes
        init = initial_memory(case.devices, size)
        for name, data in init.items():
            self.bufs[name].view[:size] = data
        with mutated(*mutations):
            compiled = self._build(case).compile()
        self._describe = functools.cache(compiled.describe)
        self.last_plan = compiled.plan
        for gpu in self.gpus[:case.devices]:
            gpu.trace.clear()  # the report's trace is this example's
        self._prelude(case)
        used = _names_used(case)
        with self.policy.using(choices):
            for r, (rebound, params) in enumerate(case.runs):
                rebound = [n for n in rebound if n in used]  # rebinding a buffer no op uses changes nothing
                self.policy.note(f"launched run {r} (rings written, kick signal set)")
                compiled.run(buffers={n: self.bufs[n + ALT] for n in rebound}, params=dict(params))
                self.runs += 1
                self.ops += len(case.ops)
        self._drain()
        if self._idle():  # nothing can read its command buffers any more: the next compile reuses its memory
            compiled.release()
        self.schedules += 1
        return {n: self.bufs[n].view[:size].tobytes() for n in all_buffer_names(case.devices)}

    def _idle(self) -> bool:
        """No queue of any GPU can still read a compiled schedule's memory: none faulted, waiting, running kernels or
        copies, or holding packets it has not executed (a broken schedule may leave one blocked for ever)."""
        return all(q.fault is None and q.wait is None and not q.inflight and not q.dma.pending and not q.has_work()
                   for gpu in self.gpus for q in gpu.queues)

    def _drain(self) -> None:
        """Let the GPUs finish what the case left running: a broken schedule's run may return before all of its
        work is done (its finalizer believed it waited), and that work must land in this example's effects, not
        in the next example's freshly initialised buffers (where it made failures that did not reproduce)."""
        system = self.devs[0].os.system
        with system.lock:
            for _ in range(10_000):
                system.driver.progress()
                if system.driver.settled():
                    return

    def check(self, case: FuzzCase, choices=(), mutations=()) -> None:
        """Raise RaceFound when the case's effects under `choices` differ from its sequential meaning."""
        expected = sequential_effects(case)
        try:
            seen = self._effects(case, choices, mutations)
        except (DeadlockError, DeviceFault) as e:
            # a broken schedule may also hang or fault (e.g. a timeline written out of order): that is a finding
            # too; the machine is left stuck, so the next example gets fresh devices
            text = self.last_describe
            seen = {"(no effects)": f"{type(e).__name__}: {str(e).splitlines()[0]}"}
            report = self._report(case, text, expected, seen, choices, mutations)
            self._restart()
        else:
            report = (self._report(case, self.last_describe, expected, seen, choices, mutations)
                      if seen != expected else None)
        if report is not None:  # one raise site: hypothesis takes a hang and a data race for the same failure
            raise RaceFound(report)

    def _report(self, case, text, expected, seen, choices, mutations) -> RaceReport:
        recorded = (self.policy.snapshot(), {g.label: (g, list(g.trace)) for g in self.gpus[:case.devices]})
        report = RaceReport(case, text, expected, seen, [list(c) for c in choices], tuple(mutations), self.target,
                            recorded=recorded, priority=getattr(choices, "priority", 0))
        report.seed = encode_seed(case, choices, mutations, self.target, self.policy.host_turns, self.devices)
        return report

    def _restart(self) -> None:
        counts = self.schedules, self.runs, self.ops
        self.close()
        self.__post_init__()
        self.schedules, self.runs, self.ops = counts


def _names_used(case: FuzzCase) -> set[str]:
    used = set()
    for op in case.ops:
        if op[0] == "kernel":
            used |= {b for b, _ in op[2]}
        elif op[0] == "copy":
            used |= {op[1], op[3]}
        else:
            used.add(op[1])
    return used


class _NotedBytes:
    """A host write's data, taken at run time: tells the interleaver the host wrote it (a host step)."""

    def __init__(self, policy: Interleaver, op):
        self.policy, self.op, self.data = policy, op, bytes(op[3])

    def __call__(self) -> bytes:
        self.policy.note(f"wrote {_op_text(self.op)}")
        return self.data

    def __len__(self) -> int:
        return len(self.data)


def replay(seed: str, test=None):
    """Run a seed again. A schedule fuzzer's seed (RaceReport.seed): its report when the race reproduces,
    None when it does not. A user test's seed (from the note of a failure inside Interleaver.using) with the
    test (a @given function, or any function of the choices): runs its body under those choices, so the
    failure happens again, exactly."""
    doc = _decode(seed)
    if doc.get("kind", "schedule") == "interleaving":
        if test is None:
            raise ValueError("this seed is a user test's interleaving: pass the test, replay(seed, test)")
        body = getattr(getattr(test, "hypothesis", None), "inner_test", test)
        return body(Interleaving(doc["choices"], doc.get("priority", 0)))
    case, choices, mutations, target = decode_seed(seed)
    fz = Fuzzer(target, max(doc.get("machine", case.devices), 1), host_turns=doc.get("host_turns", False))
    try:
        fz.check(case, choices, mutations)
    except RaceFound as e:
        return e.report
    finally:
        fz.close()
    return None
