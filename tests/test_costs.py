"""What each cause costs (viewer/drift/costs.py, whatif.py): a hand-worked case whose per-cause counts,
sweep points and what-if recoveries are worked out below by hand from the construction; the sweep
equal to separate ``drift --fork-threshold N`` runs through the CLI's JSON; the causes summing to the
total. Agreement with TRL itself at two thresholds is in tests/test_trainer_oracle.py."""
from __future__ import annotations

import json
import math

import pytest

from viewer.config import SAMPLE_DIR
from viewer.drift.costs import lost_by_cause, merge_gradient, new_gradient_block, parse_thresholds, sweep
from viewer.drift.rows import TrainerTurn, stitch
from viewer.drift.whatif import spell_special_tokens

SAMPLE = SAMPLE_DIR / "qwen3-tiny"


def _ids(tok, pieces: list[str]) -> list[int]:
    ids = tok.convert_tokens_to_ids(pieces)
    assert None not in ids and tok.unk_token_id not in ids, pieces
    return list(ids)


@pytest.fixture(scope="module")
def hand(qwen3):
    """Four turns, mask 1 everywhere (TRL 1.14):

    A: output ``Sure ! < tool _call > ls <|im_end|>`` (8 ids; ``<tool_call>`` sampled as 4 pieces);
    B: its prompt holds A's output with ``<tool_call>`` as the one special token → REALIGN at A's
       output index 2: A's last **6** tokens lose their gradient, cause ``special_token``, drift 6;
    B: output ``Done Ġhel lo <|im_end|>`` (4 ids); C's prompt holds ``Done Ġhello <|im_end|>`` →
       REALIGN at index 1: B's last **3** tokens lose theirs, cause ``retokenized``, drift 3;
    D: a rewritten history (a summary system prompt) → FORK, nothing lost.
    Total 9 = 6 + 3."""
    tok = qwen3
    enc = lambda s: list(tok.encode(s, add_special_tokens=False))  # noqa: E731
    pa = enc("<|im_start|>user\nlist the files<|im_end|>\n<|im_start|>assistant\n")
    oa = _ids(tok, ["Sure", "!", "<", "tool", "_call", ">", "ls", "<|im_end|>"])
    pb = pa + _ids(tok, ["Sure", "!", "<tool_call>", "ls", "<|im_end|>"]) + enc(
        "\n<|im_start|>user\nok<|im_end|>\n<|im_start|>assistant\n")
    ob = _ids(tok, ["Done", "Ġhel", "lo", "<|im_end|>"])
    pc = pb + _ids(tok, ["Done", "Ġhello", "<|im_end|>"]) + enc("\n<|im_start|>user\nthanks<|im_end|>\n"
                                                                "<|im_start|>assistant\n")
    oc = _ids(tok, ["ok", "<|im_end|>"])
    pd = enc("<|im_start|>system\nsummary of the work<|im_end|>\n<|im_start|>assistant\n")
    od = _ids(tok, ["ok", "<|im_end|>"])
    turns = [TrainerTurn(1, pa, oa, [-0.1] * 8), TrainerTurn(2, pb, ob, [-0.2] * 4),
             TrainerTurn(3, pc, oc, [-0.3] * 2), TrainerTurn(4, pd, od, [-0.4] * 2)]
    return tok, turns


def test_hand_worked_losses_by_cause(hand):
    tok, turns = hand
    rows = stitch(turns, fork_threshold=1024)
    lost = lost_by_cause(turns, rows, tok)
    assert [(x.turn, x.at_turn, x.tokens, x.cause, x.drift) for x in lost] == [
        (1, 2, 6, "special_token", 6), (2, 3, 3, "retokenized", 3)]
    assert sum(x.tokens for x in lost) == rows.tokens_losing_gradient == 9


def test_hand_worked_sweep(hand):
    """Threshold 0: every drift forks (4 rows, 3 forks, 0 lost); 4: B's drift 6 forks, C's drift 3
    realigns (3 rows, 2 forks, 3 lost); inf: both realign, D forks (2 rows, 1 fork, 9 lost)."""
    _, turns = hand
    got = sweep(turns, (0, 4, math.inf), validate=False)
    assert [(p["fork_threshold"], p["rows"], p["forked_rows"], p["tokens_losing_gradient"]) for p in got] == [
        (0, 4, 3, 0), (4, 3, 2, 3), ("inf", 2, 1, 9)]
    assert all(p["trained_tokens"] == 16 for p in got)  # 8 + 4 + 2 + 2 appended with mask 1


def test_special_token_spelling_on_the_hand_case(hand):
    """The 4 pieces of ``<tool_call>`` become the one special id; A then matches B's prompt, so only
    B's 3 retokenised tokens are lost: the what-if recovers the 6 special_token ones."""
    from viewer.tokenizer import token_table

    tok, turns = hand
    tc = tok.convert_tokens_to_ids("<tool_call>")
    spelled = spell_special_tokens(turns[0].output_ids, tok, token_table(tok))
    assert spelled == _ids(tok, ["Sure", "!"]) + [tc] + _ids(tok, ["ls", "<|im_end|>"])
    fixed = [TrainerTurn(1, turns[0].prompt_ids, spelled, [-0.1] * 5), *turns[1:]]
    assert stitch(fixed, fork_threshold=1024).tokens_losing_gradient == 3


