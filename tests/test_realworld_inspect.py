"""Inspect AI eval logs (``.json`` and ``.eval``), read from logs UKGovernmentBEIS/inspect_ai committed
(tests/data/realworld/inspect, see SOURCES.md).

Every expected figure comes from the raw file through plain ``json`` / ``zipfile``: rollouts = the
samples (a ``.json`` log's ``samples``; a ``.eval`` zip's ``samples/*.json`` members), assistant turns =
the sample's assistant messages, reward = the first score's value (``C`` 1, ``I`` 0, a number as
itself, none without scores), model and task = the log's ``eval.model`` / ``eval.task``.
Where the ``inspect_ai`` package is installed it is a second oracle.
"""
from __future__ import annotations

import io
import json
import math
import zipfile
from pathlib import Path

import pytest

from viewer.row_browser import browse_page
from viewer.sources import SourceError, open_dataset
from viewer.sources.formats import RowRef
from viewer.sources.inspect_log import read_row, score_to_float
from viewer.sources.registry import detect_formats
from viewer.sources.evalzip import read_inspect_eval
from viewer.sources.rowdata import RowReadError, local_dataset

DIR = Path(__file__).resolve().parent / "data" / "realworld" / "inspect"
JSON_LOGS = ["2025-05-12T20-28-13-04-00_popularity.json", "2025-05-12T20-27-36-04-00_browser.json"]
EVAL_LOGS = ["log_message_deduplication.eval", "log_streaming.eval",
             "2025-02-11T15-18-04-05-00_popularity_mj7khqpMM4GBCfVQozKgzB.eval",
             "2025-02-11T15-17-00-05-00_popularity_dPiJifoWeEQBrfWsAopzWr.eval"]
NO_ASSISTANT = "log_tool_call_error.json"
NO_SAMPLES = "2025-05-12T20-28-13-04-00_no-samples.json"


# --------------------------------------------------------------------------- the oracle: raw files

def raw_log(name: str) -> tuple[dict, list[dict]]:
    """(the log's header: version, status, eval, ...; its samples), straight from the file."""
    path = DIR / name
    if name.endswith(".json"):
        log = json.loads(path.read_text(encoding="utf-8"))
        return log, log.get("samples") or []
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        head = json.loads(z.read("header.json" if "header.json" in names else "_journal/start.json"))
        samples = [json.loads(z.read(n)) for n in dict.fromkeys(names) if n.startswith("samples/")]
    return head, samples


def raw_reward(sample: dict) -> float | None:
    scores = sample.get("scores") or {}
    if not scores:
        return None
    value = next(iter(scores.values()))["value"]
    return {"C": 1.0, "I": 0.0}[value] if isinstance(value, str) else float(value)


def assistants(sample: dict) -> list[dict]:
    return [m for m in sample["messages"] if m["role"] == "assistant"]


def key(sample_or_task: dict) -> tuple:
    return (sample_or_task.get("sample_id", sample_or_task.get("id")), sample_or_task["epoch"])


@pytest.fixture(scope="module", params=JSON_LOGS + EVAL_LOGS)
def case(request):
    return request.param, open_dataset(DIR / request.param)


# --------------------------------------------------------------------------- every real log

def test_detected_as_inspect_only(case):
    name, src = case
    assert src.format.name == "inspect"
    stored = local_dataset([str(DIR / name)], str(DIR), name).read_row(0)  # the one stored row: the whole log
    assert [f.name for f in detect_formats(set(stored), stored)] == ["inspect"]


def test_one_rollout_per_sample(case):
    name, src = case
    _, samples = raw_log(name)
    assert len(src.dataset) == len(samples) >= 1
    got = [key(src.rollout(r).task) for r in range(len(samples))]
    assert sorted(got, key=str) == sorted((key(s) for s in samples), key=str)
    # Inspect's own order (inspect_ai/log/_log.py sort_samples) for a zip, whose members come in any order
    if name.endswith(".eval"):
        assert got == sorted(got, key=lambda k: (k[1], k[0] if isinstance(k[0], str) else str(k[0]).zfill(20)))


