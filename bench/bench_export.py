"""Offline export: file size, export time, and time to first hover from ``file://``.

    .venv/bin/python bench/bench_export.py [--tokens 50000] [--max-sample-mb 5]

For each bundled sample (every turn) and for one 50k-token turn (real Qwen3 ids of Python source,
bench_token_view.py's turn): ``python -m viewer export`` in this process (seconds, bytes), then
chromium opens the file from ``file://`` with every request but the file refused, and the time from
navigation to the first token tooltip is measured (the plain-<pre> baseline of bench_token_view
is not repeated: this is about the file). Exits 1 when a bundled sample's export is over
``--max-sample-mb`` (the "small enough to attach to a message" promise, docs/SPEED.md).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_token_view import ARGS, make_turn, write_capture  # noqa: E402
from viewer.cli import main as cli  # noqa: E402
from viewer.config import SAMPLE_DIR  # noqa: E402


def export(src: Path, out: Path, *extra: str) -> float:
    t0 = time.perf_counter()
    assert cli(["export", str(src), "-o", str(out), *extra]) == 0
    return time.perf_counter() - t0


def first_hover(browser, html: Path) -> tuple[float, int]:
    """Seconds from navigation to a token's tooltip shown; requests other than the file (must be 0)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    url, other = html.resolve().as_uri(), []
    page.route("**/*", lambda r: r.continue_() if r.request.url == url else (other.append(r.request.url), r.abort()))
    t0 = time.perf_counter()
    page.goto(url)
    page.wait_for_function("document.body.dataset.ready === '1'", timeout=120000)
    tok = page.locator("#token-view .ri-tv-body .tk:not(.k0)").first
    tok.hover()
    page.locator("#token-view .ri-tip").wait_for(state="visible")
    dt = time.perf_counter() - t0
    ctx.close()
    return dt, len(other)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=50000)
    ap.add_argument("--max-sample-mb", type=float, default=5.0)
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="bench-export-"))
    rows, code = [], 0
    try:
        cases = [(f"sample {p.name} (all turns)", p) for p in sorted(SAMPLE_DIR.iterdir()) if (p / "trace.json").is_file()]
        big = tmp / "big"
        write_capture(big, make_turn(a.tokens))
        cases.append((f"one {a.tokens:,}-token turn", big))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
            for label, src in cases:
                out = tmp / (src.name + ".html")
                secs = export(src, out)
                mb = out.stat().st_size / 1e6
                hover = [first_hover(browser, out) for _ in range(2)]
                best = min(h[0] for h in hover)
                rows.append((label, mb, secs, best, max(h[1] for h in hover)))
                if label.startswith("sample") and mb > a.max_sample_mb:
                    code = 1
            browser.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'case':<36} {'file MB':>8} {'export s':>9} {'first hover s':>14} {'requests':>9}")
    for label, mb, secs, hover, other in rows:
        print(f"{label:<36} {mb:8.2f} {secs:9.2f} {hover:14.2f} {other:9d}")
    print(f"bundled samples under {a.max_sample_mb} MB (attachable): {'yes' if code == 0 else 'NO'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
