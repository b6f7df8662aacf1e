"""Atropos ``ScoredDataGroup`` JSONL (NousResearch/atropos): one line = one group of G rollouts.

An Atropos environment scores G sequences sampled for one item and, with
``data_path_to_save_groups`` set, writes the group as one JSONL line (``BaseEnv.handle_send_to_api``
in ``atroposlib/envs/base.py`` calls ``jsonl_writer.write(group)``). The fields
(``ScoredDataGroup`` in ``atroposlib/envs/base.py``; ``ScoredData`` in ``atroposlib/api/server.py``):

* ``tokens``: G lists of token ids, each the whole sequence (prompt + completion) as the trainer gets it;
* ``masks``: G lists as long as their ``tokens``: ``-100`` = context (no loss), any other value = a
  trained position. ``tokenize_for_trainer`` (``atroposlib/utils/tokenize_for_trainer.py``) writes the
  token id itself there, and the example trainer uses the mask *as the label*
  (``example_trainer/data.py``), so a value that differs from the token trains towards another token;
* ``scores``: G rewards (the trainer normalises them within the group: GRPO advantages);
* optional: ``messages`` (G conversations; roles may be ``system``/``user``/``assistant``/``tool`` or an
  environment's own ``environment``/``agent``; some environments store one rendered string instead),
  ``inference_logprobs`` (G lists aligned with ``tokens``; ``1.0`` at masked positions), ``advantages``
  and ``ref_logprobs`` (G per-token lists), ``overrides`` (G dicts), ``group_overrides``,
  ``generation_params``, ``images``, and whatever an environment adds (Rubik's cube: ``seed``,
  ``parsed_actions``, ``token_scores``...).

:func:`expand` splits a line into its G rollouts (``RowFormat.expand``, :mod:`viewer.sources.subrows`);
each knows its group: size, index, and a key (a hash of the group's tokens and scores; the prompts of a
group need not be shared: the Rubik's environment groups G next steps of different histories).

One rollout is one :class:`~viewer.rollout.Turn` over exactly the stored ids: the prompt is the context
before the first trained token, the output is everything from there on, with mask 1 where the mask is
not -100 and 0 where it is. With ``train_on_all_assistant_turns`` Atropos masks every assistant message
of a multi-turn chat, so context (user / tool messages) may come after the first trained token. We keep
it in the output (mask 0) rather than cutting the sequence into calls: the file records one sequence and
its mask, not where model calls began, and any cut would be a guess. The ids are labelled ``stored``
(the trainer's ids, possibly re-tokenised by the environment), never ``engine``.
"""
from __future__ import annotations

import hashlib
import json
import math
import operator
from array import array
from itertools import repeat
from typing import Any

import msgspec

from viewer.packed import Packed, pack_mask_01
from viewer.rollout import Problem, Turn, TurnOrigin
from viewer.sources import atropos_lines
from viewer.sources.atropos_lines import same_run
from viewer.sources.columns import check_ids
from viewer.sources.derive import Conversation
from viewer.sources.formats import RowFormat, RowReadError, RowRef, as_float, text_of
from viewer.sources.subrows import RawLines

__all__ = ["FORMAT", "detect", "expand", "read_row", "summarize"]

CONTEXT = -100  # Atropos' (and PyTorch's) ignore index: a position with no loss
GROUP = "atropos_group"  # the key under which expand() puts what a rollout knows of its group
# Per-sequence fields of ScoredDataGroup: each a list of G entries, entry i belongs to sequence i.
PER_SEQUENCE = ("tokens", "masks", "scores", "messages", "advantages", "ref_logprobs", "inference_logprobs",
                "overrides", "distill_token_ids", "distill_logprobs")
GROUP_FIELDS = ("group_overrides", "generation_params")
ROLES = {"agent": "assistant", "environment": "user"}  # an environment's observation answers no tool call
SMALL = 2000  # an extra field shown in the task panel when its JSON is at most this long
_ORIGIN = TurnOrigin(mask_source="record", kind_source="rule")  # every rollout's (frozen: one is shared)
_KEEP = ("tool_calls", "tool_call_id", "name", "reasoning_content")  # message keys kept beside role and content
_JSON = json.JSONEncoder(default=str)  # json.dumps(v, default=str), without building an encoder per call


