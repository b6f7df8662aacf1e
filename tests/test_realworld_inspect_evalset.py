"""An Inspect eval set's log folder as ``inspect_ai`` writes it: ``eval_set(..., log_format="json")`` puts its
``.json`` logs beside two manifests with the same extension, ``logs.json`` (each log's header) and
``eval-set.json`` (the set's tasks), and a hidden ``.eval-set-id``.

The folder is written at test time by the real package (``.venv-producers``, installed by
scripts/setup_producers.sh), offline with Inspect's own ``mockllm/model``; the expected samples come from
what ``eval_set`` returned (Inspect's own reading of each log), never from our reader. Before the manifests
were named by the format (``RowFormat.side_files``), each read as one more row, an error ("not an Inspect
log"), beside the samples.
"""
from __future__ import annotations

import json
import subprocess
from collections import Counter

import pytest

from test_realworld_inspect import inspect_ai_python  # noqa: F401  (the fixture: Inspect's own venv)
from viewer.row_browser import browse_page
from viewer.sources import open_dataset

# Two tasks (2 and 3 samples), Inspect's mock model; prints, per log, Inspect's own view of its samples
_WRITE_EVAL_SET = """
import json, sys
from inspect_ai import Task, eval_set, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import match
from inspect_ai.solver import generate


@task
def add():
    return Task(dataset=[Sample(input="1+1?", target="2"), Sample(input="2+2?", target="4")],
                solver=generate(), scorer=match())


@task
def say():
    return Task(dataset=[Sample(input=f"Say {w}", target=w) for w in ("hi", "bye", "ok")],
                solver=generate(), scorer=match())


def reply(messages, tools, tool_choice, config):  # (usage given: else mockllm counts tokens with tiktoken's
    return ModelOutput(model="mockllm/model", choices=[ChatCompletionChoice(  # encoding, fetched from the net)
        message=ChatMessageAssistant(content="2", model="mockllm/model"), stop_reason="stop")],
        usage=ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2))


ok, logs = eval_set([add(), say()], log_dir=sys.argv[1], model=get_model("mockllm/model", custom_outputs=reply),
                    log_format="json", display="none")
assert ok, [str(log.error) for log in logs]
print(json.dumps([[log.eval.task, log.eval.model,
                   [[s.id, s.epoch, sum(1 for m in s.messages if m.role == "assistant")] for s in log.samples]]
                  for log in logs]))
"""


@pytest.fixture(scope="module")
def eval_set_folder(tmp_path_factory, inspect_ai_python):  # noqa: F811
    home = tmp_path_factory.mktemp("home")
    logs = tmp_path_factory.mktemp("eval-set") / "logs"
    out = subprocess.run([str(inspect_ai_python), "-c", _WRITE_EVAL_SET, str(logs)], capture_output=True,
                         text=True, timeout=600, cwd=home,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(home), "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    return logs, json.loads(out.stdout.strip().splitlines()[-1])


def test_the_folder_is_what_eval_set_writes(eval_set_folder):
    logs, theirs = eval_set_folder
    names = sorted(p.name for p in logs.iterdir())
    assert {"logs.json", "eval-set.json"} <= set(names)
    assert len([n for n in names if n.endswith(".json") and n not in ("logs.json", "eval-set.json")]) == len(theirs) == 2


def test_an_eval_set_folder_opens_as_its_samples_with_the_manifests_named(eval_set_folder):
    logs, theirs = eval_set_folder
    src = open_dataset(logs)
    assert src.format.name == "inspect"
    want = Counter((task.split("/")[-1], model, sid, epoch, turns)
                   for task, model, samples in theirs for sid, epoch, turns in samples)
    assert len(src.dataset) == sum(want.values()) == 5
    page = browse_page(src, 0, 100)
    assert [r for r in page.rows if r["error"]] == []
    assert "left out 2 file(s)" in src.note and "logs.json" in src.note and "eval-set.json" in src.note
    got = Counter()
    for r in range(len(src.dataset)):
        ro = src.rollout(r)
        assert not [p for p in ro.problems if p.severity == "error"], ro.problems
        got[((ro.task or {}).get("task", "").split("/")[-1], ro.model, ro.task["sample_id"], ro.task["epoch"],
             len(ro.turns))] += 1
    assert got == want


def test_another_json_file_among_the_logs_is_said_not_an_inspect_log(eval_set_folder, tmp_path):
    """A JSON file no format names, beside the logs (here the manifest under another name), is one row saying it is
    not an Inspect log and what it holds; it was read as a log "holding no samples"."""
    import shutil

    logs, theirs = eval_set_folder
    folder = tmp_path / "logs"
    shutil.copytree(logs, folder)
    (folder / "summary.json").write_bytes((logs / "logs.json").read_bytes())
    src = open_dataset(folder)
    bad = [r for r in browse_page(src, 0, 100).rows if r["error"]]
    assert len(src.dataset) == 5 + 1 and len(bad) == 1
    assert not {"version", "eval"} & set(json.loads((logs / "logs.json").read_text()))  # (keyed by the logs' names)
    assert "not an Inspect log: it has no `version` or `eval`" in bad[0]["error"]
    assert "holds no samples" not in bad[0]["error"]
