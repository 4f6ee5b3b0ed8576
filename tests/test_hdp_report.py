"""Report mode names what adversarial mode shows for two HDP mistakes (HARDWARE_FACTS 6.4): a queue polling VRAM the
host stored without an HDP flush (adversarial: the poll never sees the store, a deadlock), and kernel code the
host stored into VRAM without one (adversarial: the waves fetch the old bytes). Each broken stream is recorded with
the poller or the dispatch, the address, the host store and the missing flush; its correct version is clean.

The streams are driven as an independent KFD client drives them (tests/kfd_client.py, through tests/test_hdp.py's
Host: plain doorbells, no runtime flush), so nothing but the stream decides whether a flush happens.
"""
import ctypes
import struct

import pytest

from hcqsim import sdma

from kfd_client import GTT, KERNELS, PAGE, VRAM, ClientTimeout, pm4_wait_ge
from test_hdp import Host, pm4_hdp_flush

TARGETS = ["gfx1100", "gfx942"]
S_ENDPGM = {"gfx11": 0xBFB00000, "gfx9": 0xBF810000}


@pytest.fixture(params=TARGETS)
def machine(request):
    made = []

    def make(mode: str, **kw) -> Host:
        made.append(Host(request.param, mode, **kw))
        return made[-1]

    yield make
    for h in made:
        h.close()


def hdp_records(h: Host) -> list:
    return [r for r in h.system.memory_reports if r.missing == "HDP flush"]


def flag_poll(h: Host, engine: str, flag) -> list[int]:
    """A wait for the u32 at `flag` to reach 1: CP WAIT_REG_MEM or SDMA POLL_REGMEM (memory form)."""
    if engine == "cp":
        return pm4_wait_ge(flag.va, 1)
    return sdma.poll_regmem(flag.va, 1, version=h.sdma_version)


def submit_poll(h: Host, engine: str, flag, sig, prefix: list[int] = ()):
    """Queue a poll of `flag`, then a signal of `sig`; the queue is polling when this returns."""
    q = h.c.compute_queue() if engine == "cp" else h.c.sdma_queue()
    q.submit(list(prefix) + flag_poll(h, engine, flag) + h.c.signal_packets(q, sig.va, 1))
    with pytest.raises(ClientTimeout):
        h.c.wait(sig.va, 1, timeout_s=0.1)  # the queue polls the flag
    return q


POLLER = {"cp": "WAIT_REG_MEM", "sdma": "POLL_REGMEM"}


# -- a queue polling host-written VRAM ---------------------------------------------------------------------------

@pytest.mark.parametrize("engine", ["cp", "sdma"])
def test_a_poll_of_a_vram_flag_the_host_set_without_a_flush_is_recorded_naming_the_poller(machine, engine):
    h = machine("report")
    flag, sig = h.buffer(VRAM), h.buffer(GTT)
    q = submit_poll(h, engine, flag, sig)
    flag.u32().value = 1  # a CPU store through the BAR, no HDP flush after it
    h.c.wait(sig.va, 1, timeout_s=2)  # report mode keeps the coherent values: the wait passes
    (rec,) = hdp_records(h)
    assert rec.kind == "unflushed host write" and rec.level == "HDP"
    assert rec.address == flag.va and rec.size == 1  # the byte the CPU changed
    assert f"VRAM BO 0x{flag.handle:x}" in rec.writer and "the host" in rec.writer
    assert rec.reader.startswith(f"queue {q_name(h, engine)}: {POLLER[engine]} at ring+0x")
    canon = h.system.gpus[0].canonical  # (reports name addresses as traces do: canonical in a displaced window)
    assert f"polling 0x{canon(flag.va):x}" in rec.reader and ">= 0x1" in rec.reader
    assert "a wait's poll" in rec.detail and "deadlock" in rec.detail
    assert "missing HDP flush" in str(rec)


def q_name(h: Host, engine: str) -> str:
    return "pm4_0" if engine == "cp" else "sdma_0"


@pytest.mark.parametrize("engine", ["cp", "sdma"])
def test_a_poll_of_a_vram_flag_set_and_flushed_is_clean(machine, engine):
    h = machine("report")
    flag, sig = h.buffer(VRAM), h.buffer(GTT)
    submit_poll(h, engine, flag, sig)
    flag.u32().value = 1
    h.hdp_flush()  # offset 0 of the MMIO-remap page
    h.c.wait(sig.va, 1, timeout_s=2)
    assert hdp_records(h) == []


