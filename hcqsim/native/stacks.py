"""Pinned native ROCm userspace stacks, fetched from the package registries and cached.

A stack is a list of Debian packages at exact versions with their sha256 (NATIVE_ROCM_FACTS section 1). `fetch`
downloads them with `apt-get download` through a private apt configuration (its own sources list, package
lists and cache under the cache directory: the system's apt sources and state are never read or changed),
checks every checksum, and unpacks them with `dpkg-deb -x` into `<cache>/rocm/<stack>/root` (no install).
Programs run through the stack's own dynamic loader (`ld-linux-x86-64.so.2 --library-path ...`), because
Debian 13's libraries need a newer glibc than the host's.

A wheel stack (`WheelStack`: the PyPI `pytorch-triton-rocm` wheel, which carries ROCr 5.4 with its thunk, HIP 5.4
and comgr for manylinux2014) is fetched with `pip download --no-deps` at a pinned version and sha256, and its ROCm
libraries are unpacked into `<cache>/rocm/<stack>/root/lib`; its programs run through the host's own loader.

A first fetch says on stderr what it downloads and how much (the packages' pinned sizes), then the bytes so far
every 2 s and the total and time at the end (`DownloadProgress`); a cached stack says nothing.

A stack that cannot be fetched raises `StackUnavailable` with a one-line reason (tests fail with it; they
never skip silently).

    python -m hcqsim.native.stacks fetch [debian13|debian13-hip|pypi-rocm54]      # prints the stack's root
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .build import cache_dir

DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
MULTIARCH = "usr/lib/x86_64-linux-gnu"


class StackUnavailable(RuntimeError):
    """The stack could not be fetched or unpacked (one line: why)."""


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    sha256: str
    arch: str = "amd64"
    size: int = 0  # bytes of the .deb (what the download progress counts against)

    @property
    def filename(self) -> str:
        return f"{self.name}_{self.version.replace(':', '%3a')}_{self.arch}.deb"


@dataclass(frozen=True)
class Stack:
    name: str
    suite: str  # the Debian suite the packages come from
    packages: tuple[Package, ...]
    description: str

    @property
    def key(self) -> str:
        """Changes whenever a pin changes, so a cached root always matches the pins."""
        text = "\n".join(f"{p.name} {p.version} {p.sha256}" for p in self.packages)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


# Debian 13 (trixie): ROCr 6.1.2, thunk 6.2.4, rocminfo 6.1.2; knows gfx1100 and gfx942. glibc 2.41 rides along
# (the libraries need >= 2.38) and runs the programs through its own ld.so.
DEBIAN13 = Stack("debian13", "trixie", (
    Package("rocminfo", "6.1.2-2", "db9f196d4ca4a523132a36805668ef82ab76cc2b850e748b3aa04e67465aa90e", size=25256),
    Package("libhsa-runtime64-1", "6.1.2-3", "5633b84b2f6527b19d70db064cfbbaf37b426f3a1a826316de115c8acb8c196d",
            size=535368),
    Package("libhsakmt1", "6.2.4+ds-1", "1fd49134be5a29e0b978d230ffda6b419421e1237dac77e86131dba9f2037147", size=61084),
    Package("libdrm2", "2.4.124-2", "fe2276901c7cd7b8079de63072d37fe1cbeb4eb001a3bc1f1d662ad89aa0890e", size=39032),
    Package("libdrm-amdgpu1", "2.4.124-2", "c1d97a5e32e2bc68e833b8abeae026b6306198e87ee4396a7ffecd4779caefbf",
            size=22632),
    Package("libdrm-common", "2.4.124-2", "9a8a6c65c165e9964f106fb4ac710959b5d33e0790227e3ab6b27c4742d1254a", "all",
            size=8288),
    Package("libnuma1", "2.0.19-1", "e578583f73f8208564e5035b18aa729c441fc7ecb389c666923552e123f4d655", size=22212),
    Package("libelf1t64", "0.192-4", "94497b7e17b6f574a0605b380d454e20d3f01a9c63b70c2a2263f679d30053e1", size=189408),
    Package("libzstd1", "1.5.7+dfsg-1", "2f6a2aeacfc925eba8b00ac9139bc4bfccf8cacb09eb93de067074b26948eef9",
            size=303836),
    Package("zlib1g", "1:1.3.dfsg+really1.3.1-1+deb13u1",
            "8c27c342230503b73dfde629642c3b352e87b554e06d60cf58772f236a305ceb", size=88720),
    Package("libc6", "2.41-12+deb13u5", "b59b0625cd1a791375d40dab23a4d5d3d0641e3d0a773501becdc3725b7f99cf",
            size=2850108),
    Package("libgcc-s1", "14.2.0-19", "3c71917b490d1a17aed43196a2787a256ecf060526cdb20216a74bedc061b150", size=72772),
    Package("libstdc++6", "14.2.0-19", "ab1fa05837aa7a92aae748fd07a18a35f7d18bb4a71c4724fe2bbf0e32089de0", size=713628),
), "Debian 13: rocminfo 6.1.2, ROCr 6.1.2, libhsakmt 6.2.4 (gfx1100, gfx942)")

# ... and HIP 5.7.1 over the same ROCr, with comgr (code-object metadata) and the LLVM 17 it links.
DEBIAN13_HIP = Stack("debian13-hip", "trixie", DEBIAN13.packages + (
    Package("libamdhip64-5", "5.7.1-6+deb13u1", "a60c313b59c09d776190a6e70b13337992240227f365ce4b91bb476d47a776d7",
            size=8923692),
    Package("libamd-comgr2", "6.0+git20231212.4510c28+dfsg-3+b2",
            "e6de3c9c6b1fa5e6c87882d094484fe0ad0560c61413abd0d28582c4a40de460", size=13040856),
    Package("libllvm17t64", "1:17.0.6-22+b2", "7a17e701bac905cc71df20abc674b4ee1b08af99b43d4c153628f23c907b8ee2",
            size=23642748),
    Package("libedit2", "3.1-20250104-1", "b002ea172b9c1e34a67bc497c523c67bb74c3f0a4e98113cb083990a1f1d3bfe",
            size=93832),
    Package("libffi8", "3.4.8-2", "0ebdc340de33333639c3c63874cd4b15ac2e83dfa1ef3053b7eefaf4919f4f68", size=24144),
    Package("libtinfo6", "6.5+20250216-2", "8b9f6a7983e9418564e48a627518de4c03917b56efe68d7f3e93bd8fffa1cc10",
            size=348380),
    Package("libxml2", "2.12.7+dfsg+really2.9.14-2.1+deb13u3",
            "e0c6b63ce4602a036a526f60fe5e6c1586710688058d98fc1001b9b3147b7efd", size=699724),
    Package("libicu76", "76.1-4", "c1bf762996de9ecba9b9d871e4928a8090f023a3e9e7fa3240b3d90f892a01dc", size=9722072),
    Package("liblzma5", "5.8.1-1+deb13u2", "b38acab30f295bf1066a6632e31cbd0a1980f2924b38040cda131d5dea5384ec",
            size=309696),
    Package("libz3-4", "4.13.3-1", "71383373523ef62d47eccf660cf6535c3febcbb3f88e54cb7a43124014b57359", size=8560036),
    Package("libbsd0", "0.12.2-2", "e5a85986fa6bec3307ab1bc860736b478b331882bc45e17675a7bdf88eecb43a", size=130968),
    Package("libmd0", "1.1.0-2+b1", "7244ec3839b61fac0c1884fe08aaa040f26e8f1f35f1f5d3482eacefd30d1b44", size=36272),
), "Debian 13: HIP 5.7.1, comgr 6.0, ROCr 6.1.2, libhsakmt 6.2.4 (gfx1100, gfx942)")

@dataclass(frozen=True)
class WheelStack:
    """ROCm libraries inside a Python wheel: `members` is the wheel's directory of shared libraries."""

    name: str
    project: str
    version: str
    filename: str
    sha256: str
    members: str
    description: str
    size: int | None = None  # bytes of the wheel, where known (the download progress counts against it)

    @property
    def key(self) -> str:
        return hashlib.sha256(f"{self.project} {self.version} {self.sha256} {self.members}".encode()).hexdigest()[:12]


