"""Schedule compiler and replay on the emulator, as `name: value` lines (baselines measured in the same run).

compile_s_per_1000_ops: planning + building command buffers for 1,000 fills/copies over 64 buffers on 2 copy
  queues (target < 0.2 s).
replay_launch_speedup: host time to launch the same 1,000 operations by building the queues directly
  (CopyQueue builders: encode every packet, one submit per queue, a signal per cross-queue dependency) divided
  by the time a replayed run takes to launch (patch + ring INDIRECTs); the GPU's execution is excluded from
  both (target >= 5).
replayed_ops_per_s: operations per second of complete replayed runs (launch + emulated execution + wait).
"""
from __future__ import annotations

import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import best  # noqa: E402

from hcqsim.runtime import Schedule, open_device, region

OPS = 1000
BUFS = 64
SIZE = 4096


def build(dev, bufs, seed=0) -> Schedule:
    rng = random.Random(seed)
    s = Schedule(dev, copy_queues=2)
    for _ in range(OPS):
        i, j = rng.sample(range(BUFS), 2)
        if rng.random() < 0.3:
            s.fill(region(bufs[i], 0, SIZE), rng.randrange(1 << 32))
        else:
            s.copy(bufs[i], bufs[j], SIZE)
    return s


def direct_launch(dev, compiled):
    """The same queues built directly with the runtime's builders (every packet encoded) and submitted, each
    held at a gate like the replay's; returns what to release and free."""
    plan = compiled.plan
    gate = dev.new_signal(0)
    queues, sigs = {}, {qid: dev.new_signal(0) for qid in plan.queues}
    for step in plan.steps:
        q = queues.get(step.queue)
        if q is None:
            q = queues[step.queue] = dev.copy_queue(step.queue.index).wait(gate, 1)
        for w in step.waits:
            q.wait(sigs[w.queue], w.point + 1)
        op = step.op
        if op.kind == "copy":
            q.copy(op.dst.va, op.src.va, op.nbytes)
        else:
            q.fill(op.dst.va, op.value, op.nbytes)
        if step.signal:
            q.signal(sigs[step.queue], step.seq + 1)
    for q in queues.values():
        q.submit()
    gate.value = 1
    return [gate, *sigs.values()]


def timed(dev, launch) -> float:
    """Host seconds `launch()` takes; both launches hold the GPU at a gate until they are done, so this
    excludes execution; then the work completes outside the measured time."""
    t0 = time.perf_counter()
    result = launch()
    t = time.perf_counter() - t0
    dev.synchronize()
    if isinstance(result, list):
        for sig in result:
            dev.free_signal(sig)
    return t


def main() -> None:
    dev = open_device("sim")
    bufs = [dev.alloc(SIZE) for _ in range(BUFS)]
    s = build(dev, bufs)
    t_compile = best(lambda: s.compile(), 3)
    print(f"compile_s_per_1000_ops: {t_compile * 1000 / OPS:.3f}")

    compiled = s.compile()
    compiled.run()
    t_replay = min(timed(dev, compiled.run_async) for _ in range(5))
    compiled.wait_idle()
    t_direct = min(timed(dev, lambda: direct_launch(dev, compiled)) for _ in range(3))
    print(f"replay_launch_us: {t_replay * 1e6:.0f}")
    print(f"direct_launch_us: {t_direct * 1e6:.0f}")
    print(f"replay_launch_speedup: {t_direct / t_replay:.1f}")

    t_run = best(lambda: compiled.run(), 3)
    print(f"replayed_ops_per_s: {OPS / t_run:.0f}")
    dev.close()


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from timing import header, help_requested
    help_requested(__doc__)
    header("bench/schedule.py")
    main()
