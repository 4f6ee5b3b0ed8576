"""docs/architecture.md says which class names appear twice in the package (issue 15 item 8: the doc claimed none
while `Wait` was in two modules). This keeps the doc's list equal to the code's, and every docs page and the
README free of links that leave the repository."""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTED_TWICE = {"Wait": {"hcqsim/runtime/plan.py", "hcqsim/engines/queue.py"}}


def class_definitions() -> dict[str, set[str]]:
    where = defaultdict(set)
    for path in (ROOT / "hcqsim").rglob("*.py"):
        for name in re.findall(r"^class ([A-Za-z]\w*)", path.read_text(), flags=re.M):
            where[name].add(str(path.relative_to(ROOT)))
    return where


def test_only_the_class_names_the_architecture_doc_lists_appear_twice():
    twice = {name: files for name, files in class_definitions().items() if len(files) > 1}
    assert twice == DOCUMENTED_TWICE
    doc = (ROOT / "docs" / "architecture.md").read_text()
    for name, files in DOCUMENTED_TWICE.items():
        for f in files:
            assert f"`{Path(f).stem}.{name}`" in doc, f"docs/architecture.md should name {f}'s {name}"


def test_docs_link_nothing_outside_the_repository():
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        assert "../shared/" not in page.read_text(), f"{page.name} links outside the repository"
