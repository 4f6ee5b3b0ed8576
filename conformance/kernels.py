"""Kernels of the conformance suite beyond hcqsim.kernels' library: dispatch geometry in three dimensions,
a workgroup barrier with LDS, and atomics across workgroups. LLVM IR for each and the sentence it computes;
conformance/reference.py computes the same sentences in numpy (nothing is shared but the names).

Ids come from the code object v5 hidden arguments, as HIP computes them: global id in dimension d =
workgroup id d * hidden_group_size_d (u16 at implicitarg + 12 + 2d) + work-item id d.
"""
from __future__ import annotations

_DECLS = """
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workitem.id.y()
declare i32 @llvm.amdgcn.workitem.id.z()
declare i32 @llvm.amdgcn.workgroup.id.x()
declare i32 @llvm.amdgcn.workgroup.id.y()
declare i32 @llvm.amdgcn.workgroup.id.z()
declare ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()
declare i32 @llvm.amdgcn.readfirstlane.i32(i32)
declare void @llvm.amdgcn.s.barrier()
"""


def _gid(d: str, k: int) -> str:
    return f"""
  %wi{d} = call i32 @llvm.amdgcn.workitem.id.{d}()
  %wg{d} = call i32 @llvm.amdgcn.workgroup.id.{d}()
  %szp{d} = getelementptr i8, ptr addrspace(4) %hid, i64 {12 + 2 * k}
  %sz16{d} = load i16, ptr addrspace(4) %szp{d}, align 2
  %sz{d} = zext i16 %sz16{d} to i32
  %base{d} = mul i32 %wg{d}, %sz{d}
  %g{d} = add i32 %base{d}, %wi{d}
"""


GEOMETRY = f"""{_DECLS}
define amdgpu_kernel void @geometry(ptr addrspace(1) %dst, i32 %nx, i32 %ny, i32 %nz) {{
entry:
  %hid = call ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()
{_gid("x", 0)}{_gid("y", 1)}{_gid("z", 2)}
  %inx = icmp ult i32 %gx, %nx
  %iny = icmp ult i32 %gy, %ny
  %inz = icmp ult i32 %gz, %nz
  %in2 = and i1 %inx, %iny
  %in = and i1 %in2, %inz
  br i1 %in, label %body, label %out
body:
  %zy = mul i32 %gz, %ny
  %row = add i32 %zy, %gy
  %rx = mul i32 %row, %nx
  %lin = add i32 %rx, %gx
  %y10 = shl i32 %gy, 10
  %z20 = shl i32 %gz, 20
  %xy = or i32 %gx, %y10
  %v = or i32 %xy, %z20
  %p = getelementptr i32, ptr addrspace(1) %dst, i32 %lin
  store i32 %v, ptr addrspace(1) %p
  br label %out
out:
  ret void
}}
"""

BARRIER_HANDOFF = f"""{_DECLS}
@lds = internal addrspace(3) global [128 x i32] poison, align 4

define amdgpu_kernel void @barrier_handoff(ptr addrspace(1) %dst) {{
entry:
  %hid = call ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()
{_gid("x", 0)}
  %first = call i32 @llvm.amdgcn.readfirstlane.i32(i32 %wix)
  %writer = icmp ult i32 %first, 64
  br i1 %writer, label %write, label %read
read:
  fence syncscope("workgroup") release
  call void @llvm.amdgcn.s.barrier()
  fence syncscope("workgroup") acquire
  %j = sub i32 %wix, 64
  %pj = getelementptr [128 x i32], ptr addrspace(3) @lds, i32 0, i32 %j
  %got = load i32, ptr addrspace(3) %pj
  br label %store
write:
  %mine = mul i32 %gx, 7
  %pw = getelementptr [128 x i32], ptr addrspace(3) @lds, i32 0, i32 %wix
  store i32 %mine, ptr addrspace(3) %pw
  fence syncscope("workgroup") release
  call void @llvm.amdgcn.s.barrier()
  fence syncscope("workgroup") acquire
  br label %store
store:
  %v = phi i32 [ %got, %read ], [ %mine, %write ]
  %pd = getelementptr i32, ptr addrspace(1) %dst, i32 %gx
  store i32 %v, ptr addrspace(1) %pd
  ret void
}}
"""

def _guarded_1d(name: str, params: str, body: str) -> str:
    """A one-dimensional kernel whose work-items with global id %gx < %n run `body` (which may use %gx)."""
    return f"""{_DECLS}
define amdgpu_kernel void @{name}({params}, i32 %n) {{
entry:
  %hid = call ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()
{_gid("x", 0)}
  %in = icmp ult i32 %gx, %n
  br i1 %in, label %body, label %done
body:
{body}
  br label %done
done:
  ret void
}}
"""


ATOMIC_COUNT = _guarded_1d("atomic_count", "ptr addrspace(1) %counter, ptr addrspace(1) %out", """\
  %old = atomicrmw add ptr addrspace(1) %counter, i32 1 syncscope("agent") monotonic, align 4
  %po = getelementptr i32, ptr addrspace(1) %out, i32 %gx
  store i32 %old, ptr addrspace(1) %po""")

ATOMIC_ADD_EACH = _guarded_1d("atomic_add_each", "ptr addrspace(1) %x, ptr addrspace(1) %out", """\
  %px = getelementptr i32, ptr addrspace(1) %x, i32 %gx
  %old = atomicrmw add ptr addrspace(1) %px, i32 %gx syncscope("agent") monotonic, align 4
  %po = getelementptr i32, ptr addrspace(1) %out, i32 %gx
  store i32 %old, ptr addrspace(1) %po""")

# name -> (LLVM IR module, the sentence conformance/reference.py implements)
KERNELS: dict[str, tuple[str, str]] = {
    "geometry": (GEOMETRY, "geometry(dst, nx, ny, nz): for every global id (x, y, z) inside nx*ny*nz, "
                           "dst[(z*ny + y)*nx + x] = x | y << 10 | z << 20; ids outside write nothing"),
    "barrier_handoff": (BARRIER_HANDOFF, "barrier_handoff(dst), workgroups of 128: the lower half stores 7*i into "
                                         "LDS and meets the upper half at s_barrier, which then reads its partner's "
                                         "word: dst[i] = 7*(i - 64) when i % 128 >= 64, else 7*i"),
    "atomic_count": (ATOMIC_COUNT, "atomic_count(counter, out, n): work-item i < n atomically adds 1 to counter[0] "
                                   "and stores the value it returned (the pre-op value) in out[i]"),
    "atomic_add_each": (ATOMIC_ADD_EACH, "atomic_add_each(x, out, n): work-item i < n atomically adds i to x[i] and "
                                         "stores the value it returned (the pre-op value) in out[i]"),
}


def ir(name: str) -> str:
    return KERNELS[name][0]
