"""TRL's own released code as a test oracle: how a coding-agent rollout becomes training rows.

Run inside the isolated oracle environment (scripts/setup_oracle.sh), choosing the TRL release by path:

    PYTHONPATH=.venv-trl/trl-1.14.0 .venv-trl/bin/python tests/oracle/trl_oracle.py < cases.json > results.json

Deliberately independent of the app: imports nothing from `viewer`. Input `{"cases": [case, ...]}`, output
`{"trl_version": ..., "results": [result, ...]}` in the same order; stdout carries that JSON only, logs go to stderr.

case = {"name", "trace": path (.json array or .jsonl), "mode": "trl-message" | "trl-contract",
        "train_turns": "all" | "tool-calls" (message mode), "fork_threshold": int,
        "tokenizer": folder (message mode), "masks": {"<record index>": [0/1 per output token]} (contract, optional)}

Message mode (TRL 1.14): `_turns_from_trace(agent entries, tokenizer, has_tool_call | None)`.
Contract mode (TRL >= 1.15): OpenEnv `TrainingTrace` -> `_turns_from_training_trace`.
Both: `_chain_to_sequences(turns, "oracle", fork_threshold)`, with a pass-through wrapper on
`_SampleBuilder.classify_token_drift` recording each transition's (kind, drift).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _log(*args) -> None:
    print("trl_oracle:", *args, file=sys.stderr, flush=True)


_t0 = time.monotonic()
# Anything a library prints to stdout while importing must not corrupt our JSON: park stdout on stderr meanwhile.
_real_stdout = sys.stdout
sys.stdout = sys.stderr
try:
    import trl
    from trl.experimental.async_grpo import async_rollout_worker as W
    from trl.experimental.async_grpo import openenv_harness as H
finally:
    sys.stdout = _real_stdout
_log(f"trl {trl.__version__} imported in {time.monotonic() - _t0:.1f}s")

# ---- drift-kind recorder: a pass-through around TRL's own classifier ------------------------------------------
_KINDS: list[list] = []
_orig_classify = W._SampleBuilder.classify_token_drift


def _recording_classify(self, turn):
    result = _orig_classify(self, turn)
    kind, drift = result
    _KINDS.append([kind.value, int(drift)])
    return result


W._SampleBuilder.classify_token_drift = _recording_classify


# ---- inputs ---------------------------------------------------------------------------------------------------
def load_records(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if not path.endswith(".jsonl"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, list):
            return data
        if isinstance(data, dict) and not text.strip().count("\n"):
            return [data]  # a one-line .jsonl under another name
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _system_content(messages: list) -> object:
    """Content of the first system-role message; a list of parts is joined by their `text`. None when absent."""
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "system":
            content = m.get("content")
            if isinstance(content, list):
                return "".join(
                    str(p.get("text") or "") if isinstance(p, dict) else str(p) for p in content
                )
            return content
    return None


def agent_entries(records: list[dict]) -> list[tuple[int, dict]]:
    """The TRL opencode example's `agent_turn_fn`: anchor on the first tool-enabled request's system prompt and keep
    the requests with messages, tools and that same system prompt, in file order. Returns (record index, record)."""
    primary = None
    for rec in records:
        req = rec.get("request") or {}
        if req.get("messages") and req.get("tools"):
            primary = _system_content(req["messages"])
            break
    kept = []
    for i, rec in enumerate(records):
        req = rec.get("request") or {}
        if req.get("messages") and req.get("tools") and _system_content(req["messages"]) == primary:
            kept.append((i, rec))
    return kept


def output_ids(rec: dict) -> list[int]:
    ids = rec.get("completion_token_ids") or []
    if ids:
        return list(ids)
    return [
        int(t[len("token_id:"):]) for t in (rec.get("completion_tokens") or []) if str(t).startswith("token_id:")
    ]


_TOKENIZERS: dict = {}


def tokenizer_for(path: str):
    if path not in _TOKENIZERS:
        from transformers import AutoTokenizer

        t = time.monotonic()
        _TOKENIZERS[path] = AutoTokenizer.from_pretrained(path)
        _log(f"tokenizer {path} loaded in {time.monotonic() - t:.1f}s")
    return _TOKENIZERS[path]


# ---- the two modes --------------------------------------------------------------------------------------------
def _need(module, name: str, mode: str):
    fn = getattr(module, name, None)
    if fn is None:
        raise RuntimeError(f"{mode} needs {module.__name__}.{name}, which trl {trl.__version__} does not have")
    return fn


def message_turns(case: dict, kept: list[tuple[int, dict]]):
    turns_from_trace = _need(H, "_turns_from_trace", "trl-message")
    train_turns = case.get("train_turns", "all")
    if train_turns not in ("all", "tool-calls"):
        raise ValueError(f"train_turns must be 'all' or 'tool-calls', not {train_turns!r}")
    train_fn = H.has_tool_call if train_turns == "tool-calls" else None
    entries = [rec for _, rec in kept]
    turns = turns_from_trace(entries, tokenizer_for(case["tokenizer"]), train_fn)
    if train_fn is None:
        chain = [i for i, _ in kept]
    else:
        chain = [i for i, rec in kept if train_fn(H._entry_to_turn(rec))]
    return turns, chain


def contract_turns(case: dict, kept: list[tuple[int, dict]]):
    turns_from_training_trace = _need(H, "_turns_from_training_trace", "trl-contract")
    from openenv.core.harness.training import TrainingTrace, TrainingTurn

    masks = case.get("masks") or {}
    built = []
    for i, rec in kept:
        prompt = rec.get("prompt_token_ids")
        completion = output_ids(rec)
        if "loss_mask" in rec and rec["loss_mask"] is not None:
            loss_mask = rec["loss_mask"]
        else:
            out_mask = masks.get(str(i))
            out_mask = list(out_mask) if out_mask is not None else [1] * len(completion)
            loss_mask = [0] * (len(prompt) if isinstance(prompt, list) else 0) + out_mask
        built.append(
            TrainingTurn(
                node_id=f"n{i}",
                prompt_token_ids=prompt,
                completion_token_ids=completion,
                per_token_logps=rec.get("per_token_logps"),
                loss_mask=loss_mask,
            )
        )
    trace = TrainingTrace(turns=built)
    return turns_from_training_trace(trace), [i for i, _ in kept]


def _plain(x):
    return x.tolist() if hasattr(x, "tolist") else list(x)


def run_case(case: dict) -> dict:
    name = case.get("name")
    mode = case.get("mode")
    records = load_records(case["trace"])
    kept = agent_entries(records)
    if mode == "trl-message":
        turns, chain = message_turns(case, kept)
    elif mode == "trl-contract":
        turns, chain = contract_turns(case, kept)
    else:
        raise ValueError(f"mode must be 'trl-message' or 'trl-contract', not {mode!r}")
    _KINDS.clear()
    sequences, tally = W._chain_to_sequences(turns, "oracle", int(case.get("fork_threshold", 1024)))
    kinds = [list(k) for k in _KINDS]
    rows = [
        {
            "input_ids": [int(v) for v in _plain(s.input_ids)],
            "completion_mask": [int(v) for v in _plain(s.completion_mask)],
            "old_log_probs": [float(v) for v in _plain(s.old_log_probs)],
        }
        for s in sequences
    ]
    appended = 0
    for t in turns:
        mask = getattr(t, "output_mask", None)
        appended += int(sum(mask)) if mask is not None else len(t.output_ids)
    kept_trained = sum(sum(r["completion_mask"]) for r in rows)
    return {
        "name": name,
        "rows": rows,
        "tally": tally,
        "kinds": kinds,
        "chain_records": chain,
        "kept_records": [i for i, _ in kept],
        "appended_trained": appended,
        "kept_trained": kept_trained,
        "tokens_losing_gradient": appended - kept_trained,
    }


def main() -> int:
    payload = json.load(sys.stdin)
    results = []
    for case in payload.get("cases", []):
        t = time.monotonic()
        try:
            real_stdout, sys.stdout = sys.stdout, sys.stderr  # keep stdout for the JSON only
            try:
                result = run_case(case)
            finally:
                sys.stdout = real_stdout
        except Exception as exc:  # TRL or OpenEnv validation raised: report it for this case, go on with the batch
            _log(f"case {case.get('name')!r} raised:\n{traceback.format_exc()}")
            result = {"name": case.get("name"), "error": f"{type(exc).__name__}: {exc}"}
        _log(f"case {case.get('name')!r}: {time.monotonic() - t:.2f}s")
        results.append(result)
    json.dump({"trl_version": trl.__version__, "results": results}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
