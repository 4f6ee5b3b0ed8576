"""GPU virtual memory: the host VA window (GPU VA == host VA) and the per-GPU page table.

Expectations come from DESIGN_NOTES section 2 (a reserved window at a fixed base, deterministic
allocation inside it, every GPU access checked so a bad address becomes a VM fault report) and the
module's documented contract.
"""
import ctypes

import pytest

from hcqsim import EmulatedGPU, pm4, sdma
from hcqsim.errors import VMFaultError
from hcqsim.memory import PAGE_SIZE, AddressSpace, MemoryError_, VaWindow, page_align

BASE = 0x3100_0000_0000  # preferred base for the windows made here (away from EmulatedGPU's default)
WSIZE = 1 << 32


@pytest.fixture
def window():
    w = VaWindow(BASE, WSIZE)
    yield w
    w.close()


def peek(addr, n):
    return ctypes.string_at(addr, n)


def poke(addr, data):
    ctypes.memmove(addr, bytes(data), len(data))


# -- VaWindow ---------------------------------------------------------------------------------------------

def test_page_align():
    assert [page_align(n) for n in (0, 1, 4095, 4096, 4097, 8192)] == [0, 4096, 4096, 4096, 8192, 8192]


def test_window_sits_at_its_preferred_base_or_falls_back(window):
    assert window.base == BASE and window.contains(BASE) and window.contains(BASE + WSIZE - 1)
    assert not window.contains(BASE + WSIZE) and not window.contains(BASE - 1)
    assert not window.contains(BASE + WSIZE - 8, 16)
    other = VaWindow(BASE, WSIZE)  # the preferred range is taken: the next free slot
    try:
        assert other.base != BASE
        assert other.base >= BASE + WSIZE or other.base + WSIZE <= BASE  # disjoint
        assert other.canonical(other.base + 0x1234) == BASE + 0x1234
        assert window.canonical(BASE + 0x1234) == BASE + 0x1234
        assert other.canonical(0x1000) == 0x1000  # outside the window: unchanged
    finally:
        other.close()


def test_window_rejects_unaligned_parameters():
    with pytest.raises(ValueError):
        VaWindow(BASE + 1, WSIZE)
    with pytest.raises(ValueError):
        VaWindow(BASE, WSIZE + 1)
    with pytest.raises(ValueError):
        VaWindow(BASE, 0)


SEQUENCE = [(4096, PAGE_SIZE), (1, PAGE_SIZE), (10000, PAGE_SIZE), (4096, 1 << 16), (3 * 4096, PAGE_SIZE),
            (100, 1 << 21)]


def _offsets(w):
    return [w.allocate(size, align) - w.base for size, align in SEQUENCE]


def test_allocation_is_deterministic(window):
    other = VaWindow(BASE, WSIZE)
    try:
        a, b = _offsets(window), _offsets(other)
        assert other.base != window.base
        assert a == b
        assert [window.canonical(window.base + o) for o in a] == [other.canonical(other.base + o) for o in b]
    finally:
        other.close()
    # a fresh window given the same calls gives the same addresses again
    window.close()
    again = VaWindow(BASE, WSIZE)
    try:
        assert again.base == BASE and _offsets(again) == a
    finally:
        again.close()


def test_allocations_are_aligned_disjoint_zeroed_and_writable(window):
    vas = [(window.allocate(size, align), size, align) for size, align in SEQUENCE]
    spans = sorted((va, va + page_align(size)) for va, size, _ in vas)
    for (lo1, hi1), (lo2, hi2) in zip(spans, spans[1:]):
        assert hi1 <= lo2
    for va, size, align in vas:
        assert va % align == 0 and window.contains(va, page_align(size))
        assert window.allocation_size(va) == page_align(size)
        assert peek(va, page_align(size)) == bytes(page_align(size))
        poke(va, b"\x11\x22\x33\x44")
        poke(va + page_align(size) - 1, b"\x99")
        assert peek(va, 4) == b"\x11\x22\x33\x44" and peek(va + page_align(size) - 1, 1) == b"\x99"


def test_first_fit_is_by_address(window):
    a = window.allocate(4096)
    b = window.allocate(4096)
    assert a == window.base and b == a + 4096


