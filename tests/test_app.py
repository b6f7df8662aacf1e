"""The app through its HTTP API (gradio_client on a launched server), as a script would use it."""
import html
import json

import pytest
from tv_payload import expand


def _outputs(result):
    # open_* endpoints return (header, status, table, tool, turns_plot, hist, task, problems, source rows,
    # sample picker, the two filter boxes and the turn list's note, turn_no, view, lp_plot, convo)
    keys = ["header", "status", "table", "tool", "turns_plot", "hist", "task", "problems", "rows", "sample",
            "f_trained", "f_low", "filter_note", "turn", "view", "lp_plot", "convo"]
    assert len(result) == len(keys)
    return dict(zip(keys, result))


def test_opens_bundled_sample(client):
    out = _outputs(client.predict("qwen3-tiny", "", api_name="/open_sample"))
    assert "qwen3-tiny" in out["header"] and "bundled Qwen3 tokenizer" in out["header"]
    rows = out["table"]["data"]
    kinds = [r[2] for r in rows]
    assert kinds[0].startswith("bookkeeping") and "agent" in kinds  # the title call is listed, not dropped
    payload = expand(out["view"])
    assert payload["prompt_len"] > 0 and len(payload["ids"]) == len(payload["t"]) == len(payload["k"])
    assert payload["trained"] is True and 1 in payload["k"]  # opens on a trained turn
    assert out["lp_plot"]["type"] == "plotly" and out["hist"]["type"] == "plotly"
    assert "Held-out tests" in out["task"] and "reward" in out["task"]
    assert (out["f_trained"], out["f_low"], out["filter_note"]) == (False, False, "")  # an open starts unfiltered


def test_select_turn_returns_that_turn(client):
    client.predict("qwen3-tiny", "", api_name="/open_sample")
    turn, view, lp_plot, convo = client.predict(3, api_name="/select_turn")
    payload = expand(view)
    assert turn == 3 and payload["turn"] == 3
    assert payload["trained"] is False and 1 not in payload["k"]  # final answer: no tool call, no gradient
    assert "Turn 3" in convo


def test_path_outside_root_is_refused_and_view_kept(client):
    client.predict("qwen3-tiny", "", api_name="/open_sample")
    out = _outputs(client.predict("/etc", "", api_name="/open_path"))
    assert "outside the allowed data folder" in out["status"]
    # gr.skip(): everything already on screen stays as it was
    assert out["header"]["__type__"] == "update" and out["view"]["__type__"] == "update"


def test_upload_of_hostile_capture_is_escaped(client, hostile_capture):
    from gradio_client import handle_file

    files = [handle_file(str(p)) for p in sorted(hostile_capture.iterdir())]
    out = _outputs(client.predict(files, "", api_name="/open_upload"))
    assert "<img" not in out["convo"] and "&lt;img src=x" in out["convo"]
    assert "<" not in out["view"]  # token data travels as inert JSON
    payload = expand(out["view"])
    joined = "".join(payload["t"][payload["prompt_len"]:])
    assert "<img src=x onerror=" in joined  # the exact text is still there for textContent


def test_truncated_upload_reports_problem_and_shows_the_rest(client, tmp_path):
    from gradio_client import handle_file

    src = (client_sample := __import__("viewer.config", fromlist=["SAMPLE_DIR"]).SAMPLE_DIR / "qwen3-tiny") / "trace.json"
    data = src.read_bytes()
    cut = tmp_path / "trace.json"
    cut.write_bytes(data[: int(len(data) * 0.8)])  # truncated mid-record
    out = _outputs(client.predict([handle_file(str(cut))], "", api_name="/open_upload"))
    assert "problem" in out["header"].lower()
    assert "trace.json" in out["problems"]
    assert len(out["table"]["data"]) >= 1  # complete records before the cut are still shown
    assert client_sample.exists()


NOT_RECORDS = ("trace.json: not proxy trace records: no record has any of request, response, completion_tokens, "
               "completion_token_ids, logprobs, per_token_logps, prompt_token_ids, loss_mask; format not recognised")


@pytest.mark.parametrize("bad,want", [
    (b"", "<td>trace.json</td><td></td><td>file is empty</td>"),  # a warning row in the Problems table
    (b"{not json", "trace.json: line 1, column 2: invalid JSON: Expecting property name enclosed in double quotes"),
    (b"[1, 2, 3]", NOT_RECORDS),
    (b'{"x": 1}', NOT_RECORDS),
])
def test_garbage_upload_gives_clear_message(client, tmp_path, bad, want):
    from gradio_client import handle_file

    f = tmp_path / "trace.json"
    f.write_bytes(bad)
    out = _outputs(client.predict([handle_file(str(f))], "", api_name="/open_upload"))
    text = "".join(v for k, v in out.items() if k in ("status", "problems", "header") and isinstance(v, str))
    assert want in text or html.escape(want, quote=False) in text or html.escape(want) in text, text[:600]


def test_ids_outside_vocab_are_shown_hatched_and_explained(client, tmp_path):
    from gradio_client import handle_file

    from captures import write_capture

    folder = write_capture(tmp_path / "oov", "hi", "Hello there", tool_command=None)
    rec = json.loads((folder / "trace.json").read_text())[0]
    rec["completion_token_ids"][1] = 999_999  # past Qwen3's 151,669 entries
    rec["completion_tokens"][1] = "token_id:999999"
    rec["logprobs"][1]["token"] = "token_id:999999"
    (folder / "trace.json").write_text(json.dumps([rec]))
    out = _outputs(client.predict([handle_file(str(folder / "trace.json"))], "", api_name="/open_upload"))
    payload = expand(out["view"])
    pos = payload["prompt_len"] + 1
    assert payload["oov"] == [pos] and payload["ids"][pos] == 999_999
    assert "999999" in payload["t"][pos]  # a visible placeholder, not an empty string
    assert "outside the tokenizer's vocabulary" in payload["note"]
