"""hcqsim: an emulator of AMD GPU user-mode queues, and a runtime that drives real or emulated GPUs."""
from .errors import DeadlockError, DeviceFault, DeviceTimeout, Fault, HcqsimError
from .gpu import EmulatedGPU

__all__ = ["EmulatedGPU", "Fault", "HcqsimError", "DeadlockError", "DeviceFault", "DeviceTimeout"]
