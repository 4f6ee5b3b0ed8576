"""Where the emulated KFD must answer exactly what Linux answers (issue 8 item 11), each test citing the
kernel function whose behaviour it checks (drivers/gpu/drm/amd/amdkfd, drivers/gpu/drm/amd/amdgpu)."""
from test_kfd_driver import GTT, Runtime  # noqa: F401 (the tiny boundary-only runtime of the driver tests)

from hcqsim import kfd_uapi as k
from hcqsim.kfd import EmulatedSystem

import pytest


@pytest.fixture
def rt():
    system = EmulatedSystem(num_gpus=1)
    yield Runtime(system.os)
    system.close()


@pytest.mark.parametrize("ring_size", [256, 1024, 2048])
def test_a_ring_below_one_page_is_clamped_and_skips_the_ring_bo_size_check(rt, ring_size):
    # kfd_chardev.c set_queue_properties_from_user: ring_size < KFD_MIN_QUEUE_RING_SIZE is clamped to 1 KiB
    # (and copied back). kfd_queue.c kfd_queue_buffer_get(..., properties->queue_size): the size compared is
    # expected_size >> AMDGPU_GPU_PAGE_SHIFT pages and the check is skipped when that is 0, so a sub-page
    # ring may sit at the start of a larger BO.
    args, _, _ = rt.compute_args(ring_size=0x2000)
    a = k.CreateQueueArgs(**dict(args, ring_size=ring_size))
    rt.os.ioctl(rt.kfd, k.AMDKFD_IOC_CREATE_QUEUE, a)
    assert a.ring_size == max(ring_size, k.KFD_MIN_QUEUE_RING_SIZE)


def test_alloc_with_both_vram_and_gtt_flags_takes_vram(rt):
    # amdgpu_amdkfd_gpuvm.c amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu: `if (flags & ..._VRAM)` is tested
    # before `else if (flags & ..._GTT)`, so VRAM wins; kfd_chardev.c kfd_ioctl_alloc_memory_of_gpu then
    # counts the BO in the device's VRAM usage (what AVAILABLE_MEMORY reports).
    before = rt.ioctl("AVAILABLE_MEMORY", gpu_id=rt.gpu_id()).available
    rt.alloc(4 << 20, GTT | k.KFD_IOC_ALLOC_MEM_FLAGS_VRAM)
    after = rt.ioctl("AVAILABLE_MEMORY", gpu_id=rt.gpu_id()).available
    assert before - after == 4 << 20
