"""The memory model (issue 17): choosing it, its records, the pytest plugin's handling of them, and (below) each
cache level and each cache-control bit shown to matter."""
import functools

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


# ====================================================================================================================
# The model: each cache level, each path and each cache-control bit shown to matter. Every case runs a stream with
# the operation and without it: with it, the coherent answer and no record under both models; without it, the
# adversarial model returns the old value and the report model names the missing operation.
# ====================================================================================================================

import numpy as np  # noqa: E402

from hcqsim import pm4, sdma  # noqa: E402

FAMILY = {"gfx1100": "gfx11", "gfx942": "gfx9"}
WB = {"gfx1100": {"gl2_wb": 1}, "gfx942": {"tc_wb_action_ena": 1}}
L2_INV = {"gfx1100": {"gl2_inv": 1}, "gfx942": {"tc_action_ena": 1}}
WB_NAME = {"gfx1100": "GL2_WB", "gfx942": "TC_WB"}
L2_INV_NAME = {"gfx1100": "GL2_INV", "gfx942": "TC"}
CACHE_FLUSH = pm4.code(pm4.EVENT_TYPES, "CACHE_FLUSH")
CACHE_FLUSH_AND_INV = pm4.code(pm4.EVENT_TYPES, "CACHE_FLUSH_AND_INV_EVENT")
OLD, NEW = 0x11111111, 0x22222222


def _gpu(target, model):
    gpu = EmulatedGPU(target, memory_model=model)
    return gpu, gpu.alloc(4096, "vram"), gpu.alloc(4096, "gtt"), gpu.compute_queue()


def _outcome(target, model, stream) -> tuple[int, list]:
    """Run `stream(gpu, vram, gtt, q) -> the address whose u32 the host reads` once; (that value, the records)."""
    gpu, vram, gtt, q = _gpu(target, model)
    try:
        addr = stream(gpu, vram, gtt, q)
        gpu.run()
        assert not gpu.faults, gpu.faults
        value = int(np.frombuffer(gpu.memory.read(addr, 4), np.uint32)[0])  # the host's read (no agent: memory)
        return value, list(gpu.memory_reports)
    finally:
        gpu.close()


def _check(target, stream, good: int, old: int, missing: str):
    """`stream(..., on=True)` (the operation present) is right and clean in both models; without it adversarial
    reads `old` and report names `missing`."""
    for model in ("report", "adversarial"):
        value, records = _outcome(target, model, functools.partial(stream, on=True))
        assert (value, records) == (good, []), (model, [str(r) for r in records])
    value, records = _outcome(target, "adversarial", stream)
    assert value == old
    value, records = _outcome(target, "report", stream)
    assert value == good and records and missing in {r.missing for r in records}, [str(r) for r in records]
    return records


def _release(target, addr, value=1, **bits):
    return pm4.release_mem(addr, value, data_sel=1, int_sel=0, family=FAMILY[target], **bits)


# -- GL2 write-back --------------------------------------------------------------------------------------------------

WRITE_BACK_FORMS = {
    "RELEASE_MEM": lambda t, sig, on: _release(t, sig, **(WB[t] if on else {})),
    "ACQUIRE_MEM": lambda t, sig, on: (pm4.acquire_mem(FAMILY[t], **WB[t]) if on else []) + _release(t, sig),
    "EVENT_WRITE CACHE_FLUSH": lambda t, sig, on: (pm4.event_write(CACHE_FLUSH, 0) if on else []) + _release(t, sig),
    "EVENT_WRITE CACHE_FLUSH_AND_INV": lambda t, sig, on: (pm4.event_write(CACHE_FLUSH_AND_INV, 0) if on else [])
    + _release(t, sig),
}


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
@pytest.mark.parametrize("form", WRITE_BACK_FORMS)
def test_a_cp_write_into_gl2_reaches_vram_only_when_written_back(target, form):
    def stream(gpu, vram, gtt, q, on=False):
        q.submit(pm4.write_data(vram.va, [NEW], dst_sel=2) + WRITE_BACK_FORMS[form](target, gtt.va, on))
        return vram.va
    (record,) = _check(target, stream, NEW, 0, WB_NAME[target])
    assert record.kind == "not written back" and "WRITE_DATA at ring+0x0" in record.writer
    assert "RELEASE_MEM" in record.reader and (record.address, record.size) == (record.address, 4)


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_memory_destinations_and_the_bypass_policy_write_through_gl2(target):
    """WRITE_DATA DST_SEL MEM and TC_L2 with CACHE_POLICY BYPASS leave nothing dirty: no write-back needed."""
    for packet in (pm4.write_data(0, [NEW], dst_sel=5), pm4.write_data(0, [NEW], dst_sel=2, cache_policy=3)):
        def stream(gpu, vram, gtt, q, packet=packet):
            q.submit([packet[0], packet[1], vram.va & 0xFFFFFFFF, vram.va >> 32, *packet[4:]] + _release(target, gtt.va))
            return vram.va
        for model in ("report", "adversarial"):
            assert _outcome(target, model, stream) == (NEW, [])


