"""The kernel corpus: LLVM IR compiled for the device's target and run through the full runtime path.

Each kernel is plain IR so that LLVM (via llvmlite) produces the real machine code a GPU would run.
Most kernels compute the global id as workgroup.id * hidden group size + workitem.id, the way HIP code
does, so they also exercise the code object v5 hidden arguments.
"""

DECLS = """
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workitem.id.y()
declare i32 @llvm.amdgcn.workitem.id.z()
declare i32 @llvm.amdgcn.workgroup.id.x()
declare i32 @llvm.amdgcn.workgroup.id.y()
declare i32 @llvm.amdgcn.workgroup.id.z()
declare ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()
declare ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()
declare void @llvm.amdgcn.s.barrier()
declare i32 @llvm.smin.i32(i32, i32)
declare i32 @llvm.umax.i32(i32, i32)
declare float @llvm.fma.f32(float, float, float)
declare float @llvm.sqrt.f32(float)
"""

# global id in x from the hidden arguments: block id * hidden_group_size_x (u16 at implicitarg + 12) + thread id
GID_X = """
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %bid = call i32 @llvm.amdgcn.workgroup.id.x()
  %imp = call ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()
  %gsp = getelementptr i8, ptr addrspace(4) %imp, i64 12
  %gs16 = load i16, ptr addrspace(4) %gsp, align 2
  %gs = zext i16 %gs16 to i32
  %base = mul i32 %bid, %gs
  %gid = add i32 %base, %tid
"""

# A register-only loop: integer hash steps and f32 multiply / FMA per iteration, one store at the end (the translating
# shader core's best case: docs/translator.md; bench/shader.py --only translate, tests/test_shader_translate.py)
ALU_LOOP = """
define amdgpu_kernel void @alu(ptr addrspace(1) %out, i32 %n, float %f) {
entry:""" + GID_X + """
  br label %loop
loop:
  %i = phi i32 [0, %entry], [%i1, %loop]
  %a = phi i32 [%gid, %entry], [%a3, %loop]
  %x = phi float [%f, %entry], [%x2, %loop]
  %a1 = mul i32 %a, 1664525
  %a2 = add i32 %a1, 1013904223
  %s = lshr i32 %a2, 7
  %a3 = xor i32 %a2, %s
  %fa = uitofp i32 %s to float
  %x1 = fmul float %x, 0x3FF0000020000000
  %x2 = call float @llvm.fma.f32(float %x1, float %fa, float %x)
  %i1 = add i32 %i, 1
  %more = icmp ult i32 %i1, %n
  br i1 %more, label %loop, label %done
done:
  %b = bitcast float %x2 to i32
  %r = xor i32 %a3, %b
  %p = getelementptr i32, ptr addrspace(1) %out, i32 %gid
  store i32 %r, ptr addrspace(1) %p
  ret void
}
"""


SAXPY = """
define amdgpu_kernel void @saxpy(ptr addrspace(1) %x, ptr addrspace(1) %y, float %a, i32 %n) {
entry:""" + GID_X + """
  %ok = icmp ult i32 %gid, %n
  br i1 %ok, label %body, label %done
body:
  %px = getelementptr float, ptr addrspace(1) %x, i32 %gid
  %py = getelementptr float, ptr addrspace(1) %y, i32 %gid
  %vx = load float, ptr addrspace(1) %px
  %vy = load float, ptr addrspace(1) %py
  %r = call float @llvm.fma.f32(float %a, float %vx, float %vy)
  store float %r, ptr addrspace(1) %py
  br label %done
done:
  ret void
}
"""

