"""The strategy that draws a `FuzzCase` (`schedules()`): dependent operations over shared cut points, the relay motif,
in-flight prelude work, parameters and several runs."""
from __future__ import annotations

from hypothesis import strategies as st

from .cases import (BUFFER_BYTES, FUZZ_KERNELS, KERNEL_WORDS, LONG_BUFFER_BYTES, MAX_SCALAR, FuzzCase,
                    buffer_names)
from .draws import _COIN, _KEEP, U32, _bytes, _int, _pick


def _cuts(draw, size: int = BUFFER_BYTES) -> list[int]:
    """Byte offsets ranges start and end near, shared by a case's ops, so partial overlaps (down to one byte)
    are common; the last is the buffers' size."""
    return sorted({0, size} | {_int(draw, 1, size - 1) for _ in range(_int(draw, 0, 4))})


def _range(draw, cuts: list[int], align: int, size: int | None = None) -> tuple[int, int]:
    """(offset, size) in a buffer: ends at or next to a cut (byte-granular when align is 1)."""
    jitter = (lambda: (0, 1, -1)[_int(draw, 0, 2)]) if align == 1 else (lambda: 0)
    clamp = lambda v, lo, hi: max(lo, min(hi, v))  # noqa: E731
    end = cuts[-1]  # the buffers' size
    if size is None:
        lo = clamp(_pick(draw, cuts[:-1]) + jitter(), 0, end - align) // align * align
        hi = clamp(_pick(draw, cuts[1:]) + jitter(), lo + align, end)
        hi = min(-(-hi // align) * align, end)
        return lo, hi - lo
    return clamp(_pick(draw, cuts) + jitter(), 0, end - size) // align * align, size


def _buffer(draw, names: list[str], recent: list[str]) -> str:
    """A buffer: half the time one an earlier operation of the case used, so operations depend on each other (RAW,
    WAR, WAW chains through several queues are what a compiler's wait rules get wrong)."""
    near = [b for b in recent if b in names]
    return _pick(draw, near) if near and draw(_COIN) else _pick(draw, names)


def _op(draw, names: list[str], cuts: list[int], params: list[str], kernels: bool, host: bool,
        recent: list[str] | None = None):
    recent = [] if recent is None else recent
    kinds = ["fill", "copy"] + ["kernel"] * kernels + ["host_write"] * host
    kind = _pick(draw, kinds)
    value = lambda hi: _pick(draw, params) if params and draw(_COIN) else _int(draw, 0, hi)  # noqa: E731
    if kind == "fill":
        off, size = _range(draw, cuts, 4)
        op = ("fill", _buffer(draw, names, recent), off, size, value(U32))
    elif kind == "copy":
        off, size = _range(draw, cuts, 1)
        soff, _ = _range(draw, cuts, 1, size)
        dst, src = _buffer(draw, names, recent), _buffer(draw, names, recent)
        if dst == src and soff < off + size and off < soff + size:  # one copy's own ranges never overlap: the
            src = names[(names.index(dst) + 1) % len(names)]        # order within a copy is not its meaning
        op = ("copy", dst, off, src, soff, size)
    elif kind == "host_write":
        off, size = _range(draw, cuts, 1)
        op = ("host_write", _buffer(draw, names, recent), off, list(_bytes(draw, min(size, BUFFER_BYTES))))
    else:
        name = _pick(draw, sorted(FUZZ_KERNELS))
        bargs, nscalars = FUZZ_KERNELS[name]
        n = min(_range(draw, cuts, 4)[1] // 4, KERNEL_WORDS)
        device = _buffer(draw, names, recent)[:2]  # a kernel's buffers on its own device
        local = [b for b in names if b.startswith(device)]
        args = [[_buffer(draw, local, recent), _range(draw, cuts, 4, 4 * n)[0]] for _ in bargs]
        op = ("kernel", name, args, [value(MAX_SCALAR) for _ in range(nscalars)], n)
    recent += _buffers_of(op)
    return op


_RELAY_OPS = 6  # operations of the relay motif
_RELAY_SLOTS = 4  # 16-byte slots of a buffer the relay motif's ranges sit in (BUFFER_BYTES // 16)


def _relay(draw, names: list[str]) -> list[tuple]:
    """The shape that tells a wait's knowledge *at the awaited point* from its producer's knowledge *now* (and a
    submit split after an awaited operation from one that is not): queue P runs #2 then #3, and #3 waits for
    queue R's #1; queue Q's #4 waits for P's #2 only (P learnt of #1 after #2); Q's #5 depends on #1 again. A
    compiler that lets #4's wait teach Q what P knows now believes #5 is ordered after #1 and drops its wait; with
    batch_limit 1, #2 ends P's first submit, and dropping its signal leaves #4 waiting for ever.
        #1 R: write A[s1]            (a fill, or a copy into A)
        #2 P: kernel inc B[s2]
        #3 P: kernel add A[s1] + B[s2] -> B[s3]   (waits for R: #1)
        #4 Q: B[s4] <- B[s2]          (waits for P at #2)
        #5 Q: B[s4] <- A[s1]          (after #4 on Q; depends on #1)
        #6 P: kernel inc A[s1]        (P goes on: write after #5's read, on another queue)
    Q's pair is two copies (Q a copy queue after R's: only an interleaving that holds R back shows the bug) or two
    `scale` kernels by odd factors (Q compute queue 1, ahead of R in the in-order default, which shows it). On
    device 0, whose compute queue 0 (P: the finalizer's queue) ends the schedule, so nothing else waits for #3
    and a lost signal of #2 is not covered up by a later one; #1 may copy from a peer device (it then runs on the
    peer's GPU). #6 overwrites what #5 reads: a compiler that drops that write-after-read wait lets P run it before
    Q's #5 in the in-order default. The buffers, the slots, the size, the factors and #1's value or source are
    drawn."""
    dev = "d0"
    local = [n for n in names if n.startswith(dev)]
    a = _pick(draw, local)
    b = next(n for n in local if n != a)
    slots = list(range(_RELAY_SLOTS))
    s1 = _pick(draw, slots)
    s2, s3, s4 = (slots.pop(_int(draw, 0, 255) % len(slots)) * 16 for _ in range(3))
    s1 *= 16
    n = _int(draw, 1, 4)
    peers = [x for x in names if x[:2] != dev]
    if draw(_COIN):
        first = ("fill", a, s1, 4 * n, _int(draw, 0, U32))
    else:  # a copy runs on its source's device: from a peer, #1 runs on another GPU than #2 .. #5
        src = _pick(draw, peers or [b])
        first = ("copy", a, s1, src, _int(draw, 0, _RELAY_SLOTS * 16 - 4 * n), 4 * n)
    if draw(_COIN):
        odd = lambda: 2 * _int(draw, 0, MAX_SCALAR // 2 - 1) + 1  # noqa: E731  (odd: a different input shows)
        tail = [("kernel", "scale", [[b, s2], [b, s4]], [odd()], n), ("kernel", "scale", [[a, s1], [b, s4]], [odd()], n)]
    else:
        tail = [("copy", b, s4, b, s2, 4 * n), ("copy", b, s4, a, s1, 4 * n)]
    return [first, ("kernel", "inc", [[b, s2]], [], n), ("kernel", "add", [[a, s1], [b, s2], [b, s3]], [], n), *tail,
            ("kernel", "inc", [[a, s1]], [], n)]


def _buffers_of(op) -> list[str]:
    if op[0] == "kernel":
        return [b for b, _ in op[2]]
    return [op[1], op[3]] if op[0] == "copy" else [op[1]]


@st.composite
def schedules(draw, *, max_ops: int = 8, devices: int | None = None, kernels: bool = True, host: bool = True,
              prelude: bool = True, replays: bool = True, min_ops: int = 1):
    """A FuzzCase: 1..max_ops operations (about max_ops / 2 on average) over 2 small buffers per device (64 bytes;
    one case in eight LONG_BUFFER_BYTES, so copies and fills span several SDMA chunks), on `devices` (default: 1 to
    3) devices; with `prelude`, fills and copies in flight on every device's timeline; with `replays`, parameters
    and 1-3 runs that rebind buffers and change parameters. One case in five (with kernels, max_ops >= 6)
    contains the relay motif (`_relay`), the shape knowledge and batch-split bugs need."""
    ndev = devices or _pick(draw, (1, 2, 1, 3, 2))  # one and two devices most: more of the ops then conflict
    names = buffer_names(ndev)
    size = LONG_BUFFER_BYTES if _int(draw, 0, 7) == 7 else BUFFER_BYTES
    cuts = _cuts(draw, size)
    params = []
    if replays:
        params = [(f"p{i}", _int(draw, 0, MAX_SCALAR)) for i in range(_int(draw, 0, 2))]
    pnames = [n for n, _ in params]
    # a count, then each operation behind a keep number (0 drops it: the shrinker deletes any one operation by
    # lowering its number). The count is max_ops minus the drawn number: drawn up from min_ops (or hypothesis' list
    # strategy) it averaged ~3 of 8, as hypothesis' generation keeps reusing small early choices; shrinking is the
    # keep numbers' job, so the count need not shrink toward few
    count = max_ops - _int(draw, 0, max_ops - min_ops)
    relay = kernels and max_ops >= _RELAY_OPS and _int(draw, 0, 4) == 0
    count = max(count, _RELAY_OPS) if relay else count
    recent: list[str] = []
    drawn = [(_int(draw, *_KEEP), _op(draw, names, cuts, pnames, kernels, host, recent))
             for _ in range(count - (_RELAY_OPS if relay else 0))]
    if relay:  # each of its operations behind a keep number too: the shrinker may drop any of them
        motif = [(_int(draw, *_KEEP), op) for op in _relay(draw, names)]
        at = _int(draw, 0, len(drawn))
        drawn[at:at] = motif
    ops = tuple(op for keep, op in drawn if keep or min_ops > 1) or (drawn[-1][1],)
    # with the relay motif mostly a submit per operation (#2 then ends a submit that is not its queue's last)
    batch_limit = ((1, 1, 1, 2) if relay else (32, 1, 2))[_int(draw, 0, 2 + relay)]
    pre = ()
    if prelude:
        # on any device's timeline, writing any device's memory (a peer copy or fill into another's buffer)
        pre = tuple((_int(draw, 0, ndev - 1), _op(draw, names, cuts, [], False, False))
                    for _ in range(_int(draw, 0, ndev + 1)))
    runs = (((), ()),)
    if replays:
        runs = tuple((tuple(sorted({_buffer(draw, names, recent) for _ in range(_int(draw, 0, 3))})),
                      tuple((n, _int(draw, 0, MAX_SCALAR)) for n in pnames if draw(_COIN)))
                     for _ in range(_int(draw, 1, 3)))
    return FuzzCase(ndev, ops, pre, batch_limit, tuple(params), runs, size)
