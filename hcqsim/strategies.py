"""Schedule fuzzing with hypothesis: random operation DAGs, interleavings chosen on purpose, race reports.

    from hcqsim.strategies import Interleaver, interleavings, fuzz_settings
    chooser = Interleaver()                        # a scheduler policy whose choices hypothesis makes
    dev = open_device("sim", policy=chooser)

    @fuzz_settings()
    @given(interleavings())
    def test_my_pipeline(choices):
        with chooser.using(choices):               # any runtime code: queues, signals, schedules
            out = my_pipeline(dev)
        assert out == expected

`schedules()` draws a `FuzzCase` (a few fills, copies, kernels and host writes over small, overlapping buffers
on one or two devices, optionally preceded by work still in flight on the device timeline); `Fuzzer.check`
compiles it with the schedule compiler, runs it under an interleaving and compares every buffer with the
sequential meaning computed here in numpy; a difference raises `RaceFound` carrying a `RaceReport`: the
operations, the compiled queues (describe()), both effects and a seed for `replay(seed)`.

`mutated(...)` switches on deliberately broken compiler rules (hcqsim.runtime.plan.MUTATIONS) so tests can show
the fuzzer catches them. Profiles: `fuzz_settings()` is short and derandomized (CI, safe under pytest-xdist: no
example database is written unless asked); HCQSIM_FUZZ=nightly runs long random searches, and
HCQSIM_FUZZ_DB=/shared/dir stores failures in a directory example database every worker and machine reads.

Hypothesis is a test dependency: this module imports it at import time, and nothing in the runtime imports
this module.
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import zlib
from dataclasses import dataclass, field

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from .errors import DeadlockError, DeviceFault
from .gpu import ExplicitChoices
from .kernels import code_object

U32 = 0xFFFFFFFF
BUFFER_BYTES = 64  # small buffers, so random ranges overlap often
BUFFERS_PER_DEVICE = 3
PRELUDE_QUEUE = 2  # hardware queue index for in-flight timeline work: one the schedules here never use
MAX_CHOICES = 48

# -- profiles ---------------------------------------------------------------------------------------------

PROFILES = {
    # CI: a fixed, short search (the same examples on every worker and every run)
    "default": dict(max_examples=60, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]),
    # nightly: long random searches
    "nightly": dict(max_examples=3000, derandomize=False, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]),
}


def fuzz_settings(profile: str | None = None, **overrides) -> settings:
    """The settings of a fuzz profile: `profile`, else $HCQSIM_FUZZ, else "default". $HCQSIM_FUZZ_DB names a
    shared directory example database (a failure found by any worker replays on all)."""
    name = profile or os.environ.get("HCQSIM_FUZZ", "default")
    if name not in PROFILES:
        raise ValueError(f"unknown fuzz profile {name!r}: {', '.join(PROFILES)}")
    kw = dict(PROFILES[name])
    db = os.environ.get("HCQSIM_FUZZ_DB")
    if db:
        from hypothesis.database import DirectoryBasedExampleDatabase
        kw["database"] = DirectoryBasedExampleDatabase(db)
    kw.update(overrides)
    return settings(**kw)


# -- the interleaving policy --------------------------------------------------------------------------------


class Interleaver(ExplicitChoices):
    """A scheduler policy (pass it as `policy=` to open_device / EmulatedGPU) driven by a list of choices
    `(which ready queue, how many packets)`; when the list runs out (or outside `using`), the first ready queue
    runs until it blocks, as the default policy does. `taken` records the choices a run used."""

    name = "interleaver"

    def __init__(self):
        super().__init__(self._pick)
        self.choices: list[tuple[int, int]] = []
        self.pos = 0

    def _pick(self, n_ready: int) -> tuple[int, int]:
        if self.pos < len(self.choices):
            i, budget = self.choices[self.pos]
            self.pos += 1
            return i % n_ready, budget
        return 0, 1 << 62

    @contextlib.contextmanager
    def using(self, choices):
        self.choices, self.pos = [tuple(c) for c in choices], 0
        try:
            yield self
        finally:
            self.choices, self.pos = [], 0


def interleavings(max_choices: int = MAX_CHOICES):
    """Scheduling decisions: (ready-queue index, packet budget) pairs. Shrinks toward run-to-block."""
    return st.lists(st.tuples(st.integers(0, 7), st.integers(1, 24)), max_size=max_choices)


# -- operation DAGs -----------------------------------------------------------------------------------------

# kernel name -> (buffer arguments: (read?, write?) each, scalar arguments) for the ops drawn here
FUZZ_KERNELS = {"inc": ([(True, True)], 0), "add": ([(True, False), (True, False), (False, True)], 0),
                "scale": ([(True, False), (False, True)], 1)}


@dataclass(frozen=True)
class FuzzCase:
    """Operations as plain data. Buffers are "d<k>b<j>" (device k, BUFFER_BYTES each). An op is
    ("fill", buf, off, size, value) | ("copy", dst, doff, src, soff, size) | ("host_write", buf, off, [words])
    | ("kernel", name, [[buf, off], ...], [scalars], n): n words from each buffer argument's offset.
    `prelude`: fills and copies submitted straight to the device timeline before the schedule, still in
    flight (gated) when it starts."""

    devices: int
    ops: tuple
    prelude: tuple = ()

    def text(self) -> str:
        lines = [f"prelude #{i}: {_op_text(op)}  (timeline work in flight)" for i, op in enumerate(self.prelude)]
        lines += [f"#{i}: {_op_text(op)}" for i, op in enumerate(self.ops)]
        return "\n".join(lines)


def _op_text(op) -> str:
    if op[0] == "fill":
        return f"fill {op[1]}[{op[2]}:{op[2] + op[3]}] = 0x{op[4]:08x}"
    if op[0] == "copy":
        return f"copy {op[1]}[{op[2]}:{op[2] + op[5]}] <- {op[3]}[{op[4]}:{op[4] + op[5]}]"
    if op[0] == "host_write":
        return f"host_write {op[1]}[{op[2]}:{op[2] + 4 * len(op[3])}] = {[hex(w) for w in op[3]]}"
    _, name, bufs, scalars, n = op
    return f"kernel {name}({', '.join(f'{b}+{o}' for b, o in bufs)}{''.join(f', {s}' for s in scalars)}, n={n})"


def buffer_names(devices: int) -> list[str]:
    return [f"d{d}b{j}" for d in range(devices) for j in range(BUFFERS_PER_DEVICE)]


@st.composite
def _range(draw, words: int | None = None):
    total = BUFFER_BYTES // 4
    n = words or draw(st.integers(1, total))
    off = draw(st.integers(0, total - n))
    return 4 * off, 4 * n


@st.composite
def _op(draw, names: list[str], kernels: bool, host: bool):
    kinds = ["fill", "copy"] + ["kernel"] * kernels + ["host_write"] * host
    kind = draw(st.sampled_from(kinds))
    buf = lambda: draw(st.sampled_from(names))  # noqa: E731
    value = lambda: draw(st.integers(0, U32))  # noqa: E731
    if kind == "fill":
        off, size = draw(_range())
        return ("fill", buf(), off, size, value())
    if kind == "copy":
        off, size = draw(_range())
        soff, _ = draw(_range(size // 4))
        return ("copy", buf(), off, buf(), soff, size)
    if kind == "host_write":
        off, size = draw(_range())
        return ("host_write", buf(), off, [value() for _ in range(size // 4)])
    name = draw(st.sampled_from(sorted(FUZZ_KERNELS)))
    bargs, nscalars = FUZZ_KERNELS[name]
    n = draw(st.integers(1, BUFFER_BYTES // 4))
    device = draw(st.sampled_from(sorted({b[:2] for b in names})))  # a kernel's buffers on its own device
    local = [b for b in names if b.startswith(device)]
    args = [[draw(st.sampled_from(local)), draw(_range(n))[0]] for _ in bargs]
    return ("kernel", name, args, [draw(st.integers(0, 1000)) for _ in range(nscalars)], n)


@st.composite
def schedules(draw, *, max_ops: int = 6, devices: int | None = None, kernels: bool = True, host: bool = True,
              prelude: bool = True):
    """A FuzzCase: 1..max_ops operations over 3 small buffers per device, on 1 or 2 devices."""
    ndev = devices or draw(st.integers(1, 2))
    names = buffer_names(ndev)
    ops = draw(st.lists(_op(names, kernels, host), min_size=1, max_size=max_ops))
    pre = ()
    if prelude:
        # in-flight work touches device 0's memory only: a schedule orders each device's memory after that
        # device's timeline (docs/schedule.md rule 11-12), not after another device's work writing into it
        pre = tuple(draw(st.lists(_op(buffer_names(1), False, False), max_size=2)))
    return FuzzCase(ndev, tuple(ops), pre)


# -- the sequential meaning (numpy) -----------------------------------------------------------------------


def initial_memory(devices: int) -> dict[str, np.ndarray]:
    """Word j of the k-th buffer starts as (k + 1) << 24 | j."""
    return {name: (((k + 1) << 24) + np.arange(BUFFER_BYTES // 4, dtype=np.uint64)).astype("<u4").view(np.uint8)
            for k, name in enumerate(buffer_names(devices))}


def _apply(mem: dict, op) -> None:
    kind = op[0]
    if kind == "fill":
        _, b, off, size, v = op
        mem[b][off:off + size] = np.full(size // 4, v, "<u4").view(np.uint8)
    elif kind == "copy":
        _, d, doff, s, soff, size = op
        mem[d][doff:doff + size] = mem[s][soff:soff + size].copy()
    elif kind == "host_write":
        _, b, off, words = op
        mem[b][off:off + 4 * len(words)] = np.asarray(words, "<u4").view(np.uint8)
    else:
        _, name, bufs, scalars, n = op
        w = [mem[b][o:o + 4 * n].view("<u4").astype(np.uint64) for b, o in bufs]
        if name == "inc":
            out, res = bufs[0], w[0] + 1
        elif name == "add":
            out, res = bufs[2], w[0] + w[1]
        else:
            out, res = bufs[1], w[0] * scalars[0]
        mem[out[0]][out[1]:out[1] + 4 * n] = (res & U32).astype("<u4").view(np.uint8)


def sequential_effects(case: FuzzCase) -> dict[str, bytes]:
    """What the case means: the prelude, then every operation, one at a time in program order."""
    mem = initial_memory(case.devices)
    for op in case.prelude + case.ops:
        _apply(mem, op)
    return {k: v.tobytes() for k, v in mem.items()}


# -- running on the emulator -------------------------------------------------------------------------------


@dataclass
class RaceReport:
    case: FuzzCase
    describe: str
    expected: dict
    seen: dict
    choices: list
    mutations: tuple
    target: str
    seed: str = ""

    @property
    def kind(self) -> str:
        """"data" (bytes differ) or "hang" (the run deadlocked or faulted: e.g. a timeline written out of order)."""
        return "hang" if "(no effects)" in self.seen else "data"

    @property
    def first_difference(self) -> str:
        if "(no effects)" in self.seen:
            return f"the run did not complete: {self.seen['(no effects)']}"
        for name in sorted(self.expected):
            a, b = self.expected[name], self.seen[name]
            if a != b:
                i = next(k for k in range(len(a)) if a[k] != b[k])
                return f"buffer {name} byte {i}: sequential 0x{a[i]:02x}, this interleaving 0x{b[i]:02x}"
        return "none"

    def text(self) -> str:
        diverging = [n for n in sorted(self.expected) if self.expected[n] != self.seen.get(n, self.expected[n])]
        words = lambda b: " ".join(f"{w:08x}" for w in np.frombuffer(b, "<u4"))  # noqa: E731
        lines = [f"race: effects depend on the interleaving ({len(self.case.ops)} operations"
                 + (f", {len(self.case.prelude)} in flight before" if self.case.prelude else "")
                 + (f"; mutations {', '.join(self.mutations)}" if self.mutations else "") + ")",
                 "operations:", *("  " + ln for ln in self.case.text().splitlines()),
                 "compiled queues (describe()):", *("  " + ln for ln in self.describe.splitlines()),
                 f"first difference: {self.first_difference}"]
        for n in diverging:
            lines += [f"  {n} sequential:       {words(self.expected[n])}",
                      f"  {n} this interleaving: {words(self.seen[n])}"]
        lines += [f"interleaving: {self.choices}",
                  f"replay: hcqsim.strategies.replay({self.seed!r})"]
        return "\n".join(lines)


class RaceFound(AssertionError):
    def __init__(self, report: RaceReport):
        super().__init__(report.text())
        self.report = report


@contextlib.contextmanager
def mutated(*names: str):
    """Compile with deliberately broken rules (hcqsim.runtime.plan.MUTATIONS) inside the block."""
    from .runtime import plan
    unknown = set(names) - set(plan.MUTATIONS)
    if unknown:
        raise ValueError(f"unknown mutations {sorted(unknown)}; known: {', '.join(plan.MUTATIONS)}")
    before = plan.active_mutations
    plan.active_mutations = frozenset(names)
    try:
        yield
    finally:
        plan.active_mutations = before


def encode_seed(case: FuzzCase, choices, mutations, target: str) -> str:
    doc = {"devices": case.devices, "ops": case.ops, "prelude": case.prelude, "choices": [list(c) for c in choices],
           "mutations": list(mutations), "target": target}
    return base64.urlsafe_b64encode(zlib.compress(json.dumps(doc).encode(), 9)).decode()


def decode_seed(seed: str) -> tuple[FuzzCase, list, tuple, str]:
    doc = json.loads(zlib.decompress(base64.urlsafe_b64decode(seed.encode())))
    tup = lambda ops: tuple(tuple(o) for o in ops)  # noqa: E731
    case = FuzzCase(doc["devices"], tup(doc["ops"]), tup(doc["prelude"]))
    return case, [tuple(c) for c in doc["choices"]], tuple(doc["mutations"]), doc["target"]


@dataclass
class Fuzzer:
    """Devices (opened once, with an Interleaver) and their buffers, reused by every example."""

    target: str = "gfx1100"
    devices: int = 2
    policy: Interleaver = field(default_factory=Interleaver)

    def __post_init__(self):
        from .runtime import open_devices
        self.devs = open_devices("sim", self.devices, target=self.target, policy=self.policy)
        self.bufs = {name: self.devs[int(name[1])].alloc(BUFFER_BYTES) for name in buffer_names(self.devices)}
        self.gate = self.devs[0].new_signal(0)
        # every hardware queue a case may use exists from the start, in one order: the emulator's ready list
        # (and so what a choice means) must not depend on which earlier examples created which queue
        for d in self.devs:
            for i in range(2):
                d.compute_queue(i).submit()
            for i in range(PRELUDE_QUEUE + 1):
                d.copy_queue(i).submit()
        self.progs: dict = {}
        self.schedules = 0  # schedules compiled and run
        self.last_describe = ""

    def close(self) -> None:
        for d in self.devs:
            d.close()

    def _program(self, name: str, dev):
        key = (name, dev.index)
        if key not in self.progs:
            self.progs[key] = dev.load_program(code_object(name, dev.target), name)
        return self.progs[key]

    def _build(self, case: FuzzCase):
        from .runtime import Schedule, region
        devs = self.devs[:case.devices]
        s = Schedule(devs)
        for name in buffer_names(case.devices):
            s.name(self.bufs[name], name)
        if case.prelude:  # the host opens the in-flight work's gate as the schedule starts (touches nothing)
            s.host(lambda: setattr(self.gate, "value", 1), name="open prelude gate")
        for op in case.ops:
            kind = op[0]
            if kind == "fill":
                s.fill(region(self.bufs[op[1]], op[2], op[3]), op[4])
            elif kind == "copy":
                s.copy(region(self.bufs[op[1]], op[2], op[5]), region(self.bufs[op[3]], op[4], op[5]))
            elif kind == "host_write":
                s.host_write(region(self.bufs[op[1]], op[2], 4 * len(op[3])), np.asarray(op[3], "<u4").tobytes())
            else:
                _, name, bargs, scalars, n = op
                dev = self.bufs[bargs[0][0]].device
                rw = FUZZ_KERNELS[name][0]
                regs = [region(self.bufs[b], o, 4 * n) for b, o in bargs]
                s.kernel(self._program(name, dev), [self.bufs[b].offset(o) for b, o in bargs] + list(scalars) + [n],
                         n, 64, reads=[r for r, (rd, _) in zip(regs, rw) if rd], writes=[r for r, (_, wr) in zip(regs, rw) if wr])
        return s

    def _prelude(self, case: FuzzCase) -> None:
        self.gate.value = 0
        for op in case.prelude:
            dev = self.devs[0]
            q = dev.copy_queue(PRELUDE_QUEUE).wait(self.gate, 1)
            if op[0] == "fill":
                q.fill(self.bufs[op[1]].offset(op[2], op[3]), op[4], op[3])
            else:
                q.copy(self.bufs[op[1]].offset(op[2], op[5]), self.bufs[op[3]].offset(op[4], op[5]), op[5])
            q.signal(*dev.next_timeline()).submit()

    def effects(self, case: FuzzCase, choices=(), mutations=()) -> tuple[dict[str, bytes], str]:
        """(buffer bytes after the case ran under `choices`, describe() of its compiled schedule)."""
        init = initial_memory(case.devices)
        for name, data in init.items():
            self.bufs[name].view[:] = data
        with mutated(*mutations):
            compiled = self._build(case).compile()
        self.last_describe = compiled.describe()
        self._prelude(case)
        with self.policy.using(choices):
            compiled.run()
        for d in self.devs[:case.devices]:
            d.synchronize()
        self.schedules += 1
        return {n: self.bufs[n].view.tobytes() for n in buffer_names(case.devices)}, self.last_describe

    def check(self, case: FuzzCase, choices=(), mutations=()) -> None:
        """Raise RaceFound when the case's effects under `choices` differ from its sequential meaning."""
        expected = sequential_effects(case)
        try:
            seen, text = self.effects(case, choices, mutations)
        except (DeadlockError, DeviceFault) as e:
            # a broken schedule may also hang or fault (e.g. a timeline written out of order): that is a finding
            # too; the machine is left stuck, so the next example gets fresh devices
            text = self.last_describe
            self.close()
            done = self.schedules
            self.__post_init__()
            self.schedules = done
            seen = {"(no effects)": f"{type(e).__name__}: {str(e).splitlines()[0]}"}
        if seen != expected:
            report = RaceReport(case, text, expected, seen, [list(c) for c in choices], tuple(mutations), self.target)
            report.seed = encode_seed(case, choices, mutations, self.target)
            raise RaceFound(report)


def replay(seed: str) -> RaceReport | None:
    """Run a race report's seed again: its report when the race reproduces, None when it does not."""
    case, choices, mutations, target = decode_seed(seed)
    fz = Fuzzer(target, max(case.devices, 1))
    try:
        fz.check(case, choices, mutations)
    except RaceFound as e:
        return e.report
    finally:
        fz.close()
    return None
