"""What every subcommand promises (docs/CLI.md): the exit-code table, one ``error:`` line per failure
with the documented code, the documented ``--json`` keys with values checked against facts worked out
here, and ``--help`` text of setting options taken from ``Settings.docs()``."""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from requires import need
from viewer.cli import SUBCOMMANDS, build_parser, main
from viewer.cli.common import EXIT_CODES, SETTING_OPTIONS, run
from viewer.config import SAMPLE_DIR, Settings

REPO = Path(__file__).resolve().parent.parent
CLI_MD = (REPO / "docs" / "CLI.md").read_text()
SAMPLE = SAMPLE_DIR / "qwen3-tiny"
# every registered subcommand (a new one joins the usage and schema checks without editing this file)
COMMANDS = tuple(m.__name__.rsplit(".", 1)[1] for m in SUBCOMMANDS)


def _documented_keys(command: str) -> list[str]:
    section = CLI_MD.split(f"### `{command} --json`", 1)[1]
    line = re.search(r"^Top-level keys: (.*)\.$", section, re.M).group(1)
    return re.findall(r"`([a-z_]+)`", line)


def _call(capsys, argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_exit_code_table_is_the_code():
    rows = dict(re.findall(r"^\| (\d) \| (.+) \|$", CLI_MD.split("## Exit codes", 1)[1], re.M))
    assert sorted(int(k) for k in rows) == sorted(EXIT_CODES) == [0, 1, 2, 3, 4, 5]


def _bad_json(tmp: Path) -> Path:
    (tmp / "bad").mkdir(exist_ok=True)
    (tmp / "bad" / "trace.json").write_text("{not json")
    return tmp / "bad"


# command line → (code, text the one stderr line must hold); "{tmp}" is the test's folder
BAD = [
    (["summary", "{tmp}/missing"], 2, "{tmp}/missing: no such file"),
    (["summary", "{bad}"], 2, "trace.json: line 1, column 2"),
    (["summary", SAMPLE, "--row", "3"], 2, "--row does not apply"),
    (["drift", "{tmp}/missing"], 2, "{tmp}/missing: no such file"),
    (["drift", SAMPLE, "--limit", "0"], 2, "--limit must be at least 1"),
    (["drift", SAMPLE, "--tokenizer", "{tmp}"], 2, "could not be loaded"),
    (["compare", SAMPLE, "{tmp}/missing"], 2, "{tmp}/missing: no such file"),
    (["compare", SAMPLE, "{bad}"], 2, "trace.json: line 1, column 2"),
    (["capture", "--scripted", "--instruction", "x", "--out", "{tmp}/o"], 2, "--scripted needs a bundled task"),
    (["capture", "--agent-timeout", "-3", "--out", "{tmp}/o"], 2, "--agent-timeout: -3.0 is out of range"),
    (["rescore", "{tmp}/missing", "--model", "tiny-qwen3"], 2, "{tmp}/missing: no such file"),
    (["rescore", SAMPLE, "--model", "tiny-qwen3", "--temperature", "0"], 2, "--temperature must be > 0"),
    (["export", SAMPLE, "-o", "{tmp}/o.html", "--turns", "1,x"], 2, "--turns: 'x' is not a turn or a range"),
    (["export", SAMPLE, "-o", "{tmp}/o.html", "--turns", "3-1"], 2, "--turns: '3-1' ends before it starts"),
    (["export", SAMPLE, "-o", "{tmp}/o.html", "--turns", "2,7"], 2, "--turns: turn 7 is not in this rollout (turns 0–3)"),
    (["export", SAMPLE, "-o", "{tmp}/o.html", "--tok", "12-"], 2, "--tok: '12-' is not a token range"),
    (["export", SAMPLE, "-o", "{tmp}/o.html", "--turns", "1", "--tok", "9000-9001"], 2,
     "--tok: tokens 9000–9001 are past the end of turn 1 (6,283 tokens)"),
    (["export", SAMPLE, "-o", "{tmp}/o.html", "--mode", "delta"], 2, "--mode delta: this rollout has no rescore"),
    (["export", "{tmp}/missing", "-o", "{tmp}/o.html"], 2, "{tmp}/missing: no such file"),
    (["export", "--deck", "{bad}/trace.json", "-o", "{tmp}/o.html"], 2, "trace.json: not JSON"),
]


@pytest.mark.parametrize("argv, code, needle", BAD, ids=[" ".join(map(str, a[0][:2])) + f" #{i}"
                                                        for i, a in enumerate(BAD)])
def test_bad_input_is_one_line_with_the_documented_code(tmp_path, capsys, argv, code, needle):
    subs = {"{tmp}": str(tmp_path), "{bad}": str(_bad_json(tmp_path))}

    def fill(s) -> str:
        return re.sub(r"\{tmp\}|\{bad\}", lambda m: subs[m.group(0)], str(s))

    got, out, err = _call(capsys, [fill(a) for a in argv])
    assert (got, out) == (code, "")
    assert err.count("\n") == 1 and err.startswith("error: ") and fill(needle) in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("command", COMMANDS)
def test_usage_errors_exit_2(capsys, command):
    with pytest.raises(SystemExit) as e:
        main([command, "--no-such-option"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("usage: ") and f"python -m viewer {command}: error: " in err


@pytest.mark.parametrize("argv", [["summary", SAMPLE], ["compare", SAMPLE, SAMPLE],
                                  ["rescore", SAMPLE, "--model", "tiny-qwen3"]], ids=lambda a: a[0])
def test_over_a_budget_exits_3(monkeypatch, capsys, argv):
    if argv[0] == "rescore":
        from viewer.rescore import torch_available

        if not torch_available():  # without it rescore exits 4 first (test_rescore.py)
            need("torch", "requirements-rescore.txt, installed by scripts/setup.sh")
    monkeypatch.setenv("VIEWER_BUDGET_TURNS", "1")  # the sample's trace holds 3 agent turns (+ a title call)
    code, out, err = _call(capsys, argv)
    assert (code, out) == (3, "")
    assert err.startswith("error: ") and "over the 1 turns budget" in err and "VIEWER_BUDGET_TURNS" in err


def test_an_unexpected_error_is_one_line_and_exit_5(capsys):
    def broken(args, settings):
        raise KeyError("boom")

    assert run(broken, argparse.Namespace(), Settings()) == 5
    assert capsys.readouterr().err == "error: unexpected KeyError: 'boom'\n"


# --json: documented keys, values from facts worked out here ------------------------------------------

def _raw_agent_turns(folder: Path) -> list[dict]:
    """The sample's turns file, read directly: one entry per agent call (ids, masks, logprobs)."""
    return json.loads((folder / "turns.json").read_text())


def test_summary_json(capsys):
    code, out, _ = _call(capsys, ["summary", SAMPLE, "--json"])
    doc = json.loads(out)
    assert code == 0 and list(doc) == _documented_keys("summary")
    raw = _raw_agent_turns(SAMPLE)
    meta = json.loads((SAMPLE / "summary.json").read_text())
    assert doc["turns"] == len(raw) and doc["output_tokens"] == sum(len(e["output_ids"]) for e in raw)
    assert doc["trained_tokens"] == sum(sum(e["mask"]) for e in raw)
    assert (doc["model"], doc["reward"], doc["tokenizer"], doc["tokenizer_source"]) == (
        meta["model"], meta["reward"], "qwen3", "bundled-qwen3")


def test_drift_json(capsys):
    code, out, _ = _call(capsys, ["drift", SAMPLE, "--json", "--quiet"])
    doc = json.loads(out)
    assert code == 0 and list(doc) == _documented_keys("drift")
    raw = _raw_agent_turns(SAMPLE)
    assert doc["source"] == str(SAMPLE) and doc["errors"] == [] and doc["tokenizer"] == "qwen3"
    assert [t["turn"] for t in doc["turns"]] == list(range(1, len(raw) + 1))
    assert doc["totals"]["turns"] == len(raw) and doc["totals"]["rollouts"] == 1
    # the sample spells <tool_call> as pieces in every turn (sample_data/README.md): each turn drifts
    assert doc["totals"]["drifted_turns"] == len(raw) and doc["totals"]["by_cause"]["special_token"] == len(raw)
    assert _call(capsys, ["drift", SAMPLE, "--json", "--quiet", "--fail-on-findings"])[0] == 1


def test_compare_json(capsys):
    code, out, _ = _call(capsys, ["compare", SAMPLE, SAMPLE, "--json"])
    doc = json.loads(out)
    assert code == 0 and list(doc) == _documented_keys("compare")
    raw = _raw_agent_turns(SAMPLE)
    assert doc["identical"] is True and doc["tokenizers"] == {"a": "qwen3", "b": "qwen3"}
    agent = [t for t in doc["turns"] if t["label"].startswith("agent")]
    assert [t["common_prefix"] for t in agent] == [len(e["prompt_ids"]) + len(e["output_ids"]) for e in raw]
    smol = SAMPLE_DIR / "smollm2"
    assert _call(capsys, ["compare", SAMPLE, smol, "--json", "--fail-on-findings"])[0] == 1


def test_capture_json_of_a_capture_that_fails(tmp_path, capsys):
    """A real endpoint capture whose server is not there (nothing listens on loopback port 9): the
    capture ends ``failed`` in its server phase, exit 1, and --json is the summary file it wrote."""
    out_dir = tmp_path / "cap"
    code, out, _ = _call(capsys, ["capture", "--backend", "endpoint", "--endpoint", "http://127.0.0.1:9",
                                  "--model", "served", "--agent-timeout", "7", "--no-auto-setup", "--out", out_dir,
                                  "--json"])
    doc = json.loads(out)
    assert code == 1 and set(_documented_keys("capture")) <= set(doc)
    assert doc == json.loads((out_dir / "summary.json").read_text())
    assert (doc["status"], doc["failed_phase"], doc["backend"], doc["model"]) == ("failed", "server", "endpoint",
                                                                                   "served")
    assert "127.0.0.1:9" in doc["error"] and doc["calls"] == 0 and doc["reward"] is None
    assert doc["spec"]["agent_timeout_s"] == 7.0 and doc["spec"]["endpoint"] == "http://127.0.0.1:9"


@pytest.mark.slow
def test_rescore_json(capsys):
    from test_rescore_cli import _need

    _need("tiny-qwen3")
    code, out, _ = _call(capsys, ["rescore", SAMPLE, "--model", "tiny-qwen3", "--dtype", "float32", "--json",
                                  "--threshold", "0", "--fail-on-findings"])
    doc = json.loads(out)
    assert code == 1 and list(doc) == _documented_keys("rescore")  # threshold 0: every nonzero Δ is a finding
    raw = _raw_agent_turns(SAMPLE)
    assert doc["totals"]["tokens"] == sum(sum(e["mask"]) for e in raw) and doc["tokenizer"] == "qwen3"
    assert (doc["model"], doc["dtype"], doc["threshold"]) == ("tiny-qwen3", "float32", 0.0)


# --help: the settings' own text --------------------------------------------------------------------

def _help_of(parser: argparse.ArgumentParser, command: str, flag: str) -> str:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return next(a for a in sub._actions if flag in a.option_strings).help


def test_setting_options_take_their_help_from_settings_docs(capsys):
    parser = build_parser()
    docs = {name: (env, default, text) for name, env, default, text in Settings.docs()}
    expected = {("drift", "--tokenizer"): "tokenizer", ("compare", "--tokenizer"): "tokenizer",
                ("summary", "--tokenizer"): "tokenizer", ("rescore", "--tokenizer"): "tokenizer",
                ("export", "--tokenizer"): "tokenizer", ("rescore", "--device"): "rescore_device", ("rescore", "--dtype"): "rescore_dtype",
                ("rescore", "--threshold"): "rescore_flag_delta", ("capture", "--model"): "capture_model",
                ("capture", "--agent-timeout"): "capture_agent_timeout_s",
                ("capture", "--test-timeout"): "capture_test_timeout_s",
                ("capture", "--max-output-tokens"): "capture_max_output_tokens",
                ("capture", "--top-logprobs"): "capture_top_logprobs",
                ("capture", "--logprobs-mode"): "capture_logprobs_mode",
                ("capture", "--flavor"): "capture_hf_flavor", ("capture", "--results-repo"): "capture_results_repo",
                ("capture", "--no-auto-setup"): "capture_auto_setup"}
    assert SETTING_OPTIONS == expected
    for (command, flag), field in expected.items():
        env, default, text = docs[field]
        help_text = _help_of(parser, command, flag)
        assert text in help_text and env in help_text, (command, flag)
        # and what `--help` prints: the same text, however argparse wraps it (also at hyphens)
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "".join(text.split()) in "".join(capsys.readouterr().out.split()), (command, flag)


def test_summary_fail_on_findings(tmp_path, capsys):
    """A trace whose call 2 has fewer logprobs than tokens: a problem of severity error, so exit 1
    with --fail-on-findings (the document is still printed), 0 without."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_fixtures", REPO / "tests" / "data" / "make_fixtures.py")
    fx = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fx)
    recs = fx.openenv_records()
    recs[1]["per_token_logps"] = recs[1]["per_token_logps"][:2]
    (tmp_path / "trace.json").write_text(json.dumps(recs))
    code, out, _ = _call(capsys, ["summary", tmp_path, "--json", "--fail-on-findings"])
    assert code == 1 and [p["severity"] for p in json.loads(out)["problems"]] == ["error"]
    assert _call(capsys, ["summary", tmp_path, "--json"])[0] == 0
    assert _call(capsys, ["summary", SAMPLE, "--json", "--fail-on-findings"])[0] == 0  # no problem: no finding


def test_summary_names_the_tokenizer_without_loading_it():
    """``summary`` only names the tokenizer (tokenizer_for(load=False)): loading it imports
    transformers and torch, seconds for a command that otherwise takes a fraction of one."""

    code = ("import sys, json, io, contextlib\nfrom viewer.cli import main\nbuf = io.StringIO()\n"
            f"with contextlib.redirect_stdout(buf): rc = main(['summary', {str(SAMPLE)!r}, '--json'])\n"
            "print(rc, json.loads(buf.getvalue())['tokenizer'], 'transformers' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.stdout.split() == ["0", "qwen3", "False"], r.stderr


def test_export_json(capsys, tmp_path):
    out = tmp_path / "o.html"
    code, text, _ = _call(capsys, ["export", SAMPLE, "-o", out, "--turns", "1-2", "--json"])
    doc = json.loads(text)
    assert code == 0 and list(doc) == _documented_keys("export")
    assert (doc["out"], doc["bytes"], doc["steps"], doc["turns"]) == (str(out), len(out.read_bytes()), 2, 2)
    assert (doc["rollouts"], doc["notes"], doc["flagged_notes"]) == (1, 0, 0)  # the sample has no notes.json


def test_every_subcommand_documents_its_json():
    documented = re.findall(r"^### `([a-z-]+) --json`", CLI_MD, re.M)
    assert sorted(documented) == sorted(COMMANDS)
    assert {"summary", "drift", "compare", "capture", "rescore"} <= set(COMMANDS)
    for name in COMMANDS:
        assert _documented_keys(name), name


@pytest.mark.slow  # a fresh Python process
def test_a_reader_that_goes_away_is_not_an_error():
    # `python -m viewer summary ... | head`: the pipe closes before we write; no "error:" line, exit 0
    p = subprocess.Popen([sys.executable, "-m", "viewer", "summary", str(SAMPLE)], cwd=REPO,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # the reader is gone before the command writes its first line
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0, err
    assert "error" not in err.lower() and "Traceback" not in err, err