def test_turns_reward_model_and_task_per_sample(case):
    name, src = case
    head, samples = raw_log(name)
    by_key = {key(s): s for s in samples}
    for r in range(len(samples)):
        ro = src.rollout(r)
        s = by_key[key(ro.task)]
        assert len(ro.turns) == len(assistants(s)), (name, r)
        assert all(t.output_ids for t in ro.turns), (name, r)  # each turn really tokenised
        want = raw_reward(s)
        assert ro.reward == want if want is not None else ro.reward is None, (name, r)
        assert ro.model == head["eval"]["model"] and ro.task["task"] == head["eval"]["task"]
        assert ro.task["log_status"] == head.get("status", "started")
        assert ro.summary.get("scores", {}) == {k: v["value"] for k, v in (s.get("scores") or {}).items()}
        assert not [p for p in ro.problems if p.severity == "error"], ro.problems


def test_messages_keep_text_and_roles(case):
    name, src = case
    _, samples = raw_log(name)
    by_key = {key(s): s for s in samples}
    for r in range(len(samples)):
        ro = src.rollout(r)
        raw = by_key[key(ro.task)]["messages"]
        last = ro.turns[-1]
        seen = list(last.messages) + [last.response]  # the whole conversation up to the last reply
        assert [m["role"] for m in seen] == [m["role"] for m in raw[:len(seen)]]
        for got, want in zip(seen, raw):
            text = want["content"] if isinstance(want["content"], str) else \
                "\n".join(p["text"] for p in want["content"] if p["type"] == "text")
            assert got["content"] == text


def test_row_table_lists_every_sample(case):
    name, src = case
    head, samples = raw_log(name)
    page = browse_page(src, 0, 100)
    assert page.total == len(samples)
    for row in page.rows:
        s = [x for x in samples  # the task column: "task #id", plus the epoch past the first
             if row["task"] == f"{head['eval']['task']} #{x['id']}" + (f" epoch {x['epoch']}" if x["epoch"] != 1 else "")]
        assert len(s) == 1, row["task"]
        assert row["turns"] == len(assistants(s[0])) and row["model"] == head["eval"]["model"]
        assert row["reward"] == raw_reward(s[0]) and not row["error"]


# --------------------------------------------------------------------------- tool calls, problems

@pytest.mark.parametrize("name", ["2025-05-12T20-27-36-04-00_browser.json", "log_message_deduplication.eval"])
def test_tool_calls_become_openai_calls(name):
    """Inspect names the function as a string and stores arguments as an object: OpenAI shape, arguments
    as a JSON string that parses back to the file's object; tool replies answer the call's id."""
    src = open_dataset(DIR / name)
    _, samples = raw_log(name)
    ro = src.rollout(0)
    raw_calls = [c for m in assistants(samples[0]) for c in m.get("tool_calls") or []]
    got_calls = [c for t in ro.turns for c in t.response.get("tool_calls") or []]
    assert len(got_calls) == len(raw_calls) >= 4
    for got, want in zip(got_calls, raw_calls):
        assert got["type"] == "function" and got["id"] == want["id"]
        assert got["function"]["name"] == want["function"]
        assert json.loads(got["function"]["arguments"]) == want["arguments"]
    tool_ids = [m["tool_call_id"] for m in ro.turns[-1].messages if m["role"] == "tool"]
    assert tool_ids == [m["tool_call_id"] for m in samples[0]["messages"] if m["role"] == "tool"]
    assert not [t for t in ro.turns if t.error]  # the chat template renders every turn


def test_sample_without_assistant_message_is_a_located_problem():
    """The sample in this log holds only tool messages: no turn to show, and an error saying where."""
    src = open_dataset(DIR / NO_ASSISTANT)
    _, samples = raw_log(NO_ASSISTANT)
    assert len(src.dataset) == len(samples) == 1 and not assistants(samples[0])
    ro = src.rollout(0)
    assert ro.turns == []
    errors = [p for p in ro.problems if p.severity == "error"]
    assert len(errors) == 1 and errors[0].where == "row 0 .messages"
    assert f"sample {samples[0]['id']!r} epoch {samples[0]['epoch']} has no assistant message" in errors[0].message


def test_log_without_samples_says_so():
    log, samples = raw_log(NO_SAMPLES)
    assert samples == [] and log["status"] == "cancelled"
    src = open_dataset(DIR / NO_SAMPLES)
    assert src.format.name == "inspect" and len(src.dataset) == 1  # the stored row stays, holding its error
    with pytest.raises(SourceError, match=r"\.samples: this Inspect log \(status 'cancelled'\) holds no samples"):
        src.rollout(0)


