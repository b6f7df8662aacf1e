"""Derived token views: a text-only conversation -> one Turn per assistant turn.

Text-only rows (opencode exports, Harbor conversations, ATIF without ids, agentcap,
plain messages) carry no token ids. We render them through a chat template the way the
scripted-expert traces are trained: for the assistant message at position i,

* prompt = the template over ``messages[:i]`` with the generation prompt;
* target = what the template appends for message i (the reply) up to and including the
  end-of-turn token;

checking that the prompt's ids are a prefix of the ids of ``messages[:i+1]``. The mask
is our own construction: every target token trainable (1), the prompt context (0).
Turns are labelled ``prompt_source="rerender"`` / ``output_source="derived"``.

A second check compares each turn with the next one: the ids the model "saw" for its
own reply (prompt_k + target_k) should be a prefix of prompt_{k+1}. Templates that
rewrite history (Qwen3 drops ``<think>`` blocks of earlier turns) break this; the first
differing position is kept in ``turn.origin.derived`` and reported as a warning.

Rows that do carry ids build :class:`~viewer.rollout.Turn` values themselves and only use
:class:`Conversation` to carry them (``exact_turns``).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from viewer.budgets import BudgetExceeded
from viewer.origin import DerivedCheck, RenderDiff, RolloutOrigin, TurnOrigin
from viewer.rollout import Problem, Rollout, Turn

__all__ = ["Conversation", "derive_turns", "to_rollout", "template_message", "end_token_ids",
           "choose_tokenizer"]


@dataclass
class Conversation:
    """What a text-format reader extracts from one row (no tokenizer involved yet)."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    model: str | None = None
    agent: str | None = None
    task: dict[str, Any] | None = None
    instruction: str | None = None
    reward: float | None = None
    summary: dict[str, Any] | None = None
    exact_turns: list[Turn] | None = None  # rows with real ids: used as-is (labelled engine)
    problems: list[Problem] = field(default_factory=list)
    origin: RolloutOrigin = RolloutOrigin()  # what the row says of itself (session, batch, ...)
    chat_template_kwargs: dict[str, Any] | None = None
    # messages[:context] are the request's given history (few-shot or earlier turns it was sent
    # with): their assistant messages are prompt, never turns of this rollout
    context: int = 0


# Roles other producers write, as the chat roles a template renders (a template drops a role it does
# not know without a word: Qwen3's renders only system / user / assistant / tool).
ROLE_ALIASES = {"agent": "assistant", "model": "assistant", "gpt": "assistant", "bot": "assistant",
                "human": "user", "environment": "user", "env": "user", "observation": "user",
                "developer": "system", "function": "tool", "ipython": "tool"}
_TEMPLATE_ROLES = {"system", "user", "assistant", "tool"}
_TEXT_PARTS = {"text", "input_text", "output_text"}
_REASONING_PARTS = {"reasoning", "thinking"}


def _parts_text(parts: list[Any], out: dict[str, Any], notes: list[str]) -> str:
    """Content parts as the one string templates render: text parts joined, reasoning parts moved to
    ``reasoning_content``, any other part (an image, a file) a bracketed placeholder, said once."""
    texts, thoughts = [], []
    for p in parts:
        if isinstance(p, str):
            texts.append(p)
            continue
        kind = p.get("type") if isinstance(p, dict) else None
        if kind in _REASONING_PARTS:
            thoughts.append(str(p.get(kind) or p.get("text") or ""))
        elif kind in _TEXT_PARTS or (kind is None and isinstance(p, dict) and isinstance(p.get("text"), str)):
            texts.append(str(p.get("text", "")))
        else:
            texts.append(f"[{kind or type(p).__name__}]")
            notes.append(f"a {kind or type(p).__name__} content part is shown as a placeholder")
    if thoughts and not out.get("reasoning_content"):
        out["reasoning_content"] = "\n".join(thoughts)
    return "\n".join(texts)


