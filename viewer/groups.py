"""GRPO groups: rollouts that share a prompt, with the advantage GRPO gives each (issue 38, point 4). No gradio.

A group is found, in this order of evidence, by:

1. a group id the rollout carries (``group``, ``group_id``, ``prompt_id``, ``uid``, ... in its task or summary;
   an Atropos line's G sequences share the key :mod:`viewer.sources.atropos` gives them);
2. the same prompt token ids of its first agent turn;
3. the same prompt text (its first agent turn's messages, else the task's instruction);
4. or, when the caller names ``num_generations`` and rows carry nothing of the above, consecutive blocks of
   that many rows (TRL's ``RepeatSampler`` keeps a prompt's G generations together in the batch).

:func:`advantages` is TRL's ``GRPOTrainer`` group normalisation (``scale_rewards="group"``,
``multi_objective_aggregation="sum_then_normalize"``, TRL 1.16 ``_generate_and_score_completions``):
``(r - nanmean(r)) / (nanstd(r) + 1e-4)`` per group, ``nanstd`` with Bessel's correction (as ``torch.std``),
a missing reward left out of the baseline and given advantage 0, a group of one (std NaN) advantage 0.
A group whose rewards have zero spread (``torch.isclose(std, 0)``) gives every member advantage 0: no
learning signal, flagged. ``tests/oracle/trl_advantages.py`` runs TRL's own lines on the same rewards.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from viewer.rollout import Rollout

__all__ = ["EPS", "GROUP_KEYS", "Member", "Group", "advantages", "group_key", "find_groups", "sibling", "group_table",
           "dataset_groups"]

EPS = 1e-4  # TRL's: advantages / (std + 1e-4)
GROUP_KEYS = ("group", "group_id", "group_idx", "group_uid", "prompt_id", "prompt_uid", "uid")
_ISCLOSE_ATOL = 1e-8  # torch.isclose(std, 0): |std| <= atol + rtol * 0


def _nan(r: Any) -> float:
    return float(r) if isinstance(r, (int, float)) and not isinstance(r, bool) and math.isfinite(r) else math.nan


def _nanmean(xs: list[float]) -> float:
    v = [x for x in xs if not math.isnan(x)]
    return sum(v) / len(v) if v else math.nan


def _nanstd(xs: list[float]) -> float:
    """TRL's ``nanstd``: the non-NaN values' variance with Bessel's correction; NaN below two values."""
    v = [x for x in xs if not math.isnan(x)]
    if len(v) < 2:
        return math.nan
    m = sum(v) / len(v)
    return math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1))


def advantages(rewards: list[Any], eps: float = EPS) -> tuple[list[float], float, float]:
    """(advantage of each reward, group mean, group std) as TRL's GRPOTrainer computes them (module doc)."""
    r = [_nan(x) for x in rewards]
    mean, std = _nanmean(r), (_nanstd(r) if len(r) > 1 else 0.0)
    out = [(x - mean) / (std + eps) for x in r]
    return [0.0 if math.isnan(a) else a for a in out], mean, std


@dataclass(frozen=True)
class Member:
    """One sibling: ``ref`` is where it is read again (a row number, or a capture folder)."""

    ref: Any
    label: str
    reward: float | None
    advantage: float
    length: int  # output tokens over its agent turns (what GRPO's length terms count)
    turns: int
    drift: int | None = None  # drifted turns, when a scan gave them
    text: str = ""  # the tail of its last reply, to tell the siblings apart at a glance


@dataclass(frozen=True)
class Group:
    key: str
    how: str  # "group id" | "prompt ids" | "prompt text" | "num_generations"
    members: tuple[Member, ...]
    mean: float
    std: float
    prompt: str = ""

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def std_zero(self) -> bool:
        """TRL's ``is_std_zero`` (``torch.isclose(std, 0)``; a group of one has std 0 there)."""
        return not math.isnan(self.std) and abs(self.std) <= _ISCLOSE_ATOL

    @property
    def zero_spread(self) -> bool:
        """No learning signal: every reward the same, one member, or under two rewards (std NaN): every
        advantage 0."""
        return self.std_zero or math.isnan(self.std)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "how": self.how, "size": self.size, "mean": _num(self.mean), "std": _num(self.std),
                "zero_spread": self.zero_spread, "prompt": self.prompt,
                "members": [{**m.__dict__, "ref": m.ref if isinstance(m.ref, int) else str(m.ref)}
                            for m in self.members]}


def _num(v: float) -> float | None:
    return None if math.isnan(v) else v


def _first_turn(r: Rollout):
    turns = r.agent_turns
    return turns[0] if turns else None


def _prompt_text(r: Rollout) -> str:
    t = _first_turn(r)
    if t is not None and t.messages:
        return "\n".join(str(m.get("content") or "") for m in t.messages if isinstance(m, dict))
    return r.instruction or ""


