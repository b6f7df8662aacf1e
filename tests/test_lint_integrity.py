"""Integrity rules that name the offending tokens (issue 40, part 2; docs/LINT.md RI014-RI017 and the
token lists of RI011 / RI013). Each rule fires on a copy of a real capture with values changed by hand
(json, in tmp_path: the edit is said in each test), naming the tokens the edit chose; expected positions
come from the raw trace read here (``prompt_token_ids``, the logprob entries' ``bytes``), never from our
reader. Each rule stays quiet on the bundled samples and the captures / token exports in tests/data.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from viewer.cli import main
from viewer.config import SAMPLE_DIR, Settings
from viewer.lint import lint_source
from viewer.lint.integrity import blocks

REPO = Path(__file__).resolve().parent.parent
SMOL = SAMPLE_DIR / "smollm2"
NEW = ("RI014", "RI015", "RI016", "RI017", "RI018")


def _copy(src: Path, tmp: Path) -> Path:
    """The capture's trace alone (turns.json would carry its own copy of the values an edit changes)."""
    dst = tmp / "cap"
    shutil.copytree(src, dst)
    (dst / "turns.json").unlink(missing_ok=True)
    return dst


def _recs(cap: Path) -> list[dict]:
    return json.loads((cap / "trace.json").read_text())


def _save(cap: Path, recs: list[dict]) -> None:
    (cap / "trace.json").write_text(json.dumps(recs))


def _entries(rec: dict) -> list[dict]:
    e = rec["logprobs"]
    return e["content"] if isinstance(e, dict) else e


def _set_lp(rec: dict, j: int, v: float) -> None:
    """One logprob changed in both copies the record keeps (per_token_logps and its entry)."""
    rec["per_token_logps"][j] = v
    _entries(rec)[j]["logprob"] = v


def _hits(src: Path, rule: str) -> list[dict]:
    return lint_source(src, Settings(), select=(rule,))["hits"]


def _plen(rec: dict) -> int:
    return len(rec["prompt_token_ids"])


# ---- quiet on every bundled sample and real capture ----------------------------------------

_REAL = [SAMPLE_DIR / p.name for p in sorted(SAMPLE_DIR.iterdir()) if (p / "trace.json").is_file()] + [
    REPO / "tests" / "data" / "capture_ours", REPO / "tests" / "data" / "capture_openenv",
    # real engine logprobs: a vLLM reply with runs of exact 0.0 (8 in a row), prime-rl token exports
    REPO / "tests/data/realworld/nemo_gym/competitive_coding_challenges.example_rollouts.jsonl",
    *sorted((REPO / "tests/data/realworld/prime_rl").glob("*/token_exports/*/*.jsonl"))]


@pytest.mark.parametrize("src", _REAL, ids=lambda p: p.name)
def test_no_integrity_rule_fires_on_real_data(src):
    res = lint_source(src, Settings(), select=NEW + ("RI011", "RI013"))
    assert res["totals"]["rollouts"] >= 1 and res["hits"] == []


def test_real_reply_has_the_zero_runs_the_threshold_allows():
    # the threshold's reason, read from the raw file: real exact-0.0 runs stay below RI014's 32
    best = 0
    for line in (REPO / "tests/data/realworld/nemo_gym/competitive_coding_challenges.example_rollouts.jsonl"
                 ).read_text().splitlines():
        for item in json.loads(line)["response"]["output"]:
            run = 0
            for v in item.get("generation_log_probs") or []:
                run = run + 1 if v == 0.0 else 0
                best = max(best, run)
    assert 4 <= best < 32


def test_hit_keys_are_the_documented_ones(tmp_path, capsys):
    section = (REPO / "docs" / "CLI.md").read_text().split("### `lint --json`", 1)[1]
    keys = re.search(r"each `\{([a-z_, ]+)\}`", section.replace("\n", " ")).group(1).split(", ")
    cap = _copy(SMOL, tmp_path)
    recs = _recs(cap)
    recs[2]["per_token_logps"][7] -= 1.0
    _save(cap, recs)
    assert main(["lint", str(cap), "--json", "--select", "RI017"]) == 1
    hits = json.loads(capsys.readouterr().out)["hits"]
    assert hits and all(list(h) == keys for h in hits)


# ---- RI014 zero-filled / constant logprobs ------------------------------------------------------