# PyPI: ROCr 5.4 (thunk built in), HIP 5.4.2, comgr, libdrm, for manylinux2014 (runs on the host's glibc); knows
# gfx1100 but not gfx942 (NATIVE_ROCM_FACTS section 1). Its 5.x thunk sizes CWSR itself: run with kernel 6.11 rules.
PYPI_ROCM54 = WheelStack(
    "pypi-rocm54", "pytorch-triton-rocm", "2.1.0",
    "pytorch_triton_rocm-2.1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    "ec63623c16eebe356d40460a09374a2546591dd2b0cb2122622111fc4d0f7f25", "triton/third_party/rocm/lib/",
    "PyPI pytorch-triton-rocm 2.1.0: ROCr 5.4, HIP 5.4.2, comgr (gfx1100)")

STACKS = {s.name: s for s in (DEBIAN13, DEBIAN13_HIP, PYPI_ROCM54)}
HOST_LOADER = Path("/lib64/ld-linux-x86-64.so.2")


def stack_dir(stack: "Stack | WheelStack") -> Path:
    return cache_dir() / "rocm" / f"{stack.name}-{stack.key}"


class Unpacked:
    """A fetched stack on disk: where its programs, libraries and loader are."""

    def __init__(self, stack: "Stack | WheelStack", root: Path):
        self.stack, self.root = stack, root

    @property
    def loader(self) -> Path:
        """Debian 13's own loader (its libraries need glibc >= 2.38); the host's for a manylinux wheel."""
        return HOST_LOADER if isinstance(self.stack, WheelStack) else self.root / MULTIARCH / "ld-linux-x86-64.so.2"

    @property
    def library_path(self) -> str:
        if isinstance(self.stack, WheelStack):  # the wheel's libraries first, then the host's
            return os.pathsep.join([str(self.root / "lib"), "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"])
        return os.pathsep.join(str(self.root / d) for d in (MULTIARCH, "usr/lib", "lib"))

    def program(self, name: str) -> Path | None:
        """`name` among the stack's programs (usr/bin), else None."""
        p = self.root / "usr/bin" / name
        return p if p.is_file() else None

    def redirects(self) -> list[tuple[str, str]]:
        """Data paths compiled into the stack's libraries, pointed at the unpacked copies."""
        if isinstance(self.stack, WheelStack):
            return []
        return [("/usr/share/libdrm", str(self.root / "usr/share/libdrm"))]


