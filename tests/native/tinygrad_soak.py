"""A soak of tinygrad's unmodified AMD runtime on hcqsim: one process, N emulated GPUs, free-running.

Run as `python tests/native/tinygrad_soak.py ROUNDS GPUS` with tinygrad importable (tests/test_tinygrad.py fetches
it). Every round, on every GPU: elementwise kernels, a reduction, a TinyJit'd function (tinygrad's HCQ graph), a
copy to the next GPU (SDMA or a peer copy) and a subbuffer view; once per round a tensor sharded over all GPUs and
an all-reduce. Every result is checked against numpy. The last line is `soak: ...` with the counts, then the
machine's health (tests/tinygrad_hcqsim.health): the GPU thread alive, no fault, every queue idle.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from hcqsim.kfd import EmulatedSystem  # noqa: E402
from tests import tinygrad_hcqsim  # noqa: E402


def main(rounds: int, gpus: int, target: str = "gfx1100", seed: int = 0) -> int:
    system = EmulatedSystem(num_gpus=gpus, target=target, free_running=True)
    tinygrad_hcqsim.install(system)
    from tinygrad import Tensor, TinyJit

    devs = [f"AMD:{i}" for i in range(gpus)]
    rng = np.random.default_rng(seed)

    def step(a: Tensor, b: Tensor) -> Tensor:
        return ((a * b) + a.exp2().log2()).contiguous().realize()

    jits = {dev: TinyJit(step) for dev in devs}  # a TinyJit replays on the device it captured

    checks, wrong, start = 0, [], time.monotonic()

    def check(what: str, got, want) -> None:
        nonlocal checks
        checks += 1
        if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
            wrong.append(f"{what}: got {np.asarray(got).ravel()[:4]}, want {np.asarray(want).ravel()[:4]}")

    try:
        run_rounds(rounds, devs, rng, jits, check, Tensor)
    except Exception as e:  # noqa: BLE001 - the machine's state is the evidence
        print(f"soak: stopped by {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        print(tinygrad_hcqsim.health(system))
        for gpu in system.gpus:
            for f in gpu.faults[:3]:
                print(f"fault: {f}")
        sys.stdout.flush()
        os._exit(2)
    seconds = time.monotonic() - start
    for w in wrong[:10]:
        print("WRONG", w)
    print(f"soak: rounds {rounds}, gpus {gpus}, checks {checks}, wrong {len(wrong)}, seconds {seconds:.1f}")
    print(tinygrad_hcqsim.health(system))
    sys.stdout.flush()
    os._exit(0 if not wrong else 1)  # tinygrad's atexit teardown talks to devices the emulator is closing


def run_rounds(rounds, devs, rng, jits, check, Tensor) -> None:
    gpus = len(devs)
    for r in range(rounds):
        for i, dev in enumerate(devs):
            x = rng.standard_normal(512).astype(np.float32)
            y = rng.standard_normal(512).astype(np.float32)
            tx, ty = Tensor(x, device=dev), Tensor(y, device=dev)
            z = (tx * ty + 1).relu()
            check(f"round {r} {dev} relu(x*y+1)", z.numpy(), np.maximum(x * y + 1, 0))
            check(f"round {r} {dev} sum", z.sum().numpy(), np.maximum(x * y + 1, 0).sum())
            j = jits[dev](tx, ty)
            check(f"round {r} {dev} jit", j.numpy(), x * y + np.log2(np.exp2(x)))
            peer = devs[(i + 1) % gpus]
            moved = z.to(peer).realize()
            check(f"round {r} {dev}->{peer} copy", (moved * 2).numpy(), 2 * np.maximum(x * y + 1, 0))
            view = tx[128:256].contiguous() + 0
            check(f"round {r} {dev} subbuffer", view.numpy(), x[128:256])
        big = rng.standard_normal((gpus * 64, 16)).astype(np.float32)
        sharded = Tensor(big).shard(tuple(devs), axis=0)
        check(f"round {r} sharded sum", (sharded * 3).sum().numpy(), (big * 3).sum())
        check(f"round {r} sharded matmul", (sharded @ Tensor.ones(16, 4).to(tuple(devs))).numpy(),
              big @ np.ones((16, 4), np.float32))



if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), *(sys.argv[3:4]))
