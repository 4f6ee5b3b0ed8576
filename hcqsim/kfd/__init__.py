"""The emulated KFD driver (/dev/kfd, /dev/dri/renderD*) and the emulated OS boundary, split as the kernel
splits amdkfd:

- `process`: the process and its devices, process-setup ioctls, and the ioctl table assembled from the parts;
- `memory`: buffer objects, GPU mappings, apertures, the process's share of the VA window;
- `queues`: user queues, SDMA slots, doorbells, the run list;
- `events`: events, the event page, interrupts from the GPUs, WAIT_EVENTS;
- `topology`: the sysfs tree and reading it;
- `uaccess`: copy_from_user / copy_to_user;
- `emulated_os`: `EmulatedOS`, the runtime's `OSBoundary` over all of it;
- `system`: `EmulatedSystem`, the machine (GPUs, topology, driver, OS);
- `fault_injection`: `system.inject`, failures reported as the kernel reports the real ones (HCQSIM_INJECT).

The driver answers the very ioctls a runtime issues on real hardware, with the kernel's checks and errnos
(sources: HARDWARE_FACTS.md section 1 and Linux drivers/gpu/drm/amd/amdkfd/{kfd_chardev,kfd_queue,kfd_events}.c,
amdgpu/amdgpu_amdkfd_gpuvm.c). A failing ioctl raises OSError(errno, message) and leaves driver state as it was.
Where the emulator cannot do what the kernel does (e.g. map one page at two addresses), it fails with a message
that says "emulator limitation" rather than silently doing something else.

Progress points (DESIGN_NOTES 3, the default): a doorbell store through `EmulatedOS.ring_doorbell`, and
WAIT_EVENTS, which drives every GPU until the awaited events fire or the machine is quiet (then, as the kernel
does, TIMEOUT). `free_running`: the GPUs run on a background thread (`free_running.GpuThread`) that notices
plain doorbell stores itself.
"""
from .emulated_os import EmulatedOS
from .process import KfdDriver
from .queues import queue_sizes
from .system import EmulatedSystem

__all__ = ["EmulatedSystem", "EmulatedOS", "KfdDriver", "queue_sizes"]
