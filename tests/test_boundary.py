"""The real OS boundary's plumbing, exercised on what every Linux machine has (no GPU needed)."""
import ctypes
import errno
import os

import pytest

from hcqsim import kfd_uapi as K
from hcqsim.boundary import MAP_ANONYMOUS, MAP_PRIVATE, PROT_READ, PROT_WRITE
from hcqsim.runtime.real_os import RealOS


@pytest.fixture
def real():
    return RealOS()


def test_anonymous_mmap_is_writable_and_unmaps(real):
    addr = real.mmap(0, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS)
    ctypes.c_uint64.from_address(addr + 8).value = 0x1234
    assert ctypes.c_uint64.from_address(addr + 8).value == 0x1234
    real.munmap(addr, 8192)


def test_failing_mmap_raises_oserror_with_errno(real):
    with pytest.raises(OSError) as info:
        real.mmap(0, 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS)  # length 0 is EINVAL
    assert info.value.errno == errno.EINVAL


def test_ioctl_on_a_non_kfd_file_fails_like_the_kernel_says(real):
    fd = real.open("/dev/null", os.O_RDWR)
    try:
        with pytest.raises(OSError) as info:
            real.ioctl(fd, K.AMDKFD_IOC_GET_VERSION, K.GetVersionArgs())
        assert info.value.errno == errno.ENOTTY
    finally:
        real.close(fd)


def test_sysfs_reads_go_to_the_file_system(real, tmp_path):
    (tmp_path / "properties").write_text("gpu_id 4672\n")
    assert real.read_text(str(tmp_path / "properties")) == "gpu_id 4672\n"
    assert real.listdir(str(tmp_path)) == ["properties"]
    assert real.exists(str(tmp_path / "properties")) and not real.exists(str(tmp_path / "nope"))


def test_doorbell_is_one_64_bit_store(real):
    cell = (ctypes.c_uint64 * 2)()
    real.ring_doorbell(ctypes.addressof(cell) + 8, 0xDEADBEEF_00000042)
    assert cell[1] == 0xDEADBEEF_00000042 and cell[0] == 0


def test_kfd_offsets_with_bit_63_reach_mmap(real, tmp_path):
    # a regular file refuses the huge offset in the kernel (EOVERFLOW): proof that the high-bit KFD doorbell
    # offset went through to mmap as an off_t instead of failing in ctypes
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 8192)
    fd = real.open(str(path), os.O_RDONLY)
    try:
        with pytest.raises(OSError) as info:
            real.mmap(0, 4096, PROT_READ, MAP_PRIVATE, fd, K.mmap_offset(K.KFD_MMAP_TYPE_DOORBELL, 4672))
        assert info.value.errno in (errno.EOVERFLOW, errno.EINVAL)
    finally:
        real.close(fd)


def test_doorbell_fence_comes_from_libatomic(real):
    real._fence()  # a real atomic_thread_fence on machines with libatomic, a no-op otherwise
