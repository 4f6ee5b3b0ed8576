"""Per-lane memory traffic of shader instructions, checked against the GPU's address space.

Every access of every active lane is checked first (all addresses, all bytes); one bad lane raises
VMFaultError for the first offending address and nothing is written. Bytes move with numpy gathers and
scatters on views of the mapped host memory, so a whole batch of waves costs a few array operations.
"""
from __future__ import annotations

import numpy as np

from ..errors import VMFaultError
from ..memory import AddressSpace, Mapping, host_view

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


def load(space: AddressSpace, addrs: np.ndarray, nbytes: int) -> np.ndarray:
    """uint8 [len(addrs), nbytes]: the bytes at each address."""
    groups = resolve(space, addrs, nbytes, "read")
    if nbytes % 4 == 0 and not (addrs & np.uint64(3)).any():  # dword-aligned: gather whole dwords
        out32 = np.empty((addrs.size, nbytes // 4), np.uint32)
        for m, sel in groups:
            out32[sel] = _view32(m)[_dword_offsets(addrs[sel], m, nbytes // 4)]
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
    nbytes = data.shape[1]
    groups = resolve(space, addrs, nbytes, "write")
    watch = space.__dict__.get("watch_stores")
    if nbytes % 4 == 0 and not (addrs & np.uint64(3)).any():
        data32 = np.ascontiguousarray(data).view(np.uint32)
        for m, sel in groups:
            view, off = _view32(m), _dword_offsets(addrs[sel], m, nbytes // 4)
            old = view[off] if watch is not None else None
            view[off] = data32[sel]
            if old is not None and not np.array_equal(view[off], old):
                watch[0] += 1
        return
    span = np.arange(nbytes, dtype=np.uint64)
    for m, sel in groups:
        off = ((addrs[sel] - np.uint64(m.start))[:, None] + span).astype(np.int64)
        view = _view(m)
        old = view[off] if watch is not None else None
        view[off] = data[sel]
        if old is not None and not np.array_equal(view[off], old):
            watch[0] += 1


def check(space: AddressSpace, addrs: np.ndarray, nbytes: int, access: str) -> None:
    resolve(space, addrs, nbytes, access)