def _apt_options(work: Path, suite: str) -> list[str]:
    sources = work / "sources"
    sources.mkdir(parents=True, exist_ok=True)
    (sources / f"{suite}.sources").write_text(
        f"Types: deb\nURIs: http://deb.debian.org/debian\nSuites: {suite}\nComponents: main\n"
        f"Signed-By: {DEBIAN_KEYRING}\n")
    for d in ("lists/partial", "cache/archives/partial"):
        (work / d).mkdir(parents=True, exist_ok=True)
    return ["-o", "Dir::Etc::SourceList=/dev/null", "-o", f"Dir::Etc::SourceParts={sources}",
            "-o", f"Dir::State::Lists={work / 'lists'}", "-o", f"Dir::Cache={work / 'cache'}",
            "-o", "Dir::State::status=/dev/null", "-o", "APT::Architecture=amd64",
            "-o", "APT::Sandbox::User=root", "-q"]


def _run(cmd: list[str], cwd: Path, what: str) -> None:
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise StackUnavailable(f"{what}: {e}") from None
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise StackUnavailable(f"{what}: exit {done.returncode}: {last[0]}")


def megabytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


class DownloadProgress:
    """Download progress on stderr while a fetch command runs: a line saying what and how much, a line every
    `every` seconds with the bytes so far (the files in `watch`, counted as they grow), and a last line with the
    total and the time. `total` is None where the size is not known beforehand (a package index)."""

    def __init__(self, what: str, watch: list[Path], total: int | None, out=None, every: float = 2.0):
        self.what, self.watch, self.total, self.every = what, watch, total, every
        self.out = out if out is not None else sys.stderr
        self._base = self._bytes()
        self._stop = None

    def _bytes(self) -> int:
        n = 0
        for d in self.watch:
            try:
                entries = list(os.scandir(d))
            except OSError:
                continue
            for e in entries:
                try:
                    if e.is_file(follow_symlinks=False):
                        n += e.stat(follow_symlinks=False).st_size
                    elif e.is_dir(follow_symlinks=False) and e.name == "partial":
                        n += sum(f.stat().st_size for f in os.scandir(e.path) if f.is_file(follow_symlinks=False))
                except OSError:
                    pass
        return n

    def done(self) -> int:
        return max(0, self._bytes() - self._base)

    def _line(self, text: str) -> None:
        print(f"hcqsim: {self.what}: {text}", file=self.out, flush=True)

    def _report(self) -> None:
        got = self.done()
        if self.total:
            self._line(f"{megabytes(got)} of {megabytes(self.total)} ({min(100, 100 * got // self.total)}%)")
        else:
            self._line(f"{megabytes(got)} so far")

    def __enter__(self) -> "DownloadProgress":
        import threading
        import time
        self._start = time.monotonic()
        self._line(f"downloading {megabytes(self.total) if self.total else '(size not known beforehand)'}")
        self._stop = threading.Event()

        def tick():
            while not self._stop.wait(self.every):
                self._report()
        self._thread = threading.Thread(target=tick, name="hcqsim-download-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind, value, tb) -> None:
        import time
        self._stop.set()
        self._thread.join()
        if kind is None:
            self._line(f"{megabytes(self.done())} in {time.monotonic() - self._start:.1f} s")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _download(stack: Stack, debs: Path) -> None:
    missing = [p for p in stack.packages if not (debs / p.filename).exists() or _sha256(debs / p.filename) != p.sha256]
    if not missing:
        return
    if not shutil.which("apt-get") or not shutil.which("dpkg-deb"):
        raise StackUnavailable(f"stack {stack.name}: needs apt-get and dpkg-deb (a Debian-family machine)")
    work = debs.parent / "apt"
    options = _apt_options(work, stack.suite)
    print(f"hcqsim: stack {stack.name} is not in the cache ({debs.parent}): fetching {len(missing)} Debian "
          f"{stack.suite} packages ({megabytes(sum(p.size for p in missing))}) with apt-get, once", file=sys.stderr)
    with DownloadProgress(f"stack {stack.name}: apt-get update (the {stack.suite} package index)", [work / "lists"],
                          None):
        _run(["apt-get", *options, "update"], work, f"stack {stack.name}: apt-get update ({stack.suite})")
    with DownloadProgress(f"stack {stack.name}: apt-get download ({len(missing)} packages)", [debs],
                          sum(p.size for p in missing)):
        _run(["apt-get", *options, "download", *(f"{p.name}={p.version}" for p in missing)], debs,
             f"stack {stack.name}: apt-get download")
    for p in missing:
        if not (debs / p.filename).exists():
            raise StackUnavailable(f"stack {stack.name}: {p.filename} was not downloaded")
        got = _sha256(debs / p.filename)
        if got != p.sha256:
            (debs / p.filename).unlink()
            raise StackUnavailable(f"stack {stack.name}: {p.filename} has sha256 {got}, pinned {p.sha256}")


def fetch(name: str = "debian13") -> Unpacked:
    """The stack `name`, downloaded, checked and unpacked (once; later calls reuse the cache). Concurrent
    fetches (pytest -n workers) serialise on a lock file: one downloads and unpacks, the others then reuse it."""
    import fcntl
    stack = STACKS.get(name)
    if stack is None:
        raise StackUnavailable(f"no stack {name!r} (known: {', '.join(STACKS)})")
    if (stack_dir(stack) / "complete").exists():
        return Unpacked(stack, stack_dir(stack) / "root")
    lock_path = cache_dir() / "rocm" / ".lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _fetch_locked(stack)


def _fetch_wheel(stack: WheelStack, top: Path) -> None:
    """pip download the pinned wheel (checked), then unpack its ROCm libraries into <top>/root.<pid>/lib."""
    import zipfile
    wheels = cache_dir() / "rocm" / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    path = wheels / stack.filename
    if not path.exists() or _sha256(path) != stack.sha256:
        print(f"hcqsim: stack {stack.name} is not in the cache ({wheels.parent}): fetching {stack.filename} "
              f"({megabytes(stack.size) if stack.size else 'size not pinned'}) with pip, once", file=sys.stderr)
        with DownloadProgress(f"stack {stack.name}: pip download", [wheels], stack.size):
            _run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version",
                  "3.11", "--platform", "manylinux2014_x86_64", "-d", str(wheels),
                  f"{stack.project}=={stack.version}"], wheels,
                 f"stack {stack.name}: pip download {stack.project}=={stack.version}")
        if not path.exists():
            raise StackUnavailable(f"stack {stack.name}: {stack.filename} was not downloaded")
        got = _sha256(path)
        if got != stack.sha256:
            path.unlink()
            raise StackUnavailable(f"stack {stack.name}: {stack.filename} has sha256 {got}, pinned {stack.sha256}")
    tmp = top / f"root.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    lib = tmp / "lib"
    lib.mkdir(parents=True)
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            name = info.filename
            if name.startswith(stack.members) and not info.is_dir() and "/" not in name[len(stack.members):]:
                (lib / name[len(stack.members):]).write_bytes(z.read(info))
    for so, soname in (("libamdhip64.so", "libamdhip64.so.5"), ("libhsa-runtime64.so", "libhsa-runtime64.so.1")):
        if (lib / so).exists():  # the names programs link or dlopen (the wheel has the bare .so only)
            (lib / soname).symlink_to(so)


