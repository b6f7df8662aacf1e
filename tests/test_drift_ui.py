"""The Drift screen through its HTTP API (gradio_client) and in a real browser (Playwright)."""
from __future__ import annotations

import json
import re

import pytest

from viewer.config import SAMPLE_DIR
from viewer.sources import load_source
from tv_payload import expand

SAMPLE = SAMPLE_DIR / "qwen3-tiny"


def _tool_turn():
    ro = load_source(SAMPLE)
    return next(t for t in ro.agent_turns if t.tool_names)


def _open_turn(client, index):
    client.predict("qwen3-tiny", "", api_name="/open_sample")
    client.predict(index, api_name="/select_turn")


def test_drift_turn_shows_special_token_case(client):
    t = _tool_turn()
    _open_turn(client, t.index)
    turn, html, rows, row_view = client.predict(api_name="/drift_turn")
    assert turn == t.index
    assert f'data-turn="{t.index}"' in html and 'data-drifted="1"' in html
    for check in ("roundtrip", "template", "prefix", "rows"):
        assert f'data-check="{check}"' in html
    assert "special_token" in html and "&lt;tool_call&gt;" in html
    assert "<tool_call>" not in html  # only ever escaped
    assert "vLLM-style render" in html and "plain TRL-style render" in html
    payload = expand(row_view)  # the trainer row token view payload
    assert len(payload["ids"]) == len(payload["k"]) and set(payload["k"]) <= {0, 1, 2}


def test_drift_follows_selected_turn_and_prefix(client):
    ro = load_source(SAMPLE)
    agent = ro.agent_turns
    t = _tool_turn()
    nxt = agent[agent.index(t) + 1]
    _open_turn(client, nxt.index)
    turn, html, _, _ = client.predict(api_name="/drift_turn")
    assert turn == nxt.index
    # the next prompt re-renders the tool call's sampled pieces: all of its output is re-rendered
    assert f"<b>{len(t.output_ids):,}</b> tokens re-rendered" in html
    # auto: the sample has engine prompt ids → TRL 1.16's contract, whose threshold 0 forks
    assert 'data-trainer="trl-contract"' in html and "chosen automatically" in html and "FORK" in html


def test_drift_trainer_selector_gives_trls_rows(client):
    """The selector switches the rows to TRL 1.14 message mode: on this sample TRL keeps 77 of 242
    trained tokens in one row (docs/TRAINER.md; proven against TRL in test_trainer_oracle.py)."""
    t = _tool_turn()
    _open_turn(client, t.index)
    _, html, labels, row_view = client.predict("trl-message", "tool-calls", api_name="/drift_turn")
    assert 'data-trainer="trl-message"' in html and "TRL 1.14.0" in html and "train turns: tool-calls" in html
    assert 'data-rows="1" data-losing="165"' in html and "not in chain" in html  # the text answer
    payload = expand(row_view)
    assert sum(1 for k in payload["k"] if k == 1) == 77
    _, html, _, _ = client.predict("trl-message", "all", api_name="/drift_turn")
    assert 'data-rows="1" data-losing="242"' in html and "not in chain" not in html
    _, html, _, _ = client.predict("trl-contract", "tool-calls", api_name="/drift_turn")
    assert 'data-trainer="trl-contract"' in html and "fork threshold 0" in html and 'data-losing="0"' in html


def test_drift_costs_panel_through_the_api(client):
    """The gradient-cost panel of the open rollout: TRL 1.14 on the sample loses 165 tokens, all to the
    <tool_call> spelled as pieces (docs/DRIFT-DOCTOR.md); contract mode (the what-if) recovers them."""
    _open_turn(client, _tool_turn().index)
    html, _fig = client.predict("trl-message", "tool-calls", api_name="/drift_costs")
    assert 'data-gradient-lost="165"' in html and 'data-table="by-cause"' in html and "special_token" in html
    assert 'data-table="what-if"' in html and "contract_mode" in html


def test_drift_repro_export(client):
    t = _tool_turn()
    _open_turn(client, t.index)
    files = client.predict(api_name="/drift_repro")
    docs = [json.loads(open(f).read()) for f in files]
    rt = next(d for d in docs if d["kind"] == "roundtrip")
    assert rt["cause"] == "special_token" and rt["turn"] == t.index and rt["break_offset"] == 0
    assert rt["tokenizer"] and len(rt["chat_template_sha256"]) == 64
    assert rt["expected"]["ids"] == list(t.output_ids[:64])  # the sampled ids around the break
    assert 151657 in rt["observed"]["ids"]  # re-encoded: the special <tool_call>


