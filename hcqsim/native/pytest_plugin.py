"""pytest fixtures for the in-process host (hcqsim.native.inprocess), for a pytest run under `hcqsim run`:

    hcqsim run --stack debian13-hip --target gfx942 -- python -m pytest -p hcqsim.native.pytest_plugin tests/...

`native_host`: the NativeHost (its `.system` is the EmulatedSystem; `.failures` the device calls that failed);
`hsa`: libhsa-runtime64 after hsa_init; `hip`: libamdhip64 after hipInit. Session-wide: ROCr initialises once
per process. Outside `hcqsim run` they fail with how to start the run.
"""
from __future__ import annotations

import ctypes

import pytest

from .inprocess import NotInterposed, load, start


@pytest.fixture(scope="session")
def native_host():
    try:
        return start()
    except NotInterposed as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="session")
def hsa(native_host) -> ctypes.CDLL:
    lib, _ = load("libhsa-runtime64.so.1")
    status = lib.hsa_init()
    if status != 0:
        pytest.fail(f"hsa_init returned 0x{status:x}; failed device calls: {native_host.failures}", pytrace=False)
    yield lib
    lib.hsa_shut_down()  # balance this hsa_init (ROCr aborts at exit on an unbalanced one)


@pytest.fixture(scope="session")
def hip(native_host) -> ctypes.CDLL:
    lib, _ = load("libamdhip64.so.5")
    status = lib.hipInit(0)
    if status != 0:
        pytest.fail(f"hipInit returned {status}; failed device calls: {native_host.failures}", pytrace=False)
    return lib
