"""The conformance suite: scenarios (data), an effect record per scenario, a reference model, a runner.

    scenarios.py   the scenarios and their syntax (expand)
    effects.py     the canonical effect record and its comparison
    reference.py   the reference model (numpy only: no emulator, no runtime)
    runner.py      a scenario through hcqsim.runtime on "sim" or "AMD"
    golden/        recorded effect files (hcqsim conformance --record)

`hcqsim conformance` (hcqsim/cli.py) runs them; docs/conformance.md describes the lab procedure.
"""
