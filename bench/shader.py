"""Shader-core speed, as `name: value` lines.

shader_vadd_lane_instr_per_s: lane-instructions per second of a vector add over 2^22 elements (best of 3).
shader_matmul_lane_instr_per_s: the same for a loop-heavy tiled matmul (LDS tiles, barriers in the loop; best of 3).
    shader_{vadd,matmul}_cpu_lane_instr_per_s divide by the process's CPU time instead of the wall time (on a loaded
    machine the wall time includes waiting for a core).
shader_cold_start_s: the first dispatch of a fresh kernel on a fresh device (decode + compile + run), small grid.
shader_fdiv_lane_instr_per_s: an f32 division kernel (LLVM's div_scale / rcp / fma / div_fmas / div_fixup
    macro): the cost of correctly rounded FMA and the division helpers; `_vs_vadd` is its ratio to the vadd rate.
isa_<target>_opcodes_*: opcodes in the decoder's tables the shader core executes, and how many of them the
    last test run compiled (`python3 -m hcqsim.shader.coverage`; run the test suite first).
shader_one_wave_dispatch_us: submit + signal + wait of a one-wave (32 work-item) vadd, per dispatch (best of 5 x 50);
    shader_one_wave_core_us: the shader core's part of it (ShaderCore.launch and ActiveDispatch.advance), the
    per-dispatch overhead of the core for a one-wave kernel (the _s lines: the same in seconds; _cpu_us: in process
    CPU time).
shader_blit_1mib_<target>_s: a ROCr-style blit (the bulk phase of ROCr's CopyAligned: 16 bytes per lane per
    iteration with flat dwordx4 loads and stores, a grid-stride loop ending on a 64-bit address compare) copying
    1 MiB with 16384 work items, per dispatch (best of 3, after a first run); shader_blit_gfx942_vs_gfx1100_ratio:
    gfx942's time over gfx1100's for the same bytes (lower is better; issue 20 asks <= 2).
fuzz_checks_per_s: lane checks per second of the IR differential fuzzer (tests/ir_fuzz) on gfx1100 at O2.
shader_translate_<kernel>_{interpret,translate}_lane_instr_per_s: the same kernel (vadd 2^20, matmul 128, the
    register-only ALU_LOOP of the kernel corpus) in one process with the interpreter and with the translator
    (docs/translator.md; best of 3 after a first run that compiles), `_speedup` their ratio, `_translated_pct` the
    share of the kernel's issue steps that ran in translated blocks; shader_translate_compile_ms_per_block: LLVM
    compile latency per block (mean over the blocks these kernels formed; the first tier, O0 without passes, or a
    disk-cache hit: HCQSIM_CACHE=off measures compilation), shader_translate_tier_up_ms_per_block: the O2
    recompilation of blocks that ran translate.TIER_UP times.
Target (issue 4): >= 50M lane-instructions/s on large dispatches, < 0.1 s cold start. Issue 20: >= 300M on vadd and
matmul, the one-wave core overhead halved, the blit ratio <= 2.

    python3 bench/shader.py [--only vadd,matmul,onewave,blit,fdiv,coverage,fuzz]
    python3 bench/shader.py --against REV [--only ...]   (interleaved A/B with REV's hcqsim, bench/ab.py)
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hwtests"))
from ab import PACKAGE_ROOT, main_or_against  # noqa: E402
from timing import CPU as CPU_CLOCK, WALL, mode  # noqa: E402

sys.path.insert(0, PACKAGE_ROOT)  # the hcqsim measured (another tree's under --against)
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


CPU = [0.0]  # process CPU seconds of the last _timed_run (a fairer clock than the wall on a shared machine)


def _timed_run(dev, program, args, gsize, lsize) -> tuple[float, int]:
    core = dev.os.system.gpus[dev.index].shader_core  # benchmark-only peek at the emulator's counters
    before = core.stats["lane_instructions"]
    done = dev.new_signal(0)
    c, t = time.process_time(), time.perf_counter()
    dev.compute_queue().exec(program, args, gsize, lsize).signal(done, 1).submit()
    done.wait(1)
    wall = time.perf_counter() - t
    CPU[0] = time.process_time() - c
    return wall, core.stats["lane_instructions"] - before


# The bulk phase of ROCr's CopyAligned blit kernel (its phase 2), written anew in IR: each lane copies 16 bytes per
# iteration through generic (flat) pointers, stepping by the whole grid, until its source address passes the end
BLIT = """
define amdgpu_kernel void @blit(ptr %src, ptr %dst, ptr %end, i32 %stride) {
entry:""" + K.GID_X + """
  %off = mul i32 %gid, 16
  %off64 = zext i32 %off to i64
  %p0 = getelementptr i8, ptr %src, i64 %off64
  %q0 = getelementptr i8, ptr %dst, i64 %off64
  %st = mul i32 %stride, 16
  %st64 = zext i32 %st to i64
  br label %loop
loop:
  %p = phi ptr [ %p0, %entry ], [ %p1, %body ]
  %q = phi ptr [ %q0, %entry ], [ %q1, %body ]
  %go = icmp ult ptr %p, %end
  br i1 %go, label %body, label %done
body:
  %v = load <4 x i32>, ptr %p, align 16
  store <4 x i32> %v, ptr %q, align 16
  %p1 = getelementptr i8, ptr %p, i64 %st64
  %q1 = getelementptr i8, ptr %q, i64 %st64
  br label %loop
done:
  ret void
}
"""
PARTS = ("vadd", "matmul", "onewave", "blit", "fdiv", "coverage", "fuzz", "translate")


def main(argv: list[str]) -> None:
    parts = PARTS
    if "--only" in argv:
        parts = tuple(argv[argv.index("--only") + 1].split(","))
        unknown = set(parts) - set(PARTS)
        if unknown:
            raise SystemExit(f"unknown parts {sorted(unknown)}: choose from {','.join(PARTS)}")
    dev = open_device("sim")
    t = time.perf_counter()
    co = compile_llvm(VADD + K.DECLS, dev.target)
    compile_s = time.perf_counter() - t
    prog = dev.load_program(co, "vadd")
    n = 1 << 22
    small = dev.alloc(4 * 256)
    cold, _ = _timed_run(dev, prog, [small, small, small], 256, 256)
    print(f"shader_cold_start_s: {cold:.3f}" + mode(WALL, "one run"))
    print(f"llvm_compile_s: {compile_s:.3f}" + mode(WALL, "one run, cache may answer"))
    if "vadd" in parts or "fdiv" in parts:
        a, b, c = (dev.alloc(4 * n) for _ in range(3))
        a.view[:] = np.random.default_rng(0).random(n, np.float32).view(np.uint8)
        b.view[:] = 1
    if "vadd" in parts:
        best = best_cpu = 0.0
        for _ in range(3):
            seconds, lanes = _timed_run(dev, prog, [a, b, c], n, 256)
            assert np.array_equal(c.view.view(np.float32), a.view.view(np.float32) + b.view.view(np.float32))
            best, best_cpu = max(best, lanes / seconds), max(best_cpu, lanes / max(CPU[0], 1e-9))
        print(f"shader_vadd_lane_instr_per_s: {best:.3e}" + mode(WALL, "best of 3"))
        print(f"shader_vadd_cpu_lane_instr_per_s: {best_cpu:.3e}" + mode(CPU_CLOCK, "best of 3"))
    if "matmul" in parts:
        m = 128
        mm = dev.load_program(compile_llvm(K.MATMUL + K.DECLS, dev.target), "matmul")
        A = np.random.default_rng(1).random((m, m), np.float32)
        B = np.random.default_rng(2).random((m, m), np.float32)
        ba, bb, bc = dev.alloc(4 * m * m), dev.alloc(4 * m * m), dev.alloc(4 * m * m)
        ba.view[:] = A.view(np.uint8).reshape(-1)
        bb.view[:] = B.view(np.uint8).reshape(-1)
        best = best_cpu = 0.0
        for _ in range(3):
            bc.view[:] = 0
            seconds, lanes = _timed_run(dev, mm, [ba, bb, bc, m], (m, m), (16, 16))
            got = bc.view.view(np.float32).reshape(m, m)
            assert np.allclose(got, A @ B, rtol=1e-4)
            best, best_cpu = max(best, lanes / seconds), max(best_cpu, lanes / max(CPU[0], 1e-9))
        print(f"shader_matmul_lane_instr_per_s: {best:.3e}" + mode(WALL, "best of 3"))
        print(f"shader_matmul_cpu_lane_instr_per_s: {best_cpu:.3e}" + mode(CPU_CLOCK, "best of 3"))
    if "onewave" in parts:
        total, core_s = _one_wave(dev, prog, small)
        print(f"shader_one_wave_dispatch_s: {total:.6f}" + mode(WALL, "best of 5 x 50"))
        print(f"shader_one_wave_core_s: {core_s:.6f}" + mode(WALL, "best of 5 x 50"))
        print(f"shader_one_wave_dispatch_us: {total * 1e6:.1f}" + mode(WALL, "best of 5 x 50"))
        print(f"shader_one_wave_core_us: {core_s * 1e6:.1f}" + mode(WALL, "best of 5 x 50"))
        print(f"shader_one_wave_core_cpu_us: {ONE_WAVE_CPU[0] * 1e6:.1f}" + mode(CPU_CLOCK, "best of 5 x 50"))
    if "fdiv" in parts:
        vadd_rate = _rate(dev, prog, [a, b, c], n)
        fdiv = dev.load_program(compile_llvm(FDIV + K.DECLS, dev.target), "fdiv")
        fdiv_rate = _rate(dev, fdiv, [a, b, c], n)
        print(f"shader_fdiv_lane_instr_per_s: {fdiv_rate:.3e}" + mode(WALL))
        print(f"shader_fdiv_vs_vadd_ratio: {fdiv_rate / vadd_rate:.2f}" + mode(WALL, "ratio"))
    dev.close()
    if "blit" in parts:
        times = {target: _blit(target) for target in ("gfx1100", "gfx942")}
        for target, seconds in times.items():
            print(f"shader_blit_1mib_{target}_s: {seconds:.4f}" + mode(WALL, "best of 3"))
        print(f"shader_blit_gfx942_vs_gfx1100_ratio: {times['gfx942'] / times['gfx1100']:.2f}" + mode(WALL, "ratio"))
    if "coverage" in parts:
        from hcqsim.shader import coverage
        for line in coverage.summary_lines():
            print(line)
    if "fuzz" in parts:
        print(f"fuzz_checks_per_s: {_fuzz_rate():.0f}" + mode(WALL, "one run"))
    if "translate" in parts:
        _translate_lines()


def _translate_lines() -> None:
    """Interpreter and translator on the same kernels, in this process (the outputs must be equal)."""
    from hcqsim.shader import translate
    kernels = {"vadd": (VADD + K.DECLS, "vadd"), "matmul": (K.MATMUL + K.DECLS, "matmul"),
               "alu": (K.ALU_LOOP + K.DECLS, "alu")}
    rates: dict = {}
    outputs: dict = {}
    share: dict = {}
    compile_before = translate.STATS["compile_s"], translate.STATS["blocks"]
    tier_before = translate.STATS.get("tier_up_s", 0.0), translate.STATS.get("tier_ups", 0)
    for shader_mode in ("interpret", "translate"):
        os.environ["HCQSIM_SHADER"] = shader_mode
        try:
            dev = open_device("sim")
        finally:
            del os.environ["HCQSIM_SHADER"]
        core = dev.os.system.gpus[dev.index].shader_core
        for name, (ir, fn) in kernels.items():
            prog = dev.load_program(compile_llvm(ir, dev.target), fn)
            if name == "vadd":
                n = 1 << 20
                bufs = [dev.alloc(4 * n) for _ in range(3)]
                bufs[0].view[:] = np.random.default_rng(0).random(n, np.float32).view(np.uint8)
                bufs[1].view[:] = 1
                args, grid, block, out = bufs, n, 256, bufs[2]
            elif name == "matmul":
                m = 128
                bufs = [dev.alloc(4 * m * m) for _ in range(3)]
                bufs[0].view[:] = np.random.default_rng(1).random(m * m, np.float32).view(np.uint8)
                bufs[1].view[:] = np.random.default_rng(2).random(m * m, np.float32).view(np.uint8)
                args, grid, block, out = bufs + [m], (m, m), (16, 16), bufs[2]
            else:
                out = dev.alloc(4 * 8192)
                args, grid, block = [out, 200, 1.5], 8192, 256
            _timed_run(dev, prog, args, grid, block)  # compiles (the interpreter's closures, the blocks)
            steps0 = core.stats["issue_steps"]
            blocks0 = core.translator.stats["block_steps"] if core.translator is not None else 0
            best = best_cpu = 0.0
            for _ in range(3):
                seconds, lanes = _timed_run(dev, prog, args, grid, block)
                best, best_cpu = max(best, lanes / seconds), max(best_cpu, lanes / max(CPU[0], 1e-9))
            rates[(name, shader_mode)] = best
            rates[(name, shader_mode, "cpu")] = best_cpu
            outputs[(name, shader_mode)] = bytes(np.asarray(out.view))
            if core.translator is not None:
                share[name] = (core.translator.stats["block_steps"] - blocks0) / (core.stats["issue_steps"] - steps0)
        dev.close()
    for name in kernels:
        assert outputs[(name, "interpret")] == outputs[(name, "translate")], f"{name}: translate differs"
        for shader_mode in ("interpret", "translate"):
            print(f"shader_translate_{name}_{shader_mode}_lane_instr_per_s: {rates[(name, shader_mode)]:.3e}"
                  + mode(WALL, "best of 3"))
        print(f"shader_translate_{name}_speedup: {rates[(name, 'translate')] / rates[(name, 'interpret')]:.2f}"
              + mode(WALL, "ratio"))
        cpu_ratio = rates[(name, "translate", "cpu")] / rates[(name, "interpret", "cpu")]
        print(f"shader_translate_{name}_cpu_speedup: {cpu_ratio:.2f}" + mode(CPU_CLOCK, "ratio of the best of 3"))
        print(f"shader_translate_{name}_translated_pct: {100 * share[name]:.1f}" + mode(WALL, "issue steps"))
    seconds = translate.STATS["compile_s"] - compile_before[0]
    blocks = translate.STATS["blocks"] - compile_before[1]
    print(f"shader_translate_compile_ms_per_block: {1000 * seconds / max(blocks, 1):.1f}"
          + mode(WALL, f"mean of {blocks} blocks"))
    if "tier_ups" in translate.STATS:  # blocks compiled again at O2 after translate.TIER_UP runs
        ups = translate.STATS["tier_ups"] - tier_before[1]
        ms = 1000 * (translate.STATS["tier_up_s"] - tier_before[0]) / max(ups, 1)
        print(f"shader_translate_tier_up_ms_per_block: {ms:.1f}" + mode(WALL, f"mean of {ups} blocks"))


def _blit(target: str, nbytes: int = 1 << 20, items: int = 16384, rounds: int = 3) -> float:
    """Seconds per dispatch of the ROCr-style blit copying `nbytes` on `target` (best of `rounds`, after a first run
    that compiles its instructions); the copy is checked."""
    dev = open_device("sim", target=target)
    try:
        prog = dev.load_program(compile_llvm(BLIT + K.DECLS, dev.target), "blit")
        src, dst = dev.alloc(nbytes), dev.alloc(nbytes)
        src.view[:] = np.random.default_rng(3).integers(0, 256, nbytes, dtype=np.uint8)
        args = [src, dst, src.va + nbytes, items]
        _timed_run(dev, prog, args, items, 256)
        best = float("inf")
        for _ in range(rounds):
            dst.view[:] = 0
            best = min(best, _timed_run(dev, prog, args, items, 256)[0])
            assert np.array_equal(np.asarray(dst.view), np.asarray(src.view))
        return best
    finally:
        dev.close()


def _one_wave(dev, program, buf, rounds: int = 5, per_round: int = 50) -> tuple[float, float]:
    """Seconds per one-wave dispatch (submit, signal, wait) and the shader core's share, best of `rounds`."""
    from hcqsim.shader import core as shader_core  # benchmark-only: time the core's two entry points
    spent, cpu = [0.0], [0.0]

    def timed(fn):
        def wrapper(*args, **kwargs):
            c, t = time.process_time(), time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - t
                cpu[0] += time.process_time() - c
        return wrapper
    launch, advance = shader_core.ShaderCore.launch, shader_core.ActiveDispatch.advance
    shader_core.ShaderCore.launch, shader_core.ActiveDispatch.advance = timed(launch), timed(advance)
    try:
        best_total = best_core = best_cpu = float("inf")
        for _ in range(rounds):
            spent[0] = cpu[0] = 0.0
            t = time.perf_counter()
            for _ in range(per_round):
                _timed_run(dev, program, [buf, buf, buf], 32, 32)
            best_total = min(best_total, (time.perf_counter() - t) / per_round)
            best_core = min(best_core, spent[0] / per_round)
            best_cpu = min(best_cpu, cpu[0] / per_round)
    finally:
        shader_core.ShaderCore.launch, shader_core.ActiveDispatch.advance = launch, advance
    ONE_WAVE_CPU[0] = best_cpu
    return best_total, best_core


ONE_WAVE_CPU = [0.0]  # process CPU seconds of the core's part of a one-wave dispatch (best round of _one_wave)


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
    main_or_against("bench/shader.py", main)
