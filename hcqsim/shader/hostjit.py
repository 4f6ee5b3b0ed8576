"""Elementwise kernels compiled for the host CPU by LLVM (llvmlite's MCJIT), for the arithmetic numpy lacks.

numpy has no fused multiply-add. `fpmath.fma` emulates one exactly with error-free transformations, which costs
about thirty numpy calls per instruction (tens of microseconds for one wave); LLVM's `llvm.fma` intrinsic is IEEE
754's fusedMultiplyAdd, correctly rounded by definition: the JIT lowers it to the CPU's FMA instruction where the
target machine has one and to the C library's `fma` (correctly rounded too) where it has not. Either way the
result is the same number on every host; which NaN comes out is not, so callers apply `fpmath.propagate_nan`.

The module is compiled once per process, on first use (about 0.1 s with llvmlite's import). `enabled = False` (or
HCQSIM_HOST_JIT=0 in the environment) makes `fpmath` use its numpy emulation instead; tests compare the two.
"""
from __future__ import annotations

import ctypes
import os
import threading

import numpy as np

enabled = os.environ.get("HCQSIM_HOST_JIT", "1") != "0"

_IR = """
declare float @llvm.fma.f32(float, float, float)
declare double @llvm.fma.f64(double, double, double)
{kernels}
"""

_FMA = """
define void @fma_{t}({t}* noalias %a, {t}* noalias %b, {t}* noalias %c, {t}* noalias %out, i64 %n) {{
entry:
  %empty = icmp eq i64 %n, 0
  br i1 %empty, label %exit, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %pa = getelementptr {t}, {t}* %a, i64 %i
  %pb = getelementptr {t}, {t}* %b, i64 %i
  %pc = getelementptr {t}, {t}* %c, i64 %i
  %po = getelementptr {t}, {t}* %out, i64 %i
  %x = load {t}, {t}* %pa
  %y = load {t}, {t}* %pb
  %z = load {t}, {t}* %pc
  %r = call {t} @llvm.fma.{s}({t} %x, {t} %y, {t} %z)
  store {t} %r, {t}* %po
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}}
"""

_lock = threading.Lock()
_functions: dict[str, object] | None = None
_engine = None  # kept alive: the compiled code lives as long as the execution engine


def _compile() -> dict[str, object]:
    global _engine
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    kernels = "".join(_FMA.format(t=t, s=s) for t, s in (("float", "f32"), ("double", "f64")))
    module = llvm.parse_assembly(_IR.format(kernels=kernels))
    module.verify()
    machine = llvm.Target.from_default_triple().create_target_machine(opt=2)
    _engine = llvm.create_mcjit_compiler(module, machine)
    _engine.finalize_object()
    signature = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_int64)
    return {name: signature(_engine.get_function_address(f"fma_{name}")) for name in ("float", "double")}


def _kernels() -> dict[str, object]:
    global _functions
    if _functions is None:
        with _lock:
            if _functions is None:
                _functions = _compile()
    return _functions


_NAME = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a * b + c rounded once, for same-shaped float32 or float64 arrays (NaN payloads: the CPU's choice)."""
    kernel = _kernels()[_NAME[a.dtype]]
    a, b, c = (np.ascontiguousarray(x) for x in (a, b, c))
    out = np.empty_like(a)
    kernel(a.ctypes.data, b.ctypes.data, c.ctypes.data, out.ctypes.data, a.size)
    return out
