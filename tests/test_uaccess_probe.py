"""probe_user_pages (USERPTR registration: get_user_pages must find every page) gives read_user's verdict page by page,
batched: readable anonymous memory passes at once (one /proc/self/maps read), anything else goes through
process_vm_readv a batch of IOV_MAX pages at a time, and the error names the first page that cannot be read."""
from __future__ import annotations

import ctypes
import errno
import mmap
import tempfile

import pytest

from hcqsim.kfd import uaccess
from hcqsim.memory import PAGE_SIZE

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def _anonymous(pages: int) -> tuple[mmap.mmap, int]:
    m = mmap.mmap(-1, pages * PAGE_SIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return m, ctypes.addressof(ctypes.c_char.from_buffer(m))


def test_readable_anonymous_memory_passes_without_probing(monkeypatch):
    m, addr = _anonymous(3000)
    assert uaccess.anonymous_readable(addr, 3000 * PAGE_SIZE)
    monkeypatch.setattr(uaccess, "read_user", lambda *a: pytest.fail("probed page by page"))
    uaccess.probe_user_pages(addr, 3000)


@pytest.mark.parametrize("bad", [0, 1023, 1024, 1500, 2099])
def test_an_unreadable_page_is_efault_at_that_page_in_any_batch(bad):
    m, addr = _anonymous(2100)  # three batches of IOV_MAX (1024) pages
    assert _libc.mprotect(addr + bad * PAGE_SIZE, PAGE_SIZE, 0) == 0  # PROT_NONE
    try:
        assert not uaccess.anonymous_readable(addr, 2100 * PAGE_SIZE)
        with pytest.raises(OSError) as e:
            uaccess.probe_user_pages(addr, 2100)
        assert e.value.errno == errno.EFAULT and f"0x{addr + bad * PAGE_SIZE:x}" in str(e.value)
        uaccess.probe_user_pages(addr, bad)  # the pages before it are fine
    finally:
        _libc.mprotect(addr + bad * PAGE_SIZE, PAGE_SIZE, mmap.PROT_READ | mmap.PROT_WRITE)


def test_file_backed_memory_is_probed_and_passes():
    with tempfile.TemporaryFile() as f:
        f.truncate(1500 * PAGE_SIZE)
        m = mmap.mmap(f.fileno(), 1500 * PAGE_SIZE, flags=mmap.MAP_SHARED)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
        assert not uaccess.anonymous_readable(addr, 1500 * PAGE_SIZE)
        uaccess.probe_user_pages(addr, 1500)
