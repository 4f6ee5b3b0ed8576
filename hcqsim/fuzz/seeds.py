"""Replay seeds: a fuzz case with its interleaving and mutations, or a user test's interleaving, as a short string."""
from __future__ import annotations

import base64
import json
import zlib

from .cases import BUFFER_BYTES, FuzzCase
from .interleavings import Interleaving


def _encode(doc: dict) -> str:
    return base64.urlsafe_b64encode(zlib.compress(json.dumps(doc).encode(), 9)).decode()


def _decode(seed: str) -> dict:
    try:
        return json.loads(zlib.decompress(base64.urlsafe_b64decode(seed.encode())))
    except (ValueError, zlib.error) as e:
        raise ValueError(f"not an hcqsim replay seed: {seed[:40]!r}... ({e})") from None


def encode_seed(case: FuzzCase, choices, mutations, target: str, host_turns: bool = False,
                machine: int | None = None) -> str:
    doc = {"kind": "schedule", "devices": case.devices, "ops": case.ops, "prelude": case.prelude,
           "batch_limit": case.batch_limit, "params": case.params, "runs": case.runs,
           "buffer_bytes": case.buffer_bytes,
           "choices": [list(c) for c in choices], "priority": getattr(choices, "priority", 0),
           "mutations": list(mutations), "target": target, "host_turns": host_turns,
           "machine": machine or case.devices}  # the GPUs of the machine it ran on (ready lists, GPU order)
    return _encode(doc)


def encode_interleaving_seed(choices) -> str:
    """A seed for a user test's interleaving (`replay(seed, test)`)."""
    return _encode({"kind": "interleaving", "choices": [list(c) for c in choices],
                    "priority": getattr(choices, "priority", 0)})


def decode_seed(seed: str) -> tuple[FuzzCase, list, tuple, str]:
    doc = _decode(seed)
    if doc.get("kind", "schedule") != "schedule":
        raise ValueError("this seed is a user test's interleaving: replay(seed, test) runs it")
    tup = lambda ops: tuple(tuple(o) for o in ops)  # noqa: E731
    prelude = tuple((k, tuple(op)) for k, op in doc["prelude"]) if doc["prelude"] and \
        isinstance(doc["prelude"][0][0], int) else tuple((0, tuple(op)) for op in doc["prelude"])
    runs = tuple((tuple(r), tuple(tuple(p) for p in ps)) for r, ps in doc.get("runs", [[[], []]]))
    case = FuzzCase(doc["devices"], tup(doc["ops"]), prelude, doc.get("batch_limit", 32),
                    tuple(tuple(p) for p in doc.get("params", ())), runs, doc.get("buffer_bytes", BUFFER_BYTES))
    return case, Interleaving(doc["choices"], doc.get("priority", 0)), tuple(doc["mutations"]), doc["target"]
