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
