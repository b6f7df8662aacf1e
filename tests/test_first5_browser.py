"""Issue 25 in Debian chromium: what a new user and a presenter trip over, one test per point.

Each test waits for what the user would see (never a fixed sleep) and was checked to fail on the
code before its fix.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"
TV = "#token-view .ri-tv"
PAINTED = f"document.querySelector('{TV}')?.dataset.painted > 0"
MODE_ON = f"document.querySelector('{TV} .ri-modes button.on')?.dataset.mode"


def _open(page, app_url, query=""):
    page.goto(f"{app_url}/?{query}")
    page.wait_for_function(PAINTED, timeout=60000)


def _turn(page) -> str:
    return page.locator(TV).get_attribute("data-turn")


def _wait_turn(page, turn: str):
    try:
        page.wait_for_function(f"document.querySelector('{TV}')?.dataset.turn === '{turn}'", timeout=30000)
    except Exception:
        print("DEBUG want", turn, "have", _turn(page), page.evaluate("document.querySelector('#turn-number input').value"),
              page.evaluate("[...document.querySelectorAll('.toast-body')].map(t => t.textContent)"))
        raise


def _row(page, n: int):
    """The first cell (the turn number) of the turn list's row n (Gradio 6 draws rows as div.virtual-row)."""
    return page.locator(f"#turn-list .body-cell.first-column[data-row='{n}']")


def _url_mode(page):
    return page.evaluate("new URL(location.href).searchParams.get('mode')")


# --- 1. the colour mode stays across turn changes, and the URL follows it ---------------------------

def test_mode_from_link_survives_next_prev_row_click_and_typed_turn(page, app_url):
    _open(page, app_url, "source=sample:qwen3-tiny&turn=1&mode=logprob")
    assert page.evaluate(MODE_ON) == "logprob"
    page.locator("#next-turn").click()
    _wait_turn(page, "2")
    assert page.evaluate(MODE_ON) == "logprob" and _url_mode(page) == "logprob"
    page.locator("#prev-turn").click()
    _wait_turn(page, "1")
    assert page.evaluate(MODE_ON) == "logprob"
    _row(page, 3).click()
    _wait_turn(page, "3")
    assert page.evaluate(MODE_ON) == "logprob"
    box = page.locator("#turn-number input")
    # the row click's second step (plots) can still write "3" into the box after we type: type again
    # until the typed turn is the one asked for (each try waits for a condition, not for a time)
    for attempt in range(4):
        box.fill("2")
        box.press("Enter")
        try:
            page.wait_for_function(f"document.querySelector('{TV}')?.dataset.turn === '2'", timeout=20000)
            break
        except Exception:
            if attempt == 3:
                raise
    assert page.evaluate(MODE_ON) == "logprob"
    assert page.locator(f"{TV} .tk.k1[class*=' b']").count() > 0  # drawn in logprob colours, not only the button


def test_mode_picked_by_click_goes_into_the_url_and_stays(page, app_url):
    _open(page, app_url, "source=sample:qwen3-tiny&turn=1")
    assert _url_mode(page) is None
    page.locator(f"{TV} button[data-mode=logprob]").click()
    page.wait_for_function("new URL(location.href).searchParams.get('mode') === 'logprob'", timeout=60000)
    page.locator("#next-turn").click()
    _wait_turn(page, "2")
    assert page.evaluate(MODE_ON) == "logprob" and _url_mode(page) == "logprob"
    page.locator(f"{TV} button[data-mode=mask]").click()
    page.wait_for_function("new URL(location.href).searchParams.get('mode') === null", timeout=60000)
    page.reload()
    page.wait_for_function(PAINTED, timeout=60000)
    assert page.evaluate(MODE_ON) == "mask"


def test_presenter_keeps_the_linked_mode_across_turns(page, app_url):
    _open(page, app_url, "source=sample:qwen3-tiny&turn=1&mode=logprob&present=1")
    page.wait_for_function("document.body.classList.contains('ri-present')")
    assert page.evaluate(MODE_ON) == "logprob"
    page.keyboard.press("ArrowRight")
    _wait_turn(page, "2")
    assert page.evaluate(MODE_ON) == "logprob"
    page.wait_for_function("document.querySelector('#presenter .ri-pr-state').textContent.includes('colour: logprob')")


# --- 2. text-only traces are decoded with the tokenizer that made their ids --------------------------

def _upload(page, files):
    if not page.locator("#upload input[type=file]").count() or not page.locator("#upload").is_visible():
        page.locator("#open-panel").get_by_text("Open a rollout").first.click()
    page.locator("#upload input[type=file]").set_input_files([str(f) for f in files])


