"""Hostile text everywhere, in chromium: nothing a trace carries ever runs.

A guard installed before any page script records every dialog (alert/confirm/prompt),
every element or attribute that would execute (``on*`` handlers, ``script``/``iframe`` with
a payload, ``javascript:`` URLs) as it is added, and the page's uncaught errors. The test
walks every screen that shows data from a hostile capture (its folder name, model, tools,
arguments, output, top-k alternatives, task, tests, summary), a hostile dataset file and
its row table, the drift scan table, and hovers tokens and plot points. Expected: the
guard saw nothing, the title is unchanged, and the payloads are visible as text.
"""
from __future__ import annotations

import json

import pytest

from captures import XSS, write_hostile_everywhere

pytestmark = pytest.mark.browser

GUARD = r"""
(() => {
  window.__riBad = [];
  const flag = (why) => window.__riBad.push(String(why).slice(0, 200));
  for (const f of ['alert', 'confirm', 'prompt']) window[f] = (m) => { flag(f + ': ' + m); };
  const PAYLOAD = /alert\(|PWNED|parent\.|document\.title/;
  const check = (el) => {
    if (!el || el.nodeType !== 1) return;
    const tag = el.tagName.toLowerCase();
    for (const a of Array.from(el.attributes || [])) {
      const n = a.name.toLowerCase(), v = a.value || '';
      if (n.startsWith('on') && PAYLOAD.test(v)) flag(`handler ${tag}[${n}]=${v}`);
      if (['href', 'src', 'srcdoc', 'xlink:href', 'action', 'formaction'].includes(n)
          && (/^\s*javascript:/i.test(v) || PAYLOAD.test(v))) flag(`url ${tag}[${n}]=${v}`);
    }
    if ((tag === 'script' || tag === 'iframe') && PAYLOAD.test((el.textContent || '') + (el.getAttribute('srcdoc') || '')))
      flag(`element ${tag}`);
  };
  new MutationObserver((muts) => {
    for (const m of muts) {
      if (m.type === 'attributes') { check(m.target); continue; }
      for (const n of m.addedNodes) {
        if (n.nodeType !== 1) continue;
        check(n);
        n.querySelectorAll('*').forEach(check);
      }
    }
  }).observe(document, {subtree: true, childList: true, attributes: true});
})();
"""
PAINTED = "document.querySelector('#token-view .ri-tv')?.dataset.painted > 0"


@pytest.fixture
def guarded(page):
    seen = {"dialogs": [], "errors": []}
    page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))
    page.add_init_script(GUARD)
    return page, seen


def _clean(page, seen):
    bad = page.evaluate("window.__riBad")
    assert bad == [] and seen["dialogs"] == [] and seen["errors"] == [], (bad, seen)
    assert "PWNED" not in page.title()


def test_hostile_capture_everywhere(guarded, app_url, data_root):
    page, seen = guarded
    name = "cap <img src=x onerror=alert('dir')>"
    folder = write_hostile_everywhere(data_root / "hostile-all" / name)
    page.goto(f"{app_url}/")
    page.wait_for_function(PAINTED, timeout=60000)
    page.get_by_text("Open a rollout").click()
    page.locator("#path-box textarea, #path-box input").first.fill(str(folder.relative_to(data_root)))
    page.locator("#load-path").click()
    page.wait_for_function("document.querySelector('#rollout-header')?.textContent.includes(\"onerror=alert('dir')\")",
                           timeout=60000)
    page.wait_for_function(PAINTED)
    header = page.locator("#rollout-header").text_content()
    assert XSS[0] in header  # the hostile model name, shown as text
    # tokens: hover output tokens (tooltips with top-k alternatives) and switch modes
    toks = page.locator("#token-view .tk.k1")
    for i in range(min(toks.count(), 30)):
        toks.nth(i).hover()
    tip = page.locator("#token-view .ri-tip").text_content()
    assert "top alternatives" in tip
    page.locator("#token-view button[data-mode=logprob]").click()
    # the turn table and the tool filter list hostile tool names as text
    assert XSS[0] in page.locator("#turn-list").text_content()
    page.locator("#f-tool input").click()
    page.get_by_role("option", name=XSS[0]).wait_for()
    page.keyboard.press("Escape")
    # plot hover text
    page.wait_for_function("document.querySelector('#logprob-plot .js-plotly-plot')?.__riHooked === true",
                           timeout=30000)
    box = page.locator("#logprob-plot .nsewdrag").first.bounding_box()
    for fx in (0.1, 0.3, 0.5, 0.7, 0.9):
        page.mouse.move(box["x"] + box["width"] * fx, box["y"] + box["height"] * 0.5)
        page.wait_for_timeout(80)
    for tab, sel in (("Conversation", "#conversation"), ("Task & reward", "#task"), ("Problems", "#problems")):
        page.get_by_role("tab", name=tab).click()
        page.locator(sel).wait_for()
        page.wait_for_timeout(300)
    page.get_by_role("tab", name="Task & reward").click()
    task_text = page.locator("#task").text_content()
    assert XSS[3] in task_text and XSS[6] in task_text  # tests and the summary's error, as text
    page.get_by_role("tab", name="Conversation").click()
    assert XSS[2] in page.locator("#conversation").text_content()
    # drift: the per-turn report and a scan of the folder (its table names the hostile folder)
    page.get_by_role("tab", name="Drift").click()
    page.locator("#drift-view [data-check]").first.wait_for(timeout=60000)
    page.get_by_role("radio", name="folder of captures").check()
    page.locator("#drift-scan-path textarea, #drift-scan-path input").first.fill("hostile-all")
    page.locator("#drift-scan").click()
    page.wait_for_function("document.querySelector('#drift-scan-summary [data-scan=done]') !== null", timeout=120000)
    assert "onerror=alert('dir')" in page.locator("#drift-scan-table").text_content()
    _clean(page, seen)


def test_hostile_dataset_rows_and_row_table(guarded, app_url, data_root):
    page, seen = guarded
    rows = [{"model": XSS[i % len(XSS)], "agent": XSS[(i + 1) % len(XSS)],
             "messages": [{"role": "system", "content": XSS[i % len(XSS)]},
                          {"role": "user", "content": " ".join(XSS)},
                          {"role": "assistant", "content": XSS[(i + 2) % len(XSS)]}]} for i in range(4)]
    dest = data_root / "hostile <svg onload=alert(1)>.jsonl"
    dest.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    page.goto(f"{app_url}/")
    page.wait_for_function(PAINTED, timeout=60000)
    page.get_by_role("tab", name="Datasets").click()
    page.locator("#source-picker textarea, #source-picker input").first.fill(dest.name)
    page.get_by_role("button", name="Open", exact=True).click()
    page.wait_for_function("document.querySelector('#row-table')?.textContent.includes('alert(')", timeout=60000)
    page.locator("#ds-row input").fill("2")
    page.locator("#ds-open-row").click()
    # the header while the row is read shows Gradio's progress ("reading row 2 of …"): wait for the row itself
    page.wait_for_function("(t => t.includes('row 2') && !t.includes('reading row'))"
                           "(document.querySelector('#rollout-header')?.textContent || '')", timeout=60000)
    assert XSS[2] in page.locator("#rollout-header").text_content()  # row 2's hostile model name, as text
    page.get_by_role("tab", name="Tokens").click()
    page.wait_for_function(PAINTED, timeout=60000)
    page.get_by_role("tab", name="Conversation").click()
    page.wait_for_timeout(500)
    _clean(page, seen)
