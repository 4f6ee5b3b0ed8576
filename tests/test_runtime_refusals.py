"""A refused runtime call changes nothing, wrong types are TypeErrors naming the argument, and objects of another
device are refused naming both devices (issue 22). The state compared before and after every refusal is what a
later call depends on: the kernarg arena, dispatch ids, the timeline, every ring, live buffers and signals, the
contents of memory, and the command lists being built."""
import numpy as np
import pytest

from hcqsim import kernels
from hcqsim.runtime import Schedule, open_devices


@pytest.fixture(scope="module")
def two():
    devs = open_devices("sim", 2)
    yield devs
    for d in devs:
        d.close()


@pytest.fixture(scope="module")
def world(two):
    return make_world(*two)


def make_world(a, b) -> dict:
    """Two devices' worth of objects the refusals use (also the audit's misuse surface, tests/audit.py)."""
    prog = a.load_program(kernels.code_object("scale", a.target), "scale")
    other_prog = b.load_program(kernels.code_object("scale", b.target), "scale")
    src, dst = a.alloc(4096), a.alloc(4096)
    a.copyin(src, np.arange(1024, dtype=np.uint32).tobytes())
    freed = a.alloc(4096)
    a.free(freed)
    sig, foreign_sig, freed_sig = a.new_signal(0), b.new_signal(0), a.new_signal(0)
    a.free_signal(freed_sig)
    # a kernel and a copy queue already holding work, so refusals must not touch what they built
    q = a.compute_queue().exec(prog, [src, dst, 3, 1024], 1024, 64)
    cq = a.copy_queue().copy(dst, src, 64)
    q.signal(sig, 1).submit()
    sig.wait(1)
    return dict(a=a, b=b, prog=prog, other_prog=other_prog, src=src, dst=dst, freed=freed, sig=sig,
                foreign_sig=foreign_sig, freed_sig=freed_sig, other_buf=b.alloc(4096), q=q, cq=cq)


class Duck:
    """Looks like a Buffer to code that only reads attributes."""

    va, size, device = 0x1000, 4096, None


def state(w) -> dict:
    a = w["a"]
    rings = {key: (r.put, r.seq, r.reclaimed) for key, r in a._rings.items()}
    return dict(kernarg=a._kernarg_pos, dispatch=a._dispatch_id, timeline=(a.timeline_value, a._timeline_submitted),
                rings=rings, buffers=sorted(a._buffers), free_signals=len(a._free_signals),
                pending=len(a._pending_signals), faults=list(a.faults), cache=a._cached_bytes,
                src=bytes(w["src"].view), dst=bytes(w["dst"].view), sig=w["sig"].value,
                q=(len(w["q"].packets), len(w["q"].signals), len(w["q"].buffers), len(w["q"].released)),
                cq=(len(w["cq"].packets), len(w["cq"].signals), len(w["cq"].buffers)),
                gpus=[len(g.faults) for g in a.os.system.gpus])


