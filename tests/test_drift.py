"""Drift analysis on hand-built cases with the real Qwen3 tokenizer and chat template."""
from __future__ import annotations

import hashlib
import importlib
import json
import sys
import threading
from pathlib import Path


from requires import need

sys.path.insert(0, str(Path(__file__).parent))
from _drift_cases import (  # noqa: E402
    ENDOFTEXT, IM_END, SYSTEM, TOOL_CALL, TOOLS, USER, call, clean_conversation, enc, noncanonical,
    tool_call_text, turn,
)

from viewer import drift  # noqa: E402
from viewer.rollout import Rollout  # noqa: E402
from viewer.tokenizer import render_prompt_ids, render_prompt_text, token_table  # noqa: E402


def tc_pieces(tok) -> list[int]:
    """``<tool_call>`` sampled as ordinary pieces (how the random model did it)."""
    return enc(tok, "<") + enc(tok, "tool") + enc(tok, "_call") + enc(tok, ">")


# --------------------------------------------------------------------------------------
# A. output round trip
# --------------------------------------------------------------------------------------

def test_roundtrip_clean_outputs_are_equal(qwen3):
    texts = ["Hello, world!", "def f(x):\n    return x * 2\n", "日本語のテキスト and émojis 🦜🚀",
             "<think>\nplan\n</think>\n\n" + tool_call_text("ls -la"), "   spaces\t\ttabs\n\n\n"]
    for i, text in enumerate(texts):
        rt = drift.roundtrip(turn(i, [1], enc(qwen3, text) + [IM_END]), qwen3)
        assert rt.equal is True and rt.first_mismatch is None and rt.changed_spans == [], text
        assert rt.text == text + "<|im_end|>"


def test_roundtrip_retokenized_split(qwen3):
    head = enc(qwen3, "The")
    split = noncanonical(qwen3, " function")  # e.g. " " + "function"
    out = head + split + enc(qwen3, " works.") + [IM_END]
    lps = [-0.1 * i for i in range(len(out))]
    rt = drift.roundtrip(turn(0, [1], out, logprobs=lps), qwen3)
    assert rt.equal is False and rt.cause == "retokenized" and rt.al_class == "retoken"
    assert rt.first_mismatch == len(head)
    (span,) = rt.changed_spans
    assert (span.start, span.end) == (len(head), len(head) + 2)
    assert span.sampled_ids == split and span.reencoded_ids == enc(qwen3, " function")
    assert "".join(span.sampled_pieces) == " function" == "".join(span.reencoded_pieces)
    assert span.sampled_logprobs == lps[len(head):len(head) + 2]
    assert (span.char_start, span.char_end) == (3, 12)  # "The| function|"
    assert span.re_start == len(head) and span.re_end == len(head) + 1


def test_roundtrip_special_token_as_pieces(qwen3):
    head = enc(qwen3, "Let me look.\n")
    body = enc(qwen3, '\n{"name": "bash", "arguments": {"command": "ls"}}\n') + [151658, IM_END]
    out = head + tc_pieces(qwen3) + body
    rt = drift.roundtrip(turn(0, [1], out), qwen3)
    assert rt.cause == "special_token" and rt.al_class == "template"
    assert rt.first_mismatch == len(head)
    (span,) = rt.changed_spans
    assert span.sampled_pieces == ["<", "tool", "_call", ">"]
    assert span.reencoded_ids == [TOOL_CALL]
    assert rt.text[span.char_start:span.char_end] == "<tool_call>"


def test_roundtrip_multibyte_char_split_into_bytes(qwen3):
    table = token_table(qwen3)
    byte_id = {table.bytes_of(i): i for i in range(256 * 4) if len(table.bytes_of(i)) == 1}
    head = enc(qwen3, "caf")
    e_acute = [byte_id[b"\xc3"], byte_id[b"\xa9"]]  # "é" as two single-byte tokens
    tail = enc(qwen3, " au lait 日本")
    out = head + e_acute + tail
    rt = drift.roundtrip(turn(0, [1], out), qwen3)
    assert rt.text == "café au lait 日本"
    canonical = enc(qwen3, rt.text)
    k = drift.common_prefix(out, canonical)  # BPE merges "caf"+"é" differently: k <= len(head)
    assert k <= len(head) and rt.cause == "retokenized" and rt.first_mismatch == k
    (span,) = rt.changed_spans
    # the span covers the split character; char offsets count characters, not bytes
    assert span.char_start <= 3 < span.char_end
    assert rt.text[span.char_start:span.char_end] == table.decode_bytes(span.sampled_ids).decode()
    assert e_acute == span.sampled_ids[len(head) - k:len(head) - k + 2]
    assert span.end <= len(head) + 2 and span.sampled_pieces[len(head) - k:][:2] == ["\\xc3", "\\xa9"]


