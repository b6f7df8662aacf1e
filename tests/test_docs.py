"""The docs the code points to exist in the repository, with the sections the comments cite."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_REF = re.compile(r"docs/([A-Z]+)\.md(?: §([0-9]+(?:\.[0-9]+)?))?")


def _sections(doc: Path) -> set[str]:
    """Numbered headings ("## 2. ...", "### 2.3 ...") of a doc."""
    out = set()
    for line in doc.read_text().splitlines():
        m = re.match(r"#{2,4} ([0-9]+(?:\.[0-9]+)*)\.? ", line)
        if m:
            out.add(m.group(1))
    return out


def test_every_doc_reference_in_the_code_resolves():
    refs = []
    for sub in ("viewer", "tests", "scripts", "bench"):
        for p in (REPO / sub).rglob("*"):
            if p.suffix in (".py", ".sh", ".js") and p.is_file():
                refs += [(p.relative_to(REPO), m.group(1), m.group(2)) for m in _REF.finditer(p.read_text())]
    assert len(refs) > 20  # the code does point into docs/
    bad = []
    for where, name, section in refs:
        doc = REPO / "docs" / f"{name}.md"
        if not doc.is_file():
            bad.append(f"{where}: docs/{name}.md missing")
        elif section and section not in _sections(doc):
            bad.append(f"{where}: docs/{name}.md has no section {section}")
    assert bad == []


def test_no_reference_to_docs_outside_the_repo():
    """Comments cite the repo's own docs/, never a shared folder a clone does not have."""
    offenders = [str(p.relative_to(REPO)) for sub in ("viewer", "scripts") for p in (REPO / sub).rglob("*.py")
                 if re.search(r"(?<!docs/)\b(FORMATS|CAPTURE|DRIFT|GRADIO|TRAINER)\.md", p.read_text())]
    assert offenders == []