def test_a_folder_of_logs_lists_every_sample_of_every_log():
    """.json and .eval logs side by side: one dataset whose rows are all their samples (and one error row
    for the log without samples)."""
    src = open_dataset(DIR)
    names = sorted(p.name for p in DIR.iterdir() if p.suffix in (".json", ".eval"))
    assert src.format.name == "inspect"
    rows = [max(1, len(raw_log(n)[1])) for n in names]  # the files in name order, as the folder lists them
    assert len(src.dataset) == sum(rows)
    page = browse_page(src, 0, 100)
    assert [r["row"] for r in page.rows if r["error"]] == [sum(rows[:names.index(NO_SAMPLES)])]


def test_a_folder_of_json_logs_is_counted_from_their_bytes(tmp_path):
    """A folder of `.json` logs only (what `inspect eval` writes with `--log-format json`): each log's samples are
    counted from its bytes (msgspec's skip), not decoded whole and held; the rows are every sample, a log cut
    short one row saying why, and each sample reads as the log read alone gives it."""
    from viewer.sources import inspect_log

    names = [n for n in sorted(p.name for p in DIR.glob("*.json"))]
    for n in names:
        (tmp_path / n).write_bytes((DIR / n).read_bytes())
    cut = (DIR / names[-1]).read_bytes()[:4000]
    (tmp_path / "zz-cut.json").write_bytes(cut)
    src = open_dataset(tmp_path)
    assert src.format.name == "inspect" and src.dataset.base.decode is inspect_log.FORMAT.decode
    decoded = []
    src.dataset.base.decode = lambda raw: decoded.append(len(raw)) or inspect_log.FORMAT.decode(raw)
    counts = [max(1, len(raw_log(n)[1])) for n in names] + [1]
    assert len(src.dataset) == sum(counts)
    # only the log without samples and the one cut short, which their count leaves to the row layer (to say why):
    # the others counted from their bytes
    assert sorted(decoded) == sorted([(DIR / NO_SAMPLES).stat().st_size, len(cut)])
    page = browse_page(src, 0, 100)
    bad = {sum(counts[:names.index(NO_SAMPLES)]), sum(counts) - 1}
    assert {r["row"] for r in page.rows if r["error"]} == bad
    alone = {n: open_dataset(DIR / n) for n in names if n != NO_SAMPLES}
    row = 0
    for n, c in zip(names, counts):
        for k in range(c if n != NO_SAMPLES else 0):
            assert src.rollout(row).turns == alone[n].rollout(k).turns, (n, k)
            row += 1
        row += n == NO_SAMPLES


def test_attachment_references_are_resolved():
    """Inspect may store a long string once in ``attachments`` and refer to it as ``attachment://<hash>``
    (inspect_ai/log/_condense.py): a real sample with its reply moved there reads the same."""
    log, samples = raw_log("2025-05-12T20-28-13-04-00_popularity.json")
    s = json.loads(json.dumps(samples[0]))
    reply = assistants(s)[0]
    text, reply["content"] = reply["content"], "attachment://0123abcd"
    s["attachments"] = {"0123abcd": text}
    conv = read_row(dict(s, eval={"task": log["eval"]["task"], "model": log["eval"]["model"]}), RowRef("x", 0))
    assert [m["content"] for m in conv.messages if m["role"] == "assistant"] == [text]
    s["attachments"] = {}
    conv = read_row(dict(s, eval={}), RowRef("x", 0))
    assert any("attachment(s) not in the sample: 0123abcd" in p.message for p in conv.problems)


def test_content_parts_reasoning_and_tool_errors():
    """Content parts (Inspect's _util/content.py) on a real sample: reasoning parts become
    ``reasoning_content``, media parts placeholders with a warning, a tool error the text Inspect sends."""
    log, samples = raw_log("2025-05-12T20-27-36-04-00_browser.json")
    s = json.loads(json.dumps(samples[0]))
    first = next(i for i, m in enumerate(s["messages"]) if m["role"] == "assistant")
    s["messages"][first]["content"] = [{"type": "reasoning", "reasoning": "look at the site first"},
                                       {"type": "text", "text": "Going there."}]
    s["messages"][0]["content"] = [{"type": "text", "text": "See this:"}, {"type": "image", "image": "data:..."}]
    tool = next(m for m in s["messages"] if m["role"] == "tool")
    tool["error"] = {"type": "timeout", "message": "timed out"}
    conv = read_row(dict(s, eval={"model": "m", "task": "t"}), RowRef("x", 0))
    a = conv.messages[first]
    assert a["reasoning_content"] == "look at the site first" and a["content"] == "Going there."
    assert conv.messages[0]["content"] == "See this:\n[image]"
    assert any(p.where == "row 0 .messages[0].content" and "image" in p.message for p in conv.problems)
    assert next(m for m in conv.messages if m["role"] == "tool")["content"] == "Error: timed out"