def test_gl2_discard_drops_dirty_lines():
    target = "gfx1100"  # GL2_DISCARD is a gfx11 GCR bit

    def stream(gpu, vram, gtt, q):
        q.submit(pm4.write_data(vram.va, [NEW], dst_sel=2) + pm4.acquire_mem("gfx11", gl2_discard=1, gl2_wb=1)
                 + _release(target, gtt.va))
        return vram.va
    assert _outcome(target, "adversarial", stream)[0] == 0
    value, records = _outcome(target, "report", stream)
    assert value == NEW and [r.kind for r in records] == ["discarded"]


# -- GL2 invalidate ------------------------------------------------------------------------------------------------

L2_INV_FORMS = {
    "ACQUIRE_MEM": lambda t, gtt: pm4.acquire_mem(FAMILY[t], **L2_INV[t]),
    "RELEASE_MEM": lambda t, gtt: pm4.release_mem(gtt.va + 64, 0, data_sel=1, family=FAMILY[t], **L2_INV[t]),
}


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
@pytest.mark.parametrize("form", L2_INV_FORMS)
def test_a_gl2_line_goes_stale_when_memory_changes_behind_it(target, form):
    """A clean GL2 copy of VRAM, then the host writes memory: the CP reads the old copy until GL2 is invalidated."""
    def stream(gpu, vram, gtt, q, on=False):
        q.submit(pm4.write_data(vram.va, [OLD], dst_sel=2) + _release(target, gtt.va, **WB[target]))
        gpu.run()
        vram.u32()[0] = NEW  # behind GL2's back (no HDP in the direct API: host pages are memory)
        q.submit((L2_INV_FORMS[form](target, gtt) if on else []) +
                 pm4.copy_data(vram.va, gtt.va + 8, src_sel=2, dst_sel=5))
        return gtt.va + 8
    (record,) = _check(target, stream, NEW, OLD, L2_INV_NAME[target])
    assert record.kind == "stale line" and record.writer.startswith("the host")


# -- SDMA's path -----------------------------------------------------------------------------------------------------

def _sdma_version(target):
    return "sdma6" if target == "gfx1100" else "sdma4"


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_sdma_reads_dirty_gl2_data_on_gfx11_and_memory_around_it_on_gfx942(target):
    def stream(gpu, vram, gtt, q, on=False):
        q.submit(pm4.write_data(vram.va, [NEW], dst_sel=2) + (pm4.acquire_mem(FAMILY[target], **WB[target])
                                                               if on else []))
        gpu.run()
        gpu.sdma_queue().submit(sdma.copy_linear(gtt.va, vram.va, 4, _sdma_version(target)))
        return gtt.va
    if target == "gfx1100":  # SDMA 6 is a GL2 client: the copy sees the dirty line
        for model in ("report", "adversarial"):
            assert _outcome(target, model, stream) == (NEW, [])
        return
    (record,) = _check(target, stream, NEW, 0, "TC_WB")
    assert record.kind == "not written back" and record.reader.startswith("queue sdma_0")


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_an_sdma_write_leaves_gl2_stale_only_on_gfx942(target):
    def stream(gpu, vram, gtt, q, on=False):
        q.submit(pm4.write_data(vram.va, [OLD], dst_sel=2) + _release(target, gtt.va, **WB[target]))
        gpu.run()
        gpu.sdma_queue().submit(sdma.write_untiled(vram.va, [NEW], _sdma_version(target)))
        gpu.run()
        q.submit((pm4.acquire_mem(FAMILY[target], **L2_INV[target]) if on else [])
                 + pm4.copy_data(vram.va, gtt.va + 8, src_sel=2, dst_sel=5))
        return gtt.va + 8
    if target == "gfx1100":  # SDMA 6 writes through GL2: its copy is current
        for model in ("report", "adversarial"):
            assert _outcome(target, model, stream) == (NEW, [])
        return
    (record,) = _check(target, stream, NEW, OLD, "TC")
    assert "WRITE_UNTILED" in record.writer


@pytest.mark.parametrize("user", [False, True])
def test_sdma_gcr_req_writes_gl2_back(user):
    target = "gfx1100"

    def stream(gpu, vram, gtt, q, on=False):
        q.submit(pm4.write_data(vram.va, [NEW], dst_sel=2))
        gpu.run()
        gpu.sdma_queue().submit(sdma.gcr_req(1 << 15 if on else 0, user=user))
        return vram.va
    for model in ("report", "adversarial"):
        assert _outcome(target, model, functools.partial(stream, on=True)) == (NEW, [])
    assert _outcome(target, "adversarial", stream)[0] == 0


# -- the model costs nothing when off ----------------------------------------------------------------------------

