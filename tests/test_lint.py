"""Lint rules (docs/LINT.md): every rule fires on a capture edited by hand to break it, and stays quiet
on the same capture unedited (or edited the harmless way). Captures are copies of the bundled samples
and of tests/data (the OpenEnv interception proxy's shape), changed here with json, never with our
writers; expected positions are the ones the edit chose, vocabulary sizes are read from tokenizer.json.
"""
from __future__ import annotations

import os
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from viewer.cli import main
from viewer.config import SAMPLE_DIR, Settings
from viewer.lint import RULE_IDS, RULES, lint_source, select_rules
from viewer.sources import load_source
from viewer.lint import lint_rollout

REPO = Path(__file__).resolve().parent.parent
OPENENV = REPO / "tests" / "data" / "capture_openenv"
SMOL = SAMPLE_DIR / "smollm2"
QWEN = SAMPLE_DIR / "qwen3-tiny"


def _copy(src: Path, tmp: Path, name: str = "cap") -> Path:
    """A copy of a capture as its proxy wrote it: the trace alone (turns.json, the trainer's view,
    would carry its own copy of the ids and logprobs an edit changes)."""
    dst = tmp / name
    shutil.copytree(src, dst)
    (dst / "turns.json").unlink(missing_ok=True)
    return dst


def _edit_trace(cap: Path, fn) -> None:
    """Apply ``fn(records)`` to the capture's trace.json (a JSON array) by hand."""
    f = cap / "trace.json"
    recs = json.loads(f.read_text())
    fn(recs)
    f.write_text(json.dumps(recs))  # json writes NaN / Infinity as Python reads them back


def _edit_summary(cap: Path, fn) -> None:
    f = cap / "summary.json"
    doc = json.loads(f.read_text())
    fn(doc)
    f.write_text(json.dumps(doc))


def _hits(src: Path, rule: str | None = None) -> list[dict]:
    res = lint_source(src, Settings(), select=(rule,) if rule else None)
    return res["hits"]


def _rules(src: Path) -> set[str]:
    return {h["rule"] for h in _hits(src)}


# ---- the table and the doc ---------------------------------------------------------

def test_doc_table_equals_the_code_table():
    text = (REPO / "docs" / "LINT.md").read_text()
    rows = re.findall(r"^\| (RI\d{3}) \| (.+?) \| (error|warning|info) \| (.+?) \| (.+?) \|$", text, re.M)
    assert rows == [(r.id, r.name, r.level, r.why, r.fix) for r in RULES]


def test_ids_are_stable_and_unique():
    assert list(RULE_IDS) == [f"RI{k:03d}" for k in range(1, len(RULES) + 1)]
    assert len({r.name for r in RULES}) == len(RULES)


def test_select_by_id_name_and_level():
    assert select_rules("ri001,chat-template-differs") == ("RI001", "RI009")
    assert set(select_rules("error")) == {r.id for r in RULES if r.level == "error"}
    with pytest.raises(ValueError, match="'RI999' is not a rule id"):
        select_rules("RI999")


def test_trace_only_copy_of_the_sample_is_clean(tmp_path):
    # the baseline every edit below starts from: no rule fires on it
    assert _hits(_copy(SMOL, tmp_path)) == []


# ---- RI001 no engine prompt ids: the acceptance ---------------------------------------

def test_no_prompt_ids_fires_on_interception_proxy_capture():
    recs = [json.loads(line) for line in (OPENENV / "trace.json").read_text().splitlines() if line.strip()]
    assert not any("prompt_token_ids" in r for r in recs)  # the OpenEnv proxy records none (FORMATS §2.2)
    hits = _hits(OPENENV, "RI001")
    assert len(hits) == 1 and hits[0]["level"] == "warning"
    assert "return_token_ids" in hits[0]["fix"]
    assert hits[0]["part"] == "prompt" and hits[0]["tok"] == 0
    assert hits[0]["link"].startswith("source=") and f"turn={hits[0]['turn']}" in hits[0]["link"]


