"""`hcqsim run [--target gfx942] [--gpus N] [--stack debian13] [--log FILE] [--no-svm] -- PROGRAM [ARGS...]`: an
unmodified native ROCm program on an emulated machine (hcqsim.native.launch). The exit status is the program's;
a stack that cannot be fetched, a missing program or interpreter exit 2 with a one-line reason."""
from __future__ import annotations

import argparse
import os
import sys

from .build import BuildError
from .launch import LaunchError, prepare
from .stacks import STACKS, StackUnavailable

EXIT_USAGE = 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default="gfx1100", choices=["gfx1100", "gfx942"], help="emulated GPU target")
    p.add_argument("--gpus", type=int, default=1, help="how many emulated GPUs")
    p.add_argument("--stack", default="debian13", choices=sorted(STACKS), help="the pinned ROCm userspace")
    p.add_argument("--log", metavar="FILE", help="append every device call that failed (with its errno) to FILE")
    p.add_argument("--trace", action="store_true", help="log every device call, not only failures")
    p.add_argument("--kernel-version", default="6.12", metavar="MAJOR.MINOR",
                   help="the amdkfd whose CREATE_QUEUE rules to follow (6.11 or older: the CWSR sizes 5.x thunks use)")
    p.add_argument("--no-svm", action="store_true",
                   help="emulate a kernel without SVM (no AMDKFD_IOC_SVM): ROCr then registers host memory as USERPTR "
                        "BOs at GPU addresses of its own choosing")
    p.add_argument("--deadlock-timeout", type=float, default=60, metavar="S",
                   help="a queue blocked with nothing changing for S seconds ends the program with the machine's "
                        "description and exit status 3 (0: never)")
    p.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS...]")


def run(args: argparse.Namespace) -> int:
    argv = list(args.program)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if args.gpus < 1:
        print("hcqsim run: --gpus must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    try:
        kernel = tuple(int(x) for x in args.kernel_version.split("."))
        if len(kernel) != 2:
            raise ValueError
    except ValueError:
        print(f"hcqsim run: --kernel-version must be MAJOR.MINOR, not {args.kernel_version!r}", file=sys.stderr)
        return EXIT_USAGE
    os.environ["HCQSIM_NATIVE_KERNEL_VERSION"] = f"{kernel[0]}.{kernel[1]}"
    os.environ["HCQSIM_NATIVE_SVM"] = "0" if args.no_svm else "1"
    try:
        cmd, env = prepare(argv, args.target, args.gpus, args.stack, args.log, args.trace, args.deadlock_timeout)
    except (StackUnavailable, LaunchError, BuildError) as e:
        print(f"hcqsim run: {e}", file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.flush()
    os.execve(cmd[0], cmd, env)  # the program takes this process over: its exit status, signals, tty
    return 0  # not reached
