"""`hcqsim disasm`: PM4 / SDMA command streams, raw shader ISA and AMDGPU code objects, as text or JSON.

    hcqsim disasm pm4|sdma|isa WORDS...          32-bit hex words on the command line (`c0031000 0x10,0x20`)
    hcqsim disasm pm4|sdma|isa --file F          a binary file of little-endian dwords (`--hex`: text of hex words)
    hcqsim disasm pm4|sdma|isa --file -          the same from stdin; piped text with no WORDS is read as hex words
    hcqsim disasm code-object --file k.co        every kernel of an AMDGPU ELF (`--file -`: the ELF on stdin)
    options: --family gfx11|gfx9 (PM4), --sdma-version sdma6|sdma5|sdma4, --arch gfx1100|gfx942 (ISA),
             --no-encodings (ISA/code objects: no offsets and raw words), --json

Exit status: 0 listed; 1 the input cannot be read or disassembled (a missing or unreadable file, a token that is
not a hex word or is wider than 32 bits, a file that is not an AMDGPU code object); 2 a usage error (no input, an
unknown SDMA version, words given to code-object, `--version` with a value); 141 the reader of stdout went away
(`... | head -3`), as for a program stopped by SIGPIPE. Every error is one line on stderr. What the bytes hold is
never an error: a packet or instruction that cannot be decoded is a `.long` line saying why, and a truncated
packet says so. `--version` prints hcqsim's version; the SDMA version was `--version` before and is now
`--sdma-version` (one option, one meaning: `--version sdma6` is refused with a pointer to the new name).

cli.py builds the subparser and calls `add_arguments` / `run`; harness layer (it may import anything).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

EXIT_OK = 0
EXIT_INPUT = 1
EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a writer whose reader closed the pipe

# e_flags & 0xff of an AMDGPU code object -> target (EF_AMDGPU_MACH_AMDGCN_*)
MACH_TARGETS = {0x41: "gfx1100", 0x4C: "gfx942"}
KINDS = ("pm4", "sdma", "isa", "code-object")


class InputError(Exception):
    """The input cannot be read or disassembled (exit 1)."""


class UsageError(Exception):
    """The command line asks for something impossible (exit 2)."""


class _VersionAction(argparse.Action):
    """`--version` prints hcqsim's version; given a value it is the old SDMA-version spelling, refused."""

    def __call__(self, parser, namespace, values, option_string=None):
        if values is not None:
            _fail_usage(f"--version takes no value (it prints hcqsim's version); the SDMA version is "
                        f"--sdma-version {values}")
        from . import __version__
        print(f"hcqsim {__version__}")
        parser.exit(EXIT_OK)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `disasm` subcommand's arguments, on the subparser cli.py made for it."""
    parser.add_argument("kind", choices=KINDS,
                        help="what the bytes are: PM4 or SDMA packets, shader ISA, a code object")
    parser.add_argument("words", nargs="*", help="32-bit hex words (pm4, sdma, isa), e.g. c0031000 or 0xc0031000")
    parser.add_argument("--file", help="a binary file of little-endian dwords (or a code object); '-' reads stdin")
    parser.add_argument("--hex", action="store_true", help="--file holds hex words as text")
    parser.add_argument("--family", default="gfx11", choices=["gfx11", "gfx9"], help="PM4 packet family")
    parser.add_argument("--sdma-version", dest="sdma_version", default="sdma6", metavar="VERSION",
                        help="SDMA packet version: sdma6 (default), sdma5 or sdma4")
    parser.add_argument("--arch", choices=["gfx1100", "gfx942"],
                        help="ISA architecture (default: gfx1100, or the code object's)")
    parser.add_argument("--encodings", action=argparse.BooleanOptionalAction, default=True,
                        help="ISA and code objects: show each instruction's offset and raw words (default: on)")
    parser.add_argument("--json", action="store_true", help="print the listing as JSON")
    parser.add_argument("--version", nargs="?", action=_VersionAction, default=argparse.SUPPRESS,
                        help="print hcqsim's version and exit (the SDMA version is --sdma-version)")


def run(args) -> int:
    """List what `args` names; returns the exit status (usage errors raise SystemExit(2), as argparse's do)."""
    try:
        text = _listing(args)
    except UsageError as e:
        _fail_usage(str(e))
    except InputError as e:
        print(f"hcqsim disasm: {e}", file=sys.stderr)
        return EXIT_INPUT
    return _write(text)


