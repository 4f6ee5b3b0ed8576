"""Atomics from lanes that share an address apply in lane order: each lane returns the value before its own
operation, and memory ends with all of them applied. Checked against a one-lane-at-a-time reference written here
(plain Python integers), for every integer fold (add, sub, and, or, xor, min, max, swap), the wrapping ones
included, and for the ops that are not folds (inc, dec, cmpswap) too."""
from __future__ import annotations

import numpy as np
import pytest

from hcqsim.shader import memops

RNG = np.random.default_rng(20261207)
DTYPES = [np.uint32, np.int32, np.uint64, np.int64]
OPS = ["add", "sub", "and", "or", "xor", "min", "max", "swap", "inc", "dec", "cmpswap"]


def reference(op: str, dt, old: dict, addrs, srcs, cmps):
    """One lane at a time, on Python integers wrapped to the type."""
    bits = np.dtype(dt).itemsize * 8
    signed = np.dtype(dt).kind == "i"

    def wrap(v):
        v &= (1 << bits) - 1
        return v - (1 << bits) if signed and v >> (bits - 1) else v
    mem, rets = dict(old), []
    for a, s, c in zip(addrs, srcs, cmps):
        o = mem[a]
        rets.append(o)
        u_o, u_s = o & ((1 << bits) - 1), s & ((1 << bits) - 1)  # inc/dec compare unsigned
        mem[a] = wrap({"add": lambda: o + s, "sub": lambda: o - s, "and": lambda: o & s, "or": lambda: o | s,
                       "xor": lambda: o ^ s, "min": lambda: min(o, s), "max": lambda: max(o, s), "swap": lambda: s,
                       "inc": lambda: 0 if u_o >= u_s else o + 1,
                       "dec": lambda: s if u_o == 0 or u_o > u_s else o - 1,
                       "cmpswap": lambda: s if o == c else o}[op]())
    return rets, mem


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("spread", [1, 3, 40])
def test_lanes_sharing_addresses_apply_in_lane_order(op, dt, spread):
    if op in ("inc", "dec") and np.dtype(dt).kind == "i":
        pytest.skip("the ISA's inc/dec atomics are unsigned only (_u32, _u64)")
    info = np.iinfo(dt)
    n = 64
    addrs = (RNG.integers(0, spread, n) * 8 + 0x1000).astype(np.uint64)
    pool = [int(info.min), int(info.max), 0, 1, 2, -1 if info.min < 0 else 3, 7]

    def pick() -> int:
        return pool[int(RNG.integers(len(pool)))]
    srcs = np.array([pick() if RNG.random() < 0.4 else int(RNG.integers(info.min // 2, info.max // 2))
                     for _ in range(n)], dt)
    cmps = np.where(RNG.random(n) < 0.5, srcs, srcs // 2).astype(dt)
    uniq = np.unique(addrs)
    memory = {int(a): dt(pick()) for a in uniq}
    start = {a: int(v) for a, v in memory.items()}
    fn, kind, _, cmpswap = memops.atomic_kind(None, None, f"{op}_{'u' if np.dtype(dt).kind == 'u' else 'i'}"
                                              f"{np.dtype(dt).itemsize * 8}" if op != "cmpswap" else
                                              f"cmpswap_b{np.dtype(dt).itemsize * 8}")

    def old_of(a):
        return np.array([memory[int(x)] for x in a], dt)

    def write(a, v):
        for x, y in zip(a, v):
            memory[int(x)] = dt(y)
    rets = memops.apply_atomics(old_of, write, addrs, srcs, cmps, fn, dt, cmpswap)
    want_rets, want_mem = reference(op, dt, start, [int(a) for a in addrs], [int(s) for s in srcs],
                                    [int(c) for c in cmps])
    assert [int(r) for r in np.asarray(rets).astype(dt)] == want_rets
    assert {a: int(v) for a, v in memory.items()} == want_mem
