"""Screenshot of the importance-sampling view: the SmolLM2 sample rescored, token_truncate with bounds
[0.8, 1.25] so clipped tokens show in the token view's Δ mode, the four-mode table below (docs/MISMATCH.md).

Usage: .venv/bin/python scripts/screenshot_is.py URL OUT.png
"""
import shutil
import sys

from playwright.sync_api import sync_playwright

from screenshot import ARGS


def main(url: str, out: str) -> None:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
        pg = b.new_page(viewport={"width": 1400, "height": 2400})
        pg.goto(f"{url}/?source=sample:smollm2&turn=1&__theme=light")
        pg.wait_for_function("document.querySelector('#token-view .ri-tv')?.dataset.painted > 0", timeout=60000)
        pg.locator("#rescore-panel").get_by_text("Trainer-side logprobs").click()
        pg.locator("#rescore-run").click()
        pg.wait_for_function("document.querySelector('#token-view button[data-mode=delta].on') !== null",
                             timeout=600000)
        pg.locator("#is-mode input").click()
        pg.get_by_role("option", name="token_truncate").click()
        for sel, v in (("#is-min", "0.8"), ("#is-max", "1.25")):
            box = pg.locator(f"{sel} textarea, {sel} input").first
            box.fill(v)
            box.press("Enter")
        pg.wait_for_function("document.querySelectorAll('#token-view .tk.isc:not(.ri-legend *)').length > 0",
                             timeout=60000)
        pg.wait_for_timeout(1500)
        tok = pg.locator("#token-view .ri-tv-body .tk.isc").first
        tok.scroll_into_view_if_needed()
        pg.evaluate("document.querySelector('#token-view').scrollIntoView({block: 'start'})")
        box = tok.bounding_box()
        pg.mouse.move(box["x"] + box["width"] / 2 + 3, box["y"] + box["height"] / 2 + 3)
        pg.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        pg.wait_for_timeout(300)
        print("tip:", pg.locator("#token-view .ri-tip").text_content().replace("\n", " | "))
        top = pg.locator("#token-view").bounding_box()
        bottom = pg.locator("#is-view").bounding_box()
        pg.screenshot(path=out, clip={"x": 0, "y": max(0, top["y"] - 10), "width": 1400,
                                      "height": min(2400, bottom["y"] + bottom["height"] - top["y"] + 20)})
        b.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
