"""Retokenisation drift: find where ids change, say why, and count what it costs.

Three comparisons (DRIFT.md §1), all pure functions over :class:`~viewer.rollout.Turn`:

* :func:`roundtrip` — type A: ``encode(decode(output_ids))`` against the sampled ids,
  aligned in token space by byte offsets, mismatches grouped into changed spans;
* :func:`template_check` — type B: the turn's messages re-rendered through the chat
  template the way vLLM does (tool-call ``arguments`` parsed, ``chat_template_kwargs``
  replayed) against the recorded prompt ids, plus the plain re-render TRL's harness does;
* :func:`prefix_audit` — type C: does the next prompt extend prompt + output?

Every mismatch is classified with a stable cause name (:data:`CAUSES`), an Agent
Lightning class (:data:`AL_CLASS`) and evidence (a sentence + text windows).
:func:`scan` runs all three over a dataset with batched decode/encode, and
:func:`repro` exports one case as a small JSON for a bug report. Training-row stitching
(CLEAN / REALIGN / FORK) lives in :mod:`viewer.rows`.

Alignment is done on exact token *bytes* (byte-level BPE pieces, not display text), so
a multi-byte UTF-8 character split across tokens never shifts offsets.
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable, Iterable, Sequence, Sized
from dataclasses import asdict, dataclass, field
from typing import Any

from viewer.rollout import Rollout, Turn
from viewer.tokenizer import render_prompt_text, token_table

__all__ = [
    "AL_CLASS", "CAUSES", "ChangedSpan", "Classification", "PrefixCheck", "RenderComparison",
    "RoundTrip", "TemplateCheck", "Window", "classify_divergence", "common_prefix", "prefix_audit",
    "repro", "roundtrip", "scan", "template_check", "TurnReport", "turn_report",
]

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
# Agent Lightning's three classes (DRIFT.md §3.1), mapped per cause as in the §3.6 crosswalk.
AL_CLASS = {
    "retokenized": "retoken",
    "special_token": "template",
    "eos_newline": "template",
    "template_kwargs": "template",
    "think_dropped": "others",
    "tool_args_reformatted": "others",
    "content_changed": "others",
}
_END_STRINGS = ("<|im_end|>", "<|endoftext|>", "<|end|>", "<|return|>", "<|eot_id|>", "<|eom_id|>")
_THINK_RE = re.compile(r"<think>(.*?)</think>\s*", re.S)
_WINDOW = 12          # tokens either side in context windows
_TEXT_WINDOW = 60     # characters either side in evidence text
_AGREE = 64           # characters that must agree after a cause's edit for it to explain the break
_RESYNC_LIMIT = 4096  # tokens scanned after a divergence when looking for a re-sync


# --------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------

class _Dict:
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[arg-type]


@dataclass
class Window(_Dict):
    """A slice of a token sequence: ``ids[0]`` sits at index ``start`` of the full sequence."""

    start: int
    ids: list[int]
    pieces: list[str]
    text: str


@dataclass
class Classification(_Dict):
    """Why two sequences diverge. ``a``/``b`` are labelled by the caller (e.g. held / next)."""

    cause: str
    al_class: str
    evidence: str
    common_text: str = ""   # text just before the divergence (shared)
    a_text: str = ""        # text from the divergence on, side a
    b_text: str = ""        # text from the divergence on, side b


@dataclass
class ChangedSpan(_Dict):
    """One group of sampled tokens whose re-encoding differs. Token ranges are [start, end)."""

    start: int
    end: int
    re_start: int
    re_end: int
    sampled_ids: list[int]
    sampled_pieces: list[str]
    reencoded_ids: list[int]
    reencoded_pieces: list[str]
    sampled_logprobs: list[float | None]
    char_start: int
    char_end: int
    cause: str
    al_class: str


@dataclass
class RoundTrip(_Dict):
    """``decode → encode`` of one turn's output ids. ``unchecked`` holds why it could not run."""

    equal: bool | None
    first_mismatch: int | None = None
    n_sampled: int = 0
    n_reencoded: int = 0
    text: str = ""
    reencoded_ids: list[int] = field(default_factory=list)
    changed_spans: list[ChangedSpan] = field(default_factory=list)
    cause: str | None = None
    al_class: str | None = None
    causes: dict[str, int] = field(default_factory=dict)
    unchecked: str | None = None


