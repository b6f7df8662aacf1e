"""The Groups screen (issue 38, point 4): the GRPO groups of the dataset open on the Datasets tab, siblings side
by side, and ◀ ▶ under the token view to walk a group's siblings.

Thin: :func:`viewer.groups.dataset_groups` finds the groups and their advantages, :mod:`viewer.render.groups`
builds the HTML, and a sibling opens through the Datasets tab's own row opener (``DatasetHandlers.open_row``),
so it lands on the Tokens tab exactly as a click on the Datasets table does.
"""
from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import pandas as pd

from .. import render
from ..groups import group_table
from ..render.groups import group_siblings_html, group_summary_html, sibling_walk_html
from ..sources.shown import shown_path

__all__ = ["build", "walker", "GroupsHeld", "Walk", "GroupHandlers", "GROUP_COLUMNS", "MEMBER_COLUMNS"]

GROUP_COLUMNS = ["group", "key", "found by", "size", "mean reward", "std", "signal", "mean length", "drifted turns"]
MEMBER_COLUMNS = ["sibling", "rollout", "row", "reward", "advantage", "length", "turns", "drifted turns"]


class GroupsHeld:
    """A session's groups (its ``gr.State`` value): of which opened dataset (``held``), and the groups found."""

    __slots__ = ("held", "groups", "errors")

    def __init__(self, held, groups, errors):
        self.held, self.groups, self.errors = held, groups, errors

    def __deepcopy__(self, memo: dict) -> "GroupsHeld":
        return self  # held, not copied per event (as the Datasets tab's SessionDataset)


class Walk(GroupsHeld):
    """Which sibling of which group the token view shows (the walker's State)."""

    __slots__ = ("gi", "mi", "key")

    def __init__(self, gh: GroupsHeld, gi: int, mi: int):
        super().__init__(gh.held, gh.groups, gh.errors)
        self.gi, self.mi, self.key = gi, mi, None  # key: the store key of the sibling opened (set once it is)


def walker() -> SimpleNamespace:
    """The sibling walker's components, placed where this is called (under the token view); hidden until a
    sibling is opened from the Groups screen."""
    state = gr.State(None)
    with gr.Row(visible=False, equal_height=True, elem_id="grp-walker") as row:
        prev_btn = gr.Button("◀ sibling", size="sm", elem_id="grp-prev", scale=0, min_width=100)
        line = gr.HTML("", elem_id="grp-walk-line")
        next_btn = gr.Button("sibling ▶", size="sm", elem_id="grp-next", scale=0, min_width=100)
    return SimpleNamespace(state=state, row=row, prev_btn=prev_btn, line=line, next_btn=next_btn)


def build(settings, store, browse, ds, walk: SimpleNamespace) -> None:
    """Create this screen's components inside the current gr.Tab and wire them (``ds``: the Datasets tab's
    widgets and handlers, whose opened dataset this screen groups)."""
    held = gr.State(None)
    with gr.Row(equal_height=True):
        find = gr.Button("Find groups", variant="primary", elem_id="grp-find", scale=0, min_width=140)
        gens = gr.Number(value=0, precision=0, minimum=0, label="num_generations (0: by group id, else prompt)",
                         elem_id="grp-gens", scale=1, min_width=160)
        flat = gr.Checkbox(label="zero-spread groups only", elem_id="grp-flat", scale=1, min_width=160)
    summary = gr.HTML(render.notice_html("Open a dataset on the Datasets tab, then Find groups."),
                      elem_id="grp-summary")
    table = gr.Dataframe(headers=GROUP_COLUMNS, interactive=False, elem_id="grp-table", max_height=300, wrap=False)
    siblings = gr.HTML(group_siblings_html(None), elem_id="grp-siblings")
    members = gr.Dataframe(headers=MEMBER_COLUMNS, interactive=False, elem_id="grp-members", max_height=300)
    chosen = gr.State(None)  # the group on screen (its number)
    h = GroupHandlers(settings, store, browse, ds)
    find.click(h.on_find, [ds.widgets.key, gens, flat], [held, summary, table, siblings, members, chosen],
               api_name="groups_find", concurrency_id="long-work", concurrency_limit=1)
    flat.input(h.on_flat, [held, flat], table, api_name="groups_flat", api_visibility="private")
    table.select(h.on_group, [held], [siblings, members, chosen], api_name="groups_pick", api_visibility="private")
    opened = list(browse.outputs) + [browse.tabs, ds.widgets.status, walk.state, walk.row, walk.line]
    members.select(h.on_member, [held, chosen, browse.view], opened, api_name="groups_open", api_visibility="private",
                   **browse.shows)
    walk.prev_btn.click(h.on_prev, [walk.state, browse.view], opened, api_name="groups_prev", **browse.shows)
    walk.next_btn.click(h.on_next, [walk.state, browse.view], opened, api_name="groups_next", **browse.shows)
    # another rollout opened (a path, a sample, a link): the walker goes, it would name a group that is not on screen
    browse.key.change(h.on_key, [browse.key, walk.state], walk.row, api_name="groups_follow", api_visibility="private",
                      show_progress="hidden", queue=False)


