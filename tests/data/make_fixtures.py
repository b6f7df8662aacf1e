"""Build the small capture fixtures under tests/data/capture_* (run: python tests/data/make_fixtures.py).

The builders are also imported by tests to make variants in tmp folders. Every value is
chosen here, so tests derive their expectations from these constructions (call layout,
id ranges, which calls make tool calls) rather than from reader output.

Fixtures:
* ``capture_ours``   our recording proxy's format (FORMATS §2.2 superset): explicit ``kind``,
  engine prompt/output ids, "token_id:N" strings, top-2 logprob entries, an upstream
  error record, plus turns.json / task.json / tests / summary.json.
* ``capture_openenv`` the OpenEnv interception proxy's shape as JSONL, no ``kind``, empty
  ``completion_token_ids`` (ids only in "token_id:N" strings), no turns.json: kinds and
  masks must come from the upstream rule.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

AGENT_SYSTEM = "You are opencode, an interactive CLI tool that helps users with software engineering tasks."
TITLE_SYSTEM = "You are a title generator. You output ONLY a thread title. Nothing else."
SUMMARY_SYSTEM = "You are a context summarization agent. You are given a conversation between a user and an agent."
MODEL = "Qwen/Qwen3-4B-Instruct-2507"
TOOLS = [{"type": "function", "function": {"name": n, "description": n, "parameters": {"type": "object"}}}
         for n in ("bash", "write", "edit", "read")]
INSTRUCTION = "Write solution.py that reads two integers and prints their sum."


def out_ids(call: int, n: int) -> list[int]:
    """Output ids of call ``call``: distinct per call so id-matching is unambiguous."""
    return [1000 * call + k for k in range(n)]


def prompt_ids(call: int, n: int) -> list[int]:
    return [151644] + [call * 7 + k for k in range(n - 1)]


def logprob(call: int, k: int) -> float:
    """Deterministic, exactly representable logprobs (multiples of 1/8)."""
    return -((call + k) % 5) / 8


def entries(call: int, ids: list[int]) -> list[dict[str, Any]]:
    """vLLM logprob entries with top-2; sampled bytes = text bytes, top-k bytes = the id string (quirk)."""
    out = []
    for k, i in enumerate(ids):
        lp = logprob(call, k)
        tok = f"token_id:{i}"
        out.append({"token": tok, "logprob": lp, "bytes": list(f"<{i}>".encode()),
                    "top_logprobs": [{"token": tok, "logprob": lp, "bytes": list(tok.encode())},
                                     {"token": f"token_id:{i + 1}", "logprob": lp - 1.0,
                                      "bytes": list(f"token_id:{i + 1}".encode())}]})
    return out


def messages(system: str, user: str, extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}] + (extra or [])


def tool_call(name: str, args: dict[str, Any], cid: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def record(call: int, *, kind: str | None, system: str, tools: bool, n_out: int, n_prompt: int | None,
           tool_calls: list[dict[str, Any]] | None = None, content: str | None = None,
           engine_ids: bool = True, reasoning_key: str = "reasoning") -> dict[str, Any]:
    """One proxy record (our format when ``kind``/``engine_ids``; OpenEnv's shape otherwise)."""
    ids = out_ids(call, n_out)
    msg: dict[str, Any] = {"role": "assistant"}
    if content is not None:
        msg["content"] = content
    if tool_calls:
        msg["tool_calls"] = tool_calls
    msg[reasoning_key] = f"thinking in call {call}"
    finish = "tool_calls" if tool_calls else "stop"
    req: dict[str, Any] = {"model": MODEL, "stream": True, "logprobs": True, "top_logprobs": 2,
                           "messages": messages(system, f"user text {call}")}
    if tools:
        req["tools"] = TOOLS
        req["tool_choice"] = "auto"
    ents = entries(call, ids)
    rec: dict[str, Any] = {"turn": call, "request": req,
                           "response": {"id": f"chatcmpl-{call}", "object": "chat.completion", "model": MODEL,
                                        "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                                        "usage": {"completion_tokens": n_out}},
                           "completion_tokens": [e["token"] for e in ents],
                           "completion_token_ids": ids if engine_ids else [],
                           "logprobs": ents,
                           "per_token_logps": [e["logprob"] for e in ents],
                           "finish_reason": finish, "latency_s": 0.5 + call, "timestamp": 1780000000.0 + call}
    if kind is not None:
        rec["kind"] = kind
    if n_prompt is not None:
        rec["prompt_token_ids"] = prompt_ids(call, n_prompt)
    return rec


def error_record(call: int, kind: str | None = "main") -> dict[str, Any]:
    rec = {"turn": call, "request": {"model": MODEL, "messages": messages(AGENT_SYSTEM, "retry"), "tools": TOOLS},
           "response": {"choices": [], "usage": None, "upstream_status": 500,
                        "upstream_error": {"error": {"message": "engine overloaded"}}},
           "completion_tokens": [], "completion_token_ids": [], "logprobs": None, "per_token_logps": [],
           "finish_reason": None, "latency_s": 0.1, "timestamp": 1780000000.0 + call, "upstream_status": 500,
           "upstream_error": {"error": {"message": "engine overloaded"}}}
    if kind is not None:
        rec["kind"] = kind
    return rec


# ------------------------------------------------------------------ capture_ours layout
# call: (kind, n_out, n_prompt, tool_calls)
OURS_CALLS = {
    1: ("title", 6, 20, None),
    2: ("main", 12, 40, [tool_call("write", {"path": "solution.py", "content": "print(1)"}, "c2")]),
    3: ("main", 9, 60, [tool_call("bash", {"command": "python solution.py"}, "c3")]),
    4: ("error", 0, None, None),
    5: ("main", 5, 80, None),  # final text answer: not trained
    6: ("compaction", 7, 30, None),
}


def ours_records() -> list[dict[str, Any]]:
    recs = []
    for call, (kind, n_out, n_prompt, tcs) in OURS_CALLS.items():
        if kind == "error":
            recs.append(error_record(call))
            continue
        system = {"title": TITLE_SYSTEM, "compaction": SUMMARY_SYSTEM}.get(kind, AGENT_SYSTEM)
        recs.append(record(call, kind=kind, system=system, tools=kind == "main", n_out=n_out, n_prompt=n_prompt,
                           tool_calls=tcs, content=None if tcs else f"answer {call}"))
    return recs


def ours_turns() -> list[dict[str, Any]]:
    """turns.json for the agent calls with tool calls or text (2, 3, 5), per-output masks."""
    out = []
    for call in (2, 3, 5):
        _, n_out, n_prompt, tcs = OURS_CALLS[call]
        trained = bool(tcs)
        out.append({"call": call, "prompt_ids": prompt_ids(call, n_prompt),
                    "prompt_ids_source": "engine" if call == 2 else "rerender",
                    "output_ids": out_ids(call, n_out),
                    "per_token_logps": [logprob(call, k) for k in range(n_out)],
                    "trained": trained, "mask": [1 if trained else 0] * n_out})
    return out


HELD_OUT = [{"input": "1 2\n", "output": "3\n"}, {"input": "5 7\n", "output": "12\n"}]
SUMMARY = {"reward": 0.75, "verifier_fraction": 0.75, "model": MODEL, "tool_calls": 2}


def write_ours(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trace.json").write_text(json.dumps(ours_records(), indent=1))
    (folder / "turns.json").write_text(json.dumps(ours_turns()))
    (folder / "task.json").write_text(json.dumps({"task_index": 3, "seed": 0, "instruction": INSTRUCTION}))
    (folder / "visible_tests.txt").write_text("input: 1 2\noutput: 3\n")
    (folder / "held_out_tests.json").write_text(json.dumps(HELD_OUT))
    (folder / "summary.json").write_text(json.dumps(SUMMARY))


# ------------------------------------------------------------------ capture_openenv layout
# call: (role, n_out, tool_calls). No kind field; the rule must classify.
OPENENV_CALLS = {
    1: ("title", 4, None),
    2: ("main", 8, [tool_call("bash", {"command": "ls"}, "o2")]),
    3: ("main", 6, [tool_call("edit", {"path": "solution.py"}, "o3")]),
    4: ("compaction", 5, None),
    5: ("main", 7, [tool_call("bash", {"command": "python solution.py"}, "o5")]),  # after compaction
    6: ("main", 3, None),
}


def openenv_records() -> list[dict[str, Any]]:
    recs = []
    for call, (role, n_out, tcs) in OPENENV_CALLS.items():
        system = {"title": TITLE_SYSTEM, "compaction": SUMMARY_SYSTEM}.get(role, AGENT_SYSTEM)
        rec = record(call, kind=None, system=system, tools=role == "main", n_out=n_out, n_prompt=None,
                     tool_calls=tcs, content=None if tcs else f"text {call}", engine_ids=False,
                     reasoning_key="reasoning_content")
        if role == "compaction":  # opencode sends the tools to the summariser too; the prompt differs
            rec["request"]["tools"] = TOOLS
        recs.append(rec)
    return recs


def write_openenv(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "trace.json", "w") as f:
        for rec in openenv_records():
            f.write(json.dumps(rec) + "\n")
    (folder / "summary.json").write_text(json.dumps({"verifier_fraction": 0.5}))


def main(argv: list[str] | None = None) -> None:
    write_ours(HERE / "capture_ours")
    write_openenv(HERE / "capture_openenv")


if __name__ == "__main__":
    main(sys.argv[1:])
