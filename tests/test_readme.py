"""README's layout section names every module under viewer/, and nothing that is not there."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _layout_block() -> str:
    text = (REPO / "README.md").read_text()
    section = text[text.index("### Layout"):]
    return section[section.index("```") + 3: section.index("```", section.index("```") + 3)]


def _listed() -> set[str]:
    """Paths the tree names: a line ``name/`` opens a folder; ``x.py`` names on a line (several
    allowed, and on the folder's own line) belong to the innermost folder indented less than it
    (or, on a folder's line, to that folder)."""
    out: set[str] = set()
    stack: list[tuple[int, str]] = []  # (indent, folder name)
    for line in _layout_block().splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        first = line.split()[0]
        if first.endswith("/"):
            stack.append((indent, first.rstrip("/")))
        folder = "/".join(name for _, name in stack)
        out.update(f"{folder}/{m}" if folder else m for m in re.findall(r"\b([a-z_]+\.py)\b", line))
    return out


def test_layout_names_every_module_and_only_real_ones():
    listed = {p for p in _listed() if p.startswith("viewer/")}
    real = {str(p.relative_to(REPO)) for p in (REPO / "viewer").rglob("*.py")}
    missing = sorted(real - listed - {p for p in real if p.endswith("/__init__.py")
                                      and p != "viewer/ui/__init__.py"})
    assert missing == [], f"modules the README's layout does not name: {missing}"
    assert sorted(listed - real) == [], "the layout names modules that do not exist"
