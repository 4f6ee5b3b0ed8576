"""Cross-lane VALU instructions on gfx1100 (wave32) and gfx942 (wave64), checked over whole waves with explicit
expected arrays, from the RDNA3.5 16.x / CDNA4 12.x pseudocode:

* V_READLANE_B32: lane = S1.u32[4:0] (wave64: [5:0]); D0.b32 = VGPR[lane][SRC0] (whatever EXEC says).
* V_READFIRSTLANE_B32: lane = EXEC == 0 ? 0 : s_ff1(EXEC); D0.b32 = VGPR[lane][SRC0].
* V_WRITELANE_B32: lane = S1.u32[4:0] ([5:0]); VGPR[lane][VDST] = S0.b32 (whatever EXEC says); other lanes kept.
* V_MBCNT_LO_U32_B32: ThreadMask = (1 << laneId) - 1; D0 = S1 + countbits(S0 & ThreadMask[31:0]);
  V_MBCNT_HI_U32_B32 likewise with ThreadMask[63:32].
* V_PERMLANE16_B32 (gfx11): lanesel = {S2, S1}; for each active lane row*16+i: D0 = tmp[row*16 + lanesel[4i+3:4i]]
  (tmp: S0 of every lane before the write); V_PERMLANEX16_B32 reads row ^ 1. Lanes whose selected source lane is
  inactive depend on FI / BOUND_CTRL (op_sel), which the pseudocode does not spell out: not asserted.
* V_SWAP_B32: tmp = D0; D0 = S0; S0 = tmp (active lanes); V_SWAP_B16 (gfx11 true16) on 16-bit halves.
"""
from __future__ import annotations

import numpy as np
import pytest

from isa_harness import LANES, Unimplemented, no_assembler_reason, rng, run_instruction

ARCHS = ("gfx1100", "gfx942")
WAVES = 24
M32 = 0xFFFFFFFF
CASES: list = []  # whole-wave checks: none for `python3 -m tests.isa_harness --report`


def _skip(arch):
    reason = no_assembler_reason(arch)
    if reason:
        pytest.skip(reason)


def _run(arch, line, **kw):
    try:
        return run_instruction(arch, line, waves=WAVES, **kw)
    except Unimplemented as e:
        pytest.xfail(f"unimplemented: {e}")


def _exec_masks(r, lanes):
    """Per wave: EXEC patterns with special cases (all, none, one lane, the top lane only, random)."""
    out = []
    for w in range(WAVES):
        kind = w % 6
        if kind == 0:
            m = [True] * lanes
        elif kind == 1:
            m = [False] * lanes
        elif kind == 2:
            k = r.randrange(lanes)
            m = [i == k for i in range(lanes)]
        elif kind == 3:
            m = [i == lanes - 1 for i in range(lanes)]
        else:
            m = [r.random() < 0.6 for _ in range(lanes)]
        out.append(m)
    return np.array(out, bool)


def _vgpr(r, lanes):
    return np.array([[r.getrandbits(32) for _ in range(lanes)] for _ in range(WAVES)], np.uint32)


def _report(line, bad):
    assert not bad, f"{line}: {len(bad)} differ\n    " + "\n    ".join(bad[:8])


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("lane_src", ["sgpr", "const"])
def test_readlane_reads_the_selected_lane_whatever_exec(arch, lane_src):
    _skip(arch)
    lanes = LANES[arch]
    r = rng(arch, "readlane", lane_src)
    src = _vgpr(r, lanes)
    ex = _exec_masks(r, lanes)
    if lane_src == "sgpr":
        sel = np.array([r.choice([0, 1, lanes - 1, lanes, lanes + 3, 0xFFFFFFFF, r.getrandbits(32)])
                        for _ in range(WAVES)], np.uint32)
        line = f"v_readlane_b32 s30, v10, s20"
        s = {20: sel, 30: np.full(WAVES, 0xDEADBEEF, np.uint32)}
    else:
        k = 13 if lanes == 32 else 45
        sel = np.full(WAVES, k, np.uint32)
        line = f"v_readlane_b32 s30, v10, {k}"
        s = {30: np.full(WAVES, 0xDEADBEEF, np.uint32)}
    st = _run(arch, line, v={10: src.reshape(-1)}, s=s, exec_lanes=ex.reshape(-1))
    got = st.scalar(30)
    bad = []
    for w in range(WAVES):
        lane = int(sel[w]) & (lanes - 1)
        want = int(src[w, lane])
        if int(got[w]) != want:
            bad.append(f"wave {w}: lane select 0x{int(sel[w]):x}, EXEC {ex[w].astype(int).tolist()}: got "
                       f"0x{int(got[w]):x}, want v10[{lane}] = 0x{want:x}")
    _report(line, bad)


