"""Issue 38 in a real browser (Debian chromium via Playwright), over a night of 40 varied real captures.

1. Search: type a query, see facets with counts and hits, narrow by a facet (the query and the address follow),
   click a hit and land on its token in the token view; the address alone (``?q=``) runs the same search.
2. The newcomer's question, from the first screen and timed: which of last night's 40 rollouts had the lowest
   reward, and which the worst drift? (Datasets tab: a folder of captures lists one row per rollout, sortable.)
Expected values come from the raw files (plain ``json``), the drift from the drift scan's own per-turn records.
"""
from __future__ import annotations

import json
import re
import time
from urllib.parse import parse_qs, urlparse

import pytest

from _night import make_night, raw_row

pytestmark = pytest.mark.browser

PAINTED = "document.querySelector('#token-view .ri-tv')?.dataset.painted > 0"


@pytest.fixture(scope="module")
def night(data_root):
    folder = data_root / "night"
    return folder if folder.exists() else make_night(data_root)


def _search(page, query: str) -> None:
    page.locator("#search-q textarea, #search-q input").first.fill(query)
    page.locator("#search-go").click()


def test_search_facets_hits_and_a_click_lands_on_the_token(page, app_url, night):
    page.goto(app_url + "/")
    page.wait_for_function(PAINTED, timeout=60000)
    page.get_by_role("tab", name="Search").click()
    page.locator("#search-in textarea, #search-in input").first.fill("night")
    _search(page, "logprob<-10")
    hit = page.locator("#search-hits a.ri-hit").first
    hit.wait_for(timeout=120000)  # the first search builds the index (40 rollouts scanned)
    status = page.locator("#search-status").text_content()
    assert "40 rollouts" in status and "logprob<-10" in status
    # facets with counts: both models of the night, 20 rollouts each
    model = page.locator("#search-facet-model")
    model.wait_for(state="visible")
    labels = model.locator("label").all_text_contents()
    assert sorted(x.strip() for x in labels) == ["smollm2 (20)", "tiny-qwen3 (20)"]
    assert page.locator("#search-hist .js-plotly-plot").count() == 1  # the reward histogram
    # a facet click narrows the search: the query, the hits and the address follow
    model.locator("label", has_text="smollm2").click()
    page.wait_for_function("document.querySelector('#search-status')?.textContent.includes('model:\"smollm2\"')",
                           timeout=60000)
    assert 'model:"smollm2"' in page.locator("#search-q textarea, #search-q input").first.input_value()
    page.wait_for_function("new URL(location.href).searchParams.get('q')?.includes('smollm2')", timeout=10000)
    assert all(t.strip().startswith("s") for t in page.locator("#search-hits .ri-hit-where").all_text_contents())
    # the worst hit: its token's logprob, read from the raw trace, is below -10
    first = page.locator("#search-hits a.ri-hit").first
    href = first.get_attribute("href")
    q = parse_qs(urlparse(href).query)
    folder, turn, tok = night.parent / q["source"][0], int(q["turn"][0]), int(q["tok"][0])
    rec = json.loads((folder / "trace.json").read_text())[turn]
    lp = rec["per_token_logps"][tok - len(rec["prompt_token_ids"])]
    assert lp < -10 and folder.name.startswith("s")
    first.click()
    page.wait_for_function(f"document.querySelector('#token-view .ri-tv')?.dataset.selected === '{tok}-{tok}'",
                           timeout=60000)
    assert page.locator("#token-view .ri-tv").get_attribute("data-turn") == str(turn)
    # the search as a link: the address alone runs it on the Search tab
    page.goto(app_url + '/?q=model:"smollm2" logprob<-10&in=night')
    page.locator("#search-hits a.ri-hit").first.wait_for(timeout=60000)
    assert page.locator("#search-hits a.ri-hit").first.get_attribute("href") == href


