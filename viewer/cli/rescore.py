"""``python -m viewer rescore SOURCE --model M [--json]``: trainer vs sampler logprobs per turn.

Exit codes as every command (docs/CLI.md): torch not installed is 4, a model that cannot be
loaded is bad input (2), ``--fail-on-findings`` exits 1 when a token is flagged.
"""
from __future__ import annotations

import argparse

from viewer.capture.models import MODELS
from viewer.config import Settings

from .common import BAD_INPUT, FINDINGS, OK, CliError, add_common, add_setting_option, print_json

__all__ = ["add_parser"]

COLUMNS = ("turn", "row", "verdict", "context", "tokens", "mean_abs_delta", "max_abs_delta", "ratio_min", "ratio_max",
           "flagged")


def add_parser(sub) -> None:
    p = sub.add_parser("rescore", help="run the model's forward pass over the trainer rows and compare each trained "
                                       "token's logprob with the sampler's (Δ = trainer − sampler, ratio = exp Δ)")
    p.add_argument("source", metavar="SOURCE", help="capture folder or trace file")
    p.add_argument("--model", required=True, help=f"{' / '.join(MODELS)} (the capture models, built offline), a "
                                                  "local model folder or a Hub name")
    add_common(p, findings="a token is flagged (|Δ| over the threshold)")
    p.add_argument("--trainer", choices=("trl-message", "trl-contract"), default=None,
                   help="whose rows (default: what the source supports, as the drift command picks)")
    p.add_argument("--train-turns", choices=("all", "tool-calls"), default=None, help="trl-message's train-turn rule")
    p.add_argument("--fork-threshold", type=int, default=None, help="TRL's fork_threshold_tokens")
    add_setting_option(p, "--tokenizer", "tokenizer", "For trl-message's re-render: ", metavar="T", default=None)
    add_setting_option(p, "--device", "rescore_device", default=None)
    add_setting_option(p, "--dtype", "rescore_dtype", default=None)
    p.add_argument("--temperature", type=float, default=None,
                   help="divide the trainer's logits by this (default: 1.0 for raw sampler logprobs, the request's "
                        "temperature for processed ones)")
    add_setting_option(p, "--threshold", "rescore_flag_delta", type=float, default=None)
    p.set_defaults(func=_cmd_rescore)


def _fmt(v) -> str:
    return "-" if v is None else (f"{v:.4f}" if isinstance(v, float) else str(v))


def _cmd_rescore(args: argparse.Namespace, settings: Settings) -> int:
    from dataclasses import replace

    from viewer.budgets import BudgetExceeded
    from viewer.drift import choose_spec
    from viewer.rescore import TorchMissing, rescore, torch_available
    from viewer.sources import load_source
    from viewer.tokenizer import tokenizer_for

    if not torch_available():  # before reading anything: the one thing the user must fix
        raise TorchMissing()
    if args.threshold is not None:
        settings = replace(settings, rescore_flag_delta=float(args.threshold))
    if args.temperature is not None and args.temperature <= 0:
        raise CliError("--temperature must be > 0", BAD_INPUT)
    ro = load_source(args.source, settings)
    spec = choose_spec(ro, args.trainer, args.train_turns, args.fork_threshold)
    # the tokenizer the app reads this rollout with; only trl-message re-renders prompts through it
    choice = tokenizer_for(ro, settings, args.tokenizer, load=spec.mode == "trl-message")
    try:
        res = rescore(ro, args.model, settings, spec=spec, tok=choice.tokenizer if spec.mode == "trl-message" else None,
                      device=args.device, dtype=args.dtype, temperature=args.temperature)
    except (TorchMissing, BudgetExceeded):
        raise  # their own exit codes (common.exit_code)
    except (ValueError, RuntimeError, OSError) as e:  # a model that cannot be loaded, a rollout it cannot train on
        raise CliError(str(e), BAD_INPUT) from None
    doc = {**res.to_json(), "tokenizer": choice.name}
    code = FINDINGS if args.fail_on_findings and doc["totals"]["flagged"] else OK
    if args.json:
        print_json(doc, indent=2)
        return code
    t = doc["totals"]
    print(f"model:    {res.model} ({res.device}, {res.dtype}, temperature {res.temperature})")
    print(f"trainer:  {spec.label}")
    print("  ".join(f"{c:>14}" if i > 3 else f"{c:>8}" for i, c in enumerate(COLUMNS)))
    for row in doc["turns"]:
        print("  ".join(f"{_fmt(row[c]):>14}" if i > 3 else f"{_fmt(row[c]):>8}" for i, c in enumerate(COLUMNS)))
    print(f"totals:   {t['tokens']} tokens · mean |Δ| {_fmt(t['mean_abs_delta'])} · max |Δ| {_fmt(t['max_abs_delta'])}"
          f" · ratio {_fmt(t['ratio_min'])}–{_fmt(t['ratio_max'])} · flagged {t['flagged']} (|Δ| > {res.threshold})"
          f" · {res.seconds:.1f} s")
    for n in res.notes:
        print(f"note:     {n}")
    return code
