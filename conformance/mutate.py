"""The mutation harness: plant one plausible emulator bug at a time and see whether conformance (and the tests)
notice.

    python3 -m conformance.mutate                     every mutant, conformance on gfx1100 and gfx942, each
                                                      with PM4 and with AQL compute queues (the main job's matrix)
    python3 -m conformance.mutate --tests             ... and the default test suite on each mutant
    python3 -m conformance.mutate --tests-for-survivors   ... the suite only where conformance missed
    python3 -m conformance.mutate NAME ...            only these mutants
    python3 -m conformance.mutate --list              the catalogue
    python3 -m conformance.mutate --no-aql            PM4 compute queues only (half the time; misses AQL bugs)

A mutant is a small patch: a file of the package, an exact text that must occur there exactly once, its
replacement, and one line saying what a real bug of that kind would be. A mutant of code only AQL queues run
(`aql=True`) is also run with `hcqsim conformance --aql` when the PM4 run does not catch it ("ref (aql)") under
--no-aql; by default every mutant runs in all four configurations, as `hcqsim conformance --device sim` does, and
a mutant counts as caught when any of them catches it. Each mutant is applied in a temporary copy of the tree (never in a working tree: other people's code is live there); `hcqsim conformance` then runs in
that copy (PYTHONPATH pointing at it) against the reference model and the committed sim golden records. A mutant
whose text no longer occurs exactly once "does not apply" (the code moved on: the catalogue needs an update).

Caught means: some scenario's effects differ (from the reference model: `ref`; only from the golden record:
`golden`), a scenario raised (`error`), or the run exceeded its time bound (`timeout`). The unmutated tree is
run first: a baseline that fails makes every answer meaningless, so the harness stops.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the checkout holding hcqsim/ and conformance/
TARGETS = ("gfx1100", "gfx942")
CONFORMANCE_TIMEOUT_S = 300
TESTS_TIMEOUT_S = 1800


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str  # relative to the checkout
    old: str  # must occur exactly once in the file
    new: str
    doc: str  # the bug it stands for
    aql: bool = False  # the code runs only for AQL queues: conformance also runs with --aql

    @property
    def layer(self) -> str:
        parts = Path(self.file).parts
        return parts[1] if len(parts) > 2 else Path(self.file).stem


_CP = "hcqsim/engines/command_processor.py"
_SDMA = "hcqsim/engines/sdma_engine.py"
_AQL = "hcqsim/engines/aql.py"
_QUEUE = "hcqsim/engines/queue.py"
_CORE = "hcqsim/shader/core.py"

CATALOGUE: list[Mutant] = [
    # -- PM4 command processor ---------------------------------------------------------------------------
    Mutant("release_mem_value_plus_one", _CP, 'store(addr, 4, v["data"] & 0xFFFFFFFF)',
           'store(addr, 4, (v["data"] + 1) & 0xFFFFFFFF)',
           "RELEASE_MEM DATA_SEL 1 writes value + 1"),
    Mutant("release_mem_64_low_half", _CP, 'value = v["data"] if data_sel == _DATA_64 else self.gpu.clock',
           'value = v["data"] & 0xFFFFFFFF if data_sel == _DATA_64 else self.gpu.clock',
           "RELEASE_MEM DATA_SEL 2 writes only the low half of the 64-bit data"),
    Mutant("release_mem_no_interrupt", _CP, "if int_sel in _INT_ALWAYS:", "if int_sel in _INT_ALWAYS and False:",
           "RELEASE_MEM skips its interrupt (INT_SEL 2)"),
    Mutant("release_mem_interrupt_without_confirm", _CP, "_INT_ALWAYS = codes(INT_SEL, ",
           '_INT_ALWAYS = codes(INT_SEL, "WRITE_CONFIRM_NO_INT", ',
           "RELEASE_MEM INT_SEL 3 (write confirm, no interrupt) raises an interrupt anyway"),
    Mutant("release_mem_timestamp_frozen", _CP, 'value = v["data"] if data_sel == _DATA_64 else self.gpu.clock',
           'value = v["data"] if data_sel == _DATA_64 else 0', "RELEASE_MEM DATA_SEL 3 writes a frozen (zero) clock"),
    Mutant("release_mem_eq_interrupt_inverted", _CP, 'if cur == v["data"] & ((1 << 8 * width) - 1):',
           'if cur != v["data"] & ((1 << 8 * width) - 1):',
           "RELEASE_MEM INT_SEL 5/6 interrupts when memory differs from CMP_DATA"),
    Mutant("write_data_drops_last_dword", _CP, "mem.write(addr, _pack(data))", "mem.write(addr, _pack(data[:-1]))",
           "WRITE_DATA drops its last data dword"),
    Mutant("write_data_one_addr_ignored", _CP, 'if len(data) == 1 or v["wr_one_addr"]:', "if len(data) == 1:",
           "WRITE_DATA WR_ONE_ADDR increments the address anyway"),
    Mutant("wait_reg_mem_ignores_mask", _CP, "if COMPARE[func](read() & mask, ref):", "if COMPARE[func](read(), ref):",
           "WAIT_REG_MEM compares the unmasked value"),
    Mutant("atomic_mem_returns_new_value", _CP, "self.atomic_return = old", "self.atomic_return = new",
           "ATOMIC_MEM returns the post-op value (COPY_DATA SRC_SEL 6)"),
    Mutant("copy_data_64_as_32", _CP, 'size = 8 if v["count_sel"] else 4', "size = 4",
           "COPY_DATA COUNT_SEL 1 copies only 32 bits"),
    Mutant("copy_data_clock_frozen", _CP, "value = self.gpu.clock & ((1 << 8 * size) - 1)", "value = 0",
           "COPY_DATA SRC_SEL GPU_CLOCK reads a frozen counter"),
    Mutant("ib_chain_returns", _CP, 'if v["chain"] and not stream.is_ring:', "if False:",
           "INDIRECT_BUFFER CHAIN returns to the calling IB instead of replacing it"),
    Mutant("ib_size_in_bytes", _CP, 'self.push_ib(v["ib_base"], 4 * v["ib_size"])',
           'self.push_ib(v["ib_base"], v["ib_size"])', "INDIRECT_BUFFER IB_SIZE taken as bytes, not dwords"),
    Mutant("dma_data_fill_short", _CP, "self._chunked(stream, pos, n, lambda off, k: mem.fill(dst + off, pattern, k)",
           "self._chunked(stream, pos, n - 4, lambda off, k: mem.fill(dst + off, pattern, k)",
           "DMA_DATA fill leaves its last dword"),
    Mutant("dma_data_copy_drops_byte", _CP, "self._chunked(stream, pos, n, lambda off, k: mem.copy(dst + off, src",
           "self._chunked(stream, pos, n - 1, lambda off, k: mem.copy(dst + off, src", "DMA_DATA copy drops its last byte"),
    Mutant("dma_data_fill_byte_order", _CP, 'pattern = (v["src_addr"] & 0xFFFFFFFF).to_bytes(4, "little")',
           'pattern = (v["src_addr"] & 0xFFFFFFFF).to_bytes(4, "big")', "DMA_DATA fills in the wrong byte order"),
    # -- SDMA --------------------------------------------------------------------------------------------
    Mutant("sdma_copy_drops_byte", _SDMA, 'self.start_transfer(stream, pos, "COPY_LINEAR", n,',
           'self.start_transfer(stream, pos, "COPY_LINEAR", n - 1,', "SDMA COPY_LINEAR drops its last byte"),
    Mutant("sdma_copy_late", _SDMA, 'then its bytes in chunks."""\n',
           'then its bytes in chunks."""\n        self.pending_copy, (dst, src, n) = (dst, src, n), getattr(self, '
           '"pending_copy", (None, 0, 0))\n        if dst is None:\n            return\n',
           "SDMA COPY_LINEAR lands one packet late (each copy executes when the next one arrives)"),
    Mutant("sdma_fill_byte_order", _SDMA, 'data = v["data"].to_bytes(4, "little")', 'data = v["data"].to_bytes(4, "big")',
           "SDMA CONST_FILL in the wrong byte order"),
    Mutant("sdma_fence_writes_8_bytes", _SDMA, 'self.gpu.memory.write_u32(addr, v["data"])',
           'self.gpu.memory.write_u64(addr, v["data"])', "SDMA FENCE writes 8 bytes"),
    Mutant("sdma_count_edge", _SDMA, "if raw >> bits:", "if (raw + 1) >> bits:",
           "COPY_LINEAR / CONST_FILL refuse a packet of exactly the maximum count"),
    Mutant("sdma_timestamp_frozen", _SDMA, "self.gpu.memory.write_u64(addr, self.gpu.clock)\n",
           "self.gpu.memory.write_u64(addr, 0)\n", "SDMA TIMESTAMP GET_GLOBAL writes a frozen (zero) counter"),
    Mutant("sdma_local_timestamp_frozen", _SDMA,
           "return (self.timestamp_base + clock - self.timestamp_set_at) & (2 ** 64 - 1)",
           "return self.timestamp_base", "the SDMA engine-local timestamp never counts"),
    Mutant("sdma_trap_dropped", _SDMA, 'self.gpu.interrupt("sdma_trap", v["int_context"] & 0x0FFFFFFF, self)', "pass",
           "SDMA TRAP raises no interrupt"),
    Mutant("sdma_atomic_writes_old", _SDMA, "(mem.write_u64 if size == 8 else mem.write_u32)(addr, new)",
           "(mem.write_u64 if size == 8 else mem.write_u32)(addr, old)", "SDMA ATOMIC leaves memory unchanged"),
    Mutant("sdma_poll_ignores_mask", _SDMA, "if COMPARE[func](read() & mask, ref):", "if COMPARE[func](read(), ref):",
           "SDMA POLL_REGMEM compares the unmasked value"),
    Mutant("sdma_rptr_wrapped", _SDMA, "self.gpu.memory.write_u64(self.rptr_va, self.ring.pos)",
           "self.gpu.memory.write_u64(self.rptr_va, self.ring.pos % self.ring_size)",
           "SDMA rptr written back as the wrapped ring offset, not the 64-bit byte position"),
    Mutant("sdma_write_drops_last_dword", _SDMA, 'data = v["data"]\n        raw',
           'data = v["data"][:-1] or v["data"]\n        raw', "SDMA WRITE_UNTILED drops its last dword"),
    # -- compare functions and atomics (shared by both engines) -------------------------------------------
    Mutant("wait_equal_as_greater_equal", "hcqsim/compare.py", "3: lambda v, r: v == r,", "3: lambda v, r: v >= r,",
           "WAIT_REG_MEM / POLL_REGMEM == evaluated as >="),
    Mutant("wait_less_as_less_equal", "hcqsim/compare.py", "1: lambda v, r: v < r,", "1: lambda v, r: v <= r,",
           "compare function < evaluated as <="),
    Mutant("wait_not_equal_as_greater", "hcqsim/compare.py", "4: lambda v, r: v != r,", "4: lambda v, r: v > r,",
           "compare function != evaluated as >"),
    Mutant("atomic_sub_adds", "hcqsim/atomics.py", "return (old - src) & mask", "return (old + src) & mask",
           "atomic SUB adds"),
    Mutant("atomic_64_truncated", "hcqsim/atomics.py", "mask = (1 << bits) - 1", "mask = 0xFFFFFFFF",
           "64-bit atomics computed in 32 bits"),
    Mutant("atomic_cmpswap_inverted", "hcqsim/atomics.py", "return src if old == cmp else old",
           "return old if old == cmp else src", "compare-swap swaps when the compare fails"),
    Mutant("atomic_umax_as_smax", "hcqsim/atomics.py", "return max(old, src)",
           "return old if _signed(old, bits) >= _signed(src, bits) else src", "unsigned max compares signed"),
    # -- ring fetch, clock ---------------------------------------------------------------------------------
    Mutant("ring_wrap_rereads_wrong_place", _QUEUE, "data += mem.read(self.base, nbytes - first)",
           "data += mem.read(self.base + 4, nbytes - first)", "a packet straddling the ring end is read wrongly"),
    Mutant("clock_tick_frozen", "hcqsim/gpu.py", "    def tick(self, cost: int) -> None:\n        self.clock += cost",
           "    def tick(self, cost: int) -> None:\n        pass", "copies, waves and SDMA packets take no time"),
    # -- AQL packet processor ---------------------------------------------------------------------------
    Mutant("aql_kernarg_off_by_8", _AQL, '(kd["enable_sgpr_kernarg_segment_ptr"], kernarg),',
           '(kd["enable_sgpr_kernarg_segment_ptr"], kernarg + 8),', "AQL kernarg pointer off by 8", aql=True),
    Mutant("aql_barrier_and_as_or", _AQL, "if any_ else all(v == 0 for v in values)", "",
           "AQL BARRIER_AND evaluated as OR", aql=True),
    Mutant("aql_grid_rounds_down", _AQL, "groups=tuple(-(-g // w) for g, w in zip(grid, wg))",
           "groups=tuple(max(1, g // w) for g, w in zip(grid, wg))", "AQL grid rounded down: partial workgroups lost",
           aql=True),
    Mutant("aql_completion_decrements_twice", _AQL, "(mem.read_u64(signal + SIGNAL_VALUE) - 1) & _U64",
           "(mem.read_u64(signal + SIGNAL_VALUE) - 2) & _U64", "AQL completion signal decremented by 2", aql=True),
    # -- dispatch and shader core -------------------------------------------------------------------------
    Mutant("dispatch_rounds_down", "hcqsim/engines/dispatch.py", "groups = tuple(-(-t // s) for t, s in zip(dims, full))",
           "groups = tuple(max(1, t // s) for t, s in zip(dims, full))",
           "DISPATCH_DIRECT thread dimensions rounded down: partial workgroups lost"),
    Mutant("dispatch_user_sgpr_short", "hcqsim/engines/dispatch.py", 'n_user = min(f2["user_sgpr"], 16)',
           'n_user = max(0, min(f2["user_sgpr"], 16) - 1)', "the last user SGPR is not loaded"),
    Mutant("workgroup_id_z_as_y", _CORE, "W.s[:, sgpr] = (gids[:, dim] + d.start[dim]).astype(np.uint32)",
           "W.s[:, sgpr] = (gids[:, min(dim, 1)] + d.start[dim]).astype(np.uint32)", "workgroup id Z computed as Y"),
    Mutant("thread_id_y_misplaced", _CORE, "t % sx | (t // sx) % sy << 10 | t // (sx * sy) << 20",
           "t % sx | (t // sx) % sy << 11 | t // (sx * sy) << 20", "work-item id Y packed at the wrong bit"),
    Mutant("s_barrier_does_not_hold", "hcqsim/shader/salu.py", "W.at_barrier[w] = True\n", "\n",
           "s_barrier does not hold the wave"),
    Mutant("v_add_one_lane_wrong", "hcqsim/shader/alu.py", '"v_add_nc_u32": ("u32", ("u32", "u32"), lambda a, b: a + b),',
           '"v_add_nc_u32": ("u32", ("u32", "u32"), lambda a, b: a + b + (np.arange(a.size).reshape(a.shape) == 5)'
           ' if getattr(a, "size", 1) > 5 else a + b),', "v_add_nc_u32 (v_add_u32) wrong in lane 5"),
    Mutant("global_atomic_returns_new", "hcqsim/shader/memops.py", "        rets[:] = old\n",
           "        rets[:] = fn(old, srcs) if not cmpswap else old\n", "a returning global atomic returns the new value"),
    Mutant("lds_store_dropped_for_odd_groups", "hcqsim/shader/memops.py",
           "ok = (addrs >= 0) & (addrs + nbytes <= size)  # out-of-range writes are dropped",
           "ok = (addrs >= 0) & (addrs + nbytes <= size) & (groups % 2 == 0)",
           "LDS stores of every second workgroup are lost"),
    # -- memory and the KFD driver ---------------------------------------------------------------------------
    Mutant("page_permissions_ignored", "hcqsim/memory.py",
           "            if not getattr(m, attr):\n                raise VMFaultError",
           "            if False:\n                raise VMFaultError", "page permissions (read-only, no-execute) ignored"),
    Mutant("fault_kind_wrong", "hcqsim/kfd/events.py", "data.ReadOnly = 1", "data.NotPresent = 1",
           "a write to a read-only page is reported as not present"),
    Mutant("fault_address_next_page", "hcqsim/kfd/events.py", "MemoryExceptionData(gpu_id=dev.gpu_id, va=page)",
           "MemoryExceptionData(gpu_id=dev.gpu_id, va=page + PAGE_SIZE)", "a memory exception names the next page"),
    Mutant("events_of_second_gpu_never_delivered", "hcqsim/kfd/events.py",
           "for dev in driver.devices]", "for dev in driver.devices[:1]]",
           "KFD events (interrupts) of a second GPU are never delivered"),
    Mutant("topology_sdma_queues_halved", "hcqsim/kfd/topology.py",
           "num_sdma_queues_per_engine=target.sdma_queues_per_engine",
           "num_sdma_queues_per_engine=max(1, target.sdma_queues_per_engine // 2)",
           "topology under-reports SDMA queues per engine"),
    Mutant("topology_cp_queues_under_reported", "hcqsim/kfd/topology.py", "num_cp_queues=target.cp_queues",
           "num_cp_queues=max(1, target.cp_queues - 4)", "topology under-reports compute queues"),
]