def test_roundtrip_unchecked(qwen3):
    assert drift.roundtrip(turn(0, [1], []), qwen3).unchecked.startswith("empty output")
    rt = drift.roundtrip(turn(0, [1], [5, 10 ** 7]), qwen3)
    assert rt.equal is None and "outside the vocabulary" in rt.unchecked
    assert drift.roundtrip(turn(0, [1], [5]), None).unchecked == "no tokenizer for this rollout"


# --------------------------------------------------------------------------------------
# B. template re-render
# --------------------------------------------------------------------------------------

def test_template_clean_turns_and_args_normalisation(qwen3):
    turns = clean_conversation(qwen3)
    for t in turns:
        tc = drift.template_check(t, qwen3)
        assert tc.equal is True and tc.cause is None and tc.unchecked is None
    # first turn has no tool call yet: the plain (TRL) re-render agrees as well
    assert turns[0].messages and drift.template_check(turns[0], qwen3).plain.equal is True
    # after a compact-argument tool call the plain re-render differs inside the JSON
    t = turns[1]
    tc = drift.template_check(t, qwen3)
    assert tc.plain.equal is False and tc.plain.cause == "tool_args_reformatted"
    plain_text = render_prompt_text(qwen3, t.messages, tools=TOOLS, normalize_tool_arguments=False)
    k = tc.plain.first_mismatch
    stored_prefix = qwen3.decode(t.prompt_ids[:k], skip_special_tokens=False)
    anchor = plain_text.index('"arguments": {"command":') + len('"arguments": {"command":')
    assert plain_text.startswith(stored_prefix) and anchor - 12 <= len(stored_prefix) <= anchor
    assert tc.plain.stored_window.start <= k < tc.plain.stored_window.start + len(tc.plain.stored_window.ids)


def test_template_kwargs_not_replayed(qwen3):
    msgs = [SYSTEM, USER]
    kw = {"enable_thinking": False}
    engine = render_prompt_ids(qwen3, msgs, tools=TOOLS, chat_template_kwargs=kw)
    plain = render_prompt_ids(qwen3, msgs, tools=TOOLS)
    assert engine[:len(plain)] == plain  # construction: the kwarg only appends <think>\n\n</think>\n\n
    t = turn(0, engine, [IM_END], messages=msgs, tools=TOOLS, request={"chat_template_kwargs": kw})
    tc = drift.template_check(t, qwen3)
    assert tc.equal is True
    assert tc.plain.equal is False and tc.plain.cause == "template_kwargs"
    assert tc.plain.first_mismatch == len(plain)


def test_template_missing_newline_after_im_end(qwen3):
    msgs = [SYSTEM, USER]
    canonical = render_prompt_ids(qwen3, msgs, tools=TOOLS)
    i = canonical.index(IM_END)
    assert canonical[i + 1] == 198  # "\n"
    stored = canonical[:i + 1] + canonical[i + 2:]  # a harness that joins turns without "\n"
    tc = drift.template_check(turn(0, stored, [IM_END], messages=msgs, tools=TOOLS), qwen3)
    assert tc.equal is False and tc.first_mismatch == i + 1 and tc.cause == "eos_newline"
    assert tc.vllm.classification.al_class == "template"
    assert tc.vllm.stored_window.text and "\n" in tc.vllm.rendered_window.text


def test_template_think_kept_by_engine_dropped_by_template(qwen3):
    msgs = [USER, {"role": "assistant", "content": "<think>\nCheck the dir.\n</think>\n\nDone."},
            {"role": "user", "content": "Thanks, now test it."}]
    text = render_prompt_text(qwen3, msgs)
    assert "Check the dir." not in text  # Qwen3 drops reasoning before the last user turn
    at = text.index("<|im_start|>assistant\nDone.") + len("<|im_start|>assistant\n")
    stored = enc(qwen3, text[:at] + "<think>\nCheck the dir.\n</think>\n\n" + text[at:])
    tc = drift.template_check(turn(0, stored, [IM_END], messages=msgs), qwen3)
    assert tc.cause == "think_dropped" and tc.first_mismatch == len(enc(qwen3, text[:at]))


