"""Real conversations for ``certify --conversations FILE``, read by the existing readers.

Any source the readers know (a messages or Harbor dataset file, a capture folder, a trace file)
becomes cases: a row's conversation as its reader extracts it; a capture's last agent turn's
request messages plus its response message. Each is then certified like a built-in case.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from viewer.drift.certify_cases import Case

__all__ = ["cases_from_source"]


def _case(label: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Case | None:
    msgs = [m for m in messages if isinstance(m, dict)]
    if not any(m.get("role") == "assistant" for m in msgs[1:]):
        return None  # nothing sampled: nothing to certify
    return Case(label, "a conversation read from the file", msgs, list(tools or []), source="conversations")


def cases_from_source(path: str | Path, settings, limit: int = 20) -> list[Case]:
    """Up to ``limit`` conversations of ``path`` as cases; SourceError when it cannot be read."""
    from viewer.sources import SourceError, open_dataset
    from viewer.sources.formats import RowRef

    src = open_dataset(path, settings)
    name = Path(str(path)).name or str(path)
    out: list[Case] = []
    if src.is_capture:
        ro = src.rollout()
        agent = ro.agent_turns
        if agent:
            last = agent[-1]
            req = last.request if isinstance(last.request, dict) else {}
            msgs = list(req.get("messages") or last.messages or [])
            resp = dict(last.response or {})
            if resp:
                resp.setdefault("role", "assistant")
                msgs.append(resp)
            c = _case(name, msgs, req.get("tools") or last.tools)
            out += [c] if c else []
        return out
    n = src.dataset.known_rows()
    rows = src.visible_rows() or range(n if n is not None else limit)
    for r in list(rows)[:limit]:
        try:
            conv = src.format.read(src.dataset.read_row(r), RowRef(src.label, r))
        except IndexError:
            break
        except Exception as e:  # a bad row names itself; the others are still certified
            raise SourceError(f"{src.label}: row {r}: {type(e).__name__}: {e}") from None
        c = _case(f"{name} row {r}", conv.messages, conv.tools)
        out += [c] if c else []
    if not out:
        raise SourceError(f"{src.label}: no conversation with an assistant reply to certify")
    return out