def test_release_then_reuse_gives_the_same_address_and_zeroed_memory(window):
    a = window.allocate(8192)
    b = window.allocate(4096)
    poke(a, b"\xff" * 8192)
    assert window.release(a) == 8192
    assert window.allocation_size(a) is None
    c = window.allocate(4096)
    assert c == a  # first fit: the freed hole
    assert peek(c, 4096) == bytes(4096)  # contents of a released allocation are gone
    d = window.allocate(4096)
    assert d == a + 4096
    assert window.allocate(4096) == b + 4096  # the hole is full: after b


def test_released_neighbours_merge(window):
    a, b, c = (window.allocate(4096) for _ in range(3))
    window.release(a)
    window.release(b)
    assert window.allocate(8192) == a  # a and b merged into one free range
    window.release(c)
    assert window.allocate(4096 * 3) == c  # c merged with the tail of the window


def test_release_of_something_not_allocated_fails(window):
    a = window.allocate(4096)
    with pytest.raises(MemoryError_):
        window.release(a + 4096)
    window.release(a)
    with pytest.raises(MemoryError_):
        window.release(a)


def test_allocate_at_a_chosen_address(window):
    want = BASE + 0x10_0000
    assert window.allocate(8192, at=want) == want
    with pytest.raises(MemoryError_):
        window.allocate(4096, at=want + 4096)  # taken
    with pytest.raises(MemoryError_):
        window.allocate(4096, at=want + 0x2001)  # not page aligned
    with pytest.raises(MemoryError_):
        window.allocate(4096, at=BASE + WSIZE)  # outside the window
    assert window.allocate(4096) == BASE  # first fit still uses the space below
    assert window.allocate(0x10_0000 - 4096) == BASE + 4096
    assert window.allocate(4096) == want + 8192


@pytest.mark.parametrize("size, align", [(0, PAGE_SIZE), (-4096, PAGE_SIZE), (4096, 100), (4096, 2048),
                                         (4096, 3 * 4096)])
def test_bad_allocation_arguments(window, size, align):
    with pytest.raises(ValueError):
        window.allocate(size, align)


def test_window_exhaustion():
    w = VaWindow(BASE, 16 * PAGE_SIZE)
    try:
        w.allocate(15 * PAGE_SIZE)
        last = w.allocate(1)
        with pytest.raises(MemoryError_):
            w.allocate(1)
        w.release(last)
        assert w.allocate(PAGE_SIZE) == last
        with pytest.raises(MemoryError_):
            w.allocate(2 * PAGE_SIZE)
    finally:
        w.close()


def test_close_is_idempotent():
    w = VaWindow(BASE, WSIZE)
    w.allocate(4096)
    w.close()
    w.close()
    assert w.closed


# -- AddressSpace: page table (unbacked addresses: only the bookkeeping and checks are exercised) -----------

P = 0x7000_0000_0000  # far from any window; never dereferenced


def test_map_rounds_to_pages_and_lists_in_order():
    a = AddressSpace()
    m2 = a.map(P + 0x10000, 100, "vram", name="second")
    m1 = a.map(P, 4096, "gtt", name="first")
    assert (m2.start, m2.end, m2.size) == (P + 0x10000, P + 0x11000, 4096)
    assert [m.name for m in a.mappings()] == ["first", "second"]
    assert a.find(P + 4095) is m1 and a.find(P + 4096) is None and a.find(P + 0x10FFF) is m2


@pytest.mark.parametrize("start, size", [
    (P + 0x10000, 0x2000),  # the same range
    (P + 0xF000, 0x2000),   # overlaps the start
    (P + 0x11000, 0x2000),  # overlaps the end
    (P + 0xE000, 0x8000),   # encloses it
    (P + 0x11000, 0x1000),  # inside it
    (P + 0xF000, 0x1001),   # one byte (rounded up to a page) into it
])
def test_overlapping_maps_are_rejected(start, size):
    a = AddressSpace()
    a.map(P + 0x10000, 0x2000, "gtt")
    with pytest.raises(ValueError):
        a.map(start, size, "gtt")
    assert len(a.mappings()) == 1


