"""Certify a tokenizer + chat template for agent RL before training (issue 21 part 1, docs/DRIFT-DOCTOR.md).

For each case (the built-in battery, :mod:`.certify_cases`, plus any real conversations) sampling
is simulated turn by turn: turn *n*'s prompt is the conversation before assistant message *n*
rendered with ``add_generation_prompt=True``; what the model "sampled" is that message as the
template renders it at generation time (it is the last message then), up to and including the
first end-of-turn token, which is where sampling stops. Two properties training relies on are
then checked with the existing drift code:

* **prefix stability** — the next turn's prompt starts with this turn's prompt + sampled ids
  (:func:`viewer.drift.checks.prefix_audit`), both for the prompts TRL's message mode re-renders
  (messages verbatim) and for the prompts vLLM renders (tool-call arguments parsed: what a
  capture contract's engine ids hold);
* **round trip** — ``encode(decode(ids)) == ids`` for every sampled completion
  (:func:`viewer.drift.checks.roundtrip`).

What each break costs is computed by the trainer code itself (:func:`viewer.drift.trainer.trainer_rows`):
trained tokens losing their gradient and forked rows under ``trl-message`` and ``trl-contract``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from viewer.drift.causes import common_prefix
from viewer.drift.certify_cases import Case, battery
from viewer.drift.checks import prefix_audit, roundtrip
from viewer.drift.trainer import CONTRACT, DEFAULT_FORK_THRESHOLD, MESSAGE, MODES, TrainerSpec, trainer_rows
from viewer.rollout import Rollout, Turn
from viewer.tokenizer import chat_template_hash, render_prompt_text, token_table
from viewer.tokenizer.specials import END_OF_TURN

__all__ = ["CaseResult", "SimTurn", "certify", "certify_case", "certify_results", "report", "divergence_sequences",
           "simulate", "PREFIX_CHECKS", "PIECE_MARKERS"]

# prompt renders checked for prefix stability: TRL message mode's (verbatim messages) and vLLM's
PREFIX_CHECKS = {"trl_rerender": False, "engine_render": True}  # name → normalize_tool_arguments
PIECE_MARKERS = ("<tool_call>", "</tool_call>")


@dataclass
class SimTurn:
    """One simulated sampling step: the prompt as each side renders it and the sampled completion."""

    index: int                 # position of the assistant message in the conversation
    prompt_text: str           # TRL's re-render (messages verbatim)
    completion_text: str
    completion_ids: list[int]
    prompts: dict[str, list[int]] = field(default_factory=dict)  # PREFIX_CHECKS name → prompt ids


@dataclass
class CaseResult:
    """What ``certify`` found for one case (``to_dict`` is the JSON, docs/CLI.md)."""

    case: Case
    turns: list[SimTurn] = field(default_factory=list)
    checks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    trainer: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    reencoded: dict[int, list[int]] = field(default_factory=dict)  # turn → encode(decode(sampled)) where it differs
    error: str | None = None

    def failures(self) -> list[dict[str, Any]]:
        """Every failed check, in turn order (prefix checks first at each turn)."""
        out = [dict(x, check=name) for name, items in self.checks.items() for x in items if x["ok"] is False]
        return sorted(out, key=lambda x: (x["turn"], list(self.checks).index(x["check"])))

    @property
    def status(self) -> str:
        return "error" if self.error else ("fail" if self.failures() else "pass")

    @property
    def causes(self) -> list[str]:
        return list(dict.fromkeys(f["cause"] or "unclassified" for f in self.failures()))

    def tokens_lost(self) -> dict[str, int]:
        return {m: int(self.trainer.get(m, {}).get("tokens_losing_gradient", 0)) for m in MODES}

    def to_dict(self, *, ids: bool = False) -> dict[str, Any]:
        fails = self.failures()
        d: dict[str, Any] = {
            "name": self.case.name, "what": self.case.what, "source": self.case.source, "status": self.status,
            "cause": self.causes[0] if self.causes else None, "causes": self.causes,
            "assistant_turns": len(self.turns), "first_divergence": fails[0]["divergence"] if fails else None,
            "tokens_lost": self.tokens_lost(), "trainer": self.trainer, "checks": self.checks, "notes": self.notes,
            "error": self.error}
        if ids:
            d["turns"] = [{"index": t.index, "completion_ids": t.completion_ids, "prompts": t.prompts}
                          for t in self.turns]
        return d


def _end_of_turn(tok) -> tuple[str, ...]:
    eos = getattr(tok, "eos_token", None)
    return tuple(dict.fromkeys(([eos] if isinstance(eos, str) and eos else []) + list(END_OF_TURN)))


def _cut_at_end(text: str, ends: tuple[str, ...]) -> str:
    """Sampling stops at the first end-of-turn token, which the engine returns with the output."""
    hits = [(text.find(e), e) for e in ends if e in text]
    if not hits:
        return text
    at, e = min(hits)
    return text[:at + len(e)]


def _encode(tok, text: str, pieces: bool) -> list[int]:
    if not pieces:
        return list(tok.encode(text, add_special_tokens=False))
    # each marker as ordinary pieces: "<" then "tool_call>" never matches the added token
    out: list[int] = []
    rest = text
    while rest:
        hits = [(rest.find(m), m) for m in PIECE_MARKERS if m in rest]
        if not hits:
            out += tok.encode(rest, add_special_tokens=False)
            break
        at, m = min(hits)
        out += tok.encode(rest[:at], add_special_tokens=False) if at else []
        out += tok.encode(m[:1], add_special_tokens=False) + tok.encode(m[1:], add_special_tokens=False)
        rest = rest[at + len(m):]
    return [int(x) for x in out]


def simulate(case: Case, tok) -> list[SimTurn]:
    """Sample the case turn by turn (raises ValueError when the template cannot render it)."""
    msgs, tools = case.messages, case.tools or None
    ends = _end_of_turn(tok)
    out: list[SimTurn] = []
    for i, m in enumerate(msgs):
        if m.get("role") != "assistant" or i == 0:
            continue
        prompt = render_prompt_text(tok, msgs[:i], tools=tools, normalize_tool_arguments=False)
        full = render_prompt_text(tok, msgs[:i + 1], tools=tools, normalize_tool_arguments=False,
                                  add_generation_prompt=False)
        k = len(prompt) if full.startswith(prompt) else common_prefix(prompt, full)
        completion = _cut_at_end(full[k:], ends)
        t = SimTurn(i, prompt, completion, _encode(tok, completion, case.pieces))
        for name, normalize in PREFIX_CHECKS.items():
            text = prompt if not normalize else render_prompt_text(tok, msgs[:i], tools=tools,
                                                                   normalize_tool_arguments=True)
            t.prompts[name] = [int(x) for x in tok.encode(text, add_special_tokens=False)]
        out.append(t)
    return out


def _turn(t: SimTurn, case: Case, prompt_ids: list[int]) -> Turn:
    req = {"messages": case.messages[:t.index], **({"tools": case.tools} if case.tools else {})}
    n = len(t.completion_ids)
    return Turn(index=t.index, call=t.index, kind="agent", trained=True, prompt_ids=list(prompt_ids),
                prompt_source="engine", output_ids=list(t.completion_ids), output_source="engine",
                logprobs=[0.0] * n, mask=[1] * n, messages=req["messages"], tools=list(case.tools),
                response=dict(case.messages[t.index]), request=req, finish_reason="stop")


def _divergence(a: list[int], b: list[int], k: int, table, labels: tuple[str, str]) -> dict[str, Any]:
    """Position ``k`` with both sides' ids and texts (None past an end)."""
    def side(ids: list[int]) -> dict[str, Any]:
        i = ids[k] if k < len(ids) else None
        return {"id": i, "text": table.text_of(i) if i is not None else None}
    return {"position": k, labels[0]: side(a), labels[1]: side(b)}


