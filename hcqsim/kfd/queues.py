"""The process's user queues (kfd_queue.c, kfd_process_queue_manager.c, kfd_doorbell.c): creation with the
kernel's buffer checks, SDMA engine/slot and doorbell assignment, the run list, and doorbell delivery.

A queue record points at the emulated engine queue it created on the GPU (`EmulatedGPU.create_*_queue`);
a doorbell store reaches that queue through `ring_doorbell`, or at the next progress point when user
space stored to the slot directly (`poll_doorbells`).
"""
from __future__ import annotations

import ctypes
import errno
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from .. import kfd_uapi as k
from ..engines.queue import EngineQueue
from ..memory import PAGE_SIZE, page_align
from ..targets import Target
from .memory import BufferObject
from .uaccess import access_ok, read_user

if TYPE_CHECKING:
    from .process import KfdDriver, ProcessDevice

ENOTSUPP = 524  # kernel-internal errno that leaks to user space (kfd_chardev.c: unknown queue_type)
SOC15_DOORBELL_MIRROR = 512  # KFD_QUEUE_DOORBELL_MIRROR_OFFSET: doorbell ids of odd SDMA queues
SDMA_DOORBELL_BASE = 0x100  # emulator layout: SDMA doorbells live in ids 0x100..0x1FF (+ mirror 0x300..0x3FF)
# Queue types on the MEC (kfd_chardev.c: both become KFD_QUEUE_TYPE_COMPUTE; AQL sets format AQL):
# they share the CP doorbell ids and need the EOP buffer and CWSR area (kfd_queue_acquire_buffers).
_CP_TYPES = (k.KFD_IOC_QUEUE_TYPE_COMPUTE, k.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL)


def queue_sizes(target: Target) -> k.QueueBufferSizes:
    """The node values CREATE_QUEUE checks compute queues against (facts 1.6; formula in kfd_uapi)."""
    return k.queue_buffer_sizes(dict(
        gfx_target_version=target.gfx_target_version, simd_count=target.simd_count, simd_per_cu=target.simd_per_cu,
        num_xcc=target.num_xcc, array_count=target.array_count, simd_arrays_per_engine=target.simd_arrays_per_engine,
        lds_size_in_kb=target.lds_size_in_kb))


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


@dataclass(eq=False)
class QueueRecord:
    """One user queue as the driver keeps it (the kernel's struct queue and its properties)."""

    qid: int
    device: "ProcessDevice"
    queue: EngineQueue
    qtype: int
    engine: int | None  # SDMA engine
    sdma_slot: int | None
    doorbell_id: int
    percentage: int
    priority: int
    ring_base: int
    ring_size: int
    bufs: list[BufferObject]  # holding a queue reference on `device`: wptr, rptr, ring, then EOP/CWSR
    seq: int  # creation order: the run list keeps it
    active: bool = True
    hung: bool = False  # fault injection: out of the run list for good, as a hung CP
    last_doorbell: int | None = None
    cu_mask: tuple = field(default=())
    slot: ctypes.c_uint64 | None = field(default=None, repr=False)  # the doorbell slot (poll_doorbells' view)
    slot_base: int | None = field(default=None, repr=False)  # the doorbell mapping `slot` was made for

    @property
    def doorbell_offset(self) -> int:
        return self.doorbell_id * k.KFD_DOORBELL_SIZE


