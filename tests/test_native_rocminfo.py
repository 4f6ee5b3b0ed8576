"""Unmodified native ROCm on the emulator: Debian 13's rocminfo 6.1.2 (ROCr 6.1.2, libhsakmt 6.2.4) run by
`hcqsim run`, the interposer starting the emulator inside the process (the embedded host).

The stack is fetched once from the package registry and cached (hcqsim.native.stacks), the interposer built once
(hcqsim.native.build); a stack that cannot be fetched fails these tests with its one-line reason, never a skip.
Each test is one rocminfo run (about 1-2 s). What is checked is what rocminfo prints from ROCr's agent queries:
the emulated parts' names, CU counts, wave sizes, caches and memory pools, and that no device call failed.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from hcqsim.kfd.topology import CACHE_FACTS
from hcqsim.native import build, stacks

KiB = 1024


@pytest.fixture(scope="module")
def stack():
    try:
        unpacked = stacks.fetch("debian13")
        build.interposer_path()
    except (stacks.StackUnavailable, build.BuildError) as e:
        pytest.fail(f"native ROCm stack unavailable: {e}", pytrace=False)
    return unpacked


def hcqsim_run(tmp_path, *argv: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, list[str]]:
    """`hcqsim run ... --log FILE -- argv`: the process and the device calls that failed."""
    log = tmp_path / "calls.log"
    cmd = [sys.executable, "-m", "hcqsim", "run", "--log", str(log), *argv]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ))
    failed = log.read_text().splitlines() if log.exists() else []
    return done, failed


def agents(text: str) -> list[dict]:
    """rocminfo's agents: their top-level keys, the pools (segment, KB) and the ISA names."""
    out = []
    for block in re.split(r"\*{7}\s*\nAgent \d+\s*\n\*{7}\s*\n", text)[1:]:
        agent: dict = {"pools": [], "isas": [], "caches": {}}
        segment = None
        for line in block.splitlines():
            if m := re.match(r"^  (\S[^:]*):\s+(.*?)\s*$", line):
                agent[m[1]] = m[2]
            elif m := re.match(r"^    (L\d):\s+(\d+)\(", line):
                agent["caches"][m[1]] = int(m[2])
            elif m := re.match(r"^      Segment:\s+(.*?)\s*$", line):
                segment = m[1]
            elif (m := re.match(r"^      Size:\s+(\d+)\(", line)) and segment is not None:
                agent["pools"].append((segment, int(m[1])))
                segment = None
            elif m := re.match(r"^      Name:\s+(amdgcn\S+)", line):
                agent["isas"].append(m[1])
        out.append(agent)
    return out


def gpu_agents(text: str) -> list[dict]:
    return [a for a in agents(text) if a.get("Device Type") == "GPU"]


def expected_caches(target: str) -> dict[str, int]:
    """rocminfo's Cache Info: per level, the first data cache of that level (KiB)."""
    found: dict[str, int] = {}
    for level, size, _line, kind, _shared in CACHE_FACTS[target]:
        if kind & 1:
            found.setdefault(f"L{level}", size)
    return found


def test_rocminfo_lists_an_emulated_mi300x(stack, tmp_path):
    done, failed = hcqsim_run(tmp_path, "--target", "gfx942", "--", "rocminfo")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert failed == []  # every ioctl, mmap and open rocminfo made succeeded
    assert "*** Done ***" in done.stdout
    (gpu,) = gpu_agents(done.stdout)
    assert gpu["Name"] == "gfx942" and gpu["Marketing Name"] == "AMD Instinct MI300X"
    assert gpu["Compute Unit"] == "304" and gpu["SIMDs per CU"] == "4"
    assert gpu["Wavefront Size"].startswith("64(") and gpu["Chip ID"].startswith("29857(")
    assert gpu["isas"] == ["amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"]
    assert gpu["caches"] == expected_caches("gfx942")
    vram_kb = (16 << 30) // KiB  # EmulatedSystem's default VRAM
    assert ("GLOBAL; FLAGS: COARSE GRAINED", vram_kb) in gpu["pools"]
    assert ("GLOBAL; FLAGS: FINE GRAINED", vram_kb) in gpu["pools"]
    assert ("GROUP", 64) in gpu["pools"]  # LDS per workgroup


def test_rocminfo_lists_two_emulated_7900_xtx(stack, tmp_path):
    done, failed = hcqsim_run(tmp_path, "--target", "gfx1100", "--gpus", "2", "--", "rocminfo")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert failed == []
    gpus = gpu_agents(done.stdout)
    assert [g["Name"] for g in gpus] == ["gfx1100", "gfx1100"]
    assert [g["Compute Unit"] for g in gpus] == ["96", "96"]
    assert all(g["Wavefront Size"].startswith("32(") for g in gpus)
    assert all(g["caches"] == expected_caches("gfx1100") for g in gpus)
    assert gpus[0]["Uuid"] != gpus[1]["Uuid"]  # two devices, not one seen twice
    assert [g["Node"] for g in gpus] == ["1", "2"]


def test_the_interposer_shows_the_emulated_devices_and_sysfs_to_any_program(stack, tmp_path):
    # coreutils through the same loader: stat(1) uses statx, cat/ls open and readdir the redirected sysfs
    done, _ = hcqsim_run(tmp_path, "--gpus", "2", "--", "stat", "-c", "%F %t:%T", "/dev/dri/renderD129", "/dev/kfd")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["character special file e2:81", "character special file 1ff:0"]
    done, _ = hcqsim_run(tmp_path, "--", "cat", "/sys/module/amdgpu/initstate",
                         "/sys/class/kfd/kfd/topology/nodes/1/gpu_id")
    assert done.stdout.split() == ["live", "1829"]  # gpu_id of emulated gfx1100 GPU 0
    done, _ = hcqsim_run(tmp_path, "--", "ls", "/dev/dri/renderD129")
    assert done.returncode != 0 and "No such file" in done.stderr  # one GPU: no second render node


def test_a_program_that_is_not_there_is_a_one_line_error(tmp_path):
    done, _ = hcqsim_run(tmp_path, "--", "no-such-program-xyz")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["hcqsim run: no program 'no-such-program-xyz' in stack debian13 "
                                                "or on PATH"]
