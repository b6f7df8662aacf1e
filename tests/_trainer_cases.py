"""Trace files for the trainer conformance suite, built by hand on the real Qwen3 template.

Each case is a ``trace.json`` in the shape a producer writes (the seed interception
proxy's: no engine prompt ids, empty ``completion_token_ids``, ids only in ``token_id:N``
strings; or the OpenEnv capture contract's: engine prompt ids and a loss mask over
prompt + completion). Sampled outputs are cut from the template's own render of the
assistant reply, then edited where a case needs drift, so which transitions are CLEAN,
REALIGN or FORK follows from the construction. The expected rows are never computed
here: they come from TRL itself (tests/oracle/trl_oracle.py).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

IM_END = 151645
MODEL = "Qwen/Qwen3-4B-Instruct-2507"
AGENT = "You are opencode, an interactive CLI tool that helps users with software engineering tasks."
TITLE = "You are a title generator. You output ONLY a thread title. Nothing else."
SUMMARISER = "You are a context summarization agent. You are given a conversation between a user and an agent."
TOOLS = [{"type": "function", "function": {"name": n, "description": f"the {n} tool",
                                           "parameters": {"type": "object", "properties": {
                                               "command": {"type": "string"}, "filePath": {"type": "string"},
                                               "content": {"type": "string"}}}}}
         for n in ("bash", "write", "read")]
S = {"role": "system", "content": AGENT}
U = {"role": "user", "content": "Write solution.py that prints the sum of two integers read from stdin."}


def _ids(tok, messages, tools, gen: bool) -> list[int]:
    ids = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=gen, tokenize=True, return_dict=False)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def sampled(tok, messages, tools, reply: dict[str, Any]) -> list[int]:
    """The ids a model sampling exactly what the template renders for ``reply`` in the
    history would emit (the render's tail after the generation prompt, through
    ``<|im_end|>``). Rendered with a message after it: Qwen3's template puts an empty
    ``<think></think>`` on the *last* assistant message only, and later prompts drop it."""
    prompt = _ids(tok, messages, tools, True)
    full = _ids(tok, messages + [reply, {"role": "user", "content": "next"}], tools, False)
    assert full[:len(prompt)] == prompt, "template does not extend the generation prompt"
    rest = full[len(prompt):]
    return rest[:rest.index(IM_END) + 1]


def as_pieces(tok, ids: list[int]) -> list[int]:
    """``ids`` with the special ``<tool_call>`` spelled as plain pieces (what tiny models sample)."""
    tc = tok.convert_tokens_to_ids("<tool_call>")
    pieces = [tok.convert_tokens_to_ids(x) for x in ("<", "tool", "_call", ">")]  # "<tool_call>" as plain BPE
    assert pieces != [tc] and len(pieces) > 1
    out: list[int] = []
    for i in ids:
        out.extend(pieces if i == tc else [i])
    return out


def call(name: str, cid: str, **args: str) -> dict[str, Any]:
    """An assistant message with one tool call, ``arguments`` compact as opencode sends it."""
    return {"role": "assistant", "content": "", "tool_calls": [{"id": cid, "type": "function", "function": {
        "name": name, "arguments": json.dumps(args, separators=(",", ":"))}}]}


def result(cid: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def _logps(n: int, seed: int) -> list[float]:
    return [-round(0.01 + ((seed * 31 + k * 7) % 97) / 40.0, 4) for k in range(n)]


def record(messages, tools, reply, out_ids, seed, *, engine_prompt: list[int] | None = None,
           mask: list[int] | None = None, logprobs_field: str = "per_token_logps") -> dict[str, Any]:
    """One trace record. Seed shape unless ``engine_prompt`` (contract shape) is given."""
    lps = _logps(len(out_ids), seed)
    rec: dict[str, Any] = {
        "request": {"model": MODEL, "messages": messages, **({"tools": tools} if tools is not None else {})},
        "response": {"object": "chat.completion", "model": MODEL, "choices": [{
            "index": 0, "message": reply, "finish_reason": "tool_calls" if reply.get("tool_calls") else "stop"}]},
        "completion_tokens": [f"token_id:{i}" for i in out_ids],
        "completion_token_ids": [] if engine_prompt is None else list(out_ids),
    }
    if logprobs_field == "per_token_logps":
        rec["per_token_logps"] = lps
    else:  # the logprob entries only: TRL 1.14 reads per_token_logps and sees none
        rec["logprobs"] = [{"token": f"token_id:{i}", "logprob": lp} for i, lp in zip(out_ids, lps)]
    if engine_prompt is not None:
        rec["prompt_token_ids"] = list(engine_prompt)
        rec["loss_mask"] = [0] * len(engine_prompt) + (mask if mask is not None else [1] * len(out_ids))
    return rec


def seed_opencode(tok, pieces: bool = True) -> list[dict[str, Any]]:
    """Title call; bash (canonical → CLEAN next); write sampled with ``<tool_call>`` as pieces
    (→ REALIGN next); a text-only answer (no tool call); a last bash call whose record has
    logprob entries but no ``per_token_logps``. ``pieces=False``: the write call sampled as the
    template renders it (the special token), what the special-token what-if should reproduce."""
    a1 = call("bash", "c1", command="ls")
    t1 = result("c1", "README.md")
    a2 = call("write", "c2", filePath="solution.py", content="print(sum(map(int, input().split())))\n")
    t2 = result("c2", "Wrote file successfully.")
    a3 = {"role": "assistant", "content": "solution.py is written; it prints the sum."}
    u4 = {"role": "user", "content": "Run it on `1 2` to check."}
    a4 = call("bash", "c4", command="echo 1 2 | python solution.py")
    title_msgs = [{"role": "system", "content": TITLE}, {"role": "user", "content": "Generate a title: " + U["content"]}]
    m1, m2 = [S, U], [S, U, a1, t1]
    m3, m4 = m2 + [a2, t2], m2 + [a2, t2, a3, u4]
    title_reply = {"role": "assistant", "content": "Sum two integers"}
    return [
        record(title_msgs, None, title_reply, sampled(tok, title_msgs, None, title_reply), 0),
        record(m1, TOOLS, a1, sampled(tok, m1, TOOLS, a1), 1),
        record(m2, TOOLS, a2, (as_pieces if pieces else lambda _t, x: x)(tok, sampled(tok, m2, TOOLS, a2)), 2),
        record(m3, TOOLS, a3, sampled(tok, m3, TOOLS, a3), 3),
        record(m4, TOOLS, a4, sampled(tok, m4, TOOLS, a4), 4, logprobs_field="logprobs"),
    ]


def seed_compaction(tok) -> list[dict[str, Any]]:
    """Two bash calls, a summariser call, then the agent after compaction: its history is
    rewritten (opencode's synthetic summary turns), so its prompt breaks early → FORK; a
    text-only last answer."""
    a1 = call("bash", "c1", command="ls")
    t1 = result("c1", "README.md")
    a2 = call("read", "c2", filePath="README.md")
    m1, m2 = [S, U], [S, U, a1, t1]
    summ_msgs = [{"role": "system", "content": SUMMARISER},
                 {"role": "user", "content": "Here is the conversation so far:\n\n<conversation>listed files, read "
                                             "README</conversation>"}]
    summ = {"role": "assistant", "content": "We listed the files and read README.md; solution.py is next."}
    post = [S, {"role": "user", "content": "What did we do so far?"}, summ,
            {"role": "user", "content": "Continue if you have next steps, or stop and ask for clarification if "
                                        "you are unsure how to proceed."}]
    a3 = call("write", "c3", filePath="solution.py", content="print(sum(map(int, input().split())))\n")
    t3 = result("c3", "Wrote file successfully.")
    a4 = {"role": "assistant", "content": "Done: solution.py prints the sum."}
    m4 = post + [a3, t3]
    return [
        record(m1, TOOLS, a1, sampled(tok, m1, TOOLS, a1), 11),
        record(m2, TOOLS, a2, sampled(tok, m2, TOOLS, a2), 12),
        record(summ_msgs, TOOLS, summ, sampled(tok, summ_msgs, TOOLS, summ), 13),
        record(post, TOOLS, a3, sampled(tok, post, TOOLS, a3), 14),
        record(m4, TOOLS, a4, sampled(tok, m4, TOOLS, a4), 15),
    ]


def contract_masks(tok) -> list[dict[str, Any]]:
    """Capture-contract records (engine prompt ids, per-token loss masks with zeros inside the
    output). The second output samples ``<tool_call>`` as pieces, so the third prompt (the
    engine's render) REALIGNs it away; only its mask-1 tokens lose a gradient."""
    a1 = call("bash", "c1", command="ls")
    t1 = result("c1", "README.md")
    a2 = call("bash", "c2", command="cat README.md")
    t2 = result("c2", "# adder")
    a3 = {"role": "assistant", "content": "The repository holds only a README."}
    m1, m2, m3 = [S, U], [S, U, a1, t1], [S, U, a1, t1, a2, t2]
    o1, o2, o3 = sampled(tok, m1, TOOLS, a1), as_pieces(tok, sampled(tok, m2, TOOLS, a2)), sampled(tok, m3, TOOLS, a3)
    k1 = [0 if i < 3 else 1 for i in range(len(o1))]           # the tool-call opening masked out
    k2 = [1 if i % 3 else 0 for i in range(len(o2))]           # every third token masked out
    k3 = [1] * (len(o3) - 1) + [0]                               # the end token masked out
    return [
        record(m1, TOOLS, a1, o1, 21, engine_prompt=_ids(tok, m1, TOOLS, True), mask=k1),
        record(m2, TOOLS, a2, o2, 22, engine_prompt=_ids(tok, m2, TOOLS, True), mask=k2),
        record(m3, TOOLS, a3, o3, 23, engine_prompt=_ids(tok, m3, TOOLS, True), mask=k3),
    ]


CASES = {"seed-opencode": seed_opencode, "seed-compaction": seed_compaction, "contract-masks": contract_masks}


def write_case(folder: Path, records: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trace.json").write_text(json.dumps(records, indent=1))
    return folder