INTOPS = """
define amdgpu_kernel void @intops(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %out) {
entry:""" + GID_X + """
  %pa = getelementptr i32, ptr addrspace(1) %a, i32 %gid
  %pb = getelementptr i32, ptr addrspace(1) %b, i32 %gid
  %va = load i32, ptr addrspace(1) %pa
  %vb = load i32, ptr addrspace(1) %pb
  %m = mul i32 %va, %vb
  %sh = ashr i32 %va, 3
  %x = xor i32 %m, %sh
  %an = and i32 %va, %vb
  %s1 = add i32 %x, %an
  %mn = call i32 @llvm.smin.i32(i32 %va, i32 %vb)
  %s2 = sub i32 %s1, %mn
  %bd = or i32 %vb, 1
  %q = sdiv i32 %va, %bd
  %r = urem i32 %va, %bd
  %s3 = add i32 %s2, %q
  %s4 = xor i32 %s3, %r
  %lz = shl i32 %s4, 5
  %lr = lshr i32 %s4, 27
  %rot = or i32 %lz, %lr
  %po = getelementptr i32, ptr addrspace(1) %out, i32 %gid
  store i32 %rot, ptr addrspace(1) %po
  ret void
}
"""

INT64 = """
define amdgpu_kernel void @int64(ptr addrspace(1) %a, ptr addrspace(1) %out) {
entry:""" + GID_X + """
  %i = zext i32 %gid to i64
  %pa = getelementptr i64, ptr addrspace(1) %a, i64 %i
  %va = load i64, ptr addrspace(1) %pa
  %m = mul i64 %va, 6364136223846793005
  %s = lshr i64 %va, 29
  %x = xor i64 %m, %s
  %y = add i64 %x, 1442695040888963407
  %j = mul i64 %i, 3
  %po = getelementptr i64, ptr addrspace(1) %out, i64 %j
  store i64 %y, ptr addrspace(1) %po
  ret void
}
"""

DIVLOOP = """
define amdgpu_kernel void @divloop(ptr addrspace(1) %in, ptr addrspace(1) %out) {
entry:""" + GID_X + """
  %pi = getelementptr i32, ptr addrspace(1) %in, i32 %gid
  %v = load i32, ptr addrspace(1) %pi
  %n = and i32 %v, 31
  %z = icmp eq i32 %n, 0
  br i1 %z, label %done, label %loop
loop:
  %k = phi i32 [ 0, %entry ], [ %k1, %loop ]
  %acc = phi float [ 0.0, %entry ], [ %acc1, %loop ]
  %kf = sitofp i32 %k to float
  %t = fmul float %kf, 1.5
  %acc1 = fadd float %acc, %t
  %k1 = add i32 %k, 1
  %more = icmp slt i32 %k1, %n
  br i1 %more, label %loop, label %done
done:
  %res = phi float [ 0.0, %entry ], [ %acc1, %loop ]
  %po = getelementptr float, ptr addrspace(1) %out, i32 %gid
  store float %res, ptr addrspace(1) %po
  ret void
}
"""

NESTED = """
define amdgpu_kernel void @nested(ptr addrspace(1) %in, ptr addrspace(1) %out) {
entry:""" + GID_X + """
  %pi = getelementptr i32, ptr addrspace(1) %in, i32 %gid
  %x = load i32, ptr addrspace(1) %pi
  %pos = icmp sgt i32 %x, 0
  br i1 %pos, label %positive, label %negative
positive:
  %odd = and i32 %x, 1
  %isodd = icmp ne i32 %odd, 0
  br i1 %isodd, label %oddb, label %evenb
oddb:
  %t3 = mul i32 %x, 3
  %big = icmp sgt i32 %x, 1000
  br i1 %big, label %bigb, label %join
bigb:
  %t4 = sub i32 %t3, 7
  br label %join
evenb:
  %h = sdiv i32 %x, 2
  br label %join
negative:
  %ng = sub i32 0, %x
  br label %join
join:
  %r = phi i32 [ %t3, %oddb ], [ %t4, %bigb ], [ %h, %evenb ], [ %ng, %negative ]
  %po = getelementptr i32, ptr addrspace(1) %out, i32 %gid
  store i32 %r, ptr addrspace(1) %po
  ret void
}
"""

