"""Real-format row fixtures written by the tests (from ../shared/realdata and documented schemas)."""
from __future__ import annotations

import json
from pathlib import Path

REALDATA = Path(__file__).resolve().parent.parent.parent / "shared" / "realdata"
HARBOR = REALDATA / "harbor-golden-traces"


def harbor_rows(name: str = "terminus_2__hello-world-invalid-json") -> list[dict]:
    return json.loads((HARBOR / f"{name}.traces.json").read_text())


def opencode_session() -> dict:
    info = json.loads((REALDATA / "opencode-native-api" / "session-details.json").read_text())
    msgs = json.loads((REALDATA / "opencode-native-api" / "messages-after-2.json").read_text())
    return {"info": info, "messages": msgs}


def opencode_rows() -> list[dict]:
    """13point5-style export rows: the same session pushed in batches 1 and 2, plus another session."""
    s = opencode_session()
    short = {"info": {**s["info"], "title": "older"}, "messages": s["messages"][:2]}
    other = {"info": {**s["info"], "id": "ses_other", "title": "Other session"}, "messages": s["messages"][2:]}
    base = {"agent": "opencode", "exported_at": "2026-03-31T20:16:15.046Z", "metadata": {"remote_url": None}}
    return [{"session_id": s["info"]["id"], **base, "session": short, "batch_id": 1},
            {"session_id": "ses_other", **base, "session": other, "batch_id": 1},
            {"session_id": s["info"]["id"], **base, "session": s, "batch_id": 2}]


def sse(chunks: list[dict]) -> str:
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"


def agentcap_rows() -> list[dict]:
    req = {"model": "Qwen/Qwen3-4B-Instruct-2507", "stream": True,
           "messages": [{"role": "system", "content": "You are a helpful agent."},
                        {"role": "user", "content": "List the files."}],
           "tools": [{"type": "function", "function": {"name": "bash", "description": "run a command",
                                                        "parameters": {"type": "object", "properties": {
                                                            "command": {"type": "string"}}}}}]}
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "Qwen/Qwen3-4B-Instruct-2507"}
    raw = sse([
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"content": "Let me "}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"content": "look."}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                                    "function": {"name": "bash", "arguments": ""}}]},
                              "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"comm"}}]},
                              "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "and\": \"ls\"}"}}]},
                              "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
         "usage": {"prompt_tokens": 40, "completion_tokens": 12}},
    ])
    row = {"request_id": "r1", "model": "Qwen/Qwen3-4B-Instruct-2507", "captured_at": 1770000000, "task_id": "t-ls",
           "turn": 1, "request": json.dumps(req), "response": json.dumps({"stream": True, "raw": raw}),
           "served_by": "vllm", "served_build_info": "", "served_model": "Qwen/Qwen3-4B-Instruct-2507",
           "provider": "local", "upstream_url": "http://127.0.0.1:8000/v1", "run_id": "run-1"}
    body = {"id": "x", "object": "chat.completion", "model": "Qwen/Qwen3-4B-Instruct-2507",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Done: a.txt"},
                         "finish_reason": "stop"}]}
    req2 = {**req, "stream": False, "messages": req["messages"] + [
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"}]}
    row2 = {**row, "request_id": "r2", "turn": 2, "request": json.dumps(req2), "response": json.dumps(body)}
    return [row, row2]


def contract_rows(qwen3) -> list[dict]:
    msgs = [{"role": "user", "content": "Say hi."}]
    prompt = qwen3.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    p_ids = qwen3.encode(prompt, add_special_tokens=False)
    c_ids = qwen3.encode("hi", add_special_tokens=False) + [qwen3.convert_tokens_to_ids("<|im_end|>")]
    return [{"request": json.dumps({"messages": msgs, "tools": []}),
             "response": json.dumps({"choices": [{"message": {"role": "assistant", "content": "hi"},
                                                  "finish_reason": "stop"}]}),
             "prompt_token_ids": p_ids, "completion_token_ids": c_ids,
             "per_token_logps": [-0.1] * len(c_ids), "loss_mask": [0] * len(p_ids) + [1] * len(c_ids),
             "metadata": json.dumps({"node_id": "n0", "model": "Qwen/Qwen3-4B", "harness_session_id": "s1"})}]


def write_parquet(rows: list[dict], path: Path, json_columns: tuple[str, ...] = ()) -> Path:
    """Write rows with the real `datasets` library (as Hub datasets are written)."""
    import datasets

    rows = [{k: (json.dumps(v) if k in json_columns and not isinstance(v, str) else v) for k, v in r.items()}
            for r in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    datasets.Dataset.from_list(rows).to_parquet(str(path))
    return path


def write_jsonl(rows: list, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
