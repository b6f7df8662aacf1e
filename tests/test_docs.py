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


def _registered_events(public: bool, monkeypatch) -> set[str]:
    """api_names of every event the app registers, as a Space (sign-in on) or as a local app."""
    import gradio.oauth

    from viewer.config import Settings
    from viewer.ui import create_app

    with monkeypatch.context() as m:
        if public:  # what a Space with hf_oauth provides (gradio.oauth reads these at import)
            m.setenv("SYSTEM", "spaces")
            m.setenv("SPACE_ID", "docs/check")
            for k, v in (("OAUTH_CLIENT_ID", "x"), ("OAUTH_CLIENT_SECRET", "y"), ("OAUTH_SCOPES", "openid profile"),
                         ("OPENID_PROVIDER_URL", "http://127.0.0.1:9")):
                m.setenv(k, v)
                m.setattr(gradio.oauth, k, v)
        demo = create_app(Settings(public=public))
        return {fn.api_name for fn in demo.fns.values()}


def test_security_md_names_every_event_and_deep_link_parameter(monkeypatch):
    """docs/SECURITY.md "Entry points" lists each event the app registers and each query parameter it
    reads: a new event or parameter without a line there (and so without a thought about who may call
    it) fails here. The attack sweep calls each of them (tests/test_attacks_sweep.py)."""
    from attack_kit import query_params

    doc = (REPO / "docs" / "SECURITY.md").read_text()
    entry = doc[doc.index("## Entry points"):]
    events = _registered_events(True, monkeypatch) | _registered_events(False, monkeypatch)
    assert len(events) > 50
    missing = sorted(e for e in events if f"`{e}`" not in entry)
    assert missing == []
    params = query_params()
    assert {"source", "turn", "job", "compare"} <= set(params)
    assert [p for p in params if f"`{p}`" not in entry] == []


def test_security_md_has_the_sections_each_area_fills_and_the_readme_links_it():
    """docs/SECURITY.md has a section per area; docs/HOSTING.md's Safety and Hosting sections (the
    summary a reader meets first) each link it, and the README links both pages."""
    doc = (REPO / "docs" / "SECURITY.md").read_text()
    heads = re.findall(r"^## (.+)$", doc, re.M)
    for h in ("Threat model", "Entry points", "Capture and visitor input", "Sandbox",
              "Uploads, Hub sources and disk", "Resources"):
        assert heads.count(h) == 1, h
    hosting = (REPO / "docs" / "HOSTING.md").read_text()
    for section in ("## Safety", "## Hosting"):
        body = hosting[hosting.index(section):].split("\n## ", 1)[0]
        assert "(SECURITY.md)" in body, section
    readme = (REPO / "README.md").read_text()
    assert "(docs/HOSTING.md)" in readme and "(docs/SECURITY.md)" in readme


def test_security_md_names_only_tests_that_exist():
    doc = (REPO / "docs" / "SECURITY.md").read_text()
    named = set(re.findall(r"\b(test_\w+\.py)", doc))
    assert len(named) > 10
    assert sorted(n for n in named if not (REPO / "tests" / n).is_file()) == []
