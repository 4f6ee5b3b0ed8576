"""What the decoder tests of both architectures share (test_shader_decoder.py for gfx1100,
test_shader_decoder_gfx942.py): LLVM's assembler as the encoding oracle, batched per test module; the register
text of representative lines; the compiled-kernel IR and the comparison with LLVM's listing; the loops over
unknown opcodes and random words.
"""
from __future__ import annotations

import functools
import random
import struct
from typing import Callable, Iterable

import pytest

from hcqsim.compiler import AssemblerUnavailableError, assemble_each, assembler_for, assembler_llvm_version
from hcqsim.errors import DecodeError
from hcqsim.shader import Instr, decode, format_instr
from hcqsim.shader.opcodes_gfx11 import dwords, parse_shape  # the shape syntax of both architectures' tables

ORACLE_LLVM = 22  # the LLVM major version whose canonical text the decoders print (llvmlite's)


def pack_words(*words: int) -> bytes:
    return struct.pack(f"<{len(words)}I", *words)


def norm(text: str) -> str:
    return " ".join(text.split())


# ---------------------------------------------------------------------------------------------------------
# the assembler oracle

@functools.lru_cache(maxsize=None)
def no_oracle_reason(arch: str, hint: str = "") -> str | None:
    """Why the oracle cannot run here for `arch`, or None when the assembler is usable (`hint`: what to do)."""
    try:
        name = assembler_for(arch)
    except AssemblerUnavailableError as e:
        return str(e)
    version = assembler_llvm_version(arch)
    if version[0] < ORACLE_LLVM:
        return f"{name} is LLVM {'.'.join(map(str, version))}: the expected text is LLVM {ORACLE_LLVM}'s{hint}"
    return None


class Oracle:
    """LLVM's assembler as the encoding oracle of one test module: every line the module checks (`lines()`) is
    assembled in one batch on first use, giving each line its encoding and LLVM's canonical text."""

    def __init__(self, arch: str, lines: Callable[[], Iterable[str]], hint: str = ""):
        self.arch, self._lines, self._hint = arch, lines, hint

    @functools.cached_property
    def results(self) -> dict[str, tuple[bytes | None, str | None]]:
        lines = sorted(set(self._lines()))
        return dict(zip(lines, assemble_each(lines, self.arch)))

    def check_line(self, line: str) -> Instr:
        """Assemble one line with LLVM, decode it, compare size and text. Returns the Instr."""
        reason = no_oracle_reason(self.arch, self._hint)
        if reason is not None:
            pytest.skip(reason)
        code, canonical = self.results[line]
        assert code is not None, f"LLVM rejects {line!r}: {canonical}"
        ins = decode(code, 0, self.arch)
        assert ins.size == len(code), f"{line}: decoded size {ins.size}, LLVM encoded {len(code)} bytes ({code.hex()})"
        assert ins.words == struct.unpack(f"<{len(code) // 4}I", code)
        text = format_instr(ins)
        assert norm(text) == canonical, f"{code.hex()}: we print {text!r}, LLVM prints {canonical!r}"
        return ins


def encoding_mnemonic(ops, family: str, op: int, name: str, promoted_below: int) -> str:
    """The mnemonic that selects a VALU instruction's encoding: LLVM's suffix (_e32 / _e64), and _e64 for the VOP3
    form of a VOP1 / VOP2 / VOPC opcode (below `promoted_below`) that LLVM prints without a suffix."""
    mn = name + ops.encoding_suffix(family, op)
    if family == "VOP3" and op < promoted_below and name in ops.NO_SUFFIX:
        mn = name + "_e64"  # printed without the suffix, but only the suffix selects the encoding
    return mn


def table_cases(tables: dict, families, family_of: Callable[[str, int], str], representatives) -> list:
    """pytest params (line, family, op, mnemonic) for every representative line (`representatives(table, op,
    name, shape)`) of every opcode in the `families` tables; `family_of(table, op)` is the family the decoder
    reports (a VOP3 table entry may decode as VOP3SD / VOP3B...)."""
    cases = []
    for table in families:
        for op, (name, shape) in sorted(tables[table].items()):
            for i, line in enumerate(representatives(table, op, name, shape)):
                cases.append(pytest.param(line, family_of(table, op), op, name, id=f"{table}-{name}-{i}"))
    return cases


# ---------------------------------------------------------------------------------------------------------
# operand text of representative lines

def vgprs(n: int, w, prefix: str = "v") -> str:
    """Register n (a range for width w > 1; "h": the low half of a true16 VGPR), VGPRs unless `prefix` says."""
    if w == "h":
        return f"{prefix}{n}.l"
    return f"{prefix}{n}" if w == 1 else f"{prefix}[{n}:{n + w - 1}]"


