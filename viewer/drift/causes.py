"""Why two token sequences diverge: stable cause names and the classifier (docs/DRIFT.md).

Alignment is done on exact token *bytes* (byte-level BPE pieces, not display text), so
a multi-byte UTF-8 character split across tokens never shifts offsets.
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence

from viewer.drift.values import Classification
from viewer.tokenizer import token_table
from viewer.tokenizer.specials import END_OF_TURN

__all__ = ["CAUSES", "AL_CLASS", "classify_divergence", "common_prefix"]

# Stable cause names (the UI and the scan totals key on them).
CAUSES = (
    "retokenized",            # same text, different ids (BPE is not a bijection)
    "special_token",          # same text, different special-token sequence (<tool_call> as pieces)
    "think_dropped",          # a reasoning block present on one side only (template pruned it)
    "tool_args_reformatted",  # tool-call JSON re-serialised (vLLM json.loads + tojson)
    "eos_newline",            # a newline or end token added, lost or swapped at a boundary
    "template_kwargs",        # generation prompt differs: chat_template_kwargs (enable_thinking) not replayed
    "content_changed",        # anything else (history rewritten, lossy decode, ...)
)
# Agent Lightning's three classes (docs/DRIFT.md §3.1), mapped per cause as in the §3.6 crosswalk.
AL_CLASS = {
    "retokenized": "retoken",
    "special_token": "template",
    "eos_newline": "template",
    "template_kwargs": "template",
    "think_dropped": "others",
    "tool_args_reformatted": "others",
    "content_changed": "others",
}
_THINK_RE = re.compile(r"<think>(.*?)</think>\s*", re.S)
_TEXT_WINDOW = 60     # characters either side in evidence text
_AGREE = 64           # characters that must agree after a cause's edit for it to explain the break
_RESYNC_LIMIT = 4096  # tokens scanned after a divergence when looking for a re-sync



def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the common prefix (chunked slice compares: C speed on long prompts)."""
    n = min(len(a), len(b))
    if list(a[:n]) == list(b[:n]):
        return n
    lo, step = 0, 512
    while lo < n and a[lo:lo + step] == b[lo:lo + step]:
        lo += step
    while lo < n and a[lo] == b[lo]:
        lo += 1
    return lo


def _agree(u: str, v: str) -> bool:
    """Do two remainders agree long enough (or does one run out) for an edit to explain a break."""
    n = min(len(u), len(v), _AGREE)
    return u[:n] == v[:n]


def _tool_block(text: str, start: int) -> str | None:
    end = text.find("</tool_call>", start)
    return None if end < 0 else text[start:end]


def _parse_call(body: str | None) -> dict | None:
    if body is None:
        return None
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    args = obj.get("arguments")
    if isinstance(args, str):  # arguments given as a JSON string: compare the object it holds
        try:
            obj = {**obj, "arguments": json.loads(args)}
        except json.JSONDecodeError:
            pass
    return obj


def _classify_text(ta: str, tb: str, p: int, labels: tuple[str, str], p0: int | None = None) -> tuple[str, str]:
    """Cause + evidence for two texts that agree up to char ``p`` and differ after it.

    ``p0`` (≤ p) is where the differing *tokens* start: structural edits (a think block,
    an end token) are looked for there too, since ``<|im_end|>`` vs ``<|endoftext|>``
    share their first characters and the char-level break lands inside them.
    """
    for start in dict.fromkeys((p0 if p0 is not None else p, p)):
        found = _structural(ta[start:], tb[start:], labels)
        if found:
            return found
    return _tool_or_content(ta, tb, p, labels)


def _structural(ra: str, rb: str, labels: tuple[str, str]) -> tuple[str, str] | None:
    la, lb = labels
    # 1. a reasoning block on one side only
    for side, rest, other, name in ((la, ra, rb, "a"), (lb, rb, ra, "b")):
        m = _THINK_RE.match(rest)
        if m and not other.startswith("<think>"):
            after = rest[m.end():]
            if not m.group(1).strip() and not after and not other:
                return ("template_kwargs",
                        f"{side} ends with an empty <think></think> generation suffix the other lacks "
                        "(chat_template_kwargs such as enable_thinking=false not replayed)")
            size = len(m.group(1).strip())
            tail = "the text after it matches" if _agree(after, other) else "the text after it differs too"
            return ("think_dropped",
                    f"{side} has a <think> block ({size} chars of reasoning) the other side lacks; {tail}")
    # 2. a newline / end token added, lost or swapped
    ends = ("\n", *END_OF_TURN)
    for x in ends:
        if ra.startswith(x) and _agree(ra[len(x):], rb):
            return "eos_newline", f"{la} has an extra {x!r} at the boundary that {lb} lacks"
        if rb.startswith(x) and _agree(ra, rb[len(x):]):
            return "eos_newline", f"{lb} has an extra {x!r} at the boundary that {la} lacks"
    for x in END_OF_TURN:
        for y in END_OF_TURN:
            if x != y and ra.startswith(x) and rb.startswith(y) and _agree(ra[len(x):], rb[len(y):]):
                return "eos_newline", f"end token {x} in {la} became {y} in {lb}"
    return None


