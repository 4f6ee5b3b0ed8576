"""A derandomized schedule search draws the same cases whatever ran before it in the process (issue 16).

Hypothesis (6.131 on) replaces about one integer or bytes draw in twenty by a literal from the source of the local
modules imported so far. Earlier tests import more of hcqsim (the shader core, conformance, the CLI ...), so before
hcqsim's strategies drew from a window no literal lies in, the same search found two mutants and two runtime races
when its module ran alone and missed them after the rest of the suite. Here the "rest of the suite" is a module of
fresh literals imported between two runs of the same search, in one process.
"""
from __future__ import annotations

import importlib
import sys

from hypothesis import given
from hypothesis import strategies as st

from hcqsim.strategies import HISTORY_FREE_BASE, U32, fuzz_settings, integers, interleavings, schedules

EXAMPLES = 60


def _drawn(strategy) -> list:
    """The examples a derandomized search over `strategy` draws (the same test function each time)."""
    seen = []

    @fuzz_settings(max_examples=EXAMPLES)
    @given(strategy)
    def search(example):
        seen.append(example)

    search()
    return seen


def _import_fresh_literals(tmp_path, name: str) -> None:
    """A new local module full of integer and bytes literals no other module has: what an earlier test importing
    more of the project does to hypothesis' pool of source constants."""
    words = ", ".join([str(v) for v in range(100, 1001)]  # hypothesis takes no literal in -99..99
                      + [f"0x{(0x6A09E667 + 0x9E3779B1 * i) & U32:08x}" for i in range(64)])
    blobs = ", ".join(repr(bytes((i * 37 + j * 11 + 5) & 0xFF for j in range(n)))
                      for i, n in enumerate(range(1, 65)))
    (tmp_path / f"{name}.py").write_text(f"WORDS = [{words}]\nBLOBS = [{blobs}]\n")
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))


def test_the_schedule_search_draws_the_same_cases_after_other_modules_were_imported(tmp_path):
    words = lambda ints: st.lists(ints(0, U32), min_size=8, max_size=8)  # noqa: E731
    cases_before = _drawn(st.tuples(schedules(), interleavings()))
    history_free_before, plain_before = _drawn(words(integers)), _drawn(words(st.integers))
    _import_fresh_literals(tmp_path, f"hcqsim_history_literals_{id(tmp_path):x}")
    assert _drawn(words(st.integers)) != plain_before  # hypothesis' own integers now draw other examples...
    assert _drawn(words(integers)) == history_free_before  # ...hcqsim's do not
    assert _drawn(st.tuples(schedules(), interleavings())) == cases_before


def test_history_free_integers_cover_their_range_and_shrink_toward_its_start():
    values = [v for xs in _drawn(st.lists(integers(3, 9), min_size=8, max_size=8)) for v in xs]
    assert set(values) == set(range(3, 10))
    from hypothesis import find
    assert find(integers(3, 9), lambda v: True) == 3
    assert find(interleavings(), lambda xs: len(xs) >= 2) == [(0, 1), (0, 1)]


def test_no_literal_of_the_loaded_modules_lies_in_the_window():
    """The window only helps while no source literal is in it: look at every module hypothesis would read."""
    try:
        from hypothesis.internal.constants_ast import constants_from_module, is_local_module_file
    except ImportError:  # pragma: no cover - hypothesis moved its internals; the tests above still hold
        import pytest
        pytest.skip("hypothesis no longer has constants_ast: check how it picks source constants")
    import hcqsim.kfd  # noqa: F401 - the emulator's modules too
    import hcqsim.shader.core  # noqa: F401
    hits = []
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and is_local_module_file(path):
            hits += [(module.__name__, v) for v in constants_from_module(module).integers
                     if HISTORY_FREE_BASE <= v < HISTORY_FREE_BASE + (1 << 40)]
    assert not hits
