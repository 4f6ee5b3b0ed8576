"""The memory model's mutants (issue 17 item 3): bugs planted in the model, each caught by a test of
tests/test_memory_model_streams.py or tests/test_memory_model_runtime.py.

The streams were written from the facts before the model's code was read; the model was read afterwards only to
find where to plant these (as tests/test_conformance_mutants.py plants in the engines). Each mutant is planted with
monkeypatch for one test and lists the checks expected to catch it: the stream tests' own functions (report mode,
and adversarial under the default schedule, which is enough for a broken flush: the model keeps stale and dirty
lines until something acts). `-m slow` runs every check against every mutant and prints the table.
"""
from __future__ import annotations

import numpy as np
import pytest

import test_memory_model as M
import test_memory_model_runtime as R
import test_memory_model_streams as S
from hcqsim import pm4
from hcqsim.coherence import hdp as hdp_module
from hcqsim.coherence import model as cache_model
from hcqsim.engines.command_processor import PM4Queue
from hcqsim.engines.sdma_engine import SDMAQueue
from hcqsim.kfd.memory import ProcessMemory


# -- the plants --------------------------------------------------------------------------------------------------


def ignore_actions(*names):
    """RELEASE_MEM / ACQUIRE_MEM / GCR_REQ / cache events no longer perform these cache actions (model names)."""
    def plant(mp):
        perform = cache_model.CacheModel.perform
        mp.setattr(cache_model.CacheModel, "perform",
                   lambda self, ops, slot=None: perform(self, set(ops) - set(names), slot))
    return plant


def sdma4_through_gl2(mp):
    """SDMA treated as GL2-coherent on gfx9 (as SDMA 6 is)."""
    init = cache_model.CacheModel.__init__

    def patched(self, *a, **kw):
        init(self, *a, **kw)
        self.sdma_through_gl2 = True
    mp.setattr(cache_model.CacheModel, "__init__", patched)


def hdp_flush_no_op(mp):
    """Every HDP flush (MMIO page, PM4 write-wait, SDMA POLL_REGMEM) leaves the host's stores buffered."""
    mp.setattr(hdp_module.HostMappedVram, "flush", lambda self, hdp: None)


def gtt_through_hdp(mp):
    """CPU stores to system memory (GTT) buffered in the HDP as VRAM stores are."""
    cpu_mapped = ProcessMemory.cpu_mapped

    def patched(self, bo, length):
        cpu_mapped(self, bo, length)
        if bo.kind != "vram":
            bo.device.gpu.hdp.host_mapped(bo.va, bo.va + length, f"GTT BO 0x{bo.handle:x}")
    mp.setattr(ProcessMemory, "cpu_mapped", patched)


def coherent_allocations_cached(mp):
    """COHERENT|UNCACHED allocations get their kind's ordinary memory type (cached like any other)."""
    init = cache_model.MapState.__init__

    def patched(self, m):
        init(self, m)
        if self.mtype == "uc" and m.kind in ("gtt", "vram", "userptr"):
            self.mtype = cache_model.DEFAULT_MTYPE[m.kind]
    mp.setattr(cache_model.MapState, "__init__", patched)


def gcr_req_ignored(mp):
    """SDMA GCR_REQ does nothing."""
    mp.setattr(SDMAQueue, "_execGCR_REQ", lambda self, stream, pos, v, dws: None)


def partial_flush_not_waiting(mp):
    """EVENT_WRITE CS_PARTIAL_FLUSH no longer waits for (or orders after) the queue's earlier dispatches."""
    execute = PM4Queue._execEVENT_WRITE

    def patched(self, stream, pos, v):
        if v["event_type"] == pm4.CS_PARTIAL_FLUSH:
            return None
        return execute(self, stream, pos, v)
    mp.setattr(PM4Queue, "_execEVENT_WRITE", patched)


def xccs_share_one_l2(mp):
    """Every XCC's workgroups use one L2 (gfx942 modelled as if its L2 were shared)."""
    mp.setattr(cache_model, "l2_name", lambda xcc: "GL2")


def one_cu_per_dispatch(mp):
    """Every workgroup of a dispatch placed on CU slot 0 (the default placement no longer spreads them)."""
    mp.setattr(cache_model.CacheModel, "place", lambda self, dispatch, ids: np.zeros(len(ids), np.int64))


