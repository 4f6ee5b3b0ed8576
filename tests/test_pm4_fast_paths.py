"""The PM4 fast paths (command_processor `_fast<NAME>`: NOP and the plain shapes of RELEASE_MEM, acted on without
the general decode) against the general handlers on the same packets: memory, trace, clock, interrupts and
faults must be identical, for plain shapes, shapes next to them that the fast path must decline (reserved values,
interrupts on compare, a dispatch still running) and faulting addresses."""
from __future__ import annotations

import numpy as np
import pytest

from hcqsim import EmulatedGPU, kernels, pm4
from hcqsim.engines.command_processor import PM4Queue
from hcqsim.compiler import compile_llvm
from hcqsim.runtime import open_device
from tests.async_kernels import loop_ir

INT_SELS = range(8)  # every INT_SEL value, reserved ones too
DATA_SELS = range(8)


def _streams(va: int, family: str) -> dict[str, list[int]]:
    """Named packet streams writing into the page at `va` (each runs on a fresh GPU)."""
    rel = lambda i, **kw: pm4.release_mem(va + 8 * (i % 32), 0x1234_5678_9ABC_DEF0 + i, family=family, **kw)
    streams = {
        "nop": pm4.nop(1) + pm4.nop(2) + pm4.nop(5),
        "write_data": [d for i, (sel, one, n) in enumerate((s, o, n) for s in (1, 2, 5) for o in (0, 1) for n in (1, 3))
                       for d in pm4.write_data(va + 4 * i + 1, [0x1000 * i + k for k in range(n)], dst_sel=sel,
                                               one_addr=one)],
        "release_mem": [d for i, (data, irq) in enumerate((d, q) for d in (0, 1, 2, 3) for q in (0, 2, 3, 4))
                        for d in rel(i, data_sel=data, int_sel=irq, ctxid=i)],
        "release_mem_events": [d for i, (e, x, dst) in enumerate((e, x, dst) for e in (0x04, 0x14, 0x28, 0x2F)
                                                                 for x in (5, 6) for dst in (0, 1))
                               for d in rel(i, event_type=e, event_index=x, dst_sel=dst, int_sel=2)],
        "release_mem_compare": rel(0, data_sel=1) + rel(0, data_sel=0, int_sel=5) + rel(1, data_sel=0, int_sel=6),
        "mixed": [d for i in range(20) for d in (pm4.nop(2) + pm4.write_data(va + 4 * i, [i])
                                                 + rel(i + 1, data_sel=1 + i % 3, int_sel=2 * (i % 2)))],
    }
    for data in DATA_SELS:  # reserved and unemulated values: each its own stream (the queue faults at it)
        for irq in INT_SELS:
            streams[f"release_mem_sel_{data}_{irq}"] = pm4.nop(2) + rel(2, data_sel=data, int_sel=irq)
    streams["release_mem_bad_index"] = rel(0, event_index=4)
    streams["release_mem_bad_event"] = rel(0, event_type=0x07)
    streams["release_mem_bad_dst"] = rel(0, dst_sel=2)
    streams["release_mem_unmapped"] = pm4.nop(2) + pm4.release_mem(0x10, 1, family=family, data_sel=2)
    streams["write_data_unmapped"] = pm4.write_data(0x10, [1, 2])
    for sel in range(8):  # every DST_SEL, alone (the unemulated ones fault)
        streams[f"write_data_dst_{sel}"] = pm4.write_data(va, [7], dst_sel=sel) + pm4.write_data(0x2C40, [9],
                                                                                                  dst_sel=sel)
    streams["write_data_empty"] = pm4.encode("WRITE_DATA", dst_sel=5, dst_addr=va)
    for name, packet in (("write_data", pm4.write_data(va, [7])), ("release_mem", rel(0, data_sel=1)),
                         ("nop", pm4.nop(2))):
        streams[f"predicated_{name}"] = [packet[0] | 1] + packet[1:]  # PREDICATE set: refused
    return streams