# The short profile of the default test command: a mutant per engine, each with the scenarios (and the target)
# that must catch it through the reference model; a few seconds each.
QUICK: dict[str, tuple[str, list[str]]] = {
    "release_mem_value_plus_one": ("gfx1100", ["compute_queue_create_signal"]),
    "sdma_copy_drops_byte": ("gfx942", ["cpu_write_then_gpu_copy"]),
    "sdma_rptr_wrapped": ("gfx1100", ["copy_ring_wraparound"]),
    "wait_equal_as_greater_equal": ("gfx1100", ["pm4_wait_reg_mem_functions"]),
    "events_of_second_gpu_never_delivered": ("gfx942", ["events_on_every_gpu"]),
    "s_barrier_does_not_hold": ("gfx1100", ["kernel_workgroup_barrier_lds"]),
    "topology_sdma_queues_halved": ("gfx942", ["every_copy_queue", "topology_a_runtime_reads"]),
}

NAMES = [m.name for m in CATALOGUE]
assert len(set(NAMES)) == len(NAMES), "mutant names must be unique"


def get(name: str) -> Mutant:
    for m in CATALOGUE:
        if m.name == name:
            return m
    raise KeyError(f"no mutant {name!r}; mutants: {', '.join(NAMES)}")


# -- the temporary tree --------------------------------------------------------------------------------------

