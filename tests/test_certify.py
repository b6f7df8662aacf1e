"""``certify``: every case's verdict on the bundled Qwen3 and the SmolLM2 sample tokenizer, confirmed by
calling ``apply_chat_template`` and the tokenizer directly (the simulation here is written out
independently of viewer/drift/certify.py), the Qwen3 fact "earlier <think> dropped on re-render" as a
hand-worked fixture, and the CLI contract (docs/CLI.md)."""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from viewer.cli import main
from viewer.config import SAMPLE_DIR
from viewer.drift.certify import certify
from viewer.drift.certify_cases import battery

REPO = Path(__file__).resolve().parent.parent
SMOL = SAMPLE_DIR / "smollm2" / "tokenizer"
END = "<|im_end|>"  # both templates end a turn with it; sampling stops there


@pytest.fixture(scope="module")
def qwen3():
    from viewer.tokenizer import load_qwen3

    return load_qwen3()


@pytest.fixture(scope="module")
def smol():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(SMOL), local_files_only=True)


@pytest.fixture(scope="module")
def cards(qwen3, smol):
    return {"qwen3": certify(qwen3, name="qwen3"), "smollm2": certify(smol, name="smollm2")}


def _text(tok, msgs, tools, gen):
    return tok.apply_chat_template(msgs, tools=tools or None, tokenize=False, add_generation_prompt=gen)


def _vllm(msgs):
    """What vLLM does to history before templating: each tool call's arguments string parsed to an object."""
    out = copy.deepcopy(msgs)
    for m in out:
        for c in m.get("tool_calls") or []:
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    return out


def _sampled(tok, case):
    """(assistant index, plain prompt ids, vLLM-rendered prompt ids, sampled ids) per turn, written out here."""
    msgs, tools = case.messages, case.tools
    turns = []
    for i, m in enumerate(msgs):
        if m["role"] != "assistant" or i == 0:
            continue
        prompt = _text(tok, msgs[:i], tools, True)
        full = _text(tok, msgs[:i + 1], tools, False)
        assert full.startswith(prompt)
        sampled = full[len(prompt):]
        sampled = sampled[:sampled.index(END) + len(END)]
        if case.pieces:  # "<tool_call>" as "<" + "tool_call>": ordinary pieces
            ids = []
            for part in re.split(r"(</?tool_call>)", sampled):
                if part in ("<tool_call>", "</tool_call>"):
                    ids += tok.encode(part[0], add_special_tokens=False) + tok.encode(part[1:], add_special_tokens=False)
                elif part:
                    ids += tok.encode(part, add_special_tokens=False)
        else:
            ids = tok.encode(sampled, add_special_tokens=False)
        plain = tok.encode(prompt, add_special_tokens=False)
        engine = tok.encode(_text(tok, _vllm(msgs[:i]), tools, True), add_special_tokens=False)
        turns.append((i, plain, engine, ids))
    return turns


def _direct(tok, case):
    """Independent verdicts: (prefix broken under TRL's re-render, under vLLM's render, round trip broken)."""
    turns = [t[1:] for t in _sampled(tok, case)]
    broken = [False, False]
    for (p0, e0, ids), (p1, e1, _) in zip(turns, turns[1:]):
        broken[0] |= p1[:len(p0) + len(ids)] != p0 + ids
        broken[1] |= e1[:len(e0) + len(ids)] != e0 + ids
    rt = any(tok.encode(tok.decode(ids), add_special_tokens=False) != ids for _, _, ids in turns)
    return broken[0], broken[1], rt


@pytest.mark.parametrize("name", ["qwen3", "smollm2"])
def test_every_verdict_confirmed_by_the_tokenizer_directly(cards, qwen3, smol, name):
    tok = {"qwen3": qwen3, "smollm2": smol}[name]
    by_name = {c["name"]: c for c in cards[name]["cases"]}
    assert list(by_name) == [c.name for c in battery()]
    for case in battery():
        got = by_name[case.name]
        plain, engine, rt = _direct(tok, case)
        failed = {k for k in ("trl_rerender", "engine_render", "roundtrip")
                  if any(not x["ok"] for x in got["checks"][k])}
        assert failed == {k for k, bad in zip(("trl_rerender", "engine_render", "roundtrip"), (plain, engine, rt))
                          if bad}, case.name
        assert got["status"] == ("fail" if failed else "pass"), case.name


