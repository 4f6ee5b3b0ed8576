"""pytest-native interleaving fuzzing (issue 29 item 2): the `fuzz_device` / `fuzz_devices` fixtures honour the run's
options, and under `@interleaved` the memory-model records of one example fail that example (hypothesis shrinks
them with their interleaving) instead of the whole test at teardown."""
import pytest

pytest_plugins = ["pytester"]

QUIET = ("-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:xdist", "-p", "no:randomly")

OPTIONS_TEST = """
from hcqsim.interleaved import interleaved
from hcqsim.strategies import Interleaver

def test_options(fuzz_device, fuzz_devices):
    pass

@interleaved(max_examples=3)
def test_fixture_sees_the_options(fuzz_device):
    dev = fuzz_device
    assert isinstance(dev.interleaver, Interleaver) and dev.interleaver.host_turns
    assert dev.target == {target!r}
    assert dev.aql is {aql} and dev.sanitize is {sanitize}
    system = dev.os.system
    assert len(system.gpus) == {gpus}
    assert system.gpus[0].memory_model == {model!r}
"""


@pytest.mark.parametrize("args, want", [
    ((), dict(target="gfx1100", aql=False, sanitize=False, gpus=1, model="coherent")),
    (("--sim-target", "gfx942", "--sim-memory-model=report", "--aql", "--sim-sanitize", "--sim-gpus", "2"),
     dict(target="gfx942", aql=True, sanitize=True, gpus=2, model="report")),
])
def test_the_fuzz_fixtures_honour_the_options(pytester, args, want):
    pytester.makepyfile(OPTIONS_TEST.format(**want))
    result = pytester.runpytest_inprocess(*args, *QUIET)
    result.assert_outcomes(passed=2)


def test_the_environment_model_reaches_the_fuzz_fixture(pytester, monkeypatch):
    monkeypatch.setenv("HCQSIM_MEMORY_MODEL", "report")
    pytester.makepyfile(OPTIONS_TEST.format(target="gfx1100", aql=False, sanitize=False, gpus=1, model="report"))
    result = pytester.runpytest_inprocess(*QUIET)
    result.assert_outcomes(passed=2)


# a record of the memory model, made by the test when the host read the buffer before the fill reached it (a
# stand-in for the cache model's own records, which need a kernel race: below)
PLANTED = """
from hcqsim.coherence import MemoryReport
from hcqsim.interleaved import interleaved

@interleaved()
def test_reads_after_submit(fuzz_device):
    dev = fuzz_device
    a = dev.alloc(4096)
    a.view[:4096] = 0  # the free cache may hand back the last example's buffer, filled
    done = dev.new_signal(0)
    dev.copy_queue(0).fill(a, 4, 4096).signal(done, 1).submit()
    if a.view[0] != 4:  # the host read before the fill: the record a missing wait leaves
        dev.os.system.gpus[0].add_memory_report(MemoryReport("stale line", a.va, 4, "sdma_0 CONST_FILL",
                                                             "the host", "a wait"))
    done.wait(1)
    dev.free(a)
    dev.free_signal(done)
"""


def test_a_record_fails_its_example_with_the_interleaving(pytester):
    pytester.makepyfile(PLANTED)
    result = pytester.runpytest_inprocess(*QUIET)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "hcqsim memory model: this interleaving left 1 record(s)" in out
    assert "hcqsim interleaving of this failure" in out and "host took a turn" in out
    assert "ERROR at teardown" not in out  # reported once, by the example


# two compute queues, no wait between a kernel writing x and one reading it: on gfx942 an interleaving that runs
# them together places them on different XCCs, whose L2s the report model follows
KERNEL_RACE = """
from hcqsim import kernels
from hcqsim.interleaved import interleaved

PROGRAMS = {}


def program(dev, name):
    if (dev, name) not in PROGRAMS:
        PROGRAMS[dev, name] = dev.load_program(kernels.code_object(name, dev.target), name)
    return PROGRAMS[dev, name]


@interleaved()
def test_kernel_reads_another_queues_output(fuzz_device):
    dev = fuzz_device
    x, y = dev.alloc(256), dev.alloc(256)
    dev.compute_queue(0).exec(program(dev, "iota"), [x, 1, 64], 64, 64).submit()
    dev.compute_queue(1).exec(program(dev, "scale"), [x, y, 2, 64], 64, 64).submit()  # the bug: no wait for queue 0
    dev.synchronize()
    dev.free(x)
    dev.free(y)
"""


def test_a_memory_model_race_is_found_per_example_under_the_run_options(pytester):
    pytester.makepyfile(KERNEL_RACE)
    result = pytester.runpytest_inprocess("--sim-target", "gfx942", "--sim-memory-model=report", *QUIET)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "this interleaving left" in out and "missing TC_WB" in out and "hcqsim interleaving of this failure" in out


def test_without_the_options_the_same_test_passes(pytester):
    pytester.makepyfile(KERNEL_RACE.replace("@interleaved()", "@interleaved(max_examples=10)"))
    result = pytester.runpytest_inprocess(*QUIET)
    result.assert_outcomes(passed=1)