def test_adjacent_maps_are_accepted():
    a = AddressSpace()
    a.map(P + 0x10000, 0x2000, "gtt")
    a.map(P + 0x12000, 0x1000, "gtt")
    a.map(P + 0xF000, 0x1000, "vram")
    assert [m.start for m in a.mappings()] == [P + 0xF000, P + 0x10000, P + 0x12000]


@pytest.mark.parametrize("va, size, kind", [(P + 1, 4096, "gtt"), (P, 0, "gtt"), (P, 4096, "bogus")])
def test_bad_maps_are_rejected(va, size, kind):
    with pytest.raises(ValueError):
        AddressSpace().map(va, size, kind)


def test_unmap():
    a = AddressSpace()
    m = a.map(P, 0x3000, "gtt")
    with pytest.raises(ValueError):
        a.unmap(P + 0x1000)  # not the start of a mapping
    a.check(P + 0x1000, 4)
    assert a.unmap(P) is m and a.mappings() == []
    with pytest.raises(VMFaultError):
        a.check(P + 0x1000, 4)  # the last-hit cache must not keep the old mapping alive
    with pytest.raises(ValueError):
        a.unmap(P)
    a.map(P, 0x1000, "gtt", writable=False)  # the range can be mapped again
    with pytest.raises(VMFaultError):
        a.check(P, 4, "write")


def test_check_unmapped_names_address_and_reason():
    a = AddressSpace()
    a.map(P, 0x1000, "gtt")
    bad = P + 0x5008
    with pytest.raises(VMFaultError) as ei:
        a.check(bad, 8, "read")
    e = ei.value
    assert (e.address, e.size, e.access) == (bad, 8, "read")
    assert "not mapped" in e.reason and f"0x{bad:x}" in str(e)
    assert e.kind == "VM fault"


def test_check_read_only_and_non_executable():
    a = AddressSpace()
    a.map(P, 0x1000, "gtt", writable=False, name="consts")
    a.map(P + 0x1000, 0x1000, "vram", executable=True, name="code")
    a.check(P + 8, 8, "read")
    a.check(P + 0x1000, 4, "execute")
    with pytest.raises(VMFaultError) as ei:
        a.check(P + 8, 4, "write")
    assert ei.value.address == P + 8 and ei.value.access == "write"
    assert "consts" in ei.value.reason and "r-" in ei.value.reason
    with pytest.raises(VMFaultError) as ei:
        a.check(P + 8, 4, "execute")
    assert ei.value.access == "execute" and "consts" in ei.value.reason
    # the permission check holds for the mapping the last lookup cached, too
    a.check(P + 0x1000, 4, "read")
    a.check(P + 0x1000, 4, "write")
    with pytest.raises(VMFaultError):
        a.check(P + 4, 4, "write")


def test_ranges_spanning_adjacent_mappings():
    a = AddressSpace()
    a.map(P, 0x1000, "gtt", name="one")
    a.map(P + 0x1000, 0x1000, "vram", name="two")
    a.map(P + 0x2000, 0x1000, "gtt", writable=False, name="three")
    a.map(P + 0x4000, 0x1000, "gtt", name="after-gap")
    a.check(P + 0xFF0, 0x20, "write")  # one -> two
    a.check(P + 0x800, 0x2000, "read")  # one -> two -> three
    with pytest.raises(VMFaultError) as ei:
        a.check(P + 0x1FF0, 0x20, "write")  # two -> three (read-only)
    assert ei.value.address == P + 0x1FF0 and "three" in ei.value.reason
    with pytest.raises(VMFaultError) as ei:
        a.check(P + 0x2FF0, 0x1020, "read")  # three -> gap -> after-gap
    assert ei.value.address == P + 0x2FF0 and f"0x{P + 0x3000:x}" in ei.value.reason
    a.check(P + 0x2FFC, 4, "read")  # exactly to the end of a mapping
    with pytest.raises(VMFaultError):
        a.check(P + 0x4FFC, 8, "read")  # one dword past the last mapping


def test_check_outside_the_address_space():
    a = AddressSpace()
    with pytest.raises(VMFaultError):
        a.check((1 << 64) - 4, 8)
    with pytest.raises(VMFaultError):
        a.check(0, 4)


# -- AddressSpace accesses on real memory ---------------------------------------------------------------