def test_template_content_changed(qwen3):
    msgs = [SYSTEM, USER]
    other = render_prompt_ids(qwen3, [SYSTEM, {"role": "user", "content": "Summarise the repo instead."}],
                              tools=TOOLS)
    tc = drift.template_check(turn(0, other, [IM_END], messages=msgs, tools=TOOLS), qwen3)
    assert tc.cause == "content_changed"
    assert tc.first_mismatch == drift.common_prefix(other, render_prompt_ids(qwen3, msgs, tools=TOOLS))


def test_template_unchecked_reasons(qwen3):
    t = turn(0, [1, 2], [IM_END], messages=[USER], prompt_source="rerender")
    assert "rerender" in drift.template_check(t, qwen3).unchecked
    assert drift.template_check(turn(0, [1], [IM_END]), qwen3).unchecked == "no request messages to re-render"
    bad = turn(0, [1, 2], [IM_END], messages=[{"role": "assistant", "content": None}])
    tc = drift.template_check(bad, qwen3)
    assert tc.equal is None and tc.plain.error.startswith("template failed to render")


# --------------------------------------------------------------------------------------
# C. prefix audit (each cause, at the offset the construction implies)
# --------------------------------------------------------------------------------------

def _next_prompt(tok, msgs, assistant, extra):
    return render_prompt_ids(tok, msgs + [assistant] + extra, tools=TOOLS)


def test_prefix_clean_multi_turn(qwen3):
    turns = clean_conversation(qwen3)
    assert drift.prefix_audit(None, turns[0], qwen3).status == "first"
    for a, b in zip(turns, turns[1:]):
        pc = drift.prefix_audit(a, b, qwen3)
        assert pc.status == "clean" and pc.cause is None and pc.tokens_rerendered == 0
        assert pc.matched == len(a.prompt_ids) + len(a.output_ids)


def test_prefix_special_token(qwen3):
    msgs = [SYSTEM, USER]
    p1 = render_prompt_ids(qwen3, msgs, tools=TOOLS)
    body = enc(qwen3, '\n{"name": "bash", "arguments": {"command": "ls"}}\n') + [151658, IM_END]
    o1 = tc_pieces(qwen3) + body
    p2 = _next_prompt(qwen3, msgs, {"role": "assistant", "content": "", "tool_calls": [call("ls")]},
                      [{"role": "tool", "content": "a.py"}])
    pc = drift.prefix_audit(turn(0, p1, o1), turn(1, p2, []), qwen3)
    assert pc.status == "broken" and pc.cause == "special_token" and pc.al_class == "template"
    assert pc.divergence == len(p1) and pc.in_output
    assert pc.tokens_rerendered == len(o1)  # the special token never re-syncs the id stream
    assert p2[len(p1)] == TOOL_CALL


def test_prefix_retokenized(qwen3):
    msgs = [SYSTEM, USER]
    p1 = render_prompt_ids(qwen3, msgs, tools=TOOLS)
    head = enc(qwen3, "The")
    o1 = head + noncanonical(qwen3, " function") + enc(qwen3, " works.") + [IM_END]
    p2 = _next_prompt(qwen3, msgs, {"role": "assistant", "content": "The function works."},
                      [{"role": "user", "content": "ok"}])
    pc = drift.prefix_audit(turn(0, p1, o1), turn(1, p2, []), qwen3)
    assert pc.cause == "retokenized" and pc.divergence == len(p1) + len(head)
    assert pc.tokens_rerendered == len(o1) - len(head)


def test_prefix_think_dropped(qwen3):
    msgs = [USER]
    p1 = render_prompt_ids(qwen3, msgs)
    o1 = enc(qwen3, "<think>\nI should list files first.\n</think>\n\nHello!") + [IM_END]
    asst = {"role": "assistant", "content": "<think>\nI should list files first.\n</think>\n\nHello!"}
    p2 = render_prompt_ids(qwen3, msgs + [asst, {"role": "user", "content": "Go on."}])
    pc = drift.prefix_audit(turn(0, p1, o1), turn(1, p2, []), qwen3)
    assert pc.cause == "think_dropped" and pc.al_class == "others"
    assert pc.divergence == len(p1) and pc.tokens_rerendered == len(o1)
    assert pc.classification.a_text.startswith("<think>")


