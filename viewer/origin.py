"""Where a Rollout / Turn came from and how its fields were decided: typed, validated values.

Readers in ``viewer.sources`` record provenance here (which file and record a call was read
from, who decided its kind and its loss mask, how a dataset row's token view was made);
``viewer.turns``, the analyses, the CLIs and the UI read it. Each closed set of values is a
``Literal`` defined once below; constructing a value with a wrong type or an unknown value
raises at once, naming the field (a reader bug never becomes a silently odd label).

The values are frozen: a reader that decides something later writes
``t.origin = t.origin.replace(mask_source="rule")`` (validated again). There is no free-form
bag: the record's own open-ended objects (``metadata``, the response's ``usage``) are not
copied, as nothing reads them (the source file stays the truth).
"""
from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, Literal, get_args

__all__ = ["MaskSource", "KindSource", "LogprobsFrom", "TokenView", "MatchedBy", "RenderPart", "MASK_SOURCES",
           "KIND_SOURCES", "TOKEN_VIEWS", "RenderDiff", "DerivedCheck", "TurnOrigin", "RolloutOrigin", "NO_ORIGIN"]

# Who decided a turn's loss mask: record (the trace record's mask), turns_file (turns.json's mask
# or trained flag), absent_from_turns_file (the trace has the call, turns.json does not list it:
# untrained), rule (the upstream rule, viewer.turns.derive_training), derived (our own
# construction for a row: every reply token trainable). None: not decided yet.
MaskSource = Literal["record", "turns_file", "absent_from_turns_file", "rule", "derived"]
# Who decided a turn's kind/role: record (the record labels it), rule (system prompt + tools,
# viewer.turns.classify_calls), turns_file (an entry with no trace call: an agent turn).
KindSource = Literal["record", "rule", "turns_file"]
# Where a trace record's logprobs were read from (TRL reads only per_token_logps).
LogprobsFrom = Literal["per_token_logps", "logprobs"]
# How a row's token view was made: exact (the row's own ids), derived (rendered through a chat
# template), mixed (exact where the row has ids), none (no tokenizer to derive with).
TokenView = Literal["exact", "derived", "mixed", "none"]
# How a turns.json entry found its trace call: its call / turn field, equal output ids, or order.
MatchedBy = Literal["call", "turn", "output ids", "order"]
RenderPart = Literal["prompt", "reply"]

MASK_SOURCES: tuple[str, ...] = get_args(MaskSource)
KIND_SOURCES: tuple[str, ...] = get_args(KindSource)
TOKEN_VIEWS: tuple[str, ...] = get_args(TokenView)


class _Checked:
    """Validates every field against its annotation when constructed (and so on ``replace``)."""

    def __post_init__(self) -> None:
        d = self.__dict__
        for name, want, ok in _hints(type(self)):
            if not ok(d[name]):
                raise _fail(f"{type(self).__name__}.{name}", d[name], want)

    def replace(self, **changes: Any):
        """A copy with ``changes`` applied, validated like a new value."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    @property
    def nbytes(self) -> int:
        """Approximate bytes held (what a byte-bounded cache weighs a rollout by)."""
        return 56 + 8 * len(_hints(type(self))) + sum(_size(getattr(self, n)) for n, _, _ in _hints(type(self)))


@dataclass(frozen=True)
class RenderDiff(_Checked):
    """Where a later turn's prompt stops repeating what this turn generated (``part`` position)."""

    part: RenderPart
    position: int
    generated: str | None = None  # decoded ids from there, as generated
    later: str | None = None      # ... and as the later prompt has them


@dataclass(frozen=True)
class DerivedCheck(_Checked):
    """The checks of a derived turn (viewer.sources.derive): is its prompt a prefix of prompt+reply
    (else ``prefix_break``), and does the next turn's prompt contain it as generated."""

    prompt_is_prefix: bool
    prefix_break: int | None = None
    next_prompt_extends: bool | None = None  # None: last turn, or a neighbour failed to render
    later_render_differs_at: RenderDiff | None = None


@dataclass(frozen=True)
class TurnOrigin(_Checked):
    """One call's provenance: where it was read and who decided its kind and mask."""

    file: str | None = None            # label of the trace / turns file it was read from
    record: int | None = None          # its record's index in the trace file
    turns_entry: int | None = None     # the turns.json entry applied to it
    matched_by: MatchedBy | None = None
    model: str | None = None           # the call's model (request, else response, else metadata)
    kind_source: KindSource | None = None
    kind_label: str | None = None      # the record's own kind label, as written
    mask_source: MaskSource | None = None
    logprobs_from: LogprobsFrom | None = None
    message_index: int | None = None   # row formats: the reply's index in the conversation
    step: int | None = None            # ATIF: index in steps[]
    literal_step: int | None = None    # Harbor: index in the row's per-turn token columns
    rerender_error: str | None = None  # the chat template failed to render its prompt
    derived: DerivedCheck | None = None


