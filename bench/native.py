"""Native HIP on hcqsim, as `name: value` lines: bench/native_bench.c run by `hcqsim run --stack debian13-hip`.

ioctls_per_s: AMDKFD_IOC_GET_VERSION issued by native code through the interposer (C -> ctypes callback -> the
emulated driver -> back), before ROCr starts.
dlopen_hip_s: dlopen of libamdhip64 (the loader maps HIP, ROCr, comgr and LLVM; no driver call yet).
hipInit_s: hipInit plus the first hipMalloc (ROCr and HIP bring-up on the emulated KFD).
hipInit_to_first_kernel_s: hipInit, the first hipMalloc, hipModuleLoadData of the scale kernel, one launch and
  hipDeviceSynchronize: native start-up to the first kernel finished (issue 20 target: <= 0.5 s).
hipMemcpy_{h2d,d2h}_{4KiB,1MiB,64MiB}_GBps: pageable host memory (HIP stages it; SDMA on, ROCr's default).
runtime_copyin/copyout_{...}_GBps: the same transfer through hcqsim's own runtime (`dev.copyin` / `dev.copyout`,
staged the same way), in this process: the baseline.
kernel_launch_sync_us: one 256-work-item hipModuleLaunchKernel + hipDeviceSynchronize.
process_wall_s: the whole native run, interpreter start included.

    python3 bench/native.py [--target gfx942|gfx1100]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hcqsim.compiler import compile_llvm  # noqa: E402
from hcqsim.native import build, stacks  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(os.path.dirname(HERE), "tests", "native", "scale.ll")) as _f:
    SCALE_IR = _f.read()  # the kernel tests/test_native_hip.py runs: out[i] = in[i] * k + i

SIZES = {"4KiB": (4096, 50), "1MiB": (1 << 20, 10), "64MiB": (64 << 20, 2)}


def native(target: str) -> list[str]:
    stacks.fetch("debian13-hip")
    program = build.program_path(os.path.join(HERE, "native_bench.c"))
    with tempfile.TemporaryDirectory() as tmp:
        co = os.path.join(tmp, "scale.co")
        with open(co, "wb") as f:
            f.write(compile_llvm(SCALE_IR, target, code_object_version=5, link=True))
        t = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "hcqsim", "run", "--stack", "debian13-hip", "--target", target,
                               "--", str(program), co], capture_output=True, text=True, timeout=int(os.environ.get("NATIVE_BENCH_TIMEOUT", "900")))
        wall = time.perf_counter() - t
    lines = [line for line in done.stdout.splitlines() if ": " in line and not line.startswith("FAIL")]
    if done.returncode != 0:
        raise SystemExit(f"native bench failed ({done.returncode}): {done.stdout[-500:]} {done.stderr[-1500:]}")
    return lines + [f"process_wall_s: {wall:.2f}"]


def runtime_baseline(target: str) -> list[str]:
    from hcqsim.runtime import open_device
    dev = open_device("sim", target=target)
    out = []
    try:
        for name, (size, reps) in SIZES.items():
            buf = dev.alloc(size)
            data = b"\x01" * size
            dev.copyin(buf, data)
            t = time.perf_counter()
            for _ in range(reps):
                dev.copyin(buf, data)
            out.append(f"runtime_copyin_{name}_GBps: {size * reps / (time.perf_counter() - t) / 1e9:.4f}")
            t = time.perf_counter()
            for _ in range(reps):
                dev.copyout(buf, size)
            out.append(f"runtime_copyout_{name}_GBps: {size * reps / (time.perf_counter() - t) / 1e9:.4f}")
            dev.free(buf)
    finally:
        dev.close()
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--target", default="gfx942", choices=["gfx942", "gfx1100"])
    args = p.parse_args()
    print(f"target: {args.target}")
    for line in native(args.target) + runtime_baseline(args.target):
        print(line)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from timing import header, help_requested
    help_requested(__doc__)
    header("bench/native.py")
    main()
