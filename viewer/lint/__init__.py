"""Lint: health checks on how a capture or dataset was recorded (docs/LINT.md).

Rules with stable ids (``RI001`` ...), a level, a one-line why and a fix each (:mod:`.rules`),
run over a :class:`~viewer.rollout.Rollout` (:mod:`.checks`; :mod:`.integrity`, the rules on per-token
values that name every offending token) and, where it was read from a capture folder, over that
folder's raw records and tokenizer files (:mod:`.records`). :mod:`.run` lints one rollout or a whole
source. No gradio here; the Health tab and ``lint`` CLI are front ends.
"""
from __future__ import annotations

from .rules import LEVELS, RULE_IDS, RULES, Hit, Rule, select_rules
from .run import MAX_LISTED_HITS, VocabCache, has_errors, lint_rollout, lint_source

__all__ = ["LEVELS", "RULE_IDS", "RULES", "Hit", "Rule", "select_rules", "MAX_LISTED_HITS", "VocabCache",
           "has_errors", "lint_rollout", "lint_source"]
