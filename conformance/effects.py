"""Effect records: what a scenario did, in a canonical JSON form that is stable across runs, machines and versions.

An effect record (one scenario) is

    {"buffers": {name: BYTES}, "signals": {name: int},
     "checkpoints": [{"name": str, "buffers": {key: BYTES}, "signals": {name: int}} | {"name": str, "copyout": BYTES}
                     | {"name": str, "events": {event: delivered}} | {"name": str, "fault": {...}}
                     | {"name": str, "topology": {device: {property: int}}}
                     | {"name": str, "read_pointer": {"rptr_is_wptr": bool, "ring_wrapped": bool}}],
     "timestamps": {"monotonic": {queue: bool}, "orders": {"a <= b": bool, "a < b": bool}}}

BYTES is {"size": n, "runs": [[count, "0xSTART", step], ...]}: the buffer's little-endian 32-bit words as
arithmetic runs (count words from START, each `step` more than the last, mod 2^32; found greedily from the
start, so the encoding of given bytes is unique). A constant fill is one run, an iota pattern is one run.
No addresses and no absolute times appear anywhere; timestamps are kept only as the truth of relations.

A record file holds {"format": FORMAT, "device": ..., "target": ..., "scenarios": {name: record}} and is
written with sorted keys and one-space indentation (`dumps`), so equal effects give byte-identical files.
Only numpy and the standard library are used: the reference model shares this encoding.
"""
from __future__ import annotations

import json
from bisect import bisect_right
from typing import Any

import numpy as np

FORMAT = "hcqsim-conformance-effects/1"


def encode_bytes(data) -> dict:
    """Bytes (a multiple of 4) -> {"size", "runs"}: greedy maximal arithmetic runs of little-endian u32 words."""
    raw = np.frombuffer(bytes(data), dtype=np.uint8)
    if len(raw) % 4:
        raise ValueError(f"effect buffers are whole 32-bit words; got {len(raw)} bytes")
    w = raw.view("<u4").astype(np.uint64)
    n = len(w)
    runs: list[list] = []
    if n == 0:
        return {"size": 0, "runs": runs}
    d = ((w[1:] + (1 << 32) - w[:-1]) % (1 << 32)).astype(np.uint64)
    # change points of d: d[k] != d[k-1]; a run from word p with step d[p] extends to the next change point
    changes = (np.flatnonzero(d[1:] != d[:-1]) + 1).tolist()
    p = 0
    while p < n:
        if p == n - 1:
            runs.append([1, f"0x{int(w[p]):08x}", 0])
            break
        step = int(d[p])
        k = bisect_right(changes, p)
        q = changes[k] if k < len(changes) else n - 1  # d[p..q-1] all equal: words p..q form the run
        runs.append([q - p + 1, f"0x{int(w[p]):08x}", step])
        p = q + 1
    return {"size": int(len(raw)), "runs": runs}


def encode_buffer(data, spec: dict) -> dict:
    """A buffer's record: its bytes, or (spec "record": "sorted") its 32-bit words in ascending order, for a
    buffer whose word order the hardware leaves open (atomics' return values) while the multiset is fixed."""
    if spec.get("record") == "sorted":
        data = np.sort(np.frombuffer(bytes(data), dtype="<u4")).astype("<u4").tobytes()
    return encode_bytes(data)


def decode_bytes(enc: dict) -> bytes:
    parts = [(int(start, 16) + step * np.arange(count, dtype=np.uint64)) % (1 << 32) for count, start, step in enc["runs"]]
    words = np.concatenate(parts).astype("<u4") if parts else np.zeros(0, "<u4")
    out = words.tobytes()
    if len(out) != enc["size"]:
        raise ValueError(f"runs give {len(out)} bytes, size says {enc['size']}")
    return out


def record_file(device: str, target: str, records: dict[str, dict]) -> dict:
    return {"format": FORMAT, "device": device, "target": target, "scenarios": records}


def dumps(obj: Any) -> str:
    """The canonical text: sorted keys, one-space indentation, a final newline."""
    return json.dumps(obj, sort_keys=True, indent=1) + "\n"


