"""LDS (DS) memory instructions on gfx1100 (wave32) and gfx942 (wave64), one at a time, against a byte model of
each workgroup's LDS: loads and stores of every width (8/16-bit zero and sign extension, the d16 forms that write or
read one 16-bit half and keep the other), the two-address forms (offset0/offset1 in element units, stride64) and
LDS atomics, with their addresses drawn where the address arithmetic matters.

What the references follow (RDNA3 ISA guide "Data Share Operations", CDNA3 ISA "LDS"):

* The LDS address of a lane is ADDR (the VGPR) + the instruction's unsigned offset, summed in a 32-bit adder:
  ADDR = 0xFFFFFFE0 with offset:64 reads byte 0x20. LLVM relies on it: on gfx7 and later
  (GCNSubtarget::hasUsableDSOffset, "on SI the offset uses a 16-bit adder and does not always wrap properly") it
  folds constants into the offset field over bases that may be "negative", and loop strength reduction makes such
  bases (rocPRIM's raking block reduce over bytes on gfx1100: `v_subrev_nc_u32 v2, 32, v0` then
  `ds_load_u8 v3, v2 offset:64` in a loop; issue 33).
* Two-address forms: address_n = ADDR + offset_n * element size (* 64 for stride64), in the same 32-bit adder.
* The sum is checked against the workgroup's LDS allocation: a load outside reads 0, a store or atomic outside is
  dropped (and never lands in another workgroup's LDS).
* Sub-dword loads zero-extend (u8/u16) or sign-extend (i8/i16) to 32 bits; `_d16` loads write bits 15:0 and keep
  31:16, `_d16_hi` write 31:16 and keep 15:0 (an i8 d16 load sign-extends to 16 bits); `_d16_hi` stores write the
  high half's low byte or half-word.
* Only active lanes (EXEC) load, store or change their destination registers.

Addresses are aligned to the access size (no unaligned-mode questions) and the lanes of a store go to distinct
addresses (no same-address ordering questions).
"""
from __future__ import annotations

import numpy as np
import pytest

import isa_harness
from isa_harness import LANES, Unimplemented, compiled, no_assembler_reason, rng
from hcqsim.shader.waves import EXEC, Waves

ARCHS = ("gfx1100", "gfx942")
CASES: list = []  # whole-wave checks with their own references: none for `python3 -m tests.isa_harness --report`
LDS_BYTES = 4096  # per workgroup
GROUPS = 2
WAVES = 4  # waves 0, 1 in workgroup 0; 2, 3 in workgroup 1
M32 = 0xFFFFFFFF
ADDR, DATA0, DATA1, DST = 2, 4, 5, 6  # the VGPRs the instructions name (pairs even: gfx942)

# mnemonic per architecture: gfx11 names, and the GFX9 names gfx942's assembler takes
NAMES = {
    "load_u8": ("ds_load_u8", "ds_read_u8"), "load_i8": ("ds_load_i8", "ds_read_i8"),
    "load_u16": ("ds_load_u16", "ds_read_u16"), "load_i16": ("ds_load_i16", "ds_read_i16"),
    "load_b32": ("ds_load_b32", "ds_read_b32"), "load_b64": ("ds_load_b64", "ds_read_b64"),
    "load_b128": ("ds_load_b128", "ds_read_b128"),
    "load_u8_d16": ("ds_load_u8_d16", "ds_read_u8_d16"), "load_u8_d16_hi": ("ds_load_u8_d16_hi", "ds_read_u8_d16_hi"),
    "load_i8_d16": ("ds_load_i8_d16", "ds_read_i8_d16"), "load_i8_d16_hi": ("ds_load_i8_d16_hi", "ds_read_i8_d16_hi"),
    "load_u16_d16": ("ds_load_u16_d16", "ds_read_u16_d16"),
    "load_u16_d16_hi": ("ds_load_u16_d16_hi", "ds_read_u16_d16_hi"),
    "store_b8": ("ds_store_b8", "ds_write_b8"), "store_b16": ("ds_store_b16", "ds_write_b16"),
    "store_b32": ("ds_store_b32", "ds_write_b32"), "store_b64": ("ds_store_b64", "ds_write_b64"),
    "store_b8_d16_hi": ("ds_store_b8_d16_hi", "ds_write_b8_d16_hi"),
    "store_b16_d16_hi": ("ds_store_b16_d16_hi", "ds_write_b16_d16_hi"),
    "load_2addr_b32": ("ds_load_2addr_b32", "ds_read2_b32"),
    "load_2addr_stride64_b32": ("ds_load_2addr_stride64_b32", "ds_read2st64_b32"),
    "load_2addr_b64": ("ds_load_2addr_b64", "ds_read2_b64"),
    "store_2addr_b32": ("ds_store_2addr_b32", "ds_write2_b32"),
    "add_u32": ("ds_add_u32", "ds_add_u32"), "add_rtn_u32": ("ds_add_rtn_u32", "ds_add_rtn_u32"),
    "max_rtn_i32": ("ds_max_rtn_i32", "ds_max_rtn_i32"),
}
# op -> (bytes accessed, kind): kind "load" (sign: bool, d16: None / "lo" / "hi"), "store" (d16_hi: bool)
LOADS = {"load_u8": (1, False, None), "load_i8": (1, True, None), "load_u16": (2, False, None),
         "load_i16": (2, True, None), "load_b32": (4, False, None), "load_b64": (8, False, None),
         "load_b128": (16, False, None), "load_u8_d16": (1, False, "lo"), "load_u8_d16_hi": (1, False, "hi"),
         "load_i8_d16": (1, True, "lo"), "load_i8_d16_hi": (1, True, "hi"), "load_u16_d16": (2, False, "lo"),
         "load_u16_d16_hi": (2, False, "hi")}
