"""Dispatch memory is bounded (issue 8 item 2).

DISPATCH_DIRECT generates its workgroups batch by batch, so host memory is bounded by the wave batch and not
by the grid (up to the 32-bit dims hardware allows); a grid past the runaway bound is refused as a fault of its
queue before any wave runs.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest

from hcqsim import EmulatedGPU, pm4
from hcqsim.registers import REGS, initiator
from hcqsim.shader import core

S_NOP, S_ENDPGM = 0xBF800000, 0xBFB00000  # gfx11 SOPP encodings
WAVE32 = initiator(compute_shader_en=1, force_start_at_000=1, cs_w32_en=1)


def _launch(code_va: int, dims: tuple[int, int, int], group: int = 32) -> list[int]:
    """Registers for a gfx11 kernel with one VGPR granule and no user SGPRs, then DISPATCH_DIRECT."""
    return (pm4.set_sh_reg(REGS["COMPUTE_PGM_LO"], [code_va >> 8 & 0xFFFFFFFF, code_va >> 40])
            + pm4.set_sh_reg(REGS["COMPUTE_PGM_RSRC1"], [0, 0])
            + pm4.set_sh_reg(REGS["COMPUTE_NUM_THREAD_X"], [group, 1, 1])
            + pm4.dispatch_direct(*dims, WAVE32))


def _kernel(g: EmulatedGPU, words: list[int]):
    code = g.alloc(4096, executable=True)
    code.u32()[:len(words)] = words
    return code


# The measurement runs in a fresh interpreter: ru_maxrss is the process's high-water mark, which a pytest
# worker may already have raised above anything this dispatch would reach.
_RSS_SCRIPT = textwrap.dedent("""
    import json, resource, sys
    sys.path.insert(0, sys.argv[1])
    from test_dispatch_memory import EmulatedGPU, S_ENDPGM, _kernel, _launch, pm4
    n = int(sys.argv[2])
    with EmulatedGPU(seed=0, max_packets_per_run=2 * n) as g:
        code, out = _kernel(g, [S_ENDPGM]), g.alloc(4096)
        q = g.compute_queue()
        q.submit(_launch(code.va, (64, 1, 1)))  # warm up: every module loaded, every table built
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        q.submit(_launch(code.va, (n // 4, 2, 2)) + pm4.write_data(out.va, [1]))
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps({"growth_kib": after - before, "faults": [str(f) for f in g.faults],
                          "waves": g.shader_core.stats["waves"], "done": int(out.u32()[0])}))
""")


def test_empty_kernel_over_2_26_workgroups_keeps_peak_rss_small(tmp_path):
    n = 1 << 26
    script = tmp_path / "rss.py"
    script.write_text(_RSS_SCRIPT)
    tests_dir = str(__import__("pathlib").Path(__file__).parent)
    proc = subprocess.run([sys.executable, str(script), tests_dir, str(n)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["faults"] == [] and r["done"] == 1 and r["waves"] == n + 64
    assert r["growth_kib"] < 32 << 10, r  # a grid-sized id array alone would be 1.5 GiB


def test_batched_dispatch_memory_does_not_grow_with_the_grid(monkeypatch):
    # small batches make the difference between "bounded by the batch" and "bounded by the grid" visible
    monkeypatch.setattr(core, "BATCH_BYTES", 256 << 10)
    with EmulatedGPU(seed=0) as g:
        code, q = _kernel(g, [S_NOP, S_ENDPGM]), g.compute_queue()

        def peak(groups: int) -> int:
            tracemalloc.start()
            try:
                q.submit(_launch(code.va, (groups, 1, 1)))
                return tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()

        peak(256)  # warm up: compiled instructions cached
        small, large = peak(1 << 10), peak(1 << 15)
        assert not g.faults and g.shader_core.stats["waves"] == 256 + (1 << 10) + (1 << 15)
        assert large < small + (256 << 10), (small, large)  # the old meshgrid alone added 1.5 MiB


def test_billion_workgroup_dispatch_is_a_runaway_fault_of_its_queue():
    with EmulatedGPU(seed=0) as g:
        code, out = _kernel(g, [S_NOP, S_ENDPGM]), g.alloc(4096)
        big, other = g.compute_queue(), g.compute_queue()
        big.submit(_launch(code.va, (1 << 30, 1, 1)) + pm4.write_data(out.va, [1]))
        [f] = g.faults
        assert (f.kind, f.queue) == ("runaway", big.name) and f.packet.startswith("DISPATCH_DIRECT")
        assert "1073741824 waves" in f.message and out.u32()[0] == 0  # refused whole: nothing ran after it
        assert g.shader_core.stats["waves"] == 0
        other.submit(pm4.write_data(out.va + 4, [2]))
        assert out.u32()[1] == 2


def test_largest_32_bit_grid_is_refused_without_overflow():
    with EmulatedGPU(seed=0) as g:
        code, q = _kernel(g, [S_ENDPGM]), g.compute_queue()
        q.submit(_launch(code.va, (0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF)))
        [f] = g.faults
        assert f.kind == "runaway" and str(0xFFFFFFFF ** 3) in f.message


IDS = """
define amdgpu_kernel void @ids(ptr addrspace(1) %out, i32 %nx, i32 %ny, i32 %lx, i32 %ly, i32 %lz) {
  %tx = call i32 @llvm.amdgcn.workitem.id.x()
  %ty = call i32 @llvm.amdgcn.workitem.id.y()
  %tz = call i32 @llvm.amdgcn.workitem.id.z()
  %bx = call i32 @llvm.amdgcn.workgroup.id.x()
  %by = call i32 @llvm.amdgcn.workgroup.id.y()
  %bz = call i32 @llvm.amdgcn.workgroup.id.z()
  %ox = mul i32 %bx, %lx
  %gx = add i32 %ox, %tx
  %oy = mul i32 %by, %ly
  %gy = add i32 %oy, %ty
  %oz = mul i32 %bz, %lz
  %gz = add i32 %oz, %tz
  %rz = mul i32 %gz, %ny
  %ry = add i32 %rz, %gy
  %rx = mul i32 %ry, %nx
  %i = add i32 %rx, %gx
  %vy = shl i32 %gy, 10
  %vz = shl i32 %gz, 20
  %v0 = or i32 %gx, %vy
  %v1 = or i32 %v0, %vz
  %v = or i32 %v1, -2147483648
  %p = getelementptr i32, ptr addrspace(1) %out, i32 %i
  store i32 %v, ptr addrspace(1) %p
  ret void
}
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workitem.id.y()
declare i32 @llvm.amdgcn.workitem.id.z()
declare i32 @llvm.amdgcn.workgroup.id.x()
declare i32 @llvm.amdgcn.workgroup.id.y()
declare i32 @llvm.amdgcn.workgroup.id.z()
"""


@pytest.mark.parametrize("batch_bytes", [1, 40_000, core.BATCH_BYTES], ids=["one-group", "few-groups", "default"])
def test_every_thread_gets_its_ids_across_batches_and_partial_groups(monkeypatch, batch_bytes):
    from hcqsim.compiler import compile_llvm
    from hcqsim.runtime import open_device
    monkeypatch.setattr(core, "BATCH_BYTES", batch_bytes)
    size, local = (13, 5, 3), (4, 2, 2)  # trailing partial groups in every dimension
    dev = open_device("sim")
    try:
        n = size[0] * size[1] * size[2]
        out = dev.alloc(4 * n + 4096)  # room past the end: a thread outside the grid would land there
        prog = dev.load_program(compile_llvm(IDS, dev.target), "ids")
        sig = dev.new_signal(0)
        dev.compute_queue().exec(prog, [out, size[0], size[1], *local], size, local).signal(sig, 1).submit()
        sig.wait(1)
        got = out.view[:4 * n + 4096].view(np.uint32)
        z, y, x = np.meshgrid(*(np.arange(s, dtype=np.uint32) for s in reversed(size)), indexing="ij")
        want = (x | y << 10 | z << 20 | 1 << 31).ravel()
        assert np.array_equal(got[:n], want) and not got[n:].any()
    finally:
        dev.close()