def test_the_coherent_model_has_no_model_object_and_a_plain_address_space():
    from hcqsim.memory import AddressSpace
    from hcqsim.shader import cached, lanemem
    gpu = EmulatedGPU(memory_model="coherent")  # explicit: the default follows HCQSIM_MEMORY_MODEL
    try:
        assert gpu.coherence is None and type(gpu.memory) is AddressSpace
        assert gpu.shader_core._fetch is None

        class Ctx:
            space = gpu.memory
        assert cached.vector(None, Ctx) is lanemem and cached.scalar(None, Ctx) is lanemem
    finally:
        gpu.close()


# -- the shader's levels, instructions and bits (kernels through the runtime, streams edited by hand) -------------

_HEAD = "declare i32 @llvm.amdgcn.workitem.id.x()\ndeclare void @llvm.amdgcn.s.dcache.inv()\n"
_LOAD = {"plain": "load i32, ptr addrspace(1) %p", "atomic": 'load atomic i32, ptr addrspace(1) %p syncscope("agent") '
         "monotonic, align 4"}


def _kernel(name: str, sig: str, body: str) -> str:
    return (_HEAD + f"define amdgpu_kernel void @{name}({sig}) {{\nentry:\n  %i = call i32 @llvm.amdgcn.workitem.id.x()\n"
            f"{body}  ret void\n}}\n")


def _copy_ir(name: str, fence: bool, load: str = "plain") -> str:
    return _kernel(name, "ptr addrspace(1) %in, ptr addrspace(1) %out",
                   ('  fence syncscope("agent") acquire\n' if fence else "")
                   + f"  %p = getelementptr i32, ptr addrspace(1) %in, i32 %i\n  %v = {_LOAD[load]}\n"
                     "  %q = getelementptr i32, ptr addrspace(1) %out, i32 %i\n  store i32 %v, ptr addrspace(1) %q\n")


def _const_ir(name: str, dcache_inv: bool) -> str:  # a uniform load of constant memory: s_load through GLK
    return _kernel(name, "ptr addrspace(4) %c, ptr addrspace(1) %out",
                   ("  call void @llvm.amdgcn.s.dcache.inv()\n" if dcache_inv else "")
                   + "  %v = load i32, ptr addrspace(4) %c, align 4\n"
                     "  %q = getelementptr i32, ptr addrspace(1) %out, i32 %i\n  store i32 %v, ptr addrspace(1) %q\n")


def _fill_ir(name: str, value: int, release: bool = False) -> str:
    return _kernel(name, "ptr addrspace(1) %out", "  %q = getelementptr i32, ptr addrspace(1) %out, i32 %i\n"
                   f"  store i32 {value}, ptr addrspace(1) %q\n" + ('  fence syncscope("agent") release\n'
                                                                   if release else ""))


KERNELS = {"copy": _copy_ir("copy", False), "copy_acquire": _copy_ir("copy_acquire", True),
           "copy_atomic": _copy_ir("copy_atomic", False, "atomic"), "const": _const_ir("const", False),
           "const_inv": _const_ir("const_inv", True), "fill_a": _fill_ir("fill_a", 0xA),
           "fill_b": _fill_ir("fill_b", 0xB), "fill_release": _fill_ir("fill_release", NEW, release=True)}


@functools.lru_cache(maxsize=None)
def _code(name: str, target: str) -> bytes:
    from hcqsim.compiler import compile_llvm
    return compile_llvm(KERNELS[name], target)


def _exec(q, program, args, *, acquire=None, flush=True):
    """A runtime dispatch with its leading ACQUIRE_MEM replaced (`acquire`, [] drops it) and its trailing
    CS_PARTIAL_FLUSH dropped when not `flush`."""
    n0 = len(q.packets)
    q.exec(program, args, 64, 64)
    if acquire is not None:
        q.packets[n0] = acquire
    if not flush:
        q.packets[-1] = []
    return q


def _run_stream(target, model, build, policy="run_to_block", read=lambda words: int(words[0])):
    """`build(dev, q, bufs) -> output Buffer` edits one compute stream; it runs, the host reads the output (`read`
    of its words; word 0 by default) after the runtime's signal release: full write-back and invalidate."""
    from hcqsim.runtime import open_device
    dev = open_device("sim", target=target, memory_model=model, policy=policy)
    try:
        bufs = [dev.alloc(4096) for _ in range(4)]
        for b in bufs:
            b.view[:] = np.frombuffer(np.full(1024, OLD, np.uint32).tobytes(), np.uint8)
        q = dev.compute_queue()
        out = build(dev, q, bufs)
        done = dev.new_signal(0)
        q.signal(done, 1).submit()
        done.wait(1)
        return read(out.view.view(np.uint32)), list(dev.os.system.memory_reports)
    finally:
        dev.close()