_IGNORE = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".pytest_cache", "build", "dist", "*.egg-info")


def copy_tree(dst: Path, src: Path = ROOT) -> Path:
    """The checkout's files (no .git, no caches) under `dst`."""
    for entry in src.iterdir():
        if entry.name in (".git", "__pycache__", ".pytest_cache", "build", "dist") or entry.name.endswith(".egg-info"):
            continue
        if entry.is_dir():
            shutil.copytree(entry, dst / entry.name, ignore=_IGNORE)
        else:
            shutil.copy2(entry, dst / entry.name)
    return dst


def applies(m: Mutant, root: Path = ROOT) -> bool:
    path = root / m.file
    return path.exists() and path.read_text().count(m.old) == 1


def apply(m: Mutant, root: Path) -> bool:
    """Plant the mutant in the tree at `root`; False (tree unchanged) if its text does not occur exactly once."""
    if not applies(m, root):
        return False
    path = root / m.file
    path.write_text(path.read_text().replace(m.old, m.new, 1))
    return True


# -- running ------------------------------------------------------------------------------------------------


def _env(root: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root)
    env.pop("PYTEST_ADDOPTS", None)
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    return env


@dataclass
class Verdict:
    caught: bool
    how: str  # ref, golden, error, timeout, crash, no
    first: str = ""  # the first failing scenario (catalogue order) and its first difference