def _turn_text(page) -> str:
    return page.evaluate(f"[...document.querySelectorAll('{TV} .ri-tv-body .tk, {TV} .ri-tv-body .run')]"
                         ".map(s => s.textContent).join('')")


def test_uploaded_text_only_trace_is_decoded_not_raw_ids(page, app_url, realdata, tmp_path):
    import json
    import re
    import shutil

    src = realdata / "harbor-golden-traces" / "openhands__hello-world.traces.json"
    f = tmp_path / src.name
    shutil.copy(src, f)
    said = json.loads(src.read_text())[0]["conversations"][-1]["content"]  # row 0's assistant reply, from the file
    _open(page, app_url, "source=sample:qwen3-tiny")
    _upload(page, [f])
    page.wait_for_function("document.querySelector('#rollout-header')?.textContent.includes('gpt-4o')", timeout=60000)
    page.wait_for_function(PAINTED, timeout=30000)
    text = _turn_text(page).replace("↵", "")
    assert not re.search(r"⟨(id )?\d+⟩", text), text[:300]
    assert said.splitlines()[0] in text and "<|im_start|>" in text
    header = page.locator("#rollout-header").text_content()
    assert "derived with the offline Qwen3 tokenizer" in header
    assert "bytes recorded in logprobs" not in header + page.locator("#status").text_content()


# --- 3. every multi-row source gets its row table ----------------------------------------------------

ROWS = "#source-rows"


def _rows_listed(page, n: int) -> int:
    """How many rows the row table lists, once it lists ``n`` (Gradio draws the rows a few at a time)."""
    page.wait_for_function(f"document.querySelectorAll('{ROWS} .body-cell.first-column').length >= {n}",
                           timeout=30000)
    return page.locator(f"{ROWS} .body-cell.first-column").count()


def _open_row_and_check(page, n: int, row: dict):
    """Click row n of the row table: its rollout opens (one turn per assistant message of the file's row n)."""
    page.locator(f"{ROWS} .body-cell.first-column[data-row='{n}']").click()
    page.wait_for_function(f"document.querySelector('#status')?.textContent.includes('Row {n} of')", timeout=30000)
    replies = [m["content"] for m in row["conversations"] if m["role"] == "assistant"]
    last = len(replies) - 1
    _row(page, last).click()
    _wait_turn(page, str(last))
    page.get_by_role("tab", name="Conversation").click()
    page.wait_for_function(f"document.querySelector('#conversation')?.textContent.includes({replies[-1][:40]!r})",
                           timeout=30000)


def test_uploaded_multi_row_file_lists_its_rows_and_opens_each(page, app_url, realdata, tmp_path):
    import json
    import shutil

    src = realdata / "harbor-golden-traces" / "openhands__hello-world.traces.json"
    f = tmp_path / src.name
    shutil.copy(src, f)
    rows = json.loads(src.read_text())
    _open(page, app_url, "source=sample:qwen3-tiny")
    assert not page.locator(ROWS).is_visible()  # a capture is one rollout: no row table
    _upload(page, [f])
    page.wait_for_function("document.querySelector('#rollout-header')?.textContent.includes('gpt-4o')", timeout=60000)
    assert _rows_listed(page, len(rows)) == len(rows) == 2
    _open_row_and_check(page, 1, rows[1])


def test_typed_path_of_a_multi_row_file_lists_its_rows(page, app_url, realdata, data_root):
    import json
    import shutil

    src = realdata / "harbor-golden-traces" / "openhands__hello-world.traces.json"
    shutil.copy(src, data_root / "two-rows.traces.json")
    rows = json.loads(src.read_text())
    _open(page, app_url, "source=sample:qwen3-tiny")
    page.locator("#open-panel").get_by_text("Open a rollout").first.click()
    page.locator("#path-box textarea, #path-box input").first.fill("two-rows.traces.json")
    page.locator("#load-path").click()
    page.wait_for_function("document.querySelector('#rollout-header')?.textContent.includes('gpt-4o')", timeout=60000)
    assert _rows_listed(page, len(rows)) == len(rows) == 2
    _open_row_and_check(page, 1, rows[1])


# --- 5. a failed upload says which rollout is still shown and lists its problem ----------------------

