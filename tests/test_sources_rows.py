"""Row formats read through the same RowDataset (parquet row groups / JSONL lines) path the Hub uses.

Fixtures are written by the tests: Harbor rows and ATIF trajectories are the real golden
files, opencode rows are built from the real server-API messages, agentcap rows carry a
real-shaped OpenAI SSE stream; parquet files are written with the `datasets` library.
"""
import json
import os

import pytest

from _row_fixtures import (HARBOR, agentcap_rows, contract_rows, harbor_rows, opencode_rows, write_jsonl,
                           write_parquet)
from viewer.row_browser import Filters, browse_page
from viewer.sources import SourceError, SourceNotFound, load_source, open_dataset
from viewer.sources.agentcap import parse_sse
from viewer.config import Settings


def _end_id(tok):
    return tok.convert_tokens_to_ids("<|im_end|>")


def test_harbor_parquet_derived_view_matches_template_construction(realdata, tmp_path, qwen3):
    rows = harbor_rows()
    p = write_parquet(rows, tmp_path / "data" / "train-00000-of-00001.parquet")
    src = open_dataset(p)
    assert src.format.name == "harbor" and len(src.dataset) == 4
    ro = src.rollout(3)
    conv = [{"role": m["role"], "content": m["content"]} for m in rows[3]["conversations"]]
    asst = [i for i, m in enumerate(conv) if m["role"] == "assistant"]
    assert ro.format == "harbor" and ro.model == "openai/gpt-4o" and len(ro.turns) == len(asst) == 4
    for t, i in zip(ro.turns, asst):
        want_prompt = qwen3.encode(qwen3.apply_chat_template(conv[:i], tokenize=False, add_generation_prompt=True),
                                   add_special_tokens=False)
        full = qwen3.encode(qwen3.apply_chat_template(conv[:i + 1], tokenize=False), add_special_tokens=False)
        assert t.prompt_ids == want_prompt and t.prompt_source == "rerender" and t.output_source == "derived"
        assert full[:len(want_prompt)] == want_prompt and t.origin.derived.prompt_is_prefix
        assert t.output_ids[-1] == _end_id(qwen3) and full[len(want_prompt):len(want_prompt) + len(t.output_ids)] \
            == t.output_ids
        assert t.mask == [1] * len(t.output_ids) and t.trained
    # terminus-2 replies start with <think>: Qwen3 drops them from later prompts -> flagged per turn
    assert ro.turns[0].origin.derived.next_prompt_extends is False
    warn = [p for p in ro.problems if "renders differently" in p.message]
    assert len(warn) == 3 and "<think>" in warn[0].message and "row 3" in warn[0].file


def test_harbor_literal_token_columns_are_exact(realdata, tmp_path, qwen3):
    rows = harbor_rows("openhands__hello-world")
    row = dict(rows[1])
    n = sum(1 for m in row["conversations"] if m["role"] == "assistant")
    row["prompt_token_ids"] = [[1, 2, 3 + k] for k in range(n)]
    row["completion_token_ids"] = [[10 + k, 11, 12] for k in range(n)]
    row["logprobs"] = [[-0.5, -0.25, -0.125] for _ in range(n)]
    empty = dict(rows[0], prompt_token_ids=[], completion_token_ids=[], logprobs=[])
    p = write_parquet([row, empty], tmp_path / "lit.parquet")
    src = open_dataset(p)
    ro = src.rollout(0)
    assert [t.output_ids for t in ro.turns] == row["completion_token_ids"]
    assert all(t.prompt_source == "engine" and t.output_source == "engine" for t in ro.turns)
    assert ro.turns[1].logprobs == [-0.5, -0.25, -0.125] and ro.origin.token_view == "exact"
    ro0 = src.rollout(1)  # verify-or-skip: empty literal columns -> derived, and said so
    assert ro0.origin.token_view == "derived" and any("verify-or-skip" in p.message for p in ro0.problems)


