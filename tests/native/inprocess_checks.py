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
    assert [f for f in native_host.failures if "AMDKFD_IOC_SVM " not in f] == []
