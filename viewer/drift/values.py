"""Drift results as typed values: one ``to_dict()`` each for the JSON the CLI and UI print."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Window", "Classification", "ChangedSpan", "RoundTrip", "RenderComparison", "TemplateCheck",
           "PrefixCheck"]


class _Dict:
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[arg-type]


@dataclass
class Window(_Dict):
    """A slice of a token sequence: ``ids[0]`` sits at index ``start`` of the full sequence."""

    start: int
    ids: list[int]
    pieces: list[str]
    text: str


@dataclass
class Classification(_Dict):
    """Why two sequences diverge. ``a``/``b`` are labelled by the caller (e.g. held / next)."""

    cause: str
    al_class: str
    evidence: str
    common_text: str = ""   # text just before the divergence (shared)
    a_text: str = ""        # text from the divergence on, side a
    b_text: str = ""        # text from the divergence on, side b


@dataclass
class ChangedSpan(_Dict):
    """One group of sampled tokens whose re-encoding differs. Token ranges are [start, end)."""

    start: int
    end: int
    re_start: int
    re_end: int
    sampled_ids: list[int]
    sampled_pieces: list[str]
    reencoded_ids: list[int]
    reencoded_pieces: list[str]
    sampled_logprobs: list[float | None]
    char_start: int
    char_end: int
    cause: str
    al_class: str


@dataclass
class RoundTrip(_Dict):
    """``decode → encode`` of one turn's output ids. ``unchecked`` holds why it could not run."""

    equal: bool | None
    first_mismatch: int | None = None
    n_sampled: int = 0
    n_reencoded: int = 0
    text: str = ""
    reencoded_ids: list[int] = field(default_factory=list)
    changed_spans: list[ChangedSpan] = field(default_factory=list)
    cause: str | None = None
    al_class: str | None = None
    causes: dict[str, int] = field(default_factory=dict)
    unchecked: str | None = None


@dataclass
class RenderComparison(_Dict):
    """One local re-render of a turn's prompt against its recorded prompt ids."""

    variant: str                      # "vllm" (normalised + kwargs) | "plain" (TRL's harness)
    equal: bool | None
    first_mismatch: int | None = None
    rendered_len: int = 0
    stored_window: Window | None = None
    rendered_window: Window | None = None
    classification: Classification | None = None
    error: str | None = None
    rendered_ids: list[int] = field(default_factory=list)

    @property
    def cause(self) -> str | None:
        return self.classification.cause if self.classification else None


@dataclass
class TemplateCheck(_Dict):
    """Type-B check. ``equal``/``first_mismatch``/``cause`` mirror the vLLM-style render."""

    prompt_source: str
    equal: bool | None
    first_mismatch: int | None = None
    cause: str | None = None
    stored_len: int = 0
    vllm: RenderComparison | None = None
    plain: RenderComparison | None = None
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    unchecked: str | None = None


@dataclass
class PrefixCheck(_Dict):
    """Type-C check: does ``nxt.prompt_ids`` extend ``prev.prompt_ids + prev.output_ids``?

    ``divergence`` is a token index into prev prompt+output (== ``matched`` when broken);
    ``tokens_rerendered`` is the held tail that is not a prefix of the next prompt;
    ``in_output`` says the break lies inside the previous turn's sampled output.
    """

    status: str                       # first | clean | broken
    divergence: int | None = None
    matched: int = 0
    held_len: int = 0
    next_len: int = 0
    tokens_rerendered: int = 0
    in_output: bool = False
    cause: str | None = None
    al_class: str | None = None
    classification: Classification | None = None
    held_window: Window | None = None
    next_window: Window | None = None
    unchecked: str | None = None