def test_drift_scan_folder_filter_and_refusal(client, data_root):
    import shutil

    from viewer.config import SAMPLE_DIR

    for name in ("qwen3-tiny", "smollm2"):  # the app's data root gets a folder of captures
        if not (data_root / "captures" / name).exists():
            shutil.copytree(SAMPLE_DIR / name, data_root / "captures" / name)
    client.predict("qwen3-tiny", "", api_name="/open_sample")
    summary, table, cause_fig, rollout_fig = client.predict(
        "folder of captures", "captures", "", 50, "(all turns)", api_name="/drift_scan")
    assert 'data-scan="done"' in summary
    names = {r[0] for r in table["data"]}
    assert any(n.endswith("qwen3-tiny") for n in names) and len(names) >= 2
    assert cause_fig["type"] == "plotly" and rollout_fig["type"] == "plotly"
    # the scan panel keeps its result per session: filter it by cause
    table2, _ = client.predict("special_token", api_name="/drift_filter")
    cols = table["headers"]
    assert table2["data"] and all("special_token" in (r[cols.index("rt cause")], r[cols.index("render cause")],
                                                      r[cols.index("prefix cause")]) for r in table2["data"])
    assert len(table2["data"]) < len(table["data"])
    summary, table, _, _ = client.predict("folder of captures", "/etc", "", 50, "(all turns)", api_name="/drift_scan")
    assert "outside the allowed data folder" in summary and table["data"] in ([], [[]], [["" for _ in cols]])


@pytest.mark.slow
def test_drift_scan_on_ray_from_the_panel_equals_local(client, data_root):
    import shutil

    try:
        import ray.data  # noqa: F401
    except ImportError:
        from requires import need

        need("ray[data] (requirements-scale.txt)", "the scan panel's ray engine")
    for name in ("qwen3-tiny", "smollm2"):
        if not (data_root / "captures" / name).exists():
            shutil.copytree(SAMPLE_DIR / name, data_root / "captures" / name)
    local, ltable, _, _ = client.predict("folder of captures", "captures", "", 50, "(all turns)", "local",
                                         api_name="/drift_scan")
    on_ray, rtable, _, _ = client.predict("folder of captures", "captures", "", 50, "(all turns)", "ray",
                                          api_name="/drift_scan")
    assert 'data-scan="done"' in on_ray and "unreadable" not in on_ray
    assert sorted(map(tuple, rtable["data"])) == sorted(map(tuple, ltable["data"])) and ltable["data"]
    # the summary's totals (turns checked, drifted, causes) are the same text
    strip = lambda h: re.sub(r"tokenizer: [^·<]*", "", h)  # noqa: E731  (tokenizer order may differ)
    assert strip(on_ray) == strip(local)


def test_drift_scan_open_rollout_and_cancel_idle(client):
    client.predict("qwen3-tiny", "", api_name="/open_sample")
    summary, table, _, _ = client.predict("open rollout", "", "", 10, "(drifted turns)", api_name="/drift_scan")
    ro = load_source(SAMPLE)
    assert "turns checked" in summary and len(table["data"]) == len(ro.agent_turns)
    assert "No scan running" in client.predict(api_name="/drift_cancel")


@pytest.mark.browser
def test_browser_drift_view_shows_tool_call_special_token(page, app_url):
    t = _tool_turn()
    page.goto(f"{app_url}/?source=sample:qwen3-tiny&turn={t.index}")
    page.wait_for_function("document.querySelector('#token-view .ri-tv')?.dataset.painted > 0", timeout=60000)
    page.evaluate("document.title = 'clean'")
    page.get_by_role("tab", name="Drift").click()  # tabs mount lazily
    page.wait_for_function(f"document.querySelector('#drift-view .ri-drift[data-turn=\"{t.index}\"]')",
                           timeout=60000)
    rt = page.locator("#drift-view [data-check=roundtrip]")
    text = rt.text_content()
    assert "not equal" in text and "special_token" in text
    first = rt.locator("tbody tr").first  # span 0: the sampled pieces of <tool_call>
    assert first.get_attribute("data-cause") == "special_token"
    cells = first.locator("td")
    sampled = "".join(cells.nth(4).locator(".tk").all_text_contents())
    reenc = cells.nth(5).locator(".tk.sp").all_text_contents()
    assert sampled.startswith("<t") and "<tool_call>" not in cells.nth(4).locator(".tk").all_text_contents()
    assert reenc == ["<tool_call>"]
    # the trainer row is drawn by the token view (textContent), masks visible
    page.wait_for_function("document.querySelector('#drift-row-view .ri-tv')?.dataset.painted > 0", timeout=30000)
    assert page.locator("#drift-row-view .tk.sp").count() > 0
    assert page.title() == "clean"
    assert page.locator("#drift-view script, #drift-view img, #drift-view iframe").count() == 0