# --------------------------------------------------------------------------- detection and expansion

def detect(cols: set[str], first: dict[str, Any] | None) -> bool:
    """A group: ``tokens``/``masks``/``scores`` side by side, one entry per sequence, ids in lists."""
    if not {"tokens", "masks", "scores"} <= cols or not isinstance(first, dict):
        return False
    t, m, s = first.get("tokens"), first.get("masks"), first.get("scores")
    if not (isinstance(t, list) and t and isinstance(m, list) and isinstance(s, list) and len(m) == len(s) == len(t)):
        return False
    seq = t[0]
    return isinstance(seq, list) and isinstance(m[0], list) and (not seq or type(seq[0]) is int)


def _group_key(group: dict[str, Any], shared: int) -> str:
    """Short, stable id of a group: the same line always gets it, another group practically never.
    A hash of its scores and token ids (the ``shared`` prefix once), the ids as packed int32 whether the
    line was decoded or its lists parsed from their text (viewer.sources.atropos_lines): one key a group."""
    h = hashlib.sha1(msgspec.json.encode(group.get("scores")))
    h.update(b"s%d:" % shared)
    for j, seq in enumerate(group.get("tokens") or ()):
        if isinstance(seq, list) and (checked := check_ids(seq)).error is None:
            seq = checked.value if isinstance(checked.value, array) else array("i")
        if isinstance(seq, array):
            h.update(b"i%d:" % len(seq))
            h.update(memoryview(seq)[shared if j else 0:])
        else:  # not ids: their JSON
            blob = msgspec.json.encode(seq)
            h.update(b"j%d:" % len(blob))
            h.update(blob)
    return h.hexdigest()[:12]


def _shared_prefix(seqs: list[Any]) -> int:
    """Tokens every sequence of the group starts with (the shared prompt, when there is one)."""
    if seqs and all(isinstance(s, Packed) for s in seqs):  # parsed ids: their bytes compared (C speed)
        packed = [s.tobytes() for s in seqs]
        lo, hi = min(packed), max(packed)  # the common prefix of all is that of the smallest and the largest
        return same_run(lo, hi, min(len(lo), len(hi))) // 4
    lists = [s for s in seqs if isinstance(s, list)]
    if not lists or len(lists) < len(seqs):
        return 0
    n = min(len(s) for s in lists)
    head = lists[0]
    i = min(same_run(head, s, n) for s in lists)  # compared at C speed
    try:  # ints only: then a list's == (which takes an object as equal to itself) is the item's ==
        msgspec.convert(head[:i], list[int])
    except msgspec.ValidationError:  # (a float NaN is not equal to itself): item by item, as ever
        i = 0
    while i < n and all(s[i] == head[i] for s in lists):
        i += 1
    return i


def _context_run(masks: list[Any]) -> int:
    """How many masks at the start are -100 (``==``), by halving the span as above."""
    lo, hi = 0, len(masks)
    while hi - lo > 8:
        mid = (lo + hi) // 2
        if masks[lo:mid].count(CONTEXT) == mid - lo:
            lo = mid
        else:
            hi = mid
    while lo < hi and masks[lo] == CONTEXT:
        lo += 1
    return lo


def expand(group: dict[str, Any], firsts: list[int | None] | None = None) -> list[dict[str, Any]]:
    """The G rollouts of one stored line, each a dict of its own entries plus ``atropos_group``.
    ``firsts``: per sequence, its first trained position where the line's parser found its masks to be
    -100 and then exactly its tokens (:func:`viewer.sources.atropos_lines.group`), else None."""
    tokens = group.get("tokens")
    if not isinstance(tokens, list):
        raise RowReadError(".tokens", f"expected a list of G token-id lists, got {type(tokens).__name__}")
    size = len(tokens)
    shared = _shared_prefix(tokens)
    key = _group_key(group, shared)
    mismatched = [f"{k} has {len(group[k])} entries for {size} sequences" for k in PER_SEQUENCE
                  if isinstance(group.get(k), list) and len(group[k]) != size]
    extras = {k: v for k, v in group.items() if k not in PER_SEQUENCE and k not in GROUP_FIELDS}
    info = {"size": size, "key": key, "scores": group.get("scores"), "shared_prefix": shared,
            "mismatched": mismatched}
    # every sub-row: the per-sequence keys (None where the line has no entry), then the group-wide ones
    base = dict.fromkeys(PER_SEQUENCE) | {k: group.get(k) for k in GROUP_FIELDS}
    columns = [(k, v) for k in PER_SEQUENCE if isinstance(v := group.get(k), list)]
    firsts = firsts if firsts is not None else [None] * size
    out = []
    for i in range(size):
        sub = base.copy()
        for k, v in columns:
            if i < len(v):
                sub[k] = v[i]
        # An environment's own field: a list of G entries is taken as per sequence, anything else per group.
        sub["extra"] = {k: v[i] if isinstance(v, list) and len(v) == size else v
                        for k, v in extras.items()} if extras else {}
        sub[GROUP] = {**info, "index": i} if firsts[i] is None else {**info, "index": i, "first_trained": firsts[i]}
        out.append(sub)
    return out


