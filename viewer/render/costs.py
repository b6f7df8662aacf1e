"""The Drift tab's gradient-cost panel: tokens losing gradient per cause and per turn, and the
measured what-ifs (a ``gradient`` block of viewer.drift.costs, for one rollout or a scan)."""
from __future__ import annotations

from typing import Any

from .escape import esc, notice_html

__all__ = ["gradient_cost_html"]


def _table(head: list[str], rows: list[list[Any]], attr: str) -> str:
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="ri-d-table" {attr}><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def _tail(name: str, width: int = 40) -> str:
    return name if len(name) <= width else "…" + name[-(width - 1):]


def gradient_cost_html(gradient: dict[str, Any] | None, what: str = "") -> str:
    """Per-cause and per-turn tables of trained tokens losing their gradient, then the what-ifs:
    each a re-run of the trainer on a modified copy of the same rollout(s), or why it was not measured."""
    if not gradient:
        return notice_html("Open a rollout (or run a scan): what each drift cause costs in gradient shows here.")
    total = gradient["tokens_losing_gradient"]
    head = (f'<h4 data-gradient-lost="{int(total)}">Gradient lost by cause'
            f'{" — " + esc(what) if what else ""}: {total:,} trained token(s)</h4>')
    causes = sorted(gradient["by_cause"].items(), key=lambda kv: -kv[1])
    by_cause = _table(["cause", "tokens losing gradient", "share"],
                      [[c, f"{n:,}", f"{100 * n / total:.0f}%" if total else "—"] for c, n in causes],
                      'data-table="by-cause"') if causes else notice_html("No trained token loses its gradient.")
    turns = [[_tail(x.get("rollout") or ""), x["turn"], x["at_turn"], f"{x['tokens']:,}", x["cause"], x["evidence"][:120]]
             for x in gradient["by_turn"]]
    by_turn = _table(["rollout", "turn (its output)", "realigned at turn", "tokens", "cause", "evidence"], turns,
                     'data-table="by-turn"') if turns else ""
    wis = []
    for w in gradient["what_if"]:
        if w["measured_rollouts"]:
            got = (f"{w['tokens_losing_gradient']:,} (was {w['baseline_tokens_losing_gradient']:,})",
                   f"{w['recovered']:,}", f"{w['rows']:,} (was {w['baseline_rows']:,})")
        else:
            got = ("not measured", "—", "—")
        why = "; ".join(f"{r} ({n})" for r, n in w["not_measured"].items())
        wis.append([w["name"], w["what"], *got, why])
    whatif = (_table(["what-if", "changes", "tokens losing gradient", "recovered", "rows", "not measured because"],
                     wis, 'data-table="what-if"') if wis else "")
    note = ('<div class="ri-note">Each what-if re-runs the trainer’s own stitching on a modified copy of the same '
            "input (docs/DRIFT-DOCTOR.md); recovered = baseline − what-if, in each side’s own tokens.</div>")
    return f'<section class="ri-d-sec" data-check="gradient">{head}{by_cause}{by_turn}{whatif}{note}</section>'
