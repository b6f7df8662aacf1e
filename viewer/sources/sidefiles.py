"""The small files of a capture folder: task, visible and held-out tests, summary, outcome.

Each is read whole (they are small and size-capped) into the Rollout; problems go to the
reader's :class:`~viewer.sources.proxyrecord.Ctx`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from viewer.rollout import Rollout, Turn
from viewer.sources.jsonio import read_document, size_problem
from viewer.sources.proxyrecord import Ctx

__all__ = ["INSTRUCTION_KEYS", "REWARD_KEYS", "model_of", "read_rollout_result", "read_task", "read_visible_tests",
           "read_held_out", "read_summary"]

INSTRUCTION_KEYS = ("instruction", "prompt", "problem", "question", "task", "description")
REWARD_KEYS = ("reward", "verifier_fraction", "score", "pass_rate", "fraction_passed")


def model_of(turns: list[Turn]) -> str | None:
    for want_agent in (True, False):
        for t in turns:
            m = t.origin.model
            if m and (t.kind == "agent") == want_agent:
                return m
    return None


def read_rollout_result(wrapper: dict[str, Any], ro: Rollout) -> None:
    r = wrapper.get("reward")
    if type(r) in (int, float):
        ro.reward = float(r)
    ro.summary = {k: v for k, v in wrapper.items() if k not in ("files", "files_extra", "_list_key")}


def read_task(path: Path, ro: Rollout, ctx: Ctx, max_mb: float) -> None:
    doc = read_document(path, path.name, max_mb)
    ctx.problems.extend(doc.problems)
    if doc.value is None:
        return
    if isinstance(doc.value, str):
        ro.task, ro.instruction = {"instruction": doc.value}, doc.value
        return
    if not isinstance(doc.value, dict):
        ctx.add(path.name, "", f"expected an object, got {type(doc.value).__name__}")
        return
    ro.task = doc.value
    for k in INSTRUCTION_KEYS:
        v = doc.value.get(k)
        if isinstance(v, str) and v.strip():
            ro.instruction = v
            return
    ctx.add(path.name, "", f"no instruction found (looked for {', '.join(INSTRUCTION_KEYS)})", "warning")


def read_visible_tests(path: Path, ro: Rollout, ctx: Ctx, max_mb: float) -> None:
    p = size_problem(path, path.name, max_mb)
    if p:
        ctx.problems.append(p)
        return
    try:
        ro.visible_tests = path.read_bytes().decode("utf-8", errors="replace")
    except OSError as e:
        ctx.add(path.name, "", f"cannot read file: {e.strerror or e}")


def read_held_out(path: Path, ro: Rollout, ctx: Ctx, max_mb: float) -> None:
    doc = read_document(path, path.name, max_mb)
    ctx.problems.extend(doc.problems)
    v = doc.value
    if v is None:
        return
    if isinstance(v, dict) and isinstance(v.get("inputs"), list) and isinstance(v.get("outputs"), list):
        v = [{"input": a, "output": b} for a, b in zip(v["inputs"], v["outputs"])]  # columnar variant
    elif isinstance(v, dict) and isinstance(v.get("tests"), list):
        v = v["tests"]
    if not isinstance(v, list):
        ctx.add(path.name, "", f"expected a list of {{input, output}}, got {type(v).__name__}")
        return
    tests = []
    for k, item in enumerate(v):
        if isinstance(item, dict) and "input" in item and "output" in item:
            tests.append(item)
        else:
            ctx.add(path.name, f"entry {k}", "expected an object with 'input' and 'output'; skipped")
    ro.held_out_tests = tests


def read_summary(path: Path, ro: Rollout, ctx: Ctx, max_mb: float) -> None:
    doc = read_document(path, path.name, max_mb)
    ctx.problems.extend(doc.problems)
    if doc.value is None:
        return
    if not isinstance(doc.value, dict):
        ctx.add(path.name, "", f"expected an object, got {type(doc.value).__name__}")
        return
    ro.summary = doc.value
    for k in REWARD_KEYS:
        v = doc.value.get(k)
        if type(v) in (int, float):
            ro.reward = float(v)
            break
    m = doc.value.get("model")
    if ro.model is None and isinstance(m, str) and m:
        ro.model = m
