"""Issue 41, point 8 in Debian chromium: the header and the token view count a text-only dataset row's
tokens the same way, and the header says what its number is (every turn summed), so the two never read
as a contradiction ("18,651 prompt" above a turn of "6,118 prompt"; "0 prompt" above "6,236 prompt").

The row is the bundled capture's last tool-calling agent call written as a plain messages row (no ids: the app
renders it through the chat template), built here from the capture's trace.json read as plain JSON.
Each wait is for what the user sees; the test failed on the code before the fix.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"
INFO = "#token-view .ri-tv-info"


def _text_only_row(data_root: Path) -> Path:
    calls = json.loads((SAMPLES / "qwen3-tiny" / "trace.json").read_text())
    last = [c for c in calls if c["kind"] == "main" and c["finish_reason"] == "tool_calls"][-1]
    reply = last["response"]["choices"][0]["message"]
    row = {"messages": last["request"]["messages"] + [{k: reply[k] for k in ("role", "content", "tool_calls")
                                                       if reply.get(k) is not None}],
           "tools": last["request"]["tools"], "model": "tiny-qwen3"}
    p = data_root / "counts-agree" / "rows.jsonl"
    p.parent.mkdir(exist_ok=True)
    p.write_text(json.dumps(row) + "\n")
    return p


def _number(text: str, word: str) -> int:
    return int(re.search(rf"([\d,]+) {word}", text).group(1).replace(",", ""))


def test_header_and_token_view_count_prompt_tokens_alike(page, app_url, data_root):
    _text_only_row(data_root)
    page.goto(f"{app_url}/?source=counts-agree/rows.jsonl&row=0&turn=0")
    page.wait_for_function("document.querySelector('#token-view .ri-tv')?.dataset.painted > 0", timeout=60000)
    pill = page.locator("#rollout-header .ri-kv", has_text="prompt")
    label, value = pill.locator(".ri-k").text_content(), pill.locator(".ri-v").text_content()
    turns = int(page.locator("#turn-list .virtual-row").count())
    assert turns >= 2  # the premise: the row renders as several turns
    # what the user reads in the token view, turn by turn
    per_turn = []
    for t in range(turns):
        page.goto(f"{app_url}/?source=counts-agree/rows.jsonl&row=0&turn={t}")
        page.wait_for_function(f"document.querySelector('#token-view .ri-tv')?.dataset.turn === '{t}'", timeout=60000)
        page.wait_for_function(f"document.querySelector('{INFO}')?.textContent.includes('prompt')", timeout=30000)
        per_turn.append(_number(page.locator(INFO).text_content(), "prompt"))
    assert all(per_turn)  # every turn shows its prompt in the token view ...
    assert _number(value, "prompt") == sum(per_turn)  # ... and the header's figure is their sum
    assert f"{turns} turns summed" in label  # which the header says, next to the number
