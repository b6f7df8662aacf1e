"""A capture's fields, checked: the one function that builds a :class:`CaptureSpec` from the
settings and a visitor's (or the command line's) raw values.

The Capture tab, ``python -m viewer capture`` and the hf-jobs job script all call
:func:`capture_spec`; a field left empty takes the settings' value (``CAPTURE_*``), and a field
without a setting takes :class:`CaptureSpec`'s own default, so no caller writes a default of its
own. Each value goes through the checks of :mod:`viewer.visitor` (a visitor's value is data:
docs/SECURITY.md, "Capture and visitor input").
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from viewer.capture.models import MODELS
from viewer.capture.spec import CaptureSpec
from viewer.config import Settings
from viewer.visitor import (FLAVOR, REPO_ID, SERVED_NAME, VisitorError, bounded_float, bounded_int, bounded_text,
                            choice, endpoint_url, instruction, repo_id)

__all__ = ["BACKENDS", "TASK_SOURCES", "LOGPROBS_MODES", "MODELS", "FIELDS", "model_name", "tokenizer_name",
           "capture_spec"]

BACKENDS = ("local", "endpoint", "hf-jobs")
TASK_SOURCES = ("bundled", "deepcoder")
LOGPROBS_MODES = ("", "processed_logprobs", "raw_logprobs")
# The fields a caller may give (everything else is the app's: output folder, token, binaries).
FIELDS = ("backend", "model", "endpoint", "task_source", "task_index", "n_prompts", "seed", "instruction",
          "scripted", "agent_timeout_s", "test_timeout_s", "max_output_tokens", "steps", "top_logprobs",
          "logprobs_mode", "temperature", "top_p", "top_k", "spell_tool_call_as_pieces", "tokenizer", "results_repo", "flavor", "script_commands",
          "sandbox", "title", "rescore")
_DEFAULT = CaptureSpec(out="")  # the spec's own defaults, for the fields no setting covers


def model_name(value: Any, backend: str, public: bool, default: str = _DEFAULT.model, name: str = "model") -> str:
    """A listed CPU model, a Hub repo id, the endpoint's served name, or (not public) a local model folder."""
    v = bounded_text(name, value, 512) or default
    if v in MODELS:
        return v
    if backend == "endpoint" and SERVED_NAME.fullmatch(v) and ".." not in v and not v.startswith("/"):
        return v  # only ever sent as the request's "model" string
    if REPO_ID.fullmatch(v) and "--" not in v and ".." not in v and not Path(v).exists():
        return v
    if not public and backend != "hf-jobs":
        p = Path(v).expanduser()
        if p.is_dir():
            return str(p.resolve())
        if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}", v) and ".." not in v:
            return v  # a Hub name without an owner (gpt2): a local user's own vLLM resolves it
        raise VisitorError(name, f"{v!r}: not a listed model ({', '.join(MODELS)}), a Hub repo id, or a model folder")
    raise VisitorError(name, f"{v!r}: not a listed model ({', '.join(MODELS)}) or a Hub repo id (OWNER/NAME)")


def tokenizer_name(value: Any, backend: str, public: bool) -> str:
    """Where the served model's tokenizer is: "" (from the model), a Hub repo id, or (not public) a folder."""
    v = bounded_text("tokenizer", value, 512)
    if not v:
        return ""
    if REPO_ID.fullmatch(v) and "--" not in v and ".." not in v and not Path(v).exists():
        return v
    if not public and backend != "hf-jobs" and Path(v).expanduser().is_dir():
        return str(Path(v).expanduser().resolve())
    raise VisitorError("tokenizer", f"{v!r}: not a Hub repo id (OWNER/NAME)" + ("" if public else " or a folder"))


def _sampling(raw: dict[str, Any]) -> dict[str, Any]:
    """temperature (0 < T <= 10), top_p (0 < p <= 1), top_k (-1 or 1..1e6; -1/0 = off, as vLLM): each
    optional (None: not pinned); a value vLLM would reject is refused here, naming the field."""
    out: dict[str, Any] = {}
    if raw.get("temperature") not in (None, ""):
        t = bounded_float("temperature", raw["temperature"], 0.0, 10.0)
        if t <= 0:
            raise VisitorError("temperature", "must be > 0 (0 is greedy: no distribution to compare logprobs with)")
        out["temperature"] = t
    if raw.get("top_p") not in (None, ""):
        p = bounded_float("top_p", raw["top_p"], 0.0, 1.0)
        if p <= 0:
            raise VisitorError("top_p", "must be in (0, 1]")
        out["top_p"] = p
    if raw.get("top_k") not in (None, ""):
        out["top_k"] = bounded_int("top_k", raw["top_k"], -1, 1_000_000)
    return out


