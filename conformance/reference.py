"""The reference model: an interpreter of the scenario semantics in plain numpy.

It imports nothing of the emulator or the runtime: memory is a numpy byte array per buffer, a signal is an
integer, a queue is a list of submitted commands executed in order, a `wait` blocks its queue until the signal
reaches the value. GPU queues run (round robin, each until it blocks) whenever the host reaches a step, so the
host sees them as concurrent; for race-free scenarios any order gives the same effects, which is what makes
this model a reference rather than a second emulator. A compiled schedule means its operations one after
another in program order (docs/schedule.md). Timestamps are a counter advanced per executed command: only
the relations the record keeps (monotonic per queue, the scenario's `orders`) are derived from it.

Kernels are known by name and computed here from their stated meaning (hcqsim/kernels.py and
conformance/kernels.py say the same in words; nothing is shared but the names).

Raw packets (`pm4` / `sdma` steps) mean what HARDWARE_FACTS section 3.3 (PM4) and 5.2 (SDMA) say, written here from
those tables: WRITE_DATA, RELEASE_MEM DATA_SEL/INT_SEL, WAIT_REG_MEM and POLL_REGMEM compare functions under a mask,
ATOMIC_MEM with its pre-op value fetched by COPY_DATA SRC_SEL 6, COPY_DATA, INDIRECT_BUFFER (CHAIN replaces the
calling IB), WRITE_UNTILED, a 32-bit FENCE, ATOMIC, CONST_FILL, COPY_LINEAR and the two TIMESTAMP forms. A KFD event
is delivered when an interrupt names it after its event-page slot was written (section 1.5): RELEASE_MEM INT_SEL 2
or 4, or SDMA TRAP; INT_SEL 3 writes without interrupting. A GPU write into a page mapped without WRITABLE stops its
queue with a memory exception naming that page, kind ReadOnly (section 1.3's memory exception data). Queue counts
and topology values come from conformance/facts.py, the documented facts of the target.
"""
from __future__ import annotations

import numpy as np

from . import facts as documented
from .effects import encode_buffer, encode_bytes
from .scenarios import buffer_spec, expand, parse_queue, signal_spec, split_arg, words_of

U32 = 0xFFFFFFFF
PAGE = 4096

# WAIT_REG_MEM FUNCTION / POLL_REGMEM FUNC (HARDWARE_FACTS 3.3, 5.2): (value & MASK) FUNC REFERENCE, unsigned
COMPARE = {0: lambda v, r: True, 1: lambda v, r: v < r, 2: lambda v, r: v <= r, 3: lambda v, r: v == r,
           4: lambda v, r: v != r, 5: lambda v, r: v >= r, 6: lambda v, r: v > r}


def _signed(v: int, bits: int) -> int:
    return v - (1 << bits) if v >> (bits - 1) & 1 else v


# TC_OP atomics (HARDWARE_FACTS 3.3 table): the new memory value from (old, src, cmp) at a width
ATOMICS = {
    "SWAP": lambda o, s, c, b: s,
    "CMPSWAP": lambda o, s, c, b: s if o == c else o,
    "ADD": lambda o, s, c, b: (o + s) % (1 << b),
    "SUB": lambda o, s, c, b: (o - s) % (1 << b),
    "UMIN": lambda o, s, c, b: min(o, s),
    "UMAX": lambda o, s, c, b: max(o, s),
    "SMIN": lambda o, s, c, b: o if _signed(o, b) <= _signed(s, b) else s,
    "SMAX": lambda o, s, c, b: o if _signed(o, b) >= _signed(s, b) else s,
    "AND": lambda o, s, c, b: o & s,
    "OR": lambda o, s, c, b: o | s,
    "XOR": lambda o, s, c, b: o ^ s,
}