def _check_stream(target, build_with, build_without, good, old, missing):
    for model in ("report", "adversarial"):
        value, records = _run_stream(target, model, build_with)
        assert (value, records) == (good, []), (model, hex(value), [str(r) for r in records])
    assert _run_stream(target, "adversarial", build_without)[0] == old
    value, records = _run_stream(target, "report", build_without)
    assert value == good and missing in {r.missing for r in records}, [str(r) for r in records]
    return records


def _rewrite(q, buf, value=NEW):
    q._add(pm4.write_data(buf.va, [value] * 64))  # the CP writes through GL2: the vector levels keep old copies


def _reread(target, acquire, first="copy", second="copy"):
    """A stream builder: kernel `first` reads x (its caches keep x's old words), the CP rewrites x, kernel `second`
    reads x again into the output with `acquire` in place of the runtime's per-dispatch ACQUIRE_MEM."""
    def run(dev, q, bufs):
        a, b = (dev.load_program(_code(n, target), n) for n in (first, second))
        x, out1, out2 = bufs[:3]
        _exec(q, a, [x, out1])
        _rewrite(q, x)
        _exec(q, b, [x, out2], acquire=acquire)
        return out2
    return run


VECTOR_INV = {  # target -> {name: the packet before the second kernel (instead of the runtime's ACQUIRE_MEM)}
    "gfx1100": {"GLV_INV+GL1_INV": pm4.acquire_mem("gfx11", glv_inv=1, gl1_inv=1),
                "RELEASE_MEM GLV_INV+GL1_INV": pm4.release_mem(0, 0, data_sel=0, glv_inv=1, gl1_inv=1)},
    "gfx942": {"TCL1": pm4.acquire_mem("gfx9", tcl1_action_ena=1),
               "TCL1_VOL": pm4.acquire_mem("gfx9", tcl1_vol_action_ena=1),
               "RELEASE_MEM TCL1": pm4.release_mem(0, 0, data_sel=0, family="gfx9", tcl1_action_ena=1),
               "RELEASE_MEM TCL1_VOL": pm4.release_mem(0, 0, data_sel=0, family="gfx9", tcl1_vol_action_ena=1)},
}
FIRST_STALE = {"gfx1100": "GLV_INV", "gfx942": "TCL1"}


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_a_kernel_reads_a_stale_vector_line_until_the_vector_levels_are_invalidated(target):
    for name, acquire in VECTOR_INV[target].items():
        (record,) = _check_stream(target, _reread(target, acquire), _reread(target, []), NEW, OLD, FIRST_STALE[target])
        assert record.kind == "stale line" and "WRITE_DATA" in record.writer and "global_load" in record.reader


def test_gfx11_glv_and_gl1_each_need_their_own_invalidate():
    target = "gfx1100"
    build = functools.partial(_reread, target)
    for acquire, missing in ((pm4.acquire_mem("gfx11", glv_inv=1), "GL1_INV"),
                             (pm4.acquire_mem("gfx11", gl1_inv=1), "GLV_INV"),
                             (pm4.release_mem(0, 0, data_sel=0, gl1_inv=1), "GLV_INV")):
        assert _run_stream(target, "adversarial", build(acquire))[0] == OLD
        value, records = _run_stream(target, "report", build(acquire))
        assert value == NEW and {r.missing for r in records} == {missing}
    release = pm4.release_mem(0, 0, data_sel=0, glv_inv=1, gl1_inv=1)  # the RELEASE_MEM bits act too
    assert _run_stream(target, "adversarial", build(release)) == (NEW, [])


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
@pytest.mark.parametrize("kernel", ["copy_acquire", "copy_atomic"])
def test_an_acquire_fence_or_an_agent_scope_load_in_the_kernel_sees_the_new_words(target, kernel):
    """gfx11: buffer_gl1_inv + buffer_gl0_inv / a glc load; gfx942: buffer_inv sc1 / an sc1 load."""
    _check_stream(target, _reread(target, [], second=kernel), _reread(target, []), NEW, OLD, FIRST_STALE[target])


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_a_scalar_load_reads_a_stale_k_cache_line_until_glk_is_invalidated(target):
    kcache = {"gfx1100": pm4.acquire_mem("gfx11", glk_inv=1, gl1_inv=1),
              "gfx942": pm4.acquire_mem("gfx9", sh_kcache_action_ena=1)}[target]

    def build(acquire, second="const"):
        return _reread(target, acquire, "const", second)
    (record,) = _check_stream(target, build(kcache), build([]), NEW, OLD,
                              {"gfx1100": "GLK_INV", "gfx942": "SH_KCACHE"}[target])
    assert "s_load" in record.reader
    if target == "gfx1100":  # GLK refills from GL1: s_dcache_inv alone leaves the GL1 copy
        assert _run_stream(target, "adversarial", build(pm4.acquire_mem("gfx11", gl1_inv=1), "const_inv")) == \
            (NEW, [])
        assert _run_stream(target, "report", build([], "const_inv"))[1][0].missing == "GL1_INV"
    else:  # s_dcache_inv in the kernel is enough on gfx942
        _check_stream(target, build([], "const_inv"), build([]), NEW, OLD, "SH_KCACHE")


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_code_rewritten_in_place_runs_old_instructions_until_gli_is_invalidated(target):
    icache = {"gfx1100": pm4.acquire_mem("gfx11", gli_inv=1, gl1_inv=1),
              "gfx942": pm4.acquire_mem("gfx9", sh_icache_action_ena=1)}[target]

    def build(acquire):
        def run(dev, q, bufs):
            a = dev.load_program(_code("fill_a", target), "fill_a")
            b = dev.load_program(_code("fill_b", target), "fill_b")
            assert a.image.size == b.image.size and a.entry_va - a.image.va == b.entry_va - b.image.va
            out1, out2 = bufs[:2]
            _exec(q, a, [out1])  # a's instructions enter GLI
            q._add(pm4.dma_data(a.image.va, b.image.va, a.image.size))  # b's code over a's, through GL2
            _exec(q, a, [out2], acquire=acquire)
            return out2
        return run
    missing = {"gfx1100": "GLI_INV", "gfx942": "SH_ICACHE"}[target]
    records = _check_stream(target, build(icache), build([]), 0xB, 0xA, missing)
    assert {r.missing for r in records} == {missing}  # one record per instruction fetched stale
    assert all("instruction fetch" in r.reader and "DMA_DATA" in r.writer for r in records)


