"""Schedules: results equal the sequential reference, and the compiler inserts the minimal number of waits
for textbook shapes (chains, fan-out, fan-in, compute/copy ping-pong, aliasing sub-ranges, multi-device
pipelines). Runs per device (`--device`), also under `--sim-policy random`."""
import functools
import json
import random

import numpy as np
import pytest

import kernel_corpus as K
from hcqsim.compiler import compile_llvm
from hcqsim.runtime.schedule import Schedule, region
from hcqsim.trace_events import validate

N = 256  # u32 elements per buffer
NBYTES = 4 * N

# y[i] = y[i] * 3 + x[i] + k  (reads x, reads and writes y)
MIX = """
define amdgpu_kernel void @mix(ptr addrspace(1) %x, ptr addrspace(1) %y, i32 %k) {
entry:""" + K.GID_X + """
  %px = getelementptr i32, ptr addrspace(1) %x, i32 %gid
  %py = getelementptr i32, ptr addrspace(1) %y, i32 %gid
  %vx = load i32, ptr addrspace(1) %px
  %vy = load i32, ptr addrspace(1) %py
  %m = mul i32 %vy, 3
  %s = add i32 %m, %vx
  %r = add i32 %s, %k
  store i32 %r, ptr addrspace(1) %py
  ret void
}
"""


@functools.lru_cache(maxsize=None)
def _code(arch: str) -> bytes:
    return compile_llvm(MIX + K.DECLS, arch)


def mix_program(dev):
    return dev.load_program(_code(dev.target), "mix")


def buffers(dev, n, seed=1):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        b = dev.alloc(NBYTES)
        b.view[:] = rng.integers(0, 256, NBYTES, dtype=np.uint8)
        out.append(b)
    return out


def snapshot(bufs):
    return [b.view.copy() for b in bufs]


def same_results(build, devs, nbuf, seed=1, **sched_kw):
    """Run `build(sched, bufs)` compiled and, on a second set of buffers with the same contents, as the
    sequential reference; return (compiled, bufs) after asserting every buffer ends equal."""
    devs = devs if isinstance(devs, list) else [devs]
    bufs = [b for d in devs for b in buffers(d, nbuf, seed + d.index)]
    ref = [b for d in devs for b in buffers(d, nbuf, seed + d.index)]
    s, r = Schedule(devs, **sched_kw), Schedule(devs, **sched_kw)
    build(s, bufs)
    build(r, ref)
    compiled = s.compile()
    compiled.run()
    r.run_sequential()
    for i, (a, b) in enumerate(zip(snapshot(bufs), snapshot(ref))):
        assert np.array_equal(a, b), f"buffer {i} differs from the sequential reference"
    return compiled, bufs


def dep_waits(compiled):
    return len(compiled.plan.dependency_waits)


def test_a_chain_on_one_queue_needs_no_waits(device):
    prog = mix_program(device)

    def build(s, b):
        for k in range(3):
            s.kernel(prog, [b[0], b[1], k], N, 64)
    compiled, _ = same_results(build, device, 2)
    assert dep_waits(compiled) == 0
    assert {st.queue.index for st in compiled.plan.steps} == {0}


def test_fan_out_waits_once_per_other_queue(device):
    prog = mix_program(device)

    def build(s, b):
        s.kernel(prog, [b[1], b[0], 7], N, 64)  # the producer writes b0
        for i in (2, 3, 4):
            s.kernel(prog, [b[0], b[i], i], N, 64, reads=[b[0]], writes=[b[i]])
    compiled, _ = same_results(build, device, 5)
    assert dep_waits(compiled) == 1  # consumers on the producer's queue need none, the other queue one
    assert len({st.queue for st in compiled.plan.steps}) == 2


def test_fan_in_waits_for_the_other_producer_only(device):
    prog = mix_program(device)

    def build(s, b):
        s.kernel(prog, [b[0], b[1], 1], N, 64, reads=[b[0]], writes=[b[1]])
        s.kernel(prog, [b[0], b[2], 2], N, 64, reads=[b[0]], writes=[b[2]])
        s.kernel(prog, [b[1], b[2], 3], N, 64, reads=[b[1], b[2]], writes=[b[2]])
    compiled, _ = same_results(build, device, 3)
    steps = compiled.plan.steps
    assert steps[0].queue != steps[1].queue  # independent: two queues
    assert dep_waits(compiled) == 1


def test_compute_copy_ping_pong_waits_at_every_hand_over(device):
    prog = mix_program(device)

    def build(s, b):
        s.fill(b[0], 5)
        s.kernel(prog, [b[0], b[1], 1], N, 64, reads=[b[0]], writes=[b[1]])
        s.copy(b[2], b[1])
        s.kernel(prog, [b[2], b[3], 2], N, 64, reads=[b[2]], writes=[b[3]])
        s.copy(b[0], b[3])
    compiled, _ = same_results(build, device, 4)
    assert dep_waits(compiled) == 4


