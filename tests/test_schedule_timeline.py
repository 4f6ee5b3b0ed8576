"""Schedules on the emulator's timeline: independent operations on different queues really overlap (in the
profile's GPU timestamps and in the emulator's own trace), several devices share one time base (virtual time, no
host calibration: every wait points forward), and both timelines are valid trace-event JSON."""
import importlib.util

import numpy as np
import pytest

from hcqsim import trace_events as T
from hcqsim.runtime import Schedule, open_devices
from hcqsim.runtime.profile import TICKS_PER_US, OpEvent, Profile, place_virtual, wait_edges

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


# -- several devices, one time base ------------------------------------------------------------------------

@pytest.fixture
def two_devices():
    devs = open_devices("sim", 2)
    yield devs
    for d in devs:
        d.close()


def cross_device_schedule(devs):
    """GPU 0 fills `a` in four pieces on two queues and copies it to `b` on GPU 1; GPU 1 meanwhile fills `c`,
    then copies `b` to `c`: a wait of GPU 1 for GPU 0 (#6 waits for #5), and a host read of `b` after #5."""
    d0, d1 = devs
    a, b, c = d0.alloc(SIZE), d1.alloc(SIZE), d1.alloc(SIZE)
    s = Schedule(devs, copy_queues=2)
    for k in range(4):
        s.fill(a.offset(k * SIZE // 4, SIZE // 4), 0x01010101)  # 0..3
    s.fill(c, 0x03030303)  # 4, GPU 1
    s.copy(b, a, SIZE)  # 5, on GPU 0 (the source's device)
    s.copy(c, b, SIZE)  # 6, on GPU 1: waits for 5
    out = bytearray(16)
    s.host_read(b.offset(0, 16), out)  # 7: waits for 5
    return s, out


def test_two_emulated_devices_share_one_time_base(two_devices):
    s, out = cross_device_schedule(two_devices)
    compiled = s.compile()
    profile = compiled.run(profile=True)
    assert profile.time_base == "virtual" and out == b"\x01" * 16
    ev = {e.op: e for e in profile.events}
    # both devices start with the run: GPU 1 is not placed later by a host-clock calibration (it was ~10 ms)
    for d in (0, 1):
        assert min(e.start_us for e in profile.events if e.device == d) == 0.0
    # each GPU operation keeps its measured length
    for e in profile.events:
        if e.gpu_ticks:
            assert e.end_us - e.start_us == pytest.approx((e.gpu_ticks[1] - e.gpu_ticks[0]) / TICKS_PER_US)
    # every wait points forward, across devices and to the host too
    for consumer, producers in wait_edges(compiled.plan).items():
        for p in producers:
            assert ev[consumer].start_us >= ev[p].end_us - 1e-9, (p, consumer)
    # GPU 1's own clock did not advance while it waited for GPU 0: its raw ticks put #6 before #5 ended ...
    assert ev[6].gpu_ticks[0] < ev[5].gpu_ticks[1]
    # ... and on the common time base it starts right when #5 ended (GPU 1 had nothing else to do)
    assert ev[6].start_us == pytest.approx(ev[5].end_us, abs=0.1)
    assert ev[7].start_us == pytest.approx(ev[5].end_us) and ev[7].device == -1
    # the JSON carries the same times: every flow arrow's finish is at or after its start
    doc = T.document(profile.trace_events())
    T.validate(doc)
    starts = {e["id"]: e["ts"] for e in doc["traceEvents"] if e["ph"] == "s"}
    assert starts and all(e["ts"] >= starts[e["id"]] for e in doc["traceEvents"] if e["ph"] == "f")


def test_a_machine_that_is_not_emulated_is_calibrated_against_the_host_clock(two_devices, monkeypatch):
    s, _ = cross_device_schedule(two_devices)
    compiled = s.compile()
    calibrated = []
    import hcqsim.runtime.profile as prof
    monkeypatch.setattr(prof, "clock_offset_us", lambda dev: calibrated.append(dev) or 1000.0)
    for d in two_devices:
        monkeypatch.setattr(d.os, "emulated", False)
    profile = compiled.run(profile=True)
    assert profile.time_base == "host" and set(calibrated) == set(two_devices)
    e = profile.event(5)
    assert e.start_us == pytest.approx(e.gpu_ticks[0] / TICKS_PER_US + 1000.0)


def test_virtual_placement_moves_a_device_by_the_time_its_clock_stood_still():
    # local µs per device (hand-made): device 1's clock stood still while op 2 waited for op 0 on device 0
    ops = {0: (0, 0.0, 10.0),   # device 0
           1: (1, 9.0, 9.5),    # device 1, after op 2 in local time although listed first: moves with it
           2: (1, 5.0, 8.0),    # device 1, waits for op 0: starts at 10, so device 1 moves by 5 from local 5 on
           3: (1, 2.0, 4.0),    # device 1, before the standstill: stays
           4: (-1, 0.0, 2.0),   # host, 2 µs, waits for op 1
           5: (0, 10.0, 12.0)}  # device 0, waits for the host op: its clock stood still from local 10
    edges = {2: [0], 4: [1], 5: [4]}
    placed = place_virtual(ops, edges)
    assert placed == {0: (0.0, 10.0), 1: (14.0, 14.5), 2: (10.0, 13.0), 3: (2.0, 4.0), 4: (14.5, 16.5),
                      5: (16.5, 18.5)}


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="matplotlib (the plot extra) is absent")
def test_profile_renders_a_png(interleaving_device, tmp_path):
    s, _, _ = independent_fills(interleaving_device)
    path = s.compile().run(profile=True).save_png(str(tmp_path / "timeline.png"))
    assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="matplotlib (the plot extra) is absent")
