"""The Health tab lists every token a hit names (viewer/render/hit_tokens.py via viewer/ui/health_tab.py), run
by run, each run a link the app's deep-link parser opens on exactly that run, with the run's text. The capture
is the bundled smollm2 sample with logprobs changed by hand (said at each edit); the expected texts come from
the sample's own tokenizer files through the ``tokenizers`` package, the positions from the raw trace.json."""
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


def _capture(tmp_path, edit):
    cap = tmp_path / "cap"
    shutil.copytree(SMOL, cap)
    (cap / "turns.json").unlink()
    recs = json.loads((cap / "trace.json").read_text())
    edit(recs)
    (cap / "trace.json").write_text(json.dumps(recs))
    settings = Settings(data_root=str(tmp_path))
    store = RolloutStore(settings)
    return settings, store, store.open(cap).key


def _runs(page: str) -> list[tuple[dict, str, str]]:
    """(link query, the run's text, its logprobs as listed) for every listed run of the page."""
    out = []
    for href, text, lps in re.findall(r'<a class="ri-health-tok" href="\?([^"]*)"[^>]*>[^<]*</a>'
                                      r'(?: <code class="ri-tok-text">([^<]*)</code>)?'
                                      r'(?: <span class="ri-tok-lp">logprob ([^<]*)</span>)?', page):
        out.append(({k: v[0] for k, v in parse_qs(html.unescape(href)).items()}, html.unescape(text), lps))
    return out


def test_every_run_of_offending_tokens_is_listed_and_linked_with_its_text(tmp_path):
    from tokenizers import Tokenizer

    recs = json.loads((SMOL / "trace.json").read_text())
    prompt = len(recs[2]["prompt_token_ids"])
    out_ids = recs[2]["completion_token_ids"]
    picked = [(5, 7), (20, 20), (40, 42)]

    def edit(r):  # hand edit: these sampled tokens' logprobs made NaN (RI011 names each)
        for a, b in picked:
            for i in range(a, b + 1):
                r[2]["per_token_logps"][i] = float("nan")
    settings, store, key = _capture(tmp_path, edit)
    page = health_for(store, settings, key)
    got = [r for r in _runs(page) if r[0].get("turn") == "2"]
    runs = [(q, t) for q, t, _ in got]
    # beside each run its values as read: the reader keeps no value for a NaN (the token view says "not recorded")
    assert [lp for *_, lp in got] == [", ".join(["none"] * (b - a + 1)) for a, b in picked]
    assert "7 token(s) in 3 run(s)" in page
    tok = Tokenizer.from_file(str(SMOL / "tokenizer" / "tokenizer.json"))
    want = []
    for a, b in picked:
        want.append(({"source": "cap", "turn": "2", "tok": str(prompt + a) if a == b else f"{prompt + a}-{prompt + b}"},
                     tok.decode(out_ids[a:b + 1])))
    assert [q for q, _ in runs] == [q for q, _ in want]
    for (_, got), (_, text) in zip(runs, want):
        assert got == text, (got, text)
    # what the app does with a run's link: the deep link selects that run
    link = deep_link(runs[2][0])
    assert (link.source, link.turn, link.tok) == ("cap", 2, (prompt + 40, prompt + 42))


def test_long_lists_are_cut_and_counted_and_text_is_escaped():
    runs = [{"a": 2 * k, "b": 2 * k, "link": f"source=x&tok={2 * k}", "text": "<img onerror=x>"} for k in range(3)]
    page = render.health_html([{"rule": "RI011", "name": "n", "level": "error", "turn": 1, "tok": 0, "message": "m",
                                "link": "", "token_runs": runs, "runs_total": 100, "tokens_total": 100}], 18)
    assert "… and 97 more run(s)" in page and "100 token(s) in 100 run(s)" in page
    assert "<img" not in page and page.count("&lt;img onerror=x&gt;") == 3
    assert "<details" not in render.health_html([{"rule": "RI001", "level": "error", "message": "m"}], 18)


def test_a_zero_filled_run_lists_its_values_from_the_file(tmp_path):
    """RI014: 40 trained tokens of turn 1 given logprob 0.0 (hand edit); their run is listed, linked, with the
    file's values (the first six, then …), under each rule that names it."""
    recs = json.loads((SMOL / "trace.json").read_text())
    prompt = len(recs[1]["prompt_token_ids"])

    def edit(r):
        for i in range(100, 140):
            r[1]["per_token_logps"][i] = 0.0
    settings, store, key = _capture(tmp_path, edit)
    page = health_for(store, settings, key)
    assert "RI014" in page
    got = [r for r in _runs(page) if r[0].get("tok") == f"{prompt + 100}-{prompt + 139}"]
    assert got and all(q["turn"] == "1" and lps == ", ".join([repr(0.0)] * 6 + ["…"]) for q, _, lps in got)
