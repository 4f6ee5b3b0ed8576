"""pytest-native interleaving fuzzing: the `fuzz_device` / `fuzz_devices` fixtures and the `@interleaved` decorator.

    from hcqsim.interleaved import interleaved

    @interleaved()
    def test_my_pipeline(fuzz_device):             # a device already under an Interleaver, opened with the run's
        out = my_pipeline(fuzz_device)             # --sim-target, --sim-memory-model, --aql, --sim-sanitize, --sim-gpus
        assert out == expected

`@interleaved(profile=None, **settings)` runs the test body once per drawn interleaving (`interleavings()`, the
fuzz profile of `fuzz_settings`), each inside `Interleaver.using`, so a failure carries the steps, the packet trace
and a replay seed. After the body the devices are synchronized under the same interleaving; then the memory-model
records of that example (`--sim-memory-model=report`, or HCQSIM_MEMORY_MODEL) fail it: hypothesis shrinks them
with their interleaving, instead of the whole test failing once at teardown with every example's records.

The fixtures are the pytest plugin's (hcqsim/pytest_plugin.py); this module imports hypothesis (a test dependency)
and is imported only by tests that use the decorator.
"""
from __future__ import annotations

import functools
import inspect

from hypothesis import given

from .strategies import Interleaver, fuzz_settings, interleavings


class MemoryModelRecords(AssertionError):
    """An example whose run left memory-model records (docs/memory_model.md)."""


def _fuzzed(value) -> list:
    """The devices of a fixture value made by fuzz_device / fuzz_devices (a device, or a list of them)."""
    items = value if isinstance(value, (list, tuple)) else [value]
    return [d for d in items if isinstance(getattr(d, "interleaver", None), Interleaver)]


def interleaved(profile: str | None = None, **overrides):
    """Decorate a test taking `fuzz_device` or `fuzz_devices`: its body runs once per drawn interleaving (see the
    module docstring). `profile` and `overrides` go to `fuzz_settings` (e.g. `max_examples=20`)."""

    def wrap(test):
        @functools.wraps(test)
        def runner(*args, **kwargs):
            devs = [d for v in (*args, *kwargs.values()) for d in _fuzzed(v)]
            if not devs:
                raise TypeError(f"@interleaved: {test.__name__} takes no fuzz_device / fuzz_devices fixture")
            chooser = devs[0].interleaver
            if any(d.interleaver is not chooser for d in devs):
                raise TypeError("@interleaved: the devices must share one Interleaver (one fixture)")

            @fuzz_settings(profile, **overrides)
            @given(interleavings())
            def example(choices):
                for d in devs:
                    d.clear_memory_reports()
                finished = False
                try:
                    with chooser.using(choices):
                        test(*args, **kwargs)
                        for d in devs:  # what the body left running runs under the same interleaving
                            d.synchronize()
                        finished = True
                        _check_records(devs)
                finally:
                    if not finished:  # the body failed with work in flight: let it finish before the next example
                        for d in devs:
                            try:
                                d.synchronize()
                            except Exception:  # noqa: BLE001 (a hang or fault is the failure already raised)
                                pass

            try:
                example()
            finally:
                for d in devs:  # reported per example: nothing left for the fixture's teardown check
                    d.clear_memory_reports()

        # pytest finds the fixtures from the test's own signature (functools.wraps sets __wrapped__)
        runner.__signature__ = inspect.signature(test)
        return runner

    return wrap


def _check_records(devs) -> None:
    seen, records = set(), []
    for d in devs:
        for r in d.memory_reports:
            if id(r) not in seen:
                seen.add(id(r))
                records.append(r)
    if records:
        raise MemoryModelRecords(f"hcqsim memory model: this interleaving left {len(records)} record(s); the "
                                 f"first:\n{records[0]}")