def _tool_or_content(ta: str, tb: str, p: int, labels: tuple[str, str]) -> tuple[str, str]:
    ra, rb = ta[p:], tb[p:]
    # 3. inside a tool call: JSON re-serialised?
    s = ta.rfind("<tool_call>", 0, p)
    if s >= 0 and "</tool_call>" not in ta[s:p]:
        body0 = s + len("<tool_call>")
        ca, cb = _parse_call(_tool_block(ta, body0)), _parse_call(_tool_block(tb, body0))
        if ca is not None and cb is not None and ca.get("name") == cb.get("name"):
            if ca == cb:
                return ("tool_args_reformatted",
                        f"tool call {ca.get('name')!r}: same JSON object, different serialisation")
            return ("tool_args_reformatted",
                    f"tool call {ca.get('name')!r}: arguments re-serialised to a different object "
                    f"({json.dumps(ca.get('arguments'))[:60]} vs {json.dumps(cb.get('arguments'))[:60]})")
        if (ca is None) != (cb is None):
            good = cb if ca is None else ca
            if good.get("arguments") == {}:
                return ("tool_args_reformatted",
                        f"tool call {good.get('name')!r}: invalid JSON on one side rendered as {{}} on the other")
    return "content_changed", f"text differs from char {p}: {ra[:30]!r} vs {rb[:30]!r}"


def _resync(a: Sequence[int], b: Sequence[int], k: int, table, a_is_prefix: bool) -> tuple[bool, int, int]:
    """From token ``k`` (first difference), walk both byte streams until they re-sync.

    Returns (same_bytes, i, j): the differing region is ``a[k:i]`` / ``b[k:j]``;
    ``same_bytes`` is True when those regions hold identical bytes (same text).
    """
    i, j = k, k
    ba, bb = b"", b""
    na, nb = min(len(a), k + _RESYNC_LIMIT), min(len(b), k + _RESYNC_LIMIT)
    while True:
        if ba and len(ba) == len(bb):
            if i < na and j < nb and a[i] == b[j]:
                return True, i, j
        if len(ba) <= len(bb) and i < na:
            ba += table.bytes_of(a[i])
            i += 1
        elif j < nb:
            bb += table.bytes_of(b[j])
            j += 1
        elif i < na:
            ba += table.bytes_of(a[i])
            i += 1
        else:
            break
        n = min(len(ba), len(bb))
        if ba[:n] != bb[:n]:
            return False, i, j
    if ba == bb:
        return True, i, j
    # a ran out while b's bytes so far agree: for a prefix check that is "same text"
    return (a_is_prefix and i >= len(a) and bb.startswith(ba)), i, j


def classify_divergence(a: Sequence[int], b: Sequence[int], k: int, tok, *, a_is_prefix: bool = False,
                        labels: tuple[str, str] = ("a", "b")) -> Classification:
    """Classify the first difference at token ``k`` between id sequences ``a`` and ``b``.

    Same bytes around the break → ``special_token`` (the added-token sequence differs) or
    ``retokenized``; otherwise a text-level heuristic (think block, newline / end token,
    tool-call JSON, else ``content_changed``). ``a_is_prefix``: ``a`` is a held buffer
    that ``b`` should extend (prefix audit), so ``a`` may simply end.
    """
    table = token_table(tok)
    same, i, j = _resync(a, b, k, table, a_is_prefix)
    # decode from the start of the current message so tool-call blocks are visible
    k0 = max(0, k - 1024)
    ta = table.decode_bytes(a[k0:min(len(a), k + _RESYNC_LIMIT)]).decode("utf-8", errors="replace")
    tb = table.decode_bytes(b[k0:min(len(b), k + _RESYNC_LIMIT)]).decode("utf-8", errors="replace")
    p = len(table.decode_bytes(a[k0:k]).decode("utf-8", errors="replace"))
    if same:
        sa = [x for x in a[k:i] if table.is_special(x)]
        sb = [x for x in b[k:j] if table.is_special(x)]
        if sa != sb:
            cause = "special_token"
            ev = (f"same text, special-token sequences differ: {labels[0]} {[table.text_of(x) for x in sa]} "
                  f"vs {labels[1]} {[table.text_of(x) for x in sb]}")
        else:
            cause = "retokenized"
            ev = (f"same text {table.decode_bytes(a[k:i]).decode('utf-8', 'replace')[:40]!r}, different split: "
                  f"{labels[0]} {table.texts(a[k:i])[:8]} vs {labels[1]} {table.texts(b[k:j])[:8]}")
    else:
        # move p to the first differing character (the token break can precede it)
        p0, q = p, p
        while q < len(ta) and q < len(tb) and ta[q] == tb[q]:
            q += 1
        p = q
        cause, ev = _classify_text(ta, tb, p, labels, p0=p0)
        sa = [x for x in a[k:i] if table.is_special(x)]
        sb = [x for x in b[k:j] if table.is_special(x)]
        if cause == "tool_args_reformatted" and sa != sb:
            ev += "; the special-token sequence differs too"
    return Classification(cause, AL_CLASS[cause], ev, ta[max(0, p - _TEXT_WINDOW):p],
                          ta[p:p + 2 * _TEXT_WINDOW], tb[p:p + 2 * _TEXT_WINDOW])


