"""The only place HTML (and the token view's JSON payload) is built. Everything is escaped.

Agent traces are untrusted: model text, tool output and file contents may hold
``<img onerror>``, ``</script>``, ``${...}`` or ``{{x}}``. Every string that reaches the
browser goes through :func:`esc` (``escape.py``), or travels as JSON that the browser only
ever assigns with ``textContent``. Never put data into a Gradio ``html_template``.
CSS lives in ``viewer/ui/assets/app.css``, sent once with the page, never per render.

One module per screen: ``tokens`` (token-view payloads, from the values in ``payload``, which also
holds the payload's codec: ``decode_payload`` reads what a token view's API output carries), ``delta``
(rescore: Δ arrays, summary; ``importance`` and ``explain`` its IS and "why they disagree" views), ``conversation`` (header, conversation, task, problems), ``drift`` (Drift tab), ``costs``
(its gradient-cost panel), ``status`` (Datasets/Capture lines), ``compare`` (Compare tab), ``certify`` (Template tab),
``health`` (Health tab: lint hits), ``present`` (presenter mode), ``page`` (the title).
"""
from .certify import certify_card_html, certify_case_label, certify_views
from .compare import compare_html, pair_label
from .costs import gradient_cost_html
from .conversation import conversation_html, problems_html, rollout_header, task_html
from .drift import (drift_empty_html, drift_note_html, drift_prefix_html, drift_rows_html, drift_roundtrip_html,
                    drift_scan_html, drift_template_html, drift_turn_html)
from .delta import RESCORE_COLUMNS, rescore_note_html, rescore_summary_html, rescore_turn_rows, turn_delta
from .escape import esc, notice_html, safe_json
from .explain import explain_html
from .health import health_empty_html, health_html
from .importance import importance_html
from .page import title_html
from .payload import Kind, Logprobs, TokenView, Tokens, TurnInfo, ViewOptions, decode_payload, token_payload
from .present import presenter_payload, presenter_template
from .status import capture_progress_html, dataset_status_html
from .tokens import row_view_payload, token_view_payload, trainer_rows

__all__ = ["esc", "safe_json", "notice_html", "token_view_payload", "token_payload", "decode_payload",
           "row_view_payload", "trainer_rows", "Kind", "Tokens", "Logprobs", "TurnInfo", "ViewOptions", "TokenView",
           "rollout_header", "conversation_html", "task_html", "problems_html", "drift_turn_html",
           "drift_roundtrip_html", "drift_template_html", "drift_prefix_html", "drift_rows_html", "drift_empty_html",
           "drift_scan_html", "drift_note_html", "dataset_status_html", "capture_progress_html", "compare_html",
           "pair_label", "presenter_payload", "presenter_template", "title_html", "turn_delta", "rescore_summary_html",
           "rescore_turn_rows", "rescore_note_html", "RESCORE_COLUMNS", "certify_card_html", "certify_case_label",
           "certify_views", "health_html", "health_empty_html", "gradient_cost_html", "importance_html",
           "explain_html"]
