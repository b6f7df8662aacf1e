"""``python -m viewer compare A B [--json]``: where two rollouts' token ids first differ, per turn
(across tokenizers: where their texts first differ, and the token covering that byte on each side).

A and B are anything ``summary`` opens (capture folders, trace/turns files, dataset files or
folders, ``hf://`` sources); ``--a-row`` / ``--b-row`` pick dataset rows, so two rollouts of one
task in a dataset compare as ``compare data.jsonl data.jsonl --a-row 0 --b-row 1``.
Exit 0 whether or not they differ (``--fail-on-findings``: 1 when they differ).
"""
from __future__ import annotations

import argparse
import json
from typing import Any

from viewer.comparison import Comparison, compare
from viewer.config import Settings
from viewer.rollout import Rollout

from .common import FINDINGS, OK, add_common, add_setting_option, print_json

__all__ = ["add_parser", "compare_sources"]


def compare_sources(a: Rollout, b: Rollout, settings: Settings,
                    tokenizer: str | None = None) -> tuple[Comparison, dict[str, str | None]]:
    """The comparison of ``a`` and ``b``, each side shown with the tokenizer the app would use
    (:func:`viewer.tokenizer.tokenizer_for`), and those tokenizers' names by side."""
    from viewer.tokenizer import token_table, tokenizer_for

    ca, cb = tokenizer_for(a, settings, tokenizer), tokenizer_for(b, settings, tokenizer)
    ta = token_table(ca.tokenizer, ca.name) if ca.tokenizer is not None else None
    tb = token_table(cb.tokenizer, cb.name) if cb.tokenizer is not None else None
    res = compare(a, b, tok_a=ca.tokenizer, tok_b=cb.tokenizer, table_a=ta, table_b=tb)
    return res, {"a": ca.name, "b": cb.name}


def _short(s: str | None, n: int = 24) -> str:
    if s is None:
        return "(none)"
    v = json.dumps(s, ensure_ascii=False)
    return v if len(v) <= n else v[: n - 1] + "…"


def _run(run: list, pos: int) -> str:
    """A run of tokens, the diverging one in brackets."""
    return " ".join(f"[{_short(t.text)}]" if t.position == pos else _short(t.text) for t in run) or "(ends)"


def _print_text_pair(p: Any, head: str) -> None:
    d, al, fd = p.to_dict(), p.text, p.first_divergence
    head += f"  common text {al.common_bytes:>7,} B (A {al.a_position:,} / B {al.b_position:,} tokens)"
    if fd is None:
        print(f"{head}  identical text ({d['a_len']:,} / {d['b_len']:,} tokens)")
        return
    print(f"{head}  diverges at byte {al.divergence_byte:,} ({fd.part}): A {al.a_position:,} {fd.a_id} "
          f"{_short(fd.a_text)} vs B {al.b_position:,} {fd.b_id} {_short(fd.b_text)}")
    print(f"{'':14}A  {_run(al.a_run, al.a_position)}")
    print(f"{'':14}B  {_run(al.b_run, al.b_position)}")


def _print(res: Comparison, names: dict[str, str | None] | None = None) -> None:
    print(f"A: {res.a_source}")
    print(f"B: {res.b_source}")
    if res.alignment == "text":
        na, nb = (names["a"], names["b"]) if names else res.tokenizers
        print(f"aligned by text (tokenizers differ: {na}, {nb})")
    for p in res.pairs:
        d = p.to_dict()
        head = f"{p.label:<12} A turn {d['a_turn'] if d['a_turn'] is not None else '-':>3}  " \
               f"B turn {d['b_turn'] if d['b_turn'] is not None else '-':>3}"
        fd = p.first_divergence
        if p.text is not None:
            _print_text_pair(p, head)
            continue
        head += f"  common prefix {p.common_prefix:>7,}"
        if fd is None:
            print(f"{head}  identical ({d['a_len']:,} tokens)")
        else:
            print(f"{head}  diverges at {fd.position:,} ({fd.part}): A {fd.a_id} {_short(fd.a_text)} "
                  f"vs B {fd.b_id} {_short(fd.b_text)}")
    for n in res.notes:
        print(f"note: {n}")
    print("identical" if res.identical else f"first divergence: {res.first_diverging.label}")


def _cmd_compare(args: argparse.Namespace, settings: Settings) -> int:
    from viewer.sources import load_source

    rollouts = [load_source(spec, settings, row=row, split=args.split, config=args.config, format=args.format)
                for spec, row in ((args.a, args.a_row), (args.b, args.b_row))]
    res, names = compare_sources(rollouts[0], rollouts[1], settings, args.tokenizer)
    if args.json:
        print_json({**res.to_dict(), "tokenizers": names})
    else:
        _print(res, names)
    return FINDINGS if args.fail_on_findings and not res.identical else OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser("compare", help="pair the turns of two rollouts and find where their token ids first differ",
                       description="Pair the calls of rollouts A and B (k-th agent turn with k-th agent turn, "
                                   "bookkeeping calls by role) and report, per pair, the common prefix of "
                                   "prompt+output ids and the first divergence. Prompts without ids are rendered "
                                   "as trl-message renders them. When the two tokenizers differ, pairs are "
                                   "aligned by text (UTF-8 bytes) instead of ids.")
    p.add_argument("a", metavar="A", help="capture folder, trace/turns file, dataset file or folder, or hf://...")
    p.add_argument("b", metavar="B", help="the same kinds as A")
    add_common(p, findings="the two differ")
    p.add_argument("--a-row", type=int, default=None, metavar="N", help="row of A when A is a row dataset")
    p.add_argument("--b-row", type=int, default=None, metavar="N", help="row of B when B is a row dataset")
    p.add_argument("--split", help="dataset split for both (default: train when the files name one)")
    p.add_argument("--config", help="dataset config for both")
    p.add_argument("--format", default=None, help="row format for both when detection is ambiguous")
    add_setting_option(p, "--tokenizer", "tokenizer", "For both: ", metavar="T", default=None)
    p.set_defaults(func=_cmd_compare)