class ProcessQueues:
    """The user queues of one process, their doorbell ids and SDMA slots; the queue ioctls."""

    def __init__(self, driver: "KfdDriver"):
        self.driver = driver
        self.records: dict[int, QueueRecord] = {}  # queue id -> record
        self.cp_doorbells: list[set[int]] = [set() for _ in driver.devices]  # by device: doorbell ids in use
        self.sdma_used: list[set[tuple[int, int]]] = [set() for _ in driver.devices]  # (engine, slot) in use
        self._seq = 0

    def ioctls(self) -> dict[str, Callable]:
        return {"CREATE_QUEUE": self.create_queue, "DESTROY_QUEUE": self.destroy_queue,
                "UPDATE_QUEUE": self.update_queue, "SET_CU_MASK": self.set_cu_mask,
                "GET_QUEUE_WAVE_STATE": self.get_queue_wave_state, "ALLOC_QUEUE_GWS": self.alloc_queue_gws}

    def any_active(self) -> bool:
        return any(r.active for r in self.records.values())

    def _record(self, qid: int, name: str, err: int) -> QueueRecord:
        rec = self.records.get(qid)
        if rec is None:
            raise OSError(err, f"{name}: no queue with id {qid} (destroyed or never created)")
        return rec

    # -- checks ------------------------------------------------------------------------------------

    def _queue_args(self, args, name: str) -> None:
        """set_queue_properties_from_user (and the same checks in UPDATE_QUEUE)."""
        if args.queue_percentage & 0xFF > k.KFD_MAX_QUEUE_PERCENTAGE:
            raise OSError(errno.EINVAL, f"{name}: queue_percentage {args.queue_percentage & 0xFF} > 100")
        if args.queue_priority > k.KFD_MAX_QUEUE_PRIORITY:
            raise OSError(errno.EINVAL, f"{name}: queue_priority {args.queue_priority} > 15")
        if args.ring_base_address and not access_ok(args.ring_base_address, 8):
            raise OSError(errno.EFAULT, f"{name}: ring base 0x{args.ring_base_address:x} is not a user address")
        if args.ring_size and not _is_pow2(args.ring_size):
            raise OSError(errno.EINVAL, f"{name}: ring_size {args.ring_size} is not a power of two")
        args.ring_size = max(args.ring_size, k.KFD_MIN_QUEUE_RING_SIZE)  # clamped, and written back

    def _buffer(self, dev: "ProcessDevice", addr: int, expected: int, what: str, name: str,
                err: int = errno.EINVAL) -> BufferObject:
        """kfd_queue_buffer_get: addr's page must start a GPU mapping of exactly `expected` bytes (page units).
        The kernel compares `expected >> PAGE_SHIFT` pages and skips the size check when that is 0 (a ring
        below one page, e.g. the 1 KiB minimum): only the start is checked then."""
        _, bo = self.driver.memory.mapped_bo(dev, addr)
        pages = expected // PAGE_SIZE
        if bo is None or addr // PAGE_SIZE != bo.va // PAGE_SIZE or (pages and bo.size != pages * PAGE_SIZE):
            have = "nothing" if bo is None else f"BO 0x{bo.handle:x} mapped at 0x{bo.va:x}+{bo.size:#x}"
            raise OSError(err, f"{name}: {what} 0x{addr:x} must start a mapping of exactly {expected:#x} bytes on "
                               f"{dev.label}; found {have}")
        if bo.host != bo.va:  # the queue engines and doorbell polls read queue memory at its GPU address
            raise OSError(errno.EINVAL, f"{name}: {what} 0x{addr:x} is USERPTR BO 0x{bo.handle:x} wrapping CPU "
                                        f"address 0x{bo.host:x}; emulator limitation: queue memory must be at its "
                                        f"CPU address")
        return bo

    def _queue_buffers(self, dev: "ProcessDevice", args, name: str) -> list[BufferObject]:
        """kfd_queue_acquire_buffers (facts 1.6): wptr, rptr, ring; compute: EOP, control stack, CWSR."""
        bufs = [self._buffer(dev, args.write_pointer_address, PAGE_SIZE, "write pointer", name),
                self._buffer(dev, args.read_pointer_address, PAGE_SIZE, "read pointer", name),
                self._buffer(dev, args.ring_base_address, args.ring_size, "ring", name)]  # queue_size, not rounded
        if args.queue_type not in _CP_TYPES:  # AQL is KFD_QUEUE_TYPE_COMPUTE with format AQL in the kernel
            return bufs
        sizes = dev.sizes
        if self.driver.system.kernel_version < (6, 12):
            return bufs + self._queue_buffers_before_6_12(dev, args, name)
        if args.eop_buffer_address:
            if args.eop_buffer_size != sizes.eop_buffer_size:
                raise OSError(errno.EINVAL, f"{name}: eop_buffer_size {args.eop_buffer_size:#x} is not the node's "
                                            f"{sizes.eop_buffer_size:#x}")
            bufs.append(self._buffer(dev, args.eop_buffer_address, sizes.eop_buffer_size, "EOP buffer", name))
        if args.ctl_stack_size != sizes.ctl_stack_size:
            raise OSError(errno.EINVAL, f"{name}: ctl_stack_size {args.ctl_stack_size:#x} is not the node's "
                                        f"{sizes.ctl_stack_size:#x}")
        if args.ctx_save_restore_size < sizes.cwsr_size:
            raise OSError(errno.EINVAL, f"{name}: ctx_save_restore_size {args.ctx_save_restore_size:#x} is below "
                                        f"the node's cwsr size {sizes.cwsr_size:#x}")
        cwsr_size = sizes.cwsr_bo_size(args.ctx_save_restore_size)
        try:
            bufs.append(self._buffer(dev, args.ctx_save_restore_address, cwsr_size, "CWSR area", name))
        except OSError:  # kfd_queue_buffer_svm_get: the CWSR area may be SVM memory instead (ROCr 6.x's choice)
            if not self.driver.svm.holds_queue_buffer(dev, args.ctx_save_restore_address, cwsr_size):
                raise
        return bufs

    def _queue_buffers_before_6_12(self, dev: "ProcessDevice", args, name: str) -> list[BufferObject]:
        """Kernels before 6.12 did not check the EOP, control-stack or CWSR sizes against the node: thunks 5.x
        compute their own (5.4 on gfx1100: a smaller save area; 5.2: a larger control stack, one-XCC CWSR BO).
        The buffers still hold queue references where they start a GPU mapping."""
        found = []
        for addr in (args.eop_buffer_address, args.ctx_save_restore_address):
            _, bo = self.driver.memory.mapped_bo(dev, addr) if addr else (None, None)
            if bo is not None and bo not in found:
                found.append(bo)
        return found

    # -- create / destroy / update -----------------------------------------------------------------

    def create_queue(self, args, io: k.Ioctl) -> None:
        name, qt = io.name, args.queue_type
        self._queue_args(args, name)
        for what in ("read_pointer_address", "write_pointer_address"):
            if not access_ok(getattr(args, what), 4):
                raise OSError(errno.EFAULT, f"{name}: {what} 0x{getattr(args, what):x} is not a user address")
        for what in ("eop_buffer_address", "ctx_save_restore_address"):
            if getattr(args, what) and not access_ok(getattr(args, what), 4):
                raise OSError(errno.EFAULT, f"{name}: {what} 0x{getattr(args, what):x} is not a user address")
        if qt not in k.names_of("KFD_IOC_QUEUE_TYPE_"):
            raise OSError(ENOTSUPP, f"{name}: unknown queue_type {qt}")
        dev = self.driver.device(args.gpu_id, name)
        self.driver.bound(dev, name, errno.ESRCH)
        props = dev.props
        max_engine = props["num_sdma_engines"] + props["num_sdma_xgmi_engines"] - 1
        if qt == k.KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID and args.sdma_engine_id > max_engine:
            raise OSError(errno.EINVAL, f"{name}: sdma_engine_id {args.sdma_engine_id} exceeds {max_engine}")
        bufs = self._queue_buffers(dev, args, name)
        qid = next((i for i in range(k.KFD_MAX_NUM_OF_QUEUES_PER_PROCESS) if i not in self.records), None)
        if qid is None:
            raise OSError(errno.ENOMEM, f"{name}: the process already has {len(self.records)} queues")
        engine, slot, doorbell_id = self._queue_slots(dev, qt, args.sdma_engine_id, name)
        queue = self._make_queue(dev, qt, engine, args)
        self._seq += 1
        rec = QueueRecord(qid, dev, queue, qt, engine, slot, doorbell_id, args.queue_percentage & 0xFF,
                          args.queue_priority, args.ring_base_address, args.ring_size, bufs, self._seq)
        for bo in bufs:
            bo.queue_refs[dev.index] = bo.queue_refs.get(dev.index, 0) + 1
        if slot is not None:
            self.sdma_used[dev.index].add((engine, slot))
        else:
            self.cp_doorbells[dev.index].add(doorbell_id)
        slice_va = self.driver.memory.doorbell_va(dev)
        if slice_va is not None:  # a reused doorbell may hold the old queue's last value
            rec.last_doorbell = ctypes.c_uint64.from_address(slice_va + rec.doorbell_offset).value
        self.records[qid] = rec
        self._set_active(rec, rec.percentage > 0)
        args.queue_id = qid
        args.doorbell_offset = k.mmap_offset(k.KFD_MMAP_TYPE_DOORBELL, dev.gpu_id, rec.doorbell_offset)

    def _queue_slots(self, dev: "ProcessDevice", qt: int, eng_id: int, name: str) -> tuple[int | None, int | None, int]:
        """(SDMA engine, SDMA queue slot, doorbell id). SDMA slots as allocate_sdma_queue hands them out."""
        props = dev.props
        if qt in _CP_TYPES:
            used = self.cp_doorbells[dev.index]
            free = (i for i in range(k.KFD_MAX_NUM_OF_QUEUES_PER_PROCESS)
                    if i not in used and not SDMA_DOORBELL_BASE <= i % SOC15_DOORBELL_MIRROR < 0x200)
            db = next(free, None)
            if db is None:
                raise OSError(errno.EBUSY, f"{name}: no free doorbell on {dev.label}")
            return None, None, db
        n_pcie, n_xgmi, per = (props["num_sdma_engines"], props["num_sdma_xgmi_engines"],
                               props["num_sdma_queues_per_engine"])
        if qt == k.KFD_IOC_QUEUE_TYPE_SDMA:
            cands = [(b % n_pcie, b // n_pcie) for b in range(n_pcie * per)]
        elif qt == k.KFD_IOC_QUEUE_TYPE_SDMA_XGMI:
            cands = [(n_pcie + b % n_xgmi, b // n_xgmi) for b in range(n_xgmi * per)] if n_xgmi else []
        else:
            cands = [(eng_id, s) for s in range(per)]
        pick = next((c for c in cands if c not in self.sdma_used[dev.index]), None)
        if pick is None:
            raise OSError(errno.ENOMEM, f"{name}: no more SDMA queues of type "
                                        f"{k.names_of('KFD_IOC_QUEUE_TYPE_')[qt]} on {dev.label}")
        engine, slot = pick
        db = SDMA_DOORBELL_BASE + engine * 8 + (slot >> 1) + (slot & 1) * SOC15_DOORBELL_MIRROR
        return engine, slot, db

    def _make_queue(self, dev: "ProcessDevice", qt: int, engine: int | None, args) -> EngineQueue:
        ring = args.ring_base_address & ~0xFF  # the MQD keeps the ring base >> 8
        rptr, wptr = args.read_pointer_address, args.write_pointer_address
        if qt == k.KFD_IOC_QUEUE_TYPE_COMPUTE:
            return dev.gpu.create_compute_queue(ring, args.ring_size, rptr, wptr)
        if qt == k.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL:  # rptr/wptr: amd_queue_t read/write_dispatch_id
            return dev.gpu.create_aql_queue(ring, args.ring_size, rptr, wptr)
        return dev.gpu.create_sdma_queue(ring, args.ring_size, rptr, wptr, engine)

    def _set_active(self, rec: QueueRecord, active: bool) -> None:
        """An inactive queue (percentage 0 or no ring) is out of the GPU's run list, as in the kernel's runlist."""
        gpu, q = rec.device.gpu, rec.queue
        if rec.active and not active and q in gpu.queues:
            gpu.queues.remove(q)
        elif active and not rec.active and q not in gpu.queues and not rec.hung:
            later = [r.queue for r in self.records.values() if r.device is rec.device and r.seq > rec.seq]
            pos = next((i for i, other in enumerate(gpu.queues) if other in later), len(gpu.queues))
            gpu.queues.insert(pos, q)
        rec.active = active

    def hang(self, rec: QueueRecord) -> None:
        """Fault injection: the queue stops making progress (out of the run list; doorbells still accepted)."""
        rec.hung = True
        if rec.queue in rec.device.gpu.queues:
            rec.device.gpu.queues.remove(rec.queue)

    def hung(self) -> list[QueueRecord]:
        return [r for r in self.records.values() if r.hung]

    def destroy_queue(self, args, io: k.Ioctl) -> None:
        rec = self._record(args.queue_id, io.name, errno.EINVAL)
        dev = rec.device
        if rec.queue in dev.gpu.queues:
            dev.gpu.destroy_queue(rec.queue)
        rec.queue.destroyed = True
        for bo in rec.bufs:
            bo.queue_refs[dev.index] -= 1
        self.sdma_used[dev.index].discard((rec.engine, rec.sdma_slot))
        self.cp_doorbells[dev.index].discard(rec.doorbell_id)
        del self.records[rec.qid]

    def update_queue(self, args, io: k.Ioctl) -> None:
        self._queue_args(args, io.name)
        rec = self._record(args.queue_id, io.name, errno.EFAULT)  # pqm_update_queue_properties: -EFAULT
        base, size, q = args.ring_base_address, args.ring_size, rec.queue
        if base:  # ring 0 only disables the queue (pqm_update_queue_properties)
            ring_bo = self._buffer(rec.device, base, size, "ring", io.name, errno.EFAULT)
        if base and (base & ~0xFF, size) != (q.ring_va, q.ring_size):
            if q.wait is not None or q.has_work():
                raise OSError(errno.EBUSY, f"{io.name}: queue {rec.qid} still has work; emulator limitation: "
                                           f"the ring can only be moved while the queue is idle")
            q.replace_ring(base & ~0xFF, size)
            index = rec.device.index
            rec.bufs[2].queue_refs[index] -= 1
            ring_bo.queue_refs[index] = ring_bo.queue_refs.get(index, 0) + 1
            rec.bufs[2] = ring_bo
        rec.ring_base, rec.ring_size = base, size
        rec.percentage, rec.priority = args.queue_percentage & 0xFF, args.queue_priority
        self._set_active(rec, bool(base) and rec.percentage > 0)

    def set_cu_mask(self, args, io: k.Ioctl) -> None:
        if args.num_cu_mask % 32 or args.num_cu_mask == 0:
            raise OSError(errno.EINVAL, f"{io.name}: num_cu_mask {args.num_cu_mask} must be a nonzero multiple "
                                        f"of 32")
        count = min(args.num_cu_mask, 1024)
        mask = struct.unpack(f"<{count // 32}I", read_user(args.cu_mask_ptr, count // 8))
        rec = self._record(args.queue_id, io.name, errno.EFAULT)
        if self.driver.system.target.gc_version >= (10, 0, 0):  # pqm_update_mqd: WGPs take CUs in pairs
            bits = [(mask[i // 32] >> (i % 32)) & 3 for i in range(0, count, 2)]
            if any(pair not in (0, 3) for pair in bits):
                raise OSError(errno.EINVAL, f"{io.name}: on GC {'.'.join(map(str, self.driver.system.target.gc_version))}"
                                            f" the CUs of a WGP are enabled in pairs (bits 2n and 2n+1 together)")
        rec.cu_mask = mask  # recorded; the emulator has no CUs to mask

    def get_queue_wave_state(self, args, io: k.Ioctl) -> None:
        self._record(args.queue_id, io.name, errno.EFAULT)  # pqm_get_wave_state: no queue -> -EFAULT
        raise OSError(errno.EOPNOTSUPP, f"{io.name} of a live queue is not emulated by hcqsim (no CWSR state)")

    def alloc_queue_gws(self, args, io: k.Ioctl) -> None:
        self._record(args.queue_id, io.name, errno.EINVAL)  # kfd_ioctl_alloc_queue_gws: no user queue -> -EINVAL
        raise OSError(errno.EOPNOTSUPP, f"{io.name} of a live queue is not emulated by hcqsim (no GWS)")

    # -- doorbells ---------------------------------------------------------------------------------

    def _doorbell_target(self, address: int) -> tuple["ProcessDevice | None", QueueRecord | None]:
        for dev in self.driver.devices:
            base = self.driver.memory.doorbell_va(dev)
            if base is not None and base <= address < base + k.KFD_DOORBELL_SLICE_SIZE:
                rec = next((r for r in self.records.values()
                            if r.device is dev and base + r.doorbell_offset == address), None)
                return dev, rec
        return None, None

    def ring_doorbell(self, address: int, value: int) -> None:
        """The CPU's 64-bit store to a doorbell: written to the slot, and delivered to its queue at once."""
        dev, rec = self._doorbell_target(address)
        if dev is None or address % 8:
            raise OSError(errno.EFAULT, f"ring_doorbell: 0x{address:x} is not a doorbell in a mapped doorbell slice")
        ctypes.c_uint64.from_address(address).value = value & 0xFFFFFFFFFFFFFFFF
        if rec is not None:
            self._deliver(rec, value)

    def _deliver(self, rec: QueueRecord, value: int) -> None:
        rec.last_doorbell = value
        self.driver.before_gpus_run()  # the GPU may run now: host pages gone, injected faults armed
        if rec.queue.active:  # a faulted or destroyed queue ignores its doorbell, as hardware does
            rec.device.gpu.ring_doorbell(rec.queue, value)
        thread = getattr(self.driver.system, "thread", None)
        if thread is not None:  # delivered by another thread than the GPU thread (a watchdog's look): its quiet
            thread.work_arrived()  # look at the doorbells alone would find this store taken and never run it

    def poll_doorbells(self) -> int:
        """Doorbell slots stored to directly (not through ring_doorbell) are seen at the next progress point
        (every engine step starts here, so it also revalidates USERPTR mappings first)."""
        self.driver.before_gpus_run()
        rung = 0
        on = self.driver.memory.on
        for rec in list(self.records.values()):
            base = on[rec.device.index].doorbell_va
            if base is None:
                continue
            slot = rec.slot
            if slot is None or rec.slot_base != base:  # the slot's ctypes view, made once per doorbell mapping
                slot = rec.slot = ctypes.c_uint64.from_address(base + rec.doorbell_offset)
                rec.slot_base = base
            value = slot.value
            if value != (rec.last_doorbell or 0) and rec.queue.active:
                self._deliver(rec, value)
                rung += 1
            elif rec.qtype == k.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL and rec.queue.active and self._aql_wptr_moved(rec):
                # An AQL doorbell holds the last packet's index: the first store (0) looks like the slot's
                # initial value, so the CP's write-pointer poll (write_dispatch_id) is what notices it.
                self._deliver(rec, ctypes.c_uint64.from_address(rec.queue.wptr_va).value - 1)
                rung += 1
        return rung

    def doorbells_pending(self) -> bool:
        """Whether `poll_doorbells` would deliver a store now (its tests; nothing delivered or revalidated): the
        free-running thread's cheap look while every queue is idle."""
        on = self.driver.memory.on
        for rec in self.records.values():
            base = on[rec.device.index].doorbell_va
            if base is None or not rec.queue.active:
                continue
            if rec.slot is None or rec.slot_base != base:  # no view of the slot yet: poll_doorbells makes it
                return True
            if rec.slot.value != (rec.last_doorbell or 0):
                return True
            if rec.qtype == k.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL and self._aql_wptr_moved(rec):
                return True
        return False

    @staticmethod
    def _aql_wptr_moved(rec: QueueRecord) -> bool:
        q = rec.queue
        end = ctypes.c_uint64.from_address(q.wptr_va).value * q.ptr_unit
        return q.ring.end < end <= q.ring.pos + q.ring_size  # ahead, and not past a full ring

    def close(self) -> None:
        for rec in list(self.records.values()):
            rec.queue.destroyed = True
            if rec.queue in rec.device.gpu.queues:
                rec.device.gpu.queues.remove(rec.queue)
        self.records.clear()
