"""Running a scenario through the hcqsim runtime, on the emulator ("sim") or on a GPU ("AMD"), and recording
its effects. The same code drives both: only `open_devices` picks the machine."""
from __future__ import annotations

import ctypes
import re

import numpy as np

from hcqsim import kernels
from hcqsim import kfd_uapi as K
from hcqsim import pm4, sdma
from hcqsim.atomics import OP_NAMES
from hcqsim.errors import DeviceFault
from hcqsim.runtime import Schedule, open_devices, region

from . import kernels as conformance_kernels
from .facts import TOPOLOGY
from .effects import encode_bytes, encode_buffer
from .scenarios import buffer_spec, expand, parse_queue, signal_spec, split_arg, words_of

U32 = 0xFFFFFFFF
ATOMIC_CODES = {name: code for code, name in OP_NAMES.items()}  # "ADD_RTN_32" -> 0x0F
TOPOLOGY_KEYS = sorted(next(iter(TOPOLOGY.values())))  # which sysfs properties a record keeps (names only)
_FAULT = re.compile(r"memory exception at VA 0x([0-9a-f]+) \(([^)]*)\)")


def queue_counts(devices) -> dict[int, dict[str, int]]:
    return {i: {"compute": d.queue_count("compute"), "copy": d.queue_count("copy")} for i, d in enumerate(devices)}


def open_for(scenario: dict, device: str, target: str | None = None, **sim_options) -> list:
    """The devices a scenario needs: on "sim" a fresh emulated system of that many GPUs of `target`."""
    n = scenario.get("devices", 1)
    if device.startswith("sim"):
        return open_devices(device, n, target=target or "gfx1100", **sim_options)
    return open_devices(device, n, aql=bool(sim_options.get("aql")))


