"""AMDGPU HSA code objects: load the ELF, find the kernels, lay them out as one loadable image.

`CodeObject.from_bytes(elf)` accepts what llvmlite emits (ET_REL, relocatable) and what ld.lld links
(ET_DYN, a .hsaco). For each kernel it exposes a `Kernel`: the 64-byte kernel descriptor (the `<name>.kd`
symbol, decoded with the field tables below), the kernel's machine code (the function symbol's bytes) and
its entry from the NT_AMDGPU_METADATA note (a msgpack map, decoded by `unpack_msgpack` here).

The image
---------
`CodeObject.image(base)` returns one contiguous byte string that the runtime copies once into GPU memory
at virtual address `base` (a multiple of `image_alignment`, at least 256). Every kernel's descriptor is at
`base + kernel.descriptor_offset`, its first instruction at `base + kernel.code_offset`
(= descriptor address + kernel_code_entry_byte_offset, a multiple of 256, so COMPUTE_PGM_LO/HI can hold
`address >> 8`). Layout:

* ET_REL (no addresses assigned yet): the allocated sections are placed in three groups, each section at
  its own alignment: first the read-only data (`.rodata` with every descriptor, 64-byte aligned, and
  `.note`), then the executable sections (`.text`, at least 256-byte aligned; LLVM aligns each kernel to
  256 inside it), then writable data (`.data`; `.bss` as zeros). The size is rounded up to 256. So, as
  with lld, the code follows the descriptors and the entry offsets are positive.
* ET_DYN (linked): image offset = the ELF virtual address; every allocated section sits at its `sh_addr`
  and gaps are zero. This is the linked object as a loader would map it at `base`.

Relocations are applied in the image: for ET_REL the static ones (in practice the single `R_AMDGPU_REL64`
in `.rela.rodata` that sets each descriptor's kernel_code_entry_byte_offset = S + A - P, i.e. function
address - descriptor address; `.rela.text` REL32_LO/HI pairs from calls are handled the same way); for
ET_DYN only the dynamic ones (allocated RELA sections, e.g. R_AMDGPU_RELATIVE64). PC-relative results do
not depend on `base`; absolute ones (ABS64, RELATIVE64, ...) do, which is why `image` takes it. Descriptors
and code exposed on `Kernel` are those of the image at base 0.

Errors are ValueError with a readable message: not an ELF, not 64-bit little-endian, a machine other than
EM_AMDGPU (224), not an HSA object, truncated sections, an unknown relocation or undefined symbol, a
descriptor whose entry is not 256-byte aligned, and an unknown kernel name (listing the available ones).
"""
from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field
from typing import Any, Iterable

from elftools.common.exceptions import ELFError
from elftools.construct.core import ConstructError
from elftools.elf.elffile import ELFFile

EM_AMDGPU = 224
ELFOSABI_AMDGPU_HSA = 64
ELFOSABI_NAMES = {0: "SYSV", 64: "AMDGPU_HSA", 65: "AMDGPU_PAL", 66: "AMDGPU_MESA3D"}
ET_REL, ET_DYN = 1, 3
NT_AMDGPU_METADATA = 32
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 0x1, 0x2, 0x4
SHN_UNDEF, SHN_ABS = 0, 0xFFF1
KD_SIZE = 64
CODE_ALIGN = 256  # COMPUTE_PGM_LO/HI hold the entry address >> 8
# The largest loaded image accepted: far above any kernel's, low enough that a corrupt section size or address is
# an error rather than an attempt to allocate it.
MAX_IMAGE_SIZE = 1 << 30

# ---------------------------------------------------------------------------------------------------
# kernel descriptor (HARDWARE_FACTS 4.4, LLVM AMDHSAKernelDescriptor.h)