# one sum per workgroup of 256: values staged in LDS, halved each round behind a barrier
LDS_REDUCE = """
@buf = internal addrspace(3) global [256 x float] undef, align 4

define amdgpu_kernel void @reduce(ptr addrspace(1) %in, ptr addrspace(1) %out) {
entry:""" + GID_X + """
  %pi = getelementptr float, ptr addrspace(1) %in, i32 %gid
  %v = load float, ptr addrspace(1) %pi
  %pl = getelementptr [256 x float], ptr addrspace(3) @buf, i32 0, i32 %tid
  store float %v, ptr addrspace(3) %pl
  call void @llvm.amdgcn.s.barrier()
  br label %loop
loop:
  %s = phi i32 [ 128, %entry ], [ %s1, %next ]
  %act = icmp ult i32 %tid, %s
  br i1 %act, label %add, label %next
add:
  %o = add i32 %tid, %s
  %po = getelementptr [256 x float], ptr addrspace(3) @buf, i32 0, i32 %o
  %a = load float, ptr addrspace(3) %pl
  %b = load float, ptr addrspace(3) %po
  %c = fadd float %a, %b
  store float %c, ptr addrspace(3) %pl
  br label %next
next:
  call void @llvm.amdgcn.s.barrier()
  %s1 = lshr i32 %s, 1
  %cont = icmp ne i32 %s1, 0
  br i1 %cont, label %loop, label %fin
fin:
  %first = icmp eq i32 %tid, 0
  br i1 %first, label %write, label %done
write:
  %p0 = getelementptr [256 x float], ptr addrspace(3) @buf, i32 0, i32 0
  %sum = load float, ptr addrspace(3) %p0
  %pout = getelementptr float, ptr addrspace(1) %out, i32 %bid
  store float %sum, ptr addrspace(1) %pout
  br label %done
done:
  ret void
}
"""

# a 16-bin histogram: per-workgroup bins in LDS (atomics), then global atomics; plus a global max
ATOMICS = """
@bins = internal addrspace(3) global [16 x i32] undef, align 4

define amdgpu_kernel void @hist(ptr addrspace(1) %in, ptr addrspace(1) %hist, ptr addrspace(1) %mx) {
entry:""" + GID_X + """
  %small = icmp ult i32 %tid, 16
  br i1 %small, label %zero, label %zdone
zero:
  %pz = getelementptr [16 x i32], ptr addrspace(3) @bins, i32 0, i32 %tid
  store i32 0, ptr addrspace(3) %pz
  br label %zdone
zdone:
  call void @llvm.amdgcn.s.barrier()
  %pi = getelementptr i32, ptr addrspace(1) %in, i32 %gid
  %v = load i32, ptr addrspace(1) %pi
  %bin = and i32 %v, 15
  %pb = getelementptr [16 x i32], ptr addrspace(3) @bins, i32 0, i32 %bin
  %old = atomicrmw add ptr addrspace(3) %pb, i32 1 monotonic
  %m = atomicrmw umax ptr addrspace(1) %mx, i32 %v monotonic
  call void @llvm.amdgcn.s.barrier()
  br i1 %small, label %flush, label %done
flush:
  %pl = getelementptr [16 x i32], ptr addrspace(3) @bins, i32 0, i32 %tid
  %cnt = load i32, ptr addrspace(3) %pl
  %pg = getelementptr i32, ptr addrspace(1) %hist, i32 %tid
  %o2 = atomicrmw add ptr addrspace(1) %pg, i32 %cnt monotonic
  br label %done
done:
  ret void
}
"""

FP16 = """
define amdgpu_kernel void @fp16(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %c,
                                ptr addrspace(1) %pk) {
entry:""" + GID_X + """
  %pa = getelementptr half, ptr addrspace(1) %a, i32 %gid
  %pb = getelementptr half, ptr addrspace(1) %b, i32 %gid
  %pc = getelementptr half, ptr addrspace(1) %c, i32 %gid
  %va = load half, ptr addrspace(1) %pa
  %vb = load half, ptr addrspace(1) %pb
  %vc = load half, ptr addrspace(1) %pc
  %m = fmul half %va, %vb
  %s = fadd half %m, %vc
  store half %s, ptr addrspace(1) %pc
  %pp = getelementptr <2 x half>, ptr addrspace(1) %pk, i32 %gid
  %vp = load <2 x half>, ptr addrspace(1) %pp
  %sq = fmul <2 x half> %vp, %vp
  %ad = fadd <2 x half> %sq, <half 1.0, half 2.0>
  store <2 x half> %ad, ptr addrspace(1) %pp
  ret void
}
"""

