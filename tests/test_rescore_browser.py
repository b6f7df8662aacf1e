"""Rescore in a real browser: the Δ colour mode appears only after a rescore, and hover shows
sampler, trainer, Δ and ratio (tiny-qwen3 on its own sample: a second on CPU)."""
import pytest

from requires import need

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PAINTED = "document.querySelector('#token-view .ri-tv')?.dataset.painted > 0"


def test_delta_mode_after_rescore_and_hover(page, app_url):
    from viewer.rescore import torch_available

    if not torch_available():
        need("torch", "requirements-rescore.txt")
    from viewer.config import REPO_ROOT
    from viewer.rescore.model import resolve_model

    if not (REPO_ROOT / ".cache" / "models" / "tiny-qwen3" / ".done").exists():
        if not (REPO_ROOT / ".venv-vllm" / "bin" / "python").exists():
            need(".venv-vllm", "it builds the tiny-qwen3 model; scripts/setup_capture.sh installs it")
        resolve_model("tiny-qwen3")  # built once, offline, as a capture builds it
    page.goto(f"{app_url}/?source=sample:qwen3-tiny&turn=1")
    page.wait_for_function(PAINTED, timeout=60000)
    # the mode list is data-driven: no rescore yet, no delta mode
    assert page.locator("#token-view button[data-mode]").all_text_contents() == ["mask", "logprob"]
    page.locator("#rescore-panel").get_by_text("Trainer-side logprobs").click()
    page.locator("#rescore-run").click()
    page.wait_for_function("document.querySelector('#token-view button[data-mode=delta].on') !== null",
                           timeout=180000)
    # + a mode per correction method and "disagree" (issue 40: viewer/render/fixes.py, fix_view.js)
    assert page.locator("#token-view button[data-mode]").all_text_contents() == ["mask", "logprob", "delta", "trl",
                                                                                   "verl", "icepop", "dppo", "disagree"]
    legend = page.locator("#token-view .ri-legend").text_content()
    assert "Δ = trainer − sampler (tiny-qwen3)" in legend and "context changed" in legend
    page.wait_for_function("document.querySelectorAll(\"#token-view .tk[class*=' d']\").length > 100",
                           timeout=10000)
    tok = page.locator("#token-view .tk.k1[class*=' d']").nth(5)
    tok.scroll_into_view_if_needed()
    tok.hover()
    tip = page.locator("#token-view .ri-tip")
    tip.wait_for(state="visible")
    text = tip.text_content()
    assert "sampler " in text and "trainer " in text and "Δ " in text and "ratio " in text, text
    assert "context: the sampler's own ids" in text  # contract mode: the engine's prompt ids
    # the panel: summary, per-turn stats (turns 1 and 2 are trained in the contract rows), plots
    assert "mean |Δ|" in page.locator("#rescore-summary").text_content()
    cells = page.locator("#rescore-turns").text_content()
    assert "FIRST" in cells and "FORK" in cells
    assert page.locator("#delta-plot .js-plotly-plot").count() == 1
    assert page.locator("#ratio-plot .js-plotly-plot").count() == 1
    # switching back keeps delta available
    page.locator("#token-view button[data-mode=mask]").click()
    assert page.locator("#token-view .tk[class*=' d']").count() == 0
    # TRL's IS correction: a clip max just above 1 zeroes the whole row in the default sequence_mask (its
    # sequence ratio is 1.0016 on this sample in bf16), the legend says so, hover names the ratio applied,
    # the table has the four modes
    page.locator("#token-view button[data-mode=delta]").click()
    page.locator("#is-max textarea, #is-max input").first.fill("1.0005")
    page.locator("#is-max textarea, #is-max input").first.press("Enter")
    page.wait_for_function("document.querySelectorAll('#token-view .tk.isz:not(.ri-legend *)').length > 10", timeout=60000)
    assert "whole row zeroed by sequence_mask" in page.locator("#token-view .ri-legend").text_content()
    table = page.locator("#is-view").text_content()
    assert all(m in table for m in ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask"))
    assert "sampling/importance_sampling_ratio/mean" in table
    tok = page.locator("#token-view .tk.isz:not(.ri-legend *)").nth(3)
    tok.scroll_into_view_if_needed()
    tok.hover()
    tip.wait_for(state="visible")
    text = tip.text_content()
    assert "IS sequence_mask [none, 1.0005]: ratio 0 · ZEROED" in text, text
    page.locator("#is-mode input").click()
    page.get_by_role("option", name="token_truncate").click()
    page.wait_for_function("document.querySelectorAll('#token-view .tk.isc:not(.ri-legend *)').length > 0", timeout=60000)
    assert page.locator("#token-view .tk.isz:not(.ri-legend *)").count() == 0
    # a bound that is not a number: a message in the panel, no marks, the app keeps working
    page.locator("#is-max textarea, #is-max input").first.fill("lots")
    page.locator("#is-max textarea, #is-max input").first.press("Enter")
    page.wait_for_function("document.querySelector('#is-view').textContent.includes('clip max must be a number')",
                           timeout=60000)
    page.wait_for_function("document.querySelectorAll('#token-view .tk.isc:not(.ri-legend *)').length === 0", timeout=60000)