def group_key(r: Rollout) -> tuple[str, str] | None:
    """(how, key) of ``r``'s group by the module doc's evidence 1-3, or None when it names no prompt at all."""
    for side in (r.task, r.summary):
        if isinstance(side, dict):
            for k in GROUP_KEYS:
                v = side.get(k)
                if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v) != "":
                    return "group id", f"{k}={v}"
    t = _first_turn(r)
    if t is not None and len(t.prompt_ids):
        h = hashlib.blake2b(",".join(map(str, t.prompt_ids)).encode(), digest_size=6).hexdigest()
        return "prompt ids", f"ids:{h}"
    text = _prompt_text(r)
    if text.strip():
        return "prompt text", "text:" + hashlib.blake2b(text.encode(), digest_size=6).hexdigest()
    return None


def _member(ref: Any, label: str, r: Rollout, adv: float, drift: int | None) -> Member:
    agent = r.agent_turns
    last = agent[-1] if agent else None
    text = ""
    if last is not None:
        text = str(last.response.get("content") or "") if isinstance(getattr(last, "response", None), dict) else ""
        if not text and last.messages:
            text = str(last.messages[-1].get("content") or "") if isinstance(last.messages[-1], dict) else ""
    return Member(ref, label, None if math.isnan(_nan(r.reward)) else r.reward, adv,
                  sum(len(t.output_ids) for t in agent), len(agent), drift, " ".join(text.split())[-240:])


def find_groups(items: Iterable[tuple[Any, str, Rollout]], *, num_generations: int | None = None,
                drift: dict[Any, int] | None = None) -> list[Group]:
    """The groups of ``items`` ((ref, label, rollout) in dataset order), in order of first appearance.
    ``num_generations``: blocks of that many consecutive rows for rollouts
    without a group id (a TRL batch dumped as rows). ``drift``: ref → drifted turns, shown per member."""
    listed = list(items)
    keyed: dict[tuple[str, str], list[int]] = {}
    for i, (_ref, _label, r) in enumerate(listed):
        found = group_key(r)
        if num_generations and (found is None or found[0] != "group id"):
            found = ("num_generations", f"block {i // int(num_generations)}")
        if found is None:
            found = ("alone", f"row {i}")
        keyed.setdefault(found, []).append(i)
    out = []
    for (how, key), idx in keyed.items():
        rs = [listed[i][2].reward for i in idx]
        adv, mean, std = advantages(rs)
        members = tuple(_member(listed[i][0], listed[i][1], listed[i][2], a, (drift or {}).get(listed[i][0]))
                        for i, a in zip(idx, adv))
        prompt = " ".join(_prompt_text(listed[idx[0]][2]).split())[:200]
        out.append(Group(key, how, members, mean, std, prompt))
    return out


def sibling(group: Group, ref: Any, step: int) -> Member | None:
    """The member ``step`` places after (negative: before) ``ref`` in ``group``, wrapping round; None when
    ``ref`` is not in it."""
    refs = [m.ref for m in group.members]
    if ref not in refs:
        return None
    return group.members[(refs.index(ref) + step) % len(refs)]


def group_table(groups: list[Group]) -> list[dict[str, Any]]:
    """One plain row per group (the Groups view's table)."""
    rows = []
    for n, g in enumerate(groups):
        lengths = [m.length for m in g.members]
        drifts = [m.drift for m in g.members if m.drift is not None]
        rows.append({"group": n, "key": g.key, "found by": g.how, "size": g.size,
                     "mean reward": None if math.isnan(g.mean) else round(g.mean, 4),
                     "std": None if math.isnan(g.std) else round(g.std, 4),
                     "signal": "ZERO SPREAD" if g.zero_spread else "",
                     "mean length": round(sum(lengths) / len(lengths), 1) if lengths else None,
                     "drifted turns": sum(drifts) if drifts else None})
    return rows


def dataset_groups(src: Any, *, num_generations: int | None = None, limit: int | None = None,
                   progress: Callable[[int, int], None] | None = None) -> tuple[list[Group], list[str]]:
    """The groups of an opened dataset: a :class:`viewer.sources.DatasetSource` (its rows; the newest of each
    when it keeps versions) or a :class:`viewer.capture_set.CaptureSet` (its rollouts, their drift known).
    Members' ``ref`` is the row number the dataset reopens them by. At most ``limit`` rows are read; rows
    that cannot be read are named in the second value, never grouped."""
    from viewer.sources import SourceError

    capture_set = hasattr(src, "folders")
    if capture_set:
        rows = list(range(len(src.folders)))
        drift = {r["row"]: r["drifted turns"] for r in src.rows}
    elif src.is_capture:
        rows, drift = [0], {}
    else:
        vis = src.visible_rows()
        rows, drift = (vis if vis is not None else list(range(len(src.dataset)))), {}
    if limit is not None:
        rows = rows[:limit]
    items, errors = [], []
    for n, row in enumerate(rows):
        try:
            r = src.rollout(row) if not getattr(src, "is_capture", False) or capture_set else src.rollout()
        except SourceError as e:
            errors.append(e.message)
            continue
        label = src.rows[row]["rollout"] if capture_set else f"row {row}"
        items.append((row, label, r))
        if progress is not None:
            progress(n + 1, len(rows))
    return find_groups(items, num_generations=num_generations, drift=drift), errors