@pytest.mark.parametrize("sample", ["qwen3-tiny", "smollm2"])
def test_no_prompt_ids_quiet_on_bundled_samples(sample):
    assert _hits(SAMPLE_DIR / sample, "RI001") == []


def test_no_prompt_ids_fires_when_one_turn_lost_its_ids(tmp_path):
    cap = _copy(SMOL, tmp_path)
    _edit_trace(cap, lambda r: r[2].pop("prompt_token_ids"))
    hits = _hits(cap, "RI001")
    assert [h["turn"] for h in hits] == [2] and "1 of 3 agent turns" in hits[0]["message"]


# ---- RI002 / RI003 / RI004 logprobs mode and sampling ----------------------------------

def _mode(cap: Path, mode: str | None) -> None:
    def f(doc):
        doc["server"]["logprobs_mode"] = mode
        doc["spec"]["logprobs_mode"] = ""
    _edit_summary(cap, f)


@pytest.mark.parametrize("top_p, top_k, fires", [(0.9, None, True), (None, 20, True), (1.0, -1, False)])
def test_processed_logprobs_with_truncated_sampler(tmp_path, top_p, top_k, fires):
    cap = _copy(SMOL, tmp_path)
    _mode(cap, "processed_logprobs")
    _edit_trace(cap, lambda r: r[1]["request"].update(top_p=top_p, top_k=top_k))
    assert [h["turn"] for h in _hits(cap, "RI002")] == ([1] if fires else [])


def test_processed_logprobs_quiet_under_raw_mode(tmp_path):
    cap = _copy(SMOL, tmp_path)  # the sample's own mode: raw_logprobs
    _edit_trace(cap, lambda r: r[1]["request"].update(top_p=0.9))
    assert _hits(cap, "RI002") == []


@pytest.mark.parametrize("temp, fires", [(0.7, True), (1.0, False), (None, False)])
def test_raw_logprobs_with_temperature(tmp_path, temp, fires):
    cap = _copy(SMOL, tmp_path)
    _edit_trace(cap, lambda r: r[3]["request"].update(temperature=temp))
    assert [h["turn"] for h in _hits(cap, "RI003")] == ([3] if fires else [])


def test_logprobs_mode_unknown(tmp_path):
    assert _hits(SMOL, "RI004") == []
    cap = _copy(SMOL, tmp_path)
    _mode(cap, None)
    assert len(_hits(cap, "RI004")) == 1


# ---- RI005 missing logprobs --------------------------------------------------------------

def test_missing_logprobs_on_trained_tokens(tmp_path):
    assert _hits(SMOL, "RI005") == []
    cap = _copy(SMOL, tmp_path)
    _edit_trace(cap, lambda r: r[1]["per_token_logps"].__setitem__(3, "n/a"))
    hits = _hits(cap, "RI005")
    assert [(h["turn"], h["position"], h["level"]) for h in hits] == [(1, 3, "error")]
    prompt = len(json.loads((SMOL / "trace.json").read_text())[1]["prompt_token_ids"])
    assert hits[0]["tok"] == prompt + 3


def test_missing_logprobs_quiet_on_untrained_call(tmp_path):
    cap = _copy(SMOL, tmp_path)
    _edit_trace(cap, lambda r: r[0]["per_token_logps"].__setitem__(0, "n/a"))  # the title call: never trained
    assert _hits(cap, "RI005") == []


# ---- RI006 bookkeeping not recognised ------------------------------------------------------

def test_title_call_labelled_main_fires(tmp_path):
    assert _hits(SMOL, "RI006") == []
    cap = _copy(SMOL, tmp_path)
    _edit_trace(cap, lambda r: r[0].update(kind="main"))
    hits = _hits(cap, "RI006")
    assert [h["turn"] for h in hits] == [0] and "title generator" in hits[0]["message"]


