"""The Template tab: a chat template's certify report card, and a case's divergence as token views
(inputs: the ``certify`` report dict and :func:`viewer.drift.certify.divergence_sequences`)."""
from __future__ import annotations

from typing import Any

from .escape import esc, kv
from .payload import Kind, Logprobs, TokenView, Tokens, TurnInfo, ViewOptions, token_payload

__all__ = ["certify_card_html", "certify_case_label", "certify_views"]

_MODES = ("trl-message", "trl-contract")


def certify_case_label(case: dict[str, Any]) -> str:
    """Plain text naming one case for the case selector."""
    return f"{case['name']} · {case['status']}" + (f" · {case['cause']}" if case["cause"] else "")


def _div(fd: dict[str, Any] | None) -> str:
    if not fd:
        return "<td colspan=2></td>"
    sides = [v for k, v in fd.items() if isinstance(v, dict)]
    cells = " vs ".join(("(end)" if s["id"] is None else f"{s['id']} {s['text']!r}") for s in sides)
    pos = format(fd["position"], ",")
    return f"<td>{esc(fd['check'])} @ {esc(pos)}</td><td><code>{esc(cells)}</code></td>"


def certify_card_html(doc: dict[str, Any], *, current: str | None = None) -> str:
    """The report card: one row per case (status, cause, first divergence, tokens lost / forked rows per
    trainer mode), the totals, and each case's notes or template error."""
    t = doc["totals"]
    head = (f'<div class="ri-kvs">{kv("tokenizer", doc["tokenizer"])}'
            f'{kv("chat template sha256", doc["chat_template_sha256"])}'
            f'{kv("cases", t["cases"])}{kv("pass", t["passed"])}{kv("fail", t["failed"])}{kv("error", t["errors"])}'
            + "".join(kv(f"tokens losing gradient ({m})", t["tokens_lost"].get(m, 0)) for m in _MODES) + "</div>")
    rows, notes = [], []
    for c in doc["cases"]:
        cls = {"pass": "ri-d-ok", "fail": "ri-d-bad"}.get(c["status"], "ri-d-na")
        cur = " class='ri-d-cur'" if current == c["name"] else ""
        lost = "".join(f"<td>{esc(c['tokens_lost'].get(m, 0))} / {esc((c['trainer'].get(m) or {}).get('forked_rows', 0))}"
                       "</td>" for m in _MODES)
        rows.append(f"<tr{cur}><td title='{esc(c['what'])}'>{esc(c['name'])}</td>"
                    f"<td><span class='ri-d-badge {cls}'>{esc(c['status'])}</span></td>"
                    f"<td class='ri-d-cause'>{esc(c['cause'] or '')}</td>{_div(c['first_divergence'])}{lost}</tr>")
        notes += [f"{c['name']}: {n}" for n in c["notes"]] + ([f"{c['name']}: {c['error']}"] if c["error"] else [])
    table = ("<table class='ri-d-table ri-cert-table'><thead><tr><th>case</th><th>status</th><th>cause</th>"
             "<th>first divergence</th><th>ids and texts</th><th>lost / forks trl-message</th>"
             f"<th>lost / forks trl-contract</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")
    note_html = "".join(f'<div class="ri-note">{esc(n)}</div>' for n in notes)
    return f'<div class="ri-drift ri-cert">{head}{table}{note_html}</div>'


def _view(ids: list[int], table: Any, prompt_len: int, focus: int, note: str, label: str, settings: Any,
          turn: int) -> str:
    n = len(ids)
    kinds = [Kind.CONTEXT.value] * prompt_len + [Kind.TRAINED.value] * (n - prompt_len)
    at = min(focus, n - 1) if n else None
    view = ViewOptions.from_settings(settings, focus=(at, at) if at is not None else None, mode="mask", note=note)
    return token_payload(TokenView(
        Tokens(ids, table.texts(ids), kinds, special=table.special(ids), oov=table.out_of_vocab(ids), exact=True),
        TurnInfo(turn, prompt_len, trained=n > prompt_len, prompt_source=label, output_source=label),
        Logprobs([None] * n), view))


def certify_views(seq: dict[str, Any] | None, table: Any, settings: Any) -> tuple[str, str]:
    """Two token views (side a, side b) opened on the divergence, or empty ones for a passing case."""
    if not seq:
        return "", ""
    k = seq["position"]
    a, b = seq["a"], seq["b"]
    end = " (this side ends here)"
    na = f"{seq['a_label']} · turn {seq['turn']} · diverges at {k:,}" + (end if k >= len(a) else "")
    nb = f"{seq['b_label']} · diverges at {k:,}" + (end if k >= len(b) else "")
    return (_view(a, table, seq["prompt_len"], k, na, seq["a_label"], settings, seq["turn"]),
            _view(b, table, len(b) if seq["check"] != "roundtrip" else 0, k, nb, seq["b_label"], settings,
                  seq["turn"]))
