"""The Health tab (viewer/ui/health_tab.py) called directly with a real RolloutStore, and its HTML
(viewer/render/health.py): the open rollout's lint hits, each linked to its turn and token, every
value escaped. Captures are copies of the bundled sample edited by hand."""
from __future__ import annotations

import html
import json
import re
import shutil
from urllib.parse import parse_qs

from viewer import render
from viewer.config import SAMPLE_DIR, Settings
from viewer.ui.health_tab import health_for
from viewer.ui.store import RolloutStore
from viewer.visitor import deep_link

SMOL = SAMPLE_DIR / "smollm2"


def _capture(tmp_path, edit=None):
    cap = tmp_path / "cap"
    shutil.copytree(SMOL, cap)
    (cap / "turns.json").unlink()
    if edit:
        recs = json.loads((cap / "trace.json").read_text())
        edit(recs)
        (cap / "trace.json").write_text(json.dumps(recs))
    settings = Settings(data_root=str(tmp_path))
    store = RolloutStore(settings)
    return settings, store, store.open(cap).key


def _links(page: str) -> list[dict]:
    return [{k: v[0] for k, v in parse_qs(html.unescape(h)).items()} for h in re.findall(r'href="\?([^"]*)"', page)]


def test_clean_capture_says_no_rule_fired(tmp_path):
    settings, store, key = _capture(tmp_path)
    page = health_for(store, settings, key)
    assert "No rule fired" in page and "<table" not in page


def test_hits_are_rows_linked_to_their_turn_and_token(tmp_path):
    recs = json.loads((SMOL / "trace.json").read_text())
    prompt = len(recs[2]["prompt_token_ids"])

    def edit(r):
        r[2]["per_token_logps"][5] = float("nan")
        r[0]["kind"] = "main"  # the title call read as an agent turn
    settings, store, key = _capture(tmp_path, edit)
    page = health_for(store, settings, key)
    assert "RI011" in page and "RI006" in page and "2 error" in page
    links = _links(page)
    assert {"source": "cap", "turn": "2", "tok": str(prompt + 5)} in links
    # what the app does with the link: the deep-link parser reads the same turn and token
    link = deep_link(next(x for x in links if x["turn"] == "2"))
    assert (link.source, link.turn, link.tok) == ("cap", 2, (prompt + 5, prompt + 5))


def test_nothing_open_gives_the_empty_view(tmp_path):
    settings = Settings(data_root=str(tmp_path))
    assert "Open a rollout" in health_for(RolloutStore(settings), settings, None)


def test_hostile_text_is_escaped():
    hit = {"rule": "RI013", "name": "<b>n</b>", "level": "error", "turn": 1, "tok": 3, "part": "output",
           "position": 3, "message": "<img src=x onerror=alert(1)>", "why": "\"'><script>", "fix": "{{x}}",
           "link": 'source="><script>&turn=1'}
    page = render.health_html([hit], 13)
    assert "<img" not in page and "<script" not in page and "<b>n" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_a_hit_naming_several_tokens_links_to_their_first_run(tmp_path):
    """Three non-finite logprobs in a row (RI011 names each token, issue 40): the link selects the run of
    them, as the deep link's N-M range, in the sequence's positions (prompt, then output)."""
    recs = json.loads((SMOL / "trace.json").read_text())
    prompt = len(recs[2]["prompt_token_ids"])

    def edit(r):
        for i in (5, 6, 7):
            r[2]["per_token_logps"][i] = float("nan")
    settings, store, key = _capture(tmp_path, edit)
    links = _links(health_for(store, settings, key))
    assert {"source": "cap", "turn": "2", "tok": f"{prompt + 5}-{prompt + 7}"} in links, links
    link = deep_link(next(x for x in links if x["turn"] == "2"))
    assert link.tok == (prompt + 5, prompt + 7)
