"""One rollout (or a whole deck) as one self-contained HTML file that opens from ``file://`` with no
network at all (docs/TALK.md, "Export").

The page reuses the app's own pieces, inlined: ``token_view.js`` and ``presenter.js`` (run by a
small Gradio-like host in ``export.js``: ``element``, ``props``, ``watch``), ``app.css``, the
token-view payloads (:func:`viewer.render.token_view_payload`), the presenter's marks
(:func:`viewer.render.presenter_payload`), the conversation, drift and compare renderers. Data
travels only as :func:`safe_json` in ``<script type="application/json">`` tags (read with
``textContent``) and as text through :func:`esc`; the page's Content-Security-Policy allows no
fetch at all and runs only the scripts whose hashes it names, so an injected script could not run
even if one got through. The logprob plot is a small inline SVG drawn by ``export.js``
(plotly.min.js alone is 4.8 MB: the file would not be attachable).
"""
from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

from ..views import TURN_COLUMNS
from .compare import compare_html
from .conversation import conversation_html, rollout_header
from .drift import drift_turn_html
from .escape import esc, notice_html, safe_json
from .present import presenter_payload, presenter_template
from .shell import token_view_template

__all__ = ["export_html", "ASSETS"]

ASSETS = Path(__file__).resolve().parent.parent / "ui" / "assets"


def _asset(name: str) -> str:
    text = (ASSETS / name).read_text(encoding="utf-8")
    if "</script" in text.lower() or "<!--" in text:  # would end (or confuse) the inline script tag
        raise ValueError(f"{name} cannot be inlined: it holds '</script' or '<!--'")
    return text


def _host(name: str, js: str) -> str:
    """An app script (a Gradio ``js_on_load`` body) as a function of the names Gradio gives it."""
    return f"function {name}(element, trigger, props, server, upload, watch) {{\n{js}\n}}\n"


def _data(elem_id: str, payload: str) -> str:
    """A JSON value the page reads with textContent (``payload`` is already :func:`safe_json`)."""
    return f'<script type="application/json" id="{esc(elem_id)}">{payload}</script>'


def _turn_list(part: Any, steps: dict[tuple[str, int], int]) -> str:
    head = "".join(f"<th>{esc(c)}</th>" for c in TURN_COLUMNS)
    rows = []
    for r in part.table:
        step = steps.get((part.key, r["turn"]))
        attrs = f' data-step="{step}" class="ri-x-go"' if step is not None else ' class="ri-x-out"'
        cells = "".join(f"<td>{esc('' if r.get(c) is None else r.get(c))}</td>" for c in TURN_COLUMNS)
        rows.append(f'<tr data-turn="{esc(r["turn"])}"{attrs}>{cells}</tr>')
    return (f'<div class="ri-x-turns" data-rollout="{esc(part.key)}" hidden><table><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table><div class="ri-note">Rows in bold are in this file: click one '
            "to show it.</div></div>")


def _notes_list(part: Any) -> str:
    if not part.notes:
        return ""
    items = []
    for c in part.notes:
        n = c.note
        flag = f' <span class="ri-warn">flagged: {esc(c.problem)}</span>' if c.problem else ""
        items.append(f'<li data-note="{esc(n.id)}"{" class=ri-x-flag" if c.problem else ""}><b>{esc(n.id)}</b> · turn '
                     f"{esc(n.turn)} · tokens {esc(n.tok[0])}–{esc(n.tok[1])}: {esc(n.text)}{flag}</li>")
    return (f'<div class="ri-x-notes" data-rollout="{esc(part.key)}" hidden><b>Notes</b> '
            f'<span class="ri-note">(n / N step through them)</span><ul>{"".join(items)}</ul></div>')


def _meta(doc: Any) -> dict[str, Any]:
    rollouts: dict[str, Any] = {}
    for part in doc.rollouts:
        order = sorted(part.turns)
        turns = {str(t): {"p": f"p-{part.key}-{t}", "m": f"m-{part.key}-{t}", "c": f"c-{part.key}-{t}"}
                 for t in order}
        notes = [{"id": c.note.id, "turn": c.note.turn, "tok": list(c.note.tok), "text": c.note.text,
                  "problem": c.problem} for c in part.notes]
        rollouts[part.key] = {"name": part.loaded.name, "turns": turns, "notes": notes}
    steps = [{"kind": s.kind, "r": s.rollout, "turn": s.turn, "focus": list(s.focus) if s.focus else None,
              "mode": s.mode, "title": s.title, "note": s.note, "sec": f"s-{k}"} for k, s in enumerate(doc.steps)]
    return {"title": doc.title, "start": doc.start, "present": doc.present, "deck": doc.deck, "steps": steps, "rollouts": rollouts}


