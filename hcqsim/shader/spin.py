"""Spin finding: is a long-running dispatch's batch of waves looping on memory nobody writes?

Two kinds of loop are a spin, both found by Brent's cycle finding over the wave state while memory stays unchanged
(`MEMORY`, the memory epoch, is bumped by every store that changes bytes, every packet batch and copy chunk, on
any GPU):

* *exact*: the whole state (PCs, SGPRs, VGPRs, SCC, LDS, MODE) recurs. Nothing it reads changed, so it loops for
  ever (a poll of a flag, `s_branch -1`).
* *counting*: the control state (PCs, liveness, barriers, SCC, LDS, MODE) recurs every `period` issue steps and
  every register that differs moves by the same amount each period (an induction variable: `tries++`, a
  decrementing timeout), while the loop's loads read the same addresses each period (and so the same values).
  The only thing that changes is a count. If the loop's exit waits for that count to reach a bound, hardware
  leaves when it does -- a bounded retry -- so this is reported only after `iterations` such periods (the
  report names the counting registers); a loop without loads, or whose addresses move (a walk over read-only
  data), is merely long and never a counting spin.

Only the batch's own writes reset what was counted; a write elsewhere, or a progress point (`RUNS`, bumped when
the host may have stored), only means one more whole period must be seen before a verdict (`SpinWatch`).
"""
from __future__ import annotations

import numpy as np

from .formats import EXEC_LO, VCC_LO

MEMORY = [0]  # the memory epoch (see module doc)
RUNS = [0]  # progress points started: the host may have stored since the last one
QUIET_STEPS = 64  # write-free issue steps before a watched dispatch's state is snapshotted
SPIN_ITERATIONS = 1024  # periods of a counting loop with memory unchanged before it is called a spin
MAX_BACKOFF = 4096  # issue steps a failed counting candidate waits, at most, before the next snapshot
_SPECIAL = {VCC_LO: "vcc_lo", VCC_LO + 1: "vcc_hi", EXEC_LO: "exec_lo", EXEC_LO + 1: "exec_hi"}  # same on both targets


def _control(W) -> tuple:
    return W.pc.copy(), W.alive.copy(), W.at_barrier.copy(), W.scc.copy()


def _same_control(W, c) -> bool:
    pc, alive, barrier, scc = c
    return (np.array_equal(W.pc, pc) and np.array_equal(W.alive, alive) and np.array_equal(W.at_barrier, barrier)
            and np.array_equal(W.scc, scc))


def _epochs() -> tuple[int, int]:
    return MEMORY[0], RUNS[0]


class Snapshot:
    """The state a later one is compared with: control, registers, LDS and MODE, and the epochs it was taken in."""

    __slots__ = ("epochs", "control", "s", "v", "lds", "mode", "power", "lam")

    def __init__(self, W, power: int):
        self.epochs = _epochs()
        self.control, self.s, self.v = _control(W), W.s.copy(), W.v.copy()
        self.lds, self.mode = W.lds.copy(), W.mode.copy()
        self.power, self.lam = power, 0

    def same_data(self, W) -> bool:
        return np.array_equal(W.lds, self.lds) and np.array_equal(W.mode, self.mode)


class Counting:
    """A counting loop being confirmed: every `period` steps the registers moved by `ds`/`dv` again and the loads
    read the same addresses. `fresh`: whole periods since memory last changed anywhere or the host last ran."""

    __slots__ = ("period", "ds", "dv", "s", "v", "since", "polls", "last_polls", "iterations", "epochs", "fresh")

    def __init__(self, period: int, ds: np.ndarray, dv: np.ndarray, W):
        self.period, self.ds, self.dv = period, ds, dv
        self.s, self.v = W.s.copy(), W.v.copy()
        self.since, self.polls, self.last_polls = 0, [], None
        self.iterations, self.epochs, self.fresh = 1, _epochs(), 0