def _fail_usage(message: str):
    print(f"hcqsim disasm: {message}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def _write(text: str) -> int:
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader stopped early. Point stdout at /dev/null so the interpreter's final flush stays quiet.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_BROKEN_PIPE
    return EXIT_OK


# ---------------------------------------------------------------------------------------------------
# input


def _read_file(path: str) -> bytes:
    if path == "-":
        return _read_stdin_bytes()
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from None


def _read_stdin_bytes() -> bytes:
    stream = getattr(sys.stdin, "buffer", None)
    try:
        return stream.read() if stream is not None else sys.stdin.read().encode()
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read stdin: {e}") from None


def _piped_stdin() -> str | None:
    """Text piped to stdin when no words and no file were given; None for a terminal or no stdin."""
    stdin = sys.stdin
    try:
        if stdin is None or stdin.isatty() or not stdin.readable():
            return None
        return stdin.read()
    except (OSError, ValueError):
        return None


def hex_words(tokens, source: str = "the command line") -> list[int]:
    """32-bit words from hex tokens (`c0031000`, `0xc0031000`, comma-separated); InputError names a token that is
    not hex or does not fit in 32 bits (never masked)."""
    words = []
    for token in tokens:
        for part in token.replace(",", " ").split():
            try:
                value = int(part, 16)
            except ValueError:
                raise InputError(f"{part!r} (word {len(words) + 1} of {source}) is not a hex word") from None
            if value < 0:
                raise InputError(f"{part!r} (word {len(words) + 1} of {source}) is negative; words are unsigned "
                                 f"32-bit hex") from None
            if value > 0xFFFFFFFF:
                raise InputError(f"{part!r} (word {len(words) + 1} of {source}) is wider than 32 bits; "
                                 f"split it into dwords") from None
            words.append(value)
    return words


def _hex_text(data: bytes, source: str) -> list[int]:
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as e:
        raise InputError(f"{source} is not text of hex words (byte {e.start} is 0x{data[e.start]:02x}); "
                         f"without --hex it is read as binary dwords") from None
    return hex_words(text.split(), source)


def _words_to_bytes(words: list[int]) -> bytes:
    return b"".join(w.to_bytes(4, "little") for w in words)


def input_bytes(args) -> bytes:
    """The bytes to disassemble: WORDS, --file (binary, or hex text with --hex; '-' is stdin) or piped hex text."""
    if args.words and args.file:
        raise UsageError("give hex words or --file, not both")
    if args.file:
        data = _read_file(args.file)
        source = "stdin" if args.file == "-" else args.file
        if not data:
            raise InputError(f"nothing to disassemble: {source} is empty")
        return _words_to_bytes(_hex_text(data, source)) if args.hex else data
    if args.words:
        return _words_to_bytes(hex_words(args.words))
    piped = _piped_stdin()
    if piped is None or not piped.strip():
        raise UsageError("nothing to disassemble: give hex words (e.g. c0031000 ...), --file FILE, or pipe hex "
                         "words to stdin")
    return _words_to_bytes(hex_words(piped.split(), "stdin"))


# ---------------------------------------------------------------------------------------------------
# listings


def _listing(args) -> str:
    if args.kind == "code-object":
        return _code_object(args)
    data = input_bytes(args)
    if args.kind in ("pm4", "sdma"):
        return _packets(args, data)
    from .shader.disasm import listing, objdump_line
    arch = args.arch or "gfx1100"
    lines = listing(data, arch)
    if args.json:
        return _json({"kind": "isa", "arch": arch, "instructions": [ln.as_json() for ln in lines]})
    return "\n".join(objdump_line(ln) if args.encodings else ln.text for ln in lines)


def _packets(args, data: bytes) -> str:
    if args.kind == "pm4":
        from . import pm4
        packets, rest = pm4.decode_stream(data, args.family)
        head = {"kind": "pm4", "family": args.family}
        trailing = pm4.trailing_line
    else:
        from . import pm4, sdma
        try:
            version = sdma.version_name(args.sdma_version)
        except ValueError as e:
            raise UsageError(str(e)) from None
        packets, rest = sdma.decode_stream(data, version)
        head = {"kind": "sdma", "version": version}
        trailing = pm4.trailing_line
    if args.json:
        return _json({**head, "packets": [p.as_json() for p in packets], "trailing_bytes": list(rest)})
    lines = [f"{p.offset:06x}: {p.text}" for p in packets]
    if rest:
        lines.append(trailing(len(data) - len(rest), rest))
    return "\n".join(lines)


def _json(doc) -> str:
    return json.dumps(doc, indent=1, sort_keys=True)


def _code_object(args) -> str:
    from .codeobject import CodeObject
    from .shader.disasm import listing, objdump_line
    if args.words:
        raise UsageError("code-object reads an ELF file: --file FILE (or --file - for stdin), not words")
    if not args.file:
        raise UsageError("code-object needs --file FILE (an AMDGPU ELF; - reads stdin)")
    source = "stdin" if args.file == "-" else args.file
    try:
        co = CodeObject(_read_file(args.file))
    except ValueError as e:
        raise InputError(f"{source}: {e}") from None
    arch = args.arch or MACH_TARGETS.get(co.mach)
    if arch is None:
        raise InputError(f"{source}: unknown EF_AMDGPU_MACH 0x{co.mach:x}; give --arch")
    kernels = [(k, listing(k.code, arch)) for k in co.kernels]
    if args.json:
        return _json({"kind": "code-object", "arch": arch, "kernels": [
            {"name": k.name, "code_offset": k.code_offset, "size": len(k.code),
             "instructions": [ln.as_json(k.code_offset) for ln in lines]} for k, lines in kernels]})
    out = []
    for k, lines in kernels:
        out.append(f"{k.name}:  ; {arch}, code at image offset 0x{k.code_offset:x}, {len(k.code)} bytes")
        out += [objdump_line(ln, k.code_offset) if args.encodings else ln.text for ln in lines]
    return "\n".join(out)