GRID3D = """
define amdgpu_kernel void @grid3d(ptr addrspace(1) %out, i32 %nx, i32 %ny) {
entry:
  %imp = call ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()
  %gxp = getelementptr i8, ptr addrspace(4) %imp, i64 12
  %gyp = getelementptr i8, ptr addrspace(4) %imp, i64 14
  %gzp = getelementptr i8, ptr addrspace(4) %imp, i64 16
  %gx16 = load i16, ptr addrspace(4) %gxp, align 2
  %gy16 = load i16, ptr addrspace(4) %gyp, align 2
  %gz16 = load i16, ptr addrspace(4) %gzp, align 2
  %gx = zext i16 %gx16 to i32
  %gy = zext i16 %gy16 to i32
  %gz = zext i16 %gz16 to i32
  %tx = call i32 @llvm.amdgcn.workitem.id.x()
  %ty = call i32 @llvm.amdgcn.workitem.id.y()
  %tz = call i32 @llvm.amdgcn.workitem.id.z()
  %bx = call i32 @llvm.amdgcn.workgroup.id.x()
  %by = call i32 @llvm.amdgcn.workgroup.id.y()
  %bz = call i32 @llvm.amdgcn.workgroup.id.z()
  %x0 = mul i32 %bx, %gx
  %x = add i32 %x0, %tx
  %y0 = mul i32 %by, %gy
  %y = add i32 %y0, %ty
  %z0 = mul i32 %bz, %gz
  %z = add i32 %z0, %tz
  %zy = mul i32 %z, %ny
  %zyy = add i32 %zy, %y
  %row = mul i32 %zyy, %nx
  %idx = add i32 %row, %x
  %v0 = mul i32 %z, 1000000
  %v1 = mul i32 %y, 1000
  %v2 = add i32 %v0, %v1
  %v = add i32 %v2, %x
  %po = getelementptr i32, ptr addrspace(1) %out, i32 %idx
  store i32 %v, ptr addrspace(1) %po
  ret void
}
"""

# writes, per thread, what the dispatch packet and hidden arguments say about the launch
LAUNCH_INFO = """
define amdgpu_kernel void @launch_info(ptr addrspace(1) %out) {
entry:""" + GID_X + """
  %dp = call ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()
  %wsp = getelementptr i8, ptr addrspace(4) %dp, i64 4
  %ws16 = load i16, ptr addrspace(4) %wsp, align 2
  %ws = zext i16 %ws16 to i32
  %gridp = getelementptr i8, ptr addrspace(4) %dp, i64 12
  %grid = load i32, ptr addrspace(4) %gridp, align 4
  %bcp = getelementptr i8, ptr addrspace(4) %imp, i64 0
  %blocks = load i32, ptr addrspace(4) %bcp, align 4
  %rmp = getelementptr i8, ptr addrspace(4) %imp, i64 18
  %rm16 = load i16, ptr addrspace(4) %rmp, align 2
  %rm = zext i16 %rm16 to i32
  %i4 = mul i32 %gid, 5
  %p0 = getelementptr i32, ptr addrspace(1) %out, i32 %i4
  store i32 %gid, ptr addrspace(1) %p0
  %i5 = add i32 %i4, 1
  %p1 = getelementptr i32, ptr addrspace(1) %out, i32 %i5
  store i32 %ws, ptr addrspace(1) %p1
  %i6 = add i32 %i4, 2
  %p2 = getelementptr i32, ptr addrspace(1) %out, i32 %i6
  store i32 %grid, ptr addrspace(1) %p2
  %i7 = add i32 %i4, 3
  %p3 = getelementptr i32, ptr addrspace(1) %out, i32 %i7
  store i32 %blocks, ptr addrspace(1) %p3
  %i8 = add i32 %i4, 4
  %p4 = getelementptr i32, ptr addrspace(1) %out, i32 %i8
  store i32 %rm, ptr addrspace(1) %p4
  ret void
}
"""

