"""The mutation harness (conformance/mutate.py): its catalogue covers every layer of the emulator, mutants are
planted only in temporary copies, a mutant whose text moved is reported as not applying, and conformance catches
planted bugs — a short profile here (each mutant with the scenarios that must see it, seconds each), the whole
catalogue on both targets behind `-m slow` (python3 -m conformance.mutate prints the table)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from conformance import mutate  # noqa: E402


def test_the_catalogue_has_forty_distinct_mutants_across_engines_driver_shader_and_memory():
    assert len(mutate.CATALOGUE) >= 40 and len(set(mutate.NAMES)) == len(mutate.NAMES)
    layers = {m.layer for m in mutate.CATALOGUE}
    assert {"engines", "kfd", "shader", "memory"} <= layers
    assert all(m.doc and m.old != m.new for m in mutate.CATALOGUE)


def test_a_mutant_is_planted_in_a_temporary_copy_and_never_in_the_tree(tmp_path):
    m = mutate.get("release_mem_value_plus_one")
    before = (ROOT / m.file).read_text()
    copy = mutate.copy_tree(tmp_path)
    assert not (copy / ".git").exists()
    assert mutate.apply(m, copy)
    assert m.new in (copy / m.file).read_text() and (ROOT / m.file).read_text() == before


def test_a_mutant_whose_text_no_longer_occurs_does_not_apply(tmp_path):
    gone = mutate.Mutant("gone", "hcqsim/gpu.py", "text that is not in the file", "x", "moved code")
    twice = mutate.Mutant("twice", "hcqsim/gpu.py", "self", "this", "ambiguous text")
    copy = mutate.copy_tree(tmp_path)
    assert not mutate.apply(gone, copy) and not mutate.apply(twice, copy)
    result = mutate.mutate_and_run(gone, targets=("gfx1100",), aql=False)
    assert not result.applied
    assert "does not apply" in mutate.table([result], ["gfx1100"], tests=False)


@pytest.fixture(scope="module")
def unmutated_quick_scenarios_pass():
    """The profile means something only if the same scenarios pass on the unmutated tree."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        root = mutate.copy_tree(Path(tmp))
        for target, names in mutate.QUICK.values():
            v = mutate.run_conformance(root, target, scenarios=names)
            assert not v.caught, f"unmutated tree: {v.how} {v.first}"
    return True


@pytest.mark.parametrize("name", list(mutate.QUICK))
def test_conformance_catches_a_planted_bug_through_the_reference_model(name, unmutated_quick_scenarios_pass):
    target, names = mutate.QUICK[name]
    r = mutate.mutate_and_run(mutate.get(name), targets=(target,), scenarios=names, aql=False)
    assert r.applied, f"{name} no longer applies: update conformance/mutate.py"
    v = r.conformance[target]
    assert v.caught and v.how == "ref", f"{name}: {v.how} {v.first}"


def test_the_harness_runs_aql_queues_by_default_and_counts_what_they_catch(unmutated_quick_scenarios_pass):
    """The main job runs PM4 and AQL compute queues; so does the harness, and a bug only AQL queues see counts."""
    r = mutate.mutate_and_run(mutate.get("aql_kernarg_off_by_8"), targets=("gfx1100",), scenarios=["kernel_iota"])
    assert r.applied and set(r.conformance) == {"gfx1100", "gfx1100+aql"}
    assert not r.conformance["gfx1100"].caught and r.conformance["gfx1100+aql"].caught, r.conformance
    assert r.caught_by_conformance
    assert "conformance alone (any of gfx1100, gfx1100+aql): 1/1" in mutate.summary([r], ["gfx1100", "gfx1100+aql"],
                                                                                      tests=False)


@pytest.mark.slow
def test_conformance_alone_kills_ninety_percent_of_the_catalogue_on_both_targets():
    results = [mutate.mutate_and_run(m) for m in mutate.CATALOGUE]
    applied = [r for r in results if r.applied]
    assert len(applied) >= 40
    caught = {r.mutant.name for r in applied if r.caught_by_conformance}
    assert {"events_of_second_gpu_never_delivered", "s_barrier_does_not_hold"} <= caught
    columns = [c for t in mutate.TARGETS for c in (t, t + "+aql")]
    assert len(caught) >= 0.9 * len(applied), mutate.summary(results, columns, tests=False)