def test_atif_trajectory_realdata(realdata, qwen3):
    p = HARBOR / "openhands__hello-world.trajectory.json"
    ro = load_source(p)
    traj = json.loads(p.read_text())
    agent_steps = [s for s in traj["steps"] if s["source"] == "agent"]
    assert ro.format == "atif" and len(ro.turns) == len(agent_steps)
    assert ro.turns[0].response["tool_calls"][0]["function"]["name"] == "str_replace_editor"
    assert ro.turns[0].tools and ro.turns[0].tools[0]["function"]["name"] == traj["agent"]["tool_definitions"][0][
        "function"]["name"]
    # the observation became a tool message in the next turn's prompt
    assert ro.turns[1].messages[-1] == {"role": "tool", "tool_call_id": "call_fake_1",
                                        "content": "File created successfully at: /app/hello.txt"}


def test_atif_with_token_ids_is_exact(realdata, tmp_path):
    traj = json.loads((HARBOR / "terminus_2__hello-world-invalid-json.trajectory.json").read_text())
    traj["schema_version"] = "ATIF-v1.5"
    agent = [s for s in traj["steps"] if s["source"] == "agent"]
    for k, s in enumerate(agent):
        s.setdefault("metrics", {}).update(prompt_token_ids=[1, 2, k], completion_token_ids=[5, 6, k],
                                           logprobs=[-1.0, -2.0, -3.0])
    f = tmp_path / "trajectory.json"
    f.write_text(json.dumps(traj))
    ro = load_source(f)
    assert ro.origin.token_view == "exact" and [t.output_ids[-1] for t in ro.turns] == list(range(len(agent)))
    assert ro.turns[0].logprobs == [-1.0, -2.0, -3.0]


def test_opencode_export_rows_dedupe_newest_batch(realdata, tmp_path):
    rows = opencode_rows()
    for p in (write_jsonl(rows, tmp_path / "train.jsonl"), write_parquet(rows, tmp_path / "pq" / "train.parquet")):
        src = open_dataset(p)
        assert src.format.name == "opencode"
        assert src.visible_rows() == [1, 2]  # the batch-1 copy of the first session is hidden
        page = browse_page(src, 0, 10)
        assert [r["row"] for r in page.rows] == [1, 2] and "1 older row(s) hidden" in page.note
        ro = load_source(p)  # default row: the first listed (newest versions only)
        assert ro.origin.row == 1
        ro = src.rollout(2)
        assert "showing the newest (batch_id 2, row 2)" in ro.problems[0].message
        assert ro.model == "anthropic/claude-haiku-4-5" and len(ro.turns) == 3
        t = ro.turns[1]
        assert t.response["tool_calls"][0]["function"]["name"] == "bash"
        assert json.loads(t.response["tool_calls"][0]["function"]["arguments"])["command"] == "ls -la"
        assert ro.turns[2].messages[-1]["role"] == "tool" and "total 24" in ro.turns[2].messages[-1]["content"]
        old = src.rollout(0)
        assert "has a newer version: row 2" in old.problems[0].message


def test_opencode_server_message_list_realdata(realdata):
    ro = load_source(realdata / "opencode-native-api" / "messages-after-2.json")
    assert ro.format == "opencode" and len(ro.turns) == 3 and ro.turns[0].response["content"] == "Hello from OpenCode"