def refusals(w):
    """(name, call, expected exception type, words the message must contain)."""
    a, b, prog, src, dst, q, cq = w["a"], w["b"], w["prog"], w["src"], w["dst"], w["q"], w["cq"]
    sig, ro = w["sig"], bytes(64)
    return [
        # exec: every refusal before the arena, the dispatch id or the queue move
        ("exec: wrong argument count", lambda: q.exec(prog, [src, dst, 3], 64, 64), TypeError, ["takes 4"]),
        ("exec: int too big", lambda: q.exec(prog, [src, dst, 1 << 40, 64], 64, 64), ValueError,
         ["argument 2", "does not fit in 4 bytes"]),
        ("exec: negative int too small", lambda: q.exec(prog, [src, dst, -(1 << 31) - 1, 64], 64, 64), ValueError,
         ["does not fit"]),
        ("exec: grid past 32 bits", lambda: q.exec(prog, [src, dst, 3, 64], 1 << 32, 64), ValueError,
         ["global_size", "2**32"]),
        ("exec: grid dim past 32 bits", lambda: q.exec(prog, [src, dst, 3, 64], (64, 1 << 33), (64, 1)), ValueError,
         ["2**32"]),
        ("exec: zero grid", lambda: q.exec(prog, [src, dst, 3, 64], 0, 64), ValueError, ["at least 1"]),
        ("exec: float grid", lambda: q.exec(prog, [src, dst, 3, 64], 64.0, 64), TypeError, ["global_size"]),
        ("exec: workgroup too big", lambda: q.exec(prog, [src, dst, 3, 64], 2048, 2048), ValueError, ["1024"]),
        ("exec: string for a pointer", lambda: q.exec(prog, ["src", dst, 3, 64], 64, 64), TypeError,
         ["argument 0", "pointer"]),
        ("exec: duck-typed buffer", lambda: q.exec(prog, [Duck(), dst, 3, 64], 64, 64), TypeError,
         ["argument 0", "Duck"]),
        ("exec: string for an int", lambda: q.exec(prog, [src, dst, "3", 64], 64, 64), TypeError, ["argument 2"]),
        ("exec: freed buffer", lambda: q.exec(prog, [w["freed"], dst, 3, 64], 64, 64), ValueError, ["freed"]),
        ("exec: another device's buffer", lambda: q.exec(prog, [w["other_buf"], dst, 3, 64], 64, 64), ValueError,
         [a.label, b.label]),
        ("exec: another device's program", lambda: q.exec(w["other_prog"], [src, dst, 3, 64], 64, 64), ValueError,
         [a.label, b.label]),
        ("exec: not a program", lambda: q.exec("scale", [src, dst, 3, 64], 64, 64), TypeError, ["Program"]),
        ("exec: args not a list", lambda: q.exec(prog, 5, 64, 64), TypeError, ["args"]),
        # signals
        ("queue signal: another device's signal", lambda: q.signal(w["foreign_sig"], 1), ValueError,
         [a.label, b.label, "map_to"]),
        ("queue wait: another device's signal", lambda: cq.wait(w["foreign_sig"], 1), ValueError, [a.label, b.label]),
        ("queue signal: a string", lambda: q.signal("x", 1), TypeError, ["Signal", "str"]),
        ("queue signal: freed signal", lambda: cq.signal(w["freed_sig"], 1), ValueError, ["freed"]),
        ("queue signal: value past 32 bits", lambda: q.signal(sig, 1 << 32), ValueError, ["32 bits"]),
        ("queue signal: float value", lambda: q.signal(sig, 1.5), TypeError, ["int"]),
        ("new_signal: a string", lambda: a.new_signal("x"), TypeError, ["new_signal value"]),
        ("new_signal: negative", lambda: a.new_signal(-1), ValueError, ["32 bits"]),
        ("Signal.value = string", lambda: setattr(sig, "value", "x"), TypeError, ["int"]),
        ("Signal.wait: a string", lambda: sig.wait("x"), TypeError, ["wait value"]),
        ("free_signal: not a signal", lambda: a.free_signal(5), TypeError, ["free_signal: signal"]),
        ("free_signal: another device's", lambda: a.free_signal(w["foreign_sig"]), ValueError, [a.label, b.label]),
        ("free_signal: twice", lambda: a.free_signal(w["freed_sig"]), ValueError, ["double free"]),
        # memory
        ("free: an int", lambda: a.free(123), TypeError, ["free: buf", "int"]),
        ("free: a duck", lambda: a.free(Duck()), TypeError, ["free: buf"]),
        ("free: twice", lambda: a.free(w["freed"]), ValueError, ["double free"]),
        ("free: a view", lambda: a.free(src.offset(0, 16)), ValueError, ["view"]),
        ("free: another device's buffer", lambda: a.free(w["other_buf"]), ValueError, [a.label, b.label]),
        ("alloc: a string", lambda: a.alloc("4096"), TypeError, ["alloc: nbytes"]),
        ("alloc: zero", lambda: a.alloc(0), ValueError, ["positive"]),
        ("map_to: a string", lambda: a.map_to("x", b), TypeError, ["map_to: buf"]),
        ("map_to: not a device", lambda: a.map_to(src, "GPU 1"), TypeError, ["map_to: other"]),
        ("Buffer.offset: a string", lambda: src.offset("4"), TypeError, ["offset"]),
        ("Buffer.offset: past the end", lambda: src.offset(4000, 200), ValueError, ["outside"]),
        # staged copies
        ("copyin: freed buffer", lambda: a.copyin(w["freed"], b"x"), ValueError, ["freed"]),
        ("copyin: past the end", lambda: a.copyin(src, b"x" * 8, offset=4090), ValueError, ["outside"]),
        ("copyin: not bytes", lambda: a.copyin(src, 12345), TypeError, ["copyin: data"]),
        ("copyin: not a buffer", lambda: a.copyin("src", b"x"), TypeError, ["copyin: buf"]),
        ("copyout: read-only out", lambda: a.copyout(src, 64, out=ro), TypeError, ["read-only"]),
        ("copyout: out too small", lambda: a.copyout(src, 64, out=bytearray(8)), ValueError, ["8"]),
        ("copyout: past the end", lambda: a.copyout(src, 200, offset=4000), ValueError, ["outside"]),
        ("copyout: string size", lambda: a.copyout(src, "64"), TypeError, ["copyout: nbytes"]),
        ("copyout: duck", lambda: a.copyout(Duck(), 64), TypeError, ["copyout: buf"]),
        ("transfer: not a buffer", lambda: b.transfer("dst", src, 64), TypeError, ["transfer: dst"]),
        ("transfer: too many bytes", lambda: b.transfer(w["other_buf"], src, 8192), ValueError, ["4096 bytes"]),
        # queue builders
        ("copy: duck destination", lambda: cq.copy(Duck(), src, 64), TypeError, ["copy destination", "Duck"]),
        ("copy: string size", lambda: cq.copy(dst, src, "64"), TypeError, ["size"]),
        ("copy: negative size", lambda: q.copy(dst, src, -4), ValueError, ["non-negative"]),
        ("copy: past the source", lambda: cq.copy(dst, src.offset(0, 16), 64), ValueError, ["16 bytes"]),
        ("fill: unaligned", lambda: cq.fill(dst.offset(1, 64), 0, 64), ValueError, ["multiples of 4"]),
        ("fill: freed", lambda: q.fill(w["freed"], 0, 64), ValueError, ["freed"]),
        ("copy: address past 64 bits", lambda: cq.copy(1 << 64, src, 64), ValueError, ["64-bit"]),
        ("submit: to a device the buffers are not mapped on", lambda: cq.submit(b), ValueError,
         ["not mapped on", b.label]),
    ]


