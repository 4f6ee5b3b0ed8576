"""Shader memory traffic with the cache model on (memory_model report / adversarial): the same interface as
`lanemem` (load / store / check over per-lane addresses), but each access takes its path through the modelled
levels (hcqsim.coherence), chosen once per instruction from its kind and cache bits.

GLV, GLK and GLI are kept once per CU slot and GL2 once per XCC (coherence.model; a workgroup runs on one slot,
`model.slot` while its waves issue): a store updates only its own slot's copies, so another CU's copy of the line,
or another XCC's L2 copy, goes stale. Paths, by memory type of the mapping (rw = VRAM, nc = system memory,
uc = uncached; coherence.model):
  vector load   gfx11 GLV -> GL1 -> GL2          gfx942 GLV (TCP) -> GL2     (GL2 only for rw; uc: none)
  scalar load   gfx11 GLK -> GL1 -> GL2          gfx942 GLK -> GL2
  instruction   gfx11 GLI -> GL1 -> GL2          gfx942 GLI -> GL2
  atomic        GL2 (rw; with an L2 per XCC: memory, seeing every XCC's dirty bytes and updating every copy --
                the weaker reading), memory otherwise; the vector levels' copies are updated (write-through)
  store         write-through GLV/GL1 copies present; GL2 line, dirty (rw), else memory
Cache bits (LLVM AMDGPUUsage memory model): gfx11 `glc` on a load misses GLV and GL1 (agent-scope coherent
load); `dlc`, `slc` change no coherence. gfx942 `sc0` or `sc1` on a load misses the TCP; a store with both
(`sc0 sc1`, system scope) writes through GL2 to memory; `nt` changes none. A scalar load with `glc` misses K$
and GL1.
"""
from __future__ import annotations

import numpy as np

from ..coherence.model import LINE_SHIFT, on_slot
from . import lanemem
from .decoder import Instr
from .operands import Context, advance

_VECTOR = {"gfx1100": ("GLV", "GL1", "GL2"), "gfx942": ("GLV", "GL2")}
_SCALAR = {"gfx1100": ("GLK", "GL1", "GL2"), "gfx942": ("GLK", "GL2")}
_IFETCH = {"gfx1100": ("GLI", "GL1", "GL2"), "gfx942": ("GLI", "GL2")}
_UPDATE = {"gfx1100": ("GLV", "GL1"), "gfx942": ("GLV",)}


def _by_mtype(levels: tuple) -> dict[str, tuple]:
    """A path per memory type: GL2 keeps only VRAM (system memory is coherent at GL2), nothing keeps uc."""
    return {"rw": levels, "nc": tuple(x for x in levels if x != "GL2"), "uc": ()}


def model_of(ctx: Context):
    return getattr(ctx.space, "model", None)