def _bundled_count() -> int:
    from viewer.capture.tasks import bundled_tasks

    return len(bundled_tasks())


def capture_spec(settings: Settings, *, out: str, public: bool, token: str = "", **raw: Any) -> CaptureSpec:
    """One :class:`CaptureSpec` from the settings and a visitor's raw fields (keys: :data:`FIELDS`).

    A missing (or empty) field takes the settings' value, else the spec's default; an unknown key
    is a programming error (TypeError); a bad value raises :class:`VisitorError` naming the field.
    ``public``: no local folders, sandbox required, endpoint pinned."""
    unknown = set(raw) - set(FIELDS)
    if unknown:
        raise TypeError(f"unknown capture fields: {sorted(unknown)}")
    s, d = settings, _DEFAULT
    backend = choice("backend", raw.get("backend") or d.backend, BACKENDS)
    task_source = choice("task_source", raw.get("task_source") or d.task_source, TASK_SOURCES)
    instr = instruction(raw.get("instruction"))
    scripted = bool(raw.get("scripted", d.scripted))
    if scripted and instr:
        raise VisitorError("scripted", "scripted mode replays a bundled task's solution: clear the custom "
                                       "instruction or untick Scripted")
    n_prompts = bounded_int("n_prompts", raw.get("n_prompts"), 1, 100_000, d.n_prompts)
    hi = (_bundled_count() if task_source == "bundled" else n_prompts) - 1
    task_index = bounded_int("task_index", raw.get("task_index"), 0, max(hi, 0), d.task_index)
    # an app's capture ends at CAPTURE_MAX_WALL_S anyway; a local user's CLI run may be long
    max_wall = float(s.capture_max_wall_s or 86_400) if public else 7 * 86_400.0
    commands = raw.get("script_commands") or []
    if commands and public:
        raise VisitorError("script_commands", "not available on a public app")
    if not isinstance(commands, (list, tuple)) or not all(isinstance(c, str) for c in commands):
        raise VisitorError("script_commands", "expected a list of commands")
    results_repo = repo_id("results_repo", raw.get("results_repo", s.capture_results_repo),
                           required=backend == "hf-jobs")
    flavor = bounded_text("flavor", raw.get("flavor") or s.capture_hf_flavor or d.flavor, 40)
    if not FLAVOR.fullmatch(flavor):
        raise VisitorError("flavor", f"{flavor!r} is not a hardware flavor name (e.g. a100-large)")
    return CaptureSpec(
        out=str(out), backend=backend,
        model=model_name(raw.get("model"), backend, public, s.capture_model or d.model),
        endpoint=endpoint_url(raw.get("endpoint"), required=backend == "endpoint") if backend == "endpoint" else "",
        token=token, task_source=task_source, task_index=task_index, n_prompts=n_prompts,
        seed=bounded_int("seed", raw.get("seed"), 0, 2**31 - 1, d.seed), instruction=instr, scripted=scripted,
        agent_timeout_s=bounded_float("agent_timeout_s", raw.get("agent_timeout_s"), 1, max_wall,
                                      s.capture_agent_timeout_s),
        test_timeout_s=bounded_float("test_timeout_s", raw.get("test_timeout_s"), 0.1, 600, s.capture_test_timeout_s),
        max_output_tokens=bounded_int("max_output_tokens", raw.get("max_output_tokens"), 1, 131_072,
                                      s.capture_max_output_tokens),
        steps=bounded_int("steps", raw.get("steps"), 1, 1000, d.steps),
        top_logprobs=bounded_int("top_logprobs", raw.get("top_logprobs"), 0, 20, s.capture_top_logprobs),
        logprobs_mode=choice("logprobs_mode", raw.get("logprobs_mode", s.capture_logprobs_mode) or "", LOGPROBS_MODES),
        **_sampling(raw),
        spell_tool_call_as_pieces=bool(raw.get("spell_tool_call_as_pieces", d.spell_tool_call_as_pieces)),
        tokenizer=tokenizer_name(raw.get("tokenizer"), backend, public),
        results_repo=results_repo, flavor=flavor, script_commands=list(commands),
        sandbox=True if public else bool(raw.get("sandbox", d.sandbox)), require_sandbox=public,
        title=bool(raw.get("title", d.title)), rescore=bool(raw.get("rescore", d.rescore)), vllm_python=s.capture_vllm_python, opencode_bin=s.capture_opencode,
        auto_setup=s.capture_auto_setup, public_app=public)
