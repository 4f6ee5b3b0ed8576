"""AMDKFD_IOC_SVM as kfd_svm.c answers it (hcqsim/kfd/svm.py), driven through the emulated OS boundary like the
thunk drives it (hsaKmtSVMSetAttr / hsaKmtSVMGetAttr: the attributes follow the header and their size is in the
request). tests/test_native_hip.py runs HIP's hipMallocManaged / hipHostRegister / ROCr's SVM CWSR areas on top.

- SET_ATTR records attributes on split, disjoint ranges; GET_ATTR folds the ranges it meets the kernel's way and
  answers the defaults for memory SVM has not seen;
- a GPU with ACCESS or ACCESS_IN_PLACE gets the range in its page table at the process's own address, with GPU_RO,
  GPU_EXEC and the CPU mapping's protection; NO_ACCESS takes it away; the CPU unmapping the pages removes it (at
  once through the emulator, before the GPUs next run behind its back);
- the errnos: unaligned or empty (EINVAL), unmapped memory (EFAULT), a mapped BO there (EADDRINUSE, both ways),
  unknown GPU or attribute (EINVAL), a kernel without SVM (EPERM, and no HSA_CAP_SVMAPI_SUPPORTED);
- CREATE_QUEUE takes an SVM range as the CWSR area when it is mapped on the GPU with GPU_ALWAYS_MAPPED.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import mmap

import pytest

from hcqsim import kfd_uapi as k
from hcqsim.kfd import EmulatedSystem

PAGE = 4096
A = k  # attribute names below read as A.KFD_IOCTL_SVM_ATTR_...
ACCESS, IN_PLACE, NO_ACCESS = (k.KFD_IOCTL_SVM_ATTR_ACCESS, k.KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE,
                               k.KFD_IOCTL_SVM_ATTR_NO_ACCESS)
PREFERRED, PREFETCH = k.KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, k.KFD_IOCTL_SVM_ATTR_PREFETCH_LOC
SET_FLAGS, CLR_FLAGS, GRANULARITY = (k.KFD_IOCTL_SVM_ATTR_SET_FLAGS, k.KFD_IOCTL_SVM_ATTR_CLR_FLAGS,
                                     k.KFD_IOCTL_SVM_ATTR_GRANULARITY)
UNDEFINED = k.KFD_IOCTL_SVM_LOCATION_UNDEFINED
RW = mmap.PROT_READ | mmap.PROT_WRITE
MAP_FIXED = 0x10  # not in Python's mmap module
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
libc.mmap.restype, libc.mmap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                                         ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
DEFAULT_FLAGS = k.KFD_IOCTL_SVM_FLAG_HOST_ACCESS | k.KFD_IOCTL_SVM_FLAG_COHERENT


def raises(err: int, fn, *args) -> OSError:
    with pytest.raises(OSError) as info:
        fn(*args)
    assert info.value.errno == err, f"expected {errno.errorcode[err]}, got {info.value!r}"
    return info.value


class Svm:
    """A process on an emulated system, with its GPUs' VMs acquired, calling SVM as libhsakmt's svm.c does."""

    def __init__(self, system: EmulatedSystem, kfd: int | None = None):
        self.system, self.os = system, system.os
        self.kfd = kfd if kfd is not None else self.os.open("/dev/kfd")
        for i, gpu_id in enumerate(system.gpu_ids if kfd is None else []):  # a given kfd fd has its VMs
            drm = self.os.open(system.render_path(i))
            self.os.ioctl(self.kfd, k.AMDKFD_IOC_ACQUIRE_VM, k.AcquireVmArgs(drm_fd=drm, gpu_id=gpu_id))
        self.keep: list[tuple[int, int]] = []

    def memory(self, pages: int, prot: int = RW) -> int:
        """Ordinary process memory (like malloc's or hipMallocManaged's), outside the emulator's window."""
        va = libc.mmap(None, pages * PAGE, prot, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        assert va not in (None, ctypes.c_void_p(-1).value)
        self.keep.append((va, pages * PAGE))
        return va

    def unmap(self, va: int, size: int) -> None:
        """The CPU unmaps memory behind the driver's back (free() of a large block)."""
        assert libc.munmap(va, size) == 0

    def close(self) -> None:
        for va, size in self.keep:
            libc.munmap(va, size)

    def call(self, op: int, start: int, size: int, attrs: list[tuple[int, int]], nattr: int | None = None):
        """One AMDKFD_IOC_SVM: the header, then the attributes, the request sized to hold them."""
        n = len(attrs)

        class Args(ctypes.LittleEndianStructure):
            _fields_ = [("header", k.SvmArgs), ("attrs", k.SvmAttribute * n)]
        args = Args()
        args.header.start_addr, args.header.size, args.header.op = start, size, op
        args.header.nattr = n if nattr is None else nattr
        for i, (t, v) in enumerate(attrs):
            args.attrs[i].type, args.attrs[i].value = t, v
        request = k.IOWR(k.AMDKFD_IOCTL_BASE, 0x20, ctypes.sizeof(Args))
        self.os.ioctl(self.kfd, request, args)
        return [(a.type, a.value) for a in args.attrs]

    def set(self, start: int, size: int, *attrs: tuple[int, int]) -> None:
        self.call(k.KFD_IOCTL_SVM_OP_SET_ATTR, start, size, list(attrs))

    def get(self, start: int, size: int, *attrs: tuple[int, int]) -> list[tuple[int, int]]:
        return self.call(k.KFD_IOCTL_SVM_OP_GET_ATTR, start, size, list(attrs))

    def bo(self, size: int) -> int:
        """A GTT BO at a VA of the process's, mapped on GPU 0 (hsaKmtAllocMemory + hsaKmtMapMemoryToGPU)."""
        va = self.os.mmap(0, size, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000)  # MAP_NORESERVE reservation
        gpu_id = self.system.gpu_ids[0]
        a = k.AllocMemoryOfGpuArgs(va_addr=va, size=size, gpu_id=gpu_id,
                                   flags=k.KFD_IOC_ALLOC_MEM_FLAGS_GTT | k.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE)
        self.os.ioctl(self.kfd, k.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, a)
        ids = (ctypes.c_uint32 * 1)(gpu_id)
        self.os.ioctl(self.kfd, k.AMDKFD_IOC_MAP_MEMORY_TO_GPU, k.MapMemoryToGpuArgs(
            handle=a.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1))
        return va

    def gpu(self, i: int):
        return self.system.gpus[i]


@pytest.fixture
def svm():
    with EmulatedSystem(num_gpus=2, target="gfx942", vram_size=1 << 30) as system:
        s = Svm(system)
        yield s
    s.close()


# -- attributes ----------------------------------------------------------------------------------------------


def test_memory_svm_has_not_seen_answers_the_kernels_defaults(svm):
    va = svm.memory(2)
    got = svm.get(va, 2 * PAGE, (PREFERRED, 0), (PREFETCH, 0), (ACCESS, svm.system.gpu_ids[0]), (SET_FLAGS, 0),
                  (CLR_FLAGS, 0), (GRANULARITY, 0))
    assert got == [(PREFERRED, UNDEFINED), (PREFETCH, UNDEFINED), (NO_ACCESS, svm.system.gpu_ids[0]),
                   (SET_FLAGS, DEFAULT_FLAGS), (CLR_FLAGS, ~DEFAULT_FLAGS & 0xFFFFFFFF), (GRANULARITY, 9)]


def test_a_set_splits_ranges_and_a_get_folds_the_ranges_it_meets(svm):
    va = svm.memory(4)
    g0, g1 = svm.system.gpu_ids
    svm.set(va, 4 * PAGE, (PREFERRED, g0), (GRANULARITY, 0x40))  # granularity is capped at 0x3f
    svm.set(va + PAGE, PAGE, (PREFETCH, g1), (SET_FLAGS, k.KFD_IOCTL_SVM_FLAG_GPU_RO), (GRANULARITY, 5))
    middle = svm.get(va + PAGE, PAGE, (PREFERRED, 0), (PREFETCH, 0), (SET_FLAGS, 0), (GRANULARITY, 0))
    assert middle == [(PREFERRED, g0), (PREFETCH, g1), (SET_FLAGS, DEFAULT_FLAGS | k.KFD_IOCTL_SVM_FLAG_GPU_RO),
                      (GRANULARITY, 5)]
    whole = svm.get(va, 4 * PAGE, (PREFERRED, 0), (PREFETCH, 0), (SET_FLAGS, 0), (CLR_FLAGS, 0), (GRANULARITY, 0))
    assert whole == [(PREFERRED, g0),  # every range agrees
                     (PREFETCH, UNDEFINED),  # one page prefetched, the others not: no common location
                     (SET_FLAGS, DEFAULT_FLAGS),  # set on every range
                     (CLR_FLAGS, ~(DEFAULT_FLAGS | k.KFD_IOCTL_SVM_FLAG_GPU_RO) & 0xFFFFFFFF),  # clear on every range
                     (GRANULARITY, 5)]  # the smallest
    assert [(r.start - va, r.end - va) for r in svm.system.driver.svm.ranges] == [
        (0, PAGE), (PAGE, 2 * PAGE), (2 * PAGE, 4 * PAGE)]
    assert svm.get(va + PAGE, 3 * PAGE, (PREFETCH, 0)) == [(PREFETCH, UNDEFINED)]  # prefetched first, then not
    tail = svm.get(va + 2 * PAGE, 2 * PAGE, (PREFETCH, 0), (GRANULARITY, 0))
    assert tail == [(PREFETCH, UNDEFINED), (GRANULARITY, 0x3F)]


def test_access_is_reported_per_gpu(svm):
    va = svm.memory(1)
    g0, g1 = svm.system.gpu_ids
    svm.set(va, PAGE, (IN_PLACE, g1))
    assert svm.get(va, PAGE, (ACCESS, g0), (ACCESS, g1)) == [(NO_ACCESS, g0), (IN_PLACE, g1)]
    svm.set(va, PAGE, (ACCESS, g0), (NO_ACCESS, g1))
    assert svm.get(va, PAGE, (ACCESS, g0), (ACCESS, g1)) == [(ACCESS, g0), (NO_ACCESS, g1)]


# -- GPU page tables ---------------------------------------------------------------------------------------------


def test_a_gpu_with_access_sees_the_processes_pages_at_their_own_address(svm):
    va = svm.memory(2)
    g0, g1 = svm.system.gpu_ids
    ctypes.c_uint32.from_address(va + 8).value = 0xABCD
    assert svm.gpu(0).memory.find(va) is None  # XNACK off: no access until asked for
    svm.set(va, 2 * PAGE, (ACCESS, g0), (SET_FLAGS, k.KFD_IOCTL_SVM_FLAG_GPU_EXEC))
    m = svm.gpu(0).memory.find(va + PAGE)
    assert (m.start, m.end, m.writable, m.executable) == (va, va + 2 * PAGE, True, True)
    assert svm.gpu(0).memory.read_u32(va + 8) == 0xABCD
    svm.gpu(0).memory.write_u32(va + PAGE, 77)
    assert ctypes.c_uint32.from_address(va + PAGE).value == 77  # the CPU's own page
    assert svm.gpu(1).memory.find(va) is None  # the other GPU was not given access
    svm.set(va + PAGE, PAGE, (NO_ACCESS, g0))  # the split remaps the first page, the second leaves
    assert svm.gpu(0).memory.find(va).end == va + PAGE and svm.gpu(0).memory.find(va + PAGE) is None


def test_gpu_ro_and_a_read_only_cpu_mapping_give_a_read_only_gpu_mapping(svm):
    va, ro = svm.memory(1), svm.memory(1, prot=mmap.PROT_READ)
    g0 = svm.system.gpu_ids[0]
    svm.set(va, PAGE, (ACCESS, g0), (SET_FLAGS, k.KFD_IOCTL_SVM_FLAG_GPU_RO))
    svm.set(ro, PAGE, (ACCESS, g0))
    assert not svm.gpu(0).memory.find(va).writable and not svm.gpu(0).memory.find(ro).writable
    svm.set(va, PAGE, (CLR_FLAGS, k.KFD_IOCTL_SVM_FLAG_GPU_RO))
    assert svm.gpu(0).memory.find(va).writable


def test_xnack_on_gives_every_gpu_access_to_new_ranges():
    with EmulatedSystem(num_gpus=2, target="gfx942", vram_size=1 << 30) as system:
        s = Svm(system)
        mode = k.SetXnackModeArgs(xnack_enabled=1)
        s.os.ioctl(s.kfd, k.AMDKFD_IOC_SET_XNACK_MODE, mode)
        va = s.memory(1)
        g0, g1 = system.gpu_ids
        assert s.get(va, PAGE, (ACCESS, g0), (ACCESS, g1)) == [(ACCESS, g0), (ACCESS, g1)]  # the defaults
        s.set(va, PAGE, (PREFERRED, 0))
        assert system.gpus[0].memory.find(va) is not None and system.gpus[1].memory.find(va) is not None


def test_unmapping_the_pages_removes_them_from_svm_and_the_gpu_before_the_gpus_run(svm):
    g0 = svm.system.gpu_ids[0]
    va = svm.memory(3)
    svm.set(va, 3 * PAGE, (ACCESS, g0))
    svm.unmap(va + PAGE, PAGE)  # the middle page goes behind the driver's back
    svm.system.driver.before_gpus_run()
    assert [(r.start - va, r.end - va) for r in svm.system.driver.svm.ranges] == [(0, PAGE), (2 * PAGE, 3 * PAGE)]
    space = svm.gpu(0).memory
    assert space.find(va + PAGE) is None and space.find(va) is not None and space.find(va + 2 * PAGE) is not None
    assert svm.get(va, PAGE, (ACCESS, g0)) == [(ACCESS, g0)]  # the rest keeps its attributes


def test_munmap_through_the_emulator_takes_the_pages_out_at_once(svm):
    g0 = svm.system.gpu_ids[0]
    va = svm.os.mmap(0, 3 * PAGE, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000)  # a thunk reservation
    svm.os.mmap(va, 3 * PAGE, RW, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_FIXED)  # memory in it
    svm.set(va, 3 * PAGE, (ACCESS, g0))
    svm.os.munmap(va + 2 * PAGE, PAGE)  # the emulator unbacks the page now: the GPU must not keep it
    space = svm.gpu(0).memory
    assert space.find(va + 2 * PAGE) is None and space.find(va).end == va + 2 * PAGE
    svm.os.mmap(va, PAGE, RW, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_FIXED)  # mapped over: new pages
    assert space.find(va) is None and space.find(va + PAGE) is not None
    assert [(r.start - va, r.end - va) for r in svm.system.driver.svm.ranges] == [(PAGE, 2 * PAGE)]


# -- errors ------------------------------------------------------------------------------------------------------


def test_unaligned_or_empty_ranges_are_einval(svm):
    va = svm.memory(1)
    raises(errno.EINVAL, svm.set, va + 8, PAGE)
    raises(errno.EINVAL, svm.set, va, 100)
    raises(errno.EINVAL, svm.set, va, 0)
    raises(errno.EINVAL, svm.call, 7, va, PAGE, [])  # neither SET nor GET


def test_memory_the_process_does_not_have_is_efault(svm):
    va = svm.memory(2)
    svm.unmap(va, 2 * PAGE)
    raises(errno.EFAULT, svm.set, va, PAGE, (ACCESS, svm.system.gpu_ids[0]))
    raises(errno.EFAULT, svm.get, va, PAGE, (PREFERRED, 0))


def test_unknown_gpus_and_attributes_are_einval(svm):
    va = svm.memory(1)
    raises(errno.EINVAL, svm.set, va, PAGE, (ACCESS, 0x1234))
    raises(errno.EINVAL, svm.set, va, PAGE, (PREFETCH, UNDEFINED))  # PREFETCH_LOC takes SYSMEM or a GPU only
    raises(errno.EINVAL, svm.set, va, PAGE, (8, 0))
    raises(errno.EINVAL, svm.get, va, PAGE, (NO_ACCESS, svm.system.gpu_ids[0]))  # not a question GET answers
    e = raises(errno.EINVAL, svm.call, k.KFD_IOCTL_SVM_OP_GET_ATTR, va, PAGE, [(PREFERRED, 0)], 3)
    assert "nattr 3" in str(e)  # more attributes than the request carries
    assert svm.system.driver.svm.ranges == []  # a refused SET changes nothing


def test_svm_and_gpu_mapped_bos_exclude_each_other_with_eaddrinuse(svm):
    bo = svm.bo(PAGE)  # allocated and mapped on GPU 0
    raises(errno.EADDRINUSE, svm.set, bo, PAGE, (ACCESS, svm.system.gpu_ids[0]))
    raises(errno.EADDRINUSE, svm.get, bo, PAGE, (PREFERRED, 0))
    va = svm.os.mmap(0, PAGE, 0, 0x22 | 0x4000)  # a thunk reservation in the window ...
    svm.os.mmap(va, PAGE, 3, 0x22 | 0x10)  # ... with memory in it, registered with SVM
    svm.set(va, PAGE, (PREFERRED, 0))
    alloc = k.AllocMemoryOfGpuArgs(va_addr=va, size=PAGE, gpu_id=svm.system.gpu_ids[0],
                                   flags=k.KFD_IOC_ALLOC_MEM_FLAGS_GTT | k.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE)
    e = raises(errno.EADDRINUSE, svm.os.ioctl, svm.kfd, k.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, alloc)
    assert "already allocated by SVM" in str(e)


def test_a_kernel_without_svm_answers_eperm_and_does_not_offer_it():
    with EmulatedSystem(target="gfx942", vram_size=1 << 30, svm=False) as system:
        s = Svm(system)
        raises(errno.EPERM, s.set, s.memory(1), PAGE, (PREFERRED, 0))
        props = system.os.read_text("/sys/devices/virtual/kfd/kfd/topology/nodes/1/properties")
        capability = int(next(line.split()[1] for line in props.splitlines() if line.startswith("capability ")))
        assert not capability & k.HSA_CAP_SVMAPI_SUPPORTED
    with EmulatedSystem(target="gfx942", vram_size=1 << 30) as system:
        props = system.os.read_text("/sys/devices/virtual/kfd/kfd/topology/nodes/1/properties")
        capability = int(next(line.split()[1] for line in props.splitlines() if line.startswith("capability ")))
        assert capability & k.HSA_CAP_SVMAPI_SUPPORTED


# -- queues ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("always_mapped", [True, False])
def test_create_queue_takes_an_svm_cwsr_area_only_when_it_is_always_mapped_on_the_gpu(monkeypatch, always_mapped):
    from kfd_client import VRAM, Client
    cwsr = {}
    system = EmulatedSystem(target="gfx942", vram_size=1 << 30)
    svm = None

    def alloc(client, size, flags):  # the CWSR area is SVM memory, as ROCr 6.1 makes it; the rest stays BOs
        if size < (1 << 20) or flags != VRAM:
            return real_alloc(client, size, flags)
        va = svm.memory(size // PAGE)
        flags = k.KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED if always_mapped else 0
        svm.set(va, size, (ACCESS, client.gpu_id), (SET_FLAGS, flags))
        cwsr["va"] = va
        return type("Mem", (), {"va": va, "size": size, "handle": 0})()
    real_alloc = Client.alloc
    monkeypatch.setattr(Client, "alloc", alloc)
    try:
        client = Client(system.os)
        svm = Svm(system, client.kfd)
        if always_mapped:
            client.compute_queue()
        else:
            e = raises(errno.EINVAL, client.compute_queue)
            assert "CWSR area" in str(e)
        assert "va" in cwsr
    finally:
        system.close()
        if svm is not None:
            svm.close()
