"""Schedule fuzzing with hypothesis: random operation DAGs, interleavings chosen on purpose, race reports.

    from hcqsim.strategies import Interleaver, interleavings, fuzz_settings
    chooser = Interleaver()                        # a scheduler policy whose choices hypothesis makes (host turns on)
    dev = open_device("sim", policy=chooser)

    @fuzz_settings()
    @given(interleavings())
    def test_my_pipeline(choices):
        with chooser.using(choices):               # any runtime code: queues, signals, schedules
            out = my_pipeline(dev)
        assert out == expected

A failure inside `using` carries a note: the interleaving as queue/packet steps, the packet trace of the run
and a seed; `replay(seed, test_my_pipeline)` runs the test body again under exactly those choices.

`schedules()` draws a `FuzzCase`: fills, copies, kernels and host writes over small buffers on one to three
devices, with byte-granular, unaligned and partially overlapping ranges, parameters, several submits per queue
(a small `batch_limit`), work still in flight on every device's timeline (peer writes included), and several
runs of one compiled schedule that rebind buffers and change parameters. `Fuzzer.check` compiles it with the
schedule compiler, runs it under an interleaving and compares every buffer with the sequential meaning computed
here in numpy; a difference raises `RaceFound` carrying a `RaceReport`.

`mutated(...)` switches on deliberately broken compiler rules (hcqsim.runtime.plan.MUTATIONS) so tests can show
the fuzzer catches them. Profiles: `fuzz_settings()` is short and derandomized (CI, safe under pytest-xdist: no
example database is written unless asked); HCQSIM_FUZZ=nightly (or pytest's `--hypothesis-profile
hcqsim-nightly`) runs long random searches, and HCQSIM_FUZZ_DB=/shared/dir stores failures in a directory
example database every worker and machine reads.

Hypothesis is a test dependency: this module imports it at import time, and nothing in the runtime imports
this module. It does not import the emulator at import time (the pytest plugin registers the profiles).

The parts live in `hcqsim.fuzz`, one concept per module: `profiles` (fuzz_settings), `draws` (history-free
integers), `interleavings` (what an interleaving is, the strategy), `interleaver` (the scheduler policy that plays
one), `cases` (FuzzCase and its sequential meaning), `schedules` (the FuzzCase strategy), `report` (RaceReport,
RaceFound), `seeds` (replay seeds) and `fuzzer` (Fuzzer, mutated, replay). This module re-exports all of it: import
from here.
"""
from __future__ import annotations

from .fuzz.profiles import (PROFILES, HYPOTHESIS_PROFILE_PREFIX, _PHASES, _QUIET, _profile_name, fuzz_settings,
                            register_profiles)  # noqa: F401
from .fuzz.draws import (HISTORY_FREE_BASE, U32, _CHOICE, _COIN, _HISTORY_FREE_SPAN, _KEEP, _bytes, _int, _pick,
                         _unshift, _window, integers)  # noqa: F401
from .fuzz.interleavings import MAX_CHOICES, Interleaving, _as_interleaving, interleavings  # noqa: F401
from .fuzz.interleaver import (CHANGE_POINT_DEPTHS, CHANGE_POINT_RATES, Interleaver, _HostTurn,  # noqa: F401
                               _NOT_THE_HOST_CODE, _change_points, _permutation, _queue_of, unsliced_waits)
from .fuzz.cases import (ALT, BUFFER_BYTES, BUFFERS_PER_DEVICE, FUZZ_KERNELS, KERNEL_WORDS, LONG_BUFFER_BYTES,
                         MAX_SCALAR, FuzzCase, _apply, _op_text, _value_text, all_buffer_names, buffer_names,
                         initial_memory, sequential_effects)  # noqa: F401
from .fuzz.schedules import (_RELAY_OPS, _RELAY_SLOTS, _buffer, _buffers_of, _cuts, _op, _range, _relay,
                             schedules)  # noqa: F401
from .fuzz.report import (RaceFound, RaceReport, _SETUP, _SETUP_LINE, _budget_text, _collapse_setup,  # noqa: F401
                          _collapsed, _trace_slice, steps_text, trace_text)
from .fuzz.seeds import _decode, _encode, decode_seed, encode_interleaving_seed, encode_seed  # noqa: F401
from .fuzz.fuzzer import (COPY_QUEUES, MAX_DEVICES, PRELUDE_QUEUE, Fuzzer, _NotedBytes, _names_used, mutated,
                          replay)  # noqa: F401