@dataclass
class RenderComparison(_Dict):
    """One local re-render of a turn's prompt against its recorded prompt ids."""

    variant: str                      # "vllm" (normalised + kwargs) | "plain" (TRL's harness)
    equal: bool | None
    first_mismatch: int | None = None
    rendered_len: int = 0
    stored_window: Window | None = None
    rendered_window: Window | None = None
    classification: Classification | None = None
    error: str | None = None
    rendered_ids: list[int] = field(default_factory=list)

    @property
    def cause(self) -> str | None:
        return self.classification.cause if self.classification else None


@dataclass
class TemplateCheck(_Dict):
    """Type-B check. ``equal``/``first_mismatch``/``cause`` mirror the vLLM-style render."""

    prompt_source: str
    equal: bool | None
    first_mismatch: int | None = None
    cause: str | None = None
    stored_len: int = 0
    vllm: RenderComparison | None = None
    plain: RenderComparison | None = None
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    unchecked: str | None = None


@dataclass
class PrefixCheck(_Dict):
    """Type-C check: does ``nxt.prompt_ids`` extend ``prev.prompt_ids + prev.output_ids``?

    ``divergence`` is a token index into prev prompt+output (== ``matched`` when broken);
    ``tokens_rerendered`` is the held tail that is not a prefix of the next prompt;
    ``in_output`` says the break lies inside the previous turn's sampled output.
    """

    status: str                       # first | clean | broken
    divergence: int | None = None
    matched: int = 0
    held_len: int = 0
    next_len: int = 0
    tokens_rerendered: int = 0
    in_output: bool = False
    cause: str | None = None
    al_class: str | None = None
    classification: Classification | None = None
    held_window: Window | None = None
    next_window: Window | None = None
    unchecked: str | None = None


# --------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------

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


def _oov_reason(ids: Sequence[int], n_vocab: int) -> str | None:
    if not ids:
        return None
    lo, hi = min(ids), max(ids)
    if lo < 0 or hi >= n_vocab:
        bad = [i for i in ids if not 0 <= i < n_vocab]
        return f"{len(bad)} id(s) outside the vocabulary of {n_vocab} (e.g. {bad[0]})"
    return None


def _window(ids: Sequence[int], at: int, table, radius: int = _WINDOW) -> Window:
    lo, hi = max(0, at - radius), min(len(ids), at + radius)
    sl = list(ids[lo:hi])
    return Window(lo, sl, table.texts(sl), table.decode_bytes(sl).decode("utf-8", errors="replace"))


def _chat_kwargs(turn: Turn) -> dict[str, Any]:
    kw = turn.request.get("chat_template_kwargs") if isinstance(turn.request, dict) else None
    return dict(kw) if isinstance(kw, dict) else {}


def _add_generation_prompt(turn: Turn) -> bool:
    v = turn.request.get("add_generation_prompt") if isinstance(turn.request, dict) else None
    return True if v is None else bool(v)


def _need_tokenizer(tok) -> str | None:
    return None if tok is not None else "no tokenizer for this rollout"


# --------------------------------------------------------------------------------------
# Classification
# --------------------------------------------------------------------------------------

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
    ends = ("\n", *_END_STRINGS)
    for x in ends:
        if ra.startswith(x) and _agree(ra[len(x):], rb):
            return "eos_newline", f"{la} has an extra {x!r} at the boundary that {lb} lacks"
        if rb.startswith(x) and _agree(ra, rb[len(x):]):
            return "eos_newline", f"{lb} has an extra {x!r} at the boundary that {la} lacks"
    for x in _END_STRINGS:
        for y in _END_STRINGS:
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


# --------------------------------------------------------------------------------------
# A. Output round trip
# --------------------------------------------------------------------------------------

def _offsets(pieces: list[bytes]) -> list[int]:
    out = [0]
    for pb in pieces:
        out.append(out[-1] + len(pb))
    return out


def _byte_to_char(text: str) -> list[int]:
    """byte offset → char index for ``text.encode()`` (a byte inside a char maps to that char)."""
    out = []
    for ci, ch in enumerate(text):
        out.extend([ci] * len(ch.encode("utf-8")))
    out.append(len(text))
    return out


