"""The app in a real browser (Debian chromium via Playwright): paint, hover, select, safety."""
import pytest

pytestmark = pytest.mark.browser

PAINTED = "document.querySelector('#token-view .ri-tv')?.dataset.painted > 0"


def _open(page, url, query=""):
    page.goto(f"{url}/?{query}")
    page.wait_for_function(PAINTED, timeout=60000)


def test_opens_on_sample_and_hover_shows_token_details(page, app_url):
    _open(page, app_url)
    page.wait_for_function("document.querySelector('#turn-list')?.textContent.includes('bookkeeping: title')")
    tok = page.locator("#token-view .tk.k1").nth(3)
    tok.scroll_into_view_if_needed()
    tok.hover()
    tip = page.locator("#token-view .ri-tip")
    tip.wait_for(state="visible")
    text = tip.text_content()
    assert "id " in text and "logprob " in text and "trained (mask 1)" in text and "top alternatives" in text
    # the hovered position is the one described
    pos = page.locator("#token-view .ri-tv").get_attribute("data-hover")
    assert f"pos {pos} " in text


def test_special_tokens_marked_and_modes_switch(page, app_url):
    _open(page, app_url)
    specials = page.locator("#token-view .tk.sp").all_text_contents()
    assert any("<|im_start|>" in s for s in specials) and any("<|im_end|>" in s for s in specials)
    assert page.locator("#token-view .tk[class*=' b']").count() == 0
    page.locator("#token-view button[data-mode=logprob]").click()
    page.wait_for_function("document.querySelectorAll(\"#token-view .tk.k1[class*=' b']\").length > 0",
                           timeout=60000)
    assert page.locator("#token-view .ri-legend .tk").count() == 8  # the logprob scale legend


def test_context_collapses_to_tail_and_expands(page, app_url):
    _open(page, app_url)
    root = page.locator("#token-view .ri-tv")
    collapsed = int(root.get_attribute("data-painted"))
    page.locator("#token-view .ri-ctx").click()
    page.wait_for_function(f"document.querySelector('#token-view .ri-tv').dataset.painted > {collapsed}")
    assert page.locator("#token-view .ri-gap").count() == 0


def test_plot_click_event_selects_token(page, app_url):
    _open(page, app_url)
    page.wait_for_function("document.querySelector('#logprob-plot .js-plotly-plot')?.__riHooked === true",
                           timeout=30000)
    page.evaluate("window.dispatchEvent(new CustomEvent('ri-select-token', {detail: {output: 5}}))")
    sel = page.locator("#token-view .ri-tv").get_attribute("data-selected")
    a, b = map(int, sel.split("-"))
    assert a == b and page.locator("#token-view .tk.sel").count() == 1
    assert "output 5" in page.locator("#token-view .ri-tv-detail").text_content()


def test_deep_link_selects_turn_and_token_range(page, app_url):
    _open(page, app_url, "source=sample:qwen3-tiny&turn=2&tok=1000-1003")
    root = page.locator("#token-view .ri-tv")
    assert root.get_attribute("data-turn") == "2"
    assert root.get_attribute("data-selected") == "1000-1003"
    assert page.locator("#token-view .tk.sel").count() == 4


def test_hostile_tokens_do_not_execute(page, app_url, hostile_capture, tmp_path):
    _open(page, app_url)
    page.evaluate("document.title = 'clean'")
    page.get_by_text("Open a rollout").click()
    page.locator("#upload input[type=file]").set_input_files([str(p) for p in sorted(hostile_capture.iterdir())])
    page.wait_for_function("document.querySelector('#rollout-header')?.textContent.includes('Qwen3-4B-Instruct-2507')", timeout=60000)
    page.wait_for_function(PAINTED)
    # hover every output token: the tooltip must stay text
    toks = page.locator("#token-view .tk.k1")
    for i in range(min(toks.count(), 40)):
        toks.nth(i).hover()
    page.get_by_role("tab", name="Conversation").click()
    page.locator("#conversation .ri-role-user").first.wait_for()
    assert page.title() == "clean"
    for sel in ("#token-view", "#conversation", "#rollout-header"):
        assert page.locator(f"{sel} img, {sel} script, {sel} svg, {sel} iframe").count() == 0
    assert "<img src=x onerror=" in page.locator("#conversation").text_content()
    view_text = page.locator("#token-view .ri-tv-body").text_content()
    assert "onerror" in view_text