# (name, byte offset, struct format)
KD_FIELDS: tuple[tuple[str, int, str], ...] = (
    ("group_segment_fixed_size", 0, "<I"),
    ("private_segment_fixed_size", 4, "<I"),
    ("kernarg_size", 8, "<I"),
    ("kernel_code_entry_byte_offset", 16, "<q"),
    ("compute_pgm_rsrc3", 44, "<I"),
    ("compute_pgm_rsrc1", 48, "<I"),
    ("compute_pgm_rsrc2", 52, "<I"),
    ("kernel_code_properties", 56, "<H"),
    ("kernarg_preload", 58, "<H"),
)
# bytes 12-15, 24-43 and 60-63 are reserved (not checked: later code object versions may use them)

# (name, source field, hi bit, lo bit)
KD_BITFIELDS: tuple[tuple[str, str, int, int], ...] = (
    ("enable_sgpr_private_segment_buffer", "kernel_code_properties", 0, 0),
    ("enable_sgpr_dispatch_ptr", "kernel_code_properties", 1, 1),
    ("enable_sgpr_queue_ptr", "kernel_code_properties", 2, 2),
    ("enable_sgpr_kernarg_segment_ptr", "kernel_code_properties", 3, 3),
    ("enable_sgpr_dispatch_id", "kernel_code_properties", 4, 4),
    ("enable_sgpr_flat_scratch_init", "kernel_code_properties", 5, 5),
    ("enable_sgpr_private_segment_size", "kernel_code_properties", 6, 6),
    ("wavefront_size32", "kernel_code_properties", 10, 10),
    ("uses_dynamic_stack", "kernel_code_properties", 11, 11),
    ("kernarg_preload_length", "kernarg_preload", 6, 0),
    ("kernarg_preload_offset", "kernarg_preload", 15, 7),
    # COMPUTE_PGM_RSRC2: the same bits on gfx11 and gfx9 (HARDWARE_FACTS 4.2)
    ("enable_private_segment", "compute_pgm_rsrc2", 0, 0),
    ("user_sgpr_count", "compute_pgm_rsrc2", 5, 1),
    ("enable_trap_handler", "compute_pgm_rsrc2", 6, 6),
    ("enable_sgpr_workgroup_id_x", "compute_pgm_rsrc2", 7, 7),
    ("enable_sgpr_workgroup_id_y", "compute_pgm_rsrc2", 8, 8),
    ("enable_sgpr_workgroup_id_z", "compute_pgm_rsrc2", 9, 9),
    ("enable_sgpr_workgroup_info", "compute_pgm_rsrc2", 10, 10),
    ("enable_vgpr_workitem_id", "compute_pgm_rsrc2", 12, 11),
)
_FLAGS = {name for name, _, hi, lo in KD_BITFIELDS if hi == lo}

# User SGPRs from s0 up, in this fixed order, each present when its descriptor flag is set (facts 4.5): (what, flag,
# SGPRs, whether the value is a 64-bit address). The V# and flat scratch init are not plain addresses (and not used on
# architected-flat-scratch targets); kernarg preloading follows them (copies of kernarg dwords: data).
USER_SGPRS: tuple[tuple[str, str, int, bool], ...] = (
    ("private_segment_buffer", "enable_sgpr_private_segment_buffer", 4, False),
    ("dispatch_ptr", "enable_sgpr_dispatch_ptr", 2, True),
    ("queue_ptr", "enable_sgpr_queue_ptr", 2, True),
    ("kernarg_segment_ptr", "enable_sgpr_kernarg_segment_ptr", 2, True),
    ("dispatch_id", "enable_sgpr_dispatch_id", 2, False),
    ("flat_scratch_init", "enable_sgpr_flat_scratch_init", 2, False),
    ("private_segment_size", "enable_sgpr_private_segment_size", 1, False),
)


def user_sgpr_layout(descriptor: dict) -> list[tuple[str, int, int, bool]]:
    """(what, first SGPR, SGPRs, is an address) of each user SGPR item the decoded descriptor enables, in order."""
    out, sgpr = [], 0
    for what, flag, n, is_address in USER_SGPRS:
        if descriptor.get(flag):
            out.append((what, sgpr, n, is_address))
            sgpr += n
    return out