def _prefix_item(prev: Turn, nxt: Turn, tok, table) -> dict[str, Any]:
    pc = prefix_audit(prev, nxt, tok)
    ok = pc.status != "broken"
    held = list(prev.prompt_ids) + list(prev.output_ids)
    return {"turn": prev.index, "next_turn": nxt.index, "ok": ok, "cause": pc.cause,
            "evidence": pc.classification.evidence if pc.classification else None,
            "in_output": pc.in_output, "tokens_rerendered": pc.tokens_rerendered,
            "divergence": None if ok else {"check": "prefix", **_divergence(held, list(nxt.prompt_ids), pc.divergence,
                                                                              table, ("held", "next_prompt"))}}


def _roundtrip_item(t: Turn, tok, table, keep: dict[int, list[int]]) -> dict[str, Any]:
    rt = roundtrip(t, tok)
    if rt.equal is False:
        keep[t.index] = list(rt.reencoded_ids)
    ok = rt.equal if rt.equal is not None else True  # an empty output has nothing to re-encode
    div = None
    if rt.equal is False:
        k = rt.first_mismatch if rt.first_mismatch is not None else common_prefix(t.output_ids, rt.reencoded_ids)
        div = {"check": "roundtrip", **_divergence(list(t.output_ids), rt.reencoded_ids, k, table,
                                                   ("sampled", "reencoded"))}
    ev = None
    if rt.changed_spans:
        s = rt.changed_spans[0]
        ev = f"sampled {s.sampled_pieces[:8]} re-encode as {s.reencoded_pieces[:8]}"
    return {"turn": t.index, "ok": ok, "cause": rt.cause, "evidence": ev, "divergence": div,
            "n_sampled": rt.n_sampled, "n_reencoded": rt.n_reencoded}


def _with_prompts(turns: list[Turn], sims: list[SimTurn], name: str) -> list[Turn]:
    return [replace(t, prompt_ids=list(s.prompts[name])) for t, s in zip(turns, sims)]


def _notes(case: Case, sims: list[SimTurn]) -> list[str]:
    """What the template does that no id comparison shows: tool calls it does not render at all."""
    out = []
    for s in sims:
        names = [str((c.get("function") or {}).get("name")) for c in case.messages[s.index].get("tool_calls") or []
                 if isinstance(c, dict)]
        missing = [n for n in names if n not in s.completion_text]
        if missing:
            out.append(f"turn {s.index}: the template renders no tool call for {', '.join(missing)}: the model "
                       "is never shown (or trained on) its own tool calls")
    return out


