"""The memory model (issue 17): choosing it, its records, the pytest plugin's handling of them, and (below) each
cache level and each cache-control bit shown to matter."""
import pytest

from hcqsim import EmulatedGPU
from hcqsim.coherence import MODELS, MemoryReport
from hcqsim.kfd import EmulatedSystem

pytest_plugins = ["pytester"]

QUIET = ("-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:hypothesispytest", "-p", "no:xdist")


# -- choosing a model ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("model", MODELS)
def test_every_model_name_builds_a_system_whose_gpus_share_one_report_list(model):
    with EmulatedSystem(num_gpus=2, memory_model=model) as system:
        assert system.memory_model == model and system.memory_reports == []
        assert all(g.memory_reports is system.memory_reports for g in system.gpus)
        assert (system.gpus[0].coherence is None) == (model == "coherent")


@pytest.mark.parametrize("make", [lambda m: EmulatedGPU(memory_model=m), lambda m: EmulatedSystem(memory_model=m)])
def test_an_unknown_model_name_is_a_value_error_naming_the_three(make):
    with pytest.raises(ValueError, match="coherent, report, adversarial"):
        make("lazy")


def test_open_device_passes_the_model_to_its_system():
    from hcqsim.runtime import open_device
    dev = open_device("sim", memory_model="report")
    try:
        assert dev.os.system.memory_model == "report"
    finally:
        dev.close()


# -- records ---------------------------------------------------------------------------------------------------

def test_a_record_reads_as_both_sides_and_the_missing_operation():
    r = MemoryReport("not written back", 0x1000, 64, "pm4_0 dispatch 0 (kernel at 0x2000) PC +0x10",
                     "the host (CPU read of VRAM)", "GL2_WB", gpu="GPU 0", level="GL2")
    text = str(r)
    for part in ("not written back (GL2) on GPU 0, missing GL2_WB", "0x1000..0x1040", "writer:  pm4_0 dispatch 0",
                 "reader:  the host"):
        assert part in text, text


def test_a_repeat_of_the_same_pair_widens_the_first_record():
    gpu = EmulatedGPU(memory_model="report")
    try:
        for addr in (0x1040, 0x1000, 0x1080):
            gpu.add_memory_report(MemoryReport("stale line", addr, 64, "w", "r", "GLV_INV", level="GLV"))
        gpu.add_memory_report(MemoryReport("stale line", 0x1000, 64, "w", "r", "GL1_INV", level="GL1"))
        first, second = gpu.memory_reports
        assert (first.address, first.size, first.count) == (0x1000, 0xC0, 3)
        assert second.missing == "GL1_INV" and first.gpu == gpu.label
    finally:
        gpu.close()


# -- the pytest plugin ---------------------------------------------------------------------------------------------

LEAVES_A_RECORD = """
from hcqsim.coherence import MemoryReport

def test_leaves_one(device):
    device.os.system.gpus[0].add_memory_report(
        MemoryReport("stale line", 0x1000, 4, "sdma_0 COPY_LINEAR", "kernel PC +0x8", "GLV_INV", level="GLV"))

def test_leaves_none(device):
    assert device.os.system.memory_reports == []
"""


def test_a_test_that_leaves_records_fails_at_teardown_with_a_memory_model_section(pytester):
    pytester.makepyfile(LEAVES_A_RECORD)
    result = pytester.runpytest_inprocess("--sim-memory-model=report", *QUIET)
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["hcqsim: device sim, target gfx1100, policy run_to_block, sanitizer off, "
                                 "memory model report", "*hcqsim memory model*", "*missing GLV_INV*",
                                 "*writer:  sdma_0 COPY_LINEAR*"])


def test_an_unknown_model_option_is_a_one_line_usage_error(pytester):
    pytester.makepyfile(LEAVES_A_RECORD)
    result = pytester.runpytest_inprocess("--sim-memory-model=lazy", *QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("ERROR: --sim-memory-model=lazy:"), result.errlines


def test_the_long_option_name_works_and_the_fixture_system_gets_the_model(pytester):
    pytester.makepyfile("def test_it(device):\n    assert device.os.system.memory_model == 'adversarial'\n")
    assert pytester.runpytest_inprocess("--hcqsim-memory-model=adversarial", *QUIET).ret == 0