class GroupHandlers:
    """What the screen's events do; the opened-sibling handlers answer ``browse.outputs``, the tabs, the
    Datasets status line and the walker's State, row and line."""

    def __init__(self, settings, store, browse, ds):
        self.settings, self.store, self.browse, self.ds = settings, store, browse, ds

    def on_find(self, k, gens, flat_only, progress=gr.Progress()) -> list:
        from ..groups import dataset_groups

        src = getattr(k, "src", None)
        if src is None:
            return [gr.skip(), render.notice_html("Open a dataset on the Datasets tab first.", "error")] + \
                [gr.skip()] * 4
        lim = self.settings.limits().rows_scanned or None  # a public app reads at most its rows budget

        def prog(done: int, total: int) -> None:
            progress((done, total), desc="reading rollouts", unit="rollouts")

        g = _int(gens)  # 0, blank or not a whole number: by group id / prompt
        groups, errors = dataset_groups(src, num_generations=g if g and g > 0 else None, limit=lim, progress=prog)
        gh = GroupsHeld(k, groups, errors)
        return [gh, group_summary_html(groups, errors, shown_path(src.label, self.settings)),
                self.table(gh, flat_only), group_siblings_html(None), pd.DataFrame(columns=MEMBER_COLUMNS), None]

    @staticmethod
    def table(gh: GroupsHeld | None, flat_only: bool = False) -> pd.DataFrame:
        rows = group_table(gh.groups) if gh is not None else []
        return pd.DataFrame([r for r in rows if not flat_only or r["signal"]], columns=GROUP_COLUMNS)

    def on_flat(self, gh, flat_only) -> pd.DataFrame:
        return self.table(gh if isinstance(gh, GroupsHeld) else None, flat_only)

    def on_group(self, gh, evt: gr.SelectData) -> list:
        row = evt.row_value if evt is not None else None
        gi = _int(row[0]) if row else None
        if not isinstance(gh, GroupsHeld) or gi is None or not 0 <= gi < len(gh.groups):
            return [gr.skip()] * 3
        return self.group_values(gh, gi)

    @staticmethod
    def group_values(gh: GroupsHeld, gi: int) -> list:
        """[siblings HTML, members table, chosen group] for group ``gi``."""
        g = gh.groups[gi]
        rows = [{"sibling": i + 1, "rollout": m.label, "row": m.ref,
                 "reward": None if m.reward is None else round(m.reward, 4),
                 "advantage": round(m.advantage, 4), "length": m.length, "turns": m.turns,
                 "drifted turns": m.drift} for i, m in enumerate(g.members)]
        return [group_siblings_html(g, gi), pd.DataFrame(rows, columns=MEMBER_COLUMNS), gi]

    def on_member(self, gh, gi, view, evt: gr.SelectData) -> list:
        row = evt.row_value if evt is not None else None
        gi, n = _int(gi), (_int(row[0]) if row else None)
        if not isinstance(gh, GroupsHeld) or gi is None or n is None or not 0 <= gi < len(gh.groups):
            return self._skip()
        return self.open_sibling(Walk(gh, gi, n - 1), view)

    def on_prev(self, walk, view) -> list:
        return self._step(walk, -1, view)

    def on_next(self, walk, view) -> list:
        return self._step(walk, +1, view)

    def _step(self, walk, step: int, view) -> list:
        if not isinstance(walk, Walk):
            return self._skip()
        n = walk.groups[walk.gi].size
        return self.open_sibling(Walk(walk, walk.gi, (walk.mi + step) % n), view)

    def open_sibling(self, walk: Walk, view) -> list:
        """Sibling ``walk.mi`` of group ``walk.gi`` on the Tokens tab, the walker shown and pointing at it."""
        g = walk.groups[walk.gi]
        if not 0 <= walk.mi < g.size:
            return self._skip()
        out = self.ds.handlers.open_row(walk.held, g.members[walk.mi].ref, view)
        key = getattr(self.browse, "key", None)  # (a test's stand-in browse has none)
        if key is not None and key in self.browse.outputs:
            walk.key = out[self.browse.outputs.index(key)]
        return list(out) + [walk, gr.Row(visible=True), sibling_walk_html(g, walk.mi)]

    @staticmethod
    def on_key(key, walk):
        """The walker stays only while the token view shows the sibling it opened."""
        return gr.Row(visible=isinstance(walk, Walk) and walk.key is not None and walk.key == key)

    def _skip(self) -> list:
        return [gr.skip()] * (len(self.browse.outputs) + 5)


def _int(v) -> int | None:
    """A whole number from an event's value (a number box, a table cell), else None."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(f) if f.is_integer() else None