def test_gfx942_buffer_wbl2_in_the_kernel_writes_l2_back_before_a_release_without_tc_wb():
    from hcqsim.runtime import open_device
    target = "gfx942"

    def host_sees(model, name):
        dev = open_device("sim", target=target, memory_model=model)
        try:
            out, done, gate = dev.alloc(4096), dev.new_signal(0), dev.new_signal(0)
            q = _exec(dev.compute_queue(), dev.load_program(_code(name, target), name), [out])
            q._add(pm4.release_mem(done.value_addr, 1, data_sel=1, family="gfx9"))  # no TC_WB
            q.wait(gate, 1).submit()  # the queue holds there: the host reads before the runtime's own release
            dev.os.system.gpus[0].run()
            assert done.value == 1
            seen = int(out.view[:4].view(np.uint32)[0]), [r.missing for r in dev.os.system.memory_reports]
            gate.value = 1
            dev.os.system.gpus[0].run()
            return seen
        finally:
            dev.close()
    assert host_sees("adversarial", "fill_release") == (NEW, []) and host_sees("report", "fill_release") == (NEW, [])
    assert host_sees("adversarial", "fill_a") == (0, [])
    assert host_sees("report", "fill_a") == (0xA, ["TC_WB"])


def test_gfx942_buffer_inv_sc1_also_invalidates_the_l2_copy_an_sdma_write_went_around():
    target = "gfx942"

    def build(second):
        def run(dev, q, bufs):
            x, out1, out2 = bufs[:3]
            s1, s2 = dev.new_signal(0), dev.new_signal(0)
            # the fill waits for the first kernel of `q` (one submission: the full acquire every runtime submission
            # starts with comes before both kernels, so the second finds the L2/L1 copies the first left)
            dev.copy_queue().wait(s1, 1).fill(x, NEW, 256).signal(s2, 1).submit()  # SDMA 4: memory, around L2
            _exec(q, dev.load_program(_code("copy", target), "copy"), [x, out1]).signal(s1, 1)
            q.wait(s2, 1)
            _exec(q, dev.load_program(_code(second, target), second), [x, out2], acquire=[])
            return out2
        return run
    _check_stream(target, build("copy_acquire"), build("copy"), NEW, OLD, "TCL1")
    value, records = _run_stream(target, "report", build("copy"))
    assert {r.missing for r in records} == {"TCL1"}  # L1 first; with sc1 both copies are dropped (above)


def _placed(**choices):
    """A policy that runs in order and places workgroups as told: `cus=[...]` / `xccs=[...]`, one entry per
    workgroup in launch order (None: the model's default placement)."""
    from hcqsim.gpu import ExplicitChoices
    hooks = {k: (lambda it: lambda n: next(it))(iter(v)) for k, v in choices.items()}
    return ExplicitChoices(lambda n: (0, 1 << 30), **hooks)


def _write_between_reads(target, writer="fill_release", reader="copy", acquire=None):
    """Kernel 0 reads x (its CU's caches keep x's old words), kernel `writer` writes NEW into x, kernel `reader`
    reads x into the output; the second and third with `acquire` in place of the runtime's ACQUIRE_MEM."""
    def run(dev, q, bufs):
        x, junk, out = bufs[:3]
        first, write, read = (dev.load_program(_code(n, target), n) for n in ("copy", writer, reader))
        _exec(q, first, [x, junk])
        _exec(q, write, [x], acquire=acquire)
        _exec(q, read, [x, out], acquire=acquire)
        return out
    return run


