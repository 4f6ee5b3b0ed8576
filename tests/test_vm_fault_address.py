"""A VM fault names the first page of the access that faulted, as hardware does (the UTCL2 reports a page;
kfd_events.c kfd_signal_vm_fault_event sets memory_exception_data.va = page_addr << PAGE_SHIFT), not the start of
an access that began on a good page. The fault record keeps both: `address` where the access started, `page`
the page that faulted; the KFD memory exception carries the page and that page's reason (NotPresent or ReadOnly).
"""
import pytest
from test_kfd_driver import GTT, Runtime  # noqa: F401 (the boundary-only runtime of the driver tests)

from hcqsim import EmulatedGPU, kfd_uapi as k, sdma
from hcqsim.kfd import EmulatedSystem

PAGE = 0x1000


def test_an_access_crossing_into_a_read_only_page_faults_at_that_page():
    gpu = EmulatedGPU("gfx1100")
    try:
        rw, ro = gpu.alloc(PAGE), gpu.alloc(PAGE, writable=False)
        assert ro.va == rw.va + PAGE  # first-fit: adjacent
        q = gpu.sdma_queue()
        q.submit(sdma.const_fill(rw.va + PAGE - 8, 0x55, 16))  # 8 bytes on the good page, 8 on the read-only one
        gpu.run()
        (f,) = gpu.faults
        assert (f.address, f.size, f.access, f.page) == (rw.va + PAGE - 8, 16, "write", ro.va)
        assert bytes(rw.view[-8:]) == bytes(8)  # checked before anything was written
    finally:
        gpu.close()


def test_an_access_crossing_into_an_unmapped_page_faults_at_that_page():
    gpu = EmulatedGPU("gfx1100")
    try:
        q = gpu.sdma_queue()  # its ring first: later allocations would take the freed pages
        a, b = gpu.alloc(PAGE), gpu.alloc(3 * PAGE)
        gpu.free(b)  # the three pages after a are unmapped now
        q.submit(sdma.copy_linear(a.va, a.va + PAGE - 4, 8))  # reads 4 good bytes, then the missing page
        gpu.run()
        (f,) = gpu.faults
        assert (f.address, f.access, f.page) == (a.va + PAGE - 4, "read", a.va + PAGE)
    finally:
        gpu.close()


@pytest.fixture
def rt():
    system = EmulatedSystem(num_gpus=1)
    yield Runtime(system.os)
    system.close()


@pytest.mark.parametrize("second", ["missing", "read-only"])
def test_the_kfd_memory_exception_names_the_page_that_faulted_and_its_reason(rt, second):
    rt.event_page()
    mem_ev = rt.event(k.KFD_IOC_EVENT_MEMORY)
    hole = rt.reserve(2 * PAGE)
    rt.alloc(PAGE, GTT, va=hole)  # writable, mapped
    if second == "read-only":
        rt.alloc(PAGE, k.KFD_IOC_ALLOC_MEM_FLAGS_GTT, va=hole + PAGE)  # no WRITABLE flag
    q = rt.sdma_queue()
    rt.submit(q, sdma.const_fill(hole + PAGE - 8, 0x55, 16))
    result, data = rt.wait([mem_ev])
    d = data[0].memory_exception_data
    assert result == k.KFD_IOC_WAIT_RESULT_COMPLETE
    expected = (1, 0) if second == "missing" else (0, 1)
    assert (d.va, d.gpu_id, (d.NotPresent, d.ReadOnly)) == (hole + PAGE, rt.gpu_id(), expected)
