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


# -- counts are checked before anything is allocated (issue 22) -------------------------------------

import ctypes  # noqa: E402
import errno  # noqa: E402

from hcqsim import drm_uapi as d  # noqa: E402
from hcqsim.kfd.uaccess import KMALLOC_MAX_SIZE  # noqa: E402


def _errno(fn, *args, **kw) -> int:
    with pytest.raises(OSError) as e:
        fn(*args, **kw)
    return e.value.errno


@pytest.mark.parametrize("name", ["MAP_MEMORY_TO_GPU", "UNMAP_MEMORY_FROM_GPU"])
def test_a_device_count_past_what_kmalloc_gives_is_enomem_before_the_array_is_read(rt, name):
    # kfd_chardev.c kfd_ioctl_map_memory_to_gpu / kfd_ioctl_unmap_memory_from_gpu: n_devices == 0 and
    # n_success > n_devices are -EINVAL, then kmalloc_array(n_devices, 4) (-ENOMEM when it fails: more than
    # KMALLOC_MAX_SIZE), then copy_from_user (-EFAULT), then the handle. An unmapped array pointer shows the order.
    mem = rt.alloc(4096, GTT)
    call = lambda n: rt.ioctl(name, handle=mem.handle, device_ids_array_ptr=0x1000, n_devices=n)
    assert _errno(call, KMALLOC_MAX_SIZE // 4) == errno.EFAULT  # the largest array kmalloc gives: then copied
    assert _errno(call, KMALLOC_MAX_SIZE // 4 + 1) == errno.ENOMEM
    assert _errno(call, 0xFFFFFFFF) == errno.ENOMEM  # 16 GiB: refused, never allocated (it once was: MemoryError)
    assert _errno(call, 0) == errno.EINVAL


def test_process_apertures_new_with_a_huge_node_count_is_enomem(rt):
    # kfd_chardev.c kfd_ioctl_get_process_apertures_new: num_of_nodes 0 returns the count; otherwise
    # kzalloc(sizeof(struct kfd_process_device_apertures) * num_of_nodes) first (-ENOMEM when it fails), then
    # min(n_pdds, num_of_nodes) entries are copied out.
    out = (k.ProcessDeviceApertures * 1)()
    most = KMALLOC_MAX_SIZE // ctypes.sizeof(k.ProcessDeviceApertures)
    a = rt.ioctl("GET_PROCESS_APERTURES_NEW", kfd_process_device_apertures_ptr=ctypes.addressof(out),
                 num_of_nodes=most)
    assert a.num_of_nodes == 1 and out[0].gpu_id == rt.gpu_id()
    for huge in (most + 1, 0xFFFFFFFF):
        assert _errno(rt.ioctl, "GET_PROCESS_APERTURES_NEW", kfd_process_device_apertures_ptr=ctypes.addressof(out),
                      num_of_nodes=huge) == errno.ENOMEM


# -- command numbers outside the tables -------------------------------------------------------------

@pytest.mark.parametrize("nr", [0x00, k.AMDKFD_COMMAND_END, 0x40, 0xFF])
def test_a_kfd_command_nr_outside_the_table_is_enotty(rt, nr):
    # kfd_chardev.c kfd_ioctl: nr >= AMDKFD_CORE_IOCTL_COUNT, or outside [AMDKFD_COMMAND_START,
    # AMDKFD_COMMAND_END), is -ENOTTY since upstream commit 57af162bfc8c ("drm/amdkfd: return -ENOTTY for
    # unsupported IOCTLs", backported to the stable kernels down to 5.10 in December 2025); older kernels
    # answered the function's initial -EINVAL. hcqsim follows current kernels.
    assert _errno(rt.os.ioctl, rt.kfd, k.IOWR("K", nr, 8), k.GetVersionArgs()) == errno.ENOTTY


@pytest.mark.parametrize("nr", [0xD3, 0xE0, 0xFF])
def test_a_drm_core_nr_past_the_core_table_is_einval(rt, nr):
    # drm_ioctl.c drm_ioctl: a core nr (not in [DRM_COMMAND_BASE, DRM_COMMAND_END)) with
    # nr >= DRM_CORE_IOCTL_COUNT goes to err_i1 with retcode -EINVAL; the table ends at
    # DRM_IOCTL_GEM_CHANGE_HANDLE (0xD2, include/uapi/drm/drm.h).
    drm = rt.gpus[0][2]
    assert _errno(rt.os.ioctl, drm, k.IOWR("d", nr, 8), bytearray(8)) == errno.EINVAL
    assert _errno(rt.os.ioctl, drm, k.IOWR("d", 0xA0, 8), bytearray(8)) == errno.EOPNOTSUPP  # in the table
    assert d.DRM_COMMAND_END == 0xA0


# -- the errno table (tests/kfd_errnos.py): every row equals Linux -----------------------------------

from tests.kfd_errnos import ROWS, check  # noqa: E402


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_a_bad_request_gets_the_errno_linux_returns(row):
    ok, got = check(row)
    assert ok, f"{row.name}: hcqsim answers {got}; Linux {errno.errorcode.get(row.errno, row.errno)} ({row.kernel})"
