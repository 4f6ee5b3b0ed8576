"""Running a scenario through the hcqsim runtime, on the emulator ("sim") or on a GPU ("AMD"), and recording
its effects. The same code drives both: only `open_devices` picks the machine."""
from __future__ import annotations

import numpy as np

from hcqsim import kernels
from hcqsim.runtime import Schedule, open_devices, region

from .effects import encode_bytes
from .scenarios import buffer_spec, expand, parse_queue, signal_spec, split_arg, words_of

U32 = 0xFFFFFFFF


def queue_counts(devices) -> dict[int, dict[str, int]]:
    return {i: {"compute": d.queue_count("compute"), "copy": d.queue_count("copy")} for i, d in enumerate(devices)}


def open_for(scenario: dict, device: str, target: str | None = None, **sim_options) -> list:
    """The devices a scenario needs: on "sim" a fresh emulated system of that many GPUs of `target`."""
    n = scenario.get("devices", 1)
    if device.startswith("sim"):
        return open_devices(device, n, target=target or "gfx1100", **sim_options)
    return open_devices(device, n)


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
        for k, (name, spec) in enumerate(scenario["buffers"].items()):
            spec = buffer_spec(spec)
            dev = devices[spec["device"]]
            buf = self.bufs[name] = dev.alloc(spec["size"], uncached=spec["uncached"])
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
            self.progs[key] = dev.load_program(kernels.code_object(name, dev.target), name)
        return self.progs[key]

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
            sig = self.stamps[step[2]] = dev.new_signal(0)
            self.stamp_queue.setdefault(qname, []).append(step[2])
            q.timestamp(sig)
        elif verb == "barrier":
            q.memory_barrier()
        elif verb == "timeline":
            q.signal(*dev.next_timeline())
        else:
            raise ValueError(f"unknown queue step {verb!r}")

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
            if verb in ("fill", "copy", "kernel", "signal", "wait", "timestamp", "barrier", "timeline"):
                self._queue_step(step)
            elif verb == "submit":
                q = self._queue(step[1])
                q.submit()
                del self.builders[step[1]]
            elif verb == "host_write":
                data = np.asarray(words_of(step[3]), dtype=np.uint64).astype("<u4").view(np.uint8)
                self.bufs[step[1]].view[step[2]:step[2] + len(data)] = data
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
            elif verb == "schedule":
                self._schedule(step[1], step[2], step[3])
            elif verb == "run":
                opts = step[2] if len(step) > 2 else {}
                self.schedules[step[1]].run(buffers={k: self.bufs[v] for k, v in opts.get("bind", {}).items()},
                                            params=opts.get("params"))
            else:
                raise ValueError(f"unknown step {verb!r}")
        for dev in self.devs:
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
        mono = {q: all(t[a] <= t[b] for a, b in zip(ts, ts[1:])) for q, ts in self.stamp_queue.items()}
        orders = {f"{a} <= {b}": t[a] <= t[b] for a, b in self.sc.get("orders", [])}
        return {"buffers": {n: encode_bytes(b.view.tobytes()) for n, b in self.bufs.items()},
                "signals": {n: int(s.value) & U32 for n, s in self.sigs.items()},
                "checkpoints": self.checkpoints, "timestamps": {"monotonic": mono, "orders": orders}}

    def close(self) -> None:
        for d in self.devs:
            d.close()


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
