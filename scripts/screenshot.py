"""Screenshots of the running app in light and dark mode (for people to look at).

Usage: .venv/bin/python scripts/screenshot.py URL OUTDIR [query]
"""
import shutil
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run"]


def main(url: str, out: str, query: str = "") -> None:
    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
        for theme in ("light", "dark"):
            pg = b.new_page(viewport={"width": 1400, "height": 1100})
            sep = "&" if query else ""
            pg.goto(f"{url}/?{query}{sep}__theme={theme}")
            pg.wait_for_function("document.querySelector('#token-view .ri-tv')?.dataset.painted > 0", timeout=60000)
            pg.wait_for_timeout(800)
            tok = pg.locator("#token-view .tk.k1").first
            if tok.count():
                tok.hover()
            pg.screenshot(path=str(outdir / f"app-{theme}.png"), full_page=True)
            pg.close()
        b.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
