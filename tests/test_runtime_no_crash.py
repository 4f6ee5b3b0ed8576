"""No Python path of hcqsim crashes the process (issue 22): a closed device refuses with DeviceClosedError, a
closed system leaves no address that segfaults a thread still reading it, a freed BO stays readable while a CPU
mapping holds it (as on Linux), and a GPU access to USERPTR memory whose host pages were unmapped is a VM fault
of that queue.

Each scenario runs in a fresh interpreter: before the fixes each of them killed the process with SIGSEGV, which
in-process would take the whole test run down instead of failing one test.
"""
import os
import signal
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_isolated(code: str) -> list[str]:
    """Run `code` in a fresh interpreter; its stdout lines. Fails on any crash or nonzero exit."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tests")]))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          timeout=120)
    if proc.returncode < 0:
        raise AssertionError(f"the process died of {signal.Signals(-proc.returncode).name}:\n{proc.stdout}"
                             f"\n{proc.stderr}")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


CLOSED_DEVICE = """
    from hcqsim.errors import DeviceClosedError
    from hcqsim.runtime import open_device
    dev = open_device("sim")
    buf, sig = dev.alloc(4096), dev.new_signal(3)
    dev.copyin(buf, b"staged")  # the staging buffers exist: their memory is what a late copyin touched
    dev.close()
    for name, call in [("copyin", lambda: dev.copyin(buf, b"x")), ("copyout", lambda: dev.copyout(buf, 4)),
                       ("Signal.value", lambda: sig.value), ("Signal.wait", lambda: sig.wait(1)),
                       ("set Signal.value", lambda: setattr(sig, "value", 1)), ("Buffer.view", lambda: buf.view),
                       ("alloc", lambda: dev.alloc(64)), ("new_signal", lambda: dev.new_signal()),
                       ("free", lambda: dev.free(buf)), ("synchronize", dev.synchronize),
                       ("copy_queue", lambda: dev.copy_queue()), ("compute_queue", lambda: dev.compute_queue())]:
        try:
            call()
            print(name, "accepted")
        except DeviceClosedError as e:
            print(name, "refused", "is closed" in str(e) and dev.label in str(e))
    print(repr(sig))
"""


def test_every_use_of_a_closed_device_raises_device_closed_naming_it():
    lines = run_isolated(CLOSED_DEVICE)
    refused = [line for line in lines if " refused " in line]
    assert len(refused) == 12 and all(line.endswith("True") for line in refused), lines
    assert lines[-1].endswith("device closed)")


POLL_WHILE_CLOSING = """
    import ctypes, threading, time
    from hcqsim.runtime import open_device
    for free_running in (True, False):
        dev = open_device("sim", free_running=free_running)
        sig, buf = dev.new_signal(5), dev.alloc(4096)
        view, addr = buf.view, sig.value_addr  # raw pointers a polling thread keeps using
        buf.view[0] = 2
        stop, seen = [], []
        def poll():
            while not stop:
                seen.append(int(view[0]) + ctypes.c_uint64.from_address(addr).value)
        t = threading.Thread(target=poll)
        t.start()
        time.sleep(0.05)
        dev.close()  # the last device: the emulated system closes under the poller
        time.sleep(0.05)
        stop.append(1)
        t.join()
        print(free_running, seen[0], seen[-1])
"""


def test_closing_a_system_while_another_thread_polls_its_memory_does_not_crash():
    lines = run_isolated(POLL_WHILE_CLOSING)
    assert lines == ["True 7 0", "False 7 0"]  # live memory, then the fresh zero pages of the parked window


def test_a_closed_window_is_taken_over_so_the_next_system_gets_the_same_addresses():
    lines = run_isolated("""
        from hcqsim.kfd import EmulatedSystem
        bases = []
        for _ in range(3):
            s = EmulatedSystem(1)
            bases.append(s.window.base)
            s.close()
        print(len(set(bases)), bases[0] == s.window.preferred_base)
    """)
    assert lines == ["1 True"]


READ_AFTER_FREE = """
    import ctypes
    from test_kfd_driver import GTT, Runtime
    from hcqsim.kfd import EmulatedSystem
    s = EmulatedSystem(1)
    rt = Runtime(s.os)
    mem = rt.alloc(8192, GTT)  # mapped on the GPU and, through the render node, by the CPU
    mem.u32(0).value, mem.u32(1024).value = 0x1234, 0x5678
    rt.map(mem, [rt.gpu_id()], "UNMAP_MEMORY_FROM_GPU")
    rt.ioctl("FREE_MEMORY_OF_GPU", handle=mem.handle)
    print(hex(mem.u32(0).value), hex(mem.u32(1024).value))  # the CPU mapping still holds the pages
    before = rt.ioctl("AVAILABLE_MEMORY", gpu_id=rt.gpu_id()).available
    try:
        rt.ioctl("FREE_MEMORY_OF_GPU", handle=mem.handle)
    except OSError as e:
        print("second free", e.errno)
    rt.os.munmap(mem.va, mem.size)  # the last CPU mapping goes: now the memory is released
    print(s.window.allocation_size(mem.va), rt.ioctl("AVAILABLE_MEMORY", gpu_id=rt.gpu_id()).available == before)
    again = rt.alloc(8192, GTT, va=rt.reserve(8192))
    print(hex(again.u32(0).value))