@pytest.mark.parametrize("arch", ARCHS)
def test_readfirstlane_reads_the_first_active_lane_or_lane_0(arch):
    _skip(arch)
    lanes = LANES[arch]
    r = rng(arch, "readfirstlane")
    src = _vgpr(r, lanes)
    ex = _exec_masks(r, lanes)
    line = "v_readfirstlane_b32 s30, v10"
    st = _run(arch, line, v={10: src.reshape(-1)}, s={30: np.full(WAVES, 0xDEADBEEF, np.uint32)},
              exec_lanes=ex.reshape(-1))
    got = st.scalar(30)
    bad = []
    for w in range(WAVES):
        act = np.flatnonzero(ex[w])
        lane = int(act[0]) if len(act) else 0
        want = int(src[w, lane])
        if int(got[w]) != want:
            bad.append(f"wave {w}: EXEC lanes {act.tolist()}: got 0x{int(got[w]):x}, want v10[{lane}] = 0x{want:x}")
    _report(line, bad)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("lane_src", ["sgpr", "const"])
def test_writelane_writes_one_lane_whatever_exec(arch, lane_src):
    _skip(arch)
    lanes = LANES[arch]
    r = rng(arch, "writelane", lane_src)
    old = _vgpr(r, lanes)
    ex = _exec_masks(r, lanes)
    data = np.array([r.getrandbits(32) for _ in range(WAVES)], np.uint32)
    if lane_src == "sgpr":
        sel = np.array([r.choice([0, 1, lanes - 1, lanes, lanes + 5, 0xFFFFFFFF, r.getrandbits(32)])
                        for _ in range(WAVES)], np.uint32)
        if arch == "gfx942":  # GFX9: one SGPR on the constant bus; the lane select comes from M0
            line, s = "v_writelane_b32 v2, s20, m0", {20: data, 124: sel}
        else:
            line, s = "v_writelane_b32 v2, s20, s21", {20: data, 21: sel}
    else:
        k = 7 if lanes == 32 else 50
        sel = np.full(WAVES, k, np.uint32)
        line = f"v_writelane_b32 v2, s20, {k}"
        s = {20: data}
    st = _run(arch, line, v={2: old.reshape(-1)}, s=s, exec_lanes=ex.reshape(-1))
    got = st.vector(2).reshape(WAVES, lanes)
    bad = []
    for w in range(WAVES):
        want = old[w].copy()
        want[int(sel[w]) & (lanes - 1)] = data[w]
        for i in np.flatnonzero(got[w] != want):
            bad.append(f"wave {w} lane {i}: lane select 0x{int(sel[w]):x}, data 0x{int(data[w]):x}: got "
                       f"0x{int(got[w, i]):x}, want 0x{int(want[i]):x}")
    _report(line, bad)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("half", ["lo", "hi"])
@pytest.mark.parametrize("srcs", ["vv", "sv", "-1,0"])
def test_mbcnt_counts_mask_bits_below_the_lane(arch, half, srcs):
    _skip(arch)
    lanes = LANES[arch]
    r = rng(arch, "mbcnt", half, srcs)
    ex = _exec_masks(r, lanes)
    old = _vgpr(r, lanes)
    name = f"v_mbcnt_{half}_u32_b32"
    s, v = {}, {2: old.reshape(-1)}
    if srcs == "vv":
        mask = np.array([[r.choice([0xFFFFFFFF, 0, 0x80000001, r.getrandbits(32)]) for _ in range(lanes)]
                         for _ in range(WAVES)], np.uint32)
        add = np.array([[r.choice([0, 1, 0xFFFFFFFF, r.getrandbits(32)]) for _ in range(lanes)]
                        for _ in range(WAVES)], np.uint32)
        v[10], v[12] = mask.reshape(-1), add.reshape(-1)
        line = f"{name} v2, v10, v12"
    elif srcs == "sv":
        m = np.array([r.getrandbits(32) for _ in range(WAVES)], np.uint32)
        s = {20: m}
        mask = np.repeat(m[:, None], lanes, 1)
        add = _vgpr(r, lanes)
        v[12] = add.reshape(-1)
        line = f"{name} v2, s20, v12"
    else:
        mask = np.full((WAVES, lanes), 0xFFFFFFFF, np.uint32)
        add = np.zeros((WAVES, lanes), np.uint32)
        line = f"{name} v2, -1, 0"
    st = _run(arch, line, v=v, s=s, exec_lanes=ex.reshape(-1))
    got = st.vector(2).reshape(WAVES, lanes)
    bad = []
    for w in range(WAVES):
        for i in range(lanes):
            if not ex[w, i]:
                want = int(old[w, i])
            else:
                thread = (1 << i) - 1
                part = (thread & M32) if half == "lo" else (thread >> 32) & M32
                want = (int(add[w, i]) + bin(int(mask[w, i]) & part).count("1")) & M32
            if int(got[w, i]) != want:
                bad.append(f"wave {w} lane {i}{'' if ex[w, i] else ' (inactive)'}: S0 0x{int(mask[w, i]):x}, "
                           f"S1 0x{int(add[w, i]):x}: got 0x{int(got[w, i]):x}, want 0x{want:x}")
    _report(line, bad)


