"""Every code block of the README and of docs/*.md runs as printed, or says visibly why it does not.

A fenced block names its kind:
- ```python: run in a fresh interpreter (cwd a temporary directory, the checkout importable). A block whose first
  line is `# test_NAME.py` is a test file: it is written there and run with `python3 -m pytest` (the hcqsim plugin
  loads as it does for a user). A block whose first line is `# continues the block above` runs after the previous
  python block of the page, in the same interpreter. A block holding the comment `# prints the text block below`
  must print exactly the ```text block that follows it.
- ```console: every line starting with `$ ` is a command, run with bash in the checkout with this interpreter's
  bin directory first on PATH (`python3`, `hcqsim`, `pytest` are the environment's); each must exit 0. Other lines
  are output, shown, not compared.
- ```text: output or a diagram, never run (and so it may not hold a `$ ` command line).
A python or console block whose first line is `# not run by the doc test: REASON` is not run; the reason is in the
block, where a reader sees it (a GPU, a download, minutes of work). An unnamed or other fence fails the test, and so
does an indented code block holding a command (write it as a fenced console block).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
KINDS = ("python", "console", "text")
NOT_RUN = "# not run by the doc test:"
CONTINUES = "# continues the block above"
PRINTS = "# prints the text block below"
TIMEOUT_S = 300
FENCE = re.compile(r"^(\s*)```(.*)$")
# an indented code block's command: four spaces (not a list continuation) then a command word
INDENTED_COMMAND = re.compile(r"^    (?:\$ )?(?:python3? |hcqsim |pip |pytest |git |\./)")


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    kind: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def first_line(self) -> str:
        return self.code.lstrip("\n").split("\n", 1)[0].strip()


def blocks_of(page: Path) -> list[Block]:
    found, lines, i = [], page.read_text().split("\n"), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, kind, start = len(m.group(1)), m.group(2).strip(), i
        body = []
        i += 1
        while i < len(lines) and not FENCE.match(lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        if i == len(lines):
            raise AssertionError(f"{page.relative_to(ROOT)}:{start + 1}: a code fence is never closed")
        found.append(Block(page, start + 1, kind, "\n".join(body) + "\n"))
        i += 1
    return found


ALL = [b for page in PAGES for b in blocks_of(page)]


def test_every_fence_names_a_known_kind():
    bad = [f"{b.id}: ```{b.kind}" for b in ALL if b.kind not in KINDS]
    assert not bad, f"fenced blocks must be one of {KINDS}: {bad}"


def test_no_indented_code_block_hides_a_command():
    bad = []
    for page in PAGES:
        inside = False
        lines = page.read_text().split("\n")
        for n, line in enumerate(lines, 1):
            if FENCE.match(line):
                inside = not inside
            elif not inside and INDENTED_COMMAND.match(line) and lines[n - 2].strip() == "":
                bad.append(f"{page.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not bad, f"write commands as ```console blocks so they are run: {bad}"


def test_text_blocks_hold_no_commands_and_skips_give_a_reason():
    for b in ALL:
        if b.kind == "text":
            assert not any(ln.startswith("$ ") for ln in b.code.split("\n")), f"{b.id}: a command in a text block"
        if b.first_line.startswith(NOT_RUN):
            assert len(b.first_line) > len(NOT_RUN) + 3, f"{b.id}: say why the block is not run"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("HCQSIM_MEMORY_MODEL", None)  # the examples show the defaults
    return env


def _python_source(block: Block) -> str:
    """The block's code, after the python blocks it continues (`# continues the block above`)."""
    page_blocks = [b for b in ALL if b.page == block.page and b.kind == "python"]
    i = page_blocks.index(block)
    chain = [block]
    while chain[0].first_line.startswith(CONTINUES):
        assert i > 0, f"{block.id}: continues a block, but no python block comes before it"
        i -= 1
        chain.insert(0, page_blocks[i])
    return "".join(b.code for b in chain)


def _run(args, cwd, what: str, block: Block) -> str:
    try:
        done = subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.id}: {what} did not finish in {TIMEOUT_S} s")
    if done.returncode != 0:
        pytest.fail(f"{block.id}: {what} exited {done.returncode}\n--- stdout\n{done.stdout[-4000:]}\n"
                    f"--- stderr\n{done.stderr[-4000:]}")
    return done.stdout


RUNNABLE = [b for b in ALL if b.kind in ("python", "console")]


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_code_block_runs_as_printed(block: Block, tmp_path: Path):
    if block.first_line.startswith(NOT_RUN):
        return  # the reason is printed in the block itself (checked above)
    if block.kind == "python":
        m = re.fullmatch(r"# (test_\w+\.py)", block.first_line)
        if m:
            (tmp_path / m.group(1)).write_text(block.code)
            _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", m.group(1)], tmp_path,
                 "the test file", block)
        else:
            (tmp_path / "example.py").write_text(_python_source(block))
            printed = _run([sys.executable, "example.py"], tmp_path, "the example", block)
            if PRINTS in block.code:
                page_blocks = [b for b in ALL if b.page == block.page]
                following = page_blocks[page_blocks.index(block) + 1]
                assert following.kind == "text", f"{block.id}: no text block follows it"
                assert printed.strip() == following.code.strip(), \
                    f"{block.id} printed something else than {following.id} shows:\n{printed}"
        return
    commands = [ln[2:] for ln in block.code.split("\n") if ln.startswith("$ ")]
    assert commands, f"{block.id}: a console block without a `$ ` command line"
    for command in commands:
        _run(["bash", "-c", command], ROOT, f"`{command}`", block)


def test_the_readme_names_the_python_version_and_the_extras_the_project_declares():
    import tomllib
    readme = (ROOT / "README.md").read_text()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "Python " + project["requires-python"].replace(">=", ">= ") in readme
    for extra in project["optional-dependencies"]:
        assert f"`{extra}`" in readme, f"the README does not name the extra {extra!r}"