"""


def test_a_cpu_read_after_unmap_and_free_reads_the_pages_the_mapping_still_holds():
    # amdgpu_gem_object_free runs when the GEM object's last reference goes; an mmap VMA holds one, so on Linux
    # the CPU keeps reading the freed BO's pages until munmap (FREE_MEMORY_OF_GPU drops only the handle).
    lines = run_isolated(READ_AFTER_FREE)
    assert lines == ["0x1234 0x5678", "second free 22", "None True", "0x0"]


USERPTR_UNMAPPED = """
    import ctypes
    from test_kfd_driver import COMMON, Mem, Runtime
    from hcqsim import kfd_uapi as k, sdma
    from hcqsim.kfd import EmulatedSystem
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    s = EmulatedSystem(1)
    rt = Runtime(s.os)
    host = libc.mmap(None, 8192, 3, 0x22, -1, 0)  # plain host memory, outside the emulator's window
    a = rt.ioctl("ALLOC_MEMORY_OF_GPU", va_addr=host, size=8192, gpu_id=rt.gpu_id(),
                 flags=k.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | COMMON, mmap_offset=host)
    rt.map(Mem(host, 8192, a.handle, a.mmap_offset, 0), [rt.gpu_id()])
    mem_event = rt.event(k.KFD_IOC_EVENT_MEMORY)
    q, other = rt.sdma_queue(), rt.sdma_queue()
    rt.submit(q, sdma.const_fill(host, 7, 64, 2, "sdma6"))
    print(ctypes.c_uint32.from_address(host).value)
    libc.munmap(host, 8192)  # behind the driver's back
    rt.submit(q, sdma.const_fill(host, 9, 64, 2, "sdma6"))
    result, data = rt.wait([mem_event], timeout=0)
    print(result == k.KFD_IOC_WAIT_RESULT_COMPLETE, hex(data[0].memory_exception_data.va) == hex(host))
    print([f.kind for f in s.gpus[0].faults], s.gpus[0].faults[0].queue)
    ok = rt.alloc(4096)
    rt.submit(other, sdma.const_fill(ok.va, 5, 64, 2, "sdma6"))  # another queue keeps working
    print(ok.u32(0).value)
    back = libc.mmap(host, 8192, 3, 0x22 | 0x10, -1, 0)  # pages mapped there again: the BO is valid again
    q2 = rt.sdma_queue()
    rt.submit(q2, sdma.const_fill(host, 11, 64, 2, "sdma6"))
    print(back == host, ctypes.c_uint32.from_address(host).value, len(s.gpus[0].faults))