def slot_not_restored(mp):
    """A dispatch resumed after another dispatch was placed keeps running on that one's CU slot."""
    from hcqsim.shader import core
    mp.setattr(core.ActiveDispatch, "home_slot", property(lambda self: self.core.gpu.coherence.slot,
                                                          lambda self, v: None), raising=False)


def runtime_acquire_without_l2(mp):
    """The runtime's per-dispatch ACQUIRE_MEM on gfx9 without TC_WB and TC (the vector L1 and K$ only)."""
    from hcqsim.runtime import program
    acquire = pm4.acquire_mem
    mp.setattr(program.pm4, "acquire_mem", lambda family, **bits: acquire(family, **(
        {k: v for k, v in bits.items() if k not in ("tc_action_ena", "tc_wb_action_ena")}
        if family == "gfx9" and set(bits) == {"sh_kcache_action_ena", "tcl1_action_ena", "tc_action_ena",
                                              "tc_wb_action_ena"} else bits)))


# -- the checks ----------------------------------------------------------------------------------------------------

STREAM = {s.name: s for s in S.STREAMS}


def broken_is_reported(name, target):
    def check():
        S.test_report_names_the_missing_operation_writer_and_reader(STREAM[name], target)
    return f"report names the missing operation of {name}-{target}", check


def correct_is_clean(name, target):
    def check():
        S.test_report_correct_stream_is_clean(STREAM[name], target)
        out, _ = S.run_once(STREAM[name].run, target, "adversarial", fixed=True)
        assert out.right, f"adversarial, default schedule: got {out.got[:4]}, want {out.want[:4]}"
    return f"correct {name}-{target} clean (report; adversarial default schedule)", check


def fact_holds(fact, target):
    def check():
        S.test_fact_is_not_reported(fact, target)
        out, _ = S.run_once(lambda r, fixed: fact(r), target, "adversarial", fixed=True)
        assert out.right, f"adversarial, default schedule: got {out.got[:4]}, want {out.want[:4]}"
    return f"fact {fact.__name__}-{target}", check


def model_test(test, *args):
    """A test of tests/test_memory_model.py (the per-XCC L2 and placement cases)."""
    return f"{test.__name__}{list(args)}", lambda: test(*args)


def runtime_pattern_clean(pattern, target):
    def check():
        R.clean_in_report_mode(pattern, target)
    return f"runtime {pattern.__name__}-{target} clean (report)", check


MUTANTS = {  # name -> (plant, the checks expected to catch it)
    "GL2_WB / TC_WB ignored": (ignore_actions("GL2_WB"), [
        correct_is_clean("release_without_write_back", "gfx1100"),
        correct_is_clean("sdma_copy_of_output_never_written_back", "gfx942"),
        runtime_pattern_clean(R.exec_then_host_reads_vram, "gfx942")]),
    "GLK_INV / SH_KCACHE ignored": (ignore_actions("GLK_INV"), [
        correct_is_clean("kernargs_rewritten_without_glk_invalidate", "gfx1100"),
        correct_is_clean("kernargs_rewritten_without_glk_invalidate", "gfx942")]),
    "GLI_INV / SH_ICACHE ignored": (ignore_actions("GLI_INV"), [
        correct_is_clean("code_rewritten_without_gli_invalidate", "gfx1100")]),
    "GLV_INV and GL1_INV / TCL1 ignored": (ignore_actions("GLV_INV", "GL1_INV"), [
        correct_is_clean("kernel_after_sdma_without_acquire", "gfx942")]),
    "GL2_INV / TC ignored": (ignore_actions("GL2_INV"), [
        correct_is_clean("kernel_after_sdma_without_acquire", "gfx942"),
        runtime_pattern_clean(R.copyin_exec_copyout_twice, "gfx942")]),
    "SDMA 4 through L2 (GL2-coherent on gfx9)": (sdma4_through_gl2, [
        broken_is_reported("sdma_copy_of_output_never_written_back", "gfx942")]),
    "HDP flush a no-op": (hdp_flush_no_op, [
        correct_is_clean("host_write_without_hdp_flush", "gfx1100"),
        fact_holds(S.hdp_flush_from_the_ring, "gfx942")]),
    "GTT stores buffered in the HDP": (gtt_through_hdp, [fact_holds(S.host_write_to_gtt_needs_no_hdp_flush, "gfx1100")]),
    "coherent allocations cached": (coherent_allocations_cached, [
        fact_holds(S.coherent_input_needs_no_invalidate, "gfx1100"),
        fact_holds(S.coherent_input_needs_no_invalidate, "gfx942")]),
    "SDMA GCR_REQ ignored": (gcr_req_ignored, [fact_holds(S.sdma_gcr_req_invalidates_the_vector_caches, "gfx1100")]),
    "CS_PARTIAL_FLUSH not waiting": (partial_flush_not_waiting, [
        correct_is_clean("dependent_dispatches_without_partial_flush", "gfx1100")]),
    "XCCs share one L2 (gfx942)": (xccs_share_one_l2, [
        model_test(M.test_gfx942_a_kernel_on_another_xcc_needs_the_writers_l2_written_back_and_its_own_invalidated,
                   "no release, no L2 invalidate", "fill_a", "copy", M.TCL1_ONLY, "TC_WB"),
        model_test(M.test_gfx942_has_an_l2_per_xcc_of_its_topology_and_gfx1100_one)]),
    "a dispatch's workgroups all on one CU": (one_cu_per_dispatch, [
        model_test(M.test_workgroups_of_one_dispatch_on_different_cus_need_agent_scope_fences_to_hand_data_over,
                   "gfx1100"),
        model_test(M.test_workgroups_of_one_dispatch_on_different_cus_need_agent_scope_fences_to_hand_data_over,
                   "gfx942")]),
    "a resumed dispatch on the last placed one's CU": (slot_not_restored, [
        model_test(M.test_a_dispatch_keeps_its_cu_while_another_queues_dispatch_is_placed_between_its_steps)]),
    "runtime per-dispatch acquire without TC_WB / TC (gfx942)": (runtime_acquire_without_l2, [
        model_test(M.test_gfx942_a_kernel_on_another_xcc_sees_the_words_after_an_agent_scope_release_and_acquire,
                   "the runtime's ACQUIRE_MEM (TC_WB, TC)", "fill_a", "copy", None)]),
}