TCL1_ONLY = pm4.acquire_mem("gfx9", tcl1_action_ena=1)  # the vector L1 only: what an L2 per XCC does not cover
VECTOR_AND_L2_INV = {"gfx1100": VECTOR_INV["gfx1100"]["GLV_INV+GL1_INV"],
                     "gfx942": pm4.acquire_mem("gfx9", tcl1_action_ena=1, tc_action_ena=1)}


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_a_copy_on_one_cu_goes_stale_when_a_dispatch_on_another_cu_writes_the_line(target):
    """Kernel 0 reads x (its CU's vector cache keeps x), kernel 1 writes x, kernel 2 reads x, no invalidate between:
    had kernel 1 run on another CU, kernel 2 on kernel 0's would read the old copy. Report names it whatever CU
    each ran on here; adversarial finds it when the policy puts kernel 1 elsewhere (`choose_cu`)."""
    stream = functools.partial(_write_between_reads, target)
    value, records = _run_stream(target, "report", stream(acquire=[]))
    assert value == NEW and [(r.kind, r.missing) for r in records][0] == ("stale line", FIRST_STALE[target])
    assert "of another CU" in records[0].level and "global_store" in records[0].writer
    kernel_1_elsewhere = dict(cus=[0, 1, 0])  # kernel 1 on CU 1, kernels 0 and 2 on CU 0
    assert _run_stream(target, "adversarial", stream(acquire=[]), _placed(**kernel_1_elsewhere))[0] == OLD
    assert _run_stream(target, "adversarial", stream(acquire=[]))[0] == NEW  # one CU: kernel 1's store updated it
    fixed = stream(acquire=VECTOR_AND_L2_INV[target])
    assert _run_stream(target, "report", fixed) == (NEW, [])
    assert _run_stream(target, "adversarial", fixed, _placed(**kernel_1_elsewhere)) == (NEW, [])


# -- an L2 per XCC (gfx942), workgroups spread over CUs and XCCs -------------------------------------------------

def test_gfx942_has_an_l2_per_xcc_of_its_topology_and_gfx1100_one():
    from hcqsim.runtime import open_device
    for target, n_xcc in (("gfx942", 8), ("gfx1100", 1)):
        dev = open_device("sim", target=target, memory_model="report")
        try:
            model = dev.os.system.gpus[0].coherence
            assert dev.os.system.gpus[0].target.num_xcc == n_xcc  # what sysfs num_xcc presents
            assert model.n_xcc == n_xcc and len(set(model.l2_names)) == n_xcc
        finally:
            dev.close()


ON_TWO_XCCS = dict(xccs=[1, 0, 1])  # kernels 0 and 2 on XCC 1, the writer on XCC 0


@pytest.mark.parametrize("form, writer, reader, acquire, missing", [
    ("no release, no L2 invalidate", "fill_a", "copy", TCL1_ONLY, "TC_WB"),
    ("released (buffer_wbl2 sc1), no L2 invalidate", "fill_release", "copy", TCL1_ONLY, "TC"),
])
def test_gfx942_a_kernel_on_another_xcc_needs_the_writers_l2_written_back_and_its_own_invalidated(
        form, writer, reader, acquire, missing):
    """Each XCC has its own L2 (facts 6.1): a dispatch's stores sit dirty in its XCC's L2; a later dispatch on
    another XCC reads memory (old) unless an agent-scope release wrote them back (buffer_wbl2 sc1, or TC_WB), and
    reads its own L2's old copy unless an agent-scope acquire dropped it (buffer_inv sc1, or TC). Report mode
    names it whatever XCC each ran on here (all on XCC 0 by default); adversarial when the policy spreads them."""
    target = "gfx942"
    broken = _write_between_reads(target, writer, reader, acquire)
    assert _run_stream(target, "adversarial", broken, _placed(**ON_TWO_XCCS))[0] == OLD
    assert _run_stream(target, "adversarial", broken)[0] != OLD  # one XCC: the L2 copy is the written one
    value, records = _run_stream(target, "report", broken)
    assert missing in {r.missing for r in records}, [str(r) for r in records]
    assert any("of another XCC" in r.level and "global_store" in r.writer and "global_load" in r.reader
               for r in records if r.missing == missing), [str(r) for r in records]


@pytest.mark.parametrize("form, writer, reader, acquire", [
    ("agent-scope fences in the kernels", "fill_release", "copy_acquire", TCL1_ONLY),
    ("the runtime's ACQUIRE_MEM (TC_WB, TC)", "fill_a", "copy", None),
])
def test_gfx942_a_kernel_on_another_xcc_sees_the_words_after_an_agent_scope_release_and_acquire(
        form, writer, reader, acquire):
    target = "gfx942"
    want = 0xA if writer == "fill_a" else NEW
    fixed = _write_between_reads(target, writer, reader, acquire)
    for policy in ("run_to_block", _placed(**ON_TWO_XCCS), _placed(xccs=[0, 1, 0]), "random"):
        assert _run_stream(target, "adversarial", fixed, policy) == (want, []), policy
    assert _run_stream(target, "report", fixed) == (want, [])


