"""`hcqsim conformance` under HCQSIM_MEMORY_MODEL=report (issue 17): a scenario whose machines leave memory-model
records fails, the first lines of each record as its difference; a clean scenario passes."""
import pytest

from hcqsim.cli import main
from hcqsim.coherence import MemoryReport


@pytest.fixture
def report_model(monkeypatch):
    monkeypatch.setenv("HCQSIM_MEMORY_MODEL", "report")


def test_a_clean_scenario_passes_under_report(report_model, capsys):
    assert main(["conformance", "kernel_iota"]) == 0
    assert "memory model" not in capsys.readouterr().out


def test_a_scenario_that_leaves_a_record_fails_naming_it(report_model, monkeypatch, capsys):
    import conformance.runner as runner
    real_run = runner.Run.run

    def run_leaving_a_record(self):  # the plant: a record as a missing write-back in the scenario would leave
        self.devs[0].os.system.gpus[0].add_memory_report(
            MemoryReport("not written back", 0x1000, 8, "queue pm4_0: WRITE_DATA at ring+0x0",
                         "the host reading VRAM", "GL2_WB", level="GL2"))
        return real_run(self)
    monkeypatch.setattr(runner.Run, "run", run_leaving_a_record)
    from hcqsim.coherence.report import SEEN
    assert main(["conformance", "--target", "gfx1100", "kernel_iota"]) == 1
    out = capsys.readouterr().out
    assert "kernel_iota  FAIL    memory model: not written back (GL2) on GPU 0" in out, out
    assert "missing GL2_WB / address: 0x1000..0x1008 (8 bytes) / writer:  queue pm4_0: WRITE_DATA" in out, out
    SEEN.clear()  # the plant's record is this test's own (the plugin's whole-run check would count it)
