"""The shader core: runs a DISPATCH_DIRECT's waves by executing the kernel's machine code.

Everything comes from the dispatch registers and GPU memory (HARDWARE_FACTS 4.2-4.5, ISA_FACTS 4.4):
code at COMPUTE_PGM, VGPR count and float mode from RSRC1, user SGPR count, system SGPRs, work-item
id VGPRs and LDS size from RSRC2, user SGPR values from USER_DATA, group sizes and counts from the
NUM_THREAD / DIM registers. Nothing about the kernel is known in advance.

Execution is data-parallel over waves: workgroups are laid out in batches; within a batch, the scheduler
repeatedly takes every runnable wave at the lowest PC and runs that one instruction for all of them
at once (numpy over [waves, lanes]). Waves that branch apart are picked up at their own PCs and meet
again where their paths join; `s_barrier` holds a wave until every live wave of its workgroup arrived.
Memory effects are synchronous and coherent, so waitcnt, clauses, delays and cache invalidates are no-ops.

A dispatch is an activity, not a call: `ShaderCore.launch` checks it and returns an `ActiveDispatch`, which
the GPU's scheduler advances in quanta of issue steps beside the queues' packets and the host (the CP moves
on past DISPATCH_DIRECT, HARDWARE_FACTS 6.3). Workgroup launch order, which PC issues next and whether one wave
of that PC issues ahead of the others are policy choices; the in-order default launches workgroups in the CP's
order and issues every wave at the lowest PC together, in wave order.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np

from ..errors import EngineError, RunawayStop, SpinningWave, UnsupportedError, VMFaultError
from ..registers import RSRC2
from . import fast, fpmode, translate
from .compile import InstructionCache, compile_instr, gfx9_as_gfx11
from .decoder import decode, sext
from .dispatch import Dispatch
from .matrix import acc_operands
from .cached import InstructionFetch
from .memops import _flat_address
from .operands import Context, ShaderFault
from .salu import _NOP_SOPP
from .spin import MEMORY, RUNS, SPIN_ITERATIONS, SpinWatch
from .waves import EXEC, Waves

# RSRC1.VGPRS granule (facts 4.2): gfx11 wave32 8, wave64 4; gfx942 8 (VGPRs and AGPRs share one file)
VGPR_GRANULE = {"gfx1100": {32: 8, 64: 4}, "gfx942": {64: 8}}
SCRATCH_GRANULE = {"gfx1100": (256, 0x7FFF), "gfx942": (1024, 0x1FFF)}  # TMPRING_SIZE.WAVESIZE unit, mask
BATCH_BYTES = 48 << 20  # VGPR state per batch of workgroups
# The runaway bound of one kernel: issue steps (one instruction issued for every wave at one PC) per dispatch,
# across progress points. What costs host time is steps, not waves: 10-40 us each, so the default is ~20-90 s of
# CPU. Configurable per GPU (`EmulatedGPU(max_kernel_steps=...)`, `gpu.shader_core.max_kernel_steps`).
MAX_KERNEL_STEPS = 1 << 21
# A kernel that issues this many steps without finishing hands the scheduler a turn (a quantum): later packets of
# its queue, other queues and the host run beside it. The in-order default runs shorter kernels to completion first.
DISPATCH_QUANTUM = 4096
FETCH_BYTES = 16
# Fast path: a whole batch's instruction runs for this many lanes at a time (`_run_chunked`)
CHUNK_LANES = 1 << 15
_ENDPGM = {"gfx1100": b"\x00\x00\xb0\xbf", "gfx942": b"\x00\x00\x81\xbf"}  # s_endpgm: a kernel that does nothing


def _group_ids(groups: tuple[int, int, int], first: int, n: int) -> np.ndarray:
    """int64 [n, 3] ids of the workgroups first .. first + n - 1 in the order the CP walks them (x fastest).
    The linear index may exceed int64, so only the batch's offsets from its first group are numpy values."""
    gx, gy, _ = groups
    x0, rest = divmod(first, gx)[::-1]
    y0, z0 = rest % gy, rest // gy
    if n == 1 and fast.enabled:  # fast path: one group, its ids as they are
        return np.array([[x0, y0, z0]], np.int64)
    local = np.arange(n, dtype=np.int64) + x0
    ylin = local // gx + y0
    return np.stack([local % gx, ylin % gy, ylin // gy + z0], axis=1)


@functools.lru_cache(maxsize=64)
def _layout_of(size: tuple[int, int, int], wpg: int, lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """`_thread_layout`, made once per group shape (read-only arrays: callers tile them)."""
    ids, valid = _thread_layout(np.array(size, np.int64), wpg, lanes)
    ids.flags.writeable = valid.flags.writeable = False
    return ids, valid


def _thread_layout(size: np.ndarray, wpg: int, lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """VGPR0 (x | y << 10 | z << 20) and the valid lanes, [wpg, lanes] each, of the waves of one workgroup of
    `size` (x, y, z) threads: thread t of the group is lane t % lanes of wave t // lanes."""
    t = np.arange(wpg * lanes, dtype=np.int64).reshape(wpg, lanes)
    sx, sy = size[0], size[1]
    valid = t < size.prod()
    ids = np.where(valid, t % sx | (t // sx) % sy << 10 | t // (sx * sy) << 20, 0).astype(np.uint32)
    return ids, valid


class ShaderCore:
    """Attached to an EmulatedGPU as `gpu.shader_core`. The CP calls `launch(queue, Dispatch)`: the checks that
    fault the launching packet happen there, and the dispatch's waves then run as an `ActiveDispatch`, an activity
    the GPU's scheduler advances in quanta beside the queues (or `None` when nothing is left to run)."""

    def __init__(self, gpu, arch: str | None = None, mode: str | None = None):
        self.gpu = gpu
        self.arch = arch or gpu.target.name
        # "interpret" (the default) or "translate": runs of covered instructions as native blocks (shader.translate)
        self.mode = translate.mode_from_environment() if mode is None else mode
        if self.mode not in translate.MODES:
            raise ValueError(f"shader mode {self.mode!r}: expected one of {translate.MODES}")
        self.translator = translate.Translator(self.arch) if self.mode == "translate" else None
        self._compiled = InstructionCache()  # (pc, words, lanes, vgprs, acc) -> closure, across dispatches (LRU)
        self._polls = InstructionCache()  # (pc, words, lanes, vgprs, acc) -> (instruction, address function)
        self._recent: dict = {}  # fast path: (lanes, vgprs, acc) -> {pc: (the 16 code bytes, closure) last run there}
        self.stats = {"dispatches": 0, "waves": 0, "wave_instructions": 0, "lane_instructions": 0, "issue_steps": 0}
        self.max_kernel_steps = MAX_KERNEL_STEPS
        # periods of a loop that only counts (memory unchanged) before it is reported as a spin; None: never
        self.spin_iterations: int | None = SPIN_ITERATIONS
        self.watch_spins = True  # False: no spin is ever found (a loop runs into max_kernel_steps; bench/emulator.py)
        # with a memory model on, instructions come through GLI (hcqsim.shader.cached); None: plain memory reads
        self._fetch = InstructionFetch(gpu.coherence, self.arch) if gpu.coherence is not None else None

    # -- the dispatch --------------------------------------------------------------------------------

    def launch(self, queue, d: Dispatch, policy=None) -> "ActiveDispatch | None":
        """Check the dispatch and launch it: its waves run later, in `ActiveDispatch.advance` quanta. `policy`
        (the GPU's scheduler policy) may choose the workgroup order and which waves issue next."""
        if self.arch not in VGPR_GRANULE:
            raise UnsupportedError(f"the shader core executes {sorted(VGPR_GRANULE)} code, not {self.arch}")
        rsrc2 = RSRC2.decode([d.rsrc2])
        self._check_modes(d, rsrc2)
        lanes = d.wave_size
        vgprs = ((d.rsrc1 & 0x3F) + 1) * VGPR_GRANULE[self.arch][lanes]
        group_threads = d.group_size[0] * d.group_size[1] * d.group_size[2]
        waves_per_group = -(-group_threads // lanes)
        n_groups = d.groups[0] * d.groups[1] * d.groups[2]  # a Python int: 32-bit dims multiply past int64
        budget = getattr(queue, "wave_budget", None)  # the queue's runaway bound left in this progress point
        if budget is not None and n_groups * waves_per_group > budget:  # refused whole: no partial effects
            raise RunawayStop(f"DISPATCH_DIRECT of {d.groups} workgroups ({n_groups * waves_per_group} waves) of "
                              f"the kernel at 0x{self.gpu.canonical(d.pgm_addr):x}: more than the {budget} waves "
                              f"the runaway bound leaves this queue in this progress point (EmulatedGPU("
                              f"max_packets_per_run=...))")
        per_wave = vgprs * lanes * 4 + 1024
        batch_groups = max(1, BATCH_BYTES // (per_wave * waves_per_group))
        scratch = self._scratch(d, rsrc2, self.arch)
        if scratch is not None:  # only TMPRING_SIZE.WAVES waves may hold scratch at once: batch no more
            batch_groups = max(1, min(batch_groups, scratch[2] // waves_per_group))
            if waves_per_group > scratch[2]:
                raise ShaderFault(f"a workgroup of {waves_per_group} waves needs more scratch slots than "
                                  f"COMPUTE_TMPRING_SIZE.WAVES = {scratch[2]}")
        total_waves = n_groups * waves_per_group
        self.stats["dispatches"] += 1
        self.stats["waves"] += total_waves
        self.gpu.trace.append((self.gpu.clock, queue.name, "dispatch",
                               f"kernel at 0x{self.gpu.canonical(d.pgm_addr):x}: groups {d.groups} of "
                               f"{d.group_size}, {total_waves} wave{lanes}s"))
        if self.gpu.memory.read(d.pgm_addr, 4) == _ENDPGM[self.arch]:  # an empty kernel: its waves only end
            self.stats["wave_instructions"] += total_waves
            self.stats["lane_instructions"] += total_waves * lanes
            return None
        order = None
        choose = getattr(policy, "workgroup_order", None)
        if choose is not None:
            order = choose(n_groups)
            if order is not None:
                order = list(order)
                if sorted(order) != list(range(n_groups)):
                    raise ValueError(f"workgroup_order({n_groups}) must return a permutation of range({n_groups})")
                batch_groups = n_groups if n_groups * waves_per_group * per_wave <= BATCH_BYTES else batch_groups
        act = ActiveDispatch(self, queue, d, rsrc2, scratch, lanes, vgprs, waves_per_group, n_groups, batch_groups,
                             total_waves, order, getattr(policy, "choose_waves", None),
                             getattr(policy, "split_waves", None))
        act.change_point = getattr(policy, "memory_change_point", None)
        return act

    def dispatch(self, queue, d: Dispatch) -> int:
        """Launch and run to completion at once (no interleaving): the number of waves launched."""
        running = self.launch(queue, d)
        while running is not None and not running.done:
            running.advance(1 << 62)
        n_groups = d.groups[0] * d.groups[1] * d.groups[2]
        return n_groups * -(-(d.group_size[0] * d.group_size[1] * d.group_size[2]) // d.wave_size)

    @staticmethod
    def _scratch(d: Dispatch, rsrc2: dict, arch: str) -> tuple[int, int, int] | None:
        """(scratch base, bytes per wave, wave slots) from DISPATCH_SCRATCH_BASE and TMPRING_SIZE (gfx11:
        WAVESIZE[26:12] in 256-byte granules), or None when RSRC2.SCRATCH_EN is off."""
        if not rsrc2["scratch_en"]:
            return None
        unit, mask = SCRATCH_GRANULE[arch]
        waves, wavesize = d.tmpring_size & 0xFFF, ((d.tmpring_size >> 12) & mask) * unit
        if not (waves and wavesize and d.scratch_base):
            raise ShaderFault(f"RSRC2.SCRATCH_EN with no scratch: TMPRING_SIZE 0x{d.tmpring_size:x}, scratch base "
                              f"0x{d.scratch_base:x}")
        return d.scratch_base, wavesize, waves

    @staticmethod
    def _check_modes(d: Dispatch, rsrc2: dict) -> None:
        float_mode = (d.rsrc1 >> 12) & 0xFF
        if float_mode & 0xF:
            raise UnsupportedError(f"RSRC1 float round mode 0x{float_mode & 0xF:x}: only round-to-nearest-even is "
                                   f"emulated")
        if rsrc2["tg_size_en"]:
            raise UnsupportedError("RSRC2.TG_SIZE_EN (workgroup info SGPR) is not emulated")


    def _launch(self, d: Dispatch, rsrc2: dict, batch: list, lanes: int, vgprs: int, wpg: int) -> Waves:
        """Initial wave state for a batch of workgroups (ISA_FACTS 4.4, HARDWARE_FACTS 4.5)."""
        n = len(batch) * wpg
        W = Waves(n, lanes, vgprs, len(batch), max(d.lds_bytes, 4))
        user = d.user_data
        W.s[:, :len(user)] = np.array(user, np.uint32)
        one = len(batch) == 1 and fast.enabled  # fast path: one group (its waves' group index is 0 already)
        if not one:
            gids = np.repeat(batch, wpg, axis=0)  # [n, 3] workgroup ids
            W.group[:] = np.repeat(np.arange(len(batch)), wpg)
        sgpr = len(user)
        for dim, key in enumerate(("tgid_x_en", "tgid_y_en", "tgid_z_en")):
            if rsrc2[key]:
                if one:
                    W.s[:, sgpr] = (int(batch[0, dim]) + d.start[dim]) & 0xFFFFFFFF
                else:
                    W.s[:, sgpr] = (gids[:, dim] + d.start[dim]).astype(np.uint32)
                sgpr += 1
        # the threads of each workgroup: every full group has one layout, computed once and tiled; only groups
        # last in a dimension with a trailing partial group are smaller (at most 7 other layouts)
        full = np.array(d.group_size, np.int64)
        ids, valid = _layout_of(tuple(int(x) for x in d.group_size), wpg, lanes)
        if one:  # fast path: one group, nothing to tile
            W.v[:, 0] = ids
            valid = valid.copy()
        else:
            W.v[:, 0] = np.tile(ids, (len(batch), 1))
            valid = np.tile(valid, (len(batch), 1))
        odd = ()
        if any(d.partial_size) or not fast.enabled:  # fast path: no partial groups, none to look for
            partial = np.array(d.partial_size, np.int64)
            short = (batch == np.array(d.groups, np.int64) - 1) & (partial > 0)  # [groups, 3]
            odd = np.nonzero(short.any(axis=1))[0]
        if len(odd):
            for pattern in np.unique(short[odd], axis=0):
                members = odd[(short[odd] == pattern).all(axis=1)]
                rows = (members[:, None] * wpg + np.arange(wpg)).ravel()
                ids, ok = _thread_layout(np.where(pattern, partial, full), wpg, lanes)
                W.v[rows, 0] = np.tile(ids, (len(members), 1))
                valid[rows] = np.tile(ok, (len(members), 1))
        W.set_mask(slice(None), EXEC, valid)
        W.pc[:] = d.pgm_addr
        mode = fpmode.initial_mode(d.rsrc1)  # denormal modes are emulated (fpmode)
        if fast.enabled:  # fast path: one mode for every wave, whether it flushes worked out once
            W.mode[:] = mode
            W.flushing = (int(mode) >> 4 & 0xF) != 0xF
        else:
            W.set_mode(slice(None), mode)
        return W

    @staticmethod
    def _release_barriers(W: Waves, force_check: bool = False, d: Dispatch | None = None) -> None:
        """Release every workgroup whose live waves all wait at the barrier."""
        waiting = W.at_barrier & W.alive
        if not waiting.any():
            return
        groups = np.unique(W.group[waiting])
        released = False
        for g in groups:
            members = (W.group == g) & W.alive
            if (W.at_barrier[members]).all():
                W.at_barrier[members] = False
                released = True
        if force_check and not released:
            raise ShaderFault(f"barrier deadlock: workgroups {groups.tolist()} wait at s_barrier but not every wave "
                              f"of them can arrive")

    def recent(self, W: Waves, ctx: Context) -> dict:
        """The fetch fast path's closures for waves of this shape: pc -> (the code bytes, closure) last run there."""
        key = (W.lanes, W.vgprs, getattr(ctx, "accum_offset", 0))
        found = self._recent.get(key)
        if found is None:
            found = self._recent[key] = {}
        return found

    def instruction(self, pc: int, W: Waves, ctx: Context, d: Dispatch, recent: dict | None = None):
        """The closure of the instruction at `pc`; `recent`: `self.recent(W, ctx)`, when the caller holds it."""
        if self._fetch is None and fast.enabled:  # fast path: the code bytes unchanged since this pc last ran
            m = self.gpu.memory.find(pc)
            if m is not None and m.executable and m.readable and pc + 4 <= m.end:
                code = ctypes.string_at(pc + m.shift, min(FETCH_BYTES, m.end - pc))  # what memory.read gives
                hit = (recent if recent is not None else self.recent(W, ctx)).get(pc)
                if hit is not None and hit[0] == code:
                    return hit[1]
        run = self._instruction(pc, W, ctx, d)
        if self._fetch is None:
            shape = self.recent(W, ctx)
            if len(shape) >= self._compiled.capacity:
                shape.clear()
            m = self.gpu.memory.find(pc)
            shape[pc] = (self.gpu.memory.read(pc, min(FETCH_BYTES, m.end - pc)), run)
        return run

    def _instruction(self, pc: int, W: Waves, ctx: Context, d: Dispatch):
        """The general fetch: check, read, look up or decode and compile."""
        mem = self.gpu.memory
        try:
            mem.check(pc, 4, "execute")
        except VMFaultError as e:
            raise ShaderFault(f"{ctx.kernel}: instruction fetch at PC +0x{pc - d.pgm_addr:x}: {e}") from None
        m = mem.find(pc)
        nbytes = min(FETCH_BYTES, m.end - pc)
        code = mem.read(pc, nbytes) if self._fetch is None else self._fetch(mem, pc, nbytes, ctx.kernel)
        acc = getattr(ctx, "accum_offset", 0)  # a compiled AGPR operand depends on it too
        key = (pc, code, W.lanes, W.vgprs, acc)
        run = self._compiled.get(key)
        if run is None:
            instr = decode(code, 0, self.arch)
            instr.pc = pc - d.pgm_addr
            key = (pc, code[:instr.size], W.lanes, W.vgprs, acc)
            run = self._compiled.get(key)
            if run is None:
                run = compile_instr(instr, ctx)
                _classify(run)
                run.size, run.straight = instr.size, _straight(instr)
                self._compiled[key] = run
            self._compiled[(pc, code, W.lanes, W.vgprs, acc)] = run
        return run

    def poll_address(self, pc: int, W: Waves, w, ctx: Context, d: Dispatch) -> int | None:
        """The address a load at `pc` reads for the first active lane of the first selected wave (livelock
        reports name what a spinning wave polls); None when it cannot be worked out."""
        try:
            code = self.gpu.memory.read(pc, min(FETCH_BYTES, self.gpu.memory.find(pc).end - pc))
            key = (pc, code, W.lanes, W.vgprs, getattr(ctx, "accum_offset", 0))
            found = self._polls.get(key)
            if found is None:  # decoded once per instruction (a spin polls with the same one every iteration)
                instr = decode(code, 0, self.arch)
                instr.pc = pc - d.pgm_addr
                if self.arch == "gfx942":
                    instr = acc_operands(gfx9_as_gfx11(instr, ctx), ctx)
                address = _flat_address(instr, ctx) if instr.family in ("GLOBAL", "FLAT") else None
                found = self._polls[key] = (instr, address)
            instr, address = found
            sel = np.atleast_1d(np.arange(W.n)[w])[:1]
            if address is not None:
                addrs = address(W, sel)
                lanes = W.exec_lanes(sel)
                return int(addrs[lanes][0]) if lanes.any() else None
            if instr.family == "SMEM":
                f = instr.fields
                base_reg = f["sbase"] * 2
                addr = int(W.s[sel[0], base_reg]) | int(W.s[sel[0], base_reg + 1]) << 32
                addr += sext(f["offset"], 21)
                if f["soffset"] != ctx.null:
                    addr += int(W.s[sel[0], f["soffset"]])
                return addr & ~3 & (2 ** 64 - 1)
        except Exception:  # a report keeps what it could work out
            return None
        return None


# The memory epoch (shader.spin.MEMORY): bumped by every store a wave issues and every packet batch a queue
# executes, on any GPU. A wave state that repeats with the epoch unchanged is a spin: nothing it could read changed.
EPOCH = MEMORY
_WRITES = ("store", "atomic")  # mnemonic parts of instructions that write memory (LDS is part of the wave state)
_POLLS = ("load", "atomic")  # ... and of those that read it: what a spinning wave may poll with
_FIRST_WAVE = np.zeros(1, np.int64)  # the selection of a one-wave batch (never written)


def _run_chunked(run, W: Waves, chunk: int) -> None:
    """Fast path: an instruction that every wave of a large batch issues, run for `chunk` waves at a time in wave
    order, so each numpy temporary stays in the CPU caches. Only for instructions that write no memory outside
    LDS: the waves are independent, and LDS effects land in the same (wave, lane) order as in one run; a fault in
    a later chunk leaves earlier chunks' registers written, which a faulted dispatch never uses. A store keeps one
    run, so a fault in any lane still writes nothing."""
    W.exec_lanes(slice(None))  # EXEC as bool lanes, for every chunk to slice
    for start in range(0, W.n, chunk):
        run(W, slice(start, start + chunk))


def _run_placed(run, W: Waves, sel: np.ndarray, slots: np.ndarray, model) -> None:
    """A memory instruction for waves on several CU slots: one run per slot, each with `model.slot` set (the CUs
    act independently; their order here is one the hardware allows)."""
    here = slots[sel]
    for slot in np.unique(here).tolist():
        model.slot = slot
        part = sel[here == slot]
        run(W, slice(None) if part.size == W.n else part)


# instructions whose effect depends on the CU / XCC they run on (the cache model's paths): the others run once
_PLACED = ("global_", "flat_", "scratch_", "buffer_", "s_load", "s_buffer", "s_dcache", "s_icache", "s_gl1")


# Formats whose instructions only ever step the PC by their size: no branch, no end, no barrier, EXEC and memory
# aside (SOP1 holds s_setpc / s_swappc, SOPK s_call, so those are not among them; of SOPP only the no-ops are)
_STRAIGHT = frozenset({"VOP1", "VOP2", "VOPC", "VOP3", "VOP3B", "VOP3SD", "VOP3P", "VOPD", "VOP3P_MAI", "DS", "FLAT",
                       "GLOBAL", "SCRATCH", "SMEM", "MUBUF", "SOP2", "SOPC"})


def _straight(instr) -> bool:
    """Does the instruction leave every wave that issues it runnable at PC + size?"""
    return instr.family in _STRAIGHT or (instr.family == "SOPP" and instr.mnemonic in _NOP_SOPP)


def _classify(run) -> None:
    """Mark a compiled instruction as writing and/or reading memory (outside LDS), from its mnemonic."""
    name = getattr(run, "text", "").split(" ", 1)[0]
    run.placed = name.startswith(_PLACED)
    local = name.startswith("ds_")
    run.writes = not local and any(p in name for p in _WRITES)
    run.loads = not local and any(p in name for p in _POLLS)
    run.global_memory = (run.writes or run.loads) and not name.startswith("s_")  # where change points may fall
    run.chunked = getattr(run, "chunked", None)  # a memory-writing instruction's own chunked fast path, if any
    run.syncs = bool(getattr(run, "barrier", False) or getattr(run, "ends", False))  # barriers may release after it


class ActiveDispatch:
    """A launched dispatch whose waves have not all ended: an activity the GPU's scheduler advances in quanta of
    issue steps, interleaved with the packets of its queue, other queues and the host.

    `advance(budget)` runs at most `budget` issue steps (one instruction for every runnable wave at one PC) and
    returns how many ran; `done` once the last wave ended. The launch order of workgroups and which waves issue
    next are choices of the GPU's policy (`workgroup_order`, `choose_waves`, `split_waves`); without them, workgroups
    launch in the CP's order (x fastest) and every wave at the lowest PC issues, in wave order.

    While `watching` (the GPU sets it once the kernel ran a quantum), a `shader.spin.SpinWatch` follows the
    states: the same state twice with memory unchanged (or a loop whose only change is a count, for
    `spin_iterations` periods) means the waves loop on memory nobody writes -- `spinning`, with what each wave
    last polled in `polls`.
    """

    kind = "dispatch"

    def __init__(self, core: ShaderCore, queue, d: Dispatch, rsrc2: dict, scratch, lanes: int, vgprs: int,
                 wpg: int, n_groups: int, batch_groups: int, total_waves: int, order, choose_waves,
                 split_waves=None):
        self.core, self.queue, self.d = core, queue, d
        self.rsrc2, self.scratch, self.lanes, self.vgprs, self.wpg = rsrc2, scratch, lanes, vgprs, wpg
        self.n_groups, self.batch_groups, self.total_waves = n_groups, batch_groups, total_waves
        self.order, self.choose_waves, self.split_waves = order, choose_waves, split_waves
        self.seq = 0  # the queue's launch number (set by the queue)
        self.ctx = Context(lanes, vgprs, core.gpu.memory, f"kernel at 0x{core.gpu.canonical(d.pgm_addr):x}", core.arch,
                           ieee=bool(d.rsrc1 >> 23 & 1), dx10_clamp=bool(d.rsrc1 >> 21 & 1))  # RSRC1 IEEE_MODE, DX10_CLAMP
        if core.arch == "gfx942":  # AccVGPRs follow the architectural VGPRs: RSRC3.ACCUM_OFFSET, in 4-register units
            self.ctx.accum_offset = min(vgprs, ((d.rsrc3 & 0x3F) + 1) * 4)
        self.done = False
        # the policy's `memory_change_point() -> bool`, asked after each global memory or atomic instruction: True
        # ends this turn of the dispatch there (a PCT change point: the scheduler decides again), None: never asked
        self.change_point = None
        self.steps = 0  # issue steps so far, against the kernel's runaway bound
        self.W: Waves | None = None
        self.batch_ids: np.ndarray | None = None  # [groups in batch, 3] workgroup ids of the running batch
        self.origin = None  # (stream, pos) of the launching packet, where a fault of the waves is reported
        self.on_done: list = []  # what completes with the last wave (end-of-pipe events, AQL completion)
        self._budget = 0
        self._gen = self._execute()
        self.watching = False
        self._spin_epoch = -1
        self.polls: dict[int, tuple[int, str, int | None]] = {}  # wave -> (pc, instruction, address) last polled
        self.spin = SpinWatch(core.spin_iterations)
        self._changes = [0]  # stores that changed memory while watched (shader.lanemem counts them)
        # while watched: the issue step each wave last issued at, and whether the PC to issue is the least recently
        # issued wave's (set once a spin turned out to leave a runnable wave starved: the lowest PC never let it run)
        self._last_issue: np.ndarray | None = None
        self._fair = False
        self.changed_at = 0  # the issue step of the last store that changed memory (any store before watching)
        self.home_slot = 0  # memory model: the CU slot of the running batch's first wave (`_placement`)
        # memory model, report mode: (launch clock, lane, counter) of this dispatch (coherence.order.Order.launched,
        # set by CacheModel.launched); None with no happens-before bookkeeping
        self.hb_epoch: tuple[dict, int, int] | None = None

    @property
    def name(self) -> str:
        return f"{self.queue.name} dispatch {self.seq}"

    @property
    def spinning(self) -> bool:
        """Found looping on memory nobody wrote since (a spin verdict goes stale with any write)."""
        return self._spin_epoch == (MEMORY[0], RUNS[0])

    def ready(self) -> bool:
        return not self.done

    def advance(self, budget: int) -> int:
        """Run up to `budget` issue steps; returns the number run. Errors (faults) end the dispatch."""
        self._budget, start = budget, self.steps
        mem = self.core.gpu.memory
        if self.core.gpu.coherence is not None:
            self.core.gpu.coherence.slot = self.home_slot
        if self.watching:  # stores compare old and new bytes: one that changes nothing is not a write (a spin)
            mem.watch_stores = self._changes
        try:
            with np.errstate(all="ignore"):  # IEEE exceptions are flags, not traps: no numpy warning reaches the user
                next(self._gen)
        except StopIteration:
            self.done = True
        except BaseException:
            self.done = True
            raise
        finally:
            mem.watch_stores = None
        return self.steps - start

    # -- execution -----------------------------------------------------------------------------------

    def _batch(self, start: int) -> np.ndarray:
        n = min(self.batch_groups, self.n_groups - start)
        if self.order is None:
            return _group_ids(self.d.groups, start, n)
        lin = np.array(self.order[start:start + n], dtype=np.int64)
        gx, gy, _ = self.d.groups
        return np.stack([lin % gx, (lin // gx) % gy, lin // (gx * gy)], axis=1)

    def _placement(self, model, batch: np.ndarray, W: Waves):
        """Memory model on: the CU slot of each wave of the batch (its workgroup's, `model.place`), or None with
        every wave on one slot (then `model.slot` is set once)."""
        gx, gy, _ = self.d.groups
        slots = model.place(self, batch[:, 0] + batch[:, 1] * gx + batch[:, 2] * (gx * gy))[W.group]
        model.slot = self.home_slot = int(slots[0])  # advance() restores it: another dispatch may run in between
        return None if (slots == slots[0]).all() else slots

    def _execute(self):
        core, d, ctx = self.core, self.d, self.ctx
        stats = core.stats
        choose, split, change = self.choose_waves, self.split_waves, self.change_point
        model, slots = core.gpu.coherence, None
        # waves per chunk when a whole batch issues one instruction (`_run_chunked`); 0: never chunked
        chunk = max(1, CHUNK_LANES // self.lanes) if model is None and fast.enabled else 0
        together = choose is None and split is None and fast.enabled  # no policy to ask which waves issue
        quick_fetch, find, string_at = core._fetch is None and fast.enabled, core.gpu.memory.find, ctypes.string_at
        memory = core.gpu.memory
        translator = core.translator if model is None and core._fetch is None else None
        for start in range(0, self.n_groups, self.batch_groups):
            self.batch_ids = batch = self._batch(start)
            W = core._launch(d, self.rsrc2, batch, self.lanes, self.vgprs, self.wpg)
            if model is not None:
                slots = self._placement(model, batch, W)
            if self.scratch is not None:  # wave slot i owns [base + i * wavesize, + wavesize), lanes side by side
                W.scratch_base = self.scratch[0] + np.arange(W.n, dtype=np.uint64) * np.uint64(self.scratch[1])
                W.scratch_lane = self.scratch[1] // self.lanes
            self.W = W
            self.spin.reset()
            self._last_issue, self._fair = np.zeros(W.n, np.int64), False
            chunky = slots is None and bool(chunk) and W.n > chunk  # a whole-batch issue may run in chunks
            recent = core.recent(W, ctx)
            lockstep = None  # (pc, sel, w) of the next issue when it is known without looking (`_straight`)
            while True:
                if lockstep is not None:
                    pc, sel, w = lockstep
                    lockstep = None
                elif W.n == 1 and W.alive[0] and not W.at_barrier[0]:  # one wave: it issues, no choice to make
                    pc = int(W.pc[0])
                    sel, w = _FIRST_WAVE, slice(None)
                else:
                    pc, sel, w = self._pick(W, choose, split)
                    if sel is None:
                        if w:
                            continue
                        break
                if translator is not None and w.__class__ is slice and together and not self._fair \
                        and not W.flushing:
                    # translate mode: every wave issues here, no policy, no memory model, no flushing float mode; a
                    # block runs only when the budget and the runaway bound cover all its steps and, while a spin
                    # watch runs, when its steps before the last fall in the watch's quiet phase (SpinWatch.skip)
                    blk = translator.block(pc, W, memory, ctx, d.pgm_addr)
                    if blk is not None and blk.steps <= self._budget and \
                            self.steps + blk.steps <= core.max_kernel_steps and \
                            (not self.watching or self.spin.skip(blk.steps)):
                        blk.run(W)
                        n = blk.steps
                        self.steps += n
                        stats["issue_steps"] += n
                        stats["wave_instructions"] += n * sel.size
                        stats["lane_instructions"] += n * sel.size * W.lanes
                        translator.stats["block_runs"] += 1
                        translator.stats["block_steps"] += n
                        if self.watching:  # the block's last step as the interpreter ends each step
                            self._budget -= n - 1
                            self._last_issue[sel] = self.steps
                            if (self.spin.step(W) or self.spin.looped) and not self._starved(W) \
                                    and self.spin.verdict:
                                self._spin_epoch = (MEMORY[0], RUNS[0])
                                yield
                                continue
                            self._budget -= 1
                        else:
                            if W.n > 1 and not blk.branches:  # every wave stepped its PC past the block: the
                                lockstep = (pc + blk.size, sel, w)  # issue _pick would choose (after a branch, _pick)
                            self._budget -= n
                        if self._budget <= 0:
                            yield
                        continue
                if slots is not None:  # the fetch goes through the first selected wave's CU
                    model.slot = int(slots[sel[0]])
                run = None
                if quick_fetch:  # fast path, ShaderCore.instruction's own, inline: the same closure or None
                    m = find(pc)
                    if m is not None and m.executable and m.readable and pc + 4 <= m.end:
                        hit = recent.get(pc)
                        if hit is not None and hit[0] == string_at(pc + m.shift, min(FETCH_BYTES, m.end - pc)):
                            run = hit[1]
                if run is None:
                    run = core.instruction(pc, W, ctx, d, recent)
                if self.watching and run.loads and self.spin.armed:  # only in a write-free stretch
                    self._note_poll(pc, run, W, sel)
                changes = self._changes[0]
                try:
                    big = chunky and w.__class__ is slice
                    if big and not run.writes:
                        _run_chunked(run, W, chunk)
                    elif big and run.chunked is not None and run.chunked(W, chunk):
                        pass  # a store that ran chunked (it checked every address first)
                    elif slots is None or not run.placed:
                        run(W, w)
                    else:
                        _run_placed(run, W, sel, slots, model)
                except VMFaultError as e:  # stays a VM fault (memory exception to KFD), now naming kernel and PC
                    fault = VMFaultError(e.address, e.size, e.access, e.reason, page=e.page)
                    fault.args = (f"{ctx.kernel}, PC +0x{pc - d.pgm_addr:x} ({run.text}): {e}",)
                    raise fault from None
                except EngineError:
                    raise
                except (IndexError, ValueError, TypeError, OverflowError) as e:
                    raise ShaderFault(f"{ctx.kernel}, PC +0x{pc - d.pgm_addr:x} ({run.text}): {type(e).__name__}: "
                                      f"{e}") from None
                self.steps += 1
                stats["issue_steps"] += 1
                stats["wave_instructions"] += sel.size
                stats["lane_instructions"] += sel.size * W.lanes
                if run.writes and (not self.watching or self._changes[0] != changes):
                    EPOCH[0] += 1  # memory changed (watched: only a store that changed bytes counts)
                    self.changed_at = self.steps
                    self.spin.wrote()
                if run.syncs:
                    core._release_barriers(W)
                elif W.n > 1 and run.straight and together and w.__class__ is slice and not self.watching \
                        and not self._fair and W.pc[0] == pc + run.size:
                    # fast path: every wave issued an instruction that only steps the PC (`_straight`), so every
                    # wave is still runnable and sits at the next PC: the issue _pick would choose
                    lockstep = (pc + run.size, sel, w)
                if self.steps > core.max_kernel_steps:
                    raise RunawayStop(f"{ctx.kernel}: more than {core.max_kernel_steps} issue steps; the kernel does "
                                      f"not terminate (PC +0x{pc - d.pgm_addr:x}, {run.text}). Raise "
                                      f"EmulatedGPU(max_kernel_steps=...) if it is meant to run this long")
                if self.watching:
                    self._last_issue[sel] = self.steps
                if self.watching and (self.spin.step(W) or self.spin.looped) and not self._starved(W) \
                        and self.spin.verdict:
                    self._spin_epoch = (MEMORY[0], RUNS[0])
                    yield
                    continue
                self._budget -= 1
                if self._budget <= 0:
                    yield
                elif change is not None and run.global_memory and change():
                    yield  # a change point: the turn ends after this memory access
        for action in self.on_done:
            action()

    def _pick(self, W: Waves, choose, split):
        """The next issue: (pc, selected waves, their selection), or (None, None, True) after releasing a barrier
        with no wave runnable, (None, None, False) once every wave ended."""
        runnable = W.alive & ~W.at_barrier
        if not runnable.any():
            if W.alive.any():
                self.core._release_barriers(W, force_check=True, d=self.d)
                return None, None, True
            return None, None, False
        idx = np.nonzero(runnable)[0]
        pcs = W.pc[idx]
        if self._fair:  # a wave was starved: each runnable wave's turn comes (whatever the policy picks)
            pc = int(W.pc[idx[np.argmin(self._last_issue[idx])]])
        elif choose is None:
            pc = int(pcs.min())
        else:
            distinct = np.unique(pcs)
            pc = int(distinct[choose(len(distinct)) % len(distinct)]) if len(distinct) > 1 else int(distinct[0])
        sel = idx[pcs == pc]
        if split is not None and sel.size > 1:  # the policy may let one wave issue ahead of the others
            k = split(int(sel.size))
            if k is not None and 0 <= k < sel.size:
                sel = sel[k:k + 1]
        return pc, sel, slice(None) if sel.size == W.n else sel

    # -- livelock detection ----------------------------------------------------------------------------

    def watch(self, on: bool = True) -> None:
        """Start (or stop) looking for a spin; a new watch forgets an earlier verdict."""
        self.watching, self._spin_epoch = on and self.core.watch_spins, -1
        self.spin.reset()
        if not on:
            self.polls.clear()

    def _starved(self, W: Waves) -> bool:
        """A loop (a spin, or a counting loop being confirmed) during whose period some runnable wave did not issue
        is no spin: the lowest-PC-first order kept that wave (which may be the one to release the others) from
        running. From now on the least recently issued wave's PC issues next (each wave's turn comes, as on
        hardware), and the watch starts over."""
        runnable = W.alive & ~W.at_barrier
        starved = bool((runnable & (self._last_issue <= self.steps - self.spin.period)).any())
        if starved:
            self._fair = True
            self.spin.reset()
        return starved

    def _note_poll(self, pc: int, run, W: Waves, sel: np.ndarray) -> None:
        for i, wave in enumerate(sel[:8].tolist()):
            address = self.core.poll_address(pc, W, np.array([wave]), self.ctx, self.d)
            self.polls[wave] = (pc, run.text, address)
            if i == 0:
                self.spin.poll(pc, address)

    def spinning_waves(self, limit: int = 8) -> list[SpinningWave]:
        """What a livelock report says about this dispatch's live waves (at most `limit`)."""
        W, d = self.W, self.d
        out: list[SpinningWave] = []
        if W is None:
            return out
        mem = self.core.gpu.memory
        for wave in np.nonzero(W.alive)[0][:limit].tolist():
            gid = tuple(int(x) for x in self.batch_ids[int(W.group[wave])])
            pc = int(W.pc[wave])
            try:
                text = self.core.instruction(pc, W, self.ctx, d).text
            except Exception:
                text = "?"
            poll_pc, poll_text, addr = self.polls.get(wave, (None, None, None))
            value = None
            if addr is not None:
                try:
                    value = mem.read_u32(addr)
                except Exception:
                    value = None
            counting = self.spin.counters(W, wave) if self.spin.verdict == "counting" else []
            out.append(SpinningWave(queue=self.queue.name, dispatch=self.seq, kernel=f"0x{d.pgm_addr:x}",
                                    workgroup=gid, wave=wave % self.wpg, pc=pc - d.pgm_addr, instruction=text,
                                    poll_pc=None if poll_pc is None else poll_pc - d.pgm_addr, poll=poll_text,
                                    address=addr, value=value, gpu=self.core.gpu.label,
                                    counting=tuple(counting),
                                    iterations=self.spin.counting.iterations if counting else 0))
        return out
