"""The HDP (HARDWARE_FACTS 6.4): CPU stores through a host mapping of VRAM wait in the HDP until an HDP flush; GPU
engines read VRAM around it. A flush is a store to offset 0 of the MMIO-remap page, a PM4 WAIT_REG_MEM write-wait
on GPU_HDP_FLUSH_REQ/DONE, or an SDMA POLL_REGMEM with HDP_FLUSH = 1. GTT memory does not go through the HDP.

The programs here drive the emulated KFD as an independent client does (tests/kfd_client.py: plain doorbell
stores, waits in WAIT_EVENTS), so every GPU run starts at a progress point, as it does for any client.
"""
import ctypes

import pytest

from hcqsim import pm4, sdma, trace_events
from hcqsim.coherence.hdp import MMIO_IDLE
from hcqsim.kfd import EmulatedSystem
from hcqsim.registers import HDP_FLUSH_REGS, hdp_flush_registers

from kfd_client import (ACQUIRE_VM, ALLOC_MEMORY, GTT, MAP_ANONYMOUS, MAP_FIXED, MAP_MEMORY, MAP_NORESERVE,
                        MAP_PRIVATE, MAP_SHARED, PAGE, PROT_NONE, PROT_RW, PUBLIC, VRAM, WRITABLE, AcquireVm, Alloc,
                        Client, ClientTimeout, MapToGpu, Mem, pm4_wait_ge, sdma_copy)

TARGETS = ["gfx1100", "gfx942"]
MMIO_REMAP = 1 << 4
DATA = bytes(range(1, 256)) * 17  # 4335 bytes: crosses a page boundary, no zero byte


class Host:
    """One process on an emulated machine in a memory model, driving the KFD like a client."""

    def __init__(self, target: str, mode: str, *, policy="run_to_block", seed: int = 0, gpus: int = 1):
        self.system = EmulatedSystem(num_gpus=gpus, target=target, policy=policy, seed=seed, memory_model=mode)
        self.vram = self.system.gpus[0].hdp.vram
        self.c = Client(self.system.os)
        self.flush_page = self._map_flush_page(self.c)
        self.family = self.system.target.family
        self.sdma_version = sdma.version_name(self.system.target.sdma_version)

    @staticmethod
    def _map_flush_page(c: Client) -> int:
        va = c.os.mmap(0, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)
        a = Alloc(va_addr=va, size=PAGE, gpu_id=c.gpu_id, flags=MMIO_REMAP | WRITABLE)
        c.os.ioctl(c.kfd, ALLOC_MEMORY, a)
        return c.os.mmap(0, PAGE, PROT_RW, MAP_SHARED, c.kfd, a.mmap_offset)

    def buffer(self, kind: int, data: bytes = b""):
        mem = self.c.alloc(max(len(data), 2 * PAGE), kind)
        ctypes.memmove(mem.va, data, len(data))  # a CPU store through the mapping
        return mem

    def hdp_flush(self, offset: int = 0) -> None:
        ctypes.c_uint32.from_address(self.flush_page + offset).value = 0  # what the kernel writes (facts 6.4)

    def run_sdma(self, packets: list[int]) -> None:
        c = self.c
        q = c.sdma_queue()
        sig = c.alloc(PAGE, GTT)
        q.submit(packets + c.signal_packets(q, sig.va, 1))
        c.wait(sig.va, 1, timeout_s=2)

    def run_cp(self, packets: list[int]) -> None:
        q = self.c.compute_queue()
        sig = self.c.alloc(PAGE, GTT)
        q.submit(packets + self.c.signal_packets(q, sig.va, 1))
        self.c.wait(sig.va, 1, timeout_s=2)

    def sdma_copy(self, dst, src, n: int = len(DATA), prefix: list[int] = ()) -> None:
        self.run_sdma(list(prefix) + sdma_copy(dst.va, src.va, n))

    def cp_copy_dwords(self, dst, src, n: int, prefix: list[int] = ()) -> None:
        """CP reads: COPY_DATA memory to memory, one dword at a time."""
        body = [w for i in range(0, n, 4) for w in pm4.copy_data(src.va + i, dst.va + i, src_sel=1, dst_sel=2)]
        self.run_cp(list(prefix) + body)

    def close(self) -> None:
        self.c.close()
        self.system.close()


@pytest.fixture(params=TARGETS)
def target(request):
    return request.param