def load(path: str) -> dict:
    with open(path) as f:
        doc = json.load(f)
    if doc.get("format") != FORMAT:
        raise ValueError(f"{path}: not an effect record file of format {FORMAT} (got {doc.get('format')!r})")
    return doc


def _first_byte_difference(what: str, a: dict, b: dict) -> str | None:
    if a == b:
        return None
    x, y = decode_bytes(a), decode_bytes(b)
    if len(x) != len(y):
        return f"{what}: size {len(x)} expected, {len(y)} seen"
    i = int(np.flatnonzero(np.frombuffer(x, np.uint8) != np.frombuffer(y, np.uint8))[0])
    w = i & ~3
    return (f"{what} byte {i} (0x{i:x}): expected 0x{x[i]:02x}, seen 0x{y[i]:02x} "
            f"(word at {w}: expected 0x{int.from_bytes(x[w:w + 4], 'little'):08x}, "
            f"seen 0x{int.from_bytes(y[w:w + 4], 'little'):08x})")


def _values_difference(what: str, a: dict, b: dict) -> str | None:
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            return f"{what} {k}: expected {a.get(k)}, seen {b.get(k)}"
    return None


def _flat(d: dict, prefix: str = "") -> dict:
    """{"0": {"num_cp_queues": 8}} -> {"0.num_cp_queues": 8}: nested values named by their path."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def differences(expected: dict, seen: dict) -> list[str]:
    """Every difference between two records of one scenario, each named by the first differing byte or value."""
    out: list[str] = []
    for name in sorted(set(expected["buffers"]) | set(seen["buffers"])):
        a, b = expected["buffers"].get(name), seen["buffers"].get(name)
        if a is None or b is None:
            out.append(f"buffer {name}: {'missing' if b is None else 'unexpected'}")
        elif (d := _first_byte_difference(f"buffer {name}", a, b)):
            out.append(d)
    if (d := _values_difference("signal", expected["signals"], seen["signals"])):
        out.append(d)
    ea, sa = expected["checkpoints"], seen["checkpoints"]
    if [c["name"] for c in ea] != [c["name"] for c in sa]:
        out.append(f"checkpoints: expected {[c['name'] for c in ea]}, seen {[c['name'] for c in sa]}")
    else:
        for c, s in zip(ea, sa):
            for kind in ("events", "fault", "topology", "read_pointer"):
                if kind in c or kind in s:
                    a, b = _flat(c.get(kind, {})), _flat(s.get(kind, {}))
                    if (d := _values_difference(f"checkpoint {c['name']} {kind}", a, b)):
                        out.append(d)
            if "copyout" in c:
                if (d := _first_byte_difference(f"checkpoint {c['name']} copyout", c["copyout"], s.get("copyout", {}))):
                    out.append(d)
                continue
            if "buffers" not in c:
                continue
            for key in sorted(set(c["buffers"]) | set(s["buffers"])):
                if key not in c["buffers"] or key not in s["buffers"]:
                    out.append(f"checkpoint {c['name']} buffer {key}: missing on one side")
                elif (d := _first_byte_difference(f"checkpoint {c['name']} buffer {key}", c["buffers"][key],
                                                  s["buffers"][key])):
                    out.append(d)
            if (d := _values_difference(f"checkpoint {c['name']} signal", c["signals"], s["signals"])):
                out.append(d)
    for kind in ("monotonic", "orders"):
        if (d := _values_difference(f"timestamps {kind}", expected["timestamps"][kind], seen["timestamps"][kind])):
            out.append(d)
    return out


def compare_files(expected: dict, seen: dict) -> dict[str, list[str]]:
    """Scenario -> differences, for scenarios in both record files (one missing on either side is a difference)."""
    out = {}
    for name in sorted(set(expected["scenarios"]) | set(seen["scenarios"])):
        a, b = expected["scenarios"].get(name), seen["scenarios"].get(name)
        if a is None or b is None:
            out[name] = [f"scenario {'not recorded' if a is None else 'not run'}"]
        else:
            out[name] = differences(a, b)
    return out