MATH = """
define amdgpu_kernel void @math(ptr addrspace(1) %a, ptr addrspace(1) %out) {
entry:""" + GID_X + """
  %pa = getelementptr float, ptr addrspace(1) %a, i32 %gid
  %x = load float, ptr addrspace(1) %pa
  %d = fdiv float 1.0, %x
  %q = fdiv float %x, 3.0
  %s = call float @llvm.sqrt.f32(float %x)
  %t0 = fadd float %d, %q
  %t1 = fadd float %t0, %s
  %i = fptosi float %x to i32
  %f = sitofp i32 %i to float
  %t2 = fadd float %t1, %f
  %po = getelementptr float, ptr addrspace(1) %out, i32 %gid
  store float %t2, ptr addrspace(1) %po
  ret void
}
"""

# C = A @ B for square n (a multiple of 16): 16x16 workgroups stage 16x16 tiles of A and B in LDS
MATMUL = """
@ta = internal addrspace(3) global [256 x float] undef, align 4
@tb = internal addrspace(3) global [256 x float] undef, align 4

define amdgpu_kernel void @matmul(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %c, i32 %n) {
entry:
  %tx = call i32 @llvm.amdgcn.workitem.id.x()
  %ty = call i32 @llvm.amdgcn.workitem.id.y()
  %bx = call i32 @llvm.amdgcn.workgroup.id.x()
  %by = call i32 @llvm.amdgcn.workgroup.id.y()
  %col0 = shl i32 %bx, 4
  %col = add i32 %col0, %tx
  %row0 = shl i32 %by, 4
  %row = add i32 %row0, %ty
  %lidx0 = shl i32 %ty, 4
  %lidx = add i32 %lidx0, %tx
  %pta = getelementptr [256 x float], ptr addrspace(3) @ta, i32 0, i32 %lidx
  %ptb = getelementptr [256 x float], ptr addrspace(3) @tb, i32 0, i32 %lidx
  %rown = mul i32 %row, %n
  br label %tile
tile:
  %t = phi i32 [ 0, %entry ], [ %t1, %tile_end ]
  %acc = phi float [ 0.0, %entry ], [ %acc2, %tile_end ]
  %ac = add i32 %t, %tx
  %ai = add i32 %rown, %ac
  %pa = getelementptr float, ptr addrspace(1) %a, i32 %ai
  %va = load float, ptr addrspace(1) %pa
  store float %va, ptr addrspace(3) %pta
  %br = add i32 %t, %ty
  %brn = mul i32 %br, %n
  %bi = add i32 %brn, %col
  %pb = getelementptr float, ptr addrspace(1) %b, i32 %bi
  %vb = load float, ptr addrspace(1) %pb
  store float %vb, ptr addrspace(3) %ptb
  call void @llvm.amdgcn.s.barrier()
  br label %inner
inner:
  %k = phi i32 [ 0, %tile ], [ %k1, %inner ]
  %acc1 = phi float [ %acc, %tile ], [ %accn, %inner ]
  %ak0 = shl i32 %ty, 4
  %ak = add i32 %ak0, %k
  %pak = getelementptr [256 x float], ptr addrspace(3) @ta, i32 0, i32 %ak
  %bk0 = shl i32 %k, 4
  %bk = add i32 %bk0, %tx
  %pbk = getelementptr [256 x float], ptr addrspace(3) @tb, i32 0, i32 %bk
  %x = load float, ptr addrspace(3) %pak
  %y = load float, ptr addrspace(3) %pbk
  %accn = call float @llvm.fma.f32(float %x, float %y, float %acc1)
  %k1 = add i32 %k, 1
  %kd = icmp eq i32 %k1, 16
  br i1 %kd, label %tile_end, label %inner
tile_end:
  %acc2 = phi float [ %accn, %inner ]
  call void @llvm.amdgcn.s.barrier()
  %t1 = add i32 %t, 16
  %td = icmp uge i32 %t1, %n
  br i1 %td, label %done, label %tile
done:
  %ci = add i32 %rown, %col
  %pc = getelementptr float, ptr addrspace(1) %c, i32 %ci
  store float %acc2, ptr addrspace(1) %pc
  ret void
}
"""