@pytest.mark.parametrize("value,want", [("C", 1.0), ("P", 0.5), ("I", 0.0), ("N", 0.0), ("yes", 1.0),
                                        ("False", 0.0), ("0.7", 0.7), (0.25, 0.25), (3, 3.0), (True, 1.0),
                                        ({"accuracy": 1}, None), ([1], None), ("maybe", None),
                                        (math.nan, None), (None, None)])
def test_score_values_map_like_inspect(value, want):
    assert score_to_float(value) == want


def test_unmappable_score_leaves_reward_unknown_with_a_warning():
    log, samples = raw_log("2025-05-12T20-28-13-04-00_popularity.json")
    s = dict(samples[0], scores={"match": {"value": {"accuracy": 1.0}}}, eval={})
    conv = read_row(s, RowRef("x", 0))
    assert conv.reward is None
    assert any(p.where == "row 0 .scores.match.value" and p.severity == "warning" for p in conv.problems)


# --------------------------------------------------------------------------- the .eval zip

def test_eval_zip_is_one_stored_row_shaped_like_the_json_log():
    name = "log_streaming.eval"
    head, samples = raw_log(name)
    row = local_dataset([str(DIR / name)], str(DIR), name).read_row(0)
    assert set(row) == set(head) | {"samples", "reductions"}
    assert row["eval"] == head["eval"] and row["status"] == head["status"]
    assert len(row["samples"]) == len(samples)
    assert all("events" not in s and "messages" in s for s in row["samples"])  # the transcript is dropped


def _rezip(name: str, dest: Path, drop: set[str] = frozenset(), add: dict[str, bytes] | None = None) -> Path:
    with zipfile.ZipFile(DIR / name) as src, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            if info.filename not in drop:
                out.writestr(info.filename, src.read(info))
        for n, data in (add or {}).items():
            out.writestr(n, data)
    return dest


def test_journal_only_eval_reads_as_started(tmp_path):
    """A running or crashed eval has no header.json yet, only _journal/start.json: a real log less its
    header (the state Inspect leaves it in before log_finish) still opens, status "started"."""
    name = "log_streaming.eval"
    head, samples = raw_log(name)
    p = _rezip(name, tmp_path / "running.eval", drop={"header.json"})
    src = open_dataset(p)
    assert src.format.name == "inspect" and len(src.dataset) == len(samples)
    ro = src.rollout(0)
    assert ro.task["log_status"] == "started" and ro.model == head["eval"]["model"]


def _not_inspect(tmp_path) -> tuple[Path, Path]:
    p = tmp_path / "other.eval"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("data/train.json", "{}")
    q = tmp_path / "text.eval"
    q.write_text('{"version": 2}')
    return p, q


def test_a_zip_that_is_not_an_inspect_log_is_refused(tmp_path):
    p, q = _not_inspect(tmp_path)
    with pytest.raises(SourceError, match="not an Inspect AI log: it has neither header.json"):
        open_dataset(p, format="inspect")
    with pytest.raises(SourceError, match="not a readable zip archive"):
        open_dataset(q, format="inspect")


def test_a_zip_that_is_not_an_inspect_log_is_refused_without_format(tmp_path):
    p, q = _not_inspect(tmp_path)
    with pytest.raises(SourceError, match="not an Inspect AI log: it has neither header.json"):
        open_dataset(p)
    with pytest.raises(SourceError, match="not a readable zip archive"):
        open_dataset(q)