def _spans(ids: list[int], re_ids: list[int], table, text: str,
           logprobs: Sequence[float | None] | None) -> list[ChangedSpan]:
    """Group mismatches by aligning both tokenisations on byte boundaries.

    Bytes shared as a common prefix / suffix are addressed from the start / end, so a
    lossy decode (invalid UTF-8 → U+FFFD, NFC) only affects the middle region. A token
    boundary present on both sides at the same address is a sync point; tokens between
    consecutive sync points form a group; each differing group is one span.
    """
    sp, rp = table.bytes_list(ids), table.bytes_list(re_ids)
    so, ro = _offsets(sp), _offsets(rp)
    sbytes, rbytes = b"".join(sp), b"".join(rp)
    ls, lr = len(sbytes), len(rbytes)
    pre = 0
    n = min(ls, lr)
    while pre < n and sbytes[pre] == rbytes[pre]:
        pre += 1
    suf = 0
    while suf < n - pre and sbytes[ls - 1 - suf] == rbytes[lr - 1 - suf]:
        suf += 1

    def keys(x: int, total: int) -> list[tuple[str, int]]:
        k = []
        if x <= pre:
            k.append(("p", x))
        if x >= total - suf:
            k.append(("s", total - x))
        return k

    re_index: dict[tuple[str, int], int] = {}
    for j, x in enumerate(ro):
        for key in keys(x, lr):
            re_index[key] = j
    syncs: list[tuple[int, int]] = []
    for i, x in enumerate(so):
        for key in keys(x, ls):
            j = re_index.get(key)
            if j is not None and (not syncs or (i > syncs[-1][0] and j > syncs[-1][1])
                                  or (i, j) == (0, 0)):
                syncs.append((i, j))
                break
    if not syncs or syncs[-1] != (len(ids), len(re_ids)):
        syncs.append((len(ids), len(re_ids)))
    # char mapping: through whichever side's bytes equal the decoded text's UTF-8
    tb = text.encode("utf-8")
    b2c = _byte_to_char(text)
    shift_s = 0 if sbytes == tb else None
    groups: list[tuple[int, int, int, int]] = []
    prev = (0, 0)
    for cur in syncs:
        if cur == prev:
            continue
        i0, j0 = prev
        i1, j1 = cur
        # each sync-delimited group is its own span (adjacent spans stay apart so each
        # keeps its own cause: " func"+"tion" next to "<"+"tool"+... are two stories)
        if not (i1 - i0 == 1 and j1 - j0 == 1 and ids[i0] == re_ids[j0]):
            groups.append((i0, i1, j0, j1))
        prev = cur
    spans = []
    for i0, i1, j0, j1 in groups:
        s_ids, r_ids = ids[i0:i1], re_ids[j0:j1]
        if shift_s is not None:
            c0, c1 = b2c[min(so[i0], len(tb))], b2c[min(so[i1], len(tb))]
        else:  # sampled bytes are not the decoded text (lossy decode): map via re-encoded side
            c0 = b2c[min(ro[j0], len(b2c) - 1)] if rbytes == tb else b2c[min(so[i0], len(b2c) - 1)]
            c1 = b2c[min(ro[j1], len(b2c) - 1)] if rbytes == tb else b2c[min(so[i1], len(b2c) - 1)]
        if b"".join(sp[i0:i1]) != b"".join(rp[j0:j1]):
            cause = "content_changed"  # decode was lossy here (invalid UTF-8 or normalisation)
        elif [x for x in s_ids if table.is_special(x)] != [x for x in r_ids if table.is_special(x)]:
            cause = "special_token"
        else:
            cause = "retokenized"
        lps = [logprobs[i] if logprobs is not None and i < len(logprobs) else None for i in range(i0, i1)]
        spans.append(ChangedSpan(i0, i1, j0, j1, s_ids, table.texts(s_ids), r_ids, table.texts(r_ids),
                                 lps, c0, c1, cause, AL_CLASS[cause]))
    return spans


def _roundtrip_result(ids: list[int], text: str, re_ids: list[int], table,
                      logprobs: Sequence[float | None] | None) -> RoundTrip:
    rt = RoundTrip(equal=re_ids == ids, n_sampled=len(ids), n_reencoded=len(re_ids), text=text,
                   reencoded_ids=re_ids)
    if rt.equal:
        return rt
    rt.changed_spans = _spans(ids, re_ids, table, text, logprobs)
    if rt.changed_spans:
        rt.first_mismatch = rt.changed_spans[0].start
        rt.cause = rt.changed_spans[0].cause
        rt.al_class = AL_CLASS[rt.cause]
        for s in rt.changed_spans:
            rt.causes[s.cause] = rt.causes.get(s.cause, 0) + 1
    return rt