@pytest.mark.parametrize("engine", ["cp", "sdma"])
def test_the_same_unflushed_flag_deadlocks_the_poller_under_adversarial(machine, engine):
    h = machine("adversarial")
    flag, sig = h.buffer(VRAM), h.buffer(GTT)
    submit_poll(h, engine, flag, sig)
    flag.u32().value = 1
    with pytest.raises(ClientTimeout):
        h.c.wait(sig.va, 1, timeout_s=0.3)
    h.hdp_flush()
    h.c.wait(sig.va, 1, timeout_s=2)  # the flush shows the store: the poll passes


def test_a_poll_that_sees_only_flushed_bytes_is_clean_though_other_bytes_of_the_page_are_not(machine):
    h = machine("report")
    flag, sig = h.buffer(VRAM), h.buffer(GTT)
    flag.u32().value = 1
    h.hdp_flush()
    ctypes.c_uint32.from_address(flag.va + 256).value = 7  # same page, another word, unflushed, never read
    q = h.c.compute_queue()
    q.submit(pm4_wait_ge(flag.va, 1) + h.c.signal_packets(q, sig.va, 1))
    h.c.wait(sig.va, 1, timeout_s=2)
    assert hdp_records(h) == []


# -- kernel code the host wrote into VRAM -------------------------------------------------------------------------

def dispatch(h: Host, code, out, prefix: list[int] = ()) -> None:
    h.run_cp(list(prefix) + h.c.dispatch_packets(code, out))


def fetch_reader(h: Host, code, dispatch: int = 0) -> str:
    """How a report names the first instruction fetch of the kernel at `code` (shader.cached's reader)."""
    return (f"pm4_0 dispatch {dispatch} (kernel at 0x{h.system.gpus[0].canonical(code.va):x}) instruction fetch "
            f"at 0x{code.va:x}")


def outputs(out, n: int = 64) -> list[int]:
    return [ctypes.c_uint32.from_address(out.va + 4 * i).value for i in range(n)]


def test_kernel_code_stored_without_a_flush_is_recorded_naming_the_dispatch(machine):
    h = machine("report")
    code, out = h.c.load_kernel(), h.buffer(GTT)
    dispatch(h, code, out)
    assert outputs(out) == [42 + i for i in range(64)]  # report mode never changes results
    (rec,) = [r for r in hdp_records(h) if r.reader == fetch_reader(h, code)]
    assert all(code.va <= r.address < code.va + PAGE for r in hdp_records(h))  # nothing but the code is named
    words = KERNELS[h.family]
    assert (rec.address, rec.size) == (code.va, 4 * len(words))  # every byte of the code the CPU stored
    assert f"VRAM BO 0x{code.handle:x}" in rec.writer
    assert "kernel code" in rec.detail and "missing HDP flush" in str(rec)


@pytest.mark.parametrize("flush", ["mmio", "pm4"])
def test_kernel_code_stored_and_flushed_is_clean(machine, flush):
    h = machine("report")
    code, out = h.c.load_kernel(), h.buffer(GTT)
    if flush == "mmio":
        h.hdp_flush()
    dispatch(h, code, out, prefix=pm4_hdp_flush() if flush == "pm4" else ())
    assert outputs(out) == [42 + i for i in range(64)]
    assert hdp_records(h) == []


def test_an_empty_kernel_stored_without_a_flush_is_recorded_too(machine):
    # an s_endpgm-only kernel: its waves fetch one instruction; the emulator looks at it as the queue launches
    h = machine("report")
    code, out = h.c.alloc(PAGE, VRAM), h.buffer(GTT)
    ctypes.memmove(code.va, struct.pack("<I", S_ENDPGM[h.family]), 4)
    dispatch(h, code, out)
    (rec,) = [r for r in hdp_records(h) if r.reader == fetch_reader(h, code)]
    assert code.va <= rec.address and rec.end <= code.va + 4  # the instruction's bytes the CPU changed (not 0)


def test_kernel_code_stored_without_a_flush_is_wrong_under_adversarial(machine):
    h = machine("adversarial")
    code, out = h.c.load_kernel(), h.buffer(GTT)
    with pytest.raises(ClientTimeout):  # the waves fetch the zeros the BO held: not the kernel
        dispatch(h, code, out)
    assert outputs(out) != [42 + i for i in range(64)]


def test_a_second_dispatch_after_the_code_was_flushed_is_not_recorded_again(machine):
    h = machine("report")
    code, out = h.c.load_kernel(), h.buffer(GTT)
    dispatch(h, code, out)
    h.hdp_flush()
    dispatch(h, code, out)
    assert fetch_reader(h, code) in [r.reader for r in hdp_records(h)]
    assert not any("dispatch 1" in r.reader for r in hdp_records(h))

