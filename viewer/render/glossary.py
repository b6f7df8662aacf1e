"""The words of the trade, each explained in one line where the app shows it (issue 41, point 9).

One source: a label the app renders through :func:`viewer.render.escape.kv` or a drift badge gets its
line as a tooltip (``title``), the token view's bar reads its lines from its template
(:func:`viewer.render.shell.token_view_template`), and docs/USING.md's Glossary lists the same lines
(tests/test_glossary.py keeps the two equal). Plain text only: callers escape it.
"""
from __future__ import annotations

__all__ = ["GLOSSARY", "explain", "SEE", "TRAINERS_LINE"]

SEE = "Glossary: docs/USING.md"

# term -> its one line. Keys are the labels exactly as the app shows them (a kv label, a badge's text).
GLOSSARY: dict[str, str] = {
    "loss mask": "Which tokens get a gradient: 1 = trained (the model's own output), 0 = context or output "
                 "the trainer leaves out (prompt, tool results, bookkeeping calls).",
    "trained": "An output token under loss mask 1: the trainer computes its loss and gradient.",
    "context": "A prompt token (loss mask 0): the model read it, the trainer gives it no gradient.",
    "filtered calls": "Model calls that are not the agent's turns (a title generator, a summary, compaction): "
                      "listed under Tokens as bookkeeping, never trained.",
    "ids": "Where a turn's token ids come from. engine: the inference server's own ids (exact); stored: ids a "
           "file saved (its producer may have re-tokenised); token_id_strings: parsed from 'token_id:N' "
           "logprob entries; rerender / derived: rebuilt here through the chat template (a reconstruction, "
           "never exact); none: text only.",
    "drift": "The ids the trainer is fed differ from the ids the model sampled (a re-tokenised output, a "
             "re-rendered prompt): the trainer then scores tokens the model never produced.",
    "drifted turns": "Turns where at least one check found drift: the round trip, the re-render or the "
                     "turn-to-turn prefix.",
    "round trip drifted": "Turns whose sampled output, decoded and encoded again, gives other ids.",
    "re-render drifted": "Turns whose prompt, rendered again through the chat template, gives other ids than "
                         "the engine's.",
    "broken prefixes": "Turns whose prompt does not extend the previous turn's prompt + output token for token.",
    "unchecked": "Checks that could not run (no tokenizer, no engine ids, an empty output): no verdict, "
                 "neither clean nor drifted.",
    "FIRST": "The first turn of a training row.",
    "CLEAN": "The turn's prompt extends the row held so far exactly: its new tokens are appended as context.",
    "REALIGN": "The prompt left the held row after the last output began, by less than the fork threshold: "
               "the trainer overwrites the held tokens with the prompt's, and the overwritten output tokens "
               "lose their gradient.",
    "FORK": "The prompt left the held row too early, or by the fork threshold or more: the trainer starts a "
            "new row (the row before keeps its gradient).",
    "forked rows": "Training rows started by a FORK (a turn whose prompt did not extend the row held so far).",
    "tokens losing gradient": "Trained tokens a REALIGN overwrote: in the rows the trainer builds they are "
                              "context (mask 0), so the model learns nothing from them.",
    "trl-contract": "TRL >= 1.15 fed by OpenEnv's capture contract: every agent turn, the engine's prompt ids, "
                    "the per-token loss mask; fork threshold 0.",
    "trl-message": "TRL 1.14: prompts re-rendered from the request's messages through the chat template; "
                   "every output token trained; tool-call turns only by default.",
    "Δ": "Δ = trainer − sampler logprob of the same token: the trainer's forward pass (a rescore) against "
         "the logprob the inference engine recorded.",
    "mean |Δ|": "The mean of |trainer − sampler logprob| over the turn's rescored tokens (0 = the two agree).",
    "max |Δ|": "The largest |trainer − sampler logprob| among the turn's rescored tokens.",
    "IS ratio": "Importance-sampling ratio exp(Δ) = p_trainer / p_sampler of a token: 1 when the two agree; "
                "trainers clip or zero tokens whose ratio leaves their bounds.",
}

# the Drift tab's trainer picker, under its label: the two names it offers, short
TRAINERS_LINE = ("trl-contract: TRL >= 1.15 on the engine's ids and per-token loss mask · trl-message: TRL 1.14, "
                 f"prompts re-rendered from the messages ({SEE})")


def explain(term: str) -> str | None:
    """The one line for ``term`` (a label as the app shows it), or None when it is not a term of the trade."""
    return GLOSSARY.get(term)