def test_failed_upload_names_the_rollout_still_shown_and_lists_the_file(page, app_url, tmp_path):
    bad = tmp_path / "not-a-trace.json"
    bad.write_text('{"hello": 1}')  # JSON of no known format: nothing to open
    _open(page, app_url, "source=sample:qwen3-tiny")
    _upload(page, [bad])
    page.wait_for_function("document.querySelector('#status .ri-error')", timeout=60000)
    status = page.locator("#status").text_content()
    assert "Still showing the rollout opened before: qwen3-tiny" in status, status
    assert "qwen3-tiny" in page.locator("#rollout-header").text_content()  # and it is still shown
    page.get_by_role("tab", name="Problems").click()
    problems = page.locator("#problems")
    problems.locator("table").wait_for(timeout=10000)
    text = problems.text_content()
    assert "not-a-trace.json" in text and "unknown format" in text and "No problems" not in text


# --- 4. the first screen: a real-weights sample, the tiny one labelled, one line on what to try --------

def test_first_screen_opens_real_weights_sample_and_labels_the_tiny_one(page, app_url):
    import json
    from pathlib import Path

    summary = Path(__file__).resolve().parent.parent / "sample_data" / "smollm2" / "summary.json"
    model = json.loads(summary.read_text())["model"]  # the capture's own record of its model
    _open(page, app_url)  # no link: what a new visitor sees
    header = page.locator("#rollout-header").text_content()
    assert model in header and "qwen3-tiny" not in header, header
    first = page.locator("#first-steps")
    assert first.is_visible() and "You are looking at" in first.text_content() and "Try" in first.text_content()
    # the picker names each sample with what it is
    page.locator("#open-panel").get_by_text("Open a rollout").first.click()
    page.locator("#sample-picker input").click()
    opt = page.get_by_role("option", name="qwen3-tiny", exact=False)
    opt.wait_for(timeout=10000)
    assert "random weights: drift demo, logprobs meaningless" in opt.text_content()
    opt.click()
    page.wait_for_function("document.querySelector('#status')?.textContent.includes('random weights')",
                           timeout=30000)
    page.wait_for_function("document.querySelector('#rollout-header')?.textContent.includes('qwen3-tiny')",
                           timeout=30000)


# --- 7. copy link says "Copied" where the user clicked ----------------------------------------------

def test_copy_link_says_copied_on_the_button(page, app_url):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=app_url)
    _open(page, app_url, "source=sample:qwen3-tiny&turn=2")
    btn = page.locator(f"{TV} .ri-link")
    btn.click()
    page.wait_for_function(f"document.querySelector('{TV} .ri-link')?.textContent.startsWith('Copied')",
                           timeout=60000)
    link = page.locator(TV).get_attribute("data-link")
    assert page.evaluate("navigator.clipboard.readText()") == link and "turn=2" in link
    box = btn.bounding_box()  # the word is on the button the user clicked, on screen
    assert box and 0 <= box["y"] < page.viewport_size["height"]
    page.wait_for_function(f"document.querySelector('{TV} .ri-link')?.textContent === 'copy link'", timeout=10000)


# --- 6. navigation: the turn marked in the list, filters respected, the ends said, the picker in step -------

def _listed_turns(page, n: int) -> list[str]:
    """The turn numbers the turn list shows, once it shows exactly ``n`` rows (drawn a few at a time)."""
    page.wait_for_function(f"document.querySelectorAll('#turn-list .virtual-row').length === {n}", timeout=30000)
    return page.evaluate("[...document.querySelectorAll('#turn-list .virtual-row .first-column')]"
                         ".map(c => c.textContent.trim())")


def _toast(page, words: str):
    page.wait_for_function(f"[...document.querySelectorAll('.toast-body')].some(t => t.textContent.includes({words!r}))",
                           timeout=15000)


def test_turn_list_marks_the_shown_turn_and_steps_follow_the_filter(page, app_url):
    _open(page, app_url, "source=sample:qwen3-tiny&turn=1")
    current = "document.querySelector('#turn-list .virtual-row.ri-current .first-column')?.textContent.trim()"
    page.wait_for_function(f"{current} === '1'", timeout=15000)
    summary = json.loads((SAMPLES / "qwen3-tiny" / "summary.json").read_text())  # the capture's own tally
    all_turns = _listed_turns(page, summary["calls"])
    # The open's second step (its plots) sends the whole turn list again: a filter ticked before it lands
    # is undone (a known race, docs/TESTING.md; not this test's subject): tick once the plots are drawn.
    page.wait_for_function("document.querySelector('#turns-plot .js-plotly-plot') !== null", timeout=60000)
    page.locator("#f-trained input").check()
    trained = _listed_turns(page, summary["trained_turns"])  # what the list shows with "trained turns only"
    assert trained[0] == "1" and len(trained) >= 2
    for want in trained[1:]:
        page.locator("#next-turn").click()
        _wait_turn(page, want)
        page.wait_for_function(f"{current} === '{want}'", timeout=15000)
    page.locator("#next-turn").click()  # past the last trained turn: it stays, and says so
    _toast(page, "Already at the last")
    assert _turn(page) == trained[-1]
    page.locator("#f-trained input").uncheck()
    for want in reversed(all_turns[:all_turns.index(trained[-1])]):
        page.locator("#prev-turn").click()
        _wait_turn(page, want)
    page.locator("#prev-turn").click()
    _toast(page, "Already at the first")
    assert _turn(page) == all_turns[0]