def test_qwen3_card_has_failures_and_passes(cards):
    t = cards["qwen3"]["totals"]
    assert t["failed"] >= 5 and t["passed"] >= 5 and t["errors"] == 0
    by = {c["name"]: c for c in cards["qwen3"]["cases"]}
    assert by["tool_call_as_pieces"]["cause"] == "special_token"
    assert any(x["cause"] == "special_token" and not x["ok"] for x in by["tool_call_as_pieces"]["checks"]["roundtrip"])
    assert by["tool_args_compact"]["cause"] == "tool_args_reformatted"
    assert by["tool_args_canonical"]["status"] == "pass"


def test_qwen3_earlier_think_dropped_hand_worked(cards, qwen3):
    """Qwen3's template drops the reasoning of an assistant turn before the last user message.
    Worked by hand: turn 1's prompt is P, the model samples S (the template renders <think> for the last
    assistant message); turn 2's prompt re-renders that turn as "4<|im_end|>" without the block, so the held
    tokens diverge right after P, at the <think> token, and TRL 1.14 (REALIGN, drift < 1024) overwrites
    every token of S: all of them lose their gradient."""
    p = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    s = "<think>\n2 plus 2 is 4.\n</think>\n\n4<|im_end|>"
    nxt = p + "4<|im_end|>\n<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n"
    case = next(c for c in battery() if c.name == "think_earlier_turn")
    assert _text(qwen3, case.messages[:1], None, True) == p
    assert _text(qwen3, case.messages[:3], None, True) == nxt
    got = next(c for c in cards["qwen3"]["cases"] if c["name"] == "think_earlier_turn")
    div = got["first_divergence"]
    n_p, n_s = len(qwen3.encode(p)), len(qwen3.encode(s))
    assert div["position"] == n_p
    assert div["held"] == {"id": qwen3.convert_tokens_to_ids("<think>"), "text": "<think>"}
    assert div["next_prompt"]["id"] == qwen3.encode("4")[0]
    assert got["cause"] == "think_dropped"
    assert got["tokens_lost"] == {"trl-message": n_s, "trl-contract": 0}  # contract: threshold 0 forks instead
    assert got["trainer"]["trl-contract"]["forked_rows"] == 1


def test_passing_case_passes_directly(qwen3, cards):
    """tool_args_canonical: the next prompt extends prompt + sampled ids, checked by hand with the tokenizer."""
    case = next(c for c in battery() if c.name == "tool_args_canonical")
    p = _text(qwen3, case.messages[:2], case.tools, True)
    full = _text(qwen3, case.messages[:3], case.tools, False)
    sampled = full[len(p):full.index(END, len(p)) + len(END)]
    assert '{"cmd": "ls -la"}' in sampled
    nxt = qwen3.encode(_text(qwen3, case.messages[:4], case.tools, True))
    held = qwen3.encode(p) + qwen3.encode(sampled)
    assert nxt[:len(held)] == held
    assert next(c for c in cards["qwen3"]["cases"] if c["name"] == case.name)["status"] == "pass"


def _cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json_keys_documented_and_exit_codes(capsys):
    section = (REPO / "docs" / "CLI.md").read_text().split("### `certify --json`", 1)[1]
    keys = re.findall(r"`([a-z_0-9]+)`", re.search(r"^Top-level keys: (.*)\.$", section, re.M).group(1))
    code, out, _ = _cli(capsys, "certify", "qwen3", "--json", "--case", "think_earlier_turn")
    doc = json.loads(out)
    assert code == 0 and list(doc) == keys
    assert [c["name"] for c in doc["cases"]] == ["think_earlier_turn"]
    assert _cli(capsys, "certify", "qwen3", "--case", "think_earlier_turn", "--fail-on-findings")[0] == 1
    code, out, _ = _cli(capsys, "certify", "qwen3", "--case", "tool_args_canonical", "--fail-on-findings")
    assert code == 0 and re.search(r"^tool_args_canonical\s+pass\s", out, re.M)
    code, _, err = _cli(capsys, "certify", "/nonexistent/tokenizer")
    assert code == 2 and err.startswith("error: cannot load tokenizer")
    code, _, err = _cli(capsys, "certify", "qwen3", "--case", "nope")
    assert code == 2 and "unknown case 'nope'" in err


