"""How a race the fuzzer found is told: the interleaving as queue/packet steps, the packet trace, the first difference
from the sequential meaning (`RaceReport`), raised as `RaceFound`."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .cases import FuzzCase


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
        q, act, start, budget, which, n_ready = s[:6]
        number = s[6] if len(s) > 6 else getattr(act, "seq", "?")
        trace = traces[id(q.gpu)]
        end = ends.get(i, len(trace))
        if act is not q and act.kind == "cp_dma":  # DMA_DATA without CP_SYNC moved chunks
            ran = f"its CP DMA ({_budget_text(budget, 'chunks')})"
        elif act is not q:  # a running dispatch's waves advanced
            ran = f"waves of dispatch #{number} ({_budget_text(budget, 'issue steps')})"
        else:
            packets = [e[3][2].name for e in _trace_slice(trace, start, end) if e[2] == "packet" and e[1] == q.name]
            ran = _collapsed(packets) if packets else "nothing (blocked)"
        how = (f"choice {which}: queue {q.name} of {n_ready} ready, budget {budget}" if which >= 0
               else f"priority order: highest of {n_ready} ready, to block" if which == -2
               else f"default: first of {n_ready} ready, to block")
        label = f"GPU {q.gpu.index} {names.get((q.gpu.index, q.ring_va), q.name)}"
        lines.append(f"{label} ran {ran}  [{how}]")
    return "\n".join(lines) if lines else "(no scheduling decisions)"


def _trace_slice(trace, start: int, end: int) -> list:
    n = len(trace)
    return [trace[k - n] for k in range(start, min(end, n))] if start < n else []


def _budget_text(budget: int, unit: str) -> str:
    """An activity's budget as a report says it: a number, or "until it blocks or ends" for the unbounded turns of
    the priority order and the in-order default."""
    return "until it blocks or ends" if budget >= 1 << 40 else f"up to {budget} {unit}"


def _collapsed(packets: list[str]) -> str:
    """Packet names with runs of one name (a dispatch's SET_SH_REG set-up) as "SET_SH_REG x9"."""
    out: list[str] = []
    for name in packets:
        if out and out[-1].split(" x")[0] == name:
            head, _, n = out[-1].partition(" x")
            out[-1] = f"{head} x{int(n or 1) + 1}"
        else:
            out.append(name)
    return ", ".join(out)


_SETUP = (" SET_SH_REG ", " SET_UCONFIG_REG ", " SET_CONFIG_REG ", " SET_CONTEXT_REG ")
_SETUP_LINE = re.compile(r"^(.*?\S+ )(SET_(?:SH|UCONFIG|CONFIG|CONTEXT)_REG) ")  # (time queue where ) (packet)


def _collapse_setup(lines: list[str]) -> list[str]:
    """Runs of register-set packet lines of one queue (a dispatch's set-up) as one line naming the registers."""
    out, run = [], []

    def flush():
        m = _SETUP_LINE.match(run[0]) if len(run) > 2 else None
        regs = [w.split("=")[0] for ln in run for w in ln.split() if "=" in w and w[:1].isupper()]
        if m and regs:
            out.append(f"{m.group(1)}{m.group(2)} x{len(run)} (register set-up: {regs[0]} .. {regs[-1]}, "
                       f"{len(regs)} registers)")
        else:
            out.extend(run)
        run.clear()

    for ln in lines:
        if any(k in ln for k in _SETUP) and (not run or ln.split()[1] == run[0].split()[1]):
            run.append(ln)
            continue
        flush()
        if any(k in ln for k in _SETUP):
            run.append(ln)
        else:
            out.append(ln)
    flush()
    return out


def trace_text(traces: dict[str, list[str]], limit: int | None = None) -> str:
    lines = []
    for label, tl in traces.items():
        lines.append(f"{label}:")
        tl = _collapse_setup(tl)
        shown = tl if limit is None or len(tl) <= limit else tl[-limit:]
        if len(shown) < len(tl):
            lines.append(f"  ... {len(tl) - len(shown)} earlier lines")
        lines += ["  " + ln for ln in shown]
    return "\n".join(lines) if lines else "(no GPU ran)"


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
