"""A compiler error never kills the process (issue 8 item 8).

LLVM aborts on IR it cannot select instructions for; `compile_llvm` compiles in a worker process, so that is a
`CompileError` carrying LLVM's message, and caches code objects on disk so the safe path is free on reruns.
"""
from __future__ import annotations

import os
import threading

import pytest

from hcqsim import compiler
from hcqsim.compiler import CompileError, assemble_listing, compile_llvm

from ir_samples import VADD  # noqa: E402  (tests/ir_samples.py)

# llvm.sin.f64 has no gfx1100 instruction selection: in-process, LLVM calls abort() ("Cannot select: fsin")
SIN_F64 = """
declare double @llvm.sin.f64(double)
define amdgpu_kernel void @k(ptr addrspace(1) %p) {
  %x = load double, ptr addrspace(1) %p
  %y = call double @llvm.sin.f64(double %x)
  store double %y, ptr addrspace(1) %p
  ret void
}
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HCQSIM_CACHE", str(tmp_path))
    return tmp_path / "llvm"


def _entries(cache) -> list[str]:
    return sorted(os.listdir(cache)) if cache.exists() else []


def _no_worker(monkeypatch) -> None:
    def refuse(request):
        raise AssertionError("the compile worker was asked although the cache holds the answer")
    monkeypatch.setattr(compiler._worker, "run", refuse)


def test_ir_llvm_cannot_select_is_a_compile_error_and_the_process_lives(cache):
    with pytest.raises(CompileError, match=r"(?s)gfx1100: LLVM aborted.*Cannot select.*fsin"):
        compile_llvm(SIN_F64, "gfx1100")
    assert compile_llvm(VADD, "gfx1100")[:4] == b"\x7fELF"  # a fresh worker compiles the next one


def test_listing_of_ir_llvm_cannot_select_is_a_compile_error(cache):
    with pytest.raises(CompileError, match="Cannot select"):
        assemble_listing(SIN_F64, "gfx1100")


def test_invalid_ir_is_a_compile_error_that_is_still_a_value_error(cache):
    with pytest.raises(CompileError, match=r"(?s)gfx942.*expected type") as info:
        compile_llvm("define void @f( {", "gfx942")
    assert isinstance(info.value, ValueError)  # callers that caught ValueError keep working


def test_rerun_of_a_compile_reads_the_disk_cache_without_the_worker(cache, monkeypatch):
    code = compile_llvm(VADD, "gfx1100")
    assert len(_entries(cache)) == 1
    _no_worker(monkeypatch)
    assert compile_llvm(VADD, "gfx1100") == code


def test_cache_key_separates_ir_target_opt_and_passes(cache):
    compile_llvm(VADD, "gfx1100")
    compile_llvm(VADD + "\n; another text", "gfx1100")
    compile_llvm(VADD, "gfx942")
    compile_llvm(VADD, "gfx1100", opt=1)
    compile_llvm(VADD, "gfx1100", ir_passes=True)
    assemble_listing(VADD, "gfx1100")
    assert len(_entries(cache)) == 6


def test_an_llvm_abort_is_cached_too(cache, monkeypatch):
    with pytest.raises(CompileError):
        compile_llvm(SIN_F64, "gfx1100")
    _no_worker(monkeypatch)
    with pytest.raises(CompileError, match="Cannot select"):
        compile_llvm(SIN_F64, "gfx1100")


def test_a_corrupt_cache_entry_is_compiled_again(cache):
    code = compile_llvm(VADD, "gfx1100")
    [name] = _entries(cache)
    (cache / name).write_bytes(b"garbage")
    assert compile_llvm(VADD, "gfx1100") == code


def test_cache_off_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("HCQSIM_CACHE", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    compile_llvm(VADD, "gfx1100")
    assert compiler.cache_dir() is None and not any(tmp_path.iterdir())


def test_concurrent_cache_writers_never_expose_a_partial_entry(cache):
    # what pytest-xdist workers do: write the same key at once while others read it
    payloads = [bytes([i]) * (1 << 16) * (i + 1) for i in range(4)]
    seen, stop = [], threading.Event()

    def write(p: bytes) -> None:
        for _ in range(30):
            compiler._cache_write("k", True, p)

    def read() -> None:
        while not stop.is_set():
            hit = compiler._cache_read("k")
            if hit is not None:
                seen.append(hit[1] in payloads)

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=write, args=(p,)) for p in payloads]
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    reader.join()
    assert seen and all(seen) and _entries(cache) == ["k"]  # no temporary file left behind
