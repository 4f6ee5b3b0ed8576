"""Kernels: code objects loaded into GPU memory, and the PM4 that launches them.

`Device.load_program(code_object, name)` copies the code-object image into executable GPU memory.
`ComputeQueue.exec(program, args, global_size, local_size)` writes the kernarg segment (explicit
arguments, then the code object v5 hidden arguments), an AQL dispatch packet when the descriptor asks for
`dispatch_ptr`, and emits the SET_SH_REG sequence and DISPATCH_DIRECT a real dispatcher emits
(HARDWARE_FACTS 4.1-4.5). Nothing reaches the GPU except through those registers and memory.
"""
from __future__ import annotations

import numbers
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from .. import pm4
from ..codeobject import CodeObject, Kernel
from ..registers import LDS_GRANULE, REGS, RSRC3_REG, initiator as initiator_bits

if TYPE_CHECKING:
    from .device import Buffer, Device

# apertures the hidden private_base/shared_base arguments carry (high 32 bits; facts 1.2 on gfx9+)
SHARED_APERTURE_BASE = 1 << 48
PRIVATE_APERTURE_BASE = 2 << 48
AQL_PACKET_SIZE = 64
QUEUE_DESCRIPTOR_SIZE = 256  # an amd_queue_t-sized zeroed block for kernels that ask for queue_ptr


@dataclass
class Program:
    device: "Device"
    kernel: Kernel
    image: "Buffer"
    # every kernel of the code object as (symbol, image offset of its code, code bytes), for failure reports
    symbols: tuple[tuple[str, int, int], ...] = ()
    loaded_at: str = "unknown location"  # the user's line that loaded it

    @property
    def descriptor_va(self) -> int:
        return self.image.va + self.kernel.descriptor_offset

    @property
    def entry_va(self) -> int:
        return self.image.va + self.kernel.code_offset

    @property
    def name(self) -> str:
        return self.kernel.name


def load_program(device: "Device", code_object: bytes | CodeObject, name: str) -> Program:
    co = code_object if isinstance(code_object, CodeObject) else CodeObject.from_bytes(code_object)
    if co.arch and co.arch != device.target:
        raise ValueError(f"code object is for {co.arch}, {device.label} is {device.target}")
    kernel = co.kernel(name)
    buf = device.alloc(co.image_size, host_visible=True, name=f"code object of {name}")
    if buf.va % co.image_alignment:
        raise ValueError(f"program memory at 0x{buf.va:x} is not {co.image_alignment}-byte aligned")
    image = co.image(base=buf.va)
    buf.view[:len(image)] = memoryview(image).cast("B")
    symbols = tuple((k.name, k.code_offset, len(k.code)) for k in co.kernels)
    return Program(device, kernel, buf, symbols, loaded_at=buf.allocated_at)


GRID_LIMIT = 1 << 32  # grid sizes are 32-bit: AQL grid_size_x/y/z, DISPATCH_DIRECT dim_x/y/z


def launch_dims(size: int | Sequence[int], what: str = "size") -> tuple[int, int, int]:
    """1 to 3 positive integers below 2^32, padded with 1s; TypeError/ValueError naming `what` otherwise."""
    if type(size) is int and 1 <= size < GRID_LIMIT:  # the common case, without the numbers.Integral checks
        return size, 1, 1
    if isinstance(size, numbers.Integral):
        t = (size,)
    elif isinstance(size, (tuple, list)):
        t = tuple(size)
    else:
        raise TypeError(f"{what} must be an int or a tuple of 1 to 3 ints, got {type(size).__name__} {size!r}")
    if not 1 <= len(t) <= 3 or any(not isinstance(x, numbers.Integral) or isinstance(x, bool) for x in t):
        raise TypeError(f"{what} must be 1 to 3 integers, got {size!r}")
    if any(not 1 <= x < GRID_LIMIT for x in t):
        raise ValueError(f"{what} {size!r}: every dimension must be at least 1 and below 2**32 (grid sizes are "
                         f"32-bit in the AQL packet and in DISPATCH_DIRECT)")
    return tuple(int(x) for x in t) + (1,) * (3 - len(t))


def check_program(program, device: "Device") -> "Program":
    """`program` if `device` can run it: a Program loaded on it (or whose image is peer-mapped there) for its
    target; a foreign program would make the GPU fetch code it cannot see."""
    if not isinstance(program, Program):
        raise TypeError(f"exec: program must be a Program (Device.load_program), got {type(program).__name__}")
    if program.device is not device:
        if program.device.target != device.target:
            raise ValueError(f"exec: {program.name} was loaded on {program.device.label} ({program.device.target}); "
                             f"{device.label} is {device.target}")
        if device.gpu_id not in program.image.allocation.mapped_on:
            raise ValueError(f"exec: {program.name} was loaded on {program.device.label} and its code is not mapped "
                             f"on {device.label}; load it there (or peer-map its image with Device.map_to)")
    program.image.check_range(0, 0, f"exec of {program.name}")  # not freed
    return program


