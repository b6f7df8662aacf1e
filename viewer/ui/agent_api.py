"""Token evidence for agents (issue 38, point 5): the app's search, summary, turn tokens, drift and lint as
stateless, documented API endpoints, served as MCP tools when the app runs with Gradio's MCP server on.

Each endpoint is a ``gr.api`` (Gradio's public API: its type hints and its docstring's ``Args:`` are the
endpoint's schema, and the MCP tool's), JSON text in the answer (Gradio's MCP server hands a tool's value
over as ``str(value)``: a dict would reach the agent as a Python repr). The work is
:mod:`viewer.search.evidence`'s; what this module adds is the visitor's rules, the same as any screen's:

* a source goes through :func:`viewer.visitor.source` first (a listed bundled sample, a path inside the data
  root, or ``hf://``; never another visitor's upload, never a server path), in a local app too, as the
  Path box does;
* every number is a bounded whole number (:func:`viewer.visitor.bounded_int`), a query bounded text; a
  turn's tokens at most :data:`viewer.search.evidence.MAX_TOKENS` a call, a search at most :data:`MAX_HITS`
  hits (and, in public mode, the search's own bounds: viewer/search/engine.py);
* each call holds one of its visitor's heavy-event slots (:func:`viewer.ui.fair.slot`, the ``session_events``
  budget), waits in the app's bounded queue, and a search shares the Search tab's one long-work lane;
* in public mode, server folders in an answer are shown as a visitor is shown them
  (:func:`viewer.sources.shown.shown_text`), and an answer is within the ``response_mb`` budget.

MCP: ``launch(mcp_server=...)`` (:func:`mcp_on`: the ``mcp`` setting, ``VIEWER_MCP``, ``view --mcp``; else
Gradio's own ``GRADIO_MCP_SERVER``). Gradio's MCP server makes a tool of *every* public endpoint, and this
app's other ones are screen events that hold their state in the page (``gr.State``): to an agent they are
noise that cannot work. :func:`lifespan` (FastAPI's, passed through ``launch(app_kwargs=...)``) keeps the
MCP server's tools to :data:`TOOLS` once the server exists, through the Gradio seam (``mcp_tools``: Gradio
has no public way to choose them; with the seam off every public endpoint is a tool, the five among them);
tests/test_mcp.py lists them with a real client.
Through MCP every agent is one client of the app (Gradio's MCP server calls the app with one
``gradio_client``), so in public mode all of them together hold one visitor's share of heavy events.
"""
from __future__ import annotations

import contextlib
import json
import math
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

import gradio as gr

from ..config import Settings
from ..visitor import bounded_int, bounded_text
from ..visitor import source as visitor_source
from . import seam
from .fair import Busy, slot
from .opening import link_spec, list_samples

__all__ = ["TOOLS", "MAX_HITS", "MAX_QUERY", "AgentAPI", "build", "mcp_on", "mcp_url", "lifespan"]

TOOLS = ("search_dataset", "rollout_summary", "turn_tokens", "rollout_drift", "rollout_lint")
MAX_HITS = 500  # hits one search_dataset call lists (the public search's own cap)
MAX_QUERY = 2000  # characters of a query, as the Search box
MAX_INDEX = 10**9  # a row, turn or token position: a whole number, never a string of digits without end

# Gradio warns, as its MCP server starts, about every tool with a gr.State input: this app's screen events,
# which lifespan() takes off the MCP list a moment later. The warning would tell the user something untrue.
warnings.filterwarnings("ignore", message="This MCP server includes a tool that has a gr.State input",
                        category=UserWarning)


def mcp_on(settings: Settings) -> bool | None:
    """``launch(mcp_server=...)``: True when the ``mcp`` setting is on, else None (Gradio's default:
    ``GRADIO_MCP_SERVER``)."""
    return True if settings.mcp else None


def mcp_url(url: str) -> str:
    """Where the MCP server of the app at ``url`` answers (streamable HTTP; ``…/sse`` for SSE)."""
    return url.rstrip("/") + "/gradio_api/mcp/"


@contextlib.asynccontextmanager
async def lifespan(app):
    """The app's start (FastAPI lifespan, after Gradio's MCP server was made): its tools are :data:`TOOLS`."""
    seam.mcp_tools_only(app, TOOLS)  # Gradio's MCP server has no public way to choose its tools
    yield