@pytest.fixture
def machine(target):
    made = []

    def make(mode: str, **kw) -> Host:
        made.append(Host(target, mode, **kw))
        return made[-1]

    yield make
    for h in made:
        h.close()


def read(mem, n: int = len(DATA)) -> bytes:
    return ctypes.string_at(mem.va, n)


def pm4_hdp_flush(bit: int = 1 << 2) -> list[int]:
    """amdgpu's ring HDP flush (facts 3.3 / 6.4): OPERATION 1, REQ = dw2, DONE = dw3, REF = MASK = the client bit."""
    return pm4.wait_reg_mem(0xE27 << 32 | 0xE26, bit, mask=bit, function=3, mem_space=0, operation=1,
                            poll_interval=0x20)


# -- the language: where the handshake registers are --------------------------------------------------------------

def test_flush_handshake_registers_per_nbio_version():
    # nbio_4_3_0_offset.h and nbio_7_9_0_offset.h: GPU_HDP_FLUSH_REQ 0x0106, _DONE 0x0107, BASE_IDX 2
    # BASE_IDX 2 offsets 0x106 / 0x107 plus NBIO segment 2 at 0xD20, as a ring (and tinygrad) carries them
    assert hdp_flush_registers((4, 3, 0)) == (0xE26, 0xE27)
    assert hdp_flush_registers((7, 9, 0)) == (0xE26, 0xE27)
    assert set(HDP_FLUSH_REGS) == {(4, 3, 0), (7, 9, 0)}
    with pytest.raises(KeyError, match="NBIO 9.9.9"):
        hdp_flush_registers((9, 9, 9))


# -- coherent: today's behaviour --------------------------------------------------------------------------------

def test_coherent_a_copy_of_host_written_vram_without_a_flush_sees_the_stores(machine):
    h = machine("coherent")
    src, dst = h.buffer(VRAM, DATA), h.buffer(GTT)
    h.sdma_copy(dst, src)
    assert read(dst) == DATA
    assert h.vram.ranges == [] and h.vram.pending_pages == 0  # nothing tracked: no cost


# -- adversarial: the GPU really reads what it saw before -----------------------------------------------------------

def test_without_a_flush_an_sdma_copy_reads_the_bytes_from_before_the_host_stores(machine):
    h = machine("adversarial")
    src, dst = h.buffer(VRAM, DATA), h.buffer(GTT)
    h.sdma_copy(dst, src)
    assert read(dst) == bytes(len(DATA))  # the zeros the BO held when the CPU mapped it
    assert read(src) == DATA  # the CPU still reads its own stores back


def test_without_a_flush_a_cp_copy_reads_the_old_bytes_too(machine):
    h = machine("adversarial")
    src, dst = h.buffer(VRAM, DATA[:64]), h.buffer(GTT)
    h.cp_copy_dwords(dst, src, 64)
    assert read(dst, 64) == bytes(64)


def test_a_store_to_offset_0_of_the_mmio_page_before_the_doorbell_makes_the_stores_visible(machine):
    h = machine("adversarial")
    src, dst = h.buffer(VRAM, DATA), h.buffer(GTT)
    h.hdp_flush(0)
    h.sdma_copy(dst, src)
    assert read(dst) == DATA
    assert h.vram.pending_pages == 0


def test_offset_4_is_the_register_path_flush_and_leaves_memory_writes_buffered(machine):
    h = machine("adversarial")
    src, dst = h.buffer(VRAM, DATA), h.buffer(GTT)
    h.hdp_flush(4)
    h.sdma_copy(dst, src)
    assert read(dst) == bytes(len(DATA))
    assert h.system.gpus[0].hdp.register_flushes == 1


def test_gtt_memory_does_not_go_through_the_hdp(machine):
    h = machine("adversarial")
    src, dst = h.buffer(GTT, DATA), h.buffer(GTT)
    h.sdma_copy(dst, src)
    assert read(dst) == DATA
    assert h.vram.ranges == [] or all(r.lo != src.va for r in h.vram.ranges)


def test_an_sdma_poll_regmem_hdp_flush_ahead_of_the_copy_makes_the_stores_visible(machine):
    h = machine("adversarial")
    src, dst = h.buffer(VRAM, DATA), h.buffer(GTT)
    h.sdma_copy(dst, src, prefix=sdma.hdp_flush(version=h.sdma_version))
    assert read(dst) == DATA