def _kernarg_bytes(kernel: Kernel, arg, index: int, value) -> bytes:
    """The bytes of one explicit argument, or TypeError/ValueError naming it (nothing is written yet)."""
    from .device import Buffer
    name = f"{kernel.name} argument {index} ({arg.name or arg.value_kind})"
    if arg.value_kind in ("global_buffer", "dynamic_shared_pointer"):
        if isinstance(value, Buffer):
            value = value.va
        elif not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise TypeError(f"{name} is a pointer: pass a Buffer or an int address, got {type(value).__name__}")
    elif arg.value_kind != "by_value":
        raise TypeError(f"{kernel.name}: argument kind {arg.value_kind!r} is not supported")
    if isinstance(value, numbers.Integral):
        v = int(value)
        if not -(1 << (8 * arg.size - 1)) <= v < 1 << (8 * arg.size):
            raise ValueError(f"{name}: {v} does not fit in {arg.size} bytes")
        return v.to_bytes(arg.size, "little", signed=v < 0)
    if isinstance(value, numbers.Real) and arg.size in (4, 8):
        return struct.pack("<f" if arg.size == 4 else "<d", float(value))
    raise TypeError(f"{name} takes {arg.size} bytes by value: an int{' or a float' if arg.size in (4, 8) else ''}, "
                    f"got {type(value).__name__} {value!r}")