def _run(target: str, stream: list[int], fast: bool, monkeypatch) -> tuple:
    monkeypatch.setattr(PM4Queue, "fast_paths", fast)
    with EmulatedGPU(target=target, seed=0, memory_model="coherent") as gpu:  # the fast paths are coherent's only
        page = gpu.alloc(4096)
        page.view[:] = 0xA5
        q = gpu.compute_queue()
        q.submit(stream)
        gpu.run()
        return (bytes(page.view), gpu.trace_lines(), gpu.clock, [(i.source, i.ctxid) for i in gpu.interrupts],
                [str(f) for f in gpu.faults], q.rptr)


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_fast_and_general_paths_agree_on_every_stream(target, monkeypatch):
    family = "gfx11" if target == "gfx1100" else "gfx9"
    with EmulatedGPU(target=target, seed=0) as probe:  # the page's address in a fresh GPU (allocation is deterministic)
        va = probe.alloc(4096).va
    for name, stream in _streams(va, family).items():
        fast, general = _run(target, stream, True, monkeypatch), _run(target, stream, False, monkeypatch)
        assert fast == general, f"stream {name}: the fast path differs from the general one"
    # the comparison means something only if the plain streams wrote and the refused ones faulted
    assert _run(target, _streams(va, family)["mixed"], True, monkeypatch)[0] != b"\xa5" * 4096
    assert _run(target, _streams(va, family)["release_mem_sel_4_0"], True, monkeypatch)[4]


def test_fast_paths_are_taken_for_plain_shapes(monkeypatch):
    """The differential test above compares something only if the fast paths run: count their actions."""
    calls = []
    monkeypatch.setattr(PM4Queue, "_doRELEASE_MEM", lambda self, v: calls.append("rel") or self._release(v))
    with EmulatedGPU(target="gfx1100", seed=0, memory_model="coherent") as gpu:  # (the default follows the env)
        page = gpu.alloc(4096)
        gpu.compute_queue().submit(pm4.release_mem(page.va, 5, data_sel=1) + pm4.release_mem(page.va, 5, data_sel=4))
        gpu.run()
    assert calls == ["rel"]  # DATA_SEL 4 (SYSTEM_CLOCK_64) is not plain: the general path refuses it


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_a_release_behind_a_running_dispatch_waits_on_both_paths(target, monkeypatch):
    """RELEASE_MEM behind a dispatch still running is an end-of-pipe event (the fast path must decline it): a long
    one-wave loop, then signals, under a random policy that runs packets while the loop does."""
    queued = []  # RELEASE_MEMs reached while a dispatch ran: the case this test is about
    at_end_of_pipe = PM4Queue.at_end_of_pipe
    monkeypatch.setattr(PM4Queue, "at_end_of_pipe", lambda self, act: (queued.append(bool(self.inflight)),
                                                                        at_end_of_pipe(self, act)))
    results = []
    for fast in (True, False):
        monkeypatch.setattr(PM4Queue, "fast_paths", fast)
        dev = open_device("sim", target=target, policy="random", seed=3)
        prog = dev.load_program(compile_llvm(loop_ir(), dev.target), "loop")
        data, out, done = dev.alloc(4096), dev.alloc(4096), dev.new_signal(0)
        q = dev.compute_queue()
        q.exec(prog, [data, out, 3000], 1, 1)
        for i in range(1, 4):
            q.signal(done, i)
        flush = pm4.OP["EVENT_WRITE"]  # without the runtime's CS_PARTIAL_FLUSH the signals come while the loop runs
        q.packets = [p for p in q.packets if (p[0] >> 8) & 0xFF != flush]
        q.submit()
        done.wait(3, timeout_ms=600_000)
        gpu = dev.os.system.gpus[dev.index]
        results.append((bytes(out.view[:64]), gpu.trace_lines(), gpu.clock))
        dev.close()
    assert results[0] == results[1]
    assert any(queued), "no RELEASE_MEM was reached while the dispatch ran: the test compares nothing"