def decode_descriptor(raw: bytes) -> dict[str, int | bool]:
    """Every field of a 64-byte kernel descriptor by name (flags as bool). Also usable on a descriptor read
    back from GPU memory (the AQL path)."""
    raw = bytes(raw)
    if len(raw) != KD_SIZE:
        raise ValueError(f"a kernel descriptor is {KD_SIZE} bytes, not {len(raw)}")
    out: dict[str, int | bool] = {name: struct.unpack_from(fmt, raw, off)[0] for name, off, fmt in KD_FIELDS}
    for name, src, hi, lo in KD_BITFIELDS:
        value = (out[src] >> lo) & ((1 << (hi - lo + 1)) - 1)
        out[name] = bool(value) if name in _FLAGS else value
    return out


# ---------------------------------------------------------------------------------------------------
# msgpack (only decoding: the NT_AMDGPU_METADATA note)


def _hashable(x) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return True


class _Msgpack:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError(f"msgpack: truncated at byte {self.pos} (need {n} more)")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def str_(self, n: int) -> str:
        raw = self.take(n)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"msgpack: string at byte {self.pos - n} is not UTF-8") from None

    def array(self, n: int) -> list:
        return [self.value() for _ in range(n)]

    def map(self, n: int) -> dict:
        out = {}
        for _ in range(n):
            key = self.value()
            if isinstance(key, list):
                key = tuple(key)
            if isinstance(key, dict) or (isinstance(key, tuple) and not _hashable(key)):
                raise ValueError(f"msgpack: a map key at byte {self.pos} is a map (keys are scalars)")
            out[key] = self.value()
        return out

    def ext(self, n: int) -> tuple[int, bytes]:
        kind = self.unpack(">b")
        return kind, self.take(n)

    def value(self) -> Any:
        b = self.take(1)[0]
        if b <= 0x7F:
            return b
        if b >= 0xE0:
            return b - 0x100
        if 0x80 <= b <= 0x8F:
            return self.map(b & 0x0F)
        if 0x90 <= b <= 0x9F:
            return self.array(b & 0x0F)
        if 0xA0 <= b <= 0xBF:
            return self.str_(b & 0x1F)
        simple = {0xC0: None, 0xC2: False, 0xC3: True}
        if b in simple:
            return simple[b]
        sized = {
            0xC4: (">B", self.take), 0xC5: (">H", self.take), 0xC6: (">I", self.take),
            0xC7: (">B", self.ext), 0xC8: (">H", self.ext), 0xC9: (">I", self.ext),
            0xD9: (">B", self.str_), 0xDA: (">H", self.str_), 0xDB: (">I", self.str_),
            0xDC: (">H", self.array), 0xDD: (">I", self.array),
            0xDE: (">H", self.map), 0xDF: (">I", self.map),
        }
        if b in sized:
            fmt, read = sized[b]
            result = read(self.unpack(fmt))
            return bytes(result) if b <= 0xC6 else result
        scalars = {0xCA: ">f", 0xCB: ">d", 0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q",
                   0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q"}
        if b in scalars:
            return self.unpack(scalars[b])
        fixext = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}
        if b in fixext:
            return self.ext(fixext[b])
        raise ValueError(f"msgpack: reserved type byte 0x{b:02x} at byte {self.pos - 1}")


def unpack_msgpack(data: bytes) -> Any:
    """Decode one msgpack object (maps -> dict, arrays -> list, str -> str, bin -> bytes, ext -> (type, bytes))."""
    reader = _Msgpack(bytes(data))
    value = reader.value()
    if reader.pos != len(reader.data):
        raise ValueError(f"msgpack: {len(reader.data) - reader.pos} trailing bytes after the object")
    return value


# ---------------------------------------------------------------------------------------------------
# kernels


