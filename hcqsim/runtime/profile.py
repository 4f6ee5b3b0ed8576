"""Profiles of schedule runs: per-operation GPU timestamps on one time base, as trace events or a picture.

`CompiledSchedule.run(profile=True)` runs the variant of the command buffers that writes a timestamp before
and after every operation (PM4 RELEASE_MEM DATA_SEL 3 / SDMA TIMESTAMP GET_GLOBAL: the 100 MHz GPU clock).

Two time bases, one per kind of machine:
- **hardware** (`time_base == "host"`): GPU ticks become host microseconds the way the seed runtime does it: a
  timestamp taken right before a signal, the host clock read just before and after waiting for it, the offset is
  the midpoint minus the GPU time (median of a few samples, once per device). Host operations keep their
  perf_counter times.
- **emulator** (`time_base == "virtual"`): a virtual clock has no relation to the host clock, so calibrating
  against it only measures when the calibration happened (it put a second GPU's slices ~10 ms late). Each
  emulated GPU's clock counts the ticks its own work costs and stands still while all its queues wait, so two
  GPUs' counters drift apart. The profile therefore starts every device at its first operation of the run
  (the queues start together at the schedule's kick) and, wherever a queue waited for another device or for the
  host, moves that device's later operations by the least amount that puts the waiter after what it waited for
  (the time its clock stood still). Host operations start after what they waited for and last their measured
  host duration (the emulated GPUs do not advance while the host works). Times are microseconds from the run's
  start; every wait's arrow points forward.
"""
from __future__ import annotations

import bisect
import statistics
import time
from dataclasses import dataclass, field

from .. import trace_events as T
from .signal import TICKS_PER_US

CLOCK_SAMPLES = 5


def clock_offset_us(dev, samples: int = CLOCK_SAMPLES) -> float:
    """Host microseconds (perf_counter) minus GPU microseconds, for this device (hardware only: see above)."""
    sig = dev.new_signal(0)
    out = []
    try:
        for _ in range(samples):
            done, value = dev.next_timeline()
            dev.compute_queue().timestamp(sig).signal(done, value).submit()
            st = time.perf_counter_ns()
            dev.wait_value(done, value, "clock calibration")
            et = time.perf_counter_ns()
            out.append((st + et) / 2000 - sig.timestamp / TICKS_PER_US)
    finally:
        dev.free_signal(sig)
    return statistics.median(out)


@dataclass
class OpEvent:
    op: int
    name: str
    kind: str
    track: str  # "GPU 0 (gpu_id n) copy1" or "host"
    device: int  # schedule device index, -1 for the host
    start_us: float  # on the profile's time base (Profile.time_base)
    end_us: float
    gpu_ticks: tuple[int, int] | None = None  # raw (start, end) for GPU operations


@dataclass
class Profile:
    events: list[OpEvent]
    waits: list[tuple[int, int, str]] = field(default_factory=list)  # (producer op, consumer op, hazard)
    time_base: str = "host"  # "host": perf_counter µs (hardware); "virtual": µs from the run's start (emulator)

    def event(self, op: int) -> OpEvent:
        return next(e for e in self.events if e.op == op)

    def overlap(self, a: int, b: int) -> bool:
        """Whether operations a and b ran at the same time (their intervals intersect)."""
        x, y = self.event(a), self.event(b)
        return x.start_us < y.end_us and y.start_us < x.end_us

    def tracks(self) -> list[str]:
        """One per queue: devices in order, each device's queues by name, the host last."""
        def key(track: str):
            e = next(e for e in self.events if e.track == track)
            return (e.device < 0, e.device, track)
        return sorted(dict.fromkeys(e.track for e in self.events), key=key)

    def trace_events(self) -> list[dict]:
        """One process per device (and one for the host), one track per queue, a slice per operation and a
        flow arrow per inserted wait (producer's end -> consumer's start)."""
        pids, tids, out = {}, {}, []
        for e in self.events:
            if e.device not in pids:
                pids[e.device] = len(pids) + 1
                out.append(T.metadata(pids[e.device], e.track.rsplit(" ", 1)[0] if e.device >= 0 else "host"))
            if e.track not in tids:
                tids[e.track] = len(tids) + 1
                out.append(T.metadata(pids[e.device], e.track, tids[e.track]))
        where = {}
        for e in self.events:
            pid, tid = pids[e.device], tids[e.track]
            where[e.op] = (pid, tid, e)
            out.append(T.complete(f"#{e.op} {e.name}", pid, tid, e.start_us, e.end_us - e.start_us, e.kind,
                                  {"op": e.op, "gpu_ticks": list(e.gpu_ticks) if e.gpu_ticks else None,
                                   "time_base": self.time_base}))
        for i, (p, c, kind) in enumerate(self.waits):
            if p in where and c in where:
                pp, pt, pe = where[p]
                cp, ct, ce = where[c]
                eps_p = min(0.001, (pe.end_us - pe.start_us) / 2)
                eps_c = min(0.001, (ce.end_us - ce.start_us) / 2)
                out += T.flow(i + 1, kind, (pp, pt, pe.end_us - eps_p), (cp, ct, ce.start_us + eps_c))
        return out

    def save(self, path: str) -> str:
        """Write the trace-event JSON (open it at https://ui.perfetto.dev or chrome://tracing)."""
        return T.write(path, self.trace_events())

    def save_png(self, path: str, title: str | None = None) -> str:
        """The same timeline as a picture (needs the optional `plot` extra: matplotlib): one row per queue, a bar
        per operation labelled `#op name`, colours by kind with a legend, an arrow per dependency wait."""
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:
            raise ImportError("Profile.save_png needs matplotlib: pip install 'hcqsim[plot]'") from e
        fig = draw(plt, self, title)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path