def expand_line(raw: bytes, spans: Any) -> list[dict[str, Any]] | None:
    """:func:`expand` of a stored line read from its bytes (``RowFormat.lines``): its lists parsed
    straight into packed arrays; None where the row layer must decode it."""
    got = atropos_lines.group(raw, spans)
    return expand(*got) if got is not None else None


# --------------------------------------------------------------------------- one rollout

class _Where:
    """Problem locations that name the group and the sequence (the line number is not known here)."""

    def __init__(self, ref: RowRef, grp: dict[str, Any]):
        self.ref, self.label, self.grp = ref, ref.label, grp

    @property
    def seq(self) -> str:
        grp = self.grp
        return f"(sequence {grp.get('index')} of {grp.get('size')} in group {grp.get('key')})"

    def __call__(self, path: str) -> str:
        return self.ref.where(f"{self.seq} {path}".rstrip())


def _mask_problems(masks: list[Any], ids: list[int], where: _Where) -> list[Problem]:
    """What is odd in a mask the trainer will use as labels: non-integers, labels that are not the token."""
    out = []
    try:
        msgspec.convert(masks, list[int])  # plain ints (not bools), at C speed: the common case
        odd = []
    except msgspec.ValidationError:
        odd = [j for j, m in enumerate(masks) if type(m) is not int]
    if odd:
        out.append(Problem(where.label, where(".masks"), f"{len(odd)} entries are not integers (first: entry "
                                                         f"{odd[0]} = {masks[odd[0]]!r}); counted as trained"))
    # a position is fine when its mask is -100 or its token (never both: the ids are >= 0); counted at C speed
    n = min(len(masks), len(ids))
    fine = masks.count(CONTEXT) if n == len(masks) else masks[:n].count(CONTEXT)
    fine += sum(map(operator.eq, masks, ids))
    other = [] if fine == n else [j for j, (m, t) in enumerate(zip(masks, ids)) if m != CONTEXT and m != t]
    if other:
        j = other[0]
        out.append(Problem(where.label, where(".masks"),
                           f"{len(other)} trained positions hold a label that is not their token (first: position "
                           f"{j}, token {ids[j]}, label {masks[j]!r}): the trainer learns the label", "warning"))
    return out


def _logprobs(value: Any, first: int, n: int, out_mask: list[int], where: _Where, problems: list[Problem]
              ) -> list[float | None]:
    """Output logprobs from ``inference_logprobs`` (aligned with tokens, 1.0 at context positions)."""
    if value is None:
        return []
    if not isinstance(value, list) or len(value) != n:
        got = f"{len(value)} entries" if isinstance(value, list) else type(value).__name__
        problems.append(Problem(where.label, where(".inference_logprobs"),
                                f"expected {n} logprobs (one per token), got {got}; ignored", "warning"))
        return []
    out: list[float | None] = []
    bad = 0
    for m, x in zip(out_mask, value[first:]):
        if not m:  # context: Atropos writes 1.0 there, which is no probability
            out.append(None)
        elif type(x) in (int, float) and not math.isnan(x) and x < 1e-3:
            out.append(float(x))
        else:
            bad += 1
            out.append(None)
    if bad:
        problems.append(Problem(where.label, where(".inference_logprobs"),
                                f"{bad} trained positions have no valid logprob; shown as missing", "warning"))
    return out