class Lanes:
    """One instruction's memory functions through the model."""

    def __init__(self, model, instr: Instr, ctx: Context, routes: dict[str, tuple], update: tuple = (),
                 write_back: bool = True, every_l2: bool = False):
        self.model, self.write_back, self.every_l2 = model, write_back, every_l2
        self.pc, self.mnemonic, self.kernel = instr.pc, instr.mnemonic, ctx.kernel
        self._routes, self._update = routes, update
        self._paths: dict[int, tuple] = {}  # slot -> (routes, update, L2 name), made on first use

    def _path(self, slot: int) -> tuple:
        """The paths with CU slot `slot`'s copies of GLV/GLK/GLI (coherence.model.PER_CU) and its XCC's L2."""
        p = self._paths.get(slot)
        if p is None:
            p = self._paths[slot] = ({k: on_slot(v, slot) for k, v in self._routes.items()},
                                     on_slot(self._update, slot), on_slot(("GL2",), slot)[0])
        return p

    def _who(self):
        d = self.model.agent
        name = d.name if d is not None and getattr(d, "kind", "") == "dispatch" else "a dispatch"
        where = self.model.where(self.model.slot)
        return d, lambda: f"{name} ({self.kernel}) PC +0x{self.pc:x} {self.mnemonic} on {where}"

    def load(self, space, addrs: np.ndarray, nbytes: int) -> np.ndarray:
        groups = lanemem.resolve(space, addrs, nbytes, "read")
        out = np.empty((addrs.size, nbytes), np.uint8)
        d, reader = self._who()
        dispatch = d if d is not None and getattr(d, "kind", "") == "dispatch" else None
        routes = self._path(self.model.slot)[0]
        for m, sel in groups:
            st = self.model.state(m)
            offs = (addrs[sel] - np.uint64(m.start)).astype(np.int64)
            out[sel] = self.model.lanes_load(st, offs, nbytes, routes[st.mtype], reader, dispatch, self.every_l2)
        return out

    def store(self, space, addrs: np.ndarray, data: np.ndarray) -> None:
        groups = lanemem.resolve(space, addrs, data.shape[1], "write")
        d, reader = self._who()
        dispatch = d if d is not None and getattr(d, "kind", "") == "dispatch" else None
        queue = getattr(dispatch, "queue", None)
        slot = self.model.slot
        writer = self.model.actor((id(dispatch), self.pc, slot), reader, queue)
        self.model.actor_dispatch[writer] = id(dispatch) if dispatch is not None else -1
        _, update, l2 = self._path(slot)  # the writing CU's copies only: the others go stale
        watch = space.__dict__.get("watch_stores")
        for m, sel in groups:
            st = self.model.state(m)
            offs = (addrs[sel] - np.uint64(m.start)).astype(np.int64)
            up = update if st.mtype != "uc" else ()
            if watch is not None and self._changes(st, offs, data[sel], up, l2):
                watch[0] += 1  # a spin watch (shader.core) counts the stores that changed what anyone can read
            self.model.lanes_store(st, offs, data[sel], up, self.write_back, writer, dispatch, reader, l2)

    def _changes(self, st, offs: np.ndarray, data: np.ndarray, update: tuple, l2: str) -> bool:
        """Whether a store would change a byte of a copy it writes (as lanemem.store compares memory before and
        after): the `update` levels' present lines, the writer's L2 (a missing line: the DRAM bytes it would be
        filled with), every L2's present copy and DRAM for a write-through store, and DRAM whenever report mode
        writes it. Equal bytes everywhere it writes: no reader, now or after a write-back, sees a difference, so
        the store is no progress (a spin that stores the value already there, or an atomic that changes nothing);
        a dirty bit it sets writes back the same bytes."""
        B = (offs[:, None] + np.arange(data.shape[1], dtype=np.int64)).ravel()
        flat = np.ascontiguousarray(data).ravel()
        lines = B >> LINE_SHIFT
        for name in update:
            lv = st.levels.get(name)
            if lv is not None:
                present = lv.valid[lines]
                if not np.array_equal(lv.data[B[present]], flat[present]):
                    return True
        model = self.model
        if self.write_back and st.mtype == "rw":
            gl2 = st.levels.get(l2)
            held = gl2.data[B] if gl2 is not None else st.dram[B]
            if gl2 is not None:
                held = np.where(gl2.valid[lines], held, st.dram[B])
            return not np.array_equal(held, flat) or (not model.adversarial
                                                      and not np.array_equal(st.dram[B], flat))
        for gl2 in model._l2s(st):
            present = gl2.valid[lines]
            if not np.array_equal(gl2.data[B[present]], flat[present]):
                return True
        return not np.array_equal(st.dram[B], flat)

    check = staticmethod(lanemem.check)


def vector(instr: Instr, ctx: Context):
    """The lane memory of a FLAT / GLOBAL / SCRATCH / MUBUF load or store (`lanemem` when the model is off)."""
    model = model_of(ctx)
    if model is None:
        return lanemem
    f, arch = instr.fields, ctx.arch
    levels = _VECTOR[arch]
    if arch == "gfx942" and model.n_xcc > 1 and f.get("sc1"):  # device or system scope with an L2 per XCC: the
        # access is coherent across the XCCs (memory, seeing their dirty bytes; a store writes through: the weaker
        # reading of the SC scope bits)
        return Lanes(model, instr, ctx, _by_mtype(()), _UPDATE[arch], False, every_l2=True)
    if arch == "gfx942":
        bypass = bool(f.get("sc0") or f.get("sc1"))
        write_back = not (f.get("sc0") and f.get("sc1"))
    else:
        bypass = bool(f.get("glc"))
        write_back = True
    if bypass:
        levels = tuple(x for x in levels if x not in ("GLV", "GL1"))
    return Lanes(model, instr, ctx, _by_mtype(levels), _UPDATE[arch], write_back)