def test_parse_thresholds():
    assert parse_thresholds("0,64, 256,1024,inf") == (0, 64, 256, 1024, math.inf)
    for bad, needle in (("0,x", "'x' is not a whole number"), ("-1", "negative"), ("64,64", "distinct")):
        with pytest.raises(ValueError, match=needle):
            parse_thresholds(bad)


def _cli(capsys, *argv) -> dict:
    from viewer.cli import main

    assert main([str(a) for a in argv] + ["--json", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("sample,trainer", [("qwen3-tiny", "trl-message"), ("qwen3-tiny", "trl-contract"),
                                            ("smollm2", "trl-message")])
def test_each_sweep_point_equals_a_separate_cli_run(capsys, sample, trainer):
    src = SAMPLE_DIR / sample
    doc = _cli(capsys, "drift", src, "--trainer", trainer, "--sweep-fork-threshold", "0,64,256,1024,inf",
               "--no-what-if")
    pts = doc["gradient"]["sweep"]
    assert [p["fork_threshold"] for p in pts] == [0, 64, 256, 1024, "inf"]
    for p in pts:
        # inf: no drift forks by size, as a threshold above every token count of the rollout
        n = 10 ** 9 if p["fork_threshold"] == "inf" else p["fork_threshold"]
        one = _cli(capsys, "drift", src, "--trainer", trainer, "--fork-threshold", n, "--no-what-if")
        t = one["totals"]
        assert (p["rows"], p["forked_rows"], p["tokens_losing_gradient"]) == (
            t["rows"], t["forked_rows"], t["tokens_losing_gradient"]), p
        assert sum(one["gradient"]["by_cause"].values()) == t["tokens_losing_gradient"]
    assert len({p["tokens_losing_gradient"] for p in pts}) > 1  # the sweep moves on these samples


@pytest.mark.parametrize("case", ["seed-opencode", "seed-compaction", "contract-masks"])
def test_sweep_points_equal_separate_runs_on_the_seed_shape_traces(capsys, tmp_path, qwen3, case):
    """The hand-built traces of tests/_trainer_cases.py (REALIGN, FORK by compaction, per-token masks),
    under the trainer each supports (their TRL results: tests/test_trainer_oracle.py)."""
    from _trainer_cases import CASES, write_case

    from viewer.tokenizer import qwen3_dir

    src = write_case(tmp_path / case, CASES[case](qwen3))
    trainer = "trl-contract" if case == "contract-masks" else "trl-message"
    common = ["--tokenizer", str(qwen3_dir()), "--trainer", trainer, "--no-what-if"]
    if trainer == "trl-message":
        common += ["--train-turns", "all"]
    pts = _cli(capsys, "drift", src, *common, "--sweep-fork-threshold", "0,8,64,1024,inf")["gradient"]["sweep"]
    for p in pts:
        n = 10 ** 9 if p["fork_threshold"] == "inf" else p["fork_threshold"]
        one = _cli(capsys, "drift", src, *common, "--fork-threshold", n)
        t = one["totals"]
        assert (p["rows"], p["forked_rows"], p["tokens_losing_gradient"]) == (
            t["rows"], t["forked_rows"], t["tokens_losing_gradient"]), p
        assert sum(one["gradient"]["by_cause"].values()) == t["tokens_losing_gradient"]


def test_causes_sum_to_the_total_and_name_the_turn(capsys):
    doc = _cli(capsys, "drift", SAMPLE, "--trainer", "trl-message")
    g, t = doc["gradient"], doc["totals"]
    assert g["tokens_losing_gradient"] == t["tokens_losing_gradient"] == sum(g["by_cause"].values()) > 0
    assert sum(x["tokens"] for x in g["by_turn"]) == t["tokens_losing_gradient"]
    # the sample spells <tool_call> as pieces (sample_data/README.md): that is what the REALIGN cuts at
    assert g["by_cause"] == {"special_token": t["tokens_losing_gradient"]}
    realigned = [r for r in doc["turns"] if r["row"]["verdict"] == "REALIGN"]
    assert [r["row"]["lost_cause"] for r in realigned] == ["special_token"]
    wi = {w["name"]: w for w in g["what_if"]}
    # contract mode forks instead of realigning (TRL 1.16's lossless_capture): everything recovered
    assert wi["contract_mode"]["recovered"] == t["tokens_losing_gradient"] and wi["contract_mode"]["rows"] == 2
    assert wi["replay_template_kwargs"]["measured_rollouts"] == 0 and wi["replay_template_kwargs"]["not_measured"]
    assert wi["keep_reasoning_kwarg"]["measured_rollouts"] == 0


def test_bad_sweep_is_a_usage_error(capsys):
    from viewer.cli import main

    assert main(["drift", str(SAMPLE), "--sweep-fork-threshold", "0,lots", "--quiet"]) == 2
    assert "'lots' is not a whole number" in capsys.readouterr().err


def test_merge_gradient_sums_sweep_points_and_whatifs():
    a = {"tokens_losing_gradient": 3, "by_cause": {"retokenized": 3}, "by_turn": [{"turn": 1, "tokens": 3}],
         "sweep": [{"fork_threshold": 0, "rows": 2, "forked_rows": 1, "tokens_losing_gradient": 0,
                    "trained_tokens": 5, "kept_trained_tokens": 5}],
         "what_if": [{"name": "canonical_output", "what": "x", "measured": True, "reason": None,
                      "baseline_tokens_losing_gradient": 3, "tokens_losing_gradient": 1, "recovered": 2, "rows": 1,
                      "baseline_rows": 1, "trained_tokens": 5}]}
    b = {**a, "what_if": [{**a["what_if"][0], "measured": False, "reason": "no tokenizer"}]}
    block = new_gradient_block()
    merge_gradient(block, a, rollout="r1")
    merge_gradient(block, b, rollout="r2")
    assert block["tokens_losing_gradient"] == 6 and block["by_cause"] == {"retokenized": 6}
    assert block["sweep"][0]["rows"] == 4 and block["sweep"][0]["fork_threshold"] == 0
    w = block["what_if"][0]
    assert (w["measured_rollouts"], w["not_measured"], w["recovered"]) == (1, {"no tokenizer": 1}, 2)
    assert [x["rollout"] for x in block["by_turn"]] == ["r1", "r2"]


@pytest.mark.parametrize("sample", ["qwen3-tiny", "smollm2"])
def test_normalised_rerender_what_if_reproduces_the_engine_ids(capsys, sample):
    """On the samples (no chat_template_kwargs) vLLM rendered the prompts with the tool-call arguments
    normalised, so the what-if re-rendering that way is the what-if fed the engine's recorded ids: the
    same rows and lost tokens (the engine's ids are vLLM's, not ours)."""
    g = _cli(capsys, "drift", SAMPLE_DIR / sample, "--trainer", "trl-message")["gradient"]
    wi = {w["name"]: w for w in g["what_if"]}
    a, b = wi["normalize_tool_arguments"], wi["engine_prompt_ids"]
    assert a["measured_rollouts"] == b["measured_rollouts"] == 1
    assert (a["tokens_losing_gradient"], a["rows"]) == (b["tokens_losing_gradient"], b["rows"])


def test_template_kwargs_what_if_is_measured_and_matches_the_engine_render(tmp_path, qwen3):
    """Requests sent with ``enable_thinking=false``: the engine's prompt ends with an empty
    ``<think></think>`` the trainer's plain re-render lacks. Worked by hand from Qwen3's template: the
    re-render without kwargs extends cleanly (the history renders the earlier call with no think block),
    so TRL 1.14 keeps 1 row; replaying the kwargs puts the think block in the held prompt, which the
    next prompt drops *before* the output starts → FORK: 2 rows, still 0 tokens lost. The engine ids
    here come from ``apply_chat_template(..., enable_thinking=False)`` itself, so the engine-ids what-if
    must say the same."""
    from _trainer_cases import TOOLS, U, S, _ids, call, record, result, sampled, write_case

    from viewer.drift import choose_spec, trainer_rows
    from viewer.drift.whatif import measure_whatifs
    from viewer.sources import load_source

    tok = qwen3
    a1, t1 = call("bash", "c1", command="ls"), result("c1", "README.md")
    a2 = call("read", "c2", filePath="README.md")
    m1, m2 = [S, U], [S, U, a1, t1]

    def engine(m):
        ids = tok.apply_chat_template(m, tools=TOOLS, add_generation_prompt=True, tokenize=True,
                                      return_dict=False, enable_thinking=False)
        return list(ids["input_ids"] if hasattr(ids, "keys") else ids)

    assert engine(m1) != _ids(tok, m1, TOOLS, True)  # the kwarg changes the generation prompt
    recs = [record(m1, TOOLS, a1, sampled(tok, m1, TOOLS, a1), 31, engine_prompt=engine(m1)),
            record(m2, TOOLS, a2, sampled(tok, m2, TOOLS, a2), 32, engine_prompt=engine(m2))]
    for r in recs:
        r["request"]["chat_template_kwargs"] = {"enable_thinking": False}
    ro = load_source(str(write_case(tmp_path / "kw", recs)))
    tr = trainer_rows(ro, choose_spec(ro, "trl-message", "all"), tok)
    assert (len(tr.rows.rows), tr.rows.tokens_losing_gradient) == (1, 0)
    wi = {w["name"]: w for w in measure_whatifs(ro, tr, tok)}
    kw, eng = wi["replay_template_kwargs"], wi["engine_prompt_ids"]
    assert kw["measured"] and (kw["rows"], kw["tokens_losing_gradient"], kw["recovered"]) == (2, 0, 0)
    assert eng["measured"] and (eng["rows"], eng["tokens_losing_gradient"]) == (2, 0)