def _tool_call(c: Any, k: int, notes: list[str]) -> dict[str, Any] | None:
    """One tool call in OpenAI's shape, from the shapes producers write: ``{function: {name,
    arguments}}``, Inspect's ``{function: "name", arguments: {...}}``, a bare ``{name, arguments|input}``.
    Arguments stay a JSON string or an object as given (templates render both); a missing one is ``{}``."""
    if not isinstance(c, dict):
        notes.append(f"tool call {k} is not an object; left out of the render")
        return None
    fn = c.get("function")
    if isinstance(fn, dict):
        name, args = fn.get("name"), fn.get("arguments")
    else:
        name = fn if isinstance(fn, str) else c.get("name")
        args = c.get("arguments", c.get("input"))
    if not isinstance(name, str) or not name:
        notes.append(f"tool call {k} names no function; rendered as '?'")
        name = "?"
    if args is None:
        args = {}
    elif not isinstance(args, (str, dict)):
        args = json.dumps(args, ensure_ascii=False, default=str)
    return {"id": str(c.get("id") or c.get("tool_call_id") or f"call_{k}"), "type": "function",
            "function": {"name": name, "arguments": args}}


def template_message(m: dict[str, Any], notes: list[str] | None = None) -> dict[str, Any]:
    """A message as chat templates expect it: a template role, string content, reasoning as
    ``reasoning_content``, tool calls in OpenAI's shape. What had to change to get there is said in
    ``notes`` (one line each), so a shape no template renders is a clear problem, not a traceback."""
    notes = notes if notes is not None else []
    out = dict(m)
    role = out.get("role")
    if role not in _TEMPLATE_ROLES:
        mapped = ROLE_ALIASES.get(str(role).lower()) if isinstance(role, str) else None
        if mapped is None or mapped not in _TEMPLATE_ROLES:
            notes.append(f"role {role!r} is not one a chat template renders; rendered as 'user'")
            mapped = "user"
        out["role"] = mapped
    if "reasoning_content" not in out and isinstance(out.get("reasoning"), str):
        out["reasoning_content"] = out.pop("reasoning")
    c = out.get("content")
    if c is None:
        out["content"] = ""
    elif isinstance(c, list):
        out["content"] = _parts_text(c, out, notes)
    elif not isinstance(c, str):
        out["content"] = json.dumps(c, ensure_ascii=False, default=str)
    calls = out.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            notes.append(f"tool_calls is a {type(calls).__name__}, not a list; left out of the render")
            calls = []
        fixed = [_tool_call(c, k, notes) for k, c in enumerate(calls)]
        out["tool_calls"] = [c for c in fixed if c is not None]
        if not out["tool_calls"]:
            del out["tool_calls"]
    return out


def end_token_ids(tok) -> set[int]:
    from viewer.tokenizer.specials import END_OF_TURN

    ids: set[int] = set()
    for name in END_OF_TURN:
        try:
            i = tok.convert_tokens_to_ids(name)
        except (KeyError, TypeError, ValueError):  # a vocabulary without this name: not an end token here
            i = None
        if isinstance(i, int) and i >= 0 and i != getattr(tok, "unk_token_id", None):
            ids.add(i)
    if isinstance(getattr(tok, "eos_token_id", None), int):
        ids.add(tok.eos_token_id)
    return ids


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _cut_after_end(tail: list[int], ends: set[int]) -> list[int]:
    for j in range(len(tail) - 1, -1, -1):
        if tail[j] in ends:
            return tail[:j + 1]
    return tail