"""


def test_a_gpu_write_to_userptr_memory_whose_host_pages_were_unmapped_is_a_vm_fault_of_that_queue():
    lines = run_isolated(USERPTR_UNMAPPED)
    assert lines[0] == "7"
    assert lines[1] == "True True"  # reported through the memory exception event, with the address
    assert lines[2] == "['VM fault'] sdma_0"  # the queue that wrote, alone
    assert lines[3] == "5"
    assert lines[4] == "True 11 1"


def test_an_anonymous_map_fixed_over_a_freed_but_mapped_bo_replaces_it_with_zero_pages():
    # mmap(MAP_FIXED) over a VMA drops it (and with it the freed BO's last reference), leaving fresh zero pages
    from hcqsim.boundary import MAP_ANONYMOUS, MAP_FIXED, MAP_PRIVATE
    from hcqsim.kfd import EmulatedSystem
    from test_kfd_driver import GTT, RW, Runtime
    s = EmulatedSystem(1)
    try:
        rt = Runtime(s.os)
        mem = rt.alloc(8192, GTT)
        mem.u32(0).value = 0x1234
        rt.map(mem, [rt.gpu_id()], "UNMAP_MEMORY_FROM_GPU")
        rt.ioctl("FREE_MEMORY_OF_GPU", handle=mem.handle)
        assert mem.u32(0).value == 0x1234
        assert rt.os.mmap(mem.va, 8192, RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED) == mem.va
        assert mem.u32(0).value == 0
    finally:
        s.close()


# -- one Device, two host threads (issue 22: sharing one between five threads gave wrong copyouts) ----------

import random  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

from hcqsim.errors import ConcurrentUseError  # noqa: E402
from hcqsim.runtime import open_device  # noqa: E402


@pytest.fixture
def free_running_device():
    dev = open_device("sim", free_running=True)
    yield dev
    dev.close()


def test_a_second_thread_inside_one_device_gets_a_clear_error_and_changes_nothing(free_running_device):
    dev = free_running_device
    sig = dev.new_signal(0)
    waiter = threading.Thread(target=sig.wait, args=(1,), name="waiter")
    waiter.start()
    deadline = time.monotonic() + 30
    while dev._turn.owner is None and time.monotonic() < deadline:  # test-only look: the waiter is inside
        time.sleep(0.001)
    buffers = len(dev._buffers)
    with pytest.raises(ConcurrentUseError) as e:
        dev.alloc(4096)
    assert "alloc from thread 'MainThread' while thread 'waiter' is inside wait_signal" in str(e.value)
    assert "Nothing was done" in str(e.value) and len(dev._buffers) == buffers
    sig.value = 1  # plain memory: no turn needed; the waiter's wait ends normally
    waiter.join(30)
    assert not waiter.is_alive()
    buf = dev.alloc(4096)  # the device works as before
    dev.copyin(buf, b"after")
    assert dev.copyout(buf, 5) == b"after"


def test_threads_sharing_one_device_get_right_answers_or_a_clear_error_never_a_wrong_one(free_running_device):
    dev = free_running_device
    system = dev._owner.system
    outcome = {"right": 0, "refused": 0, "wrong": 0, "other": []}
    lock = threading.Lock()

    def hammer(seed: int) -> None:
        rng = random.Random(seed)
        buf = None
        while buf is None:
            try:
                buf = dev.alloc(8192)
            except ConcurrentUseError:
                time.sleep(0.0005)
        for _ in range(60):
            data = rng.randbytes(8192)
            try:
                dev.copyin(buf, data)
                ok = dev.copyout(buf, 8192) == data
                key = "right" if ok else "wrong"
            except ConcurrentUseError:
                key = "refused"
            except Exception as e:  # noqa: BLE001 - anything else is a finding
                with lock:
                    outcome["other"].append(repr(e)[:200])
                return
            with lock:
                outcome[key] += 1

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert outcome["wrong"] == 0 and outcome["other"] == [], outcome
    assert outcome["right"] > 0, outcome
    assert system.thread.alive and system.thread.error is None
    buf = dev.alloc(4096)
    dev.copyin(buf, b"still works")
    assert dev.copyout(buf, 11) == b"still works"


# -- the kernarg arena never waits for queues (tests/audit.py's soak: a wedge after 1638 kernels) -----------------

SCALE = """
declare i32 @llvm.amdgcn.workitem.id.x()
define amdgpu_kernel void @scale(ptr addrspace(1) %p, i32 %k) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %q = getelementptr i32, ptr addrspace(1) %p, i32 %t
  %v = load i32, ptr addrspace(1) %q
  %w = mul i32 %v, %k
  store i32 %w, ptr addrspace(1) %q
  ret void
}
"""


@pytest.mark.parametrize("free_running", [False, True], ids=["progress-points", "free-running"])
def test_kernels_keep_launching_while_a_submitted_queue_waits_for_the_next_one(monkeypatch, free_running):
    """A copy queue waits on the signal of a kernel not built yet, round after round, past the point where the
    kernarg arena is full (a small arena here: it fills every few kernels). Refilling the arena must not wait for
    the copy queue: it waits for the very kernel being built (that was a DeadlockError, or a 30 s DeviceTimeout
    free-running)."""
    import numpy as np
    from hcqsim.compiler import compile_llvm
    from hcqsim.runtime import device as runtime_device
    monkeypatch.setattr(runtime_device, "KERNARG_ARENA", 2048)
    dev = open_device("sim", free_running=free_running)
    try:
        kernel = dev.load_program(compile_llvm(SCALE, dev.target), "scale")
        buf, side = dev.alloc(256), dev.alloc(256)
        gate, done = dev.new_signal(0), dev.new_signal(0)
        for n in range(1, 41):  # a few kernels per arena: many refills, and arenas reused once their kernels end
            dev.copyin(buf, (np.arange(64, dtype=np.uint32) + n).tobytes())
            dev.copy_queue().wait(gate, n).copy(side, buf, 256).signal(done, n).submit()
            dev.compute_queue().exec(kernel, [buf, 3], 64, 64).signal(gate, n).submit()
            done.wait(n, timeout_ms=20_000)
            assert np.array_equal(np.frombuffer(dev.copyout(side, 256), np.uint32), (np.arange(64) + n) * 3)
        assert len(dev._retired_kernargs) <= 2  # test-only look: full arenas were reused once their kernels ended
    finally:
        dev.close()


@pytest.mark.parametrize("aql", [False, True], ids=["pm4", "aql"])
def test_kernargs_of_kernels_still_waiting_are_never_reused(monkeypatch, aql):
    """Twenty kernels, each with its own buffer and factor, wait behind a host gate while their kernargs fill the
    (small) arena several times over: a full arena is reused only once its kernels ended, so every kernel still
    reads its own arguments when the gate opens."""
    import numpy as np
    from hcqsim.compiler import compile_llvm
    from hcqsim.runtime import device as runtime_device
    monkeypatch.setattr(runtime_device, "KERNARG_ARENA", 2048)
    dev = open_device("sim", aql=aql)
    try:
        kernel = dev.load_program(compile_llvm(SCALE, dev.target), "scale")
        bufs = [dev.alloc(256) for _ in range(20)]
        for b in bufs:
            dev.copyin(b, np.arange(64, dtype=np.uint32).tobytes())
        gate = dev.new_signal(0)
        q = dev.compute_queue().wait(gate, 1)
        for k, b in enumerate(bufs):
            q = q.exec(kernel, [b, k + 2], 64, 64)
        q.submit()
        assert len(dev._retired_kernargs) >= 2  # test-only look: the arena really filled while they waited
        gate.value = 1
        dev.synchronize()
        for k, b in enumerate(bufs):
            assert np.array_equal(np.frombuffer(dev.copyout(b, 256), np.uint32), np.arange(64) * (k + 2)), k
    finally:
        dev.close()


# -- every public Device call holds the Device's turn for its whole duration ------------------------------------

class RecordingTurn:
    """A Device's Turn that records the outermost calls it admits (depth 0 -> 1) and every release to depth 0."""

    def __init__(self, turn):
        self.turn, self.events = turn, []

    def enter(self, device, call):
        if self.turn.depth == 0 or self.turn.owner != threading.get_ident():
            self.events.append(("enter", call))
        self.turn.enter(device, call)

    def leave(self):
        self.turn.leave()
        if self.turn.depth == 0:
            self.events.append(("leave", None))

    def __getattr__(self, name):
        return getattr(self.turn, name)


