"""The Search tab's handlers without a browser (issue 38, point 3), over a night of 40 varied real captures.

Expected counts come from the raw files (summary.json's reward, read with plain ``json``); the browser walk is
tests/test_search_browser.py.
"""
from __future__ import annotations

from urllib.parse import parse_qs

import pytest

from _night import make_night, raw_row

QUIET = lambda *a, **k: None  # noqa: E731  (gr.Progress outside an event)


@pytest.fixture(scope="module")
def tab(tmp_path_factory):
    from viewer.config import Settings
    from viewer.ui.search_tab import SearchHandlers

    root = tmp_path_factory.mktemp("root")
    night = make_night(root)
    return night, SearchHandlers(Settings(data_root=str(root)))


def test_a_search_answers_status_hits_linked_inside_the_data_root_and_facets(tab):
    from viewer.ui.search_tab import FACET_NAMES

    night, h = tab
    raw = [raw_row(f) for f in night.iterdir() if f.is_dir() and not f.name.startswith(".")]
    low = sum(1 for r in raw if r["reward"] < 0.2)
    status, hits, hist, *facets = h.on_search("night", "reward<0.2", QUIET)
    assert f"<span class=\"ri-k\">rollouts</span><span class=\"ri-v\">{low}</span>" in status
    assert hits.count('<a class="ri-hit"') == low  # every matching rollout, each one link
    links = [x.split('"', 1)[0].replace("&amp;", "&") for x in hits.split('href="?')[1:]]
    for link in links:
        q = parse_qs(link)
        assert q["source"][0].startswith("night/") and str(night) not in link  # named from the data root
        assert raw_row(night / q["source"][0].split("/", 1)[1])["reward"] < 0.2
    assert len(facets) == len(FACET_NAMES) and hist is not None
    model = facets[FACET_NAMES.index("model")]
    counts = {label: clause for label, clause in model.choices}
    want = {}
    for r in raw:
        if r["reward"] < 0.2:
            want[r["model"]] = want.get(r["model"], 0) + 1
    assert set(counts) == {f"{m} ({n})" for m, n in want.items()}
    # a facet click: its clause is added and the search runs again, narrowed
    label, clause = next(iter(model.choices))
    q, status2, *_ = h.on_facet("night", "reward<0.2", clause, QUIET)
    assert q == f"reward<0.2 {clause}" and f"<span class=\"ri-v\">{label.rsplit('(', 1)[1][:-1]}</span>" in status2


def test_refusals_are_said_and_a_page_without_q_changes_nothing(tab):
    import gradio as gr

    _night, h = tab
    assert "outside the allowed data folder" in h.on_search("../..", "", QUIET)[0]
    assert "Query:" in h.on_search("night", "reward<", QUIET)[0]
    assert "too long" in h.on_search("night", "x" * 3000, QUIET)[0]
    assert h.on_facet("night", "tool:bash", None, QUIET) == [gr.skip()] * 12
    assert h.on_link(None) == [gr.skip()] * 14