def atomic(instr: Instr, ctx: Context):
    """Atomics are performed at GL2 (VRAM) or memory; they go around the vector levels, updating their copies.
    With an L2 per XCC, at memory, coherently across the XCCs (LLVM: sc1 marks agent/system-scope coherence of an
    atomic; the weaker reading gives it to every atomic)."""
    model = model_of(ctx)
    if model is None:
        return lanemem
    if model.n_xcc > 1:
        return Lanes(model, instr, ctx, _by_mtype(()), _UPDATE[ctx.arch], False, every_l2=True)
    return Lanes(model, instr, ctx, _by_mtype(("GL2",)), _UPDATE[ctx.arch], True)


def scalar(instr: Instr, ctx: Context):
    model = model_of(ctx)
    if model is None:
        return lanemem
    levels = _SCALAR[ctx.arch]
    if instr.fields.get("glc"):
        levels = tuple(x for x in levels if x not in ("GLK", "GL1"))
    return Lanes(model, instr, ctx, _by_mtype(levels))


class InstructionFetch:
    """Instruction bytes through GLI (and GL1/GL2): what the core fetches at a PC with the model on."""

    def __init__(self, model, arch: str):
        self.model = model
        self.routes = [{k: on_slot(v, slot) for k, v in _by_mtype(_IFETCH[arch]).items()}
                       for slot in range(model.n_slots)]

    def __call__(self, space, pc: int, nbytes: int, kernel: str) -> bytes:
        m = space.find(pc)
        st = self.model.state(m)
        lo = pc - m.start
        d = self.model.agent
        cu = self.model.slot
        gli = st.levels.get(f"GLI.{cu}")
        if gli is not None and gli.valid[lo >> 7] and gli.valid[(lo + nbytes - 1) >> 7]:  # the hot path: a hit
            data = gli.data[lo:lo + nbytes]
            if self.model.adversarial or np.array_equal(data, st.dram[lo:lo + nbytes]):
                return data.tobytes()
        reader = lambda: f"{getattr(d, 'name', 'a dispatch')} ({kernel}) instruction fetch at 0x{pc:x}"
        data = self.model.lanes_load(st, np.array([pc - m.start], np.int64), nbytes, self.routes[cu][st.mtype],
                                     reader, None)
        return data.tobytes()


# -- cache-control instructions -------------------------------------------------------------------------------

# original mnemonic (gfx11 or gfx942 spelling) -> model actions; gfx942 buffer_inv / buffer_wbl2 read their sc bits
_CONTROL = {"buffer_gl0_inv": {"GLV_INV"}, "buffer_gl1_inv": {"GL1_INV"}, "s_gl1_inv": {"GL1_INV"},
            "s_dcache_inv": {"GLK_INV"}, "s_icache_inv": {"GLI_INV"}, "buffer_wbinvl1": {"GLV_INV"},
            "buffer_wbinvl1_vol": {"GLV_INV"}, "buffer_wbl2": {"GL2_WB"}}
CACHE_CONTROL = frozenset(_CONTROL) | {"buffer_inv"}


def control_actions(mnemonic: str, fields: dict) -> set[str]:
    """What a cache-control instruction does (gfx942 `buffer_inv sc1` also invalidates the L2: agent scope)."""
    if mnemonic == "buffer_inv":
        return {"GLV_INV", "GL2_INV"} if fields.get("sc1") else {"GLV_INV"}
    return set(_CONTROL[mnemonic])


def compile_control(instr: Instr, ctx: Context, mnemonic: str):
    """The run of a cache-control instruction with the model on: its actions, then the next instruction."""
    model = model_of(ctx)
    actions = control_actions(mnemonic, instr.fields)
    step = advance(instr.size)

    def run(W, w):
        model.perform(actions, model.slot)  # the issuing waves' CU and XCC
        step(W, w)
    return run