def test_every_refused_call_raises_and_changes_nothing(world):
    names = set()
    for name, call, exc, words in refusals(world):
        before = state(world)
        with pytest.raises(exc) as info:
            call()
        after = state(world)
        assert after == before, f"{name}: refused, but changed {[k for k in before if before[k] != after[k]]}"
        text = str(info.value)
        assert all(w in text for w in words), f"{name}: message {text!r} lacks {words}"
        names.add(name)
    assert len(names) == 59  # distinct refusal paths exercised
    # and the device still works: the queue built before the refusals runs to the right answer
    a, q = world["a"], world["q"]
    sig = a.new_signal(0)
    q.signal(sig, 1).submit()
    sig.wait(1)
    assert np.frombuffer(a.copyout(world["dst"]), np.uint32).tolist() == [3 * i for i in range(1024)]


def test_a_peer_mapped_signal_of_another_device_is_accepted(two):
    a, b = two
    sig = b.new_signal(0)
    b.map_to(sig, a)
    a.copy_queue().signal(sig, 5).submit()
    sig.wait(5)


def test_a_schedule_replay_refuses_a_buffer_freed_since_it_was_compiled(two):
    a = two[0]
    x, y = a.alloc(4096), a.alloc(4096)
    s = Schedule(a)
    s.name(x, "x")
    s.fill(x, 0x01010101)
    s.copy(y, x, 4096)
    compiled = s.compile()
    compiled.run()
    a.free(y)
    reused = a.alloc(4096)  # the freed memory's next owner (the LRU cache hands it out again)
    a.copyin(reused, b"\x07" * 4096)
    with pytest.raises(ValueError, match="freed"):
        compiled.run()
    assert a.copyout(reused) == b"\x07" * 4096  # the replay did not overwrite the new owner's data