STORES = {"store_b8": (1, False), "store_b16": (2, False), "store_b32": (4, False), "store_b64": (8, False),
          "store_b8_d16_hi": (1, True), "store_b16_d16_hi": (2, True)}


def _skip(arch):
    reason = no_assembler_reason(arch)
    if reason:
        pytest.skip(reason)


def _line(arch: str, op: str, offset: str) -> str:
    name = NAMES[op][arch != "gfx1100"]
    if op in LOADS:
        n = LOADS[op][0]
        dst = f"v{DST}" if n <= 4 else f"v[{DST}:{DST + n // 4 - 1}]"
        return f"{name} {dst}, v{ADDR}{offset}"
    if op in STORES:
        n = STORES[op][0]
        src = f"v{DATA0}" if n <= 4 else f"v[{DATA0}:{DATA0 + 1}]"
        return f"{name} v{ADDR}, {src}{offset}"
    if op.startswith("load_2addr"):
        dst = f"v[{DST}:{DST + 1}]" if op.endswith("b32") else f"v[{DST}:{DST + 3}]"
        return f"{name} {dst}, v{ADDR}{offset}"
    if op == "store_2addr_b32":
        return f"{name} v{ADDR}, v{DATA0}, v{DATA1}{offset}"
    if "_rtn_" in op:
        return f"{name} v{DST}, v{ADDR}, v{DATA0}{offset}"
    return f"{name} v{ADDR}, v{DATA0}{offset}"


