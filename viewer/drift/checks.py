"""The three per-turn drift checks (docs/DRIFT.md), pure functions over turns + a tokenizer.

* :func:`roundtrip` — type A: ``encode(decode(output_ids))`` against the sampled ids,
  aligned in token space by byte offsets, mismatches grouped into changed spans;
* :func:`template_check` — type B: the turn's messages re-rendered through the chat
  template the way vLLM does (tool-call ``arguments`` parsed, ``chat_template_kwargs``
  replayed) against the recorded prompt ids, plus the plain re-render TRL's harness does;
* :func:`prefix_audit` — type C: does the next prompt extend prompt + output?
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from viewer.drift.causes import AL_CLASS, classify_divergence, common_prefix
from viewer.drift.values import ChangedSpan, PrefixCheck, RenderComparison, RoundTrip, TemplateCheck, Window
from viewer.rollout import Turn
from viewer.tokenizer import render_prompt_text, token_table

__all__ = ["roundtrip", "template_check", "prefix_audit", "oov_reason", "chat_kwargs", "need_tokenizer",
           "roundtrip_result", "render_text", "template_unchecked"]

_WINDOW = 12  # tokens either side in context windows


def oov_reason(ids: Sequence[int], n_vocab: int) -> str | None:
    """Why ``ids`` cannot be checked with a vocabulary of ``n_vocab`` (ids outside it), or None."""
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


def chat_kwargs(turn: Turn) -> dict[str, Any]:
    """The request's ``chat_template_kwargs`` (a copy; {} when it sent none)."""
    kw = turn.request.get("chat_template_kwargs") if isinstance(turn.request, dict) else None
    return dict(kw) if isinstance(kw, dict) else {}


def _add_generation_prompt(turn: Turn) -> bool:
    v = turn.request.get("add_generation_prompt") if isinstance(turn.request, dict) else None
    return True if v is None else bool(v)


def need_tokenizer(tok) -> str | None:
    """Why a check that needs a tokenizer cannot run (none loaded), or None."""
    return None if tok is not None else "no tokenizer for this rollout"


# --------------------------------------------------------------------------------------
# A. Output round trip
# --------------------------------------------------------------------------------------

def _offsets(pieces: list[bytes]) -> list[int]:
    out = [0]
    for pb in pieces:
        out.append(out[-1] + len(pb))
    return out


class _ByteToChar:
    """byte offset → char index for ``text.encode()`` (a byte inside a char maps to that char),
    looked up only at span edges: ASCII text maps to itself, other text decodes the prefix (the
    partial character at the end is dropped, so it counts as the char it belongs to)."""

    def __init__(self, text: str, tb: bytes):
        self.tb, self.ascii = tb, text.isascii()

    def __len__(self) -> int:
        return len(self.tb) + 1

    def __getitem__(self, b: int) -> int:
        return b if self.ascii else len(self.tb[:b].decode("utf-8", "ignore"))


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

    # a token boundary on the re-encoded side, addressed from the start (within the common
    # prefix) or from the end (within the common suffix); built with comprehensions, not a
    # Python call per token: this runs over every token of every drifted turn
    re_p = {x: j for j, x in enumerate(ro) if x <= pre}
    re_s = {lr - x: j for j, x in enumerate(ro) if x >= lr - suf}
    syncs: list[tuple[int, int]] = []
    for i, x in enumerate(so):
        for j in ((re_p.get(x) if x <= pre else None), (re_s.get(ls - x) if x >= ls - suf else None)):
            if j is not None and (not syncs or (i > syncs[-1][0] and j > syncs[-1][1]) or (i, j) == (0, 0)):
                syncs.append((i, j))
                break
    if not syncs or syncs[-1] != (len(ids), len(re_ids)):
        syncs.append((len(ids), len(re_ids)))
    # char mapping: through whichever side's bytes equal the decoded text's UTF-8
    tb = text.encode("utf-8")
    b2c = _ByteToChar(text, tb)
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


def roundtrip_result(ids: list[int], text: str, re_ids: list[int], table,
                      logprobs: Sequence[float | None] | None) -> RoundTrip:
    """The round trip's value from the sampled ``ids``, their decoded ``text`` and its re-encoding ``re_ids``
    (the drift scan decodes and encodes a whole batch at once, then builds each turn's value here)."""
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
    reason = need_tokenizer(tok)
    if reason:
        return RoundTrip(equal=None, unchecked=reason)
    ids = list(turn.output_ids)
    if not ids:
        return RoundTrip(equal=None, unchecked="empty output (no sampled ids)")
    table = token_table(tok)
    reason = oov_reason(ids, len(table))
    if reason:
        return RoundTrip(equal=None, n_sampled=len(ids), unchecked=reason)
    text = tok.decode(ids, skip_special_tokens=False)
    re_ids = list(tok(text, add_special_tokens=False)["input_ids"])
    return roundtrip_result(ids, text, re_ids, table, turn.logprobs)


# --------------------------------------------------------------------------------------
# B. Prompt re-render
# --------------------------------------------------------------------------------------

def render_text(turn: Turn, tok, variant: str, limits=None) -> str:
    """The turn's prompt re-rendered as ``variant`` renders it (``vllm`` or ``plain``: TRL's harness, see
    :func:`template_check`). ``limits``: the budgets in force (None: read from the settings, per call; a scan
    reads them once)."""
    if variant == "vllm":
        return render_prompt_text(tok, turn.messages, tools=turn.tools or None,
                                  chat_template_kwargs=chat_kwargs(turn), normalize_tool_arguments=True,
                                  add_generation_prompt=_add_generation_prompt(turn), limits=limits)
    # TRL's harness: messages + tools only, arguments verbatim, no kwargs
    return render_prompt_text(tok, turn.messages, tools=turn.tools or None, chat_template_kwargs=None,
                              normalize_tool_arguments=False, add_generation_prompt=True, limits=limits)


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


def template_unchecked(turn: Turn, tok) -> str | None:
    """Why the prompt re-render cannot be checked on ``turn`` (no tokenizer, template, ids, messages), or None."""
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
    return oov_reason(turn.prompt_ids, len(token_table(tok)))


def template_check(turn: Turn, tok, *, plain: bool = True) -> TemplateCheck:
    """Re-render ``turn.messages`` + ``turn.tools`` like vLLM and compare with ``turn.prompt_ids``.

    ``vllm`` = arguments normalised + the request's ``chat_template_kwargs``; ``plain`` =
    what TRL's harness renders (no normalisation, no kwargs). A template that fails to
    render is reported in that variant's ``error`` (and ``unchecked`` for the vLLM one).
    """
    tc = TemplateCheck(prompt_source=turn.prompt_source, equal=None, stored_len=len(turn.prompt_ids),
                       chat_template_kwargs=chat_kwargs(turn))
    tc.unchecked = template_unchecked(turn, tok)
    if tc.unchecked:
        return tc
    stored = list(turn.prompt_ids)
    texts: dict[str, str] = {}
    for variant in (("vllm", "plain") if plain else ("vllm",)):
        try:
            texts[variant] = render_text(turn, tok, variant)
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
    bad = oov_reason(held, len(table)) or oov_reason(nxt.prompt_ids, len(table))
    if bad:
        pc.unchecked = bad
        return pc
    pc.held_window = _window(held, k, table)
    pc.next_window = _window(nxt.prompt_ids, k, table)
    pc.classification = classify_divergence(held, nxt.prompt_ids, k, tok, a_is_prefix=True,
                                            labels=("held", "next prompt"))
    pc.cause, pc.al_class = pc.classification.cause, pc.classification.al_class
    return pc


