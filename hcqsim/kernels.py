"""A small library of test kernels: LLVM IR for each, and what each computes, stated in words.

The conformance scenarios and the schedule fuzzer launch these by name. Every kernel works on 32-bit unsigned
words, one work-item per word `i` (the global id: workgroup id * workgroup size + work-item id, the HIP way,
from the code object v5 hidden arguments), and does nothing for `i >= n`, so partial workgroups are safe.
The numpy equivalents live with whoever checks the results (conformance/reference.py writes its own), so a
wrong kernel here cannot agree with itself.
"""
from __future__ import annotations

from functools import lru_cache

_DECLS = """
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()
declare ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()
"""

# i = workgroup.id.x * hidden_group_size_x (u16 at implicitarg + 12) + workitem.id.x; branch out when i >= n
_PROLOGUE = """
entry:
  %wi = call i32 @llvm.amdgcn.workitem.id.x()
  %wg = call i32 @llvm.amdgcn.workgroup.id.x()
  %hid = call ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()
  %szp = getelementptr i8, ptr addrspace(4) %hid, i64 12
  %sz16 = load i16, ptr addrspace(4) %szp, align 2
  %sz = zext i16 %sz16 to i32
  %first = mul i32 %wg, %sz
  %i = add i32 %first, %wi
  %in = icmp ult i32 %i, %n
  br i1 %in, label %body, label %out
body:
"""
_EPILOGUE = """
  br label %out
out:
  ret void
}
"""

# name -> (signature, body, what it computes: the sentence a reference implements)
KERNELS: dict[str, tuple[str, str, str]] = {
    "iota": ("ptr addrspace(1) %dst, i32 %base, i32 %n", """
  %p = getelementptr i32, ptr addrspace(1) %dst, i32 %i
  %v = add i32 %base, %i
  store i32 %v, ptr addrspace(1) %p
""", "iota(dst, base, n): dst[i] = base + i"),
    "add": ("ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %dst, i32 %n", """
  %pa = getelementptr i32, ptr addrspace(1) %a, i32 %i
  %pb = getelementptr i32, ptr addrspace(1) %b, i32 %i
  %pd = getelementptr i32, ptr addrspace(1) %dst, i32 %i
  %va = load i32, ptr addrspace(1) %pa
  %vb = load i32, ptr addrspace(1) %pb
  %v = add i32 %va, %vb
  store i32 %v, ptr addrspace(1) %pd
""", "add(a, b, dst, n): dst[i] = a[i] + b[i] (mod 2^32)"),
    "scale": ("ptr addrspace(1) %src, ptr addrspace(1) %dst, i32 %k, i32 %n", """
  %ps = getelementptr i32, ptr addrspace(1) %src, i32 %i
  %pd = getelementptr i32, ptr addrspace(1) %dst, i32 %i
  %vs = load i32, ptr addrspace(1) %ps
  %v = mul i32 %vs, %k
  store i32 %v, ptr addrspace(1) %pd
""", "scale(src, dst, k, n): dst[i] = src[i] * k (mod 2^32)"),
    "inc": ("ptr addrspace(1) %x, i32 %n", """
  %p = getelementptr i32, ptr addrspace(1) %x, i32 %i
  %v0 = load i32, ptr addrspace(1) %p
  %v = add i32 %v0, 1
  store i32 %v, ptr addrspace(1) %p
""", "inc(x, n): x[i] = x[i] + 1 (mod 2^32)"),
    "reverse": ("ptr addrspace(1) %src, ptr addrspace(1) %dst, i32 %n", """
  %last = sub i32 %n, 1
  %j = sub i32 %last, %i
  %ps = getelementptr i32, ptr addrspace(1) %src, i32 %j
  %pd = getelementptr i32, ptr addrspace(1) %dst, i32 %i
  %v = load i32, ptr addrspace(1) %ps
  store i32 %v, ptr addrspace(1) %pd
""", "reverse(src, dst, n): dst[i] = src[n - 1 - i]"),
}


def ir(name: str) -> str:
    """The LLVM IR module of kernel `name`."""
    sig, body, _ = KERNELS[name]
    return f"{_DECLS}\ndefine amdgpu_kernel void @{name}({sig}) {{{_PROLOGUE}{body}{_EPILOGUE}"


@lru_cache(maxsize=None)
def code_object(name: str, target: str) -> bytes:
    """Kernel `name` compiled for `target` (cached per process; hcqsim.compiler also caches on disk)."""
    from .compiler import compile_llvm
    return compile_llvm(ir(name), target)


def buffer_args(name: str) -> list[int]:
    """Positions of the pointer arguments of kernel `name`."""
    sig = KERNELS[name][0]
    return [i for i, a in enumerate(sig.split(",")) if "ptr" in a]