# stores through a pointer argument the test makes bad
STORE_TO = """
define amdgpu_kernel void @store_to(ptr addrspace(1) %p) {
entry:""" + GID_X + """
  %q = getelementptr i32, ptr addrspace(1) %p, i32 %gid
  store i32 %gid, ptr addrspace(1) %q
  ret void
}
"""

# v_permlane16_b32 (gfx10+): within each row of 16 lanes, lane l reads the lane named by its nibble
PERMLANE = """
declare i32 @llvm.amdgcn.permlane16.i32(i32, i32, i32, i32, i1, i1)
declare i32 @llvm.amdgcn.permlanex16.i32(i32, i32, i32, i32, i1, i1)
define amdgpu_kernel void @permlane(ptr addrspace(1) %out) {
entry:""" + GID_X + """
  %v = call i32 @llvm.amdgcn.permlane16.i32(i32 0, i32 %gid, i32 1985229328, i32 -19088744, i1 false, i1 false)
  %x = call i32 @llvm.amdgcn.permlanex16.i32(i32 0, i32 %gid, i32 1985229328, i32 -19088744, i1 false, i1 false)
  %o = shl i32 %gid, 1
  %q = getelementptr i32, ptr addrspace(1) %out, i32 %o
  store i32 %v, ptr addrspace(1) %q
  %o1 = add i32 %o, 1
  %q1 = getelementptr i32, ptr addrspace(1) %out, i32 %o1
  store i32 %x, ptr addrspace(1) %q1
  ret void
}
"""

# a typed buffer (V# format) load: MUBUF buffer_load_format_x, not implemented by the shader core yet
BUFLOAD = """
declare float @llvm.amdgcn.raw.buffer.load.format.f32(<4 x i32>, i32, i32, i32 immarg)
define amdgpu_kernel void @bufload(ptr addrspace(1) %out, <4 x i32> %rsrc) {
entry:""" + GID_X + """
  %off = shl i32 %tid, 2
  %v = call float @llvm.amdgcn.raw.buffer.load.format.f32(<4 x i32> %rsrc, i32 %off, i32 0, i32 0)
  %q = getelementptr float, ptr addrspace(1) %out, i32 %gid
  store float %v, ptr addrspace(1) %q
  ret void
}
"""

# a private (scratch) array indexed by data: per-lane memory
PRIVATE = """
define amdgpu_kernel void @private_array(ptr addrspace(1) %in, ptr addrspace(1) %out) {
entry:
  %arr = alloca [16 x i32], align 4, addrspace(5)""" + GID_X + """
  br label %fill
fill:
  %i = phi i32 [ 0, %entry ], [ %i1, %fill ]
  %p = getelementptr [16 x i32], ptr addrspace(5) %arr, i32 0, i32 %i
  %v = mul i32 %i, %gid
  store volatile i32 %v, ptr addrspace(5) %p
  %i1 = add i32 %i, 1
  %c = icmp ult i32 %i1, 16
  br i1 %c, label %fill, label %read
read:
  %pi = getelementptr i32, ptr addrspace(1) %in, i32 %gid
  %idx0 = load i32, ptr addrspace(1) %pi
  %idx = and i32 %idx0, 15
  %pr = getelementptr [16 x i32], ptr addrspace(5) %arr, i32 0, i32 %idx
  %r = load volatile i32, ptr addrspace(5) %pr
  %po = getelementptr i32, ptr addrspace(1) %out, i32 %gid
  store i32 %r, ptr addrspace(1) %po
  ret void
}
"""