def caught_by(checks) -> list[str]:
    """The names of the checks that fail (an AssertionError, or the machine stuck or faulting: any exception)."""
    out = []
    for name, check in checks:
        try:
            check()
        except Exception as e:  # noqa: BLE001 (a planted bug may surface as any failure)
            out.append(f"{name}: {type(e).__name__}")
    return out


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_the_mutant_is_caught(monkeypatch, mutant):
    plant, checks = MUTANTS[mutant]
    plant(monkeypatch)
    assert caught_by(checks), f"mutant {mutant!r} survived every check meant to catch it"


def all_checks() -> list:
    checks = []
    for stream in S.STREAMS:
        for t in stream.targets:
            checks += [correct_is_clean(stream.name, t)]
            if not any(key[:2] == (stream.name, t) and key[2] == "report" for key in S.NOT_MODELLED):
                checks += [broken_is_reported(stream.name, t)]
    for p in S.REPORT_FACTS:  # (sdma6_reads_kernel_output_through_gl2 is a values-only fact)
        fact, t = p.values
        checks.append(fact_holds(fact, t))
    for pattern in R.PATTERNS:
        for t in R.TARGETS:
            checks.append(runtime_pattern_clean(pattern, t))
    seen = {name for name, _ in checks}  # and each mutant's own checks not among them (tests/test_memory_model.py)
    for _, listed in MUTANTS.values():
        for name, check in listed:
            if name not in seen:
                seen.add(name)
                checks.append((name, check))
    return checks


@pytest.mark.slow
def test_the_table_of_mutants_and_what_catches_them(monkeypatch, capsys):
    """Every check against every mutant (about a minute per mutant): each mutant must be caught; the table shows
    by what."""
    checks = all_checks()
    assert not caught_by(checks), "a check fails without any mutant"
    lines, survivors = [], []
    for mutant, (plant, _) in MUTANTS.items():
        with monkeypatch.context() as mp:
            plant(mp)
            found = caught_by(checks)
        lines.append(f"{mutant}: caught by {len(found)} of {len(checks)} checks")
        lines += [f"    {f}" for f in found]
        if not found:
            survivors.append(mutant)
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert not survivors, f"survived every check: {survivors}"


def test_a_mutant_is_planted_only_inside_its_test():
    """The plants are monkeypatches: outside a mutant test the model is the real one (a correct stream is clean)."""
    out, reports = S.run_once(S.release_without_write_back, "gfx1100", "report", fixed=True)
    assert out.right and not reports and np.array_equal(out.got, out.want)