def derive_turns(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, tok, *,
                 label: str = "", chat_template_kwargs: dict[str, Any] | None = None, limits=None,
                 context: int = 0) -> tuple[list[Turn], list[Problem]]:
    """One derived Turn per assistant message (see module doc). Never raises on bad data, only
    :class:`~viewer.budgets.BudgetExceeded` past a budget of ``limits`` (messages = ``records``,
    assistant messages = ``turns``, checked before any render; a rendered prompt: ``turn_tokens``)."""
    from viewer.tokenizer import render_prompt_ids

    problems: list[Problem] = []
    if limits is not None:
        limits.check("records", len(messages), f"{label}: messages")
        limits.check("turns", sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant"),
                     f"{label}: assistant messages")
    notes: list[str] = []
    msgs = [template_message(m, notes) for m in messages if isinstance(m, dict)]
    for note in dict.fromkeys(notes):  # each kind of change once per rollout, not once per message
        problems.append(Problem(label, "messages", note, "warning"))
    ends = end_token_ids(tok)
    turns: list[Turn] = []
    for i, m in enumerate(msgs):
        if m.get("role") != "assistant" or i < context:
            continue
        k = len(turns)
        t = Turn(index=k, call=k + 1, kind="agent", role="main", trained=True, messages=msgs[:i],
                 tools=list(tools or []), response=m,
                 origin=TurnOrigin(mask_source="derived", kind_source="record", message_index=i))
        try:
            prompt = render_prompt_ids(tok, msgs[:i], tools=tools or None, chat_template_kwargs=chat_template_kwargs,
                                       add_generation_prompt=True, limits=limits)
            full = render_prompt_ids(tok, msgs[:i + 1], tools=tools or None,
                                     chat_template_kwargs=chat_template_kwargs, add_generation_prompt=False,
                                     limits=limits)
        except BudgetExceeded:
            raise
        except Exception as e:  # a template that cannot render this conversation
            t.error = f"chat template failed: {type(e).__name__}: {e}"
            t.trained = False
            t.origin = t.origin.replace(rerender_error=t.error)
            problems.append(Problem(label, f"turn {k} (message {i})", t.error))
            turns.append(t)
            continue
        if limits is not None:
            limits.check("turn_tokens", len(full), f"{label}: turn {k} (message {i})")
        common = _common_prefix(prompt, full)
        check = DerivedCheck(prompt_is_prefix=common == len(prompt))
        if common < len(prompt):
            check = check.replace(prefix_break=common)
            problems.append(Problem(label, f"turn {k} (message {i})",
                                    f"the prompt's ids are not a prefix of prompt+reply (they differ at position "
                                    f"{common} of {len(prompt)}): this template renders the generation prompt "
                                    "differently from a finished turn; the reply is taken from that point", "warning"))
        t.prompt_ids, t.prompt_source = prompt, "rerender"
        t.output_ids = _cut_after_end(full[common:] if common < len(prompt) else full[len(prompt):], ends)
        t.output_source = "derived"
        t.mask = [1] * len(t.output_ids)
        t.trained = bool(t.output_ids)
        t.origin = t.origin.replace(derived=check)
        turns.append(t)
    # Turn-to-turn: does the next prompt contain this turn exactly as it was generated?
    for a, b in zip(turns, turns[1:]):
        if a.error or b.error or a.origin.derived is None:  # (every turn rendered above has its check)
            continue
        seen = list(a.prompt_ids) + list(a.output_ids)
        c = _common_prefix(seen, b.prompt_ids)
        check = a.origin.derived.replace(next_prompt_extends=c == len(seen))
        if c < len(seen):
            where = "prompt" if c < len(a.prompt_ids) else "reply"
            pos = c if where == "prompt" else c - len(a.prompt_ids)
            diff = RenderDiff(part=where, position=pos)
            why = ""
            try:
                was = tok.decode(seen[c:c + 12])
                now = tok.decode(b.prompt_ids[c:c + 12])
                diff = diff.replace(generated=was, later=now)
                if "<think>" in was and "<think>" not in now:
                    why = " (the template drops <think> blocks of earlier turns)"
            except (OverflowError, TypeError, ValueError, IndexError):  # ids it cannot decode: the
                pass  # warning below still names the part and position, just without the two texts
            check = check.replace(later_render_differs_at=diff)
            problems.append(Problem(label, f"turn {a.index}",
                                    f"renders differently inside turn {b.index}'s prompt from {where} position {pos}"
                                    f"{why}: what later turns were conditioned on is not what this turn generated",
                                    "warning"))
        a.origin = a.origin.replace(derived=check)
    return turns, problems


