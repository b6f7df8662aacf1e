"""Retokenisation drift: find where ids change, say why, and what the trainer makes of it.

Modules, one job each (data flows one way, no import cycles):

* :mod:`.values`  — typed results (``to_dict()`` is the JSON the CLI and UI print);
* :mod:`.causes`  — stable cause names and the divergence classifier;
* :mod:`.checks`  — the per-turn checks: output round trip, prompt re-render, prefix audit;
* :mod:`.rows`    — TRL's stitching (CLEAN / REALIGN / FORK), exactly;
* :mod:`.trainer` — the two named trainer semantics (``trl-message``, ``trl-contract``);
* :mod:`.scan`    — all of it over a dataset, batched, with progress and cancel;
* :mod:`.report`  — one selected turn for the Drift screen; :mod:`.repro` — a bug-report JSON.
"""
from viewer.drift.causes import AL_CLASS, CAUSES, classify_divergence, common_prefix
from viewer.drift.checks import prefix_audit, roundtrip, template_check
from viewer.drift.report import TurnReport, turn_report
from viewer.drift.repro import chat_template_sha256, repro
from viewer.drift.rows import FORK_THRESHOLD_TOKENS, Rows, Tally, TrainerTurn, TrainingRow, TurnVerdict, stitch
from viewer.drift.scan import scan
from viewer.drift.trainer import (CONTRACT, MESSAGE, MODES, TRAIN_TURNS, TrainerRows, TrainerSpec,
                                  TrainerSpecError, choose_spec, trainer_rows)
from viewer.drift.values import (ChangedSpan, Classification, PrefixCheck, RenderComparison, RoundTrip,
                                 TemplateCheck, Window)

__all__ = [
    "AL_CLASS", "CAUSES", "ChangedSpan", "Classification", "PrefixCheck", "RenderComparison", "RoundTrip",
    "TemplateCheck", "Window", "classify_divergence", "common_prefix", "prefix_audit", "repro", "roundtrip",
    "scan", "template_check", "TurnReport", "turn_report", "chat_template_sha256",
    "FORK_THRESHOLD_TOKENS", "Rows", "Tally", "TrainerTurn", "TrainingRow", "TurnVerdict", "stitch",
    "CONTRACT", "MESSAGE", "MODES", "TRAIN_TURNS", "TrainerRows", "TrainerSpec", "TrainerSpecError",
    "choose_spec", "trainer_rows",
]