def _messages(conv: Any, where: _Where, problems: list[Problem]) -> tuple[list[dict[str, Any]], str | None]:
    """OpenAI-shaped messages, and the rendered text when the environment stored a string instead."""
    if conv is None:
        return [], None
    if isinstance(conv, str):
        return [], conv
    if not isinstance(conv, list):
        problems.append(Problem(where.label, where(".messages"),
                                f"expected a list of messages, got {type(conv).__name__}; not shown", "warning"))
        return [], None
    out = []
    for j, m in enumerate(conv):
        if not isinstance(m, dict) or not isinstance(given := m.get("role"), str):
            problems.append(Problem(where.label, where(f".messages[{j}]"), "not a message with a role; skipped",
                                    "warning"))
            continue
        role = ROLES.get(given, given)
        if role not in ("system", "user", "assistant", "tool"):
            problems.append(Problem(where.label, where(f".messages[{j}].role"),
                                    f"unknown role {given!r}; shown as user", "warning"))
            role = "user"
        content = m.get("content")
        if type(content) is not str:
            content = text_of(content)
        if len(m) > 2:  # the keys kept, in the message's order, then role and content
            msg = {k: v for k, v in m.items() if k in _KEEP}
            msg["role"], msg["content"] = role, content
            out.append(msg)
        else:
            out.append({"role": role, "content": content})
    return out, None


def trains_last_message(conv: Any, t: Turn, where: _Where, problems: list[Problem]) -> None:
    """Warn when the loss is on a message the model did not write.

    ``tokenize_for_trainer`` (last-turn masking, its default) trains every token after the prompt of
    ``chat[:-1]``: whatever the last message is. An environment that appends its next observation before
    tokenising (the Rubik's cube environment does) trains the model on the environment's text."""
    last = conv[-1] if isinstance(conv, list) and conv and isinstance(conv[-1], dict) else None
    role = last.get("role") if last else None
    if role is None or role in ("assistant", "agent") or not t.trained:
        return
    mask = t.mask  # Turn.loss_mask, without building its list where the mask is packed 0/1 over the output
    packed = getattr(mask, "typecode", None) == "b" and len(mask) == len(t.output_ids)
    if not (mask[-1] if packed else t.loss_mask[-1]):
        return
    problems.append(Problem(where.label, where(".masks"),
                            f"the conversation ends with a message of role {role!r} and the sequence's last tokens are "
                            f"trained: with Atropos' last-turn masking the {mask.count(1) if packed else t.trained_tokens} "
                            "trained tokens are that message, not the model's reply", "warning"))


def _split(ids: list[int], masks: list[Any]) -> tuple[int, list[int]]:
    """(index of the first trained token, the 0/1 mask over the output from there)."""
    first = _context_run(masks)
    if first == len(masks):
        first = len(ids)  # (no trained position)
    return first, list(map(operator.ne, masks[first:], repeat(CONTEXT)))  # True/False: 1/0


def _task(row: dict[str, Any], grp: dict[str, Any], text: str | None) -> dict[str, Any]:
    """What the task panel shows: the group, the overrides, the environment's small extra fields."""
    task: dict[str, Any] = {"group": grp.get("key"), "group_size": grp.get("size"), "index_in_group": grp.get("index"),
                            "group_scores": grp.get("scores"), "shared_prefix_tokens": grp.get("shared_prefix")}
    for k in ("overrides", "group_overrides", "generation_params"):
        if row.get(k) is not None:
            task[k] = row[k]
    per_token = [k for k in ("advantages", "ref_logprobs", "distill_token_ids", "distill_logprobs")
                 if row.get(k) is not None]
    big = []
    for k, v in (row.get("extra") or {}).items():
        if v is None or type(v) in (float, bool) or (type(v) is int and v.bit_length() < 6600) \
                or len(_JSON.encode(v)) <= SMALL:  # (such a number's JSON is at most 2000 characters)
            task[k] = v
        else:
            big.append(k)
    if per_token or big:
        task["not_shown"] = per_token + big  # per-token columns the token view has no place for
    if text is not None:
        task["rendered_text"] = text
    return task