def test_a_pm4_write_wait_on_the_flush_registers_ahead_of_the_reads_makes_the_stores_visible(machine):
    h = machine("adversarial")
    src, dst = h.buffer(VRAM, DATA[:64]), h.buffer(GTT)
    h.cp_copy_dwords(dst, src, 64, prefix=pm4_hdp_flush())
    assert read(dst, 64) == DATA[:64]


def test_a_flush_on_a_later_submission_shows_the_stores_to_later_reads(machine):
    h = machine("adversarial")
    src, first, second = h.buffer(VRAM, DATA), h.buffer(GTT), h.buffer(GTT)
    h.sdma_copy(first, src)
    h.hdp_flush()
    h.sdma_copy(second, src)
    assert read(first) == bytes(len(DATA)) and read(second) == DATA


def test_gpu_writes_into_a_page_with_unflushed_host_stores_keep_both(machine):
    h = machine("adversarial")
    buf, src = h.buffer(VRAM), h.buffer(GTT, b"\xAA" * 16)
    ctypes.memmove(buf.va, b"\x11" * 16, 16)  # host store to bytes 0..15, not flushed
    h.run_sdma(sdma_copy(buf.va + 64, src.va, 16))  # the GPU writes other bytes of the same page
    assert read(buf, 16) == b"\x11" * 16  # the host still sees its store
    assert ctypes.string_at(buf.va + 64, 16) == b"\xAA" * 16  # and the GPU's write landed
    dst = h.buffer(GTT)
    h.hdp_flush()
    h.run_sdma(sdma_copy(dst.va, buf.va, 80))
    assert read(dst, 80) == b"\x11" * 16 + bytes(48) + b"\xAA" * 16


def test_a_gpu_write_over_an_unflushed_host_store_wins(machine):
    h = machine("adversarial")
    buf, src = h.buffer(VRAM), h.buffer(GTT, b"\xAA" * 16)
    ctypes.memmove(buf.va, b"\x11" * 16, 16)
    h.run_sdma(sdma_copy(buf.va, src.va, 16))
    assert read(buf, 16) == b"\xAA" * 16
    assert h.vram.pending_pages == 0


@pytest.mark.parametrize("engine", ["sdma", "cp"])
def test_a_gpu_write_of_the_old_bytes_over_an_unflushed_host_store_wins_too(machine, engine):
    # the GPU writes zeros where it last saw zeros: a write found only by comparing would be missed, and the
    # host's store put back over it once the run ends
    h = machine("adversarial")
    buf, zeros = h.buffer(VRAM), h.buffer(GTT)
    ctypes.memmove(buf.va, b"\x11" * 16, 16)  # host store, not flushed
    if engine == "sdma":
        h.run_sdma(sdma_copy(buf.va, zeros.va, 16))
    else:
        h.cp_copy_dwords(buf, zeros, 16)
    assert read(buf, 16) == bytes(16)
    assert h.vram.pending_pages == 0


@pytest.mark.parametrize("flush", [False, True])
def test_a_cp_wait_on_a_vram_flag_the_host_set_passes_only_after_a_flush(machine, flush):
    h = machine("adversarial")
    flag, sig = h.buffer(VRAM), h.buffer(GTT)
    q = h.c.compute_queue()
    q.submit(pm4_wait_ge(flag.va, 1) + h.c.signal_packets(q, sig.va, 1))
    with pytest.raises(ClientTimeout):
        h.c.wait(sig.va, 1, timeout_s=0.2)  # the CP polls the flag
    flag.u32().value = 1  # a CPU store through the BAR
    if flush:
        h.hdp_flush()
        h.c.wait(sig.va, 1, timeout_s=2)
    else:
        with pytest.raises(ClientTimeout):  # the deterministic default never drains the HDP by itself
            h.c.wait(sig.va, 1, timeout_s=0.5)
    assert sig.u32().value == (1 if flush else 0) and flag.u32().value == 1


def test_the_seeded_random_policy_lets_the_hdp_drain_by_itself_under_some_seeds(target):
    seen = set()
    for seed in range(8):
        h = Host(target, "adversarial", policy="random", seed=seed)
        try:
            src, dst = h.buffer(VRAM, DATA[:PAGE]), h.buffer(GTT)
            h.sdma_copy(dst, src, PAGE)
            seen.add(read(dst, PAGE) == DATA[:PAGE])
        finally:
            h.close()
    assert seen == {True, False}  # stale under some schedules, drained under others