# ---------------------------------------------------------------------------------------------------
# collecting a run


def collect(compiled) -> Profile:
    """The last profiled run of `compiled` as a Profile, on the time base its devices allow (see the module)."""
    plan, devices = compiled.plan, compiled.devices
    edges = wait_edges(plan)
    waits = [(h.producer, step.op.index, h.kind) for step in plan.steps for w in step.waits for h in w.hazards[:1]]
    if devices and all(getattr(d.os, "emulated", False) for d in devices):
        return Profile(virtual_events(compiled, edges), waits, "virtual")
    events = []
    for step in plan.steps:
        op = step.op
        track = step.queue.label(devices)
        if step.queue.is_host:
            t0, t1 = compiled.host_times[op.index]
            events.append(OpEvent(op.index, op.name, op.kind, track, -1, t0 * 1e6, t1 * 1e6))
            continue
        d = step.queue.device
        if d not in compiled._clock_offsets:
            compiled._clock_offsets[d] = clock_offset_us(devices[d])
        s, e = compiled.timestamps(op.index)
        off = compiled._clock_offsets[d]
        events.append(OpEvent(op.index, op.name, op.kind, track, d, s / TICKS_PER_US + off, e / TICKS_PER_US + off,
                              (s, e)))
    return Profile(events, waits, "host")


def wait_edges(plan) -> dict[int, list[int]]:
    """consumer op -> the ops it waited for: the operation each of its waits names (a wait for point n of a
    queue is a wait for that queue's n-th operation; point 0, a device's entry, names none)."""
    out: dict[int, list[int]] = {}
    for step in plan.steps:
        for w in step.waits:
            if w.point >= 1:
                out.setdefault(step.op.index, []).append(plan.queues[w.queue].steps[w.point - 1].op.index)
    return out


class _Standstill:
    """How long a device's virtual clock stood still before each local time: a non-decreasing step function."""

    def __init__(self):
        self.at: list[float] = []  # local times where the shift rises, ascending
        self.shift: list[float] = []  # the shift from that time on

    def __call__(self, t: float) -> float:
        i = bisect.bisect_right(self.at, t)
        return self.shift[i - 1] if i else 0.0

    def raise_from(self, t: float, s: float) -> bool:
        """Make the shift at least `s` from local time `t` on; whether anything changed."""
        if self(t) >= s:
            return False
        i = bisect.bisect_left(self.at, t)
        self.at.insert(i, t)
        self.shift.insert(i, s)
        for j in range(i + 1, len(self.at)):  # later rises below s are subsumed
            self.shift[j] = max(self.shift[j], s)
        return True


