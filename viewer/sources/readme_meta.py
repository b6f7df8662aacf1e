"""The ``configs:`` of a Hub dataset card's YAML front matter, read without letting the card cost anything.

A dataset card is the visitor's text. ``yaml.safe_load`` still expands anchors and aliases
("billion laughs": a 477-byte card became a 312 MB string once ``str()`` walked it, issue 26),
and nests as deep as the text does. So the card is parsed with a loader that refuses every
anchor and alias and stops at the ``nesting`` budget (:mod:`viewer.budgets`), the front
matter is size-capped, and only the typed fields the dataset reader uses survive: each
config's ``config_name`` (str), ``default`` (bool) and ``data_files`` (a string, a list of
strings, or a list of ``{split, path}``), names and paths length-capped.
"""
from __future__ import annotations

import re
from typing import Any

from viewer.budgets import Limits

__all__ = ["ReadmeError", "readme_configs", "MAX_FRONT_MATTER", "MAX_NAME", "MAX_ITEMS"]

MAX_FRONT_MATTER = 256 * 1024  # the largest dataset cards on the Hub have front matter of a few KB
MAX_NAME = 1024   # characters of a config name, split name or data-file pattern
MAX_ITEMS = 1000  # configs, and data-file entries of one config


class ReadmeError(ValueError):
    """The card's front matter is refused; the message says why."""


def _loader(limits: Limits):
    import yaml

    limit_depth = int(limits.nesting)

    class NoAliasLoader(yaml.SafeLoader):
        """SafeLoader without anchors and aliases, and with a nesting limit (checked as nodes are composed)."""

        depth = 0

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                ev = self.peek_event()
                raise ReadmeError(f"YAML alias *{ev.anchor} at line {ev.start_mark.line + 1}: "
                                  "anchors and aliases are not accepted in a dataset card")
            ev = self.peek_event()
            if getattr(ev, "anchor", None) is not None:
                raise ReadmeError(f"YAML anchor &{ev.anchor} at line {ev.start_mark.line + 1}: "
                                  "anchors and aliases are not accepted in a dataset card")
            self.depth += 1
            try:
                if limit_depth and self.depth > limit_depth:
                    from viewer.budgets import BudgetExceeded

                    raise BudgetExceeded("nesting", limit_depth, None,
                                         f"YAML front matter at line {ev.start_mark.line + 1}", limits.public)
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return NoAliasLoader


def _name(v: Any) -> str | None:
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        return None
    s = str(v)
    return s if len(s) <= MAX_NAME else None


def _data_files(df: Any) -> Any:
    if isinstance(df, str):
        return _name(df)
    if not isinstance(df, list):
        return None
    out: list[Any] = []
    for item in df[:MAX_ITEMS]:
        if isinstance(item, str) and _name(item) is not None:
            out.append(item)
        elif isinstance(item, dict):
            split = _name(item.get("split", "train"))
            path = item.get("path")
            paths = [path] if isinstance(path, str) else path if isinstance(path, list) else []
            paths = [p for p in paths[:MAX_ITEMS] if isinstance(p, str) and len(p) <= MAX_NAME]
            if split is not None and paths:
                out.append({"split": split, "path": paths})
    return out


def readme_configs(text: str, limits: Limits) -> list[dict[str, Any]]:
    """The typed ``configs:`` of a dataset card (``[]`` when it has none). Raises
    :class:`ReadmeError` for aliases, anchors or oversized front matter, and
    :class:`~viewer.budgets.BudgetExceeded` past the ``nesting`` budget."""
    m = re.match(r"^---\s*\n(.*?)\n---", text, re.S)
    if not m:
        return []
    front = m.group(1)
    if len(front) > MAX_FRONT_MATTER:
        raise ReadmeError(f"front matter is {len(front):,} characters, over {MAX_FRONT_MATTER:,}; not read")
    import yaml

    loader = _loader(limits)(front)
    try:
        meta = loader.get_single_data()
    except yaml.YAMLError:
        return []  # not YAML: the card is ignored, as the Hub does
    except RecursionError:  # the composer recurses 3 frames a level: Python stops a local budget first
        from viewer.budgets import BudgetExceeded

        raise BudgetExceeded("nesting", loader.depth or limits.nesting, None, "YAML front matter",
                             limits.public) from None
    finally:
        loader.dispose()
    configs = meta.get("configs") if isinstance(meta, dict) else None
    if not isinstance(configs, list):
        return []
    out = []
    for c in configs[:MAX_ITEMS]:
        if not isinstance(c, dict):
            continue
        entry: dict[str, Any] = {}
        name = _name(c.get("config_name", "default"))
        if name is None:
            continue
        entry["config_name"] = name
        if c.get("default") is True:
            entry["default"] = True
        df = _data_files(c.get("data_files"))
        if df is not None:
            entry["data_files"] = df
        out.append(entry)
    return out
