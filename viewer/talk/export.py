"""What an offline export holds, as plain values: the rollouts, their turns' token-view payloads,
drift marks, notes, and the steps a talk walks through (docs/TALK.md, "Export").

:func:`viewer.render.export.export_html` turns an :class:`ExportDoc` into the one HTML file
(:func:`export_rollout` and :func:`export_deck` do both steps: the library's ``export``). Every
value here is the one the app shows: the token view's payload is :func:`viewer.render.token_view_payload`
of :func:`viewer.views.turn_view` (the Tokens tab's own), the drift marks are the presenter's
(:func:`viewer.drift.marks.drift_marks`), the notes are ``notes.json`` read by
:mod:`viewer.talk.notes` and checked against the rollout, a deck is :mod:`viewer.talk.deck`'s value.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from viewer.config import SAMPLE_DIR, Settings
from viewer.layout import NOTES, is_capture_dir
from viewer.rollout import Rollout, Turn
from viewer.talk import notes as notes_mod
from viewer.talk.common import MODES, TalkError
from viewer.talk.deck import Deck

__all__ = ["Loaded", "TurnPart", "RolloutPart", "Step", "ExportDoc", "parse_turns", "parse_tok", "load",
           "rollout_part", "rollout_doc", "deck_doc", "export_rollout", "export_deck", "MODES"]

MAX_TURN_SPEC = 200  # characters of a --turns spec
_TOK = re.compile(r"\s*(\d{1,9})\s*(?:-\s*(\d{1,9}))?\s*")


def parse_turns(spec: str | None) -> list[int] | None:
    """``"3,5-7"`` → ``[3, 5, 6, 7]`` (None: every turn). Raises ValueError naming the bad part."""
    if spec is None or not spec.strip():
        return None
    if len(spec) > MAX_TURN_SPEC:
        raise ValueError(f"--turns: over {MAX_TURN_SPEC} characters")
    out: list[int] = []
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(\d{1,9})\s*(?:-\s*(\d{1,9}))?\s*", part)
        if not m:
            raise ValueError(f"--turns: {part.strip()!r:.40} is not a turn or a range of turns (e.g. 3,5-7)")
        a, b = int(m.group(1)), int(m.group(2) or m.group(1))
        if b < a:
            raise ValueError(f"--turns: {part.strip()!r} ends before it starts")
        if b - a > 100_000:
            raise ValueError(f"--turns: {part.strip()!r} spans more than 100,000 turns")
        out += [t for t in range(a, b + 1) if t not in out]
    return out


def parse_tok(spec: str | None) -> tuple[int, int] | None:
    """``"A-B"`` (or ``"A"``) → ``(A, B)``, as a deep link's ``?tok=``; raises ValueError."""
    if spec is None or not spec.strip():
        return None
    m = _TOK.fullmatch(spec)
    if not m:
        raise ValueError(f"--tok: {spec.strip()!r:.40} is not a token range (A-B, e.g. 10-12)")
    a, b = int(m.group(1)), int(m.group(2) or m.group(1))
    if b < a:
        raise ValueError(f"--tok: {spec.strip()!r} ends before it starts")
    return (a, b)


@dataclass
class Loaded:
    """One opened rollout: its tokenizer as the app picks it, the folder its ``notes.json`` lives in
    (a local capture folder, else None), and a rescore of it (adds the Δ mode) when one was run."""

    rollout: Rollout
    choice: Any  # viewer.tokenizer.TokenizerChoice
    table: Any  # viewer.tokenizer.TokenTable or None
    name: str
    folder: Path | None = None
    rescore: Any = None  # viewer.rescore.RescoreResult


@dataclass
class TurnPart:
    index: int
    payload: str  # the token view's JSON (safe_json), exactly the Tokens tab's
    marks: list  # viewer.drift.marks.Mark: the presenter's drift highlights
    marks_note: str
    turn: Turn  # with prompt ids as shown (for the conversation)


@dataclass
class RolloutPart:
    key: str  # "r0", "r1", ... (names the rollout inside the file)
    loaded: Loaded
    turns: dict[int, TurnPart]
    notes: list  # viewer.talk.notes.NoteCheck, every note of notes.json (flagged ones included)
    table: list[dict[str, Any]]  # the turn list (viewer.views.turn_table rows)


@dataclass
class Step:
    """One screen of the file: a turn's tokens, or a static drift / compare report."""

    kind: str  # tokens | drift | compare
    rollout: str  # RolloutPart.key
    turn: int | None = None
    focus: tuple[int, int] | None = None
    mode: str = "mask"
    title: str = ""
    note: str = ""
    report: Any = None  # drift: viewer.drift.TurnReport
    comparison: Any = None  # compare: viewer.comparison.Comparison
    compare_name: str = ""


@dataclass
class ExportDoc:
    title: str
    rollouts: list[RolloutPart] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    present: bool = False
    deck: bool = False
    start: int = 0  # the step the file opens on


def _samples() -> list[str]:
    return sorted(p.name for p in SAMPLE_DIR.iterdir() if is_capture_dir(p)) if SAMPLE_DIR.is_dir() else []


