"""The reference model: an interpreter of the scenario semantics in plain numpy.

It imports nothing of the emulator or the runtime: memory is a numpy byte array per buffer, a signal is an
integer, a queue is a list of submitted commands executed in order, a `wait` blocks its queue until the signal
reaches the value. GPU queues run (round robin, each until it blocks) whenever the host reaches a step, so the
host sees them as concurrent; for race-free scenarios any order gives the same effects, which is what makes
this model a reference rather than a second emulator. A compiled schedule means its operations one after
another in program order (docs/schedule.md). Timestamps are a counter advanced per executed command: only
the relations the record keeps (monotonic per queue, the scenario's `orders`) are derived from it.

Kernels are known by name and computed here from their stated meaning (hcqsim/kernels.py says the same in
words; nothing is shared but the names).
"""
from __future__ import annotations

import numpy as np

from .effects import encode_bytes
from .scenarios import buffer_spec, expand, parse_queue, signal_spec, split_arg, words_of

U32 = 0xFFFFFFFF


class ReferenceDeadlock(RuntimeError):
    """The host waits for something no queue can ever produce."""


def _words(mem: np.ndarray, off: int, n: int) -> np.ndarray:
    if off % 4:
        raise ValueError(f"a kernel pointer at byte {off} is not word aligned")
    return mem[off:off + 4 * n].view("<u4")


# what each library kernel computes; `p(k)` is the k-th argument as (buffer array, byte offset)
def _iota(p, args, items):
    dst, base, n = p(0), args[1], args[2]
    m = min(n, items)
    _words(*dst, m)[:] = (base + np.arange(m, dtype=np.uint64)) & U32


def _add(p, args, items):
    m = min(args[3], items)
    s = (_words(*p(0), m).astype(np.uint64) + _words(*p(1), m)) & U32
    _words(*p(2), m)[:] = s


def _scale(p, args, items):
    m = min(args[3], items)
    s = (_words(*p(0), m).astype(np.uint64) * (args[2] & U32)) & U32
    _words(*p(1), m)[:] = s


def _inc(p, args, items):
    m = min(args[1], items)
    x = _words(*p(0), m)
    x[:] = (x.astype(np.uint64) + 1) & U32


def _reverse(p, args, items):
    n = args[2]
    m = min(n, items)
    src = _words(*p(0), n).copy()
    _words(*p(1), m)[:] = src[::-1][:m]


KERNELS = {"iota": _iota, "add": _add, "scale": _scale, "inc": _inc, "reverse": _reverse}


def _items(size) -> int:
    if isinstance(size, int):
        return size
    total = 1
    for s in size:
        total *= s
    return total