def _scale_code(target: str) -> bytes:
    from hcqsim.compiler import compile_llvm
    return compile_llvm(SCALE, target)


# Every public Device method, called once with valid arguments: (method name, call(dev, things) -> None). `things`
# holds what setup made before the turn is watched (buffers, signals, the code object).
GUARDED_CALLS = {
    "alloc": lambda d, t: d.alloc(4096),
    "free": lambda d, t: d.free(t["spare_buf"]),
    "map_to": lambda d, t: d.map_to(t["buf"], d),
    "new_signal": lambda d, t: d.new_signal(0),
    "free_signal": lambda d, t: d.free_signal(t["spare_sig"]),
    "next_timeline": lambda d, t: d.next_timeline(),
    "load_program": lambda d, t: d.load_program(t["code"], "scale"),
    "kernarg_alloc": lambda d, t: d.kernarg_alloc(64),
    "scratch_memory": lambda d, t: d.scratch_memory(4096),
    "next_dispatch_id": lambda d, t: d.next_dispatch_id(),
    "compute_queue": lambda d, t: d.compute_queue(),
    "copy_queue": lambda d, t: d.copy_queue(),
    "hardware_ring": lambda d, t: d.hardware_ring("copy"),
    "submit_packets": lambda d, t: d.submit_packets("compute", [__import__("hcqsim.pm4").pm4.nop(4)]),
    "wait_signal": lambda d, t: d.wait_signal(t["sig"], 0),
    "wait_value": lambda d, t: d.wait_value(t["sig"], 0, "a set signal"),
    "synchronize": lambda d, t: d.synchronize(),
    "copyin": lambda d, t: d.copyin(t["buf"], b"abcd"),
    "copyout": lambda d, t: d.copyout(t["buf"], 4),
    "transfer": lambda d, t: d.transfer(t["other"], t["buf"], 64),
    "freed_memory_at": lambda d, t: d.freed_memory_at(t["buf"].va),
    "unmap_peers": lambda d, t: d.unmap_peers(t["spare_buf"]),
    "close": lambda d, t: d.close(),
}
# Public methods that need no turn, and why (each touches no host state of the Device that a call changes).
UNGUARDED = {
    "hdp_flush": "one plain 32-bit store to the MMIO-remap page, as a CPU does on hardware",
    "completion_slot": "returns two values fixed at bring-up",
    "queue_count": "reads the node's sysfs properties, fixed at bring-up",
    "clear_memory_reports": "empties the emulated system's list of memory-model records (harness state: no ioctl, "
                            "queue or buffer of the Device)",
}


