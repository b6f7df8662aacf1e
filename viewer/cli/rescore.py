"""``python -m viewer rescore SOURCE --model M [--json]``: trainer vs sampler logprobs per turn.

Exit codes as every command (docs/CLI.md): torch not installed is 4, a model that cannot be
loaded is bad input (2), ``--fail-on-findings`` exits 1 when a token is flagged.
"""
from __future__ import annotations

import argparse
import math

from viewer.capture.models import MODELS
from viewer.config import Settings
from viewer.rescore import importance as IS
from viewer.rescore.dataset import RECORDED, recorded_rescore

from .common import BAD_INPUT, FINDINGS, OK, CliError, add_common, add_setting_option, print_json
from .rescore_dataset import add_dataset_options, run_dataset, wants_dataset

__all__ = ["add_parser"]

COLUMNS = ("turn", "row", "verdict", "context", "tokens", "mean_abs_delta", "max_abs_delta", "ratio_min", "ratio_max",
           "flagged")


def add_parser(sub) -> None:
    p = sub.add_parser("rescore", help="run the model's forward pass over the trainer rows and compare each trained "
                                       "token's logprob with the sampler's (Δ = trainer − sampler, ratio = exp Δ)")
    p.add_argument("source", metavar="SOURCE", help="capture folder or trace file; a folder of captures, a data file "
                                                    "or hf://...: every rollout (a dataset rescore, see --out)")
    p.add_argument("--model", required=True, help=f"{' / '.join(MODELS)} (the capture models, built offline), a "
                                                  "local model folder or a Hub name; recorded: the trainer "
                                                  "logprobs the file holds (a prime-rl token export), no model run")
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
    p.add_argument("--is-mode", choices=IS.MODES, default=IS.DEFAULT_MODE,
                   help="TRL GRPO's vllm_importance_sampling_mode for the ratios in --json (default %(default)s, "
                        "TRL 1.16's)")
    p.add_argument("--is-max", type=_bound, default=IS.DEFAULT_CLIP_MAX, metavar="C",
                   help="vllm_importance_sampling_clip_max, a number or none (default %(default)s, TRL 1.16's)")
    p.add_argument("--is-min", type=_bound, default=IS.DEFAULT_CLIP_MIN, metavar="C",
                   help="vllm_importance_sampling_clip_min, a number or none (default %(default)s, TRL 1.16's)")
    add_dataset_options(p)
    p.set_defaults(func=_cmd_rescore)


def _bound(text: str) -> float | None:
    if text.strip().lower() in ("none", ""):
        return None
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number or none: {text!r}") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return v


def importance_doc(res, mode: str, clip_min: float | None, clip_max: float | None) -> dict:
    """``--json``'s ``importance``: TRL's ratios for every trained token and its five metrics (docs/MISMATCH.md)."""
    batch = IS.batch_from_rescore(res)
    r = IS.importance(batch, mode, clip_min, clip_max)
    return {"mode": mode, "clip_min": clip_min, "clip_max": clip_max, "sequences": len(batch),
            "metrics": {k: (v if math.isfinite(v) else None) for k, v in r.metrics.items()},
            "effect": IS.effect(batch, clip_min, clip_max), "kl": IS.kl(batch),
            "tokens": IS.tokens_from_rescore(res, r)}


def _fmt(v) -> str:
    return "-" if v is None else (f"{v:.4f}" if isinstance(v, float) else str(v))