def test_prefix_tool_args_reformatted(qwen3):
    msgs = [SYSTEM, USER]
    p1 = render_prompt_ids(qwen3, msgs, tools=TOOLS)
    o1 = enc(qwen3, tool_call_text("ls", compact=True)) + [IM_END]  # model wrote compact JSON
    p2 = _next_prompt(qwen3, msgs, {"role": "assistant", "content": "", "tool_calls": [call("ls")]},
                      [{"role": "tool", "content": "a.py"}])
    pc = drift.prefix_audit(turn(0, p1, o1), turn(1, p2, []), qwen3)
    assert pc.cause == "tool_args_reformatted" and pc.in_output
    compact = tool_call_text("ls", compact=True)
    first_diff = compact.index('"name":') + len('"name":')  # the compact text lacks the space here
    j = pc.divergence - len(p1)  # the first token whose text reaches the missing space
    before = qwen3.decode(o1[:j], skip_special_tokens=False)
    assert compact[:first_diff].startswith(before)
    assert len(before + qwen3.decode(o1[j:j + 1])) > first_diff


def test_prefix_eos_token_swapped(qwen3):
    msgs = [USER]
    p1 = render_prompt_ids(qwen3, msgs)
    o1 = enc(qwen3, "Hi there.") + [ENDOFTEXT]  # stopped on <|endoftext|>; template closes with <|im_end|>
    p2 = render_prompt_ids(qwen3, msgs + [{"role": "assistant", "content": "Hi there."},
                                          {"role": "user", "content": "More."}])
    pc = drift.prefix_audit(turn(0, p1, o1), turn(1, p2, []), qwen3)
    assert pc.cause == "eos_newline" and pc.divergence == len(p1) + len(o1) - 1
    assert pc.tokens_rerendered == 1


def test_prefix_compaction_is_content_changed(qwen3):
    t1 = clean_conversation(qwen3)[0]
    p2 = render_prompt_ids(qwen3, [SYSTEM, {"role": "user", "content": "Summary: listed files."}], tools=TOOLS)
    pc = drift.prefix_audit(t1, turn(1, p2, []), qwen3)
    assert pc.cause == "content_changed" and not pc.in_output
    assert pc.divergence == drift.common_prefix(t1.prompt_ids, p2)


def test_prefix_without_tokenizer_still_finds_break(qwen3):
    t1 = clean_conversation(qwen3)[0]
    pc = drift.prefix_audit(t1, turn(1, [1, 2, 3], []), None)
    assert pc.status == "broken" and pc.cause is None and pc.unchecked


# --------------------------------------------------------------------------------------
# repro + scan
# --------------------------------------------------------------------------------------

def test_repro_json(qwen3):
    msgs = [USER]
    p1 = render_prompt_ids(qwen3, msgs)
    o1 = enc(qwen3, "Hi there.") + [ENDOFTEXT]
    p2 = render_prompt_ids(qwen3, msgs + [{"role": "assistant", "content": "Hi there."},
                                          {"role": "user", "content": "More."}])
    prev, nxt = turn(0, p1, o1), turn(1, p2, [])
    pc = drift.prefix_audit(prev, nxt, qwen3)
    rep = drift.repro(pc, qwen3, turn=nxt, prev=prev, rollout="r.json", radius=4)
    assert json.loads(json.dumps(rep)) == rep
    assert rep["kind"] == "prefix" and rep["cause"] == "eos_newline"
    assert rep["break_offset"] == len(p1) + len(o1) - 1
    assert rep["chat_template_sha256"] == hashlib.sha256(qwen3.chat_template.encode()).hexdigest()
    assert rep["tokenizer"].endswith("tokenizer_files")
    held = p1 + o1
    assert rep["expected"]["ids"] == held[rep["break_offset"] - 4:rep["break_offset"] + 4]
    assert rep["expected"]["ids"][-1] == ENDOFTEXT and rep["observed"]["ids"][4] == IM_END
    assert rep["observed"]["text"].startswith(qwen3.decode(p2[rep["break_offset"] - 4:rep["break_offset"]]))
    rt = drift.roundtrip(turn(0, [1], tc_pieces(qwen3) + [IM_END]), qwen3)
    rep2 = drift.repro(rt, qwen3, turn=turn(0, [1], tc_pieces(qwen3) + [IM_END]))
    assert rep2["kind"] == "roundtrip" and rep2["cause"] == "special_token" and rep2["break_offset"] == 0
    assert rep2["observed"]["ids"][0] == TOOL_CALL