def test_sample_picker_shows_the_sample_the_link_opened(page, app_url):
    _open(page, app_url, "source=sample:qwen3-tiny")
    page.locator("#open-panel").get_by_text("Open a rollout").first.click()
    page.wait_for_function("document.querySelector('#sample-picker input')?.value.startsWith('qwen3-tiny')",
                           timeout=15000)


# --- 9. the Capture tab says, before Start, that the first local capture installs what it lacks ----------

@pytest.fixture
def app_without_vllm(tmp_path):
    """The real app on loopback, on a machine whose vLLM environment is not installed (a path that is not there)."""
    from conftest import free_port

    from viewer.config import Settings
    from viewer.ui import create_app, launch_kwargs

    from dataclasses import replace

    settings = replace(Settings.from_env(), capture_vllm_python=str(tmp_path / "no-venv" / "python"))
    demo = create_app(settings)
    _, url, _ = demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(), quiet=True,
                            **launch_kwargs(settings))
    yield url.rstrip("/")
    demo.close()


def test_capture_tab_says_the_first_local_capture_installs_vllm(page, app_without_vllm):
    _open(page, app_without_vllm, "source=sample:qwen3-tiny")
    page.get_by_role("tab", name="Capture").click()
    note = page.locator("#capture-install-note")
    note.wait_for(timeout=15000)
    text = note.text_content()
    assert "first capture installs" in text and "vLLM" in text and "minutes" in text
    # it is said before the Start button, not after a press
    assert note.bounding_box()["y"] < page.locator("#capture-start").bounding_box()["y"]


# --- 8. a rescore run by one visitor shows to another as a cached result, with its time ----------------

@pytest.mark.slow
def test_rescore_by_another_visitor_is_said_to_be_cached(browser, app_url, data_root):
    from requires import need

    from viewer.config import REPO_ROOT
    from viewer.rescore import torch_available

    if not torch_available():
        need("torch", "requirements-rescore.txt")
    if not (REPO_ROOT / ".cache" / "models" / "tiny-qwen3" / ".done").exists():
        if not (REPO_ROOT / ".venv-vllm" / "bin" / "python").exists():
            need(".venv-vllm", "it builds the tiny-qwen3 model; scripts/setup_capture.sh installs it")
        from viewer.rescore.model import resolve_model

        resolve_model("tiny-qwen3")
    # its own copy of the sample: rescores are shared per rollout for the whole app, and other tests
    # (test_rescore_browser.py) rely on the bundled sample having none yet
    import shutil

    own = data_root / "cached-rescore-qwen3-tiny"
    if not own.exists():
        shutil.copytree(REPO_ROOT / "sample_data" / "qwen3-tiny", own)
    pages = []
    for _ in range(2):
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
        pages.append(ctx.new_page())
    a, b = pages
    try:
        _open(a, app_url, f"source={own.name}&turn=1")
        a.locator("#rescore-panel").get_by_text("Trainer-side logprobs").click()
        # 11: the rescore's progress is drawn once (it was drawn over each of its outputs)
        a.evaluate("""() => { window.__riMostTrackers = 0;
          const count = () => { const n = document.querySelectorAll('[data-testid=status-tracker]:not(.hide)').length;
                                window.__riMostTrackers = Math.max(window.__riMostTrackers, n); };
          new MutationObserver(count).observe(document.body, {subtree: true, childList: true, attributes: true,
                                                             attributeFilter: ['class']}); }""")
        a.locator("#rescore-run").click()
        a.wait_for_function("document.querySelector('#token-view button[data-mode=delta].on') !== null",
                            timeout=180000)
        assert a.evaluate("window.__riMostTrackers") == 1
        assert "mean |Δ|" in a.locator("#rescore-summary").text_content()
        assert "cached result" not in a.locator("#rescore-summary").text_content()  # A ran it
        # 11: the per-turn table uses the summary's precision (Δ 4 decimals, ratio 3), not 6
        cells = a.evaluate("[...document.querySelectorAll('#rescore-turns .body-cell')].map(c => c.textContent.trim())")
        decimals = [len(c.split(".")[1]) for c in cells if c.replace(".", "", 1).replace("-", "", 1).isdigit() and "." in c]
        assert decimals and max(decimals) <= 4, cells
        _open(b, app_url, f"source={own.name}&turn=1")
        b.locator("#rescore-panel").get_by_text("Trainer-side logprobs").click()
        b.wait_for_function("document.querySelector('#rescore-summary')?.textContent.includes('mean |Δ|')",
                            timeout=30000)
        said = b.locator("#rescore-summary").text_content()
        assert "A cached result" in said and "another visitor" in said and "UTC" in said, said
    finally:
        for pg in pages:
            pg.context.close()