def test_without_a_flush_a_copy_is_stale_under_every_seed_of_a_policy_that_never_drains(target):
    for seed in range(3):
        h = Host(target, "adversarial", policy="round_robin", seed=seed)
        try:
            src, dst = h.buffer(VRAM, DATA), h.buffer(GTT)
            h.sdma_copy(dst, src)
            assert read(dst) == bytes(len(DATA))
        finally:
            h.close()


def peer_vram(h: Host, size: int = 2 * PAGE):
    """VRAM of GPU 1, mapped for the CPU (through GPU 1's render node) and in both GPUs' page tables."""
    c, gpu1 = h.c, h.system.gpu_ids[1]
    drm1 = c.os.open(h.system.render_path(1))
    c.os.ioctl(c.kfd, ACQUIRE_VM, AcquireVm(drm1, gpu1))
    va = c.os.mmap(0, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)
    a = Alloc(va_addr=va, size=size, gpu_id=gpu1, flags=VRAM | WRITABLE | PUBLIC)
    c.os.ioctl(c.kfd, ALLOC_MEMORY, a)
    ids = (ctypes.c_uint32 * 2)(c.gpu_id, gpu1)
    c.os.ioctl(c.kfd, MAP_MEMORY, MapToGpu(handle=a.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=2))
    c.os.mmap(va, size, PROT_RW, MAP_SHARED | MAP_FIXED, drm1, a.mmap_offset)
    return Mem(va, size, a.handle)


def test_a_peer_gpus_write_into_host_mapped_vram_is_not_taken_for_a_host_store(target):
    h = Host(target, "adversarial", gpus=2)
    try:
        peer, src, dst = peer_vram(h), h.buffer(GTT, DATA), h.buffer(GTT)
        assert [r.lo for r in h.vram.ranges] == [peer.va]  # tracked by GPU 1's HDP
        h.run_sdma(sdma_copy(peer.va, src.va, len(DATA)))  # GPU 0 writes GPU 1's VRAM: no HDP on that path
        h.run_sdma(sdma_copy(dst.va, peer.va, len(DATA)))
        assert read(dst) == DATA
        assert h.vram.pending_pages == 0
    finally:
        h.close()


def test_a_peer_copy_into_host_written_vram_of_another_gpu_lands_whole(target):
    """conformance peer_copy_push: GPU 1's VRAM holds unflushed host stores (GPU 1's HDP), GPU 0's SDMA copies
    words with zero bytes over part of it; the host then reads the copy where it wrote, its own stores elsewhere
    (a GPU write cancels the host store it overwrites). Was: the copy's bytes equal to the hidden zeros were
    taken for untouched and the host's bytes came back (b1[25] = a0[25] instead of a0[0])."""
    h = Host(target, "adversarial", gpus=2)
    try:
        words = bytes(b for i in range(250) for b in (0x01000000 + i).to_bytes(4, "little"))
        peer, src = peer_vram(h), h.buffer(GTT, words)
        ctypes.memmove(peer.va, DATA[:PAGE], PAGE)  # host stores into GPU 1's VRAM, not flushed
        h.run_sdma(sdma_copy(peer.va + 100, src.va, len(words)))
        assert read(peer, PAGE) == DATA[:100] + words + DATA[100 + len(words):PAGE]
    finally:
        h.close()


# -- the flush handshake on the rings ---------------------------------------------------------------------------

def test_a_write_wait_on_registers_other_than_the_flush_pair_is_unsupported(machine):
    h = machine("coherent")
    with pytest.raises(ClientTimeout):
        h.run_cp(pm4.wait_reg_mem(0x201 << 32 | 0x200, 4, mask=4, function=3, mem_space=0, operation=1))
    (fault,) = h.system.gpus[0].faults
    assert fault.kind == "unsupported" and "GPU_HDP_FLUSH_REQ/DONE (0xe26/0xe27)" in fault.message


def test_an_sdma_hdp_flush_naming_other_registers_is_unsupported(machine):
    h = machine("coherent")
    with pytest.raises(ClientTimeout):
        h.run_sdma(sdma.hdp_flush(request_reg=0x200, done_reg=0x201, version=h.sdma_version))
    (fault,) = h.system.gpus[0].faults
    assert fault.kind == "unsupported" and "REQ 0x200 / DONE 0x201" in fault.message