def test_agentcap_sse_parsing():
    row = agentcap_rows()[0]
    r = parse_sse(json.loads(row["response"])["raw"])
    assert r.done and r.finish_reason == "tool_calls" and r.message["content"] == "Let me look."
    assert r.message["tool_calls"] == [{"id": "call_1", "type": "function",
                                        "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]
    cut = parse_sse("data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"a\"}}]}\n\ndata: {broken\n\n")
    assert cut.message["content"] == "a" and any("invalid JSON chunk" in p for p in cut.problems)
    assert any("without 'data: [DONE]'" in p for p in cut.problems)


def test_agentcap_parquet_rows(tmp_path, qwen3):
    write_parquet(agentcap_rows(), tmp_path / "data" / "train-claude-x.parquet")
    src = open_dataset(tmp_path)
    assert src.format.name == "agentcap"
    ro = src.rollout(0)
    assert len(ro.turns) == 1 and ro.turns[0].response["tool_calls"][0]["function"]["name"] == "bash"
    assert ro.summary["streamed"] is True and ro.turns[0].tools[0]["function"]["name"] == "bash"
    ro2 = src.rollout(1)  # non-streamed body; history holds the earlier call
    assert len(ro2.turns) == 2 and ro2.turns[1].response["content"] == "Done: a.txt"
    assert ro2.model == "Qwen/Qwen3-4B-Instruct-2507" and ro2.origin.tokenizer == "qwen3"
    assert browse_page(src, 0, 5, filters=Filters(task="t-ls")).total == 2


def test_contract_rows_are_exact(tmp_path, qwen3):
    rows = contract_rows(qwen3)
    p = write_parquet(rows, tmp_path / "contract.parquet")
    ro = load_source(p)
    t = ro.turns[0]
    assert ro.format == "openenv-contract" and t.prompt_source == "engine" and t.output_source == "engine"
    assert t.prompt_ids == rows[0]["prompt_token_ids"] and t.mask == [1, 1] and t.logprobs == [-0.1, -0.1]


def test_messages_jsonl(tmp_path):
    lines = [{"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "2+2?"},
                           {"role": "assistant", "content": "4"}], "model": "Qwen/Qwen3-8B", "reward": 1.0},
             [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
              {"role": "user", "content": "bye"}, {"role": "assistant", "content": "bye!"}]]
    p = write_jsonl(lines, tmp_path / "expert.jsonl")
    src = open_dataset(p)
    assert src.format.name == "messages"
    ro = src.rollout(1)
    assert len(ro.turns) == 2 and all(t.origin.derived.prompt_is_prefix for t in ro.turns)
    # Qwen3 renders the last assistant turn with an (empty) <think></think> block and drops it from history:
    # even without reasoning, what turn 0 generated is not what turn 1 is conditioned on.
    d = ro.turns[0].origin.derived
    assert d.next_prompt_extends is False and d.later_render_differs_at.part == "reply"
    assert d.later_render_differs_at.generated.startswith("<think>")
    assert "<think>" not in d.later_render_differs_at.later
    assert src.rollout(0).reward == 1.0
    page = browse_page(src, 0, 1, sort="turns", descending=True)
    assert page.rows[0]["row"] == 1 and page.total == 2 and page.pages == 2


def test_unknown_format_names_fields(tmp_path):
    p = write_jsonl([{"alpha": 1, "beta": [1, 2]}], tmp_path / "odd.jsonl")
    with pytest.raises(SourceError, match=r"unknown format; fields found: alpha, beta"):
        load_source(p)
    q = write_parquet([{"gamma": "x"}], tmp_path / "odd.parquet")
    with pytest.raises(SourceError, match=r"fields found: gamma"):
        load_source(q)


def test_a_plugin_detector_that_raises_is_named_not_swallowed(tmp_path, monkeypatch, caplog):
    """A row-format plug-in (a real entry point in the rollout_inspector.formats group) whose detector
    raises on these rows: the other formats still run, and "unknown format" names the plug-in and
    its error instead of hiding it (it was skipped in silence, issue 20)."""
    import logging
    import textwrap

    from viewer.sources import registry

    site = tmp_path / "site"
    (site / "ri_broken_format-0.1.dist-info").mkdir(parents=True)
    (site / "ri_broken_format.py").write_text(textwrap.dedent("""
        from viewer.sources.formats import RowFormat

        def _detect(columns, first):
            return first["conversation_id"] is not None  # KeyError on rows without it

        FORMAT = RowFormat("broken-fmt", "A plug-in with a bug", _detect, read=None, summarize=None)
    """))
    (site / "ri_broken_format-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: ri-broken-format\nVersion: 0.1\n")
    (site / "ri_broken_format-0.1.dist-info" / "entry_points.txt").write_text(
        "[rollout_inspector.formats]\nbroken = ri_broken_format\n")
    monkeypatch.syspath_prepend(str(site))
    registry._plugins.cache_clear()
    try:
        assert "broken-fmt" in [f.name for f in registry.all_formats()]
        p = write_jsonl([{"alpha": 1}], tmp_path / "odd.jsonl")
        with caplog.at_level(logging.WARNING, logger="viewer.sources.registry"), \
                pytest.raises(SourceError, match=r"unknown format.*Detectors that failed on these rows: "
                                                 r"broken-fmt: KeyError: 'conversation_id'"):
            load_source(p)
        assert "broken-fmt: KeyError" in caplog.text
        good = write_jsonl([{"messages": [{"role": "user", "content": "hi"}]}], tmp_path / "good.jsonl")
        assert load_source(good) is not None  # the built-in formats still detect
    finally:
        registry._plugins.cache_clear()


def test_bad_row_names_row_and_field_others_still_readable(realdata, tmp_path):
    rows = harbor_rows()[:2]
    bad = dict(rows[1], conversations="not a list")
    p = write_jsonl([rows[0], bad, "{broken"], tmp_path / "h.jsonl")
    p.write_text(p.read_text().replace('"{broken"', "{broken"))
    src = open_dataset(p)
    with pytest.raises(SourceError, match=r"row 1 \.conversations: expected a list of messages"):
        src.rollout(1)
    with pytest.raises(SourceError, match=r"row 2 \(line 3, column 2 of h.jsonl\): invalid JSON"):
        src.rollout(2)
    assert len(src.rollout(0).turns) == 1
    page = browse_page(src, 0, 10)
    assert [bool(r["error"]) for r in page.rows] == [False, False, True]
    with pytest.raises(SourceNotFound, match="row 9 is past the end"):
        src.rollout(9)


def test_huge_cells_are_refused_per_row(realdata, tmp_path):
    rows = harbor_rows()[:2]
    rows[0] = dict(rows[0], verifier_output="ok")
    rows[1] = dict(rows[1], verifier_output="x" * 3_000_000)
    settings = Settings(max_file_mb=2)
    for p in (write_jsonl(rows, tmp_path / "big.jsonl"), write_parquet(rows, tmp_path / "big.parquet")):
        src = open_dataset(p, settings)
        with pytest.raises(SourceError, match=r"row 1.*over the 2 MB cell limit"):
            src.rollout(1)
        assert src.rollout(0).turns


def test_parquet_page_reads_only_what_it_needs(realdata, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = harbor_rows()
    # incompressible cells (~20 kB per row, ~2 MB per file) so byte counts mean something
    big = [dict(rows[i % 4], task=f"task-{i}", verifier_output=os.urandom(10000).hex(), result=str(i % 2))
           for i in range(400)]
    table = pa.Table.from_pylist(big)
    for k in range(4):
        pq.write_table(table.slice(k * 100, 100), tmp_path / f"train-{k:05d}-of-00004.parquet", row_group_size=20)
    src = open_dataset(tmp_path)
    whole = sum(f.stat().st_size for f in tmp_path.glob("*.parquet"))
    first = browse_page(src, 0, 10)
    assert [r["row"] for r in first.rows] == list(range(10)) and first.bytes_read < whole / 4
    before = src.dataset.bytes_read
    ro = src.rollout(395)
    assert ro.task["task"] == "task-395" and src.dataset.bytes_read - before < whole / 4
    # filters on cheap columns scan only those columns
    before = src.dataset.bytes_read
    hit = browse_page(src, 0, 5, filters=Filters(task="task-39", reward_min=1.0))
    assert [r["row"] for r in hit.rows] == [39, 391, 393, 395, 397] and hit.total == 6
    assert src.dataset.bytes_read - before < whole / 2


@pytest.mark.parametrize("newer,older", [("10", "9"), ("v10", "v9"), ("2026-03-02", "2026-03-01")])
def test_string_versions_keep_the_newest_not_the_last(realdata, tmp_path, newer, older):
    """batch_id given as strings: the newest copy of a session is shown wherever it sits (before,
    every non-numeric version counted as 1.0 and the last row won)."""
    base = opencode_rows()[2]  # the full session
    rows = [{**base, "batch_id": newer}, {**base, "batch_id": older}]  # newest first, older last
    src = open_dataset(write_jsonl(rows, tmp_path / "train.jsonl"))
    assert src.visible_rows() == [0]