HANDOFF_BARRIER = 'call void asm sideeffect "", "~{memory}"()'  # orders the compiler only: no cache operation


def _handoff_ir(fences: bool) -> str:
    """Two workgroups of one dispatch: both read x (their caches keep x's old words); workgroup 0 stores NEW into
    x and raises a flag (an agent-scope atomic); workgroup 1 waits for the flag and reads x again into out (its
    first read into out + 64). `fences`: LLVM's agent-scope release before the flag and acquire after it."""
    release = 'fence syncscope("agent") release' if fences else HANDOFF_BARRIER
    acquire = 'fence syncscope("agent") acquire' if fences else HANDOFF_BARRIER
    return f"""declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()
define amdgpu_kernel void @handoff(ptr addrspace(1) %x, ptr addrspace(1) %flag, ptr addrspace(1) %out) {{
entry:
  %i = call i32 @llvm.amdgcn.workitem.id.x()
  %g = call i32 @llvm.amdgcn.workgroup.id.x()
  %p = getelementptr i32, ptr addrspace(1) %x, i32 %i
  %old = load i32, ptr addrspace(1) %p
  {HANDOFF_BARRIER}
  %isr = icmp ne i32 %g, 0
  br i1 %isr, label %reader, label %writer
writer:
  store i32 {NEW}, ptr addrspace(1) %p
  {release}
  %lane0 = icmp eq i32 %i, 0
  br i1 %lane0, label %publish, label %done
publish:
  store atomic i32 1, ptr addrspace(1) %flag syncscope("agent") monotonic, align 4
  br label %done
reader:
  %f = load atomic i32, ptr addrspace(1) %flag syncscope("agent") monotonic, align 4
  %ready = icmp ne i32 %f, 0
  br i1 %ready, label %go, label %reader
go:
  {acquire}
  %v = load i32, ptr addrspace(1) %p
  %o = getelementptr i32, ptr addrspace(1) %out, i32 %i
  store i32 %v, ptr addrspace(1) %o
  %j = add i32 %i, 64
  %o2 = getelementptr i32, ptr addrspace(1) %out, i32 %j
  store i32 %old, ptr addrspace(1) %o2
  br label %done
done:
  ret void
}}
"""


@functools.lru_cache(maxsize=None)
def _handoff_code(target: str, fences: bool) -> bytes:
    from hcqsim.compiler import compile_llvm
    return compile_llvm(_handoff_ir(fences), target)


def _handoff(target, model, fences, policy="run_to_block"):
    """(what workgroup 1 read after the flag, its first read, the records): two workgroups of 32 work-items."""
    def build(dev, q, bufs):
        x, flag, out = bufs[:3]
        flag.view[:] = 0
        q.exec(dev.load_program(_handoff_code(target, fences), "handoff"), [x, flag, out], 64, 32)
        return out
    (after, before), records = _run_stream(target, model, build, policy, read=lambda w: (int(w[0]), int(w[64])))
    return after, before, records


HANDOFF_MISSING = {"gfx1100": {"GLV_INV"}, "gfx942": {"TCL1", "TC_WB"}}


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_workgroups_of_one_dispatch_on_different_cus_need_agent_scope_fences_to_hand_data_over(target):
    """The two workgroups run on different CUs (gfx942: different XCCs) by default: without fences workgroup 1
    reads its CU's old copy (and, gfx942, memory under workgroup 0's dirty L2 line); report names the vector-cache
    invalidate (and the write-back) missing, writer workgroup 0's store, reader workgroup 1's load."""
    assert _handoff(target, "adversarial", fences=False)[:2] == (OLD, OLD)
    value, first, records = _handoff(target, "report", fences=False)
    assert (value, first) == (NEW, OLD)  # report mode keeps the coherent values
    assert {r.missing for r in records} == HANDOFF_MISSING[target], [str(r) for r in records]
    assert all("global_store" in r.writer and "global_load" in r.reader and r.writer != r.reader for r in records)
    for model in ("report", "adversarial"):
        assert _handoff(target, model, fences=True) == (NEW, OLD, []), model
    assert _handoff(target, "adversarial", fences=True, policy="random")[:2] == (NEW, OLD)


