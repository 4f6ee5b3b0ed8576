"""The generated per-field-set encoder (PacketFormat._compile_encoder, the runtime's hot path) against the checked,
field-by-field one (_encode_fields) on every PM4 and SDMA format: random in-range values, fields named in random
orders and subsets, overlapping fields, payloads; and the refusals and conversions it hands to the checked path."""
import random

import pytest

from hcqsim import pm4, sdma
from hcqsim.fields import F, PacketFormat

# (family or version, format): the id must be the same in every process (pytest-xdist compares collections)
ALL_FORMATS = [(fam, f) for fam, fmts in pm4.FORMATS.items() for f in fmts.values()] + \
    [(ver, f) for ver, fmts in sdma.FORMATS.items() for f in fmts.values()]


def checked(fmt: PacketFormat, values: dict, payload=()) -> list[int]:
    """What encode means, spelled out with the checked path only."""
    dws = fmt._encode_fields(values)
    if payload:
        dws += [0] * max(0, fmt.payload_dw + len(payload) - len(dws))
        for i, d in enumerate(payload):
            dws[fmt.payload_dw + i] = d & 0xFFFFFFFF
    return dws


@pytest.mark.parametrize("family, fmt", ALL_FORMATS, ids=[f"{fam}/{f.name}/{f.opcode:#x}" for fam, f in ALL_FORMATS])
def test_generated_encoder_equals_the_checked_one(family, fmt):
    rng = random.Random(f"{family}/{fmt.name}")
    for _ in range(40):
        names = rng.sample([f.name for f in fmt.fields], rng.randint(0, len(fmt.fields)))
        values = {n: rng.choice((0, fmt.by_name[n].mask, rng.randint(0, fmt.by_name[n].mask))) for n in names}
        payload = [rng.getrandbits(32) for _ in range(rng.randint(0, 5))] if fmt.payload else []
        kw = dict(values, **({fmt.payload: payload} if fmt.payload else {}))
        assert fmt.encode(**kw) == checked(fmt, values, payload), (names, values)


def test_overlapping_fields_are_set_in_the_order_named():
    fmt = PacketFormat("T", 1, (F("all", 1, 63, 0), F("mid", 1, 39, 24), F("bit", 2, 5)), size=3)
    for names in (("all", "mid", "bit"), ("mid", "all", "bit"), ("bit", "all", "mid")):
        values = {"all": 0x0123_4567_89AB_CDEF, "mid": 0xA5A5, "bit": 0}
        kw = {n: values[n] for n in names}
        assert fmt.encode(**kw) == fmt._encode_fields(kw)


def test_what_is_not_a_plain_int_in_range_goes_to_the_checked_path():
    fmt = pm4.FORMATS["gfx11"][pm4.OP["RELEASE_MEM"]]
    with pytest.raises(ValueError, match="does not fit"):
        fmt.encode(data_sel=8)
    with pytest.raises(ValueError, match="does not fit"):
        fmt.encode(data_sel=-1)
    with pytest.raises(TypeError, match="no field 'nonsense'"):
        fmt.encode(nonsense=1)
    assert fmt.encode(data_sel=True) == fmt.encode(data_sel=1)  # int(), as before
    ev = pm4.FORMATS["gfx11"][pm4.OP["EVENT_WRITE"]]
    name = next(f for f in ev.fields if f.enum)  # an enum name converts
    value, label = next(iter(name.enum.items()))
    assert ev.encode(**{name.name: label}) == ev.encode(**{name.name: value})