@pytest.fixture
def mem(window):
    """Four backed pages: [rw "a" 2 pages][rw "b"][read-only "ro"]."""
    va = window.allocate(4 * PAGE_SIZE)
    a = AddressSpace()
    a.map(va, 2 * PAGE_SIZE, "gtt", name="a")
    a.map(va + 2 * PAGE_SIZE, PAGE_SIZE, "vram", name="b")
    a.map(va + 3 * PAGE_SIZE, PAGE_SIZE, "gtt", writable=False, name="ro")
    return a, va


def test_scalar_and_bulk_accesses(mem):
    a, va = mem
    a.write_u32(va + 4, 0x1_0000_0005)  # masked to 32 bits
    a.write_u64(va + 8, 0x0123_4567_89AB_CDEF)
    assert a.read_u32(va + 4) == 5 and a.read_u64(va + 8) == 0x0123_4567_89AB_CDEF
    assert peek(va + 4, 12) == bytes.fromhex("05000000" "efcdab8967452301")
    assert a.read_u32(va + 10) == 0x456789AB  # unaligned: bytes ab 89 67 45 -> little endian
    a.write(va + 0x1FFE, b"\x01\x02\x03\x04")  # straddles a -> b
    assert a.read(va + 0x1FFE, 4) == b"\x01\x02\x03\x04"
    assert list(a.read_dwords(va + 8, 2)) == [0x89ABCDEF, 0x01234567]
    assert a.read_u32(va + 3 * PAGE_SIZE) == 0  # read-only pages read fine


def test_failed_writes_write_nothing(mem):
    a, va = mem
    ro, b = va + 3 * PAGE_SIZE, va + 2 * PAGE_SIZE
    poke(b + PAGE_SIZE - 8, b"\x77" * 8)
    with pytest.raises(VMFaultError) as ei:
        a.write(b + PAGE_SIZE - 8, b"\x00" * 16)  # b -> ro
    assert ei.value.address == b + PAGE_SIZE - 8 and ei.value.access == "write"
    assert peek(b + PAGE_SIZE - 8, 8) == b"\x77" * 8
    for fn in (lambda: a.write_u32(ro, 1), lambda: a.write_u64(ro + 8, 1)):
        a.read_u32(ro)  # make "ro" the cached mapping first
        with pytest.raises(VMFaultError):
            fn()
    assert peek(ro, 16) == bytes(16)
    with pytest.raises(VMFaultError):
        a.read_u32(va + 4 * PAGE_SIZE)  # past the last mapping


@pytest.mark.parametrize("pattern", [b"\x5a", b"\x12\x34", b"\xd4\xc3\xb2\xa1", b"\x07\x07\x07\x07",
                                     b"\x01\x02\x03\x04\x05\x06\x07\x08"])
