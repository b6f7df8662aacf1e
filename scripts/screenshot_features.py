"""Screenshots of the Compare tab and of presenter mode (docs/screenshot-compare.png,
docs/screenshot-presenter.png), for people to look at.

Usage:
  .venv/bin/python scripts/screenshot_features.py pair DATA_ROOT   # two sibling captures for Compare
  VIEWER_DATA_ROOT=DATA_ROOT make app &                           # or any launch with that data root
  .venv/bin/python scripts/screenshot_features.py shoot URL OUTDIR

``pair`` writes DATA_ROOT/sibling-a (a copy of sample_data/qwen3-tiny) and DATA_ROOT/sibling-b,
the same capture with one sampled token of its second agent call replaced (output position 30,
" banana"), in trace.json and turns.json alike: a stand-in for two rollouts of one task.
"""
import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run"]
BANANA = 43096  # " banana" in the Qwen3 vocabulary
CALL, POS = 3, 30


def pair(root: str) -> None:
    a, b = Path(root) / "sibling-a", Path(root) / "sibling-b"
    for d in (a, b):
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(REPO / "sample_data" / "qwen3-tiny", d)
    trace = json.loads((b / "trace.json").read_text())
    rec = next(r for r in trace if r["turn"] == CALL)
    rec["completion_token_ids"][POS] = BANANA
    rec["completion_tokens"][POS] = f"token_id:{BANANA}"
    rec["logprobs"][POS]["token"] = f"token_id:{BANANA}"
    (b / "trace.json").write_text(json.dumps(trace))
    turns = json.loads((b / "turns.json").read_text())
    next(t for t in turns if t["call"] == CALL)["output_ids"][POS] = BANANA
    (b / "turns.json").write_text(json.dumps(turns))


def shoot(url: str, out: str) -> None:
    from playwright.sync_api import sync_playwright

    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
        pg = b.new_page(viewport={"width": 1400, "height": 1100})
        pg.goto(f"{url}/?source=sibling-a&compare=sibling-b&__theme=light")
        pg.wait_for_function("document.querySelector('#compare-b .ri-tv')?.dataset.selected", timeout=60000)
        pg.wait_for_timeout(800)
        pg.locator("#compare-view").screenshot(path=str(outdir / "screenshot-compare.png"))
        pg.close()
        pg = b.new_page(viewport={"width": 1400, "height": 900})
        pg.goto(f"{url}/?source=sample:qwen3-tiny&turn=2&present=1")
        pg.wait_for_function("document.querySelector('#token-view .ri-tv')?.dataset.painted > 0", timeout=60000)
        pg.wait_for_function("Number(document.querySelector('#token-view .ri-tv').dataset.marks) > 0", timeout=30000)
        pg.keyboard.press("d")
        for _ in range(4):
            pg.keyboard.press("j")
        pg.wait_for_timeout(600)
        pg.screenshot(path=str(outdir / "screenshot-presenter.png"))
        b.close()


if __name__ == "__main__":
    {"pair": pair, "shoot": shoot}[sys.argv[1]](*sys.argv[2:])