def _scan_set(qwen3):
    clean = Rollout(source="clean.json", format="test", turns=clean_conversation(qwen3))
    msgs = [SYSTEM, USER]
    p1 = render_prompt_ids(qwen3, msgs, tools=TOOLS)
    o1 = enc(qwen3, "The") + noncanonical(qwen3, " function") + enc(qwen3, " works.") + [IM_END]
    p2 = render_prompt_ids(qwen3, msgs + [{"role": "assistant", "content": "The function works."},
                                          {"role": "user", "content": "ok"}], tools=TOOLS)
    drifty = Rollout(source="drifty.json", format="test", turns=[
        turn(0, p1, o1, messages=msgs, tools=TOOLS),
        turn(1, p2, enc(qwen3, "Fine.") + [IM_END]),
        turn(2, p2 + [999], [], trained=False),                       # empty output
        turn(3, p2 + [999], [5, 10 ** 7], trained=False),             # out-of-vocab id
    ])
    return [clean, drifty], o1


def test_scan_totals(qwen3):
    rollouts, o1 = _scan_set(qwen3)
    seen = []
    # engine prompt ids: the capture contract; with the example's threshold 1024 drift realigns
    res = drift.scan(rollouts, qwen3, progress=lambda d, t: seen.append((d, t)), chunk_rollouts=1,
                     fork_threshold=1024)
    assert json.loads(json.dumps(res)) == res
    assert (res["trainer"]["mode"], res["trainer"]["fork_threshold"], res["trainer"]["chosen"]) == \
        ("trl-contract", 1024, "auto")  # the mode picked from the source; the threshold named
    tot = res["totals"]
    assert seen == [(1, 2), (2, 2)]
    assert tot["turns"] == 7 and tot["unchecked"] == 2
    recs = {(r["rollout"], r["turn"]): r for r in res["turns"]}
    for i in range(3):
        r = recs[("clean.json", i)]
        assert r["retokenize"]["equal"] and r["template"]["equal"] and r["prefix"]["status"] != "broken"
    assert recs[("clean.json", 1)]["template"]["plain_cause"] == "tool_args_reformatted"
    d0 = recs[("drifty.json", 0)]
    assert d0["retokenize"] == {"equal": False, "first_mismatch": 1, "changed_spans": 1, "cause": "retokenized"}
    d1 = recs[("drifty.json", 1)]
    assert d1["prefix"]["status"] == "broken" and d1["prefix"]["cause"] == "retokenized"
    assert d1["prefix"]["tokens_rerendered"] == len(o1) - 1
    assert d1["template"]["unchecked"] == "no request messages to re-render"
    assert "empty output" in recs[("drifty.json", 2)]["retokenize"]["unchecked"]
    assert "outside the vocabulary" in recs[("drifty.json", 3)]["retokenize"]["unchecked"]
    # drifted: d0 (round trip), d1 (prefix); d2/d3 extend p2 cleanly? d2's prompt = p2+[999] vs
    # held p2+"Fine."+im_end -> broken; d3 vs held p2+[999]+[] -> clean
    assert recs[("drifty.json", 2)]["prefix"]["status"] == "broken"
    assert recs[("drifty.json", 3)]["prefix"]["status"] == "clean"
    assert tot["drifted_turns"] == 3
    assert tot["by_cause"]["retokenized"] == 2
    # rows: d1 is a REALIGN losing the split's trained tokens (drift = len(o1) - 1 < 1024)
    assert d1["row"]["verdict"] == "REALIGN" and d1["row"]["tokens_losing_gradient"] == len(o1) - 1
    # d2's prompt (p2 + [999]) breaks at the start of d1's output -> REALIGN, not FORK; all of
    # d1's trained output ("Fine." + <|im_end|>) loses its gradient too
    d2 = recs[("drifty.json", 2)]
    assert d2["row"]["verdict"] == "REALIGN" and d2["row"]["drift"] == len(enc(qwen3, "Fine.")) + 1
    assert d2["row"]["tokens_losing_gradient"] == len(enc(qwen3, "Fine.")) + 1
    assert tot["tokens_losing_gradient"] == len(o1) - 1 + len(enc(qwen3, "Fine.")) + 1
    assert tot["forked_rows"] == 0


def test_scan_cancel_and_no_tokenizer(qwen3):
    rollouts, _ = _scan_set(qwen3)
    ev = threading.Event()
    ev.set()
    res = drift.scan(rollouts, qwen3, cancel=ev)
    assert res["totals"]["cancelled"] and res["turns"] == []
    res = drift.scan(iter(rollouts), None)
    assert res["totals"]["turns"] == 7 and res["totals"]["unchecked"] == 7
    assert all(r["retokenize"]["unchecked"] == "no tokenizer for this rollout" for r in res["turns"])


