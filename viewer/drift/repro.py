"""A small self-contained JSON for one drift case, to attach to a bug report."""
from __future__ import annotations

import hashlib
import json
from typing import Any

from viewer.drift.values import PrefixCheck, RoundTrip, TemplateCheck
from viewer.rollout import Turn
from viewer.tokenizer import token_table

__all__ = ["chat_template_sha256", "repro"]


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


