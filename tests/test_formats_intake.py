"""What every format shares at the door (issue 35): no catch-all route, "unknown format" names the
closest format and what ruled it out, ``--format`` whatever the extension, conversations from any
tool-call shape, and findings of a stand-in tokenizer's template labelled as such."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from viewer.sources import SourceError, load_source, open_dataset
from viewer.sources.derive import template_message

REPO = Path(__file__).resolve().parent.parent
HARBOR = "harbor-golden-traces/terminus_2__hello-world-invalid-json.trajectory.json"


def test_a_row_no_format_reads_is_refused_by_name_never_read_as_a_capture(tmp_path):
    """A JSONL of objects with a ``response`` key and nothing else known went to the capture reader,
    which read it as one trace of empty turns. It is refused, naming the closest format and what it lacks."""
    p = tmp_path / "rollouts.jsonl"
    rows = [{"id": i, "response": {"output": [{"type": "message", "content": "hi"}]}, "score": 1} for i in range(3)]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(SourceError) as e:
        load_source(p)
    msg = str(e.value)
    assert "unknown format" in msg and "fields found: id, response, score" in msg
    assert "closest known format: nemo-gym" in msg and "it lacks 'responses_create_params', 'reward'" in msg


def test_unknown_format_says_a_format_whose_fields_are_all_there_has_values_of_another_shape(tmp_path):
    p = tmp_path / "rows.jsonl"
    p.write_text(json.dumps({"messages": "not a list of messages"}) + "\n")
    with pytest.raises(SourceError, match=r"closest known format: messages .*'messages', but their values have "
                                          r"another shape"):
        open_dataset(p)


def test_format_names_the_reader_whatever_the_extension(tmp_path, realdata):
    """``--format NAME`` on a file whose extension says nothing (``.log``): the container is told by its bytes."""
    src = realdata / "harbor-golden-traces/terminus_2__hello-world-invalid-json.traces.json"
    odd = tmp_path / "traces.log"
    shutil.copyfile(src, odd)
    raw = json.loads(src.read_text())
    ds = open_dataset(odd, format="harbor")
    assert ds.format.name == "harbor" and len(ds.dataset) == len(raw)
    ro = ds.rollout(0)
    assert len(ro.turns) == sum(1 for m in raw[0]["conversations"] if m["role"] == "assistant")
    cli = subprocess.run([sys.executable, "-m", "viewer", "summary", str(odd), "--format", "harbor", "--json"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["format"] == "harbor"


def test_tool_calls_of_every_shape_become_openai_calls_templates_render(qwen3):
    """Inspect names the function as a string with arguments as an object; others put name/input at the
    top; some roles are not OpenAI's; content may be parts. Each renders, and what changed is said."""
    from viewer.tokenizer import render_prompt_text

    notes: list[str] = []
    msgs = [template_message(m, notes) for m in [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "list files"}, {"type": "image", "image": "x.png"}]},
        {"role": "assistant", "content": [{"type": "reasoning", "reasoning": "use ls"}, {"type": "text", "text": ""}],
         "tool_calls": [{"id": "c1", "function": "bash", "arguments": {"cmd": "ls"}, "type": "function"}]},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "a.py"}]},
        {"role": "agent", "content": "done", "tool_calls": [{"name": "submit", "input": {"answer": 1}}, "junk"]},
        {"role": "narrator", "content": "?"},
    ]]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert msgs[1]["content"] == "list files\n[image]"
    assert msgs[2]["reasoning_content"] == "use ls"
    assert msgs[2]["tool_calls"] == [{"id": "c1", "type": "function",
                                      "function": {"name": "bash", "arguments": {"cmd": "ls"}}}]
    assert msgs[4]["tool_calls"][0]["function"] == {"name": "submit", "arguments": {"answer": 1}}
    assert len(msgs[4]["tool_calls"]) == 1
    assert any("image content part" in n for n in notes)
    assert any("tool call 1 is not an object" in n for n in notes)
    assert any("'narrator'" in n for n in notes)
    text = render_prompt_text(qwen3, msgs, add_generation_prompt=True)
    assert '{"name": "bash", "arguments": {"cmd": "ls"}}' in text
    assert '{"name": "submit", "arguments": {"answer": 1}}' in text


def _drift(path: Path) -> dict:
    from viewer.drift.scan import scan
    from viewer.tokenizer import load_qwen3

    return scan([load_source(path)], load_qwen3())