def place_virtual(ops: dict[int, tuple[int, float, float]],
                  edges: dict[int, list[int]]) -> dict[int, tuple[float, float]]:
    """Global (start, end) µs per op from local times: `ops` maps op -> (device, local start, local end) with
    device -1 for the host (whose local times are only durations: it runs its ops in order). Each device's
    local times are shifted by its standstill so that every op starts at or after the end of the ops it waited
    for; repeated until nothing moves (waits form a DAG in operation order and each device's clock is monotone
    in execution order, so it settles)."""
    stand: dict[int, _Standstill] = {d: _Standstill() for d, _, _ in ops.values() if d >= 0}
    order = sorted(ops)
    placed: dict[int, tuple[float, float]] = {}
    for _ in range(len(order) + 2):
        moved = False
        host_free = 0.0
        for op in order:
            d, s, e = ops[op]
            ready = max((placed[p][1] for p in edges.get(op, ()) if p in placed), default=0.0)
            if d < 0:
                start = max(ready, host_free)
                new = (start, start + (e - s))
                host_free = new[1]
            else:
                moved |= stand[d].raise_from(s, ready - s)
                shift = stand[d](s)
                new = (s + shift, e + shift)
            if placed.get(op) != new:
                placed[op], moved = new, True
        if not moved:
            break
    return placed


def virtual_events(compiled, edges: dict[int, list[int]]) -> list[OpEvent]:
    plan, devices = compiled.plan, compiled.devices
    local: dict[int, tuple[int, float, float]] = {}
    ticks: dict[int, tuple[int, int]] = {}
    for step in plan.steps:
        op = step.op.index
        if step.queue.is_host:
            t0, t1 = compiled.host_times[op]
            local[op] = (-1, 0.0, (t1 - t0) * 1e6)
        else:
            ticks[op] = compiled.timestamps(op)
    origin = {}  # each device's clock at its first operation: the run's start on that device
    for step in plan.steps:
        if not step.queue.is_host:
            d = step.queue.device
            origin[d] = min(origin.get(d, ticks[step.op.index][0]), ticks[step.op.index][0])
    for step in plan.steps:
        if not step.queue.is_host:
            d, (s, e) = step.queue.device, ticks[step.op.index]
            local[step.op.index] = (d, (s - origin[d]) / TICKS_PER_US, (e - origin[d]) / TICKS_PER_US)
    placed = place_virtual(local, edges)
    return [OpEvent(step.op.index, step.op.name, step.op.kind, step.queue.label(devices), local[step.op.index][0],
                    *placed[step.op.index], ticks.get(step.op.index)) for step in plan.steps]


# ---------------------------------------------------------------------------------------------------
# the picture (matplotlib is the optional `plot` extra: `save_png` imports it and hands pyplot in)

KIND_COLOURS = {"fill": "#4c72b0", "copy": "#55a868", "kernel": "#c44e52", "host": "#8172b2"}
OTHER_COLOUR = "#937860"
WAIT_COLOUR = "#dd8452"
BAR_HEIGHT = 0.6
LABEL_POINTS = 7


