"""Packet layouts as data.

A `PacketFormat` is a table of named `Field`s (dword index + bit range, optionally an enum). The same
table drives the encoder (runtime builders, tests), the decoder (the engines) and the disassembler (fault
reports, traces), so a layout is written once. PM4 and SDMA modules declare their packets with it.

Bit ranges are inclusive `[hi:lo]` within dword `dw`; `hi` may exceed 31 for a field that continues into
the next dword (a 64-bit address split over two dwords is `Field("addr", 2, 63, 0)`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from .errors import DecodeError


@dataclass(frozen=True)
class Field:
    name: str
    dw: int
    hi: int
    lo: int
    enum: Mapping[int, str] | None = None
    default: int = 0
    strict: bool = False  # with enum: a value outside it is a reserved value -> DecodeError
    address: bool = False  # printed as an address (and canonicalised in traces)
    hint: bool = False  # has no effect on what the emulator does (cache hints, header bits): not decoded on
    #                     the execution fast path, still encoded, decoded and printed everywhere else
    doc: str = ""

    def __post_init__(self):  # derived once: encoders and decoders use them per packet
        object.__setattr__(self, "width", self.hi - self.lo + 1)
        object.__setattr__(self, "mask", (1 << (self.hi - self.lo + 1)) - 1)

    def name_of(self, value: int) -> str:
        if self.enum and value in self.enum:
            return f"{self.enum[value]}({value})"
        if self.address:
            return f"0x{value:x}"
        return f"0x{value:x}" if value > 9 else str(value)


def F(name: str, dw: int, hi: int, lo: int | None = None, **kw) -> Field:
    """Shorthand: F("count", 0, 29, 16) or F("valid", 3, 23) for a single bit."""
    return Field(name, dw, hi, hi if lo is None else lo, **kw)


@dataclass
class PacketFormat:
    """One packet: its name, identifying opcode(s), fixed size in dwords (None when variable) and fields.

    `payload` names a trailing list of raw dwords starting at dword `payload_dw` (WRITE_DATA's data,
    SET_SH_REG's values, NOP filler); its length comes from the header.
    """

    name: str
    opcode: int
    fields: tuple[Field, ...]
    size: int | None = None
    sub_op: int | None = None
    payload: str | None = None
    payload_dw: int = 0
    doc: str = ""
    # addresses split over several fields, each a tuple of (field name, the address bit its bit 0 holds): ACQUIRE_MEM's
    # COHER_BASE (address >> 8) and COHER_BASE_HI (from bit 40) are ((("coher_base", 8), ("coher_base_hi", 40)),).
    # Printed as the fields they are, canonicalised in traces as the one address they make.
    split_addresses: tuple[tuple[tuple[str, int], ...], ...] = ()

    def __post_init__(self):
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: duplicate field names")
        self.by_name = {f.name: f for f in self.fields}
        unknown = [n for parts in self.split_addresses for n, _ in parts if n not in self.by_name]
        if unknown:
            raise ValueError(f"{self.name}: split address parts {unknown} are not fields")
        self._strict = [f for f in self.fields if f.strict and f.enum is not None]
        # dwords every field needs; `fast_decoder` may only be given at least that many (decode_fast checks)
        self.min_dwords = max((f.dw + (2 if f.hi > 31 else 1) for f in self.fields), default=1)
        self._decode = self._compile_decoder(self.fields, checked=False)
        self.fast_decoder = self._compile_decoder([f for f in self.fields if not f.hint or f in self._strict],
                                                  checked=True)

    def _compile_decoder(self, fields, checked: bool, payload: bool = True):
        """Generate a decoder from the table: one expression per field, and (checked) the reserved-value tests
        of strict fields inline (decode is the engines' hot path)."""
        items = []
        for f in fields:
            word = f"d[{f.dw}]" if f.hi <= 31 else f"(d[{f.dw}] | d[{f.dw + 1}] << 32)"
            items.append(f"{f.name!r}: ({word} >> {f.lo}) & {f.mask:#x}")
        if self.payload and payload:
            items.append(f"{self.payload!r}: list(d[{self.payload_dw}:])")
        lines = ["def decode(d):", f"    out = {{{', '.join(items)}}}"]
        scope: dict = {"DecodeError": DecodeError}
        for i, f in enumerate(self._strict if checked else ()):
            scope[f"allowed{i}"] = frozenset(f.enum)
            lines.append(f"    v{i} = out[{f.name!r}]")
            lines.append(f"    if v{i} not in allowed{i}:")
            lines.append(f"        raise DecodeError(f'{self.name}: reserved value {{v{i}}} in field {f.name}')")
        lines.append("    return out")
        exec(compile("\n".join(lines) + "\n", f"<decoder {self.name}>", "exec"), scope)
        return scope["decode"]

    def control_key(self, names: Iterable[str]) -> Callable[[Sequence[int]], int]:
        """A function of a packet's dwords keeping only the bits of the fields `names`, as one int (each dword's
        masked bits at 32 * its index past the first such dword): packets with one key select the same behaviour of a handler that reads
        only those fields. `key(self.encode(**values))` is the key of given field values."""
        masks: dict[int, int] = {}
        for f in (self.by_name[n] for n in names):
            bits = f.mask << f.lo
            masks[f.dw] = masks.get(f.dw, 0) | bits & 0xFFFFFFFF
            if f.hi > 31:
                masks[f.dw + 1] = masks.get(f.dw + 1, 0) | bits >> 32
        first = min(masks, default=0)
        terms = " | ".join(f"(d[{dw}] & {m:#x}) << {32 * (dw - first)}" for dw, m in sorted(masks.items()))
        return eval(compile(f"lambda d: {terms or 0}", f"<key {self.name}>", "eval"))

    def subset_decoder(self, names: Iterable[str]) -> Callable[[Sequence[int]], dict[str, int]]:
        """A decoder of only the fields `names` (the payload among them, if named), unchecked: the values a fast
        path acts on (the caller has already matched the packet's control fields)."""
        names = list(names)
        return self._compile_decoder([self.by_name[n] for n in names if n != self.payload], checked=False,
                                     payload=self.payload in names)

    # -- decode ------------------------------------------------------------------------------------

    def decode(self, dws, *, check: bool = True) -> dict[str, int]:
        """Field values of one packet from its dwords (`dws[0]` is the header)."""
        if len(dws) < self.min_dwords:
            missing = next(f for f in self.fields if f.dw + (2 if f.hi > 31 else 1) > len(dws))
            raise DecodeError(f"{self.name}: packet too short for field {missing.name} (dword {missing.dw})")
        out = self._decode(dws)
        if check:
            self._check(out)
        return out

    def decode_fast(self, dws) -> dict[str, int]:
        """What an engine needs to act: every field except hints, reserved values rejected."""
        if len(dws) < self.min_dwords:
            return self.decode(dws)  # raises the descriptive error
        return self.fast_decoder(dws)

    def _check(self, out: dict[str, int]) -> None:
        for f in self._strict:
            if out[f.name] not in f.enum:
                raise DecodeError(f"{self.name}: reserved value {out[f.name]} in field {f.name}")

    # -- encode ------------------------------------------------------------------------------------

    def encode(self, **values) -> list[int]:
        """Dwords of the packet. Unnamed fields take their default; the caller fills header counts."""
        payload = values.pop(self.payload, ()) if self.payload else ()
        encoders = self.__dict__.setdefault("_encoders", {})
        names = tuple(values)
        enc = encoders.get(names)
        if enc is None:
            enc = encoders[names] = self._compile_encoder(names)
        dws = enc(*values.values())
        if dws is None:  # a value that is not a plain in-range int: converted, or refused with the reason
            dws = self._encode_fields(values)
        if payload:
            dws += [0] * max(0, self.payload_dw + len(payload) - len(dws))
            for i, d in enumerate(payload):
                dws[self.payload_dw + i] = d & 0xFFFFFFFF
        return dws

    def _encode_fields(self, values: dict) -> list[int]:
        """The packet's fixed dwords with `values` set, each checked (and an enum name or an int-like converted)."""
        dws = self._defaults()
        by_name = self.by_name
        for name, v in values.items():
            f = by_name.get(name)
            if f is None:
                raise TypeError(f"{self.name} has no field {name!r}")
            if type(v) is not int:
                v = _enum_value(f, v) if isinstance(v, str) and f.enum else int(v)
            if not 0 <= v <= f.mask:
                raise ValueError(f"{self.name}.{f.name} = {v:#x} does not fit in {f.width} bits")
            field_bits, bits = f.mask << f.lo, v << f.lo
            dws[f.dw] = (dws[f.dw] & ~field_bits & 0xFFFFFFFF) | (bits & 0xFFFFFFFF)
            if f.hi > 31:
                dws[f.dw + 1] = (dws[f.dw + 1] & ~(field_bits >> 32)) | (bits >> 32)
        return dws

    def _compile_encoder(self, names: tuple[str, ...]):
        """Generate what `_encode_fields` does for one set of field names (in that order), for plain in-range
        ints only: it answers None for anything else, and `_encode_fields` then converts or refuses. Runtimes
        build the same few packet shapes over and over (signals, waits, copies), so this is their hot path."""
        if any(n not in self.by_name for n in names):
            return lambda *vs: None
        self._defaults()
        checks, sets = [], []
        for i, n in enumerate(names):
            f = self.by_name[n]
            checks.append(f"type(v{i}) is not int or not 0 <= v{i} <= {f.mask:#x}")
            keep = ~(f.mask << f.lo) & 0xFFFFFFFF
            sets.append(f"    d[{f.dw}] = (d[{f.dw}] & {keep:#x}) | ((v{i} << {f.lo}) & 0xFFFFFFFF)")
            if f.hi > 31:
                keep_hi = ~((f.mask << f.lo) >> 32) & 0xFFFFFFFF
                sets.append(f"    d[{f.dw + 1}] = (d[{f.dw + 1}] & {keep_hi:#x}) | ((v{i} << {f.lo}) >> 32)")
        args = ", ".join(f"v{i}" for i in range(len(names)))
        lines = [f"def encode({args}):"]
        if checks:
            lines.append(f"    if {' or '.join(checks)}:")
            lines.append("        return None")
        lines += ["    d = base[:]", *sets, "    return d"]
        scope: dict = {"base": self._base}
        exec(compile("\n".join(lines) + "\n", f"<encoder {self.name}>", "exec"), scope)
        return scope["encode"]

    def _defaults(self) -> list[int]:
        """The packet with every field at its default (computed once)."""
        base = self.__dict__.get("_base")
        if base is None:
            n = self.size if self.size is not None else max(self.min_dwords, self.payload_dw if self.payload else 0)
            base = [0] * n
            for f in self.fields:
                bits = f.default << f.lo
                base[f.dw] |= bits & 0xFFFFFFFF
                if f.hi > 31:
                    base[f.dw + 1] |= bits >> 32
            self._base, self._base_len = base, n
        return list(base)

    # -- print -------------------------------------------------------------------------------------

    def format(self, values: Mapping[str, int], *, canon: Callable[[int], int] | None = None,
               skip: Iterable[str] = ()) -> str:
        """UMR-style one-liner: NAME field=value ... (enum names shown, addresses in hex)."""
        parts = [self.name]
        skip = set(skip)
        if canon is not None and self.split_addresses:
            values = canonical_parts(values, self.split_addresses, canon, {f.name: f.mask for f in self.fields})
        for f in self.fields:
            if f.name in skip or f.name not in values:
                continue
            v = values[f.name]
            if f.address and canon is not None:
                v = canon(v)
            parts.append(f"{f.name}={f.name_of(v)}")
        if self.payload and values.get(self.payload):
            data = values[self.payload]
            shown = " ".join(f"0x{d:08x}" for d in data[:8])
            more = f" ...(+{len(data) - 8})" if len(data) > 8 else ""
            parts.append(f"{self.payload}=[{shown}{more}]")
        return " ".join(parts)


def canonical_parts(values: Mapping[str, int], split: Iterable[tuple[tuple[str, int], ...]],
                    canon: Callable[[int], int], masks: Mapping[str, int]) -> Mapping[str, int]:
    """`values` with each split address (parts (name, shift)) whose parts are all present rewritten through
    `canon` as one address and split back into its parts (bits outside each part's mask are kept)."""
    out = None
    for parts in split:
        if not all(name in values for name, _ in parts):
            continue
        addr = sum((values[name] & masks[name]) << shift for name, shift in parts)
        moved = canon(addr)
        if moved == addr:
            continue
        out = dict(values) if out is None else out
        for name, shift in parts:
            mask = masks[name]
            out[name] = (values[name] & ~mask) | ((moved >> shift) & mask)
    return values if out is None else out


def _enum_value(f: Field, name: str) -> int:
    for k, v in f.enum.items():
        if v == name:
            return k
    raise ValueError(f"field {f.name} has no value named {name!r}")