def test_a_dispatch_keeps_its_cu_while_another_queues_dispatch_is_placed_between_its_steps():
    """gfx942 (no GL1 to hide it): kernel 0 leaves x's old words in CU 0's vector cache, the CP rewrites x; then a
    kernel on CU 1 (queue 0) and one on CU 0 (queue 1) run interleaved, issue step by issue step. The CU 1 kernel
    must read x through CU 1 (nothing there: the new words) even after the other kernel was placed on CU 0."""
    from hcqsim.gpu import ExplicitChoices
    from hcqsim.runtime import open_device
    target, turn = "gfx942", [0]

    def rotate(n):
        turn[0] += 1
        return turn[0] % n, 1
    policy = ExplicitChoices(rotate)
    dev = open_device("sim", target=target, memory_model="adversarial", policy=policy)
    gpu = dev.os.system.gpus[0]
    # the reader is the only dispatch that is second on its queue: CU 1; the others CU 0
    policy.choose_cu = lambda n: 1 if gpu.coherence.agent.seq == 1 else 0
    try:
        x, junk, out, y, other = bufs = [dev.alloc(4096) for _ in range(5)]
        for b in bufs:
            b.view[:] = np.frombuffer(np.full(1024, OLD, np.uint32).tobytes(), np.uint8)
        prog = dev.load_program(_code("copy", target), "copy")
        go, done0, done1 = dev.new_signal(0), dev.new_signal(0), dev.new_signal(0)
        q1 = dev.compute_queue(1).wait(go, 1)
        _exec(q1, prog, [y, other], acquire=[]).signal(done1, 1).submit()  # on CU 0, beside the reader
        q0 = dev.compute_queue(0)
        _exec(q0, prog, [x, junk])  # CU 0 keeps x's old words
        _rewrite(q0, x)
        q0._add(pm4.write_data(go.value_addr, [1]))  # opens queue 1's gate without a cache action
        _exec(q0, prog, [x, out], acquire=[])  # the reader, on CU 1
        q0.signal(done0, 1).submit()
        done0.wait(1)
        done1.wait(1)
        assert int(out.view[:4].view(np.uint32)[0]) == NEW
    finally:
        dev.close()


def test_workgroups_placed_on_one_cu_see_each_others_stores_without_fences():
    """The placement is the policy's: both workgroups on one CU (and XCC) share every cache, so the same unfenced
    kernel reads the new words; the default puts them apart."""
    for target in ("gfx1100", "gfx942"):
        together = _placed(cus=[0, 0], xccs=[0, 0])
        assert _handoff(target, "adversarial", fences=False, policy=together)[:2] == (NEW, OLD)


# -- partial flushes ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_dependent_dispatches_without_a_partial_flush_are_recorded(target):
    def build(flush):
        def run(dev, q, bufs):
            prog = dev.load_program(_code("copy", target), "copy")
            x, y, z = bufs[:3]
            _exec(q, prog, [x, y], flush=flush)  # writes y
            _exec(q, prog, [y, z])  # reads y: may run beside the first dispatch without the flush
            return z
        return run
    assert _run_stream(target, "report", build(True)) == (OLD, [])
    value, records = _run_stream(target, "report", build(False))
    # gfx942 also: the second dispatch's acquire (TC_WB | TC, an L2 per XCC) may run before the first dispatch's
    # stores, which happen-before orders nothing before it, so they may still be dirty in its XCC's L2
    also = [("not written back", "TC_WB")] if target == "gfx942" else []
    assert value == OLD and [(r.kind, r.missing) for r in records] == [("no partial flush", "CS_PARTIAL_FLUSH")] + also
    assert "dispatch 0" in records[0].writer and "dispatch 1" in records[0].reader


@pytest.mark.parametrize("target", ["gfx1100", "gfx942"])
def test_a_write_data_after_a_dispatch_without_a_partial_flush_is_recorded(target):
    def build(flush):
        def run(dev, q, bufs):
            prog = dev.load_program(_code("copy", target), "copy")
            _exec(q, prog, [bufs[0], bufs[1]], flush=flush)
            q._add(pm4.write_data(bufs[2].va, [NEW]))  # "the kernel is done" -- it may not be
            return bufs[2]
        return run
    assert _run_stream(target, "report", build(True)) == (NEW, [])
    value, records = _run_stream(target, "report", build(False))
    assert [(r.kind, r.missing) for r in records] == [("no partial flush", "CS_PARTIAL_FLUSH")]
    assert "WRITE_DATA" in records[0].reader


# -- adversarial evictions: a policy choice ---------------------------------------------------------------------

def test_without_an_eviction_hook_a_dirty_line_stays_until_written_back_and_a_policy_may_evict_it():
    from hcqsim.gpu import ExplicitChoices
    asked = []

    def run(policy):
        gpu = EmulatedGPU(memory_model="adversarial", policy=policy)
        try:
            vram, q = gpu.alloc(4096, "vram"), gpu.compute_queue()
            q.submit(pm4.write_data(vram.va, [NEW], dst_sel=2))
            q.submit(pm4.nop(2) if hasattr(pm4, "nop") else pm4.write_data(vram.va + 256, [0], dst_sel=5))
            return int(vram.u32()[0])
        finally:
            gpu.close()
    assert run("run_to_block") == 0  # kept dirty: nothing wrote it back
    evict_all = ExplicitChoices(lambda n: (0, 1 << 30), evictions=lambda n: asked.append(n) or list(range(n)))
    assert run(evict_all) == NEW and asked  # the policy evicted it at the second progress point: written back