def sgprs(n: int, w: int) -> str:
    return f"s{n}" if w == 1 else f"s[{n}:{n + w - 1}]"


class Regs:
    """Hands out distinct registers from `start` upwards so each operand of a line is recognisable;
    `even_tuples`: tuples start at an even register, as gfx90a+ requires."""

    def __init__(self, start: int, even_tuples: bool = False):
        self.next, self.even_tuples = start, even_tuples

    def __call__(self, w, prefix: str = "v") -> str:
        if self.even_tuples and w > 1:
            self.next += self.next & 1
        text = vgprs(self.next, w, prefix)
        self.next += dwords(w)
        return text


def flat_operand_lines(family: str, name: str, shape: str, returns: str) -> list[str]:
    """Operand forms of a FLAT / GLOBAL / SCRATCH instruction, one per address form (FLAT: a VGPR pair; GLOBAL: a
    VGPR pair or a VGPR offset with an SGPR pair; SCRATCH: a VGPR or an SGPR): loads with their destination,
    stores with their data, atomics without and with the return (`returns`: the modifier asking for it),
    *_load_lds_* with neither, *_addtid_* without an address."""
    rw, (w,) = parse_shape(shape)
    atomic, load = "_atomic_" in name, "load" in name and "_atomic_" not in name
    if "addtid" in name:
        return [f"{vgprs(1, rw or w)}, off"]
    if family == "SCRATCH":
        forms = [("v5", "off"), ("off", "s2")]
    elif family == "GLOBAL":
        forms = [("v[6:7]", "off"), ("v5", "s[2:3]")]
    else:
        forms = [("v[6:7]", None)]
    lines = []
    for vaddr, saddr in forms:
        tail = [saddr] if saddr else []
        if "_load_lds_" in name:
            lines.append(", ".join([vaddr] + tail))
        elif load:
            lines.append(", ".join([vgprs(10, rw), vaddr] + tail))
        else:
            lines.append(", ".join([vaddr, vgprs(10, w)] + tail))
            if atomic:
                lines.append(", ".join([vgprs(20, rw), vaddr, vgprs(10, w)] + tail) + f" {returns}")
    return lines


# ---------------------------------------------------------------------------------------------------------
# compiled kernels: the IR both architectures compile (each test module adds its own) and the listing check

KERNELS = {
    "vadd": """
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()
define amdgpu_kernel void @vadd(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %c, i32 %n) {
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %gid = call i32 @llvm.amdgcn.workgroup.id.x()
  %base = mul i32 %gid, 256
  %i = add i32 %base, %tid
  %ok = icmp ult i32 %i, %n
  br i1 %ok, label %body, label %done
body:
  %pa = getelementptr float, ptr addrspace(1) %a, i32 %i
  %pb = getelementptr float, ptr addrspace(1) %b, i32 %i
  %pc = getelementptr float, ptr addrspace(1) %c, i32 %i
  %x = load float, ptr addrspace(1) %pa
  %y = load float, ptr addrspace(1) %pb
  %s = fadd float %x, %y
  store float %s, ptr addrspace(1) %pc
  br label %done
done:
  ret void
}
""",
    "divloop": """
declare i32 @llvm.amdgcn.workitem.id.x()
define amdgpu_kernel void @divloop(ptr addrspace(1) %out, i32 %n) {
entry:
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %lim = and i32 %tid, 15
  %any = icmp sgt i32 %lim, 0
  br i1 %any, label %loop, label %exit
loop:
  %i = phi i32 [0, %entry], [%i1, %loop]
  %acc = phi float [0.0, %entry], [%acc1, %loop]
  %f = sitofp i32 %i to float
  %m = fmul float %f, %f
  %acc1 = fadd float %acc, %m
  %i1 = add i32 %i, 1
  %c = icmp slt i32 %i1, %lim
  br i1 %c, label %loop, label %exit
exit:
  %r = phi float [0.0, %entry], [%acc1, %loop]
  %p = getelementptr float, ptr addrspace(1) %out, i32 %tid
  store float %r, ptr addrspace(1) %p
  ret void
}
""",
    "ldsrev": """
@lds = internal addrspace(3) global [256 x i32] poison, align 4
declare i32 @llvm.amdgcn.workitem.id.x()
declare void @llvm.amdgcn.s.barrier()
define amdgpu_kernel void @ldsrev(ptr addrspace(1) %p) {
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %gp = getelementptr i32, ptr addrspace(1) %p, i32 %tid
  %v = load i32, ptr addrspace(1) %gp
  %lp = getelementptr [256 x i32], ptr addrspace(3) @lds, i32 0, i32 %tid
  store i32 %v, ptr addrspace(3) %lp
  fence syncscope("workgroup") release
  call void @llvm.amdgcn.s.barrier()
  fence syncscope("workgroup") acquire
  %r = sub i32 255, %tid
  %lp2 = getelementptr [256 x i32], ptr addrspace(3) @lds, i32 0, i32 %r
  %w = load i32, ptr addrspace(3) %lp2
  store i32 %w, ptr addrspace(1) %gp
  ret void
}
""",
    "mixed": """
declare i32 @llvm.amdgcn.workitem.id.x()
define amdgpu_kernel void @mixed(ptr addrspace(1) %p, ptr addrspace(1) %h, ptr addrspace(1) %q, i64 %k) {
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %ph = getelementptr <2 x half>, ptr addrspace(1) %h, i32 %tid
  %x = load <2 x half>, ptr addrspace(1) %ph
  %y = fmul <2 x half> %x, %x
  %z = fadd <2 x half> %y, <half 1.0, half 2.0>
  store <2 x half> %z, ptr addrspace(1) %ph
  %s = extractelement <2 x half> %x, i32 1
  %s2 = fadd half %s, 0xH3C00
  %sf = fpext half %s2 to float
  %d = fpext float %sf to double
  %d2 = fmul double %d, %d
  %pq = getelementptr double, ptr addrspace(1) %q, i32 %tid
  store double %d2, ptr addrspace(1) %pq
  %old = atomicrmw add ptr addrspace(1) %p, i32 1 seq_cst
  %o64 = zext i32 %old to i64
  %m = mul i64 %o64, %k
  %pp = getelementptr i64, ptr addrspace(1) %p, i64 %m
  store i64 %m, ptr addrspace(1) %pp
  ret void
}
""",
}


