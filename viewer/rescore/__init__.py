"""Trainer-side logprobs: run the model's forward pass over the exact trainer rows and compare.

For every token the trainer trains on (the rows :func:`viewer.drift.trainer_rows` builds,
as the Drift tab shows them), Δ = trainer logprob − sampler logprob and ratio = exp(Δ):
the training/inference mismatch TRL's importance ratios see. :mod:`.values` holds the
pure values, :mod:`.model` the torch part (imported lazily), :mod:`.cli` the
``python -m viewer rescore`` subcommand.
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from viewer.config import Settings
from viewer.rescore.model import TORCH_HINT, RescoreCancelled, TorchMissing, torch_available
from viewer.rescore.values import RescoreResult, TurnDelta, assemble, context_of, targets
from viewer.rollout import Rollout
from viewer.layout import SUMMARY

__all__ = ["rescore", "sampler_temperature", "RescoreResult", "TurnDelta", "TorchMissing", "TORCH_HINT",
           "torch_available", "targets", "context_of"]

RAW_MODES = ("raw_logprobs", "raw_logits")


def _summary(rollout: Rollout) -> dict[str, Any]:
    src = Path(str(rollout.source)) if rollout.source and not str(rollout.source).startswith("hf://") else None
    if src is None or not src.exists():
        return {}
    f = (src if src.is_dir() else src.parent) / SUMMARY
    try:
        doc = json.loads(f.read_text()) if f.is_file() else {}
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def sampler_temperature(rollout: Rollout) -> tuple[float, str]:
    """The temperature to divide the trainer's logits by so both sides compare the same distribution.

    vLLM's ``raw_logprobs`` (its default) are the model's own distribution, i.e. temperature 1;
    ``processed_logprobs`` are after temperature scaling, so the request's temperature applies."""
    server = _summary(rollout).get("server")
    mode = server.get("logprobs_mode") if isinstance(server, dict) else None
    temps = {t.request.get("temperature") for t in rollout.agent_turns if isinstance(t.request, dict)}
    temps.discard(None)
    if mode in RAW_MODES or mode is None:
        why = f"logprobs mode {mode}" if mode else "no logprobs mode recorded (vLLM's default is raw_logprobs)"
        return 1.0, f"temperature 1.0: {why}, the model's own distribution"
    t = float(next(iter(temps))) if len(temps) == 1 else 1.0
    note = f"temperature {t}: logprobs mode {mode} (after the request's temperature)"
    if len(temps) > 1:
        note += f"; requests used several temperatures {sorted(temps)}, 1.0 used"
    return t, note


def rescore(rollout: Rollout, model: str, settings: Settings | None = None, *, spec: Any = None, tok: Any = None,
            device: str | None = None, dtype: str | None = None, temperature: float | None = None,
            progress: Callable[[int, int], None] | None = None,
            cancel: threading.Event | None = None) -> RescoreResult:
    """Rescore ``rollout``'s trainer rows (``spec``: a :class:`viewer.drift.TrainerSpec`, default what the
    rollout supports; ``tok`` only matters for trl-message, which re-renders prompts) with ``model``.

    Raises :class:`TorchMissing` without torch, ValueError for a model that cannot be loaded or a
    rollout the trainer cannot train on. A cancelled run returns what was scored, ``cancelled`` set."""
    from viewer.drift import choose_spec, trainer_rows
    from viewer.rescore import model as m

    if not torch_available():
        raise TorchMissing()
    settings = settings or Settings.from_env()
    spec = spec or choose_spec(rollout)
    tr = trainer_rows(rollout, spec, tok)
    if tr.error:
        raise ValueError(f"the trainer cannot train on this rollout: {tr.error}")
    tgts = targets(tr.rows)
    notes = list(tr.notes)
    if temperature is None:
        temperature, why = sampler_temperature(rollout)
        notes.append(why)
    sampling, expected, desc = _sampling_per_position(rollout, tgts, notes)
    ref = m.resolve_model(model, settings)
    lm, dev, dt = m.load_model(ref, device or settings.rescore_device, dtype or settings.rescore_dtype)
    t0 = time.perf_counter()
    cancelled = False
    try:
        scores = m.score_rows(lm, tgts, temperature=temperature, batch_tokens=settings.rescore_batch_tokens,
                              progress=progress, cancel=cancel, sampling=sampling, expected=expected)
    except RescoreCancelled as e:
        scores, cancelled = e.partial, True
    if not tgts:
        notes.append("no trained token in the trainer rows: nothing to rescore")
    return assemble(rollout, tr, tgts, scores, model=model, device=dev, dtype=dt, temperature=temperature,
                    threshold=settings.rescore_flag_delta, seconds=time.perf_counter() - t0, cancelled=cancelled,
                    notes=notes, expected=expected, sampling=desc)


def _sampling_per_position(rollout: Rollout, tgts: list, notes: list[str]) -> tuple[dict, dict, dict]:
    """row → the sampler's effective (T, top_p, top_k) per target position (viewer.rescore.expected),
    the dict score_rows fills with expected Δ, and the settings' description (notes appended)."""
    from viewer.rescore.expected import NEUTRAL, settings_of

    per_turn, desc, more = settings_of(rollout, _summary(rollout))
    notes.extend(more)
    sampling = {tg.row: [per_turn[u].effective() if u in per_turn else NEUTRAL for u in tg.turns] for tg in tgts}
    return sampling, {}, desc
