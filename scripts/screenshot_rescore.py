"""Screenshot of a rescore in the running app: the SmolLM2 sample in the token view's Δ mode, one
token hovered, with the rescore panel below (the rescore picture in docs/USING.md).

Usage: .venv/bin/python scripts/screenshot_rescore.py URL OUT.png [model]
"""
import shutil
import sys

from playwright.sync_api import sync_playwright

from screenshot import ARGS


def main(url: str, out: str, model: str = "") -> None:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
        pg = b.new_page(viewport={"width": 1400, "height": 1500})
        pg.goto(f"{url}/?source=sample:smollm2&turn=1&__theme=light")
        pg.wait_for_function("document.querySelector('#token-view .ri-tv')?.dataset.painted > 0", timeout=60000)
        pg.locator("#rescore-panel").get_by_text("Trainer-side logprobs").click()
        if model:
            pg.locator("#rescore-model input").fill(model)
        pg.locator("#rescore-run").click()
        pg.wait_for_function("document.querySelector('#token-view button[data-mode=delta].on') !== null",
                             timeout=600000)
        pg.wait_for_function("document.querySelector('#delta-plot .js-plotly-plot') && "
                             "document.querySelector('#ratio-plot .js-plotly-plot')", timeout=60000)
        pg.wait_for_timeout(1500)
        flagged = pg.locator(", ".join(f"#token-view .ri-tv-body .tk.d{b}" for b in (1, 2, 6, 7)))
        tok = flagged.first if flagged.count() else pg.locator("#token-view .tk.k1").nth(20)
        tok.scroll_into_view_if_needed()
        tok.hover()
        pg.wait_for_timeout(300)
        pg.evaluate("document.querySelector('#token-view').scrollIntoView({block: 'start'})")
        box = tok.bounding_box()  # the page scrolled under the pointer: point at the token again
        pg.mouse.move(box["x"] + box["width"] / 2 + 3, box["y"] + box["height"] / 2 + 3)
        pg.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        pg.wait_for_timeout(300)
        print("tip:", pg.locator("#token-view .ri-tip").text_content().replace("\n", " | "))
        top = pg.locator("#token-view").bounding_box()
        bottom = pg.locator("#rescore-panel").bounding_box()
        pg.screenshot(path=out, clip={"x": 0, "y": max(0, top["y"] - 10), "width": 1400,
                                      "height": min(1500, bottom["y"] + bottom["height"] - top["y"] + 20)})
        b.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
