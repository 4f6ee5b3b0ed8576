"""Run by tests/test_native_inprocess.py inside `hcqsim run -- python -m pytest -p hcqsim.native.pytest_plugin` (not
collected by the default test command: the name does not start with test_): ROCr and HIP called from Python
through ctypes, the emulator in the same process."""
from __future__ import annotations

import ctypes

HSA_AGENT_INFO_NAME, HSA_AGENT_INFO_DEVICE, HSA_DEVICE_TYPE_GPU = 0, 17, 1
AGENT_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.c_void_p)  # hsa_agent_t is one u64


def test_hsa_lists_the_emulated_gpus(hsa, native_host):
    names = []

    def visit(agent, _data):
        kind = ctypes.c_uint32()
        hsa.hsa_agent_get_info(ctypes.c_uint64(agent), HSA_AGENT_INFO_DEVICE, ctypes.byref(kind))
        if kind.value == HSA_DEVICE_TYPE_GPU:
            name = ctypes.create_string_buffer(64)
            hsa.hsa_agent_get_info(ctypes.c_uint64(agent), HSA_AGENT_INFO_NAME, name)
            names.append(name.value.decode())
        return 0

    assert hsa.hsa_iterate_agents(AGENT_CALLBACK(visit), None) == 0
    system = native_host.system
    assert names == [system.target.name] * len(system.gpus)


def test_a_hip_buffer_is_the_emulators_memory(hip, native_host):
    dev = ctypes.c_void_p()
    assert hip.hipMalloc(ctypes.byref(dev), 1 << 16) == 0
    data = bytes((i * 7) & 0xFF for i in range(1 << 16))
    assert hip.hipMemcpy(dev, data, len(data), 1) == 0  # H2D (SDMA)
    gpu = native_host.system.gpus[0]
    assert gpu.memory.find(dev.value).kind == "vram"  # the VA HIP got is a VRAM BO of emulated GPU 0
    assert gpu.memory.read(dev.value, len(data)) == data
    back = ctypes.create_string_buffer(len(data))
    assert hip.hipMemcpy(back, dev, len(data), 2) == 0  # D2H
    assert back.raw == data
    assert hip.hipFree(dev) == 0
    assert native_host.failures == []


def test_used_memory_in_sysfs_is_the_value_of_the_moment(hip, native_host):
    # what rocm-smi and friends read: the kernel computes these at each read; the interposer's copy is rewritten
    # before each open, so Python's own open() (libc open64, interposed) sees allocations as they happen
    bank = "/sys/class/kfd/kfd/topology/nodes/1/mem_banks/0/used_memory"
    minor = native_host.system.props[0]["drm_render_minor"]
    vram = f"/sys/class/drm/renderD{minor}/device/mem_info_vram_used"
    read = lambda path: int(open(path).read())  # noqa: E731
    before, before_drm = read(bank), read(vram)
    dev = ctypes.c_void_p()
    assert hip.hipMalloc(ctypes.byref(dev), 64 << 20) == 0
    assert read(bank) - before >= 64 << 20 and read(vram) - before_drm >= 64 << 20
    assert read(bank) == native_host.system.driver.memory.vram_used(0)
    assert hip.hipFree(dev) == 0
    assert read(bank) == native_host.system.driver.memory.vram_used(0) < before + (64 << 20)


def test_mmap_looked_up_through_libcs_own_handle_is_the_interposers(native_host):
    """ctypes.CDLL("libc.so.6").mmap is dlsym on libc's handle, a lookup in libc's own scope that used to find libc's
    mmap past the preload (tinygrad reserves its GPU VA that way): the interposer's dlsym answers its own mmap, so
    the reservation lands in the emulator's window as through the global scope. Names it does not define, and
    names nobody defines, look up as before."""
    import ctypes.util
    window = native_host.system.window
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    placed = []
    for lib in (ctypes.CDLL(None), libc):
        lib.mmap.restype = ctypes.c_void_p
        lib.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        va = lib.mmap(None, 1 << 21, 0, 0x02 | 0x20 | 0x4000, -1, 0)  # PROT_NONE, PRIVATE|ANONYMOUS|NORESERVE
        placed.append(window.base <= va < window.base + window.size)
    assert placed == [True, True]
    import os
    assert libc.getpid() == os.getpid()  # not interposed: libc's own
    assert not hasattr(libc, "hcq_no_such_symbol")


def test_an_emulators_own_memory_never_goes_through_the_interposer(native_host):
    """hcqsim's own window and backing mappings are system calls (memory._Kernel), not libc's now interposed mmap:
    a second emulator made in this process reserves its own window, outside the host's."""
    from hcqsim import EmulatedGPU
    window = native_host.system.window
    with EmulatedGPU() as gpu:
        buf = gpu.alloc(4096)
        buf.view[:] = 7
        assert not window.base <= gpu.window.base < window.base + window.size
        assert int(buf.view[0]) == 7