def test_zip_bomb_refused_before_inflating(tmp_path, monkeypatch):
    """Members are checked against the file limit by their declared sizes before any is inflated."""
    big = b"{" + b" " * (3 << 20) + b"}"  # 3 MB of JSON whitespace: compresses to a few KB
    p = _rezip("log_streaming.eval", tmp_path / "big.eval", add={"samples/9_epoch_1.json": big})
    data = p.read_bytes()
    assert len(data) < 200_000
    from viewer.sources.rowgroups import default_limits

    def no_inflate(*a, **k):
        raise AssertionError("a member was inflated before the size check")

    monkeypatch.setattr(zipfile.ZipFile, "open", no_inflate)
    with pytest.raises(RowReadError, match=r"decompress to 3\.\d MB, over the 1 MB limit"):
        read_inspect_eval(data, "big.eval", 1 << 20, default_limits())
    monkeypatch.undo()
    assert len(read_inspect_eval(data, "big.eval", 8 << 20, default_limits())["samples"]) == 5


# --------------------------------------------------------------------------- the command line

def test_cli_summary_of_an_eval_log_and_format_override(tmp_path, capsys):
    from viewer.cli import main

    name = "log_streaming.eval"
    _, samples = raw_log(name)
    s = sorted(samples, key=lambda x: (x["epoch"], str(x["id"]).zfill(20)))[1]
    assert main(["summary", str(DIR / name), "--json", "--row", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["format"] == "inspect" and out["reward"] == raw_reward(s) and out["turns"] == len(assistants(s))
    renamed = tmp_path / "streaming.log"  # --format works whatever the extension
    renamed.write_bytes((DIR / name).read_bytes())
    assert main(["summary", str(renamed), "--json", "--format", "inspect", "--row", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["reward"] == raw_reward(s)


# --------------------------------------------------------------------------- Inspect's own reader

PRODUCERS_PY = Path(__file__).resolve().parent.parent / ".venv-producers" / "bin" / "python"
# Inspect's own reader, in its own venv (scripts/setup_producers.sh: its dependencies must not move the app's)
_INSPECT_READS = """
import json, sys
from inspect_ai.log import read_eval_log
log = read_eval_log(sys.argv[1])
print(json.dumps([[s.id, s.epoch, sum(1 for m in s.messages if m.role == "assistant")] for s in log.samples]))
"""


@pytest.fixture(scope="module")
def inspect_ai_python() -> Path:
    if not PRODUCERS_PY.exists():
        from requires import need

        need(".venv-producers (inspect_ai)", f"{PRODUCERS_PY} not found", "`make setup` installs it")
    return PRODUCERS_PY


@pytest.mark.parametrize("name", JSON_LOGS + EVAL_LOGS)
def test_inspect_ai_package_agrees(name, inspect_ai_python):
    import subprocess

    out = subprocess.run([str(inspect_ai_python), "-c", _INSPECT_READS, str(DIR / name)], capture_output=True,
                         text=True, timeout=300, env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    assert out.returncode == 0, out.stderr[-2000:]
    theirs = json.loads(out.stdout)
    src = open_dataset(DIR / name)
    assert len(src.dataset) == len(theirs)
    for r, (sid, epoch, n_assistant) in enumerate(theirs):
        ro = src.rollout(r)
        assert key(ro.task) == (sid, epoch)
        assert len(ro.turns) == n_assistant


def test_eval_bytes_helper_reads_the_raw_zip():
    """read_inspect_eval takes the zip's bytes (the dataset reads the file once, size-capped)."""
    from viewer.sources.rowgroups import default_limits

    data = (DIR / "log_message_deduplication.eval").read_bytes()
    log = read_inspect_eval(data, "x.eval", 1 << 30, default_limits())
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert log["version"] == json.loads(z.read("header.json"))["version"] == 3


def test_an_uploaded_eval_log_is_kept_whole_and_opens_as_its_samples(tmp_path):
    """The upload intake unzipped a ``.eval`` into header.json + samples/*.json, which opened as nothing
    like the log; an Inspect log is stored as the one file it is."""
    from viewer.config import Settings
    from viewer.sources.upload import intake_upload

    name = EVAL_LOGS[1]
    _, samples = raw_log(name)
    got = intake_upload(DIR / name, tmp_path / "upload", Settings())
    assert got.root.name == name and got.root.read_bytes() == (DIR / name).read_bytes()
    src = open_dataset(got.root)
    assert src.format.name == "inspect" and len(src.dataset) == len(samples)