@pytest.mark.browser
def test_browser_gradient_cost_panel_and_sweep_plot(page, app_url):
    """Opening the Drift tab fills the gradient-cost panel and draws the sweep; choosing trl-message
    shows its 165 lost tokens (docs/TRAINER.md), all special_token, and the plot's points."""
    t = _tool_turn()
    page.goto(f"{app_url}/?source=sample:qwen3-tiny&turn={t.index}")
    page.wait_for_function("document.querySelector('#token-view .ri-tv')?.dataset.painted > 0", timeout=60000)
    page.get_by_role("tab", name="Drift").click()
    page.wait_for_function("document.querySelector('#drift-cost [data-gradient-lost]')", timeout=60000)
    page.locator("#drift-trainer input").fill("trl-message")
    page.keyboard.press("Enter")
    page.wait_for_function("document.querySelector('#drift-cost [data-gradient-lost=\"165\"]')", timeout=60000)
    assert "special_token" in page.locator("#drift-cost [data-table=by-cause]").text_content()
    page.wait_for_function("document.querySelectorAll('#drift-sweep-plot .scatterlayer .point').length === 5",
                           timeout=60000)


@pytest.mark.browser
def test_browser_scan_row_jumps_to_tokens(page, app_url):
    ro = load_source(SAMPLE)
    last = ro.agent_turns[-1].index
    page.goto(f"{app_url}/?source=sample:qwen3-tiny&turn={ro.agent_turns[0].index}")
    page.wait_for_function("document.querySelector('#token-view .ri-tv')?.dataset.painted > 0", timeout=60000)
    page.get_by_role("tab", name="Drift").click()
    page.locator("#drift-scan").click()  # scope defaults to the open rollout
    page.wait_for_function("document.querySelector('#drift-scan-summary [data-scan]')", timeout=60000)
    from viewer.drift.results import SCAN_COLUMNS

    cells = page.locator("#drift-scan-table .body-cell")  # Gradio 6's visible dataframe cells
    cells.nth(len(SCAN_COLUMNS) * len(ro.agent_turns) - 1).wait_for()
    cell = cells.nth(len(SCAN_COLUMNS) * (len(ro.agent_turns) - 1) + 1)  # the last turn's "turn" cell
    assert cell.text_content().strip() == str(last)
    cell.click()
    page.wait_for_function(f"document.querySelector('#token-view .ri-tv')?.dataset.turn === '{last}'", timeout=30000)
    assert page.get_by_role("tab", name="Tokens").get_attribute("aria-selected") == "true"


def test_scan_table_rows_of_a_data_file_reopen(tmp_path, qwen3):
    """A scan of a data file (typed in the scan panel's path box): every table row (a row of that
    file, which has no path of its own) opens again from the table. Before, the lookup fell
    through to "open this path" and failed for every data-file row."""
    from _row_fixtures import contract_rows, write_jsonl

    from viewer.config import Settings
    from viewer.drift.corpus import scan_source
    from viewer.drift.results import scan_table
    from viewer.ui.drift_tab import keep_unpathed, open_scanned
    from viewer.ui.store import RolloutStore

    rows = contract_rows(qwen3)
    rows = [rows[0], dict(rows[0], completion_token_ids=rows[0]["completion_token_ids"][:1],
                          per_token_logps=[-0.2], loss_mask=rows[0]["loss_mask"][:len(rows[0]["prompt_token_ids"]) + 1])]
    write_jsonl(rows, tmp_path / "data" / "rows.jsonl")
    settings = Settings(data_root=str(tmp_path))
    entry = {"keys": {}, "kept": {}}
    res = scan_source(tmp_path / "data" / "rows.jsonl", settings, on_rollout=keep_unpathed(entry))
    table = scan_table(res)
    assert len(table) == 2
    store = RolloutStore(settings)
    for rec, raw in zip(table, rows):
        op = open_scanned(entry, str(rec["rollout"]), store, settings)
        assert op is not None
        turn = op.rollout.turns[0]
        assert list(turn.output_ids) == raw["completion_token_ids"]  # this row's ids, from the file
        assert list(turn.prompt_ids) == raw["prompt_token_ids"]
