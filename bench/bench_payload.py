"""Token payload: do the number columns (``ids`` / ``tl`` as base64url strings) earn their keep?

    .venv/bin/python bench/bench_payload.py [--repeat 15]

The payload as the app sends it ("v": 3) against the same payload with ``ids`` and ``tl`` as plain
JSON lists (what both readers also take), and the per-position lists of "v": 1, on the 50k-token turn
of bench_token_view.py and the bundled qwen3-tiny's largest turn:
1. bytes: the payload, inside the SSE message it travels in (a JSON string again), gzip -9 and
   brotli -4 of that (what a compressing proxy would send; Gradio itself does not compress SSE);
2. Python CPU: the number columns encoded vs listed; an API client's SSE message to per-position
   lists (``json.loads`` twice, ``decode_payload``);
3. chromium, renderer main-thread CPU: ``JSON.parse`` + ``riExpandTokens``, and the whole view
   painted + first hover (bench_token_view.py's harness), the two forms alternated.
CPU medians (the machine is shared); the figures are in docs/ARCHITECTURE.md ("The token view's payload").
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import brotli

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench_token_view import ARGS, HARNESS, main_thread_cpu, make_turn  # noqa: E402
from viewer import render  # noqa: E402
from viewer.config import SAMPLE_DIR, Settings  # noqa: E402
from viewer.render.escape import safe_json  # noqa: E402
from viewer.render.payload import decode_numbers, decode_payload, encode_numbers  # noqa: E402
from viewer.tokenizer import load_qwen3, token_table  # noqa: E402
from viewer.tokens import turn_tokens  # noqa: E402


def cpu_median(fn, repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        out.append(time.process_time() - t0)
    return statistics.median(out)


def forms(p3: str) -> dict[str, str]:
    """The payload three ways: as sent, with its number columns as lists, per position ("v": 1)."""
    raw = json.loads(p3)
    plain = {**raw, "ids": decode_numbers(raw["ids"]), "tl": decode_numbers(raw["tl"])}
    return {"v3": p3, "lists": safe_json(plain), "v1": safe_json({**decode_payload(p3), "v": 1})}


def cases():
    table = token_table(load_qwen3())
    turn = make_turn(50000)
    yield "50k-token turn", turn, turn_tokens(turn, table), render.ViewOptions(context_tail=10**9)
    from viewer.sources import load_source
    from viewer.tokenizer import tokenizer_for
    from viewer.views import turn_view
    s = Settings()
    r = load_source(SAMPLE_DIR / "qwen3-tiny", s)
    choice = tokenizer_for(r, s)
    big = max(r.turns, key=lambda t: len(t.prompt_ids or []) + len(t.output_ids or []))
    tv = turn_view(r, big.index, choice.tokenizer, token_table(choice.tokenizer, choice.name))
    yield f"qwen3-tiny turn {big.index}", tv.turn, tv.tokens, render.ViewOptions(context_tail=10**9)


def python_part(name: str, turn, tt, view, repeat: int) -> dict[str, str]:
    p3 = render.token_view_payload(turn, tt, view)
    f = forms(p3)
    print(f"== {name}: {len(tt.ids):,} tokens")
    for label, p in f.items():
        sse = json.dumps({"msg": "process_completed", "output": {"data": [p]}}).encode()
        print(f"  {label:5}: payload {len(p.encode()):,} B; SSE message {len(sse):,} B, gzip -9 "
              f"{len(gzip.compress(sse, 9)):,} B, brotli -4 {len(brotli.compress(sse, quality=4)):,} B")
    # what differs between the two forms when the server encodes: the two columns, then the JSON of them
    lens = json.loads(f["lists"])["tl"]
    v3, lists = json.loads(f["v3"]), json.loads(f["lists"])
    enc = [cpu_median(lambda: (encode_numbers(tt.ids), encode_numbers(lens)), repeat),
           cpu_median(lambda: safe_json(v3), repeat)]
    lst = [cpu_median(lambda: (list(map(int, tt.ids)), list(map(int, lens))), repeat),
           cpu_median(lambda: safe_json(lists), repeat)]
    print(f"  server: number columns + JSON text {enc[0] * 1000:.1f} + {enc[1] * 1000:.1f} = {sum(enc) * 1000:.1f} ms "
          f"vs listed {lst[0] * 1000:.1f} + {lst[1] * 1000:.1f} = {sum(lst) * 1000:.1f} ms (the whole v3 payload: "
          f"{cpu_median(lambda: render.token_view_payload(turn, tt, view), repeat) * 1000:.1f} ms)")
    for label in ("v3", "lists"):
        sse = json.dumps({"output": {"data": [f[label]]}})
        ms = cpu_median(lambda: decode_payload(json.loads(sse)["output"]["data"][0]), repeat) * 1000
        print(f"  {label:5}: API client, SSE message -> per-position lists: {ms:.1f} ms")
    return f


def browser_part(payloads: list[tuple[str, dict[str, str]]], repeat: int) -> None:
    from playwright.sync_api import sync_playwright

    css = (ROOT / "viewer/ui/assets/app.css").read_text()
    reader = (ROOT / "viewer/ui/assets/token_payload.js").read_text()
    html = HARNESS.replace("%CSS%", css).replace("%JS%", reader + (ROOT / "viewer/ui/assets/token_view.js").read_text())
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_content(html)
        page.add_script_tag(content=reader + "\nwindow.decodeOnly = () => riExpandTokens(JSON.parse(window.__P)).ids.length;")
        for name, f in payloads:
            n = len(decode_payload(f["v3"])["ids"])
            text = json.loads(f["v3"])["tx"]
            runs: dict[str, tuple[list, list]] = {"v3": ([], []), "lists": ([], [])}
            for _ in range(repeat):
                for label, (dec, view) in runs.items():  # alternated: the machine's load falls on both
                    page.evaluate("([p, t, n]) => hold(p, t, n)", [f[label], text, n])
                    dec.append(main_thread_cpu(browser, page, "() => decodeOnly()"))
                    view.append(main_thread_cpu(browser, page, "() => runView()"))
            print(f"== chromium, {name}: renderer main-thread CPU, medians of {repeat}")
            for label, (dec, view) in runs.items():
                print(f"  {label:5}: JSON.parse + riExpandTokens {statistics.median(dec) * 1000:.1f} ms; whole view "
                      f"painted + first hover {statistics.median(view) * 1000:.1f} ms")
        browser.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    a = ap.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    payloads = [(name, python_part(name, *rest, a.repeat)) for name, *rest in cases()]
    browser_part(payloads, a.repeat)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