def test_unlabelled_title_call_is_recognised_by_the_rule():
    # the interception proxy labels nothing: the upstream rule (tools + primary prompt) must catch it
    assert _hits(OPENENV, "RI006") == []


# ---- RI007 / RI008 / RI009 tokenizer files ---------------------------------------------------

def _record_hashes(cap: Path) -> None:
    files = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in (cap / "tokenizer").iterdir()}
    _edit_summary(cap, lambda d: d.update(tokenizer={"source": "test", "folder": "tokenizer", "files": files}))


def test_tokenizer_files_changed_or_missing(tmp_path):
    cap = _copy(SMOL, tmp_path)
    _record_hashes(cap)
    assert _hits(cap, "RI007") == []
    (cap / "tokenizer" / "chat_template.jinja").write_text("{{ messages }}")
    (cap / "tokenizer" / "tokenizer_config.json").unlink()
    hits = _hits(cap, "RI007")
    assert len(hits) == 1 and "chat_template.jinja changed" in hits[0]["message"]
    assert "tokenizer_config.json missing" in hits[0]["message"]


def test_no_tokenizer_shipped():
    assert len(_hits(QWEN, "RI008")) == 1
    assert _hits(SMOL, "RI008") == []


def _model_folder(cap: Path, tmp: Path, template: str | None) -> Path:
    own = tmp / "model"
    shutil.copytree(SMOL / "tokenizer", own)
    if template is not None:
        (own / "chat_template.jinja").write_text(template)
    _edit_trace(cap, lambda recs: [r["request"].update(model=str(own)) for r in recs])
    return own


def test_chat_template_differs_from_the_models_own(tmp_path):
    cap = _copy(SMOL, tmp_path)
    original = (SMOL / "tokenizer" / "chat_template.jinja").read_text()
    _model_folder(cap, tmp_path, original.replace("<|im_start|>", "<|im_begin|>", 1))
    hits = _hits(cap, "RI009")
    assert len(hits) == 1
    assert f"at character {original.index('<|im_start|>') + len('<|im_')}" in hits[0]["message"]  # s vs b


def test_public_app_never_reads_a_server_folder_a_trace_names(tmp_path):
    # a visitor's trace naming a folder on the server must not make the public app compare against it
    cap = _copy(SMOL, tmp_path)
    _model_folder(cap, tmp_path, "{{ other }}")
    assert len(_hits(cap, "RI009")) == 1
    res = lint_source(cap, Settings(public=True), select=("RI009",))
    assert res["hits"] == []


def test_chat_template_same_as_the_models_own(tmp_path):
    cap = _copy(SMOL, tmp_path)
    _model_folder(cap, tmp_path, None)
    assert _hits(cap, "RI009") == []


# ---- RI010 truncated trained turn ------------------------------------------------------------

def _finish(r: dict, why: str) -> None:
    r["finish_reason"] = why
    r["response"]["choices"][0]["finish_reason"] = why


def test_trained_turn_cut_at_the_output_limit(tmp_path):
    cap = _copy(SMOL, tmp_path)
    recs = json.loads((SMOL / "trace.json").read_text())
    _edit_trace(cap, lambda r: _finish(r[1], "length"))
    hits = _hits(cap, "RI010")
    assert [(h["turn"], h["position"]) for h in hits] == [(1, len(recs[1]["completion_token_ids"]) - 1)]


def test_untrained_call_cut_is_quiet(tmp_path):
    cap = _copy(SMOL, tmp_path)
    _edit_trace(cap, lambda r: _finish(r[0], "length"))  # the title call
    assert _hits(SMOL, "RI010") == [] and _hits(cap, "RI010") == []


# ---- RI011 non-finite logprobs -----------------------------------------------------------------