def run_conformance(root: Path, target: str, *, aql: bool = False, scenarios: list[str] | None = None,
                    timeout_s: int = CONFORMANCE_TIMEOUT_S) -> Verdict:
    """`hcqsim conformance` in the tree at `root` on one target, against the reference model and sim golden."""
    golden = root / "conformance" / "golden" / f"sim-{target}.json"
    cmd = [sys.executable, "-m", "hcqsim", "conformance", "--device", "sim", "--target", target, "--json",
           "--compare", str(golden)] + (["--aql"] if aql else []) + list(scenarios or [])
    try:
        p = subprocess.run(cmd, cwd=root, env=_env(root), capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return Verdict(True, "timeout", f"no result within {timeout_s} s")
    try:
        out = json.loads(p.stdout)
    except json.JSONDecodeError:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        return Verdict(True, "crash", f"exit {p.returncode}: {tail[:160]}")
    failed = out["failed"]
    if not failed:
        return Verdict(False, "no")
    order = scenarios or _scenario_order(root)
    first = min(failed, key=lambda n: order.index(n) if n in order else len(order))
    if first in out["errors"]:
        return Verdict(True, "error", f"{first}: {out['errors'][first][:140]}")
    diffs = [d for n in failed for d in out["differences"].get(n, [])]
    how = "ref" if any(d.startswith("reference:") for d in diffs) else "golden"
    return Verdict(True, how, f"{first}: {out['differences'][first][0][:140]}")


def _scenario_order(root: Path) -> list[str]:
    code = "import conformance.scenarios as s; print('\\n'.join(s.NAMES))"
    p = subprocess.run([sys.executable, "-c", code], cwd=root, env=_env(root), capture_output=True, text=True)
    return p.stdout.split()


def run_tests(root: Path, timeout_s: int = TESTS_TIMEOUT_S, workers: int = 1) -> Verdict:
    """The default test suite (stopping at the first failure) in the tree at `root`."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not slow",
           "--ignore", "tests/test_conformance_mutants.py"] + (["-n", str(workers)] if workers > 1 else [])
    try:
        p = subprocess.run(cmd, cwd=root, env=_env(root), capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return Verdict(True, "timeout", f"no result within {timeout_s} s")
    if p.returncode == 0:
        return Verdict(False, "no")
    failed = [ln for ln in p.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))]
    return Verdict(True, "fail", (failed[0] if failed else p.stdout.strip().splitlines()[-1])[:160])


@dataclass
class Result:
    mutant: Mutant
    applied: bool
    conformance: dict  # target (or target+aql) -> Verdict
    tests: Verdict | None = None
    seconds: float = 0.0

    @property
    def caught_by_conformance(self) -> bool:
        return any(v.caught for v in self.conformance.values())


def mutate_and_run(m: Mutant, *, targets=TARGETS, aql: bool = True, tests: bool | str = False,
                   scenarios: list[str] | None = None, workers: int = 1) -> Result:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"hcqsim-mutant-{m.name}-") as tmp:
        root = copy_tree(Path(tmp))
        if not apply(m, root):
            return Result(m, False, {})
        verdicts = {}
        for t in targets:
            verdicts[t] = run_conformance(root, t, scenarios=scenarios)
            if m.aql and not aql and not verdicts[t].caught:  # code of the AQL path: the PM4 run cannot see it
                v = run_conformance(root, t, aql=True, scenarios=scenarios)
                verdicts[t] = Verdict(v.caught, v.how + " (aql)" if v.caught else v.how, v.first)
            if aql:
                verdicts[t + "+aql"] = run_conformance(root, t, aql=True, scenarios=scenarios)
        survived = not any(v.caught for v in verdicts.values())
        tv = run_tests(root, workers=workers) if tests is True or (tests == "survivors" and survived) else None
    return Result(m, True, verdicts, tv, time.perf_counter() - t0)


def baseline(targets=TARGETS, aql: bool = True) -> list[str]:
    """Problems of the unmutated tree (it must conform, or no mutant's verdict means anything)."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="hcqsim-mutant-baseline-") as tmp:
        root = copy_tree(Path(tmp))
        for t in targets:
            for use_aql in ([False, True] if aql else [False]):
                v = run_conformance(root, t, aql=use_aql)
                if v.caught:
                    problems.append(f"{t}{'+aql' if use_aql else ''}: {v.how} {v.first}")
    return problems


# -- the table ----------------------------------------------------------------------------------------------


def table(results: list[Result], columns: list[str], tests: bool) -> str:
    head = ["mutant"] + [f"conf {c}" for c in columns] + (["tests"] if tests else []) + ["first failing scenario"]
    rows = []
    for r in results:
        if not r.applied:
            rows.append([r.mutant.name] + ["n/a"] * len(columns) + (["n/a"] if tests else []) + ["does not apply"])
            continue
        cells = [r.conformance[c].how if r.conformance[c].caught else "NO" for c in columns]
        first = next((r.conformance[c].first for c in columns if r.conformance[c].caught), "")
        tcell = ([("yes" if r.tests.caught else "NO") if r.tests else "-"] if tests else [])
        if not first and r.tests and r.tests.caught:
            first = "(tests) " + r.tests.first
        rows.append([r.mutant.name] + cells + tcell + [first])
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(head)]
    widths[-1] = len(head[-1])
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(r) for r in rows])