@dataclass(frozen=True)
class KernelArg:
    """One entry of the metadata `.args` list (explicit or hidden)."""

    offset: int
    size: int
    value_kind: str  # global_buffer, by_value, hidden_block_count_x, hidden_group_size_x, ...
    name: str | None = None
    address_space: str | None = None
    metadata: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def hidden(self) -> bool:
        return self.value_kind.startswith("hidden_")


@dataclass(frozen=True)
class Kernel:
    """One kernel: its descriptor fields (decoded), code, place in the image and metadata."""

    name: str
    descriptor_offset: int  # image offset of the 64-byte descriptor
    code_offset: int  # image offset of the first instruction (= descriptor_offset + entry offset)
    descriptor: bytes = field(repr=False)  # the 64 raw bytes as in the image (entry offset relocated)
    code: bytes = field(repr=False)  # the function's machine code (symbol size bytes)
    # descriptor fields (KD_FIELDS)
    group_segment_fixed_size: int = 0
    private_segment_fixed_size: int = 0
    kernarg_size: int = 0
    kernel_code_entry_byte_offset: int = 0
    compute_pgm_rsrc3: int = 0
    compute_pgm_rsrc1: int = 0
    compute_pgm_rsrc2: int = 0
    kernel_code_properties: int = 0
    kernarg_preload: int = 0
    # decoded bits (KD_BITFIELDS)
    enable_sgpr_private_segment_buffer: bool = False
    enable_sgpr_dispatch_ptr: bool = False
    enable_sgpr_queue_ptr: bool = False
    enable_sgpr_kernarg_segment_ptr: bool = False
    enable_sgpr_dispatch_id: bool = False
    enable_sgpr_flat_scratch_init: bool = False
    enable_sgpr_private_segment_size: bool = False
    wavefront_size32: bool = False
    uses_dynamic_stack: bool = False
    kernarg_preload_length: int = 0
    kernarg_preload_offset: int = 0
    enable_private_segment: bool = False
    user_sgpr_count: int = 0
    enable_trap_handler: bool = False
    enable_sgpr_workgroup_id_x: bool = False
    enable_sgpr_workgroup_id_y: bool = False
    enable_sgpr_workgroup_id_z: bool = False
    enable_sgpr_workgroup_info: bool = False
    enable_vgpr_workitem_id: int = 0
    # NT_AMDGPU_METADATA
    args: tuple[KernelArg, ...] = ()
    metadata: dict = field(default_factory=dict, repr=False, compare=False)  # the raw kernel map

    @property
    def wavefront_size(self) -> int:
        return int(self.metadata.get(".wavefront_size", 32 if self.wavefront_size32 else 64))

    @property
    def kernarg_segment_size(self) -> int:
        return int(self.metadata.get(".kernarg_segment_size", self.kernarg_size))

    @property
    def kernarg_segment_align(self) -> int:
        return int(self.metadata.get(".kernarg_segment_align", 16))

    @property
    def sgpr_count(self) -> int | None:
        return self.metadata.get(".sgpr_count")

    @property
    def vgpr_count(self) -> int | None:
        return self.metadata.get(".vgpr_count")

    @property
    def hidden_args(self) -> dict[str, KernelArg]:
        """The hidden (implicit) arguments by value kind, e.g. hidden_block_count_x -> its KernelArg."""
        return {a.value_kind: a for a in self.args if a.hidden}

    @property
    def explicit_args(self) -> tuple[KernelArg, ...]:
        return tuple(a for a in self.args if not a.hidden)


def _args(kernel_md: dict) -> tuple[KernelArg, ...]:
    out = []
    for i, a in enumerate(kernel_md.get(".args", ()) or ()):
        if not isinstance(a, dict) or not {".offset", ".size", ".value_kind"} <= a.keys():
            raise ValueError(f"metadata: argument {i} of {kernel_md.get('.name')!r} lacks .offset/.size/.value_kind")
        out.append(KernelArg(int(a[".offset"]), int(a[".size"]), str(a[".value_kind"]), a.get(".name"),
                             a.get(".address_space"), a))
    return tuple(out)