@pytest.mark.parametrize("value", [float("nan"), float("-inf")])
def test_non_finite_logprob_in_the_record(tmp_path, value):
    assert _hits(SMOL, "RI011") == []
    cap = _copy(SMOL, tmp_path)
    _edit_trace(cap, lambda r: r[2]["per_token_logps"].__setitem__(5, value))
    hits = _hits(cap, "RI011")
    assert [(h["turn"], h["position"]) for h in hits] == [(2, 5)]


def test_floored_logprob_is_finite(tmp_path):
    cap = _copy(SMOL, tmp_path)
    _edit_trace(cap, lambda r: r[2]["per_token_logps"].__setitem__(5, -9999.0))  # vLLM's floor
    assert _hits(cap, "RI011") == []


# ---- RI012 ids out of vocabulary ----------------------------------------------------------------

def _vocab_size(folder: Path) -> int:
    tj = json.loads((folder / "tokenizer.json").read_text())
    ids = set(tj["model"]["vocab"].values()) | {a["id"] for a in tj["added_tokens"]}
    assert ids == set(range(len(ids)))  # dense ids: the size is the first id past the end
    return len(ids)


def test_id_out_of_vocab(tmp_path):
    n = _vocab_size(SMOL / "tokenizer")
    cap = _copy(SMOL, tmp_path)

    def edit(r):
        r[1]["completion_token_ids"][4] = n  # first id past the end
        r[1]["completion_tokens"][4] = f"token_id:{n}"
    _edit_trace(cap, edit)
    hits = _hits(cap, "RI012")
    assert [(h["turn"], h["part"], h["position"]) for h in hits] == [(1, "output", 4)]
    assert f"{n:,}" in hits[0]["message"]


def test_last_id_in_vocab_is_quiet(tmp_path):
    n = _vocab_size(SMOL / "tokenizer")
    cap = _copy(SMOL, tmp_path)

    def edit(r):
        r[1]["completion_token_ids"][4] = n - 1
        r[1]["completion_tokens"][4] = f"token_id:{n - 1}"
    _edit_trace(cap, edit)
    assert _hits(SMOL, "RI012") == [] and _hits(cap, "RI012") == []


# ---- RI013 length mismatches ----------------------------------------------------------------------

def test_logprobs_shorter_than_ids(tmp_path):
    cap = _copy(SMOL, tmp_path)
    recs = json.loads((SMOL / "trace.json").read_text())
    n = len(recs[2]["completion_token_ids"])
    _edit_trace(cap, lambda r: r[2]["per_token_logps"].pop())
    msgs = [h["message"] for h in _hits(cap, "RI013") if h["turn"] == 2]
    assert any(f"{n} completion_token_ids" in m and f"{n - 1} per_token_logps" in m for m in msgs)


def test_usage_counts_disagree(tmp_path):
    assert _hits(SMOL, "RI013") == [] and _hits(QWEN, "RI013") == []
    cap = _copy(SMOL, tmp_path)
    _edit_trace(cap, lambda r: r[3]["response"]["usage"].update(prompt_tokens=r[3]["response"]["usage"]
                                                                ["prompt_tokens"] + 1))
    hits = _hits(cap, "RI013")
    assert [h["turn"] for h in hits] == [3] and "usage.prompt_tokens" in hits[0]["message"]


# ---- a rollout without a folder, the scan, the CLI ------------------------------------------------

def test_rollout_level_checks_without_a_capture_folder(tmp_path):
    cap = _copy(SMOL, tmp_path)
    _edit_trace(cap, lambda r: r[2]["per_token_logps"].__setitem__(5, float("nan")))
    ro = load_source(str(cap / "trace.json"))  # a single file: no folder checks
    hits = lint_rollout(ro, Settings())
    # the reader shows the NaN as a gap, so the trainer's 0.0 rule (RI005) is what a lone file shows
    assert ("RI005", 2, 5) in [(h.rule, h.turn, h.position) for h in hits]