class Run:
    """One scenario on opened devices; `effects()` after `run()`."""

    def __init__(self, scenario: dict, devices: list):
        self.sc, self.devs = scenario, devices
        self.steps = expand(scenario["steps"], queue_counts(devices))
        self.bufs, self.sigs, self.progs = {}, {}, {}
        self.builders: dict[str, object] = {}
        self.stamps: dict[str, object] = {}
        self.stamp_queue: dict[str, list[str]] = {}
        self.checkpoints: list[dict] = []
        self.schedules: dict[str, object] = {}
        self.specs: dict[str, dict] = {}
        self.events: dict[str, tuple[object, int, int]] = {}  # name -> (device, event id, slot address)
        self.faulted: set[int] = set()  # devices whose fault a step expected
        self.keep: list = []  # indirect buffers: alive until the scenario ends
        for k, (name, spec) in enumerate(scenario["buffers"].items()):
            spec = self.specs[name] = buffer_spec(spec)
            dev = devices[spec["device"]]
            buf = self.bufs[name] = _alloc(dev, spec)
            init = spec["init"]
            if init == "pattern":
                words = ((k + 1) * 0x01000000 + np.arange(spec["size"] // 4, dtype=np.uint64)) & U32
            else:
                words = np.full(spec["size"] // 4, 0 if init == "zero" else int(init) & U32, np.uint64)
            buf.view[:] = words.astype("<u4").view(np.uint8)
        for name, spec in scenario["signals"].items():
            spec = signal_spec(spec)
            self.sigs[name] = devices[spec["device"]].new_signal(spec["value"])

    # -- helpers -----------------------------------------------------------------------------------

    def _queue(self, qname: str):
        b = self.builders.get(qname)
        if b is None:
            d, engine, index = parse_queue(qname)
            dev = self.devs[d]
            b = self.builders[qname] = dev.compute_queue(index) if engine == "compute" else dev.copy_queue(index)
        return b

    def _on(self, buf, dev):
        """Peer-map a buffer or signal into `dev` if it lives on another device."""
        if buf.device is not dev:
            buf.device.map_to(buf, dev)
        return buf

    def _program(self, name: str, dev):
        key = (name, id(dev))
        if key not in self.progs:
            if name in conformance_kernels.KERNELS:
                from hcqsim.compiler import compile_llvm
                code = compile_llvm(conformance_kernels.ir(name), dev.target)
            else:
                code = kernels.code_object(name, dev.target)
            self.progs[key] = dev.load_program(code, name)
        return self.progs[key]

    def _addr(self, ref: str, dev) -> int:
        """The GPU address of "buf+off" on `dev`, or of timestamp slot "@name" (created on first use)."""
        if ref.startswith("@"):
            return self._stamp(ref[1:], dev).timestamp_addr
        name, off = split_arg(ref)
        return self._on(self.bufs[name], dev).va + off

    def _stamp(self, name: str, dev, qname: str | None = None):
        if name not in self.stamps:
            self.stamps[name] = dev.new_signal(0)
        if qname is not None:
            self.stamp_queue.setdefault(qname, []).append(name)
        return self.stamps[name]

    def _kernel_args(self, args: list, dev, bufs=None) -> list:
        out = []
        for a in args:
            if isinstance(a, str):
                name, off = split_arg(a)
                buf = self._on((bufs or self.bufs)[name], dev)
                out.append(buf.offset(off) if off else buf)
            else:
                out.append(a)
        return out

    def _signal(self, name: str, dev):
        return self._on(self.sigs[name], dev)

    # -- steps -------------------------------------------------------------------------------------

    def _queue_step(self, step: list) -> None:
        verb, qname = step[0], step[1]
        q = self._queue(qname)
        dev = q.device
        if verb == "fill":
            _, _, buf, off, size, value = step
            q.fill(self._on(self.bufs[buf], dev).offset(off, size), value & U32, size)
        elif verb == "copy":
            _, _, dst, doff, src, soff, size = step
            q.copy(self._on(self.bufs[dst], dev).offset(doff, size), self._on(self.bufs[src], dev).offset(soff, size), size)
        elif verb == "kernel":
            _, _, name, args, gsize, lsize = step
            q.exec(self._program(name, dev), self._kernel_args(args, dev), gsize, lsize)
        elif verb == "signal":
            q.signal(self._signal(step[2], dev), step[3] & U32)
        elif verb == "wait":
            q.wait(self._signal(step[2], dev), step[3] & U32)
        elif verb == "timestamp":
            q.timestamp(self._stamp(step[2], dev, qname))
        elif verb == "pm4":
            for dws in self._pm4(step[2], dev, qname):
                q.packets.append(dws)
        elif verb == "sdma":
            for dws in self._sdma(step[2], dev, qname):
                q.packets.append(dws)
        elif verb == "notify":
            self._notify(q, dev, step[2], step[3] if len(step) > 3 else {})
        elif verb == "barrier_and":
            self._barrier_and(q, dev, step[2], step[3] if len(step) > 3 else None)
        elif verb == "barrier":
            q.memory_barrier()
        elif verb == "timeline":
            q.signal(*dev.next_timeline())
        else:
            raise ValueError(f"unknown queue step {verb!r}")

    # -- raw packets: what a runtime's builders emit, one field combination at a time ------------------

    def _pm4(self, p: dict, dev, qname: str) -> list[list[int]]:
        op, fam = p["op"], dev.family
        if op == "write_data":
            sel = {"mem": 5, "tc_l2": 2, "mem_sync": 1}[p.get("dst_sel", "mem")]
            return [pm4.write_data(self._addr(p["dst"], dev), [w & U32 for w in p["words"]], dst_sel=sel,
                                   one_addr=int(p.get("one_addr", 0)))]
        if op == "release_mem":
            data_sel = p["data_sel"]
            dst = p.get("dst")
            if data_sel == 3:
                dst = "@" + p["ts"]
                self._stamp(p["ts"], dev, qname)
            addr = self._addr(dst, dev) if dst else 0
            ctxid = self.events[p["event"]][1] if "event" in p else 0
            return [pm4.release_mem(addr, p.get("value", 0), data_sel=data_sel, int_sel=p.get("int_sel", 0),
                                    ctxid=ctxid, family=fam, dst_sel=p.get("dst_sel", 0), **_release_cache(fam))]
        if op == "wait_reg_mem":
            return [pm4.wait_reg_mem(self._addr(p["addr"], dev), p["ref"] & U32, mask=p.get("mask", U32),
                                     function=p["function"])]
        if op == "atomic_mem":
            code = ATOMIC_CODES[f"{p['atomic']}_RTN_{p.get('bits', 32)}" if p.get("returns", True)
                                else f"{p['atomic']}_{p.get('bits', 32)}"]
            out = [pm4.atomic_mem(self._addr(p["addr"], dev), code, p["src"] & (2 ** 64 - 1),
                                  p.get("cmp", 0) & (2 ** 64 - 1), command=2)]
            if "ret" in p:  # the pre-op value, fetched with COPY_DATA SRC_SEL ATOMIC_RETURN (facts 3.3)
                out.append(pm4.copy_data(0, self._addr(p["ret"], dev), src_sel=6, dst_sel=2,
                                         count_sel=int(p.get("bits", 32) == 64)))
            return out
        if op == "copy_data":
            bits = p.get("bits", 32)
            sel = p["src_sel"]
            if sel == "clock":
                dst, src, src_sel = "@" + p["ts"], 0, 9
                self._stamp(p["ts"], dev, qname)
                bits = 64
            else:
                dst = p["dst"]
                src, src_sel = (self._addr(p["src"], dev), 2) if sel == "mem" else (p["src"], 5)
            return [pm4.copy_data(src, self._addr(dst, dev), src_sel=src_sel, dst_sel=2, count_sel=int(bits == 64))]
        if op == "ib":
            body = [d for inner in p["packets"] for dws in self._pm4(inner, dev, qname) for d in dws]
            ib = dev.alloc(4 * len(body), uncached=True)
            self.keep.append(ib)
            ib.view[:] = np.asarray(body, np.uint64).astype("<u4").view(np.uint8)
            return [pm4.indirect_buffer(ib.va, len(body), chain=int(p.get("chain", False)))]
        raise ValueError(f"unknown pm4 packet {op!r}")

    def _sdma(self, p: dict, dev, qname: str) -> list[list[int]]:
        op, ver = p["op"], dev.sdma_version
        if op == "write":
            return [sdma.write_untiled(self._addr(p["dst"], dev), p["words"], ver)]
        if op == "fence":
            return [sdma.fence(self._addr(p["dst"], dev), p["value"], ver)]
        if op == "poll":
            return [sdma.poll_regmem(self._addr(p["addr"], dev), p["ref"] & U32, p.get("mask", U32), p["func"],
                                     version=ver)]
        if op == "atomic":
            code = ATOMIC_CODES[f"{p['atomic']}_RTN_{p.get('bits', 32)}"]
            return [sdma.atomic(self._addr(p["addr"], dev), code, p["src"], p.get("cmp", 0), version=ver)]
        if op == "fill":
            return [sdma.const_fill(self._addr(p["dst"], dev), p["value"], p["size"], 2, ver)]
        if op == "copy":
            return [sdma.copy_linear(self._addr(p["dst"], dev), self._addr(p["src"], dev), p["size"], ver)]
        if op in ("timestamp_global", "timestamp_local"):
            self._stamp(p["ts"], dev, qname)
            build = sdma.timestamp_global if op == "timestamp_global" else sdma.timestamp_get
            return [build(self._addr("@" + p["ts"], dev), ver)]
        raise ValueError(f"unknown sdma packet {op!r}")

    def _notify(self, q, dev, event: str, options: dict) -> None:
        """Signal KFD event `event` the way runtimes wake sleepers: write its id into its event-page slot, then
        interrupt with it as context (PM4: one RELEASE_MEM; SDMA: FENCE + TRAP)."""
        edev, eid, slot = self.events[event]
        if q.engine == "compute":
            int_sel, cache = options.get("int_sel", 2), _release_cache(dev.family)
            if int_sel in (5, 6):  # the slot written first; the interrupt only if it equals CMP_DATA (32/64 bits)
                q.packets.append(pm4.write_data(slot, [eid, 0]))
                cmp = eid + options.get("cmp_offset", 0)
                q.packets.append(pm4.release_mem(slot, cmp, data_sel=0, int_sel=int_sel, ctxid=eid, family=dev.family,
                                                 **cache))
            else:
                q.packets.append(pm4.release_mem(slot, eid, data_sel=1, int_sel=int_sel, ctxid=eid,
                                                 family=dev.family, **cache))
        else:
            q.packets.append(sdma.fence(slot, eid, dev.sdma_version))
            q.packets.append(sdma.trap(eid, dev.sdma_version))

    def _barrier_and(self, q, dev, deps: list[str], completion: str | None) -> None:
        """Wait until every dependency's 64-bit signal value (at +8 of the signal object) is 0, then decrement the
        completion signal's value by 1: on an AQL queue a barrier-AND packet (HARDWARE_FACTS 4.6 type 3), on a PM4
        queue a WAIT_REG_MEM == 0 on each half and an ATOMIC_MEM SUB_64."""
        addrs = [self._addr(d, dev) for d in deps]
        done = self._addr(completion, dev) if completion else 0
        if dev.aql:
            from hcqsim import aql
            from hcqsim.runtime.aql_ring import AqlDispatch  # a raw 64-byte AQL packet in the builder's list
            q.packets.append(AqlDispatch(aql.barrier_packet(addrs, completion_signal=done)))
            return
        for a in addrs:
            for half in (8, 12):
                q.packets.append(pm4.wait_reg_mem(a + half, 0, function=3))
        if done:
            q.packets.append(pm4.atomic_mem(done + 8, ATOMIC_CODES["SUB_64"], 1, command=2))

    def _new_event(self, name: str, device: int) -> None:
        dev = self.devs[device]
        ev = dev.process.create_event(K.KFD_IOC_EVENT_SIGNAL, 0)  # manual reset: stays signalled once delivered
        self.events[name] = (dev, ev.event_id, dev.process.event_page.va + 8 * ev.event_slot_index)

    def _event_delivered(self, name: str) -> bool:
        dev, eid, _ = self.events[name]
        data = (K.EventData * 1)()
        data[0].event_id = eid
        args = K.WaitEventsArgs(events_ptr=ctypes.addressof(data), num_events=1, wait_for_all=1, timeout=0)
        dev.process.ioctl(K.AMDKFD_IOC_WAIT_EVENTS, args)
        return args.wait_result == K.KFD_IOC_WAIT_RESULT_COMPLETE

    def _expect_fault(self, device: int) -> dict:
        """The memory exception a device reports once its work stopped, relative to the buffer it hit:
        {"buffer", "page" (4 KiB pages from the buffer's start), "kind"}; {"none": True} when there is none."""
        dev = self.devs[device]
        try:
            dev.synchronize()
        except DeviceFault as e:
            self.faulted.add(device)
            for line in e.faults:
                m = _FAULT.search(str(line))
                if m:
                    va, kind = int(m.group(1), 16), m.group(2)
                    for bname, buf in self.bufs.items():
                        if buf.va <= va < buf.va + max(buf.size, 1):
                            return {"buffer": bname, "page": (va - buf.va) // 4096, "kind": kind}
                    return {"buffer": "?", "page": -1, "kind": kind}
            return {"buffer": "?", "page": -1, "kind": "not a memory exception"}
        return {"none": True}

    def _read_pointer(self, qname: str) -> dict:
        """An idle copy queue's rptr write-back against its wptr (both u64 byte positions, facts 5.5). The engine
        writes the rptr back on a timer (RPTR_WRITEBACK_TIMER): a real GPU gets up to a second to catch up."""
        import time
        d, engine, index = parse_queue(qname)
        if engine != "copy":
            raise ValueError(f"read_pointer {qname}: only copy (SDMA) queues; the PM4 rptr report is not specified "
                             f"(HARDWARE_FACTS 5.5)")
        ring = self.devs[d].hardware_ring(engine, index)
        deadline = time.monotonic() + 1.0
        while (rptr := ctypes.c_uint64.from_address(ring.rptr_va).value) != ring.put and time.monotonic() < deadline:
            time.sleep(0.001)
        return {"rptr_is_wptr": rptr == ring.put, "ring_wrapped": ring.put >= ring.ring_size}

    def _schedule(self, name: str, options: dict, ops: list) -> None:
        devs = [self.devs[i] for i in options.get("devices", [0])]
        s = Schedule(devs, compute_queues=options.get("compute_queues", 2), copy_queues=options.get("copy_queues", 2),
                     batch_limit=options.get("batch_limit", 32))
        for bname, buf in self.bufs.items():
            if any(bname in _names_in(op) for op in ops):
                s.name(buf, bname)
        params = {}
        for op in ops:
            verb = op[0]
            if verb == "fill":
                value = op[4]
                if isinstance(value, dict):
                    value = params.get(value["param"]) or params.setdefault(value["param"], s.param(value["param"], value["default"]))
                s.fill(region(self.bufs[op[1]], op[2], op[3]), value)
            elif verb == "copy":
                s.copy(region(self.bufs[op[1]], op[2], op[5]), region(self.bufs[op[3]], op[4], op[5]))
            elif verb == "kernel":
                dev = _device_of_kernel(op, self.bufs, devs)
                prog = self._program(op[1], dev)
                args = []
                for a in op[2]:
                    if isinstance(a, str):
                        bname, off = split_arg(a)
                        args.append(self.bufs[bname].offset(off) if off else self.bufs[bname])
                    else:
                        args.append(a)
                s.kernel(prog, args, op[3], op[4])
            elif verb == "host_write":
                data = np.asarray(words_of(op[3]), dtype=np.uint64).astype("<u4").tobytes()
                s.host_write(region(self.bufs[op[1]], op[2], len(data)), data)
            else:
                raise ValueError(f"unknown schedule op {verb!r}")
        self.schedules[name] = s.compile()

    def run(self) -> "Run":
        for step in self.steps:
            verb = step[0]
            if verb in QUEUE_STEPS:
                self._queue_step(step)
            elif verb == "submit":
                q = self._queue(step[1])
                q.submit()
                del self.builders[step[1]]
            elif verb == "host_write":
                data = np.asarray(words_of(step[3]), dtype=np.uint64).astype("<u4").view(np.uint8)
                buf = self.bufs[step[1]]
                buf.view[step[2]:step[2] + len(data)] = data
                buf.device.hdp_flush()  # a queue may be polling it: VRAM stores wait in the HDP until then (6.4)
            elif verb == "copyin":
                buf = self.bufs[step[1]]
                buf.device.copyin(buf, np.asarray(words_of(step[3]), dtype=np.uint64).astype("<u4").tobytes(), step[2])
            elif verb == "copyout":
                _, name, bname, off, size = step
                buf = self.bufs[bname]
                self.checkpoints.append({"name": name, "copyout": encode_bytes(buf.device.copyout(buf, size, off))})
            elif verb == "set_signal":
                self.sigs[step[1]].value = step[2] & U32
            elif verb == "host_wait":
                self.sigs[step[1]].wait(step[2] & U32)
            elif verb == "synchronize":
                self.devs[step[1]].synchronize()
            elif verb == "transfer":
                dst, src = self.bufs[step[1]], self.bufs[step[2]]
                sig, v = src.device.transfer(dst, src, step[3])
                sig.wait(v)
            elif verb == "checkpoint":
                self.checkpoints.append({"name": step[1], **self._snapshot(step[2])})
            elif verb == "event":
                self._new_event(step[1], step[2] if len(step) > 2 else 0)
            elif verb == "event_check":
                self.checkpoints.append({"name": step[1], "events": {e: self._event_delivered(e) for e in step[2]}})
            elif verb == "expect_fault":
                self.checkpoints.append({"name": step[1], "fault": self._expect_fault(step[2])})
            elif verb == "topology":
                self.checkpoints.append({"name": step[1], "topology": {
                    str(i): {k: int(d.node.props.get(k, -1)) for k in TOPOLOGY_KEYS} for i, d in enumerate(self.devs)}})
            elif verb == "read_pointer":
                self.checkpoints.append({"name": step[1], "read_pointer": self._read_pointer(step[2])})
            elif verb == "schedule":
                self._schedule(step[1], step[2], step[3])
            elif verb == "run":
                opts = step[2] if len(step) > 2 else {}
                self.schedules[step[1]].run(buffers={k: self.bufs[v] for k, v in opts.get("bind", {}).items()},
                                            params=opts.get("params"))
            else:
                raise ValueError(f"unknown step {verb!r}")
        for i, dev in enumerate(self.devs):
            if i not in self.faulted:
                dev.synchronize()
        return self

    def _snapshot(self, what: dict) -> dict:
        bufs = {}
        for item in what.get("buffers", []):
            if isinstance(item, str):
                bufs[item] = encode_bytes(self.bufs[item].view.tobytes())
            else:
                name, off, size = item
                bufs[f"{name}[{off}:{off + size}]"] = encode_bytes(self.bufs[name].view[off:off + size].tobytes())
        return {"buffers": bufs, "signals": {s: int(self.sigs[s].value) & U32 for s in what.get("signals", [])}}

    def effects(self) -> dict:
        t = {name: int(sig.timestamp) for name, sig in self.stamps.items()}
        return {"buffers": {n: encode_buffer(b.view.tobytes(), self.specs[n]) for n, b in self.bufs.items()},
                "signals": {n: int(s.value) & U32 for n, s in self.sigs.items()},
                "checkpoints": self.checkpoints, "timestamps": timestamp_relations(self.sc, t, self.stamp_queue)}

    def close(self) -> None:
        for d in self.devs:
            d.close()


QUEUE_STEPS = ("fill", "copy", "kernel", "signal", "wait", "timestamp", "barrier", "timeline", "pm4", "sdma", "notify",
               "barrier_and")


def timestamp_relations(scenario: dict, t: dict[str, int], per_queue: dict[str, list[str]]) -> dict:
    """The relations a record keeps of timestamps: non-decreasing per queue, the scenario's `orders` (a <= b) and
    `moves` (a < b: the clock advanced over the work between them)."""
    mono = {q: all(t[a] <= t[b] for a, b in zip(ts, ts[1:])) for q, ts in per_queue.items()}
    orders = {f"{a} <= {b}": t[a] <= t[b] for a, b in scenario.get("orders", [])}
    orders.update({f"{a} < {b}": t[a] < t[b] for a, b in scenario.get("moves", [])})
    return {"monotonic": mono, "orders": orders}


def _release_cache(family: str) -> dict:
    """RELEASE_MEM cache actions making the write visible to the host (the runtime's signal form, facts 6.2)."""
    if family == "gfx11":
        return dict(gcr_seq=1, gl2_wb=1, gl2_inv=1, gl1_inv=1, glv_inv=1, glm_wb=1, glm_inv=1, cache_policy=3)
    return dict(tc_wb_action_ena=1, tc_nc_action_ena=1)


def _alloc(dev, spec: dict):
    """A scenario buffer; "access": "readonly" maps it without KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE (GPU writes fault)."""
    if spec.get("access", "readwrite") == "readwrite":
        return dev.alloc(spec["size"], uncached=spec["uncached"])
    from hcqsim.runtime.device import UNCACHED_FLAGS
    flags = K.KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE | (UNCACHED_FLAGS if spec["uncached"] else
                                                        K.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | K.KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC)
    return dev._alloc(spec["size"], flags)


def _names_in(op: list) -> set[str]:
    out = set()
    for x in op[1:]:
        if isinstance(x, str):
            out.add(split_arg(x)[0])
        elif isinstance(x, list):
            out |= {split_arg(a)[0] for a in x if isinstance(a, str)}
    return out


def _device_of_kernel(op: list, bufs: dict, devs: list):
    """A schedule kernel runs on the device of its first buffer argument (the scenario's convention)."""
    for a in op[2]:
        if isinstance(a, str):
            return bufs[split_arg(a)[0]].device
    return devs[0]


def run_scenario(scenario: dict, device: str = "sim", target: str | None = None, **sim_options) -> tuple[dict, dict]:
    """(effects, queue counts) of one scenario on fresh devices."""
    devs = open_for(scenario, device, target, **sim_options)
    try:
        r = Run(scenario, devs).run()
        return r.effects(), queue_counts(devs)
    finally:
        for d in devs:
            d.close()
