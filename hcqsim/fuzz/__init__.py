"""Schedule fuzzing with hypothesis, one concept per module; `hcqsim.strategies` is the public face and re-exports
what users import (its docstring shows how the parts are used together).

- `profiles`: the hypothesis settings profiles (`fuzz_settings`, `register_profiles`).
- `draws`: history-free integers, the draws every strategy here makes (`integers`, HISTORY_FREE_BASE).
- `interleavings`: what an interleaving is (`Interleaving`) and the strategy that draws one (`interleavings()`).
- `interleaver`: the scheduler policy that plays an interleaving (`Interleaver`): its choices of ready activity,
  the priority order, the dispatch-internal and memory-model choices a priority seed makes.
- `cases`: a fuzz case as plain data (`FuzzCase`), its text, and its sequential meaning in numpy.
- `schedules`: the strategy that draws a `FuzzCase` (`schedules()`), with the relay motif.
- `report`: how a found race is told (`RaceReport`, `RaceFound`, the steps and trace texts).
- `seeds`: replay seeds, encoded and decoded.
- `fuzzer`: running cases on emulated devices (`Fuzzer`), compiler mutations (`mutated`) and `replay`.

Like `hcqsim.strategies`, nothing here imports the emulator or the runtime at import time.
"""