def test_the_png_draws_a_row_per_queue_labels_a_legend_and_wait_arrows(two_devices, tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hcqsim.runtime.profile import draw
    s, _ = cross_device_schedule(two_devices)
    profile = s.compile().run(profile=True)
    fig = draw(plt, profile)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == profile.tracks()
    assert len(profile.tracks()) == 4 and profile.tracks()[-1] == "host"
    texts = {t.get_text() for t in ax.texts}
    assert {f"#{e.op} {e.name}" for e in profile.events} <= texts
    assert {t.get_text() for t in ax.get_legend().get_texts()} == {"fill", "copy", "host", "waits for (dependency)"}
    arrows = [a for a in ax.texts if getattr(a, "arrow_patch", None) is not None]
    assert len(arrows) == len(profile.waits) >= 2
    plt.close(fig)


def test_the_title_counts_device_queues_devices_and_the_host(two_devices):
    """Issue 34: a two-device schedule with a host read was titled "4 queues of 2 device(s)": the host row is not
    a queue."""
    from hcqsim.runtime.profile import default_title
    s, _ = cross_device_schedule(two_devices)
    profile = s.compile().run(profile=True)
    assert default_title(profile) == "schedule profile: 8 operations on 3 queues of 2 devices and the host"
    one = Profile([OpEvent(0, "fill", "fill", "GPU 0 copy0", 0, 0.0, 1.0)])
    assert default_title(one) == "schedule profile: 1 operation on 1 queue of 1 device"


def crossing_profile() -> "Profile":
    """#2 on the top row, #4 on the bottom row, #3 inc between them in time and rows: the middle of the RAW #2->#4
    arrow is the middle of #3's bar, where its label is (issue 34: "RAW #2->#4" hid "#3 inc")."""
    rows = ("GPU 0 a0", "GPU 0 b1", "GPU 0 c2")  # tracks sort by name: a0 on top, c2 at the bottom
    ev = [OpEvent(0, "fill", "fill", rows[0], 0, 0.0, 10.0), OpEvent(2, "copy", "copy", rows[0], 0, 10.0, 20.0),
          OpEvent(1, "fill", "fill", rows[1], 0, 0.0, 12.0), OpEvent(3, "inc", "kernel", rows[1], 0, 21.0, 29.0),
          OpEvent(4, "inc", "kernel", rows[2], 0, 30.0, 40.0), OpEvent(5, "copy", "copy", rows[2], 0, 40.0, 44.0)]
    return Profile(ev, [(2, 4, "RAW"), (1, 3, "RAW"), (2, 5, "WAR")], "virtual")


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="matplotlib (the plot extra) is absent")
@pytest.mark.parametrize("which", ["crossing", "two_devices"])
def test_wait_labels_sit_clear_of_bars_bar_labels_and_each_other(which, two_devices):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hcqsim.runtime.profile import draw
    profile = crossing_profile() if which == "crossing" else cross_device_schedule(two_devices)[0].compile().run(
        profile=True)
    fig = draw(plt, profile)
    ax, renderer = fig.axes[0], fig.canvas.get_renderer()
    waits = [t for t in ax.texts if "->" in t.get_text()]
    bar_labels = [t for t in ax.texts if t.get_text().startswith("#")]
    assert len(waits) == len(profile.waits) and len(bar_labels) == len(profile.events)
    boxes = {t.get_text(): t.get_window_extent(renderer) for t in waits}
    for text, box in boxes.items():
        for other in bar_labels:
            assert not box.overlaps(other.get_window_extent(renderer)), f"{text} over {other.get_text()}"
        for bar in ax.patches:
            assert not box.overlaps(bar.get_window_extent(renderer)), f"{text} over a bar"
        assert not any(box.overlaps(b) for t, b in boxes.items() if t != text), text
    plt.close(fig)