def listing_instructions(listing: str, name: str) -> list[str]:
    """Instruction lines of the kernel in an assembly listing (labels, directives, comments dropped)."""
    out, inside = [], False
    for line in listing.splitlines():
        line = line.split(";")[0].strip()
        if line == f"{name}:":
            inside = True
        elif line.startswith(".Lfunc_end"):
            break
        elif inside and line and not line.startswith(".") and not line.endswith(":"):
            out.append(norm(line))
    return out


def assert_decodes_like_listing(program: list[Instr], text: bytes, expected: list[str], padding: tuple) -> int:
    """Every instruction of `program` (the decoded `text`) has a known mnemonic and prints as the listing's
    (`expected`) next instruction, a branch pointing into the code where the listing names a label; instructions
    with a `padding` mnemonic may stand between them (alignment and end-of-code padding are not in the listing).
    Returns how many listing instructions matched (all of them)."""
    assert all(ins.mnemonic is not None for ins in program), [format_instr(i) for i in program if not i.mnemonic]
    j = 0
    for ins in program:
        mine = norm(format_instr(ins))
        if j < len(expected) and mine.split()[0] == expected[j].split()[0]:
            theirs = expected[j]
            if ins.family == "SOPP" and ins.shape == "br":  # the listing names the target with a label
                target = ins.pc + 4 + 4 * ins.fields["simm16"] - (0x40000 if ins.fields["simm16"] & 0x8000 else 0)
                assert 0 <= target <= len(text) and theirs.split()[1].startswith(".L"), (mine, theirs)
            else:
                assert mine == theirs, f"at 0x{ins.pc:x}: we print {mine!r}, the listing has {theirs!r}"
            j += 1
        else:
            assert ins.mnemonic in padding, f"at 0x{ins.pc:x}: {mine!r}, listing: {expected[j:j + 2]}"
    assert j == len(expected), f"listing instructions not matched: {expected[j:]}"
    return j


# ---------------------------------------------------------------------------------------------------------
# unknown opcodes and garbage

def assert_unknown_opcodes_decode(unknown, arch: str):
    """Each (code, family, op, size) decodes to that family, opcode and size with mnemonic None, and prints as
    its raw dwords."""
    for code, family, op, size in unknown:
        ins = decode(code, 0, arch)
        assert (ins.family, ins.op, ins.size, ins.mnemonic) == (family, op, size, None), format_instr(ins)
        assert format_instr(ins).startswith(".long 0x")


def assert_random_words_decode_or_raise(arch: str, seed: int):
    """20000 random 3-dword sequences each decode (and print) or raise DecodeError; most decode."""
    rng = random.Random(seed)
    decoded = 0
    for _ in range(20000):
        code = struct.pack("<3I", *(rng.getrandbits(32) for _ in range(3)))
        try:
            ins = decode(code, 0, arch)
        except DecodeError:
            continue
        assert 4 <= ins.size <= 12 and isinstance(format_instr(ins), str)
        decoded += 1
    assert decoded > 15000