def test_aliasing_sub_ranges_wait_only_where_bytes_overlap(device):
    def build(s, b):
        s.fill(region(b[0], 0, NBYTES // 2), 1)          # copy queue 0
        s.fill(region(b[0], NBYTES // 2, NBYTES // 2), 2)  # disjoint: copy queue 1, no wait
        s.copy(region(b[1], 0, 64), region(b[0], 0, 64))  # first half only: after the first fill, same queue
        s.copy(b[2], region(b[0], NBYTES // 4, NBYTES // 2))  # straddles both halves: one wait
        s.fill(region(b[0], 0, 64), 3, queue=1)  # on copy queue 1: WAR with #2 (copy 0), WAW with #0 (known)
    compiled, _ = same_results(build, device, 3)
    kinds = [h.kind for w in compiled.plan.dependency_waits for h in w.hazards]
    assert kinds == ["RAW", "WAR"], compiled.describe()


def test_a_multi_device_pipeline_waits_through_peer_mappings(devices):
    a, b = devices
    pa, pb = mix_program(a), mix_program(b)

    def build(s, bufs):
        x0, y0, x1, y1 = bufs
        s.kernel(pa, [x0, y0, 1], N, 64, reads=[x0], writes=[y0])
        s.copy(x1, y0)  # dev0's copy queue writes dev1's memory
        s.kernel(pb, [x1, y1, 2], N, 64, reads=[x1], writes=[y1])
        s.copy(x0, y1)  # back: dev1's copy queue
    compiled, _ = same_results(build, [a, b], 2)
    assert dep_waits(compiled) == 3
    # every GPU queue starts after both devices' timelines, so touching the other device's memory needs no
    # further device-sync wait (docs/schedule.md rule 11)
    assert compiled.plan.sync_waits == []


def test_replay_with_new_buffers_and_parameters(device):
    prog = mix_program(device)
    x, y, z = buffers(device, 3)
    s = Schedule(device)
    k = s.param("k", 1)
    s.name(x, "x")
    s.name(y, "y")
    s.name(z, "z")
    s.kernel(prog, [x, y, k], N, 64, reads=[x], writes=[y])
    s.copy(z, y)
    s.fill(x, k)
    compiled = s.compile()
    compiled.run()
    x2, y2, z2 = buffers(device, 3, seed=9)
    x0, y0 = x2.view.view(np.uint32).copy(), y2.view.view(np.uint32).copy()
    compiled.run(buffers={"x": x2, "y": y2, "z": z2}, params={"k": 40})
    expect = (y0 * np.uint32(3) + x0 + np.uint32(40)).astype(np.uint32)
    assert np.array_equal(y2.view.view(np.uint32), expect)
    assert np.array_equal(z2.view.view(np.uint32), expect)
    assert np.all(x2.view.view(np.uint32) == 40)
    before = y.view.copy()
    compiled.run(params={"k": 0})  # back on the original buffers
    assert np.array_equal(y.view.view(np.uint32), before.view(np.uint32) * np.uint32(3) + np.uint32(1))


def test_bound_buffers_must_stay_distinct(device):
    x, y = buffers(device, 2)
    s = Schedule(device)
    s.name(x, "x")
    s.name(y, "y")
    s.copy(y, x)
    compiled = s.compile()
    with pytest.raises(ValueError, match="overlap"):
        compiled.run(buffers={"x": y})


def test_random_schedules_equal_the_sequential_reference(device):
    prog = mix_program(device)
    rng = random.Random(5)
    spec = []
    for _ in range(24):
        kind = rng.choice(["fill", "copy", "copy", "kernel"])
        i, j = rng.sample(range(4), 2)
        off, n = 4 * rng.randrange(0, N // 2), 4 * rng.randrange(1, N // 2)
        spec.append((kind, i, j, off, n, rng.randrange(1 << 32)))

    def build(s, b):
        for kind, i, j, off, n, v in spec:
            if kind == "fill":
                s.fill(region(b[i], off, n), v)
            elif kind == "copy":
                s.copy(region(b[i], off, n), region(b[j], NBYTES - n - off, n))
            else:
                s.kernel(prog, [b[j], b[i], v & 0xFF], N, 64, reads=[b[j], b[i]], writes=[b[i]])
    same_results(build, device, 4, compute_queues=2, copy_queues=3, batch_limit=2)


def test_host_operations_order_with_gpu_work(device):
    def build(s, b):
        s.fill(b[0], 9)
        s.host_write(region(b[1], 0, 8), lambda: bytes(b[0].view[:8]))  # the host reads what the fill wrote
        s.copy(b[2], b[1])
    same_results(build, device, 3)


def test_profile_is_valid_trace_event_json(device, tmp_path):
    x, y = buffers(device, 2)
    s = Schedule(device)
    s.fill(x, 1)
    s.copy(y, x)
    profile = s.compile().run(profile=True)
    doc = json.loads(open(profile.save(str(tmp_path / "trace.json"))).read())
    validate(doc)
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == 2 and all(e["dur"] > 0 for e in slices)
    assert sum(e["ph"] == "s" for e in doc["traceEvents"]) == 0  # one queue: no waits, no arrows
    ev = profile.event(1)
    assert ev.start_us >= profile.event(0).end_us  # the copy ran after the fill it reads
