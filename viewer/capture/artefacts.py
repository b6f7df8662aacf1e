"""What a capture writes from its records: trace.json, turns.json and the summary's counts and
notes. Pure functions over the recorded proxy records and the folder (no processes)."""
from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any

from viewer.capture import agent as agent_mod
from viewer.layout import TRACE, TURNS

__all__ = ["derive_turns", "outcome_notes", "write_trace_artefacts", "versions"]


def derive_turns(folder: Path) -> tuple[list[dict[str, Any]], Any, list[str]]:
    """turns.json entries for the agent calls of ``folder/trace.json``, derived by the viewer's reader,
    and the problems met. A call without engine prompt ids is rendered with the capture's own
    tokenizer and template (``folder/tokenizer``, else the model's), never a fixed one; when that
    fails the entry says ``prompt_ids_source: "none"`` and the problem says why."""
    from viewer.sources.capture import read_capture
    from viewer.tokenizer import render_prompt_ids, tokenizer_for

    ro = read_capture(folder)
    entries, problems = [], []
    choice = None
    for t in ro.turns:
        if t.kind != "agent":
            continue
        prompt_ids, source = list(t.prompt_ids), "engine"
        if not prompt_ids and t.messages:
            if choice is None:
                choice = tokenizer_for(ro, capture_dir=Path(folder))
            if choice.tokenizer is None:
                prompt_ids, source = [], "none"
                problems.append(f"call {t.call}: no engine prompt ids, and no tokenizer to render them "
                                f"({choice.message})")
            else:
                try:
                    prompt_ids, source = render_prompt_ids(choice.tokenizer, t.messages, t.tools), "rerender"
                except Exception as e:  # a template error is a located problem, not an empty success
                    prompt_ids, source = [], "none"
                    problems.append(f"call {t.call}: the chat template of {choice.name} failed to render the "
                                    f"prompt: {type(e).__name__}: {e}")
        entries.append({"call": t.call, "prompt_ids": prompt_ids, "prompt_ids_source": source,
                        "output_ids": list(t.output_ids), "per_token_logps": list(t.logprobs),
                        "trained": bool(t.trained), "mask": list(t.mask)})
    return entries, ro, problems


def outcome_notes(summary: dict[str, Any], max_tokens: int) -> list[str]:
    """What a reader of a free-sampling capture needs said plainly (summary.json and the UI)."""
    notes = []
    for call in summary.get("length_stops") or []:
        notes.append(f"call {call} stopped at the output limit ({max_tokens} tokens) without calling a tool")
    if summary.get("agent_turns") and not summary.get("tool_counts"):
        notes.append("the model never called a tool")
    if summary.get("reward_status") == "no solution.py written":
        notes.append("no solution.py was written, so no held-out test could pass")
    for p in summary.get("derivation_problems") or []:
        notes.append(f"turns.json: {p}")
    if isinstance(summary.get("tokenizer"), dict) and summary["tokenizer"].get("problem"):
        notes.append(f"no tokenizer shipped: {summary['tokenizer']['problem']}")
    return notes


def write_trace_artefacts(out: Path, records: list[dict[str, Any]]) -> dict[str, Any]:
    """trace.json (JSON array of the proxy records) and turns.json; returns summary counts."""
    out = Path(out)
    (out / TURNS).unlink(missing_ok=True)
    (out / TRACE).write_text(json.dumps(records, ensure_ascii=False))
    if not records:
        (out / TURNS).write_text("[]")
        return {"agent_turns": 0, "trained_turns": 0, "kept_calls": [], "filtered_calls": [], "tool_counts": {},
                "output_tokens": 0, "prompt_tokens_last": 0, "derivation_problems": [], "length_stops": []}
    entries, ro, problems = derive_turns(out)
    (out / TURNS).write_text(json.dumps(entries))
    tools: dict[str, int] = {}
    for t in ro.turns:
        if t.kind == "agent":
            for n in t.tool_names:
                tools[n] = tools.get(n, 0) + 1
    agent = [t for t in ro.turns if t.kind == "agent"]
    return {"agent_turns": len(agent), "trained_turns": sum(1 for t in agent if t.trained),
            "kept_calls": [t.call for t in agent],
            "filtered_calls": [{"call": t.call, "role": t.role} for t in ro.turns if t.kind != "agent"],
            "tool_counts": tools, "output_tokens": sum(len(t.output_ids) for t in ro.turns),
            "prompt_tokens_last": len(agent[-1].prompt_ids) if agent else 0, "derivation_problems": problems,
            "length_stops": [t.call for t in agent if t.finish_reason == "length" and not t.tool_names]}


def versions(vllm_python: str = "") -> dict[str, Any]:
    import importlib.metadata as md

    from viewer.capture.backends import BackendError, vllm_python as vp

    out: dict[str, Any] = {"python": platform.python_version(), "opencode": agent_mod.OPENCODE_VERSION}
    for dist in ("transformers", "huggingface_hub", "httpx", "uvicorn"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            pass
    try:
        site = next(vp(vllm_python).parent.parent.glob("lib/python*/site-packages"), None)
        if site is not None:
            for d in sorted(site.glob("vllm*.dist-info")) + sorted(site.glob("torch-*.dist-info")):
                name, ver = d.name[:-len(".dist-info")].rsplit("-", 1)
                out[name] = ver
    except BackendError:  # no vLLM environment (an endpoint or hf-jobs capture): no versions of it to say
        pass
    except (OSError, ValueError) as e:  # an unreadable or oddly named dist-info: say so in summary.json
        out["vllm_env"] = f"versions not read: {type(e).__name__}: {e}"
    return out
