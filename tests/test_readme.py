"""The README a newcomer reads in five minutes, and the docs/ pages it points to.

- README.md stays short (at most 250 lines), in a fixed order of sections, with one picture, and
  links every page under docs/;
- every relative link in README.md and docs/*.md resolves to a file of the repository, and every
  ``#anchor`` to a heading of its target (GitHub's slugs);
- docs/ARCHITECTURE.md's layout names every module under viewer/, and nothing that is not there.
"""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
MAX_README_LINES = 250

_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1|``", re.S)
_INLINE_LINK = re.compile(r"\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
_HTML_ID = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)


def _prose(text: str) -> str:
    """The text without fenced code blocks and code spans, where a ``](x)`` is not a link."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: inline markup dropped, lower case, every character that is
    not a letter, digit, space, hyphen or underscore removed, spaces turned into hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = re.sub(r"<[^>]+>", "", text.replace("`", ""))
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(md: Path) -> set[str]:
    """The anchors a Markdown file has: its headings' slugs (repeats get -1, -2, …) and explicit
    ``<a name>`` / ``<a id>`` targets."""
    text = md.read_text()
    seen: dict[str, int] = {}
    out = set(_HTML_ID.findall(text))
    for line in _FENCE.sub("", text).splitlines():
        m = re.match(r"^ {0,3}#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$", line)
        if not m:
            continue
        slug = github_slug(m.group(1))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(md: Path) -> list[str]:
    prose = _prose(md.read_text())
    return _INLINE_LINK.findall(prose) + _REF_DEF.findall(prose)


def broken_links(md: Path, repo: Path = REPO) -> list[str]:
    """Each relative link of ``md`` that names no file inside ``repo``, or an anchor its target lacks."""
    bad = []
    for target in links(md):
        if not target or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # http:, mailto:, …
            continue
        path, _, anchor = target.partition("#")
        dest = (md.parent / path).resolve() if path else md.resolve()
        where = f"{md.relative_to(repo)}: ({target})"
        if not dest.is_relative_to(repo.resolve()) or not dest.exists():
            bad.append(f"{where} names no file of the repository")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{where}: {dest.name} has no heading with the anchor #{anchor}")
    return bad


def _docs() -> list[Path]:
    return sorted((REPO / "docs").glob("*.md"))


def test_readme_is_at_most_250_lines():
    n = len(README.read_text().splitlines())
    assert n <= MAX_README_LINES, f"README.md has {n} lines (at most {MAX_README_LINES}): move details to docs/"


def test_readme_sections_in_the_newcomer_order_with_one_picture():
    text = README.read_text()
    heads = re.findall(r"^## (.+)$", _FENCE.sub("", text), re.M)
    assert heads == ["Quick start", "What you can do", "Command line", "Where to read more"]
    intro = text[:text.index("## Quick start")]
    assert len(re.findall(r"!\[[^\]]*\]\(([^)]+)\)", intro)) == 1, "what it is: one picture"
    assert len(re.findall(r"!\[", text)) == 1
    quick = text[text.index("## Quick start"):text.index("## What you can do")]
    for cmd in ("make app", "make test", "make test-fast", "make bench"):
        assert cmd in quick, cmd


def test_readme_links_every_docs_page():
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in links(README)}
    assert [p.name for p in _docs() if p.resolve() not in linked] == []


def test_readme_states_the_public_mode_essentials():
    """The safety essentials stay in the README: what a visitor of a public app can and cannot do,
    with the pages that hold the rest."""
    text = README.read_text()
    para = next(p for p in text.split("\n\n") if "VIEWER_PUBLIC" in p)
    for fact in ("sign", "own", "cannot", "local or endpoint captures", "token", "(docs/HOSTING.md)",
                 "(docs/SECURITY.md)"):
        assert fact in para, fact


def test_every_relative_link_in_readme_and_docs_resolves():
    files = [README, *_docs()]
    checked = [t for f in files for t in links(f) if t and not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", t)]
    assert len(checked) > 40 and sum("#" in t for t in checked) > 10  # the check has links to check
    assert [b for f in files for b in broken_links(f)] == []


def test_the_link_check_catches_a_missing_file_an_unknown_anchor_and_an_escape(tmp_path):
    """Worked by hand: a page whose links are known good or bad, GitHub slugs included."""
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "B.md").write_text(
        "# B\n\n## Big datasets: per-turn parquet and Ray\n\n## The `drift` CLI (v2)\n\n## Notes\n\n## Notes\n\n"
        "```\n## not a heading\n```\n")
    (tmp_path / "pic.png").write_bytes(b"")
    (tmp_path / "A.md").write_text(
        "# A\n\n## Local part\n\n"
        "[ok](guide/B.md) [ok](guide/B.md#big-datasets-per-turn-parquet-and-ray) [ok](guide/B.md#the-drift-cli-v2)\n"
        "[ok](guide/B.md#notes-1) ![ok](pic.png) [ok](#local-part) [web](https://example.com/x#y)\n"
        "[bad](guide/C.md) [bad](guide/B.md#speed) [bad](#nowhere) [bad](guide/B.md#not-a-heading)\n"
        "[bad](../outside.md) `[code](not-a-link.md)`\n\n```\n[code](nor-this.md)\n```\n")
    bad = broken_links(tmp_path / "A.md", tmp_path)
    assert [b.split(": (")[1].split(")")[0] for b in bad] == [
        "guide/C.md", "guide/B.md#speed", "#nowhere", "guide/B.md#not-a-heading", "../outside.md"]


def _layout_block() -> str:
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    section = text[text.index("## Layout"):]
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
    assert missing == [], f"modules docs/ARCHITECTURE.md's layout does not name: {missing}"
    assert sorted(listed - real) == [], "the layout names modules that do not exist"
