"""The Health tab in a real browser (Debian chromium via Playwright): a hit's link opens its turn and token."""
import json
import shutil

import pytest

from viewer.config import SAMPLE_DIR

pytestmark = pytest.mark.browser

PAINTED = "document.querySelector('#token-view .ri-tv')?.dataset.painted > 0"


def test_health_tab_lists_hits_and_links_to_the_token(page, app_url, data_root):
    cap = data_root / "health-cap"
    if not cap.exists():
        shutil.copytree(SAMPLE_DIR / "smollm2", cap)
        (cap / "turns.json").unlink()
        recs = json.loads((cap / "trace.json").read_text())
        recs[2]["per_token_logps"][5] = float("nan")  # by hand: RI011 at turn 2, output position 5
        (cap / "trace.json").write_text(json.dumps(recs))
    tok = len(json.loads((cap / "trace.json").read_text())[2]["prompt_token_ids"]) + 5
    page.goto(f"{app_url}/?source=health-cap")
    page.wait_for_function(PAINTED, timeout=60000)
    page.get_by_role("tab", name="Health").click()
    row = page.locator("#health-view table tr.ri-error", has_text="RI011")
    row.wait_for(timeout=60000)
    assert "non-finite-logprob" in row.text_content()
    row.locator("a.ri-health-link").click()
    page.wait_for_function(f"document.querySelector('#token-view .ri-tv')?.dataset.selected === '{tok}-{tok}'",
                           timeout=60000)
    assert page.locator("#token-view .ri-tv").get_attribute("data-turn") == "2"