def certify_case(case: Case, tok, fork_threshold: int | None = None) -> CaseResult:
    """Simulate and check one case; a template that cannot render it is the case's ``error``."""
    res = CaseResult(case)
    try:
        res.turns = simulate(case, tok)
    except ValueError as e:  # a template error (or budget) is a finding about this template
        res.error = str(e)
        return res
    res.notes = _notes(case, res.turns)
    table = token_table(tok)
    base = [_turn(s, case, s.prompts["engine_render"]) for s in res.turns]
    for name in PREFIX_CHECKS:
        turns = _with_prompts(base, res.turns, name)
        res.checks[name] = [_prefix_item(a, b, tok, table) for a, b in zip(turns, turns[1:])]
    res.checks["roundtrip"] = [_roundtrip_item(t, tok, table, res.reencoded) for t in base]
    ro = Rollout(source=f"certify:{case.name}", format="certify", turns=base)
    for mode in MODES:
        thr = DEFAULT_FORK_THRESHOLD[mode] if fork_threshold is None else int(fork_threshold)
        spec = TrainerSpec(mode, "all" if mode == MESSAGE else "per-token-mask", thr)
        tr = trainer_rows(ro, spec, tok)
        d = {**tr.totals(), "fork_threshold": thr, "tally": tr.tally.to_dict(), "error": tr.error}
        d["verdicts"] = [{"turn": v.turn, "verdict": v.verdict, "drift": v.drift,
                          "tokens_losing_gradient": v.tokens_losing_gradient} for v in (tr.rows.verdicts if tr.rows
                                                                                        else [])]
        res.trainer[mode] = d
    return res


def certify_results(tok, *, extra: list[Case] | None = None, only: list[str] | None = None,
                    fork_threshold: int | None = None, progress=None) -> list[CaseResult]:
    """Every case's result (ValueError when the tokenizer has no chat template)."""
    if not getattr(tok, "chat_template", None):
        raise ValueError("the tokenizer has no chat template: nothing to certify")
    cases = [c for c in battery() if not only or c.name in only] + list(extra or [])
    results = []
    for i, c in enumerate(cases):
        results.append(certify_case(c, tok, fork_threshold))
        if progress is not None:
            progress(i + 1, len(cases))
    return results


def certify(tok, *, name: str | None = None, extra: list[Case] | None = None, only: list[str] | None = None,
            fork_threshold: int | None = None, progress=None) -> dict[str, Any]:
    """The report: every case's result and the totals (JSON with stable keys, docs/CLI.md)."""
    return report(certify_results(tok, extra=extra, only=only, fork_threshold=fork_threshold, progress=progress),
                  name, tok)


def divergence_sequences(res: CaseResult) -> dict[str, Any] | None:
    """The two id sequences of the case's first failure, for a token view: ``a`` (held prompt + sampled,
    or the sampled ids) and ``b`` (the next prompt, or the re-encoded ids), where they diverge
    (``position``) and where ``a``'s sampled part starts (``prompt_len``). None for a passing case."""
    fails = res.failures()
    if not fails:
        return None
    f = fails[0]
    k = next(j for j, t in enumerate(res.turns) if t.index == f["turn"])
    t = res.turns[k]
    if f["check"] == "roundtrip":
        return {"check": "roundtrip", "turn": t.index, "a": list(t.completion_ids),
                "b": list(res.reencoded.get(t.index, [])),
                "a_label": "sampled", "b_label": "re-encoded", "position": f["divergence"]["position"],
                "prompt_len": 0}
    nxt = res.turns[k + 1]
    held = t.prompts[f["check"]] + t.completion_ids
    return {"check": f["check"], "turn": t.index, "a": held, "b": list(nxt.prompts[f["check"]]),
            "a_label": "held: prompt + sampled", "b_label": f"next prompt (turn {nxt.index})",
            "position": f["divergence"]["position"], "prompt_len": len(t.prompts[f["check"]])}


def report(results: list[CaseResult], name: str | None, tok) -> dict[str, Any]:
    lost = {m: sum(r.tokens_lost()[m] for r in results) for m in MODES}
    by_cause: dict[str, int] = {}
    for r in results:
        for c in r.causes:
            by_cause[c] = by_cause.get(c, 0) + 1
    return {"tokenizer": name, "chat_template_sha256": chat_template_hash(tok),
            "trainers": {m: {"fork_threshold": next((r.trainer[m]["fork_threshold"] for r in results if r.trainer),
                                                    DEFAULT_FORK_THRESHOLD[m])} for m in (MESSAGE, CONTRACT)},
            "cases": [r.to_dict() for r in results],
            "totals": {"cases": len(results), "passed": sum(r.status == "pass" for r in results),
                       "failed": sum(r.status == "fail" for r in results),
                       "errors": sum(r.status == "error" for r in results),
                       "by_cause": by_cause, "tokens_lost": lost}}