def test_copy_link_reopens_the_same_selection(page, app_url):
    _open(page, app_url, "source=sample:qwen3-tiny&turn=2&tok=1000-1001")
    page.locator("#token-view .ri-link").click()
    url = page.locator("#token-view .ri-tv").get_attribute("data-link")
    assert "source=sample%3Aqwen3-tiny" in url and "turn=2" in url and "tok=1000-1001" in url
    page.goto(url)
    page.wait_for_function(PAINTED)
    assert page.locator("#token-view .ri-tv").get_attribute("data-selected") == "1000-1001"


def test_datasets_tab_lists_rows_with_blank_filters(page, app_url, data_root, realdata):
    """In the browser (not the API) blank filter fields must not filter anything out."""
    import shutil

    dest = data_root / "harbor.traces.json"
    shutil.copy(realdata / "harbor-golden-traces" / "openhands__hello-world.traces.json", dest)
    _open(page, app_url)
    page.get_by_role("tab", name="Datasets").click()
    page.locator("#source-picker textarea, #source-picker input").first.fill(dest.name)
    page.get_by_role("button", name="Open", exact=True).click()
    page.wait_for_function("document.querySelector('#row-table')?.textContent.includes('openhands')",
                           timeout=60000)


def test_deep_link_opens_a_dataset_row_and_links_back(page, app_url, data_root, realdata):
    import shutil

    dest = data_root / "rows.traces.json"
    shutil.copy(realdata / "harbor-golden-traces" / "openhands__hello-world.traces.json", dest)
    _open(page, app_url, f"source={dest.name}&row=1")
    page.wait_for_function("document.querySelector('#rollout-header')?.textContent.includes('harbor')")
    assert "row 1" in page.locator("#rollout-header").text_content()
    page.locator("#token-view .ri-link").click()
    url = page.locator("#token-view .ri-tv").get_attribute("data-link")
    assert f"source={dest.name}" in url and "row=1" in url and "turn=" in url


@pytest.mark.parametrize("query,want", [
    ("source=sample:qwen3-tiny&turn=999", "Turn 999 is not in this rollout (turns 0–3); showing turn 1."),
    ("source=sample:qwen3-tiny&turn=2&tok=999999-1000005", "Tokens 999999–1000005 are past the end of turn 2"),
    ("source=sample:qwen3-tiny&turn=abc", "Ignored turn='abc' in the link: not a number"),
    ("source=../../etc/passwd", "../../etc/passwd: outside the allowed data folder"),
    ("source=/etc/passwd", "/etc/passwd: outside the allowed data folder"),
])
def test_bad_deep_links_say_what_is_wrong_and_the_app_keeps_working(page, app_url, query, want):
    page.goto(f"{app_url}/?{query}")
    page.wait_for_function(f"document.querySelector('#status')?.textContent.includes({want!r})", timeout=60000)
    if "passwd" in query:  # refused: nothing was opened, and no file content reached the page
        assert "root:x:0:0" not in page.content()
    else:
        page.wait_for_function(PAINTED)
        assert page.locator("#token-view .tk.sel").count() == 0
    page.goto(f"{app_url}/?source=sample:qwen3-tiny&turn=2&tok=10-11")  # the server still serves links
    page.wait_for_function(PAINTED)
    assert page.locator("#token-view .ri-tv").get_attribute("data-selected") == "10-11"


def test_a_selection_made_before_the_plots_arrive_survives_them(page, app_url):
    """The Tokens screen answers in two steps (tokens, then the plots 0.4 s later, which re-send the
    same token view): a token selected in between stays selected. Before, the second step could
    repaint the view under the user (seen as a flaky presenter test)."""
    page.goto(f"{app_url}/?source=sample:qwen3-tiny&turn=2")
    page.wait_for_function(PAINTED, timeout=60000)
    page.locator("#token-view .tk.k1").nth(2).click()  # straight away: the plots are still on their way
    sel = page.locator("#token-view .ri-tv").get_attribute("data-selected")
    assert sel
    page.wait_for_function("document.querySelector('#logprob-plot .js-plotly-plot, #logprob-plot .plot-container')",
                           timeout=30000)
    page.wait_for_timeout(1000)
    assert page.locator("#token-view .ri-tv").get_attribute("data-selected") == sel
