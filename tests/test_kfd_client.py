"""An independent KFD client (tests/kfd_client.py: its own structs, packets, kernel code, plain-store doorbells and
spinning waits) runs on the free-running emulator: nothing it does calls into hcqsim to make progress."""
import ctypes

import pytest

from hcqsim.kfd import EmulatedSystem

from kfd_client import WAIT_TIMEOUT, Client, ClientTimeout, pm4_release_mem, pm4_wait_ge, sdma_copy

TARGETS = ["gfx1100", "gfx942"]


@pytest.fixture(params=TARGETS)
def client(request):
    system = EmulatedSystem(target=request.param, free_running=True)
    c = Client(system.os, hdp_flush=True)  # its kernel code and copy source are CPU stores into VRAM
    yield c
    c.close()
    system.close()
    assert not system.thread.alive


def test_a_copy_queue_copies_and_signals(client):
    src, dst, sig = (client.alloc(0x10000, 1) for _ in range(3))  # VRAM
    ctypes.memmove(src.va, bytes(range(256)) * 256, 0x10000)
    q = client.sdma_queue()
    q.submit(sdma_copy(dst.va, src.va, 0x10000) + client.signal_packets(q, sig.va, 1))
    client.wait(sig.va, 1)
    assert ctypes.string_at(dst.va, 0x10000) == bytes(range(256)) * 256


def test_a_compute_queue_signals_repeatedly(client):
    sig = client.alloc(0x1000, 2)
    q = client.compute_queue()
    for v in range(1, 21):
        q.submit(client.signal_packets(q, sig.va, v))
        client.wait(sig.va, v)
    assert sig.u32().value == 20


def test_a_kernel_runs(client):
    code, buf, sig = client.load_kernel(), client.alloc(0x1000, 1), client.alloc(0x1000, 2)
    q = client.compute_queue()
    q.submit(client.dispatch_packets(code, buf) + client.signal_packets(q, sig.va, 1))
    client.wait(sig.va, 1)
    assert [buf.u32(i).value for i in range(64)] == [42 + i for i in range(64)]


def test_a_wait_nobody_satisfies_times_out_then_a_host_store_releases_it(client):
    gate, sig = client.alloc(0x1000, 2), client.alloc(0x1000, 2)
    q = client.compute_queue()
    q.submit(pm4_wait_ge(gate.va, 1) + client.signal_packets(q, sig.va, 7))
    assert client.wait_events(30) == WAIT_TIMEOUT  # the kernel's answer: TIMEOUT in the struct, no error
    assert client.wait_events(0) == WAIT_TIMEOUT  # timeout 0 polls
    with pytest.raises(ClientTimeout):
        client.wait(sig.va, 7, timeout_s=0.1)
    gate.u32().value = 1  # a plain CPU store: the free-running CP re-checks its WAIT_REG_MEM by itself
    client.wait(sig.va, 7)
    assert sig.u32().value == 7


def test_two_queues_feed_each_other_through_memory(client):
    flag, sig = client.alloc(0x1000, 2), client.alloc(0x1000, 2)
    waiter, setter = client.compute_queue(), client.sdma_queue()
    waiter.submit(pm4_wait_ge(flag.va, 5) + client.signal_packets(waiter, sig.va, 1))
    setter.submit(client.signal_packets(setter, flag.va, 5))
    client.wait(sig.va, 1)
    assert pm4_release_mem(0, 0)[0] >> 30 == 3  # the client's packets are type 3 PM4