def load(source: str, settings: Settings, *, row: int | None = None, tokenizer: str | None = None,
         confined: bool = False) -> Loaded:
    """Open ``source``: ``sample:NAME``, a path (inside the data root when ``confined``, as a deck's
    steps and links are; any local path from the command line), or ``hf://...``."""
    from viewer.sources import load_source
    from viewer.tokenizer import token_table, tokenizer_for

    if source.startswith("sample:"):
        name = source.split(":", 1)[1]
        if name not in _samples():
            raise ValueError(f"source: no bundled sample named {name!r}")
        path: Path | str = SAMPLE_DIR / name
    elif confined:
        from viewer.visitor import source as check_source

        src = check_source(source, settings, _samples())
        path = src.path if src.path is not None else src.text
    else:
        path = Path(source) if not source.startswith("hf://") else source
    ro = load_source(path, settings, row=row)
    choice = tokenizer_for(ro, settings, tokenizer)
    table = token_table(choice.tokenizer, choice.name) if choice.tokenizer is not None else None
    folder = Path(path) if isinstance(path, Path) and Path(path).is_dir() and row is None else None
    name = Path(str(ro.source or path)).name or str(path)
    return Loaded(ro, choice, table, name + (f" row {row}" if row is not None else ""), folder)


def _notes(ld: Loaded, ids: dict[int, Sequence[int]]) -> list:
    """notes.json beside a capture folder, checked against the rollout (flagged notes kept)."""
    if ld.folder is None or not (ld.folder / NOTES).is_file():
        return []
    try:
        notes = notes_mod.parse((ld.folder / NOTES).read_bytes(), str(ld.folder / NOTES))
    except TalkError as e:
        raise ValueError(str(e)) from None
    return notes_mod.check(notes, ids)


def _turn_part(ld: Loaded, index: int, settings: Settings, mode: str = "mask") -> TurnPart:
    from viewer import render
    from viewer.drift import turn_report
    from viewer.drift.marks import drift_marks
    from viewer.views import turn_view

    tv = turn_view(ld.rollout, index, ld.choice.tokenizer, ld.table)
    delta = render.turn_delta(ld.rescore, index, tv.tokens.prompt_len, len(tv.tokens.ids))
    payload = render.token_view_payload(tv.turn, tv.tokens, render.ViewOptions.from_settings(
        settings, mode=mode, note=tv.note), delta=delta)  # no link: a file:// address opens nothing
    marks, note = [], ""
    if ld.choice.tokenizer is None:
        note = "no tokenizer: drift checks need one"
    else:
        try:  # the presenter's marks (viewer/ui/presenter.py); a check failing on odd data is said, not fatal
            marks = drift_marks(turn_report(ld.rollout, index, ld.choice.tokenizer, plain=False))
        except Exception as e:  # noqa: BLE001  (said in the file: the presenter's bar shows it)
            note = f"drift checks failed: {type(e).__name__}: {e}"
    return TurnPart(index, payload, marks, note, tv.turn)


def rollout_part(key: str, ld: Loaded, settings: Settings, turns: Sequence[int] | None,
                 mode: str = "mask") -> RolloutPart:
    """The rollout's turns ``turns`` (None: all) with their payloads, marks and notes. Raises
    ValueError naming a turn the rollout lacks."""
    from viewer.views import turn_table

    have = [t.index for t in ld.rollout.turns]
    want = have if turns is None else list(turns)
    missing = [t for t in want if t not in have]
    if missing:
        span = f"turns {have[0]}–{have[-1]}" if have else "no turns"
        raise ValueError(f"--turns: turn {missing[0]} is not in this rollout ({span})")
    parts = {t: _turn_part(ld, t, settings, mode) for t in want}  # a step's range is set by the page
    ids = {t.index: list(t.prompt_ids) + list(t.output_ids) for t in ld.rollout.turns}
    for t, p in parts.items():  # the view's own ids (prompt ids re-rendered where none were recorded)
        ids[t] = list(p.turn.prompt_ids) + list(p.turn.output_ids)
    df = turn_table(ld.rollout, low=settings.low_logprob)
    return RolloutPart(key, ld, parts, _notes(ld, ids), df.to_dict("records"))


def _start(ld: Loaded, order: Sequence[int]) -> int:
    """The step a whole rollout opens on, as the app opens it: its first trained agent turn, else its
    first agent turn, else the first."""
    by = {t.index: t for t in ld.rollout.turns}
    for pick in (lambda t: t.kind == "agent" and t.trained, lambda t: t.kind == "agent"):
        k = next((k for k, i in enumerate(order) if pick(by[i])), None)
        if k is not None:
            return k
    return 0


