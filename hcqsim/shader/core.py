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
"""
from __future__ import annotations

import numpy as np

from ..errors import EngineError, RunawayStop, UnsupportedError, VMFaultError
from ..registers import RSRC2
from . import fpmode
from .compile import InstructionCache, compile_instr
from .decoder import decode
from .dispatch import Dispatch
from .operands import Context, ShaderFault
from .waves import EXEC, Waves

# RSRC1.VGPRS granule (facts 4.2): gfx11 wave32 8, wave64 4; gfx942 8 (VGPRs and AGPRs share one file)
VGPR_GRANULE = {"gfx1100": {32: 8, 64: 4}, "gfx942": {64: 8}}
SCRATCH_GRANULE = {"gfx1100": (256, 0x7FFF), "gfx942": (1024, 0x1FFF)}  # TMPRING_SIZE.WAVESIZE unit, mask
BATCH_BYTES = 48 << 20  # VGPR state per batch of workgroups
MAX_WAVE_STEPS = 200_000_000  # wave-instructions per dispatch before the kernel is declared runaway
FETCH_BYTES = 16
_ENDPGM = {"gfx1100": b"\x00\x00\xb0\xbf", "gfx942": b"\x00\x00\x81\xbf"}  # s_endpgm: a kernel that does nothing


def _group_ids(groups: tuple[int, int, int], first: int, n: int) -> np.ndarray:
    """int64 [n, 3] ids of the workgroups first .. first + n - 1 in the order the CP walks them (x fastest).
    The linear index may exceed int64, so only the batch's offsets from its first group are numpy values."""
    gx, gy, _ = groups
    x0, rest = divmod(first, gx)[::-1]
    y0, z0 = rest % gy, rest // gy
    local = np.arange(n, dtype=np.int64) + x0
    ylin = local // gx + y0
    return np.stack([local % gx, ylin % gy, ylin // gy + z0], axis=1)


def _thread_layout(size: np.ndarray, wpg: int, lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """VGPR0 (x | y << 10 | z << 20) and the valid lanes, [wpg, lanes] each, of the waves of one workgroup of
    `size` (x, y, z) threads: thread t of the group is lane t % lanes of wave t // lanes."""
    t = np.arange(wpg * lanes, dtype=np.int64).reshape(wpg, lanes)
    sx, sy = size[0], size[1]
    valid = t < size.prod()
    ids = np.where(valid, t % sx | (t // sx) % sy << 10 | t // (sx * sy) << 20, 0).astype(np.uint32)
    return ids, valid


class ShaderCore:
    """Attached to an EmulatedGPU as `gpu.shader_core`; the CP calls `dispatch(queue, Dispatch)`."""

    def __init__(self, gpu, arch: str | None = None):
        self.gpu = gpu
        self.arch = arch or gpu.target.name
        self._compiled = InstructionCache()  # (pc, words, lanes, vgprs, acc) -> closure, across dispatches (LRU)
        self.stats = {"dispatches": 0, "waves": 0, "wave_instructions": 0, "lane_instructions": 0}

    # -- the dispatch --------------------------------------------------------------------------------

    def dispatch(self, queue, d: Dispatch) -> int:
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
        if self.gpu.memory.read(d.pgm_addr, 4) == _ENDPGM[self.arch]:  # an empty kernel: its waves only end
            total_waves = n_groups * waves_per_group
            self.stats["wave_instructions"] += total_waves
            self.stats["lane_instructions"] += total_waves * lanes
        else:
            total_waves = self._batches(d, rsrc2, scratch, lanes, vgprs, waves_per_group, n_groups, batch_groups)
        self.stats["dispatches"] += 1
        self.stats["waves"] += total_waves
        self.gpu.trace.append((self.gpu.clock, queue.name, "dispatch",
                               f"kernel at 0x{self.gpu.canonical(d.pgm_addr):x}: groups {d.groups} of "
                               f"{d.group_size}, {total_waves} wave{lanes}s"))
        return total_waves

    def _batches(self, d: Dispatch, rsrc2: dict, scratch, lanes: int, vgprs: int, wpg: int, n_groups: int,
                 batch_groups: int) -> int:
        """Launch and run the workgroups batch by batch (memory bounded by the batch, never by the grid)."""
        ctx = Context(lanes, vgprs, self.gpu.memory, f"kernel at 0x{self.gpu.canonical(d.pgm_addr):x}", self.arch,
                      ieee=bool(d.rsrc1 >> 23 & 1), dx10_clamp=bool(d.rsrc1 >> 21 & 1))  # RSRC1 IEEE_MODE, DX10_CLAMP
        if self.arch == "gfx942":  # AccVGPRs follow the architectural VGPRs: RSRC3.ACCUM_OFFSET, in 4-register units
            ctx.accum_offset = min(vgprs, ((d.rsrc3 & 0x3F) + 1) * 4)
        total_waves = 0
        for start in range(0, n_groups, batch_groups):
            batch = _group_ids(d.groups, start, min(batch_groups, n_groups - start))
            W = self._launch(d, rsrc2, batch, lanes, vgprs, wpg)
            if scratch is not None:  # wave slot i owns [base + i * wavesize, + wavesize), lanes side by side
                W.scratch_base = scratch[0] + np.arange(W.n, dtype=np.uint64) * np.uint64(scratch[1])
                W.scratch_lane = scratch[1] // lanes
            with np.errstate(all="ignore"):  # IEEE exceptions are flags, not traps: no numpy warning reaches the user
                self._run(W, d, ctx)
            total_waves += W.n
        return total_waves

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
        gids = np.repeat(batch, wpg, axis=0)  # [n, 3] workgroup ids
        W.group[:] = np.repeat(np.arange(len(batch)), wpg)
        sgpr = len(user)
        for dim, key in enumerate(("tgid_x_en", "tgid_y_en", "tgid_z_en")):
            if rsrc2[key]:
                W.s[:, sgpr] = (gids[:, dim] + d.start[dim]).astype(np.uint32)
                sgpr += 1
        # the threads of each workgroup: every full group has one layout, computed once and tiled; only groups
        # last in a dimension with a trailing partial group are smaller (at most 7 other layouts)
        full = np.array(d.group_size, np.int64)
        ids, valid = _thread_layout(full, wpg, lanes)
        W.v[:, 0] = np.tile(ids, (len(batch), 1))
        valid = np.tile(valid, (len(batch), 1))
        partial = np.array(d.partial_size, np.int64)
        short = (batch == np.array(d.groups, np.int64) - 1) & (partial > 0)  # [groups, 3]
        odd = np.nonzero(short.any(axis=1))[0]
        if odd.size:
            for pattern in np.unique(short[odd], axis=0):
                members = odd[(short[odd] == pattern).all(axis=1)]
                rows = (members[:, None] * wpg + np.arange(wpg)).ravel()
                ids, ok = _thread_layout(np.where(pattern, partial, full), wpg, lanes)
                W.v[rows, 0] = np.tile(ids, (len(members), 1))
                valid[rows] = np.tile(ok, (len(members), 1))
        W.set_mask(slice(None), EXEC, valid)
        W.pc[:] = d.pgm_addr
        W.set_mode(slice(None), fpmode.initial_mode(d.rsrc1))  # denormal modes are emulated (fpmode)
        return W

    # -- scheduling ----------------------------------------------------------------------------------

    def _run(self, W: Waves, d: Dispatch, ctx: Context) -> None:
        steps = 0
        while True:
            runnable = W.alive & ~W.at_barrier
            if not runnable.any():
                if W.alive.any():
                    self._release_barriers(W, force_check=True, d=d)
                    continue
                return
            idx = np.nonzero(runnable)[0]
            pcs = W.pc[idx]
            pc = int(pcs.min())
            sel = idx[pcs == pc]
            w = slice(None) if sel.size == W.n else sel
            run = self._instruction(pc, W, ctx, d)
            try:
                run(W, w)
            except VMFaultError as e:  # stays a VM fault (memory exception to KFD), now naming kernel and PC
                fault = VMFaultError(e.address, e.size, e.access, e.reason)
                fault.args = (f"{ctx.kernel}, PC +0x{pc - d.pgm_addr:x} ({run.text}): {e}",)
                raise fault from None
            except EngineError:
                raise
            except (IndexError, ValueError, TypeError, OverflowError) as e:
                raise ShaderFault(f"{ctx.kernel}, PC +0x{pc - d.pgm_addr:x} ({run.text}): {type(e).__name__}: "
                                  f"{e}") from None
            steps += sel.size
            self.stats["wave_instructions"] += sel.size
            self.stats["lane_instructions"] += sel.size * W.lanes
            if getattr(run, "barrier", False) or getattr(run, "ends", False):
                self._release_barriers(W)
            if steps > MAX_WAVE_STEPS:
                raise ShaderFault(f"{ctx.kernel}: more than {MAX_WAVE_STEPS} wave-instructions; the kernel does not "
                                  f"terminate (PC +0x{pc - d.pgm_addr:x})")

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

    def _instruction(self, pc: int, W: Waves, ctx: Context, d: Dispatch):
        mem = self.gpu.memory
        try:
            mem.check(pc, 4, "execute")
        except VMFaultError as e:
            raise ShaderFault(f"{ctx.kernel}: instruction fetch at PC +0x{pc - d.pgm_addr:x}: {e}") from None
        m = mem.find(pc)
        nbytes = min(FETCH_BYTES, m.end - pc)
        code = mem.read(pc, nbytes)
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
                self._compiled[key] = run
            self._compiled[(pc, code, W.lanes, W.vgprs, acc)] = run
        return run