def test_findings_of_the_stand_in_template_are_labelled_not_counted_as_the_rollouts_drift(tmp_path, realdata):
    """A GPT-4o conversation (Harbor's terminus-2 golden trajectory) rebuilt with the bundled Qwen3: Qwen3's
    template drops earlier <think> blocks, so every turn after the first "breaks" its prefix. That is the
    stand-in's doing: labelled, said in the header, not counted as drift. The same conversation named as a
    Qwen3 model's is its own template's drift and counts."""
    raw = json.loads((realdata / HARBOR).read_text())
    agent_steps = sum(1 for s in raw["steps"] if s["source"] == "agent")
    ro = load_source(realdata / HARBOR)
    assert ro.model == raw["agent"]["model_name"] == "openai/gpt-4o"
    assert ro.origin.tokenizer_stand_in and "stand-in artefacts" in ro.origin.tokenizer_note
    think = [p for p in ro.problems if "<think>" in p.message]
    assert len(think) == agent_steps - 1 and all(p.message.startswith("stand-in artefact") for p in think)
    res = _drift(realdata / HARBOR)
    broken = [t for t in res["turns"] if t["prefix"]["status"] == "broken"]
    assert len(res["turns"]) == agent_steps and len(broken) == agent_steps - 1
    assert all(t["prefix"]["cause"] == "think_dropped" and t["prefix"]["artefact"] == "stand-in template"
               for t in broken)
    assert res["totals"]["drifted_turns"] == 0 and res["totals"]["stand_in_artefacts"] == agent_steps - 1
    assert "think_dropped" not in res["totals"]["by_cause"]

    raw["agent"]["model_name"] = "Qwen/Qwen3-8B"
    own = tmp_path / "trajectory.json"
    own.write_text(json.dumps(raw))
    mine = load_source(own)
    assert not mine.origin.tokenizer_stand_in
    assert not any("stand-in" in p.message for p in mine.problems)
    res = _drift(own)
    assert res["totals"]["drifted_turns"] == agent_steps - 1 and res["totals"]["stand_in_artefacts"] == 0
    assert res["totals"]["by_cause"]["think_dropped"] == agent_steps - 1


def test_a_run_folder_opens_its_rollouts_and_names_the_side_files_left_out():
    """verifiers writes ``results.jsonl`` beside ``metadata.json``: the folder was refused ("unknown format")
    when metadata.json came first; its rollouts are the results' lines, and the side file is named."""
    run = REPO / "tests/data/realworld/verifiers/math-python--gpt-5-nano"
    lines = [x for x in (run / "results.jsonl").read_text().splitlines() if x.strip()]
    src = open_dataset(run)
    assert src.format.name == "verifiers" and len(src.dataset) == len(lines)
    assert "left out 1 file(s) that format does not read: metadata.json" in src.note


@pytest.mark.parametrize("command", ["drift", "lint", "search"])
def test_a_folder_no_format_reads_is_named_once_in_the_error(tmp_path, capsys, command):
    """``drift`` on a folder of JSON files no format reads said "F: no readable rollout (F: F: unknown format…"
    (the folder three times; ``lint`` twice). One line, the folder named once, exit code 2."""
    from viewer.cli import main

    folder = tmp_path / "unrelated"
    folder.mkdir()
    for name, row in {"x.json": {"a": 1}, "y.json": {"b": 2}}.items():
        (folder / name).write_text(json.dumps(row))
    code = main([command, str(folder), *(["needle"] if command == "search" else [])])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert err.count(str(folder)) == 1 and "unknown format; fields found: a" in err, err
    assert sorted(p.name for p in folder.iterdir()) == ["x.json", "y.json"]  # nothing left in it (search's index)


def test_a_file_counted_unread_that_is_not_one_rollout_is_one_line_naming_it(tmp_path, capsys):
    """A folder of OpenHands event lists with an array of rows among them: ``lint`` reads the event lists and
    says the other file once, by the folder's row and the file's name (the folder was said twice)."""
    from viewer.cli import main

    events = (REPO / "tests" / "data" / "realworld" / "openhands" / "basic.json").read_bytes()
    folder = tmp_path / "trajectories"
    folder.mkdir()
    for i in range(3):
        (folder / f"e{i}.json").write_bytes(events)
    (folder / "z.json").write_text(json.dumps([{"a": 1}, {"a": 2}]))
    code = main(["lint", str(folder)])
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("unreadable:")]
    assert code in (0, 1) and "rollouts: 3 (1 unreadable)" in out, out
    assert lines == [f"unreadable: {folder} row 3: z.json: holds 2 rows, where this folder's files hold one rollout "
                     "each (counted unread): open it by itself"], lines
