"""``python -m viewer rescore SOURCE --model M [--json]``: trainer vs sampler logprobs per turn.

Exit codes as the other commands: 0 ok, 1 unreadable source / model / no torch, 2 usage or not found.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from viewer.config import Settings

__all__ = ["add_parser"]

COLUMNS = ("turn", "row", "verdict", "context", "tokens", "mean_abs_delta", "max_abs_delta", "ratio_min", "ratio_max",
           "flagged")


def add_parser(sub) -> None:
    p = sub.add_parser("rescore", help="run the model's forward pass over the trainer rows and compare each trained "
                                       "token's logprob with the sampler's (Δ = trainer − sampler, ratio = exp Δ)")
    p.add_argument("source", metavar="SOURCE", help="capture folder or trace file")
    p.add_argument("--model", required=True, help="tiny-qwen3 / smollm2 (the capture models, built offline), a "
                                                  "local model folder or a Hub name")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument("--trainer", choices=("trl-message", "trl-contract"), default=None,
                   help="whose rows (default: what the source supports, as the drift command picks)")
    p.add_argument("--train-turns", choices=("all", "tool-calls"), default=None, help="trl-message's train-turn rule")
    p.add_argument("--fork-threshold", type=int, default=None, help="TRL's fork_threshold_tokens")
    p.add_argument("--tokenizer", default=None, help="tokenizer for trl-message's re-render (default: as the app picks)")
    p.add_argument("--device", default=None, help="auto (CUDA when present), cpu, cuda (default: VIEWER_RESCORE_DEVICE)")
    p.add_argument("--dtype", default=None, help="auto (the model config's), float32, bfloat16, float16")
    p.add_argument("--temperature", type=float, default=None,
                   help="divide the trainer's logits by this (default: 1.0 for raw sampler logprobs, the request's "
                        "temperature for processed ones)")
    p.add_argument("--threshold", type=float, default=None, help="flag tokens with |Δ| above this "
                                                                 "(default: VIEWER_RESCORE_FLAG)")
    p.set_defaults(func=_cmd_rescore)


def _fail(message: str, code: int) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def _fmt(v) -> str:
    return "-" if v is None else (f"{v:.4f}" if isinstance(v, float) else str(v))


def _cmd_rescore(args: argparse.Namespace, settings: Settings) -> int:
    from dataclasses import replace

    from viewer.drift import TrainerSpecError, choose_spec
    from viewer.rescore import TorchMissing, rescore, torch_available
    from viewer.sources import SourceError, SourceNotFound, load_source
    from viewer.tokenizer import resolve_tokenizer

    if not torch_available():  # before reading anything: the one thing the user must fix
        return _fail(str(TorchMissing()), 1)
    if args.threshold is not None:
        settings = replace(settings, rescore_flag_delta=float(args.threshold))
    if args.temperature is not None and args.temperature <= 0:
        return _fail("--temperature must be > 0", 2)
    try:
        ro = load_source(args.source, settings)
    except SourceNotFound as e:
        return _fail(e.message, 2)
    except SourceError as e:
        return _fail(e.message, 1)
    try:
        spec = choose_spec(ro, args.trainer, args.train_turns, args.fork_threshold)
    except TrainerSpecError as e:
        return _fail(str(e), 2)
    tok = None
    if spec.mode == "trl-message":  # only message mode re-renders prompts through a tokenizer
        src = Path(str(ro.source))
        cap = src if src.is_dir() else src.parent
        tok = resolve_tokenizer(ro.model, args.tokenizer or settings.tokenizer or None, capture_dir=cap).tokenizer
    try:
        res = rescore(ro, args.model, settings, spec=spec, tok=tok, device=args.device, dtype=args.dtype,
                      temperature=args.temperature)
    except TorchMissing as e:
        return _fail(str(e), 1)
    except (ValueError, RuntimeError, OSError) as e:
        return _fail(str(e), 1)
    doc = res.to_json()
    if args.json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
        return 0
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
    return 0