def _cmd_rescore(args: argparse.Namespace, settings: Settings) -> int:
    from dataclasses import replace

    from viewer.budgets import BudgetExceeded
    from viewer.drift import choose_spec
    from viewer.rescore import TorchMissing, rescore, torch_available
    from viewer.sources import load_source
    from viewer.tokenizer import tokenizer_for

    recorded = args.model == RECORDED  # the file's own trainer logprobs: no model, no torch
    if not recorded and not torch_available():  # before reading anything: the one thing the user must fix
        raise TorchMissing()
    if args.threshold is not None:
        settings = replace(settings, rescore_flag_delta=float(args.threshold))
    if args.temperature is not None and args.temperature <= 0:
        raise CliError("--temperature must be > 0", BAD_INPUT)
    try:
        IS.check_bounds(args.is_mode, args.is_min, args.is_max)
    except ValueError as e:
        raise CliError(f"--is-mode/--is-min/--is-max: {e}", BAD_INPUT) from None
    if wants_dataset(args):  # a folder of captures or a data file: every rollout, one per-token table
        return run_dataset(args, settings)
    ro = load_source(args.source, settings)
    spec = choose_spec(ro, args.trainer, args.train_turns, args.fork_threshold)
    # the tokenizer the app reads this rollout with; only trl-message re-renders prompts through it
    choice = tokenizer_for(ro, settings, args.tokenizer, load=spec.mode == "trl-message")
    try:
        res = recorded_rescore(ro, settings) if recorded else rescore(
            ro, args.model, settings, spec=spec, tok=choice.tokenizer if spec.mode == "trl-message" else None,
            device=args.device, dtype=args.dtype, temperature=args.temperature)
    except (TorchMissing, BudgetExceeded):
        raise  # their own exit codes (common.exit_code)
    except (ValueError, RuntimeError, OSError) as e:  # a model that cannot be loaded, a rollout it cannot train on
        raise CliError(str(e), BAD_INPUT) from None
    imp = importance_doc(res, args.is_mode, args.is_min, args.is_max)
    doc = {**res.to_json(), "tokenizer": choice.name, "importance": imp, "explain": explain_doc(res, ro)}
    code = FINDINGS if args.fail_on_findings and doc["totals"]["flagged"] else OK
    if args.json:
        print_json(doc, indent=2)
        return code
    t = doc["totals"]
    print(f"model:    {res.model} ({res.device}, {res.dtype}, temperature {res.temperature})")
    print(f"trainer:  {res.trainer['reason'] if recorded else spec.label}")
    print("  ".join(f"{c:>14}" if i > 3 else f"{c:>8}" for i, c in enumerate(COLUMNS)))
    for row in doc["turns"]:
        print("  ".join(f"{_fmt(row[c]):>14}" if i > 3 else f"{_fmt(row[c]):>8}" for i, c in enumerate(COLUMNS)))
    print(f"totals:   {t['tokens']} tokens · mean |Δ| {_fmt(t['mean_abs_delta'])} · max |Δ| {_fmt(t['max_abs_delta'])}"
          f" · ratio {_fmt(t['ratio_min'])}–{_fmt(t['ratio_max'])} · flagged {t['flagged']} (|Δ| > {res.threshold})"
          f" · {res.seconds:.1f} s")
    m = imp["metrics"]
    print(f"IS:       {args.is_mode} [{args.is_min}, {args.is_max}] · " + " · ".join(
        f"{k.removeprefix('sampling/')} {_fmt(v)}" for k, v in m.items()))
    _print_explain(doc["explain"])
    for n in res.notes:
        print(f"note:     {n}")
    return code


def explain_doc(res, rollout) -> dict:
    """``--json``'s ``explain``: per token observed Δ, the settings' expected offset and the residual, the
    rollout's totals and the residual's outliers (docs/MISMATCH.md, "Why they disagree")."""
    from viewer.rescore.explain import explain

    return explain(res, rollout)


def _print_explain(ex: dict) -> None:
    t = ex["totals"]
    if not t["tokens"]:
        return
    share = "-" if t["explained"] is None else f"{t['explained']:.1%}"
    print(f"settings: {ex['sampling'].get('logprobs_mode')} {ex['sampling'].get('settings')} · mean Δ "
          f"{_fmt(t['mean_delta'])}, expected {_fmt(t['mean_expected'])}, residual {_fmt(t['mean_residual'])} · "
          f"explained {share} of mean |Δ|")
    for o in ex["outliers"][:5]:
        print(f"outlier:  turn {o['turn']} token {o.get('tok')} id {o['id']}: Δ {_fmt(o['delta'])} expected "
              f"{_fmt(o['expected'])} residual {_fmt(o['residual'])}")