def test_scan_counts_hits_per_rule(tmp_path):
    root = tmp_path / "many"
    root.mkdir()
    for k in range(3):
        cap = _copy(SMOL, root, f"c{k}")
        if k:
            _edit_trace(cap, lambda r: _finish(r[1], "length"))
    seen = []
    res = lint_source(root, Settings(), progress=lambda d, t: seen.append((d, t)))
    assert res["totals"]["rollouts"] == 3 and seen[-1] == (3, 3)
    assert res["rules"]["RI010"] == {"name": "trained-turn-truncated", "level": "warning", "hits": 2, "rollouts": 2}


def _cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_exit_codes(tmp_path, capsys):
    code, out, _ = _cli(capsys, "lint", OPENENV, "--json")
    doc = json.loads(out)
    assert code == 0 and "RI001" in {h["rule"] for h in doc["hits"]}  # a warning: the pipeline goes on
    cap = _copy(SMOL, tmp_path)
    _edit_trace(cap, lambda r: r[2]["per_token_logps"].__setitem__(5, float("nan")))
    code, out, _ = _cli(capsys, "lint", cap)
    assert code == 1 and "RI011 error" in out
    code, out, _ = _cli(capsys, "lint", cap, "--select", "warning")
    assert code == 0
    code, _, err = _cli(capsys, "lint", cap, "--select", "RI0")
    assert code == 2 and err.startswith("error: --select: 'RI0'")
    code, _, err = _cli(capsys, "lint", tmp_path / "missing")
    assert code == 2 and "no such file" in err


def test_json_keys_are_the_documented_ones(capsys):
    section = (REPO / "docs" / "CLI.md").read_text().split("### `lint --json`", 1)[1]
    keys = re.findall(r"`([a-z_]+)`", re.search(r"^Top-level keys: (.*)\.$", section, re.M).group(1))
    _, out, _ = _cli(capsys, "lint", SMOL, "--json")
    assert list(json.loads(out)) == keys


def test_dataset_rows_are_linted_with_their_row_in_the_link(realdata, tmp_path):
    rows = json.loads((realdata / "harbor-golden-traces" / "openhands__hello-world.traces.json").read_text())
    rows += json.loads((realdata / "harbor-golden-traces" / "terminus_2__hello-world-invalid-json.traces.json")
                       .read_text())
    data = tmp_path / "rows.jsonl"  # Harbor's export rows, one per line: a dataset (a .json is one rollout)
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    seen = []
    res = lint_source(data, Settings(), progress=lambda d, t: seen.append(d))
    n = len(rows)
    assert res["totals"]["rollouts"] == n and seen == list(range(1, n + 1))
    # text-only rows: prompts re-rendered (RI001) and no logprobs at all (RI005), on every row
    assert res["rules"]["RI001"]["rollouts"] == n and res["rules"]["RI005"]["rollouts"] == n
    assert {h["row"] for h in res["hits"]} == set(range(n))
    assert all(f"row={h['row']}" in h["link"] for h in res["hits"])


def test_a_folders_text_output_says_each_rules_why_once(tmp_path):
    """Issue 41, point 11: lint over a folder printed a rule's why and fix under each of its hits (the same two
    lines 80 times). Three copies of a capture that ships no tokenizer/ (RI008 once each, its folder read
    here): one why line, one fix line, three hit lines, each naming its copy."""
    import shutil
    import subprocess
    import sys

    from viewer.config import SAMPLE_DIR

    names = ["c1", "c2", "c3"]
    for n in names:
        shutil.copytree(SAMPLE_DIR / "qwen3-tiny", tmp_path / n)
        assert not (tmp_path / n / "tokenizer").exists()
    r = subprocess.run([sys.executable, "-m", "viewer", "lint", str(tmp_path), "--quiet", "--select", "RI008"],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert sum(x.lstrip().startswith("why:") for x in lines) == 1, r.stdout
    assert sum(x.lstrip().startswith("fix:") for x in lines) == 1, r.stdout
    for n in names:
        assert sum(x.startswith(f"  {tmp_path / n}:") for x in lines) == 1, r.stdout
