"""``python -m viewer summary``: plain and JSON output, exit codes, error lines."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from viewer import cli
from viewer.cli.summary import SUMMARY_KEYS

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
_spec = importlib.util.spec_from_file_location("make_fixtures", DATA / "make_fixtures.py")
fx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fx)

OURS_AGENT = [c for c, s in fx.OURS_CALLS.items() if s[0] in ("main", "error")]
OURS_TRAINED = [c for c in OURS_AGENT if fx.OURS_CALLS[c][3]]


def test_summary_json_matches_fixture_construction(capsys):
    assert cli.main(["summary", str(DATA / "capture_ours"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "capture" and doc["model"] == fx.MODEL and doc["tokenizer"] == "qwen3"
    assert doc["turns"] == len(OURS_AGENT)
    assert doc["trained_turns"] == len(OURS_TRAINED)
    assert doc["filtered_calls"] == len(fx.OURS_CALLS) - len(OURS_AGENT)
    assert doc["output_tokens"] == sum(fx.OURS_CALLS[c][1] for c in OURS_AGENT)
    assert doc["trained_tokens"] == sum(fx.OURS_CALLS[c][1] for c in OURS_TRAINED)
    assert doc["prompt_tokens"] == sum(fx.OURS_CALLS[c][2] for c in (2, 3, 5))
    lps = [fx.logprob(c, k) for c in OURS_AGENT for k in range(fx.OURS_CALLS[c][1])]
    assert doc["mean_logprob"] == pytest.approx(sum(lps) / len(lps))
    assert doc["reward"] == fx.SUMMARY["reward"]
    assert doc["problems"] == []  # the fixture is well-formed: nothing to report


def test_summary_plain_is_aligned_and_lists_problems(tmp_path, capsys):
    recs = fx.openenv_records()
    recs[1]["per_token_logps"] = recs[1]["per_token_logps"][:2]
    (tmp_path / "trace.json").write_text(json.dumps(recs))
    assert cli.main(["summary", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    keys = [line.split(":")[0] for line in out[:len(SUMMARY_KEYS)]]
    assert keys == list(SUMMARY_KEYS)
    cols = {line.index(line.split(":", 1)[1].strip()) for line in out[:len(SUMMARY_KEYS)]}
    assert len(cols) == 1  # values start in one column
    assert "reward:" in out[len(SUMMARY_KEYS) - 1] and out[len(SUMMARY_KEYS) - 1].endswith("null")
    assert out[len(SUMMARY_KEYS)].startswith("problems:")
    assert any("trace.json: record 1 (line" in line and "call 2" in line for line in out)


def test_errors_go_to_stderr_with_exit_codes(tmp_path, capsys):
    assert cli.main(["summary", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "no such file" in err[0]
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert cli.main(["summary", str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "bad.json: line 1, column 2" in captured.err
    with pytest.raises(SystemExit) as e:
        cli.main([])
    assert e.value.code == 2


def test_python_dash_m_viewer_runs():
    r = subprocess.run([sys.executable, "-m", "viewer", "summary", str(DATA / "capture_openenv"), "--json"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    agent = [c for c, s in fx.OPENENV_CALLS.items() if s[0] == "main"]
    assert doc["turns"] == len(agent) and doc["reward"] == 0.5
    assert doc["trained_turns"] == sum(1 for c in agent if fx.OPENENV_CALLS[c][2])


def test_cli_prints_no_transformers_advice():
    """`python -m viewer ...` says nothing on stderr on success (before: transformers' "PyTorch was
    not found" line on every call)."""
    import subprocess
    import sys

    from viewer.config import SAMPLE_DIR

    env = {k: v for k, v in os.environ.items() if k != "TRANSFORMERS_NO_ADVISORY_WARNINGS"}
    r = subprocess.run([sys.executable, "-m", "viewer", "summary", str(SAMPLE_DIR / "qwen3-tiny"), "--json"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_a_python_without_the_packages_says_what_to_run_in_one_line():
    """Issue 41: `python -m viewer lint …` run by a Python that lacks the dependencies (the system one beside
    a checkout) ended in a ModuleNotFoundError traceback. Now one line names the module and what to run, and
    the exit code is 4 (a part is not installed). msgspec is made unimportable in a real child interpreter."""
    import subprocess
    import sys

    code = ("import sys, runpy; sys.modules['msgspec'] = None; sys.argv = ['viewer', 'lint', 'sample_data/qwen3-tiny']; "
            "runpy.run_module('viewer', run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=Path(__file__).resolve().parent.parent)
    assert r.returncode == 4, (r.returncode, r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "'msgspec'" in lines[0] and "make setup" in lines[0] and ".venv/bin/python -m viewer" in lines[0]
