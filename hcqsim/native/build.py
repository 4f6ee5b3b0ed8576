"""Building the interposer (interposer.c) at first use: the system C compiler, else the ziglang wheel's
`zig cc`; the result is cached by source hash under $HCQSIM_CACHE/native (no binary lives in the repository)."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

SOURCE = Path(__file__).with_name("interposer.c")
CFLAGS = ["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-fvisibility=hidden",
          "-fno-delete-null-pointer-checks"]  # libc headers declare path arguments nonnull; callers may pass NULL
LIBS = ["-ldl", "-lpthread"]


class BuildError(RuntimeError):
    """No C compiler could build the interposer (the message has the compiler's output)."""


def cache_dir() -> Path:
    """$HCQSIM_CACHE (default ~/.cache/hcqsim) / name; `off` still needs a place for the binary: a temp dir."""
    root = os.environ.get("HCQSIM_CACHE", "")
    if root == "off":
        import tempfile
        return Path(tempfile.gettempdir()) / f"hcqsim-{os.getuid()}"
    return Path(root) if root else Path.home() / ".cache" / "hcqsim"


def compilers() -> list[list[str]]:
    """C compilers to try, in order: $CC, cc, gcc, then `python -m ziglang cc`."""
    found = []
    for name in (os.environ.get("CC"), "cc", "gcc"):
        if name and shutil.which(name):
            found.append([name])
    found.append([sys.executable, "-m", "ziglang", "cc"])
    return found


def interposer_path() -> Path:
    """The built interposer for the current source, building it if needed."""
    return _build(SOURCE, "hcqsim-interposer", "so", CFLAGS, LIBS)


def program_path(source: str | os.PathLike) -> Path:
    """A native test program (one C file, e.g. tests/native/hip_check.c) built as an executable, cached."""
    source = Path(source)
    return _build(source, source.stem, "bin", ["-O1", "-Wall"], ["-ldl"])


def _build(source: Path, stem: str, suffix: str, flags: list[str], libs: list[str]) -> Path:
    text = source.read_bytes()
    digest = hashlib.sha256(text + " ".join(flags + libs).encode()).hexdigest()[:16]
    out = cache_dir() / "native" / f"{stem}-{digest}.{suffix}"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    errors = []
    for cc in compilers():
        cmd = [*cc, *flags, "-o", str(tmp), str(source), *libs]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as e:
            errors.append(f"{' '.join(cc)}: {e}")
            continue
        if done.returncode == 0:
            os.replace(tmp, out)  # atomic: a concurrent build of the same source wins either way
            return out
        errors.append(f"{' '.join(cc)}: exit {done.returncode}: {done.stderr.strip()[-2000:]}")
    import importlib.util
    hint = "" if importlib.util.find_spec("ziglang") else (
        "\n(no C compiler worked and the ziglang wheel is absent: install cc/gcc, or hcqsim's isa extra: "
        "pip install 'hcqsim[isa]', whose `zig cc` builds it)")
    raise BuildError(f"cannot build {source.name}:\n" + "\n".join(errors) + hint)