# a bit of everything LLVM lowers into long sequences: 64-bit udiv/urem, bit counts, exp2/sin/log2, min, floor,
# signed division by a negative constant, a select on a 64-bit compare
MIXED = """
declare float @llvm.exp2.f32(float)
declare float @llvm.sin.f32(float)
declare float @llvm.log2.f32(float)
declare i32 @llvm.ctpop.i32(i32)
declare i32 @llvm.ctlz.i32(i32, i1)
declare i32 @llvm.cttz.i32(i32, i1)
declare float @llvm.minnum.f32(float, float)
declare float @llvm.floor.f32(float)
declare i64 @llvm.umax.i64(i64, i64)
define amdgpu_kernel void @stress(ptr addrspace(1) %a, ptr addrspace(1) %out) {
entry:""" + GID_X + """
  %pa = getelementptr i32, ptr addrspace(1) %a, i32 %gid
  %x = load i32, ptr addrspace(1) %pa
  %x64 = zext i32 %x to i64
  %y64 = mul i64 %x64, 12345678901
  %d = udiv i64 %y64, 977
  %r = urem i64 %y64, 1000003
  %s = add i64 %d, %r
  %mx = call i64 @llvm.umax.i64(i64 %s, i64 %x64)
  %t = trunc i64 %mx to i32
  %pc = call i32 @llvm.ctpop.i32(i32 %x)
  %lz = call i32 @llvm.ctlz.i32(i32 %x, i1 false)
  %tz = call i32 @llvm.cttz.i32(i32 %x, i1 false)
  %f = uitofp i32 %x to float
  %fs = fmul float %f, 0x3F50624DE0000000
  %e = call float @llvm.exp2.f32(float %fs)
  %sn = call float @llvm.sin.f32(float %fs)
  %lg = call float @llvm.log2.f32(float %e)
  %mn = call float @llvm.minnum.f32(float %sn, float %lg)
  %fl = call float @llvm.floor.f32(float %mn)
  %fi = fptosi float %fl to i32
  %sd = sdiv i32 %x, -7
  %q1 = add i32 %t, %pc
  %q2 = add i32 %q1, %lz
  %q3 = add i32 %q2, %tz
  %q4 = add i32 %q3, %fi
  %q5 = xor i32 %q4, %sd
  %cmp = icmp sgt i64 %y64, 40000000000
  %sel = select i1 %cmp, i32 %q5, i32 %x
  %po = getelementptr i32, ptr addrspace(1) %out, i32 %gid
  store i32 %sel, ptr addrspace(1) %po
  ret void
}
"""

# cross-lane moves with DPP: out[gid * 9 + j] for nine controls (update.dpp keeps `old` where a lane has no source)
DPP = """
declare i32 @llvm.amdgcn.update.dpp.i32(i32, i32, i32, i32, i32, i1)
declare i32 @llvm.amdgcn.mov.dpp8.i32(i32, i32)
define amdgpu_kernel void @dpp(ptr addrspace(1) %out) {
entry:""" + GID_X + """
  %v = mul i32 %gid, 3
  %b9 = mul i32 %gid, 9
  %d0 = call i32 @llvm.amdgcn.update.dpp.i32(i32 7777, i32 %v, i32 177, i32 15, i32 15, i1 false)
  %d1 = call i32 @llvm.amdgcn.update.dpp.i32(i32 7777, i32 %v, i32 257, i32 15, i32 15, i1 false)
  %d2 = call i32 @llvm.amdgcn.update.dpp.i32(i32 7777, i32 %v, i32 275, i32 15, i32 15, i1 true)
  %d3 = call i32 @llvm.amdgcn.update.dpp.i32(i32 7777, i32 %v, i32 292, i32 15, i32 15, i1 false)
  %d4 = call i32 @llvm.amdgcn.update.dpp.i32(i32 7777, i32 %v, i32 320, i32 15, i32 15, i1 false)
  %d5 = call i32 @llvm.amdgcn.update.dpp.i32(i32 7777, i32 %v, i32 321, i32 15, i32 15, i1 false)
  %d6 = call i32 @llvm.amdgcn.update.dpp.i32(i32 7777, i32 %v, i32 273, i32 10, i32 15, i1 false)
  %d7 = call i32 @llvm.amdgcn.update.dpp.i32(i32 7777, i32 %v, i32 27, i32 15, i32 5, i1 false)
  %d8 = call i32 @llvm.amdgcn.update.dpp.i32(i32 7777, i32 %v, i32 228, i32 15, i32 15, i1 false)
  %p0 = getelementptr i32, ptr addrspace(1) %out, i32 %b9
  store i32 %d0, ptr addrspace(1) %p0
  %i1 = add i32 %b9, 1
  %p1 = getelementptr i32, ptr addrspace(1) %out, i32 %i1
  store i32 %d1, ptr addrspace(1) %p1
  %i2 = add i32 %b9, 2
  %p2 = getelementptr i32, ptr addrspace(1) %out, i32 %i2
  store i32 %d2, ptr addrspace(1) %p2
  %i3 = add i32 %b9, 3
  %p3 = getelementptr i32, ptr addrspace(1) %out, i32 %i3
  store i32 %d3, ptr addrspace(1) %p3
  %i4 = add i32 %b9, 4
  %p4 = getelementptr i32, ptr addrspace(1) %out, i32 %i4
  store i32 %d4, ptr addrspace(1) %p4
  %i5 = add i32 %b9, 5
  %p5 = getelementptr i32, ptr addrspace(1) %out, i32 %i5
  store i32 %d5, ptr addrspace(1) %p5
  %i6 = add i32 %b9, 6
  %p6 = getelementptr i32, ptr addrspace(1) %out, i32 %i6
  store i32 %d6, ptr addrspace(1) %p6
  %i7 = add i32 %b9, 7
  %p7 = getelementptr i32, ptr addrspace(1) %out, i32 %i7
  store i32 %d7, ptr addrspace(1) %p7
  %i8 = add i32 %b9, 8
  %p8 = getelementptr i32, ptr addrspace(1) %out, i32 %i8
  store i32 %d8, ptr addrspace(1) %p8
  ret void
}
"""