class Reference:
    def __init__(self, scenario: dict, queue_counts: dict[int, dict[str, int]]):
        self.sc = scenario
        self.steps = expand(scenario["steps"], queue_counts)
        self.mem: dict[str, np.ndarray] = {}
        for k, (name, spec) in enumerate(scenario["buffers"].items()):
            spec = buffer_spec(spec)
            init = spec["init"]
            if init == "pattern":
                words = ((k + 1) * 0x01000000 + np.arange(spec["size"] // 4, dtype=np.uint64)) & U32
            elif init == "zero":
                words = np.zeros(spec["size"] // 4, np.uint64)
            else:
                words = np.full(spec["size"] // 4, int(init) & U32, np.uint64)
            self.mem[name] = words.astype("<u4").view(np.uint8).copy()
        self.sig = {name: signal_spec(s)["value"] & U32 for name, s in scenario["signals"].items()}
        self.pending: dict[str, list] = {}
        self.queues: dict[str, list] = {}  # submitted, not yet executed
        self.clock = 0
        self.stamps: dict[str, int] = {}
        self.stamp_queue: dict[str, list[str]] = {}
        self.checkpoints: list[dict] = []
        self.schedules: dict[str, tuple[dict, list]] = {}

    # -- GPU -----------------------------------------------------------------------------------------

    def _kernel(self, name: str, args: list, global_size) -> None:
        def pointer(k):
            buf, off = split_arg(args[k])
            return self.mem[buf], off
        KERNELS[name](pointer, args, _items(global_size))

    def _copy(self, dst, doff, src, soff, size) -> None:
        data = self.mem[src][soff:soff + size].copy()  # overlapping ranges: the source as it was
        self.mem[dst][doff:doff + size] = data

    def _fill(self, dst, off, size, value) -> None:
        self.mem[dst][off:off + size] = np.full(size // 4, value & U32, "<u4").view(np.uint8)

    def _execute(self, qname: str, cmd: list) -> bool:
        """Run one command of queue `qname`; False if it is a wait that does not pass yet."""
        verb, args = cmd[0], cmd[2:]
        if verb == "wait":
            if self.sig[args[0]] < (args[1] & U32):
                return False
        elif verb == "fill":
            self._fill(*args)
        elif verb == "copy":
            self._copy(*args)
        elif verb == "kernel":
            self._kernel(args[0], args[1], args[2])
        elif verb == "signal":
            self.sig[args[0]] = args[1] & U32
        elif verb == "timestamp":
            self.stamps[args[0]] = self.clock
            self.stamp_queue.setdefault(qname, []).append(args[0])
        elif verb in ("barrier", "timeline"):
            pass
        else:
            raise ValueError(f"unknown queue step {verb!r}")
        self.clock += 1
        return True

    def run_gpu(self) -> None:
        progress = True
        while progress:
            progress = False
            for qname in sorted(self.queues):
                q = self.queues[qname]
                while q and self._execute(qname, q[0]):
                    q.pop(0)
                    progress = True

    def _blocked(self) -> str:
        return "; ".join(f"{q} at {c[0]}" for q, c in ((q, c[0]) for q, c in self.queues.items() if c))

    # -- schedules -------------------------------------------------------------------------------------

    def _run_schedule(self, name: str, options: dict) -> None:
        self.run_gpu()  # a schedule starts after the device timeline: earlier timeline work is done
        _, ops = self.schedules[name]
        bind = options.get("bind", {})
        params = options.get("params", {})
        b = lambda x: bind.get(x, x)  # noqa: E731 - rebinding by name
        for op in ops:
            verb = op[0]
            if verb == "fill":
                value = op[4]
                if isinstance(value, dict):
                    value = params.get(value["param"], value["default"])
                self._fill(b(op[1]), op[2], op[3], value)
            elif verb == "copy":
                self._copy(b(op[1]), op[2], b(op[3]), op[4], op[5])
            elif verb == "kernel":
                args = []
                for a in op[2]:
                    if isinstance(a, str):
                        buf, off = split_arg(a)
                        a = b(buf) + (f"+{off}" if off else "")
                    args.append(a)
                self._kernel(op[1], args, op[3])
            elif verb == "host_write":
                self._host_write(b(op[1]), op[2], op[3])
            else:
                raise ValueError(f"unknown schedule op {verb!r}")

    # -- host ------------------------------------------------------------------------------------------

    def _host_write(self, buf, off, words) -> None:
        data = np.asarray(words_of(words), dtype=np.uint64).astype("<u4").view(np.uint8)
        self.mem[buf][off:off + len(data)] = data

    def _snapshot(self, what: dict) -> dict:
        bufs = {}
        for item in what.get("buffers", []):
            if isinstance(item, str):
                bufs[item] = encode_bytes(self.mem[item].tobytes())
            else:
                name, off, size = item
                bufs[f"{name}[{off}:{off + size}]"] = encode_bytes(self.mem[name][off:off + size].tobytes())
        return {"buffers": bufs, "signals": {s: self.sig[s] for s in what.get("signals", [])}}

    def run(self) -> dict:
        for step in self.steps:
            verb = step[0]
            if verb in ("fill", "copy", "kernel", "signal", "wait", "timestamp", "barrier", "timeline"):
                self.pending.setdefault(step[1], []).append(step)
            elif verb == "submit":
                self.queues.setdefault(step[1], []).extend(self.pending.pop(step[1], []))
            elif verb == "host_write" or verb == "copyin":
                self.run_gpu()
                self._host_write(step[1], step[2], step[3])
            elif verb == "set_signal":
                self.sig[step[1]] = step[2] & U32
            elif verb == "host_wait":
                self.run_gpu()
                if self.sig[step[1]] < (step[2] & U32):
                    raise ReferenceDeadlock(f"host waits for {step[1]} >= {step[2]}; blocked: {self._blocked()}")
            elif verb == "synchronize":
                self.run_gpu()
                left = [q for q, c in self.queues.items() if c and parse_queue(q)[0] == step[1]]
                if left:
                    raise ReferenceDeadlock(f"synchronize {step[1]}: blocked {self._blocked()}")
            elif verb == "copyout":
                self.run_gpu()
                _, name, buf, off, size = step
                self.checkpoints.append({"name": name, "copyout": encode_bytes(self.mem[buf][off:off + size].tobytes())})
            elif verb == "transfer":
                self.run_gpu()
                self._copy(step[1], 0, step[2], 0, step[3])
            elif verb == "checkpoint":
                self.run_gpu()
                self.checkpoints.append({"name": step[1], **self._snapshot(step[2])})
            elif verb == "schedule":
                self.schedules[step[1]] = (step[2], step[3])
            elif verb == "run":
                self._run_schedule(step[1], step[2] if len(step) > 2 else {})
            else:
                raise ValueError(f"unknown step {verb!r}")
            self.run_gpu()  # the GPU goes on while the host moves to its next step
        if any(self.queues.values()):
            raise ReferenceDeadlock(f"work never completes: {self._blocked()}")
        return self.effects()

    def effects(self) -> dict:
        mono = {q: all(self.stamps[a] <= self.stamps[b] for a, b in zip(ts, ts[1:]))
                for q, ts in self.stamp_queue.items()}
        orders = {f"{a} <= {b}": self.stamps[a] <= self.stamps[b] for a, b in self.sc.get("orders", [])}
        return {"buffers": {n: encode_bytes(m.tobytes()) for n, m in self.mem.items()},
                "signals": dict(self.sig), "checkpoints": self.checkpoints,
                "timestamps": {"monotonic": mono, "orders": orders}}


def expected_effects(scenario: dict, queue_counts: dict[int, dict[str, int]]) -> dict:
    """The effect record a correct machine produces for a race-free scenario."""
    return Reference(scenario, queue_counts).run()
