"""Per-lane memory traffic of shader instructions, checked against the GPU's address space.

Every access of every active lane is checked first (all addresses, all bytes); one bad lane raises
VMFaultError for the first offending address and nothing is written. Bytes move with numpy gathers and
scatters on views of the mapped host memory, so a whole batch of waves costs a few array operations.
"""
from __future__ import annotations

import numpy as np

from ..errors import VMFaultError
from ..memory import AddressSpace, Mapping, host_view
from . import fast

_ACCESS_ATTR = {"read": "readable", "write": "writable"}


def _view(m: Mapping) -> np.ndarray:
    view = m.__dict__.get("np8")
    if view is None:
        view = m.np8 = host_view(m.host, m.end - m.start)  # at the host pages the mapping names
    return view


def resolve(space: AddressSpace, addrs: np.ndarray, nbytes: int, access: str) -> list[tuple[Mapping, np.ndarray]]:
    """Group flat addresses by mapping: [(mapping, index into addrs)], or VMFaultError for the first bad lane."""
    if addrs.size == 0:
        return []
    lo, hi = int(addrs.min()), int(addrs.max())
    m = space.find(lo)
    attr = _ACCESS_ATTR[access]
    if m is not None and hi + nbytes <= m.end and getattr(m, attr):
        return [(m, slice(None))]
    maps = space.mappings()
    starts = np.array([x.start for x in maps], dtype=np.uint64) if maps else np.zeros(0, np.uint64)
    ends = np.array([x.end for x in maps], dtype=np.uint64) if maps else np.zeros(0, np.uint64)
    idx = np.searchsorted(starts, addrs, side="right").astype(np.int64) - 1
    ok = idx >= 0
    safe = np.where(ok, idx, 0)
    if maps:
        ok &= addrs + np.uint64(nbytes) <= ends[safe]
        perm = np.array([getattr(x, attr) for x in maps])
        ok &= perm[safe]
    if not ok.all():
        bad = int(addrs[np.argmin(ok)])
        space.check(bad, nbytes, access)  # raises with the precise reason
        raise VMFaultError(bad, nbytes, access, "range crosses the end of its mapping")
    return [(maps[i], np.nonzero(idx == i)[0]) for i in np.unique(idx)]


def _view32(m: Mapping) -> np.ndarray:
    view = m.__dict__.get("np32")
    if view is None:
        view = m.np32 = _view(m)[: (m.end - m.start) // 4 * 4].view(np.uint32)
    return view


def _dword_offsets(addrs: np.ndarray, m: Mapping, ndw: int) -> np.ndarray:
    return ((addrs - np.uint64(m.start)) >> np.uint64(2)).astype(np.int64)[:, None] + np.arange(ndw)


# Fast path: lanes whose addresses are one ascending run of whole items (lane i at the first address + i * nbytes,
# as in copies and element-wise kernels) move as one slice of the mapping instead of a gather / scatter; from this
# many lanes on (below it, checking the run costs what it saves)
RUN_LANES = 256


def _consecutive(addrs: np.ndarray, nbytes: int) -> bool:
    """Are the addresses one ascending run, `nbytes` apart? (Only asked with the fast paths on.)"""
    n = addrs.size
    if n < RUN_LANES or not fast.enabled or int(addrs[-1]) - int(addrs[0]) != (n - 1) * nbytes:
        return False
    return bool((np.diff(addrs) == np.uint64(nbytes)).all())


def load(space: AddressSpace, addrs: np.ndarray, nbytes: int) -> np.ndarray:
    """uint8 [len(addrs), nbytes]: the bytes at each address."""
    groups = resolve(space, addrs, nbytes, "read")
    if nbytes % 4 == 0 and not (addrs & np.uint64(3)).any():  # dword-aligned: gather whole dwords
        ndw = nbytes // 4
        out32 = np.empty((addrs.size, ndw), np.uint32)
        for m, sel in groups:
            mine = addrs[sel]
            if _consecutive(mine, nbytes):
                first = (int(mine[0]) - m.start) >> 2
                out32[sel] = _view32(m)[first:first + mine.size * ndw].reshape(-1, ndw)
            else:
                out32[sel] = _view32(m)[_dword_offsets(mine, m, ndw)]
        return out32.view(np.uint8)
    out = np.empty((addrs.size, nbytes), np.uint8)
    span = np.arange(nbytes, dtype=np.uint64)
    for m, sel in groups:
        off = (addrs[sel] - np.uint64(m.start))[:, None] + span
        out[sel] = _view(m)[off.astype(np.int64)]
    return out


def store(space: AddressSpace, addrs: np.ndarray, data: np.ndarray) -> None:
    """Write uint8 [len(addrs), nbytes] rows; for lanes hitting the same bytes the highest lane lands last.

    While a spin watch runs (`space.watch_stores`, a one-element list set by shader.core), the bytes are compared
    before and after: a store that changed memory adds one to it, a store of the value already there does not."""
    groups = resolve(space, addrs, data.shape[1], "write")
    watch = space.__dict__.get("watch_stores")
    for m, sel in groups:
        if store_to(m, addrs[sel], data[sel], watch is not None):
            watch[0] += 1


def store_to(m: Mapping, addrs: np.ndarray, data: np.ndarray, compare: bool = False) -> bool:
    """Write the rows at addresses already checked to lie in the writable mapping `m`; with `compare`, whether
    any byte changed (else False)."""
    nbytes = data.shape[1]
    if nbytes % 4 == 0 and not (addrs & np.uint64(3)).any():
        data32 = np.ascontiguousarray(data).view(np.uint32)
        if not compare and _consecutive(addrs, nbytes):  # no two lanes overlap: one slice
            first = (int(addrs[0]) - m.start) >> 2
            _view32(m)[first:first + data32.size] = data32.reshape(-1)
            return False
        view, off = _view32(m), _dword_offsets(addrs, m, nbytes // 4)
    else:
        span = np.arange(nbytes, dtype=np.uint64)
        off = ((addrs - np.uint64(m.start))[:, None] + span).astype(np.int64)
        view, data32 = _view(m), data
    old = view[off] if compare else None
    view[off] = data32
    return old is not None and not np.array_equal(view[off], old)


def check(space: AddressSpace, addrs: np.ndarray, nbytes: int, access: str) -> None:
    resolve(space, addrs, nbytes, access)
