"""The shader core's compiled-instruction cache is bounded (issue 22): least recently used instructions are evicted
past its capacity, so a process running ever more distinct kernels keeps the cache's memory bounded, and an evicted
instruction is compiled again with the same meaning."""
from __future__ import annotations

import pytest

from hcqsim import EmulatedGPU, pm4
from hcqsim.registers import REGS, initiator
from hcqsim.shader.compile import InstructionCache

WAVE32 = initiator(compute_shader_en=1, force_start_at_000=1, cs_w32_en=1)


def _store_constant(k: int) -> list[int]:
    """gfx1100: v_mov_b32 v1, k (literal); v_mov_b32 v2, 0; global_store_b32 v2, v1, s[0:1]; s_endpgm."""
    return [0x7E0202FF, k, 0x7E040280, 0xDC6A0000, 0x00000102, 0xBFB00000]


def _dispatch(g: EmulatedGPU, code, out) -> None:
    """The code was rewritten in place since the last dispatch: a correct stream drops the instruction cache's copy
    (GLI_INV) and the vector caches' (the output is reread) first, so the memory models agree with coherent."""
    g.compute_queue().submit(
        pm4.acquire_mem("gfx11", gli_inv=1, glv_inv=1, gl1_inv=1, gl2_inv=1)
        + pm4.set_sh_reg(REGS["COMPUTE_PGM_LO"], [code.va >> 8 & 0xFFFFFFFF, code.va >> 40])
        + pm4.set_sh_reg(REGS["COMPUTE_PGM_RSRC1"], [0, 2 << 1])  # RSRC2.USER_SGPR = 2: s[0:1] = the output
        + pm4.set_sh_reg(REGS["COMPUTE_USER_DATA_0"], [out.va & 0xFFFFFFFF, out.va >> 32])
        + pm4.set_sh_reg(REGS["COMPUTE_NUM_THREAD_X"], [32, 1, 1])
        + pm4.dispatch_direct(1, 1, 1, WAVE32))


def test_the_least_recently_used_entry_goes_first():
    cache = InstructionCache(capacity=3)
    for key in "abc":
        cache[key] = key.upper()
    assert cache.get("a") == "A"  # now b is the oldest
    cache["d"] = "D"
    assert "b" not in cache and [k in cache for k in "acd"] == [True, True, True]
    assert len(cache) == 3 and cache.evictions == 1
    assert cache.get("b") is None


def test_the_default_capacity_is_bounded():
    assert 0 < InstructionCache().capacity <= 1 << 16


@pytest.mark.parametrize("capacity", [16, 37])
def test_many_distinct_kernels_keep_the_cache_bounded_and_every_result_right(monkeypatch, capacity):
    monkeypatch.setattr(InstructionCache, "CAPACITY", capacity)
    with EmulatedGPU(seed=0) as g:
        cache = g.shader_core._compiled
        code, out = g.alloc(4096, executable=True), g.alloc(4096)
        first = 0x1000
        for k in range(first, first + 150):  # 150 kernels, each with its own code
            code.u32()[:6] = _store_constant(k)
            _dispatch(g, code, out)
            assert int(out.u32()[0]) == k
            assert len(cache) <= capacity
        assert cache.evictions > 0
        code.u32()[:6] = _store_constant(first)  # long evicted: compiled again, same meaning
        _dispatch(g, code, out)
        assert int(out.u32()[0]) == first and not g.faults