def roundtrip(turn: Turn, tok) -> RoundTrip:
    """``decode(output_ids, skip_special_tokens=False)`` → ``encode(text, add_special_tokens=False)``
    compared with the sampled ids, mismatches grouped into :class:`ChangedSpan` values."""
    reason = _need_tokenizer(tok)
    if reason:
        return RoundTrip(equal=None, unchecked=reason)
    ids = list(turn.output_ids)
    if not ids:
        return RoundTrip(equal=None, unchecked="empty output (no sampled ids)")
    table = token_table(tok)
    reason = _oov_reason(ids, len(table))
    if reason:
        return RoundTrip(equal=None, n_sampled=len(ids), unchecked=reason)
    text = tok.decode(ids, skip_special_tokens=False)
    re_ids = list(tok(text, add_special_tokens=False)["input_ids"])
    return _roundtrip_result(ids, text, re_ids, table, turn.logprobs)


# --------------------------------------------------------------------------------------
# B. Prompt re-render
# --------------------------------------------------------------------------------------

def _render_text(turn: Turn, tok, variant: str) -> str:
    if variant == "vllm":
        return render_prompt_text(tok, turn.messages, tools=turn.tools or None,
                                  chat_template_kwargs=_chat_kwargs(turn), normalize_tool_arguments=True,
                                  add_generation_prompt=_add_generation_prompt(turn))
    # TRL's harness: messages + tools only, arguments verbatim, no kwargs
    return render_prompt_text(tok, turn.messages, tools=turn.tools or None, chat_template_kwargs=None,
                              normalize_tool_arguments=False, add_generation_prompt=True)


def _compare_render(stored: list[int], rendered: list[int], variant: str, tok) -> RenderComparison:
    table = token_table(tok)
    rc = RenderComparison(variant=variant, equal=stored == rendered, rendered_len=len(rendered),
                          rendered_ids=rendered)
    if not rc.equal:
        k = common_prefix(stored, rendered)
        rc.first_mismatch = k
        rc.stored_window = _window(stored, k, table)
        rc.rendered_window = _window(rendered, k, table)
        rc.classification = classify_divergence(stored, rendered, k, tok, labels=("stored", "rendered"))
    return rc


def _template_unchecked(turn: Turn, tok) -> str | None:
    if tok is None:
        return "no tokenizer for this rollout"
    if turn.prompt_source not in ("engine", "stored"):
        return f"prompt ids are {turn.prompt_source!r}, not recorded: nothing to compare a re-render with"
    if not turn.prompt_ids:
        return "no prompt ids recorded"
    if not turn.messages:
        return "no request messages to re-render"
    if not getattr(tok, "chat_template", None):
        return "tokenizer has no chat template"
    return _oov_reason(turn.prompt_ids, len(token_table(tok)))


def template_check(turn: Turn, tok, *, plain: bool = True) -> TemplateCheck:
    """Re-render ``turn.messages`` + ``turn.tools`` like vLLM and compare with ``turn.prompt_ids``.

    ``vllm`` = arguments normalised + the request's ``chat_template_kwargs``; ``plain`` =
    what TRL's harness renders (no normalisation, no kwargs). A template that fails to
    render is reported in that variant's ``error`` (and ``unchecked`` for the vLLM one).
    """
    tc = TemplateCheck(prompt_source=turn.prompt_source, equal=None, stored_len=len(turn.prompt_ids),
                       chat_template_kwargs=_chat_kwargs(turn))
    tc.unchecked = _template_unchecked(turn, tok)
    if tc.unchecked:
        return tc
    stored = list(turn.prompt_ids)
    texts: dict[str, str] = {}
    for variant in (("vllm", "plain") if plain else ("vllm",)):
        try:
            texts[variant] = _render_text(turn, tok, variant)
        except Exception as e:  # a template error is data, not a crash
            rc = RenderComparison(variant=variant, equal=None, error=f"template failed to render: {e}")
            setattr(tc, variant, rc)
            continue
        if variant == "plain" and texts[variant] == texts.get("vllm") and tc.vllm is not None:
            tc.plain = RenderComparison(**{**tc.vllm.__dict__, "variant": "plain"})
            continue
        ids = list(tok(texts[variant], add_special_tokens=False)["input_ids"])
        setattr(tc, variant, _compare_render(stored, ids, variant, tok))
    if tc.vllm is not None and tc.vllm.error is None:
        tc.equal, tc.first_mismatch, tc.cause = tc.vllm.equal, tc.vllm.first_mismatch, tc.vllm.cause
    elif tc.vllm is not None:
        tc.unchecked = tc.vllm.error
    return tc


