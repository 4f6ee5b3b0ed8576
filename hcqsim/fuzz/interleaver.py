"""The scheduler policy a fuzz test drives (`Interleaver`): it plays an `Interleaving`'s choices at the decisions that
have two or more options, then the in-order default or a seeded priority order; with a seed it also makes the
dispatches' inside choices and the memory model's (placement, early evictions, HDP drains). Every decision is
recorded so a failure can be told as steps."""
from __future__ import annotations

import contextlib
import os
import random

from .report import RaceFound, steps_text, trace_text
from .seeds import encode_interleaving_seed


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

    # a choice may also end the progress point: the host goes on while GPU work is pending (its next line runs
    # before the doorbell's work finished). On by default: without it every submit() drains the GPU before the host
    # reads, submits the next queue or waits, and the ordinary host/GPU ordering bugs are unreachable. False: only
    # queue against queue (and the insides of dispatches) is interleaved
    host_turns = True
    host_lines = True  # a host turn's step names the host code's line (the schedule fuzzer's notes say it instead)

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
                    why = f"[choice {self.pos - 1}: {len(ready)} ready]"
                    self.steps.append(("host", _HostTurn(why, self.host_lines)))
                return None, 0
            act, budget, which = ready[i], max(1, budget), self.pos - 1
        elif self.priority and options > 1:
            act = self._highest(ready)
            if act is None:
                if self.recording:
                    self.steps.append(("host", _HostTurn(f"[priority order: the host above {len(ready)} ready]",
                                                         self.host_lines)))
                return None, 0
            budget, which = 1 << 62, -2
        else:
            act, budget, which = ready[0], 1 << 62, -1
        if self.recording:
            q = _queue_of(act)
            number = 0
            if act is not q:  # a dispatch or CP DMA: numbered from 1 in the order the block first ran it
                number = self._numbers.setdefault(id(act), (act, len(self._numbers) + 1))[1]
            self.steps.append((q, act, len(q.gpu.trace), budget, which, len(ready), number))
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
        self._numbers: dict[int, tuple] = {}  # id(dispatch) -> (dispatch, its number in this block's report)
        self._host_streak, self._patience = 0, 0
        hooks = ("workgroup_order", "choose_waves", "split_waves", "device_order", "choose_cu", "choose_xcc",
                 "evict_lines", "hdp_drains", "memory_change_point")
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
            self.memory_change_point = _change_points(priority)

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

    def devices_opened(self, devices) -> None:
        """The runtime opened `devices` with this policy (open_devices calls it): a failure note names their
        queues ("compute0") and the buffers and signals behind the addresses of its trace."""
        import weakref
        self._devices = [d for d in getattr(self, "_devices", []) if d() is not None] + \
            [weakref.ref(d) for d in devices]

    def _live_devices(self) -> list:
        devs = [d() for d in getattr(self, "_devices", [])]
        return [d for d in devs if d is not None and not d._closed]

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
        devices = self._live_devices()
        self.name_queues(devices)
        note = "\n".join(["hcqsim interleaving of this failure (queue/packet steps):",
                          *("  " + ln for ln in self.steps_text().splitlines()),
                          *(["  " + w for w in [self.unexplored()] if w]),
                          "packet trace of the GPUs since the block began (last 60 lines each):",
                          *("  " + ln for ln in trace_text(self.trace(), 60).splitlines()),
                          f"replay: hcqsim.strategies.replay({seed!r}, <this test>)"])
        if devices:  # the buffers, signals and kernels behind the trace's addresses (runtime/names.py)
            from ..runtime.names import addresses_section
            try:
                section = addresses_section(note, devices)
            except Exception as e:  # naming must never hide the note it explains
                section = f"(naming the addresses failed: {type(e).__name__}: {e})"
            if section:
                note += "\n" + section
        return note

    def unexplored(self) -> str:
        """A warning when the recorded block offered the interleaving nothing to choose: no decision with a second
        ready activity and no host turn (host_turns off, or never asked). Then the failure (or the pass) does not
        depend on the interleaving, and a search over interleavings explored nothing. "" otherwise."""
        decisions = [s for s in self.steps if s[0] != "host"]
        host_turns = any(s[0] == "host" and s[1].startswith("took a turn") for s in self.steps)
        if host_turns or any(s[5] > 1 for s in decisions):
            return ""
        if not self.host_turns:
            why = ("host_turns is off (Interleaver.host_turns = False): every submit() ran to completion before "
                   "the host's next line, and no two activities were ready together")
        else:
            why = "no two activities were ever ready together and the host never took a turn"
        return f"(no interleaving was explored in this block: {why}; its result is the in-order one)"

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


CHANGE_POINT_DEPTHS = (1, 2, 3, 0)  # change points inside dispatches a priority seed may place (PCT's depth - 1)
CHANGE_POINT_RATES = (1.0, 0.5, 0.25)  # chance that a global memory / atomic instruction is one, while some are left


def _change_points(priority: int):
    """The priority order's change points inside dispatches (`memory_change_point`, asked by the shader core after
    each global memory or atomic instruction): a seed picks a depth (0-3 per block) and a rate; a change point ends
    the dispatch's turn right after that access, and `_highest` then drops it below the other activities, so
    another queue's kernel (or the host) can run between one kernel's load and its store."""
    rng = random.Random(f"{priority}/change")
    left, rate = [rng.choice(CHANGE_POINT_DEPTHS)], rng.choice(CHANGE_POINT_RATES)

    def change() -> bool:
        if left[0] and rng.random() < rate:
            left[0] -= 1
            return True
        return False
    return change if left[0] else None


_NOT_THE_HOST_CODE = ("hcqsim", "hypothesis", "_pytest", "pluggy", "contextlib", "functools", "threading")


class _HostTurn:
    """A host turn's step text, rendered when a report is made: "took a turn at FILE:LINE (source) [why]", the
    innermost line of host code outside hcqsim (and the test machinery) that was running -- the line whose call
    (a submit, a wait) returned with GPU work still pending."""

    __slots__ = ("where", "why")

    def __init__(self, why: str, find: bool = True):
        import sys
        self.why, self.where = why, None
        f = sys._getframe(2) if find else None
        while f is not None:
            mod = f.f_globals.get("__name__", "") or ""
            if mod.split(".")[0] not in _NOT_THE_HOST_CODE:
                self.where = (f.f_code.co_filename, f.f_lineno)
                break
            f = f.f_back

    def startswith(self, prefix: str) -> bool:
        return str(self).startswith(prefix)

    def __str__(self) -> str:
        if self.where is None:
            return f"took a turn {self.why}"
        import linecache
        code, line = self.where
        rel = os.path.relpath(code)
        src = linecache.getline(code, line).strip()
        return f"took a turn at {code if rel.startswith('..') else rel}:{line}" + (f" ({src})" if src else "") + \
            f" {self.why}"


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
    from ..runtime import device
    before = device.WAIT_SLICE_MS
    device.WAIT_SLICE_MS = 1 << 30
    try:
        yield
    finally:
        device.WAIT_SLICE_MS = before


def _queue_of(act):
    """The queue of a ready activity: itself, or the queue of a running dispatch or of its CP DMA engine."""
    return act if getattr(act, "kind", "queue") == "queue" else act.queue