def test_the_newcomer_finds_the_lowest_reward_and_worst_drift_in_two_minutes(page, app_url, night):
    from viewer.config import Settings
    from viewer.drift.corpus import scan_source

    raw = {f.name: raw_row(f) for f in night.iterdir() if f.is_dir() and not f.name.startswith(".")}
    lowest = min(raw.values(), key=lambda r: r["reward"])
    drifted: dict[str, int] = {}
    for rec in scan_source(night, Settings(data_root=str(night.parent)))["turns"]:
        drifted[rec["rollout"].rsplit("/", 1)[-1]] = drifted.get(rec["rollout"].rsplit("/", 1)[-1], 0) + rec["drifted"]
    worst = max(drifted.values())

    t0 = time.monotonic()
    page.goto(app_url + "/")  # the first screen
    page.wait_for_function(PAINTED, timeout=60000)
    page.get_by_role("tab", name="Datasets").click()
    page.locator("#source-picker textarea, #source-picker input").first.fill("night")
    page.locator("#ds-open").click()
    table = page.locator("#row-table")
    page.wait_for_function("document.querySelector('#ds-status')?.textContent.includes('folder of captures')",
                           timeout=120000)

    def sort_by(key: str, descending: bool) -> None:
        page.locator("#ds-sort input").click()
        page.get_by_role("option", name=key, exact=True).click()
        box = page.locator("#ds-desc input")
        if box.is_checked() != descending:
            box.click()

    header = [h.replace("⋮", "").strip() for h in table.locator("thead th").all_text_contents()]  # (its menu)
    col = {name: i for i, name in enumerate(header)}
    assert {"rollout", "reward", "drifted turns", "losing gradient", "trainer", "|Δ|"} <= set(col), header

    sort_by("reward", False)
    page.wait_for_function(f"document.querySelector('#row-table tbody tr td:nth-child({col['rollout'] + 1})')"
                           f"?.textContent.trim() === '{lowest['rollout']}'", timeout=60000)
    sort_by("drifted turns", True)
    page.wait_for_function(f"document.querySelector('#row-table tbody tr td:nth-child({col['drifted turns'] + 1})')"
                           f"?.textContent.trim() === '{worst}'", timeout=60000)
    cells = [c.strip() for c in table.locator("tbody tr").first.locator("td").all_text_contents()]
    name = cells[col["rollout"]]
    assert drifted[name] == worst
    page.locator("#row-table .body-cell.first-column[data-row='0']").click()  # opens it on the Tokens tab
    page.wait_for_function(f"document.querySelector('#rollout-header')?.textContent.includes('{name}')",
                           timeout=60000)
    elapsed = time.monotonic() - t0
    print(f"newcomer: answered in {elapsed:.1f} s from the first screen")
    assert elapsed < 120, f"{elapsed:.1f} s from the first screen"
    assert re.search(r"\d", page.locator("#rollout-header").text_content())


def test_groups_side_by_side_and_the_walker_steps_through_siblings(page, app_url, data_root):
    # real Atropos groups (NousResearch/atropos): one line = one group; the rows of group 2 from the raw file
    import shutil
    from pathlib import Path

    name = "rubiks_process_results_20.jsonl"
    src = Path(__file__).resolve().parent / "data" / "realworld" / "atropos" / name
    shutil.copy(src, data_root / name)
    raw = [json.loads(x) for x in src.read_text().splitlines() if x.strip()]
    first = sum(len(x["scores"]) for x in raw[:2])

    page.goto(app_url + "/")
    page.wait_for_function(PAINTED, timeout=60000)
    page.get_by_role("tab", name="Datasets").click()
    page.locator("#source-picker textarea, #source-picker input").first.fill(name)
    page.locator("#ds-open").click()
    page.wait_for_function("document.querySelector('#ds-status')?.textContent.includes('atropos')", timeout=60000)
    page.get_by_role("tab", name="Groups").click()
    page.locator("#grp-find").click()
    page.wait_for_function(f"document.querySelectorAll('#grp-table .body-cell.first-column').length === {len(raw)}",
                           timeout=60000)
    page.locator("#grp-table .body-cell.first-column[data-row='2']").click()
    cards = page.locator("#grp-siblings .ri-grp-card")
    cards.first.wait_for(timeout=30000)
    assert cards.count() == len(raw[2]["scores"])
    page.locator("#grp-members .body-cell.first-column[data-row='1']").click()  # sibling 2 opens
    page.wait_for_function(f"document.querySelector('#rollout-header')?.textContent.includes('row {first + 1}')",
                           timeout=60000)
    walker = page.locator("#grp-walker")
    walker.wait_for(state="visible", timeout=30000)
    page.wait_for_function("document.querySelector('#grp-walk-line')?.textContent.includes('2 / 4')", timeout=60000)
    assert "2 / 4" in page.locator("#grp-walk-line").text_content()
    page.locator("#grp-next").click()
    page.wait_for_function(f"document.querySelector('#rollout-header')?.textContent.includes('row {first + 2}')",
                           timeout=60000)
    # the header and the walker's line are two outputs of one event, painted one after the other: wait for the line
    page.wait_for_function("document.querySelector('#grp-walk-line')?.textContent.includes('3 / 4')", timeout=60000)
    assert "3 / 4" in page.locator("#grp-walk-line").text_content() and walker.is_visible()
    page.locator("#grp-prev").click()
    page.locator("#grp-prev").click()
    page.wait_for_function("document.querySelector('#grp-walk-line')?.textContent.includes('1 / 4')", timeout=60000)
    assert f"row {first}" in page.locator("#rollout-header").text_content() and walker.is_visible()
    # another rollout opened (row 0 from the Datasets table): the walker goes, its group is not on screen
    page.get_by_role("tab", name="Datasets").click()
    page.locator("#row-table .body-cell.first-column[data-row='0']").click()
    page.wait_for_function("document.querySelector('#rollout-header')?.textContent.includes('row 0')",
                           timeout=60000)
    walker.wait_for(state="hidden", timeout=30000)
