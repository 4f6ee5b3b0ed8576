"""The SDMA fast path (sdma_engine `SDMAQueue.execute_run`: a plain COPY_LINEAR read from its dwords without the
general decode, its Transfer run to the end in the same turn when the budget allows) against the general path on
the same streams: memory, trace, clock, faults, interrupts, read pointer and the packet/chunk counts must be
identical -- for plain copies of many sizes, overlapping ones, copies beside fences and fills, each flag the handler
refuses, a COUNT past the field, hint fields set, faulting ranges, and under policies whose budgets split a copy."""
from __future__ import annotations

import numpy as np
import pytest

from hcqsim import EmulatedGPU, sdma
from hcqsim.engines.sdma_engine import SDMAQueue
from hcqsim.sdma import version_name

TARGETS = ["gfx1100", "gfx942"]
PAGES = 8  # the buffer the streams copy within (bytes 0..PAGES*4096)


def _streams(va: int, version: str) -> dict[str, list[int]]:
    cl = lambda dst, src, n, **kw: sdma.copy_linear(va + dst, va + src, n, version, **kw)
    fmt = sdma.format_named("COPY_LINEAR", version)
    streams = {
        "sizes": [d for i, n in enumerate((1, 3, 4, 4095, 4096, 4097, 8192, 12289))
                  for d in cl(4 * 4096 + 64 * i, 7 * i, n)],
        "overlap_up": cl(100, 0, 3 * 4096 + 5),  # memmove's result: moved from the end down
        "overlap_down": cl(0, 100, 3 * 4096 + 5),
        "mixed": cl(4096, 0, 4096) + sdma.fence(va + 8 * 4096 - 8, 0x1234, version) + cl(2 * 4096, 4096, 5000)
        + sdma.nop(3, version) + sdma.encode("CONST_FILL", version, dst_addr=va + 6 * 4096, data=0x5A5A5A5A,
                                             count=99, fillsize=2) + cl(3 * 4096, 6 * 4096, 100),
        "count_past_field": [d if i != 1 else (1 << 30) | 15 for i, d in enumerate(cl(0, 4096, 16))],
        "unmapped_src": cl(0, 0, 16)[:3] + [0x10, 0] + cl(0, 0, 16)[5:],
        "unmapped_dst": cl(0, 0, 16)[:5] + [0x10, 0],
        "past_the_end": cl(7 * 4096, 0, 4096 + 1),
        "fault_after_copies": cl(4096, 0, 64) + cl(2 * 4096, 0, 64) + cl(0, 0, 16)[:3] + [0x10, 0] + cl(0, 0, 16)[5:],
    }
    for name in ("broadcast", "backwards", "encrypt", "tmz", "src_sw", "dst_sw", "cpv", "src_cache_policy",
                 "dst_cache_policy"):  # refused flags fault; hints (cpv, cache policies) are plain
        if name in fmt.by_name:
            streams[f"flag_{name}"] = cl(4096, 0, 64) + cl(2 * 4096, 0, 64, **{name: 1})
    streams["header_high_bits"] = [d | (0xF << 28) * (i == 0) for i, d in enumerate(cl(4096, 0, 64))]
    return streams


def _run(target: str, stream: list[int], fast: bool, policy: str, monkeypatch) -> tuple:
    monkeypatch.setattr(SDMAQueue, "fast_paths", fast)
    with EmulatedGPU(target=target, seed=5, policy=policy, memory_model="coherent") as gpu:
        buf = gpu.alloc(PAGES * 4096)
        buf.view[:] = np.arange(PAGES * 4096, dtype=np.uint32).astype(np.uint8)
        q = gpu.sdma_queue()
        gpu.compute_queue()  # a second (idle) queue: a policy has something to turn to
        q.submit(stream)
        gpu.run()
        return (bytes(buf.view), gpu.trace_lines(), gpu.clock, [(i.source, i.ctxid) for i in gpu.interrupts],
                [str(f) for f in gpu.faults], q.rptr, q.packets, q.chunks)


@pytest.mark.parametrize("policy", ["run_to_block", "round_robin", "random"])
@pytest.mark.parametrize("target", TARGETS)
def test_fast_and_general_paths_agree_on_every_stream(target, policy, monkeypatch):
    with EmulatedGPU(target=target, seed=5, memory_model="coherent") as probe:  # the buffer address (deterministic)
        va = probe.alloc(PAGES * 4096).va
    version = version_name(probe.target.sdma_version)
    streams = _streams(va, version)
    for name, stream in streams.items():
        fast = _run(target, stream, True, policy, monkeypatch)
        general = _run(target, stream, False, policy, monkeypatch)
        assert fast == general, f"stream {name}: the fast path differs from the general one"
    # the comparison means something only if the plain streams copied and the refused ones faulted
    copied = _run(target, streams["sizes"], True, policy, monkeypatch)
    assert not copied[4] and copied[0] != _run(target, [0], True, policy, monkeypatch)[0]
    assert _run(target, streams["flag_tmz"], True, policy, monkeypatch)[4]
    assert _run(target, streams["unmapped_dst"], True, policy, monkeypatch)[4]


def test_the_fast_path_is_taken_for_plain_copies_only(monkeypatch):
    """The differential test compares something only if the fast path runs: count the general decodes."""
    general = []
    execute = SDMAQueue.execute
    monkeypatch.setattr(SDMAQueue, "execute", lambda self, s: general.append(s.pos) or execute(self, s))
    with EmulatedGPU(target="gfx1100", seed=0, memory_model="coherent") as gpu:  # (the fast path exists only there)
        a, b = gpu.alloc(4096), gpu.alloc(4096)
        a.view[:] = 7
        q = gpu.sdma_queue()
        q.submit(sdma.copy_linear(b.va, a.va, 4096) + sdma.copy_linear(b.va, a.va, 16, dst_cache_policy=3)
                 + sdma.copy_linear(b.va, a.va, 16, tmz=1))
        gpu.run()
        assert bytes(b.view) == bytes(a.view)
    assert general == [56]  # only the TMZ copy (the third packet, byte 56) took the general path


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("cut", [1, 6])
def test_a_packet_cut_by_the_write_pointer_faults_as_running_past_it(fast, cut, monkeypatch):
    """A packet whose dwords run past the write pointer is refused with that reason on both paths (the cached
    dwords end at the write pointer: a short slice of them must not reach the decoder)."""
    monkeypatch.setattr(SDMAQueue, "fast_paths", fast)
    with EmulatedGPU(target="gfx1100", seed=0, memory_model="coherent") as gpu:  # (the fast path exists only there)
        a, b = gpu.alloc(4096), gpu.alloc(4096)
        q = gpu.sdma_queue()
        q.submit(sdma.nop(2) + sdma.copy_linear(b.va, a.va, 64)[:cut])
        assert len(gpu.faults) == 1 and "runs past the write pointer" in gpu.faults[0].message, gpu.faults
