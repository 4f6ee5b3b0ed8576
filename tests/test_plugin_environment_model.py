"""The pytest plugin's whole-run check under HCQSIM_MEMORY_MODEL (issue 17): a test whose machines took their model
from the environment fails when they leave memory-model records; a machine given `memory_model=` explicitly is the
test's own business (it builds it to see records) and is not counted."""
import pytest

pytest_plugins = ["pytester"]

QUIET = ("-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:hypothesispytest", "-p", "no:xdist")

TESTS = """
from hcqsim import EmulatedGPU
from hcqsim.coherence import MemoryReport
from hcqsim.kfd import EmulatedSystem

def record():
    return MemoryReport("stale line", 0x1000, 4, "sdma_0 COPY_LINEAR", "kernel PC +0x8", "GLV_INV", level="GLV")

def test_environment_gpu_leaves_one():
    gpu = EmulatedGPU()
    gpu.add_memory_report(record())
    gpu.close()

def test_environment_system_leaves_one():
    with EmulatedSystem() as system:
        system.gpus[0].add_memory_report(record())

def test_explicit_gpu_leaves_one():
    gpu = EmulatedGPU(memory_model="report")
    gpu.add_memory_report(record())
    assert len(gpu.memory_reports) == 1
    gpu.close()

def test_explicit_system_leaves_one():
    with EmulatedSystem(memory_model="adversarial") as system:
        system.gpus[0].add_memory_report(record())

def test_environment_leaves_none():
    EmulatedGPU().close()
"""


@pytest.fixture(autouse=True)
def inner_records_stay_inner():
    """The inner runs are in-process: their machines' records stay in SEEN, which this file's own run (under
    HCQSIM_MEMORY_MODEL) would count against the outer test. They are the inner tests' business."""
    yield
    from hcqsim.coherence.report import SEEN
    SEEN.clear()


def run(pytester, monkeypatch, model: str):
    monkeypatch.setenv("HCQSIM_MEMORY_MODEL", model)
    pytester.makepyfile(TESTS)
    return pytester.runpytest_inprocess(*QUIET, "-p", "no:randomly")


def test_records_of_machines_with_the_environment_model_fail_their_test(pytester, monkeypatch):
    result = run(pytester, monkeypatch, "report")
    result.assert_outcomes(passed=5, errors=2)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_environment_gpu_leaves_one*",
                                 "*hcqsim memory model (HCQSIM_MEMORY_MODEL): the test left 1 record(s)*",
                                 "*ERROR at teardown of test_environment_system_leaves_one*"])
    assert "explicit" not in "\n".join(line for line in result.outlines if "ERROR at teardown" in line)


def test_without_the_environment_model_no_test_is_checked(pytester, monkeypatch):
    run(pytester, monkeypatch, "coherent").assert_outcomes(passed=5)


def test_the_check_still_sees_records_after_many_earlier_ones(pytester, monkeypatch):
    """SEEN is bounded (SEEN_LIMIT): a check that counted records across tests went blind once it was full."""
    from hcqsim.coherence import report
    monkeypatch.setattr(report, "SEEN_LIMIT", 2)
    monkeypatch.setenv("HCQSIM_MEMORY_MODEL", "report")
    pytester.makepyfile(TESTS.replace("def test_environment_leaves_none", "def test_zz_environment_leaves_none")
                        + "\ndef test_zzz_environment_leaves_one_more():\n    test_environment_gpu_leaves_one()\n")
    result = pytester.runpytest_inprocess(*QUIET, "-p", "no:randomly")
    result.assert_outcomes(passed=6, errors=3)


MODULE_SCOPED = """
import pytest
from hcqsim import EmulatedGPU
from hcqsim.coherence import MemoryReport

@pytest.fixture(scope="module")
def gpu():
    g = EmulatedGPU()  # one machine for the module: its records outlive each test
    yield g
    g.close()

def record(address):
    return MemoryReport("stale line", address, 4, "sdma_0 COPY_LINEAR", "kernel PC +0x8", "GLV_INV", level="GLV")

def test_a_first_record(gpu):
    gpu.add_memory_report(record(0x1000))

def test_b_clean(gpu):
    pass

def test_c_the_same_pair_again(gpu):
    gpu.add_memory_report(record(0x2000))  # merged into test_a's record (same writer, reader, missing, level)

def test_d_past_the_machine_limit(gpu):
    gpu._report_log.limit = len(gpu.memory_reports)  # full: a new record is not kept by the machine
    gpu.add_memory_report(MemoryReport("not written back", 0x3000, 4, "pm4_0", "the host", "GL2_WB", level="GL2"))
"""


def test_a_module_scoped_machine_s_repeat_of_an_earlier_test_s_record_fails_the_later_test(pytester, monkeypatch):
    """A record merged into one an earlier test left (a machine that outlives tests) was not new in SEEN: the later
    test passed. So was a record past the machine's own limit."""
    monkeypatch.setenv("HCQSIM_MEMORY_MODEL", "report")
    pytester.makepyfile(MODULE_SCOPED)
    result = pytester.runpytest_inprocess(*QUIET, "-p", "no:randomly", "-rE")
    result.assert_outcomes(passed=4, errors=3)
    errors = [line for line in result.outlines if line.startswith("ERROR ")]
    assert [e.split("::")[1].split()[0] for e in errors] == ["test_a_first_record", "test_c_the_same_pair_again",
                                                             "test_d_past_the_machine_limit"], errors
    result.stdout.fnmatch_lines(["*0x1000..0x2004*2 accesses*"])  # test_c's record: test_a's, widened


@pytest.mark.parametrize("model", ["report", None])
def test_a_gpu_knows_whether_its_model_came_from_the_environment(monkeypatch, model):
    from hcqsim import EmulatedGPU
    monkeypatch.setenv("HCQSIM_MEMORY_MODEL", "report")
    gpu = EmulatedGPU(memory_model=model)
    try:
        assert gpu.memory_model == "report" and gpu.memory_model_from_environment == (model is None)
    finally:
        gpu.close()