class _Fault(Exception):
    def __init__(self, buffer: str, offset: int, kind: str):
        super().__init__(f"{kind} fault in {buffer} at +{offset}")
        self.record = {"buffer": buffer, "page": offset // PAGE, "kind": kind}


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


def _geometry(p, args, size):
    nx, ny, nz = args[1], args[2], args[3]
    gx, gy, gz = (_dims(size) + (1, 1))[:3]
    x, y, z = (np.arange(min(n, g), dtype=np.uint64) for n, g in ((nx, gx), (ny, gy), (nz, gz)))
    if not (x.size and y.size and z.size):
        return
    Z, Y, X = np.meshgrid(z, y, x, indexing="ij")
    lin = ((Z * ny + Y) * nx + X).ravel()
    dst, off = p(0)
    words = _words(dst, off, int(lin.max()) + 1)
    words[lin.astype(np.int64)] = (X | Y << 10 | Z << 20).ravel() & U32


def _barrier_handoff(p, args, n):
    i = np.arange(n, dtype=np.uint64)
    _words(*p(0), n)[:] = np.where(i % 128 >= 64, 7 * (i - 64), 7 * i) & U32


def _atomic_count(p, args, size):
    m = min(args[2], size)
    counter = _words(*p(0), 1)
    start = int(counter[0])
    _words(*p(1), m)[:] = (start + np.arange(m, dtype=np.uint64)) & U32  # one per item; recorded sorted
    counter[0] = (start + m) & U32


def _atomic_add_each(p, args, size):
    m = min(args[2], size)
    x = _words(*p(0), m)
    _words(*p(1), m)[:] = x  # the pre-op values
    x[:] = (x.astype(np.uint64) + np.arange(m, dtype=np.uint64)) & U32


KERNELS = {"iota": _iota, "add": _add, "scale": _scale, "inc": _inc, "reverse": _reverse, "geometry": _geometry,
           "barrier_handoff": _barrier_handoff, "atomic_count": _atomic_count, "atomic_add_each": _atomic_add_each}
# which pointer arguments each kernel writes (a write into a read-only buffer is a fault)
KERNEL_WRITES = {"iota": [0], "add": [2], "scale": [1], "inc": [0], "reverse": [1], "geometry": [0],
                 "barrier_handoff": [0], "atomic_count": [0, 1], "atomic_add_each": [0, 1]}


def _dims(size) -> tuple:
    return (size,) if isinstance(size, int) else tuple(size)


def _items(size) -> int:
    total = 1
    for s in _dims(size):
        total *= s
    return total


class Reference:
    def __init__(self, scenario: dict, target: str):
        if not isinstance(target, str):
            raise TypeError("the reference model takes the target's name (its queue counts come from the "
                            "documented facts, conformance/facts.py), not counts reported by a device")
        self.sc, self.target = scenario, target
        self.steps = expand(scenario["steps"], documented.queue_counts(target, scenario.get("devices", 1)))
        self.mem: dict[str, np.ndarray] = {}
        self.specs: dict[str, dict] = {}
        self.events: dict[str, bool] = {}
        self.faults: dict[int, dict] = {}  # device -> the first memory exception it reported
        self.dead: set[str] = set()  # queues stopped by a fault
        for k, (name, spec) in enumerate(scenario["buffers"].items()):
            spec = self.specs[name] = buffer_spec(spec)
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
        for k in KERNEL_WRITES[name]:
            buf, off = split_arg(args[k])
            self._writable(buf, off)
        KERNELS[name](pointer, args, global_size if name == "geometry" else _items(global_size))

    def _writable(self, buf: str, off: int) -> None:
        if self.specs[buf].get("access", "readwrite") != "readwrite":
            raise _Fault(buf, off, "ReadOnly")

    def _copy(self, dst, doff, src, soff, size) -> None:
        self._writable(dst, doff)
        data = self.mem[src][soff:soff + size].copy()  # overlapping ranges: the source as it was
        self.mem[dst][doff:doff + size] = data

    def _fill(self, dst, off, size, value) -> None:
        self._writable(dst, off)
        self.mem[dst][off:off + size] = np.full(size // 4, value & U32, "<u4").view(np.uint8)

    def _load(self, ref: str, nbytes: int) -> int:
        buf, off = split_arg(ref)
        return int.from_bytes(self.mem[buf][off:off + nbytes].tobytes(), "little")

    def _store(self, ref: str, value: int, nbytes: int) -> None:
        buf, off = split_arg(ref)
        self._writable(buf, off)
        self.mem[buf][off:off + nbytes] = np.frombuffer((value % (1 << 8 * nbytes)).to_bytes(nbytes, "little"),
                                                        np.uint8)

    def _stamp(self, qname: str, name: str) -> None:
        self.stamps[name] = self.clock
        self.stamp_queue.setdefault(qname, []).append(name)

    # -- raw packets (HARDWARE_FACTS 3.3 and 5.2) ---------------------------------------------------------

    def _pm4(self, qname: str, p: dict) -> bool:
        op = p["op"]
        if op == "write_data":  # N dwords from DST, or all to the same dword with WR_ONE_ADDR
            words = p["words"]
            if p.get("one_addr"):
                self._store(p["dst"], words[-1], 4)
            else:
                buf, off = split_arg(p["dst"])
                for i, w in enumerate(words):
                    self._store(f"{buf}+{off + 4 * i}", w, 4)
        elif op == "release_mem":  # DATA_SEL 0 none, 1 low 32 bits of DATA, 2 64-bit DATA, 3 64-bit GPU clock
            sel = p["data_sel"]
            if sel == 1:
                self._store(p["dst"], p["value"], 4)
            elif sel == 2:
                self._store(p["dst"], p["value"], 8)
            elif sel == 3:
                self._stamp(qname, p["ts"])
        elif op == "wait_reg_mem":
            return COMPARE[p["function"]](self._load(p["addr"], 4) & p.get("mask", U32), p["ref"] & U32)
        elif op == "atomic_mem":
            bits = p.get("bits", 32)
            old = self._load(p["addr"], bits // 8)
            full = (1 << bits) - 1
            self._store(p["addr"], ATOMICS[p["atomic"]](old, p["src"] & full, p.get("cmp", 0) & full, bits), bits // 8)
            if "ret" in p:
                self._store(p["ret"], old, bits // 8)  # the pre-op value (COPY_DATA SRC_SEL 6)
        elif op == "copy_data":
            if p["src_sel"] == "clock":
                self._stamp(qname, p["ts"])
            else:
                n = p.get("bits", 32) // 8
                value = self._load(p["src"], n) if p["src_sel"] == "mem" else p["src"]
                self._store(p["dst"], value, n)
        elif op == "ib":
            self._ib(qname, p)
        else:
            raise ValueError(f"unknown pm4 packet {op!r}")
        return True

    def _ib(self, qname: str, p: dict) -> None:
        """An indirect buffer runs its packets, then execution returns to the caller; a CHAIN packet inside it
        replaces it: the chained IB runs and returns to the caller, the packets after the CHAIN never run."""
        for inner in p["packets"]:
            if inner["op"] == "wait_reg_mem":
                raise ValueError("the reference model does not wait inside an indirect buffer")
            self._pm4(qname, inner)
            if inner["op"] == "ib" and inner.get("chain"):
                return

    def _sdma(self, qname: str, p: dict) -> bool:
        op = p["op"]
        if op == "write":
            buf, off = split_arg(p["dst"])
            for i, w in enumerate(p["words"]):
                self._store(f"{buf}+{off + 4 * i}", w, 4)
        elif op == "fence":  # 32-bit DATA only
            self._store(p["dst"], p["value"], 4)
        elif op == "poll":
            return COMPARE[p["func"]](self._load(p["addr"], 4) & p.get("mask", U32), p["ref"] & U32)
        elif op == "atomic":
            bits = p.get("bits", 32)
            full = (1 << bits) - 1
            old = self._load(p["addr"], bits // 8)
            self._store(p["addr"], ATOMICS[p["atomic"]](old, p["src"] & full, p.get("cmp", 0) & full, bits), bits // 8)
        elif op == "fill":
            buf, off = split_arg(p["dst"])
            self._fill(buf, off, p["size"], p["value"])
        elif op == "copy":
            (dst, doff), (src, soff) = split_arg(p["dst"]), split_arg(p["src"])
            self._copy(dst, doff, src, soff, p["size"])
        elif op in ("timestamp_global", "timestamp_local"):
            self._stamp(qname, p["ts"])
        else:
            raise ValueError(f"unknown sdma packet {op!r}")
        return True

    def _notify(self, qname: str, event: str, options: dict) -> None:
        """The event's slot is written, then (PM4 INT_SEL 2 or 4, or SDMA TRAP) an interrupt names it; INT_SEL 5/6
        interrupt only when the 32/64-bit value at the address equals CMP_DATA (cmp_offset 0: it does)."""
        int_sel = options.get("int_sel", 2)
        if parse_queue(qname)[1] == "copy" or int_sel in (2, 4):
            self.events[event] = True
        elif int_sel in (5, 6) and options.get("cmp_offset", 0) == 0:
            self.events[event] = True

    def _execute(self, qname: str, cmd: list) -> bool:
        """Run one command of queue `qname`; False if it is a wait that does not pass yet. A fault stops the
        queue and is what its device reports."""
        try:
            return self._command(qname, cmd)
        except _Fault as f:
            self.faults.setdefault(parse_queue(qname)[0], f.record)
            self.dead.add(qname)  # run_gpu drops what is left of it
            return False

    def _command(self, qname: str, cmd: list) -> bool:
        verb, args = cmd[0], cmd[2:]
        if verb == "pm4":
            if not self._pm4(qname, args[0]):
                return False
        elif verb == "sdma":
            if not self._sdma(qname, args[0]):
                return False
        elif verb == "notify":
            self._notify(qname, args[0], args[1] if len(args) > 1 else {})
        elif verb == "barrier_and":  # every dependency signal (64-bit value at +8 of its object) has reached 0;
            for d in args[0]:       # then the completion signal's value is decremented by 1
                buf, off = split_arg(d)
                if self._load(f"{buf}+{off + 8}", 8) != 0:
                    return False
            if len(args) > 1 and args[1]:
                buf, off = split_arg(args[1])
                self._store(f"{buf}+{off + 8}", self._load(f"{buf}+{off + 8}", 8) - 1, 8)
        elif verb == "wait":
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
            self._stamp(qname, args[0])
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
                while q and qname not in self.dead and self._execute(qname, q[0]):
                    q.pop(0)
                    progress = True
                if qname in self.dead:
                    q.clear()

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
            if verb in QUEUE_STEPS:
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
            elif verb == "event":
                self.events[step[1]] = False
            elif verb == "event_check":
                self.run_gpu()
                self.checkpoints.append({"name": step[1], "events": {e: self.events[e] for e in step[2]}})
            elif verb == "expect_fault":
                self.run_gpu()
                self.checkpoints.append({"name": step[1], "fault": self.faults.get(step[2], {"none": True})})
            elif verb == "read_pointer":
                self.run_gpu()
                self.checkpoints.append({"name": step[1], "read_pointer": {
                    "rptr_is_wptr": True, "ring_wrapped": bool((step[3] if len(step) > 3 else {}).get("wraps"))}})
            elif verb == "topology":
                f = documented.facts(self.target)
                self.checkpoints.append({"name": step[1], "topology": {
                    str(d): dict(f) for d in range(self.sc.get("devices", 1))}})
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
        t = self.stamps
        mono = {q: all(t[a] <= t[b] for a, b in zip(ts, ts[1:])) for q, ts in self.stamp_queue.items()}
        orders = {f"{a} <= {b}": t[a] <= t[b] for a, b in self.sc.get("orders", [])}
        orders.update({f"{a} < {b}": t[a] < t[b] for a, b in self.sc.get("moves", [])})
        return {"buffers": {n: encode_buffer(m.tobytes(), self.specs[n]) for n, m in self.mem.items()},
                "signals": dict(self.sig), "checkpoints": self.checkpoints,
                "timestamps": {"monotonic": mono, "orders": orders}}


QUEUE_STEPS = ("fill", "copy", "kernel", "signal", "wait", "timestamp", "barrier", "timeline", "pm4", "sdma", "notify",
               "barrier_and")


def expected_effects(scenario: dict, target: str) -> dict:
    """The effect record a correct `target` (its documented facts) produces for a race-free scenario."""
    return Reference(scenario, target).run()