@dataclass(frozen=True)
class RolloutOrigin(_Checked):
    """A rollout's provenance: its files or dataset row, and how its token view was made."""

    files: tuple[str, ...] = ()         # capture files read, in reading order
    fetched_to: str | None = None       # hf:// captures: the local folder they were fetched to
    dataset: str | None = None          # row datasets: the dataset's label ...
    row: int | None = None              # ... the row shown ...
    alternatives: tuple[str, ...] = ()  # ... and other formats whose fields the rows also match
    row_note: str | None = None         # why this row was chosen when none was asked for
    agent: str | None = None            # the agent harness a row names (e.g. opencode)
    token_view: TokenView | None = None
    tokenizer: str | None = None        # the tokenizer a derived view was rendered with
    tokenizer_note: str | None = None   # why that one (shown next to the view)
    # the derived view was rendered with a stand-in (the bundled Qwen3), not the rollout's own model:
    # what its template does (Qwen3's think handling) is not the rollout's drift (viewer.drift.scan)
    tokenizer_stand_in: bool = False
    session_id: str | None = None       # opencode export rows: the session ...
    batch_id: int | None = None         # ... the export batch ...
    exported_at: str | None = None      # ... and when (ISO-8601)
    this_call_turn: int | None = None   # agentcap: the turn this row's captured call is


def _hints(cls: type) -> tuple[tuple[str, Any, Callable[[Any], bool]], ...]:
    """(field, resolved annotation, compiled check) of ``cls``, worked out once per class."""
    got = _HINTS.get(cls)
    if got is None:
        ann = typing.get_type_hints(cls)
        got = _HINTS[cls] = tuple((f.name, ann[f.name], _compile(ann[f.name])) for f in dataclasses.fields(cls))
    return got


_HINTS: dict[type, tuple[tuple[str, Any, Callable[[Any], bool]], ...]] = {}


def _size(v: Any) -> int:
    if isinstance(v, str):
        return 49 + len(v)
    if isinstance(v, tuple):
        return 56 + sum(_size(x) for x in v)
    if isinstance(v, _Checked):
        return v.nbytes
    return 0  # small ints, bools and None are shared objects


def _compile(want: Any) -> Callable[[Any], bool]:
    """A fast membership test for the annotation shapes used here (unions, Literal, tuple[X, ...])."""
    origin = typing.get_origin(want)
    if origin is typing.Union or origin is types.UnionType:
        args = get_args(want)
        if len(args) == 2 and type(None) in args:  # X | None: the common case, kept cheap
            inner = _compile(next(a for a in args if a is not type(None)))
            return lambda v: v is None or inner(v)
        parts = [_compile(a) for a in args]
        return lambda v: any(p(v) for p in parts)
    if origin is Literal:
        allowed = frozenset(get_args(want))
        return lambda v: isinstance(v, str) and v in allowed
    if origin is tuple:
        item = _compile(get_args(want)[0])
        return lambda v: isinstance(v, tuple) and all(item(x) for x in v)
    if want is type(None):
        return lambda v: v is None
    if want in (int, bool, str):
        return lambda v: type(v) is want  # exactly: a bool is not an int here
    return lambda v: isinstance(v, want)


def _fail(where: str, value: Any, want: Any) -> Exception:
    """ValueError for a string outside a closed set, TypeError for a value of the wrong type."""
    args = get_args(want) if typing.get_origin(want) in (typing.Union, types.UnionType) else (want,)
    closed = isinstance(value, str) and any(typing.get_origin(a) is Literal for a in args)
    return (ValueError if closed else TypeError)(f"{where}: {value!r} is not {_describe(want)}")


def _describe(want: Any) -> str:
    origin = typing.get_origin(want)
    if origin is typing.Union or origin is types.UnionType:
        return " or ".join(_describe(a) for a in get_args(want))
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(want))
    if origin is tuple:
        return f"a tuple of {_describe(get_args(want)[0])}"
    if want is type(None):
        return "None"
    name = getattr(want, "__name__", str(want))
    return f"{'an' if name[0] in 'aeiouAEIOU' else 'a'} {name}"


NO_ORIGIN = TurnOrigin()  # the default of every Turn: nothing recorded yet (made once the checks exist)