# --------------------------------------------------------------------------------------
# C. Turn-to-turn prefix audit
# --------------------------------------------------------------------------------------

def prefix_audit(prev: Turn | None, nxt: Turn, tok) -> PrefixCheck:
    """Does ``nxt.prompt_ids`` extend ``prev.prompt_ids + prev.output_ids``?

    ``prev=None`` → status ``"first"``. Works without a tokenizer (no cause then).
    """
    if prev is None:
        return PrefixCheck(status="first", next_len=len(nxt.prompt_ids))
    held = list(prev.prompt_ids) + list(prev.output_ids)
    pc = PrefixCheck(status="clean", held_len=len(held), next_len=len(nxt.prompt_ids))
    if not prev.prompt_ids or not nxt.prompt_ids:
        pc.status = "first"
        pc.unchecked = "prompt ids missing on one side"
        return pc
    k = common_prefix(held, nxt.prompt_ids)
    pc.matched = k
    if k == len(held):
        return pc
    pc.status = "broken"
    pc.divergence = k
    pc.tokens_rerendered = len(held) - k
    pc.in_output = k >= len(prev.prompt_ids)
    if tok is None:
        pc.unchecked = "no tokenizer: cause not classified"
        return pc
    table = token_table(tok)
    bad = _oov_reason(held, len(table)) or _oov_reason(nxt.prompt_ids, len(table))
    if bad:
        pc.unchecked = bad
        return pc
    pc.held_window = _window(held, k, table)
    pc.next_window = _window(nxt.prompt_ids, k, table)
    pc.classification = classify_divergence(held, nxt.prompt_ids, k, tok, a_is_prefix=True,
                                            labels=("held", "next prompt"))
    pc.cause, pc.al_class = pc.classification.cause, pc.classification.al_class
    return pc


# --------------------------------------------------------------------------------------
# Repro export
# --------------------------------------------------------------------------------------

