"""The conformance suite: every scenario's effects on the emulator equal the reference model's, on both targets
(and under an interleaving scheduler); the effect records are canonical and stable (the committed sim records
still match); the reference model is independent (it loads no hcqsim module)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from conformance import effects, reference, runner, scenarios  # noqa: E402

NAMES = scenarios.NAMES


def test_there_are_at_least_forty_scenarios_with_unique_names_and_docs():
    assert len(NAMES) >= 40 and len(set(NAMES)) == len(NAMES)
    assert all(s["doc"] and s["steps"] for s in scenarios.SCENARIOS)


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
@pytest.mark.parametrize("name", NAMES)
def test_the_emulator_matches_the_reference_model(name, target):
    sc = scenarios.get(name)
    seen, _ = runner.run_scenario(sc, "sim", target)
    assert effects.differences(reference.expected_effects(sc, target), seen) == []
    golden = effects.load(str(ROOT / "conformance" / "golden" / f"sim-{target}.json"))
    assert effects.differences(golden["scenarios"][name], seen) == []  # stable across runs and versions


@pytest.mark.parametrize("name", [n for n in NAMES if "schedule" in n or "cross" in n or "queue" in n])
def test_race_free_scenarios_do_not_depend_on_the_interleaving(name):
    sc = scenarios.get(name)
    seen, _ = runner.run_scenario(sc, "sim", "gfx1100", policy="random", seed=3)
    assert effects.differences(reference.expected_effects(sc, "gfx1100"), seen) == []


def test_records_are_canonical_text():
    sc = scenarios.get("schedule_diamond")
    a, _ = runner.run_scenario(sc, "sim", "gfx1100")
    b, _ = runner.run_scenario(sc, "sim", "gfx1100")
    assert effects.dumps(effects.record_file("sim", "gfx1100", {"x": a})) == \
        effects.dumps(effects.record_file("sim", "gfx1100", {"x": b}))
    # only bytes, values and relations: no addresses, no absolute times
    assert set(a) == {"buffers", "signals", "checkpoints", "timestamps"}
    assert set(a["timestamps"]) == {"monotonic", "orders"}
    assert all(set(b) == {"size", "runs"} for b in a["buffers"].values())


def test_a_difference_names_the_first_differing_byte_and_signal():
    sc = scenarios.get("signal_sequence_checkpoints")
    exp = reference.expected_effects(sc, "gfx1100")
    bad = json.loads(json.dumps(exp))
    raw = bytearray(effects.decode_bytes(bad["buffers"]["b"]))
    raw[5] ^= 0xFF
    bad["buffers"]["b"] = effects.encode_bytes(bytes(raw))
    bad["signals"]["s"] = 2
    d = effects.differences(exp, bad)
    assert d[0].startswith("buffer b byte 5 (0x5)") and d[1] == "signal s: expected 3, seen 2"


def test_the_byte_encoding_round_trips_and_is_compact():
    import numpy as np
    for data in [b"", bytes(4096), np.arange(1 << 16, dtype="<u4").tobytes(),
                 np.random.default_rng(1).integers(0, 1 << 32, 999, dtype=np.uint64).astype("<u4").tobytes()]:
        assert effects.decode_bytes(effects.encode_bytes(data)) == data
    assert len(effects.encode_bytes(np.arange(1 << 20, dtype="<u4").tobytes())["runs"]) == 1


def test_the_reference_model_imports_no_hcqsim_module():
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); import conformance.reference; "
            "print([m for m in sys.modules if m == 'hcqsim' or m.startswith('hcqsim.')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_reference_model_reports_a_scenario_that_can_never_finish():
    sc = {"name": "x", "doc": "", "buffers": {}, "signals": {"s": 0}, "orders": [],
          "steps": [["wait", "compute0", "s", 1], ["submit", "compute0"], ["host_wait", "s", 1]]}
    with pytest.raises(reference.ReferenceDeadlock, match="host waits for s >= 1"):
        reference.expected_effects(sc, "gfx1100")


def test_the_reference_model_takes_queue_counts_from_the_documented_facts_not_from_a_device():
    from conformance import facts
    assert facts.queue_counts("gfx1100") == {0: {"compute": 8, "copy": 12}}  # HARDWARE_FACTS 2.5
    assert facts.queue_counts("gfx942", 2)[1] == {"compute": 24, "copy": 16}
    with pytest.raises(TypeError, match="documented facts"):
        reference.expected_effects(scenarios.get("every_copy_queue"), {0: {"compute": 1, "copy": 1}})
    with pytest.raises(ValueError, match="no documented facts"):
        reference.expected_effects(scenarios.get("every_copy_queue"), "gfx90a")


def test_frozen_timestamps_do_not_conform():
    sc = scenarios.get("compute_timestamps_monotonic")
    expected = reference.expected_effects(sc, "gfx1100")
    frozen = runner.timestamp_relations(sc, {"t0": 0, "t1": 0, "t2": 0}, {"compute0": ["t0", "t1", "t2"]})
    seen = {**expected, "timestamps": frozen}
    assert effects.differences(expected, seen) == ["timestamps orders t0 < t1: expected True, seen False"]


def test_every_scenario_has_a_committed_sim_record_on_both_targets():
    for target in ("gfx1100", "gfx942"):
        golden = effects.load(str(ROOT / "conformance" / "golden" / f"sim-{target}.json"))
        assert sorted(golden["scenarios"]) == sorted(NAMES), target


def test_a_record_of_sorted_words_ignores_only_the_order():
    spec = {"record": "sorted"}
    a = effects.encode_buffer(bytes([3, 0, 0, 0, 1, 0, 0, 0]), spec)
    assert a == effects.encode_buffer(bytes([1, 0, 0, 0, 3, 0, 0, 0]), spec)
    assert a != effects.encode_buffer(bytes([1, 0, 0, 0, 2, 0, 0, 0]), spec)