@pytest.mark.parametrize("size", [1, 7, 64, 4098])
def test_fill_patterns(mem, pattern, size):
    a, va = mem
    dst = va + 0x1F00  # crosses from a into b for large sizes
    poke(dst - 4, b"\xee" * 4)
    poke(dst + size, b"\xee" * 4)
    a.fill(dst, pattern, size)
    expected = (pattern * (size // len(pattern) + 1))[:size]
    assert peek(dst, size) == expected
    assert peek(dst - 4, 4) == b"\xee" * 4 and peek(dst + size, 4) == b"\xee" * 4


def test_fill_into_read_only_writes_nothing(mem):
    a, va = mem
    b_end = va + 3 * PAGE_SIZE
    with pytest.raises(VMFaultError):
        a.fill(b_end - 16, b"\xab", 32)
    assert peek(b_end - 16, 16) == bytes(16)
    a.fill(va, b"\xab", 0)  # nothing to do
    assert peek(va, 4) == bytes(4)


def test_copy(mem):
    a, va = mem
    src = bytes(range(256)) * 2
    poke(va, src)
    a.copy(va + 0x1F80, va, 512)  # a -> a/b
    assert peek(va + 0x1F80, 512) == src
    a.copy(va + 16, va, 64)  # overlapping forward: memmove semantics
    assert peek(va + 16, 64) == src[:64]
    poke(va, src)
    a.copy(va, va + 16, 64)  # overlapping backward
    assert peek(va, 64) == src[16:80]
    a.copy(va, va + 1000, 0)
    assert peek(va, 64) == src[16:80]


def test_copy_faults_name_the_bad_side_and_write_nothing(mem):
    a, va = mem
    poke(va, b"\x42" * 64)
    with pytest.raises(VMFaultError) as ei:
        a.copy(va, va + 4 * PAGE_SIZE, 64)  # unmapped source
    assert ei.value.address == va + 4 * PAGE_SIZE and ei.value.access == "read"
    assert peek(va, 64) == b"\x42" * 64
    with pytest.raises(VMFaultError) as ei:
        a.copy(va + 3 * PAGE_SIZE, va, 64)  # read-only destination
    assert ei.value.address == va + 3 * PAGE_SIZE and ei.value.access == "write"
    assert peek(va + 3 * PAGE_SIZE, 64) == bytes(64)


# -- through EmulatedGPU ---------------------------------------------------------------------------------

def test_gpu_alloc_maps_with_permissions_and_free_unmaps(gpu):
    code = gpu.alloc(100, executable=True, writable=False, name="code")
    m = gpu.memory.find(code.va)
    assert (m.start, m.size, m.readable, m.writable, m.executable) == (code.va, PAGE_SIZE, True, False, True)
    assert code.view.shape == (100,) and code.u32().shape == (25,)
    gpu.memory.check(code.va, 4, "execute")
    gpu.free(code)
    assert gpu.memory.find(code.va) is None
    with pytest.raises(ValueError):
        gpu.free(code)


def test_freed_memory_is_a_vm_fault_for_the_engine(gpu):
    b = gpu.alloc(4096)
    keep = gpu.alloc(4096)
    q = gpu.compute_queue()
    q.submit(pm4.write_data(b.va, [1]))
    gpu.free(b)
    q.submit(pm4.write_data(b.va, [2]) + pm4.write_data(keep.va, [3]))
    [f] = gpu.faults
    assert f.kind == "VM fault" and f.address == b.va and "not mapped" in f.message
    assert keep.u32()[0] == 0


def test_gpu_windows_are_deterministic_across_gpus():
    g1, g2 = EmulatedGPU(seed=0), EmulatedGPU(seed=0)
    try:
        a = [g1.alloc(n).va - g1.window.base for n in (4096, 10, 70000)]
        b = [g2.alloc(n).va - g2.window.base for n in (4096, 10, 70000)]
        assert a == b
        assert g1.canonical(g1.window.base + a[2]) == g2.canonical(g2.window.base + b[2])
    finally:
        g1.close()
        g2.close()


def test_an_empty_range_at_the_end_of_a_mapping_is_not_inside_it():
    """check(addr, 0) looks up addr itself: one past a mapping (nothing mapped there) faults, as for size 1, whichever
    mapping the last lookup cached (the bisect lookup after a miss must not take the mapping before addr)."""
    a = AddressSpace()
    a.map(P, 0x1000, "gtt", name="first")
    a.map(P + 0x3000, 0x1000, "gtt", name="other")
    a.check(P + 0x3000, 4)  # the cached mapping is another one
    for size in (0, 1):
        with pytest.raises(VMFaultError):
            a.check(P + 0x1000, size, "read")
    a.check(P + 0xFFC, 4)


@pytest.mark.parametrize("engine", ["pm4", "sdma"])
def test_a_ring_in_memory_the_gpu_may_not_read_faults_the_queue(engine):
    """A queue's packets are fetched through the read permission check (the stream's dword loads), not read
    around it: a ring whose mapping is not readable faults at its first packet, nothing executed."""
    with EmulatedGPU(target="gfx1100", seed=0) as gpu:
        ring, ptrs, out = gpu.alloc(4096), gpu.alloc(4096), gpu.alloc(4096)
        m = gpu.memory.find(ring.va)
        m.readable = False
        make = gpu.create_compute_queue if engine == "pm4" else gpu.create_sdma_queue
        q = make(ring.va, 4096, ptrs.va, ptrs.va + 8)
        packet = pm4.write_data(out.va, [7]) if engine == "pm4" else sdma.fence(out.va, 7)
        q.submit(packet)
        assert gpu.faults and gpu.faults[0].is_vm_fault and gpu.faults[0].access == "read"
        assert out.u32()[0] == 0
