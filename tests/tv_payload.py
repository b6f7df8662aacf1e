"""The token payload in tests: the library's decoder under the names the tests use, and the cases
both decoders are held to (tests/test_render_payload.py in Python, tests/test_token_payload_browser.py
in chromium).

``expand`` is :func:`viewer.render.payload.decode_payload` (a payload's per-position ``ids``, ``t``,
``k``, ``lp``), ``numbers`` is :func:`viewer.render.payload.decode_numbers`. The decoder is checked
against payloads worked out by hand and against the browser's reader, never against itself.
"""
from __future__ import annotations

import json
from typing import Any

from hostile import HOSTILE
from viewer.render.payload import Logprobs, TokenView, Tokens, TurnInfo, ViewOptions
from viewer.render.payload import decode_numbers as numbers
from viewer.render.payload import decode_payload as expand

__all__ = ["expand", "numbers", "hostile_views", "broken_variants", "SAFE_IDS"]

_LAST_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef"  # a number column's digits that end a number
# Ids on both sides of each width of a number column (1, 2, 3, 4 characters...), up to 2**53 - 1, the
# largest a browser reads exactly (11 characters)
SAFE_IDS = [0, 31, 32, 1023, 1024, 32767, 32768, 151644, 262143, 2**31, 2**53 - 1]


def _view(ids: list, texts: list[str], kinds: list[int], lps: list, prompt_len: int = 0) -> TokenView:
    return TokenView(Tokens(ids, texts, kinds, special=[i == 0 for i in range(len(ids))]),
                     TurnInfo(7, prompt_len, prompt_source="engine", output_source="engine"),
                     Logprobs(lps), ViewOptions())


def hostile_views(browser_safe: bool = True) -> dict[str, TokenView]:
    """Token views a broken or hostile file can make: characters outside the BMP, empty texts,
    script-like text, ids at the number column's edges and past them (a list then), logprobs that
    are NaN, infinite, positive or huge, an empty turn. ``browser_safe``: leave out the ids over
    2**53 - 1, which a browser reads as the nearest double."""
    texts = ["😀", "", "a😀b", "é", "\n", "x", "𝔘\r\n", "\u2028\u2029", "\x00\x1f", "</script>", *HOSTILE]
    n = len(texts)
    odd_lps = [None, -0.25, float("nan"), float("inf"), float("-inf"), -1e308, 3.5, 0.0, -1.23456789, None]
    views = {
        "texts": _view(list(range(1, n + 1)), texts, ([0, 0] + [1, 2] * n)[:n],
                       ([None, None] + [-1.5, None] * n)[:n], 2),
        "edge ids": _view(SAFE_IDS, ["t"] * len(SAFE_IDS), [1] * len(SAFE_IDS), [-0.5] * len(SAFE_IDS)),
        "negative id": _view([5, -1, 7], ["a", "b", "c"], [0, 1, 2], [None, -1.0, -2.0], 1),
        "odd logprobs": _view(list(range(10)), [str(i) for i in range(10)], [2] * 10, odd_lps),
        "one token": _view([151644], ["<|im_start|>"], [0], [None], 1),
        "empty turn": _view([], [], [], []),
    }
    if not browser_safe:
        views["huge ids"] = _view([2**53, 10**30, 3], ["a", "b", "c"], [1, 1, 1], [-1.0, -2.0, -3.0])
    return views


def broken_variants(payload: str) -> dict[str, Any]:
    """Ways a payload (one with at least two tokens) can fail to add up, each to be refused by both
    decoders: name -> the broken payload (a dict, or a string that is not JSON)."""
    d = json.loads(payload)
    tl, ids = numbers(d["tl"]), numbers(d["ids"])
    rest = d["ids"][next(i for i, c in enumerate(d["ids"]) if c in _LAST_DIGITS) + 1:]  # the ids after the first
    return {
        "tl one short": {**d, "tl": d["tl"][:-1]},
        "tl longer than tx": {**d, "tl": [*tl[:-1], tl[-1] + 1]},
        "tl negative, adding up": {**d, "tl": [tl[0] + tl[1] + 1, -1, *tl[2:]]},
        "tl not a column": {**d, "tl": 7},
        "tx not a string": {**d, "tx": list(d["tx"])},
        "kr short": {**d, "kr": d["kr"][:-2]},
        "kr odd": {**d, "kr": d["kr"][:-1]},
        "kr unknown kind": {**d, "kr": [9, len(ids)]},
        "kr zero count": {**d, "kr": [0, 0, *d["kr"]]},
        "kr past the end": {**d, "kr": [0, len(ids) + 1]},
        "lr out of order": {**d, "lr": [[1, [-1.0]], [0, [-1.0]]]},
        "lr past the end": {**d, "lr": [[len(ids) - 1, [-1.0, -1.0]]]},
        "lr empty run": {**d, "lr": [[0, []]]},
        "lr not a number": {**d, "lr": [[0, ["x"]]]},
        "lr not runs": {**d, "lr": {"0": [-1.0]}},
        "version 2": {**d, "v": 2},
        "no version": {k: v for k, v in d.items() if k != "v"},
        "ids ends inside a number": {**d, "ids": d["ids"] + "g"},  # "g": a digit that says another follows
        "ids not a digit": {**d, "ids": d["ids"][:-1] + "!"},
        "ids one short": {**d, "ids": d["ids"][:-1]},
        # the first id replaced: 2**53 (ten 0-groups that say another follows, then 8), twelve groups
        "ids 2**53": {**d, "ids": "g" * 10 + "I" + rest},
        "ids twelve groups": {**d, "ids": "g" * 11 + "A" + rest},
        "ids list of strings": {**d, "ids": [str(i) for i in ids]},
        "ids list of booleans": {**d, "ids": [True] * len(ids)},
        "not JSON": payload[:-1],
        "NaN": payload.replace('"lr":[', '"lr":[[0,[NaN]],', 1),
        "not an object": [d],
    }