# cross-lane shuffles through the LDS crossbar: bpermute (gather), permute (scatter), swizzle (pattern)
SHUFFLES = """
declare i32 @llvm.amdgcn.ds.bpermute(i32, i32)
declare i32 @llvm.amdgcn.ds.permute(i32, i32)
declare i32 @llvm.amdgcn.ds.swizzle(i32, i32 immarg)
define amdgpu_kernel void @shuffles(ptr addrspace(1) %out) {
entry:""" + GID_X + """
  %v = mul i32 %gid, 5
  %rev = sub i32 31, %tid
  %raddr = shl i32 %rev, 2
  %nxt = add i32 %tid, 1
  %naddr = shl i32 %nxt, 2
  %b = call i32 @llvm.amdgcn.ds.bpermute(i32 %raddr, i32 %v)
  %p = call i32 @llvm.amdgcn.ds.permute(i32 %naddr, i32 %v)
  %s = call i32 @llvm.amdgcn.ds.swizzle(i32 %v, i32 32799)
  %o = mul i32 %gid, 3
  %p0 = getelementptr i32, ptr addrspace(1) %out, i32 %o
  store i32 %b, ptr addrspace(1) %p0
  %o1 = add i32 %o, 1
  %p1 = getelementptr i32, ptr addrspace(1) %out, i32 %o1
  store i32 %p, ptr addrspace(1) %p1
  %o2 = add i32 %o, 2
  %p2 = getelementptr i32, ptr addrspace(1) %out, i32 %o2
  store i32 %s, ptr addrspace(1) %p2
  ret void
}
"""

# byte and half-word arithmetic on packed data: GFX9 compiles it with SDWA selects
PACKED_BYTES = """
define amdgpu_kernel void @packed_bytes(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %out) {
entry:""" + GID_X + """
  %pa = getelementptr <4 x i8>, ptr addrspace(1) %a, i32 %gid
  %pb = getelementptr <4 x i8>, ptr addrspace(1) %b, i32 %gid
  %va = load <4 x i8>, ptr addrspace(1) %pa
  %vb = load <4 x i8>, ptr addrspace(1) %pb
  %s = add <4 x i8> %va, %vb
  %m = mul <4 x i8> %s, %va
  %h = bitcast <4 x i8> %m to <2 x i16>
  %hb = bitcast <4 x i8> %vb to <2 x i16>
  %x = lshr <2 x i16> %h, %hb
  %po = getelementptr <2 x i16>, ptr addrspace(1) %out, i32 %gid
  store <2 x i16> %x, ptr addrspace(1) %po
  ret void
}
"""
