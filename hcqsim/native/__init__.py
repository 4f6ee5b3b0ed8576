"""Unmodified native ROCm programs on the emulator (harness layer): the LD_PRELOAD interposer (interposer.c, built
by build.py), its Python host (host.py, sysfs.py), the pinned ROCm stacks (stacks.py) and `hcqsim run`
(launch.py, command.py). docs/rocm_programs.md."""