# ---------------------------------------------------------------------------------------------------
# relocations (LLVM AMDGPUUsage, "AMDGPU ELF Relocation Records")

R_AMDGPU = {0: "NONE", 1: "ABS32_LO", 2: "ABS32_HI", 3: "ABS64", 4: "REL32", 5: "REL64", 6: "ABS32",
            7: "GOTPCREL", 8: "GOTPCREL32_LO", 9: "GOTPCREL32_HI", 10: "REL32_LO", 11: "REL32_HI",
            13: "RELATIVE64", 16: "REL16"}
_SUPPORTED = {"NONE", "ABS32_LO", "ABS32_HI", "ABS64", "REL32", "REL64", "ABS32", "REL32_LO", "REL32_HI",
              "RELATIVE64", "REL16"}
_M32, _M64 = (1 << 32) - 1, (1 << 64) - 1


@dataclass(frozen=True)
class _Reloc:
    kind: str
    place: int  # image offset
    symbol: int  # image offset, or an absolute value when `absolute`
    absolute: bool
    addend: int


def _apply(img: bytearray, relocs: Iterable[_Reloc], base: int) -> None:
    for r in relocs:
        p = base + r.place
        s = r.symbol if r.absolute else base + r.symbol
        a = r.addend
        k = r.kind
        if k == "NONE":
            continue
        if k in ("ABS64", "REL64", "RELATIVE64"):
            v = {"ABS64": s + a, "REL64": s + a - p, "RELATIVE64": base + a}[k]
            struct.pack_into("<Q", img, r.place, v & _M64)
        elif k == "REL16":
            struct.pack_into("<H", img, r.place, ((s + a - p - 4) // 4) & 0xFFFF)
        else:
            v = {"ABS32_LO": s + a, "ABS32_HI": (s + a) >> 32, "ABS32": s + a, "REL32": s + a - p,
                 "REL32_LO": s + a - p, "REL32_HI": (s + a - p) >> 32}[k]
            struct.pack_into("<I", img, r.place, v & _M32)


# ---------------------------------------------------------------------------------------------------
# the code object


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def _notes(data: bytes) -> Iterable[tuple[str, int, bytes]]:
    """(owner, type, desc) of each ELF note in a SHT_NOTE section's bytes (4-byte padding)."""
    pos = 0
    while pos + 12 <= len(data):
        namesz, descsz, ntype = struct.unpack_from("<III", data, pos)
        pos += 12
        name_end = pos + namesz
        desc_at = _align(name_end, 4)
        if desc_at + descsz > len(data):
            raise ValueError(f"note at byte {pos - 12} runs past the end of its section")
        yield data[pos:name_end].rstrip(b"\0").decode("ascii", "replace"), ntype, data[desc_at:desc_at + descsz]
        pos = _align(desc_at + descsz, 4)


class CodeObject:
    """A loaded AMDGPU HSA code object. Build with `CodeObject.from_bytes` (or `from_file`)."""

    def __init__(self, elf_bytes: bytes):
        data = bytes(elf_bytes)
        self._check_header(data)
        try:
            self._load(data)
        except (ELFError, ConstructError, struct.error) as e:
            raise ValueError(f"malformed AMDGPU ELF code object: {e}") from None
        except (IndexError, KeyError, OverflowError, TypeError, AttributeError, UnicodeError, RecursionError) as e:
            # pyelftools on a corrupt header or table field: still the file's fault, reported as such
            raise ValueError(f"malformed AMDGPU ELF code object ({type(e).__name__}: {e})") from None

    @classmethod
    def from_bytes(cls, elf_bytes: bytes) -> "CodeObject":
        return cls(elf_bytes)

    @classmethod
    def from_file(cls, path) -> "CodeObject":
        with open(path, "rb") as f:
            return cls(f.read())

    # -- parsing ------------------------------------------------------------------------------------

    @staticmethod
    def _check_header(data: bytes) -> None:
        if len(data) < 64 or data[:4] != b"\x7fELF":
            raise ValueError("not an ELF file (no \\x7fELF magic)" if data[:4] != b"\x7fELF"
                             else f"not an ELF file: {len(data)} bytes is shorter than an ELF header")
        if data[4] != 2 or data[5] != 1:
            raise ValueError("not an AMDGPU code object: expected a 64-bit little-endian ELF")
        machine = struct.unpack_from("<H", data, 18)[0]
        if machine != EM_AMDGPU:
            raise ValueError(f"not an AMDGPU code object: e_machine is {machine}, expected EM_AMDGPU ({EM_AMDGPU})")
        if data[7] != ELFOSABI_AMDGPU_HSA:
            raise ValueError(f"not an HSA code object: EI_OSABI is {data[7]} "
                             f"({ELFOSABI_NAMES.get(data[7], 'unknown')}), expected {ELFOSABI_AMDGPU_HSA} (AMDGPU_HSA)")
        etype = struct.unpack_from("<H", data, 16)[0]
        if etype not in (ET_REL, ET_DYN):
            raise ValueError(f"unsupported ELF type {etype}: expected ET_REL (1) or ET_DYN (3)")

    def _load(self, data: bytes) -> None:
        elf = ELFFile(io.BytesIO(data))
        self.elf_type = "ET_REL" if elf["e_type"] == "ET_REL" else "ET_DYN"
        self.e_flags: int = elf["e_flags"]
        self.mach: int = self.e_flags & 0xFF
        self.abi_version: int = data[8]
        self.code_object_version: int = self.abi_version + 2  # ABI version 2/3/4 = code object v4/v5/v6
        sections = list(elf.iter_sections())

        def section_bytes(i: int) -> bytes:
            sec = sections[i]
            if sec["sh_type"] == "SHT_NOBITS":
                return bytes(sec["sh_size"])
            if sec["sh_offset"] + sec["sh_size"] > len(data):
                raise ValueError(f"section {sec.name!r} runs past the end of the file (offset 0x{sec['sh_offset']:x}, "
                                 f"{sec['sh_size']} bytes, file {len(data)} bytes)")
            raw = sec.data()
            if len(raw) != sec["sh_size"]:
                raise ValueError(f"section {sec.name!r} is truncated ({len(raw)} of {sec['sh_size']} bytes)")
            return raw

        # layout: section index -> image offset
        alloc = [i for i, s in enumerate(sections) if s["sh_flags"] & SHF_ALLOC and s["sh_size"] > 0
                 and s["sh_type"] not in ("SHT_NULL",)]
        self.layout: dict[int, int] = {}
        if self.elf_type == "ET_REL":
            def group(i: int) -> int:
                flags = sections[i]["sh_flags"]
                return 1 if flags & SHF_EXECINSTR else 2 if flags & SHF_WRITE else 0

            pos = 0
            for i in sorted(alloc, key=lambda i: (group(i), i)):
                align = max(1, sections[i]["sh_addralign"])
                if group(i) == 1:
                    align = max(align, CODE_ALIGN)
                pos = _align(pos, align)
                self.layout[i] = pos
                pos += sections[i]["sh_size"]
        else:
            pos = 0
            for i in alloc:
                self.layout[i] = sections[i]["sh_addr"]
                pos = max(pos, sections[i]["sh_addr"] + sections[i]["sh_size"])
        self.image_size: int = _align(pos, CODE_ALIGN)
        if self.image_size > MAX_IMAGE_SIZE:
            raise ValueError(f"the loaded image would be {self.image_size} bytes (over {MAX_IMAGE_SIZE}): a section "
                             f"size or address is corrupt")
        self.image_alignment: int = max([CODE_ALIGN] + [sections[i]["sh_addralign"] for i in alloc])
        self.section_offsets: dict[str, int] = {sections[i].name: off for i, off in self.layout.items()}
        raw = bytearray(self.image_size)
        for i, off in self.layout.items():
            raw[off:off + sections[i]["sh_size"]] = section_bytes(i)
        self._raw_image = bytes(raw)

        def image_offset(sym, what: str) -> tuple[int, bool]:
            """(value, absolute): an image offset, or an absolute value for SHN_ABS symbols."""
            shndx = sym["st_shndx"]
            if shndx == "SHN_ABS":
                return sym["st_value"], True
            if shndx == "SHN_UNDEF" or not isinstance(shndx, int):
                raise ValueError(f"{what}: symbol {sym.name!r} is undefined ({shndx}); link the code object")
            if shndx not in self.layout:
                raise ValueError(f"{what}: symbol {sym.name!r} is in section {sections[shndx].name!r}, "
                                 f"which is not loaded")
            return self.layout[shndx] + sym["st_value"] - sections[shndx]["sh_addr"], False

        # relocations
        relocs: list[_Reloc] = []
        for sec in sections:
            if sec["sh_type"] == "SHT_REL":
                raise ValueError(f"section {sec.name!r}: REL relocations are not used by AMDGPU (expected RELA)")
            if sec["sh_type"] != "SHT_RELA":
                continue
            if self.elf_type == "ET_REL":
                target = sec["sh_info"]
                if target not in self.layout:
                    continue  # relocations of sections that are not loaded (debug info)
                place_base = self.layout[target]
            else:
                if not sec["sh_flags"] & SHF_ALLOC:
                    continue  # static relocations kept by --emit-relocs: the linker applied them already
                place_base = 0  # dynamic relocations: r_offset is a virtual address = image offset
            if sec["sh_link"] >= len(sections):
                raise ValueError(f"{sec.name}: sh_link {sec['sh_link']} names no section ({len(sections)} sections)")
            symtab = sections[sec["sh_link"]] if sec["sh_link"] else None
            if symtab is not None and not hasattr(symtab, "get_symbol"):
                raise ValueError(f"{sec.name}: sh_link names section {symtab.name!r}, which is not a symbol table")
            for rel in sec.iter_relocations():
                kind = R_AMDGPU.get(rel["r_info_type"], f"type {rel['r_info_type']}")
                if kind not in _SUPPORTED:
                    raise ValueError(f"{sec.name}: relocation R_AMDGPU_{kind} at 0x{rel['r_offset']:x} is not "
                                     f"supported by this loader (needs a GOT); link the code object")
                symbol, absolute = 0, True
                if rel["r_info_sym"] and kind != "RELATIVE64":
                    if symtab is None:
                        raise ValueError(f"{sec.name}: relocation without a symbol table")
                    symbol, absolute = image_offset(symtab.get_symbol(rel["r_info_sym"]), sec.name)
                place = place_base + rel["r_offset"]
                width = 8 if kind in ("ABS64", "REL64", "RELATIVE64") else 2 if kind == "REL16" else 4
                if not 0 <= place <= self.image_size - width:
                    raise ValueError(f"{sec.name}: relocation at 0x{rel['r_offset']:x} is outside the image")
                relocs.append(_Reloc(kind, place, symbol, absolute, rel["r_addend"]))
        self._relocs = tuple(relocs)

        # metadata note
        self.metadata: dict = {}
        for i, sec in enumerate(sections):
            if sec["sh_type"] == "SHT_NOTE":
                for owner, ntype, desc in _notes(section_bytes(i)):
                    if owner == "AMDGPU" and ntype == NT_AMDGPU_METADATA:
                        md = unpack_msgpack(desc)
                        if not isinstance(md, dict):
                            raise ValueError("NT_AMDGPU_METADATA is not a msgpack map")
                        self.metadata = md
        self.target: str | None = self.metadata.get("amdhsa.target")
        self.arch: str | None = self.target.split("--", 1)[1] if self.target and "--" in self.target else None
        kernels_md = {}
        for k in self.metadata.get("amdhsa.kernels", ()) or ():
            if isinstance(k, dict):
                kernels_md[k.get(".symbol") or f"{k.get('.name')}.kd"] = k

        # kernels: the <name>.kd descriptor symbols
        symtab = elf.get_section_by_name(".symtab") or elf.get_section_by_name(".dynsym")
        symbols = {} if symtab is None else {s.name: s for s in symtab.iter_symbols() if s.name}
        image0 = bytearray(self._raw_image)
        _apply(image0, self._relocs, 0)
        kernels = []
        for sym_name, sym in symbols.items():
            if not sym_name.endswith(".kd") or sym["st_info"]["type"] != "STT_OBJECT":
                continue
            name = sym_name[:-3]
            kd_off, absolute = image_offset(sym, f"kernel {name!r}")
            if absolute or sym["st_size"] not in (0, KD_SIZE) or kd_off + KD_SIZE > self.image_size:
                raise ValueError(f"kernel {name!r}: descriptor symbol {sym_name!r} is not a {KD_SIZE}-byte "
                                 f"object inside the loaded sections")
            desc = bytes(image0[kd_off:kd_off + KD_SIZE])
            fields = decode_descriptor(desc)
            code_off = kd_off + fields["kernel_code_entry_byte_offset"]
            if not 0 <= code_off < self.image_size:
                raise ValueError(f"kernel {name!r}: entry offset {fields['kernel_code_entry_byte_offset']} points "
                                 f"outside the image")
            if code_off % CODE_ALIGN:
                raise ValueError(f"kernel {name!r}: code at image offset 0x{code_off:x} is not "
                                 f"{CODE_ALIGN}-byte aligned (COMPUTE_PGM holds address >> 8)")
            func = symbols.get(name)
            if func is not None and func["st_info"]["type"] == "STT_FUNC":
                func_off, _ = image_offset(func, f"kernel {name!r}")
                if func_off != code_off:
                    raise ValueError(f"kernel {name!r}: descriptor entry (image 0x{code_off:x}) is not the "
                                     f"function (image 0x{func_off:x}); relocation missing?")
                size = func["st_size"]
            else:
                ends = [off + sections[i]["sh_size"] for i, off in self.layout.items()
                        if off <= code_off < off + sections[i]["sh_size"]]
                size = (ends[0] if ends else self.image_size) - code_off
            kmd = kernels_md.get(sym_name, {})
            kernels.append(Kernel(name=name, descriptor_offset=kd_off, code_offset=code_off, descriptor=desc,
                                  code=bytes(image0[code_off:code_off + size]), args=_args(kmd), metadata=kmd,
                                  **fields))
        self.kernels: tuple[Kernel, ...] = tuple(kernels)

    # -- access -------------------------------------------------------------------------------------

    @property
    def kernel_names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.kernels)

    def kernel(self, name: str) -> Kernel:
        """The kernel called `name`; ValueError listing the available kernels when there is none."""
        for k in self.kernels:
            if k.name == name:
                return k
        available = ", ".join(self.kernel_names) or "none"
        raise ValueError(f"no kernel {name!r} in this code object; available: {available}")

    def image(self, base: int = 0) -> bytes:
        """The loadable image (see the module docstring) with relocations applied for GPU address `base`."""
        if base < 0 or base % self.image_alignment:
            raise ValueError(f"image base 0x{base:x} must be a non-negative multiple of {self.image_alignment}")
        img = bytearray(self._raw_image)
        _apply(img, self._relocs, base)
        return bytes(img)

    def __repr__(self) -> str:
        return (f"CodeObject({self.elf_type}, target={self.target!r}, kernels={list(self.kernel_names)}, "
                f"image_size={self.image_size})")