@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("opsel", ["", " op_sel:[1,0]", " op_sel:[0,1]", " op_sel:[1,1]"])
def test_permlane16_gathers_within_or_across_rows(cross, opsel):
    arch = "gfx1100"
    _skip(arch)
    lanes = LANES[arch]
    r = rng(arch, "permlane", cross, opsel)
    src = _vgpr(r, lanes)
    old = _vgpr(r, lanes)
    ex = _exec_masks(r, lanes)
    sel_lo = np.array([r.getrandbits(32) if w % 3 else 0x76543210 for w in range(WAVES)], np.uint32)
    sel_hi = np.array([r.getrandbits(32) if w % 3 else 0xFEDCBA98 for w in range(WAVES)], np.uint32)
    name = "v_permlanex16_b32" if cross else "v_permlane16_b32"
    line = f"{name} v2, v10, s20, s21{opsel}"
    st = _run(arch, line, v={2: old.reshape(-1), 10: src.reshape(-1)}, s={20: sel_lo, 21: sel_hi},
              exec_lanes=ex.reshape(-1))
    got = st.vector(2).reshape(WAVES, lanes)
    bad = []
    for w in range(WAVES):
        lanesel = int(sel_lo[w]) | int(sel_hi[w]) << 32
        for lane in range(lanes):
            row, i = divmod(lane, 16)
            if not ex[w, lane]:
                want = int(old[w, lane])
            else:
                j = ((row ^ 1) if cross else row) * 16 + ((lanesel >> (4 * i)) & 15)
                if not ex[w, j]:
                    continue  # FI / BOUND_CTRL decide: not asserted
                want = int(src[w, j])
            if int(got[w, lane]) != want:
                bad.append(f"wave {w} lane {lane}: lanesel 0x{lanesel:016x}: got 0x{int(got[w, lane]):x}, "
                           f"want 0x{want:x}")
    _report(line, bad)


@pytest.mark.parametrize("arch", ARCHS)
def test_swap_b32_exchanges_active_lanes(arch):
    _skip(arch)
    lanes = LANES[arch]
    r = rng(arch, "swap32")
    a, b = _vgpr(r, lanes), _vgpr(r, lanes)
    ex = _exec_masks(r, lanes)
    line = "v_swap_b32 v2, v10"
    st = _run(arch, line, v={2: a.reshape(-1), 10: b.reshape(-1)}, exec_lanes=ex.reshape(-1))
    g2, g10 = st.vector(2).reshape(WAVES, lanes), st.vector(10).reshape(WAVES, lanes)
    want2, want10 = np.where(ex, b, a), np.where(ex, a, b)
    bad = [f"wave {w} lane {i}: v2 0x{int(g2[w, i]):x} v10 0x{int(g10[w, i]):x}, want v2 0x{int(want2[w, i]):x} "
           f"v10 0x{int(want10[w, i]):x}" for w, i in zip(*np.nonzero((g2 != want2) | (g10 != want10)))]
    _report(line, bad)


@pytest.mark.parametrize("dh", ["l", "h"])
@pytest.mark.parametrize("sh", ["l", "h"])
def test_swap_b16_exchanges_halves(dh, sh):
    arch = "gfx1100"
    _skip(arch)
    lanes = LANES[arch]
    r = rng(arch, "swap16", dh, sh)
    a, b = _vgpr(r, lanes), _vgpr(r, lanes)
    ex = _exec_masks(r, lanes)
    line = f"v_swap_b16 v2.{dh}, v10.{sh}"
    st = _run(arch, line, v={2: a.reshape(-1), 10: b.reshape(-1)}, exec_lanes=ex.reshape(-1))
    g2, g10 = st.vector(2).reshape(WAVES, lanes), st.vector(10).reshape(WAVES, lanes)
    bad = []
    for w in range(WAVES):
        for i in range(lanes):
            x, y = int(a[w, i]), int(b[w, i])
            if ex[w, i]:
                ds, ss = 16 * (dh == "h"), 16 * (sh == "h")
                hx, hy = (x >> ds) & 0xFFFF, (y >> ss) & 0xFFFF
                x = (x & ~(0xFFFF << ds) & M32) | hy << ds
                y = (y & ~(0xFFFF << ss) & M32) | hx << ss
            if int(g2[w, i]) != x or int(g10[w, i]) != y:
                bad.append(f"wave {w} lane {i}: v2 0x{int(g2[w, i]):x} v10 0x{int(g10[w, i]):x}, want v2 0x{x:x} "
                           f"v10 0x{y:x}")
    _report(line, bad)