class SpinWatch:
    """Follows one batch of waves step by step: `step(W)` after each issue step, `poll(pc, address)` for each load
    issued, `wrote()` when one of its own stores changed memory. `verdict` is None, "exact" or "counting" once a
    spin is found.

    An exact spin needs its whole period with memory unchanged everywhere and no progress point in between. A
    counting loop is broken by its own writes only: a write elsewhere (another queue's packet, a copy chunk,
    another kernel, the host between progress points) that changes what the loop loads changes the registers it
    loads into, which the next period shows; one that does not is not something the loop waits for. A verdict
    still needs one whole period after the last such change. (While anything but spinning kernels can run, no
    livelock is reported anyway: the GPU's scheduler asks only when nothing else is ready.)"""

    def __init__(self, iterations: int | None = SPIN_ITERATIONS):
        self.iterations = iterations  # None: counting loops are never a spin
        self.reset()

    def reset(self) -> None:
        self.snap: Snapshot | None = None
        self.counting: Counting | None = None
        self.quiet = 0  # issue steps since the batch's own last write
        self.backoff, self.wait = QUIET_STEPS, 0
        self.verdict: str | None = None
        self.period = 0  # issue steps of the loop found (a verdict, or a counting loop being confirmed)
        self.looped = False  # this step ended a period of the loop being followed

    @property
    def armed(self) -> bool:
        """A snapshot is held: loads issued now are noted (what a spin polls)."""
        return self.snap is not None

    def poll(self, pc: int, address: int | None) -> None:
        if self.counting is not None:
            self.counting.polls.append((pc, address))

    def wrote(self) -> None:
        """One of the batch's own stores changed memory: whatever was followed is not a spin."""
        self.snap, self.counting, self.quiet = None, None, 0
        self.backoff, self.wait = QUIET_STEPS, 0

    def step(self, W) -> bool:
        """After an issue step: True when the state shows a spin (`verdict` says which)."""
        self.verdict, self.looped = None, False
        snap = self.snap
        if snap is None:
            return self._start(W)
        c = self.counting
        if c is not None:
            return self._confirm(W, c)
        if _same_control(W, snap.control) and snap.same_data(W):
            ds, dv = W.s - snap.s, W.v - snap.v  # uint32: wraps
            if not ds.any() and not dv.any():
                if snap.epochs == _epochs():
                    self.verdict, self.period = "exact", snap.lam + 1
                    return True
                self.snap = Snapshot(W, 1)  # memory changed or the host ran meanwhile: once more without
                return False
            if self.iterations is not None:
                self.counting = Counting(snap.lam + 1, ds, dv, W)
                self.period, self.looped = snap.lam + 1, True
                return False
        snap.lam += 1
        if snap.lam == snap.power:
            self.snap = Snapshot(W, snap.power * 2)
        return False

    def skip(self, k: int) -> bool:
        """Before a translated block of `k` issue steps (shader.translate): account its first k - 1 steps as `step`
        would, and True, when they all fall in the quiet phase (no snapshot held, none taken during them: `step`
        only counts there, so the states they pass through are never looked at); the caller then calls `step` for
        the k-th. False, with nothing changed, otherwise."""
        if self.snap is not None or self.counting is not None:
            return False
        quiet, wait = self.quiet, self.wait
        for _ in range(k - 1):
            quiet += 1
            if quiet < QUIET_STEPS or wait > 0:
                wait -= 1
            else:
                return False  # a snapshot would be taken inside the block
        self.quiet, self.wait = quiet, wait
        return True

    def _start(self, W) -> bool:
        """After QUIET_STEPS steps without a write of its own (and any backoff), take a snapshot: a kernel that
        stores as it goes never pays for copies."""
        self.quiet += 1
        if self.quiet < QUIET_STEPS or self.wait > 0:
            self.wait -= 1
            return False
        self.snap = Snapshot(W, 1)
        return False

    def _confirm(self, W, c: Counting) -> bool:
        c.since += 1
        if c.since < c.period:
            return False
        polls, c.polls, c.since = c.polls, [], 0
        ok = (bool(polls) and all(a is not None for _, a in polls)
              and (c.last_polls is None or polls == c.last_polls)
              and _same_control(W, self.snap.control) and self.snap.same_data(W)
              and np.array_equal(W.s - c.s, c.ds) and np.array_equal(W.v - c.v, c.dv))
        if not ok:  # not a counting loop (data-dependent registers, moving addresses): back off, look again later
            self.snap, self.counting = None, None
            self.wait, self.backoff = self.backoff, min(self.backoff * 2, MAX_BACKOFF)
            return False
        c.s, c.v, c.last_polls = W.s.copy(), W.v.copy(), polls
        self.looped = True
        c.iterations += 1
        c.fresh = c.fresh + 1 if c.epochs == _epochs() else 0
        c.epochs = _epochs()
        if c.iterations >= self.iterations and c.fresh >= 1:
            self.verdict, self.period = "counting", c.period
            return True
        return False

    def counters(self, W, wave: int, limit: int = 4) -> list[tuple[str, int, int]]:
        """(register, change per period, value now) of the registers a counting loop counts in, for one wave."""
        c = self.counting
        if c is None:
            return []
        out = [(_SPECIAL.get(reg, f"s{reg}"), _signed(int(c.ds[wave, reg])), int(W.s[wave, reg]))
               for reg in np.nonzero(c.ds[wave])[0].tolist()]
        for reg in np.nonzero(c.dv[wave].any(axis=1))[0].tolist():
            lane = int(np.argmax(c.dv[wave, reg] != 0))
            out.append((f"v{reg}", _signed(int(c.dv[wave, reg, lane])), int(W.v[wave, reg, lane])))
        return out[:limit]


def _signed(delta: int) -> int:
    return delta - (1 << 32) if delta >= 1 << 31 else delta