def summary(results: list[Result], columns: list[str], tests: bool) -> str:
    applied = [r for r in results if r.applied]
    n = len(applied)
    if not n:
        return "no mutant applies"
    out = [f"{len(results)} mutants, {n} apply" + (f" ({len(results) - n} do not apply)" if n < len(results) else "")]
    for c in columns:
        k = sum(r.conformance[c].caught for r in applied)
        ref = sum(r.conformance[c].caught and r.conformance[c].how.startswith("ref") for r in applied)
        out.append(f"conformance {c}: {k}/{n} caught ({100 * k / n:.0f}%), {ref} by the reference model")
    k = sum(r.caught_by_conformance for r in applied)
    out.append(f"conformance alone (any of {', '.join(columns)}): {k}/{n} ({100 * k / n:.0f}%)")
    if tests:
        ran = [r for r in applied if r.tests]
        kt = sum(r.tests.caught for r in ran)
        both = sum(r.caught_by_conformance or bool(r.tests and r.tests.caught) for r in applied)
        out.append(f"default test suite: {kt}/{len(ran)} of the mutants it ran on; conformance or tests: {both}/{n}")
    survivors = [r.mutant.name for r in applied if not r.caught_by_conformance]
    if survivors:
        out.append("survive conformance: " + ", ".join(survivors))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m conformance.mutate", description=__doc__.split("\n\n")[0])
    ap.add_argument("mutants", nargs="*", help="only these (default: the whole catalogue)")
    ap.add_argument("--list", action="store_true", help="print the catalogue and whether each applies")
    ap.add_argument("--quick", action="store_true", help="only the short profile of the default tests")
    ap.add_argument("--target", action="append", choices=TARGETS, help="only this target (repeatable)")
    ap.add_argument("--no-aql", dest="aql", action="store_false",
                    help="PM4 compute queues only (default: PM4 and AQL, the main job's matrix); a mutant of AQL code "
                         "is still run with --aql where PM4 misses it")
    ap.add_argument("--aql", dest="aql", action="store_true", help=argparse.SUPPRESS)  # the default now
    ap.add_argument("--tests", action="store_true", help="also run the default test suite on each mutant (slow)")
    ap.add_argument("--tests-for-survivors", action="store_true",
                    help="run the default test suite only on the mutants conformance does not catch")
    ap.add_argument("--tests-workers", type=int, default=1, help="pytest -n for --tests (default 1: a shared machine)")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="mutants run at once (default 1: a shared machine)")
    args = ap.parse_args(argv)
    if args.list:
        for m in CATALOGUE:
            print(f"{m.name:40} {m.file:36} {'applies' if applies(m) else 'DOES NOT APPLY':14} {m.doc}")
        return 0
    chosen = [get(n) for n in args.mutants] if args.mutants else \
        [get(n) for n in QUICK] if args.quick else CATALOGUE
    targets = tuple(args.target or TARGETS)
    columns = [c for t in targets for c in ([t, t + "+aql"] if args.aql else [t])]
    problems = baseline(targets, args.aql)
    if problems:
        print("the unmutated tree does not conform; no verdict would mean anything:\n  " + "\n  ".join(problems))
        return 2
    t0 = time.perf_counter()
    tests = True if args.tests else "survivors" if args.tests_for_survivors else False
    def one(m: Mutant) -> Result:
        r = mutate_and_run(m, targets=targets, aql=args.aql, tests=tests, workers=args.tests_workers)
        state = "does not apply" if not r.applied else ("caught" if r.caught_by_conformance else "SURVIVES") + \
            (f", tests {'caught' if r.tests.caught else 'MISSED'}" if r.tests else "")
        print(f"{m.name}: {state} ({r.seconds:.0f} s)", file=sys.stderr, flush=True)
        return r

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:  # each mutant runs in subprocesses
        results = list(pool.map(one, chosen))
    print(table(results, columns, bool(tests)))
    print()
    print(summary(results, columns, bool(tests)) + f"\n({time.perf_counter() - t0:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps([{
            "mutant": r.mutant.name, "file": r.mutant.file, "doc": r.mutant.doc, "applied": r.applied,
            "conformance": {c: vars(v) for c, v in r.conformance.items()},
            "tests": vars(r.tests) if r.tests else None} for r in results], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
