"""Schedules on the emulator's timeline: independent operations on different queues really overlap (in the
profile's GPU timestamps and in the emulator's own trace), and both timelines are valid trace-event JSON."""
import importlib.util

import numpy as np
import pytest

from hcqsim import trace_events as T
from hcqsim.runtime import Schedule, open_devices

SIZE = 1 << 20


@pytest.fixture
def interleaving_device():
    """One emulated GPU whose scheduler takes one packet per queue in turn, so queues advance together in
    virtual time (under run_to_block a queue runs until it blocks: its neighbours wait in virtual time)."""
    dev = open_devices("sim", 1, policy="round_robin")[0]
    yield dev
    dev.close()


def independent_fills(dev):
    a, b = dev.alloc(SIZE), dev.alloc(SIZE)
    s = Schedule(dev, copy_queues=2)
    for i, buf in enumerate((a, b)):
        for k in range(4):  # several packets each, so the interleaving is visible
            s.fill(buf.offset(k * SIZE // 4, SIZE // 4), 0x01010101 * (i + 1))
    return s, a, b


def test_independent_operations_on_two_queues_overlap_in_gpu_timestamps(interleaving_device):
    s, a, b = independent_fills(interleaving_device)
    compiled = s.compile()
    assert len(compiled.plan.dependency_waits) == 0
    profile = compiled.run(profile=True)
    assert np.all(a.view == 1) and np.all(b.view == 2)
    on = {e.op: e.track for e in profile.events}
    pairs = [(x, y) for x in on for y in on if on[x] != on[y]]
    assert pairs and any(profile.overlap(x, y) for x, y in pairs)


def test_the_emulator_trace_shows_both_queues_busy_at_once(interleaving_device):
    dev = interleaving_device
    s, _, _ = independent_fills(dev)
    s.compile().run()
    gpu = dev.os.system.gpus[0]
    events = T.from_trace_lines(gpu.trace_lines(), pid=1, process=gpu.label)
    T.validate(T.document(events))
    fills = [e for e in events if e["ph"] == "X" and e["name"] == "CONST_FILL"]
    tracks = {e["tid"] for e in fills}
    assert len(tracks) == 2
    spans = {t: (min(e["ts"] for e in fills if e["tid"] == t), max(e["ts"] + e["dur"] for e in fills
                                                                    if e["tid"] == t)) for t in tracks}
    (a0, a1), (b0, b1) = spans.values()
    assert a0 < b1 and b0 < a1  # the two queues' fill streams interleave in virtual time


def test_trace_event_validation_rejects_broken_documents():
    with pytest.raises(ValueError, match="dur"):
        T.validate(T.document([{"ph": "X", "name": "x", "pid": 1, "tid": 1, "ts": 0, "dur": -1}]))
    with pytest.raises(ValueError, match="flow"):
        T.validate(T.document(T.flow(1, "w", (1, 1, 0.0), (1, 2, 1.0))[:1]))


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="matplotlib (the plot extra) is absent")
def test_profile_renders_a_png(interleaving_device, tmp_path):
    s, _, _ = independent_fills(interleaving_device)
    path = s.compile().run(profile=True).save_png(str(tmp_path / "timeline.png"))
    assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
