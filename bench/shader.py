"""Shader-core speed, as `name: value` lines.

shader_vadd_lane_instr_per_s: lane-instructions per second of a vector add over 2^22 elements.
shader_matmul_lane_instr_per_s: the same for a loop-heavy tiled matmul (LDS tiles, barriers in the loop).
shader_cold_start_s: the first dispatch of a fresh kernel on a fresh device (decode + compile + run), small grid.
shader_fdiv_lane_instr_per_s: an f32 division kernel (LLVM's div_scale / rcp / fma / div_fmas / div_fixup
    macro): the cost of correctly rounded FMA and the division helpers; `_vs_vadd` is its ratio to the vadd rate.
isa_<target>_opcodes_*: opcodes in the decoder's tables the shader core executes, and how many of them the
    last test run compiled (`python3 -m hcqsim.shader.coverage`; run the test suite first).
shader_one_wave_dispatch_s: submit + signal + wait of a one-wave (32 work-item) vadd, per dispatch (best of 5 x 50);
    shader_one_wave_core_s: the shader core's part of it (ShaderCore.launch and ActiveDispatch.advance).
fuzz_checks_per_s: lane checks per second of the IR differential fuzzer (tests/ir_fuzz) on gfx1100 at O2.
Target (issue 4): >= 50M lane-instructions/s on large dispatches, < 0.1 s cold start.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hwtests"))
import kernel_corpus as K  # noqa: E402

from hcqsim.compiler import compile_llvm  # noqa: E402
from hcqsim.runtime import open_device  # noqa: E402

def _elementwise(name: str, body: str) -> str:
    """A kernel c[gid] = f(a[gid], b[gid]) over floats; `body` computes %s from %va and %vb."""
    return f"""
define amdgpu_kernel void @{name}(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %c) {{
entry:{K.GID_X}
  %pa = getelementptr float, ptr addrspace(1) %a, i32 %gid
  %pb = getelementptr float, ptr addrspace(1) %b, i32 %gid
  %pc = getelementptr float, ptr addrspace(1) %c, i32 %gid
  %va = load float, ptr addrspace(1) %pa
  %vb = load float, ptr addrspace(1) %pb
{body}
  store float %s, ptr addrspace(1) %pc
  ret void
}}
"""


VADD = _elementwise("vadd", "  %s = fadd float %va, %vb")
FDIV = _elementwise("fdiv", "  %q = fdiv float %va, %vb\n  %s = call float @llvm.fma.f32(float %q, float %vb, float %va)")


def _timed_run(dev, program, args, gsize, lsize) -> tuple[float, int]:
    core = dev.os.system.gpus[dev.index].shader_core  # benchmark-only peek at the emulator's counters
    before = core.stats["lane_instructions"]
    done = dev.new_signal(0)
    t = time.perf_counter()
    dev.compute_queue().exec(program, args, gsize, lsize).signal(done, 1).submit()
    done.wait(1)
    return time.perf_counter() - t, core.stats["lane_instructions"] - before


def main() -> None:
    dev = open_device("sim")
    t = time.perf_counter()
    co = compile_llvm(VADD + K.DECLS, dev.target)
    compile_s = time.perf_counter() - t
    prog = dev.load_program(co, "vadd")
    n = 1 << 22
    a, b, c = (dev.alloc(4 * n) for _ in range(3))
    a.view[:] = np.random.default_rng(0).random(n, np.float32).view(np.uint8)
    b.view[:] = 1
    small = dev.alloc(4 * 256)
    cold, _ = _timed_run(dev, prog, [small, small, small], 256, 256)
    print(f"shader_cold_start_s: {cold:.3f}")
    print(f"llvm_compile_s: {compile_s:.3f}")
    seconds, lanes = _timed_run(dev, prog, [a, b, c], n, 256)
    assert np.array_equal(c.view.view(np.float32), a.view.view(np.float32) + b.view.view(np.float32))
    print(f"shader_vadd_lane_instr_per_s: {lanes / seconds:.3e}")
    m = 128
    mm = dev.load_program(compile_llvm(K.MATMUL + K.DECLS, dev.target), "matmul")
    A = np.random.default_rng(1).random((m, m), np.float32)
    B = np.random.default_rng(2).random((m, m), np.float32)
    ba, bb, bc = dev.alloc(4 * m * m), dev.alloc(4 * m * m), dev.alloc(4 * m * m)
    ba.view[:] = A.view(np.uint8).reshape(-1)
    bb.view[:] = B.view(np.uint8).reshape(-1)
    seconds, lanes = _timed_run(dev, mm, [ba, bb, bc, m], (m, m), (16, 16))
    got = bc.view.view(np.float32).reshape(m, m)
    assert np.allclose(got, A @ B, rtol=1e-4)
    print(f"shader_matmul_lane_instr_per_s: {lanes / seconds:.3e}")
    total, core_s = _one_wave(dev, prog, small)
    print(f"shader_one_wave_dispatch_s: {total:.6f}")
    print(f"shader_one_wave_core_s: {core_s:.6f}")
    vadd_rate = _rate(dev, prog, [a, b, c], n)
    fdiv = dev.load_program(compile_llvm(FDIV + K.DECLS, dev.target), "fdiv")
    fdiv_rate = _rate(dev, fdiv, [a, b, c], n)
    print(f"shader_fdiv_lane_instr_per_s: {fdiv_rate:.3e}")
    print(f"shader_fdiv_vs_vadd_ratio: {fdiv_rate / vadd_rate:.2f}")
    dev.close()
    from hcqsim.shader import coverage
    for line in coverage.summary_lines():
        print(line)
    print(f"fuzz_checks_per_s: {_fuzz_rate():.0f}")


def _one_wave(dev, program, buf, rounds: int = 5, per_round: int = 50) -> tuple[float, float]:
    """Seconds per one-wave dispatch (submit, signal, wait) and the shader core's share, best of `rounds`."""
    from hcqsim.shader import core as shader_core  # benchmark-only: time the core's two entry points
    spent = [0.0]

    def timed(fn):
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - t
        return wrapper
    launch, advance = shader_core.ShaderCore.launch, shader_core.ActiveDispatch.advance
    shader_core.ShaderCore.launch, shader_core.ActiveDispatch.advance = timed(launch), timed(advance)
    try:
        best_total = best_core = float("inf")
        for _ in range(rounds):
            spent[0] = 0.0
            t = time.perf_counter()
            for _ in range(per_round):
                _timed_run(dev, program, [buf, buf, buf], 32, 32)
            best_total = min(best_total, (time.perf_counter() - t) / per_round)
            best_core = min(best_core, spent[0] / per_round)
    finally:
        shader_core.ShaderCore.launch, shader_core.ActiveDispatch.advance = launch, advance
    return best_total, best_core


def _rate(dev, program, args, n: int) -> float:
    seconds, lanes = _timed_run(dev, program, args, n, 256)
    return lanes / seconds


def _fuzz_rate(programs: int = 40) -> float:
    """The IR fuzzer's lane checks per second over `programs` random programs (gfx1100, O2)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    from ir_fuzz.campaign import generate  # noqa: E402 - the fuzzer lives with the tests
    from ir_fuzz.dag import TYPES
    from ir_fuzz.run import check
    progs = generate(programs, 1, 12, None, TYPES)
    t = time.perf_counter()
    checks = sum(check(p, "gfx1100", 2, i, explain=False).checks for i, p in enumerate(progs))
    return checks / (time.perf_counter() - t)


if __name__ == "__main__":
    main()
