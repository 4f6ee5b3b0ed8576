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
        view = m.np8 = host_view(m.start, m.end - m.start)
    return view


def resolve(space: AddressSpace, addrs: np.ndarray, nbytes: int, access: str) -> list[tuple[Mapping, np.ndarray]]:
    """Group flat addresses by mapping: [(mapping, index into addrs)], or VMFaultError for the first bad lane."""
    if addrs.size == 0:
        return []
    lo, hi = int(addrs.min()), int(addrs.max())
    m = space.find(lo)
    attr = _ACCESS_ATTR[access]
    if m is not None and hi + nbytes <= m.end and getattr(m, attr):
        return [(m, np.arange(addrs.size))]
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


def load(space: AddressSpace, addrs: np.ndarray, nbytes: int) -> np.ndarray:
    """uint8 [len(addrs), nbytes]: the bytes at each address."""
    out = np.empty((addrs.size, nbytes), np.uint8)
    span = np.arange(nbytes, dtype=np.uint64)
    for m, sel in resolve(space, addrs, nbytes, "read"):
        off = (addrs[sel] - np.uint64(m.start))[:, None] + span
        out[sel] = _view(m)[off.astype(np.int64)]
    return out


def store(space: AddressSpace, addrs: np.ndarray, data: np.ndarray) -> None:
    """Write uint8 [len(addrs), nbytes] rows; for lanes hitting the same bytes the highest lane lands last."""
    nbytes = data.shape[1]
    span = np.arange(nbytes, dtype=np.uint64)
    for m, sel in resolve(space, addrs, nbytes, "write"):
        off = (addrs[sel] - np.uint64(m.start))[:, None] + span
        _view(m)[off.astype(np.int64)] = data[sel]


def check(space: AddressSpace, addrs: np.ndarray, nbytes: int, access: str) -> None:
    resolve(space, addrs, nbytes, access)
