"""A ROCm stack's first fetch (tens of MB) says what it downloads, how much, and how far it has got, on stderr
(hcqsim.native.stacks.DownloadProgress), instead of running silently. Checked against a small local file source: a
copy that grows its file in steps stands in for apt-get download, so no network is needed."""
from __future__ import annotations

import hashlib
import io
import re
import shutil
import sys

import pytest

from hcqsim.native import stacks

GROW = """import sys, time
data = open(sys.argv[1], 'rb').read()
with open(sys.argv[2], 'wb') as f:
    for i in range(0, len(data), len(data) // 8):
        f.write(data[i:i + len(data) // 8]); f.flush(); time.sleep(0.08)
"""


def test_progress_reports_size_and_bytes_so_far(tmp_path):
    source = tmp_path / "source.bin"
    source.write_bytes(bytes(range(256)) * 1200)  # 307200 bytes
    dest = tmp_path / "debs"
    dest.mkdir()
    out = io.StringIO()
    with stacks.DownloadProgress("stack test: download", [dest], 307200, out=out, every=0.1):
        stacks._run([sys.executable, "-c", GROW, str(source), str(dest / "a.deb")], dest, "copy")
    lines = out.getvalue().splitlines()
    assert lines[0] == "hcqsim: stack test: download: downloading 0.3 MB", lines
    percents = [int(m[1]) for line in lines if (m := re.search(r": [\d.]+ MB of 0\.3 MB \((\d+)%\)$", line))]
    assert any(0 < p < 100 for p in percents), lines  # seen while the file grew, not only at the end
    assert percents == sorted(percents), lines
    assert re.fullmatch(r"hcqsim: stack test: download: 0\.3 MB in \d+\.\d s", lines[-1]), lines


def test_a_stack_fetch_announces_its_packages_and_total_size(tmp_path, monkeypatch, capsys):
    """_download: the header names the stack, the package count and their pinned total size, then the progress
    of apt-get update and apt-get download (here a local copy: the packages come from tmp_path/source)."""
    if not shutil.which("apt-get") or not shutil.which("dpkg-deb"):
        pytest.skip("needs apt-get and dpkg-deb on PATH (a Debian-family machine), as stack fetching does")
    source = tmp_path / "source"
    source.mkdir()
    packages = []
    for name, n in (("liba", 150_000), ("libb", 250_000)):
        data = bytes([len(name)]) * n
        pkg = stacks.Package(name, "1.0-1", hashlib.sha256(data).hexdigest(), size=n)
        (source / pkg.filename).write_bytes(data)
        packages.append(pkg)
    stack = stacks.Stack("teststack", "trixie", tuple(packages), "two local packages")
    ran = []

    def fake_run(cmd, cwd, what):
        ran.append(cmd[-1] if cmd[-1] == "update" else "download")
        if "download" in cmd:
            for p in packages:
                shutil.copy(source / p.filename, cwd / p.filename)

    monkeypatch.setattr(stacks, "_run", fake_run)
    debs = tmp_path / "cache" / "debs"
    debs.mkdir(parents=True)
    stacks._download(stack, debs)
    err = capsys.readouterr().err
    assert ran == ["update", "download"]
    assert "hcqsim: stack teststack is not in the cache" in err and "2 Debian trixie packages (0.4 MB)" in err, err
    assert "hcqsim: stack teststack: apt-get download (2 packages): downloading 0.4 MB" in err, err
    assert re.search(r"hcqsim: stack teststack: apt-get download \(2 packages\): 0\.4 MB in \d+\.\d s", err), err
    stacks._download(stack, debs)  # cached: says nothing
    assert capsys.readouterr().err == ""


def test_pinned_sizes_cover_every_debian_package():
    for stack in stacks.STACKS.values():
        if isinstance(stack, stacks.Stack):
            assert all(p.size > 0 for p in stack.packages), stack.name