def test_zero_filled_run_on_trained_tokens(tmp_path, capsys):
    """smollm2 sample, turn 1: logprobs 10..49 set to 0.0 (a zero-filled stretch)."""
    cap = _copy(SMOL, tmp_path)
    recs = _recs(cap)
    for j in range(10, 50):
        _set_lp(recs[1], j, 0.0)
    _save(cap, recs)
    hits = _hits(cap, "RI014")
    p = _plen(recs[1])
    assert [(h["turn"], h["tokens"]) for h in hits] == [(1, list(range(p + 10, p + 50)))]
    assert "40 trained tokens in a row have logprob exactly 0.0" in hits[0]["message"]
    assert f"tok={p + 10}-{p + 49}" in hits[0]["link"] and hits[0]["level"] == "error"
    assert main(["lint", str(cap), "--select", "RI014", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["hits"][0]["tokens"][0] == p + 10 and doc["hits"][0]["tokens_total"] == 40


def test_run_below_the_threshold_is_quiet(tmp_path):
    """smollm2 sample, turn 1: 31 zeros in a row, one short of RI014's run: a sure stretch may be real."""
    cap = _copy(SMOL, tmp_path)
    recs = _recs(cap)
    for j in range(10, 41):
        _set_lp(recs[1], j, 0.0)
    _save(cap, recs)
    assert _hits(cap, "RI014") == []


def test_grammar_masked_sampler_values_are_quiet(tmp_path):
    """smollm2 sample with its sampler_logps (the sampler's grammar-masked values: a forced token gets 0.0)
    as the logprobs, the capture a --no-rescore run writes: many exact zeros, but real ones."""
    cap = _copy(SMOL, tmp_path)
    recs = _recs(cap)
    for r in recs:
        for j, v in enumerate(r["sampler_logps"]):
            _set_lp(r, j, v)
    _save(cap, recs)
    zeros = sum(v == 0.0 for v in recs[1]["sampler_logps"])
    assert zeros >= 0.3 * len(recs[1]["sampler_logps"])
    assert _hits(cap, "RI014") == []


def test_one_constant_on_most_of_a_turn(tmp_path):
    """smollm2 sample, turn 2 (75 tokens): every logprob but each 12th set to -0.6931 (no run of 32,
    but >= 90% of the turn)."""
    cap = _copy(SMOL, tmp_path)
    recs = _recs(cap)
    n = len(recs[2]["completion_token_ids"])
    changed = [j for j in range(n) if j % 12]
    for j in changed:
        _set_lp(recs[2], j, -0.6931)
    _save(cap, recs)
    assert len(changed) >= 0.9 * n
    hits = _hits(cap, "RI014")
    p = _plen(recs[2])
    assert [(h["turn"], h["tokens"]) for h in hits] == [(2, [p + j for j in changed])]
    assert f"{len(changed)} of {n} trained tokens" in hits[0]["message"]


def test_zero_filled_untrained_call_is_not_ri014(tmp_path):
    """smollm2 sample, turn 0 (the title call, never trained): every logprob set to 0.0."""
    cap = _copy(SMOL, tmp_path)
    recs = _recs(cap)
    for j in range(len(recs[0]["per_token_logps"])):
        _set_lp(recs[0], j, 0.0)
    _save(cap, recs)
    assert _hits(cap, "RI014") == []


# ---- RI015 a block cut by the mask ----------------------------------------------------------------

def _token_texts(rec: dict) -> list[str]:
    return [bytes(e["bytes"]).decode("utf-8", "replace") for e in _entries(rec)]


def _block_tokens(texts: list[str], start: str, end: str) -> list[int]:
    """Output positions of the tokens overlapping ``start``..``end`` in the reply's text (from raw bytes)."""
    text = "".join(texts)
    a = text.index(start)
    b = text.index(end, a) + len(end)
    out, pos = [], 0
    for j, s in enumerate(texts):
        if pos < b and pos + len(s) > a:
            out.append(j)
        pos += len(s)
    return out


def test_tool_call_block_cut_by_the_mask(tmp_path):
    """smollm2 sample, turn 1 (a <tool_call> reply): a loss_mask added that leaves the call's "filePath"
    argument as context and trains the rest."""
    cap = _copy(SMOL, tmp_path)
    recs = _recs(cap)
    texts = _token_texts(recs[1])
    block = _block_tokens(texts, "<tool_call>", "</tool_call>")
    args = _block_tokens(texts, '"filePath"', 'solution.py"')
    recs[1]["loss_mask"] = [0 if j in args else 1 for j in range(len(texts))]
    _save(cap, recs)
    hits = _hits(cap, "RI015")
    p = _plen(recs[1])
    assert len(args) < len(block) / 2 < len(block)
    assert [(h["turn"], h["tokens"]) for h in hits] == [(1, [p + j for j in args])]
    assert "tool-call block left as context" in hits[0]["message"]


def test_tool_call_block_partly_trained_in_a_context_reply(tmp_path):
    """smollm2 sample, turn 1: a loss_mask added that trains only the first 5 tokens after <tool_call>."""
    cap = _copy(SMOL, tmp_path)
    recs = _recs(cap)
    texts = _token_texts(recs[1])
    block = _block_tokens(texts, "<tool_call>", "</tool_call>")
    on = block[6:11]
    recs[1]["loss_mask"] = [1 if j in on else 0 for j in range(len(texts))]
    _save(cap, recs)
    hits = _hits(cap, "RI015")
    p = _plen(recs[1])
    assert [(h["turn"], h["tokens"]) for h in hits] == [(1, [p + j for j in on])]
    assert "trained where the mask leaves the rest of the block as context" in hits[0]["message"]


def test_tool_call_block_masked_whole_in_a_trained_reply(tmp_path):
    """smollm2 sample, turn 1 (content "", the reply a tool call): a loss_mask added that masks the whole
    tool-call block and trains the rest (the end token), as a mask built from the content text does."""
    cap = _copy(SMOL, tmp_path)
    recs = _recs(cap)
    texts = _token_texts(recs[1])
    block = _block_tokens(texts, "<tool_call>", "</tool_call>")
    recs[1]["loss_mask"] = [0 if j in block else 1 for j in range(len(texts))]
    _save(cap, recs)
    hits = _hits(cap, "RI015")
    p = _plen(recs[1])
    assert len(block) < len(texts)
    assert [(h["turn"], h["tokens"]) for h in hits] == [(1, [p + j for j in block])]
    assert f"the {len(block)} tokens of a tool-call block left as context beside trained" in hits[0]["message"]


def test_end_token_masked_alone_is_quiet(tmp_path):
    """smollm2 sample, turn 1: a loss_mask added that trains the tool-call block and masks the tokens after
    it (the end token): no block is cut or left out."""
    cap = _copy(SMOL, tmp_path)
    recs = _recs(cap)
    texts = _token_texts(recs[1])
    block = set(_block_tokens(texts, "<tool_call>", "</tool_call>"))
    recs[1]["loss_mask"] = [1 if j in block else 0 for j in range(len(texts))]
    _save(cap, recs)
    assert len(block) < len(texts) and _hits(cap, "RI015") == []


def test_blocks_found_on_token_texts():
    # hand-made token texts (Qwen3's single-token markers): the reply opens inside reasoning the template
    # started in the prompt, and a tool call is cut off by the output limit
    texts = ["Let", " me", " look", "</think>", "\n\n", "<tool_call>", "\n{\"name\"", ": \"ls\"}"]
    assert blocks(texts) == [("reasoning", [0, 1, 2, 3]), ("tool-call", [5, 6, 7])]
    assert blocks(["<", "think", ">", "a", "</", "think", ">", "b"]) == [("reasoning", [0, 1, 2, 3, 4, 5, 6])]
    assert blocks(["plain", " text", "</tool_call>"]) == []


# ---- RI016 placeholders on masked positions --------------------------------------------------------

def test_placeholder_zeros_on_masked_positions(tmp_path):
    """smollm2 sample, turn 1: a loss_mask added that masks positions 60..79, whose logprobs are set to 0.0
    (a placeholder, as a trainer that scores only trained tokens leaves there)."""
    cap = _copy(SMOL, tmp_path)
    recs = _recs(cap)
    n = len(recs[1]["completion_token_ids"])
    recs[1]["loss_mask"] = [0 if 60 <= j < 80 else 1 for j in range(n)]
    for j in range(60, 80):
        _set_lp(recs[1], j, 0.0)
    _save(cap, recs)
    hits = _hits(cap, "RI016")
    p = _plen(recs[1])
    assert [(h["turn"], h["tokens"]) for h in hits] == [(1, list(range(p + 60, p + 80)))]
    assert "20 of 20 masked tokens carry logprob exactly 0.0" in hits[0]["message"]


def test_floor_value_on_one_masked_position(tmp_path):
    """smollm2 sample, turn 1: positions 60..79 masked (values kept) and position 65 set to -9999.0."""
    cap = _copy(SMOL, tmp_path)
    recs = _recs(cap)
    n = len(recs[1]["completion_token_ids"])
    recs[1]["loss_mask"] = [0 if 60 <= j < 80 else 1 for j in range(n)]
    _save(cap, recs)
    assert _hits(cap, "RI016") == []  # masked, but real values: nothing to flag
    _set_lp(recs[1], 65, -9999.0)
    _save(cap, recs)
    hits = _hits(cap, "RI016")
    assert [(h["turn"], h["tokens"]) for h in hits] == [(1, [_plen(recs[1]) + 65])]


# ---- RI017 ids and logprobs out of step ---------------------------------------------------------------

def test_entries_shifted_against_the_ids(tmp_path):
    """smollm2 sample, turn 3: the logprob entries from position 20 on moved one place later (a token
    re-tokenised into two pieces before them), the ids and per_token_logps left as recorded."""
    cap = _copy(SMOL, tmp_path)
    recs = _recs(cap)
    ents = _entries(recs[3])
    ids = recs[3]["completion_token_ids"]
    n = len(ids)
    shifted = ents[:20] + [dict(ents[19])] + ents[20:n - 1]
    if isinstance(recs[3]["logprobs"], dict):
        recs[3]["logprobs"]["content"] = shifted
    else:
        recs[3]["logprobs"] = shifted
    _save(cap, recs)
    want = [j for j in range(n) if shifted[j]["token"] != f"token_id:{ids[j]}"]
    hits = _hits(cap, "RI017")
    p = _plen(recs[3])
    assert want and [h["tokens"] for h in hits if "tokens name other ids" in h["message"]] == \
        [[p + j for j in want]]
    assert all(h["turn"] == 3 for h in hits)


def test_two_logprob_copies_disagree(tmp_path):
    """smollm2 sample, turn 2: per_token_logps[7] changed, its logprob entry kept."""
    cap = _copy(SMOL, tmp_path)
    recs = _recs(cap)
    recs[2]["per_token_logps"][7] -= 1.0
    _save(cap, recs)
    hits = _hits(cap, "RI017")
    assert [(h["turn"], h["tokens"]) for h in hits] == [(2, [_plen(recs[2]) + 7])]


# ---- RI011 / RI013 name their tokens ----------------------------------------------------------------

def test_non_finite_names_every_token(tmp_path):
    """smollm2 sample, turn 2: per_token_logps 5 and 9 set to NaN."""
    cap = _copy(SMOL, tmp_path)
    recs = _recs(cap)
    recs[2]["per_token_logps"][5] = recs[2]["per_token_logps"][9] = float("nan")
    _save(cap, recs)
    hits = _hits(cap, "RI011")
    p = _plen(recs[2])
    assert [h["tokens"] for h in hits] == [[p + 5, p + 9]] and f"tok={p + 5}" in hits[0]["link"]


def test_short_logprobs_name_the_tokens_without_one(tmp_path):
    """smollm2 sample, turn 2: the last 3 per_token_logps dropped."""
    cap = _copy(SMOL, tmp_path)
    recs = _recs(cap)
    n = len(recs[2]["completion_token_ids"])
    del recs[2]["per_token_logps"][-3:]
    _save(cap, recs)
    hits = [h for h in _hits(cap, "RI013") if "per_token_logps" in h["message"]]
    p = _plen(recs[2])
    assert [h["tokens"] for h in hits] == [[p + n - 3, p + n - 2, p + n - 1]]


# ---- RI018 an incomplete mark a side request caused ----------------------------------------------------

def _fail(rec: dict) -> None:
    """The record of a call the server refused, as the proxy writes one (tests/data/capture_ours turn 4)."""
    rec.update(upstream_status=500, upstream_error={"error": {"message": "engine overloaded"}},
               completion_token_ids=[], completion_tokens=[], per_token_logps=[], logprobs=None, finish_reason=None)
    rec["response"] = {"choices": [], "usage": None, "upstream_status": 500,
                       "upstream_error": {"error": {"message": "engine overloaded"}}}


def _summary(cap: Path, **kw) -> None:
    f = cap / "summary.json"
    doc = json.loads(f.read_text())
    doc.update(kw)
    f.write_text(json.dumps(doc))


def test_failed_title_call_marks_the_capture(tmp_path):
    """smollm2 sample: turn 0 (the title call) refused by the server, summary.json counting it
    (upstream_errors 1), the agent's three turns as recorded."""
    cap = _copy(SMOL, tmp_path)
    recs = _recs(cap)
    assert recs[0]["kind"] == "title"
    _fail(recs[0])
    _save(cap, recs)
    _summary(cap, upstream_errors=1, first_upstream_error="engine overloaded")
    hits = _hits(cap, "RI018")
    assert [(h["turn"], h["tokens"]) for h in hits] == [(0, [])]
    assert "upstream_errors 1" in hits[0]["message"] and "turn=0" in hits[0]["link"]


def test_title_call_cut_at_the_limit_names_its_tokens(tmp_path):
    """smollm2 sample: turn 0 (the title call) ended with finish_reason length, summary.json complete
    false and status failed."""
    cap = _copy(SMOL, tmp_path)
    recs = _recs(cap)
    recs[0]["finish_reason"] = recs[0]["response"]["choices"][0]["finish_reason"] = "length"
    _save(cap, recs)
    _summary(cap, complete=False, status="failed")
    hits = _hits(cap, "RI018")
    p, n = _plen(recs[0]), len(recs[0]["completion_token_ids"])
    assert [(h["turn"], h["tokens"]) for h in hits] == [(0, list(range(p, p + n)))]


def test_failed_agent_call_is_the_marks_own(tmp_path):
    """smollm2 sample: turn 2 (an agent call) refused, summary.json counting it: the mark is right."""
    cap = _copy(SMOL, tmp_path)
    recs = _recs(cap)
    _fail(recs[2])
    _save(cap, recs)
    _summary(cap, upstream_errors=1)
    assert _hits(cap, "RI018") == []


# ---- a dataset (no capture folder): prime-rl's own token export ------------------------------------------

PRIME = REPO / "tests/data/realworld/prime_rl/w559b447/token_exports/step_0/rank_0.jsonl"


def _prime_rows(tmp: Path, edit) -> tuple[Path, list[dict]]:
    rows = [json.loads(line) for line in PRIME.read_text().splitlines() if line.strip()]
    edit(rows)
    out = tmp / "step_0" / "rank_0.jsonl"
    out.parent.mkdir(parents=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))  # json writes NaN as Python reads it back
    return out, rows


def _first_trained_run(mask: list[bool]) -> list[int]:
    a = mask.index(True)
    b = mask.index(False, a)
    return list(range(a, b))


def test_zero_filled_inference_logprobs_in_a_token_export(tmp_path):
    """prime-rl's token export (written by prime-rl's own writer), row 0: inference_logprobs of its first
    trained run set to 0.0. The turn's tokens count over prompt + output, here the row's own positions."""
    def edit(rows):
        for j in _first_trained_run(rows[0]["loss_mask"]):
            rows[0]["inference_logprobs"][j] = 0.0
    src, rows = _prime_rows(tmp_path, edit)
    run = _first_trained_run(rows[0]["loss_mask"])
    assert len(run) >= 32
    hits = _hits(src, "RI014")
    assert [(h["row"], h["turn"], h["tokens"]) for h in hits] == [(0, 0, run)]
    assert "row=0" in hits[0]["link"] and f"tok={run[0]}-{run[-1]}" in hits[0]["link"]



def test_zero_filled_short_turns_over_the_rollout(tmp_path):
    """prime-rl's token export, row 0 (two trained runs, 35 and 19 tokens): inference_logprobs set to 0.0 on
    the first 31 of the first run (under 90% of it, no run of 32) and on all of the second (too short to
    judge alone): over the rollout, >= 90% of its trained tokens."""
    def runs(mask):
        first = _first_trained_run(mask)
        a = mask.index(True, first[-1] + 1)
        return first, list(range(a, mask.index(False, a) if False in mask[a:] else len(mask)))

    def edit(rows):
        first, second = runs(rows[0]["loss_mask"])
        for j in first[:31] + second:
            rows[0]["inference_logprobs"][j] = 0.0
    src, rows = _prime_rows(tmp_path, edit)
    first, second = runs(rows[0]["loss_mask"])
    assert len(first) >= 32 > len(second) and 31 < 0.9 * len(first)
    assert 31 + len(second) >= 0.9 * (len(first) + len(second))
    hits = _hits(src, "RI014")
    # turn 1's tokens count over its own prompt (the row up to its trained run) + output: the row's positions
    assert [(h["turn"], h["tokens"]) for h in hits] == [(0, first[:31]), (1, second)]