def rollout_doc(ld: Loaded, settings: Settings, *, turns: Sequence[int] | None = None,
                tok: tuple[int, int] | None = None, mode: str = "mask", present: bool = False) -> ExportDoc:
    """One rollout: a step per exported turn; the file opens on the first of ``turns`` (all turns: the
    turn the app opens on), with ``tok`` selected there (as ``?tok=``)."""
    if mode not in MODES:
        raise ValueError(f"--mode: expected one of {', '.join(MODES)}, got {mode!r:.40}")
    if mode == "delta" and ld.rescore is None:
        raise ValueError("--mode delta: this rollout has no rescore (run one: --rescore MODEL)")
    order = turns if turns is not None else [t.index for t in ld.rollout.turns]
    if not order:
        raise ValueError("the rollout has no turns to export")
    start = _start(ld, order) if turns is None else 0
    if tok is not None and order[start] in [t.index for t in ld.rollout.turns]:
        first = ld.rollout.turn(order[start])
        n = len(first.prompt_ids) + len(first.output_ids)
        if first.prompt_ids and tok[1] >= n:
            raise ValueError(f"--tok: tokens {tok[0]}–{tok[1]} are past the end of turn {order[start]} ({n:,} tokens)")
    view_mode = "mask" if mode == "drift" else mode
    part = rollout_part("r0", ld, settings, order, view_mode)
    steps = [Step("tokens", "r0", t, tok if k == start else None, mode) for k, t in enumerate(order)]
    return ExportDoc(f"{ld.name} · Rollout Inspector", [part], steps, present=present, start=start)


def deck_doc(deck: Deck, settings: Settings, *, tokenizer: str | None = None) -> ExportDoc:
    """Every step of ``deck``: its rollout, turn, range and mode; drift and compare steps as their
    static reports. Sources are checked as a link's ``?source=`` is (a sample, the data root, the Hub)."""
    from viewer.comparison import compare
    from viewer.drift import turn_report

    opened: dict[tuple[str, int | None], Loaded] = {}
    want: dict[tuple[str, int | None], dict[int, tuple[int, int] | None]] = {}

    def get(src: str, row: int | None, where: str) -> Loaded:
        k = (src, row)
        if k not in opened:
            try:
                opened[k] = load(src, settings, row=row, tokenizer=tokenizer, confined=True)
            except (ValueError, OSError) as e:
                raise ValueError(f"{where}: {e}") from None
        return opened[k]

    steps: list[Step] = []
    keys: dict[tuple[str, int | None], str] = {}
    for n, s in enumerate(deck.steps):
        where = f"deck step {n + 1}"
        ld = get(s.source, s.row, where)
        k = keys.setdefault((s.source, s.row), f"r{len(keys)}")
        turns = [t.index for t in ld.rollout.turns]
        turn = s.turn if s.turn is not None else (turns[0] if turns else None)
        if s.view != "compare" and turn not in turns:
            raise ValueError(f"{where}: turn {turn} is not in {ld.name}")
        step = Step(s.view, k, turn, s.tok, s.mode, s.title, s.note)
        if s.view == "drift":
            step.report = turn_report(ld.rollout, turn, ld.choice.tokenizer, tokenizer_name=ld.choice.name)
        elif s.view == "compare":
            other = get(s.compare, s.compare_row, where)
            step.comparison = compare(ld.rollout, other.rollout, tok_a=ld.choice.tokenizer,
                                      tok_b=other.choice.tokenizer, table_a=ld.table, table_b=other.table)
            step.compare_name = other.name
        else:
            want.setdefault((s.source, s.row), {}).setdefault(turn, None)
        steps.append(step)
    parts = []
    for src_row, key in keys.items():
        ld = opened[src_row]
        parts.append(rollout_part(key, ld, settings, sorted(want.get(src_row, {})) or [], "mask"))
    return ExportDoc(f"{deck.title or 'Deck'} · Rollout Inspector", parts, steps, deck=True)


def export_rollout(source: str | Path, settings: Settings | None = None, *, row: int | None = None,
                   tokenizer: str | None = None, turns: Sequence[int] | None = None,
                   tok: tuple[int, int] | None = None, mode: str = "mask", present: bool = False) -> str:
    """One rollout as the text of one HTML file that opens offline (``export SOURCE -o FILE.html``).

    ``source``: a capture folder, a trace / turns / dataset file (``row``: which row), ``sample:NAME`` or
    ``hf://...``; ``turns`` (default: every turn), ``tok`` (tokens selected in the first) and ``mode`` (the
    colour mode it opens in; ``delta`` needs a rescore, the command's ``--rescore``) as the command's
    options. Raises ValueError naming what is wrong."""
    from viewer.render.export import export_html

    settings = settings or Settings()
    ld = load(str(source), settings, row=row, tokenizer=tokenizer)
    return export_html(rollout_doc(ld, settings, turns=turns, tok=tok, mode=mode, present=present))


def export_deck(deck: str | Path, settings: Settings | None = None, *, tokenizer: str | None = None,
                present: bool = False) -> str:
    """Every step of the deck file ``deck`` (docs/TALK.md) as the text of one offline HTML file
    (``export --deck DECK -o FILE.html``); its sources are read inside ``settings.data_root``.
    Raises ValueError (a :class:`~viewer.talk.common.TalkError` for the deck file itself) naming what is wrong."""
    from viewer.render.export import export_html
    from viewer.talk.deck import parse

    settings = settings or Settings()
    doc = deck_doc(parse(Path(deck).read_bytes(), str(deck)), settings, tokenizer=tokenizer)
    doc.present = present
    return export_html(doc)
