"""Drift over a dataset: all three checks per agent turn plus the trainer's rows, batched.

Decode and encode run as one batch per chunk of rollouts (the tokenizer's own speed bounds
the scan); rollouts are consumed lazily, so memory is bounded by the chunk.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sized
from dataclasses import dataclass
from functools import partial
from typing import Any

from viewer.drift.causes import classify_divergence, common_prefix
from viewer.drift.costs import merge_gradient, new_gradient_block, rollout_costs
from viewer.drift.checks import need_tokenizer, oov_reason, render_text, roundtrip_result, template_unchecked
from viewer.drift.checks import prefix_audit
from viewer.drift.trainer import TrainerRows, check_args, choose_spec, trainer_rows
from viewer.config import Settings
from viewer.rollout import Rollout, Turn
from viewer.tokenizer import token_table
from viewer.tokenizer.pieces import piece_encoder
from .results import (CHECKS, PrefixResult, RetokenizeResult, RowResult, ScanResult, TemplateResult,
                      TrainerBlock, empty_totals, new_trainer_block)
from .pool import ChunkPool, can_fork
from .rows import Tally

__all__ = ["scan", "merge_trainer"]


@dataclass(frozen=True)
class _TrainerChoice:
    """The trainer the user named (or None: each rollout's own supported mode)."""

    mode: str | None
    train_turns: str | None
    fork_threshold: int | None
    sweep: tuple[float, ...] | None = None  # fork thresholds to re-stitch at (viewer.drift.costs.sweep)
    whatifs: bool = False  # measure the what-ifs (viewer.drift.whatif): re-renders, so opt-in

    def check(self) -> None:
        check_args(self.mode, self.train_turns, self.fork_threshold)

    def rows(self, r: Rollout, tok) -> TrainerRows:
        return trainer_rows(r, choose_spec(r, self.mode, self.train_turns, self.fork_threshold), tok)


# the block's keys that name the semantics (the rest count): taken whole from one rollout's block
_SEMANTICS = tuple(k for k in TrainerBlock.__annotations__ if k not in ("modes", "errors", "tally"))


def _trainer_part(tr: TrainerRows) -> dict[str, Any]:
    """One rollout's trainer result as a ``trainer`` block part (for :func:`merge_trainer`)."""
    spec = tr.spec.to_dict()
    return {**spec, "modes": {f"{spec['mode']}/{spec['train_turns']}": 1}, "errors": int(tr.error is not None),
            "tally": tr.tally.to_dict()}


def merge_trainer(block: dict[str, Any], part: dict[str, Any]) -> None:
    """Add one ``trainer`` block into another: tallies summed (max for ``drift_max``), the
    mode named when every rollout ran under the same one, else ``"mixed"`` (see ``modes``)."""
    for k, n in part["modes"].items():
        block["modes"][k] = block["modes"].get(k, 0) + n
    if len(block["modes"]) == 1:
        for k in _SEMANTICS:
            block[k] = part[k]
    else:
        block.update(mode="mixed", train_turns=None, trl_version=None, reason="rollouts differ; see modes")
        if block["fork_threshold"] != part["fork_threshold"]:
            block["fork_threshold"] = None
    block["errors"] += part["errors"]
    tally = Tally(**block["tally"])
    tally.merge(Tally(**part["tally"]))  # TRL's own summing rule, in one place (viewer.drift.rows)
    block["tally"] = tally.to_dict()


def _batch_decode(tok, ids: list[list[int]]) -> list[str]:
    """``tok.batch_decode(ids, skip_special_tokens=False)``. For a fast tokenizer that does no
    clean-up of spaces that is exactly its Rust backend's ``decode_batch`` (transformers adds
    only a per-element type walk over every id, ~40% of the decode here), so call it directly."""
    backend = getattr(tok, "_tokenizer", None)
    if backend is not None and getattr(tok, "clean_up_tokenization_spaces", True) is False \
            and hasattr(backend, "decode_batch"):
        return backend.decode_batch(ids, skip_special_tokens=False)
    return tok.batch_decode(ids, skip_special_tokens=False)


def _batch_encode(tok, texts: list[str]) -> list[list[int]]:
    """``tok(texts, add_special_tokens=False)["input_ids"]``; straight through the Rust backend
    when it neither truncates nor pads (what transformers would set per call otherwise), and
    each piece between added tokens once (:mod:`viewer.tokenizer.pieces`: the prompts of a
    rollout repeat its history, turn after turn) where the tokenizer allows it."""
    if not texts:
        return []
    pieces = piece_encoder(tok)
    if pieces is not None:
        return pieces.encode_batch(texts)
    backend = getattr(tok, "_tokenizer", None)
    if backend is not None and getattr(backend, "truncation", 1) is None and getattr(backend, "padding", 1) is None:
        return [e.ids for e in backend.encode_batch(texts, add_special_tokens=False)]
    return [list(x) for x in tok(texts, add_special_tokens=False)["input_ids"]]


_Fold = tuple  # (rows totals, trainer part, costs dict, rollout name): one rollout's sums, merged in order


def _fold(folds: list[_Fold], totals: dict[str, Any], gradient: dict[str, Any]) -> None:
    """Add a chunk's per-rollout sums into the scan's, one rollout at a time and in order (the
    same merges whether the chunk ran here or in a worker process)."""
    for tot, part, cost, name in folds:
        for k in ("rows", "forked_rows", "tokens_losing_gradient"):
            totals[k] += tot[k]
        merge_trainer(totals["trainer"], part)
        merge_gradient(gradient, cost, rollout=name)


def _scan_chunk(chunk: list[tuple[str, Rollout]], tok, table, plain: bool,
                trainer: _TrainerChoice) -> tuple[list[dict[str, Any]], list[_Fold]]:
    items: list[tuple[str, Turn, Turn | None]] = []
    for name, r in chunk:
        prev = None
        for t in r.agent_turns:
            items.append((name, t, prev))
            prev = t
    recs: list[dict[str, Any]] = []
    # --- A: batch decode + batch encode of every checkable output
    rt_todo: list[int] = []
    rt_res: dict[int, dict[str, Any]] = {}
    for n, (_, t, _) in enumerate(items):
        reason = (need_tokenizer(tok) or ("empty output (no sampled ids)" if not t.output_ids else None)
                  or (oov_reason(t.output_ids, len(table)) if table is not None else None))
        if reason:
            rt_res[n] = RetokenizeResult(equal=None, first_mismatch=None, changed_spans=0, cause=None,
                                         unchecked=reason)
        else:
            rt_todo.append(n)
    if rt_todo:
        out_ids = [list(items[n][1].output_ids) for n in rt_todo]
        texts = _batch_decode(tok, out_ids)
    else:
        out_ids, texts = [], []
    # --- B: render every checkable prompt, then one batch encode for all texts
    tp_todo: list[tuple[int, str]] = []
    tp_res: dict[int, dict[str, Any]] = {}
    limits = Settings.from_env().limits()  # once a chunk, not per render (it reads every variable)
    render_texts: list[str] = []
    for n, (_, t, _) in enumerate(items):
        reason = template_unchecked(t, tok)
        if reason:
            tp_res[n] = TemplateResult(equal=None, first_mismatch=None, cause=None, unchecked=reason)
            continue
        try:
            tv = render_text(t, tok, "vllm", limits)
        except Exception as e:
            tp_res[n] = TemplateResult(equal=None, first_mismatch=None, cause=None,
                                       unchecked=f"template failed to render: {e}")
            continue
        tp_todo.append((n, "vllm"))
        render_texts.append(tv)
        if plain:
            try:
                tpl = render_text(t, tok, "plain", limits)
            except Exception as e:
                tp_res[n] = {"plain_error": f"template failed to render: {e}"}
                continue
            if tpl != tv:  # only encode the plain render when it differs as text
                tp_todo.append((n, "plain"))
                render_texts.append(tpl)
    encoded = _batch_encode(tok, texts + render_texts) if tok is not None else []
    re_ids, rendered = encoded[:len(texts)], encoded[len(texts):]
    for n, ids, text, rid in zip(rt_todo, out_ids, texts, re_ids):
        if rid == ids:
            rt_res[n] = RetokenizeResult(equal=True, first_mismatch=None, changed_spans=0, cause=None)
        else:  # the expensive aligned diff only where the ids differ
            rt = roundtrip_result(ids, text, rid, table, items[n][1].logprobs)
            rt_res[n] = RetokenizeResult(equal=False, first_mismatch=rt.first_mismatch,
                                         changed_spans=len(rt.changed_spans), cause=rt.cause)
    for (n, variant), rid in zip(tp_todo, rendered):
        stored = list(items[n][1].prompt_ids)
        if rid == stored:
            d = TemplateResult(equal=True, first_mismatch=None, cause=None)
        else:
            k = common_prefix(stored, rid)
            cl = classify_divergence(stored, rid, k, tok, labels=("stored", "rendered"))
            d = TemplateResult(equal=False, first_mismatch=k, cause=cl.cause)
        if variant == "vllm":
            tp_res[n] = {**d, **tp_res.get(n, {})}
            if plain:
                tp_res[n].update({"plain_equal": d["equal"], "plain_cause": d["cause"]})
        else:
            tp_res[n].update({"plain_equal": d["equal"], "plain_cause": d["cause"]})
    # --- C + rows
    stand_ins = {name for name, r in chunk if r.origin.tokenizer_stand_in}
    for n, (name, t, prev) in enumerate(items):
        pc = prefix_audit(prev, t, tok)
        p = PrefixResult(status=pc.status, cause=pc.cause, tokens_rerendered=pc.tokens_rerendered,
                         divergence=pc.divergence, in_output=pc.in_output)
        if pc.unchecked:
            p["unchecked"] = pc.unchecked
        rec = {"rollout": name, "turn": t.index, "call": t.call,
               "retokenize": rt_res[n], "template": tp_res.get(n, {}), "prefix": p}
        if name in stand_ins:
            _mark_stand_in(rec)
        recs.append(rec)
    folds: list[_Fold] = []
    for name, r in chunk:
        tr = trainer.rows(r, tok)
        cost = rollout_costs(r, tr, tok, thresholds=trainer.sweep, whatifs=trainer.whatifs)
        folds.append((tr.totals(), _trainer_part(tr), cost.to_dict(), name))
        lost_cause = {x.at_turn: x.cause for x in cost.lost}
        for rec in recs:
            if rec["rollout"] != name:
                continue
            v = tr.verdict(rec["turn"])
            if v is not None:
                rec["row"] = RowResult(verdict=v.verdict, matched=v.matched, drift=v.drift,
                                       tokens_losing_gradient=v.tokens_losing_gradient, kept_trained=v.kept_trained)
                if v.turn in lost_cause:
                    rec["row"]["lost_cause"] = lost_cause[v.turn]
            else:
                rec["row"] = RowResult(verdict="ERROR" if tr.error else "NOT_IN_CHAIN",
                                       reason=tr.error or tr.excluded_reason(rec["turn"]))
    return recs, folds


def _scan_listed(scan_fn, listed: list[Rollout], chunk: list[tuple[str, int]]):
    """In a worker: a chunk of (name, index into the list the worker inherited at the fork)."""
    return scan_fn([(name, listed[i]) for name, i in chunk])


# What a chat template does to history and generation prompts: on a view rendered with a stand-in
# tokenizer (the bundled Qwen3 for a GPT or Llama rollout) these come from the stand-in, not the rollout.
STAND_IN_CAUSES = frozenset({"think_dropped", "template_kwargs"})


def _mark_stand_in(rec: dict[str, Any]) -> None:
    """Label the template and prefix findings a stand-in tokenizer's template explains (issue 35)."""
    for key in ("template", "prefix"):
        check = rec[key]
        if check.get("cause") in STAND_IN_CAUSES:
            check["artefact"] = "stand-in template"


def _tally(rec: dict[str, Any], totals: dict[str, Any]) -> None:
    totals["turns"] += 1
    checks = tuple(rec[c] for c in CHECKS)
    real = {c: not rec[c].get("artefact") for c in CHECKS}  # a stand-in's artefact is not this rollout's drift
    drifted = (rec["retokenize"].get("equal") is False or (rec["template"].get("equal") is False and real["template"])
               or (rec["prefix"]["status"] == "broken" and real["prefix"]))
    rec["drifted"] = drifted  # decided here once; the CLI table and the UI read it
    totals["drifted_turns"] += int(drifted)
    totals["stand_in_artefacts"] += int(not drifted and not all(real.values()))
    causes = {c.get("cause") for c in checks if c.get("cause") and not c.get("artefact")}
    for c in causes:
        totals["by_cause"][c] = totals["by_cause"].get(c, 0) + 1
    reasons = [c["unchecked"] for c in checks if c.get("unchecked")]
    if rec["retokenize"].get("unchecked"):
        totals["unchecked"] += 1
    for key, c in zip(CHECKS, checks):
        if c.get("unchecked"):
            totals["unchecked_by_check"][key] += 1
    if reasons:
        rec["unchecked"] = "; ".join(dict.fromkeys(reasons))
    totals["retokenize_drifted"] += int(rec["retokenize"].get("equal") is False)
    totals["template_drifted"] += int(rec["template"].get("equal") is False)
    totals["prefix_broken"] += int(rec["prefix"]["status"] == "broken")


def scan(rollouts: Iterable[Rollout], tok, progress: Callable[[int, int | None], None] | None = None,
         cancel: threading.Event | None = None, *, plain: bool = True, chunk_rollouts: int = 32,
         trainer: str | None = None, train_turns: str | None = None,
         fork_threshold: int | None = None, sweep: tuple[float, ...] | None = None,
         whatifs: bool = False, workers: int = 1) -> ScanResult:
    """Drift over a dataset (agent turns), JSON-able. See the module doc for the checks.

    Per turn: ``retokenize`` {equal, first_mismatch, changed_spans, cause}, ``template``
    {equal, first_mismatch, cause, plain_equal, plain_cause}, ``prefix`` {status, cause,
    tokens_rerendered, divergence, in_output}, ``row`` {verdict, matched, drift,
    tokens_losing_gradient, kept_trained} under the trainer (``NOT_IN_CHAIN`` with a ``reason``
    when the trainer leaves the turn out); a check that could not run carries ``unchecked: reason`` and
    the turn a joined ``unchecked``. Totals: ``unchecked`` counts turns whose output round
    trip could not run (``unchecked_by_check`` splits all three); ``by_cause`` counts
    turns per cause (a turn counts once per distinct cause). ``trainer``/``train_turns``
    name the trainer semantics (:mod:`viewer.drift.trainer`; None = what each rollout
    supports); ``totals.trainer`` says which ran and sums TRL's tally. ``gradient``: the trained
    tokens losing their gradient by cause and by turn (:mod:`viewer.drift.costs`), plus the
    fork-threshold ``sweep`` when thresholds are given and the measured what-ifs when ``whatifs``. ``progress(done_rollouts, total_or_None)`` is called per chunk; when ``cancel``
    is set the scan stops between chunks and returns what it has (``cancelled: true``).
    ``workers`` > 1: chunks are scanned in that many forked processes (:mod:`viewer.drift.pool`),
    the result identical to the serial scan's.
    """
    total = len(rollouts) if isinstance(rollouts, Sized) else None
    table = token_table(tok) if tok is not None else None
    if tok is not None:
        piece_encoder(tok)  # built here once, so forked workers inherit it
    totals: dict[str, Any] = {**empty_totals(), "trainer": new_trainer_block(fork_threshold)}
    choice = _TrainerChoice(trainer, train_turns, fork_threshold, tuple(sweep) if sweep else None, whatifs)
    gradient = new_gradient_block()
    choice.check()
    turns: list[dict[str, Any]] = []
    chunk: list[tuple[str, Rollout]] = []

    def take(done: tuple[list[dict[str, Any]], list[_Fold]]) -> None:
        recs, folds = done
        _fold(folds, totals, gradient)
        for rec in recs:
            _tally(rec, totals)
            turns.append(rec)
        totals["rollouts"] += len(folds)
        if progress is not None:
            progress(totals["rollouts"], total)

    pool: ChunkPool | None = None
    listed = rollouts if isinstance(rollouts, list) else None
    index = {id(r): i for i, r in enumerate(listed)} if listed is not None and workers > 1 else {}
    held: list[tuple[str, Rollout]] = []  # the first chunk, until a second shows the workers are worth forking
    submitted = 0  # rollouts sent to the chunks (names are numbered by it, as the serial scan numbers them)

    def send(part: list[tuple[str, Rollout]]) -> None:
        sent = [(name, index[id(r)]) for name, r in part] if listed is not None else list(part)
        for done in pool.submit(sent):
            take(done)

    def flush() -> None:
        nonlocal submitted, pool
        submitted += len(chunk)
        if pool is None and workers > 1 and can_fork():
            if not held:
                held.extend(chunk)
                chunk.clear()
                return
            scan_fn = partial(_scan_chunk, tok=tok, table=table, plain=plain, trainer=choice)
            if listed is not None:  # the workers inherit the list: a chunk goes as (name, index), not pickled
                scan_fn = partial(_scan_listed, scan_fn, listed)
            pool = ChunkPool(scan_fn, workers)
            send(held)
            held.clear()
        if pool is None:
            take(_scan_chunk(chunk, tok, table, plain, choice))
        else:
            send(chunk)
        chunk.clear()

    try:
        for r in rollouts:
            if cancel is not None and cancel.is_set():
                totals["cancelled"] = True
                break
            name = r.source if r.source else f"rollout-{submitted + len(chunk)}"
            if any(name == c[0] for c in chunk):
                name = f"{name}#{submitted + len(chunk)}"
            chunk.append((name, r))
            if len(chunk) >= chunk_rollouts:
                flush()
        if chunk and not totals["cancelled"]:
            flush()
        elif chunk:
            chunk.clear()
        if held and not totals["cancelled"]:  # one chunk in all: scanned here, no fork
            take(_scan_chunk(held, tok, table, plain, choice))
        if pool is not None:
            for done in pool.drain():
                if cancel is not None and cancel.is_set():
                    break
                take(done)
    finally:
        if pool is not None:
            pool.close()
    if cancel is not None and cancel.is_set():
        totals["cancelled"] = True
    return {"turns": turns, "totals": totals, "trainer": totals.pop("trainer"), "gradient": gradient}