def read_row(row: dict[str, Any], ref: RowRef) -> Conversation:
    grp = row.get(GROUP) if isinstance(row.get(GROUP), dict) else {}
    where = _Where(ref, grp)
    problems = [Problem(ref.label, where(""), f"group fields disagree: {m}") for m in grp.get("mismatched") or []]
    raw = row.get("tokens")
    if isinstance(raw, Packed):  # parsed from the line's text: ids in [0, 2**31) (viewer.sources.atropos_lines)
        ids = raw
    elif isinstance(raw, list):
        checked = check_ids(raw)
        if checked.error:
            problems.append(Problem(ref.label, where(".tokens"), checked.error))
        ids = list(checked.value or [])
    else:
        raise ref.error(f"{where.seq} .tokens", f"expected a list of token ids, got {type(raw).__name__}")
    masks = row.get("masks")
    msgs, text = _messages(row.get("messages"), where, problems)
    t = Turn(index=0, call=1, kind="agent", role="main", prompt_source="stored", output_source="stored",
             messages=msgs, origin=_ORIGIN)
    if isinstance(masks, (list, Packed)) and len(masks) == len(raw):
        # -100, then exactly the tokens (the line's parser compared their text): nothing odd, all output trained
        first = grp.get("first_trained") if isinstance(masks, Packed) and ids is raw else None
        if first is not None:
            out_mask = Packed("b", b"\x01" * (len(ids) - first))
        else:
            masks = masks.tolist() if isinstance(masks, Packed) else masks
            problems.extend(_mask_problems(masks, ids, where))
            first, out = _split(ids, masks[:len(ids)])
            out_mask = pack_mask_01(out)
        t.prompt_ids, t.output_ids, t.mask = ids[:first], ids[first:], out_mask
        t.trained = 1 in out_mask
        t.logprobs = _logprobs(row.get("inference_logprobs"), first, len(raw), out_mask, where, problems)
        if not t.trained:
            problems.append(Problem(ref.label, where(".masks"), "every position is -100: nothing in this sequence "
                                                                "is trained; all its tokens are shown as prompt",
                                    "warning"))
    else:  # without a usable mask the prompt/output cut is unknown: every id shown as output, untrained
        got = (f"{len(masks)} entries for {len(raw)} tokens" if isinstance(masks, (list, Packed))
               else type(masks).__name__)
        problems.append(Problem(ref.label, where(".masks"), f"no usable mask ({got}): all ids shown as output, "
                                                            "none marked trained"))
        t.output_ids = ids
    trains_last_message(row.get("messages"), t, where, problems)
    replies = [j for j, m in enumerate(msgs) if m["role"] == "assistant"]
    if replies:  # the conversation as the environment kept it; the ids above are what was trained
        t.messages, t.response = msgs[:replies[-1]], msgs[replies[-1]]
    reward = as_float(row.get("scores"))
    if reward is None:
        problems.append(Problem(ref.label, where(".scores"), f"score {row.get('scores')!r} is not a number"))
    instr = next((m["content"] for m in msgs if m["role"] == "user" and m["content"].strip()), None)
    return Conversation(messages=msgs, model=None, agent=None, task=_task(row, grp, text), instruction=instr,
                        reward=reward, problems=problems, exact_turns=[t])


def _task_label(grp: dict[str, Any]) -> str:
    """The row table's task: the group key first, so sorting by task keeps a group together."""
    i = grp.get("index")
    return f"group {grp.get('key')} ({i + 1 if isinstance(i, int) else '?'} of {grp.get('size')})"


def summarize(row: dict[str, Any]) -> dict[str, Any]:
    grp = row.get(GROUP) if isinstance(row.get(GROUP), dict) else {}
    tokens = row.get("tokens")
    return {"agent": None, "model": None, "task": _task_label(grp),
            "reward": as_float(row.get("scores")), "result": None, "turns": 1,
            "length": len(tokens) if isinstance(tokens, (list, Packed)) else None}


FORMAT = RowFormat("atropos", "Atropos ScoredDataGroup JSONL (one group of G rollouts a line)", detect, read_row,
                   summarize, expand=expand, fields=("tokens", "masks", "scores"),
                   lines=RawLines(atropos_lines.count, expand_line))