def test_a_flush_handshake_whose_compare_cannot_pass_stalls_its_queue(machine):
    h = machine("coherent")
    # REF 4 written to REQ, DONE shows 4; (4 & MASK 4) == REF 8 never holds
    with pytest.raises(ClientTimeout):
        h.run_cp(pm4.wait_reg_mem(0xE27 << 32 | 0xE26, 8, mask=4, function=3, mem_space=0, operation=1))
    assert not h.system.gpus[0].faults
    (blocked,) = h.system.gpus[0].blocked()
    assert "WAIT_REG_MEM" in blocked.packet


# -- the trace --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["coherent", "adversarial"])
def test_every_flush_is_an_event_of_its_own_in_the_trace(machine, mode):
    h = machine(mode)
    src, dst = h.buffer(VRAM, DATA), h.buffer(GTT)
    h.hdp_flush(0)
    h.hdp_flush(4)
    h.sdma_copy(dst, src, prefix=sdma.hdp_flush(version=h.sdma_version))
    h.cp_copy_dwords(dst, src, 8, prefix=pm4_hdp_flush())
    gpu = h.system.gpus[0]
    lines = [ln.split(None, 2) for ln in gpu.trace_lines()]
    flushes = [(q, what.split()[0]) for _, q, what in lines if what.startswith("hdp_")]
    assert flushes[:2] == [("host", "hdp_reg_flush"), ("host", "hdp_flush")]
    assert flushes[2:] == [("sdma_0", "hdp_flush"), ("pm4_0", "hdp_flush")]
    events = trace_events.from_trace_lines(gpu.trace_lines())
    trace_events.validate(trace_events.document(events))
    assert sum(e["ph"] == "i" and e["name"] == "hdp_flush" for e in events) == 3


def test_the_mmio_page_reads_idle_between_flush_stores(machine):
    h = machine("coherent")
    h.hdp_flush(0)
    h.run_sdma([])
    assert ctypes.c_uint32.from_address(h.flush_page).value == MMIO_IDLE
    assert ctypes.c_uint32.from_address(h.flush_page + 4).value == MMIO_IDLE


# -- report: the GPU read is named, values stay coherent ------------------------------------------------------------

def hdp_records(h: Host) -> list:
    return [r for r in h.system.memory_reports if r.missing == "HDP flush"]


def test_report_names_the_host_store_the_reader_and_the_missing_flush(machine):
    h = machine("report")
    src, dst = h.buffer(VRAM, DATA), h.buffer(GTT)
    h.sdma_copy(dst, src)
    assert read(dst) == DATA  # report mode never changes results
    (rec,) = hdp_records(h)
    assert rec.kind == "unflushed host write" and rec.level == "HDP"
    assert f"VRAM BO 0x{src.handle:x}" in rec.writer and "the host" in rec.writer
    assert "sdma_0" in rec.reader
    assert src.va <= rec.address < src.va + len(DATA)
    text = str(rec)
    assert "missing HDP flush" in text and "HDP_MEM_FLUSH_CNTL" in text and "POLL_REGMEM" in text


@pytest.mark.parametrize("flush", ["mmio", "sdma"])
def test_report_is_clean_when_a_flush_came_first(machine, flush):
    h = machine("report")
    src, dst = h.buffer(VRAM, DATA), h.buffer(GTT)
    if flush == "mmio":
        h.hdp_flush()
    h.sdma_copy(dst, src, prefix=sdma.hdp_flush(version=h.sdma_version) if flush == "sdma" else ())
    assert read(dst) == DATA and hdp_records(h) == []


def test_report_of_a_cp_read_after_a_register_path_flush_says_offset_4_does_not_flush_memory(machine):
    h = machine("report")
    src, dst = h.buffer(VRAM, DATA[:64]), h.buffer(GTT)
    h.hdp_flush(4)
    h.cp_copy_dwords(dst, src, 64)
    (rec,) = hdp_records(h)
    assert "pm4_0" in rec.reader and "offset 4 (HDP_REG_FLUSH_CNTL)" in rec.detail
    h.cp_copy_dwords(dst, src, 64, prefix=pm4_hdp_flush())
    assert len(hdp_records(h)) == 1  # after the write-wait flush, the second copy is clean


def test_report_says_nothing_of_gtt(machine):
    h = machine("report")
    src, dst = h.buffer(GTT, DATA), h.buffer(GTT)
    h.sdma_copy(dst, src)
    assert read(dst) == DATA and hdp_records(h) == []
