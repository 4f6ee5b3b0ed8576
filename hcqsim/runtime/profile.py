"""Profiles of schedule runs: per-operation GPU timestamps mapped to host time, as trace events or a picture.

`CompiledSchedule.run(profile=True)` runs the variant of the command buffers that writes a timestamp before
and after every operation (PM4 RELEASE_MEM DATA_SEL 3 / SDMA TIMESTAMP GET_GLOBAL: the 100 MHz GPU clock).
GPU ticks become host microseconds the way the seed runtime does it: a timestamp taken right before a signal,
the host clock read just before and after waiting for it, the offset is the midpoint minus the GPU time
(median of a few samples, once per device).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

from .. import trace_events as T
from .signal import TICKS_PER_US

CLOCK_SAMPLES = 5


def clock_offset_us(dev, samples: int = CLOCK_SAMPLES) -> float:
    """Host microseconds (perf_counter) minus GPU microseconds, for this device."""
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
    start_us: float  # host time
    end_us: float
    gpu_ticks: tuple[int, int] | None = None  # raw (start, end) for GPU operations


@dataclass
class Profile:
    events: list[OpEvent]
    waits: list[tuple[int, int, str]] = field(default_factory=list)  # (producer op, consumer op, hazard)

    def event(self, op: int) -> OpEvent:
        return next(e for e in self.events if e.op == op)

    def overlap(self, a: int, b: int) -> bool:
        """Whether operations a and b ran at the same time (their intervals intersect)."""
        x, y = self.event(a), self.event(b)
        return x.start_us < y.end_us and y.start_us < x.end_us

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
                                  {"op": e.op, "gpu_ticks": list(e.gpu_ticks) if e.gpu_ticks else None}))
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

    def save_png(self, path: str) -> str:
        """The same timeline as a picture, one row per queue (needs the optional `plot` extra: matplotlib)."""
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:
            raise ImportError("Profile.save_png needs matplotlib: pip install 'hcqsim[plot]'") from e
        tracks = list(dict.fromkeys(e.track for e in self.events))
        t0 = min(e.start_us for e in self.events)
        fig, ax = plt.subplots(figsize=(10, 0.6 * len(tracks) + 1))
        for e in self.events:
            y = tracks.index(e.track)
            ax.barh(y, max(e.end_us - e.start_us, 1e-3), left=e.start_us - t0, height=0.6)
            ax.text(e.start_us - t0, y, f"#{e.op}", va="center", fontsize=6)
        ax.set_yticks(range(len(tracks)), tracks)
        ax.set_xlabel("µs")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path


def collect(compiled) -> Profile:
    """The last profiled run of `compiled` as a Profile."""
    plan, devices = compiled.plan, compiled.devices
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
    waits = [(h.producer, step.op.index, h.kind) for step in plan.steps for w in step.waits for h in w.hazards[:1]]
    return Profile(events, waits)