def test_drift_repro_box_appears_only_with_files(page, app_url):
    # 11: turn 1 writes `<tool_call>` as plain pieces (the sample's README): a drift case to export
    _open(page, app_url, "source=sample:qwen3-tiny&turn=1")
    page.get_by_role("tab", name="Drift").click()
    page.locator("#drift-repro-btn").wait_for(timeout=15000)
    assert not page.locator("#drift-repro").is_visible()  # nothing exported: no empty box
    page.locator("#drift-repro-btn").click()
    page.wait_for_function("document.querySelectorAll('#drift-repro a').length > 0", timeout=30000)
    assert page.locator("#drift-repro").is_visible()


def test_row_click_shows_no_spreadsheet_handles(page, app_url):
    _open(page, app_url, "source=sample:qwen3-tiny&turn=1")
    page.locator("#turn-list .body-cell[data-row='2']").nth(2).click()  # a cell in the middle of turn 2's row
    _wait_turn(page, "2")
    page.wait_for_function("document.querySelector('#turn-list .cell-selected') !== null", timeout=10000)
    handles = page.locator("#turn-list .selection-button")
    assert all(not handles.nth(i).is_visible() for i in range(handles.count()))
    shadow = page.evaluate("getComputedStyle(document.querySelector('#turn-list .cell-selected')).boxShadow")
    assert shadow == "none", shadow


# --- 10. wording that contradicted itself -------------------------------------------------------------

def test_train_turns_label_does_not_claim_trl_message_while_contract_rows_show(page, app_url):
    _open(page, app_url, "source=sample:qwen3-tiny&turn=1")
    page.get_by_role("tab", name="Drift").click()
    page.wait_for_function("document.querySelector('#drift-view [data-trainer]') !== null", timeout=30000)
    in_use = page.locator("#drift-view [data-trainer]").first.get_attribute("data-trainer")
    label = page.locator("#drift-train-turns").text_content()
    assert in_use == "trl-contract"  # auto picks the contract rows for a capture with engine ids
    assert "Train turns (trl-message)" not in label and "only when the trainer is trl-message" in label, label


def test_bad_turn_in_a_link_is_named_plainly(page, app_url):
    _open(page, app_url, "source=sample:qwen3-tiny&turn=abc")
    status = page.locator("#status").text_content()
    assert "turn='abc'" in status and "not a number" in status and "tok:" not in status, status


# --- 13 (part). a visible Present button ---------------------------------------------------------------

def test_present_button_enters_presenter_mode_and_the_address_says_so(page, app_url):
    _open(page, app_url, "source=sample:qwen3-tiny&turn=1")
    btn = page.locator(f"{TV} .ri-present-btn")
    assert btn.is_visible() and "Present" in btn.text_content()
    btn.click()
    page.wait_for_function("document.body.classList.contains('ri-present')", timeout=60000)
    assert page.evaluate("new URL(location.href).searchParams.get('present')") == "1"
    assert not btn.is_visible() and page.locator("#presenter .ri-pr").is_visible()
    page.keyboard.press("ArrowRight")  # the presenter's keys work
    _wait_turn(page, "2")
    page.keyboard.press("Escape")
    page.wait_for_function("!document.body.classList.contains('ri-present')", timeout=60000)
    assert page.evaluate("new URL(location.href).searchParams.get('present')") is None and btn.is_visible()


def test_presenter_cues_the_first_and_last_turn(page, app_url):
    _open(page, app_url, "source=sample:qwen3-tiny&turn=0&present=1")
    page.wait_for_function("document.body.classList.contains('ri-present')")
    page.keyboard.press("ArrowLeft")  # already on the first turn: said, not silently nothing
    _toast(page, "Already at the first turn")
    assert page.locator(".toast-body").first.is_visible() and _turn(page) == "0"