def choose_tokenizer(model: str | None, override: str | None = None):
    """The tokenizer for a derived view: the model's own when we have it, else offline Qwen3."""
    from viewer.tokenizer import TokenizerChoice, load_qwen3, resolve_tokenizer

    choice = resolve_tokenizer(model, override)
    if choice.ok:
        return choice
    try:
        tok = load_qwen3()
    except RuntimeError as e:
        return TokenizerChoice(None, None, "none", f"{choice.message} {e}")
    what = f"model {model!r}" if model else "this row (no model named)"
    return TokenizerChoice("qwen3", tok, "bundled-qwen3",
                           f"No tokenizer for {what}: token view derived with the offline Qwen3 tokenizer and "
                           "template (a reconstruction, not what the model saw).")


def is_stand_in(source: str, model: str | None) -> bool:
    """Is the bundled Qwen3 rendering a rollout of another model? Qwen2.5 and QwQ share its vocabulary
    (so the name mapping picks it for them) but not its template: only a Qwen3 model is its own."""
    return source == "bundled-qwen3" and not re.search(r"qwen-?3", model or "", re.I)


def to_rollout(conv: Conversation, *, source: str, fmt: str, label: str, tokenizer_override: str | None = None,
               limits=None) -> Rollout:
    """Assemble a Rollout: exact turns when the row has ids, else derived ones."""
    ro = Rollout(source=source, format=fmt, model=conv.model, task=conv.task, instruction=conv.instruction,
                 summary=conv.summary, reward=conv.reward)
    ro.problems = list(conv.problems)
    ro.origin = conv.origin
    if isinstance(conv.agent, str) and conv.agent:
        ro.origin = ro.origin.replace(agent=conv.agent)
    elif conv.agent:  # a row's own value: say what is wrong with it, and show the rest
        ro.problems.append(Problem(label, "agent", f"expected the agent's name, got {type(conv.agent).__name__}; "
                                                   "not shown", "warning"))
    exact = conv.exact_turns
    if limits is not None and exact:
        limits.check("turns", len(exact), f"{label}: turns")
        for k, t in enumerate(exact):
            if t is not None:
                limits.check("turn_tokens", len(t.prompt_ids) + len(t.output_ids), f"{label}: turn {k}")
    if exact is not None and exact and all(t is not None for t in exact):
        ro.turns = list(exact)  # type: ignore[arg-type]
        ro.origin = ro.origin.replace(token_view="exact")
    else:
        choice = choose_tokenizer(conv.model, tokenizer_override)
        stand_in = is_stand_in(choice.source, conv.model)
        note = choice.message + (" Findings of its template (how Qwen3 handles <think> blocks) are labelled stand-in "
                                 "artefacts, not this rollout's drift." if stand_in else "")
        ro.origin = ro.origin.replace(tokenizer=choice.name, tokenizer_note=note, tokenizer_stand_in=stand_in)
        if choice.tokenizer is None:
            ro.problems.append(Problem(label, "", f"no tokenizer to derive a token view: {choice.message}"))
            ro.origin = ro.origin.replace(token_view="none")
            return ro
        turns, probs = derive_turns(conv.messages, conv.tools, choice.tokenizer, label=label,
                                    chat_template_kwargs=conv.chat_template_kwargs, limits=limits,
                                    context=conv.context)
        if stand_in:  # what the stand-in's template does to history is not this rollout's (issue 35)
            probs = [Problem(p.file, p.where, f"stand-in artefact (the bundled Qwen3 template, not {conv.model or 'this rollout'}'s): "
                             f"{p.message}", p.severity) if "<think>" in p.message else p for p in probs]
        ro.problems.extend(probs)
        # exact turns (aligned with the assistant messages; None = derive) replace derived ones
        n_exact = 0
        for k, t in enumerate(exact or []):
            if t is not None and k < len(turns):
                turns[k] = t
                n_exact += 1
        ro.origin = ro.origin.replace(token_view="mixed" if n_exact else "derived")
        ro.turns = turns
        if not turns:
            ro.problems.append(Problem(label, "", "no assistant message in this conversation: nothing to show "
                                                  "as generated tokens", "warning"))
    for i, t in enumerate(ro.turns):
        t.index = i
    return ro