def test_cli_card_on_smollm2_folder_and_conversations(capsys, tmp_path):
    conv = {"messages": [{"role": "user", "content": "Hi"},
                         {"role": "assistant", "content": "<think>\nsay hi\n</think>\n\nHello"},
                         {"role": "user", "content": "Bye"}, {"role": "assistant", "content": "Bye"}]}
    f = tmp_path / "conv.jsonl"
    f.write_text(json.dumps(conv) + "\n")
    code, out, _ = _cli(capsys, "certify", "qwen3", "--json", "--case", "plain_chat", "--conversations", f)
    doc = json.loads(out)
    real = doc["cases"][-1]
    assert code == 0 and real["source"] == "conversations" and real["name"] == "conv.jsonl row 0"
    assert real["cause"] == "think_dropped"  # the content's own <think> block, dropped for the earlier turn
    code, out, _ = _cli(capsys, "certify", SMOL, "--trainer", "trl-message")
    assert code == 0 and "lost/forks trl-message" in out and "trl-contract" not in out.splitlines()[0]
    assert len([x for x in out.splitlines() if re.match(r"^\w+\s+(pass|fail|error)\s", x)]) == len(battery())


LOST_CASES = ["tool_call_as_pieces", "no_reasoning_tool_turn"]


@pytest.fixture(scope="module")
def trl_lost(qwen3, tmp_path_factory) -> dict[str, dict]:
    """TRL 1.14's own result for each case of LOST_CASES, from one oracle process (importing torch and TRL
    is most of its time: one process per case paid it twice)."""
    import subprocess

    from requires import need
    from viewer.tokenizer import qwen3_dir

    py, lib = REPO / ".venv-trl" / "bin" / "python", REPO / ".venv-trl" / "trl-1.14.0"
    if not py.exists() or not lib.is_dir():
        need("the TRL oracle environment (scripts/setup_oracle.sh)", f"{py} / {lib} not found")
    root = tmp_path_factory.mktemp("lost")
    batch = []
    for name in LOST_CASES:
        case = next(c for c in battery() if c.name == name)
        records = [{"request": {"messages": case.messages[:i], "tools": case.tools},
                    "response": {"choices": [{"message": case.messages[i], "finish_reason": "stop"}]},
                    "completion_token_ids": ids, "per_token_logps": [0.0] * len(ids)}
                   for i, _, _, ids in _sampled(qwen3, case)]
        (root / f"{name}.json").write_text(json.dumps(records))
        batch.append({"name": name, "trace": str(root / f"{name}.json"), "mode": "trl-message",
                      "train_turns": "all", "fork_threshold": 1024, "tokenizer": str(qwen3_dir())})
    proc = subprocess.run([str(py), str(REPO / "tests" / "oracle" / "trl_oracle.py")], input=json.dumps({"cases": batch}),
                          capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(lib), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                               "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {r["name"]: r for r in json.loads(proc.stdout)["results"]}


@pytest.mark.slow  # TRL's own code in .venv-trl (a fresh process importing trl)
@pytest.mark.parametrize("name", LOST_CASES)
def test_lost_tokens_equal_trls_own(cards, trl_lost, name):
    """TRL 1.14's own `_turns_from_trace` + `_chain_to_sequences` (tests/oracle/trl_oracle.py) on the case
    written as a proxy trace: the trained tokens it loses equal the card's trl-message count."""
    want = trl_lost[name]
    got = next(c for c in cards["qwen3"]["cases"] if c["name"] == name)
    assert want["tokens_losing_gradient"] > 0
    assert got["tokens_lost"]["trl-message"] == want["tokens_losing_gradient"]
    assert got["trainer"]["trl-message"]["tally"]["realign"] == want["tally"]["realign"]
