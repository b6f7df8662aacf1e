"""Screenshot of an offline export (docs/TALK.md, "Export"): the qwen3-tiny sample with one note
(`notes.json` beside a copy of it), exported with `python -m viewer export`, opened from file://
with every request refused, the note's callout shown (`n`) and a token hovered.

Usage: .venv/bin/python scripts/screenshot_export.py docs/screenshot-export.png
"""
import json
import shutil
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from screenshot import ARGS

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from viewer.cli import main as cli  # noqa: E402
from viewer.config import SAMPLE_DIR  # noqa: E402


def main(out: str) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="shot-export-"))
    cap = tmp / "qwen3-tiny"
    shutil.copytree(SAMPLE_DIR / "qwen3-tiny", cap)
    rec = json.loads((cap / "trace.json").read_text())[2]
    p = len(rec["prompt_token_ids"])
    (cap / "notes.json").write_text(json.dumps({"version": 1, "notes": [
        {"id": "n1", "turn": 2, "tok": [p, p + 4], "text": "<tool_call> sampled as plain pieces: the next prompt "
         "re-renders it as one special token, so these tokens lose their gradient",
         "anchor": rec["completion_token_ids"][:5]}]}))
    html = tmp / "rollout.html"
    assert cli(["export", str(cap), "-o", str(html), "--turns", "1-3", "--mode", "drift"]) == 0
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
        pg = b.new_page(viewport={"width": 1400, "height": 1100})
        url = html.as_uri()
        pg.route("**/*", lambda r: r.continue_() if r.request.url == url else r.abort())
        pg.goto(url)
        pg.wait_for_function("document.body.dataset.ready === '1'")
        pg.keyboard.press("n")
        pg.wait_for_function(f"document.querySelector('#token-view .ri-tv').dataset.selected === '{p}-{p + 4}'")
        pg.evaluate("window.scrollTo(0, 0)")  # the header and the turn list in the picture too
        span = pg.evaluate_handle(f"[...document.querySelectorAll('#token-view .tk')].find(e => e._i === {p + 2})")
        span.as_element().hover()
        pg.locator("#token-view .ri-tip").wait_for(state="visible")
        pg.screenshot(path=out)
        b.close()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshot-export.png")