def draw(plt, profile, title: str | None = None):
    """A matplotlib Figure of `profile`: one row per queue, a bar per operation labelled `#op name`, colours by
    kind with a legend, an arrow per dependency wait from the producer's end to the consumer's start."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    tracks = profile.tracks()
    row = {t: i for i, t in enumerate(tracks)}
    t0 = min(e.start_us for e in profile.events)
    span = max(max(e.end_us for e in profile.events) - t0, 1e-3)
    width_in = 13.0
    fig, ax = plt.subplots(figsize=(width_in, 0.62 * len(tracks) + 1.9))
    us_per_char = span / (width_in * 0.72 * 72 / (LABEL_POINTS * 0.62))  # data width of one label character
    for e in profile.events:
        y, left, dur = row[e.track], e.start_us - t0, max(e.end_us - e.start_us, span / 2000)
        ax.barh(y, dur, left=left, height=BAR_HEIGHT, color=KIND_COLOURS.get(e.kind, OTHER_COLOUR),
                edgecolor="black", linewidth=0.4)
        label = f"#{e.op} {e.name}"
        if len(label) * us_per_char < dur * 0.95:  # inside the bar when it fits, else just after it
            ax.text(left + dur / 2, y, label, ha="center", va="center", fontsize=LABEL_POINTS, color="white")
        else:
            ax.text(left + dur + span * 0.003, y - BAR_HEIGHT * 0.55, label, ha="left", va="bottom",
                    fontsize=LABEL_POINTS - 1, color="black")
    by_op = {e.op: e for e in profile.events}
    labels = []  # (producer, consumer, text): placed once the layout is final, clear of bars and their labels
    for producer, consumer, hazard in profile.waits:
        p, c = by_op.get(producer), by_op.get(consumer)
        if p is None or c is None:
            continue
        ax.annotate("", xy=(c.start_us - t0, row[c.track]), xytext=(p.end_us - t0, row[p.track]),
                    arrowprops=dict(arrowstyle="-|>", color=WAIT_COLOUR, lw=1.3, shrinkA=0, shrinkB=0,
                                    connectionstyle=f"arc3,rad={-0.2 if row[c.track] != row[p.track] else 0.5}"))
        labels.append((p, c, f"{hazard} #{producer}->#{consumer}"))
    ax.set_yticks(range(len(tracks)), tracks, fontsize=8)
    ax.set_ylim(len(tracks) - 0.4, -0.6)  # the first queue on top
    ax.set_xlim(-span * 0.01, span * 1.08)
    virtual = profile.time_base == "virtual"
    ax.set_xlabel("µs from the run's start (emulator virtual time: 100 MHz GPU clock)" if virtual
                  else "µs from the first operation (host clock; GPU timestamps calibrated per device)")
    ax.grid(axis="x", linestyle=":", linewidth=0.5)
    kinds = sorted({e.kind for e in profile.events})
    handles = [Patch(color=KIND_COLOURS.get(k, OTHER_COLOUR), label=k) for k in kinds]
    if profile.waits:
        handles.append(Line2D([0], [0], color=WAIT_COLOUR, lw=1.3, marker=">", label="waits for (dependency)"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.22 if len(tracks) < 4 else -0.12),
              ncol=len(handles), fontsize=8, frameon=False)
    ax.set_title(title or default_title(profile), fontsize=10)
    fig.tight_layout()
    _place_wait_labels(fig, ax, labels, row, t0, span)
    return fig


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def default_title(profile) -> str:
    """`N operations on Q queues of D devices (and the host)`: the host's row is not a queue of a device."""
    queues = {e.track for e in profile.events if e.device >= 0}
    devices = {e.device for e in profile.events if e.device >= 0}
    host = any(e.device < 0 for e in profile.events)
    return (f"schedule profile: {_plural(len(profile.events), 'operation')} on {_plural(len(queues), 'queue')} of "
            f"{_plural(len(devices), 'device')}" + (" and the host" if host else ""))


def _place_wait_labels(fig, ax, labels, row: dict, t0: float, span: float) -> None:
    """Each wait's `HAZARD #p->#c` label in a gap between rows (never on a bar), as close to its arrow's middle as
    the gaps allow, clear of every bar, bar label and earlier wait label (checked in display space on the final
    layout); a label with no free place anywhere near keeps the middle of its arrow."""
    renderer = fig.canvas.get_renderer()
    taken = [t.get_window_extent(renderer) for t in ax.texts if t.get_text()]
    taken += [b.get_window_extent(renderer) for b in ax.patches]
    inside = ax.get_window_extent(renderer)
    n_rows = len(row)
    style = dict(fontsize=LABEL_POINTS - 1, color=WAIT_COLOUR, ha="center", va="center",
                 bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.8))
    for p, c, text in labels:
        rp, rc = row[p.track], row[c.track]
        mid_y = (rp + rc) / 2
        gaps = sorted((k + 0.5 for k in range(-1, n_rows)), key=lambda g: (abs(g - mid_y), g))
        x0 = (p.end_us + c.start_us) / 2 - t0
        label = ax.text(x0, gaps[0], text, **style)
        width = label.get_window_extent(renderer).width
        step = width / max(ax.transData.transform((1, 0))[0] - ax.transData.transform((0, 0))[0], 1e-9) * 0.6
        shifts = [0.0] + [k * step * sign for k in range(1, 12) for sign in (1, -1)]
        for y in gaps[:4]:
            for dx in shifts:
                x = x0 + dx
                if not -span * 0.01 <= x <= span * 1.08:
                    continue
                label.set_position((x, y))
                box = label.get_window_extent(renderer).expanded(1.06, 1.25)
                if (inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1
                        and not any(box.overlaps(t) for t in taken)):
                    break
            else:
                continue
            break
        else:
            label.set_position((x0, mid_y))
        taken.append(label.get_window_extent(renderer))
