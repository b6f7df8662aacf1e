"""The sampling settings of a capture: what the proxy asks the engine for, and what the summary records.

A capture may pin ``temperature`` / ``top_p`` / ``top_k`` (:class:`~viewer.capture.spec.CaptureSpec`):
the recording proxy then sets them on every chat call it forwards, so each trace record's
``request`` holds the values the engine sampled with. ``summary.json``'s ``sampling`` says the
logprobs mode (vLLM's ``--logprobs-mode``: ``raw_logprobs`` are the model's own distribution,
``processed_logprobs`` are after temperature, logits processors and top-k/top-p, see
docs/MISMATCH.md) and the engine's defaults for a request that sets none (the model's
``generation_config.json``, which vLLM applies by default), so a later rescore can say which part
of Δ = trainer − sampler is expected by construction (:mod:`viewer.rescore.expected`).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["overrides", "summary_record", "generation_defaults", "SAMPLING_KEYS"]

SAMPLING_KEYS = ("temperature", "top_p", "top_k")


def overrides(spec: Any) -> dict[str, Any]:
    """The sampling fields the proxy sets on every forwarded chat call (only the ones the spec pins)."""
    return {k: getattr(spec, k) for k in SAMPLING_KEYS if getattr(spec, k, None) is not None}


def generation_defaults(model_dir: str | None) -> dict[str, Any] | None:
    """The sampling defaults in a model folder's generation_config.json (vLLM's ``--generation-config
    auto`` applies them to a request that sets none); {} when the file sets none, None when unknown."""
    if not model_dir:
        return None
    f = Path(model_dir) / "generation_config.json"
    try:
        doc = json.loads(f.read_text()) if f.is_file() else {}
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    return {k: doc[k] for k in SAMPLING_KEYS if isinstance(doc.get(k), (int, float)) and not isinstance(doc[k], bool)}


def summary_record(spec: Any, backend: Any) -> dict[str, Any]:
    """``summary.json``'s ``sampling``: the logprobs mode (and who says so), the pinned values, the
    engine's defaults (docs/FORMATS.md)."""
    info = backend.info() if backend is not None else {}
    mode, source = info.get("logprobs_mode"), "server started by the capture"
    if not mode:  # an endpoint: the mode is the server's, we can only record what the capture was told
        mode, source = (spec.logprobs_mode or None), ("declared in the capture spec" if spec.logprobs_mode
                                                      else "unknown (an endpoint's own setting)")
    model_dir, problem = None, None
    if backend is not None and hasattr(backend, "model_dir"):
        try:
            model_dir = backend.model_dir()
        except Exception as e:  # a model that could not be built: the capture failed anyway, defaults unknown
            problem = f"model folder unknown: {type(e).__name__}: {e}"
    rec = {"logprobs_mode": mode, "logprobs_mode_source": source, **overrides(spec),
           "pinned": sorted(overrides(spec)), "defaults": generation_defaults(model_dir)}
    if problem:
        rec["defaults_problem"] = problem
    return rec