class AgentAPI:
    """The endpoints; each method's docstring is its API and MCP description (Args: per parameter)."""

    def __init__(self, settings: Settings):
        self.settings = settings

    # ------------------------------------------------------------------ the rules every endpoint keeps
    def _source(self, text: Any) -> tuple[str, str]:
        """The visitor's check of a source: (what :mod:`viewer.search.evidence` opens, how answers name it:
        ``sample:NAME``, ``hf://…``, a path as typed, in public mode relative to the data root)."""
        src = visitor_source(text, self.settings, list_samples())
        if src.kind != "path":
            return src.text, src.text
        shown = link_spec(src.path, self.settings) if self.settings.public_mode() else src.text
        return str(src.path), shown or src.path.name

    def _rollout(self, run, source: Any, row: Any) -> dict:
        """``run(spec, row)`` on a checked source; the answer names the source as the caller did, and lint
        links point at it as the app's links do."""
        spec, shown = self._source(source)
        doc = run(spec, self._row(row), settings=self.settings)
        doc["source"] = shown
        for hit in doc.get("hits") or []:
            if hit.get("link"):
                place = [(k, v) for k, v in parse_qsl(hit["link"]) if k != "source"]
                hit["link"] = urlencode([("source", shown), *place])
        return doc

    @staticmethod
    def _row(row: Any) -> int | None:
        return None if row is None or row == "" else bounded_int("row", row, 0, MAX_INDEX)

    def _run(self, request: gr.Request | None, work) -> str:
        """``work()`` within the visitor's share, its answer as JSON text; a refusal as gr.Error (its message)."""
        from ..budgets import BudgetExceeded
        from ..search import QueryError, SearchError
        from ..sources import SourceError
        from ..sources.shown import shown_text

        try:
            with slot(request, int(self.settings.limits().session_events)):
                doc = work()
            text = json.dumps(_finite(doc), ensure_ascii=False, default=str)
            text = shown_text(text, self.settings)  # public mode: no server folder in an answer
            self.settings.limits().check_bytes("response_mb", len(text.encode()), "this answer")
            return text
        except (Busy, ValueError, BudgetExceeded) as e:  # VisitorError and the paths' checks are ValueErrors
            raise gr.Error(shown_text(str(e), self.settings)) from None
        except (SearchError, QueryError, SourceError) as e:
            raise gr.Error(shown_text(getattr(e, "message", None) or str(e), self.settings)) from None
        except Exception as e:  # a reader's or a scan's own error: said, as the Search tab says it
            raise gr.Error(shown_text(f"could not answer: {getattr(e, 'message', None) or e}", self.settings)) from None

    def _hit(self, hit: dict) -> dict:
        """A hit named as a visitor names it: ``source`` what these endpoints take back (a bundled sample as
        ``sample:NAME``, in public mode a path relative to the data root), ``link`` the app's deep link."""
        src = str(hit.get("source") or "")
        named = src.startswith(("hf://", "sample:")) or not Path(src).is_absolute()  # already as a visitor names it
        spec = src if named else link_spec(Path(src), self.settings)
        if spec.startswith("sample:") or self.settings.public_mode():
            hit["source"] = spec or Path(src).name
        place = {k: hit[k] for k in ("row", "turn", "tok") if hit.get(k) is not None}
        hit["link"] = urlencode({"source": spec, **place}) if spec else ""  # the app's ?query, as lint's links
        return hit

    # ------------------------------------------------------------------ the endpoints
    def search_dataset(self, source: str, query: str = "", limit: int = 20, request: gr.Request = None) -> str:
        """Search a dataset of rollouts (a folder of capture folders, a data file, or a Hugging Face dataset) down to the token, worst hits first. The first search of a dataset builds its index (the drift scan: it may take a while). Query syntax: words or "a phrase" (text of messages, tool calls, tool output), /regex/, tool:bash, cause:special_token, lint:RI011, model:qwen, agent:, task:, finish:length, reward<0.5, logprob<-5 (a token), delta>0.5, ratio>2, turns>10, tokens>1000, drift>0, ids:151657,198, tokens:"<tool_call>"; AND, OR, NOT, parentheses. An empty query lists every rollout, lowest reward first.

        Args:
            source: the dataset: a folder or data file inside the app's data folder (relative to it), sample:NAME for a bundled sample, or hf://datasets/OWNER/NAME.
            query: the search, in the syntax above ("" = every rollout).
            limit: hits to list, 1 to 500.

        Returns:
            JSON text: query, level (rollout, turn or token), total (matching hits), rollouts (distinct matching), hits (each: source and row to pass to the other tools, turn, tok (token view position), pos (position in the turn's output), label, model, agent, task, reward, score, why, snippet, link), facets (value counts), reward_hist, index, seconds.
        """
        from ..search.evidence import search_dataset as run

        def work():
            spec, _ = self._source(source)
            q = bounded_text("query", query or "", MAX_QUERY)
            n = bounded_int("limit", limit, 1, MAX_HITS, 20)
            doc = run(spec, q, n, settings=self.settings)
            doc["hits"] = [self._hit(h) for h in doc.get("hits", [])]
            if self.settings.public_mode():
                doc.pop("index", None)  # where the server keeps its files: not a visitor's business
            return doc

        return self._run(request, work)

    def rollout_summary(self, source: str, row: int | None = None, request: gr.Request = None) -> str:
        """What one rollout is: its format, model, reward, totals, and one line per model call (turn index, kind, role, tools called, finish reason, prompt / output / trained token counts, mean and lowest logprob), with the problems its reader found.

        Args:
            source: the rollout: a capture folder or data file inside the app's data folder, sample:NAME for a bundled sample, or hf://datasets/OWNER/NAME.
            row: the dataset row for a file or Hub dataset of many rollouts; none for a capture folder.

        Returns:
            JSON text: source, row, format, model, reward, stats, turns (list of per-call lines), problems.
        """
        from ..search.evidence import rollout_summary as run

        return self._run(request, lambda: self._rollout(run, source, row))

    def turn_tokens(self, source: str, turn: int, start: int = 0, end: int | None = None, row: int | None = None,
                    request: gr.Request = None) -> str:
        """The output tokens [start, end) of one turn, as the sampler produced them: ids, texts, logprobs and the loss mask (1 = trained). At most 2,000 tokens a call: page through a longer turn with start and end.

        Args:
            source: the rollout, as for rollout_summary.
            turn: the turn index (rollout_summary's turn, a search hit's turn).
            start: first output token, from 0.
            end: one past the last output token; none = the end of the turn.
            row: the dataset row, as for rollout_summary.

        Returns:
            JSON text: source, row, turn, start, end, output_tokens (the turn's length), tok (the token view's position of start, prompt included), ids, texts, logprobs, mask.
        """
        from ..search.evidence import turn_tokens as run

        def work():
            t = bounded_int("turn", turn, 0, MAX_INDEX)
            a = bounded_int("start", start, 0, MAX_INDEX, 0)
            b = None if end is None or end == "" else bounded_int("end", end, 0, MAX_INDEX)
            return self._rollout(lambda spec, r, settings: run(spec, t, a, b, r, settings=settings), source, row)

        return self._run(request, work)

    def rollout_drift(self, source: str, row: int | None = None, request: gr.Request = None) -> str:
        """The drift scan of one rollout: for each agent turn the three checks (retokenisation round trip, chat template, prompt prefix against the previous turn), each naming its cause, the trainer's rows, and the totals.

        Args:
            source: the rollout, as for rollout_summary.
            row: the dataset row, as for rollout_summary.

        Returns:
            JSON text: source, row, turns, totals, trainer, tokenizer.
        """
        from ..search.evidence import rollout_drift as run

        return self._run(request, lambda: self._rollout(run, source, row))

    def rollout_lint(self, source: str, row: int | None = None, request: gr.Request = None) -> str:
        """The health checks of one rollout (lint rules RI001 and on): each hit with its rule, level, turn, tokens, message and app link.

        Args:
            source: the rollout, as for rollout_summary.
            row: the dataset row, as for rollout_summary.

        Returns:
            JSON text: source, row, hits, rules (the rule ids hit).
        """
        from ..search.evidence import rollout_lint as run

        return self._run(request, lambda: self._rollout(run, source, row))


def build(settings: Settings) -> AgentAPI:
    """Register the endpoints inside the current gr.Blocks (no component: API and MCP only)."""
    api = AgentAPI(settings)
    for name in TOOLS:
        # a search may build an index (a scan): the Search tab's one long-work lane; the rest, the app's default
        lane = dict(concurrency_id="long-work", concurrency_limit=1) if name == "search_dataset" else {}
        gr.api(getattr(api, name), api_name=name, **lane)
    return api


def _finite(x: Any) -> Any:
    """``x`` with NaN and infinities as null: JSON has no spelling for them."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x