# --------------------------------------------------------------------------------------
# independent cross-check: quicktok's Qwen3 BPE agrees with the re-encodings used above
# --------------------------------------------------------------------------------------

def test_quicktok_agrees_on_reencodings(qwen3):
    try:
        quicktok = importlib.import_module("quicktok")
        qt = quicktok.get_encoding("qwen3")
    except Exception as e:  # not installed, or no Qwen3 encoding in this version
        need("quicktok (requirements-dev.txt)", str(e))
    outs = [
        enc(qwen3, "The") + noncanonical(qwen3, " function") + enc(qwen3, " works.") + [IM_END],
        tc_pieces(qwen3) + enc(qwen3, '\n{"name": "bash", "arguments": {"command": "ls"}}\n') + [151658],
        enc(qwen3, tool_call_text("cat main.py", compact=True)) + [IM_END],
        enc(qwen3, "café au lait 日本 🦜"),
    ]
    for o in outs:
        rt = drift.roundtrip(turn(0, [1], o), qwen3)
        assert list(qt.encode(rt.text, allowed_special="all")) == rt.reencoded_ids, rt.text


def test_scan_decode_equals_transformers_batch_decode(qwen3):
    """The scan decodes through the tokenizer's Rust backend; transformers' own batch_decode is the
    oracle: the same text for ordinary ids, special tokens, lone UTF-8 pieces and random ids."""
    import random

    from viewer.drift.scan import _batch_decode

    rng = random.Random(7)
    seqs = [qwen3.encode("def f():\n    return 'héllo 🦩'\n", add_special_tokens=False),
            [151644, 872, 198, 151657, 151658, 151645],  # <|im_start|>user\n<tool_call></tool_call><|im_end|>
            [rng.randrange(0, 151669) for _ in range(300)],
            [] , [145, 222, 238]]  # bytes of a character split across tokens
    assert _batch_decode(qwen3, [list(s) for s in seqs]) == qwen3.batch_decode(seqs, skip_special_tokens=False)


def test_scan_encode_equals_transformers_call(qwen3):
    """The scan encodes through the Rust backend; transformers' own call is the oracle."""
    from viewer.drift.scan import _batch_encode

    texts = ["def f():\n    return 'héllo 🦩'\n", "<|im_start|>user\n<tool_call>{\"a\": 1}</tool_call><|im_end|>",
             "", "  spaces\t\ttabs\r\n", "\u200b\ufeffzero-width"]
    assert _batch_encode(qwen3, texts) == [list(x) for x in qwen3(texts, add_special_tokens=False)["input_ids"]]


def test_scan_results_carry_exactly_the_defined_keys(qwen3, tmp_path):
    """viewer/drift/results.py owns the keys: a local scan (through scan_source, as the CLI and UI
    run it) and its parquet round trip write only them, every required one, and every turn column
    the parquet schema has comes from the definition."""
    from _scan_keys import assert_record_keys, assert_scan_keys

    from viewer.config import Settings
    from viewer.drift.corpus import scan_source
    from viewer.drift.results import TurnRecord, optional_keys, turn_columns
    from viewer.drift.scanout import TURN_FIELDS, records_from_table, turns_table

    rollouts, _ = _scan_set(qwen3)
    res = scan_source(rollouts, Settings(), tok=qwen3, tok_name="qwen3", fork_threshold=1024)
    seen = assert_scan_keys(res)
    # the cases above reach every optional key but plain_error and the row's reason
    assert {"unchecked", "retokenize.unchecked", "template.unchecked", "template.plain_cause", "row.verdict",
            "tokenizer", "drifted"} <= seen
    assert TURN_FIELDS == turn_columns() and {c for c, _ in TURN_FIELDS} >= seen
    assert [c for c, _ in TURN_FIELDS][:6] == ["rollout", "turn", "call", "tokenizer", "drifted", "unchecked"]
    assert {"unchecked", "reason", "plain_error", "plain_equal", "plain_cause"} <= optional_keys()
    assert "tokenizer" not in optional_keys() and list(TurnRecord.__annotations__)[:3] == ["rollout", "turn", "call"]
    for rec in records_from_table(turns_table(res["turns"])):
        assert_record_keys(rec)
    try:  # the checker itself sees a key the definition does not have
        assert_record_keys(dict(res["turns"][0], extra=1))
    except AssertionError:
        pass
    else:
        raise AssertionError("an undefined key passed")