def _bases(r, lanes_total: int, first: int, align: int, span: int, distinct: bool) -> np.ndarray:
    """ADDR per lane, for an instruction whose lowest offset is `first` bytes and which touches `span` bytes from
    there. Two lanes in three aim at an aligned target inside the LDS (distinct targets when `distinct`: stores
    and atomics): ADDR = target - first in 32 bits, "negative" (0xFFFFFFxx) whenever the target lies below the
    offset, as in the rocPRIM case. The others aim outside: just past the end, past the end by the size of the
    LDS again (where a sum wider than 32 bits would read the next workgroup's LDS), or at the top of the 32-bit
    space (ADDR + offset = 0xFFFFFFF0...)."""
    step = -(-span // align) * align
    slots = (LDS_BYTES - span) // step + 1
    targets = (r.sample(range(slots), lanes_total) if distinct else [r.randrange(slots) for _ in range(lanes_total)])
    out = np.zeros(lanes_total, np.int64)
    for i, t in enumerate(targets):
        target = t * step
        kind = r.random()
        if kind < 0.67:
            total = target
        elif kind < 0.78:
            total = LDS_BYTES + (target % 64)
        elif kind < 0.89:
            total = LDS_BYTES + target
        else:
            total = (1 << 32) - 16 * align + target % (16 * align)
        out[i] = (total - first) & M32
    return out


def _state(arch: str, r):
    lanes = LANES[arch]
    W = Waves(WAVES, lanes, isa_harness.VGPRS, GROUPS, LDS_BYTES)
    W.group[:] = np.arange(WAVES) * GROUPS // WAVES
    W.lds[:] = np.array([r.getrandbits(8) for _ in range(GROUPS * LDS_BYTES)], np.uint8).reshape(GROUPS, LDS_BYTES)
    for reg in range(isa_harness.VGPRS):
        W.v[:, reg, :] = np.array([r.getrandbits(32) for _ in range(WAVES * lanes)], np.uint32).reshape(WAVES, lanes)
    exec_ = np.array([r.random() < 0.85 for _ in range(WAVES * lanes)]).reshape(WAVES, lanes)
    W.set_mask(slice(None), EXEC, exec_)
    return W, exec_


@pytest.fixture(scope="module", autouse=True)
def _assembled():
    """Every line of this module in one assembler run per target (one run per line costs a process each)."""
    for arch in ARCHS:
        if no_assembler_reason(arch):
            continue
        lines = [_line(arch, op, f" offset:{o}" if o else "") for op in list(LOADS) + list(STORES) for o in OFFSETS]
        lines += [_line(arch, op, f" offset:{o}" if o else "") for op in ATOMICS for o in ATOMIC_OFFSETS]
        lines += [_line(arch, op, f" offset0:{a} offset1:{b}") for op in TWO_ADDR for a, b in TWO_ADDR_OFFSETS]
        lines += [f"ds_swizzle_b32 v{DST}, v{ADDR} offset:{p}" for p in SWIZZLES]
        lines += [f"ds_{op}_b32 v{DST}, v{ADDR}, v{DATA0}" + (f" offset:{o}" if o else "")
                  for op in ("bpermute", "permute") for o in (0, 4, 8, 124, 252, 65532)]
        isa_harness.assemble_all(arch, lines)


def _run(arch, line, W):
    try:
        compiled(arch, line)(W, slice(None))
    except Unimplemented as e:
        pytest.xfail(f"unimplemented: {e}")


def _addr(base: int, offset: int) -> int:
    return (base + offset) & M32


def _read(lds: np.ndarray, g: int, a: int, n: int) -> int:
    """n bytes of workgroup g's LDS at a, little-endian; 0 when any byte is outside."""
    if a + n > LDS_BYTES:
        return 0
    return int.from_bytes(lds[g, a:a + n].tobytes(), "little")


def _write(lds: np.ndarray, g: int, a: int, value: int, n: int) -> None:
    if a + n <= LDS_BYTES:
        lds[g, a:a + n] = np.frombuffer((value & ((1 << 8 * n) - 1)).to_bytes(n, "little"), np.uint8)


def _sext(x: int, bits: int) -> int:
    return x - (1 << bits) if x >> (bits - 1) & 1 else x


OFFSETS = (0, 1, 64, 65535)


def _check(arch, W, lds_before, v_before, exec_, expect_lds, expect_v, line):
    lanes = LANES[arch]
    bad = []
    for w in range(WAVES):
        for lane in range(lanes):
            for reg, val in expect_v.get((w, lane), {}).items():
                got = int(W.v[w, reg, lane])
                if got != val:
                    bad.append(f"wave {w} lane {lane} v{reg}: {got:#010x}, expected {val:#010x} "
                               f"(ADDR {int(v_before[w, ADDR, lane]):#010x}, active {bool(exec_[w, lane])})")
    diff = np.nonzero(W.lds != expect_lds)
    for g, a in list(zip(*diff))[:5]:
        bad.append(f"LDS[{g}][{a:#x}]: {int(W.lds[g, a]):#04x}, expected {int(expect_lds[g, a]):#04x} "
                   f"(was {int(lds_before[g, a]):#04x})")
    assert not bad, f"{arch} {line!r}: {len(bad)} differences, first: " + "; ".join(bad[:6])


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("op", sorted(LOADS))
@pytest.mark.parametrize("offset", OFFSETS)
def test_load_reads_addr_plus_offset_in_32_bits_and_zero_outside(arch, op, offset):
    _skip(arch)
    n, signed, d16 = LOADS[op]
    line = _line(arch, op, f" offset:{offset}" if offset else "")
    r = rng(arch, line)
    W, exec_ = _state(arch, r)
    lanes = LANES[arch]
    W.v[:, ADDR, :] = _bases(r, WAVES * lanes, offset, n, n, False).reshape(WAVES, lanes)
    lds0, v0 = W.lds.copy(), W.v.copy()
    _run(arch, line, W)
    expect_v = {}
    for w in range(WAVES):
        for lane in range(lanes):
            if not exec_[w, lane]:
                expect_v[(w, lane)] = {DST + k: int(v0[w, DST + k, lane]) for k in range(max(1, n // 4))}
                continue
            x = _read(lds0, int(W.group[w]), _addr(int(v0[w, ADDR, lane]), offset), n)
            if n > 4:
                expect_v[(w, lane)] = {DST + k: x >> 32 * k & M32 for k in range(n // 4)}
                continue
            old = int(v0[w, DST, lane])
            if d16 is None:
                val = (_sext(x, 8 * n) if signed else x) & M32
            else:
                half = (_sext(x, 8 * n) if signed else x) & 0xFFFF
                val = (old & 0xFFFF0000) | half if d16 == "lo" else (old & 0xFFFF) | half << 16
            expect_v[(w, lane)] = {DST: val}
    _check(arch, W, lds0, v0, exec_, lds0, expect_v, line)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("op", sorted(STORES))
@pytest.mark.parametrize("offset", OFFSETS)
def test_store_writes_addr_plus_offset_in_32_bits_and_drops_outside(arch, op, offset):
    _skip(arch)
    n, d16_hi = STORES[op]
    line = _line(arch, op, f" offset:{offset}" if offset else "")
    r = rng(arch, line)
    W, exec_ = _state(arch, r)
    lanes = LANES[arch]
    W.v[:, ADDR, :] = _bases(r, WAVES * lanes, offset, n, n, True).reshape(WAVES, lanes)
    lds0, v0 = W.lds.copy(), W.v.copy()
    _run(arch, line, W)
    expect = lds0.copy()
    for w in range(WAVES):
        for lane in range(lanes):
            if exec_[w, lane]:
                data = int(v0[w, DATA0, lane]) | int(v0[w, DATA0 + 1, lane]) << 32
                if d16_hi:
                    data >>= 16
                _write(expect, int(W.group[w]), _addr(int(v0[w, ADDR, lane]), offset), data, n)
    _check(arch, W, lds0, v0, exec_, expect, {}, line)


TWO_ADDR = {"load_2addr_b32": (4, 1), "load_2addr_stride64_b32": (4, 64), "load_2addr_b64": (8, 1),
            "store_2addr_b32": (4, 1)}
TWO_ADDR_OFFSETS = ((0, 1), (16, 17), (3, 0), (1, 2))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("op", sorted(TWO_ADDR))
@pytest.mark.parametrize("offsets", TWO_ADDR_OFFSETS)
def test_two_address_forms_scale_each_offset_then_add_in_32_bits(arch, op, offsets):
    _skip(arch)
    size, stride = TWO_ADDR[op]
    line = _line(arch, op, f" offset0:{offsets[0]} offset1:{offsets[1]}")
    r = rng(arch, line)
    W, exec_ = _state(arch, r)
    lanes = LANES[arch]
    byte_offsets = tuple(o * size * stride for o in offsets)
    span = max(byte_offsets) - min(byte_offsets) + size
    bases = _bases(r, WAVES * lanes, min(byte_offsets), size, span, op.startswith("store"))
    W.v[:, ADDR, :] = bases.reshape(WAVES, lanes)
    lds0, v0 = W.lds.copy(), W.v.copy()
    _run(arch, line, W)
    expect, expect_v = lds0.copy(), {}
    ndw = size // 4
    for w in range(WAVES):
        g = int(W.group[w])
        for lane in range(lanes):
            base = int(v0[w, ADDR, lane])
            if op.startswith("load"):
                if not exec_[w, lane]:
                    expect_v[(w, lane)] = {DST + k: int(v0[w, DST + k, lane]) for k in range(2 * ndw)}
                    continue
                regs = {}
                for j, off in enumerate(byte_offsets):
                    x = _read(lds0, g, _addr(base, off), size)
                    regs.update({DST + j * ndw + k: x >> 32 * k & M32 for k in range(ndw)})
                expect_v[(w, lane)] = regs
            elif exec_[w, lane]:
                for reg, off in ((DATA0, byte_offsets[0]), (DATA1, byte_offsets[1])):
                    _write(expect, g, _addr(base, off), int(v0[w, reg, lane]), 4)
    _check(arch, W, lds0, v0, exec_, expect, expect_v, line)


ATOMIC_OFFSETS = (0, 64, 65532)
ATOMICS = {"add_u32": lambda m, d: (m + d) & M32, "add_rtn_u32": lambda m, d: (m + d) & M32,
           "max_rtn_i32": lambda m, d: max(_sext(m, 32), _sext(d, 32)) & M32}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("op", sorted(ATOMICS))
@pytest.mark.parametrize("offset", ATOMIC_OFFSETS)
def test_lds_atomic_updates_addr_plus_offset_of_its_own_workgroup(arch, op, offset):
    """An atomic at ADDR + offset (32-bit sum) changes its own workgroup's LDS and returns the old value; outside
    the allocation it changes nothing, in no workgroup (hcqsim returns 0 there, as for loads; not asserted)."""
    _skip(arch)
    line = _line(arch, op, f" offset:{offset}" if offset else "")
    r = rng(arch, line)
    W, exec_ = _state(arch, r)
    lanes = LANES[arch]
    W.v[:, ADDR, :] = _bases(r, WAVES * lanes, offset, 4, 4, True).reshape(WAVES, lanes)
    lds0, v0 = W.lds.copy(), W.v.copy()
    _run(arch, line, W)
    expect, expect_v = lds0.copy(), {}
    for w in range(WAVES):
        g = int(W.group[w])
        for lane in range(lanes):
            if not exec_[w, lane]:
                if "_rtn_" in op:
                    expect_v[(w, lane)] = {DST: int(v0[w, DST, lane])}
                continue
            a = _addr(int(v0[w, ADDR, lane]), offset)
            if a + 4 > LDS_BYTES:  # outside: what the lane returns is not documented; nothing changes
                continue
            old = _read(lds0, g, a, 4)
            _write(expect, g, a, ATOMICS[op](old, int(v0[w, DATA0, lane])), 4)
            if "_rtn_" in op:
                expect_v[(w, lane)] = {DST: old}
    _check(arch, W, lds0, v0, exec_, expect, expect_v, line)


@pytest.mark.parametrize("arch", ARCHS)
def test_rocprim_raking_byte_load_from_a_negative_base(arch):
    """The instruction of issue 33 with its operands: lanes 0..31 hold ADDR = lane - 32 (0xFFFFFFE0 ...) and
    `ds_load_u8 v6, v2 offset:64` reads byte lane + 32; rocPRIM's raking reduce summed zeros there instead."""
    _skip(arch)
    line = _line(arch, "load_u8", " offset:64")
    lanes = LANES[arch]
    W = Waves(1, lanes, isa_harness.VGPRS, 1, 128)
    W.lds[0, :] = np.arange(128, dtype=np.uint8) + 100
    W.v[0, ADDR, :] = (np.arange(lanes, dtype=np.int64) - 32) & M32
    W.set_mask(slice(None), EXEC, np.ones((1, lanes), bool))
    _run(arch, line, W)
    assert [int(x) for x in W.v[0, DST, :]] == [100 + lane + 32 for lane in range(lanes)]


# ---------------------------------------------------------------------------------------------------------
# cross-lane moves through the LDS crossbar (no LDS memory): rocPRIM's warp reductions broadcast with ds_swizzle
# and read the last lane with ds_bpermute. References (RDNA3 / CDNA3 guides, DS_SWIZZLE_B32 / DS_BPERMUTE_B32):
# * ds_swizzle_b32 offset[15] = 1: quad permute, lane reads lane (lane & ~3) | offset[2k+1:2k] for k = lane & 3;
#   offset[15] = 0: bit mask, within each 32-lane half lane reads ((lane & and_mask) | or_mask) ^ xor_mask with
#   and_mask = offset[4:0], or_mask = offset[9:5], xor_mask = offset[14:10]. The moved value is the ADDR VGPR.
# * ds_bpermute_b32 vdst, addr, data offset:o: lane reads data of lane ((addr + o) mod 2^32) / 4 mod wave size;
#   ds_permute_b32: lane writes its data to lane ((addr + o) / 4) mod wave size.
# Only active lanes are written; a lane whose source lane is inactive is not asserted (the guides do not say).

SWIZZLES = ("swizzle(QUAD_PERM,0,1,2,3)", "swizzle(QUAD_PERM,3,2,1,0)", "swizzle(QUAD_PERM,1,0,3,2)",
            "swizzle(BROADCAST,32,15)", "swizzle(BROADCAST,4,1)", "swizzle(BROADCAST,16,0)", "swizzle(SWAP,16)",
            "swizzle(SWAP,1)", "swizzle(REVERSE,32)", "swizzle(REVERSE,8)", 'swizzle(BITMASK_PERM,"01pip")',
            'swizzle(BITMASK_PERM,"10i01")', "0x1e0", "0x7fff", "0x0")


def _swizzle_source(offset: int, lane: int) -> int:
    if offset & 0x8000:
        return lane - lane % 4 + (offset >> 2 * (lane % 4) & 3)
    and_m, or_m, xor_m = offset & 31, offset >> 5 & 31, offset >> 10 & 31
    return lane - lane % 32 + ((((lane % 32) & and_m) | or_m) ^ xor_m)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("pattern", SWIZZLES)
def test_ds_swizzle_moves_the_addr_vgpr_from_the_lane_its_offset_names(arch, pattern):
    _skip(arch)
    line = f"ds_swizzle_b32 v{DST}, v{ADDR} offset:{pattern}"
    code = isa_harness.encoding(arch, line)
    offset = int.from_bytes(code[:2], "little")  # DS word 0 bits 15:0: the swizzle pattern as LLVM encoded it
    r = rng(arch, line)
    W, exec_ = _state(arch, r)
    v0 = W.v.copy()
    _run(arch, line, W)
    lanes = LANES[arch]
    bad = []
    for w in range(WAVES):
        for lane in range(lanes):
            src = _swizzle_source(offset, lane)
            if not exec_[w, lane]:
                want = int(v0[w, DST, lane])
            elif exec_[w, src]:
                want = int(v0[w, ADDR, src])
            else:
                continue
            if int(W.v[w, DST, lane]) != want:
                bad.append(f"wave {w} lane {lane} (source {src}): {int(W.v[w, DST, lane]):#x}, expected {want:#x}")
    assert not bad, f"{arch} {line!r} (offset {offset:#06x}): " + "; ".join(bad[:4])


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("offset", (0, 4, 124, 252, 65532))
def test_ds_bpermute_reads_the_lane_at_addr_plus_offset_over_4_modulo_the_wave(arch, offset):
    _skip(arch)
    line = f"ds_bpermute_b32 v{DST}, v{ADDR}, v{DATA0}" + (f" offset:{offset}" if offset else "")
    r = rng(arch, line)
    W, exec_ = _state(arch, r)
    lanes = LANES[arch]
    # addresses: a lane index * 4, some "negative" (the offset brings them back), some not multiples of 4
    W.v[:, ADDR, :] = np.array([((r.randrange(lanes) * 4 + r.choice([0, 0, 0, 1, 3])) - (offset if r.random() < 0.5
                                 else 0)) & M32 for _ in range(WAVES * lanes)], np.int64).reshape(WAVES, lanes)
    v0 = W.v.copy()
    _run(arch, line, W)
    bad = []
    for w in range(WAVES):
        for lane in range(lanes):
            src = (_addr(int(v0[w, ADDR, lane]), offset) >> 2) % lanes
            if not exec_[w, lane]:
                want = int(v0[w, DST, lane])
            elif exec_[w, src]:
                want = int(v0[w, DATA0, src])
            else:
                continue
            if int(W.v[w, DST, lane]) != want:
                bad.append(f"wave {w} lane {lane} (source {src}): {int(W.v[w, DST, lane]):#x}, expected {want:#x}")
    assert not bad, f"{arch} {line!r}: " + "; ".join(bad[:4])


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("offset", (0, 8, 65532))
def test_ds_permute_writes_each_lane_to_the_lane_at_addr_plus_offset_over_4(arch, offset):
    """A permutation (no two lanes write one lane): every active lane's data lands in its target lane when the
    target is active; the others keep their value."""
    _skip(arch)
    line = f"ds_permute_b32 v{DST}, v{ADDR}, v{DATA0}" + (f" offset:{offset}" if offset else "")
    r = rng(arch, line)
    W, exec_ = _state(arch, r)
    lanes = LANES[arch]
    targets = [r.sample(range(lanes), lanes) for _ in range(WAVES)]
    W.v[:, ADDR, :] = np.array([[(t * 4 - offset) & M32 for t in ts] for ts in targets], np.int64)
    v0 = W.v.copy()
    _run(arch, line, W)
    bad = []
    for w in range(WAVES):
        writer = {t: lane for lane, t in enumerate(targets[w])}
        for lane in range(lanes):
            if not exec_[w, lane] or not exec_[w, writer[lane]]:
                continue  # inactive: unchanged or not documented
            want = int(v0[w, DATA0, writer[lane]])
            if int(W.v[w, DST, lane]) != want:
                bad.append(f"wave {w} lane {lane} (from {writer[lane]}): {int(W.v[w, DST, lane]):#x}, expected {want:#x}")
    assert not bad, f"{arch} {line!r}: " + "; ".join(bad[:4])