@dataclass
class Launch:
    """What one exec computes before emitting packets."""

    global_size: tuple[int, int, int]
    local_size: tuple[int, int, int]
    ndims: int

    @property
    def groups(self) -> tuple[int, int, int]:
        return tuple(-(-g // l) for g, l in zip(self.global_size, self.local_size))

    @property
    def remainder(self) -> tuple[int, int, int]:
        return tuple(g % l for g, l in zip(self.global_size, self.local_size))

    @property
    def partial(self) -> bool:
        return any(self.remainder)


def write_kernargs(kernel: Kernel, view, args: Sequence, launch: Launch) -> None:
    """Explicit arguments in order (buffers as pointers, ints by size), then the hidden arguments."""
    explicit = kernel.explicit_args
    if len(args) != len(explicit):
        raise TypeError(f"{kernel.name} takes {len(explicit)} arguments ({', '.join(a.name or a.value_kind for a in explicit)}),"
                        f" got {len(args)}")
    for index, (arg, value) in enumerate(zip(explicit, args)):
        raw = _kernarg_bytes(kernel, arg, index, value)
        view[arg.offset:arg.offset + arg.size] = memoryview(raw).cast("B")
    groups, remainder = launch.groups, launch.remainder  # (properties: computed once here)
    hidden = {
        "hidden_block_count_x": groups[0], "hidden_block_count_y": groups[1],
        "hidden_block_count_z": groups[2],
        "hidden_group_size_x": launch.local_size[0], "hidden_group_size_y": launch.local_size[1],
        "hidden_group_size_z": launch.local_size[2],
        "hidden_remainder_x": remainder[0], "hidden_remainder_y": remainder[1],
        "hidden_remainder_z": remainder[2],
        "hidden_grid_dims": launch.ndims,
        "hidden_private_base": PRIVATE_APERTURE_BASE >> 32, "hidden_shared_base": SHARED_APERTURE_BASE >> 32,
    }
    for arg in kernel.args:
        if arg.hidden:  # everything else hidden (offsets, printf, hostcall, heap, queue) stays zero
            raw = hidden.get(arg.value_kind, 0).to_bytes(arg.size, "little")
            view[arg.offset:arg.offset + arg.size] = memoryview(raw).cast("B")


def aql_packet(kernel: Kernel, descriptor_va: int, kernarg_va: int, launch: Launch) -> bytes:
    """hsa_kernel_dispatch_packet_t (facts 4.6): what code reading dispatch_ptr expects."""
    header = 2 | 1 << 8 | 2 << 9 | 2 << 11  # KERNEL_DISPATCH, barrier, system acquire/release scopes
    return struct.pack("<HHHHHHIIIIIQQQQ", header, launch.ndims, *launch.local_size, 0, *launch.global_size,
                       kernel.private_segment_fixed_size, kernel.group_segment_fixed_size, descriptor_va,
                       kernarg_va, 0, 0)


def user_sgprs(kernel: Kernel, dispatch_ptr: int, queue_ptr: int, kernarg_ptr: int, dispatch_id: int) -> list[int]:
    """USER_DATA values in the order of facts 4.5, padded to the descriptor's user SGPR count."""
    out: list[int] = []
    if kernel.enable_sgpr_private_segment_buffer:
        raise ValueError(f"{kernel.name}: a private segment buffer V# is not used on architected-flat-scratch targets")
    for enabled, value in ((kernel.enable_sgpr_dispatch_ptr, dispatch_ptr), (kernel.enable_sgpr_queue_ptr, queue_ptr),
                           (kernel.enable_sgpr_kernarg_segment_ptr, kernarg_ptr),
                           (kernel.enable_sgpr_dispatch_id, dispatch_id)):
        if enabled:
            out += [value & 0xFFFFFFFF, value >> 32]
    if kernel.enable_sgpr_flat_scratch_init:
        raise ValueError(f"{kernel.name}: flat scratch init is not used on architected-flat-scratch targets")
    if kernel.enable_sgpr_private_segment_size:
        out.append(kernel.private_segment_fixed_size)
    if kernel.kernarg_preload_length:
        raise ValueError(f"{kernel.name}: kernarg preloading is not supported by this runtime yet")
    if len(out) > kernel.user_sgpr_count or kernel.user_sgpr_count > 16:
        raise ValueError(f"{kernel.name}: {len(out)} user SGPRs needed, descriptor declares {kernel.user_sgpr_count}")
    return out + [0] * (kernel.user_sgpr_count - len(out))  # LLVM pads (gfx11 wave32 init16 bug): zeros


# COMPUTE_TMPRING_SIZE (facts 4.3): WAVES[11:0]; WAVESIZE in 256-byte granules at [26:12] on gfx11,
# 1 KiB granules at [24:12] on gfx9. Per-wave size = per-lane private bytes x 64 lanes (sized for wave64).
SCRATCH_WAVES = 1024
SCRATCH_LANES = 64


def scratch_layout(private_bytes: int, family: str) -> tuple[int, int]:
    """(TMPRING_SIZE value, scratch bytes to allocate) for a per-lane private segment of `private_bytes`."""
    granule = 256 if family == "gfx11" else 1024
    wavesize = -(-private_bytes * SCRATCH_LANES // granule)
    limit = (1 << 15) - 1 if family == "gfx11" else (1 << 13) - 1
    if wavesize > limit:
        raise ValueError(f"private segment of {private_bytes} bytes per lane exceeds TMPRING_SIZE.WAVESIZE")
    return SCRATCH_WAVES | wavesize << 12, SCRATCH_WAVES * wavesize * granule


def dispatch_packets(program: Program, launch: Launch, user: list[int], family: str,
                     scratch: tuple[int, int] = (0, 0)) -> list[list[int]]:
    """The PM4 a dispatcher emits: cache acquire, program registers, user SGPRs, sizes, DISPATCH_DIRECT, flush.
    `scratch` is (TMPRING_SIZE, scratch base address) for kernels with a private segment."""
    k = program.kernel
    if k.uses_dynamic_stack:
        raise ValueError(f"{k.name} uses a dynamic stack: its scratch size is unknown at dispatch")
    lds_granules = -(-k.group_segment_fixed_size // LDS_GRANULE)
    rsrc2 = (k.compute_pgm_rsrc2 & ~(0x1FF << 15)) | (lds_granules & 0x1FF) << 15
    entry = program.entry_va
    threads = []
    for l, r in zip(launch.local_size, launch.remainder):
        threads.append(l | (r << 16 if launch.partial else 0))
    # With a partial group the CP launches the trailing groups with NUM_THREAD_*.PARTIAL threads.
    initiator = initiator_bits(compute_shader_en=1, force_start_at_000=1, cs_w32_en=int(k.wavefront_size32),
                               use_thread_dimensions=int(launch.partial), partial_tg_en=int(launch.partial))
    dims = launch.global_size if launch.partial else launch.groups
    cmds = [
        # gfx9 also TC_WB|TC: gfx942 has an L2 per XCC, so the previous dispatch's writes must leave its XCC's L2 and
        # this one's XCC must drop old L2 copies (facts 6.1, 6.2 multi-XCC; amdgpu's emit_mem_sync bits, 6.3)
        pm4.acquire_mem("gfx11", glk_inv=1, glv_inv=1, gl1_inv=1, glm_inv=1, glm_wb=1, glk_wb=1) if family == "gfx11"
        else pm4.acquire_mem("gfx9", sh_kcache_action_ena=1, tcl1_action_ena=1, tc_action_ena=1, tc_wb_action_ena=1),
        pm4.set_sh_reg(REGS["COMPUTE_PGM_LO"], [(entry >> 8) & 0xFFFFFFFF, (entry >> 40) & 0xFF]),
        pm4.set_sh_reg(REGS["COMPUTE_PGM_RSRC1"], [k.compute_pgm_rsrc1, rsrc2]),
        pm4.set_sh_reg(RSRC3_REG[family], [k.compute_pgm_rsrc3]),
        pm4.set_sh_reg(REGS["COMPUTE_TMPRING_SIZE"], [scratch[0]]),
        pm4.set_sh_reg(REGS["COMPUTE_DISPATCH_SCRATCH_BASE_LO"], [(scratch[1] >> 8) & 0xFFFFFFFF, scratch[1] >> 40]),
        pm4.set_sh_reg(REGS["COMPUTE_RESTART_X"], [0, 0, 0]),
    ]
    if user:
        cmds.append(pm4.set_sh_reg(REGS["COMPUTE_USER_DATA_0"], user))
    cmds += [
        pm4.set_sh_reg(REGS["COMPUTE_RESOURCE_LIMITS"], [0]),
        pm4.set_sh_reg(REGS["COMPUTE_START_X"], [0, 0, 0, *threads, 0, 0]),
        pm4.dispatch_direct(*dims, initiator),
        pm4.cs_partial_flush(),
    ]
    return cmds
