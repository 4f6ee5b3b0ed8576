"""Correct kernels whose numbers raise IEEE exception flags (a u16 -> half conversion overflowing to inf, a
signalling NaN converted or truncated) print no numpy RuntimeWarning, and running them under `python -W error`
changes no result: the shader core computes under np.errstate, and the operations themselves compute quietly.
Hardware raises no traps by default, so a flag is never an error of the kernel."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = r'''
import numpy as np
from hcqsim.compiler import compile_llvm
from hcqsim.runtime import open_device

KERNEL = """
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.fptosi.sat.i32.f32(float)
declare i32 @llvm.fptoui.sat.i32.f32(float)
define amdgpu_kernel void @k(ptr addrspace(1) %pa, ptr addrspace(1) %po) {
  %i = call i32 @llvm.amdgcn.workitem.id.x()
  %ia = getelementptr IN, ptr addrspace(1) %pa, i32 %i
  %io = getelementptr OUT, ptr addrspace(1) %po, i32 %i
  %a = load IN, ptr addrspace(1) %ia
  %r = OP
  store OUT %r, ptr addrspace(1) %io
  ret void
}
"""
SNAN32, QNAN32, INF32 = 0x7F800001, 0x7FC00000, 0x7F800000
CASES = [  # (IR in type, IR out type, operation, input bits, input dtype, output bytes per element)
    ("i16", "half", "uitofp i16 %a to half", [0, 1, 65504, 65519, 65520, 65535], np.uint16, 2),
    ("i16", "half", "sitofp i16 %a to half", [0, 0x8000, 0x7FFF, 0xFFFF], np.uint16, 2),
    ("float", "double", "fpext float %a to double", [SNAN32, SNAN32 | 0x80000000, QNAN32, 0x3F800000], np.uint32, 8),
    ("half", "float", "fpext half %a to float", [0x7C01, 0xFC01, 0x7E00, 0x3C00], np.uint16, 4),
    ("float", "i32", "call i32 @llvm.fptosi.sat.i32.f32(float %a)",
     [SNAN32, QNAN32, INF32, INF32 | 0x80000000, 0x4F800000, 0xCF800000, 0x3FC00000], np.uint32, 4),
    ("float", "i32", "call i32 @llvm.fptoui.sat.i32.f32(float %a)", [SNAN32, INF32, 0xBF800000, 0x4F800000], np.uint32, 4),
    ("float", "float", "fmul float %a, 0x47EFFFFFE0000000", [0x7F7FFFFF, SNAN32, 0x00000001], np.uint32, 4),
]
for target in ("gfx1100", "gfx942"):
    dev = open_device("sim", target=target)
    for in_t, out_t, op, bits, dtype, out_size in CASES:
        ir = KERNEL.replace("IN", in_t).replace("OUT", out_t).replace("OP", op)
        program = dev.load_program(compile_llvm(ir, target, 2), "k")
        a = np.array(bits, dtype)
        src, out = dev.alloc(a.nbytes), dev.alloc(len(a) * out_size)
        src.view[:a.nbytes] = a.view(np.uint8)
        done = dev.new_signal(0)
        dev.compute_queue().exec(program, [src, out], len(a), len(a)).signal(done, 1).submit()
        done.wait(1)
        print(target, op, bytes(out.view[:len(a) * out_size]).hex())
    dev.close()
'''


def _run(*flags: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), os.environ.get("PYTHONPATH")) if p))
    return subprocess.run([sys.executable, *flags, "-c", SCRIPT], capture_output=True, text=True, env=env,
                          timeout=600)


@pytest.fixture(scope="module")
def runs():
    return _run("-W", "default"), _run("-W", "error")


def test_kernels_raising_ieee_flags_print_no_warning(runs):
    plain, _ = runs
    assert plain.returncode == 0, plain.stderr
    assert "RuntimeWarning" not in plain.stderr, plain.stderr


def test_warnings_as_errors_change_no_result(runs):
    plain, strict = runs
    assert strict.returncode == 0, strict.stderr
    assert strict.stdout == plain.stdout
    assert "RuntimeWarning" not in strict.stderr and "Traceback" not in strict.stderr, strict.stderr


def test_the_flagged_conversions_give_the_hardware_results(runs):
    """65520 and up round to +inf in u16 -> half; a signalling NaN widens to a quiet NaN; the saturating f32 -> int
    conversions give 0 for NaN and the type's bounds for infinities."""
    plain, _ = runs
    lines = dict(line.rsplit(" ", 1) for line in plain.stdout.splitlines())
    for target in ("gfx1100", "gfx942"):
        half = bytes.fromhex(lines[f"{target} uitofp i16 %a to half"])
        assert [int.from_bytes(half[i:i + 2], "little") for i in range(0, 12, 2)] == \
            [0, 0x3C00, 0x7BFF, 0x7BFF, 0x7C00, 0x7C00]
        wide = bytes.fromhex(lines[f"{target} fpext float %a to double"])
        doubles = [int.from_bytes(wide[i:i + 8], "little") for i in range(0, 32, 8)]
        assert all(d & 0x7FF8000000000000 == 0x7FF8000000000000 for d in doubles[:3])  # quiet NaNs
        assert doubles[3] == 0x3FF0000000000000
        ints = bytes.fromhex(lines[f"{target} call i32 @llvm.fptosi.sat.i32.f32(float %a)"])
        assert [int.from_bytes(ints[i:i + 4], "little", signed=True) for i in range(0, 28, 4)] == \
            [0, 0, 2 ** 31 - 1, -2 ** 31, 2 ** 31 - 1, -2 ** 31, 1]


def test_the_core_silences_an_operation_that_raises_a_flag(monkeypatch):
    """The safety net on its own: an operation planted without its own errstate (a bare u16 -> half cast) runs
    inside the core under warnings-as-errors and gives the right answer, no warning."""
    import warnings

    import numpy as np

    from hcqsim.compiler import compile_llvm
    from hcqsim.runtime import open_device
    from hcqsim.shader import alu

    out_t, in_ts, _ = alu.VALU["v_cvt_f16_u16"]
    monkeypatch.setitem(alu.VALU, "v_cvt_f16_u16", (out_t, in_ts, lambda a: a.astype(np.float16)))
    ir = SCRIPT.split('KERNEL = """')[1].split('"""')[0]
    ir = ir.replace("IN", "i16").replace("OUT", "half").replace("OP", "uitofp i16 %a to half")
    dev = open_device("sim", target="gfx942")
    try:
        program = dev.load_program(compile_llvm(ir, "gfx942", 2), "k")
        a = np.array([65535, 1], np.uint16)
        src, out = dev.alloc(4), dev.alloc(4)
        src.view[:4] = a.view(np.uint8)
        done = dev.new_signal(0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            dev.compute_queue().exec(program, [src, out], 2, 2).signal(done, 1).submit()
            done.wait(1)
        assert list(out.view[:4].view(np.uint16)) == [0x7C00, 0x3C00]
    finally:
        dev.close()
