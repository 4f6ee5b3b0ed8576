"""The `hcqsim` command: conformance (pass/fail table, records, comparisons, exit status), info, disasm, trace."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hcqsim import pm4, sdma, trace_events
from hcqsim.cli import main


def test_python_dash_m_runs_the_command(tmp_path):
    out = subprocess.run([sys.executable, "-m", "hcqsim", "conformance", "--json", "--target", "gfx1100",
                          "kernel_iota"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["passed"] == 1 and doc["failed"] == [] and doc["target"] == "gfx1100" and doc["aql"] is False
    # by default against the reference model and the committed sim golden records, as the tests compare
    assert [c.rsplit("/", 1)[-1] for c in doc["compared_with"]] == ["reference", "sim-gfx1100.json"]


def test_the_default_run_is_the_matrix_of_targets_and_compute_queue_kinds(capsys):
    """No --target / --aql / --pm4: gfx1100 and gfx942, each with PM4 and with AQL compute queues (issue 34: the
    main job used to check one configuration of four); each flag narrows it to one."""
    assert main(["conformance", "--json", "kernel_iota"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted(doc["configurations"]) == ["gfx1100", "gfx1100+aql", "gfx942", "gfx942+aql"]
    assert doc["passed"] == 4 and doc["scenarios"] == 4 and doc["failed"] == []
    for label, one in doc["configurations"].items():
        assert (one["target"], one["aql"]) == (label.split("+")[0], label.endswith("+aql"))
        assert [c.rsplit("/", 1)[-1] for c in one["compared_with"]] == ["reference", f"sim-{one['target']}.json"]
    assert main(["conformance", "kernel_iota"]) == 0
    out = capsys.readouterr().out
    assert "gfx1100  gfx1100+aql  gfx942  gfx942+aql" in out
    assert "1/1 scenarios pass on sim (gfx942, AQL)" in out and "4/4 configurations pass" in out
    for argv, label in ((["--target", "gfx942"], "(gfx942)"), (["--aql"], "(gfx1100, AQL)"),
                        (["--pm4"], "(gfx1100)"), (["--target", "gfx942", "--aql"], "(gfx942, AQL)")):
        assert main(["conformance", *argv, "kernel_iota"]) == 0
        out = capsys.readouterr().out
        assert out.count("scenarios pass on sim") == 1 and f"1/1 scenarios pass on sim {label}" in out, argv


def test_conformance_prints_a_table_and_records_canonical_effects(tmp_path, capsys):
    rec = tmp_path / "r.json"
    assert main(["conformance", "--target", "gfx1100", "--record", str(rec), "kernel_iota",
                 "signal_sequence_checkpoints"]) == 0
    out = capsys.readouterr().out
    assert "kernel_iota" in out and "pass" in out and "2/2 scenarios pass on sim (gfx1100)" in out
    doc = json.loads(rec.read_text())
    assert doc["format"] == "hcqsim-conformance-effects/1" and set(doc["scenarios"]) == {
        "kernel_iota", "signal_sequence_checkpoints"}


def test_a_differing_record_fails_with_the_first_differing_byte(tmp_path, capsys):
    rec = tmp_path / "r.json"
    main(["conformance", "--target", "gfx1100", "--record", str(rec), "kernel_iota"])
    doc = json.loads(rec.read_text())
    runs = doc["scenarios"]["kernel_iota"]["buffers"]["out"]["runs"]
    runs[0][1] = "0x000003e9"  # first word 1001 instead of 1000
    rec.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["conformance", "--target", "gfx1100", "--compare", str(rec), "kernel_iota"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "r.json: buffer out byte 0 (0x0): expected 0xe9, seen 0xe8" in out


def test_an_unknown_scenario_is_a_usage_error(capsys):
    assert main(["conformance", "no_such_scenario"]) == 2
    assert "no scenario 'no_such_scenario'" in capsys.readouterr().err


def test_info_shows_the_topology(capsys):
    assert main(["info", "--target", "gfx942", "--gpus", "2", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert len(info) == 2 and info[0]["target"] == "gfx942" and info[0]["queues"]["compute"] >= 1
    assert info[1]["label"].startswith("GPU 1")


def test_disasm_pm4_sdma_isa_and_code_objects(tmp_path, capsys):
    words = " ".join(f"{w:08x}" for w in pm4.write_data(0x1000, [7]))
    assert main(["disasm", "pm4", *words.split()]) == 0
    assert "WRITE_DATA" in capsys.readouterr().out
    f = tmp_path / "s.bin"
    f.write_bytes(b"".join(w.to_bytes(4, "little") for w in sdma.fence(0x2000, 5)))
    assert main(["disasm", "sdma", "--file", str(f)]) == 0
    assert "FENCE" in capsys.readouterr().out
    assert main(["disasm", "isa", "--arch", "gfx1100", "bfb00000"]) == 0  # s_endpgm (gfx11 SOPP)
    assert "s_endpgm" in capsys.readouterr().out
    from hcqsim.kernels import code_object
    co = tmp_path / "k.co"
    co.write_bytes(code_object("inc", "gfx942"))
    assert main(["disasm", "code-object", "--file", str(co)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("inc:  ; gfx942") and "s_endpgm" in out


def test_trace_writes_a_trace_event_file(tmp_path):
    out = tmp_path / "t.json"
    assert main(["trace", "schedule_two_devices", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    trace_events.validate(doc)
    assert {e["pid"] for e in doc["traceEvents"]} == {0, 1}


@pytest.mark.parametrize("argv", [["conformance", "--target", "gfx9000"], ["disasm", "pm4"]])
def test_bad_arguments_exit_non_zero(argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code != 0


def test_info_reports_rocminfo_fields_from_the_topology(capsys):
    """Each field against the target's documented facts (hcqsim.targets, kfd/topology.py's node facts), not
    against what info itself computed: gfx942 is an MI300X (304 CUs of 4 SIMDs, 8 XCCs, wave64)."""
    from hcqsim.kfd.topology import NODE_FACTS
    from hcqsim.targets import TARGETS
    t, facts = TARGETS["gfx942"], NODE_FACTS["gfx942"]
    assert main(["info", "--target", "gfx942", "--json"]) == 0
    (a,) = json.loads(capsys.readouterr().out)
    assert (a["name"], a["compute_units"], a["simds_per_cu"], a["num_xcc"]) == ("gfx942", 304, 4, 8)
    assert (a["wavefront_size"], a["max_waves_per_simd"], a["max_waves_per_cu"]) == (64, t.max_waves_per_simd,
                                                                                    4 * t.max_waves_per_simd)
    assert a["lds_bytes"] == t.lds_size_in_kb * 1024 == 65536
    assert a["sdma"] == {"version": "sdma4", "engines": t.sdma_engines, "xgmi_engines": t.sdma_xgmi_engines,
                         "queues_per_engine": t.sdma_queues_per_engine}
    assert a["queues"] == {"compute": t.cp_queues, "copy": t.sdma_engines * t.sdma_queues_per_engine}
    assert a["firmware"] == {"mec": facts["fw_version"], "sdma": facts["sdma_fw_version"]}
    assert a["device_id"] == t.device_id and a["vendor_id"] == 0x1002
    kinds = {p["kind"]: p["size_bytes"] for p in a["memory_pools"]}
    assert kinds["VRAM (CPU-visible)"] == 16 << 30 and kinds["GTT (system memory the GPU maps)"] > 0
    assert main(["info", "--target", "gfx942"]) == 0
    text = capsys.readouterr().out
    assert "304 CUs x 4 SIMDs = 1216 SIMDs" in text and "wave64, up to 8 per SIMD, 32 per CU" in text
    assert f"MEC {facts['fw_version']}, SDMA {facts['sdma_fw_version']}" in text and "VRAM (CPU-visible) 16 GiB" in text