def _fetch_locked(stack: "Stack | WheelStack") -> Unpacked:
    top = stack_dir(stack)
    root = top / "root"
    if (top / "complete").exists():
        return Unpacked(stack, root)
    if isinstance(stack, WheelStack):
        top.mkdir(parents=True, exist_ok=True)
        _fetch_wheel(stack, top)
        shutil.rmtree(root, ignore_errors=True)
        os.replace(top / f"root.{os.getpid()}", root)
        (top / "complete").write_text(stack.description + "\n")
        return Unpacked(stack, root)
    debs = cache_dir() / "rocm" / "debs"  # shared by the stacks: a package is downloaded once
    debs.mkdir(parents=True, exist_ok=True)
    _download(stack, debs)
    top.mkdir(parents=True, exist_ok=True)
    tmp = top / f"root.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    for p in stack.packages:
        _run(["dpkg-deb", "-x", str(debs / p.filename), str(tmp)], top, f"stack {stack.name}: unpack {p.filename}")
    shutil.rmtree(root, ignore_errors=True)
    os.replace(tmp, root)
    (top / "complete").write_text(stack.description + "\n")
    return Unpacked(stack, root)


def main(argv: list[str]) -> int:
    if len(argv) < 1 or argv[0] != "fetch":
        print("usage: python -m hcqsim.native.stacks fetch [STACK]", file=sys.stderr)
        return 2
    try:
        print(fetch(*argv[1:2]).root)
    except StackUnavailable as e:
        print(f"hcqsim: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
