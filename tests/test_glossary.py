"""Issue 41, point 9 without a browser: one glossary (viewer/render/glossary.py), the same lines in
docs/USING.md, and every place that renders a term carries its line, escaped."""
from __future__ import annotations

import html
import re
from pathlib import Path

from viewer.render import glossary
from viewer.render.escape import kv

USING = Path(__file__).resolve().parent.parent / "docs" / "USING.md"


def test_docs_glossary_lists_every_term_as_the_app_says_it():
    text = USING.read_text()
    assert "## Glossary" in text
    section = text.split("## Glossary", 1)[1].split("\n## ", 1)[0]
    listed = dict(re.findall(r"^- \*\*(.+?)\*\*: (.+)$", section, flags=re.M))
    assert listed == glossary.GLOSSARY  # same terms, same lines, nothing only on one side


def test_a_labelled_value_that_is_a_term_carries_its_line():
    pill = kv("filtered calls", 1)
    title = re.search(r'title="([^"]*)"', pill).group(1)
    assert html.unescape(title) == glossary.GLOSSARY["filtered calls"]
    assert "ri-term" in pill
    by_value = kv("trainer", "trl-contract")  # the value is the term
    assert html.unescape(re.search(r'title="([^"]*)"', by_value).group(1)) == glossary.GLOSSARY["trl-contract"]
    assert "title=" not in kv("model", "tiny-qwen3")  # not a term: no tooltip
    # a value with markup stays text (the tooltip is a constant, the value escaped as before)
    assert "<b>" not in kv("filtered calls", "<b>x</b>")


def test_every_line_is_one_plain_line():
    for term, line in glossary.GLOSSARY.items():
        assert line and "\n" not in line and "<" not in line, term


def test_the_token_view_template_carries_the_bar_terms():
    from viewer.render.shell import token_view_template

    t = token_view_template()
    for attr, term in (("ids", "ids"), ("mask", "loss mask"), ("delta", "Δ"), ("is", "IS ratio")):
        m = re.search(rf"data-gloss-{attr}='([^']*)'", t)
        assert m and html.unescape(m.group(1)).startswith(glossary.GLOSSARY[term]), attr