def test_the_table_names_every_public_device_method():
    """A new public Device method must join GUARDED_CALLS (and so the checks below) or UNGUARDED with a reason."""
    import inspect
    from hcqsim.runtime.device import Device
    public = {n for n, v in inspect.getmembers(Device, inspect.isfunction) if not n.startswith("_")}
    assert public == set(GUARDED_CALLS) | set(UNGUARDED), (sorted(public - set(GUARDED_CALLS) - set(UNGUARDED)),
                                                           sorted((set(GUARDED_CALLS) | set(UNGUARDED)) - public))
    assert not set(GUARDED_CALLS) & set(UNGUARDED)


@pytest.mark.parametrize("name", sorted(GUARDED_CALLS))
def test_a_public_device_call_holds_the_turn_from_its_start_to_its_end(name):
    """The call is the only outermost entry into the Device's turn, and the turn is not released before it
    returns: nested calls (a copyout's next_timeline, copy_queue, wait_value) never leave a gap in which another
    thread could get in and, say, refill the staging buffer the copyout is about to read."""
    dev = open_device("sim")
    try:
        things = {"buf": dev.alloc(4096), "sig": dev.new_signal(1), "other": dev.alloc(4096),
                  "spare_buf": dev.alloc(4096), "spare_sig": dev.new_signal(0), "code": _scale_code(dev.target)}
        dev._turn = recording = RecordingTurn(dev._turn)  # test-only look at the turn
        GUARDED_CALLS[name](dev, things)
        assert recording.events == [("enter", name), ("leave", None)], recording.events
    finally:
        dev._turn = getattr(dev._turn, "turn", dev._turn)
        dev.close()


def test_a_copyout_racing_another_thread_keeps_its_turn_between_its_chunks(free_running_device, monkeypatch):
    """Two threads: one inside copyout, stopped (by the test) where it has submitted nothing yet and holds no
    nested call; the other calls copyin, which would refill the very staging buffer the copyout reads. The copyin
    is refused (ConcurrentUseError naming copyout), and the copyout then returns the buffer's own bytes."""
    dev = free_running_device
    buf, other = dev.alloc(4096), dev.alloc(4096)
    dev.copyin(buf, b"A" * 4096)
    inside, go = threading.Event(), threading.Event()
    real_staging = dev._staging_buffers

    def stopping_staging():  # copyout calls this helper itself, between its guarded steps
        if threading.current_thread().name == "copyout":
            inside.set()
            go.wait(30)
        return real_staging()

    monkeypatch.setattr(dev, "_staging_buffers", stopping_staging)
    result = {}
    reader = threading.Thread(target=lambda: result.setdefault("out", dev.copyout(buf, 4096)), name="copyout")
    reader.start()
    assert inside.wait(30)
    try:
        with pytest.raises(ConcurrentUseError) as e:
            dev.copyin(other, b"B" * 4096)
        assert "inside copyout" in str(e.value)
    finally:
        go.set()
        reader.join(30)
    assert result["out"] == b"A" * 4096