def chat_template_sha256(tok) -> str | None:
    """Full sha256 of the chat template text (None without one)."""
    t = getattr(tok, "chat_template", None)
    if not t:
        return None
    if not isinstance(t, str):
        t = json.dumps(t, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(t.encode("utf-8")).hexdigest()


def repro(case: RoundTrip | TemplateCheck | PrefixCheck, tok, *, turn: Turn | None = None,
          prev: Turn | None = None, rollout: str | None = None, radius: int = 64) -> dict[str, Any]:
    """A small self-contained JSON for one drift case (ids ±``radius`` around the break).

    ``turn`` is the checked turn (for :class:`PrefixCheck`, the next one; pass ``prev`` to
    include the held ids). ``expected`` is the reference side (sampled ids, stored prompt,
    held prompt+output), ``observed`` what the other path produced.
    """
    table = token_table(tok)
    out: dict[str, Any] = {
        "rollout": rollout, "turn": turn.index if turn is not None else None,
        "tokenizer": getattr(tok, "name_or_path", None) or type(tok).__name__,
        "vocab_size": len(table), "chat_template_sha256": chat_template_sha256(tok),
    }
    if isinstance(case, RoundTrip):
        exp, obs, k = (list(turn.output_ids) if turn is not None else []), case.reencoded_ids, case.first_mismatch
        out.update(kind="roundtrip", cause=case.cause, al_class=case.al_class,
                   evidence=f"{len(case.changed_spans)} changed span(s)", text=case.text)
    elif isinstance(case, TemplateCheck):
        rc = case.vllm
        exp = list(turn.prompt_ids) if turn is not None else []
        obs = rc.rendered_ids if rc is not None else []
        k = case.first_mismatch
        cl = rc.classification if rc is not None else None
        out.update(kind="template", cause=case.cause, al_class=cl.al_class if cl else None,
                   evidence=cl.evidence if cl else None, chat_template_kwargs=case.chat_template_kwargs,
                   plain_cause=case.plain.cause if case.plain else None)
    elif isinstance(case, PrefixCheck):
        exp = (list(prev.prompt_ids) + list(prev.output_ids)) if prev is not None else []
        obs = list(turn.prompt_ids) if turn is not None else []
        k = case.divergence
        out.update(kind="prefix", cause=case.cause, al_class=case.al_class,
                   evidence=case.classification.evidence if case.classification else None,
                   tokens_rerendered=case.tokens_rerendered, in_output=case.in_output)
    else:
        raise TypeError(f"not a drift case: {type(case).__name__}")
    out["break_offset"] = k
    lo = max(0, (k or 0) - radius)
    for name, ids in (("expected", exp), ("observed", obs)):
        sl = ids[lo:(k or 0) + radius]
        out[name] = {"offset": lo, "len": len(ids), "ids": sl,
                     "text": table.decode_bytes(sl).decode("utf-8", errors="replace")}
    return out


# --------------------------------------------------------------------------------------
# Dataset scan
# --------------------------------------------------------------------------------------

def _batch_encode(tok, texts: list[str]) -> list[list[int]]:
    if not texts:
        return []
    return [list(x) for x in tok(texts, add_special_tokens=False)["input_ids"]]


def _scan_chunk(chunk: list[tuple[str, Rollout]], tok, table, plain: bool, fork_threshold_tokens: int,
                totals: dict[str, Any]) -> list[dict[str, Any]]:
    from viewer.rows import build_rows  # local import: rows imports nothing from here, keep it lazy

    items: list[tuple[str, Turn, Turn | None]] = []
    for name, r in chunk:
        prev = None
        for t in r.agent_turns:
            items.append((name, t, prev))
            prev = t
    recs: list[dict[str, Any]] = []
    # --- A: batch decode + batch encode of every checkable output
    rt_todo: list[int] = []
    rt_res: dict[int, dict[str, Any]] = {}
    for n, (_, t, _) in enumerate(items):
        reason = (_need_tokenizer(tok) or ("empty output (no sampled ids)" if not t.output_ids else None)
                  or (_oov_reason(t.output_ids, len(table)) if table is not None else None))
        if reason:
            rt_res[n] = {"equal": None, "first_mismatch": None, "changed_spans": 0, "cause": None,
                         "unchecked": reason}
        else:
            rt_todo.append(n)
    if rt_todo:
        out_ids = [list(items[n][1].output_ids) for n in rt_todo]
        texts = tok.batch_decode(out_ids, skip_special_tokens=False)
    else:
        out_ids, texts = [], []
    # --- B: render every checkable prompt, then one batch encode for all texts
    tp_todo: list[tuple[int, str]] = []
    tp_res: dict[int, dict[str, Any]] = {}
    render_texts: list[str] = []
    for n, (_, t, _) in enumerate(items):
        reason = _template_unchecked(t, tok)
        if reason:
            tp_res[n] = {"equal": None, "first_mismatch": None, "cause": None, "unchecked": reason}
            continue
        try:
            tv = _render_text(t, tok, "vllm")
        except Exception as e:
            tp_res[n] = {"equal": None, "first_mismatch": None, "cause": None,
                         "unchecked": f"template failed to render: {e}"}
            continue
        tp_todo.append((n, "vllm"))
        render_texts.append(tv)
        if plain:
            try:
                tpl = _render_text(t, tok, "plain")
            except Exception as e:
                tp_res[n] = {"plain_error": f"template failed to render: {e}"}
                continue
            if tpl != tv:  # only encode the plain render when it differs as text
                tp_todo.append((n, "plain"))
                render_texts.append(tpl)
    encoded = _batch_encode(tok, texts + render_texts) if tok is not None else []
    re_ids, rendered = encoded[:len(texts)], encoded[len(texts):]
    for n, ids, text, rid in zip(rt_todo, out_ids, texts, re_ids):
        if rid == ids:
            rt_res[n] = {"equal": True, "first_mismatch": None, "changed_spans": 0, "cause": None}
        else:  # the expensive aligned diff only where the ids differ
            rt = _roundtrip_result(ids, text, rid, table, items[n][1].logprobs)
            rt_res[n] = {"equal": False, "first_mismatch": rt.first_mismatch,
                         "changed_spans": len(rt.changed_spans), "cause": rt.cause}
    for (n, variant), rid in zip(tp_todo, rendered):
        stored = list(items[n][1].prompt_ids)
        if rid == stored:
            d = {"equal": True, "first_mismatch": None, "cause": None}
        else:
            k = common_prefix(stored, rid)
            cl = classify_divergence(stored, rid, k, tok, labels=("stored", "rendered"))
            d = {"equal": False, "first_mismatch": k, "cause": cl.cause}
        if variant == "vllm":
            tp_res[n] = {**d, **tp_res.get(n, {})}
            if plain:
                tp_res[n].update({"plain_equal": d["equal"], "plain_cause": d["cause"]})
        else:
            tp_res[n].update({"plain_equal": d["equal"], "plain_cause": d["cause"]})
    # --- C + rows
    for n, (name, t, prev) in enumerate(items):
        pc = prefix_audit(prev, t, tok)
        p = {"status": pc.status, "cause": pc.cause, "tokens_rerendered": pc.tokens_rerendered,
             "divergence": pc.divergence, "in_output": pc.in_output}
        if pc.unchecked:
            p["unchecked"] = pc.unchecked
        rec = {"rollout": name, "turn": t.index, "call": t.call,
               "retokenize": rt_res[n], "template": tp_res.get(n, {}), "prefix": p}
        recs.append(rec)
    for name, r in chunk:
        rows = build_rows(r.agent_turns, fork_threshold_tokens=fork_threshold_tokens)
        totals["forked_rows"] += sum(1 for v in rows.verdicts if v.verdict == "FORK")
        totals["tokens_losing_gradient"] += rows.tokens_losing_gradient
        totals["rows"] += len(rows.rows)
        by_turn = {v.turn: v for v in rows.verdicts}
        for rec in recs:
            if rec["rollout"] == name and rec["turn"] in by_turn:
                v = by_turn[rec["turn"]]
                rec["row"] = {"verdict": v.verdict, "matched": v.matched, "drift": v.drift,
                              "tokens_losing_gradient": v.tokens_losing_gradient}
    return recs


def _tally(rec: dict[str, Any], totals: dict[str, Any]) -> None:
    totals["turns"] += 1
    checks = (rec["retokenize"], rec["template"], rec["prefix"])
    drifted = (rec["retokenize"].get("equal") is False or rec["template"].get("equal") is False
               or rec["prefix"]["status"] == "broken")
    totals["drifted_turns"] += int(drifted)
    causes = {c.get("cause") for c in checks if c.get("cause")}
    for c in causes:
        totals["by_cause"][c] = totals["by_cause"].get(c, 0) + 1
    reasons = [c["unchecked"] for c in checks if c.get("unchecked")]
    if rec["retokenize"].get("unchecked"):
        totals["unchecked"] += 1
    for key, c in zip(("retokenize", "template", "prefix"), checks):
        if c.get("unchecked"):
            totals["unchecked_by_check"][key] += 1
    if reasons:
        rec["unchecked"] = "; ".join(dict.fromkeys(reasons))
    totals["retokenize_drifted"] += int(rec["retokenize"].get("equal") is False)
    totals["template_drifted"] += int(rec["template"].get("equal") is False)
    totals["prefix_broken"] += int(rec["prefix"]["status"] == "broken")


def scan(rollouts: Iterable[Rollout], tok, progress: Callable[[int, int | None], None] | None = None,
         cancel: threading.Event | None = None, *, plain: bool = True, chunk_rollouts: int = 32,
         fork_threshold_tokens: int = 1024) -> dict[str, Any]:
    """Drift over a dataset (agent turns), JSON-able. See the module doc for the checks.

    Per turn: ``retokenize`` {equal, first_mismatch, changed_spans, cause}, ``template``
    {equal, first_mismatch, cause, plain_equal, plain_cause}, ``prefix`` {status, cause,
    tokens_rerendered, divergence, in_output}, ``row`` {verdict, matched, drift,
    tokens_losing_gradient}; a check that could not run carries ``unchecked: reason`` and
    the turn a joined ``unchecked``. Totals: ``unchecked`` counts turns whose output round
    trip could not run (``unchecked_by_check`` splits all three); ``by_cause`` counts
    turns per cause (a turn counts once per distinct cause); rows use the recorded prompt
    ids. ``progress(done_rollouts, total_or_None)`` is called per chunk; when ``cancel``
    is set the scan stops between chunks and returns what it has (``cancelled: true``).
    """
    total = len(rollouts) if isinstance(rollouts, Sized) else None
    table = token_table(tok) if tok is not None else None
    totals: dict[str, Any] = {"turns": 0, "drifted_turns": 0, "by_cause": {}, "forked_rows": 0, "unchecked": 0,
                              "tokens_losing_gradient": 0, "rows": 0, "rollouts": 0,
                              "retokenize_drifted": 0, "template_drifted": 0, "prefix_broken": 0,
                              "unchecked_by_check": {"retokenize": 0, "template": 0, "prefix": 0},
                              "cancelled": False}
    turns: list[dict[str, Any]] = []
    chunk: list[tuple[str, Rollout]] = []

    def flush() -> None:
        for rec in _scan_chunk(chunk, tok, table, plain, fork_threshold_tokens, totals):
            _tally(rec, totals)
            turns.append(rec)
        totals["rollouts"] += len(chunk)
        chunk.clear()
        if progress is not None:
            progress(totals["rollouts"], total)

    for r in rollouts:
        if cancel is not None and cancel.is_set():
            totals["cancelled"] = True
            break
        name = r.source if r.source else f"rollout-{totals['rollouts'] + len(chunk)}"
        if any(name == c[0] for c in chunk):
            name = f"{name}#{totals['rollouts'] + len(chunk)}"
        chunk.append((name, r))
        if len(chunk) >= chunk_rollouts:
            flush()
    if chunk and not totals["cancelled"]:
        flush()
    elif chunk:
        chunk.clear()
    if cancel is not None and cancel.is_set():
        totals["cancelled"] = True
    return {"turns": turns, "totals": totals}


# --------------------------------------------------------------------------------------
# Per-turn report (what the Drift screen shows for one selected turn)
# --------------------------------------------------------------------------------------

@dataclass
class TurnReport:
    """All drift checks for one turn of a rollout, plus the rollout's trainer rows.

    ``prev`` is the agent turn before it (None for the first, or a bookkeeping turn,
    which the prefix audit does not chain). ``rows`` is :func:`viewer.rows.build_rows`
    over the rollout's agent turns (recorded prompt ids); ``verdict`` this turn's entry.
    ``repros`` holds one :func:`repro` document per drifted check (needs a tokenizer).
    """

    rollout: str
    turn: Turn
    prev: Turn | None
    tokenizer: str | None
    roundtrip: RoundTrip
    template: TemplateCheck
    prefix: PrefixCheck
    rows: Any                          # viewer.rows.Rows
    verdict: Any | None                # viewer.rows.TurnVerdict
    is_agent: bool = True

    @property
    def drifted(self) -> bool:
        return (self.roundtrip.equal is False or self.template.equal is False
                or self.prefix.status == "broken")

    def repros(self, tok) -> dict[str, dict[str, Any]]:
        """``{"roundtrip"|"template"|"prefix": repro document}`` for each check that drifted."""
        if tok is None:
            return {}
        out: dict[str, dict[str, Any]] = {}
        if self.roundtrip.equal is False:
            out["roundtrip"] = repro(self.roundtrip, tok, turn=self.turn, rollout=self.rollout)
        if self.template.equal is False:
            out["template"] = repro(self.template, tok, turn=self.turn, rollout=self.rollout)
        if self.prefix.status == "broken":
            out["prefix"] = repro(self.prefix, tok, turn=self.turn, prev=self.prev, rollout=self.rollout)
        return out


def turn_report(rollout: Rollout, index: int, tok, *, plain: bool = True, tokenizer_name: str | None = None,
                fork_threshold_tokens: int = 1024) -> TurnReport:
    """Run the three checks on turn ``index`` (KeyError if absent) and stitch the rows.

    ``tokenizer_name`` labels the tokenizer (default: its ``name_or_path``)."""
    from viewer.rows import build_rows

    turn = rollout.turn(index)
    agent = rollout.agent_turns
    prev = None
    if turn.kind == "agent":
        pos = next(i for i, t in enumerate(agent) if t.index == turn.index)
        prev = agent[pos - 1] if pos > 0 else None
    rows = build_rows(agent, fork_threshold_tokens=fork_threshold_tokens)
    verdict = next((v for v in rows.verdicts if v.turn == turn.index), None)
    name = None if tok is None else (tokenizer_name or getattr(tok, "name_or_path", None) or type(tok).__name__)
    return TurnReport(rollout=rollout.source, turn=turn, prev=prev, tokenizer=name,
                      roundtrip=roundtrip(turn, tok), template=template_check(turn, tok, plain=plain),
                      prefix=prefix_audit(prev, turn, tok) if turn.kind == "agent" else
                      PrefixCheck(status="first", next_len=len(turn.prompt_ids),
                                  unchecked="bookkeeping call: not part of the agent's conversation"),
                      rows=rows, verdict=verdict, is_agent=turn.kind == "agent")
