"""The Groups view's HTML (issue 38, point 4): a GRPO group's siblings side by side, and the sibling walker's line.

Plain values in (:class:`viewer.groups.Group`), escaped strings out; classes styled in ``ui/assets/app.css``
(``ri-grp*``). An advantage is coloured by its sign (above or below the group's mean reward).
"""
from __future__ import annotations

import math
from typing import Any

from .escape import esc, fmt, kv, notice_html

__all__ = ["group_summary_html", "group_siblings_html", "sibling_walk_html"]


def group_summary_html(groups: list[Any], errors: list[str], source: str) -> str:
    """The line over the groups table: how many, found how, how many carry no learning signal."""
    if not groups:
        return notice_html(f"{source}: no rollouts to group." + (f" {len(errors)} unreadable." if errors else ""),
                           "error" if errors else "info")
    hows: dict[str, int] = {}
    for g in groups:
        hows[g.how] = hows.get(g.how, 0) + 1
    flat = sum(1 for g in groups if g.zero_spread)
    parts = [kv("source", source), kv("groups", len(groups)), kv("rollouts", sum(g.size for g in groups)),
             kv("found by", ", ".join(f"{h} ({n})" for h, n in hows.items())),
             kv("zero spread", f"{flat} (no learning signal)", "ri-grp-flat" if flat else "")]
    note = ("Advantage = (reward − group mean) / (group std + 1e-4), std unbiased, as TRL's GRPOTrainer computes "
            "it (scale_rewards=\"group\"). Click a group to see its siblings; click a sibling to open it, then "
            "◀ ▶ under the token view walk its group.")
    bad = f'<div class="ri-warn">{esc(len(errors))} unreadable: {esc("; ".join(errors[:3]))}</div>' if errors else ""
    return f'<div class="ri-ds"><div class="ri-kvs">{"".join(parts)}</div><div class="ri-note">{esc(note)}</div>{bad}</div>'


def _adv_class(a: float) -> str:
    return "ri-grp-pos" if a > 0 else ("ri-grp-neg" if a < 0 else "ri-grp-zero")


def group_siblings_html(group: Any, number: int | None = None) -> str:
    """One card per sibling, side by side: reward, advantage, length, turns, drift, its last reply's tail."""
    if group is None:
        return notice_html("Find groups, then click one to see its siblings side by side.")
    head = [kv("group", number if number is not None else group.key), kv("key", group.key), kv("found by", group.how),
            kv("size", group.size), kv("mean reward", fmt(None if math.isnan(group.mean) else group.mean, 4)),
            kv("std", fmt(None if math.isnan(group.std) else group.std, 4))]
    flag = ('<div class="ri-warn ri-grp-flag">Zero spread: every sibling gets advantage 0 — this group carries '
            'no learning signal.</div>' if group.zero_spread else "")
    prompt = f'<div class="ri-note ri-grp-prompt">prompt: {esc(group.prompt)}</div>' if group.prompt else ""
    cards = []
    for i, m in enumerate(group.members):
        cards.append(
            f'<div class="ri-grp-card {_adv_class(m.advantage)}" data-ref="{esc(m.ref)}">'
            f'<div class="ri-grp-name">{esc(i + 1)}. {esc(m.label)}</div>'
            f'<div class="ri-kvs">{kv("reward", fmt(m.reward, 4), "ri-reward")}'
            f'{kv("advantage", f"{m.advantage:+.4f}")}{kv("length", m.length)}{kv("turns", m.turns)}'
            f'{kv("drifted turns", "—" if m.drift is None else m.drift)}</div>'
            f'<div class="ri-grp-text">{esc(m.text) if m.text else "<i>(no reply text stored)</i>"}</div></div>')
    return (f'<div class="ri-grp"><div class="ri-kvs">{"".join(head)}</div>{flag}{prompt}'
            f'<div class="ri-grp-cards">{"".join(cards)}</div></div>')


def sibling_walk_html(group: Any, index: int) -> str:
    """The walker's line under the token view: which sibling of which group is open."""
    if group is None or not 0 <= index < group.size:
        return ""
    m = group.members[index]
    return (f'<div class="ri-kvs ri-grp-walk">{kv("sibling", f"{index + 1} / {group.size}")}'
            f'{kv("group", group.key)}{kv("reward", fmt(m.reward, 4), "ri-reward")}'
            f'{kv("advantage", f"{m.advantage:+.4f}")}{kv("length", m.length)}'
            f'{"" if not group.zero_spread else kv("zero spread", "no signal", "ri-grp-flat")}</div>')