def _static(k: int, step: Any, parts: dict[str, Any]) -> str:
    part = parts[step.rollout]
    if step.kind == "drift":
        body = drift_turn_html(step.report, part.loaded.table)
    elif step.kind == "compare":
        body = (f'<div class="ri-note">Compare: {esc(part.loaded.name)} with {esc(step.compare_name)}</div>'
                + compare_html(step.comparison))
    else:
        return ""
    return f'<section class="ri-x-static" id="s-{k}" hidden>{body}</section>'


def _csp(scripts: list[str]) -> str:
    hashes = " ".join("'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'"
                      for s in scripts)
    # No fetch of any kind (default-src 'none'); only our own inline scripts run (by hash); styles inline.
    return (f"default-src 'none'; script-src {hashes}; style-src 'unsafe-inline'; img-src data:; "
            "base-uri 'none'; form-action 'none'")


def export_html(doc: Any) -> str:
    """The whole file for an :class:`viewer.talk.export.ExportDoc`."""
    parts = {p.key: p for p in doc.rollouts}
    steps_of = {}
    for k, s in enumerate(doc.steps):
        if s.kind == "tokens":
            steps_of.setdefault((s.rollout, s.turn), k)
    heads, data, convs = [], [], []
    for part in doc.rollouts:
        ld = part.loaded
        heads.append(f'<div class="ri-x-head" data-rollout="{esc(part.key)}" hidden>'
                     f"{rollout_header(ld.rollout, ld.choice.message)}</div>{_turn_list(part, steps_of)}"
                     f"{_notes_list(part)}")
        order = sorted(part.turns)
        for t in order:
            tp = part.turns[t]
            data.append(_data(f"p-{part.key}-{t}", tp.payload))
            data.append(_data(f"m-{part.key}-{t}", presenter_payload(t, tp.marks, tp.marks_note,
                                                                       first=t == order[0], last=t == order[-1])))
            convs.append(f'<section class="ri-x-conv" id="c-{part.key}-{t}" hidden>{conversation_html(tp.turn)}'
                         "</section>")
    statics = [_static(k, s, parts) for k, s in enumerate(doc.steps)]
    # token_payload.js: riExpandTokens (a function declaration, so defined before any of it runs), which
    # the view and export.js's plot both call
    scripts = [_host("riTokenView", _asset("token_view.js")) + _asset("token_payload.js")
               + _host("riPresenter", _asset("presenter.js")) + _asset("export.js")]
    css = _asset("app.css") + "\n" + _asset("export.css")
    nav = ("<div class='ri-x-nav' id='ri-x-nav'><button class='ri-btn' id='prev-turn'>◀ prev</button>"
           "<span id='ri-x-where'></span><button class='ri-btn' id='next-turn'>next ▶</button>"
           "<button class='ri-btn' id='ri-x-drift' title='drift marks (d in presenter mode)'>drift marks</button>"
           "<button class='ri-btn' id='ri-x-theme'>dark / light</button>"
           "<span class='ri-note'>offline export · n / N notes · Present ▸ for the room</span></div>")
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{esc(_csp(scripts))}\">"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{esc(doc.title)}</title><style>{css}</style></head><body>"
            f"<div class='gradio-container ri-x'><div id='presenter'>{presenter_template()}</div>"
            f"<h1 class='ri-x-title'>{esc(doc.title)}</h1>{''.join(heads)}{nav}"
            "<div id='ri-x-callout' class='ri-x-callout' hidden></div>"
            f"<div id='token-view' class='ri-x-tv'>{token_view_template()}</div>"
            "<div id='ri-x-plot' class='ri-x-plot'></div>"
            f"{''.join(statics)}<h3 class='ri-x-h'>Conversation</h3>{''.join(convs)}"
            f"<noscript>{notice_html('This file needs JavaScript to draw its token view.')}</noscript></div>"
            f"{''.join(data)}{_data('ri-x-doc', safe_json(_meta(doc)))}"
            f"{''.join(f'<script>{s}</script>' for s in scripts)}</body></html>")
