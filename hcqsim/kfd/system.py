"""One emulated machine: N `EmulatedGPU`s sharing one VA window, their sysfs topology, the emulated KFD
driver for one process, and `.os`, the `EmulatedOS` a runtime talks through."""
from __future__ import annotations

import threading
import weakref

from ..coherence import check_model, default_model
from ..errors import BlockedQueue
from ..gpu import EmulatedGPU
from ..memory import VaWindow
from ..targets import get_target
from .emulated_os import EmulatedOS
from .fault_injection import from_environment
from .free_running import GpuThread, IdlePolicy
from .process import KfdDriver, ProcessDevice
from .queues import queue_sizes
from .topology import NODE_FACTS, Sysfs, build_topology, gpu_node_properties, make_gpu_ids


KERNEL_VERSION = (6, 12)  # kfd_queue_acquire_buffers' queue-buffer checks first appear in 6.12


class EmulatedSystem:
    """N emulated GPUs behind one emulated KFD, sharing one VA window (so a peer mapping is the same host
    range at the same VA on every GPU). `.os` is the runtime's boundary.

    `free_running=False` (the default, deterministic): the GPUs run only at progress points (a doorbell through
    the boundary, WAIT_EVENTS, the emulator-only `deadlock_report` query). `free_running=True`: they run on a
    background thread (`free_running.GpuThread`) that notices plain doorbell stores by itself, as hardware does,
    for KFD clients that never call into the driver to make progress. What that gives up: the interleaving of
    host stores with GPU packets (and so traces and timestamps across queues fed by the host) depends on thread
    timing; a seeded policy still orders what is ready at each step. `close()` joins the thread.

    `memory_model` ("coherent", "report", "adversarial") is every GPU's cache model; `memory_reports` collects the
    records of all of them (docs/memory_model.md).

    Every driver entry (ioctl, mmap, munmap, doorbell, queries) and every engine step holds `lock`; `cond`
    (on the same lock) is notified whenever an event fires or work may have arrived."""

    def __init__(self, num_gpus: int = 1, target: str = "gfx1100", seed: int = 0, policy="run_to_block",
                 vram_size: int = 16 << 30, free_running: bool = False, idle_policy: IdlePolicy = IdlePolicy(),
                 kernel_version: tuple[int, int] = KERNEL_VERSION, memory_model: str | None = None,
                 svm: bool = True):
        if num_gpus < 1:
            raise ValueError("an emulated system needs at least one GPU")
        # the amdkfd whose rules CREATE_QUEUE follows: the current exact ones by default; (6, 11) or older accepts
        # the EOP / control-stack / CWSR sizes older thunks compute themselves (queues.py)
        self.kernel_version = tuple(kernel_version)
        # SVM (kfd/svm.py) as a kernel with CONFIG_HSA_AMD_SVM has it; False: as one without (the nodes lack
        # HSA_CAP_SVMAPI_SUPPORTED, AMDKFD_IOC_SVM answers -EPERM), so ROCr takes its non-SVM paths
        self.svm = bool(svm)
        self.target = get_target(target)
        if self.target.name not in NODE_FACTS:
            raise ValueError(f"no sysfs node facts for {self.target.name}")
        self.vram_size = vram_size
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.free_running = bool(free_running)
        # before any resource is taken: a bad name loses nothing; None: HCQSIM_MEMORY_MODEL, else coherent (the GPUs
        # get None too, so they know their model came from the environment)
        self.memory_model = check_model(default_model() if memory_model is None else memory_model)
        self.memory_reports: list = []  # MemoryReport records of every GPU (hcqsim.coherence), in order
        self.order = None  # report mode: the machine's happens-before clocks (coherence.order.Order; set by EmulatedOS)
        self.window = VaWindow()
        self.gpu_ids = make_gpu_ids(self.target.name, num_gpus)
        self.gpus = [EmulatedGPU(target, seed=seed + i, index=i, gpu_id=self.gpu_ids[i], window=self.window,
                                 policy=policy, autorun=not free_running, memory_model=memory_model,
                                 memory_reports=self.memory_reports) for i in range(num_gpus)]
        self.props = [gpu_node_properties(self.target, i, num_gpus, self.svm) for i in range(num_gpus)]
        sizes = queue_sizes(self.target)
        devices = [ProcessDevice(i, g, self.gpu_ids[i], self.props[i], sizes) for i, g in enumerate(self.gpus)]
        self.driver = KfdDriver(self, devices)
        self.sysfs = Sysfs(build_topology(self.target, self.gpu_ids, vram_size, self.driver.memory.vram_used,
                                          self.svm))
        self.os = EmulatedOS(self)
        self.inject = from_environment(self, seed)  # fault injection (kfd/fault_injection.py; HCQSIM_INJECT)
        self.closed = False
        # host threads seen waiting on this machine: with more than one, a wait another thread could release is
        # not reported as a deadlock at once (it times out, as on hardware)
        self.host_threads: set[int] = set()
        self.thread: GpuThread | None = GpuThread(self, idle_policy) if free_running else None
        _live.add(self)

    def wake(self) -> None:
        """Work may have arrived or an event fired: wake the GPU thread and every sleeper."""
        if self.thread is not None:
            self.thread.kick()
        else:
            with self.cond:
                self.cond.notify_all()

    def stuck(self) -> list | None:
        """The blocked queues and spinning waves when no GPU can change the machine any more, else None.
        Progress-point mode: runs a bounded progress point first and answers once every GPU is quiet or only
        spins. Free-running: delivers pending doorbell stores and looks, without executing (the thread does
        that). Whether a *wait* may be reported as a deadlock is `deadlock_report`'s question (EmulatedOS)."""
        with self.lock:
            driver = self.driver
            if self.thread is not None:  # free-running: look without executing (the thread does that)
                if driver.queues.poll_doorbells() or not driver.settled():
                    self.wake()
                    return None
                return driver.blocked() + driver.spinning()
            driver.progress()
            if not driver.settled():
                return None  # work remains: the waiter keeps advancing the GPUs
            return driver.blocked() + driver.spinning()

    def single_host_thread(self) -> bool:
        """Only the calling thread can change this machine: no other thread waited on it, and no other live
        non-daemon thread exists that might store to its memory. Then (and only then, in progress-point mode) a
        wait on a settled machine is reported at once instead of timing out."""
        me = threading.current_thread()
        others = [t for t in threading.enumerate() if t is not me and t.is_alive()]
        return not any(not t.daemon or t.ident in self.host_threads for t in others)

    def describe(self) -> str:
        """Every queue's state and what blocked queues wait for: what a test report shows when a client's
        test fails or times out on this machine."""
        with self.lock:
            lines = [f"emulated system ({len(self.gpus)} x {self.target.name}, "
                     f"{'free-running' if self.free_running else 'progress points'}"
                     f"{', closed' if self.closed else ''})"]
            suspended = self.thread.suspended_in_step() if self.thread is not None else None
            if suspended is not None:
                lines.append("  GPU thread suspended inside an engine step (code running on it released the system "
                             "lock: no doorbell is delivered until it returns); its innermost frames:")
                lines += [f"    {line.rstrip()}" for chunk in suspended for line in chunk.splitlines()]
            if self.thread is not None and self.thread.error is not None:
                state = "alive" if self.thread.alive else "stopped"
                lines.append(f"  GPU thread ({state}): {self.thread.errors} step(s) raised an emulator error, the "
                             f"last: {self.thread.error!r}")
            for gpu in self.gpus:
                lines += [f"  {gpu.label}: {q.status()}" for q in gpu.queues]
                lines += [f"    blocked: {b}" for b in gpu.blocked()]
                lines += [f"    fault: {str(f).splitlines()[0]}" for f in gpu.faults[-3:]]
            return "\n".join(lines)

    def render_path(self, index: int) -> str:
        return f"/dev/dri/renderD{self.props[index]['drm_render_minor']}"

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.thread is not None:
            self.thread.close()
        _live.discard(self)
        with self.lock:
            self._close_parts()

    def _close_parts(self) -> None:
        self.driver.close()
        for gpu in self.gpus:
            gpu.close()
        self.window.close()

    def __enter__(self) -> "EmulatedSystem":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_live: "weakref.WeakSet[EmulatedSystem]" = weakref.WeakSet()


def live_systems() -> list[EmulatedSystem]:
    """Emulated systems not closed yet (the pytest plugin describes them when a test fails)."""
    return [s for s in list(_live) if not s.closed]
