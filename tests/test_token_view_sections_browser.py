"""A long turn's token view in chromium: laid out by sections, each breaking where the text breaks a line.

The view groups its chunks into block sections with ``content-visibility: auto`` (the browser lays out only
those near the viewport: docs/SPEED.md, round three). A block break adds a line break, so a section may only
end right after a token whose text ends a line; then the page must be exactly as tall as the same text in one
plain pre-wrap block, and a token far down must still answer a hover.
"""
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

TV = "#token-view"
PAINTED = f"document.querySelector('{TV} .ri-tv')?.dataset.painted > 0"


@pytest.fixture(scope="module")
def long_turn(data_root, qwen3):
    """A capture whose one turn is 1,000 prompt + ~9,000 output ids of real Python source (the stdlib)."""
    text = "".join(p.read_text(errors="replace") for p in sorted(Path(json.__file__).parent.glob("*.py")))
    ids = qwen3.encode(text, add_special_tokens=False)[:10_000]
    assert len(ids) == 10_000
    out = ids[1000:]
    rec = {"turn": 1, "kind": "main", "request": {"model": "Qwen/Qwen3-4B", "messages": [{"role": "user", "content": "x"}]},
           "response": {"choices": [{"message": {"role": "assistant", "content": "..."}, "finish_reason": "stop"}]},
           "prompt_token_ids": ids[:1000], "completion_token_ids": out,
           "per_token_logps": [-((i * 37) % 97) / 10.0 for i in range(len(out))], "finish_reason": "stop"}
    folder = data_root / "long-token-view"
    folder.mkdir(exist_ok=True)
    (folder / "trace.json").write_text(json.dumps([rec]))
    return folder.name


def test_long_turn_is_laid_out_by_sections_that_end_lines(page, app_url, long_turn):
    page.goto(f"{app_url}/?source={long_turn}&turn=0")
    page.wait_for_function(PAINTED, timeout=120000)
    got = page.evaluate(f"""() => {{
      const body = document.querySelector('{TV} .ri-tv-body');
      const secs = [...body.querySelectorAll('.ri-sec')];
      const ends = secs.slice(0, -1).map(s => s.textContent.endsWith('\\n'));
      const auto = secs.map(s => getComputedStyle(s).contentVisibility);
      secs.forEach(s => s.style.contentVisibility = 'visible');  // everything laid out, to compare
      const pre = document.createElement('div');
      pre.className = 'ri-tv-body';
      pre.style.maxHeight = 'none';
      pre.style.width = body.getBoundingClientRect().width + 'px';
      pre.textContent = body.textContent;
      body.parentNode.appendChild(pre);
      const probe = body.cloneNode(false);
      probe.style.maxHeight = 'none';
      probe.style.width = pre.style.width;
      for (const c of body.childNodes) probe.appendChild(c.cloneNode(true));
      body.parentNode.appendChild(probe);
      const r = [secs.length, ends, auto, probe.getBoundingClientRect().height, pre.getBoundingClientRect().height];
      pre.remove(); probe.remove();
      secs.forEach(s => s.style.contentVisibility = '');
      return r;
    }}""")
    n, ends, auto, height, plain = got
    assert n >= 3, n  # ~9,500 tokens shown: several sections of >= 2,000
    assert all(ends), ends  # every section but the last ends with a line break of the text itself
    assert set(auto) == {"auto"}
    assert abs(height - plain) < 1, (height, plain)  # the sections add no line: same height as one block


def test_token_in_the_last_section_answers_a_hover(page, app_url, long_turn):
    page.goto(f"{app_url}/?source={long_turn}&turn=0")
    page.wait_for_function(PAINTED, timeout=120000)
    n = int(page.locator(f"{TV} .ri-tv").get_attribute("data-n"))
    page.evaluate(f"() => {{ const b = document.querySelector('{TV} .ri-tv-body'); b.scrollTop = b.scrollHeight; }}")
    page.wait_for_function(f"[...document.querySelectorAll('{TV} .ri-tv-body .tk')].some(s => s._i === {n - 1})",
                           timeout=60000)
    last = page.locator(f"{TV} .ri-tv-body .tk").last
    last.hover()
    page.locator(f"{TV} .ri-tip").wait_for(state="visible")
    assert page.locator(f"{TV} .ri-tv").get_attribute("data-hover") == str(n - 1)
    assert f"pos {n - 1} " in page.locator(f"{TV} .ri-tip").text_content()
