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

A failure inside `using` carries a note: the interleaving as queue/packet steps, the packet trace of the run
and a seed; `replay(seed, test_my_pipeline)` runs the test body again under exactly those choices.

`schedules()` draws a `FuzzCase`: fills, copies, kernels and host writes over small buffers on one to three
devices, with byte-granular, unaligned and partially overlapping ranges, parameters, several submits per queue
(a small `batch_limit`), work still in flight on every device's timeline (peer writes included), and several
runs of one compiled schedule that rebind buffers and change parameters. `Fuzzer.check` compiles it with the
schedule compiler, runs it under an interleaving and compares every buffer with the sequential meaning computed
here in numpy; a difference raises `RaceFound` carrying a `RaceReport`.

`mutated(...)` switches on deliberately broken compiler rules (hcqsim.runtime.plan.MUTATIONS) so tests can show
the fuzzer catches them. Profiles: `fuzz_settings()` is short and derandomized (CI, safe under pytest-xdist: no
example database is written unless asked); HCQSIM_FUZZ=nightly (or pytest's `--hypothesis-profile
hcqsim-nightly`) runs long random searches, and HCQSIM_FUZZ_DB=/shared/dir stores failures in a directory
example database every worker and machine reads.

Hypothesis is a test dependency: this module imports it at import time, and nothing in the runtime imports
this module. It does not import the emulator at import time (the pytest plugin registers the profiles).
"""
from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import random
import zlib
from dataclasses import dataclass, field

import numpy as np
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from .errors import DeadlockError, DeviceFault

U32 = 0xFFFFFFFF
BUFFER_BYTES = 64  # small buffers, so random ranges overlap often
# the buffers of about one case in eight: three SDMA chunks (queue.COPY_CHUNK, 4 KiB) and a bit, so a copy or fill
# spans several chunks and another queue may run between them (a kernel's range stays at most KERNEL_WORDS words)
LONG_BUFFER_BYTES = 3 * 4096 + 64
KERNEL_WORDS = 16
BUFFERS_PER_DEVICE = 2
MAX_DEVICES = 3
PRELUDE_QUEUE = 3  # copy queue index for in-flight timeline work: one the schedules here never use
COPY_QUEUES = 3  # copy queues a fuzzed schedule may use (0 .. 2)
MAX_CHOICES = 48
MAX_SCALAR = 1000  # kernel scalars and parameter values are 0..MAX_SCALAR
ALT = "'"  # "d0b1'" is the buffer a run may bind in place of d0b1

# -- profiles ---------------------------------------------------------------------------------------------

_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
# no "explain" phase: it re-runs the shrunk failure dozens of times to say which parts matter (a third of a
# mutation test's time), and the race report already says what happened
_PHASES = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink]
PROFILES = {
    # CI: a fixed, short search (the same examples on every worker and every run)
    "default": dict(max_examples=100, derandomize=True, database=None, deadline=None, suppress_health_check=_QUIET,
                    phases=_PHASES),
    # nightly: long random searches
    "nightly": dict(max_examples=3000, derandomize=False, deadline=None, suppress_health_check=_QUIET,
                    phases=_PHASES),
}
HYPOTHESIS_PROFILE_PREFIX = "hcqsim-"  # PROFILES as hypothesis knows them: hcqsim-default, hcqsim-nightly


def register_profiles() -> None:
    """Register PROFILES with hypothesis as hcqsim-<name>, so `pytest --hypothesis-profile hcqsim-nightly`
    selects one (fuzz_settings() follows the loaded profile). The pytest plugin calls this when it loads."""
    for name, kw in PROFILES.items():
        settings.register_profile(HYPOTHESIS_PROFILE_PREFIX + name, **kw)


def _profile_name(profile: str | None) -> str:
    if profile:
        return profile
    if os.environ.get("HCQSIM_FUZZ"):
        return os.environ["HCQSIM_FUZZ"]
    loaded = getattr(settings, "_current_profile", "") or ""
    if loaded.startswith(HYPOTHESIS_PROFILE_PREFIX) and loaded[len(HYPOTHESIS_PROFILE_PREFIX):] in PROFILES:
        return loaded[len(HYPOTHESIS_PROFILE_PREFIX):]
    return "default"


def fuzz_settings(profile: str | None = None, **overrides) -> settings:
    """The settings of a fuzz profile: `profile`, else $HCQSIM_FUZZ, else the hypothesis profile pytest loaded
    (`--hypothesis-profile hcqsim-<name>`), else "default". $HCQSIM_FUZZ_DB names a shared directory example
    database (a failure found by any worker replays on all)."""
    name = _profile_name(profile)
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


class Interleaving(list):
    """What `interleavings()` draws: the explicit choices, a list of `(ready index, budget)` made at the decisions
    with two or more options, and `priority`: 0, or the seed of a random priority order over the activities (a
    PCT-style schedule) that decides once the explicit choices ran out. Without it the first ready activity runs
    until it blocks, the in-order default (what shrinking aims for)."""

    def __init__(self, choices=(), priority: int = 0):
        super().__init__(tuple(c) for c in choices)
        self.priority = priority

    def __eq__(self, other):
        return list.__eq__(self, other) and self.priority == getattr(other, "priority", 0)

    __hash__ = None

    def __bool__(self) -> bool:  # empty only when it is the in-order default: no choices and no priority order
        return bool(self.priority) or len(self) > 0

    def __repr__(self) -> str:
        return f"Interleaving({list(self)!r}, priority={self.priority})" if self.priority else list.__repr__(self)


class Interleaver:
    """A scheduler policy (pass it as `policy=` to open_device / EmulatedGPU) driven by an `Interleaving` (or a plain
    list of choices `(which ready activity, how many packets or issue steps)`); when the list runs out (or outside
    `using`), the first ready activity runs until it blocks, as the default policy does, or, with a priority
    seed, the ready activity of highest priority does; one that is still ready at the next decision (it used up a
    quantum or its budget) drops to the lowest priority, so every activity progresses. With a priority seed the
    dispatches' inside is chosen from it too (workgroup launch order, which PC issues next, a wave issuing ahead of
    its workgroup, the CU and XCC each workgroup runs on under a memory model) and so is which GPU steps first at a
    progress point. Every decision is recorded (`steps`), so a
    failure can be told as queue/packet steps (`steps_text`)."""

    name = "interleaver"

    def __init__(self):
        self.choices: list[tuple[int, int]] = []
        self.pos = 0
        self.priority = 0
        # (queue, its packet count, its GPU's trace length, budget, choice index (-1 default, -2 priority), ready
        # count) per decision, or ("host", text) for what the host did in between (note())
        self.steps: list[tuple] = []
        self.queue_names: dict[tuple[int, int], str] = {}  # (GPU index, ring VA) -> the runtime's name
        self.recording = False  # only inside using()
        self._start(0)  # the priority order's state: ranks, demotions, dispatch numbers

    host_turns = False  # True: a choice may also end the progress point (the host goes on while work runs)

    def choose(self, ready):
        """The scheduler's question: which ready activity (a queue, or a running dispatch's waves) advances, by
        how much; (None, 0) hands the host a turn (with host_turns)."""
        options = len(ready) + (1 if self.host_turns else 0)
        # a choice is spent only where there is one to make (two or more options), so the drawn list steers
        # the decisions that matter instead of the many where a single queue can run
        if options > 1 and self.pos < len(self.choices):
            i, budget = self.choices[self.pos]
            self.pos += 1
            i %= options
            if i == len(ready):
                if self.recording:
                    self.steps.append(("host", f"took a turn [choice {self.pos - 1}: {len(ready)} ready]"))
                return None, 0
            act, budget, which = ready[i], max(1, budget), self.pos - 1
        elif self.priority and options > 1:
            act = self._highest(ready)
            if act is None:
                if self.recording:
                    self.steps.append(("host", f"took a turn [priority order: the host above {len(ready)} ready]"))
                return None, 0
            budget, which = 1 << 62, -2
        else:
            act, budget, which = ready[0], 1 << 62, -1
        if self.recording:
            q = _queue_of(act)
            self.steps.append((q, act, len(q.gpu.trace), budget, which, len(ready)))
        return act, budget

    # -- the priority order (PCT): ranks from the seed, a demotion when an activity keeps the GPU busy -----------

    def _highest(self, ready):
        """The ready activity of highest priority, or None for the host when it ranks above them all (with
        host_turns). The host gets at most `_patience` turns in a row: a driver entry it cannot tell from a wait
        (a doorbell, the poll after it) ends with no GPU work, a host waiting in a loop still lets the GPUs go."""
        last = self._last
        if last is not None and last is not _queue_of(last) and any(a is last for a in ready):
            # a dispatch that used up its quantum and is still running (it may spin on memory another activity
            # writes): it drops below the others, as a quantum ending does in the default order (a PCT change point)
            self._demoted[self._key(last)] = len(self._demoted) + 1
        best = min(ready, key=self._rank)
        if self.host_turns and self._host_streak < self._patience and self._rank("host") < self._rank(best):
            self._host_streak += 1
            self._last = None
            return None
        self._host_streak, self._last = 0, best
        return best

    def _key(self, act) -> tuple:
        """An activity's name, the same in every run of the block: (GPU, queue) or (GPU, queue, the how-many-th
        dispatch of the block it is); ("host",) for the host."""
        known = self._keys.get(id(act))  # (act, key): act kept, so its id is not reused inside the block
        if known is not None:
            return known[1]
        if act == "host":
            key = ("host",)
        else:
            q = _queue_of(act)
            if act is q:
                key = q.gpu.index, q.name
            else:
                seen = self._dispatches.setdefault(id(act), (act, len(self._dispatches)))
                key = q.gpu.index, q.name, seen[1]
        self._keys[id(act)] = (act, key)
        return key

    def _rank(self, act) -> tuple[int, float]:
        key = self._key(act)
        rank = self._ranks.get(key)
        if rank is None:  # a seeded draw per activity (string seeds hash the same in every process)
            rank = self._ranks[key] = random.Random(f"{self.priority}/{key}").random()
        return self._demoted.get(key, 0), rank

    def _start(self, priority: int) -> None:
        """Begin a block: reset the priority state; the dispatch-internal hooks exist only with a seed (the shader
        core skips its per-step choice work when the policy has none)."""
        self.priority, self._demoted, self._last, self._ranks, self._dispatches = priority, {}, None, {}, {}
        self._keys: dict[int, tuple] = {}  # id(activity) -> (activity, _key(activity)), for this block
        self._host_streak, self._patience = 0, 0
        hooks = ("workgroup_order", "choose_waves", "split_waves", "device_order", "choose_cu", "choose_xcc",
                 "evict_lines", "hdp_drains")
        for h in hooks:
            self.__dict__.pop(h, None)
        if priority:
            # one generator per kind of choice: how often one is asked (more GPUs, more workgroups) does not move
            # the others' draws
            groups, waves, split, gpus = (random.Random(f"{priority}/{k}") for k in ("wg", "pc", "split", "gpu"))
            self._patience = random.Random(f"{priority}/host").randint(1, 6)  # host turns in a row (_highest)
            self.workgroup_order = lambda n: _permutation(groups, n) if 1 < n <= 4096 else None
            self.choose_waves = lambda n_pcs: waves.randrange(n_pcs)
            self.split_waves = lambda n: split.randrange(n) if split.random() < 0.125 else None
            self.device_order = lambda n: _permutation(gpus, n)  # asked at every progress point
            place = random.Random(f"{priority}/place")  # memory model: the CU and XCC each workgroup runs on
            self.choose_cu = lambda n: place.randrange(n)
            self.choose_xcc = lambda n: place.randrange(n)
            self._memory_hooks(priority)

    def _memory_hooks(self, priority: int) -> None:
        """The memory model's early-leaving choices, from the priority seed (history-free like every other draw;
        without a seed none are made: no line leaves a cache early and the HDP never drains by itself, which with
        the default workgroup placement is the all-kept worst case). Under the adversarial model, lines evicted
        early at a progress point (a dirty one written back first) at a rate the seed picks (none for half the
        seeds: an early eviction mostly hides a stale or unwritten line); pending host-written HDP pages that
        drain on their own, at a rate the seed picks (none for half)."""
        evict, hdp = (random.Random(f"{priority}/{k}") for k in ("evict", "hdp"))
        evict_rate = evict.choice((0.0, 0.0, 0.125, 0.5))
        drain_rate = hdp.choice((0.0, 0.0, 0.25, 0.75))
        if evict_rate:
            self.evict_lines = lambda n: ([evict.randrange(n) for _ in range(evict.randint(1, 4))]
                                          if evict.random() < evict_rate else [])
        if drain_rate:
            self.hdp_drains = lambda n: [hdp.random() < drain_rate for _ in range(n)]

    def note(self, text: str) -> None:
        """Record a host step between the GPU steps (what the host did, in the report's words)."""
        if self.recording:
            self.steps.append(("host", text))

    def name_queues(self, devices) -> None:
        """Learn the runtime's names of the devices' hardware queues ("compute0", "copy1"), for steps_text."""
        for dev in devices:
            for (engine, index), ring in getattr(dev, "_rings", {}).items():
                self.queue_names[(dev.index, ring.ring_va)] = f"{engine}{index}"

    @contextlib.contextmanager
    def using(self, choices):
        """Make the decisions of the block from `choices`. An exception leaving the block gets a note: the
        steps, the packet trace since the block began and a seed for `replay(seed, test)`."""
        self.choices, self.pos, self.steps, self.recording = [tuple(c) for c in choices], 0, [], True
        self._start(getattr(choices, "priority", 0))
        self._drawn = choices
        try:
            with unsliced_waits():
                yield self
        except BaseException as e:
            if hasattr(e, "add_note") and not isinstance(e, RaceFound):  # a race report tells it already
                e.add_note(self._failure_note())
            raise
        finally:
            self.choices, self.pos, self.recording = [], 0, False
            self._start(0)

    def _failure_note(self) -> str:
        seed = encode_interleaving_seed(self._drawn)
        return "\n".join(["hcqsim interleaving of this failure (queue/packet steps):",
                          *("  " + ln for ln in self.steps_text().splitlines()),
                          "packet trace of the GPUs since the block began (last 60 lines each):",
                          *("  " + ln for ln in trace_text(self.trace(), 60).splitlines()),
                          f"replay: hcqsim.strategies.replay({seed!r}, <this test>)"])

    def _gpus(self) -> list:
        gpus = {id(s[0].gpu): s[0].gpu for s in self.steps if s[0] != "host"}
        return sorted(gpus.values(), key=lambda g: g.index)

    def snapshot(self):
        """What steps_text needs, kept after the machine moves on: (steps, GPU -> its trace entries, names)."""
        return list(self.steps), {id(g): list(g.trace) for g in self._gpus()}, dict(self.queue_names)

    def steps_text(self) -> str:
        """The recorded decisions as lines: `GPU 1 copy0 ran COPY_LINEAR, FENCE`; `host ...`."""
        return steps_text((self.steps, {id(g): g.trace for g in self._gpus()}, self.queue_names))

    def trace(self) -> dict[str, list[str]]:
        """Packet trace lines of every GPU a recorded decision ran on, since the recording began."""
        out = {}
        for gpu in self._gpus():
            first = next(s[2] for s in self.steps if s[0] != "host" and s[0].gpu is gpu)
            out[gpu.label] = gpu.trace_lines()[first:]
        return out


def _permutation(rng: random.Random, n: int) -> list[int]:
    """`rng.sample(range(n), n)`, the same list from the same draws (CPython's sample takes its pool method for every
    n when k == n: the set method needs n > 21 + 4 ** ceil(log4(3n))), without sample's per-call checks (it runs at
    every progress point). tests/test_fuzz_permutation.py compares the two."""
    randbelow = rng._randbelow
    pool = list(range(n))
    out = [0] * n
    for i in range(n):
        j = randbelow(n - i)
        out[i] = pool[j]
        pool[j] = pool[n - i - 1]
    return out


@contextlib.contextmanager
def unsliced_waits():
    """Runtime waits inside the block sleep in one slice up to their timeout instead of 100 ms slices. On the
    emulator at progress points a slice that runs out (a loaded machine) ends a progress point early, which
    moves the boundaries of the GPUs' bounded steps and so the sequence of scheduling decisions: the same
    choices would interleave differently depending on the machine's load. (Fixing that belongs to the engine;
    this keeps a fuzz run a function of its choices.)"""
    from .runtime import device
    before = device.WAIT_SLICE_MS
    device.WAIT_SLICE_MS = 1 << 30
    try:
        yield
    finally:
        device.WAIT_SLICE_MS = before


def _queue_of(act):
    """The queue of a ready activity: itself, or the queue of a running dispatch or of its CP DMA engine."""
    return act if getattr(act, "kind", "queue") == "queue" else act.queue


def steps_text(snapshot) -> str:
    """An Interleaver.snapshot() as lines, one per decision or host step."""
    steps, traces, names = snapshot
    gpu_steps = [i for i, s in enumerate(steps) if s[0] != "host"]
    ends: dict[int, int] = {}  # step -> trace length where its GPU's next step began
    last_on: dict[int, int] = {}
    for i in gpu_steps:
        g = id(steps[i][0].gpu)
        if g in last_on:
            ends[last_on[g]] = steps[i][2]
        last_on[g] = i
    lines = []
    for i, s in enumerate(steps):
        if s[0] == "host":
            lines.append(f"host {s[1]}")
            continue
        q, act, start, budget, which, n_ready = s
        trace = traces[id(q.gpu)]
        end = ends.get(i, len(trace))
        if act is not q and act.kind == "cp_dma":  # DMA_DATA without CP_SYNC moved chunks
            ran = f"its CP DMA (up to {budget} chunks)"
        elif act is not q:  # a running dispatch's waves advanced
            ran = f"waves of dispatch #{getattr(act, 'seq', '?')} (up to {budget} issue steps)"
        else:
            packets = [e[3][2].name for e in _trace_slice(trace, start, end) if e[2] == "packet" and e[1] == q.name]
            ran = ", ".join(packets) if packets else "nothing (blocked)"
        how = (f"choice {which}: queue {q.name} of {n_ready} ready, budget {budget}" if which >= 0
               else f"priority order: highest of {n_ready} ready, to block" if which == -2
               else f"default: first of {n_ready} ready, to block")
        label = f"GPU {q.gpu.index} {names.get((q.gpu.index, q.ring_va), q.name)}"
        lines.append(f"{label} ran {ran}  [{how}]")
    return "\n".join(lines) if lines else "(no scheduling decisions)"


def _trace_slice(trace, start: int, end: int) -> list:
    n = len(trace)
    return [trace[k - n] for k in range(start, min(end, n))] if start < n else []


def trace_text(traces: dict[str, list[str]], limit: int | None = None) -> str:
    lines = []
    for label, tl in traces.items():
        lines.append(f"{label}:")
        shown = tl if limit is None or len(tl) <= limit else tl[-limit:]
        if len(shown) < len(tl):
            lines.append(f"  ... {len(tl) - len(shown)} earlier lines")
        lines += ["  " + ln for ln in shown]
    return "\n".join(lines) if lines else "(no GPU ran)"


def interleavings(max_choices: int = MAX_CHOICES):
    """An `Interleaving`: a quarter explicit scheduling decisions (ready-activity index 0..7, budget 1..24) then the
    in-order default, half a priority order only (a seed ranking the activities and the host; the inside of the
    dispatches and which GPU steps first drawn from it too), a quarter both. Shrinks toward run-to-block (no
    choices, no seed)."""
    # the mode and seed first: hypothesis fills the tail of a novel example with its simplest values more often
    return st.tuples(_window(0, 3), _window(1, U32), st.lists(_window(*_CHOICE), max_size=max_choices)).map(
        _as_interleaving)


def _as_interleaving(drawn) -> Interleaving:
    mode, seed, xs = drawn
    mode -= HISTORY_FREE_BASE  # 0: explicit choices, then in order; 1, 2: a priority order only; 3: both
    choices = [((x - HISTORY_FREE_BASE) // 24, (x - HISTORY_FREE_BASE) % 24 + 1) for x in xs] if mode in (0, 3) else []
    return Interleaving(choices, seed - HISTORY_FREE_BASE if mode else 0)


# -- operation DAGs -----------------------------------------------------------------------------------------

# kernel name -> (buffer arguments: (read?, write?) each, scalar arguments) for the ops drawn here
FUZZ_KERNELS = {"inc": ([(True, True)], 0), "add": ([(True, False), (True, False), (False, True)], 0),
                "scale": ([(True, False), (False, True)], 1)}


@dataclass(frozen=True)
class FuzzCase:
    """Operations as plain data. Buffers are "d<k>b<j>" (device k, `buffer_bytes` each); "d<k>b<j>'" is the
    buffer a run may bind in its place. An op is
    ("fill", buf, off, size, value) | ("copy", dst, doff, src, soff, size) | ("host_write", buf, off, [bytes])
    | ("kernel", name, [[buf, off], ...], [scalars], n): n words from each buffer argument's offset.
    A fill value or kernel scalar may be a parameter's name ("p0"). `params`: ((name, default), ...).
    `prelude`: (device, fill or copy) submitted straight to that device's timeline before the first run, still
    in flight (gated) when it starts. `runs`: per run of the one compiled schedule, (names rebound to their
    primed buffer, ((param, value), ...))."""

    devices: int
    ops: tuple
    prelude: tuple = ()
    batch_limit: int = 32
    params: tuple = ()
    runs: tuple = (((), ()),)
    buffer_bytes: int = BUFFER_BYTES  # every buffer's size (LONG_BUFFER_BYTES: copies and fills span SDMA chunks)

    @property
    def first_index(self) -> int:
        """The schedule index of ops[0]: with a prelude, op 0 is the host opening its gates."""
        return 1 if self.prelude else 0

    def text(self) -> str:
        lines = []
        if self.buffer_bytes != BUFFER_BYTES:
            lines.append(f"buffers of {self.buffer_bytes} bytes")
        if self.batch_limit != 32:
            lines.append(f"batch_limit={self.batch_limit}")
        if self.params:
            lines.append("params: " + ", ".join(f"{n}={v}" for n, v in self.params))
        lines += [f"prelude on GPU {k}: {_op_text(op)}  (timeline work in flight)" for k, op in self.prelude]
        if self.prelude:
            lines.append("#0: host opens the prelude gates")
        lines += [f"#{i + self.first_index}: {_op_text(op)}" for i, op in enumerate(self.ops)]
        if self.runs != (((), ()),):
            for r, (rebound, params) in enumerate(self.runs):
                what = [f"{n} -> {n}{ALT}" for n in rebound] + [f"{n}={v}" for n, v in params]
                lines.append(f"run {r}: " + (", ".join(what) if what else "as compiled"))
        return "\n".join(lines)


def _value_text(v) -> str:
    return v if isinstance(v, str) else f"0x{v:08x}"


def _op_text(op) -> str:
    if op[0] == "fill":
        return f"fill {op[1]}[{op[2]}:{op[2] + op[3]}] = {_value_text(op[4])}"
    if op[0] == "copy":
        return f"copy {op[1]}[{op[2]}:{op[2] + op[5]}] <- {op[3]}[{op[4]}:{op[4] + op[5]}]"
    if op[0] == "host_write":
        return f"host_write {op[1]}[{op[2]}:{op[2] + len(op[3])}] = {bytes(op[3]).hex()}"
    _, name, bufs, scalars, n = op
    return f"kernel {name}({', '.join(f'{b}+{o}' for b, o in bufs)}{''.join(f', {s}' for s in scalars)}, n={n})"


def buffer_names(devices: int) -> list[str]:
    return [f"d{d}b{j}" for d in range(devices) for j in range(BUFFERS_PER_DEVICE)]


def all_buffer_names(devices: int) -> list[str]:
    """The buffers of a case and the ones its runs may bind instead."""
    return [n + alt for n in buffer_names(devices) for alt in ("", ALT)]


# Integers independent of the process's history. Hypothesis (6.131 on) replaces about one integer or bytes draw in
# twenty by a literal taken from the source of the *local* modules imported so far (not site-packages, not tests).
# Which modules those are depends on what else ran in the process, so the same derandomized search drew other cases
# and interleavings after the rest of the test suite than alone: mutants and races found alone were missed after it
# (issue 16). Every draw here is made in a window of integers no source literal lies in (HISTORY_FREE_BASE and
# up, tests/test_fuzz_history.py checks the loaded modules) and shifted back, so there is no literal hypothesis could
# substitute: generation and shrinking (toward the window's start, so toward `lo`) are otherwise hypothesis' own.
HISTORY_FREE_BASE = 0x5EED << 32  # 47 bits: above every literal of hcqsim, a few bytes per draw
_HISTORY_FREE_SPAN = 1 << 40  # the widest range drawn


@functools.lru_cache(maxsize=None)
def _window(lo: int, hi: int):
    if not 0 <= hi - lo < _HISTORY_FREE_SPAN:
        raise ValueError(f"history-free integers span at most 2**40 values, not {lo}..{hi}")
    return st.integers(HISTORY_FREE_BASE + lo, HISTORY_FREE_BASE + hi)


def _int(draw, lo: int, hi: int) -> int:
    """An integer in lo..hi, from the window (the composite strategies' draws)."""
    return draw(_window(lo, hi)) - HISTORY_FREE_BASE


def _unshift(v: int) -> int:
    return v - HISTORY_FREE_BASE


def integers(lo: int, hi: int):
    """`st.integers(lo, hi)` whose examples do not depend on which modules the process imported before (see
    HISTORY_FREE_BASE): use it for choices a derandomized search must make the same way in every test run."""
    return _window(lo, hi).map(_unshift)


def _bytes(draw, size: int) -> bytes:
    """`size` bytes from one history-free draw (st.binary may be replaced by a bytes literal of the same length);
    they shrink toward the bytes of seed 0."""
    return random.Random(_int(draw, 0, U32)).randbytes(size)


# a choice among n things is an index taken modulo n, shrinking to the first
_COIN = st.booleans()
_KEEP = (0, 63)  # 0: the operation is left out (what the shrinker aims for)
_CHOICE = (0, 8 * 24 - 1)  # (ready-queue index 0..7, budget 1..24) as one number


def _pick(draw, items):
    return items[_int(draw, 0, 255) % len(items)]


def _cuts(draw, size: int = BUFFER_BYTES) -> list[int]:
    """Byte offsets ranges start and end near, shared by a case's ops, so partial overlaps (down to one byte)
    are common; the last is the buffers' size."""
    return sorted({0, size} | {_int(draw, 1, size - 1) for _ in range(_int(draw, 0, 4))})


def _range(draw, cuts: list[int], align: int, size: int | None = None) -> tuple[int, int]:
    """(offset, size) in a buffer: ends at or next to a cut (byte-granular when align is 1)."""
    jitter = (lambda: (0, 1, -1)[_int(draw, 0, 2)]) if align == 1 else (lambda: 0)
    clamp = lambda v, lo, hi: max(lo, min(hi, v))  # noqa: E731
    end = cuts[-1]  # the buffers' size
    if size is None:
        lo = clamp(_pick(draw, cuts[:-1]) + jitter(), 0, end - align) // align * align
        hi = clamp(_pick(draw, cuts[1:]) + jitter(), lo + align, end)
        hi = min(-(-hi // align) * align, end)
        return lo, hi - lo
    return clamp(_pick(draw, cuts) + jitter(), 0, end - size) // align * align, size


def _buffer(draw, names: list[str], recent: list[str]) -> str:
    """A buffer: half the time one an earlier operation of the case used, so operations depend on each other (RAW,
    WAR, WAW chains through several queues are what a compiler's wait rules get wrong)."""
    near = [b for b in recent if b in names]
    return _pick(draw, near) if near and draw(_COIN) else _pick(draw, names)


def _op(draw, names: list[str], cuts: list[int], params: list[str], kernels: bool, host: bool,
        recent: list[str] | None = None):
    recent = [] if recent is None else recent
    kinds = ["fill", "copy"] + ["kernel"] * kernels + ["host_write"] * host
    kind = _pick(draw, kinds)
    value = lambda hi: _pick(draw, params) if params and draw(_COIN) else _int(draw, 0, hi)  # noqa: E731
    if kind == "fill":
        off, size = _range(draw, cuts, 4)
        op = ("fill", _buffer(draw, names, recent), off, size, value(U32))
    elif kind == "copy":
        off, size = _range(draw, cuts, 1)
        soff, _ = _range(draw, cuts, 1, size)
        dst, src = _buffer(draw, names, recent), _buffer(draw, names, recent)
        if dst == src and soff < off + size and off < soff + size:  # one copy's own ranges never overlap: the
            src = names[(names.index(dst) + 1) % len(names)]        # order within a copy is not its meaning
        op = ("copy", dst, off, src, soff, size)
    elif kind == "host_write":
        off, size = _range(draw, cuts, 1)
        op = ("host_write", _buffer(draw, names, recent), off, list(_bytes(draw, min(size, BUFFER_BYTES))))
    else:
        name = _pick(draw, sorted(FUZZ_KERNELS))
        bargs, nscalars = FUZZ_KERNELS[name]
        n = min(_range(draw, cuts, 4)[1] // 4, KERNEL_WORDS)
        device = _buffer(draw, names, recent)[:2]  # a kernel's buffers on its own device
        local = [b for b in names if b.startswith(device)]
        args = [[_buffer(draw, local, recent), _range(draw, cuts, 4, 4 * n)[0]] for _ in bargs]
        op = ("kernel", name, args, [value(MAX_SCALAR) for _ in range(nscalars)], n)
    recent += _buffers_of(op)
    return op


_RELAY_OPS = 6  # operations of the relay motif
_RELAY_SLOTS = 4  # 16-byte slots of a buffer the relay motif's ranges sit in (BUFFER_BYTES // 16)


def _relay(draw, names: list[str]) -> list[tuple]:
    """The shape that tells a wait's knowledge *at the awaited point* from its producer's knowledge *now* (and a
    submit split after an awaited operation from one that is not): queue P runs #2 then #3, and #3 waits for
    queue R's #1; queue Q's #4 waits for P's #2 only (P learnt of #1 after #2); Q's #5 depends on #1 again. A
    compiler that lets #4's wait teach Q what P knows now believes #5 is ordered after #1 and drops its wait; with
    batch_limit 1, #2 ends P's first submit, and dropping its signal leaves #4 waiting for ever.
        #1 R: write A[s1]            (a fill, or a copy into A)
        #2 P: kernel inc B[s2]
        #3 P: kernel add A[s1] + B[s2] -> B[s3]   (waits for R: #1)
        #4 Q: B[s4] <- B[s2]          (waits for P at #2)
        #5 Q: B[s4] <- A[s1]          (after #4 on Q; depends on #1)
        #6 P: kernel inc A[s1]        (P goes on: write after #5's read, on another queue)
    Q's pair is two copies (Q a copy queue after R's: only an interleaving that holds R back shows the bug) or two
    `scale` kernels by odd factors (Q compute queue 1, ahead of R in the in-order default, which shows it). On
    device 0, whose compute queue 0 (P: the finalizer's queue) ends the schedule, so nothing else waits for #3
    and a lost signal of #2 is not covered up by a later one; #1 may copy from a peer device (it then runs on the
    peer's GPU). #6 overwrites what #5 reads: a compiler that drops that write-after-read wait lets P run it before
    Q's #5 in the in-order default. The buffers, the slots, the size, the factors and #1's value or source are
    drawn."""
    dev = "d0"
    local = [n for n in names if n.startswith(dev)]
    a = _pick(draw, local)
    b = next(n for n in local if n != a)
    slots = list(range(_RELAY_SLOTS))
    s1 = _pick(draw, slots)
    s2, s3, s4 = (slots.pop(_int(draw, 0, 255) % len(slots)) * 16 for _ in range(3))
    s1 *= 16
    n = _int(draw, 1, 4)
    peers = [x for x in names if x[:2] != dev]
    if draw(_COIN):
        first = ("fill", a, s1, 4 * n, _int(draw, 0, U32))
    else:  # a copy runs on its source's device: from a peer, #1 runs on another GPU than #2 .. #5
        src = _pick(draw, peers or [b])
        first = ("copy", a, s1, src, _int(draw, 0, _RELAY_SLOTS * 16 - 4 * n), 4 * n)
    if draw(_COIN):
        odd = lambda: 2 * _int(draw, 0, MAX_SCALAR // 2 - 1) + 1  # noqa: E731  (odd: a different input shows)
        tail = [("kernel", "scale", [[b, s2], [b, s4]], [odd()], n), ("kernel", "scale", [[a, s1], [b, s4]], [odd()], n)]
    else:
        tail = [("copy", b, s4, b, s2, 4 * n), ("copy", b, s4, a, s1, 4 * n)]
    return [first, ("kernel", "inc", [[b, s2]], [], n), ("kernel", "add", [[a, s1], [b, s2], [b, s3]], [], n), *tail,
            ("kernel", "inc", [[a, s1]], [], n)]


def _buffers_of(op) -> list[str]:
    if op[0] == "kernel":
        return [b for b, _ in op[2]]
    return [op[1], op[3]] if op[0] == "copy" else [op[1]]


@st.composite
def schedules(draw, *, max_ops: int = 8, devices: int | None = None, kernels: bool = True, host: bool = True,
              prelude: bool = True, replays: bool = True, min_ops: int = 1):
    """A FuzzCase: 1..max_ops operations (about max_ops / 2 on average) over 2 small buffers per device (64 bytes;
    one case in eight LONG_BUFFER_BYTES, so copies and fills span several SDMA chunks), on `devices` (default: 1 to
    3) devices; with `prelude`, fills and copies in flight on every device's timeline; with `replays`, parameters
    and 1-3 runs that rebind buffers and change parameters. One case in five (with kernels, max_ops >= 6)
    contains the relay motif (`_relay`), the shape knowledge and batch-split bugs need."""
    ndev = devices or _pick(draw, (1, 2, 1, 3, 2))  # one and two devices most: more of the ops then conflict
    names = buffer_names(ndev)
    size = LONG_BUFFER_BYTES if _int(draw, 0, 7) == 7 else BUFFER_BYTES
    cuts = _cuts(draw, size)
    params = []
    if replays:
        params = [(f"p{i}", _int(draw, 0, MAX_SCALAR)) for i in range(_int(draw, 0, 2))]
    pnames = [n for n, _ in params]
    # a count, then each operation behind a keep number (0 drops it: the shrinker deletes any one operation by
    # lowering its number). The count is max_ops minus the drawn number: drawn up from min_ops (or hypothesis' list
    # strategy) it averaged ~3 of 8, as hypothesis' generation keeps reusing small early choices; shrinking is the
    # keep numbers' job, so the count need not shrink toward few
    count = max_ops - _int(draw, 0, max_ops - min_ops)
    relay = kernels and max_ops >= _RELAY_OPS and _int(draw, 0, 4) == 0
    count = max(count, _RELAY_OPS) if relay else count
    recent: list[str] = []
    drawn = [(_int(draw, *_KEEP), _op(draw, names, cuts, pnames, kernels, host, recent))
             for _ in range(count - (_RELAY_OPS if relay else 0))]
    if relay:  # each of its operations behind a keep number too: the shrinker may drop any of them
        motif = [(_int(draw, *_KEEP), op) for op in _relay(draw, names)]
        at = _int(draw, 0, len(drawn))
        drawn[at:at] = motif
    ops = tuple(op for keep, op in drawn if keep or min_ops > 1) or (drawn[-1][1],)
    # with the relay motif mostly a submit per operation (#2 then ends a submit that is not its queue's last)
    batch_limit = ((1, 1, 1, 2) if relay else (32, 1, 2))[_int(draw, 0, 2 + relay)]
    pre = ()
    if prelude:
        # on any device's timeline, writing any device's memory (a peer copy or fill into another's buffer)
        pre = tuple((_int(draw, 0, ndev - 1), _op(draw, names, cuts, [], False, False))
                    for _ in range(_int(draw, 0, ndev + 1)))
    runs = (((), ()),)
    if replays:
        runs = tuple((tuple(sorted({_buffer(draw, names, recent) for _ in range(_int(draw, 0, 3))})),
                      tuple((n, _int(draw, 0, MAX_SCALAR)) for n in pnames if draw(_COIN)))
                     for _ in range(_int(draw, 1, 3)))
    return FuzzCase(ndev, ops, pre, batch_limit, tuple(params), runs, size)


# -- the sequential meaning (numpy) -----------------------------------------------------------------------


def initial_memory(devices: int, size: int = BUFFER_BYTES) -> dict[str, np.ndarray]:
    """Word j of the k-th buffer starts as (k + 1) << 24 | j."""
    return {name: (((k + 1) << 24) + np.arange(size // 4, dtype=np.uint64)).astype("<u4").view(np.uint8)
            for k, name in enumerate(all_buffer_names(devices))}


def _apply(mem: dict, op, bind=lambda n: n, param=lambda v: v) -> None:
    kind = op[0]
    if kind == "fill":
        _, b, off, size, v = op
        mem[bind(b)][off:off + size] = np.full(size // 4, int(param(v)) & U32, "<u4").view(np.uint8)
    elif kind == "copy":
        _, d, doff, s, soff, size = op
        mem[bind(d)][doff:doff + size] = mem[bind(s)][soff:soff + size].copy()
    elif kind == "host_write":
        _, b, off, data = op
        mem[bind(b)][off:off + len(data)] = np.asarray(data, np.uint8)
    else:
        _, name, bufs, scalars, n = op
        w = [mem[bind(b)][o:o + 4 * n].view("<u4").astype(np.uint64) for b, o in bufs]
        if name == "inc":
            out, res = bufs[0], w[0] + 1
        elif name == "add":
            out, res = bufs[2], w[0] + w[1]
        else:
            out, res = bufs[1], w[0] * int(param(scalars[0]))
        mem[bind(out[0])][out[1]:out[1] + 4 * n] = (res & U32).astype("<u4").view(np.uint8)


def sequential_effects(case: FuzzCase) -> dict[str, bytes]:
    """What the case means: the prelude, then for each run every operation, one at a time in program order,
    on the buffers that run binds and with its parameter values."""
    mem = initial_memory(case.devices, case.buffer_bytes)
    for _, op in case.prelude:
        _apply(mem, op)
    defaults = dict(case.params)
    for rebound, params in case.runs:
        values = defaults | dict(params)
        bind = lambda n, r=frozenset(rebound): n + ALT if n in r else n  # noqa: E731
        param = lambda v, vs=values: vs[v] if isinstance(v, str) else v  # noqa: E731
        for op in case.ops:
            _apply(mem, op, bind, param)
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
    recorded: tuple = ()  # (Interleaver.snapshot(), {GPU label: (gpu, trace entries)}), formatted on demand
    priority: int = 0  # the interleaving's priority seed (0: run-to-block once the choices ran out)

    @property
    def steps(self) -> str:
        """The interleaving as queue/packet steps."""
        return steps_text(self.recorded[0]) if self.recorded else "(not recorded)"

    @property
    def trace(self) -> dict[str, list[str]]:
        """GPU label -> packet trace lines of the failing run."""
        if not self.recorded:
            return {}
        return {label: [gpu._format_trace(e) for e in entries] for label, (gpu, entries) in self.recorded[1].items()}

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

    def text(self, trace_lines: int = 80) -> str:
        diverging = [n for n in sorted(self.expected) if self.expected[n] != self.seen.get(n, self.expected[n])]
        words = lambda b: " ".join(f"{w:08x}" for w in np.frombuffer(b, "<u4"))  # noqa: E731
        lines = [f"race: effects depend on the interleaving ({len(self.case.ops)} operations"
                 + (f", {len(self.case.prelude)} in flight before" if self.case.prelude else "")
                 + (f", {len(self.case.runs)} runs" if len(self.case.runs) > 1 else "")
                 + (f"; mutations {', '.join(self.mutations)}" if self.mutations else "") + ")",
                 "operations:", *("  " + ln for ln in self.case.text().splitlines()),
                 "compiled queues (describe()):", *("  " + ln for ln in self.describe.splitlines()),
                 f"first difference: {self.first_difference}"]
        for n in diverging:
            lines += [f"  {n} sequential:       {words(self.expected[n])}",
                      f"  {n} this interleaving: {words(self.seen[n])}"]
        lines += ["interleaving (queue/packet steps):", *("  " + ln for ln in self.steps.splitlines()),
                  f"packet trace of the failing run (last {trace_lines} lines per GPU; report.trace has all):",
                  *("  " + ln for ln in trace_text(self.trace, trace_lines).splitlines()),
                  f"choices: {self.choices}" + (f", priority seed {self.priority}" if self.priority else ""),
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


def _encode(doc: dict) -> str:
    return base64.urlsafe_b64encode(zlib.compress(json.dumps(doc).encode(), 9)).decode()


def _decode(seed: str) -> dict:
    try:
        return json.loads(zlib.decompress(base64.urlsafe_b64decode(seed.encode())))
    except (ValueError, zlib.error) as e:
        raise ValueError(f"not an hcqsim replay seed: {seed[:40]!r}... ({e})") from None


def encode_seed(case: FuzzCase, choices, mutations, target: str, host_turns: bool = False,
                machine: int | None = None) -> str:
    doc = {"kind": "schedule", "devices": case.devices, "ops": case.ops, "prelude": case.prelude,
           "batch_limit": case.batch_limit, "params": case.params, "runs": case.runs,
           "buffer_bytes": case.buffer_bytes,
           "choices": [list(c) for c in choices], "priority": getattr(choices, "priority", 0),
           "mutations": list(mutations), "target": target, "host_turns": host_turns,
           "machine": machine or case.devices}  # the GPUs of the machine it ran on (ready lists, GPU order)
    return _encode(doc)


def encode_interleaving_seed(choices) -> str:
    """A seed for a user test's interleaving (`replay(seed, test)`)."""
    return _encode({"kind": "interleaving", "choices": [list(c) for c in choices],
                    "priority": getattr(choices, "priority", 0)})


def decode_seed(seed: str) -> tuple[FuzzCase, list, tuple, str]:
    doc = _decode(seed)
    if doc.get("kind", "schedule") != "schedule":
        raise ValueError("this seed is a user test's interleaving: replay(seed, test) runs it")
    tup = lambda ops: tuple(tuple(o) for o in ops)  # noqa: E731
    prelude = tuple((k, tuple(op)) for k, op in doc["prelude"]) if doc["prelude"] and \
        isinstance(doc["prelude"][0][0], int) else tuple((0, tuple(op)) for op in doc["prelude"])
    runs = tuple((tuple(r), tuple(tuple(p) for p in ps)) for r, ps in doc.get("runs", [[[], []]]))
    case = FuzzCase(doc["devices"], tup(doc["ops"]), prelude, doc.get("batch_limit", 32),
                    tuple(tuple(p) for p in doc.get("params", ())), runs, doc.get("buffer_bytes", BUFFER_BYTES))
    return case, Interleaving(doc["choices"], doc.get("priority", 0)), tuple(doc["mutations"]), doc["target"]


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
        from .runtime import open_devices
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
            from .kernels import code_object
            self.progs[key] = dev.load_program(code_object(name, dev.target), name)
        return self.progs[key]

    def _build(self, case: FuzzCase):
        from .runtime import Schedule, region
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
